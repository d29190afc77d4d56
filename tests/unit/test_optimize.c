/* The optimize pipeline (src/opt/): the driver with a source of its own
 * (the source interface), the stop flag, the memory bound, and ts_optimize
 * on the deterministic roofline cost model without timing (so nothing here
 * depends on the machine's speed or load). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "opt/driver.h"

static int input(ts_graph *g, const char *name, int64_t r, int64_t c)
{
    ts_error e = {0};
    int64_t d[2] = {r, c};
    ts_shape s = ts_shape_make(2, d);
    int v = ts_graph_add_input(g, name, TS_F32, &s, &e);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static int weight(ts_graph *g, const char *name, int64_t r, int64_t c, uint64_t *rng)
{
    ts_error e = {0};
    int64_t d[2] = {r, c};
    ts_shape s = ts_shape_make(2, d);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    ts_tensor_fill_random(t, rng, -1, 1);
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static int node(ts_graph *g, const char *op, int a, int b)
{
    ts_error e = {0};
    int in[2] = {a, b}, out = -1;
    cr_assert(ts_graph_add_node(g, op, NULL, in, b >= 0 ? 2 : 1, NULL, 0, 1, NULL, &out, &e) >= 0, "%s", e.msg);
    return out;
}

static void output(ts_graph *g, int v)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, v, &e), TS_OK, "%s", e.msg);
}

static int count_op(const ts_graph *g, const char *op)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !g->nodes[i].dead && !strcmp(g->nodes[i].op->name, op);
    return n;
}

/* x -> MatMul(W) -> Relu -> out */
static ts_graph *matmul_relu(void)
{
    uint64_t rng = 3;
    ts_graph *g = ts_graph_new("rr", 17);
    output(g, node(g, "Relu", node(g, "MatMul", input(g, "x", 8, 16), weight(g, "w", 16, 16, &rng)), -1));
    return g;
}

/* Two batch-1 MatMuls by one 256x256 weight, summed: reading the weight
 * once for both (the stacking pass, TASO's concat-0 matmul axiom) halves
 * the bytes of this memory-bound product. */
static ts_graph *shared_weight(void)
{
    uint64_t rng = 5;
    ts_graph *g = ts_graph_new("shared", 17);
    int w = weight(g, "w", 256, 256, &rng);
    int a = node(g, "MatMul", input(g, "x1", 1, 256), w);
    int b = node(g, "MatMul", input(g, "x2", 1, 256), w);
    output(g, node(g, "Add", a, b));
    return g;
}

/* Three MatMuls of x by constant weights, summed: the taso source proposes
 * the sibling merge and core-rule matches. */
static ts_graph *siblings(void)
{
    uint64_t rng = 5;
    ts_graph *g = ts_graph_new("sib", 17);
    int x = input(g, "x", 16, 64);
    int a = node(g, "MatMul", x, weight(g, "w1", 64, 64, &rng));
    int b = node(g, "MatMul", x, weight(g, "w2", 64, 64, &rng));
    int c = node(g, "MatMul", x, weight(g, "w3", 64, 64, &rng));
    output(g, node(g, "Add", node(g, "Add", a, b), c));
    return g;
}

/* ---- a source of the test's own: MatMul(x, W) -> x (as if W were an
 * identity), proposed twice (the driver must deduplicate) */

static int opened, closed;

static ts_status rr_open(const ts_source_env *env, void **state, ts_error *err)
{
    (void)env, (void)err;
    opened++;
    *state = &opened;
    return TS_OK;
}

static ts_status rr_propose(void *state, const ts_graph *g, ts_source_emit *emit, ts_error *err)
{
    (void)state, (void)err;
    for (int rep = 0; rep < 2; rep++)
        for (int i = 0; i < g->nnodes; i++) {
            const ts_node *n = &g->nodes[i];
            if (n->dead || strcmp(n->op->name, "MatMul")) continue;
            ts_graph *ng = ts_graph_copy(g);
            cr_assert(ng);
            int from = ng->nodes[i].outputs[0], to = ng->nodes[i].inputs[0];
            for (int k = 0; k < ng->nnodes; k++)
                for (int j = 0; j < ng->nodes[k].ninputs; j++)
                    if (ng->nodes[k].inputs[j] == from) ng->nodes[k].inputs[j] = to;
            ng->nodes[i].dead = true;
            ts_graph_compact(ng);
            if (!emit->fn(emit, ng, "drop-matmul", 1)) return TS_OK;
        }
    return TS_OK;
}

static void rr_close(void *state)
{
    (void)state;
    closed++;
}

static const ts_source rr_source = {
    .name = "rr", .justification = "test", .open = rr_open, .propose = rr_propose, .close = rr_close};

static ts_status drive(const ts_graph *g, ts_optimize_opts *o, ts_drive_result *r, ts_error *e)
{
    const ts_source *src[1] = {&rr_source};
    void *state[1];
    ts_source_env env = {.opts = o};
    cr_assert_eq(rr_source.open(&env, &state[0], e), TS_OK);
    ts_const_cache *cc = ts_const_cache_new();
    ts_status st = ts_drive(g, o, NULL, src, state, 1, cc, r, e);
    rr_source.close(state[0]);
    ts_const_cache_free(cc);
    return st;
}

Test(driver, costs_and_counts_a_sources_rewrites)
{
    ts_graph *g = matmul_relu();
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.roofline = true;
    ts_drive_result r;
    ts_error e = {0};
    cr_assert_eq(drive(g, &o, &r, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(count_op(r.best, "MatMul"), 0);
    cr_assert_lt(r.cost_after, r.cost_before);
    cr_assert_eq(r.per_source[0], 1, "source count %d", r.per_source[0]);
    cr_assert_eq(r.per_source[1], 0, "passes %d", r.per_source[1]); /* nothing for the passes here */
    cr_assert_eq(r.nnames, 1);
    cr_assert_str_eq(r.names[0].name, "drop-matmul");
    cr_assert_eq(r.duplicates, 1 + 0, "the second proposal of the same graph is a duplicate (%d)", r.duplicates);
    cr_assert_str_eq(r.stop, "exhausted");
    cr_assert_eq(ts_graph_validate(r.best, &e), TS_OK, "%s", e.msg);
    ts_drive_result_free(&r);
    ts_graph_free(g);
}

/* The runners-up (for the ort target's whole-graph timing): x -> MatMul ->
 * Relu -> MatMul -> Relu, each MatMul dropped alone is a runner-up below
 * the original, both dropped the best; choosing a runner-up makes its
 * rewrites the result's. */
Test(driver, keeps_runners_up_and_chooses_one)
{
    uint64_t rng = 3;
    ts_graph *g = ts_graph_new("rr2", 17);
    int h = node(g, "Relu", node(g, "MatMul", input(g, "x", 8, 16), weight(g, "w1", 16, 16, &rng)), -1);
    output(g, node(g, "Relu", node(g, "MatMul", h, weight(g, "w2", 16, 16, &rng)), -1));
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.roofline = true;
    ts_drive_result r;
    ts_error e = {0};
    cr_assert_eq(drive(g, &o, &r, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(count_op(r.best, "MatMul"), 0);
    cr_assert_eq(r.nalts, 2, "runners-up %d", r.nalts);
    double best = r.cost_after;
    for (int i = 0; i < r.nalts; i++) {
        cr_assert_eq(count_op(r.alts[i], "MatMul"), 1);
        cr_assert(r.alt_costs[i] >= best && r.alt_costs[i] < r.cost_before);
        cr_assert(i == 0 || r.alt_costs[i] >= r.alt_costs[i - 1]);
    }
    double c0 = r.alt_costs[0];
    ts_drive_result_choose(&r, 0);
    cr_assert_eq(count_op(r.best, "MatMul"), 1);
    cr_assert_eq(r.cost_after, c0);
    cr_assert_eq(r.nnames, 1);
    cr_assert_str_eq(r.names[0].name, "drop-matmul");
    cr_assert_eq(r.names[0].count, 1);
    cr_assert_eq(r.per_source[0], 1);
    cr_assert_eq(r.nsteps, 1);
    cr_assert_eq(count_op(r.alts[0], "MatMul"), 0, "the old best is kept in its place");
    cr_assert_eq(r.alt_costs[0], best);
    ts_drive_result_free(&r);
    ts_graph_free(g);
}

/* A target's cost of its own (as the ort target's region sums): the
 * original with its two MatMuls costs 100, a graph with fewer MatMuls
 * (the sibling merge: one MatMul and a Split) `merged` -- above the
 * original, as region sums put r3d_18's conv3d-as-frames at 1.039 of it in
 * one run and 0.925 in another. */
static double merged_cost;

static double two_matmuls_cost(void *ctx, const ts_graph *g)
{
    (void)ctx;
    return count_op(g, "MatMul") == 2 ? 100 : merged_cost;
}

/* x -> MatMul(w1) -> Relu -> out1, x -> MatMul(w2) -> Relu -> out2: the
 * sibling merge pass applies */
static ts_graph *two_siblings(void)
{
    uint64_t rng = 7;
    ts_graph *g = ts_graph_new("sib2", 17);
    int x = input(g, "x", 8, 32);
    output(g, node(g, "Relu", node(g, "MatMul", x, weight(g, "w1", 32, 32, &rng)), -1));
    output(g, node(g, "Relu", node(g, "MatMul", x, weight(g, "w2", 32, 32, &rng)), -1));
    return g;
}

static void drive_target(const ts_graph *g, double merged, ts_drive_result *r)
{
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    merged_cost = merged;
    ts_const_cache *cc = ts_const_cache_new();
    ts_error e = {0};
    cr_assert_eq(ts_drive_costed(g, &o, NULL, two_matmuls_cost, NULL, NULL, NULL, 0, cc, r, &e), TS_OK, "%s", e.msg);
    ts_const_cache_free(cc);
}

/* A pass the target's cost puts a little above the graph it rewrote (a
 * near miss: below driver.c's PASS_NEAR, 1.15) is not kept by the search
 * but is a runner-up, so the ort target times it whole before deciding;
 * before, it was dropped, and r3d_18's x1.27 rewrite was written or not
 * by the region sums' noise.  Further above, or below (then kept), it is
 * no runner-up. */
Test(driver, a_passs_near_miss_is_a_runner_up)
{
    ts_graph *g = two_siblings();
    ts_drive_result r;
    drive_target(g, 105, &r);
    cr_assert_eq(count_op(r.best, "MatMul"), 2, "the search keeps the cheaper original");
    cr_assert_eq(r.nsteps, 0);
    cr_assert_eq(r.nalts, 1, "runners-up %d", r.nalts);
    cr_assert_eq(count_op(r.alts[0], "MatMul"), 1);
    cr_assert_eq(r.alt_costs[0], 105);
    ts_drive_result_choose(&r, 0);
    cr_assert_eq(r.nnames, 1);
    cr_assert_str_eq(r.names[0].name, "merge-siblings");
    cr_assert_eq(r.nsteps, 1);
    cr_assert_eq(r.gains[0], -5, "its gain is the target's cost, negative (%g)", r.gains[0]);
    ts_drive_result_free(&r);

    /* in the first round of passes every pass's graph is an alternative,
     * whatever its sum (driver.c, pass_runner_up: nasrnn's
     * merge-matmul-sums+siblings summed to x2.25 and ran faster whole) */
    drive_target(g, 300, &r);
    cr_assert_eq(count_op(r.best, "MatMul"), 2);
    cr_assert_eq(r.nalts, 1, "a first-round pass 3 times the cost is an alternative (%d)", r.nalts);
    cr_assert_eq(r.npass_alts, 1);
    cr_assert_eq(count_op(r.alts[0], "MatMul"), 1);
    cr_assert_eq(r.alt_costs[0], 300);
    ts_drive_result_free(&r);

    drive_target(g, 90, &r);
    cr_assert_eq(count_op(r.best, "MatMul"), 1, "a cheaper pass is kept");
    cr_assert_eq(r.nalts, 0, "the original is no runner-up (%d)", r.nalts);
    ts_drive_result_free(&r);
    ts_graph_free(g);
}

/* Of x and y by w1 and w2 (four MatMuls, 100): stacked by the shared
 * weights (stack-shared-weight-matmuls: a Concat of x and y, two MatMuls)
 * 80; the sibling merge (two MatMuls, no Concat) 300; the sibling merge
 * then stacked (one MatMul) 250. */
static double stack_cost(void *ctx, const ts_graph *g)
{
    (void)ctx;
    int mm = count_op(g, "MatMul");
    return mm == 4 ? 100 : count_op(g, "Concat") == 0 ? 300 : mm == 2 ? 80 : 250;
}

/* Two passes compete in the first round, as on nasrnn (the stacking of
 * MatMuls by a shared weight, and the sums and sibling merges of the same
 * MatMuls): the round keeps the one the target's sums put cheapest, and
 * the other -- far above the graph by its sum, as nasrnn's sibling merges
 * were by region sums (x2.25-2.68) while whole in ORT they ran faster than
 * the original, and on the AMD EPYC merge-matmul-sums+siblings was the
 * x2.67 graph written -- is a pass alternative, continued by the later
 * rounds (here the stacking of the merged MatMuls), the first of the
 * runners-up, so the ranking times it whole.  Before, it was dropped and
 * the runners-up were all descendants of the kept graph. */
Test(driver, a_first_round_pass_not_kept_is_an_alternative)
{
    uint64_t rng = 11;
    ts_graph *g = ts_graph_new("stack_or_siblings", 17);
    int x = input(g, "x", 8, 32), y = input(g, "y", 8, 32);
    int w1 = weight(g, "w1", 32, 32, &rng), w2 = weight(g, "w2", 32, 32, &rng);
    output(g, node(g, "Relu", node(g, "MatMul", x, w1), -1));
    output(g, node(g, "Relu", node(g, "MatMul", x, w2), -1));
    output(g, node(g, "Relu", node(g, "MatMul", y, w1), -1));
    output(g, node(g, "Relu", node(g, "MatMul", y, w2), -1));
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    ts_const_cache *cc = ts_const_cache_new();
    ts_error e = {0};
    ts_drive_result r;
    cr_assert_eq(ts_drive_costed(g, &o, NULL, stack_cost, NULL, NULL, NULL, 0, cc, &r, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(count_op(r.best, "MatMul"), 2, "the stacking is kept");
    cr_assert_gt(count_op(r.best, "Concat"), 0);
    cr_assert_eq(r.cost_after, 80);
    cr_assert_eq(r.npass_alts, 1, "pass alternatives %d", r.npass_alts);
    cr_assert_geq(r.nalts, 1);
    cr_assert_eq(count_op(r.alts[0], "MatMul"), 1, "the sibling merge, then stacked");
    cr_assert_eq(r.alt_costs[0], 250);
    ts_drive_result_choose(&r, 0);
    cr_assert_eq(r.nnames, 2, "the alternative's path: %d rewrites", r.nnames);
    cr_assert(!strcmp(r.names[0].name, "merge-siblings") || !strcmp(r.names[1].name, "merge-siblings"));
    cr_assert(!strcmp(r.names[0].name, "stack-shared-weight-matmuls") ||
              !strcmp(r.names[1].name, "stack-shared-weight-matmuls"));
    ts_drive_result_free(&r);
    /* tsopt's own cost (no target): no alternatives */
    o.roofline = true;
    cr_assert_eq(ts_drive(g, &o, NULL, NULL, NULL, 0, cc, &r, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(r.npass_alts, 0);
    ts_drive_result_free(&r);
    ts_const_cache_free(cc);
    ts_graph_free(g);
}

/* ---- a GELU between two MatMuls (a transformer's MLP), written as
 * PyTorch exports it: Mul(Mul(h, Add(Erf(Div(h, sqrt2)), 1)), 0.5).  The
 * runtime fuses that spelling into one Gelu, a post-op of the first
 * MatMul (graph optimization level all); "unhalved" moves the 0.5 into the
 * second MatMul's weight, as TASO's taso-0148 / taso-0600 do -- exact, but
 * h (1 + erf(h / sqrt2)) is no GELU spelling, so it runs as a separate
 * element-wise step (longformer, 12-07: optimize's best graph did this and
 * measured no faster than the original). */

static int scalar(ts_graph *g, const char *name, float x)
{
    ts_error e = {0};
    ts_shape s = ts_shape_make(0, NULL);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    cr_assert(t, "%s", e.msg);
    *(float *)t->data = x;
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static ts_graph *mlp_gelu(bool unhalved)
{
    uint64_t rng = 7;
    ts_graph *g = ts_graph_new(unhalved ? "mlp-unhalved" : "mlp", 17);
    int x = input(g, "x", 16, 64);
    int w1 = weight(g, "w1", 64, 128, &rng), w2 = weight(g, "w2", 128, 64, &rng);
    if (unhalved) {
        ts_tensor *t = g->values[w2].constant;
        for (int64_t i = 0; i < ts_tensor_numel(t); i++) ((float *)t->data)[i] *= 0.5f;
    }
    int64_t bd[1] = {128};
    ts_shape bs = ts_shape_make(1, bd);
    ts_error e = {0};
    ts_tensor *bt = ts_tensor_new(TS_F32, &bs, &e);
    ts_tensor_fill_random(bt, &rng, -1, 1);
    int b = ts_graph_add_constant(g, "b", bt, &e);
    ts_tensor_unref(bt);
    int h = node(g, "Add", node(g, "MatMul", x, w1), b);
    int erf = node(g, "Erf", node(g, "Div", h, scalar(g, "sqrt2", 1.41421354f)), -1);
    int y = node(g, "Mul", h, node(g, "Add", erf, scalar(g, "one", 1)));
    if (!unhalved) y = node(g, "Mul", y, scalar(g, "half", 0.5f));
    output(g, node(g, "MatMul", y, w2));
    return g;
}

static ts_status unhalve_propose(void *state, const ts_graph *g, ts_source_emit *emit, ts_error *err)
{
    (void)state, (void)err;
    if (count_op(g, "Mul") == 2) emit->fn(emit, mlp_gelu(true), "unhalve-gelu", 1);
    return TS_OK;
}

static const ts_source unhalve_source = {
    .name = "unhalve", .justification = "test", .open = rr_open, .propose = unhalve_propose, .close = rr_close};

/* The driver charges a graph what the runtime runs: the spelled GELU fused
 * into the MatMul before it, so the unhalved MLP costs a step more.  Costed
 * as written (before), both were three groups of the same bytes, equal
 * under the roofline; the measured model charged the original's spelled
 * GELU as a separate step too. */
Test(driver, costs_the_graph_the_runtime_runs)
{
    ts_graph *g = mlp_gelu(false), *u = mlp_gelu(true);
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.roofline = true;
    double c0 = ts_drive_graph_cost(&o, NULL, g), c1 = ts_drive_graph_cost(&o, NULL, u);
    cr_assert_gt(c1, c0 + 0.0015, "unhalved %g ms, original %g ms: the GELU's fusion is not charged", c1, c0);
    cr_assert_eq(count_op(g, "Mul"), 2, "the costed graph is a copy");
    /* the driver keeps the original against the rewrite */
    const ts_source *src[1] = {&unhalve_source};
    void *state[1];
    ts_source_env env = {.opts = &o};
    ts_error e = {0};
    cr_assert_eq(unhalve_source.open(&env, &state[0], &e), TS_OK);
    ts_const_cache *cc = ts_const_cache_new();
    ts_drive_result r;
    cr_assert_eq(ts_drive(g, &o, NULL, src, state, 1, cc, &r, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(r.generated, 1, "the rewrite was proposed");
    cr_assert_eq(r.per_source[0], 0, "the unhalved GELU was chosen");
    cr_assert_eq(count_op(r.best, "Mul"), 2);
    cr_assert_eq(r.cost_after, c0);
    ts_drive_result_free(&r);
    unhalve_source.close(state[0]);
    ts_const_cache_free(cc);
    ts_graph_free(u);
    ts_graph_free(g);
}

Test(driver, stop_flag_returns_the_best_so_far)
{
    ts_graph *g = matmul_relu();
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.roofline = true;
    volatile int stop = 1;
    o.stop = &stop;
    ts_drive_result r;
    ts_error e = {0};
    cr_assert_eq(drive(g, &o, &r, &e), TS_OK, "%s", e.msg);
    cr_assert_str_eq(r.stop, "interrupted");
    cr_assert_eq(r.explored, 0);
    cr_assert(r.best);
    cr_assert_eq(count_op(r.best, "MatMul"), 1);
    ts_drive_result_free(&r);
    ts_graph_free(g);
}

Test(driver, frontier_stays_under_the_memory_cap)
{
    ts_graph *g = siblings();
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.roofline = true;
    o.alpha = 10; /* queue everything */
    o.max_memory_mb = 0.02; /* 10 KiB of frontier: a graph or two */
    ts_error e = {0};
    ts_optimize_result r;
    o.no_timing = true;
    cr_assert_eq(ts_optimize(g, &o, &r, &e), TS_OK, "%s", e.msg);
    ts_optimize_result_free(&r);
    ts_drive_result d;
    const ts_source *src[1] = {&ts_source_taso};
    void *state[1];
    ts_const_cache *cc = ts_const_cache_new();
    ts_source_env env = {.opts = &o, .cc = cc};
    cr_assert_eq(ts_source_taso.open(&env, &state[0], &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_drive(g, &o, NULL, src, state, 1, cc, &d, &e), TS_OK, "%s", e.msg);
    /* a candidate's merged weights (48 KiB) are over the cap already: the
     * frontier holds one graph at a time */
    cr_assert_lt(d.peak_frontier_mb, 0.1, "frontier peaked at %g MiB", d.peak_frontier_mb);
    cr_assert_gt(d.generated, 0);
    ts_drive_result_free(&d);
    ts_source_taso.close(state[0]);
    ts_const_cache_free(cc);
    ts_graph_free(g);
}

Test(optimize, unknown_source_lists_the_known_ones)
{
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.transforms = "taso,nosuch";
    ts_error e = {0};
    cr_assert_neq(ts_optimize_opts_check(&o, &e), TS_OK);
    cr_assert(strstr(e.msg, "unknown source 'nosuch'") && strstr(e.msg, "known: taso"), "%s", e.msg);
    o.transforms = "taso";
    e = (ts_error){0};
    cr_assert_eq(ts_optimize_opts_check(&o, &e), TS_OK, "%s", e.msg);
    o.alpha = 0.5;
    cr_assert_neq(ts_optimize_opts_check(&o, &e), TS_OK);
}

Test(optimize, stacks_shared_weights_and_checks_the_result)
{
    ts_graph *g = shared_weight();
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.roofline = true;
    o.no_timing = true;
    o.time_limit = 5;
    ts_optimize_result r;
    ts_error e = {0};
    cr_assert_eq(ts_optimize(g, &o, &r, &e), TS_OK, "%s", e.msg);
    cr_assert(r.optimized, "%s (cost %g -> %g, generated %d)", r.reason, r.cost_before_ms, r.cost_after_ms, r.generated);
    cr_assert_eq(count_op(r.graph, "MatMul"), 1, "MatMuls left: %d", count_op(r.graph, "MatMul"));
    cr_assert_lt(r.cost_after_ms, r.cost_before_ms);
    cr_assert_leq(r.max_scaled_error, 1.0);
    int total = 0;
    for (int k = 0; k < r.nsources; k++) total += r.applied[k].count;
    cr_assert_gt(total, 0);
    cr_assert_str_eq(r.applied[r.nsources - 1].name, "passes");
    cr_assert_eq(r.nodes_before, 3);
    cr_assert(strstr(r.sources, "taso: ") && strstr(r.sources, " rules from the built-in rules (rules/core.rules: "),
              "%s", r.sources);
    ts_optimize_result_free(&r);
    ts_graph_free(g);
}

Test(optimize, original_written_counts_nothing)
{
    ts_graph *g = ts_graph_new("one", 17);
    output(g, node(g, "Relu", input(g, "x", 4, 4), -1));
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.roofline = true;
    o.no_timing = true;
    ts_optimize_result r;
    ts_error e = {0};
    cr_assert_eq(ts_optimize(g, &o, &r, &e), TS_OK, "%s", e.msg);
    cr_assert(!r.optimized);
    cr_assert(r.graph && r.graph != g);
    for (int k = 0; k < r.nsources; k++) cr_assert_eq(r.applied[k].count, 0);
    cr_assert_eq(r.nrewrites, 0);
    cr_assert(strstr(r.reason, "original kept"), "%s", r.reason);
    ts_optimize_result_free(&r);
    ts_graph_free(g);
}

/* A check that runs out of its time (TSOPT_CHECK_S caps it: 1 ns here)
 * keeps the original -- never the unchecked rewrite the search found (the
 * test above writes it) -- and the reason, in --json too, says why. */
Test(optimize, a_check_out_of_time_keeps_the_original)
{
    cr_assert_eq(setenv("TSOPT_CHECK_S", "1e-9", 1), 0);
    ts_graph *g = shared_weight();
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.roofline = true;
    o.no_timing = true;
    o.time_limit = 5;
    ts_optimize_result r;
    ts_error e = {0};
    cr_assert_eq(ts_optimize(g, &o, &r, &e), TS_OK, "%s", e.msg);
    cr_assert(!r.optimized, "%s", r.reason);
    cr_assert_lt(r.cost_after_ms, r.cost_before_ms, "the search found the rewrite");
    cr_assert(strstr(r.reason, "original kept: the check ran out of time"), "%s", r.reason);
    cr_assert_eq(ts_graph_hash(r.graph), ts_graph_hash(g), "the written graph is not the original");
    cr_assert_eq(count_op(r.graph, "MatMul"), 2);
    cr_assert_eq(r.max_scaled_error, 0);
    char *json = ts_optimize_result_json(&r, "m.onnx", "o.onnx");
    cr_assert(json && strstr(json, "\"written\": \"original\"") && strstr(json, "the check ran out of time"), "%s",
              json);
    ts_free(json);
    ts_optimize_result_free(&r);
    ts_graph_free(g);
}
