#!/usr/bin/python3
"""`tsopt optimize --target ort` measured in ONNX Runtime (docs/optimize.md, "Targets").

    bench/ort_target.py [--set zoo|real] [--models a,b] [--time-limit S] [--b4-time-limit S] [--threads T]
                        [--procs N] [--rounds R] [--tsopt PATH] [--cache DIR] [--json F] [--out BENCHMARKS.md]
                        [--copied-ratio-1]

Per model (zoo: `tsopt zoo export NAME --batch 1`; real: bench/real_models.py's
exports, dynamic batch):
  1. `tsopt optimize M --target ort --time-limit S --json`: what was written, why,
     and the prediction (cost_before_ms / cost_after_ms: the original timed whole
     before the search, a candidate at that time scaled by its region-cache sum's
     ratio to the original's; the region sums where the original was not timed whole);
  2. gain: N separate node processes (tools/ort/serve.js `pair`), each timing the
     original and the written file in R alternating rounds in one ONNX Runtime
     process (idle pools do not spin: session.intra_op.allow_spinning 0);
     ratio per process = the Hodges-Lehmann estimate over its rounds of the round's
     original median / written median (src/opt/keep.c: each round sees one load, so the
     per-round ratios are far steadier than the ratio of whole medians on a loaded
     machine); the median of the N;
  3. prediction error: the original's prediction and, where optimize timed its
     best graphs whole (whole_before_ms), that whole-graph median, each against a separate ORT
     process's median (serve.js `time`, 2 s of runs); and the predicted gain
     (whole_before / whole_after, else the predictions') against the
     measured ratio;
  4. match: original and written run by ORT on the same random inputs
     (serve.js `compare`, rtol 1e-3, atol 1e-4) at batch 1 and 4 -- dynamic-batch
     models as written; zoo models (exported at a fixed batch) exported at batch 4
     and optimized again (--b4-time-limit; 0: not checked at batch 4).
Writes the "## Optimized for ONNX Runtime" section of --out (other sections kept)
and every number as JSON (--json).
"""
import argparse
import datetime
import filecmp
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVE = os.path.join(ROOT, "tools", "ort", "serve.js")
SECTION = "## Optimized for ONNX Runtime"
sys.path.insert(0, os.path.join(ROOT, "bench"))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def serve(requests, timeout=1800):
    """Replies (fields after 'ok') of one serve.js process given the request lines."""
    p = subprocess.run(["node", SERVE], input="".join("\t".join(map(str, r)) + "\n" for r in requests),
                       capture_output=True, text=True, timeout=timeout)
    lines = p.stdout.strip().splitlines()
    if not lines or not lines[0].startswith("ready"):
        raise RuntimeError("serve.js did not start: " + p.stderr.strip()[-300:])
    out = []
    for l in lines[1:]:
        f = l.split("\t")
        if f[0] != "ok":
            raise RuntimeError("serve.js: " + l[:300])
        out.append(f[1:])
    if len(out) < len(requests):  # the server died mid-way (killed, out of memory)
        raise RuntimeError("serve.js answered %d of %d requests (exit %d): %s" % (
            len(out), len(requests), p.returncode, p.stderr.strip()[-300:] or "no message"))
    return out


def hodges_lehmann(x, back=lambda v: v):
    """The median of the Walsh averages (x_i + x_j) / 2, i <= j (keep.c's estimate)."""
    return back(statistics.median((x[i] + x[j]) / 2 for i in range(len(x)) for j in range(i, len(x))))


def optimize(a, model, out, limit):
    cmd = [a.tsopt, "optimize", model, "-o", out, "--target", "ort", "--time-limit", str(limit), "--json"]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit + 600)
    if p.returncode:
        raise RuntimeError("optimize: " + (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
    log("   %.0f s  optimize %s" % (time.time() - t, os.path.basename(model)))
    return json.loads(p.stdout.strip().splitlines()[-1])


def procs_text(r):
    """The processes' ratios, or why there are none."""
    return "copied: 1 by construction" if r.get("copied") else " ".join("%.3f" % x for x in r["ratios"])


def measure(a, name, model, work):
    r = {"model": name}
    out = os.path.join(work, name + ".ort.onnx")
    j = optimize(a, model, out, a.time_limit)
    r.update(written=j["written"], reason=j["reason"], rewrites=j.get("rewrites", {}), ort_version=j.get("ort_version"),
             predicted_before_ms=j["cost_before_ms"], predicted_after_ms=j["cost_after_ms"],
             whole_before_ms=j.get("whole_before_ms"), whole_after_ms=j.get("whole_after_ms"),
             whole_candidates=j.get("whole_candidates", 0))
    th = a.threads or os.cpu_count()
    ratios, meds = [], []
    # --copied-ratio-1: a model written as its input file byte for byte runs
    # the same model; its ratio is 1 by construction, not timed
    copied = a.copied_ratio_1 and filecmp.cmp(model, out, shallow=False)
    for _ in range(0 if copied else a.procs):  # separate processes: the median of their ratios
        f = serve([("pair", model, out, "-", th, a.rounds, 100)])[0]
        ma, mb = float(f[0]), float(f[1])
        ratios.append(hodges_lehmann([math.log(float(x.split()[2]) / float(x.split()[3])) for x in f[6:]], math.exp))
        meds.append((ma, mb))
    r["copied"] = copied
    r["ratios"] = ratios or [1.0]
    r["ratio"] = statistics.median(r["ratios"])
    # the separate process's first request, and a second one in it: optimize's
    # anchor is timed in a peer that has run hundreds of sessions, and the zoo's
    # low anchors (nasrnn -18 %, longformer -16 %, resnet18 -12 %, 12-07) are
    # not the import against the file (those zoo files are tsopt's import byte
    # for byte): is it a fresh process's first request?
    sep, warm = (float(f[0]) for f in serve([("time", model, "-", th, 2000), ("time", model, "-", th, 2000)]))
    r["separate_before_ms"] = sep
    r["ort_before_ms"] = statistics.median(m[0] for m in meds) if meds else sep
    r["ort_after_ms"] = statistics.median(m[1] for m in meds) if meds else sep
    r["separate_second_ms"] = warm
    r["prediction_error"] = r["predicted_before_ms"] / sep - 1
    r["prediction_error_second"] = r["predicted_before_ms"] / warm - 1
    r["whole_error"] = r["whole_before_ms"] / sep - 1 if r["whole_before_ms"] else None
    # the gain optimize expected of what it wrote (1 for the original)
    if r["written"] != "optimized":
        r["predicted_gain"] = 1.0
    elif r["whole_before_ms"]:
        r["predicted_gain"] = r["whole_before_ms"] / r["whole_after_ms"]
    else:
        r["predicted_gain"] = r["predicted_before_ms"] / r["predicted_after_ms"]
    c = serve([("compare", model, out, "-", th), ("compare", model, out, "-:4", th)])
    r["error_b1"] = float(c[0][0])
    r["error_b4"] = float(c[1][0])
    if a.set == "zoo" and a.b4_time_limit <= 0:  # not checked at batch 4
        r["error_b4"] = float("nan")
    elif a.set == "zoo":  # fixed batch: batch 4 exported and optimized on its own
        m4, o4 = os.path.join(work, name + ".b4.onnx"), os.path.join(work, name + ".b4.ort.onnx")
        subprocess.run([a.tsopt, "zoo", "export", name, "-o", m4, "--batch", "4"], check=True, capture_output=True)
        j4 = optimize(a, m4, o4, a.b4_time_limit)
        r["written_b4"] = j4["written"]
        r["error_b4"] = float(serve([("compare", m4, o4, "-", th)])[0][0])
    r["match"] = r["error_b1"] <= 1 and not r["error_b4"] > 1
    log("   %s: %s, ORT %.3f -> %.3f ms (x%.3f; processes %s; predicted x%.3f), prediction %.3f ms, whole %s, "
        "separate %.3f (%+.1f%%; its second request %.3f, %+.1f%%), match b1 %.3g b4 %.3g" % (
            name, r["written"], r["ort_before_ms"], r["ort_after_ms"], r["ratio"], procs_text(r),
            r["predicted_gain"], r["predicted_before_ms"],
            "%.3f" % r["whole_before_ms"] if r["whole_before_ms"] else "-", sep, 100 * r["prediction_error"],
            warm, 100 * r["prediction_error_second"], r["error_b1"], r["error_b4"]))
    return r


def section(a, rows, argv, started, elapsed):
    ok = [r for r in rows if "ratio" in r]
    gm = math.exp(statistics.mean(math.log(r["ratio"]) for r in ok)) if ok else float("nan")
    within = sum(abs(r["prediction_error"]) <= 0.15 for r in ok)
    within_second = sum(abs(r["prediction_error_second"]) <= 0.15 for r in ok)
    whole = [r for r in ok if r.get("whole_error") is not None]
    within_whole = sum(abs(r["whole_error"]) <= 0.15 for r in whole)
    load = os.getloadavg()
    t = [SECTION, "",
         "`%s` (%s set), %s, %s UTC, %.0f min; CPU: %s, %d cores; load average before %.1f, after %.1f. ONNX Runtime %s, "
         "%s threads." % (" ".join(argv), a.set, subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                                                 capture_output=True, text=True).stdout.strip(),
                          started, elapsed / 60, cpu_name(), os.cpu_count(), a.load0, load[0],
                          ok[0]["ort_version"] if ok else "?", a.threads or os.cpu_count()),
         "",
         "Ratio: ONNX Runtime on the original / on the written file, alternating in one process (the "
         "Hodges-Lehmann estimate of the rounds' ratios of medians), the median of %d processes (all listed); predicted: the gain optimize expected (its whole-graph timing of "
         "the original and the written graph in one ORT process; the predictions' where it timed none; 1 for the "
         "original). Prediction / whole / separate: optimize's prediction for the original (its whole-graph median "
         "timed before the search; a candidate's is that scaled by the region sums' ratio), its whole-graph median "
         "in optimize's ranking, and a separate ORT process's median, with the prediction's error. Match: ORT on "
         "both, same random inputs, scaled error (<= 1 passes) at batch 1 and 4."
         % a.procs,
         "",
         "| model | written | ratio | predicted | ORT ms before -> after | processes | prediction / whole / separate ms | "
         "match b1, b4 | rewrites / reason |",
         "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "ratio" not in r:
            t.append("| %s | error | | | | | | | %s |" % (r["model"], r["error"]))
            continue
        rw = ", ".join("%s x%d" % kv for kv in r["rewrites"].items()) or r["reason"]
        t.append("| %s | %s | %.3f | %.3f | %.3f -> %.3f | %s | %.3f / %s / %.3f (%+.0f%%) | %.2g, %.2g | %s |" % (
            r["model"], r["written"], r["ratio"], r.get("predicted_gain", float("nan")), r["ort_before_ms"],
            r["ort_after_ms"], procs_text(r), r["predicted_before_ms"],
            "%.3f" % r["whole_before_ms"] if r.get("whole_before_ms") else "-", r["separate_before_ms"],
            100 * r["prediction_error"], r["error_b1"], r["error_b4"], rw.replace("|", "/")))
    gain = sum(abs(r["predicted_gain"] / r["ratio"] - 1) <= 0.15 for r in ok)
    t += ["", "Geometric mean ratio %.3f over %d models, lowest %.3f; prediction within 15%% of the separate median "
              "on %d of %d (of the same process's second request on %d), whole-graph timing on %d of %d; predicted "
              "gain within 15%% of the measured ratio on %d of %d; all match: %s." % (
                  gm, len(ok), min((r["ratio"] for r in ok), default=float("nan")), within, len(ok), within_second,
                  within_whole, len(whole), gain, len(ok), all(r["match"] for r in ok)),
          ""]
    return "\n".join(t) + "\n"


def cpu_name():
    try:
        for l in open("/proc/cpuinfo"):
            if l.startswith("model name"):
                return l.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=("zoo", "real"), default="zoo")
    ap.add_argument("--models", default="")
    ap.add_argument("--time-limit", type=float, default=60)
    ap.add_argument("--b4-time-limit", type=float, default=20)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tsopt", default=os.path.join(ROOT, "build", "tsopt"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "real_models"))
    ap.add_argument("--copied-ratio-1", action="store_true",
                    help="a model written as its input file byte for byte gets ratio 1 without timing (cheaper)")
    ap.add_argument("--json", default="")
    ap.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"))
    a = ap.parse_args(argv)
    a.load0 = os.getloadavg()[0]
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    t0 = time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tsopt-ort-bench-") as work:
        if a.set == "zoo":
            names = [l.split()[0] for l in subprocess.run([a.tsopt, "zoo", "list"], capture_output=True, text=True,
                                                           check=True).stdout.splitlines()[1:] if l.strip()]
        else:
            import real_models
            names = [n for n, _, _ in real_models.bench_set()]
        if a.models:
            names = [n for n in names if n in a.models.split(",")]
        for name in names:
            log("== " + name)
            try:
                if a.set == "zoo":
                    model = os.path.join(work, name + ".onnx")
                    subprocess.run([a.tsopt, "zoo", "export", name, "-o", model, "--batch", "1"], check=True,
                                   capture_output=True)
                else:
                    import real_models
                    model = real_models.export(name, a.cache)
                rows.append(measure(a, name, model, work))
            except Exception as e:  # one model's failure is a row, not the end of the run
                log("   %s: %s" % (name, e))
                rows.append({"model": name, "error": str(e)[:200]})
            if a.json:  # after each model: a stopped run keeps what it measured
                json.dump(rows, open(a.json, "w"), indent=1)
    text = section(a, rows, ["bench/ort_target.py"] + argv, started, time.time() - t0)
    print(text)
    if a.out:
        import real_models
        s, real_models.SECTION = real_models.SECTION, SECTION  # the same section writer, this section's title
        try:
            real_models.write_section(a.out, text)
        finally:
            real_models.SECTION = s
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
