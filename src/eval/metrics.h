/* LongBench's scoring, reproduced in C (THUDM/LongBench metrics.py and
 * eval.py, English tasks), and the task table of the 16 English tasks.
 *
 * Every metric takes UTF-8 text and returns a score in [0, 1]; a sample's
 * score is the maximum over its reference answers (vkv_longbench_score),
 * a task's score is 100 x the mean over its samples.
 *
 * Fidelity notes (where C cannot be Python exactly):
 * - Lower-casing (qa_f1) maps ASCII, Latin-1, Latin Extended-A/Additional,
 *   Greek, Cyrillic, Armenian and full-width Latin letters one to one;
 *   Python's few one-to-many cases (U+0130) and the final-sigma rule are not
 *   reproduced.
 * - `\b` in the article removal needs Unicode's alphanumeric classes; here a
 *   code point >= U+0080 is a word character unless it is white space or
 *   falls in a punctuation/symbol block (Latin-1 symbols, general
 *   punctuation, currency, arrows, math, box drawing, CJK punctuation,
 *   full-width punctuation, emoji, combining marks).
 * - `\d` matches ASCII digits only (Python also matches other scripts' digits).
 * - ROUGE-L is the `rouge` package (pltrdy/rouge 1.0.x) that LongBench calls:
 *   sentences split at '.', words at ' ', sets of words (exclusive=True),
 *   union-LCS summary level. Python's recursion limit makes that package fail
 *   (and LongBench score 0) when one sentence pair's LCS backtrack is longer
 *   than about 990 steps; that failure is not reproduced.
 * - Code similarity is fuzzywuzzy's fuzz.ratio with python-Levenshtein
 *   installed (Levenshtein.ratio: 2·LCS / (len1 + len2) over code points,
 *   rounded half to even); VKV_CODE_SIM_DIFFLIB gives the pure-Python
 *   fallback (difflib.SequenceMatcher.ratio, autojunk included) that
 *   fuzzywuzzy uses without it. */
#ifndef VKV_EVAL_METRICS_H
#define VKV_EVAL_METRICS_H

#include <stdbool.h>
#include <stddef.h>

/* LongBench's normalize_answer: lower-case, drop ASCII punctuation, replace
 * the words a/an/the by a space, collapse white space. malloc'ed; NULL when
 * out of memory. */
char *vkv_normalize_answer(const char *s);

/* qa_f1_score: token F1 of the normalised texts. */
double vkv_metric_qa_f1(const char *pred, const char *truth);
/* rouge_score: the rouge package's ROUGE-L F (0 where it raises, e.g. for an
 * empty prediction). */
double vkv_metric_rouge_l(const char *pred, const char *truth);
/* kvpress's needle-in-a-haystack score: the `rouge` package's
 * get_scores(needle.strip(), answer.strip()) ROUGE-L F, so the needle is the
 * hypothesis and the answer the reference, the other way round from
 * LongBench's rouge_score (summary level: the two orders differ on answers of
 * several sentences). */
double vkv_metric_kvpress_niah(const char *needle, const char *answer);
/* classification_score (trec): the classes that occur in the prediction (as
 * substrings), minus those that are substrings of the truth but not equal
 * to it (with Python's skip-after-remove iteration); 1 / matches if the truth
 * is among them, else 0. */
double vkv_metric_classification(const char *pred, const char *truth, const char *const *classes, size_t n_classes);
/* count_score: the digit runs of the prediction; the fraction equal to truth. */
double vkv_metric_count(const char *pred, const char *truth);
/* retrieval_score: truth "Paragraph N"; the fraction of the prediction's digit
 * runs equal to N (0 when the truth has no "Paragraph N"). */
double vkv_metric_retrieval(const char *pred, const char *truth);

typedef enum vkv_code_sim_kind {
    VKV_CODE_SIM_LEVENSHTEIN = 0,  /* fuzzywuzzy with python-Levenshtein (default) */
    VKV_CODE_SIM_DIFFLIB = 1,      /* fuzzywuzzy's pure-Python fallback */
} vkv_code_sim_kind;
/* fuzz.ratio(a, b): 100 for equal strings, 0 when one is empty, else
 * round(100 · ratio) (half to even). */
int vkv_fuzz_ratio(const char *a, const char *b, vkv_code_sim_kind kind);
/* code_sim_score: the first line of the prediction (leading newlines
 * stripped) without '`', '#' or "//", against the truth: fuzz.ratio / 100. */
double vkv_metric_code_sim(const char *pred, const char *truth, vkv_code_sim_kind kind);

typedef enum vkv_lb_metric {
    VKV_LB_QA_F1,
    VKV_LB_ROUGE,
    VKV_LB_CLASSIFICATION,
    VKV_LB_COUNT,
    VKV_LB_RETRIEVAL,
    VKV_LB_CODE_SIM,
} vkv_lb_metric;

typedef struct vkv_lb_task {
    const char *name;      /* "narrativeqa", ... */
    vkv_lb_metric metric;
    bool first_line;       /* trec, triviaqa, samsum: only the first line of the prediction is scored */
    bool no_chat;          /* LongBench's pred.py does not apply the chat template (few-shot and code tasks) */
} vkv_lb_task;

/* The 16 English tasks in LongBench's (and the paper's) column order. */
#define VKV_LB_N_TASKS 16
extern const vkv_lb_task vkv_lb_tasks[VKV_LB_N_TASKS];
/* The task of a dataset name; a LongBench-E name ("qasper_e") finds its task.
 * NULL for anything else (the Chinese tasks need jieba: not supported). */
const vkv_lb_task *vkv_longbench_task(const char *name);
/* Column order of a task (0..15), or -1. */
int vkv_longbench_task_index(const char *name);

typedef struct vkv_lb_score_opts {
    vkv_code_sim_kind code_sim;
    /* kvpress's scorer: the prediction's leading white space removed
     * (Python's lstrip(), ASCII white space here) before the first-line cut
     * and before every metric; eval.py removes only leading newlines, and
     * only for the first-line tasks. */
    bool lstrip;
} vkv_lb_score_opts;

/* eval.py's scorer for one sample: first line where the task says so, then
 * the maximum over the answers. opts may be NULL (defaults). */
double vkv_longbench_score(const vkv_lb_task *task, const char *pred, const char *const *answers, size_t n_answers,
                           const char *const *classes, size_t n_classes, const vkv_lb_score_opts *opts);

#endif
