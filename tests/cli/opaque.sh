#!/usr/bin/env bash
# Opaque nodes (docs/onnx-models.md): a custom-domain node between
# supported ops (Conv+BatchNormalization on either side) is kept as the
# file has it while the rest is optimized; ONNX Runtime cannot run the
# custom op, so the regions on each side are compared in ORT, original
# against optimized, and tsopt's own region check must have covered both.
# Also: run/bench refuse with one line naming the node, info lists it, an
# unknown default-domain op is kept the same way, a missing output shape is
# reported (and given with --input), a dynamic batch stays symbolic through
# the opaque node, and QuantizeLinear/DequantizeLinear are kept, never
# folded into float weights.  float16 values and weights around an opaque
# node, and the model's metadata, are written back as they were.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
: "${ORT_RUN:?ORT_RUN not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }
export TSOPT_CACHE_DIR=$T/cache

step "build the models with onnx.helper"
"$PYTHON" - "$T" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto as TP
d = sys.argv[1]
rng = np.random.default_rng(0)
C = 4


def f32(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def conv_bn(k, x, y, cin):
    inits = [f32(f'w{k}', rng.standard_normal((C, cin, 3, 3)) * 0.3), f32(f'b{k}', rng.standard_normal(C) * 0.1),
             f32(f's{k}', 1 + rng.random(C)), f32(f'o{k}', rng.standard_normal(C) * 0.1),
             f32(f'm{k}', rng.standard_normal(C) * 0.1), f32(f'v{k}', 0.5 + rng.random(C))]
    nodes = [helper.make_node('Conv', ['x' if k == 1 else x, f'w{k}', f'b{k}'], [f'c{k}'], name=f'conv{k}',
                              pads=[1, 1, 1, 1]),
             helper.make_node('BatchNormalization', [f'c{k}', f's{k}', f'o{k}', f'm{k}', f'v{k}'], [y],
                              name=f'bn{k}')]
    return nodes, inits


def model(op, domain, value_info=True, batch=1):
    n1, i1 = conv_bn(1, 'x', 'n1', 3)
    n2, i2 = conv_bn(2, 'u', 'n2', C)
    custom = helper.make_node(op, ['r1'], ['u'], name='custom', domain=domain, alpha=0.5, mode='fast',
                              sizes=[1, 2, 3], table=numpy_helper.from_array(np.arange(4, dtype=np.float32)))
    nodes = n1 + [helper.make_node('Relu', ['n1'], ['r1'], name='relu1'), custom] + n2 + \
        [helper.make_node('Relu', ['n2'], ['y'], name='relu2')]  # a BN writing a graph output is not folded
    vi = [helper.make_tensor_value_info('u', TP.FLOAT, [batch, C, 8, 8])] if value_info else []
    g = helper.make_graph(nodes, 'opaque', [helper.make_tensor_value_info('x', TP.FLOAT, [batch, 3, 8, 8])],
                          [helper.make_tensor_value_info('y', TP.FLOAT, [batch, C, 8, 8])], i1 + i2, value_info=vi)
    opsets = [helper.make_opsetid('', 13)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(g, opset_imports=opsets, producer_name='opaque-test')


onnx.save(model('MyOp', 'com.example'), f'{d}/custom.onnx')
onnx.save(model('FooBar', ''), f'{d}/unknown.onnx')
onnx.save(model('MyOp', 'com.example', batch='batch'), f'{d}/dynamic.onnx')
onnx.save(model('MyOp', 'com.example', value_info=False), f'{d}/no_shape.onnx')

# QDQ: int8 weights dequantized into a MatMul, the activation quantized and
# dequantized (what ONNX Runtime's quantization tools write)
w = rng.integers(-100, 100, (64, 64)).astype(np.int8)
inits = [numpy_helper.from_array(w, 'wq'), f32('ws', 0.01), numpy_helper.from_array(np.int8(0), 'wz'),
         f32('xs', 0.02), numpy_helper.from_array(np.uint8(128), 'xz')]
nodes = [helper.make_node('QuantizeLinear', ['x', 'xs', 'xz'], ['xq'], name='qx'),
         helper.make_node('DequantizeLinear', ['xq', 'xs', 'xz'], ['xd'], name='dqx'),
         helper.make_node('DequantizeLinear', ['wq', 'ws', 'wz'], ['wd'], name='dqw'),
         helper.make_node('MatMul', ['xd', 'wd'], ['y'], name='mm')]
g = helper.make_graph(nodes, 'qdq', [helper.make_tensor_value_info('x', TP.FLOAT, [4, 64])],
                      [helper.make_tensor_value_info('y', TP.FLOAT, [4, 64])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), f'{d}/qdq.onnx')
EOF

step "info lists the opaque node"
"$TSOPT" info "$T/custom.onnx" >"$T/info.txt" || { cat "$T/info.txt"; fail "info failed"; }
grep -q "opaque nodes (1," "$T/info.txt" || { cat "$T/info.txt"; fail "info does not list the opaque node"; }
grep -Eq "custom +com.example::MyOp" "$T/info.txt" || { cat "$T/info.txt"; fail "info does not name the op"; }

step "run and bench refuse with one line naming the node"
for cmd in run bench; do
    if "$TSOPT" $cmd "$T/custom.onnx" >"$T/$cmd.out" 2>"$T/$cmd.err"; then fail "$cmd ran a custom op"; fi
    [ "$(wc -l <"$T/$cmd.err")" -eq 1 ] || { cat "$T/$cmd.err"; fail "$cmd: expected one error line"; }
    grep -q "node 'custom' (com.example::MyOp): tsopt cannot execute operators of domain 'com.example'" \
        "$T/$cmd.err" || { cat "$T/$cmd.err"; fail "$cmd: the message does not name the node"; }
done
if "$TSOPT" run "$T/unknown.onnx" 2>"$T/unknown.err" >/dev/null; then fail "run ran an unknown op"; fi
grep -q "node 'custom': operator 'FooBar' (opset 13) is not supported: tsopt cannot execute it" "$T/unknown.err" \
    || { cat "$T/unknown.err"; fail "run: unknown op message"; }

step "a missing output shape is reported, and can be given with --input"
if "$TSOPT" info "$T/no_shape.onnx" >/dev/null 2>"$T/ns.err"; then fail "info loaded an opaque node of unknown shape"; fi
grep -q "the model declares no type and shape for its output 'u'.*--input u:DIMS" "$T/ns.err" \
    || { cat "$T/ns.err"; fail "missing shape message"; }
"$TSOPT" info "$T/no_shape.onnx" --input u:1x4x8x8 >/dev/null || fail "--input u:DIMS did not give the shape"

for m in custom unknown; do
    step "$m: optimize around the opaque node"
    # --min-gain 0: the model cannot be timed (it cannot run), so the cost
    # model decides; writing whatever it does not predict slower shows the
    # rewritten graph in the file
    "$TSOPT" optimize "$T/$m.onnx" -o "$T/$m.opt.onnx" --cost-model roofline --budget 20 --time-limit 20 \
        --min-gain 0 --json >"$T/$m.json" 2>"$T/$m.log" || { cat "$T/$m.log"; fail "$m: optimize failed"; }
    "$PYTHON" - "$T/$m.json" <<'EOF' || { cat "$T/$m.json"; fail "$m: optimize result"; }
import json, sys
r = json.load(open(sys.argv[1]))
assert r['written'] == 'optimized', r['reason']
assert r['applied']['passes'] >= 2, r['applied']            # conv+BN folded on both sides
c = r['check']
assert c['regions'] == 2, c                                  # one region on each side, both checked
assert c['whole_model'] is False, c                          # cannot run whole
assert 0 <= c['max_scaled_error'] <= 1, c
assert 'not timed' in r['reason'], r['reason']
EOF

    step "$m: the written file keeps the node as it was, its domain and opset import"
    "$PYTHON" - "$T/$m.onnx" "$T/$m.opt.onnx" <<'EOF' || fail "$m: written structure"
import sys
import onnx
a, b = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
if 'unknown' not in sys.argv[1]:  # the checker knows no FooBar in the default domain
    onnx.checker.check_model(b)
ca = [n for n in a.graph.node if n.name == 'custom'][0]
cb = [n for n in b.graph.node if n.name == 'custom']
assert len(cb) == 1, [n.op_type for n in b.graph.node]
cb = cb[0]
assert (cb.op_type, cb.domain) == (ca.op_type, ca.domain), (cb.op_type, cb.domain)
assert [x.SerializeToString() for x in cb.attribute] == [x.SerializeToString() for x in ca.attribute]
assert list(cb.output) == ['u'], cb.output
ops = [n.op_type for n in b.graph.node]
assert 'BatchNormalization' not in ops, ops                  # optimized around it
assert ops.count('Conv') == 2, ops
assert sorted((o.domain, o.version) for o in b.opset_import) == sorted((o.domain, o.version) for o in a.opset_import)
vi = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in b.graph.value_info}
assert vi.get('u') == [1, 4, 8, 8], vi
# the regions on each side of the custom node, as models ORT can run
# (extract_model would run the checker on the whole model first)
for m, path in ((a, sys.argv[1]), (b, sys.argv[2])):
    e = onnx.utils.Extractor(m)
    custom = [n for n in m.graph.node if n.name == 'custom'][0]
    onnx.save(e.extract_model(['x'], [custom.input[0]]), path + '.pre.onnx')
    onnx.save(e.extract_model(['u'], ['y']), path + '.post.onnx')
EOF
    for part in pre post; do
        "$TSOPT" run "$T/$m.onnx.$part.onnx" --save-inputs "$T/$m.$part.in" >/dev/null
        node "$ORT_RUN" "$T/$m.onnx.$part.onnx" --inputs "$T/$m.$part.in" --save-outputs "$T/$m.$part.ref" \
            --threads 1 >/dev/null
        node "$ORT_RUN" "$T/$m.opt.onnx.$part.onnx" --inputs "$T/$m.$part.in" --save-outputs "$T/$m.$part.out" \
            --threads 1 >/dev/null || fail "$m: ORT cannot run the optimized $part region"
        "$TSOPT" compare "$T/$m.$part.ref" "$T/$m.$part.out" --rtol 1e-3 --atol 1e-4 >"$T/$m.$part.cmp" \
            || { cat "$T/$m.$part.cmp"; fail "$m: the $part region differs in ORT"; }
    done
    "$TSOPT" info "$T/$m.opt.onnx" >/dev/null || fail "$m: tsopt cannot load its own output"
done

step "the measured cost model works around the node too (it is never timed)"
"$TSOPT" optimize "$T/custom.onnx" -o "$T/measured.onnx" --budget 5 --time-limit 30 --min-gain 0 --json \
    >"$T/measured.json" 2>"$T/measured.log" || { cat "$T/measured.log"; fail "measured: optimize failed"; }
"$PYTHON" - "$T/measured.json" "$T/measured.onnx" <<'EOF' || { cat "$T/measured.json"; fail "measured: result"; }
import json, sys
import onnx
r = json.load(open(sys.argv[1]))
assert r['stop'] in ('exhausted', 'budget'), r['stop']  # not 'time limit': the node is never timed
assert r['check']['regions'] >= 1 or r['written'] == 'original', r
assert [n.domain for n in onnx.load(sys.argv[2]).graph.node if n.name == 'custom'] == ['com.example']
EOF

step "dynamic: the batch stays symbolic through the opaque node"
"$TSOPT" optimize "$T/dynamic.onnx" -o "$T/dynamic.opt.onnx" --cost-model roofline --budget 20 --min-gain 0 \
    --json >"$T/dynamic.json" 2>"$T/dynamic.log" || { cat "$T/dynamic.log"; fail "dynamic: optimize failed"; }
"$PYTHON" - "$T/dynamic.json" "$T/dynamic.opt.onnx" <<'EOF' || { cat "$T/dynamic.json"; fail "dynamic: batch fixed"; }
import json, sys
import onnx
r = json.load(open(sys.argv[1]))
assert r['written'] == 'optimized', r['reason']
m = onnx.load(sys.argv[2])
dims = lambda vi: [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]
assert dims(m.graph.input[0])[0] == 'batch' and dims(m.graph.output[0])[0] == 'batch'
vi = {v.name: dims(v) for v in m.graph.value_info}
assert vi['u'] == ['batch', 4, 8, 8], vi
EOF
"$TSOPT" info "$T/dynamic.opt.onnx" --input x:2x3x8x8 >"$T/dyn2.txt" || fail "dynamic: the written model does not load at batch 2"
grep -Eq "y +float32 +2x4x8x8" "$T/dyn2.txt" || { cat "$T/dyn2.txt"; fail "dynamic: y is not batch 2"; }

step "QuantizeLinear/DequantizeLinear are kept, the int8 weights not folded"
"$TSOPT" optimize "$T/qdq.onnx" -o "$T/qdq.opt.onnx" --cost-model roofline --no-timing --budget 5 --json \
    >"$T/qdq.json" 2>"$T/qdq.log" || { cat "$T/qdq.log"; fail "qdq: optimize failed"; }
"$PYTHON" - "$T/qdq.onnx" "$T/qdq.opt.onnx" <<'EOF' || fail "qdq: not kept"
import sys
import onnx
from onnx import numpy_helper
a, b = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
ops = sorted(n.op_type for n in b.graph.node)
assert ops == sorted(n.op_type for n in a.graph.node), ops
w = {i.name: numpy_helper.to_array(i) for i in b.graph.initializer}
assert w['wq'].dtype.name == 'int8' and w['wq'].shape == (64, 64), {k: v.dtype for k, v in w.items()}
assert all(v.dtype.name != 'float32' or v.size <= 1 for v in w.values()), 'a float copy of the weights was written'
EOF
mkdir -p "$T/qdq.in"
"$PYTHON" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32))" \
    "$T/qdq.in/x.npy"
node "$ORT_RUN" "$T/qdq.onnx" --inputs "$T/qdq.in" --save-outputs "$T/qdq.ref" --threads 1 >/dev/null
node "$ORT_RUN" "$T/qdq.opt.onnx" --inputs "$T/qdq.in" --save-outputs "$T/qdq.out" --threads 1 >/dev/null \
    || fail "qdq: ORT cannot run the written model"
"$TSOPT" compare "$T/qdq.ref" "$T/qdq.out" --rtol 1e-3 --atol 1e-4 >"$T/qdq.cmp" \
    || { cat "$T/qdq.cmp"; fail "qdq: outputs differ in ORT"; }
step "float16 around the opaque node; the model's metadata kept"
"$PYTHON" - "$T/half.onnx" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto as TP
rng = np.random.default_rng(2)
f32 = lambda n, a: numpy_helper.from_array(np.asarray(a, np.float32), n)
inits = [f32('w', rng.standard_normal((4, 3, 3, 3)) * 0.3), f32('s', 1 + rng.random(4)), f32('o', rng.random(4)),
         f32('m', rng.random(4) * 0.1), f32('v', 0.5 + rng.random(4)),
         numpy_helper.from_array(np.linspace(-1, 1, 4).astype(np.float16).reshape(4, 1, 1), 'w16')]
nodes = [helper.make_node('Conv', ['x', 'w'], ['c'], pads=[1, 1, 1, 1]),
         helper.make_node('BatchNormalization', ['c', 's', 'o', 'm', 'v'], ['b']),
         helper.make_node('Cast', ['b'], ['h'], to=TP.FLOAT16), helper.make_node('Mul', ['h', 'w16'], ['hw']),
         helper.make_node('HalfOp', ['hw'], ['u'], domain='com.example', name='custom16', gain=0.5),
         helper.make_node('Cast', ['u'], ['uf'], to=TP.FLOAT), helper.make_node('Relu', ['uf'], ['y'])]
g = helper.make_graph(nodes, 'half', [helper.make_tensor_value_info('x', TP.FLOAT, ['batch', 3, 8, 8])],
                      [helper.make_tensor_value_info('y', TP.FLOAT, ['batch', 4, 8, 8])], inits,
                      value_info=[helper.make_tensor_value_info('u', TP.FLOAT16, ['batch', 4, 8, 8])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17), helper.make_opsetid('com.example', 3)],
                      producer_name='exporter', producer_version='9.9', doc_string='a model with float16')
helper.set_model_props(m, {'author': 'tsopt tests', 'license': 'none'})
m.ir_version = 8
onnx.save(m, sys.argv[1])
EOF
"$TSOPT" optimize "$T/half.onnx" -o "$T/half.opt.onnx" --cost-model roofline --no-timing --budget 20 --min-gain 0 \
    --json >"$T/half.json" 2>"$T/half.log" || { cat "$T/half.log"; fail "half: optimize failed"; }
"$PYTHON" - "$T/half.json" "$T/half.opt.onnx" <<'EOF' || { cat "$T/half.json"; fail "half: not kept"; }
import json, sys
import onnx
from onnx import numpy_helper, TensorProto as TP
r = json.load(open(sys.argv[1]))
assert r['written'] == 'optimized' and r['check']['regions'] >= 1, r
m = onnx.load(sys.argv[2])
ops = [n.op_type for n in m.graph.node]
assert 'BatchNormalization' not in ops, ops  # folded into the Conv before the node
[c] = [n for n in m.graph.node if n.name == 'custom16']
assert (c.domain, c.op_type, c.attribute[0].f) == ('com.example', 'HalfOp', 0.5), c
assert {(o.domain, o.version) for o in m.opset_import} >= {('com.example', 3)}, m.opset_import
w16 = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}['w16']
assert w16.dtype.name == 'float16', w16.dtype
vi = {v.name: v.type.tensor_type for v in m.graph.value_info}
assert vi['u'].elem_type == TP.FLOAT16 and vi['u'].shape.dim[0].dim_param == 'batch', vi['u']
assert (m.producer_name, m.producer_version, m.doc_string) == ('exporter', '9.9', 'a model with float16'), m
assert {p.key: p.value for p in m.metadata_props} == {'author': 'tsopt tests', 'license': 'none'}, m.metadata_props
EOF

echo "opaque OK"
