#!/usr/bin/env bash
# The scorers that look at every query (observed, expected) and KVzip's
# reconstruction pass with its global selection, end to end on stories260K:
# p_c = 0 reproduces the uncompressed logits bit for bit (KVzip does not even
# repeat the context), p_a = 0 reproduces each eviction baseline bit for bit,
# KVzip keeps different counts per (layer, KV head) whose sum is exactly
# kvpress's global count, and the fused and materialised VECTOR paths agree.
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
model=$shared/models/stories260K-f32.gguf
[ -f "$model" ] || { echo "capture_presses: $model not found (set VKVECTOR_SHARED)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

if ! "$vkv" calib -m "$model" --corpus "$shared/data/tinyshakespeare.txt" --byte-tokens --tokens 2048 --seq-len 256 \
     --ridge 1e-4 -o "$tmp/s.vkcal" > "$tmp/calib.log" 2>&1; then
  echo "FAIL: calibration: $(tail -3 "$tmp/calib.log")"; exit 1
fi

context=$(head -c 300 "$shared/data/tinyshakespeare.txt")
run() { "$vkv" run -m "$model" -p "$context" --question "Who speaks first?" -n 0 "$@" >/dev/null; }

run --dump-logits "$tmp/plain.bin" 2>/dev/null || bad "uncompressed run"
run --press kvzip --compression 0 --dump-logits "$tmp/pc0.bin" 2>/dev/null || bad "kvzip p_c = 0 run"
cmp -s "$tmp/plain.bin" "$tmp/pc0.bin" && ok || bad "kvzip: p_c = 0 does not reproduce the uncompressed logits exactly"

for press in observed expected kvzip; do
  run --press $press --compression 0.5 --dump-logits "$tmp/$press.bin" 2>"$tmp/base.err" ||
    bad "$press baseline run: $(tail -2 "$tmp/base.err")"
  cmp -s "$tmp/$press.bin" "$tmp/plain.bin" && bad "$press: compression changed nothing" || ok
done
cmp -s "$tmp/observed.bin" "$tmp/expected.bin" && bad "observed and expected selected the same tokens" || ok
# KVzip's global selection through VECTOR's per-row counts, with nothing approximated: the baseline.
run --press kvzip --compression 0.5 --vector --pa 0 --calib "$tmp/s.vkcal" --dump-logits "$tmp/pa0.bin" 2>/dev/null ||
  bad "kvzip --pa 0 run"
cmp -s "$tmp/kvzip.bin" "$tmp/pa0.bin" && ok || bad "kvzip: --pa 0 does not reproduce the eviction baseline exactly"

# KVzip with VECTOR: per-head counts from the global threshold; keys + values
# add up to 2 (N - int(N p_c)) over the model; fused = materialised.
run --press kvzip --compression 0.75 --vector --calib "$tmp/s.vkcal" --tier-dump "$tmp/kvzip.json" \
  --dump-logits "$tmp/fused.bin" 2>"$tmp/kvzip.err" || bad "kvzip VECTOR run: $(tail -2 "$tmp/kvzip.err")"
run --press kvzip --compression 0.75 --vector --calib "$tmp/s.vkcal" --materialized --dump-logits "$tmp/mat.bin" \
  2>/dev/null || bad "kvzip VECTOR materialised run"
python3 - "$tmp/kvzip.json" "$tmp/fused.bin" "$tmp/mat.bin" <<'PY' && ok || bad "kvzip: tier dump or VECTOR paths inconsistent"
import json, struct, sys
d = json.load(open(sys.argv[1]))
n = d["n_context"]
heads = [h for L in d["layers"] for h in L["heads"]]
N = len(heads) * n
kept = N - int(N * 0.75)
for h in heads:
    t = h["tiers"]
    assert t.count("R") == h["n_retained"] and t.count("A") == h["n_approximated"] and t.count("E") == h["n_evicted"]
assert sum(2 * h["n_retained"] + h["n_approximated"] for h in heads) == 2 * kept, "not kvpress's global count"
assert len({h["n_retained"] + h["n_approximated"] for h in heads}) > 1, "every head kept the same count"
a = open(sys.argv[2], 'rb').read(); b = open(sys.argv[3], 'rb').read()
fa = struct.unpack('<%df' % (len(a) // 4), a); fb = struct.unpack('<%df' % (len(b) // 4), b)
num = sum((x - y) ** 2 for x, y in zip(fa, fb)); den = sum(x * x for x in fa)
assert len(a) == len(b) > 0 and num / den <= 1e-9
PY

echo "capture_presses: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
