/* Byte-level BPE pre-tokenizer: llama.cpp's regexes per `tokenizer.ggml.pre`,
 * matched with PCRE2 in UTF + UCP mode.
 *
 * llama.cpp applies a list of regexes in sequence: each one splits every
 * piece the previous ones produced, and the text between two matches is a
 * piece too. Its engines have two quirks that decide token ids, reproduced
 * here: \s is ASCII white space only (every other White_Space code point is
 * replaced by U+000B before matching), and \p{S} does not contain '~'. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "tok/tok_internal.h"

/* --- the regex lists (llama-vocab.cpp, llm_tokenizer_bpe) --- */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3 \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_PORO " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"
#define RE_CJK "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
/* Cased letters (Lu, Ll, Lt) as DeepSeek lists them. Written as escapes
 * because Unicode normalisation of the source would change some of them
 * (U+1FD3 -> U+0390, U+212A -> K, ...) and break the ranges. */
#define RE_DEEPSEEK_LETTERS \
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}" \
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}" \
    "\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}" \
    "\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}" \
    "\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}" \
    "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}" \
    "\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}" \
    "\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}" \
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}" \
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}" \
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}" \
    "\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}" \
    "\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}" \
    "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}" \
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}" \
    "\\x{1E900}-\\x{1E943}]+"
#define RE_TEKKEN_WORDS                                                                         \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"

static const char *const re_default[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    RE_GPT2,
    "\\p{N}+",
    "[0-9][0-9][0-9]",
};
static const char *const re_gpt2[] = {RE_GPT2};
static const char *const re_llama3[] = {RE_LLAMA3};
static const char *const re_qwen2[] = {RE_QWEN2};
static const char *const re_deepseek_llm[] = {
    "[\r\n]", RE_DEEPSEEK_LETTERS, "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+", "\\s+$", RE_CJK, "\\p{N}+",
};
static const char *const re_deepseek_coder[] = {
    "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}",
};
static const char *const re_deepseek3[] = {
    "\\p{N}{1,3}",
    "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};
static const char *const re_falcon[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+",
    RE_GPT2,
    "[0-9][0-9][0-9]",
};
static const char *const re_starcoder[] = {"\\p{N}", RE_GPT2};
static const char *const re_poro[] = {RE_PORO};
static const char *const re_viking[] = {RE_PORO, "\\p{N}"};
static const char *const re_tekken[] = {
    RE_TEKKEN_WORDS "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
static const char *const re_gpt4o[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" RE_CONTRACTIONS
    "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" RE_CONTRACTIONS
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

#define LIST(a) a, (int)(sizeof a / sizeof a[0])

typedef struct pre_def {
    const char *name;
    const char *const *re;
    int n_re;
    tok_pre_info info;
} pre_def;

static const pre_def pre_defs[] = {
    {"default", LIST(re_default), {false, false, false}},
    {"llama3", LIST(re_llama3), {true, true, false}},
    {"llama-v3", LIST(re_llama3), {true, true, false}},
    {"llama-bpe", LIST(re_llama3), {true, true, false}},
    {"falcon3", LIST(re_llama3), {true, true, false}},
    {"falcon-h1", LIST(re_llama3), {true, true, false}},
    {"pixtral", LIST(re_llama3), {true, true, false}},
    {"midm-2.0", LIST(re_llama3), {true, true, false}},
    {"lfm2", LIST(re_llama3), {true, true, false}},
    {"dbrx", LIST(re_llama3), {false, false, false}},
    {"smaug-bpe", LIST(re_llama3), {false, false, false}},
    {"chatglm-bpe", LIST(re_llama3), {false, false, true}},
    {"glm4", LIST(re_llama3), {false, false, true}},
    {"deepseek-llm", LIST(re_deepseek_llm), {false, false, false}},
    {"deepseek-coder", LIST(re_deepseek_coder), {false, false, false}},
    {"deepseek-v3", LIST(re_deepseek3), {false, false, false}},
    {"falcon", LIST(re_falcon), {false, false, false}},
    {"starcoder", LIST(re_starcoder), {false, false, false}},
    {"refact", LIST(re_starcoder), {false, false, false}},
    {"command-r", LIST(re_starcoder), {false, false, false}},
    {"smollm", LIST(re_starcoder), {false, false, false}},
    {"codeshell", LIST(re_starcoder), {false, false, false}},
    {"exaone", LIST(re_starcoder), {false, false, false}},
    {"minerva-7b", LIST(re_starcoder), {false, false, false}},
    {"gpt-2", LIST(re_gpt2), {false, false, false}},
    {"phi-2", LIST(re_gpt2), {false, false, false}},
    {"mpt", LIST(re_gpt2), {false, false, false}},
    {"olmo", LIST(re_gpt2), {false, false, false}},
    {"jais", LIST(re_gpt2), {false, false, false}},
    {"jina-es", LIST(re_gpt2), {false, false, false}},
    {"jina-de", LIST(re_gpt2), {false, false, false}},
    {"jina-v1-en", LIST(re_gpt2), {false, false, false}},
    {"jina-v2-es", LIST(re_gpt2), {false, false, false}},
    {"jina-v2-de", LIST(re_gpt2), {false, false, false}},
    {"jina-v2-code", LIST(re_gpt2), {false, false, false}},
    {"roberta-bpe", LIST(re_gpt2), {false, false, false}},
    {"gigachat", LIST(re_gpt2), {false, false, false}},
    {"qwen2", LIST(re_qwen2), {false, false, false}},
    {"deepseek-r1-qwen", LIST(re_qwen2), {false, false, false}},
    {"megrez", LIST(re_qwen2), {false, false, false}},
    {"stablelm2", LIST(re_qwen2), {false, false, false}},
    {"poro-chat", LIST(re_poro), {false, false, false}},
    {"bloom", LIST(re_poro), {false, false, false}},
    {"gpt3-finnish", LIST(re_poro), {false, false, false}},
    {"viking", LIST(re_viking), {false, false, false}},
    {"tekken", LIST(re_tekken), {true, true, false}},
    {"gpt-4o", LIST(re_gpt4o), {false, false, false}},
    {"llama4", LIST(re_gpt4o), {false, false, false}},
};

/* --- regex translation --- */


/* Length of the escape at s ("\p{L}" is one escape). */
static size_t escape_len(const char *s)
{
    if (s[1] == 'p' || s[1] == 'P') {
        if (s[2] == '{') {
            const char *e = strchr(s + 2, '}');
            if (e) return (size_t)(e - s) + 1;
        }
        return 3;
    }
    return s[1] ? 2 : 1;
}

/* Rewrites one of llama.cpp's regexes into a PCRE2 pattern with llama.cpp's
 * semantics (see the top of the file). NULL when out of memory. */
static char *translate_regex(const char *re)
{
    vkv_strbuf b = {0};
    for (const char *s = re; *s;) {
        if (*s == '\\') {
            size_t n = escape_len(s);
            if (s[1] == 's') vkv_strbuf_puts(&b, "[\\t-\\r ]");
            else if (s[1] == 'S') vkv_strbuf_puts(&b, "[^\\t-\\r ]");
            else if (!strncmp(s, "\\p{S}", 5)) vkv_strbuf_puts(&b, "(?:(?!~)\\p{S})");
            else vkv_strbuf_put(&b, s, n);
            s += n;
            continue;
        }
        if (*s != '[') {
            vkv_strbuf_put(&b, s, 1);
            s++;
            continue;
        }
        /* a character class: find its end, rewrite \s, and exclude '~' from
         * \p{S} by a lookahead (positive class) or an alternative (negated) */
        const char *body = s + 1;
        bool neg = *body == '^';
        if (neg) body++;
        const char *e = body;
        if (*e == ']') e++;  /* a leading ']' is literal */
        bool has_sym = false;
        while (*e && *e != ']') {
            if (*e == '\\') {
                if (!strncmp(e, "\\p{S}", 5)) has_sym = true;
                e += escape_len(e);
            } else {
                e++;
            }
        }
        if (has_sym) vkv_strbuf_puts(&b, neg ? "(?:~|" : "(?:(?!~)");
        vkv_strbuf_puts(&b, neg ? "[^" : "[");
        for (const char *c = body; c < e;) {
            if (*c == '\\') {
                size_t n = escape_len(c);
                if (c[1] == 's') vkv_strbuf_puts(&b, "\\t-\\r ");
                else vkv_strbuf_put(&b, c, n);
                c += n;
            } else {
                vkv_strbuf_put(&b, c, 1);
                c++;
            }
        }
        vkv_strbuf_puts(&b, "]");
        if (has_sym) vkv_strbuf_puts(&b, ")");
        s = *e ? e + 1 : e;
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* The same regexes as tokenizer.json files spell them: the contractions as
 * one case-insensitive group. PCRE2 would fold case by Unicode there ('ſ' for
 * 's', the Kelvin sign for 'k'), llama.cpp's spelling does not, so a file
 * holding one of these gets llama.cpp's list and the ids of its GGUF twin. */
#define RE_HF_CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
#define RE_HF_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
static const struct {
    const char *re, *pre;
} hf_spellings[] = {
    {RE_HF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" RE_HF_TAIL, "llama3"},
    {RE_HF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" RE_HF_TAIL, "qwen2"},
};

const char *tok_pretok_known(const char *const *re, int n)
{
    if (n == 1)
        for (size_t i = 0; i < sizeof hf_spellings / sizeof hf_spellings[0]; i++)
            if (!strcmp(re[0], hf_spellings[i].re)) return hf_spellings[i].pre;
    for (size_t i = 0; i < sizeof pre_defs / sizeof pre_defs[0]; i++) {
        const pre_def *d = &pre_defs[i];
        int same = d->n_re == n;
        for (int k = 0; same && k < n; k++) same = !strcmp(d->re[k], re[k]);
        if (same) return d->name;
    }
    return NULL;
}

vkv_status tok_pretok_init(tok_pretok *p, const char *pre, tok_pre_info *info)
{
    memset(p, 0, sizeof *p);
    const pre_def *def = NULL;
    for (size_t i = 0; i < sizeof pre_defs / sizeof pre_defs[0]; i++)
        if (!strcmp(pre_defs[i].name, pre)) def = &pre_defs[i];
    if (!def) return vkv_error(VKV_ERR_UNSUPPORTED, "unknown pre-tokenizer type (tokenizer.ggml.pre) '%s'", pre);
    *info = def->info;
    char what[96];
    snprintf(what, sizeof what, "pre-tokenizer '%s'", pre);
    return tok_pretok_init_regexes(p, def->re, def->n_re, what);
}

vkv_status tok_pretok_init_regexes(tok_pretok *p, const char *const *re, int n, const char *what)
{
    memset(p, 0, sizeof *p);
    if (n > TOK_MAX_REGEX)
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: %d regexes, more than the %d implemented", what, n, TOK_MAX_REGEX);
    uint32_t jit = 0;
    pcre2_config(PCRE2_CONFIG_JIT, &jit);
    for (int i = 0; i < n; i++) {
        char *pat = translate_regex(re[i]);
        if (!pat) {
            tok_pretok_free(p);
            return vkv_error(VKV_ERR_OOM, "out of memory compiling %s", what);
        }
        int err;
        PCRE2_SIZE erroff;
        pcre2_code *code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                         PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &erroff, NULL);
        if (!code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            vkv_status s = vkv_error(VKV_ERR_UNSUPPORTED, "%s: regex %d does not compile at %zu: %s",
                                     what, i, (size_t)erroff, (const char *)msg);
            free(pat);
            tok_pretok_free(p);
            return s;
        }
        free(pat);
        /* JIT is an optimisation only: without it pcre2_match interprets */
        if (jit) pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
        p->re[p->n_re++] = code;
    }
    return VKV_OK;
}

void tok_pretok_free(tok_pretok *p)
{
    for (int i = 0; i < p->n_re; i++) pcre2_code_free(p->re[i]);
    memset(p, 0, sizeof *p);
}

/* --- splitting --- */

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need) cap2 *= 2;
    void *q = realloc(*p, cap2 * elem);
    if (!q) return false;
    *p = q;
    *cap = cap2;
    return true;
}

/* Code points llama.cpp treats as white space besides ASCII ones. */
static bool is_unicode_space(uint32_t cp)
{
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Index of the code point starting at subject byte b (b is a boundary). */
static size_t cp_at(const size_t *cp_subj, size_t lo, size_t hi, size_t b)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp_subj[mid] < b) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

vkv_status tok_pretok_split(const tok_pretok *p, const char *frag, size_t len, tok_words *w)
{
    w->len = 0;
    w->n = 0;
    /* decode; text = clean re-encoding, subj = what the regexes see */
    if (!grow((void **)&w->text, &w->cap, len * 3 + 4, 1) || !grow((void **)&w->subj, &w->subj_cap, len * 3 + 4, 1) ||
        !grow((void **)&w->cp_text, &w->cp_text_cap, len + 1, sizeof(size_t)) ||
        !grow((void **)&w->cp_subj, &w->cp_subj_cap, len + 1, sizeof(size_t)))
        return vkv_error(VKV_ERR_OOM, "out of memory pre-tokenizing %zu bytes", len);
    size_t n_cp = 0, tl = 0, sl = 0;
    for (size_t pos = 0; pos < len;) {
        uint32_t cp = tok_utf8_decode(frag, len, &pos);
        uint32_t out = cp > 0x10FFFF ? 0xFFFD : cp;
        uint32_t m = cp;
        if (m >= 0x80 && is_unicode_space(m)) m = 0x0B;
        else if ((m >= 0xD800 && m <= 0xDFFF) || m > 0x10FFFF) m = 0xE000;  /* "other" category */
        w->cp_text[n_cp] = tl;
        w->cp_subj[n_cp] = sl;
        tl += vkv_utf8_encode(out, w->text + tl);
        sl += vkv_utf8_encode(m, w->subj + sl);
        n_cp++;
    }
    w->cp_text[n_cp] = tl;
    w->cp_subj[n_cp] = sl;
    w->len = tl;

    /* segments as code point ends; start with the whole fragment */
    if (!grow((void **)&w->seg, &w->seg_cap, 1, sizeof(size_t)))
        return vkv_error(VKV_ERR_OOM, "out of memory pre-tokenizing");
    size_t n_seg = 0;
    if (n_cp) w->seg[n_seg++] = n_cp;

    pcre2_match_data *md = NULL;
    for (int r = 0; r < p->n_re && n_seg; r++) {
        const pcre2_code *code = p->re[r];
        if (!md) md = pcre2_match_data_create(1, NULL);
        if (!md) return vkv_error(VKV_ERR_OOM, "out of memory pre-tokenizing");
        size_t n2 = 0, seg_start = 0;
        for (size_t s = 0; s < n_seg; s++) {
            size_t seg_end = w->seg[s];
            size_t base = w->cp_subj[seg_start], blen = w->cp_subj[seg_end] - base;
            const char *subj = w->subj + base;
            size_t prev = 0, at = 0;  /* bytes within the segment */
            while (at <= blen) {
                int rc = pcre2_match(code, (PCRE2_SPTR)subj, blen, at, PCRE2_NO_UTF_CHECK, md, NULL);
                if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
                    rc = pcre2_match(code, (PCRE2_SPTR)subj, blen, at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    pcre2_match_data_free(md);
                    return vkv_error(VKV_ERR_UNSUPPORTED, "pre-tokenizer regex failed (PCRE2 error %d)", rc);
                }
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                size_t ms = ov[0], me = ov[1];
                if (me == ms) {  /* empty match: move on by one character */
                    if (ms >= blen) break;
                    at = ms + tok_utf8_len((unsigned char)subj[ms]);
                    continue;
                }
                if (!grow((void **)&w->seg2, &w->seg2_cap, n2 + 2, sizeof(size_t))) {
                    pcre2_match_data_free(md);
                    return vkv_error(VKV_ERR_OOM, "out of memory pre-tokenizing");
                }
                if (ms > prev) w->seg2[n2++] = cp_at(w->cp_subj, seg_start, seg_end, base + ms);
                w->seg2[n2++] = cp_at(w->cp_subj, seg_start, seg_end, base + me);
                prev = at = me;
            }
            if (prev < blen) {
                if (!grow((void **)&w->seg2, &w->seg2_cap, n2 + 1, sizeof(size_t))) {
                    pcre2_match_data_free(md);
                    return vkv_error(VKV_ERR_OOM, "out of memory pre-tokenizing");
                }
                w->seg2[n2++] = seg_end;
            }
            seg_start = seg_end;
        }
        size_t *t = w->seg;
        w->seg = w->seg2;
        w->seg2 = t;
        size_t tc = w->seg_cap;
        w->seg_cap = w->seg2_cap;
        w->seg2_cap = tc;
        n_seg = n2;
    }
    if (md) pcre2_match_data_free(md);

    if (!grow((void **)&w->ends, &w->ends_cap, n_seg ? n_seg : 1, sizeof(size_t)))
        return vkv_error(VKV_ERR_OOM, "out of memory pre-tokenizing");
    for (size_t i = 0; i < n_seg; i++) w->ends[i] = w->cp_text[w->seg[i]];
    w->n = n_seg;
    return VKV_OK;
}

void tok_words_free(tok_words *w)
{
    free(w->text);
    free(w->ends);
    free(w->subj);
    free(w->cp_text);
    free(w->cp_subj);
    free(w->seg);
    free(w->seg2);
    memset(w, 0, sizeof *w);
}
