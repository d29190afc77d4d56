#!/usr/bin/env bash
# Weights held once (src/exec/weights_once.c): `tsopt run` frees the
# graph's copy of each weight its plan packed, and its outputs still match
# ONNX Runtime's (rtol 1e-3, atol 1e-4) on zoo models whose weights go
# through oneDNN's MatMul (BERT, one layer) and ConvTranspose (DCGAN);
# `tsopt bench` reports how much was freed beside the peak RSS.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
: "${ORT_RUN:?ORT_RUN not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for m in bert dcgan; do
    extra=()
    [ "$m" = bert ] && extra=(--layers 1)
    "$TSOPT" zoo export "$m" -o "$T/$m.onnx" "${extra[@]}" >/dev/null || fail "$m: export"
    "$TSOPT" run "$T/$m.onnx" --iters 2 --save-inputs "$T/$m.in" --save-outputs "$T/$m.ts" >"$T/$m.run" \
        || fail "$m: tsopt run"
    node "$ORT_RUN" "$T/$m.onnx" --inputs "$T/$m.in" --save-outputs "$T/$m.ort" --threads 1 >/dev/null \
        || fail "$m: ORT run"
    "$TSOPT" compare "$T/$m.ort" "$T/$m.ts" --rtol 1e-3 --atol 1e-4 >"$T/$m.cmp" \
        || { cat "$T/$m.cmp"; fail "$m: tsopt run differs from ORT"; }
    "$TSOPT" bench "$T/$m.onnx" --iters 1 --warmup 0 >"$T/$m.bench" || fail "$m: bench"
    line=$(grep '^memory: ' "$T/$m.bench") || fail "$m: no memory line"
    freed=$(sed -n 's/.*(\([0-9.]*\) MiB of originals freed once packed).*/\1/p' <<<"$line")
    [ -n "$freed" ] || fail "$m: no freed figure in: $line"
    awk -v f="$freed" 'BEGIN { exit !(f > 1) }' || fail "$m: only $freed MiB freed: $line"
    echo "$m: matches ORT; $line"
done
echo "weights once: ok"
