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

/* ---- the generator (RULER's scripts/data/synthetic rules) ---- */

/* RULER's repeated noise sentence. */
#define NOISE_SENTENCE "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."

/* The needle depths RULER draws from: round(linspace(0, 100, 40)). */
static int depth_at(int i) { return (int)lround(100.0 * i / 39.0); }

typedef struct gen {
    const vkv_ruler_task *t;
    const vkv_ruler_sources *src;
    vkv_rng rng;
    size_t length;
    vkv_strbuf ctx, q, ap;
    char **answers;
    size_t n_answers;
    bool oom;
} gen;

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

/* The first n words of the essays (white space runs as one space), wrapped
 * around, into b. */
static void essay_words(const vkv_ruler_sources *s, size_t n, vkv_strbuf *b)
{
    size_t i = 0, got = 0;
    while (got < n) {
        while (i < s->essays_len && isspace((unsigned char)s->essays[i])) i++;
        if (i >= s->essays_len) {
            if (!got) return;
            i = 0;
            continue;
        }
        size_t e = i;
        while (e < s->essays_len && !isspace((unsigned char)s->essays[e])) e++;
        if (got++) vkv_strbuf_put(b, " ", 1);
        vkv_strbuf_put(b, s->essays + i, e - i);
        i = e;
    }
}

/* Sentence starts of t: 0 and after each ". ", "? " or "! ". */
static size_t *sentence_starts(const char *t, size_t len, size_t *n)
{
    size_t cap = 64, k = 0;
    size_t *v = malloc(sizeof *v * cap);
    if (!v) return NULL;
    v[k++] = 0;
    for (size_t i = 1; i + 1 < len; i++)
        if ((t[i - 1] == '.' || t[i - 1] == '?' || t[i - 1] == '!') && t[i] == ' ') {
            if (k == cap) {
                size_t *g = realloc(v, sizeof *v * (cap *= 2));
                if (!g) {
                    free(v);
                    return NULL;
                }
                v = g;
            }
            v[k++] = i + 1;
        }
    *n = k;
    return v;
}

/* Lines joined with '\n', with the extra lines inserted before the lines
 * at[i] (ascending; RULER's list insertions). */
static void lines_with_inserts(gen *g, const char *const *lines, size_t n, char **ins, const size_t *at, size_t n_ins)
{
    size_t k = 0;
    bool first = true;
    for (size_t i = 0; i <= n; i++) {
        while (k < n_ins && at[k] == i) {
            if (!first) vkv_strbuf_put(&g->ctx, "\n", 1);
            vkv_strbuf_puts(&g->ctx, ins[k++]);
            first = false;
        }
        if (i == n) break;
        if (!first) vkv_strbuf_put(&g->ctx, "\n", 1);
        vkv_strbuf_puts(&g->ctx, lines[i]);
        first = false;
    }
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
    shuffle_idx(&g->rng, order, n_needles);
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
        /* needles between sentences at depths drawn from RULER's 40 */
        vkv_strbuf text = {0};
        vkv_strbuf_put(&text, "", 0);
        essay_words(g->src, n_hay, &text);
        size_t n_sent = 0, *starts = text.oom ? NULL : sentence_starts(text.p, text.n, &n_sent);
        size_t d[16], at[18];
        if (!starts || !sample_idx(&g->rng, 40, n_needles, d)) g->oom = true;
        else {
            for (size_t i = 0; i < n_needles; i++) at[i] = (size_t)(n_sent * depth_at((int)d[i]) / 100);
            qsort(at, n_needles, sizeof *at, cmp_size);
            size_t prev = 0;
            for (size_t i = 0; i <= n_needles; i++) {
                size_t cut = i < n_needles ? at[i] : n_sent;
                size_t b = prev < n_sent ? starts[prev] : text.n, e = cut < n_sent ? starts[cut] : text.n;
                while (e > b && text.p[e - 1] == ' ') e--;
                if (i) vkv_strbuf_put(&g->ctx, " ", 1);
                vkv_strbuf_put(&g->ctx, text.p + b, e - b);
                if (i < n_needles) {
                    vkv_strbuf_put(&g->ctx, " ", 1);
                    vkv_strbuf_puts(&g->ctx, shuffled[i]);
                }
                prev = cut;
            }
        }
        free(starts);
        free(text.p);
    } else {
        /* noise sentences or needles of random keys, one a line; the needles at random lines */
        char **lines = calloc(n_hay ? n_hay : 1, sizeof *lines);
        size_t at[16];
        if (!lines || !sample_idx(&g->rng, n_hay, n_needles, at)) g->oom = true;
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
            /* RULER inserts at the sampled indexes, largest first: the needle of
             * index a ends up before original line a */
            size_t pos[16];
            char *ins[16];
            size_t idx[16];
            for (size_t i = 0; i < n_needles; i++) idx[i] = i;
            for (size_t i = 0; i < n_needles; i++)
                for (size_t j = i + 1; j < n_needles; j++)
                    if (at[idx[j]] < at[idx[i]]) {
                        size_t s = idx[i];
                        idx[i] = idx[j];
                        idx[j] = s;
                    }
            /* sorted descending, paired with the needles in order: the smallest index gets the last needle */
            for (size_t i = 0; i < n_needles; i++) {
                pos[i] = at[idx[i]];
                ins[i] = shuffled[n_needles - 1 - i];
            }
            lines_with_inserts(g, (const char *const *)lines, n_hay, ins, pos, n_needles);
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

/* Variable tracking: one chain of 4 hops among noise lines (RULER's vt; its
 * in-context example is left out: it alone is about 500 tokens). */
static void gen_vt(gen *g, size_t n_hay)
{
    enum { HOPS = 4, VARS = HOPS + 1 };
    char vars[VARS][6];
    for (int i = 0; i < VARS; i++) {
        bool dup;
        do {
            for (int c = 0; c < 5; c++) vars[i][c] = (char)('A' + vkv_rng_below(&g->rng, 26));
            vars[i][5] = 0;
            dup = false;
            for (int j = 0; j < i; j++) dup |= !strcmp(vars[i], vars[j]);
        } while (dup);
    }
    char value[8], chain[VARS][64];
    snprintf(value, sizeof value, "%u", 10000u + vkv_rng_below(&g->rng, 89999u));
    snprintf(chain[0], sizeof chain[0], "VAR %s = %s", vars[0], value);
    for (int j = 0; j < HOPS; j++) snprintf(chain[j + 1], sizeof chain[j + 1], "VAR %s = VAR %s ", vars[j + 1], vars[j]);
    const char **lines = malloc(sizeof *lines * (n_hay ? n_hay : 1));
    size_t at[VARS];
    if (!lines || n_hay < VARS || !sample_idx(&g->rng, n_hay, VARS, at)) {
        g->oom = g->oom || !lines;
        free(lines);
        return;
    }
    for (size_t i = 0; i < n_hay; i++) lines[i] = NOISE_SENTENCE;
    qsort(at, VARS, sizeof *at, cmp_size);
    char *ins[VARS];
    for (int j = 0; j < VARS; j++) ins[j] = chain[j];
    vkv_strbuf_puts(&g->ctx, "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n");
    lines_with_inserts(g, lines, n_hay, ins, at, VARS);
    vkv_strbuf_put(&g->ctx, "\n", 1);
    free(lines);
    for (int i = 0; i < VARS; i++) add_answer(g, vars[i]);
    char buf[256];
    snprintf(buf, sizeof buf, "Question: Find all variables that are assigned the value %s in the text above. ", value);
    vkv_strbuf_puts(&g->q, buf);
    snprintf(buf, sizeof buf, "Answer: According to the chain(s) of variable assignment in the text above, %d variables "
                              "are assigned the value %s, they are: ", VARS, value);
    vkv_strbuf_puts(&g->ap, buf);
}

#define CWE_HEAD "Below is a numbered list of words. In these words, some appear more often than others. Memorize the " \
                 "ones that appear most often.\n"
#define CWE_QUESTION "Question: What are the 10 most common words in the above list? "
#define CWE_PREFIX "Answer: The top 10 words that appear most often in the list are:"

/* One list of RULER's common-words task: num_words distinct words, the
 * first 10 repeated `common` times, the others `uncommon` times, shuffled,
 * numbered "1. w 2. w ...". The 10 common words into common[]. */
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
    for (size_t w = 0; w < num_words; w++)
        for (int r = 0; r < (w < 10 ? common : uncommon); r++) list[k++] = pick[w];
    shuffle_idx(&g->rng, list, total);
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
 * 6/1 under 4096 tokens, 10/3 and 30/3 from 4096). */
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
        snprintf(num, sizeof num, " %d. ", i + 1);
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

/* Frequent words: coded 6-letter words drawn with Zipf weights k^-2 (RULER's
 * alpha 2), the most frequent replaced by "..." as noise; the answer is the
 * next three. */
static void gen_fwe(gen *g, size_t num_words)
{
    size_t vocab_size = (g->length - vkv_ruler_max_new_tokens(g->t)) / 50;
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
    for (size_t k = 0; k < vocab_size; k++) total += (size_t)(num_words / ((k + 1.0) * (k + 1.0)) / zeta2);
    size_t *list = malloc(sizeof *list * (total ? total : 1)), n = 0;
    if (!list) {
        free(vocab);
        g->oom = true;
        return;
    }
    for (size_t k = 0; k < vocab_size; k++)
        for (size_t r = (size_t)(num_words / ((k + 1.0) * (k + 1.0)) / zeta2); r; r--) list[n++] = k;
    shuffle_idx(&g->rng, list, n);
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

/* Question answering: question `index` of the set, its gold documents, then
 * (SQuAD) its article's other paragraphs, then other documents drawn at
 * random, num_docs in all, shuffled, as "Document i:\n..." (RULER's qa). */
static void gen_qa(gen *g, size_t num_docs, size_t index)
{
    const vkv_ruler_qa_set *set = !strcmp(g->t->name, "qa_1") ? g->src->squad : g->src->hotpotqa;
    const vkv_ruler_qa *q = &set->qas[index % set->n_qas];
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
        /* every document, repeated as needed (RULER's wrap-around) */
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
    shuffle_idx(&g->rng, pick, n);
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
    g->oom = false;
}

/* The sample with n haystack units, its RNG restarted from `start`, and
 * whether its prompt fits the length. */
static vkv_status build(gen *g, vkv_rng start, size_t n, size_t index, vkv_ruler_count_fn *count, void *cctx,
                        bool *fits)
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
    if (g->oom || g->ctx.oom || g->q.oom || g->ap.oom) return oom();
    vkv_strbuf all = {0};
    vkv_strbuf_puts(&all, g->ctx.p);
    vkv_strbuf_puts(&all, g->q.p);
    vkv_strbuf_puts(&all, g->ap.p);
    if (all.oom) return oom();
    size_t nt = 0;
    vkv_status st = count(cctx, all.p, &nt);
    free(all.p);
    *fits = !st && nt + vkv_ruler_max_new_tokens(g->t) <= g->length;
    return st;
}

/* The fewest haystack units a task's sample has, and the most the word
 * list allows (0: no bound). */
static void unit_bounds(const gen *g, size_t *lo, size_t *hi)
{
    *hi = 0;
    switch (g->t->kind) {
    case VKV_RULER_NIAH: *lo = 1; break;
    case VKV_RULER_VT: *lo = 5; break;
    case VKV_RULER_CWE:
        *lo = 11;
        *hi = g->src->n_words;
        break;
    case VKV_RULER_QA: *lo = 1; break;
    default: *lo = 27; break; /* fwe: the third answer word drawn at least once (27 / 9 / zeta(2) >= 1) */
    }
}

vkv_status vkv_ruler_generate(const vkv_ruler_task *t, const vkv_ruler_sources *src, vkv_ruler_count_fn *count,
                              void *count_ctx, size_t length, uint64_t seed, size_t index, vkv_ruler_sample *out)
{
    memset(out, 0, sizeof *out);
    const vkv_ruler_qa_set *qa = !strcmp(t->name, "qa_1") ? src->squad : src->hotpotqa;
    if (t->kind == VKV_RULER_QA && (!qa || !qa->n_qas || !qa->n_docs))
        return vkv_error(VKV_ERR_ARG, "%s is built from %s: give its file (--%s)", t->name,
                         !strcmp(t->name, "qa_1") ? "SQuAD" : "HotpotQA", !strcmp(t->name, "qa_1") ? "squad" : "hotpotqa");
    if (t->kind == VKV_RULER_FWE && (length < vkv_ruler_max_new_tokens(t) + 200))
        return vkv_error(VKV_ERR_ARG, "%s: %zu tokens is too short (RULER's vocabulary of (length - 50) / 50 coded "
                                      "words needs at least 4)", t->name, length);
    if ((t->haystack == VKV_RULER_ESSAY && t->kind == VKV_RULER_NIAH && !src->essays_len) ||
        ((t->kind == VKV_RULER_CWE || (t->kind == VKV_RULER_NIAH && (t->key == VKV_RULER_WORDS))) && src->n_words < 1000))
        return vkv_error(VKV_ERR_ARG, "%s needs %s", t->name,
                         t->haystack == VKV_RULER_ESSAY && !src->essays_len ? "the essays" : "a word list");
    /* one stream per (seed, task, length, sample) */
    vkv_rng mix = vkv_rng_new(seed);
    uint64_t h = vkv_rng_u64(&mix);
    for (const char *c = t->name; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    h ^= (uint64_t)length * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)(index + 1) * 0xc2b2ae3d27d4eb4full;
    vkv_rng start = vkv_rng_new(h);
    gen g = {.t = t, .src = src, .length = length};
    size_t lo, cap;
    unit_bounds(&g, &lo, &cap);
    bool fits = false;
    vkv_status st = build(&g, start, lo, index, count, count_ctx, &fits);
    if (!st && !fits)
        st = vkv_error(VKV_ERR_ARG, "%s: %zu tokens is too short for its smallest prompt and its %u generated tokens",
                       t->name, length, vkv_ruler_max_new_tokens(t));
    /* the largest haystack that fits: doubling, then bisection */
    size_t good = lo, bad = 0;
    while (!st && !bad) {
        size_t next = good * 2;
        if (cap && next > cap) next = cap;
        if (next == good) break;
        if ((st = build(&g, start, next, index, count, count_ctx, &fits))) break;
        if (fits) good = next;
        else bad = next;
    }
    while (!st && bad && bad - good > 1) {
        size_t mid = good + (bad - good) / 2;
        if ((st = build(&g, start, mid, index, count, count_ctx, &fits))) break;
        if (fits) good = mid;
        else bad = mid;
    }
    if (!st) st = build(&g, start, good, index, count, count_ctx, &fits);
    if (st) {
        gen_reset(&g);
        return st;
    }
    *out = (vkv_ruler_sample){.context = g.ctx.p, .question = g.q.p, .answer_prefix = g.ap.p, .answers = g.answers,
                              .n_answers = g.n_answers};
    return VKV_OK;
}
