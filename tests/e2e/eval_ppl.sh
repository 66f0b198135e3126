#!/bin/bash
# eval-ppl's sweeps on stories260K: --pa LIST gives one VECTOR row per p_a and a
# table of KL with a column per p_a, whose p_a = 0 column is the eviction
# baseline's KL exactly; --vector-pool LIST gives one row per scope; each press
# runs in its own query mode unless overridden; bad lists are refused.
set -u
vkv=$1 name=eval_ppl
. "$(dirname "$0")/stories_vector.sh"
ev() { "$vkv" eval-ppl -m "$model" --text "$shared/data/tinyshakespeare.txt" --context 96 --continuation 16 --windows 2 \
  --calib "$tmp/s.vkcal" "$@"; }

out=$(ev --press keydiff,snapkv --compression 0.5 --both --pa 0,0.1,0.25 --markdown 2>&1) || bad "pa sweep: $out"
printf '%s\n' "$out" > "$tmp/sweep.md"
python3 - "$tmp/sweep.md" <<'PY' && ok || bad "pa sweep table: $out"
import re, sys
text = open(sys.argv[1]).read()
rows = re.findall(r"^\| (keydiff|snapkv) \| 0\.50 \| head \| own \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
assert len(rows) == 2, text
for press, base, pa0, pa1, pa2 in rows:
    assert base == pa0, (press, base, pa0)        # p_a = 0 is the baseline, bit for bit
    assert pa1 != base or pa2 != base, press
assert re.search(r"^\| keydiff \| agnostic \| 0\.50 \| VECTOR \| 0\.100 \|", text, re.M), text
assert re.search(r"^\| snapkv \| aware \| 0\.50 \| VECTOR \| 0\.250 \|", text, re.M), text
PY
out=$(ev --press kvzip --compression 0.75 --vector --vector-pool row,global --query-aware 2>&1) || bad "pool list: $out"
grep -qE "^kvzip +aware +0\.75 VECTOR/row " <<<"$out" && grep -qE "^kvzip +aware +0\.75 VECTOR/global " <<<"$out" && ok ||
  bad "pool rows: $out"
for args in "--pa 0.5,x" "--pa 0.6 --compression 0.5" "--vector-pool rows" "--query-aware --query-agnostic"; do
  out=$(ev --press keydiff --compression 0.5 --vector $args 2>&1); rc=$?
  [ $rc -eq 2 ] && ok || bad "eval-ppl $args: exit $rc, $out"
done
echo "eval_ppl: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
