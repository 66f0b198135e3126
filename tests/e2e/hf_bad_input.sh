#!/usr/bin/env bash
# Damaged Hugging Face checkpoint folders (issue 26), each loaded through
# `vkvector run -m DIR`: a clear error naming the file and the problem, and
# exit 1, never a crash. The header checks themselves are unit-tested
# (tests/unit/test_safetensors.c); here each reaches the user through the
# model loader: the default model's folder from tools/gguf_to_hf.py, one
# damage at a time.
set -u
vkv=$1
. "$(dirname "$0")/expect.sh"     # $tmp, the counters, ok and bad
. "$(dirname "$0")/hf_common.sh"  # $root, $python, to_hf

model=$root/models/vkvector-shakespeare.gguf
to_hf "$model" "$tmp/good" && to_hf "$model" "$tmp/shards" --shards 3 || { cat "$tmp/gen.log"; exit 1; }
"$vkv" run -m "$tmp/good" -p hi -n 1 >/dev/null 2>"$tmp/run.err"; rc=$?
[ $rc -eq 77 ] && { echo "hf_bad_input: SKIP: no Vulkan device"; exit 77; }
[ $rc -eq 0 ] || { echo "hf_bad_input: the undamaged folder fails: $(cat "$tmp/run.err")"; exit 1; }

# damaged NAME [SOURCE]: a fresh copy of the good (or SOURCE) folder in $tmp/NAME
damaged() { rm -rf "$tmp/$1"; cp -r "$tmp/${2:-good}" "$tmp/$1"; }

# header FILE PYTHON: rewrites a safetensors file's header (h: the dict) with
# its data unchanged; `data` is the data section and can be cut too.
header() {
  "$python" - "$1" "$2" <<'EOF'
import json, struct, sys
path, code = sys.argv[1], sys.argv[2]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h, data = json.loads(raw[8:8 + n]), raw[8 + n:]
exec(code)
text = json.dumps(h).encode()
open(path, "wb").write(struct.pack("<Q", len(text)) + text + data)
EOF
}

# config DIR PYTHON: rewrites DIR/config.json (c: the dict)
config() {
  "$python" - "$1/config.json" "$2" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"))
EOF
}

# refused NAME PATTERN...: `run -m $tmp/NAME` exits 1 with stderr matching every PATTERN
refused() {
  local name=$1 err rc p; shift
  err=$("$vkv" run -m "$tmp/$name" -p hi -n 1 2>&1 >/dev/null); rc=$?
  for p in "$@"; do
    if [ $rc -ne 1 ] || ! grep -qE -- "$p" <<<"$err"; then
      bad "$name -> exit $rc (want 1), stderr lacks /$p/: $err"
      return
    fi
  done
  [ -n "${SHOW:-}" ] && echo "$name: $err"   # SHOW=1: print the messages
  ok
}
st=model.safetensors
q0=model.layers.0.self_attn.q_proj.weight

damaged truncated
truncate -s -1000 "$tmp/truncated/$st"
refused truncated "$st" "past the end|too short|outside|beyond|ends"

damaged header_past_end
"$python" -c "import sys,struct; f=open(sys.argv[1],'r+b'); f.write(struct.pack('<Q', 1 << 40))" \
  "$tmp/header_past_end/$st"
refused header_past_end "$st" "header length"

damaged overlap
header "$tmp/overlap/$st" "
names = sorted((v['data_offsets'][0], k) for k, v in h.items() if k != '__metadata__')
a, b = names[1][1], names[2][1]
h[b]['data_offsets'] = [h[a]['data_offsets'][0] + 4, h[a]['data_offsets'][0] + 4 + h[b]['data_offsets'][1] - h[b]['data_offsets'][0]]"
refused overlap "$st" "overlap"

damaged dtype
header "$tmp/dtype/$st" "h['$q0']['dtype'] = 'I32'"
refused dtype "$st" "$q0" "I32"

damaged shape
config "$tmp/shape" "c['intermediate_size'] = 256"
refused shape "$st" "model.layers.0.mlp.gate_proj.weight" "shape \[512, 192\].*config.json"

damaged missing
header "$tmp/missing/$st" "h['unused.$q0'] = h.pop('$q0')"
refused missing "no tensor .model.layers.0.self_attn.q_proj.weight."

damaged extra_layer
config "$tmp/extra_layer" "c['num_hidden_layers'] = 5"
refused extra_layer "$st" "model.layers.5" "not a weight"

damaged duplicated shards
second=$(ls "$tmp/duplicated" | grep -- -00002-of-)
first=$(ls "$tmp/duplicated" | grep -- -00001-of-)
dup=$("$python" -c "
import json,struct,sys; raw=open(sys.argv[1],'rb').read(); n=struct.unpack('<Q',raw[:8])[0]
print(next(k for k in json.loads(raw[8:8+n]) if k != '__metadata__'))" "$tmp/duplicated/$first")
header "$tmp/duplicated/$second" "k = next(k for k in h if k != '__metadata__'); h['$dup'] = h.pop(k)"
refused duplicated "$dup" "appears|twice|both|not in its shard"

damaged shard_missing shards
rm "$tmp/shard_missing/$second"
refused shard_missing "$second" "model.safetensors.index.json|cannot open"

damaged architecture
config "$tmp/architecture" "c['architectures'] = ['GPT2LMHeadModel']; c['model_type'] = 'gpt2'"
refused architecture "config.json" "GPT2LMHeadModel|gpt2"

damaged rope_type
config "$tmp/rope_type" "c['rope_scaling'] = {'rope_type': 'yarn', 'factor': 4.0}"
refused rope_type "config.json" "yarn"

# A chat template vkvector does not know: asked for with --chat, refused
# quoting its beginning; without --chat the folder runs.
damaged chat_template
"$python" - "$tmp/chat_template/tokenizer_config.json" <<'EOF'
import json, os, sys
c = json.load(open(sys.argv[1])) if os.path.exists(sys.argv[1]) else {}
c["chat_template"] = "{% for m in messages %}<|user|>{{ m.content }}<|end|>{% endfor %}"
json.dump(c, open(sys.argv[1], "w"))
EOF
err=$("$vkv" run -m "$tmp/chat_template" -p hi -n 1 --chat 2>&1 >/dev/null); rc=$?
if [ $rc -eq 1 ] && grep -q "chat template is not one this build knows" <<<"$err" && grep -qF "<|user|>" <<<"$err"; then ok
else bad "unknown chat template with --chat -> exit $rc: $err"; fi
if "$vkv" run -m "$tmp/chat_template" -p hi -n 1 >/dev/null 2>&1; then ok
else bad "unknown chat template without --chat: the folder does not run"; fi

mkdir "$tmp/no_config"
refused no_config "no_config' is a folder without config.json" "-m takes a GGUF file or a Hugging Face"
echo "not a model" > "$tmp/text_file"
refused text_file "text_file' is not a GGUF file"

echo "hf_bad_input: $passes passed, $fails failed"
[ $fails -eq 0 ]
