#!/usr/bin/env bash
# .npy files of every element type the runtime computes, through the command
# line (docs/conformance.md, ".npy files"): numpy writes float16, bfloat16
# (as ONNX Runtime's '<u2' bits and as the 2-byte void ml_dtypes' np.save
# writes), int16, uint16, uint32, uint64 and bool inputs; `tsopt run` computes
# and saves the outputs; numpy checks them; `tsopt compare` takes float16 and
# bfloat16 within two units in the last place, integers exactly, and ONNX
# sequences as folders of 0.npy, 1.npy, ...
# 77: no numpy / onnx for Debian's python.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" -c "import numpy, onnx" 2>/dev/null || { echo "skipped: no numpy/onnx"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$PYTHON" - "$T" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper, TensorProto as P
t = sys.argv[1]
# one input per type; float16/bfloat16 go through arithmetic, the others
# through data movement and a comparison
io = [("h", P.FLOAT16), ("b", P.BFLOAT16), ("i16", P.INT16), ("u16", P.UINT16), ("u32", P.UINT32),
      ("u64", P.UINT64), ("m", P.BOOL)]
ins = [helper.make_tensor_value_info(n, ty, [2, 3]) for n, ty in io]
nodes = [helper.make_node("Add", ["h", "h"], ["h2"]), helper.make_node("Mul", ["b", "b"], ["b2"]),
         helper.make_node("Neg", ["i16"], ["i16n"]), helper.make_node("Transpose", ["u16"], ["u16t"]),
         helper.make_node("Identity", ["u32"], ["u32i"]), helper.make_node("Identity", ["u64"], ["u64i"]),
         helper.make_node("Not", ["m"], ["mn"])]
outs = [helper.make_tensor_value_info("h2", P.FLOAT16, [2, 3]), helper.make_tensor_value_info("b2", P.BFLOAT16, [2, 3]),
        helper.make_tensor_value_info("i16n", P.INT16, [2, 3]), helper.make_tensor_value_info("u16t", P.UINT16, [3, 2]),
        helper.make_tensor_value_info("u32i", P.UINT32, [2, 3]), helper.make_tensor_value_info("u64i", P.UINT64, [2, 3]),
        helper.make_tensor_value_info("mn", P.BOOL, [2, 3])]
m = helper.make_model(helper.make_graph(nodes, "dtypes", ins, outs), opset_imports=[helper.make_opsetid("", 15)])
onnx.save(m, f"{t}/m.onnx")
import os
for d in ("in", "in_void"):
    os.makedirs(f"{t}/{d}")
h = np.array([[0.1, -2.5, 65504 / 4], [3.14159, 1e-3, -7]], np.float16)
bf = np.array([[1.5, -3, 0.1], [100, 2.75, -0.01]], np.float32)
bits = (bf.view(np.uint32) >> 16).astype(np.uint16)   # exact bfloat16 values, as uint16 bits
vals = {"h": h, "b": bits, "i16": np.array([[1, -2, 32767], [-32767, 0, 5]], np.int16),
        "u16": np.array([[0, 1, 65535], [2, 3, 40000]], np.uint16),
        "u32": np.array([[0, 1, 2**32 - 1], [2**31, 7, 9]], np.uint32),
        "u64": np.array([[0, 1, 2**64 - 1], [2**63, 7, 9]], np.uint64),
        "m": np.array([[True, False, True], [False, False, True]])}
for k, v in vals.items():
    np.save(f"{t}/in/{k}.npy", v)
    np.save(f"{t}/in_void/{k}.npy", v.view("V2") if k == "b" else v)
EOF

for d in in in_void; do
  "$TSOPT" run "$T/m.onnx" --inputs "$T/$d" --save-outputs "$T/out_$d" >"$T/log" 2>&1 || { cat "$T/log"; fail "run --inputs $d"; }
done
grep -q "output b2: bfloat16 2x3" "$T/log" || { cat "$T/log"; fail "bfloat16 output not printed"; }

"$PYTHON" - "$T" <<'EOF'
import sys, numpy as np
t = sys.argv[1]
for d in ("out_in", "out_in_void"):
    o = {k: np.load(f"{t}/{d}/{k}.npy") for k in ("h2", "b2", "i16n", "u16t", "u32i", "u64i", "mn")}
    i = {k: np.load(f"{t}/in/{k}.npy") for k in ("h", "b", "i16", "u16", "u32", "u64", "m")}
    assert o["h2"].dtype == np.float16 and (o["h2"] == i["h"] + i["h"]).all(), o["h2"]
    # bfloat16 comes back as 2-byte void; its bits are the rounded square
    assert o["b2"].dtype == np.dtype("V2"), o["b2"].dtype
    sq = (i["b"].astype(np.uint32) << 16).view(np.float32) ** 2
    r = sq.view(np.uint32)
    want = ((r + 0x7FFF + ((r >> 16) & 1)) >> 16).astype(np.uint16)   # round to nearest even
    assert (o["b2"].view(np.uint16) == want).all(), (o["b2"].view(np.uint16), want)
    assert o["i16n"].dtype == np.int16 and (o["i16n"] == -i["i16"]).all()
    assert o["u16t"].dtype == np.uint16 and (o["u16t"] == i["u16"].T).all()
    assert o["u32i"].dtype == np.uint32 and (o["u32i"] == i["u32"]).all()
    assert o["u64i"].dtype == np.uint64 and (o["u64i"] == i["u64"]).all(), o["u64i"]
    assert o["mn"].dtype == np.bool_ and (o["mn"] == ~i["m"]).all()
# compare's cases: A against B, each with its expected exit status
import os
def case(name, a, b):
    for d, v in (("a", a), ("b", b)):
        os.makedirs(f"{t}/c_{name}/{d}", exist_ok=True)
        if isinstance(v, list):
            os.makedirs(f"{t}/c_{name}/{d}/s", exist_ok=True)
            for k, x in enumerate(v):
                np.save(f"{t}/c_{name}/{d}/s/{k}.npy", x)
        else:
            np.save(f"{t}/c_{name}/{d}/x.npy", v)
f16 = np.array([1000, 1, -3], np.float16)
ulp = np.spacing(f16)
case("f16_2ulp", f16, (f16 + 2 * ulp).astype(np.float16))
case("f16_4ulp", f16, (f16 + 4 * ulp).astype(np.float16))
b = np.array([0x3f80, 0x4240], np.uint16)   # 1.0, 48.0 as bfloat16
case("bf16_2ulp", b.view("V2"), (b + 2).view("V2"))
case("bf16_4ulp", b.view("V2"), (b + 4).view("V2"))
case("u64_big", np.array([2**64 - 1], np.uint64), np.array([2**64 - 2], np.uint64))
case("i64_exact", np.array([2**60], np.int64), np.array([2**60 + 1], np.int64))
case("i32_rtol", np.array([10000], np.int32), np.array([10001], np.int32))
case("seq_same", [np.ones(2, np.float32), np.zeros(3, np.int64)], [np.ones(2, np.float32), np.zeros(3, np.int64)])
case("seq_len", [np.ones(2, np.float32)], [np.ones(2, np.float32), np.ones(2, np.float32)])
case("seq_elem", [np.ones(2, np.float32), np.zeros(3, np.int64)], [np.ones(2, np.float32), np.ones(3, np.int64)])
case("seq_empty", [], [])
EOF

# case expected-exit [line the output must hold]
check() {
  local rc=0
  "$TSOPT" compare "$T/c_$1/a" "$T/c_$1/b" >"$T/out" 2>&1 || rc=$?
  printf '%-10s exit %d: %s\n' "$1" "$rc" "$(grep -m1 FAIL "$T/out" || tail -1 "$T/out")"
  [ "$rc" -eq "$2" ] || { cat "$T/out"; fail "compare $1: exit $rc, want $2"; }
  [ -z "${3:-}" ] || grep -qF -- "$3" "$T/out" || { cat "$T/out"; fail "compare $1: no '$3'"; }
}
check f16_2ulp 0 "float16 rtol 2e-3"
check f16_4ulp 1
check bf16_2ulp 0 "bfloat16 1.6e-2"
check bf16_4ulp 1
check u64_big 1 "max_abs 1 "
check i64_exact 1 "1152921504606846976 vs 1152921504606846977"
grep -q "18446744073709551615 vs 18446744073709551614" <("$TSOPT" compare "$T/c_u64_big/a" "$T/c_u64_big/b") ||
  fail "uint64 values not printed exactly"
check i32_rtol 1
check seq_same 0 "2 of 2 tensors match"
check seq_len 1 "sequence of 1 vs 2 tensors"
check seq_elem 1 "s[1]"
mkdir -p "$T/c_seq_empty/a/s" "$T/c_seq_empty/b/s"
check seq_empty 0 "0 of 0 tensors match"
# an explicit --rtol applies to float16 too
rc=0; "$TSOPT" compare "$T/c_f16_2ulp/a" "$T/c_f16_2ulp/b" --rtol 1e-4 >/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "--rtol 1e-4 on 2 float16 ulps: exit $rc, want 1"
# a sequence folder with a gap is an error (exit 2, one line naming the folder)
mv "$T/c_seq_same/a/s/1.npy" "$T/c_seq_same/a/s/2.npy"
rc=0; "$TSOPT" compare "$T/c_seq_same/a" "$T/c_seq_same/b" >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "sequence folder holds '2.npy'.*c_seq_same/a/s" "$T/err" || { cat "$T/err"; fail "gap: exit $rc"; }
# an element type tsopt has no use for: one line naming the file
"$PYTHON" -c "import numpy as np, sys; np.save(sys.argv[1], np.zeros((2, 3), np.complex64))" "$T/in/h.npy"
rc=0; "$TSOPT" run "$T/m.onnx" --inputs "$T/in" >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -ne 0 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "unsupported .npy dtype '<c8'.*in/h.npy" "$T/err" ||
  { cat "$T/err"; fail "complex input: exit $rc"; }
echo "ok"
