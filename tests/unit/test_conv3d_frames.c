/* ts_conv3d_as_frames (src/opt/conv3d_frames.c): a 3-D Conv written as a
 * 2-D Conv over the frames, the temporal taps stacked on its input
 * channels.  The rewritten graph against the original by the reference
 * interpreter and the runtime's plan (r3d_18's kinds: 3x3x3 with padding,
 * temporal and spatial stride 2, the 3x7x7 stem, the 1x1x1 stride-2
 * downsample; one temporal tap with nothing sliced, uneven temporal
 * padding, a bias, the conv's value a graph output, its name kept); a
 * planted wrong variant (the temporal taps' weights reversed) refuted by
 * the same comparison; where it must decline. */
#include "graph_build.h"
#include "ops/attrs.h"
#include "ops/list.h"
#include "opt/passes.h"

static uint64_t rng = 4242;

#define I(...) (int64_t[]){__VA_ARGS__}

typedef struct {
    int c, o, t, kt, kh, pt0, pt1, ph, st, sh, bias, group, dt;
} layer;

/* x [1, C, T, 9, 8] -> Conv3D -> Relu -> output; the conv's value an
 * output too. */
static ts_graph *net(const layer *l, int opset)
{
    ts_graph *g = ts_graph_new("t", opset);
    int x = gb_input(g, "x", 5, I(1, l->c, l->t, 9, 8));
    ts_attr a[5] = {ts_attr_ints("kernel_shape", I(l->kt, l->kh, l->kh), 3),
                    ts_attr_ints("pads", I(l->pt0, l->ph, l->ph, l->pt1, l->ph, l->ph), 6),
                    ts_attr_ints("strides", I(l->st, l->sh, l->sh), 3), ts_attr_int("group", l->group),
                    ts_attr_ints("dilations", I(l->dt, 1, 1), 3)};
    int in[3] = {x, gb_weight(g, "w", 5, I(l->o, l->c / l->group, l->kt, l->kh, l->kh), &rng),
                 l->bias ? gb_weight(g, "b", 1, I(l->o), &rng) : -1};
    int z = gb_node(g, "Conv", in, l->bias ? 3 : 2, a, 5);
    gb_output(g, gb_node(g, "Relu", &z, 1, NULL, 0));
    gb_output(g, z);
    return g;
}

/* The 2-D conv of a rewritten graph. */
static const ts_node *conv2d(const ts_graph *r)
{
    for (int i = 0; i < r->nnodes; i++)
        if (!r->nodes[i].dead && r->nodes[i].op == &ts_op_conv) return &r->nodes[i];
    cr_assert_fail("no conv left");
    return NULL;
}

Test(conv3d_frames, r3d_layers_checked)
{
    /* c, o, t, kt, kh, pt0, pt1, ph, st, sh, bias, group, dt */
    layer cases[] = {
        {4, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, /* layer1's 3x3x3 */
        {4, 8, 5, 3, 3, 1, 1, 1, 2, 2, 0, 1, 1}, /* layer2.0's conv1: stride 2 everywhere */
        {3, 8, 4, 3, 7, 1, 1, 3, 1, 2, 1, 1, 1}, /* the stem: 3x7x7, spatial stride 2 */
        {4, 8, 5, 1, 1, 0, 0, 0, 2, 2, 1, 1, 1}, /* downsample: 1x1x1 stride 2 */
        {5, 4, 3, 1, 3, 0, 0, 1, 1, 1, 1, 1, 1}, /* one tap, every frame: nothing sliced */
        {4, 4, 6, 3, 3, 2, 0, 1, 1, 1, 0, 1, 1}, /* uneven temporal padding */
    };
    for (int k = 0; k < (int)(sizeof cases / sizeof *cases); k++) {
        ts_graph *g = net(&cases[k], 14);
        int n;
        ts_graph *r = gb_rewrite(g, ts_conv3d_as_frames, &n);
        cr_assert_eq(n, 1, "case %d", k);
        const ts_node *cn = conv2d(r);
        const ts_value *w = &r->values[cn->inputs[1]];
        cr_assert_eq(w->shape.rank, 4, "case %d", k);
        cr_assert_eq(w->shape.dims[1], (int64_t)cases[k].kt * cases[k].c, "case %d", k);
        cr_assert_eq(gb_count_op(r, "Slice"), cases[k].kt == 1 && cases[k].st == 1 ? 0 : cases[k].kt, "case %d", k);
        cr_assert_str_eq(r->values[r->outputs[1]].name, g->values[g->outputs[1]].name);
        gb_assert_same(g, r, rng++, GB_REFERENCE | GB_PLAN, 1e-4, 1e-4);
        ts_graph_free(r);
        ts_graph_free(g);
    }
}

Test(conv3d_frames, planted_reversed_taps_refuted)
{
    layer l = {4, 6, 5, 3, 3, 1, 1, 1, 1, 1, 0, 1, 1};
    ts_graph *g = net(&l, 14);
    int n;
    ts_graph *r = gb_rewrite(g, ts_conv3d_as_frames, &n);
    cr_assert_eq(n, 1);
    /* taps 0 and 2 swapped in W2: output frame t reads frame t + 1 with the
     * weights of frame t - 1 (a conv run backwards in time) */
    const ts_node *cn = conv2d(r);
    float *w = r->values[cn->inputs[1]].constant->data;
    const int blk = 4 * 9; /* one tap's C x kh x kw */
    for (int o = 0; o < 6; o++)
        for (int i = 0; i < blk; i++) {
            float *a = w + (o * 3 + 0) * blk + i, *b = w + (o * 3 + 2) * blk + i, s = *a;
            *a = *b;
            *b = s;
        }
    ts_tensor *in = gb_rand_tensor(5, I(1, 4, 5, 9, 8), &rng);
    double worst = gb_max_diff(g, r, in);
    cr_assert_gt(worst, 0.01, "the planted taps were not refuted (largest difference %g)", worst);
    ts_tensor_unref(in);
    ts_graph_free(r);
    ts_graph_free(g);
}

Test(conv3d_frames, declines)
{
    /* grouped, temporally dilated, opset 10 (Slice without steps as inputs) */
    layer grouped = {4, 4, 5, 3, 3, 1, 1, 1, 1, 1, 0, 2, 1}, dilated = {4, 4, 6, 3, 3, 2, 2, 1, 1, 1, 0, 1, 2},
          plain = {4, 4, 5, 3, 3, 1, 1, 1, 1, 1, 0, 1, 1};
    const layer *cases[] = {&grouped, &dilated, &plain};
    int opsets[] = {14, 14, 10};
    for (int k = 0; k < 3; k++) {
        ts_graph *g = net(cases[k], opsets[k]);
        int n;
        ts_graph *r = gb_rewrite(g, ts_conv3d_as_frames, &n);
        cr_assert_eq(n, 0, "case %d rewritten", k);
        ts_graph_free(r);
        ts_graph_free(g);
    }
    /* a 2-D conv */
    ts_graph *g = ts_graph_new("t", 14);
    int x = gb_input(g, "x", 4, I(1, 4, 9, 8));
    gb_output(g, gb_node(g, "Conv", (int[]){x, gb_weight(g, "w", 4, I(4, 4, 3, 3), &rng)}, 2, NULL, 0));
    int n;
    ts_graph *r = gb_rewrite(g, ts_conv3d_as_frames, &n);
    cr_assert_eq(n, 0);
    ts_graph_free(r);
    ts_graph_free(g);
}
