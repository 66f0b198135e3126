#!/usr/bin/env bash
# Needle in a haystack end to end with the default model (stories260K while
# models/vkvector-shakespeare.gguf is absent) on the Paul Graham essays: a
# small grid (2 lengths x 3 depths, 1 run), the JSON grid and the HTML
# heatmap, the needle at the asked depths, capping to the context, a press
# run, kvpress's protocol with its default depths and a needle file, and bad
# options.
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
model=models/vkvector-shakespeare.gguf
l1=208 l2=320 ctx=224
# stories260K spells text in byte tokens: the fixed prompt alone is ~350 tokens
[ -f "$model" ] || { model=$shared/models/stories260K-f32.gguf; l1=400 l2=480 ctx=460; }
hay=$shared/data/paul_graham_essays
[ -d "$hay" ] || { echo "niah: $hay not found (set VKVECTOR_SHARED)"; exit 1; }
. "$(dirname "$0")/expect.sh"
niah() { "$vkv" niah -m "$model" --haystack "$hay" -n 6 --quiet --protocol vkvector "$@"; }

expect 0 "usage: vkvector niah" -- "$vkv" niah --help
expect 2 "give the grid's JSON file" -- niah
expect 2 "--lengths wants" -- niah --out "$tmp/x.json" --lengths 300:100:10
expect 2 "--depths wants" -- niah --out "$tmp/x.json" --depths 0:100:0
expect 2 "--depths wants" -- niah --out "$tmp/x.json" --depths 120
expect 1 "cannot open the haystack directory" -- niah --out "$tmp/x.json" --haystack "$tmp/none"
expect 2 "need --press" -- niah --out "$tmp/x.json" --compression 0.5

# The grid: 2 lengths x 3 depths (0, 50, 100 %), 1 run.
expect 0 "mean ROUGE-L F over 6 cells" -- niah --lengths $l1:$l2:$((l2 - l1)) --depths 0:100:3 --out "$tmp/g.json" --html "$tmp/g.html"
python3 - "$tmp/g.json" $l1 $l2 <<'PY' && ok || bad "grid JSON: $(head -c 1500 "$tmp/g.json")"
import json, sys
g = json.load(open(sys.argv[1]))
assert g["lengths"] == [int(sys.argv[2]), int(sys.argv[3])] and g["depths"] == [0, 50, 100], (g["lengths"], g["depths"])
assert g["press"] is None and g["runs"] == 1 and g["needle"].startswith("The best thing to do in San Francisco")
assert len(g["cells"]) == 6
for c in g["cells"]:
    assert len(c["scores"]) == 1 and 0 <= c["score"] <= 1 and isinstance(c["answers"][0], str)
    assert c["length"] - 40 <= c["prompt_tokens"][0] <= c["length"], c      # cut at a sentence end
    d = c["needle_depth"][0]
    if c["depth"] == 0: assert d == 0, c
    elif c["depth"] == 100: assert d == 100, c
    elif c["length"] == g["lengths"][1]: assert 25 <= d <= 75, c              # moved to the nearest sentence end
    else: assert 0 <= d <= 100, c
assert abs(g["mean"] - sum(c["score"] for c in g["cells"]) / 6) < 1e-6
PY
grep -q "<svg" "$tmp/g.html" && [ "$(grep -c '<rect x=' "$tmp/g.html")" -eq 7 ] && ok || bad "heatmap: $(head -c 600 "$tmp/g.html")"
grep -q "http" <(grep -v "xmlns=\"http://www.w3.org/2000/svg\"" "$tmp/g.html") && bad "the heatmap refers to the network" || ok

# Lengths beyond the context are capped, with a message.
expect 0 "capped at $((ctx - 7))" -- niah --ctx $ctx --lengths $l1,5000 --depths 50 --out "$tmp/c.json"
python3 - "$tmp/c.json" $l1 $ctx <<'PY' && ok || bad "capped grid: $(head -c 600 "$tmp/c.json")"
import json, sys
g = json.load(open(sys.argv[1]))
l1, ctx = int(sys.argv[2]), int(sys.argv[3])
assert g["lengths"] == [l1, ctx - 7] and g["context"] == ctx, g["lengths"]   # room for a 6-token answer
PY

# A press run.
expect 0 "mean ROUGE-L F over 1 cells" -- niah --press knorm --compression 0.5 --lengths $l1 --depths 50 --out "$tmp/p.json"
python3 - "$tmp/p.json" <<'PY' && ok || bad "press grid: $(head -c 600 "$tmp/p.json")"
import json, sys
g = json.load(open(sys.argv[1]))
assert g["press"] == "knorm" and g["compression"] == 0.5 and g["query_aware"] is False and len(g["cells"]) == 1
PY

# kvpress's depths are integer percentages: a grid that is not is flagged (a missing needle file
# then stops the run before the model is read).
for pattern in "integer percentages; 33.3333 is not" "cannot open .*none.json"; do
  expect 1 "$pattern" -- "$vkv" niah -m "$model" --haystack "$hay" --out "$tmp/x.json" --depths 0:100:4 \
    --needle-file "$tmp/none.json"
done

# kvpress's protocol (the default): the length caps the context part; its first length - needle - 150
# haystack tokens hold the needle at a token index, wrapped as a story book; the question comes after.
# The needle and the answer prefix come from a JSON file as kvpress's dataset row holds them, the
# question from the command line over the file's.
kv_len=$((l1 + 150))
cat >"$tmp/needle.json" <<'JSON'
{"needle": "The secret of the soup is a pinch of saffron.", "question": "Not this one?", "answer_prefix": "Answer:"}
JSON
expect 0 "mean ROUGE-L F over 3 cells" -- "$vkv" niah -m "$model" --haystack "$hay" -n 6 --quiet --lengths $kv_len \
  --depths 0:100:3 --press knorm --compression 0.5 --needle-file "$tmp/needle.json" \
  --question "What is the secret of the soup?" --out "$tmp/k.json"
python3 - "$tmp/k.json" $kv_len <<'PY' && ok || bad "kvpress grid: $(head -c 900 "$tmp/k.json")"
import json, sys
g = json.load(open(sys.argv[1])); L = int(sys.argv[2])
assert g["protocol"] == "kvpress" and g["answer_prefix"] == "Answer:" and len(g["cells"]) == 3, g
assert g["needle"] == "The secret of the soup is a pinch of saffron." and g["question"] == "What is the secret of the soup?"
assert "get_scores(needle, answer)" in g["metric"], g["metric"]
for c in g["cells"]:
    assert L - 150 < c["prompt_tokens"][0] <= L + 40, c     # haystack L - needle - 150 tokens, wrapper, question
    d = c["needle_depth"][0]
    assert abs(d - c["depth"]) <= 5, c                        # a token index (here in bytes), not a sentence end
PY

# kvpress's default depths: the integer percentages 0, 10, ..., 100 (one answer token).
expect 0 "mean ROUGE-L F over 11 cells" -- "$vkv" niah -m "$model" --haystack "$hay" -n 1 --quiet --lengths $kv_len \
  --out "$tmp/d.json"
python3 - "$tmp/d.json" <<'PY' && ok || bad "kvpress default depths: $(head -c 600 "$tmp/d.json")"
import json, sys
g = json.load(open(sys.argv[1]))
assert g["protocol"] == "kvpress" and g["depths"] == list(range(0, 101, 10)), g["depths"]
PY

# kvpress's registry names under its protocol: expected_attention is AdaKV over ExpectedAttention
# (epsilon 1e-2, vkvector's adakv-expected, query-agnostic as kvpress's evaluation runs it); a name
# vkvector does not build is refused by name with the reason; outside the protocol the registry's own
# names are refused.
expect 0 "mean ROUGE-L F over 1 cells" -- "$vkv" niah -m "$model" --haystack "$hay" -n 4 --quiet --lengths $kv_len \
  --depths 50 --press expected_attention --compression 0.5 --out "$tmp/r.json"
python3 - "$tmp/r.json" <<'PY' && ok || bad "registry name: $(head -c 600 "$tmp/r.json")"
import json, sys
g = json.load(open(sys.argv[1]))
assert g["press"] == "adakv-expected" and g["query_aware"] is False and g["protocol"] == "kvpress", g["press"]
PY
expect 2 "kvpress's 'qfilter' .* is not built: it needs trained artefacts" -- "$vkv" niah -m "$model" \
  --haystack "$hay" --lengths $kv_len --depths 50 --press qfilter --compression 0.5 --out "$tmp/x.json"
expect 2 "'expected_attention' is a name of kvpress's evaluation registry" -- niah --lengths $l1 --depths 50 \
  --press expected_attention --compression 0.5 --out "$tmp/x.json"

echo "niah: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
