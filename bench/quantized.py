#!/usr/bin/python3
"""Quantized models: tsopt against ONNX Runtime (issue 29, int8).

    bench/quantized.py [--models a,b,...] [--batches 1,4] [--rounds R] [--iters N] [--min-time S]
                       [--threads T] [--cache DIR] [--out BENCHMARKS.md] [--tsopt PATH] [--check-only]

Models: ResNet-18, MobileNetV3-Large and the bench set's TransformerEncoder
(tools/export_torchvision.py, cached in --cache, default build/real_models,
as bench/real_models.py does), each quantized by tools/quantize_qdq.py in
ONNX Runtime's static QDQ format (NAME_qdq.onnx), and the TransformerEncoder
also as quantize_dynamic writes it (NAME_dyn.onnx: DynamicQuantizeLinear +
MatMulInteger).  ONNX Runtime's optimized graph is checked for its fused
QLinearConv / QLinearMatMul / DynamicQuantizeMatMul nodes.

Per model and batch: seeded standard-normal inputs (the calibration's
distribution); `tsopt run` and ONNX Runtime on them; the largest difference
in output quantization steps (the scale of the DequantizeLinear writing the
output; a float output in units of ORT's own distance from the float32
model).  One step per element holds per operator (tests/unit/
test_exec_int8.c); through a deep model the steps add up, and ONNX
Runtime's own fusions move its outputs as far (MobileNetV3: 9 steps between
ORT with and without its graph optimizations), so a model matches when
tsopt is within max(1, that distance) of ORT (tools/ort/run_unoptimized.js).  Then R rounds of `tsopt bench` and
`node tools/ort/run.js` alternately: latency = median of the per-round
medians, peak memory = the largest VmHWM (ORT's less a bare node's).  Writes
the "## Quantized models" section of --out.  --check-only: correctness only,
exit 1 on a mismatch.
"""
import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import real_models as rm  # noqa: E402  (export, run, last_json, bare_node_rss)

ROOT = os.path.dirname(HERE)
QUANT = os.path.join(ROOT, "tools", "quantize_qdq.py")
ORT_NOOPT = os.path.join(ROOT, "tools", "ort", "run_unoptimized.js")
SECTION = "## Quantized models"
MODELS = {"resnet18": "3x224x224", "mobilenet_v3_large": "3x224x224", "transformer_encoder": "128x256"}


def quantized(name, cache, mode):
    """The cached quantized copy of model `name` and ORT's fused-node counts."""
    src = rm.export(name, cache)
    path = os.path.join(cache, "%s_%s.onnx" % (name, "qdq" if mode == "static" else "dyn"))
    args = [rm.PYTHON, QUANT, src, path, "--mode", mode]
    if not os.path.exists(path):
        rm.run(args, 3600)
    sys.path.insert(0, os.path.dirname(QUANT))
    import quantize_qdq  # noqa: E402
    ops = quantize_qdq.check_ort(path)
    return path, ops


def output_step(path):
    """{output name: scale of the DequantizeLinear writing it} (static QDQ models)."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path, load_external_data=False)
    inits = {t.name: t for t in m.graph.initializer}
    steps = {}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] in {o.name for o in m.graph.output}:
            steps[n.output[0]] = float(numpy_helper.to_array(inits[n.input[1]]).max())
    return steps


def check(a, name, path, shape, batch, work, float_path):
    d = os.path.join(work, "%s_b%d" % (os.path.basename(path)[:-5], batch))
    os.makedirs(d + "/in", exist_ok=True)
    rng = np.random.default_rng(batch)
    dims = [batch] + [int(x) for x in shape.split("x")]
    np.save(d + "/in/input.npy", rng.standard_normal(dims).astype(np.float32))
    rm.run([a.tsopt, "run", path, "--inputs", d + "/in", "--save-outputs", d + "/ts"], 1800)
    rm.run(["node", rm.ORT_RUN, path, "--inputs", d + "/in", "--save-outputs", d + "/ort"], 1800)
    steps = output_step(path)
    rm.run(["node", ORT_NOOPT, path, d + "/in", d + "/ort_noopt"], 1800)
    if not steps:
        rm.run(["node", rm.ORT_RUN, float_path, "--inputs", d + "/in", "--save-outputs", d + "/f32"], 1800)
    worst, bound = 0.0, 1.0
    for f in os.listdir(d + "/ort"):
        t, o = np.load(os.path.join(d, "ts", f)).astype(np.float64), np.load(os.path.join(d, "ort", f))
        u = np.load(os.path.join(d, "ort_noopt", f))
        # one output step, or (dynamic: float outputs) ORT's own distance from float32
        unit = steps.get(f[:-4]) or float(np.abs(np.load(os.path.join(d, "f32", f)) - o).max()) or 1.0
        worst = max(worst, float(np.abs(t - o).max()) / unit)
        # ORT's fusions move a deep model's outputs themselves: its fused vs unfused distance
        bound = max(bound, float(np.abs(u - o).max()) / unit)
    return {"inputs": d + "/in", "steps": worst, "ort_steps": bound, "ok": worst <= bound * 1.001}


def bench(a, path, inputs):
    ts, ort = [], []
    mt = ["--min-time", str(a.min_time)]
    for _ in range(a.rounds):
        ts.append(rm.last_json(rm.run([a.tsopt, "bench", path, "--inputs", inputs, "--iters", str(a.iters)] + mt +
                                      ["--threads", str(a.threads), "--json"], 1800)))
        ort.append(rm.last_json(rm.run(["node", rm.ORT_RUN, path, "--inputs", inputs, "--iters", str(a.iters)] + mt +
                                       ["--threads", str(a.threads)], 1800)))
    return {"ts_ms": statistics.median(x["median_ms"] for x in ts),
            "ort_ms": statistics.median(x["median_ms"] for x in ort),
            "ts_rss": max(x["peak_rss_bytes"] for x in ts), "ort_rss": max(x["peak_rss_bytes"] for x in ort),
            "fallback": ts[0].get("fallback_steps", 0)}


def load():
    return open("/proc/loadavg").read().split()[0]


def section(a, rows, bare, argv, loads):
    out = [SECTION, "",
           "Quantized copies made by `tools/quantize_qdq.py` (ONNX Runtime's static QDQ format: per-channel "
           "symmetric int8 weights, uint8 MinMax activations, int32 bias; `_dyn`: quantize_dynamic's "
           "DynamicQuantizeLinear + MatMulInteger), run by tsopt (`--graph-opt all`: the QDQ pass makes "
           "QLinearConv/QLinearMatMul, run on oneDNN's int8 primitives) and ONNX Runtime %s on the same seeded "
           "inputs, %d threads. `bench/quantized.py %s`, %s, load average %s. Latency: median of %d alternating "
           "rounds' medians; peak memory: VmHWM (ORT's less a bare node, %.0f MiB). Steps: the largest "
           "|tsopt - ORT| in output quantization steps (a float output: in units of ORT's distance from float32); ORT's own: "
           "ORT with vs without its graph optimizations, the same unit. "
           "ORT fused: the int8 nodes of ONNX Runtime's optimized graph." % (
               "1.30", a.threads, " ".join(argv), datetime.date.today().isoformat(), " -> ".join(loads), a.rounds,
               bare / 2**20), "",
           "| model | batch | tsopt ms | ORT ms | tsopt/ORT | tsopt MiB | ORT MiB | steps | ORT's own | fallback | ORT fused |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if "error" in r:
            out.append("| %s | %d | error: %s ||||||||" % (r["name"], r["batch"], r["error"]))
            continue
        out.append("| %s | %d | %.2f | %.2f | %.2f | %.0f | %.0f | %.2f | %.2f | %d | %s |" % (
            r["name"], r["batch"], r["ts_ms"], r["ort_ms"], r["ts_ms"] / r["ort_ms"], r["ts_rss"] / 2**20,
            (r["ort_rss"] - bare) / 2**20, r["steps"], r["ort_steps"], r["fallback"], r["fused"]))
    return "\n".join(out) + "\n"


def write_section(path, text):
    old = open(path).read() if os.path.exists(path) else ""
    i = old.find("\n" + SECTION + "\n")
    if i >= 0:
        j = old.find("\n## ", i + 1)
        new = old[:i + 1] + text + ("\n" + old[j + 1:] if j >= 0 else "")
    else:
        new = old.rstrip("\n") + ("\n\n" if old else "") + text
    with open(path + ".tmp", "w") as f:
        f.write(new)
    os.replace(path + ".tmp", path)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "real_models"))
    ap.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--tsopt", default=os.path.join(ROOT, "build", "tsopt"))
    ap.add_argument("--check-only", action="store_true")
    a = ap.parse_args(argv)
    work = os.path.join(a.cache, "quantized_work")
    rows, loads = [], [load()]
    for name in a.models.split(","):
        for mode in ("static", "dynamic") if name == "transformer_encoder" else ("static",):
            try:
                path, ops = quantized(name, a.cache, mode)
            except (RuntimeError, subprocess.SubprocessError, SystemExit) as e:
                rows.append({"name": name, "batch": 0, "error": str(e)})
                continue
            fused = ", ".join("%s %d" % (k, v) for k, v in sorted(ops.items())
                              if k.startswith("QLinear") or k in ("QGemm", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"))
            for batch in [int(b) for b in a.batches.split(",")]:
                label = os.path.basename(path)[:-5]
                try:
                    r = check(a, label, path, MODELS[name], batch, work, rm.export(name, a.cache))
                    rm.log("%s batch %d: %.2f steps from ORT (ORT's own fusions: %.2f) %s" % (
                        label, batch, r["steps"], r["ort_steps"], "ok" if r["ok"] else "MISMATCH"))
                    if not a.check_only:
                        r.update(bench(a, path, r["inputs"]))
                        rm.log("   tsopt %.2f ms, ORT %.2f ms (%.2fx)" % (r["ts_ms"], r["ort_ms"], r["ts_ms"] / r["ort_ms"]))
                except (RuntimeError, subprocess.SubprocessError) as e:
                    r = {"error": str(e), "ok": False}
                r.update({"name": label, "batch": batch, "fused": fused})
                rows.append(r)
    loads.append(load())
    bad = [r for r in rows if not r.get("ok")]
    if a.check_only:
        return 1 if bad else 0
    write_section(a.out, section(a, rows, rm.bare_node_rss(), argv, loads))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
