#!/usr/bin/python3
"""tsopt against ONNX Runtime on the real-model bench set (PyTorch exports).

    bench/real_models.py [--models a,b,...] [--rounds R] [--iters N] [--min-time S] [--threads T]
                         [--check-only] [--cache DIR] [--out BENCHMARKS.md] [--tsopt PATH]

The set is tools/export_torchvision.py's (`--list --set bench`): torchvision
classification, segmentation and video models and a torch.nn
TransformerEncoder, random weights (seed 0), dynamic batch, the opset this
PyTorch exports by default.  Exports are cached in --cache (default
build/real_models; delete a file to export it again).

Per model: export (cached); `tsopt run` on seeded random inputs saving
inputs and outputs; ONNX Runtime on the same inputs; `tsopt compare`
(rtol 1e-3, atol 1e-4 scaled by the largest output magnitude when that is
below 1: randomly initialized nets can have outputs ~1e-6, where a fixed atol
would accept anything).  Then, unless --check-only, R rounds of `tsopt bench`
and `node tools/ort/run.js` alternately (A B A B ...): latency = median of
the per-round medians; the plan's roofline limit (`tsopt profile --roofline`)
and the share of tsopt's latency it is; peak memory = the largest VmHWM of each engine's
process over the rounds, ORT's minus that of a bare `node` that only loads
onnxruntime-node (what the runtime itself holds, not node's).  Writes the
"## Real models" section of BENCHMARKS.md (bench/bench.py calls this after
the zoo table; `make bench`).

--check-only only checks that every model runs and matches ORT, prints one
line per model and exits 1 if any fails (tests/models/real_models.sh).
"""
import argparse
import datetime
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORT_DIR = os.path.join(ROOT, "tools", "ort")
ORT_RUN = os.path.join(ORT_DIR, "run.js")
EXPORT = os.path.join(ROOT, "tools", "export_torchvision.py")
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
SECTION = "## Real models"
RTOL, ATOL = 1e-3, 1e-4


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, timeout, ok=(0,)):
    """stdout of cmd; raises RuntimeError with its last output line."""
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode not in ok:
        last = ((p.stderr.strip() or p.stdout.strip()).splitlines() or ["exit %d" % p.returncode])[-1]
        raise RuntimeError("%s: %s" % (os.path.basename(cmd[1] if cmd[0] in ("node", PYTHON) else cmd[0]), last))
    log("   %.1fs  %s" % (time.time() - t, " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd)))
    return p.stdout


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON in output")


def bench_set():
    """[(name, shape without batch, what it covers)] from the export script."""
    out = run([PYTHON, EXPORT, "--list", "--set", "bench"], 120)
    return [(l.split(" ", 2)[0], l.split(" ", 2)[1], l.split(" ", 2)[2]) for l in out.splitlines() if l.strip()]


def export(name, cache):
    path = os.path.join(cache, name + ".onnx")
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
        run([PYTHON, EXPORT, name, path], 1800)
    return path


def bare_node_rss():
    """VmHWM of a node process that only loads onnxruntime-node (the lowest of 3)."""
    js = ("require(%s);const m=/VmHWM:\\s*(\\d+)\\s*kB/.exec(require('fs').readFileSync('/proc/self/status','utf8'));"
          "console.log(Number(m[1])*1024)" % json.dumps(os.path.join(ORT_DIR, "node_modules", "onnxruntime-node")))
    return min(int(run(["node", "-e", js], 120).split()[-1]) for _ in range(3))


def check(a, name, path, shape, work):
    """Runs tsopt and ORT on the same seeded inputs; the comparison's numbers."""
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    binding = "input:1x" + shape
    run([a.tsopt, "run", path, "--input", binding, "--save-inputs", d + "/in", "--save-outputs", d + "/ts",
         "--iters", "1"], 1800)
    run(["node", ORT_RUN, path, "--inputs", d + "/in", "--save-outputs", d + "/ort"], 1800)
    import numpy as np
    scale = max(float(np.abs(np.load(os.path.join(d, "ort", f))).max())
                for f in os.listdir(os.path.join(d, "ort")) if f.endswith(".npy"))
    atol = ATOL * min(1.0, scale)
    out = run([a.tsopt, "compare", d + "/ts", d + "/ort", "--rtol", str(RTOL), "--atol", "%.3g" % atol], 300,
              ok=(0, 1))
    errs = [float(x) for x in re.findall(r"max_abs (\S+)", out)]
    match = re.search(r"^(\d+) of (\d+) tensors match", out, re.M)
    ok = bool(match) and match.group(1) == match.group(2) and int(match.group(2)) > 0
    return {"inputs": d + "/in", "max_abs": max(errs) if errs else float("nan"), "scale": scale, "atol": atol,
            "match": ok, "compare": out.strip().splitlines()[0] if out.strip() else ""}


def bench(a, path, shape, inputs):
    ts, ort = [], []
    for _ in range(a.rounds):
        mt = ["--min-time", str(a.min_time)]
        ts.append(last_json(run([a.tsopt, "bench", path, "--input", "input:1x" + shape, "--iters", str(a.iters)] + mt
                                + ["--threads", str(a.threads), "--json"], 1800)))
        ort.append(last_json(run(["node", ORT_RUN, path, "--inputs", inputs, "--iters", str(a.iters)] + mt
                                 + ["--threads", str(a.threads)], 1800)))
    # the plan's roofline (sum over its steps of max(bytes / bandwidth,
    # FLOPs / peak), `tsopt profile --roofline`): what % of it the median is
    roof = last_json(run([a.tsopt, "profile", path, "--input", "input:1x" + shape, "--roofline", "--iters", "5",
                          "--json"], 1800))
    return {
        "limit_ms": roof["limit_ms"],
        "memory_limit_ms": roof["memory_limit_ms"],
        "ts_ms": statistics.median(x["median_ms"] for x in ts),
        "ort_ms": statistics.median(x["median_ms"] for x in ort),
        "ts_rss": max(x["peak_rss_bytes"] for x in ts),
        "ort_rss": max(x["peak_rss_bytes"] for x in ort),
        "fallback": ts[0].get("fallback_steps", 0),
        "ts_wait": [x.get("wait_policy", "?") for x in ts],
    }


def measure(a, log_load=None):
    """Checks (and unless a.check_only benches) every model of the set; the rows."""
    models = bench_set()
    if a.models:
        want = a.models.split(",")
        unknown = [m for m in want if m not in [n for n, _, _ in models]]
        if unknown:
            raise SystemExit("real_models: not in the bench set: %s" % ", ".join(unknown))
        models = [m for m in models if m[0] in want]
    work = tempfile.mkdtemp(prefix="real_models.")
    rows = []
    try:
        for name, shape, what in models:
            log("-- %s (input 1x%s)%s" % (name, shape, " (load %s)" % log_load() if log_load else ""))
            r = {"name": name, "shape": "1x" + shape, "what": what}
            rows.append(r)
            try:
                path = export(name, a.cache)
                r.update(check(a, name, path, shape, work))
                log("   %s, max |err| %.3g (atol %.3g)" % ("match" if r["match"] else "MISMATCH", r["max_abs"], r["atol"]))
                if not a.check_only:
                    r.update(bench(a, path, shape, r["inputs"]))
                    r["ratio"] = r["ts_ms"] / r["ort_ms"]
                    r["pct_limit"] = 100 * r["limit_ms"] / r["ts_ms"]
                    r["pct_mem"] = 100 * r["memory_limit_ms"] / r["ts_ms"]
                    log("   tsopt %.3f ms, ORT %.3f ms, ratio %.3f, roofline limit %.3f ms (%.1f%% of it; memory "
                        "alone %.3f ms, %.1f%%)" % (r["ts_ms"], r["ort_ms"], r["ratio"], r["limit_ms"], r["pct_limit"],
                                                   r["memory_limit_ms"], r["pct_mem"]))
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                r["error"] = str(e).splitlines()[0][:200]
                log("   failed: " + r["error"])
            shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def section(a, rows, bare, started, elapsed, argv):
    L = [SECTION + "\n"]
    L.append("Generated by `bench/real_models.py` (called by `bench/bench.py`, `make bench`) on %s, %.0f s. The set is "
             "`tools/export_torchvision.py --list --set bench`: PyTorch exports (opset as PyTorch exports, dynamic "
             "batch, random weights from seed 0) run at batch 1, each input size in the table.\n"
             % (started.strftime("%Y-%m-%d %H:%M UTC"), elapsed))
    L.append("```")
    L.append("bench/real_models.py " + " ".join(argv))
    L.append("# per model (R = %d rounds, alternating):" % a.rounds)
    L.append("tools/export_torchvision.py NAME M.onnx")
    L.append("tsopt run M.onnx --input input:SHAPE --save-inputs IN --save-outputs TS")
    L.append("node tools/ort/run.js M.onnx --inputs IN --save-outputs ORT")
    L.append("tsopt compare TS ORT --rtol %g --atol A   # A = %g x min(1, max |ORT output|)" % (RTOL, ATOL))
    L.append("tsopt profile M.onnx --input input:SHAPE --roofline --iters 5 --json")
    L.append("tsopt bench M.onnx --input input:SHAPE --iters %d --min-time %g --threads %d --json" % (
        a.iters, a.min_time, a.threads))
    L.append("node tools/ort/run.js M.onnx --inputs IN --iters %d --min-time %g --threads %d" % (
        a.iters, a.min_time, a.threads))
    L.append("```\n")
    L.append("Latency: median of the per-round medians (each process: at least --iters timed runs, more until they "
             "add up to --min-time seconds, for both engines: the first runs of a few-millisecond model are slower "
             "than its steady state). Peak memory: VmHWM of each engine's process, the largest over "
             "the rounds; ORT's is its process minus a bare `node` that only loads onnxruntime-node (%.0f MiB here). "
             "Max error: the largest |tsopt − ORT| over the outputs.\n" % (bare / 2**20))
    L.append("Limit: the plan's roofline, `tsopt profile M --roofline`: the sum over its steps of max(bytes / "
             "bandwidth, FLOPs / peak) with `tsopt peak`'s figures (bytes: each step's inputs read and outputs "
             "written once, every weight once per run; bandwidth: that of the cache level the step's bytes fit in, "
             "the weights' from where all the run's weights fit); % of limit = limit / tsopt's latency; % of memory "
             "limit = the bytes' time alone / tsopt's latency.\n")
    L.append("| model | input | covers | tsopt ms | ORT ms | tsopt/ORT | limit ms | % of limit | % of memory limit | max error | matches "
             "| tsopt MiB | ORT MiB | memory tsopt/ORT |")
    L.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            L.append("| %s | %s | %s | — | — | — | — | — | — | — | failed: %s | — | — | — |" % (
                r["name"], r["shape"], r["what"], r["error"].replace("|", "/")))
            continue
        ort_mem = r["ort_rss"] - bare
        L.append("| %s | %s | %s | %.3f | %.3f | **%.3f** | %.3f | %.1f | %.1f | %.2g | %s | %.0f | %.0f | %.2f |" % (
            r["name"], r["shape"], r["what"], r["ts_ms"], r["ort_ms"], r["ratio"], r["limit_ms"], r["pct_limit"],
            r["pct_mem"],
            r["max_abs"], "yes" if r["match"] else "**no**", r["ts_rss"] / 2**20, ort_mem / 2**20,
            r["ts_rss"] / ort_mem if ort_mem > 0 else float("nan")))
    ok = [r for r in rows if "ratio" in r]
    if ok:
        gm = math.exp(sum(math.log(r["ratio"]) for r in ok) / len(ok))
        worst = max(ok, key=lambda r: r["ratio"])
        over = [r["name"] for r in ok if r["ratio"] > 1.05]
        mem = [(r["ts_rss"] / (r["ort_rss"] - bare), r["name"]) for r in ok if r["ort_rss"] > bare]
        L.append("\nGeometric mean of tsopt/ORT over %d models: **%.3f**; max **%.3f** (%s). Above 1.05: %s. "
                 "Matching ORT: %d of %d.%s\n" % (
                     len(ok), gm, worst["ratio"], worst["name"], ", ".join(over) if over else "none",
                     sum(1 for r in rows if r.get("match")), len(rows),
                     " Peak memory tsopt/ORT: max %.2f (%s)." % max(mem) if mem else ""))
    bad = [r for r in rows if "error" in r]
    if bad:
        L.append("Not measured:\n")
        L.extend("- %s: %s" % (r["name"], r["error"]) for r in bad)
        L.append("")
    return "\n".join(L) + "\n"


def keep_section(path):
    """The real-model section of path, '' if none (bench.py keeps it when it rewrites the file)."""
    if not os.path.exists(path):
        return ""
    old = open(path).read()
    i = old.find("\n" + SECTION + "\n")
    if i < 0:
        return ""
    j = old.find("\n## ", i + 1)
    return old[i + 1:j + 1 if j >= 0 else len(old)]


def write_section(path, text):
    """Replaces the section in path (or appends it) through a temporary file."""
    old = open(path).read() if os.path.exists(path) else ""
    kept = keep_section(path)
    if kept:  # a section after it keeps its blank line
        new = old.replace(kept, text.rstrip("\n") + "\n\n" if kept.endswith("\n\n") else text)
    else:
        new = old.rstrip("\n") + ("\n\n" if old else "") + text
    with open(path + ".tmp", "w") as f:
        f.write(new)
    os.replace(path + ".tmp", path)


def args_parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="", help="comma-separated subset of the bench set")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    # both engines time more runs until they add up to this many seconds: a
    # few-millisecond model's first runs are slower than its steady state
    # (lraspp: 10-12 ms medians over 10 runs, 6.3-7.2 ms over 2 s, either engine)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--check-only", action="store_true", help="only check that each model runs and matches ORT")
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "real_models"), help="exported models")
    ap.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--tsopt", default=os.path.join(ROOT, "build", "tsopt"))
    return ap


def main(argv, log_load=None):
    a = args_parser().parse_args(argv)
    if a.rounds < 1 or a.iters < 1 or a.threads < 1:
        raise SystemExit("real_models: --rounds, --iters and --threads must be >= 1")
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.time()
    bare = 0 if a.check_only else bare_node_rss()
    rows = measure(a, log_load)
    if a.check_only:
        for r in rows:
            print("%-30s %s" % (r["name"], "failed: " + r["error"] if "error" in r else "%s max_abs %.3g (atol %.3g)" % (
                "OK  " if r["match"] else "FAIL", r["max_abs"], r["atol"])))
        good = sum(1 for r in rows if r.get("match"))
        print("%d of %d models match ONNX Runtime (rtol %g, atol %g scaled)" % (good, len(rows), RTOL, ATOL))
        return 0 if rows and good == len(rows) else 1
    write_section(a.out, section(a, rows, bare, started, time.time() - t0, argv))
    log("wrote the real-model section of %s (%.0f s)" % (a.out, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
