#!/usr/bin/env bash
# The README's "Reproduce the paper" commands, run as written at toy scale on
# the default model, so that a renamed flag or a changed file format fails CI.
#
# The block is taken from README.md and run by bash in a scratch directory
# laid out as the README assumes: the model and its calibrations under the
# paper's file names (links to the default model and its .vkcal), LongBench
# data (one sample of three tasks) in data/, LongBench's prompts in
# LongBench/config, a held-out text, a needle file. Only `vkvector` is a
# function here: it runs the binary with each scale flag's value made tiny
# (context, lengths, runs, windows; NIAH at two depths) and LongBench's answers
# capped at two tokens; every other flag and every file name is the README's.
set -u
vkv=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
root=$(pwd)
shared=${VKVECTOR_SHARED:-../shared}
shared=$(cd "$shared" 2>/dev/null && pwd) || { echo "reproduce: ../shared not found (set VKVECTOR_SHARED)"; exit 1; }
model=$root/models/vkvector-shakespeare.gguf
calib=$root/models/vkvector-shakespeare.vkcal
[ -f "$model" ] && [ -f "$calib" ] || { echo "reproduce: the default model or its calibration is missing"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The block: from "### Reproduce the paper" to the end of its first sh fence.
block=$(awk '/^### Reproduce the paper/ {on = 1} on && /^```sh$/ {inb = 1; next} inb && /^```$/ {exit} inb' "$root/README.md")
[ -n "$block" ] || { echo "FAIL: README.md has no sh block under '### Reproduce the paper'"; exit 1; }

cd "$tmp"
ln -s "$model" llama31-8b.gguf
for c in llama31-8b qwen3-14b qwen3-0.6b; do ln -s "$calib" $c.vkcal; done
mkdir -p LongBench && ln -s "$shared/longbench" LongBench/config
head -c 200000 "$shared/data/tinyshakespeare.txt" > held-out.txt
# kvpress's needle row is the user's to supply (README); here the harness's own.
printf '%s\n' '{"needle": "The best thing to do in San Francisco is eat a sandwich.",' \
  '"question": "What is the best thing to do in San Francisco?", "answer_prefix": "Answer:"}' > needle.json
mkdir -p data
python3 - data <<'PY'
import json, sys
d = sys.argv[1]
ctx = "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. " * 2
rows = {
    "hotpotqa": {"input": "Who speaks first?", "context": ctx, "answers": ["First Citizen"], "all_classes": None},
    "trec": {"input": "What city is the capital of France?",
             "context": "Question: Who was Lincoln?\nType: Human being\nQuestion: What is a cat?\nType: Animal\n",
             "answers": ["City"], "all_classes": ["City", "Animal", "Human being"]},
    "passage_retrieval_en": {"input": "A king leaves early.",
                             "context": "Paragraph 1: The king rode out at dawn.\n\nParagraph 2: The queen stayed.\n\n",
                             "answers": ["Paragraph 1"], "all_classes": None},
}
for task, r in rows.items():
    r.update({"length": len(r["context"].split()), "dataset": task, "_id": task + "0"})
    with open(f"{d}/{task}.jsonl", "w") as f:
        f.write(json.dumps(r) + "\n")
PY

# vkvector SUBCOMMAND ARGS...: the binary, each scale flag's value made tiny.
vkvector() {
  local sub=$1 args=() a next=""
  shift
  for a in "$@"; do
    if [ -n "$next" ]; then
      case $next in
        --context) a=160 ;;
        --continuation) a=16 ;;
        --windows|--runs) a=1 ;;
        --lengths) a=400 ;;
        --depths) a=0:100:2 ;;
      esac
      next=""
    else
      case $a in --context|--continuation|--windows|--runs|--lengths|--depths) next=$a ;; esac
    fi
    args+=("$a")
  done
  case $sub in
    longbench) args+=(--max-new-tokens 2 --quiet) ;;
    niah) args+=(--haystack "$shared/data/paul_graham_essays" -n 4 --depths 0,100 --quiet) ;;
  esac
  echo "+ vkvector $sub ${args[*]}" >> commands.log
  "$vkv" "$sub" "${args[@]}"
}
export -f vkvector 2>/dev/null

out=$(set -e; eval "$block" 2>&1); rc=$?
n=$(wc -l < commands.log 2>/dev/null || echo 0)
if [ "$rc" -ne 0 ]; then
  echo "FAIL: the README's reproduce block stopped with exit $rc after $n vkvector commands"
  tail -n 3 commands.log 2>/dev/null
  tail -c 2000 <<<"$out"
  echo "0 passed, 1 failed"
  exit 1
fi
# What the block promises to leave behind.
fails=0
for f in table1.md table1.html res/full.jsonl res/niah-kvzip-0.9-vector.json res/niah-kvzip-0.9-vector.html; do
  [ -s "$f" ] || { echo "FAIL: the block left no $f"; fails=$((fails + 1)); }
done
grep -q '^| Method' table1.md || { echo "FAIL: table1.md is not the report's table: $(head -c 300 table1.md)"; fails=$((fails + 1)); }
# the chart: a line per scorer and per scorer + VECTOR, and the full cache
n_series=$(grep -c '<g class="series"' table1.html)
[ "$n_series" -eq 9 ] || { echo "FAIL: table1.html has $n_series series, want 4 scorers x 2 + the full cache"; fails=$((fails + 1)); }
echo "reproduce: $n vkvector commands of the README ran at toy scale"
echo "$((8 - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
