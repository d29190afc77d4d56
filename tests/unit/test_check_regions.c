/* The optimizer's check (src/opt/check.c) on graphs with an opaque node
 * (src/ops/opaque.h), which tsopt cannot run as a whole: a correct rewrite
 * on either side of the opaque node passes (two regions counted, the
 * stretches compared at the opaque node's input and the output), the same
 * rewrite with a 1% weight error fails; a graph without opaque nodes is
 * checked whole, on random or the caller's inputs; opaque nodes neither
 * run nor fold. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "ir/ir.h"
#include "opt/check.h"
#include "ops/opaque.h"

static const int64_t XD[] = {2, 8}, WD[] = {8, 8};

static int weight(ts_graph *g, const char *name, double scale)
{
    ts_error e = {0};
    ts_shape s = ts_shape_make(2, WD);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    cr_assert(t, "%s", e.msg);
    uint64_t rng = 42; /* the same weights in every graph */
    ts_tensor_fill_random(t, &rng, -1, 1);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) ((float *)t->data)[i] *= (float)scale;
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static int node(ts_graph *g, const char *op, const char *name, int a, int b)
{
    ts_error e = {0};
    int in[2] = {a, b}, out;
    int n = ts_graph_add_node(g, op, name, in, b >= 0 ? 2 : 1, NULL, 0, 1, NULL, &out, &e);
    cr_assert(n >= 0, "%s", e.msg);
    return out;
}

static int opaque(ts_graph *g, int x)
{
    ts_opaque_attrs a;
    memset(&a, 0, sizeof a);
    snprintf(a.op_type, sizeof a.op_type, "MyOp");
    snprintf(a.domain, sizeof a.domain, "com.example");
    a.nin = a.nout = 1;
    a.in_shape[0] = a.out_shape[0] = ts_shape_make(2, XD);
    a.out_dtype[0] = TS_F32;
    ts_error e = {0};
    int n = ts_opaque_add(g, "custom", &a, &x, NULL, &e);
    cr_assert(n >= 0, "%s", e.msg);
    return g->nodes[n].outputs[0];
}

/* x -> MatMul m1 -> Relu r -> [opaque] -> MatMul m2 -> Tanh t -> y.
 * which: 0 the original; 1 m1 and m2 rebuilt under new names (a rewrite
 * on each side of the opaque node); 2 the same with m2's weight off by
 * 1%; with_opaque false: an Abs instead of the opaque node. */
static ts_graph *build(int which, bool with_opaque)
{
    ts_error e = {0};
    ts_graph *g = ts_graph_new("g", 17);
    ts_shape xs = ts_shape_make(2, XD);
    int x = ts_graph_add_input(g, "x", TS_F32, &xs, &e);
    cr_assert(x >= 0, "%s", e.msg);
    int h = node(g, "MatMul", which ? "m1_rewritten" : "m1", x, weight(g, "w1", 1));
    h = node(g, "Relu", "r", h, -1);
    h = with_opaque ? opaque(g, h) : node(g, "Abs", "custom", h, -1);
    h = node(g, "MatMul", which ? "m2_rewritten" : "m2", h, weight(g, "w2", which == 2 ? 1.01 : 1));
    h = node(g, "Tanh", "t", h, -1);
    cr_assert_eq(ts_graph_add_output(g, h, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_validate(g, &e), TS_OK, "%s", e.msg);
    return g;
}

Test(check_regions, rewrites_around_an_opaque_node)
{
    ts_graph *g0 = build(0, true), *g1 = build(1, true), *bad = build(2, true);
    ts_error e = {0};
    ts_check_result r;
    cr_assert_eq(ts_opt_check_all(g0, g1, 1, NULL, 0, &r, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(r.regions, 2, "regions %d", r.regions);
    cr_assert_eq(r.boundary, 2, "boundary values %d (the opaque node's input, the output)", r.boundary);
    cr_assert(!r.whole, "an opaque model cannot run whole");
    cr_assert(strstr(r.why_not_whole, "node 'custom' (com.example::MyOp)"), "%s", r.why_not_whole);
    cr_assert(r.worst <= 1e-3, "correct rewrite: scaled error %g", r.worst);

    cr_assert_eq(ts_opt_check_all(g0, bad, 1, NULL, 0, &r, &e), TS_OK, "%s", e.msg);
    cr_assert(r.worst > 1, "a 1%% weight error must fail the check (scaled error %g)", r.worst);
    cr_assert(strstr(r.worst_at, "'t_out'"), "%s", r.worst_at);

    /* the graph against itself: nothing rewritten, nothing to compare */
    cr_assert_eq(ts_opt_check_all(g0, g0, 1, NULL, 0, &r, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(r.regions, 0);
    cr_assert_eq(r.worst, 0);
    ts_graph_free(g0);
    ts_graph_free(g1);
    ts_graph_free(bad);
}

Test(check_regions, runnable_models_are_checked_whole_too)
{
    ts_graph *g0 = build(0, false), *g1 = build(1, false), *bad = build(2, false);
    ts_error e = {0};
    ts_check_result r;
    cr_assert_eq(ts_opt_check_all(g0, g1, 1, NULL, 0, &r, &e), TS_OK, "%s", e.msg);
    cr_assert(r.whole && r.regions == 2 && r.worst <= 1e-3, "whole %d regions %d worst %g", r.whole, r.regions,
              r.worst);
    cr_assert_eq(r.boundary, 0, "a runnable model is run whole, not in stretches");
    cr_assert_eq(ts_opt_check_all(g0, bad, 1, NULL, 0, &r, &e), TS_OK, "%s", e.msg);
    cr_assert(r.whole_worst > 1 && r.worst > 1, "whole %g", r.whole_worst);

    /* the caller's inputs for the whole-model check */
    ts_shape xs = ts_shape_make(2, XD);
    ts_tensor *x = ts_tensor_new(TS_F32, &xs, &e);
    for (int i = 0; i < 16; i++) ((float *)x->data)[i] = (float)(i - 8) / 4;
    cr_assert_eq(ts_opt_check_all(g0, g1, 1, &x, 0, &r, &e), TS_OK, "%s", e.msg);
    cr_assert(r.whole && r.user_inputs && r.whole_worst <= 1e-3);
    ts_tensor_unref(x);
    ts_graph_free(g0);
    ts_graph_free(g1);
    ts_graph_free(bad);
}

Test(check_regions, opaque_nodes_do_not_run)
{
    ts_graph *g = build(0, true);
    ts_error e = {0};
    ts_plan *p = NULL;
    cr_assert_neq(ts_plan_build(g, NULL, &p, &e), TS_OK);
    cr_assert(strstr(e.msg, "node 'custom' (com.example::MyOp): tsopt cannot execute operators of domain "
                            "'com.example'"),
              "%s", e.msg);
    ts_graph_free(g);
    /* never folded, even with constant inputs */
    g = ts_graph_new("c", 17);
    ts_shape xs = ts_shape_make(2, XD);
    ts_tensor *t = ts_tensor_new(TS_F32, &xs, &e);
    int c = ts_graph_add_constant(g, "c", t, &e);
    ts_tensor_unref(t);
    int y = opaque(g, c);
    cr_assert_eq(ts_graph_add_output(g, y, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_fold_constants(g, &e), 0, "%s", e.msg);
    cr_assert_eq(g->values[y].constant, NULL);
    ts_graph_free(g);
}

/* The check's time limit: one already spent stops it before anything runs
 * -- out of time, nothing judged (even a wrong rewrite is not flagged: the
 * caller keeps the original either way); a limit with room to spare checks
 * as no limit does. */
Test(check_regions, a_spent_time_limit_stops_the_check_unjudged)
{
    for (int opq = 0; opq < 2; opq++) {
        ts_graph *g0 = build(0, opq), *bad = build(2, opq);
        ts_error e = {0};
        ts_check_result r;
        cr_assert_eq(ts_opt_check_all(g0, bad, 1, NULL, 1e-9, &r, &e), TS_OK, "%s", e.msg);
        cr_assert(r.out_of_time, "opaque %d: a 1 ns check ran to the end", opq);
        cr_assert(!r.whole && r.worst == 0, "opaque %d: whole %d worst %g", opq, r.whole, r.worst);
        cr_assert_eq(r.regions, 2, "the regions are still counted");
        cr_assert_eq(ts_opt_check_all(g0, bad, 1, NULL, 600, &r, &e), TS_OK, "%s", e.msg);
        cr_assert(!r.out_of_time && r.worst > 1, "opaque %d: out of time %d worst %g", opq, r.out_of_time, r.worst);
        cr_assert_eq(r.whole, !opq);
        ts_graph_free(g0);
        ts_graph_free(bad);
    }
}
