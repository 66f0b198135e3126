# Sourced by the Hugging Face checkpoint tests (hf_checkpoint.sh,
# hf_bad_input.sh) after expect.sh: the interpreter that has numpy, and
#   to_hf GGUF DIR [gguf_to_hf options]
# which writes GGUF as a checkpoint folder DIR (tools/gguf_to_hf.py), its
# output in $tmp/gen.log, a non-zero status on failure.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=/usr/bin/python3   # Debian's numpy lives under Debian's interpreter
[ -x "$python" ] || python=python3
to_hf() { "$python" "$root/tools/gguf_to_hf.py" "$1" -o "$2" "${@:3}" > "$tmp/gen.log" 2>&1; }
