/* LongBench's metrics (see metrics.h for what is reproduced and how). */
#include "eval/metrics.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"

/* ---- UTF-8 ---- */

/* Decodes one code point at s (n > 0 bytes left); *len its byte length.
 * Bytes that are not valid UTF-8 decode one at a time as U+DC80 + byte
 * (Python's surrogateescape), so nothing is lost. */
static uint32_t utf8_next(const unsigned char *s, size_t n, size_t *len)
{
    unsigned c = s[0];
    uint32_t cp;
    size_t need;
    if (c < 0x80) { *len = 1; return c; }
    if (c >= 0xc2 && c < 0xe0) { need = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c < 0xf0) { need = 3; cp = c & 0x0f; }
    else if (c >= 0xf0 && c < 0xf5) { need = 4; cp = c & 0x07; }
    else goto bad;
    if (need > n) goto bad;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xc0) != 0x80) goto bad;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((need == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) || (need == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        goto bad;
    *len = need;
    return cp;
bad:
    *len = 1;
    return 0xdc80 + c;
}

static void utf8_put(vkv_strbuf *b, uint32_t cp)
{
    char out[4];
    size_t n;
    if (cp >= 0xdc80 && cp <= 0xdcff) { out[0] = (char)(cp - 0xdc80); n = 1; } /* an undecodable byte, as it was */
    else if (cp < 0x80) { out[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { out[0] = (char)(0xc0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3f)); n = 2; }
    else if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        out[0] = (char)(0xf0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    vkv_strbuf_put(b, out, n);
}

/* Code points of s (malloc'ed, *n of them); NULL when out of memory. */
static uint32_t *utf8_decode(const char *s, size_t len, size_t *n)
{
    uint32_t *cps = malloc((len + 1) * sizeof *cps);
    if (!cps) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        size_t l;
        cps[k++] = utf8_next((const unsigned char *)s + i, len - i, &l);
        i += l;
    }
    *n = k;
    return cps;
}

/* Python's str.isspace() (what str.split() with no argument splits on). */
static bool is_space_cp(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Python's str.lower() for the scripts LongBench's English tasks contain. */
static uint32_t lower_cp(uint32_t c)
{
    if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
    if ((c >= 0x100 && c <= 0x12f) || (c >= 0x132 && c <= 0x137) || (c >= 0x14a && c <= 0x177))
        return (c & 1) ? c : c + 1;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return (c & 1) ? c + 1 : c;
    if (c == 0x178) return 0xff;
    if ((c >= 0x391 && c <= 0x3a1) || (c >= 0x3a3 && c <= 0x3ab)) return c + 32;
    if (c == 0x386) return 0x3ac;
    if (c >= 0x388 && c <= 0x38a) return c + 37;
    if (c == 0x38c) return 0x3cc;
    if (c == 0x38e || c == 0x38f) return c + 63;
    if (c >= 0x410 && c <= 0x42f) return c + 32;
    if (c >= 0x400 && c <= 0x40f) return c + 80;
    if ((c >= 0x460 && c <= 0x481) || (c >= 0x48a && c <= 0x4bf)) return (c & 1) ? c : c + 1;
    if (c >= 0x531 && c <= 0x556) return c + 48;
    if ((c >= 0x1e00 && c <= 0x1e95) || (c >= 0x1ea0 && c <= 0x1eff)) return (c & 1) ? c : c + 1;
    if (c >= 0xff21 && c <= 0xff3a) return c + 32;
    return c;
}

/* A word character of Python's `\w` (str patterns), approximated outside
 * ASCII by excluding white space and the punctuation/symbol blocks. */
static bool is_word_cp(uint32_t c)
{
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (is_space_cp(c)) return false;
    if (c >= 0xa0 && c <= 0xbf)
        return c == 0xaa || c == 0xb2 || c == 0xb3 || c == 0xb5 || c == 0xb9 || c == 0xba || (c >= 0xbc && c <= 0xbe);
    if (c == 0xd7 || c == 0xf7) return false;
    if (c >= 0x300 && c <= 0x36f) return false;                 /* combining marks */
    if (c >= 0x2000 && c <= 0x206f) return false;               /* general punctuation */
    if (c >= 0x20a0 && c <= 0x20ff) return false;               /* currency, combining marks for symbols */
    if (c >= 0x2190 && c <= 0x245f) return false;               /* arrows, math, technical */
    if (c >= 0x2500 && c <= 0x2775) return false;               /* box drawing, shapes, dingbats */
    if (c >= 0x2794 && c <= 0x2bff) return false;               /* arrows, math symbols */
    if (c >= 0x2e00 && c <= 0x2e7f) return false;               /* supplemental punctuation */
    if (c >= 0x3000 && c <= 0x303f)                             /* CJK punctuation (a few letters and numbers) */
        return (c >= 0x3005 && c <= 0x3007) || (c >= 0x3021 && c <= 0x3029) || (c >= 0x3031 && c <= 0x3035) ||
               (c >= 0x3038 && c <= 0x303c);
    if (c >= 0xdc80 && c <= 0xdcff) return false;               /* undecodable bytes */
    if (c >= 0xe000 && c <= 0xf8ff) return false;               /* private use */
    if (c >= 0xfe00 && c <= 0xfe0f) return false;               /* variation selectors */
    if (c >= 0xfe30 && c <= 0xfe6f) return false;               /* CJK compatibility / small forms */
    if ((c >= 0xff01 && c <= 0xff0f) || (c >= 0xff1a && c <= 0xff20) || (c >= 0xff3b && c <= 0xff40) ||
        (c >= 0xff5b && c <= 0xff65))
        return false;
    if (c >= 0xfff0 && c <= 0xffff) return false;
    if (c >= 0x1f000 && c <= 0x1faff) return false;             /* emoji and pictographs */
    return true;
}

static bool is_ascii_punct(uint32_t c)
{
    return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) || (c >= 0x7b && c <= 0x7e);
}

/* ---- qa_f1 ---- */

char *vkv_normalize_answer(const char *s)
{
    size_t n;
    uint32_t *cps = utf8_decode(s, strlen(s), &n);
    if (!cps) return NULL;
    /* lower, then remove punctuation */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = lower_cp(cps[i]);
        if (!is_ascii_punct(c)) cps[k++] = c;
    }
    n = k;
    /* articles -> ' ' (whole runs of word characters equal to a/an/the) */
    for (size_t i = 0; i < n;) {
        if (!is_word_cp(cps[i])) { i++; continue; }
        size_t j = i;
        while (j < n && is_word_cp(cps[j])) j++;
        size_t len = j - i;
        bool art = (len == 1 && cps[i] == 'a') || (len == 2 && cps[i] == 'a' && cps[i + 1] == 'n') ||
                   (len == 3 && cps[i] == 't' && cps[i + 1] == 'h' && cps[i + 2] == 'e');
        if (art) {
            cps[i] = ' ';
            memmove(cps + i + 1, cps + j, (n - j) * sizeof *cps);
            n -= len - 1;
            j = i + 1;
        }
        i = j;
    }
    /* " ".join(text.split()) */
    vkv_strbuf b = {0};
    bool need_sep = false;
    for (size_t i = 0; i < n; i++) {
        if (is_space_cp(cps[i])) {
            need_sep = b.n > 0;
            continue;
        }
        if (need_sep) vkv_strbuf_put(&b, " ", 1);
        need_sep = false;
        utf8_put(&b, cps[i]);
    }
    free(cps);
    if (!b.p && !b.oom) vkv_strbuf_put(&b, "", 0);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

typedef struct span {
    const char *p;
    size_t n;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    size_t m = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, m);
    if (c) return c;
    return (x->n > y->n) - (x->n < y->n);
}

static bool span_eq(span a, span b) { return a.n == b.n && !memcmp(a.p, b.p, a.n); }

/* Splits s at every single `sep` byte (Python's s.split(sep)): *n spans. */
static span *split_on(const char *s, size_t len, char sep, size_t *n)
{
    size_t cnt = 1;
    for (size_t i = 0; i < len; i++) cnt += s[i] == sep;
    span *out = malloc(cnt * sizeof *out);
    if (!out) return NULL;
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= len; i++)
        if (i == len || s[i] == sep) {
            out[k++] = (span){s + start, i - start};
            start = i + 1;
        }
    *n = k;
    return out;
}

/* Counter(a) & Counter(b), summed. Sorts both. */
static size_t multiset_common(span *a, size_t na, span *b, size_t nb)
{
    qsort(a, na, sizeof *a, span_cmp);
    qsort(b, nb, sizeof *b, span_cmp);
    size_t i = 0, j = 0, common = 0;
    while (i < na && j < nb) {
        int c = span_cmp(&a[i], &b[j]);
        if (c == 0) { common++; i++; j++; }
        else if (c < 0) i++;
        else j++;
    }
    return common;
}

double vkv_metric_qa_f1(const char *pred, const char *truth)
{
    char *np = vkv_normalize_answer(pred), *nt = vkv_normalize_answer(truth);
    double f1 = 0;
    span *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    if (!np || !nt) goto out;
    /* normalised text has single spaces between tokens and none at the ends */
    if (*np && !(a = split_on(np, strlen(np), ' ', &na))) goto out;
    if (*nt && !(b = split_on(nt, strlen(nt), ' ', &nb))) goto out;
    if (!na || !nb) goto out;
    size_t same = multiset_common(a, na, b, nb);
    if (same) {
        double p = (double)same / na, r = (double)same / nb;
        f1 = 2 * p * r / (p + r);
    }
out:
    free(a);
    free(b);
    free(np);
    free(nt);
    return f1;
}

/* ---- ROUGE-L (pltrdy/rouge, summary level, exclusive) ---- */

typedef struct rouge_text {
    char *buf;          /* the sentences, normalised, one after another */
    span *sent;         /* the sentences */
    size_t n_sent;
    span *words;        /* every sentence's words, in order */
    size_t *first;      /* [n_sent + 1] index of each sentence's first word */
    size_t n_words;
} rouge_text;

static void rouge_text_free(rouge_text *t)
{
    free(t->buf);
    free(t->sent);
    free(t->words);
    free(t->first);
}

/* [" ".join(s.split()) for s in text.split(".") if len(s) > 0], then each
 * sentence .split(" ") (an all-space segment gives one empty word). */
static bool rouge_text_make(const char *text, rouge_text *t)
{
    memset(t, 0, sizeof *t);
    size_t len = strlen(text), n_seg;
    span *seg = split_on(text, len, '.', &n_seg);
    if (!seg) return false;
    t->buf = malloc(len + 1);
    t->sent = malloc((n_seg + 1) * sizeof *t->sent);
    t->first = malloc((n_seg + 2) * sizeof *t->first);
    t->words = malloc((len + n_seg + 1) * sizeof *t->words);
    if (!t->buf || !t->sent || !t->first || !t->words) {
        free(seg);
        return false;
    }
    size_t pos = 0;
    for (size_t s = 0; s < n_seg; s++) {
        if (!seg[s].n) continue;
        char *start = t->buf + pos;
        size_t w0 = t->n_words;
        t->first[t->n_sent] = w0;
        /* collapse white space (Python's str.split()) */
        const unsigned char *p = (const unsigned char *)seg[s].p;
        size_t i = 0, n = seg[s].n;
        bool in_word = false;
        size_t wstart = 0;
        while (i < n) {
            size_t l;
            uint32_t c = utf8_next(p + i, n - i, &l);
            if (is_space_cp(c)) {
                if (in_word) {
                    t->words[t->n_words++] = (span){start + wstart, (size_t)(t->buf + pos - (start + wstart))};
                    in_word = false;
                }
            } else {
                if (!in_word) {
                    if (t->buf + pos > start) t->buf[pos++] = ' ';
                    wstart = (size_t)(t->buf + pos - start);
                    in_word = true;
                }
                memcpy(t->buf + pos, p + i, l);
                pos += l;
            }
            i += l;
        }
        if (in_word) t->words[t->n_words++] = (span){start + wstart, (size_t)(t->buf + pos - (start + wstart))};
        if (t->n_words == w0) t->words[t->n_words++] = (span){start, 0}; /* "".split(" ") == [""] */
        t->sent[t->n_sent++] = (span){start, (size_t)(t->buf + pos - start)};
    }
    t->first[t->n_sent] = t->n_words;
    free(seg);
    return true;
}

/* Distinct words of a span array. */
static size_t n_distinct(const span *w, size_t n, span *scratch)
{
    if (!n) return 0;
    memcpy(scratch, w, n * sizeof *w);
    qsort(scratch, n, sizeof *scratch, span_cmp);
    size_t d = 1;
    for (size_t i = 1; i < n; i++) d += !span_eq(scratch[i], scratch[i - 1]);
    return d;
}

double vkv_metric_rouge_l(const char *pred, const char *truth)
{
    rouge_text h, r;
    bool okh = rouge_text_make(pred, &h), okr = rouge_text_make(truth, &r);
    double f = 0;
    span *scratch = NULL, *uni = NULL;
    uint32_t *table = NULL;
    if (!okh || !okr || !h.n_sent || !r.n_sent) goto out; /* the package raises: LongBench scores 0 */
    size_t cap = h.n_words + r.n_words + 1;
    scratch = malloc(cap * sizeof *scratch);
    uni = malloc(cap * sizeof *uni); /* LCS words; at most min(ref, hyp) per pair, deduplicated as they come */
    if (!scratch || !uni) goto out;
    size_t m = n_distinct(r.words, r.n_words, scratch), n = n_distinct(h.words, h.n_words, scratch);
    /* the union (a set of words) of the reconstructed LCS of every
     * (reference sentence, hypothesis sentence) pair */
    size_t n_uni = 0;
    for (size_t rs = 0; rs < r.n_sent; rs++) {
        const span *x = r.words + r.first[rs];
        size_t nx = r.first[rs + 1] - r.first[rs];
        for (size_t hs = 0; hs < h.n_sent; hs++) {
            const span *y = h.words + h.first[hs];
            size_t ny = h.first[hs + 1] - h.first[hs];
            size_t W = ny + 1;
            uint32_t *t2 = realloc(table, (nx + 1) * W * sizeof *table);
            if (!t2) goto out;
            table = t2;
            for (size_t i = 0; i <= nx; i++)
                for (size_t j = 0; j <= ny; j++) {
                    uint32_t v;
                    if (!i || !j) v = 0;
                    else if (span_eq(x[i - 1], y[j - 1])) v = table[(i - 1) * W + j - 1] + 1;
                    else {
                        uint32_t up = table[(i - 1) * W + j], left = table[i * W + j - 1];
                        v = up > left ? up : left;
                    }
                    table[i * W + j] = v;
                }
            /* _recon: equal -> diagonal (word taken); up if strictly larger, else left */
            size_t i = nx, j = ny;
            while (i && j) {
                if (span_eq(x[i - 1], y[j - 1])) {
                    bool seen = false;
                    for (size_t u = 0; u < n_uni && !seen; u++) seen = span_eq(uni[u], x[i - 1]);
                    if (!seen) {
                        if (n_uni == cap) goto out;
                        uni[n_uni++] = x[i - 1];
                    }
                    i--;
                    j--;
                } else if (table[(i - 1) * W + j] > table[i * W + j - 1]) i--;
                else j--;
            }
        }
    }
    double rl = (double)n_uni / m, pl = (double)n_uni / n;
    f = 2.0 * ((pl * rl) / (pl + rl + 1e-8));
out:
    free(table);
    free(scratch);
    free(uni);
    if (okh) rouge_text_free(&h);
    if (okr) rouge_text_free(&r);
    return f;
}

/* Python's str.strip(): a malloc'ed copy without leading and trailing white
 * space (str.isspace()); NULL when out of memory. */
static char *py_strip(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), i = 0, start = n, end = 0;
    while (i < n) {
        size_t l;
        uint32_t c = utf8_next(p + i, n - i, &l);
        if (!is_space_cp(c)) {
            if (start == n) start = i;
            end = i + l;
        }
        i += l;
    }
    if (start > end) start = end;
    char *r = malloc(end - start + 1);
    if (r) {
        memcpy(r, s + start, end - start);
        r[end - start] = 0;
    }
    return r;
}

double vkv_metric_kvpress_niah(const char *needle, const char *answer)
{
    char *hyp = py_strip(needle), *ref = py_strip(answer);
    double f = hyp && ref ? vkv_metric_rouge_l(hyp, ref) : 0;
    free(hyp);
    free(ref);
    return f;
}

/* ---- classification, count, retrieval ---- */

double vkv_metric_classification(const char *pred, const char *truth, const char *const *classes, size_t n_classes)
{
    if (!n_classes) return 0;
    const char **em = malloc(n_classes * sizeof *em);
    if (!em) return 0;
    size_t n = 0;
    for (size_t i = 0; i < n_classes; i++)
        if (strstr(pred, classes[i])) em[n++] = classes[i];
    /* for match_term in em: if match_term in truth and match_term != truth:
     *     em.remove(match_term)   -- removing while iterating skips the next one */
    for (size_t idx = 0; idx < n;) {
        const char *term = em[idx++];
        if (strstr(truth, term) && strcmp(term, truth)) {
            size_t at = 0;
            while (strcmp(em[at], term)) at++; /* list.remove: the first equal element */
            memmove(em + at, em + at + 1, (n - at - 1) * sizeof *em);
            n--;
        }
    }
    double score = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(em[i], truth)) {
            score = 1.0 / n;
            break;
        }
    free(em);
    return score;
}

/* Fraction of the digit runs of pred equal to want[0, wn). */
static double digit_runs_equal(const char *pred, const char *want, size_t wn)
{
    size_t total = 0, right = 0;
    for (const char *p = pred; *p;) {
        if (*p < '0' || *p > '9') { p++; continue; }
        const char *q = p;
        while (*q >= '0' && *q <= '9') q++;
        total++;
        right += (size_t)(q - p) == wn && !memcmp(p, want, wn);
        p = q;
    }
    return total ? (double)right / total : 0.0;
}

double vkv_metric_count(const char *pred, const char *truth) { return digit_runs_equal(pred, truth, strlen(truth)); }

double vkv_metric_retrieval(const char *pred, const char *truth)
{
    /* re.findall(r'Paragraph (\d+)', truth)[0] */
    for (const char *p = strstr(truth, "Paragraph "); p; p = strstr(p + 1, "Paragraph ")) {
        const char *d = p + 10, *e = d;
        while (*e >= '0' && *e <= '9') e++;
        if (e > d) return digit_runs_equal(pred, d, (size_t)(e - d));
    }
    return 0; /* LongBench would raise IndexError here */
}

/* ---- code similarity ---- */

/* Levenshtein.ratio: (len1 + len2 - indel distance) / (len1 + len2) = 2 LCS / (len1 + len2). */
static double levenshtein_ratio(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    if (!na && !nb) return 1;
    uint32_t *row = calloc(nb + 1, sizeof *row);
    if (!row) return 0;
    for (size_t i = 1; i <= na; i++) {
        uint32_t diag = 0; /* row[j - 1] of the previous row */
        for (size_t j = 1; j <= nb; j++) {
            uint32_t up = row[j];
            uint32_t v = a[i - 1] == b[j - 1] ? diag + 1 : (up > row[j - 1] ? up : row[j - 1]);
            diag = up;
            row[j] = v;
        }
    }
    double r = (double)(2 * (size_t)row[nb]) / (double)(na + nb);
    free(row);
    return r;
}

/* difflib.SequenceMatcher(None, a, b).ratio() with autojunk. */
typedef struct dl_pos {
    uint32_t v;
    uint32_t j;
} dl_pos;

static int dl_pos_cmp(const void *x, const void *y)
{
    const dl_pos *p = x, *q = y;
    if (p->v != q->v) return p->v < q->v ? -1 : 1;
    return p->j < q->j ? -1 : p->j > q->j;
}

typedef struct dl_state {
    const uint32_t *a, *b;
    size_t na, nb;
    dl_pos *b2j;      /* (value, position) sorted; popular values removed */
    size_t n_b2j;
    uint32_t *len_old, *len_new; /* j2len dictionaries as dense arrays (index j + 1) */
    uint32_t *touched_old, *touched_new;
} dl_state;

static void dl_lookup(const dl_state *s, uint32_t v, size_t *lo, size_t *hi)
{
    size_t l = 0, h = s->n_b2j;
    while (l < h) {
        size_t mid = (l + h) / 2;
        if (s->b2j[mid].v < v) l = mid + 1;
        else h = mid;
    }
    *lo = l;
    h = s->n_b2j;
    size_t l2 = l;
    while (l2 < h) {
        size_t mid = (l2 + h) / 2;
        if (s->b2j[mid].v <= v) l2 = mid + 1;
        else h = mid;
    }
    *hi = l2;
}

static void dl_longest(dl_state *s, size_t alo, size_t ahi, size_t blo, size_t bhi, size_t *bi, size_t *bj, size_t *bk)
{
    size_t besti = alo, bestj = blo, bestsize = 0, n_old = 0;
    for (size_t i = alo; i < ahi; i++) {
        size_t lo, hi, n_new = 0;
        dl_lookup(s, s->a[i], &lo, &hi);
        for (size_t t = lo; t < hi; t++) {
            size_t j = s->b2j[t].j;
            if (j < blo) continue;
            if (j >= bhi) break;
            size_t k = s->len_old[j] + 1; /* j2len.get(j - 1, 0) + 1: len_old is indexed by j' + 1 */
            s->len_new[j + 1] = (uint32_t)k;
            s->touched_new[n_new++] = (uint32_t)(j + 1);
            if (k > bestsize) {
                besti = i - k + 1;
                bestj = j - k + 1;
                bestsize = k;
            }
        }
        for (size_t t = 0; t < n_old; t++) s->len_old[s->touched_old[t]] = 0;
        uint32_t *tl = s->len_old; s->len_old = s->len_new; s->len_new = tl;
        uint32_t *tt = s->touched_old; s->touched_old = s->touched_new; s->touched_new = tt;
        n_old = n_new;
    }
    for (size_t t = 0; t < n_old; t++) s->len_old[s->touched_old[t]] = 0;
    /* no junk: extend by equal elements on both sides (popular ones included) */
    while (besti > alo && bestj > blo && s->a[besti - 1] == s->b[bestj - 1]) { besti--; bestj--; bestsize++; }
    while (besti + bestsize < ahi && bestj + bestsize < bhi && s->a[besti + bestsize] == s->b[bestj + bestsize]) bestsize++;
    *bi = besti;
    *bj = bestj;
    *bk = bestsize;
}

static double difflib_ratio(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    if (!na && !nb) return 1;
    dl_state s = {a, b, na, nb, NULL, 0, NULL, NULL, NULL, NULL};
    size_t *queue = NULL;
    double r = 0;
    s.b2j = malloc((nb + 1) * sizeof *s.b2j);
    s.len_old = calloc(nb + 2, sizeof *s.len_old);
    s.len_new = calloc(nb + 2, sizeof *s.len_new);
    s.touched_old = malloc((nb + 1) * sizeof *s.touched_old);
    s.touched_new = malloc((nb + 1) * sizeof *s.touched_new);
    queue = malloc((2 * (na + nb) + 4) * 4 * sizeof *queue);
    if (!s.b2j || !s.len_old || !s.len_new || !s.touched_old || !s.touched_new || !queue) goto out;
    for (size_t j = 0; j < nb; j++) s.b2j[j] = (dl_pos){b[j], (uint32_t)j};
    qsort(s.b2j, nb, sizeof *s.b2j, dl_pos_cmp);
    s.n_b2j = nb;
    if (nb >= 200) { /* autojunk: drop values occurring more than n // 100 + 1 times */
        size_t ntest = nb / 100 + 1, k = 0;
        for (size_t i = 0; i < nb;) {
            size_t e = i;
            while (e < nb && s.b2j[e].v == s.b2j[i].v) e++;
            if (e - i <= ntest)
                for (size_t t = i; t < e; t++) s.b2j[k++] = s.b2j[t];
            i = e;
        }
        s.n_b2j = k;
    }
    size_t nq = 0, matches = 0;
    queue[nq++] = 0; queue[nq++] = na; queue[nq++] = 0; queue[nq++] = nb;
    while (nq) {
        size_t bhi = queue[--nq], blo = queue[--nq], ahi = queue[--nq], alo = queue[--nq];
        size_t i, j, k;
        dl_longest(&s, alo, ahi, blo, bhi, &i, &j, &k);
        if (!k) continue;
        matches += k;
        if (alo < i && blo < j) { queue[nq++] = alo; queue[nq++] = i; queue[nq++] = blo; queue[nq++] = j; }
        if (i + k < ahi && j + k < bhi) { queue[nq++] = i + k; queue[nq++] = ahi; queue[nq++] = j + k; queue[nq++] = bhi; }
    }
    r = 2.0 * (double)matches / (double)(na + nb);
out:
    free(s.b2j);
    free(s.len_old);
    free(s.len_new);
    free(s.touched_old);
    free(s.touched_new);
    free(queue);
    return r;
}

int vkv_fuzz_ratio(const char *a, const char *b, vkv_code_sim_kind kind)
{
    if (!strcmp(a, b)) return 100;
    if (!*a || !*b) return 0;
    size_t na, nb;
    uint32_t *ca = utf8_decode(a, strlen(a), &na), *cb = utf8_decode(b, strlen(b), &nb);
    double r = 0;
    if (ca && cb) r = kind == VKV_CODE_SIM_DIFFLIB ? difflib_ratio(ca, na, cb, nb) : levenshtein_ratio(ca, na, cb, nb);
    free(ca);
    free(cb);
    return (int)nearbyint(100 * r); /* Python's round(): half to even */
}

double vkv_metric_code_sim(const char *pred, const char *truth, vkv_code_sim_kind kind)
{
    while (*pred == '\n') pred++;
    const char *line = "", *p = pred;
    size_t line_len = 0;
    for (;;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        bool skip = memchr(p, '`', n) || memchr(p, '#', n);
        for (size_t i = 0; !skip && i + 1 < n; i++) skip = p[i] == '/' && p[i + 1] == '/';
        if (!skip) {
            line = p;
            line_len = n;
            break;
        }
        if (!e) break;
        p = e + 1;
    }
    char *l = malloc(line_len + 1);
    if (!l) return 0;
    memcpy(l, line, line_len);
    l[line_len] = 0;
    double s = vkv_fuzz_ratio(l, truth, kind) / 100.0;
    free(l);
    return s;
}

/* ---- tasks ---- */

const vkv_lb_task vkv_lb_tasks[VKV_LB_N_TASKS] = {
    {"narrativeqa", VKV_LB_QA_F1, false, false},
    {"qasper", VKV_LB_QA_F1, false, false},
    {"multifieldqa_en", VKV_LB_QA_F1, false, false},
    {"hotpotqa", VKV_LB_QA_F1, false, false},
    {"2wikimqa", VKV_LB_QA_F1, false, false},
    {"musique", VKV_LB_QA_F1, false, false},
    {"gov_report", VKV_LB_ROUGE, false, false},
    {"qmsum", VKV_LB_ROUGE, false, false},
    {"multi_news", VKV_LB_ROUGE, false, false},
    {"trec", VKV_LB_CLASSIFICATION, true, true},
    {"triviaqa", VKV_LB_QA_F1, true, true},
    {"samsum", VKV_LB_ROUGE, true, true},
    {"passage_count", VKV_LB_COUNT, false, false},
    {"passage_retrieval_en", VKV_LB_RETRIEVAL, false, false},
    {"lcc", VKV_LB_CODE_SIM, false, true},
    {"repobench-p", VKV_LB_CODE_SIM, false, true},
};

int vkv_longbench_task_index(const char *name)
{
    if (!name) return -1;
    size_t n = strlen(name);
    for (int i = 0; i < VKV_LB_N_TASKS; i++) {
        size_t tn = strlen(vkv_lb_tasks[i].name);
        if (!strcmp(name, vkv_lb_tasks[i].name) || (n == tn + 2 && !strncmp(name, vkv_lb_tasks[i].name, tn) &&
                                                    !strcmp(name + tn, "_e")))
            return i;
    }
    return -1;
}

const vkv_lb_task *vkv_longbench_task(const char *name)
{
    int i = vkv_longbench_task_index(name);
    return i < 0 ? NULL : &vkv_lb_tasks[i];
}

double vkv_longbench_score(const vkv_lb_task *task, const char *pred, const char *const *answers, size_t n_answers,
                           const char *const *classes, size_t n_classes, const vkv_lb_score_opts *opts)
{
    vkv_code_sim_kind cs = opts ? opts->code_sim : VKV_CODE_SIM_LEVENSHTEIN;
    char *first = NULL;
    if (opts && opts->lstrip)
        while (*pred == ' ' || (*pred >= '\t' && *pred <= '\r')) pred++;
    if (task->first_line) { /* prediction.lstrip('\n').split('\n')[0] */
        while (*pred == '\n') pred++;
        const char *e = strchr(pred, '\n');
        if (e) {
            if (!(first = malloc((size_t)(e - pred) + 1))) return 0;
            memcpy(first, pred, (size_t)(e - pred));
            first[e - pred] = 0;
            pred = first;
        }
    }
    double best = 0;
    for (size_t i = 0; i < n_answers; i++) {
        const char *t = answers[i];
        double s = 0;
        switch (task->metric) {
        case VKV_LB_QA_F1: s = vkv_metric_qa_f1(pred, t); break;
        case VKV_LB_ROUGE: s = vkv_metric_rouge_l(pred, t); break;
        case VKV_LB_CLASSIFICATION: s = vkv_metric_classification(pred, t, classes, n_classes); break;
        case VKV_LB_COUNT: s = vkv_metric_count(pred, t); break;
        case VKV_LB_RETRIEVAL: s = vkv_metric_retrieval(pred, t); break;
        case VKV_LB_CODE_SIM: s = vkv_metric_code_sim(pred, t, cs); break;
        }
        if (s > best) best = s;
    }
    free(first);
    return best;
}
