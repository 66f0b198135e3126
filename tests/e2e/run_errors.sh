#!/usr/bin/env bash
# vkvector run on every model in ../shared/models by --ids, and its bad
# inputs: truncated GGUF, unknown architecture, missing tensor, prompt longer
# than the context, bad sampling values. Each must give a clear message and a
# non-zero exit, never a crash.
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
models=$shared/models
[ -d "$models" ] || { echo "run_errors: $models not found (set VKVECTOR_SHARED)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0

expect() {
  local want=$1 pattern=$2; shift 3
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pattern" <<<"$err"; then
    echo "FAIL: $* -> exit $rc (want $want), stderr: $(head -c 600 <<<"$err")"
    fails=$((fails + 1))
  else
    passes=$((passes + 1))
  fi
}

# Every model runs from token ids and prints the requested number of ids.
for m in "$models"/*.gguf; do
  out=$("$vkv" run -m "$m" --ids 1,436,94,16 -n 4 --temp 0 --print-ids 2>"$tmp/err"); rc=$?
  if [ $rc -ne 0 ] || ! grep -qE '^[0-9]+ [0-9]+ [0-9]+ [0-9]+$' <<<"$out"; then
    echo "FAIL: run $m -> exit $rc, output '$out', stderr: $(cat "$tmp/err")"
    fails=$((fails + 1))
  else
    passes=$((passes + 1))
  fi
done

# Same seed, same text; greedy ignores the seed.
a=$("$vkv" run -m "$models/stories260K-f32.gguf" --ids 1,2 -n 12 --seed 7 --temp 0.9 --print-ids 2>/dev/null)
b=$("$vkv" run -m "$models/stories260K-f32.gguf" --ids 1,2 -n 12 --seed 7 --temp 0.9 --print-ids 2>/dev/null)
if [ -n "$a" ] && [ "$a" = "$b" ]; then passes=$((passes + 1)); else echo "FAIL: same seed gave '$a' and '$b'"; fails=$((fails + 1)); fi

# --dump-logits: positions x vocabulary f32, nothing else.
"$vkv" run -m "$models/stories260K-f32.gguf" --ids 1,2,3,4,5 -n 0 --dump-logits "$tmp/l.bin" 2>/dev/null
size=$(stat -c %s "$tmp/l.bin" 2>/dev/null || echo 0)
if [ "$size" -eq $((5 * 512 * 4)) ]; then passes=$((passes + 1)); else echo "FAIL: dump-logits wrote $size bytes"; fails=$((fails + 1)); fi

src=$models/stories260K-f32.gguf
head -c 300000 "$src" > "$tmp/truncated.gguf"
head -c 100 "$src" > "$tmp/header-only.gguf"
# Same-length byte edits: another architecture name, a renamed tensor.
python3 - "$src" "$tmp" <<'PY'
import struct, sys
data = open(sys.argv[1], 'rb').read()
arch = data.replace(b'\x05\x00\x00\x00\x00\x00\x00\x00llama', b'\x05\x00\x00\x00\x00\x00\x00\x00gemma', 1)
open(sys.argv[2] + '/gemma.gguf', 'wb').write(arch)
open(sys.argv[2] + '/no-norm.gguf', 'wb').write(data.replace(b'output_norm.weight', b'output_xorm.weight', 1))
# A matrix in a type this runtime does not read (16, iq2_xxs): its tensor
# info's type field (after the name, n_dims and ne[]) rewritten.
name = b'blk.0.attn_q.weight'
info = bytearray(data)
o = info.index(struct.pack('<Q', len(name)) + name) + 8 + len(name)
n_dims = struct.unpack_from('<I', info, o)[0]
struct.pack_into('<I', info, o + 4 + 8 * n_dims, 16)
open(sys.argv[2] + '/iq2_xxs.gguf', 'wb').write(bytes(info))
PY
# Hyper-parameters the GGUF reader accepts but no model can have: each
# metadata value rewritten in place (same type, same size).
python3 - "$src" "$tmp" <<'PY'
import struct, sys
data = open(sys.argv[1], 'rb').read()
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def value_offsets():
    """key -> (type, offset of its value), walking the metadata of a v3 file"""
    n_kv = struct.unpack_from('<Q', data, 16)[0]
    o, out = 24, {}
    def skip_str(o):
        return o + 8 + struct.unpack_from('<Q', data, o)[0]
    for _ in range(n_kv):
        end = skip_str(o)
        key = data[o + 8:end].decode()
        t = struct.unpack_from('<I', data, end)[0]
        o = end + 4
        out[key] = (t, o)
        if t == 8:
            o = skip_str(o)
        elif t == 9:
            et, n = struct.unpack_from('<IQ', data, o)
            o += 12
            for _ in range(n):
                o = skip_str(o) if et == 8 else o + SIZES[et]
        else:
            o += SIZES[t]
    return out
offs = value_offsets()
def write(name, **values):
    d = bytearray(data)
    for key, v in values.items():
        t, o = offs['llama.' + key.replace('__', '.')]
        struct.pack_into('<I' if t == 4 else '<f', d, o, v)
    open(sys.argv[2] + '/' + name, 'wb').write(bytes(d))
write('blocks-1e9.gguf', block_count=10**9)
write('heads-2e31.gguf', attention__head_count=2**31 + 1, attention__head_count_kv=2**31 + 1)
write('eps-inf.gguf', attention__layer_norm_rms_epsilon=float('inf'))
write('rope-nan.gguf', rope__freq_base=float('nan'))
write('rope-negative.gguf', rope__freq_base=-10000.0)
PY

expect 1 "truncated|runs past the end|past the end" -- "$vkv" run -m "$tmp/truncated.gguf" --ids 1 -n 1
expect 1 "malformed|truncated|past the end" -- "$vkv" run -m "$tmp/header-only.gguf" --ids 1 -n 1
expect 1 "unsupported architecture 'gemma'" -- "$vkv" run -m "$tmp/gemma.gguf" --ids 1 -n 1
expect 1 "missing tensor 'output_norm.weight'" -- "$vkv" run -m "$tmp/no-norm.gguf" --ids 1 -n 1
expect 1 "tensor 'blk.0.attn_q.weight' has type 16 \\(iq2_xxs\\), which this runtime does not support" -- "$vkv" run -m "$tmp/iq2_xxs.gguf" --ids 1 -n 1
# a format error naming the key and its value, not a wrapped width, an
# allocation failure or silently garbage output
expect 1 "'llama.block_count' is 1000000000, but the file holds [0-9]+ tensors" -- "$vkv" run -m "$tmp/blocks-1e9.gguf" --ids 1 -n 1
expect 1 "'llama.attention.head_count' is 2147483649" -- "$vkv" run -m "$tmp/heads-2e31.gguf" --ids 1 -n 1
expect 1 "'llama.attention.layer_norm_rms_epsilon' is inf" -- "$vkv" run -m "$tmp/eps-inf.gguf" --ids 1 -n 1
expect 1 "'llama.rope.freq_base' is -?nan" -- "$vkv" run -m "$tmp/rope-nan.gguf" --ids 1 -n 1
expect 1 "'llama.rope.freq_base' is -10000" -- "$vkv" run -m "$tmp/rope-negative.gguf" --ids 1 -n 1
expect 1 "cannot open|No such file" -- "$vkv" run -m "$tmp/does-not-exist.gguf" --ids 1 -n 1
# a FIFO as the model is refused at once, not waited on (timeout: a hang fails)
mkfifo "$tmp/model.fifo"
expect 1 "not a regular file" -- timeout 60 "$vkv" run -m "$tmp/model.fifo" --ids 1 -n 1
expect 2 "longer than the 4-token context" -- "$vkv" run -m "$src" --ids 1,2,3,4,5,6 --ctx 4
expect 2 "outside the vocabulary" -- "$vkv" run -m "$src" --ids 1,99999
expect 2 "--ids wants" -- "$vkv" run -m "$src" --ids 1,x
expect 2 "--temp wants" -- "$vkv" run -m "$src" --ids 1 --temp -1
expect 2 "--top-p wants" -- "$vkv" run -m "$src" --ids 1 --top-p 0
expect 2 "--top-p wants" -- "$vkv" run -m "$src" --ids 1 --top-p 1.5
expect 2 "--min-p wants" -- "$vkv" run -m "$src" --ids 1 --min-p 2
expect 2 "--top-k wants" -- "$vkv" run -m "$src" --ids 1 --top-k -3
expect 2 "--kv-type wants" -- "$vkv" run -m "$src" --ids 1 --kv-type q4
expect 2 "either -p or --ids" -- "$vkv" run -m "$src" --ids 1 -p hi
expect 2 "unknown option" -- "$vkv" run -m "$src" --frobnicate
expect 2 "-n wants" -- "$vkv" run -m "$src" --ids 1 -n -5

echo "run_errors: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
