#!/usr/bin/env python3
"""vkvector's generated RULER samples against RULER's own scripts, sample by
sample (docs/ARCHITECTURE.md §5, RULER).

    /usr/bin/python3 tools/ruler_compare.py --ruler-repo RULER_GIT [options]

RULER's late-2024 scripts (commit e40fae1 by default: the version that made
kvpress's rows) are taken from a clone of RULER (a bare one will do) into a
scratch folder and run as kvpress generated its rows: prepare.py per task,
the base template, a Hugging Face tokenizer, RULER's seed 42. Their rows are
cut into kvpress's context / question / answer prefix, and vkvector writes
its own with `vkvector ruler --save-rows`. What RULER needs from outside is
stood in for, with the inputs vkvector uses:
  - the tokenizer: `vkvector tokenize` with the --vocab GGUF (Llama 3's by
    default, the tokenizer kvpress used);
  - wonderwords' noun, adjective and verb lists: the --words list (every
    20th word as nouns, every 200th as adjectives, all of them as verbs, so
    cwe draws from the whole list and niah's keys pair two of its words);
  - the essays' JSON: the --essays folder's .txt files in name order, as
    RULER's download script joins them;
  - nltk.sent_tokenize: NLTK's own Punkt when its English model is
    installed; else NLTK's Punkt tokenizer with the abbreviations and
    sentence starters of src/eval/sentences.c and the orthographic table
    learned from the text it splits (as vkvector splits);
  - scipy's zeta(2), NeMo's manifest writer.
Python's random draws cannot be matched from C, so the comparison is
structural: per task and sample, the templates with the drawn parts
replaced by placeholders, the joins, the haystack's size in RULER's units,
the placement of needles and variables, the counts, and the prompt's
tokens. Each difference is printed. Everything is written under --work
(a new temporary folder by default), never into the repository.

Needs Debian's python3-numpy and python3-yaml (RULER's scripts), and
python3-nltk for the sentence splitter; run with the interpreter that has
them (/usr/bin/python3 on Debian).
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COMMIT = "e40fae14df4e439bb355d395b574ac4e7398036d"
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
GEN_TOKENS = {"niah": 128, "vt": 30, "cwe": 120, "fwe": 50, "qa": 32}
RULER_FILES = ["scripts/data/prepare.py", "scripts/data/template.py", "scripts/synthetic.yaml"] + [
    "scripts/data/synthetic/%s.py" % n
    for n in ("constants", "niah", "variable_tracking", "common_words_extraction", "freq_words_extraction", "qa")
]


def family(task):
    return task.split("_")[0]


# ---- the stand-ins RULER's scripts import ----

STUB_TOKENIZER = r'''
import hashlib, os, subprocess
_cache = {}
class _Tokenizer:
    def text_to_tokens(self, text):
        key = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
        if key not in _cache:
            out = subprocess.run([os.environ["RULER_REF_VKVECTOR"], "tokenize", "-m", os.environ["RULER_REF_VOCAB"],
                                  "--file", "-"], input=text.encode("utf-8"), capture_output=True, check=True)
            _cache[key] = out.stdout.split()
        return _cache[key]
def select_tokenizer(tokenizer_type, tokenizer_path):
    return _Tokenizer()
'''

STUB_WONDERWORDS = r'''
import os
def _get_words_from_text_file(name):
    words = [w.strip() for w in open(os.environ["RULER_REF_WORDS"])]
    if name == "nounlist.txt":
        return words[::20]
    if name == "adjectivelist.txt":
        return words[::200]
    return words
'''

STUB_MANIFEST = r'''
import json
def write_manifest(path, items):
    with open(path, "w") as f:
        for item in items:
            f.write(json.dumps(item) + "\n")
def read_manifest(path):
    return [json.loads(l) for l in open(path)]
'''

STUB_SCIPY_SPECIAL = r'''
import math
def zeta(x):
    if x == 2 or x == 2.0:
        return math.pi ** 2 / 6
    return sum(k ** -x for k in range(1, 1000000))
'''

STUB_SITECUSTOMIZE = r'''
import json, os
try:
    import nltk
    import nltk.data
    import nltk.tokenize
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer, PunktTrainer
    def _english():
        try:
            nltk.data.find("tokenizers/punkt/english.pickle")
            return True
        except LookupError:
            return False
    if os.environ.get("RULER_REF_SPLITTER") == "nltk":
        pass
    else:
        _lists = json.load(open(os.environ["RULER_REF_LISTS"]))
        def sent_tokenize(text, language="english"):
            trainer = PunktTrainer()
            trainer._params.abbrev_types = set(_lists["abbreviations"])
            tokens = list(trainer._annotate_first_pass(trainer._tokenize_words(text)))
            trainer._get_orthography_data(tokens)
            params = trainer._params
            params.sent_starters = set(_lists["starters"])
            params.collocations = set()
            return PunktSentenceTokenizer(params).tokenize(text)
        nltk.tokenize.sent_tokenize = sent_tokenize
        nltk.sent_tokenize = sent_tokenize
        nltk.data.find = lambda *a, **k: True
        nltk.download = lambda *a, **k: True
except ImportError:
    pass
'''


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def punkt_lists():
    """The abbreviations and sentence starters of src/eval/sentences.c."""
    src = open(os.path.join(ROOT, "src", "eval", "sentences.c")).read()
    def names(array):
        body = re.search(r"%s\[\] = \{(.*?)\};" % array, src, re.S).group(1)
        return re.findall(r'"([^"]*)"', body)
    return {"abbreviations": names("ABBREVIATIONS"), "starters": names("STARTERS")}


def english_punkt():
    try:
        import nltk.data
        nltk.data.find("tokenizers/punkt/english.pickle")
        return True
    except Exception:
        return False


def read_words(path):
    """vkvector's word list: 3-12 lower-case letters, in file order, once."""
    out, seen = [], set()
    for line in open(path, encoding="utf-8", errors="replace"):
        w = line.rstrip("\r\n")
        if re.fullmatch(r"[a-z]{3,12}", w) and w not in seen:
            seen.add(w)
            out.append(w)
    return out


def read_essays(folder):
    """RULER's PaulGrahamEssays.json text: the .txt files in name order, joined as they are."""
    text = ""
    for name in sorted(os.listdir(folder)):
        if name.endswith(".txt"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                text += f.read()
    return text


def setup(args, work):
    tree = os.path.join(work, "RULER")
    for path in RULER_FILES:
        out = subprocess.run(["git", "-C", args.ruler_repo, "show", "%s:%s" % (args.commit, path)],
                             capture_output=True, check=True).stdout.decode()
        write(os.path.join(tree, path), out)
    essays = read_essays(args.essays)
    write(os.path.join(tree, "scripts/data/synthetic/json/PaulGrahamEssays.json"), json.dumps({"text": essays}))
    stubs = os.path.join(work, "stubs")
    write(os.path.join(stubs, "tokenizer.py"), STUB_TOKENIZER)
    write(os.path.join(stubs, "wonderwords/__init__.py"), "from . import random_word\n")
    write(os.path.join(stubs, "wonderwords/random_word.py"), STUB_WONDERWORDS)
    for d in ("nemo", "nemo/collections", "nemo/collections/asr", "nemo/collections/asr/parts",
              "nemo/collections/asr/parts/utils"):
        write(os.path.join(stubs, d, "__init__.py"), "")
    write(os.path.join(stubs, "nemo/collections/asr/parts/utils/manifest_utils.py"), STUB_MANIFEST)
    write(os.path.join(stubs, "scipy/__init__.py"), "")
    write(os.path.join(stubs, "scipy/special.py"), STUB_SCIPY_SPECIAL)
    write(os.path.join(stubs, "sitecustomize.py"), STUB_SITECUSTOMIZE)
    write(os.path.join(work, "lists.json"), json.dumps(punkt_lists()))
    write(os.path.join(work, "words.txt"), "\n".join(read_words(args.words)) + "\n")
    bin_dir = os.path.join(work, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    if not os.path.exists(os.path.join(bin_dir, "python")):
        os.symlink(sys.executable, os.path.join(bin_dir, "python"))
    env = dict(os.environ)
    env.update({
        "PYTHONPATH": stubs,
        "PATH": bin_dir + os.pathsep + env.get("PATH", ""),
        "RULER_REF_VKVECTOR": os.path.abspath(args.vkvector),
        "RULER_REF_VOCAB": os.path.abspath(args.vocab),
        "RULER_REF_WORDS": os.path.join(work, "words.txt"),
        "RULER_REF_LISTS": os.path.join(work, "lists.json"),
        "RULER_REF_SPLITTER": "nltk" if english_punkt() else "punkt-lists",
    })
    return tree, env, essays


# ---- the two sides' rows ----

QUESTION = {
    "niah": r"What (?:is|are all) the special magic",
    "vt": r"Question: Find all variables that are assigned the value",
    "cwe": r"Question: What are the 10 most common words in the above list\?",
    "fwe": r"Question: Do not provide any explanation\.",
    "qa": r"Answer the question based on the given documents\.",
}
ANSWER = {"niah": r"The special magic", "vt": r"Answer:", "cwe": r"Answer:", "fwe": r"Answer:", "qa": r"Answer:"}


def kvpress_split(task, text):
    """kvpress's cut of RULER's input: the question from the question
    pattern's last match, the answer prefix from the answer pattern's first
    match after it."""
    q = [m.start() for m in re.finditer(QUESTION[family(task)], text)][-1]
    a = q + re.search(ANSWER[family(task)], text[q:]).start()
    return text[:q], text[q:a], text[a:]


def ruler_rows(args, tree, env, work, task):
    save = os.path.join(work, "ruler_out", str(args.length))
    cmd = [sys.executable, os.path.join(tree, "scripts/data/prepare.py"), "--save_dir", save, "--benchmark",
           "synthetic", "--task", task, "--tokenizer_path", args.vocab, "--tokenizer_type", "hf",
           "--max_seq_length", str(args.length), "--model_template_type", "base", "--num_samples",
           str(args.samples)]
    out_file = os.path.join(save, task, "validation.jsonl")
    # prepare.py keeps a file that has its rows already
    run = subprocess.run(cmd, cwd=os.path.join(tree, "scripts/data"), env=env, capture_output=True, text=True)
    if not os.path.exists(out_file) or sum(1 for _ in open(out_file)) != args.samples:
        sys.exit("RULER's %s failed:\n%s\n%s" % (task, run.stdout[-3000:], run.stderr[-3000:]))
    rows = []
    for line in open(out_file):
        r = json.loads(line)
        context, question, prefix = kvpress_split(task, r["input"])
        rows.append({"context": context, "question": question, "answer_prefix": prefix, "answer": r["outputs"],
                     "index": r["index"], "ruler_length": r["length"]})
    return rows


def vkvector_rows(args, work, tasks):
    out = os.path.join(work, "vkvector_rows.jsonl")
    subprocess.run([args.vkvector, "ruler", "--save-rows", out, "-m", args.vocab, "--lengths", str(args.length),
                    "--samples", str(args.samples), "--seed", str(args.seed), "--tasks", ",".join(tasks),
                    "--essays", args.essays, "--words", args.words, "--ruler-version", args.ruler_version], check=True)
    rows = collections.defaultdict(list)
    for line in open(out):
        r = json.loads(line)
        rows[r["task"]].append(r)
    return rows


def tokens(args, text):
    out = subprocess.run([args.vkvector, "tokenize", "-m", args.vocab, "--file", "-"], input=text.encode(),
                         capture_output=True, check=True)
    return len(out.stdout.split())


# ---- the structure of a row ----

NEEDLE = re.compile(r"One of the special magic (numbers|uuids|words) for (\S+) is: (\S+)\.")


def splitter(env):
    """The reference sentence splitter (what the stand-in gives RULER)."""
    os.environ.update({k: v for k, v in env.items() if k.startswith("RULER_REF_")})
    from nltk.tokenize.punkt import PunktSentenceTokenizer, PunktTrainer
    if env["RULER_REF_SPLITTER"] == "nltk":
        import nltk
        return nltk.sent_tokenize
    lists = json.load(open(env["RULER_REF_LISTS"]))
    def split(text):
        trainer = PunktTrainer()
        trainer._params.abbrev_types = set(lists["abbreviations"])
        toks = list(trainer._annotate_first_pass(trainer._tokenize_words(text)))
        trainer._get_orthography_data(toks)
        p = trainer._params
        p.sent_starters = set(lists["starters"])
        p.collocations = set()
        return PunktSentenceTokenizer(p).tokenize(text)
    return split


def skeleton(text, keys, values):
    for k in sorted(keys, key=len, reverse=True):
        text = text.replace(k, "<KEY>")
    for v in sorted(values, key=len, reverse=True):
        text = text.replace(v, "<VALUE>")
    return text


def niah_structure(row, task, essay_words, split):
    ctx = row["context"]
    head, body = ctx.split("\n", 1)
    assert body.endswith("\n")
    hay = body[:-1]
    needles = list(NEEDLE.finditer(hay))
    keys = {m.group(2) for m in needles}
    values = {m.group(3) for m in needles}
    s = {
        "template head": head,
        "question": skeleton(row["question"], keys, values),
        "answer prefix": skeleton(row["answer_prefix"], keys, values),
        "answers": len(row["answer"]),
    }
    if task in ("niah_single_1", "niah_multikey_2", "niah_multikey_3"):
        lines = hay.split("\n")
        s["needles"] = len([l for l in lines if NEEDLE.fullmatch(l)])
        s["haystack lines (RULER's units)"] = len(lines) - (s["needles"] if task == "niah_single_1" else 1)
        s["line join"] = "one a line" if all(l == NOISE or NEEDLE.fullmatch(l) for l in lines) else "other"
        return s, {}
    # essays: the needles out, the rest is " ".join(the first N words)
    pieces, at, pos = [], [], 0
    for m in needles:
        pieces.append(hay[pos:m.start()])
        pos = m.end()
    pieces.append(hay[pos:])
    # RULER joins [sentences, needle, sentences, ...] with " ": strip one joining space each side
    text_parts = []
    for i, p in enumerate(pieces):
        if i > 0:
            assert p.startswith(" "), repr(p[:20])
            p = p[1:]
        if i < len(pieces) - 1:
            assert p.endswith(" ") or p == "", repr(p[-20:])
            p = p[:-1] if p.endswith(" ") else p
        text_parts.append(p)
    nonempty = [p for p in text_parts if p]
    text = " ".join(nonempty)
    # N: the essay words whose letters the text holds (RULER's joins add spaces where
    # a sentence ends without one, as in "good.[2]")
    bare, n_words, have = text.replace(" ", ""), 0, 0
    while n_words < len(essay_words) and have < len(bare):
        have += len(essay_words[n_words])
        n_words += 1
    sents = split(" ".join(essay_words[:n_words]).strip())
    s["needles"] = len(needles)
    s["essay text: the first N words' sentences joined by spaces"] = text == " ".join(sents)
    # each needle's place: the number of sentences before it
    ends, pos = set(), 0
    for sent in sents:
        pos = text.index(sent, pos) + len(sent)
        ends.add(pos)
    places = [len(" ".join(p for p in text_parts[:i + 1] if p)) for i in range(len(needles))]
    depths = sorted({int(round(100 * i / 39)) for i in range(40)})
    allowed = {int(len(sents) * (d / 100)) for d in depths}
    sentence_index = []
    for c in places:
        k = sum(1 for e in ends if e <= c)
        sentence_index.append(k)
    s["needles at sentence ends"] = all(c == 0 or c in ends for c in places)
    s["needles at RULER's depths"] = all(k in allowed for k in sentence_index)
    info = {"N words": n_words, "sentences": len(sents), "needle sentence indexes": sentence_index}
    return s, info


VAR = re.compile(r"VAR ([A-Z]+) = (?:VAR ([A-Z]+) |(\d+))")


def vt_structure(row):
    ctx = row["context"]
    start = ctx.rfind("Memorize and track")
    example, task = ctx[:start], ctx[start:]
    def shape(part):
        t = VAR.sub(lambda m: "VAR <V%d> = %s" % (len(m.group(1)), "VAR <V> " if m.group(2) else "<N>"), part)
        t = re.sub(r"\b\d{5}\b", "<N>", t)
        return re.sub(r"\b[A-Z]{3}\b", "<V3>", t)
    def units(part):
        return part.count(NOISE)
    ts = shape(task)
    chain_items = [m.group(0) for m in re.finditer(r"VAR <V5> = (?:VAR <V> |<N>)[^V]{0,12}", ts)]
    s = {
        "example (placeholders)": re.sub(r"The grass is green\.(.|\n)*again\.\n", "<NOISE>", shape(example)),
        "example noise units": units(example),
        "noise join": ("noise + '\\n', joined by ' '" if ".\n The grass" in task and ".\nThe grass" not in task
                       else "one a line" if ".\nThe grass" in task else "other"),
        "chain items and what follows them": sorted(set(chain_items)),
        "question": re.sub(r"\d{5}", "<N>", row["question"]),
        "answer prefix": re.sub(r"\d{5}", "<N>", row["answer_prefix"]),
        "answers": len(row["answer"]),
    }
    info = {"noise units (RULER's units)": units(task)}
    return s, info


def cwe_structure(row):
    ctx = row["context"]
    second = ctx.index("Below is a numbered list", 1)
    example, main = ctx[:second], ctx[second:]
    def entries(part):
        return re.findall(r"(\d+)\. ([a-z]+)", part)
    ex_list = example.split("\n")[1]
    main_list = main.split("\n")[1]
    ex, mn = entries(ex_list), entries(main_list)
    after = example.split("in the list are:")[1]
    s = {
        "example list numbered 1..n": [int(n) for n, _ in ex] == list(range(1, len(ex) + 1)),
        "main list numbered 1..n": [int(n) for n, _ in mn] == list(range(1, len(mn) + 1)),
        "example answer spacing": "are:" + after[:3],
        "example repeats": sorted(collections.Counter(w for _, w in ex).values(), reverse=True)[:12],
        "main repeats (top 10, then the rest)": (
            sorted(collections.Counter(w for _, w in mn).values(), reverse=True)[:10],
            sorted(set(collections.Counter(w for _, w in mn).values()) - {30})),
        "answers are the 10 most common": sorted(row["answer"]) == sorted(
            w for w, c in collections.Counter(w for _, w in mn).most_common(10)),
        "template (lists out)": ctx.replace(ex_list, "<LIST>").replace(main_list, "<LIST>").replace(
            after.split("\n")[0], "<ANSWER>"),
        "question": row["question"],
        "answer prefix": row["answer_prefix"],
    }
    info = {"words (RULER's units)": len(set(w for _, w in mn))}
    return s, info


def fwe_structure(row):
    ctx = row["context"]
    head = "coded words. "
    text = ctx[ctx.index(head) + len(head):ctx.rindex("\n")]
    words = text.split(" ")
    counts = collections.Counter(words)
    ranked = [w for w, _ in counts.most_common()]
    s = {
        "template (text out)": ctx.replace(text, "<TEXT>"),
        "'...' the most frequent": ranked[0] == "...",
        "answers are ranks 2-4": sorted(row["answer"]) == sorted(ranked[1:4]),
        "question": row["question"],
        "answer prefix": row["answer_prefix"],
    }
    info = {"words (RULER's units)": len(words), "vocabulary": len(counts),
            "count profile": sorted(counts.values(), reverse=True)[:6]}
    return s, info


def structure(row, task, essay_words, split):
    f = family(task)
    if f == "niah":
        return niah_structure(row, task, essay_words, split)
    if f == "vt":
        return vt_structure(row)
    if f == "cwe":
        return cwe_structure(row)
    return fwe_structure(row)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ruler-repo", required=True, help="a clone of RULER (bare or not)")
    ap.add_argument("--commit", default=COMMIT, help="RULER's commit (default: late 2024's, e40fae1)")
    ap.add_argument("--vkvector", default=os.path.join(ROOT, "build", "vkvector"))
    shared = os.environ.get("VKVECTOR_SHARED", os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--vocab", default=os.path.join(shared, "vocab", "ggml-vocab-llama-bpe.gguf"))
    ap.add_argument("--essays", default=os.path.join(shared, "data", "paul_graham_essays"))
    ap.add_argument("--words", default="/usr/share/dict/words")
    ap.add_argument("--tasks", default="niah_single_2,niah_multikey_1,vt,cwe,fwe")
    ap.add_argument("--length", type=int, default=4096)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--ruler-version", default="2024", help="vkvector's rules (2024; head shows what differs)")
    ap.add_argument("--work", help="scratch folder (default: a new temporary one)")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="ruler_compare_")
    os.makedirs(work, exist_ok=True)
    tasks = args.tasks.split(",")
    tree, env, essays = setup(args, work)
    split = splitter(env)
    essay_words = re.sub(r"\s+", " ", essays).split(" ")
    print("RULER %s in %s; sentence splitter: %s" % (args.commit[:7], work, env["RULER_REF_SPLITTER"]))
    ours = vkvector_rows(args, work, tasks)
    report, n_diff, summary = {}, 0, []
    for task in tasks:
        theirs = ruler_rows(args, tree, env, work, task)
        print("\n== %s @ %d: %d RULER rows, %d vkvector rows" % (task, args.length, len(theirs), len(ours[task])))
        report[task] = []
        for r, v in zip(theirs, ours[task]):
            sr, ir = structure(r, task, essay_words, split)
            sv, iv = structure(v, task, essay_words, split)
            gen = GEN_TOKENS[family(task)]
            ir["prompt tokens"] = tokens(args, r["context"] + r["question"] + r["answer_prefix"])
            iv["prompt tokens"] = tokens(args, v["context"] + v["question"] + v["answer_prefix"])
            diffs = [k for k in sr if sr[k] != sv.get(k)]
            # the yes/no properties hold on both sides
            diffs += ["%s (%s)" % (k, side) for side, st in (("RULER", sr), ("vkvector", sv))
                      for k in st if st[k] is False and k not in diffs]
            n_diff += len(diffs)
            print("  sample %d: structure %s" % (r["index"], "equal" if not diffs else "DIFFERS"))
            for k in diffs:
                if k in sr:
                    print("    %s:\n      RULER    %r\n      vkvector %r" % (k, sr[k], sv.get(k)))
                else:
                    print("    does not hold: %s" % k)
            for k in ir:
                print("    %s: RULER %s, vkvector %s" % (k, ir[k], iv.get(k)))
            fits = "fits" if iv["prompt tokens"] + (0 if family(task) == "fwe" else gen) <= args.length else "TOO LONG"
            print("    vkvector's prompt + %d generated: %s" % (gen, fits))
            report[task].append({"index": r["index"], "differences": diffs, "ruler": ir, "vkvector": iv})
        rows = report[task]
        unit = [k for k in rows[0]["ruler"] if "units" in k or k == "N words"] if rows else []
        same = sum(1 for x in rows if all(x["ruler"][k] == x["vkvector"][k] for k in unit))
        summary.append("%-16s %d/%d samples of equal structure; haystack size equal in %d/%d (%s); prompt tokens "
                       "RULER %s, vkvector %s" % (task, sum(1 for x in rows if not x["differences"]), len(rows), same,
                                                  len(rows), ", ".join(unit) or "-",
                                                  [x["ruler"]["prompt tokens"] for x in rows],
                                                  [x["vkvector"]["prompt tokens"] for x in rows]))
    print("\n" + "\n".join(summary))
    write(os.path.join(work, "report.json"), json.dumps(report, indent=1))
    print("\n%d structural differences; report in %s" % (n_diff, os.path.join(work, "report.json")))
    return 1 if n_diff else 0


if __name__ == "__main__":
    sys.exit(main())
