/* tsopt bench: latency of the fast runtime on one model.  The plan is built
 * once, a few warm-up runs fill caches and let OpenMP spin up, then N timed
 * runs (monotonic clock) give median/min/max.  --json prints exactly one
 * JSON object (for bench/ scripts comparing with ONNX Runtime's runner). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "util/wait_policy.h"

static const char USAGE[] =
    "usage: tsopt bench MODEL [--input NAME:D0xD1x...]... [--iters N] [--min-time S] [--warmup N] [--threads N]\n"
    "                   [--json]\n"
    "  --iters N     timed runs (default 20)\n"
    "  --min-time S  more timed runs until they add up to S seconds (at most 1000000 runs;\n"
    "                default 0): a sub-millisecond model gets enough runs for a stable median\n"
    "  --warmup N    untimed runs first (default 3)\n"
    "  --threads N   OpenMP threads (default: one per core)\n"
    "  --json        print one JSON object: median_ms, min_ms, max_ms, iters, threads,\n"
    "                peak_rss_bytes, the plan's statistics and the OpenMP wait policy\n"
    "Idle OpenMP threads spin between steps while they get their cores and sleep while\n"
    "other processes need them, decided as it runs (TSOPT_WAIT=spin|sleep forces one;\n"
    "OMP_WAIT_POLICY or GOMP_SPINCOUNT set by the user win).\n";

typedef struct bench_args {
    const char *model;
    long iters, warmup, threads;
    double min_time; /* seconds */
    bool json;
    cli_binds binds;
} bench_args;

/* Peak resident set (VmHWM) in bytes, 0 when /proc is unavailable. */
static long long peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = atoll(line + 6);
    fclose(f);
    return kb * 1024;
}

static int parse(int argc, char **argv, bench_args *a)
{
    const char *val;
    a->iters = 20;
    a->warmup = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            return -1;
        } else if (!strcmp(argv[i], "--json")) {
            a->json = true;
        } else if (cli_opt(argc, argv, &i, "--input", &val)) {
            if (!val || !cli_binds_add(&a->binds, val)) return CLI_USAGE;
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
    return CLI_OK;
}

static void json_string(const char *s)
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

/* t: the n times sorted ascending, med their median. */
static void report(const bench_args *a, const ts_plan_opts *o, const ts_plan_stats *st, const double *t, long n,
                   double med, double build_ms)
{
    double mean = 0;
    for (long i = 0; i < n; i++) mean += t[i] / (double)n;
    long long rss = peak_rss();
    if (a->json) {
        printf("{\"model\": ");
        json_string(a->model);
        printf(", \"median_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, \"mean_ms\": %.4f, \"iters\": %ld, "
               "\"warmup\": %ld, \"threads\": %d, \"peak_rss_bytes\": %lld, \"build_ms\": %.3f, \"steps\": %d, "
               "\"fused_nodes\": %d, \"reorders\": %d, \"fallback_steps\": %d, \"ref_impls\": %d, \"arena_bytes\": %zu, "
               "\"naive_bytes\": %zu, \"weight_bytes\": %zu, \"wait_policy\": ",
               med, t[0], t[n - 1], mean, n, a->warmup, o->threads, rss, build_ms, st->steps, st->fused_nodes,
               st->reorders, st->fallback_steps, st->ref_impls, st->arena_bytes, st->naive_bytes, st->weight_bytes);
        json_string(ts_wait_policy_name());
        /* runs in each mode of the adaptive policy (warm-up included) */
        ts_wait_stats ws;
        ts_wait_get_stats(&ws);
        printf(", \"wait_sleep_runs\": %ld, \"wait_spin_runs\": %ld, \"wait_switches\": %d}\n", ws.sleep_runs,
               ws.spin_runs, ws.to_sleep + ws.to_spin);
        return;
    }
    const double mib = 1024.0 * 1024.0;
    printf("model: %s\n", a->model);
    printf("latency: median %.3f ms, min %.3f ms, max %.3f ms, mean %.3f ms (%ld runs after %ld warm-up, %d "
           "threads, OpenMP wait %s)\n",
           med, t[0], t[n - 1], mean, n, a->warmup, o->threads, ts_wait_policy_name());
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
    rc = CLI_FAIL;
    ts_graph *g = cli_load_model(a.model, &a.binds);
    int nin = g ? g->ninputs : 0, nout = g ? g->noutputs : 0;
    ts_tensor **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out);
    double *times = calloc((size_t)a.iters, sizeof *times);
    ts_plan *plan = NULL;
    ts_plan_opts o = {.threads = (int)a.threads, .release_packed_weights = true}; /* g: shapes only after */
    ts_error err = {0};
    uint64_t rng = 0xbe4c;
    if (!g || !cli_mem_ok(g)) goto done;
    if (!in || !out || !times) {
        cli_error(CLI_FAIL, "out of memory");
        goto done;
    }
    for (int i = 0; i < nin; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        if (!(in[i] = ts_tensor_new(v->dtype, &v->shape, &err))) {
            cli_error_from(CLI_FAIL, &err);
            goto done;
        }
        cli_fill_random_input(in[i], &rng);
    }
    for (int i = 0; i < nout; i++) {
        const ts_value *v = &g->values[g->outputs[i]];
        if (!(out[i] = ts_tensor_new(v->dtype, &v->shape, &err))) {
            cli_error_from(CLI_FAIL, &err);
            goto done;
        }
    }
    double t0 = cli_now_ms();
    if (ts_plan_build(g, &o, &plan, &err)) {
        cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    double build_ms = cli_now_ms() - t0;
    long n = 0, cap = a.iters;
    double total_ms = 0;
    for (long i = 0; i < a.warmup || n < a.iters || (total_ms < a.min_time * 1e3 && n < 1000000); i++) {
        double s = cli_now_ms();
        if (ts_plan_run(plan, in, out, &err)) {
            cli_error_from(CLI_FAIL, &err);
            goto done;
        }
        if (i < a.warmup) continue;
        if (n == cap) {
            double *t = realloc(times, sizeof *times * (size_t)(cap *= 2));
            if (!t) {
                cli_error(CLI_FAIL, "out of memory");
                goto done;
            }
            times = t;
        }
        times[n] = cli_now_ms() - s;
        total_ms += times[n++];
    }
    double med = cli_sort_median(times, n);
    ts_plan_stats st;
    ts_plan_stats_get(plan, &st);
    ts_plan_opts used = o;
    if (!used.threads) used.threads = omp_get_num_procs(); /* the plan's default */
    report(&a, &used, &st, times, n, med, build_ms);
    rc = CLI_OK;
done:
    for (int i = 0; i < nin; i++)
        if (in) ts_tensor_unref(in[i]);
    for (int i = 0; i < nout; i++)
        if (out) ts_tensor_unref(out[i]);
    free(in);
    free(out);
    free(times);
    ts_plan_free(plan);
    ts_graph_free(g);
    cli_binds_free(&a.binds);
    return rc;
}
