#!/usr/bin/env bash
# Bad flags and missing devices give a clear message and a non-zero exit,
# never a crash.
set -u
vkv=$1
fails=0 passes=0

# expect STATUS PATTERN -- COMMAND...: exit status and a stderr line matching PATTERN.
expect() {
  local want=$1 pattern=$2; shift 3
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pattern" <<<"$err"; then
    echo "FAIL: $* -> exit $rc (want $want), stderr: $err"
    fails=$((fails + 1))
  else
    passes=$((passes + 1))
  fi
}

expect 2 "usage: vkvector" -- "$vkv"
expect 2 "unknown command 'frobnicate'" -- "$vkv" frobnicate
expect 2 "unknown option '--bogus'" -- "$vkv" conform --bogus
expect 2 "--device wants an integer in 0..1024" -- "$vkv" conform --device minus-one
expect 2 "--json needs a value" -- "$vkv" conform --json
expect 2 "unknown option" -- "$vkv" devices --frob
expect 2 "unknown benchmark" -- "$vkv" bench nope
expect 2 "unknown weight type 'q3_X'" -- "$vkv" bench ops --types q3_X
expect 2 "--reps wants" -- "$vkv" bench ops --reps 0
expect 2 "--batch does not apply to --small-batch" -- "$vkv" bench ops --small-batch --batch 8
expect 1 "device 99 does not exist" -- "$vkv" conform --device 99
expect 1 "device 99 does not exist" -- env VKVECTOR_DEVICE=99 "$vkv" bench ops --quick
expect 2 "--compression wants ratios" -- "$vkv" eval-ppl --text x --context 10 --continuation 5 --press keydiff --compression 1.5
expect 2 "are required" -- "$vkv" eval-ppl --context 10
expect 2 "unknown press 'nope'" -- "$vkv" eval-ppl --text x --context 10 --continuation 5 --press nope --compression 0.5
expect 2 "--ablation wants T:S" -- "$vkv" perplexity --ablation 5
expect 2 "exactly one of --text and --eval-json" -- "$vkv" perplexity --text x --eval-json y
expect 1 "cannot open '/nonexistent.txt'" -- "$vkv" perplexity --text /nonexistent.txt
expect 2 "--compression wants a number in \(0, 1\)" -- "$vkv" bench vector --compression 0
expect 2 "unknown press 'nope'" -- "$vkv" bench vector --press nope

# Inputs read into memory (issue 13, item 1): a device, a FIFO, a file or a
# line over its cap is refused at once, naming the file and the cap. Each
# runs under a time and address-space limit, so a regression that reads
# /dev/zero until the kernel steps in fails here instead of hanging CI.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=models/vkvector-shakespeare.gguf
bounded() { (ulimit -v 8000000; exec timeout 120 "$@"); }
device="cannot read '/dev/zero': it is a character device, not a regular file"
expect 1 "$device" -- bounded "$vkv" viz --term /dev/zero
expect 1 "$device" -- bounded "$vkv" viz /dev/zero -o "$tmp/report.html"
expect 1 "$device" -- bounded "$vkv" longbench-report /dev/zero
expect 1 "$device" -- bounded "$vkv" perplexity --text /dev/zero
expect 1 "$device" -- bounded "$vkv" perplexity --eval-json /dev/zero
expect 1 "$device" -- bounded "$vkv" eval-ppl --text /dev/zero --context 10 --continuation 5 --press keydiff --compression 0.5
expect 1 "$device" -- bounded "$vkv" tokenize -m "$model" --file /dev/zero
expect 1 "cannot read corpus file '/dev/zero': it is a character device" -- bounded "$vkv" calib -m "$model" --corpus /dev/zero --byte-tokens
mkfifo "$tmp/fifo"
expect 1 "cannot read '$tmp/fifo': it is a FIFO" -- bounded "$vkv" viz --term "$tmp/fifo"
expect 1 "cannot read '$tmp/fifo': it is a FIFO" -- bounded "$vkv" longbench-report "$tmp/fifo"
# a regular file over the 1 GiB document cap (sparse: no disk used) is
# refused from its size, unread
truncate -s $(((1 << 30) + 1)) "$tmp/huge.json"
expect 1 "refusing to read '$tmp/huge.json': it holds more than 1 GiB" -- bounded "$vkv" viz --term "$tmp/huge.json"
# a JSONL line over the 64 MiB line cap, after a good line
{ printf '{"text": "one"}\n'; head -c $(((64 << 20) + 1)) /dev/zero | tr '\0' x; } > "$tmp/long.jsonl"
# (a malformed line like the others: skipped and counted)
expect 1 "long.jsonl:2: malformed line skipped: line longer than 64 MiB" -- bounded "$vkv" longbench-report "$tmp/long.jsonl"
expect 1 "long.jsonl line 2: line longer than 64 MiB" -- bounded "$vkv" calib -m "$model" --corpus "$tmp/long.jsonl" --byte-tokens --seq-len 16 --tokens 1000000
# standard input, asked for with "-", is read, up to the same cap
expect 0 "" -- bounded bash -c 'printf "hello" | "$0" tokenize -m "$1" --file -' "$vkv" "$model"
expect 1 "refusing to read 'standard input': it holds more than 1 GiB" -- bounded bash -c 'head -c $(((1 << 30) + 1)) /dev/zero | "$0" tokenize -m "$1" --file -' "$vkv" "$model"
# a conversation in a chat template (tests/e2e/chat_templates.sh checks the renderings)
printf '{"role": "user", "content": "hi"}' > "$tmp/not_a_list.json"
expect 1 "not_a_list.json: want a JSON array" -- bounded "$vkv" tokenize --messages "$tmp/not_a_list.json" --chat-template qwen3 --render
expect 2 "need --messages" -- bounded "$vkv" tokenize -m "$model" --text hi --render
expect 2 "--info takes only -m" -- bounded "$vkv" tokenize -m "$model" --info --text hi
expect 2 "--info needs -m" -- bounded "$vkv" tokenize --info
expect 2 "no template is named 'qwen9'" -- bounded "$vkv" tokenize --messages "$tmp/not_a_list.json" --chat-template qwen9 --render
expect 1 "the model has no chat template" -- bounded "$vkv" tokenize -m "$model" --messages "$tmp/not_a_list.json"

# vkvector serve: bad flags are refused before the server starts (status 2),
# a pool that cannot hold one sequence, an address it cannot listen on and a
# bad fault-injection spec after the model loads (status 1); none listens.
expect 2 "--port wants an integer in 0..65535, got '70000'" -- bounded "$vkv" serve --port 70000
expect 2 "--max-seqs wants an integer in 1..256, got '257'" -- bounded "$vkv" serve --max-seqs 257
expect 2 "--queue wants an integer in 1..1048576, got '0'" -- bounded "$vkv" serve --queue 0
expect 2 "--kv-budget wants a number in \(0," -- bounded "$vkv" serve --kv-budget -1
expect 2 "--timeout wants an integer in 1..86400, got '0'" -- bounded "$vkv" serve --timeout 0
expect 2 "--timeout wants an integer in 1..86400, got '1m'" -- bounded "$vkv" serve --timeout 1m
expect 2 "--max-connections wants an integer in 1..16384, got '0'" -- bounded "$vkv" serve --max-connections 0
expect 2 "--max-connections wants an integer in 1..16384, got '16385'" -- bounded "$vkv" serve --max-connections 16385
expect 2 "--temp wants a number in \[0, 2\], got '3'" -- bounded "$vkv" serve --temp 3
expect 2 "--presence-penalty wants a number in \[-2, 2\], got '-3'" -- bounded "$vkv" serve --presence-penalty -3
expect 2 "--cors wants '\*' or an origin SCHEME://HOST\[:PORT\] with no path, got 'http://localhost:3000/'" -- bounded "$vkv" serve --cors http://localhost:3000/
expect 2 "--cors needs a value" -- bounded "$vkv" serve --cors
expect 2 "unknown press 'bogus'" -- bounded "$vkv" serve --press bogus
expect 2 "need --press NAME" -- bounded "$vkv" serve --compression 0.5
expect 2 "--compress-every needs --press NAME" -- bounded "$vkv" serve --decoding kvpress
expect 1 "the KV pool .* cannot hold one sequence" -- bounded "$vkv" serve -m "$model" --port 0 --kv-budget 0.0001
expect 1 "--kv-budget .* MiB is larger than the .* MiB heap of device" -- bounded "$vkv" serve -m "$model" --port 0 --kv-budget 1000000000
expect 1 "--alias .a,,b.: each name must be 1 to 255 bytes" -- bounded "$vkv" serve -m "$model" --port 0 --alias a,,b
expect 1 "cannot listen on not-a-host" -- bounded "$vkv" serve -m "$model" --port 0 --host not-a-host
expect 1 "VKVECTOR_SERVE_FAULT is 'decode:N\[,M...\]'.*not 'decode:0'" -- bounded env VKVECTOR_SERVE_FAULT=decode:0 "$vkv" serve -m "$model" --port 0
expect 1 "VKVECTOR_SERVE_FAULT is .*'prefill:N\[,M...\]'.*not 'prefill:x'" -- bounded env VKVECTOR_SERVE_FAULT=prefill:x "$vkv" serve -m "$model" --port 0

# No driver at all: point the loader at a driver manifest that does not exist.
expect 1 "no Vulkan (driver|device) found" -- env -u VKVECTOR_SKIP_WITHOUT_DEVICE VK_DRIVER_FILES=/nonexistent/icd.json VK_ICD_FILENAMES=/nonexistent/icd.json "$vkv" devices
expect 77 "no Vulkan (driver|device) found" -- env VKVECTOR_SKIP_WITHOUT_DEVICE=1 VK_DRIVER_FILES=/nonexistent/icd.json VK_ICD_FILENAMES=/nonexistent/icd.json "$vkv" conform

echo "cli_errors: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
