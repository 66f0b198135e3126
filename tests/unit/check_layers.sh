#!/usr/bin/env bash
# The layering check (tools/check_layers.py) passes on the tree, and fails,
# naming the file, the line and the rule, on a scratch copy with each kind of
# violation planted: an upward include, a peer include, another folder's
# private header, a circle between folders, a folder the diagram lacks.
set -u
root=$1
check=$root/tools/check_layers.py
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

out=$(python3 "$check" "$root" 2>&1) && ok || bad "the tree itself: $out"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fresh() { rm -rf "$tmp/t"; mkdir -p "$tmp/t"; cp -r "$root/src" "$root/calib" "$root/docs" "$tmp/t/"; }
# plant FILE LINE: appends an include line to FILE of the scratch copy; prints its line number.
plant() { echo "$2" >> "$tmp/t/$1"; wc -l < "$tmp/t/$1" | tr -d ' '; }
# expect_fail PATTERN...: the check exits 1 and prints every pattern.
expect_fail() {
  local out rc p
  out=$(python3 "$check" "$tmp/t" 2>&1); rc=$?
  [ "$rc" -eq 1 ] || { bad "exit $rc (want 1): $out"; return; }
  for p in "$@"; do grep -qF -- "$p" <<<"$out" || { bad "no '$p' in: $out"; return; }; done
  ok
}

fresh; n=$(plant src/core/status.c '#include "cli/cli.h"')
expect_fail "src/core/status.c:$n: includes \"cli/cli.h\": core may not include cli, a layer above it"
fresh; n=$(plant src/vk/ops.c '#include "kv/kv_cache.h"')
expect_fail "src/vk/ops.c:$n: includes \"kv/kv_cache.h\": vk may not include kv, a layer above it"
fresh; n=$(plant src/eval/metrics.c '#include "viz/viz.h"')
expect_fail "src/eval/metrics.c:$n: includes \"viz/viz.h\": eval may not include viz, a peer on its own layer"
fresh; n=$(plant src/session/session.c '#include "tok/tok_internal.h"')
expect_fail "src/session/session.c:$n: includes \"tok/tok_internal.h\", a private header of tok/"
fresh; a=$(plant src/press/press.h '#include "session/session.h"')
expect_fail "folders include each other in a circle: press -> session -> press" \
            "press -> session at src/press/press.h:$a"
fresh; mkdir -p "$tmp/t/src/newthing"; echo 'int x;' > "$tmp/t/src/newthing/x.c"
expect_fail "src/newthing: a folder of sources that the layer diagram"
fresh; sed -i 's/^## 1. Layers$/## 1. Strata/' "$tmp/t/docs/ARCHITECTURE.md"
out=$(python3 "$check" "$tmp/t" 2>&1); rc=$?
[ "$rc" -ne 0 ] && grep -q "no '## 1. Layers' section" <<<"$out" && ok || bad "a missing diagram: exit $rc, $out"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
