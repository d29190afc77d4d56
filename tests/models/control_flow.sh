#!/usr/bin/env bash
# Control flow (If, Loop, Scan) against ONNX Runtime on models built at test
# time by make_control_flow.py (torch.jit.script exports at opsets 15-18, one
# with float16 inside a branch, and hand-built Scan/Loop models):
#   - `tsopt info` lists the bodies;
#   - `tsopt run` (fast runtime: bodies as nested plans) and `tsopt run
#     --reference` (interpreter) match ONNX Runtime on the model's own inputs;
#   - `tsopt optimize` writes a model ONNX Runtime runs with the original's
#     outputs, and tsopt runs it again (on body_cse_op17 the optimized
#     model, with the body's duplicate MatMul merged, must be the one written);
#   - a model with a symbolic batch through a Loop and a nested If is written
#     back with the batch symbolic and runs at another batch; one whose
#     branch folds the batch size into a constant is written at the bound batch.
# Skips (77) without torch or onnxruntime-node.
set -uo pipefail
: "${TSOPT:?TSOPT not set}" "${TSOPT_SRC:?TSOPT_SRC not set}"
: "${ORT_RUN:=$TSOPT_SRC/tools/ort/run.js}"
PYTHON=${PYTHON:-/usr/bin/python3}
RTOL=${RTOL:-1e-3}
ATOL=${ATOL:-1e-4}

if ! "$PYTHON" -c "import torch, onnx" 2>/dev/null || [ ! -d "$TSOPT_SRC/tools/ort/node_modules/onnxruntime-node" ]; then
  echo "SKIP: needs torch, onnx and onnxruntime-node"
  exit 77
fi

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
if ! "$PYTHON" "$TSOPT_SRC/tests/models/make_control_flow.py" "$T" >"$T/make.log" 2>&1; then
  tail -20 "$T/make.log"
  echo "FAIL: could not build the models"
  exit 1
fi

fail=0
pass=0
check() { # what, command...
  local what=$1
  shift
  if ! "$@" >"$T/cmd.log" 2>&1; then
    echo "   FAIL $what"
    sed 's/^/      /' "$T/cmd.log" | tail -6
    return 1
  fi
}

while read -r name; do
  [ -n "$name" ] || continue
  m=$T/$name.onnx
  in=$T/$name.in
  d=$T/$name
  mkdir -p "$d"
  binds=()
  if [ -f "$T/$name.binds" ]; then
    while read -r b; do binds+=(--input "$b"); done <"$T/$name.binds"
  fi
  echo "== $name"
  ok=1
  check "info" "$TSOPT" info "$m" "${binds[@]}" || ok=0
  if [ $ok = 1 ] && ! grep -q '^control flow' "$T/cmd.log"; then
    echo "   FAIL info does not list the control flow"
    ok=0
  fi
  check "ort run" node "$ORT_RUN" "$m" --inputs "$in" --save-outputs "$d/ort" || ok=0
  check "tsopt run" "$TSOPT" run "$m" "${binds[@]}" --inputs "$in" --save-outputs "$d/fast" || ok=0
  check "tsopt run --reference" "$TSOPT" run "$m" "${binds[@]}" --reference --inputs "$in" --save-outputs "$d/ref" || ok=0
  check "compare fast/ort" "$TSOPT" compare "$d/fast" "$d/ort" --rtol "$RTOL" --atol "$ATOL" || ok=0
  check "compare reference/ort" "$TSOPT" compare "$d/ref" "$d/ort" --rtol "$RTOL" --atol "$ATOL" || ok=0
  check "optimize" "$TSOPT" optimize "$m" "${binds[@]}" -o "$d/opt.onnx" --cost-model roofline --no-timing --time-limit 5 \
    --budget 20 --inputs "$in" --cost-cache "$T/costs.tsv" --json || ok=0
  # the duplicated MatMul inside a branch is merged by the body passes
  if [ "$name" = body_cse_op17 ] && ! grep -q '"written": "optimized".*"optimize-bodies": 1' "$T/cmd.log"; then
    echo "   FAIL the body's passes were not applied and written:"
    sed 's/^/      /' "$T/cmd.log" | tail -3
    ok=0
  fi
  check "ort run optimized" node "$ORT_RUN" "$d/opt.onnx" --inputs "$in" --save-outputs "$d/ort_opt" || ok=0
  check "compare optimized/original (ort)" "$TSOPT" compare "$d/ort_opt" "$d/ort" --rtol "$RTOL" --atol "$ATOL" ||
    ok=0
  check "tsopt run optimized" "$TSOPT" run "$d/opt.onnx" "${binds[@]}" --inputs "$in" --save-outputs "$d/fast_opt" || ok=0
  check "compare tsopt optimized/ort" "$TSOPT" compare "$d/fast_opt" "$d/ort" --rtol "$RTOL" --atol "$ATOL" || ok=0
  if [ -d "$T/$name.other" ]; then
    # the symbolic batch is written back: the optimized model runs at another batch
    other=()
    while read -r b; do other+=(--input "$b"); done <"$T/$name.binds_other"
    check "symbolic batch kept" "$PYTHON" -c "import onnx, sys; m = onnx.load(sys.argv[1]); \
assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == 'batch', m.graph.input[0]" "$d/opt.onnx" || ok=0
    check "ort run at another batch" node "$ORT_RUN" "$m" --inputs "$T/$name.other" --save-outputs "$d/ort5" || ok=0
    check "ort run optimized at another batch" node "$ORT_RUN" "$d/opt.onnx" --inputs "$T/$name.other" \
      --save-outputs "$d/ort5_opt" || ok=0
    check "compare at another batch (ort)" "$TSOPT" compare "$d/ort5_opt" "$d/ort5" --rtol "$RTOL" --atol "$ATOL" || ok=0
    check "tsopt run optimized at another batch" "$TSOPT" run "$d/opt.onnx" "${other[@]}" --inputs "$T/$name.other" \
      --save-outputs "$d/fast5" || ok=0
    check "compare tsopt at another batch" "$TSOPT" compare "$d/fast5" "$d/ort5" --rtol "$RTOL" --atol "$ATOL" || ok=0
  fi
  if [ -f "$T/$name.static" ]; then
    # a size folded inside a body follows the batch: written at the bound one
    check "written at the bound batch" "$PYTHON" -c "import onnx, sys; m = onnx.load(sys.argv[1]); \
assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 3, m.graph.input[0]" "$d/opt.onnx" || ok=0
  fi
  if [ $ok = 1 ]; then
    pass=$((pass + 1))
    echo "   ok"
  else
    fail=$((fail + 1))
  fi
done <"$T/models.txt"

# A bad model: a Loop whose carried value changes shape is refused with one
# line naming the node.
"$PYTHON" - "$T/grow.onnx" <<'EOF'
import sys
from onnx import TensorProto, helper
body = helper.make_graph(
    [helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Concat", ["v", "v"], ["v2"], axis=0)], "b",
    [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c", TensorProto.BOOL, []),
     helper.make_tensor_value_info("v", TensorProto.FLOAT, None)],
    [helper.make_tensor_value_info("c2", TensorProto.BOOL, []), helper.make_tensor_value_info("v2", TensorProto.FLOAT, None)])
g = helper.make_graph([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="grow")], "g",
                      [helper.make_tensor_value_info("M", TensorProto.INT64, []),
                       helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
m.ir_version = 8
open(sys.argv[1], "wb").write(m.SerializeToString())
EOF
echo "== grow (refused)"
"$TSOPT" info "$T/grow.onnx" >"$T/grow.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$T/grow.log")" -eq 1 ] && grep -q "node 'grow' (Loop): loop-carried value 0" "$T/grow.log"; then
  echo "   ok: $(cat "$T/grow.log")"
  pass=$((pass + 1))
else
  echo "   FAIL (rc $rc):"
  sed 's/^/      /' "$T/grow.log"
  fail=$((fail + 1))
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
