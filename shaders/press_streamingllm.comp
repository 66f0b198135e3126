#version 450
// StreamingLLM: keep the first n_sink tokens and the most recent ones.
// scores[h, j] = +inf for j < n_sink, else j: any top-k then takes the sinks
// and the latest k - n_sink tokens (kvpress scores 1 for both and 0 for the
// n - n_kept tokens after the sinks, which selects the same set).

layout(local_size_x_id = 0) in;

layout(binding = 0) writeonly buffer Sbuf { float scores[]; };  // [n_kv_head, n] f32

layout(push_constant) uniform PC { uint n, n_sink; } pc;

// +infinity, the score of a forced keep (built from bits: not a constant expression).
float press_inf() { return uintBitsToFloat(0x7f800000u); }

void main()
{
    const uint j = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y;
    if (j >= pc.n) return;
    scores[h * pc.n + j] = j < pc.n_sink ? press_inf() : float(j);
}
