// `vkvector serve` on the default model, driven by OpenAI's official Node
// client (the npm package `openai`), on lavapipe:
//   - 12 concurrent streamed completions at temperature 0 (some compressed,
//     some with VECTOR) give token for token what `vkvector run` gives alone;
//   - chat completions render the chat template (the ChatML fallback of a
//     model without one), streamed and not, with usage and the extension object;
//   - the error objects the client surfaces (400, 401, 404, 429 with
//     Retry-After, prompt over the context);
//   - llama-server's /tokenize (equal to `vkvector tokenize`), /detokenize
//     and /props (the context and slots the server was started with);
//   - a client that aborts mid-stream frees its sequence;
//   - SIGTERM ends running streams cleanly and the server exits 0; a second
//     SIGTERM cuts them and exits 143 at once;
//   - a bounded load test (tools/serve_load.mjs) completes without errors.
//
//   node serve_openai.mjs VKVECTOR MODEL REPO_ROOT
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { checker, startServer as start } from './serve_common.mjs';

const [vkv, model, repo] = process.argv.slice(2);
const execFileP = promisify(execFile);
const { check, finish } = checker('serve_openai');
const startServer = (args, env) => start(vkv, model, args, env);

async function stopServer(s) {
  s.proc.kill('SIGTERM');
  const { code, signal } = await s.exited;
  return { code, signal };
}

// The text `vkvector run` generates for a prompt, greedy, n tokens.
async function runCli(prompt, n, extra = []) {
  const { stdout, stderr } = await execFileP(vkv, ['run', '-m', model, '-p', prompt, '-n', String(n), '--temp', '0', ...extra],
                                             { maxBuffer: 1 << 24 });
  assert.ok(stdout.startsWith(prompt), 'run echoes the prompt first');
  const m = stderr.match(/prompt:\s+(\d+) tokens/);
  return { text: stdout.slice(prompt.length).replace(/\n$/, ''), promptTokens: m ? Number(m[1]) : null, stderr };
}

async function metric(url, name) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

async function collectStream(stream) {
  let text = '', finish = null, usage = null, ext = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.vkvector) ext = chunk.vkvector;
    for (const c of chunk.choices) {
      text += c.text ?? c.delta?.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage, ext };
}

const PROMPTS = [
  'ROMEO:\nBut soft, what light',
  'JULIET:\nO Romeo, Romeo! wherefore art thou',
  'KING HENRY:\nOnce more unto the breach, dear friends, once more;',
  'First Citizen:\nBefore we proceed any further, hear me speak.',
  'MENENIUS:\nThere was a time when all the body\'s members rebell\'d against the belly',
  'HAMLET:\nTo be, or not to be',
  'PROSPERO:\nOur revels now are ended.',
  'LADY MACBETH:\nOut, damned spot! out, I say!',
  'GLOUCESTER:\nNow is the winter of our discontent made glorious summer by this sun of York;',
  'BRUTUS:\nThere is a tide in the affairs of men',
  'PORTIA:\nThe quality of mercy is not strain\'d,',
  'Second Citizen:\nWould you proceed especially against Caius Marcius?',
];
// Which requests are compressed, and how (the extension object and run's flags).
function pressOf(i) {
  if (i % 4 === 1) return { ext: { press: 'keydiff', compression: 0.75 }, flags: ['--press', 'keydiff', '--compression', '0.75'] };
  if (i % 4 === 3) return { ext: { press: 'keydiff', compression: 0.75, vector: true },
                            flags: ['--press', 'keydiff', '--compression', '0.75', '--vector'] };
  return { ext: null, flags: [] };
}

async function main() {
  const N_NEW = 16;
  // What the CLI generates for each prompt alone (two at a time: two cores).
  const cli = [];
  for (let i = 0; i < PROMPTS.length; i += 2)
    cli.push(...await Promise.all([i, i + 1].map((j) => runCli(PROMPTS[j], N_NEW, pressOf(j).flags))));

  // 1 MiB memory blocks: a request's buffers would each allocate if the pool were not set aside at start.
  const s = await startServer(['--max-seqs', '16', '--ctx', '512'], { VKVECTOR_BLOCK_MIB: '1' });
  const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  // The pool is allocated at start: no request allocates device memory.
  const allocationsAtStart = await metric(s.url, 'vkvector_device_allocations_total');
  try {
    const models = await client.models.list();
    const id = models.data[0]?.id;
    check(id === 'vkvector-shakespeare', 'GET /v1/models lists the model', id);

    // llama-server's utility routes: /tokenize gives `vkvector tokenize`'s ids, /detokenize and
    // the pieces give the text back (bytes where a piece is part of a character), /props the
    // settings the server was started with.
    const tokText = `${PROMPTS[9]} caf\u00e9 \u2014 \u{1f600}`;
    const { stdout: cliIds } = await execFileP(vkv, ['tokenize', '-m', model, '--text', tokText]);
    const want = cliIds.trim().split(/\s+/).map(Number);
    const postJson = async (path, body) => (await fetch(`${s.url}${path}`, { method: 'POST',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })).json();
    const tok = await postJson('/tokenize', { content: tokText });
    check(JSON.stringify(tok.tokens) === JSON.stringify(want), '/tokenize equals vkvector tokenize',
          `${JSON.stringify(tok.tokens)} vs ${JSON.stringify(want)}`);
    const detok = await postJson('/detokenize', { tokens: want });
    check(detok.content === tokText, '/detokenize gives the text back', JSON.stringify(detok));
    const withPieces = await postJson('/tokenize', { content: tokText, with_pieces: true });
    const bytes = Buffer.concat((withPieces.tokens ?? []).map((t) =>
      (typeof t.piece === 'string' ? Buffer.from(t.piece, 'utf8') : Buffer.from(t.piece))));
    check(JSON.stringify((withPieces.tokens ?? []).map((t) => t.id)) === JSON.stringify(want) &&
          bytes.toString('utf8') === tokText && withPieces.tokens.some((t) => Array.isArray(t.piece)),
          '/tokenize with_pieces: the pieces spell the text, byte arrays where not UTF-8', JSON.stringify(withPieces));
    const withBos = await postJson('/tokenize', { content: 'ROMEO', add_special: true });
    const { stdout: cliBos } = await execFileP(vkv, ['tokenize', '-m', model, '--text', 'ROMEO', '--bos']);
    check(withBos.tokens?.join(' ') === cliBos.trim(), '/tokenize add_special puts BOS first, as tokenize --bos',
          `${JSON.stringify(withBos.tokens)} vs ${cliBos.trim()}`);
    const badIds = await fetch(`${s.url}/detokenize`, { method: 'POST', body: JSON.stringify({ tokens: [1, 768] }) });
    const badIdsBody = await badIds.json().catch(() => null);
    check(badIds.status === 400 && badIdsBody?.error?.param === 'tokens', '/detokenize of an id outside the vocabulary: 400',
          `${badIds.status} ${JSON.stringify(badIdsBody)}`);
    const props = await (await fetch(`${s.url}/props`)).json();
    check(props.default_generation_settings?.n_ctx === 512 && props.total_slots === 16 && props.model_path === model &&
          props.model_alias === 'vkvector-shakespeare' && props.chat_template === 'chatml',
          '/props: the context, slots, model and chat template the server was started with', JSON.stringify(props));

    // Concurrency: every request streamed at once, each compared with run.
    const streams = await Promise.all(PROMPTS.map(async (p, i) => {
      const body = { model: id, prompt: p, max_tokens: N_NEW, temperature: 0, stream: true,
                     stream_options: { include_usage: true } };
      if (pressOf(i).ext) body.vkvector = pressOf(i).ext;
      return collectStream(await client.completions.create(body));
    }));
    streams.forEach((r, i) => {
      check(r.text === cli[i].text, `request ${i} (${JSON.stringify(pressOf(i).ext)}) beside 11 others equals run`,
            `server ${JSON.stringify(r.text)} vs run ${JSON.stringify(cli[i].text)}`);
      check(r.finish === 'length', `request ${i} finish_reason length`, r.finish);
      check(r.usage && r.usage.completion_tokens === N_NEW, `request ${i} usage.completion_tokens`, JSON.stringify(r.usage));
      check(r.usage && r.usage.prompt_tokens === cli[i].promptTokens, `request ${i} usage.prompt_tokens equals run's`,
            `${r.usage?.prompt_tokens} vs ${cli[i].promptTokens}`);
      check(r.usage && r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, `request ${i} total_tokens`);
    });

    // Non-streamed completion with the extension object.
    const c = await client.completions.create({ model: id, prompt: PROMPTS[3], max_tokens: N_NEW, temperature: 0,
                                                vkvector: { press: 'keydiff', compression: 0.75, vector: true } });
    check(c.object === 'text_completion' && c.id.startsWith('cmpl-'), 'completion object and id', `${c.object} ${c.id}`);
    check(c.choices[0].text === cli[3].text, 'non-streamed compressed completion equals run',
          `${JSON.stringify(c.choices[0].text)} vs ${JSON.stringify(cli[3].text)}`);
    const x = c.vkvector;
    check(x && x.press === 'keydiff' && x.vector === true, 'the extension object names the press', JSON.stringify(x));
    if (x) {
      const total = x.n_retained + x.n_approximated + x.n_evicted;
      check(total > 0 && x.n_approximated > 0 && x.n_evicted > 0, 'tokens retained + approximated + evicted', JSON.stringify(x));
      // VECTOR at p_c 0.75 and its default p_a 0.125: evicted p_c - p_a, approximated 2 p_a
      // (docs/ARCHITECTURE.md §2), and about a quarter of the bytes.
      check(Math.abs(x.n_evicted / total - 0.625) < 0.05, 'about 62.5% evicted', JSON.stringify(x));
      check(Math.abs(x.n_approximated / total - 0.25) < 0.05, 'about 25% approximated', JSON.stringify(x));
      check(Math.abs(x.kv_bytes_after / x.kv_bytes_before - 0.25) < 0.05, 'about a quarter of the KV bytes', JSON.stringify(x));
    }

    // The prefix cache: a second prompt that starts with the first's document reuses its rows
    // (usage.prompt_tokens_details.cached_tokens, a multiple of 16) and still gives run's text.
    const doc = PROMPTS.join('\n\n'), second = `${doc}\n\nJULIET:\n`;
    const first = await client.completions.create({ model: id, prompt: `${doc}\n\nROMEO:\n`, max_tokens: 4, temperature: 0 });
    check(first.usage.prompt_tokens_details?.cached_tokens === 0, 'a new document: no cached tokens', JSON.stringify(first.usage));
    const [cached, secondCli] = await Promise.all([
      client.completions.create({ model: id, prompt: second, max_tokens: N_NEW, temperature: 0 }), runCli(second, N_NEW)]);
    const nCached = cached.usage.prompt_tokens_details?.cached_tokens;
    check(nCached > 0 && nCached % 16 === 0 && nCached < cached.usage.prompt_tokens,
          'a question about the same document reuses its rows', JSON.stringify(cached.usage));
    check(cached.choices[0].text === secondCli.text, 'a reused prefix gives run\'s text',
          `${JSON.stringify(cached.choices[0].text)} vs ${JSON.stringify(secondCli.text)}`);
    check(await metric(s.url, 'vkvector_prefix_cache_hits_total') >= nCached, 'the prefix cache hits metric');

    // The compressed-context cache: a chat's history before its last user turn, compressed by a
    // query-agnostic press, is kept; the next question about it takes it whole ("hit", its bytes
    // shared, its tokens cached); a query-aware press never reuses it, and says why.
    const press = { press: 'keydiff', compression: 0.75, vector: true };
    const history = [{ role: 'user', content: PROMPTS.slice(0, 2).join('\n\n') },
                     { role: 'assistant', content: 'I have read it.' }];
    const ask = (q, extra = {}) => client.chat.completions.create({
      model: id, messages: [...history, { role: 'user', content: q }], max_tokens: 4, temperature: 0,
      vkvector: { ...press, ...extra } });
    const q1 = await ask('Who speaks first?'), q2 = await ask('Who speaks last?');
    const cc1 = q1.vkvector?.context_cache, cc2 = q2.vkvector?.context_cache;
    check(cc1?.status === 'miss' && cc1.shared_bytes === 0 && q1.usage.prompt_tokens_details?.cached_tokens === 0,
          'a new chat history compresses: context_cache miss', JSON.stringify(q1.vkvector));
    check(cc2?.status === 'hit' && cc2.shared_bytes > 0 && cc2.reason === null &&
          q2.usage.prompt_tokens_details?.cached_tokens > 0 &&
          q2.usage.prompt_tokens_details.cached_tokens < q2.usage.prompt_tokens &&
          q2.vkvector.n_compressed === q1.vkvector.n_compressed && q2.vkvector.kv_bytes_after === q1.vkvector.kv_bytes_after,
          'the next question takes the compressed history: context_cache hit', JSON.stringify([q2.vkvector, q2.usage]));
    const qa = await ask('Who speaks last?', { query_aware: true });
    check(qa.vkvector?.context_cache?.status === 'not_reusable' && /query-aware/.test(qa.vkvector.context_cache.reason) &&
          qa.usage.prompt_tokens_details?.cached_tokens === 0,
          'a query-aware press reuses nothing and says why', JSON.stringify(qa.vkvector));
    check(await metric(s.url, 'vkvector_context_cache_hits_total') >= 1, 'the context cache hits metric');

    // Chat: the template's rendering, streamed and not, equals the same text as a completion prompt.
    const messages = [{ role: 'system', content: 'Speak as a Roman.' }, { role: 'user', content: 'Who comes here?' }];
    const chat = await client.chat.completions.create({ model: id, messages, max_tokens: 12, temperature: 0 });
    check(chat.object === 'chat.completion' && chat.id.startsWith('chatcmpl-'), 'chat.completion object', chat.object);
    check(chat.choices[0].message.role === 'assistant', 'assistant message');
    check(['length', 'stop'].includes(chat.choices[0].finish_reason), 'chat finish_reason', chat.choices[0].finish_reason);
    const chatml = '<|im_start|>system\nSpeak as a Roman.<|im_end|>\n<|im_start|>user\nWho comes here?<|im_end|>\n' +
                   '<|im_start|>assistant\n';
    const same = await client.completions.create({ model: id, prompt: chatml, max_tokens: 12, temperature: 0 });
    check(chat.choices[0].message.content === same.choices[0].text, 'chat renders ChatML (the fallback template)',
          `${JSON.stringify(chat.choices[0].message.content)} vs ${JSON.stringify(same.choices[0].text)}`);
    check(chat.usage.prompt_tokens === same.usage.prompt_tokens, 'chat usage.prompt_tokens', JSON.stringify(chat.usage));
    const chatStream = await collectStream(await client.chat.completions.create(
      { model: id, messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } }));
    check(chatStream.text === chat.choices[0].message.content, 'streamed chat equals the non-streamed one');
    check(chatStream.usage && chatStream.usage.completion_tokens === chat.usage.completion_tokens, 'streamed chat usage');

    // A stop sequence: generation ends before it, finish_reason stop.
    const full = cli[0].text, cut = full.indexOf(' ', 3);
    if (cut > 0) {
      const stopAt = full.slice(cut, cut + 3);
      const st = await client.completions.create({ model: id, prompt: PROMPTS[0], max_tokens: N_NEW, temperature: 0,
                                                   stop: [stopAt] });
      check(st.choices[0].text === full.slice(0, full.indexOf(stopAt)) && st.choices[0].finish_reason === 'stop',
            'a stop sequence ends the text before it', `${JSON.stringify(st.choices[0].text)} ${st.choices[0].finish_reason}`);
    }

    // The errors the client surfaces.
    const expectError = async (what, status, fn, test = () => true) => {
      try {
        await fn();
        check(false, `${what}: no error`);
      } catch (e) {
        check(e instanceof OpenAI.APIError && e.status === status && test(e), `${what}: HTTP ${status}`,
              `${e.status} ${e.message} param=${e.param} code=${e.code}`);
      }
    };
    await expectError('temperature out of range', 400,
                      () => client.completions.create({ model: id, prompt: 'a', temperature: 7 }), (e) => e.param === 'temperature');
    await expectError('n over --max-seqs', 400, () => client.completions.create({ model: id, prompt: 'a', n: 17 }),
                      (e) => e.param === 'n');
    // n choices share the prompt: at temperature 0 each is run's text (the plain prompt and the compressed one);
    // sampled, choice 0 is the n = 1 request's with the same seed and the others draw seeds of their own
    for (const k of [0, 1]) {
      const ext = pressOf(k).ext, body = { model: id, prompt: PROMPTS[k], max_tokens: N_NEW, temperature: 0, n: 3 };
      const nr = await client.completions.create(ext ? { ...body, vkvector: ext } : body);
      check(nr.choices.length === 3 && nr.choices.every((x, i) => x.index === i && x.text === cli[k].text) &&
            nr.usage.prompt_tokens === cli[k].promptTokens && nr.usage.completion_tokens === 3 * N_NEW,
            `n = 3 at temperature 0 (${ext ? 'keydiff' : 'plain'}): every choice is run's text`,
            JSON.stringify([nr.choices.map((x) => x.text), nr.usage]));
    }
    const sampled = { model: id, prompt: PROMPTS[2], max_tokens: N_NEW, temperature: 1, seed: 11 };
    const one = await client.completions.create(sampled);
    const four = await client.completions.create({ ...sampled, n: 4 });
    const texts = four.choices.map((x) => x.text);
    check(texts[0] === one.choices[0].text && new Set(texts).size > 1,
          'n = 4 sampled: choice 0 is the n = 1 text, the others differ', JSON.stringify([one.choices[0].text, texts]));
    // one model served: any name is taken, as llama-server takes it, and the answer carries that name
    const other = await client.completions.create({ model: 'gpt-4o', prompt: PROMPTS[0], max_tokens: N_NEW, temperature: 0 });
    check(other.model === 'gpt-4o' && other.choices[0].text === cli[0].text,
          'a request naming another model is served, under that name', `${other.model}: ${JSON.stringify(other.choices[0].text)}`);
    await expectError('a prompt over the context', 400,
                      () => client.completions.create({ model: id, prompt: 'the king '.repeat(600), max_tokens: 4 }),
                      (e) => e.code === 'context_length_exceeded');
    await expectError('an unknown press', 400,
                      () => client.completions.create({ model: id, prompt: 'a', vkvector: { press: 'nope', compression: 0.5 } }));
    const bad = await fetch(`${s.url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                         body: '{"model": "x", "prompt": ' });
    const badBody = await bad.json().catch(() => null);
    check(bad.status === 400 && badBody?.error?.type === 'invalid_request_error', 'malformed JSON: 400 error object',
          `${bad.status} ${JSON.stringify(badBody)}`);

    // A client that aborts mid-stream: its sequence leaves, the pool shrinks back.
    const before = await metric(s.url, 'vkvector_kv_pool_bytes_in_use');
    const ctl = new AbortController();
    const stream = await client.completions.create({ model: id, prompt: PROMPTS[5], max_tokens: 400, temperature: 0, stream: true },
                                                   { signal: ctl.signal });
    let got = 0;
    try {
      for await (const chunk of stream) { if (chunk.choices[0]?.text && ++got === 3) ctl.abort(); }
    } catch { /* the abort */ }
    let active = NaN, used = NaN;
    for (let t = 0; t < 50; t++) {
      await new Promise((r) => setTimeout(r, 100));
      active = await metric(s.url, 'vkvector_sequences_active');
      used = await metric(s.url, 'vkvector_kv_pool_bytes_in_use');
      if (active === 0 && used === before) break;
    }
    check(active === 0 && used === before, 'an aborted stream frees its sequence and its KV bytes', `active ${active}, used ${used} vs ${before}`);

    // llama-server's extension samplers, honoured: at temperature 1, top_k 1 and
    // min_p 1 each leave only the most likely token, so the text is greedy's.
    for (const extra of [{ top_k: 1 }, { min_p: 1 }]) {
      const r = await client.completions.create({ model: id, prompt: PROMPTS[0], max_tokens: N_NEW, temperature: 1, seed: 7,
                                                  ...extra });
      check(r.choices[0].text === cli[0].text, `${JSON.stringify(extra)} at temperature 1 gives greedy's text`,
            `${JSON.stringify(r.choices[0].text)} vs ${JSON.stringify(cli[0].text)}`);
    }

    // The bounded load test.
    const load = await execFileP('node', [`${repo}/tools/serve_load.mjs`, '--url', s.url, '--requests', '16', '--concurrency', '8',
                                          '--max-tokens', '8'], { maxBuffer: 1 << 20 }).catch((e) => e);
    console.log(load.stdout);
    check(!load.code, 'tools/serve_load.mjs: every response complete, nothing errored', load.stderr);

    const allocations = await metric(s.url, 'vkvector_device_allocations_total');
    check(allocationsAtStart > 0 && allocations === allocationsAtStart,
          'no device allocation after start, through every request above (the pool is allocated once)',
          `${allocationsAtStart} at start, ${allocations} now`);
  } finally {
    const { code, signal } = await stopServer(s);
    // a server that died on its own says how, with the end of its log
    check(code === 0, 'SIGTERM with nothing running: exit 0', `${code} ${signal}\n${s.log().slice(-4000)}`);
  }

  // An API key, one sequence, a queue of one: 401 and 429.
  const k = await startServer(['--api-key', 'sesame', '--max-seqs', '1', '--queue', '1', '--ctx', '512']);
  try {
    const noKey = new OpenAI({ baseURL: `${k.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await noKey.models.list().then(() => check(false, 'a wrong key: no error'),
                                   (e) => check(e.status === 401, 'a wrong key: 401', `${e.status}`));
    const propsNoKey = await fetch(`${k.url}/props`);
    check(propsNoKey.status === 401, 'GET /props without the key: 401', String(propsNoKey.status));
    const kc = new OpenAI({ baseURL: `${k.url}/v1`, apiKey: 'sesame', maxRetries: 0 });
    const long = () => kc.completions.create({ model: 'vkvector-shakespeare', prompt: PROMPTS[2], max_tokens: 64, temperature: 0 });
    const first = long();
    await new Promise((r) => setTimeout(r, 300));
    const second = long();
    await new Promise((r) => setTimeout(r, 300));
    const raw = await fetch(`${k.url}/v1/completions`, { method: 'POST',
                                                        headers: { 'Content-Type': 'application/json', Authorization: 'Bearer sesame' },
                                                        body: JSON.stringify({ model: 'vkvector-shakespeare', prompt: 'x', max_tokens: 4 }) });
    check(raw.status === 429 && raw.headers.get('retry-after') !== null, 'a full queue: 429 with Retry-After',
          `${raw.status} ${raw.headers.get('retry-after')}`);
    await Promise.all([first, second]);

    // SIGTERM while a stream runs: the stream ends cleanly, exit 0.
    const stream = await kc.completions.create({ model: 'vkvector-shakespeare', prompt: PROMPTS[4], max_tokens: 200,
                                                temperature: 0, stream: true });
    let n = 0, finished = null, threw = null;
    try {
      for await (const chunk of stream) {
        if (++n === 2) k.proc.kill('SIGTERM');
        if (chunk.choices[0]?.finish_reason) finished = chunk.choices[0].finish_reason;
      }
    } catch (e) { threw = e; }
    check(!threw && finished !== null, 'SIGTERM mid-stream: the stream ends with a finish_reason', String(threw || finished));
  } finally {
    // one SIGTERM was sent (a second would cut the streams): wait, with a bound
    const bound = setTimeout(() => k.proc.kill('SIGKILL'), 60000);
    if (k.proc.exitCode === null && k.proc.signalCode === null && !k.proc.killed) k.proc.kill('SIGTERM');
    const { code } = await k.exited;
    clearTimeout(bound);
    check(code === 0, 'SIGTERM mid-stream: exit 0', `${code}\n${k.log().slice(-2000)}`);
  }

  // Two stop signals: the first lets the running stream finish, the second
  // ends the process at once with 128 + SIGTERM's number, the stream cut.
  const d = await startServer(['--max-seqs', '2', '--ctx', '512']);
  try {
    const dc = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const stream = await dc.completions.create({ model: 'vkvector-shakespeare', prompt: PROMPTS[5], max_tokens: 400,
                                                temperature: 0, stream: true });
    let n = 0, finished = null;
    try {
      for await (const chunk of stream) {
        if (++n === 2) {
          d.proc.kill('SIGTERM');
          setTimeout(() => d.proc.kill('SIGTERM'), 200);
        }
        if (chunk.choices[0]?.finish_reason) finished = chunk.choices[0].finish_reason;
      }
    } catch { /* the connection cut: what a second signal does */ }
    const { code } = await d.exited;
    check(code === 143 && finished === null, 'a second SIGTERM: exit 143 at once, the stream cut before its end',
          `exit ${code}, finish_reason ${finished}, ${n} chunks\n${d.log().slice(-600)}`);
    check(/a second stop signal/.test(d.log()), 'a second SIGTERM: the log says so', d.log().slice(-600));
  } finally {
    if (d.proc.exitCode === null) d.proc.kill('SIGKILL');
  }

  // A device fault (injected: decoding steps 3 and 40 fail as a lost device
  // would): the request it hits fails with a 500 error object, streamed or
  // not; the server goes on serving; /metrics counts the failures.
  const f = await startServer(['--max-seqs', '4', '--ctx', '512'], { VKVECTOR_SERVE_FAULT: 'decode:3,40' });
  try {
    const fc = new OpenAI({ baseURL: `${f.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    let got = 0, err = null;
    try {
      const st = await fc.completions.create({ model: 'vkvector-shakespeare', prompt: PROMPTS[6], max_tokens: 16,
                                               temperature: 0, stream: true });
      for await (const chunk of st) if (chunk.choices[0]?.text) got++;
    } catch (e) { err = e; }
    check(err instanceof OpenAI.APIError && got >= 1 && /VKVECTOR_SERVE_FAULT/.test(err.message),
          'a device fault mid-stream: the stream ends with the error', `${got} chunks, ${err?.status} ${err?.message}`);
    const ok = await fc.completions.create({ model: 'vkvector-shakespeare', prompt: PROMPTS[6], max_tokens: 16, temperature: 0 });
    check(ok.choices[0].finish_reason === 'length', 'the server serves on after a fault', JSON.stringify(ok.choices[0]));
    await fc.completions.create({ model: 'vkvector-shakespeare', prompt: PROMPTS[7], max_tokens: 40, temperature: 0 }).then(
      () => check(false, 'a device fault in a request not streamed: no error'),
      (e) => check(e instanceof OpenAI.InternalServerError && e.type === 'server_error',
                   'a device fault in a request not streamed: 500, server_error', `${e.status} ${e.type} ${e.message}`));
    const failed = await metric(f.url, 'vkvector_requests_total\\{outcome="failed"\\}');
    check(failed === 2, 'metrics count both failures', String(failed));
    const length = await metric(f.url, 'vkvector_requests_total\\{outcome="length"\\}');
    const invalid = await metric(f.url, 'vkvector_requests_total\\{outcome="invalid"\\}');
    check(length === 1 && invalid === 0, 'metrics count the one request that ran to its length, none invalid',
          `length ${length}, invalid ${invalid}`);
  } finally {
    const { code } = await stopServer(f);
    check(code === 0, 'after device faults, SIGTERM: exit 0', String(code));
  }

  // A fault in a prefill forward (injected: the second fails). The first
  // request's prompt is forward 1; three more are sent once it streams, so
  // forward 2 holds one or more of them (as many as arrived together, in one
  // shared forward): each request it held fails with a 500 error object
  // naming the fault, every other one runs to its length, and /metrics and
  // the log count each failure once.
  const pf = await startServer(['--max-seqs', '4', '--ctx', '512'], { VKVECTOR_SERVE_FAULT: 'prefill:2' });
  try {
    const pc = new OpenAI({ baseURL: `${pf.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const first = await pc.completions.create({ model: 'vkvector-shakespeare', prompt: PROMPTS[0], max_tokens: 40,
                                                temperature: 0, stream: true });
    const it = first[Symbol.asyncIterator]();
    await it.next(); // its prompt is in: forward 1 is done
    const rest = await Promise.all([1, 2, 3].map((i) =>
      pc.completions.create({ model: 'vkvector-shakespeare', prompt: PROMPTS[i], max_tokens: 8, temperature: 0 })
        .then((r) => ({ ok: r }), (e) => ({ err: e }))));
    let finish = null;
    for (let x = await it.next(); !x.done; x = await it.next()) finish = x.value.choices[0]?.finish_reason ?? finish;
    check(finish === 'length', 'a prefill fault: the stream whose prompt was in before it runs to its length', String(finish));
    const failedRest = rest.filter((r) => r.err);
    check(failedRest.length >= 1 && failedRest.every((r) => r.err instanceof OpenAI.InternalServerError &&
                                                       r.err.type === 'server_error' && /VKVECTOR_SERVE_FAULT/.test(r.err.message)),
          'a prefill fault: the requests of the failed forward get 500 server_error naming it',
          rest.map((r) => (r.err ? `${r.err.status} ${r.err.message}` : 'ok')).join('; '));
    check(rest.filter((r) => r.ok).every((r) => r.ok.choices[0].finish_reason === 'length'),
          'a prefill fault: the requests after it run to their length', JSON.stringify(rest.map((r) => r.ok?.choices[0])));
    const failed = await metric(pf.url, 'vkvector_requests_total\\{outcome="failed"\\}');
    const logged = (pf.log().match(/prefill failed: prefill forward 2 failed/g) || []).length;
    check(failed === failedRest.length && logged === failedRest.length,
          'a prefill fault: metrics and the log count each failed request once',
          `${failedRest.length} failed, metrics ${failed}, log ${logged}`);
  } finally {
    const { code } = await stopServer(pf);
    check(code === 0, 'after a prefill fault, SIGTERM: exit 0', String(code));
  }

  finish();
}

main().catch((e) => { console.error(`serve_openai: FAIL: ${e.stack || e}`); process.exit(1); });
