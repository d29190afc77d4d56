/* tsopt verify: Z3 proofs of a rule file against the operator axioms, and
 * the two checks of the axioms themselves (concrete tensors, redundancy). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli/cli.h"
#include "dist/dist.h"
#include "taso/verify.h"
#include "util/clock.h"

static const char USAGE[] =
    "usage: tsopt verify [RULES] [--timeout S] [--threads N] [--verbose] [--mbqi]\n"
    "                    [--check-axioms [--max-dim N] [--trials N] [--seed S] [--tf-same]]\n"
    "                    [--redundancy [--redundancy-timeout S]] [--axioms]\n"
    "  RULES               prove every rule of the file from the axioms; last line\n"
    "                      'proved P of N, failed F, timed out T' (rules with split0/\n"
    "                      split1 use the split theory, others the split-free one)\n"
    "  --timeout S         Z3 time limit per rule (default 10)\n"
    "  --threads N         Z3 contexts working in parallel (default 1)\n"
    "  --verbose           one line per rule, proved ones too\n"
    "  --keep-proved FILE  also write the rules that were proved to FILE\n"
    "  --mbqi              when E-matching gives up, retry with model-based\n"
    "                      instantiation (more proofs; wrong rules use the timeout)\n"
    "  --check-axioms      evaluate both sides of every axiom on concrete tensors:\n"
    "                      all shapes with dims 1..N (default 3), all parameters;\n"
    "                      --tf-same reads 'same' as TensorFlow's (asymmetric) padding;\n"
    "                      --only A,B checks only the axioms named (O1,O2,...)\n"
    "  --redundancy        try to prove each axiom from the others (informational)\n"
    "  --axioms            list the axioms\n"
    "exit status: 0 when every rule is proved and every axiom check passes\n";

/* Whether axiom `name` is in the comma-separated list (NULL: all). */
static bool listed(const char *list, const char *name)
{
    if (!list) return true;
    size_t n = strlen(name);
    for (const char *q = list; q; q = strchr(q, ',') ? strchr(q, ',') + 1 : NULL)
        if (!strncmp(q, name, n) && (q[n] == ',' || !q[n])) return true;
    return false;
}

static bool check_axioms(ts_axiom_check_opts o, const char *only)
{
    uint64_t seed = o.seed;
    long total = 0, skipped = 0, bad = 0;
    int checked = 0;
    double t0 = ts_clock_s();
    for (int i = 0; i < ts_axioms_count(); i++) {
        const ts_axiom *ax = ts_axiom_at(i);
        if (!listed(only, ax->name)) continue;
        checked++;
        ts_axiom_check_stats st;
        ts_error err = {0};
        double t1 = ts_clock_s();
        o.seed = seed + (uint64_t)i;
        if (ts_axiom_check(ax, &o, &st, &err)) {
            cli_error_from(CLI_FAIL, &err);
            bad++;
            continue;
        }
        total += st.obligations;
        skipped += st.skipped;
        printf("%-4s %-8s %7ld obligations %7ld skipped  %6.2fs  %s\n", ax->name, st.failures ? "FAILED" : "ok",
               st.obligations, st.skipped, ts_clock_s() - t1, ax->comment);
        if (st.failures) {
            printf("     %ld failing; first: %s\n", st.failures, st.first_failure);
            bad++;
        }
        fflush(stdout);
    }
    printf("axiom check: %d axioms, %ld obligations (%d random inputs each, dims 1..%d%s), %ld skipped, %ld failed, "
           "%.1fs\n",
           checked, total, o.trials, o.max_dim, o.tf_same ? ", TF-style same" : "", skipped, bad,
           ts_clock_s() - t0);
    return bad == 0;
}

static bool redundancy(unsigned timeout_ms)
{
    ts_error err = {0};
    ts_prover *p = ts_prover_new(&err);
    if (!p) {
        cli_error_from(CLI_FAIL, &err);
        return false;
    }
    int derivable = 0;
    double t0 = ts_clock_s();
    for (int i = 0; i < ts_axioms_count(); i++) {
        const ts_axiom *ax = ts_axiom_at(i);
        char why[128] = "";
        double t1 = ts_clock_s();
        /* Redundant only if derivable in every theory the axiom belongs to
         * (from that theory's other axioms): an axiom of both theories
         * derivable only with A28 or only with C1 is still needed.
         * E-matching first (fast, finds the short derivations), then MBQI,
         * which can show independence with a counter-model. */
        ts_proof r = TS_PROOF_PROVED;
        const char *in = "";
        for (unsigned th = TS_THEORY_SPLIT; th <= TS_THEORY_SPLIT_FREE && r == TS_PROOF_PROVED; th <<= 1) {
            if (!(ts_axiom_theories(i) & th)) continue;
            r = ts_prover_prove_text_in(p, th, ax->lhs, ax->rhs, i, false, timeout_ms, why, sizeof why);
            if (r != TS_PROOF_PROVED)
                r = ts_prover_prove_text_in(p, th, ax->lhs, ax->rhs, i, true, timeout_ms, why, sizeof why);
            if (r != TS_PROOF_PROVED) in = th == TS_THEORY_SPLIT ? " (split theory)" : " (split-free theory)";
        }
        const char *what = r == TS_PROOF_PROVED ? "derivable from the others"
                           : r == TS_PROOF_TIMEOUT ? "not derived (timed out)"
                                                   : "not derived";
        if (r == TS_PROOF_PROVED) derivable++;
        printf("%-4s %-26s %6.2fs  %s%s\n", ax->name, what, ts_clock_s() - t1, r == TS_PROOF_PROVED ? "" : why,
               r == TS_PROOF_PROVED ? "" : in);
        fflush(stdout);
    }
    printf("redundancy: %d of %d axioms derivable from the others, %.1fs\n", derivable, ts_axioms_count(),
           ts_clock_s() - t0);
    ts_prover_free(p);
    return true;
}

static const char *proof_name(ts_proof r)
{
    return r == TS_PROOF_PROVED ? "proved" : r == TS_PROOF_TIMEOUT ? "timed out" : "failed";
}

/* Writes the proved subset: what tsopt ships must be proved (rules/taso.rules). */
static bool write_proved(const char *src, const char *dst, const ts_rule *rules, const ts_rule_result *res, int n)
{
    ts_rule *keep = malloc(sizeof *keep * ((size_t)n + 1)); /* shallow copies: only read */
    int k = 0;
    if (!keep) return cli_error(CLI_FAIL, "out of memory") == CLI_OK;
    for (int i = 0; i < n; i++)
        if (res[i].proof == TS_PROOF_PROVED) keep[k++] = rules[i];
    char comment[1200];
    snprintf(comment, sizeof comment, "the %d rules of %s that tsopt verify proved (commands: docs/taso.md)", k, src);
    ts_error err = {0};
    ts_status st = ts_rules_write(dst, keep, k, comment, &err);
    free(keep);
    if (st) return cli_error_from(CLI_USAGE, &err) == CLI_OK;
    printf("wrote %d proved rules to %s\n", k, dst);
    return true;
}

static int verify_file(const char *path, const ts_verify_opts *o, bool verbose, const char *keep_path)
{
    ts_rule *rules = NULL;
    int n = 0;
    ts_error err = {0};
    if (ts_rules_parse_file(path, &rules, &n, &err)) return cli_error_from(CLI_USAGE, &err);
    ts_rule_result *res = calloc((size_t)n + 1, sizeof *res);
    if (!res) {
        ts_rules_free(rules, n);
        return cli_error(CLI_FAIL, "out of memory");
    }
    double t0 = ts_clock_s();
    /* In chunks, for the progress on stderr: a chunk of a few rules per
     * thread keeps the wait for a chunk's slowest rule short, and the
     * prover set-up per chunk (~ms) small beside it. */
    int chunk = o->threads * 64 > n / 20 ? o->threads * 64 : n / 20;
    /* under mpirun the chunks are dealt out to the processes (src/dist/):
     * smaller ones, so the last keeps no process waiting long */
    int procs = ts_dist_start(), done = 0;
    if (procs > 1) chunk = o->threads * 16 > n / (40 * procs) ? o->threads * 16 : n / (40 * procs);
    char what[32];
    snprintf(what, sizeof what, procs > 1 ? "verify rank %d" : "verify", ts_dist_rank());
    cli_progress pr;
    cli_progress_start(&pr, what, "rules", n);
    ts_dist_counter *next = ts_dist_counter_open();
    for (long k; (k = ts_dist_counter_next(next)) < (n + chunk - 1) / chunk;) {
        int i = (int)k * chunk, m = n - i < chunk ? n - i : chunk;
        if (ts_verify_rules(rules + i, m, o, res + i, &err)) {
            if (procs > 1) ts_dist_abort(cli_error_from(CLI_FAIL, &err)); /* the others wait in a collective */
            free(res);
            ts_rules_free(rules, n);
            return cli_error_from(CLI_FAIL, &err);
        }
        cli_progress_update(&pr, done += m);
    }
    ts_dist_counter_close(next);
    cli_progress_end(&pr, done);
    ts_dist_report_work(stderr, "rules checked", done, ts_clock_s() - t0);
    /* results in rule order on the first process, which reports */
    ts_dist_or_to_root(res, (size_t)n * sizeof *res);
    if (ts_dist_rank() != 0) {
        free(res);
        ts_rules_free(rules, n);
        return CLI_OK;
    }
    int cnt[3] = {0};
    double slowest = 0;
    for (int i = 0; i < n; i++) {
        cnt[res[i].proof]++;
        if (res[i].secs > slowest) slowest = res[i].secs;
        if (verbose || res[i].proof != TS_PROOF_PROVED)
            printf("%s (line %d): %s in %.2fs%s%s\n", rules[i].name, rules[i].line, proof_name(res[i].proof),
                   res[i].secs, res[i].why[0] ? ": " : "", res[i].why);
    }
    printf("%d rules, %d axioms, %.1fs (slowest rule %.2fs, timeout %.0fs, %d threads%s)\n", n, ts_axioms_count(),
           ts_clock_s() - t0, slowest, o->timeout_ms / 1000.0, o->threads, procs > 1 ? " per process" : "");
    printf("proved %d of %d, failed %d, timed out %d\n", cnt[TS_PROOF_PROVED], n, cnt[TS_PROOF_FAILED],
           cnt[TS_PROOF_TIMEOUT]);
    bool wrote = !keep_path || write_proved(path, keep_path, rules, res, n);
    free(res);
    ts_rules_free(rules, n);
    if (!wrote) return CLI_USAGE;
    return cnt[TS_PROOF_PROVED] == n ? CLI_OK : CLI_FAIL;
}

int cli_verify(int argc, char **argv)
{
    const char *path = NULL, *keep_path = NULL, *only = NULL, *val;
    ts_verify_opts o = {.timeout_ms = 10000, .threads = 1};
    bool verbose = false, do_check = false, do_red = false, list = false, tf_same = false;
    long max_dim = 3, trials = 2, seed = 1;
    double red_timeout = 10;
    for (int i = 1; i < argc; i++) {
        double d;
        long v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            return CLI_OK;
        } else if (cli_opt(argc, argv, &i, "--keep-proved", &val)) {
            if (!val) return cli_error(CLI_USAGE, "verify: --keep-proved needs a file name");
            keep_path = val;
        } else if (cli_opt(argc, argv, &i, "--only", &val)) {
            if (!val) return cli_error(CLI_USAGE, "verify: --only needs axiom names (O1,O2)");
            only = val;
        } else if (cli_opt(argc, argv, &i, "--timeout", &val)) {
            if (!val || !cli_parse_double("--timeout", val, &d) || d <= 0 || d > 86400)
                return cli_error(CLI_USAGE, "verify: --timeout expects seconds in (0, 86400]");
            o.timeout_ms = (unsigned)(d * 1000);
        } else if (cli_opt(argc, argv, &i, "--redundancy-timeout", &val)) {
            if (!val || !cli_parse_double("--redundancy-timeout", val, &red_timeout) || red_timeout <= 0)
                return cli_error(CLI_USAGE, "verify: --redundancy-timeout expects positive seconds");
        } else if (cli_opt(argc, argv, &i, "--threads", &val)) {
            if (!val || !cli_parse_int("--threads", val, 1, 256, &v)) return CLI_USAGE;
            o.threads = (int)v;
        } else if (cli_opt(argc, argv, &i, "--max-dim", &val)) {
            if (!val || !cli_parse_int("--max-dim", val, 1, 6, &max_dim)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--trials", &val)) {
            if (!val || !cli_parse_int("--trials", val, 1, 100, &trials)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--seed", &val)) {
            if (!val || !cli_parse_int("--seed", val, 0, 1L << 30, &seed)) return CLI_USAGE;
        } else if (!strcmp(argv[i], "--verbose")) {
            verbose = true;
        } else if (!strcmp(argv[i], "--check-axioms")) {
            do_check = true;
        } else if (!strcmp(argv[i], "--mbqi")) {
            o.mbqi = true;
        } else if (!strcmp(argv[i], "--tf-same")) {
            tf_same = true;
        } else if (!strcmp(argv[i], "--redundancy")) {
            do_red = true;
        } else if (!strcmp(argv[i], "--axioms")) {
            list = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_error(CLI_USAGE, "verify: unknown option '%s'", argv[i]);
        } else if (path) {
            return cli_error(CLI_USAGE, "verify: more than one rule file given ('%s')", argv[i]);
        } else {
            path = argv[i];
        }
    }
    if (!path && !do_check && !do_red && !list) {
        fputs(USAGE, stderr);
        return CLI_USAGE;
    }
    int rc = CLI_OK;
    if (list)
        for (int i = 0; i < ts_axioms_count(); i++) {
            const ts_axiom *ax = ts_axiom_at(i);
            printf("%-4s %s = %s    ; %s%s\n", ax->name, ax->lhs, ax->rhs, ax->comment,
                   ts_axiom_theories(i) == TS_THEORY_SPLIT          ? " [split theory only]"
                   : ts_axiom_theories(i) == TS_THEORY_SPLIT_FREE ? " [split-free theory only]"
                                                                    : "");
        }
    ts_axiom_check_opts co = {(int)max_dim, (int)trials, (uint64_t)seed, tf_same};
    if (do_check && !check_axioms(co, only)) rc = CLI_FAIL;
    if (do_red && !redundancy((unsigned)(red_timeout * 1000))) rc = CLI_FAIL;
    if (path) {
        int r = verify_file(path, &o, verbose, keep_path);
        if (r != CLI_OK) rc = r;
    }
    return rc;
}
