#!/bin/bash
# Compression during generation (docs/ARCHITECTURE.md §2) of the scorers that
# read attention: ObservedAttention (the decoding step's query),
# ExpectedAttention (the queries since the last compression) and PyramidKV
# (SnapKV's window with a budget per layer), under both rules, with and
# without VECTOR, on the default model:
#   - kvpress's rule: every compression leaves exactly the target T per head
#     (VECTOR: T + a keys in at most 2 T rows); PyramidKV's layers keep its
#     budgets at kvpress's ratio for T (recomputed here), which differ across
#     the layers and sum to L T, or under a small T SnapKV's count and tokens;
#   - the budget rule: every compression leaves M - N per head, the rows
#     never pass 2 M; PyramidKV's budgets are capped at M - N;
#   - every compression's scores equal the scorer's reference on the host
#     copies of the gathered layer and its queries (VKVECTOR_CHECK_DECODE,
#     decode_common.sh).
set -u
vkv=$1
. "$(dirname "$0")/decode_common.sh"
run() { "$vkv" run -m "$model" -p "$1" --temp 0 --print-ids "${@:2}"; }

# Observed and expected: kvpress's rule, checks after steps 16 and 32, 24 tokens per head each time.
for press in observed expected; do
  for vector in "" --vector; do
    run "$prompt" -n 40 --press $press $vector --decoding kvpress --compress-every 16 --target-kv-tokens 24 \
      >/dev/null 2>"$tmp/k" || bad "$press $vector, kvpress's rule: $(tail -2 "$tmp/k")"
    python3 - "$(grep "^compression during generation (kvpress's rule" "$tmp/k")" "$vector" <<'PY' &&
import re, sys
m = re.search(r"every 16 decoding steps\): (\d+) compressions .* (\d+) checks .* held (\d+) to (\d+) tokens and "
              r"(\d+) to (\d+) K\+V rows \(target 24 tokens, 48 rows\)", sys.argv[1])
n, skipped, t0, t1, r0, r1 = map(int, m.groups())
assert (n, skipped) == (2, 0), m.groups()
if sys.argv[2]:
    assert 24 < t0 <= t1 and r1 <= 48, m.groups()   # T + a keys, never more than the baseline's 2 T rows
else:
    assert (t0, t1, r0, r1) == (24, 24, 48, 48), m.groups()
PY
      ok || bad "$press $vector, kvpress's rule: $(grep -i "compression during\|error" "$tmp/k")"

    # the budget rule: M = 32, N = 8: compressed to 24 pairs, never more than 64 rows
    run "$prompt" -n 30 --press $press $vector --compress-every 8 --max-kv-tokens 32 >/dev/null 2>"$tmp/b" ||
      bad "$press $vector, budget: $(tail -2 "$tmp/b")"
    python3 - "$(grep "^compression during generation:" "$tmp/b")" "$vector" <<'PY' &&
import re, sys
m = re.search(r"(\d+) compressions .* held: (\d+) of the budget's 64 .* held (\d+) to (\d+) tokens and (\d+) to (\d+) "
              r"K\+V rows \(target 24 tokens\)", sys.argv[1])
n, most, t0, t1, r0, r1 = map(int, m.groups())
assert n >= 4 and most <= 64, m.groups()   # 45-token prompt + 29 steps past 32, one compression every 8
if sys.argv[2]:
    assert 24 < t0 <= t1 and r1 <= 48, m.groups()
else:
    assert (t0, t1, r0, r1) == (24, 24, 48, 48), m.groups()
PY
      ok || bad "$press $vector, budget: $(grep -i "compression during\|error" "$tmp/b")"
  done
done

# ExpectedAttention needs more queries since the last compression than its 4 sinks.
out=$(run "Once" -n 4 --press expected --compress-every 4 --max-kv-tokens 16 2>&1); [ $? -ne 0 ] &&
  grep -q "must be more than 4" <<<"$out" && ok || bad "expected with 4 queries: $out"

# PyramidKV under T / beta < its window (T = 80): kvpress's fall-back to SnapKV,
# every layer keeps T and the tokens are SnapKV's.
a=$(run "$prompt" -n 100 --press pyramidkv --decoding kvpress --compress-every 64 --target-kv-tokens 80 2>"$tmp/f")
b=$(run "$prompt" -n 100 --press snapkv --decoding kvpress --compress-every 64 --target-kv-tokens 80 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] &&
  grep -q "^compression during generation, tokens per (layer, KV head) after the last compression: 80 80 80 80 80 80$" \
  "$tmp/f" && ok || bad "pyramidkv's fall-back: $(grep -i "compression during\|error" "$tmp/f") /// $a /// $b"

# PyramidKV: its budgets leave SnapKV's uniform count only when T / beta >= the
# window (T >= 1280): a prompt of 1400 tokens.
long=$(head -c 3150 ../shared/data/tinyshakespeare.txt)
n_prompt=$("$vkv" tokenize -m "$model" --text "$long" --bos | wc -w)
[ "$n_prompt" -eq 1400 ] && ok || bad "the long prompt is $n_prompt tokens, not 1400"
# The per-layer check: python3 pyramid.py RUN_STDERR N TARGET RULE VECTOR.
cat >"$tmp/pyramid.py" <<'PY'
import math, re, sys
from decimal import Decimal
text, n, target, rule, vector = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]

def kvpress_ratio(n, t):   # DecodingPress._find_target_compression_ratio
    if n <= t: return 0.0
    r, lo, hi = 1.0 - t / n, 0.0, 1.0
    for _ in range(20):
        k = int(n * (1 - r))
        if k == t: break
        if k > t: lo, r = r, (r + hi) / 2
        else: hi, r = r, (lo + r) / 2
    return r

def layer_budget(l, L, n, ratio, w=64, beta=20):   # PyramidKVPress.get_layer_budget
    cap = w + n * (1 - ratio)
    mn = (cap - w) / beta
    mx = (cap - w) * 2 - mn
    if mx >= n - w:
        mx = n - w
        mn = (cap - w) * 2 - mx
    if not (n >= mx >= mn >= w): return round(n * (1 - ratio))
    return round(mx - l * (mx - mn) / (L - 1))

L = 6
r = kvpress_ratio(n, target)
want = [layer_budget(l, L, n, r) for l in range(L)]
if rule == "budget": want = [min(b, target) for b in want]
got = re.search(r"tokens per \(layer, KV head\) after the last compression: (.*)", text).group(1).split()
assert all("-" not in g for g in got), got   # every head of a layer keeps the same count
got = [int(g) for g in got]
assert len(set(want)) > 1, want              # a pyramid, not the uniform fall-back
if rule == "kvpress": assert sum(want) == L * target, want
if not vector:
    assert got == want, (got, want)
else:   # VECTOR: each head's b + a keys, a from its own ratio b / n
    def a_of(b):
        p = 1 - b / n
        pa = min(p / 2, (1 - p) / 2)
        return min(math.floor(float("%.15g" % (pa * n))), b, n - b)
    assert got == [b + a_of(b) for b in want], (got, want)
m = re.search(r"(\d+) compressions .* held (\d+) to (\d+) tokens and (\d+) to (\d+) K\+V rows", text)
n_c, t0, t1, r0, r1 = map(int, m.groups())
assert n_c == 1 and r1 <= 2 * max(want) and r0 <= 2 * min(want), m.groups()
PY
# kvpress's rule: one check after 64 steps, n = 1464 tokens per head, T = 1280.
for vector in "" --vector; do
  run "$long" --ctx 2048 -n 70 --press pyramidkv $vector --decoding kvpress --compress-every 64 \
    --target-kv-tokens 1280 >/dev/null 2>"$tmp/p" || bad "pyramidkv $vector, kvpress's rule: $(tail -2 "$tmp/p")"
  python3 "$tmp/pyramid.py" "$(cat "$tmp/p")" 1464 1280 kvpress "$vector" && ok ||
    bad "pyramidkv $vector, kvpress's rule: $(grep -i "compression during\|error" "$tmp/p")"
done

# The budget rule: M = 1536, N = 256, a 1600-token prompt: one compression when
# the cache is full (n = 1536), to PyramidKV's budgets for M - N = 1280, capped at it.
longer=$(head -c 3600 ../shared/data/tinyshakespeare.txt)
for vector in "" --vector; do
  run "$longer" --ctx 2048 -n 8 --press pyramidkv $vector --compress-every 256 --max-kv-tokens 1536 >/dev/null \
    2>"$tmp/q" || bad "pyramidkv $vector, budget: $(tail -2 "$tmp/q")"
  grep -q "^compression during generation: 1 compressions .* held: [0-9]* of the budget's 3072" "$tmp/q" && ok ||
    bad "pyramidkv $vector, budget: $(grep -i "compression during\|error" "$tmp/q")"
  python3 "$tmp/pyramid.py" "$(cat "$tmp/q")" 1536 1280 budget "$vector" && ok ||
    bad "pyramidkv $vector, budget's layers: $(grep -i "compression during\|error" "$tmp/q")"
done

echo "decode_attention: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
