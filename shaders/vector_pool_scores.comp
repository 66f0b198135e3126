#version 450
// VECTOR's asymmetric truncation, step 1: ranks the pool by residual. Pool
// tokens get score -eps (the lowest residuals rank highest, so a top-k picks
// the tokens to approximate), clamped to a finite value so that a pool token
// always outranks the tokens outside the pool, which get -inf and are never
// picked (an infinite or NaN residual would otherwise tie with them).
//   s[h, j] = pool[h, j] != 0 ? max(-eps[h, j], -FLT_MAX) : -inf

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Pbuf { uint pool[]; };  // [n_kv_head, n] 1 = in the pool
layout(binding = 1) readonly buffer Ebuf { float eps[]; };  // [n_kv_head, n]
layout(binding = 2) writeonly buffer Sbuf { float s[]; };   // [n_kv_head, n]

layout(push_constant) uniform PC { uint total; } pc;

void main()
{
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (i >= pc.total) return;
    const float lowest = -3.4028234663852886e38;
    float e = eps[i];
    s[i] = pool[i] != 0u ? (isnan(e) ? lowest : max(-e, lowest)) : -1.0 / 0.0;
}
