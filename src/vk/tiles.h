/* Tile budgets the kernels and their C wrappers must agree on: workgroup
 * sizes, matmul tiles and the shared arrays of the attention kernels.
 * Included by C (src/vk) and by GLSL (shaders/, through
 * GL_GOOGLE_include_directive), so only integer #defines with a `u` suffix,
 * valid in both languages. */
#ifndef VKV_TILES_H
#define VKV_TILES_H

/* Workgroup sizes of the classes in vk/kernels.h. Kernels that reduce
 * through shared arrays size them for VKV_WG_WIDE_SIZE at most. */
#define VKV_WG_WIDE_SIZE 256u
#define VKV_WG_ROW_SIZE 128u
#define VKV_WG_NARROW_SIZE 64u

/* matmul.comp and matmul_cm.comp: a workgroup computes a BM x BN block of Y,
 * stepping through K by BK. */
#define VKV_MATMUL_BM 64u
#define VKV_MATMUL_BN 64u
#define VKV_MATMUL_BK 32u
/* matmul.comp: a thread's outputs, THREAD_TILE x THREAD_TILE, and so its
 * workgroup (BM / THREAD_TILE) x (BN / THREAD_TILE) threads (64). The kernel
 * takes BK = 32 (a weight chunk a row) and swizzles 8 runs of 4 a row. */
#define VKV_MATMUL_THREAD_TILE 8u
#define VKV_MATMUL_WG ((VKV_MATMUL_BM / VKV_MATMUL_THREAD_TILE) * (VKV_MATMUL_BN / VKV_MATMUL_THREAD_TILE))
#define VKV_MATMUL_CM_WG 128u /* 4 subgroups of 32, each a quarter of the block */

/* matvec.comp: weight rows per workgroup, and the largest workgroup its
 * shared partial sums hold. */
#define VKV_MATVEC_ROWS 4u
#define VKV_MATVEC_MAX_WG 128u
/* matvec.comp with MATVEC_COLS: the most columns one dispatch takes (the
 * sequences of one batched decode step, infer/forward.h). */
#define VKV_BATCH_MAX 16u
/* matvec.comp with MATVEC_COLS: weight rows per workgroup. A row's arithmetic
 * does not depend on it (a column stays bitwise the single-column kernel's);
 * more rows spread a workgroup's fixed cost over more of the columns' work. */
#define VKV_MATVEC_COLS_ROWS 8u
/* matvec.comp, q6_K rows: consecutive 32-element chunks a thread takes in
 * turn, the four of a half block, which share its high-bit bytes (a
 * thread's work item; every other type: one chunk). */
#define VKV_MATVEC_Q6_K_CHUNKS 4u

/* attn.comp and attn_tiered.comp (shaders/common/attn_tile.glsl): shared
 * arrays of ~29 KB, under the 32 KB of lavapipe and most GPUs. The host picks
 * tile_q and tile_k so that they fit. */
#define VKV_ATTN_SQ_VEC4 512u    /* tile_q * head_dim / 4: the Q tile */
#define VKV_ATTN_SKV_VEC4 1056u  /* tile_k * (head_dim / 4 + 1): the K, then V tile (+1 vec4 row pad) */
#define VKV_ATTN_SS_FLOATS 1024u /* tile_q * tile_k: the scores of a tile */
#define VKV_ATTN_MAX_COLS 2u     /* vec4 output columns per thread */
#define VKV_ATTN_MAX_TILE_Q 32u
#define VKV_ATTN_MAX_TILE_K 64u
/* Paged decode attention (attn_paged.comp, kv_store_paged.comp,
 * attn_paged_reduce.comp; docs/ARCHITECTURE.md §2, "Paged caches"): words of
 * a sequence's entry in the step's table, and the most splits a sequence's
 * keys are cut into (a work item is sequence * VKV_PAGED_ITEM_SPLITS + split;
 * VKV_ATTN_MAX_SPLITS of vk/ops_attn.h). */
#define VKV_PAGED_SEQ_WORDS 8u
#define VKV_PAGED_ITEM_SPLITS 64u

/* vector_residual.comp and vector_materialize.comp: the floats of the
 * shared pre-RoPE keys one rebuilt value reads (map_shifts * head_dim; the
 * joint map of 8 KV heads of 256, or 16 of 128). */
#define VKV_MAP_MAX_DIM 2048u

#endif
