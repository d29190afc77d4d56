#!/usr/bin/env bash
# tsopt fuzz (docs/fuzz.md): bad arguments give one line and exit 2; a
# short campaign against tsopt keeps the --json contract and writes the
# first K pairs; one seed gives the same pairs; saved pairs differ in
# structure (`tsopt info`: the variant has more nodes) and agree in ONNX
# Runtime; the planted bug (TSOPT_FUZZ_PLANT=transpose-add) is found within
# 1,000 pairs, minimized, with a complete folder that replays; a short
# campaign against ORT.  The ORT parts are skipped without
# tools/ort/node_modules.
set -euo pipefail
: "${TSOPT:?}" "${TSOPT_SRC:?}"
PY=${PYTHON:-/usr/bin/python3}
ORT_RUN=${ORT_RUN:-$TSOPT_SRC/tools/ort/run.js}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }
have_ort=0
[ -d "$TSOPT_SRC/tools/ort/node_modules/onnxruntime-node" ] && command -v node >/dev/null && have_ort=1

# expect_usage WANT ARGS...: exit 2, one line on stderr containing WANT, nothing on stdout
expect_usage() {
    local want=$1 rc=0
    shift
    "$@" >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" -eq 2 ] || fail "exit $rc, want 2: $* ($(cat "$T/err"))"
    [ "$(wc -l <"$T/err")" -eq 1 ] || fail "want one error line: $(cat "$T/err")"
    grep -qF -- "$want" "$T/err" || fail "stderr '$(cat "$T/err")' lacks '$want'"
    [ ! -s "$T/out" ] || fail "unexpected stdout: $(cat "$T/out")"
    echo "   $(cat "$T/err")"
}

step "bad arguments: one line, exit 2"
expect_usage "expected --target tsopt|ort" "$TSOPT" fuzz -o "$T/x"
expect_usage "--target: expected 'tsopt' or 'ort', got 'tvm'" "$TSOPT" fuzz --target tvm -o "$T/x"
expect_usage "expected -o DIR" "$TSOPT" fuzz --target tsopt
expect_usage "--time: expected seconds > 0, got '0'" "$TSOPT" fuzz --target tsopt --time 0 -o "$T/x"
expect_usage "--time wants a non-negative number" "$TSOPT" fuzz --target tsopt --time -1 -o "$T/x"
expect_usage "--seed wants an integer" "$TSOPT" fuzz --target tsopt --seed abc -o "$T/x"
expect_usage "--save-pairs wants an integer" "$TSOPT" fuzz --target tsopt --save-pairs -3 -o "$T/x"
expect_usage "unknown option '--bogus'" "$TSOPT" fuzz --target tsopt --bogus -o "$T/x"
expect_usage "parent folder does not exist" "$TSOPT" fuzz --target tsopt -o "$T/no/such"
expect_usage "unknown planted bug 'xyz'" env TSOPT_FUZZ_PLANT=xyz "$TSOPT" fuzz --target tsopt -o "$T/x"
expect_usage "--replay: no such folder" "$TSOPT" fuzz --replay "$T/nothing"
[ ! -e "$T/x" ] || fail "a failed command left $T/x behind"

step "campaign against tsopt: --json contract, the first 5 pairs saved"
"$TSOPT" fuzz --target tsopt --mode pairs --pairs 30 --seed 7 --save-pairs 5 -o "$T/a" --json >"$T/a.json" 2>"$T/a.err" ||
    fail "campaign failed: $(cat "$T/a.err")"
tail -n 1 "$T/a.err" | sed 's/^/   /'
"$PY" - "$T/a.json" "$T/a" <<'EOF'
import json, os, sys
lines = open(sys.argv[1]).read().strip().splitlines()
assert len(lines) == 1, lines
r = json.loads(lines[0])
for k in ("tested", "findings", "rate", "pairs_per_s", "seed", "target", "stop", "generated", "filtered",
          "skipped", "saved_pairs", "original_nodes_avg", "variant_nodes_avg"):
    assert k in r, "missing " + k
assert r["seed"] == 7 and r["target"] == "tsopt" and r["stop"] == "pairs", r
assert r["generated"] + r["skipped"] == 30, r
assert r["tested"] + r["filtered"] == r["generated"], r
assert r["tested"] >= 20, r
assert r["saved_pairs"] == 5, r
assert r["variant_nodes_avg"] > r["original_nodes_avg"] * 1.3, r
assert json.load(open(os.path.join(sys.argv[2], "summary.json"))) == r
d = os.path.join(sys.argv[2], "findings")
n = len(os.listdir(d)) if os.path.isdir(d) else 0
assert n == r["findings"], (n, r["findings"])
for f in sorted(os.listdir(d)) if n else []:
    for need in ("original.onnx", "variant.onnx", "README.md", "finding.json", "inputs"):
        assert os.path.exists(os.path.join(d, f, need)), (f, need)
    print("   finding %s: %s" % (f, json.load(open(os.path.join(d, f, "finding.json")))["what"]))
print("   %d tested, %d findings, variant %.1f nodes against %.1f" % (
    r["tested"], r["findings"], r["variant_nodes_avg"], r["original_nodes_avg"]))
EOF
for k in 000 001 002 003 004; do
    [ -f "$T/a/pairs/$k/original.onnx" ] && [ -f "$T/a/pairs/$k/variant.onnx" ] || fail "pair $k not saved"
done
[ ! -e "$T/a/pairs/005" ] || fail "more than 5 pairs saved"
expect_usage "already holds a campaign" "$TSOPT" fuzz --target tsopt --pairs 1 -o "$T/a"

step "one seed, the same pairs (runtime only: the pairs do not depend on the target)"
"$TSOPT" fuzz --target tsopt --no-optimizer --pairs 5 --seed 7 --save-pairs 5 -o "$T/b" >/dev/null 2>&1 ||
    fail "second campaign failed"
for k in 000 001 002 003 004; do
    cmp -s "$T/a/pairs/$k/original.onnx" "$T/b/pairs/$k/original.onnx" || fail "pair $k original differs"
    cmp -s "$T/a/pairs/$k/variant.onnx" "$T/b/pairs/$k/variant.onnx" || fail "pair $k variant differs"
done
"$TSOPT" fuzz --target tsopt --no-optimizer --pairs 5 --seed 8 --save-pairs 1 -o "$T/c" >/dev/null 2>&1
cmp -s "$T/a/pairs/000/variant.onnx" "$T/c/pairs/000/variant.onnx" && fail "seeds 7 and 8 gave the same pair"

nodes() { "$TSOPT" info "$1" | sed -n 's/^nodes: //p'; }
step "saved pairs differ in structure (tsopt info) and agree in ONNX Runtime"
for k in 000 001 002 003 004; do
    p="$T/a/pairs/$k"
    no=$(nodes "$p/original.onnx") nv=$(nodes "$p/variant.onnx")
    [ -n "$no" ] && [ -n "$nv" ] || fail "tsopt info failed on pair $k"
    [ "$nv" -gt "$no" ] || fail "pair $k: variant has $nv nodes, original $no"
    line="   pair $k: original $no nodes, variant $nv nodes"
    if [ $have_ort = 1 ]; then
        "$TSOPT" run "$p/original.onnx" --seed 3 --save-inputs "$p/in" >/dev/null
        node "$ORT_RUN" "$p/original.onnx" --inputs "$p/in" --save-outputs "$p/ort-o"
        node "$ORT_RUN" "$p/variant.onnx" --inputs "$p/in" --save-outputs "$p/ort-v"
        "$TSOPT" compare "$p/ort-o" "$p/ort-v" --rtol 1e-3 --atol 1e-4 >/dev/null ||
            fail "pair $k differs in ORT: $("$TSOPT" compare "$p/ort-o" "$p/ort-v" 2>&1 | tail -n 3)"
        line="$line, equal in ORT"
    fi
    echo "$line"
done
[ $have_ort = 1 ] || echo "   (ORT checks skipped: no tools/ort/node_modules)"

step "the planted bug is found within 1,000 pairs, minimized, and replays"
TSOPT_FUZZ_PLANT=transpose-add "$TSOPT" fuzz --target tsopt --mode pairs --no-optimizer --pairs 1000 --max-findings 1 --seed 1 \
    -o "$T/p" --json >"$T/p.json" 2>"$T/p.err" || fail "planted campaign failed: $(cat "$T/p.err")"
"$PY" - "$T/p.json" "$T/p/findings/000" <<'EOF'
import json, os, sys
r = json.loads(open(sys.argv[1]).read())
assert r["findings"] == 1 and r["stop"] == "findings", r
assert r["generated"] <= 1000 and r["plant"] == "transpose-add", r
d = sys.argv[2]
for need in ("original.onnx", "variant.onnx", "README.md", "finding.json", "inputs", "unminimized/variant.onnx"):
    assert os.path.exists(os.path.join(d, need)), need
assert any(f.endswith(".npy") for f in os.listdir(os.path.join(d, "inputs")))
f = json.load(open(os.path.join(d, "finding.json")))
assert f["kind"] == "mismatch" and f["stage"] == "runtime" and f["wrong"] in ("variant", "original", "both"), f
assert f["minimized"] and f["original_nodes"] < f["found_original_nodes"], f
assert f["variant_nodes"] < f["found_variant_nodes"], f
readme = open(os.path.join(d, "README.md")).read()
for s in ("TSOPT_FUZZ_PLANT=transpose-add tsopt fuzz --replay", "Max difference", "Pair %d" % f["pair"]):
    assert s in readme, s
print("   found at pair %d of %d; minimized from %d + %d to %d + %d nodes in %d trials (wrong: %s)" % (
    f["pair"], r["generated"], f["found_original_nodes"], f["found_variant_nodes"], f["original_nodes"],
    f["variant_nodes"], f["trials"], f["wrong"]))
EOF
f="$T/p/findings/000"
rc=0
TSOPT_FUZZ_PLANT=transpose-add "$TSOPT" fuzz --replay "$f" --target tsopt >"$T/r.out" 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "replay with the plant: exit $rc, want 1 ($(cat "$T/r.out"))"
grep -q "mismatch at stage runtime" "$T/r.out" || fail "replay: $(cat "$T/r.out")"
"$TSOPT" fuzz --replay "$f" --target tsopt >"$T/r.out" 2>&1 || fail "replay without the plant: $(cat "$T/r.out")"
grep -q ": pass" "$T/r.out" || fail "replay: $(cat "$T/r.out")"
echo "   replays: mismatch with the plant, pass without"

step "runtime seeds: coverage in --json; a bug wrong on both sides of a pair found by the reference oracle"
expect_usage "--mode: expected both, pairs or graphs, got 'x'" "$TSOPT" fuzz --target tsopt --mode x -o "$T/x"
"$TSOPT" fuzz --target tsopt --mode graphs --no-optimizer --pairs 40 --seed 2 -o "$T/g" --json >"$T/g.json" 2>"$T/g.err" ||
    fail "graph campaign failed: $(cat "$T/g.err")"
TSOPT_FUZZ_PLANT=relu-abs "$TSOPT" fuzz --target tsopt --mode graphs --no-optimizer --pairs 200 --max-findings 1 \
    --seed 1 -o "$T/ra" --json >"$T/ra.json" 2>"$T/ra.err" || fail "relu-abs campaign failed: $(cat "$T/ra.err")"
"$PY" - "$T/g.json" "$T/ra.json" "$T/ra/findings/000" <<'EOF'
import json, os, sys
g = json.loads(open(sys.argv[1]).read())
assert g["graphs"] == 40 and g["generated"] == 0 and g["kept"] >= 1, g
c = g["coverage"]
assert c["entries"] >= 60 and 20 <= c["entries_reached"] <= c["entries"] and c["keys"] >= c["entries_reached"], c
r = json.loads(open(sys.argv[2]).read())
assert r["findings"] == 1 and r["stop"] == "findings" and r["plant"] == "relu-abs", r
d = sys.argv[3]
for need in ("model.onnx", "README.md", "finding.json", "inputs", "unminimized/model.onnx"):
    assert os.path.exists(os.path.join(d, need)), need
f = json.load(open(os.path.join(d, "finding.json")))
assert f["oracle"] == "reference" and f["operator"] == "Relu" and f["stage"] == "runtime", f
readme = open(os.path.join(d, "README.md")).read()
assert "Operator: **Relu**" in readme and "Oracle: **reference**" in readme, readme
print("   40 graphs: %d of %d table entries, %d keys; relu-abs found at step %d by the %s oracle (%d nodes)" % (
    c["entries_reached"], c["entries"], c["keys"], f["step"], f["oracle"], f["nodes"]))
EOF
rc=0
TSOPT_FUZZ_PLANT=relu-abs "$TSOPT" fuzz --replay "$T/ra/findings/000" --target tsopt >"$T/r.out" 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "graph replay with the plant: exit $rc, want 1 ($(cat "$T/r.out"))"
"$TSOPT" fuzz --replay "$T/ra/findings/000" --target tsopt >"$T/r.out" 2>&1 || fail "graph replay: $(cat "$T/r.out")"
echo "   replays: mismatch with the plant, pass without"

step "resume: 20 steps, then --resume to 40, make what one run of 40 makes"
export TSOPT_FUZZ_PLANT=relu-abs
F=(--target tsopt --mode graphs --no-optimizer --no-minimize --seed 3)
"$TSOPT" fuzz "${F[@]}" --pairs 40 -o "$T/ra40" --json >"$T/ra40.json" 2>/dev/null || fail "campaign of 40"
"$TSOPT" fuzz "${F[@]}" --pairs 20 -o "$T/rr" >/dev/null 2>&1 || fail "campaign of 20"
[ -s "$T/rr/checkpoint" ] || fail "no checkpoint written"
"$TSOPT" fuzz "${F[@]}" --pairs 40 -o "$T/rr" --json --resume >"$T/rr.json" 2>"$T/rr.err" || fail "resume: $(cat "$T/rr.err")"
"$PY" - "$T/ra40.json" "$T/rr.json" "$T/ra40" "$T/rr" <<'EOF'
import json, os, sys
a, b = (json.loads(open(p).read()) for p in sys.argv[1:3])
for k in ("seconds", "pairs_per_s", "graphs_per_s", "rate"):
    a.pop(k), b.pop(k)
assert a == b and a["findings"] >= 1, (a, b)
fa, fb = (sorted(os.listdir(os.path.join(d, "findings"))) for d in sys.argv[3:5])
assert fa == fb, (fa, fb)
for f in fa:
    x, y = (json.load(open(os.path.join(d, "findings", f, "finding.json"))) for d in sys.argv[3:5])
    assert (x["step"], x["operator"], x["kind"]) == (y["step"], y["operator"], y["kind"]), (x, y)
print("   %d findings, %d graphs, coverage %d entries: the same either way" % (
    a["findings"], a["graphs"], a["coverage"]["entries_reached"]))
EOF
unset TSOPT_FUZZ_PLANT
expect_usage "was made with other options" "$TSOPT" fuzz "${F[@]}" --pairs 40 -o "$T/rr" --resume
expect_usage "holds no campaign to resume" "$TSOPT" fuzz --target tsopt --pairs 4 -o "$T" --resume

if [ $have_ort = 1 ]; then
    step "tools/ort/serve.js: ready line, one reply line per request, EOF ends it"
    printf 'run\t%s\t%s\t%s\nbogus\nrun\t%s\t%s\t%s\n' "$T/a/pairs/000/original.onnx" "$T/a/pairs/000/in" \
        "$T/srv" "$T/nothing.onnx" "$T/a/pairs/000/in" "$T/srv" |
        node "$TSOPT_SRC/tools/ort/serve.js" >"$T/srv.out" 2>"$T/srv.err" || fail "serve.js: $(cat "$T/srv.err")"
    sed 's/^/   /' "$T/srv.out"
    [ "$(wc -l <"$T/srv.out")" -eq 4 ] || fail "serve.js: want 4 lines"
    grep -q "^ready	" "$T/srv.out" && [ "$(sed -n 2p "$T/srv.out")" = ok ] || fail "serve.js: no ready/ok"
    sed -n 3p "$T/srv.out" | grep -q "^error	bad request 'bogus'" || fail "serve.js: bad request not refused"
    sed -n 4p "$T/srv.out" | grep -q "^error	cannot load $T/nothing.onnx" || fail "serve.js: missing model"
    ls "$T/srv"/*.npy >/dev/null || fail "serve.js wrote no output"

    step "campaign against ORT: one server process for all pairs"
    "$TSOPT" fuzz --target ort --pairs 12 --seed 7 --save-pairs 2 -o "$T/o" --json >"$T/o.json" 2>"$T/o.err" ||
        fail "ORT campaign failed: $(cat "$T/o.err")"
    "$PY" - "$T/o.json" "$T/a" "$T/o" <<'EOF'
import json, sys, filecmp
r = json.loads(open(sys.argv[1]).read())
assert r["target"] == "ort" and r["stop"] == "pairs" and r["tested"] >= 8, r
for k in ("000", "001"):   # the same pairs as against tsopt
    assert filecmp.cmp("%s/pairs/%s/variant.onnx" % (sys.argv[2], k), "%s/pairs/%s/variant.onnx" % (sys.argv[3], k), False)
print("   %d tested, %d findings, %.1f pairs/s" % (r["tested"], r["findings"], r["pairs_per_s"]))
EOF
else
    step "campaign against ORT: skipped (no tools/ort/node_modules)"
fi
echo "ok: fuzz"
