#!/usr/bin/env bash
# Progress goes to stderr, results to stdout: tsopt verify (plain lines
# when stderr is not a terminal, the last one saying it is done) and
# tsopt generate (the stage lines); stdout keeps only the results.
set -euo pipefail
: "${TSOPT:?TSOPT not set}" "${TSOPT_SRC:?TSOPT_SRC not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

n=$(grep -c '^(rule' "$TSOPT_SRC/rules/core.rules")
"$TSOPT" verify "$TSOPT_SRC/rules/core.rules" --threads 2 >"$T/out" 2>"$T/err"
cat "$T/err"
head -1 "$T/err" | grep -qx "verify: $n rules" || fail "verify: first progress line"
tail -1 "$T/err" | grep -qE "^verify: $n of $n rules done, [0-9.]+ s$" || fail "verify: last progress line"
grep -q '^verify:' "$T/out" && fail "verify: progress on stdout"
tail -1 "$T/out" | grep -qx "proved $n of $n, failed 0, timed out 0" || fail "verify: result line $(tail -1 "$T/out")"

"$TSOPT" generate --max-ops 1 --threads 2 -o "$T/r.rules" >"$T/out" 2>"$T/err"
cat "$T/err"
grep -q '^graphs enumerated ' "$T/err" || fail "generate: no stage line on stderr"
[ "$(wc -l <"$T/out")" -eq 1 ] && grep -qE '^kept [0-9]+ rules$' "$T/out" || fail "generate stdout: $(cat "$T/out")"
echo "ok"
