/* RULER's tasks, scoring, rows and generator (see ruler.h). */
#include "eval/ruler.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "core/rng.h"
#include "core/strbuf.h"
#include "eval/lb_jsonl.h"
#include "eval/niah.h"
#include "eval/sentences.h"

const vkv_ruler_task vkv_ruler_tasks[VKV_RULER_N_TASKS] = {
    {"niah_single_1", VKV_RULER_NIAH, VKV_RULER_NOISE, VKV_RULER_WORDS, VKV_RULER_NUMBERS, 1, 1, 1},
    {"niah_single_2", VKV_RULER_NIAH, VKV_RULER_ESSAY, VKV_RULER_WORDS, VKV_RULER_NUMBERS, 1, 1, 1},
    {"niah_single_3", VKV_RULER_NIAH, VKV_RULER_ESSAY, VKV_RULER_WORDS, VKV_RULER_UUIDS, 1, 1, 1},
    {"niah_multikey_1", VKV_RULER_NIAH, VKV_RULER_ESSAY, VKV_RULER_WORDS, VKV_RULER_NUMBERS, 4, 1, 1},
    {"niah_multikey_2", VKV_RULER_NIAH, VKV_RULER_NEEDLES, VKV_RULER_WORDS, VKV_RULER_NUMBERS, 1, 1, 1},
    {"niah_multikey_3", VKV_RULER_NIAH, VKV_RULER_NEEDLES, VKV_RULER_UUIDS, VKV_RULER_UUIDS, 1, 1, 1},
    {"niah_multivalue", VKV_RULER_NIAH, VKV_RULER_ESSAY, VKV_RULER_WORDS, VKV_RULER_NUMBERS, 1, 4, 1},
    {"niah_multiquery", VKV_RULER_NIAH, VKV_RULER_ESSAY, VKV_RULER_WORDS, VKV_RULER_NUMBERS, 1, 1, 4},
    {"vt", VKV_RULER_VT, VKV_RULER_NOISE, 0, 0, 0, 0, 0},
    {"cwe", VKV_RULER_CWE, 0, 0, 0, 0, 0, 0},
    {"fwe", VKV_RULER_FWE, 0, 0, 0, 0, 0, 0},
    {"qa_1", VKV_RULER_QA, 0, 0, 0, 0, 0, 0},
    {"qa_2", VKV_RULER_QA, 0, 0, 0, 0, 0, 0},
};

int vkv_ruler_task_index(const char *name)
{
    for (int i = 0; i < VKV_RULER_N_TASKS; i++)
        if (!strcmp(vkv_ruler_tasks[i].name, name)) return i;
    return -1;
}

const vkv_ruler_task *vkv_ruler_find_task(const char *name)
{
    int i = vkv_ruler_task_index(name);
    return i < 0 ? NULL : &vkv_ruler_tasks[i];
}

uint32_t vkv_ruler_max_new_tokens(const vkv_ruler_task *t)
{
    static const uint32_t by_kind[] = {[VKV_RULER_NIAH] = 128, [VKV_RULER_VT] = 30, [VKV_RULER_CWE] = 120,
                                       [VKV_RULER_FWE] = 50, [VKV_RULER_QA] = 32};
    return by_kind[t->kind];
}

/* ---- scoring ---- */

/* Whether needle occurs in hay, ASCII letters compared without case. */
static bool contains_nocase(const char *hay, const char *needle)
{
    size_t nl = strlen(needle), hl = strlen(hay);
    for (size_t i = 0; i + nl <= hl; i++) {
        size_t j = 0;
        while (j < nl && tolower((unsigned char)hay[i + j]) == tolower((unsigned char)needle[j])) j++;
        if (j == nl) return true;
    }
    return false;
}

double vkv_ruler_match_all(const char *pred, const char *const *refs, size_t n_refs)
{
    if (!n_refs) return 0;
    size_t hit = 0;
    for (size_t i = 0; i < n_refs; i++) hit += contains_nocase(pred, refs[i]);
    return (double)hit / (double)n_refs;
}

double vkv_ruler_match_part(const char *pred, const char *const *refs, size_t n_refs)
{
    for (size_t i = 0; i < n_refs; i++)
        if (contains_nocase(pred, refs[i])) return 1;
    return 0;
}

/* Python's str.strip() for ASCII white space. */
static void strip_in_place(char *s)
{
    size_t n = strlen(s), a = 0;
    while (a < n && isspace((unsigned char)s[a])) a++;
    while (n > a && isspace((unsigned char)s[n - 1])) n--;
    memmove(s, s + a, n - a);
    s[n - a] = 0;
}

double vkv_ruler_score(const vkv_ruler_task *t, const char *pred, const char *const *refs, size_t n_refs)
{
    char *p = strdup(pred);
    if (!p) return NAN;
    strip_in_place(p);
    size_t k = 0; /* kvpress removes the characters U+0000..U+001F */
    for (size_t i = 0; p[i]; i++)
        if ((unsigned char)p[i] >= 0x20) p[k++] = p[i];
    p[k] = 0;
    strip_in_place(p);
    double s = t->kind == VKV_RULER_QA ? vkv_ruler_match_part(p, refs, n_refs) : vkv_ruler_match_all(p, refs, n_refs);
    free(p);
    return s;
}

/* ---- kvpress's rows ---- */

void vkv_ruler_sample_free(vkv_ruler_sample *s)
{
    free(s->context);
    free(s->question);
    free(s->answer_prefix);
    string_list_free(s->answers);
    memset(s, 0, sizeof *s);
}

static bool whole(const vkv_json *v, double lo)
{
    return v && v->type == VKV_JSON_NUMBER && v->number == floor(v->number) && v->number >= lo && v->number < 1e15;
}

const char *vkv_ruler_row_check(const vkv_json *row)
{
    if (!row || row->type != VKV_JSON_OBJECT) return "a row is a JSON object";
    static const char *const strings[] = {"context", "question", "answer_prefix", "task"};
    for (size_t i = 0; i < 4; i++)
        if (!json_get_str(row, strings[i])) {
            static char why[96];
            snprintf(why, sizeof why, "\"%s\" is missing or not a string", strings[i]);
            return why;
        }
    const vkv_json *a = vkv_json_get(row, "answer");
    if (!a || a->type != VKV_JSON_ARRAY || !a->n_items) return "\"answer\" is not a non-empty array of strings";
    for (size_t i = 0; i < a->n_items; i++)
        if (a->items[i]->type != VKV_JSON_STRING) return "\"answer\" is not a non-empty array of strings";
    if (!whole(vkv_json_get(row, "max_new_tokens"), 1)) return "\"max_new_tokens\" is not a whole number >= 1";
    const vkv_json *l = vkv_json_get(row, "length");
    if (l && l->type != VKV_JSON_NULL && !whole(l, 0)) return "\"length\" is not a whole number";
    if (!vkv_ruler_find_task(json_get_str(row, "task"))) return "\"task\" is not one of RULER's 13 tasks";
    return NULL;
}

static vkv_status oom(void) { return vkv_error(VKV_ERR_OOM, "out of host memory building a RULER sample"); }

vkv_status vkv_ruler_row_sample(const vkv_json *row, vkv_ruler_sample *out)
{
    memset(out, 0, sizeof *out);
    out->context = strdup(json_get_str(row, "context"));
    out->question = strdup(json_get_str(row, "question"));
    out->answer_prefix = strdup(json_get_str(row, "answer_prefix"));
    if (!out->context || !out->question || !out->answer_prefix ||
        !json_string_list(vkv_json_get(row, "answer"), &out->answers, &out->n_answers)) {
        vkv_ruler_sample_free(out);
        return oom();
    }
    return VKV_OK;
}

/* ---- word lists ---- */

void vkv_ruler_words_free(char **words, size_t n)
{
    for (size_t i = 0; i < n; i++) free(words[i]);
    free(words);
}

vkv_status vkv_ruler_read_words(const char *path, char ***words, size_t *n)
{
    *words = NULL;
    *n = 0;
    char *data;
    size_t len;
    vkv_status st = vkv_read_file(path, (size_t)64 << 20, &data, &len);
    if (st) return st;
    char **w = NULL;
    size_t nw = 0, cap = 0;
    for (size_t i = 0; i < len && !st;) {
        size_t e = i;
        while (e < len && data[e] != '\n') e++;
        size_t l = e;
        if (l > i && data[l - 1] == '\r') l--;
        bool ok = l - i >= 3 && l - i <= 12;
        for (size_t k = i; k < l && ok; k++) ok = data[k] >= 'a' && data[k] <= 'z';
        /* the list is sorted, so a repeat follows its first */
        if (ok && nw && strlen(w[nw - 1]) == l - i && !memcmp(w[nw - 1], data + i, l - i)) ok = false;
        if (ok) {
            if (nw == cap) {
                char **g = realloc(w, sizeof *g * (cap ? cap * 2 : 4096));
                if (!g) {
                    st = oom();
                    break;
                }
                w = g;
                cap = cap ? cap * 2 : 4096;
            }
            if (!(w[nw] = malloc(l - i + 1))) {
                st = oom();
                break;
            }
            memcpy(w[nw], data + i, l - i);
            w[nw++][l - i] = 0;
        }
        i = e + 1;
    }
    free(data);
    if (!st && nw < 1000)
        st = vkv_error(VKV_ERR_FORMAT, "%s: %zu words of 3-12 lower-case letters, a word list needs at least 1000", path,
                       nw);
    if (st) {
        vkv_ruler_words_free(w, nw);
        return st;
    }
    *words = w;
    *n = nw;
    return VKV_OK;
}

/* ---- question-answering sets (RULER's read_squad / read_hotpotqa) ---- */

void vkv_ruler_qa_set_free(vkv_ruler_qa_set *s)
{
    for (size_t i = 0; i < s->n_docs; i++) free(s->docs[i]);
    free(s->docs);
    for (size_t i = 0; i < s->n_qas; i++) {
        vkv_ruler_qa *q = &s->qas[i];
        free(q->question);
        string_list_free(q->answers);
        free(q->gold);
        free(q->more);
    }
    free(s->qas);
    memset(s, 0, sizeof *s);
}

/* A growing list of malloc'ed strings. */
typedef struct str_list {
    char **v;
    size_t n, cap;
} str_list;

static bool str_list_add(str_list *l, char *owned)
{
    if (!owned) return false;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        char **g = realloc(l->v, sizeof *g * cap);
        if (!g) {
            free(owned);
            return false;
        }
        l->v = g;
        l->cap = cap;
    }
    l->v[l->n++] = owned;
    return true;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorts the documents and removes repeats (Python's sorted(set(docs))). */
static void docs_unique(str_list *d)
{
    if (d->n) qsort(d->v, d->n, sizeof *d->v, cmp_str);
    size_t k = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (k && !strcmp(d->v[k - 1], d->v[i])) free(d->v[i]);
        else d->v[k++] = d->v[i];
    }
    d->n = k;
}

static size_t doc_index(const str_list *d, const char *text)
{
    char *const *hit = bsearch(&text, d->v, d->n, sizeof *d->v, cmp_str);
    return hit ? (size_t)(hit - d->v) : 0;
}

/* HotpotQA's document: "title\n" + the sentences joined. */
static char *hotpot_doc(const vkv_json *pair)
{
    const vkv_json *title = vkv_json_at(pair, 0), *sents = vkv_json_at(pair, 1);
    if (!title || title->type != VKV_JSON_STRING || !sents || sents->type != VKV_JSON_ARRAY) return NULL;
    vkv_strbuf b = {0};
    vkv_strbuf_puts(&b, title->string);
    vkv_strbuf_put(&b, "\n", 1);
    for (size_t i = 0; i < sents->n_items; i++)
        if (sents->items[i]->type == VKV_JSON_STRING) vkv_strbuf_puts(&b, sents->items[i]->string);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

static bool add_qa(vkv_ruler_qa_set *set, size_t *cap, const char *question, const vkv_json *answers_json,
                   const char *single_answer)
{
    if (set->n_qas == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        vkv_ruler_qa *g = realloc(set->qas, sizeof *g * c);
        if (!g) return false;
        set->qas = g;
        *cap = c;
    }
    vkv_ruler_qa *q = &set->qas[set->n_qas];
    memset(q, 0, sizeof *q);
    q->question = strdup(question);
    bool ok = q->question != NULL;
    if (ok && !single_answer) {
        q->answers = calloc(answers_json->n_items + 1, sizeof *q->answers);
        ok = q->answers != NULL;
        for (size_t i = 0; ok && i < answers_json->n_items; i++) {
            const char *t = json_get_str(answers_json->items[i], "text");
            if (t) ok = (q->answers[q->n_answers++] = strdup(t)) != NULL;
        }
    } else if (ok && single_answer) {
        q->answers = calloc(2, sizeof *q->answers);
        ok = q->answers && (q->answers[q->n_answers++] = strdup(single_answer)) != NULL;
    }
    set->n_qas++; /* freed with the set either way */
    return ok;
}

static vkv_status qa_format(const char *path, const char *what)
{
    return vkv_error(VKV_ERR_FORMAT, "%s: not %s's layout (%s)", path, strstr(what, "paragraph") ? "SQuAD" : "HotpotQA",
                     what);
}

vkv_status vkv_ruler_read_squad(const char *path, vkv_ruler_qa_set *out)
{
    memset(out, 0, sizeof *out);
    vkv_json_doc *doc;
    vkv_status st = vkv_json_parse_file(path, &doc);
    if (st) return st;
    const vkv_json *data = vkv_json_get(vkv_json_root(doc), "data");
    str_list docs = {0};
    size_t cap = 0;
    if (!data || data->type != VKV_JSON_ARRAY) st = qa_format(path, "no \"data\" array of articles with paragraphs");
    /* the documents first, then each question with its paragraph and its article's others */
    for (int pass = 0; pass < 2 && !st; pass++) {
        if (pass == 1) docs_unique(&docs);
        for (size_t a = 0; a < data->n_items && !st; a++) {
            const vkv_json *paras = vkv_json_get(data->items[a], "paragraphs");
            if (!paras || paras->type != VKV_JSON_ARRAY) {
                st = qa_format(path, "an article without a \"paragraphs\" array");
                break;
            }
            for (size_t p = 0; p < paras->n_items && !st; p++) {
                const char *ctx = json_get_str(paras->items[p], "context");
                const vkv_json *qas = vkv_json_get(paras->items[p], "qas");
                if (!ctx || !qas || qas->type != VKV_JSON_ARRAY) {
                    st = qa_format(path, "a paragraph without a \"context\" string and a \"qas\" array");
                    break;
                }
                if (pass == 0) {
                    if (!str_list_add(&docs, strdup(ctx))) st = oom();
                    continue;
                }
                for (size_t k = 0; k < qas->n_items && !st; k++) {
                    const vkv_json *qa = qas->items[k], *imp = vkv_json_get(qa, "is_impossible");
                    const char *question = json_get_str(qa, "question");
                    const vkv_json *ans = vkv_json_get(qa, "answers");
                    if (imp && imp->type == VKV_JSON_BOOL && imp->boolean) continue;
                    if (!question || !ans || ans->type != VKV_JSON_ARRAY) {
                        st = qa_format(path, "a paragraph's question without \"question\" and \"answers\"");
                        break;
                    }
                    if (!add_qa(out, &cap, question, ans, NULL)) {
                        st = oom();
                        break;
                    }
                    vkv_ruler_qa *q = &out->qas[out->n_qas - 1];
                    size_t self = doc_index(&docs, ctx);
                    q->gold = malloc(sizeof *q->gold);
                    q->more = malloc(sizeof *q->more * (paras->n_items ? paras->n_items : 1));
                    if (!q->gold || !q->more) {
                        st = oom();
                        break;
                    }
                    q->gold[q->n_gold++] = self;
                    for (size_t o = 0; o < paras->n_items; o++) {
                        const char *oc = json_get_str(paras->items[o], "context");
                        size_t oi = oc ? doc_index(&docs, oc) : self;
                        if (oi != self) q->more[q->n_more++] = oi;
                    }
                }
            }
        }
    }
    vkv_json_free(doc);
    out->docs = docs.v;
    out->n_docs = docs.n;
    if (!st && !out->n_qas) st = qa_format(path, "no answerable question in its paragraphs");
    if (st) vkv_ruler_qa_set_free(out);
    return st;
}

vkv_status vkv_ruler_read_hotpotqa(const char *path, vkv_ruler_qa_set *out)
{
    memset(out, 0, sizeof *out);
    vkv_json_doc *doc;
    vkv_status st = vkv_json_parse_file(path, &doc);
    if (st) return st;
    const vkv_json *data = vkv_json_root(doc);
    str_list docs = {0};
    size_t cap = 0;
    if (data->type != VKV_JSON_ARRAY) st = qa_format(path, "not a list of questions");
    for (int pass = 0; pass < 2 && !st; pass++) {
        if (pass == 1) docs_unique(&docs);
        for (size_t i = 0; i < data->n_items && !st; i++) {
            const vkv_json *d = data->items[i], *ctx = vkv_json_get(d, "context");
            const char *question = json_get_str(d, "question"), *answer = json_get_str(d, "answer");
            if (!question || !answer || !ctx || ctx->type != VKV_JSON_ARRAY) {
                st = qa_format(path, "a question without \"question\", \"answer\" and a \"context\" list");
                break;
            }
            if (pass == 1 && !add_qa(out, &cap, question, NULL, answer)) {
                st = oom();
                break;
            }
            vkv_ruler_qa *q = pass ? &out->qas[out->n_qas - 1] : NULL;
            if (q && !(q->gold = malloc(sizeof *q->gold * (ctx->n_items ? ctx->n_items : 1)))) {
                st = oom();
                break;
            }
            for (size_t c = 0; c < ctx->n_items && !st; c++) {
                char *text = hotpot_doc(ctx->items[c]);
                if (!text) st = qa_format(path, "a context entry that is not [title, [sentences]]");
                else if (!q) {
                    if (!str_list_add(&docs, text)) st = oom();
                } else {
                    q->gold[q->n_gold++] = doc_index(&docs, text);
                    free(text);
                }
            }
        }
    }
    vkv_json_free(doc);
    out->docs = docs.v;
    out->n_docs = docs.n;
    if (!st && !out->n_qas) st = qa_format(path, "no question");
    if (st) vkv_ruler_qa_set_free(out);
    return st;
}

/* ---- the essays as RULER reads them ---- */

vkv_status vkv_ruler_read_essays(const char *dir, char **text, size_t *len)
{
    return vkv_niah_read_dir(dir, "", NULL, NULL, text, len); /* as they are, one after another */
}

/* ---- versions ---- */

const char *vkv_ruler_version_name(vkv_ruler_version v) { return v == VKV_RULER_HEAD ? "head" : "2024"; }

bool vkv_ruler_version_parse(const char *s, vkv_ruler_version *v)
{
    if (!strcmp(s, "2024") || !strcmp(s, VKV_RULER_2024_COMMIT)) *v = VKV_RULER_2024;
    else if (!strcmp(s, "head")) *v = VKV_RULER_HEAD;
    else return false;
    return true;
}

/* What a generator run found for one (task, length, seed): late-2024
 * RULER's haystack size, and variable tracking's solved example. */
struct vkv_ruler_size {
    int task;
    size_t length;
    uint64_t seed;
    size_t units;
    char *example;         /* vt: the text before the task's own prompt */
    size_t example_tokens; /* what RULER counts for it */
};

void vkv_ruler_gen_free(vkv_ruler_gen *g)
{
    for (size_t i = 0; i < g->n_sizes; i++) free(g->sizes[i].example);
    free(g->sizes);
    g->sizes = NULL;
    g->n_sizes = 0;
}

/* ---- the generator (RULER's scripts/data/synthetic rules) ---- */

/* RULER's repeated noise sentence. */
#define NOISE_SENTENCE "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."

/* The needle depths RULER draws from: round(linspace(0, 100, 40)). */
static int depth_at(int i) { return (int)lround(100.0 * i / 39.0); }

/* A word of the essays: bytes [start, start + len) of the text. */
typedef struct essay_word {
    size_t start, len;
} essay_word;

typedef struct gen {
    const vkv_ruler_task *t;
    const vkv_ruler_sources *src;
    vkv_ruler_version version;
    bool example;           /* vt: building late-2024's solved example */
    vkv_rng rng;
    uint64_t seed;          /* RULER's random_seed, for its fixed-seed shuffles */
    size_t length;
    const essay_word *words; /* the essays' words, as RULER splits them */
    size_t n_words;
    vkv_strbuf ctx, q, ap;
    char **answers;
    size_t n_answers;
    bool oom, small; /* small: the haystack has too few units for the task */
} gen;

static bool v2024(const gen *g) { return g->version == VKV_RULER_2024; }

static void add_answer(gen *g, const char *s)
{
    char **a = realloc(g->answers, sizeof *a * (g->n_answers + 2));
    char *c = strdup(s);
    if (!a || !c) {
        free(c);
        if (a) g->answers = a;
        g->oom = true;
        return;
    }
    g->answers = a;
    a[g->n_answers++] = c;
    a[g->n_answers] = NULL;
}

static void shuffle_idx(vkv_rng *r, size_t *v, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = vkv_rng_below(r, (uint32_t)i);
        size_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* RULER's random.Random(random_seed).shuffle(x): a permutation that depends
 * on the seed and the list's length alone, the same in every sample. */
static void seed_shuffle(const gen *g, size_t *v, size_t n)
{
    vkv_rng r = vkv_rng_new(g->seed * 0x9e3779b97f4a7c15ull + 0x243f6a8885a308d3ull);
    shuffle_idx(&r, v, n);
}

/* k distinct values of [0, n) in random order (k <= n); v[k]. */
static bool sample_idx(vkv_rng *r, size_t n, size_t k, size_t *v)
{
    size_t *all = malloc(sizeof *all * (n ? n : 1));
    if (!all) return false;
    for (size_t i = 0; i < n; i++) all[i] = i;
    for (size_t i = 0; i < k; i++) {
        size_t j = i + vkv_rng_below(r, (uint32_t)(n - i));
        size_t t = all[i];
        all[i] = all[j];
        all[j] = t;
        v[i] = all[i];
    }
    free(all);
    return true;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* A needle's key or value of RULER's kinds: a 7-digit number, a version-4
 * UUID, or two words joined by '-' (RULER's adjective-noun pairs; the word
 * list has no parts of speech). */
static void random_item(gen *g, vkv_ruler_item kind, char *buf, size_t n)
{
    if (kind == VKV_RULER_NUMBERS) {
        snprintf(buf, n, "%u", 1000000u + vkv_rng_below(&g->rng, 9000000u));
    } else if (kind == VKV_RULER_UUIDS) {
        uint64_t hi = vkv_rng_u64(&g->rng), lo = vkv_rng_u64(&g->rng);
        hi = (hi & ~0xf000ull) | 0x4000ull;                       /* version 4 */
        lo = (lo & ~(0xc000ull << 48)) | (0x8000ull << 48);        /* RFC 4122 variant */
        snprintf(buf, n, "%08x-%04x-%04x-%04x-%012llx", (unsigned)(hi >> 32), (unsigned)(hi >> 16) & 0xffff,
                 (unsigned)hi & 0xffff, (unsigned)(lo >> 48), (unsigned long long)(lo & 0xffffffffffffull));
    } else {
        const vkv_ruler_sources *s = g->src;
        snprintf(buf, n, "%s-%s", s->words[vkv_rng_below(&g->rng, (uint32_t)s->n_words)],
                 s->words[vkv_rng_below(&g->rng, (uint32_t)s->n_words)]);
    }
}

static const char *item_plural(vkv_ruler_item k)
{
    return k == VKV_RULER_NUMBERS ? "numbers" : k == VKV_RULER_UUIDS ? "uuids" : "words";
}

/* The length of the white space character (Python's str.isspace) at
 * p[0, n), or 0. */
static size_t py_space(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    if (p[0] < 0x80) return p[0] == ' ' || (p[0] >= '\t' && p[0] <= '\r') || (p[0] >= 0x1c && p[0] <= 0x1f);
    if (n >= 2 && p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0)) return 2;
    if (n < 3) return 0;
    if ((p[0] == 0xe1 && p[1] == 0x9a && p[2] == 0x80) || (p[0] == 0xe3 && p[1] == 0x80 && p[2] == 0x80) ||
        (p[0] == 0xe2 && p[1] == 0x81 && p[2] == 0x9f) ||
        (p[0] == 0xe2 && p[1] == 0x80 && (p[2] <= 0x8a || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf)))
        return 3;
    return 0;
}

/* The essays' words as RULER splits them: re.sub(r"\s+", " ", text).split(" "),
 * an empty first (last) word when the text starts (ends) with white space. */
static essay_word *split_essays(const char *t, size_t len, size_t *n)
{
    size_t cap = 1024, k = 0;
    essay_word *w = malloc(sizeof *w * cap);
    if (!w) return NULL;
    size_t i = 0;
    bool ws_run = false;
    if (len && py_space(t, len)) w[k++] = (essay_word){0, 0};
    while (i < len) {
        size_t sl = py_space(t + i, len - i);
        if (sl) {
            i += sl;
            ws_run = true;
            continue;
        }
        size_t e = i;
        while (e < len && !py_space(t + e, len - e)) e++;
        if (k + 2 > cap) {
            essay_word *g = realloc(w, sizeof *g * (cap *= 2));
            if (!g) {
                free(w);
                return NULL;
            }
            w = g;
        }
        w[k++] = (essay_word){i, e - i};
        ws_run = false;
        i = e;
    }
    if (ws_run && k) w[k++] = (essay_word){len, 0};
    *n = k;
    return w;
}

/* " ".join(the first n words): late-2024 RULER takes at most all of them,
 * RULER's head repeats them as often as needed. */
static void essay_text(const gen *g, size_t n, vkv_strbuf *b)
{
    if (v2024(g) && n > g->n_words) n = g->n_words;
    for (size_t i = 0; i < n && g->n_words; i++) {
        const essay_word *w = &g->words[i % g->n_words];
        if (i) vkv_strbuf_put(b, " ", 1);
        vkv_strbuf_put(b, g->src->essays + w->start, w->len);
    }
}

/* Strings joined by sep, with the strings ins[k] inserted before the
 * strings at[k] (ascending; RULER's list insertions), into b. */
static void join_with_inserts(vkv_strbuf *b, const char *const *items, size_t n, char *const *ins, const size_t *at,
                              size_t n_ins, const char *sep)
{
    size_t k = 0;
    bool first = true;
    for (size_t i = 0; i <= n; i++) {
        while (k < n_ins && at[k] == i) {
            if (!first) vkv_strbuf_puts(b, sep);
            vkv_strbuf_puts(b, ins[k++]);
            first = false;
        }
        if (i == n) break;
        if (!first) vkv_strbuf_puts(b, sep);
        vkv_strbuf_puts(b, items[i]);
        first = false;
    }
}

/* The essay haystack of n words with the needles between its sentences,
 * at depths drawn from RULER's 40 (nltk.sent_tokenize's sentences,
 * src/eval/sentences.h; joined by spaces as RULER joins them). */
static void essay_with_needles(gen *g, size_t n_hay, char *const *needles, size_t n_needles)
{
    vkv_strbuf text = {0};
    vkv_strbuf_put(&text, "", 0);
    essay_text(g, n_hay, &text);
    size_t b = 0, e = text.n; /* RULER splits text.strip() */
    while (b < e && text.p[b] == ' ') b++;
    while (e > b && text.p[e - 1] == ' ') e--;
    vkv_sentence *s = NULL;
    size_t n_sent = 0, d[16], at[16];
    if (text.oom || vkv_sentences_split(text.p + b, e - b, &s, &n_sent) || !sample_idx(&g->rng, 40, n_needles, d)) {
        g->oom = true;
    } else {
        for (size_t i = 0; i < n_needles; i++)
            at[i] = (size_t)((double)n_sent * ((double)depth_at((int)d[i]) / 100.0));
        qsort(at, n_needles, sizeof *at, cmp_size);
        /* " ".join(sentences[a:b]) between the needles, all joined by " " */
        size_t prev = 0;
        for (size_t i = 0; i <= n_needles; i++) {
            size_t cut = i < n_needles ? at[i] : n_sent;
            if (i) vkv_strbuf_put(&g->ctx, " ", 1);
            for (size_t k = prev; k < cut; k++) {
                if (k > prev) vkv_strbuf_put(&g->ctx, " ", 1);
                vkv_strbuf_put(&g->ctx, text.p + b + s[k].start, s[k].end - s[k].start);
            }
            if (i < n_needles) {
                vkv_strbuf_put(&g->ctx, " ", 1);
                vkv_strbuf_puts(&g->ctx, needles[i]);
            }
            prev = cut;
        }
    }
    free(s);
    free(text.p);
}

static void gen_niah(gen *g, size_t n_hay)
{
    const vkv_ruler_task *t = g->t;
    int num_k = t->num_k > t->num_q ? t->num_k : t->num_q;
    size_t n_needles = (size_t)num_k * (size_t)t->num_v;
    char keys[4][64], values[4][4][64];
    char *needles[16] = {0};
    bool single = t->num_q * t->num_v == 1;
    char tv[16];
    snprintf(tv, sizeof tv, "%s", item_plural(t->value));
    if (single) tv[strlen(tv) - 1] = 0; /* RULER's singular: "number", "uuid", "word" */
    for (int k = 0; k < num_k; k++) {
        random_item(g, t->key, keys[k], sizeof keys[k]);
        for (int v = 0; v < t->num_v; v++) {
            random_item(g, t->value, values[k][v], sizeof values[k][v]);
            char buf[256];
            snprintf(buf, sizeof buf, "One of the special magic %s for %s is: %s.", item_plural(t->value), keys[k],
                     values[k][v]);
            if (!(needles[k * t->num_v + v] = strdup(buf))) g->oom = true;
        }
    }
    size_t order[16];
    for (size_t i = 0; i < n_needles; i++) order[i] = i;
    seed_shuffle(g, order, n_needles);
    char *shuffled[16];
    for (size_t i = 0; i < n_needles; i++) shuffled[i] = needles[order[i]];

    vkv_strbuf_puts(&g->ctx, single ? "A special magic " : "Some special magic ");
    vkv_strbuf_puts(&g->ctx, tv);
    vkv_strbuf_puts(&g->ctx, single ? " is hidden within the following text. Make sure to memorize it. I will quiz you "
                                      "about the "
                                    : " are hidden within the following text. Make sure to memorize it. I will quiz "
                                      "you about the ");
    vkv_strbuf_puts(&g->ctx, tv);
    vkv_strbuf_puts(&g->ctx, " afterwards.\n");
    if (t->haystack == VKV_RULER_ESSAY) {
        if (!g->oom) essay_with_needles(g, n_hay, shuffled, n_needles);
    } else {
        /* noise sentences or needles of random keys, one a line; the needles at random lines */
        char **lines = calloc(n_hay ? n_hay : 1, sizeof *lines);
        size_t at[16];
        if (n_hay < n_needles) g->small = true;
        else if (!lines || !sample_idx(&g->rng, n_hay, n_needles, at)) g->oom = true;
        for (size_t i = 0; lines && i < n_hay && !g->oom; i++) {
            if (t->haystack == VKV_RULER_NOISE) {
                lines[i] = NOISE_SENTENCE;
                continue;
            }
            char k[64], v[64], buf[256];
            random_item(g, t->key, k, sizeof k);
            random_item(g, t->value, v, sizeof v);
            snprintf(buf, sizeof buf, "One of the special magic %s for %s is: %s.", item_plural(t->value), k, v);
            if (!(lines[i] = strdup(buf))) g->oom = true;
        }
        if (!g->oom) {
            /* RULER inserts at the sampled indexes, largest first, paired with
             * the needles in order: the needle of index a ends up before
             * original line a, the smallest index with the last needle */
            size_t pos[16];
            char *ins[16];
            qsort(at, n_needles, sizeof *at, cmp_size);
            for (size_t i = 0; i < n_needles; i++) {
                pos[i] = at[i];
                ins[i] = shuffled[n_needles - 1 - i];
            }
            join_with_inserts(&g->ctx, (const char *const *)lines, n_hay, ins, pos, n_needles, "\n");
        }
        if (lines && t->haystack == VKV_RULER_NEEDLES)
            for (size_t i = 0; i < n_hay; i++) free(lines[i]);
        free(lines);
    }
    vkv_strbuf_put(&g->ctx, "\n", 1);

    size_t qi[4];
    if (!sample_idx(&g->rng, (size_t)num_k, (size_t)t->num_q, qi)) g->oom = true;
    vkv_strbuf query = {0};
    vkv_strbuf_put(&query, "", 0);
    for (int i = 0; i < t->num_q && !g->oom; i++) {
        if (i) vkv_strbuf_puts(&query, i == t->num_q - 1 ? ", and " : ", "); /* "a, b, and c" */
        vkv_strbuf_puts(&query, keys[qi[i]]);
        for (int v = 0; v < t->num_v; v++) add_answer(g, values[qi[i]][v]);
    }
    if (query.oom) g->oom = true;
    vkv_strbuf_puts(&g->q, single ? "What is the special magic " : "What are all the special magic ");
    vkv_strbuf_puts(&g->q, tv);
    vkv_strbuf_puts(&g->q, " for ");
    vkv_strbuf_puts(&g->q, query.p ? query.p : "");
    vkv_strbuf_puts(&g->q, " mentioned in the provided text? ");
    vkv_strbuf_puts(&g->ap, "The special magic ");
    vkv_strbuf_puts(&g->ap, tv);
    vkv_strbuf_puts(&g->ap, " for ");
    vkv_strbuf_puts(&g->ap, query.p ? query.p : "");
    vkv_strbuf_puts(&g->ap, single ? " mentioned in the provided text is" : " mentioned in the provided text are");
    free(query.p);
    for (size_t i = 0; i < n_needles; i++) free(needles[i]);
}

/* Variable tracking: one chain of 4 hops among n_hay noise sentences
 * (RULER's vt). Late 2024: the noise ends with '\n' and the items are
 * joined by spaces (a chain's step shares the line of the noise after it),
 * a haystack of at most 5 noises is cut into its sentences, and the answer
 * prefix spells "assgined"; head: one item a line. The solved example of
 * late 2024 (g->example): 3-letter variables, and RULER's template with
 * the white space runs of its first part made single spaces and its last
 * word dropped. */
static void gen_vt(gen *g, size_t n_hay)
{
    enum { HOPS = 4, VARS = HOPS + 1 };
    int var_len = g->example ? 3 : 5;
    char vars[VARS][6];
    for (int i = 0; i < VARS; i++) {
        bool dup;
        do {
            for (int c = 0; c < var_len; c++) vars[i][c] = (char)('A' + vkv_rng_below(&g->rng, 26));
            vars[i][var_len] = 0;
            dup = false;
            for (int j = 0; j < i; j++) dup |= !strcmp(vars[i], vars[j]);
        } while (dup);
    }
    char value[8], chain[VARS][64];
    snprintf(value, sizeof value, "%u", 10000u + vkv_rng_below(&g->rng, 89999u));
    snprintf(chain[0], sizeof chain[0], "VAR %s = %s", vars[0], value);
    for (int j = 0; j < HOPS; j++) snprintf(chain[j + 1], sizeof chain[j + 1], "VAR %s = VAR %s ", vars[j + 1], vars[j]);
    static const char *const pieces[] = {"The grass is green.", " The sky is blue.", " The sun is yellow.",
                                         " Here we go.", " There and back again.", "\n"};
    bool cut = v2024(g) && n_hay <= VARS; /* RULER's noise too short for the chain */
    size_t n_items = cut ? n_hay * 6 : n_hay;
    const char **items = malloc(sizeof *items * (n_items ? n_items : 1));
    size_t at[VARS];
    if (n_items < VARS) g->small = true; /* a haystack needs a place for each step */
    else if (!items || !sample_idx(&g->rng, n_items, VARS, at)) g->oom = true;
    if (g->small || g->oom) {
        free(items);
        return;
    }
    for (size_t i = 0; i < n_items; i++)
        items[i] = cut ? pieces[i % 6] : v2024(g) ? NOISE_SENTENCE "\n" : NOISE_SENTENCE;
    qsort(at, VARS, sizeof *at, cmp_size);
    char *ins[VARS];
    for (int j = 0; j < VARS; j++) ins[j] = chain[j];
    vkv_strbuf context = {0};
    vkv_strbuf_put(&context, "", 0);
    join_with_inserts(&context, items, n_items, ins, at, VARS, v2024(g) ? " " : "\n");
    free(items);
    if (context.oom) {
        g->oom = true;
        return;
    }
    if (v2024(g)) { /* context.replace(". \n", ".\n") */
        size_t k = 0;
        for (size_t i = 0; i < context.n; i++) {
            if (i + 2 < context.n && context.p[i] == '.' && context.p[i + 1] == ' ' && context.p[i + 2] == '\n') {
                context.p[k++] = '.';
                i++;
                continue;
            }
            context.p[k++] = context.p[i];
        }
        context.p[k] = 0;
        context.n = k;
    }
    const char *spelling = v2024(g) ? "assgined" : "assigned";
    char buf[256];
    if (g->example) {
        vkv_strbuf_puts(&g->ctx, "Memorize and track the chain(s) of variable assignment hidden in the following text. ");
        vkv_strbuf_puts(&g->ctx, context.p);
        snprintf(buf, sizeof buf, " Question: Find all variables that are assigned the value %s in the text", value);
        vkv_strbuf_puts(&g->ctx, buf);
        snprintf(buf, sizeof buf, " Answer: According to the chain(s) of variable assignment in the text above, %d "
                                  "variables are %s the value %s, they are: ", VARS, spelling, value);
        vkv_strbuf_puts(&g->ctx, buf);
    } else {
        vkv_strbuf_puts(&g->ctx, "Memorize and track the chain(s) of variable assignment hidden in the following "
                                 "text.\n\n");
        vkv_strbuf_puts(&g->ctx, context.p);
        vkv_strbuf_put(&g->ctx, "\n", 1);
        snprintf(buf, sizeof buf, "Question: Find all variables that are assigned the value %s in the text above. ",
                 value);
        vkv_strbuf_puts(&g->q, buf);
        snprintf(buf, sizeof buf, "Answer: According to the chain(s) of variable assignment in the text above, %d "
                                  "variables are %s the value %s, they are: ", VARS, spelling, value);
        vkv_strbuf_puts(&g->ap, buf);
    }
    free(context.p);
    for (int i = 0; i < VARS; i++) add_answer(g, vars[i]);
}

#define CWE_HEAD "Below is a numbered list of words. In these words, some appear more often than others. Memorize the " \
                 "ones that appear most often.\n"
#define CWE_QUESTION "Question: What are the 10 most common words in the above list? "
#define CWE_PREFIX "Answer: The top 10 words that appear most often in the list are:"

/* One list of RULER's common-words task: num_words distinct words, the
 * first 10 repeated `common` times, the others `uncommon` times (RULER's
 * common * c + uncommon * u), put in RULER's fixed-seed order, numbered
 * "1. w 2. w ...". The 10 common words into common[]. */
static void cwe_list(gen *g, size_t num_words, int common, int uncommon, vkv_strbuf *b, const char **common_words)
{
    size_t *pick = malloc(sizeof *pick * num_words);
    size_t total = 10 * (size_t)common + (num_words - 10) * (size_t)uncommon;
    size_t *list = malloc(sizeof *list * (total ? total : 1));
    if (!pick || !list || !sample_idx(&g->rng, g->src->n_words, num_words, pick)) {
        g->oom = true;
        free(pick);
        free(list);
        return;
    }
    size_t k = 0;
    for (int r = 0; r < common; r++)
        for (size_t w = 0; w < 10; w++) list[k++] = pick[w];
    for (int r = 0; r < uncommon; r++)
        for (size_t w = 10; w < num_words; w++) list[k++] = pick[w];
    seed_shuffle(g, list, total);
    for (size_t i = 0; i < total; i++) {
        char num[24];
        snprintf(num, sizeof num, "%s%zu. ", i ? " " : "", i + 1);
        vkv_strbuf_puts(b, num);
        vkv_strbuf_puts(b, g->src->words[list[i]]);
    }
    for (int i = 0; i < 10; i++) common_words[i] = g->src->words[pick[i]];
    free(pick);
    free(list);
}

/* Common words: one solved example, then the list (RULER's repeats: 3/1 and
 * 6/1 under 4096 tokens, 10/3 and 30/3 from 4096). The example's answer
 * follows its prefix directly in late 2024 ("are:1. w"), after a space in
 * RULER's head. */
static void gen_cwe(gen *g, size_t num_words)
{
    bool short_ctx = g->length < 4096;
    const char *ex_common[10], *common[10];
    vkv_strbuf_puts(&g->ctx, CWE_HEAD);
    cwe_list(g, short_ctx ? 20 : 40, short_ctx ? 3 : 10, short_ctx ? 1 : 3, &g->ctx, ex_common);
    if (g->oom) return;
    vkv_strbuf_puts(&g->ctx, "\n" CWE_QUESTION CWE_PREFIX);
    for (int i = 0; i < 10; i++) {
        char num[24];
        snprintf(num, sizeof num, "%s%d. ", i || !v2024(g) ? " " : "", i + 1);
        vkv_strbuf_puts(&g->ctx, num);
        vkv_strbuf_puts(&g->ctx, ex_common[i]);
    }
    vkv_strbuf_puts(&g->ctx, "\n" CWE_HEAD);
    cwe_list(g, num_words, short_ctx ? 6 : 30, short_ctx ? 1 : 3, &g->ctx, common);
    if (g->oom) return;
    vkv_strbuf_put(&g->ctx, "\n", 1);
    for (int i = 0; i < 10; i++) add_answer(g, common[i]);
    vkv_strbuf_puts(&g->q, CWE_QUESTION);
    vkv_strbuf_puts(&g->ap, CWE_PREFIX);
}

/* The frequent-words vocabulary's size: length / 50 in late 2024,
 * (length - 50) / 50 in RULER's head. */
static size_t fwe_vocab_size(const gen *g)
{
    return (g->length - (v2024(g) ? 0 : vkv_ruler_max_new_tokens(g->t))) / 50;
}

/* Frequent words: coded 6-letter words, rank k drawn num_words * k^-2 /
 * zeta(2) times (RULER's alpha 2), the most frequent replaced by "..." as
 * noise, in RULER's fixed-seed order; the answer is the next three. */
static void gen_fwe(gen *g, size_t num_words)
{
    size_t vocab_size = fwe_vocab_size(g);
    char (*vocab)[8] = malloc(sizeof *vocab * vocab_size);
    if (!vocab) {
        g->oom = true;
        return;
    }
    for (size_t i = 0; i < vocab_size; i++) {
        bool dup;
        do {
            for (int c = 0; c < 6; c++) vocab[i][c] = (char)('a' + vkv_rng_below(&g->rng, 26));
            vocab[i][6] = 0;
            dup = false;
            for (size_t j = 0; j < i && !dup; j++) dup = !strcmp(vocab[i], vocab[j]);
        } while (dup);
    }
    strcpy(vocab[0], "...");
    const double zeta2 = M_PI * M_PI / 6;
    size_t total = 0;
    for (size_t k = 0; k < vocab_size; k++) total += (size_t)((double)num_words * pow((double)(k + 1), -2.0) / zeta2);
    size_t *list = malloc(sizeof *list * (total ? total : 1)), n = 0;
    if (!list) {
        free(vocab);
        g->oom = true;
        return;
    }
    for (size_t k = 0; k < vocab_size; k++)
        for (size_t r = (size_t)((double)num_words * pow((double)(k + 1), -2.0) / zeta2); r; r--) list[n++] = k;
    seed_shuffle(g, list, n);
    vkv_strbuf_puts(&g->ctx, "Read the following coded text and track the frequency of each coded word. Find the three "
                             "most frequently appeared coded words. ");
    for (size_t i = 0; i < n; i++) {
        if (i) vkv_strbuf_put(&g->ctx, " ", 1);
        vkv_strbuf_puts(&g->ctx, vocab[list[i]]);
    }
    vkv_strbuf_put(&g->ctx, "\n", 1);
    for (int i = 1; i <= 3; i++) add_answer(g, vocab[i]);
    vkv_strbuf_puts(&g->q, "Question: Do not provide any explanation. Please ignore the dots '....'. What are the three "
                           "most frequently appeared words in the above coded text? ");
    vkv_strbuf_puts(&g->ap, "Answer: According to the coded text above, the three most frequently appeared words are:");
    free(list);
    free(vocab);
}

#define QA_INSTRUCTION "Answer the question based on the given documents. Only give me the answer and do not " \
                       "output any other words."

/* The question-answering set of qa_1 (SQuAD) or qa_2 (HotpotQA). */
static const vkv_ruler_qa_set *qa_set(const vkv_ruler_task *t, const vkv_ruler_sources *src)
{
    return !strcmp(t->name, "qa_1") ? src->squad : src->hotpotqa;
}

/* Question answering: question `index` of the set, its gold documents, then
 * (SQuAD) its article's other paragraphs, then other documents drawn at
 * random, num_docs in all, in RULER's fixed-seed order, as
 * "Document i:\n..." (RULER's qa). num_docs beyond the set: every document
 * once (late 2024), or repeated as needed (head). */
static void gen_qa(gen *g, size_t num_docs, size_t index)
{
    const vkv_ruler_qa_set *set = qa_set(g->t, g->src);
    const vkv_ruler_qa *q = &set->qas[index % set->n_qas];
    if (v2024(g) && num_docs > set->n_docs) num_docs = set->n_docs;
    size_t *pick = malloc(sizeof *pick * (num_docs + 1));
    bool *used = calloc(set->n_docs, sizeof *used);
    if (!pick || !used) {
        g->oom = true;
        free(pick);
        free(used);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < q->n_gold && n < num_docs; i++) {
        pick[n++] = q->gold[i];
        used[q->gold[i]] = true;
    }
    if (num_docs >= set->n_docs) {
        /* every document, RULER's head repeating them as needed */
        n = 0;
        for (size_t i = 0; i < num_docs; i++) pick[n++] = i % set->n_docs;
    } else if (num_docs - n <= q->n_more) {
        size_t k = num_docs - n, *sel = malloc(sizeof *sel * (k ? k : 1));
        if (!sel || !sample_idx(&g->rng, q->n_more, k, sel)) g->oom = true;
        for (size_t i = 0; i < k && !g->oom; i++) pick[n++] = q->more[sel[i]];
        free(sel);
    } else {
        for (size_t i = 0; i < q->n_more; i++)
            if (!used[q->more[i]]) {
                pick[n++] = q->more[i];
                used[q->more[i]] = true;
            }
        /* the rest drawn from the documents not taken yet */
        while (n < num_docs) {
            size_t d = vkv_rng_below(&g->rng, (uint32_t)set->n_docs);
            if (used[d]) continue;
            used[d] = true;
            pick[n++] = d;
        }
    }
    seed_shuffle(g, pick, n);
    vkv_strbuf_puts(&g->ctx, QA_INSTRUCTION "\n\nThe following are given documents.\n\n");
    for (size_t i = 0; i < n && !g->oom; i++) {
        char head[48];
        snprintf(head, sizeof head, "%sDocument %zu:\n", i ? "\n\n" : "", i + 1);
        vkv_strbuf_puts(&g->ctx, head);
        vkv_strbuf_puts(&g->ctx, set->docs[pick[i]]);
    }
    vkv_strbuf_puts(&g->ctx, "\n\n");
    /* kvpress's split: the question starts at the instruction's last occurrence */
    vkv_strbuf_puts(&g->q, QA_INSTRUCTION "\n\nQuestion: ");
    vkv_strbuf_puts(&g->q, q->question);
    vkv_strbuf_put(&g->q, " ", 1);
    vkv_strbuf_puts(&g->ap, "Answer:");
    for (size_t i = 0; i < q->n_answers; i++) add_answer(g, q->answers[i]);
    free(pick);
    free(used);
}

static void gen_reset(gen *g)
{
    free(g->ctx.p);
    free(g->q.p);
    free(g->ap.p);
    g->ctx = g->q = g->ap = (vkv_strbuf){0};
    string_list_free(g->answers);
    g->answers = NULL;
    g->n_answers = 0;
    g->oom = g->small = false;
}

/* Python's repr() of a string, into b. */
static void py_repr(vkv_strbuf *b, const char *s)
{
    char quote = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    vkv_strbuf_put(b, &quote, 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '\\' || *p == (unsigned char)quote) snprintf(esc, sizeof esc, "\\%c", *p);
        else if (*p == '\n') strcpy(esc, "\\n");
        else if (*p == '\r') strcpy(esc, "\\r");
        else if (*p == '\t') strcpy(esc, "\\t");
        else if (*p < 0x20 || *p == 0x7f) snprintf(esc, sizeof esc, "\\x%02x", *p);
        else {
            esc[0] = (char)*p;
            esc[1] = 0;
        }
        vkv_strbuf_puts(b, esc);
    }
    vkv_strbuf_put(b, &quote, 1);
}

/* What late-2024 RULER adds after the prompt when it sizes the haystack:
 * the answers as each task's script writes them (niah: joined by spaces,
 * right after the prompt; vt and qa: " " and the Python list; cwe: " " and
 * "1. w 2. w ..."). */
static void answer_suffix(const gen *g, vkv_strbuf *b)
{
    switch (g->t->kind) {
    case VKV_RULER_NIAH:
        for (size_t i = 0; i < g->n_answers; i++) {
            if (i) vkv_strbuf_put(b, " ", 1);
            vkv_strbuf_puts(b, g->answers[i]);
        }
        break;
    case VKV_RULER_VT:
    case VKV_RULER_QA:
        vkv_strbuf_puts(b, " [");
        for (size_t i = 0; i < g->n_answers; i++) {
            if (i) vkv_strbuf_puts(b, ", ");
            py_repr(b, g->answers[i]);
        }
        vkv_strbuf_puts(b, "]");
        break;
    case VKV_RULER_CWE:
        for (size_t i = 0; i < g->n_answers; i++) {
            char num[24];
            snprintf(num, sizeof num, " %zu. ", i + 1);
            vkv_strbuf_puts(b, num);
            vkv_strbuf_puts(b, g->answers[i]);
        }
        break;
    case VKV_RULER_FWE: break;
    }
}

/* The sample with n haystack units, its RNG restarted from `start`. */
static vkv_status build(gen *g, vkv_rng start, size_t n, size_t index)
{
    gen_reset(g);
    g->rng = start;
    vkv_strbuf_put(&g->ctx, "", 0);
    vkv_strbuf_put(&g->q, "", 0);
    vkv_strbuf_put(&g->ap, "", 0);
    switch (g->t->kind) {
    case VKV_RULER_NIAH: gen_niah(g, n); break;
    case VKV_RULER_VT: gen_vt(g, n); break;
    case VKV_RULER_CWE: gen_cwe(g, n); break;
    case VKV_RULER_FWE: gen_fwe(g, n); break;
    case VKV_RULER_QA: gen_qa(g, n, index); break;
    }
    if (g->small) return vkv_error(VKV_ERR_ARG, "%s: a haystack of %zu units is too small for the task", g->t->name, n);
    return g->oom || g->ctx.oom || g->q.oom || g->ap.oom ? oom() : VKV_OK;
}

/* The tokens of the built prompt (context, question, answer prefix), with
 * late-2024's answer suffix when asked. */
static vkv_status count_prompt(const gen *g, const vkv_ruler_gen *run, bool suffix, size_t *n)
{
    vkv_strbuf all = {0};
    vkv_strbuf_puts(&all, g->ctx.p);
    vkv_strbuf_puts(&all, g->q.p);
    vkv_strbuf_puts(&all, g->ap.p);
    if (suffix) answer_suffix(g, &all);
    if (all.oom) {
        free(all.p);
        return oom();
    }
    vkv_status st = run->count(run->count_ctx, all.p, n);
    free(all.p);
    return st;
}

/* ---- sizing the haystack: RULER's head (bisection) ---- */

/* The fewest haystack units a task's sample has, and the most the word
 * list allows (0: no bound). */
static void unit_bounds(const gen *g, size_t *lo, size_t *hi)
{
    *hi = 0;
    switch (g->t->kind) {
    case VKV_RULER_NIAH: *lo = 1; break; /* the line haystacks hide one needle */
    case VKV_RULER_VT: *lo = 5; break;
    case VKV_RULER_CWE:
        *lo = 11;
        *hi = g->src->n_words;
        break;
    case VKV_RULER_QA: *lo = 1; break;
    default: *lo = 27; break; /* fwe: the third answer word drawn at least once (27 / 9 / zeta(2) >= 1) */
    }
}

static vkv_status fits_head(gen *g, const vkv_ruler_gen *run, vkv_rng start, size_t n, size_t index, bool *fits)
{
    vkv_status st = build(g, start, n, index);
    size_t nt = 0;
    if (!st) st = count_prompt(g, run, false, &nt);
    *fits = !st && nt + vkv_ruler_max_new_tokens(g->t) <= g->length;
    return st;
}

/* The largest haystack whose prompt and generation fit: doubling, then
 * bisection; the sample built with it. */
static vkv_status size_head(gen *g, const vkv_ruler_gen *run, vkv_rng start, size_t index)
{
    size_t lo, cap;
    unit_bounds(g, &lo, &cap);
    bool fits = false;
    vkv_status st = fits_head(g, run, start, lo, index, &fits);
    if (!st && !fits)
        return vkv_error(VKV_ERR_ARG, "%s: %zu tokens is too short for its smallest prompt and its %u generated tokens",
                         g->t->name, g->length, vkv_ruler_max_new_tokens(g->t));
    size_t good = lo, bad = 0;
    while (!st && !bad) {
        size_t next = good * 2;
        if (cap && next > cap) next = cap;
        if (next == good) break;
        if ((st = fits_head(g, run, start, next, index, &fits))) break;
        if (fits) good = next;
        else bad = next;
    }
    while (!st && bad && bad - good > 1) {
        size_t mid = good + (bad - good) / 2;
        if ((st = fits_head(g, run, start, mid, index, &fits))) break;
        if (fits) good = mid;
        else bad = mid;
    }
    return st ? st : build(g, start, good, index);
}

/* ---- sizing the haystack: late-2024 RULER (steps) ---- */

/* How late-2024 RULER grows a task's haystack: from `inc` units in steps
 * of `inc` (essay 500 words; noise and needle lines 25, 5 under 4096
 * tokens; vt 10 lines; cwe 10 words; qa 10 documents), while the prompt,
 * the answers and the generation fit, up to the units there are. */
typedef struct steps {
    size_t inc, cap;   /* cap 0: none */
    bool cap_before;   /* the essays: capped before the step, the others after it */
    size_t limit;      /* the length */
    uint32_t gen;      /* the generation's tokens */
    size_t extra;      /* vt: its solved example's tokens */
} steps;

static steps steps_of(const gen *g)
{
    steps s = {.inc = 10, .limit = g->length, .gen = vkv_ruler_max_new_tokens(g->t)};
    switch (g->t->kind) {
    case VKV_RULER_NIAH:
        if (g->t->haystack == VKV_RULER_ESSAY) {
            s.inc = 500;
            s.cap = g->n_words;
            s.cap_before = true;
        } else s.inc = g->length < 4096 ? 5 : 25;
        break;
    case VKV_RULER_CWE: s.cap = g->src->n_words; break;
    case VKV_RULER_QA: s.cap = qa_set(g->t, g->src)->n_docs; break;
    default: break;
    }
    return s;
}

/* RULER's search for the run's haystack size: the number of units after
 * growing (0 when even the first step does not fit). */
static vkv_status grow_2024(gen *g, const vkv_ruler_gen *run, const steps *s, vkv_rng start, size_t *units)
{
    size_t n = s->inc, total = 0;
    vkv_status st = VKV_OK;
    while (total + s->gen < s->limit) {
        if ((st = build(g, start, n, 0)) || (st = count_prompt(g, run, true, &total))) break;
        total += s->extra;
        if (total + s->gen > s->limit) {
            n -= s->inc;
            break;
        }
        if (s->cap_before && n > s->cap) {
            n = s->cap;
            break;
        }
        n += s->inc;
        if (s->cap && !s->cap_before && n > s->cap) {
            n = s->cap;
            break;
        }
    }
    *units = n;
    return st;
}

/* A sample from the run's size down, a step at a time, until its prompt
 * and generation fit. */
static vkv_status fit_2024(gen *g, const vkv_ruler_gen *run, const steps *s, vkv_rng start, size_t units, size_t index)
{
    for (size_t n = units; n;) {
        size_t nt;
        vkv_status st = build(g, start, n, index);
        if (!st) st = count_prompt(g, run, false, &nt);
        if (st) return st;
        if (nt + s->gen + s->extra <= s->limit) return VKV_OK;
        if (n <= s->inc) break;
        n -= s->inc;
    }
    return vkv_error(VKV_ERR_ARG, "%s: %zu tokens is too short for late-2024 RULER's smallest haystack (%zu %s) and "
                                  "%u generated tokens", g->t->name, g->length, s->inc,
                     g->t->kind == VKV_RULER_QA ? "documents" : g->t->kind == VKV_RULER_CWE ? "words"
                     : g->t->haystack == VKV_RULER_ESSAY && g->t->kind == VKV_RULER_NIAH ? "words" : "lines",
                     s->gen);
}

/* Frequent words' own search (late 2024): from length / 6 words in steps
 * of length / 32 while the prompt is under the length, one step back; a
 * sample steps down from there until its prompt is within the length
 * (the generation not counted). */
static vkv_status fwe_2024(gen *g, const vkv_ruler_gen *run, vkv_rng start, bool grow, size_t *units)
{
    size_t inc = g->length / 32, n = grow ? g->length / 6 : *units, nt;
    vkv_status st = build(g, start, n, 0);
    if (!st) st = count_prompt(g, run, false, &nt);
    if (grow) {
        while (!st && nt < g->length) {
            n += inc;
            if (!(st = build(g, start, n, 0))) st = count_prompt(g, run, false, &nt);
        }
        *units = n - inc;
        return st;
    }
    while (!st && nt > g->length) {
        if (n <= inc)
            return vkv_error(VKV_ERR_ARG, "%s: %zu tokens is too short for late-2024 RULER's coded text", g->t->name,
                             g->length);
        n -= inc;
        if (!(st = build(g, start, n, 0))) st = count_prompt(g, run, false, &nt);
    }
    return st;
}

/* The random stream of (seed, task, length, sample); the run's own
 * streams (the haystack's search, vt's example) with sample SIZE_MAX and
 * SIZE_MAX - 1. */
static vkv_rng stream(uint64_t seed, const vkv_ruler_task *t, size_t length, size_t index)
{
    vkv_rng mix = vkv_rng_new(seed);
    uint64_t h = vkv_rng_u64(&mix);
    for (const char *c = t->name; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    h ^= (uint64_t)length * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)(index + 1) * 0xc2b2ae3d27d4eb4full;
    return vkv_rng_new(h);
}

/* Late-2024 vt's solved example, the same for every sample and length of
 * a seed: RULER's vt at 500 tokens (noise in steps of 5), its answer after
 * it: " " + example + " " + answers + "\n\n" + "\n\n" goes before the
 * task's prompt; RULER counts the example with its answers and one
 * "\n\n". */
static vkv_status vt_example(const gen *base, const vkv_ruler_gen *run, char **text, size_t *tokens)
{
    gen g = *base;
    g.example = true;
    g.length = 500;
    g.ctx = g.q = g.ap = (vkv_strbuf){0};
    g.answers = NULL;
    g.n_answers = 0;
    steps s = {.inc = 5, .limit = 500, .gen = vkv_ruler_max_new_tokens(g.t)};
    vkv_rng start = stream(g.seed, g.t, 0, SIZE_MAX - 1);
    size_t units;
    vkv_status st = grow_2024(&g, run, &s, start, &units);
    if (!st) st = fit_2024(&g, run, &s, start, units, 0);
    vkv_strbuf b = {0};
    if (!st) {
        vkv_strbuf_puts(&b, g.ctx.p);
        vkv_strbuf_put(&b, " ", 1);
        for (size_t i = 0; i < g.n_answers; i++) {
            if (i) vkv_strbuf_put(&b, " ", 1);
            vkv_strbuf_puts(&b, g.answers[i]);
        }
        vkv_strbuf_puts(&b, "\n\n");
        st = b.oom ? oom() : run->count(run->count_ctx, b.p, tokens);
    }
    gen_reset(&g);
    if (st) {
        free(b.p);
        return st;
    }
    /* the sample's text: " " + example + "\n\n" before the prompt */
    vkv_strbuf t = {0};
    vkv_strbuf_put(&t, " ", 1);
    vkv_strbuf_puts(&t, b.p);
    vkv_strbuf_puts(&t, "\n\n");
    free(b.p);
    if (t.oom) {
        free(t.p);
        return oom();
    }
    *text = t.p;
    return VKV_OK;
}

/* The run's size for (task, length, seed), found now when not yet. */
static vkv_status size_2024(gen *g, vkv_ruler_gen *run, struct vkv_ruler_size **out)
{
    int ti = (int)(g->t - vkv_ruler_tasks);
    for (size_t i = 0; i < run->n_sizes; i++)
        if (run->sizes[i].task == ti && run->sizes[i].length == g->length && run->sizes[i].seed == g->seed) {
            *out = &run->sizes[i];
            return VKV_OK;
        }
    struct vkv_ruler_size z = {.task = ti, .length = g->length, .seed = g->seed};
    vkv_status st = VKV_OK;
    if (g->t->kind == VKV_RULER_VT) st = vt_example(g, run, &z.example, &z.example_tokens);
    vkv_rng search = stream(g->seed, g->t, g->length, SIZE_MAX);
    if (!st && g->t->kind == VKV_RULER_FWE) st = fwe_2024(g, run, search, true, &z.units);
    else if (!st) {
        steps s = steps_of(g);
        s.extra = z.example_tokens;
        st = grow_2024(g, run, &s, search, &z.units);
    }
    gen_reset(g);
    struct vkv_ruler_size *grown = st ? NULL : realloc(run->sizes, sizeof *grown * (run->n_sizes + 1));
    if (!st && !grown) st = oom();
    if (st) {
        free(z.example);
        return st;
    }
    run->sizes = grown;
    run->sizes[run->n_sizes] = z;
    *out = &run->sizes[run->n_sizes++];
    return VKV_OK;
}

vkv_status vkv_ruler_generate(vkv_ruler_gen *run, const vkv_ruler_task *t, const vkv_ruler_sources *src,
                              size_t length, uint64_t seed, size_t index, vkv_ruler_sample *out)
{
    memset(out, 0, sizeof *out);
    const vkv_ruler_qa_set *qa = qa_set(t, src);
    bool v24 = run->version == VKV_RULER_2024;
    if (t->kind == VKV_RULER_QA && (!qa || !qa->n_qas || !qa->n_docs))
        return vkv_error(VKV_ERR_ARG, "%s is built from %s: give its file (--%s)", t->name,
                         !strcmp(t->name, "qa_1") ? "SQuAD" : "HotpotQA", !strcmp(t->name, "qa_1") ? "squad" : "hotpotqa");
    if (t->kind == VKV_RULER_FWE && (length < vkv_ruler_max_new_tokens(t) + 200))
        return vkv_error(VKV_ERR_ARG, "%s: %zu tokens is too short (RULER's vocabulary of %s / 50 coded words needs "
                                      "at least 4)", t->name, length, v24 ? "length" : "(length - 50)");
    if ((t->haystack == VKV_RULER_ESSAY && t->kind == VKV_RULER_NIAH && !src->essays_len) ||
        ((t->kind == VKV_RULER_CWE || (t->kind == VKV_RULER_NIAH && (t->key == VKV_RULER_WORDS))) && src->n_words < 1000))
        return vkv_error(VKV_ERR_ARG, "%s needs %s", t->name,
                         t->haystack == VKV_RULER_ESSAY && !src->essays_len ? "the essays" : "a word list");
    gen g = {.t = t, .src = src, .version = run->version, .seed = seed, .length = length};
    essay_word *words = NULL;
    if (t->kind == VKV_RULER_NIAH && t->haystack == VKV_RULER_ESSAY) {
        if (!(words = split_essays(src->essays, src->essays_len, &g.n_words))) return oom();
        g.words = words;
    }
    vkv_rng start = stream(seed, t, length, index);
    struct vkv_ruler_size *size = NULL;
    vkv_status st;
    if (!v24) st = size_head(&g, run, start, index);
    else if (!(st = size_2024(&g, run, &size))) {
        if (t->kind == VKV_RULER_FWE) {
            size_t n = size->units;
            st = n ? fwe_2024(&g, run, start, false, &n)
                   : vkv_error(VKV_ERR_ARG, "%s: %zu tokens is too short for late-2024 RULER's coded text", t->name,
                               length);
        } else {
            steps s = steps_of(&g);
            s.extra = size->example_tokens;
            st = size->units ? fit_2024(&g, run, &s, start, size->units, index)
                             : vkv_error(VKV_ERR_ARG, "%s: %zu tokens is too short for late-2024 RULER's first "
                                                      "haystack step (%zu units) and %u generated tokens",
                                         t->name, length, s.inc, s.gen);
        }
    }
    free(words);
    if (!st && size && size->example) { /* vt's solved example before the prompt */
        vkv_strbuf c = {0};
        vkv_strbuf_puts(&c, size->example);
        vkv_strbuf_puts(&c, g.ctx.p);
        if (c.oom) {
            free(c.p);
            st = oom();
        } else {
            free(g.ctx.p);
            g.ctx = c;
        }
    }
    if (st) {
        gen_reset(&g);
        return st;
    }
    *out = (vkv_ruler_sample){.context = g.ctx.p, .question = g.q.p, .answer_prefix = g.ap.p, .answers = g.answers,
                              .n_answers = g.n_answers};
    return VKV_OK;
}
