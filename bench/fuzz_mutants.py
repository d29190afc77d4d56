#!/usr/bin/python3
"""Mutation score of `tsopt fuzz` (docs/fuzz.md, issue 31): plants one-line
bugs of its own in a copy of the tree -- kernels, layouts, fusions, the
optimizer's rewrites --, builds each in a temporary folder and runs a
fixed-seed campaign against it from an empty cache, until the first finding
or the time limit.  A benchmark, not a test: `make fuzz-mutants`.

The unmutated tree is run first with the same seed and time: its own
findings (real bugs) are not counted.  A mutant is found when its campaign
has a finding at a step (graph or pair) the unmutated campaign reached
without one there; campaigns are deterministic per step, so that step is
where the mutant made the difference.

  bench/fuzz_mutants.py [--time S] [--seed N] [--only ID,ID] [--keep DIR] [--json]

The tree is `git archive HEAD` (what is committed), copied once; each
mutant is applied to it, built incrementally (ccache), run, then reverted.
"""
import argparse, json, os, shutil, subprocess, sys, tempfile

# (id, area, file, the line's text as it is, as the mutant has it, what it breaks)
MUTANTS = [
    ("concat3-late", "kernel", "src/vec/vec_movement.c",
     "const char *src = (const char *)in[j] + o * s->blk[j] + (a - at);",
     "const char *src = (const char *)in[j] + o * s->blk[j] + (a - at) + (j == 2 ? (int64_t)s->es : 0);",
     "issue 31: a Concat of 3+ inputs reads its third input one element late"),
    ("transpose102-copy", "kernel", "src/vec/vec_movement.c",
     "        stride[d] = xst[pd];",
     "        stride[d] = xs->rank == 3 && a->nperm == 3 && a->perm[0] == 1 && a->perm[1] == 0 && a->perm[2] == 2 "
     "? (d == 0 ? xs->dims[0] * xs->dims[2] : d == 1 ? xs->dims[2] : 1) : xst[pd];",
     "issue 31: a rank-3 Transpose with perm (1, 0, 2) copies its input unchanged"),
    ("relu-threshold", "kernel", "src/vec/vec_eltwise.c",
     "case XO_RELU: LOOP(a[i] > 0 ? a[i] : 0.0f); break;",
     "case XO_RELU: LOOP(a[i] > -0.01f ? a[i] : 0.0f); break;", "Relu lets small negatives through"),
    ("leaky-alpha", "kernel", "src/vec/vec_eltwise.c",
     "case XO_LEAKY: LOOP(a[i] >= 0 ? a[i] : a[i] * c); break;",
     "case XO_LEAKY: LOOP(a[i] >= 0 ? a[i] : a[i] * 0.01f); break;", "LeakyRelu ignores alpha"),
    ("hsig-beta", "kernel", "src/vec/vec_eltwise.c",
     "LOOP(c * a[i] + d);", "LOOP(c * a[i] + c);", "HardSigmoid uses alpha for beta"),
    ("hswish-top", "kernel", "src/vec/vec_eltwise.c",
     "a[i] / 6.0f + 0.5f > 1 ? 1.0f :", "a[i] / 6.0f + 0.5f > 1 ? 0.5f :", "HardSwish saturates at half"),
    ("clip-max", "kernel", "src/vec/vec_eltwise.c",
     "LOOP(y[i] > d ? d : y[i]);", "LOOP(y[i] > d ? c : y[i]);", "Clip clamps above to its minimum"),
    ("softmax-norm", "kernel", "src/vec/vec_softmax.c",
     "float r = 1.0f / sum;", "float r = 1.0f / (sum + 0.01f);", "Softmax normalizes by a sum off by 0.01"),
    ("logsoftmax-sign", "kernel", "src/vec/vec_softmax.c",
     "s[i] = lg ? m[i] + logf(s[i]) : 1.0f / s[i];", "s[i] = lg ? m[i] - logf(s[i]) : 1.0f / s[i];",
     "LogSoftmax subtracts the wrong sign of the log-sum"),
    ("reducemean-count", "kernel", "src/vec/vec_reduce.c",
     "1.0f / (float)s->r", "1.0f / (float)(s->r + 1)", "ReduceMean divides by one more than it sums"),
    ("layernorm-mean", "kernel", "src/vec/vec_layernorm.c",
     "const float mean = sum / (float)d;", "const float mean = sum / ((float)d + 1.0f);",
     "LayerNormalization's mean off"),
    ("layernorm-eps", "kernel", "src/vec/vec_layernorm.c",
     "const float r = 1.0f / sqrtf(var / (float)d + eps);", "const float r = 1.0f / sqrtf(var / (float)d + eps * 1e4f);",
     "LayerNormalization's epsilon 10^4 times too large"),
    ("batchnorm-eps", "kernel", "src/vec/vec_batchnorm.c",
     "double m = sc / sqrt(var + a->epsilon);", "double m = sc / sqrt(var + a->epsilon + 0.5);",
     "BatchNormalization's folded scale off"),
    ("pad-reflect", "kernel", "src/vec/vec_pad.c",
     "return j < 0 ? -j : 2 * (len - 1) - j;", "return j < 0 ? -j - 1 : 2 * (len - 1) - j;",
     "Pad reflect mirrors the border too (symmetric) on the left"),
    ("pad-edge", "kernel", "src/vec/vec_pad.c",
     "if (mode == TS_PAD_EDGE) return j < 0 ? 0 : len - 1;", "if (mode == TS_PAD_EDGE) return j < 0 ? 0 : len - 2;",
     "Pad edge repeats the second-to-last element on the right"),
    ("slice-negative-start", "kernel", "src/vec/vec_movement.c",
     "if (s0 < 0) s0 = s0 < -dim ? -1 - dim : s0 + dim;", "if (s0 < 0) s0 = s0 < -dim ? -1 - dim : s0 + dim - 1;",
     "Slice: a negative start one element early"),
    ("gather-negative-index", "kernel", "src/vec/vec_movement.c",
     "s->blk[k] = v < 0 ? v + dim : v;", "s->blk[k] = v < 0 ? v + dim - 1 : v;",
     "Gather: a negative index one row early"),
    ("split-short", "kernel", "src/vec/vec_split.c",
     "memcpy((char *)out[j] + o * s->blk[j], src, (size_t)s->blk[j]);",
     "memcpy((char *)out[j] + o * s->blk[j], src, (size_t)s->blk[j] - (j == 1 && s->blk[j] > 4 ? 4 : 0));",
     "Split leaves the last element of each row of its second output unwritten"),
    ("avgpool-pad-count", "kernel", "src/dnnl/dnnl_pool.c",
     "cip = pa->count_include_pad;", "cip = !pa->count_include_pad;",
     "AveragePool's count_include_pad inverted"),
    ("concat-permuted-axis", "layout", "src/vec/vec_movement.c",
     "        if (order[k] == axis) pax = k;", "        if (order[k] == axis) pax = axis;",
     "Concat on a permuted (channels-last) layout uses the logical axis as the physical one"),
    ("split-permuted-axis", "layout", "src/vec/vec_split.c",
     "        if (order[k] == axis) pax = k;", "        if (order[k] == axis) pax = axis;",
     "Split on a permuted layout uses the logical axis as the physical one"),
    ("fused-hsig-clip", "fusion", "src/dnnl/dnnl_util.c",
     "po.alg = dnnl_eltwise_clip, po.alpha = 0, po.beta = 1;", "po.alg = dnnl_eltwise_clip, po.alpha = 0, po.beta = 2;",
     "HardSigmoid fused into a conv clips at 2"),
    ("fused-residual-scale", "fusion", "src/dnnl/dnnl_util.c",
     "dnnl_post_ops_append_sum(po, 1.0f)", "dnnl_post_ops_append_sum(po, 0.5f)",
     "a residual Add fused into a conv adds half"),
    ("fused-sigmoid-tanh", "fusion", "src/dnnl/dnnl_util.c",
     "po.alg = dnnl_eltwise_logistic;", "po.alg = dnnl_eltwise_tanh;", "Sigmoid fused into a conv runs tanh"),
    ("bn-fold-eps", "optimizer", "src/opt/fold_affine.c",
     "double s = ts_tensor_get_f64(t[0], k) / sqrt(ts_tensor_get_f64(t[3], k) + eps);",
     "double s = ts_tensor_get_f64(t[0], k) / sqrt(ts_tensor_get_f64(t[3], k) + eps + 0.5);",
     "the BatchNormalization fold into a conv's weights mis-scales"),
    ("rule-matmul-merge", "optimizer", "rules/core.rules",
     "  (rhs (split0 1 (matmul ?x (concat 1 ?w1 ?w2))) (split1 1 (matmul ?x (concat 1 ?w1 ?w2)))))",
     "  (rhs (split0 1 (matmul ?x (concat 1 ?w1 ?w2))) (split1 1 (matmul ?x (concat 1 ?w1 ?w1)))))",
     "a wrong TASO rule: two MatMuls merged, the second with the first's weight"),
]


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--time", type=float, default=300, help="seconds per mutant (default 300)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--only", default="", help="comma-separated mutant ids")
    ap.add_argument("--keep", default="", help="keep the work folder here (findings of each mutant)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    src = subprocess.run(["git", "rev-parse", "--show-toplevel"], stdout=subprocess.PIPE, text=True,
                         cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    chosen = [m for m in MUTANTS if not a.only or m[0] in a.only.split(",")]
    work = a.keep or tempfile.mkdtemp(prefix="tsopt-mutants-")
    tree = os.path.join(work, "src")
    build = os.path.join(tree, "build-fuzz2")  # the same relative paths as a build-fuzz2 of the source tree: ccache hits
    os.makedirs(tree, exist_ok=True)
    if not os.path.exists(os.path.join(tree, "CMakeLists.txt")):
        arch = subprocess.run(["git", "-C", src, "archive", "HEAD"], stdout=subprocess.PIPE, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=arch, check=True)
    env = dict(os.environ, CCACHE_BASEDIR=tree, CCACHE_NOHASHDIR="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    r = run(["cmake", "-S", tree, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DCMAKE_C_COMPILER_LAUNCHER=ccache",
             "-DTSOPT_MPI=OFF"], env=env)
    if r.returncode:
        sys.exit("fuzz_mutants: cmake failed:\n" + r.stdout[-2000:])
    def campaign(name):
        """The fixed-seed campaign on the current build: its summary and its findings as keys (the step or pair
        they were found at, the oracle)."""
        out = os.path.join(work, "runs", name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        cache = tempfile.mkdtemp(prefix="cache-", dir=work)  # a fresh eOperator cache
        c = run([os.path.join(build, "tsopt"), "fuzz", "--target", "tsopt", "--seed", str(a.seed), "--time",
                 str(a.time), "--no-minimize", "-o", out, "--json"], env=dict(env, TSOPT_CACHE_DIR=cache))
        shutil.rmtree(cache, ignore_errors=True)
        s = json.loads(c.stdout.strip().splitlines()[-1]) if c.returncode == 0 else {"error": c.stdout[-400:]}
        keys = {}
        d = os.path.join(out, "findings")
        for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            j = json.load(open(os.path.join(d, f, "finding.json")))
            k = ("graph", j["step"]) if "step" in j else ("pair", j["pair"])
            keys[k] = (j.get("oracle", "pair"), j.get("operator", ""), j.get("what", ""))
        return s, keys

    # The unmutated tree first: what it finds (real bugs) does not count for a mutant.
    b = run(["cmake", "--build", build, "-j2", "--target", "tsopt"], env=env)
    if b.returncode:
        sys.exit("fuzz_mutants: the unmutated tree does not build:\n" + b.stdout[-2000:])
    base, base_keys = campaign("baseline")
    steps = base.get("generated", 0) or base.get("graphs", 0)
    print(f"{'baseline':24s} {len(base_keys)} findings of its own in {steps} steps (not counted for the mutants)",
          flush=True)
    results = []
    for mid, area, path, old, new, what in chosen:
        f = os.path.join(tree, path)
        text = open(f).read()
        if text.count(old) < 1:
            results.append({"id": mid, "area": area, "what": what, "status": "does not apply"})
            print(f"{mid:24s} does not apply (the line changed): {path}", flush=True)
            continue
        open(f, "w").write(text.replace(old, new, 1))
        try:
            b = run(["cmake", "--build", build, "-j2", "--target", "tsopt"], env=env)
            if b.returncode:
                results.append({"id": mid, "area": area, "what": what, "status": "does not build"})
                print(f"{mid:24s} does not build", flush=True)
                continue
            s, keys = campaign(mid)
            # killed: a finding at a step the unmutated campaign reached without one there
            new_keys = sorted(k for k in keys if k not in base_keys and k[1] < max(steps, 1))
            res = {"id": mid, "area": area, "what": what, "status": "found" if new_keys else "missed",
                   "steps": s.get("generated", 0) or s.get("graphs", 0)}
            if new_keys:
                k = new_keys[0]
                res.update({"first": "%s %d" % k, "oracle": keys[k][0], "operator": keys[k][1], "seen": keys[k][2][:160]})
            results.append(res)
            print(f"{mid:24s} {res['status']:7s} {res.get('first', ''):12s} {res.get('oracle', ''):10s} "
                  f"{res.get('operator', '')}", flush=True)
        finally:
            open(f, "w").write(text)
    run(["cmake", "--build", build, "-j2", "--target", "tsopt"], env=env)
    found = [r for r in results if r["status"] == "found"]
    applied = [r for r in results if r["status"] in ("found", "missed")]
    print(f"fuzz_mutants: {len(found)} of {len(applied)} mutants found within {a.time:g} s each "
          f"(seed {a.seed}, fresh caches, findings of the unmutated tree not counted); work folder {work}")
    if a.json:
        print(json.dumps({"found": len(found), "mutants": len(applied), "time_s": a.time, "seed": a.seed,
                          "baseline_findings": [list(k) + list(v) for k, v in base_keys.items()],
                          "results": results}))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
