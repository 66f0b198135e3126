# Sourced by viz_cli.sh and write_errors.sh: make_tier_dump NAME MODEL DUMP
# sets $context (a short prompt) and writes a keydiff tier dump of it with
# vkvector ($vkv), its log in DUMP.log; exits 77 (skip) without a Vulkan
# device, 1 when the run fails.
make_tier_dump() {
  local name=$1 model=$2 dump=$3 rc
  context=$(head -c 300 "$shared/data/tinyshakespeare.txt")
  "$vkv" run -m "$model" -p "$context" --question "Who?" -n 0 --press keydiff --compression 0.5 \
    --tier-dump "$dump" > "$dump.log" 2>&1
  rc=$?
  [ $rc -eq 77 ] && { echo "$name: SKIP: no Vulkan device to make a tier dump"; exit 77; }
  [ $rc -eq 0 ] || { echo "FAIL: tier dump: $(tail -3 "$dump.log")"; exit 1; }
}
