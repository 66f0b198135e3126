/* The batched decode step (vkv_ctx_eval_batch) and the batched prefill
 * (vkv_ctx_eval_chunks) against the single-sequence evaluation
 * (vkv_ctx_eval): outputs must not depend on batching, so every row of a
 * batched step's logits, and every batched prompt's last logits, is
 * memcmp-equal to its twin's.
 *
 * Two sets of SEQS contexts with the same prompts: the batched set shares one
 * context's activation buffers (scratch_from), the twins each have their own.
 * The batched set prefills its prompts that compress nothing in shared
 * forwards, chunk by chunk as vkv_ctx_eval chunks them (64 tokens): the
 * chunks of up to 16 tokens together, the longer ones together, each group
 * as vkv_ctx_chunks_fit sizes it, one group led by a context that aligns its
 * chunks as a device of 256-byte storage alignment must (a padding row);
 * and a forward of one-token chunks in caches of two kinds (prefill_singles).
 * The prompts differ in length (1 to 100 tokens) and treatment: plain f16
 * caches, a q8_0 cache, KeyDiff at p_c 0.5 without and with VECTOR's tiers
 * (press sessions, compressed after the prefill) and KNorm under the budget
 * rule of compression during generation (compressed between steps when the
 * budget runs out, in both sets alike). Both sets then decode their greedy
 * tokens: the batched set in steps of 9 sequences, then all 16, then 1; the
 * twins one vkv_ctx_eval at a time. The 9-sequence steps run in sequence 2's
 * (borrowed) buffers, which stage their rows (vkv_ctx_params.stage_rows): the
 * path of devices whose storage alignment does not divide a row. The steps of
 * all 16 append to the plain caches and attend in one paged step per layer
 * (kv_store_paged, attn_paged: kv/kv_cache.h), the others per sequence.
 *
 * usage: test_batch [MODEL.gguf [CALIB.vkcal]] (default: the shakespeare model
 * and its calibration; without a calibration the VECTOR sequence is plain
 * KeyDiff). Skips (77) when there is no Vulkan device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib/calib.h"
#include "gpu_test.h"
#include "infer/forward.h"
#include "press/decode.h"
#include "press/vector.h"
#include "vk/dispatch.h"

#define SEQS VKV_BATCH_MAX
#define N_CTX 256
#define N_BATCH 64 /* prefill chunk of every context */

typedef enum { PLAIN, Q8_CACHE, KEYDIFF, KEYDIFF_VECTOR, DECODE_BUDGET } treatment;

/* Sequence i's prompt length and treatment. */
static const struct { uint32_t n_prompt; treatment t; } seqs[SEQS] = {
    {5, PLAIN},   {37, KEYDIFF},  {64, KEYDIFF_VECTOR}, {1, PLAIN},   {50, Q8_CACHE}, {100, PLAIN},
    {20, DECODE_BUDGET}, {13, KEYDIFF_VECTOR}, {71, KEYDIFF}, {2, PLAIN},  {9, Q8_CACHE}, {33, PLAIN},
    {48, KEYDIFF}, {17, PLAIN}, {90, KEYDIFF_VECTOR}, {3, PLAIN},
};

typedef struct twin_set {
    vkv_ctx *ctx[SEQS];
    vkv_decode_press *decode[SEQS]; /* DECODE_BUDGET only */
    int32_t next[SEQS];             /* the greedy token each sequence evaluates next */
} twin_set;

static int fails;
/* Wall time of the batched steps and of their twins' single steps (printed:
 * the validation layers, when on, weigh on both). */
static double t_batch, t_single;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            printf("FAIL: " __VA_ARGS__);                                 \
            printf(" (%s)\n", vkv_last_error());                          \
            fails++;                                                      \
            return false;                                                 \
        }                                                                 \
    } while (0)

/* Whether sequence i's prompt compresses nothing (the batched set
 * prefills it in shared forwards). */
static bool plain_prompt(uint32_t i) { return seqs[i].t != KEYDIFF && seqs[i].t != KEYDIFF_VECTOR; }

/* Creates sequence i's context in a set (owner: the set's scratch owner,
 * NULL for its own buffers). */
static bool create(vkv_gpu *gpu, const vkv_model *m, twin_set *s, uint32_t i, const vkv_ctx *owner)
{
    const treatment t = seqs[i].t;
    /* contexts of different lengths: a grouped step's caches differ in slots per head */
    vkv_ctx_params cp = {.n_ctx = N_CTX - 4 * i, .n_batch = N_BATCH, .k_type = t == Q8_CACHE ? VKV_Q8_0 : VKV_F16,
                         .v_type = t == Q8_CACHE ? VKV_Q8_0 : VKV_F16, .compress = !plain_prompt(i) || t == DECODE_BUDGET,
                         .scratch_from = owner, .stage_rows = i == 2 || i == 15,
                         .step_seqs = owner ? 0 : SEQS, .step_ctx = N_CTX};
    CHECK(!vkv_ctx_create(gpu, m, &cp, &s->ctx[i]), "context %u", i);
    return true;
}

/* After sequence i's prefill (logits: [n_vocab] of its last token): its
 * compressor during generation, its first greedy token. */
static bool prefilled(const vkv_model *m, twin_set *s, uint32_t i, const float *logits)
{
    if (seqs[i].t == DECODE_BUDGET) {
        vkv_decode_params dp = {.press = vkv_press_find("knorm"), .pp = vkv_press_params_default(0.5), .pa = -1,
                                .rule = VKV_DECODING_BUDGET, .every = 4, .max_tokens = 24};
        CHECK(!vkv_decode_press_create(s->ctx[i], m, &dp, &s->decode[i]), "decode press %u", i);
    }
    s->next[i] = gpu_test_argmax(logits, m->hp.n_vocab);
    return true;
}

/* Prefills sequence i of a set alone (compressed after the prompt when its
 * treatment says so); logits: [n_vocab] of the prompt's last token. */
static bool prefill(const vkv_model *m, const vkv_calib *cal, twin_set *s, uint32_t i, const int32_t *prompt,
                    float *logits)
{
    const treatment t = seqs[i].t;
    const bool press = !plain_prompt(i);
    vkv_press_session *ps = NULL;
    if (press) {
        vkv_vector_params vp = {.press = vkv_press_find("keydiff"), .pp = vkv_press_params_default(0.5),
                                .vector = t == KEYDIFF_VECTOR && cal, .pa = -1, .w = cal ? cal->w : NULL};
        CHECK(!vkv_press_session_create(s->ctx[i], m, &vp, seqs[i].n_prompt, &ps), "press session %u", i);
    }
    bool ok = !vkv_ctx_eval(s->ctx[i], prompt, seqs[i].n_prompt, false, logits);
    if (ok && ps) {
        vkv_vector_report rep = {0};
        ok = !vkv_press_session_compress(ps, &rep);
        vkv_vector_report_free(&rep);
    }
    vkv_press_session_free(ps);
    CHECK(ok, "prefill %u", i);
    return prefilled(m, s, i, logits);
}

/* The batched set's plain prompts (prompts[i]: sequence i's) in shared
 * forwards, round by round: each round takes every unfinished prompt's next
 * chunk (at most N_BATCH tokens, vkv_ctx_eval's chunks), the oldest first
 * with the others of its path, as many as fit its buffers; the short chunks'
 * forwards and the long ones' alternate as they come. logits: [SEQS, n_vocab],
 * row i the last logits of prompt i. *n_forwards: the forwards that held more
 * than one chunk. */
static bool prefill_batched(const vkv_model *m, twin_set *s, int32_t *const *prompts, float *logits,
                            uint32_t *n_forwards)
{
    const size_t nv = m->hp.n_vocab;
    uint32_t done[SEQS] = {0}, order[SEQS], n_order = 0;
    /* sequence 15 (256-byte alignment, 3 tokens) leads, then sequence 10 (9
     * tokens): its chunk starts at row 4, not at row 3, where the default
     * model's 384-byte rows of keys would start unaligned */
    order[n_order++] = 15;
    order[n_order++] = 10;
    for (uint32_t i = 0; i < SEQS; i++)
        if (plain_prompt(i) && i != 15 && i != 10) order[n_order++] = i;
    *n_forwards = 0;
    for (;;) {
        vkv_ctx *ctxs[SEQS];
        const int32_t *ids[SEQS];
        uint32_t n_tok[SEQS], idx[SEQS], n = 0;
        float *out[SEQS];
        for (uint32_t o = 0; o < n_order; o++) {
            const uint32_t i = order[o], left = seqs[i].n_prompt - done[i];
            const uint32_t chunk = left < N_BATCH ? left : N_BATCH;
            if (!left || (n && !vkv_ctx_chunks_share_path(n_tok[0], chunk))) continue;
            ctxs[n] = s->ctx[i];
            ids[n] = prompts[i] + done[i];
            n_tok[n] = chunk;
            out[n] = done[i] + chunk == seqs[i].n_prompt ? logits + i * nv : NULL;
            idx[n++] = i;
        }
        if (!n) return true;
        const uint32_t k = vkv_ctx_chunks_fit(ctxs[0], n_tok, n);
        CHECK(k >= 1 && k <= n, "vkv_ctx_chunks_fit took %u of %u chunks", k, n);
        CHECK(!vkv_ctx_eval_chunks(ctxs, ids, n_tok, k, out), "batched prefill of %u chunks", k);
        *n_forwards += k > 1;
        for (uint32_t j = 0; j < k; j++) {
            done[idx[j]] += n_tok[j];
            if (out[j] && !prefilled(m, s, idx[j], out[j])) return false;
        }
    }
}

/* Compression during generation before a step: when the budget is spent. */
static bool make_room(twin_set *s, uint32_t i)
{
    if (s->decode[i] && !vkv_decode_room(s->decode[i])) CHECK(!vkv_decode_compress(s->decode[i]), "compress %u", i);
    return true;
}

/* One batched step of sequences idx[0..n) in set a, and the same tokens one
 * by one in set b; every row compared by bytes. */
static bool step(twin_set *a, twin_set *b, const uint32_t *idx, uint32_t n, uint32_t nv, float *la, float *lb)
{
    vkv_ctx *batch[SEQS];
    int32_t ids[SEQS];
    for (uint32_t r = 0; r < n; r++) {
        const uint32_t i = idx[r];
        if (!make_room(a, i) || !make_room(b, i)) return false;
        CHECK(a->next[i] == b->next[i], "sequence %u: next tokens %d and %d", i, a->next[i], b->next[i]);
        batch[r] = a->ctx[i];
        ids[r] = a->next[i];
    }
    double t0 = now_s();
    CHECK(!vkv_ctx_eval_batch(batch, ids, n, la), "batched step of %u", n);
    t_batch += now_s() - t0;
    for (uint32_t r = 0; r < n; r++) {
        const uint32_t i = idx[r];
        t0 = now_s();
        CHECK(!vkv_ctx_eval(b->ctx[i], &ids[r], 1, false, lb + (size_t)r * nv), "single step of sequence %u", i);
        t_single += now_s() - t0;
        CHECK(vkv_ctx_n_past(a->ctx[i]) == vkv_ctx_n_past(b->ctx[i]), "sequence %u: n_past", i);
        if (memcmp(la + (size_t)r * nv, lb + (size_t)r * nv, 4ull * nv)) {
            uint32_t differ = 0;
            for (uint32_t v = 0; v < nv; v++) differ += memcmp(&la[(size_t)r * nv + v], &lb[(size_t)r * nv + v], 4) != 0;
            printf("FAIL: batch of %u, row %u (sequence %u at %u): %u of %u logits differ\n", n, r, i,
                   vkv_ctx_n_past(b->ctx[i]) - 1, differ, nv);
            fails++;
            return false;
        }
        a->next[i] = gpu_test_argmax(la + (size_t)r * nv, nv);
        b->next[i] = gpu_test_argmax(lb + (size_t)r * nv, nv);
    }
    return true;
}

/* Six more prompts of 2 tokens, then 1 token each (ids from `ids`), the
 * one-token ones in f16 and q8_0 caches by turns, in one forward of owner's
 * buffers against each alone: the f16 ones' grouped attention must mark its
 * members by their place in the forward, not by their rows (which differ
 * from the places whether chunks start every row or every second one, and
 * then name q8_0 places). Then a batched step of nine fresh contexts led by
 * one whose own n_batch is 4: it runs in owner's buffers, which hold the
 * nine rows. */
static bool prefill_singles(vkv_gpu *gpu, const vkv_model *m, const vkv_ctx *owner, const int32_t *ids)
{
    enum { N = 6, STEP = 9 };
    const uint32_t n_tok[N] = {2, 1, 1, 1, 1, 1};
    const size_t nv = m->hp.n_vocab;
    vkv_ctx *batched[N] = {0}, *alone[N] = {0};
    const int32_t *chunk_ids[N];
    float *lb = malloc(4 * nv * N), *la = malloc(4 * nv * STEP), *out[N]; /* la: the step's rows too */
    bool ok = lb && la;
    for (uint32_t i = 0; ok && i < N; i++) {
        const vkv_dtype t = i % 2 == 0 && i ? VKV_Q8_0 : VKV_F16; /* places 2 and 4 */
        vkv_ctx_params cp = {.n_ctx = 8, .n_batch = 8, .k_type = t, .v_type = t}, shared = cp;
        shared.scratch_from = owner;
        chunk_ids[i] = ids + 3 * i;
        out[i] = la + i * nv;
        ok = !vkv_ctx_create(gpu, m, &shared, &batched[i]) && !vkv_ctx_create(gpu, m, &cp, &alone[i]) &&
             !vkv_ctx_eval(alone[i], chunk_ids[i], n_tok[i], false, lb + i * nv);
    }
    if (!ok) printf("FAIL: the one-token chunks' contexts (%s)\n", vkv_last_error());
    else if (vkv_ctx_eval_chunks(batched, chunk_ids, n_tok, N, out)) {
        printf("FAIL: a batched prefill of one-token chunks (%s)\n", vkv_last_error());
        ok = false;
    }
    for (uint32_t i = 0; ok && i < N; i++)
        if (memcmp(la + i * nv, lb + i * nv, 4 * nv)) {
            printf("FAIL: one-token chunks in one forward: chunk %u's logits differ from its own prefill's\n", i);
            ok = false;
        }
    for (uint32_t i = 0; i < N; i++) {
        vkv_ctx_free(batched[i]);
        vkv_ctx_free(alone[i]);
    }
    vkv_ctx *step[STEP] = {0};
    int32_t step_ids[STEP];
    bool step_ok = ok;
    for (uint32_t i = 0; step_ok && i < STEP; i++) {
        vkv_ctx_params cp = {.n_ctx = 8, .n_batch = i ? 8 : 4, .scratch_from = owner};
        step_ids[i] = ids[i];
        step_ok = !vkv_ctx_create(gpu, m, &cp, &step[i]);
    }
    if (step_ok && vkv_ctx_eval_batch(step, step_ids, STEP, la)) {
        printf("FAIL: a batched step of %u led by a context of n_batch 4 in buffers of more rows (%s)\n", STEP,
               vkv_last_error());
        ok = false;
    }
    for (uint32_t i = STEP; i-- > 0;) vkv_ctx_free(step[i]);
    free(la);
    free(lb);
    fails += !ok;
    return ok;
}

static void set_free(twin_set *s)
{
    /* the borrowers before the owner of their scratch */
    for (int i = SEQS - 1; i >= 0; i--) {
        vkv_decode_press_free(s->decode[i]);
        vkv_ctx_free(s->ctx[i]);
    }
}

static bool run(vkv_gpu *gpu, const vkv_model *m, const vkv_calib *cal)
{
    const uint32_t nv = m->hp.n_vocab;
    twin_set a = {0}, b = {0};
    float *la = malloc(4ull * SEQS * nv), *lb = malloc(4ull * SEQS * nv);
    int32_t *prompts[SEQS] = {0};
    bool ok = la && lb;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (uint32_t i = 0; ok && i < SEQS; i++) {
        ok = (prompts[i] = malloc(4ull * seqs[i].n_prompt)) != NULL;
        for (uint32_t t = 0; ok && t < seqs[i].n_prompt; t++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            prompts[i][t] = (int32_t)((rng >> 33) % nv);
        }
        ok = ok && create(gpu, m, &a, i, i ? a.ctx[0] : NULL) && create(gpu, m, &b, i, NULL) &&
             prefill(m, cal, &b, i, prompts[i], lb + (size_t)i * nv) &&
             (plain_prompt(i) || prefill(m, cal, &a, i, prompts[i], la + (size_t)i * nv));
    }
    /* The plain prompts in shared forwards: each one's last logits are its twin's. */
    uint32_t n_forwards = 0;
    ok = ok && prefill_batched(m, &a, prompts, la, &n_forwards);
    for (uint32_t i = 0; ok && i < SEQS; i++)
        if (plain_prompt(i) && memcmp(la + (size_t)i * nv, lb + (size_t)i * nv, 4ull * nv)) {
            printf("FAIL: the batched prefill of prompt %u (%u tokens): its last logits differ from its own "
                   "prefill's\n", i, seqs[i].n_prompt);
            fails++;
            ok = false;
        }
    if (ok && n_forwards < 3) {
        printf("FAIL: only %u batched prefill forwards held more than one chunk\n", n_forwards);
        fails++;
        ok = false;
    }
    /* One-token chunks after a longer one: the f16 ones append and attend in
     * a paged step, the q8_0 ones in another, each its own. */
    ok = ok && prefill_singles(gpu, m, a.ctx[0], prompts[5]);
    /* Chunks of both paths in one forward, or more rows than the buffers hold, are refused. */
    if (ok) {
        vkv_ctx *two[2] = {a.ctx[0], a.ctx[3]};
        const int32_t *ids[2] = {prompts[5], prompts[5]};
        float *none[2] = {NULL, NULL};
        const uint32_t mixed[2] = {16, 17}, too_many[2] = {N_BATCH, N_BATCH};
        if (vkv_ctx_eval_chunks(two, ids, mixed, 2, none) != VKV_ERR_ARG ||
            vkv_ctx_eval_chunks(two, ids, too_many, 2, none) != VKV_ERR_ARG ||
            vkv_ctx_chunks_fit(two[0], too_many, 2) != 1) {
            printf("FAIL: a batched prefill of chunks of both paths, or of too many rows, is not refused\n");
            fails++;
            ok = false;
        }
    }
    /* A context sharing scratch counts none of its own. */
    vkv_ctx_params own = {.n_ctx = N_CTX, .n_batch = 16}, shared = own;
    shared.scratch_from = a.ctx[0];
    const vkv_ctx_memory mo = vkv_ctx_plan_memory(&m->hp, &own), ms = vkv_ctx_plan_memory(&m->hp, &shared);
    if (ok && !(ms.host_bytes == 0 && ms.scratch_bytes < mo.scratch_bytes && ms.kv_bytes == mo.kv_bytes)) {
        printf("FAIL: vkv_ctx_plan_memory counts a borrower's scratch\n");
        fails++;
        ok = false;
    }
    uint32_t first9[9], all[SEQS], one[1] = {6};
    for (uint32_t i = 0; i < SEQS; i++) all[i] = i;
    for (uint32_t i = 0; i < 9; i++) first9[i] = (i * 5 + 2) % SEQS; /* not in order, the owner not first */
    /* The first 9 (the decode-budget sequence among them) over enough steps
     * for its budget to compress twice; then all 16; then one alone. */
    for (uint32_t t = 0; ok && t < 12; t++) ok = step(&a, &b, first9, 9, nv, la, lb);
    /* The steps of all 16 must append and attend in paged steps (the 9
     * stage their rows, which keeps them per sequence): per layer one
     * kv_store_paged and one attn_paged dispatch for each row type of the
     * plain caches that take part (f16 and q8_0). */
    vkv_gpu_reset_host_stats(gpu);
    for (uint32_t t = 0; ok && t < 3; t++) ok = step(&a, &b, all, SEQS, nv, la, lb);
    const uint64_t n_attn = vkv_gpu_kernel_dispatches(gpu, VKV_K_ATTN_PAGED_F16) +
                            vkv_gpu_kernel_dispatches(gpu, VKV_K_ATTN_PAGED_ANY);
    const uint64_t n_store = vkv_gpu_kernel_dispatches(gpu, VKV_K_KV_STORE_PAGED);
    if (ok && (n_attn != 2ull * 3 * m->hp.n_layer || n_store != n_attn)) {
        printf("FAIL: 3 steps of 16 sequences over %u layers ran %llu attn_paged and %llu kv_store_paged "
               "dispatches, not %u each\n", m->hp.n_layer, (unsigned long long)n_attn, (unsigned long long)n_store,
               6 * m->hp.n_layer);
        fails++;
        ok = false;
    }
    for (uint32_t t = 0; ok && t < 3; t++) ok = step(&a, &b, one, 1, nv, la, lb);
    if (ok && vkv_decode_press_stats(a.decode[6]).compressions < 2) {
        printf("FAIL: the budgeted sequence was compressed %u times during generation, not twice or more\n",
               vkv_decode_press_stats(a.decode[6]).compressions);
        fails++;
        ok = false;
    }
    /* The errors: a repeated context. */
    if (ok) {
        vkv_ctx *rep[2] = {a.ctx[1], a.ctx[1]};
        int32_t ids[2] = {0, 0};
        if (vkv_ctx_eval_batch(rep, ids, 2, la) != VKV_ERR_ARG) {
            printf("FAIL: a repeated context is not refused\n");
            fails++;
            ok = false;
        }
    }
    set_free(&a);
    set_free(&b);
    free(la);
    free(lb);
    for (uint32_t i = 0; i < SEQS; i++) free(prompts[i]);
    return ok;
}

int main(int argc, char **argv)
{
    const char *model_path = argc > 1 ? argv[1] : "models/vkvector-shakespeare.gguf";
    const char *calib_path = argc > 2 ? argv[2] : argc > 1 ? NULL : "models/vkvector-shakespeare.vkcal";
    vkv_instance *inst;
    vkv_gpu *gpu;
    int open_rc = gpu_test_open("test_batch", true, &inst, &gpu);
    if (open_rc) return open_rc;
    vkv_status st;
    vkv_model *m = NULL;
    vkv_calib *cal = NULL;
    if ((st = vkv_model_load(gpu, model_path, &m)) || (calib_path && (st = vkv_calib_load(calib_path, m, &cal)))) {
        printf("FAIL: %s\n", vkv_last_error());
        fails++;
    } else {
        run(gpu, m, cal);
    }
    vkv_calib_free(cal);
    if (m) vkv_model_free(gpu, m);
    uint32_t verr = gpu_test_close(inst, gpu);
    if (verr) {
        printf("FAIL: %u validation error(s)\n", verr);
        fails++;
    }
    printf("batch (%s): %s; batched steps %.2f s, the same tokens one at a time %.2f s\n", model_path,
           fails ? "FAILED" : "every row bitwise equal", t_batch, t_single);
    return fails ? 1 : 0;
}
