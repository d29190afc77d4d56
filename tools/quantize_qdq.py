#!/usr/bin/python3
"""Quantize a float32 ONNX model as ONNX Runtime's quantizers write them.

usage: quantize_qdq.py IN.onnx OUT.onnx [--mode static|dynamic] [--calib N] [--seed S]
                       [--batch B] [--check-ort]

static (as onnxruntime.quantization.quantize_static, QuantFormat.QDQ,
per_channel=True, activations QUInt8, weights QInt8, MinMax calibration):
  - weights of Conv / Gemm / MatMul: int8 initializers, symmetric per output
    channel (zero point 0, scale = max|w| / 127), each read through a
    DequantizeLinear (axis 0 for Conv and Gemm with transB, 1 for MatMul);
  - their biases: int32 initializers, scale = x_scale * w_scale[c], zero
    point 0, through a DequantizeLinear (axis 0);
  - every float activation read or written by Conv, Gemm, MatMul, Add (of two
    activations), MaxPool, AveragePool, GlobalAveragePool, Concat gets one
    QuantizeLinear -> DequantizeLinear pair (uint8, asymmetric: the MinMax
    range widened to hold 0, scale = (max - min) / 255, zero point =
    round(-min / scale)), shared by all its readers;
  - a Relu that is the only reader of such an op's output is removed and its
    range (min 0, so zero point 0: the saturation to 0 is the Relu) used for
    the pair, as ORT's QDQRemovableActivation does.
  Calibration: the model with every intermediate tensor made an output, run
  by ONNX Runtime (tools/ort/run.js) on --calib seeded standard-normal batches
  (the bench's input distribution); min and max over all of them.

dynamic (as quantize_dynamic, weights QInt8 per tensor, symmetric): each
MatMul with a constant 2-D B becomes
  DynamicQuantizeLinear(x) -> MatMulInteger(x_q, B_q, x_zp, B_zp) -> Cast(float)
  -> Mul(.., x_scale * B_scale).

--check-ort writes ONNX Runtime's optimized graph (tools/ort/save_optimized.js)
and prints how many QLinearConv / QLinearMatMul / DynamicQuantizeMatMul /
MatMulIntegerToFloat nodes its fusions made, with the Q/DQ left over.

Needs Debian's python3-onnx and python3-numpy (no PyPI), node + onnxruntime-node.
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORT_RUN = os.path.join(ROOT, "tools", "ort", "run.js")
ORT_SAVE = os.path.join(ROOT, "tools", "ort", "save_optimized.js")
QUANT_OPS = {"Conv", "Gemm", "MatMul", "Add", "MaxPool", "AveragePool", "GlobalAveragePool", "Concat"}
WEIGHTED = {"Conv", "Gemm", "MatMul"}


def sanitize(name):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def write_npy_inputs(model, folder, rng, batch):
    os.makedirs(folder, exist_ok=True)
    inits = {i.name for i in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = [d.dim_value if d.dim_value > 0 else batch for d in vi.type.tensor_type.shape.dim]
        np.save(os.path.join(folder, sanitize(vi.name) + ".npy"), rng.standard_normal(dims).astype(np.float32))


def calibrate(model, names, n, seed, batch):
    """{tensor: (min, max)} over n seeded batches, run by ONNX Runtime."""
    aug = onnx.ModelProto()
    aug.CopyFrom(model)
    have = {o.name for o in aug.graph.output}
    for name in names:
        if name not in have:
            aug.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    rng = np.random.default_rng(seed)
    ranges = {}
    with tempfile.TemporaryDirectory(prefix="qdq_calib") as tmp:
        path = os.path.join(tmp, "aug.onnx")
        onnx.save(aug, path)
        for b in range(n):
            ind, outd = os.path.join(tmp, "in%d" % b), os.path.join(tmp, "out%d" % b)
            write_npy_inputs(model, ind, rng, batch)
            p = subprocess.run(["node", ORT_RUN, path, "--inputs", ind, "--save-outputs", outd, "--threads", "2"],
                               capture_output=True, text=True)
            if p.returncode:
                sys.exit("quantize_qdq.py: calibration run failed: %s" % (p.stderr.strip().splitlines() or ["?"])[-1])
            for name in names:
                a = np.load(os.path.join(outd, sanitize(name) + ".npy"))
                lo, hi = float(a.min()), float(a.max())
                if name in ranges:
                    lo, hi = min(lo, ranges[name][0]), max(hi, ranges[name][1])
                ranges[name] = (lo, hi)
    return ranges


def act_params(lo, hi):
    """uint8 asymmetric scale and zero point of [lo, hi] (widened to hold 0)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zp = int(np.clip(np.round(-lo / scale), 0, 255))
    return np.float32(scale), np.uint8(zp)


def weight_per_channel(w, axis):
    """int8 symmetric per-channel quantization of w along axis: (q, scale[c])."""
    red = tuple(i for i in range(w.ndim) if i != axis)
    absmax = np.abs(w).max(axis=red) if red else np.abs(w)
    scale = np.where(absmax > 0, absmax / 127.0, 1.0).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


class Builder:
    def __init__(self, model):
        self.model = model
        self.g = model.graph
        self.inits = {i.name: i for i in self.g.initializer}
        self.new_inits = []
        self.new_nodes = []

    def init(self, name, arr):
        t = numpy_helper.from_array(np.asarray(arr), name)
        self.new_inits.append(t)
        self.inits[name] = t
        return name

    def const(self, name):
        return numpy_helper.to_array(self.inits[name]) if name in self.inits else None


def fold_identities(model):
    """Identity of an initializer (torch's export shares equal weights so) -> the initializer itself."""
    g = model.graph
    inits = {i.name for i in g.initializer}
    outputs = {o.name for o in g.output}
    alias = {n.output[0]: n.input[0] for n in g.node
             if n.op_type == "Identity" and n.input[0] in inits and n.output[0] not in outputs}
    keep = [n for n in g.node if not (n.op_type == "Identity" and n.output[0] in alias)]
    for n in keep:
        for k, i in enumerate(n.input):
            n.input[k] = alias.get(i, i)
    del g.node[:]
    g.node.extend(keep)


def quantize_static(model, ncalib, seed, batch):
    original = onnx.ModelProto()
    original.CopyFrom(model)  # calibrated as it is, Relus included
    g = model.graph
    b = Builder(model)
    consumers = collections.defaultdict(list)
    producer = {}
    for node in g.node:
        for i in node.input:
            consumers[i].append(node)
        for o in node.output:
            producer[o] = node
    outputs = {o.name for o in g.output}
    # a Relu alone after a quantized op goes (its saturation is the uint8 range's)
    renamed = {}
    keep = []
    for node in g.node:
        if node.op_type == "Relu" and node.input[0] in producer and producer[node.input[0]].op_type in QUANT_OPS \
                and len(consumers[node.input[0]]) == 1 and node.input[0] not in outputs:
            renamed[node.output[0]] = node.input[0]
            continue
        keep.append(node)
    if renamed:
        for node in keep:
            for k, i in enumerate(node.input):
                if i in renamed:
                    node.input[k] = renamed[i]
        for o in g.output:
            if o.name in renamed:  # the producer writes the output's name instead
                src = renamed[o.name]
                for node in keep:
                    for k, x in enumerate(node.output):
                        if x == src:
                            node.output[k] = o.name
                    for k, x in enumerate(node.input):
                        if x == src:
                            node.input[k] = o.name
        del g.node[:]
        g.node.extend(keep)
    inits = set(b.inits)
    # which activations get a Q/DQ pair, which weights per-channel
    acts = []
    seen = set()

    elem = {vi.name: vi.type.tensor_type.elem_type for vi in list(g.value_info) + list(g.input) + list(g.output)}

    def want(t):  # float activations only (a Concat of shape values stays as it is)
        if t and t not in inits and t not in seen and elem.get(t) == TensorProto.FLOAT:
            seen.add(t)
            acts.append(t)

    for node in g.node:
        if node.op_type not in QUANT_OPS:
            continue
        if node.op_type == "Add" and any(i in inits for i in node.input):
            continue  # a bias add stays float, as the weights' ops own their bias
        if node.op_type in WEIGHTED:
            want(node.input[0])
            if node.op_type == "MatMul" and node.input[1] not in inits:
                want(node.input[1])
        else:
            for i in node.input:
                want(i)
        for o in node.output[:1]:
            want(o)
    # a tensor that now stands for a removed Relu's output has that output's range
    relu_out = {v: k for k, v in renamed.items()}
    measured = calibrate(original, sorted({relu_out.get(t, t) for t in acts}), ncalib, seed, batch)
    ranges = {t: measured[relu_out.get(t, t)] for t in acts}
    params = {t: act_params(*ranges[t]) for t in acts}

    # Q -> DQ after each activation; readers read the DQ output
    dq_of = {}
    for t in acts:
        s, z = params[t]
        sn = b.init(t + "_scale", s)
        zn = b.init(t + "_zero_point", z)
        src = t
        if t in outputs:  # the graph output keeps its name: the producer writes t_pre
            src = t + "_pre_quant"
            for node in g.node:
                for k, x in enumerate(node.output):
                    if x == t:
                        node.output[k] = src
        qn, dn = t + "_QuantizeLinear_Output", (t if t in outputs else t + "_DequantizeLinear_Output")
        b.new_nodes.append((src, helper.make_node("QuantizeLinear", [src, sn, zn], [qn], name=t + "_QuantizeLinear")))
        b.new_nodes.append((src, helper.make_node("DequantizeLinear", [qn, sn, zn], [dn], name=t + "_DequantizeLinear")))
        dq_of[t] = dn
    for node in g.node:
        for k, i in enumerate(node.input):
            if i in dq_of and i not in outputs:
                node.input[k] = dq_of[i]

    # weights and biases
    weight_nodes = []
    for node in g.node:
        if node.op_type not in WEIGHTED or len(node.input) < 2:
            continue
        w = b.const(node.input[1])
        if w is None or w.dtype != np.float32:
            continue
        if node.op_type == "Gemm":
            tb = next((a.i for a in node.attribute if a.name == "transB"), 0)
            axis = 0 if tb else 1
        else:
            axis = 0 if node.op_type == "Conv" else w.ndim - 1
        q, ws = weight_per_channel(w, axis)
        wn = node.input[1]
        qname, sname, zname = wn + "_quantized", wn + "_scale", wn + "_zero_point"
        if qname not in b.inits:  # a weight several nodes share is quantized once
            b.init(qname, q)
            b.init(sname, ws)
            b.init(zname, np.zeros(ws.shape, np.int8))
        dname = wn + "_DequantizeLinear_Output_" + node.name
        weight_nodes.append(helper.make_node("DequantizeLinear", [qname, sname, zname], [dname], axis=axis,
                                             name=wn + "_DequantizeLinear_" + node.name))
        node.input[1] = dname
        if node.op_type in ("Conv", "Gemm") and len(node.input) > 2 and b.const(node.input[2]) is not None:
            x = node.input[0]
            xt = x[:-len("_DequantizeLinear_Output")] if x.endswith("_DequantizeLinear_Output") else x
            if xt in params:
                bias = b.const(node.input[2]).astype(np.float32)
                bs = (params[xt][0] * ws).astype(np.float32)
                bq = np.round(bias / bs).astype(np.int32)
                bn = node.input[2]
                qb, sb, zb = (bn + "_quantized_" + node.name, bn + "_quantized_scale_" + node.name,
                              bn + "_quantized_zero_point_" + node.name)  # x_scale is the node's own
                b.init(qb, bq)
                b.init(sb, bs)
                b.init(zb, np.zeros(bs.shape, np.int32))
                dbn = bn + "_DequantizeLinear_Output_" + node.name
                weight_nodes.append(helper.make_node("DequantizeLinear", [qb, sb, zb], [dbn], axis=0,
                                                     name=bn + "_DequantizeLinear_" + node.name))
                node.input[2] = dbn
    finish(model, b, weight_nodes)


def finish(model, b, weight_nodes):
    """Inserts the new nodes in topological order, drops unread float weights."""
    g = model.graph
    after = collections.defaultdict(list)
    for src, n in b.new_nodes:
        after[src].append(n)
    nodes = list(weight_nodes)
    for vi in g.input:
        nodes.extend(after.pop(vi.name, []))
    for node in g.node:
        nodes.append(node)
        for o in node.output:
            nodes.extend(after.pop(o, []))
    assert not after, "Q/DQ after tensors nobody writes: %s" % list(after)
    del g.node[:]
    g.node.extend(nodes)
    read = {i for n in g.node for i in n.input}
    kept = [t for t in g.initializer if t.name in read]
    kept += [t for t in b.new_inits if t.name in read]
    del g.initializer[:]
    g.initializer.extend(kept)
    names = {t.name for t in kept}
    graph_inputs = [vi for vi in g.input if vi.name not in b.inits or vi.name in names]
    del g.input[:]
    g.input.extend(graph_inputs)
    del g.value_info[:]
    if all(o.domain in ("", "ai.onnx") and o.version < 13 for o in model.opset_import):
        for o in model.opset_import:  # per-axis Q/DQ needs opset 13
            if o.domain in ("", "ai.onnx"):
                o.version = 13


def quantize_dynamic(model):
    g = model.graph
    b = Builder(model)
    nodes = []
    dyn = {}  # activation -> (x_q, x_scale, x_zp), one DynamicQuantizeLinear per tensor
    for node in g.node:
        w = b.const(node.input[1]) if node.op_type == "MatMul" else None
        if w is None or w.ndim != 2 or w.dtype != np.float32:
            nodes.append(node)
            continue
        x, y, wn = node.input[0], node.output[0], node.input[1]
        if x not in dyn:
            dyn[x] = (x + "_quantized", x + "_scale", x + "_zero_point")
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(dyn[x]), name=x + "_QuantizeLinear"))
        xq, xs, xz = dyn[x]
        amax = float(np.abs(w).max())
        ws = np.float32(amax / 127.0 if amax > 0 else 1.0)
        q = np.clip(np.round(w / ws), -127, 127).astype(np.int8)
        if wn + "_quantized" not in b.inits:
            b.init(wn + "_quantized", q)
            b.init(wn + "_scale", ws)
            b.init(wn + "_zero_point", np.int8(0))
        mi, cast, sc = y + "_output_quantized", y + "_output_quantized_cast_output", y + "_scales_mul_output"
        nodes.append(helper.make_node("MatMulInteger", [xq, wn + "_quantized", xz, wn + "_zero_point"], [mi],
                                      name=node.name + "_quant"))
        nodes.append(helper.make_node("Cast", [mi], [cast], to=TensorProto.FLOAT, name=node.name + "_cast"))
        nodes.append(helper.make_node("Mul", [xs, wn + "_scale"], [sc], name=node.name + "_scales_mul"))
        nodes.append(helper.make_node("Mul", [cast, sc], [y], name=node.name + "_output_scale_mul"))
    del g.node[:]
    g.node.extend(nodes)
    finish(model, b, [])


def check_ort(path):
    with tempfile.TemporaryDirectory(prefix="qdq_ort") as tmp:
        out = os.path.join(tmp, "opt.onnx")
        p = subprocess.run(["node", ORT_SAVE, path, out], capture_output=True, text=True)
        if p.returncode:
            sys.exit(p.stderr.strip())
        ops = collections.Counter(n.op_type for n in onnx.load(out).graph.node)
    keys = ["QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd", "QLinearGlobalAveragePool", "QLinearConcat",
            "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QuantizeLinear", "DequantizeLinear",
            "DynamicQuantizeLinear", "MatMulInteger"]
    print("ORT optimized graph of %s: %s" % (os.path.basename(path),
                                            ", ".join("%s %d" % (k, ops[k]) for k in keys if ops[k])))
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--mode", choices=["static", "dynamic"], default="static")
    ap.add_argument("--calib", type=int, default=4, help="calibration batches (static)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1, help="calibration batch size")
    ap.add_argument("--check-ort", action="store_true")
    a = ap.parse_args()
    try:
        model = onnx.load(a.input)
    except Exception as e:  # noqa: BLE001 (one line naming the file)
        sys.exit("quantize_qdq.py: %s: %s" % (a.input, str(e).splitlines()[0] if str(e) else type(e).__name__))
    fold_identities(model)
    model = shape_inference.infer_shapes(model)
    if a.mode == "static":
        quantize_static(model, a.calib, a.seed, a.batch)
    else:
        quantize_dynamic(model)
    onnx.checker.check_model(model)
    tmp = a.output + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, a.output)
    if a.check_ort:
        check_ort(a.output)


if __name__ == "__main__":
    main()
