#!/usr/bin/env bash
# The demo: a torchvision ResNet-18 (random weights) run by tsopt and by ONNX
# Runtime on the same inputs, outputs compared; then a zoo model optimized and
# timed before/after. Run after `make build` (`make demo` does both).
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

# The optimizer: graph passes and the search over every source (TASO's
# proved rules, PET, EinNet), the best graph checked against the original,
# both timed alternately, and the measured decision (docs/optimize.md).
# NASNet-A: the model where the search gains most steadily on this runtime
# (BENCHMARKS.md, "Optimizer": 1.07x and 1.12x in two runs; NasRNN's gain
# was inside the noise); ZOO=nasrnn, inception_v3 etc. work too.
ZOO=${ZOO:-nasnet_a}
step "tsopt zoo export $ZOO, then tsopt optimize (20 s search)"
"$TSOPT" zoo export "$ZOO" -o "$D/$ZOO.onnx"
"$TSOPT" optimize "$D/$ZOO.onnx" -o "$D/$ZOO.opt.onnx" --time-limit 20 --report "$D/$ZOO.md" --json >"$D/$ZOO.json"
"$PY" - "$D/$ZOO.json" <<'P'
import json, sys
r = json.load(open(sys.argv[1]))
print("written:   %s graph -- %s" % (r["written"], r["reason"]))
print("predicted: %.3f -> %.3f ms (cost model, search's best graph)" % (r["cost_before_ms"], r["cost_after_ms"]))
if r["latency_before_ms"] > 0 and r["latency_after_ms"] > 0:
    print("measured:  %.3f -> %.3f ms (median, in the optimizer, alternating)" % (r["latency_before_ms"], r["latency_after_ms"]))
else:
    print("measured:  not measured in the optimizer (%s)" % ("machine busy" if r["machine_busy"] else "no time left"))
print("applied:   %s" % ", ".join("%s %d" % kv for kv in r["applied"].items()))
print("check:     largest scaled error %.3g (<= 1: within rtol 1e-3, atol 1e-4)" % r["check"]["max_scaled_error"])
print("search:    %.1f s (%s), %d graphs explored, peak %.0f MiB" % (r["search_s"], r["stop"], r["explored"], r["peak_rss_mb"]))
P

step "outputs of the written model vs the original (tsopt, then ONNX Runtime on the written file)"
rm -rf "$D/zin" "$D/za" "$D/zb" "$D/zort"
"$TSOPT" run "$D/$ZOO.onnx" --save-inputs "$D/zin" --save-outputs "$D/za" >/dev/null
"$TSOPT" run "$D/$ZOO.opt.onnx" --inputs "$D/zin" --save-outputs "$D/zb" >/dev/null
"$TSOPT" compare "$D/za" "$D/zb"
node tools/ort/run.js "$D/$ZOO.opt.onnx" --inputs "$D/zin" --save-outputs "$D/zort" >/dev/null
"$TSOPT" compare "$D/za" "$D/zort"

step "latency before / after (tsopt bench, 3 rounds alternating the two files)"
# Each bench reports its median run and its quiet median (the runs of its
# undisturbed 50 ms rounds: docs/runtime.md); the summary is the median
# over the rounds, next to what the optimizer predicted.
for round in 1 2 3; do
  if [ $round = 2 ]; then order="$D/$ZOO.opt.onnx $D/$ZOO.onnx"; else order="$D/$ZOO.onnx $D/$ZOO.opt.onnx"; fi
  for m in $order; do
    "$TSOPT" bench "$m" --iters 20 --min-time 1 --json >"$D/bench.$round.$(basename "$m" .onnx).json"
  done
done
"$PY" - "$D" "$ZOO" <<'P'
import json, os, statistics, sys
d, zoo = sys.argv[1], sys.argv[2]
r = json.load(open(os.path.join(d, zoo + ".json")))
med, quiet, dist, tot = {"before": [], "after": []}, {"before": [], "after": []}, 0, 0
names = {"before": zoo, "after": zoo + ".opt"}
for k in (1, 2, 3):
    for which in (("after", "before") if k == 2 else ("before", "after")):  # the order they ran in
        b = json.load(open(os.path.join(d, "bench.%d.%s.json" % (k, names[which]))))
        med[which].append(b["median_ms"])
        if b.get("quiet_median_ms") is not None:
            quiet[which].append(b["quiet_median_ms"])
        dist += b["disturbed_rounds"]
        tot += b["rounds"]
        print("round %d  %-22s median %.3f ms, quiet median %s" % (
            k, names[which] + ".onnx", b["median_ms"],
            "%.3f ms" % b["quiet_median_ms"] if b.get("quiet_median_ms") is not None else "none (all rounds disturbed)"))
use = quiet if quiet["before"] and quiet["after"] else med
b0, b1 = statistics.median(use["before"]), statistics.median(use["after"])
kept = r["written"] == "original"
p0, p1 = r["cost_before_ms"], r["cost_before_ms"] if kept else r["cost_after_ms"]
print()
print("predicted (cost model):  %.3f -> %.3f ms (original -> written file%s)" % (
    p0, p1, "; the search's best graph: %.3f ms" % r["cost_after_ms"] if kept else ""))
print("measured (tsopt bench, %s): %.3f -> %.3f ms, x%.3f; prediction error %+.0f%% / %+.0f%% "
      "(%d of %d bench rounds disturbed)" % ("quiet medians" if use is quiet else "medians, every round disturbed",
                                            b0, b1, b0 / b1, 100 * (p0 / b0 - 1), 100 * (p1 / b1 - 1), dist, tot))
if kept:
    print("the optimizer kept the original: both files hold the same graph, so the difference is noise")
P
