# Sourced by the VECTOR end-to-end tests (vector.sh, vector_pool.sh): the
# pass/fail counters, a temporary directory, and a quick calibration of
# stories260K at $tmp/s.vkcal (exits the test when it fails).
# Needs: vkv (the binary), name (the test's name).
shared=${VKVECTOR_SHARED:-../shared}
model=$shared/models/stories260K-f32.gguf
[ -f "$model" ] || { echo "$name: $model not found (set VKVECTOR_SHARED)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

if ! "$vkv" calib -m "$model" --corpus "$shared/data/tinyshakespeare.txt" --byte-tokens --tokens 6144 --seq-len 256 \
     --ridge 1e-4 -o "$tmp/s.vkcal" > "$tmp/calib.log" 2>&1; then
  echo "FAIL: calibration: $(tail -3 "$tmp/calib.log")"; exit 1
fi
