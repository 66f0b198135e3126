#!/usr/bin/python3
"""Writes a GGUF model (f32, f16 and bf16 tensors) as a Hugging Face checkpoint folder, the
inverse of a GGUF converter, so tests can load the same weights in both formats
(docs/ARCHITECTURE.md §1, "Hugging Face checkpoints"):

    /usr/bin/python3 tools/gguf_to_hf.py models/vkvector-shakespeare.gguf -o /tmp/shakespeare-hf
    /usr/bin/python3 tools/gguf_to_hf.py small.gguf -o /tmp/small-hf --shards 2
    /usr/bin/python3 tools/gguf_to_hf.py llama.gguf -o /tmp/l-hf --llama3-rope 32,1,4,8192 --gguf-twin /tmp/l.gguf

The folder holds config.json, generation_config.json and the weights as safetensors
(model.safetensors, or --shards N files named by model.safetensors.index.json), each tensor in
its GGUF type (--dtype f32 or bf16 converts all; bf16 only when every value is a bf16 exactly).
llama's Q and K rows go back to the rotate-half layout a checkpoint stores (a GGUF holds them
permuted for the interleaved rotation). A GGUF of the "gpt2" tokenizer model (the default
model's byte-level BPE) also gives tokenizer.json and tokenizer_config.json.

A llama GGUF with rope_freqs.weight (tools/gen_model.py's Llama 3.1 / 3.2 shapes) needs
--llama3-rope FACTOR,LOW,HIGH,ORIGINAL_CTX: config.json then says rope_scaling llama3, and
--gguf-twin writes the GGUF again with those four as metadata in place of rope_freqs.weight, so
both formats take their rope factors from the runtime's own computation.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import gguf_writer as gw  # noqa: E402

ARCH = {"llama": ("LlamaForCausalLM", "llama"), "qwen2": ("Qwen2ForCausalLM", "qwen2"),
        "qwen3": ("Qwen3ForCausalLM", "qwen3")}
BLOCK = {"attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
         "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
         "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
         "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
         "attn_v.bias": "self_attn.v_proj.bias", "attn_q_norm.weight": "self_attn.q_norm.weight",
         "attn_k_norm.weight": "self_attn.k_norm.weight", "ffn_gate.weight": "mlp.gate_proj.weight",
         "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight"}
TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
       "output.weight": "lm_head.weight"}


def hf_name(name):
    if name in TOP:
        return TOP[name]
    parts = name.split(".", 2)  # blk, N, rest
    if parts[0] == "blk" and parts[2] in BLOCK:
        return "model.layers.%s.%s" % (parts[1], BLOCK[parts[2]])
    return None


def unpermute(w, n_head):
    """GGUF row h*hd + 2i + j back to the checkpoint's h*hd + j*hd/2 + i."""
    rows = w.shape[0]
    hd = rows // n_head
    return w.reshape(n_head, hd // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def to_bf16_bits(a):
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    if np.any(bits & 0xFFFF):
        raise SystemExit("gguf_to_hf: a value is not a bf16 exactly; use --dtype f32")
    return (bits >> 16).astype("<u2")


def encode(a, dtype):
    """(safetensors dtype, bytes) of a float32 array."""
    if dtype == "F32":
        return "F32", np.ascontiguousarray(a, dtype="<f4").tobytes()
    if dtype == "F16":
        return "F16", np.ascontiguousarray(a, dtype="<f2").tobytes()
    return "BF16", to_bf16_bits(a).tobytes()


def write_safetensors(path, items):
    """items: [(name, dtype, shape, bytes)] in file order."""
    header, off = {}, 0
    for name, dtype, shape, data in items:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # the data section starts 8-aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, data in items:
            f.write(data)


def write_tokenizer(meta, out):
    tokens = meta["tokenizer.ggml.tokens"]
    types = meta.get("tokenizer.ggml.token_type", [1] * len(tokens))
    merges = meta.get("tokenizer.ggml.merges", [])
    bos = meta.get("tokenizer.ggml.bos_token_id")
    eos = meta.get("tokenizer.ggml.eos_token_id")
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in enumerate(tokens) if types[i] == 3]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": {t: i for i, t in enumerate(tokens)}, "merges": list(merges)}}
    add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", False)) and bos is not None
    if add_bos:
        b = tokens[bos]
        tok["post_processor"] = {"type": "TemplateProcessing",
                                 "single": [{"SpecialToken": {"id": b, "type_id": 0}},
                                            {"Sequence": {"id": "A", "type_id": 0}}],
                                 "pair": [{"SpecialToken": {"id": b, "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}},
                                          {"Sequence": {"id": "B", "type_id": 1}}],
                                 "special_tokens": {b: {"id": b, "ids": [bos], "tokens": [b]}}}
    else:
        tok["post_processor"] = None
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": add_bos, "add_eos_token": False}
    if bos is not None:
        cfg["bos_token"] = tokens[bos]
    if eos is not None:
        cfg["eos_token"] = tokens[eos]
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser(description="A GGUF model as a Hugging Face checkpoint folder (see the header).")
    ap.add_argument("gguf")
    ap.add_argument("-o", "--out", required=True, help="the folder to write (created)")
    ap.add_argument("--dtype", choices=["keep", "f32", "f16", "bf16"], default="keep")
    ap.add_argument("--shards", type=int, default=1, help="safetensors files (more than 1: an index)")
    ap.add_argument("--llama3-rope", help="FACTOR,LOW,HIGH,ORIGINAL_CTX in place of rope_freqs.weight")
    ap.add_argument("--gguf-twin", help="the GGUF again, with --llama3-rope as metadata")
    a = ap.parse_args()

    meta, tensors, info = gw.read_gguf(a.gguf)
    arch = meta["general.architecture"]
    if arch not in ARCH:
        raise SystemExit("gguf_to_hf: architecture %r is not one of %s" % (arch, " ".join(ARCH)))
    k = lambda s, d=None: meta.get("%s.%s" % (arch, s), d)  # noqa: E731
    n_head, n_kv = k("attention.head_count"), k("attention.head_count_kv", k("attention.head_count"))
    n_embd = k("embedding_length")
    emb = tensors["token_embd.weight"]  # [n_vocab, n_embd]
    rope = None
    if "rope_freqs.weight" in tensors:
        if not a.llama3_rope:
            raise SystemExit("gguf_to_hf: the GGUF holds rope_freqs.weight: give --llama3-rope")
        f, lo, hi, orig = a.llama3_rope.split(",")
        rope = dict(factor=float(f), low=float(lo), high=float(hi), orig=int(orig))

    os.makedirs(a.out, exist_ok=True)
    gtype = {gw.GGML_TYPE_F32: "F32", gw.GGML_TYPE_F16: "F16", gw.GGML_TYPE_BF16: "BF16"}
    items = []
    for name, arr in tensors.items():
        if name == "rope_freqs.weight":
            continue
        hn = hf_name(name)
        if hn is None or info[name][1] not in gtype:
            raise SystemExit("gguf_to_hf: cannot write tensor %s (type %d)" % (name, info[name][1]))
        if arch == "llama" and (".attn_q." in name or ".attn_k." in name):
            arr = unpermute(arr, n_head if ".attn_q." in name else n_kv)
        dtype = gtype[info[name][1]] if a.dtype == "keep" else a.dtype.upper()
        dt, data = encode(arr, dtype)
        items.append((hn, dt, arr.shape, data))
    if a.shards <= 1:
        write_safetensors(os.path.join(a.out, "model.safetensors"), items)
    else:
        weight_map = {}
        per = -(-len(items) // a.shards)
        for s in range(a.shards):
            fname = "model-%05d-of-%05d.safetensors" % (s + 1, a.shards)
            part = items[s * per:(s + 1) * per]
            write_safetensors(os.path.join(a.out, fname), part)
            weight_map.update({it[0]: fname for it in part})
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(len(it[3]) for it in items)}, "weight_map": weight_map}, f,
                      indent=1)

    cls, mtype = ARCH[arch]
    n_vocab = emb.shape[0]
    cfg = {"architectures": [cls], "model_type": mtype, "hidden_size": n_embd,
           "intermediate_size": k("feed_forward_length"), "num_hidden_layers": k("block_count"),
           "num_attention_heads": n_head, "num_key_value_heads": n_kv,
           "head_dim": k("attention.key_length", n_embd // n_head),
           "max_position_embeddings": k("context_length", 2048), "vocab_size": n_vocab,
           "rms_norm_eps": k("attention.layer_norm_rms_epsilon", 1e-5), "rope_theta": k("rope.freq_base", 10000.0),
           "tie_word_embeddings": "output.weight" not in tensors, "attention_bias": "blk.0.attn_q.bias" in tensors,
           "torch_dtype": "float32" if a.dtype in ("keep", "f32") else {"f16": "float16", "bf16": "bfloat16"}[a.dtype],
           "rope_scaling": None if rope is None else {
               "rope_type": "llama3", "factor": rope["factor"], "low_freq_factor": rope["low"],
               "high_freq_factor": rope["high"], "original_max_position_embeddings": rope["orig"]}}
    bos = meta.get("tokenizer.ggml.bos_token_id")
    eos = meta.get("tokenizer.ggml.eos_token_id")
    if bos is not None:
        cfg["bos_token_id"] = bos
    if eos is not None:
        cfg["eos_token_id"] = eos
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos}, f, indent=1)
    if meta.get("tokenizer.ggml.model") == "gpt2" and "tokenizer.ggml.merges" in meta:
        write_tokenizer(meta, a.out)

    if a.gguf_twin:
        if rope is None:
            raise SystemExit("gguf_to_hf: --gguf-twin rewrites rope_freqs.weight: give --llama3-rope")
        tmeta = gw.read_gguf(a.gguf, load_tensors=False, typed=True)[0]
        w = gw.GGUFWriter(a.gguf_twin)
        for key, val in tmeta.items():
            if key != "general.alignment":
                w.add_val(key, val)
        w.add_str(arch + ".rope.scaling.type", "llama3")
        w.add_f32(arch + ".rope.scaling.factor", rope["factor"])
        w.add_f32(arch + ".rope.scaling.low_freq_factor", rope["low"])
        w.add_f32(arch + ".rope.scaling.high_freq_factor", rope["high"])
        w.add_u32(arch + ".rope.scaling.original_context_length", rope["orig"])
        with open(a.gguf, "rb") as f:
            raw = f.read()
        for name, (ne, t, start) in info.items():
            if name != "rope_freqs.weight":
                w.add_tensor_raw(name, ne, t, raw[start:start + gw.tensor_nbytes(ne, t)])
        w.write()


if __name__ == "__main__":
    main()
