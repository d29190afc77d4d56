#!/usr/bin/env bash
# Every rule of POLYJUICE's set (rules/polyjuice.rules, the e-graph's
# rewrites) is proved by tsopt verify: a wrong rule would make the fuzzer
# report compilers' correct outputs as bugs.
set -euo pipefail
: "${TSOPT:?}" "${TSOPT_SRC:?}"
f=rules/polyjuice.rules
out=$("$TSOPT" verify "$TSOPT_SRC/$f" --threads 2)
n=$(grep -c '^(rule' "$TSOPT_SRC/$f")
echo "$f: $(echo "$out" | tail -1)"
[ "$n" -gt 0 ]
echo "$out" | grep -qx "proved $n of $n, failed 0, timed out 0"
