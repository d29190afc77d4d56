#!/usr/bin/python3
"""How well the op-cost model predicts latency from a cold cache.

    bench/cost_accuracy.py [--tsopt PATH] [--models a,b,...] [--bert-layers N]
                           [--rounds R] [--iters N] [--wait auto|spin|passive]
                           [--optimized MODEL=FILE.onnx]... [--optimize [--opt-time S]]
                           [--quiet S] [--workdir DIR] [--json OUT.json]

For each zoo model (batch 1) and each round: a new, empty cost cache; then
`tsopt profile F --predict [--with G] --cache NEW --json`, which primes the
cache with F's plan (every group timed step by step inside F's plan) and
prints ts_cost_graph(F), then ts_cost_graph(G) for a rewrite G of F, whose
groups that F does not have are timed in context (a small plan of their
neighbourhood, never the whole graph); then `tsopt bench F` and `tsopt
bench G`, right after, so that prediction and measurement see the same
load.  G comes from --optimized MODEL=FILE, or from `tsopt optimize`
(--optimize; its own cost_before_ms / cost_after_ms are reported too).

Prints per model and graph: the predicted cost and the bench median (each
the median over the rounds), the error of the prediction, the range of the
per-round errors, and the OpenMP wait policy each process chose (the tsopt
binary picks one from the machine's load when it starts: costs taken under
one policy do not predict runs under the other, so --wait pins it for all
processes; on a shared machine prefer --wait passive, since a spinning
process collapses when another job appears).  --quiet S waits, before each
model's round, for a moment when nothing else is runnable.  Needs only
python3.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["nasrnn", "resnext50", "inception_v3", "nasnet_a", "bert"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, env, timeout=1800):
    """stdout of cmd; raises RuntimeError with its last stderr line."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        raise RuntimeError("%s: %s" % (" ".join(cmd), last))
    return p.stdout


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON line in output")


def find_tsopt():
    for cand in (os.environ.get("TSOPT"), os.path.join(ROOT, "build", "tsopt"), shutil.which("tsopt")):
        if cand and os.path.exists(cand):
            return cand
    return None


def others_runnable():
    """Runnable tasks other than this one (/proc/loadavg's 4th field), -1 unknown."""
    try:
        return int(open("/proc/loadavg").read().split()[3].split("/")[0]) - 1
    except (OSError, ValueError, IndexError):
        return -1


def wait_quiet(limit_s):
    """Waits (at most limit_s) until no other task was runnable in 20 samples
    50 ms apart; True when it got there."""
    end = time.time() + limit_s
    while True:
        busy = 0
        for _ in range(20):
            busy += others_runnable() != 0
            time.sleep(0.05)
        if busy <= 1:
            return True
        if time.time() > end:
            return False


def pct(pred, meas):
    return 100.0 * (pred - meas) / meas if meas else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tsopt", default=find_tsopt(), help="tsopt binary (default $TSOPT or build/tsopt)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--bert-layers", type=int, default=2, help="encoder layers of bert (default 2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20, help="tsopt bench --iters (default 20)")
    ap.add_argument("--wait", choices=["auto", "spin", "passive"], default="auto",
                    help="OpenMP wait policy of every process (default: each tsopt chooses)")
    ap.add_argument("--optimized", action="append", default=[], metavar="MODEL=FILE",
                    help="a rewrite of zoo model MODEL to predict and measure too")
    ap.add_argument("--optimize", action="store_true", help="make the rewrite with tsopt optimize")
    ap.add_argument("--opt-time", type=float, default=30, help="tsopt optimize --time-limit (default 30)")
    ap.add_argument("--quiet", type=float, default=0, metavar="S",
                    help="before each model's round wait up to S seconds for no other runnable task")
    ap.add_argument("--workdir", help="where models and caches go (default: a temporary directory)")
    ap.add_argument("--json", help="also write the raw rounds here")
    a = ap.parse_args()
    if not a.tsopt:
        sys.exit("cost_accuracy.py: no tsopt binary (build it, or give --tsopt)")

    env = dict(os.environ)
    for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        if a.wait != "auto":
            env.pop(k, None)
    if a.wait == "spin":
        env["GOMP_SPINCOUNT"] = "30000"  # what the tsopt binary sets on an idle machine
    elif a.wait == "passive":
        env["OMP_WAIT_POLICY"] = "passive"

    work = a.workdir or tempfile.mkdtemp(prefix="tsopt-cost-acc-")
    os.makedirs(work, exist_ok=True)
    given = {}
    for spec in a.optimized:
        name, _, path = spec.partition("=")
        if not path:
            sys.exit("cost_accuracy.py: --optimized wants MODEL=FILE, got '%s'" % spec)
        given[name] = os.path.abspath(path)

    models = [m for m in a.models.split(",") if m]
    files, rewrites, search = {}, {}, {}
    for m in models:
        f = os.path.join(work, m + ".onnx")
        if not os.path.exists(f):
            cmd = [a.tsopt, "zoo", "export", m, "-o", f]
            if m == "bert":
                cmd += ["--layers", str(a.bert_layers)]
            run(cmd, env)
        files[m] = f
        if m in given:
            rewrites[m] = given[m]
        elif a.optimize:
            g = os.path.join(work, m + ".opt.onnx")
            cache = os.path.join(work, "opt-cache-%s.tsv" % m)
            if os.path.exists(cache):
                os.remove(cache)
            try:
                out = run([a.tsopt, "optimize", f, "-o", g, "--cost-cache", cache, "--time-limit", str(a.opt_time),
                           "--json"], env)
                search[m] = last_json(out)
                rewrites[m] = g
            except (RuntimeError, ValueError) as e:
                log("%s: optimize failed, original only: %s" % (m, e))

    rounds = []
    for r in range(a.rounds):
        for m in models:
            cache = os.path.join(work, "cache-%s-%d" % (m, r), "costs.tsv")
            shutil.rmtree(os.path.dirname(cache), ignore_errors=True)
            os.makedirs(os.path.dirname(cache))
            quiet = wait_quiet(a.quiet) if a.quiet > 0 else None
            load = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
            cmd = [a.tsopt, "profile", files[m], "--predict", "--cache", cache, "--json"]
            if m in rewrites:
                cmd += ["--with", rewrites[m]]
            t0 = time.time()
            pred = last_json(run(cmd, env))
            graphs = [("original", files[m])] + ([("rewrite", rewrites[m])] if m in rewrites else [])
            for (kind, path), p in zip(graphs, pred["graphs"]):
                b = last_json(run([a.tsopt, "bench", path, "--iters", str(a.iters), "--json"], env))
                row = {"round": r, "model": m, "graph": kind, "file": path, "predicted_ms": p["predicted_ms"],
                       # the bench's quiet median (runs of its undisturbed rounds, docs/runtime.md), else
                       # its plain median (bench_quiet false)
                       "bench_ms": b["quiet_median_ms"] if b.get("quiet_median_ms") is not None else b["median_ms"],
                       "bench_quiet": b.get("quiet_median_ms") is not None, "bench_median_ms": b["median_ms"],
                       "bench_min_ms": b["min_ms"], "predict_policy": pred["wait_policy"],
                       "bench_policy": b["wait_policy"], "groups": p["groups"], "in_plan": p["in_plan"],
                       "in_context": p["in_context"], "other": p["other"], "measure_s": p["prime_s"] + p["cost_s"],
                       "load1": load, "started_quiet": quiet}
                rounds.append(row)
                log("round %d %-12s %-8s predicted %9.3f ms  bench %9.3f ms  %+6.1f%%  (%s/%s, %d in-context groups, "
                    "load %s%s)" % (r, m, kind, row["predicted_ms"], row["bench_ms"],
                                    pct(row["predicted_ms"], row["bench_ms"]), row["predict_policy"],
                                    row["bench_policy"], row["in_context"], load,
                                    "" if quiet is None else ", quiet" if quiet else ", NOT quiet"))
            log("  (%.1f s)" % (time.time() - t0))

    print("tsopt: %s; rounds: %d; bench --iters %d; wait: %s; %s" % (
        a.tsopt, a.rounds, a.iters, a.wait, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
    try:
        print("load average at the end: %s" % open("/proc/loadavg").read().split()[0:3])
    except OSError:
        pass
    # Rounds whose two processes chose different wait policies compare two
    # runtimes (nasrnn: ~1 ms spinning, ~2 ms sleeping on this machine):
    # they are listed apart, never mixed into a median.
    print("%-13s %-9s %-15s %6s %12s %12s %8s %17s" % ("model", "graph", "policy", "rounds", "predicted ms", "bench ms",
                                                     "error", "rounds' errors"))
    for m in models:
        for kind in ("original", "rewrite"):
            rs = [x for x in rounds if x["model"] == m and x["graph"] == kind]
            # rounds that started on a quiet machine (--quiet) apart from
            # those that waited in vain
            def kind_of(x):
                return (x["predict_policy"], x["bench_policy"], x["started_quiet"] is False or not x["bench_quiet"])

            for key in sorted(set(kind_of(x) for x in rs)):
                sel = [x for x in rs if kind_of(x) == key]
                pol = key[:2]
                pm = statistics.median(x["predicted_ms"] for x in sel)
                bm = statistics.median(x["bench_ms"] for x in sel)
                errs = [pct(x["predicted_ms"], x["bench_ms"]) for x in sel]
                label = (pol[0] if pol[0] == pol[1] else "%s/%s MIXED" % pol) + (" busy" if key[2] else "")
                print("%-13s %-9s %-15s %6d %12.3f %12.3f %+7.1f%% %7.1f%% ..%+6.1f%%" % (
                    m, kind, label, len(sel), pm, bm, pct(pm, bm), min(errs), max(errs)))
        if m in search:
            s = search[m]
            print("%-13s %-9s cost_before_ms %.3f, cost_after_ms %.3f (tsopt optimize's own cold cache; "
                  "written: %s)" % (m, "search", s.get("cost_before_ms", float("nan")),
                                    s.get("cost_after_ms", float("nan")), s.get("written", "?")))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": rounds, "search": search}, f, indent=1)


if __name__ == "__main__":
    main()
