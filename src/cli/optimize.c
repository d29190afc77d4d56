/* tsopt optimize: TASO's search over the rule file's substitutions, checked
 * against the original on random inputs before anything is written. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "exec/cost.h"
#include "opt/search.h"
#include "rules/apply.h"

static const char USAGE[] =
    "usage: tsopt optimize MODEL -o OUT.onnx [--alpha A] [--budget N] [--time-limit S] [--report R.md]\n"
    "                      [--rules FILE] [--input NAME:DIMS]... [--seed S] [--cost-cache FILE] [--min-gain P]\n"
    "  --alpha A        keep candidates costing less than A x the best (default 1.05; 1 = greedy)\n"
    "  --budget N       graphs taken from the search queue at most (default 1000)\n"
    "  --time-limit S   search time limit in seconds (default 30)\n"
    "  --report R.md    markdown report: substitutions, costs and latencies before/after, search time\n"
    "  --rules FILE     rule file (default: the built-in core rules, rules/core.rules)\n"
    "  --seed S         seed of the random inputs of the final check (default 1)\n"
    "  --cost-cache F   op-cost cache (default $TSOPT_CACHE_DIR or ~/.cache/tsopt)\n"
    "  --min-gain P     write the optimized graph only if its fastest run is at least P percent\n"
    "                   faster than the original's and its median not slower (default 3)\n";

/* Runs g with the fast runtime on inputs; outputs allocated here. */
static ts_status run_plan(const ts_graph *g, ts_tensor **in, ts_tensor **out, ts_error *err)
{
    ts_plan *p = NULL;
    ts_plan_opts o = {0};
    for (int i = 0; i < g->noutputs; i++) {
        const ts_value *v = &g->values[g->outputs[i]];
        if (!(out[i] = ts_tensor_new(v->dtype, &v->shape, err))) return err->code;
    }
    ts_status st = ts_plan_build(g, &o, &p, err);
    if (!st) st = ts_plan_run(p, in, out, err);
    ts_plan_free(p);
    return st;
}

/* Largest |a-b| / (atol * scale + rtol * |b|) over all outputs: <= 1 passes.
 * atol is scaled by the output's largest magnitude so that outputs of any
 * size are judged alike. */
static double compare(const ts_graph *g, ts_tensor **a, ts_tensor **b)
{
    double worst = 0;
    for (int i = 0; i < g->noutputs; i++) {
        if (!ts_dtype_is_float(a[i]->dtype)) {
            if (a[i]->nbytes != b[i]->nbytes || memcmp(a[i]->data, b[i]->data, a[i]->nbytes)) return INFINITY;
            continue;
        }
        int64_t n = ts_tensor_numel(a[i]);
        if (n != ts_tensor_numel(b[i])) return INFINITY;
        double scale = 1e-30;
        for (int64_t k = 0; k < n; k++) scale = fmax(scale, fabs(ts_tensor_get_f64(a[i], k)));
        scale = fmax(scale, 1.0);
        for (int64_t k = 0; k < n; k++) {
            double x = ts_tensor_get_f64(a[i], k), y = ts_tensor_get_f64(b[i], k);
            double e = fabs(x - y) / (1e-4 * scale + 1e-3 * fabs(x));
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
    }
    return worst;
}

static ts_status check(const ts_graph *g0, const ts_graph *g1, uint64_t seed, double *worst, ts_error *err)
{
    int nin = g0->ninputs, nout = g0->noutputs;
    ts_tensor **in = calloc((size_t)nin + 1, sizeof *in), **o0 = calloc((size_t)nout + 1, sizeof *o0),
              **o1 = calloc((size_t)nout + 1, sizeof *o1);
    ts_status st = TS_OK;
    if (!in || !o0 || !o1) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!st && (g1->ninputs != nin || g1->noutputs != nout))
        st = ts_error_set(err, TS_ERR_INVALID, "optimized graph has different inputs/outputs");
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < nin && !st; i++) {
        const ts_value *v = &g0->values[g0->inputs[i]];
        if (!(in[i] = ts_tensor_new(v->dtype, &v->shape, err))) st = err->code;
        else if (ts_dtype_is_float(v->dtype))
            ts_tensor_fill_random(in[i], &rng, -1, 1);
    }
    if (!st) st = run_plan(g0, in, o0, err);
    if (!st) st = run_plan(g1, in, o1, err);
    if (!st) *worst = compare(g0, o0, o1);
    for (int i = 0; in && i < nin; i++) ts_tensor_unref(in[i]);
    for (int i = 0; o0 && o1 && i < nout; i++) {
        ts_tensor_unref(o0[i]);
        ts_tensor_unref(o1[i]);
    }
    free(in);
    free(o0);
    free(o1);
    return st;
}

static double median5(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int live_nodes(const ts_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !g->nodes[i].dead;
    return n;
}

int cli_optimize(int argc, char **argv)
{
    const char *model = NULL, *out = NULL, *report = NULL, *rules_path = NULL, *cache = NULL, *v;
    double alpha = 1.05, tlimit = 30, min_gain = 3;
    long budget = 1000, seed = 1;
    cli_binds binds = {0};
    int rc = CLI_USAGE;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            cli_binds_free(&binds);
            return CLI_OK;
        }
        if (cli_opt(argc, argv, &i, "-o", &v) || cli_opt(argc, argv, &i, "--output", &v)) {
            if (!(out = v)) goto missing;
        } else if (cli_opt(argc, argv, &i, "--alpha", &v)) {
            if (!v) goto missing;
            if (!cli_parse_double("--alpha", v, &alpha)) goto fail;
            if (alpha < 1.0 || alpha > 10.0) {
                cli_error(CLI_USAGE, "--alpha: expected a number from 1 to 10, got '%s'", v);
                goto fail;
            }
        } else if (cli_opt(argc, argv, &i, "--budget", &v)) {
            if (!v) goto missing;
            if (!cli_parse_int("--budget", v, 0, 100000000, &budget)) goto fail;
        } else if (cli_opt(argc, argv, &i, "--time-limit", &v)) {
            if (!v) goto missing;
            if (!cli_parse_double("--time-limit", v, &tlimit)) goto fail;
            if (tlimit < 0) {
                cli_error(CLI_USAGE, "--time-limit: expected seconds >= 0, got '%s'", v);
                goto fail;
            }
        } else if (cli_opt(argc, argv, &i, "--min-gain", &v)) {
            if (!v) goto missing;
            if (!cli_parse_double("--min-gain", v, &min_gain)) goto fail;
            if (min_gain >= 100) {
                cli_error(CLI_USAGE, "--min-gain: expected a percentage below 100, got '%s'", v);
                goto fail;
            }
        } else if (cli_opt(argc, argv, &i, "--report", &v)) {
            if (!(report = v)) goto missing;
        } else if (cli_opt(argc, argv, &i, "--rules", &v)) {
            if (!(rules_path = v)) goto missing;
        } else if (cli_opt(argc, argv, &i, "--cost-cache", &v)) {
            if (!(cache = v)) goto missing;
        } else if (cli_opt(argc, argv, &i, "--seed", &v)) {
            if (!v) goto missing;
            if (!cli_parse_int("--seed", v, 0, 0x7fffffff, &seed)) goto fail;
        } else if (cli_opt(argc, argv, &i, "--input", &v)) {
            if (!v) goto missing;
            if (!cli_binds_add(&binds, v)) goto fail;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error(CLI_USAGE, "optimize: unknown option '%s' (try 'tsopt optimize --help')", argv[i]);
            goto fail;
        } else if (!model) {
            model = argv[i];
        } else {
            cli_error(CLI_USAGE, "optimize: unexpected argument '%s'", argv[i]);
            goto fail;
        }
        continue;
    missing:
        cli_error(CLI_USAGE, "optimize: option '%s' needs a value", argv[i]);
        goto fail;
    }
    if (!model || !out) {
        cli_error(CLI_USAGE, "optimize: expected MODEL and -o OUT.onnx (try 'tsopt optimize --help')");
        goto fail;
    }

    ts_error err = {0};
    ts_rule *rules = NULL;
    int nrules = 0;
    ts_costdb *db = NULL;
    ts_search_result res = {0};
    ts_graph *g = cli_load_model(model, &binds), *written = NULL;
    rc = CLI_FAIL;
    if (!g) goto fail;
    /* No implicit rule file: what the search may apply is the user's explicit
     * choice (rules/taso.rules is generated but not yet fully proved). */
    ts_status st = rules_path ? ts_rules_parse_file(rules_path, &rules, &nrules, &err)
                              : ts_rules_parse_string(ts_core_rules, "<built-in core rules>", &rules, &nrules, &err);
    if (st) {
        rc = cli_error_from(CLI_USAGE, &err);
        goto done;
    }
    /* a generated file holds one orientation of each equivalence (rule.h),
     * so its rules are used both ways; the built-in core rules are written
     * in the direction that pays (merges), and their reverses only widened
     * the search into the cost model's errors (NasRNN batch 16: a graph
     * measured 0.84x was written) */
    int loaded = nrules, reversed = 0, usable = 0;
    if (rules_path && ts_rules_add_reverses(&rules, &nrules, &reversed, &err)) {
        rc = cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    for (int i = 0; i < nrules; i++) usable += ts_rule_applicable(&rules[i]);
    if (ts_costdb_open(cache, &db, &err)) {
        rc = cli_error_from(CLI_USAGE, &err);
        goto done;
    }
    ts_search_opts so = {.rules = rules, .nrules = nrules, .db = db, .alpha = alpha, .budget = (int)budget,
                         .time_limit = tlimit, .progress = isatty(2)};
    if (ts_search_run(g, &so, &res, &err)) {
        rc = cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    ts_costdb_save(db, &err); /* a cache that cannot be saved only costs time next run */
    err = (ts_error){0};
    double worst = 0;
    if (check(g, res.best, (uint64_t)seed, &worst, &err)) {
        rc = cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    if (!(worst <= 1.0)) {
        rc = cli_error(CLI_FAIL, "optimize: optimized graph differs from the original (scaled error %.3g > 1); "
                                 "nothing written",
                       worst);
        goto done;
    }
    /* the measured runtime has the last word: never write a slower graph.
     * Timed alternately (original, optimized, ...) so that a change of the
     * machine's load hits both alike.  The decision compares the fastest
     * runs: on a shared machine the median carries the other processes'
     * load (nasrnn's 1.3 ms took 10-50 ms medians at load 25), the minimum
     * is the closest to the graph's own cost.  The report gives medians,
     * so the median must not be worse either: a noise-level "gain" in the
     * fastest run (bert, merged Q/K/V: fastest better, median 2% worse)
     * keeps the original.  And the fastest run must gain --min-gain: five
     * alternating rounds do not resolve 2-4% (bench/bench.py measured
     * graphs written on such a margin 4-6% slower: inception_v3 merges,
     * nasrnn batch 16), and a graph is only worth changing for a gain that
     * can be measured. */
    double lat0 = 0, lat1 = 0, r0[5], r1[5], min0 = INFINITY, min1 = INFINITY;
    int rounds = 0;
    bool same = res.nsteps == 0;
    for (; rounds < 5 && !same; rounds++) {
        double m0, m1;
        if (xcost_time_graph_min(g, 1, 5, 1000, &r0[rounds], &m0, &err) ||
            xcost_time_graph_min(res.best, 1, 5, 1000, &r1[rounds], &m1, &err)) {
            rc = cli_error_from(CLI_FAIL, &err);
            goto done;
        }
        min0 = fmin(min0, m0);
        min1 = fmin(min1, m1);
    }
    if (same) {
        if (xcost_time_graph(g, 2, 10, 2000, &lat0, &err)) {
            rc = cli_error_from(CLI_FAIL, &err);
            goto done;
        }
        lat1 = lat0;
    } else {
        lat0 = median5(r0, rounds);
        lat1 = median5(r1, rounds);
    }
    bool kept = !same && !(min1 <= min0 * (1 - min_gain / 100) && lat1 <= lat0);
    written = kept ? g : res.best;
    if (ts_onnx_save(written, out, &err)) {
        rc = cli_error_from(CLI_USAGE, &err);
        goto done;
    }
    ts_opt_report rep = {.model = model, .output = out, .opts = &so, .res = &res, .rules_loaded = loaded,
                         .rules_reversed = reversed,
                         .rules_usable = usable, .latency_before = lat0, .latency_after = kept ? lat0 : lat1,
                         .nodes_before = live_nodes(g), .nodes_after = live_nodes(written), .max_err = worst,
                         .kept_original = kept, .fastest_before = same ? 0 : min0,
                         .fastest_after = same ? 0 : min1};
    if (report && ts_opt_report_write(report, &rep, &err)) {
        rc = cli_error_from(CLI_USAGE, &err);
        goto done;
    }
    if (!same)
        printf("optimize: fastest runs %.3f -> %.3f ms (%.2fx), medians %.3f -> %.3f ms\n", min0, min1, min0 / min1,
               lat0, lat1);
    printf("optimize: %s -> %s: cost %.3f -> %.3f ms, latency %.3f -> %.3f ms (%.2fx)%s, %d substitutions, "
           "%d graphs explored, %.1f s\n",
           model, out, res.cost_before, res.cost_after, lat0, kept ? lat0 : lat1, lat0 / (kept ? lat0 : lat1),
           kept ? " [original kept: optimized not measured faster by --min-gain]" : "", kept ? 0 : res.nsteps,
           res.explored, res.seconds);
    rc = CLI_OK;
done:
    ts_search_result_free(&res);
    ts_costdb_free(db);
    ts_rules_free(rules, nrules);
    ts_graph_free(g);
fail:
    cli_binds_free(&binds);
    return rc;
}
