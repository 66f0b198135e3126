# Sourced by the e2e scripts that check exit statuses and messages: a
# temporary directory removed at exit, the pass/fail counters, and
#   expect STATUS PATTERN -- COMMAND...
# which runs COMMAND and wants its exit status and a line of its output
# (stdout and stderr) matching the extended regular expression PATTERN.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

expect() {
  local want=$1 pattern=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    bad "$* -> exit $rc (want $want), output: $(head -c 800 <<<"$out")"
  else ok; fi
}
