#!/usr/bin/env python3
"""Graph optimization levels on the zoo and the real-model set (issue 27).

    bench/graph_opt.py [--models a,b] [--zoo-only | --real-only] [--batch N] [--tsopt PATH] [--cache DIR]
                       [--old PATH [--rounds R] [--threads T] [--min-time S]]

Per model (the zoo at batch N, default 1, exported by `tsopt zoo export
--batch N`; the real-model set of tools/export_torchvision.py, cached as
bench/real_models.py caches it, its input bound to batch N):
`tsopt run --graph-opt none` and `--graph-opt all` on the same seeded inputs,
outputs compared by `tsopt compare` (rtol 1e-3, atol 1e-4); both plans' step
counts.  With --old PATH, an older tsopt binary and this one time the model
alternately in one run (R rounds of `tsopt bench --json`, each binary first
in every other round): per model the ratio new/old of the medians of
quiet_median_ms (median_ms where a round had no quiet one) and of peak RSS,
then the geometric mean of the time ratios.  Exit 1 when an output differs.
"""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import real_models  # noqa: E402  (export cache and the bench set)


def sh(cmd, ok=(0,)):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in ok:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, (p.stderr or p.stdout).strip()[-400:]))
    return p.stdout


def steps(tsopt, path, binds, level):
    out = sh([tsopt, "bench", path, "--iters", "1", "--warmup", "0", "--json", "--graph-opt", level] + binds)
    return json.loads(out.strip().splitlines()[-1])["steps"]


def same_outputs(tsopt, path, binds, work):
    d = {}
    os.makedirs(work, exist_ok=True)
    for level in ("none", "all"):
        d[level] = os.path.join(work, level)
        shutil.rmtree(d[level], ignore_errors=True)
        sh([tsopt, "run", path, "--graph-opt", level, "--save-outputs", d[level]] + binds)
    out = sh([tsopt, "compare", d["none"], d["all"]], ok=(0, 1))
    m = re.search(r"^(\d+) of (\d+) tensors match", out, re.M)
    errs = [float(x) for x in re.findall(r"max_abs (\S+)", out)]
    return bool(m) and m.group(1) == m.group(2), max(errs) if errs else float("nan")


def timed(tsopt, path, binds, a):
    j = json.loads(sh([tsopt, "bench", path, "--iters", "10", "--min-time", str(a.min_time), "--threads",
                       str(a.threads), "--json"] + binds).strip().splitlines()[-1])
    return j.get("quiet_median_ms") or j["median_ms"], j["peak_rss_bytes"]


def models(a, work):
    out = []
    if not a.real_only:
        for line in sh([a.tsopt, "zoo", "list"]).splitlines()[1:]:
            name = line.split()[0]
            path = os.path.join(work, name + ".onnx")
            out.append((name, path, [], lambda n=name, p=path: sh([a.tsopt, "zoo", "export", n, "-o", p,
                                                                   "--batch", str(a.batch)])))
    if not a.zoo_only:
        for name, shape, _ in real_models.bench_set():
            out.append((name, None, ["--input", "input:%dx%s" % (a.batch, shape)],
                        lambda n=name: real_models.export(n, a.cache)))
    if a.models:
        keep = set(a.models.split(","))
        out = [m for m in out if m[0] in keep]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models")
    ap.add_argument("--zoo-only", action="store_true")
    ap.add_argument("--real-only", action="store_true")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--tsopt", default=os.path.join(ROOT, "build", "tsopt"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "real_models"))
    ap.add_argument("--old", help="an older tsopt binary to time against, alternating")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=1.0)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="graph_opt.")
    bad, ratios = 0, []
    print("| model | none vs all | max_abs | steps none | steps all |%s" %
          (" old ms | new ms | new/old | RSS new/old |" if a.old else ""))
    print("|---|---|---|---|---|%s" % ("---|---|---|---|" if a.old else ""))
    try:
        for name, path, binds, make in models(a, work):
            got = make()
            path = path or got
            ok, err = same_outputs(a.tsopt, path, binds, os.path.join(work, name))
            bad += not ok
            row = "| %s | %s | %.2g | %d | %d |" % (name, "same" if ok else "DIFFER", err,
                                                   steps(a.tsopt, path, binds, "none"),
                                                   steps(a.tsopt, path, binds, "all"))
            if a.old:
                t = {a.old: [], a.tsopt: []}
                rss = {a.old: [], a.tsopt: []}
                for r in range(a.rounds):
                    for b in ((a.old, a.tsopt) if r % 2 == 0 else (a.tsopt, a.old)):
                        ms, mem = timed(b, path, binds, a)
                        t[b].append(ms)
                        rss[b].append(mem)
                old, new = statistics.median(t[a.old]), statistics.median(t[a.tsopt])
                ratios.append(new / old)
                row += " %.3f | %.3f | %.3f | %.3f |" % (old, new, new / old, max(rss[a.tsopt]) / max(rss[a.old]))
            print(row, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if ratios:
        print("\ngeomean new/old %.3f over %d models, max %.3f" %
              (math.exp(sum(map(math.log, ratios)) / len(ratios)), len(ratios), max(ratios)))
    print("%d model(s) with outputs that differ between --graph-opt none and all" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
