#!/bin/bash
# VECTOR's joint per-layer maps on the device (--vector-map joint;
# docs/ARCHITECTURE.md §2): for keydiff, snapkv (query-aware) and kvzip (a
# global selection), every KV head of a layer holds the same tiers, and those
# equal the selection recomputed here in Python from the tier dump: the
# heads' mean score (in f32, heads in order) picks the pool, the heads' mean
# residual under the joint map its 2a approximated tokens; the byte equation
# holds; the fused attention (one run per map block) gives the materialised
# path's logits; p_a = 0 is the per-layer baseline bit for bit; a calibration
# without joint maps and a bad value are refused with a clear message.
set -u
vkv=$1 name=vector_joint
. "$(dirname "$0")/stories_vector.sh"

context=$(head -c 700 "$shared/data/tinyshakespeare.txt")
run() { "$vkv" run -m "$model" -p "$context" --question "Who?" -n 0 --calib "$tmp/s.vkcal" "$@"; }

for press in keydiff snapkv kvzip; do
  run --press $press --compression 0.75 --vector --vector-map joint --tier-dump "$tmp/$press.json" \
    2>"$tmp/$press.err" >/dev/null || { bad "$press run: $(tail -2 "$tmp/$press.err")"; continue; }
  grep -q "joint maps, row pool: scorer's count K" "$tmp/$press.err" && ok || bad "$press: no joint pool line"
  python3 - "$tmp/$press.json" <<'PY' && ok || bad "$press: the device's joint tiers break the rules"
import json, math, struct, sys
d = json.load(open(sys.argv[1]))
assert d["vector_pool"]["map"] == "joint", d["vector_pool"]
n, pa, H = d["n_context"], d["approx_ratio"], d["n_kv_head"]
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
def mean(xs):                      # vector_head_mean: f32 sum in head order, one division
    s = 0.0
    for x in xs: s = f32(s + x)
    return f32(s / len(xs))
def key(x): return math.inf if x is None else x    # null scores: forced keeps (+inf)
tot_k = tot_a = 0
for L in d["layers"]:
    hs = L["heads"]
    assert all(h["tiers"] == hs[0]["tiers"] for h in hs), "heads differ"
    assert all(h["scores"] == hs[0]["scores"] for h in hs), "pooled scores not repeated"
    K = hs[0]["n_kept"]
    assert all(h["n_kept"] == K for h in hs)
    a = min(math.floor(float("%.15g" % (pa * n))), K, n - K)
    s = [key(x) for x in hs[0]["scores"]]
    pool = sorted(range(n), key=lambda j: (-s[j], j))[:K + a]
    eps = [mean([h["residuals"][j] for h in hs]) for j in pool]
    apx = {j for _, j in sorted(zip(eps, pool))[:2 * a]}
    want = "".join("A" if j in apx else "R" if j in pool else "E" for j in range(n))
    assert hs[0]["tiers"] == want, (L["layer"], hs[0]["tiers"], want)
    tot_k += H * K; tot_a += H * a
vp = d["vector_pool"]
assert (vp["kept"], vp["a"], vp["keys"], vp["values"]) == (tot_k, tot_a, tot_k + tot_a, tot_k - tot_a), vp
PY
done

# Fused (one attention run per block of the joint map) against materialised.
run --press keydiff --compression 0.75 --vector --vector-map joint -n 4 --temp 0 --dump-logits "$tmp/fused.f32" \
  >/dev/null 2>&1 && run --press keydiff --compression 0.75 --vector --vector-map joint -n 4 --temp 0 --materialized \
  --dump-logits "$tmp/mat.f32" >/dev/null 2>&1 || bad "logit runs"
python3 - "$tmp/fused.f32" "$tmp/mat.f32" <<'PY' && ok || bad "fused and materialised joint logits differ"
import struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
assert len(a) == len(b) > 0
x, y = struct.unpack("%df" % (len(a) // 4), a), struct.unpack("%df" % (len(b) // 4), b)
d = max(abs(p - q) for p, q in zip(x, y))
assert d < 1e-3, d
PY

# p_a = 0 with joint maps is the per-layer eviction baseline, bit for bit.
text="$shared/data/tinyshakespeare.txt"
out=$("$vkv" eval-ppl -m "$model" --calib "$tmp/s.vkcal" --text "$text" --context 200 --continuation 16 --windows 1 \
  --press keydiff --compression 0.5 --both --pa 0 --vector-map joint 2>&1)
python3 - <<PY && ok || bad "p_a 0 joint is not the per-layer baseline: $out"
import re
rows = {m.group(1): m.group(2) for m in re.finditer(r"^keydiff +\S+ +0\.50 (\S+) +\S+ +\S+ +\S+ +(\S+)", """$out""", re.M)}
assert rows["baseline/joint"] == rows["VECTOR/joint"], rows
PY

# One session running joint then per-head maps: its per-head rows are those of
# a session that never saw a joint map (the cache's maps follow each compression).
grid() {
  "$vkv" eval-ppl -m "$model" --calib "$tmp/s.vkcal" --text "$text" --context 200 --continuation 16 --windows 2 \
    --press keydiff --compression 0.75 --both "$@" 2>&1 | grep -E "^keydiff " | awk '{print $4, $8}'
}
both=$(grid --vector-map joint,head) head_only=$(grid)
grep -q "^VECTOR/joint " <<<"$both" && [ "$(grep -v /joint <<<"$both")" = "$head_only" ] && ok ||
  bad "per-head rows after joint ones differ: $both /// $head_only"

# A calibration without joint maps, and a bad value.
"$vkv" calib -m "$model" --corpus "$text" --byte-tokens --tokens 2048 --seq-len 256 --ridge 1e-4 --joint off \
  -o "$tmp/nj.vkcal" >/dev/null 2>&1 || bad "calibration without joint maps"
out=$("$vkv" run -m "$model" -p "$context" -n 0 --calib "$tmp/nj.vkcal" --press keydiff --compression 0.5 --vector \
  --vector-map joint 2>&1); [ $? -ne 0 ] && grep -q "with joint maps (this one has none" <<<"$out" && ok ||
  bad "joint maps missing from the calibration: $out"
out=$(run --press keydiff --compression 0.5 --vector --vector-map joints 2>&1); [ $? -eq 2 ] &&
  grep -q "head or joint" <<<"$out" && ok || bad "--vector-map joints: $out"

echo "vector_joint: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
