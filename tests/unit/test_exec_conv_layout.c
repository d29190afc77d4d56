/* Layout choice of the oneDNN convolutions (src/dnnl/dnnl_conv.c,
 * dnnl_layout.c): a grouped conv in a channels-last network stays
 * channels-last (before, it got 4- or 8-channel blocks, and the 1x1 convs
 * after it were pinned to those blocks and ran on a half-speed kernel);
 * results equal the reference interpreter, including channel counts that
 * are not multiples of the blocks. */
#include "dnnl/dnnl_layout.h"
#include "exec/exec.h"
#include "exec_check.h"

static uint64_t rng = 4242;

/* Random constant in [lo, hi). */
static int cst(ts_graph *g, const char *dims, double lo, double hi) { return xt_const_random(g, dims, lo, hi, &rng); }

/* Conv (+ Relu) with F output channels, kernel k x k, stride s, groups G. */
static int conv(ts_graph *g, int x, int C, int F, int k, int s, int G)
{
    char w[64], b[16];
    snprintf(w, sizeof w, "%dx%dx%dx%d", F, C / G, k, k);
    snprintf(b, sizeof b, "%d", F);
    int p = k / 2;
    ts_attr at[] = {ts_attr_ints("pads", (int64_t[]){p, p, p, p}, 4), ts_attr_ints("strides", (int64_t[]){s, s}, 2),
                    ts_attr_int("group", G)};
    int y = xt_node(g, "Conv", (int[]){x, cst(g, w, -0.3, 0.3), cst(g, b, -0.5, 0.5)}, 3, at, 3);
    return xt_node(g, "Relu", &y, 1, NULL, 0);
}

/* Plans g (last value is the output) and checks it against the reference
 * twice; no reference kernels; returns the plan for inspection (caller
 * frees). */
static ts_plan *check(ts_graph *g)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, g->nvalues - 1, &e), TS_OK, "%s", e.msg);
    ts_plan *p = xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    cr_assert_eq(st.fallback_steps, 0);
    cr_assert_eq(st.ref_impls, 0, "got %d oneDNN reference implementations", st.ref_impls);
    return p;
}

/* Every conv step after the first reads its input in the layout it writes
 * (no conversion inside the step): the grouped conv kept the layout of the
 * 1x1 conv before it, and the 1x1 conv after it kept the grouped conv's. */
static void assert_one_layout(const ts_plan *plan)
{
    const xplan *p = (const xplan *)plan;
    int nconv = 0;
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        if (strcmp(s->k->name, "dnnl.conv") != 0) continue;
        const xbuf *x = &p->bufs[s->in[0]], *y = &p->bufs[s->out[0]];
        if (nconv++ == 0 || y->kind == XB_OUTPUT) continue; /* first: reads the plain input */
        cr_assert(x->blocked && y->blocked, "conv step %d: input or output not in a oneDNN layout", i);
        dnnl_memory_desc_t same;
        cr_assert(xd_md_same_layout(&x->md, &x->shape, &y->shape, &same), "conv step %d: unknown layout", i);
        cr_assert(dnnl_memory_desc_equal(&same, &y->md), "conv step %d: output layout differs from its input's", i);
    }
    cr_assert_geq(nconv, 3);
}

/* The ResNeXt bottleneck: 1x1, grouped 3x3 (32 groups of 4 or 8), 1x1. */
static void resnext_block(int C, int width, int hw, int stride)
{
    ts_graph *g = ts_graph_new("t", 17);
    char dims[32];
    snprintf(dims, sizeof dims, "1x%dx%dx%d", C, hw, hw);
    int a = conv(g, xt_input(g, "x", dims), C, width, 1, 1, 1);
    a = conv(g, a, width, width, 3, stride, 32);
    a = conv(g, a, width, 2 * width, 1, 1, 1);
    conv(g, a, 2 * width, C, 1, 1, 1);
    ts_plan *p = check(g);
    assert_one_layout(p);
    ts_plan_free(p);
    ts_graph_free(g);
}

Test(conv_layout, resnext_4_per_group) { resnext_block(64, 128, 14, 1); }
Test(conv_layout, resnext_8_per_group_stride2) { resnext_block(128, 256, 14, 2); }
Test(conv_layout, resnext_16_per_group) { resnext_block(256, 512, 7, 1); }

/* Channel counts that are not multiples of 16, 8 or 4: 24 channels in 8
 * groups of 3, 15 channels in 3 groups of 5 (stride 2, odd size), 6 groups
 * of 2; checked against the reference only (any layout may win there). */
Test(conv_layout, odd_channels)
{
    static const int cfg[][5] = {
        /* C, F, G, stride, hw */
        {24, 24, 8, 1, 9},
        {15, 15, 3, 2, 11},
        {12, 18, 6, 1, 7},
        {40, 40, 5, 1, 6},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        int C = cfg[i][0], F = cfg[i][1], G = cfg[i][2], s = cfg[i][3], hw = cfg[i][4];
        ts_graph *g = ts_graph_new("t", 17);
        char dims[32];
        snprintf(dims, sizeof dims, "1x%dx%dx%d", C, hw, hw);
        int a = conv(g, xt_input(g, "x", dims), C, C, 1, 1, 1);
        a = conv(g, a, C, F, 3, s, G);
        a = conv(g, a, F, F, 1, 1, 1);
        ts_plan_free(check(g));
        ts_graph_free(g);
    }
}

/* 3x3 stride-1 convolutions with 32+ channels run on Winograd (16-channel
 * blocks): a chain of them with a residual Add, channel counts that are not
 * multiples of 16 (33, 40) and an odd spatial size, against the reference
 * within the same 1e-4 relative bound; the layout is the 16-channel block
 * after the first conv. */
static void wino_chain(int C, int F, int hw)
{
    ts_graph *g = ts_graph_new("t", 17);
    char dims[32];
    snprintf(dims, sizeof dims, "1x%dx%dx%d", C, hw, hw);
    int x = conv(g, xt_input(g, "x", dims), C, F, 3, 1, 1);
    int a = conv(g, x, F, F, 3, 1, 1);
    char w[64];
    snprintf(w, sizeof w, "%dx%dx3x3", F, F);
    ts_attr at[] = {ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4)};
    a = xt_node(g, "Conv", (int[]){a, cst(g, w, -0.1, 0.1)}, 2, at, 1);
    a = xt_node(g, "Add", (int[]){a, x}, 2, NULL, 0);
    a = xt_node(g, "Relu", &a, 1, NULL, 0);
    conv(g, a, F, F, 1, 1, 1);
    ts_plan *plan = check(g);
    const xplan *p = (const xplan *)plan;
    int blocked16 = 0;
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        if (strcmp(s->k->name, "dnnl.conv") != 0 || p->bufs[s->out[0]].kind == XB_OUTPUT) continue;
        const xbuf *y = &p->bufs[s->out[0]];
        dnnl_memory_desc_t md;
        dnnl_memory_desc_init_by_tag(&md, 4, (dnnl_dims_t){1, F, hw, hw}, dnnl_f32, dnnl_aBcd16b);
        blocked16 += y->blocked && dnnl_memory_desc_equal(&md, &y->md);
    }
    cr_assert_geq(blocked16, 2, "Winograd layout (16-channel blocks) on %d conv outputs", blocked16);
    ts_plan_free(plan);
    ts_graph_free(g);
}

Test(conv_layout, winograd_64) { wino_chain(64, 64, 28); }
Test(conv_layout, winograd_odd_channels) { wino_chain(33, 40, 29); }
Test(conv_layout, winograd_large_tile) { wino_chain(128, 128, 28); }

/* An inverted-residual network (MobileNetV2's pattern: stem, depthwise 3x3,
 * 1x1 expand and project, a residual Add) whose maps shrink from 48x48 to
 * 6x6, with no step that wants channels-last: the stem writes 16-channel
 * blocks and the convs after it keep them (oneDNN's blocked jit kernels;
 * net_blocks.c xplan_net_in_blocks; from the residual Add of 40 channels,
 * padded, oneDNN writes channels-last).  DW_SE adds a MobileNet-v3
 * squeeze-excite block on 24 channels (16-channel blocks padded to 32):
 * vec.se pools and scales them as they lie; DW_SE64 on 64 channels (no
 * padding, large enough that two threads split the pool).  DW_CONCAT adds
 * a channel Concat (its kernels read channels-last): the net stays
 * channels-last, as with TSOPT_SKIP=conv.stem_blocks.  Results equal the
 * reference interpreter in all of them. */
typedef enum { DW_PLAIN, DW_SE, DW_SE64, DW_CONCAT } dw_kind;

static int se_block(ts_graph *g, int x, int C, int R)
{
    char w1[32], w2[32], b1[16], b2[16];
    snprintf(w1, sizeof w1, "%dx%dx1x1", R, C);
    snprintf(w2, sizeof w2, "%dx%dx1x1", C, R);
    snprintf(b1, sizeof b1, "%d", R);
    snprintf(b2, sizeof b2, "%d", C);
    int y = xt_node(g, "GlobalAveragePool", &x, 1, NULL, 0);
    y = xt_node(g, "Conv", (int[]){y, cst(g, w1, -1, 1), cst(g, b1, -0.5, 0.5)}, 3, NULL, 0);
    y = xt_node(g, "Relu", &y, 1, NULL, 0);
    y = xt_node(g, "Conv", (int[]){y, cst(g, w2, -1, 1), cst(g, b2, -0.5, 0.5)}, 3, NULL, 0);
    y = xt_node(g, "HardSigmoid", &y, 1, (ts_attr[]){ts_attr_float("alpha", 1.0f / 6), ts_attr_float("beta", 0.5f)},
                2);
    return xt_node(g, "Mul", (int[]){x, y}, 2, NULL, 0);
}

static int dwnet(ts_graph *g, dw_kind kind)
{
    int a = conv(g, xt_input(g, "x", "1x3x96x96"), 3, 16, 3, 2, 1); /* 48x48 */
    a = conv(g, a, 16, 16, 3, 1, 16);
    const int m = kind == DW_SE64 ? 64 : 24;
    a = conv(g, a, 16, m, 1, 1, 1);
    if (kind == DW_SE || kind == DW_SE64) a = se_block(g, a, m, 8);
    a = conv(g, a, m, 72, 1, 1, 1);
    a = conv(g, a, 72, 72, 3, 2, 72); /* 24x24 */
    int C = 72;
    if (kind == DW_CONCAT) {
        a = xt_node(g, "Concat", (int[]){a, a}, 2, (ts_attr[]){ts_attr_int("axis", 1)}, 1);
        C = 144;
    }
    int r = conv(g, a, C, 40, 1, 1, 1);
    a = conv(g, r, 40, 120, 1, 1, 1);
    a = conv(g, a, 120, 120, 3, 1, 120);
    a = conv(g, a, 120, 40, 1, 1, 1);
    a = xt_node(g, "Add", (int[]){a, r}, 2, NULL, 0);
    a = conv(g, a, 40, 40, 3, 2, 40); /* 12x12 */
    a = conv(g, a, 40, 40, 3, 2, 40); /* 6x6 */
    a = conv(g, a, 40, 64, 1, 1, 1);
    return conv(g, a, 64, 32, 1, 1, 1);
}

/* Conv steps writing 16-channel blocks (any padding) among those reading
 * the 48x48 maps and among the others; the graph output's conv (plain) not
 * counted; vec.se steps, and those reading and writing blocks. */
typedef struct {
    int big, nbig, small, nsmall, se, se_blocks;
} dw_count;

static dw_count convs_in_blocks(const xplan *p)
{
    dw_count c = {0};
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        if (!strcmp(s->k->name, "vec.se")) {
            c.se++;
            c.se_blocks += xbuf_is_blocks16_padded(&p->bufs[s->in[0]]) && xbuf_is_blocks16_padded(&p->bufs[s->out[0]]);
        }
        if (strcmp(s->k->name, "dnnl.conv") != 0 || p->bufs[s->out[0]].kind == XB_OUTPUT) continue;
        const xbuf *x = &p->bufs[s->in[0]], *y = &p->bufs[s->out[0]];
        const dnnl_blocking_desc_t *bk = &y->md.format_desc.blocking;
        bool b = y->blocked && y->md.format_kind == dnnl_blocked && bk->inner_nblks == 1 && bk->inner_blks[0] == 16 &&
                 bk->inner_idxs[0] == 1;
        if (x->shape.dims[2] >= 48) {
            c.nbig++;
            c.big += b;
        } else {
            c.nsmall++;
            c.small += b;
        }
    }
    return c;
}

static dw_count dwnet_blocks(dw_kind kind, const char *skip)
{
    ts_graph *g = ts_graph_new("t", 17);
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, dwnet(g, kind), &e), TS_OK, "%s", e.msg);
    ts_plan_opts o = {.skip = skip};
    ts_plan *plan = xt_plan_check(g, &o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    ts_plan_stats st;
    ts_plan_stats_get(plan, &st);
    cr_assert_eq(st.ref_impls, 0, "got %d oneDNN reference implementations", st.ref_impls);
    dw_count c = convs_in_blocks((const xplan *)plan);
    ts_plan_free(plan);
    ts_graph_free(g);
    return c;
}

Test(conv_layout, depthwise_net_in_blocks)
{
    dw_count a = dwnet_blocks(DW_PLAIN, NULL), skipped = dwnet_blocks(DW_PLAIN, "conv.stem_blocks");
    dw_count cat = dwnet_blocks(DW_CONCAT, NULL);
    cr_assert_eq(a.nbig, 5, "%d conv steps reading 48x48 maps", a.nbig);
    if (!__builtin_cpu_supports("avx512f")) return; /* results checked; layouts are oneDNN's choice */
    cr_assert_eq(a.big, a.nbig, "%d of %d conv steps on 48x48 maps write 16-channel blocks", a.big, a.nbig);
    cr_assert_geq(a.big + a.small, (a.nbig + a.nsmall) / 2, "%d of %d conv steps write 16-channel blocks",
                  a.big + a.small, a.nbig + a.nsmall);
    cr_assert_lt(skipped.big + skipped.small, (skipped.nbig + skipped.nsmall) / 2,
                 "conv.stem_blocks skipped: %d of %d in 16-channel blocks", skipped.big + skipped.small,
                 skipped.nbig + skipped.nsmall);
    cr_assert_lt(cat.big + cat.small, (cat.nbig + cat.nsmall) / 2, "with a Concat: %d of %d in 16-channel blocks",
                 cat.big + cat.small, cat.nbig + cat.nsmall);
}

/* A squeeze-excite block on 24 channels in padded blocks: one vec.se step
 * reading and writing them (before: pool, two convs, two reorders and a
 * Mul), the net in blocks as without it; TSOPT_SKIP=se.blocks: vec.se
 * declines the blocks (the block's steps and reorders come back). */
Test(conv_layout, squeeze_excite_in_blocks)
{
    dw_count a = dwnet_blocks(DW_SE, NULL), u = dwnet_blocks(DW_SE64, NULL), off = dwnet_blocks(DW_SE, "se.blocks");
    if (!__builtin_cpu_supports("avx512f")) return;
    cr_assert_eq(a.se, 1, "%d vec.se steps", a.se);
    cr_assert_eq(a.se_blocks, 1, "vec.se reads and writes 16-channel blocks (24 channels)");
    cr_assert_eq(u.se_blocks, 1, "vec.se reads and writes 16-channel blocks (64 channels)");
    cr_assert_eq(a.big, a.nbig, "%d of %d conv steps on 48x48 maps write 16-channel blocks", a.big, a.nbig);
    cr_assert_eq(off.se_blocks, 0, "se.blocks skipped");
}
