#!/usr/bin/env bash
# vkvector bench -m --profile (README.md, "Side by side with llama.cpp, and where the
# time goes"): on stories260K, the pp and tg tables each have per-kernel rows and a
# positive total, and the shares add up to the total; seconds. Without GPU
# timestamps only the note is printed.
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
model=$shared/models/stories260K-f32.gguf
[ -f "$model" ] || { echo "bench_profile: $model not found (set VKVECTOR_SHARED)"; exit 1; }
out=$("$vkv" bench -m "$model" -p 32 -n 4 --reps 2 --profile 2>&1); rc=$?
[ $rc -eq 77 ] && { echo "bench_profile: SKIP: no Vulkan device"; exit 77; }
[ $rc -eq 0 ] || { echo "FAIL: bench -m --profile -> exit $rc: $out"; exit 1; }
printf '%s\n' "$out" | python3 -c '
import re, sys
text = sys.stdin.read()
if "no GPU timestamps" in text:
    assert text.count("no per-kernel times") == 2, text
    sys.exit(0)
for test, tokens in (("pp32", 64), ("tg4", 8)):
    m = re.search(r"^%s: GPU time per kernel over the timed runs \((\d+) tokens; wall [0-9.]+ ms\)\n"
                  r"\| kernel \| ms \| share \| us/token \|\n\| --- .*\n((?:\|.*\n)+)" % test, text + "\n", re.M)
    assert m, (test, text)
    assert int(m.group(1)) == tokens, (test, m.group(1))
    rows = [r.split("|")[1:-1] for r in m.group(2).splitlines()]
    kernels, total = rows[:-1], rows[-1]
    assert total[0].strip() == "total" and len(kernels) >= 3, rows
    ms = [float(r[1]) for r in kernels]
    assert all(x > 0 for x in ms) and float(total[1]) > 0, rows
    assert ms == sorted(ms, reverse=True), rows
    assert abs(sum(ms) - float(total[1])) <= 0.002 * len(ms) + 1e-3, rows
    assert abs(sum(float(r[2].strip(" %")) for r in kernels) - 100) < 0.1 * len(kernels), rows
    assert abs(float(total[3]) - 1e3 * float(total[1]) / tokens) <= 0.1 + 0.01 * float(total[3]), rows
' || { echo "FAIL: bench -m --profile output: $out"; exit 1; }
echo "bench_profile: passed"
