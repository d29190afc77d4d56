/* ts_conv_trim_dead_taps (src/opt/conv_dead_taps.c): a Conv's outer taps
 * that read only padding cut from its kernel.  The rewritten graph against
 * the original by the reference interpreter and the runtime's plan (the
 * ASPP case, 3x3 at dilation 24 on 14x14 -> 1x1, with a bias; a 5x5 at
 * dilation 3 on 4x4 -> 3x3 at dilation 3; one axis trimmed of two; a
 * stride 2 conv -> 1x1 stride 2); the kernel and pads it writes; a planted
 * wrong tap refuted by the same comparison; where it must decline. */
#include <math.h>
#include "graph_build.h"
#include "ops/attrs.h"
#include "opt/passes.h"

static uint64_t rng = 4242;

#define I(...) (int64_t[]){__VA_ARGS__}

/* Conv 6 -> 5 on x [1, 6, h, w], kernel k, dilation d, pads p, stride s,
 * a bias when bias; Relu after it. */
static ts_graph *net(int64_t h, int64_t w, int64_t k, int64_t d, int64_t p, int64_t s, bool bias)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = gb_input(g, "x", 4, I(1, 6, h, w));
    ts_attr a[3] = {ts_attr_ints("dilations", I(d, d), 2), ts_attr_ints("pads", I(p, p, p, p), 4),
                    ts_attr_ints("strides", I(s, s), 2)};
    int in[3] = {x, gb_weight(g, "w", 4, I(5, 6, k, k), &rng), bias ? gb_weight(g, "b", 1, I(5), &rng) : -1};
    int y = gb_node(g, "Conv", in, bias ? 3 : 2, a, 3);
    gb_output(g, gb_node(g, "Relu", &y, 1, NULL, 0));
    return g;
}

static const ts_conv_attrs *the_conv(const ts_graph *r)
{
    for (int i = 0; i < r->nnodes; i++)
        if (!r->nodes[i].dead && !strcmp(r->nodes[i].op->name, "Conv")) return r->nodes[i].attrs;
    return NULL;
}

Test(conv_dead_taps, trimmed_and_checked)
{
    /* h, w, k, dilation, pad, stride, bias; then the kernel (h, w), its
     * dilation and pads (h begin, w begin, h end, w end) written */
    int64_t cases[][12] = {
        {14, 14, 3, 24, 24, 1, 1, /**/ 1, 1, 1, 0, 0}, /* DeepLabV3's ASPP at 224x224 (dilation 36 alike) */
        {4, 4, 5, 3, 6, 1, 0, /**/ 3, 3, 3, 3, 3},     /* taps -6 and +6 dead, -3..3 kept */
        {8, 4, 5, 3, 6, 1, 1, /**/ 5, 3, 3, 6, 3},     /* h: every tap reaches the map; w trimmed */
        {9, 9, 3, 10, 10, 2, 0, /**/ 1, 1, 1, 0, 0},   /* stride 2: 5 outputs, only the centre tap */
    };
    for (int c = 0; c < 4; c++) {
        int64_t *k = cases[c];
        ts_graph *g = net(k[0], k[1], k[2], k[3], k[4], k[5], k[6]);
        int n;
        ts_graph *r = gb_rewrite(g, ts_conv_trim_dead_taps, &n);
        cr_assert_eq(n, 1, "case %d", c);
        const ts_conv_attrs *a = the_conv(r);
        cr_assert_not_null(a);
        cr_assert_eq(a->win.kernel[0], k[7], "case %d", c);
        cr_assert_eq(a->win.kernel[1], k[8], "case %d", c);
        cr_assert_eq(a->win.dilations[1], k[9], "case %d", c);
        cr_assert_eq(a->win.pads[0], k[10], "case %d", c);
        cr_assert_eq(a->win.pads[1], k[11], "case %d", c);
        cr_assert_eq(a->win.pads[3], k[11], "case %d", c);
        gb_assert_same(g, r, rng++, GB_REFERENCE | GB_PLAN, 1e-5, 1e-4);
        /* nothing left to trim */
        int m;
        ts_graph *r2 = gb_rewrite(r, ts_conv_trim_dead_taps, &m);
        cr_assert_eq(m, 0, "case %d trimmed twice", c);
        ts_graph_free(r2);
        ts_graph_free(r);
        ts_graph_free(g);
    }
}

Test(conv_dead_taps, planted_wrong_tap_refuted)
{
    /* the ASPP case with the corner tap kept instead of the centre */
    ts_graph *g = net(14, 14, 3, 24, 24, 1, false);
    int n;
    ts_graph *r = gb_rewrite(g, ts_conv_trim_dead_taps, &n);
    cr_assert_eq(n, 1);
    const ts_node *cn = NULL;
    for (int i = 0; i < r->nnodes; i++)
        if (!r->nodes[i].dead && !strcmp(r->nodes[i].op->name, "Conv")) cn = &r->nodes[i];
    float *w = r->values[cn->inputs[1]].constant->data;
    const float *w0 = g->values[g->nodes[0].inputs[1]].constant->data;
    for (int oi = 0; oi < 5 * 6; oi++) w[oi] = w0[oi * 9]; /* tap (0, 0), not (1, 1) */
    ts_tensor *in = gb_rand_tensor(4, I(1, 6, 14, 14), &rng);
    double worst = gb_max_diff(g, r, in);
    cr_assert_gt(worst, 0.01, "the planted tap was not refuted (largest difference %g)", worst);
    ts_tensor_unref(in);
    ts_graph_free(r);
    ts_graph_free(g);
}

Test(conv_dead_taps, declines)
{
    /* every tap reaches the map (3x3 pad 1; dilation 12 on 14x14, as the
     * first ASPP branch); a dead tap whose weight is not finite */
    int64_t cases[][6] = {{14, 14, 3, 1, 1, 1}, {14, 14, 3, 12, 12, 1}};
    for (int c = 0; c < 2; c++) {
        int64_t *k = cases[c];
        ts_graph *g = net(k[0], k[1], k[2], k[3], k[4], k[5], false);
        int n;
        ts_graph *r = gb_rewrite(g, ts_conv_trim_dead_taps, &n);
        cr_assert_eq(n, 0, "case %d rewritten", c);
        ts_graph_free(r);
        ts_graph_free(g);
    }
    ts_graph *g = net(14, 14, 3, 24, 24, 1, false);
    ((float *)g->values[g->nodes[0].inputs[1]].constant->data)[0] = INFINITY;
    int n;
    ts_graph *r = gb_rewrite(g, ts_conv_trim_dead_taps, &n);
    cr_assert_eq(n, 0, "a dead infinite weight was dropped");
    ts_graph_free(r);
    ts_graph_free(g);
}
