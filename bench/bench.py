#!/usr/bin/python3
"""tsopt against ONNX Runtime on every zoo model (and extra ONNX files).

    bench/bench.py [--batch16] [--rounds R] [--iters N] [--threads T] [--optimize [--opt-time S] [--min-time S]]
                   [--models a,b,...] [--no-profile] [--out BENCHMARKS.md]
                   [--tsopt PATH] [EXTRA.onnx ...] [--no-real | --real-only] [--real-models a,b,...]

For each model: export it (zoo), make inputs once (tsopt run --save-inputs),
then alternate `tsopt bench` and `node tools/ort/run.js` (same inputs, same
thread count, ORT with all graph optimizations) R times, A B A B ...; the
latency is the median of the per-round medians, the peak resident memory
the largest VmHWM either process reported.  At batch 1 `tsopt profile`
also reports how well the sum of the measured op costs predicts the
end-to-end latency.  Writes BENCHMARKS.md and bench/ratios.png (gnuplot).
Every number in BENCHMARKS.md comes from this script's run.
Then the real-model bench set (PyTorch exports, bench/real_models.py) writes
its own section, "## Real models"; --no-real skips it, --real-only runs only it.
"""
import argparse
import collections
import datetime
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORT_RUN = os.path.join(ROOT, "tools", "ort", "run.js")

# Batch-16 runs left out, with the reason (2 cores / ~23 GB machines).
SKIP16 = {
    "longformer": "batch 16 needs more than 4 GB of activations",
    "csrnet": "batch 16 takes minutes per run on 2 cores",
    "resnet3d18": "batch 16 takes minutes per run on 2 cores",
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, timeout, env=None):
    """stdout of cmd; raises RuntimeError with its last stderr line."""
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        raise RuntimeError("%s: %s" % (" ".join(cmd[:3]), last))
    log("   %.1fs  %s" % (time.time() - t, " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd)))
    return p.stdout


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON in output")


def machine():
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) * 1024
    osname = platform.platform()
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    osname = line.split("=", 1)[1].strip().strip('"') + ", Linux " + platform.release()
    except OSError:
        pass
    flags = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                fl = line.split()
                flags = ", ".join(x for x in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile") if x in fl)
                break
    return {"cpu": model, "cores": os.cpu_count(), "mem_gib": mem / 2**30, "os": osname, "isa": flags}


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def gflops_of(tsopt, path):
    out = run([tsopt, "info", path], 300)
    m = re.search(r"^GFLOPs:\s*([0-9.eE+-]+)", out, re.M)
    return float(m.group(1)) if m else float("nan")


def profile(tsopt, path, cache):
    out = run([tsopt, "profile", path, "--cache", cache, "--iters", "10"], 900)
    r = {"text": out}
    for key, pat in (("sum_ms", r"sum of costs:\s*([0-9.]+)"), ("e2e_ms", r"end-to-end:\s*([0-9.]+)"),
                     ("err_pct", r"prediction error:\s*([-+0-9.]+)%"), ("roof_pct", r"roofline:\s*([-+0-9.]+)%\)"),
                     ("iso_pct", r"isolated sum:.*error\s*([-+0-9.]+)%")):
        m = re.search(pat, out)
        r[key] = float(m.group(1)) if m else float("nan")
    rows = []
    for line in out.splitlines():
        m = re.match(r"^(\S.*?)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)%\s+[0-9.]+\s+\d+ measured", line)
        if m:
            rows.append((m.group(1).strip(), int(m.group(2)), float(m.group(3)), float(m.group(4))))
    r["top"] = rows[:3]
    r["by_op"] = {}
    for label, count, ms, share in rows:
        if not label.startswith("("):  # views cost nothing
            head = label.split("+")[0]
            r["by_op"][head] = r["by_op"].get(head, 0) + ms
    return r


def ort_by_op(a, path, inputs):
    """ORT's per-operator ms per run (its profiler; fused kernels mapped to their first op)."""
    out = run(["node", os.path.join(ROOT, "bench", "ort_profile.js"), path, "--inputs", inputs, "--iters", "5",
               "--threads", str(a.threads)], 900)
    return last_json(out)["op_ms"]


def bench_model(a, name, batch, path, work):
    """One model: inputs once, then R rounds of tsopt / ORT alternately."""
    inputs = os.path.join(work, "%s.b%d.in" % (name, batch))
    shutil.rmtree(inputs, ignore_errors=True)
    run([a.tsopt, "run", path, "--save-inputs", inputs, "--iters", "1"], 900)
    ts, ort = [], []
    for r in range(a.rounds):
        mt = ["--min-time", str(a.min_time)]
        ts.append(last_json(run([a.tsopt, "bench", path, "--iters", str(a.iters)] + mt
                                + ["--threads", str(a.threads), "--json"], 900)))
        ort.append(last_json(run(["node", ORT_RUN, path, "--inputs", inputs, "--iters", str(a.iters)] + mt
                                 + ["--threads", str(a.threads)], 900)))
    return {
        "inputs": inputs,
        "ts_ms": statistics.median(x["median_ms"] for x in ts),
        "ort_ms": statistics.median(x["median_ms"] for x in ort),
        "ts_rounds": [x["median_ms"] for x in ts],
        "ort_rounds": [x["median_ms"] for x in ort],
        "ts_rss": max(x["peak_rss_bytes"] for x in ts),
        "ort_rss": max(x["peak_rss_bytes"] for x in ort),
        "fallback": ts[0].get("fallback_steps", 0),
        "ts_wait": [x.get("wait_policy", "?") for x in ts],
    }


def fmt(x, nd=2):
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else "%.*f" % (nd, x)


def plot(rows, png, work):
    data = os.path.join(work, "ratios.dat")
    names = sorted({r["name"] for r in rows if "ratio" in r}, key=lambda n: [r["name"] for r in rows].index(n))
    with open(data, "w") as f:
        for i, n in enumerate(names):
            b1 = [r["ratio"] for r in rows if r["name"] == n and r["batch"] == 1 and "ratio" in r]
            b16 = [r["ratio"] for r in rows if r["name"] == n and r["batch"] == 16 and "ratio" in r]
            f.write('%d "%s" %s %s\n' % (i, n, b1[0] if b1 else "NaN", b16[0] if b16 else "NaN"))
    has16 = any(r["batch"] == 16 and "ratio" in r for r in rows)
    gp = os.path.join(work, "ratios.gp")
    with open(gp, "w") as f:
        f.write("""set terminal pngcairo size 1000,520 font ",10"
set output "%s"
set title "tsopt / ONNX Runtime median latency (lower is better; below 1.0 tsopt is faster)"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -35 scale 0
set ylabel "latency ratio tsopt / ORT"
set yrange [0:*]
set grid ytics
set key top left
plot "%s" using 3:xtic(2) title "batch 1"%s, 1 with lines lw 2 lc rgb "black" title "1.0"
""" % (png, data, ', "" using 4 title "batch 16"' if has16 else ""))
    subprocess.run(["gnuplot", gp], check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("extra", nargs="*", help="further ONNX files (static shapes)")
    ap.add_argument("--batch16", action="store_true", help="also every zoo model at batch 16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--models", default="", help="comma-separated zoo models (default: all)")
    ap.add_argument("--no-profile", action="store_true", help="skip the cost-model prediction check")
    ap.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--tsopt", default=os.path.join(ROOT, "build", "tsopt"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--optimize", action="store_true",
                    help="instead: tsopt optimize on the zoo models (batch 1; --batch16 adds 16), original vs optimized vs ORT; "
                         "writes only the 'Optimizer' section (bench/bench_optimize.py)")
    ap.add_argument("--opt-time", type=float, default=30, help="--optimize: search time limit per model (s)")
    ap.add_argument("--transforms", default="",
                    help="--optimize: passed to tsopt optimize (e.g. pet, einnet; default: every source)")
    ap.add_argument("--min-time", type=float, default=1.0,
                    help="each `tsopt bench` and ORT run also runs until its timed runs add up to S seconds "
                         "(the first runs of a few-millisecond model are slower than its steady state)")
    ap.add_argument("--no-real", action="store_true", help="skip the real-model set (bench/real_models.py)")
    ap.add_argument("--real-only", action="store_true", help="only the real-model set")
    ap.add_argument("--real-models", default="", help="comma-separated subset of the real-model set")
    ap.add_argument("--real-cache", default=os.path.join(ROOT, "build", "real_models"),
                    help="exported real models (bench/real_models.py --cache)")
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import real_models
    real_argv = ["--rounds", str(a.rounds), "--iters", str(a.iters), "--min-time", str(a.min_time),
                 "--threads", str(a.threads), "--out", a.out,
                 "--tsopt", a.tsopt, "--cache", a.real_cache] + (["--models", a.real_models] if a.real_models else [])
    if a.real_only:
        sys.exit(real_models.main(real_argv, load))
    os.makedirs(a.work, exist_ok=True)
    cache = os.path.join(a.work, "costs.tsv")
    if a.optimize:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import bench_optimize
        a.cache, a.ort_run = cache, ORT_RUN
        bench_optimize.main(a, sys.argv[1:], run, last_json, log, load)
        return
    started = datetime.datetime.now(datetime.timezone.utc)
    load0 = load()
    t0 = time.time()
    # measured again each time (the cache keeps the larger value: one taken under load is low)
    peak = last_json(run([a.tsopt, "peak", "--cache", cache, "--remeasure", "--json"], 300))
    zoo = [l.split()[0] for l in run([a.tsopt, "zoo", "list"], 60).splitlines()[1:] if l.strip()]
    if a.models:
        zoo = [m for m in zoo if m in a.models.split(",")]
    jobs = [(m, 1, None) for m in zoo]
    if a.batch16:
        jobs += [(m, 16, None) for m in zoo]
    jobs += [(os.path.splitext(os.path.basename(p))[0], 1, os.path.abspath(p)) for p in a.extra]
    rows = []
    for name, batch, path in jobs:
        r = {"name": name, "batch": batch, "src": "file" if path else "zoo"}
        rows.append(r)
        if batch == 16 and name in SKIP16:
            r["skip"] = SKIP16[name]
            log("-- %s batch 16: skipped (%s)" % (name, r["skip"]))
            continue
        log("-- %s batch %d (load %s)" % (name, batch, load()))
        try:
            if not path:
                path = os.path.join(a.work, "%s.b%d.onnx" % (name, batch))
                run([a.tsopt, "zoo", "export", name, "-o", path, "--batch", str(batch)], 600)
            r["gflop"] = gflops_of(a.tsopt, path)
            r.update(bench_model(a, name, batch, path, a.work))
            r["ratio"] = r["ts_ms"] / r["ort_ms"]
            if batch == 1 and not a.no_profile:
                r["prof"] = profile(a.tsopt, path, cache)
                if r["ratio"] > 1.0:
                    r["ort_ops"] = ort_by_op(a, path, r["inputs"])
            log("   tsopt %.3f ms, ORT %.3f ms, ratio %.3f" % (r["ts_ms"], r["ort_ms"], r["ratio"]))
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            r["error"] = str(e).splitlines()[0][:200]
            log("   failed: " + r["error"])
        if r.get("inputs"):
            shutil.rmtree(r["inputs"], ignore_errors=True)
    elapsed = time.time() - t0
    load1 = load()
    png = os.path.join(ROOT, "bench", "ratios.png")
    plot(rows, png, a.work)
    write_md(a, rows, peak, machine(), started, load0, load1, elapsed, cache)
    log("wrote %s and %s (%.0f s)" % (a.out, png, elapsed))
    if not a.no_real:
        real_models.main(real_argv, load)


def write_md(a, rows, peak, mach, started, load0, load1, elapsed, cache):
    pf = peak["peak_gflops"]
    L = []
    L.append("# Benchmarks: tsopt vs ONNX Runtime\n")
    L.append("Generated by `bench/bench.py` (`make bench`); every number below comes from that one run. "
             "Do not edit by hand.\n")
    L.append("## Machine\n")
    L.append("- CPU: %s, %d cores (%s)" % (mach["cpu"], mach["cores"], mach["isa"]))
    L.append("- memory: %.1f GiB; OS: %s" % (mach["mem_gib"], mach["os"]))
    L.append("- measured peak: %.1f GFLOP/s (best of 1024³ and 2048³ float32 matmuls and a 256-channel 3x3 conv on 56x56, fastest of 15 runs each in tsopt's runtime), "
             "%.1f GB/s (parallel memcpy) — `tsopt peak`" % (pf, peak["peak_gbps"]))
    L.append("- date: %s; run took %.0f s" % (started.strftime("%Y-%m-%d %H:%M UTC"), elapsed))
    L.append("- load average (1/5/15 min) before: %s, after: %s. The machine is shared; with a load above "
             "its core count every number here is noisy (tsopt and ORT alternate, so both see the same noise)."
             % (load0, load1))
    waits = collections.Counter(w for r in rows for w in r.get("ts_wait", []))
    L.append("- environment: tsopt's idle OpenMP threads spin while they get their cores and sleep while other "
             "processes need them, decided as it runs (docs/runtime.md, Threading); policy in this run: %s. "
             "ORT runs with its own defaults (`graphOptimizationLevel: 'all'`, intra-op threads = --threads).\n"
             % (", ".join("%s in %d runs" % kv for kv in sorted(waits.items())) or "no runs"))
    L.append("## Commands\n")
    L.append("```")
    L.append("bench/bench.py " + " ".join(sys.argv[1:]))
    L.append("# per model (R = %d rounds, alternating):" % a.rounds)
    L.append("tsopt zoo export NAME -o M.onnx --batch B")
    L.append("tsopt run M.onnx --save-inputs IN --iters 1")
    L.append("tsopt bench M.onnx --iters %d --min-time %g --threads %d --json" % (a.iters, a.min_time, a.threads))
    L.append("node tools/ort/run.js M.onnx --inputs IN --iters %d --min-time %g --threads %d" % (
        a.iters, a.min_time, a.threads))
    if not a.no_profile:
        L.append("tsopt profile M.onnx --cache %s --iters 10   # batch 1 only" % os.path.relpath(cache, ROOT))
    L.append("```\n")
    L.append("Latency: median of the %d per-round medians (each of at least %d timed runs after warm-up, more until they "
             "add up to --min-time seconds: a few-millisecond model's first runs are slower than its steady state). "
             "Peak RSS: VmHWM of each process (/proc/self/status), the largest over the rounds, measured "
             "the same way by `tsopt bench` and `run.js`. GFLOP/s = the model's FLOPs (`tsopt info`, a "
             "multiply-add counts 2, convolutions counted as direct convolution) / median latency; %%peak = that / "
             "the measured peak. Winograd convolutions (3x3, stride 1) do fewer multiplications than the direct "
             "count, so a model made of them can show more than 100%%.\n" % (a.rounds, a.iters))
    L.append("## Results\n")
    L.append("| model | batch | GFLOP | tsopt ms | ORT ms | tsopt/ORT | tsopt GFLOP/s | %peak | ORT GFLOP/s "
             "| tsopt RSS MiB | ORT RSS MiB |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "skip" in r or "error" in r:
            L.append("| %s | %d | — | — | — | — | — | — | — | — | — |" % (r["name"], r["batch"]))
            continue
        gf = r["gflop"]
        L.append("| %s | %d | %s | %.3f | %.3f | **%.3f** | %s | %s | %s | %.0f | %.0f |" % (
            r["name"], r["batch"], fmt(gf, 3), r["ts_ms"], r["ort_ms"], r["ratio"], fmt(gf / r["ts_ms"] * 1e3, 1),
            fmt(100 * gf / r["ts_ms"] * 1e3 / pf, 1), fmt(gf / r["ort_ms"] * 1e3, 1), r["ts_rss"] / 2**20,
            r["ort_rss"] / 2**20))
    b1 = [r["ratio"] for r in rows if r["batch"] == 1 and r["src"] == "zoo" and "ratio" in r]
    if b1:
        gm = math.exp(sum(math.log(x) for x in b1) / len(b1))
        miss = [r["name"] for r in rows if r["batch"] == 1 and r["src"] == "zoo" and r.get("ratio", 0) > 1.0]
        L.append("\nGeometric mean of tsopt/ORT at batch 1 over %d zoo models: **%.3f** (target ≤ 0.9). "
                 "Models with ratio > 1.0: %s.\n" % (len(b1), gm, ", ".join(miss) if miss else "none"))
    L.append("![tsopt/ORT latency ratios](bench/ratios.png)\n")
    notes = [r for r in rows if "skip" in r or "error" in r]
    if notes:
        L.append("Not measured:\n")
        for r in notes:
            L.append("- %s batch %d: %s" % (r["name"], r["batch"], r.get("skip") or "failed: " + r["error"]))
        L.append("")
    losers = [r for r in rows if r.get("ratio", 0) > 1.0 and "prof" in r]
    if losers:
        L.append("### Where tsopt loses\n")
        L.append("For each model slower than ORT: by how much; tsopt's most expensive fused groups (`tsopt "
                 "profile`, share of the summed cost); and per operator (a fused kernel counted under the op it "
                 "starts from), tsopt's summed group costs against ORT's own profiler (`bench/ort_profile.js`, "
                 "5 runs; profiling adds overhead to ORT, so its numbers are upper bounds), the largest "
                 "differences first.\n")
        for r in losers:
            top = "; ".join("%s ×%d %.2f ms (%.0f%%)" % t for t in r["prof"]["top"])
            L.append("- **%s** (batch %d): %.2f× ORT (+%.3f ms). Top groups: %s" % (
                r["name"], r["batch"], r["ratio"], r["ts_ms"] - r["ort_ms"], top))
            if "ort_ops" in r:
                ts_ops, ort_ops = r["prof"]["by_op"], r["ort_ops"]
                diff = sorted(set(ts_ops) | set(ort_ops), key=lambda o: ort_ops.get(o, 0) - ts_ops.get(o, 0))
                L.append("  - per op, tsopt vs ORT ms: " + "; ".join(
                    "%s %.3f vs %.3f" % (o, ts_ops.get(o, 0), ort_ops.get(o, 0)) for o in diff[:4]))
        L.append("")
    prof = [r for r in rows if "prof" in r]
    if prof:
        L.append("## Cost model: sum of op costs vs end-to-end\n")
        L.append("`tsopt profile` times each fused group inside the model's plan (per-step timer: a group's cost is "
                 "the sum of its steps' medians over 10 timed runs, not scaled; docs/runtime.md) and caches it by "
                 "(ops, attributes, shapes, layout); the sum over the groups is the prediction. It is compared with "
                 "the median of untimed runs alternating with the timed ones (same process) and with the median "
                 "`tsopt bench` latency of the table above (other processes, alternating with ORT). "
                 "Error = (sum − measured) / measured. The isolated column sums each distinct group measured as a "
                 "subgraph of its own (only the group's own steps: not the conversions at the cut-out graph's "
                 "boundary; a convolution or pooling fed by a convolution is run after that producer), which is "
                 "what the optimizer uses for groups never timed in a plan; the roofline column is the analytic "
                 "fallback (max of FLOPs/peak and bytes/bandwidth) summed the same way.\n")
        L.append("| model | groups sum ms | end-to-end ms (profile) | error | bench median ms | error vs bench "
                 "| isolated error | roofline error |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        errs, berrs = [], []
        for r in prof:
            p = r["prof"]
            berr = 100.0 * (p["sum_ms"] - r["ts_ms"]) / r["ts_ms"]
            errs.append(abs(p["err_pct"]))
            berrs.append(abs(berr))
            L.append("| %s | %.3f | %.3f | %+.1f%% | %.3f | %+.1f%% | %+.1f%% | %+.1f%% |" % (
                r["name"], p["sum_ms"], p["e2e_ms"], p["err_pct"], r["ts_ms"], berr, p["iso_pct"], p["roof_pct"]))
        L.append("\nWithin ±15%%: %d of %d models against the profile's untimed runs (median |error| %.1f%%), "
                 "%d of %d against the bench median (median |error| %.1f%%).\n" % (
                     sum(1 for e in errs if e <= 15), len(errs), statistics.median(errs),
                     sum(1 for e in berrs if e <= 15), len(berrs), statistics.median(berrs)))
    # the sections other scripts write (Optimizer, Real models, Under load,
    # ...) survive a rerun of the main benchmark: everything from the first
    # section this function does not write to the end of the file
    own = {l.strip() for l in L if l.startswith("## ")}
    tail = ""
    if os.path.exists(a.out):
        old = open(a.out).read()
        for m in re.finditer(r"^## .*$", old, re.M):
            if m.group(0) not in own:
                tail = old[m.start():]
                break
    with open(a.out + ".tmp", "w") as f:
        f.write("\n".join(L) + "\n" + ("\n" + tail if tail else ""))
    os.replace(a.out + ".tmp", a.out)


if __name__ == "__main__":
    main()
