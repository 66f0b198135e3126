#!/usr/bin/env bash
# vkvector calib from the command line: bad flags and corpora give a clear
# message and exit status; a short calibration of stories260K (byte tokens,
# plain text and JSONL) writes a .vkcal and a JSON report.
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
model=$shared/models/stories260K-f32.gguf
text=$shared/data/tinyshakespeare.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0

# expect STATUS PATTERN -- COMMAND...: exit status and an output line matching PATTERN.
expect() {
  local want=$1 pattern=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: $* -> exit $rc (want $want), output: $out"
    fails=$((fails + 1))
  else
    passes=$((passes + 1))
  fi
}

expect 0 "usage: vkvector calib" -- "$vkv" calib --help
expect 2 "give the calibration text with --corpus" -- "$vkv" calib -m "$model"
expect 2 "--corpus needs at least one file" -- "$vkv" calib -m "$model" --corpus --byte-tokens
expect 2 "--heldout wants a number in \[0, 0.9\]" -- "$vkv" calib -m "$model" --corpus "$text" --heldout 2
expect 2 "--ridge wants a number" -- "$vkv" calib -m "$model" --corpus "$text" --ridge -1
expect 2 "less than one sequence" -- "$vkv" calib -m "$model" --corpus "$text" --tokens 100 --seq-len 128
expect 2 "exceeds the model's 512-token context" -- "$vkv" calib -m "$model" --corpus "$text" --byte-tokens --seq-len 1024 --tokens 4096
expect 1 "cannot open corpus file '$tmp/missing.txt'" -- "$vkv" calib -m "$model" --corpus "$tmp/missing.txt" --byte-tokens
printf 'tiny' > "$tmp/tiny.txt"
expect 1 "fewer than one sequence of 128" -- "$vkv" calib -m "$model" --corpus "$tmp/tiny.txt" --byte-tokens --seq-len 128
printf '{"text": "one"}\n{"txt": "two"}\n' > "$tmp/bad.jsonl"
expect 1 "bad.jsonl line 2: no string member \"text\"" -- "$vkv" calib -m "$model" --corpus "$tmp/bad.jsonl" --byte-tokens --seq-len 16 --tokens 64

# A short real calibration from plain text: table, speed, files.
expect 0 "per-head OLS beats Moore-Penrose on every layer" -- "$vkv" calib -m "$model" --corpus "$text" --byte-tokens \
  --tokens 1024 --seq-len 128 --ridge auto -o "$tmp/s.vkcal"
expect 0 "\"r2_joint_mean\"" -- cat "$tmp/s.vkcal.json"
expect 0 "GGUF" -- head -c 4 "$tmp/s.vkcal"
# JSONL (C4 shard format), detected by the first character; f16 maps; joint off.
for i in $(seq 1 40); do
  printf '{"text": "Line %d: %s", "url": "x"}\n' "$i" "$(head -c 200 "$text" | tr -d '\n"\\')"
done > "$tmp/c4.json"
expect 0 "tokens/s" -- "$vkv" calib -m "$model" --corpus "$tmp/c4.json" --byte-tokens --tokens 512 --seq-len 64 \
  --ridge auto --f16 --joint off -o "$tmp/c4.vkcal" --json "$tmp/c4-report.json"
expect 0 "\"sequences\": 8" -- cat "$tmp/c4-report.json"

# The Gram accumulation's benchmark line (figures vary; only that it runs and
# compares). Without GPU timestamps there are no figures, only the note.
if "$vkv" bench ops --quick --types f16 --reps 1 2>&1 | grep -q "no GPU timestamps"; then
  expect 0 "gram_joint +f32 .* n/a" -- "$vkv" bench ops --quick --types f16 --reps 1
else
  expect 0 "Gram accumulation: [0-9.]+ GFLOP/s = [0-9]+% of the fastest matrix product" -- \
    "$vkv" bench ops --quick --types f16 --reps 1
fi

# calib-report: the R² tables read back from the files equal the fit's own JSON report
out=$("$vkv" calib-report "$tmp/s.vkcal" "$tmp/s.vkcal" --markdown 2>&1)
printf '%s\n' "$out" > "$tmp/report.md"
if python3 - "$tmp/s.vkcal.json" "$tmp/report.md" <<'PY'; then passes=$((passes + 1)); else echo "FAIL: calib-report: $out"; fails=$((fails + 1)); fi
import json, sys, re
rep = json.load(open(sys.argv[1]))["summary"]; text = open(sys.argv[2]).read()
rows = re.findall(r"^\| \S+ \| (\d+) \| (\d+) \| ([-\d.]+) \| ([-\d.na]+) \| ([-\d.]+) \|$", text, re.M)
assert len(rows) == 2, text
assert abs(float(rows[0][2]) - rep["r2_mean"]) < 6e-5, (rows, rep["r2_mean"])
layers = re.findall(r"^\| (\d+) \| ([-\d.]+) \| ([-\d.]+) \| ([-\d.]+) \|", text, re.M)
assert len(layers) == 2 * int(rows[0][0]), layers
PY
head -c 100 "$tmp/s.vkcal" > "$tmp/cut.vkcal"
expect 1 "cut.vkcal" -- "$vkv" calib-report "$tmp/cut.vkcal"
expect 2 "give one or more calibration files" -- "$vkv" calib-report

echo "calib_cli: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
