#!/usr/bin/env bash
# tsopt profile / peak on a tiny model with the cost cache in a temp dir:
# the first run measures every group, the second measures nothing new and
# predicts the same sum; peak prints positive numbers; errors are one line.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$TSOPT" zoo export nasrnn -o "$T/m.onnx" --steps 2 >/dev/null 2>&1 || "$TSOPT" zoo export nasrnn -o "$T/m.onnx" >/dev/null
"$TSOPT" profile "$T/m.onnx" --cache "$T/c.tsv" --iters 3 >"$T/1.txt"
cat "$T/1.txt"
grep -qE '^cache: .* [1-9][0-9]* new measurements' "$T/1.txt" || fail "first run measured nothing"
grep -q '^prediction error: ' "$T/1.txt" || fail "no prediction error line"
[ -s "$T/c.tsv" ] || fail "no cache file written"
grep -q $'^# cpu\t' "$T/c.tsv" || fail "cache lacks its cpu line"

"$TSOPT" profile "$T/m.onnx" --cache "$T/c.tsv" --iters 3 >"$T/2.txt"
grep -q '(.* 0 new measurements)' "$T/2.txt" || fail "second run measured again: $(grep '^cache' "$T/2.txt")"
grep -qE '^groups: [0-9]+ \(0 measured now' "$T/2.txt" || fail "second run: $(grep '^groups' "$T/2.txt")"
s1=$(grep '^sum of costs' "$T/1.txt" | awk '{print $4}')
s2=$(grep '^sum of costs' "$T/2.txt" | awk '{print $4}')
[ "$s1" = "$s2" ] || fail "sum changed from $s1 to $s2 with nothing new measured"

"$TSOPT" profile "$T/m.onnx" --cache "$T/c.tsv" --iters 3 --json | /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
assert d["measured"] == 0 and d["sum_ms"] > 0 and d["e2e_ms"] > 0, d'

"$TSOPT" peak --cache "$T/c.tsv" --json | /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
assert d["peak_gflops"] > 0 and d["peak_gbps"] > 0, d'

rc=0
"$TSOPT" profile "$T/missing.onnx" 2>"$T/err" >/dev/null || rc=$?
[ $rc -ne 0 ] && [ "$(wc -l <"$T/err")" -eq 1 ] || fail "missing model: rc $rc, stderr $(cat "$T/err")"
mkdir "$T/dir.tsv"
rc=0
"$TSOPT" profile "$T/m.onnx" --cache "$T/dir.tsv" 2>"$T/err" >/dev/null || rc=$?
[ $rc -ne 0 ] && [ "$(wc -l <"$T/err")" -eq 1 ] || fail "cache is a directory: rc $rc, stderr $(cat "$T/err")"
echo "ok"
