/* vec.shuffle (src/vec/vec_shuffle.c): Concat -> Reshape [N, g, C/g, H, W]
 * -> Transpose [0, 2, 1, 3, 4] -> Reshape [N, C, H, W] as one step, against
 * the reference interpreter: inputs channels-last (conv outputs), plain
 * (graph inputs), mixed; g = 2 with two equal inputs (the interleave path),
 * g = 4 over two inputs and three unequal inputs (the general path); a
 * result that is a graph output (plain), read by channel Slices, batch 2;
 * 1 and 2 threads and an image large enough to split.  The shapes it must
 * decline keep the nodes one by one and still match. */
#define XT_GLOBAL_GRAPH
#include "exec_check.h"

TestSuite(exec_shuffle, .fini = xt_done);

static uint64_t rng = 4242, seed = 31;

static int reshape(int x, const int64_t *dims, int rank)
{
    char d[16];
    snprintf(d, sizeof d, "%d", rank);
    int s = xt_const_values(G, TS_I64, d, (const double[]){(double)dims[0], (double)dims[1], (double)dims[2],
                                                            (double)dims[3], rank > 4 ? (double)dims[4] : 0},
                            rank);
    return xt_node(G, "Reshape", INS(x, s), NOATTR);
}

/* concat(ins) -> shuffle in g groups; the result [N, C, H, W] */
static int shuffle(const int *ins, int nin, int64_t N, int64_t C, int64_t H, int64_t W, int64_t g,
                   const int64_t *perm)
{
    ts_attr ax = ts_attr_int("axis", 1);
    int c;
    cr_assert_geq(ts_graph_add_node(G, "Concat", NULL, ins, nin, &ax, 1, 1, NULL, &c, &E), 0, "%s", E.msg);
    int r1 = reshape(c, (int64_t[]){N, g, C / g, H, W}, 5);
    int t = xt_node(G, "Transpose", INS(r1), ATTRS(ts_attr_ints("perm", perm, 5)));
    return reshape(t, (int64_t[]){N, C, H, W}, 4);
}

static const int64_t PERM[5] = {0, 2, 1, 3, 4};

/* a channels-last conv output of F channels from x (C channels) */
static int conv(int x, int C, int F) { return xt_conv1x1(G, x, C, F, &rng); }

static void check(int expect_steps)
{
    int got = xt_kernel_steps_1_2(G, "vec.shuffle", &seed);
    cr_assert_eq(got, expect_steps, "vec.shuffle steps: %d, expected %d", got, expect_steps);
    ts_plan_stats st = xt_plan_stats(G, NULL, seed++, -1, 1, 1e-4, XT_TOL_MAX);
    cr_assert_eq(st.fallback_steps, 0, "a node fell back to the reference kernel");
}

/* ShuffleNet's block: split halves, one through convs, concat, shuffle,
 * split again, then a conv on each half (channels-last everywhere) */
Test(exec_shuffle, shufflenet_block)
{
    graph(13);
    int x = input("1x16x12x12");
    int a = conv(x, 16, 24), b = conv(x, 16, 24);
    int z = shuffle((int[]){a, b}, 2, 1, 48, 12, 12, 2, PERM);
    int64_t h[2] = {24, 24};
    int pieces[2];
    ts_attr sa[2] = {ts_attr_int("axis", 1), ts_attr_ints("split", h, 2)};
    cr_assert_geq(ts_graph_add_node(G, "Split", NULL, &z, 1, sa, 2, 2, NULL, pieces, &E), 0, "%s", E.msg);
    output(conv(pieces[0], 24, 8));
    output(conv(pieces[1], 24, 8));
    check(1);
}

Test(exec_shuffle, plain_inputs_graph_output)
{
    graph(13);
    int a = input("1x6x5x7"), b = input("1x6x5x7");
    output(shuffle((int[]){a, b}, 2, 1, 12, 5, 7, 2, PERM));
    check(1);
}

Test(exec_shuffle, mixed_layouts_batch2)
{
    graph(13);
    int x = input("2x8x9x9"), p = input("2x8x9x9");
    int a = conv(x, 8, 8);
    int z = shuffle((int[]){p, a}, 2, 2, 16, 9, 9, 2, PERM);
    output(conv(z, 16, 4));
    check(1);
}

Test(exec_shuffle, four_groups_unequal_inputs)
{
    graph(13);
    int x = input("1x8x6x6");
    int a = conv(x, 8, 4), b = conv(x, 8, 12), c = conv(x, 8, 8);
    int z = shuffle((int[]){a, b, c}, 3, 1, 24, 6, 6, 4, PERM);
    output(conv(z, 24, 5));
    check(1);
}

Test(exec_shuffle, large_image_threads)
{
    graph(13);
    int x = input("1x16x64x64");
    int a = conv(x, 16, 32), b = conv(x, 16, 32);
    int z = shuffle((int[]){a, b}, 2, 1, 64, 64, 64, 2, PERM);
    output(conv(z, 64, 8));
    check(1);
}

Test(exec_shuffle, declines_other_permutation)
{
    graph(13);
    int x = input("1x8x6x6");
    int a = conv(x, 8, 8), b = conv(x, 8, 8);
    static const int64_t other[5] = {0, 1, 2, 4, 3}; /* swaps H and W: no shuffle */
    output(conv(shuffle((int[]){a, b}, 2, 1, 16, 6, 6, 2, other), 16, 4));
    check(0);
}

Test(exec_shuffle, declines_concat_with_other_reader)
{
    graph(13);
    int x = input("1x8x6x6");
    int a = conv(x, 8, 8), b = conv(x, 8, 8);
    ts_attr ax = ts_attr_int("axis", 1);
    int c;
    cr_assert_geq(ts_graph_add_node(G, "Concat", NULL, (int[]){a, b}, 2, &ax, 1, 1, NULL, &c, &E), 0, "%s", E.msg);
    int r1 = reshape(c, (int64_t[]){1, 2, 8, 6, 6}, 5);
    int t = xt_node(G, "Transpose", INS(r1), ATTRS(ts_attr_ints("perm", PERM, 5)));
    output(conv(reshape(t, (int64_t[]){1, 16, 6, 6}, 4), 16, 4));
    output(xt_node(G, "Relu", INS(c), NOATTR)); /* the concat is read twice */
    check(0);
}
