/* Logits and greedy continuations of every model in ../shared/golden against
 * an independent runtime (llama.cpp's CPU backend, f32 KV cache).
 *
 * Tolerances (../shared/golden/README.md): f32 models with an f32 KV cache:
 * NMSE <= 1e-5, the same argmax wherever the golden top-1/top-2 margin exceeds
 * 1e-3, and an identical greedy_32; f16 and quantized models: NMSE <= 1e-3 and
 * argmax agreement >= 90% of positions. Models added to golden.json later are
 * covered without code changes, and so are those of shapes.json (models at
 * real widths in llama.cpp's quantization mixes). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "gpu_test.h"
#include "infer/forward.h"

static const char *shared_dir(void)
{
    const char *s = getenv("VKVECTOR_SHARED");
    return s && *s ? s : "../shared";
}

static float *read_f32_file(const char *path, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *p = malloc(n * sizeof *p);
    size_t got = p ? fread(p, sizeof *p, n, f) : 0;
    int extra = fgetc(f);
    fclose(f);
    if (got != n || extra != EOF) {
        free(p);
        return NULL;
    }
    return p;
}

/* Whether every matrix of the model is stored as f32. */
static bool all_f32(const vkv_model *m)
{
    for (int64_t i = 0; i < vkv_gguf_n_tensors(m->gguf); i++) {
        const vkv_gguf_tensor *t = vkv_gguf_tensor_at(m->gguf, i);
        if (t->n_dims >= 2 && t->type != VKV_F32) return false;
    }
    return true;
}

static int ids_from_json(const vkv_json *a, int32_t **out, size_t *n)
{
    if (!a || a->type != VKV_JSON_ARRAY) return -1;
    *n = a->n_items;
    *out = malloc((*n ? *n : 1) * sizeof **out);
    for (size_t i = 0; i < *n; i++) (*out)[i] = (int32_t)a->items[i]->number;
    return 0;
}

static int argmax(const float *x, uint32_t n)
{
    int b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = (int)i;
    return b;
}

/* Runs one case; returns true when it meets the tolerances. */
static bool run_case(vkv_gpu *gpu, const char *model_name, const vkv_json *model_entry, const vkv_json *cs)
{
    char path[1024];
    const vkv_json *mpath = vkv_json_get(model_entry, "model"), *name = vkv_json_get(cs, "name");
    const vkv_json *lpath = vkv_json_get(cs, "logits");
    int32_t *prompt = NULL, *greedy = NULL;
    size_t n_prompt = 0, n_greedy = 0;
    if (!mpath || !name || !lpath || ids_from_json(vkv_json_get(cs, "prompt_ids"), &prompt, &n_prompt) ||
        ids_from_json(vkv_json_get(cs, "greedy_32"), &greedy, &n_greedy)) {
        printf("FAIL %s: malformed golden.json entry\n", model_name);
        return false;
    }
    bool ok = false;
    vkv_model *m = NULL;
    vkv_ctx *ctx = NULL;
    float *want = NULL, *got = NULL;
    snprintf(path, sizeof path, "%s/%s", shared_dir(), mpath->string);
    vkv_status st = vkv_model_load(gpu, path, &m);
    if (st) {
        printf("FAIL %s/%s: %s\n", model_name, name->string, vkv_last_error());
        goto out;
    }
    uint32_t nv = m->hp.n_vocab;
    snprintf(path, sizeof path, "%s/golden/%s", shared_dir(), lpath->string);
    if (!(want = read_f32_file(path, n_prompt * nv))) {
        printf("FAIL %s/%s: cannot read %zu x %u logits from %s\n", model_name, name->string, n_prompt, nv, path);
        goto out;
    }
    got = malloc(sizeof *got * n_prompt * nv);
    /* A small batch so prefill runs in several chunks (chunk boundaries are
     * part of what is tested). */
    vkv_ctx_params cp = {.n_ctx = (uint32_t)(n_prompt + n_greedy + 1), .n_batch = 16, .k_type = VKV_F32, .v_type = VKV_F32};
    if ((st = vkv_ctx_create(gpu, m, &cp, &ctx)) || (st = vkv_ctx_eval(ctx, prompt, (uint32_t)n_prompt, true, got))) {
        printf("FAIL %s/%s: %s\n", model_name, name->string, vkv_last_error());
        goto out;
    }
    double num = 0, den = 0;
    size_t agree = 0, margin_positions = 0, margin_agree = 0;
    for (size_t p = 0; p < n_prompt; p++) {
        const float *w = want + p * nv, *g = got + p * nv;
        for (uint32_t i = 0; i < nv; i++) {
            double d = (double)g[i] - w[i];
            num += d * d;
            den += (double)w[i] * w[i];
        }
        int aw = argmax(w, nv), ag = argmax(g, nv);
        agree += aw == ag;
        float second = -INFINITY;
        for (uint32_t i = 0; i < nv; i++)
            if ((int)i != aw && w[i] > second) second = w[i];
        if (w[aw] - second > 1e-3f) {
            margin_positions++;
            margin_agree += aw == ag;
        }
    }
    double nmse = num / den;
    /* Greedy continuation: feed the argmax back one token at a time. */
    int32_t gen[64];
    size_t n_gen = 0;
    float *last = got + (n_prompt - 1) * nv;
    for (; n_gen < n_greedy && n_gen < 64; n_gen++) {
        gen[n_gen] = argmax(last, nv);
        if (n_gen + 1 < n_greedy && (st = vkv_ctx_eval(ctx, &gen[n_gen], 1, false, last))) {
            printf("FAIL %s/%s: decode: %s\n", model_name, name->string, vkv_last_error());
            goto out;
        }
    }
    size_t same_prefix = 0;
    while (same_prefix < n_gen && gen[same_prefix] == greedy[same_prefix]) same_prefix++;
    bool strict = all_f32(m);
    double agree_frac = (double)agree / n_prompt;
    if (strict) ok = nmse <= 1e-5 && margin_agree == margin_positions && same_prefix == n_greedy;
    else ok = nmse <= 1e-3 && agree_frac >= 0.9;
    printf("%-4s %-26s %-6s %-5s NMSE %.3e (max %.0e)  argmax %zu/%zu%s  greedy %zu/%zu identical%s\n",
           ok ? "ok" : "FAIL", model_name, name->string, strict ? "f32" : "quant", nmse, strict ? 1e-5 : 1e-3, agree,
           n_prompt, strict ? " (all margin>1e-3 positions must agree)" : " (>= 90%)", same_prefix, n_greedy,
           strict ? " (required)" : "");
out:
    vkv_ctx_free(ctx);
    vkv_model_free(gpu, m);
    free(want);
    free(got);
    free(prompt);
    free(greedy);
    return ok;
}

/* Runs every case of one golden file; counts into *pass / *fail. Returns
 * -1 when the file cannot be read. */
static int run_file(vkv_gpu *gpu, const char *file, int *pass, int *fail)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/golden/%s", shared_dir(), file);
    vkv_json_doc *doc;
    if (vkv_json_parse_file(path, &doc)) {
        fprintf(stderr, "test_golden: %s (set VKVECTOR_SHARED to the shared data folder)\n", vkv_last_error());
        return -1;
    }
    const vkv_json *root = vkv_json_root(doc);
    int before = *pass + *fail;
    for (size_t i = 0; root && root->type == VKV_JSON_OBJECT && i < root->n_items; i++) {
        const vkv_json *cases = vkv_json_get(root->items[i], "cases");
        for (size_t j = 0; cases && j < cases->n_items; j++) {
            if (run_case(gpu, root->keys[i], root->items[i], cases->items[j])) (*pass)++;
            else (*fail)++;
        }
    }
    vkv_json_free(doc);
    if (*pass + *fail == before) {
        printf("FAIL no cases in %s\n", path);
        (*fail)++;
    }
    return 0;
}

int main(void)
{
    vkv_instance *inst;
    vkv_gpu *gpu;
    int open_rc = gpu_test_open("test_golden", true, &inst, &gpu);
    if (open_rc) return open_rc;
    /* golden.json: the small models of every architecture; shapes.json:
     * real widths and llama.cpp's quantization mixes, one file per type. */
    int pass = 0, fail = 0, unreadable = 0;
    static const char *const files[] = {"golden.json", "shapes.json"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++)
        if (run_file(gpu, files[f], &pass, &fail)) unreadable++;
    uint32_t verr = gpu_test_close(inst, gpu);
    if (verr) {
        printf("%u validation error(s)\n", verr);
        fail++;
    }
    printf("golden: %d passed, %d failed\n", pass, fail);
    return fail || unreadable ? 1 : 0;
}
