#!/usr/bin/env bash
# The LongBench harness end to end on small LongBench-format fixtures written
# here: a QA task (with a malformed line), trec and passage_retrieval_en, run
# with the default model (stories260K while models/vkvector-shakespeare.gguf
# is absent). Checks the result lines, a resume after an interrupted run
# (killed, and cut inside a line), malformed lines (skipped / --strict),
# presses, query-aware mode, VECTOR, sharding, settings checks, and the report
# (vkvector's files, LongBench's own pred/<model>/<task>.jsonl, CSV).
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
model=models/vkvector-shakespeare.gguf
[ -f "$model" ] || model=$shared/models/stories260K-f32.gguf
prompts=$shared/longbench
[ -f "$prompts/dataset2prompt.json" ] || { echo "longbench: $prompts/dataset2prompt.json not found (set VKVECTOR_SHARED)"; exit 1; }
. "$(dirname "$0")/expect.sh"
py() { python3 - "$@"; }

# ---- fixtures: short contexts that fit the model's context ----
mkdir -p "$tmp/data"
py "$tmp/data" <<'PY'
import json, sys
d = sys.argv[1]
def dump(name, lines):
    with open(f"{d}/{name}.jsonl", "w") as f:
        for l in lines:
            f.write((l if isinstance(l, str) else json.dumps(l)) + "\n")
ctx = ["First Citizen: Before we proceed any further, hear me speak. All: Speak, speak.",
       "MENENIUS: What work's, my countrymen, in hand? where go you with bats and clubs?",
       "MARCIUS: Thanks. What's the matter, you dissentious rogues, that rubbing the poor itch?"]
qa = [{"input": "Who speaks first?", "context": c, "answers": ["First Citizen", "Citizen"], "all_classes": None,
       "length": len(c.split()), "dataset": "hotpotqa", "_id": f"hq{i}"} for i, c in enumerate(ctx)]
# line 2 is cut short, line 3 blank: the sample indices are 0 hq0, 1 (bad), 2 hq1, 3 hq2
dump("hotpotqa", [qa[0], '{"input": "broken", "context": "no end', "", qa[1], qa[2]])
classes = ["Abbreviation", "Animal", "City", "Country", "Description", "Human being"]
shots = "Question: Who was Lincoln?\nType: Human being\nQuestion: What is a cat?\nType: Animal\n"
dump("trec", [{"input": q, "context": shots, "answers": [a], "all_classes": classes, "length": 20,
               "dataset": "trec", "_id": f"tr{i}"}
              for i, (q, a) in enumerate([("What city is the capital of France?", "City"),
                                          ("What does NASA stand for?", "Abbreviation")])])
paras = "Paragraph 1: The king rode out at dawn.\n\nParagraph 2: The queen stayed in the tower.\n\n"
dump("passage_retrieval_en", [{"input": a, "context": paras, "answers": [f"Paragraph {k}"], "all_classes": None,
                               "length": 30, "dataset": "passage_retrieval_en", "_id": f"pr{k}"}
                              for k, a in [(1, "A king leaves early."), (2, "A queen remains.")]])
PY
common=(-m "$model" --data "$tmp/data" --prompts "$prompts" --max-new-tokens 4 --quiet)
run() { "$vkv" longbench "${common[@]}" "$@"; }

# ---- usage errors ----
expect 0 "usage: vkvector longbench" -- "$vkv" longbench --help
expect 0 "usage: vkvector longbench-report" -- "$vkv" longbench-report --help
expect 2 "give the LongBench data directory" -- "$vkv" longbench --out "$tmp/x.jsonl"
expect 2 "give the results file" -- "$vkv" longbench --data "$tmp/data"
expect 2 "--shard wants I/N" -- run --out "$tmp/x.jsonl" --shard 2/2
expect 2 "unknown task 'nope'" -- run --out "$tmp/x.jsonl" --tasks nope
expect 2 "--press needs --compression" -- run --out "$tmp/x.jsonl" --press knorm
expect 2 "unknown press" -- run --out "$tmp/x.jsonl" --press nope --compression 0.5
expect 1 "cannot read .*lcc.jsonl" -- run --out "$tmp/x.jsonl" --tasks lcc
expect 2 "give one or more result files" -- "$vkv" longbench-report

# ---- a run interrupted twice, then resumed ----
full=$tmp/full.jsonl
# 1. only the QA task: the malformed line is reported by number and skipped
expect 0 "hotpotqa.jsonl:2: malformed sample skipped" -- run --out "$full" --tasks hotpotqa
[ "$(wc -l < "$full")" -eq 3 ] && ok || bad "the QA run wrote $(wc -l < "$full") lines, want 3"
first=$(head -n 3 "$full")
# 2. a crash in the middle of writing a line: a cut line without its newline
printf '{"pred": "cut sho' >> "$full"
# 3. a run killed while it works
"$vkv" longbench "${common[@]}" --out "$full" > "$tmp/kill.log" 2>&1 &
pid=$!
sleep 1
kill -TERM "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
# 4. the resume: every sample once, earlier lines untouched
expect 0 "ends inside a line|new results" -- run --out "$full"
expect 0 "0 new results" -- run --out "$full"
[ "$(head -n 3 "$full")" = "$first" ] && ok || bad "the resume rewrote earlier lines"
py "$full" <<'PY' && ok || bad "resumed results: $(cat "$full")"
import json, sys
ids, bad = [], 0
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        bad += 1
        continue
    ids.append((r["dataset"], r["_id"]))
    for k in ("pred", "answers", "all_classes", "length", "dataset", "_id", "score", "model", "press", "compression",
              "vector", "pa", "query_aware", "prompt_tokens", "generated_tokens", "prefill_s", "generate_s",
              "kv_bytes", "kv_bytes_full"):
        assert k in r, k
    assert r["press"] is None and r["vector"] is False and r["pa"] is None and r["compression"] == 0
    assert 0 <= r["score"] <= 1 and 1 <= r["generated_tokens"] <= 4
    assert r["kv_bytes"] == r["kv_bytes_full"] > 0
    if r["dataset"] == "trec":
        assert r["all_classes"][0] == "Abbreviation" and r["chat_template"] is False
assert bad == 1, bad                     # the cut line stays, as one malformed line
assert sorted(ids) == sorted(set(ids)), ids
assert sorted(ids) == sorted([("hotpotqa", "hq0"), ("hotpotqa", "hq1"), ("hotpotqa", "hq2"), ("trec", "tr0"),
                              ("trec", "tr1"), ("passage_retrieval_en", "pr1"), ("passage_retrieval_en", "pr2")]), ids
PY
# --strict: the malformed line is fatal (shard 1/2 holds sample 1, the bad one, first)
expect 1 "hotpotqa.jsonl:2: malformed sample" -- run --out "$tmp/strict.jsonl" --tasks hotpotqa --shard 1/2 --strict
# another setting into the same file is refused
expect 2 "holds a result of other settings" -- run --out "$full" --press knorm --compression 0.5

# ---- presses, query-aware, VECTOR ----
expect 0 "new results" -- run --out "$tmp/knorm.jsonl" --press knorm --compression 0.5 --tasks hotpotqa,trec --limit 1
expect 0 "new results" -- run --out "$tmp/knorm-qa.jsonl" --press knorm --compression 0.5 --query-aware --tasks trec --limit 1
expect 0 "new results" -- run --out "$tmp/knorm-qa-lb.jsonl" --press knorm --compression 0.5 --query-aware --tasks trec --limit 1 \
  --protocol longbench
calib=models/vkvector-shakespeare.vkcal
if [ "$model" != models/vkvector-shakespeare.gguf ] || [ ! -f "$calib" ]; then
  calib=$tmp/c.vkcal
  "$vkv" calib -m "$model" --corpus "$shared/data/tinyshakespeare.txt" --tokens 512 --seq-len 128 --ridge 1e-4 \
    -o "$calib" > "$tmp/calib.log" 2>&1 || bad "calibration: $(tail -3 "$tmp/calib.log")"
fi
expect 0 "new results" -- run --out "$tmp/vector.jsonl" --press snapkv --compression 0.5 --vector --calib "$calib" \
  --tasks passage_retrieval_en --limit 1
py "$tmp/knorm.jsonl" "$tmp/knorm-qa.jsonl" "$tmp/vector.jsonl" "$tmp/knorm-qa-lb.jsonl" <<'PY' && ok || bad "press result lines"
import json, sys
k = [json.loads(l) for l in open(sys.argv[1])]
q = [json.loads(l) for l in open(sys.argv[2])]
v = [json.loads(l) for l in open(sys.argv[3])]
qlb = [json.loads(l) for l in open(sys.argv[4])]
assert len(k) == 2 and len(q) == 1 and len(v) == 1
for r in k:   # query-agnostic: the context is compressed, the question comes after
    assert r["press"] == "knorm" and r["compression"] == 0.5 and r["query_aware"] is False
    assert 0 < r["compressed_tokens"] < r["prompt_tokens"], r
    assert abs(r["kv_bytes"] / r["kv_bytes_full"] - 0.5) < 0.02, r
# kvpress (the default protocol): the question is compressed with the context, the answer prefix
# comes after; THUDM's: the whole prompt is compressed
assert q[0]["query_aware"] is True and q[0]["protocol"] == "kvpress", q[0]
assert q[0]["compressed_tokens"] < q[0]["prompt_tokens"], q[0]
assert qlb[0]["protocol"] == "longbench" and qlb[0]["compressed_tokens"] == qlb[0]["prompt_tokens"], qlb[0]
assert all(r["protocol"] == "kvpress" for r in k + v)
r = v[0]
assert r["press"] == "snapkv" and r["vector"] is True and abs(r["pa"] - 0.25) < 1e-3
assert r["query_aware"] is True, r   # snapkv's own mode, as the paper ran it
assert abs(r["kv_bytes"] / r["kv_bytes_full"] - 0.5) < 0.02, r   # 2 n_kept rows either way
PY

# A p_a list: one results file per value, and the report's column per p_a (the baseline as p_a 0)
expect 0 "new results" -- run --out "$tmp/sweep.jsonl" --press snapkv --compression 0.5 --vector --calib "$calib" \
  --pa 0,0.25 --tasks passage_retrieval_en --limit 1
expect 0 "new results" -- run --out "$tmp/sweep-base.jsonl" --press snapkv --compression 0.5 --tasks passage_retrieval_en --limit 1
out=$("$vkv" longbench-report --by-pa "$tmp/sweep.pa0.jsonl" "$tmp/sweep.pa0.25.jsonl" "$tmp/sweep-base.jsonl" 2>&1)
grep -qE "^\| Model \| Method \| Mode \| p_c \| baseline \| p_a 0 \| p_a 0.25 \|$" <<<"$out" &&
  grep -qE "^\| [^|]+ \| snapkv \| query-aware \| 0.5 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$" <<<"$out" && ok || bad "p_a report: $out"
expect 2 "too large for --compression" -- run --out "$tmp/x.jsonl" --press snapkv --compression 0.5 --vector --pa 0.1,0.6

# kvpress's max_context_length keeps the context part's first N tokens; the question is never cut
expect 0 "new results" -- run --out "$tmp/cut.jsonl" --press knorm --compression 0.5 --max-length 16 --tasks hotpotqa --limit 1
py "$tmp/cut.jsonl" <<'PY' && ok || bad "kvpress context cut"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["truncated"] is True and r["compressed_tokens"] == 16, r
assert r["prompt_tokens_untruncated"] > r["prompt_tokens"] > 16, r
PY

# ---- shards: disjoint, together the whole ----
for s in 0 1; do
  expect 0 "new results" -- run --out "$tmp/shard$s.jsonl" --tasks trec,passage_retrieval_en --shard $s/2
done
py "$tmp/shard0.jsonl" "$tmp/shard1.jsonl" <<'PY' && ok || bad "shards"
import json, sys
a = {(json.loads(l)["dataset"], json.loads(l)["_id"]) for l in open(sys.argv[1])}
b = {(json.loads(l)["dataset"], json.loads(l)["_id"]) for l in open(sys.argv[2])}
assert a == {("trec", "tr0"), ("passage_retrieval_en", "pr1")}, a
assert b == {("trec", "tr1"), ("passage_retrieval_en", "pr2")}, b
PY

# ---- the report ----
expect 0 "^\| full \| 0 \|.*\|$" -- "$vkv" longbench-report "$full" "$tmp/knorm.jsonl"
out=$("$vkv" longbench-report "$full" "$tmp/knorm.jsonl" "$tmp/vector.jsonl" "$tmp/shard0.jsonl" "$tmp/shard1.jsonl" 2>"$tmp/rep.err")
# knorm ran query-agnostic and snapkv query-aware (each scorer's own mode): the report says which
grep -qE "^\| Method \| Mode \| p_c \| HotpotQA \| TREC \| PRe \| Avg \|$" <<<"$out" && ok || bad "report header: $out"
grep -qE "^\| knorm \| query-agnostic \| 0.5 \|" <<<"$out" && ok || bad "report knorm row: $out"
grep -qE "^\| snapkv \+ VECTOR \| query-aware \| 0.5 \| — \| — \|" <<<"$out" && ok || bad "report VECTOR row: $out"
grep -q "duplicates ignored" "$tmp/rep.err" && ok || bad "shards merged with the full run count once: $(cat "$tmp/rep.err")"
grep -q "full.jsonl:[0-9]*: malformed line skipped" "$tmp/rep.err" && ok || bad "report of the cut line: $(cat "$tmp/rep.err")"
expect 1 "malformed line" -- "$vkv" longbench-report --strict "$full"
# CSV: each task score is 100 x the mean of the lines' scores, 2 decimals
"$vkv" longbench-report --csv "$full" > "$tmp/rep.csv" 2>/dev/null
py "$full" "$tmp/rep.csv" <<'PY' && ok || bad "CSV report: $(cat "$tmp/rep.csv")"
import csv, json, sys
lines = []
for l in open(sys.argv[1]):
    try: lines.append(json.loads(l))
    except ValueError: pass
rows = list(csv.DictReader(open(sys.argv[2])))
assert len(rows) == 1 and rows[0]["press"] == "" and rows[0]["compression"] == "0"
tasks = ["hotpotqa", "trec", "passage_retrieval_en"]
for t in tasks:
    s = [r["score"] for r in lines if r["dataset"] == t]
    assert rows[0][t] == "%.2f" % (100 * sum(s) / len(s)), (t, rows[0][t], s)
assert abs(float(rows[0]["avg"]) - sum(float(rows[0][t]) for t in tasks) / 3) < 0.006
PY
# LongBench's own prediction files: task from the file name, scores recomputed
mkdir -p "$tmp/pred/llama2-7b-chat-4k"
cat > "$tmp/pred/llama2-7b-chat-4k/trec.jsonl" <<'EOF'
{"pred": "City\nCountry", "answers": ["City"], "all_classes": ["City", "Country"], "length": 10}
{"pred": "Country", "answers": ["City"], "all_classes": ["City", "Country"], "length": 10}
EOF
cat > "$tmp/pred/llama2-7b-chat-4k/passage_count.jsonl" <<'EOF'
{"pred": "There are 12 or 13.", "answers": ["12"], "all_classes": null, "length": 100}
not json
EOF
expect 0 "^\| full \| 0 \| 50.00 \| 50.00 \| 50.00 \|$" -- "$vkv" longbench-report "$tmp/pred/llama2-7b-chat-4k/trec.jsonl" \
  "$tmp/pred/llama2-7b-chat-4k/passage_count.jsonl"
expect 0 "passage_count.jsonl:2: malformed line skipped" -- "$vkv" longbench-report "$tmp/pred/llama2-7b-chat-4k/trec.jsonl" \
  "$tmp/pred/llama2-7b-chat-4k/passage_count.jsonl"
expect 0 "^llama2-7b-chat-4k,,false,,false,0,50.00,50.00,50.00$" -- "$vkv" longbench-report --csv \
  "$tmp/pred/llama2-7b-chat-4k/trec.jsonl" "$tmp/pred/llama2-7b-chat-4k/passage_count.jsonl"

echo "longbench: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
