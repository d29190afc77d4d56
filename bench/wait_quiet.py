#!/usr/bin/env python3
"""The adaptive wait policy against forced spinning on a quiet machine
(issue 12: "Quiet: as fast as the best of today's policies, and stable from
run to run").

For each model, R rounds; each round runs `tsopt bench M --json` once per
policy (TSOPT_WAIT=spin, the adaptive default, optionally TSOPT_WAIT=sleep),
the order rotating every round, each in its own process.  Per process it
prints the median, the fastest run, the quiet median (runs of undisturbed
rounds) and what the adaptive policy did (switches, time sleeping, windows
disturbed and vetoed); at the end per policy the spread of the process
medians (min / median / max) and adaptive's median over spin's.

    bench/wait_quiet.py [--tsopt build/tsopt] [--models resnext50,nasrnn]
                        [--rounds 3] [--iters 5] [--min-time 2] [--threads 2] [--sleep]

Run it on a quiet machine: it measures the quiet case (bench/load.py does
the busy ones).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def bench(a, path, policy):
    env = dict(os.environ)
    for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "TSOPT_WAIT"):
        env.pop(k, None)
    if policy != "adaptive":
        env["TSOPT_WAIT"] = policy
    p = subprocess.run([a.tsopt, "bench", path, "--iters", str(a.iters), "--min-time", str(a.min_time),
                        "--threads", str(a.threads), "--json"], capture_output=True, text=True, env=env, timeout=900)
    if p.returncode != 0:
        raise RuntimeError("tsopt bench %s (%s) failed: %s" % (path, policy, p.stderr.strip()[-300:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tsopt", default="build/tsopt")
    ap.add_argument("--models", default="resnext50,nasrnn")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sleep", action="store_true", help="also TSOPT_WAIT=sleep")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="tsopt-wait-")
    policies = ["spin", "adaptive"] + (["sleep"] if a.sleep else [])
    with open("/proc/loadavg") as f:
        print("load before: %s" % " ".join(f.read().split()[:4]))
    for m in a.models.split(","):
        path = m if m.endswith(".onnx") else os.path.join(work, m + ".onnx")
        if not os.path.exists(path):
            subprocess.run([a.tsopt, "zoo", "export", m, "-o", path], check=True, capture_output=True)
        got = {p: [] for p in policies}
        for r in range(a.rounds):
            k = r % len(policies)
            for pol in policies[k:] + policies[:k]:
                j = bench(a, path, pol)
                got[pol].append(j)
                q = j.get("quiet_median_ms")
                print("%s round %d %-8s median %8.3f ms, min %8.3f, quiet median %s (%d of %d rounds disturbed); "
                      "wait: %d to sleep, %d to spin, %.0f of %.0f ms sleeping, %d of %d windows disturbed, "
                      "%d vetoed" % (
                          os.path.basename(path), r + 1, pol, j["median_ms"], j["min_ms"],
                          "%8.3f" % q if q is not None else "none", j.get("disturbed_rounds", 0), j.get("rounds", 0),
                          j.get("wait_to_sleep", 0), j.get("wait_to_spin", 0), j.get("wait_sleep_ms", 0),
                          j.get("wait_sleep_ms", 0) + j.get("wait_spin_ms", 0), j.get("wait_busy_windows", 0),
                          j.get("wait_windows", 0), j.get("wait_vetoed", 0)))
                sys.stdout.flush()
        meds = {p: [j["median_ms"] for j in got[p]] for p in policies}
        for p in policies:
            print("%s %-8s process medians: min %.3f, median %.3f, max %.3f ms (max/min %.2f)" % (
                os.path.basename(path), p, min(meds[p]), statistics.median(meds[p]), max(meds[p]),
                max(meds[p]) / min(meds[p])))
        print("%s adaptive / spin (median of process medians): %.3f" % (
            os.path.basename(path), statistics.median(meds["adaptive"]) / statistics.median(meds["spin"])))
    with open("/proc/loadavg") as f:
        print("load after: %s" % " ".join(f.read().split()[:4]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
