#!/usr/bin/env python3
"""A model whose weights pass protobuf's 2 GiB limit, in ONNX external data
(issue 19's "models over 2 GB"; run by tests/models/control_flow_facts.sh
--big, not by make test: too big for CI).

    make_big_model.py DIR [--gib 2.25]

writes DIR/big.onnx (a few KiB) and DIR/big.onnx.data: a chain of MatMul +
Add + Relu over 8192x8192 float32 weights (256 MiB each), enough layers
for the requested size.  The weights are written straight to the data
file, a layer at a time, so the generator itself never holds more than
one layer.  Their scale (1/sqrt(8192)) keeps activations of order 1."""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto as TP, helper

ap = argparse.ArgumentParser()
ap.add_argument('dir')
ap.add_argument('--gib', type=float, default=2.25)
ap.add_argument('--dim', type=int, default=8192)
a = ap.parse_args()
os.makedirs(a.dir, exist_ok=True)
D = a.dim
layer = D * D * 4 + D * 4
nl = max(1, int(np.ceil(a.gib * 2**30 / layer)))
data = os.path.join(a.dir, 'big.onnx.data')
rng = np.random.default_rng(0)
inits, nodes, off = [], [], 0


def external(name, arr, f):
    global off
    pad = (-off) % 4096
    f.write(b'\0' * pad)
    off += pad
    t = TP()
    t.name = name
    t.data_type = TP.FLOAT
    t.dims.extend(arr.shape)
    t.data_location = TP.EXTERNAL
    for k, v in (('location', 'big.onnx.data'), ('offset', str(off)), ('length', str(arr.nbytes))):
        e = t.external_data.add()
        e.key, e.value = k, v
    f.write(arr.tobytes())
    off += arr.nbytes
    return t


with open(data, 'wb') as f:
    x = 'x'
    for i in range(nl):
        w = (rng.standard_normal((D, D), dtype=np.float32) / np.float32(np.sqrt(D))).astype(np.float32)
        b = (rng.standard_normal(D, dtype=np.float32) * np.float32(0.1)).astype(np.float32)
        inits += [external(f'w{i}', w, f), external(f'b{i}', b, f)]
        del w
        y = 'y' if i == nl - 1 else f'h{i}'
        nodes += [helper.make_node('MatMul', [x, f'w{i}'], [f'm{i}'], name=f'mm{i}'),
                  helper.make_node('Add', [f'm{i}', f'b{i}'], [f'a{i}'], name=f'add{i}'),
                  helper.make_node('Relu', [f'a{i}'], [y], name=f'relu{i}')]
        x = y
g = helper.make_graph(nodes, 'big', [helper.make_tensor_value_info('x', TP.FLOAT, [1, D])],
                      [helper.make_tensor_value_info('y', TP.FLOAT, [1, D])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])
onnx.save_model(m, os.path.join(a.dir, 'big.onnx'))
print(f'{nl} layers, weights {off} bytes ({off / 2**30:.2f} GiB) in {data}')
