#!/usr/bin/env bash
# The layers of src/ (docs/architecture.md, "Layers"; DESIGN.md: ir/ops,
# onnx, exec and util never include an optimizer; sources never include each
# other; nothing includes cli): each folder may include only folders of its
# own rank or below.  Checked on the tree, then shown failing on planted
# includes (exec including opt/ or cost/, a kernel in vec/ or dnnl/ including cost/ or
# opt/, pet including einnet/, ops including exec/).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../../src" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

# rank of each folder; a new folder must be placed here
declare -A RANK=(
    [util]=0
    [ir]=1 [ops]=1 [ein]=1
    [rules]=2 [exec]=2 [dnnl]=2 [vec]=2 [measure]=2 [draw]=2 [zoo]=2
    [onnx]=3 [egraph]=3 [cost]=3
    [opt]=4
    [taso]=5 [pet]=5 [einnet]=5
    [fuzz]=6 [dist]=6
    [api]=7 [cli]=7
)
SOURCES=" taso pet einnet "

# check DIR: prints one line per include against the layers; status 1 if any
check() {
    local root=$1 bad=0 dir from to file
    for dir in "$root"/*/; do
        from=$(basename "$dir")
        [ -n "${RANK[$from]+x}" ] || { echo "$from/: a folder with no rank in tests/cli/layers.sh"; bad=1; continue; }
        while IFS=: read -r file to; do
            [ "$to" = "$from" ] && continue
            if [ -z "${RANK[$to]+x}" ]; then
                continue # a system or generated header (onnx.pb-c.h is in the build tree)
            elif [ "$to" = cli ] || [ "${RANK[$to]}" -gt "${RANK[$from]}" ] ||
                { [[ $SOURCES == *" $from "* ]] && [[ $SOURCES == *" $to "* ]]; }; then
                echo "$file includes $to/ (layer $from may not)"
                bad=1
            fi
        done < <(grep -oH '^#include "[a-z_]*/' "$dir"*.[ch] 2>/dev/null | sed 's/#include "//; s#/$##' | sed "s#^$root/##")
    done
    return $bad
}

out=$(check "$SRC") || { echo "$out" >&2; fail "includes against the layers"; }

# planted: each must be refused, naming the file and the folder
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for plant in 'exec/k.c:opt/passes.h' 'vec/v.c:cost/cost.h' 'dnnl/d.c:opt/passes.h' 'exec/p.c:cost/cost.h' 'pet/s.c:einnet/expr.h' 'ops/o.c:exec/exec.h' 'api/a.c:cli/cli.h'; do
    f=${plant%%:*} inc=${plant#*:}
    rm -rf "$T/src" && mkdir -p "$T/src/$(dirname "$f")" "$T/src/${inc%%/*}"
    printf '#include "%s"\n' "$inc" >"$T/src/$f"
    if out=$(check "$T/src"); then fail "planted $f including $inc passed"; fi
    echo "$out" | grep -q "^$f includes ${inc%%/*}/" || fail "planted $f: $out"
done
echo "layers: ok"
