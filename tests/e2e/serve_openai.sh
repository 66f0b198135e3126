#!/usr/bin/env bash
# `vkvector serve` on the default model through OpenAI's official Node client
# (serve_openai.mjs): concurrent streams equal to `vkvector run`, chat and
# completions, usage, the extension object, the error objects, an aborted
# stream, SIGTERM, and the bounded load test (tools/serve_load.mjs). The npm
# packages are pinned by tests/e2e/package-lock.json and installed with
# `npm ci` when absent; without node or them the test fails.
#
#   serve_openai.sh VKVECTOR
set -u
vkv=$1
here=$(cd "${BASH_SOURCE[0]%/*}" && pwd)
repo=$(cd "$here/../.." && pwd)
command -v node >/dev/null || { echo "serve_openai: FAIL: needs node >= 18 and npm (Debian: apt-get install nodejs npm)"; exit 1; }
if ! (cd "$here" && npm ls --depth=0 >/dev/null 2>&1); then
  echo "serve_openai: installing the pinned npm packages (npm ci in tests/e2e)"
  (cd "$here" && npm ci --no-audit --no-fund) || { echo "serve_openai: FAIL: 'npm ci' in tests/e2e failed"; exit 1; }
fi
"$vkv" devices >/dev/null 2>&1 || { echo "serve_openai: SKIP: no Vulkan device"; exit 77; }
node "$here/serve_openai.mjs" "$vkv" "$repo/models/vkvector-shakespeare.gguf" "$repo"
