#!/usr/bin/env bash
# VECTOR end to end on stories260K (real weights): p_c = 0 reproduces the
# uncompressed logits bit for bit, p_a = 0 reproduces the eviction baseline bit
# for bit, the fused and materialised attention paths agree, the tier dump is
# consistent, bench vector runs, and bad inputs give clear errors.
set -u
vkv=$1 name=vector
other=${VKVECTOR_SHARED:-../shared}/models/synth-llama-f32.gguf
. "$(dirname "$0")/stories_vector.sh"

context=$(head -c 300 "$shared/data/tinyshakespeare.txt")
question="Who speaks first?"
run() { "$vkv" run -m "$model" -p "$context" --question "$question" -n 0 "$@"; }

run --dump-logits "$tmp/plain.bin" 2>/dev/null || bad "uncompressed run"
run --press keydiff --compression 0 --dump-logits "$tmp/pc0.bin" 2>/dev/null || bad "p_c = 0 run"
cmp -s "$tmp/plain.bin" "$tmp/pc0.bin" && ok || bad "p_c = 0 does not reproduce the uncompressed logits exactly"

# Query-agnostic (snapkv's own mode is query-aware): the question's logits
# come after compression, so they show what VECTOR changes.
for press in keydiff snapkv; do
  run() { "$vkv" run -m "$model" -p "$context" --question "$question" -n 0 --query-agnostic "$@"; }
  run --press $press --compression 0.5 --dump-logits "$tmp/base.bin" 2>/dev/null || bad "$press baseline run"
  run --press $press --compression 0.5 --vector --pa 0 --calib "$tmp/s.vkcal" --dump-logits "$tmp/pa0.bin" 2>/dev/null ||
    bad "$press --pa 0 run"
  cmp -s "$tmp/base.bin" "$tmp/pa0.bin" && ok || bad "$press: --pa 0 does not reproduce the eviction baseline exactly"
  run --press $press --compression 0.75 --vector --calib "$tmp/s.vkcal" --dump-logits "$tmp/fused.bin" 2>"$tmp/fused.err" ||
    bad "$press VECTOR run: $(cat "$tmp/fused.err")"
  run --press $press --compression 0.75 --vector --calib "$tmp/s.vkcal" --materialized --dump-logits "$tmp/mat.bin" 2>/dev/null ||
    bad "$press VECTOR materialised run"
  python3 - "$tmp/fused.bin" "$tmp/mat.bin" "$tmp/base.bin" <<'PY' && ok || bad "$press: fused and materialised paths disagree (or VECTOR changed nothing)"
import struct, sys
a = open(sys.argv[1], 'rb').read(); b = open(sys.argv[2], 'rb').read(); c = open(sys.argv[3], 'rb').read()
fa = struct.unpack('<%df' % (len(a) // 4), a); fb = struct.unpack('<%df' % (len(b) // 4), b)
num = sum((x - y) ** 2 for x, y in zip(fa, fb)); den = sum(x * x for x in fa)
sys.exit(0 if len(a) == len(b) and len(a) > 0 and num / den <= 1e-9 and a != c else 1)
PY
done
run() { "$vkv" run -m "$model" -p "$context" --question "$question" -n 0 "$@"; }
grep -q "approximated tier: mean R^2" "$tmp/fused.err" && ok || bad "no approximated-tier report: $(cat "$tmp/fused.err")"

# The tier dump: counts per head add up and match the tiers string.
run --press keydiff --compression 0.5 --vector --calib "$tmp/s.vkcal" --tier-dump "$tmp/dump.json" 2>/dev/null || bad "tier dump run"
python3 - "$tmp/dump.json" <<'PY' && ok || bad "tier dump inconsistent"
import json, sys
d = json.load(open(sys.argv[1]))
n = d["n_context"]
assert len(d["tokens"]) == n and d["n_layer"] == len(d["layers"]) == 5
for L in d["layers"]:
    for h in L["heads"]:
        t = h["tiers"]
        assert len(t) == n == len(h["scores"]) == len(h["residuals"])
        assert t.count("R") == h["n_retained"] and t.count("A") == h["n_approximated"] and t.count("E") == h["n_evicted"]
        assert h["n_retained"] * 2 + h["n_approximated"] == 2 * (n // 2)   # keys + values = 2 n_kept
PY

# bench vector runs all three decodes (tiered, same bytes, same tokens) and
# its byte line shows the equation: the tiered cache reads exactly the rows
# of the plain cache of n_kept tokens.
if VKVECTOR_MODEL="$model" "$vkv" bench vector --context 320 --decode 2 --reps 1 --vector --calib "$tmp/s.vkcal" --profile \
     > "$tmp/bench.log" 2>&1; then
  grep -qE "KV bytes read per decode step .*\(ratio 1\.000\)" "$tmp/bench.log" && ok || bad "bench vector byte line: $(cat "$tmp/bench.log")"
  grep -qE "decode ratio tiered / same-token plain +[0-9.]+" "$tmp/bench.log" && ok || bad "bench vector same-token line"
  grep -qE "attn_tiered_(split_)?fused_f(16|32) +[0-9.]+ +0\.0" "$tmp/bench.log" && ok || bad "bench vector --profile lists no tiered kernel"
else
  bad "bench vector: $(tail -5 "$tmp/bench.log")"
fi

expect() {
  local want=$1 pattern=$2; shift 3
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pattern" <<<"$err"; then
    bad "$* -> exit $rc (want $want), stderr: $(head -c 400 <<<"$err")"
  else ok; fi
}
expect 2 "--compression wants" -- "$vkv" run -m "$model" -p hi --press keydiff --compression 1
expect 2 "--compression wants" -- "$vkv" run -m "$model" -p hi --press keydiff --compression -0.1
expect 2 "too large for --compression" -- "$vkv" run -m "$model" -p hi --press keydiff --compression 0.5 --vector --pa 0.6
expect 2 "unknown press 'nope'" -- "$vkv" run -m "$model" -p hi --press nope --compression 0.5
expect 2 "need --press" -- "$vkv" run -m "$model" -p hi --compression 0.5
expect 1 "shorter than snapkv's observation window" -- "$vkv" run -m "$model" -p "short" --press snapkv --compression 0.5
expect 1 "made for|another model|this model has" -- "$vkv" run -m "$other" --ids 1,2,3,4,5,6,7,8 --press keydiff --compression 0.5 --vector --calib "$tmp/s.vkcal"
expect 1 "cannot|No such file|missing" -- "$vkv" run -m "$model" -p "$context" --press keydiff --compression 0.5 --vector --calib "$tmp/none.vkcal"

echo "vector: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
