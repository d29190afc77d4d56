#!/usr/bin/env bash
# Every zoo model at batch 1: exported by tsopt, run by the reference
# interpreter and by ONNX Runtime on the same inputs, compared at rtol 1e-3 /
# atol 1e-4.  Models too slow for the interpreter on 2 cores run reduced
# (fewer layers); TSOPT_ZOO_FULL=1 (make test-full) runs every model at full
# size and also exports batch 16.
set -euo pipefail
: "${TSOPT:?}" "${TSOPT_BUILD:?}" "${ORT_RUN:?}"
out=$TSOPT_BUILD/zoo_ort
rm -rf "$out" && mkdir -p "$out"

reduced() { # options for the quick run
    case $1 in
    bert) echo "--layers 2" ;;
    *) echo "" ;;
    esac
}

pass=0 fail=0 failed=""
names=$("$TSOPT" zoo list | tail -n +2 | awk '{print $1}')
[ -n "$names" ] || { echo "zoo list printed no models"; exit 1; }
for m in $names; do
    opts=""
    [ -n "${TSOPT_ZOO_FULL:-}" ] || opts=$(reduced "$m")
    t0=$(date +%s.%N)
    ok=1
    # shellcheck disable=SC2086
    "$TSOPT" zoo export "$m" -o "$out/$m.onnx" $opts >/dev/null || ok=0
    [ $ok = 1 ] && { "$TSOPT" run --reference "$out/$m.onnx" --save-inputs "$out/$m.in" \
        --save-outputs "$out/$m.ref" >/dev/null || ok=0; }
    [ $ok = 1 ] && { node "$ORT_RUN" "$out/$m.onnx" --inputs "$out/$m.in" --save-outputs "$out/$m.ort" || ok=0; }
    [ $ok = 1 ] && { "$TSOPT" compare "$out/$m.ref" "$out/$m.ort" --rtol 1e-3 --atol 1e-4 | sed "s/^/  /" || ok=0; }
    if [ $ok = 1 ] && [ -n "${TSOPT_ZOO_FULL:-}" ]; then
        "$TSOPT" zoo export "$m" -o "$out/$m.b16.onnx" --batch 16 >/dev/null &&
            "$TSOPT" info "$out/$m.b16.onnx" | grep -q "16x" || ok=0
    fi
    t1=$(date +%s.%N)
    if [ $ok = 1 ]; then
        pass=$((pass + 1))
        printf 'PASS %-14s %s (%.1f s)\n' "$m" "$opts" "$(awk "BEGIN{print $t1 - $t0}")"
    else
        fail=$((fail + 1))
        failed="$failed $m"
        printf 'FAIL %-14s %s\n' "$m" "$opts"
    fi
    rm -f "$out/$m.onnx" "$out/$m.b16.onnx" # models are large; keep only tensors
done
echo "zoo vs ONNX Runtime: $pass passed, $fail failed${failed:+ (failed:$failed)}"
[ "$fail" = 0 ]
