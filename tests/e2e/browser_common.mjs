// What the browser tests share (viz_browser.mjs, score_plot_browser.mjs):
// their checks' tally, their options, and headless Debian chromium launched
// through playwright-core with nothing reaching the network.
import { chromium } from 'playwright-core';

export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export const tally = { passes: 0, fails: 0 };
export function check(cond, msg) {
  if (cond) tally.passes++;
  else { tally.fails++; console.log('FAIL: ' + msg); }
  return cond;
}

/* --name value pairs into o.name; the rest into o._ */
export function args(argv) {
  const o = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith('--')) o[argv[i].slice(2)] = argv[++i];
    else o._.push(argv[i]);
  }
  return o;
}

export async function launch(opt) {
  const executablePath = opt.chromium || process.env.VKVECTOR_CHROMIUM || '/usr/bin/chromium';
  return chromium.launch({ executablePath, headless: true, args: CHROMIUM_ARGS, timeout: 60000 });
}
