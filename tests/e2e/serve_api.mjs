// vkvector serve's HTTP front through OpenAI's official Node client (the npm
// package `openai`), against fake_serve: the front (src/serve/http.c,
// openai.c) in front of a fake engine that echoes the prompt's words back
// (tests/unit/fake_engine.c). Chat and completions, streamed and not; usage;
// the "vkvector" extension object both ways; the error objects the client
// raises (400/401/404/413/429, the engine's own errors); a client abort
// mid-stream reaching the engine as a cancel; SSE framing byte for byte with
// fetch; llama-server's /tokenize, /detokenize and /props in its shapes, with
// the key and the error objects; SIGTERM during a stream (the stream ends
// whole, the server exits 0).
//
//   node serve_api.mjs FAKE_SERVE
import { spawn } from 'node:child_process';
import OpenAI from 'openai';

const fakeServe = process.argv[2];
let passes = 0, fails = 0;
function check(cond, msg) {
  if (cond) passes++;
  else { fails++; console.log('FAIL: ' + msg); }
  return cond;
}
const eq = (a, b, msg) => check(JSON.stringify(a) === JSON.stringify(b), `${msg}: got ${JSON.stringify(a)}, wanted ${JSON.stringify(b)}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/* Starts fake_serve; resolves once it printed its port. */
function start(args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(fakeServe, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    const exited = new Promise((res) => proc.on('exit', (code, signal) => res({ code, signal })));
    proc.stderr.on('data', (d) => { err += d; });
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/^(\d+)\n/);
      if (m) resolve({ proc, exited, port: Number(m[1]), base: `http://127.0.0.1:${m[1]}`, stderr: () => err });
    });
    proc.on('error', reject);
    exited.then(({ code }) => reject(new Error(`fake_serve exited (${code}) before printing its port: ${err}`)));
  });
}

// /metrics wants the key too when the server has one (unless --metrics-public)
async function metrics(srv) {
  const r = await fetch(`${srv.base}/metrics`, { headers: { Authorization: 'Bearer test-key' } });
  return r.text();
}
function metric(text, name) {
  const m = text.match(new RegExp(`^${name.replace(/[{}"=,]/g, (c) => '\\' + c)} (\\d+)$`, 'm'));
  return m ? Number(m[1]) : undefined;
}

/* The error a promise rejects with (or null). */
async function caught(p) {
  try { await p; return null; } catch (e) { return e; }
}

async function main() {
  // --strict-model: a request naming another model gets 404 (by default any name is served)
  const srv = await start(['--api-key', 'test-key', '--max-body', '65536', '--max-in-flight', '3', '--delay-ms', '15',
                           '--strict-model']);
  const client = new OpenAI({ apiKey: 'test-key', baseURL: `${srv.base}/v1`, maxRetries: 0, timeout: 20000 });
  const user = (content) => [{ role: 'user', content }];

  // ---- models ----
  const models = await client.models.list();
  eq(models.data.map((m) => m.id), ['fake-model'], 'models.list');
  eq((await client.models.retrieve('fake-model')).object, 'model', 'models.retrieve');

  // ---- chat, not streamed ----
  let c = await client.chat.completions.create({ model: 'fake-model', messages: user('the quick brown fox') });
  check(c.id.startsWith('chatcmpl-'), `chat id ${c.id}`);
  eq([c.object, c.model, c.choices.length], ['chat.completion', 'fake-model', 1], 'chat object');
  eq(c.choices[0].message, { role: 'assistant', content: 'the quick brown fox' }, 'chat message');
  eq([c.choices[0].index, c.choices[0].finish_reason, c.choices[0].logprobs], [0, 'stop', null], 'chat choice');
  eq(c.usage, { prompt_tokens: 4, completion_tokens: 4, total_tokens: 8, prompt_tokens_details: { cached_tokens: 0 } }, 'chat usage');
  check(Math.abs(c.created - Date.now() / 1000) < 60, 'chat created is now');

  c = await client.chat.completions.create({ model: 'fake-model', messages: user('the quick brown fox'), max_tokens: 2 });
  eq([c.choices[0].message.content, c.choices[0].finish_reason, c.usage.completion_tokens], ['the quick', 'length', 2],
    'max_tokens');
  c = await client.chat.completions.create({ model: 'fake-model', messages: user('the quick brown fox'),
    max_completion_tokens: 3, stop: ['brown', 'zzz'] });
  eq([c.choices[0].message.content, c.choices[0].finish_reason], ['the quick ', 'stop'], 'stop sequence');
  c = await client.chat.completions.create({ model: 'fake-model',
    messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: [{ type: 'text', text: 'alpha beta' }] }] });
  eq([c.choices[0].message.content, c.usage.prompt_tokens], ['alpha beta', 4], 'content parts');

  // ---- chat, streamed ----
  let stream = await client.chat.completions.create({ model: 'fake-model', messages: user('one two three'), stream: true,
    stream_options: { include_usage: true } });
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  check(chunks.length === 6, `chat stream: ${chunks.length} chunks (role, 3 words, finish, usage)`);
  eq(chunks[0].choices[0].delta, { role: 'assistant', content: '' }, 'first chunk');
  eq(chunks.slice(1, 4).map((x) => x.choices[0].delta.content).join(''), 'one two three', 'streamed text');
  eq([chunks[4].choices[0].finish_reason, chunks[4].choices[0].delta], ['stop', {}], 'finish chunk');
  eq([chunks[5].choices, chunks[5].usage], [[], { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6, prompt_tokens_details: { cached_tokens: 0 } }], 'usage chunk');
  check(chunks.every((x) => x.object === 'chat.completion.chunk' && x.id === chunks[0].id), 'chunks share id and object');
  check(chunks.slice(0, 5).every((x) => x.usage === null), 'usage: null before the usage chunk');

  // ---- completions ----
  let t = await client.completions.create({ model: 'fake-model', prompt: 'Once upon a time', max_tokens: 3 });
  check(t.id.startsWith('cmpl-'), `completion id ${t.id}`);
  eq([t.object, t.choices[0].text, t.choices[0].finish_reason, t.choices[0].index, t.choices[0].logprobs],
    ['text_completion', 'Once upon a', 'length', 0, null], 'completion');
  eq(t.usage, { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7, prompt_tokens_details: { cached_tokens: 0 } }, 'completion usage');
  t = await client.completions.create({ model: 'fake-model', prompt: [5, 6, 7] });
  eq([t.choices[0].text, t.usage.prompt_tokens], ['t5 t6 t7', 3], 'token id prompt');
  t = await client.completions.create({ model: 'fake-model', prompt: ['a single prompt'] });
  eq(t.choices[0].text, 'a single prompt', 'prompt as an array of one string');
  stream = await client.completions.create({ model: 'fake-model', prompt: 'x y', stream: true });
  const tchunks = [];
  for await (const ch of stream) tchunks.push(ch);
  eq(tchunks.map((x) => [x.object, x.choices[0].text, x.choices[0].finish_reason]),
    [['text_completion', 'x', null], ['text_completion', ' y', null], ['text_completion', '', 'stop']], 'completion stream');

  // ---- n choices: indexed, each with its finish reason; usage counts the prompt once ----
  c = await client.chat.completions.create({ model: 'fake-model', messages: user('red green blue'), n: 3 });
  eq(c.choices.map((x) => [x.index, x.message.content, x.finish_reason]),
    [[0, 'red green blue', 'stop'], [1, 'red green blue', 'stop'], [2, 'red green blue', 'stop']], 'n = 3 choices');
  eq(c.usage, { prompt_tokens: 3, completion_tokens: 9, total_tokens: 12, prompt_tokens_details: { cached_tokens: 0 } },
    'n = 3 usage');
  stream = await client.completions.create({ model: 'fake-model', prompt: 'p q', n: 2, stream: true,
    stream_options: { include_usage: true } });
  const byIndex = [[], []];
  let finishes = 0, usage = null;
  for await (const ch of stream) {
    if (!ch.choices.length) { usage = ch.usage; continue; }
    const x = ch.choices[0];
    byIndex[x.index].push(x.text);
    if (x.finish_reason) finishes++;
  }
  eq([byIndex.map((a) => a.join('')), finishes, usage?.completion_tokens], [['p q', 'p q'], 2, 4], 'n = 2 streamed');
  stream = await client.chat.completions.create({ model: 'fake-model', messages: user('x'), n: 2, stream: true });
  const roles = [];
  for await (const ch of stream) if (ch.choices[0]?.delta?.role) roles.push(ch.choices[0].index);
  eq(roles, [0, 1], 'n = 2 chat stream: a role delta a choice');

  // ---- the extension object, both ways ----
  const ext = { press: 'snapkv', compression: 0.5, vector: true, pa: 0.2, kv_type: 'q4_0', compress_every: 16,
    max_kv_tokens: 128, query_aware: true };
  c = await client.chat.completions.create({ model: 'fake-model', messages: user('a b c d'), vkvector: ext });
  eq([c.vkvector.press, c.vkvector.compression, c.vkvector.vector, c.vkvector.n_compressed],
    ['snapkv', 0.5, true, 4], 'vkvector object in the response');
  for (const k of ['n_retained', 'n_approximated', 'n_evicted', 'kv_bytes_before', 'kv_bytes_after', 'decode_compressions'])
    check(Number.isInteger(c.vkvector[k]), `vkvector.${k} is an integer`);
  const last = (await metrics(srv)).match(/^fake_engine_last_request\{(.*)\} 1$/m);
  const labels = Object.fromEntries([...(last ? last[1] : '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
  eq([labels.press, labels.compression, labels.vector, labels.pa, labels.kv_type, labels.compress_every,
    labels.max_kv_tokens, labels.query_aware], ['snapkv', '0.5', 'true', '0.2', 'q4_0', '16', '128', 'true'],
  'the engine got every extension field');
  stream = await client.chat.completions.create({ model: 'fake-model', messages: user('a b'), stream: true,
    vkvector: { press: 'keydiff', compression: 0.25 } });
  let fin = null;
  for await (const ch of stream) if (ch.choices[0]?.finish_reason) fin = ch;
  eq([fin?.vkvector?.press, fin?.vkvector?.compression], ['keydiff', 0.25], 'vkvector object in the finish chunk');

  // ---- errors ----
  let e = await caught(new OpenAI({ apiKey: 'wrong', baseURL: `${srv.base}/v1`, maxRetries: 0 })
    .chat.completions.create({ model: 'fake-model', messages: user('x') }));
  check(e instanceof OpenAI.AuthenticationError, `401 is AuthenticationError (${e})`);
  eq([e?.status, e?.code, e?.type], [401, 'invalid_api_key', 'invalid_request_error'], '401 fields');

  e = await caught(client.chat.completions.create({ model: 'fake-model', messages: user('x'), temperature: 5 }));
  check(e instanceof OpenAI.BadRequestError, `400 is BadRequestError (${e})`);
  eq([e?.status, e?.param, e?.type], [400, 'temperature', 'invalid_request_error'], '400 fields');
  check(/temperature/.test(e?.message), `400 message names the field: ${e?.message}`);
  e = await caught(client.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 7 }] }));
  eq([e?.status, e?.param], [400, 'messages.[0].content'], '400 nested param');
  e = await caught(client.chat.completions.create({ model: 'fake-model', messages: user('x'), n: 129 }));
  eq([e?.status, e?.param], [400, 'n'], 'n > 128');

  e = await caught(client.chat.completions.create({ model: 'gpt-4o', messages: user('x') }));
  check(e instanceof OpenAI.NotFoundError, `404 is NotFoundError (${e})`);
  eq([e?.status, e?.code, e?.param], [404, 'model_not_found', 'model'], '404 fields');

  e = await caught(client.chat.completions.create({ model: 'fake-model', messages: user('w '.repeat(40000)) }));
  check(e instanceof OpenAI.APIError && e.status === 413, `413 is an APIError with status 413 (${e})`);
  eq(e?.code, 'request_too_large', '413 code');

  e = await caught(client.chat.completions.create({ model: 'fake-model', messages: user('FAKE_CONTEXT') }));
  eq([e?.status, e?.code, e?.param], [400, 'context_length_exceeded', 'messages'], 'engine error passes through');
  e = await caught(client.completions.create({ model: 'fake-model', prompt: 'FAKE_ERROR_500', stream: true }));
  check(e instanceof OpenAI.InternalServerError, `an error before the stream starts is a 500 response (${e})`);
  stream = await client.chat.completions.create({ model: 'fake-model', messages: user('a b c FAKE_FAIL_MIDWAY'), stream: true });
  e = await caught((async () => { for await (const ch of stream) void ch; })());
  check(e instanceof OpenAI.APIError && /midway/.test(e.message), `an error mid-stream is raised by the client (${e})`);

  // 429: three slow streams fill the fake engine, the fourth request is refused
  const slowWords = Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ');
  const hogs = [];
  for (let i = 0; i < 3; i++) {
    const s = await client.chat.completions.create({ model: 'fake-model', messages: user(slowWords), stream: true });
    const it = s[Symbol.asyncIterator]();
    await it.next();
    hogs.push({ s, it });
  }
  e = await caught(client.chat.completions.create({ model: 'fake-model', messages: user('x') }));
  check(e instanceof OpenAI.RateLimitError, `429 is RateLimitError (${e})`);
  eq([e?.status, e?.code, e?.headers?.get('retry-after')], [429, 'rate_limit_exceeded', '1'], '429 fields and Retry-After');

  // ---- a client abort mid-stream reaches the engine as a cancel ----
  /* waits (2 s at most) for the fake engine's cancel counter to reach n */
  async function cancels(n, what) {
    const t0 = Date.now();
    let got;
    do {
      got = metric(await metrics(srv), 'fake_engine_cancelled_total');
      if (got >= n) break;
      await sleep(20);
    } while (Date.now() - t0 < 2000);
    check(got === n, `${what}: the engine saw ${got} cancels, wanted ${n} within 2 s (${Date.now() - t0} ms)`);
  }
  const before = metric(await metrics(srv), 'fake_engine_cancelled_total');
  for (const h of hogs) h.s.controller.abort();
  await cancels(before + 3, 'three streams aborted by their controllers');
  const ac = new AbortController();
  const s = await client.chat.completions.create({ model: 'fake-model', messages: user(slowWords), stream: true },
    { signal: ac.signal });
  let got = 0;
  e = await caught((async () => { for await (const ch of s) { if (++got === 3) ac.abort(); void ch; } })());
  /* the client's stream ends quietly on an abort */
  check(got === 3 && (!e || e instanceof OpenAI.APIUserAbortError), `the abort ends the iteration (${got} chunks, ${e})`);
  await cancels(before + 4, 'a stream aborted through an AbortController signal');
  const m = await metrics(srv);
  check(metric(m, 'vkvector_http_client_disconnects_total') >= 4, 'the front counts the disconnects');
  check(metric(m, 'vkvector_http_requests_total{route="/v1/chat/completions",status="200"}') > 5, 'HTTP counters by route');
  check(metric(m, 'vkvector_http_requests_total{route="/v1/chat/completions",status="429"}') === 1, '429 counted');

  // ---- SSE framing, byte for byte ----
  const r = await fetch(`${srv.base}/v1/chat/completions`, { method: 'POST',
    headers: { Authorization: 'Bearer test-key', 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'fake-model', messages: user('frame me'), stream: true }) });
  eq([r.status, r.headers.get('content-type')], [200, 'text/event-stream'], 'stream headers');
  const raw = await r.text();
  check(/^(data: [^\n]+\n\n)+$/.test(raw), `events are "data: ...\\n\\n" and nothing else: ${JSON.stringify(raw.slice(0, 200))}`);
  check(raw.endsWith('data: [DONE]\n\n'), 'the stream ends with data: [DONE]');
  const events = raw.split('\n\n').filter(Boolean).map((x) => x.slice(6));
  check(events.slice(0, -1).every((x) => { try { JSON.parse(x); return true; } catch { return false; } }),
    'every event but [DONE] is JSON');
  // ---- llama-server's utility routes: its shapes, the key, OpenAI's error objects ----
  const auth = { Authorization: 'Bearer test-key', 'Content-Type': 'application/json' };
  const post = async (path, body, headers = auth) => {
    const res = await fetch(`${srv.base}${path}`, { method: 'POST', headers,
      body: typeof body === 'string' ? body : JSON.stringify(body) });
    return [res.status, await res.json().catch(() => null)];
  };
  /* the fake vocabulary (tests/unit/fake_engine.h): 0 <s>, 1 </s>, 2 + b a byte, 258.. "the", "quick", ..., "world" */
  let [st, body] = await post('/tokenize', { content: 'hello world' });
  eq([st, body], [200, { tokens: [262, 2 + 32, 263] }], '/tokenize');
  [st, body] = await post('/tokenize', { content: 'the fox', add_special: true });
  eq(body, { tokens: [0, 258, 34, 261] }, '/tokenize add_special puts BOS first');
  [st, body] = await post('/tokenize', { content: 'fox<s>' });
  eq(body, { tokens: [261, 0] }, '/tokenize parses special tokens\' text by default');
  [st, body] = await post('/tokenize', { content: 'fox<s>', parse_special: false });
  eq(body.tokens.length, 4, '/tokenize parse_special false: special text as plain text');
  [st, body] = await post('/tokenize', { content: 'the \u00e1', with_pieces: true });
  eq(body, { tokens: [{ id: 258, piece: 'the' }, { id: 34, piece: ' ' }, { id: 2 + 0xc3, piece: [0xc3] },
    { id: 2 + 0xa1, piece: [0xa1] }] }, '/tokenize with_pieces: strings, and bytes where not UTF-8');
  [st, body] = await post('/tokenize', { content: '' });
  eq([st, body], [200, { tokens: [] }], '/tokenize of nothing');
  [st, body] = await post('/detokenize', { tokens: [262, 34, 263, 2 + 0xc3, 2 + 0xa1] });
  eq([st, body], [200, { content: 'hello world\u00e1' }], '/detokenize');
  [st, body] = await post('/detokenize', { tokens: [] });
  eq(body, { content: '' }, '/detokenize of nothing');
  const refusals = [
    ['/detokenize', { tokens: [262, 264] }, 'tokens', /outside the vocabulary/],
    ['/detokenize', { tokens: [-1] }, 'tokens', /outside the vocabulary/],
    ['/detokenize', { tokens: [1.5] }, 'tokens', /integer/],
    ['/detokenize', { tokens: 'hello' }, 'tokens', /array/],
    ['/detokenize', {}, 'tokens', /required/],
    ['/tokenize', { content: 7 }, 'content', /string/],
    ['/tokenize', {}, 'content', /required/],
    ['/tokenize', { content: 'x', with_pieces: 'yes' }, 'with_pieces', /boolean/],
    ['/tokenize', { content: 'x', add_special: 1 }, 'add_special', /boolean/],
    ['/tokenize', '{"content": ', null, /JSON/],
    ['/tokenize', '[1, 2]', null, /object/],
  ];
  for (const [path, b, param, msg] of refusals) {
    [st, body] = await post(path, b);
    check(st === 400 && body?.error?.type === 'invalid_request_error' && body.error.param === param &&
      msg.test(body.error.message), `${path} ${JSON.stringify(b)}: 400 naming ${param}: ${st} ${JSON.stringify(body)}`);
  }
  [st, body] = await post('/tokenize', { content: 'w '.repeat(40000) });
  eq([st, body?.error?.code], [413, 'request_too_large'], '/tokenize body over the cap: 413');
  for (const [path, b] of [['/tokenize', { content: 'x' }], ['/detokenize', { tokens: [] }]]) {
    [st, body] = await post(path, b, { 'Content-Type': 'application/json' });
    eq([st, body?.error?.code], [401, 'invalid_api_key'], `${path} wants the key`);
  }
  let pr = await fetch(`${srv.base}/props`);
  eq(pr.status, 401, '/props wants the key');
  pr = await fetch(`${srv.base}/props`, { headers: auth });
  const props = await pr.json();
  eq([pr.status, props.default_generation_settings?.n_ctx, props.total_slots, props.model_path, props.model_alias,
    props.chat_template, props.bos_token, props.eos_token],
  [200, 2048, 3, '/models/fake-model.gguf', 'fake-model', 'chatml', '<s>', '</s>'], '/props');
  const params = props.default_generation_settings?.params ?? {};
  eq([params.temperature, params.top_p, params.n_predict, params.max_tokens, params.vkvector?.press,
    params.vkvector?.kv_type], [1, 1, -1, -1, 'none', 'f16'], '/props default_generation_settings');
  eq((await post('/props', {}))[0], 405, 'POST /props: 405');
  eq((await fetch(`${srv.base}/tokenize`, { headers: auth })).status, 405, 'GET /tokenize: 405');
  const mu = await metrics(srv);
  check(metric(mu, 'vkvector_http_requests_total{route="/tokenize",status="200"}') === 6 &&
    metric(mu, 'vkvector_http_requests_total{route="/detokenize",status="400"}') === 5 &&
    metric(mu, 'vkvector_http_requests_total{route="/props",status="200"}') === 1,
  'the utility routes are counted by route');

  const health = await fetch(`${srv.base}/health`);
  eq([health.status, await health.json()], [200, { status: 'ok' }], '/health');
  const unknown = await fetch(`${srv.base}/v2/nothing`);
  eq([unknown.status, (await unknown.json()).error.message], [404, 'Invalid URL (GET /v2/nothing)'], 'unknown route');
  const wrongMethod = await fetch(`${srv.base}/v1/models`, { method: 'POST', headers: { Authorization: 'Bearer test-key' } });
  eq(wrongMethod.status, 405, 'wrong method');

  // ---- SIGTERM during a stream: the stream ends whole, the server exits 0 ----
  const long = Array.from({ length: 30 }, (_, i) => `s${i}`).join(' ');
  stream = await client.chat.completions.create({ model: 'fake-model', messages: user(long), stream: true });
  let text = '', finish = null, n = 0;
  for await (const ch of stream) {
    if (++n === 2) srv.proc.kill('SIGTERM');
    text += ch.choices[0]?.delta?.content ?? '';
    finish = ch.choices[0]?.finish_reason ?? finish;
  }
  eq([text, finish], [long, 'stop'], 'the stream running at SIGTERM ends whole');
  const ex = await srv.exited;
  eq([ex.code, ex.signal], [0, null], `fake_serve exits 0 after SIGTERM (stderr: ${srv.stderr().trim()})`);

  console.log(`serve_api: ${passes} checks passed, ${fails} failed`);
  process.exit(fails ? 1 : 0);
}

main().catch((err) => {
  console.log('FAIL: ' + (err?.stack || err));
  process.exit(1);
});
