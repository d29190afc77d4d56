/* Dense concatenation without copies (src/dnnl/dense_concat.c) and the
 * fused BatchNormalization + Relu reading its channel-blocked buffer
 * (src/vec/vec_batchnorm.c).  A DenseNet-style block equals the reference
 * interpreter, its Concats are views of one buffer, the 3x3 convs write
 * straight into their slices, and no Relu or reorder runs on its own; a
 * chain of graph inputs gives hand-computed values; Concats that do not
 * form one line, batch 2 and odd channel counts are left to the other
 * concat kernels and still compute the right thing. */
#include <stdlib.h>
#include "exec_check.h"
#include "ops/list.h"

static uint64_t rng = 1234;

static int concat(ts_graph *g, const int *ins, int n)
{
    ts_attr at[] = {ts_attr_int("axis", 1)};
    return xt_node(g, "Concat", ins, n, at, 1);
}

/* BatchNormalization over C channels with random statistics (variance > 0). */
static int batchnorm(ts_graph *g, int x, int C)
{
    char c[16];
    snprintf(c, sizeof c, "%d", C);
    int ins[] = {x, xt_const_random(g, c, 0.5, 1.5, &rng), xt_const_random(g, c, -0.5, 0.5, &rng),
                 xt_const_random(g, c, -0.3, 0.3, &rng), xt_const_random(g, c, 0.5, 2.0, &rng)};
    return xt_node(g, "BatchNormalization", ins, 5, NULL, 0);
}

static int relu(ts_graph *g, int x) { return xt_node(g, "Relu", &x, 1, NULL, 0); }

/* 3x3 conv C -> F, pads 1, bias. */
static int conv3x3(ts_graph *g, int x, int C, int F)
{
    char w[64], b[16];
    snprintf(w, sizeof w, "%dx%dx3x3", F, C);
    snprintf(b, sizeof b, "%d", F);
    ts_attr at[] = {ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4)};
    int ins[] = {x, xt_const_random(g, w, -0.1, 0.1, &rng), xt_const_random(g, b, -0.2, 0.2, &rng)};
    return xt_node(g, "Conv", ins, 3, at, 1);
}

static int count_steps(const xplan *p, const char *kernel)
{
    int n = 0;
    for (int i = 0; i < p->nsteps; i++) n += !strcmp(p->steps[i].k->name, kernel);
    return n;
}

/* A dense block as torchvision exports it: layer l reads Concat(x0, y1,
 * ..., y(l-1)) through BN -> Relu -> 1x1 conv -> BN -> Relu -> 3x3 conv;
 * the block ends in the Concat of all, read by a transition BN -> Relu ->
 * 1x1 conv.  Returns the plan (checked against the reference) and, in
 * *gout, its graph. */
static ts_plan *dense_block(int N, int C0, int growth, int layers, int hw, ts_graph **gout)
{
    ts_graph *g = ts_graph_new("dense", 17);
    char dims[48];
    snprintf(dims, sizeof dims, "%dx8x%dx%d", N, hw, hw);
    int x = xt_input(g, "x", dims);
    int feats[16] = {xt_conv1x1(g, x, 8, C0, &rng)}, nf = 1, C = C0;
    for (int l = 0; l < layers; l++) {
        int c = concat(g, feats, nf);
        int h = xt_conv1x1(g, relu(g, batchnorm(g, c, C)), C, 4 * growth / 2, &rng);
        h = relu(g, batchnorm(g, h, 4 * growth / 2));
        feats[nf++] = conv3x3(g, h, 4 * growth / 2, growth);
        C += growth;
    }
    int out = concat(g, feats, nf);
    xt_output(g, xt_conv1x1(g, relu(g, batchnorm(g, out, C)), C, 16, &rng));
    ts_plan *plan = xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    ts_plan_stats st;
    ts_plan_stats_get(plan, &st);
    cr_assert_eq(st.fallback_steps, 0);
    *gout = g; /* the plan reads the graph's constants */
    return plan;
}

Test(dense_concat, block_is_views_of_one_buffer)
{
    const int layers = 4;
    ts_graph *g;
    ts_plan *plan = dense_block(1, 64, 32, layers, 28, &g);
    const xplan *p = (const xplan *)plan;
    /* every Concat (layers + the block's) is a dense.concat step, every
     * BN's Relu is fused, nothing is converted */
    cr_assert_eq(count_steps(p, "dnnl.dense_concat"), layers + 1);
    cr_assert_eq(count_steps(p, "vec.eltwise"), 0, "a Relu ran on its own");
    /* but the last conv's blocked result into the caller's plain tensor */
    int reorders = count_steps(p, "reorder");
    cr_assert_leq(reorders, 1, "%d layout conversions ran", reorders);
    cr_assert(!reorders || !strcmp(p->steps[p->nsteps - 1].k->name, "reorder"), "a layout conversion inside the block");
    /* the 3x3 convs (16-channel blocks on 28x28) write into their slices:
     * their outputs are views at growing offsets of one buffer */
    int views = 0, root = -1;
    for (int b = 0; b < p->nbufs; b++) {
        const xbuf *x = &p->bufs[b];
        if (x->kind != XB_ALIAS || !x->offset || x->value < 0) continue;
        int prod = p->g->values[x->value].producer;
        if (prod < 0 || p->g->nodes[prod].op != &ts_op_conv) continue;
        cr_assert(root < 0 || root == x->alias_of, "slices of two buffers");
        root = x->alias_of;
        views++;
    }
    cr_assert_eq(views, layers, "%d of %d conv outputs write their slice", views, layers);
    /* only the block input is copied (once): the first member's step */
    int copies = 0;
    for (int i = 0; i < p->nsteps; i++)
        if (!strcmp(p->steps[i].k->name, "dnnl.dense_concat")) copies += p->steps[i].nin;
    cr_assert_eq(copies, 1);
    ts_plan_free(plan);
    ts_graph_free(g);
}

Test(dense_concat, fewer_layers_and_8_channel_growth)
{
    const int cases[2][5] = {{24, 8, 3, 14}, {64, 32, 1, 9}}; /* C0, growth, layers, hw: nChw8c, one layer */
    for (int k = 0; k < 2; k++) {
        ts_graph *g;
        ts_plan *plan = dense_block(1, cases[k][0], cases[k][1], cases[k][2], cases[k][3], &g);
        cr_assert_eq(count_steps((const xplan *)plan, "dnnl.dense_concat"), cases[k][2] + 1);
        ts_plan_free(plan);
        ts_graph_free(g);
    }
}

Test(dense_concat, batch_2_is_left_to_the_other_kernels)
{
    ts_graph *g;
    ts_plan *plan = dense_block(2, 64, 32, 2, 14, &g);
    cr_assert_eq(count_steps((const xplan *)plan, "dnnl.dense_concat"), 0);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* Graph inputs (plain) concatenated in a chain and read through BN + Relu
 * with statistics chosen so that y = max(2x - 1, 0): hand-computed. */
Test(dense_concat, chain_of_inputs_hand_computed)
{
    ts_graph *g = ts_graph_new("chain", 17);
    int a = xt_input(g, "a", "1x8x1x2"), b = xt_input(g, "b", "1x8x1x2"), c = xt_input(g, "c", "1x16x1x2");
    int c1 = concat(g, (int[]){a, b}, 2), c2 = concat(g, (int[]){a, b, c}, 3);
    double one = 1.0 - 1e-5; /* var + epsilon = 1 */
    int bn1 = xt_node(g, "BatchNormalization",
                      (int[]){c1, xt_const_values(g, TS_F32, "16", (double[]){2}, 1),
                              xt_const_values(g, TS_F32, "16", (double[]){-1}, 1),
                              xt_const_values(g, TS_F32, "16", (double[]){0}, 1),
                              xt_const_values(g, TS_F32, "16", &one, 1)},
                      5, NULL, 0);
    int bn2 = xt_node(g, "BatchNormalization",
                      (int[]){c2, xt_const_values(g, TS_F32, "32", (double[]){2}, 1),
                              xt_const_values(g, TS_F32, "32", (double[]){-1}, 1),
                              xt_const_values(g, TS_F32, "32", (double[]){0}, 1),
                              xt_const_values(g, TS_F32, "32", &one, 1)},
                      5, NULL, 0);
    xt_output(g, relu(g, bn1));
    xt_output(g, relu(g, bn2));
    ts_error e = {0};
    ts_plan *plan = NULL;
    ts_plan_opts o = {.threads = 1};
    cr_assert_eq(ts_plan_build(g, &o, &plan, &e), TS_OK, "%s", e.msg);
    const xplan *p = xt_check_memplan(plan);
    cr_assert_eq(count_steps(p, "dnnl.dense_concat"), 2);
    ts_tensor *in[3], *out[2];
    const char *dims[3] = {"1x8x1x2", "1x8x1x2", "1x16x1x2"};
    for (int i = 0; i < 3; i++) {
        ts_shape s = xt_shape(dims[i]);
        in[i] = ts_tensor_new(TS_F32, &s, &e);
        float *d = in[i]->data;
        for (int64_t k = 0; k < ts_tensor_numel(in[i]); k++) d[k] = (float)(100 * i + k) / 16.0f - 1.0f;
    }
    for (int i = 0; i < 2; i++) out[i] = ts_tensor_new(TS_F32, &g->values[g->outputs[i]].shape, &e);
    cr_assert_eq(ts_plan_run(plan, in, out, &e), TS_OK, "%s", e.msg);
    /* channel ch of the concatenation, pixel q (NCHW, 2 pixels a channel) */
    for (int o2 = 0; o2 < 2; o2++) {
        const float *y = out[o2]->data;
        int C = o2 ? 32 : 16;
        for (int ch = 0; ch < C; ch++)
            for (int q = 0; q < 2; q++) {
                int src = ch < 8 ? 0 : ch < 16 ? 1 : 2, cc = ch < 8 ? ch : ch < 16 ? ch - 8 : ch - 16;
                double x = (100 * src + cc * 2 + q) / 16.0 - 1.0, want = fmax(2 * x - 1, 0);
                cr_assert_float_eq(y[ch * 2 + q], want, 1e-5, "output %d channel %d pixel %d: %g, want %g", o2, ch, q,
                                   y[ch * 2 + q], want);
            }
    }
    for (int i = 0; i < 3; i++) ts_tensor_unref(in[i]);
    for (int i = 0; i < 2; i++) ts_tensor_unref(out[i]);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* Two Concats extending the same one differently (a, b, c) and (a, b, d):
 * not one line, so no shared buffer (d would overwrite c's slice). */
Test(dense_concat, forked_chain_declines)
{
    ts_graph *g = ts_graph_new("fork", 17);
    int x = xt_input(g, "x", "1x16x8x8");
    int a = xt_conv1x1(g, x, 16, 16, &rng), b = xt_conv1x1(g, x, 16, 16, &rng);
    int c = xt_conv1x1(g, x, 16, 16, &rng), d = xt_conv1x1(g, x, 16, 32, &rng);
    int c1 = concat(g, (int[]){a, b}, 2);
    int c2 = concat(g, (int[]){a, b, c}, 3), c3 = concat(g, (int[]){a, b, d}, 3);
    xt_output(g, xt_conv1x1(g, relu(g, batchnorm(g, c1, 32)), 32, 8, &rng));
    xt_output(g, xt_conv1x1(g, relu(g, batchnorm(g, c2, 48)), 48, 8, &rng));
    xt_output(g, xt_conv1x1(g, relu(g, batchnorm(g, c3, 64)), 64, 8, &rng));
    ts_plan *plan = xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    cr_assert_eq(count_steps((const xplan *)plan, "dnnl.dense_concat"), 0);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* A conv of any kernel size (pads k/2, no bias). */
static int conv_k(ts_graph *g, int x, int C, int F, int k)
{
    char w[64];
    snprintf(w, sizeof w, "%dx%dx%dx%d", F, C, k, k);
    int64_t pd = k / 2;
    ts_attr at[] = {ts_attr_ints("pads", (int64_t[]){pd, pd, pd, pd}, 4)};
    return xt_node(g, "Conv", (int[]){x, xt_const_random(g, w, -0.1, 0.1, &rng)}, 2, at, 1);
}

/* A lone Concat (inception's): a Winograd 3x3 conv leaves 16-channel blocks,
 * two branches on them (1x1, 3x3) write their slices, and the Concat's
 * result is read by a 1x1 conv, then (spatial) by a 5x5 one.  Its view
 * keeps the convs after it on blocks: the pointwise reader alone stays on
 * jit_1x1 (kept); a 5x5 turns from brgconv to jit with 300 multiply-adds
 * per byte of the Concat (declined where oneDNN has brgconv: AVX-512). */
static int lone_concat_views(bool spatial, const char *skip)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = relu(g, conv3x3(g, xt_input(g, "x", "1x32x20x20"), 32, 32));
    int a = relu(g, conv_k(g, x, 32, 32, 1)), b = relu(g, conv3x3(g, x, 32, 32));
    int c = concat(g, (int[]){a, b}, 2);
    int y = relu(g, conv_k(g, c, 64, 48, 1));
    if (spatial) y = conv_k(g, y, 48, 64, 5);
    xt_output(g, y);
    ts_plan_opts o = {.skip = skip};
    ts_plan *p = xt_plan_check(g, &o, 3, -1, 1, 1e-4, XT_TOL_MAX);
    int views = count_steps((const xplan *)p, "dnnl.dense_concat");
    ts_plan_free(p);
    ts_graph_free(g);
    return views;
}

Test(dense_concat, lone_view_kept_where_readers_keep_their_kernels)
{
    cr_assert_eq(lone_concat_views(false, NULL), 1, "a pointwise reader: the view stays");
}

Test(dense_concat, lone_view_declined_where_a_spatial_reader_turns_to_blocks)
{
    const unsigned need = (unsigned)dnnl_cpu_isa_avx512_core;
    bool brg = ((unsigned)dnnl_get_effective_cpu_isa() & need) == need;
    cr_assert_eq(lone_concat_views(true, NULL), brg ? 0 : 1, "brgconv %s", brg ? "available" : "absent");
    cr_assert_eq(lone_concat_views(true, "dense_concat.kind"), 1, "the rule skipped: the view as before");
}
