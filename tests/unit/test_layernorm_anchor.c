/* ts_anchor_layernorm_transpose (src/opt/layernorm_anchor.c): an identity
 * Reshape between a Transpose and the spelled-out LayerNorm reading it.
 * ConvNeXt's block (channels-last permute, LayerNorm as ReduceMean, Sub,
 * Pow, ReduceMean, Add, Sqrt, Div, Mul, Add, a MatMul, the permute back),
 * the rewritten graph against the original by the reference interpreter
 * and the runtime's plan, the Transpose's value also a graph output (its
 * name kept); opset 18's axes as an input; a planted wrong anchor (reading
 * the Transpose's input, the same shape) refuted by the same comparison;
 * where it must decline; a second application puts none. */
#include "graph_build.h"
#include "ops/list.h"
#include "opt/passes.h"

static uint64_t rng = 2806;

#define I(...) (int64_t[]){__VA_ARGS__}

static int scalar(ts_graph *g, const char *name, double v)
{
    ts_error e = {0};
    ts_shape s = ts_shape_make(0, NULL);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    cr_assert(t, "%s", e.msg);
    ts_tensor_set_f64(t, 0, v);
    int c = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(c >= 0, "%s", e.msg);
    return c;
}

static int axes_const(ts_graph *g, int64_t axis)
{
    ts_error e = {0};
    int64_t d = 1;
    ts_shape s = ts_shape_make(1, &d);
    ts_tensor *t = ts_tensor_new(TS_I64, &s, &e);
    cr_assert(t, "%s", e.msg);
    ts_tensor_set_f64(t, 0, (double)axis);
    static int k;
    char name[32];
    snprintf(name, sizeof name, "axes%d", k++);
    int c = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(c >= 0, "%s", e.msg);
    return c;
}

static int mean(ts_graph *g, int x, int64_t axis, int opset)
{
    if (opset >= 18) return gb_node(g, "ReduceMean", (int[]){x, axes_const(g, axis)}, 2, NULL, 0);
    ts_attr a = ts_attr_ints("axes", &axis, 1);
    return gb_node(g, "ReduceMean", &x, 1, &a, 1);
}

/* x [1, C, H, W] -> Transpose to channels-last -> LayerNorm over `axis`
 * (spelled out; with_sub 0: the Sub reads something else) -> MatMul ->
 * Transpose back; the channels-last value a graph output too. */
static ts_graph *block(int64_t c, int64_t h, int64_t w, int64_t axis, bool with_sub, int opset)
{
    ts_graph *g = ts_graph_new("t", opset);
    int x = gb_input(g, "x", 4, I(1, c, h, w));
    ts_attr p = ts_attr_ints("perm", I(0, 2, 3, 1), 4);
    int t = gb_node(g, "Transpose", &x, 1, &p, 1);
    int m = mean(g, t, axis, opset);
    int d = gb_node(g, "Sub", (int[]){with_sub ? t : gb_weight(g, "z", 1, I(c), &rng), m}, 2, NULL, 0);
    int q = gb_node(g, "Pow", (int[]){d, scalar(g, "two", 2)}, 2, NULL, 0);
    int v = gb_node(g, "Add", (int[]){mean(g, q, axis, opset), scalar(g, "eps", 1e-6)}, 2, NULL, 0);
    int y = gb_node(g, "Div", (int[]){d, gb_node(g, "Sqrt", &v, 1, NULL, 0)}, 2, NULL, 0);
    y = gb_node(g, "Mul", (int[]){y, gb_weight(g, "gamma", 1, I(c), &rng)}, 2, NULL, 0);
    y = gb_node(g, "Add", (int[]){y, gb_weight(g, "beta", 1, I(c), &rng)}, 2, NULL, 0);
    y = gb_node(g, "MatMul", (int[]){y, gb_weight(g, "w1", 2, I(c, 2 * c), &rng)}, 2, NULL, 0);
    ts_attr back = ts_attr_ints("perm", I(0, 3, 1, 2), 4);
    gb_output(g, gb_node(g, "Transpose", &y, 1, &back, 1));
    gb_output(g, t);
    return g;
}

Test(layernorm_anchor, convnext_block_checked)
{
    int opsets[] = {14, 18};
    for (int k = 0; k < 2; k++) {
        ts_graph *g = block(8, 5, 7, k ? 3 : -1, true, opsets[k]);
        int n;
        ts_graph *r = gb_rewrite_checked(g, ts_anchor_layernorm_transpose, &n, rng++);
        cr_assert_eq(n, 1, "opset %d", opsets[k]);
        cr_assert_eq(gb_count_op(r, "Reshape"), 1);
        cr_assert_eq(gb_count_op(r, "Transpose"), 2);
        /* the channels-last output keeps its name and shape, now written by the Reshape */
        const ts_value *o = &r->values[r->outputs[1]];
        cr_assert_str_eq(o->name, g->values[g->outputs[1]].name);
        cr_assert_eq(r->nodes[o->producer].op, &ts_op_reshape);
        cr_assert_eq(o->shape.dims[3], 8);
        cr_assert_eq(o->shape.dims[1], 5);
        /* the shape is [0, 0, 0, -1]: a symbolic batch stays symbolic */
        const ts_value *sv = &r->values[r->nodes[o->producer].inputs[1]];
        cr_assert(sv->constant);
        for (int i = 0; i < 4; i++) cr_assert_eq(ts_tensor_get_f64(sv->constant, i), i == 3 ? -1 : 0);
        /* a second application puts none (the LayerNorm now reads the Reshape) */
        int n2;
        ts_graph *r2 = gb_rewrite(r, ts_anchor_layernorm_transpose, &n2);
        cr_assert_eq(n2, 0);
        ts_graph_free(r2);
        ts_graph_free(r);
        ts_graph_free(g);
    }
}

Test(layernorm_anchor, declines_other_reductions)
{
    ts_graph *graphs[] = {
        block(8, 5, 7, 1, true, 14),  /* the mean over H, not the last axis */
        block(8, 5, 7, -1, false, 14), /* no Sub of the Transpose's value and its mean */
    };
    for (int k = 0; k < 2; k++) {
        int n;
        ts_graph *r = gb_rewrite(graphs[k], ts_anchor_layernorm_transpose, &n);
        cr_assert_eq(n, 0, "graph %d", k);
        cr_assert_eq(gb_count_op(r, "Reshape"), 0, "graph %d", k);
        ts_graph_free(r);
        ts_graph_free(graphs[k]);
    }
}

Test(layernorm_anchor, planted_wrong_anchor_refuted)
{
    /* H = W = 6 and C = 6: the Transpose's input has the Transpose's shape,
     * so an anchor reading it (a wiring slip) is well-formed and wrong */
    ts_graph *g = block(6, 6, 6, -1, true, 14);
    int n;
    ts_graph *r = gb_rewrite(g, ts_anchor_layernorm_transpose, &n);
    cr_assert_eq(n, 1);
    int planted = 0;
    for (int i = 0; i < r->nnodes; i++) {
        ts_node *m = &r->nodes[i];
        if (m->dead || m->op != &ts_op_reshape) continue;
        const ts_node *tr = &r->nodes[r->values[m->inputs[0]].producer];
        cr_assert_eq(tr->op, &ts_op_transpose);
        m->inputs[0] = tr->inputs[0];
        planted = 1;
    }
    cr_assert(planted);
    ts_tensor *in = gb_rand_tensor(4, I(1, 6, 6, 6), &rng);
    double worst = gb_max_diff(g, r, in);
    cr_assert_gt(worst, 0.01, "the planted anchor was not refuted (largest difference %g)", worst);
    ts_tensor_unref(in);
    ts_graph_free(r);
    ts_graph_free(g);
}
