#!/usr/bin/python3
"""tsopt and ONNX Runtime under load: quiet, a busy loop started before the
run, a busy loop started one second into it.

    bench/load.py [--models a,b,...] [--rounds R] [--seconds S] [--delay D] [--threads T]
                  [--out BENCHMARKS.md | --no-write] [--tsopt PATH] [--cache DIR]

Models: ResNet-18, MobileNet-v3 (large), a 4-layer transformer encoder
(tools/export_torchvision.py: random weights, seed 0, batch 1) and the
zoo's nasrnn (`tsopt zoo export`).  The competitor is one
`sh -c 'while :; do :; done'` (one core's worth of work that never
sleeps).  Per model, per round, per case, each engine runs once as its own
process for about S seconds (its run count is taken from a short quiet
calibration run, so that it lasts S seconds when quiet), engines
alternating and their order flipping each round:

  quiet   no competitor
  before  the loop starts D seconds before the process (and runs through it)
  during  the loop starts D seconds after the process started

A process's latency is its median run; a case's is the median over the
rounds.  In "during" the first D seconds of a process run quiet: with
S >= 3 D most of its runs are under load, so the median is a loaded run.
Writes the "## Under load" section of BENCHMARKS.md (replaced in place):
per model and case tsopt, ORT, tsopt/ORT and tsopt against its own quiet
latency; the issue's bounds are busy <= ORT busy and busy <= 2.5x quiet.
tsopt's JSON says how its runs waited (wait_sleep_runs: runs begun with
sleeping idle threads, wait_switches: mode changes; docs/runtime.md).
"""
import argparse
import datetime
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORT_RUN = os.path.join(ROOT, "tools", "ort", "run.js")
EXPORT = os.path.join(ROOT, "tools", "export_torchvision.py")
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
SECTION = "## Under load"
BUSY = ["sh", "-c", "while :; do :; done"]
CASES = ("quiet", "before", "during")

# name: (source, input binding for tsopt without batch or None for a zoo model)
MODELS = {
    "resnet18": ("torchvision", "input:1x3x224x224"),
    "mobilenet_v3_large": ("torchvision", "input:1x3x224x224"),
    "transformer_encoder": ("torchvision", "input:1x128x256"),
    "nasrnn": ("zoo", None),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, timeout):
    """stdout of cmd; raises RuntimeError with its last output line."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        last = ((p.stderr.strip() or p.stdout.strip()).splitlines() or ["exit %d" % p.returncode])[-1]
        raise RuntimeError("%s: %s" % (" ".join(os.path.basename(c) for c in cmd[:2]), last))
    return p.stdout


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON in output")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:4])


def prepare(a, name, work):
    """(model path, tsopt --input args, ORT input folder)."""
    source, binding = MODELS[name]
    if source == "zoo":
        path = os.path.join(work, name + ".onnx")
        run([a.tsopt, "zoo", "export", name, "-o", path], 600)
    else:
        path = os.path.join(a.cache, name + ".onnx")
        if not os.path.exists(path):
            os.makedirs(a.cache, exist_ok=True)
            run([PYTHON, EXPORT, name, path], 1800)
    bind = ["--input", binding] if binding else []
    inputs = os.path.join(work, name + ".in")
    run([a.tsopt, "run", path] + bind + ["--save-inputs", inputs, "--iters", "1"], 1800)
    return path, bind, inputs


def command(a, engine, path, bind, inputs, iters):
    if engine == "tsopt":
        return [a.tsopt, "bench", path] + bind + ["--iters", str(iters), "--threads", str(a.threads), "--json"]
    return ["node", ORT_RUN, path, "--inputs", inputs, "--iters", str(iters), "--threads", str(a.threads)]


class Busy:
    """One busy loop, started now or after `delay` seconds, stopped on exit."""

    def __init__(self):
        self.p = None

    def start(self):
        self.p = subprocess.Popen(BUSY, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  start_new_session=True)

    def stop(self):
        if self.p is not None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
            self.p = None


def one(a, cmd, case):
    """Runs cmd once under `case`; its JSON."""
    busy = Busy()
    try:
        if case == "before":
            busy.start()
            time.sleep(a.delay)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if case == "during":
            try:
                p.wait(timeout=a.delay)
            except subprocess.TimeoutExpired:
                busy.start()
        try:
            out, err = p.communicate(timeout=max(600, 40 * a.seconds))
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise RuntimeError("%s: timed out" % os.path.basename(cmd[1] if cmd[0] == "node" else cmd[0]))
        if p.returncode != 0:
            last = ((err.strip() or out.strip()).splitlines() or ["exit %d" % p.returncode])[-1]
            raise RuntimeError("%s: %s" % (os.path.basename(cmd[1] if cmd[0] == "node" else cmd[0]), last))
        return last_json(out)
    finally:
        busy.stop()


def measure(a, name, work):
    path, bind, inputs = prepare(a, name, work)
    # calibration: how many runs last a.seconds on a quiet machine
    iters = {}
    for engine in ("tsopt", "ort"):
        ms = last_json(run(command(a, engine, path, bind, inputs, 5), 1800))["median_ms"]
        iters[engine] = max(5, int(math.ceil(a.seconds * 1e3 / max(ms, 1e-3))))
    log("   runs per process: tsopt %d, ORT %d (load %s)" % (iters["tsopt"], iters["ort"], loadavg()))
    got = {(c, e): [] for c in CASES for e in ("tsopt", "ort")}
    for r in range(a.rounds):
        order = ("tsopt", "ort") if r % 2 == 0 else ("ort", "tsopt")
        for case in CASES:
            for engine in order:
                j = one(a, command(a, engine, path, bind, inputs, iters[engine]), case)
                got[(case, engine)].append(j)
                extra = ""
                if engine == "tsopt" and "wait_sleep_runs" in j:
                    extra = ", %d of %d runs sleeping (%.0f of %.0f ms), %d switches" % (
                        j["wait_sleep_runs"], j["wait_sleep_runs"] + j["wait_spin_runs"], j.get("wait_sleep_ms", 0),
                        j.get("wait_sleep_ms", 0) + j.get("wait_spin_ms", 0), j["wait_switches"])
                log("   round %d %-6s %-5s median %.3f ms%s" % (r + 1, case, engine, j["median_ms"], extra))
    row = {"name": name, "iters": iters}
    for case in CASES:
        for engine in ("tsopt", "ort"):
            row[(case, engine)] = statistics.median(j["median_ms"] for j in got[(case, engine)])
        ts = got[(case, "tsopt")]
        row[(case, "sleep")] = sum(j.get("wait_sleep_runs", 0) for j in ts)
        row[(case, "runs")] = sum(j.get("wait_sleep_runs", 0) + j.get("wait_spin_runs", 0) for j in ts)
        row[(case, "policy")] = ts[0].get("wait_policy", "?")
        row[(case, "switches")] = sum(j.get("wait_switches", 0) for j in ts)
        row[(case, "sleep_ms")] = sum(j.get("wait_sleep_ms", 0) for j in ts)
        row[(case, "all_ms")] = sum(j.get("wait_sleep_ms", 0) + j.get("wait_spin_ms", 0) for j in ts)
    return row


def section(a, rows, started, elapsed, argv, load_before):
    L = [SECTION + "\n"]
    L.append("Generated by `bench/load.py` on %s, %.0f s, %d cores, %d threads for both engines; load average "
             "before the run: %s. The competitor is one `sh -c 'while :; do :; done'`.\n"
             % (started.strftime("%Y-%m-%d %H:%M UTC"), elapsed, os.cpu_count(), a.threads, load_before))
    L.append("```")
    L.append("bench/load.py " + " ".join(argv))
    L.append("# per model, round (R = %d) and case, each engine one process of about %g s, alternating:"
             % (a.rounds, a.seconds))
    L.append("tsopt bench M.onnx [--input input:SHAPE] --iters N --threads %d --json" % a.threads)
    L.append("node tools/ort/run.js M.onnx --inputs IN --iters N --threads %d" % a.threads)
    L.append("# quiet: alone; before: the loop started %g s earlier; during: the loop started %g s into the process"
             % (a.delay, a.delay))
    L.append("```\n")
    L.append("Latency: each process's median run, the median over the rounds. \"busy/quiet\": tsopt's latency in the "
             "case over its quiet latency (bound: 2.5); \"tsopt/ORT\": bound 1 in the busy cases. \"sleeping runs\": "
             "runs tsopt began with sleeping idle threads (docs/runtime.md, Threading), and their share of the run time; "
             "\"switches\": mode changes, all rounds together.\n")
    L.append("| model | case | tsopt ms | ORT ms | tsopt/ORT | tsopt busy/quiet | ORT busy/quiet | sleeping runs "
             "| switches | within bounds |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        if "error" in r:
            L.append("| %s | — | — | — | — | — | — | — | — | failed: %s |" % (r["name"], r["error"].replace("|", "/")))
            continue
        q_ts, q_ort = r[("quiet", "tsopt")], r[("quiet", "ort")]
        for case in CASES:
            ts, ort = r[(case, "tsopt")], r[(case, "ort")]
            ok = "—" if case == "quiet" else ("yes" if ts <= ort and ts <= 2.5 * q_ts else "**no**")
            all_ms = r.get((case, "all_ms"), 0)
            L.append("| %s | %s | %.3f | %.3f | %.3f | %.2f | %.2f | %d of %d (%.0f%% of the time) | %d | %s |" % (
                r["name"], case, ts, ort, ts / ort, ts / q_ts, ort / q_ort, r[(case, "sleep")], r[(case, "runs")],
                100 * r.get((case, "sleep_ms"), 0) / all_ms if all_ms else 0, r.get((case, "switches"), 0), ok))
    L.append("")
    return "\n".join(L) + "\n"


def write_section(path, text):
    """Replaces the section in path (or appends it) through a temporary file."""
    old = open(path).read() if os.path.exists(path) else ""
    i = old.find("\n" + SECTION + "\n")
    if i >= 0:
        j = old.find("\n## ", i + 1)
        new = old[:i + 1] + text + (old[j + 1:] if j >= 0 else "")
    else:
        new = old.rstrip("\n") + ("\n\n" if old else "") + text
    with open(path + ".tmp", "w") as f:
        f.write(new)
    os.replace(path + ".tmp", path)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated, of: " + ", ".join(MODELS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0, help="length of one process's runs when quiet")
    ap.add_argument("--delay", type=float, default=1.0, help="seconds between the loop's and the process's start")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--no-write", action="store_true", help="print the section instead of writing it")
    ap.add_argument("--tsopt", default=os.path.join(ROOT, "build", "tsopt"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "real_models"), help="exported models")
    a = ap.parse_args(argv)
    models = [m for m in a.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit("load.py: unknown model: %s (known: %s)" % (", ".join(unknown), ", ".join(MODELS)))
    if a.rounds < 1 or a.threads < 1 or not a.seconds > 0 or not a.delay >= 0:
        raise SystemExit("load.py: --rounds, --threads must be >= 1, --seconds > 0, --delay >= 0")
    if not os.access(a.tsopt, os.X_OK):
        raise SystemExit("load.py: no tsopt binary at %s (build first or pass --tsopt)" % a.tsopt)
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = loadavg()
    t0 = time.time()
    work = tempfile.mkdtemp(prefix="load.")
    rows = []
    try:
        for name in models:
            log("-- %s (load %s)" % (name, loadavg()))
            try:
                rows.append(measure(a, name, work))
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                rows.append({"name": name, "error": str(e).splitlines()[0][:200]})
                log("   failed: " + rows[-1]["error"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = section(a, rows, started, time.time() - t0, argv, load_before)
    if a.no_write:
        print(text)
    else:
        write_section(a.out, text)
        log("wrote %s (%s)" % (a.out, SECTION))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
