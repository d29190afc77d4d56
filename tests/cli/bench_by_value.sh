#!/usr/bin/env bash
# tsopt bench on a model whose shapes follow input values (ONNX's
# test_loop11: a Loop whose trip count is a graph input; docs/onnx-models.md):
# refused without --inputs, with one line that says to pass it; with
# --inputs DIR timed at DIR's values, as `tsopt run` loads it (the unrolled
# loop's plan has trip count + 2 steps: the timed graph follows the values),
# --against too; --inputs on an ordinary model, and its errors.
# 77: libonnx-testdata or Python's numpy absent.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
CASE=/usr/share/libonnx-testdata/data/node/test_loop11
[ -f "$CASE/model.onnx" ] || { echo "skip: $CASE absent"; exit 77; }
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "skip: no numpy for $PYTHON"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }
export TSOPT_CACHE_DIR=$T/cache
M=$T/loop11.onnx
cp "$CASE/model.onnx" "$M"
json() { "$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

step "no --inputs: one error line that says to pass it"
set +e
"$TSOPT" bench "$M" --iters 2 >"$T/o" 2>"$T/e"
rc=$?
set -e
cat "$T/e"
[ "$rc" = 1 ] || fail "exit $rc, expected 1"
[ "$(wc -l <"$T/e")" = 1 ] && grep -q "its shapes depend on input values.*pass --inputs DIR" "$T/e" || fail "error line"
[ ! -s "$T/o" ] || fail "something printed on stdout"

step "--inputs at trip counts 2 and 5 (random inputs of seed 5, trip count replaced)"
"$TSOPT" run "$M" --seed 5 --save-inputs "$T/in5" >/dev/null
cp -r "$T/in5" "$T/in2"
"$PYTHON" -c 'import numpy as np, sys; np.save(sys.argv[1], np.array(2, np.int64))' "$T/in2/trip_count.npy"
for n in 2 5; do
  "$TSOPT" bench "$M" --inputs "$T/in$n" --iters 3 --warmup 1 --json >"$T/b$n.json"
  json "$T/b$n.json" '(r["iters"], r["steps"], r["median_ms"] > 0)' | tee "$T/s$n"
  [ "$(cat "$T/s$n")" = "(3, $((n + 2)), True)" ] || fail "trip count $n: (iters, steps, timed) $(cat "$T/s$n")"
done

step "--against at the same values"
"$TSOPT" bench "$M" --against "$M" --inputs "$T/in5" --iters 3 --rounds 2 --json >"$T/ab.json"
json "$T/ab.json" '(r["steps"], r["against"]["steps"], r["pair_rounds"] >= 2)' | tee "$T/sab"
[ "$(cat "$T/sab")" = "(7, 7, True)" ] || fail "--against: $(cat "$T/sab")"

step "--inputs on an ordinary model; a file of the wrong shape, a missing one"
"$TSOPT" zoo export nasrnn -o "$T/n.onnx" --steps 2 >/dev/null
"$TSOPT" run "$T/n.onnx" --save-inputs "$T/nin" >/dev/null
"$TSOPT" bench "$T/n.onnx" --inputs "$T/nin" --iters 2 --warmup 0 >/dev/null || fail "ordinary model with --inputs"
first=$(ls "$T/nin" | head -1)
"$PYTHON" -c 'import numpy as np, sys; np.save(sys.argv[1], np.zeros((3, 5), np.float32))' "$T/nin/$first"
for dir in "$T/nin" "$T/none"; do
  set +e
  "$TSOPT" bench "$T/n.onnx" --inputs "$dir" --iters 2 >"$T/o" 2>"$T/e"
  rc=$?
  set -e
  cat "$T/e"
  [ "$rc" = 1 ] && [ "$(wc -l <"$T/e")" = 1 ] && grep -q "^tsopt: bench: --inputs: input '" "$T/e" ||
    fail "--inputs $dir: exit $rc"
done
echo PASS
