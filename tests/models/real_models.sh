#!/usr/bin/env bash
# A cheap subset of the real-model bench set (tools/export_torchvision.py
# --list --set bench) against ONNX Runtime: exported once into
# $TSOPT_BUILD/real_models, run by tsopt and ORT on the same seeded inputs,
# compared at rtol 1e-3, atol 1e-4 (scaled down for tiny outputs) by
# bench/real_models.py --check-only, the same code `make bench` checks the
# whole set with.  Skips (77) without torch/torchvision or onnxruntime-node.
#   REAL_MODELS="swin_t" bash real_models.sh   runs other models of the set
set -uo pipefail
: "${TSOPT:?TSOPT not set}" "${TSOPT_SRC:?TSOPT_SRC not set}" "${TSOPT_BUILD:?TSOPT_BUILD not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
# channel shuffle, depthwise + SE + hardswish, a transformer encoder: about
# 45 s with the exports on a busy 2-core machine, 10 s cached (swin_t, the
# Mod carrier, takes over a minute to export alone: make bench checks it)
MODELS=${REAL_MODELS:-shufflenet_v2_x1_0,mobilenet_v3_small,transformer_encoder}

if ! "$PYTHON" -c 'import torch, torchvision, numpy' 2>/dev/null; then
  echo "SKIP: $PYTHON cannot import torch, torchvision and numpy"
  exit 77
fi
if ! node -e "require('$TSOPT_SRC/tools/ort/node_modules/onnxruntime-node')" 2>/dev/null; then
  echo "SKIP: node with onnxruntime-node (tools/ort, make deps) is not available"
  exit 77
fi
exec "$PYTHON" "$TSOPT_SRC/bench/real_models.py" --check-only --models "${MODELS// /,}" \
  --cache "$TSOPT_BUILD/real_models" --tsopt "$TSOPT"
