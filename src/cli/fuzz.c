/* tsopt fuzz: argument parsing, progress and printing around the POLYJUICE
 * campaign (src/fuzz/, docs/fuzz.md); --replay checks a finding's folder
 * again. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "dist/dist.h"
#include "fuzz/fuzz.h"
#include "util/clock.h"

static const char USAGE[] =
    "usage: tsopt fuzz --target tsopt|ort [--time S] [--seed N] [--save-pairs K] -o DIR [--json]\n"
    "                  [--pairs N] [--max-findings N] [--no-minimize] [--no-optimizer] [--eop-cc CC]\n"
    "                  [--mode both|pairs|graphs] [--resume]\n"
    "       tsopt fuzz --replay FOLDER [--target tsopt|ort] [--eop-cc CC]\n"
    "  POLYJUICE: random graphs saturated with proved rewrite rules give pairs of equivalent graphs,\n"
    "  the most simplified and the most complex; the target runs both on the same inputs and\n"
    "  outputs that differ are a mis-compilation, minimized into DIR/findings/NNN.\n"
    "  --target T        tsopt (its runtime, and its optimizer on the variant) or ort (ONNX Runtime,\n"
    "                    one node process: tools/ort/serve.js, or $TSOPT_ORT_SERVE)\n"
    "  --time S          seconds to fuzz (default 60)\n"
    "  --seed N          campaign seed (default 1): the same pairs in the same order\n"
    "  --save-pairs K    write the first K tested pairs to DIR/pairs/NNN/{original,variant}.onnx\n"
    "  -o DIR            output folder (created; must not hold an earlier campaign)\n"
    "  --json            print one JSON object: tested, findings, rate, pairs_per_s, stop, ...\n"
    "  --pairs N         stop after N steps (a pair and/or a runtime seed; with --time: whichever first)\n"
    "  --max-findings N  stop after N findings\n"
    "  --no-minimize     write findings as found, without delta debugging\n"
    "  --no-optimizer    tsopt target: the runtime only\n"
    "  --mode M          tsopt target: what each step makes -- a POLYJUICE pair and a runtime seed graph\n"
    "                    (both, the default), or only one; a runtime seed is a graph over the runtime's\n"
    "                    kernels checked against the float64 reference interpreter and the optimizer\n"
    "  --eop-cc CC       tsopt target: the C compiler of the optimizer's eOperators: tcc (default when\n"
    "                    installed: fast to compile), system ($CC, else cc: what tsopt optimize uses) or a\n"
    "                    command; one pair in 32 (by its seed) uses the system compiler whatever is given\n"
    "  --resume          continue the campaign in DIR from its checkpoint (DIR/checkpoint, written every\n"
    "                    2 s and at the end): the same command with --resume tests the steps an\n"
    "                    uninterrupted run would; --time, --pairs and --max-findings count the whole campaign\n"
    "  --replay FOLDER   run a finding's (or saved pair's) folder on the target again:\n"
    "                    exit 0 when the outputs agree now, 1 while the finding holds\n";

static volatile int stop_flag;

static void on_sigint(int sig)
{
    if (stop_flag) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    stop_flag = 1;
}

/* Progress in the manner of progress.c: a line redrawn in place on a
 * terminal, else a plain line at every tenth of the budget. */
typedef struct fuzz_progress {
    bool tty;
    double time_s;
    long max_pairs;
    double last_ms;
    int tenth;
} fuzz_progress;

static void progress(void *ctx, const ts_fuzz_stats *st, double el)
{
    fuzz_progress *p = ctx;
    double frac = p->time_s > 0 ? el / p->time_s : 0;
    if (p->max_pairs > 0 && (double)st->generated / (double)p->max_pairs > frac)
        frac = (double)st->generated / (double)p->max_pairs;
    if (frac > 1) frac = 1;
    double rate = el > 0 ? (double)st->generated / el : 0;
    if (p->tty) {
        double now = ts_clock_ms();
        if (now - p->last_ms < 100) return;
        p->last_ms = now;
        char bar[32];
        int full = (int)(30 * frac);
        for (int i = 0; i < 30; i++) bar[i] = i < full ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\rfuzz [%s] %.1f s  %ld pairs (%.1f/s)  %ld findings ", bar, el, st->generated, rate,
                st->findings);
    } else {
        int tenth = (int)(10 * frac);
        if (tenth <= p->tenth) return;
        p->tenth = tenth;
        fprintf(stderr, "fuzz: %d%%, %.1f s, %ld pairs (%.1f/s), %ld tested, %ld findings\n", tenth * 10, el,
                st->generated, rate, st->tested, st->findings);
    }
    fflush(stderr);
}

static int replay(const char *folder, ts_fuzz_target_kind kind, const char *eop_cc)
{
    ts_fuzz_target_opts to = {.kind = kind, .tol = ts_fuzz_tol_default, .optimizer = true, .opt_budget = 2,
                              .eop_cc = eop_cc, .eop_system_every = 32};
    to.plant = getenv("TSOPT_FUZZ_PLANT");
    if (to.plant && !*to.plant) to.plant = NULL;
    struct stat sb;
    if (stat(folder, &sb) || !S_ISDIR(sb.st_mode)) return cli_error(CLI_USAGE, "--replay: no such folder (%s)", folder);
    ts_fuzz_target *t = NULL;
    ts_error err = {0};
    ts_fuzz_verdict v;
    if (ts_fuzz_target_open(&to, &t, &err)) return cli_error_from(err.code == TS_ERR_INVALID ? CLI_USAGE : CLI_FAIL, &err);
    ts_status st = ts_fuzz_replay(t, folder, &v, &err);
    ts_fuzz_target_close(t);
    if (st) return cli_error_from(st == TS_ERR_NOMEM ? CLI_FAIL : CLI_USAGE, &err);
    if (v.kind == TS_FUZZ_PASS) printf("replay: %s: pass (the outputs agree)\n", folder);
    else printf("replay: %s: %s at stage %s: %s%s%s\n", folder, ts_fuzz_kind_name(v.kind), v.stage, v.what,
                v.wrong[0] ? "; wrong: " : "", v.wrong);
    return v.kind == TS_FUZZ_MISMATCH || v.kind == TS_FUZZ_ERROR ? CLI_FAIL : CLI_OK;
}

int cli_fuzz(int argc, char **argv)
{
    ts_fuzz_opts o;
    ts_fuzz_opts_default(&o);
    const char *v, *target = NULL, *replay_dir = NULL;
    bool json = false;
    long lv;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            return CLI_OK;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--no-minimize")) {
            o.no_minimize = true;
        } else if (!strcmp(argv[i], "--resume")) {
            o.resume = true;
        } else if (!strcmp(argv[i], "--no-optimizer")) {
            o.target.optimizer = false;
        } else if (cli_opt(argc, argv, &i, "--target", &v)) {
            if (!v) return CLI_USAGE;
            if (strcmp(v, "tsopt") && strcmp(v, "ort"))
                return cli_error(CLI_USAGE, "fuzz: --target: expected 'tsopt' or 'ort', got '%s'", v);
            target = v;
        } else if (cli_opt(argc, argv, &i, "--time", &v)) {
            if (!v || !cli_parse_double("--time", v, &o.time_s)) return CLI_USAGE;
            if (!(o.time_s > 0 && o.time_s <= 1e7))
                return cli_error(CLI_USAGE, "fuzz: --time: expected seconds > 0, got '%s'", v);
        } else if (cli_opt(argc, argv, &i, "--seed", &v)) {
            if (!v || !cli_parse_int("--seed", v, 0, 0x7fffffff, &lv)) return CLI_USAGE;
            o.seed = (uint64_t)lv;
        } else if (cli_opt(argc, argv, &i, "--save-pairs", &v)) {
            if (!v || !cli_parse_int("--save-pairs", v, 0, 1000000, &lv)) return CLI_USAGE;
            o.save_pairs = (int)lv;
        } else if (cli_opt(argc, argv, &i, "--pairs", &v)) {
            if (!v || !cli_parse_int("--pairs", v, 1, 1000000000, &lv)) return CLI_USAGE;
            o.max_pairs = lv;
        } else if (cli_opt(argc, argv, &i, "--max-findings", &v)) {
            if (!v || !cli_parse_int("--max-findings", v, 1, 1000000000, &lv)) return CLI_USAGE;
            o.max_findings = lv;
        } else if (cli_opt(argc, argv, &i, "-o", &v) || cli_opt(argc, argv, &i, "--output", &v)) {
            if (!(o.dir = v)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--mode", &v)) {
            if (!v) return CLI_USAGE;
            if (!strcmp(v, "both")) o.mode = TS_FUZZ_BOTH;
            else if (!strcmp(v, "pairs")) o.mode = TS_FUZZ_PAIRS;
            else if (!strcmp(v, "graphs")) o.mode = TS_FUZZ_GRAPHS;
            else return cli_error(CLI_USAGE, "fuzz: --mode: expected both, pairs or graphs, got '%s'", v);
        } else if (cli_opt(argc, argv, &i, "--eop-cc", &v)) {
            if (!v || !*v) return cli_error(CLI_USAGE, "fuzz: --eop-cc: expected tcc, system or a compiler command");
            o.target.eop_cc = v;
        } else if (cli_opt(argc, argv, &i, "--replay", &v)) {
            if (!(replay_dir = v)) return CLI_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_error(CLI_USAGE, "fuzz: unknown option '%s' (try 'tsopt fuzz --help')", argv[i]);
        } else {
            return cli_error(CLI_USAGE, "fuzz: unexpected argument '%s'", argv[i]);
        }
    }
    ts_fuzz_target_kind kind = target && !strcmp(target, "ort") ? TS_FUZZ_TARGET_ORT : TS_FUZZ_TARGET_TSOPT;
    if (replay_dir) {
        if (o.dir) return cli_error(CLI_USAGE, "fuzz: --replay takes no -o (it writes nothing)");
        return replay(replay_dir, kind, o.target.eop_cc);
    }
    if (!target) return cli_error(CLI_USAGE, "fuzz: expected --target tsopt|ort (try 'tsopt fuzz --help')");
    if (!o.dir) return cli_error(CLI_USAGE, "fuzz: expected -o DIR (try 'tsopt fuzz --help')");
    if (!cli_dir_check("-o", o.dir)) return CLI_USAGE;
    o.target.kind = kind;
    o.target.plant = getenv("TSOPT_FUZZ_PLANT"); /* tests only (docs/fuzz.md) */
    if (o.target.plant && !*o.target.plant) o.target.plant = NULL;
    if (o.target.plant && !ts_fuzz_plant_known(o.target.plant))
        return cli_error(CLI_USAGE, "fuzz: TSOPT_FUZZ_PLANT: unknown planted bug '%s' (known: %s)", o.target.plant,
                         ts_fuzz_plants());
    struct stat sb;
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/pairs", o.dir);
    bool used = !stat(sub, &sb);
    snprintf(sub, sizeof sub, "%s/findings", o.dir);
    if (o.resume) {
        snprintf(sub, sizeof sub, "%s/checkpoint", o.dir);
        bool one = !stat(sub, &sb);
        snprintf(sub, sizeof sub, "%s/ranks", o.dir);
        if (!one && stat(sub, &sb))
            return cli_error(CLI_USAGE, "fuzz --resume: '%s' holds no campaign to resume (no checkpoint)", o.dir);
    } else if (used || !stat(sub, &sb))
        return cli_error(CLI_USAGE, "fuzz: -o: '%s' already holds a campaign (pairs/ or findings/): give a new folder",
                         o.dir);
    char log[4200];
    if (kind == TS_FUZZ_TARGET_ORT) {
        if (!cli_dir_make(o.dir)) return cli_error(CLI_USAGE, "fuzz: cannot create folder '%s'", o.dir);
        snprintf(log, sizeof log, "%s/ort.log", o.dir);
        o.target.ort_log = log;
    }
    /* the command, for the findings' READMEs */
    char cmd[1024] = "tsopt fuzz";
    for (int i = 1; i < argc; i++) {
        size_t len = strlen(cmd);
        snprintf(cmd + len, sizeof cmd - len, " %s", argv[i]);
    }
    o.command = cmd;
    bool time_given = false;
    for (int i = 1; i < argc; i++) time_given |= !strncmp(argv[i], "--time", 6);
    if (o.max_pairs && !time_given) o.time_s = 0; /* --pairs alone: a pair budget, no clock */
    fuzz_progress pr = {.tty = isatty(2), .time_s = o.time_s, .max_pairs = o.max_pairs};
    o.progress = progress;
    o.progress_ctx = &pr;
    o.stop = &stop_flag;
    struct sigaction sa = {.sa_handler = on_sigint}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    ts_fuzz_stats st;
    ts_error err = {0};
    /* under mpirun: process r tests pairs r, r+N, ..., the first merges
     * the findings and the counts (src/dist/dist_fuzz.c) */
    bool dist = ts_dist_start() > 1, root = ts_dist_rank() == 0;
    ts_status rc = dist ? ts_dist_fuzz(&o, &st, &err) : ts_fuzz_run(&o, &st, &err);
    sigaction(SIGINT, &old, NULL);
    if (!root) return rc ? cli_error_from(rc == TS_ERR_INVALID ? CLI_USAGE : CLI_FAIL, &err) : CLI_OK;
    if (pr.tty && st.generated) fputc('\n', stderr);
    if (rc) return cli_error_from(rc == TS_ERR_INVALID ? CLI_USAGE : CLI_FAIL, &err);
    fprintf(stderr, "fuzz: %ld pairs in %.1f s (%.1f/s, stop: %s): %ld tested, %ld filtered, %ld skipped, %ld findings\n",
            st.generated, st.seconds, st.seconds > 0 ? (double)st.generated / st.seconds : 0.0, st.stop, st.tested,
            st.filtered, st.skipped, st.findings);
    if (st.cover_entries)
        fprintf(stderr, "fuzz: %ld runtime seed graphs (%ld kept for new coverage); coverage: %d of %d kernel-table "
                        "entries, %d kernel/layout keys\n",
                st.graphs, st.kept, st.cover_reached, st.cover_entries, st.cover_keys);
    if (json) {
        char *js = ts_fuzz_stats_json(&o, &st);
        if (!js) return cli_error(CLI_FAIL, "out of memory");
        puts(js);
        free(js);
    } else {
        printf("fuzz: target %s, seed %llu: %ld pairs tested, %ld findings (%ld mismatches, %ld errors)%s%s\n",
               target, (unsigned long long)o.seed, st.tested, st.findings, st.mismatches, st.errors,
               st.findings ? "; see " : "", st.findings ? o.dir : "");
    }
    if (st.processes_died) /* the counts above miss those processes' pairs: not a complete campaign */
        return cli_error(CLI_FAIL, "fuzz: %d of %d processes died or failed; the findings they had written are kept "
                                   "in %s, their counts are lost", st.processes_died, ts_dist_size(), o.dir);
    return CLI_OK;
}
