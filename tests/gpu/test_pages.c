/* Paged plain caches (kv/kv_cache.h, vkv_kv_create_paged; kv/kv_pages.h)
 * against contiguous ones: every logits row memcmp-equal, pages shared by
 * reference and never written while shared.
 *
 * The pool's slabs hold 3 pages, and pages taken and given back in a
 * shuffled order first, so a sequence's pages lie out of order across slabs.
 * For each row type (f16, q8_0, and f16 keys with q4_0 values) three paged
 * sequences and their contiguous twins:
 *   A  a 67-token prompt in chunks of 32 (32, 32, then 3 tokens: the prefill
 *      and the decode kernels), then greedy tokens one at a time;
 *   B  A's first 48 tokens' pages mapped (vkv_ctx_copy_prefix: three whole
 *      pages a layer, shared), the rest of the prompt evaluated;
 *   C  A's whole prompt mapped, its last page partly full: C's first write
 *      copies that page (copy on write) and A's next one finds it its own.
 * Then batched steps of A, B and C (vkv_ctx_eval_batch: one kv_store_paged
 * and one attn_paged dispatch a layer through their page tables) against the
 * twins' single steps. It checks the pool's counts (pages mapped, shared,
 * copied), that the shared pages' bytes never change, that a freed
 * sequence's pages go back and empty slabs with them, and the refusals
 * (compressing a paged cache, a prefix across pools).
 *
 * usage: test_pages [MODEL.gguf] (default: the shakespeare model). Skips (77)
 * when there is no Vulkan device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "infer/forward.h"
#include "kv/kv_pages.h"
#include "vk/dispatch.h"

#define N_CTX 160
#define N_BATCH 32
#define N_PROMPT 67
#define SHARED_B 48
#define N_DECODE 6

static int fails;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            printf("FAIL: " __VA_ARGS__);                                 \
            printf(" (%s)\n", vkv_last_error());                          \
            fails++;                                                      \
            return false;                                                 \
        }                                                                 \
    } while (0)

/* The bytes of every page layer 0 of kv maps for slots [0, n) (host copy). */
static bool page_bytes(vkv_gpu *gpu, vkv_kv_pages *pool, const vkv_kv_cache *kv, uint32_t n, uint8_t **out,
                       uint64_t *size)
{
    const uint64_t pb = vkv_kv_pages_page_bytes(pool);
    const uint32_t np = (n + 15) / 16;
    *size = pb * np;
    *out = malloc(*size);
    CHECK(*out, "host memory");
    for (uint32_t i = 0; i < np; i++) {
        uint64_t off;
        const vkv_buffer *slab = vkv_kv_pages_slab(pool, vkv_kv_page(kv, 0, i), &off);
        CHECK(slab && !vkv_buffer_download(gpu, slab, off, *out + i * pb, pb), "page %u of layer 0", i);
    }
    return true;
}

static bool same_logits(const float *a, const float *b, size_t nv, const char *what, uint32_t at)
{
    if (memcmp(a, b, sizeof *a * nv)) {
        printf("FAIL: %s, token %u: the paged cache's logits differ from the contiguous cache's\n", what, at);
        fails++;
        return false;
    }
    return true;
}

static bool run_type(vkv_gpu *gpu, const vkv_model *m, vkv_dtype kt, vkv_dtype vt)
{
    const size_t nv = m->hp.n_vocab;
    const uint32_t L = m->hp.n_layer;
    char name[64];
    snprintf(name, sizeof name, "%s/%s", vkv_dtype_get(kt)->name, vkv_dtype_get(vt)->name);
    vkv_kv_pages_params pp = {.k_type = kt, .v_type = vt, .page_shift = VKV_KV_PAGE_SHIFT, .slab_pages = 3,
                              .staging_slots = N_CTX};
    vkv_kv_pages *pool = NULL;
    CHECK(!vkv_kv_pages_create(gpu, &m->hp, &pp, &pool), "%s: the page pool", name);
    /* scramble the free lists: take 12 pages, give back all but one a slab in a shuffled order */
    uint32_t taken[12], guard[4];
    for (uint32_t i = 0; i < 12; i++) CHECK(!vkv_kv_pages_alloc_near(pool, VKV_KV_NO_PAGE, &taken[i]), "page %u", i);
    static const uint32_t order[12] = {7, 2, 10, 0, 5, 11, 1, 8, 4, 9, 3, 6};
    uint32_t n_guard = 0;
    for (uint32_t i = 0; i < 12; i++) {
        const uint32_t p = taken[order[i]];
        if (order[i] % 3 == 1) guard[n_guard++] = p; /* keeps its slab */
        else vkv_kv_pages_unref(pool, p);
    }

    float *la = malloc(sizeof *la * nv * 3), *lb = malloc(sizeof *lb * nv * 3);
    int32_t prompt[N_PROMPT];
    for (uint32_t i = 0; i < N_PROMPT; i++) prompt[i] = (int32_t)((i * 7919u + 13u) % nv);
    vkv_ctx *paged[3] = {NULL}, *twin[3] = {NULL}, *owner = NULL, *owner_twin = NULL;
    bool ok = la && lb;
    /* scratch owners with paged steps: the paged set's batched steps run in its buffers */
    vkv_ctx_params op = {.n_ctx = N_CTX, .n_batch = N_BATCH, .k_type = kt, .v_type = vt, .step_seqs = 3};
    ok = ok && !vkv_ctx_create(gpu, m, &op, &owner) && !vkv_ctx_create(gpu, m, &op, &owner_twin);
    for (int i = 0; i < 3 && ok; i++) {
        vkv_ctx_params cp = {.n_ctx = N_CTX, .n_batch = N_BATCH, .k_type = kt, .v_type = vt, .pages = pool,
                             .scratch_from = owner};
        vkv_ctx_params tp = {.n_ctx = N_CTX, .n_batch = N_BATCH, .k_type = kt, .v_type = vt, .scratch_from = owner_twin};
        ok = !vkv_ctx_create(gpu, m, &cp, &paged[i]) && !vkv_ctx_create(gpu, m, &tp, &twin[i]);
    }
    if (!ok) {
        printf("FAIL: %s: contexts (%s)\n", name, vkv_last_error());
        fails++;
    }
    /* A: the whole prompt, chunk by chunk (32, 32, 3) */
    if (ok) {
        ok = !vkv_ctx_eval(paged[0], prompt, N_PROMPT, false, la) && !vkv_ctx_eval(twin[0], prompt, N_PROMPT, false, lb);
        if (!ok) printf("FAIL: %s: A's prompt (%s)\n", name, vkv_last_error()), fails++;
        ok = ok && same_logits(la, lb, nv, name, N_PROMPT);
        vkv_kv_page_use u = vkv_kv_page_use_of(vkv_ctx_kv(paged[0]));
        if (ok && (u.mapped != 5ull * L || u.shared)) {
            printf("FAIL: %s: A maps %llu pages (%llu shared), not 5 a layer, none shared\n", name,
                   (unsigned long long)u.mapped, (unsigned long long)u.shared);
            fails++, ok = false;
        }
    }
    /* B: A's first 48 tokens mapped, the rest evaluated */
    uint8_t *before = NULL, *after = NULL;
    uint64_t nb = 0, na = 0;
    if (ok) ok = page_bytes(gpu, pool, vkv_ctx_kv(paged[0]), SHARED_B, &before, &nb);
    if (ok) {
        ok = !vkv_ctx_copy_prefix(paged[1], paged[0], SHARED_B) && !vkv_ctx_copy_prefix(twin[1], twin[0], SHARED_B) &&
             !vkv_ctx_eval(paged[1], prompt + SHARED_B, N_PROMPT - SHARED_B, false, la) &&
             !vkv_ctx_eval(twin[1], prompt + SHARED_B, N_PROMPT - SHARED_B, false, lb);
        if (!ok) printf("FAIL: %s: B's prompt over A's prefix (%s)\n", name, vkv_last_error()), fails++;
        ok = ok && same_logits(la, lb, nv, "B over a shared prefix", N_PROMPT);
        for (uint32_t l = 0; ok && l < L; l++)
            for (uint32_t i = 0; i < 3; i++)
                if (vkv_kv_page(vkv_ctx_kv(paged[1]), l, i) != vkv_kv_page(vkv_ctx_kv(paged[0]), l, i)) {
                    printf("FAIL: %s: B does not map A's page %u of layer %u\n", name, i, l);
                    fails++, ok = false;
                    break;
                }
        if (ok && vkv_kv_pages_stats_of(pool).shared != 3ull * L) {
            printf("FAIL: %s: %llu pages shared, not 3 a layer\n", name,
                   (unsigned long long)vkv_kv_pages_stats_of(pool).shared);
            fails++, ok = false;
        }
    }
    /* C: A's whole prompt mapped; its first token copies the partly full page */
    int32_t next[3] = {0};
    if (ok) {
        const uint64_t copied0 = vkv_kv_pages_stats_of(pool).copied;
        ok = !vkv_ctx_copy_prefix(paged[2], paged[0], N_PROMPT) && !vkv_ctx_copy_prefix(twin[2], twin[0], N_PROMPT);
        const int32_t other = prompt[3];
        ok = ok && !vkv_ctx_eval(paged[2], &other, 1, false, la) && !vkv_ctx_eval(twin[2], &other, 1, false, lb);
        if (!ok) printf("FAIL: %s: C's first token (%s)\n", name, vkv_last_error()), fails++;
        ok = ok && same_logits(la, lb, nv, "C after a copy on write", N_PROMPT + 1);
        if (ok && vkv_kv_pages_stats_of(pool).copied != copied0 + L) {
            printf("FAIL: %s: C's first write copied %llu pages, not one a layer\n", name,
                   (unsigned long long)(vkv_kv_pages_stats_of(pool).copied - copied0));
            fails++, ok = false;
        }
        next[2] = gpu_test_argmax(la, (uint32_t)nv);
    }
    /* A and B one token at a time (A's pages 0-2 still shared with B, page 4 its own again) */
    for (uint32_t c = 0; c < 2 && ok; c++) {
        int32_t id = c == 0 ? (int32_t)(prompt[5] % nv) : (int32_t)(prompt[9] % nv);
        for (uint32_t t = 0; t < 2 && ok; t++) {
            ok = !vkv_ctx_eval(paged[c], &id, 1, false, la) && !vkv_ctx_eval(twin[c], &id, 1, false, lb);
            if (!ok) printf("FAIL: %s: single steps (%s)\n", name, vkv_last_error()), fails++;
            ok = ok && same_logits(la, lb, nv, c ? "B, single steps" : "A, single steps", N_PROMPT + t);
            id = gpu_test_argmax(la, (uint32_t)nv);
        }
        next[c] = id;
    }
    /* batched steps of all three: one paged dispatch a layer */
    for (uint32_t t = 0; t < N_DECODE && ok; t++) {
        const uint64_t attn0 = vkv_gpu_kernel_dispatches(gpu, VKV_K_ATTN_PAGED_F16) +
                               vkv_gpu_kernel_dispatches(gpu, VKV_K_ATTN_PAGED_F32) +
                               vkv_gpu_kernel_dispatches(gpu, VKV_K_ATTN_PAGED_ANY);
        ok = !vkv_ctx_eval_batch(paged, next, 3, la);
        const uint64_t attn = vkv_gpu_kernel_dispatches(gpu, VKV_K_ATTN_PAGED_F16) +
                              vkv_gpu_kernel_dispatches(gpu, VKV_K_ATTN_PAGED_F32) +
                              vkv_gpu_kernel_dispatches(gpu, VKV_K_ATTN_PAGED_ANY) - attn0;
        if (ok && attn != L) {
            printf("FAIL: %s: a batched step ran %llu attn_paged dispatches, not one a layer (%u)\n", name,
                   (unsigned long long)attn, L);
            fails++, ok = false;
        }
        for (uint32_t i = 0; i < 3 && ok; i++) ok = !vkv_ctx_eval(twin[i], &next[i], 1, false, lb + i * nv);
        if (!ok && !fails) printf("FAIL: %s: batched steps (%s)\n", name, vkv_last_error()), fails++;
        for (uint32_t i = 0; i < 3 && ok; i++) {
            ok = same_logits(la + i * nv, lb + i * nv, nv, "a batched step", t);
            next[i] = gpu_test_argmax(la + i * nv, (uint32_t)nv);
        }
    }
    /* the pages A shares with B never changed */
    if (ok) ok = page_bytes(gpu, pool, vkv_ctx_kv(paged[0]), SHARED_B, &after, &na);
    if (ok && (na != nb || memcmp(before, after, nb))) {
        printf("FAIL: %s: a shared page was written\n", name);
        fails++, ok = false;
    }
    /* refusals */
    if (ok) {
        vkv_ctx_params bad = {.n_ctx = N_CTX, .k_type = kt, .v_type = vt, .pages = pool, .compress = true};
        vkv_ctx *x = NULL;
        if (vkv_ctx_create(gpu, m, &bad, &x) != VKV_ERR_ARG) {
            printf("FAIL: %s: a compressing paged context is not refused\n", name);
            fails++, ok = false;
        }
        vkv_ctx_free(x);
        vkv_clear_error();
        if (vkv_ctx_copy_prefix(twin[0], paged[0], 16) == VKV_OK) {
            printf("FAIL: %s: a prefix from a paged cache into a contiguous one is not refused\n", name);
            fails++, ok = false;
        }
        vkv_clear_error();
    }
    /* everything back: the sequences, then the guard pages; no slab left */
    for (int i = 0; i < 3; i++) {
        vkv_ctx_free(paged[i]);
        vkv_ctx_free(twin[i]);
    }
    for (uint32_t i = 0; i < n_guard; i++) vkv_kv_pages_unref(pool, guard[i]);
    const vkv_kv_pages_stats st = vkv_kv_pages_stats_of(pool);
    if (ok && (st.in_use || st.shared || st.n_slabs)) {
        printf("FAIL: %s: after every sequence ended %llu pages are in use, %llu shared, %llu slabs kept\n", name,
               (unsigned long long)st.in_use, (unsigned long long)st.shared, (unsigned long long)st.n_slabs);
        fails++, ok = false;
    }
    if (ok)
        printf("%s: prefill, single and batched steps bitwise equal; %llu pages handed out, %llu copied on write\n",
               name, (unsigned long long)st.allocated, (unsigned long long)st.copied);
    vkv_ctx_free(owner);
    vkv_ctx_free(owner_twin);
    vkv_kv_pages_free(pool);
    free(before);
    free(after);
    free(la);
    free(lb);
    return ok;
}

int main(int argc, char **argv)
{
    const char *model_path = argc > 1 ? argv[1] : "models/vkvector-shakespeare.gguf";
    vkv_instance *inst;
    vkv_gpu *gpu;
    int open_rc = gpu_test_open("test_pages", true, &inst, &gpu);
    if (open_rc) return open_rc;
    vkv_model *m = NULL;
    if (vkv_model_load(gpu, model_path, &m)) {
        printf("FAIL: %s\n", vkv_last_error());
        fails++;
    } else {
        run_type(gpu, m, VKV_F16, VKV_F16);
        run_type(gpu, m, VKV_Q8_0, VKV_Q8_0);
        run_type(gpu, m, VKV_F16, VKV_Q4_0);
    }
    if (m) vkv_model_free(gpu, m);
    uint32_t verr = gpu_test_close(inst, gpu);
    if (verr) {
        printf("FAIL: %u validation error(s)\n", verr);
        fails++;
    }
    printf("pages (%s): %s\n", model_path, fails ? "FAILED" : "paged caches bitwise equal to contiguous ones");
    return fails ? 1 : 0;
}
