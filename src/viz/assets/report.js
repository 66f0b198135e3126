/* vkvector tier map: reads the data blocks `vkvector viz` wrote into the page
 * (see src/cli/viz_html.c) and draws the report. The tier map is a canvas
 * drawn pixel by pixel for the visible part only, so 32k positions x 256
 * strips stay fast; everything else is a small amount of DOM. */
window.addEventListener('error', (e) => {
  const box = document.getElementById('error');
  if (box) {
    box.hidden = false;
    box.textContent = 'The report could not be drawn: ' + e.message;
  }
  document.body.dataset.error = e.message;
});

(function () {
  'use strict';

  const TIERS = [
    { letter: 'R', name: 'retained', desc: 'K and V kept', color: '#2563eb', cls: 'r' },
    { letter: 'A', name: 'approximated', desc: 'K kept, V rebuilt from K', color: '#f59e0b', cls: 'a' },
    { letter: 'E', name: 'evicted', desc: 'dropped', color: '#cbd5e1', cls: 'e' },
  ];
  const BG = '#ffffff';

  const $ = (id) => document.getElementById(id);

  /* el('div', {class: 'x', 'data-a': 1}, child, 'text', ...): text is always textContent */
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === 'style') e.style.cssText = v;
        else e.setAttribute(k, v === true ? '' : String(v));
      }
    }
    for (const k of kids) {
      if (k === null || k === undefined || k === false) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }

  function fmtBytes(b) {
    if (b < 1024) return b.toFixed(0) + ' B';
    if (b < 1024 * 1024) return (b / 1024).toFixed(1) + ' KiB';
    if (b < 1024 * 1024 * 1024) return (b / (1024 * 1024)).toFixed(1) + ' MiB';
    return (b / (1024 * 1024 * 1024)).toFixed(2) + ' GiB';
  }
  const fmtInt = (n) => Number(n).toLocaleString('en-US');
  const fmtPct = (x) => (100 * x).toFixed(1) + '%';
  function fmtNum(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return '\u2014';
    if (!Number.isFinite(v)) return v > 0 ? '+\u221e' : '\u2212\u221e';
    if (v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e5)) return v.toExponential(digits - 1).replace('-', '\u2212');
    return Number(v.toPrecision(digits)).toString().replace('-', '\u2212');
  }
  function hexRgb(h) {
    const n = parseInt(h.slice(1), 16);
    return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
  }
  const LITTLE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  function rgba32(rgb) {
    return LITTLE ? ((255 << 24) | (rgb[2] << 16) | (rgb[1] << 8) | rgb[0]) >>> 0
                  : ((rgb[0] << 24) | (rgb[1] << 16) | (rgb[2] << 8) | 255) >>> 0;
  }
  const TIER32 = TIERS.map((t) => rgba32(hexRgb(t.color)));
  const BG32 = rgba32(hexRgb(BG));

  /* A token as text one can see: whitespace and control bytes made visible. */
  function showToken(s) {
    if (s === '') return '\u2205';
    let o = '';
    for (const ch of s) {
      const c = ch.codePointAt(0);
      if (ch === '\n') o += '\u23ce';
      else if (ch === '\t') o += '\u21e5';
      else if (ch === ' ') o += '\u2423';
      else if (c < 0x20 || c === 0x7f) o += '\\x' + c.toString(16).padStart(2, '0');
      else o += ch;
    }
    return o;
  }

  function b64bytes(id) {
    const node = $(id);
    if (!node) throw new Error('the report has no ' + id + ' data block');
    const bin = atob(node.textContent.trim());
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function halfToFloat(h) {
    const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, m = h & 1023;
    if (e === 0) return s * m * 5.960464477539063e-8;
    if (e === 31) return m ? NaN : s * Infinity;
    return s * (1 + m / 1024) * Math.pow(2, e - 15);
  }

  /* ---------------------------------------------------------------- data */

  const meta = JSON.parse($('vkv-meta').textContent);
  const tokens = JSON.parse($('vkv-tokens').textContent);
  const N = meta.n_context, L = meta.n_layer, H = meta.n_kv_head, S = L * H;
  if (tokens.length !== N) throw new Error('tokens: ' + tokens.length + ' entries, n_context is ' + N);

  const tiers = new Uint8Array(S * N);
  {
    const packed = b64bytes('vkv-tiers');
    if (packed.length !== Math.ceil(S * N / 4)) throw new Error('tier data: ' + packed.length + ' bytes, expected ' + Math.ceil(S * N / 4));
    const full = (S * N) >> 2;
    for (let i = 0; i < full; i++) {
      const b = packed[i], k = i << 2;
      tiers[k] = b & 3; tiers[k + 1] = (b >> 2) & 3; tiers[k + 2] = (b >> 4) & 3; tiers[k + 3] = (b >> 6) & 3;
    }
    for (let k = full << 2; k < S * N; k++) tiers[k] = (packed[k >> 2] >> ((k & 3) * 2)) & 3;
  }

  const enc = meta.values.encoding;
  let scoresRaw = null, residRaw = null;
  if (enc === 'f16' || enc === 'u8') {
    const width = enc === 'f16' ? 2 : 1;
    const sb = b64bytes('vkv-scores'), rb = b64bytes('vkv-residuals');
    if (sb.length !== S * N * width || rb.length !== S * N * width) throw new Error('value data has the wrong size');
    scoresRaw = enc === 'f16' ? new Uint16Array(sb.buffer, 0, S * N) : sb;
    residRaw = enc === 'f16' ? new Uint16Array(rb.buffer, 0, S * N) : rb;
    if (enc === 'f16' && !LITTLE) throw new Error('this viewer needs a little-endian machine');
  }
  function scoreAt(s, j) {
    if (!scoresRaw) return undefined;
    const q = scoresRaw[s * N + j], v = meta.values;
    if (enc === 'f16') return halfToFloat(q) * Math.pow(2, v.score_exp[s]);
    if (q === 255) return NaN;
    return v.score_lo[s] + (q / 254) * (v.score_hi[s] - v.score_lo[s]);
  }
  function residualAt(s, j) {
    if (!residRaw) return undefined;
    const q = residRaw[s * N + j], v = meta.values;
    if (enc === 'f16') return halfToFloat(q) * Math.pow(2, v.residual_exp[s]);
    if (q === 255) return NaN;
    if (q === 0) return 0;
    return Math.exp(v.residual_log_lo[s] + ((q - 1) / 253) * (v.residual_log_hi[s] - v.residual_log_lo[s]));
  }

  /* Totals from the per-head counts. */
  const tot = [0, 0, 0];
  const layerTok = meta.layers.map((ly) => {
    const c = [0, 0, 0];
    for (const h of ly.heads) { c[0] += h.n_retained; c[1] += h.n_approximated; c[2] += h.n_evicted; }
    for (let t = 0; t < 3; t++) tot[t] += c[t];
    return c;
  });
  const totPos = tot[0] + tot[1] + tot[2];
  const B = meta.bytes;
  const layerUnc = L ? B.uncompressed / L : 0;

  /* ----------------------------------------------------- header, settings */

  const modelName = meta.model.split('/').pop();
  document.title = 'vkvector tier map \u2014 ' + modelName + ' \u00b7 ' + meta.press + ' p_c ' + meta.compression;
  $('title-model').textContent = modelName;
  $('lede').textContent = meta.press + ' at p_c ' + meta.compression +
    (meta.vector ? ' with VECTOR (p_a ' + fmtNum(meta.approx_ratio, 3) + ')' : ' without VECTOR') +
    ', ' + (meta.query_aware ? 'query-aware' : 'query-agnostic') + ', over ' + fmtInt(N) + ' context tokens \u00d7 ' +
    L + ' layers \u00d7 ' + H + ' KV heads.';

  {
    const rows = [
      ['Model', meta.model, 'model'],
      ['Architecture', meta.arch, 'arch'],
      ['Scorer (press)', meta.press, 'press'],
      ['Compression ratio p_c', String(meta.compression), 'compression'],
      ['Approximation ratio p_a', fmtNum(meta.approx_ratio, 4) + (meta.vector ? '' : ' (VECTOR off: unused)'), 'approx_ratio'],
      ['VECTOR', meta.vector ? 'on (retain / approximate / evict)' : 'off (retain / evict)', 'vector'],
      ['Query-aware', meta.query_aware ? 'yes: the question was part of the compressed prefill' : 'no: only the context was compressed', 'query_aware'],
      ['KV cache type', meta.kv_type, 'kv_type'],
      ['Context tokens', fmtInt(N), 'n_context'],
      ['Layers \u00d7 KV heads \u00d7 head dim', L + ' \u00d7 ' + H + ' \u00d7 ' + meta.head_dim, 'shape'],
      ['Tier dump', meta.source || '\u2014', 'source'],
      ['Values in this report', enc === 'none' ? 'tiers only' : enc + ' (scores and residuals are rounded)', 'encoding'],
    ];
    const t = $('settings-table');
    for (const [k, v, key] of rows) t.append(el('tr', { 'data-key': key }, el('th', null, k), el('td', null, v)));
  }

  /* ---------------------------------------------------------------- cards */

  {
    const cards = $('cards');
    const card = (metric, value, label, big, sub, extra) =>
      el('div', Object.assign({ class: 'card' + (metric === 'compression' ? ' hero' : ''), 'data-metric': metric, 'data-value': value }, extra || {}),
        el('div', { class: 'k' }, ...label), el('div', { class: 'v' }, big), el('div', { class: 'sub' }, sub));
    const achieved = B.uncompressed ? 1 - B.kept_total / B.uncompressed : 0;
    const withW = B.uncompressed ? 1 - (B.kept_total + B.w_matrices) / B.uncompressed : 0;
    cards.append(
      card('compression', achieved.toFixed(6), ['Compression achieved'], fmtPct(achieved),
        'target p_c ' + fmtPct(meta.compression) + (B.w_matrices ? ' \u00b7 ' + fmtPct(withW) + ' counting W' : '')),
      card('uncompressed', B.uncompressed, ['Uncompressed context'], fmtBytes(B.uncompressed),
        fmtInt(B.uncompressed) + ' B of K and V'),
      card('kept_total', B.kept_total, ['Kept after compression'], fmtBytes(B.kept_total),
        fmtInt(B.kept_total) + ' B = ' + fmtPct(B.uncompressed ? B.kept_total / B.uncompressed : 0) + ' of it'),
      card('retained', B.retained, [el('span', { class: 'chip r' }), 'Retained K+V'], fmtBytes(B.retained),
        fmtInt(B.retained) + ' B'),
      card('approximated', B.approximated, [el('span', { class: 'chip a' }), 'Approximated K'], fmtBytes(B.approximated),
        fmtInt(B.approximated) + ' B (V dropped)'),
      card('w_matrices', B.w_matrices, ['OLS maps W'], fmtBytes(B.w_matrices),
        B.w_matrices ? fmtInt(B.w_matrices) + ' B, once per model' : 'none (VECTOR off)'));
    for (let t = 0; t < 3; t++) {
      cards.append(card('tokens_' + TIERS[t].name, tot[t], [el('span', { class: 'chip ' + TIERS[t].cls }), TIERS[t].name[0].toUpperCase() + TIERS[t].name.slice(1) + ' positions'],
        fmtInt(tot[t]), fmtPct(totPos ? tot[t] / totPos : 0) + ' of ' + fmtInt(totPos) + ' (all layers \u00d7 heads)'));
    }
  }

  /* -------------------------------------------------------- memory per layer */

  {
    const box = $('mem-rows');
    box.append(el('div', { class: 'mem-row head' }, el('span', null, 'layer'),
      el('span', null, el('span', { class: 'chip r' }), ' retained K+V   ', el('span', { class: 'chip a' }), ' approximated K   (hatched: freed)'),
      el('span', null, 'bytes kept of the uncompressed layer \u00b7 positions R / A / E')));
    const row = (lbl, attrs, r, a, unc, counts, cls) => {
      const kept = r + a;
      return el('div', Object.assign({ class: 'mem-row' + (cls ? ' ' + cls : '') }, attrs),
        el('span', { class: 'lbl' }, lbl),
        el('div', { class: 'membar', title: fmtInt(r) + ' B retained + ' + fmtInt(a) + ' B approximated of ' + fmtInt(unc) + ' B' },
          el('div', { class: 'seg r', style: 'width:' + (unc ? 100 * r / unc : 0) + '%' }),
          el('div', { class: 'seg a', style: 'width:' + (unc ? 100 * a / unc : 0) + '%' })),
        el('span', { class: 'mem-txt' },
          fmtBytes(r) + ' + ' + fmtBytes(a) + ' = ', el('span', { class: 'kept' }, fmtBytes(kept)),
          ' of ' + fmtBytes(unc) + ' ', el('span', { class: 'pct' }, '(' + fmtPct(unc ? kept / unc : 0) + ')'),
          ' \u00b7 ' + fmtInt(counts[0]) + ' / ' + fmtInt(counts[1]) + ' / ' + fmtInt(counts[2])));
    };
    meta.layers.forEach((ly, l) => {
      box.append(row('L' + l, {
        'data-layer': l, 'data-retained': ly.bytes_retained, 'data-approximated': ly.bytes_approximated,
        'data-uncompressed': layerUnc, 'data-n-retained': layerTok[l][0], 'data-n-approximated': layerTok[l][1], 'data-n-evicted': layerTok[l][2],
      }, ly.bytes_retained, ly.bytes_approximated, layerUnc, layerTok[l]));
    });
    box.append(row('all', { 'data-layer': 'all', 'data-retained': B.retained, 'data-approximated': B.approximated, 'data-uncompressed': B.uncompressed },
      B.retained, B.approximated, B.uncompressed, tot, 'total'));
  }

  /* -------------------------------------------------------- reconstructability */

  function mix(a, b, t) {
    const x = hexRgb(a), y = hexRgb(b);
    return [0, 1, 2].map((i) => Math.round(x[i] + (y[i] - x[i]) * t));
  }
  const css = (c) => 'rgb(' + c.join(',') + ')';
  const dark = (c) => 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2] < 140;
  function r2Color(v) {
    return v >= 0 ? mix('#f2f8f1', '#17693a', Math.min(1, v)) : mix('#fdecea', '#b3261e', Math.min(1, -v));
  }
  const errColor = (v) => mix('#fff7ed', '#b8430b', Math.min(1, Math.sqrt(Math.max(0, v) / 0.5)));

  {
    const anyR2 = meta.layers.some((ly) => ly.heads.some((h) => h.r2 !== null));
    $('recon-note').textContent = meta.vector
      ? 'R\u00b2 = 1 \u2212 \u03a3\u2016V \u2212 V\u0302\u2016\u00b2 / \u03a3\u2016V \u2212 V\u0304\u2016\u00b2 and the mean relative error \u2016V \u2212 V\u0302\u2016\u00b2/\u2016V\u2016\u00b2 over the tokens each head approximated (green: well rebuilt; red: worse than the mean value). E is the distortion of the layer: the normalised importance evicted plus the approximated importance weighted by its relative error; lower is better.'
      : 'VECTOR was off for this run: nothing is approximated, so there is no R\u00b2 or reconstruction error to show. E is the normalised importance evicted per layer.';
    const t = $('recon-table');
    const hr1 = el('tr', null, el('th', null, ''));
    if (anyR2) {
      hr1.append(el('th', { class: 'grp', colspan: H + 1 }, 'R\u00b2 of the approximated values'), el('th', { class: 'sepcol' }),
        el('th', { class: 'grp', colspan: H }, 'mean relative error'), el('th', { class: 'sepcol' }));
    }
    hr1.append(el('th', { class: 'grp' }, 'distortion E'));
    const hr2 = el('tr', null, el('th', null, 'layer'));
    if (anyR2) {
      for (let h = 0; h < H; h++) hr2.append(el('th', null, 'h' + h));
      hr2.append(el('th', null, 'mean'), el('th', { class: 'sepcol' }));
      for (let h = 0; h < H; h++) hr2.append(el('th', null, 'h' + h));
      hr2.append(el('th', { class: 'sepcol' }));
    }
    hr2.append(el('th', null, ''));
    t.append(el('thead', null, hr1, hr2));
    const tb = el('tbody');
    let maxE = 0;
    for (const ly of meta.layers) if (ly.distortion !== null) maxE = Math.max(maxE, ly.distortion);
    const cell = (v, color, kind, l, h) => {
      const attrs = { 'data-kind': kind, 'data-layer': l, 'data-head': h, 'data-value': v === null ? 'null' : v };
      if (v === null) return el('td', Object.assign({ class: 'na', title: 'nothing approximated' }, attrs), 'n/a');
      const c = color(v);
      attrs.style = 'background:' + css(c) + ';color:' + (dark(c) ? '#fff' : '#1f2933');
      attrs.title = kind + ' layer ' + l + ' head ' + h + ': ' + v;
      return el('td', attrs, kind === 'rel_err' ? fmtNum(v, 3) : v.toFixed(3));
    };
    meta.layers.forEach((ly, l) => {
      const tr = el('tr', { 'data-layer': l }, el('td', { class: 'lbl' }, 'L' + l));
      if (anyR2) {
        let sum = 0, n = 0;
        ly.heads.forEach((h, hi) => { tr.append(cell(h.r2, r2Color, 'r2', l, hi)); if (h.r2 !== null) { sum += h.r2; n++; } });
        tr.append(cell(n ? sum / n : null, r2Color, 'r2_mean', l, 'mean'), el('td', { class: 'sepcol' }));
        ly.heads.forEach((h, hi) => tr.append(cell(h.rel_err, errColor, 'rel_err', l, hi)));
        tr.append(el('td', { class: 'sepcol' }));
      }
      const E = ly.distortion;
      tr.append(el('td', { class: 'ebar', 'data-kind': 'distortion', 'data-layer': l, 'data-value': E === null ? 'null' : E },
        el('div', { class: 'ebar-in' }, el('i', { style: 'width:' + (E !== null && maxE > 0 ? Math.max(1, 110 * E / maxE) : 0) + 'px' }),
          el('span', null, E === null ? '\u2014' : E.toFixed(4)))));
      tb.append(tr);
    });
    t.append(tb);
    $('prop1').textContent = meta.vector
      ? 'Proposition 1: raising p_a lowers E in a layer exactly when R\u00b2 of the approximated tier exceeds w\u0304/(w* + w\u0304), w\u0304 being the mean importance of the tokens it saves from eviction and w* that of the tokens it moves out of the retained tier. Layers with a low R\u00b2 gain least from VECTOR.'
      : '';
  }

  /* ----------------------------------------------------------------- legend */

  {
    const lg = $('legend');
    for (let t = 0; t < 3; t++) {
      lg.append(el('span', { 'data-tier': TIERS[t].letter }, el('span', { class: 'chip ' + TIERS[t].cls }), ' ' + TIERS[t].name + ' ',
        el('span', { style: 'color:var(--muted)' }, '(' + TIERS[t].desc + ') ' + fmtPct(totPos ? tot[t] / totPos : 0))));
    }
  }

  /* --------------------------------------------------------------- tier map */

  const scroll = $('map-scroll'), spacer = $('map-spacer'), canvas = $('map-canvas');
  const ctx = canvas.getContext('2d');
  const geo = { gutter: 58, ruler: 30, rowH: 10, rowGap: 1, layerGap: 7 };
  let ppt = 1;               /* CSS pixels per token */
  let hover = null;          /* {s, j} under the pointer */
  let img = null, img32 = null;
  let frame = 0;
  let fitted = true;         /* zoomed to fit: stays so when the window resizes */

  const rowPitch = () => geo.rowH + geo.rowGap;
  const blockH = () => H * rowPitch() + geo.layerGap;
  const contentH = () => L * blockH();
  const rowTop = (s) => Math.floor(s / H) * blockH() + (s % H) * rowPitch();
  function rowAt(y) {                  /* y: content px below the ruler */
    if (y < 0) return -1;
    const l = Math.floor(y / blockH());
    if (l >= L) return -1;
    const w = y - l * blockH(), h = Math.floor(w / rowPitch());
    if (h >= H || w - h * rowPitch() >= geo.rowH) return -1;
    return l * H + h;
  }
  const fitPpt = () => Math.max(1e-4, (scroll.clientWidth - geo.gutter) / Math.max(1, N));
  const minPpt = () => Math.min(fitPpt(), 1);
  const MAX_PPT = 64;

  function layout() {
    const hbar = geo.gutter + N * ppt > scroll.clientWidth + 0.5 ? 16 : 2;
    const want = Math.min(geo.ruler + contentH() + hbar, Math.max(320, Math.round(window.innerHeight * 0.72)));
    scroll.style.height = want + 'px';
    spacer.style.width = Math.ceil(geo.gutter + N * ppt) + 'px';
    spacer.style.height = Math.ceil(geo.ruler + contentH()) + 'px';
  }

  function setZoom(p, anchorX) {       /* anchorX: CSS px from the scroll box's left */
    p = Math.max(minPpt(), Math.min(MAX_PPT, p));
    fitted = Math.abs(p - fitPpt()) < 1e-9;
    const ax = anchorX === undefined ? (scroll.clientWidth + geo.gutter) / 2 : Math.max(geo.gutter, anchorX);
    const tok = (scroll.scrollLeft + ax - geo.gutter) / ppt;
    ppt = p;
    layout();
    scroll.scrollLeft = tok * ppt + geo.gutter - ax;
    schedule();
  }
  const fit = () => setZoom(fitPpt(), geo.gutter);

  function schedule() {
    if (!frame) frame = requestAnimationFrame(() => { frame = 0; draw(); });
  }

  function niceStep(minTokens) {
    const p = Math.pow(10, Math.floor(Math.log10(Math.max(1, minTokens))));
    for (const m of [1, 2, 5, 10]) if (m * p >= minTokens) return m * p;
    return 10 * p;
  }

  function draw() {
    const dpr = window.devicePixelRatio || 1;
    const cw = scroll.clientWidth, ch = scroll.clientHeight;
    const W = Math.max(1, Math.round(cw * dpr)), Hd = Math.max(1, Math.round(ch * dpr));
    if (canvas.width !== W || canvas.height !== Hd) {
      canvas.width = W; canvas.height = Hd;
      canvas.style.width = cw + 'px'; canvas.style.height = ch + 'px';
    }
    if (!img || img.width !== W || img.height !== Hd) {
      img = ctx.createImageData(W, Hd);
      img32 = new Uint32Array(img.data.buffer);
    }
    img32.fill(BG32);
    const sl = scroll.scrollLeft, st = scroll.scrollTop;
    const gx = Math.round(geo.gutter * dpr), ry = Math.round(geo.ruler * dpr);
    const ncol = Math.max(0, W - gx);
    const c0 = new Int32Array(ncol), c1 = new Int32Array(ncol), sep = new Uint8Array(ncol);
    const gapOk = ppt * dpr >= 5;
    /* At a device pixel or more per position each pixel column shows the
       position under its centre; below that, every position in it (stacked). */
    const sample = ppt * dpr >= 1;
    for (let X = 0; X < ncol; X++) {
      const t0 = ((gx + X) / dpr + sl - geo.gutter) / ppt, t1 = ((gx + X + 1) / dpr + sl - geo.gutter) / ppt;
      let j0, j1;
      if (sample) {
        j0 = Math.max(0, Math.floor((t0 + t1) / 2));
        j1 = j0 + 1;
      } else {
        j0 = Math.max(0, Math.floor(t0));
        j1 = Math.max(j0 + 1, Math.min(N, Math.ceil(t1)));
      }
      c0[X] = j0; c1[X] = Math.min(N, j1);
      sep[X] = gapOk && t1 >= j0 + 1 ? 1 : 0;
    }
    for (let s = 0; s < S; s++) {
      const top = geo.ruler + rowTop(s) - st;
      if (top + geo.rowH < geo.ruler) continue;
      if (top > ch) break;
      const y0 = Math.round(top * dpr), y1 = Math.round((top + geo.rowH) * dpr), rh = y1 - y0;
      const ya = Math.max(y0, ry), yb = Math.min(y1, Hd);
      if (yb <= ya) continue;
      const base = s * N;
      for (let X = 0; X < ncol; X++) {
        const j0 = c0[X], j1 = c1[X];
        if (j0 >= N) break;
        if (sep[X]) continue;
        const px = gx + X;
        if (j1 - j0 === 1) {
          const col = TIER32[tiers[base + j0]];
          for (let y = ya; y < yb; y++) img32[y * W + px] = col;
          continue;
        }
        let nr = 0, na = 0, ne = 0;
        for (let j = base + j0, e = base + j1; j < e; j++) {
          const t = tiers[j];
          if (t === 0) nr++; else if (t === 1) na++; else ne++;
        }
        const n = nr + na + ne;
        /* heights in device rows; a tier present gets at least one */
        let hr = nr ? Math.max(1, Math.round(rh * nr / n)) : 0;
        let ha = na ? Math.max(1, Math.round(rh * na / n)) : 0;
        if (ne && hr + ha > rh - 1) { if (hr >= ha) hr = Math.max(nr ? 1 : 0, rh - 1 - ha); else ha = Math.max(na ? 1 : 0, rh - 1 - hr); }
        if (!ne) ha = rh - hr;
        for (let y = ya; y < yb; y++) {
          const k = y - y0;
          img32[y * W + px] = k < hr ? TIER32[0] : k < hr + ha ? TIER32[1] : TIER32[2];
        }
      }
    }
    ctx.putImageData(img, 0, 0);
    ctx.save();
    ctx.scale(dpr, dpr);

    /* hovered position: a band across all rows and an outline on the cell */
    if (hover) {
      const x = geo.gutter + hover.j * ppt - sl, w = Math.max(ppt, 1 / dpr);
      ctx.save();
      ctx.beginPath(); ctx.rect(geo.gutter, geo.ruler, cw - geo.gutter, ch - geo.ruler); ctx.clip();
      ctx.fillStyle = 'rgba(17, 24, 39, 0.10)';
      ctx.fillRect(x, geo.ruler, w, ch - geo.ruler);
      const y = geo.ruler + rowTop(hover.s) - st;
      ctx.strokeStyle = '#111827'; ctx.lineWidth = 1.5;
      ctx.strokeRect(x - 1, y - 1, w + 2, geo.rowH + 2);
      ctx.restore();
    }

    /* gutter: layer and head labels */
    ctx.fillStyle = BG; ctx.fillRect(0, 0, geo.gutter, ch);
    ctx.textBaseline = 'middle';
    for (let l = 0; l < L; l++) {
      const top = geo.ruler + l * blockH() - st;
      if (top + blockH() < geo.ruler) continue;
      if (top > ch) break;
      ctx.fillStyle = '#1f2933'; ctx.font = '600 11px system-ui, sans-serif'; ctx.textAlign = 'left';
      const ly = Math.max(geo.ruler + 7, Math.min(top + 6, top + blockH() - geo.layerGap - 6));
      ctx.fillText('L' + l, 4, ly);
      if (geo.rowH >= 8) {
        ctx.fillStyle = '#5f6b7a'; ctx.font = '10px system-ui, sans-serif'; ctx.textAlign = 'right';
        for (let h = 0; h < H; h++) {
          const y = top + h * rowPitch() + geo.rowH / 2;
          if (y < geo.ruler + 3 || y > ch) continue;
          ctx.fillText('h' + h, geo.gutter - 5, y + 0.5);
        }
      }
      ctx.fillStyle = '#e3e7ee';
      ctx.fillRect(0, top + blockH() - geo.layerGap / 2 - 0.5, geo.gutter - 2, 1);
    }

    /* ruler: positions, and the tokens themselves when there is room */
    ctx.fillStyle = BG; ctx.fillRect(0, 0, cw, geo.ruler);
    ctx.fillStyle = '#e3e7ee'; ctx.fillRect(0, geo.ruler - 1, cw, 1);
    const first = Math.max(0, Math.floor((sl) / ppt)), last = Math.min(N - 1, Math.ceil((sl + cw - geo.gutter) / ppt));
    const step = niceStep(70 / ppt);
    ctx.fillStyle = '#5f6b7a'; ctx.font = '10px system-ui, sans-serif'; ctx.textAlign = 'left'; ctx.textBaseline = 'top';
    ctx.save();
    ctx.beginPath(); ctx.rect(geo.gutter, 0, cw - geo.gutter, geo.ruler); ctx.clip();
    for (let k = Math.floor(first / step) * step; k <= last; k += step) {
      const x = geo.gutter + k * ppt - sl;
      ctx.fillRect(x, 2, 1, 8);
      ctx.fillText(String(k), x + 3, 1);
    }
    if (ppt >= 9) {
      ctx.font = Math.min(12, Math.floor(ppt * 0.9)) + 'px ui-monospace, Menlo, Consolas, monospace';
      ctx.textAlign = 'center'; ctx.textBaseline = 'middle';
      for (let j = first; j <= last; j++) {
        const x = geo.gutter + j * ppt - sl;
        const byte = /^<0x([0-9A-Fa-f]{2})>$/.exec(tokens[j]);   /* a byte token: its hex digits, muted */
        let t = byte ? byte[1] : showToken(tokens[j]);
        if (t.length > 1 && ctx.measureText(t).width > ppt - 1) {
          while (t.length > 1 && ctx.measureText(t + '\u2026').width > ppt - 1) t = t.slice(0, -1);
          t += '\u2026';
        }
        ctx.fillStyle = hover && hover.j === j ? '#b45309' : byte ? '#98a2b0' : '#1f2933';
        ctx.fillText(t, x + ppt / 2, geo.ruler - 9);
      }
    }
    ctx.restore();
    ctx.fillStyle = '#5f6b7a'; ctx.font = '10px system-ui, sans-serif'; ctx.textAlign = 'left'; ctx.textBaseline = 'top';
    ctx.fillText('position', 4, 2);
    ctx.restore();

    const span = Math.max(0, last - first + 1);
    $('zoom-info').textContent = (ppt >= 1 ? ppt.toFixed(ppt < 10 ? 1 : 0) + ' px/token' : (1 / ppt).toFixed(1) + ' tokens/px') +
      ' \u00b7 positions ' + first + '\u2013' + (first + span - 1) + ' of ' + N;
    document.body.dataset.ready = '1';
  }

  /* --------------------------------------------------------------- tooltip */

  const tip = $('tip');
  function cellAt(clientX, clientY) {
    const r = scroll.getBoundingClientRect();
    const x = clientX - r.left, y = clientY - r.top;
    if (x < geo.gutter || y < geo.ruler || x >= scroll.clientWidth || y >= scroll.clientHeight) return null;
    const j = Math.floor((x - geo.gutter + scroll.scrollLeft) / ppt);
    const s = rowAt(y - geo.ruler + scroll.scrollTop);
    if (s < 0 || j < 0 || j >= N) return null;
    /* the positions sharing this screen pixel */
    const dpr = window.devicePixelRatio || 1, px = Math.floor(x * dpr) / dpr;
    if (ppt * dpr >= 1) return { s, j, j0: j, j1: j + 1 };
    const j0 = Math.max(0, Math.floor((px - geo.gutter + scroll.scrollLeft) / ppt));
    const j1 = Math.min(N, Math.max(j0 + 1, Math.ceil((px + 1 / dpr - geo.gutter + scroll.scrollLeft) / ppt)));
    return { s, j, j0, j1 };
  }

  function showTip(c, clientX, clientY) {
    const l = Math.floor(c.s / H), h = c.s % H, j = c.j, t = tiers[c.s * N + j];
    const score = scoreAt(c.s, j), res = residualAt(c.s, j);
    const before = [], after = [];
    for (let k = Math.max(0, j - 10); k < j; k++) before.push(showToken(tokens[k]));
    for (let k = j + 1; k < Math.min(N, j + 11); k++) after.push(showToken(tokens[k]));
    let scoreTxt = '\u2014 (not in this report)';
    if (score !== undefined) scoreTxt = Number.isNaN(score) ? '\u00b1\u221e (forced by the scorer)' : fmtNum(score, 4);
    let resTxt = '\u2014 (not in this report)';
    if (res !== undefined) resTxt = Number.isNaN(res) ? '\u2014 (outside the pool)' : fmtNum(res, 4);
    tip.replaceChildren(
      el('div', { class: 'tip-head' }, 'layer ', el('b', { 'data-field': 'layer' }, l), ' \u00b7 KV head ', el('b', { 'data-field': 'head' }, h),
        ' \u00b7 position ', el('b', { 'data-field': 'pos' }, j)),
      el('div', { class: 'tok' }, el('span', { class: 'ctx' }, before.join('')),
        el('mark', { 'data-field': 'token', 'data-raw': tokens[j] }, showToken(tokens[j])), el('span', { class: 'ctx' }, after.join(''))),
      el('table', null,
        el('tr', null, el('td', null, 'tier'), el('td', { 'data-field': 'tier', 'data-value': TIERS[t].letter },
          el('span', { class: 'chip ' + TIERS[t].cls }), ' ' + TIERS[t].name, el('span', { style: 'color:#aab4c3' }, ' (' + TIERS[t].desc + ')'))),
        el('tr', null, el('td', null, 'importance score'), el('td', { 'data-field': 'score', 'data-value': score === undefined ? '' : String(score) }, scoreTxt)),
        el('tr', null, el('td', null, 'residual \u03b5 = \u2016V \u2212 W\u00b7R\u207b\u00b9K\u2016\u00b2'),
          el('td', { 'data-field': 'residual', 'data-value': res === undefined ? '' : String(res) }, resTxt))));
    if (c.j1 - c.j0 > 1) {
      const n = [0, 0, 0];
      for (let k = c.j0; k < c.j1; k++) n[tiers[c.s * N + k]]++;
      tip.append(el('div', { class: 'many' }, 'this pixel: positions ' + c.j0 + '\u2013' + (c.j1 - 1) + ' \u00b7 R ' + n[0] + ' \u00b7 A ' + n[1] + ' \u00b7 E ' + n[2] + ' (zoom in for each)'));
    }
    tip.hidden = false;
    const tw = tip.offsetWidth, th = tip.offsetHeight;
    let x = clientX + 16, y = clientY + 18;
    if (x + tw > window.innerWidth - 6) x = Math.max(6, clientX - tw - 12);
    if (y + th > window.innerHeight - 6) y = Math.max(6, clientY - th - 12);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }
  function hideTip() {
    tip.hidden = true;
    if (hover) { hover = null; schedule(); }
  }

  let drag = null;
  scroll.addEventListener('mousedown', (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, sl: scroll.scrollLeft, st: scroll.scrollTop, moved: false };
  });
  window.addEventListener('mouseup', () => { drag = null; scroll.classList.remove('dragging'); });
  scroll.addEventListener('mousemove', (e) => {
    if (drag && (e.buttons & 1)) {
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (drag.moved || Math.abs(dx) + Math.abs(dy) > 3) {
        drag.moved = true;
        scroll.classList.add('dragging');
        scroll.scrollLeft = drag.sl - dx;
        scroll.scrollTop = drag.st - dy;
        tip.hidden = true;
        return;
      }
    }
    pointer = { x: e.clientX, y: e.clientY };
    hoverPointer();
  });
  let pointer = null;        /* the mouse's last position over the map */
  function hoverPointer() {
    const c = pointer && cellAt(pointer.x, pointer.y);
    if (!c) { hideTip(); return; }
    if (!hover || hover.s !== c.s || hover.j !== c.j) { hover = { s: c.s, j: c.j }; schedule(); }
    showTip(c, pointer.x, pointer.y);
  }
  scroll.addEventListener('mouseleave', () => { pointer = null; hideTip(); });
  /* scrolling moves the map under a still pointer: follow it */
  scroll.addEventListener('scroll', () => {
    if (pointer && !(drag && drag.moved)) hoverPointer();
    else tip.hidden = true;
    schedule();
  }, { passive: true });
  scroll.addEventListener('wheel', (e) => {
    if (!(e.ctrlKey || e.metaKey)) return;
    e.preventDefault();
    const r = scroll.getBoundingClientRect();
    setZoom(ppt * Math.exp(-e.deltaY * 0.0025), e.clientX - r.left);
  }, { passive: false });
  scroll.addEventListener('keydown', (e) => {
    if (e.key === '+' || e.key === '=') setZoom(ppt * 1.5);
    else if (e.key === '-' || e.key === '_') setZoom(ppt / 1.5);
    else if (e.key === '0') fit();
    else return;
    e.preventDefault();
  });
  $('zoom-in').addEventListener('click', () => setZoom(ppt * 1.5));
  $('zoom-out').addEventListener('click', () => setZoom(ppt / 1.5));
  $('zoom-fit').addEventListener('click', fit);
  $('row-height').addEventListener('change', (e) => {
    const frac = scroll.scrollTop / Math.max(1, contentH());
    geo.rowH = Number(e.target.value);
    geo.rowGap = geo.rowH >= 8 ? 1 : 0;
    geo.layerGap = geo.rowH >= 8 ? 7 : 4;
    layout();
    scroll.scrollTop = frac * contentH();
    schedule();
  });
  window.addEventListener('resize', () => {
    if (fitted || ppt < fitPpt()) ppt = fitPpt();
    layout();
    schedule();
  });

  /* For tests and the console: where a cell is, what it holds. */
  window.vkvViz = {
    meta, tokens,
    tierAt: (l, h, j) => TIERS[tiers[(l * H + h) * N + j]].letter,
    scoreAt: (l, h, j) => scoreAt(l * H + h, j),
    residualAt: (l, h, j) => residualAt(l * H + h, j),
    zoom: (p) => { setZoom(p); draw(); return ppt; },
    fit: () => { fit(); draw(); return ppt; },
    /* client coordinates of the centre of cell (l, h, j), scrolled into view */
    cellCenter(l, h, j) {
      const s = l * H + h;
      const wantX = geo.gutter + j * ppt + ppt / 2, wantY = geo.ruler + rowTop(s) + geo.rowH / 2;
      if (wantX - scroll.scrollLeft < geo.gutter + 4 || wantX - scroll.scrollLeft > scroll.clientWidth - 4)
        scroll.scrollLeft = wantX - (scroll.clientWidth + geo.gutter) / 2;
      if (wantY - scroll.scrollTop < geo.ruler + 4 || wantY - scroll.scrollTop > scroll.clientHeight - 4)
        scroll.scrollTop = wantY - (scroll.clientHeight + geo.ruler) / 2;
      draw();
      const r = scroll.getBoundingClientRect();
      return { x: r.left + wantX - scroll.scrollLeft, y: r.top + wantY - scroll.scrollTop };
    },
  };

  ppt = fitPpt();
  layout();
  draw();
})();
