#!/usr/bin/env bash
# tsopt optimize's options on a small model (NasRNN, 2 steps; cost cache in
# a temp dir): the report counts the rules loaded and those also used right
# to left (a --rules file is used both ways, the core set as written); a
# --min-gain no graph can reach keeps the original; bad arguments get one
# error line, a non-zero exit and no output file.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export TSOPT_CACHE_DIR=$T/cache

"$TSOPT" zoo export nasrnn -o "$T/m.onnx" --steps 2 >/dev/null 2>&1 || "$TSOPT" zoo export nasrnn -o "$T/m.onnx" >/dev/null

"$TSOPT" optimize "$T/m.onnx" -o "$T/core.onnx" --time-limit 2 --report "$T/core.md" >"$T/core.out"
cat "$T/core.out"
grep -q '; 10 rules loaded, 0 of them also applied right to left, 10 of the 10 usable by the matcher\.' "$T/core.md" \
    || fail "core rules line: $(grep '^Search' "$T/core.md")"

cat >"$T/r.rules" <<'R'
; tsopt rules v1
(rule sum (lhs (matmul (concat 1 ?x ?y) (concat 0 ?w1 ?w2))) (rhs (ewadd (matmul ?x ?w1) (matmul ?y ?w2))))
(rule drop (lhs (matmul ?x Imatmul)) (rhs ?x))
R
"$TSOPT" optimize "$T/m.onnx" -o "$T/file.onnx" --rules "$T/r.rules" --time-limit 2 --report "$T/file.md" >/dev/null
grep -q '; 2 rules loaded, 1 of them also applied right to left, 2 of the 3 usable by the matcher\.' "$T/file.md" \
    || fail "file rules line: $(grep '^Search' "$T/file.md")"

"$TSOPT" optimize "$T/m.onnx" -o "$T/kept.onnx" --time-limit 2 --min-gain 99 >"$T/kept.out"
grep -q 'original kept' "$T/kept.out" || grep -q ', 0 substitutions,' "$T/kept.out" \
    || fail "--min-gain 99 wrote a changed graph: $(cat "$T/kept.out")"
[ -s "$T/kept.onnx" ] || fail "--min-gain 99: nothing written"

for args in "--min-gain 100" "--min-gain -1" "--alpha 0.5" "--time-limit x" "--bogus"; do
    set +e
    # shellcheck disable=SC2086
    "$TSOPT" optimize "$T/m.onnx" -o "$T/bad.onnx" $args >/dev/null 2>"$T/e.txt"
    rc=$?
    set -e
    [ $rc -ne 0 ] || fail "optimize $args exited 0"
    [ "$(wc -l <"$T/e.txt")" -eq 1 ] || fail "optimize $args: $(cat "$T/e.txt")"
    grep -q -- "${args% *}" "$T/e.txt" || fail "optimize $args: the error does not name the option: $(cat "$T/e.txt")"
    [ ! -e "$T/bad.onnx" ] || fail "optimize $args wrote a file"
done
echo "optimize cli OK"
