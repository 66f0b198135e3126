// OpenAI's request fields on `vkvector serve` (the default model, lavapipe),
// through OpenAI's official Node client (docs/SERVE.md, "Request fields"):
//   - logprobs: chat's logprobs/top_logprobs and completions' logprobs N, in
//     OpenAI's shapes, streamed and not (the same numbers either way), the
//     greedy token the most likely one;
//   - echo with logprobs and max_tokens 0 (what evaluation harnesses send):
//     the prompt's per-token log-probabilities equal `vkvector perplexity
//     --token-logprobs` on the same ids, to 1e-4;
//   - presence_penalty / frequency_penalty: a token greedy decoding repeats
//     is repeated less with them;
//   - logit_bias: -100 bans the greedy token, +100 forces a token;
//   - seed: the same seed gives the same tokens alone and beside other
//     requests, and as choice 0 of n = 2 (each choice with its logprobs);
//   - response_format: json_object and json_schema (a zod schema through the
//     client's parse helper: enums, integers, booleans, nullable, arrays,
//     nested objects), at temperature 0 and 1, with and without compression:
//     every output parses and validates; a keyword outside the subset is
//     refused by name;
//   - every OpenAI field the server does not honour is refused with a 400
//     whose param names it;
//   - the server's sampling defaults (--temp ...) and --alias, through the client;
//   - the vLLM-style metrics (TTFT, inter-token and end-to-end histograms,
//     token counters, running and waiting requests, KV pool use) add up.
//
//   node serve_fields.mjs VKVECTOR MODEL
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { checker, startServer as start } from './serve_common.mjs';

const [vkv, model] = process.argv.slice(2);
const execFileP = promisify(execFile);
const { check, finish } = checker('serve_fields');
const startServer = (args) => start(vkv, model, ['--quiet', ...args]);

async function collectChat(stream) {
  let text = '';
  const content = [];
  for await (const chunk of stream)
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      if (c.logprobs?.content) content.push(...c.logprobs.content);
    }
  return { text, content };
}

const PROMPT = 'ROMEO:\nBut soft, what light through yonder window breaks?';

// The refused fields, each with a value that asks for what the server does not do.
const REFUSED_CHAT = {
  tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }],
  tool_choice: 'required',
  parallel_tool_calls: true,
  functions: [{ name: 'f', parameters: { type: 'object', properties: {} } }],
  function_call: 'auto',
  audio: { voice: 'alloy', format: 'wav' },
  modalities: ['text', 'audio'],
  prediction: { type: 'content', content: 'x' },
  web_search_options: {},
  reasoning_effort: 'high',
  verbosity: 'low',
  service_tier: 'flex',
  store: true,
  metadata: { k: 'v' },
  n: 129,
};
const REFUSED_COMPLETIONS = { suffix: ' and so on', best_of: 3, n: 0 };

async function refusedWith(fn, param) {
  try {
    await fn();
    return `accepted (wanted a 400 naming ${param})`;
  } catch (e) {
    if (e?.status === 400 && e?.param === param) return null;
    return `${e?.status} param ${e?.param}: ${e?.message}`;
  }
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'vkv-fields-'));
  const s = await startServer(['--ctx', '512', '--max-seqs', '8']);
  const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const tokenize = async (content) => (await (await fetch(`${s.url}/tokenize`, { method: 'POST',
    body: JSON.stringify({ content }) })).json()).tokens;
  try {
    const messages = [{ role: 'user', content: PROMPT }];
    // ---- logprobs, chat ----
    const whole = await client.chat.completions.create({ model: 'm', messages, max_tokens: 12, temperature: 0,
                                                         logprobs: true, top_logprobs: 3 });
    const lc = whole.choices[0].logprobs?.content ?? [];
    check(lc.length === whole.usage.completion_tokens, 'chat logprobs: one entry per generated token',
          `${lc.length} vs ${whole.usage.completion_tokens}`);
    check(lc.every((t) => typeof t.token === 'string' && t.logprob <= 0 && Array.isArray(t.bytes) &&
                          t.top_logprobs.length === 3 && t.top_logprobs[0].logprob >= t.top_logprobs[2].logprob),
          'chat logprobs: token, logprob <= 0, bytes and 3 alternatives, most likely first', JSON.stringify(lc[0]));
    check(lc.every((t) => t.top_logprobs[0].token === t.token && Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6),
          'greedy picks the most likely token, whose logprob the entry carries');
    check(Buffer.concat(lc.map((t) => Buffer.from(t.bytes))).toString('utf8') === whole.choices[0].message.content,
          'the tokens\' bytes spell the content', JSON.stringify(whole.choices[0].message.content));
    const streamed = await collectChat(await client.chat.completions.create({ model: 'm', messages, max_tokens: 12,
      temperature: 0, logprobs: true, top_logprobs: 3, stream: true }));
    check(streamed.text === whole.choices[0].message.content && streamed.content.length === lc.length &&
          streamed.content.every((t, i) => t.token === lc[i].token && t.logprob === lc[i].logprob),
          'streamed logprobs equal the whole response\'s', `${streamed.content.length} entries`);
    const none = await client.chat.completions.create({ model: 'm', messages, max_tokens: 2, temperature: 0 });
    check(none.choices[0].logprobs === null, 'without logprobs: null', JSON.stringify(none.choices[0].logprobs));

    // ---- logprobs, completions ----
    const comp = await client.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 10, temperature: 0, logprobs: 2 });
    const cl = comp.choices[0].logprobs;
    check(cl && cl.tokens.length === comp.usage.completion_tokens && cl.token_logprobs.length === cl.tokens.length &&
          cl.top_logprobs.every((d) => Object.keys(d).length <= 2) &&
          cl.text_offset[0] === Buffer.byteLength(PROMPT) && cl.tokens.join('') === comp.choices[0].text,
          'completions logprobs: tokens, token_logprobs, top_logprobs (2), text_offset from the prompt\'s end',
          JSON.stringify(cl));

    // ---- echo + logprobs + max_tokens 0 against vkvector perplexity ----
    const text = 'KING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close the wall up with our ' +
                 'English dead.\nIn peace there\'s nothing so becomes a man\nAs modest stillness and humility.\n';
    writeFileSync(join(dir, 'text.txt'), text);
    const ctx = 64;
    await execFileP(vkv, ['perplexity', '-m', model, '--text', join(dir, 'text.txt'), '--ctx', String(ctx),
                          '--max-windows', '1', '--kv-type', 'f16', '--token-logprobs', join(dir, 'lp.jsonl')]);
    const ref = JSON.parse(readFileSync(join(dir, 'lp.jsonl'), 'utf8').split('\n')[0]);
    const echo = await client.completions.create({ model: 'm', prompt: ref.ids, max_tokens: 0, echo: true, logprobs: 1 });
    const el = echo.choices[0].logprobs;
    let worst = 0;
    if (el && el.token_logprobs.length === ref.ids.length)
      for (let i = 1; i < ref.ids.length; i++) worst = Math.max(worst, Math.abs(el.token_logprobs[i] - ref.logprobs[i]));
    else worst = Infinity;
    console.log(`serve_fields: echo logprobs of ${ref.ids.length} tokens vs vkvector perplexity: largest difference ` +
                `${worst.toExponential(2)}`);
    check(worst <= 1e-4 && el.token_logprobs[0] === null && el.top_logprobs[0] === null,
          `echo logprobs equal vkvector perplexity's (${ctx} tokens, largest difference ${worst.toExponential(2)})`,
          JSON.stringify(el?.token_logprobs?.slice(0, 4)));
    check(echo.usage.completion_tokens === 0 && echo.choices[0].finish_reason === 'length' &&
          echo.usage.prompt_tokens === ref.ids.length, 'max_tokens 0: nothing generated', JSON.stringify(echo.usage));
    check(echo.choices[0].text === el?.tokens.slice(1).join(''), 'echo returns the prompt\'s text',
          JSON.stringify(echo.choices[0].text));
    // echo and one generated token (lm-evaluation-harness's local-completions): the prompt's logprobs, then its
    const echo1 = await client.completions.create({ model: 'm', prompt: ref.ids, max_tokens: 1, echo: true, logprobs: 1,
                                                    temperature: 0 });
    const e1 = echo1.choices[0].logprobs;
    check(e1 && e1.token_logprobs.length === ref.ids.length + 1 &&
          e1.token_logprobs.slice(0, -1).every((v, i) => v === el.token_logprobs[i]),
          'echo with one generated token: the prompt\'s logprobs, then the token\'s', JSON.stringify(e1?.token_logprobs?.slice(-3)));
    const echoText = await client.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 4, echo: true, temperature: 0 });
    check(echoText.choices[0].text.startsWith(PROMPT) && echoText.choices[0].text.length > PROMPT.length,
          'echo without logprobs: the prompt, then the completion', JSON.stringify(echoText.choices[0].text));

    // ---- penalties ----
    const repeat = await client.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 40, temperature: 0, logprobs: 0 });
    const counts = (toks) => toks.reduce((m, t) => m.set(t, (m.get(t) ?? 0) + 1), new Map());
    const plainCounts = counts(repeat.choices[0].logprobs.tokens);
    const [top, topN] = [...plainCounts].sort((a, b) => b[1] - a[1])[0];
    check(topN >= 3, 'greedy decoding repeats a token', `${JSON.stringify(top)} x${topN}`);
    for (const [name, value] of [['frequency_penalty', 2], ['presence_penalty', 2]]) {
      const pen = await client.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 40, temperature: 0, logprobs: 0,
                                                    [name]: value });
      const n = counts(pen.choices[0].logprobs.tokens).get(top) ?? 0;
      check(n < topN, `${name} ${value}: the repeated token ${JSON.stringify(top)} comes fewer times`, `${n} vs ${topN}`);
    }

    // ---- logit_bias ----
    const first = repeat.choices[0].logprobs.tokens[0];
    const firstId = (await tokenize(first))[0];
    const banned = await client.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 1, temperature: 0, logprobs: 0,
                                                     logit_bias: { [firstId]: -100 } });
    check(banned.choices[0].logprobs.tokens[0] !== first, 'logit_bias -100 bans the greedy token',
          JSON.stringify(banned.choices[0].text));
    const forcedId = (await tokenize('z'))[0];
    const forced = await client.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 6, temperature: 1, seed: 3,
                                                     logit_bias: { [forcedId]: 100 } });
    check(forced.choices[0].text === 'z'.repeat(6), 'logit_bias +100 forces the token at temperature 1',
          JSON.stringify(forced.choices[0].text));
    const outside = await refusedWith(() => client.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 1,
                                                                        logit_bias: { 100000: 1 } }), 'logit_bias');
    check(!outside, 'logit_bias naming a token outside the vocabulary: 400', outside);

    // ---- seed: the same tokens alone and beside other requests ----
    const seeded = { model: 'm', prompt: PROMPT, max_tokens: 24, temperature: 1, seed: 1234 };
    const alone = (await client.completions.create(seeded)).choices[0].text;
    const crowd = await Promise.all([seeded, ...[1, 2, 3, 4, 5].map((i) => ({ ...seeded, seed: i, prompt: `${PROMPT} ${i}`,
                                                                              max_tokens: 10 + 4 * i }))]
      .map((b) => client.completions.create(b)));
    check(crowd[0].choices[0].text === alone, 'seed 1234 gives the same tokens beside 5 other requests',
          `${JSON.stringify(crowd[0].choices[0].text)} vs ${JSON.stringify(alone)}`);
    const again = (await client.chat.completions.create({ model: 'm', messages, max_tokens: 16, temperature: 1, seed: 99 }))
      .choices[0].message.content;
    const [again2] = await Promise.all([
      client.chat.completions.create({ model: 'm', messages, max_tokens: 16, temperature: 1, seed: 99 }),
      client.chat.completions.create({ model: 'm', messages, max_tokens: 16, temperature: 1, seed: 7 })]);
    check(again2.choices[0].message.content === again, 'chat: seed 99 gives the same tokens beside another request');
    // n: each choice its own logprobs, choice 0 the n = 1 answer with the same seed (the metrics below count the
    // request once: one time to first token, the other choice's first token an inter-token gap)
    const two = await client.chat.completions.create({ model: 'm', messages, max_tokens: 16, temperature: 1, seed: 99,
                                                      n: 2, logprobs: true, top_logprobs: 2 });
    check(two.choices.length === 2 && two.choices[0].message.content === again &&
          two.choices.every((c, i) => c.index === i && c.logprobs?.content?.length > 0 &&
                            c.logprobs.content.map((t) => t.token).join('') === c.message.content),
          'n = 2 with logprobs: each choice its tokens, choice 0 the n = 1 answer', JSON.stringify(two.choices));

    // ---- structured outputs ----
    const Color = z.enum(['red', 'green', 'blue']);
    const Reply = z.object({
      mood: z.enum(['happy', 'sad', 'wroth']), count: z.number().int(), ok: z.boolean(), tag: Color.nullable(),
      colors: z.array(Color).max(3), where: z.object({ act: z.number().int().min(1).max(5), scene: z.number() }),
    });
    const format = zodResponseFormat(Reply, 'reply');
    const settings = [{ temperature: 0 }, { temperature: 1, seed: 1 }, { temperature: 1, seed: 2 },
                      { temperature: 1, seed: 3, vkvector: { press: 'keydiff', compression: 0.75 } },
                      { temperature: 0, vkvector: { press: 'keydiff', compression: 0.75, vector: true } }];
    const parsed = await Promise.all(settings.map((extra) => client.chat.completions.parse({
      model: 'm', messages: [{ role: 'user', content: 'Answer in JSON: how fares the king?' }], max_tokens: 400,
      response_format: format, ...extra }).then((r) => ({ r }), (e) => ({ e }))));
    parsed.forEach(({ r, e }, i) => {
      const what = `json_schema (zod) with ${JSON.stringify(settings[i])}`;
      check(!e && r.choices[0].finish_reason === 'stop' && Reply.safeParse(r.choices[0].message.parsed).success,
            `${what}: the output parses and validates`, e ? `${e.constructor.name}: ${e.message}` :
              JSON.stringify(r.choices[0].message.content));
    });
    console.log(`serve_fields: a structured output: ${parsed[0].r?.choices[0].message.content.replace(/\s+/g, ' ')}`);
    const jsonMode = await Promise.all([0, 1, 2].map((seed) => client.chat.completions.create({ model: 'm', messages,
      max_tokens: 300, temperature: 1.2, seed, response_format: { type: 'json_object' } })));
    jsonMode.forEach((r, i) => {
      let ok = false;
      try {
        const v = JSON.parse(r.choices[0].message.content);
        ok = typeof v === 'object' && v !== null && !Array.isArray(v);
      } catch { /* not JSON */ }
      check(r.choices[0].finish_reason === 'length' || ok, `json_object (seed ${i}): a finished output is a JSON object`,
            JSON.stringify(r.choices[0].message.content));
    });
    const completed = await client.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 200, temperature: 0,
      response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'array', items: { type: 'boolean' },
                                                                                   maxItems: 4 } } } });
    let arr = null;
    try { arr = JSON.parse(completed.choices[0].text); } catch { /* checked below */ }
    check(Array.isArray(arr) && arr.length <= 4 && arr.every((b) => typeof b === 'boolean'),
          'completions take response_format too (llama-server\'s extension)', JSON.stringify(completed.choices[0].text));
    for (const [schema, param] of [[{ type: 'string', pattern: 'a+' }, 'response_format.json_schema.schema.pattern'],
      [{ type: 'object', properties: { a: { type: 'integer', multipleOf: 2 } } },
        'response_format.json_schema.schema.properties.a.multipleOf'],
      [{ oneOf: [{ type: 'null' }] }, 'response_format.json_schema.schema.oneOf']]) {
      const why = await refusedWith(() => client.chat.completions.create({ model: 'm', messages, max_tokens: 4,
        response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } }), param);
      check(!why, `a schema keyword outside the subset is refused by name (${param})`, why);
    }

    // ---- refused fields ----
    for (const [field, value] of Object.entries(REFUSED_CHAT)) {
      const why = await refusedWith(() => client.chat.completions.create({ model: 'm', messages, max_tokens: 1,
                                                                           [field]: value }), field);
      check(!why, `chat ${field}: 400 naming it`, why);
    }
    for (const [field, value] of Object.entries(REFUSED_COMPLETIONS)) {
      const why = await refusedWith(() => client.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 1,
                                                                      [field]: value }), field);
      check(!why, `completions ${field}: 400 naming it`, why);
    }
    const image = await refusedWith(() => client.chat.completions.create({ model: 'm', max_tokens: 1, messages: [{
      role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }] }),
    'messages.[0].content.[0].type');
    check(!image, 'an image content part: 400 naming it', image);
    const noOps = await client.chat.completions.create({ model: 'm', messages, max_tokens: 1, store: false,
      tool_choice: 'none', modalities: ['text'], service_tier: 'auto', user: 'u1' });
    check(noOps.choices.length === 1, 'fields whose values ask for nothing are accepted');
    const zero = await refusedWith(() => client.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 0 }), 'max_tokens');
    check(!zero, 'max_tokens 0 without echo: 400', zero);

    // ---- vLLM-style metrics: the histograms a dashboard reads, consistent with what ran ----
    const prom = await (await fetch(`${s.url}/metrics`)).text();
    const value = (name) => Number(prom.match(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm'))?.[1] ?? NaN);
    const buckets = (name) => [...prom.matchAll(new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\d+)$`, 'gm'))]
      .map((m) => Number(m[2]));
    const generated = value('vkvector:generation_tokens_total');
    const requestsDone = value('vkvector:request_success_total\\{finished_reason="stop"\\}') +
                         value('vkvector:request_success_total\\{finished_reason="length"\\}');
    const ttft = value('vkvector:time_to_first_token_seconds_count'), itl = value('vkvector:inter_token_latency_seconds_count');
    const e2e = value('vkvector:e2e_request_latency_seconds_count');
    check(generated > 0 && ttft + itl === generated, 'every generated token is a first token or an inter-token gap',
          `${ttft} + ${itl} vs ${generated}`);
    check(e2e === requestsDone && e2e >= ttft, 'an end-to-end latency per request that ran', `${e2e} vs ${requestsDone}`);
    for (const h of ['time_to_first_token_seconds', 'inter_token_latency_seconds', 'e2e_request_latency_seconds']) {
      const b = buckets(`vkvector:${h}`);
      check(b.length > 10 && b.every((v, i) => !i || v >= b[i - 1]) && b[b.length - 1] === value(`vkvector:${h}_count`) &&
            value(`vkvector:${h}_sum`) > 0, `vkvector:${h}: cumulative buckets ending at the count`, JSON.stringify(b));
    }
    const usage = value('vkvector:kv_cache_usage_perc');
    check(usage >= 0 && usage <= 1 && value('vkvector:num_requests_running') === 0 &&
          value('vkvector:num_requests_waiting') === 0 && value('vkvector:prompt_tokens_total') > 0,
          'running and waiting requests, prompt tokens and the KV pool\'s use as a fraction', `${usage}`);
  } finally {
    s.proc.kill('SIGTERM');
    await s.exited;
  }
  // ---- the server's own sampling defaults: reported by /props, printed at start, taken by requests ----
  const g = await startServer(['--ctx', '256', '--temp', '0', '--top-k', '5', '--presence-penalty', '0.5',
                               '--alias', 'vk-a,vk-b']);
  try {
    const gc = new OpenAI({ baseURL: `${g.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const props = await (await fetch(`${g.url}/props`)).json();
    const p = props.default_generation_settings?.params ?? {};
    check(p.temperature === 0 && p.top_k === 5 && p.presence_penalty === 0.5 && p.top_p === 1,
          '/props reports the server\'s sampling defaults', JSON.stringify(p));
    await new Promise((r) => setTimeout(r, 200));
    check(/leave sampling fields out get temperature 0, top_p 1, top_k 5/.test(g.log()),
          'the start line says the sampling defaults are not OpenAI\'s', g.log());
    const dflt = await gc.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 12 });
    const greedy = await gc.completions.create({ model: 'm', prompt: PROMPT, max_tokens: 12, temperature: 0 });
    check(dflt.choices[0].text === greedy.choices[0].text, 'a request without temperature takes the server\'s 0',
          `${JSON.stringify(dflt.choices[0].text)} vs ${JSON.stringify(greedy.choices[0].text)}`);
    // --alias: the ids the client lists; any name is served and answered under it
    const ids = (await gc.models.list()).data.map((m) => m.id);
    check(JSON.stringify(ids) === '["vk-a","vk-b"]', '--alias sets the ids /v1/models lists', JSON.stringify(ids));
    const ask = [{ role: 'user', content: PROMPT }];
    const named = await gc.chat.completions.create({ model: 'vk-b', messages: ask, max_tokens: 2 });
    const other = await gc.chat.completions.create({ model: 'gpt-4o', messages: ask, max_tokens: 2 });
    check(named.model === 'vk-b' && other.model === 'gpt-4o', 'a request is answered under the name it gave',
          `${named.model} ${other.model}`);
  } finally {
    g.proc.kill('SIGTERM');
    await g.exited;
    rmSync(dir, { recursive: true, force: true });
  }
  finish();
}

main().catch((e) => {
  console.error(`serve_fields: FAIL: ${e.stack ?? e}`);
  process.exit(1);
});
