#!/usr/bin/env node
// A bounded load test of `vkvector serve` (or any OpenAI-compatible server)
// on loopback: a fixed number of streamed completion requests, at most C in
// flight, then it stops by itself and prints what it measured:
//
//   requests/s, generated tokens/s (usage.completion_tokens over the wall
//   time), time to first token p50/p99, inter-token latency p50/p99
//
// and checks that every response is complete (a finish_reason, usage, the
// closing `data: [DONE]`) and that nothing errored: exit 1 otherwise.
// Node's own fetch only (Node 18+), so it runs without npm packages.
//
//   node tools/serve_load.mjs --url http://127.0.0.1:8080 [--requests N] [--concurrency C]
//        [--max-tokens T] [--prompt TEXT] [--extension JSON] [--model ID] [--api-key KEY] [--json]
//        [--retry-closed]
//
// Each request's prompt is --prompt with its index appended, so no two are
// the same. --extension is the request's "vkvector" object (docs/SERVE.md).
// --retry-closed sends a request again, once, when the server closed a
// reused keep-alive connection before any byte of its response (llama-server
// does under load; fetch does not retry a POST itself); the retries are
// counted. vkvector is measured without it.

function parseArgs(argv) {
  const o = { url: 'http://127.0.0.1:8080', requests: 32, concurrency: 8, maxTokens: 32,
              prompt: 'ROMEO:\nWhat light through yonder window breaks? Request', extension: null,
              model: null, apiKey: null, json: false, retryClosed: false };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i], v = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    const int = (name) => {
      const s = v(), n = Number(s);
      if (!Number.isInteger(n) || n < 1) throw new Error(`${name} wants a positive integer, got '${s}'`);
      return n;
    };
    if (a === '--url') o.url = v().replace(/\/+$/, '');
    else if (a === '--requests') o.requests = int(a);
    else if (a === '--concurrency') o.concurrency = int(a);
    else if (a === '--max-tokens') o.maxTokens = int(a);
    else if (a === '--prompt') o.prompt = v();
    else if (a === '--extension') o.extension = JSON.parse(v());
    else if (a === '--model') o.model = v();
    else if (a === '--api-key') o.apiKey = v();
    else if (a === '--json') o.json = true;
    else if (a === '--retry-closed') o.retryClosed = true;
    else if (a === '-h' || a === '--help') {
      console.log('usage: node tools/serve_load.mjs --url URL [--requests N] [--concurrency C] [--max-tokens T]\n' +
                  '       [--prompt TEXT] [--extension JSON] [--model ID] [--api-key KEY] [--json] [--retry-closed]');
      process.exit(0);
    } else throw new Error(`unknown option '${a}'`);
  }
  return o;
}

function headers(o) {
  const h = { 'Content-Type': 'application/json' };
  if (o.apiKey) h.Authorization = `Bearer ${o.apiKey}`;
  return h;
}

// One streamed completion: its timings, or the reason it is not complete.
async function oneRequest(o, index) {
  const body = { model: o.model, prompt: `${o.prompt} ${index}.`, max_tokens: o.maxTokens, temperature: 0,
                 stream: true, stream_options: { include_usage: true } };
  if (o.extension) body.vkvector = o.extension;
  const t0 = performance.now();
  let res;
  try {
    res = await fetch(`${o.url}/v1/completions`, { method: 'POST', headers: headers(o), body: JSON.stringify(body) });
  } catch (e) {
    e.beforeResponse = true; // nothing of the response arrived (--retry-closed may send it again)
    throw e;
  }
  if (!res.ok) return { error: `HTTP ${res.status}: ${(await res.text()).slice(0, 300)}` };
  const decoder = new TextDecoder();
  let buf = '', done = false, finish = null, usage = null, text = '';
  const stamps = []; // arrival time of every chunk that carried text
  for await (const bytes of res.body) {
    buf += decoder.decode(bytes, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      if (event.startsWith(':')) continue; // an SSE comment (llama-server's keep-alive while a slot waits): ignored, as the spec says
      if (!event.startsWith('data: ')) return { error: `not an SSE data line: ${JSON.stringify(event.slice(0, 80))}` };
      const data = event.slice(6);
      if (data === '[DONE]') { done = true; continue; }
      if (done) return { error: 'data after [DONE]' };
      const chunk = JSON.parse(data);
      if (chunk.error) return { error: `error chunk: ${chunk.error.message}` };
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices || []) {
        if (c.text) { text += c.text; stamps.push(performance.now()); }
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
  }
  if (!done) return { error: 'the stream ended without data: [DONE]' };
  if (!finish) return { error: 'no finish_reason' };
  if (!usage || !Number.isInteger(usage.completion_tokens)) return { error: 'no usage chunk' };
  if (usage.completion_tokens > 0 && !stamps.length) return { error: 'tokens counted but no text arrived' };
  const itl = [];
  for (let i = 1; i < stamps.length; i++) itl.push(stamps[i] - stamps[i - 1]);
  return { ttft: stamps.length ? stamps[0] - t0 : null, itl, tokens: usage.completion_tokens, promptTokens: usage.prompt_tokens,
           total: performance.now() - t0, finish, text };
}

function percentile(xs, p) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv);
  } catch (e) {
    console.error(`serve_load: ${e.message}`);
    process.exit(2);
  }
  if (!o.model) {
    const r = await fetch(`${o.url}/v1/models`, { headers: headers(o) });
    if (!r.ok) { console.error(`serve_load: GET /v1/models: HTTP ${r.status}`); process.exit(1); }
    o.model = (await r.json()).data[0].id;
  }
  const results = new Array(o.requests);
  let next = 0, retries = 0;
  const t0 = performance.now();
  async function worker() {
    while (next < o.requests) {
      const i = next++;
      try {
        try {
          results[i] = await oneRequest(o, i);
        } catch (e) {
          if (!o.retryClosed || !e?.beforeResponse || e?.cause?.code !== 'UND_ERR_SOCKET') throw e;
          retries++;
          results[i] = await oneRequest(o, i);
        }
      } catch (e) {
        // fetch's own message ("fetch failed") hides the socket's reason
        results[i] = { error: String(e && e.message || e) + (e && e.cause ? ` (${e.cause.code || ''} ${e.cause.message || e.cause})` : '') };
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(o.concurrency, o.requests) }, worker));
  const wall = (performance.now() - t0) / 1000;
  const ok = results.filter((r) => !r.error), failed = results.filter((r) => r.error);
  const tokens = ok.reduce((s, r) => s + r.tokens, 0);
  const ttft = ok.map((r) => r.ttft).filter((x) => x !== null), itl = ok.flatMap((r) => r.itl);
  const summary = {
    requests: o.requests, concurrency: o.concurrency, max_tokens: o.maxTokens, completed: ok.length,
    errored: failed.length, prompt_tokens_max: Math.max(0, ...ok.map((r) => r.promptTokens || 0)),
    wall_s: wall, requests_per_s: ok.length / wall, generated_tokens: tokens,
    generated_tokens_per_s: tokens / wall, ttft_p50_ms: percentile(ttft, 50), ttft_p99_ms: percentile(ttft, 99),
    itl_p50_ms: percentile(itl, 50), itl_p99_ms: percentile(itl, 99), retries,
  };
  if (o.json) console.log(JSON.stringify(summary));
  else {
    const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');
    console.log(`serve_load: ${o.requests} requests, concurrency ${o.concurrency}, max_tokens ${o.maxTokens}: ` +
                `${ok.length} complete, ${failed.length} errored in ${f(wall, 2)} s` +
                (retries ? ` (${retries} sent again after the server closed their connection)` : ''));
    console.log(`  requests/s            ${f(summary.requests_per_s, 2)}`);
    console.log(`  generated tokens/s    ${f(summary.generated_tokens_per_s, 1)} (${tokens} tokens)`);
    console.log(`  time to first token   p50 ${f(summary.ttft_p50_ms)} ms, p99 ${f(summary.ttft_p99_ms)} ms`);
    console.log(`  inter-token latency   p50 ${f(summary.itl_p50_ms)} ms, p99 ${f(summary.itl_p99_ms)} ms`);
  }
  for (const [i, r] of results.entries()) if (r.error) console.error(`serve_load: request ${i}: ${r.error}`);
  process.exit(failed.length ? 1 : 0);
}

main();
