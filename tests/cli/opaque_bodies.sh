#!/usr/bin/env bash
# Opaque (custom-domain) nodes inside control-flow bodies (docs/onnx-models.md):
# info lists each with its path from the top graph (node/attribute/...);
# a body's opaque output with no declared type and shape fails in one line
# saying where to declare it, and --input OUT:DIMS reaches inside bodies;
# the model optimize writes then declares it in the body's value_info.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import onnx' 2>/dev/null || { echo "skip: no onnx for $PYTHON"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }
export TSOPT_CACHE_DIR=$T/cache

step "models: an If branch, a Loop body's If branch and the top graph each hold a com.example node"
"$PYTHON" - "$T" <<'PY'
import sys
import onnx
from onnx import helper, TensorProto as TP
d = sys.argv[1]
F = lambda n, s: helper.make_tensor_value_info(n, TP.FLOAT, s)


def model(declare):
    then_g = helper.make_graph(
        [helper.make_node('Relu', ['X'], ['r']),
         helper.make_node('MyOp', ['r'], ['c_out'], name='custom_then', domain='com.example', alpha=0.5),
         helper.make_node('Add', ['c_out', 'X'], ['t_out'])],
        'then_g', [], [F('t_out', [2, 3])], value_info=[F('c_out', [2, 3])] if declare else [])
    else_g = helper.make_graph([helper.make_node('Neg', ['X'], ['e_out'])], 'else_g', [], [F('e_out', [2, 3])])
    in_then = helper.make_graph(
        [helper.make_node('Other', ['y_in'], ['o_out'], name='custom_nested', domain='com.example')],
        'in_then', [], [F('o_out', [2, 3])])
    in_else = helper.make_graph([helper.make_node('Identity', ['y_in'], ['i_out'])], 'in_else', [],
                                [F('i_out', [2, 3])])
    body = helper.make_graph(
        [helper.make_node('Identity', ['c_in'], ['c_o']),
         helper.make_node('If', ['c_in'], ['y_out'], name='inner_if', then_branch=in_then, else_branch=in_else)],
        'body', [helper.make_tensor_value_info('i', TP.INT64, []), helper.make_tensor_value_info('c_in', TP.BOOL, []),
                 F('y_in', [2, 3])],
        [helper.make_tensor_value_info('c_o', TP.BOOL, []), F('y_out', [2, 3])])
    g = helper.make_graph(
        [helper.make_node('If', ['cond'], ['Y'], name='top_if', then_branch=then_g, else_branch=else_g),
         helper.make_node('Loop', ['n', 'cond', 'Y'], ['Z'], name='top_loop', body=body),
         helper.make_node('Custom', ['Z'], ['W'], name='custom_top', domain='com.example')],
        'g', [F('X', [2, 3]), helper.make_tensor_value_info('cond', TP.BOOL, [])], [F('W', [2, 3])],
        initializer=[helper.make_tensor('n', TP.INT64, [], [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17), helper.make_opsetid('com.example', 1)])
    m.ir_version = 8
    return m


onnx.save(model(True), f'{d}/declared.onnx')
onnx.save(model(False), f'{d}/undeclared.onnx')
PY

step "info lists the opaque nodes of every body, each by its path"
"$TSOPT" info "$T/declared.onnx" >"$T/info.txt"
cat "$T/info.txt"
grep -q "^opaque nodes (3," "$T/info.txt" || fail "not 3 opaque nodes"
grep -Eq "^  top_if/then_branch/custom_then +com.example::MyOp$" "$T/info.txt" || fail "If branch node not listed"
grep -Eq "^  top_loop/body/inner_if/then_branch/custom_nested +com.example::Other$" "$T/info.txt" ||
  fail "nested body node not listed"
grep -Eq "^  custom_top +com.example::Custom$" "$T/info.txt" || fail "top node not listed"

step "run names the first node it cannot execute, inside its body"
set +e
"$TSOPT" run "$T/declared.onnx" >/dev/null 2>"$T/run.err"
rc=$?
set -e
cat "$T/run.err"
[ "$rc" = 1 ] && [ "$(wc -l <"$T/run.err")" = 1 ] && grep -q "node 'top_if' (If): attribute 'then_branch': node 'custom_then' (com.example::MyOp)" "$T/run.err" ||
  fail "run: exit $rc"

step "an undeclared output inside a body: one line saying where to declare it"
set +e
"$TSOPT" info "$T/undeclared.onnx" >/dev/null 2>"$T/nd.err"
rc=$?
set -e
cat "$T/nd.err"
[ "$rc" = 1 ] && [ "$(wc -l <"$T/nd.err")" = 1 ] || fail "undeclared: exit $rc"
grep -q "attribute 'then_branch': node 'custom_then'.*no type and shape for its output 'c_out'.*value_info of the graph holding the node, a body's own.*--input c_out:DIMS" "$T/nd.err" ||
  fail "undeclared: message"

step "--input c_out:2x3 reaches the body; a name nowhere in the model is still refused"
"$TSOPT" info "$T/undeclared.onnx" --input c_out:2x3 | grep -Eq "^  top_if/then_branch/custom_then +com.example::MyOp$" ||
  fail "--input did not reach the body"
set +e
"$TSOPT" info "$T/undeclared.onnx" --input c_out:2x3 --input nowhere:2 >/dev/null 2>"$T/nw.err"
rc=$?
set -e
[ "$rc" = 1 ] && grep -q "input bind 'nowhere' does not name a graph input" "$T/nw.err" || { cat "$T/nw.err"; fail "nowhere: exit $rc"; }

step "optimize with the binding writes the body's value_info and keeps the nodes"
"$TSOPT" optimize "$T/undeclared.onnx" --input c_out:2x3 -o "$T/opt.onnx" --time-limit 2 >/dev/null
"$PYTHON" - "$T/opt.onnx" <<'PY' || fail "written model"
import sys
import onnx
m = onnx.load(sys.argv[1])
top_if = [n for n in m.graph.node if n.op_type == 'If'][0]
then_g = [a.g for a in top_if.attribute if a.name == 'then_branch'][0]
vi = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in then_g.value_info}
assert vi.get('c_out') == [2, 3], vi
assert [n.domain for n in then_g.node if n.op_type == 'MyOp'] == ['com.example']
assert any(o.domain == 'com.example' for o in m.opset_import)
print('then_branch declares c_out', vi['c_out'])
PY
"$TSOPT" info "$T/opt.onnx" | grep -q "^opaque nodes (3," || fail "the written model does not load on its own"
echo PASS
