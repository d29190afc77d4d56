#!/usr/bin/env bash
# Sizes are checked before allocation: a model whose input binding cannot
# fit in memory fails at once with one line naming what needs how much
# (tsopt run, bench, profile), instead of allocating and thrashing; so does
# a plan whose arena cannot fit, and a model file larger than the memory
# left; the TSOPT_MEM_LIMIT cap is obeyed and a bad value rejected; normal
# runs work.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# a conv net with a dynamic input, x [N, 3, H, W] -> Conv 3->64 3x3 -> c;
# Relu(c) + Sigmoid(c) -> ReduceMean over channels -> y [N, 1, H, W]: small
# inputs and outputs, 64-channel intermediates (c has two readers: the
# plan keeps it in its arena)
"$PYTHON" - "$T/m.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper
w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 3, 3, 3)).astype(np.float32), "w")
g = helper.make_graph(
    [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
     helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Add", ["r", "s"], ["a"]),
     helper.make_node("ReduceMean", ["a"], ["y"], axes=[1])],
    "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1, "H", "W"])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY

# expect_fail NAME PATTERN CMD...: non-zero exit within 20 s, one stderr line matching PATTERN
expect_fail() {
  local name=$1 pat=$2
  shift 2
  local t0 rc=0
  t0=$(date +%s)
  timeout 60 "$@" >"$T/out" 2>"$T/err" || rc=$?
  local dt=$(($(date +%s) - t0))
  echo "$name: exit $rc in ${dt}s: $(cat "$T/err")"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "$name: exit $rc"
  [ "$dt" -le 20 ] || fail "$name: took ${dt}s"
  [ "$(wc -l <"$T/err")" -eq 1 ] || fail "$name: stderr is not one line"
  grep -qE "$pat" "$T/err" || fail "$name: message does not match '$pat'"
}

# 3e10 elements: refused whatever the machine has (beyond 2^34 elements)
expect_fail huge "too large|of memory is available" "$TSOPT" run "$T/m.onnx" --input x:1x3x100000x100000
# 7.7e8 elements in, 2.6e8 out (3.8 GiB) against a 2 GiB cap: the check, not the allocator
export TSOPT_MEM_LIMIT=2G
expect_fail run "^tsopt: running graph 'convnet' \(its inputs and outputs\) needs 3\.8 GiB, but only [12]\.[0-9] GiB of memory is available \(TSOPT_MEM_LIMIT less what this process holds\)" \
  "$TSOPT" run "$T/m.onnx" --input x:1x3x16000x16000
expect_fail bench "needs 3\.8 GiB, but only" "$TSOPT" bench "$T/m.onnx" --input x:1x3x16000x16000
expect_fail profile "needs 3\.8 GiB, but only" "$TSOPT" profile "$T/m.onnx" --input x:1x3x16000x16000 \
  --cache "$T/costs.tsv"
# the same model at a sane size runs under the cap
"$TSOPT" run "$T/m.onnx" --input x:2x3x64x64 | grep -q '^output y: float32 2x1x64x64' || fail "small run"
# inputs and outputs fit (4 MB) but the plan's arena (64-channel
# intermediates, >= 128 MB) does not: refused before the arena is allocated
export TSOPT_MEM_LIMIT=100M
expect_fail arena "the plan's arena \(activations and scratch\) needs .*TSOPT_MEM_LIMIT" \
  "$TSOPT" run "$T/m.onnx" --input x:1x3x500x500
# a model file larger than the memory left is refused before it is read
# (32 MB of weights against a 30 MiB cap, less what the process holds)
"$PYTHON" - "$T/big.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper
c = numpy_helper.from_array(np.zeros((8, 1000, 1000), np.float32), "c")
g = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"])], "big",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 1000, 1000])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 1000, 1000])], [c])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
export TSOPT_MEM_LIMIT=30M
expect_fail file "^tsopt: loading .*big\.onnx \(its file\) needs 30\.5 MiB, but only [0-9.]+ (MiB|KiB|bytes) of memory is available" \
  "$TSOPT" info "$T/big.onnx"
unset TSOPT_MEM_LIMIT
"$TSOPT" info "$T/big.onnx" | grep -q '^parameters: 8000000' || fail "big model info"
export TSOPT_MEM_LIMIT=twelve
expect_fail bad_env "TSOPT_MEM_LIMIT='twelve' is not a size" "$TSOPT" run "$T/m.onnx" --input x:1x3x8x8
unset TSOPT_MEM_LIMIT
"$TSOPT" run "$T/m.onnx" --input x:1x3x500x500 | grep -q '^output y: float32 1x1x500x500' || fail "500x500 run"
echo ok
