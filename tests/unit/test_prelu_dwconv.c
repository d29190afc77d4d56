/* ts_prelu_as_dwconv (src/opt/prelu_dwconv.c): PRelu(x, s) ->
 * Add(x, Relu(Conv(x, s - 1, 1x1, group C))) where every slope is at most
 * 1.  The rewritten graph against the original by the reference
 * interpreter and the runtime's plan (slopes negative, zero, between and
 * exactly 1; per channel as [C,1,1] and [1,C,1,1], one scalar slope; the
 * PRelu's value a graph output, its name kept); where it must decline (a
 * slope above 1, a slope that is an input, per-pixel slopes, a rank-3 x);
 * hand-computed values. */
#include "graph_build.h"
#include "opt/passes.h"

static uint64_t rng = 4242;

#define I(...) (int64_t[]){__VA_ARGS__}

/* A constant of the dims holding vals[i % nv]. */
static int cst(ts_graph *g, int rank, const int64_t *dims, const double *vals, int nv)
{
    static int count;
    char name[32];
    snprintf(name, sizeof name, "c%d", count++);
    ts_error e = {0};
    ts_shape s = ts_shape_make(rank, dims);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    cr_assert(t, "%s", e.msg);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) ts_tensor_set_f64(t, i, vals[i % nv]);
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static const double SLOPES[] = {0.25, -0.5, 0, 1, 0.1, 0.75, -2};

/* 3x3 conv to C channels, PRelu with the slope shaped sdims, 1x1 conv to
 * 4 channels (the PRelu's value also an output when both_out). */
static ts_graph *net(int C, int srank, const int64_t *sdims, const double *slopes, int ns, bool both_out)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = gb_input(g, "x", 4, I(1, 3, 9, 7));
    ts_attr pads = ts_attr_ints("pads", I(1, 1, 1, 1), 4);
    int y = gb_node(g, "Conv", (int[]){x, gb_weight(g, "w1", 4, I(C, 3, 3, 3), &rng)}, 2, &pads, 1);
    int p = gb_node(g, "PRelu", (int[]){y, cst(g, srank, sdims, slopes, ns)}, 2, NULL, 0);
    int z = gb_node(g, "Conv", (int[]){p, gb_weight(g, "w2", 4, I(4, C, 1, 1), &rng)}, 2, NULL, 0);
    gb_output(g, z);
    if (both_out) gb_output(g, p);
    return g;
}

Test(prelu_dwconv, per_channel_slopes)
{
    int64_t shapes[2][4] = {{19, 1, 1}, {1, 19, 1, 1}};
    for (int k = 0; k < 2; k++) {
        ts_graph *g = net(19, 3 + k, shapes[k], SLOPES, 7, false);
        int n;
        ts_graph *r = gb_rewrite_checked(g, ts_prelu_as_dwconv, &n, rng++);
        cr_assert_eq(n, 1);
        cr_assert_eq(gb_count_op(r, "PRelu"), 0);
        cr_assert_eq(gb_count_op(r, "Conv"), 3);
        cr_assert_eq(gb_count_op(r, "Relu"), 1);
        cr_assert_eq(gb_count_op(r, "Add"), 1);
        ts_graph_free(r);
        ts_graph_free(g);
    }
}

Test(prelu_dwconv, scalar_slope_and_output_name_kept)
{
    ts_graph *g = net(16, 1, I(1), (double[]){0.3}, 1, true);
    int n;
    ts_graph *r = gb_rewrite_checked(g, ts_prelu_as_dwconv, &n, rng++);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(r->values[r->outputs[1]].name, g->values[g->outputs[1]].name);
    ts_graph_free(r);
    ts_graph_free(g);
}

Test(prelu_dwconv, declines)
{
    /* a slope above 1: (s - 1) x is positive where x is, the sign argument fails */
    double up[] = {0.25, 1.5};
    ts_graph *graphs[3] = {net(8, 3, I(8, 1, 1), up, 2, false),
                           /* per pixel, not per channel */
                           net(8, 4, I(1, 1, 9, 7), SLOPES, 7, false), ts_graph_new("t", 13)};
    /* the slope an input (not a constant) and a rank-3 x */
    ts_graph *g = graphs[2];
    int x = gb_input(g, "x", 4, I(1, 4, 5, 5)), s = gb_input(g, "s", 3, I(4, 1, 1));
    gb_output(g, gb_node(g, "PRelu", (int[]){x, s}, 2, NULL, 0));
    int x3 = gb_input(g, "x3", 3, I(1, 4, 5));
    gb_output(g, gb_node(g, "PRelu", (int[]){x3, cst(g, 2, I(4, 1), SLOPES, 7)}, 2, NULL, 0));
    for (int k = 0; k < 3; k++) {
        int n;
        ts_graph *r = gb_rewrite_checked(graphs[k], ts_prelu_as_dwconv, &n, rng++);
        cr_assert_eq(n, 0, "graph %d rewritten", k);
        cr_assert_eq(gb_count_op(r, "PRelu"), gb_count_op(graphs[k], "PRelu"));
        ts_graph_free(r);
        ts_graph_free(graphs[k]);
    }
}

Test(prelu_dwconv, hand_values)
{
    /* two channels, slopes 0.25 and -1: x = -2, 3 on each */
    ts_graph *g = ts_graph_new("t", 13);
    int x = gb_input(g, "x", 4, I(1, 2, 1, 2));
    gb_output(g, gb_node(g, "PRelu", (int[]){x, cst(g, 3, I(2, 1, 1), (double[]){0.25, -1}, 2)}, 2, NULL, 0));
    ts_error e = {0};
    cr_assert_eq(ts_prelu_as_dwconv(g, &e), 1, "%s", e.msg);
    float in[4] = {-2, 3, -2, 3}, want[4] = {-0.5f, 3, 2, 3};
    gb_assert_values(g, in, want, 4);
    ts_graph_free(g);
}
