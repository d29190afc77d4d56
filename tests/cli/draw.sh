#!/usr/bin/env bash
# tsopt draw: SVG naming the Conv nodes, DOT with weights folded into the
# nodes, PNG; --diff of an optimized model against its original; one-line
# errors (bad extension, no Graphviz) that leave no file behind; the
# optimize report's pictures stop a Graphviz that does not finish.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }
export TSOPT_CACHE_DIR=$T/cache

"$TSOPT" zoo export fsrcnn -o "$T/conv.onnx" >/dev/null
step "svg"
"$TSOPT" draw "$T/conv.onnx" -o "$T/g.svg"
head -c 200 "$T/g.svg" | grep -q '<?xml' || fail "not an SVG: $(head -c 100 "$T/g.svg")"
convs=$(grep -c '>Conv</text>' "$T/g.svg" || true)
want=$("$TSOPT" info "$T/conv.onnx" | grep -oE '^ +Conv +[0-9]+' | grep -oE '[0-9]+$' || true)
echo "   $convs Conv nodes drawn (info: ${want:-?})"
[ "$convs" -gt 0 ] || fail "no Conv node in the SVG"
[ -z "$want" ] || [ "$convs" = "$want" ] || fail "$convs Conv nodes drawn, the model has $want"

step "dot, png"
"$TSOPT" draw "$T/conv.onnx" -o "$T/g.dot"
head -1 "$T/g.dot" | grep -q '^digraph ' || fail "dot: $(head -1 "$T/g.dot")"
grep -q 'weights [0-9x]*' "$T/g.dot" || fail "weights are not folded into the node labels"
grep -qE '^  v[0-9]+ \[shape=ellipse' "$T/g.dot" || fail "no input node"
grep -qE '^  [vn][0-9]+ -> n[0-9]+;' "$T/g.dot" || fail "no edge"
"$TSOPT" draw "$T/conv.onnx" -o "$T/g.png"
[ "$(head -c 4 "$T/g.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "not a PNG"

step "--diff: optimized against original"
"$TSOPT" zoo export nasrnn -o "$T/m.onnx" --steps 2 >/dev/null
# ... with a report whose Graphviz never finishes (a fake dot first on
# PATH): stopped at the drawing bound (TSOPT_DRAW_S), the report says so,
# optimize succeeds
mkdir "$T/bin" && printf '#!/bin/sh\nexec sleep 60\n' >"$T/bin/dot" && chmod +x "$T/bin/dot"
s=$(date +%s)
PATH="$T/bin:$PATH" TSOPT_DRAW_S=1 "$TSOPT" optimize "$T/m.onnx" -o "$T/opt.onnx" --time-limit 5 --cost-model roofline \
    --no-timing --report "$T/r.md" >/dev/null || fail "optimize with a Graphviz that hangs failed"
[ $(($(date +%s) - s)) -le 20 ] || fail "optimize waited $(($(date +%s) - s)) s for a Graphviz that hangs"
grep -q "^(No pictures: draw: Graphviz 'dot' did not draw '.*r.md.before.svg' within 1 s (stopped; nothing drawn))" \
    "$T/r.md" || fail "report: $(grep -i picture "$T/r.md")"
[ ! -e "$T/r.md.before.svg" ] || fail "a picture was left"
"$TSOPT" draw "$T/opt.onnx" --diff "$T/m.onnx" -o "$T/d.dot"
grep -oE 'label="optimization: [^"]*"' "$T/d.dot"
grep -qE 'label="optimization: [1-9][0-9]* nodes? new' "$T/d.dot" || fail "no new node found"
grep -q 'fillcolor="#fbd3a8"' "$T/d.dot" || fail "new nodes not highlighted"
"$TSOPT" draw "$T/m.onnx" --diff "$T/m.onnx" -o "$T/same.dot"
grep -q 'label="optimization: 0 nodes new (orange)"' "$T/same.dot" || fail "a model against itself: $(grep -o 'label="optimization[^"]*"' "$T/same.dot")"

step "errors"
expect() { # CODE TEXT -- CMD...
  local code=$1 text=$2; shift 3
  local rc=0
  "$@" >"$T/out" 2>"$T/err" || rc=$?
  [ "$rc" -eq "$code" ] || fail "$*: exit $rc, want $code ($(cat "$T/err"))"
  grep -qF "$text" "$T/err" || fail "$*: stderr '$(cat "$T/err")' lacks '$text'"
  [ "$(wc -l <"$T/err")" -eq 1 ] || fail "$*: more than one error line"
}
expect 2 "expected a file ending in .svg, .png or .dot" -- "$TSOPT" draw "$T/conv.onnx" -o "$T/g.jpg"
expect 2 "draw: expected MODEL and -o" -- "$TSOPT" draw "$T/conv.onnx"
expect 1 "cannot open model" -- "$TSOPT" draw "$T/nope.onnx" -o "$T/n.svg"
expect 2 "cannot run Graphviz 'dot'" -- env PATH=/nonexistent "$TSOPT" draw "$T/conv.onnx" -o "$T/x.svg"
ls "$T" | grep -E '^(g\.jpg|n\.svg|x\.svg)|\.tmp$' && fail "files left behind"
echo "ok"
