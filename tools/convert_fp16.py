#!/usr/bin/python3
"""Float16 / bfloat16 copies of a float32 ONNX model (onnx + numpy only).

    tools/convert_fp16.py IN.onnx OUT.onnx [--dtype float16|bfloat16] [--keep-io-types]

Every float32 tensor of the model becomes the chosen 16-bit type: initializers,
Constant nodes' values, ConstantOfShape's value, Cast nodes' `to`, the declared
types of inputs, outputs and value_info.  Integer tensors (shape arithmetic) are
left alone.  Values are rounded to nearest, ties to even (float16 through NumPy;
bfloat16 by rounding float32's bits, as ONNX's Cast specifies), float16 overflow
saturates to +-65504 instead of becoming infinite (weights never need infinity).
--keep-io-types keeps float32 inputs and outputs and puts a Cast beside each.

Run it with Debian's /usr/bin/python3 (python3-onnx)."""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT


def bf16_bits(a):
    """float32 array -> uint16 bfloat16 bits, round to nearest even (NaN kept NaN)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    r[nan] = 0x7FC0
    return r


def convert_tensor(t, to):
    if t.data_type != F32:
        return False
    a = numpy_helper.to_array(t).astype(np.float32)
    name, dims = t.name, list(t.dims)
    t.Clear()
    t.name = name
    t.dims.extend(dims)
    t.data_type = to
    if to == TensorProto.FLOAT16:
        t.raw_data = np.clip(a, -65504, 65504).astype(np.float16).tobytes()
    else:
        t.raw_data = bf16_bits(a).tobytes()
    return True


def convert_type(vi, to):
    tt = vi.type.tensor_type
    if tt.elem_type == F32:
        tt.elem_type = to


def convert_graph(g, to):
    n = 0
    for t in g.initializer:
        n += convert_tensor(t, to)
    for node in g.node:
        for at in node.attribute:
            if at.type == onnx.AttributeProto.TENSOR:
                n += convert_tensor(at.t, to)
            elif at.type == onnx.AttributeProto.GRAPH:
                n += convert_graph(at.g, to)
            elif at.type == onnx.AttributeProto.GRAPHS:
                for sub in at.graphs:
                    n += convert_graph(sub, to)
        if node.op_type == "Cast":
            for at in node.attribute:
                if at.name == "to" and at.i == F32:
                    at.i = to
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        convert_type(vi, to)
    return n


def keep_io(g, to):
    """float32 graph inputs/outputs with Casts to/from the 16-bit type."""
    casts_in, casts_out = [], []
    inits = {t.name for t in g.initializer}
    for vi in g.input:
        tt = vi.type.tensor_type
        if vi.name in inits or tt.elem_type != to:
            continue
        inner = vi.name + "_half"
        for node in g.node:
            node.input[:] = [inner if x == vi.name else x for x in node.input]
        tt.elem_type = F32
        casts_in.append(helper.make_node("Cast", [vi.name], [inner], to=to, name=vi.name + "_to_half"))
    for vi in g.output:
        tt = vi.type.tensor_type
        if tt.elem_type != to:
            continue
        inner = vi.name + "_half"
        for node in g.node:
            node.output[:] = [inner if x == vi.name else x for x in node.output]
            node.input[:] = [inner if x == vi.name else x for x in node.input]
        tt.elem_type = F32
        casts_out.append(helper.make_node("Cast", [inner], [vi.name], to=F32, name=vi.name + "_to_float"))
    nodes = casts_in + list(g.node) + casts_out
    del g.node[:]
    g.node.extend(nodes)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--dtype", choices=["float16", "bfloat16"], default="float16")
    ap.add_argument("--keep-io-types", action="store_true", help="float32 inputs/outputs, Casts inside")
    a = ap.parse_args(argv)
    to = TensorProto.FLOAT16 if a.dtype == "float16" else TensorProto.BFLOAT16
    try:
        m = onnx.load(a.input)
    except Exception as e:
        sys.exit("convert_fp16: cannot read '%s': %s" % (a.input, e))
    n = convert_graph(m.graph, to)
    if a.keep_io_types:
        keep_io(m.graph, to)
    if to == TensorProto.BFLOAT16:
        # bfloat16 Conv/Gemm/MatMul/Relu/... are typed from opset 13 on; raising the opset
        # would change other operators' semantics (Softmax's axis, Split, ...), so refuse
        old = [op.version for op in m.opset_import if op.domain in ("", "ai.onnx") and op.version < 13]
        if old:
            sys.exit("convert_fp16: '%s' imports opset %d; bfloat16 needs opset 13 or later" % (a.input, old[0]))
    tmp = a.output + ".tmp"
    onnx.save(m, tmp)
    os.replace(tmp, a.output)
    print("convert_fp16: %s -> %s (%s, %d tensors converted)" % (a.input, a.output, a.dtype, n))


if __name__ == "__main__":
    main(sys.argv[1:])
