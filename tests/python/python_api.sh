#!/usr/bin/env bash
# The Python package (python/tsopt) over this build's libtsopt.so:
# test_api.py (session, errors, optimize, version on small models),
# test_session_options.py (SessionOptions: graph optimization levels) and
# test_ort.py (a torchvision ResNet-18 with a dynamic batch, at batch 2,
# against ONNX Runtime; tsopt.optimize on it).
set -euo pipefail
: "${TSOPT:?TSOPT not set}" "${TSOPT_SRC:?TSOPT_SRC not set}" "${TSOPT_BUILD:?TSOPT_BUILD not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
export TSOPT_LIBRARY=${TSOPT_LIBRARY:-$TSOPT_BUILD/libtsopt.so}
export PYTHONPATH=$TSOPT_SRC/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in the source tree
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export TSOPT_CACHE_DIR=$T/cache TMPDIR=$T # the tests' temporary models go there too
"$PYTHON" "$TSOPT_SRC/tests/python/test_api.py" -v
"$PYTHON" "$TSOPT_SRC/tests/python/test_session_options.py" -v
"$PYTHON" "$TSOPT_SRC/tests/python/test_ort.py"
