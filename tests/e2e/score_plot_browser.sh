#!/usr/bin/env bash
# The leaderboard's chart in a real browser: `longbench-report --html` and
# `ruler-report --html` of results files made here (LongBench: two presses
# with and without VECTOR at three p_c, the full cache, two tasks; RULER: two
# presses, one with and without VECTOR, at two p_c, the full cache, two tasks
# at two lengths; score_plot_browser.mjs synth-longbench / synth-ruler writes
# them and the charts they must give), rendered by headless chromium and checked by
# score_plot_browser.mjs: the series and points, their places on the axes,
# their colours in the screenshot. Each plot is one check_plot line: another
# report's plot is one more.
#
#   score_plot_browser.sh VKVECTOR [OUT_DIR]   (screenshots are left in OUT_DIR)
#
# Skips (77) when node or chromium is missing; the npm packages it needs
# (tests/e2e/package-lock.json) are installed with `npm ci` when absent.
set -u
vkv=$1
here=$(cd "${BASH_SOURCE[0]%/*}" && pwd)

test=score_plot_browser
. "$here/browser_setup.sh"
out=${2:-$(mktemp -d)}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# check_plot NAME PLOT.html EXPECT.json: one chart against what it must show
check_plot() {
  "$node" "$here/score_plot_browser.mjs" check --name "$1" --html "$2" --expect "$3" --out "$out" \
    --chromium "$chromium" || fails=1
}

# report_plot NAME: NAME-report --html of the results synth-NAME makes, its
# table unchanged by --html, and the chart checked against what it must show
report_plot() {
  local name=$1
  "$node" "$here/score_plot_browser.mjs" synth-$name "$tmp/$name.jsonl" "$tmp/$name-expect.json" ||
    { echo "score_plot_browser: FAIL: making the $name results"; exit 1; }
  if ! "$vkv" $name-report --csv "$tmp/$name.jsonl" --html "$out/$name.html" > "$tmp/$name.csv" 2> "$tmp/$name.log"; then
    echo "score_plot_browser: FAIL: $name-report --html: $(tail -3 "$tmp/$name.log")"; exit 1
  fi
  grep -q "plot written to $out/$name.html" "$tmp/$name.log" ||
    { echo "score_plot_browser: FAIL: $name-report did not say where the plot went: $(cat "$tmp/$name.log")"; fails=1; }
  "$vkv" $name-report --csv "$tmp/$name.jsonl" > "$tmp/$name-plain.csv" 2> /dev/null
  cmp -s "$tmp/$name.csv" "$tmp/$name-plain.csv" ||
    { echo "score_plot_browser: FAIL: --html changed $name-report's table"; diff "$tmp/$name.csv" "$tmp/$name-plain.csv"; fails=1; }
  check_plot $name "$out/$name.html" "$tmp/$name-expect.json"
}
report_plot longbench
report_plot ruler

# ---- what cannot be written is refused before the files are read ----
for report in longbench ruler; do
  msg=$("$vkv" $report-report "$tmp/$report.jsonl" --html "$tmp" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 1 ] || ! grep -q -- "--html: cannot write '$tmp': it is a directory" <<< "$msg"; then
    echo "score_plot_browser: FAIL: $report-report --html to a directory: exit $rc, '$msg'"; fails=1
  fi
done

echo "score_plot_browser: screenshots in $out (longbench.png, ruler.png and their -chart and -hover shots)"
exit $fails
