#!/usr/bin/env bash
# Issue 26 section 1 on the real-model bench set, by hand (too slow for CI):
# each model re-exported with every size axis symbolic
# (tools/export_torchvision.py --dynamic all: batch, and h/w, frames or
# sequence), then tests/models/dynamic_axes.sh's checks (info, run --inputs,
# bench --inputs, the Python session, optimize --inputs and the optimized
# model in tsopt and ONNX Runtime, all against ONNX Runtime) at batch 1 and 3
# and two sizes of the other axes; sizes ONNX Runtime itself refuses are
# left out and listed.
#
# usage: bench/dynamic_axes.sh BUILD_DIR [MODEL...]   (default: the bench set)
# env: OUT=DIR keeps exports and logs (default a temporary folder);
#      DYN_TIME_LIMIT=S optimize's search time (default 2).
# Prints one line per model (pass / FAIL with the failing check) and the
# counts.
set -uo pipefail
B=$(cd "${1:?usage: bench/dynamic_axes.sh BUILD_DIR [MODEL...]}" && pwd)
shift
SRC=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=/usr/bin/python3
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
models=("$@")
[ ${#models[@]} -gt 0 ] || mapfile -t models < <("$PYTHON" "$SRC/tools/export_torchvision.py" --list --set bench | cut -d' ' -f1)
export TSOPT=$B/tsopt TSOPT_SRC=$SRC TSOPT_BUILD=$B ORT_RUN=$SRC/tools/ort/run.js TSOPT_LIBRARY=$B/libtsopt.so
export DYN_ORT_SKIP=1 OMP_WAIT_POLICY=passive
# every check is against ONNX Runtime: without it a model would "pass" with all sizes left out
[ -d "$SRC/tools/ort/node_modules/onnxruntime-node" ] || { echo "no ONNX Runtime (tools/ort/node_modules): run 'make deps' first" >&2; exit 2; }
pass=0 failed=()
for m in "${models[@]}"; do
    D=$OUT/$m
    mkdir -p "$D"
    if [ ! -f "$D/$m.onnx" ]; then
        # torch cannot export every model with symbolic h/w (vgg11's adaptive
        # pooling): such a model is checked with a symbolic batch only, and says so
        "$PYTHON" "$SRC/tools/export_torchvision.py" "$m" "$D/$m.onnx" --dynamic all >"$D/export.log" 2>&1 ||
            { "$PYTHON" "$SRC/tools/export_torchvision.py" "$m" "$D/$m.onnx" --dynamic batch >>"$D/export.log" 2>&1 &&
                echo "$m: torch cannot export symbolic h/w; checked with a symbolic batch only"; } ||
            { echo "$m: FAIL export ($(tail -1 "$D/export.log"))"; failed+=("$m"); continue; }
    fi
    # batch 1 and 3 at the export's size, and at a smaller one (3/4 of each
    # spatial axis rounded to 8, half the sequence)
    "$PYTHON" - "$D" "$m" "$("$PYTHON" "$SRC/tools/export_torchvision.py" --list | awk -v m="$m" '$1 == m { print $2 }')" <<'EOF'
import os, sys
import numpy as np
d, m, shape = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split('x')]
small = list(shape)
if len(shape) == 2:
    small[0] = shape[0] // 2
else:
    for i in range(len(shape) - 2, len(shape)):
        small[i] = max(8, shape[i] * 3 // 4 // 8 * 8)
    if len(shape) == 4:
        small[1] = shape[1] // 2
rng = np.random.default_rng(0)
with open(f'{d}/sets', 'w') as f:
    for s in ([1] + shape, [3] + shape, [1] + small, [3] + small):
        tag = 'x'.join(map(str, s))
        os.makedirs(f'{d}/{m}.in/{tag}', exist_ok=True)
        np.save(f'{d}/{m}.in/{tag}/input.npy', rng.standard_normal(s).astype(np.float32))
        f.write(f'{m} {tag}\n')
EOF
    t0=$(date +%s)
    if DYN_DIR=$D bash "$SRC/tests/models/dynamic_axes.sh" >"$D/check.log" 2>&1; then
        pass=$((pass + 1))
        echo "$m: pass ($(($(date +%s) - t0)) s; $(grep -c 'left out' "$D/check.log") sizes left out by ONNX Runtime)"
    else
        failed+=("$m")
        echo "$m: FAIL $(grep -m1 '^FAIL' "$D/check.log")"
    fi
    grep 'left out' "$D/check.log" | sed 's/^/    /'
done
echo "dynamic axes: ${pass} of ${#models[@]} models pass${failed:+; failed: ${failed[*]}} (logs in $OUT)"
[ ${#failed[@]} -eq 0 ]
