#!/usr/bin/env node
// How much a huge prompt arriving holds up running streams: one stream
// generates while, after its first tokens, a request with a prompt of
// --mib MiB of text (longer than any context: the server tokenizes it, then
// refuses it) arrives. Prints, as each lands, the stream's inter-token
// latency before the big request (p50, max), while it is being read and
// tokenized (the largest gap), and the big request's answer time.
// docs/SERVE.md, "How it works", says where tokenization runs.
// Node's own fetch only (Node 18+).
//
//   node tools/serve_stall.mjs --url http://127.0.0.1:8080 [--mib 4] [--max-tokens 120] [--rounds 3]
//
// The server needs --max-body above the big body (4 MiB of text is a body of
// a little more: give --max-body 8388608).

function parseArgs(argv) {
  const o = { url: 'http://127.0.0.1:8080', mib: 4, maxTokens: 120, rounds: 3 };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i], v = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--url') o.url = v();
    else if (a === '--mib') o.mib = Number(v());
    else if (a === '--max-tokens') o.maxTokens = Number(v());
    else if (a === '--rounds') o.rounds = Number(v());
    else throw new Error(`unknown option ${a} (see the header of tools/serve_stall.mjs)`);
  }
  if (!(o.mib > 0) || !(o.maxTokens >= 40) || !(o.rounds >= 1)) throw new Error('--mib > 0, --max-tokens >= 40, --rounds >= 1');
  return o;
}

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];

// One stream's token arrival times (ms), and a callback after its `at`-th chunk.
async function stream(url, maxTokens, at, onAt) {
  const r = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'ROMEO:\nWhat light through yonder window breaks?', max_tokens: maxTokens,
                           temperature: 0, stream: true }) });
  if (!r.ok) throw new Error(`the stream got ${r.status}: ${await r.text()}`);
  const times = [];
  const dec = new TextDecoder();
  let buf = '';
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true });
    let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, k);
      buf = buf.slice(k + 2);
      if (!ev.startsWith('data: {')) continue;
      times.push(performance.now());
      if (times.length === at) onAt();
    }
  }
  return times;
}

async function main() {
  const o = parseArgs(process.argv);
  const big = JSON.stringify({ prompt: 'To be, or not to be, that is the question. '.repeat(Math.ceil(o.mib * 1048576 / 44))
    .slice(0, o.mib * 1048576), max_tokens: 1 });
  console.log(`round  itl p50 ms  itl max before ms  largest gap with the big prompt ms  big request answered after ms (status)`);
  for (let round = 0; round < o.rounds; round++) {
    let bigStart = 0, bigEnd = 0, bigStatus = 0;
    let bigDone = null;
    const times = await stream(o.url, o.maxTokens, 20, () => {
      bigStart = performance.now();
      bigDone = fetch(`${o.url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: big })
        .then(async (r) => { bigStatus = r.status; await r.text(); bigEnd = performance.now(); });
    });
    await bigDone;
    const gaps = times.slice(1).map((t, i) => ({ t, gap: t - times[i] }));
    const before = gaps.filter((g) => g.t < bigStart).map((g) => g.gap);
    const during = gaps.filter((g) => g.t >= bigStart && g.t - g.gap <= bigEnd).map((g) => g.gap);
    console.log(`${String(round).padStart(5)}  ${pct(before, 0.5).toFixed(1).padStart(10)}  ` +
                `${Math.max(...before).toFixed(1).padStart(17)}  ${(during.length ? Math.max(...during) : NaN).toFixed(1).padStart(34)}  ` +
                `${(bigEnd - bigStart).toFixed(0).padStart(29)} (${bigStatus})`);
  }
}

main().catch((e) => {
  console.error(`serve_stall: ${e.message}`);
  process.exit(1);
});
