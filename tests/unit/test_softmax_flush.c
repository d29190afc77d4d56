/* ts_flush_softmax_subnormals (src/opt/softmax_flush.c): a masked
 * Softmax's subnormal probabilities set to 0 by Less + Where.  Swin's
 * shifted-window attention (scores + position bias, Reshape, + a -100
 * mask, Reshape, Softmax, MatMul with V) rewritten and checked against the
 * original by the reference interpreter and the plan; hand-computed
 * values where the mask makes probabilities subnormal (the original's
 * MatMul sees them, the rewrite's reads exact zeros, normal ones pass
 * unchanged); a planted wrong Where refuted; where it must decline; a
 * second application flushes nothing more. */
#include <float.h>

#include "graph_build.h"
#include "ops/list.h"
#include "opt/passes.h"

static uint64_t rng = 3107;

#define I(...) (int64_t[]){__VA_ARGS__}

static int constant(ts_graph *g, const char *name, int rank, const int64_t *dims, const float *v)
{
    ts_error e = {0};
    ts_shape s = ts_shape_make(rank, dims);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    cr_assert(t, "%s", e.msg);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) ts_tensor_set_f64(t, i, v[i]);
    int c = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(c >= 0, "%s", e.msg);
    return c;
}

static int shape_const(ts_graph *g, const char *name, int rank, const int64_t *dims)
{
    ts_error e = {0};
    int64_t r = rank;
    ts_shape s = ts_shape_make(1, &r);
    ts_tensor *t = ts_tensor_new(TS_I64, &s, &e);
    cr_assert(t, "%s", e.msg);
    for (int i = 0; i < rank; i++) ts_tensor_set_f64(t, i, (double)dims[i]);
    int c = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(c >= 0, "%s", e.msg);
    return c;
}

/* Scores [W, H, N, N] (W windows, H heads) + bias [H, N, N], Reshape to
 * [1, W, H, N, N], + mask [W, 1, N, N] (mask_value where row and column
 * are in different halves of the window), Reshape back, Softmax, MatMul
 * with V [W, H, N, D] (a weight); the probabilities a graph output too
 * when probs_out. */
static ts_graph *attention(int64_t w, int64_t h, int64_t n, int64_t d, float mask_value, bool probs_out, int opset)
{
    ts_graph *g = ts_graph_new("t", opset);
    int s = gb_input(g, "scores", 4, I(w, h, n, n));
    s = gb_node(g, "Add", (int[]){s, gb_weight(g, "bias", 3, I(h, n, n), &rng)}, 2, NULL, 0);
    s = gb_node(g, "Reshape", (int[]){s, shape_const(g, "to5", 5, I(1, w, h, n, n))}, 2, NULL, 0);
    float mask[4 * 1 * 16 * 16];
    cr_assert(w * n * n <= (int64_t)(sizeof mask / sizeof *mask));
    for (int64_t k = 0; k < w; k++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++)
                mask[(k * n + i) * n + j] = (k > 0 && (2 * i < n) != (2 * j < n)) ? mask_value : 0.0f;
    s = gb_node(g, "Add", (int[]){s, constant(g, "mask", 4, I(w, 1, n, n), mask)}, 2, NULL, 0);
    s = gb_node(g, "Reshape", (int[]){s, shape_const(g, "to4", 4, I(w, h, n, n))}, 2, NULL, 0);
    int64_t axis = -1;
    ts_attr a = ts_attr_int("axis", axis);
    int p = gb_node(g, "Softmax", &s, 1, &a, 1);
    gb_output(g, gb_node(g, "MatMul", (int[]){p, gb_weight(g, "v", 4, I(w, h, n, d), &rng)}, 2, NULL, 0));
    if (probs_out) gb_output(g, p);
    return g;
}

Test(softmax_flush, swin_window_attention_checked)
{
    ts_graph *g = attention(4, 3, 16, 8, -100.0f, false, 14);
    int n;
    ts_graph *r = gb_rewrite_checked(g, ts_flush_softmax_subnormals, &n, rng++);
    cr_assert_eq(n, 1);
    cr_assert_eq(gb_count_op(r, "Less"), 1);
    cr_assert_eq(gb_count_op(r, "Where"), 1);
    /* the MatMul reads the Where, the Where and the Less the Softmax */
    const ts_value *o = &r->values[r->outputs[0]];
    const ts_node *mm = &r->nodes[o->producer];
    cr_assert_eq(mm->op, &ts_op_matmul);
    const ts_node *wh = &r->nodes[r->values[mm->inputs[0]].producer];
    cr_assert_eq(wh->op, &ts_op_where);
    cr_assert_eq(r->nodes[r->values[wh->inputs[2]].producer].op, &ts_op_softmax);
    cr_assert_eq(r->nodes[r->values[wh->inputs[0]].producer].op, &ts_op_less);
    /* a second application flushes nothing more */
    int n2;
    ts_graph *r2 = gb_rewrite(r, ts_flush_softmax_subnormals, &n2);
    cr_assert_eq(n2, 0);
    cr_assert_eq(gb_count_op(r2, "Where"), 1);
    ts_graph_free(r2);
    ts_graph_free(r);
    ts_graph_free(g);
}

/* One window row of 4 scores, 2 masked: with zero scores (and zero bias)
 * the masked probabilities are e^-100 / (2 + 2 e^-100) ~ 1.9e-44, subnormal.
 * V holds 0 at the unmasked keys and 1e30 at the masked ones, so the
 * original's MatMul output is those subnormals times 1e30 (~3.7e-14) and
 * the rewrite's exactly 0; V 1 at the unmasked keys gives 1 in both. */
Test(softmax_flush, subnormals_become_zero_normals_unchanged)
{
    ts_graph *g = ts_graph_new("t", 14);
    int s = gb_input(g, "scores", 4, I(1, 1, 1, 4));
    s = gb_node(g, "Add", (int[]){s, constant(g, "mask", 4, I(1, 1, 1, 4), (float[]){0, 0, -100, -100})}, 2, NULL,
                0);
    ts_attr a = ts_attr_int("axis", -1);
    int p = gb_node(g, "Softmax", &s, 1, &a, 1);
    gb_output(g, gb_node(g, "MatMul", (int[]){p, constant(g, "v", 4, I(1, 1, 4, 2), (float[]){0, 1, 0, 1, 1e30f, 0,
                                                                                              1e30f, 0})},
                         2, NULL, 0));
    int n;
    ts_graph *r = gb_rewrite(g, ts_flush_softmax_subnormals, &n);
    cr_assert_eq(n, 1);
    float in[4] = {0, 0, 0, 0};
    ts_error e = {0};
    ts_tensor *ti = ts_tensor_wrap(TS_F32, &g->values[g->inputs[0]].shape, in), *to = NULL, *tr = NULL;
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, &ti, &to, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_run_reference(r, TS_DOMAIN_F32, &ti, &tr, &e), TS_OK, "%s", e.msg);
    double masked = ts_tensor_get_f64(to, 0);
    cr_assert(masked > 1e-15 && masked < 1e-12, "the original's masked sum %g: not the subnormals times 1e30", masked);
    cr_assert_eq(ts_tensor_get_f64(tr, 0), 0.0, "the rewrite's masked sum %g", ts_tensor_get_f64(tr, 0));
    cr_assert_float_eq(ts_tensor_get_f64(to, 1), 1.0, 1e-6);
    cr_assert_eq(ts_tensor_get_f64(tr, 1), ts_tensor_get_f64(to, 1), "normal probabilities pass unchanged");
    ts_tensor_unref(ti);
    ts_tensor_unref(to);
    ts_tensor_unref(tr);
    ts_graph_free(r);
    ts_graph_free(g);
}

Test(softmax_flush, planted_wrong_where_refuted)
{
    ts_graph *g = attention(2, 2, 8, 4, -100.0f, false, 14);
    int n;
    ts_graph *r = gb_rewrite(g, ts_flush_softmax_subnormals, &n);
    cr_assert_eq(n, 1);
    for (int i = 0; i < r->nnodes; i++) { /* keeps the subnormals, zeroes the rest: a swapped wiring */
        ts_node *m = &r->nodes[i];
        if (m->dead || m->op != &ts_op_where) continue;
        int t = m->inputs[1];
        m->inputs[1] = m->inputs[2];
        m->inputs[2] = t;
    }
    ts_tensor *in = gb_rand_tensor(4, I(2, 2, 8, 8), &rng);
    double worst = gb_max_diff(g, r, in);
    cr_assert_gt(worst, 0.01, "the planted Where was not refuted (largest difference %g)", worst);
    ts_tensor_unref(in);
    ts_graph_free(r);
    ts_graph_free(g);
}

Test(softmax_flush, declines)
{
    ts_graph *graphs[] = {
        attention(2, 2, 8, 4, -50.0f, false, 14),  /* a mask that cannot push e^(s - max) below 2^-126 */
        attention(2, 2, 8, 4, -10000.0f, false, 14), /* BERT's: e^(s - max) exactly 0, no subnormal */
        attention(2, 2, 8, 4, -100.0f, true, 14),  /* the probabilities a graph output: kept as they are */
        attention(2, 2, 8, 4, -100.0f, false, 8),  /* opset 8: no Where */
    };
    for (int k = 0; k < 4; k++) {
        int n;
        ts_graph *r = gb_rewrite(graphs[k], ts_flush_softmax_subnormals, &n);
        cr_assert_eq(n, 0, "graph %d", k);
        cr_assert_eq(gb_count_op(r, "Where"), 0, "graph %d", k);
        ts_graph_free(r);
        ts_graph_free(graphs[k]);
    }
}
