#!/usr/bin/env bash
# The project's own model (models/): vkvector's GPU perplexity matches the
# numbers the training recipe stored (within 1%) and tokenizes the held-out
# text exactly as the recipe did; the model uses long context (the same
# held-out predictions are better with 1024 tokens of context than with 32);
# `vkvector run`
# without -m generates from it.
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
model=models/vkvector-shakespeare.gguf
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

out=$("$vkv" perplexity -m "$model" --eval-json models/vkvector-shakespeare.eval.json --text-root "$shared" --tolerance 0.01 2>&1)
if [ $? -eq 0 ]; then ok; else bad "perplexity against the recipe: $out"; fi
echo "$out"

heldout=$(python3 -c "import json;print(json.load(open('models/vkvector-shakespeare.eval.json'))['heldout_start_byte'])")
# Same held-out predictions with their whole 1024-token window before them and
# with only 32 tokens of context: the long context must help.
out=$("$vkv" perplexity -m "$model" --text "$shared/data/tinyshakespeare.txt" --start-byte "$heldout" --ctx 1024 \
      --max-windows 3 --ablation 256:32 2>&1)
echo "$out"
full=$(sed -n 's/.*mean nll \([0-9.]*\) with the full window.*/\1/p' <<<"$out")
cut=$(sed -n 's/.*, \([0-9.]*\) with only 32 tokens.*/\1/p' <<<"$out")
if [ -n "$full" ] && [ -n "$cut" ] && python3 -c "import sys; sys.exit(0 if $full < $cut else 1)"; then ok
else bad "long context does not help: $full (full window) vs $cut (32 tokens)"; fi

text=$("$vkv" run -p "ROMEO:" -n 24 --seed 3 2>"${TMPDIR:-/tmp}/vkv_default_err")
if [ $? -eq 0 ] && [ ${#text} -gt 20 ] && grep -q "generation:" "${TMPDIR:-/tmp}/vkv_default_err"; then ok
else bad "vkvector run without -m: '$text' $(cat "${TMPDIR:-/tmp}/vkv_default_err")"; fi

echo "default_model: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
