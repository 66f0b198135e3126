#version 450
// TOVA, the final step: the last context query's attention averaged over ALL
// query heads of the layer (kvpress: attn_weights.mean(1), then repeated for
// every KV head), so every KV head gets the same row:
//   scores[h, j] = sum_kh raw[kh, j] / n_head   for j < n - 1,
// and the last token itself +inf (kvpress pads it with the max score).
// One invocation per (token, KV head).

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Rbuf { float raw[]; };      // [n_kv_head, n_pre] f32, n_pre = n - 1
layout(binding = 1) writeonly buffer Sbuf { float scores[]; };  // [n_kv_head, n] f32

layout(push_constant) uniform PC {
    uint n, n_pre, n_kv_head;
    float inv_heads; // 1 / n_head
} pc;

// +infinity, the score of a forced keep (built from bits: not a constant expression).
float press_inf() { return uintBitsToFloat(0x7f800000u); }

void main()
{
    const uint j = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y;
    if (j >= pc.n) return;
    float s = press_inf();
    if (j < pc.n_pre) {
        float acc = 0.0;
        for (uint kh = 0u; kh < pc.n_kv_head; kh++) acc += raw[kh * pc.n_pre + j];
        s = acc * pc.inv_heads;
    }
    scores[h * pc.n + j] = s;
}
