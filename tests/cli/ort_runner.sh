#!/usr/bin/env bash
# The ONNX Runtime peer (tools/ort/run.js): .npy in/out for every supported
# dtype, file-name sanitizing, dynamic dims, --iters JSON, --list-io, and the
# one-line errors with exit code 1.
set -euo pipefail
: "${ORT_RUN:?ORT_RUN not set}"
PYTHON=${PYTHON:-/usr/bin/python3}

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }

step "build test models with onnx.helper, inputs with numpy"
"$PYTHON" - "$T" <<'EOF'
import os, sys
import numpy as np, onnx
from onnx import helper, TensorProto as TP
d = sys.argv[1]

def save(model, name):
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(d, name))

# y = a + b with names that need sanitizing and a dynamic first dimension.
g = helper.make_graph(
    [helper.make_node('Add', ['a:0', 'b/1'], ['sum/out'])], 'add',
    [helper.make_tensor_value_info('a:0', TP.FLOAT, ['n', 3]),
     helper.make_tensor_value_info('b/1', TP.FLOAT, ['n', 3])],
    [helper.make_tensor_value_info('sum/out', TP.FLOAT, ['n', 3])])
save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), 'add.onnx')
os.makedirs(os.path.join(d, 'in'))
rng = np.random.default_rng(0)
np.save(os.path.join(d, 'in', 'a_0.npy'), rng.standard_normal((5, 3)).astype(np.float32))
np.save(os.path.join(d, 'in', 'b_1.npy'), rng.standard_normal((5, 3)).astype(np.float32))

# Identity per dtype: the runner must read and write each one bit-exactly.
types = {'f32': (TP.FLOAT, np.float32), 'f64': (TP.DOUBLE, np.float64),
         'i64': (TP.INT64, np.int64), 'i32': (TP.INT32, np.int32),
         'i8': (TP.INT8, np.int8), 'u8': (TP.UINT8, np.uint8), 'b': (TP.BOOL, np.bool_)}
nodes, ins, outs = [], [], []
os.makedirs(os.path.join(d, 'in_dt'))
for k, (tp, npt) in types.items():
    if npt is np.bool_:
        a = rng.integers(0, 2, (2, 3, 4)).astype(np.bool_)
    elif np.issubdtype(npt, np.integer):
        info = np.iinfo(npt)
        a = rng.integers(info.min, info.max, (2, 3, 4), dtype=npt, endpoint=True)
    else:
        a = rng.standard_normal((2, 3, 4)).astype(npt)
    if k == 'f64':
        a = np.float64(3.25)                # 0-d array
    if k == 'i32':
        a = np.zeros((0, 4), np.int32)      # empty tensor
    nodes.append(helper.make_node('Identity', [f'x_{k}'], [f'y_{k}']))
    ins.append(helper.make_tensor_value_info(f'x_{k}', tp, a.shape))
    outs.append(helper.make_tensor_value_info(f'y_{k}', tp, a.shape))
    path = os.path.join(d, 'in_dt', f'x_{k}.npy')
    if k == 'f32':                          # a version 2.0 file
        with open(path, 'wb') as f:
            np.lib.format.write_array(f, a, version=(2, 0))
    else:
        np.save(path, a)
g = helper.make_graph(nodes, 'dtypes', ins, outs)
save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), 'dtypes.onnx')
EOF

step "run the Add model, compare with numpy"
node "$ORT_RUN" "$T/add.onnx" --inputs "$T/in" --save-outputs "$T/out" --threads 1
[ -f "$T/out/sum_out.npy" ] || fail "output not written as sum_out.npy"
"$PYTHON" - "$T" <<'EOF'
import os, sys, numpy as np
d = sys.argv[1]
a, b = np.load(f'{d}/in/a_0.npy'), np.load(f'{d}/in/b_1.npy')
y = np.load(f'{d}/out/sum_out.npy')
assert y.dtype == np.float32 and y.shape == (5, 3), (y.dtype, y.shape)
assert np.array_equal(y, a + b), 'Add result differs from numpy'
assert os.listdir(f'{d}/out') == ['sum_out.npy'], os.listdir(f'{d}/out')
EOF

step "round-trip every dtype through Identity (v2.0 input, 0-d, empty)"
node "$ORT_RUN" "$T/dtypes.onnx" --inputs "$T/in_dt" --save-outputs "$T/out_dt"
"$PYTHON" - "$T" <<'EOF'
import os, sys, numpy as np
d = sys.argv[1]
for f in sorted(os.listdir(f'{d}/in_dt')):
    x = np.load(f'{d}/in_dt/{f}')
    y = np.load(f'{d}/out_dt/y_' + f[2:])
    assert x.dtype == y.dtype and x.shape == y.shape, (f, x.dtype, y.dtype, x.shape, y.shape)
    assert np.array_equal(x, y), f
print(f'   {len(os.listdir(d + "/in_dt"))} dtypes ok')
EOF

step "--iters prints one JSON line with the timing keys"
json=$(node "$ORT_RUN" "$T/add.onnx" --inputs "$T/in" --iters 3 --threads 2)
echo "   $json"
"$PYTHON" - "$json" <<'EOF'
import json, sys
lines = sys.argv[1].strip().splitlines()
assert len(lines) == 1, lines
j = json.loads(lines[0])
keys = {'median_ms', 'min_ms', 'max_ms', 'iters', 'threads', 'peak_rss_bytes'}
assert set(j) == keys, sorted(j)
assert j['iters'] == 3 and j['threads'] == 2, j
assert 0 <= j['min_ms'] <= j['median_ms'] <= j['max_ms'], j
assert j['peak_rss_bytes'] > 1 << 20, j
EOF

step "--min-time adds timed runs until they add up to that many seconds"
json=$(node "$ORT_RUN" "$T/add.onnx" --inputs "$T/in" --iters 2 --min-time 0.2 --threads 1)
"$PYTHON" - "$json" <<'EOF'
import json, sys
j = json.loads(sys.argv[1].strip())
# a tiny Add runs far below 0.1 ms: 0.2 s needs many more than the 2 asked
assert j['iters'] > 2, j
EOF

step "--list-io names inputs and outputs"
io=$(node "$ORT_RUN" "$T/add.onnx" --list-io)
echo "$io" | sed 's/^/   /'
grep -q '^input a:0 ' <<<"$io" || fail "--list-io misses input a:0"
grep -q '^input b/1 ' <<<"$io" || fail "--list-io misses input b/1"
grep -q '^output sum/out ' <<<"$io" || fail "--list-io misses output sum/out"

# expect_error EXPECTED_STDERR_LINE -- command...
expect_error() {
  local want=$1; shift; shift
  local rc=0
  "$@" >"$T/stdout" 2>"$T/stderr" || rc=$?
  [ "$rc" -eq 1 ] || fail "exit code $rc, want 1: $*"
  local got; got=$(cat "$T/stderr")
  [ "$got" = "$want" ] || fail "stderr: got '$got', want '$want'"
  [ ! -s "$T/stdout" ] || fail "unexpected stdout: $(cat "$T/stdout")"
  echo "   $got"
}

step "--min-time without a number: one error line, exit 1"
expect_error "ort: --min-time needs a number of seconds (abc)" -- \
  node "$ORT_RUN" "$T/add.onnx" --inputs "$T/in" --min-time abc

step "missing model file: one error line, exit 1"
expect_error "ort: no such model file ($T/nope.onnx)" -- \
  node "$ORT_RUN" "$T/nope.onnx" --inputs "$T/in"

step "missing input .npy: one error line naming tensor and file, exit 1"
mkdir "$T/in_missing"
cp "$T/in/a_0.npy" "$T/in_missing/"
expect_error "ort: input 'b/1': no such file ($T/in_missing/b_1.npy)" -- \
  node "$ORT_RUN" "$T/add.onnx" --inputs "$T/in_missing" --save-outputs "$T/out_missing"
[ ! -e "$T/out_missing" ] || fail "outputs written after a failed run"

step "garbage .npy and wrong dtype are reported"
head -c 40 /dev/urandom >"$T/in_missing/b_1.npy"
expect_error "ort: input 'b/1': not a .npy file (bad magic) ($T/in_missing/b_1.npy)" -- \
  node "$ORT_RUN" "$T/add.onnx" --inputs "$T/in_missing"
"$PYTHON" -c "import numpy as np, sys; np.save(sys.argv[1], np.ones((5, 3)))" "$T/in_missing/b_1.npy"
expect_error "ort: input 'b/1' is float32 in the model, file holds float64 ($T/in_missing/b_1.npy)" -- \
  node "$ORT_RUN" "$T/add.onnx" --inputs "$T/in_missing"

echo "ok: ort runner"
