#!/usr/bin/env bash
# An eOperator in a written model (docs/einnet.md, "Written models"): a
# file holding a call of tsopt's eOperator (domain ai.tsopt, EinNetOp_*,
# attribute expr: the MatMul of a 3x4 input by a 4x5 weight, as
# ts_ein_to_text writes it) is read by tsopt as the eOperator; written
# again by tsopt, the call gets its model-local function, whose body is
# standard operators, so ONNX Runtime runs the written model, and ORT,
# tsopt and numpy agree.  A wrong expression text is one error line.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
: "${ORT_RUN:?ORT_RUN not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export TSOPT_CACHE_DIR=$T/cache
EXPR='ein1 2 3 1 3 4 2 3 4 2 4 5 2 3 5 0 3 0 5 0 4 2 1 2 0 1 2 0 2 -1 -1 1 0 0 0 2 -1 -1 0 2 0 4 0 1 0 0 0 0 1 0 1 0 2 1 1 0 1 0 1 1 1 0 1 0 0 1 1 0 1 0 2 1'

"$PYTHON" - "$T" "$EXPR" <<'P'
import sys
import numpy as np
from onnx import helper, numpy_helper, TensorProto as TP
d, expr = sys.argv[1], sys.argv[2]
w = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
np.save(d + '/w.npy', w)
for name, text in (('m', expr), ('bad', expr.replace('ein1 2 3', 'ein1 2 9'))):
    call = helper.make_node('EinNetOp_0000000000000001', ['x', 'w'], ['t'], name='eop', domain='ai.tsopt', expr=text)
    g = helper.make_graph([call, helper.make_node('Relu', ['t'], ['y'], name='relu')], 'eop',
                          [helper.make_tensor_value_info('x', TP.FLOAT, [3, 4])],
                          [helper.make_tensor_value_info('y', TP.FLOAT, [3, 5])], [numpy_helper.from_array(w, 'w')])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17), helper.make_opsetid('ai.tsopt', 1)])
    m.ir_version = 8
    open('%s/%s.onnx' % (d, name), 'wb').write(m.SerializeToString())
P

"$TSOPT" info "$T/m.onnx" >"$T/info" || fail "tsopt cannot read its eOperator call"
grep -q "tsopt.EinNetOp" "$T/info" || { cat "$T/info"; fail "the call was not read as the eOperator"; }
if "$TSOPT" info "$T/bad.onnx" >/dev/null 2>"$T/bad.err"; then fail "a wrong expression was accepted"; fi
[ "$(wc -l <"$T/bad.err")" -eq 1 ] && grep -q "node 'eop'.*expr" "$T/bad.err" || { cat "$T/bad.err"; fail "bad expression error"; }

"$TSOPT" optimize "$T/m.onnx" -o "$T/o.onnx" --transforms einnet --time-limit 0 --cost-model roofline --no-timing \
    >"$T/opt.log" 2>&1 || { cat "$T/opt.log"; fail "optimize failed"; }
"$PYTHON" - "$T/o.onnx" <<'P' || fail "the written function"
import sys
import onnx
m = onnx.load(sys.argv[1])
calls = [n for n in m.graph.node if n.domain == 'ai.tsopt']
assert len(calls) == 1 and calls[0].op_type.startswith('EinNetOp_'), [(n.domain, n.op_type) for n in m.graph.node]
fs = [f for f in m.functions if f.domain == 'ai.tsopt' and f.name == calls[0].op_type]
assert len(fs) == 1, [(f.domain, f.name) for f in m.functions]
assert all(n.domain in ('', 'ai.onnx') for n in fs[0].node), [n.op_type for n in fs[0].node]
assert 'MatMul' in [n.op_type for n in fs[0].node]
assert any(o.domain == 'ai.tsopt' for o in m.opset_import)
onnx.checker.check_model(m)
P
"$TSOPT" run "$T/o.onnx" --save-inputs "$T/in" --save-outputs "$T/tsopt" >/dev/null || fail "tsopt run"
node "$ORT_RUN" "$T/o.onnx" --inputs "$T/in" --save-outputs "$T/ort" --threads 1 >/dev/null || fail "ORT cannot run it"
"$TSOPT" compare "$T/ort" "$T/tsopt" --rtol 1e-3 --atol 1e-4 >"$T/cmp" || { cat "$T/cmp"; fail "ORT and tsopt differ"; }
"$PYTHON" - "$T" <<'P' || fail "not x @ w, relu"
import sys
import numpy as np
d = sys.argv[1]
x, w, y = np.load(d + '/in/x.npy'), np.load(d + '/w.npy'), np.load(d + '/ort/y.npy')
assert np.allclose(y, np.maximum(x @ w, 0), rtol=1e-3, atol=1e-4), (y, x @ w)
P
echo "einnet function: ok"
