#!/usr/bin/env bash
# tsopt run --graph-opt none|basic|all and --skip: every level gives the
# outputs of the model as written (rtol 1e-3, atol 1e-4) on models where
# each level rewrites something (NASNet-A's duplicate Relus: CSE; a 1x1
# conv before a 2x2 average pool: pool first; GELU and LayerNorm spelled
# out, a squeeze-excite gate: the fusions of `all`); `all` plans fewer
# steps than `none`; bad values are one error line.  bench/graph_opt.py
# runs the same comparison over the whole zoo and the real-model set.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# zoo models: NASNet-A's duplicate Relus (CSE), ResNet-18's BatchNorms
# (the affine fold), Longformer's GELUs spelled out with Erf (a proved fusion)
for m in nasnet_a resnet18 longformer; do "$TSOPT" zoo export $m -o "$T/$m.onnx" >/dev/null; done
/usr/bin/python3 - "$T" <<'PY'
import sys
import numpy as np
import onnx
from onnx import helper, TensorProto as TP, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(0)
c = lambda name, *shape: nh.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)
k = lambda name, v: nh.from_array(np.array(v, np.float32), name)

def save(name, nodes, x, y, inits):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TP.FLOAT, x)],
                          [helper.make_tensor_value_info("y", TP.FLOAT, y)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "%s/%s.onnx" % (d, name))

N = helper.make_node
# conv 1x1 -> AveragePool 2x2 stride 2 -> Relu; squeeze-excite gate on it
save("transition", [N("Conv", ["x", "w"], ["c"]), N("AveragePool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                    N("Relu", ["p"], ["r"]), N("GlobalAveragePool", ["r"], ["g"]), N("Conv", ["g", "w1", "b1"], ["h"]),
                    N("Relu", ["h"], ["hr"]), N("Conv", ["hr", "w2", "b2"], ["s"]), N("Sigmoid", ["s"], ["sg"]),
                    N("Mul", ["r", "sg"], ["m"]), N("Conv", ["m", "w3"], ["y"])],
     [1, 32, 16, 16], [1, 16, 8, 8], [c("w", 64, 32, 1, 1), c("w1", 8, 64, 1, 1), c("b1", 8), c("w2", 64, 8, 1, 1),
                                      c("b2", 64), c("w3", 16, 64, 1, 1)])
# MatMul -> GELU (erf spelling) -> LayerNorm spelled out (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add)
save("gelu_ln", [N("MatMul", ["x", "w"], ["a"]), N("Div", ["a", "sqrt2"], ["a1"]), N("Erf", ["a1"], ["a2"]),
                 N("Add", ["a2", "one"], ["a3"]), N("Mul", ["a", "a3"], ["a4"]), N("Mul", ["a4", "half"], ["gl"]),
                 N("ReduceMean", ["gl"], ["mu"], axes=[-1]), N("Sub", ["gl", "mu"], ["dm"]),
                 N("Pow", ["dm", "two"], ["sq"]), N("ReduceMean", ["sq"], ["var"], axes=[-1]),
                 N("Add", ["var", "eps"], ["ve"]), N("Sqrt", ["ve"], ["sd"]), N("Div", ["dm", "sd"], ["nrm"]),
                 N("Mul", ["nrm", "gamma"], ["sc"]), N("Add", ["sc", "beta"], ["ln"]), N("Relu", ["ln"], ["y"])],
     [16, 64], [16, 128], [c("w", 64, 128), k("sqrt2", 2 ** 0.5), k("one", 1.0), k("half", 0.5), k("two", 2.0),
                           k("eps", 1e-5), c("gamma", 128), c("beta", 128)])
PY

steps() { "$TSOPT" bench "$1" --iters 1 --warmup 0 --json "${@:2}" | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["steps"])'; }
for m in nasnet_a resnet18 longformer transition gelu_ln; do
    for l in none basic all; do
        "$TSOPT" run "$T/$m.onnx" --graph-opt "$l" --save-outputs "$T/$m.$l" >/dev/null || fail "$m: run at $l"
    done
    for l in basic all; do
        "$TSOPT" compare "$T/$m.none" "$T/$m.$l" >"$T/cmp" || { cat "$T/cmp"; fail "$m: --graph-opt $l differs from none"; }
    done
    a=$(steps "$T/$m.onnx" --graph-opt all) n=$(steps "$T/$m.onnx" --graph-opt none)
    echo "$m: $n steps at none, $a at all"
    [ "$a" -lt "$n" ] || fail "$m: all plans $a steps, none $n: no rewrite was made"
done
# the reference interpreter runs the model as written: the same outputs
"$TSOPT" run "$T/gelu_ln.onnx" --reference --save-outputs "$T/ref" >/dev/null
"$TSOPT" compare "$T/ref" "$T/gelu_ln.all" >/dev/null || fail "gelu_ln: all differs from the reference"
# tsopt profile times the groups the runtime runs (level all, as the
# optimizer costs them, ts_drive_graph_cost): the GELU is the MatMul's
# post-op, no Erf step of its own
"$TSOPT" profile "$T/gelu_ln.onnx" --cache "$T/c.tsv" --iters 2 >"$T/prof.txt"
grep -q '^MatMul+Gelu ' "$T/prof.txt" || { cat "$T/prof.txt"; fail "profile: no MatMul+Gelu group"; }
! grep -q 'Erf' "$T/prof.txt" || { cat "$T/prof.txt"; fail "profile: the GELU spelled out"; }
"$TSOPT" profile "$T/gelu_ln.onnx" --predict --cache "$T/c.tsv" >/dev/null || fail "profile --predict"
# --skip takes kernels and features by name; it changes the plan, not the outputs
"$TSOPT" run "$T/transition.onnx" --skip "winograd,dnnl.conv,vec.se" --save-outputs "$T/skip" >/dev/null
"$TSOPT" compare "$T/transition.none" "$T/skip" >/dev/null || fail "--skip changed the outputs"
TSOPT_SKIP=dnnl.conv_gated "$TSOPT" run "$T/transition.onnx" --save-outputs "$T/skip2" >/dev/null
"$TSOPT" compare "$T/transition.none" "$T/skip2" >/dev/null || fail "TSOPT_SKIP changed the outputs"

set +e
out=$("$TSOPT" run "$T/transition.onnx" --graph-opt extended 2>&1); rc=$?
set -e
[ $rc -eq 2 ] || fail "bad level: exit $rc"
[ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "graph-opt wants none, basic or all, got 'extended'" ||
    fail "bad level message: $out"
set +e
out=$("$TSOPT" bench "$T/transition.onnx" --graph-opt 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && echo "$out" | grep -q -- "--graph-opt needs a value" || fail "missing level: exit $rc: $out"
echo "graph_opt: ok"
