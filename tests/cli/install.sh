#!/usr/bin/env bash
# `make install`'s tree (cmake --install of this build into an empty
# folder): the files docs/api.md lists, `tsopt --version` = tsopt.pc's
# version, docs/api.md's C example built with pkg-config against the tree
# giving `tsopt run`'s outputs bit for bit (under ASan too), the Python
# package found there and loading the tree's library, and
# scripts/uninstall.sh (make uninstall) leaving no file behind.
set -euo pipefail
: "${TSOPT:?TSOPT not set}" "${TSOPT_SRC:?TSOPT_SRC not set}" "${TSOPT_BUILD:?TSOPT_BUILD not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }
P=$T/prefix
sanitized=false
grep -q '^TSOPT_SANITIZE:BOOL=ON' "$TSOPT_BUILD/CMakeCache.txt" && sanitized=true

step "install into an empty folder"
cmake --install "$TSOPT_BUILD" --prefix "$P" >"$T/install.log" || fail "cmake --install: $(tail -3 "$T/install.log")"
pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
for f in bin/tsopt include/tsopt.h lib/libtsopt.so lib/pkgconfig/tsopt.pc \
         "lib/python$pyver/site-packages/tsopt/__init__.py"; do
  [ -e "$P/$f" ] || fail "$f not installed"
done
soname=$(readelf -d "$P/lib/libtsopt.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ -e "$P/lib/$soname" ] || fail "soname $soname not installed"
[[ $soname =~ ^libtsopt\.so\.[0-9]+\.[0-9]+$ ]] || fail "soname '$soname'"
# only the API of tsopt.h is exported: no internal helper, no protobuf-c code
nm -D --defined-only "$P/lib/libtsopt.so" | awk '{print $3}' >"$T/syms"
grep -qx 'ts_session_open' "$T/syms" || fail "ts_session_open not exported"
grep -E '^(onnx__|ts_model_meta_|ts_rules_)' "$T/syms" | head -3 | grep . && fail "internal symbols exported"
ls "$P/lib"

export PKG_CONFIG_PATH=$P/lib/pkgconfig
version=$(pkg-config --modversion tsopt)
step "tsopt --version: $("$P/bin/tsopt" --version)"
[ "$("$P/bin/tsopt" --version)" = "tsopt $version" ] || fail "tsopt --version is not 'tsopt $version'"
[[ ${soname#libtsopt.so.} == "${version%.*}" ]] || fail "soname $soname does not follow version $version"

step "docs/api.md's C example, built with pkg-config"
sed -n '/^```c$/,/^```$/p' "$TSOPT_SRC/docs/api.md" | sed '1d;$d' >"$T/run_model.c"
grep -q 'ts_session_open' "$T/run_model.c" || fail "no C example in docs/api.md"
flags=()
$sanitized && flags=(-fsanitize=address,undefined)
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "${flags[@]}" "$T/run_model.c" $(pkg-config --cflags --libs tsopt) -o "$T/run_model" ||
  fail "the example does not build"
"$PYTHON" - "$T/m.onnx" <<'P'
import sys, numpy as np, onnx
from onnx import helper, TensorProto as TP
w = np.arange(24, dtype=np.float32).reshape(8, 3) / 10
g = helper.make_graph([helper.make_node('MatMul', ['x', 'w'], ['m']), helper.make_node('Relu', ['m'], ['y'])], 'g',
                      [helper.make_tensor_value_info('x', TP.FLOAT, ['N', 8])],
                      [helper.make_tensor_value_info('y', TP.FLOAT, ['N', 3])],
                      [helper.make_tensor('w', TP.FLOAT, w.shape, w.flatten())])
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
m.ir_version = 8
onnx.save(m, sys.argv[1])
P
"$TSOPT" run "$T/m.onnx" --input x:5x8 --save-inputs "$T/in" --save-outputs "$T/want" >/dev/null
mkdir "$T/got"
LD_LIBRARY_PATH=$P/lib "$T/run_model" "$T/m.onnx" "$T/in" "$T/got" >"$T/ex.out" || fail "example: $(cat "$T/ex.out")"
cat "$T/ex.out"
grep -qx 'y: float32 5x3' "$T/ex.out" || fail "example output line"
grep -qx "tsopt $version" "$T/ex.out" || fail "example: tsopt_version()"
"$TSOPT" compare "$T/want" "$T/got" --rtol 0 --atol 0 >/dev/null || fail "example's outputs differ from tsopt run's"

if ! $sanitized; then
  step "the installed Python package loads the installed library"
  env -u TSOPT_LIBRARY PYTHONPATH="$P/lib/python$pyver/site-packages" "$PYTHON" - "$P" "$version" "$T/m.onnx" <<'P' ||
import os, sys, numpy as np, tsopt
prefix, version, model = sys.argv[1:]
assert tsopt.__file__.startswith(prefix), tsopt.__file__
assert os.path.realpath(tsopt._lib.lib._name).startswith(os.path.realpath(prefix)), tsopt._lib.lib._name
assert tsopt.__version__ == version, tsopt.__version__
[y] = tsopt.InferenceSession(model).run(None, {'x': np.ones((2, 8), np.float32)})
assert y.shape == (2, 3)
print('   tsopt', tsopt.__version__, 'from', os.path.dirname(tsopt.__file__))
P
    fail "installed Python package"
fi

step "uninstall"
bash "$TSOPT_SRC/scripts/uninstall.sh" "$TSOPT_BUILD" "$P"
left=$(find "$P" \( -type f -o -type l \) | head -5)
[ -z "$left" ] || fail "left after uninstall: $left"
echo "ok"
