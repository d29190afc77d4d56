/* The vec kernel family (src/vec/vec_*.c) through ts_plan_build/run,
 * against the reference interpreter on the same graphs: broadcast fast
 * paths and their edge cases, odd sizes (not multiples of the vector
 * width or block), one and two threads, element-wise chain fusion, and
 * the plan statistics that show which kernel ran (so a kernel that
 * silently declines to the reference fails the test). */
#define XT_GLOBAL_GRAPH
#include "exec_check.h"

TestSuite(vec, .fini = xt_done);

/* G by a plan at `threads` against the reference on inputs in [lo, hi),
 * every output within tol + tol|ref|; returns the plan's statistics. */
static ts_plan_stats compare_at(int threads, double lo, double hi, double tol)
{
    ts_plan_opts o = {.threads = threads};
    return xt_plan_stats(G, &o, 12345, lo, hi, tol, XT_TOL_ELEM);
}

/* Both thread counts; the statistics must agree with the expectation. */
static void compare(double lo, double hi, double tol, int steps, int fused, int fallback)
{
    for (int t = 1; t <= 2; t++) {
        ts_plan_stats st = compare_at(t, lo, hi, tol);
        if (steps >= 0) cr_assert_eq(st.steps, steps, "threads %d: %d steps, expected %d", t, st.steps, steps);
        cr_assert_eq(st.fused_nodes, fused, "threads %d: %d fused nodes, expected %d", t, st.fused_nodes, fused);
        cr_assert_eq(st.fallback_steps, fallback, "threads %d: %d reference steps, expected %d", t,
                     st.fallback_steps, fallback);
    }
}

/* -------------------------------------------------------- element-wise */

Test(vec, binary_broadcast_patterns)
{
    graph(17);
    int a = input("3x5x17"), same = input("3x5x17"), sc = input("1"), chan = input("5x1"), row = input("17");
    int col = input("4x1"), r = input("1x17"), big = input("2x5x7x9"), pc = input("5x1x1");
    output(op("Add", INS(a, same), NOATTR));   /* same shape */
    output(op("Sub", INS(a, sc), NOATTR));     /* scalar input (splat) */
    output(op("Div", INS(sc, a), NOATTR));     /* scalar first */
    output(op("Mul", INS(a, chan), NOATTR));   /* per-channel: one value per row */
    output(op("Max", INS(row, a), NOATTR));    /* per-row broadcast, first operand */
    output(op("Min", INS(col, r), NOATTR));    /* both sides broadcast */
    output(op("Add", INS(big, pc), NOATTR));   /* NCHW + per-channel bias */
    compare(-2, 2, 1e-6, 7, 0, 0);
}

Test(vec, binary_scalar_constants)
{
    graph(17);
    int a = input("2x3x1031"); /* a row longer than two blocks, not a multiple of 16 */
    output(op("Sub", INS(F32("", 3), a), NOATTR)); /* reversed immediate */
    output(op("Div", INS(F32("1", 2), a), NOATTR));
    output(op("Pow", INS(a, F32("", 2)), NOATTR)); /* x*x */
    output(op("Pow", INS(a, F32("", 3)), NOATTR)); /* powf */
    output(op("Max", INS(a, F32("", 0.25)), NOATTR));
    compare(0.5, 3, 1e-5, 5, 0, 0);
}

Test(vec, unary_and_activations)
{
    graph(13);
    int x = input("7x61");
    const char *ops[] = {"Relu", "Neg", "Abs", "Exp", "Reciprocal", "Erf", "Sigmoid", "Tanh", "HardSwish"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) output(op(ops[i], INS(x), NOATTR));
    output(op("LeakyRelu", INS(x), ATTRS(ts_attr_float("alpha", 0.1))));
    output(op("HardSigmoid", INS(x), ATTRS(ts_attr_float("alpha", 0.3), ts_attr_float("beta", 0.4))));
    output(op("Clip", INS(x, F32("", -1), F32("", 2)), NOATTR));
    output(op("PRelu", INS(x, F32("61", 0.5)), NOATTR)); /* slope over the last axis */
    compare(-4, 4, 2e-6, 13, 0, 0);
}

/* 0-element tensors (fuzzer, seed 11 step 39: Add of a scalar and a
 * 0-element tensor divided by the empty row length): every element-wise
 * form -- unary, binary same-shape, broadcast against a scalar or a row,
 * a fused chain -- with the zero extent last, first and in the middle. */
Test(vec, zero_element_tensors)
{
    const char *shapes[] = {"0", "3x0", "0x5", "2x0x5"};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        graph(13);
        int x = input(shapes[k]), y = input(shapes[k]), sc = input("");
        output(op("Add", INS(sc, x), NOATTR));
        output(op("Mul", INS(x, F32("", 2)), NOATTR));
        output(op("Sub", INS(x, y), NOATTR));
        output(op("Relu", INS(x), NOATTR));
        output(op("HardSigmoid", INS(x), ATTRS(ts_attr_float("alpha", 0.3), ts_attr_float("beta", 0.4))));
        output(op("Tanh", INS(op("Add", INS(x, sc), NOATTR)), NOATTR)); /* a fused chain */
        if (k > 0) output(op("Max", INS(x, input(shapes[k] + 2)), NOATTR)); /* broadcast over a row */
        compare(-2, 2, 1e-6, -1, 1, 0);
        xt_done();
    }
}

Test(vec, transcendental_ranges)
{
    /* tiny, large and saturating arguments of the polynomial exp/erf/tanh */
    graph(17);
    int x = input("4099");
    output(op("Exp", INS(x), NOATTR));
    output(op("Erf", INS(x), NOATTR));
    output(op("Tanh", INS(x), NOATTR));
    output(op("Sigmoid", INS(x), NOATTR));
    compare(-20, 20, 2e-6, 4, 0, 0);
    xt_done();
    graph(17);
    x = input("4099");
    output(op("Erf", INS(x), NOATTR));
    output(op("Tanh", INS(x), NOATTR));
    compare(-1e-3, 1e-3, 2e-6, 2, 0, 0);
    xt_done();
    graph(17);
    x = input("1000");
    output(op("Exp", INS(x), NOATTR));
    output(op("Sqrt", INS(x), NOATTR));
    output(op("Log", INS(x), NOATTR));
    compare(1, 88, 2e-6, 3, 0, 0);
}

/* GELU as exporters write it: x * 0.5 * (1 + erf(x / sqrt 2)). */
static int gelu(int x)
{
    int d = op("Div", INS(x, F32("", 1.4142135381698608)), NOATTR);
    int e = op("Erf", INS(d), NOATTR);
    int a = op("Add", INS(e, F32("", 1)), NOATTR);
    int m = op("Mul", INS(x, a), NOATTR);
    return op("Mul", INS(m, F32("", 0.5)), NOATTR);
}

Test(vec, gelu_chain_is_one_step)
{
    graph(17);
    output(gelu(input("37x333")));
    compare(-5, 5, 2e-6, 1, 4, 0);
    xt_done();
    graph(17);
    output(gelu(input("128x3072"))); /* large: threaded */
    compare(-5, 5, 2e-6, 1, 4, 0);
}

Test(vec, fusion_with_broadcast_inputs)
{
    /* x + bias (row), then * scale (per-channel), then tanh, then - y */
    graph(17);
    int x = input("3x9x31"), bias = input("31"), sc = input("9x1"), y = input("3x9x31");
    int t = op("Add", INS(x, bias), NOATTR);
    t = op("Mul", INS(sc, t), NOATTR);
    t = op("Tanh", INS(t), NOATTR);
    output(op("Sub", INS(y, t), NOATTR));
    compare(-2, 2, 2e-6, 1, 3, 0);
}

Test(vec, fusion_stops_at_graph_output_and_growth)
{
    graph(17);
    int x = input("5x1"), r = input("5x7");
    int a = op("Relu", INS(x), NOATTR);
    output(a);                               /* an intermediate that is an output: no fusion across it */
    int b = op("Exp", INS(a), NOATTR);
    output(op("Add", INS(b, r), NOATTR));    /* grows 5x1 -> 5x7: its own step */
    compare(-1, 1, 1e-6, 3, 0, 0);
}

Test(vec, fusion_same_value_twice_and_shared_input)
{
    graph(17);
    int x = input("6x19");
    int a = op("Sigmoid", INS(x), NOATTR);
    int b = op("Mul", INS(a, a), NOATTR);    /* the running value on both sides */
    int c = op("Mul", INS(b, x), NOATTR);    /* x read again */
    output(op("Sub", INS(c, x), NOATTR));
    compare(-3, 3, 1e-6, 1, 3, 0);
}

Test(vec, no_fusion_option)
{
    graph(17);
    output(gelu(input("3x40")));
    ts_tensor *in = ts_tensor_new(TS_F32, &G->values[G->inputs[0]].shape, &E);
    ts_plan *p;
    ts_plan_opts o = {.no_fusion = true};
    ts_plan_stats st;
    cr_assert_eq(ts_plan_build(G, &o, &p, &E), TS_OK, "%s", E.msg);
    ts_plan_stats_get(p, &st);
    cr_assert_eq(st.steps, 5);
    cr_assert_eq(st.fused_nodes, 0);
    cr_assert_eq(st.fallback_steps, 0);
    ts_plan_free(p);
    ts_tensor_unref(in);
}

/* ------------------------------------------------------------- softmax */

Test(vec, softmax_last_axis)
{
    graph(13);
    int x = input("12x128x128");
    output(op("Softmax", INS(x), ATTRS(ts_attr_int("axis", -1))));
    output(op("LogSoftmax", INS(x), ATTRS(ts_attr_int("axis", 2))));
    compare(-8, 8, 1e-5, 2, 0, 0);
}

/* Rows that are no whole number of vectors (Swin's windows: 49, ViT's 197
 * tokens): the AVX-512 masked path where the CPU has it (vec_softmax.c
 * sm_row_avx512), rows of 1, 5, 17, 49, 83 and 197, the last over its
 * dying input (in place); a row of large negative scores (Swin's mask adds
 * -100: exponentials below e^-80 become 0, tiny probabilities flushed) and
 * a NaN, which makes its row NaN as the reference does. */
Test(vec, softmax_masked_rows)
{
    graph(13);
    const char *shapes[] = {"192x49", "3x7x17", "11x5", "4x1", "2x83"};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        output(op("Softmax", INS(input(shapes[i])), ATTRS(ts_attr_int("axis", -1))));
    output(op("Softmax", INS(op("Neg", INS(input("12x197")), NOATTR)), ATTRS(ts_attr_int("axis", -1))));
    compare(-8, 8, 1e-5, 7, 0, 0);
    xt_done();
    graph(13);
    float row[2][49];
    for (int j = 0; j < 49; j++) row[0][j] = j % 7 ? -100.0f - (float)j : 3.0f, row[1][j] = (float)j / 10;
    row[1][20] = NAN;
    int x = input("2x49");
    output(op("Softmax", INS(x), ATTRS(ts_attr_int("axis", 1))));
    ts_tensor *in = ts_tensor_new(TS_F32, &G->values[x].shape, &E), *out = ts_tensor_new(TS_F32, &G->values[x].shape, &E);
    cr_assert(in && out);
    memcpy(in->data, row, sizeof row);
    ts_plan *pl = NULL;
    cr_assert_eq(ts_plan_build(G, &(ts_plan_opts){.threads = 1}, &pl, &E), TS_OK, "%s", E.msg);
    cr_assert_eq(ts_plan_run(pl, &in, &out, &E), TS_OK, "%s", E.msg);
    const float *y = out->data;
    for (int j = 0; j < 49; j++) {
        float want = j % 7 ? 0.0f : 1.0f / 7;
        cr_assert_float_eq(y[j], want, 1e-6, "row 0, %d: %g, expected %g", j, y[j], want);
        cr_assert(isnan(y[49 + j]), "row 1, %d: %g, expected NaN", j, y[49 + j]);
    }
    ts_plan_free(pl);
    ts_tensor_unref(out);
    ts_tensor_unref(in);
}

Test(vec, softmax_inner_axis_and_flatten)
{
    graph(13);
    int x = input("3x37x301");
    output(op("Softmax", INS(x), ATTRS(ts_attr_int("axis", 1)))); /* inner 301: column chunks */
    output(op("LogSoftmax", INS(x), ATTRS(ts_attr_int("axis", 0))));
    compare(-8, 8, 1e-5, 2, 0, 0);
    xt_done();
    graph(11); /* opset < 13: the trailing block from axis is flattened */
    x = input("3x4x5");
    output(op("Softmax", INS(x), ATTRS(ts_attr_int("axis", 1))));
    output(op("LogSoftmax", INS(x), NOATTR));
    compare(-8, 8, 1e-5, 2, 0, 0);
}

/* ---------------------------------------------------------- layer norm */

Test(vec, layernorm)
{
    graph(17);
    int x = input("2x7x45"), s = input("45");
    double sv[45], bv[45];
    for (int i = 0; i < 45; i++) sv[i] = 0.5 + i * 0.01, bv[i] = i * 0.1 - 2;
    int sc = xt_const_values(G, TS_F32, "45", sv, 45), bc = xt_const_values(G, TS_F32, "45", bv, 45);
    output(op("LayerNormalization", INS(x, sc, bc), NOATTR));
    output(op("LayerNormalization", INS(x, s), ATTRS(ts_attr_float("epsilon", 1e-3)))); /* scale is an input, no B */
    output(op("LayerNormalization", INS(x, F32("1x45", 2), F32("", 0.5)), ATTRS(ts_attr_int("axis", -2))));
    compare(-3, 5, 2e-5, 3, 0, 0);
}

/* ----------------------------------------------------------- reductions */

Test(vec, reductions)
{
    graph(13);
    int x = input("3x5x7"), w = input("2x130x3");
    output(op("ReduceMean", INS(x), ATTRS(ts_attr_ints("axes", (const int64_t[]){-1}, 1))));
    output(op("ReduceSum", INS(x, I64("1", 1)), NOATTR)); /* axes input, inner dims kept */
    output(op("ReduceMax", INS(x), ATTRS(ts_attr_int("keepdims", 0))));
    output(op("ReduceMax", INS(w), ATTRS(ts_attr_ints("axes", (const int64_t[]){1}, 1))));
    output(op("ReduceMean", INS(w), ATTRS(ts_attr_ints("axes", (const int64_t[]){1, 2}, 2))));
    compare(-3, 3, 1e-5, 5, 0, 0);
}

Test(vec, reduction_split_axes_declines)
{
    /* axes 0 and 2 of 3x5x7 are not one block: the reference kernel runs it */
    graph(13);
    int x = input("3x5x7");
    output(op("ReduceSum", INS(x, I64("2", 0, 2)), NOATTR));
    compare(-3, 3, 1e-5, 1, 0, 1);
}

/* ------------------------------------------------------------ movement */

Test(vec, transpose)
{
    graph(17);
    int x = input("3x17x5x33");
    output(op("Transpose", INS(x), ATTRS(ts_attr_ints("perm", (const int64_t[]){0, 2, 1, 3}, 4)))); /* rows stay */
    output(op("Transpose", INS(x), ATTRS(ts_attr_ints("perm", (const int64_t[]){0, 3, 1, 2}, 4)))); /* NCHW->NHWC-ish */
    output(op("Transpose", INS(x), NOATTR));                                                      /* reversed */
    output(op("Transpose", INS(input("300x301")), NOATTR));                                        /* large 2-D */
    compare(-1, 1, 0, 4, 0, 0);
}

/* Transposes whose last two output dims are a 2-D transpose of the input
 * (vec_movement.c's tiled path): attention's K^T ([s, h, d] -> [h, d, s]),
 * channels-last to NCHW, blocks of rows and columns with remainders (19
 * rows = 16 + 3, 35 columns = 4 x 8 + 3), fewer rows than one tile, a
 * broadcast (Expand of a column: input stride 0 along the output's last
 * dim); bit-identical to the reference, split over both threads in the
 * _split run. */
Test(vec, transpose_tiles)
{
    graph(17);
    output(op("Transpose", INS(input("197x12x64")), ATTRS(ts_attr_ints("perm", (const int64_t[]){1, 2, 0}, 3))));
    output(op("Transpose", INS(input("1x28x28x96")), ATTRS(ts_attr_ints("perm", (const int64_t[]){0, 3, 1, 2}, 4))));
    output(op("Transpose", INS(input("2x7x5x19")), ATTRS(ts_attr_ints("perm", (const int64_t[]){0, 3, 1, 2}, 4))));
    output(op("Transpose", INS(input("4x3x40")), ATTRS(ts_attr_ints("perm", (const int64_t[]){0, 2, 1}, 3))));
    output(op("Transpose", INS(input("64x16")), NOATTR)); /* exactly one tile of rows, two of columns */
    output(op("Expand", INS(input("37x1"), I64("2", 37, 20)), NOATTR));
    compare(-1, 1, 0, 6, 0, 0);
}

/* A Transpose that moves only dims of extent 1 is a view (plan.c
 * is_transpose_view): no step; one that swaps two dims of extent > 1, or
 * writes a graph output, still copies. */
Test(vec, transpose_unit_dims_view)
{
    graph(17);
    int t = op("Transpose", INS(input("1x7x5")), ATTRS(ts_attr_ints("perm", (const int64_t[]){1, 0, 2}, 3)));
    output(op("Neg", INS(t), NOATTR));                                                     /* reads the view */
    output(op("Transpose", INS(input("3x1x4")), ATTRS(ts_attr_ints("perm", (const int64_t[]){1, 0, 2}, 3)))); /* output */
    output(op("Transpose", INS(input("1x7x5")), ATTRS(ts_attr_ints("perm", (const int64_t[]){2, 0, 1}, 3))));
    compare(-1, 1, 0, 3, 0, 0);
}

Test(vec, slice_concat_gather_expand)
{
    graph(13);
    int x = input("4x9x23"), y = input("4x2x23"), z = input("4x1x23");
    output(op("Slice", INS(x, I64("2", 1, 2), I64("2", 3, -1), I64("2", 1, 2)), NOATTR));
    output(op("Slice", INS(x, I64("2", -1, 20), I64("2", -100, 2), I64("2", 1, 2), I64("2", -2, -3)), NOATTR));
    output(op("Slice", INS(x, I64("1", 1), I64("1", 3)), NOATTR)); /* whole rows: one memcpy */
    output(op("Concat", INS(x, y, z), ATTRS(ts_attr_int("axis", 1))));
    output(op("Concat", INS(y, y), ATTRS(ts_attr_int("axis", -1))));
    output(op("Gather", INS(x, I64("2x2", 0, -1, 8, 3)), ATTRS(ts_attr_int("axis", 1))));
    output(op("Gather", INS(x, I64("", 2)), NOATTR)); /* scalar index drops the axis */
    output(op("Expand", INS(z, I64("4", 2, 4, 3, 23)), NOATTR));
    compare(-1, 1, 0, 8, 0, 0);
}

/* -------------------------------------------------------------- resize */

static const char *const rz_coords[] = {"half_pixel",           "pytorch_half_pixel", "align_corners", "asymmetric",
                                        "tf_half_pixel_for_nn", "half_pixel_symmetric"};
static const char *const rz_nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

/* Opset-13 Resize cases of one mode: upscale by scales, downscale by
 * sizes, fractional scales both ways (ties in nearest rounding), a scale
 * on the W axis only, rank 3, and one large enough to run on two threads.
 * Nearest must be exact (tol 0): it is a copy of the reference's picks. */
static void resize_cases(const char *mode, const char *coord, const char *nearest, double tol, int fallback)
{
    graph(13);
    ts_attr at[3] = {ts_attr_string("mode", mode), ts_attr_string("coordinate_transformation_mode", coord),
                     ts_attr_string("nearest_mode", nearest)};
    int x1 = input("1x3x5x7"), x2 = input("1x2x9x9"), x3 = input("2x6x11"), x4 = input("1x3x64x64");
    output(op("Resize", INS(x1, -1, F32("4", 1, 1, 2, 2)), at, 3));                /* 1x3x10x14 */
    output(op("Resize", INS(x2, -1, -1, I64("4", 1, 2, 4, 4)), at, 3));            /* 1x2x4x4 */
    output(op("Resize", INS(x2, -1, F32("4", 1, 1, 0.6, 1.7)), at, 3));            /* 5x15 */
    output(op("Resize", INS(x1, -1, F32("4", 1, 1, 1, 2.5)), at, 3));              /* W only */
    output(op("Resize", INS(x3, -1, -1, I64("3", 2, 13, 4)), at, 3));              /* rank 3 */
    output(op("Resize", INS(x4, -1, F32("4", 1, 1, 2, 2)), at, 3));                /* parallel */
    compare(-2, 2, tol, 6, 0, fallback);
    xt_done();
}

Test(vec, resize_nearest)
{
    for (int c = 0; c < 6; c++)
        for (int n = 0; n < 4; n++) resize_cases("nearest", rz_coords[c], rz_nearests[n], 0, 0);
}

/* tf_half_pixel_for_nn maps channel c to c + 0.5 in the reference, which
 * then blends two channels: linear along a leading axis declines, so in
 * that mode only single-plane images stay off the reference kernel. */
Test(vec, resize_linear)
{
    for (int c = 0; c < 6; c++) {
        bool tf = !strcmp(rz_coords[c], "tf_half_pixel_for_nn");
        resize_cases("linear", rz_coords[c], "round_prefer_floor", 1e-6, tf ? 6 : 0);
        graph(13);
        ts_attr at[2] = {ts_attr_string("mode", "linear"), ts_attr_string("coordinate_transformation_mode", rz_coords[c])};
        int x1 = input("1x1x5x7"), x2 = input("1x1x9x9");
        output(op("Resize", INS(x1, -1, F32("4", 1, 1, 2, 2)), at, 2));
        output(op("Resize", INS(x2, -1, -1, I64("4", 1, 1, 4, 4)), at, 2));
        compare(-2, 2, 1e-6, 2, 0, 0);
        xt_done();
    }
}

/* Linear upscales by 8 (lraspp's 28 -> 224 head; deeplabv3's 14 -> 224), where
 * eight output rows share one pair of source rows, by 2 (lraspp's 14 ->
 * 28: each output row its own pair) and a downscale: vec.resize gathers
 * each source row's values once (rz_gather_row, two slots by parity) and
 * runs the rows in vectors.  Bit-identical to the reference (tol 0) on 1
 * and 2 threads, planes split between the threads; an infinity in the
 * input tests the zero-weight corners (align_corners / asymmetric land on
 * whole source positions: the reference skips their 0 * inf, so the
 * output stays finite there). */
Test(vec, resize_linear_pairs_exact)
{
    for (int c = 0; c < 6; c++) {
        if (!strcmp(rz_coords[c], "tf_half_pixel_for_nn")) continue;
        graph(13);
        ts_attr at[2] = {ts_attr_string("mode", "linear"), ts_attr_string("coordinate_transformation_mode", rz_coords[c])};
        int x = input("1x5x7x9"), big = input("1x21x7x7");
        output(op("Resize", INS(x, -1, F32("4", 1, 1, 8, 8)), at, 2));   /* 56 x 72 */
        output(op("Resize", INS(big, -1, F32("4", 1, 1, 8, 8)), at, 2)); /* 21 x 56 x 56: two threads */
        int inf = op("Add", INS(x, F32("1x1x1x9", 0, 0, 0, 0, INFINITY, 0, 0, 0, 0)), NOATTR);
        output(op("Resize", INS(inf, -1, F32("4", 1, 1, 2, 2)), at, 2));
        output(op("Resize", INS(big, -1, F32("4", 1, 1, 2, 2)), at, 2));     /* 21 x 14 x 14 */
        output(op("Resize", INS(x, -1, F32("4", 1, 1, 0.6, 0.5)), at, 2));   /* down: 4 x 4 */
        compare(-2, 2, 0, 6, 0, 0);
        xt_done();
    }
}

/* Opset-10 Resize and Upsample-9 (asymmetric, ORT's "simple" nearest
 * rule) and Upsample-7's scales attribute; "bilinear" is Upsample's
 * spelling of linear. */
Test(vec, resize_old_forms)
{
    static const char *const m[] = {"nearest", "linear"};
    for (int i = 0; i < 2; i++) {
        graph(10);
        int x = input("1x3x5x7");
        output(op("Resize", INS(x, F32("4", 1, 1, 2, 3)), ATTRS(ts_attr_string("mode", m[i]))));
        output(op("Resize", INS(x, F32("4", 1, 1, 0.5, 0.7)), ATTRS(ts_attr_string("mode", m[i]))));
        compare(-2, 2, i ? 1e-6 : 0, 2, 0, 0);
        xt_done();
        graph(9);
        x = input("1x3x5x7");
        output(op("Upsample", INS(x, F32("4", 1, 1, 2, 2)), ATTRS(ts_attr_string("mode", m[i]))));
        compare(-2, 2, i ? 1e-6 : 0, 1, 0, 0);
        xt_done();
    }
    graph(7);
    int x = input("1x3x5x7");
    output(op("Upsample", INS(x),
              ATTRS(ts_attr_string("mode", "bilinear"), ts_attr_floats("scales", (const float[]){1, 1, 2, 1.5f}, 4))));
    compare(-2, 2, 1e-6, 1, 0, 0);
}

/* Leading axes that move: a channel axis that changes size, and one that
 * keeps its size but not its indices (5 * 1.1 rounds down to 5, yet
 * asymmetric floor reads 0, 0, 1, 2, 3).  Nearest takes them as a table of
 * source planes; linear along them declines to the reference kernel. */
Test(vec, resize_leading_axes)
{
    graph(13);
    int x = input("2x5x5x7");
    ts_attr at[3] = {ts_attr_string("mode", "nearest"), ts_attr_string("coordinate_transformation_mode", "asymmetric"),
                     ts_attr_string("nearest_mode", "floor")};
    output(op("Resize", INS(x, -1, F32("4", 1, 2, 2, 2)), at, 3));
    output(op("Resize", INS(x, -1, F32("4", 1, 1.1, 2, 2)), at, 3));
    output(op("Resize", INS(x, -1, F32("4", 1.5, 0.6, 1, 2)), at, 3));
    at[0] = ts_attr_string("mode", "linear");
    output(op("Resize", INS(x, -1, F32("4", 1, 2, 2, 2)), at, 3));
    output(op("Resize", INS(x, -1, F32("4", 1, 1.1, 2, 2)), at, 3));
    compare(-2, 2, 0, 5, 0, 2);
}
