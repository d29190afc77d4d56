#!/usr/bin/env bash
# Whole torchvision models against ONNX Runtime: export (cached under
# $TSOPT_BUILD/models), `tsopt run` on seeded random inputs saving inputs and
# outputs, ONNX Runtime on the same inputs, `tsopt compare`.  Opsets vary
# across models (11..17) to cover the importer's version handling.
#   MODELS="resnet18 transformer" bash torchvision.sh   runs a subset
set -uo pipefail
: "${TSOPT:?TSOPT not set}" "${TSOPT_SRC:?TSOPT_SRC not set}" "${TSOPT_BUILD:?TSOPT_BUILD not set}"
: "${ORT_RUN:=$TSOPT_SRC/tools/ort/run.js}"
PYTHON=${PYTHON:-/usr/bin/python3}
RTOL=${RTOL:-1e-3}
ATOL=${ATOL:-1e-4}

CACHE=$TSOPT_BUILD/models
mkdir -p "$CACHE"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# name opset input-shape
SPECS="resnet18:11:1x3x224x224
mobilenet_v2:13:1x3x224x224
inception_v3:12:1x3x299x299
resnext50_32x4d:15:1x3x224x224
transformer:17:1x16x64"

now() { date +%s.%N; }
secs() { printf '%.1f' "$(echo "$2 - $1" | bc)"; }

pass=0
failed=()
while IFS=: read -r name opset shape; do
  if [ -n "${MODELS:-}" ] && [[ " $MODELS " != *" $name "* ]]; then continue; fi
  echo "== $name (opset $opset, input $shape)"
  model=$CACHE/$name-op$opset.onnx
  d=$T/$name
  mkdir -p "$d"
  t0=$(now)
  if [ ! -f "$model" ]; then
    if ! "$PYTHON" "$TSOPT_SRC/tools/export_torchvision.py" "$name" "$model" --opset "$opset" >"$d/export.log" 2>&1; then
      sed 's/^/   /' "$d/export.log" | tail -5
      failed+=("$name (export)")
      continue
    fi
    echo "   export: $(secs "$t0" "$(now)") s"
  else
    echo "   export: cached ($model)"
  fi
  t0=$(now)
  if ! "$TSOPT" run "$model" --input "input:$shape" --save-inputs "$d/in" --save-outputs "$d/tsopt" >"$d/run.log" 2>&1; then
    sed 's/^/   /' "$d/run.log" | tail -5
    failed+=("$name (tsopt run)")
    continue
  fi
  echo "   tsopt run: $(secs "$t0" "$(now)") s ($(grep '^time:' "$d/run.log"))"
  t0=$(now)
  if ! node "$ORT_RUN" "$model" --inputs "$d/in" --save-outputs "$d/ort" >"$d/ort.log" 2>&1; then
    sed 's/^/   /' "$d/ort.log" | tail -5
    failed+=("$name (ort run)")
    continue
  fi
  echo "   ort run: $(secs "$t0" "$(now)") s"
  # Randomly initialized models can have tiny outputs (mobilenet_v2's are
  # ~1e-11), where a fixed atol would accept anything: scale atol by the
  # largest output magnitude when that is below 1.
  scale=$("$PYTHON" -c "import sys, glob, numpy as np; print('%.3g' % max(float(np.abs(np.load(f)).max()) for f in glob.glob(sys.argv[1] + '/*.npy')))" "$d/ort")
  atol=$("$PYTHON" -c "import sys; print('%.3g' % (float(sys.argv[1]) * min(1.0, float(sys.argv[2]))))" "$ATOL" "$scale")
  echo "   max |output| $scale, atol $atol"
  if "$TSOPT" compare "$d/tsopt" "$d/ort" --rtol "$RTOL" --atol "$atol" >"$d/cmp.log" 2>&1; then
    pass=$((pass + 1))
    sed 's/^/   /' "$d/cmp.log" | head -3
  else
    sed 's/^/   /' "$d/cmp.log" | head -5
    failed+=("$name (compare)")
  fi
done <<<"$SPECS"

for f in "${failed[@]}"; do echo "FAIL $f"; done
echo "${pass} passed, ${#failed[@]} failed"
[ "${#failed[@]}" -eq 0 ] && [ "$pass" -gt 0 ]
