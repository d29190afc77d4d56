#!/usr/bin/env bash
# Every rule tsopt ships is proved by tsopt verify: the generated
# rules/taso.rules, the built-in core set tsopt optimize uses by default, and
# rules/fusions.rules (the GELU/LayerNorm spellings the runtime fuses).
set -euo pipefail
: "${TSOPT:?}" "${TSOPT_SRC:?}"
for f in rules/taso.rules rules/core.rules rules/fusions.rules; do
    out=$("$TSOPT" verify "$TSOPT_SRC/$f" --threads 2)
    n=$(grep -c '^(rule' "$TSOPT_SRC/$f")
    echo "$f: $(echo "$out" | tail -1)"
    echo "$out" | grep -qx "proved $n of $n, failed 0, timed out 0"
done
