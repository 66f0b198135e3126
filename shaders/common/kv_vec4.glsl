// Reading a K (or V) cache [kv heads, n_ctx, head_dim] four elements at a
// time, stored as f16 (KV_F16: four halves per uvec2, unpacked with
// unpackHalf2x16 so no 16-bit storage feature is needed) or f32 (KV_F32).
// The includer defines KV_BINDING, the cache's binding; head_dim % 4 == 0,
// so every row starts on a vec4 (f32) / uvec2 (f16) boundary.

#if defined(KV_F16)
layout(binding = KV_BINDING) readonly buffer KVbuf { uvec2 kv_h4[]; };
// Elements 4i..4i+3 of the bound cache.
vec4 kv_load4(uint i)
{
    uvec2 w = kv_h4[i];
    return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
}
#elif defined(KV_F32)
layout(binding = KV_BINDING) readonly buffer KVbuf { vec4 kv_f4[]; };
vec4 kv_load4(uint i) { return kv_f4[i]; }
#else
#error "define KV_F16 or KV_F32"
#endif
