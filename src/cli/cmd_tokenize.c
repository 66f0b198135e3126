/* Placeholder until the tokenizer lands (helper-2 replaces this file). */
#include "cli/cli.h"
int cmd_tokenize(int argc, char **argv) { (void)argc; (void)argv; return cli_usage_error("tokenize", "tokenizer not built"); }
