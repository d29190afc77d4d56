#!/usr/bin/env bash
# tsopt optimize on every zoo model at batch 1 (short time limit): the
# optimized graph's outputs must match the original's, through tsopt's fast
# runtime and through ONNX Runtime (rtol 1e-3 / atol 1e-4).  tsopt optimize
# itself refuses to write a graph that differs; this checks the written file
# independently, including that ONNX Runtime loads it.
# TSOPT_OPT_TIME sets the search time limit per model (default 5 s).
set -euo pipefail
: "${TSOPT:?}" "${TSOPT_BUILD:?}" "${ORT_RUN:?}"
out=$TSOPT_BUILD/optimize_zoo
rm -rf "$out" && mkdir -p "$out"
export TSOPT_CACHE_DIR=${TSOPT_CACHE_DIR:-$out/cache}
limit=${TSOPT_OPT_TIME:-5}

pass=0 fail=0 failed=""
names=$("$TSOPT" zoo list | tail -n +2 | awk '{print $1}')
[ -n "$names" ] || { echo "zoo list printed no models"; exit 1; }
for m in $names; do
    ok=1
    opts=""
    [ "$m" = bert ] && [ -z "${TSOPT_ZOO_FULL:-}" ] && opts="--layers 2"
    # shellcheck disable=SC2086
    "$TSOPT" zoo export "$m" -o "$out/$m.onnx" $opts >/dev/null || ok=0
    [ $ok = 1 ] && { "$TSOPT" optimize "$out/$m.onnx" -o "$out/$m.opt.onnx" --time-limit "$limit" \
        --report "$out/$m.md" | sed "s/^/  /" || ok=0; }
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
