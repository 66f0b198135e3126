#!/bin/bash
# Compression during generation by kvpress's DecodingPress rule (--decoding
# kvpress; docs/ARCHITECTURE.md §2) on the default model: the prompt is never
# compressed; every --compress-every N decoding steps each (layer, KV head) is
# compressed to exactly --target-kv-tokens T tokens (2 T K+V rows; with VECTOR
# T + a keys in at most 2 T rows), for keydiff, knorm, streamingllm and tova,
# and snapkv (an interval of at least its window of 64, and its compression
# the prefill's on the same tokens); --decoding budget is the default rule;
# the refusals; every compression checked against its reference. Short
# generations. ObservedAttention, ExpectedAttention and
# PyramidKV: decode_attention.sh.
set -u
vkv=$1
. "$(dirname "$0")/decode_common.sh"
run() { "$vkv" run -m "$model" -p "$prompt" --temp 0 --print-ids "$@"; }
kvpress_line() { grep "^compression during generation (kvpress's rule" "$1"; }

# The prompt's tokens, from the plain run.
plain=$(run -n 10 2>/dev/null)
n_prompt=$(run -n 1 2>&1 >/dev/null | sed -n 's/^prompt: *\([0-9]*\) tokens.*/\1/p')
[ "${n_prompt:-0}" -gt 24 ] && ok || bad "the prompt must be longer than the target 24: ${n_prompt:-?} tokens"

# 9 decoding steps, fewer than the interval 16: nothing compressed, the whole
# prompt kept (its rows above the target's), the plain run's tokens.
ids=$(run -n 10 --press keydiff --decoding kvpress --compress-every 16 --target-kv-tokens 24 2>"$tmp/a")
line=$(kvpress_line "$tmp/a")
python3 - "$line" "$n_prompt" <<'PY' && ok || bad "short generation: $line"
import re, sys
line, p = sys.argv[1], int(sys.argv[2])
m = re.search(r"(\d+) compressions .* (\d+) checks .* the most K\+V rows any held: (\d+)", line)
n, skipped, most = map(int, m.groups())
assert (n, skipped) == (0, 0) and most == 2 * (p + 9), (n, skipped, most, p)
PY
[ -n "$plain" ] && [ "$ids" = "$plain" ] && ok || bad "no compression yet, yet other tokens: $plain /// $ids"

# 39 steps: checks after steps 16 and 32, each compressing the prompt and the
# tokens since (the 16th included) to exactly 24 tokens per head.
for press in keydiff knorm streamingllm tova; do
  run -n 40 --press $press --decoding kvpress --compress-every 16 --target-kv-tokens 24 >/dev/null 2>"$tmp/b" ||
    bad "$press: $(tail -2 "$tmp/b")"
  line=$(kvpress_line "$tmp/b")
  python3 - "$line" "$n_prompt" <<'PY' && ok || bad "$press, 39 steps: $line"
import re, sys
line, p = sys.argv[1], int(sys.argv[2])
m = re.search(r"every 16 decoding steps\): (\d+) compressions .* (\d+) checks .* held (\d+) to (\d+) tokens and "
              r"(\d+) to (\d+) K\+V rows \(target 24 tokens, 48 rows\); the most K\+V rows any held: (\d+)", line)
n, skipped, t0, t1, r0, r1, most = map(int, m.groups())
assert (n, skipped, t0, t1, r0, r1) == (2, 0, 24, 24, 48, 48), m.groups()
assert most == 2 * (p + 16), (most, p)   # the uncompressed prompt and 16 steps, before the first compression
PY
done

# VECTOR: T + a keys per head, never more than the eviction baseline's 2 T rows.
for press in keydiff streamingllm; do
  run -n 40 --press $press --vector --decoding kvpress --compress-every 16 --target-kv-tokens 24 >/dev/null 2>"$tmp/c"
  line=$(kvpress_line "$tmp/c")
  python3 - "$line" <<'PY' && ok || bad "$press, VECTOR: $line"
import re, sys
m = re.search(r"(\d+) compressions .* held (\d+) to (\d+) tokens and (\d+) to (\d+) K\+V rows", sys.argv[1])
n, t0, t1, r0, r1 = map(int, m.groups())
assert n == 2 and 24 < t0 <= t1 and r1 <= 48, m.groups()
PY
done

# StreamingLLM and TOVA under the budget rule too.
for press in streamingllm tova; do
  run -n 30 --press $press --vector --compress-every 8 --max-kv-tokens 32 >/dev/null 2>"$tmp/t"
  grep -qE "^compression during generation: [1-9][0-9]* compressions .* held: ([0-9]|[1-5][0-9]|6[0-4]) of the budget's 64" \
    "$tmp/t" && ok || bad "$press under the budget: $(grep -i "compression during\|error" "$tmp/t")"
done

# SnapKV: its window's 64 queries are the 64 steps since the check before, so
# the interval is 64. After 99 steps one check, at step 64, has compressed the
# prompt and the 64 steps to exactly 80 tokens per head: the tokens after it
# are those of a prefill SnapKV compression of the same prompt + 64 tokens to 80.
gen=$(run -n 100 --press snapkv --decoding kvpress --compress-every 64 --target-kv-tokens 80 2>"$tmp/s")
grep -q "every 64 decoding steps): 1 compressions.* held 80 to 80 tokens and 160 to 160 K+V rows" "$tmp/s" && ok ||
  bad "snapkv, 99 steps: $(kvpress_line "$tmp/s") $(grep -i error "$tmp/s")"
prompt_ids=$("$vkv" tokenize -m "$model" --text "$prompt" --bos)
read -r n_ctx ratio < <(python3 -c "import sys; n = $n_prompt + 64; print(n, '%.4f' % (1 - 80.5 / n))")
ids=$(echo $prompt_ids $(cut -d' ' -f1-64 <<<"$gen") | tr ' ' ,)
after=$("$vkv" run -m "$model" --ids "$ids" --temp 0 --print-ids -n 36 --press snapkv --compression "$ratio" \
  --query-agnostic 2>"$tmp/p")
grep -q "snapkv, p_c .*, query-agnostic, $n_ctx context tokens" "$tmp/p" && [ -n "$after" ] &&
  [ "$after" = "$(cut -d' ' -f65-100 <<<"$gen")" ] && ok || bad "snapkv against the prefill's: $gen /// $after"
run -n 100 --press snapkv --vector --decoding kvpress --compress-every 64 --target-kv-tokens 80 >/dev/null 2>"$tmp/s"
python3 - "$(kvpress_line "$tmp/s")" <<'PY' && ok || bad "snapkv, VECTOR: $(kvpress_line "$tmp/s") $(grep -i error "$tmp/s")"
import re, sys
m = re.search(r"(\d+) compressions .* held (\d+) to (\d+) tokens and (\d+) to (\d+) K\+V rows", sys.argv[1])
n, t0, t1, r0, r1 = map(int, m.groups())
assert n == 1 and 80 < t0 <= t1 and r1 <= 160, m.groups()
PY
run -n 200 --press snapkv --vector --compress-every 64 --max-kv-tokens 128 >/dev/null 2>"$tmp/t"
grep -qE "^compression during generation: [1-9][0-9]* compressions .* held: ([0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-6]) of the budget's 256" \
  "$tmp/t" && ok || bad "snapkv under the budget: $(grep -i "compression during\|error" "$tmp/t")"

# kvpress's defaults (interval 512, target 2048): nothing happens in 10 tokens.
ids=$(run -n 10 --press keydiff --decoding kvpress 2>"$tmp/d")
grep -q "every 512 decoding steps): 0 compressions.*(target 2048 tokens" "$tmp/d" && [ "$ids" = "$plain" ] && ok ||
  bad "defaults: $(kvpress_line "$tmp/d") /// $ids"

# --decoding budget is the default: the same tokens and the budget's report.
a=$(run -n 30 --press keydiff --compress-every 8 --max-kv-tokens 32 2>"$tmp/e")
b=$(run -n 30 --press keydiff --compress-every 8 --max-kv-tokens 32 --decoding budget 2>"$tmp/f")
[ -n "$a" ] && [ "$a" = "$b" ] && grep -q "^compression during generation: .* held: [0-9]* of the budget's 64" "$tmp/f" &&
  ok || bad "--decoding budget: $a /// $b"

# eval-ppl's continuation as decoding steps: one finite row per method.
out=$("$vkv" eval-ppl -m "$model" --text ../shared/data/tinyshakespeare.txt --context 32 --continuation 40 --windows 1 \
  --press keydiff --compression 0 --both --decoding kvpress --compress-every 16 --target-kv-tokens 24 2>&1)
grep -qE "^keydiff +agnostic +0\.00 baseline/kvpress +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+" <<<"$out" &&
  grep -qE "^keydiff +agnostic +0\.00 VECTOR/kvpress +nan +[0-9.]+ +[0-9.]+ +[0-9.]+" <<<"$out" && ok ||
  bad "eval-ppl, kvpress's rule: $out"

# Refusals, each naming the problem.
r() { "$vkv" run -m "$model" -p "Once" -n 4 "$@" 2>&1; }
out=$(r --press keydiff --decoding kvpress --max-kv-tokens 64); [ $? -eq 2 ] && grep -q "target-kv-tokens" <<<"$out" &&
  ok || bad "--max-kv-tokens with kvpress's rule: $out"
out=$(r --press keydiff --compress-every 8 --max-kv-tokens 64 --target-kv-tokens 8); [ $? -eq 2 ] &&
  grep -q "needs --decoding kvpress" <<<"$out" && ok || bad "--target-kv-tokens with the budget: $out"
out=$(r --press snapkv --decoding kvpress --compress-every 16); [ $? -ne 0 ] && grep -q "must be at least 64" <<<"$out" &&
  ok || bad "snapkv with an interval under its window: $out"
out=$(r --press kvzip --decoding kvpress); [ $? -ne 0 ] && grep -q "state a compressed cache no longer holds" <<<"$out" &&
  ok || bad "kvzip during generation: $out"

echo "decode_kvpress: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
