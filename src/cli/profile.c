/* tsopt profile: fills the op-cost cache for one model and reports how well
 * the sum of the (group) costs predicts the measured end-to-end latency.
 * tsopt peak: the machine's measured peak GFLOP/s and GB/s (cached). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cost/cost.h"
#include "exec/roofline.h"
#include "measure/step_timer.h"
#include "vec/vec.h"
#include "measure/wait_policy.h"

static const char USAGE[] =
    "usage: tsopt profile MODEL [--input NAME:D0xD1x...]... [--cache FILE] [--iters N] [--json]\n"
    "  times every distinct fused group of nodes (op, attributes, shapes, constant inputs)\n"
    "  once as a graph of its own (isolated), then every group inside the whole model's plan\n"
    "  (per-step timer, median of N runs: the in-plan cost, which the model prefers), stores\n"
    "  both in the cost cache (default: $TSOPT_CACHE_DIR or ~/.cache/tsopt, one file per CPU\n"
    "  model), prints the cost per op type, the sums, the measured end-to-end median of N runs\n"
    "  (default 20) and the prediction errors.\n"
    "usage: tsopt profile MODEL --predict [--with OTHER.onnx]... [--cache FILE] [--json]\n"
    "  the optimizer's prediction: primes the cache with MODEL's plan (ts_cost_prime), prints\n"
    "  ts_cost_graph of MODEL, then of each OTHER (a rewrite of MODEL: its groups not in the\n"
    "  cache are timed in context, inside a small plan of their neighbourhood)\n"
    "usage: tsopt profile MODEL --context [--cache FILE] [--iters N] [--json]\n"
    "  validation of in-context timing: times every group inside MODEL's plan, then each group\n"
    "  again in context, one at a time, as if it were new, and compares the two per op type\n"
    "  (TSOPT_COST_DEBUG=1: per group and per step of each cut-out plan, on stderr)\n"
    "usage: tsopt profile MODEL --roofline [--input ...] [--cache FILE] [--iters N] [--min] [--json]\n"
    "  only the per-step roofline (also printed after the groups without --roofline): the plan\n"
    "  `tsopt bench` runs (graph optimization level all), each step's median time over N timed\n"
    "  runs, the least bytes it must move (inputs read once, outputs written once, each weight\n"
    "  once per run) and its FLOPs, its limit max(bytes / bandwidth, FLOPs / peak) and the share\n"
    "  of its time that limit is; the total against the median untimed run.  --min: the fastest\n"
    "  run of each step and of the untimed runs instead of the median (under load, the nearest to\n"
    "  a quiet machine's cost)\n"
    "usage: tsopt profile MODEL --against-skip NAME,... [--input ...] [--iters N] [--min] [--json]\n"
    "  one kernel's A/B per step in one process: the plan above (A) and the same graph's plan\n"
    "  with NAME,... skipped as with $TSOPT_SKIP (B), N runs each alternating A B / B A, each\n"
    "  step's median (--min: fastest) time in both, steps matched by the node they are named\n"
    "  after, and the ratio (a loaded machine's moments move separate runs' figures by 2x)\n"
    "usage: tsopt peak [--cache FILE] [--remeasure] [--json]\n"
    "  measured peak GFLOP/s (best of 1024^3 and 2048^3 matmuls and a 256-channel 3x3 conv on 56x56,\n"
    "  fastest of 15 runs each, in the runtime) and GB/s (the better of STREAM's copy and triad on\n"
    "  all cores, arrays of 4x the last-level cache); cached, --remeasure measures again (the cache\n"
    "  keeps the larger value)\n";

typedef struct row {
    char label[160];
    int count;
    double ms, iso_ms;
    int measured, cached, roofline, plan;
} row;

static int cmp_row(const void *a, const void *b)
{
    const row *x = a, *y = b;
    return (x->ms < y->ms) - (x->ms > y->ms);
}

/* "Conv+BatchNormalization+Relu": the group's ops (views: "(views: OP)"). */
static void group_label(const ts_graph *g, const int *group_of, int head, char *label, size_t n)
{
    int members[XCOST_MAX_GROUP], nm = xcost_members(g, group_of, head, members);
    size_t k = 0;
    label[0] = 0;
    if (xcost_is_free(&g->nodes[head])) {
        snprintf(label, n, "(views: %s)", g->nodes[head].op->name);
        return;
    }
    for (int m = 0; m < nm && k + 1 < n; m++)
        k += (size_t)snprintf(label + k, n - k, "%s%s", m ? "+" : "", g->nodes[members[m]].op->name);
}


/* --predict: what the optimizer predicts from this cache: MODEL primed,
 * then each rewrite costed with its new groups timed in context. */
static int predict(const char *model, const cli_binds *binds, const char *const *with, int nwith, ts_costdb *db,
                   bool json)
{
    ts_error err = {0};
    int rc = CLI_OK;
    if (json)
        printf("{\"cache\": \"%s\", \"wait_policy\": \"%s\", \"graphs\": [", xcost_db_path(db),
               ts_wait_policy_name());
    for (int f = 0; f <= nwith && rc == CLI_OK; f++) {
        const char *path = f ? with[f - 1] : model;
        ts_graph *g = cli_load_model(path, binds);
        /* costed as the optimizer charges a graph (ts_drive_graph_cost):
         * as the runtime runs it, at graph optimization level all */
        if (g && ts_graph_opt_apply(g, TS_GRAPH_OPT_ALL, &err) < 0) {
            rc = cli_error_from(CLI_FAIL, &err);
            ts_graph_free(g);
            break;
        }
        int *group_of = g ? malloc(sizeof *group_of * ((size_t)g->nnodes + 1)) : NULL;
        if (!g) {
            rc = CLI_FAIL;
            break;
        }
        if (!group_of || xcost_groups(g, group_of)) {
            rc = cli_error(CLI_FAIL, "out of memory");
            ts_graph_free(g);
            free(group_of);
            break;
        }
        int before = xcost_db_measured(db);
        double t0 = ts_clock_s(), prime_s = 0;
        if (!f) {
            if (ts_cost_prime(db, g, &err)) {
                rc = cli_error_from(CLI_FAIL, &err);
                ts_graph_free(g);
                free(group_of);
                break;
            }
            prime_s = ts_clock_s() - t0;
        }
        /* a rewrite's groups in context, even when it shares none with
         * MODEL (ts_cost_graph would prime it: time it as a whole) */
        double ms = f ? xcost_graph_in_context(db, g) : ts_cost_graph(db, g, true), cost_s = ts_clock_s() - t0 - prime_s;
        int n_plan = 0, n_ctx = 0, n_other = 0, groups = 0;
        for (int n = 0; n < g->nnodes; n++) {
            if (group_of[n] != n || g->nodes[n].dead || xcost_is_free(&g->nodes[n])) continue;
            xcost_src src;
            xcost_group(db, g, group_of, n, false, &src);
            groups++;
            n_plan += src == XCOST_PLAN, n_ctx += src == XCOST_CONTEXT;
            n_other += src != XCOST_PLAN && src != XCOST_CONTEXT;
        }
        int measured = xcost_db_measured(db) - before;
        if (json)
            printf("%s{\"model\": \"%s\", \"predicted_ms\": %.4f, \"groups\": %d, \"in_plan\": %d, "
                   "\"in_context\": %d, \"other\": %d, \"measured\": %d, \"prime_s\": %.3f, \"cost_s\": %.3f}",
                   f ? ", " : "", path, ms, groups, n_plan, n_ctx, n_other, measured, prime_s, cost_s);
        else
            printf("%s: predicted %.3f ms (%d groups: %d in-plan, %d in-context, %d other; %d measured now; "
                   "prime %.2f s, cost %.2f s)\n",
                   path, ms, groups, n_plan, n_ctx, n_other, measured, prime_s, cost_s);
        ts_graph_free(g);
        free(group_of);
    }
    if (json) printf("]}\n");
    if (rc == CLI_OK && ts_costdb_save(db, &err)) rc = cli_error_from(CLI_FAIL, &err);
    return rc;
}

typedef struct crow {
    char label[160];
    int count;
    double plan_ms, ctx_ms;
} crow;

static int cmp_crow(const void *a, const void *b)
{
    const crow *x = a, *y = b;
    return (x->plan_ms < y->plan_ms) - (x->plan_ms > y->plan_ms);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --context: every group of MODEL timed in context, one at a time (as the
 * optimizer's new groups are), against its own time in the model's plan
 * (not the mean over the groups sharing its key). */
static int context_check(const char *model, ts_graph *g, ts_costdb *db, long iters, bool json)
{
    ts_error err = {0};
    int rc = CLI_FAIL, nrows = 0, ng = 0, nn = g->nnodes;
    int *group_of = malloc(sizeof *group_of * ((size_t)nn + 1));
    crow *rows = calloc((size_t)nn + 1, sizeof *rows);
    double *plan_ms = calloc((size_t)nn + 1, sizeof *plan_ms), *ctx_ms = calloc((size_t)nn + 1, sizeof *ctx_ms);
    double *ratio = calloc((size_t)nn + 1, sizeof *ratio);
    if (!group_of || !rows || !plan_ms || !ctx_ms || !ratio || xcost_groups(g, group_of)) {
        cli_error(CLI_FAIL, "out of memory");
        goto done;
    }
    xcost_plan_times pt;
    if (xcost_time_plan_groups(db, g, 3, (int)iters, &pt, plan_ms, &err)) {
        cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    double t0 = ts_clock_s(), evict = 0, sum_plan = 0, sum_ctx = 0, abs_err = 0;
    int nctx = 0, failed = 0;
    for (int n = 0; n < nn; n++) {
        if (group_of[n] != n || g->nodes[n].dead || xcost_is_free(&g->nodes[n])) continue;
        xcost_ctx_stats cs;
        if (xcost_ctx_measure(db, g, group_of, &n, 1, &ctx_ms[n], &cs, &err)) {
            if (!json) printf("context of group '%s' not timed: %s\n", g->nodes[n].name, err.msg);
            failed++;
            continue;
        }
        evict = cs.evict_bytes > evict ? cs.evict_bytes : evict;
        nctx++;
        char label[160];
        group_label(g, group_of, n, label, sizeof label);
        if (getenv("TSOPT_COST_DEBUG"))
            fprintf(stderr, "group %s (%s): in-plan %.4f ms, context %.4f ms\n", g->nodes[n].name, label, plan_ms[n],
                    ctx_ms[n]);
        int r = 0;
        while (r < nrows && strcmp(rows[r].label, label)) r++;
        if (r == nrows) snprintf(rows[nrows++].label, sizeof rows[r].label, "%s", label);
        rows[r].count++;
        rows[r].plan_ms += plan_ms[n];
        rows[r].ctx_ms += ctx_ms[n];
        sum_plan += plan_ms[n];
        sum_ctx += ctx_ms[n];
        abs_err += ctx_ms[n] > plan_ms[n] ? ctx_ms[n] - plan_ms[n] : plan_ms[n] - ctx_ms[n];
        if (plan_ms[n] > 0 && ctx_ms[n] > 0) ratio[ng++] = ctx_ms[n] / plan_ms[n];
    }
    double ctx_s = ts_clock_s() - t0;
    qsort(rows, (size_t)nrows, sizeof *rows, cmp_crow);
    qsort(ratio, (size_t)ng, sizeof *ratio, cmp_dbl);
    double med_ratio = ng ? ratio[ng / 2] : 0, e2e = pt.plain_ms;
    if (json) {
        printf("{\"model\": \"%s\", \"groups\": %d, \"failed\": %d, \"in_plan_sum_ms\": %.4f, "
               "\"context_sum_ms\": %.4f, "
               "\"e2e_ms\": %.4f, \"context_vs_plan_pct\": %.2f, \"context_vs_e2e_pct\": %.2f, "
               "\"abs_error_pct\": %.2f, \"median_group_ratio\": %.3f, \"context_s\": %.3f, \"evict_bytes\": %.0f}\n",
               model, nctx, failed, sum_plan, sum_ctx, e2e, 100 * (sum_ctx - sum_plan) / sum_plan,
               100 * (sum_ctx - e2e) / e2e, 100 * abs_err / sum_plan, med_ratio, ctx_s, evict);
    } else {
        printf("model: %s\ncache: %s\n", model, xcost_db_path(db));
        printf("%-48s %6s %12s %12s %7s\n", "group (fused ops)", "count", "in-plan ms", "context ms", "ratio");
        for (int r = 0; r < nrows; r++)
            printf("%-48.48s %6d %12.3f %12.3f %7.2f\n", rows[r].label, rows[r].count, rows[r].plan_ms,
                   rows[r].ctx_ms, rows[r].plan_ms > 0 ? rows[r].ctx_ms / rows[r].plan_ms : 0);
        printf("groups: %d timed in context in %.2f s, %d failed; up to %.1f MiB read before each run\n", nctx, ctx_s,
               failed, evict / (1 << 20));
        printf("in-plan sum %.3f ms, context sum %.3f ms (%+.1f%%; sum of |differences| %.1f%%), end-to-end %.3f ms "
               "(context %+.1f%%); median group ratio context/in-plan %.2f\n",
               sum_plan, sum_ctx, 100 * (sum_ctx - sum_plan) / sum_plan, 100 * abs_err / sum_plan, e2e,
               100 * (sum_ctx - e2e) / e2e, med_ratio);
    }
    rc = ts_costdb_save(db, &err) ? cli_error_from(CLI_FAIL, &err) : CLI_OK;
done:
    free(group_of);
    free(rows);
    free(plan_ms);
    free(ctx_ms);
    free(ratio);
    return rc;
}

/* ------------------------------------------------------------ roofline */

typedef struct sroof {
    int steps;
    double *ms;        /* per-step median */
    xroof_step *work;  /* per-step bytes and FLOPs */
    const char **kernel;
    char (*node)[64];
    double e2e_ms;     /* median untimed run */
    double io_bytes;   /* the graph's inputs and outputs */
} sroof;

static void sroof_free(sroof *r)
{
    free(r->ms);
    free(r->work);
    free(r->kernel);
    free(r->node);
}

/* The plan `tsopt bench` runs (level all), timed step by step: medians of
 * iters timed runs, each paired with an untimed one (the end-to-end time,
 * same load), in a random order within the pair (as cost_plan.c). */
static ts_status roofline_measure(const ts_graph *g0, long iters, bool use_min, sroof *r, ts_error *err)
{
    memset(r, 0, sizeof *r);
    ts_graph *g = ts_graph_copy(g0);
    ts_plan *plan = NULL;
    int nin = g0->ninputs, nout = g0->noutputs;
    ts_tensor **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out);
    double *t = NULL, *col = malloc(sizeof *col * ((size_t)iters + 1)), *plain = calloc((size_t)iters + 1, sizeof *plain);
    ts_plan_opts o = {0};
    ts_status st = TS_OK;
    if (!g || !in || !out || !col || !plain) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (ts_graph_opt_apply(g, TS_GRAPH_OPT_ALL, err) < 0 || (st = xcost_io_new(g, in, out, err)) ||
        (st = ts_plan_build(g, &o, &plan, err))) {
        st = st ? st : err->code;
        goto done;
    }
    int ns = r->steps = xplan_step_count(plan);
    r->ms = calloc((size_t)ns + 1, sizeof *r->ms);
    r->work = calloc((size_t)ns + 1, sizeof *r->work);
    r->kernel = calloc((size_t)ns + 1, sizeof *r->kernel);
    r->node = calloc((size_t)ns + 1, sizeof *r->node);
    t = calloc((size_t)ns * (size_t)iters + 1, sizeof *t);
    if (!r->ms || !r->work || !r->kernel || !r->node || !t) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = xroof_plan(plan, r->work, err))) goto done;
    for (int i = 0; i < ns; i++) {
        int n = xplan_step_node(plan, i);
        r->kernel[i] = xplan_step_kernel(plan, i);
        snprintf(r->node[i], sizeof r->node[i], "%s", n >= 0 ? g->nodes[n].name : "(graph input)");
    }
    for (int i = 0; i < nin; i++) r->io_bytes += xroof_value_bytes(g, g->inputs[i]);
    for (int i = 0; i < nout; i++) r->io_bytes += xroof_value_bytes(g, g->outputs[i]);
    for (int i = 0; i < 3 && !st; i++) st = ts_plan_run(plan, in, out, err);
    uint64_t coin = 0x2545f4914f6cdd1dull;
    for (long it = 0; it < iters && !st; it++) {
        coin ^= coin << 13, coin ^= coin >> 7, coin ^= coin << 17;
        for (int half = 0; half < 2 && !st; half++) {
            bool timed = (half == 0) == (bool)(coin & 1);
            xplan_step_timer(plan, timed ? t + (size_t)it * (size_t)ns : NULL);
            double s0 = ts_clock_ms();
            st = ts_plan_run(plan, in, out, err);
            if (!timed) plain[it] = ts_clock_ms() - s0;
        }
    }
    xplan_step_timer(plan, NULL);
    if (st) goto done;
    for (int i = 0; i < ns; i++) {
        for (long it = 0; it < iters; it++) col[it] = t[(size_t)it * (size_t)ns + (size_t)i];
        qsort(col, (size_t)iters, sizeof *col, cmp_dbl);
        r->ms[i] = col[use_min ? 0 : iters / 2];
    }
    qsort(plain, (size_t)iters, sizeof *plain, cmp_dbl);
    r->e2e_ms = plain[use_min ? 0 : iters / 2];
done:
    for (int i = 0; i < nin; i++)
        if (in) ts_tensor_unref(in[i]);
    for (int i = 0; i < nout; i++)
        if (out) ts_tensor_unref(out[i]);
    free(in);
    free(out);
    free(t);
    free(col);
    free(plain);
    ts_plan_free(plan);
    ts_graph_free(g);
    return st;
}

/* Prints the step table (text) or the JSON fields `"steps": [...], ...`
 * (to be placed inside an object).  Each step's limit is taken at the
 * bandwidth of the cache level its bytes fit in (xroof_step_limit_ms). */
/* The peak as `tsopt peak` prints it (the measured matmul/conv figure) and,
 * when the FMA units are faster, the ceiling the limits use: printed as
 * "peak" alone the ceiling read as a 6x higher peak (477.9 vs 76.7 GFLOP/s
 * on the 2-core Intel Xeon, 12-07). */
static void print_peak(double peak, double ceiling, double gbps)
{
    printf("peak: %.1f GFLOP/s, %.1f GB/s", peak, gbps);
    if (ceiling > peak) printf("; FLOP ceiling of the limits %.1f GFLOP/s (FMA units)", ceiling);
    printf("\n");
}

static void roofline_print(const sroof *r, const xroof_machine *m, bool json)
{
    double ms = 0, bytes = 0, wbytes = 0, flops = 0, iflops = 0, limit = 0, mem = 0, dram = 0;
    const double *bw = m->gbps;
    for (int i = 0; i < r->steps; i++) wbytes += r->work[i].weight_bytes;
    if (!json) {
        printf("per step (the plan `tsopt bench` runs; limit = max(bytes / bandwidth of the level they fit in, "
               "FLOPs / %.1f GFLOP/s, 8-bit products' at %.1f GOP/s); GB/s L1 %.1f, L2 %.1f, L3 %.1f, memory %.1f; "
               "the run's %.2f MB of weights from %s):\n",
               xroof_flop_ceiling(m), m->int8_gops, bw[XROOF_L1], bw[XROOF_L2], bw[XROOF_L3], bw[XROOF_DRAM], wbytes / 1e6,
               xroof_level_name[xroof_level(m, wbytes)]);
        printf("%5s %-16s %-36s %9s %9s %9s %9s %5s %7s\n", "step", "kernel", "node", "ms", "KB", "MFLOP",
               "limit ms", "bound", "% limit");
    } else {
        printf(", \"gbps_l1\": %.2f, \"gbps_l2\": %.2f, \"gbps_l3\": %.2f, \"steps\": [", bw[XROOF_L1], bw[XROOF_L2],
               bw[XROOF_L3]);
    }
    for (int i = 0; i < r->steps; i++) {
        const xroof_step *w = &r->work[i];
        bool membound;
        int level;
        double lim = xroof_step_limit_ms(m, w, wbytes, &membound, &level), tb = xroof_memory_ms(m, w, wbytes, NULL);
        ms += r->ms[i], bytes += w->bytes, flops += w->flops, iflops += w->int8_flops, limit += lim, mem += tb;
        dram += xroof_limit_ms(w->bytes, 0, bw[XROOF_DRAM], 0);
        if (json)
            printf("%s{\"step\": %d, \"kernel\": \"%s\", \"node\": \"%s\", \"ms\": %.5f, \"bytes\": %.0f, "
                   "\"weight_bytes\": %.0f, \"flops\": %.0f, \"nodes\": %d, \"limit_ms\": %.5f, \"bound\": \"%s\", "
                   "\"level\": \"%s\"}",
                   i ? ", " : "", i, r->kernel[i], r->node[i], r->ms[i], w->bytes, w->weight_bytes, w->flops,
                   w->nodes, lim, membound ? "memory" : "flops", xroof_level_name[level]);
        else
            printf("%5d %-16.16s %-36.36s %9.4f %9.1f %9.2f %9.4f %5s %6.1f%%\n", i, r->kernel[i], r->node[i],
                   r->ms[i], w->bytes / 1e3, w->flops / 1e6, lim, membound ? xroof_level_name[level] : "flop",
                   r->ms[i] > 0 ? 100 * lim / r->ms[i] : 0);
    }
    /* the floor no lowering beats: weights and the graph's inputs and
     * outputs moved once (from where the run's weights fit), every FLOP
     * at peak */
    double floor = xroof_step_limit_ms(m, &(xroof_step){.bytes = wbytes + r->io_bytes, .weight_bytes = wbytes, .flops = flops,
                                                          .int8_flops = iflops},
                                       wbytes, NULL, NULL);
    if (json) {
        printf("], \"steps_ms\": %.4f, \"run_ms\": %.4f, \"bytes\": %.0f, \"weight_bytes\": %.0f, \"flops\": %.0f, "
               "\"limit_ms\": %.4f, \"memory_limit_ms\": %.4f, \"dram_memory_limit_ms\": %.4f, \"floor_ms\": %.4f, "
               "\"pct_of_limit\": %.2f",
               ms, r->e2e_ms, bytes, wbytes, flops, limit, mem, dram, floor,
               r->e2e_ms > 0 ? 100 * limit / r->e2e_ms : 0);
        return;
    }
    printf("%5s %-16s %-36s %9.4f %9.1f %9.2f %9.4f %5s %6.1f%%\n", "total", "", "(sum of the steps)", ms,
           bytes / 1e3, flops / 1e6, limit, "", ms > 0 ? 100 * limit / ms : 0);
    printf("roofline: %d steps, %.2f MB moved (%.2f MB weights), %.1f MFLOP; limit %.4f ms (memory alone %.4f, all "
           "from DRAM %.4f, floor %.4f: weights and I/O once); median run %.4f ms = %.1f%% of the limit\n",
           r->steps, bytes / 1e6, wbytes / 1e6, flops / 1e6, limit, mem, dram, floor, r->e2e_ms,
           r->e2e_ms > 0 ? 100 * limit / r->e2e_ms : 0);
}

int cli_profile(int argc, char **argv)
{
    const char *model = NULL, *cache = NULL, *against_skip = NULL, *val;
    long iters = 20;
    bool json = false, do_predict = false, do_context = false, only_roofline = false, use_min = false;
    const char *with[16];
    int nwith = 0;
    cli_binds binds = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            cli_binds_free(&binds);
            return CLI_OK;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--predict")) {
            do_predict = true;
        } else if (!strcmp(argv[i], "--context")) {
            do_context = true;
        } else if (!strcmp(argv[i], "--roofline")) {
            only_roofline = true;
        } else if (!strcmp(argv[i], "--min")) {
            use_min = true;
        } else if (cli_opt(argc, argv, &i, "--against-skip", &val)) {
            if (!val || !*val) return cli_binds_free(&binds), cli_error(CLI_USAGE, "profile: --against-skip needs names");
            against_skip = val;
        } else if (cli_opt(argc, argv, &i, "--with", &val)) {
            if (!val || nwith == 16)
                return cli_binds_free(&binds), cli_error(CLI_USAGE, "profile: --with needs a file (16 at most)");
            with[nwith++] = val;
        } else if (cli_opt(argc, argv, &i, "--input", &val)) {
            if (!val || !cli_binds_add(&binds, val)) return cli_binds_free(&binds), CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--cache", &val)) {
            if (!val) return cli_binds_free(&binds), cli_error(CLI_USAGE, "profile: --cache needs a file");
            cache = val;
        } else if (cli_opt(argc, argv, &i, "--iters", &val)) {
            if (!val || !cli_parse_int("--iters", val, 1, 100000, &iters)) return cli_binds_free(&binds), CLI_USAGE;
        } else if (!cli_model_arg("profile", argv[i], &model)) {
            return cli_binds_free(&binds), CLI_USAGE;
        }
    }
    if (!model) {
        cli_binds_free(&binds);
        fputs(USAGE, stderr);
        return CLI_USAGE;
    }
    int rc = CLI_FAIL;
    ts_error err = {0};
    ts_costdb *db = NULL;
    int *group_of = NULL;
    xcost_src *isrc_of = NULL;
    double *iso_of = NULL;
    row *rows = NULL;
    int nrows = 0;
    sroof roof = {0};
    if (nwith && !do_predict) {
        cli_binds_free(&binds);
        return cli_error(CLI_USAGE, "profile: --with goes with --predict");
    }
    if (do_predict + do_context + only_roofline + (against_skip != NULL) > 1) {
        cli_binds_free(&binds);
        return cli_error(CLI_USAGE, "profile: --predict, --context, --roofline and --against-skip are separate runs");
    }
    ts_graph *g = do_predict ? NULL : cli_load_model(model, &binds);
    if ((!g && !do_predict) || (g && !cli_mem_ok(g))) goto done;
    /* the groups the runtime runs (graph optimization level all, as tsopt
     * bench and the optimizer's costs: a spelled-out GELU is the MatMul's
     * post-op, not a step of its own); --roofline applies it itself */
    if (g && !only_roofline && ts_graph_opt_apply(g, TS_GRAPH_OPT_ALL, &err) < 0) {
        rc = cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    if (against_skip) {
        rc = cli_profile_ab(g, against_skip, iters, use_min, json);
        goto done;
    }
    if (ts_costdb_open(cache, &db, &err)) {
        rc = cli_error_from(CLI_USAGE, &err);
        goto done;
    }
    if (do_predict) {
        rc = predict(model, &binds, with, nwith, db, json);
        goto done;
    }
    if (do_context) {
        rc = context_check(model, g, db, iters, json);
        goto done;
    }
    if (only_roofline) {
        xroof_machine mach;
        if (xcost_machine(db, false, &mach, &err) || roofline_measure(g, iters, use_min, &roof, &err) ||
            ts_costdb_save(db, &err)) {
            cli_error_from(CLI_FAIL, &err);
            goto done;
        }
        double pf = mach.gflops, pc = xroof_flop_ceiling(&mach), pb = mach.gbps[XROOF_DRAM];
        if (json) {
            printf("{\"model\": \"%s\", \"peak_gflops\": %.2f, \"ceiling_gflops\": %.2f, \"peak_gbps\": %.2f", model,
                   pf, pc, pb);
            roofline_print(&roof, &mach, true);
            printf("}\n");
        } else {
            printf("model: %s\n", model);
            print_peak(pf, pc, pb);
            roofline_print(&roof, &mach, false);
        }
        rc = CLI_OK;
        goto done;
    }
    group_of = malloc(sizeof *group_of * ((size_t)g->nnodes + 1));
    rows = calloc((size_t)g->nnodes + 1, sizeof *rows);
    isrc_of = calloc((size_t)g->nnodes + 1, sizeof *isrc_of);
    iso_of = calloc((size_t)g->nnodes + 1, sizeof *iso_of);
    if (!group_of || !rows || !isrc_of || !iso_of || xcost_groups(g, group_of)) {
        cli_error(CLI_FAIL, "out of memory");
        goto done;
    }
    xroof_machine mach;
    if (xcost_machine(db, false, &mach, &err)) {
        cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    /* the groups' roofline sum against the same FLOP ceiling as the step
     * table's limits; the peak printed is the peak */
    double gflops = mach.gflops, ceiling = xroof_flop_ceiling(&mach), gbps = mach.gbps[XROOF_DRAM];
    double sum = 0, sum_roof = 0, sum_iso = 0;
    int groups = 0, nmeas = 0, ncached = 0, nroof = 0, nfree = 0, nplan = 0;
    /* isolated first (fills the cache for groups the optimizer may meet
     * elsewhere), then the whole plan with the step timer */
    for (int n = 0; n < g->nnodes; n++) {
        if (group_of[n] != n) continue;
        xcost_src src;
        double ms = xcost_group_isolated(db, g, group_of, n, true, &src);
        isrc_of[n] = src;
        iso_of[n] = ms;
        sum_iso += ms;
        nmeas += src == XCOST_MEASURED, ncached += src == XCOST_CACHED, nroof += src == XCOST_ROOFLINE;
        nfree += src == XCOST_FREE;
    }
    xcost_plan_times pt;
    if (xcost_time_plan(db, g, 3, (int)iters, &pt, &err)) {
        cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    for (int n = 0; n < g->nnodes; n++) {
        if (group_of[n] != n) continue;
        xcost_src src, isrc = isrc_of[n];
        double ms = xcost_group(db, g, group_of, n, false, &src);
        int members[XCOST_MAX_GROUP], nm = xcost_members(g, group_of, n, members);
        double fl, by;
        xcost_group_work(g, members, nm, &fl, &by);
        if (src != XCOST_FREE) {
            double tf = fl / (ceiling * 1e6), tb = by / (gbps * 1e6);
            sum_roof += tf > tb ? tf : tb;
        }
        char label[160] = "";
        size_t k = 0;
        for (int m = 0; m < nm && k + 1 < sizeof label; m++)
            k += (size_t)snprintf(label + k, sizeof label - k, "%s%s", m ? "+" : "", g->nodes[members[m]].op->name);
        if (src == XCOST_FREE) snprintf(label, sizeof label, "(views: %s)", g->nodes[n].op->name);
        int r = 0;
        while (r < nrows && strcmp(rows[r].label, label)) r++;
        if (r == nrows) snprintf(rows[nrows++].label, sizeof rows[r].label, "%s", label);
        rows[r].count++;
        rows[r].ms += ms;
        rows[r].iso_ms += iso_of[n];
        rows[r].measured += isrc == XCOST_MEASURED;
        rows[r].cached += src == XCOST_CACHED;
        rows[r].roofline += src == XCOST_ROOFLINE;
        rows[r].plan += src == XCOST_PLAN;
        nplan += src == XCOST_PLAN;
        groups++;
        sum += ms;
    }
    if (ts_costdb_save(db, &err)) {
        cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    if (roofline_measure(g, iters, use_min, &roof, &err)) {
        cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    double e2e = pt.plain_ms; /* timer off, paired with the timed runs */
    double errp = 100.0 * (sum - e2e) / e2e, errr = 100.0 * (sum_roof - e2e) / e2e,
           erri = 100.0 * (sum_iso - e2e) / e2e;
    qsort(rows, (size_t)nrows, sizeof *rows, cmp_row);
    if (json) {
        printf("{\"model\": \"%s\", \"groups\": %d, \"measured\": %d, \"cached\": %d, \"roofline\": %d, \"free\": %d, "
               "\"sum_ms\": %.4f, \"roofline_sum_ms\": %.4f, \"e2e_ms\": %.4f, \"error_pct\": %.2f, "
               "\"roofline_error_pct\": %.2f, \"peak_gflops\": %.2f, \"ceiling_gflops\": %.2f, \"peak_gbps\": %.2f, "
               "\"in_plan\": %d, "
               "\"isolated_sum_ms\": %.4f, \"isolated_error_pct\": %.2f, \"plan_steps\": %d, "
               "\"plan_steps_ms\": %.4f, \"plan_medians_ms\": %.4f, \"plan_run_ms\": %.4f, \"plan_unowned_ms\": %.4f",
               model, groups, nmeas, ncached, nroof, nfree, sum, sum_roof, e2e, errp, errr, gflops, ceiling, gbps, nplan,
               sum_iso, erri, pt.steps, pt.steps_ms, pt.medians_ms, pt.run_ms, pt.unowned_ms);
        roofline_print(&roof, &mach, true);
        printf("}\n");
    } else {
        printf("model: %s\ncache: %s (%d entries, %d new measurements)\n", model, xcost_db_path(db),
               xcost_db_size(db), xcost_db_measured(db));
        print_peak(gflops, ceiling, gbps);
        printf("%-48s %6s %10s %6s %12s  %s\n", "group (fused ops)", "count", "total ms", "share", "isolated ms",
               "source");
        for (int r = 0; r < nrows; r++)
            printf("%-48.48s %6d %10.3f %5.1f%% %12.3f  %d measured, %d cached, %d roofline, %d in-plan\n",
                   rows[r].label, rows[r].count, rows[r].ms, sum > 0 ? 100 * rows[r].ms / sum : 0, rows[r].iso_ms,
                   rows[r].measured,
                   rows[r].cached, rows[r].roofline, rows[r].plan);
        printf("groups: %d (%d measured now, %d cached, %d roofline, %d free views; %d timed in the plan)\n", groups,
               nmeas, ncached, nroof, nfree, nplan);
        printf("in-plan: %d steps, steps sum %.3f ms (median run), timed runs median %.3f ms, %.3f ms in no group\n",
               pt.steps, pt.steps_ms, pt.run_ms, pt.unowned_ms);
        printf("isolated sum: %.3f ms (error %+.1f%%)\n", sum_iso, erri);
        printf("sum of costs: %.3f ms   roofline sum: %.3f ms\n", sum, sum_roof);
        printf("end-to-end:   %.3f ms (median of %ld runs, paired with the timed ones)\n", e2e, iters);
        printf("prediction error: %+.1f%% (roofline: %+.1f%%)\n", errp, errr);
        roofline_print(&roof, &mach, false);
    }
    rc = CLI_OK;
done:
    sroof_free(&roof);
    free(group_of);
    free(isrc_of);
    free(iso_of);
    free(rows);
    ts_costdb_free(db);
    ts_graph_free(g);
    cli_binds_free(&binds);
    return rc;
}

int cli_peak(int argc, char **argv)
{
    const char *cache = NULL, *val;
    bool json = false, again = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            return CLI_OK;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--remeasure")) {
            again = true;
        } else if (cli_opt(argc, argv, &i, "--cache", &val)) {
            if (!val) return cli_error(CLI_USAGE, "peak: --cache needs a file");
            cache = val;
        } else {
            return cli_error(CLI_USAGE, "peak: unknown argument '%s' (try 'tsopt peak --help')", argv[i]);
        }
    }
    ts_error err = {0};
    ts_costdb *db = NULL;
    double gflops, gbps, parts[XCOST_PEAK_PARTS] = {0};
    char cpu[256];
    if (ts_costdb_open(cache, &db, &err)) return cli_error_from(CLI_USAGE, &err);
    int rc = CLI_OK;
    if ((again ? xcost_peak_measure(db, parts, &gflops, &gbps, &err) : xcost_peak(db, &gflops, &gbps, &err)) ||
        ts_costdb_save(db, &err)) {
        rc = cli_error_from(CLI_FAIL, &err);
    } else {
        xcost_cpu_id(cpu, sizeof cpu);
        xroof_machine m;
        xroof_overhead oh = {0};
        if (xcost_machine(db, again, &m, &err) || ts_costdb_save(db, &err) || xroof_measure_overhead(&oh, &err)) {
            ts_costdb_free(db);
            return cli_error_from(CLI_FAIL, &err);
        }
        const double split = xroof_split_min_bytes(&m, &oh);
        if (json)
            printf("{\"cpu\": \"%s\", \"peak_gflops\": %.2f, \"peak_gbps\": %.2f, \"matmul1024_gflops\": %.2f, "
                   "\"matmul2048_gflops\": %.2f, \"conv_gflops\": %.2f, \"copy_gbps\": %.2f, \"triad_gbps\": %.2f, "
                   "\"l1d_bytes\": %ld, \"l2_bytes\": %ld, \"l3_bytes\": %ld, \"l1_gbps\": %.2f, \"l2_gbps\": %.2f, "
                   "\"l3_gbps\": %.2f, \"fma_gflops\": %.2f, \"int8_gops\": %.2f, \"step_eltwise_us\": %.3f, "
                   "\"step_conv_us\": %.3f, \"omp_region_us\": %.3f, \"threads\": %d, \"split_min_bytes\": %.0f, "
                   "\"kernel_split_min_bytes\": %lld}\n",
                   cpu, gflops, gbps, parts[0], parts[1], parts[2], parts[3], parts[4], m.caches.l1d, m.caches.l2,
                   m.caches.l3, m.gbps[XROOF_L1], m.gbps[XROOF_L2], m.gbps[XROOF_L3], m.fma_gflops, m.int8_gops,
                   oh.eltwise_us, oh.conv_us, oh.region_us, oh.threads, split,
                   oh.threads > 1 ? (long long)xv_split_min_bytes(oh.threads) : 0LL);
        else
            printf("cpu: %s\npeak: %.1f GFLOP/s (best of 1024^3, 2048^3 matmul, 3x3 conv), %.1f GB/s (best of STREAM "
                   "copy, triad)\ncaches: L1d %ld KiB, L2 %ld KiB, last level %ld KiB (per sysconf, clamped); bandwidth "
                   "on %d threads: L1 %.1f, L2 %.1f, L3 %.1f GB/s; FMA units %.1f GFLOP/s (the per-step limit's FLOP "
                   "ceiling when above the peak); 8-bit products %.1f GOP/s (u8 x s8 1024^3 MatMulInteger)\n"
                   "per step: %.2f us (tiny element-wise step), %.2f us (tiny oneDNN conv), %.2f us per parallel "
                   "region on %d threads (measured now, not cached)\n",
                   cpu, gflops, gbps, m.caches.l1d >> 10, m.caches.l2 >> 10, m.caches.l3 >> 10, m.threads, m.gbps[XROOF_L1],
                   m.gbps[XROOF_L2], m.gbps[XROOF_L3], m.fma_gflops, m.int8_gops, oh.eltwise_us, oh.conv_us,
                   oh.region_us, oh.threads);
        if (!json && split > 0)
            printf("a memory-bound step pays for splitting from %.0f KiB moved (region x %d / %d at the L2's %.1f GB/s "
                   "per core); the vec kernels that only move data split from %.0f KiB (measured at their first build "
                   "in this process, or TSOPT_SPLIT_MIN_BYTES)\n",
                   split / 1024, oh.threads, oh.threads - 1, m.gbps[XROOF_L2] / (m.threads > 0 ? m.threads : 1),
                   (double)xv_split_min_bytes(oh.threads) / 1024);
        if (!json && again)
            printf("this run: matmul 1024^3 %.1f, matmul 2048^3 %.1f, conv 3x3 256ch 56x56 %.1f GFLOP/s; copy %.1f, "
                   "triad %.1f GB/s\n",
                   parts[0], parts[1], parts[2], parts[3], parts[4]);
    }
    ts_costdb_free(db);
    return rc;
}
