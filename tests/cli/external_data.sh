#!/usr/bin/env bash
# Big models and model size (docs/onnx-models.md): a model whose weights are
# in ONNX external data is read (weights memory-mapped), run as ORT runs it,
# and written back with --external-data (the .onnx small, the weights in
# OUT.onnx.data at aligned offsets) so that ORT and tsopt run the result with
# the original's outputs; without the option the weights are inline again.
# No bloat: a model whose constant folding would multiply its weights is
# written at its own size, and a rewrite that grows the weights by more
# than 10% is written only with --allow-growth.  (Models over 2 GiB take the
# same path automatically; that is measured by hand, not here: too slow.)
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
: "${ORT_RUN:?ORT_RUN not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }
export TSOPT_CACHE_DIR=$T/cache

step "build the models"
"$PYTHON" - "$T" <<'EOF'
import os, sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto as TP
d = sys.argv[1]
rng = np.random.default_rng(0)
f32 = lambda name, a: numpy_helper.from_array(np.asarray(a, np.float32), name)
vi = helper.make_tensor_value_info


def save(nodes, inputs, outputs, inits, name, external=False):
    m = helper.make_model(helper.make_graph(nodes, name, inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid('', 13)])
    os.makedirs(f'{d}/{name}', exist_ok=True)
    onnx.save_model(m, f'{d}/{name}/{name}.onnx', save_as_external_data=external, all_tensors_to_one_file=True,
                    location=f'{name}.weights', size_threshold=1024)


# an MLP of 4 MiB of weights, in external data
save([helper.make_node('MatMul', ['x', 'w1'], ['h1']), helper.make_node('Add', ['h1', 'b1'], ['a1']),
      helper.make_node('Relu', ['a1'], ['r1']), helper.make_node('MatMul', ['r1', 'w2'], ['h2']),
      helper.make_node('Add', ['h2', 'b2'], ['y'])],
     [vi('x', TP.FLOAT, [8, 512])], [vi('y', TP.FLOAT, [8, 512])],
     [f32('w1', rng.standard_normal((512, 1024)) * 0.05), f32('b1', rng.standard_normal(1024)),
      f32('w2', rng.standard_normal((1024, 512)) * 0.05), f32('b2', rng.standard_normal(512))], 'mlp', True)

# constant folding would write Tile(w) (16 x w) instead of w
save([helper.make_node('Tile', ['w', 'reps'], ['wt']), helper.make_node('MatMul', ['x', 'wt'], ['y'])],
     [vi('x', TP.FLOAT, [4, 1024])], [vi('y', TP.FLOAT, [4, 64])],
     [f32('w', rng.standard_normal((64, 64))), numpy_helper.from_array(np.array([16, 1], np.int64), 'reps')], 'tile')

# x @ w1 + x @ w2 is x @ (w1 + w2) (TASO's distributivity: w1 + w2 is a
# new weight) while w1 @ z and w2 @ z keep w1 and w2: the rewrite writes
# 3 weights where the original had 2
save([helper.make_node('MatMul', ['x', 'w1'], ['p']), helper.make_node('MatMul', ['x', 'w2'], ['q']),
      helper.make_node('Add', ['p', 'q'], ['y']), helper.make_node('MatMul', ['w1', 'z'], ['s']),
      helper.make_node('MatMul', ['w2', 'z'], ['t']), helper.make_node('Relu', ['s'], ['y2']),
      helper.make_node('Relu', ['t'], ['y3'])],
     [vi('x', TP.FLOAT, [4, 256]), vi('z', TP.FLOAT, [256, 4])],
     [vi('y', TP.FLOAT, [4, 256]), vi('y2', TP.FLOAT, [256, 4]), vi('y3', TP.FLOAT, [256, 4])],
     [f32('w1', rng.standard_normal((256, 256)) * 0.1), f32('w2', rng.standard_normal((256, 256)) * 0.1)], 'grow')
EOF
M=$T/mlp/mlp.onnx
[ -s "$T/mlp/mlp.weights" ] || fail "the original has no external data file"

step "tsopt runs the external-data model as ORT does"
"$TSOPT" run "$M" --save-inputs "$T/in" --save-outputs "$T/tsopt.out" >/dev/null
node "$ORT_RUN" "$M" --inputs "$T/in" --save-outputs "$T/ref" --threads 1 >/dev/null
"$TSOPT" compare "$T/ref" "$T/tsopt.out" --rtol 1e-3 --atol 1e-4 >"$T/cmp0" || { cat "$T/cmp0"; fail "tsopt run differs"; }

step "optimize --external-data writes the weights beside the model"
mkdir -p "$T/o"
"$TSOPT" optimize "$M" -o "$T/o/fast.onnx" --external-data --cost-model roofline --no-timing --budget 10 \
    >"$T/opt.log" 2>&1 || { cat "$T/opt.log"; fail "optimize failed"; }
"$PYTHON" - "$T/o/fast.onnx" <<'EOF' || fail "the written external data"
import os, sys
import onnx
p = sys.argv[1]
m = onnx.load(p, load_external_data=False)
assert os.path.getsize(p) < 64 * 1024, os.path.getsize(p)
ext = [t for t in m.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
assert len(ext) >= 2, [(t.name, t.data_location) for t in m.graph.initializer]
for t in ext:
    e = {kv.key: kv.value for kv in t.external_data}
    assert e['location'] == 'fast.onnx.data', e
    assert int(e['offset']) % 4096 == 0, e
size = os.path.getsize(p + '.data')
assert size >= 4 * 1024 * 1024, size
onnx.checker.check_model(p)
full = onnx.load(p)                                    # the weights load back
assert sum(len(t.raw_data) for t in full.graph.initializer) >= 4 * 1024 * 1024
EOF
node "$ORT_RUN" "$T/o/fast.onnx" --inputs "$T/in" --save-outputs "$T/ort.out" --threads 1 >/dev/null \
    || fail "ORT cannot run the written model"
"$TSOPT" compare "$T/ref" "$T/ort.out" --rtol 1e-3 --atol 1e-4 >"$T/cmp1" || { cat "$T/cmp1"; fail "ORT output differs"; }
"$TSOPT" run "$T/o/fast.onnx" --inputs "$T/in" --save-outputs "$T/tsopt2.out" >/dev/null \
    || fail "tsopt cannot run its written model"
"$TSOPT" compare "$T/ref" "$T/tsopt2.out" --rtol 1e-3 --atol 1e-4 >"$T/cmp2" || { cat "$T/cmp2"; fail "tsopt output differs"; }

step "--inputs DIR: the whole-model check runs on the user's tensors"
G=$T/grow/grow.onnx # a model the search rewrites (below)
"$TSOPT" run "$G" --save-inputs "$T/gin" >/dev/null
"$TSOPT" optimize "$G" -o "$T/o/user.onnx" --inputs "$T/gin" --cost-model roofline --no-timing --budget 20 \
    --min-gain 0 --allow-growth --json >"$T/user.json" 2>"$T/user.log" || { cat "$T/user.log"; fail "optimize --inputs failed"; }
"$PYTHON" -c "import json, sys; c = json.load(open(sys.argv[1]))['check']; assert c['inputs'] == 'user' and c['whole_model'], c" \
    "$T/user.json" || { cat "$T/user.json"; fail "--inputs was not used"; }
mkdir -p "$T/badin"
cp "$T/gin/z.npy" "$T/badin/"
"$PYTHON" -c "import numpy as np, sys; np.save(sys.argv[1], np.zeros((3, 256), np.float32))" "$T/badin/x.npy"
if "$TSOPT" optimize "$G" -o "$T/o/bad.onnx" --inputs "$T/badin" --cost-model roofline --no-timing \
    >/dev/null 2>"$T/badin.err"; then fail "optimize took an input of the wrong shape"; fi
grep -q "input 'x': the model wants float32 4x256, '.*x.npy' holds float32 3x256" "$T/badin.err" \
    || { cat "$T/badin.err"; fail "--inputs: wrong-shape message"; }
[ ! -e "$T/o/bad.onnx" ] || fail "a model was written despite bad --inputs"

step "without --external-data the weights are inline"
"$TSOPT" optimize "$M" -o "$T/o/inline.onnx" --cost-model roofline --no-timing --budget 10 >/dev/null 2>&1 \
    || fail "optimize (inline) failed"
[ ! -e "$T/o/inline.onnx.data" ] || fail "an external data file was written unasked"
[ "$(stat -c %s "$T/o/inline.onnx")" -gt 4000000 ] || fail "the inline model lacks its weights"

step "no bloat: folding Tile(w) would write 16 x w"
"$TSOPT" optimize "$T/tile/tile.onnx" -o "$T/o/tile.onnx" --cost-model roofline --no-timing --budget 10 --json \
    >"$T/tile.json" 2>"$T/tile.log" || { cat "$T/tile.log"; fail "optimize (tile) failed"; }
"$PYTHON" - "$T/tile/tile.onnx" "$T/o/tile.onnx" <<'EOF' || fail "tile: the model grew"
import os, sys
a, b = (os.path.getsize(p) for p in sys.argv[1:3])
assert b <= 1.1 * a + 4096, f'{a} -> {b} bytes'
EOF
"$TSOPT" run "$T/tile/tile.onnx" --save-inputs "$T/tin" --save-outputs "$T/tile.tsopt" >/dev/null
node "$ORT_RUN" "$T/o/tile.onnx" --inputs "$T/tin" --save-outputs "$T/tile.ort" --threads 1 >/dev/null
"$TSOPT" compare "$T/tile.ort" "$T/tile.tsopt" --rtol 1e-3 --atol 1e-4 >/dev/null || fail "tile: outputs differ"

step "no bloat: a rewrite that grows the weights needs --allow-growth"
"$TSOPT" optimize "$T/grow/grow.onnx" -o "$T/o/grow.onnx" --cost-model roofline --no-timing --budget 20 \
    --min-gain 0 --json >"$T/grow.json" 2>"$T/grow.log" || { cat "$T/grow.log"; fail "optimize (grow) failed"; }
"$TSOPT" optimize "$T/grow/grow.onnx" -o "$T/o/grow2.onnx" --cost-model roofline --no-timing --budget 20 \
    --min-gain 0 --allow-growth --json >"$T/grow2.json" 2>"$T/grow2.log" \
    || { cat "$T/grow2.log"; fail "optimize (grow, --allow-growth) failed"; }
"$PYTHON" - "$T/grow.json" "$T/grow2.json" <<'EOF' || { cat "$T/grow.json" "$T/grow2.json"; fail "growth"; }
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a['written'] == 'original' and '--allow-growth' in a['reason'], a['reason']
assert a['weight_bytes_after'] == a['weight_bytes_before'], a
assert b['written'] == 'optimized', b['reason']
assert b['weight_bytes_after'] > 1.1 * b['weight_bytes_before'], b
EOF
echo "external data OK"
