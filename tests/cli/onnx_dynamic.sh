#!/usr/bin/env bash
# tsopt optimize keeps what the user's model had: PyTorch exports with a
# dynamic batch ('batch') are optimized at batch 1 (the default bind), and
# the written model must still declare 'batch', keep producer, metadata and
# opset imports, and compute what the original computes at batch 2 in ONNX
# Runtime.  Two models: torchvision's small TransformerEncoder (Reshapes to
# batch*heads, folded at import) and a small MLP the optimizer rewrites,
# ending in x.view(x.size(0), -1).  Fails if export freezes the batch: ORT
# rejects a batch-2 input on a model declaring 1.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
: "${TSOPT_SRC:?TSOPT_SRC not set}"
: "${ORT_RUN:?ORT_RUN not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }
export TSOPT_CACHE_DIR=$T/cache

step "export the models (dynamic batch), add metadata and an extra opset import"
"$PYTHON" "$TSOPT_SRC/tools/export_torchvision.py" transformer "$T/tr.onnx" >/dev/null
"$PYTHON" - "$T" <<'EOF'
import sys
import onnx
import torch
d = sys.argv[1]
torch.manual_seed(0)


class Mlp(torch.nn.Module):
    """Three sibling Linear layers on [batch, 8, 64] (MatMul + Add: the
    optimizer merges them into one MatMul and a Split), then
    x.view(x.size(0), -1)."""
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (torch.nn.Linear(64, 64) for _ in range(3))

    def forward(self, x):
        h = torch.relu(self.a(x)) * self.b(x) + self.c(x)
        return h.view(h.size(0), -1)


torch.onnx.export(Mlp().eval(), (torch.randn(1, 8, 64),), f'{d}/mlp.onnx', input_names=['input'],
                  output_names=['output'], dynamic_axes={'input': {0: 'batch'}, 'output': {0: 'batch'}},
                  opset_version=13, do_constant_folding=True)
for name in ('tr', 'mlp'):
    m = onnx.load(f'{d}/{name}.onnx')
    onnx.helper.set_model_props(m, {'owner': 'tests', 'model': name})
    m.doc_string = 'kept by tsopt'
    m.opset_import.append(onnx.helper.make_opsetid('ai.onnx.ml', 3))
    onnx.save(m, f'{d}/{name}.onnx')
EOF

for m in tr mlp; do
    # mlp: written on the cost model alone, so that the rewritten graph (not
    # the original) is what gets exported whenever the search finds one
    case $m in
    tr) dims=16x64 extra=() ;;
    mlp) dims=8x64 extra=(--no-timing) ;;
    esac
    step "$m: optimize at batch 1"
    "$TSOPT" optimize "$T/$m.onnx" -o "$T/$m.opt.onnx" --time-limit 2 "${extra[@]}" >"$T/$m.log" 2>&1 \
        || { cat "$T/$m.log"; fail "$m: tsopt optimize failed"; }
    head -1 "$T/$m.log"

    step "$m: the written model keeps batch, producer, metadata, opsets"
    "$PYTHON" - "$T/$m.onnx" "$T/$m.opt.onnx" <<'EOF' || fail "$m: what the model had is not kept"
import sys
import onnx
a, b = (onnx.load(p) for p in sys.argv[1:3])
onnx.checker.check_model(b)
dims = lambda vi: [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]
for x, y in ((a.graph.input[0], b.graph.input[0]), (a.graph.output[0], b.graph.output[0])):
    assert dims(y)[0] == 'batch', f'{y.name} is declared {dims(y)}, expected batch first'
    assert dims(x) == dims(y), f'{y.name}: {dims(x)} became {dims(y)}'
assert b.producer_name == a.producer_name == 'pytorch', b.producer_name
assert b.producer_version == a.producer_version, b.producer_version
assert b.doc_string == 'kept by tsopt', b.doc_string
props = {p.key: p.value for p in b.metadata_props}
assert props.get('owner') == 'tests', props
opsets = sorted((o.domain, o.version) for o in b.opset_import)
assert opsets == sorted((o.domain, o.version) for o in a.opset_import), opsets
EOF

    step "$m: original and optimized agree at batch 2 in ONNX Runtime"
    "$TSOPT" run "$T/$m.onnx" --input "input:2x$dims" --save-inputs "$T/$m.in" >/dev/null
    node "$ORT_RUN" "$T/$m.onnx" --inputs "$T/$m.in" --save-outputs "$T/$m.ref" --threads 1 >/dev/null
    node "$ORT_RUN" "$T/$m.opt.onnx" --inputs "$T/$m.in" --save-outputs "$T/$m.out" --threads 1 >/dev/null \
        || fail "$m: ONNX Runtime cannot run the optimized model at batch 2"
    "$TSOPT" compare "$T/$m.ref" "$T/$m.out" --rtol 1e-3 --atol 1e-4 >"$T/$m.cmp" \
        || { cat "$T/$m.cmp"; fail "$m: outputs differ at batch 2"; }
    "$PYTHON" -c "import numpy as np, sys; y = np.load(sys.argv[1]); assert y.shape[0] == 2, y.shape" \
        "$T/$m.out/output.npy" || fail "$m: the output is not batch 2"
done
echo "onnx dynamic OK"
