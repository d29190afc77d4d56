#!/usr/bin/env bash
# Quantized models (issue 29, int8) on a small CNN + classifier heads (Conv,
# Relu, residual Add, MaxPool, GlobalAveragePool, Gemm, MatMul):
# - tools/quantize_qdq.py writes ONNX Runtime's static QDQ format, and ORT's
#   optimized graph holds QLinearConv and QLinearMatMul for it;
# - tsopt runs it on the int8 kernels (no fallback step; the QDQ pass made
#   QLinearConv) within max(1, ORT's own fused-vs-unfused distance) output
#   steps of ORT, at batch 2;
# - `tsopt optimize` keeps Q/DQ semantics: the written model still holds its
#   Q/DQ nodes and int8 weights, and gives the original's outputs in ORT;
# - the dynamic form (DynamicQuantizeLinear + MatMulInteger) matches ORT;
# - a file naming one of tsopt's internal operators is refused.
set -euo pipefail
: "${TSOPT:?TSOPT not set}" "${ORT_RUN:?ORT_RUN not set}" "${TSOPT_SRC:?TSOPT_SRC not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export TSOPT_CACHE_DIR=$T/cache
PY=/usr/bin/python3
Q=$TSOPT_SRC/tools/quantize_qdq.py
NOOPT=$(dirname "$ORT_RUN")/run_unoptimized.js

"$PY" - "$T/f.onnx" <<'P'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
r = np.random.default_rng(0)
def w(name, *shape, s=0.2): return nh.from_array((r.standard_normal(shape) * s).astype(np.float32), name)
nodes = [
    h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
    h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]), h.make_node("Add", ["c2", "r1"], ["a"]),
    h.make_node("Relu", ["a"], ["r2"]), h.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
    h.make_node("GlobalAveragePool", ["p"], ["g"]), h.make_node("Flatten", ["g"], ["f"]),
    h.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1), h.make_node("MatMul", ["f", "wm"], ["z"])]
g = h.make_graph(nodes, "tiny", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 8, 16, 16])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["batch", 10]), h.make_tensor_value_info("z", T.FLOAT, ["batch", 12])],
                 [w("w1", 16, 8, 3, 3), w("b1", 16), w("w2", 16, 16, 3, 3, s=0.1), w("b2", 16), w("wf", 10, 16),
                  w("bf", 10), w("wm", 16, 12)])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), sys.argv[1])
P
"$PY" "$Q" "$T/f.onnx" "$T/q.onnx" --calib 2 --check-ort >"$T/ort_ops" || fail "quantize_qdq.py static"
cat "$T/ort_ops"
grep -q "QLinearConv [1-9]" "$T/ort_ops" || fail "ORT did not fuse the QDQ convolutions"
grep -q "QLinearMatMul [1-9]" "$T/ort_ops" || fail "ORT did not fuse the QDQ MatMul"

mkdir -p "$T/in"
"$PY" -c "import numpy as np; np.save('$T/in/x.npy', np.random.default_rng(3).standard_normal((2, 8, 16, 16)).astype(np.float32))"

# steps A B UNOPT MODEL: max |A - B| over the outputs in output quantization steps, within max(1, ORT's own)
steps() {
    "$PY" - "$@" <<'P'
import os, sys, numpy as np, onnx
from onnx import numpy_helper
a, b, u, model = sys.argv[1:]
m = onnx.load(model)
inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
step = {n.output[0]: float(inits[n.input[1]].max()) for n in m.graph.node if n.op_type == "DequantizeLinear"}
worst, bound = 0.0, 1.0
for f in sorted(os.listdir(b)):
    s = step[f[:-4]]
    x, y, z = (np.load(os.path.join(d, f)).astype(np.float64) for d in (a, b, u))
    worst, bound = max(worst, np.abs(x - y).max() / s), max(bound, np.abs(z - y).max() / s)
print("%.2f steps apart (ORT's own fusions: %.2f)" % (worst, bound))
sys.exit(0 if worst <= bound * 1.001 else 1)
P
}

node "$ORT_RUN" "$T/q.onnx" --inputs "$T/in" --save-outputs "$T/ort" >/dev/null
node "$NOOPT" "$T/q.onnx" "$T/in" "$T/ort_noopt"
"$TSOPT" run "$T/q.onnx" --inputs "$T/in" --save-outputs "$T/ts" >/dev/null
steps "$T/ts" "$T/ort" "$T/ort_noopt" "$T/q.onnx" || fail "tsopt vs ORT on the QDQ model"
"$TSOPT" bench "$T/q.onnx" --inputs "$T/in" --iters 2 --warmup 1 --json >"$T/bench.json"
"$PY" - "$T/bench.json" <<'P' || fail "QDQ model not on the int8 kernels"
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert r["fallback_steps"] == 0, r["fallback_steps"]
P

# optimize keeps Q/DQ semantics: written, still quantized, same outputs in ORT
"$TSOPT" optimize "$T/q.onnx" -o "$T/opt.onnx" --time-limit 5 >/dev/null 2>&1 || fail "optimize failed"
"$PY" - "$T/q.onnx" "$T/opt.onnx" <<'P' || fail "optimize lost the quantization"
import collections, sys, onnx
a, b = (onnx.load(p) for p in sys.argv[1:])
ops = lambda m: collections.Counter(n.op_type for n in m.graph.node)
i8 = lambda m: sum(t.data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8) for t in m.graph.initializer)
qa, qb = ops(a), ops(b)
assert qb["QuantizeLinear"] + qb["QLinearConv"] + qb["QLinearMatMul"] > 0, qb
assert i8(b) >= i8(a) // 2, (i8(a), i8(b))
print("optimized model: %s, %d int8/uint8 initializers" % (dict(qb), i8(b)))
P
node "$ORT_RUN" "$T/opt.onnx" --inputs "$T/in" --save-outputs "$T/ort_opt" >/dev/null
steps "$T/ort_opt" "$T/ort" "$T/ort_noopt" "$T/q.onnx" || fail "the optimized model's outputs in ORT differ"

# dynamic quantization: DynamicQuantizeLinear + MatMulInteger
"$PY" "$Q" "$T/f.onnx" "$T/d.onnx" --mode dynamic >/dev/null || fail "quantize_qdq.py dynamic"
node "$ORT_RUN" "$T/d.onnx" --inputs "$T/in" --save-outputs "$T/dort" >/dev/null
"$TSOPT" run "$T/d.onnx" --inputs "$T/in" --save-outputs "$T/dts" >/dev/null
"$TSOPT" compare "$T/dts" "$T/dort" --rtol 1e-4 --atol 1e-5 >/dev/null || fail "dynamic model vs ORT"
# tsopt's internal 8-bit operators (tsopt.QLinearAdd, ...: fuse_qdq.c's) are never read from a file
"$PY" - "$T/internal.onnx" <<'P'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
g = h.make_graph([h.make_node("tsopt.QLinearLookup", ["x", "t"], ["y"])], "g",
                 [h.make_tensor_value_info("x", T.UINT8, [4])], [h.make_tensor_value_info("y", T.UINT8, [4])],
                 [nh.from_array(np.arange(256).astype(np.uint8), "t")])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), sys.argv[1])
P
if "$TSOPT" info "$T/internal.onnx" >"$T/internal.log" 2>&1; then fail "an internal operator was read from a file"; fi
grep -q "operator 'tsopt.QLinearLookup' (opset 13) is not supported" "$T/internal.log" || { cat "$T/internal.log"; fail "internal op: wrong error"; }
echo "quantized: ok"
