#!/usr/bin/env bash
# `tsopt optimize --transforms einnet` on FSRCNN (convolutions 5x5, 3x3,
# 1x1 and a strided transposed convolution), deterministic (roofline cost
# model, no timing, no time limit: a loaded machine must not change the
# outcome):
# - the source runs alone, proposes derivations (generated > 1: the
#   original plus at least one instantiated derivation per 3x3/5x5 conv),
#   the report names it and says how its rewrites are justified;
# - --json's applied object has an "einnet" count;
# - the written model passes the final check.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export TSOPT_CACHE_DIR=$T/cache
PY=/usr/bin/python3

"$TSOPT" zoo export fsrcnn -o "$T/m.onnx" >/dev/null
"$TSOPT" optimize "$T/m.onnx" -o "$T/o.onnx" --transforms einnet --time-limit 0 --cost-model roofline --no-timing \
    --json --report "$T/r.md" >"$T/r.json"
cat "$T/r.json"
"$PY" - "$T/r.json" <<'P' || fail "einnet JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert "einnet" in r["applied"], r["applied"]
assert r["generated"] > 1, "einnet proposed nothing: %r" % r["generated"]
assert r["stop"] == "exhausted", r["stop"]
assert 0 <= r["check"]["max_scaled_error"] <= 1
P
grep -q "einnet:" "$T/r.md" || fail "the report does not describe the einnet source"
test -s "$T/o.onnx" || fail "no model written"
echo "einnet CLI: ok"
