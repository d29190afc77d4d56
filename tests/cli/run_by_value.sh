#!/usr/bin/env bash
# tsopt run on a model whose shapes follow input values (docs/control-flow.md,
# "Loops whose shapes follow the iteration number"): ONNX's test_loop11, a
# Loop whose trip count is a graph input and whose body slices x[i:i+1].
# run loads it through a session once the inputs are read (the loop
# unrolled at its trip count) and must give the backend suite's expected
# outputs and ONNX Runtime's, at other trip counts too (0 included); a trip
# count past x's end fails in both with one line; --reference is refused.
# 77: libonnx-testdata or Python's onnx absent.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
: "${ORT_RUN:?ORT_RUN not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
CASE=/usr/share/libonnx-testdata/data/node/test_loop11
[ -f "$CASE/model.onnx" ] || { echo "skip: $CASE absent"; exit 77; }
"$PYTHON" -c 'import onnx, numpy' 2>/dev/null || { echo "skip: no onnx for $PYTHON"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }
M=$T/loop11.onnx
cp "$CASE/model.onnx" "$M"

step "the test data set as .npy (inputs, expected outputs), trip counts 3 and 0 besides"
"$PYTHON" - "$CASE" "$M" "$T" <<'PY'
import os, sys
import numpy as np
import onnx
from onnx import numpy_helper
case, model, t = sys.argv[1:]
m = onnx.load(model)
d = f'{case}/test_data_set_0'
for kind, vals, out in (('input', m.graph.input, 'in5'), ('output', m.graph.output, 'expected')):
    os.makedirs(f'{t}/{out}', exist_ok=True)
    for j, v in enumerate(vals):
        tp = onnx.TensorProto()
        with open(f'{d}/{kind}_{j}.pb', 'rb') as f:
            tp.ParseFromString(f.read())
        np.save(f'{t}/{out}/{v.name}.npy', numpy_helper.to_array(tp))
for n in (3, 0, 7):
    os.makedirs(f'{t}/in{n}', exist_ok=True)
    for f in os.listdir(f'{t}/in5'):
        np.save(f'{t}/in{n}/{f}', np.load(f'{t}/in5/{f}'))
    np.save(f'{t}/in{n}/trip_count.npy', np.array(n, np.int64))
PY

close() { # A B: same names, shapes and values (rtol 1e-3, atol 1e-4)
  "$PYTHON" - "$1" "$2" <<'PY' || fail "outputs of $1 differ from $2"
import os, sys
import numpy as np
a, b = sys.argv[1:]
names = sorted(os.listdir(b))
assert sorted(os.listdir(a)) == names, (os.listdir(a), names)
for n in names:
    x, y = np.load(f'{a}/{n}'), np.load(f'{b}/{n}')
    assert x.shape == y.shape, (n, x.shape, y.shape)
    assert np.allclose(x, y, rtol=1e-3, atol=1e-4), (n, x.ravel()[:8], y.ravel()[:8])
    print(f'{n}: {x.shape} matches')
PY
}

step "run at the data set's trip count (5): expected outputs and ORT's"
"$TSOPT" run "$M" --inputs "$T/in5" --save-outputs "$T/out5" --iters 3 >"$T/run5.txt"
cat "$T/run5.txt"
grep -q "output res_scan: float32 5x1" "$T/run5.txt" || fail "res_scan is not 5x1"
close "$T/out5" "$T/expected"
node "$ORT_RUN" "$M" --inputs "$T/in5" --save-outputs "$T/ort5" >/dev/null
close "$T/out5" "$T/ort5"

for n in 3 0; do
  step "trip count $n against ORT"
  "$TSOPT" run "$M" --inputs "$T/in$n" --save-outputs "$T/out$n" >"$T/run$n.txt"
  grep -q "output res_scan: float32 ${n}x1" "$T/run$n.txt" || { cat "$T/run$n.txt"; fail "res_scan is not ${n}x1"; }
  node "$ORT_RUN" "$M" --inputs "$T/in$n" --save-outputs "$T/ort$n" >/dev/null
  close "$T/out$n" "$T/ort$n"
done

step "random inputs (seed 5: cond true, trip count 5): saved, and ORT agrees on them"
"$TSOPT" run "$M" --seed 5 --save-inputs "$T/rin" --save-outputs "$T/rout" >/dev/null
[ -f "$T/rin/trip_count.npy" ] && [ -f "$T/rin/cond.npy" ] && [ -f "$T/rin/y.npy" ] || fail "inputs not saved"
node "$ORT_RUN" "$M" --inputs "$T/rin" --save-outputs "$T/rort" >/dev/null
close "$T/rout" "$T/rort"

step "trip count 7 (x has 5 elements): ORT fails, tsopt fails with one line"
if node "$ORT_RUN" "$M" --inputs "$T/in7" >/dev/null 2>&1; then fail "ORT ran trip count 7"; fi
set +e
"$TSOPT" run "$M" --inputs "$T/in7" >"$T/o7" 2>"$T/e7"
rc=$?
set -e
cat "$T/e7"
[ "$rc" = 1 ] || fail "trip count 7: exit $rc, expected 1"
[ "$(wc -l <"$T/e7")" = 1 ] && grep -q "^tsopt: model '.*loop11.onnx' at the inputs' sizes and values: node" "$T/e7" ||
  fail "trip count 7: not one line naming the node"

step "--reference is refused (the interpreter needs static shapes)"
set +e
"$TSOPT" run "$M" --reference >/dev/null 2>"$T/eref"
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "depend on input values" "$T/eref" || { cat "$T/eref"; fail "--reference: exit $rc"; }

step "--input binds a name the model lacks: one error line"
set +e
"$TSOPT" run "$M" --input nope:2 >/dev/null 2>"$T/ebind"
rc=$?
set -e
[ "$rc" = 1 ] && grep -q "'nope'" "$T/ebind" || { cat "$T/ebind"; fail "--input nope: exit $rc"; }
echo PASS
