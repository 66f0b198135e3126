#!/usr/bin/env bash
# The leaderboard's chart in a real browser: `longbench-report --html` of a
# results file made here (two presses with and without VECTOR at three p_c,
# the full cache, two tasks; score_plot_browser.mjs synth-longbench writes it
# and the chart it must give), rendered by headless chromium and checked by
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

# ---- longbench-report --html ----
"$node" "$here/score_plot_browser.mjs" synth-longbench "$tmp/longbench.jsonl" "$tmp/longbench-expect.json" ||
  { echo "score_plot_browser: FAIL: making the LongBench results"; exit 1; }
if ! "$vkv" longbench-report --csv "$tmp/longbench.jsonl" --html "$out/longbench.html" > "$tmp/table.csv" 2> "$tmp/report.log"; then
  echo "score_plot_browser: FAIL: longbench-report --html: $(tail -3 "$tmp/report.log")"; exit 1
fi
grep -q "plot written to $out/longbench.html" "$tmp/report.log" ||
  { echo "score_plot_browser: FAIL: longbench-report did not say where the plot went: $(cat "$tmp/report.log")"; fails=1; }
# the text report is the same with and without --html
"$vkv" longbench-report --csv "$tmp/longbench.jsonl" > "$tmp/table-plain.csv" 2> /dev/null
cmp -s "$tmp/table.csv" "$tmp/table-plain.csv" ||
  { echo "score_plot_browser: FAIL: --html changed the table"; diff "$tmp/table.csv" "$tmp/table-plain.csv"; fails=1; }
check_plot longbench "$out/longbench.html" "$tmp/longbench-expect.json"

# ---- what cannot be written is refused before the files are read ----
msg=$("$vkv" longbench-report "$tmp/longbench.jsonl" --html "$tmp" 2>&1 >/dev/null); rc=$?
if [ $rc -ne 1 ] || ! grep -q -- "--html: cannot write '$tmp': it is a directory" <<< "$msg"; then
  echo "score_plot_browser: FAIL: --html to a directory: exit $rc, '$msg'"; fails=1
fi

echo "score_plot_browser: screenshots in $out (longbench.png, longbench-chart.png, longbench-hover.png)"
exit $fails
