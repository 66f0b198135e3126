// The leaderboard's chart (src/eval/score_plot.c) in a real browser (headless
// Debian chromium driven by playwright-core): the page loads without errors
// or network requests; it has the expected series, each with its points'
// exact values, tooltips and legend entry; every marker sits where the
// rendered axes' ticks put its values; a press and its + VECTOR share a
// colour, the + VECTOR line is dashed; and the screenshot has each series'
// colour at each of its markers.
//
//   node score_plot_browser.mjs synth-longbench RESULTS.jsonl EXPECT.json
//       a longbench results file (two presses with and without VECTOR at three
//       ratios, the full cache; two tasks) and the chart it must give
//   node score_plot_browser.mjs synth-ruler RESULTS.jsonl EXPECT.json
//       the same for ruler-report: two presses, one with and without VECTOR, at
//       two ratios, the full cache; two tasks at two lengths
//   node score_plot_browser.mjs check --html PLOT.html --expect EXPECT.json --out DIR --name NAME [--chromium PATH]
//       EXPECT.json: {"title": str, "subtitle_contains": str, "series": [{"label", "group",
//       "vector", "baseline", "points": [[x, y], ...]}, ...]}; screenshots DIR/NAME.png, DIR/NAME-chart.png
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { PNG } from 'pngjs';
import { args, check, launch, tally } from './browser_common.mjs';

const near = (a, b, tol) => Math.abs(a - b) <= tol;

/* The results of a made-up LongBench run: per row, how many of the samples
 * of passage_retrieval_en (10) and trec (7) are answered right. The chart's
 * points are the rows' averages of 100 x each task's mean score. */
function synthLongbench(resultsPath, expectPath) {
  const model = `toy <&> "model's".gguf`; /* escaped in the page, shown as it is */
  const nPre = 10, nTrec = 7;
  const rows = [
    { press: null, pc: 0, vector: false, right: [10, 7] },
    { press: 'snapkv', pc: 0.25, vector: false, right: [9, 6] },
    { press: 'snapkv', pc: 0.5, vector: false, right: [7, 5] },
    { press: 'snapkv', pc: 0.75, vector: false, right: [5, 3] },
    { press: 'snapkv', pc: 0.25, vector: true, right: [9, 7] },
    { press: 'snapkv', pc: 0.5, vector: true, right: [8, 6] },
    { press: 'snapkv', pc: 0.75, vector: true, right: [7, 4] },
    { press: 'knorm', pc: 0.25, vector: false, right: [8, 5] },
    { press: 'knorm', pc: 0.5, vector: false, right: [5, 4] },
    { press: 'knorm', pc: 0.75, vector: false, right: [3, 1] },
    { press: 'knorm', pc: 0.25, vector: true, right: [8, 6] },
    { press: 'knorm', pc: 0.5, vector: true, right: [6, 4] },
    { press: 'knorm', pc: 0.75, vector: true, right: [4, 2] },
  ];
  const classes = ['Abbreviation', 'Animal', 'City', 'Country', 'Description', 'Human being'];
  const lines = [];
  const series = new Map();
  for (const r of rows) {
    const settings = { model, query_aware: false };
    if (r.press) Object.assign(settings, { press: r.press, compression: r.pc, vector: r.vector });
    if (r.vector) settings.pa = Math.min(r.pc / 2, (1 - r.pc) / 2); /* the default p_a: one line per press + VECTOR */
    for (let i = 0; i < nPre; i++)
      lines.push({ pred: i < r.right[0] ? 'Paragraph 3' : 'Paragraph 4', answers: ['Paragraph 3'], all_classes: null,
        dataset: 'passage_retrieval_en', _id: `pr${i}`, length: 40, ...settings });
    for (let i = 0; i < nTrec; i++)
      lines.push({ pred: i < r.right[1] ? 'City' : 'Animal', answers: ['City'], all_classes: classes,
        dataset: 'trec', _id: `tr${i}`, length: 40, ...settings });
    const label = r.press ? r.press + (r.vector ? ' + VECTOR' : '') : 'full cache';
    if (!series.has(label))
      series.set(label, { label, group: r.press || '', vector: r.vector, baseline: !r.press, points: [] });
    /* as the report averages: trec's column before passage_retrieval_en's */
    series.get(label).points.push([r.pc, (100 * r.right[1] / nTrec + 100 * r.right[0] / nPre) / 2]);
  }
  /* no two markers on one spot, none on the baseline's guide: each colour must show at its markers */
  const spots = [...series.values()].flatMap((s) => s.points.map((p) => p.join()));
  if (new Set(spots).size !== spots.length) throw new Error('synth-longbench: two points on one spot');
  fs.writeFileSync(resultsPath, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  fs.writeFileSync(expectPath, JSON.stringify({
    title: 'LongBench: average score against the compression ratio',
    subtitle_contains: `Average over 2 tasks (TREC, PRe) of 100 x the mean score; query-agnostic compression; model ${model}`,
    series: [...series.values()],
  }, null, 1) + '\n');
}

/* The results of a made-up RULER run: per setting, how many of 4 samples
 * of each (task, length) cell are answered right (niah_single_1 and fwe at
 * 1024 and 2048 tokens). The chart's points are the settings' averages: the
 * mean over the cells of 100 x each cell's mean score. */
function synthRuler(resultsPath, expectPath) {
  const model = 'toy-ruler.gguf', n = 4;
  const cells = [['niah_single_1', 1024], ['niah_single_1', 2048], ['fwe', 1024], ['fwe', 2048]];
  const rows = [
    { press: null, pc: 0, vector: false, right: [4, 4, 4, 3] },
    { press: 'snapkv', pc: 0.5, vector: false, right: [4, 3, 3, 2] },
    { press: 'snapkv', pc: 0.75, vector: false, right: [2, 1, 2, 1] },
    { press: 'snapkv', pc: 0.5, vector: true, right: [4, 4, 3, 3] },
    { press: 'snapkv', pc: 0.75, vector: true, right: [3, 2, 2, 2] },
    { press: 'adakv-snapkv', pc: 0.5, vector: false, right: [4, 4, 4, 1] },
    { press: 'adakv-snapkv', pc: 0.75, vector: false, right: [3, 1, 1, 0] },
  ];
  const lines = [];
  const series = new Map();
  for (const r of rows) {
    const settings = { model };
    if (r.press) Object.assign(settings, { press: r.press, compression: r.pc, vector: r.vector });
    cells.forEach(([task, length], c) => {
      for (let i = 0; i < n; i++)
        lines.push({ task, length, index: i, source: 'generated', seed: 42, answer: ['7751203'],
          pred: i < r.right[c] ? 'The number is 7751203.' : 'The number is 1234567.', ...settings });
    });
    const label = r.press ? r.press + (r.vector ? ' + VECTOR' : '') : 'full cache';
    if (!series.has(label))
      series.set(label, { label, group: r.press || '', vector: r.vector, baseline: !r.press, points: [] });
    series.get(label).points.push([r.pc, r.right.reduce((a, k) => a + 100 * k / n, 0) / cells.length]);
  }
  const spots = [...series.values()].flatMap((s) => s.points.map((p) => p.join()));
  if (new Set(spots).size !== spots.length) throw new Error('synth-ruler: two points on one spot');
  fs.writeFileSync(resultsPath, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  fs.writeFileSync(expectPath, JSON.stringify({
    title: 'RULER: average score against the compression ratio',
    subtitle_contains: 'tasks: niah_single_1, fwe',
    series: [...series.values()],
  }, null, 1) + '\n');
}

/* Everything the page shows that the checks need, in page pixels. */
function readChart() {
  const svg = document.querySelector('svg#score-plot');
  if (!svg) return null;
  const centre = (el) => { const r = el.getBoundingClientRect(); return { x: r.x + r.width / 2, y: r.y + r.height / 2 }; };
  const axis = (cls) => {
    const g = svg.querySelector('.axis.' + cls);
    return {
      min: Number(g.dataset.min), max: Number(g.dataset.max),
      ticks: [...g.querySelectorAll('.tick')].map((t) => ({
        value: Number(t.dataset.value), text: t.querySelector('text').textContent, at: centre(t.querySelector('line')),
      })),
    };
  };
  const r = svg.getBoundingClientRect();
  return {
    title: document.title,
    h1: document.querySelector('h1').textContent,
    lede: (document.querySelector('.lede') || {}).textContent || '',
    box: { x: r.x, y: r.y, width: r.width, height: r.height },
    x: axis('x-axis'), y: axis('y-axis'),
    legend: [...svg.querySelectorAll('.legend-item text')].map((t) => t.textContent),
    legendRight: Math.max(...[...svg.querySelectorAll('.legend-item text')].map((t) => t.getBoundingClientRect().right)),
    series: [...svg.querySelectorAll('g.series')].map((g) => {
      const line = g.querySelector('path.line');
      return {
        label: g.dataset.label, vector: g.dataset.vector === '1', baseline: g.dataset.baseline === '1', color: g.dataset.color,
        line: line && { stroke: getComputedStyle(line).stroke, dash: getComputedStyle(line).strokeDasharray, d: line.getAttribute('d') },
        guides: g.querySelectorAll('line.guide').length,
        points: [...g.querySelectorAll('g.point')].map((p) => ({
          x: Number(p.dataset.x), y: Number(p.dataset.y), title: p.querySelector('title').textContent,
          shape: p.firstElementChild.tagName, fill: getComputedStyle(p.firstElementChild).fill, at: centre(p.firstElementChild),
        })),
      };
    }),
  };
}

const hexRgb = (h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16));
const cssRgb = (h) => `rgb(${hexRgb(h).join(', ')})`;

/* A linear map from values to pixels through an axis's first and last ticks;
 * every tick in between must be on it. */
function axisMap(name, ax, coord) {
  const a = ax.ticks[0], b = ax.ticks[ax.ticks.length - 1];
  check(ax.ticks.length >= 3, `${name}: ${ax.ticks.length} ticks`);
  check(near(a.value, ax.min, 1e-9) && near(b.value, ax.max, 1e-9), `${name}: ticks ${a.value}..${b.value}, range ${ax.min}..${ax.max}`);
  const scale = (b.at[coord] - a.at[coord]) / (b.value - a.value);
  const px = (v) => a.at[coord] + (v - a.value) * scale;
  for (const t of ax.ticks) {
    check(near(t.at[coord], px(t.value), 0.6), `${name}: tick ${t.value} at ${t.at[coord]}, the axis puts it at ${px(t.value)}`);
    check(near(Number(t.text), t.value, 1e-9), `${name}: tick ${t.value} reads '${t.text}'`);
  }
  return px;
}

function pixelAt(png, x, y) {
  const i = (Math.round(y) * png.width + Math.round(x)) * 4;
  return [png.data[i], png.data[i + 1], png.data[i + 2]];
}

async function cmdCheck(opt) {
  const want = JSON.parse(fs.readFileSync(opt.expect, 'utf8'));
  const name = opt.name || path.basename(opt.html, '.html');
  fs.mkdirSync(opt.out, { recursive: true });
  const browser = await launch(opt);
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 800 }, deviceScaleFactor: 1 });
    const problems = [];
    page.on('console', (m) => { if (m.type() === 'error') problems.push('console error: ' + m.text()); });
    page.on('pageerror', (e) => problems.push('page error: ' + e.message));
    page.on('request', (r) => { if (!r.url().startsWith('file:')) problems.push('network request: ' + r.url()); });
    await page.goto(pathToFileURL(path.resolve(opt.html)).href, { waitUntil: 'load', timeout: 60000 });
    const got = await page.evaluate(readChart);
    if (!check(got, `${name}: no svg#score-plot in the page`)) return;
    check(got.title === want.title && got.h1 === want.title, `${name}: title '${got.title}', heading '${got.h1}', want '${want.title}'`);
    if (want.subtitle_contains) check(got.lede.includes(want.subtitle_contains), `${name}: subtitle '${got.lede}' lacks '${want.subtitle_contains}'`);

    /* the series: the expected ones, each with its points' exact values */
    check(got.series.length === want.series.length, `${name}: ${got.series.length} series, want ${want.series.length}`);
    check(JSON.stringify([...got.legend].sort()) === JSON.stringify(want.series.map((s) => s.label).sort()),
      `${name}: legend ${JSON.stringify(got.legend)}`);
    check(got.legendRight <= got.box.x + got.box.width, `${name}: the legend runs past the chart's right edge`);
    const px = axisMap(`${name} x axis`, got.x, 'x'), py = axisMap(`${name} y axis`, got.y, 'y');
    const colorOf = new Map();
    let n_points = 0;
    for (const ws of want.series) {
      const gs = got.series.find((s) => s.label === ws.label);
      if (!check(gs, `${name}: no series '${ws.label}'`)) continue;
      const where = `${name}, ${ws.label}`;
      check(gs.vector === ws.vector && gs.baseline === ws.baseline, `${where}: vector ${gs.vector} baseline ${gs.baseline}`);
      /* one colour per group: a press and its + VECTOR alike, other presses not */
      if (!ws.baseline) {
        if (colorOf.has(ws.group)) check(colorOf.get(ws.group) === gs.color, `${where}: colour ${gs.color}, its group has ${colorOf.get(ws.group)}`);
        else {
          check(![...colorOf.values()].includes(gs.color), `${where}: colour ${gs.color} is another press's`);
          colorOf.set(ws.group, gs.color);
        }
      }
      check(gs.points.length === ws.points.length, `${where}: ${gs.points.length} points, want ${ws.points.length}`);
      const sorted = [...ws.points].sort((a, b) => a[0] - b[0]);
      sorted.forEach(([x, y], j) => {
        const p = gs.points[j];
        if (!p) return;
        n_points++;
        const at = `${where} point (${x}, ${y})`;
        check(p.x === x && near(p.y, y, 1e-9 * Math.abs(y)), `${at}: the page has (${p.x}, ${p.y})`);
        check(p.title === `${ws.label}\ncompression ratio p_c: ${p.x}\naverage score (0-100): ${p.y}`, `${at}: tooltip ${JSON.stringify(p.title)}`);
        check(near(Number(p.title.split(': ').pop()), y, 1e-12 * Math.abs(y)), `${at}: tooltip value ${p.title.split(': ').pop()}`);
        check(p.x >= got.x.min && p.x <= got.x.max && p.y >= got.y.min && p.y <= got.y.max, `${at}: outside the axes`);
        /* the marker where the rendered axes put the values */
        check(near(p.at.x, px(x), 1) && near(p.at.y, py(y), 1), `${at}: marker at (${p.at.x}, ${p.at.y}), the axes say (${px(x)}, ${py(y)})`);
        check(p.shape === (ws.baseline ? 'path' : ws.vector ? 'rect' : 'circle'), `${at}: marker <${p.shape}>`);
        check(p.fill === cssRgb(gs.color), `${at}: marker fill ${p.fill}, series colour ${gs.color}`);
      });
      if (ws.points.length > 1 && check(gs.line, `${where}: no line`)) {
        check(gs.line.stroke === cssRgb(gs.color), `${where}: line ${gs.line.stroke}`);
        check((gs.line.dash !== 'none') === ws.vector, `${where}: line dash '${gs.line.dash}'`);
      }
      if (ws.baseline) check(gs.guides === ws.points.length, `${where}: ${gs.guides} guides`);
      if (ws.baseline) check(got.x.min <= 0, `${where}: the x axis starts at ${got.x.min}, after the baseline`);
    }

    /* the screenshot: each marker's centre in its series' colour, each colour drawn */
    await page.mouse.move(1, 1);
    const shot = path.join(opt.out, `${name}.png`), chartShot = path.join(opt.out, `${name}-chart.png`);
    await page.screenshot({ path: shot, fullPage: true });
    await page.locator('svg#score-plot').screenshot({ path: chartShot });
    const png = PNG.sync.read(fs.readFileSync(chartShot));
    for (const gs of got.series) {
      const c = hexRgb(gs.color);
      for (const p of gs.points) {
        const v = pixelAt(png, p.at.x - got.box.x, p.at.y - got.box.y);
        check(v.every((k, i) => Math.abs(k - c[i]) <= 8), `${name}, ${gs.label} (${p.x}, ${p.y}): screenshot pixel rgb(${v}), want ${gs.color}`);
      }
      let n = 0;
      for (let i = 0; i < png.data.length; i += 4)
        if ([0, 1, 2].every((k) => Math.abs(png.data[i + k] - c[k]) <= 8)) n++;
      check(n > 100, `${name}, ${gs.label}: only ${n} pixels of ${gs.color} in the chart`);
    }

    /* hovering a marker outlines it (the tooltip is the browser's own) */
    const first = got.series.find((s) => !s.baseline).points[0];
    await page.mouse.move(first.at.x, first.at.y);
    const stroke = await page.evaluate(([x, y]) => getComputedStyle(document.elementFromPoint(x, y)).stroke, [first.at.x, first.at.y]);
    check(stroke === 'rgb(31, 41, 51)', `${name}: hovered marker stroke ${stroke}`);
    await page.screenshot({ path: path.join(opt.out, `${name}-hover.png`) });
    check(problems.length === 0, `${name}: ` + problems.join('; '));
    console.log(`${name}: ${got.series.length} series, ${n_points} points checked; screenshots ${shot}, ${chartShot}`);
  } finally {
    await browser.close();
  }
}

const opt = args(process.argv.slice(2));
const cmd = opt._[0];
try {
  if (cmd === 'synth-longbench') { synthLongbench(opt._[1], opt._[2]); process.exit(0); }
  if (cmd === 'synth-ruler') { synthRuler(opt._[1], opt._[2]); process.exit(0); }
  else if (cmd === 'check') await cmdCheck(opt);
  else { console.error('usage: node score_plot_browser.mjs synth-longbench|synth-ruler|check ...'); process.exit(2); }
} catch (e) {
  check(false, `${cmd}: ${e.stack || e}`);
}
console.log(`score_plot_browser ${cmd}: ${tally.passes} passed, ${tally.fails} failed`);
process.exit(tally.fails ? 1 : 0);
