#version 450
// VECTOR's pool over several rows (a layer, or the whole model), step 1:
// ranks the tokens for a top-k whose first picks are the scorer's own kept
// set B (mask base) and whose next picks are the highest scores outside it.
// B gets +inf; every other score is clamped below it (+inf to the largest
// finite float, so an always-kept position outside B cannot tie with B), and
// NaN ranks last (-inf), as in topk_select.
//   s[i] = base[i] != 0 ? +inf : (isnan(x) ? -inf : min(x, FLT_MAX))

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Bbuf { uint base[]; };     // [rows, n] 1 = in B
layout(binding = 1) readonly buffer Xbuf { float scores[]; };  // [rows, n]
layout(binding = 2) writeonly buffer Sbuf { float s[]; };      // [rows, n]

layout(push_constant) uniform PC { uint total; } pc;

void main()
{
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (i >= pc.total) return;
    const float highest = 3.4028234663852886e38;
    float x = scores[i];
    s[i] = base[i] != 0u ? 1.0 / 0.0 : (isnan(x) ? -1.0 / 0.0 : min(x, highest));
}
