#!/usr/bin/env bash
# tsopt bench A --against B: both models in one process, alternating
# rounds.  A model against itself gives both medians and a ratio; a variant
# doing 16x the work comes out slower in that direction (speedup < 0.7) and
# faster the other way round (> 1.4): a factor of 16 that no load on the
# shared machine turns around, since both models share it round by round.
# --json keeps every field of the one-model object and adds B's; inputs
# that differ (name, shape) get one error line naming the input.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# base: y = relu(x @ W) + b; slow: the same with 16 MatMul+Relu layers (the
# Relus keep the chain from being reassociated or folded), inputs listed in
# the other order (B's inputs are matched by name); others: an input of
# another shape, an input of another name
/usr/bin/python3 - "$T" <<'PY'
import sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper
d = sys.argv[1]
rng = np.random.default_rng(0)
w = [numpy_helper.from_array((rng.standard_normal((256, 256)) / 16).astype(np.float32), "w%d" % i) for i in range(16)]

def model(path, layers, rows=64, order=("x", "b"), bname="b"):
    nodes, cur = [], "x"
    for i in range(layers):
        nodes += [helper.make_node("MatMul", [cur, "w%d" % i], ["m%d" % i]),
                  helper.make_node("Relu", ["m%d" % i], ["r%d" % i])]
        cur = "r%d" % i
    nodes.append(helper.make_node("Add", [cur, bname], ["y"]))
    vi = {"x": helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 256]),
          "b": helper.make_tensor_value_info(bname, TensorProto.FLOAT, [rows, 256])}
    g = helper.make_graph(nodes, "chain%d" % layers, [vi[k] for k in order],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, 256])], w[:layers])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)

model(d + "/base.onnx", 1)
model(d + "/slow.onnx", 16, order=("b", "x"))
model(d + "/rows.onnx", 1, rows=32)
model(d + "/name.onnx", 1, bname="bias")
PY

# the same file twice: one line per model, both medians, the ratio and its spread
"$TSOPT" bench "$T/base.onnx" --against "$T/base.onnx" --threads 1 --iters 5 >"$T/same.txt"
cat "$T/same.txt"
[ "$(wc -l <"$T/same.txt")" -eq 3 ] || fail "same: not 3 lines"
grep -qE "^A: .*base\.onnx: median [0-9.]+ ms, min [0-9.]+ ms, quiet median ([0-9.]+ ms|none) \([0-9]+ runs, [0-9]+ of 8 rounds undisturbed\)$" "$T/same.txt" || fail "same: A line"
grep -qE "^B: .*base\.onnx: median [0-9.]+ ms" "$T/same.txt" || fail "same: B line"
line=$(grep '^B vs A: ' "$T/same.txt") || fail "same: no ratio line"
[[ "$line" =~ ^B\ vs\ A:\ ×([0-9.]+)\ \(rounds\ 8,\ ratio\ range\ ([0-9.]+)–([0-9.]+), ]] || fail "same: ratio line '$line'"
/usr/bin/python3 -c "
r, lo, hi = map(float, '${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]}'.split())
# one graph against itself: a ratio near 1 (wide: the machine is shared), inside its rounds' range
assert 0.2 < r < 5 and lo <= hi and lo < 1.5 and hi > 0.67, (r, lo, hi)
" || fail "same: ratio values '$line'"

# --json: every field of the one-model object (for A), B's under "against"
"$TSOPT" bench "$T/base.onnx" --threads 1 --iters 3 --json >"$T/one.json"
"$TSOPT" bench "$T/base.onnx" --against "$T/slow.onnx" --threads 1 --iters 5 --rounds 6 --json >"$T/ab.json"
cat "$T/ab.json"
/usr/bin/python3 - "$T/one.json" "$T/ab.json" <<'PY' || fail "bad --against JSON"
import json, sys
one = json.loads(open(sys.argv[1]).read())
d = json.loads(open(sys.argv[2]).read())
missing = set(one) - set(d)
assert not missing, missing
assert d["model"].endswith("base.onnx") and d["threads"] == 1 and d["warmup"] == 3, d
b = d["against"]
assert b["model"].endswith("slow.onnx"), b
for k in ("median_ms", "min_ms", "max_ms", "mean_ms", "iters", "build_ms", "steps", "rounds", "disturbed_rounds",
          "quiet_runs", "quiet_median_ms", "quiet_min_ms", "disturbed_by", "arena_bytes", "weight_bytes"):
    assert k in b, k
for s in (d, b):
    assert 0 < s["min_ms"] <= s["median_ms"] <= s["max_ms"] and s["iters"] >= 5, s
    # one round per model per pair round, judged as tsopt bench judges them
    assert s["rounds"] == d["pair_rounds"] and 0 <= s["disturbed_rounds"] <= s["rounds"], s
    assert (s["quiet_runs"] > 0) == (s["quiet_median_ms"] is not None), s
# both models' quiet medians read the same undisturbed pairs
assert d["disturbed_rounds"] == b["disturbed_rounds"] == d["pair_rounds"] - d["quiet_pair_rounds"], d
assert d["pair_rounds"] >= 6 and d["pair_rounds"] % 2 == 0, d
assert abs(d["speedup"] - d["median_ms"] / b["median_ms"]) <= 1e-3 * d["speedup"] + 1e-4, d
assert (d["quiet_speedup"] is None) == (d["quiet_pair_rounds"] == 0), d
assert d["ratio_min"] <= d["ratio_q1"] <= d["ratio_median"] <= d["ratio_q3"] <= d["ratio_max"], d
# the slow variant does 16x the MatMuls: B is slower, whatever the load
assert d["speedup"] < 0.7 and d["ratio_median"] < 0.7, d["speedup"]
assert b["steps"] > d["steps"], (b["steps"], d["steps"])
PY
# the other direction: B is the faster one
"$TSOPT" bench "$T/slow.onnx" --against "$T/base.onnx" --threads 1 --iters 3 --json >"$T/ba.json"
/usr/bin/python3 -c "
import json, sys
d = json.load(open('$T/ba.json'))
assert d['speedup'] > 1.4, d['speedup']
" || fail "slow against base: $(cat "$T/ba.json")"

# --against-skip: B is the same file, its plan built without the kernel A's
# MatMul step uses (dnnl.matmul): A keeps its one fused step, B falls back
# (the reference MatMul and a separate Relu); --skip adds to both
"$TSOPT" bench "$T/base.onnx" --against "$T/base.onnx" --against-skip dnnl.matmul --threads 1 --iters 3 --rounds 2 \
    --json >"$T/skip.json"
/usr/bin/python3 - "$T/skip.json" <<'PY' || fail "bad --against-skip result"
import json, sys
d = json.loads(open(sys.argv[1]).read())
b = d["against"]
assert d["steps"] == 1 and d["fallback_steps"] == 0, d
assert b["steps"] == 2 and b["fallback_steps"] >= 1, b
PY
"$TSOPT" bench "$T/base.onnx" --against "$T/base.onnx" --skip vec.eltwise --against-skip dnnl.matmul --threads 1 \
    --iters 3 --rounds 2 --json | /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
# A: one fused step as before; B: neither kernel, so the Relu is not a vec.eltwise step of its own either
assert d["steps"] == 1 and d["against"]["fallback_steps"] == d["against"]["steps"], d' || fail "--skip with --against-skip"

# errors: one line naming what differs, non-zero exit
expect_fail() {
    local name=$1 pat=$2 rc=0
    shift 2
    "$@" >/dev/null 2>"$T/e.txt" || rc=$?
    echo "$name: exit $rc: $(cat "$T/e.txt")"
    [ $rc -ne 0 ] || fail "$name: exit 0"
    [ "$(wc -l <"$T/e.txt")" -eq 1 ] || fail "$name: not one error line"
    grep -qE -- "$pat" "$T/e.txt" || fail "$name: message does not match '$pat'"
}
expect_fail shape "input 'x' is float32\[64x256\] in .*base\.onnx but float32\[32x256\] in .*rows\.onnx" \
    "$TSOPT" bench "$T/base.onnx" --against "$T/rows.onnx"
expect_fail name "input 'bias' of .*name\.onnx is not an input of .*base\.onnx" \
    "$TSOPT" bench "$T/base.onnx" --against "$T/name.onnx"
expect_fail missing "missing\.onnx" "$TSOPT" bench "$T/base.onnx" --against "$T/missing.onnx"
expect_fail no_file "--against" "$TSOPT" bench "$T/base.onnx" --against
expect_fail rounds_alone "--rounds needs --against" "$TSOPT" bench "$T/base.onnx" --rounds 4
expect_fail skip_alone "--against-skip needs --against" "$TSOPT" bench "$T/base.onnx" --against-skip dnnl.matmul
expect_fail rounds_bad "--rounds" "$TSOPT" bench "$T/base.onnx" --against "$T/base.onnx" --rounds 1
"$TSOPT" bench --help | grep -q -- '--against B' || fail "--help does not describe --against"
echo "bench --against OK"
