#version 450
// CriticalAdaKV's first-stage budgets (press/critical.c): each KV head's share
// of the layer's AdaKV budget times kvpress's first_stage_ratio 0.5, as Python's
// int(budget * 0.5):
//   first[h] = budget[h] / 2
// One invocation per KV head.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Bbuf { uint budget[]; }; // [n_kv_head] tokens each head keeps
layout(binding = 1) writeonly buffer Fbuf { uint first[]; }; // [n_kv_head] its first stage's count

layout(push_constant) uniform PC { uint total; } pc;

void main()
{
    const uint h = gl_GlobalInvocationID.x;
    if (h >= pc.total) return;
    first[h] = budget[h] / 2u;
}
