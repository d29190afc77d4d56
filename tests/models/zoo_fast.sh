#!/usr/bin/env bash
# Every zoo model through the fast runtime against the reference interpreter:
# `tsopt zoo export` at batch 1, `tsopt run --reference` on seeded random
# inputs (saving them), `tsopt run` (fast) on the same inputs, `tsopt compare`.
# The reference interpreter is slow on the big models: ZOO_MODELS="a b"
# runs a subset; ZOO_SKIP="a b" skips some (default: none).  Encoders are
# exported with fewer layers to keep the whole script near 2-3 minutes (the
# layers are identical, so one or two cover the kernels).
set -uo pipefail
: "${TSOPT:?TSOPT not set}"
RTOL=${RTOL:-1e-3}
ATOL=${ATOL:-1e-4}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

names=$("$TSOPT" zoo list | tail -n +2 | awk '{print $1}')
[ -n "$names" ] || { echo "FAIL: tsopt zoo list gave no models"; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

pass=0
failed=()
for name in $names; do
  if [ -n "${ZOO_MODELS:-}" ] && [[ " $ZOO_MODELS " != *" $name "* ]]; then continue; fi
  if [[ " ${ZOO_SKIP:-} " == *" $name "* ]]; then echo "== $name: skipped"; continue; fi
  d=$T/$name
  mkdir -p "$d"
  t0=$(now)
  case $name in
    bert) extra=(--layers 2) ;;
    longformer) extra=(--layers 1) ;;
    *) extra=() ;;
  esac
  if ! "$TSOPT" zoo export "$name" -o "$d/model.onnx" --batch 1 "${extra[@]}" >"$d/export.log" 2>&1; then
    sed 's/^/   /' "$d/export.log" | tail -3; failed+=("$name (export)"); continue
  fi
  if ! "$TSOPT" run "$d/model.onnx" --reference --save-inputs "$d/in" --save-outputs "$d/ref" >"$d/ref.log" 2>&1; then
    sed 's/^/   /' "$d/ref.log" | tail -3; failed+=("$name (reference run)"); continue
  fi
  if ! "$TSOPT" run "$d/model.onnx" --inputs "$d/in" --save-outputs "$d/fast" >"$d/fast.log" 2>&1; then
    sed 's/^/   /' "$d/fast.log" | tail -3; failed+=("$name (fast run)"); continue
  fi
  echo "== $name ($(secs "$t0" "$(now)") s): reference $(grep '^time:' "$d/ref.log" | awk '{print $2}') ms," \
       "fast $(grep '^time:' "$d/fast.log" | awk '{print $2}') ms"
  if "$TSOPT" compare "$d/ref" "$d/fast" --rtol "$RTOL" --atol "$ATOL" >"$d/cmp.log" 2>&1; then
    pass=$((pass + 1))
  else
    sed 's/^/   /' "$d/cmp.log" | head -5; failed+=("$name (compare)")
  fi
done

for f in "${failed[@]}"; do echo "FAIL $f"; done
echo "$pass passed, ${#failed[@]} failed"
[ "${#failed[@]}" -eq 0 ] && [ "$pass" -gt 0 ]
