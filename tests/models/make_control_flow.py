#!/usr/bin/env python3
"""Control-flow models for tests/models/control_flow.sh, built at test time.

PyTorch modules with data-dependent branches and loops are exported through
torch.jit.script (so If and Loop stay in the graph) at opsets 15, 16 and 17;
opset 18 is the opset-17 export relabelled after checking that it uses no
operator whose definition changed in opset 18.  Two models are written with
onnx.helper where torch has no export: a Scan (opset 16) with an
initializer inside its body and a nested If, and a Loop with a constant trip
count and scan outputs.  Each model gets its inputs as .npy (data-dependent
control flow needs meaningful inputs, not random ones).  A batched Scan of
opset 8 is written with onnx.helper too.

    make_control_flow.py OUTDIR    writes OUTDIR/NAME.onnx, OUTDIR/NAME.in/*.npy
                                   and OUTDIR/models.txt (one NAME a line); a
                                   model with a symbolic batch also gets
                                   NAME.binds (tsopt's --input values) and
                                   NAME.other/ (inputs at another batch) with
                                   NAME.binds_other
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import torch
from torch import nn

torch.manual_seed(0)
RNG = np.random.default_rng(0)


class Branchy(nn.Module):
    """If on the data: a linear layer in one branch, element-wise in the other."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        if bool(x.sum() > 0):
            y = torch.relu(self.lin(x)) * 2.0
        else:
            y = torch.sigmoid(x) - 1.0
        return y + x


class Looped(nn.Module):
    """A for loop whose trip count is an input, then a while loop whose
    condition is computed from the carried value."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x, n):
        h = x
        for _ in range(int(n)):
            h = torch.tanh(self.lin(h)) + h * 0.5
        k = 0
        while bool(h.abs().sum() > 1.0) and k < 20:
            h = h * 0.5
            k += 1
        return h, h.sum() * 0 + k


class Nested(nn.Module):
    """An If inside a Loop whose trip count is an input, reading the loop's
    carried value, its iteration number and an outer input."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x, bias, n):
        h = x
        for i in range(int(n)):
            if bool(h.mean() > 0):
                h = self.lin(h) - bias
            else:
                h = torch.relu(h) + bias * float(i)
        return h


class Half(nn.Module):
    """float16 inside a branch: Cast to float16 and back, a float16 weight."""

    def __init__(self):
        super().__init__()
        self.register_buffer("w16", torch.linspace(-1, 1, 8).half())

    def forward(self, x):
        if bool(x.sum() > 0):
            y = (x.half() * self.w16 + self.w16).float()
        else:
            y = x * 2.0
        return y


class SizedBranch(nn.Module):
    """A branch that multiplies by the batch size: the folded size inside the
    body follows the symbolic batch, so the model must be written back at
    the bound batch, not symbolic."""

    def forward(self, x):
        if bool(x.sum() > 0):
            y = x * float(x.shape[0])
        else:
            y = x - 1.0
        return y


def export(module, args, names, path, opset):
    scripted = torch.jit.script(module)
    torch.onnx.export(scripted, args, path, opset_version=opset, input_names=names,
                      do_constant_folding=False)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    return m


# Operators whose definition changed in opset 18 (ONNX 1.13): a model using
# none of them means the same at 18.
CHANGED_IN_18 = {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                 "ReduceMin", "ReduceProd", "ReduceSumSquare", "Split", "Pad", "Resize", "ScatterElements",
                 "ScatterND", "OptionalHasElement", "OptionalGetElement", "Col2Im", "CenterCropPad",
                 "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "GroupNormalization"}


def ops_of(graph):
    for n in graph.node:
        yield n.op_type
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from ops_of(a.g)


def relabel_18(path):
    m = onnx.load(path)
    bad = set(ops_of(m.graph)) & CHANGED_IN_18
    if bad:
        raise SystemExit(f"{path}: uses {sorted(bad)}, which changed in opset 18")
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = 18
    m.ir_version = 8
    onnx.save(m, path)


def scan_model(path):
    """Scan (opset 16): running sum over axis 1, each slice multiplied in
    float16 by a float16 initializer inside the body (Cast to float16 and
    back), and an If inside the body that reads an outer-scope input."""
    body_w = numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float16), "body_w")
    then_g = helper.make_graph([helper.make_node("Mul", ["s_next", "gain"], ["t_out"])], "then_g", [],
                               [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, [3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["s_next", "gain"], ["e_out"])], "else_g", [],
                               [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [3])])
    body = helper.make_graph(
        [helper.make_node("Cast", ["x_t"], ["x16"], to=TensorProto.FLOAT16),
         helper.make_node("Mul", ["x16", "body_w"], ["xw16"]),
         helper.make_node("Cast", ["xw16"], ["xw"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["s_in", "xw"], ["s_next"]),
         helper.make_node("ReduceSum", ["s_next"], ["tot"], keepdims=0),
         helper.make_node("Greater", ["tot", "zero"], ["pos"]),
         helper.make_node("If", ["pos"], ["s_out"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["s_out"], ["y_t"])],
        "scan_body",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [3])],
        initializer=[body_w])
    g = helper.make_graph(
        [helper.make_node("Scan", ["init", "xs"], ["final", "ys"], body=body, num_scan_inputs=1,
                          scan_input_axes=[1], scan_output_axes=[1], scan_output_directions=[1])],
        "scan_model",
        [helper.make_tensor_value_info("init", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("xs", TensorProto.FLOAT, [3, 5]),
         helper.make_tensor_value_info("gain", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("final", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, [3, 5])],
        initializer=[numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    # slices exact in float16 (multiples of 1/64) times powers of two: the
    # float16 products are exact, so engines that compute float16 Mul in
    # float32 (ONNX Runtime's CPU) and those that round it agree
    return {"init": RNG.standard_normal(3).astype(np.float32),
            "xs": (np.round(RNG.standard_normal((3, 5)) * 64) / 64).astype(np.float32),
            "gain": np.array([1.5, 0.5, -2.0], np.float32)}


def loop_scan_model(path):
    """Loop (opset 15) with a constant trip count, a carried value and a scan
    output (the sizes fold: the scan output is 6x2)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["v_in", "fi"], ["vi"]),
         helper.make_node("Add", ["vi", "step"], ["v_out"]),
         helper.make_node("Sin", ["v_out"], ["scan"])],
        "loop_body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("scan", TensorProto.FLOAT, [2])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "v0"], ["v_final", "scans"], body=body)],
        "loop_scan",
        [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("step", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("v_final", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("scans", TensorProto.FLOAT, [6, 2])],
        initializer=[numpy_helper.from_array(np.array(6, np.int64), "M")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return {"v0": np.array([0.25, -0.5], np.float32), "step": np.array([0.1, 0.2], np.float32)}


def scan8_model(path):
    """Scan of opset 8 (the batched form): batch 2, two scan inputs, the
    second read backwards (directions), an empty sequence_lens, a running
    sum and a scan output of the sum times a body initializer."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["x_t", "w_t"], ["xw"]),
         helper.make_node("Add", ["s_in", "xw"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "k"], ["y_t"])],
        "scan8_body",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("w_t", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [3])],
        initializer=[numpy_helper.from_array(np.array([1.0, -0.5, 2.0], np.float32), "k")])
    g = helper.make_graph(
        [helper.make_node("Scan", ["", "init", "xs", "ws"], ["final", "ys"], body=body, num_scan_inputs=2,
                          directions=[0, 1])],
        "scan8_model",
        [helper.make_tensor_value_info("init", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("xs", TensorProto.FLOAT, [2, 4, 3]),
         helper.make_tensor_value_info("ws", TensorProto.FLOAT, [2, 4, 1])],
        [helper.make_tensor_value_info("final", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, [2, 4, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)])
    m.ir_version = 4
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return {"init": RNG.standard_normal((2, 3)).astype(np.float32),
            "xs": RNG.standard_normal((2, 4, 3)).astype(np.float32),
            "ws": RNG.standard_normal((2, 4, 1)).astype(np.float32)}


def loop_data_model(path):
    """Loop (opset 16) whose trip count is an input and whose scan output's
    length comes from the declared shape (4), with the same MatMul twice in
    its body: optimize merges them, and its check and its timing need the
    user's inputs (random ones give no valid trip count)."""
    w = numpy_helper.from_array((RNG.standard_normal((8, 8)) * 0.3).astype(np.float32), "w")
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("MatMul", ["v_in", "w"], ["m1"]),
         helper.make_node("MatMul", ["v_in", "w"], ["m2"]),
         helper.make_node("Add", ["m1", "m2"], ["s"]),
         helper.make_node("Tanh", ["s"], ["v_out"]),
         helper.make_node("Identity", ["v_out"], ["scan"])],
        "loop_body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2, 8]),
         helper.make_tensor_value_info("scan", TensorProto.FLOAT, [2, 8])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "v0"], ["v_final", "scans"], body=body)],
        "loop_data",
        [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2, 8]),
         helper.make_tensor_value_info("n", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("v_final", TensorProto.FLOAT, [2, 8]),
         helper.make_tensor_value_info("scans", TensorProto.FLOAT, [4, 2, 8])],
        initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return {"v0": RNG.standard_normal((2, 8)).astype(np.float32), "n": np.array(4, np.int64)}


def body_cse_model(path):
    """If (opset 17) whose then-branch computes the same MatMul twice on a
    captured weight: the optimizer's passes inside the body merge them
    (control_flow.sh expects the optimized model to be written)."""
    w = numpy_helper.from_array((RNG.standard_normal((256, 256)) * 0.05).astype(np.float32), "w")
    then_g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m1"]), helper.make_node("MatMul", ["x", "w"], ["m2"]),
         helper.make_node("Add", ["m1", "m2"], ["t_out"])],
        "then_g", [], [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, [64, 256])])
    else_g = helper.make_graph([helper.make_node("Relu", ["x"], ["e_out"])], "else_g", [],
                               [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [64, 256])])
    g = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["pos"]),
         helper.make_node("If", ["pos"], ["y"], then_branch=then_g, else_branch=else_g)],
        "body_cse",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 256])],
        initializer=[w, numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return {"x": np.abs(RNG.standard_normal((64, 256))).astype(np.float32)}


def save_inputs(d, inputs):
    os.makedirs(d, exist_ok=True)
    for k, v in inputs.items():
        np.save(os.path.join(d, k + ".npy"), v)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    names = []

    def add(name, inputs):
        save_inputs(os.path.join(out, name + ".in"), inputs)
        names.append(name)

    x8 = RNG.standard_normal((2, 8)).astype(np.float32)
    export(Branchy().eval(), (torch.from_numpy(x8),), ["x"], f"{out}/if_op15.onnx", 15)
    add("if_op15", {"x": x8})
    # the other branch: a negative sum
    add_neg = -np.abs(x8)
    export(Branchy().eval(), (torch.from_numpy(add_neg),), ["x"], f"{out}/if_neg_op15.onnx", 15)
    add("if_neg_op15", {"x": add_neg})

    n = np.array(3, np.int64)
    export(Looped().eval(), (torch.from_numpy(x8), torch.from_numpy(n)), ["x", "n"], f"{out}/loop_op16.onnx", 16)
    add("loop_op16", {"x": x8, "n": n})

    x6 = RNG.standard_normal((3, 6)).astype(np.float32)
    b6 = RNG.standard_normal(6).astype(np.float32) * 0.1
    n4 = np.array(4, np.int64)
    export(Nested().eval(), (torch.from_numpy(x6), torch.from_numpy(b6), torch.from_numpy(n4)), ["x", "bias", "n"],
           f"{out}/nested_op17.onnx", 17)
    add("nested_op17", {"x": x6, "bias": b6, "n": n4})

    export(Half().eval(), (torch.from_numpy(np.abs(x8)),), ["x"], f"{out}/half_op18.onnx", 17)
    relabel_18(f"{out}/half_op18.onnx")
    add("half_op18", {"x": np.abs(x8)})

    add("scan_op16", scan_model(f"{out}/scan_op16.onnx"))
    add("loop_scan_op15", loop_scan_model(f"{out}/loop_scan_op15.onnx"))
    add("body_cse_op17", body_cse_model(f"{out}/body_cse_op17.onnx"))
    add("scan8_op8", scan8_model(f"{out}/scan8_op8.onnx"))
    # not in models.txt: control_flow.sh optimizes it with timing on
    save_inputs(f"{out}/loop_data_op16.in", loop_data_model(f"{out}/loop_data_op16.onnx"))

    # a symbolic batch through a Loop and the If inside it: written back
    # symbolic, the optimized model must run at another batch
    x3 = RNG.standard_normal((3, 6)).astype(np.float32)
    torch.onnx.export(torch.jit.script(Nested().eval()), (torch.from_numpy(x3), torch.from_numpy(b6), torch.from_numpy(n4)),
                      f"{out}/nested_dyn_op17.onnx", opset_version=17, input_names=["x", "bias", "n"],
                      dynamic_axes={"x": {0: "batch"}}, do_constant_folding=False)
    add("nested_dyn_op17", {"x": x3, "bias": b6, "n": n4})
    save_inputs(f"{out}/nested_dyn_op17.other", {"x": RNG.standard_normal((5, 6)).astype(np.float32), "bias": b6,
                                                  "n": np.array(2, np.int64)})
    with open(f"{out}/nested_dyn_op17.binds", "w") as f:
        f.write("x:3x6\n")
    with open(f"{out}/nested_dyn_op17.binds_other", "w") as f:
        f.write("x:5x6\n")

    torch.onnx.export(torch.jit.script(SizedBranch()), (torch.from_numpy(np.abs(x3)),), f"{out}/sized_dyn_op15.onnx",
                      opset_version=15, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    add("sized_dyn_op15", {"x": np.abs(x3)})
    with open(f"{out}/sized_dyn_op15.binds", "w") as f:
        f.write("x:3x6\n")
    open(f"{out}/sized_dyn_op15.static", "w").close()

    with open(os.path.join(out, "models.txt"), "w") as f:
        f.write("\n".join(names) + "\n")


if __name__ == "__main__":
    main()
