/* vec.concat_cl (src/vec/vec_concat_cl.c): a channel Concat of inputs in
 * channels-last and 16-channel blocks (a Winograd 3x3 conv's layout on
 * AVX-512, a 1x1 conv's channels-last), as in SqueezeNet's fire modules and
 * GoogLeNet's inception blocks.  Against the reference interpreter on 1 and
 * 2 threads: channel counts with a block tail (40 = 16 + 16 + 8), an odd
 * image, batch 2, an input used twice; one hand-computed case; a plain
 * input is left to dnnl.concat. */
#include <stdlib.h>
#include "exec_check.h"
#include "dnnl/dnnl_layout.h"

static uint64_t rng = 9091;

static int concat(ts_graph *g, const int *ins, int n)
{
    return xt_node(g, "Concat", ins, n, (ts_attr[]){ts_attr_int("axis", 1)}, 1);
}

/* Whether the plan has a Concat input in 16-channel blocks and one
 * channels-last (what this kernel is for). */
static bool mixed_inputs(const ts_plan *plan)
{
    const xplan *p = (const xplan *)plan;
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        if (strcmp(p->g->nodes[s->node].op->name, "Concat")) continue;
        bool blk = false, cl = false;
        for (int j = 0; j < s->nin; j++) {
            const xbuf *b = &p->bufs[s->in[j]];
            blk |= b->blocked && b->md.format_desc.blocking.inner_nblks == 1;
            cl |= b->blocked && !b->md.format_desc.blocking.inner_nblks;
        }
        return blk && cl;
    }
    return false;
}

/* x (N x C x hw x hw) -> [3x3 conv C -> C, Relu] (blocked), [1x1 conv C -> F]
 * (channels-last) -> Concat(a, b[, a]) -> 1x1 conv -> output. */
static void mixed(int N, int C, int F, int hw, bool twice)
{
    ts_graph *g = ts_graph_new("t", 17);
    char dims[48];
    snprintf(dims, sizeof dims, "%dx%dx%dx%d", N, C, hw, hw);
    int x = xt_input(g, "x", dims);
    int a = xt_conv3x3_relu(g, x, C, &rng);
    int b = xt_conv1x1(g, x, C, F, &rng);
    int y = concat(g, (int[]){a, b, a}, twice ? 3 : 2);
    xt_output(g, xt_conv1x1(g, y, (twice ? 2 * C : C) + F, 16, &rng));
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan_opts o = {.threads = threads, .skip = "dnnl.dense_concat.single"}; /* vec.concat_cl's case */
        ts_plan *plan = xt_plan_check(g, &o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
        if (__builtin_cpu_supports("avx512f")) { /* Winograd: 16-channel blocks */
            cr_assert(mixed_inputs(plan), "the concat's inputs are not mixed: nothing tested");
            cr_assert_eq(xt_steps_of(plan, "vec.concat_cl"), 1);
        }
        ts_plan_free(plan);
    }
    ts_graph_free(g);
}

Test(concat_cl, fire_module) { mixed(1, 32, 48, 28, false); }
Test(concat_cl, block_tail_odd_image) { mixed(1, 40, 24, 29, false); }
Test(concat_cl, batch2_input_twice) { mixed(2, 32, 16, 28, true); }

/* A plain graph input among them: dnnl.concat (tests/unit/test_exec_concat_layout.c). */
Test(concat_cl, declines_plain_input)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x32x28x28");
    int a = xt_conv3x3_relu(g, x, 32, &rng);
    int y = concat(g, (int[]){a, x}, 2);
    xt_output(g, xt_conv1x1(g, y, 64, 16, &rng));
    ts_plan *plan = xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    cr_assert_eq(xt_steps_of(plan, "vec.concat_cl"), 0);
    cr_assert_eq(xt_steps_of(plan, "dnnl.dense_concat"), 0); /* a lone Concat with a graph input */
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* Hand-computed: x[c][h][w] = c + (h * 28 + w) / 1024; the 3x3 conv has one
 * tap, the centre, selecting channel (f + 1) % 32 for output f (a shift);
 * the 1x1 conv doubles channel j for its output j (16 channels); an
 * identity 1x1 conv after the Concat keeps it channels-last.  So output
 * channel f < 32 is x[(f + 1) % 32] and channel 32 + j is 2 x[j]. */
Test(concat_cl, hand_computed)
{
    enum { C = 32, F = 16, HW = 28, CT = C + F };
    ts_graph *g = ts_graph_new("t", 17);
    double *w3 = calloc(C * C * 9, sizeof *w3), *w1 = calloc(F * C, sizeof *w1), *eye = calloc(CT * CT, sizeof *eye);
    cr_assert(w3 && w1 && eye);
    for (int f = 0; f < C; f++) w3[(f * C + (f + 1) % C) * 9 + 4] = 1;
    for (int j = 0; j < F; j++) w1[j * C + j] = 2;
    for (int k = 0; k < CT; k++) eye[k * CT + k] = 1;
    int x = xt_input(g, "x", "1x32x28x28");
    int a = xt_node(g, "Conv", (int[]){x, xt_const_values(g, TS_F32, "32x32x3x3", w3, C * C * 9)}, 2,
                    (ts_attr[]){ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4)}, 1);
    int b = xt_node(g, "Conv", (int[]){x, xt_const_values(g, TS_F32, "16x32x1x1", w1, F * C)}, 2, NULL, 0);
    int y = concat(g, (int[]){a, b}, 2);
    y = xt_node(g, "Conv", (int[]){y, xt_const_values(g, TS_F32, "48x48x1x1", eye, CT * CT)}, 2, NULL, 0);
    xt_output(g, y);
    ts_error e = {0};
    ts_shape xs = ts_shape_make(4, (int64_t[]){1, C, HW, HW}), ys = ts_shape_make(4, (int64_t[]){1, CT, HW, HW});
    ts_tensor *xt = ts_tensor_new(TS_F32, &xs, &e), *out = ts_tensor_new(TS_F32, &ys, &e);
    cr_assert(xt && out);
    float *xd = xt->data;
    for (int c = 0; c < C; c++)
        for (int q = 0; q < HW * HW; q++) xd[c * HW * HW + q] = (float)c + (float)q / 1024.0f;
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan *plan = NULL;
        ts_plan_opts o = {.threads = threads, .skip = "dnnl.dense_concat.single"}; /* vec.concat_cl's case */
        cr_assert_eq(ts_plan_build(g, &o, &plan, &e), TS_OK, "%s", e.msg);
        if (__builtin_cpu_supports("avx512f")) cr_assert_eq(xt_steps_of(plan, "vec.concat_cl"), 1);
        cr_assert_eq(ts_plan_run(plan, (ts_tensor *const[]){xt}, (ts_tensor *const[]){out}, &e), TS_OK, "%s", e.msg);
        const float *od = out->data;
        for (int k = 0; k < CT; k++)
            for (int q = 0; q < HW * HW; q++) {
                float want = k < C ? xd[((k + 1) % C) * HW * HW + q] : 2 * xd[(k - C) * HW * HW + q];
                cr_assert_float_eq(od[k * HW * HW + q], want, 1e-4 * (1 + want), "channel %d pixel %d", k, q);
            }
        ts_plan_free(plan);
    }
    ts_tensor_unref(xt);
    ts_tensor_unref(out);
    free(w3);
    free(w1);
    free(eye);
    ts_graph_free(g);
}

/* The same fire module without the skip: a lone Concat whose 3x3 producer
 * writes its 16-channel-block slice itself is dnnl.dense_concat's (the 1x1's
 * channels-last output copied into its slice), and still matches. */
Test(concat_cl, fire_module_as_views)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x32x28x28");
    int a = xt_conv3x3_relu(g, x, 32, &rng);
    int b = xt_conv1x1(g, x, 32, 48, &rng);
    int y = concat(g, (int[]){a, b}, 2);
    xt_output(g, xt_conv1x1(g, y, 80, 16, &rng));
    ts_plan *plan = xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    if (__builtin_cpu_supports("avx512f")) cr_assert_eq(xt_steps_of(plan, "dnnl.dense_concat"), 1);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* Steps of kernel `name` in plan and the inputs they copy (0: views only). */
static int copies_of(const ts_plan *plan, const char *name, int *steps)
{
    const xplan *p = (const xplan *)plan;
    int n = 0;
    *steps = 0;
    for (int i = 0; i < p->nsteps; i++)
        if (!strcmp(p->steps[i].k->name, name)) (*steps)++, n += p->steps[i].nin;
    return n;
}

/* SqueezeNet's first fire modules: the squeeze conv (16 channels, from a
 * channels-last producer) feeds a 1x1 and a 3x3 expand conv of few input
 * channels (no Winograd), whose results only the Concat reads.  The expand
 * convs write 16-channel blocks into the Concat's buffer (the squeeze
 * output read as one block as it lies) and the Concat copies nothing; with
 * TSOPT_SKIP=conv.concat_blocks they write channels-last and it copies.
 * Both against the reference interpreter, 1 and 2 threads. */
Test(concat_cl, expand_convs_write_blocks)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x64x27x27");
    int s = xt_conv1x1(g, x, 64, 16, &rng);
    s = xt_node(g, "Relu", &s, 1, NULL, 0);
    int e1 = xt_conv1x1(g, s, 16, 32, &rng);
    e1 = xt_node(g, "Relu", &e1, 1, NULL, 0);
    int w3 = xt_const_random(g, "48x16x3x3", -0.2, 0.2, &rng);
    int e3 = xt_node(g, "Conv", (int[]){s, w3}, 2, (ts_attr[]){ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4)}, 1);
    e3 = xt_node(g, "Relu", &e3, 1, NULL, 0);
    int y = concat(g, (int[]){e1, e3}, 2);
    xt_output(g, xt_conv1x1(g, y, 80, 16, &rng));
    for (int skip = 0; skip < 2; skip++)
        for (int threads = 1; threads <= 2; threads++) {
            ts_plan_opts o = {.threads = threads, .skip = skip ? "conv.concat_blocks" : NULL};
            ts_plan *plan = xt_plan_check(g, &o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
            int steps, copies = copies_of(plan, "dnnl.dense_concat", &steps);
            if (__builtin_cpu_supports("avx512f")) {
                if (!skip) {
                    cr_assert_eq(steps, 1);
                    cr_assert_eq(copies, 0, "the Concat copies %d inputs", copies);
                } else {
                    cr_assert(steps == 0 || copies > 0, "nothing copied without the blocks: nothing tested");
                }
            }
            ts_plan_free(plan);
        }
    ts_graph_free(g);
}

/* xd_conv_blocks_candidate's claims against the installed oneDNN on this
 * CPU: where it says no, oneDNN has only its reference kernel (or none)
 * for a 1x1 conv reading that src into 16- or 8-channel blocks, so the
 * concat-blocks candidate it spares could never be kept (dnnl_conv.c); where
 * it says yes (but for plain NCHW, asked on the chance of a first layer's
 * kernel) oneDNN has a kernel other than the reference one.
 * 176 channels as nasnet_a's pointwise convs; 16 (one block, the squeeze
 * conv of squeezenet1_1) read channels-last. */
Test(concat_cl, blocks_candidate_only_where_onednn_has_a_kernel)
{
    dnnl_engine_t eng;
    cr_assert_eq(dnnl_engine_create(&eng, dnnl_cpu, 0), dnnl_success);
    static const dnnl_format_tag_t srcs[] = {dnnl_acdb, dnnl_aBcd16b, dnnl_aBcd8b, dnnl_abcd};
    int said_no = 0, said_yes = 0;
    for (int c = 0; c < 2; c++)
        for (int si = 0; si < 4; si++)
            for (int block = 8; block <= 16; block += 8) {
                int64_t C = c ? 176 : 16;
                ts_shape xs = ts_shape_make(4, (int64_t[]){1, C, 14, 14});
                dnnl_memory_desc_t src, wei, dst;
                dnnl_memory_desc_init_by_tag(&src, 4, (dnnl_dims_t){1, C, 14, 14}, dnnl_f32, srcs[si]);
                dnnl_memory_desc_init_by_tag(&wei, 4, (dnnl_dims_t){64, C, 1, 1}, dnnl_f32, dnnl_format_tag_any);
                dnnl_memory_desc_init_by_tag(&dst, 4, (dnnl_dims_t){1, 64, 14, 14}, dnnl_f32,
                                             block == 16 ? dnnl_aBcd16b : dnnl_aBcd8b);
                /* dnnl_conv.c asks with the blocks when they are src's bytes */
                dnnl_memory_desc_t ask = src, bmd;
                xdc_block_md(&bmd, &xs, block);
                if (xd_md_same_bytes(&src, &bmd)) ask = bmd;
                dnnl_convolution_desc_t d;
                cr_assert_eq(dnnl_convolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_convolution_direct,
                                                                &ask, &wei, NULL, &dst, (dnnl_dims_t){1, 1},
                                                                (dnnl_dims_t){0, 0}, (dnnl_dims_t){0, 0}),
                             dnnl_success);
                dnnl_primitive_desc_t pd = NULL;
                int rank = dnnl_primitive_desc_create(&pd, &d, NULL, eng, NULL) == dnnl_success ? xd_pd_rank(pd) : 0;
                if (pd) dnnl_primitive_desc_destroy(pd);
                bool yes = xd_conv_blocks_candidate(&src, &xs, block);
                bool own = srcs[si] == (block == 16 ? dnnl_aBcd16b : dnnl_aBcd8b);
                if (!yes) {
                    cr_assert_eq(rank, 0, "C %lld, src tag %d, %d-channel blocks: declined, yet oneDNN has rank %d",
                                 (long long)C, (int)srcs[si], block, rank);
                    said_no++;
                } else if (srcs[si] != dnnl_abcd) {
                    /* plain NCHW is asked on the chance of a first layer's kernel */
                    cr_assert_gt(rank, 0, "C %lld, src tag %d, %d-channel blocks: asked, yet oneDNN has only its "
                                 "reference kernel", (long long)C, (int)srcs[si], block);
                }
                if (yes && own) {
                    cr_assert_geq(rank, 2, "C %lld, %d-channel blocks in and out: oneDNN's rank %d", (long long)C,
                                  block, rank);
                    said_yes++;
                }
            }
    /* nasnet_a's case is declined everywhere; an AVX2 or AVX-512 CPU has
     * a kernel on its own blocks */
    cr_assert_geq(said_no, 2, "nothing declined: nothing tested");
    if (__builtin_cpu_supports("avx2")) cr_assert_geq(said_yes, 2, "nothing accepted: nothing tested");
    dnnl_engine_destroy(eng);
}
