#!/usr/bin/python3
"""float16 / bfloat16 models: tsopt against ONNX Runtime and against tsopt's own float32.

    bench/half.py [--models resnet50,vit_b_16_l4] [--batches 1,4] [--dtype float16|bfloat16]
                  [--rounds R] [--iters N] [--threads T] [--cache DIR] [--out BENCHMARKS.md] [--tsopt PATH]

Per model: the float32 export of the real-model set (tools/export_torchvision.py,
cached in --cache as bench/real_models.py does) and its 16-bit copy
(tools/convert_fp16.py, every float tensor converted, inputs and outputs too).
Per batch: `tsopt run` of the 16-bit model on seeded random inputs saves them;
the float32 model gets the same values widened.  Check: tsopt's 16-bit
outputs against ONNX Runtime's (float16) or against tsopt's float32 outputs
of a float32 model holding the rounded weights (bfloat16: ONNX Runtime's CPU
provider has no bfloat16 Conv/MatMul); the tolerance is
docs/runtime.md's "Half precision": max |a - b| <= 2^-6 of the output's
largest magnitude (32 float16 roundings of 2^-11 each; 4 of bfloat16's).
Timing: R rounds of three processes in turn (tsopt 16-bit, tsopt float32,
ONNX Runtime 16-bit; `--iters N` timed runs each): latency = median of the
per-round medians, peak memory = the largest VmHWM of each over the rounds
(ONNX Runtime's includes node's own ~50 MB).  The machine's load average is
printed with every row: under load, read the ratios, which are taken side by
side, not the milliseconds.  Writes the "## Half precision" section of --out.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import real_models as rm  # noqa: E402  (export cache, process helpers)

CONVERT = os.path.join(ROOT, "tools", "convert_fp16.py")
SECTION = "## Half precision"
ULP_SHARE = {"float16": 2.0 ** -6, "bfloat16": 2.0 ** -6}


def log(*a):
    print("half:", *a, file=sys.stderr, flush=True)


def half_model(path, dtype):
    out = path[:-5] + "." + dtype + ".onnx"
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(path):
        rm.run([rm.PYTHON, CONVERT, path, out, "--dtype", dtype], 600)
    return out


def rounded_f32_model(path16, dtype, work):
    """float32 model holding the 16-bit model's weights (the exact reference of 'float32 compute')."""
    import numpy as np
    import onnx
    from onnx import TensorProto, numpy_helper
    m = onnx.load(path16)
    code = TensorProto.FLOAT16 if dtype == "float16" else TensorProto.BFLOAT16
    for t in m.graph.initializer:
        if t.data_type == code:
            raw = np.frombuffer(t.raw_data, dtype=np.uint16) if t.raw_data else np.array(t.int32_data, np.uint16)
            a = (raw.view(np.float16).astype(np.float32) if code == TensorProto.FLOAT16
                 else (raw.astype(np.uint32) << 16).view(np.float32)).reshape(tuple(t.dims))
            t.CopyFrom(numpy_helper.from_array(a, t.name))
    for v in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if v.type.tensor_type.elem_type == code:
            v.type.tensor_type.elem_type = TensorProto.FLOAT
    for n in m.graph.node:
        for at in n.attribute:
            if n.op_type == "Cast" and at.name == "to" and at.i == code:
                at.i = TensorProto.FLOAT
    out = os.path.join(work, "ref32.onnx")
    onnx.save(m, out)
    return out


def widen_dir(src, dst, dtype):
    import numpy as np
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        a = np.load(os.path.join(src, f))
        if a.dtype == np.float16:
            a = a.astype(np.float32)
        elif dtype == "bfloat16" and a.dtype.kind == "V" and a.dtype.itemsize == 2:
            a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        np.save(os.path.join(dst, f), a)


def max_diff(d1, d2):
    import numpy as np
    worst, scale = 0.0, 0.0
    for f in os.listdir(d2):
        b = np.load(os.path.join(d2, f)).astype(np.float32)
        a = np.load(os.path.join(d1, f))
        if a.dtype.kind == "V":
            a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        worst = max(worst, float(np.abs(a.astype(np.float32) - b).max()))
        scale = max(scale, float(np.abs(b).max()))
    return worst, scale


def one(a, name, shape, batch, work):
    path32 = rm.export(name, a.cache)
    path16 = half_model(path32, a.dtype)
    d = os.path.join(work, "%s.b%d" % (name, batch))
    os.makedirs(d, exist_ok=True)
    binding = "input:%dx%s" % (batch, shape)
    rm.run([a.tsopt, "run", path16, "--input", binding, "--save-inputs", d + "/in16", "--save-outputs", d + "/ts16",
            "--iters", "1"], 1800)
    widen_dir(d + "/in16", d + "/in32", a.dtype)
    if a.dtype == "float16":
        rm.run(["node", rm.ORT_RUN, path16, "--inputs", d + "/in16", "--save-outputs", d + "/ref"], 1800)
        against = "ONNX Runtime float16"
    else:
        ref32 = rounded_f32_model(path16, a.dtype, d)
        rm.run([a.tsopt, "run", ref32, "--inputs", d + "/in32", "--save-outputs", d + "/ref", "--iters", "1"], 1800)
        against = "float32 on the rounded weights"
    diff, scale = max_diff(d + "/ts16", d + "/ref")
    tol = ULP_SHARE[a.dtype] * scale
    row = {"name": name, "batch": batch, "max_abs": diff, "scale": scale, "tol": tol, "match": diff <= tol,
           "against": against}
    ts16, ts32, ort = [], [], []
    loads = [os.getloadavg()[0]]
    for _ in range(a.rounds):
        common = ["--iters", str(a.iters), "--threads", str(a.threads), "--json"]
        ts16.append(rm.last_json(rm.run([a.tsopt, "bench", path16, "--inputs", d + "/in16"] + common, 1800)))
        ts32.append(rm.last_json(rm.run([a.tsopt, "bench", path32, "--inputs", d + "/in32"] + common, 1800)))
        if a.dtype == "float16":
            ort.append(rm.last_json(rm.run(["node", rm.ORT_RUN, path16, "--inputs", d + "/in16", "--iters",
                                            str(a.iters), "--threads", str(a.threads)], 1800)))
        loads.append(os.getloadavg()[0])
    med = lambda xs: statistics.median(x["median_ms"] for x in xs)  # noqa: E731
    rss = lambda xs: max(x["peak_rss_bytes"] for x in xs)  # noqa: E731
    row.update(ts16_ms=med(ts16), ts32_ms=med(ts32), ts16_rss=rss(ts16), ts32_rss=rss(ts32),
               weights16=ts16[0].get("weight_bytes", 0), weights32=ts32[0].get("weight_bytes", 0),
               fallback=ts16[0].get("fallback_steps", 0), load=(min(loads), max(loads)))
    if ort:
        row.update(ort_ms=med(ort), ort_rss=rss(ort))
    log(json.dumps(row))
    return row


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def section(a, rows, argv, started):
    L = [SECTION, ""]
    L.append("Generated by `bench/half.py` on %s (%s copies by `tools/convert_fp16.py`). CPU: %s, %d threads. "
             "Each row's load average (min-max over its rounds) is given: the ratios are measured side by side "
             "(the three processes in turn, %d rounds of %d runs), the milliseconds are only as good as that load. "
             "Command:" % (started, a.dtype, cpu_name(), a.threads, a.rounds, a.iters))
    L.append("\n    bench/half.py " + " ".join(argv) + "\n")
    L.append("| model | batch | tsopt %s ms | tsopt f32 ms | ORT %s ms | tsopt16/ORT16 | tsopt16/tsopt32 | "
             "peak RSS 16 / 32 MB | RSS 16/32 | weights 16 / 32 MB | max abs diff (tol, against) | load |"
             % (a.dtype, a.dtype))
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            L.append("| %s | %d | %s |  |  |  |  |  |  |  |  |  |" % (r["name"], r["batch"], r["error"]))
            continue
        ort = "%.1f" % r["ort_ms"] if "ort_ms" in r else "-"
        rat = "%.2f" % (r["ts16_ms"] / r["ort_ms"]) if "ort_ms" in r else "-"
        L.append("| %s | %d | %.1f | %.1f | %s | %s | %.2f | %.0f / %.0f | %.2f | %.0f / %.0f | %.3g %s (%.3g, %s) "
                 "| %.0f-%.0f |" % (
                     r["name"], r["batch"], r["ts16_ms"], r["ts32_ms"], ort, rat, r["ts16_ms"] / r["ts32_ms"],
                     r["ts16_rss"] / 2 ** 20, r["ts32_rss"] / 2 ** 20, r["ts16_rss"] / r["ts32_rss"],
                     r["weights16"] / 2 ** 20, r["weights32"] / 2 ** 20, r["max_abs"],
                     "ok" if r["match"] else "**over**", r["tol"], r["against"], r["load"][0], r["load"][1]))
    L.append("")
    return "\n".join(L) + "\n"


def write_section(path, text):
    old = open(path).read() if os.path.exists(path) else ""
    i = old.find("\n" + SECTION + "\n")
    if i >= 0:
        j = old.find("\n## ", i + 1)
        new = old[:i + 1] + text + (old[j:] if j >= 0 else "")
    else:
        new = old.rstrip("\n") + "\n\n" + text
    with open(path + ".tmp", "w") as f:
        f.write(new)
    os.replace(path + ".tmp", path)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,vit_b_16_l4")
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--dtype", choices=["float16", "bfloat16"], default="float16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "real_models"))
    ap.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--tsopt", default=os.path.join(ROOT, "build", "tsopt"))
    a = ap.parse_args(argv)
    if a.rounds < 1 or a.iters < 1 or a.threads < 1:
        sys.exit("half: --rounds, --iters and --threads must be >= 1")
    shapes = {n: s for n, s, _ in rm.bench_set()}
    models = a.models.split(",")
    unknown = [m for m in models if m not in shapes]
    if unknown:
        sys.exit("half: not in the bench set: %s" % ", ".join(unknown))
    started = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
    work = tempfile.mkdtemp(prefix="half.")
    rows = []
    for name in models:
        for b in [int(x) for x in a.batches.split(",")]:
            try:
                rows.append(one(a, name, shapes[name], b, work))
            except (SystemExit, RuntimeError, subprocess.SubprocessError) as e:
                rows.append({"name": name, "batch": b, "error": str(e).splitlines()[0][:200]})
                log(name, b, "failed:", rows[-1]["error"])
    text = section(a, rows, argv, started)
    print(text)
    if a.out:
        write_section(a.out, text)
    return 0 if all(r.get("match") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
