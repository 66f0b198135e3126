// What the `vkvector serve` tests through OpenAI's Node client share
// (serve_openai.mjs, serve_fields.mjs): a tally of checks that says each
// failure as it happens, and a server started on a free port.
import { spawn } from 'node:child_process';

// check(cond, what, detail) counts and prints "NAME: FAIL: what: detail";
// finish() prints the tally and exits 1 when any failed.
export function checker(name) {
  let failures = 0, checks = 0;
  return {
    check(cond, what, detail = '') {
      checks++;
      if (cond) return;
      failures++;
      console.error(`${name}: FAIL: ${what}${detail ? `: ${detail}` : ''}`);
    },
    finish() {
      console.log(`${name}: ${checks - failures}/${checks} checks passed`);
      process.exit(failures ? 1 : 0);
    },
  };
}

// `VKV serve -m MODEL --port 0 ARGS` with env added; resolves with {proc,
// url, exited, log} once it listens (log() is the whole stderr so far: checks
// read what the server says later).
export function startServer(vkv, model, args, env = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(vkv, ['serve', '-m', model, '--port', '0', ...args],
                       { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let log = '';
    const exited = new Promise((r) => proc.on('exit', (code, signal) => r({ code, signal })));
    let listening = false;
    proc.stderr.on('data', (d) => {
      log += d;
      const m = !listening && log.match(/listening on (http:\/\/[^\s]+)/);
      if (m) { listening = true; resolve({ proc, url: m[1], exited, log: () => log }); }
    });
    proc.stdout.on('data', () => {});
    proc.on('exit', (code) => reject(new Error(`vkvector serve exited (${code}) before listening:\n${log}`)));
  });
}
