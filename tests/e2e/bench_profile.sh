#!/usr/bin/env bash
# vkvector bench -m --profile (README.md, "Side by side with llama.cpp, and where the
# time goes"): on stories260K, the pp and tg tables each have per-kernel rows and a
# positive total, and the shares add up to the total; seconds. Without GPU
# timestamps only the note is printed. With and without --profile, the host's time
# per token (record+submit, fence wait, other host, wall) and the submits and
# dispatches per token; then bench ops --small-batch on the quick shapes.
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

# The host lines, with --profile (above) and without: positive times that add up to the
# wall time, one submit per generated token, and as many dispatches per token in both.
plain=$("$vkv" bench -m "$model" -p 32 -n 4 --reps 2 2>&1) || { echo "FAIL: bench -m -> $plain"; exit 1; }
printf '%s\n@@@\n%s\n' "$out" "$plain" | python3 -c '
import re, sys
dispatches = {}
for text in sys.stdin.read().split("@@@\n"):
    assert "host time per token over the timed runs" in text, text
    for test in ("pp32", "tg4"):
        m = re.search(r"^%s host: record\+submit ([0-9.]+) us/token \(thread CPU ([0-9.]+); end\+submit ([0-9.]+)\), "
                      r"fence wait ([0-9.]+) us/token, other host (-?[0-9.]+) us/token \(wall ([0-9.]+) us/token\)$" % test,
                      text, re.M)
        assert m, (test, text)
        rec, cpu, submit, fence, other, wall = map(float, m.groups())
        assert rec > 0 and cpu > 0 and 0 < submit <= rec and fence > 0 and wall > 0, m.group(0)
        assert other >= -0.1 and abs(rec + fence + other - wall) <= 0.2, m.group(0)
        m = re.search(r"^%s recorded: ([0-9.]+) submits/token, ([0-9.]+) dispatches/token, ([0-9.]+) copies/token; "
                      r"([0-9.]+) synchronous transfers/token \(([0-9.]+) us/token, in other host\)$" % test, text, re.M)
        assert m, (test, text)
        submits, disp = float(m.group(1)), float(m.group(2))
        # pp: the 32-token batch is one recording; tg: one recording a token
        assert submits == (0.03 if test == "pp32" else 1.0), m.group(0)
        assert disp > 0 and dispatches.setdefault(test, disp) == disp, (m.group(0), dispatches)
' || { echo "FAIL: bench -m host lines: $out $plain"; exit 1; }

# bench ops --small-batch: per type, shape and N, the N matvecs (speed-up 1.00x), the
# multi-column matvec and the tiled matmul, each with positive times and W GB/s that
# agree with the weight bytes read.
ops=$("$vkv" bench ops --quick --small-batch --types q4_0 --reps 1 2>&1) || { echo "FAIL: bench ops --small-batch -> $ops"; exit 1; }
printf '%s\n' "$ops" | python3 -c '
import re, sys
text = sys.stdin.read()
if "no GPU timestamps" in text:
    sys.exit(0)
rows = re.findall(r"^(matvec x N|matvec_cols|matmul_tiled) +q4_0 +(\d+)x(\d+) +(\d+) +([0-9.]+) +([0-9.]+) +([0-9.]+)x$", text, re.M)
assert len(rows) == 2 * 4 * 3, text
for i in range(0, len(rows), 3):
    group = rows[i:i + 3]
    assert [r[0] for r in group] == ["matvec x N", "matvec_cols", "matmul_tiled"], group
    assert len({r[1:4] for r in group}) == 1, group
    m, k, n = map(int, group[0][1:4])
    assert n == [2, 4, 8, 16][(i // 3) % 4], group
    w_bytes = m * k // 32 * 18  # q4_0: 18 bytes a block of 32 (device rows of whole groups of 8 blocks: the same bytes)
    singles = float(group[0][4])
    for name, _, _, _, ms, gbs, speedup in group:
        ms, gbs, speedup = float(ms), float(gbs), float(speedup)
        assert ms > 0 and gbs > 0 and speedup > 0, group
        reads = n if name == "matvec x N" else 1
        printed = 0.05 if gbs >= 1 else 0.0005  # one decimal from 1 GB/s, three below
        assert abs(gbs - reads * w_bytes / (ms * 1e6)) <= printed + 0.001 * gbs, (group, reads * w_bytes / (ms * 1e6))
        assert abs(speedup - singles / ms) <= 0.006 + 0.001 * speedup, group
' || { echo "FAIL: bench ops --small-batch output: $ops"; exit 1; }
echo "bench_profile: passed"
