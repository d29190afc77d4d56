/* The op-cost model (src/cost/cost.c, cost_key.c): cache round trip, key
 * stability, fusion groups, roofline monotonicity, measured costs, and that
 * a graph's cost is the sum of its nodes' costs; the per-step timer and
 * in-plan costs; the peak. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cost/cost.h"
#include "measure/step_timer.h"
#include "util/clock.h"

static char dir[] = "/tmp/tsopt-cost-XXXXXX";

static void setup(void) { cr_assert(mkdtemp(dir)); }
static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}
TestSuite(cost, .init = setup, .fini = teardown);

static void cache_path(char *buf, size_t n) { snprintf(buf, n, "%s/costs.tsv", dir); }

static int input(ts_graph *g, const char *name, const char *dims)
{
    ts_error e = {0};
    ts_shape s;
    cr_assert_eq(ts_shape_parse(dims, &s, &e), TS_OK, "%s", e.msg);
    int v = ts_graph_add_input(g, name, TS_F32, &s, &e);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static int weight(ts_graph *g, const char *name, const char *dims)
{
    ts_error e = {0};
    ts_shape s;
    cr_assert_eq(ts_shape_parse(dims, &s, &e), TS_OK, "%s", e.msg);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    uint64_t rng = 7;
    ts_tensor_fill_random(t, &rng, -1, 1);
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static int node(ts_graph *g, const char *op, const int *in, int nin, const ts_attr *a, int na)
{
    ts_error e = {0};
    int out;
    cr_assert(ts_graph_add_node(g, op, NULL, in, nin, a, na, 1, NULL, &out, &e) >= 0, "%s", e.msg);
    return out;
}

/* x -> MatMul(W) -> Add(b) -> Relu -> MatMul(W2) -> Softmax */
static ts_graph *mlp(int64_t hidden)
{
    ts_graph *g = ts_graph_new("mlp", 17);
    char d[64];
    int x = input(g, "x", "8x64");
    snprintf(d, sizeof d, "64x%lld", (long long)hidden);
    int w = weight(g, "w", d);
    snprintf(d, sizeof d, "%lld", (long long)hidden);
    int b = weight(g, "b", d);
    snprintf(d, sizeof d, "%lldx32", (long long)hidden);
    int w2 = weight(g, "w2", d);
    int h = node(g, "MatMul", (int[]){x, w}, 2, NULL, 0);
    h = node(g, "Add", (int[]){h, b}, 2, NULL, 0);
    h = node(g, "Relu", &h, 1, NULL, 0);
    h = node(g, "MatMul", (int[]){h, w2}, 2, NULL, 0);
    h = node(g, "Softmax", &h, 1, NULL, 0);
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, h, &e), TS_OK, "%s", e.msg);
    return g;
}

static ts_costdb *open_db(void)
{
    char p[256];
    ts_error e = {0};
    ts_costdb *db = NULL;
    cache_path(p, sizeof p);
    cr_assert_eq(ts_costdb_open(p, &db, &e), TS_OK, "%s", e.msg);
    return db;
}

Test(cost, groups_follow_fusion)
{
    ts_graph *g = mlp(16);
    int grp[5];
    cr_assert_eq(xcost_groups(g, grp), TS_OK);
    /* MatMul absorbs Add and Relu; the second MatMul and Softmax stand alone */
    cr_assert_eq(grp[0], 0);
    cr_assert_eq(grp[1], 0);
    cr_assert_eq(grp[2], 0);
    cr_assert_eq(grp[3], 3);
    cr_assert_eq(grp[4], 4);
    int m[XCOST_MAX_GROUP];
    cr_assert_eq(xcost_members(g, grp, 0, m), 3);
    cr_assert_eq(m[1], 1);
    cr_assert_eq(m[2], 2);
    ts_graph_free(g);
}

Test(cost, key_stable_and_attribute_sensitive)
{
    ts_graph *g = ts_graph_new("k", 17);
    int x = input(g, "x", "4x10");
    int a = node(g, "Softmax", &x, 1, (ts_attr[]){ts_attr_int("axis", 1)}, 1);
    int b = node(g, "Softmax", &x, 1, (ts_attr[]){ts_attr_int("axis", 1)}, 1);
    int c = node(g, "Softmax", &x, 1, (ts_attr[]){ts_attr_int("axis", 0)}, 1);
    (void)a, (void)b, (void)c;
    char *k0 = xcost_key(g, (int[]){0}, 1), *k0b = xcost_key(g, (int[]){0}, 1);
    char *k1 = xcost_key(g, (int[]){1}, 1), *k2 = xcost_key(g, (int[]){2}, 1);
    cr_assert_str_eq(k0, k0b);
    cr_assert_str_eq(k0, k1, "same op, attributes and shapes: same key");
    cr_assert_str_neq(k0, k2, "axis differs: keys must differ");
    cr_assert(strstr(k0, "Softmax") && strstr(k0, "4x10"));
    cr_assert(!strchr(k0, '\t') && !strchr(k0, '\n'));
    free(k0), free(k0b), free(k1), free(k2);
    ts_graph_free(g);
}

Test(cost, cache_round_trip)
{
    ts_graph *g = mlp(16);
    ts_costdb *db = open_db();
    ts_error e = {0};
    double c = ts_cost_node(db, g, 0, true);
    cr_assert_gt(c, 0);
    cr_assert_gt(xcost_db_measured(db), 0);
    cr_assert_eq(ts_costdb_save(db, &e), TS_OK, "%s", e.msg);
    ts_costdb_free(db);
    db = open_db();
    double c2 = ts_cost_node(db, g, 0, false);
    cr_assert_eq(c2, c, "cached cost %g, measured %g", c2, c);
    cr_assert_eq(xcost_db_measured(db), 0, "nothing new to measure");
    ts_costdb_free(db);
    ts_graph_free(g);
}

Test(cost, roofline_positive_and_monotone)
{
    ts_costdb *db = open_db();
    double prev = 0;
    for (int64_t hidden = 64; hidden <= 4096; hidden *= 4) {
        ts_graph *g = mlp(hidden);
        /* measure=false and an empty cache: the roofline estimate */
        double c = ts_cost_node(db, g, 3, false);
        cr_assert_gt(c, prev, "hidden %lld: %g not above %g", (long long)hidden, c, prev);
        prev = c;
        ts_graph_free(g);
    }
    double gf, gb;
    ts_error e = {0};
    cr_assert_eq(xcost_peak(db, &gf, &gb, &e), TS_OK, "%s", e.msg);
    cr_assert_gt(gf, 0);
    cr_assert_gt(gb, 0);
    ts_costdb_free(db);
}

Test(cost, graph_cost_is_sum_of_node_costs)
{
    ts_graph *g = mlp(32);
    ts_costdb *db = open_db();
    double total = ts_cost_graph(db, g, true), sum = 0;
    cr_assert_gt(total, 0);
    for (int n = 0; n < g->nnodes; n++) {
        double c = ts_cost_node(db, g, n, false);
        cr_assert_geq(c, 0);
        if (n == 1 || n == 2) cr_assert_eq(c, 0, "absorbed nodes cost nothing");
        if (n == 0 || n == 3 || n == 4) cr_assert_gt(c, 0, "measured cost of node %d", n);
        sum += c;
    }
    cr_assert_float_eq(total, sum, 1e-12 * total);
    ts_costdb_free(db);
    ts_graph_free(g);
}

Test(cost, other_cpu_cache_ignored)
{
    char p[256];
    cache_path(p, sizeof p);
    FILE *f = fopen(p, "w");
    cr_assert(f);
    fprintf(f, "# cpu\tsome other machine x999\nfoo\t1.5\t1\n");
    fclose(f);
    ts_costdb *db = open_db();
    cr_assert_eq(xcost_db_size(db), 0);
    ts_costdb_free(db);
    f = fopen(p, "w");
    fprintf(f, "no tabs here\n");
    fclose(f);
    ts_error e = {0};
    ts_costdb *bad = NULL;
    cr_assert_eq(ts_costdb_open(p, &bad, &e), TS_ERR_PARSE);
    cr_assert(strstr(e.msg, "line 1"), "%s", e.msg);
    cr_assert_null(bad);
}

/* A convolution fed by a convolution is measured in the producer's layout:
 * the pair minus the producer, under a key naming both. */
Test(cost, conv_after_conv_keyed_as_pair)
{
    ts_graph *g = ts_graph_new("cc", 17);
    int x = input(g, "x", "1x8x16x16");
    int w1 = weight(g, "w1", "8x8x3x3"), w2 = weight(g, "w2", "8x8x3x3");
    ts_attr pads = ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4);
    int h = node(g, "Conv", (int[]){x, w1}, 2, &pads, 1);
    h = node(g, "Relu", &h, 1, NULL, 0);
    h = node(g, "Conv", (int[]){h, w2}, 2, &pads, 1);
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, h, &e), TS_OK, "%s", e.msg);
    ts_costdb *db = open_db();
    double total = ts_cost_graph(db, g, true);
    cr_assert_gt(total, 0);
    cr_assert_geq(ts_cost_node(db, g, 2, false), 0);
    cr_assert_eq(ts_cost_node(db, g, 1, false), 0, "relu is fused into the first conv");
    cr_assert_eq(ts_costdb_save(db, &e), TS_OK, "%s", e.msg);
    ts_costdb_free(db);
    char p[256], line[4096];
    cache_path(p, sizeof p);
    FILE *f = fopen(p, "r");
    bool pair = false, out = false;
    while (fgets(line, sizeof line, f)) {
        pair |= strstr(line, " => Conv") != NULL;
        out |= strstr(line, "=out") != NULL;
    }
    fclose(f);
    cr_assert(pair, "no PRODUCER => GROUP key in the cache");
    cr_assert(out, "the model's output is not marked in its key");
    ts_graph_free(g);
}

/* A pooling fed by a convolution reads its blocked output in the model:
 * measured as the pair minus the convolution, like a conv after a conv. */
Test(cost, pool_after_conv_keyed_as_pair)
{
    ts_graph *g = ts_graph_new("cp", 17);
    int x = input(g, "x", "1x8x16x16");
    int w = weight(g, "w", "16x8x3x3");
    ts_attr pads = ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4);
    int h = node(g, "Conv", (int[]){x, w}, 2, &pads, 1);
    ts_attr pool[2] = {ts_attr_ints("kernel_shape", (int64_t[]){2, 2}, 2), ts_attr_ints("strides", (int64_t[]){2, 2}, 2)};
    h = node(g, "MaxPool", &h, 1, pool, 2);
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, h, &e), TS_OK, "%s", e.msg);
    int grp[2];
    cr_assert_eq(xcost_groups(g, grp), TS_OK);
    char *k = xcost_group_key(g, grp, 1), *k2 = xcost_group_key(g, grp, 1), *k0 = xcost_group_key(g, grp, 0);
    cr_assert(k && k2 && k0);
    cr_assert(strstr(k, "Conv") && strstr(k, " => MaxPool"), "%s", k);
    cr_assert_str_eq(k, k2, "keys are stable");
    cr_assert_null(strstr(k0, "=>"), "a conv on a graph input has no layout producer: %s", k0);
    free(k), free(k2), free(k0);
    ts_graph_free(g);
}

/* x[64x256] -> MatMul+Relu -> MatMul -> Softmax: a few steps heavy enough
 * that the time between them is small. */
static ts_graph *heavy_mlp(void)
{
    ts_graph *g = ts_graph_new("heavy", 17);
    int x = input(g, "x", "64x256");
    int w = weight(g, "w", "256x512"), w2 = weight(g, "w2", "512x256");
    int h = node(g, "MatMul", (int[]){x, w}, 2, NULL, 0);
    h = node(g, "Relu", &h, 1, NULL, 0);
    h = node(g, "MatMul", (int[]){h, w2}, 2, NULL, 0);
    h = node(g, "Softmax", &h, 1, NULL, 0);
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, h, &e), TS_OK, "%s", e.msg);
    return g;
}

Test(cost, step_timer_sums_to_the_run)
{
    ts_graph *g = heavy_mlp();
    ts_error e = {0};
    ts_plan *p = NULL;
    ts_plan_opts o = {0};
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    int ns = xplan_step_count(p);
    cr_assert_geq(ns, 3);
    double *ms = malloc(sizeof *ms * (size_t)ns);
    for (int i = 0; i < ns; i++) {
        ms[i] = -1;
        cr_assert(xplan_step_kernel(p, i) != NULL);
        cr_assert_lt(xplan_step_node(p, i), g->nnodes);
    }
    ts_tensor *x = ts_tensor_new(TS_F32, &g->values[g->inputs[0]].shape, &e);
    ts_tensor *y = ts_tensor_new(TS_F32, &g->values[g->outputs[0]].shape, &e);
    uint64_t rng = 3;
    ts_tensor_fill_random(x, &rng, -1, 1);
    cr_assert_eq(ts_plan_run(p, &x, &y, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < ns; i++) cr_assert_eq(ms[i], -1, "timer off: nothing written");
    /* the sum of steps never exceeds the run, and is most of it (the best
     * of a few runs: a preemption between two steps is not the timer's) */
    xplan_step_timer(p, ms);
    double best = 1;
    for (int r = 0; r < 5; r++) {
        double t0 = ts_clock_ms();
        cr_assert_eq(ts_plan_run(p, &x, &y, &e), TS_OK, "%s", e.msg);
        double run = ts_clock_ms() - t0, sum = 0;
        for (int i = 0; i < ns; i++) {
            cr_assert_geq(ms[i], 0);
            sum += ms[i];
        }
        cr_assert_leq(sum, run * (1 + 1e-9), "steps %g ms > run %g ms", sum, run);
        double gap = (run - sum) / run;
        best = gap < best ? gap : best;
    }
    cr_assert_lt(best, 0.5, "at best %.0f%% of a run is outside its steps", 100 * best);
    xplan_step_timer(p, NULL);
    ms[0] = -1;
    cr_assert_eq(ts_plan_run(p, &x, &y, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ms[0], -1, "timer switched off again");
    ts_tensor_unref(x);
    ts_tensor_unref(y);
    free(ms);
    ts_plan_free(p);
    ts_graph_free(g);
}

/* In-plan costs: every non-view group gets one, they add up to the step
 * medians, the graph's cost then uses them, and they survive a save/open. */
Test(cost, plan_times_cached_and_summed)
{
    ts_graph *g = heavy_mlp();
    ts_costdb *db = open_db();
    ts_error e = {0};
    xcost_plan_times r;
    cr_assert_eq(xcost_time_plan(db, g, 1, 5, &r, &e), TS_OK, "%s", e.msg);
    cr_assert_geq(r.steps, 3);
    cr_assert_eq(r.groups, 3, "MatMul+Relu, MatMul, Softmax");
    cr_assert_gt(r.steps_ms, 0);
    cr_assert_gt(r.plain_ms, 0);
    cr_assert_eq(r.unowned_ms, 0);
    cr_assert_eq(xcost_db_measured(db), 0, "no isolated measurement");
    cr_assert_eq(xcost_db_size(db), 3);
    int grp[4];
    cr_assert_eq(xcost_groups(g, grp), TS_OK);
    double sum = 0;
    for (int n = 0; n < g->nnodes; n++) {
        if (grp[n] != n) continue;
        xcost_src src;
        sum += xcost_group(db, g, grp, n, false, &src);
        cr_assert_eq(src, XCOST_PLAN, "node %d", n);
    }
    /* the groups' costs are the step medians, unscaled: with no unowned
     * step they add up to medians_ms, which a typical run's total bounds
     * loosely (the medians of the parts of a run are not its median, and
     * on a loaded machine under ASan a few slow runs pull the runs' total
     * up by 3x): the bound catches a unit or a double count, not speed */
    cr_assert_float_eq(sum, r.medians_ms, 1e-9 * r.medians_ms);
    cr_assert(sum > 0.1 * r.steps_ms && sum < 10 * r.steps_ms, "steps medians %g ms vs runs %g ms", sum, r.steps_ms);
    double total = ts_cost_graph(db, g, false);
    cr_assert_float_eq(total, sum, 1e-9 * sum);
    /* isolated costs are still there to be measured and do not change the
     * in-plan one */
    xcost_src src;
    double iso = xcost_group_isolated(db, g, grp, 0, true, &src);
    cr_assert_eq(src, XCOST_MEASURED);
    cr_assert_gt(iso, 0);
    cr_assert_float_eq(ts_cost_graph(db, g, false), total, 1e-9 * total);
    cr_assert_eq(ts_costdb_save(db, &e), TS_OK, "%s", e.msg);
    ts_costdb_free(db);
    db = open_db();
    cr_assert_eq(xcost_db_size(db), 4);
    double again = ts_cost_graph(db, g, false);
    cr_assert_float_eq(again, total, 1e-9 * total, "round trip: %g vs %g", again, total);
    cr_assert_eq(xcost_db_measured(db), 0);
    ts_costdb_free(db);
    ts_graph_free(g);
}

/* A peak is a maximum: measuring again under load never lowers it. */
Test(cost, peak_never_lowered)
{
    char p[256];
    cache_path(p, sizeof p);
    char cpu[256];
    xcost_cpu_id(cpu, sizeof cpu);
    FILE *f = fopen(p, "w");
    cr_assert(f);
    fprintf(f, "# cpu\t%s\n!peak_gflops\t1000000\t1\n!peak_gbps\t0.001\t1\n", cpu);
    fclose(f);
    ts_costdb *db = open_db();
    double gf, gb, parts[XCOST_PEAK_PARTS];
    ts_error e = {0};
    cr_assert_eq(xcost_peak(db, &gf, &gb, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(gf, 1e6, "cached peak used");
    cr_assert_eq(xcost_peak_measure(db, parts, &gf, &gb, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(gf, 1e6, "a lower measurement kept the higher peak");
    cr_assert_gt(gb, 0.001, "a higher measurement replaces the old one");
    for (int i = 0; i < XCOST_PEAK_PARTS; i++) cr_assert_gt(parts[i], 0, "part %d", i);
    ts_costdb_free(db);
}

/* ------------------------------------------------- costs in context */

static bool has_plan_time(ts_costdb *db, const ts_graph *g, const int *grp, int head)
{
    bool plan;
    xcost_cached_times(db, g, grp, head, NULL, &plan, NULL, NULL);
    return plan;
}

static bool has_ctx_time(ts_costdb *db, const ts_graph *g, const int *grp, int head)
{
    bool ctx;
    xcost_cached_times(db, g, grp, head, NULL, NULL, NULL, &ctx);
    return ctx;
}

/* conv -> relu -> flatten (a view) -> gemm -> output */
static ts_graph *conv_net(void)
{
    ts_graph *g = ts_graph_new("cn", 17);
    int x = input(g, "x", "1x8x16x16");
    int w = weight(g, "w", "8x8x3x3"), fw = weight(g, "fw", "2048x10");
    ts_attr pads = ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4);
    int h = node(g, "Conv", (int[]){x, w}, 2, &pads, 1);
    h = node(g, "Relu", &h, 1, NULL, 0);
    h = node(g, "Flatten", &h, 1, NULL, 0);
    h = node(g, "Gemm", (int[]){h, fw}, 2, NULL, 0);
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, h, &e), TS_OK, "%s", e.msg);
    return g;
}

/* Priming times the plan once: every non-view group gets an in-plan time,
 * and a cache that has them all is not timed again (once per machine). */
Test(cost, prime_gives_every_group_an_in_plan_time)
{
    ts_graph *g = conv_net();
    int grp[4];
    cr_assert_eq(xcost_groups(g, grp), TS_OK);
    ts_costdb *db = open_db();
    ts_error e = {0};
    cr_assert_eq(ts_cost_prime(db, g, &e), TS_OK, "%s", e.msg);
    int groups = 0;
    for (int n = 0; n < g->nnodes; n++) {
        if (grp[n] != n) continue;
        if (xcost_is_free(&g->nodes[n])) {
            cr_assert_not(has_plan_time(db, g, grp, n), "a view has no step");
            continue;
        }
        cr_assert(has_plan_time(db, g, grp, n), "group of node %d has no in-plan time", n);
        xcost_src src;
        xcost_group(db, g, grp, n, false, &src);
        cr_assert_eq(src, XCOST_PLAN);
        groups++;
    }
    cr_assert_eq(groups, 2, "Conv+Relu and Gemm");
    int measured = xcost_db_measured(db);
    cr_assert_gt(measured, 0);
    cr_assert_eq(ts_cost_prime(db, g, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(xcost_db_measured(db), measured, "primed twice");
    double c = ts_cost_graph(db, g, true);
    cr_assert_gt(c, 0);
    cr_assert_eq(xcost_db_measured(db), measured, "the primed graph has nothing new to time");
    cr_assert_eq(ts_costdb_save(db, &e), TS_OK, "%s", e.msg);
    ts_costdb_free(db);
    db = open_db();
    cr_assert_eq(ts_cost_prime(db, g, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(xcost_db_measured(db), 0, "a saved cache needs no priming");
    cr_assert_float_eq(ts_cost_graph(db, g, false), c, 1e-9 * c);
    ts_costdb_free(db);
    ts_graph_free(g);
}

/* heavy_mlp with its Softmax over the other axis: a rewrite with one new
 * group next to primed ones. */
static ts_graph *heavy_mlp_axis0(void)
{
    ts_graph *g = ts_graph_new("heavy2", 17);
    int x = input(g, "x", "64x256");
    int w = weight(g, "w", "256x512"), w2 = weight(g, "w2", "512x256");
    int h = node(g, "MatMul", (int[]){x, w}, 2, NULL, 0);
    h = node(g, "Relu", &h, 1, NULL, 0);
    h = node(g, "MatMul", (int[]){h, w2}, 2, NULL, 0);
    h = node(g, "Softmax", &h, 1, (ts_attr[]){ts_attr_int("axis", 0)}, 1);
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, h, &e), TS_OK, "%s", e.msg);
    return g;
}

/* After priming the original, a rewrite's new group is timed in context
 * (a cached "@ctx" time) and only it; the shared groups keep their in-plan
 * times; all of it survives a save with the CPU's line. */
Test(cost, new_group_timed_in_context)
{
    ts_graph *g = heavy_mlp(), *g2 = heavy_mlp_axis0();
    ts_costdb *db = open_db();
    ts_error e = {0};
    cr_assert_eq(ts_cost_prime(db, g, &e), TS_OK, "%s", e.msg);
    int before = xcost_db_measured(db);
    int grp[4];
    cr_assert_eq(xcost_groups(g2, grp), TS_OK);
    cr_assert_eq(grp[3], 3, "the Softmax is a group of its own");
    cr_assert_not(has_plan_time(db, g2, grp, 3));
    cr_assert_not(has_ctx_time(db, g2, grp, 3));
    double c = ts_cost_graph(db, g2, true);
    cr_assert_gt(c, 0);
    cr_assert_eq(xcost_db_measured(db), before + 1, "one new group, one measurement");
    for (int n = 0; n < g2->nnodes; n++) {
        if (grp[n] != n) continue;
        xcost_src src;
        xcost_group(db, g2, grp, n, false, &src);
        cr_assert_eq(src, n == 3 ? XCOST_CONTEXT : XCOST_PLAN, "node %d: source %d", n, (int)src);
    }
    /* its neighbourhood: the Softmax and the MatMul producing its input */
    xcost_ctx_stats r;
    double ms = -1;
    int head = 3;
    cr_assert_eq(xcost_ctx_measure(db, g2, grp, &head, 1, &ms, &r, &e), TS_OK, "%s", e.msg);
    cr_assert_geq(r.nodes, 2);
    cr_assert_gt(r.runs, 0);
    cr_assert_geq(ms, 0);
    cr_assert_eq(r.groups, 1);
    c = ts_cost_graph(db, g2, false); /* with the new group's time just measured */
    cr_assert_eq(ts_costdb_save(db, &e), TS_OK, "%s", e.msg);
    ts_costdb_free(db);
    char p[256], line[4096], cpu[256], want[300];
    cache_path(p, sizeof p);
    xcost_cpu_id(cpu, sizeof cpu);
    snprintf(want, sizeof want, "# cpu\t%s\n", cpu);
    FILE *f = fopen(p, "r");
    cr_assert(f);
    bool cpu_line = false, plan = false, ctx = false;
    while (fgets(line, sizeof line, f)) {
        cpu_line |= !strcmp(line, want);
        plan |= !strncmp(line, XCOST_PLAN_PREFIX, strlen(XCOST_PLAN_PREFIX));
        ctx |= !strncmp(line, XCOST_CTX_PREFIX "Softmax", strlen(XCOST_CTX_PREFIX "Softmax"));
    }
    fclose(f);
    cr_assert(cpu_line && plan && ctx, "cpu line %d, @plan %d, @ctx Softmax %d", cpu_line, plan, ctx);
    db = open_db();
    cr_assert_float_eq(ts_cost_graph(db, g2, false), c, 1e-9 * c, "round trip");
    cr_assert_eq(ts_cost_graph(db, g2, true), c, "nothing to measure again");
    cr_assert_eq(xcost_db_measured(db), 0);
    ts_costdb_free(db);
    ts_graph_free(g);
    ts_graph_free(g2);
}

/* x -> Relu a, Relu b (the same), each into its own MatMul, added.  The
 * plan lowers the nodes as written (duplicates are merged by the graph
 * level's CSE before planning, not by the plan), so the cost model, which
 * mirrors the plan, charges both Relus, in the plan and in context. */
Test(cost, context_charges_what_the_plan_runs)
{
    ts_graph *g = ts_graph_new("twins", 17);
    int x = input(g, "x", "16x128");
    int w1 = weight(g, "w1", "128x128"), w2 = weight(g, "w2", "128x128");
    int a = node(g, "Relu", &x, 1, NULL, 0), b = node(g, "Relu", &x, 1, NULL, 0);
    int p = node(g, "MatMul", (int[]){a, w1}, 2, NULL, 0), q = node(g, "MatMul", (int[]){b, w2}, 2, NULL, 0);
    int y = node(g, "Add", (int[]){p, q}, 2, NULL, 0);
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, y, &e), TS_OK, "%s", e.msg);
    int grp[5];
    cr_assert_eq(xcost_groups(g, grp), TS_OK);
    cr_assert(grp[0] == 0 && grp[1] == 1, "each Relu is a group");
    ts_costdb *db = open_db();
    xcost_plan_times pt;
    double plan[5] = {-1, -1, -1, -1, -1};
    cr_assert_eq(xcost_time_plan_groups(db, g, 1, 3, &pt, plan, &e), TS_OK, "%s", e.msg);
    cr_assert_gt(plan[1], 0, "the plan runs the second Relu");
    for (int head = 0; head < 2; head++) {
        double ms = -1;
        cr_assert_eq(xcost_ctx_measure(db, g, grp, &head, 1, &ms, NULL, &e), TS_OK, "%s", e.msg);
        cr_assert_gt(ms, 0, "in context Relu %d runs (%g ms)", head, ms);
    }
    ts_costdb_free(db);
    ts_graph_free(g);
}

/* x -> (MatMul + Tanh) x layers -> output: one group a layer, each with
 * its own width (distinct keys) */
static ts_graph *deep_mlp(int layers)
{
    ts_graph *g = ts_graph_new("deep", 17);
    int h = input(g, "x", "8x64");
    for (int i = 0; i < layers; i++) {
        char name[16], dims[32];
        snprintf(name, sizeof name, "w%d", i);
        snprintf(dims, sizeof dims, "%dx%d", 64 + i, 65 + i);
        int w = weight(g, name, dims);
        h = node(g, "MatMul", (int[]){h, w}, 2, NULL, 0);
        h = node(g, "Tanh", &h, 1, NULL, 0);
    }
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, h, &e), TS_OK, "%s", e.msg);
    return g;
}

/* Many new groups (a rewrite sharing nothing with the cache, as `tsopt
 * profile --predict --with` costs one) are timed in context in pieces of
 * at most XCOST_CTX_MAX_GROUPS groups: each gets an in-context time, none
 * an in-plan one (the whole graph is never timed as one). */
Test(cost, new_groups_timed_in_pieces)
{
    int layers = 3 * XCOST_CTX_MAX_GROUPS;
    ts_graph *g = deep_mlp(layers);
    int *grp = malloc(sizeof *grp * (size_t)g->nnodes);
    cr_assert_eq(xcost_groups(g, grp), TS_OK);
    ts_costdb *db = open_db();
    cr_assert_gt(xcost_graph_in_context(db, g), 0);
    cr_assert_eq(xcost_db_measured(db), layers, "one time per group (distinct keys)");
    for (int n = 0; n < g->nnodes; n++) {
        if (grp[n] != n) continue;
        cr_assert(has_ctx_time(db, g, grp, n), "node %d", n);
        cr_assert_not(has_plan_time(db, g, grp, n), "node %d", n);
    }
    free(grp);
    ts_costdb_free(db);
    ts_graph_free(g);
}

/* The safety net: ts_cost_graph on a graph none of whose groups is cached
 * (an original the caller did not prime) primes it. */
Test(cost, cost_graph_primes_an_unknown_graph)
{
    ts_graph *g = deep_mlp(6);
    int *grp = malloc(sizeof *grp * (size_t)g->nnodes);
    cr_assert_eq(xcost_groups(g, grp), TS_OK);
    ts_costdb *db = open_db();
    cr_assert_gt(ts_cost_graph(db, g, true), 0);
    for (int n = 0; n < g->nnodes; n++)
        if (grp[n] == n) cr_assert(has_plan_time(db, g, grp, n), "node %d", n);
    free(grp);
    ts_costdb_free(db);
    ts_graph_free(g);
}

/* The deadline (issue 27: one candidate's new groups took 65 s of a 30 s
 * limit under load): past it nothing is timed, neither the priming of an
 * unknown graph nor a new group in context, each missing group is costed
 * on the roofline and counted as late; before it (and without one) the
 * same graph is timed.  The clock is the deadline's own: one in the past
 * is past whatever the load. */
Test(cost, nothing_timed_past_the_deadline)
{
    ts_graph *g = deep_mlp(6);
    int *grp = malloc(sizeof *grp * (size_t)g->nnodes);
    cr_assert_eq(xcost_groups(g, grp), TS_OK);
    int groups = 0;
    for (int n = 0; n < g->nnodes; n++) groups += grp[n] == n && !xcost_is_free(&g->nodes[n]);
    ts_costdb *db = open_db();
    cr_assert_not(xcost_db_past_deadline(db), "no deadline: never past");
    cr_assert_eq(xcost_db_set_deadline(db, ts_clock_s() - 1), 0);
    cr_assert(xcost_db_past_deadline(db));
    /* (the roofline's peak, missing from a new cache, is not measured either: estimates of 0) */
    cr_assert_geq(ts_cost_graph(db, g, true), 0, "an estimate");
    cr_assert_geq(xcost_graph_in_context(db, g), 0, "an estimate");
    cr_assert_eq(xcost_db_measured(db), 0, "nothing timed past the deadline");
    cr_assert_eq(xcost_db_late(db), 2 * groups, "every missing group counted, each time");
    for (int n = 0; n < g->nnodes; n++)
        if (grp[n] == n) cr_assert_not(has_ctx_time(db, g, grp, n) || has_plan_time(db, g, grp, n), "node %d", n);
    /* a deadline ahead: timed as before */
    xcost_db_set_deadline(db, ts_clock_s() + 3600);
    cr_assert_gt(xcost_graph_in_context(db, g), 0);
    cr_assert_eq(xcost_db_measured(db), groups);
    cr_assert_eq(xcost_db_late(db), 2 * groups, "nothing late before the deadline");
    free(grp);
    ts_costdb_free(db);
    ts_graph_free(g);
}

/* Groups sharing a key are timed once: a rewrite of repeated blocks costs
 * one measurement per distinct group. */
Test(cost, one_measurement_per_key)
{
    ts_graph *g = ts_graph_new("same", 17);
    int h = input(g, "x", "8x64");
    for (int i = 0; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        h = node(g, "MatMul", (int[]){h, weight(g, name, "64x64")}, 2, NULL, 0);
        h = node(g, "Tanh", &h, 1, NULL, 0);
    }
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, h, &e), TS_OK, "%s", e.msg);
    ts_costdb *db = open_db();
    cr_assert_gt(xcost_graph_in_context(db, g), 0);
    /* the five inner layers share a key; the last writes the output */
    cr_assert_eq(xcost_db_measured(db), 2);
    int grp[12];
    cr_assert_eq(xcost_groups(g, grp), TS_OK);
    for (int n = 0; n < g->nnodes; n++)
        if (grp[n] == n) cr_assert(has_ctx_time(db, g, grp, n), "node %d", n);
    ts_costdb_free(db);
    ts_graph_free(g);
}

/* Which timed runs the step medians read (cost_plan.c, cost_ctx.c): the
 * good ones when at least 5 (all when fewer runs), else good and sleeping,
 * else all; rows are compacted in order with their run times. */
Test(cost, medians_read_the_undisturbed_runs)
{
    enum { G = XCOST_RUN_GOOD, S = XCOST_RUN_SLEPT, D = XCOST_RUN_DISTURBED };
    double t[16], a[8], b[8];
    const unsigned char k1[8] = {G, D, G, S, G, G, D, G};
    for (int i = 0; i < 16; i++) t[i] = i; /* 8 runs x 2 steps: run i has steps 2i, 2i+1 */
    for (int i = 0; i < 8; i++) a[i] = 10 + i, b[i] = 20 + i;
    cr_assert_eq(xcost_keep_runs(k1, 8, t, 2, a, b), 5);
    const double want1[10] = {0, 1, 4, 5, 8, 9, 10, 11, 14, 15};
    for (int i = 0; i < 10; i++) cr_expect_float_eq(t[i], want1[i], 0, "t[%d] = %g", i, t[i]);
    cr_expect(a[0] == 10 && a[1] == 12 && a[4] == 17 && b[2] == 24);
    /* 3 good runs: the sleeping ones join, the disturbed one stays out */
    const unsigned char k2[6] = {S, D, G, S, G, G};
    for (int i = 0; i < 12; i++) t[i] = i;
    cr_assert_eq(xcost_keep_runs(k2, 6, t, 2, NULL, NULL), 5);
    cr_expect(t[0] == 0 && t[2] == 4 && t[4] == 6 && t[8] == 10);
    /* busy all along: every run */
    const unsigned char k3[6] = {D, D, S, D, G, G};
    cr_expect_eq(xcost_keep_runs(k3, 6, t, 2, NULL, NULL), 6);
    /* fewer than 5 runs: all of them must be good to leave none out */
    const unsigned char k4[2] = {G, G};
    cr_expect_eq(xcost_keep_runs(k4, 2, t, 2, NULL, NULL), 2);
    const unsigned char k5[3] = {G, D, G};
    cr_expect_eq(xcost_keep_runs(k5, 3, t, 2, NULL, NULL), 3);
}
