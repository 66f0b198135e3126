#!/usr/bin/env bash
# vkvector serve's HTTP front through OpenAI's official Node client (the npm
# package `openai`) against fake_serve, the front in front of a fake engine
# (serve_api.mjs says what is checked). No GPU is used.
#
#   serve_api.sh FAKE_SERVE
#
# Skips (77) without node; the npm packages (tests/e2e/package-lock.json) are
# installed with `npm ci` when `openai` is absent.
set -u
fake=$1
here=$(cd "${BASH_SOURCE[0]%/*}" && pwd)
node=$(command -v node || true)
if [ -z "$node" ]; then
  echo "serve_api: SKIP: needs node >= 18 and npm (Debian: apt-get install nodejs npm)"
  exit 77
fi
if [ ! -f "$here/node_modules/openai/package.json" ]; then
  echo "serve_api: installing the pinned npm packages (npm ci in tests/e2e)"
  if ! (cd "$here" && npm ci --no-audit --no-fund); then
    echo "serve_api: FAIL: 'npm ci' in tests/e2e failed (tools/setup.sh runs it on a machine with access to npm)"
    exit 1
  fi
fi
exec "$node" "$here/serve_api.mjs" "$fake"
