/* Freeing what a request and an event point to, and OpenAI's sampling defaults (serve/engine.h). */
#include <stdlib.h>
#include <string.h>

#include "serve/engine.h"

void vkv_gen_request_free(vkv_gen_request *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_messages; i++) {
        free(r->messages[i].role);
        free(r->messages[i].content);
    }
    free(r->messages);
    free(r->prompt);
    free(r->prompt_ids);
    for (size_t i = 0; i < VKV_GEN_MAX_STOP; i++) free(r->stop[i]);
    free(r->logit_bias);
    vkv_json_constraint_free(r->constraint);
    memset(r, 0, sizeof *r);
}

void vkv_seq_event_clear(vkv_seq_event *e)
{
    if (!e) return;
    free(e->text);
    free(e->tokens);
    e->text = NULL;
    e->len = 0;
    e->tokens = NULL;
    e->n_tokens = 0;
}

vkv_sampler_params vkv_gen_sampling_defaults(void)
{
    vkv_sampler_params p = vkv_sampler_defaults();
    p.temperature = 1.0f;
    p.top_p = 1.0f;
    p.top_k = 0;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    return p;
}
