#!/usr/bin/env bash
# The tier visualizer in a real browser: a tier dump of stories260K (real
# weights, VECTOR on, so all three tiers occur) becomes an HTML report that
# headless chromium renders; viz_browser.mjs checks it against the dump,
# hovers the tier map and inspects screenshots. Then a synthetic 32k-token
# dump checks load and redraw times at scale.
#
#   viz_browser.sh VKVECTOR [OUT_DIR]   (screenshots are left in OUT_DIR)
#
# Skips (77) when node or chromium is missing (or, like every GPU test, when
# there is no Vulkan device at all to make the dump); the npm packages it needs
# (tests/e2e/package-lock.json) are installed with `npm ci` when absent.
set -u
vkv=$1
here=$(cd "${BASH_SOURCE[0]%/*}" && pwd)
shared=${VKVECTOR_SHARED:-../shared}
model=$shared/models/stories260K-f32.gguf

test=viz_browser
. "$here/browser_setup.sh"
[ -f "$model" ] || { echo "viz_browser: $model not found (set VKVECTOR_SHARED)"; exit 1; }
out=${2:-$(mktemp -d)}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$vkv" calib -m "$model" --corpus "$shared/data/tinyshakespeare.txt" --byte-tokens --tokens 2048 --seq-len 256 \
  --ridge auto -o "$tmp/s.vkcal" > "$tmp/calib.log" 2>&1
rc=$?
# like every GPU test: without any Vulkan device there is no tier dump to show
[ $rc -eq 77 ] && { echo "viz_browser: SKIP: no Vulkan device to make a tier dump"; exit 77; }
[ $rc -eq 0 ] || { echo "viz_browser: FAIL: calibration: $(tail -3 "$tmp/calib.log")"; exit 1; }
context=$(head -c 300 "$shared/data/tinyshakespeare.txt")
if ! "$vkv" run -m "$model" -p "$context" --question "Who?" -n 0 --press keydiff --compression 0.5 \
     --vector --calib "$tmp/s.vkcal" --tier-dump "$out/dump.json" > "$tmp/run.log" 2>&1; then
  echo "viz_browser: FAIL: tier dump: $(tail -3 "$tmp/run.log")"; exit 1
fi
if ! "$vkv" run -m "$model" -p "$context" --question "Who?" -n 0 --press keydiff --compression 0.5 \
     --tier-dump "$out/dump-novector.json" > "$tmp/run.log" 2>&1; then
  echo "viz_browser: FAIL: tier dump without VECTOR: $(tail -3 "$tmp/run.log")"; exit 1
fi
"$vkv" viz "$out/dump.json" -o "$out/report.html" || { echo "viz_browser: FAIL: vkvector viz"; exit 1; }
"$vkv" viz "$out/dump-novector.json" -o "$out/report-novector.html" || { echo "viz_browser: FAIL: vkvector viz (no VECTOR)"; exit 1; }
"$vkv" viz "$out/dump.json" --values u8 -o "$out/report-u8.html" || { echo "viz_browser: FAIL: vkvector viz --values u8"; exit 1; }

fails=0
"$node" "$here/viz_browser.mjs" check --dump "$out/dump.json" --html "$out/report.html" \
  --html-u8 "$out/report-u8.html" --out "$out" --chromium "$chromium" || fails=1
# without VECTOR: two tiers, no reconstruction heatmap
"$node" "$here/viz_browser.mjs" check --dump "$out/dump-novector.json" --html "$out/report-novector.html" \
  --out "$out/novector" --chromium "$chromium" || fails=1

# Scale: 32k positions x 4 layers x 8 KV heads (1 M positions; the full
# 32 layers behave the same, 8x the data).
"$node" "$here/viz_browser.mjs" synth "$tmp/big.json" 32768 4 8 &&
  "$vkv" viz "$tmp/big.json" -o "$out/scale.html" &&
  "$node" "$here/viz_browser.mjs" scale --html "$out/scale.html" --out "$out" --chromium "$chromium" \
    --max-load-ms 30000 --max-draw-ms 1500 || fails=1
rm -f "$out/scale.html"

echo "viz_browser: screenshots in $out (report.png, map.png, hover.png, zoomed.png, scale.png; novector/)"
exit $fails
