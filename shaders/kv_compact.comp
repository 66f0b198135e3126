#version 450
// Compaction of one layer's cache into the tiered layout after VECTOR's
// allocation: per KV head, retained tokens (K and V) and approximated tokens
// (K only) are gathered in position order into new, smaller buffers; evicted
// tokens are dropped. One workgroup per KV head scans the positions in chunks
// of the workgroup size with a shared-memory prefix sum.
//   K slot of the r-th retained token:     k_off + r      (V slot v_off + r)
//   K slot of the a-th approximated token: k_off + n_ret + a
// Rows are copied as raw 32-bit words (exact, the tiers of the plain cache's
// type), or with KV_CONVERT decoded from pc.src_type and re-encoded as
// pc.k_type / pc.v_type (quantized tiers from the f16 working cache; the row
// formats of common/kv_quant.glsl), one invocation per row either way.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in; // power of two, <= 256

// [n_kv_head, n_ctx] rows of the plain cache's type
layout(binding = 0) readonly buffer Kbuf { uint k_words[]; };
layout(binding = 1) readonly buffer Vbuf { uint v_words[]; };
layout(binding = 2) readonly buffer Tbuf { uint tier[]; };    // [n_kv_head, n]: 0 evicted, 1 retained, 2 approximated
layout(binding = 3) readonly buffer Mbuf { uint meta[]; };    // [n_kv_head, 8]: k_off, v_off, p_off, n_ret, n_apx
layout(binding = 4) writeonly buffer KObuf { uint k_out[]; }; // tiered K rows
layout(binding = 5) writeonly buffer VObuf { uint v_out[]; }; // tiered V rows
layout(binding = 6) writeonly buffer Pbuf { int pos[]; };     // positions of the compressed slots

layout(push_constant) uniform PC {
    uint n, n_ctx;
    uint row_words;  // 32-bit words per row (head_dim / 2 for f16, head_dim for f32); not KV_CONVERT
    uint head_dim;
    uint src_type, k_type, v_type; // KV_CONVERT: ggml type numbers of the plain rows, the K and V tiers
} pc;

#if defined(KV_CONVERT)
float kvq_src(uint e);
void kvq_out(uint w, uint value);
#define KVQ_WRITER
#include "common/kv_quant.glsl"
bool cur_v;   // writing the V row (else K)
uint cur_row; // its source row
float kvq_src(uint e) { return kvq_load4(cur_v, pc.src_type, pc.head_dim, cur_row, e / 4u)[e % 4u]; }
void kvq_out(uint w, uint value)
{
    if (cur_v) v_out[w] = value;
    else k_out[w] = value;
}
#endif

shared uint scan_r[256];
shared uint scan_a[256];

void main()
{
    uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    uint k_off = meta[h * 8u], v_off = meta[h * 8u + 1u], p_off = meta[h * 8u + 2u], n_ret = meta[h * 8u + 3u];
    uint base_r = 0u, base_a = 0u;
    for (uint c0 = 0u; c0 < pc.n; c0 += wg) {
        uint j = c0 + tid;
        uint t = j < pc.n ? tier[h * pc.n + j] : 0u;
        scan_r[tid] = t == 1u ? 1u : 0u;
        scan_a[tid] = t == 2u ? 1u : 0u;
        barrier();
        // Hillis-Steele inclusive scan.
        for (uint s = 1u; s < wg; s <<= 1) {
            uint r = tid >= s ? scan_r[tid - s] : 0u, a = tid >= s ? scan_a[tid - s] : 0u;
            barrier();
            scan_r[tid] += r;
            scan_a[tid] += a;
            barrier();
        }
        if (t != 0u) {
            uint kslot = t == 1u ? k_off + base_r + scan_r[tid] - 1u : k_off + n_ret + base_a + scan_a[tid] - 1u;
            uint vslot = v_off + base_r + scan_r[tid] - 1u;
            pos[p_off + (kslot - k_off)] = int(j);
#if defined(KV_CONVERT)
            cur_row = h * pc.n_ctx + j;
            cur_v = false;
            kvq_write_row(pc.k_type, pc.head_dim, kslot * (kvq_row_bytes(pc.k_type, pc.head_dim) / 4u));
            if (t == 1u) {
                cur_v = true;
                kvq_write_row(pc.v_type, pc.head_dim, vslot * (kvq_row_bytes(pc.v_type, pc.head_dim) / 4u));
            }
#else
            uint src = (h * pc.n_ctx + j) * pc.row_words;
            for (uint w = 0u; w < pc.row_words; w++) k_out[kslot * pc.row_words + w] = k_words[src + w];
            if (t == 1u)
                for (uint w = 0u; w < pc.row_words; w++) v_out[vslot * pc.row_words + w] = v_words[src + w];
#endif
        }
        base_r += scan_r[wg - 1u];
        base_a += scan_a[wg - 1u];
        barrier();
    }
}
