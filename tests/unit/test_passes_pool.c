/* ts_swap_pool_conv (src/opt/passes.c): AveragePool -> 1x1 Conv becomes
 * 1x1 Conv -> AveragePool.  Hand-built graphs in, the expected graph out
 * (node order and where the bias went), outputs equal to the original's
 * (reference interpreter and the runtime's plan); the pairs it must leave
 * alone (more output channels than input, a 3x3 conv, a strided pool, a
 * pool read twice) are left alone. */
#include <criterion/criterion.h>
#include <string.h>
#include "graph_build.h"
#include "opt/passes.h"

/* The live nodes' operators in a topological order, joined by spaces. */
static void ops_of(const ts_graph *g, char *buf, size_t n)
{
    ts_error e = {0};
    int order[64], count = 0;
    cr_assert(g->nnodes <= 64);
    cr_assert_eq(ts_graph_topo_order(g, order, &count, &e), TS_OK, "%s", e.msg);
    buf[0] = 0;
    for (int i = 0; i < count; i++) {
        if (buf[0]) strncat(buf, " ", n - strlen(buf) - 1);
        strncat(buf, g->nodes[order[i]].op->name, n - strlen(buf) - 1);
    }
}

/* b against a on the same random input, by the reference interpreter and
 * the runtime's plan (rtol 1e-3, atol 1e-4). */
static void assert_same(const ts_graph *a, const ts_graph *b)
{
    gb_assert_same(a, b, 3, GB_REFERENCE | GB_PLAN, 1e-4, 1e-3);
}

typedef struct pool_case {
    int64_t C, K, kernel;   /* channels in, out; conv kernel size */
    int64_t stride, pad;    /* pool's (3x3 window) */
    int count_include_pad;
    bool bias, relu, twice; /* conv bias; Relu after; pool also a graph output */
} pool_case;

/* x (1 x C x 6 x 5) -> AveragePool 3x3 -> Conv (K, kernel) -> [Relu] -> y */
static ts_graph *pool_conv(const pool_case *pc)
{
    ts_error e = {0};
    uint64_t rng = 7;
    ts_graph *g = ts_graph_new("pool_conv", 13);
    int64_t xd[4] = {1, pc->C, 6, 5};
    ts_shape xs = ts_shape_make(4, xd);
    int x = ts_graph_add_input(g, "x", TS_F32, &xs, &e);
    cr_assert(x >= 0, "%s", e.msg);
    int64_t k3[2] = {3, 3}, st[2] = {pc->stride, pc->stride}, pd[4] = {pc->pad, pc->pad, pc->pad, pc->pad};
    ts_attr pa[4] = {ts_attr_ints("kernel_shape", k3, 2), ts_attr_ints("strides", st, 2), ts_attr_ints("pads", pd, 4),
                     ts_attr_int("count_include_pad", pc->count_include_pad)};
    int p = gb_node(g, "AveragePool", &x, 1, pa, 4);
    int64_t wd[4] = {pc->K, pc->C, pc->kernel, pc->kernel}, kk[2] = {pc->kernel, pc->kernel};
    int64_t cp = pc->kernel / 2, cpd[4] = {cp, cp, cp, cp};
    int in[3] = {p, gb_weight(g, "w", 4, wd, &rng), pc->bias ? gb_weight(g, "b", 1, &pc->K, &rng) : -1};
    ts_attr ca[2] = {ts_attr_ints("kernel_shape", kk, 2), ts_attr_ints("pads", cpd, 4)};
    int y = gb_node(g, "Conv", in, pc->bias ? 3 : 2, ca, 2);
    if (pc->relu) y = gb_node(g, "Relu", &y, 1, NULL, 0);
    cr_assert_eq(ts_graph_add_output(g, y, &e), TS_OK, "%s", e.msg);
    if (pc->twice) cr_assert_eq(ts_graph_add_output(g, p, &e), TS_OK, "%s", e.msg);
    return g;
}

static void expect_swap(const pool_case *pc, const char *ops)
{
    ts_error e = {0};
    ts_graph *g = pool_conv(pc), *h = ts_graph_copy(g);
    cr_assert_eq(ts_swap_pool_conv(h, &e), 1, "%s", e.msg);
    char got[256];
    ops_of(h, got, sizeof got);
    cr_assert_str_eq(got, ops);
    assert_same(g, h);
    cr_assert_eq(ts_swap_pool_conv(h, &e), 0, "the swapped graph has nothing left to swap");
    ts_graph_free(h);
    ts_graph_free(g);
}

static void expect_none(const pool_case *pc)
{
    ts_error e = {0};
    ts_graph *g = pool_conv(pc);
    int before = g->nnodes;
    cr_assert_eq(ts_swap_pool_conv(g, &e), 0, "%s", e.msg);
    cr_assert_eq(g->nnodes, before);
    ts_graph_free(g);
}

Test(pool_swap, padded_counting_pads_moves_the_bias_after)
{
    /* zero padding counts in the divisor: at the border the average of the
     * bias is not the bias, so it is added after the pooling */
    pool_case pc = {.C = 8, .K = 3, .kernel = 1, .stride = 1, .pad = 1, .count_include_pad = 1, .bias = true,
                    .relu = true};
    expect_swap(&pc, "Conv AveragePool Add Relu");
}

Test(pool_swap, padded_not_counting_keeps_the_bias_in_the_conv)
{
    pool_case pc = {.C = 8, .K = 3, .kernel = 1, .stride = 1, .pad = 1, .count_include_pad = 0, .bias = true,
                    .relu = true};
    expect_swap(&pc, "Conv AveragePool Relu");
}

Test(pool_swap, no_bias)
{
    pool_case pc = {.C = 5, .K = 2, .kernel = 1, .stride = 1, .pad = 1, .count_include_pad = 1, .relu = true};
    expect_swap(&pc, "Conv AveragePool Relu");
}

Test(pool_swap, hand_computed)
{
    /* x = 1 x 2 x 3 x 3, channel c all equal to c + 1, weight [1, 10] into one channel, bias 0.5, pad 1,
     * count_include_pad 1, then a Relu: the corner window holds 4 of 9
     * pixels, so y = 4/9 * (1 * 1 + 10 * 2) + 0.5 = 9.8333; the centre 21.5. */
    ts_error e = {0};
    ts_graph *g = ts_graph_new("hand", 13);
    int64_t xd[4] = {1, 2, 3, 3}, wd[4] = {1, 2, 1, 1}, one = 1;
    ts_shape xs = ts_shape_make(4, xd), ws = ts_shape_make(4, wd), bs = ts_shape_make(1, &one);
    int x = ts_graph_add_input(g, "x", TS_F32, &xs, &e);
    int64_t k3[2] = {3, 3}, k1[2] = {1, 1}, pd[4] = {1, 1, 1, 1};
    ts_attr pa[3] = {ts_attr_ints("kernel_shape", k3, 2), ts_attr_ints("pads", pd, 4), ts_attr_int("count_include_pad", 1)};
    int p = gb_node(g, "AveragePool", &x, 1, pa, 3);
    ts_tensor *w = ts_tensor_new(TS_F32, &ws, &e), *b = ts_tensor_new(TS_F32, &bs, &e);
    ((float *)w->data)[0] = 1;
    ((float *)w->data)[1] = 10;
    ((float *)b->data)[0] = 0.5f;
    int in[3] = {p, ts_graph_add_constant(g, "w", w, &e), ts_graph_add_constant(g, "b", b, &e)};
    ts_tensor_unref(w);
    ts_tensor_unref(b);
    ts_attr ca[1] = {ts_attr_ints("kernel_shape", k1, 2)};
    int y = gb_node(g, "Conv", in, 3, ca, 1);
    y = gb_node(g, "Relu", &y, 1, NULL, 0); /* a conv that is a graph output keeps its name: not swapped */
    cr_assert_eq(ts_graph_add_output(g, y, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_swap_pool_conv(g, &e), 1, "%s", e.msg);
    ts_tensor *xt = ts_tensor_new(TS_F32, &xs, &e), *out = NULL;
    for (int i = 0; i < 18; i++) ((float *)xt->data)[i] = i < 9 ? 1.0f : 2.0f;
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, &xt, &out, &e), TS_OK, "%s", e.msg);
    cr_assert_float_eq(ts_tensor_get_f64(out, 0), 4.0 / 9.0 * 21.0 + 0.5, 1e-5);
    cr_assert_float_eq(ts_tensor_get_f64(out, 4), 21.5, 1e-5);
    ts_tensor_unref(xt);
    ts_tensor_unref(out);
    ts_graph_free(g);
}

Test(pool_swap, left_alone)
{
    pool_case more_out = {.C = 3, .K = 8, .kernel = 1, .stride = 1, .pad = 1, .count_include_pad = 1, .relu = true};
    pool_case conv3x3 = {.C = 8, .K = 3, .kernel = 3, .stride = 1, .pad = 1, .count_include_pad = 1, .relu = true};
    pool_case strided = {.C = 8, .K = 3, .kernel = 1, .stride = 2, .pad = 1, .count_include_pad = 1, .relu = true};
    pool_case read_twice = {.C = 8, .K = 3, .kernel = 1, .stride = 1, .pad = 1, .count_include_pad = 1, .relu = true,
                          .twice = true};
    expect_none(&more_out); /* the conv would run on the wider side */
    expect_none(&conv3x3);  /* mixes pixels: does not commute with pooling */
    expect_none(&strided);  /* the conv would run on 4x the pixels */
    expect_none(&read_twice);
}
