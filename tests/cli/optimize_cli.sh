#!/usr/bin/env bash
# tsopt optimize's contract on a small model (NasRNN, 2 steps; cost cache in
# a temp dir):
# - --json prints one object with every field DESIGN.md fixes;
# - the roofline cost model without timing is deterministic: the search
#   finds rewrites, the predicted cost drops, the optimized graph is
#   written, and it computes what the original does;
# - the report counts the rules loaded and those also used right to left (a
#   --rules file and the generated set are used both ways, the core set as
#   written);
# - a --min-gain no graph can reach keeps the original, and says so;
# - a check that runs out of time keeps the original, and says so;
# - SIGINT ends the search and writes the best graph so far;
# - bad arguments, unknown sources and unwritable paths get one error line,
#   a non-zero exit, no output file, and fail before any search.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export TSOPT_CACHE_DIR=$T/cache
PY=/usr/bin/python3

"$TSOPT" zoo export nasrnn -o "$T/m.onnx" --steps 2 >/dev/null 2>&1 || "$TSOPT" zoo export nasrnn -o "$T/m.onnx" >/dev/null

# JSON contract, and a deterministic search that must write a rewritten graph
"$TSOPT" optimize "$T/m.onnx" -o "$T/det.onnx" --time-limit 3 --cost-model roofline --no-timing --json \
    --report "$T/det.md" >"$T/det.json"
cat "$T/det.json"
"$PY" - "$T/det.json" <<'P' || fail "JSON contract"
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("written", "cost_before_ms", "cost_after_ms", "latency_before_ms", "latency_after_ms", "applied",
          "search_s", "peak_rss_mb", "check", "stop", "explored", "reason"):
    assert k in r, "missing field " + k
assert "max_scaled_error" in r["check"]
assert {"taso", "passes"} <= set(r["applied"]), r["applied"]
assert r["written"] == "optimized", r["written"]
assert sum(r["applied"].values()) > 0, r["applied"]
assert r["cost_after_ms"] < r["cost_before_ms"], (r["cost_before_ms"], r["cost_after_ms"])
assert 0 <= r["check"]["max_scaled_error"] <= 1
P
"$TSOPT" run "$T/m.onnx" --save-inputs "$T/in" --save-outputs "$T/a" >/dev/null
"$TSOPT" run "$T/det.onnx" --inputs "$T/in" --save-outputs "$T/b" >/dev/null
"$TSOPT" compare "$T/a" "$T/b" --rtol 1e-3 --atol 1e-4 >/dev/null || fail "written graph differs from the original"
cmp -s "$T/m.onnx" "$T/det.onnx" && fail "the deterministic run wrote the original"
grep -q 'the \*\*optimized\*\* graph' "$T/det.md" || fail "report: $(head -3 "$T/det.md")"
grep -Eq '^- taso: [0-9]+ rules from the built-in rules \(rules/core.rules: [0-9]+, as written; rules/taso.rules: [0-9]+, generated and proved\), [0-9]+ of them also applied right to left; ' "$T/det.md" \
    || fail "default rules line: $(grep '^- taso' "$T/det.md")"

cat >"$T/r.rules" <<'R'
; tsopt rules v1
(rule sum (lhs (matmul (concat 1 ?x ?y) (concat 0 ?w1 ?w2))) (rhs (ewadd (matmul ?x ?w1) (matmul ?y ?w2))))
(rule drop (lhs (matmul ?x Imatmul)) (rhs ?x))
R
"$TSOPT" optimize "$T/m.onnx" -o "$T/file.onnx" --rules "$T/r.rules" --time-limit 2 --cost-model roofline \
    --no-timing --report "$T/file.md" >/dev/null
grep -q "^- taso: 2 rules from $T/r.rules, 1 of them also applied right to left; 2 of the 3 usable by the matcher\$" "$T/file.md" \
    || fail "file rules line: $(grep '^- taso' "$T/file.md")"

# a gain no graph can reach keeps the original (or the machine is too busy:
# then the original is kept too); the report says why
"$TSOPT" optimize "$T/m.onnx" -o "$T/kept.onnx" --time-limit 2 --min-gain 99 --json --report "$T/kept.md" >"$T/kept.json"
"$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["written"]=="original" and sum(r["applied"].values())==0, r' \
    "$T/kept.json" || fail "--min-gain 99 wrote a changed graph: $(cat "$T/kept.json")"
grep -q 'the \*\*original\*\* graph. original kept' "$T/kept.md" || fail "kept report: $(head -3 "$T/kept.md")"
grep -q '^## Rewrites' "$T/kept.md" && fail "the report lists rewrites of a graph that was not written"
[ -s "$T/kept.onnx" ] || fail "--min-gain 99: nothing written"

# a check that runs out of time (TSOPT_CHECK_S caps it; src/opt/optimize.c)
# writes the original, as the run above does, never the unchecked rewrites
TSOPT_CHECK_S=1e-9 "$TSOPT" optimize "$T/m.onnx" -o "$T/late.onnx" --time-limit 1 --cost-model roofline --no-timing \
    --json >"$T/late.json"
"$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["written"]=="original" and r["cost_after_ms"] < r["cost_before_ms"] and "the check ran out of time" in r["reason"], r' \
    "$T/late.json" || fail "a check out of time: $(cat "$T/late.json")"
cmp -s "$T/kept.onnx" "$T/late.onnx" || fail "a check out of time did not write the original"

# Ctrl-C: the best graph so far is checked and written
"$TSOPT" optimize "$T/m.onnx" -o "$T/int.onnx" --time-limit 60 --budget 0 --alpha 10 --cost-model roofline \
    --no-timing --json >"$T/int.json" &
pid=$!
sleep 2
kill -INT $pid
start=$(date +%s)
wait $pid || fail "optimize exited $? after SIGINT"
[ $(($(date +%s) - start)) -le 10 ] || fail "optimize took more than 10 s to stop after SIGINT"
"$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["stop"]=="interrupted", r["stop"]' "$T/int.json" \
    || fail "SIGINT: $(cat "$T/int.json")"
[ -s "$T/int.onnx" ] || fail "SIGINT: nothing written"

mkdir -p "$T/ro" && chmod 555 "$T/ro"
for args in "--min-gain 100" "--min-gain -1" "--alpha 0.5" "--time-limit x" "--bogus" "--cost-model x" \
    "--transforms nosuch" "--transforms taso,nosuch" "-o $T/missing/x.onnx" "-o $T" "--report $T/missing/r.md"; do
    set +e
    s=$(date +%s%N)
    # shellcheck disable=SC2086
    "$TSOPT" optimize "$T/m.onnx" -o "$T/bad.onnx" $args --time-limit 30 >/dev/null 2>"$T/e.txt"
    rc=$?
    ms=$((($(date +%s%N) - s) / 1000000))
    set -e
    [ $rc -ne 0 ] || fail "optimize $args exited 0"
    [ "$(wc -l <"$T/e.txt")" -eq 1 ] || fail "optimize $args: $(cat "$T/e.txt")"
    grep -q -- "${args%% *}" "$T/e.txt" || fail "optimize $args: the error does not name the option: $(cat "$T/e.txt")"
    [ ! -e "$T/bad.onnx" ] || fail "optimize $args wrote a file"
    [ $ms -lt 5000 ] || fail "optimize $args took $ms ms: not checked before the search"
done
"$TSOPT" optimize "$T/m.onnx" -o "$T/bad.onnx" --transforms nosuch 2>"$T/e.txt" && fail "--transforms nosuch exited 0"
grep -q "unknown source 'nosuch' (known: taso" "$T/e.txt" || fail "--transforms nosuch: $(cat "$T/e.txt")"
echo "optimize cli OK"
