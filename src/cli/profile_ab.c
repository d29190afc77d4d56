/* tsopt profile MODEL --against-skip NAME,...: one kernel's A/B per step,
 * in one process.
 *
 * Why: on a loaded machine the fastest run of a step drifts by 2-3x between
 * processes a minute apart (a 112x112 depthwise step of one binary:
 * 0.075 ms in one `tsopt profile --roofline --min`, 0.19 in the next, 2-core
 * Xeon at load 15-18, 12-07), so minima of two separate runs compare the
 * machine's moments, not the kernels.  Here plan A (MODEL as `tsopt bench`
 * runs it) and plan B (the same graph, NAME,... skipped as with $TSOPT_SKIP)
 * run alternately, A B or B A by a coin per pair, each step timed
 * (xplan_step_timer): both see the same moments, and the per-step ratios
 * held within a few percent across repeats where the separate runs swung
 * 2x.  Steps are matched by the graph node they are named after. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cost/cost.h"
#include "measure/step_timer.h"
#include "util/clock.h"

static int cmp_ms(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct abside {
    ts_plan *plan;
    int steps;
    double *t;   /* iters x steps, step times of each timed run */
    double *run; /* iters, whole runs */
    double *ms;  /* per step: the statistic */
    double run_ms, sum_ms;
} abside;

/* The median (or the fastest, use_min) of n values, sorting them. */
static double stat(double *v, long n, bool use_min)
{
    qsort(v, (size_t)n, sizeof *v, cmp_ms);
    return v[use_min ? 0 : n / 2];
}

int cli_profile_ab(const ts_graph *g0, const char *skip, long iters, bool use_min, bool json)
{
    int rc = CLI_FAIL;
    ts_error err = {0};
    ts_graph *g = ts_graph_copy(g0);
    int nin = g0->ninputs, nout = g0->noutputs;
    ts_tensor **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out);
    double *col = malloc(sizeof *col * ((size_t)iters + 1));
    abside s[2] = {{0}, {0}};
    ts_plan_opts o[2] = {{0}, {0}};
    o[1].skip = skip;
    if (!g || !in || !out || !col) {
        cli_error(CLI_FAIL, "out of memory");
        goto done;
    }
    if (ts_graph_opt_apply(g, TS_GRAPH_OPT_ALL, &err) < 0 || xcost_io_new(g, in, out, &err) ||
        ts_plan_build(g, &o[0], &s[0].plan, &err) || ts_plan_build(g, &o[1], &s[1].plan, &err)) {
        cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    for (int k = 0; k < 2; k++) {
        s[k].steps = xplan_step_count(s[k].plan);
        s[k].t = calloc((size_t)s[k].steps * (size_t)iters + 1, sizeof *s[k].t);
        s[k].run = calloc((size_t)iters + 1, sizeof *s[k].run);
        s[k].ms = calloc((size_t)s[k].steps + 1, sizeof *s[k].ms);
        if (!s[k].t || !s[k].run || !s[k].ms) {
            cli_error(CLI_FAIL, "out of memory");
            goto done;
        }
        for (int w = 0; w < 3; w++)
            if (ts_plan_run(s[k].plan, in, out, &err)) {
                cli_error_from(CLI_FAIL, &err);
                goto done;
            }
    }
    uint64_t coin = 0x9e3779b97f4a7c15ull;
    for (long it = 0; it < iters; it++) {
        coin ^= coin << 13, coin ^= coin >> 7, coin ^= coin << 17;
        for (int h = 0; h < 2; h++) {
            int k = h ^ (int)(coin & 1);
            xplan_step_timer(s[k].plan, s[k].t + (size_t)it * (size_t)s[k].steps);
            double t0 = ts_clock_ms();
            ts_status st = ts_plan_run(s[k].plan, in, out, &err);
            s[k].run[it] = ts_clock_ms() - t0; /* with the timer's own cost, the same for both */
            xplan_step_timer(s[k].plan, NULL);
            if (st) {
                cli_error_from(CLI_FAIL, &err);
                goto done;
            }
        }
    }
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < s[k].steps; i++) {
            for (long it = 0; it < iters; it++) col[it] = s[k].t[(size_t)it * (size_t)s[k].steps + (size_t)i];
            s[k].ms[i] = stat(col, iters, use_min);
            s[k].sum_ms += s[k].ms[i];
        }
        s[k].run_ms = stat(s[k].run, iters, use_min);
    }
    /* B's step named after the same node as A's step i (-1: none) */
    int *match = malloc(sizeof *match * ((size_t)s[0].steps + 1));
    bool *used = calloc((size_t)s[1].steps + 1, sizeof *used);
    if (!match || !used) {
        free(match);
        free(used);
        cli_error(CLI_FAIL, "out of memory");
        goto done;
    }
    for (int i = 0; i < s[0].steps; i++) {
        match[i] = -1;
        int n = xplan_step_node(s[0].plan, i);
        for (int j = 0; j < s[1].steps && match[i] < 0; j++)
            if (!used[j] && xplan_step_node(s[1].plan, j) == n &&
                xplan_step_is_boundary(s[1].plan, j) == xplan_step_is_boundary(s[0].plan, i))
                match[i] = j, used[j] = true;
    }
    const char *what = use_min ? "fastest" : "median";
    if (json) {
        printf("{\"skip\": \"%s\", \"stat\": \"%s\", \"iters\": %ld, \"a_steps\": %d, \"b_steps\": %d, "
               "\"a_sum_ms\": %.5f, \"b_sum_ms\": %.5f, \"a_run_ms\": %.5f, \"b_run_ms\": %.5f, \"steps\": [",
               skip, what, iters, s[0].steps, s[1].steps, s[0].sum_ms, s[1].sum_ms, s[0].run_ms, s[1].run_ms);
        bool first = true;
        for (int i = 0; i < s[0].steps; i++) {
            int n = xplan_step_node(s[0].plan, i), j = match[i];
            printf("%s{\"node\": \"%s\", \"a_kernel\": \"%s\", \"a_ms\": %.5f", first ? "" : ", ",
                   n >= 0 ? g->nodes[n].name : "", xplan_step_kernel(s[0].plan, i), s[0].ms[i]);
            if (j >= 0) printf(", \"b_kernel\": \"%s\", \"b_ms\": %.5f", xplan_step_kernel(s[1].plan, j), s[1].ms[j]);
            printf("}");
            first = false;
        }
        for (int j = 0; j < s[1].steps; j++) {
            if (used[j]) continue;
            int n = xplan_step_node(s[1].plan, j);
            printf("%s{\"node\": \"%s\", \"b_kernel\": \"%s\", \"b_ms\": %.5f}", first ? "" : ", ",
                   n >= 0 ? g->nodes[n].name : "", xplan_step_kernel(s[1].plan, j), s[1].ms[j]);
            first = false;
        }
        printf("]}\n");
    } else {
        printf("A: the plan tsopt bench runs; B: the same with %s skipped; %ld runs each, alternating; per step "
               "the %s run, ms\n",
               skip, iters, what);
        printf(" step kernel A          kernel B          node                                     A ms     B ms"
               "    A/B\n");
        for (int i = 0; i < s[0].steps; i++) {
            int n = xplan_step_node(s[0].plan, i), j = match[i];
            printf("%5d %-17.17s %-17.17s %-38.38s %8.4f ", i, xplan_step_kernel(s[0].plan, i),
                   j >= 0 ? xplan_step_kernel(s[1].plan, j) : "-", n >= 0 ? g->nodes[n].name : "(graph input)",
                   s[0].ms[i]);
            if (j >= 0)
                printf("%8.4f %6.3f\n", s[1].ms[j], s[1].ms[j] > 0 ? s[0].ms[i] / s[1].ms[j] : 0);
            else
                printf("       -      -\n");
        }
        for (int j = 0; j < s[1].steps; j++) {
            if (used[j]) continue;
            int n = xplan_step_node(s[1].plan, j);
            printf("    - %-17s %-17.17s %-38.38s        - %8.4f      -\n", "-", xplan_step_kernel(s[1].plan, j),
                   n >= 0 ? g->nodes[n].name : "(graph input)", s[1].ms[j]);
        }
        printf("sum of the steps: A %.4f ms (%d steps), B %.4f ms (%d steps), A/B %.3f; whole runs (timed): A %.4f, "
               "B %.4f, A/B %.3f\n",
               s[0].sum_ms, s[0].steps, s[1].sum_ms, s[1].steps, s[0].sum_ms / s[1].sum_ms, s[0].run_ms, s[1].run_ms,
               s[0].run_ms / s[1].run_ms);
    }
    free(match);
    free(used);
    rc = CLI_OK;
done:
    for (int k = 0; k < 2; k++) {
        ts_plan_free(s[k].plan);
        free(s[k].t);
        free(s[k].run);
        free(s[k].ms);
    }
    for (int i = 0; i < nin; i++)
        if (in) ts_tensor_unref(in[i]);
    for (int i = 0; i < nout; i++)
        if (out) ts_tensor_unref(out[i]);
    free(in);
    free(out);
    free(col);
    ts_graph_free(g);
    return rc;
}
