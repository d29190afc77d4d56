#!/usr/bin/python3
"""Writes the fuzz seed corpus (tests/fuzz/corpus/*.onnx): tiny models that
reach the importer's main paths (initializers in raw and typed form, Constant
nodes, dynamic dims, attributes, unsorted nodes, shape arithmetic).
Run with Debian's python (it has onnx):  /usr/bin/python3 tests/fuzz/make_corpus.py"""
import os
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto as TP

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(0)


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tsopt-corpus")
    m.ir_version = 8
    data = m.SerializeToString()
    assert len(data) < 4096, (name, len(data))
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(data)


f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
vi = helper.make_tensor_value_info

save("add", [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
     [vi("x", TP.FLOAT, ["n", 3])], [vi("y", TP.FLOAT, None)],
     [numpy_helper.from_array(f32(2, 3), "w")])

save("conv_relu",
     [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[2, 2],
                       kernel_shape=[3, 3]),
      helper.make_node("Relu", ["c"], ["r"]),
      helper.make_node("LeakyRelu", ["r"], ["y"], alpha=0.1)],
     [vi("x", TP.FLOAT, [1, 2, 6, 6])], [vi("y", TP.FLOAT, None)],
     [numpy_helper.from_array(f32(3, 2, 3, 3), "w"), numpy_helper.from_array(f32(3), "b")])

# typed-field initializer, Constant nodes, nodes out of order
save("constants_unsorted",
     [helper.make_node("Mul", ["s", "k"], ["y"], name="last"),
      helper.make_node("Add", ["x", "c"], ["s"], name="first"),
      helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(f32(4), "cv")),
      helper.make_node("Constant", [], ["k"], value_float=2.0)],
     [vi("x", TP.FLOAT, [4])], [vi("y", TP.FLOAT, [4])],
     [helper.make_tensor("unused", TP.INT64, [2], [5, 7])])

# shape arithmetic feeding Reshape: folded at import once x is bound
save("shape_reshape",
     [helper.make_node("Shape", ["x"], ["shp"]),
      helper.make_node("Gather", ["shp", "zero"], ["n"], axis=0),
      helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
      helper.make_node("Concat", ["n1", "minus1"], ["newshape"], axis=0),
      helper.make_node("Reshape", ["x", "newshape"], ["y"])],
     [vi("x", TP.FLOAT, ["batch", 2, 3])], [vi("y", TP.FLOAT, None)],
     [numpy_helper.from_array(np.array(0, np.int64), "zero"),
      numpy_helper.from_array(np.array([0], np.int64), "ax"),
      numpy_helper.from_array(np.array([-1], np.int64), "minus1")])

save("gemm_softmax",
     [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1, alpha=0.5),
      helper.make_node("Softmax", ["g"], ["y"], axis=-1)],
     [vi("x", TP.FLOAT, [2, 4])], [vi("y", TP.FLOAT, None)],
     [numpy_helper.from_array(f32(3, 4), "w"), numpy_helper.from_array(f32(3), "b")])
