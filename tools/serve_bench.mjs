#!/usr/bin/env node
// `vkvector serve`'s benchmark (docs/SERVE.md, "Measuring"): it starts the
// server itself, on loopback, and prints
//
//   1. aggregate generated tokens/s at each --concurrency (default 1, 4,
//      16, 64 and 256; the server's --max-seqs the largest) (tools/serve_load.mjs:
//      streamed completions, temperature 0), each row as it lands, and the
//      ratio of each concurrency to the one before it, for each answer length of --gen-tokens; with
//      --rounds R, R rounds of all of it on the same server, one after the
//      other (the machine's speed drifts between minutes: each round's ratio
//      compares figures taken a minute apart), and the ratios' median;
//   2. the sequences admitted at once under one fixed --kv-budget, for no
//      compression, KeyDiff at 0.75 on the prompt (kvpress's protocol: the
//      answer's tokens are kept), KeyDiff holding 0.25 of the whole context
//      (a --max-kv-tokens budget through prefill and generation), each with
//      VECTOR and with q8_0 tiers: --admission-seqs long prompts (default 32)
//      are sent together to a server whose --max-seqs is as many, so that
//      the pool, not the step's width, is the limit, and the peak of
//      vkvector_sequences_active_peak is read from /metrics;
//   3. questions about one cached document: a document of about --doc-tokens
//      tokens (the first whole lines of --text, counted by `vkvector
//      tokenize`), then 4 questions about it one at a time (a chat: the
//      document as a user message, the assistant's "I have read it.", a
//      speaker's name as the last user message; streamed, 8 tokens,
//      temperature 0), on a server with the prefix cache and on one with
//      --no-prefix-cache: each question's prompt tokens,
//      usage.prompt_tokens_details.cached_tokens, vkvector.context_cache's
//      status and time to first token, and the median of the later
//      questions' TTFT over the first's; the same with KeyDiff 0.75 + VECTOR
//      on each request (the document compressed once: the compressed-context
//      cache);
//   4. a multi-turn chat: 8 turns of /v1/chat/completions, each the whole
//      conversation so far (the previous answers and a new short line of the
//      play), 24 tokens an answer, streamed, with and without the prefix
//      cache: each turn's prompt tokens, cached tokens and TTFT.
//   Sections 3 and 4 start their servers once a round (--rounds), the prefix
//   cache on then off, and send each a short warm-up request first (a fresh
//   server's first forward builds its GPU pipelines).
//
//   With --llama-server BIN (llama.cpp's server: ../shared/peer/build-llamacpp.sh
//   builds one), sections 1 and 3 run it too, on the same GGUF, side by side:
//   after each of vkvector's concurrency rows, the same load against a
//   llama-server started with -np equal to the concurrency (every layer on the
//   device, its prompt cache on, as it is by default), and the document's
//   questions against one with -np 1; the ratio vkvector / llama-server is
//   printed for each concurrency and for the later questions' TTFT.
//   GGML_VK_VISIBLE_DEVICES picks llama.cpp's device (default 0).
//
//   node tools/serve_bench.mjs [--vkvector BIN] [-m MODEL] [--kv-budget MIB] [--prompt-tokens 700]
//        [--max-tokens 128] [--admission-seqs 32] [--gen-tokens 32,128] [--concurrency 1,4,16,64,256] [--rounds 1] [--doc-tokens 900] [--text FILE]
//        [--llama-server BIN] [--skip-throughput] [--skip-admission] [--skip-compressed-admission] [--skip-document] [--skip-chat]
//
// Section 2 ends with one document shared by every request (the prefix
// cache's pages mapped by each, or copied with --no-paged-kv);
// --skip-compressed-admission leaves its compressed rows out.
//
// --text is the play the document and the chat's lines come from (default
// ../shared/data/tinyshakespeare.txt beside the repository). Each section
// prints its rows as they come; the --skip flags leave sections out, so one
// section runs alone with the other three skipped.
//
// Figures only: nothing here is a pass/fail test, and figures from another
// day or another machine are not comparable (README, "Measuring speed").
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { readFileSync } from 'node:fs';

// llama-server's context per slot: room for every prompt and answer here (the
// default model's whole context).
const LLAMA_SLOT_CTX = 1024;
const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..');
const execFileP = promisify(execFile);

function parseArgs(argv) {
  const o = { vkv: path.join(repo, 'build', 'vkvector'), model: path.join(repo, 'models', 'vkvector-shakespeare.gguf'),
              kvBudgetMiB: 0, promptTokens: 700, maxTokens: 128, admissionSeqs: 32, genTokens: [32, 128], rounds: 1, concurrency: [1, 4, 16, 64, 256], throughput: true, admission: true, compressedAdmission: true,
              docTokens: 900, text: path.resolve(repo, '..', 'shared', 'data', 'tinyshakespeare.txt'), document: true, chat: true,
              llamaServer: null };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i], v = () => argv[++i];
    if (a === '--vkvector') o.vkv = v();
    else if (a === '-m') o.model = v();
    else if (a === '--kv-budget') o.kvBudgetMiB = Number(v());
    else if (a === '--prompt-tokens') o.promptTokens = Number(v());
    else if (a === '--max-tokens') o.maxTokens = Number(v());
    else if (a === '--admission-seqs') o.admissionSeqs = Number(v());
    else if (a === '--gen-tokens') o.genTokens = v().split(',').map(Number);
    else if (a === '--rounds') o.rounds = Number(v());
    else if (a === '--concurrency') o.concurrency = v().split(',').map(Number);
    else if (a === '--skip-throughput') o.throughput = false;
    else if (a === '--skip-admission') o.admission = false;
    else if (a === '--skip-compressed-admission') o.compressedAdmission = false;
    else if (a === '--doc-tokens') o.docTokens = Number(v());
    else if (a === '--text') o.text = v();
    else if (a === '--skip-document') o.document = false;
    else if (a === '--skip-chat') o.chat = false;
    else if (a === '--llama-server') o.llamaServer = v();
    else { console.error(`serve_bench: unknown option '${a}'`); process.exit(2); }
  }
  if (!Number.isInteger(o.rounds) || o.rounds < 1) {
    console.error('serve_bench: --rounds takes a positive integer');
    process.exit(2);
  }
  if (!o.concurrency.length || o.concurrency.some((c) => !Number.isInteger(c) || c < 1 || c > 256)) {
    console.error('serve_bench: --concurrency takes a list of integers in 1..256');
    process.exit(2);
  }
  if (!Number.isInteger(o.admissionSeqs) || o.admissionSeqs < 1 || o.admissionSeqs > 256) {
    console.error('serve_bench: --admission-seqs takes an integer in 1..256');
    process.exit(2);
  }
  if (!Number.isInteger(o.docTokens) || o.docTokens < 16) {
    console.error('serve_bench: --doc-tokens takes an integer of at least 16');
    process.exit(2);
  }
  return o;
}

function startServer(o, args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(o.vkv, ['serve', '-m', o.model, '--port', '0', '--quiet', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    const exited = new Promise((r) => proc.on('exit', (code) => r(code)));
    proc.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/listening on (http:\/\/[^\s]+)/);
      if (m) resolve({ proc, url: m[1], exited, log: () => log });
    });
    proc.on('exit', (code) => reject(new Error(`vkvector serve exited (${code}):\n${log}`)));
  });
}

// llama.cpp's server on the same GGUF, every layer on the device, on a free
// loopback port; resolves once GET /health says the model is loaded.
async function startLlamaServer(o, args) {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const env = { ...process.env, GGML_VK_VISIBLE_DEVICES: process.env.GGML_VK_VISIBLE_DEVICES ?? '0' };
  const proc = spawn(o.llamaServer, ['-m', o.model, '-ngl', '99', '--host', '127.0.0.1', '--port', String(port), ...args],
                     { stdio: ['ignore', 'ignore', 'pipe'], env });
  let log = '', gone = null;
  proc.stderr.on('data', (d) => { log = (log + d).slice(-8000); });
  const exited = new Promise((r) => proc.on('exit', (code) => { gone = code; r(code); }));
  const url = `http://127.0.0.1:${port}`;
  for (let t = 0; t < 600; t++) {
    if (gone !== null) throw new Error(`llama-server exited (${gone}):\n${log}`);
    const ok = await fetch(`${url}/health`).then((r) => r.ok, () => false);
    if (ok) return { proc, url, exited, log: () => log };
    await new Promise((r) => setTimeout(r, 200));
  }
  proc.kill('SIGKILL');
  throw new Error(`llama-server did not become ready in 120 s:\n${log}`);
}

async function stopServer(s) {
  s.proc.kill('SIGTERM');
  return s.exited;
}

async function metrics(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const get = (name) => {
    const m = text.match(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm'));
    return m ? Number(m[1]) : NaN;
  };
  return { peak: get('vkvector_sequences_active_peak'), budget: get('vkvector_kv_pool_budget_bytes'),
           used: get('vkvector_kv_pool_bytes_in_use'), prefixHits: get('vkvector_prefix_cache_hits_total'),
           prefixQueries: get('vkvector_prefix_cache_queries_total') };
}

function post(url, route, body) {
  return fetch(`${url}${route}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
}

function median(xs) {
  const sorted = [...xs].sort((a, b) => a - b), mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

async function throughput(o) {
  const widest = Math.max(...o.concurrency);
  const s = await startServer(o, ['--max-seqs', String(widest), '--queue', String(2 * widest)]);
  const rows = [];
  console.log(`\n## Aggregate throughput (streamed completions, temperature 0; --max-seqs ${widest})\n`);
  console.log('| round | server | tokens a request | concurrency | requests | prompt tokens | generated tokens/s | requests/s | TTFT p50 / p99 ms | ITL p50 / p99 ms |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  const load = async (server, url, round, g, c) => {
    const n = c === 1 ? 4 : 2 * c;
    // serve_load exits 1 when a request failed, its figures still on stdout:
    // vkvector's failures end the benchmark, the peer's are reported in its row
    const { stdout, stderr, failed } = await execFileP('node', [path.join(here, 'serve_load.mjs'), '--url', url,
      '--requests', String(n), '--concurrency', String(c), '--max-tokens', String(g), '--json',
      ...(server === 'llama-server' ? ['--retry-closed'] : [])]).catch((e) => {
      if (server === 'vkvector' || !e.stdout) throw e;
      return { stdout: e.stdout, stderr: e.stderr, failed: true };
    });
    const r = { server, round, gen: g, ...JSON.parse(stdout) };
    if (failed) r.failure = `${r.errored} of ${r.requests} failed (${stderr.split('\n')[0].replace(/^serve_load: /, '')})`;
    rows.push(r);
    console.log(`| ${r.round} | ${server} | ${r.gen} | ${r.concurrency} | ${r.requests} | up to ${r.prompt_tokens_max} | ` +
                `${r.generated_tokens_per_s.toFixed(1)} | ${r.requests_per_s.toFixed(2)} | ` +
                `${r.ttft_p50_ms.toFixed(0)} / ${r.ttft_p99_ms.toFixed(0)} | ${r.itl_p50_ms.toFixed(0)} / ${r.itl_p99_ms.toFixed(0)} |` +
                (r.retries ? ` ${r.retries} sent again: the server closed their keep-alive connection before answering` : '') +
                (r.failure ? ` ${r.failure}` : ''));
  };
  try {
    for (let round = 1; round <= o.rounds; round++) {
      for (const g of o.genTokens) {
        for (const c of o.concurrency) {
          await load('vkvector', s.url, round, g, c);
          if (!o.llamaServer) continue;
          // -np slots of the model's whole context each; its prompt cache on (the default)
          const l = await startLlamaServer(o, ['-np', String(c), '-c', String(c * LLAMA_SLOT_CTX)]);
          try {
            await (await post(l.url, '/v1/completions', { prompt: 'Hi', max_tokens: 2 })).json(); // warm-up
            await load('llama-server', l.url, round, g, c);
          } finally {
            await stopServer(l);
          }
        }
      }
    }
  } finally {
    await stopServer(s);
  }
  console.log('');
  if (o.llamaServer) {
    for (const g of o.genTokens) {
      for (const c of o.concurrency) {
        const ratios = [];
        for (let round = 1; round <= o.rounds; round++) {
          const at = (server) => rows.find((r) => r.server === server && r.round === round && r.gen === g && r.concurrency === c);
          if (!at('llama-server').failure) ratios.push(at('vkvector').generated_tokens_per_s / at('llama-server').generated_tokens_per_s);
        }
        if (!ratios.length) {
          console.log(`${g} tokens a request, concurrency ${c}: llama-server's requests failed (its row says how)`);
          continue;
        }
        console.log(`${g} tokens a request, concurrency ${c}: vkvector / llama-server generated tokens/s: ` +
                    `${ratios.map((x) => `${x.toFixed(2)}x`).join(', ')}` + (o.rounds > 1 ? ` (median ${median(ratios).toFixed(2)}x)` : ''));
      }
    }
    console.log('');
  }
  // each concurrency against the one before it in the list
  for (const g of o.genTokens) {
    for (let k = 1; k < o.concurrency.length; k++) {
      const [lo, hi] = [o.concurrency[k - 1], o.concurrency[k]], ratios = [];
      for (let round = 1; round <= o.rounds; round++) {
        const at = (c) => rows.find((r) => r.server === 'vkvector' && r.round === round && r.gen === g &&
                                           r.concurrency === c).generated_tokens_per_s;
        ratios.push(at(hi) / at(lo));
      }
      console.log(`${g} tokens a request: vkvector's concurrency ${hi} / concurrency ${lo}: ${ratios.map((x) => `${x.toFixed(2)}x`).join(', ')}` +
                  (o.rounds > 1 ? ` (median ${median(ratios).toFixed(2)}x)` : ''));
    }
  }
  console.log('\nEach new request costs a prefill (the prompts that arrive together share forwards), ' +
              'so the shorter the answers, the larger the prefills\' share of the time.');
}

// A prompt of about n tokens of the model's own text (lines of a play).
function longPrompt(n, i) {
  const line = `CITIZEN ${i}:\nWe are accounted poor citizens, the patricians good. What authority surfeits on would relieve us.\n`;
  return line.repeat(Math.ceil(n / 40)).slice(0, n * 2); // about 2 bytes a token for this vocabulary
}

// shared: every prompt is one document (longPrompt's 0) and a line of its
// own, after one such request alone has left the document in the prefix cache.
async function admitted(o, label, args, ext, shared = false) {
  const budgetMiB = o.kvBudgetMiB;
  const n = o.admissionSeqs;
  const s = await startServer(o, ['--max-seqs', String(n), '--queue', String(n), '--kv-budget', String(budgetMiB), ...args]);
  const promptOf = (i) => (shared ? `${longPrompt(o.promptTokens - 8, 0)}\nQUESTION ${i}:` : longPrompt(o.promptTokens, i));
  try {
    if (shared) await (await post(s.url, '/v1/completions', { prompt: promptOf(n), max_tokens: 1, temperature: 0 })).json();
    const reqs = Array.from({ length: n }, (_, i) => {
      const body = { prompt: promptOf(i), max_tokens: o.maxTokens, temperature: 0 };
      if (ext) body.vkvector = ext;
      return post(s.url, '/v1/completions', body).then(async (r) => ({ status: r.status, body: await r.json() }));
    });
    const res = await Promise.all(reqs);
    const m = await metrics(s.url);
    const bad = res.filter((r) => r.status !== 200);
    const x = res.find((r) => r.status === 200)?.body;
    return { label, peak: m.peak, budget: m.budget, errors: bad.length, firstError: bad[0]?.body?.error?.message,
             cached: x?.usage?.prompt_tokens_details?.cached_tokens,
             promptTokens: x?.usage?.prompt_tokens, after: x?.vkvector?.kv_bytes_after, before: x?.vkvector?.kv_bytes_before };
  } finally {
    await stopServer(s);
  }
}

async function admission(o) {
  // One request alone: the prompt's length in tokens and its uncompressed KV
  // bytes a token (a compressed request reports its context's uncompressed bytes).
  const s = await startServer(o, ['--max-seqs', '1']);
  let x, promptTokens;
  try {
    const r = await post(s.url, '/v1/completions', { prompt: longPrompt(o.promptTokens, 0), max_tokens: 1, temperature: 0,
                                                     vkvector: { press: 'keydiff', compression: 0.75 } });
    const body = await r.json();
    if (!body.vkvector) throw new Error(`the sizing request failed: ${JSON.stringify(body).slice(0, 300)}`);
    x = body.vkvector;
    promptTokens = body.usage.prompt_tokens;
  } finally {
    await stopServer(s);
  }
  const perToken = x.kv_bytes_before / x.n_compressed, context = promptTokens + o.maxTokens;
  // Room for about 4.5 uncompressed sequences.
  if (!o.kvBudgetMiB) o.kvBudgetMiB = Math.max(1, Math.round((4.5 * perToken * context) / 1048576 * 10) / 10);
  // At most a quarter of the whole context, prompt and answer, under a
  // budget that holds through the prefill (compressed as it goes) and the
  // generation: compressions every 64 tokens keep 3/16 to 4/16 of it.
  const every = 64, held = { press: 'keydiff', compress_every: every, max_kv_tokens: Math.ceil(context / 4) };
  const prompt = { press: 'keydiff', compression: 0.75 };
  const configs = [
    ['no compression', null],
    ['KeyDiff 0.75 on the prompt', prompt],
    ['KeyDiff 0.75 on the prompt + VECTOR', { ...prompt, vector: true }],
    ['KeyDiff 0.75 on the prompt + VECTOR, q8_0 tiers', { ...prompt, vector: true, kv_type: 'q8_0' }],
    [`KeyDiff, at most a quarter of the context (max_kv_tokens ${held.max_kv_tokens}, compress_every ${every})`, held],
    ['the same + VECTOR', { ...held, vector: true }],
    ['the same + VECTOR, q8_0 tiers', { ...held, vector: true, kv_type: 'q8_0' }],
  ];
  console.log(`\n## Sequences admitted at once under --kv-budget ${o.kvBudgetMiB} MiB ` +
              `(${o.admissionSeqs} requests of ${promptTokens} prompt tokens, ${o.maxTokens} new; --max-seqs ${o.admissionSeqs})\n`);
  console.log('| compression | peak sequences at once | vs no compression | prompt\'s KV bytes after / before its compression | errors |');
  console.log('| --- | --- | --- | --- | --- |');
  const rows = [];
  for (const [label, ext] of o.compressedAdmission ? configs : configs.slice(0, 1)) { // each row as it lands
    const r = await admitted(o, label, [], ext);
    rows.push(r);
    console.log(`| ${r.label} | ${r.peak} | ${(r.peak / rows[0].peak).toFixed(2)}x | ` +
                `${r.before ? `${r.after} / ${r.before}` : 'n/a'} | ${r.errors}${r.firstError ? ` (${r.firstError})` : ''} |`);
  }
  // One document, many questions: the prefix cache's pages shared by
  // reference (paged caches) or copied into each sequence (--no-paged-kv).
  console.log('\n| one shared document, no compression | peak sequences at once | vs no compression | prompt tokens from the prefix cache | errors |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const [label, args] of [['pages shared (the default)', []], ['rows copied (--no-paged-kv)', ['--no-paged-kv']]]) {
    const r = await admitted(o, label, args, null, true);
    console.log(`| ${r.label} | ${r.peak} | ${(r.peak / rows[0].peak).toFixed(2)}x | ${r.cached ?? 'n/a'} of ${r.promptTokens} | ` +
                `${r.errors}${r.firstError ? ` (${r.firstError})` : ''} |`);
  }
  console.log('\nA sequence is counted while it is prefilled or decoded: the peak reaches what the pool could hold only ' +
              'when sequences outlive the prefills of the ones admitted after them (prompts that compress are prefilled one at a time), ' +
              `and ${o.admissionSeqs} (--max-seqs) at most. Compressing the prompt alone leaves the answer's ` +
              'tokens and one uncompressed prompt (the one being prefilled) in the pool.');
}

// One streamed request (temperature 0, the usage chunk asked for): the
// milliseconds from sending it to the first chunk that carries text (null:
// none did), its text, finish reason and usage; { error } where the server
// refused it or the stream carried an error.
async function streamed(url, route, body) {
  const t0 = performance.now();
  const res = await post(url, route, { ...body, temperature: 0, stream: true, stream_options: { include_usage: true } });
  if (!res.ok) return { error: `HTTP ${res.status}: ${(await res.json().catch(() => ({}))).error?.message}` };
  const out = { ttft: null, text: '', finish: null, usage: null, vkvector: null }, decoder = new TextDecoder();
  let pending = '';
  for await (const bytes of res.body) {
    const events = (pending + decoder.decode(bytes, { stream: true })).split('\n\n');
    pending = events.pop();
    for (const event of events.map((e) => e.replace(/^data: /, '')).filter((e) => e !== '[DONE]')) {
      const chunk = JSON.parse(event);
      if (chunk.error) return { error: chunk.error.message };
      out.usage = chunk.usage || out.usage;
      out.vkvector = chunk.vkvector || out.vkvector;
      out.timings = chunk.timings || out.timings; // llama-server's: cache_n is the prompt tokens it reused
      for (const c of chunk.choices || []) {
        const piece = c.text ?? c.delta?.content ?? '';
        if (piece && out.ttft === null) out.ttft = performance.now() - t0;
        out.text += piece;
        out.finish = c.finish_reason || out.finish;
      }
    }
  }
  if (!out.usage) return { error: 'the stream ended without a usage chunk' };
  return out;
}

const ms = (x) => (x === null || Number.isNaN(x) ? 'n/a' : x.toFixed(0));
const cached = (r) => r.usage.prompt_tokens_details?.cached_tokens ?? r.timings?.cache_n ?? 'n/a';

// For each round, a fresh server with the prefix cache and then one without
// it: fn(server, its label, round) after a short warm-up request (a fresh
// server's first forward builds its GPU pipelines; a prompt shorter than the
// cache's 16-token page is not kept), then what /metrics says it reused.
async function eachCacheMode(o, fn) {
  for (let round = 1; round <= o.rounds; round++) {
    for (const [label, args] of [['prefix cache', []], ['no prefix cache', ['--no-prefix-cache']]]) {
      const s = await startServer(o, args);
      try {
        await (await post(s.url, '/v1/completions', { prompt: 'Hi', max_tokens: 2 })).json();
        await fn(s, label, round);
        const m = await metrics(s.url);
        console.log(`\n${label}, round ${round}: /metrics: vkvector_prefix_cache_hits_total ${m.prefixHits} of ` +
                    `vkvector_prefix_cache_queries_total ${m.prefixQueries} prompt tokens`);
      } finally {
        await stopServer(s);
      }
    }
  }
}

// The text's first whole lines that make at most n tokens (vkvector
// tokenize, BOS not counted).
async function documentOf(o, text, n) {
  const lines = text.split('\n'), head = (k) => `${lines.slice(0, k).join('\n')}\n`;
  const tokens = async (k) => (await execFileP(o.vkv, ['tokenize', '-m', o.model, '--text', head(k)])).stdout.trim().split(/\s+/).length;
  let lo = 1, hi = Math.min(lines.length - 1, n); // a line is a token at least
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((await tokens(mid)) <= n) lo = mid;
    else hi = mid - 1;
  }
  return { text: head(lo), lines: lo, tokens: await tokens(lo) };
}

const READ = 'I have read it.';

async function documentQuestions(o) {
  const doc = await documentOf(o, readFileSync(o.text, 'utf8'), o.docTokens);
  const questions = ['ROMEO:', 'JULIET:', 'First Citizen:', 'MENENIUS:'], maxTokens = 8;
  const compressions = [['none', null], ['KeyDiff 0.75 + VECTOR', { press: 'keydiff', compression: 0.75, vector: true }]];
  console.log(`\n## Questions about one cached document (/v1/chat/completions: a user message of the first ` +
              `${doc.lines} lines of ${path.basename(o.text)}, ${doc.tokens} tokens, the assistant's "${READ}", then a ` +
              `speaker's name as the question; one question at a time, ${maxTokens} tokens each, streamed, temperature 0)`);
  const laterMedians = {}; // `${server}|${compression}|${round}` -> the later questions' median TTFT
  const ask = async (url, round, server, label, ext) => {
    console.log('\n| round | server | compression | question | prompt tokens | cached tokens | context cache | TTFT ms |');
    console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
    const ttft = [];
    for (const [k, q] of questions.entries()) {
      const messages = [{ role: 'user', content: doc.text }, { role: 'assistant', content: READ }, { role: 'user', content: q }];
      const r = await streamed(url, '/v1/chat/completions', { messages, max_tokens: maxTokens, ...(ext && { vkvector: ext }) });
      if (r.error) throw new Error(`question ${k + 1} (${server}, ${label}): ${r.error} (a smaller --doc-tokens?)`);
      ttft.push(r.ttft);
      console.log(`| ${round} | ${server} | ${label} | ${k + 1} (${q}) | ${r.usage.prompt_tokens} | ${cached(r)} | ` +
                  `${r.vkvector?.context_cache?.status ?? '-'} | ${ms(r.ttft)} |`);
    }
    const later = median(ttft.slice(1).filter((x) => x !== null));
    laterMedians[`${server}|${label}|${round}`] = later;
    console.log(`\n${server}, ${label}: first question's TTFT ${ms(ttft[0])} ms, the later ones' median ${ms(later)} ms: ` +
                `later / first ${(later / ttft[0]).toFixed(2)}x`);
  };
  await eachCacheMode(o, async (s, mode, round) => {
    for (const [label, ext] of compressions) await ask(s.url, round, mode, label, ext);
    if (!o.llamaServer || mode !== 'prefix cache') return;
    // llama-server beside it, the same round: one slot, its prompt cache on
    const l = await startLlamaServer(o, ['-np', '1', '-c', String(LLAMA_SLOT_CTX)]);
    try {
      await (await post(l.url, '/v1/completions', { prompt: 'Hi', max_tokens: 2 })).json(); // warm-up
      await ask(l.url, round, 'llama-server', 'none', null);
    } finally {
      await stopServer(l);
    }
    const theirs = laterMedians[`llama-server|none|${round}`];
    for (const [label] of compressions)
      console.log(`\nround ${round}: later questions' TTFT, vkvector (prefix cache, ${label}) / llama-server (prompt cache): ` +
                  `${(laterMedians[`prefix cache|${label}|${round}`] / theirs).toFixed(2)}x`);
  });
  console.log('\nThe plain rows reuse the document\'s prompt rows (the prefix cache); the compressed rows take the ' +
              'document compressed once (the compressed-context cache: the chat\'s messages before its last user turn are ' +
              'the context KeyDiff compresses) and prefill only the question.');
}

// Short lines of the play: each speech's first words, whole words up to
// maxChars characters, where that makes at least half of them.
function playLines(text, count, maxChars) {
  const out = [];
  for (const speech of text.split('\n\n')) {
    let line = '';
    for (const w of speech.split('\n').slice(1).join(' ').split(' ')) {
      if (line.length + 1 + w.length > maxChars) break;
      line = line ? `${line} ${w}` : w;
    }
    if (line.length >= maxChars / 2) out.push(line);
    if (out.length === count) break;
  }
  return out;
}

async function chat(o) {
  const turns = 8, maxTokens = 24, lines = playLines(readFileSync(o.text, 'utf8'), turns, 90);
  console.log(`\n## A multi-turn chat (${lines.length} turns of /v1/chat/completions, each the conversation so far: the ` +
              `previous answers and a new line of ${path.basename(o.text)} of up to 90 characters; ${maxTokens} tokens ` +
              'an answer, streamed, temperature 0)');
  await eachCacheMode(o, async (s, mode, round) => {
    console.log('\n| round | server | turn | prompt tokens | cached tokens | TTFT ms | answer tokens |');
    console.log('| --- | --- | --- | --- | --- | --- | --- |');
    const messages = [], later = [];
    let prompt = 0, fromCache = 0;
    for (const [i, line] of lines.entries()) {
      messages.push({ role: 'user', content: line });
      const r = await streamed(s.url, '/v1/chat/completions', { messages, max_tokens: maxTokens });
      if (r.error && /context length/.test(r.error)) {
        console.log(`\nTurn ${i + 1} does not fit the context (${r.error}): stopped.`);
        break;
      }
      if (r.error) throw new Error(`turn ${i + 1}: ${r.error}`);
      console.log(`| ${round} | ${mode} | ${i + 1} | ${r.usage.prompt_tokens} | ${cached(r)} | ${ms(r.ttft)} | ` +
                  `${r.usage.completion_tokens} |`);
      if (i) later.push(r.ttft);
      prompt += r.usage.prompt_tokens;
      fromCache += r.usage.prompt_tokens_details?.cached_tokens ?? 0;
      if (r.finish === 'length' && r.usage.completion_tokens < maxTokens) {
        console.log(`\nTurn ${i + 1}'s answer reached the end of the context: stopped.`);
        break;
      }
      messages.push({ role: 'assistant', content: r.text });
    }
    console.log(`\n${mode}: ${fromCache} of ${prompt} prompt tokens from the cache; turns 2 on: TTFT median ` +
                `${ms(median(later.filter((x) => x !== null)))} ms`);
  });
  console.log('\nThe cache keeps a finished request\'s prompt rows, not its answer\'s: a turn reuses at most the previous ' +
              'turn\'s prompt (a multiple of 16 tokens of it) and prefills the rest: the previous answer and the new line.');
}

async function main() {
  const o = parseArgs(process.argv);
  const { stdout } = await execFileP(o.vkv, ['devices']);
  console.log(`# vkvector serve benchmark: ${path.basename(o.model)}\n\n${stdout.split('\n')[0]}`);
  if (o.throughput) await throughput(o);
  if (o.admission) await admission(o);
  if (o.document) await documentQuestions(o);
  if (o.chat) await chat(o);
}

main().catch((e) => { console.error(`serve_bench: ${e.stack || e}`); process.exit(1); });
