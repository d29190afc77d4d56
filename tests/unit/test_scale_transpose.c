/* ts_scale_before_transpose (src/opt/scale_transpose.c): a per-channel
 * constant Mul moved before the Transpose it reads.  ConvNeXt's block tail
 * (MatMul, bias Add, permute back to channels-first, layer scale [C,1,1],
 * residual Add), the rewritten graph against the original by the
 * reference interpreter and the runtime's plan, the Mul's value a graph
 * output (its name kept); then ts_fold_affine takes the moved scale into
 * the MatMul (no Mul left, still the same outputs); a scalar and the
 * Transpose with no perm (reversed); a planted wrong move (the scale on
 * the wrong axis, H = C) refuted; where it must decline. */
#include "graph_build.h"
#include "ops/list.h"
#include "opt/passes.h"

static uint64_t rng = 3107;

#define I(...) (int64_t[]){__VA_ARGS__}

/* x [1, H, W, C] -> MatMul [C, C] -> Add bias -> Transpose(perm) -> Mul by
 * a constant of scale_dims (rank sr) [-> a second reader of the Transpose]
 * -> Add x transposed likewise; the Mul's value an output too. */
static ts_graph *tail(int64_t h, int64_t w, int64_t c, const int64_t *perm, const int64_t *scale_dims, int sr,
                      bool second_reader)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = gb_input(g, "x", 4, I(1, h, w, c));
    int y = gb_node(g, "MatMul", (int[]){x, gb_weight(g, "w", 2, I(c, c), &rng)}, 2, NULL, 0);
    y = gb_node(g, "Add", (int[]){gb_weight(g, "b", 1, I(c), &rng), y}, 2, NULL, 0); /* the bias first, as exported */
    ts_attr p = perm ? ts_attr_ints("perm", perm, 4) : (ts_attr){0};
    int t = gb_node(g, "Transpose", &y, 1, &p, perm ? 1 : 0);
    int s = gb_node(g, "Mul", (int[]){gb_weight(g, "gamma", sr, scale_dims, &rng), t}, 2, NULL, 0);
    int xt = gb_node(g, "Transpose", &x, 1, &p, perm ? 1 : 0);
    gb_output(g, gb_node(g, "Add", (int[]){s, xt}, 2, NULL, 0));
    gb_output(g, s);
    if (second_reader) gb_output(g, gb_node(g, "Relu", &t, 1, NULL, 0));
    return g;
}

static int fold(ts_graph *g, ts_error *err)
{
    int n = ts_scale_before_transpose(g, err);
    if (n > 0 && (ts_fold_affine(g, err) < 0 || ts_graph_fold_constants(g, err) < 0)) return -1;
    return n;
}

Test(scale_transpose, convnext_layer_scale_checked_and_folded)
{
    ts_graph *g = tail(5, 7, 8, I(0, 3, 1, 2), I(8, 1, 1), 3, false);
    int n;
    ts_graph *r = gb_rewrite_checked(g, ts_scale_before_transpose, &n, rng++);
    cr_assert_eq(n, 1);
    cr_assert_eq(gb_count_op(r, "Transpose"), 2);
    const ts_value *o = &r->values[r->outputs[1]];
    cr_assert_str_eq(o->name, g->values[g->outputs[1]].name);
    cr_assert_eq(r->nodes[o->producer].op, &ts_op_transpose);
    /* the scale now on x's last axis: [1, 1, 1, 8] */
    for (int k = 0; k < r->nnodes; k++) {
        const ts_node *m = &r->nodes[k];
        if (m->dead || m->op != &ts_op_mul) continue;
        const ts_value *c = &r->values[m->inputs[1]];
        cr_assert(c->constant);
        cr_assert_eq(c->shape.rank, 4);
        cr_assert_eq(c->shape.dims[3], 8);
        cr_assert_eq(ts_shape_numel(&c->shape), 8);
    }
    ts_graph *f = gb_rewrite_checked(g, fold, &n, rng++);
    cr_assert_eq(n, 1);
    cr_assert_eq(gb_count_op(f, "Mul"), 0, "the moved scale was not folded into the MatMul");
    ts_graph_free(f);
    ts_graph_free(r);
    ts_graph_free(g);
}

Test(scale_transpose, scalar_and_reversed_perm_checked)
{
    ts_graph *graphs[] = {
        tail(5, 7, 8, I(0, 3, 1, 2), I(1), 1, false), /* a scalar (as a [1] constant) */
        tail(5, 7, 8, NULL, I(8, 1, 1, 1), 4, false), /* no perm: reversed; the scale on y's axis 0 (C) */
        tail(6, 4, 6, I(0, 2, 3, 1), I(6), 1, false), /* channels-last, the scale on the last axis */
    };
    for (int k = 0; k < 3; k++) {
        int n;
        ts_graph *r = gb_rewrite_checked(graphs[k], ts_scale_before_transpose, &n, rng++);
        cr_assert_eq(n, 1, "graph %d", k);
        ts_graph_free(r);
        ts_graph_free(graphs[k]);
    }
}

Test(scale_transpose, declines)
{
    ts_graph *graphs[] = {
        tail(5, 7, 8, I(0, 3, 1, 2), I(8, 5, 1), 3, false),   /* two dimensions other than 1 */
        tail(5, 7, 8, I(0, 3, 1, 2), I(8, 1, 1), 3, true),    /* the Transpose read by another node */
    };
    for (int k = 0; k < 2; k++) {
        int n;
        ts_graph *r = gb_rewrite(graphs[k], ts_scale_before_transpose, &n);
        cr_assert_eq(n, 0, "graph %d", k);
        ts_graph_free(r);
        ts_graph_free(graphs[k]);
    }
}

Test(scale_transpose, planted_wrong_axis_refuted)
{
    /* H = C = 6: the scale put on x's axis 1 (H) instead of 3 (C) is
     * well-formed and wrong */
    ts_graph *g = tail(6, 4, 6, I(0, 3, 1, 2), I(6, 1, 1), 3, false);
    int n;
    ts_graph *r = gb_rewrite(g, ts_scale_before_transpose, &n);
    cr_assert_eq(n, 1);
    int planted = 0;
    for (int k = 0; k < r->nnodes; k++) {
        const ts_node *m = &r->nodes[k];
        if (m->dead || m->op != &ts_op_mul) continue;
        ts_value *c = &r->values[m->inputs[1]];
        cr_assert_eq(c->shape.dims[3], 6);
        c->shape.dims[3] = 1, c->shape.dims[1] = 6;
        c->constant->shape.dims[3] = 1, c->constant->shape.dims[1] = 6;
        planted = 1;
    }
    cr_assert(planted);
    ts_tensor *in = gb_rand_tensor(4, I(1, 6, 4, 6), &rng);
    double worst = gb_max_diff(g, r, in);
    cr_assert_gt(worst, 0.01, "the planted axis was not refuted (largest difference %g)", worst);
    ts_tensor_unref(in);
    ts_graph_free(r);
    ts_graph_free(g);
}
