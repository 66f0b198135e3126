#version 450
// Second pass of split tier-aware attention (attn_tiered SPLIT=1): combines
// the splits' partial softmax sums of one (query, query head) row and applies
// the OLS map to the approximated part:
//   M = max_s m_s, L = sum_s l_s e^(m_s - M),
//   out = (sum_s e^(m_s - M) sum_v_s + W_h sum_s e^(m_s - M) sum_apx_s) / L
// One workgroup per row; W_h is read only when the head approximates tokens.
// A joint map's blocks s > 0 (attn_tiered.comp) accumulate: out += the
// approximated part alone, with the block at w_off.

layout(local_size_x_id = 0) in; // 64

layout(binding = 0) readonly buffer Pbuf { vec4 part[]; };   // [n_split, n_q * n_head, 2 * head_dim / 4 + 1]
layout(binding = 1) readonly buffer Mbuf { uint meta[]; };   // [n_kv_head, 8]: k_off, v_off, p_off, n_ret, n_apx
layout(binding = 2) readonly buffer Wbuf { float w[]; };     // [S, n_kv_head, head_dim, head_dim] f32
layout(binding = 3) buffer Obuf { vec4 out4[]; };            // [n_q, n_head, head_dim] f32 (read when accumulating)

layout(push_constant) uniform PC {
    uint n_rows;     // n_q * n_head
    uint n_head, n_kv_head, head_dim;
    uint n_split;
    uint w_off;      // first float of the map block applied
    uint accumulate; // out += the approximated part only
} pc;

shared vec4 ok[64];  // the combined sum_apx / L (head_dim / 4 <= 64)

void main()
{
    const uint row = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint d4n = pc.head_dim / 4u, stride = 2u * d4n + 1u;
    const uint kh = (row % pc.n_head) / (pc.n_head / pc.n_kv_head);
    float mx = -1.0e30;
    for (uint s = 0u; s < pc.n_split; s++) mx = max(mx, part[(s * pc.n_rows + row) * stride + 2u * d4n].x);
    float L = 0.0;
    for (uint s = 0u; s < pc.n_split; s++) {
        vec4 ml = part[(s * pc.n_rows + row) * stride + 2u * d4n];
        L += ml.y * exp(ml.x - mx);
    }
    const float inv = L > 0.0 ? 1.0 / L : 0.0;
    for (uint d4 = tid; d4 < d4n; d4 += wg) {
        vec4 a = vec4(0.0);
        for (uint s = 0u; s < pc.n_split; s++) {
            uint base = (s * pc.n_rows + row) * stride;
            a += part[base + d4n + d4] * exp(part[base + 2u * d4n].x - mx);
        }
        ok[d4] = a * inv;
    }
    barrier();
    const bool apx = meta[kh * 8u + 4u] > 0u;
    const uint hd = pc.head_dim;
    for (uint d4 = tid; d4 < d4n; d4 += wg) {
        vec4 res = vec4(0.0);
        for (uint s = 0u; s < pc.n_split; s++) {
            uint base = (s * pc.n_rows + row) * stride;
            res += part[base + d4] * exp(part[base + 2u * d4n].x - mx);
        }
        res *= inv;
        if (pc.accumulate != 0u) res = out4[row * d4n + d4];
        if (apx)
            for (uint e4 = 0u; e4 < d4n; e4++) {
                vec4 kv = ok[e4];
                for (uint jj = 0u; jj < 4u; jj++) {
                    uint r = pc.w_off + (kh * hd + 4u * d4 + jj) * hd + 4u * e4;
                    res[jj] += dot(vec4(w[r], w[r + 1u], w[r + 2u], w[r + 3u]), kv);
                }
            }
        out4[row * d4n + d4] = res;
    }
}
