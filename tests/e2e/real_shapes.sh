#!/usr/bin/env bash
# Every architecture x weight type at its real width (issue 13): a 1-layer
# random-weight model of llama-3.2-1b (llama, width 2048, rope_freqs),
# qwen2.5-0.5b (qwen2, width 896, QKV biases) and qwen3-0.6b (qwen3, width
# 1024, QK-norm) from tools/gen_model.py in each weight type and in the
# q4_K_M mix, against its --dequantized twin: the same weights stored as f32
# holding exactly what the blocks decode to. The runtime decodes blocks
# exactly and multiplies in f32 both ways, so the logits of every prompt
# position must agree to float rounding (NMSE <= 1e-6; on lavapipe they are
# bit-identical), be finite and pick the same argmax. Width 896 is not a whole
# number of 256-blocks, so qwen2's k-quants and iq4_xs fall back as
# llama-quantize does (the generator's header); those cases still run, with
# the types actually stored printed, and keep the k-quant where a row allows
# it (ffn_down, 4864 = 19 x 256).
set -u
vkv=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
python=/usr/bin/python3   # Debian's numpy lives under Debian's interpreter
[ -x "$python" ] || python=python3
tmp=$(mktemp -d)
trap 'wait; rm -rf "$tmp"' EXIT   # after the models being written, if any
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

presets="llama-3.2-1b qwen2.5-0.5b qwen3-0.6b"
kinds="f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs q4_K_M"
ids=1,17,42,99,256,300,437,511   # 8 prompt positions, below the vocabulary
start=$(date +%s)

# prepare CASE: the case's model in CASE.gguf, its dequantized twin in
# CASE-f32.gguf, the generator's fallback and tensor lines in CASE.gen
prepare() {
  local preset=${1%-*} kind=${1##*-} opt=--type
  [ "$kind" = q4_K_M ] && opt=--mix
  local gen=("$python" "$root/tools/gen_model.py" --preset "$preset" --layers 1 --vocab 512 "$opt" "$kind")
  "${gen[@]}" -o "$tmp/$1.gguf" > "$tmp/$1.gen" 2>&1 && "${gen[@]}" --dequantized -o "$tmp/$1-f32.gguf" >> "$tmp/$1.gen" 2>&1
}

# logits FILE: the prompt's logits on FILE, in FILE.bin
logits() { "$vkv" run -m "$1" --ids "$ids" -n 0 --ctx 64 --dump-logits "$1.bin" >/dev/null 2>"$tmp/run.err"; }

cases=()
for preset in $presets; do for kind in $kinds; do cases+=("$preset-$kind"); done; done
# The next case's models are written (one core) while the runtime runs this one.
prepare "${cases[0]}" & pid=$!
for i in "${!cases[@]}"; do
  case=${cases[$i]}
  wait $pid; rc=$?
  [ $((i + 1)) -lt ${#cases[@]} ] && { prepare "${cases[$((i + 1))]}" & pid=$!; }
  [ $rc -eq 0 ] || { bad "$case: gen_model failed: $(tail -3 "$tmp/$case.gen")"; continue; }
  sed -n 's/^gen_model: fallback /  '"$case"': fallback /p' "$tmp/$case.gen" | sort -u
  logits "$tmp/$case.gguf"; rc=$?
  [ $rc -eq 77 ] && { echo "real_shapes: SKIP: no Vulkan device"; exit 77; }
  if [ $rc -ne 0 ]; then bad "$case: run -> exit $rc: $(tail -5 "$tmp/run.err")"
  elif ! logits "$tmp/$case-f32.gguf"; then bad "$case: dequantized twin: $(tail -5 "$tmp/run.err")"
  else echo "$case $(sed -n '/; tensors: /{s/.*; tensors: //;s/,//g;p;q}' "$tmp/$case.gen")" >> "$tmp/cases"
  fi
  rm -f "$tmp/$case.gguf" "$tmp/$case-f32.gguf"
done

# A verdict per case (ok, or bad and why) in $tmp/verdicts; the NMSE of every
# architecture x kind and the worst per kind on stdout.
touch "$tmp/cases" "$tmp/verdicts"
"$python" - "$tmp" "$presets" "$kinds" <<'PY' || bad "the comparison failed"
import sys
import numpy as np
tmp, presets, kinds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
NMSE_MAX = 1e-6
nmses = {}
out = open(tmp + "/verdicts", "w")
for line in open(tmp + "/cases"):
    case, stored = line.split()[0], " ".join(line.split()[1:])
    preset, kind = case.rsplit("-", 1)
    q = np.fromfile("%s/%s.gguf.bin" % (tmp, case), dtype="<f4").reshape(8, -1).astype(np.float64)
    f = np.fromfile("%s/%s-f32.gguf.bin" % (tmp, case), dtype="<f4").reshape(8, -1).astype(np.float64)
    finite = bool(np.isfinite(q).all() and np.isfinite(f).all())
    nmse = float(((q - f) ** 2).sum() / max((f ** 2).sum(), 1e-30)) if finite else float("inf")
    same = bool((q.argmax(1) == f.argmax(1)).all())
    nmses[(preset, kind)] = nmse
    # weights of std 1/sqrt(fan_in) give logits of std about 1: not a degenerate model
    if finite and nmse <= NMSE_MAX and same and f.std() > 0.1:
        print("ok", file=out)
    else:
        print("bad %s (%s): NMSE %.3g (max %g), finite %s, same argmax %s, logit std %.3g"
              % (case, stored, nmse, NMSE_MAX, finite, same, f.std()), file=out)
print("real_shapes: NMSE of the logits against the dequantized twin (8 prompt positions)")
print("  %-8s" % "" + "".join("%14s" % p for p in presets + ["worst"]))
for k in kinds:
    v = [nmses.get((p, k)) for p in presets]
    v.append(max((x for x in v if x is not None), default=None))
    print("  %-8s" % k + "".join("%14s" % ("-" if x is None else "%.3g" % x) for x in v))
PY
while read -r verdict rest; do
  if [ "$verdict" = ok ]; then ok; else bad "$rest"; fi
done < "$tmp/verdicts"

echo "real_shapes: $passes passed, $fails failed ($(($(date +%s) - start)) s)"
[ "$fails" -eq 0 ]
