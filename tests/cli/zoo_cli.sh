#!/usr/bin/env bash
# tsopt zoo list / export: the listing, an export that re-imports, and the
# error paths (unknown model, missing directory, bad option), each with its
# message and exit code and no file left behind.
set -euo pipefail
: "${TSOPT:?}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0 fail=0
check() { # name, expected exit code, expected stderr text, command...
    local name=$1 want=$2 text=$3
    shift 3
    local rc=0
    "$@" >"$dir/out" 2>"$dir/err" || rc=$?
    if [ "$rc" = "$want" ] && grep -qF -- "$text" "$dir/err" "$dir/out"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL $name: exit $rc (want $want); output:"
        cat "$dir/out" "$dir/err"
    fi
}

"$TSOPT" zoo list >"$dir/list"
n=$(tail -n +2 "$dir/list" | wc -l)
if [ "$n" = 14 ] && head -1 "$dir/list" | grep -q "params"; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL list: $n models"
fi
check export 0 "wrote" "$TSOPT" zoo export dcgan -o "$dir/dcgan.onnx" --batch 2
check reimport 0 "2x100x1x1" "$TSOPT" info "$dir/dcgan.onnx"
check unknown 1 "unknown zoo model 'alexnet'" "$TSOPT" zoo export alexnet -o "$dir/a.onnx"
check missing_dir 2 "No such file or directory" "$TSOPT" zoo export dcgan -o "$dir/nope/d.onnx"
check bad_batch 2 "--batch" "$TSOPT" zoo export dcgan -o "$dir/b.onnx" --batch 0
check no_output 2 "usage" "$TSOPT" zoo export dcgan
check bad_sub 2 "unknown subcommand 'lst'" "$TSOPT" zoo lst
if ls "$dir"/nope "$dir"/a.onnx "$dir"/b.onnx "$dir"/*.tmp 2>/dev/null | grep -q .; then
    fail=$((fail + 1))
    echo "FAIL: a failed export left a file behind"
else pass=$((pass + 1)); fi
echo "zoo cli: $pass passed, $fail failed"
[ "$fail" = 0 ]
