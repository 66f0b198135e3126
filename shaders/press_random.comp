#version 450
// RandomPress: scores[h, j] uniform in [0, 1) from a counter-based hash of
// (seed, sample, layer, KV head, token), so every device and the CPU reference
// (src/press/random.c) draw the same values bit for bit: 24 bits of the hash
// scaled by 2^-24 (exact). One invocation per token.

layout(local_size_x_id = 0) in;

layout(binding = 0) writeonly buffer Sbuf { float scores[]; };  // [n_kv_head, n] f32

layout(push_constant) uniform PC {
    uint n;      // context tokens
    uint seed;   // the press's seed
    uint layer;  // the layer scored: every layer draws its own values
    uint sample_index; // the evaluation's sample: every sample draws its own values
} pc;

// A 32-bit integer hash (a permuted congruential step): the same on the host.
uint press_hash(uint v)
{
    const uint state = v * 747796405u + 2891336453u;
    const uint word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

void main()
{
    const uint j = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y;
    if (j >= pc.n) return;
    const uint bits = press_hash(j + press_hash(h + press_hash(pc.layer + press_hash(pc.sample_index + press_hash(pc.seed)))));
    scores[h * pc.n + j] = float(bits >> 8u) * (1.0 / 16777216.0);
}
