#!/usr/bin/env bash
# Query-aware compression in `vkvector run` ends with the user turn
# (docs/ARCHITECTURE.md §5): the chat template's closing and assistant header
# are evaluated over the compressed cache, so the first answer token's logits
# (the last row of --dump-logits) change with p_c, while p_c = 0 still gives
# the uncompressed logits bit for bit. The default model has no chat template:
# the test gives a copy of it the Llama-3 template by name.
set -u
vkv=$1
shared=${VKVECTOR_SHARED:-../shared}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

python3 - models/vkvector-shakespeare.gguf "$tmp/chat.gguf" <<'PY' || { echo "FAIL: cannot write the chat model"; exit 1; }
# The GGUF with one more key, tokenizer.chat_template = "llama3", spliced in
# after the last key; the tensor data moves as a whole (offsets are relative).
import struct, sys
sys.path.insert(0, "models")
import gguf_writer as gw
d = open(sys.argv[1], "rb").read()
b = gw._Buf(d)
b.take("<4sI")
n_t, n_kv = b.take("<QQ")
align = gw.ALIGNMENT
for _ in range(n_kv):
    key = b.str()
    (vt,) = b.take("<I")
    v = b.value(vt)
    if key == "general.alignment": align = v
kv_end = b.o
for _ in range(n_t):
    b.str()
    (nd,) = b.take("<I")
    b.take("<%dQ" % nd)
    b.take("<IQ")
info_end = b.o
head = (d[:8] + struct.pack("<QQ", n_t, n_kv + 1) + d[24:kv_end] + gw._pack_str("tokenizer.chat_template") +
        struct.pack("<I", gw.T_STRING) + gw._pack_str("llama3") + d[kv_end:info_end])
open(sys.argv[2], "wb").write(head + b"\0" * gw._pad(len(head), align) + d[info_end + gw._pad(info_end, align):])
PY

# ~150 tokens of context: snapkv's window is 64; the question ends in a letter so
# the template's closing tokenizes the same alone as after it.
context=$(head -c 600 "$shared/data/tinyshakespeare.txt")
run() { "$vkv" run -m "$tmp/chat.gguf" --chat -p "$context" --question "Who speaks first" -n 0 "$@" >/dev/null; }
run --dump-logits "$tmp/plain.bin" 2>"$tmp/err" || bad "uncompressed run: $(cat "$tmp/err")"
run --press snapkv --query-aware --compression 0 --dump-logits "$tmp/pc0.bin" 2>"$tmp/err" || bad "p_c 0: $(cat "$tmp/err")"
run --press snapkv --query-aware --compression 0.9 --dump-logits "$tmp/pc9.bin" 2>"$tmp/err" || bad "p_c 0.9: $(cat "$tmp/err")"
cmp -s "$tmp/plain.bin" "$tmp/pc0.bin" && ok || bad "query-aware p_c 0 does not reproduce the uncompressed logits exactly"
python3 - "$tmp/pc0.bin" "$tmp/pc9.bin" "$(grep -o '[0-9]* context tokens' "$tmp/err")" <<'PY' && ok ||
import sys
a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
n_vocab = 768  # the default model's vocabulary
rows = len(a) // (4 * n_vocab)
last = slice((rows - 1) * 4 * n_vocab, rows * 4 * n_vocab)
compressed = int(sys.argv[3].split()[0])
# the first answer token's logits come after compression; the closing (5 pieces at least) too
assert len(a) == len(b) and rows > 100 and a[last] != b[last], "last rows equal"
assert rows - compressed >= 5, (rows, compressed)
PY
  bad "the first answer token's logits do not depend on p_c in query-aware mode ($(grep 'context tokens' "$tmp/err"))"

echo "query_aware_run: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
