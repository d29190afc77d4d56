#!/usr/bin/python3
"""Models exported with dynamic_axes (issue 26 section 1) and their inputs.

usage: make_dynamic_axes.py OUT_DIR [--only NAME,...]

Writes OUT_DIR/NAME.onnx and, per size set, OUT_DIR/NAME.in/SIZES/<input>.npy
(seeded random), one line per size set on stdout: "NAME SIZES".  The sizes
differ in the batch (1 and 3) and in a second symbolic dimension (sequence
length, or height and width), so a tool that binds the symbolic dimensions
from the inputs runs all of them, and one that binds them to 1 refuses them:
  pad      F.pad(x.unsqueeze(1), (64, 64), mode='reflect') * 2 of [batch, sequence]
           (a speech front end: reflect pads must be smaller than the size)
  resnet18 torchvision ResNet-18 of [batch, 3, h, w]
  encoder  torch.nn.TransformerEncoder (2 layers, d_model 64) of [batch, sequence, 64]
  ops      one node of each operator whose shape check refuses the placeholder 1
           (docs/decisions.md, "Binding symbolic dimensions"), built with
           onnx.helper: a [batch, 3, h, w] -> Conv 3x3 and MaxPool 3x3 without
           padding -> DepthToSpace 2 -> Resize back to [batch, 2, h, w] (sizes
           computed with Shape, Slice, Concat); b [batch, length] -> Gather of
           column 5, Split in two equal halves, Reshape to the literal [-1, 4]
Opset 15, as the issue's reproducers; seeded weights, nothing downloaded.
Run it with Debian's /usr/bin/python3 (python3-torch, python3-torchvision).
"""
import argparse
import inspect
import os

import numpy as np
import torch
import torch.nn.functional as F


class Pad(torch.nn.Module):
    def forward(self, x):
        return F.pad(x.unsqueeze(1), (64, 64), mode='reflect').squeeze(1) * 2.0


def encoder():
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
    try:
        return torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    except TypeError:  # older torch
        return torch.nn.TransformerEncoder(layer, num_layers=2)


def resnet18():
    import torchvision
    m = torchvision.models.resnet18(weights=None)
    # batch-norm statistics from random batches: the defaults (mean 0,
    # variance 1) shrink a random net's activations layer by layer
    for b in m.modules():
        if isinstance(b, torch.nn.BatchNorm2d):
            b.reset_running_stats()
            b.momentum = None
    m.train()
    with torch.no_grad():
        m(torch.randn(4, 3, 96, 128))
    return m


def ops_model(path):
    """The 'ops' model (onnx.helper, opset 15, seeded weights)."""
    import onnx
    from onnx import TensorProto as TP, helper, numpy_helper
    rng = np.random.default_rng(1)
    init = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), 'w'),
            numpy_helper.from_array(np.array([5], np.int64), 'col'),
            numpy_helper.from_array(np.array([-1, 4], np.int64), 'shape')] + \
        [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (('zero', 0), ('two', 2), ('four', 4))]
    nodes = [helper.make_node('Conv', ['a', 'w'], ['c'], kernel_shape=[3, 3]),
             helper.make_node('MaxPool', ['c'], ['p'], kernel_shape=[3, 3]),
             helper.make_node('DepthToSpace', ['p'], ['d2s'], blocksize=2),
             helper.make_node('Gather', ['b', 'col'], ['g'], axis=1),
             helper.make_node('Split', ['b'], ['h0', 'h1'], axis=1),
             helper.make_node('Sub', ['h0', 'h1'], ['halves']),
             helper.make_node('Reshape', ['b', 'shape'], ['rows']),
             # upsampling back to the input's size: sizes computed from Shape
             helper.make_node('Shape', ['a'], ['sa']),
             helper.make_node('Shape', ['d2s'], ['sd']),
             helper.make_node('Slice', ['sa', 'two', 'four'], ['hw']),
             helper.make_node('Slice', ['sd', 'zero', 'two'], ['nc']),
             helper.make_node('Concat', ['nc', 'hw'], ['sizes'], axis=0),
             helper.make_node('Resize', ['d2s', '', '', 'sizes'], ['up'], mode='nearest')]
    g = helper.make_graph(nodes, 'ops', [helper.make_tensor_value_info('a', TP.FLOAT, ['batch', 3, 'h', 'w']),
                                         helper.make_tensor_value_info('b', TP.FLOAT, ['batch', 'length'])],
                          [helper.make_tensor_value_info(n, TP.FLOAT, [None] * r)
                           for n, r in (('d2s', 4), ('g', 2), ('halves', 2), ('rows', 2), ('up', 4))],
                          init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 15)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


# name: (constructor, example input, dynamic axes of 'input', size sets); the
# ops model's size sets are (batch, h, w, length)
MODELS = {
    'pad': (Pad, (1, 512), {0: 'batch', 1: 'sequence'}, [(1, 512), (3, 512), (1, 300), (3, 300)]),
    'resnet18': (resnet18, (1, 3, 160, 192), {0: 'batch', 2: 'h', 3: 'w'},
                 [(1, 3, 160, 192), (3, 3, 160, 192), (1, 3, 96, 128), (3, 3, 96, 128)]),
    'encoder': (encoder, (1, 16, 64), {0: 'batch', 1: 'sequence'},
                [(1, 16, 64), (3, 16, 64), (1, 7, 64), (3, 7, 64)]),
    'ops': (None, None, None, [(1, 8, 8, 8), (3, 8, 8, 8), (1, 12, 10, 12), (3, 12, 10, 12)]),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('out')
    ap.add_argument('--only', default=','.join(MODELS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.only.split(','):
        ctor, example, axes, sizes = MODELS[name]
        if name == 'ops':
            ops_model(os.path.join(a.out, 'ops.onnx'))
            rng = np.random.default_rng(0)
            for n, h, w, length in sizes:
                tag = f'{n}x{h}x{w}x{length}'
                d = os.path.join(a.out, 'ops.in', tag)
                os.makedirs(d, exist_ok=True)
                np.save(os.path.join(d, 'a.npy'), rng.standard_normal((n, 3, h, w)).astype(np.float32))
                np.save(os.path.join(d, 'b.npy'), rng.standard_normal((n, length)).astype(np.float32))
                print(name, tag)
            continue
        torch.manual_seed(0)
        model = ctor().eval()
        kw = dict(input_names=['input'], output_names=['output'], dynamic_axes={'input': axes},
                  opset_version=15, do_constant_folding=True)
        if 'dynamo' in inspect.signature(torch.onnx.export).parameters:
            kw['dynamo'] = False
        # not under no_grad: the TransformerEncoderLayer fast path has no export
        torch.onnx.export(model, (torch.randn(*example),), os.path.join(a.out, name + '.onnx'), **kw)
        rng = np.random.default_rng(0)
        for s in sizes:
            tag = 'x'.join(map(str, s))
            d = os.path.join(a.out, name + '.in', tag)
            os.makedirs(d, exist_ok=True)
            np.save(os.path.join(d, 'input.npy'), rng.standard_normal(s).astype(np.float32))
            print(name, tag)


if __name__ == '__main__':
    main()
