#version 450
// Scores from a state accumulated during the prefill or the reconstruction
// pass, one invocation per (token j, KV head h):
//   mode 0 (ObservedAttention): scores[h, j] = state[h, j] / ((n - j) * group),
//          the attention summed over the queries that see j and the group's
//          query heads, averaged (kvpress: / arange(n, 0, -1), mean over the group);
//   mode 1 (KVzip): scores[h, j] = j < n_one ? 1 : state[h, j], the maximum
//          attention j received while the context was repeated; the first
//          min(n_sink, prefix) tokens are the sinks kvpress sets to 1.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Sbuf { float state[]; };    // [n_kv_head, n] f32
layout(binding = 1) writeonly buffer Obuf { float scores[]; };  // [n_kv_head, n] f32

layout(push_constant) uniform PC {
    uint n, mode, group, n_one;
} pc;

void main()
{
    const uint j = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y;
    if (j >= pc.n) return;
    const uint o = h * pc.n + j;
    if (pc.mode == 0u) scores[o] = state[o] / float((pc.n - j) * pc.group);
    else scores[o] = j < pc.n_one ? 1.0 : state[o];
}
