/* Calibration corpus: plain text or JSONL files -> token sequences.
 *
 * Every file is read in blocks cut at line ends (so a large plain-text file
 * is never held whole), and reading stops as soon as there are tokens for
 * max_seq sequences. A JSONL line is one document (its "text" member), of at
 * most VKV_MAX_LINE_BYTES; a plain-text file is one document. Documents are
 * joined with "\n\n". Only regular files are read (a device such as
 * /dev/zero never ends, and the JSONL sniffing rewinds). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "core/file.h"
#include "core/json.h"

#define BLOCK_BYTES (256u * 1024u)

typedef struct stream {
    const vkv_corpus_params *p;
    int32_t *ids;
    size_t n, cap, want; /* stream tokens (no BOS); want: enough for max_seq sequences */
    bool first_doc;
} stream;

static bool stream_full(const stream *s) { return s->n >= s->want; }

static vkv_status push_ids(stream *s, const int32_t *ids, size_t n)
{
    if (s->n + n > s->cap) {
        size_t cap = s->cap ? s->cap : 1 << 16;
        while (cap < s->n + n) cap *= 2;
        int32_t *g = realloc(s->ids, cap * sizeof *g);
        if (!g) return vkv_error(VKV_ERR_OOM, "out of host memory for the corpus tokens");
        s->ids = g;
        s->cap = cap;
    }
    memcpy(s->ids + s->n, ids, n * sizeof *ids);
    s->n += n;
    return VKV_OK;
}

/* Tokenizes text[0, len) (no special tokens) and appends it. */
static vkv_status push_text(stream *s, const char *text, size_t len)
{
    if (!len || stream_full(s)) return VKV_OK;
    if (!s->p->tok) {
        int32_t buf[4096];
        for (size_t i = 0; i < len; i += 4096) {
            size_t m = len - i < 4096 ? len - i : 4096;
            for (size_t j = 0; j < m; j++) buf[j] = (int32_t)(uint8_t)text[i + j] + 3;
            vkv_status st = push_ids(s, buf, m);
            if (st) return st;
        }
        return VKV_OK;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    vkv_status st = vkv_tokenize(s->p->tok, text, len, false, false, &ids, &n);
    if (!st) st = push_ids(s, ids, n);
    free(ids);
    return st;
}

static vkv_status begin_doc(stream *s)
{
    if (s->first_doc) {
        s->first_doc = false;
        return VKV_OK;
    }
    return push_text(s, "\n\n", 2);
}

static bool is_jsonl(const char *path, FILE *f)
{
    size_t pl = strlen(path);
    if (pl >= 6 && !strcmp(path + pl - 6, ".jsonl")) return true;
    int ch;
    while ((ch = fgetc(f)) != EOF && (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r')) {}
    rewind(f);
    return ch == '{';
}

static vkv_status read_jsonl(stream *s, const char *path, FILE *f)
{
    char *line = NULL;
    size_t cap = 0, len;
    uint64_t lineno = 0;
    vkv_status st = VKV_OK;
    while (!stream_full(s)) {
        if ((st = vkv_read_line(f, VKV_MAX_LINE_BYTES, &line, &cap, &len))) {
            st = vkv_error_context(st, "%s line %llu", path, (unsigned long long)lineno + 1);
            break;
        }
        if (!len) break;
        lineno++;
        size_t i = 0;
        while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n')) i++;
        if (i == len) continue;
        vkv_json_doc *doc;
        if ((st = vkv_json_parse(line, len, &doc))) {
            st = vkv_error_context(st, "%s line %llu", path, (unsigned long long)lineno);
            break;
        }
        const vkv_json *text = vkv_json_get(vkv_json_root(doc), "text");
        if (!text || text->type != VKV_JSON_STRING) {
            vkv_json_free(doc);
            st = vkv_error(VKV_ERR_FORMAT, "%s line %llu: no string member \"text\" (JSONL corpora need one per line)",
                           path, (unsigned long long)lineno);
            break;
        }
        if ((st = begin_doc(s)) || (st = push_text(s, text->string, text->string_len))) {
            vkv_json_free(doc);
            break;
        }
        vkv_json_free(doc);
    }
    free(line);
    return st;
}

static vkv_status read_plain(stream *s, const char *path, FILE *f)
{
    char *buf = malloc(BLOCK_BYTES);
    if (!buf) return vkv_error(VKV_ERR_OOM, "out of host memory");
    vkv_status st = begin_doc(s);
    size_t have = 0;
    while (!st && !stream_full(s)) {
        size_t got = fread(buf + have, 1, BLOCK_BYTES - have, f);
        have += got;
        if (!have) break;
        bool eof = got == 0 || feof(f);
        /* Cut after the last newline of the block (the whole block at EOF or
         * when a line is longer than a block). */
        size_t cut = have;
        if (!eof) {
            size_t i = have;
            while (i > 0 && buf[i - 1] != '\n') i--;
            if (i > 0) cut = i;
        }
        st = push_text(s, buf, cut);
        memmove(buf, buf + cut, have - cut);
        have -= cut;
        if (eof && !have) break;
    }
    if (!st && ferror(f)) st = vkv_error(VKV_ERR_IO, "error reading '%s': %s", path, strerror(errno));
    free(buf);
    return st;
}

vkv_status vkv_corpus_sequences(const vkv_corpus_params *p, int32_t **tokens, uint32_t *n_seq)
{
    *tokens = NULL;
    *n_seq = 0;
    int32_t bos = p->tok ? (vkv_tokenizer_adds_bos(p->tok) ? vkv_tokenizer_bos(p->tok) : VKV_TOKEN_NULL) : 1;
    uint32_t with_bos = bos != VKV_TOKEN_NULL;
    if (p->seq_len < 2) return vkv_error(VKV_ERR_ARG, "the sequence length must be at least 2 tokens");
    if (!p->n_paths) return vkv_error(VKV_ERR_ARG, "no corpus files given");
    uint32_t body = p->seq_len - with_bos;
    stream s = {.p = p, .want = (size_t)p->max_seq * body, .first_doc = true};
    vkv_status st = VKV_OK;
    for (uint32_t i = 0; i < p->n_paths && !st && !stream_full(&s); i++) {
        FILE *f = vkv_open_regular(p->paths[i], "corpus file");
        if (!f) {
            st = VKV_ERR_IO;
            break;
        }
        st = is_jsonl(p->paths[i], f) ? read_jsonl(&s, p->paths[i], f) : read_plain(&s, p->paths[i], f);
        fclose(f);
    }
    if (st) {
        free(s.ids);
        return st;
    }
    size_t n = s.n / body;
    if (n > p->max_seq) n = p->max_seq;
    if (!n) {
        free(s.ids);
        return vkv_error(VKV_ERR_ARG, "the corpus gives %zu tokens, fewer than one sequence of %u (--seq-len)", s.n,
                         p->seq_len);
    }
    int32_t *out = malloc(n * p->seq_len * sizeof *out);
    if (!out) {
        free(s.ids);
        return vkv_error(VKV_ERR_OOM, "out of host memory");
    }
    for (size_t q = 0; q < n; q++) {
        int32_t *dst = out + q * p->seq_len;
        if (with_bos) dst[0] = bos;
        memcpy(dst + with_bos, s.ids + q * body, body * sizeof *dst);
    }
    free(s.ids);
    *tokens = out;
    *n_seq = (uint32_t)n;
    return VKV_OK;
}
