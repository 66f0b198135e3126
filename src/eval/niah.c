/* The needle in a haystack's prompts: haystack, runs, needle placement. */
#include "eval/niah.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "eval/kvpress_prompt.h"
#include "eval/prompt.h"

/* This harness's own prompt around the haystack, and what follows the question. */
#define OWN_INTRO \
    "You are a helpful AI bot that answers questions for a user. Keep your response short and direct.\n\n<context>\n"
#define OWN_OUTRO "\n</context>\n\n"
#define OWN_ASK_SUFFIX " Don't give information outside the document or repeat your findings."
/* kvpress's wrapper around the haystack, and the tokens it leaves for the
 * prompt's other parts (its "system prompts and other overhead"). */
#define KVPRESS_BOOK_OPEN "This is a very long story book: <book> "
#define KVPRESS_BOOK_CLOSE " </book>."
#define KVPRESS_OVERHEAD 150

static vkv_status oom(void) { return vkv_error(VKV_ERR_OOM, "out of host memory"); }

const char *vkv_niah_protocol_name(vkv_niah_protocol p)
{
    return p == VKV_NIAH_PROTOCOL_KVPRESS ? "kvpress" : "vkvector";
}

/* ---- the grid and the texts ---- */

bool vkv_niah_parse_grid(const char *spec, bool colon_counts, double lo, double hi, double *v, size_t cap, size_t *n)
{
    *n = 0;
    double a, b, c;
    char sep, extra;
    if (strchr(spec, ':')) {
        if (sscanf(spec, "%lf:%lf%c%lf%c", &a, &b, &sep, &c, &extra) != 4 || (sep != ':' && sep != '/') || a < lo ||
            b > hi || b < a)
            return false;
        if (sep == ':' && colon_counts) {
            if (c < 1 || c > (double)cap || c != floor(c)) return false;
            size_t count = (size_t)c;
            for (size_t i = 0; i < count; i++) v[(*n)++] = count == 1 ? a : a + (b - a) * (double)i / (double)(count - 1);
        } else {
            if (!(c > 0)) return false;
            /* a + i step, not a running sum: 0:100/12.5 ends at 100 exactly */
            for (size_t i = 0; a + (double)i * c <= b + 1e-9 && *n < cap; i++) v[(*n)++] = a + (double)i * c;
        }
        return *n > 0;
    }
    for (const char *p = spec; *n < cap;) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        if (end == p || errno || !(x >= lo && x <= hi) || (*end && *end != ',')) return false;
        v[(*n)++] = x;
        if (!*end) return true;
        p = end + 1;
    }
    return false;
}

void vkv_niah_texts_free(vkv_niah_texts *t)
{
    free(t->needle);
    free(t->question);
    free(t->answer_prefix);
    memset(t, 0, sizeof *t);
}

vkv_status vkv_niah_read_texts(const char *path, vkv_niah_texts *out)
{
    memset(out, 0, sizeof *out);
    vkv_json_doc *doc;
    vkv_status st = vkv_json_parse_file(path, &doc);
    if (st) return st;
    const vkv_json *root = vkv_json_root(doc);
    const char *keys[] = {"needle", "question", "answer_prefix"};
    char **dest[] = {&out->needle, &out->question, &out->answer_prefix};
    if (root->type != VKV_JSON_OBJECT) st = vkv_error(VKV_ERR_FORMAT, "%s: wants a JSON object", path);
    for (size_t i = 0; i < 3 && !st; i++) {
        const vkv_json *v = vkv_json_get(root, keys[i]);
        if (!v) continue;
        if (v->type != VKV_JSON_STRING || strlen(v->string) != v->string_len)
            st = vkv_error(VKV_ERR_FORMAT, "%s: \"%s\" wants a string without NUL characters", path, keys[i]);
        else if (!(*dest[i] = strdup(v->string))) st = oom();
    }
    vkv_json_free(doc);
    if (st) vkv_niah_texts_free(out);
    return st;
}

/* ---- the haystack ---- */

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool is_txt(const char *name)
{
    size_t l = strlen(name);
    return l > 4 && !strcmp(name + l - 4, ".txt");
}

static void warnf(vkv_niah_warn_fn *warn, void *ctx, const char *fmt, ...) VKV_PRINTF(3, 4);
static void warnf(vkv_niah_warn_fn *warn, void *ctx, const char *fmt, ...)
{
    if (!warn) return;
    char msg[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    warn(ctx, msg);
}

vkv_status vkv_niah_read_dir(const char *dir, const char *joint, vkv_niah_warn_fn *warn, void *warn_ctx, char **text,
                             size_t *len)
{
    *text = NULL;
    DIR *d = opendir(dir);
    if (!d) return vkv_error(VKV_ERR_IO, "cannot open the haystack directory '%s': %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0, n_txt = 0;
    struct dirent *de;
    bool oom = false;
    while (!oom && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            char **g = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *g);
            if (!g) {
                oom = true;
                break;
            }
            names = g;
        }
        n_txt += is_txt(de->d_name);
        oom = !(names[n++] = strdup(de->d_name));
    }
    closedir(d);
    if (oom) {
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
        return vkv_error(VKV_ERR_OOM, "out of host memory listing the haystack directory '%s'", dir);
    }
    if (n) qsort(names, n, sizeof *names, name_cmp); /* an empty directory has no list to sort */
    vkv_strbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (n_txt && !is_txt(names[i])) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat sb;
        if (stat(path, &sb) || !S_ISREG(sb.st_mode)) continue;
        size_t fl;
        char *t;
        if (vkv_read_file(path, VKV_MAX_DOC_BYTES, &t, &fl)) {
            warnf(warn, warn_ctx, "%s; the file is skipped", vkv_last_error());
            continue;
        }
        /* no context needs more haystack than one document's cap: the rest
         * of the directory would only cost host memory */
        if (b.n + strlen(joint) + fl > VKV_MAX_DOC_BYTES) {
            warnf(warn, warn_ctx, "the haystack reaches %zu MiB at '%s': it and the files after it are not read",
                  VKV_MAX_DOC_BYTES >> 20, path);
            free(t);
            break;
        }
        if (b.n) vkv_strbuf_puts(&b, joint);
        vkv_strbuf_put(&b, t, fl);
        free(t);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (b.oom || !b.n) {
        free(b.p);
        return vkv_error(VKV_ERR_IO, "no text in the haystack directory '%s'", dir);
    }
    *text = b.p;
    *len = b.n;
    return VKV_OK;
}

vkv_status vkv_niah_read_haystack(const char *dir, vkv_niah_warn_fn *warn, void *warn_ctx, char **text, size_t *len)
{
    return vkv_niah_read_dir(dir, "\n\n", warn, warn_ctx, text, len);
}

/* ---- sentences ---- */

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static bool sentence_end_at(const char *t, size_t len, size_t i)
{
    if (i == 0 || i > len) return false;
    char c = t[i - 1];
    if (c != '.' && c != '?' && c != '!') return false;
    return i == len || is_ws(t[i]) || (c == '.' && t[i] >= 'A' && t[i] <= 'Z');
}

size_t vkv_niah_sentence_end_before(const char *t, size_t len, size_t at)
{
    if (at > len) at = len;
    for (size_t i = at; i > 0; i--)
        if (sentence_end_at(t, len, i)) return i;
    return 0;
}

size_t vkv_niah_sentence_end_near(const char *t, size_t len, size_t at)
{
    /* a depth's token can end past the haystack's cut (the cut moved back to
     * a sentence end): the cut is then the nearest end */
    if (at > len) at = len;
    size_t before = vkv_niah_sentence_end_before(t, len, at), after = at;
    while (after < len && !sentence_end_at(t, len, after)) after++;
    return at - before <= after - at ? before : after;
}

/* ---- runs ---- */

/* The text from an offset (moved to the next paragraph start), wrapped
 * around and repeated until it has at least `bytes` bytes. */
static char *run_text(const char *hay, size_t hay_len, size_t offset, size_t bytes, size_t *len)
{
    if (offset) {
        const char *p = strstr(hay + offset, "\n\n");
        offset = p ? (size_t)(p - hay) + 2 : 0;
    }
    vkv_strbuf b = {0};
    vkv_strbuf_put(&b, hay + offset, hay_len - offset);
    while (b.n < bytes && !b.oom) {
        vkv_strbuf_puts(&b, "\n\n");
        vkv_strbuf_put(&b, hay, hay_len);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.n;
    return b.p;
}

void vkv_niah_run_free(vkv_niah_run *r)
{
    free(r->text);
    free(r->ids);
    free(r->ends);
    memset(r, 0, sizeof *r);
}

vkv_status vkv_niah_run_make(const vkv_tokenizer *tok, const char *hay, size_t hay_len, size_t run, size_t runs,
                             uint64_t seed, double max_length, vkv_niah_run *out)
{
    vkv_niah_run_free(out);
    /* the runs spread evenly over the haystack; the seed shifts them all */
    size_t offset = (size_t)(((double)run / runs + (double)(seed % 1000003) / 1000003.0) * hay_len) % hay_len;
    /* 12 bytes a token is more than any vocabulary spends on prose */
    if (!(out->text = run_text(hay, hay_len, offset, (size_t)(max_length * 12) + 4096, &out->len))) return oom();
    vkv_status st = vkv_tokenize(tok, out->text, out->len, false, false, &out->ids, &out->n_ids);
    if (st) return st;
    if (!(out->ends = malloc((out->n_ids + 1) * sizeof *out->ends))) return oom();
    if (!out->n_ids) return vkv_error(VKV_ERR_FORMAT, "the haystack gives no tokens");
    if (!vkv_token_ends(tok, out->text, out->len, out->ids, out->n_ids, false, false, out->ends))
        for (size_t i = 0; i < out->n_ids; i++) out->ends[i] = (size_t)((double)(i + 1) * out->len / out->n_ids);
    return VKV_OK;
}

/* ---- prompts ---- */

/* Token count of text (no BOS). */
static vkv_status count_tokens(const vkv_tokenizer *tok, const char *text, size_t *n)
{
    int32_t *ids = NULL;
    vkv_status st = vkv_tokenize(tok, text, strlen(text), false, false, &ids, n);
    free(ids);
    return st;
}

vkv_status vkv_niah_prompts_measure(vkv_niah_prompts *p, const vkv_tokenizer *tok)
{
    vkv_status st;
    size_t n_q;
    if (p->protocol == VKV_NIAH_PROTOCOL_KVPRESS) {
        /* kvpress: the length is the context part's cap; the question comes on top */
        if ((st = count_tokens(tok, p->needle, &p->n_needle)) || (st = count_tokens(tok, p->question, &n_q)))
            return st;
        p->overhead = KVPRESS_OVERHEAD;
        p->kvpress_question = n_q + 16 + strlen(p->answer_prefix); /* + the chat turn's close, a bound */
        return VKV_OK;
    }
    bool chat = p->chat != VKV_CHAT_UNKNOWN;
    vkv_strbuf ask = {0};
    vkv_strbuf_puts(&ask, p->question);
    vkv_strbuf_puts(&ask, OWN_ASK_SUFFIX);
    if (!chat) vkv_strbuf_puts(&ask, "\nAnswer:");
    free(p->ask);
    p->ask = ask.p;
    if (ask.oom) return oom();
    size_t n_fixed, n_chat = 0;
    if ((st = count_tokens(tok, OWN_INTRO OWN_OUTRO, &n_fixed)) || (st = count_tokens(tok, p->ask, &n_q)) ||
        (st = count_tokens(tok, p->needle, &p->n_needle)) ||
        (chat && (st = vkv_chat_overhead(tok, p->chat, &n_chat))))
        return st;
    p->overhead = n_fixed + n_q + n_chat + 1 /* BOS */ + 4 /* joins */;
    p->kvpress_question = 0;
    return VKV_OK;
}

void vkv_niah_prompts_free(vkv_niah_prompts *p)
{
    free(p->ask);
    p->ask = NULL;
}

vkv_status vkv_niah_own_prompt(const vkv_niah_prompts *p, const vkv_niah_run *run, double length, double depth,
                               char **text, size_t *len, size_t *split, double *needle_depth)
{
    const char *hay = run->text;
    size_t hay_tokens = (size_t)length - p->overhead - p->n_needle;
    if (hay_tokens > run->n_ids) hay_tokens = run->n_ids;
    size_t cut = vkv_niah_sentence_end_before(hay, run->len, run->ends[hay_tokens - 1]);
    if (!cut) cut = run->ends[hay_tokens - 1];
    size_t target = depth >= 100 ? cut : run->ends[(size_t)(hay_tokens * depth / 100.0)];
    size_t ins = depth >= 100 ? cut : depth <= 0 ? 0 : vkv_niah_sentence_end_near(hay, cut, target);
    vkv_strbuf u = {0};
    vkv_strbuf_puts(&u, OWN_INTRO);
    vkv_strbuf_put(&u, hay, ins);
    if (ins && !is_ws(hay[ins - 1])) vkv_strbuf_puts(&u, " ");
    vkv_strbuf_puts(&u, p->needle);
    if (ins < cut && !is_ws(hay[ins])) vkv_strbuf_puts(&u, " ");
    vkv_strbuf_put(&u, hay + ins, cut - ins);
    vkv_strbuf_puts(&u, OWN_OUTRO);
    *split = u.n;
    vkv_strbuf_puts(&u, p->ask);
    if (u.oom) {
        free(u.p);
        return oom();
    }
    *text = u.p;
    *len = u.n;
    *needle_depth = cut ? 100.0 * (double)ins / (double)cut : 0;
    return VKV_OK;
}

vkv_status vkv_niah_kvpress_context(const vkv_niah_prompts *p, const vkv_niah_run *run, double length, double depth,
                                    char **text, double *needle_depth)
{
    size_t limit = (size_t)length > p->n_needle + KVPRESS_OVERHEAD ? (size_t)length - p->n_needle - KVPRESS_OVERHEAD : 1;
    if (limit > run->n_ids) limit = run->n_ids;
    size_t at_token = (size_t)((double)limit * depth / 100.0);
    size_t at = at_token ? run->ends[at_token - 1] : 0, end = run->ends[limit - 1];
    vkv_strbuf u = {0};
    vkv_strbuf_puts(&u, KVPRESS_BOOK_OPEN);
    vkv_strbuf_put(&u, run->text, at);
    vkv_strbuf_puts(&u, p->needle);
    vkv_strbuf_put(&u, run->text + at, end - at);
    vkv_strbuf_puts(&u, KVPRESS_BOOK_CLOSE);
    *needle_depth = end ? 100.0 * (double)at / (double)end : 0;
    if (u.oom) {
        free(u.p);
        return oom();
    }
    *text = u.p;
    return VKV_OK;
}

vkv_status vkv_niah_kvpress_prompt(const vkv_niah_prompts *p, const vkv_tokenizer *tok, const vkv_niah_run *run,
                                   double length, double depth, int32_t **ids, size_t *n_ids, size_t *n_context,
                                   double *needle_depth)
{
    vkv_kvpress_parts parts = {.question = strdup(p->question), .answer_prefix = p->answer_prefix};
    char *ctx_text = NULL, *q_text = NULL;
    vkv_status st = vkv_niah_kvpress_context(p, run, length, depth, &parts.context, needle_depth);
    if (!st && !parts.question) st = oom();
    if (!st) st = vkv_kvpress_texts(p->chat, &parts, p->query_aware, &ctx_text, &q_text);
    size_t n_context_orig;
    if (!st) st = vkv_kvpress_tokenize(tok, ctx_text, q_text, (size_t)length, ids, n_ids, n_context, &n_context_orig);
    free(ctx_text);
    free(q_text);
    vkv_kvpress_parts_free(&parts);
    return st;
}
