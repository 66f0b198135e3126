#!/usr/bin/python3
"""vkvector's own default model: a small Llama trained on tinyshakespeare.

One script does everything, deterministically (fixed seeds, fixed data order):
  1. trains a byte-level BPE vocabulary (GPT-2 style) on the training split,
  2. trains a Llama-architecture model (RMSNorm, GQA, interleaved RoPE, SwiGLU)
     with PyTorch on the CPU,
  3. evaluates it on the held-out split (the last 10% of the text),
  4. exports it to GGUF with models/gguf_writer.py, reads the file back and
     checks that a forward pass built only from the GGUF reproduces the logits,
  5. writes <out>.eval.json (held-out windows, token ids, PyTorch's NLL) for
     the C tests.

Run from the repository root with Debian's interpreter (it has python3-torch):
    /usr/bin/python3 models/train.py --out models/vkvector-shakespeare.gguf
See models/README.md for the recipe's numbers.
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time
import unicodedata


def _threads_from_argv():
    for i, x in enumerate(sys.argv):
        if x == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if x.startswith("--threads="):
            return x.split("=", 1)[1]
    return "1"


# BLAS/OpenMP pools sized before torch loads (idle OpenBLAS threads otherwise spin)
os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads_from_argv())
os.environ.setdefault("OMP_NUM_THREADS", _threads_from_argv())

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_writer as gw  # noqa: E402

BOS_TEXT = "<|endoftext|>"

# =========================================================== tokenizer

def bytes_to_unicode():
    """GPT-2's reversible byte -> printable code point map (encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_ENC = bytes_to_unicode()
BYTE_DEC = {c: b for b, c in BYTE_ENC.items()}

# Character classes of GPT-2's pre-tokenizer regex.  \s is the ASCII white space
# " \t\n\v\f\r" (PCRE's \s) plus, outside ASCII, str.isspace(); \p{L} / \p{N} are the
# Unicode general categories L* / N* (unicodedata).  For ASCII text (all of
# tinyshakespeare) this is exactly the regex's classes.
_L, _N, _S, _O = 0, 1, 2, 3
_ASCII_CLS = []
for _c in range(128):
    _ch = chr(_c)
    if _ch in " \t\n\v\f\r":
        _ASCII_CLS.append(_S)
    elif _ch.isalpha():
        _ASCII_CLS.append(_L)
    elif _ch.isdigit():
        _ASCII_CLS.append(_N)
    else:
        _ASCII_CLS.append(_O)


def _cls(ch):
    o = ord(ch)
    if o < 128:
        return _ASCII_CLS[o]
    cat = unicodedata.category(ch)
    if cat[0] == "L":
        return _L
    if cat[0] == "N":
        return _N
    if ch.isspace():
        return _S
    return _O


_CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")


def pretokenize(text):
    """Splits text exactly as GPT-2's pre-tokenizer regex does (llama.cpp's
    `tokenizer.ggml.pre = "gpt-2"`):
        's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
    Python's `re` has no \\p{..}, so this is a hand-written scanner: the classes
    L, N, whitespace and other are disjoint, so the first character (after an
    optional ' ') decides which alternative matches.  Returns a list of
    (start, end) character offsets."""
    n = len(text)
    cls = [_cls(c) for c in text]
    out = []
    i = 0
    while i < n:
        c = text[i]
        if c == "'":
            hit = None
            for s in _CONTRACTIONS:
                if text.startswith(s, i + 1):
                    hit = s
                    break
            if hit is not None:
                out.append((i, i + 1 + len(hit)))
                i += 1 + len(hit)
                continue
        j = i + 1 if (c == " " and i + 1 < n and cls[i + 1] != _S) else i
        k = cls[j]
        if k != _S:
            # ' ?\p{L}+' | ' ?\p{N}+' | ' ?[^\s\p{L}\p{N}]+'
            e = j + 1
            while e < n and cls[e] == k:
                e += 1
            out.append((i, e))
            i = e
            continue
        # white space run
        e = i + 1
        while e < n and cls[e] == _S:
            e += 1
        if e == n:
            out.append((i, e))          # \s+(?!\S) up to the end
            i = e
        elif e - i >= 2:
            out.append((i, e - 1))      # \s+(?!\S) backs off one
            i = e - 1
        else:
            out.append((i, e))          # \s+ : a lone white space before a non-space
            i = e
    return out


def piece_symbols(piece):
    return [BYTE_ENC[b] for b in piece.encode("utf-8")]


def train_bpe(pieces_count, n_merges):
    """Greedy byte-level BPE: repeatedly merges the most frequent adjacent pair
    (ties: the lexicographically smallest pair), counting pairs inside
    pre-tokenized pieces only.  pieces_count: {piece text: count}.
    Returns the list of merges [(a, b), ...] in rank order."""
    words = []
    counts = []
    for p, c in sorted(pieces_count.items()):
        words.append(piece_symbols(p))
        counts.append(c)
    pair_cnt = {}
    where = {}  # pair -> set of word indices containing it
    for wi, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_cnt[(a, b)] = pair_cnt.get((a, b), 0) + counts[wi]
            where.setdefault((a, b), set()).add(wi)
    merges = []
    for _ in range(n_merges):
        if not pair_cnt:
            break
        best = min(pair_cnt, key=lambda p: (-pair_cnt[p], p))
        if pair_cnt[best] < 2:
            break
        merges.append(best)
        a, b = best
        ab = a + b
        for wi in sorted(where.pop(best, ())):
            w = words[wi]
            c = counts[wi]
            for x, y in zip(w, w[1:]):          # remove this word's old pairs
                pair_cnt[(x, y)] -= c
                if pair_cnt[(x, y)] == 0:
                    del pair_cnt[(x, y)]
            nw = []
            t = 0
            while t < len(w):
                if t + 1 < len(w) and w[t] == a and w[t + 1] == b:
                    nw.append(ab)
                    t += 2
                else:
                    nw.append(w[t])
                    t += 1
            words[wi] = nw
            for x, y in zip(nw, nw[1:]):        # add the new ones
                pair_cnt[(x, y)] = pair_cnt.get((x, y), 0) + c
                where.setdefault((x, y), set()).add(wi)
        pair_cnt.pop(best, None)
    return merges


class Tokenizer:
    """Byte-level BPE encoder with llama.cpp's `gpt2` semantics: pre-tokenize,
    map bytes to GPT-2 code points, merge the lowest-ranked adjacent pair
    (leftmost on ties) until none applies, look the symbols up in the vocabulary."""

    def __init__(self, tokens, merges, bos=None, add_bos=False):
        self.tokens = list(tokens)
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        self.ranks = {tuple(m): r for r, m in enumerate(merges)}
        self.bos, self.add_bos = bos, add_bos
        self.cache = {}

    def encode_piece(self, piece):
        r = self.cache.get(piece)
        if r is not None:
            return r
        syms = piece_symbols(piece)
        while len(syms) > 1:
            best, bi = None, -1
            for t in range(len(syms) - 1):
                rk = self.ranks.get((syms[t], syms[t + 1]))
                if rk is not None and (best is None or rk < best):
                    best, bi = rk, t
            if best is None:
                break
            syms = syms[:bi] + [syms[bi] + syms[bi + 1]] + syms[bi + 2:]
        ids = []
        for s in syms:
            if s in self.ids:
                ids.append(self.ids[s])
            else:  # llama.cpp: unknown symbol -> its bytes one by one
                ids.extend(self.ids[ch] for ch in s)
        self.cache[piece] = ids
        return ids

    def encode(self, text, add_bos=None):
        ids = [self.bos] if (self.add_bos if add_bos is None else add_bos) else []
        for s, e in pretokenize(text):
            ids.extend(self.encode_piece(text[s:e]))
        return ids

    def decode(self, ids):
        b = bytearray()
        for i in ids:
            if i == self.bos:
                continue
            b.extend(BYTE_DEC[ch] for ch in self.tokens[i])
        return b.decode("utf-8", errors="replace")


def build_vocab(train_text, vocab_size):
    """tokens = 256 byte tokens (id = byte value, GPT-2 code point text), then
    one token per merge in rank order, then <|endoftext|> (BOS = EOS, control)."""
    counts = {}
    for s, e in pretokenize(train_text):
        p = train_text[s:e]
        counts[p] = counts.get(p, 0) + 1
    merges = train_bpe(counts, vocab_size - 256 - 1)
    tokens = [BYTE_ENC[b] for b in range(256)] + [a + b for a, b in merges] + [BOS_TEXT]
    types = [1] * (len(tokens) - 1) + [3]
    return tokens, types, merges


def _lenient_vocab(path):
    """The copy of ggml-vocab-gpt-2.gguf in ../shared was passed through a text
    filter: every byte sequence that is not valid UTF-8 became U+FFFD (EF BF BD),
    which breaks the binary counts (50257 = 51 C4 00.. -> 51 EF BF BD 00..) and a
    float.  Strings are intact, so read the two string arrays by walking their
    entries (u64 length + bytes) up to the next metadata key."""
    d = open(path, "rb").read()

    FFFD = b"\xef\xbf\xbd"

    def entry_at(q):                             # a plausible u64 string length at q
        return d[q + 1:q + 8] == bytes(7) or (d[q:q + 3] == FFFD and d[q + 3:q + 10] == bytes(7))

    def is_key(o):                               # the next metadata key starts at o
        n = int.from_bytes(d[o:o + 8], "little")
        return n < 64 and d[o + 8:o + 8 + n].startswith(b"tokenizer.")

    def strings(key):
        o = d.find(key.encode()) + len(key) + 8  # value type 9, element type 8
        o += 10 if d[o + 1:o + 4] == FFFD else 8  # the (mangled) count
        out = []
        while o < len(d) and not is_key(o):
            if d[o:o + 3] == FFFD:               # a length in 128..255, mangled
                o += 2
                for n in range(128, 256):
                    try:
                        d[o + 8:o + 8 + n].decode("utf-8")
                    except UnicodeDecodeError:
                        continue
                    if entry_at(o + 8 + n):
                        break
            else:
                n = int.from_bytes(d[o:o + 8], "little")
            out.append(d[o + 8:o + 8 + n].decode("utf-8"))
            o += 8 + n
        return out
    return strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges")


def check_tokenizer_against_llama_cpp(shared):
    """Encodes llama.cpp's tokenizer test strings with the GPT-2 vocabulary in
    ../shared/vocab and compares with llama.cpp's expected ids: validates the
    pre-tokenizer and the merge loop on a real `gpt2` vocabulary."""
    path = os.path.join(shared, "vocab", "ggml-vocab-gpt-2.gguf")
    if not os.path.exists(path):
        print("tokenizer check: %s missing, skipped" % path)
        return None
    try:
        meta, _, _ = gw.read_gguf(path, load_tensors=False)
        tokens, merges = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.merges"]
    except ValueError:
        tokens, merges = _lenient_vocab(path)
    merges = [tuple(m.split(" ", 1)) for m in merges]
    tok = Tokenizer(tokens, merges)
    with open(path + ".inp", encoding="utf-8") as f:
        cases = f.read().split("\n__ggml_vocab_test__\n")
    with open(path + ".out", encoding="utf-8") as f:
        outs = f.read().split("\n")
    ok = bad = ascii_bad = 0
    for text, exp in zip(cases, outs):
        want = [int(x) for x in exp.split()]
        got = tok.encode(text, add_bos=False)
        if got == want:
            ok += 1
        else:
            bad += 1
            if text.isascii():
                ascii_bad += 1
                print("tokenizer check MISMATCH on ASCII case %r: %s vs %s" % (text, got, want))
    print("tokenizer check vs llama.cpp (gpt-2 vocab): %d/%d cases identical, %d ASCII mismatches" % (ok, ok + bad, ascii_bad))
    return ok, ok + bad, ascii_bad


# =========================================================== model

class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, n_pos, base):
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.arange(n_pos, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def apply_rope(x, cos, sin):
    """llama.cpp's LLAMA_ROPE_TYPE_NORM: rotates interleaved pairs (x[2i], x[2i+1])
    by pos * base^(-2i/head_dim).  x: (B, H, T, hd); cos/sin: (T, hd/2)."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack((y0, y1), dim=-1).flatten(-2)


def attention_ref(q, k, v, cos, sin):
    """Plain causal GQA attention, the textbook way (used to check the GGUF).
    q: (B, T, H, hd), k/v: (B, T, Hkv, hd); query head h uses KV head
    h // (H / Hkv), as llama.cpp does.  Returns (B, T, H * hd)."""
    B, T, H, hd = q.shape
    Hkv = k.shape[2]
    q = apply_rope(q.transpose(1, 2), cos[:T], sin[:T])
    k = apply_rope(k.transpose(1, 2), cos[:T], sin[:T])
    v = v.transpose(1, 2)
    k = k.repeat_interleave(H // Hkv, dim=1)
    v = v.repeat_interleave(H // Hkv, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
    mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
    o = torch.matmul(torch.softmax(s + mask, dim=-1), v)     # (B, H, T, hd)
    return o.transpose(1, 2).reshape(B, T, H * hd)


_MASKS = {}


def _chunk_mask(c0, c1, g):
    """Additive causal mask for queries c0..c1-1 against keys 0..c1-1, repeated
    for the g query heads of a KV head: shape (g * (c1 - c0), c1)."""
    m = _MASKS.get((c0, c1, g))
    if m is None:
        qpos = torch.arange(c0, c1)[:, None]
        kpos = torch.arange(c1)[None, :]
        m = torch.zeros(c1 - c0, c1).masked_fill(kpos > qpos, float("-inf")).repeat(g, 1)
        _MASKS[(c0, c1, g)] = m
    return m


def attention(q, k, v, cos, sin, chunk=128):
    """The same function as attention_ref, computed faster on the CPU: queries in
    chunks of `chunk` rows see only keys up to the chunk's end (skipping most of
    the masked half), the g query heads of a KV head share one batched matmul
    (no K/V copies), and the scale is folded into q."""
    B, T, H, hd = q.shape
    Hkv = k.shape[2]
    g = H // Hkv
    q = apply_rope(q.transpose(1, 2), cos[:T], sin[:T]) * (1.0 / math.sqrt(hd))
    k = apply_rope(k.transpose(1, 2), cos[:T], sin[:T]).reshape(B * Hkv, T, hd)
    v = v.transpose(1, 2).reshape(B * Hkv, T, hd)
    q = q.reshape(B * Hkv, g, T, hd)
    outs = []
    for c0 in range(0, T, chunk):
        c1 = min(T, c0 + chunk)
        qc = q[:, :, c0:c1].reshape(B * Hkv, g * (c1 - c0), hd)
        s = torch.baddbmm(_chunk_mask(c0, c1, g), qc, k[:, :c1].transpose(1, 2))
        oc = torch.bmm(torch.softmax(s, dim=-1), v[:, :c1])
        outs.append(oc.view(B * Hkv, g, c1 - c0, hd))
    o = torch.cat(outs, dim=2).view(B, H, T, hd)
    return o.transpose(1, 2).reshape(B, T, H * hd)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        hd = c["dim"] // c["n_heads"]
        self.c = c
        self.attn_norm = RMSNorm(c["dim"], c["eps"])
        self.wq = nn.Linear(c["dim"], c["n_heads"] * hd, bias=False)
        self.wk = nn.Linear(c["dim"], c["n_kv_heads"] * hd, bias=False)
        self.wv = nn.Linear(c["dim"], c["n_kv_heads"] * hd, bias=False)
        self.wo = nn.Linear(c["n_heads"] * hd, c["dim"], bias=False)
        self.ffn_norm = RMSNorm(c["dim"], c["eps"])
        self.w_gate = nn.Linear(c["dim"], c["ffn"], bias=False)
        self.w_up = nn.Linear(c["dim"], c["ffn"], bias=False)
        self.w_down = nn.Linear(c["ffn"], c["dim"], bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        c = self.c
        hd = c["dim"] // c["n_heads"]
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, c["n_heads"], hd)
        k = self.wk(h).view(B, T, c["n_kv_heads"], hd)
        v = self.wv(h).view(B, T, c["n_kv_heads"], hd)
        x = x + self.wo(attention(q, k, v, cos, sin))
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok_emb = nn.Embedding(c["vocab"], c["dim"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        self.norm = RMSNorm(c["dim"], c["eps"])
        self.out = nn.Linear(c["dim"], c["vocab"], bias=False)
        cos, sin = rope_tables(c["dim"] // c["n_heads"], c["ctx"], c["rope_base"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02
                if name.endswith("wo.weight") or name.endswith("w_down.weight"):
                    std = 0.02 / math.sqrt(2 * c["n_layers"])
                nn.init.normal_(p, 0.0, std)

    def forward(self, ids):
        x = self.tok_emb(ids)
        for b in self.blocks:
            x = b(x, self.cos, self.sin)
        return self.out(self.norm(x))


def n_params(model):
    return sum(p.numel() for p in model.parameters())


# =========================================================== GGUF export

def gguf_tensors(model):
    """name -> numpy array in llama.cpp's naming; a torch Linear weight [out, in]
    is written row-major, i.e. GGUF ne = (in, out).  No Q/K permutation: the
    model was trained with llama.cpp's interleaved RoPE."""
    t = {"token_embd.weight": model.tok_emb.weight}
    for i, b in enumerate(model.blocks):
        p = "blk.%d." % i
        t[p + "attn_norm.weight"] = b.attn_norm.weight
        t[p + "attn_q.weight"] = b.wq.weight
        t[p + "attn_k.weight"] = b.wk.weight
        t[p + "attn_v.weight"] = b.wv.weight
        t[p + "attn_output.weight"] = b.wo.weight
        t[p + "ffn_norm.weight"] = b.ffn_norm.weight
        t[p + "ffn_gate.weight"] = b.w_gate.weight
        t[p + "ffn_up.weight"] = b.w_up.weight
        t[p + "ffn_down.weight"] = b.w_down.weight
    t["output_norm.weight"] = model.norm.weight
    t["output.weight"] = model.out.weight
    return {k: v.detach().cpu().float().numpy() for k, v in t.items()}


def export_gguf(path, model, c, tokens, types, merges, bos, name):
    w = gw.GGUFWriter(path)
    w.add_str("general.architecture", "llama")
    w.add_str("general.name", name)
    w.add_str("general.description", "vkvector's default model: a small Llama trained on tinyshakespeare by models/train.py")
    w.add_str("general.license", "MIT")
    w.add_u32("general.file_type", 0)   # all F32
    w.add_u32("general.alignment", gw.ALIGNMENT)
    w.add_u32("llama.context_length", c["ctx"])
    w.add_u32("llama.embedding_length", c["dim"])
    w.add_u32("llama.block_count", c["n_layers"])
    w.add_u32("llama.feed_forward_length", c["ffn"])
    w.add_u32("llama.attention.head_count", c["n_heads"])
    w.add_u32("llama.attention.head_count_kv", c["n_kv_heads"])
    w.add_f32("llama.rope.freq_base", c["rope_base"])
    w.add_f32("llama.attention.layer_norm_rms_epsilon", c["eps"])
    w.add_u32("llama.rope.dimension_count", c["dim"] // c["n_heads"])
    w.add_u32("llama.vocab_size", c["vocab"])
    w.add_str("tokenizer.ggml.model", "gpt2")
    w.add_str("tokenizer.ggml.pre", "gpt-2")
    w.add_arr("tokenizer.ggml.tokens", gw.T_STRING, tokens)
    w.add_arr("tokenizer.ggml.token_type", gw.T_INT32, types)
    w.add_arr("tokenizer.ggml.merges", gw.T_STRING, ["%s %s" % m for m in merges])
    w.add_u32("tokenizer.ggml.bos_token_id", bos)
    w.add_u32("tokenizer.ggml.eos_token_id", bos)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    for k, v in gguf_tensors(model).items():
        w.add_tensor_f32(k, v)
    w.write()


def forward_from_gguf(path, ids):
    """A functional Llama forward pass using nothing but the GGUF file (its
    metadata and tensors, read back by gguf_writer.read_gguf)."""
    meta, T, _ = gw.read_gguf(path)
    g = lambda k: torch.from_numpy(T[k].copy())  # noqa: E731
    dim = meta["llama.embedding_length"]
    H = meta["llama.attention.head_count"]
    Hkv = meta["llama.attention.head_count_kv"]
    eps = meta["llama.attention.layer_norm_rms_epsilon"]
    hd = meta["llama.rope.dimension_count"]
    assert hd == dim // H
    cos, sin = rope_tables(hd, len(ids), meta["llama.rope.freq_base"])

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    ids = torch.tensor(ids)[None]
    x = g("token_embd.weight")[ids]                     # ne (dim, vocab): rows are tokens
    for i in range(meta["llama.block_count"]):
        p = "blk.%d." % i
        h = rms(x, g(p + "attn_norm.weight"))
        q = (h @ g(p + "attn_q.weight").T).view(1, -1, H, hd)
        k = (h @ g(p + "attn_k.weight").T).view(1, -1, Hkv, hd)
        v = (h @ g(p + "attn_v.weight").T).view(1, -1, Hkv, hd)
        x = x + attention_ref(q, k, v, cos, sin) @ g(p + "attn_output.weight").T
        h = rms(x, g(p + "ffn_norm.weight"))
        x = x + (F.silu(h @ g(p + "ffn_gate.weight").T) * (h @ g(p + "ffn_up.weight").T)) @ g(p + "ffn_down.weight").T
    out = g("output.weight") if "output.weight" in T else g("token_embd.weight")
    return (rms(x, g("output_norm.weight")) @ out.T)[0], meta


# =========================================================== data + eval

def shared_dir():
    env = os.environ.get("VKVECTOR_SHARED")
    if env:
        return env
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(os.path.dirname(root), "shared")


def split_text(text):
    """Held-out = the last 10% of the text, starting at the first line start at
    or after 90% of its characters."""
    cut = text.index("\n", int(0.9 * len(text))) + 1
    return cut


def heldout_windows(text, start, tok, max_tokens):
    """Cuts text[start:] into consecutive spans at pre-token boundaries, each
    tokenizing (with BOS prepended) to at most max_tokens ids.  Returns a list of
    (char_start, char_end, ids)."""
    spans = pretokenize(text[start:])
    wins = []
    cur_s, cur_ids = None, [tok.bos]
    last_e = None
    for s, e in spans:
        pid = tok.encode_piece(text[start + s:start + e])
        if cur_s is None:
            cur_s = start + s
        if len(cur_ids) + len(pid) > max_tokens:
            wins.append((cur_s, last_e, cur_ids))
            cur_s, cur_ids = start + s, [tok.bos]
        cur_ids = cur_ids + pid
        last_e = start + e
    if len(cur_ids) > 1:
        wins.append((cur_s, last_e, cur_ids))
    for s, e, ids in wins:   # a span tokenizes on its own to exactly its ids
        assert tok.encode(text[s:e], add_bos=True) == ids
    return wins


@torch.no_grad()
def window_nll(model, ids):
    """Per-position NLL of predicting ids[p+1] from ids[0..p], p = 0..n-2."""
    x = torch.tensor(ids)[None]
    logits = model(x[:, :-1])[0]
    return F.cross_entropy(logits, x[0, 1:], reduction="none")


# =========================================================== main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="models/vkvector-shakespeare.gguf")
    ap.add_argument("--name", default="vkvector-shakespeare")
    ap.add_argument("--text", default=None, help="default: $VKVECTOR_SHARED or ../shared, data/tinyshakespeare.txt")
    ap.add_argument("--vocab", type=int, default=768)
    ap.add_argument("--dim", type=int, default=192)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--eval-windows", type=int, default=4, help="windows stored in the .eval.json")
    ap.add_argument("--ckpt", default=None, help="also save the torch state dict here")
    ap.add_argument("--bench", type=int, default=0, help="only time this many steps and exit")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    t_start = time.time()
    shared = shared_dir()
    text_path = a.text or os.path.join(shared, "data", "tinyshakespeare.txt")
    raw = open(text_path, "rb").read()
    text = raw.decode("utf-8")
    cut = split_text(text)
    train_text, held_text = text[:cut], text[cut:]
    print("text %s: %d bytes, sha256 %s; train %d chars, held-out from char %d (%d chars)"
          % (text_path, len(raw), hashlib.sha256(raw).hexdigest()[:16], len(train_text), cut, len(held_text)))

    check = check_tokenizer_against_llama_cpp(shared)

    t0 = time.time()
    tokens, types, merges = build_vocab(train_text, a.vocab)
    bos = len(tokens) - 1
    tok = Tokenizer(tokens, merges, bos=bos, add_bos=True)
    train_ids = tok.encode(train_text, add_bos=False)
    held_ids = tok.encode(held_text, add_bos=False)
    assert tok.decode(train_ids) == train_text
    print("BPE: %d tokens (%d merges) in %.1f s; train %d tokens (%.2f chars/token), held-out %d tokens"
          % (len(tokens), len(merges), time.time() - t0, len(train_ids), len(train_text) / len(train_ids), len(held_ids)))
    print("first merges:", merges[:12])

    c = dict(vocab=len(tokens), dim=a.dim, n_layers=a.layers, n_heads=a.heads, n_kv_heads=a.kv_heads,
             ffn=a.ffn, ctx=a.ctx, eps=1e-5, rope_base=10000.0)
    model = Llama(c)
    print("config", c, "params %d" % n_params(model))

    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)

    def lr_at(step):
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        f = (step - a.warmup) / max(1, a.steps - a.warmup)
        return a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * f)))

    train_t = torch.tensor(train_ids, dtype=torch.long)
    data_gen = torch.Generator().manual_seed(a.seed + 1)
    wins = heldout_windows(text, cut, tok, a.ctx)
    full = [w for w in wins if len(w[2]) >= a.ctx - 8]
    pick = [full[round(i * (len(full) - 1) / max(1, a.eval_windows - 1))] for i in range(a.eval_windows)]
    print("held-out: %d windows (%d full)" % (len(wins), len(full)))

    curve = []
    steps = a.bench or a.steps
    t_train = time.time()
    model.train()
    for step in range(steps):
        starts = torch.randint(0, len(train_t) - a.ctx, (a.batch,), generator=data_gen)
        chunk = torch.stack([train_t[s:s + a.ctx] for s in starts.tolist()])
        inp = torch.cat([torch.full((a.batch, 1), bos, dtype=torch.long), chunk[:, :-1]], dim=1)
        for gr in opt.param_groups:
            gr["lr"] = lr_at(step)
        logits = model(inp)
        loss = F.cross_entropy(logits.reshape(-1, c["vocab"]), chunk.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        el = time.time() - t_train
        last = step == steps - 1
        if step % 10 == 0 or last:
            print("step %4d loss %.4f gnorm %.2f lr %.2e  %.1f s (%.2f s/step)"
                  % (step, loss.item(), gnorm.item(), lr_at(step), el, el / (step + 1)), flush=True)
        if a.bench:
            continue
        if step % a.eval_every == 0 or last:
            model.eval()
            vl = torch.cat([window_nll(model, w[2]) for w in pick]).mean().item()
            model.train()
            curve.append({"step": step, "train_loss": round(loss.item(), 4), "heldout_loss_4win": round(vl, 4),
                          "elapsed_s": round(el, 1)})
            print("  eval step %d: held-out (%d windows) loss %.4f ppl %.2f" % (step, len(pick), vl, math.exp(vl)), flush=True)
    train_wall = time.time() - t_train
    if a.bench:
        print("bench: %.2f s/step" % (train_wall / steps))
        return
    print("training wall time %.1f s (%.1f min), %d threads" % (train_wall, train_wall / 60, a.threads))
    if a.ckpt:
        torch.save(model.state_dict(), a.ckpt)

    # ---- held-out evaluation: every window of the held-out split at context ctx
    model.eval()
    tot, ntok = 0.0, 0
    pos_sum = torch.zeros(a.ctx - 1, dtype=torch.float64)
    pos_cnt = torch.zeros(a.ctx - 1, dtype=torch.float64)
    per_win = {}
    for s, e, ids in wins:
        nll = window_nll(model, ids).double()
        tot += nll.sum().item()
        ntok += nll.numel()
        pos_sum[:nll.numel()] += nll
        pos_cnt[:nll.numel()] += 1
        per_win[s] = nll.mean().item()
    held_nll = tot / ntok
    pos_mean = (pos_sum / pos_cnt.clamp(min=1))

    def band(lo, hi):
        return (pos_sum[lo:hi].sum() / pos_cnt[lo:hi].sum()).item()
    bands = [(0, 64), (64, 128), (128, 256), (256, 512), (512, a.ctx - 1)]
    band_vals = {"%d-%d" % (lo, hi): round(band(lo, hi), 4) for lo, hi in bands}
    print("held-out: %d tokens in %d windows, mean NLL %.4f, ppl %.3f" % (ntok, len(wins), held_nll, math.exp(held_nll)))
    print("per-position mean NLL:", band_vals)

    # ---- export + verification
    export_gguf(a.out, model, c, tokens, types, merges, bos, a.name)
    meta, T, info = gw.read_gguf(a.out)
    assert meta["tokenizer.ggml.tokens"] == tokens and meta["tokenizer.ggml.merges"] == ["%s %s" % m for m in merges]
    for k, v in gguf_tensors(model).items():
        assert np.array_equal(T[k], v), k
    ids = pick[0][2]
    with torch.no_grad():
        ref = model(torch.tensor(ids)[None])[0]
    got, _ = forward_from_gguf(a.out, ids)
    diff = (ref - got).abs().max().item()
    print("GGUF %s: %d bytes, %d tensors; forward from the GGUF vs trained model: max |logit diff| %.3g"
          % (a.out, os.path.getsize(a.out), len(T), diff))
    assert diff < 1e-3
    gtok = Tokenizer(meta["tokenizer.ggml.tokens"], [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]],
                     bos=meta["tokenizer.ggml.bos_token_id"], add_bos=meta["tokenizer.ggml.add_bos_token"])
    assert gtok.encode(held_text[:20000]) == [bos] + tok.encode(held_text[:20000], add_bos=False)

    # ---- sample (greedy) for the log
    with torch.no_grad():
        x = torch.tensor(tok.encode("ROMEO:\n"))[None]
        for _ in range(60):
            x = torch.cat([x, model(x)[:, -1].argmax(-1, keepdim=True)], dim=1)
    sample = tok.decode(x[0].tolist())
    print("greedy sample:\n" + sample)

    # ---- eval json
    ej = {
        "model": os.path.basename(a.out),
        "text": "data/tinyshakespeare.txt",
        "text_bytes": len(raw),
        "text_sha256": hashlib.sha256(raw).hexdigest(),
        "heldout_start_byte": len(text[:cut].encode("utf-8")),
        "protocol": ("Each window: ids = [BOS] + tokenize(text[byte_start:byte_end]) (the GGUF's own gpt2 "
                     "tokenizer, add_bos_token true). mean_nll = mean over p = 0..len(ids)-2 of "
                     "-log softmax(logits(ids[0..p]))[ids[p+1]], natural log, one sequence from position 0, "
                     "f32 weights, PyTorch on the CPU."),
        "bos_token_id": bos,
        "context": a.ctx,
        "windows": [{"byte_start": len(text[:s].encode("utf-8")), "byte_end": len(text[:e].encode("utf-8")),
                     "n_ids": len(ids), "mean_nll": round(per_win[s], 6), "ppl": round(math.exp(per_win[s]), 5),
                     "ids": ids} for s, e, ids in pick],
        "windows_mean_nll": round(sum(per_win[s] for s, _, _ in pick) / len(pick), 6),
        "heldout": {"n_windows": len(wins), "n_predicted_tokens": ntok, "mean_nll": round(held_nll, 6),
                    "ppl": round(math.exp(held_nll), 5)},
        "per_position_mean_nll": band_vals,
        "per_position_mean_nll_by_64": [round(pos_mean[i:i + 64].mean().item(), 4) for i in range(0, a.ctx - 1, 64)],
        "train": {"params": n_params(model), "config": c, "steps": a.steps, "batch": a.batch, "lr": a.lr,
                  "seed": a.seed, "threads": a.threads, "wall_s": round(train_wall, 1), "curve": curve,
                  "final_train_loss": round(loss.item(), 4), "torch": torch.__version__,
                  "total_wall_s_incl_eval_export": round(time.time() - t_start, 1)},
        "tokenizer_check_vs_llama_cpp_gpt2": list(check) if check else None,
        "gguf_forward_max_abs_logit_diff": diff,
        "greedy_sample": sample,
    }
    ep = os.path.splitext(a.out)[0] + ".eval.json"
    js = json.dumps(ej, indent=1)
    for w in ej["windows"]:   # keep each id list on one line
        js = js.replace(json.dumps(w["ids"], indent=1).replace("\n", "\n   "), json.dumps(w["ids"]), 1)
    with open(ep, "w") as f:
        f.write(js + "\n")
    assert json.loads(js) == json.loads(json.dumps(ej))
    print("wrote %s (%d bytes); total wall %.1f s" % (ep, os.path.getsize(ep), time.time() - t_start))


if __name__ == "__main__":
    main()
