#!/usr/bin/env bash
# The demo: a torchvision ResNet-18 (random weights) run by tsopt and by ONNX
# Runtime on the same inputs, outputs compared; then a zoo model optimized and
# timed before/after. Run after `make build` (`make demo` does both).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=/usr/bin/python3   # Debian's python: python3-torch lives there
TSOPT=build/tsopt
D=build/demo
MODEL=$D/resnet18.onnx

[ -x "$TSOPT" ] || { echo "demo: $TSOPT not built; run 'make build'" >&2; exit 1; }
mkdir -p "$D"

step() { printf '\n== %s\n' "$*"; }

step "export torchvision resnet18 (random weights, opset 13) -> $MODEL"
if [ -f "$MODEL" ]; then
  echo "(already there)"
else
  "$PY" tools/export_torchvision.py resnet18 "$MODEL" --opset 13
fi

step "tsopt info"
"$TSOPT" info "$MODEL"

step "tsopt run (random inputs saved to $D/in)"
rm -rf "$D/in" "$D/out_tsopt" "$D/out_ort"
"$TSOPT" run "$MODEL" --save-inputs "$D/in" --save-outputs "$D/out_tsopt"

step "ONNX Runtime on the same inputs"
node tools/ort/run.js "$MODEL" --inputs "$D/in" --save-outputs "$D/out_ort"

step "tsopt compare tsopt vs ONNX Runtime"
"$TSOPT" compare "$D/out_tsopt" "$D/out_ort"

# The optimizer: TASO search with the proved rule set on a zoo model, the
# result checked against the original before it is written, then both timed.
# NasRNN: the model where the search finds a gain today (BENCHMARKS.md,
# "TASO optimizer"); ZOO=inception_v3 etc. work too.
ZOO=${ZOO:-nasrnn}
step "tsopt zoo export $ZOO, then tsopt optimize (proved rules, 20 s search)"
"$TSOPT" zoo export "$ZOO" -o "$D/$ZOO.onnx"
"$TSOPT" optimize "$D/$ZOO.onnx" -o "$D/$ZOO.opt.onnx" --time-limit 20 --report "$D/$ZOO.md"

step "latency before / after (tsopt bench, median of 20)"
for m in "$D/$ZOO.onnx" "$D/$ZOO.opt.onnx"; do
  printf '%-40s ' "$(basename "$m")"
  "$TSOPT" bench "$m" --iters 20 --json | grep -o '"median_ms": *[0-9.]*'
done
