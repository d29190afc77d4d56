#!/usr/bin/env bash
# tsopt verify and the window-geometry axioms W1..W18, C1 (docs/taso.md,
# "Verifier"): every axiom passes its concrete check (exit 0), and the 171
# generated 3-operator rules that TASO's Table 2 alone cannot prove
# (window_rules.rules: Iconv crops and subsamplings, conv/average-pool
# commutations, max-pool window swaps) are all proved.
set -euo pipefail
: "${TSOPT:?}" "${TSOPT_SRC:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$TSOPT" verify --check-axioms --max-dim 3) || fail "axiom check: $(echo "$out" | grep -v ' ok ' | tail -3)"
echo "$out" | tail -1
echo "$out" | tail -1 | grep -q ", 0 failed" || fail "axiom check line"
for w in W1 W4 W10 W17 W18 C1 O1 O14; do
    echo "$out" | grep -qE "^$w +ok " || fail "$w missing from the axiom check"
done

f="$TSOPT_SRC/tests/cli/window_rules.rules"
n=$(grep -c '^(rule' "$f")
[ "$n" = 171 ] || fail "fixture holds $n rules"
out=$("$TSOPT" verify "$f" --threads 2) || fail "verify: $(echo "$out" | tail -3)"
echo "$out" | tail -1
echo "$out" | grep -qx "proved $n of $n, failed 0, timed out 0" || fail "not all window rules proved"
echo ok
