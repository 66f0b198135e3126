#!/usr/bin/env bash
# vkvector viz on the command line: a real tier dump (stories260K, with and
# without VECTOR) becomes a self-contained HTML report and a terminal
# summary; bad flags exit 2, malformed or truncated dumps exit 1 with a
# message that says what and where.
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
model=$shared/models/stories260K-f32.gguf
[ -f "$model" ] || { echo "viz_cli: $model not found (set VKVECTOR_SHARED)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect STATUS PATTERN -- COMMAND...: exit status and a stderr line matching PATTERN.
expect() {
  local want=$1 pattern=$2; shift 3
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pattern" <<<"$err"; then
    bad "$* -> exit $rc (want $want), stderr: $err"
  else
    ok
  fi
}

. "$(dirname "$0")/tier_dump_common.sh"
make_tier_dump viz_cli "$model" "$tmp/d.json"
"$vkv" calib -m "$model" --corpus "$shared/data/tinyshakespeare.txt" --byte-tokens --tokens 2048 --seq-len 256 \
  --ridge auto -o "$tmp/s.vkcal" > "$tmp/calib.log" 2>&1 || { echo "FAIL: calibration: $(tail -3 "$tmp/calib.log")"; exit 1; }
"$vkv" run -m "$model" -p "$context" --question "Who?" -n 0 --press snapkv --compression 0.75 --query-aware \
  --vector --calib "$tmp/s.vkcal" --tier-dump "$tmp/dv.json" > "$tmp/runv.log" 2>&1 ||
  { echo "FAIL: VECTOR tier dump: $(tail -3 "$tmp/runv.log")"; exit 1; }

# --- reports ---
for d in d dv; do
  for values in f16 u8 none; do
    if "$vkv" viz "$tmp/$d.json" --values $values -o "$tmp/$d-$values.html" 2>"$tmp/viz.err"; then
      ok
      grep -q "wrote $tmp/$d-$values.html" "$tmp/viz.err" && ok || bad "$d $values: no 'wrote' note: $(cat "$tmp/viz.err")"
    else
      bad "viz $d --values $values: $(cat "$tmp/viz.err")"
    fi
  done
  f=$tmp/$d-f16.html
  # self-contained: no URL to load anything from, data blocks present
  grep -qiE '(src|href)=|https?:|@import|url\(' "$f" && bad "$d: the report refers to something outside itself" || ok
  for id in vkv-meta vkv-tokens vkv-tiers vkv-scores vkv-residuals; do
    grep -q "id=\"$id\"" "$f" && ok || bad "$d: no $id block"
  done
  grep -q 'id="vkv-scores"' "$tmp/$d-none.html" && bad "$d: --values none still has scores" || ok
  # tiers take 2 bits per position: base64 of ceil(L*H*n/4) bytes
  n=$(grep -o '"n_context":[0-9]*' "$tmp/$d.json" | head -1 | cut -d: -f2)
  want=$(( ( (5 * 4 * n + 3) / 4 + 2) / 3 * 4 ))
  got=$(sed -n 's/.*<script type="application\/octet-stream" id="vkv-tiers">\([^<]*\)<\/script>.*/\1/p' "$f" | tr -d '\n' | wc -c)
  [ "$got" -eq "$want" ] && ok || bad "$d: tier block has $got base64 characters, expected $want"
  # f16 is 2 bytes per position per value kind, u8 one: the u8 report is smaller
  [ "$(stat -c %s "$tmp/$d-u8.html")" -lt "$(stat -c %s "$f")" ] && ok || bad "$d: u8 report is not smaller"
  [ "$(stat -c %s "$tmp/$d-none.html")" -lt "$(stat -c %s "$tmp/$d-u8.html")" ] && ok || bad "$d: tiers-only report is not smaller"
done

# --- terminal summary ---
out=$("$vkv" viz --term "$tmp/dv.json") && ok || bad "viz --term"
grep -qE "compression achieved: 75\.[0-9]% \(target p_c 75\.0%\)" <<<"$out" && ok || bad "--term: no 'compression achieved: 75.x%': $out"
grep -q "press snapkv, p_c 0.75" <<<"$out" && ok || bad "--term: settings line"
grep -q "query-aware" <<<"$out" && ok || bad "--term: query-aware"
[ "$(grep -cE '^ +[0-9]+  [RAE]+ ' <<<"$out")" -eq 5 ] && ok || bad "--term: expected 5 layer rows: $out"
grep -q $'\x1b\[' <<<"$out" && bad "--term: ANSI colour when stdout is not a terminal" || ok
"$vkv" viz --term --color always "$tmp/dv.json" | grep -q $'\x1b\[34m' && ok || bad "--color always: no colour"
[ "$("$vkv" viz --term --heads "$tmp/dv.json" | grep -cE '^ +h[0-9]+ ')" -eq 20 ] && ok || bad "--heads: expected 20 head rows"
"$vkv" viz --term "$tmp/d.json" | grep -q "VECTOR off" && ok || bad "--term: VECTOR off"
# both at once: the summary on stdout, the note on stderr
out=$("$vkv" viz --term "$tmp/d.json" -o "$tmp/both.html" 2>/dev/null) && [ -s "$tmp/both.html" ] && grep -q "memory:" <<<"$out" && ok ||
  bad "--term with -o"

# --- bad flags: exit 2 ---
expect 2 "which tier dump" -- "$vkv" viz
expect 2 "nothing to do" -- "$vkv" viz "$tmp/d.json"
expect 2 "unknown option '--bogus'" -- "$vkv" viz "$tmp/d.json" --bogus -o x.html
expect 2 "-o needs a value" -- "$vkv" viz "$tmp/d.json" -o
expect 2 "--values wants f16, u8 or none" -- "$vkv" viz "$tmp/d.json" --values f8 -o "$tmp/x.html"
expect 2 "--color wants auto, always or never" -- "$vkv" viz --term --color sometimes "$tmp/d.json"
expect 2 "--heads goes with --term" -- "$vkv" viz "$tmp/d.json" --heads -o "$tmp/x.html"
expect 2 "one tier dump at a time" -- "$vkv" viz "$tmp/d.json" "$tmp/dv.json" --term
"$vkv" viz --help | grep -q "usage: vkvector viz" && ok || bad "viz --help"

# --- bad dumps: exit 1, saying what and where ---
n=$(grep -o '"n_context":[0-9]*' "$tmp/d.json" | head -1 | cut -d: -f2)
expect 1 "cannot open '$tmp/missing.json'" -- "$vkv" viz --term "$tmp/missing.json"
head -c 5000 "$tmp/d.json" > "$tmp/cut.json"
expect 1 "line 1, column 5001.*truncated" -- "$vkv" viz --term "$tmp/cut.json"
sed 's/"tiers":"./"tiers":"/' "$tmp/d.json" > "$tmp/short.json"
expect 1 "layer 0 head 0: tiers has $((n - 1)) letters, n_context is $n" -- "$vkv" viz --term "$tmp/short.json"
sed "s/\"n_context\":$n/\"n_context\":$((n + 1))/" "$tmp/d.json" > "$tmp/n.json"
expect 1 "tokens has $n strings, n_context is $((n + 1))" -- "$vkv" viz --term "$tmp/n.json"
sed 's/"n_retained":/"n_retainedX":/' "$tmp/d.json" > "$tmp/miss.json"
expect 1 "layer 0 head 0: the head has no \"n_retained\" field" -- "$vkv" viz --term "$tmp/miss.json"
sed 's/"scores":\[/"scores":[true,/' "$tmp/d.json" > "$tmp/type.json"
expect 1 "layer 0 head 0: \"scores\"\[0\] must be a number or null \(line 1, column" -- "$vkv" viz --term "$tmp/type.json"
printf '{"model": "x"}' > "$tmp/other.json"
expect 1 "not a vkvector tier dump" -- "$vkv" viz --term "$tmp/other.json"
: > "$tmp/empty.json"
expect 1 "empty" -- "$vkv" viz --term "$tmp/empty.json"
expect 1 "cannot write '/nonexistent/r.html'" -- "$vkv" viz "$tmp/d.json" -o /nonexistent/r.html

echo "viz_cli: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
