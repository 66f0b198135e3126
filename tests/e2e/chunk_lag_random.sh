#!/usr/bin/env bash
# ChunkKV, LagKV and RandomPress through `vkvector run` on the default model
# (~460 context tokens, VECTOR on top): each produces text, every (layer, KV
# head) keeps its scorer's count (n_retained x 2 + n_approximated = 2 n_kept,
# the paper's split), LagKV never evicts its sinks or its tail (the last whole
# partition and what follows), ChunkKV evicts whole chunks of 20 without
# VECTOR (a kept partial last chunk leaves its missing tokens to the next-best
# chunk, src/press/chunkkv.c) and the same tokens in every head, and
# RandomPress draws the same tiers on a second run (seed 42) and others
# under --press-seed 7 and under --press-seed 0.
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
model=models/vkvector-shakespeare.gguf
. "$(dirname "$0")/expect.sh"     # $tmp, the counters, ok and bad

context=$(head -c 1000 "$shared/data/tinyshakespeare.txt")
run() { "$vkv" run -m "$model" -p "$context" -n 8 --compression 0.5 "$@"; }

# dump.json press vector: the counts and the press's own rules.
check_dump() {
  python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); press = sys.argv[2]; vector = sys.argv[3] == "1"
n = d["n_context"]
assert d["press"] == press and n > 4 + 2 * 128, (d["press"], n)
chunks = n // 20 + (n % 20 > 0)
want = max(1, int(chunks * 0.5)) * 20 if press == "chunkkv" else int(n * 0.5)
for L in d["layers"]:
    evicted = set()
    for h in L["heads"]:
        t = h["tiers"]
        assert h["n_kept"] == want, (press, h["n_kept"], want)
        assert h["n_retained"] * 2 + h["n_approximated"] == 2 * want
        assert (h["n_approximated"] > 0) == vector
        gone = frozenset(j for j, c in enumerate(t) if c == "E")
        assert len(gone) == h["n_evicted"] == n - want - h["n_approximated"] // 2   # evicted: n - (K + a)
        evicted.add(gone)
        if press == "lagkv":
            tail0 = 4 + ((n - 4) // 128) * 128 - 128   # the last whole partition and the tokens after it
            assert not any(t[j] == "E" for j in list(range(4)) + list(range(tail0, n))), "lagkv evicted a sink or the tail"
        if press == "chunkkv" and not vector:
            # whole chunks, except that a kept partial last chunk leaves its
            # 20 - n % 20 missing tokens to the next-best chunk's earliest ones
            split = [c0 for c0 in range(0, n, 20) if len({t[j] == "E" for j in range(c0, min(c0 + 20, n))}) > 1]
            short = n % 20 and t[n - 1] != "E"
            assert len(split) == (1 if short else 0), "chunkkv split chunks %s" % split
            for c0 in split:
                assert t[c0:c0 + 20] == "R" * (20 - n % 20) + "E" * (n % 20), t[c0:c0 + 20]
    if press == "chunkkv":
        assert len(evicted) == 1, "chunkkv: the heads of a layer evicted different tokens"
PY
}

for press in lagkv chunkkv random; do
  run --press $press --vector --tier-dump "$tmp/$press.json" > "$tmp/$press.out" 2> "$tmp/$press.err" ||
    bad "$press --vector run: $(tail -3 "$tmp/$press.err")"
  [ -s "$tmp/$press.out" ] && ok || bad "$press: no text"
  grep -q "compression: $press, p_c 0.5, VECTOR" "$tmp/$press.err" && ok || bad "$press: no compression report"
  check_dump "$tmp/$press.json" $press 1 && ok || bad "$press: VECTOR tier dump"
done
run --press chunkkv --tier-dump "$tmp/chunks.json" > /dev/null 2> "$tmp/chunks.err" || bad "chunkkv run: $(tail -3 "$tmp/chunks.err")"
check_dump "$tmp/chunks.json" chunkkv 0 && ok || bad "chunkkv: eviction tier dump"
run --press random --vector --tier-dump "$tmp/again.json" > /dev/null 2>&1 || bad "random second run"
python3 -c 'import json, sys; a, b = (json.load(open(f))["layers"] for f in sys.argv[1:]); sys.exit(a != b)' \
  "$tmp/random.json" "$tmp/again.json" && ok || bad "random: a second run drew other tiers"
run --press random --vector --press-seed 7 --tier-dump "$tmp/seed7.json" > /dev/null 2>&1 || bad "random --press-seed 7 run"
python3 -c 'import json, sys; a, b = (json.load(open(f))["layers"] for f in sys.argv[1:]); sys.exit(a == b)' \
  "$tmp/random.json" "$tmp/seed7.json" && ok || bad "random: --press-seed 7 drew the default seed's tiers"
# 0 is a seed like any other (torch.manual_seed(0)), not the default's stand-in
run --press random --vector --press-seed 0 --tier-dump "$tmp/seed0.json" > /dev/null 2>&1 || bad "random --press-seed 0 run"
python3 -c 'import json, sys; a, b = (json.load(open(f))["layers"] for f in sys.argv[1:]); sys.exit(a == b)' \
  "$tmp/random.json" "$tmp/seed0.json" && ok || bad "random: --press-seed 0 drew the default seed's tiers"
"$vkv" run -m "$model" -p "$context" -n 1 --press chunkkv-bogus --compression 0.5 > /dev/null 2> "$tmp/bad.err" &&
  bad "an unknown chunkkv inner scorer was accepted" || { grep -q "unknown press 'chunkkv-bogus'" "$tmp/bad.err" && ok ||
  bad "unknown chunkkv inner: $(cat "$tmp/bad.err")"; }
# Compression during generation gathers a cache out of position order: ChunkKV is refused.
"$vkv" run -m "$model" -p "$context" -n 100 --press chunkkv --compress-every 64 --max-kv-tokens 200 > /dev/null \
  2> "$tmp/decode.err" && bad "chunkkv during generation was accepted" ||
  { grep -q "chunks of consecutive positions" "$tmp/decode.err" && ok || bad "chunkkv during generation: $(cat "$tmp/decode.err")"; }

echo "chunk_lag_random: $passes passed, $fails failed"
[ $fails -eq 0 ]
