#!/usr/bin/env bash
# vkvector against llama.cpp's llama-bench, side by side on the same files (issue 25): writes a grid
# of real model shapes x weight types with tools/gen_model.py, runs the two programs alternately on
# each file (vkvector, then llama-bench, --rounds times), and prints a Markdown table of pp and tg
# tokens per second and their ratio, vkvector / llama.cpp (> 1: vkvector is faster).
#
#   tools/peer_bench.sh [--shapes LIST] [--types LIST] [--layers N] [-p N] [-n N] [--reps R]
#                       [--rounds K] [--vocab N] [--pure] [--dir DIR]
#
#   --shapes LIST  presets of tools/gen_model.py, each with an optional :LAYERS
#                  (default smollm2-135m:8,qwen3-0.6b:4,llama-3.2-1b:2: minutes each on lavapipe)
#   --types LIST   weight types (default f16,q8_0,q4_0,q4_K_M,q5_K_M,q6_K,iq4_xs): a llama-quantize
#                  mix when gen_model.py has one of that name (q8_0, q4_0, q6_K, iq4_xs, q4_K_M, ...:
#                  what a real file of that type holds), else every matrix in that type (f16, q4_K)
#   --pure         every matrix in the type, never a mix (llama-quantize --pure)
#   --layers N     layers of every shape (overrides the :LAYERS of --shapes)
#   -p N, -n N     pp and tg tokens (default 128 and 16)
#   --reps R       timed runs of each program per round (default 1)
#   --rounds K     alternations per file (default 2); a figure is the mean over the rounds
#   --vocab N      vocabulary of the generated files (default: each model's)
#   --dir DIR      where the files are written, and kept (a file already there is reused);
#                  default: a temporary directory under $TMPDIR, deleted at the end
#
# Environment: LLAMA_BENCH llama.cpp's llama-bench binary (required: `bash ../shared/peer/build-llamacpp.sh
# DIR` builds one on Debian 12 in ~13 min, at DIR/src/build/bin/llama-bench); VKVECTOR the vkvector binary
# (default: build/vkvector of this checkout); GGML_VK_VISIBLE_DEVICES the device llama.cpp uses (default 0)
# and VKVECTOR_DEVICE vkvector's (default: the best one): with several devices, set both to the same.
# Progress goes to stderr, the table to stdout. A row whose file neither program can run says why
# (e.g. "gen_model: ..." or "llama.cpp: ...") instead of failing the run. README.md, "Speed", describes it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
die() { echo "peer_bench: $*" >&2; exit 2; }

shapes=smollm2-135m:8,qwen3-0.6b:4,llama-3.2-1b:2
types=f16,q8_0,q4_0,q4_K_M,q5_K_M,q6_K,iq4_xs
layers="" n_pp=128 n_tg=16 reps=1 rounds=2 vocab="" pure=0 dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage 0 ;;
    --pure) pure=1; shift; continue ;;
    --shapes|--types|--layers|-p|-n|--reps|--rounds|--vocab|--dir) [ $# -ge 2 ] || die "$1 needs a value" ;;
    *) die "unknown option '$1' (--help lists them)" ;;
  esac
  case "$1" in
    --shapes) shapes=$2 ;; --types) types=$2 ;; --layers) layers=$2 ;; -p) n_pp=$2 ;; -n) n_tg=$2 ;;
    --reps) reps=$2 ;; --rounds) rounds=$2 ;; --vocab) vocab=$2 ;; --dir) dir=$2 ;;
  esac
  shift 2
done
for v in "$n_pp" "$n_tg" "$reps" "$rounds" ${layers:+"$layers"} ${vocab:+"$vocab"}; do
  [[ "$v" =~ ^[0-9]+$ ]] || die "'$v' is not a whole number"
done
if [ "$reps" -lt 1 ] || [ "$rounds" -lt 1 ]; then die "--reps and --rounds want at least 1"; fi

if [ -z "${LLAMA_BENCH:-}" ] || [ ! -x "$LLAMA_BENCH" ]; then
  bad=""
  [ -n "${LLAMA_BENCH:-}" ] && bad=" ($LLAMA_BENCH is not an executable file)"
  echo "peer_bench: set LLAMA_BENCH to llama.cpp's llama-bench binary$bad." >&2
  echo "  Build one (Debian 12, Vulkan backend with lavapipe, ~13 min on 2 cores):" >&2
  echo "    bash ../shared/peer/build-llamacpp.sh DIR   # then LLAMA_BENCH=DIR/src/build/bin/llama-bench" >&2
  exit 2
fi
vkvector=${VKVECTOR:-$here/../build/vkvector}
[ -x "$vkvector" ] || die "no vkvector binary at $vkvector (build it, or set VKVECTOR)"
export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
python=/usr/bin/python3   # Debian's numpy lives under Debian's interpreter (tools/setup.sh)
[ -x "$python" ] || python=python3

if [ -n "$dir" ]; then
  mkdir -p "$dir"; work=$(mktemp -d "$dir/.peer_bench.XXXXXX"); trap 'rm -rf "$work"' EXIT
else
  dir=$(mktemp -d "${TMPDIR:-/tmp}/peer_bench.XXXXXX"); work=$dir; trap 'rm -rf "$dir"' EXIT
fi

mixes=" q2_K q3_K_S q3_K_M q3_K_L q4_K_S q4_K_M q5_K_S q5_K_M q6_K q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl iq4_xs "
# One line per result in $work/results: FILE<TAB>KEY<TAB>VALUE (KEY: vkv_pp vkv_tg llama_pp llama_tg, or
# error, device, llama_build); the table comes from these at the end.
results=$work/results
: > "$results"
note() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$results"; }
# why FILE: the first line of a program's stderr that says what failed, else its last line.
why() {
  { grep -iE 'error|fail|unsupported|not supported|cannot|invalid' "$1" || grep -v '^[[:space:]]*$' "$1" | tail -1; } \
    | head -1 | cut -c1-120 | tr '|\t' '/ '
}

# vkv FILE: one round of `vkvector bench -m`; its pp / tg means from the Markdown rows.
vkv() {
  local f=$1 out=$work/vkv.out
  if ! "$vkvector" bench -m "$f" -p "$n_pp" -n "$n_tg" --reps "$reps" > "$out" 2> "$work/vkv.err"; then
    note "$f" error "vkvector: $(why "$work/vkv.err" || true)"; cat "$work/vkv.err" >&2; return 1
  fi
  awk -F'|' -v f="$f" '$6 ~ /^ *(pp|tg)[0-9]+ *$/ {
      t = $6; gsub(/ /, "", t); v = $7; sub(/ *±.*/, "", v); gsub(/ /, "", v)
      printf "%s\tvkv_%s\t%s\n", f, substr(t, 1, 2), v
      d = $5; sub(/^ *Vulkan \(/, "", d); sub(/\) *$/, "", d); printf "%s\tdevice\t%s\n", f, d }' "$out" >> "$results"
}

# llama FILE: one round of llama-bench, its JSON parsed for the pp / tg averages and the build.
llama() {
  local f=$1 out=$work/llama.json
  if ! "$LLAMA_BENCH" -m "$f" -p "$n_pp" -n "$n_tg" -r "$reps" -ngl 99 -o json > "$out" 2> "$work/llama.err"; then
    note "$f" error "llama.cpp: $(why "$work/llama.err" || true)"; tail -5 "$work/llama.err" >&2; return 1
  fi
  "$python" - "$f" "$out" >> "$results" <<'PY' || { note "$f" error "llama.cpp: unreadable JSON output"; return 1; }
import json, sys
f, path = sys.argv[1], sys.argv[2]
text = open(path).read()
rows = json.loads(text[text.index("["):])   # anything printed before the array is not ours
for r in rows:
    test = "pp" if int(r.get("n_gen", 0)) == 0 else "tg"
    print("%s\tllama_%s\t%s" % (f, test, float(r["avg_ts"])))
    build = "%s (build %s)" % (r.get("build_commit", "?"), r.get("build_number", "?"))
    print("%s\tllama_build\t%s" % (f, build))
    print("%s\tllama_device\t%s" % (f, r.get("gpu_info") or r.get("backends", "?")))
PY
}

files=()
IFS=, read -ra shape_list <<< "$shapes"
IFS=, read -ra type_list <<< "$types"
for sh in "${shape_list[@]}"; do
  preset=${sh%%:*} nl=""
  [ "$preset" != "$sh" ] && nl=${sh#*:}
  [ -n "$layers" ] && nl=$layers
  for ty in "${type_list[@]}"; do
    kind=(--type "$ty")
    [ "$pure" = 0 ] && [[ "$mixes" == *" $ty "* ]] && kind=(--mix "$ty")
    suffix=${vocab:+-v$vocab}
    [ "$pure" = 1 ] && suffix=-pure$suffix
    f="$dir/$preset-${nl:-all}L-$ty$suffix.gguf"
    files+=("$f")
    printf '%s\tshape\t%s\n%s\tlayers\t%s\n%s\ttype\t%s\n' "$f" "$preset" "$f" "${nl:-all}" "$f" "$ty" >> "$results"
    if [ ! -s "$f" ]; then
      echo "peer_bench: writing $f" >&2
      gen=("$python" "$here/gen_model.py" --preset "$preset" "${kind[@]}" ${nl:+--layers "$nl"} ${vocab:+--vocab "$vocab"})
      if ! "${gen[@]}" -o "$f.part" > "$work/gen.log" 2>&1; then
        note "$f" error "gen_model: $(tail -1 "$work/gen.log" | cut -c1-120)"; rm -f "$f.part"; continue
      fi
      mv "$f.part" "$f"
    fi
    for ((k = 1; k <= rounds; k++)); do
      echo "peer_bench: $(basename "$f") round $k/$rounds: vkvector" >&2
      vkv "$f" || true
      echo "peer_bench: $(basename "$f") round $k/$rounds: llama-bench" >&2
      llama "$f" || true
    done
  done
done

vkv_version=$("$vkvector" --version 2>/dev/null | head -1 || true)
[ -n "$vkv_version" ] || vkv_version=$(git -C "$here/.." describe --always --dirty 2>/dev/null || echo unknown)
"$python" - "$results" "$n_pp" "$n_tg" "$reps" "$rounds" "$vkv_version" <<'PY'
import sys, time
path, n_pp, n_tg, reps, rounds, vkv_version = sys.argv[1:7]
files, info = [], {}
for line in open(path):
    f, key, value = line.rstrip("\n").split("\t", 2)
    if f not in info:
        files.append(f)
        info[f] = {}
    info[f].setdefault(key, []).append(value)
def first(key):
    for f in files:
        if key in info[f]:
            return info[f][key][0]
    return "?"
def mean(d, key):
    v = [float(x) for x in d.get(key, [])]
    return sum(v) / len(v) if v else None
def fmt(x):
    return "-" if x is None else "%.2f" % x
def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else "%.2f" % (a / b)
print("# vkvector vs llama.cpp, side by side on %s, %s UTC" % (first("device"), time.strftime("%Y-%m-%d %H:%M", time.gmtime())))
print()
print("vkvector %s; llama.cpp %s (Vulkan device: %s); each figure the mean of %s rounds, the two programs "
      "alternated, %s timed run(s) each after a warm-up; tokens/s; ratio = vkvector / llama.cpp (> 1: vkvector faster)"
      % (vkv_version, first("llama_build"), first("llama_device"), rounds, reps))
print()
pp, tg = "pp%s" % n_pp, "tg%s" % n_tg
print("| shape | layers | type | %s vkvector | %s llama.cpp | %s ratio | %s vkvector | %s llama.cpp | %s ratio | note |"
      % (pp, pp, pp, tg, tg, tg))
print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for f in files:
    d = info[f]
    a, b, c, e = (mean(d, k) for k in ("vkv_pp", "llama_pp", "vkv_tg", "llama_tg"))
    note = "; ".join(dict.fromkeys(d.get("error", [])))
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (d["shape"][0], d["layers"][0], d["type"][0],
          fmt(a), fmt(b), ratio(a, b), fmt(c), fmt(e), ratio(c, e), note))
PY
