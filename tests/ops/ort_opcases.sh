#!/usr/bin/env bash
# Every single-op case (tests/ops/cases_*.c) against ONNX Runtime:
#   opcases export DIR     model.onnx, in/, ref/ (tsopt's reference, float32), tol
#   run_cases.js DIR       ort/ (ONNX Runtime's outputs), one node process
#   tsopt compare ref ort  per case, with the case's tolerance
# Usage (standalone): TSOPT=... OPCASES=... TSOPT_SRC=... bash ort_opcases.sh [FILTER]
set -uo pipefail
: "${TSOPT:?TSOPT not set}" "${OPCASES:?OPCASES not set}" "${TSOPT_SRC:?TSOPT_SRC not set}"
FILTER=${1:-}
DIR=${TSOPT_BUILD:-/tmp}/ort_opcases
rm -rf "$DIR"
mkdir -p "$DIR"

declare -A FAILED=()

echo "-- opcases export $DIR $FILTER"
"$OPCASES" export "$DIR" $FILTER >"$DIR/export.log" 2>&1
rc=$?
cat "$DIR/export.log"
while read -r _ name _; do FAILED[${name%:}]="tsopt: export/self-check"; done < <(grep '^FAIL ' "$DIR/export.log")
if [ $rc -gt 1 ]; then echo "FAIL: opcases export crashed (exit $rc)"; exit 1; fi

echo "-- run_cases.js (ONNX Runtime)"
node "$TSOPT_SRC/tools/ort/run_cases.js" "$DIR" $FILTER >"$DIR/ort.log" 2>&1
rc=$?
cat "$DIR/ort.log"
while read -r _ name _; do FAILED[${name%:}]="ort: load/run"; done < <(grep '^FAIL ' "$DIR/ort.log")
if [ $rc -gt 1 ]; then echo "FAIL: run_cases.js could not run (exit $rc)"; exit 1; fi

echo "-- tsopt compare ref ort"
pass=0
for d in "$DIR"/*/; do
  name=$(basename "$d")
  [ -f "$d/model.onnx" ] || continue
  [ -z "${FAILED[$name]:-}" ] || continue
  read -r rtol atol <"$d/tol"
  if out=$("$TSOPT" compare "$d/ref" "$d/ort" --rtol "$rtol" --atol "$atol" 2>&1); then
    pass=$((pass + 1))
  else
    FAILED[$name]="compare"
    echo "FAIL $name (rtol $rtol, atol $atol):"
    echo "$out" | sed 's/^/    /'
  fi
done

nfail=${#FAILED[@]}
if [ "$nfail" -gt 0 ]; then
  echo "-- failed cases:"
  for k in $(printf '%s\n' "${!FAILED[@]}" | sort); do echo "   $k (${FAILED[$k]})"; done
fi
echo "$pass passed, $nfail failed"
[ "$nfail" -eq 0 ] && [ "$pass" -gt 0 ]
