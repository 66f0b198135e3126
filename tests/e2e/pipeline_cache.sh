#!/usr/bin/env bash
# The persistent pipeline cache and run's set-up figures (README.md, "Device
# choice"), on the project's own model with a private XDG_CACHE_HOME: the
# second run of the same command builds its pipelines in under a tenth of the
# first run's time; a truncated, byte-flipped, foreign or otherwise wrong
# cache file is ignored with one warning and rewritten; VKVECTOR_PIPELINE_CACHE
# moves or disables the file; a --ctx whose KV cache cannot fit the device
# heap is refused up front with the numbers.
set -u
vkv=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME=$tmp/xdg
unset VKVECTOR_PIPELINE_CACHE
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# One short greedy run; its stderr in $tmp/err, its exit status returned.
run() { "$vkv" run -p "ROMEO:" -n 4 --temp 0 "$@" >/dev/null 2>"$tmp/err"; }
pipeline_seconds() { sed -n 's/^pipelines: *[0-9]* built in \([0-9.]*\) s.*/\1/p' "$tmp/err"; }
warnings() { grep -c "warning: ignoring the pipeline cache" "$tmp/err"; }

run; rc=$?
[ $rc -eq 77 ] && { echo "pipeline_cache: SKIP: no Vulkan device"; exit 77; }
[ $rc -eq 0 ] || { echo "FAIL: first run -> exit $rc: $(cat "$tmp/err")"; exit 1; }
first=$(pipeline_seconds)
for want in '^load: +model [0-9.]+ s \([0-9.]+ MiB of weights\)' \
            '^pipelines: +[1-9][0-9]* built in [0-9.]+ s.*new pipeline cache' \
            '^host memory: peak [1-9][0-9.]* MiB resident \(VmHWM\)' \
            '^prompt: +[0-9]+ tokens in [0-9.]+ s .*pipeline building not included' \
            '^device memory: weights [0-9.]+ MiB \+ KV cache [0-9.]+ MiB \+ scratch [0-9.]+ MiB = [0-9.]+ MiB of the [0-9.]+ MiB heap'; do
  if grep -qE -- "$want" "$tmp/err"; then ok; else bad "first run prints no line matching '$want': $(cat "$tmp/err")"; fi
done
cache=$(ls "$XDG_CACHE_HOME"/vkvector/pipelines-*.bin 2>/dev/null | head -n 1)
if [ -n "$cache" ] && [ "$(head -c 7 "$cache")" = vkvpipe ]; then ok; else bad "no cache file in $XDG_CACHE_HOME/vkvector"; fi
[ "$(warnings)" -eq 0 ] && ok || bad "first run warned: $(cat "$tmp/err")"

run || bad "second run failed: $(cat "$tmp/err")"
second=$(pipeline_seconds)
if [ -n "$first" ] && [ -n "$second" ] && awk -v a="$first" -v b="$second" 'BEGIN { exit !(b * 10 < a) }'; then ok
else bad "second run built pipelines in ${second:-?} s, not under a tenth of the first run's ${first:-?} s"; fi
grep -qE '^pipelines: .*pipeline cache .*, [1-9][0-9]* bytes read' "$tmp/err" && ok || bad "second run read no cache: $(cat "$tmp/err")"
[ "$(warnings)" -eq 0 ] && ok || bad "second run warned: $(cat "$tmp/err")"
cp "$cache" "$tmp/good.bin"

# Each damaged file: the run succeeds with one warning naming the problem,
# and the file is rewritten as a valid cache.
damage() {
  local name=$1 pattern=$2 edit=$3
  cp "$tmp/good.bin" "$cache"
  python3 - "$cache" "$edit" <<'PY'
import struct, sys
path, edit = sys.argv[1], sys.argv[2]
b = bytearray(open(path, 'rb').read())
def fnv(data):
    h = 0xcbf29ce484222325
    for x in data: h = ((h ^ x) * 0x100000001b3) & (2**64 - 1)
    return h
if edit == 'truncate': b = b[:len(b) - 5]
elif edit == 'short': b = b[:40]
elif edit == 'flip': b[-1] ^= 0xff; b[70] ^= 0x55
elif edit == 'magic': b[0:8] = b'GGUF\0\0\0\0'
elif edit == 'device': b[12:16] = struct.pack('<I', struct.unpack('<I', b[12:16])[0] ^ 0x1234)
elif edit == 'driver': b[20:24] = struct.pack('<I', struct.unpack('<I', b[20:24])[0] + 1)
elif edit == 'build': b[40:48] = struct.pack('<Q', struct.unpack('<Q', b[40:48])[0] ^ 1)
elif edit == 'vulkan':
    # A consistent file whose Vulkan header names another vendor.
    b[72:76] = struct.pack('<I', struct.unpack('<I', b[72:76])[0] ^ 0xffff)
    b[56:64] = struct.pack('<Q', fnv(b[64:]))
open(path, 'wb').write(bytes(b))
PY
  cp "$cache" "$tmp/damaged.bin"
  run; rc=$?
  if [ $rc -ne 0 ]; then bad "$name cache: run -> exit $rc: $(cat "$tmp/err")"; return; fi
  if [ "$(warnings)" -eq 1 ] && grep -qE "warning: ignoring the pipeline cache .*$pattern" "$tmp/err"; then ok
  else bad "$name cache: want one warning matching '$pattern', stderr: $(cat "$tmp/err")"; fi
  if [ "$(head -c 7 "$cache")" = vkvpipe ] && ! cmp -s "$cache" "$tmp/damaged.bin"; then ok
  else bad "$name cache: the file was not rewritten"; fi
}
damage truncated "truncated" truncate
damage "40-byte" "truncated" short
damage byte-flipped "checksum" flip
damage "wrong magic" "not a vkvector pipeline cache" magic
damage "another device's" "another device" device
damage "another driver's" "another driver" driver
damage "another build's" "another vkvector build" build
damage "wrong Vulkan header" "Vulkan header" vulkan

# The rewritten file is valid: no warning the next time.
run && [ "$(warnings)" -eq 0 ] && ok || bad "run after the rewrite: $(cat "$tmp/err")"

# VKVECTOR_PIPELINE_CACHE: a directory of one's own, or off.
VKVECTOR_PIPELINE_CACHE=$tmp/own run || bad "run with VKVECTOR_PIPELINE_CACHE=dir failed: $(cat "$tmp/err")"
ls "$tmp"/own/pipelines-*.bin >/dev/null 2>&1 && ok || bad "VKVECTOR_PIPELINE_CACHE=$tmp/own wrote no file there"
export XDG_CACHE_HOME=$tmp/xdg-off
VKVECTOR_PIPELINE_CACHE=off run || bad "run with VKVECTOR_PIPELINE_CACHE=off failed: $(cat "$tmp/err")"
if grep -q "pipeline cache not kept on disk" "$tmp/err" && [ ! -e "$XDG_CACHE_HOME/vkvector" ]; then ok
else bad "VKVECTOR_PIPELINE_CACHE=off still kept a cache: $(cat "$tmp/err")"; fi

# A context whose KV cache cannot fit the device heap: refused before any
# allocation, with the numbers, not a crash. The largest context run takes
# holds 72 GiB of f32 KV for this model: more than any heap below that.
heap=$("$vkv" devices --json 2>/dev/null | python3 -c 'import json, sys
print(max(h["size"] for d in json.load(sys.stdin) if d["default"] for h in d["heaps"]))')
if [ -n "$heap" ] && [ "$heap" -lt $((72 << 30)) ]; then
  "$vkv" run -p "ROMEO:" -n 4 --ctx 16777216 --kv-type f32 >/dev/null 2>"$tmp/err"; rc=$?
  if [ $rc -eq 1 ] && grep -qE "16777216-token context does not fit device .*: weights [0-9.]+ MiB \+ KV cache [0-9.]+ MiB \+ scratch [0-9.]+ MiB = [0-9.]+ MiB, over its [0-9.]+ MiB memory heap; lower --ctx \(at most [0-9]+ tokens fit\)" "$tmp/err"; then ok
  else bad "--ctx 16777216 -> exit $rc, stderr: $(cat "$tmp/err")"; fi
else
  echo "pipeline_cache: note: the device heap (${heap:-unknown} bytes) holds the largest context; its refusal is not tested"
fi

echo "pipeline_cache: $passes passed, $fails failed (pipelines: first run ${first:-?} s, second ${second:-?} s)"
[ $fails -eq 0 ]
