#!/usr/bin/env bash
# tsopt bench: the JSON object has the fields the benchmark script reads
# (median/min/max consistent, the iteration and thread counts asked for,
# more runs with --min-time,
# the peak RSS, the OpenMP wait policy it ran with), the text form says the
# same, a user's wait policy is kept, and bad arguments get one error line.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$TSOPT" zoo export nasrnn -o "$T/m.onnx" >/dev/null
"$TSOPT" bench "$T/m.onnx" --iters 4 --threads 1 --json >"$T/b.json"
cat "$T/b.json"
/usr/bin/python3 - "$T/b.json" <<'PY' || fail "bad bench JSON"
import json, sys
d = json.loads(open(sys.argv[1]).read())
for k in ("median_ms", "min_ms", "max_ms", "iters", "threads", "peak_rss_bytes", "steps", "arena_bytes", "wait_policy"):
    assert k in d, k
assert 0 < d["min_ms"] <= d["median_ms"] <= d["max_ms"], d
assert d["iters"] == 4 and d["threads"] == 1, d
assert d["peak_rss_bytes"] > 1 << 20 and d["steps"] > 0 and d["fallback_steps"] == 0, d
# the test environment asks for passive waiting (tests/CMakeLists.txt)
assert d["wait_policy"] == "passive", d["wait_policy"]
PY

# a user's GOMP_SPINCOUNT is kept (no OMP_WAIT_POLICY added on top)
env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=100 "$TSOPT" bench "$T/m.onnx" --iters 2 --json | grep -q '"wait_policy": "spin"' \
    || fail "user's GOMP_SPINCOUNT not kept"
# without either, tsopt adapts while it runs (src/measure/wait_policy.c);
# TSOPT_WAIT forces one of its two modes
w=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$TSOPT" bench "$T/m.onnx" --iters 2 --json | sed 's/.*"wait_policy": "\([a-z]*\)".*/\1/')
[ "$w" = adaptive ] || fail "wait policy '$w', not adaptive"
w=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT TSOPT_WAIT=sleep "$TSOPT" bench "$T/m.onnx" --iters 2 --json | sed 's/.*"wait_policy": "\([a-z]*\)".*/\1/')
[ "$w" = sleep ] || fail "TSOPT_WAIT=sleep: wait policy '$w'"

"$TSOPT" bench "$T/m.onnx" --iters 3 >"$T/b.txt"
grep -qE '^latency: median [0-9.]+ ms, min [0-9.]+ ms, max [0-9.]+ ms.*\(3 runs after 3 warm-up, [0-9]+ threads, OpenMP wait passive\)$' "$T/b.txt" \
    || fail "latency line: $(grep latency "$T/b.txt")"
grep -q '^memory: arena ' "$T/b.txt" || fail "no memory line"

# --min-time: more runs than --iters until they add up to the time (nasrnn
# takes about a millisecond a run, and under ASan on a loaded machine up
# to ~300 ms: 2 s is well over 3 runs either way)
"$TSOPT" bench "$T/m.onnx" --iters 3 --min-time 2 --json >"$T/m.json"
/usr/bin/python3 - "$T/m.json" <<'PY' || fail "--min-time: $(cat "$T/m.json")"
import json, sys
d = json.loads(open(sys.argv[1]).read())
assert d["iters"] > 3 and d["iters"] * d["mean_ms"] >= 2000 * 0.999, d
# the runs come in rounds of about 50 ms, each judged for disturbance: the
# quiet median reads the undisturbed ones (null when there are none)
assert d["rounds"] >= 2 and 0 <= d["disturbed_rounds"] <= d["rounds"], d
assert 0 <= d["quiet_runs"] <= d["iters"], d
if d["disturbed_rounds"] < d["rounds"]:
    assert d["quiet_runs"] > 0 and d["min_ms"] <= d["quiet_min_ms"] <= d["quiet_median_ms"] <= d["max_ms"], d
else:
    assert d["quiet_runs"] == 0 and d["quiet_median_ms"] is None, d
assert isinstance(d["disturbed_by"], list) and (d["disturbed_by"] != []) == (d["disturbed_rounds"] > 0), d
# how the wait policy spent the runs (passive here: no adaptive switching)
for k in ("wait_spin_runs", "wait_sleep_runs", "wait_spin_ms", "wait_sleep_ms", "wait_to_sleep", "wait_to_spin",
          "wait_windows", "wait_busy_windows", "wait_vetoed"):
    assert k in d, k
assert d["wait_to_sleep"] == d["wait_to_spin"] == 0, d
PY
grep -qE '^quiet: (median [0-9.]+ ms, min [0-9.]+ ms over the [0-9]+ runs of [0-9]+ undisturbed rounds of [0-9]+|none of [0-9]+ rounds undisturbed)' \
    <("$TSOPT" bench "$T/m.onnx" --iters 3) || fail "no quiet line in the text form"

# errors: one line, non-zero exit
for args in "--iters 0" "--iters x" "--threads 0" "--bogus" "--min-time -1" "--min-time 5000"; do
    set +e
    "$TSOPT" bench "$T/m.onnx" $args >/dev/null 2>"$T/e.txt"
    rc=$?
    set -e
    [ $rc -ne 0 ] || fail "bench $args exited 0"
    [ "$(wc -l <"$T/e.txt")" -eq 1 ] || fail "bench $args: $(cat "$T/e.txt")"
    grep -q -- "${args% *}" "$T/e.txt" || fail "bench $args: the error does not name the option: $(cat "$T/e.txt")"
done
set +e
"$TSOPT" bench "$T/missing.onnx" >/dev/null 2>"$T/e.txt"
rc=$?
set -e
[ $rc -ne 0 ] && [ "$(wc -l <"$T/e.txt")" -eq 1 ] && grep -q 'missing.onnx' "$T/e.txt" || fail "missing model: rc $rc, $(cat "$T/e.txt")"
echo "bench cli OK"
