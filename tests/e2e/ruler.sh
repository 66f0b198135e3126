#!/usr/bin/env bash
# The RULER harness end to end at toy scale on the default model, from both
# data sources: kvpress's rows (tests/data/kvpress_ruler.jsonl) and samples
# generated here (two tasks at 512 tokens, sharded, by RULER's head rules).
# Checks the result lines and their scores (RULER's string_match_all / _part
# recomputed here), a resume that adds nothing, shards that are disjoint and
# whole, the same sample from the same seed, a settings clash, the report,
# and bad input; then late 2024's rules (the default): --save-rows with
# kvpress's tokenizer (Llama 3's vocabulary, when ../shared has it) and with
# the model's, those rows run from --data as the generated run runs them,
# and a results file of one version refusing the other.
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
model=models/vkvector-shakespeare.gguf
[ -f "$model" ] || model=$shared/models/stories260K-f32.gguf
data=tests/data/kvpress_ruler.jsonl
. "$(dirname "$0")/expect.sh"
py() { python3 - "$@"; }
common=(-m "$model" --press knorm --compression 0.5 --max-new-tokens 4 --quiet)
run() { "$vkv" ruler "${common[@]}" "$@"; }

# ---- usage errors and bad input ----
expect 0 "usage: vkvector ruler" -- "$vkv" ruler --help
expect 0 "usage: vkvector ruler-report" -- "$vkv" ruler-report --help
expect 2 "give the results file" -- "$vkv" ruler --lengths 512
expect 2 "give the lengths to generate" -- run --out "$tmp/x.jsonl"
expect 2 "unknown task 'niah_single_9'" -- run --out "$tmp/x.jsonl" --lengths 512 --tasks niah_single_1,niah_single_9
expect 2 "--lengths wants token counts" -- run --out "$tmp/x.jsonl" --lengths 32
expect 2 "--lengths wants token counts" -- run --out "$tmp/x.jsonl" --lengths 4k
expect 2 "not a whole number of tokens" -- run --out "$tmp/x.jsonl" --lengths 512.5
expect 2 "with --data, --lengths is the one length" -- run --out "$tmp/x.jsonl" --data "$data" --lengths 512,1024
expect 2 "--shard wants I/N" -- run --out "$tmp/x.jsonl" --lengths 512 --shard 2/2
expect 1 "cannot read '$tmp/none.jsonl'" -- run --out "$tmp/x.jsonl" --data "$tmp/none.jsonl"
expect 1 "the word list: .*nowords" -- run --out "$tmp/x.jsonl" --lengths 512 --tasks cwe --words "$tmp/nowords"
expect 1 "the essay haystack: .*noessays" -- run --out "$tmp/x.jsonl" --lengths 512 --tasks niah_single_2 --essays "$tmp/noessays"
expect 2 "give one or more result files" -- "$vkv" ruler-report
expect 1 "cannot open|No such file" -- "$vkv" ruler-report "$tmp/none.jsonl"

# a malformed row: reported and skipped, or fatal with --strict
{ head -n 1 "$data"; echo '{"context": "c", "question": "q", "answer_prefix": "a", "answer": [], "task": "vt", "max_new_tokens": 30}';
  echo '{"context": "cut short'; } > "$tmp/bad.jsonl"
expect 0 "bad.jsonl:2: malformed row skipped: \"answer\" is not a non-empty array" -- run --out "$tmp/bad_out.jsonl" --data "$tmp/bad.jsonl"
expect 1 "bad.jsonl:2: malformed row: " -- run --out "$tmp/strict.jsonl" --data "$tmp/bad.jsonl" --strict
[ "$(wc -l < "$tmp/bad_out.jsonl")" -eq 1 ] && ok || bad "the good row of bad.jsonl was not run once"

# ---- kvpress's rows ----
expect 0 "5 new results" -- run --out "$tmp/data_out.jsonl" --data "$data"
expect 0 "0 new results" -- run --out "$tmp/data_out.jsonl" --data "$data"
[ "$(wc -l < "$tmp/data_out.jsonl")" -eq 5 ] && ok || bad "the resumed data run wrote lines again"
# another setting into the same file is refused
expect 2 "holds a result of other settings" -- "$vkv" ruler -m "$model" --press knorm --compression 0.25 \
  --max-new-tokens 4 --quiet --out "$tmp/data_out.jsonl" --data "$data"

# The lines: kvpress's protocol, the rows' answers, and each score RULER's
# metric of the prediction (part for qa, all for the others).
check_lines() {
py "$@" <<'PY'
import json, re, sys
want_tasks = {}
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        assert r["protocol"] == "kvpress" and r["press"] == "knorm" and r["compression"] == 0.5, r
        assert r["generated_tokens"] <= 4 and r["compressed_tokens"] > 0, r
        pred = re.sub(r"[\x00-\x1f]", "", r["pred"].strip()).strip().lower()
        hits = [a.lower() in pred for a in r["answer"]]
        want = float(any(hits)) if r["task"].startswith("qa") else sum(hits) / len(hits)
        assert abs(r["score"] - want) < 1e-9, (r["score"], want, r)
        want_tasks[r["task"]] = want_tasks.get(r["task"], 0) + 1
print(want_tasks)
PY
}
check_lines "$tmp/data_out.jsonl" >/dev/null && ok || bad "data lines: $(head -c 1500 "$tmp/data_out.jsonl")"
py "$tmp/data_out.jsonl" <<'PY' && ok || bad "data lines' tasks and answers"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["task"] for r in rows] == ["niah_single_1", "niah_single_1", "vt", "qa_1", "qa_2"], rows
assert [r["index"] for r in rows] == [0, 1, 0, 0, 0]
assert rows[0]["answer"] == ["4120937"] and rows[2]["answer"] == ["QXKZT", "MBRLA", "HOTVE"]
assert all(r["source"] == "data" and r["length"] == 4096 and r["seed"] is None for r in rows)
assert [r["max_new_tokens"] for r in rows] == [4] * 5
PY

# ---- generated samples, in two shards ----
gen=(--lengths 512 --tasks niah_single_1,vt,qa_1 --samples 2 --seed 7 --ruler-version head)
expect 0 "qa_1 skipped: it is built from SQuAD; give its file with --squad" -- run --out "$tmp/gen0.jsonl" "${gen[@]}" --shard 0/2
expect 0 "2 new results" -- run --out "$tmp/gen1.jsonl" "${gen[@]}" --shard 1/2
expect 0 "0 new results" -- run --out "$tmp/gen0.jsonl" "${gen[@]}" --shard 0/2
check_lines "$tmp/gen0.jsonl" "$tmp/gen1.jsonl" >/dev/null && ok || bad "generated lines: $(head -c 1500 "$tmp/gen0.jsonl")"
py "$tmp/gen0.jsonl" "$tmp/gen1.jsonl" <<'PY' && ok || bad "shards: $(cat "$tmp/gen0.jsonl" "$tmp/gen1.jsonl" | head -c 1500)"
import json, sys
s0 = [json.loads(l) for l in open(sys.argv[1])]
s1 = [json.loads(l) for l in open(sys.argv[2])]
key = lambda r: (r["task"], r["index"])
assert sorted(map(key, s0)) == [("niah_single_1", 0), ("vt", 0)], s0
assert sorted(map(key, s1)) == [("niah_single_1", 1), ("vt", 1)], s1
for r in s0 + s1:
    assert r["source"] == "generated" and r["seed"] == 7 and r["length"] == 512
    # filled to the length: the prompt and the task's generation (kvpress's 128 / 30) fit it, closely
    # (RULER counts the text's tokens: BOS, and the parts tokenized apart, may add one or two)
    gen = 128 if r["task"].startswith("niah") else 30
    assert 512 - 60 < r["prompt_tokens"] + gen <= 512 + 2, r
    assert len(r["answer"]) == (1 if r["task"].startswith("niah") else 5), r
PY
# the same seed gives the same sample, so the same greedy answer
run --out "$tmp/again.jsonl" --lengths 512 --tasks niah_single_1 --samples 1 --seed 7 --ruler-version head 2>/dev/null
py "$tmp/gen0.jsonl" "$tmp/again.jsonl" <<'PY' && ok || bad "seed 7 again gave another sample"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if '"niah_single_1"' in l][0]
b = json.loads(open(sys.argv[2]).readline())
assert (a["answer"], a["prompt_tokens"], a["pred"]) == (b["answer"], b["prompt_tokens"], b["pred"]), (a, b)
PY

# generated qa_1 from a SQuAD-layout file: the gold paragraph and its answer
cat > "$tmp/squad.json" <<'JSON'
{"data": [{"paragraphs": [{"context": "The king of Denmark lived in the castle of Elsinore.", "qas": [{"question": "Where did the king of Denmark live?", "answers": [{"text": "Elsinore"}], "is_impossible": false}]}, {"context": "The prince walked by the sea.", "qas": []}]}, {"paragraphs": [{"context": "Romeo was a Montague of Verona.", "qas": []}]}]}
JSON
expect 0 "qa_2 skipped: it is built from HotpotQA" -- run --out "$tmp/qa.jsonl" --lengths 256 --tasks qa_1,qa_2 --samples 1 \
  --squad "$tmp/squad.json" --ruler-version head
py "$tmp/qa.jsonl" <<'PY' && ok || bad "generated qa_1: $(cat "$tmp/qa.jsonl")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 1 and rows[0]["task"] == "qa_1" and rows[0]["answer"] == ["Elsinore"], rows
assert 256 - 60 < rows[0]["prompt_tokens"] + 32 <= 256 + 4, rows  # BOS and the parts tokenized apart
PY
echo '[{"question": "q", "answer": "a", "context": []}]' > "$tmp/hotpot_as_squad.json"
expect 1 "not SQuAD's layout" -- run --out "$tmp/x.jsonl" --lengths 256 --tasks qa_1 --squad "$tmp/hotpot_as_squad.json"

# ---- a --compression list: each p_c in turn, into one file ----
expect 2 "--compression wants a number in \[0, 1\) or a comma list of up to 16, got '0.5,1'" -- \
  run --out "$tmp/x.jsonl" --lengths 256 --compression 0.5,1
expect 2 "--compression wants a number in \[0, 1\), got '0.25,0.5'" -- \
  "$vkv" niah -m "$model" --press knorm --compression 0.25,0.5 --out "$tmp/x.jsonl"
sweep=(--lengths 512 --tasks niah_single_1 --samples 1 --seed 3 --ruler-version head)
expect 0 "2 new results" -- run --out "$tmp/sweep.jsonl" "${sweep[@]}" --compression 0.25,0.5
expect 0 "0 new results" -- run --out "$tmp/sweep.jsonl" "${sweep[@]}" --compression 0.5,0.25
# a longer list resumes the ratios it shares and runs the new one
expect 0 "1 new results" -- run --out "$tmp/sweep.jsonl" "${sweep[@]}" --compression 0.25,0.5,0.75
# the single-ratio run of the same sample gives the same line as the sweep's
run --out "$tmp/single.jsonl" "${sweep[@]}" --compression 0.75 2>/dev/null
summary=$(run --out "$tmp/sweep.jsonl" "${sweep[@]}" --compression 0.25,0.5,0.75 2>/dev/null)
grep -q "^task,compression,length,samples,score$" <<<"$summary" && grep -q "^niah_single_1,0.75,512,1," <<<"$summary" &&
  grep -q "^niah_single_1,0.25,512,1," <<<"$summary" && ok || bad "sweep summary: $summary"
py "$tmp/sweep.jsonl" "$tmp/single.jsonl" <<'PY' && ok || bad "sweep lines: $(head -c 1500 "$tmp/sweep.jsonl")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
single = json.loads(open(sys.argv[2]).readline())
assert [r["compression"] for r in rows] == [0.25, 0.5, 0.75], rows
assert len({r["answer"][0] for r in rows}) == 1 and all(r["index"] == 0 and r["length"] == 512 for r in rows), rows
# more compression keeps fewer pairs, and p_c 0.75 alone is the sweep's p_c 0.75
kv = [r["kv_bytes"] for r in rows]
assert kv[0] > kv[1] > kv[2], kv
keep = lambda r: (r["pred"], r["prompt_tokens"], r["kv_bytes"], r["score"])
assert keep(rows[2]) == keep(single), (rows[2], single)
PY
sweep_report=$("$vkv" ruler-report --csv "$tmp/sweep.jsonl" 2>/dev/null)
for pc in 0.25 0.5 0.75; do
  grep -q "^vkvector-shakespeare,knorm,$pc,512," <<<"$sweep_report" || { bad "report of the sweep lacks p_c $pc: $sweep_report"; continue; }
  ok
done

# ---- the report ----
out=$("$vkv" ruler-report "$tmp/data_out.jsonl" "$tmp/gen0.jsonl" "$tmp/gen1.jsonl" "$tmp/gen0.jsonl" 2>"$tmp/report.err")
[ $? -eq 0 ] && ok || bad "ruler-report failed: $(cat "$tmp/report.err")"
grep -q "| model | method | p_c | length | niah_single_1 | vt | qa_1 | qa_2 | average |" <<<"$out" && ok || bad "report header: $out"
grep -qE "^\| vkvector-shakespeare \| knorm \| 0.5 \| 512 \| [0-9.]+ \| [0-9.]+ \| - \| - \| [0-9.]+ \|$" <<<"$out" && ok || bad "report's 512 row: $out"
grep -q "2 repeated samples counted once" "$tmp/report.err" && ok || bad "report duplicates: $(cat "$tmp/report.err")"
grep -q "no results for niah_single_2" "$tmp/report.err" && ok || bad "report's missing tasks: $(cat "$tmp/report.err")"
# the average per setting: the mean of the (task, length) cells' mean scores
csv=$("$vkv" ruler-report --csv "$tmp/data_out.jsonl" "$tmp/gen0.jsonl" "$tmp/gen1.jsonl" 2>/dev/null)
py "$tmp/data_out.jsonl" "$tmp/gen0.jsonl" "$tmp/gen1.jsonl" "$csv" <<'PY' && ok || bad "report average: $csv"
import json, sys
cells = {}
for path in sys.argv[1:4]:
    for l in open(path):
        r = json.loads(l)
        cells.setdefault((r["task"], r["length"]), []).append(r["score"])
want = sum(100 * sum(v) / len(v) for v in cells.values()) / len(cells)
line = [l for l in sys.argv[4].splitlines() if l.startswith("vkvector-shakespeare,knorm,0.5,") and l.count(",") == 4][0]
assert abs(float(line.split(",")[3]) - want) < 0.006 and int(line.split(",")[4]) == len(cells), (line, want)
PY

# ---- late 2024's rules (the default), --ruler-version and --save-rows ----
expect 2 "--ruler-version wants 2024 \(or e40fae1\) or head, got '2023'" -- \
  run --out "$tmp/x.jsonl" --lengths 512 --ruler-version 2023
expect 2 "--save-rows writes generated samples: give --lengths, not --data" -- \
  "$vkv" ruler --save-rows "$tmp/r.jsonl" --data "$data"
expect 2 "--save-rows writes the samples and runs nothing: leave out --out" -- \
  "$vkv" ruler --save-rows "$tmp/r.jsonl" --out "$tmp/x.jsonl" --lengths 1024
# 512 tokens cannot hold late 2024's first step of 5 noise lines in this model's tokens: said, not run
expect 0 "too short for late-2024 RULER's first haystack step \(5 units\)" -- \
  run --out "$tmp/short.jsonl" --lengths 512 --tasks niah_single_1 --samples 1

# kvpress's rows were made with Llama 3's tokenizer: rows of both versions at 4096 tokens, no model run
llama=$shared/vocab/ggml-vocab-llama-bpe.gguf
if [ -f "$llama" ]; then
  five=(--lengths 4096 --tasks niah_single_2,niah_multikey_1,vt,cwe,fwe --samples 3)
  expect 0 "15 rows \(RULER 2024, seed 42\)" -- "$vkv" ruler -m "$llama" --save-rows "$tmp/rows2024.jsonl" "${five[@]}"
  expect 0 "15 rows \(RULER head, seed 42\)" -- "$vkv" ruler -m "$llama" --save-rows "$tmp/rows_head.jsonl" "${five[@]}" \
    --ruler-version head
  rows=("$tmp/rows2024.jsonl" "$tmp/rows_head.jsonl" "$vkv" "$llama" "$shared/data/paul_graham_essays")
  py "${rows[@]}" <<'PY' && ok || bad "late 2024's rows against head's"
import collections, json, os, re, subprocess, sys
def rows(path):
    out = collections.defaultdict(list)
    for l in open(path):
        r = json.loads(l)
        assert r["length"] == 4096 and r["max_new_tokens"] in (128, 30, 120, 50), r
        out[r["task"]].append(r)
    return out
late, head = rows(sys.argv[1]), rows(sys.argv[2])
def tokens(r):
    text = r["context"] + r["question"] + r["answer_prefix"]
    ids = subprocess.run([sys.argv[3], "tokenize", "-m", sys.argv[4], "--file", "-"], input=text.encode(),
                         capture_output=True, check=True).stdout.split()
    return len(ids)
for task in ("niah_single_2", "niah_multikey_1", "vt", "cwe", "fwe"):
    assert len(late[task]) == 3 and len(head[task]) == 3, task
    assert all(r["ruler_version"] == "2024" for r in late[task]) and all(r["ruler_version"] == "head" for r in head[task])
    for r in late[task]:
        n = tokens(r)
        # late 2024's fwe fits its prompt alone, the others prompt and generation; head fills closer
        assert n + (0 if task == "fwe" else r["max_new_tokens"]) <= 4096, (task, n)
    for r in head[task]:
        n = tokens(r)
        assert 4096 - 150 < n + r["max_new_tokens"] <= 4096, (task, n)
# the essay haystack: the essays' first N words, N a whole number of RULER's 500-word steps
# (compared without spaces: RULER's sentence joins add some, as in "good. [2]")
essays = "".join(open(os.path.join(sys.argv[5], f)).read() for f in sorted(os.listdir(sys.argv[5])) if f.endswith(".txt"))
words = re.sub(r"\s+", " ", essays).split(" ")
needle = re.compile(r"One of the special magic numbers for \S+ is: \d+\.")
for r in late["niah_single_2"] + late["niah_multikey_1"]:
    bare = needle.sub("", r["context"].split("\n")[1]).replace(" ", "")
    n, have = 0, 0
    while have < len(bare):
        have += len(words[n])
        n += 1
    assert bare == "".join(words[:n]) and n % 500 == 0, n
# vt: one solved example for all samples, noise lines joined by spaces, "assgined"
examples = {r["context"][:r["context"].rindex("Memorize and track")] for r in late["vt"]}
assert len(examples) == 1, examples
ex = examples.pop()
assert ex.startswith(" Memorize and track the chain(s) of variable assignment hidden in the following text. The grass")
assert " in the text Answer: According to the chain(s) of variable assignment in the text above, 5 variables are assgined" in ex
assert ex.endswith("\n\n\n\n")
for r in late["vt"]:
    assert "again.\n The grass is green." in r["context"] and "again.\nThe grass" not in r["context"], r["context"][:600]
    assert "5 variables are assgined the value" in r["answer_prefix"]
for r in head["vt"]:
    assert r["context"].startswith("Memorize and track") and "again.\nThe grass" in r["context"]
    assert "5 variables are assigned the value" in r["answer_prefix"]
# cwe's solved example: "are:1." then; "are: 1." now
assert all("in the list are:1. " in r["context"] for r in late["cwe"])
assert all("in the list are: 1. " in r["context"] for r in head["cwe"])
# fwe's vocabulary: 4096 // 50 = 81 words then, (4096 - 50) // 50 = 80 now (those drawn at least once appear)
for r in late["fwe"] + head["fwe"]:
    words = r["context"].split("coded words. ")[1].split("\n")[0].split(" ")
    assert collections.Counter(words).most_common(1)[0][0] == "..." and len(set(words)) <= 81
PY
fi

# rows of this model's tokenizer, run from --data: the very samples the generated run makes
expect 0 "2 rows \(RULER 2024, seed 5\)" -- \
  "$vkv" ruler -m "$model" --save-rows "$tmp/rows.jsonl" --lengths 1024 --tasks niah_single_1 --samples 2 --seed 5
expect 0 "2 new results" -- run --out "$tmp/from_rows.jsonl" --data "$tmp/rows.jsonl" --lengths 1024
expect 0 "2 new results" -- run --out "$tmp/gen2024.jsonl" --lengths 1024 --tasks niah_single_1 --samples 2 --seed 5
py "$tmp/from_rows.jsonl" "$tmp/gen2024.jsonl" <<'PY' && ok || bad "rows run from --data: $(head -c 1500 "$tmp/from_rows.jsonl")"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert [r["index"] for r in a] == [r["index"] for r in b] == [0, 1], (a, b)
for x, y in zip(a, b):
    assert x["source"] == "data" and x["ruler_version"] is None and y["ruler_version"] == "2024", (x, y)
    assert (x["answer"], x["prompt_tokens"], x["pred"], x["length"]) == (y["answer"], y["prompt_tokens"], y["pred"], 1024)
    assert y["prompt_tokens"] + 128 <= 1024 + 2, y  # BOS and the parts tokenized apart
PY
# a results file of late 2024's samples refuses head's, and one of before --ruler-version both
expect 2 "holds a result of other settings \(.*generated data, RULER version 2024\)" -- \
  run --out "$tmp/gen2024.jsonl" --lengths 1024 --tasks niah_single_1 --samples 2 --seed 5 --ruler-version head
py "$tmp/gen2024.jsonl" > "$tmp/old.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    del r["ruler_version"]
    print(json.dumps(r))
PY
expect 2 "RULER version before --ruler-version" -- \
  run --out "$tmp/old.jsonl" --lengths 1024 --tasks niah_single_1 --samples 2 --seed 5

echo "ruler: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
