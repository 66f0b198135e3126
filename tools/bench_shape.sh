#!/usr/bin/env bash
# Benchmarks one real model shape in one command: writes a random-weight GGUF of that shape
# with tools/gen_model.py into a temporary directory, runs `vkvector bench -m` on it
# (llama-bench's pp / tg tokens per second), then deletes the file.
#
#   tools/bench_shape.sh PRESET TYPE [LAYERS] [-- BENCH OPTIONS]
#
#   PRESET   a model shape: llama-3.2-1b llama-3.2-3b llama-3.1-8b qwen2.5-0.5b qwen2.5-1.5b
#            qwen2.5-7b qwen3-0.6b qwen3-1.7b qwen3-4b qwen3-8b qwen3-14b smollm2-135m
#            (tools/gen_model.py --list prints their dimensions)
#   TYPE     one weight type for every matrix (f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K
#            q4_K q5_K q6_K iq4_nl iq4_xs), or a llama-quantize mix with an _S/_M/_L suffix
#            (q3_K_S q3_K_M q3_K_L q4_K_S q4_K_M q5_K_S q5_K_M)
#   LAYERS   fewer layers than the model has (default: all of them)
#   after -- options for `vkvector bench -m` (its default: -p 512 -n 128 --reps 3)
#
# Environment: VKVECTOR the binary (default: build/vkvector of this checkout); TMPDIR where the
# model is written (it needs the model's size free: about 5 GB for llama-3.1-8b q4_K_M);
# KEEP=1 keeps the model and prints its path; GEN_ARGS extra tools/gen_model.py options
# (e.g. "--vocab 8192" or "--vocab-from ggml-vocab-qwen2.gguf").
#
# Examples:
#   tools/bench_shape.sh llama-3.1-8b q4_K_M                       # pp512 / tg128 on a GPU
#   tools/bench_shape.sh qwen3-8b q5_K
#   tools/bench_shape.sh qwen3-0.6b q8_0 28 -- -p 128 -n 32 --reps 1   # lavapipe-sized
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if [ $# -lt 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
preset=$1 type=$2
shift 2
layers=()
if [ $# -gt 0 ] && [ "$1" != -- ]; then layers=(--layers "$1"); shift; fi
[ $# -gt 0 ] && [ "$1" = -- ] && shift

case "$type" in
  *_[SML]|*_[sml]) kind=(--mix "$type") ;;
  *) kind=(--type "$type") ;;
esac

vkvector=${VKVECTOR:-$here/../build/vkvector}
[ -x "$vkvector" ] || { echo "bench_shape: no vkvector binary at $vkvector (build it, or set VKVECTOR)" >&2; exit 1; }
# Debian's interpreter carries python3-numpy (tools/setup.sh installs it)
python=/usr/bin/python3
[ -x "$python" ] || python=python3

dir=$(mktemp -d "${TMPDIR:-/tmp}/bench_shape.XXXXXX")
model="$dir/$preset-$type.gguf"
if [ "${KEEP:-0}" = 1 ]; then
  trap 'echo "bench_shape: model kept at $model"' EXIT
else
  trap 'rm -rf "$dir"' EXIT
fi

start=$(date +%s)
# shellcheck disable=SC2086  # GEN_ARGS is a list of options
"$python" "$here/gen_model.py" --preset "$preset" "${kind[@]}" "${layers[@]}" ${GEN_ARGS:-} -o "$model"
echo "bench_shape: model generated in $(( $(date +%s) - start )) s"
"$vkvector" bench -m "$model" "$@"
