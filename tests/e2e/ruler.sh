#!/usr/bin/env bash
# The RULER harness end to end at toy scale on the default model, from both
# data sources: kvpress's rows (tests/data/kvpress_ruler.jsonl) and samples
# generated here (two tasks at 512 tokens, sharded). Checks the result lines
# and their scores (RULER's string_match_all / _part recomputed here), a
# resume that adds nothing, shards that are disjoint and whole, the same
# sample from the same seed, a settings clash, the report, and bad input.
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
gen=(--lengths 512 --tasks niah_single_1,vt,qa_1 --samples 2 --seed 7)
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
run --out "$tmp/again.jsonl" --lengths 512 --tasks niah_single_1 --samples 1 --seed 7 2>/dev/null
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
expect 0 "qa_2 skipped: it is built from HotpotQA" -- run --out "$tmp/qa.jsonl" --lengths 256 --tasks qa_1,qa_2 --samples 1 --squad "$tmp/squad.json"
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
sweep=(--lengths 512 --tasks niah_single_1 --samples 1 --seed 3)
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

echo "ruler: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
