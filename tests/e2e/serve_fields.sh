#!/usr/bin/env bash
# OpenAI's request fields on `vkvector serve` (serve_fields.mjs): logprobs,
# echo against `vkvector perplexity`, penalties, logit_bias, seed, and every
# refused field, through OpenAI's Node client. The npm packages are pinned by
# tests/e2e/package-lock.json and installed with `npm ci` when absent.
#
#   serve_fields.sh VKVECTOR
set -u
vkv=$1
here=$(cd "${BASH_SOURCE[0]%/*}" && pwd)
repo=$(cd "$here/../.." && pwd)
command -v node >/dev/null || { echo "serve_fields: FAIL: needs node >= 18 and npm (Debian: apt-get install nodejs npm)"; exit 1; }
if ! (cd "$here" && npm ls --depth=0 >/dev/null 2>&1); then
  echo "serve_fields: installing the pinned npm packages (npm ci in tests/e2e)"
  (cd "$here" && npm ci --no-audit --no-fund) || { echo "serve_fields: FAIL: 'npm ci' in tests/e2e failed"; exit 1; }
fi
"$vkv" devices >/dev/null 2>&1 || { echo "serve_fields: SKIP: no Vulkan device"; exit 77; }
node "$here/serve_fields.mjs" "$vkv" "$repo/models/vkvector-shakespeare.gguf"
