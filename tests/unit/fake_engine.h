/* A fake of serve/engine.h for the HTTP front's tests: no model, no device.
 * A request's reply echoes the words of its prompt (a chat's last message)
 * back, one word per token, after a configurable delay per token; it honours
 * max_tokens (finish "length") and stop sequences, and answers 429 beyond a
 * number of sequences in flight. Prompts holding FAKE_ERROR_500,
 * FAKE_CONTEXT (400 context_length_exceeded) or FAKE_FAIL_MIDWAY (an error
 * after some text) make the engine report errors. Its metrics count
 * submissions, cancels and releases, and describe the last request.
 *
 * Its vocabulary (vkv_engine_tokenize, vkv_engine_token_piece): 0 "<s>" (BOS,
 * added with add_special), 1 "</s>" (both parsed from their text with
 * parse_special), FAKE_WORD_ID + i the whole words "the", "quick", "brown",
 * "fox", "hello", "world", 2 + b each other byte b. */
#ifndef VKV_TEST_FAKE_ENGINE_H
#define VKV_TEST_FAKE_ENGINE_H

#include "serve/engine.h"

#define FAKE_WORD_ID 258
#define FAKE_N_WORDS 6

typedef struct fake_engine_params {
    const char *model_id;    /* NULL: "fake-model" */
    unsigned max_in_flight;  /* 0: 4 */
    unsigned delay_ms;       /* between tokens */
} fake_engine_params;

vkv_engine *fake_engine_create(const fake_engine_params *p);
/* Sequences submitted and not yet released (a leak, once the server stopped). */
unsigned fake_engine_live(vkv_engine *e);

#endif
