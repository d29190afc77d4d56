/* vec.maxpool (src/vec/vec_maxpool.c): 2-D MaxPool on the channels-last
 * and channel-blocked buffers oneDNN's convolutions write.  A conv in front
 * sets the input's layout (a 1x1 conv: channels-last; a 3x3 conv of 32 ->
 * 128 channels at 27x27, SqueezeNet's fire expand: 16-channel blocks from
 * oneDNN's Winograd kernel on AVX-512), a 1x1 conv after keeps the result
 * in the network's layout.  Every case runs on 1 and 2 threads against the
 * reference interpreter: channel counts with tails past the 16- and 8-wide
 * vectors, ceil_mode, stride 1 with pads (Inception's branch pools), odd
 * and non-square images, batch 2; one case is hand-computed. */
#include "exec_check.h"
#include "tsopt.h"

static uint64_t rng = 4242;

#define I(...) (int64_t[]){__VA_ARGS__}

static int cst(ts_graph *g, const char *dims, double lo, double hi) { return xt_const_random(g, dims, lo, hi, &rng); }

/* Layout of the vec.maxpool step's input: 'c' channels-last, 'b' blocked,
 * 0 when no such step. */
static char pool_input_layout(const ts_plan *plan)
{
    const xplan *p = (const xplan *)plan;
    for (int i = 0; i < p->nsteps; i++) {
        if (strcmp(p->steps[i].k->name, "vec.maxpool")) continue;
        const xbuf *b = &p->bufs[p->steps[i].in[0]];
        return b->md.format_desc.blocking.inner_nblks ? 'b' : 'c';
    }
    return 0;
}

/* x (N x C0 x H x W) -> conv (1x1 or 3x3 pads 1) to C -> Relu -> MaxPool
 * (attrs) -> 1x1 conv -> output.  Returns the number of vec.maxpool steps
 * (the same on both thread counts) and the pool input's layout. */
static int mp_case(const char *x, int C0, int C, int K, const ts_attr *at, int na, char *layout)
{
    ts_graph *g = ts_graph_new("t", 17);
    char w1[32], w2[32];
    snprintf(w1, sizeof w1, "%dx%dx%dx%d", C, C0, K, K);
    snprintf(w2, sizeof w2, "%dx%dx1x1", C, C);
    ts_attr pads[] = {ts_attr_ints("pads", I(K / 2, K / 2, K / 2, K / 2), 4)};
    int y = xt_node(g, "Conv", (int[]){xt_input(g, "x", x), cst(g, w1, -0.5, 0.5)}, 2, pads, 1);
    y = xt_node(g, "Relu", &y, 1, NULL, 0);
    y = xt_node(g, "MaxPool", &y, 1, at, na);
    y = xt_node(g, "Conv", (int[]){y, cst(g, w2, -0.5, 0.5)}, 2, NULL, 0);
    xt_output(g, y);
    int got = -1;
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan_opts o = {.threads = threads};
        ts_plan *plan = xt_plan_check(g, &o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
        int k = xt_steps_of(plan, "vec.maxpool");
        cr_assert(got < 0 || k == got);
        got = k;
        if (layout) *layout = pool_input_layout(plan);
        ts_plan_free(plan);
    }
    ts_graph_free(g);
    return got;
}

/* SqueezeNet's pools: 3x3 stride 2 ceil_mode; 43 channels (16 + 16 + 8 + 3)
 * on an odd 55x55 image, whose last window is cut by the edge. */
Test(exec_maxpool, s2_ceil_channels_last_tail)
{
    ts_attr at[] = {ts_attr_ints("kernel_shape", I(3, 3), 2), ts_attr_ints("strides", I(2, 2), 2),
                    ts_attr_int("ceil_mode", 1)};
    char lay = 0;
    cr_assert_eq(mp_case("1x5x55x55", 5, 43, 1, at, 3, &lay), 1);
    cr_assert_eq(lay, 'c');
}

/* Inception's branch pools: 3x3 stride 1, pads 1, ceil_mode; 24 channels
 * (16 + 8), non-square 14x17, batch 2. */
Test(exec_maxpool, s1_pads_batch2)
{
    ts_attr at[] = {ts_attr_ints("kernel_shape", I(3, 3), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4),
                    ts_attr_int("ceil_mode", 1)};
    char lay = 0;
    cr_assert_eq(mp_case("2x6x14x17", 6, 24, 1, at, 3, &lay), 1);
    cr_assert_eq(lay, 'c');
}

/* Unequal kernel and strides, asymmetric pads, 5 channels (scalars only). */
Test(exec_maxpool, rect_window_asym_pads)
{
    ts_attr at[] = {ts_attr_ints("kernel_shape", I(2, 4), 2), ts_attr_ints("strides", I(3, 2), 2),
                    ts_attr_ints("pads", I(1, 0, 0, 2), 4)};
    cr_assert_eq(mp_case("1x3x20x23", 3, 5, 1, at, 3, NULL), 1);
}

/* 16-channel blocks: a 3x3 conv 32 -> 128 at 27x27 runs on oneDNN's
 * Winograd kernel where the CPU has AVX-512, which writes aBcd16b. */
Test(exec_maxpool, s2_ceil_blocked)
{
    ts_attr at[] = {ts_attr_ints("kernel_shape", I(3, 3), 2), ts_attr_ints("strides", I(2, 2), 2),
                    ts_attr_int("ceil_mode", 1)};
    char lay = 0;
    int k = mp_case("1x32x27x27", 32, 128, 3, at, 3, &lay);
    if (__builtin_cpu_supports("avx512f")) {
        cr_assert_eq(k, 1);
        cr_assert_eq(lay, 'b');
    }
}

/* VGG's pools: 2x2 stride 2, on channels-last (40 channels: 16 + 16 + 8)
 * and on 16-channel blocks (a Winograd 3x3 conv 32 -> 64 at 28x28 on
 * AVX-512); an odd 29x29 image drops its last row and column. */
Test(exec_maxpool, k2_s2_both_layouts)
{
    ts_attr at[] = {ts_attr_ints("kernel_shape", I(2, 2), 2), ts_attr_ints("strides", I(2, 2), 2)};
    char lay = 0;
    cr_assert_eq(mp_case("1x3x29x29", 3, 40, 1, at, 2, &lay), 1);
    cr_assert_eq(lay, 'c');
    int k = mp_case("1x32x28x28", 32, 64, 3, at, 2, &lay);
    if (__builtin_cpu_supports("avx512f")) {
        cr_assert_eq(k, 1);
        cr_assert_eq(lay, 'b');
    }
}

/* Left to dnnl.pool: dilation, and a pool whose result is the graph output
 * (written plain). */
Test(exec_maxpool, declines)
{
    ts_attr dil[] = {ts_attr_ints("kernel_shape", I(3, 3), 2), ts_attr_ints("dilations", I(2, 2), 2)};
    cr_assert_eq(mp_case("1x4x20x20", 4, 16, 1, dil, 2, NULL), 0);
    ts_graph *g = ts_graph_new("t", 17);
    int y = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x4x9x9"), cst(g, "16x4x1x1", -1, 1)}, 2, NULL, 0);
    y = xt_node(g, "MaxPool", &y, 1, (ts_attr[]){ts_attr_ints("kernel_shape", I(2, 2), 2)}, 1);
    xt_output(g, y);
    ts_plan_opts o = {.threads = 2};
    ts_plan *plan = xt_plan_check(g, &o, rng++, -1, 1, 1e-5, XT_TOL_MAX);
    cr_assert_eq(xt_steps_of(plan, "vec.maxpool"), 0);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* Hand-computed: x[h][w] = h * 6 + w on a 6x6 image, a 1x1 conv gives
 * channel c the value (c + 1) x[h][w] (c < 20: 16 + 4 channels), a 3x3
 * stride-2 ceil_mode pool takes windows starting at rows/columns 0, 2, 4
 * (the last cut to 4..5); x grows to the bottom right, so each window's max
 * is its last row and column: out[c][i][j] = (c + 1) (min(2i + 2, 5) * 6 +
 * min(2j + 2, 5)).  An identity 1x1 conv after keeps the pool channels-last. */
Test(exec_maxpool, hand_computed)
{
    enum { C = 20 };
    ts_graph *g = ts_graph_new("t", 17);
    double w1[C], eye[C * C] = {0};
    for (int c = 0; c < C; c++) w1[c] = c + 1, eye[c * C + c] = 1;
    int y = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x1x6x6"), xt_const_values(g, TS_F32, "20x1x1x1", w1, C)},
                    2, NULL, 0);
    y = xt_node(g, "MaxPool", &y, 1,
                (ts_attr[]){ts_attr_ints("kernel_shape", I(3, 3), 2), ts_attr_ints("strides", I(2, 2), 2),
                            ts_attr_int("ceil_mode", 1)},
                3);
    y = xt_node(g, "Conv", (int[]){y, xt_const_values(g, TS_F32, "20x20x1x1", eye, C * C)}, 2, NULL, 0);
    xt_output(g, y);
    ts_error e = {0};
    ts_shape xs = ts_shape_make(4, I(1, 1, 6, 6)), ys = ts_shape_make(4, I(1, C, 3, 3));
    ts_tensor *x = ts_tensor_new(TS_F32, &xs, &e), *out = ts_tensor_new(TS_F32, &ys, &e);
    cr_assert(x && out);
    float *xd = x->data;
    for (int k = 0; k < 36; k++) xd[k] = (float)k;
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan *plan = NULL;
        ts_plan_opts o = {.threads = threads};
        cr_assert_eq(ts_plan_build(g, &o, &plan, &e), TS_OK, "%s", e.msg);
        cr_assert_eq(xt_steps_of(plan, "vec.maxpool"), 1);
        cr_assert_eq(ts_plan_run(plan, (ts_tensor *const[]){x}, (ts_tensor *const[]){out}, &e), TS_OK, "%s", e.msg);
        const float *od = out->data;
        for (int c = 0; c < C; c++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) {
                    int r = 2 * i + 2 > 5 ? 5 : 2 * i + 2, q = 2 * j + 2 > 5 ? 5 : 2 * j + 2;
                    cr_assert_float_eq(od[(c * 3 + i) * 3 + j], (float)((c + 1) * (r * 6 + q)), 1e-4,
                                       "c %d (%d, %d)", c, i, j);
                }
        ts_plan_free(plan);
    }
    ts_tensor_unref(x);
    ts_tensor_unref(out);
    ts_graph_free(g);
}

/* Layout of the vec.maxpool step's output: 'c' channels-last, 'b' blocked,
 * 0 when no such step. */
static char pool_output_layout(const ts_plan *plan)
{
    const xplan *p = (const xplan *)plan;
    for (int i = 0; i < p->nsteps; i++) {
        if (strcmp(p->steps[i].k->name, "vec.maxpool")) continue;
        const xbuf *b = &p->bufs[p->steps[i].out[0]];
        return b->md.format_desc.blocking.inner_nblks ? 'b' : 'c';
    }
    return 0;
}

/* x (1 x 3 x 24 x 24) -> 1x1 conv to C (channels-last) -> Relu -> 2x2
 * stride-2 MaxPool -> the readers reader[0..nr) ('w': 3x3 pads 1 conv to 32,
 * Winograd's shape; '1': 1x1 conv to 32; 's': 3x3 stride-2 conv to 32;
 * 'p': 1x1 conv to 32, Relu, then a 'w' conv; 'q': the same with a 1x1
 * conv last; 'r': a 'w' conv plus the pool's output, ResNet's identity
 * shortcut, C 32; 'd': a '1' conv plus a 'w' conv, ResNet-50's
 * downsample beside its main branch), each a graph output.  Checks every plan against the
 * reference interpreter and, without 'p' (whose 1x1 conv runs another
 * kernel on blocks), the default plan's outputs bit for bit against the
 * one with TSOPT_SKIP=maxpool.blocks (the pool then writes channels-last
 * and the conv converts); returns the pool's output layout in the default
 * plan. */
static char blocks_case(int C, const char *readers, int threads)
{
    ts_graph *g = ts_graph_new("t", 17);
    char w1[32], w3[32], w1x1[32];
    snprintf(w1, sizeof w1, "%dx3x1x1", C);
    snprintf(w3, sizeof w3, "32x%dx3x3", C);
    snprintf(w1x1, sizeof w1x1, "32x%dx1x1", C);
    int y = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x3x24x24"), cst(g, w1, -0.5, 0.5)}, 2, NULL, 0);
    y = xt_node(g, "Relu", &y, 1, NULL, 0);
    y = xt_node(g, "MaxPool", &y, 1,
                (ts_attr[]){ts_attr_ints("kernel_shape", I(2, 2), 2), ts_attr_ints("strides", I(2, 2), 2)}, 2);
    int nr = (int)strlen(readers);
    for (int r = 0; r < nr; r++) {
        ts_attr pads[] = {ts_attr_ints("pads", I(1, 1, 1, 1), 4), ts_attr_ints("strides", I(2, 2), 2)};
        bool chain = readers[r] == 'p' || readers[r] == 'q';
        int w = readers[r] == '1' || chain ? cst(g, w1x1, -0.5, 0.5) : cst(g, w3, -0.5, 0.5);
        int na = readers[r] == '1' || chain ? 0 : readers[r] == 's' ? 2 : 1;
        int z = xt_node(g, "Conv", (int[]){y, w}, 2, pads, na);
        if (readers[r] == 'r') z = xt_node(g, "Add", (int[]){z, y}, 2, NULL, 0);
        if (readers[r] == 'd') {
            int a = xt_node(g, "Conv", (int[]){y, cst(g, w1x1, -0.5, 0.5)}, 2, NULL, 0);
            z = xt_node(g, "Add", (int[]){a, z}, 2, NULL, 0);
        }
        if (chain) {
            z = xt_node(g, "Relu", &z, 1, NULL, 0);
            bool q = readers[r] == 'q';
            z = xt_node(g, "Conv", (int[]){z, cst(g, q ? "32x32x1x1" : "32x32x3x3", -0.5, 0.5)}, 2, pads, q ? 0 : 1);
        }
        xt_output(g, z);
    }
    ts_error e = {0};
    ts_shape xs = ts_shape_make(4, I(1, 3, 24, 24));
    ts_tensor *x = ts_tensor_new(TS_F32, &xs, &e), *out[2][4] = {{0}};
    cr_assert(x);
    float *xd = x->data;
    for (int k = 0; k < 3 * 24 * 24; k++) xd[k] = (float)((k * 37 % 101) - 50) / 25.0f;
    char lay = 0;
    for (int v = 0; v < 2; v++) {
        ts_plan_opts o = {.threads = threads, .skip = v ? "maxpool.blocks" : NULL};
        ts_plan *plan = xt_plan_check(g, &o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
        cr_assert_eq(xt_steps_of(plan, "vec.maxpool"), 1);
        if (!v) lay = pool_output_layout(plan);
        else cr_assert_eq(pool_output_layout(plan), 'c');
        for (int r = 0; r < nr; r++) {
            ts_shape os = ts_shape_make(4, readers[r] == 's' ? I(1, 32, 6, 6) : I(1, 32, 12, 12));
            out[v][r] = ts_tensor_new(TS_F32, &os, &e);
            cr_assert(out[v][r]);
        }
        cr_assert_eq(ts_plan_run(plan, (ts_tensor *const[]){x}, out[v], &e), TS_OK, "%s", e.msg);
        ts_plan_free(plan);
    }
    for (int r = 0; r < nr; r++) {
        cr_assert(strchr(readers, 'p') || !memcmp(out[0][r]->data, out[1][r]->data, out[0][r]->nbytes),
                  "reader %d differs", r);
        ts_tensor_unref(out[0][r]);
        ts_tensor_unref(out[1][r]);
    }
    ts_tensor_unref(x);
    ts_graph_free(g);
    return lay;
}

/* Channels-last in, 16-channel blocks out when every reader is a conv on
 * Winograd (which reads blocks whatever it is given: VGG's pools after its
 * stem), bit-identical to converting in the conv, or a 1x1 conv that only
 * Winograd convs read; channels-last kept for a channel count off the
 * blocks, a 1x1 or a stride-2 reader (which run on channels-last as they
 * are), or a Winograd reader beside a 1x1 one. */
Test(exec_maxpool, blocks_for_winograd_readers)
{
    bool wino = __builtin_cpu_supports("avx512f"); /* Winograd's avx512 kernel; else no blocks */
    for (int threads = 1; threads <= 2; threads++) {
        char lay = blocks_case(32, "w", threads);
        if (wino) cr_assert_eq(lay, 'b', "threads %d", threads);
        lay = blocks_case(48, "ww", threads);
        if (wino) cr_assert_eq(lay, 'b', "threads %d", threads);
        cr_assert_eq(blocks_case(40, "w", threads), 'c');
        cr_assert_eq(blocks_case(32, "1", threads), 'c');
        cr_assert_eq(blocks_case(32, "s", threads), 'c');
        cr_assert_eq(blocks_case(32, "w1", threads), 'c');
        /* GoogLeNet's conv2 -> conv3: a 1x1 conv whose result a Winograd
         * conv reads; not when a 1x1 conv reads it (ResNet's downsample) */
        lay = blocks_case(32, "p", threads);
        if (wino) cr_assert_eq(lay, 'b', "threads %d", threads);
        lay = blocks_case(32, "pw", threads);
        if (wino) cr_assert_eq(lay, 'b', "threads %d", threads);
        cr_assert_eq(blocks_case(32, "q", threads), 'c');
        cr_assert_eq(blocks_case(32, "pq", threads), 'c');
        /* ResNet-18's stem pool: a Winograd conv and the Add of the identity
         * shortcut (which reads blocks beside that conv's result) */
        lay = blocks_case(32, "r", threads);
        if (wino) cr_assert_eq(lay, 'b', "threads %d", threads);
        lay = blocks_case(32, "rw", threads);
        if (wino) cr_assert_eq(lay, 'b', "threads %d", threads);
        /* not the Add after a 1x1 conv (ResNet-50's downsample: lower_post.c) */
        cr_assert_eq(blocks_case(32, "d", threads), 'c');
        cr_assert_eq(blocks_case(32, "r1", threads), 'c');
    }
}
