/* ts_resize_as_matmul (src/opt/resize_matmul.c): a linear Resize over the
 * last two axes -> two MatMuls with constant interpolation matrices.  The
 * rewritten graph against the original by the reference interpreter and
 * the runtime's plan (every coordinate mode, up and down, sizes or scales,
 * one axis unchanged, an output size of 1, rank 3, the Resize's value a
 * graph output with its name kept); where it must decline (nearest, cubic,
 * tf_crop_and_resize, a leading axis resized); a planted wrong weight
 * refuted; hand-computed values. */
#include "graph_build.h"
#include "opt/passes.h"

static uint64_t rng = 2828;

#define I(...) (int64_t[]){__VA_ARGS__}

/* An int64 or float constant of n values. */
static int list(ts_graph *g, ts_dtype dt, const double *v, int n)
{
    static int count;
    char name[32];
    snprintf(name, sizeof name, "l%d", count++);
    ts_error e = {0};
    int64_t d = n;
    ts_shape s = ts_shape_make(1, &d);
    ts_tensor *t = ts_tensor_new(dt, &s, &e);
    cr_assert(t, "%s", e.msg);
    for (int i = 0; i < n; i++) ts_tensor_set_f64(t, i, v[i]);
    int c = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(c >= 0, "%s", e.msg);
    return c;
}

/* 1x1 conv to C channels, then Resize (mode, coordinate mode) to sizes
 * (n = rank) or by scales, then a 1x1 conv; the Resize's value also an
 * output.  Rank 3: the Resize alone. */
static ts_graph *net(const char *mode, const char *coord, int rank, const int64_t *in, const double *sizes,
                     const double *scales)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = gb_input(g, "x", rank, in), y = x;
    if (rank == 4)
        y = gb_node(g, "Conv", (int[]){x, gb_weight(g, "w1", 4, I(in[1], in[1], 1, 1), &rng)}, 2, NULL, 0);
    ts_attr a[2] = {ts_attr_string("mode", mode), ts_attr_string("coordinate_transformation_mode", coord)};
    int ins[4] = {y, -1, sizes ? -1 : list(g, TS_F32, scales, rank), sizes ? list(g, TS_I64, sizes, rank) : -1};
    if (!strcmp(coord, "tf_crop_and_resize")) ins[1] = list(g, TS_F32, (double[]){0, 0, 0, 0, 1, 1, 0.8, 0.9}, 8);
    int r = gb_node(g, "Resize", ins, sizes ? 4 : 3, a, 2);
    if (rank == 4) {
        const ts_value *rv = &g->values[r];
        int64_t c = rv->shape.dims[1];
        gb_output(g, gb_node(g, "Conv", (int[]){r, gb_weight(g, "w2", 4, I(3, c, 1, 1), &rng)}, 2, NULL, 0));
    }
    gb_output(g, r);
    return g;
}

Test(resize_matmul, every_mode_up_and_down)
{
    struct {
        const char *coord;
        int64_t in[4];
        double sizes[4], scales[4];
        int matmuls;
    } cases[] = {
        {"half_pixel", {1, 5, 7, 6}, {1, 5, 56, 48}, {0}, 2},         /* x8 both axes (the heads' upsampling) */
        {"pytorch_half_pixel", {2, 3, 6, 5}, {2, 3, 1, 11}, {0}, 2},  /* an output row of 1 */
        {"align_corners", {1, 4, 6, 6}, {1, 4, 11, 13}, {0}, 2},
        {"asymmetric", {1, 2, 5, 4}, {0}, {1, 1, 2, 3}, 2},          /* scales, not sizes */
        {"half_pixel", {1, 3, 9, 8}, {1, 3, 4, 3}, {0}, 2},           /* downscaling */
        {"half_pixel", {1, 3, 7, 5}, {1, 3, 7, 15}, {0}, 1},          /* the height kept: one MatMul */
        {"half_pixel_symmetric", {1, 2, 4, 5}, {0}, {1, 1, 1.5, 2.5}, 2},
    };
    for (int k = 0; k < (int)(sizeof cases / sizeof *cases); k++) {
        ts_graph *g = net("linear", cases[k].coord, 4, cases[k].in, cases[k].sizes[0] ? cases[k].sizes : NULL,
                          cases[k].scales);
        int n;
        ts_graph *r = gb_rewrite_checked(g, ts_resize_as_matmul, &n, rng++);
        cr_assert_eq(n, 1, "case %d", k);
        cr_assert_eq(gb_count_op(r, "Resize"), 0, "case %d", k);
        cr_assert_eq(gb_count_op(r, "MatMul"), cases[k].matmuls, "case %d", k);
        cr_assert_str_eq(r->values[r->outputs[1]].name, g->values[g->outputs[1]].name);
        ts_graph_free(r);
        ts_graph_free(g);
    }
}

Test(resize_matmul, rank3)
{
    ts_graph *g = net("linear", "half_pixel", 3, I(4, 6, 5), (double[]){4, 12, 20}, NULL);
    int n;
    ts_graph *r = gb_rewrite_checked(g, ts_resize_as_matmul, &n, rng++);
    cr_assert_eq(n, 1);
    ts_graph_free(r);
    ts_graph_free(g);
}

Test(resize_matmul, declines)
{
    /* (sizes that are not constants cannot occur: tsopt infers every shape) */
    ts_graph *graphs[4] = {
        net("nearest", "half_pixel", 4, I(1, 3, 4, 4), (double[]){1, 3, 8, 8}, NULL),
        net("cubic", "half_pixel", 4, I(1, 3, 4, 4), (double[]){1, 3, 8, 8}, NULL),
        net("linear", "tf_crop_and_resize", 4, I(1, 3, 4, 4), (double[]){1, 3, 8, 8}, NULL),
        net("linear", "half_pixel", 4, I(1, 3, 4, 4), (double[]){2, 3, 8, 8}, NULL), /* the batch axis resized */
    };
    for (int k = 0; k < 4; k++) {
        int n;
        ts_graph *r = gb_rewrite(graphs[k], ts_resize_as_matmul, &n);
        cr_assert_eq(n, 0, "graph %d rewritten", k);
        cr_assert_eq(gb_count_op(r, "MatMul"), 0, "graph %d", k);
        ts_graph_free(r);
        ts_graph_free(graphs[k]);
    }
}

Test(resize_matmul, planted_wrong_weight_refuted)
{
    ts_graph *g = net("linear", "half_pixel", 4, I(1, 3, 5, 6), (double[]){1, 3, 10, 12}, NULL);
    int n;
    ts_graph *r = gb_rewrite(g, ts_resize_as_matmul, &n);
    cr_assert_eq(n, 1);
    /* one output column reads its two inputs with the weights swapped
     * (w <-> 1 - w): what a sign slip in the coordinate would do */
    int planted = 0;
    for (int i = 0; i < r->nnodes && !planted; i++) {
        const ts_node *m = &r->nodes[i];
        if (m->dead || strcmp(m->op->name, "MatMul")) continue;
        for (int j = 0; j < 2 && !planted; j++) {
            ts_value *v = &r->values[m->inputs[j]];
            if (!v->constant) continue;
            float *a = v->constant->data;
            int64_t rows = v->shape.dims[0], cols = v->shape.dims[1];
            /* the transposed width matrix [in, out] or the height matrix [out, in]: swap the
             * two weights of the second output position */
            float *e[2];
            int ne = 0;
            for (int64_t t = 0; t < (j == 1 ? rows : cols) && ne < 2; t++) {
                float *p = j == 1 ? &a[t * cols + 1] : &a[1 * cols + t];
                if (*p != 0) e[ne++] = p;
            }
            cr_assert_eq(ne, 2);
            float tmp = *e[0];
            *e[0] = *e[1];
            *e[1] = tmp;
            planted = 1;
        }
    }
    cr_assert(planted);
    ts_tensor *in = gb_rand_tensor(4, I(1, 3, 5, 6), &rng);
    double worst = gb_max_diff(g, r, in);
    cr_assert_gt(worst, 0.01, "the planted weight was not refuted (largest difference %g)", worst);
    ts_tensor_unref(in);
    ts_graph_free(r);
    ts_graph_free(g);
}

Test(resize_matmul, hand_values)
{
    /* [0, 4] to 4 columns, half_pixel: coordinates -0.25 (clamped to 0),
     * 0.25, 0.75, 1.25 (clamped to 1) -> 0, 1, 3, 4 */
    ts_graph *g = ts_graph_new("t", 13);
    int x = gb_input(g, "x", 4, I(1, 1, 1, 2));
    ts_attr lin = ts_attr_string("mode", "linear");
    gb_output(g, gb_node(g, "Resize", (int[]){x, -1, -1, list(g, TS_I64, (double[]){1, 1, 1, 4}, 4)}, 4, &lin, 1));
    ts_error e = {0};
    cr_assert_eq(ts_resize_as_matmul(g, &e), 1, "%s", e.msg);
    cr_assert_eq(gb_count_op(g, "MatMul"), 1);
    float in[2] = {0, 4}, want[4] = {0, 1, 3, 4};
    gb_assert_values(g, in, want, 4);
    ts_graph_free(g);
}
