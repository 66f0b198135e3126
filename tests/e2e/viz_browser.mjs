// The tier visualizer's report in a real browser (headless Debian chromium
// driven by playwright-core): it loads without console errors or network
// requests, the numbers it shows are the tier dump's, hovering the tier map
// shows each position's token, tier, score and residual, and a screenshot of
// the map holds the three tier colours in the dump's proportions.
//
//   node viz_browser.mjs check --dump D.json --html R.html [--html-u8 R8.html] --out DIR [--chromium PATH]
//   node viz_browser.mjs synth OUT.json N_CONTEXT N_LAYER N_KV_HEAD   (a synthetic dump, for scale)
//   node viz_browser.mjs scale --html BIG.html --dump BIG.json --out DIR  (load and redraw times)
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { PNG } from 'pngjs';
import { args, check, launch, tally } from './browser_common.mjs';

const TIER_RGB = { R: [0x25, 0x63, 0xeb], A: [0xf5, 0x9e, 0x0b], E: [0xcb, 0xd5, 0xe1] };

function fmtBytes(b) {  /* as report.js */
  if (b < 1024) return b.toFixed(0) + ' B';
  if (b < 1024 * 1024) return (b / 1024).toFixed(1) + ' KiB';
  if (b < 1024 * 1024 * 1024) return (b / (1024 * 1024)).toFixed(1) + ' MiB';
  return (b / (1024 * 1024 * 1024)).toFixed(2) + ' GiB';
}
const fmtInt = (n) => Number(n).toLocaleString('en-US');
const near = (a, b, tol) => Math.abs(a - b) <= tol;

/* Opens a report; records console errors, page errors and any request that
 * is not the file itself (the report must need no network). */
async function open(browser, html, width = 1400, height = 1000) {
  const page = await browser.newPage({ viewport: { width, height }, deviceScaleFactor: 1 });
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push('console error: ' + m.text()); });
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  page.on('request', (r) => { if (!r.url().startsWith('file:')) problems.push('network request: ' + r.url()); });
  page.on('requestfailed', (r) => problems.push('request failed: ' + r.url()));
  const url = pathToFileURL(path.resolve(html)).href;
  const t0 = Date.now();
  await page.goto(url, { waitUntil: 'load', timeout: 120000 });
  await page.waitForFunction(() => document.body.dataset.ready === '1' || document.body.dataset.error, null, { timeout: 120000 });
  const loadMs = Date.now() - t0;
  const err = await page.evaluate(() => document.body.dataset.error || null);
  check(!err, `${path.basename(html)}: the report shows an error: ${err}`);
  return { page, problems, loadMs };
}

/* Waits until the page has drawn a frame (redraws are scheduled on animation frames). */
const nextFrame = (page) => page.evaluate(() => new Promise((res) => requestAnimationFrame(() => requestAnimationFrame(() => res()))));

function tierLetter(dump, l, h, j) { return dump.layers[l].heads[h].tiers[j]; }

/* Reads the tooltip after moving the mouse to (x, y). */
async function hoverAt(page, x, y) {
  await page.mouse.move(x, y);
  await page.waitForSelector('#tip:not([hidden])', { timeout: 5000 });
  return page.evaluate(() => {
    const f = (n) => document.querySelector(`#tip [data-field="${n}"]`);
    return {
      layer: Number(f('layer').textContent), head: Number(f('head').textContent), pos: Number(f('pos').textContent),
      token: f('token').dataset.raw, tokenShown: f('token').textContent,
      tier: f('tier').dataset.value, tierText: f('tier').textContent,
      score: f('score').dataset.value, scoreText: f('score').textContent,
      residual: f('residual').dataset.value, residualText: f('residual').textContent,
    };
  });
}

function checkValue(label, shown, want, enc, kind, st) {
  if (want === null) return check(shown === 'NaN', `${label}: the dump has null, the tooltip shows ${shown}`);
  const v = Number(shown);
  /* f16 with a per-strip power-of-two scale: 11 bits of the value, or of the strip's maximum for tiny ones;
     u8: half a step of 1/254 of the strip's range (scores) or of its log range (residuals) */
  let tol;
  if (enc === 'f16') tol = Math.abs(want) * 1e-3 + st.max * 1e-4;
  else if (kind === 'score') tol = (st.hi - st.lo) / 254 + 1e-6;
  else tol = Math.abs(want) * (Math.exp((Math.log(st.hi) - Math.log(st.minPos)) / 253) - 1) + 1e-9;
  /* the dump's own numbers have 4 significant digits */
  tol += Math.abs(want) * 1e-4;
  return check(Number.isFinite(v) && near(v, want, tol), `${label}: tooltip ${shown}, dump ${want} (tolerance ${tol})`);
}

function stripStats(arr) {
  let max = 0, lo = Infinity, hi = -Infinity, minPos = Infinity;
  for (const v of arr) {
    if (v === null) continue;
    max = Math.max(max, Math.abs(v));
    lo = Math.min(lo, v); hi = Math.max(hi, v);
    if (v > 0) minPos = Math.min(minPos, v);
  }
  return { max, lo, hi, minPos };
}

/* Hovers one position of each tier in each of a few (layer, head) strips and
 * compares the tooltip with the dump. */
async function checkHovers(page, dump, enc, name) {
  const L = dump.n_layer, H = dump.n_kv_head;
  await page.evaluate(() => window.vkvViz.zoom(16));
  const strips = [[0, 0], [L - 1, H - 1], [Math.floor(L / 2), Math.min(1, H - 1)]];
  let hovered = 0;
  for (const [l, h] of strips) {
    const hd = dump.layers[l].heads[h];
    for (const want of dump.vector ? ['R', 'A', 'E'] : ['R', 'E']) {
      const j = hd.tiers.indexOf(want);
      if (!check(j >= 0, `${name}: layer ${l} head ${h} has no '${want}' position`)) continue;
      const c = await page.evaluate(([a, b, k]) => window.vkvViz.cellCenter(a, b, k), [l, h, j]);
      await nextFrame(page); /* the scroll event of cellCenter's scrolling has been handled */
      const t = await hoverAt(page, c.x, c.y);
      const where = `${name}: hover layer ${l} head ${h} position ${j}`;
      check(t.layer === l && t.head === h && t.pos === j, `${where}: the tooltip is for layer ${t.layer} head ${t.head} position ${t.pos}`);
      check(t.token === dump.tokens[j], `${where}: token ${JSON.stringify(t.token)}, dump ${JSON.stringify(dump.tokens[j])}`);
      check(t.tokenShown.length > 0, `${where}: no token text shown`);
      check(t.tier === want, `${where}: tier ${t.tier}, dump ${want}`);
      if (enc !== 'none') {
        const ss = stripStats(hd.scores), rs = stripStats(hd.residuals);
        checkValue(`${where} score`, t.score, hd.scores[j], enc, 'score', ss);
        checkValue(`${where} residual`, t.residual, hd.residuals[j], enc, 'residual', rs);
        if (want === 'E' && hd.residuals[j] === null) check(/outside the pool/.test(t.residualText), `${where}: residual text ${t.residualText}`);
      }
      hovered++;
    }
  }
  return hovered;
}

/* The numbers the page shows against the dump's. */
async function checkNumbers(page, dump) {
  const dom = await page.evaluate(() => {
    const cards = {};
    for (const c of document.querySelectorAll('.card')) {
      cards[c.dataset.metric] = { value: c.dataset.value, big: c.querySelector('.v').textContent, sub: c.querySelector('.sub').textContent };
    }
    const mem = [...document.querySelectorAll('.mem-row[data-layer]')].map((r) => ({
      layer: r.dataset.layer, retained: Number(r.dataset.retained), approximated: Number(r.dataset.approximated),
      uncompressed: Number(r.dataset.uncompressed), nR: Number(r.dataset.nRetained), nA: Number(r.dataset.nApproximated),
      nE: Number(r.dataset.nEvicted), text: r.querySelector('.mem-txt').textContent,
    }));
    const cells = [...document.querySelectorAll('#recon-table td[data-kind]')].map((td) => ({
      kind: td.dataset.kind, layer: td.dataset.layer, head: td.dataset.head, value: td.dataset.value, text: td.textContent,
    }));
    const settings = {};
    for (const tr of document.querySelectorAll('#settings-table tr')) settings[tr.dataset.key] = tr.querySelector('td').textContent;
    return { cards, mem, cells, settings, title: document.title };
  });
  const B = dump.bytes;
  for (const k of ['uncompressed', 'kept_total', 'retained', 'approximated', 'w_matrices']) {
    const c = dom.cards[k];
    if (!check(c, `no card for bytes.${k}`)) continue;
    check(Number(c.value) === B[k], `card ${k}: ${c.value}, dump ${B[k]}`);
    check(c.big === fmtBytes(B[k]), `card ${k} shows ${c.big}, expected ${fmtBytes(B[k])}`);
    if (B[k]) check(c.sub.includes(fmtInt(B[k]) + ' B'), `card ${k}: '${c.sub}' lacks ${fmtInt(B[k])} B`);
  }
  const achieved = 1 - B.kept_total / B.uncompressed;
  check(dom.cards.compression && dom.cards.compression.big === (100 * achieved).toFixed(1) + '%',
    `compression card shows ${dom.cards.compression && dom.cards.compression.big}, expected ${(100 * achieved).toFixed(1)}%`);
  check(near(achieved, dump.compression, 0.02), `achieved compression ${achieved} is far from p_c ${dump.compression}`);
  const tot = { R: 0, A: 0, E: 0 };
  dump.layers.forEach((ly, l) => {
    const n = { R: 0, A: 0, E: 0 };
    for (const h of ly.heads) { n.R += h.n_retained; n.A += h.n_approximated; n.E += h.n_evicted; }
    for (const t of 'RAE') tot[t] += n[t];
    const m = dom.mem.find((r) => r.layer === String(l));
    if (!check(m, `no memory row for layer ${l}`)) return;
    check(m.retained === ly.bytes_retained && m.approximated === ly.bytes_approximated,
      `memory row ${l}: ${m.retained}/${m.approximated} B, dump ${ly.bytes_retained}/${ly.bytes_approximated}`);
    check(m.nR === n.R && m.nA === n.A && m.nE === n.E, `memory row ${l}: tokens ${m.nR}/${m.nA}/${m.nE}, dump ${n.R}/${n.A}/${n.E}`);
    check(m.text.includes(fmtBytes(ly.bytes_retained + ly.bytes_approximated)), `memory row ${l}: '${m.text}' lacks the kept bytes`);
    check(m.uncompressed * dump.n_layer === B.uncompressed, `memory row ${l}: uncompressed ${m.uncompressed}`);
    const E = dom.cells.find((c) => c.kind === 'distortion' && c.layer === String(l));
    if (check(E, `no distortion cell for layer ${l}`)) {
      check(ly.distortion === null ? E.value === 'null' : near(Number(E.value), ly.distortion, 1e-12),
        `layer ${l}: E shown ${E.value}, dump ${ly.distortion}`);
      if (ly.distortion !== null) check(E.text.includes(ly.distortion.toFixed(4)), `layer ${l}: E text '${E.text}'`);
    }
    ly.heads.forEach((h, hi) => {
      for (const kind of ['r2', 'rel_err']) {
        const c = dom.cells.find((x) => x.kind === kind && x.layer === String(l) && x.head === String(hi));
        if (!dump.vector && !c) continue; /* VECTOR off: no heatmap */
        if (!check(c, `no ${kind} cell for layer ${l} head ${hi}`)) continue;
        const want = h[kind];
        check(want === null ? c.value === 'null' : near(Number(c.value), want, 1e-12), `${kind} layer ${l} head ${hi}: ${c.value}, dump ${want}`);
        if (kind === 'r2' && want !== null) check(c.text === want.toFixed(3), `r2 layer ${l} head ${hi} shows '${c.text}'`);
      }
    });
  });
  const names = { R: 'retained', A: 'approximated', E: 'evicted' };
  for (const t of 'RAE') {
    const c = dom.cards['tokens_' + names[t]];
    check(c && Number(c.value) === tot[t] && c.big === fmtInt(tot[t]), `${names[t]} positions card: ${c && c.big}, dump ${tot[t]}`);
  }
  check(dom.settings.model === dump.model, `settings: model '${dom.settings.model}'`);
  check(dom.settings.press === dump.press, `settings: press '${dom.settings.press}'`);
  check(dom.settings.compression === String(dump.compression), `settings: p_c '${dom.settings.compression}'`);
  check(dom.settings.vector.startsWith(dump.vector ? 'on' : 'off'), `settings: vector '${dom.settings.vector}'`);
  check(dom.settings.query_aware.startsWith(dump.query_aware ? 'yes' : 'no'), `settings: query-aware '${dom.settings.query_aware}'`);
  check(dom.settings.approx_ratio.startsWith(String(Number(dump.approx_ratio.toPrecision(4)))), `settings: p_a '${dom.settings.approx_ratio}'`);
  check(dom.settings.n_context === fmtInt(dump.n_context), `settings: n_context '${dom.settings.n_context}'`);
  return tot;
}

/* Pixels of each tier colour in a PNG (within +-3 per channel). */
function countTierPixels(file) {
  const png = PNG.sync.read(fs.readFileSync(file));
  const n = { R: 0, A: 0, E: 0, white: 0, total: png.width * png.height };
  const d = png.data;
  for (let i = 0; i < d.length; i += 4) {
    for (const t of 'RAE') {
      const c = TIER_RGB[t];
      if (Math.abs(d[i] - c[0]) <= 3 && Math.abs(d[i + 1] - c[1]) <= 3 && Math.abs(d[i + 2] - c[2]) <= 3) { n[t]++; break; }
    }
    if (d[i] > 250 && d[i + 1] > 250 && d[i + 2] > 250) n.white++;
  }
  return { ...n, width: png.width, height: png.height };
}

async function cmdCheck(opt) {
  const dump = JSON.parse(fs.readFileSync(opt.dump, 'utf8'));
  fs.mkdirSync(opt.out, { recursive: true });
  const browser = await launch(opt);
  try {
    /* --- the f16 report: numbers, hovers, zoom, screenshots --- */
    const { page, problems, loadMs } = await open(browser, opt.html);
    console.log(`loaded ${path.basename(opt.html)} in ${loadMs} ms`);
    const tot = await checkNumbers(page, dump);

    /* the whole page at the initial zoom (fit), nothing hovered */
    await page.mouse.move(1, 1);
    const shot = path.join(opt.out, 'report.png'), mapShot = path.join(opt.out, 'map.png');
    await page.screenshot({ path: shot, fullPage: true });
    await page.locator('#map-wrap').screenshot({ path: mapShot });
    const px = countTierPixels(mapShot);
    const coloured = px.R + px.A + px.E, totPos = tot.R + tot.A + tot.E;
    console.log(`map screenshot ${px.width}x${px.height}: retained ${px.R} px, approximated ${px.A} px, evicted ${px.E} px, white ${px.white} px`);
    check(px.white < px.total * 0.9, 'the map screenshot is (nearly) blank');
    for (const t of 'RAE') {
      if (tot[t] === 0) { check(px[t] === 0, `tier ${t} has no positions but ${px[t]} pixels`); continue; }
      check(px[t] > 200, `tier ${t}: only ${px[t]} pixels of its colour in the map`);
      /* at fit zoom every position is drawn: the colours' shares follow the tiers' */
      check(near(px[t] / coloured, tot[t] / totPos, 0.05),
        `tier ${t}: ${(100 * px[t] / coloured).toFixed(1)}% of the map's tier pixels, ${(100 * tot[t] / totPos).toFixed(1)}% of the positions`);
    }
    const full = countTierPixels(shot);
    check(full.height > 1000 && full.white < full.total * 0.98, `the page screenshot ${full.width}x${full.height} looks blank`);

    /* hovering with the mouse anywhere on a strip shows that position */
    const r = await page.locator('#map-scroll').boundingBox();
    const c = await page.evaluate(() => window.vkvViz.cellCenter(1, 0, 0));
    await nextFrame(page);
    for (const fx of [0.13, 0.5, 0.87]) {
      const x = r.x + 58 + (r.width - 58 - 20) * fx;
      const t = await hoverAt(page, x, c.y);
      check(t.layer === 1 && t.head === 0, `hover at x=${x}: layer ${t.layer} head ${t.head}, expected layer 1 head 0`);
      check(t.pos >= 0 && t.pos < dump.n_context, `hover at x=${x}: position ${t.pos}`);
      check(t.token === dump.tokens[t.pos], `hover at x=${x}: token ${JSON.stringify(t.token)}, dump ${JSON.stringify(dump.tokens[t.pos])}`);
      check(t.tier === tierLetter(dump, 1, 0, t.pos), `hover at x=${x}: tier ${t.tier}, dump ${tierLetter(dump, 1, 0, t.pos)}`);
    }
    await page.screenshot({ path: path.join(opt.out, 'hover.png') });

    const n = await checkHovers(page, dump, 'f16', 'f16 report');
    console.log(`hovered ${n} cells of known tiers`);
    await page.screenshot({ path: path.join(opt.out, 'zoomed.png') });

    /* zoom buttons, keyboard, row height: still drawing, no errors */
    const info0 = await page.textContent('#zoom-info');
    await page.click('#zoom-fit');
    await nextFrame(page);
    const info1 = await page.textContent('#zoom-info');
    await page.click('#zoom-in');
    await page.click('#zoom-in');
    await nextFrame(page);
    const info2 = await page.textContent('#zoom-info');
    check(info0 !== info1 && info1 !== info2, `zoom info did not change: '${info0}' '${info1}' '${info2}'`);
    check(new RegExp(`of ${dump.n_context}$`).test(info1) && info1.includes('positions 0\u2013'), `fit shows '${info1}'`);
    await page.selectOption('#row-height', '4');
    await page.focus('#map-scroll');
    await page.keyboard.press('0');
    await nextFrame(page);
    check(problems.length === 0, 'f16 report: ' + problems.join('; '));
    await page.close();

    /* --- the u8 report: loads, hovers agree within u8's rounding --- */
    if (opt['html-u8']) {
      const u = await open(browser, opt['html-u8']);
      const m = await checkHovers(u.page, dump, 'u8', 'u8 report');
      check(m > 0, 'u8 report: nothing hovered');
      check(u.problems.length === 0, 'u8 report: ' + u.problems.join('; '));
      await u.page.close();
    }
  } finally {
    await browser.close();
  }
}

/* A synthetic dump (random tiers in the VECTOR proportions, random scores
 * and residuals) to check the report's size and speed at scale. */
function cmdSynth(out, n, L, H) {
  n = Number(n); L = Number(L); H = Number(H);
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 4294967296);
  const fd = fs.openSync(out, 'w');
  const w = (s) => fs.writeSync(fd, s);
  const toks = [];
  for (let j = 0; j < n; j++) toks.push(JSON.stringify(String.fromCharCode(97 + (j % 26))));
  const kvb = 2 * 128, layerU = 2 * kvb * H * n;
  w(`{"vkvector_tier_dump":1,"model":"synthetic-${n}x${L}x${H}.gguf","arch":"llama","n_layer":${L},"n_kv_head":${H},"head_dim":128,` +
    `"kv_type":"f16","press":"snapkv","compression":0.5,"approx_ratio":0.25,"vector":true,"query_aware":true,"n_context":${n},` +
    `"tokens":[${toks.join(',')}],`);
  const nKept = Math.floor(n * 0.5), a = Math.min(Math.floor(0.25 * n), nKept, n - nKept);
  const nR = nKept - a, nA = 2 * a, nE = n - nKept - a;
  w(`"bytes":{"uncompressed":${layerU * L},"retained":${2 * kvb * nR * H * L},"approximated":${kvb * nA * H * L},"w_matrices":${L * H * 128 * 128 * 4},"kept_total":${(2 * nR + nA) * kvb * H * L}},"layers":[`);
  for (let l = 0; l < L; l++) {
    w(`${l ? ',' : ''}{"layer":${l},"distortion":${(0.1 + 0.01 * l).toFixed(4)},"bytes_retained":${2 * kvb * nR * H},"bytes_approximated":${kvb * nA * H},"heads":[`);
    for (let h = 0; h < H; h++) {
      const t = new Array(n);
      for (let j = 0; j < n; j++) t[j] = j < nR ? 'R' : j < nR + nA ? 'A' : 'E';
      for (let j = n - 1; j > 0; j--) { const k = Math.floor(rnd() * (j + 1)); [t[j], t[k]] = [t[k], t[j]]; }
      const sc = [], rs = [];
      for (let j = 0; j < n; j++) {
        sc.push((rnd() * 2 - 1).toPrecision(4));
        rs.push(t[j] === 'E' ? 'null' : (rnd() * 3).toPrecision(4));
      }
      w(`${h ? ',' : ''}{"head":${h},"n_retained":${nR},"n_approximated":${nA},"n_evicted":${nE},"r2":${(0.9 - 0.02 * l).toFixed(4)},"rel_err":${(0.05 + 0.01 * h).toFixed(4)},` +
        `"tiers":"${t.join('')}","scores":[${sc.join(',')}],"residuals":[${rs.join(',')}]}`);
    }
    w(']}');
  }
  w(']}\n');
  fs.closeSync(fd);
}

/* Load time and redraw times of a big report. */
async function cmdScale(opt) {
  const browser = await launch(opt);
  try {
    const { page, problems, loadMs } = await open(browser, opt.html);
    const times = await page.evaluate(() => {
      const t = (f) => { const t0 = performance.now(); f(); return performance.now() - t0; };
      const v = window.vkvViz;
      return {
        fit: t(() => v.fit()),
        zoom4: t(() => v.zoom(4)),
        zoom20: t(() => v.zoom(20)),
        far: t(() => v.cellCenter(v.meta.n_layer - 1, v.meta.n_kv_head - 1, v.meta.n_context - 1)),
        refit: t(() => v.fit()),
      };
    });
    fs.mkdirSync(opt.out, { recursive: true });
    await page.mouse.move(1, 1);
    await nextFrame(page);
    await page.screenshot({ path: path.join(opt.out, 'scale.png') });
    const c = await page.evaluate(() => { window.vkvViz.zoom(20); return window.vkvViz.cellCenter(0, 0, 5); });
    await nextFrame(page);
    const tip = await hoverAt(page, c.x, c.y);
    const size = fs.statSync(opt.html).size;
    console.log(`scale: ${path.basename(opt.html)} ${(size / 1048576).toFixed(1)} MiB, loaded and drawn in ${loadMs} ms; ` +
      `redraws (ms): ${Object.entries(times).map(([k, v]) => k + ' ' + v.toFixed(0)).join(', ')}`);
    check(tip.pos === 5, `scale: hover shows position ${tip.pos}`);
    check(loadMs < Number(opt['max-load-ms'] || 60000), `scale: loading took ${loadMs} ms`);
    for (const [k, v] of Object.entries(times)) check(v < Number(opt['max-draw-ms'] || 2000), `scale: redraw '${k}' took ${v.toFixed(0)} ms`);
    check(problems.length === 0, 'scale report: ' + problems.join('; '));
  } finally {
    await browser.close();
  }
}

const opt = args(process.argv.slice(2));
const cmd = opt._[0];
try {
  if (cmd === 'check') await cmdCheck(opt);
  else if (cmd === 'synth') { cmdSynth(...opt._.slice(1)); process.exit(0); }
  else if (cmd === 'scale') await cmdScale(opt);
  else { console.error('usage: node viz_browser.mjs check|synth|scale ...'); process.exit(2); }
} catch (e) {
  check(false, `${cmd}: ${e.stack || e}`);
}
console.log(`viz_browser ${cmd}: ${tally.passes} passed, ${tally.fails} failed`);
process.exit(tally.fails ? 1 : 0);
