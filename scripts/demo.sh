#!/usr/bin/env bash
# The demo: a torchvision ResNet-18 (random weights) run by tsopt and by ONNX
# Runtime on the same inputs, outputs compared; then a zoo model optimized for
# ONNX Runtime and one for tsopt's runtime, each checked and timed before/after. Run after `make build` (`make demo` does both).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=/usr/bin/python3   # Debian's python: python3-torch lives there
TSOPT=${TSOPT:-build/tsopt}   # TSOPT=, DEMO_DIR= override (another build, another place)
D=${DEMO_DIR:-build/demo}
MODEL=$D/resnet18.onnx

[ -x "$TSOPT" ] || { echo "demo: $TSOPT not built; run 'make build'" >&2; exit 1; }
mkdir -p "$D"

step() { printf '\n== %s\n' "$*"; }

step "export torchvision resnet18 (random weights, opset 13) -> $MODEL"
if [ -f "$MODEL" ]; then
  echo "(already there)"
else
  "$PY" tools/export_torchvision.py resnet18 "$MODEL" --opset 13
fi

step "tsopt info"
"$TSOPT" info "$MODEL"

step "tsopt run (random inputs saved to $D/in)"
rm -rf "$D/in" "$D/out_tsopt" "$D/out_ort"
"$TSOPT" run "$MODEL" --save-inputs "$D/in" --save-outputs "$D/out_tsopt"

step "ONNX Runtime on the same inputs"
node tools/ort/run.js "$MODEL" --inputs "$D/in" --save-outputs "$D/out_ort"

step "tsopt compare tsopt vs ONNX Runtime"
"$TSOPT" compare "$D/out_tsopt" "$D/out_ort"

# Prints what `tsopt optimize --json` decided: written graph, predicted and
# measured latency, rewrites, check, search.
summary() {
  "$PY" - "$1" <<'P'
import json, sys
r = json.load(open(sys.argv[1]))
eng = "ONNX Runtime %s" % r["ort_version"] if r["target"] == "ort" else "tsopt"
print("written:   %s graph -- %s" % (r["written"], r["reason"]))
print("predicted: %.3f -> %.3f ms (cost model for %s, search's best graph)" % (r["cost_before_ms"], r["cost_after_ms"], eng))
if r["latency_before_ms"] > 0 and r["latency_after_ms"] > 0:
    print("measured:  %.3f -> %.3f ms (median in %s, in the optimizer, alternating)" % (
        r["latency_before_ms"], r["latency_after_ms"], eng))
else:
    print("measured:  not measured in the optimizer (%s)" % ("timing off" if "timing off" in r["reason"] else
                                                            "machine busy" if r["machine_busy"] else "no time left"))
print("rewrites:  %s" % (", ".join("%s x%d" % kv for kv in r["rewrites"].items()) or "none"))
print("check:     largest scaled error %.3g (<= 1: within rtol 1e-3, atol 1e-4)" % r["check"]["max_scaled_error"])
print("search:    %.1f s (%s), %d graphs explored, peak %.0f MiB" % (r["search_s"], r["stop"], r["explored"], r["peak_rss_mb"]))
P
}

# Outputs of $D/$1.opt.onnx against $D/$1.onnx on the same random inputs in
# tsopt (and in ONNX Runtime on the written file when $2 is "ort").
outputs() {
  rm -rf "$D/zin" "$D/za" "$D/zb" "$D/zort"
  "$TSOPT" run "$D/$1.onnx" --save-inputs "$D/zin" --save-outputs "$D/za" >/dev/null
  "$TSOPT" run "$D/$1.opt.onnx" --inputs "$D/zin" --save-outputs "$D/zb" >/dev/null
  "$TSOPT" compare "$D/za" "$D/zb"
  if [ "${2:-}" = ort ]; then
    node tools/ort/run.js "$D/$1.opt.onnx" --inputs "$D/zin" --save-outputs "$D/zort" >/dev/null
    "$TSOPT" compare "$D/za" "$D/zort"
  fi
}

# Latency of $D/$1.onnx and $D/$1.opt.onnx in tsopt's runtime. One process
# times both files in alternating 50 ms pair rounds, so both see the same
# machine (separate processes on a shared VM differ by up to 20% on the same
# file: docs/runtime.md); each model's quiet median keeps the undisturbed
# pairs only. The prediction is shown where the optimizer's cost model was
# tsopt's (--target tsopt), not ONNX Runtime's.
tsbench() {
  "$TSOPT" bench "$D/$1.onnx" --against "$D/$1.opt.onnx" --iters 20 --min-time 2 --json >"$D/$1.bench.json"
  "$PY" - "$D" "$1" <<'P'
import json, os, sys
d, zoo = sys.argv[1], sys.argv[2]
r = json.load(open(os.path.join(d, zoo + ".json")))
b = json.load(open(os.path.join(d, zoo + ".bench.json")))
quiet = b.get("quiet_speedup") is not None
b0 = b["quiet_median_ms"] if quiet else b["median_ms"]
b1 = b["against"]["quiet_median_ms"] if quiet else b["against"]["median_ms"]
print("%d pair rounds, %d undisturbed; per-round ratio before/after %.3f-%.3f (middle half %.3f-%.3f)" % (
    b["pair_rounds"], b["quiet_pair_rounds"], b["ratio_min"], b["ratio_max"], b["ratio_q1"], b["ratio_q3"]))
kept = r["written"] == "original"
p0, p1 = r["cost_before_ms"], r["cost_before_ms"] if kept else r["cost_after_ms"]
print()
if r["target"] == "tsopt":
    print("predicted (cost model):  %.3f -> %.3f ms (original -> written file%s)" % (
        p0, p1, "; the search's best graph: %.3f ms" % r["cost_after_ms"] if kept else ""))
print("measured (tsopt bench --against, %s): %.3f -> %.3f ms, x%.3f%s" % (
    "quiet medians" if quiet else "medians, every round disturbed", b0, b1, b0 / b1,
    "; prediction error %+.0f%% / %+.0f%%" % (100 * (p0 / b0 - 1), 100 * (p1 / b1 - 1)) if r["target"] == "tsopt" else
    " (optimized for ONNX Runtime: its rewrites need not pay here)"))
if kept:
    print("the optimizer kept the original: both files hold the same graph, so the difference is noise")
P
}

# The optimizer, for the engine the model will run on (docs/optimize.md,
# "Targets"): with --target ort every candidate is costed in ONNX Runtime
# (regions timed once, cached), the best graph is checked against the
# original (tsopt, then ONNX Runtime on the files as written), and original
# and result are timed alternately in one ONNX Runtime process to decide.
# NasRNN: its unrolled steps share weights, and the MatMul merges tsopt's
# proved rules find run ~1.5x faster in ONNX Runtime (BENCHMARKS.md,
# "Optimized for ONNX Runtime"); ZOO=, TARGET=tsopt change the model and engine.
ZOO=${ZOO:-nasrnn}
TARGET=${TARGET:-ort}
step "tsopt zoo export $ZOO, then tsopt optimize --target $TARGET (30 s search)"
"$TSOPT" zoo export "$ZOO" -o "$D/$ZOO.onnx"
"$TSOPT" optimize "$D/$ZOO.onnx" -o "$D/$ZOO.opt.onnx" --target "$TARGET" --time-limit 30 --report "$D/$ZOO.md" \
    --json >"$D/$ZOO.json"
summary "$D/$ZOO.json"

step "outputs of the written model vs the original (tsopt, then ONNX Runtime on the written file)"
outputs "$ZOO" ort

step "latency before / after in ONNX Runtime (both files in one ONNX Runtime process, 7 alternating rounds, 3 processes)"
for k in 1 2 3; do
  printf 'pair\t%s\t%s\t-\t%s\t7\t200\n' "$D/$ZOO.onnx" "$D/$ZOO.opt.onnx" "$(nproc)" | node tools/ort/serve.js | tail -1
done | awk -F'\t' '$1 == "ok" { r = $2 / $3; printf "process %d: median %.3f -> %.3f ms, x%.3f\n", ++n, $2, $3, r }'

step "latency before / after in tsopt (tsopt bench --against: both files in one process, alternating rounds)"
tsbench "$ZOO"

# Then tsopt's own runtime (--target tsopt, the default): Longformer's
# attention band, built from Gathers in the exported graph, is derived by
# EinNet as a blocked G2BMM (and sibling MatMuls merged); tsopt runs it
# x1.1-1.3 faster (BENCHMARKS.md, "EinNet alone"; 12-07 at load 8: x1.30,
# x1.14, x1.24 in three bench processes). The optimizer writes the result only
# when it measures faster by 3% in alternating rounds; on a busy machine it
# cannot measure and keeps the original, and the demo then writes the checked
# result on the cost model alone (--no-timing) and measures it below.
# TSOPT_ZOO= changes the model.
TZOO=${TSOPT_ZOO:-longformer}
step "tsopt zoo export $TZOO, then tsopt optimize --target tsopt (30 s search)"
"$TSOPT" zoo export "$TZOO" -o "$D/$TZOO.onnx"
"$TSOPT" optimize "$D/$TZOO.onnx" -o "$D/$TZOO.opt.onnx" --target tsopt --time-limit 30 --report "$D/$TZOO.md" \
    --json >"$D/$TZOO.json"
summary "$D/$TZOO.json"
if "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(r["written"] != "original" or r["latency_before_ms"] > 0)' \
    "$D/$TZOO.json"; then
  step "not measured in the optimizer: the checked result written on the cost model alone (--no-timing), measured below"
  "$TSOPT" optimize "$D/$TZOO.onnx" -o "$D/$TZOO.opt.onnx" --target tsopt --time-limit 30 --no-timing \
      --report "$D/$TZOO.md" --json >"$D/$TZOO.json"
  summary "$D/$TZOO.json"
fi

step "outputs of the written model vs the original (tsopt)"
outputs "$TZOO"

step "latency before / after in tsopt (tsopt bench --against: both files in one process, alternating rounds)"
tsbench "$TZOO"
