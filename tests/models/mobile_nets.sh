#!/usr/bin/env bash
# Mobile nets against ONNX Runtime, for the kernels written for them
# (src/vec/vec_se.c: the squeeze-excite gate as one step; vec_depthwise.c:
# the first stride-2 depthwise conv): MobileNet-v3-Large (Relu/HardSigmoid
# gates, hardswish, a 64-channel stride-2 depthwise conv from 112x112) and
# EfficientNet-B0 (SiLU/Sigmoid gates).  The same check as real_models.sh
# (bench/real_models.py --check-only, rtol 1e-3, atol 1e-4 scaled); the
# exports are cached in $TSOPT_BUILD/real_models.  Skips (77) like it.
set -uo pipefail
: "${TSOPT_SRC:?TSOPT_SRC not set}"
REAL_MODELS=mobilenet_v3_large,efficientnet_b0 exec bash "$TSOPT_SRC/tests/models/real_models.sh"
