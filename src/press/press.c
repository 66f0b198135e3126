/* The scorer registry and what the scorers share: defaults, the checks of a
 * layer and the binding of its K cache (kvpress's token counts: kvlayout/kv_counts.h). */
#include "press/press.h"
#include "press/press_internal.h"

#include <stdio.h>
#include <string.h>

#include "kvlayout/kv_counts.h"
#include "ref/ref_attn.h"
#include "vk/gpu.h"

extern const vkv_press_ops vkv_press_knorm, vkv_press_keydiff, vkv_press_streamingllm, vkv_press_snapkv,
    vkv_press_pyramidkv, vkv_press_tova, vkv_press_observed, vkv_press_expected, vkv_press_kvzip;
extern const vkv_press_ops vkv_press_chunkkv, vkv_press_chunkkv_knorm, vkv_press_chunkkv_keydiff,
    vkv_press_chunkkv_tova, vkv_press_lagkv, vkv_press_random;
extern const vkv_press_ops vkv_press_adakv_snapkv, vkv_press_adakv_keydiff;
extern const vkv_press_ops vkv_press_critical_snapkv, vkv_press_critical_keydiff;
extern const vkv_press_ops vkv_press_critical_adakv_snapkv, vkv_press_critical_adakv_keydiff;
extern const vkv_press_ops vkv_press_adakv_expected, vkv_press_critical_expected, vkv_press_critical_adakv_expected;

static const vkv_press_ops *const all_presses[] = {
    &vkv_press_knorm, &vkv_press_keydiff, &vkv_press_streamingllm, &vkv_press_snapkv,
    &vkv_press_pyramidkv, &vkv_press_tova, &vkv_press_observed, &vkv_press_expected, &vkv_press_kvzip,
    &vkv_press_chunkkv, &vkv_press_chunkkv_knorm, &vkv_press_chunkkv_keydiff, &vkv_press_chunkkv_tova,
    &vkv_press_lagkv, &vkv_press_random,
    &vkv_press_adakv_snapkv, &vkv_press_adakv_keydiff, &vkv_press_adakv_expected,
    &vkv_press_critical_snapkv, &vkv_press_critical_keydiff, &vkv_press_critical_expected,
    &vkv_press_critical_adakv_snapkv, &vkv_press_critical_adakv_keydiff, &vkv_press_critical_adakv_expected,
    NULL,
};

const vkv_press_ops *const *vkv_press_all(void) { return all_presses; }

const vkv_press_ops *vkv_press_find(const char *name)
{
    char names[768] = ""; /* every name: the error message holds 1024 bytes */
    for (size_t i = 0; all_presses[i]; i++) {
        if (name && !strcmp(all_presses[i]->name, name)) return all_presses[i];
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", all_presses[i]->name);
    }
    vkv_error(VKV_ERR_ARG, "unknown press '%s' (known: %s)", name ? name : "(null)", names);
    return NULL;
}

bool vkv_press_query_aware(const vkv_press_ops *ops, vkv_query_mode mode, bool kvpress_protocol)
{
    if (mode == VKV_QUERY_AWARE) return true;
    if (mode == VKV_QUERY_AGNOSTIC) return false;
    return ops && (kvpress_protocol ? ops->kvpress_query_aware : ops->query_aware);
}

vkv_pool_scope vkv_press_pool_scope(const vkv_press_ops *ops, vkv_pool_scope requested)
{
    if (requested != VKV_POOL_DEFAULT) return requested;
    return ops && ops->pool_scope != VKV_POOL_DEFAULT ? ops->pool_scope : VKV_POOL_ROW;
}

vkv_pool_scope vkv_press_paper_pool_scope(const vkv_press_ops *ops)
{
    if (ops && ops->layer_selection) return VKV_POOL_LAYER;
    return ops && (ops->n_kept || ops->global_selection) ? VKV_POOL_GLOBAL : VKV_POOL_ROW;
}

vkv_press_params vkv_press_params_default(double compression_ratio)
{
    return (vkv_press_params){.compression_ratio = compression_ratio, .window = 64, .kernel = 5, .n_sink = 4,
                              .block = 0, .pyramid_beta = 20.0f,
                              .chunk_length = 20, .lag_size = 128, .seed = 42,
                              .expected_epsilon = 0.0f, .expected_no_vnorm = false};
}

uint32_t vkv_press_window_of(const vkv_press_params *p) { return p->window ? p->window : 64; }
uint32_t vkv_press_kernel_of(const vkv_press_params *p) { return p->kernel ? p->kernel : 5; }
double vkv_press_beta_of(const vkv_press_params *p) { return p->pyramid_beta > 0 ? p->pyramid_beta : 20.0; }
uint32_t vkv_press_chunk_length_of(const vkv_press_params *p) { return p->chunk_length ? p->chunk_length : 20; }
uint32_t vkv_press_lag_size_of(const vkv_press_params *p) { return p->lag_size ? p->lag_size : 128; }

uint32_t vkv_press_queries_needed(const vkv_press_ops *ops, const vkv_press_params *p)
{
    return ops->window == 64 ? vkv_press_window_of(p) : ops->window;
}

uint64_t vkv_press_scratch_bytes(const vkv_press_ops *ops, const vkv_press_params *p, const vkv_press_layer *in)
{
    uint64_t b = ops->scratch_bytes ? ops->scratch_bytes(p, in) : 0;
    return b < 16 ? 16 : b;
}

/* ---- checks ---- */

vkv_status vkv_press_check_layer(const vkv_press_params *p, const vkv_press_layer *in, const char *name)
{
    char why[160];
    if (vkv_kv_check_ratios(p->compression_ratio, -1, false, why, sizeof why))
        return vkv_error(VKV_ERR_ARG, "%s: %s", name, why);
    if (!in->n || in->n > in->n_ctx)
        return vkv_error(VKV_ERR_ARG, "%s: %u context tokens in a cache of %u slots", name, in->n, in->n_ctx);
    if (!in->n_kv_head || !in->n_head || in->n_head % in->n_kv_head)
        return vkv_error(VKV_ERR_ARG, "%s: %u query heads is not a multiple of %u KV heads", name, in->n_head,
                         in->n_kv_head);
    if (in->head_dim < 4 || in->head_dim > VKV_PRESS_MAX_HEAD_DIM || in->head_dim % 4)
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: head_dim %u is not a multiple of 4 in [4, %u]", name, in->head_dim,
                         VKV_PRESS_MAX_HEAD_DIM);
    if (in->kv_type != VKV_F16 && in->kv_type != VKV_F32)
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: KV cache type %u is not f16 or f32", name, in->kv_type);
    return VKV_OK;
}

static uint64_t k_elem_bytes(const vkv_press_layer *in) { return in->kv_type == VKV_F16 ? 2 : 4; }

vkv_status vkv_press_check_views(vkv_gpu *gpu, const vkv_press_layer *in, vkv_view scores, const char *name)
{
    const uint64_t head_bytes = k_elem_bytes(in) * in->n_ctx * in->head_dim;
    const uint64_t score_bytes = 4ull * in->n_kv_head * in->n;
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, in->k, head_bytes * in->n_kv_head, name, "the K cache")) ||
        (st = vkv_ops_check_view(gpu, scores, score_bytes, name, "the scores")) ||
        (st = vkv_ops_check_single_range(gpu, score_bytes, name, "the scores")))
        return st;
    return VKV_OK;
}

vkv_status vkv_press_check_positional(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in,
                                     vkv_view scores, vkv_kernel k, const char *name, uint32_t *gx)
{
    const uint64_t bytes = 4ull * in->n_kv_head * in->n;
    vkv_status st;
    if ((st = vkv_press_check_layer(p, in, name)) || (st = vkv_ops_check_view(gpu, scores, bytes, name, "the scores")) ||
        (st = vkv_ops_check_single_range(gpu, bytes, name, "the scores")) || (st = vkv_press_groups_x(gpu, k, in->n, name, gx)))
        return st;
    return VKV_OK;
}

vkv_status vkv_press_check_scratch(vkv_gpu *gpu, const vkv_press_layer *in, uint64_t bytes, const char *name)
{
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, in->scratch, bytes, name, "the scratch")) ||
        (st = vkv_ops_check_single_range(gpu, bytes, name, "the scratch")))
        return st;
    return VKV_OK;
}

vkv_status vkv_press_k_heads_per_dispatch(vkv_gpu *gpu, const vkv_press_layer *in, const char *name,
                                          uint32_t *heads_per)
{
    const uint64_t es = k_elem_bytes(in), head_bytes = es * in->n_ctx * in->head_dim;
    const uint64_t used_last = es * in->n * in->head_dim, max = vkv_ops_max_range(gpu);
    *heads_per = in->n_kv_head;
    if (head_bytes * (in->n_kv_head - 1) + used_last <= max) return VKV_OK;
    if (used_last > max)
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: one KV head's %u keys are %llu bytes, over this device's storage "
                         "range of %llu", name, in->n, (unsigned long long)used_last, (unsigned long long)max);
    if (head_bytes % vkv_ops_align(gpu))
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: the K cache exceeds one storage range and its per-head stride of "
                         "%llu bytes is not a multiple of the storage alignment %llu", name,
                         (unsigned long long)head_bytes, (unsigned long long)vkv_ops_align(gpu));
    *heads_per = (uint32_t)((max - used_last) / head_bytes + 1);
    return VKV_OK;
}

vkv_binding vkv_press_bind_k(const vkv_press_layer *in, uint32_t h0, uint32_t nh)
{
    const uint64_t es = k_elem_bytes(in), head_bytes = es * in->n_ctx * in->head_dim;
    return vkv_ops_bind(in->k, head_bytes * h0, head_bytes * (nh - 1) + es * in->n * in->head_dim);
}

float vkv_press_k_host(const vkv_press_layer *in, uint32_t h, uint32_t j, uint32_t d)
{
    return vkv_kv_cache_get(in->kv_type, in->k_host, in->n_ctx, in->head_dim, h, j, d);
}

vkv_status vkv_press_groups_x(vkv_gpu *gpu, vkv_kernel k, uint64_t count, const char *name, uint32_t *gx)
{
    const uint32_t wg = vkv_kernel_workgroup_size(gpu, k);
    const uint64_t groups = (count + wg - 1) / wg;
    if (groups > vkv_gpu_caps(gpu)->max_workgroup_count[0])
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: %llu tokens need %llu workgroups, over this device's limit of %u",
                         name, (unsigned long long)count, (unsigned long long)groups, vkv_gpu_caps(gpu)->max_workgroup_count[0]);
    *gx = groups ? (uint32_t)groups : 1;
    return VKV_OK;
}
