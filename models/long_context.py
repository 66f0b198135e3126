#!/usr/bin/python3
"""Does the model use long context?  Per-position held-out loss, content-balanced,
computed from the GGUF alone.

train.py's per-position bands use the fixed held-out windows, so each band sees
different text and the difference between bands mixes "more context" with "other
text".  Here every held-out token is scored at many positions instead:

  1. sliding windows: [BOS] + 1023 held-out tokens starting at every multiple
     of --stride in the tokenized held-out split; the mean NLL per position band
     is then over (nearly) the same text for every band;
  2. context ablation: the last --tail tokens of each window are scored once with
     their full context (>= 1024 - tail tokens) and once with only the
     --short tokens before them ([BOS] + short - 1 tokens), i.e. the same
     predictions with less context.

Run from the repository root:
    /usr/bin/python3 models/long_context.py models/vkvector-shakespeare.gguf
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402  (sets the BLAS thread pools before torch loads)
import gguf_writer as gw  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def model_from_gguf(path):
    meta, T, _ = gw.read_gguf(path)
    c = dict(vocab=meta["llama.vocab_size"], dim=meta["llama.embedding_length"], n_layers=meta["llama.block_count"],
             n_heads=meta["llama.attention.head_count"], n_kv_heads=meta["llama.attention.head_count_kv"],
             ffn=meta["llama.feed_forward_length"], ctx=meta["llama.context_length"],
             eps=meta["llama.attention.layer_norm_rms_epsilon"], rope_base=meta["llama.rope.freq_base"])
    m = train.Llama(c)
    # map the GGUF names onto the module's parameters (inverse of train.gguf_tensors)
    names = {"token_embd.weight": m.tok_emb.weight, "output_norm.weight": m.norm.weight, "output.weight": m.out.weight}
    for i, b in enumerate(m.blocks):
        p = "blk.%d." % i
        names.update({p + "attn_norm.weight": b.attn_norm.weight, p + "attn_q.weight": b.wq.weight,
                      p + "attn_k.weight": b.wk.weight, p + "attn_v.weight": b.wv.weight,
                      p + "attn_output.weight": b.wo.weight, p + "ffn_norm.weight": b.ffn_norm.weight,
                      p + "ffn_gate.weight": b.w_gate.weight, p + "ffn_up.weight": b.w_up.weight,
                      p + "ffn_down.weight": b.w_down.weight})
    assert set(names) == set(T), set(names) ^ set(T)
    with torch.no_grad():
        for k, p in names.items():
            p.copy_(torch.from_numpy(T[k].copy()))
    m.eval()
    return m, meta, c


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf", nargs="?", default="models/vkvector-shakespeare.gguf")
    ap.add_argument("--text", default=None)
    ap.add_argument("--stride", type=int, default=64)
    ap.add_argument("--tail", type=int, default=64)
    ap.add_argument("--short", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write the numbers here")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    m, meta, c = model_from_gguf(a.gguf)
    tok = train.Tokenizer(meta["tokenizer.ggml.tokens"], [tuple(x.split(" ", 1)) for x in meta["tokenizer.ggml.merges"]],
                          bos=meta["tokenizer.ggml.bos_token_id"], add_bos=True)
    text = open(a.text or os.path.join(train.shared_dir(), "data", "tinyshakespeare.txt"), encoding="utf-8").read()
    cut = train.split_text(text)
    held = tok.encode(text[cut:], add_bos=False)
    n = c["ctx"] - 1
    starts = list(range(0, len(held) - n + 1, a.stride))
    print("held-out: %d tokens; %d sliding windows of [BOS] + %d tokens, stride %d" % (len(held), len(starts), n, a.stride))

    # sanity: the module built from the GGUF = the textbook forward from the GGUF
    ids0 = [tok.bos] + held[:n]
    with torch.no_grad():
        d = (m(torch.tensor(ids0)[None])[0] - train.forward_from_gguf(a.gguf, ids0)[0]).abs().max().item()
    assert d < 1e-3, d

    pos_sum = torch.zeros(n, dtype=torch.float64)
    full_tail, short_tail = 0.0, 0.0
    ntail = 0
    with torch.no_grad():
        for bi in range(0, len(starts), a.batch):
            ss = starts[bi:bi + a.batch]
            x = torch.tensor([[tok.bos] + held[s:s + n] for s in ss])
            nll = F.cross_entropy(m(x[:, :-1]).transpose(1, 2), x[:, 1:], reduction="none").double()  # (B, n)
            pos_sum += nll.sum(0)
            full_tail += nll[:, -a.tail:].sum().item()
            # the same last `tail` predictions with only `short` tokens of context
            k = a.short - 1
            xs = torch.cat([torch.full((len(ss), 1), tok.bos), x[:, -(a.tail + k):]], dim=1)
            ns = F.cross_entropy(m(xs[:, :-1]).transpose(1, 2)[:, :, -a.tail:], xs[:, -a.tail:], reduction="none")
            short_tail += ns.double().sum().item()
            ntail += a.tail * len(ss)
            if bi % (a.batch * 10) == 0:
                print("  %d/%d windows" % (bi + len(ss), len(starts)), flush=True)
    pos = pos_sum / len(starts)

    def band(lo, hi):
        return pos[lo:hi].mean().item()
    bands = [(0, 1), (0, 16), (0, 64), (64, 128), (128, 256), (256, 512), (512, n)]
    res = {
        "gguf": os.path.basename(a.gguf), "stride": a.stride, "n_windows": len(starts),
        "bands": {"%d-%d" % (lo, hi): round(band(lo, hi), 4) for lo, hi in bands},
        "by_64": [round(pos[i:i + 64].mean().item(), 4) for i in range(0, n, 64)],
        "ablation": {"tail": a.tail, "full_context_nll": round(full_tail / ntail, 4),
                     "context_%d_nll" % a.short: round(short_tail / ntail, 4)},
    }
    print("per-position mean NLL (position p = input position, predicting token p+1):")
    for k, v in res["bands"].items():
        print("  %-9s %.4f  (ppl %.2f)" % (k, v, math.exp(v)))
    print("by 64:", res["by_64"])
    print("last %d predictions of each window: full context %.4f, only %d tokens of context %.4f"
          % (a.tail, res["ablation"]["full_context_nll"], a.short, res["ablation"]["context_%d_nll" % a.short]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
