/* vkvector tokenize: print the token ids of a text for a GGUF vocabulary.
 * Works on vocabulary-only GGUFs; no GPU is touched. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/file.h"
#include "model/gguf.h"
#include "tok/tokenizer.h"

static const char *const CMD = "tokenize";
static const char *const USAGE =
    "vkvector tokenize -m MODEL.gguf [--text TEXT | --file FILE] [--bos] [--special]\n"
    "\n"
    "Prints the token ids of the text, space-separated on one line, as llama.cpp\n"
    "tokenizes it.";

/* Whole file (or stdin) into a malloc'ed buffer, at most VKV_MAX_DOC_BYTES. */
static vkv_status read_text(const char *path, char **out, size_t *len)
{
    if (!path || !strcmp(path, "-")) return vkv_read_stream(stdin, "standard input", VKV_MAX_DOC_BYTES, out, len);
    return vkv_read_file(path, VKV_MAX_DOC_BYTES, out, len);
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *text = NULL, *file = NULL;
    bool bos = false, special = false;
    const cli_opt opts[] = {
        {.type = CLI_STR, .names = "-m|--model", .metavar = "PATH", .dest = &model,
         .help = "GGUF file holding the vocabulary (vocabulary-only files work)"},
        {.type = CLI_STR, .names = "--text", .metavar = "TEXT", .dest = &text, .help = "the text to tokenize"},
        {.type = CLI_STR, .names = "--file", .metavar = "FILE", .dest = &file,
         .help = "read the text from FILE ('-': standard input); without\n"
                 "--text or --file the text is read from standard input"},
        {.type = CLI_FLAG, .names = "--bos", .dest = &bos, .help = "put the vocabulary's BOS token first"},
        {.type = CLI_FLAG, .names = "--special", .dest = &special,
         .help = "text equal to a control token's text (e.g. <|im_start|>) is\n"
                 "that token; without it such text is tokenized as plain text"},
    };
    int parsed = cli_parse(CMD, USAGE, opts, CLI_N(opts), argc, argv);
    if (parsed != CLI_OK) return parsed == CLI_HELP ? 0 : 2;
    if (!model) return cli_usage_error(CMD, "-m MODEL.gguf is required");
    if (text && file) return cli_usage_error(CMD, "--text and --file exclude each other");

    char *buf = NULL;
    size_t len = 0;
    vkv_status st;
    if (text) {
        len = strlen(text);
    } else if ((st = read_text(file, &buf, &len))) {
        return cli_fail(CMD, st);
    }

    vkv_gguf *g = NULL;
    vkv_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = 0;
    if ((st = vkv_gguf_open(model, &g)) || (st = vkv_tokenizer_load(g, &tok))) {
        rc = cli_fail(CMD, st);
        goto done;
    }
    if (bos && vkv_tokenizer_bos(tok) == VKV_TOKEN_NULL) {
        st = vkv_error(VKV_ERR_UNSUPPORTED, "--bos: the vocabulary in %s has no BOS token", model);
        rc = cli_fail(CMD, st);
        goto done;
    }
    if ((st = vkv_tokenize(tok, text ? text : buf, len, false, special, &ids, &n))) {
        rc = cli_fail(CMD, st);
        goto done;
    }
    if (bos) printf("%d%s", vkv_tokenizer_bos(tok), n ? " " : "");
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    if (fflush(stdout)) {
        st = vkv_error(VKV_ERR_IO, "cannot write the ids: %s", strerror(errno));
        rc = cli_fail(CMD, st);
    }
done:
    free(ids);
    vkv_tokenizer_free(tok);
    vkv_gguf_close(g);
    free(buf);
    return rc;
}
