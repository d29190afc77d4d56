#!/usr/bin/env bash
# generate, verify and fuzz under mpirun -np 2 against one process
# (docs/distributed.md): the same rule file byte for byte, the same verify
# report (times aside), the same fuzz findings and counts over the same pair
# numbers, a planted bug reported once; libtsopt.so links no MPI.  Skipped
# (77) without mpirun or when tsopt was built without MPI.
set -euo pipefail
: "${TSOPT:?TSOPT not set}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }

# (ldd's output read whole: grep -q closing the pipe early fails it under pipefail)
if [ -f "${TSOPT_LIBRARY:-}" ]; then
    case "$(ldd "$TSOPT_LIBRARY")" in *libmpi*) fail "libtsopt.so links MPI" ;; esac
fi
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (make deps installs OpenMPI)"; exit 77; }
case "$(ldd "$TSOPT")" in *libmpi*) ;; *) echo "SKIP: tsopt built without MPI"; exit 77 ;; esac
# CI runs as root; two processes on however many cores there are, unbound
# (Open MPI binds 2 processes to one core each: on a shared machine one of
# them can be left behind on a busy core)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPI=(mpirun -np 2 --oversubscribe --bind-to none)
# Open MPI's own plugins leak at exit (LeakSanitizer reports libmpi and
# dlclose'd MCA components): under a sanitized build the ranks keep ASan's
# memory checks and leave leak checking to the one-process runs.
if grep -qs '^TSOPT_SANITIZE:BOOL=ON' "${TSOPT_BUILD:-/nonexistent}/CMakeCache.txt"; then
    MPI+=(-x "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
fi

# All files are written under one name in turn (the rule file's header
# names it), so the runs compare byte for byte.
step "generate --max-ops 3: two processes write the file one process writes"
(cd "$T" && "$TSOPT" generate --max-ops 3 --threads 1 -o g.rules >/dev/null 2>"$T/g1.err") ||
    fail "one process: $(cat "$T/g1.err")"
mv "$T/g.rules" "$T/g1.rules"
(cd "$T" && "${MPI[@]}" "$TSOPT" generate --max-ops 3 --threads 1 -o g.rules >"$T/g2.out" 2>"$T/g2.err") ||
    fail "mpirun: $(cat "$T/g2.err")"
cmp "$T/g1.rules" "$T/g.rules" || fail "-np 2 wrote another file than one process"
grep -E "^  rank [01]: " "$T/g2.err" || fail "no per-process work lines"
# every pair is tested by one process: the pair tests evaluate the same
# operators in all; the set-1 replay evaluates a few more (each process
# replays its own part, and a prefix shared across processes once each)
ev() { sed -nE "s/^operators evaluated +([0-9]+) +set 1 replay, ([0-9]+) pair tests.*/\1 \2/p" "$1"; }
read -r s1 t1 <<<"$(ev "$T/g1.err")"
read -r s2 t2 <<<"$(ev "$T/g2.err")"
[ -n "$t1" ] && [ "$t1" = "$t2" ] || fail "pair-test operators: $t1 one process, $t2 under mpirun"
[ "$s2" -ge "$s1" ] || fail "set-1 operators: $s2 under mpirun < $s1 for one process"
[ "$(grep -c '^kept ' "$T/g2.out")" = 1 ] || fail "the result line is printed once: $(cat "$T/g2.out")"
echo "   same $(grep -c '^(' "$T/g.rules" || true) rules: $(cat "$T/g2.out")"

step "verify: the same report (times aside)"
strip_times() { sed -E 's/[0-9]+\.[0-9]+s/Ts/g; s/ [0-9]+ threads( per process)?/ threads/' "$1"; }
rc1=0 rc2=0
"$TSOPT" verify "$T/g1.rules" --timeout 5 >"$T/v1" 2>/dev/null || rc1=$?
"${MPI[@]}" "$TSOPT" verify "$T/g1.rules" --timeout 5 >"$T/v2" 2>"$T/v2.err" || rc2=$?
diff <(strip_times "$T/v1") <(strip_times "$T/v2") || fail "verify reports differ"
[ $((rc1 != 0)) = $((rc2 != 0)) ] || fail "exit $rc1 alone, $rc2 under mpirun"
grep -q "rules checked: largest/smallest" "$T/v2.err" || fail "no per-process work lines: $(cat "$T/v2.err")"
tail -1 "$T/v2"

step "fuzz --pairs 30 with a planted bug: the same findings over the same pairs"
findings() { # pair numbers and kinds of DIR's findings, and the summary's counts
    for f in "$1"/findings/*/finding.json; do
        sed -E 's/.*"index": ([0-9]+), "pair": ([0-9]+),.*"kind": "([a-z]+)", "stage": "([a-z]+)".*/\1 \2 \3 \4/' "$f"
    done
    # (coverage is each process's own: not comparable)
    sed -E 's/"(seconds|pairs_per_s)": [0-9.e+-]+, //g; s/, "processes.*/}/; s/, "coverage": \{.*\}\}/}/' "$1/summary.json"
}
export TSOPT_FUZZ_PLANT=transpose-add
"$TSOPT" fuzz --target tsopt --mode pairs --pairs 30 -o "$T/f1" --json >"$T/f1.json" 2>/dev/null || fail "fuzz alone"
"${MPI[@]}" "$TSOPT" fuzz --target tsopt --mode pairs --pairs 30 -o "$T/f2" --json >"$T/f2.json" 2>"$T/f2.err" ||
    fail "fuzz under mpirun: $(cat "$T/f2.err")"
diff <(findings "$T/f1") <(findings "$T/f2") || fail "findings or counts differ"
[ "$(grep -c tested "$T/f2.json")" = 1 ] || fail "one --json line: $(cat "$T/f2.json")"
grep -q '"processes": 2' "$T/f2/summary.json" || fail "summary lacks the process count"
n=$(ls "$T/f2/findings" | wc -l)
[ "$n" -ge 1 ] || fail "the planted bug was not found in 30 pairs"
echo "   $n findings, pairs $(findings "$T/f2" | head -n "$n" | cut -d' ' -f2 | tr '\n' ' ')"

step "fuzz: a finding both processes make is reported once"
# TSOPT_DIST_FUZZ_OVERLAP (tests only): every process tests every pair, so
# each finding is made twice and the merge must keep one of each
TSOPT_DIST_FUZZ_OVERLAP=1 "${MPI[@]}" "$TSOPT" fuzz --target tsopt --mode pairs --pairs 30 -o "$T/f3" >/dev/null 2>"$T/f3.err" ||
    fail "fuzz with overlap: $(cat "$T/f3.err")"
diff <(findings "$T/f1" | head -n "$n") <(findings "$T/f3" | head -n "$n") || fail "overlapping findings not merged"
[ "$(ls "$T/f3/findings" | wc -l)" = "$n" ] || fail "want $n findings: $(ls "$T/f3/findings")"
grep -q "\"duplicates\": $n," "$T/f3/summary.json" || fail "want $n duplicates: $(cat "$T/f3/summary.json")"
echo "   $n findings made twice, reported once"

step "fuzz --resume under mpirun: 16 steps then 30 find what one run of 30 finds"
export TSOPT_FUZZ_PLANT=transpose-add
"${MPI[@]}" "$TSOPT" fuzz --target tsopt --mode pairs --pairs 16 -o "$T/f5" >/dev/null 2>&1 || fail "fuzz --pairs 16"
"${MPI[@]}" "$TSOPT" fuzz --target tsopt --mode pairs --pairs 30 -o "$T/f5" --resume --json >"$T/f5.json" 2>"$T/f5.err" ||
    fail "resume under mpirun: $(cat "$T/f5.err")"
# the same findings and counts (numbered in the order the two runs merged them)
diff <(findings "$T/f2" | cut -d' ' -f2- | sort) <(findings "$T/f5" | cut -d' ' -f2- | sort) ||
    fail "resumed findings or counts differ"
unset TSOPT_FUZZ_PLANT
echo "   resumed: $(ls "$T/f5/findings" | wc -l) findings, as one run"

step "fuzz: a process that dies is reported and the command fails"
# TSOPT_DIST_FUZZ_DIE (tests only): rank 1's campaign is killed at its start
rc=0
TSOPT_DIST_FUZZ_DIE=1 "${MPI[@]}" "$TSOPT" fuzz --target tsopt --mode pairs --pairs 10 -o "$T/f4" >/dev/null 2>"$T/f4.err" || rc=$?
[ "$rc" = 1 ] || fail "want exit 1 when a process died, got $rc: $(cat "$T/f4.err")"
grep -q "rank 1 died" "$T/f4.err" || fail "no 'rank 1 died' line: $(cat "$T/f4.err")"
grep -q "1 of 2 processes died" "$T/f4.err" || fail "no closing error line: $(cat "$T/f4.err")"
grep -q '"processes_died": 1' "$T/f4/summary.json" || fail "summary: $(cat "$T/f4/summary.json")"
echo "   rank 1 died: reported, summary says so, exit 1"
