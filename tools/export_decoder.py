#!/usr/bin/python3
"""Export a GPT-style decoder written in plain PyTorch to ONNX, with a key/value cache.

usage: export_decoder.py OUT.onnx [--layers N] [--d-model N] [--heads N] [--vocab N]
                         [--max-pos N] [--seed N] [--opset N]

The model (issue 29 section 3): pre-LayerNorm blocks, causal self-attention,
a GELU MLP (4 x d_model), learned positions, tied-free LM head.  Defaults:
6 layers, d_model 512, 8 heads, vocabulary 8,000, 1,024 positions.  Weights
are random, from torch.manual_seed(--seed) (no download).

Inputs and outputs, as Hugging Face's decoder exports name them:
  input_ids                 int64 [batch, seq]
  past_key_<i>, past_value_<i>   float [batch, heads, past_seq, head_dim], i = 0..layers-1
  logits                    float [batch, seq, vocab]
  present_key_<i>, present_value_<i>  float [batch, heads, past_seq + seq, head_dim]
batch, seq and past_seq are dynamic, so one model runs the prompt (past_seq
0: empty past tensors) and every generated token (seq 1).  Positions start
at past_seq (read from the past tensors' shape); the causal mask lets query
row r see keys 0 .. past_seq + r.

Run it with Debian's /usr/bin/python3 (python3-torch, python3-onnx).
"""
import argparse
import math
import sys


def build(layers, d_model, heads, vocab, max_pos):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.ln2 = nn.LayerNorm(d_model)
            self.fc = nn.Linear(d_model, 4 * d_model)
            self.out = nn.Linear(4 * d_model, d_model)

        def forward(self, x, past_k, past_v):
            b, t, _ = x.shape
            hd = d_model // heads
            q, k, v = self.qkv(self.ln1(x)).split(d_model, dim=2)
            q = q.reshape(b, t, heads, hd).transpose(1, 2)
            k = torch.cat([past_k, k.reshape(b, t, heads, hd).transpose(1, 2)], dim=2)
            v = torch.cat([past_v, v.reshape(b, t, heads, hd).transpose(1, 2)], dim=2)
            total = k.shape[2]
            att = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(hd))
            # query row r (at position past + r) sees keys 0 .. past + r
            rows = torch.arange(total - t, total).unsqueeze(1)
            cols = torch.arange(total).unsqueeze(0)
            att = att.masked_fill(cols > rows, float('-inf'))
            y = torch.matmul(torch.softmax(att, dim=-1), v)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d_model))
            x = x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))
            return x, k, v

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d_model)
            self.pos = nn.Embedding(max_pos, d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab, bias=False)

        def forward(self, input_ids, *past):
            t = input_ids.shape[1]
            start = past[0].shape[2]
            pos = torch.arange(start, start + t).unsqueeze(0)
            x = self.tok(input_ids) + self.pos(pos)
            presents = []
            for i, blk in enumerate(self.blocks):
                x, k, v = blk(x, past[2 * i], past[2 * i + 1])
                presents += [k, v]
            return (self.head(self.ln(x)), *presents)

    return Decoder().eval()


def io_names(layers):
    past = [f'past_{kv}_{i}' for i in range(layers) for kv in ('key', 'value')]
    present = [f'present_{kv}_{i}' for i in range(layers) for kv in ('key', 'value')]
    return past, present


def export(path, layers=6, d_model=512, heads=8, vocab=8000, max_pos=1024, seed=0, opset=None):
    import torch
    if d_model % heads:
        raise ValueError(f'--d-model {d_model} is not a multiple of --heads {heads}')
    torch.manual_seed(seed)
    model = build(layers, d_model, heads, vocab, max_pos)
    past_names, present_names = io_names(layers)
    # traced at past 3, seq 2 so that no size is 0 or 1 (the tracer would specialize them)
    ids = torch.randint(0, vocab, (2, 2))
    past = tuple(torch.randn(2, heads, 3, d_model // heads) for _ in past_names)
    axes = {'input_ids': {0: 'batch', 1: 'seq'}, 'logits': {0: 'batch', 1: 'seq'}}
    for n in past_names:
        axes[n] = {0: 'batch', 2: 'past_seq'}
    for n in present_names:
        axes[n] = {0: 'batch', 2: 'total_seq'}
    kw = {'opset_version': opset} if opset else {}
    with torch.no_grad():
        torch.onnx.export(model, (ids, *past), path, input_names=['input_ids', *past_names],
                          output_names=['logits', *present_names], dynamic_axes=axes, do_constant_folding=True, **kw)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('out')
    ap.add_argument('--layers', type=int, default=6)
    ap.add_argument('--d-model', type=int, default=512)
    ap.add_argument('--heads', type=int, default=8)
    ap.add_argument('--vocab', type=int, default=8000)
    ap.add_argument('--max-pos', type=int, default=1024)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--opset', type=int)
    a = ap.parse_args(argv)
    for k in ('layers', 'd_model', 'heads', 'vocab', 'max_pos'):
        if getattr(a, k) < 1:
            ap.error(f'--{k.replace("_", "-")} must be >= 1')
    try:
        export(a.out, a.layers, a.d_model, a.heads, a.vocab, a.max_pos, a.seed, a.opset)
    except (ValueError, OSError) as e:
        print(f'export_decoder: {e}', file=sys.stderr)
        return 1
    print(f'{a.out}: decoder, {a.layers} layers, d_model {a.d_model}, {a.heads} heads, vocabulary {a.vocab}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
