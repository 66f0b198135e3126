#!/usr/bin/env bash
# AdaKV's head-adaptive budgets on the default model (press/adakv.c,
# docs/ARCHITECTURE.md §2): run generates text; from the tier dump, every
# layer keeps the uniform total H n_kept, each KV head at least its safeguard
# int(0.2 n_kept) (exactly that many forced scores), each head's kept set is
# its share of the layer's top H n_kept (ties by head, then position); VECTOR's
# layer pool (the default) holds H n_kept + a_S with a_S = floor(p_a H n); the
# row scope caps each head's a at its own budget; without --vector the tiers
# are the scorer's; compression during generation refuses it. CriticalKV
# (press/critical.c) generates with VECTOR on top, each head keeping n_kept and
# its first stage forced; so do kvpress's registry's compositions over
# ExpectedAttention (adakv-expected, critical-expected, critical-adakv-expected).
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
model=models/vkvector-shakespeare.gguf
. "$(dirname "$0")/expect.sh"     # $tmp, the counters, ok and bad

prompt=$(head -c 800 "$shared/data/tinyshakespeare.txt")
run() { "$vkv" run -m "$model" -p "$prompt" "$@"; }

check() { # dump, scope (row / layer / none)
  python3 - "$1" "$2" <<'PY'
import json, math, sys
d = json.load(open(sys.argv[1])); scope = sys.argv[2]
n, H, pc = d["n_context"], d["n_kv_head"], d["compression"]
n_kept = max(1, int(n * (1 - pc))); n_safe = int(n_kept * 0.20)
pa = d["approx_ratio"] if d["vector"] else 0.0
def key(x): return math.inf if x is None else x
def floor15(x): return math.floor(float("%.15g" % x))
for L in d["layers"]:
    heads = L["heads"]; assert len(heads) == H
    assert sum(h["n_kept"] for h in heads) == H * n_kept, [h["n_kept"] for h in heads]
    flat = sorted(((-key(h["scores"][j]), r * n + j) for r, h in enumerate(heads) for j in range(n)))
    top = {i for _, i in flat[:H * n_kept]}
    for r, h in enumerate(heads):
        assert h["n_kept"] >= n_safe, (h["n_kept"], n_safe)
        assert sum(s is None for s in h["scores"]) == n_safe, "forced scores"
        assert h["n_kept"] == sum(r * n + j in top for j in range(n))
        held = [t != "E" for t in h["tiers"]]
        assert all(held[j] for j in range(n) if r * n + j in top), "a kept token left the pool"
    ret = [h["n_retained"] for h in heads]; apx = [h["n_approximated"] for h in heads]
    if scope == "none":
        assert ret == [h["n_kept"] for h in heads] and apx == [0] * H, (ret, apx)
    elif scope == "row":
        for h in heads:
            a = min(floor15(pa * n), h["n_kept"], n - h["n_kept"])
            assert (h["n_retained"], h["n_approximated"]) == (h["n_kept"] - a, 2 * a), (h["n_kept"], a)
    else:
        a = min(floor15(pa * H * n), H * n_kept, H * n - H * n_kept)
        assert (sum(ret), sum(apx)) == (H * n_kept - a, 2 * a), (sum(ret), sum(apx), a)
print(len(d["layers"]), "layers of", H, "KV heads,", n, "tokens: n_kept", n_kept, "safeguard", n_safe)
PY
}

out=$(run --press adakv-snapkv --compression 0.5 --vector -n 16 --tier-dump "$tmp/layer.json" 2>"$tmp/err")
[ $? -eq 0 ] && [ ${#out} -gt ${#prompt} ] && ok || bad "adakv-snapkv --vector: no text: $(tail -3 "$tmp/err")"
grep -q "^--- compression: adakv-snapkv, p_c 0.5, VECTOR, query-aware" "$tmp/err" && grep -q "head maps, layer pool:" "$tmp/err" &&
  ok || bad "adakv-snapkv: no layer pool line: $(grep -i "compression\|pool" "$tmp/err")"
check "$tmp/layer.json" layer && ok || bad "adakv-snapkv, the layer pool's counts"
run --press adakv-snapkv --compression 0.75 --vector --vector-pool row -n 0 --tier-dump "$tmp/row.json" >/dev/null 2>"$tmp/err" &&
  check "$tmp/row.json" row && ok || bad "adakv-snapkv, the row pool's counts: $(tail -2 "$tmp/err")"
run --press adakv-keydiff --compression 0.9 -n 0 --tier-dump "$tmp/base.json" >/dev/null 2>"$tmp/err" &&
  check "$tmp/base.json" none && ok || bad "adakv-keydiff baseline counts: $(tail -2 "$tmp/err")"

out=$(run --press adakv-keydiff --compression 0.5 -n 8 --compress-every 64 --max-kv-tokens 200 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "shares a layer's budget" <<<"$out" && ok || bad "adakv during generation ($rc): $out"

# CriticalKV's counts in a tier dump: each head keeps n_kept, stage 1's picks forced
critical_counts() {
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); n, pc = d["n_context"], d["compression"]
n_kept = max(1, int(n * (1 - pc))); first = int((1 - pc) * n * 0.5)
for L in d["layers"]:
    for h in L["heads"]:
        assert h["n_kept"] == n_kept and h["n_retained"] + h["n_approximated"] // 2 == n_kept, h["n_kept"]
        assert sum(s is None for s in h["scores"]) >= first, "the first stage is forced"
PY
}
out=$(run --press critical-snapkv --compression 0.5 --vector -n 16 --tier-dump "$tmp/crit.json" 2>"$tmp/err")
[ $? -eq 0 ] && [ ${#out} -gt ${#prompt} ] && ok || bad "critical-snapkv --vector: no text: $(tail -3 "$tmp/err")"
critical_counts "$tmp/crit.json" && ok || bad "critical-snapkv's counts"
# CriticalAdaKV: AdaKV's counts (the layer's total, each head's safeguard) with VECTOR's layer pool
out=$(run --press critical-adakv-snapkv --compression 0.5 --vector -n 16 --tier-dump "$tmp/cada.json" 2>"$tmp/err")
[ $? -eq 0 ] && [ ${#out} -gt ${#prompt} ] && ok || bad "critical-adakv-snapkv --vector: no text: $(tail -3 "$tmp/err")"
python3 - "$tmp/cada.json" <<'PY' && ok || bad "critical-adakv-snapkv's counts"
import json, sys
d = json.load(open(sys.argv[1])); n, H, pc = d["n_context"], d["n_kv_head"], d["compression"]
n_kept = max(1, int(n * (1 - pc))); n_safe = int(n_kept * 0.20)
assert d["vector_pool"]["scope"] == "layer", d["vector_pool"]
for L in d["layers"]:
    heads = L["heads"]
    assert sum(h["n_kept"] for h in heads) == H * n_kept
    for h in heads:   # the kept set is exactly the forced scores
        assert h["n_kept"] >= n_safe and sum(s is None for s in h["scores"]) == h["n_kept"], h["n_kept"]
PY

# kvpress's registry's ExpectedAttention compositions, whose wrappers capture every query of the
# prefill: adakv-expected keeps AdaKV's counts, and its inner scores (p + 1e-2) ||v|| against
# expected's p ||v|| give p = 1e-2 e / (a - e), the expected attention: positive, at most 1 in all
# per head, and not uniform (it read the captured queries; zero statistics would give 1 / (n - 4)).
run --press expected --compression 0.5 -n 0 --tier-dump "$tmp/exp.json" >/dev/null 2>"$tmp/err" ||
  bad "expected: $(tail -2 "$tmp/err")"
run --press adakv-expected --compression 0.5 -n 0 --tier-dump "$tmp/aexp.json" >/dev/null 2>"$tmp/err" &&
  check "$tmp/aexp.json" none && ok || bad "adakv-expected's counts: $(tail -2 "$tmp/err")"
python3 - "$tmp/exp.json" "$tmp/aexp.json" <<'PY' && ok || bad "adakv-expected: not ExpectedAttention with epsilon 1e-2"
import json, sys
e, a = (json.load(open(f)) for f in sys.argv[1:3])
for Le, La in zip(e["layers"], a["layers"]):
    for he, ha in zip(Le["heads"], La["heads"]):
        p = [1e-2 * x / (y - x) for x, y in zip(he["scores"], ha["scores"]) if x is not None and y is not None and y < 1e38]
        assert len(p) > len(he["scores"]) // 2 and min(p) > 0 and sum(p) <= 1 + 1e-3, (len(p), min(p), sum(p))
        assert max(p) > 1.05 * min(p), (min(p), max(p))
PY
out=$(run --press critical-expected --compression 0.5 --vector -n 8 --tier-dump "$tmp/cexp.json" 2>"$tmp/err")
[ $? -eq 0 ] && [ ${#out} -gt ${#prompt} ] && ok || bad "critical-expected --vector: no text: $(tail -3 "$tmp/err")"
critical_counts "$tmp/cexp.json" && ok || bad "critical-expected's counts"
run --press critical-adakv-expected --compression 0.75 -n 0 --tier-dump "$tmp/caexp.json" >/dev/null 2>"$tmp/err" ||
  bad "critical-adakv-expected: $(tail -2 "$tmp/err")"
python3 - "$tmp/caexp.json" <<'PY' && ok || bad "critical-adakv-expected's counts"
import json, sys
d = json.load(open(sys.argv[1])); n, H, pc = d["n_context"], d["n_kv_head"], d["compression"]
n_kept = max(1, int(n * (1 - pc))); n_safe = int(n_kept * 0.20)
for L in d["layers"]:
    heads = L["heads"]
    assert sum(h["n_kept"] for h in heads) == H * n_kept
    for h in heads:
        assert h["n_kept"] >= n_safe and sum(s is None for s in h["scores"]) == h["n_kept"], h["n_kept"]
PY

out=$(run --press critical-keydiff --compression 0.5 -n 8 --compress-every 64 --max-kv-tokens 200 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "projected through W_o" <<<"$out" && ok || bad "critical during generation ($rc): $out"

echo "adakv: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
