"""`bench/bench.py --optimize`: the optimizer on the zoo.

For each model and batch: `tsopt optimize --json` (search time, predicted
costs, what was applied and why the written graph was chosen), the
optimized file checked against the original through tsopt's runtime and
through ONNX Runtime (same saved inputs), then R rounds of one process
`tsopt bench ORIGINAL --against OPTIMIZED` (both files in that process,
alternating ~50 ms rounds: both see the same machine speed) and ONNX Runtime
on the original; the speedup is the median of the R processes' speedups.  Writes the "## Optimizer" section of
BENCHMARKS.md (the rest of the file is left as it is).
"""
import math
import os
import re
import shutil
import statistics
import subprocess
import time

SECTION = "## Optimizer"


def max_abs(text):
    """Largest max_abs over the lines of `tsopt compare`."""
    vals = [float(m.group(1)) for m in re.finditer(r"max_abs (\S+)", text)]
    return max(vals) if vals else float("nan")


def compare(b, a_dir, b_dir):
    p = subprocess.run([b.tsopt, "compare", a_dir, b_dir, "--rtol", "1e-3", "--atol", "1e-4"], capture_output=True,
                       text=True, timeout=300)
    return p.returncode == 0, max_abs(p.stdout)


def one(b, name, batch, run, last_json, log, load):
    w = b.work
    src = os.path.join(w, "%s.b%d.onnx" % (name, batch))
    opt = os.path.join(w, "%s.b%d.opt.onnx" % (name, batch))
    rep = os.path.join(w, "%s.b%d.opt.md" % (name, batch))
    r = {"name": name, "batch": batch, "load0": load()}
    run([b.tsopt, "zoo", "export", name, "-o", src, "--batch", str(batch)], 600)
    t = time.time()
    # a fresh cost cache per model: the predictions are those of a cold cache
    cache = os.path.join(w, "%s.b%d.costs.tsv" % (name, batch))
    if os.path.exists(cache):
        os.remove(cache)
    j = last_json(run([b.tsopt, "optimize", src, "-o", opt, "--report", rep, "--time-limit", str(b.opt_time),
                       "--cost-cache", cache, "--json"] + (["--transforms", b.transforms] if b.transforms else []), 900))
    r["wall_s"] = time.time() - t
    r["search_s"], r["peak_mb"], r["stop"] = j["search_s"], j["peak_rss_mb"], j["stop"]
    r["kept"] = j["written"] == "original"
    r["busy"] = j.get("machine_busy", False)
    r["cost0"], r["cost1"] = j["cost_before_ms"], j["cost_after_ms"] if not r["kept"] else j["cost_before_ms"]
    subs = ["%s ×%d" % (k, v) for k, v in sorted(j["rewrites"].items(), key=lambda kv: -kv[1])]
    r["subs"] = (", ".join(subs) if subs else "none") if not r["kept"] else \
        "none (original kept%s)" % (": machine busy" if r["busy"] else "")
    ins, oa, ob, oc = (os.path.join(w, "%s.b%d.%s" % (name, batch, k)) for k in ("in", "a", "b", "ort"))
    for d in (ins, oa, ob, oc):
        shutil.rmtree(d, ignore_errors=True)
    run([b.tsopt, "run", src, "--save-inputs", ins, "--save-outputs", oa, "--iters", "1"], 900)
    run([b.tsopt, "run", opt, "--inputs", ins, "--save-outputs", ob, "--iters", "1"], 900)
    r["ts_ok"], r["ts_err"] = compare(b, oa, ob)
    run(["node", b.ort_run, opt, "--inputs", ins, "--save-outputs", oc, "--iters", "1", "--threads", str(b.threads)],
        900)
    r["ort_ok"], r["ort_err"] = compare(b, oa, oc)
    t0, t1, o0, sp = [], [], [], []
    q0, q1 = [], []  # quiet medians: the runs of undisturbed rounds (docs/runtime.md, "tsopt bench")
    r["rounds_seen"] = r["rounds_disturbed"] = 0
    timing = ["--iters", str(b.iters), "--min-time", str(b.min_time), "--threads", str(b.threads), "--json"]
    for k in range(b.rounds):
        # original and optimized file in ONE process, alternating ~50 ms rounds
        # (`tsopt bench M --against O`): both see the same machine speed.  In
        # separate processes the same file came out 0.73-1.20x of itself here
        j = last_json(run([b.tsopt, "bench", src, "--against", opt] + timing, 900))
        sp.append(j["speedup"])
        t0.append(j["median_ms"])
        t1.append(j["against"]["median_ms"])
        # both quiet medians read the same undisturbed pairs of rounds (null together)
        if j.get("quiet_speedup") is not None:
            q0.append(j["quiet_median_ms"])
            q1.append(j["against"]["quiet_median_ms"])
        r["rounds_seen"] += j["pair_rounds"]
        r["rounds_disturbed"] += j["pair_rounds"] - j["quiet_pair_rounds"]
        o0.append(last_json(run(["node", b.ort_run, src, "--inputs", ins, "--iters", str(b.iters), "--threads",
                                 str(b.threads)], 900))["median_ms"])
    r["orig_ms"], r["opt_ms"], r["ort_ms"] = statistics.median(t0), statistics.median(t1), statistics.median(o0)
    r["speedup"] = statistics.median(sp)
    r["speedup_lo"], r["speedup_hi"] = min(sp), max(sp)
    # the prediction reads undisturbed runs of spinning threads (cost_plan.c):
    # compared with the bench's quiet median, the runs of its undisturbed
    # rounds; with none, with the plain median (marked in the table)
    r["quiet"] = bool(q0) and bool(q1)
    r["cerr0"] = r["cost0"] / (statistics.median(q0) if r["quiet"] else r["orig_ms"]) - 1
    r["cerr1"] = r["cost1"] / (statistics.median(q1) if r["quiet"] else r["opt_ms"]) - 1
    r["load1"] = load()
    for d in (ins, oa, ob, oc):
        shutil.rmtree(d, ignore_errors=True)
    for p in (src, opt):
        os.remove(p)  # models are large
    log("   %s b%d: search %.1f s, %.3f -> %.3f ms (%.2fx), predicted %.3f -> %.3f ms, ORT %.3f ms, %s" % (
        name, batch, r["search_s"], r["orig_ms"], r["opt_ms"], r["speedup"], r["cost0"], r["cost1"], r["ort_ms"],
        r["subs"]))
    return r


def section(b, rows, argv):
    L = [SECTION, ""]
    L.append("Generated by `bench/bench.py --optimize` (this section only; every number from that one run). "
             "Per model and batch: `tsopt optimize M.onnx -o O.onnx --time-limit %g --json --cost-cache NEW` "
             "(default sources and rules, a cold cost cache per model; search time: the optimizer's own count, "
             "graph passes plus the search; the wall "
             "time adds loading, the output check and the before/after timing), then %d rounds of "
             "one process `tsopt bench M.onnx --against O.onnx` (--iters %d --min-time %g --threads %d: each "
             "file at least that many runs, more until they add up to that many seconds) and ONNX Runtime on the "
             "original M.onnx. In that one process both files are planned and warmed, then timed in alternating "
             "rounds of about 50 ms (M O, O M, ...), so both see the same machine speed (benched in separate "
             "processes, the same file came out 0.73–1.20× of itself on this VM); speedup = median over the "
             "processes of each one's M median / O median, in brackets the lowest and highest of them; "
             "latency = median over the processes of each file's median run. Max error: largest absolute difference of "
             "the optimized file's outputs against the original's on the same inputs, through tsopt's runtime "
             "and through ONNX Runtime running the optimized file (both must pass rtol 1e-3 / atol 1e-4). Where "
             "the optimizer kept the original (\"none (original kept)\"), both files hold the same graph and the "
             "speedup column shows only the measurement noise at that load. Cost error: the optimizer's predicted "
             "cost (from the cold cache: the sum of the steps' medians over undisturbed runs, docs/runtime.md) "
             "against the same file's quiet bench median (`quiet_median_ms`: the median run of the bench's "
             "undisturbed 50 ms rounds, median over the processes; a pair of rounds counts as undisturbed when "
             "both its halves are, and the disturbed-rounds column counts the pairs thrown out; † = no "
             "undisturbed round, plain median used)." % (
                 b.opt_time, b.rounds, b.iters, b.min_time, b.threads))
    L.append("")
    L.append("```")
    L.append("bench/bench.py " + " ".join(argv))
    L.append("```")
    L.append("")
    L.append("| model | batch | search s | wall s | peak MiB | original ms | optimized ms | speedup "
             "| cost error before / after | disturbed rounds | ORT ms (original) | rewrites in the written graph "
             "| max error tsopt / ORT | load |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---|---|")
    ok = []
    for r in rows:
        if "error" in r:
            L.append("| %s | %d | — | — | — | — | — | — | — | — | — | failed: %s | — | — |" % (
                r["name"], r["batch"], r["error"]))
            continue
        ok.append(r["speedup"])
        L.append("| %s | %d | %.1f | %.1f | %.0f | %.3f | %.3f | **%.3f**%s | %+.0f%% / %+.0f%%%s | %d of %d | %.3f | %s "
                 "| %.2g%s / %.2g%s | %s → %s |" % (
            r["name"], r["batch"], r["search_s"], r["wall_s"], r["peak_mb"], r["orig_ms"], r["opt_ms"], r["speedup"],
            " (%.3f–%.3f)" % (r["speedup_lo"], r["speedup_hi"]) if "speedup_lo" in r else "",
            100 * r["cerr0"], 100 * r["cerr1"], "" if r.get("quiet", True) else " †",
            r.get("rounds_disturbed", 0), r.get("rounds_seen", 0), r["ort_ms"],
            r["subs"], r["ts_err"], "" if r["ts_ok"] else " FAIL", r["ort_err"], "" if r["ort_ok"] else " FAIL",
            r["load0"].split()[0], r["load1"].split()[0]))
    if ok:
        gm = math.exp(sum(math.log(x) for x in ok) / len(ok))
        L.append("")
        L.append("Geometric mean speedup (original / optimized, tsopt's runtime) over %d runs: **%.3f** "
                 "(target ≥ 1.15); slowest: %.3f." % (len(ok), gm, min(ok)))
    L.append("")
    return "\n".join(L)


def write_section(path, text):
    """Replaces (or appends) the optimizer section of path (and drops the older "TASO optimizer" one)."""
    old = open(path).read() if os.path.exists(path) else ""
    k = old.find("\n## TASO optimizer\n")
    if k >= 0:
        j = old.find("\n## ", k + 1)
        old = old[:k + 1] + (old[j + 1:] if j >= 0 else "")
    i = old.find("\n" + SECTION + "\n")
    if i < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        j = old.find("\n## ", i + 1)
        new = old[:i + 1] + text + (old[j:] if j >= 0 else "")
    with open(path + ".tmp", "w") as f:
        f.write(new)
    os.replace(path + ".tmp", path)


def keep_section(path):
    """The optimizer section of path, '' if none (the main bench keeps it)."""
    if not os.path.exists(path):
        return ""
    old = open(path).read()
    i = old.find("\n" + SECTION + "\n")
    if i < 0:
        return ""
    j = old.find("\n## ", i + 1)
    return old[i + 1:j + 1 if j >= 0 else len(old)]


def main(b, argv, run, last_json, log, load):
    zoo = [l.split()[0] for l in run([b.tsopt, "zoo", "list"], 60).splitlines()[1:] if l.strip()]
    models = [m for m in zoo if not b.models or m in b.models.split(",")]
    rows = []
    for name in models:
        for batch in (1, 16) if b.batch16 else (1,):
            log("-- optimize %s batch %d (load %s)" % (name, batch, load()))
            try:
                rows.append(one(b, name, batch, run, last_json, log, load))
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                rows.append({"name": name, "batch": batch, "error": str(e).splitlines()[0][:160]})
                log("   failed: " + rows[-1]["error"])
            write_section(b.out, section(b, rows, argv))  # after each model: a long run keeps what it measured
    log("wrote the optimizer section of %s" % b.out)
