#!/usr/bin/python3
"""Random-weight GGUF models at the exact shapes of real Llama / Qwen models.

    /usr/bin/python3 tools/gen_model.py --preset qwen3-0.6b --type q8_0 -o qwen3-0.6b-q8_0.gguf
    /usr/bin/python3 tools/gen_model.py --preset llama-3.2-1b --mix q4_K_M -o llama-1b-q4_K_M.gguf
    /usr/bin/python3 tools/gen_model.py --preset qwen3-8b --layers 2 --vocab 8192 --type q5_K -o small.gguf
    /usr/bin/python3 tools/gen_model.py --preset llama-3.2-1b --layers 2 --type q4_K \\
        --vocab-from ggml-vocab-llama-bpe.gguf -o llama-1b-2L.gguf     # then `vkvector run -p TEXT`
    /usr/bin/python3 tools/gen_model.py --preset qwen3-0.6b --layers 1 --type q4_K --dequantized -o twin.gguf
    /usr/bin/python3 tools/gen_model.py --self-test
    /usr/bin/python3 tools/gen_model.py --list

The file holds what llama.cpp's converter writes for the architecture (llama, qwen2, qwen3):
widths, heads, KV heads, head dimension, FFN width, vocabulary, tied embeddings (no
`output.weight`), QKV biases (qwen2), QK-norm (qwen3), RoPE theta, context length, RMS
epsilon, and Llama-3.1 / 3.2 rope scaling as the `rope_freqs.weight` tensor (one factor per
frequency pair, dividing that pair's frequency). Weights are normal with std 1/sqrt(fan_in)
(so activations stay near unit scale and logits are finite and varied), norms near 1, biases
small; every tensor has its own seed derived from --seed and its name, so `--layers` keeps the
first layers' weights.

Weight types (--type T: every matrix in T, like `llama-quantize --pure`): f32 f16 bf16 q4_0
q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs, in the block layouts of llama.cpp's
ggml-common definitions. The quantizer is this file's own (a range fit per sub-block, one
least-squares refinement, rounding); it is not bit-exact with llama.cpp's. Norms, biases and
rope_freqs stay f32.

Mixes (--mix M) follow llama-quantize's per-tensor rules for dense Llama / Qwen models,
without an importance matrix:
    mix      base    output (+ token_embd when tied)  attn_v                       ffn_down                      attn_output
    q2_K     q2_K    q6_K                              q4_K if n_head/n_kv >= 4      q3_K                          q3_K
                                                      else q3_K
    q3_K_S   q3_K    q6_K                              -                            -                             -
    q3_K_M   q3_K    q6_K                              q5_K in layers 0-1, else q4_K q5_K in the first n/16 layers,  q4_K
                                                                                   else q4_K
    q3_K_L   q3_K    q6_K                              q5_K                         q5_K                          q5_K
    q4_K_S   q4_K    q6_K                              q5_K in layers 0-3           q5_K in the first n/8 layers  -
    q4_K_M   q4_K    q6_K                              q6_K in "more bits" layers   q6_K in "more bits" layers    -
    q5_K_S   q5_K    q6_K                              -                            -                             -
    q5_K_M   q5_K    q6_K                              q6_K in "more bits" layers   q6_K in "more bits" layers    -
    q6_K     q6_K    q6_K                              -                            -                             -
    q8_0     q8_0    q8_0                              -                            -                             -
    q4_0 q4_1 q5_0 q5_1: that type, output q6_K
    iq4_nl iq4_xs: that type, output q6_K, attn_v q5_K if n_head/n_kv >= 4
"More bits" layers (llama.cpp's use_more_bits): the first n/8, the last n/8, and every third
layer in between. An untied token_embd.weight keeps the base type.

Fallback for rows that are not a whole number of blocks (what llama-quantize does, printed
when it happens): a 256-element k-quant on a row that is not a multiple of 256 becomes
q2_K/q3_K/iq4_xs -> iq4_nl, q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0 (the output matrix of
such a width is q8_0 directly); a 32-element type on a row that is not a multiple of 32 becomes
f16. SmolLM2-135M (width 576) therefore holds mostly q5_0 / q5_1 / iq4_nl / q8_0 in a k-quant
mix, with k-quants kept for ffn_down (row 1536 = 6 x 256).

--dequantized (with --type or --mix) writes the same file with every matrix stored as f32
holding exactly the values its blocks decode to: the same weights quantized the same way, then
decoded by this file's dequantizers. A runtime that decodes blocks exactly must give the same
logits on both files up to f32 rounding (tests/e2e/real_shapes.sh).

--self-test quantizes random data into every type and checks the relative RMS error of the
round trip against a bound per type, checks that a --dequantized file holds exactly the decode
of its quantized twin, then decodes llama.cpp's own quantized files in
../shared/models (VKVECTOR_SHARED overrides ../shared; skipped when absent): the one-type
`shape-*-pure-*` files of each width were quantized from the same f16 weights, so every
type's decode must agree with the most precise decode of the same width, within that type's
error, and this file's quantizer, fed the most precise decode, must land within 25% of
llama.cpp's error for each type. That validates the dequantizers on llama.cpp's blocks.
"""
import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
import zlib

try:
    import numpy as np
except ImportError:
    # Debian's python3-numpy lives under Debian's interpreter; another python3 may come
    # first on PATH (see tools/setup.sh)
    if sys.executable != "/usr/bin/python3" and os.access("/usr/bin/python3", os.X_OK):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise SystemExit("gen_model: needs numpy (Debian: apt-get install python3-numpy)")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "models"))
import gguf_writer as gw  # noqa: E402

F32 = np.float32

# ====================================================================== presets

# From each model's Hugging Face config.json, the way llama.cpp's converter maps it.
PRESETS = {
    "llama-3.2-1b": dict(arch="llama", n_embd=2048, n_layer=16, n_head=32, n_head_kv=8, head_dim=64, n_ff=8192,
                         n_vocab=128256, tied=True, rope_theta=500000.0, ctx=131072, eps=1e-5,
                         llama3_rope=dict(factor=32.0, low=1.0, high=4.0, orig_ctx=8192)),
    "llama-3.2-3b": dict(arch="llama", n_embd=3072, n_layer=28, n_head=24, n_head_kv=8, head_dim=128, n_ff=8192,
                         n_vocab=128256, tied=True, rope_theta=500000.0, ctx=131072, eps=1e-5,
                         llama3_rope=dict(factor=32.0, low=1.0, high=4.0, orig_ctx=8192)),
    "llama-3.1-8b": dict(arch="llama", n_embd=4096, n_layer=32, n_head=32, n_head_kv=8, head_dim=128, n_ff=14336,
                         n_vocab=128256, tied=False, rope_theta=500000.0, ctx=131072, eps=1e-5,
                         llama3_rope=dict(factor=8.0, low=1.0, high=4.0, orig_ctx=8192)),
    "qwen2.5-0.5b": dict(arch="qwen2", n_embd=896, n_layer=24, n_head=14, n_head_kv=2, head_dim=64, n_ff=4864,
                         n_vocab=151936, tied=True, rope_theta=1000000.0, ctx=32768, eps=1e-6),
    "qwen2.5-1.5b": dict(arch="qwen2", n_embd=1536, n_layer=28, n_head=12, n_head_kv=2, head_dim=128, n_ff=8960,
                         n_vocab=151936, tied=True, rope_theta=1000000.0, ctx=32768, eps=1e-6),
    "qwen2.5-7b": dict(arch="qwen2", n_embd=3584, n_layer=28, n_head=28, n_head_kv=4, head_dim=128, n_ff=18944,
                       n_vocab=152064, tied=False, rope_theta=1000000.0, ctx=32768, eps=1e-6),
    "qwen3-0.6b": dict(arch="qwen3", n_embd=1024, n_layer=28, n_head=16, n_head_kv=8, head_dim=128, n_ff=3072,
                       n_vocab=151936, tied=True, rope_theta=1000000.0, ctx=40960, eps=1e-6),
    "qwen3-1.7b": dict(arch="qwen3", n_embd=2048, n_layer=28, n_head=16, n_head_kv=8, head_dim=128, n_ff=6144,
                       n_vocab=151936, tied=True, rope_theta=1000000.0, ctx=40960, eps=1e-6),
    "qwen3-4b": dict(arch="qwen3", n_embd=2560, n_layer=36, n_head=32, n_head_kv=8, head_dim=128, n_ff=9728,
                     n_vocab=151936, tied=True, rope_theta=1000000.0, ctx=40960, eps=1e-6),
    "qwen3-8b": dict(arch="qwen3", n_embd=4096, n_layer=36, n_head=32, n_head_kv=8, head_dim=128, n_ff=12288,
                     n_vocab=151936, tied=False, rope_theta=1000000.0, ctx=40960, eps=1e-6),
    "qwen3-14b": dict(arch="qwen3", n_embd=5120, n_layer=40, n_head=40, n_head_kv=8, head_dim=128, n_ff=17408,
                      n_vocab=151936, tied=False, rope_theta=1000000.0, ctx=40960, eps=1e-6),
    "smollm2-135m": dict(arch="llama", n_embd=576, n_layer=30, n_head=9, n_head_kv=3, head_dim=64, n_ff=1536,
                         n_vocab=49152, tied=True, rope_theta=100000.0, ctx=8192, eps=1e-5),
}

# ====================================================================== blocks

QK = 32      # elements per block of the 32-element types
QK_K = 256   # elements per super-block of the k-quants and iq4_xs

# Field layouts of ggml-common's block structs (packed, little-endian).
BLOCK = {
    "q4_0": np.dtype([("d", "<f2"), ("qs", "u1", 16)]),
    "q4_1": np.dtype([("d", "<f2"), ("m", "<f2"), ("qs", "u1", 16)]),
    "q5_0": np.dtype([("d", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)]),
    "q5_1": np.dtype([("d", "<f2"), ("m", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)]),
    "q8_0": np.dtype([("d", "<f2"), ("qs", "i1", 32)]),
    "q2_K": np.dtype([("scales", "u1", 16), ("qs", "u1", 64), ("d", "<f2"), ("dmin", "<f2")]),
    "q3_K": np.dtype([("hmask", "u1", 32), ("qs", "u1", 64), ("scales", "u1", 12), ("d", "<f2")]),
    "q4_K": np.dtype([("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12), ("qs", "u1", 128)]),
    "q5_K": np.dtype([("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12), ("qh", "u1", 32), ("qs", "u1", 128)]),
    "q6_K": np.dtype([("ql", "u1", 128), ("qh", "u1", 64), ("scales", "i1", 16), ("d", "<f2")]),
    "iq4_nl": np.dtype([("d", "<f2"), ("qs", "u1", 16)]),
    "iq4_xs": np.dtype([("d", "<f2"), ("scales_h", "<u2"), ("scales_l", "u1", 4), ("qs", "u1", 128)]),
}
for _name, _dt in BLOCK.items():
    assert _dt.itemsize == gw.GGML_TYPES[_name][2], _name

# iq4_nl / iq4_xs: the 16 non-uniform levels a 4-bit index selects
IQ4_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=F32)
_IQ4_MIDS = (IQ4_LEVELS[1:] + IQ4_LEVELS[:-1]) / 2

ALL_TYPES = ["f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0",
             "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"]


def _inv(d):
    out = np.zeros_like(d)
    np.divide(1.0, d, out=out, where=d != 0)
    return out


def _signed_absmax(x):
    """The element of largest magnitude along the last axis, with its sign."""
    hi, lo = x.max(-1), x.min(-1)
    return np.where(-lo > hi, lo, hi)


def _half(x):
    """Rounds to f16 (how scales are stored) and returns (f16, the f32 it means)."""
    h = x.astype(np.float16)
    return h, h.astype(F32)


def _round(y, lo, hi):
    y = np.rint(y)   # (np.clip is several times slower than these two)
    np.maximum(y, lo, out=y)
    return np.minimum(y, hi, out=y)


def _iq4_index(y):
    return np.searchsorted(_IQ4_MIDS, y).astype(np.uint8)


def _refine_sym(x, q):
    """Least-squares scale for x ~ s q per row of the last axis (0 where q is all 0)."""
    qq = (q * q).sum(-1)
    return (q * x).sum(-1) * _inv(qq)


def _fit_sym(x, qneg, qpos):
    """Symmetric fit x ~ s q, q integer in [-qneg, qpos]: the largest magnitude maps to
    -qneg, then one least-squares pass over the rounded q."""
    s = _signed_absmax(x) / -qneg
    q = _round(x * _inv(s)[..., None], -qneg, qpos)
    s2 = _refine_sym(x, q)
    return np.where(s2 != 0, s2, s)


def _fit_iq4(x):
    """x ~ s IQ4_LEVELS[i]: the largest magnitude maps to -127, then one least-squares pass."""
    s = _signed_absmax(x) / -127
    v = IQ4_LEVELS[_iq4_index(x * _inv(s)[..., None])]
    s2 = _refine_sym(x, v)
    return np.where(s2 != 0, s2, s)


def _fit_min(x, nmax, signed_min=False):
    """x ~ s q - m with q in [0, nmax], s >= 0 and m >= 0 (the k-quants' form; any sign
    with signed_min, q4_1 / q5_1): the range first, then one least-squares pass for
    (s, m) over the rounded q."""
    lo = x.min(-1) if signed_min else np.minimum(x.min(-1), 0)
    s = (x.max(-1) - lo) / nmax
    m = -lo
    q = _round((x + m[..., None]) * _inv(s)[..., None], 0, nmax)
    n = x.shape[-1]
    sq, sqq, sx, sqx = q.sum(-1), (q * q).sum(-1), x.sum(-1), (q * x).sum(-1)
    det = n * sqq - sq * sq
    idet = _inv(det)
    s2 = (n * sqx - sq * sx) * idet
    m2 = -(sqq * sx - sq * sqx) * idet
    ok = (det > 0) & (s2 > 0) & ((m2 >= 0) | signed_min)
    return np.where(ok, s2, s), np.where(ok, m2, m)


def _superscale_sym(s, lmin, lmax):
    """Quantizes sub-block scales s (nb, nsub) to d * l, l integer in [lmin, lmax],
    the largest magnitude mapping to lmin. Returns (d f16, l, effective scales)."""
    dh, d = _half(_signed_absmax(s) / lmin)
    lv = _round(s * _inv(d)[:, None], lmin, lmax)
    return dh, lv, d[:, None] * lv


def _superscale_pos(s, lmax):
    """Quantizes non-negative scales s (nb, nsub) to d * l, l integer in [0, lmax]."""
    dh, d = _half(s.max(-1) / lmax)
    lv = _round(s * _inv(d)[:, None], 0, lmax)
    return dh, lv, d[:, None] * lv


# ---- bit packing shared by several layouts

def _nibbles32(q):
    """(nb, 32) 4-bit values -> (nb, 16) bytes: element j low nibble, j + 16 high."""
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)


def _unnibbles32(b):
    return np.concatenate([b & 15, b >> 4], axis=-1)


_BIT32 = np.left_shift(np.uint32(1), np.arange(32, dtype=np.uint32))


def _bits32(bits):
    """(nb, 32) bits -> u32, bit j from element j."""
    return (bits.astype(np.uint32) * _BIT32).sum(-1, dtype=np.uint32)


def _unbits32(w):
    return ((w[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)


def _crumbs(q):
    """(nb, 256) 2-bit values -> (nb, 64) bytes (q2_K / q3_K order): byte 32h + l holds
    element 128h + 32j + l in bits 2j..2j+1."""
    q = q.reshape(-1, 2, 4, 32).astype(np.uint8)
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(-1, 64)


def _uncrumbs(b):
    b = b.reshape(-1, 2, 1, 32)
    return ((b >> (2 * np.arange(4, dtype=np.uint8))[None, None, :, None]) & 3).reshape(-1, 256)


def _k4_scales(sc, mn):
    """Eight 6-bit scales and eight 6-bit mins -> q4_K / q5_K's 12 bytes."""
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    return np.concatenate([(sc[:, :4] & 63) | ((sc[:, 4:] >> 4) << 6),
                           (mn[:, :4] & 63) | ((mn[:, 4:] >> 4) << 6),
                           (sc[:, 4:] & 15) | ((mn[:, 4:] & 15) << 4)], axis=1)


def _un_k4_scales(b):
    sc = np.concatenate([b[:, 0:4] & 63, (b[:, 8:12] & 15) | ((b[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([b[:, 4:8] & 63, (b[:, 8:12] >> 4) | ((b[:, 4:8] >> 6) << 4)], axis=1)
    return sc.astype(F32), mn.astype(F32)


def _q3k_scales(u):
    """Sixteen 6-bit values -> q3_K's 12 bytes: low nibbles in bytes 0-7 (value i and
    i + 8 share byte i), high 2-bit pairs in bytes 8-11 (value 4g + m in byte 8 + m, bits 2g)."""
    u = u.astype(np.uint8)
    hi = (u >> 4).reshape(-1, 4, 4)
    top = hi[:, 0] | (hi[:, 1] << 2) | (hi[:, 2] << 4) | (hi[:, 3] << 6)
    return np.concatenate([(u[:, :8] & 15) | ((u[:, 8:] & 15) << 4), top], axis=1)


def _un_q3k_scales(b):
    low = np.concatenate([b[:, :8] & 15, b[:, :8] >> 4], axis=1)
    high = np.concatenate([(b[:, 8:12] >> (2 * g)) & 3 for g in range(4)], axis=1)
    return (low | (high << 4)).astype(F32) - 32


# ---- encoders: blocks (nb, block elements) f32 -> structured block array

def _enc_q8_0(x):
    dh, d = _half(np.abs(x).max(-1) / 127)
    out = np.zeros(len(x), BLOCK["q8_0"])
    out["d"], out["qs"] = dh, _round(x * _inv(d)[:, None], -127, 127)
    return out


def _enc_sym32(x, bits):
    """q4_0 / q5_0: x = d (q - 2^(bits-1)), the largest magnitude at q = 0."""
    half = 1 << (bits - 1)
    dh, d = _half(_fit_sym(x, half, half - 1))
    q = (_round(x * _inv(d)[:, None], -half, half - 1) + half).astype(np.uint8)
    out = np.zeros(len(x), BLOCK["q%d_0" % bits])
    out["d"], out["qs"] = dh, _nibbles32(q & 15)
    if bits == 5:
        out["qh"] = _bits32(q >> 4)
    return out


def _enc_affine32(x, bits):
    """q4_1 / q5_1: x = d q + m, q in [0, 2^bits - 1]."""
    nmax = (1 << bits) - 1
    s, m = _fit_min(x, nmax, signed_min=True)
    dh, d = _half(s)
    mh, mf = _half(-m)
    q = _round((x - mf[:, None]) * _inv(d)[:, None], 0, nmax).astype(np.uint8)
    out = np.zeros(len(x), BLOCK["q%d_1" % bits])
    out["d"], out["m"], out["qs"] = dh, mh, _nibbles32(q & 15)
    if bits == 5:
        out["qh"] = _bits32(q >> 4)
    return out


def _enc_iq4_nl(x):
    dh, d = _half(_fit_iq4(x))
    out = np.zeros(len(x), BLOCK["iq4_nl"])
    out["d"], out["qs"] = dh, _nibbles32(_iq4_index(x * _inv(d)[:, None]))
    return out


def _enc_kmin(x, nsub, nmax, smax):
    """Shared by q2_K / q4_K / q5_K: x = d sc q - dmin mn per sub-block."""
    xs = x.reshape(len(x), nsub, -1)
    s, m = _fit_min(xs, nmax)
    dh, sc, se = _superscale_pos(s, smax)
    mh, mn, me = _superscale_pos(m, smax)
    q = _round((xs + me[..., None]) * _inv(se)[..., None], 0, nmax).astype(np.uint8).reshape(len(x), -1)
    return dh, mh, sc, mn, q


def _enc_q2_K(x):
    dh, mh, sc, mn, q = _enc_kmin(x, 16, 3, 15)
    out = np.zeros(len(x), BLOCK["q2_K"])
    out["d"], out["dmin"] = dh, mh
    out["scales"] = sc.astype(np.uint8) | (mn.astype(np.uint8) << 4)
    out["qs"] = _crumbs(q)
    return out


def _enc_q45_K(x, bits):
    dh, mh, sc, mn, q = _enc_kmin(x, 8, (1 << bits) - 1, 63)
    out = np.zeros(len(x), BLOCK["q%d_K" % bits])
    out["d"], out["dmin"], out["scales"] = dh, mh, _k4_scales(sc, mn)
    # 64-element chunk c: bytes 32c + l hold element 64c + l (low nibble) and 64c + 32 + l
    qc = q.reshape(len(x), 4, 2, 32)
    out["qs"] = ((qc[:, :, 0] & 15) | ((qc[:, :, 1] & 15) << 4)).reshape(len(x), 128)
    if bits == 5:
        h = (qc >> 4).astype(np.uint8)   # bit 2c + s of qh[l]: element 64c + 32s + l
        shifts = np.arange(8, dtype=np.uint8).reshape(1, 4, 2, 1)
        out["qh"] = (h << shifts).sum(axis=(1, 2), dtype=np.uint8)
    return out


def _enc_sym16(x, qneg, qpos, lmin, lmax):
    """Shared by q3_K / q6_K: 16 sub-blocks of 16, x = d l q."""
    xs = x.reshape(len(x), 16, 16)
    dh, lv, se = _superscale_sym(_fit_sym(xs, qneg, qpos), lmin, lmax)
    q = _round(xs * _inv(se)[..., None], -qneg, qpos).reshape(len(x), 256)
    return dh, lv, (q + qneg).astype(np.uint8)


def _enc_q3_K(x):
    dh, lv, u = _enc_sym16(x, 4, 3, -32, 31)
    out = np.zeros(len(x), BLOCK["q3_K"])
    out["d"], out["scales"], out["qs"] = dh, _q3k_scales(lv + 32), _crumbs(u & 3)
    hb = (u >> 2).reshape(len(x), 8, 32)   # bit 4h + j of hmask[l]: element 32 (4h + j) + l
    out["hmask"] = (hb << np.arange(8, dtype=np.uint8)[None, :, None]).sum(1, dtype=np.uint8)
    return out


def _enc_q6_K(x):
    dh, lv, u = _enc_sym16(x, 32, 31, -128, 127)
    out = np.zeros(len(x), BLOCK["q6_K"])
    out["d"], out["scales"] = dh, lv
    # half n, quarter k: element 128n + 32k + l; ql[64n + l] holds k = 0 (low) and 2 (high),
    # ql[64n + 32 + l] k = 1 and 3; qh[32n + l] the top 2 bits of k at bits 2k
    uq = u.reshape(len(x), 2, 4, 32)
    lo, hi = uq & 15, uq >> 4
    ql = np.concatenate([lo[:, :, 0] | (lo[:, :, 2] << 4), lo[:, :, 1] | (lo[:, :, 3] << 4)], axis=2)
    out["ql"] = ql.reshape(len(x), 128)
    out["qh"] = (hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)).reshape(len(x), 64)
    return out


def _enc_iq4_xs(x):
    xs = x.reshape(len(x), 8, 32)
    dh, lv, se = _superscale_sym(_fit_iq4(xs), -32, 31)
    idx = _iq4_index(xs * _inv(se)[..., None])
    u = (lv + 32).astype(np.uint8)
    out = np.zeros(len(x), BLOCK["iq4_xs"])
    out["d"] = dh
    out["scales_l"] = (u[:, 0::2] & 15) | ((u[:, 1::2] & 15) << 4)
    out["scales_h"] = ((u >> 4).astype(np.uint16) << (2 * np.arange(8, dtype=np.uint16))).sum(1, dtype=np.uint16)
    out["qs"] = (idx[:, :, :16] | (idx[:, :, 16:] << 4)).reshape(len(x), 128)
    return out


_ENCODERS = {
    "q4_0": lambda x: _enc_sym32(x, 4), "q5_0": lambda x: _enc_sym32(x, 5),
    "q4_1": lambda x: _enc_affine32(x, 4), "q5_1": lambda x: _enc_affine32(x, 5),
    "q8_0": _enc_q8_0, "iq4_nl": _enc_iq4_nl,
    "q2_K": _enc_q2_K, "q3_K": _enc_q3_K, "q4_K": lambda x: _enc_q45_K(x, 4),
    "q5_K": lambda x: _enc_q45_K(x, 5), "q6_K": _enc_q6_K, "iq4_xs": _enc_iq4_xs,
}

# ---- decoders: structured block array -> (nb, block elements) f32


def _f(a):
    return a.astype(F32)


def _dec_q4_0(b):
    return _f(b["d"])[:, None] * (_f(_unnibbles32(b["qs"])) - 8)


def _dec_q4_1(b):
    return _f(b["d"])[:, None] * _f(_unnibbles32(b["qs"])) + _f(b["m"])[:, None]


def _dec_q5_0(b):
    q = _unnibbles32(b["qs"]) | (_unbits32(b["qh"]) << 4)
    return _f(b["d"])[:, None] * (_f(q) - 16)


def _dec_q5_1(b):
    q = _unnibbles32(b["qs"]) | (_unbits32(b["qh"]) << 4)
    return _f(b["d"])[:, None] * _f(q) + _f(b["m"])[:, None]


def _dec_q8_0(b):
    return _f(b["d"])[:, None] * _f(b["qs"])


def _dec_iq4_nl(b):
    return _f(b["d"])[:, None] * IQ4_LEVELS[_unnibbles32(b["qs"])]


def _dec_q2_K(b):
    sc = b["scales"]
    dl = _f(b["d"])[:, None] * _f(sc & 15)
    ml = _f(b["dmin"])[:, None] * _f(sc >> 4)
    q = _f(_uncrumbs(b["qs"])).reshape(-1, 16, 16)
    return (dl[..., None] * q - ml[..., None]).reshape(-1, 256)


def _dec_q3_K(b):
    dl = _f(b["d"])[:, None] * _un_q3k_scales(b["scales"])
    hm = b["hmask"][:, None, :] >> np.arange(8, dtype=np.uint8)[None, :, None] & 1
    q = _f(_uncrumbs(b["qs"])) - 4 * (1 - _f(hm.reshape(-1, 256)))
    return (dl[..., None] * q.reshape(-1, 16, 16)).reshape(-1, 256)


def _dec_q45_K(b, bits):
    sc, mn = _un_k4_scales(b["scales"])
    qs = b["qs"].reshape(-1, 4, 1, 32)
    q = (qs >> np.array([0, 4], dtype=np.uint8)[None, None, :, None]) & 15
    if bits == 5:
        shifts = np.arange(8, dtype=np.uint8).reshape(1, 4, 2, 1)
        q = q | (((b["qh"][:, None, None, :] >> shifts) & 1) << 4)
    q = _f(q).reshape(-1, 8, 32)
    d, dmin = _f(b["d"])[:, None, None], _f(b["dmin"])[:, None, None]
    return (d * sc[..., None] * q - dmin * mn[..., None]).reshape(-1, 256)


def _dec_q6_K(b):
    ql = b["ql"].reshape(-1, 2, 2, 32)    # half, first / second 32 bytes, l
    qh = b["qh"].reshape(-1, 2, 1, 32)
    lo = np.stack([ql[:, :, 0] & 15, ql[:, :, 1] & 15, ql[:, :, 0] >> 4, ql[:, :, 1] >> 4], axis=2)
    hi = (qh >> (2 * np.arange(4, dtype=np.uint8))[None, None, :, None]) & 3
    q = _f(lo | (hi << 4)) - 32
    scale = _f(b["d"])[:, None] * _f(b["scales"])
    return (scale[..., None] * q.reshape(-1, 16, 16)).reshape(-1, 256)


def _dec_iq4_xs(b):
    sl = b["scales_l"]
    low = np.stack([sl & 15, sl >> 4], axis=2).reshape(-1, 8)
    high = (b["scales_h"][:, None] >> (2 * np.arange(8, dtype=np.uint16))) & 3
    dl = _f(b["d"])[:, None] * (_f(low | (high << 4)) - 32)
    idx = _unnibbles32(b["qs"].reshape(-1, 16)).reshape(-1, 8, 32)
    return (dl[..., None] * IQ4_LEVELS[idx]).reshape(-1, 256)


_DECODERS = {
    "q4_0": _dec_q4_0, "q4_1": _dec_q4_1, "q5_0": _dec_q5_0, "q5_1": _dec_q5_1, "q8_0": _dec_q8_0,
    "iq4_nl": _dec_iq4_nl, "q2_K": _dec_q2_K, "q3_K": _dec_q3_K, "q4_K": lambda b: _dec_q45_K(b, 4),
    "q5_K": lambda b: _dec_q45_K(b, 5), "q6_K": _dec_q6_K, "iq4_xs": _dec_iq4_xs,
}


def quantize(tname, x):
    """Rows of f32 values (rows, cols) -> their encoding in type tname, a uint8 array
    (rows, row bytes) laid out as ggml lays it out."""
    x = np.ascontiguousarray(x, dtype=F32)
    rows, cols = x.shape
    if tname == "f32":
        return x.view(np.uint8)
    if tname == "f16":
        return x.astype("<f2").view(np.uint8)
    if tname == "bf16":   # round to nearest even on the top 16 bits
        u = x.view(np.uint32)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").view(np.uint8)
    _, blck, size = gw.type_info(tname)
    if cols % blck:
        raise ValueError("%s needs rows of a multiple of %d elements, got %d" % (tname, blck, cols))
    return _ENCODERS[tname](x.reshape(-1, blck)).view(np.uint8).reshape(rows, cols // blck * size)


def dequantize(tname, raw, cols):
    """The inverse of quantize: raw bytes (rows, row bytes) -> f32 (rows, cols)."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1, gw.tensor_nbytes((cols,), tname))
    rows = raw.shape[0]
    if tname == "f32":
        return raw.view("<f4").astype(F32).reshape(rows, cols)
    if tname == "f16":
        return raw.view("<f2").astype(F32).reshape(rows, cols)
    if tname == "bf16":
        return (raw.view("<u2").astype(np.uint32) << 16).view(F32).reshape(rows, cols)
    blocks = raw.reshape(-1).view(BLOCK[tname])
    return _DECODERS[tname](blocks).reshape(rows, cols)


# ====================================================================== mixes

FTYPE = {  # llama.cpp's general.file_type for each mix / single type
    "f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9, "q2_K": 10,
    "q3_K_S": 11, "q3_K_M": 12, "q3_K_L": 13, "q4_K_S": 14, "q4_K_M": 15, "q5_K_S": 16, "q5_K_M": 17,
    "q6_K": 18, "iq4_nl": 25, "iq4_xs": 30, "bf16": 32,
    "q3_K": 11, "q4_K": 14, "q5_K": 16,   # single k-quant types: their _S mix's number
}
MIXES = ["q2_K", "q3_K_S", "q3_K_M", "q3_K_L", "q4_K_S", "q4_K_M", "q5_K_S", "q5_K_M", "q6_K", "q8_0",
         "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "iq4_xs"]

# llama-quantize's substitutes for a row that is not a whole number of 256-element blocks
K_FALLBACK = {"q2_K": "iq4_nl", "q3_K": "iq4_nl", "iq4_xs": "iq4_nl", "q4_K": "q5_0", "q5_K": "q5_1", "q6_K": "q8_0"}


def _canon(name, choices):
    for c in choices:
        if c.lower() == name.lower():
            return c
    raise argparse.ArgumentTypeError("'%s' is not one of %s" % (name, " ".join(choices)))


def _more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def mix_type(mix, role, layer, n_layer, n_gqa, cols):
    """The type llama-quantize's mix `mix` gives a matrix (role: output, token_embd,
    attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down), before the fallback.
    role 'output' covers token_embd.weight of a tied model."""
    base = {"q3_K_S": "q3_K", "q3_K_M": "q3_K", "q3_K_L": "q3_K", "q4_K_S": "q4_K", "q4_K_M": "q4_K",
            "q5_K_S": "q5_K", "q5_K_M": "q5_K"}.get(mix, mix)
    if role == "output":
        if cols % QK_K:
            return "q8_0"
        return base if base == "q8_0" else "q6_K"
    if role == "attn_v":
        if mix == "q2_K":
            return "q4_K" if n_gqa >= 4 else "q3_K"
        if mix == "q3_K_M":
            return "q5_K" if layer < 2 else "q4_K"
        if mix == "q3_K_L":
            return "q5_K"
        if mix in ("iq4_nl", "iq4_xs") and n_gqa >= 4:
            return "q5_K"
        if mix in ("q4_K_M", "q5_K_M") and _more_bits(layer, n_layer):
            return "q6_K"
        if mix == "q4_K_S" and layer < 4:
            return "q5_K"
    if role == "ffn_down":
        if mix == "q2_K":
            return "q3_K"
        if mix == "q3_K_M":
            return "q5_K" if layer < n_layer // 16 else "q4_K"
        if mix == "q3_K_L":
            return "q5_K"
        if mix in ("q4_K_M", "q5_K_M") and _more_bits(layer, n_layer):
            return "q6_K"
        if mix == "q4_K_S" and layer < n_layer // 8:
            return "q5_K"
    if role == "attn_output":
        if mix == "q2_K":
            return "q3_K"
        if mix == "q3_K_M":
            return "q4_K"
        if mix == "q3_K_L":
            return "q5_K"
    return base


def fallback_type(t, cols):
    """llama-quantize's substitute when a row of cols elements is not whole blocks of t."""
    blck = gw.type_info(t)[1]
    if cols % blck == 0:
        return t
    t = K_FALLBACK.get(t, t)
    return t if cols % gw.type_info(t)[1] == 0 else "f16"


# ====================================================================== the model

def llama3_rope_factors(head_dim, theta, factor, low, high, orig_ctx):
    """What llama.cpp's converter writes as rope_freqs.weight for rope_type llama3: per
    frequency pair, the factor its frequency is divided by (1 at high frequencies, `factor`
    at low ones, interpolated between)."""
    freqs = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * np.pi / freqs
    smooth = (orig_ctx / wavelen - low) / (high - low)
    mid = 1.0 / ((1 - smooth) / factor + smooth)
    out = np.where(wavelen < orig_ctx / high, 1.0, np.where(wavelen > orig_ctx / low, factor, mid))
    return out.astype(F32)


def _rng(seed, name):
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _matrix_chunks(seed, name, rows, cols, std, tname, decoded=False, chunk_elems=1 << 22):
    """Producer of the encoded bytes of a random (rows, cols) matrix, a few rows at a time;
    decoded: the f32 bytes of what that encoding decodes to."""
    def produce():
        rng = _rng(seed, name)
        step = max(1, chunk_elems // cols)
        for r in range(0, rows, step):
            n = min(step, rows - r)
            x = rng.standard_normal((n, cols), dtype=F32)
            x *= F32(std)
            q = quantize(tname, x)
            yield quantize("f32", dequantize(tname, q, cols)) if decoded else q
    return produce


def _vector(seed, name, n, mean, std):
    return (mean + std * _rng(seed, name).standard_normal(n)).astype(F32)


TOKEN_UNUSED = 5   # llama.cpp's token types: 1 normal, 2 unknown, 3 control, 5 unused, 6 byte


def placeholder_vocab(n):
    """A SentencePiece-style vocabulary like the shared test models': unk, BOS, EOS,
    the 256 byte tokens, then placeholders."""
    base = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    tokens = base[:n] + ["\u2581p%d" % i for i in range(len(base), n)]
    types = ([2, 3, 3] + [6] * 256)[:n] + [1] * max(0, n - len(base))
    scores = [-float(i) for i in range(n)]
    return {
        "tokenizer.ggml.model": gw.Val(gw.T_STRING, "llama"),
        "tokenizer.ggml.tokens": gw.Val(gw.T_ARRAY, tokens, gw.T_STRING),
        "tokenizer.ggml.scores": gw.Val(gw.T_ARRAY, scores, gw.T_FLOAT32),
        "tokenizer.ggml.token_type": gw.Val(gw.T_ARRAY, types, gw.T_INT32),
        "tokenizer.ggml.bos_token_id": gw.Val(gw.T_UINT32, 1),
        "tokenizer.ggml.eos_token_id": gw.Val(gw.T_UINT32, 2),
        "tokenizer.ggml.unknown_token_id": gw.Val(gw.T_UINT32, 0),
    }


def vocab_from(path, n_model):
    """Every tokenizer.* metadata key of a GGUF, with its type. A vocabulary shorter than
    the model's embedding (Qwen2.5-7B's 152,064 rows for 151,936 tokens) is padded the way
    llama.cpp's converter pads it: unused tokens [PAD<id>]."""
    meta, _, _ = gw.read_gguf(path, load_tensors=False, typed=True)
    tok = {k: v for k, v in meta.items() if k.startswith("tokenizer.")}
    if "tokenizer.ggml.tokens" not in tok:
        raise SystemExit("gen_model: %s has no tokenizer.ggml.tokens" % path)
    n = len(tok["tokenizer.ggml.tokens"].value)
    pad = {"tokenizer.ggml.tokens": ["[PAD%d]" % i for i in range(n, n_model)],
           "tokenizer.ggml.token_type": [TOKEN_UNUSED] * (n_model - n),
           "tokenizer.ggml.scores": [0.0] * (n_model - n)}
    for k, extra in pad.items():
        if k in tok and extra:
            v = tok[k]
            tok[k] = gw.Val(v.vtype, v.value + extra, v.elem)
    return tok


def plan_tensors(p, n_layer, n_vocab):
    """(name, role, layer, rows, cols) of every tensor the runtime reads, in the
    converter's order; role None for the f32 vectors."""
    d, hd = p["n_embd"], p["head_dim"]
    q_dim, kv_dim = p["n_head"] * hd, p["n_head_kv"] * hd
    out = [("token_embd.weight", "output" if p["tied"] else "token_embd", -1, n_vocab, d)]
    if p.get("llama3_rope"):
        out.append(("rope_freqs.weight", None, -1, 1, hd // 2))
    for i in range(n_layer):
        b = "blk.%d." % i
        out += [(b + "attn_norm.weight", None, i, 1, d),
                (b + "attn_q.weight", "attn_q", i, q_dim, d),
                (b + "attn_k.weight", "attn_k", i, kv_dim, d),
                (b + "attn_v.weight", "attn_v", i, kv_dim, d),
                (b + "attn_output.weight", "attn_output", i, d, q_dim)]
        if p["arch"] == "qwen2":
            out += [(b + "attn_q.bias", None, i, 1, q_dim), (b + "attn_k.bias", None, i, 1, kv_dim),
                    (b + "attn_v.bias", None, i, 1, kv_dim)]
        if p["arch"] == "qwen3":
            out += [(b + "attn_q_norm.weight", None, i, 1, hd), (b + "attn_k_norm.weight", None, i, 1, hd)]
        out += [(b + "ffn_norm.weight", None, i, 1, d),
                (b + "ffn_gate.weight", "ffn_gate", i, p["n_ff"], d),
                (b + "ffn_up.weight", "ffn_up", i, p["n_ff"], d),
                (b + "ffn_down.weight", "ffn_down", i, d, p["n_ff"])]
    out.append(("output_norm.weight", None, -1, 1, d))
    if not p["tied"]:
        out.append(("output.weight", "output", -1, n_vocab, d))
    return out


def build(args):
    p = PRESETS[args.preset]
    a = p["arch"]
    n_layer = args.layers or p["n_layer"]
    tok = vocab_from(args.vocab_from, p["n_vocab"]) if args.vocab_from else None
    n_vocab = len(tok["tokenizer.ggml.tokens"].value) if tok else (args.vocab or p["n_vocab"])
    if not tok:
        tok = placeholder_vocab(n_vocab)
    n_gqa = p["n_head"] // p["n_head_kv"]

    def type_of(role, layer, cols):
        want = args.type if args.type else mix_type(args.mix, role, layer, n_layer, n_gqa, cols)
        return want, fallback_type(want, cols)

    w = gw.GGUFWriter(args.out)
    w.add_str("general.architecture", a)
    kind = args.type or args.mix
    w.add_str("general.name", "%s random weights (tools/gen_model.py, seed %d%s)"
              % (args.preset, args.seed, ", %s decoded to f32" % kind if args.dequantized else ""))
    w.add_u32("general.alignment", gw.ALIGNMENT)
    w.add_u32(a + ".context_length", p["ctx"])
    w.add_u32(a + ".embedding_length", p["n_embd"])
    w.add_u32(a + ".block_count", n_layer)
    w.add_u32(a + ".feed_forward_length", p["n_ff"])
    w.add_u32(a + ".attention.head_count", p["n_head"])
    w.add_u32(a + ".attention.head_count_kv", p["n_head_kv"])
    w.add_f32(a + ".attention.layer_norm_rms_epsilon", p["eps"])
    w.add_f32(a + ".rope.freq_base", p["rope_theta"])
    w.add_u32(a + ".attention.key_length", p["head_dim"])
    w.add_u32(a + ".attention.value_length", p["head_dim"])
    w.add_u32(a + ".rope.dimension_count", p["head_dim"])
    w.add_u32(a + ".vocab_size", n_vocab)
    w.add_u32("general.file_type", FTYPE["f32" if args.dequantized else kind])
    if not args.dequantized and kind not in ("f32", "f16", "bf16"):
        w.add_u32("general.quantization_version", 2)
    for k, v in tok.items():
        w.add_val(k, v)

    counts, fallbacks, n_params, n_bytes = {}, {}, 0, 0
    for name, role, layer, rows, cols in plan_tensors(p, n_layer, n_vocab):
        if role is None:   # f32 vectors
            if name == "rope_freqs.weight":
                r = p["llama3_rope"]
                v = llama3_rope_factors(p["head_dim"], p["rope_theta"], r["factor"], r["low"], r["high"], r["orig_ctx"])
            elif name.endswith(".bias"):
                v = _vector(args.seed, name, cols, 0.0, 0.1)
            else:
                v = _vector(args.seed, name, cols, 1.0, 0.05)
            w.add_tensor_f32(name, v)
            t = "f32"
        else:
            want, t = type_of(role, layer, cols)
            if t != want:
                fallbacks[(want, t, cols)] = fallbacks.get((want, t, cols), 0) + 1
            w.add_tensor_raw(name, (cols, rows), "f32" if args.dequantized else t,
                             _matrix_chunks(args.seed, name, rows, cols, cols ** -0.5, t, args.dequantized))
        counts[t] = counts.get(t, 0) + 1
        n_params += rows * cols
        n_bytes += gw.tensor_nbytes((cols, rows), "f32" if args.dequantized else t)
    for (want, t, cols), n in sorted(fallbacks.items()):
        print("gen_model: fallback %s -> %s for %d tensors with rows of %d (not a multiple of %d)"
              % (want, t, n, cols, gw.type_info(want)[1]))
    print("gen_model: %s, %d layers, vocabulary %d, %s%s: %.3f G parameters, %.1f MiB; tensors: %s"
          % (args.preset, n_layer, n_vocab, ("type " + args.type) if args.type else ("mix " + args.mix),
             " decoded to f32" if args.dequantized else "", n_params / 1e9, n_bytes / 2**20,
             ", ".join("%d %s" % (n, t) for t, n in sorted(counts.items()))))
    t0 = time.time()
    w.write()
    print("gen_model: wrote %s in %.1f s" % (args.out, time.time() - t0))


# ====================================================================== self-test

# Relative RMS error bound of a round trip of N(0, 1) data, per type (this quantizer's
# errors are about 3/4 of these, llama.cpp's similar).
ERROR_BOUND = {
    "f32": 0.0, "f16": 5e-4, "bf16": 4e-3, "q8_0": 8e-3, "q6_K": 2.5e-2,
    "q5_0": 6e-2, "q5_1": 5e-2, "q5_K": 5e-2,
    "q4_0": 0.11, "q4_1": 0.1, "q4_K": 0.1, "iq4_nl": 0.1, "iq4_xs": 0.1,
    "q3_K": 0.2, "q2_K": 0.4,
}


def rel_rms(a, ref):
    return float(np.sqrt(np.mean((a - ref) ** 2) / np.mean(ref ** 2)))


def _self_test_roundtrip():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 1024), dtype=F32)
    x[3] = 0                       # an all-zero row: zero scales, no NaN
    x[5, :256] *= 100              # a block far larger than its neighbours
    x[7] = np.abs(x[7])            # a row of one sign (the k-quant minimum is 0)
    ok = True
    for t in ALL_TYPES:
        raw = quantize(t, x)
        want = gw.tensor_nbytes((1024, 64), t)
        y = dequantize(t, raw, 1024)
        err = rel_rms(y, x)
        good = raw.nbytes == want and np.isfinite(y).all() and not y[3].any() and err <= ERROR_BOUND[t]
        print("  %-7s %4d bytes/row  relative RMS error %.5f (bound %.5f)  %s"
              % (t, raw.shape[1], err, ERROR_BOUND[t], "ok" if good else "FAIL"))
        ok &= good
    return ok


def _self_test_dequantized():
    """A --dequantized file holds, bit for bit, the decode of its quantized twin."""
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for kind in (["--mix", "q4_K_M"], ["--type", "iq4_xs"], ["--type", "bf16"]):
            base = ["--preset", "smollm2-135m", "--layers", "1", "--vocab", "300"] + kind
            quant, twin = os.path.join(tmp, "q.gguf"), os.path.join(tmp, "f32.gguf")
            with contextlib.redirect_stdout(io.StringIO()):
                main(base + ["-o", quant])
                main(base + ["--dequantized", "-o", twin])
            q, f = _decode_file(quant), _decode_file(twin)
            types = sorted({t for t, _ in q.values()})
            good = q.keys() == f.keys() and all(
                f[n][0] == "f32" and np.array_equal(f[n][1], y) for n, (_, y) in q.items())
            print("  %s %-7s (%s): %d matrices decoded identically from the f32 twin  %s"
                  % (kind[0], kind[1], " ".join(types), len(q), "ok" if good else "FAIL"))
            ok &= good
    return ok


def _shared_dir():
    return os.environ.get("VKVECTOR_SHARED") or os.path.join(os.path.dirname(REPO), "shared")


def _decode_file(path):
    """Every matrix of a GGUF decoded to f32: name -> (type, array)."""
    _, tensors, info = gw.read_gguf(path)
    out = {}
    for name, (ne, tid, _) in info.items():
        if len(ne) == 2:
            t = gw.type_info(tid)[0]
            out[name] = (t, tensors[name] if t in ("f32", "f16", "bf16") else dequantize(t, tensors[name], ne[0]))
    return out


def _check_file_sane(label, dec):
    """Finite values, and matrices of one role and shape (e.g. attn_v of every layer, stored
    in different types by a mix) at the same scale within a factor 1.5."""
    ok, by_role = True, {}
    for name, (t, y) in dec.items():
        ok &= bool(np.isfinite(y).all())
        by_role.setdefault((name.split(".")[-2], y.shape), []).append(float(y.std()))
    spread = max(max(v) / max(min(v), 1e-30) for v in by_role.values())
    good = ok and spread <= 1.5
    print("    %-36s %s, largest std ratio within a role %.3f  %s"
          % (label, ", ".join(sorted({t for t, _ in dec.values()})), spread, "ok" if good else "FAIL"))
    return good


def _self_test_llama_cpp(shared):
    """Files in ../shared/models with the same tensor shapes were quantized by llama.cpp
    from the same weights: each decode must match the most precise one within its type's
    error, and this quantizer's error on those weights must be close to llama.cpp's."""
    models = os.path.join(shared, "models")
    files = sorted(f for f in os.listdir(models) if f.endswith(".gguf")) if os.path.isdir(models) else []
    if not files:
        print("  skipped: no GGUF files in %s" % models)
        return True
    groups = {}
    for f in files:
        _, _, info = gw.read_gguf(os.path.join(models, f), load_tensors=False)
        groups.setdefault(tuple(sorted((n, ne) for n, (ne, _, _) in info.items())), []).append(f)
    ok = True
    for group in groups.values():
        dec = {f: _decode_file(os.path.join(models, f)) for f in group}
        worst = {f: max(ERROR_BOUND[t] for t, _ in d.values()) for f, d in dec.items()}
        ref = min(group, key=worst.get)
        for f in group:   # trained weights (stories260K) vary in scale by layer: floats skipped
            if any(t not in ("f32", "f16", "bf16") for t, _ in dec[f].values()):
                ok &= _check_file_sane(f, dec[f])
        for f in group:
            if f == ref:
                continue
            by_type = {}
            for name, (t, y) in dec[f].items():
                r = dec[ref][name][1]
                theirs = rel_rms(y, r)
                ours = rel_rms(dequantize(t, quantize(t, r), r.shape[1]), r)
                e = by_type.setdefault(t, [0.0, 0.0])
                e[0], e[1] = max(e[0], theirs), max(e[1], ours)
            for t, (theirs, ours) in sorted(by_type.items()):
                # a wrong layout gives about 1.4 (uncorrelated) or a scale off by a factor
                bound = 1.2 * np.hypot(ERROR_BOUND[t], worst[ref])
                good = theirs <= bound and ours <= 1.25 * theirs
                print("      %-7s llama.cpp's decode vs %s: relative RMS %.4f (bound %.4f); "
                      "this quantizer on the same weights: %.4f  %s"
                      % (t, ref, theirs, bound, ours, "ok" if good else "FAIL"))
                ok &= good
    return ok


def self_test():
    t0 = time.time()
    print("gen_model self-test: round trip of N(0, 1) data, 64 x 1024")
    ok = _self_test_roundtrip()
    print("gen_model self-test: --dequantized files")
    ok &= _self_test_dequantized()
    print("gen_model self-test: llama.cpp's quantized files")
    ok &= _self_test_llama_cpp(_shared_dir())
    print("gen_model self-test: %s in %.1f s" % ("passed" if ok else "FAILED", time.time() - t0))
    return 0 if ok else 1


# ====================================================================== main

def main(argv=None):
    ap = argparse.ArgumentParser(description="Random-weight GGUF models at real model shapes (see the header).")
    ap.add_argument("--preset", choices=sorted(PRESETS), help="the model shape")
    ap.add_argument("-o", "--out", help="output GGUF file")
    ap.add_argument("--layers", type=int, help="number of layers (default: the model's)")
    ap.add_argument("--vocab", type=int, help="vocabulary size (placeholder tokens; default: the model's)")
    ap.add_argument("--vocab-from", metavar="FILE.gguf", help="copy the tokenizer (every tokenizer.* key) from a GGUF; "
                    "the vocabulary size follows it (padded to the model's when shorter)")
    ap.add_argument("--type", type=lambda s: _canon(s, ALL_TYPES), help="every matrix in this type: " + " ".join(ALL_TYPES))
    ap.add_argument("--mix", type=lambda s: _canon(s, MIXES), help="a llama-quantize mix: " + " ".join(MIXES))
    ap.add_argument("--dequantized", action="store_true", help="store every matrix as f32 holding exactly what "
                    "the --type / --mix file's blocks decode to (the same weights)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--list", action="store_true", help="print the presets")
    ap.add_argument("--self-test", action="store_true", help="check the quantizers and dequantizers, then exit")
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test()
    if args.list:
        for k, p in PRESETS.items():
            print("%-13s %-5s embd %5d layers %2d heads %2d/%d head dim %3d ffn %5d vocab %6d%s%s theta %g"
                  % (k, p["arch"], p["n_embd"], p["n_layer"], p["n_head"], p["n_head_kv"], p["head_dim"], p["n_ff"],
                     p["n_vocab"], " tied" if p["tied"] else "", " rope_freqs" if p.get("llama3_rope") else "",
                     p["rope_theta"]))
        return 0
    if not args.preset or not args.out:
        ap.error("--preset and -o are required")
    if args.type and args.mix:
        ap.error("--type and --mix are exclusive")
    if not args.type and not args.mix:
        args.type = "f16"
    if args.vocab is not None and args.vocab_from:
        ap.error("--vocab and --vocab-from are exclusive")
    if args.vocab is not None and args.vocab < 3:
        ap.error("--vocab wants at least 3 tokens")
    if args.layers is not None and args.layers < 1:
        ap.error("--layers wants at least 1")
    build(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
