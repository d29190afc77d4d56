#!/usr/bin/env bash
# optimize --target ort writes a model it keeps as the file given, byte for byte (issue 28), also
# - when tsopt's import holds more weight bytes than the file (folds of constant subgraphs: vgg11's import
#   is 531.45 MB against a 531.44 MB file, and a size test then wrote the import instead);
# - when the weights live in external data files (one in a subfolder): ORT times the file as given, and
#   the written model's data files are copied beside it, byte for byte, so it runs where it was written.
set -euo pipefail
: "${TSOPT:?TSOPT not set}" "${ORT_RUN:?ORT_RUN not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export TSOPT_CACHE_DIR=$T/cache
if [ ! -d "$(dirname "$ORT_RUN")/node_modules/onnxruntime-node" ]; then
    echo "SKIP: onnxruntime-node not installed (make deps)"
    exit 0
fi
mkdir -p "$T/in" "$T/ext" "$T/out"
# W feeds a MatMul and a Transpose of it: the import folds the Transpose into a second constant
/usr/bin/python3 - "$T/in/m.onnx" "$T/ext/m.onnx" <<'P' || fail "making the models"
import sys
import numpy as np
import onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as P
rng = np.random.default_rng(0)
N = 16  # the fold adds 1 KiB: within import's allowance (10% + 4 KiB), more than the file's framing
def model():
    inits = [nh.from_array((rng.standard_normal((N, N)) * 0.2).astype(np.float32), 'w'),
             nh.from_array((rng.standard_normal((N, N)) * 0.2).astype(np.float32), 'v')]
    nodes = [h.make_node('Transpose', ['w'], ['wt'], perm=[1, 0]), h.make_node('MatMul', ['x', 'w'], ['a']),
             h.make_node('MatMul', ['x', 'wt'], ['b']), h.make_node('Add', ['a', 'b'], ['c']),
             h.make_node('MatMul', ['c', 'v'], ['y'])]
    g = h.make_graph(nodes, 'tw', [h.make_tensor_value_info('x', P.FLOAT, [4, N])],
                     [h.make_tensor_value_info('y', P.FLOAT, [4, N])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
    m.ir_version = 8
    return m
onnx.save(model(), sys.argv[1])
m = model()
from onnx.external_data_helper import set_external_data
for t, loc in zip(m.graph.initializer, ['m.data', 'w/v.data']):
    a = nh.to_array(t)
    import os
    os.makedirs(os.path.join(os.path.dirname(sys.argv[2]), os.path.dirname(loc)), exist_ok=True)
    with open(os.path.join(os.path.dirname(sys.argv[2]), loc), 'wb') as f:
        f.write(a.tobytes())
    set_external_data(t, loc, 0, a.nbytes)
    t.ClearField('raw_data')
    t.data_location = P.EXTERNAL
onnx.save(m, sys.argv[2])
P

# in-line weights, the import larger than the file
"$TSOPT" optimize "$T/in/m.onnx" -o "$T/out/k.onnx" --target ort --threads 1 --time-limit 3 --min-gain 90 --json \
    >"$T/k.json" 2>"$T/klog" || { cat "$T/klog"; fail "--target ort on the in-line model failed"; }
cat "$T/k.json"
/usr/bin/python3 - "$T/k.json" "$T/in/m.onnx" <<'P' || fail "in-line model"
import json, os, sys
r = json.load(open(sys.argv[1]))
assert r["weight_bytes_before"] > os.path.getsize(sys.argv[2]), ("the import folded nothing: not the case", r)
assert r["written"] == "original" and r["compared"] == "file" and r["source_copied"], r
P
cmp "$T/in/m.onnx" "$T/out/k.onnx" || fail "in-line model: the kept model is not the input file byte for byte"

# external data (one file in a subfolder), written in another folder: the data files travel with it
"$TSOPT" optimize "$T/ext/m.onnx" -o "$T/out/e.onnx" --target ort --threads 1 --time-limit 3 --min-gain 90 --json \
    >"$T/e.json" 2>"$T/elog" || { cat "$T/elog"; fail "--target ort on the external-data model failed"; }
cat "$T/e.json"
grep -q '"written": "original".*"compared": "file", "source_copied": true' "$T/e.json" ||
    fail "external data: not kept as the file: $(cat "$T/e.json")"
cmp "$T/ext/m.onnx" "$T/out/e.onnx" || fail "external data: the kept model is not the input file byte for byte"
cmp "$T/ext/m.data" "$T/out/m.data" || fail "external data: m.data not copied beside the written model"
cmp "$T/ext/w/v.data" "$T/out/w/v.data" || fail "external data: w/v.data not copied beside the written model"
"$TSOPT" run "$T/ext/m.onnx" --save-inputs "$T/x" --save-outputs "$T/ref" >/dev/null
node "$ORT_RUN" "$T/out/e.onnx" --inputs "$T/x" --save-outputs "$T/got" --threads 1
"$TSOPT" compare "$T/ref" "$T/got" >/dev/null || fail "the written external-data model does not run as the original"
# written in its own folder: the data files are already there and stay as they were
"$TSOPT" optimize "$T/ext/m.onnx" -o "$T/ext/e2.onnx" --target ort --threads 1 --time-limit 3 --min-gain 90 \
    >/dev/null 2>"$T/e2log" || { cat "$T/e2log"; fail "--target ort into the model's folder failed"; }
cmp "$T/ext/m.onnx" "$T/ext/e2.onnx" || fail "same folder: not byte for byte"
[ ! -e "$T/ext/m.data.tmp" ] || fail "same folder: a temp file left"
# the library entry point (Python's tsopt.optimize, ts_optimize_file) writes it the same way;
# not in a sanitized build: python3 cannot load an ASan library without LD_PRELOAD
if [ -n "${TSOPT_LIBRARY:-}" ] && [ -n "${TSOPT_SRC:-}" ] &&
    ! grep -qs '^TSOPT_SANITIZE:BOOL=ON' "${TSOPT_BUILD:-/nonexistent}/CMakeCache.txt"; then
    mkdir -p "$T/py"
    PYTHONPATH=$TSOPT_SRC/python /usr/bin/python3 - "$T/ext/m.onnx" "$T/py/p.onnx" <<'P' || fail "Python: the kept model"
import sys, tsopt
r = tsopt.optimize(sys.argv[1], sys.argv[2], 3, target='ort', threads=1, min_gain=90)
print(r)
P
    cmp "$T/ext/m.onnx" "$T/py/p.onnx" && cmp "$T/ext/m.data" "$T/py/m.data" && cmp "$T/ext/w/v.data" "$T/py/w/v.data" ||
        fail "Python: the kept external-data model is not its files byte for byte"
fi
echo "optimize_ort_copy: ok"
