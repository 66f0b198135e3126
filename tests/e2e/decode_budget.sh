#!/bin/bash
# Compression during generation (--compress-every N --max-kv-tokens M;
# docs/ARCHITECTURE.md §2): a 4096-token generation on the default model
# with VECTOR never holds more than the budget's 2 M K+V rows in any (layer,
# KV head) and compresses as often as the budget demands; a budget the text
# never reaches changes nothing; eval-ppl scores a continuation under the
# budget; scorers it cannot run (KVzip, SnapKV with an interval under
# its window) and bad flags are refused.
set -u
vkv=$1 name=decode_budget
. "$(dirname "$0")/stories_vector.sh"
default_model=models/vkvector-shakespeare.gguf

out=$("$vkv" run -m "$default_model" -p "ROMEO:" -n 4096 --temp 0 --ctx 4200 --press keydiff --vector \
  --compress-every 64 --max-kv-tokens 512 2>&1 >/dev/null) || bad "4096 tokens: $(tail -3 <<<"$out")"
line=$(grep "^compression during generation:" <<<"$out")
python3 - "$line" <<'PY' && ok || bad "the budget: $line"
import re, sys
m = re.search(r"(\d+) compressions .* held: (\d+) of the budget's (\d+)", sys.argv[1])
n, held, budget = map(int, m.groups())
assert budget == 1024 and held <= budget, (held, budget)
# prompt (BOS + 3) + 4095 evaluated tokens past the first 512, 64 per compression
assert n >= (4 + 4095 - 512) // 64, n
PY
grep -q "^generation: 4096 tokens" <<<"$out" && ok || bad "4096 tokens not generated: $(grep generation <<<"$out")"

# A budget the run never reaches: the same tokens as the plain cache.
plain=$("$vkv" run -m "$model" -p "Once upon" -n 40 --temp 0 --print-ids 2>/dev/null)
budget=$("$vkv" run -m "$model" -p "Once upon" -n 40 --temp 0 --print-ids --calib "$tmp/s.vkcal" --press keydiff \
  --vector --compress-every 8 --max-kv-tokens 100 2>/dev/null)
[ -n "$plain" ] && [ "$plain" = "$budget" ] && ok || bad "an unreached budget changed the output: $plain /// $budget"

# eval-ppl under the budget: one row per method, finite KL.
out=$("$vkv" eval-ppl -m "$model" --calib "$tmp/s.vkcal" --text "$shared/data/tinyshakespeare.txt" --context 64 \
  --continuation 96 --windows 1 --press keydiff --compression 0 --both --compress-every 16 --max-kv-tokens 48 2>&1)
grep -qE "^keydiff +agnostic +0\.00 baseline/decode +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+" <<<"$out" &&
  grep -qE "^keydiff +agnostic +0\.00 VECTOR/decode +nan +[0-9.]+ +[0-9.]+ +[0-9.]+" <<<"$out" && ok ||
  bad "eval-ppl under a budget: $out"

# Refusals, each naming the problem.
r() { "$vkv" run -m "$model" -p "Once upon" -n 4 --calib "$tmp/s.vkcal" "$@" 2>&1; }
out=$(r --press snapkv --vector --compress-every 8 --max-kv-tokens 64); [ $? -ne 0 ] && grep -q "must be at least 64" <<<"$out" &&
  ok || bad "snapkv with an interval under its window: $out"
out=$(r --press kvzip --vector --compress-every 8 --max-kv-tokens 64); [ $? -ne 0 ] &&
  grep -q "state a compressed cache no longer holds" <<<"$out" && ok || bad "kvzip during generation: $out"
out=$(r --press keydiff --vector --compress-every 8); [ $? -eq 2 ] && grep -q "go together" <<<"$out" && ok || bad "no budget: $out"
out=$(r --press keydiff --vector --compress-every 8 --max-kv-tokens 8); [ $? -eq 2 ] && grep -q "larger than" <<<"$out" && ok ||
  bad "M <= N: $out"
out=$(r --compress-every 8 --max-kv-tokens 64); [ $? -eq 2 ] && grep -q "need --press\|needs --press" <<<"$out" && ok ||
  bad "no press: $out"

echo "decode_budget: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
