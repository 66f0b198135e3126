#!/usr/bin/env bash
# The same model in both formats (issue 26): a Hugging Face checkpoint folder
# written from a GGUF by tools/gguf_to_hf.py (llama's Q/K rows back in the
# rotate-half layout) must give the GGUF's logits bit for bit, and the same
# prompt ids. Cases: the default model as an f32 folder with its tokenizer.json
# (one file, and three shards under an index), and 1-layer random models at
# real widths from tools/gen_model.py (Llama-3.2-1B with llama3 rope scaling,
# Qwen2.5-0.5B with QKV biases, Qwen3-0.6B with QK-norm) in f32 and bf16
# beside their GGUF twins. The default model's .vkcal also validates against
# its folder (the K/V hash is over the weights as uploaded).
set -u
vkv=$1
. "$(dirname "$0")/expect.sh"     # $tmp, the counters, ok and bad
. "$(dirname "$0")/hf_common.sh"  # $root, $python, to_hf
model=$root/models/vkvector-shakespeare.gguf
prompt="ROMEO: But, soft! what light through yonder window breaks?"

# logits MODEL OUT ARGS...: the prompt positions' logits of MODEL into OUT
logits() {
  local m=$1 out=$2; shift 2
  "$vkv" run -m "$m" -n 0 --ctx 128 --dump-logits "$out" "$@" >/dev/null 2>"$tmp/run.err"
}

# same NAME A B: two logits files, equal byte for byte and not empty
same() {
  if [ -s "$2" ] && cmp -s "$2" "$3"; then ok; else bad "$1: the folder's logits differ from the GGUF's"; fi
}

# The default model: tokenizer, logits, shards, calibration.
to_hf "$model" "$tmp/shk" && to_hf "$model" "$tmp/shk-shards" --shards 3 || { cat "$tmp/gen.log"; exit 1; }
logits "$model" "$tmp/gguf.bin" -p "$prompt"; rc=$?
[ $rc -eq 77 ] && { echo "hf_checkpoint: SKIP: no Vulkan device"; exit 77; }
[ $rc -eq 0 ] || { bad "the GGUF: $(tail -3 "$tmp/run.err")"; }
for dir in shk shk-shards; do
  if logits "$tmp/$dir" "$tmp/$dir.bin" -p "$prompt"; then same "$dir" "$tmp/gguf.bin" "$tmp/$dir.bin"
  else bad "$dir: $(tail -3 "$tmp/run.err")"; fi
done
ids_gguf=$("$vkv" tokenize -m "$model" --bos --text "$prompt" 2>&1)
ids_dir=$("$vkv" tokenize -m "$tmp/shk/" --bos --text "$prompt" 2>&1)
if [ -n "$ids_gguf" ] && [ "$ids_gguf" = "$ids_dir" ]; then ok; else bad "prompt ids: GGUF '$ids_gguf', folder '$ids_dir'"; fi
if "$vkv" run -m "$tmp/shk" -p "$prompt" -n 1 --press knorm --compression 0.5 --vector \
     --calib "$root/models/vkvector-shakespeare.vkcal" >/dev/null 2>"$tmp/run.err"; then ok
else bad "the GGUF's .vkcal on its folder: $(tail -2 "$tmp/run.err")"; fi

# Real widths, 1 layer, a 512-token placeholder vocabulary: prompt by ids.
ids=1,17,42,99,256,300,437,511
for preset in llama-3.2-1b qwen2.5-0.5b qwen3-0.6b; do
  for type in f32 bf16; do
    case=$preset-$type gguf=$tmp/$preset-$type.gguf
    if ! "$python" "$root/tools/gen_model.py" --preset "$preset" --layers 1 --vocab 512 --type "$type" -o "$gguf" \
         > "$tmp/gen.log" 2>&1; then bad "$case: gen_model: $(tail -2 "$tmp/gen.log")"; continue; fi
    # Llama 3.2's rope_freqs.weight becomes llama3 metadata in both formats
    extra=()
    [ "$preset" = llama-3.2-1b ] && extra=(--llama3-rope 32,1,4,8192 --gguf-twin "$tmp/$case-twin.gguf")
    if ! to_hf "$gguf" "$tmp/$case" "${extra[@]}"; then
      bad "$case: gguf_to_hf: $(tail -2 "$tmp/gen.log")"; continue
    fi
    [ "$preset" = llama-3.2-1b ] && gguf=$tmp/$case-twin.gguf
    if ! logits "$gguf" "$tmp/$case-gguf.bin" --ids "$ids" --print-ids; then bad "$case GGUF: $(tail -3 "$tmp/run.err")"
    elif ! logits "$tmp/$case" "$tmp/$case.bin" --ids "$ids" --print-ids; then bad "$case folder: $(tail -3 "$tmp/run.err")"
    else same "$case" "$tmp/$case-gguf.bin" "$tmp/$case.bin"; fi
    rm -rf "$tmp/$preset"-*
  done
done

echo "hf_checkpoint: $passes passed, $fails failed"
[ $fails -eq 0 ]
