/* ts_group_conv_blocks (src/opt/group_blocks.c): a grouped Conv with
 * narrow groups written with groups of 16 channels and block-diagonal
 * weights.  The rewritten graph against the original by the reference
 * interpreter and the runtime's plan (4- and 8-channel groups as in
 * ResNeXt-50 and RegNet, 2-channel groups, 3x3 with padding and stride,
 * a bias, the conv's value a graph output, its name kept); a planted wrong
 * variant (one old group's weights in the wrong slot of its new group)
 * refuted by the same comparison; where it must decline. */
#include "graph_build.h"
#include "ops/attrs.h"
#include "opt/passes.h"

static uint64_t rng = 777;

#define I(...) (int64_t[]){__VA_ARGS__}

/* 1x1 conv 3 -> C, grouped 3x3 conv C -> C*mult (group G, stride s,
 * bias when bias), 1x1 conv to 4; the grouped conv's value also an output. */
static ts_graph *net(int C, int G, int mult, int stride, bool bias)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = gb_input(g, "x", 4, I(1, 3, 10, 9));
    int y = gb_node(g, "Conv", (int[]){x, gb_weight(g, "w1", 4, I(C, 3, 1, 1), &rng)}, 2, NULL, 0);
    ts_attr a[3] = {ts_attr_int("group", G), ts_attr_ints("pads", I(1, 1, 1, 1), 4),
                    ts_attr_ints("strides", I(stride, stride), 2)};
    int in[3] = {y, gb_weight(g, "wg", 4, I(C * mult, C / G, 3, 3), &rng),
                 bias ? gb_weight(g, "bg", 1, I(C * mult), &rng) : -1};
    int z = gb_node(g, "Conv", in, bias ? 3 : 2, a, 3);
    int r = gb_node(g, "Relu", &z, 1, NULL, 0);
    gb_output(g, gb_node(g, "Conv", (int[]){r, gb_weight(g, "w2", 4, I(4, C * mult, 1, 1), &rng)}, 2, NULL, 0));
    gb_output(g, z);
    return g;
}

/* The grouped conv of r: the producer of its second output. */
static const ts_node *grouped(const ts_graph *r)
{
    return &r->nodes[r->values[r->outputs[1]].producer];
}

Test(group_blocks, narrow_groups_checked)
{
    /* C, G, output channels per input, stride, bias: ResNeXt's 4-channel
     * groups, RegNet's 8, 2-channel groups, doubled outputs */
    int cases[][5] = {{128, 32, 1, 1, 0}, {48, 6, 1, 2, 1}, {32, 16, 1, 1, 1}, {64, 16, 2, 2, 0}};
    for (int k = 0; k < 4; k++) {
        int *c = cases[k];
        ts_graph *g = net(c[0], c[1], c[2], c[3], c[4]);
        int n;
        ts_graph *r = gb_rewrite(g, ts_group_conv_blocks, &n);
        cr_assert_eq(n, 1, "case %d", k);
        const ts_node *cn = grouped(r);
        const ts_value *w = &r->values[cn->inputs[1]];
        cr_assert_eq(w->shape.dims[1], 16, "case %d", k);
        cr_assert_eq(((const ts_conv_attrs *)cn->attrs)->group, (int64_t)c[0] / 16, "case %d", k);
        cr_assert_str_eq(r->values[r->outputs[1]].name, g->values[g->outputs[1]].name);
        gb_assert_same(g, r, rng++, GB_REFERENCE | GB_PLAN, 1e-4, 1e-4);
        ts_graph_free(r);
        ts_graph_free(g);
    }
}

Test(group_blocks, planted_wrong_slot_refuted)
{
    ts_graph *g = net(32, 8, 1, 1, false);
    int n;
    ts_graph *r = gb_rewrite(g, ts_group_conv_blocks, &n);
    cr_assert_eq(n, 1);
    /* old group 0's weights moved from slot 0 to slot 1 of its new group:
     * output channels 0..3 read input channels 4..7 */
    const ts_node *cn = grouped(r);
    float *w = r->values[cn->inputs[1]].constant->data;
    for (int oc = 0; oc < 4; oc++)
        for (int t = 0; t < 4 * 9; t++) {
            w[(oc * 16 + 4) * 9 + t] = w[(oc * 16) * 9 + t];
            w[(oc * 16) * 9 + t] = 0;
        }
    ts_tensor *in = gb_rand_tensor(4, I(1, 3, 10, 9), &rng);
    double worst = gb_max_diff(g, r, in);
    cr_assert_gt(worst, 0.01, "the planted slot was not refuted (largest difference %g)", worst);
    ts_tensor_unref(in);
    ts_graph_free(r);
    ts_graph_free(g);
}

Test(group_blocks, declines)
{
    /* blocked already (16 per group), depthwise, 3 per group (16 % 3),
     * 3 groups of 4 (k = 4 does not divide 3), one group */
    int cases[][2] = {{64, 4}, {32, 32}, {24, 8}, {12, 3}, {16, 1}};
    for (int k = 0; k < 5; k++) {
        ts_graph *g = net(cases[k][0], cases[k][1], 1, 1, false);
        int n;
        ts_graph *r = gb_rewrite(g, ts_group_conv_blocks, &n);
        cr_assert_eq(n, 0, "case %d rewritten", k);
        ts_graph_free(r);
        ts_graph_free(g);
    }
}
