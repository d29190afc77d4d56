#!/usr/bin/env bash
# tsopt optimize on every zoo model at batch 1, made deterministic: a
# budget of graphs instead of a time limit, the roofline cost model (the
# same on every machine) and no timing, --min-gain 0 (the search's best
# graph is written whenever the cost model prefers it).  For every model:
# the --json contract holds, and the written file's outputs match the
# original's through tsopt's fast runtime and through ONNX Runtime (rtol
# 1e-3 / atol 1e-4); tsopt optimize itself refuses to write a graph that
# differs, this checks the written file independently.  On nasrnn and
# inception_v3 the search must find rewrites, the predicted cost must drop,
# and the written file must be the optimized graph: a run that writes the
# original fails.  On nasnet_a and resnext50 the search costs graphs as the
# runtime runs them (level all), which folds their BatchNorms at load: the
# folded graph ties with the original and, at --min-gain 0, must be written.
# TSOPT_OPT_BUDGET sets the graphs explored per model (default 5).
set -euo pipefail
: "${TSOPT:?}" "${TSOPT_BUILD:?}" "${ORT_RUN:?}"
PY=${PYTHON:-/usr/bin/python3}
out=$TSOPT_BUILD/optimize_zoo
rm -rf "$out" && mkdir -p "$out"
export TSOPT_CACHE_DIR=${TSOPT_CACHE_DIR:-$out/cache}
budget=${TSOPT_OPT_BUDGET:-5}
must_gain=" nasrnn inception_v3 "
must_write=" nasnet_a resnext50 "

pass=0 fail=0 failed=""
names=$("$TSOPT" zoo list | tail -n +2 | awk '{print $1}')
[ -n "$names" ] || { echo "zoo list printed no models"; exit 1; }
for m in $names; do
    ok=1
    opts=""
    [ "$m" = bert ] && [ -z "${TSOPT_ZOO_FULL:-}" ] && opts="--layers 2"
    # shellcheck disable=SC2086
    "$TSOPT" zoo export "$m" -o "$out/$m.onnx" $opts >/dev/null || ok=0
    [ $ok = 1 ] && { "$TSOPT" optimize "$out/$m.onnx" -o "$out/$m.opt.onnx" --time-limit 0 --budget "$budget" \
        --cost-model roofline --no-timing --min-gain 0 --json >"$out/$m.json" 2>/dev/null || ok=0; }
    if [ $ok = 1 ]; then
        gain=0
        case "$must_gain" in *" $m "*) gain=1 ;; esac
        case "$must_write" in *" $m "*) gain=2 ;; esac
        "$PY" - "$out/$m.json" $gain <<'P' | sed "s/^/  /" || ok=0
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("written", "cost_before_ms", "cost_after_ms", "latency_before_ms", "latency_after_ms", "applied",
          "search_s", "peak_rss_mb", "check", "stop", "explored", "generated", "reason"):
    assert k in r, "missing field " + k
assert "max_scaled_error" in r["check"] and "passes" in r["applied"]
assert r["stop"] in ("budget", "exhausted"), r["stop"]
applied = sum(r["applied"].values())
print("%s: %s, cost %.3f -> %.3f ms, %d explored, %d generated, applied %s" % (
    r["written"], r["reason"][:60], r["cost_before_ms"], r["cost_after_ms"], r["explored"], r["generated"],
    r["applied"]))
if r["written"] == "original":
    assert applied == 0, r["applied"]
if sys.argv[2] != "0":
    assert r["generated"] > 0, "the search proposed nothing"
    if sys.argv[2] == "1":
        assert r["cost_after_ms"] < r["cost_before_ms"], "the predicted cost did not drop"
    assert r["cost_after_ms"] <= r["cost_before_ms"], "the predicted cost rose"
    assert r["written"] == "optimized" and applied > 0, "the optimized graph was not written"
P
    fi
    [ $ok = 1 ] && { "$TSOPT" run "$out/$m.onnx" --save-inputs "$out/$m.in" --save-outputs "$out/$m.a" >/dev/null || ok=0; }
    [ $ok = 1 ] && { "$TSOPT" run "$out/$m.opt.onnx" --inputs "$out/$m.in" --save-outputs "$out/$m.b" >/dev/null || ok=0; }
    [ $ok = 1 ] && { "$TSOPT" compare "$out/$m.a" "$out/$m.b" --rtol 1e-3 --atol 1e-4 | sed "s/^/  runtime: /" || ok=0; }
    [ $ok = 1 ] && { node "$ORT_RUN" "$out/$m.opt.onnx" --inputs "$out/$m.in" --save-outputs "$out/$m.ort" || ok=0; }
    [ $ok = 1 ] && { "$TSOPT" compare "$out/$m.a" "$out/$m.ort" --rtol 1e-3 --atol 1e-4 | sed "s/^/  ort: /" || ok=0; }
    if [ $ok = 1 ]; then
        pass=$((pass + 1))
        echo "PASS $m"
    else
        fail=$((fail + 1))
        failed="$failed $m"
        echo "FAIL $m"
    fi
    rm -f "$out/$m.onnx" "$out/$m.opt.onnx" # models are large
done
echo "optimize vs original: $pass passed, $fail failed${failed:+ (failed:$failed)}"
[ "$fail" = 0 ]
