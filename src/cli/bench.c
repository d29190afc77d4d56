/* tsopt bench: latency of the fast runtime on one model.  The plan is built
 * once, a few warm-up runs fill caches and let OpenMP spin up, then N timed
 * runs (monotonic clock) give median/min/max.  --json prints exactly one
 * JSON object (for bench/ scripts comparing with ONNX Runtime's runner).
 * --against B times a second model in the same process (bench_against.c);
 * both forms time their runs in rounds by bench_rounds.c. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/bench.h"
#include "measure/wait_policy.h"
#include "util/clock.h"
#include "util/mem_check.h"

static const char USAGE[] =
    "usage: tsopt bench MODEL [--input NAME:D0xD1x...]... [--iters N] [--min-time S] [--warmup N] [--threads N]\n"
    "                   [--inputs DIR] [--json] [--against B.onnx [--rounds N]]\n"
    "  --iters N     timed runs (default 20)\n"
    "  --min-time S  more timed runs until they add up to S seconds (at most 1000000 runs;\n"
    "                default 0): a sub-millisecond model gets enough runs for a stable median\n"
    "  --warmup N    untimed runs first (default 3)\n"
    "  --threads N   OpenMP threads (default: one per core)\n"
    "  --inputs DIR  the inputs, one NAME.npy each (as `tsopt run --save-inputs DIR` writes\n"
    "                them; default: random).  A model whose shapes depend on input values\n"
    "                (a Loop's trip count, a Reshape's shape given as an input) needs it: it\n"
    "                is loaded at DIR's values, as `tsopt run` loads it (--against B: both)\n"
    "  --json        print one JSON object: median_ms, min_ms, max_ms, iters, threads,\n"
    "                peak_rss_bytes, the plan's statistics and the OpenMP wait policy\n"
    "Timed runs come in rounds of about 50 ms; a round in which another process took the\n"
    "CPU (run delay, CPU share, runnable tasks, steal, collapse) is counted as disturbed,\n"
    "and quiet_median_ms is the median run of the undisturbed rounds (median_ms: all runs).\n"
    "Idle OpenMP threads spin between steps while they get their cores and sleep while\n"
    "other processes need them, decided as it runs (TSOPT_WAIT=spin|sleep forces one;\n"
    "OMP_WAIT_POLICY or GOMP_SPINCOUNT set by the user win).\n"
    "  --against B   compare MODEL (A) with B in this one process: both plans built and\n"
    "                warmed, then rounds of about 50 ms alternating A B, B A, ... on the same\n"
    "                random inputs (B must have A's input names, dtypes and shapes) until each\n"
    "                has --iters runs and --min-time; a model's median reads all its runs, its\n"
    "                quiet median those of undisturbed rounds.  Prints one line per model and\n"
    "                'B vs A: xR (rounds n, ratio range lo-hi)': R = A's median / B's (> 1: B\n"
    "                faster), the range over the rounds' ratios (A's round median / B's).\n"
    "                --json: A's object as above plus \"against\" (B's fields), \"speedup\",\n"
    "                \"quiet_speedup\", \"pair_rounds\" and the ratios' spread\n"
    "  --against-skip NAME,...  with --against: kernels or features B's plan must not use too\n"
    "                (B may be MODEL itself: one kernel's A/B in one process)\n"
    "  --rounds N    with --against: alternating rounds (A B or B A) at least (default 8;\n"
    "                rounded up to an even count so each model goes first equally often)\n"
    CLI_PLAN_OPT_USAGE;

static int parse(int argc, char **argv, bench_args *a)
{
    const char *val;
    a->iters = 20;
    a->warmup = 3;
    for (int i = 1; i < argc; i++) {
        int po;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            return -1;
        } else if ((po = cli_plan_opt(argc, argv, &i, &a->plan))) {
            if (po < 0) return CLI_USAGE;
        } else if (!strcmp(argv[i], "--json")) {
            a->json = true;
        } else if (cli_opt(argc, argv, &i, "--input", &val)) {
            if (!val || !cli_binds_add(&a->binds, val)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--inputs", &val)) {
            if (!val) return CLI_USAGE;
            if (!*val) return cli_error(CLI_USAGE, "bench: --inputs needs a folder");
            a->inputs = val;
        } else if (cli_opt(argc, argv, &i, "--against", &val)) {
            if (!val) return CLI_USAGE;
            if (!*val) return cli_error(CLI_USAGE, "bench: --against needs a model file");
            a->against = val;
        } else if (cli_opt(argc, argv, &i, "--against-skip", &val)) {
            if (!val) return CLI_USAGE;
            a->against_skip = val;
        } else if (cli_opt(argc, argv, &i, "--rounds", &val)) {
            if (!val || !cli_parse_int("--rounds", val, 2, 100000, &a->rounds)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--iters", &val)) {
            if (!val || !cli_parse_int("--iters", val, 1, 1000000, &a->iters)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--min-time", &val)) {
            if (!val || !cli_parse_double("--min-time", val, &a->min_time)) return CLI_USAGE;
            if (!(a->min_time >= 0 && a->min_time <= 3600))
                return cli_error(CLI_USAGE, "bench: --min-time must be between 0 and 3600 seconds, got '%s'", val);
        } else if (cli_opt(argc, argv, &i, "--warmup", &val)) {
            if (!val || !cli_parse_int("--warmup", val, 0, 1000000, &a->warmup)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--threads", &val)) {
            if (!val || !cli_parse_int("--threads", val, 1, 4096, &a->threads)) return CLI_USAGE;
        } else if (!cli_model_arg("bench", argv[i], &a->model)) {
            return CLI_USAGE;
        }
    }
    if (!a->model) {
        fputs(USAGE, stderr);
        return CLI_USAGE;
    }
    if (a->rounds && !a->against) return cli_error(CLI_USAGE, "bench: --rounds needs --against");
    if (a->against_skip && !a->against) return cli_error(CLI_USAGE, "bench: --against-skip needs --against");
    /* the files' sizes bind the symbolic dimensions (A's declaration; B is loaded at the same) */
    if (a->inputs && !cli_binds_from_dir(&a->binds, a->model, a->inputs, "bench")) return CLI_FAIL;
    return CLI_OK;
}

const char *const BENCH_REASON_NAMES[5] = {"run delay", "CPU share", "other runnable tasks", "steal", "collapse"};

void bench_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

void bench_report_json(const bench_args *a, const ts_plan_opts *o, const ts_plan_stats *st, const double *t, long n,
                       double med, double build_ms, const quiet_stats *q, bool open_end)
{
    double mean = 0;
    for (long i = 0; i < n; i++) mean += t[i] / (double)n;
    long long rss = (long long)xmem_peak_rss();
    printf("{\"model\": ");
    bench_json_string(a->model);
    printf(", \"median_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, \"mean_ms\": %.4f, \"iters\": %ld, "
           "\"warmup\": %ld, \"threads\": %d, \"peak_rss_bytes\": %lld, \"build_ms\": %.3f, \"steps\": %d, "
           "\"fused_nodes\": %d, \"reorders\": %d, \"fallback_steps\": %d, \"ref_impls\": %d, \"arena_bytes\": %zu, "
           "\"naive_bytes\": %zu, \"weight_bytes\": %zu, \"wait_policy\": ",
           med, t[0], t[n - 1], mean, n, a->warmup, o->threads, rss, build_ms, st->steps, st->fused_nodes,
           st->reorders, st->fallback_steps, st->ref_impls, st->arena_bytes, st->naive_bytes, st->weight_bytes);
    bench_json_string(ts_wait_policy_name());
    printf(", \"rounds\": %ld, \"disturbed_rounds\": %ld, \"quiet_runs\": %ld, \"quiet_median_ms\": ", q->rounds,
           q->disturbed, q->runs);
    if (q->runs)
        printf("%.4f, \"quiet_min_ms\": %.4f", q->median_ms, q->min_ms);
    else
        printf("null, \"quiet_min_ms\": null");
    printf(", \"disturbed_by\": [");
    for (int i = 0, k = 0; i < 5; i++)
        if (q->reasons >> i & 1) printf("%s\"%s\"", k++ ? ", " : "", BENCH_REASON_NAMES[i]);
    printf("]");
    /* runs in each mode of the adaptive policy (warm-up included) */
    ts_wait_stats ws;
    ts_wait_get_stats(&ws);
    printf(", \"wait_sleep_runs\": %ld, \"wait_spin_runs\": %ld, \"wait_switches\": %d, \"wait_to_sleep\": %d, "
           "\"wait_to_spin\": %d, \"wait_sleep_ms\": %.1f, \"wait_spin_ms\": %.1f, \"wait_windows\": %ld, "
           "\"wait_busy_windows\": %ld, \"wait_vetoed\": %ld%s",
           ws.sleep_runs, ws.spin_runs, ws.to_sleep + ws.to_spin, ws.to_sleep, ws.to_spin, ws.sleep_ms,
           ws.spin_ms, ws.windows, ws.busy_windows, ws.vetoed, open_end ? "" : "}\n");
}

/* t: the n times sorted ascending, med their median. */
static void report(const bench_args *a, const ts_plan_opts *o, const ts_plan_stats *st, const double *t, long n,
                   double med, double build_ms, const quiet_stats *q)
{
    if (a->json) {
        bench_report_json(a, o, st, t, n, med, build_ms, q, false);
        return;
    }
    double mean = 0;
    for (long i = 0; i < n; i++) mean += t[i] / (double)n;
    long long rss = (long long)xmem_peak_rss();
    const double mib = 1024.0 * 1024.0;
    printf("model: %s\n", a->model);
    printf("latency: median %.3f ms, min %.3f ms, max %.3f ms, mean %.3f ms (%ld runs after %ld warm-up, %d "
           "threads, OpenMP wait %s)\n",
           med, t[0], t[n - 1], mean, n, a->warmup, o->threads, ts_wait_policy_name());
    if (q->runs)
        printf("quiet: median %.3f ms, min %.3f ms over the %ld runs of %ld undisturbed rounds of %ld", q->median_ms,
               q->min_ms, q->runs, q->rounds - q->disturbed, q->rounds);
    else
        printf("quiet: none of %ld rounds undisturbed", q->rounds);
    for (int i = 0, k = 0; i < 5; i++)
        if (q->reasons >> i & 1) printf("%s%s", k++ ? ", " : " (disturbed by: ", BENCH_REASON_NAMES[i]);
    printf("%s\n", q->reasons ? ")" : "");
    ts_wait_stats ws;
    ts_wait_get_stats(&ws);
    if (ws.spin_runs + ws.sleep_runs)
        printf("wait: %ld runs (%.1f ms) spinning, %ld runs (%.1f ms) sleeping, %d switches to sleep, %d to spin; "
               "%ld of %ld windows disturbed, %ld not followed (others' CPU low)\n",
               ws.spin_runs, ws.spin_ms, ws.sleep_runs, ws.sleep_ms, ws.to_sleep, ws.to_spin, ws.busy_windows,
               ws.windows, ws.vetoed);
    printf("plan: %d steps (%d nodes fused, %d reorders, %d reference, %d on oneDNN's reference), built in %.1f ms\n",
           st->steps, st->fused_nodes, st->reorders, st->fallback_steps, st->ref_impls, build_ms);
    printf("memory: arena %.2f MiB (%.2f MiB without reuse), weights %.2f MiB (%.2f MiB of originals freed once "
           "packed), peak RSS %.1f MiB\n",
           (double)st->arena_bytes / mib, (double)st->naive_bytes / mib, (double)st->weight_bytes / mib,
           (double)st->released_bytes / mib, (double)rss / mib);
}

int cli_bench(int argc, char **argv)
{
    bench_args a = {0};
    int rc = parse(argc, argv, &a);
    if (rc) {
        cli_binds_free(&a.binds);
        return rc < 0 ? CLI_OK : rc;
    }
    if (a.against) {
        rc = bench_against(&a);
        cli_binds_free(&a.binds);
        return rc;
    }
    rc = CLI_FAIL;
    ts_tensor **in = NULL; /* from --inputs, else random */
    ts_graph *g = bench_load(a.model, &a.binds, a.inputs, &in);
    int nin = g ? g->ninputs : 0, nout = g ? g->noutputs : 0;
    bool random_in = !in;
    if (random_in) in = calloc((size_t)nin + 1, sizeof *in);
    ts_tensor **out = calloc((size_t)nout + 1, sizeof *out);
    ts_plan *plan = NULL;
    ts_plan_opts o = a.plan;
    o.threads = (int)a.threads;
    o.release_packed_weights = true; /* g: shapes only after */
    ts_error err = {0};
    uint64_t rng = 0xbe4c;
    if (!g || !cli_graph_opt(g, &o) || !cli_mem_ok(g)) goto done;
    if (!in || !out) {
        cli_error(CLI_FAIL, "out of memory");
        goto done;
    }
    if (!bench_io_new(g, random_in ? in : NULL, out, &rng)) goto done;
    double t0 = ts_clock_ms();
    if (ts_plan_build(g, &o, &plan, &err)) {
        cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    double build_ms = ts_clock_ms() - t0;
    /* Timed runs in rounds of about BENCH_ROUND_MS, each bracketed by the
     * disturbance evidence of measure/rounds.c (run delay, CPU share, other
     * runnable tasks, steal, collapse): the runs of undisturbed rounds give
     * quiet_median_ms, the one to compare across processes. */
    bench_runs br;
    if (!bench_runs_init(&br, a.iters)) goto oom;
    for (long i = 0; i < a.warmup || br.n < a.iters || (br.total_ms < a.min_time * 1e3 && br.n < BENCH_MAX_RUNS);
         i++) {
        bool timed = i >= a.warmup;
        if (timed && (br.n == 0 || bench_round_ms(&br) >= BENCH_ROUND_MS)) {
            /* a round ends here, the next begins */
            if (br.n > 0 && !bench_round_close(&br)) goto oom;
            bench_round_open(&br);
        }
        double ms;
        if (bench_run_timed(plan, in, out, &ms, &err)) {
            cli_error_from(CLI_FAIL, &err);
            bench_runs_free(&br);
            goto done;
        }
        if (timed && !bench_runs_add(&br, ms)) goto oom;
    }
    if (br.n > 0 && !bench_round_close(&br)) goto oom;
    ts_plan_opts used = o;
    if (!used.threads) used.threads = omp_get_num_procs(); /* the plan's default */
    quiet_stats q = {0};
    if (!bench_runs_quiet(&br, used.threads, &q)) goto oom;
    double med = ts_median(br.t, br.n);
    ts_plan_stats st;
    ts_plan_stats_get(plan, &st);
    report(&a, &used, &st, br.t, br.n, med, build_ms, &q);
    bench_runs_free(&br);
    rc = CLI_OK;
    goto done;
oom:
    bench_runs_free(&br);
    cli_error(CLI_FAIL, "out of memory");
done:
    for (int i = 0; i < nin; i++)
        if (in) ts_tensor_unref(in[i]);
    for (int i = 0; i < nout; i++)
        if (out) ts_tensor_unref(out[i]);
    free(in);
    free(out);
    ts_plan_free(plan);
    ts_graph_free(g);
    cli_binds_free(&a.binds);
    return rc;
}
