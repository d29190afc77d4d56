#!/usr/bin/env bash
# tsopt optimize --target ort times a MatMul, its bias Add and the spelled-out
# GELU reading it as one ONNX Runtime region (src/opt/ort_target.c,
# act_region): ORT runs them as MatMul + BiasGelu when the GELU keeps the
# pattern ORT matches and as five passes when a rewrite reorders it, which
# pieces timed apart cannot show.  Read off the cost cache: a region key with
# both MatMul and Erf -- for PyTorch's spelling and for one with the 0.5 moved
# onto erf + 1 (what taso-0144~rev writes); none where the MatMul's value is
# also a graph output (the diamond does not close) or an inner GELU value is.
# The same for a spelled-out LayerNorm read from a Transpose (layernorm_region):
# one region key with the Transpose and the LayerNorm's Sqrt.
set -euo pipefail
: "${TSOPT:?TSOPT not set}" "${ORT_RUN:?ORT_RUN not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ ! -d "$(dirname "$ORT_RUN")/node_modules/onnxruntime-node" ]; then
    echo "SKIP: onnxruntime-node not installed (make deps)"
    exit 0
fi
/usr/bin/python3 - "$T" <<'PY'
import sys
import numpy as np
import onnx
from onnx import helper, TensorProto as TP, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(0)
c = lambda name, *shape: nh.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)
k = lambda name, v: nh.from_array(np.array(v, np.float32), name)
N = helper.make_node

def model(name, moved, extra_out):
    nodes = [N("MatMul", ["x", "w1"], ["m"]), N("Add", ["b1", "m"], ["h"]),
             N("Div", ["h", "sqrt2"], ["q"]), N("Erf", ["q"], ["e"]), N("Add", ["e", "one"], ["e1"])]
    if moved:  # h * (erf(q) + 1) * 0.5 with the 0.5 on erf + 1
        nodes += [N("Mul", ["e1", "half"], ["e5"]), N("Mul", ["h", "e5"], ["g"])]
    else:      # PyTorch's export: (h * (erf(q) + 1)) * 0.5
        nodes += [N("Mul", ["h", "e1"], ["p"]), N("Mul", ["p", "half"], ["g"])]
    nodes += [N("MatMul", ["g", "w2"], ["m2"]), N("Add", ["m2", "b2"], ["y"])]
    outs = [helper.make_tensor_value_info("y", TP.FLOAT, [1, 49, 64])]
    if extra_out:
        outs.append(helper.make_tensor_value_info(extra_out, TP.FLOAT, [1, 49, 256]))
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TP.FLOAT, [1, 49, 64])], outs,
                          [c("w1", 64, 256), c("b1", 256), c("w2", 256, 64), c("b2", 64), k("sqrt2", 1.4142135),
                           k("one", 1.0), k("half", 0.5)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), "%s/%s.onnx" % (d, name))

model("gelu", False, None)
model("moved", True, None)
model("h_out", False, "h")
model("e1_out", False, "e1")

# ConvNeXt's LayerNorm after its channels-last permute, as PyTorch exports it
ln = [N("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]), N("ReduceMean", ["t"], ["mu"], axes=[-1]),
      N("Sub", ["t", "mu"], ["dv"]), N("Pow", ["dv", "two"], ["sq"]), N("ReduceMean", ["sq"], ["var"], axes=[-1]),
      N("Add", ["var", "eps"], ["ve"]), N("Sqrt", ["ve"], ["sd"]), N("Div", ["dv", "sd"], ["nm"]),
      N("Mul", ["nm", "gamma"], ["sc"]), N("Add", ["sc", "beta"], ["y"])]
g = helper.make_graph(ln, "ln", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 64, 7, 7])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [1, 7, 7, 64])],
                      [k("two", 2.0), k("eps", 1e-6), c("gamma", 64), c("beta", 64)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), "%s/ln.onnx" % d)
PY
for m in gelu moved h_out e1_out ln; do
    export TSOPT_CACHE_DIR=$T/cache_$m
    "$TSOPT" optimize "$T/$m.onnx" -o "$T/$m.out.onnx" --target ort --threads 1 --time-limit 2 --no-timing \
        >/dev/null 2>"$T/$m.log" || fail "$m: optimize failed: $(tail -3 "$T/$m.log")"
    n=$(cat "$TSOPT_CACHE_DIR"/*.tsv | grep '^@ort2 ' | grep 'MatMul{' | grep -c 'Erf{' || true)
    case $m in
    ln) n=$(cat "$TSOPT_CACHE_DIR"/*.tsv | grep '^@ort2 ' | grep 'Transpose{' | grep -c 'Sqrt{' || true)
        [ "$n" -ge 1 ] || fail "ln: no region with the Transpose and its LayerNorm timed" ;;
    gelu | moved) [ "$n" -ge 1 ] || fail "$m: no region with the MatMul and the GELU timed" ;;
    *) [ "$n" -eq 0 ] || fail "$m: the MatMul and the GELU timed as one region though a value leaves it" ;;
    esac
done
echo "PASS"
