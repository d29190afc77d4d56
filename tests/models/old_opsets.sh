#!/usr/bin/env bash
# Models in the older ONNX dialects that other exporters still write: each is
# built with onnx.helper (or converted down with onnx.version_converter), run
# by tsopt and by ONNX Runtime on the same inputs, and compared.
#   - opset 7: BatchNormalization with the 'spatial' attribute
#   - opset 9: Upsample with a scales input, Slice with attributes, Pad with a
#     pads attribute, Softmax with the old coerce-to-2-D axis semantics, Gemm
#     whose weights are listed as graph inputs and initializers
#   - torchvision resnet18 converted down to opset 9 (or 10), else exported
#     by torch directly at opset 9
set -uo pipefail
: "${TSOPT:?TSOPT not set}" "${TSOPT_SRC:?TSOPT_SRC not set}" "${TSOPT_BUILD:?TSOPT_BUILD not set}"
: "${ORT_RUN:=$TSOPT_SRC/tools/ort/run.js}"
PYTHON=${PYTHON:-/usr/bin/python3}

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
CACHE=$TSOPT_BUILD/models
mkdir -p "$CACHE"

echo "-- build models"
"$PYTHON" - "$T" <<'EOF2' || { echo "FAIL: could not build the models"; exit 1; }
import os, sys
import numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as TP
d = sys.argv[1]
rng = np.random.default_rng(0)

def vi(name, shape):
    return helper.make_tensor_value_info(name, TP.FLOAT, shape)

def arr(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)

def save(name, nodes, inputs, outputs, inits=(), opset=9, ir=4):
    if ir < 4:  # IR 3 requires every initializer to be listed as a graph input too
        inputs = inputs + [vi(t.name, list(t.dims)) for t in inits if t.name not in [i.name for i in inputs]]
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)])
    m.ir_version = ir
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, name + '.onnx'))

C = 4
save('bn_spatial_op7',
     [helper.make_node('BatchNormalization', ['x', 's', 'b', 'm', 'v'], ['y'], epsilon=1e-3, spatial=1)],
     [vi('x', [2, C, 5, 5])], [vi('y', [2, C, 5, 5])],
     [arr('s', rng.uniform(0.5, 2, C)), arr('b', rng.uniform(-1, 1, C)), arr('m', rng.uniform(-1, 1, C)),
      arr('v', rng.uniform(0.5, 2, C))], opset=7, ir=3)
save('upsample_op9',
     [helper.make_node('Upsample', ['x', 'scales'], ['y'], mode='nearest')],
     [vi('x', [1, 2, 3, 4])], [vi('y', [1, 2, 6, 12])], [arr('scales', [1, 1, 2, 3])])
save('slice_attrs_op9',
     [helper.make_node('Slice', ['x'], ['y'], starts=[1, 0], ends=[1000, -1], axes=[0, 2])],
     [vi('x', [3, 4, 5])], [vi('y', [2, 4, 4])])
save('pad_attr_op9',
     [helper.make_node('Pad', ['x'], ['y'], pads=[0, 1, 2, 0, 2, 1], mode='constant', value=0.5)],
     [vi('x', [2, 3, 4])], [vi('y', [2, 6, 7])])
save('pad_reflect_op9',
     [helper.make_node('Pad', ['x'], ['y'], pads=[0, 0, 1, 2, 0, 0, 2, 1], mode='reflect')],
     [vi('x', [1, 2, 4, 5])], [vi('y', [1, 2, 7, 8])])
save('softmax_axis1_op9',  # coerces to 2-D at axis 1: softmax over 3*4 values per row
     [helper.make_node('Softmax', ['x'], ['y'], axis=1)], [vi('x', [2, 3, 4])], [vi('y', [2, 3, 4])])
save('softmax_default_op9',  # default axis is 1 before opset 13
     [helper.make_node('Softmax', ['x'], ['y'])], [vi('x', [2, 3, 4])], [vi('y', [2, 3, 4])])
W, B = rng.uniform(-1, 1, (5, 6)), rng.uniform(-1, 1, 5)
save('gemm_weight_inputs_op9',
     [helper.make_node('Gemm', ['x', 'W', 'B'], ['y'], transB=1, alpha=0.5, beta=2.0)],
     [vi('x', [3, 6]), vi('W', [5, 6]), vi('B', [5])], [vi('y', [3, 5])], [arr('W', W), arr('B', B)])
EOF2

echo "-- resnet18 converted down with onnx.version_converter"
src=$CACHE/resnet18-op11.onnx
if [ ! -f "$src" ]; then
  "$PYTHON" "$TSOPT_SRC/tools/export_torchvision.py" resnet18 "$src" --opset 11 >/dev/null 2>&1 || echo "   export failed"
fi
converted=
for target in 9 10; do
  [ -f "$src" ] || break
  if "$PYTHON" - "$src" "$T/resnet18_op$target.onnx" "$target" >"$T/convert.log" 2>&1 <<'EOF2'
import sys, onnx
from onnx import version_converter
m = version_converter.convert_version(onnx.load(sys.argv[1]), int(sys.argv[3]))
onnx.checker.check_model(m)
onnx.save(m, sys.argv[2])
EOF2
  then
    converted=resnet18_op$target
    echo "   converted to opset $target"
    break
  else
    echo "   opset $target: $(tail -1 "$T/convert.log")"
  fi
done
if [ -z "$converted" ]; then
  # onnx's converter has no Gemm adapter below opset 11: let torch's own
  # opset-9 symbolics write the old dialect instead.
  if "$PYTHON" "$TSOPT_SRC/tools/export_torchvision.py" resnet18 "$T/resnet18_op9.onnx" --opset 9 >"$T/convert.log" 2>&1; then
    echo "   exported by torch at opset 9 instead"
  else
    echo "   (no opset 9 resnet18: $(tail -1 "$T/convert.log"))"
  fi
fi

pass=0
failed=()
for model in "$T"/*.onnx; do
  name=$(basename "$model" .onnx)
  d=$T/$name
  mkdir -p "$d"
  binds=()
  [[ $name == resnet18_op* ]] && binds=(--input input:1x3x224x224)
  if ! "$TSOPT" run "$model" "${binds[@]}" --save-inputs "$d/in" --save-outputs "$d/tsopt" >"$d.run" 2>&1; then
    echo "FAIL $name: tsopt run: $(tail -1 "$d.run")"
    failed+=("$name")
    continue
  fi
  if ! node "$ORT_RUN" "$model" --inputs "$d/in" --save-outputs "$d/ort" >"$d.ort" 2>&1; then
    echo "FAIL $name: ort: $(tail -1 "$d.ort")"
    failed+=("$name")
    continue
  fi
  if "$TSOPT" compare "$d/tsopt" "$d/ort" --rtol 1e-3 --atol 1e-4 >"$d.cmp" 2>&1; then
    pass=$((pass + 1))
    echo "ok   $name"
  else
    echo "FAIL $name: compare:"
    sed 's/^/     /' "$d.cmp"
    failed+=("$name")
  fi
done
echo "$pass passed, ${#failed[@]} failed"
[ "${#failed[@]}" -eq 0 ] && [ "$pass" -gt 0 ]
