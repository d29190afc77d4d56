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
#   - a custom-domain node inside a Loop body is kept as it is (float16
#     around it) while optimize rewrites around the Loop; run names it.
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

# A custom-domain node inside a Loop body (float16 around it): kept as it
# is, the Loop holding it kept whole, the rest optimized around it; run
# names the inner node in one line.
"$PYTHON" - "$T/body_custom.onnx" <<'EOF'
import sys
import numpy as np
from onnx import TensorProto as TP, helper, numpy_helper
rng = np.random.default_rng(0)
f32 = lambda n, a: numpy_helper.from_array(np.asarray(a, np.float32), n)
body = helper.make_graph(
    [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Cast", ["v_in"], ["h"], to=TP.FLOAT16),
     helper.make_node("Mul", ["h", "w16"], ["hw"]),
     helper.make_node("BodyOp", ["hw"], ["u"], domain="com.example", name="inner_custom", k=3),
     helper.make_node("Cast", ["u"], ["uf"], to=TP.FLOAT), helper.make_node("Add", ["uf", "v_in"], ["v_out"])],
    "body",
    [helper.make_tensor_value_info("i", TP.INT64, []), helper.make_tensor_value_info("c_in", TP.BOOL, []),
     helper.make_tensor_value_info("v_in", TP.FLOAT, [1, 4, 8, 8])],
    [helper.make_tensor_value_info("c_out", TP.BOOL, []), helper.make_tensor_value_info("v_out", TP.FLOAT, [1, 4, 8, 8])],
    [numpy_helper.from_array(np.linspace(-1, 1, 4).astype(np.float16).reshape(4, 1, 1), "w16")],
    value_info=[helper.make_tensor_value_info("u", TP.FLOAT16, [1, 4, 8, 8])])
inits = [f32("w", rng.standard_normal((4, 3, 3, 3)) * 0.3), f32("s", 1 + rng.random(4)), f32("o", rng.random(4)),
         f32("m", rng.random(4) * 0.1), f32("v", 0.5 + rng.random(4)), numpy_helper.from_array(np.array(3, np.int64), "M")]
g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                       helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["b"]),
                       helper.make_node("Loop", ["M", "", "b"], ["y"], body=body, name="loop")], "g",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, 8, 8])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [1, 4, 8, 8])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 2)])
m.ir_version = 8
open(sys.argv[1], "wb").write(m.SerializeToString())
# every input of the Loop a constant: it must not be folded (its body cannot run)
g.node[2].input[2] = "b0"
g.initializer.append(f32("b0", np.ones((1, 4, 8, 8))))
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 2)])
m.ir_version = 8
open(sys.argv[1].replace(".onnx", "_const.onnx"), "wb").write(m.SerializeToString())
EOF
echo "== body_custom (a custom-domain node inside a Loop body)"
ok=1
"$TSOPT" run "$T/body_custom.onnx" >"$T/bc_run.log" 2>&1 && ok=0
if [ "$(wc -l <"$T/bc_run.log")" -ne 1 ] || ! grep -q "node 'loop' (Loop): attribute 'body': node 'inner_custom' (com.example::BodyOp): tsopt cannot execute" "$T/bc_run.log"; then
  echo "   FAIL run's message:"; sed 's/^/      /' "$T/bc_run.log"; ok=0
fi
check "optimize" "$TSOPT" optimize "$T/body_custom.onnx" -o "$T/body_custom.opt.onnx" --cost-model roofline --no-timing \
  --budget 20 --min-gain 0 --json || ok=0
cp "$T/cmd.log" "$T/bc_opt.log"
check "the body's node kept, the rest optimized" "$PYTHON" - "$T/bc_opt.log" "$T/body_custom.opt.onnx" <<'EOF' || ok=0
import json, sys
import onnx
from onnx import TensorProto as TP
log = open(sys.argv[1]).read()
r = json.loads(log[log.index('{'):])
assert r["written"] == "optimized" and r["rewrites"] == {"fold-conv-batchnorm": 1} and r["check"]["regions"] >= 1, r
m = onnx.load(sys.argv[2])
onnx.checker.check_model(m)
assert [n.op_type for n in m.graph.node] == ["Conv", "Loop"], [n.op_type for n in m.graph.node]
body = m.graph.node[1].attribute[0].g
[c] = [n for n in body.node if n.name == "inner_custom"]
assert (c.domain, c.op_type, c.attribute[0].i) == ("com.example", "BodyOp", 3), c
assert {v.name: v.type.tensor_type.elem_type for v in body.value_info}["u"] == TP.FLOAT16, body.value_info
assert ("com.example", 2) in [(o.domain, o.version) for o in m.opset_import], m.opset_import
EOF
check "info loads the written model" "$TSOPT" info "$T/body_custom.opt.onnx" || ok=0
check "a constant Loop holding it is not folded" "$TSOPT" info "$T/body_custom_const.onnx" || ok=0
if [ $ok = 1 ]; then echo "   ok"; pass=$((pass + 1)); else fail=$((fail + 1)); fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
