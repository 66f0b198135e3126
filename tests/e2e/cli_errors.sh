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
expect 2 "--device wants a device index" -- "$vkv" conform --device minus-one
expect 2 "--json needs a value" -- "$vkv" conform --json
expect 2 "unknown option" -- "$vkv" devices --frob
expect 2 "unknown benchmark" -- "$vkv" bench nope
expect 2 "unknown weight type 'q3_X'" -- "$vkv" bench ops --types q3_X
expect 2 "--reps wants" -- "$vkv" bench ops --reps 0
expect 1 "device 99 does not exist" -- "$vkv" conform --device 99
expect 1 "device 99 does not exist" -- env VKVECTOR_DEVICE=99 "$vkv" bench ops --quick
# No driver at all: point the loader at a driver manifest that does not exist.
expect 1 "no Vulkan (driver|device) found" -- env -u VKVECTOR_SKIP_WITHOUT_DEVICE VK_DRIVER_FILES=/nonexistent/icd.json VK_ICD_FILENAMES=/nonexistent/icd.json "$vkv" devices
expect 77 "no Vulkan (driver|device) found" -- env VKVECTOR_SKIP_WITHOUT_DEVICE=1 VK_DRIVER_FILES=/nonexistent/icd.json VK_ICD_FILENAMES=/nonexistent/icd.json "$vkv" conform

echo "cli_errors: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
