# Sourced by the tests of compression during generation (decode_kvpress.sh,
# decode_attention.sh): the default model, the pass/fail counters, a
# temporary directory, a short prompt, and every compression's scores checked
# against the scorer's reference (VKVECTOR_CHECK_DECODE, press/decode.h).
model=models/vkvector-shakespeare.gguf
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prompt="ROMEO:
But soft, what light through yonder window breaks? It is the east, and Juliet is the sun."
export VKVECTOR_CHECK_DECODE=1
