#!/usr/bin/env bash
# tsopt compare on special values: an infinity matches only the same
# infinity (1 vs inf and +inf vs -inf fail, whatever the tolerances), NaN
# matches only NaN (NaN vs NaN passes: two engines agreeing on a NaN).
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# case A B expected-exit
check() {
  rm -rf "$T/a" "$T/b"
  mkdir "$T/a" "$T/b"
  "$PYTHON" -c "import numpy as np, sys; inf, nan = np.inf, np.nan
np.save(sys.argv[1], np.array([0.5, $1], np.float32)); np.save(sys.argv[2], np.array([0.5, $2], np.float32))" \
    "$T/a/t.npy" "$T/b/t.npy"
  local rc=0
  "$TSOPT" compare "$T/a" "$T/b" --rtol 1 --atol 1 >"$T/out" 2>&1 || rc=$?
  printf '%-6s vs %-6s exit %d: %s\n' "$1" "$2" "$rc" "$(head -1 "$T/out")"
  [ "$rc" -eq "$3" ] || fail "$1 vs $2: exit $rc, want $3"
}
check 1 inf 1
check inf 1 1
check inf -inf 1
check -inf inf 1
check nan 1 1
check 1 nan 1
check nan inf 1
check inf inf 0
check -inf -inf 0
check nan nan 0
check 1 1.5 0
echo "ok"
