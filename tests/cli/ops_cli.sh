#!/usr/bin/env bash
# tsopt ops: one line per registered ai.onnx operator (as many as --json
# counts), sorted, with its opset range and fast kernels; no opset range
# below the operator's first version in ONNX's own history (python onnx,
# when importable); a bad argument gets one error line.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
PYTHON=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$TSOPT" ops >"$T/ops.txt"
"$TSOPT" ops --json >"$T/ops.json"
head -3 "$T/ops.txt"
tail -1 "$T/ops.txt"
head -1 "$T/ops.txt" | grep -q '^operator  *opsets  *inputs  *fast kernels$' || fail "header"
grep -qE '^Mod +10\+ +2 +vec\.eltwise$' "$T/ops.txt" || fail "Mod line: $(grep '^Mod ' "$T/ops.txt")"
grep -qE '^Conv +1\+ +2-3 +.*dnnl\.conv' "$T/ops.txt" || fail "Conv line: $(grep '^Conv ' "$T/ops.txt")"
grep -qE '^HardSwish +14\+ ' "$T/ops.txt" || fail "HardSwish line"
grep -qE '^Concat +4\+ +1\+ ' "$T/ops.txt" || fail "Concat line (variadic inputs)"
if grep -q '?' "$T/ops.txt"; then fail "an operator without opsets: $(grep '?' "$T/ops.txt")"; fi
"$PYTHON" - "$T/ops.txt" "$T/ops.json" <<'PY' || fail "listing"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
d = json.load(open(sys.argv[2]))
rows = lines[1:-1]
names = [r.split()[0] for r in rows]
assert names == sorted(names), "not sorted"
assert len(names) == len(set(names)) == d["count"] == len(d["operators"]), (len(names), d["count"])
assert lines[-1].startswith("%d operators, %d with a fast kernel" % (d["count"], d["with_fast_kernel"])), lines[-1]
assert [o["name"] for o in d["operators"]] == names
assert all("." not in n for n in names), "internal operator listed"
try:
    import onnx.defs
except ImportError:
    print("python onnx missing: ONNX history not checked")
    sys.exit(0)
first = {}
for s in onnx.defs.get_all_schemas_with_history():
    if s.domain == "":
        first[s.name] = min(first.get(s.name, 10**6), s.since_version)
checked = 0
for o in d["operators"]:
    if o["name"] in first:
        assert o["opset_min"] >= first[o["name"]], "%s: opset %d, ONNX has it from %d" % (
            o["name"], o["opset_min"], first[o["name"]])
        checked += 1
print("%d operators, %d checked against ONNX's history" % (len(names), checked))
assert checked >= 100, checked  # operators newer than this onnx cannot be checked
PY

# errors: one line, usage exit code
if "$TSOPT" ops --bogus 2>"$T/err"; then fail "accepted --bogus"; fi
[ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "ops: unexpected argument '--bogus'" "$T/err" || fail "error: $(cat "$T/err")"
"$TSOPT" help ops | grep -q '^usage: tsopt ops' || fail "help ops"
echo "ok"
