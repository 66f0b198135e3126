/* RULER (docs/ARCHITECTURE.md §5): its 13 tasks, kvpress's scoring of them,
 * kvpress's rows (context, question, answer prefix, answers) and a local,
 * deterministic generator of the synthetic tasks following RULER's rules.
 * Device-free: the generator counts tokens through a callback, so its tests
 * need no model.
 *
 * A sample is kvpress's three parts: the context (compressed), the question
 * and the answer prefix (both after compression). */
#ifndef VKV_EVAL_RULER_H
#define VKV_EVAL_RULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "core/status.h"

typedef enum vkv_ruler_kind {
    VKV_RULER_NIAH,
    VKV_RULER_VT,  /* variable tracking */
    VKV_RULER_CWE, /* common words */
    VKV_RULER_FWE, /* frequent (coded) words */
    VKV_RULER_QA,
} vkv_ruler_kind;

/* What a needle task's haystack is: RULER's repeated noise sentences, the
 * essays, or needles of random keys and values. */
typedef enum vkv_ruler_haystack { VKV_RULER_NOISE, VKV_RULER_ESSAY, VKV_RULER_NEEDLES } vkv_ruler_haystack;
/* The kinds of a needle's key and value. */
typedef enum vkv_ruler_item { VKV_RULER_WORDS, VKV_RULER_NUMBERS, VKV_RULER_UUIDS } vkv_ruler_item;

typedef struct vkv_ruler_task {
    const char *name;
    vkv_ruler_kind kind;
    /* the needle tasks' settings (RULER's synthetic.yaml) */
    vkv_ruler_haystack haystack;
    vkv_ruler_item key, value;
    int num_k, num_v, num_q;
} vkv_ruler_task;

#define VKV_RULER_N_TASKS 13
extern const vkv_ruler_task vkv_ruler_tasks[VKV_RULER_N_TASKS];

/* The task of that name, or NULL. */
const vkv_ruler_task *vkv_ruler_find_task(const char *name);
/* Its index in vkv_ruler_tasks, or -1. */
int vkv_ruler_task_index(const char *name);
/* kvpress's generation length of the task's family (niah 128, vt 30, cwe
 * 120, fwe 50, qa 32). */
uint32_t vkv_ruler_max_new_tokens(const vkv_ruler_task *t);

/* RULER's string_match_all for one sample: the fraction of the references
 * found in the prediction, ignoring case (ASCII letters). 0 without
 * references. */
double vkv_ruler_match_all(const char *pred, const char *const *refs, size_t n_refs);
/* string_match_part: 1 when any reference is in the prediction, else 0. */
double vkv_ruler_match_part(const char *pred, const char *const *refs, size_t n_refs);
/* A sample's score in [0, 1] as kvpress computes it: the prediction stripped
 * of white space, of its control characters, and stripped again; then
 * match_part for the qa tasks and match_all for the others. */
double vkv_ruler_score(const vkv_ruler_task *t, const char *pred, const char *const *refs, size_t n_refs);

/* A sample: kvpress's parts and the references; all malloc'ed. */
typedef struct vkv_ruler_sample {
    char *context, *question, *answer_prefix;
    char **answers;            /* [n_answers], each malloc'ed */
    size_t n_answers;
} vkv_ruler_sample;
void vkv_ruler_sample_free(vkv_ruler_sample *s);

/* A row of kvpress's RULER data: "context", "question", "answer_prefix" and
 * "task" strings, "answer" a non-empty array of strings, "max_new_tokens" a
 * whole number >= 1, "length" a whole number when present. NULL when it
 * holds, else the reason. */
const char *vkv_ruler_row_check(const vkv_json *row);
/* The row's sample (vkv_ruler_row_check first). */
vkv_status vkv_ruler_row_sample(const vkv_json *row, vkv_ruler_sample *out);

/* A question-answering set as RULER reads it: its documents (distinct,
 * sorted by code point) and its questions, each with its answers, the
 * documents that hold the answer (gold) and, for SQuAD, the other
 * paragraphs of the same article (more). All malloc'ed. */
typedef struct vkv_ruler_qa {
    char *question;
    char **answers;            /* [n_answers] */
    size_t n_answers;
    size_t *gold, n_gold;      /* indices into docs */
    size_t *more, n_more;
} vkv_ruler_qa;
typedef struct vkv_ruler_qa_set {
    char **docs;
    size_t n_docs;
    vkv_ruler_qa *qas;
    size_t n_qas;
} vkv_ruler_qa_set;
/* SQuAD 2.0's JSON (data[].paragraphs[].context and .qas[]: question,
 * answers[].text, is_impossible; impossible questions left out) and
 * HotpotQA's (a list of question, answer, context [[title, [sentences]]];
 * a document is "title\n" + its sentences joined). VKV_ERR_IO when the file
 * cannot be read, VKV_ERR_FORMAT (naming what) when it is not that layout. */
vkv_status vkv_ruler_read_squad(const char *path, vkv_ruler_qa_set *out);
vkv_status vkv_ruler_read_hotpotqa(const char *path, vkv_ruler_qa_set *out);
void vkv_ruler_qa_set_free(vkv_ruler_qa_set *s);

/* What the generator draws from: the essays' text (vkv_ruler_read_essays),
 * a word list (distinct lower-case words), and the question-answering sets
 * of qa_1 (SQuAD) and qa_2 (HotpotQA), NULL when not given. Borrowed. */
typedef struct vkv_ruler_sources {
    const char *essays;
    size_t essays_len;
    char **words;
    size_t n_words;
    const vkv_ruler_qa_set *squad, *hotpotqa;
} vkv_ruler_sources;

/* The essays as RULER reads them (its PaulGrahamEssays.json): the
 * directory's .txt files in name order, one after another as they are.
 * VKV_ERR_IO when the directory cannot be read or has no text. */
vkv_status vkv_ruler_read_essays(const char *dir, char **text, size_t *len);

/* The words of a word list file (one a line, e.g. /usr/share/dict/words):
 * those of 3 to 12 ASCII lower-case letters, in file order, without
 * repeats. VKV_ERR_IO when it cannot be read, VKV_ERR_FORMAT when it has
 * fewer than 1000 such words. */
vkv_status vkv_ruler_read_words(const char *path, char ***words, size_t *n);
void vkv_ruler_words_free(char **words, size_t n);

/* Counts the tokens of a text (the model's tokenizer, no BOS). */
typedef vkv_status vkv_ruler_count_fn(void *ctx, const char *text, size_t *n_tokens);

/* Whose rules the generator follows (docs/ARCHITECTURE.md §5, RULER):
 * - VKV_RULER_2024: RULER as of commit e40fae1 (October 2024), the version
 *   that generated kvpress's rows. Each (task, length)'s haystack size is
 *   found once per run, growing it in steps (500 essay words, 25 lines, 5
 *   under 4096 tokens; vt, cwe and qa 10 units) while the prompt, RULER's
 *   answers and the generation fit; each sample steps down from there until
 *   it fits. Variable tracking's noise ends with a newline and is joined by
 *   spaces, its answer prefix spells "assgined", and a solved example (the
 *   same for the whole run) goes before it; cwe's solved example has no
 *   space after "are:"; fwe's vocabulary is length / 50 words.
 * - VKV_RULER_HEAD: RULER's current rules: the largest haystack that fits,
 *   by bisection for each sample, vt's items one a line (no solved
 *   example), "assigned", cwe's "are: 1. ...", fwe's (length - 50) / 50
 *   words, the essays repeated beyond their end.
 * Both put the essay needles between nltk.sent_tokenize's sentences
 * (src/eval/sentences.h) and shuffle with RULER's fixed-seed shuffles. */
typedef enum vkv_ruler_version { VKV_RULER_2024, VKV_RULER_HEAD } vkv_ruler_version;
#define VKV_RULER_2024_COMMIT "e40fae1"
/* "2024" or "head". */
const char *vkv_ruler_version_name(vkv_ruler_version v);
/* "2024" (or the commit, "e40fae1") and "head"; false for anything else. */
bool vkv_ruler_version_parse(const char *s, vkv_ruler_version *v);

/* A generator run: the rules, the token counter, and what the run found
 * (late 2024's haystack sizes and vt's example, per task, length and seed,
 * for the same sources). Zero-initialise the rest; free with
 * vkv_ruler_gen_free. */
typedef struct vkv_ruler_gen {
    vkv_ruler_version version;
    vkv_ruler_count_fn *count;
    void *count_ctx;
    struct vkv_ruler_size *sizes;
    size_t n_sizes;
} vkv_ruler_gen;
void vkv_ruler_gen_free(vkv_ruler_gen *g);

/* Sample `index` of a synthetic task at `length` tokens: RULER's template
 * with the haystack (sentences, words, ...) its version sizes so that the
 * prompt's tokens (context + question + answer prefix) plus the task's
 * generation fit in `length` (late-2024 fwe: the prompt alone). The same
 * (version, task, length, seed, index) gives the same sample (qa: question
 * `index` of its set, as RULER takes them in order, with distractor
 * documents drawn from the seed). VKV_ERR_ARG for qa without its set, or a
 * length too short for the task's smallest prompt. */
vkv_status vkv_ruler_generate(vkv_ruler_gen *run, const vkv_ruler_task *t, const vkv_ruler_sources *src, size_t length,
                              uint64_t seed, size_t index, vkv_ruler_sample *out);

#endif
