/* Hugging Face config.json and generation_config.json (src/model/hf_config.c):
 * configs shaped as Llama 3.2 1B's, Qwen2.5 0.5B's and Qwen3 0.6B's, their
 * hyper-parameters, the tensor name table, and every error naming its key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/hf_config.h"

static const char llama32_1b[] =
    "{\n"
    "  \"architectures\": [\"LlamaForCausalLM\"],\n"
    "  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 128000,\n"
    "  \"eos_token_id\": [128001, 128008, 128009],\n"
    "  \"head_dim\": 64,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 2048,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 8192,\n"
    "  \"max_position_embeddings\": 131072,\n"
    "  \"mlp_bias\": false,\n"
    "  \"model_type\": \"llama\",\n"
    "  \"num_attention_heads\": 32,\n"
    "  \"num_hidden_layers\": 16,\n"
    "  \"num_key_value_heads\": 8,\n"
    "  \"pretraining_tp\": 1,\n"
    "  \"rms_norm_eps\": 1e-05,\n"
    "  \"rope_scaling\": {\n"
    "    \"factor\": 32.0,\n"
    "    \"high_freq_factor\": 4.0,\n"
    "    \"low_freq_factor\": 1.0,\n"
    "    \"original_max_position_embeddings\": 8192,\n"
    "    \"rope_type\": \"llama3\"\n"
    "  },\n"
    "  \"rope_theta\": 500000.0,\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.45.0.dev0\",\n"
    "  \"use_cache\": true,\n"
    "  \"vocab_size\": 128256\n"
    "}\n";

static const char qwen25_05b[] =
    "{\n"
    "  \"architectures\": [\"Qwen2ForCausalLM\"],\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 151643,\n"
    "  \"eos_token_id\": 151643,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 896,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 4864,\n"
    "  \"max_position_embeddings\": 32768,\n"
    "  \"max_window_layers\": 24,\n"
    "  \"model_type\": \"qwen2\",\n"
    "  \"num_attention_heads\": 14,\n"
    "  \"num_hidden_layers\": 24,\n"
    "  \"num_key_value_heads\": 2,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_theta\": 1000000.0,\n"
    "  \"sliding_window\": 32768,\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.40.1\",\n"
    "  \"use_cache\": true,\n"
    "  \"use_sliding_window\": false,\n"
    "  \"vocab_size\": 151936\n"
    "}\n";

static const char qwen3_06b[] =
    "{\n"
    "  \"architectures\": [\"Qwen3ForCausalLM\"],\n"
    "  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 151643,\n"
    "  \"eos_token_id\": 151645,\n"
    "  \"head_dim\": 128,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 1024,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 3072,\n"
    "  \"max_position_embeddings\": 40960,\n"
    "  \"max_window_layers\": 28,\n"
    "  \"model_type\": \"qwen3\",\n"
    "  \"num_attention_heads\": 16,\n"
    "  \"num_hidden_layers\": 28,\n"
    "  \"num_key_value_heads\": 8,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_scaling\": null,\n"
    "  \"rope_theta\": 1000000,\n"
    "  \"sliding_window\": null,\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"use_cache\": true,\n"
    "  \"use_sliding_window\": false,\n"
    "  \"vocab_size\": 151936\n"
    "}\n";

static vkv_status parse(const char *text, vkv_hf_config *c)
{
    return vkv_hf_config_parse(text, strlen(text), "config.json", c);
}

static void assert_error_has(const char *want)
{
    const char *msg = vkv_last_error();
    if (!strstr(msg, want)) fail_msg("error '%s' does not contain '%s'", msg, want);
}

/* The hyper-parameters of c are want, field by field. */
static void assert_hparams(const vkv_hf_config *c, const vkv_hparams *want)
{
    vkv_hparams hp;
    assert_int_equal(vkv_hf_config_to_hparams(c, &hp), VKV_OK);
    assert_int_equal(hp.arch, want->arch);
    assert_string_equal(hp.arch_name, want->arch_name);
    const uint32_t got_u[] = {hp.n_vocab, hp.n_ctx_train, hp.n_embd, hp.n_layer, hp.n_ff, hp.n_head,
                              hp.n_head_kv, hp.head_dim, hp.head_dim_v, hp.n_rot, hp.llama3_original_ctx};
    const uint32_t want_u[] = {want->n_vocab, want->n_ctx_train, want->n_embd, want->n_layer, want->n_ff, want->n_head,
                               want->n_head_kv, want->head_dim, want->head_dim_v, want->n_rot,
                               want->llama3_original_ctx};
    for (size_t i = 0; i < sizeof got_u / sizeof *got_u; i++)
        if (got_u[i] != want_u[i]) fail_msg("count %zu: %u, want %u", i, got_u[i], want_u[i]);
    const float got_f[] = {hp.rms_eps, hp.rope_base, hp.rope_freq_scale, hp.llama3_factor,
                           hp.llama3_low_freq_factor, hp.llama3_high_freq_factor};
    const float want_f[] = {want->rms_eps, want->rope_base, want->rope_freq_scale, want->llama3_factor,
                            want->llama3_low_freq_factor, want->llama3_high_freq_factor};
    for (size_t i = 0; i < sizeof got_f / sizeof *got_f; i++)
        if (got_f[i] != want_f[i]) fail_msg("float %zu: %g, want %g", i, (double)got_f[i], (double)want_f[i]);
    assert_int_equal(hp.rope_mode, want->rope_mode);
    assert_int_equal(hp.has_qkv_bias, want->has_qkv_bias);
    assert_int_equal(hp.has_qk_norm, want->has_qk_norm);
    assert_int_equal(hp.tied_output, want->tied_output);
    assert_int_equal(hp.llama3_scaling, want->llama3_scaling);
}

static void test_llama(void **state)
{
    (void)state;
    char path[] = "/tmp/vkv_hf_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, llama32_1b, strlen(llama32_1b)), (ssize_t)strlen(llama32_1b));
    close(fd);
    vkv_hf_config c;
    assert_int_equal(vkv_hf_config_read(path, &c), VKV_OK);
    unlink(path);
    assert_int_equal(c.arch, VKV_ARCH_LLAMA);
    assert_string_equal(c.architecture, "LlamaForCausalLM");
    assert_string_equal(c.model_type, "llama");
    assert_int_equal(c.hidden_size, 2048);
    assert_int_equal(c.num_hidden_layers, 16);
    assert_int_equal(c.num_attention_heads, 32);
    assert_int_equal(c.num_key_value_heads, 8);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.intermediate_size, 8192);
    assert_int_equal(c.vocab_size, 128256);
    assert_int_equal(c.max_position_embeddings, 131072);
    assert_true(c.rope_theta == 500000.0);
    assert_true(c.rms_norm_eps == 1e-5);
    assert_true(c.tie_word_embeddings);
    assert_false(c.attention_bias);
    assert_string_equal(c.torch_dtype, "bfloat16");
    assert_true(c.rope_llama3);
    assert_true(c.rope_factor == 32.0 && c.rope_low_freq_factor == 1.0 && c.rope_high_freq_factor == 4.0);
    assert_int_equal(c.rope_original_max_position_embeddings, 8192);
    assert_true(c.has_bos);
    assert_int_equal(c.bos_token_id, 128000);
    assert_int_equal(c.n_eos, 3);
    assert_int_equal(c.eos_token_ids[0], 128001);
    assert_int_equal(c.eos_token_ids[2], 128009);

    /* the checkpoint's Q and K as stored: rotate-half */
    assert_hparams(&c, &(vkv_hparams){.arch = VKV_ARCH_LLAMA, .arch_name = "llama", .n_vocab = 128256,
                                      .n_ctx_train = 131072, .n_embd = 2048, .n_layer = 16, .n_ff = 8192, .n_head = 32,
                                      .n_head_kv = 8, .head_dim = 64, .head_dim_v = 64, .n_rot = 64, .rms_eps = 1e-5f,
                                      .rope_base = 500000.0f, .rope_freq_scale = 1.0f, .rope_mode = VKV_ROPE_NEOX,
                                      .tied_output = true, .llama3_scaling = true, .llama3_factor = 32.0f,
                                      .llama3_low_freq_factor = 1.0f, .llama3_high_freq_factor = 4.0f,
                                      .llama3_original_ctx = 8192});
}

static void test_qwen2(void **state)
{
    (void)state;
    vkv_hf_config c;
    assert_int_equal(parse(qwen25_05b, &c), VKV_OK);
    assert_int_equal(c.arch, VKV_ARCH_QWEN2);
    assert_int_equal(c.head_dim, 64); /* 896 / 14 */
    assert_int_equal(c.num_key_value_heads, 2);
    assert_true(c.attention_bias); /* by architecture */
    assert_false(c.rope_llama3);
    assert_int_equal(c.n_eos, 1);
    assert_int_equal(c.eos_token_ids[0], 151643);
    assert_hparams(&c, &(vkv_hparams){.arch = VKV_ARCH_QWEN2, .arch_name = "qwen2", .n_vocab = 151936,
                                      .n_ctx_train = 32768, .n_embd = 896, .n_layer = 24, .n_ff = 4864, .n_head = 14,
                                      .n_head_kv = 2, .head_dim = 64, .head_dim_v = 64, .n_rot = 64, .rms_eps = 1e-6f,
                                      .rope_base = 1000000.0f, .rope_freq_scale = 1.0f, .rope_mode = VKV_ROPE_NEOX,
                                      .has_qkv_bias = true, .tied_output = true});
}

static void test_qwen3(void **state)
{
    (void)state;
    vkv_hf_config c;
    assert_int_equal(parse(qwen3_06b, &c), VKV_OK);
    assert_int_equal(c.arch, VKV_ARCH_QWEN3);
    assert_int_equal(c.head_dim, 128); /* explicit: not 1024 / 16 */
    assert_false(c.attention_bias);
    assert_hparams(&c, &(vkv_hparams){.arch = VKV_ARCH_QWEN3, .arch_name = "qwen3", .n_vocab = 151936,
                                      .n_ctx_train = 40960, .n_embd = 1024, .n_layer = 28, .n_ff = 3072, .n_head = 16,
                                      .n_head_kv = 8, .head_dim = 128, .head_dim_v = 128, .n_rot = 128, .rms_eps = 1e-6f,
                                      .rope_base = 1000000.0f, .rope_freq_scale = 1.0f, .rope_mode = VKV_ROPE_NEOX,
                                      .has_qk_norm = true, .tied_output = true});
}

/* llama32_1b with `from` replaced by `to` (once). */
static char *edit(const char *base, const char *from, const char *to)
{
    const char *at = strstr(base, from);
    assert_non_null(at);
    size_t n = strlen(base) - strlen(from) + strlen(to);
    char *s = malloc(n + 1);
    assert_non_null(s);
    size_t head = (size_t)(at - base);
    memcpy(s, base, head);
    strcpy(s + head, to);
    strcat(s, at + strlen(from));
    return s;
}

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *from, *to;
        vkv_status status;
        const char *want;
    } cases[] = {
        {"\"hidden_size\": 2048,", "", VKV_ERR_FORMAT, "'config.json': missing required key 'hidden_size'"},
        {"\"vocab_size\": 128256", "\"x\": 1", VKV_ERR_FORMAT, "missing required key 'vocab_size'"},
        {"\"rms_norm_eps\": 1e-05,", "\"rms_norm_eps\": null,", VKV_ERR_FORMAT, "missing required key 'rms_norm_eps'"},
        {"\"hidden_size\": 2048", "\"hidden_size\": \"2048\"", VKV_ERR_FORMAT,
         "key 'hidden_size' is a string, not a non-negative integer"},
        {"\"num_hidden_layers\": 16", "\"num_hidden_layers\": 16.5", VKV_ERR_FORMAT,
         "key 'num_hidden_layers' is not an integer"},
        {"\"num_key_value_heads\": 8", "\"num_key_value_heads\": -8", VKV_ERR_FORMAT,
         "key 'num_key_value_heads' is negative"},
        {"\"vocab_size\": 128256", "\"vocab_size\": 4294967296", VKV_ERR_FORMAT, "'vocab_size' is 4294967296, more than"},
        {"\"rope_theta\": 500000.0", "\"rope_theta\": \"big\"", VKV_ERR_FORMAT, "key 'rope_theta' is a string, not a number"},
        {"\"tie_word_embeddings\": true", "\"tie_word_embeddings\": 1", VKV_ERR_FORMAT,
         "key 'tie_word_embeddings' is a number, not true or false"},
        {"\"torch_dtype\": \"bfloat16\"", "\"torch_dtype\": 16", VKV_ERR_FORMAT, "key 'torch_dtype' is a number"},
        {"[\"LlamaForCausalLM\"]", "[\"MistralForCausalLM\"]", VKV_ERR_UNSUPPORTED,
         "architecture 'MistralForCausalLM' (model_type 'llama') is not supported"},
        {"\"model_type\": \"llama\"", "\"model_type\": \"gemma\"", VKV_ERR_UNSUPPORTED, "(model_type 'gemma') is not supported"},
        {"\"model_type\": \"llama\"", "\"model_type\": \"qwen2\"", VKV_ERR_FORMAT, "name different models"},
        {"[\"LlamaForCausalLM\"]", "\"LlamaForCausalLM\"", VKV_ERR_FORMAT, "key 'architectures' is a string"},
        {"[\"LlamaForCausalLM\"]", "[]", VKV_ERR_FORMAT, "key 'architectures' is not a list of names"},
        {"\"rope_type\": \"llama3\"", "\"rope_type\": \"yarn\"", VKV_ERR_UNSUPPORTED,
         "rope_scaling type 'yarn' is not supported"},
        {"\"rope_type\": \"llama3\"", "\"type\": \"linear\"", VKV_ERR_UNSUPPORTED, "rope_scaling type 'linear'"},
        {"\"rope_type\": \"llama3\"", "\"x\": 0", VKV_ERR_FORMAT, "missing required key 'rope_scaling.rope_type'"},
        {"\"factor\": 32.0,", "", VKV_ERR_FORMAT, "missing required key 'rope_scaling.factor'"},
        {"\"original_max_position_embeddings\": 8192", "\"original_max_position_embeddings\": 8192.5", VKV_ERR_FORMAT,
         "'rope_scaling.original_max_position_embeddings' is not an integer"},
        {"\"rope_scaling\": {", "\"rope_scaling\": 1, \"x\": {", VKV_ERR_FORMAT, "key 'rope_scaling' is a number"},
        {"[128001, 128008, 128009]", "\"eos\"", VKV_ERR_FORMAT, "key 'eos_token_id' is a string"},
        {"[128001, 128008, 128009]", "[128001, -1]", VKV_ERR_FORMAT, "key 'eos_token_id' item 1 is negative"},
        {"\"bos_token_id\": 128000", "\"bos_token_id\": true", VKV_ERR_FORMAT, "key 'bos_token_id' is a boolean"},
        {"\"use_cache\": true", "\"use_sliding_window\": true", VKV_ERR_UNSUPPORTED, "'use_sliding_window' is true"},
        {"{\n", "[{\n", VKV_ERR_FORMAT, "'config.json': JSON"},
        {"\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", VKV_ERR_UNSUPPORTED, "'hidden_act' is 'gelu'"},
        {"\"mlp_bias\": false", "\"mlp_bias\": true", VKV_ERR_UNSUPPORTED, "'mlp_bias' is true"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *text = edit(llama32_1b, cases[i].from, cases[i].to);
        vkv_hf_config c;
        vkv_status s = parse(text, &c);
        if (s != cases[i].status) fail_msg("case %zu (%s): status %d: %s", i, cases[i].to, s, vkv_last_error());
        assert_error_has(cases[i].want);
        free(text);
    }
    vkv_hf_config c;
    assert_int_equal(parse("[]", &c), VKV_ERR_FORMAT);
    assert_error_has("not a JSON object");
    assert_int_equal(parse("{}", &c), VKV_ERR_FORMAT);
    assert_error_has("missing required key 'architectures'");
    assert_int_equal(vkv_hf_config_read("/nonexistent/config.json", &c), VKV_ERR_IO);
    assert_error_has("/nonexistent/config.json");
}

/* Values that parse but that the model cannot take. */
static void test_hparams_errors(void **state)
{
    (void)state;
    static const struct {
        const char *from, *to, *want;
    } cases[] = {
        {"\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5", "'num_attention_heads' (32) is not a multiple of "
                                                                     "'num_key_value_heads' (5)"},
        {"\"num_key_value_heads\": 8", "\"num_key_value_heads\": 0", "'num_key_value_heads' is 0"},
        {"\"head_dim\": 64", "\"head_dim\": 63", "'head_dim' is 63"},
        {"\"head_dim\": 64", "\"head_dim\": 65536", "query width"},
        {"\"hidden_size\": 2048", "\"hidden_size\": 2000000", "'hidden_size' is 2000000: more than the limit"},
        {"\"vocab_size\": 128256", "\"vocab_size\": 0", "'vocab_size' is 0: it must be at least 1"},
        {"\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 0", "'rms_norm_eps' is 0"},
        {"\"rope_theta\": 500000.0", "\"rope_theta\": 1e300", "'rope_theta' is 1e+300"},
        {"\"high_freq_factor\": 4.0", "\"high_freq_factor\": 1.0", "'rope_scaling.high_freq_factor' (1) must be above"},
        {"\"factor\": 32.0", "\"factor\": -2", "'rope_scaling.factor' is -2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *text = edit(llama32_1b, cases[i].from, cases[i].to);
        vkv_hf_config c;
        vkv_hparams hp;
        assert_int_equal(parse(text, &c), VKV_OK);
        vkv_status s = vkv_hf_config_to_hparams(&c, &hp);
        if (s == VKV_OK) fail_msg("case %zu (%s): accepted", i, cases[i].to);
        assert_error_has("config.json");
        assert_error_has(cases[i].want);
        free(text);
    }
    /* defaults: no num_key_value_heads, no head_dim, no rope_theta, no tie */
    char *a = edit(llama32_1b, "\"num_key_value_heads\": 8,", "");
    char *b = edit(a, "\"head_dim\": 64,", "");
    char *d = edit(b, "\"rope_theta\": 500000.0,", "");
    char *e = edit(d, "\"tie_word_embeddings\": true,", "");
    vkv_hf_config c;
    assert_int_equal(parse(e, &c), VKV_OK);
    assert_int_equal(c.num_key_value_heads, 32);
    assert_int_equal(c.head_dim, 64);
    assert_true(c.rope_theta == 10000.0);
    assert_false(c.tie_word_embeddings);
    free(a);
    free(b);
    free(d);
    free(e);
}

static void test_generation_eos(void **state)
{
    (void)state;
    uint32_t ids[VKV_HF_MAX_EOS], n = 99;
    const char *list = "{\"bos_token_id\": 128000, \"do_sample\": true, \"eos_token_id\": [128001, 128008, 128009]}";
    assert_int_equal(vkv_hf_generation_eos_parse(list, strlen(list), "generation_config.json", ids, &n), VKV_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], 128008);
    const char *one = "{\"eos_token_id\": 151645}";
    assert_int_equal(vkv_hf_generation_eos_parse(one, strlen(one), "generation_config.json", ids, &n), VKV_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 151645);
    const char *none = "{\"eos_token_id\": null}";
    assert_int_equal(vkv_hf_generation_eos_parse(none, strlen(none), "generation_config.json", ids, &n), VKV_OK);
    assert_int_equal(n, 0);
    const char *bad = "{\"eos_token_id\": {\"a\": 1}}";
    assert_int_equal(vkv_hf_generation_eos_parse(bad, strlen(bad), "generation_config.json", ids, &n), VKV_ERR_FORMAT);
    assert_error_has("'generation_config.json': key 'eos_token_id' is an object");
    const char *many = "{\"eos_token_id\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}";
    assert_int_equal(vkv_hf_generation_eos_parse(many, strlen(many), "generation_config.json", ids, &n), VKV_ERR_FORMAT);
    assert_error_has("lists 17 ids");
    assert_int_equal(vkv_hf_generation_eos_read("/nonexistent/generation_config.json", ids, &n), VKV_ERR_IO);
}

static void test_tensor_names(void **state)
{
    (void)state;
    static const char *const pairs[][2] = {
        {"model.embed_tokens.weight", "token_embd.weight"},
        {"model.norm.weight", "output_norm.weight"},
        {"lm_head.weight", "output.weight"},
        {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
        {"model.layers.15.self_attn.q_proj.weight", "blk.15.attn_q.weight"},
        {"model.layers.3.self_attn.k_proj.weight", "blk.3.attn_k.weight"},
        {"model.layers.3.self_attn.v_proj.weight", "blk.3.attn_v.weight"},
        {"model.layers.3.self_attn.o_proj.weight", "blk.3.attn_output.weight"},
        {"model.layers.23.self_attn.q_proj.bias", "blk.23.attn_q.bias"},
        {"model.layers.23.self_attn.k_proj.bias", "blk.23.attn_k.bias"},
        {"model.layers.23.self_attn.v_proj.bias", "blk.23.attn_v.bias"},
        {"model.layers.27.self_attn.q_norm.weight", "blk.27.attn_q_norm.weight"},
        {"model.layers.27.self_attn.k_norm.weight", "blk.27.attn_k_norm.weight"},
        {"model.layers.1.post_attention_layernorm.weight", "blk.1.ffn_norm.weight"},
        {"model.layers.1.mlp.gate_proj.weight", "blk.1.ffn_gate.weight"},
        {"model.layers.1.mlp.up_proj.weight", "blk.1.ffn_up.weight"},
        {"model.layers.1.mlp.down_proj.weight", "blk.1.ffn_down.weight"},
        {"model.layers.4294967295.mlp.up_proj.weight", "blk.4294967295.ffn_up.weight"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        if (!vkv_hf_gguf_name(pairs[i][0], out, sizeof out)) fail_msg("%s: no GGUF name", pairs[i][0]);
        assert_string_equal(out, pairs[i][1]);
        char back[64]; /* and back, for the loader's messages */
        if (!vkv_hf_checkpoint_name(pairs[i][1], back, sizeof back)) fail_msg("%s: no checkpoint name", pairs[i][1]);
        assert_string_equal(back, pairs[i][0]);
    }
    assert_false(vkv_hf_checkpoint_name("rope_freqs.weight", out, sizeof out));
    assert_false(vkv_hf_checkpoint_name("blk.0.attn_x.weight", out, sizeof out));
    static const char *const none[] = {
        "model.rotary_emb.inv_freq", "model.layers.0.self_attn.rotary_emb.inv_freq", "model.layers.x.mlp.up_proj.weight",
        "model.layers.01.mlp.up_proj.weight", "model.layers.4294967296.mlp.up_proj.weight", "model.layers.0mlp.up_proj.weight",
        "model.layers..mlp.up_proj.weight", "model.layers.1.mlp.up_proj.weight.x", "", "lm_head.bias",
    };
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
        strcpy(out, "x");
        if (vkv_hf_gguf_name(none[i], out, sizeof out)) fail_msg("'%s' mapped to '%s'", none[i], out);
        assert_string_equal(out, "");
    }
    char small[8];
    assert_false(vkv_hf_gguf_name("model.layers.1.mlp.up_proj.weight", small, sizeof small));
    assert_string_equal(small, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),          cmocka_unit_test(test_qwen2),          cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_errors),         cmocka_unit_test(test_hparams_errors), cmocka_unit_test(test_generation_eos),
        cmocka_unit_test(test_tensor_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
