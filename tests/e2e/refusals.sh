#!/usr/bin/env bash
# Refusals before the work: option combinations that cannot work are refused
# when the options are parsed (or the prompt's length is known), naming the
# options; a hint that names a figure is one that works; damaged inputs
# (a GGUF with a zero count, LongBench rows of the wrong types, a .vkcal with
# a flipped byte) are refused with a message naming what is wrong. Seconds,
# on the default model and stories260K.
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
model=models/vkvector-shakespeare.gguf
stories=$shared/models/stories260K-f32.gguf
[ -f "$stories" ] || { echo "refusals: $stories not found (set VKVECTOR_SHARED)"; exit 1; }
. "$(dirname "$0")/expect.sh"

# ---- a GGUF whose block_count is 0: the key named, not a head-count rule ----
python3 - "$stories" "$tmp" <<'PY'
import struct, sys
data = open(sys.argv[1], 'rb').read()
def edit(key, value, name):
    d = bytearray(data)
    k = key.encode()
    o = d.index(struct.pack('<Q', len(k)) + k) + 8 + len(k)
    assert struct.unpack_from('<I', d, o)[0] == 4  # uint32
    struct.pack_into('<I', d, o + 4, value)
    open(f"{sys.argv[2]}/{name}.gguf", 'wb').write(bytes(d))
edit('llama.block_count', 0, 'blocks-0')
edit('llama.attention.head_count_kv', 0, 'kv-heads-0')
edit('llama.attention.head_count_kv', 3, 'kv-heads-3')
edit('llama.embedding_length', 4, 'embd-4')
PY
expect 1 "'llama.block_count' is 0: it must be at least 1" -- "$vkv" run -m "$tmp/blocks-0.gguf" --ids 1 -n 1
expect 1 "'llama.attention.head_count_kv' is 0: it must be at least 1" -- "$vkv" run -m "$tmp/kv-heads-0.gguf" --ids 1 -n 1
expect 1 "'llama.attention.head_count' \\(8\\) is not a multiple of 'llama.attention.head_count_kv' \\(3\\)" -- \
  "$vkv" run -m "$tmp/kv-heads-3.gguf" --ids 1 -n 1
expect 1 "'llama.embedding_length' \\(4\\) is less than 'llama.attention.head_count' \\(8\\)" -- \
  "$vkv" run -m "$tmp/embd-4.gguf" --ids 1 -n 1

# ---- LongBench rows of the wrong types, invalid UTF-8, an over-long line ----
mkdir -p "$tmp/lb"
python3 - "$tmp/lb" <<'PY'
import json, sys
d = sys.argv[1]
good = {"input": "Who?", "context": "First Citizen: hear me speak.", "answers": ["Citizen"], "all_classes": None,
        "length": 5, "dataset": "hotpotqa", "_id": "g0"}
rows = [json.dumps(good).encode()]
rows.append(json.dumps(dict(good, answers=[1, 2], _id="b1")).encode())       # line 2
rows.append(json.dumps(dict(good, length="x", _id="b2")).encode())           # line 3
rows.append(json.dumps({k: v for k, v in good.items() if k != "_id"}).encode())  # line 4
rows.append(json.dumps(dict(good, _id="b4")).encode().replace(b"hear", b"h\xffar"))  # line 5
open(f"{d}/hotpotqa.jsonl", "wb").write(b"\n".join(rows) + b"\n")
# trec: an over-long line (past the 64 MiB cap) first, then a good row
with open(f"{d}/trec.jsonl", "wb") as f:
    f.write(b'{"context": "' + b"a" * (64 << 20) + b'"}\n')
    f.write(json.dumps(dict(good, dataset="trec", all_classes=["City"], _id="t0")).encode() + b"\n")
PY
lb() { "$vkv" longbench -m "$model" --data "$tmp/lb" --prompts "$shared/longbench" --max-new-tokens 1 --quiet "$@"; }
out=$(lb --out "$tmp/lb1.jsonl" --tasks hotpotqa 2>&1); rc=$?
for pat in 'hotpotqa.jsonl:2: malformed sample skipped: "answers" is not an array of strings' \
           'hotpotqa.jsonl:3: malformed sample skipped: "length"' \
           'hotpotqa.jsonl:4: malformed sample skipped: no string member "_id"' \
           'hotpotqa.jsonl:5: malformed sample skipped: invalid UTF-8 at byte' \
           '4 malformed sample lines skipped'; do
  if [ $rc -eq 0 ] && grep -qF -- "$pat" <<<"$out"; then ok; else bad "longbench bad rows: want '$pat', exit $rc: $out"; fi
done
n=$(wc -l < "$tmp/lb1.jsonl" 2>/dev/null || echo 0)
[ "$n" -eq 1 ] && ok || bad "longbench bad rows: $n result lines, want 1"
expect 1 'hotpotqa.jsonl:2: malformed sample: "answers" is not an array of strings' -- lb --out "$tmp/lb2.jsonl" --tasks hotpotqa --strict
expect 0 'trec.jsonl:1: malformed sample skipped: line longer than 64 MiB' -- lb --out "$tmp/lb3.jsonl" --tasks trec
n=$(wc -l < "$tmp/lb3.jsonl" 2>/dev/null || echo 0)
[ "$n" -eq 1 ] && ok || bad "longbench over-long line: $n result lines, want 1 (the row after it)"
expect 1 'trec.jsonl:1: malformed sample: line longer than 64 MiB' -- lb --out "$tmp/lb4.jsonl" --tasks trec --strict

# ---- a context too long for the device: the hinted length is one that works ----
# The default model's K cache grows 192 bytes a token per layer: the storage
# buffer range (128 MiB on lavapipe) binds before the heap does.
out=$("$vkv" run -m "$model" --ctx 1000000 -n 1 --ids 1 2>&1); rc=$?
hint=$(grep -oE "at most [0-9]+ tokens fit" <<<"$out" | grep -oE "[0-9]+" | head -1)
if [ $rc -eq 1 ] && [ -n "$hint" ]; then
  ok
  out=$("$vkv" run -m "$model" --ctx "$hint" -n 1 --ids 1 --print-ids 2>&1); rc=$?
  [ $rc -eq 0 ] && ok || bad "--ctx $hint (the hint): exit $rc: $out"
  # and it is the longest: one more token does not fit, with the same hint
  expect 1 "at most $hint tokens fit" -- "$vkv" run -m "$model" --ctx $((hint + 1)) -n 1 --ids 1
  # one layer's K cache at the hint is within the device's storage buffer range
  python3 - "$vkv" "$hint" "$out" <<'PY' && ok || bad "the hint $hint is over the device's storage buffer range"
import json, re, subprocess, sys
dev = json.loads(subprocess.run([sys.argv[1], "devices", "--json"], capture_output=True, text=True).stdout)[0]
m = re.search(r"(\d+) \+ (\d+) bytes a row; \d+ slots x \d+ layers x (\d+) KV heads", sys.argv[3])
row, heads = max(int(m.group(1)), int(m.group(2))), int(m.group(3))
sys.exit(0 if int(sys.argv[2]) * row * heads <= dev["max_storage_buffer_range"] else 1)
PY
else
  bad "--ctx 1000000: want exit 1 and a hint, got exit $rc: $out"
fi
expect 1 "lower --ctx \\(at most ${hint:-0} tokens fit\\)" -- \
  "$vkv" longbench -m "$model" --data "$tmp/lb" --prompts "$shared/longbench" --ctx 1000000 --out "$tmp/lb6.jsonl" --tasks hotpotqa

# ---- option combinations refused before the work, naming the options ----
prompt="Once upon a time there was a little girl"
# --tier-dump with compression during generation alone: there are no tiers after the prefill to write
expect 2 "--tier-dump .*--compress-every without --compression" -- \
  "$vkv" run -m "$stories" -p "$prompt" -n 4 --press keydiff --compress-every 4 --max-kv-tokens 12 --tier-dump "$tmp/t.json"
[ -e "$tmp/t.json" ] && bad "--tier-dump refused but wrote a file" || ok
# the one-shot compression keeps 30 of the 60 tokens a head, more than the 2 M = 10 the gather takes
out=$("$vkv" run -m "$stories" -p "$prompt" -n 4 --press knorm --compression 0.5 --compress-every 2 --max-kv-tokens 5 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -qE -- "--compression 0.5 keeps up to 30 tokens.*--max-kv-tokens must be at least 15, or --compression at least 0.82" <<<"$out" &&
   ! grep -q "^--- compression" <<<"$out"; then ok; else bad "compression over the gather: exit $rc: $out"; fi
# the values the message names work
expect 0 "compression during generation" -- \
  "$vkv" run -m "$stories" -p "$prompt" -n 4 --press knorm --compression 0.5 --compress-every 2 --max-kv-tokens 15
expect 0 "compression during generation" -- \
  "$vkv" run -m "$stories" -p "$prompt" -n 4 --press knorm --compression 0.82 --compress-every 2 --max-kv-tokens 5
expect 2 "hotpotqa #0 \\(g0\\): --compression 0.5 keeps up to [0-9]+ tokens.*--max-kv-tokens must be at least" -- \
  lb --out "$tmp/lb5.jsonl" --tasks hotpotqa --press knorm --compression 0.5 --compress-every 2 --max-kv-tokens 3

# eval-ppl: --vector is VECTOR only, --both the baseline and VECTOR; together they were VECTOR only
printf 'Once upon a time there was a little girl who liked to play.\n' > "$tmp/text.txt"
expect 2 "--vector \\(VECTOR only\\) and --both .* exclude each other" -- \
  "$vkv" eval-ppl -m "$stories" --text "$tmp/text.txt" --context 16 --continuation 8 --press knorm --compression 0.5 \
  --vector --both

# ---- a .vkcal with a flipped byte: refused naming the file; a version 1 file still read ----
expect 0 "wrote $tmp/s.vkcal" -- "$vkv" calib -m "$stories" --corpus "$shared/data/tinyshakespeare.txt" --byte-tokens \
  --tokens 1024 --seq-len 128 --ridge auto -o "$tmp/s.vkcal"
python3 - "$tmp" <<'PY'
import struct, sys
d = sys.argv[1]
good = open(f"{d}/s.vkcal", "rb").read()
def flip(name, at):
    b = bytearray(good)
    b[at] ^= 0x01
    open(f"{d}/{name}.vkcal", "wb").write(bytes(b))
key = b"vkvector.calib.blk.2.r2_joint"
flip("key", good.index(key) + len(key) - 1)  # an optional key's name: it was dropped silently
flip("value", good.index(key) + len(key) + 4 + 3)  # its value's high byte (a NaN, once)
flip("map", len(good) - 5)  # the last map's data
# version 1 (no checksum): a NaN joint R^2 with joint maps and held-out tokens is refused by value
v1 = bytearray(open("models/vkvector-shakespeare.vkcal", "rb").read())
o = v1.index(key) + len(key)
assert struct.unpack_from("<I", v1, o)[0] == 6  # f32
struct.pack_into("<f", v1, o + 4, float("nan"))
open(f"{d}/v1-nan.vkcal", "wb").write(bytes(v1))
PY
vec=(run -p "Once upon a time" -n 2 --press knorm --compression 0.5 --vector)
expect 0 "VECTOR" -- "$vkv" "${vec[@]}" -m "$stories" --calib "$tmp/s.vkcal"
for f in key value map; do
  expect 1 "'$tmp/$f.vkcal' is damaged: its bytes do not match its checksum" -- "$vkv" "${vec[@]}" -m "$stories" --calib "$tmp/$f.vkcal"
done
# the default model's shipped calibration is version 1, without a checksum
expect 0 "VECTOR" -- "$vkv" "${vec[@]}" -m "$model"
expect 1 "'$tmp/v1-nan.vkcal' is damaged: vkvector.calib.blk.2.r2_joint is nan, where a finite value is required" -- \
  "$vkv" "${vec[@]}" -m "$model" --calib "$tmp/v1-nan.vkcal"

expect 1 "length 208, depth 0: --compression 0.5 keeps up to [0-9]+ tokens.*--max-kv-tokens must be at least" -- \
  "$vkv" niah -m "$model" --haystack "$shared/data/paul_graham_essays" -n 2 --quiet --protocol vkvector \
  --lengths 208:208:1 --depths 0:100:1 --out "$tmp/n.json" --press knorm --compression 0.5 --compress-every 2 --max-kv-tokens 3
# eval-ppl's grid against the gather, before its reference pass
expect 2 "eval-ppl: --press knorm: --compression 0.5 keeps up to 20 tokens .*--max-kv-tokens must be at least 10" -- \
  "$vkv" eval-ppl -m "$stories" --text "$tmp/text.txt" --context 40 --continuation 8 --windows 1 --press knorm \
  --compression 0.5 --compress-every 2 --max-kv-tokens 5

echo "refusals: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
