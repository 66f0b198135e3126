#!/usr/bin/env bash
# Every write checked (docs/ARCHITECTURE.md §6): each writing subcommand with
# its output on /dev/full fails with a message naming /dev/full; standard
# output on /dev/full fails the command; a directory, a missing directory or
# a read-only one as output is refused before the work starts (no model
# loaded, no grid row, no prefill); a tier dump's model name holding escape
# sequences reaches the terminal escaped. Small models, seconds in all.
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
tiny=$shared/models/stories260K-f32.gguf
model=models/vkvector-shakespeare.gguf
[ -f "$model" ] || model=$tiny
[ -f "$tiny" ] || { echo "write_errors: $tiny not found (set VKVECTOR_SHARED)"; exit 1; }
hay=$shared/data/paul_graham_essays
prompts=$shared/longbench
[ -d "$hay" ] && [ -f "$prompts/dataset2prompt.json" ] ||
  { echo "write_errors: $hay or $prompts not found (set VKVECTOR_SHARED)"; exit 1; }
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect STATUS PATTERN -- COMMAND...: exit status and a line of its output
# (stdout and stderr) matching PATTERN; the output is kept in $out.
out=
expect() {
  local want=$1 pattern=$2; shift 3
  local rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    bad "$* -> exit $rc (want $want), output: $(head -c 800 <<<"$out")"
  else ok; fi
}
# refused PATTERN -- COMMAND...: exit 1 with PATTERN, and nothing of the work
# in the output (the model's load report, a grid's or LongBench's header line).
refused() {
  local pattern=$1; shift 2
  expect 1 "$pattern" -- "$@"
  if grep -qE -- "^load:|-token context|prompt: |calib: .* on " <<<"$out"; then
    bad "$* started the work before refusing: $(head -c 800 <<<"$out")"
  else ok; fi
}
# stdout_full COMMAND...: standard output on /dev/full fails the command.
stdout_full() {
  local err rc
  err=$("$@" 2>&1 >/dev/full); rc=$?
  if [ "$rc" -ne 0 ] && grep -q "error writing standard output: No space left on device" <<<"$err"; then ok
  else bad "$* > /dev/full -> exit $rc, stderr: $(tail -c 600 <<<"$err")"; fi
}

. "$(dirname "$0")/tier_dump_common.sh"
make_tier_dump write_errors "$tiny" "$tmp/d.json"

# ---- outputs on /dev/full: every write and the close checked ----
full="cannot (write|append to) '/dev/full': No space left on device"
expect 1 "$full" -- "$vkv" viz "$tmp/d.json" -o /dev/full
expect 1 "$full" -- "$vkv" run -m "$tiny" -p "$context" -n 0 --press keydiff --compression 0.5 --tier-dump /dev/full
expect 1 "$full" -- "$vkv" run -m "$tiny" -p "$context" -n 0 --dump-logits /dev/full
# one cell; stories260K spells text in byte tokens and needs a longer prompt (as in niah.sh)
len=208
[ "$model" = "$tiny" ] && len=400
niah() { "$vkv" niah -m "$model" --haystack "$hay" -n 6 --quiet --protocol vkvector --lengths $len --depths 50 "$@"; }
expect 1 "$full" -- niah --out /dev/full
expect 1 "$full" -- niah --out "$tmp/g.json" --html /dev/full
calib() {
  "$vkv" calib -m "$tiny" --corpus "$shared/data/tinyshakespeare.txt" --byte-tokens --tokens 1024 --seq-len 128 \
    --ridge auto "$@"
}
expect 1 "$full" -- calib -o "$tmp/s.vkcal" --json /dev/full
expect 1 "$full" -- calib -o /dev/full --json "$tmp/s.json"
mkdir -p "$tmp/data"
python3 - "$tmp/data" <<'PY'
import json, sys
shots = "Question: Who was Lincoln?\nType: Human being\nQuestion: What is a cat?\nType: Animal\n"
with open(sys.argv[1] + "/trec.jsonl", "w") as f:
    f.write(json.dumps({"input": "What city is the capital of France?", "context": shots, "answers": ["City"],
                        "all_classes": ["City", "Animal", "Human being"], "length": 20, "dataset": "trec",
                        "_id": "tr0"}) + "\n")
PY
longbench() { "$vkv" longbench -m "$model" --data "$tmp/data" --prompts "$prompts" --max-new-tokens 4 --quiet "$@"; }
expect 1 "$full" -- longbench --out /dev/full
# the grid and the results above were written in place: /dev/full is still a device
[ -c /dev/full ] && ok || bad "/dev/full is no longer a character device"

# ---- standard output on /dev/full ----
stdout_full "$vkv" viz --term --color never "$tmp/d.json"
stdout_full "$vkv" calib-report models/vkvector-shakespeare.vkcal
longbench --out "$tmp/lb.jsonl" > /dev/null 2>&1 || bad "longbench run: exit $?"
stdout_full "$vkv" longbench-report "$tmp/lb.jsonl"
expect 1 "$full" -- "$vkv" longbench-report "$tmp/lb.jsonl" --html /dev/full
stdout_full "$vkv" run -m "$tiny" -p "$context" -n 8
stdout_full "$vkv" tokenize -m "$model" --text "$context"

# ---- refused before the work: a directory, a missing directory ----
mkdir "$tmp/dir"
refused "--out: cannot write '$tmp/dir': it is a directory" -- niah --out "$tmp/dir"
refused "--html: cannot write '$tmp/dir'" -- niah --out "$tmp/g.json" --html "$tmp/dir"
refused "--dump-logits: cannot write '$tmp/dir': it is a directory" -- "$vkv" run -m "$tiny" -p "$context" -n 4 \
  --dump-logits "$tmp/dir"
refused "--tier-dump: cannot write '$tmp/none/d.json': its directory" -- "$vkv" run -m "$tiny" -p "$context" -n 0 \
  --press keydiff --compression 0.5 --tier-dump "$tmp/none/d.json"
refused "-o: cannot write '$tmp/dir'" -- calib -o "$tmp/dir"
refused "--json: cannot write '$tmp/none/s.json'" -- calib -o "$tmp/s2.vkcal" --json "$tmp/none/s.json"
refused "--out: cannot write '$tmp/dir'" -- longbench --out "$tmp/dir"
refused "-o: cannot write '$tmp/dir'" -- "$vkv" viz "$tmp/d.json" -o "$tmp/dir"
[ ! -e "$tmp/s2.vkcal" ] && ok || bad "a refused calibration left $tmp/s2.vkcal"

# ---- a read-only directory ----
# As root, access() and file creation ignore a directory's permissions, so a
# chmod'ed directory would be writable: a path under /proc, where no file can
# be created by anyone, stands in for it then.
if [ "$(id -u)" -eq 0 ]; then ro=/proc; else ro=$tmp/ro; mkdir "$ro"; chmod 555 "$ro"; fi
refused "--out: cannot write '$ro/g.json'" -- niah --out "$ro/g.json"
refused "--dump-logits: cannot write '$ro/l.bin'" -- "$vkv" run -m "$tiny" -p "$context" -n 4 --dump-logits "$ro/l.bin"
refused "--out: cannot write '$ro/r.jsonl'" -- longbench --out "$ro/r.jsonl"
refused "-o: cannot write '$ro/r.html'" -- "$vkv" viz "$tmp/d.json" -o "$ro/r.html"
refused "--html: cannot write '$ro/p.html'" -- "$vkv" longbench-report "$tmp/lb.jsonl" --html "$ro/p.html"

# ---- a file written over: replaced whole, no temporary file left beside it ----
echo old > "$tmp/keep.html"
expect 0 "wrote $tmp/keep.html" -- "$vkv" viz "$tmp/d.json" -o "$tmp/keep.html"
grep -q '</html>' "$tmp/keep.html" && ok || bad "keep.html was not replaced: $(head -c 200 "$tmp/keep.html")"
[ "$(ls -A "$tmp" | grep -c '\.tmp$')" -eq 0 ] && ok || bad "temporary files left: $(ls -A "$tmp")"

# ---- untrusted strings reach the terminal escaped ----
python3 - "$tmp/d.json" "$tmp/evil.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["model"] = "evil\x1b]0;pwned\x07\x1b[31mred"
d["press"] = "knorm\x1b[2J"
json.dump(d, open(sys.argv[2], "w"))
PY
"$vkv" viz --term --color never "$tmp/evil.json" > "$tmp/evil.txt" 2>&1 || bad "viz --term on the evil dump: exit $?"
# no_esc WHAT FILE: FILE holds no raw ESC byte.
no_esc() {
  if LC_ALL=C grep -q $'\x1b' "$2"; then bad "$1 wrote a raw ESC: $(od -c "$2" | head -5)"; else ok; fi
}
no_esc "viz --term" "$tmp/evil.txt"
grep -qF 'evil\x1b]0;pwned\x07\x1b[31mred' "$tmp/evil.txt" && ok ||
  bad "model name not shown escaped: $(head -2 "$tmp/evil.txt")"
grep -qF 'press knorm\x1b[2J' "$tmp/evil.txt" && ok || bad "press not shown escaped: $(sed -n 2p "$tmp/evil.txt")"
# longbench-report's table: the model name of a results file, escaped
python3 - "$tmp/lb.jsonl" "$tmp/evil.jsonl" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
r["model"] = "evil\x1b[2Jmodel"
open(sys.argv[2], "w").write(json.dumps(r) + "\n")
PY
"$vkv" longbench-report "$tmp/lb.jsonl" "$tmp/evil.jsonl" > "$tmp/evil.md" 2>&1 || bad "longbench-report on the evil file: exit $?"
no_esc "longbench-report" "$tmp/evil.md"
grep -qF 'evil\x1b[2Jmodel' "$tmp/evil.md" && ok || bad "longbench-report: model name not shown escaped: $(cat "$tmp/evil.md")"

echo "write_errors: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
