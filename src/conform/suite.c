/* The suite: a table of case families, each a table of shapes, run in order.
 * The order is part of the suite: every case draws its inputs from one random
 * stream, so reordering would change every later case's data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform/cases.h"

#define N_OF(a) (sizeof(a) / sizeof *(a))

/* Runs one case unless an earlier one hit a Vulkan failure (which stops the run). */
#define RUN(expr)                                                  \
    do {                                                           \
        if (!c->fatal) {                                           \
            vkv_status s_ = (expr);                                \
            if (s_) c->fatal = s_;                                 \
        }                                                          \
    } while (0)

static bool want(const conform_ctx *c, const char *op) { return !c->filter || strstr(op, c->filter); }

#define VKV_DTYPE_ENTRY(t) VKV_##t,
static const vkv_dtype weight_types[] = {VKV_DTYPE_LIST(VKV_DTYPE_ENTRY)};
#undef VKV_DTYPE_ENTRY

static bool small_blocks(vkv_dtype t) { return vkv_dtype_get(t)->block_size <= 32; }

static void family_get_rows(conform_ctx *c, const char *op)
{
    for (size_t i = 0; i < N_OF(weight_types); i++) {
        const vkv_dtype t = weight_types[i];
        const bool sb = small_blocks(t);
        RUN(case_get_rows(c, t, 100, sb ? 64 : 256, 7));
        RUN(case_get_rows(c, t, 37, sb ? 288 : 768, 1));
        RUN(case_get_rows(c, t, 512, 4096, 5));
        /* SmolLM2-135M's width: not a multiple of 256 */
        if (sb) RUN(case_get_rows(c, t, 49, 576, 3));
    }
    /* q6_K grouped device rows of a whole group of 8 blocks and a short one (core/dtype.h;
     * q8_0 and q4_0 get theirs from the 288- and 576-wide cases above):
     * Qwen3-0.6B's FFN width, 3072 = 12 blocks */
    RUN(case_get_rows(c, VKV_Q6_K, 21, 3072, 4));
    /* Qwen3-0.6B's q8_0 embedding (165 MiB): bound in several ranges on lavapipe */
    if (c->big) RUN(case_get_rows(c, VKV_Q8_0, 151936, 1024, 9));
}

static void family_rms_norm(conform_ctx *c, const char *op)
{
    static const struct { uint32_t rows, n; bool weight; const char *what; } shapes[] = {
        {1, 4096, true, ""},
        {7, 130, true, ""},
        {3, 1000, false, ""},
        {5 * 8, 64, true, " (per-head: 5 tokens x 8 heads)"},
        {70000, 16, true, " (rows over the x group limit)"},
    };
    for (size_t i = 0; i < N_OF(shapes); i++)
        RUN(case_rms_norm(c, shapes[i].rows, shapes[i].n, shapes[i].weight, shapes[i].what));
}

/* {m, k, n}: the matvec path's shapes (n small) and the tiled paths'. */
typedef struct { uint32_t m, k, n; } mkn;

static void family_matmul(conform_ctx *c, const char *op)
{
    const vkv_matmul_path path = !strcmp(op, "matvec") ? VKV_MATMUL_MATVEC
                                 : !strcmp(op, "matmul_coopmat") ? VKV_MATMUL_COOPMAT : VKV_MATMUL_TILED;
    const bool mv = path == VKV_MATMUL_MATVEC;
    /* the last shape of each list only for 32-element blocks: widths that are not
     * multiples of 256 (SmolLM2-135M's 576 and 1536 / 3 = 512 + 64: 1600) */
    static const mkn matvec_shapes[] = {{1, 256, 1}, {37, 512, 1}, {1000, 4096, 1}, {3, 768, 2}, {193, 576, 1}};
    static const mkn tiled_shapes[] = {{1, 256, 2}, {70, 256, 5}, {130, 512, 67}, {256, 1024, 128}, {67, 1600, 9}};
    const mkn *shapes = mv ? matvec_shapes : tiled_shapes;
    for (size_t i = 0; i < N_OF(weight_types); i++) {
        const vkv_dtype t = weight_types[i];
        for (size_t s = 0; s < 5; s++)
            if (s < 4 || small_blocks(t)) RUN(case_matmul(c, path, t, shapes[s].m, shapes[s].k, shapes[s].n));
    }
    /* Float weights may have rows that are not a multiple of 32
     * (stories260K's FFN is 172 wide), even odd for 16-bit types. */
    static const vkv_dtype float_types[] = {VKV_F32, VKV_F16, VKV_BF16};
    for (size_t i = 0; i < N_OF(float_types); i++) {
        RUN(case_matmul(c, path, float_types[i], mv ? 37 : 70, 172, mv ? 1 : 5));
        RUN(case_matmul(c, path, float_types[i], mv ? 5 : 33, float_types[i] == VKV_F32 ? 45 : 171, mv ? 1 : 7));
    }
    /* q6_K grouped device rows of a whole group and a short one (as in family_get_rows) */
    RUN(case_matmul(c, path, VKV_Q6_K, mv ? 37 : 70, 3072, mv ? 1 : 5));
    if (c->big) { /* weights over 128 MiB: bound in several ranges on lavapipe */
        RUN(case_matmul(c, path, VKV_F32, 8500, 4096, mv ? 1 : 3));
        /* Qwen3-0.6B's tied q8_0 output matrix at decode (row ranges of
         * a 1088-byte row; the tiled path splits as the f32 case does) */
        if (mv) RUN(case_matmul(c, path, VKV_Q8_0, 151936, 1024, 1));
    }
}

/* The batched decode's multi-column matvec: against the reference, and each
 * column bitwise against the single-column kernel (case_matmul adds that
 * result), at n_cols 1, 2, 7 and VKV_BATCH_MAX. */
static void family_matvec_cols(conform_ctx *c, const char *op)
{
    static const uint32_t cols[] = {1, 2, 7, VKV_BATCH_MAX};
    for (size_t i = 0; i < N_OF(weight_types); i++) {
        const vkv_dtype t = weight_types[i];
        for (size_t j = 0; j < N_OF(cols); j++)
            RUN(case_matmul(c, VKV_MATMUL_MATVEC_COLS, t, 37, small_blocks(t) ? 576 : 512, cols[j]));
    }
    /* rows longer than one pass of the workgroup (4096), and float rows that
     * are not a multiple of 32 or of 4 (columns not 16-byte aligned) */
    RUN(case_matmul(c, VKV_MATMUL_MATVEC_COLS, VKV_Q4_K, 193, 4096, 7));
    /* q6_K rows of more work items (half blocks) than a workgroup has threads */
    RUN(case_matmul(c, VKV_MATMUL_MATVEC_COLS, VKV_Q6_K, 37, 16384, 3));
    RUN(case_matmul(c, VKV_MATMUL_MATVEC_COLS, VKV_Q6_K, 37, 3072, 3)); /* a whole group of blocks and a short one */
    RUN(case_matmul(c, VKV_MATMUL_MATVEC_COLS, VKV_F16, 37, 171, 7));
    RUN(case_matmul(c, VKV_MATMUL_MATVEC_COLS, VKV_F32, 5, 45, VKV_BATCH_MAX));
    RUN(case_matmul(c, VKV_MATMUL_MATVEC_COLS, VKV_BF16, 70, 172, 2));
    /* more columns than one dispatch takes: slices of VKV_BATCH_MAX (a short
     * prompt on a CPU device); rows of 64 floats keep every slice aligned */
    RUN(case_matmul(c, VKV_MATMUL_MATVEC_COLS, VKV_F16, 64, 512, 29));
    RUN(case_matmul(c, VKV_MATMUL_MATVEC_COLS, VKV_Q8_0, 64, 512, 2 * VKV_BATCH_MAX));
}

static void family_rope(conform_ctx *c, const char *op)
{
    static const struct {
        vkv_rope_mode mode;
        uint32_t head_dim, n_rot;
        float base;
        bool llama3;
        uint32_t n_tok, n_heads;
        int32_t max_pos;
    } shapes[] = {
        {VKV_ROPE_INTERLEAVED, 64, 64, 10000.0f, false, 7, 4, 4096},
        {VKV_ROPE_NEOX, 64, 64, 1000000.0f, false, 7, 4, 4096},
        {VKV_ROPE_NEOX, 128, 64, 10000.0f, false, 3, 2, 512},
        {VKV_ROPE_INTERLEAVED, 128, 128, 500000.0f, true, 9, 8, 4096},
        {VKV_ROPE_INTERLEAVED, 8, 8, 10000.0f, false, 33, 3, 512},
    };
    for (int inv = 0; inv < 2; inv++)
        for (size_t i = 0; i < N_OF(shapes); i++)
            RUN(case_rope(c, shapes[i].mode, inv, shapes[i].head_dim, shapes[i].n_rot, shapes[i].base,
                          shapes[i].llama3, shapes[i].n_tok, shapes[i].n_heads, shapes[i].max_pos));
}

static void family_softmax(conform_ctx *c, const char *op)
{
    static const struct { uint32_t rows, cols; float scale; bool causal; int32_t off; } shapes[] = {
        {5, 37, 0.125f, false, 0},
        {64, 1000, 0.088f, true, 936},
        {16, 16, 1.0f, true, 0},
        {4, 20, 1.0f, true, -2}, /* first rows see nothing */
        {1, 32000, 1.0f, false, 0},
    };
    for (size_t i = 0; i < N_OF(shapes); i++)
        RUN(case_softmax(c, shapes[i].rows, shapes[i].cols, shapes[i].scale, shapes[i].causal, shapes[i].off));
}

static void family_silu_mul(conform_ctx *c, const char *op)
{
    static const uint32_t sizes[] = {1, 1000, (1u << 20) + 3};
    for (size_t i = 0; i < N_OF(sizes); i++) RUN(case_elementwise(c, true, sizes[i]));
}

static void family_add(conform_ctx *c, const char *op)
{
    static const uint32_t sizes[] = {1, 1000, (1u << 24) + 7 /* over the x group limit */};
    for (size_t i = 0; i < N_OF(sizes); i++) RUN(case_elementwise(c, false, sizes[i]));
}

static void family_add_bias(conform_ctx *c, const char *op)
{
    RUN(case_add_bias(c, 1, 96));
    RUN(case_add_bias(c, 37, 640));
}

static void family_kv_store(conform_ctx *c, const char *op)
{
    static const struct { uint32_t n_tok, n_kv, hd, n_ctx, slot0; } shapes[] = {
        {1, 4, 8, 64, 0}, {1, 2, 64, 300, 299}, {37, 4, 8, 512, 100}, {64, 8, 128, 128, 64},
        {5, 2, 48, 40, 3}, /* the default model's head: a q8_0/q4_0 row of a 32- and a 16-element block */
        {3, 3, 36, 9, 6},  /* a 4-element last block (q4_0: its nibbles split 2 + 2) */
    };
    static const vkv_dtype types[] = {VKV_F32, VKV_F16, VKV_Q8_0, VKV_Q4_0};
    for (size_t t = 0; t < N_OF(types); t++)
        for (size_t i = 0; i < N_OF(shapes); i++)
            RUN(case_kv_store(c, types[t], shapes[i].n_tok, shapes[i].n_kv, shapes[i].hd, shapes[i].n_ctx, shapes[i].slot0));
}

/* Row conversions: quantized tiers gathered back into the f16 working
 * layout (compression during generation), and the other directions. */
static void family_kv_convert(conform_ctx *c, const char *op)
{
    static const struct { vkv_dtype src, dst; uint32_t hd, n_rows, src_row0, dst_row0; } cases[] = {
        {VKV_Q8_0, VKV_F16, 48, 300, 17, 5},  {VKV_Q4_0, VKV_F16, 48, 77, 0, 300}, {VKV_Q8_0, VKV_F32, 64, 40, 3, 9},
        {VKV_F16, VKV_Q8_0, 48, 129, 2, 1},   {VKV_F16, VKV_Q4_0, 36, 65, 7, 0},   {VKV_Q4_0, VKV_Q8_0, 128, 33, 1, 2},
        {VKV_F16, VKV_F16, 48, 10, 4, 4},
    };
    for (size_t i = 0; i < N_OF(cases); i++)
        RUN(case_kv_convert(c, cases[i].src, cases[i].dst, cases[i].hd, cases[i].n_rows, cases[i].src_row0,
                            cases[i].dst_row0));
}

/* The attention cases of one model shape: decode (n_q = 1) at several cache
 * lengths (1 and 7 run one split, 300 and 2049 several), a prompt prefill
 * (the cache holds exactly its tokens), a prefill chunk after 100 cached
 * tokens, and a single query through the prefill kernel. */
static void attention_cases(conform_ctx *c, vkv_dtype kt, vkv_dtype vt, uint32_t n_head, uint32_t n_kv_head, uint32_t hd)
{
    static const uint32_t decode_kv[] = {1, 7, 300, 2049};
    if (want(c, "attn_decode"))
        for (size_t i = 0; i < N_OF(decode_kv); i++)
            RUN(case_attention(c, VKV_ATTN_DECODE, kt, vt, n_head, n_kv_head, hd, 1, decode_kv[i] - 1, decode_kv[i],
                               decode_kv[i] + 9, 1.0f));
    if (want(c, "attn_prefill")) {
        RUN(case_attention(c, VKV_ATTN_PREFILL, kt, vt, n_head, n_kv_head, hd, 37, 0, 37, 64, 1.0f));
        RUN(case_attention(c, VKV_ATTN_PREFILL, kt, vt, n_head, n_kv_head, hd, 64, 100, 164, 256, 1.0f));
        RUN(case_attention(c, VKV_ATTN_PREFILL, kt, vt, n_head, n_kv_head, hd, 1, 299, 300, 300, 1.0f));
    }
}

static void family_attention(conform_ctx *c, const char *op)
{
    static const vkv_dtype kv_types[] = {VKV_F32, VKV_F16};
    for (size_t i = 0; i < N_OF(kv_types); i++) {
        attention_cases(c, kv_types[i], kv_types[i], 8, 4, 8);    /* stories260K */
        attention_cases(c, kv_types[i], kv_types[i], 8, 2, 64);   /* GQA 4:1 */
        attention_cases(c, kv_types[i], kv_types[i], 8, 8, 128);  /* MHA */
    }
    /* Quantized caches (the run-time typed kernels): both quantized, and K
     * and V of different types, on the default model's head (48: blocks of
     * 32 + 16) and a head of whole blocks. */
    static const vkv_dtype kq[][2] = {{VKV_Q8_0, VKV_Q8_0}, {VKV_Q4_0, VKV_Q4_0}, {VKV_F16, VKV_Q8_0}, {VKV_Q8_0, VKV_Q4_0}};
    for (size_t i = 0; i < N_OF(kq); i++) {
        attention_cases(c, kq[i][0], kq[i][1], 8, 2, 48);
        attention_cases(c, kq[i][0], kq[i][1], 8, 4, 64);
    }
    if (want(c, "attn_decode")) {
        /* n_q = 4 decode: causal masking inside the splits */
        RUN(case_attention(c, VKV_ATTN_DECODE, VKV_F16, VKV_F16, 8, 2, 64, 4, 296, 300, 320, 1.0f));
        /* one split over 32 (query, head) rows per KV head: the narrow
         * workgroup of the decode path takes them four at a time */
        RUN(case_attention(c, VKV_ATTN_DECODE, VKV_F16, VKV_F16, 32, 4, 128, 4, 40, 44, 64, 1.0f));
        /* scores of tens: the running max must rescale exactly */
        RUN(case_attention(c, VKV_ATTN_DECODE, VKV_F16, VKV_F16, 8, 2, 64, 1, 2048, 2049, 2049, 24.0f));
    }
    if (want(c, "attn_prefill"))
        RUN(case_attention(c, VKV_ATTN_PREFILL, VKV_F16, VKV_F16, 8, 2, 64, 64, 100, 164, 256, 24.0f));
    /* other head sizes: 16/32 (small test models), 80 (a tile_k that is no power of
     * two, head_dim not a multiple of the threads per row), 256 (the largest) */
    static const uint32_t more_hd[] = {16, 32, 80, 256};
    for (size_t i = 0; i < N_OF(more_hd); i++) {
        if (want(c, "attn_decode"))
            RUN(case_attention(c, VKV_ATTN_DECODE, VKV_F16, VKV_F16, 4, 2, more_hd[i], 1, 299, 300, 300, 1.0f));
        if (want(c, "attn_prefill"))
            RUN(case_attention(c, VKV_ATTN_PREFILL, VKV_F16, VKV_F16, 4, 2, more_hd[i], 64, 100, 164, 200, 1.0f));
    }
    if (c->big && want(c, "attn_decode")) /* a cache over 128 MiB: bound per KV head on lavapipe */
        RUN(case_attention(c, VKV_ATTN_DECODE, VKV_F32, VKV_F32, 8, 8, 128, 1, 299, 300, 40000, 1.0f));
}

/* Paged decode steps (kv_store_paged, attn_paged): every row type and a
 * mixed pair, pages of 16, 64 and 256 slots, GQA 4:1 at head_dim 64 and
 * the default model's 48 (a short last q8_0/q4_0 block), one sequence and 8. */
static void family_attention_paged(conform_ctx *c, const char *op)
{
    static const struct { vkv_dtype k, v; } types[] = {
        {VKV_F16, VKV_F16}, {VKV_F32, VKV_F32}, {VKV_Q8_0, VKV_Q8_0}, {VKV_Q4_0, VKV_Q4_0}, {VKV_F16, VKV_Q8_0}};
    for (size_t i = 0; i < N_OF(types); i++) {
        RUN(case_attention_paged(c, types[i].k, types[i].v, 8, 2, 64, 4, 8));
        RUN(case_attention_paged(c, types[i].k, types[i].v, 6, 2, 48, 6, 5));
    }
    RUN(case_attention_paged(c, VKV_F16, VKV_F16, 8, 8, 32, 8, 8));
    RUN(case_attention_paged(c, VKV_Q8_0, VKV_Q8_0, 4, 1, 128, 4, 1));
}

static void family_vector_residual(conform_ctx *c, const char *op)
{
    static const struct { uint32_t n_kv, hd, n_rot; bool neox; uint32_t n_ctx, n; bool joint, pos; } shapes[] = {
        {4, 8, 8, false, 40, 37, false, false}, {2, 64, 64, true, 300, 300, false, false},
        {2, 128, 64, true, 70, 65, false, false},
        /* joint maps: stories260K (4 x 8), the default model (2 x 48), 8 x 128 (Llama-3-8B's 1024 dims) */
        {4, 8, 8, false, 40, 37, true, false}, {2, 48, 48, false, 300, 290, true, false},
        {8, 128, 64, true, 20, 19, true, false},
        /* slots at gathered positions (decode-time compression) */
        {2, 48, 48, false, 200, 190, false, true}, {4, 64, 32, true, 100, 100, true, true},
    };
    for (int f16 = 0; f16 < 2; f16++)
        for (size_t i = 0; i < N_OF(shapes); i++)
            RUN(case_vector_residual(c, f16 ? VKV_F16 : VKV_F32, shapes[i].n_kv, shapes[i].hd, shapes[i].n_rot,
                                     shapes[i].neox, shapes[i].n_ctx, shapes[i].n, shapes[i].joint, shapes[i].pos));
}

static void family_vector_pool_scores(conform_ctx *c, const char *op)
{
    RUN(case_vector_truncation(c, TRUNC_POOL_SCORES, 1));
    RUN(case_vector_truncation(c, TRUNC_POOL_SCORES, 4 * 1000 + 3));
}

static void family_vector_pool_extend(conform_ctx *c, const char *op)
{
    RUN(case_vector_truncation(c, TRUNC_POOL_EXTEND, 3));
    RUN(case_vector_truncation(c, TRUNC_POOL_EXTEND, 5 * 8 * 1000 + 1));
}

static void family_vector_assign_tiers(conform_ctx *c, const char *op)
{
    RUN(case_vector_truncation(c, TRUNC_ASSIGN_TIERS, 7));
    RUN(case_vector_truncation(c, TRUNC_ASSIGN_TIERS, 8 * 4100));
}

static void family_vector_head_mean(conform_ctx *c, const char *op)
{
    RUN(case_vector_head_mean(c, 2, 1000));
    RUN(case_vector_head_mean(c, 8, 4099));
    RUN(case_vector_head_mean(c, 1, 7));
}

static void family_tiered(conform_ctx *c, const char *op)
{
    static const struct {
        uint32_t n_head, n_kv, hd, n_rot;
        bool neox;
        uint32_t n, n_ret, n_apx, n_new0, n_q;
        bool joint;
    } shapes[] = {
        {8, 4, 8, 8, false, 37, 12, 10, 0, 1, false},          /* stories260K shape */
        {8, 2, 64, 64, true, 300, 100, 50, 5, 1, false},        /* decode after 5 generated */
        {4, 4, 128, 128, false, 600, 150, 300, 0, 23, false},   /* query-agnostic question prefill */
        {4, 2, 64, 64, true, 260, 130, 0, 3, 2, false},         /* p_a = 0: the eviction baseline */
        {2, 1, 256, 256, true, 129, 1, 128, 0, 1, false},       /* head dim 256, nearly all approximated */
        {4, 2, 48, 48, false, 1200, 300, 400, 7, 1, false},     /* decode split over the keys */
        {8, 4, 8, 8, true, 700, 600, 0, 1, 3, false},           /* split, baseline, 3 queries */
        {8, 4, 8, 8, false, 300, 40, 110, 0, 6, false},         /* stories260K question prefill */
        {8, 4, 8, 8, false, 300, 40, 110, 6, 1, false},         /* stories260K decode after it */
        /* Partial rotation: the un-RoPE's fallbacks (interleaved n_rot % 4 != 0,
         * NeoX n_rot % 8 != 0) and unrotated tail dims. */
        {4, 2, 64, 20, true, 300, 60, 90, 2, 1, false},
        {4, 2, 64, 32, true, 300, 60, 90, 0, 5, false},
        {4, 2, 64, 32, false, 300, 60, 90, 2, 1, false},
        {4, 2, 8, 2, false, 300, 60, 90, 0, 5, false},
        {4, 2, 16, 6, false, 300, 60, 90, 1, 1, false},
        /* Joint maps (one per layer, the heads' tiers equal): the default
         * model's decode (split) and question prefill, stories260K's 4 KV
         * heads, NeoX with a partial rotation, the baseline. */
        {4, 2, 48, 48, false, 1200, 300, 400, 7, 1, true},
        {4, 2, 48, 48, false, 300, 60, 90, 0, 23, true},
        {8, 4, 8, 8, false, 300, 40, 110, 6, 1, true},
        {8, 4, 8, 8, false, 300, 40, 110, 0, 6, true},
        {4, 2, 64, 32, true, 300, 60, 90, 2, 3, true},
        {4, 2, 48, 48, false, 300, 130, 0, 1, 1, true},
    };
    for (int f16 = 0; f16 < 2; f16++)
        for (size_t i = 0; i < N_OF(shapes); i++) {
            vkv_dtype t = f16 ? VKV_F16 : VKV_F32;
            RUN(case_tiered(c, t, t, t, shapes[i].n_head, shapes[i].n_kv, shapes[i].hd, shapes[i].n_rot,
                            shapes[i].neox, shapes[i].n, shapes[i].n_ret, shapes[i].n_apx, shapes[i].n_new0,
                            shapes[i].n_q, shapes[i].joint));
        }
    /* Quantized tiers compacted from an f16 cache, on the default model's head
     * (48: q blocks of 32 + 16): decode split, question prefill, joint maps,
     * the baseline (no approximated slots; split too), and K and V of different types. */
    static const struct { vkv_dtype tk, tv; uint32_t n, n_ret, n_apx, n_new0, n_q; bool joint; } quant[] = {
        {VKV_Q8_0, VKV_Q8_0, 1200, 300, 400, 7, 1, false}, {VKV_Q8_0, VKV_Q8_0, 300, 60, 90, 0, 23, false},
        {VKV_Q4_0, VKV_Q4_0, 300, 60, 90, 6, 1, false},    {VKV_F16, VKV_Q8_0, 300, 60, 90, 0, 23, false},
        {VKV_Q8_0, VKV_F16, 300, 60, 90, 2, 1, true},      {VKV_Q8_0, VKV_Q8_0, 300, 130, 0, 1, 1, false},
        {VKV_F16, VKV_Q4_0, 1200, 300, 400, 7, 1, true},  {VKV_Q4_0, VKV_Q8_0, 700, 600, 0, 1, 3, false},
    };
    for (size_t i = 0; i < N_OF(quant); i++)
        RUN(case_tiered(c, VKV_F16, quant[i].tk, quant[i].tv, 4, 2, 48, 48, false, quant[i].n, quant[i].n_ret,
                        quant[i].n_apx, quant[i].n_new0, quant[i].n_q, quant[i].joint));
}

static void family_argmax(conform_ctx *c, const char *op)
{
    RUN(case_argmax(c, 3, 32000, false));
    RUN(case_argmax(c, 1, 7, false));
    RUN(case_argmax(c, 9, 1000, true));
}

/* the calibration's sums for stories260K (4 KV heads x 8) and a bigger layer
 * (8 x 64), plus odd shapes, offsets and strides */
static void family_gram(conform_ctx *c, const char *op)
{
    static const struct { vkv_gram_params p; const char *what; } shapes[] = {
        {{.n_tok = 256, .m = 32, .n = 32, .ldx = 32, .ldy = 32, .n_blocks = 1}, " K^T K"},
        {{.n_tok = 37, .m = 8, .n = 8, .ldx = 32, .ldy = 32, .x_step = 8, .y_step = 8, .n_blocks = 4}, " per head"},
        {{.n_tok = 512, .m = 1, .n = 512, .ldy = 512, .n_blocks = 1, .x_ones = true}, ""},
        {{.n_tok = 300, .m = 512, .n = 512, .ldx = 512, .ldy = 512, .n_blocks = 1}, " K^T V"},
        {{.n_tok = 17, .m = 33, .n = 70, .ldx = 50, .ldy = 77, .x0 = 3, .y0 = 5, .n_blocks = 1}, " strided"},
        {{.n_tok = 1, .m = 5, .n = 3, .ldx = 20, .ldy = 20, .x0 = 1, .y0 = 2, .x_step = 6, .y_step = 4, .n_blocks = 3},
         " 1 token"},
    };
    for (size_t i = 0; i < N_OF(shapes); i++) RUN(case_gram(c, shapes[i].p, shapes[i].what));
}

static void family_mask_row_counts(conform_ctx *c, const char *op)
{
    static const struct { uint32_t rows, n; } shapes[] = {{1, 1}, {7, 300}, {40, 1023}, {1, 70000}};
    for (size_t i = 0; i < N_OF(shapes); i++) RUN(case_mask_row_counts(c, shapes[i].rows, shapes[i].n));
}

static void family_topk_select(conform_ctx *c, const char *op)
{
    static const struct { uint32_t rows, n, k; bool per_row; topk_data data; } shapes[] = {
        {1, 7, 3, false, TOPK_RANDOM},
        {5, 1000, 100, false, TOPK_RANDOM},
        {5, 1000, 300, false, TOPK_TIES},
        {8, 4100, 2050, false, TOPK_TIES},
        {8, 4100, 2050, false, TOPK_RANDOM},
        {4, 131072, 1000, false, TOPK_RANDOM},
        {3, 500, 0, false, TOPK_RANDOM},
        {3, 500, 500, false, TOPK_TIES},
        {6, 999, 400, false, TOPK_SPECIAL},
        {6, 999, 30, false, TOPK_SPECIAL}, /* fewer than the +inf: earliest of them */
        {9, 777, 0, true, TOPK_TIES},
    };
    for (size_t i = 0; i < N_OF(shapes); i++)
        RUN(case_topk(c, shapes[i].rows, shapes[i].n, shapes[i].k, shapes[i].per_row, shapes[i].data));
}

/* A scorer (op "press_<name>"): GQA 4:1 at two head sizes, f32 and f16 caches;
 * n = 64 is all window for SnapKV / PyramidKV; block-wise KeyDiff with a
 * partial last block. */
static void family_press(conform_ctx *c, const char *op)
{
    const char *press = op + strlen("press_");
    const uint32_t room = strcmp(press, "kvzip") ? 0 : 100; /* KVzip's reconstruction queries */
    for (int f16 = 0; f16 < 2; f16++) {
        vkv_dtype kv = f16 ? VKV_F16 : VKV_F32;
        RUN(case_press(c, press, kv, 8, 2, 64, 300, 320 + room, 0));
        /* ObservedAttention and ExpectedAttention (alone or wrapped) take every query: a shorter context */
        const uint32_t n_long = strcmp(press, "observed") && !strstr(press, "expected") ? 1500 : 700;
        RUN(case_press(c, press, kv, 8, 2, 128, n_long, 1536 + room, 0));
    }
    RUN(case_press(c, press, VKV_F16, 4, 4, 32, 64, 64 + room, 0));
    if (!strcmp(press, "keydiff")) RUN(case_press(c, press, VKV_F16, 8, 2, 64, 1000, 1024, 128));
    /* a cache over 128 MiB: bound two KV heads per dispatch on lavapipe */
    if (c->big && (!strcmp(press, "knorm") || !strcmp(press, "keydiff") || !strcmp(press, "snapkv")))
        RUN(case_press(c, press, VKV_F32, 8, 4, 128, 300, 140000, 0));
}

/* The suite in its order. A family runs when --op matches one of its op
 * names; a family of several ops filters its cases itself. */
static const struct {
    const char *ops[2];
    void (*run)(conform_ctx *c, const char *op);
} families[] = {
    {{"get_rows"}, family_get_rows},
    {{"rms_norm"}, family_rms_norm},
    {{"matvec"}, family_matmul},
    {{"matmul_tiled"}, family_matmul},
    {{"matmul_coopmat"}, family_matmul},
    {{"rope"}, family_rope},
    {{"softmax"}, family_softmax},
    {{"silu_mul"}, family_silu_mul},
    {{"add"}, family_add},
    {{"add_bias"}, family_add_bias},
    {{"kv_store"}, family_kv_store},
    {{"kv_convert"}, family_kv_convert},
    {{"attn_prefill", "attn_decode"}, family_attention},
    {{"vector_residual"}, family_vector_residual},
    {{"vector_pool_scores"}, family_vector_pool_scores},
    {{"vector_assign_tiers"}, family_vector_assign_tiers},
    {{"vector_head_mean"}, family_vector_head_mean},
    {{"vector_pool_extend"}, family_vector_pool_extend},
    {{"tiered", "kv_compact"}, family_tiered},
    {{"argmax"}, family_argmax},
    {{"gram"}, family_gram},
    {{"topk_select"}, family_topk_select},
    {{"mask_row_counts"}, family_mask_row_counts},
    {{"press_knorm"}, family_press},
    {{"press_keydiff"}, family_press},
    {{"press_streamingllm"}, family_press},
    {{"press_snapkv"}, family_press},
    {{"press_pyramidkv"}, family_press},
    {{"press_tova"}, family_press},
    {{"press_observed"}, family_press},
    {{"press_expected"}, family_press},
    {{"press_kvzip"}, family_press},
    {{"press_chunkkv"}, family_press},
    {{"press_lagkv"}, family_press},
    {{"press_random"}, family_press},
    {{"press_adakv-snapkv"}, family_press}, /* AdaKV's safeguard over SnapKV (press/adakv.c) */
    {{"press_adakv-keydiff"}, family_press},
    {{"press_adakv-expected"}, family_press}, /* kvpress's registry's expected_attention: epsilon 1e-2 */
    {{"press_critical-snapkv"}, family_press}, /* CriticalKV's projected value norm (press/critical.c) */
    {{"press_critical-keydiff"}, family_press},
    {{"press_critical-expected"}, family_press}, /* over ExpectedAttention without value norms */
    {{"press_critical-adakv-snapkv"}, family_press}, /* with press_first_stage_counts.comp */
    {{"press_critical-adakv-keydiff"}, family_press},
    {{"press_critical-adakv-expected"}, family_press},
    {{"matvec_cols"}, family_matvec_cols}, /* last: the earlier cases' random data stays as it was */
    /* the batched decode step's paged kernels, after it for the same reason */
    {{"attn_paged", "kv_store_paged"}, family_attention_paged},
};

vkv_status vkv_conform_device(vkv_gpu *gpu, const vkv_caps *caps, uint64_t seed, const char *filter, bool big,
                              conform_result **results, size_t *n_results)
{
    conform_ctx ctx = {.gpu = gpu, .caps = caps, .rng = vkv_rng_new(seed), .filter = filter, .big = big};
    conform_ctx *c = &ctx;
    uint64_t a = caps->min_storage_buffer_offset_alignment;
    c->guard_bytes = a > 256 ? a : 256;
    for (size_t i = 0; i < N_OF(families); i++)
        if (want(c, families[i].ops[0]) || (families[i].ops[1] && want(c, families[i].ops[1])))
            families[i].run(c, families[i].ops[0]);
    *results = c->results;
    *n_results = c->n_results;
    return c->fatal;
}
