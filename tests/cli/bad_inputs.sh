#!/usr/bin/env bash
# Bad input never crashes tsopt: each case asserts a non-zero exit code, one
# line on stderr with the key phrase (the importer's wording, matched by
# phrase rather than whole line), and that no output file or folder appears.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
PYTHON=${PYTHON:-/usr/bin/python3}

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
n=0

# bad PHRASE -- tsopt-args...: runs `tsopt ARGS`, expecting failure.
bad() {
  local phrase=$1; shift 2
  local rc=0
  rm -rf "$T/out"
  "$TSOPT" "$@" >"$T/stdout" 2>"$T/stderr" || rc=$?
  [ "$rc" -ne 0 ] || fail "exit 0, want failure: tsopt $*"
  [ "$rc" -lt 128 ] || fail "crashed (exit $rc): tsopt $* ($(cat "$T/stderr"))"
  grep -qF -- "$phrase" "$T/stderr" || fail "stderr lacks '$phrase': tsopt $*: $(cat "$T/stderr")"
  [ "$(wc -l <"$T/stderr")" -eq 1 ] || fail "want one error line: tsopt $*: $(cat "$T/stderr")"
  grep -q '^tsopt: ' "$T/stderr" || fail "error line does not start with 'tsopt: ': $(cat "$T/stderr")"
  [ ! -e "$T/out" ] || fail "output written after a failure: tsopt $*"
  [ -z "$(find "$T" -name '*.tmp*')" ] || fail "temporary file left behind: tsopt $*"
  n=$((n + 1))
  echo "   ok (exit $rc): $(cat "$T/stderr")"
}

# bad_model FILE PHRASE: both `info` and `run --save-outputs` must fail.
bad_model() {
  bad "$2" -- info "$T/$1"
  bad "$2" -- run "$T/$1" --save-outputs "$T/out"
}

echo "-- build bad models with onnx.helper"
"$PYTHON" - "$T" <<'EOF2'
import os, random, sys
import numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as TP
d = sys.argv[1]

def vi(name, shape, t=TP.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)

def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, 'bad', inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)])
    m.ir_version = 8
    return m

def save(m, name):
    with open(os.path.join(d, name), 'wb') as f:   # no checker: these are meant to be wrong
        f.write(m.SerializeToString())

# A valid model with a large weight: cutting it anywhere inside the weight
# leaves a protobuf that cannot parse.
w = numpy_helper.from_array(np.ones((64, 64), np.float32), 'w')
good = model([helper.make_node('MatMul', ['x', 'w'], ['y'])], [vi('x', [2, 64])], [vi('y', [2, 64])], [w])
onnx.checker.check_model(good)
save(good, 'good.onnx')
data = good.SerializeToString()
with open(os.path.join(d, 'truncated.onnx'), 'wb') as f:
    f.write(data[:len(data) // 2])
open(os.path.join(d, 'empty.onnx'), 'wb').close()
rng = random.Random(1234)
with open(os.path.join(d, 'random.onnx'), 'wb') as f:
    f.write(bytes(rng.randrange(256) for _ in range(4096)))

save(model([helper.make_node('FooBar', ['x'], ['y'])], [vi('x', [2, 3])], [vi('y', [2, 3])]), 'unknown_op.onnx')
save(model([helper.make_node('Add', ['x', 'ghost'], ['y'])], [vi('x', [2, 3])], [vi('y', [2, 3])]),
     'missing_input.onnx')
save(model([helper.make_node('Add', ['x', 'b'], ['a']), helper.make_node('Relu', ['a'], ['b'])],
           [vi('x', [2, 3])], [vi('a', [2, 3])]), 'cycle.onnx')
save(model([helper.make_node('Add', ['x', 'z'], ['y'])], [vi('x', [2, 3]), vi('z', [4, 5])], [vi('y', [2, 3])]),
     'shape_mismatch.onnx')
save(model([helper.make_node('Relu', ['x'], ['y'])], [vi('x', [2, -3])], [vi('y', [2, 3])]), 'negative_dim.onnx')
save(model([helper.make_node('Relu', ['x'], ['y'])], [vi('x', [10**12, 10**12])], [vi('y', [10**12, 10**12])]),
     'huge_dim.onnx')
then = helper.make_graph([helper.make_node('Identity', ['x'], ['t'])], 'then', [], [vi('t', [2, 3])])
# branches of different shapes and no declared shape: tsopt's shapes are static
other = helper.make_graph([helper.make_node('Transpose', ['x'], ['e'])], 'else', [], [vi('e', [3, 2])])
save(model([helper.make_node('If', ['c'], ['y'], then_branch=then, else_branch=other)],
           [vi('c', [], TP.BOOL), vi('x', [2, 3])], [vi('y', None)]), 'control_flow.onnx')

# symbolic sizes a 3x3 window cannot take at their placeholder 1: the input
# file decides them, so a bad file must be named, not the window
kw = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), 'k')
save(model([helper.make_node('Conv', ['x', 'k'], ['y'])], [vi('x', ['batch', 3, 'h', 'w'])],
           [vi('y', ['batch', 4, 'oh', 'ow'])], [kw]), 'dynamic.onnx')
os.makedirs(os.path.join(d, 'in_wrong'))
np.save(os.path.join(d, 'in_wrong', 'x.npy'), np.zeros((3, 64), np.float32))
os.makedirs(os.path.join(d, 'in_dtype'))
np.save(os.path.join(d, 'in_dtype', 'x.npy'), np.zeros((2, 64), np.float64))
os.makedirs(os.path.join(d, 'in_garbage'))
with open(os.path.join(d, 'in_garbage', 'x.npy'), 'wb') as f:
    f.write(b'this is not a numpy file')
os.makedirs(os.path.join(d, 'in_empty'))
EOF2

echo "-- model files"
bad "cannot open model" -- info "$T/no_such.onnx"
bad_model empty.onnx "is empty"
bad_model truncated.onnx "not a valid ONNX protobuf"
bad_model random.onnx "not a valid ONNX"
# an unknown operator loads (kept opaque, docs/onnx-models.md) but cannot run
bad "operator 'FooBar' (opset 13) is not supported: tsopt cannot execute it" -- \
  run "$T/unknown_op.onnx" --save-outputs "$T/out"
bad_model missing_input.onnx "'ghost' is not produced"
bad_model cycle.onnx "cycle"
bad_model shape_mismatch.onnx "shapes 2x3 and 4x5 do not broadcast"
bad_model negative_dim.onnx "negative dimension"
bad_model huge_dim.onnx "too large"
bad_model control_flow.onnx "output 0 is 2x3 in then_branch and 3x2 in else_branch, and the model declares no static shape"

echo "-- run options and input files"
bad "parent folder does not exist ($T/no/such)" -- run "$T/good.onnx" --save-outputs "$T/no/such/out"
[ ! -e "$T/no" ] || fail "parent folder created"
bad "parent folder does not exist ($T/no)" -- run "$T/good.onnx" --save-inputs "$T/no/in"
bad "the model wants float32 2x64, the file holds float32 3x64 ($T/in_wrong/x.npy)" -- \
  run "$T/good.onnx" --inputs "$T/in_wrong" --save-outputs "$T/out"
bad "the model wants float32 2x64, the file holds float64 2x64" -- \
  run "$T/good.onnx" --inputs "$T/in_dtype" --save-outputs "$T/out"
bad "not a .npy file (bad magic) ($T/in_garbage/x.npy)" -- \
  run "$T/good.onnx" --inputs "$T/in_garbage" --save-outputs "$T/out"
bad "input 'x': not a .npy file (bad magic) ($T/in_garbage/x.npy)" -- \
  run "$T/dynamic.onnx" --inputs "$T/in_garbage" --save-outputs "$T/out"
bad "input 'x': cannot open .npy file" -- run "$T/good.onnx" --inputs "$T/in_empty" --save-outputs "$T/out"
bad "input bind 'nope' does not name a graph input" -- run "$T/good.onnx" --input nope:2x64 --save-outputs "$T/out"

echo "ok: bad inputs ($n cases)"
