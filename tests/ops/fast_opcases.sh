#!/usr/bin/env bash
# Every single-op case (tests/ops/cases_*.c) through the fast runtime: a
# plan built with whatever kernels take the node (oneDNN, vectorized, or the
# reference fallback), run on the case's seeded inputs, compared with the
# reference interpreter within the case's tolerance (opcases fast).
# Usage (standalone): OPCASES=... bash fast_opcases.sh [FILTER]
set -uo pipefail
: "${OPCASES:?OPCASES not set}"
out=$("$OPCASES" fast ${1:-} 2>&1)
rc=$?
echo "$out"
last=$(echo "$out" | tail -1)
if [ $rc -ne 0 ]; then echo "FAIL: opcases fast exited $rc"; exit 1; fi
# a run that checked nothing is a failure too
[[ "$last" =~ ^([0-9]+)\ passed,\ 0\ failed$ ]] && [ "${BASH_REMATCH[1]}" -gt 0 ]
