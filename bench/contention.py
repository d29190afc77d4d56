#!/usr/bin/env python3
"""Three `tsopt optimize` runs started at once on one cost cache (issue 14's
must-show "Contention").

Each run must either keep the original saying the machine was too busy
(`written: original`, `machine_busy: true`), or write a model that is
faster than the original in a quiet alternating bench afterwards (R rounds
of `tsopt bench ORIG` / `tsopt bench OPT`, order flipped every round,
compared on the quiet medians: the runs of each bench's undisturbed rounds).
Anything else -- a written model that is not faster, a kept original whose
reason is not the load -- is printed as a violation (exit status 1).  A
kept original because nothing faster was found is fine too (no model was
written on a contended timing) and is printed as such.

    bench/contention.py [--tsopt build/tsopt] [--models nasnet_a,inception_v3,nasrnn]
                        [--time-limit 30] [--rounds 4] [--work DIR]

It runs three optimizers side by side on a 2-core machine: minutes of CPU.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON in output: " + text[-300:])


def run(cmd, timeout=900):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, (p.stderr or p.stdout)[-300:]))
    return p.stdout


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:4])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tsopt", default="build/tsopt")
    ap.add_argument("--models", default="nasnet_a,inception_v3,nasrnn")
    ap.add_argument("--time-limit", type=float, default=30)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="tsopt-contention-")
    os.makedirs(work, exist_ok=True)
    models = a.models.split(",")
    cache = os.path.join(work, "costs.tsv")
    if os.path.exists(cache):
        os.remove(cache)
    print("work %s, load before: %s" % (work, loadavg()))
    for m in models:
        run([a.tsopt, "zoo", "export", m, "-o", os.path.join(work, m + ".onnx")], 600)

    # the three at once, one shared cost cache
    procs, t0 = [], time.time()
    for m in models:
        cmd = [a.tsopt, "optimize", os.path.join(work, m + ".onnx"), "-o", os.path.join(work, m + ".opt.onnx"),
               "--time-limit", str(a.time_limit), "--cost-cache", cache, "--json"]
        procs.append((m, cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    results = {}
    for m, cmd, p in procs:
        out, err = p.communicate(timeout=a.time_limit * 10 + 600)
        if p.returncode != 0:
            print("%s: optimize failed (%d): %s" % (m, p.returncode, err.strip()[-300:]))
            results[m] = None
            continue
        results[m] = last_json(out)
    print("three optimizers: %.1f s wall, load after: %s" % (time.time() - t0, loadavg()))

    bad = 0
    for m in models:
        j = results[m]
        if j is None:
            bad += 1
            continue
        print("%s: written %s, machine_busy %s, cost %.4g -> %.4g ms, measured %.4g -> %.4g ms" % (
            m, j["written"], str(j["machine_busy"]).lower(), j["cost_before_ms"], j["cost_after_ms"],
            j["latency_before_ms"], j["latency_after_ms"]))
        print("   reason: %s" % j["reason"])
        if j["written"] == "original":
            print("   -> ok: original kept (%s)" % ("the machine was too busy" if j["machine_busy"]
                                                  else "no faster graph decided"))
            continue
        # a written model: it must be faster in a quiet alternating bench
        orig, opt = os.path.join(work, m + ".onnx"), os.path.join(work, m + ".opt.onnx")
        q = {orig: [], opt: []}
        med = {orig: [], opt: []}
        disturbed = total = 0
        timing = ["--iters", "5", "--min-time", str(a.min_time), "--threads", "2", "--json"]
        for k in range(a.rounds):
            for path in (orig, opt) if k % 2 == 0 else (opt, orig):
                b = last_json(run([a.tsopt, "bench", path] + timing))
                med[path].append(b["median_ms"])
                if b.get("quiet_median_ms") is not None:
                    q[path].append(b["quiet_median_ms"])
                disturbed += b.get("disturbed_rounds", 0)
                total += b.get("rounds", 0)
        use = q if q[orig] and q[opt] else med
        o, n = statistics.median(use[orig]), statistics.median(use[opt])
        ok = n < o
        bad += not ok
        print("   quiet alternating bench (%d rounds, %s medians, %d of %d bench rounds disturbed): "
              "original %.4g ms, written %.4g ms, x%.3f -> %s" % (
                  a.rounds, "quiet" if use is q else "plain", disturbed, total, o, n, o / n,
                  "ok: faster" if ok else "VIOLATION: written on a timing that did not hold"))
    print("load at the end: %s; %s" % (loadavg(), "all three as specified" if not bad else "%d violation(s)" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
