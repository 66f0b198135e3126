#!/bin/bash
# Quantized KV caches (--kv-type q8_0|q4_0, --k-type/--v-type; the row format
# of docs/ARCHITECTURE.md §2) on the default model: run generates through
# them and sizes the cache by their rows; eval-ppl measures them against an
# f16 reference, the f16 cache itself at KL ~0, q4_0 worse than q8_0;
# compression keeps its f16 working cache and compacts into quantized tiers
# whose bytes follow the row sizes, also when compressing during generation;
# --materialized over them and unknown types are refused.
set -u
vkv=$1
model=models/vkvector-shakespeare.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shared=${VKVECTOR_SHARED:-../shared}
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# head_dim 48: f16 rows 96 bytes, q8_0 52 (32 + 16 elements, a scale each), q4_0 28.
for spec in "--kv-type q8_0:K q8_0, V q8_0: 52 + 52" "--kv-type q4_0:K q4_0, V q4_0: 28 + 28" \
            "--k-type f16 --v-type q8_0:K f16, V q8_0: 96 + 52" "--kv-type q4_0 --k-type f16:K f16, V q4_0: 96 + 28"; do
  args=${spec%%:*} want=${spec#*:}
  # shellcheck disable=SC2086 # args holds several options
  out=$("$vkv" run -m "$model" -p "ROMEO:" -n 32 --temp 0 $args 2>&1) || { bad "run $args: $(tail -3 <<<"$out")"; continue; }
  grep -q "^KV cache: .*($want bytes a row" <<<"$out" && grep -q "^generation: 32 tokens" <<<"$out" && ok ||
    bad "run $args: $(grep -E '^(KV cache|generation)' <<<"$out")"
done

ev() { "$vkv" eval-ppl -m "$model" --text "$shared/data/tinyshakespeare.txt" --start-byte 1003856 --context 192 \
  --continuation 32 --windows 1 --press keydiff --compression 0 --markdown "$@" 2>&1; }
kl() { sed -nE 's/^\| keydiff \| agnostic \| 0\.00 \| baseline \| [^|]+\| [^|]+\| [^|]+\| ([0-9.]+) \|.*/\1/p' <<<"$1"; }
f16=$(kl "$(ev)") q8=$(kl "$(ev --kv-type q8_0)") q4=$(kl "$(ev --kv-type q4_0)")
python3 - "$f16" "$q8" "$q4" <<'PY' && ok || bad "eval-ppl KL: f16 '$f16' q8_0 '$q8' q4_0 '$q4'"
import sys
f16, q8, q4 = map(float, sys.argv[1:])
assert f16 < 1e-4 and f16 < q8 < q4, (f16, q8, q4)
PY

# Quantized tiers: compacted from the f16 working cache; the byte equation in
# bytes (q8_0 rows are 52/96 of f16's, so the same tokens take 52/96 of the bytes).
bytes() { sed -nE 's/^bytes: .*total ([0-9.]+) MiB.*/\1/p' <<<"$1"; }
prompt=$(head -c 4000 "$shared/data/tinyshakespeare.txt")
comp() { "$vkv" run -m "$model" -p "$prompt" -n 8 --temp 0 --press keydiff --compression 0.5 --vector "$@" 2>&1; }
f16=$(comp) || bad "f16 VECTOR: $f16"
q8=$(comp --kv-type q8_0) || bad "q8_0 VECTOR: $q8"
grep -q "^KV tiers:   K q8_0, V q8_0: 52 + 52 bytes a row" <<<"$q8" && ok || bad "q8_0 tiers line: $(grep KV <<<"$q8")"
python3 - "$(bytes "$f16")" "$(bytes "$q8")" <<'PY' && ok || bad "tier bytes: f16 $(bytes "$f16") q8_0 $(bytes "$q8")"
import sys
f16, q8 = map(float, sys.argv[1:])
assert abs(q8 / f16 - 52 / 96) < 0.01, q8 / f16
PY
# Compression during generation over q8_0 tiers: gathered back to f16 (kv_convert),
# re-scored and compacted again; the budget holds after every token.
out=$("$vkv" run -m "$model" -p "ROMEO:" -n 300 --temp 0 --press keydiff --vector --compress-every 16 \
  --max-kv-tokens 64 --kv-type q8_0 2>&1) || bad "q8_0 tiers during generation: $(tail -3 <<<"$out")"
grep -qE "^compression during generation: ([2-9][0-9]|1[0-9]) compressions .* held: 128 of the budget's 128 \(6\.5 KiB" \
  <<<"$out" && grep -q "^generation: 300 tokens" <<<"$out" && ok ||
  bad "q8_0 tiers during generation: $(grep -E '^(compression during|generation)' <<<"$out")"
# The residual VECTOR ranks by is that of the values the tiers will hold: close to f16's, never equal;
# the dump counts the tiers' bytes.
comp --tier-dump "$tmp/f16.json" >/dev/null && comp --kv-type q8_0 --tier-dump "$tmp/q8.json" >/dev/null &&
python3 - "$tmp/f16.json" "$tmp/q8.json" <<'PY' && ok || bad "q8_0 residuals / dump bytes"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["kv_type"] == "f16" and b["kv_type"] == "q8_0", (a["kv_type"], b["kv_type"])
n = same = 0
num = den = 0.0
for la, lb in zip(a["layers"], b["layers"]):
    for ha, hb in zip(la["heads"], lb["heads"]):
        for x, y in zip(ha["residuals"], hb["residuals"]):
            if x is None or y is None:
                continue
            n += 1; same += x == y; num += abs(x - y); den += abs(x)
    ret = sum(h["n_retained"] for h in lb["heads"]); apx = sum(h["n_approximated"] for h in lb["heads"])
    assert lb["bytes_retained"] == 104 * ret and lb["bytes_approximated"] == 52 * apx, lb["layer"]
assert n > 1000 and same < n / 100 and 0 < num / den < 0.05, (n, same, num / den)
PY
out=$(comp --kv-type q8_0 --materialized 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q -- "--materialized reads f16 or f32 tiers" <<<"$out" && ok || bad "q8_0 materialized: exit $rc, $out"
out=$("$vkv" run -m "$model" -p "ROMEO:" -n 4 --kv-type q5_0 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--kv-type" <<<"$out" && ok || bad "--kv-type q5_0: exit $rc, $out"

echo "kv_quant: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
