#!/usr/bin/env bash
# tsopt info / run / compare on a small Add+Mul model built with onnx.helper:
# output format, --save-inputs then --inputs giving identical outputs,
# compare's exit codes (0 same, 1 differs, 2 usage/IO), --input parsing errors.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
PYTHON=${PYTHON:-/usr/bin/python3}

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }

# expect CODE PHRASE -- command...: exit code CODE and PHRASE on stderr.
expect() {
  local code=$1 phrase=$2; shift 3
  local rc=0
  "$@" >"$T/stdout" 2>"$T/stderr" || rc=$?
  [ "$rc" -eq "$code" ] || fail "exit $rc, want $code: $* ($(cat "$T/stderr"))"
  grep -qF -- "$phrase" "$T/stderr" || fail "stderr lacks '$phrase': $(cat "$T/stderr")"
  [ "$(wc -l <"$T/stderr")" -eq 1 ] || fail "want one error line, got: $(cat "$T/stderr")"
  echo "   ok: $(cat "$T/stderr")"
}

step "build model: out/z = (x:0 + y) * w, x:0 has a dynamic first dim"
"$PYTHON" - "$T" <<'EOF2'
import sys, onnx
from onnx import helper, TensorProto as TP
w = helper.make_tensor('w', TP.FLOAT, [3], [1.0, 2.0, 3.0])
g = helper.make_graph(
    [helper.make_node('Add', ['x:0', 'y'], ['s']), helper.make_node('Mul', ['s', 'w'], ['out/z'])], 'addmul',
    [helper.make_tensor_value_info('x:0', TP.FLOAT, ['n', 3]), helper.make_tensor_value_info('y', TP.FLOAT, [2, 3])],
    [helper.make_tensor_value_info('out/z', TP.FLOAT, [2, 3])], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1] + '/m.onnx')
EOF2
M=$T/m.onnx

step "help and usage"
"$TSOPT" --help | grep -q "usage: tsopt" || fail "--help"
"$TSOPT" help run | grep -q -- "--save-outputs" || fail "help run"
rc=0; "$TSOPT" >/dev/null 2>&1 || rc=$?; [ $rc -eq 2 ] || fail "no args: exit $rc"
expect 2 "unknown command 'frobnicate'" -- "$TSOPT" frobnicate

step "info"
"$TSOPT" info "$M" --input x:0:2x3 >"$T/info"
cat "$T/info" | sed 's/^/   /'
grep -q '^opset: 13$' "$T/info" || fail "opset"
grep -Eq '^  x:0 +float32 +2x3 \[n, 3\]$' "$T/info" || fail "input x:0 (symbolic dimension by name, bound size)"
grep -Eq '^  y +float32 +2x3$' "$T/info" || fail "input y"
grep -Eq '^  out/z +float32 +2x3$' "$T/info" || fail "output"
grep -Eq '^  Add +1$' "$T/info" || fail "Add count"
grep -Eq '^  Mul +1$' "$T/info" || fail "Mul count"
grep -q '^nodes: 2$' "$T/info" || fail "nodes"
grep -q '^parameters: 3 ' "$T/info" || fail "parameters"
grep -q '^GFLOPs: ' "$T/info" || fail "GFLOPs"

step "run: random inputs saved, then read back: identical outputs"
"$TSOPT" run "$M" --input x:0:2x3 --seed 7 --iters 3 --save-inputs "$T/in" --save-outputs "$T/out1" >"$T/run1"
cat "$T/run1" | sed 's/^/   /'
grep -q '^output out/z: float32 2x3 \[' "$T/run1" || fail "run output line"
grep -q 'median of 3' "$T/run1" || fail "run timing line"
[ -f "$T/in/x_0.npy" ] && [ -f "$T/in/y.npy" ] && [ -f "$T/out1/out_z.npy" ] || fail "sanitized .npy names"
"$TSOPT" run "$M" --input x:0:2x3 --inputs "$T/in" --save-outputs "$T/out2" --reference >/dev/null
cmp -s "$T/out1/out_z.npy" "$T/out2/out_z.npy" || fail "outputs differ after --inputs round trip"
"$PYTHON" - "$T" <<'EOF2'
import sys, numpy as np
d = sys.argv[1]
x, y, z = np.load(d + '/in/x_0.npy'), np.load(d + '/in/y.npy'), np.load(d + '/out1/out_z.npy')
assert x.dtype == np.float32 and x.shape == (2, 3) and (x >= -1).all() and (x < 1).all(), x
assert np.array_equal(z, (x + y) * np.float32([1, 2, 3])), 'tsopt result differs from numpy'
EOF2
"$TSOPT" run "$M" --input x:0:2x3 --seed 8 --save-inputs "$T/in8" >/dev/null
! cmp -s "$T/in/y.npy" "$T/in8/y.npy" || fail "--seed does not change the inputs"

step "compare: identical -> 0, perturbed -> 1, missing -> 2"
"$TSOPT" compare "$T/out1" "$T/out2" >"$T/cmp" || fail "identical dirs do not compare equal"
grep -Eq '^OK +out_z +2x3 ' "$T/cmp" || fail "compare OK line: $(cat "$T/cmp")"
"$PYTHON" -c "import numpy as np, sys; a = np.load(sys.argv[1]); a[1, 2] += 0.5; np.save(sys.argv[1], a)" "$T/out2/out_z.npy"
rc=0; "$TSOPT" compare "$T/out1" "$T/out2" >"$T/cmp" || rc=$?
[ $rc -eq 1 ] || fail "perturbed: exit $rc, want 1"
grep -Eq '^FAIL +out_z .*worst at \[1,2\]' "$T/cmp" || fail "compare FAIL line: $(cat "$T/cmp")"
"$TSOPT" compare "$T/out1" "$T/out2" --atol 1 >/dev/null || fail "--atol 1 should accept a 0.5 difference"
expect 2 "cannot read folder ($T/nope)" -- "$TSOPT" compare "$T/out1" "$T/nope"
expect 2 "cannot read folder ($T/nope)" -- "$TSOPT" compare "$T/nope" "$T/out1"
mkdir "$T/partial"
expect 2 "$T/partial/out_z.npy" -- "$TSOPT" compare "$T/out1" "$T/partial"
expect 2 "--rtol wants a non-negative number" -- "$TSOPT" compare "$T/out1" "$T/out2" --rtol abc

step "NaN: NaN vs NaN is OK, NaN vs number fails"
"$PYTHON" - "$T" <<'EOF2'
import sys, os, numpy as np
d = sys.argv[1]
for sub in ('na', 'nb', 'nc'):
    os.makedirs(f'{d}/{sub}')
np.save(f'{d}/na/t.npy', np.float32([1, np.nan, 3]))
np.save(f'{d}/nb/t.npy', np.float32([1, np.nan, 3.0001]))
np.save(f'{d}/nc/t.npy', np.float32([1, 2, 3]))
EOF2
"$TSOPT" compare "$T/na" "$T/nb" >/dev/null || fail "NaN vs NaN should match"
rc=0; "$TSOPT" compare "$T/na" "$T/nc" >/dev/null || rc=$?
[ $rc -eq 1 ] || fail "NaN vs number: exit $rc, want 1"

step "bad --input text and option errors"
expect 2 "--input wants NAME:D0xD1x..." -- "$TSOPT" run "$M" --input x
expect 2 "bad dimension in shape" -- "$TSOPT" run "$M" --input x:0:2xq
expect 2 "ends with a separator" -- "$TSOPT" run "$M" --input x:0:2x
expect 2 "--input needs a value" -- "$TSOPT" info "$M" --input
expect 2 "--iters wants an integer" -- "$TSOPT" run "$M" --iters 0
expect 2 "unknown option '--bogus'" -- "$TSOPT" run "$M" --bogus
expect 2 "parent folder does not exist ($T/no/such)" -- "$TSOPT" run "$M" --save-outputs "$T/no/such/out"
[ ! -e "$T/no" ] || fail "a folder was created"

echo "ok: cli basic"
