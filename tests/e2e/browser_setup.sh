# Sourced by the browser tests (viz_browser.sh, score_plot_browser.sh) with
# $test set to the test's name and $here to tests/e2e: sets $node and
# $chromium, installing the pinned npm packages (tests/e2e/package-lock.json)
# with `npm ci` when absent. Exits 77 (skip) when node or chromium is missing,
# 1 when npm ci fails.
node=$(command -v node || true)
chromium=${VKVECTOR_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$node" ] || [ -z "$chromium" ]; then
  echo "$test: SKIP: needs node and chromium (Debian: apt-get install nodejs npm chromium)"
  exit 77
fi
if [ ! -f "$here/node_modules/playwright-core/package.json" ] || [ ! -f "$here/node_modules/pngjs/package.json" ]; then
  echo "$test: installing the pinned npm packages (npm ci in tests/e2e)"
  if ! (cd "$here" && npm ci --no-audit --no-fund); then
    echo "$test: FAIL: 'npm ci' in tests/e2e failed (tools/setup.sh runs it on a machine with access to npm)"
    exit 1
  fi
fi
