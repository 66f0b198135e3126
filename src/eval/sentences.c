/* English sentence boundaries after NLTK's Punkt (see sentences.h). */
#include "eval/sentences.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the English data ---- */

/* Abbreviations, lower case, without their final period; sorted (strcmp). */
static const char *const ABBREVIATIONS[] = {
    "a.m", "al", "approx", "apr", "assn", "aug", "ave", "blvd", "bros", "ca", "capt", "cf", "co", "col", "corp",
    "dec", "dept", "dr", "e.g", "eq", "esp", "est", "etc", "feb", "fig", "fri", "ft", "gen", "gov", "hon", "i.e",
    "inc", "jan", "jr", "jul", "jun", "lt", "ltd", "messrs", "mr", "mrs", "ms", "mt", "nov", "oct", "p.m", "ph.d",
    "pp", "prof", "rev", "sen", "sep", "sept", "sgt", "sr", "st", "thu", "thurs", "tue", "tues", "u.k", "u.n",
    "u.s", "u.s.a", "viz", "vol", "vs",
};

/* Words that often start a sentence after an abbreviation; sorted. */
static const char *const STARTERS[] = {
    "after", "all", "also", "although", "an", "and", "another", "as", "at", "because", "before", "both", "but",
    "by", "during", "each", "even", "every", "for", "from", "he", "her", "here", "his", "how", "however", "i", "if",
    "in", "instead", "it", "its", "just", "let", "many", "meanwhile", "most", "my", "no", "not", "now", "of", "on",
    "once", "one", "only", "or", "our", "perhaps", "she", "since", "so", "some", "still", "such", "that", "the",
    "their", "then", "there", "these", "they", "this", "those", "though", "thus", "to", "too", "we", "what", "when",
    "where", "whether", "which", "while", "who", "why", "with", "yet", "you", "your",
};

#define N_OF(a) (sizeof(a) / sizeof(a)[0])

static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* p[i] lower-cased, the Latin-1 capitals (UTF-8 c3 80..9e but for the
 * multiplication sign) included, as Python lower-cases a type. */
static char lower_at(const char *p, size_t i)
{
    unsigned char c = (unsigned char)p[i];
    if (i && (unsigned char)p[i - 1] == 0xc3 && c >= 0x80 && c <= 0x9e && c != 0x97) return (char)(c + 0x20);
    return lower(p[i]);
}

/* Whether the lower-cased bytes p[0, n) are one of list[0, count) (sorted). */
static bool in_list(const char *const *list, size_t count, const char *p, size_t n)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *w = list[mid];
        int c = 0;
        size_t i = 0;
        for (; i < n && w[i]; i++)
            if ((c = (unsigned char)lower(p[i]) - (unsigned char)w[i])) break;
        if (!c) c = i < n ? 1 : w[i] ? -1 : 0;
        if (!c) return true;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return false;
}

bool vkv_sentences_is_abbreviation(const char *word, size_t len)
{
    return in_list(ABBREVIATIONS, N_OF(ABBREVIATIONS), word, len);
}

/* ---- characters ---- */

/* Python's white space among ASCII (a regular expression's \s). */
static bool ws(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

/* Punkt's characters that cannot be inside a word. */
static bool non_word(char c) { return c && strchr(")\";}]*:@'({[!?", c); }

/* A character that may start a word (Punkt excludes some punctuation). */
static bool word_start(char c) { return c && !strchr("(\"`{[:;&#*@)}]-,", c); }

static bool closer(char c) { return c && strchr("\"')]}", c); }

/* The length of Punkt's multi-character punctuation at t[i] ("--", "..",
 * ". . ."), or 0. */
static size_t multi_char(const char *t, size_t len, size_t i)
{
    if (i + 1 >= len) return 0;
    if ((t[i] == '-' || t[i] == '.') && t[i + 1] == t[i]) {
        size_t j = i;
        while (j < len && t[j] == t[i]) j++;
        return j - i;
    }
    size_t k = 0; /* pairs of ". " */
    while (i + 2 * k + 1 < len && t[i + 2 * k] == '.' && ws(t[i + 2 * k + 1])) k++;
    for (; k >= 2; k--)
        if (i + 2 * k < len && t[i + 2 * k] == '.') return 2 * k + 1;
    return 0;
}

/* The first code point of p (n >= 1 bytes), decoded for the Latin-1 letters;
 * other non-ASCII code points come back as 0x80. */
static unsigned first_cp(const char *p, size_t n)
{
    unsigned char c = (unsigned char)p[0];
    if (c < 0x80) return c;
    if (c == 0xc3 && n > 1) return 0xc0 + ((unsigned char)p[1] & 0x3f);
    return 0x80;
}

static bool cp_upper(unsigned c) { return (c >= 'A' && c <= 'Z') || (c >= 0xc0 && c <= 0xde && c != 0xd7); }
static bool cp_lower(unsigned c) { return (c >= 'a' && c <= 'z') || (c >= 0xdf && c <= 0xff && c != 0xf7); }

/* ---- tokens ---- */

enum {
    TOK_SENTBREAK = 1,
    TOK_ABBR = 2,
    TOK_ELLIPSIS = 4,
    TOK_LINESTART = 8,
    TOK_PARASTART = 16,
};

typedef struct tok {
    const char *p;
    size_t n;
    unsigned flags;
} tok;

typedef struct tok_list {
    tok *v;
    size_t n, cap;
    bool oom;
} tok_list;

static void tok_add(tok_list *l, const char *p, size_t n, unsigned flags)
{
    if (l->oom) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        tok *g = realloc(l->v, sizeof *g * cap);
        if (!g) {
            l->oom = true;
            return;
        }
        l->v = g;
        l->cap = cap;
    }
    l->v[l->n++] = (tok){p, n, flags};
}

/* Where the word token starting at t[i] ends: before white space, a
 * non-word character, multi-character punctuation, or a comma that ends
 * the word. */
static size_t word_end(const char *t, size_t len, size_t i)
{
    for (size_t j = i + 1;; j++) {
        if (j >= len || ws(t[j]) || non_word(t[j]) || multi_char(t, len, j)) return j;
        if (t[j] == ',' && (j + 1 >= len || ws(t[j + 1]) || non_word(t[j + 1]) || multi_char(t, len, j + 1))) return j;
    }
}

/* Punkt's word tokens of t[0, len), line by line: a line's first token
 * starts a line, and one after a blank line starts a paragraph. */
static void tokenize(const char *t, size_t len, tok_list *out)
{
    bool para = false;
    for (size_t ls = 0; ls <= len;) {
        size_t le = ls;
        while (le < len && t[le] != '\n') le++;
        bool first = true;
        for (size_t i = ls; i < le;) {
            if (ws(t[i])) {
                i++;
                continue;
            }
            size_t e = i + multi_char(t, le, i);
            if (e == i) e = word_start(t[i]) ? word_end(t, le, i) : i + 1;
            tok_add(out, t + i, e - i, first ? TOK_LINESTART | (para ? TOK_PARASTART : 0) : 0);
            if (first) para = false;
            first = false;
            i = e;
        }
        if (first) para = true; /* a blank line */
        ls = le + 1;
    }
}

/* A token's type: lower case, or "##number##" for a number
 * (-?[.,]?digit[digits , . -]*). */
static bool is_number(const tok *k)
{
    size_t i = 0;
    if (i < k->n && k->p[i] == '-') i++;
    if (i < k->n && (k->p[i] == '.' || k->p[i] == ',')) i++;
    if (i >= k->n || k->p[i] < '0' || k->p[i] > '9') return false;
    for (i++; i < k->n; i++)
        if (!((k->p[i] >= '0' && k->p[i] <= '9') || k->p[i] == ',' || k->p[i] == '.' || k->p[i] == '-')) return false;
    return true;
}

#define NUMBER_TYPE "##number##"

/* The type of k without a final period ("mr", "##number##"), when
 * strip_period (Punkt's type_no_period) or k is a sentence break
 * (type_no_sentperiod); else the whole type. */
typedef struct type_view {
    const char *p; /* the token's bytes, compared lower-cased, or NUMBER_TYPE */
    size_t n;
} type_view;

static type_view tok_type(const tok *k, bool strip_period)
{
    if (is_number(k)) return (type_view){NUMBER_TYPE, sizeof NUMBER_TYPE - 1};
    type_view v = {k->p, k->n};
    if ((strip_period || (k->flags & TOK_SENTBREAK)) && v.n > 1 && v.p[v.n - 1] == '.') v.n--;
    return v;
}

static bool period_final(const tok *k) { return k->p[k->n - 1] == '.'; }

static bool is_ellipsis(const tok *k)
{
    if (k->n < 2) return false;
    for (size_t i = 0; i < k->n; i++)
        if (k->p[i] != '.') return false;
    return true;
}

/* A letter (or '_') and a period. */
static bool is_initial(const tok *k)
{
    if (k->n < 2 || k->p[k->n - 1] != '.') return false;
    unsigned c = first_cp(k->p, k->n);
    size_t cl = c < 0x80 ? 1 : 2;
    return cl + 1 == k->n && (cp_upper(c) || cp_lower(c) || c == '_');
}

/* Punkt's first pass: a lone '.', '?' or '!' ends a sentence; dots are an
 * ellipsis; a word ending in one period is an abbreviation when known
 * (whole, or its part after the last '-'), else a sentence's end. */
static void first_pass(tok *k)
{
    if (k->n == 1 && (k->p[0] == '.' || k->p[0] == '?' || k->p[0] == '!')) k->flags |= TOK_SENTBREAK;
    else if (is_ellipsis(k)) k->flags |= TOK_ELLIPSIS;
    else if (period_final(k) && !(k->n >= 2 && k->p[k->n - 2] == '.')) {
        size_t n = k->n - 1, dash = n;
        while (dash > 0 && k->p[dash - 1] != '-') dash--;
        if (vkv_sentences_is_abbreviation(k->p, n) || vkv_sentences_is_abbreviation(k->p + dash, n - dash))
            k->flags |= TOK_ABBR;
        else k->flags |= TOK_SENTBREAK;
    }
}

/* ---- the orthographic table: how each type is capitalised where ---- */

enum {
    ORTHO_BEG_UC = 1 << 1,
    ORTHO_MID_UC = 1 << 2,
    ORTHO_UNK_UC = 1 << 3,
    ORTHO_BEG_LC = 1 << 4,
    ORTHO_MID_LC = 1 << 5,
    ORTHO_UNK_LC = 1 << 6,
    ORTHO_UC = ORTHO_BEG_UC | ORTHO_MID_UC | ORTHO_UNK_UC,
    ORTHO_LC = ORTHO_BEG_LC | ORTHO_MID_LC | ORTHO_UNK_LC,
};

typedef struct ortho_entry {
    const char *p; /* a type's first bytes (compared lower-cased), in the text or NUMBER_TYPE */
    size_t n;
    unsigned flags;
} ortho_entry;

typedef struct ortho_table {
    ortho_entry *v; /* open addressing; p NULL when empty */
    size_t cap, n;
} ortho_table;

static uint64_t type_hash(type_view t)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < t.n; i++) h = (h ^ (unsigned char)lower_at(t.p, i)) * 1099511628211ull;
    return h;
}

static bool type_eq(const ortho_entry *e, type_view t)
{
    if (e->n != t.n) return false;
    for (size_t i = 0; i < t.n; i++)
        if (lower_at(e->p, i) != lower_at(t.p, i)) return false;
    return true;
}

static ortho_entry *ortho_slot(const ortho_table *o, type_view t)
{
    for (size_t i = type_hash(t) & (o->cap - 1);; i = (i + 1) & (o->cap - 1))
        if (!o->v[i].p || type_eq(&o->v[i], t)) return &o->v[i];
}

static unsigned ortho_get(const ortho_table *o, type_view t)
{
    if (!o->cap) return 0;
    const ortho_entry *e = ortho_slot(o, t);
    return e->p ? e->flags : 0;
}

static bool ortho_add(ortho_table *o, type_view t, unsigned flag)
{
    if ((o->n + 1) * 2 > o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 1024;
        ortho_table g = {calloc(cap, sizeof *g.v), cap, o->n};
        if (!g.v) return false;
        for (size_t i = 0; i < o->cap; i++)
            if (o->v[i].p) *ortho_slot(&g, (type_view){o->v[i].p, o->v[i].n}) = o->v[i];
        free(o->v);
        *o = g;
    }
    ortho_entry *e = ortho_slot(o, t);
    if (!e->p) {
        *e = (ortho_entry){t.p, t.n, 0};
        o->n++;
    }
    e->flags |= flag;
    return true;
}

/* Punkt's trainer's orthographic data: each token's case at the start of
 * a sentence, inside one, or where that is unknown (after an abbreviation,
 * at a line's start), by the first pass's breaks. */
static bool learn_ortho(tok_list *toks, ortho_table *o)
{
    enum { INTERNAL, INITIAL, UNKNOWN } ctx = INTERNAL;
    for (size_t i = 0; i < toks->n; i++) {
        tok *k = &toks->v[i];
        if ((k->flags & TOK_PARASTART) && ctx != UNKNOWN) ctx = INITIAL;
        if ((k->flags & TOK_LINESTART) && ctx == INTERNAL) ctx = UNKNOWN;
        unsigned c = first_cp(k->p, k->n), flag = 0;
        if (cp_lower(c)) flag = ctx == INITIAL ? ORTHO_BEG_LC : ctx == INTERNAL ? ORTHO_MID_LC : ORTHO_UNK_LC;
        else if (cp_upper(c)) flag = ctx == INITIAL ? ORTHO_BEG_UC : ctx == INTERNAL ? ORTHO_MID_UC : ORTHO_UNK_UC;
        if (flag && !ortho_add(o, tok_type(k, false), flag)) return false;
        if (k->flags & TOK_SENTBREAK) ctx = is_number(k) || is_initial(k) ? UNKNOWN : INITIAL;
        else if (k->flags & (TOK_ELLIPSIS | TOK_ABBR)) ctx = UNKNOWN;
        else ctx = INTERNAL;
    }
    return true;
}

/* ---- the decision at a candidate end ---- */

typedef enum { STARTS_NO, STARTS_YES, STARTS_UNKNOWN } starts;

/* Punkt's orthographic heuristic: whether k starts a sentence. */
static starts ortho_heuristic(const ortho_table *o, const tok *k)
{
    if (k->n == 1 && strchr(";:,.!?", k->p[0])) return STARTS_NO;
    unsigned ortho = ortho_get(o, tok_type(k, false)), c = first_cp(k->p, k->n);
    if (cp_upper(c) && (ortho & ORTHO_LC) && !(ortho & ORTHO_MID_UC)) return STARTS_YES;
    if (cp_lower(c) && ((ortho & ORTHO_UC) || !(ortho & ORTHO_BEG_LC))) return STARTS_NO;
    return STARTS_UNKNOWN;
}

/* Punkt's second pass over a token ending in a period and the next one. */
static void second_pass(const ortho_table *o, tok *a, const tok *b)
{
    if (!period_final(a)) return;
    type_view next = tok_type(b, false);
    bool initial = is_initial(a);
    unsigned c = first_cp(b->p, b->n);
    if ((a->flags & (TOK_ABBR | TOK_ELLIPSIS)) && !initial) {
        starts s = ortho_heuristic(o, b);
        if (s == STARTS_YES || (cp_upper(c) && next.p != (const char *)NUMBER_TYPE &&
                                in_list(STARTERS, N_OF(STARTERS), next.p, next.n))) {
            a->flags |= TOK_SENTBREAK;
            return;
        }
    }
    if (initial || is_number(a)) {
        starts s = ortho_heuristic(o, b);
        if (s == STARTS_NO ||
            (s == STARTS_UNKNOWN && initial && cp_upper(c) && !(ortho_get(o, next) & ORTHO_LC))) {
            a->flags &= ~(unsigned)TOK_SENTBREAK;
            a->flags |= TOK_ABBR;
        }
    }
}

/* Whether the context (the word before a candidate end, the end and what
 * follows it) holds a sentence break with a token after it. */
static bool holds_break(const ortho_table *o, const char *t, size_t n, tok_list *scratch, bool *oom)
{
    scratch->n = 0;
    tokenize(t, n, scratch);
    if (scratch->oom) {
        *oom = true;
        return false;
    }
    for (size_t i = 0; i < scratch->n; i++) first_pass(&scratch->v[i]);
    for (size_t i = 0; i + 1 < scratch->n; i++) second_pass(o, &scratch->v[i], &scratch->v[i + 1]);
    for (size_t i = 0; i + 1 < scratch->n; i++)
        if (scratch->v[i].flags & TOK_SENTBREAK) return true;
    return false;
}

/* ---- the split ---- */

typedef struct span_list {
    vkv_sentence *v;
    size_t n, cap;
    bool oom;
} span_list;

static void span_add(span_list *l, size_t s, size_t e)
{
    if (l->oom) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        vkv_sentence *g = realloc(l->v, sizeof *g * cap);
        if (!g) {
            l->oom = true;
            return;
        }
        l->v = g;
        l->cap = cap;
    }
    l->v[l->n++] = (vkv_sentence){s, e};
}

/* A candidate end at t[m]: what follows it, [m + 1, after_end), and where the
 * next token starts (0 when a non-word character follows instead). */
static bool candidate(const char *t, size_t len, size_t m, size_t *after_end, size_t *next_tok)
{
    if (t[m] != '.' && t[m] != '?' && t[m] != '!') return false;
    if (m + 1 < len && non_word(t[m + 1])) {
        *after_end = m + 2;
        *next_tok = 0;
        return true;
    }
    size_t j = m + 1;
    while (j < len && ws(t[j])) j++;
    if (j == m + 1 || j >= len) return false;
    *next_tok = j;
    while (j < len && !ws(t[j])) j++;
    *after_end = j;
    return true;
}

/* The sentence slices before realignment (Punkt's _slices_from_text). */
static bool raw_slices(const char *t, size_t len, const ortho_table *o, span_list *out)
{
    tok_list scratch = {0};
    bool oom = false;
    size_t last_break = 0;
    /* the previous candidate, yielded once the next one shows it is not in the same word */
    bool have_prev = false;
    size_t prev_m = 0, prev_word = 0, prev_after = 0, prev_next = 0;
    size_t prev_slice_start = 0, prev_slice_stop = 0;
    for (size_t m = 0; m <= len && !oom; m++) {
        size_t after_end = 0, next_tok = 0;
        bool last = m == len;
        if (!last && !candidate(t, len, m, &after_end, &next_tok)) continue;
        size_t word = 0;
        if (!last) {
            /* the word before: after the last white space since the previous candidate */
            size_t from = prev_slice_stop, ws_at = 0;
            for (size_t i = m; i > from; i--)
                if (ws(t[i - 1])) {
                    ws_at = i - 1 - from;
                    break;
                }
            word = ws_at ? from + ws_at + 1 : prev_slice_start;
        }
        if (have_prev && (last || prev_slice_stop <= word)) {
            if (holds_break(o, t + prev_word, prev_after - prev_word, &scratch, &oom)) {
                span_add(out, last_break, prev_m + 1);
                last_break = prev_next ? prev_next : prev_m + 1;
            }
        }
        if (last) break;
        have_prev = true;
        prev_m = m;
        prev_word = word;
        prev_after = after_end;
        prev_next = next_tok;
        prev_slice_start = word;
        prev_slice_stop = m;
    }
    free(scratch.v);
    size_t end = len;
    while (end > 0 && ws(t[end - 1])) end--;
    span_add(out, last_break, end);
    return !oom && !out->oom;
}

/* The closing quotes and brackets that open text[s, e) and are followed by
 * white space, "--" or its end: how many, and how far with the white space.
 * False when it does not open so. */
static bool realignment(const char *t, size_t s, size_t e, size_t *closers, size_t *skip)
{
    for (size_t k = s; k < e && closer(t[k]); k++) {
        size_t j = k + 1;
        if (j < e && ws(t[j])) {
            size_t w = j;
            while (w < e && ws(t[w])) w++;
            *closers = j - s;
            *skip = w - s;
            return true;
        }
        if (j == e || (j + 1 < e && t[j] == '-' && t[j + 1] == '-')) {
            *closers = *skip = j - s;
            return true;
        }
    }
    return false;
}

vkv_status vkv_sentences_split(const char *text, size_t len, vkv_sentence **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    tok_list all = {0};
    ortho_table o = {0};
    span_list raw = {0}, done = {0};
    tokenize(text, len, &all);
    bool ok = !all.oom;
    for (size_t i = 0; ok && i < all.n; i++) first_pass(&all.v[i]);
    ok = ok && learn_ortho(&all, &o) && raw_slices(text, len, &o, &raw);
    /* closing punctuation at a sentence's start goes to the sentence before */
    size_t realign = 0;
    for (size_t i = 0; ok && i < raw.n; i++) {
        size_t s = raw.v[i].start + realign, e = raw.v[i].end, closers, skip;
        if (i + 1 < raw.n && realignment(text, raw.v[i + 1].start, raw.v[i + 1].end, &closers, &skip)) {
            span_add(&done, s, raw.v[i + 1].start + closers);
            realign = skip;
            continue;
        }
        realign = 0;
        if (s < e) span_add(&done, s, e);
    }
    ok = ok && !done.oom;
    free(all.v);
    free(o.v);
    free(raw.v);
    if (!ok) {
        free(done.v);
        return vkv_error(VKV_ERR_OOM, "out of host memory splitting %zu bytes into sentences", len);
    }
    /* no white space at a sentence's ends (only a text's start can hold some) */
    size_t k = 0;
    for (size_t i = 0; i < done.n; i++) {
        vkv_sentence s = done.v[i];
        while (s.start < s.end && ws(text[s.start])) s.start++;
        while (s.end > s.start && ws(text[s.end - 1])) s.end--;
        if (s.start < s.end) done.v[k++] = s;
    }
    if (!k) {
        free(done.v);
        done.v = NULL;
    }
    *out = done.v;
    *n = k;
    return VKV_OK;
}
