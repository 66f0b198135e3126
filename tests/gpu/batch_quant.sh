#!/usr/bin/env bash
# test_batch on a quantized model: tools/gen_model.py's Qwen3-0.6B shape
# (QK-norm, GQA) at 1 layer, every matrix q4_K, no calibration (the VECTOR
# sequences are then plain KeyDiff).
# usage: batch_quant.sh TEST_BATCH
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
python=/usr/bin/python3   # Debian's numpy lives under Debian's interpreter
[ -x "$python" ] || python=python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" "$root/tools/gen_model.py" --preset qwen3-0.6b --layers 1 --vocab 512 --type q4_K -o "$tmp/q4_K.gguf" \
  > "$tmp/gen.log" 2>&1 || { tail -3 "$tmp/gen.log"; echo "FAIL: gen_model"; exit 1; }
"$1" "$tmp/q4_K.gguf"
