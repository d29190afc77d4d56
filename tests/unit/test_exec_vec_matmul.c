/* tsopt's own MatMul kernels through ts_plan_build/run against the
 * reference interpreter.
 *
 * vec.gemv (src/vec/vec_gemv.c, small M, constant weights): every
 * row-block path (1 row, 2-4 rows, leftovers), ragged last panels, odd K,
 * leading batch dims, 1-D A, the fused element-wise chain, one packed copy
 * per shared weight, the threaded path, the hand-off to oneDNN above the
 * row limit.  The plan statistics tell which kernel ran: vec.gemv packs
 * weights as panels of 64 columns (weight_bytes = ceil(N/64)*64*K*4 per
 * distinct weight) and fuses the whole element-wise chain.
 *
 * vec.band (src/vec/vec_band.c, MatMul reading a Gather of rows): both
 * forms (scores, context), negative and repeated indices, no leading dims,
 * the threaded path; the arena stays smaller than the gathered band (it is
 * never materialized), and a Gather with other readers, or no_fusion, takes
 * the ordinary path. */
#define XT_GLOBAL_GRAPH
#include "exec_check.h"

static uint64_t Rng = 777;

TestSuite(gemv, .fini = xt_done);
TestSuite(band, .fini = xt_done);

/* random constant in [-1, 1) */
static int weight(const char *dims) { return xt_const_random(G, dims, -1, 1, &Rng); }

#define OP(name, ...) xt_node(G, name, INS(__VA_ARGS__), NULL, 0)

/* Reference vs plan at `threads` on inputs in [-1, 1); returns the stats. */
static ts_plan_stats compare_opts(int threads, bool no_fusion)
{
    ts_plan_opts o = {.threads = threads, .no_fusion = no_fusion};
    return xt_plan_stats(G, &o, 4242, -1, 1, 1e-4, XT_TOL_ELEM);
}

static ts_plan_stats compare_at(int threads) { return compare_opts(threads, false); }

static size_t packed_bytes(int64_t K, int64_t N) { return (size_t)((N + 63) / 64 * 64 * K) * sizeof(float); }

/* Both thread counts: steps, fused nodes and packed weight bytes as expected
 * (weights < 0: not checked). */
static void check(int steps, int fused, long weights)
{
    for (int t = 1; t <= 2; t++) {
        ts_plan_stats st = compare_at(t);
        cr_assert_eq(st.steps, steps, "threads %d: %d steps, expected %d", t, st.steps, steps);
        cr_assert_eq(st.fused_nodes, fused, "threads %d: %d fused, expected %d", t, st.fused_nodes, fused);
        cr_assert_eq(st.fallback_steps, 0, "threads %d: reference steps", t);
        if (weights >= 0)
            cr_assert_eq(st.weight_bytes, (size_t)weights, "threads %d: weight bytes %zu, expected %ld", t,
                         st.weight_bytes, weights);
    }
}

static void mm_case(const char *a, int64_t K, int64_t N)
{
    char w[32];
    graph(17);
    snprintf(w, sizeof w, "%lldx%lld", (long long)K, (long long)N);
    output(OP("MatMul", input(a), weight(w)));
    check(1, 0, (long)packed_bytes(K, N));
}

Test(gemv, one_row_square) { mm_case("1x512", 512, 512); }
Test(gemv, one_row_odd_k_ragged_n) { mm_case("1x37", 37, 70); }
Test(gemv, one_row_narrow) { mm_case("1x5", 5, 3); }
Test(gemv, vector_a) { mm_case("33", 33, 65); }
Test(gemv, rows_2_3_4) {
    mm_case("2x19", 19, 129);
    mm_case("3x64", 64, 64);
    mm_case("4x7", 7, 100);
}
Test(gemv, rows_blocks_and_leftover) {
    mm_case("7x31", 31, 77); /* 4 + 3 */
    mm_case("2x3x9", 9, 130); /* batch dims: 6 rows = 4 + 2 */
    mm_case("1x2x5x11", 11, 64); /* 10 rows = 4 + 4 + 2 */
    mm_case("16x40", 40, 200);
}

/* 16 x 512 x 640 is above the threading threshold: the threaded path */
Test(gemv, threaded) { mm_case("16x512", 512, 640); }

/* Above the row limit oneDNN takes the node (no panels: other byte count) */
Test(gemv, above_row_limit_goes_to_onednn)
{
    graph(17);
    output(OP("MatMul", input("17x40"), weight("40x64")));
    ts_plan_stats st = compare_at(1);
    cr_assert_eq(st.steps, 1);
    cr_assert_eq(st.fallback_steps, 0);
}

/* nasrnn's cell: x@Wx + h@Wh -> Sigmoid -> * h -> Tanh; the second MatMul
 * absorbs the Add (the first product is ready), Sigmoid, Mul and Tanh. */
Test(gemv, fused_chain)
{
    graph(17);
    int x = input("1x48"), h = input("1x48"), wx = weight("48x48"), wh = weight("48x48"), b = weight("48");
    int t = OP("MatMul", x, wx);
    int u = OP("MatMul", h, wh);
    int s = OP("Add", t, u);
    s = OP("Add", s, b);
    s = OP("Sigmoid", s);
    s = OP("Mul", s, h);
    output(OP("Tanh", s));
    check(2, 5, (long)(2 * packed_bytes(48, 48) + 48 * sizeof(float))); /* + the bias, read in place */
}

/* The chain stops where the shape grows (broadcast Add to 2x...) */
Test(gemv, chain_stops_at_growth)
{
    graph(17);
    int y = OP("MatMul", input("1x20"), weight("20x30"));
    y = OP("Relu", y);
    output(OP("Add", y, input("2x30")));
    check(2, 1, (long)packed_bytes(20, 30));
}

/* One weight used by three MatMuls is packed once. */
Test(gemv, shared_weight_packed_once)
{
    graph(17);
    int w = weight("64x96");
    int a = OP("MatMul", input("1x64"), w);
    int b = OP("MatMul", input("3x64"), w);
    int c = OP("MatMul", input("2x1x64"), w);
    output(a);
    output(b);
    output(c);
    check(3, 0, (long)packed_bytes(64, 96));
}

/* Runtime weights (not a constant) are not this kernel's: still correct. */
Test(gemv, runtime_weights_decline)
{
    graph(17);
    output(OP("MatMul", input("1x16"), input("16x8")));
    ts_plan_stats st = compare_at(1);
    cr_assert_eq(st.fallback_steps, 0);
}

/* ----------------------------------------------------------------- band */

/* constant int64 L x J index table: i + D*(j - J/2) wrapped into [-S, S)
 * (negative and repeated rows) */
static int band_index(int64_t L, int64_t J, int64_t S, int64_t D)
{
    ts_shape s = {.rank = 2, .dims = {L, J}};
    ts_tensor *t = ts_tensor_new(TS_I64, &s, &E);
    cr_assert(t, "%s", E.msg);
    for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j < J; j++) {
            int64_t v = (i + D * (j - J / 2)) % (2 * S);
            if (v < 0) v += 2 * S;
            ts_tensor_set_f64(t, i * J + j, (double)(v - S));
        }
    int id = ts_graph_add_constant(G, "band.index", t, &E);
    ts_tensor_unref(t);
    cr_assert(id >= 0, "%s", E.msg);
    return id;
}

static int gather(int x, int idx, int64_t axis)
{
    int out;
    ts_attr a = ts_attr_int("axis", axis);
    cr_assert(ts_graph_add_node(G, "Gather", NULL, (const int[]){x, idx}, 2, &a, 1, 1, NULL, &out, &E) >= 0, "%s",
              E.msg);
    return out;
}

/* scores (side 0) or context (side 1) over source xdims with index L x J */
static void band_case(int side, const char *xdims, const char *odims, int64_t L, int64_t J, int64_t S, int64_t axis,
                      size_t band_bytes)
{
    graph(17);
    int x = input(xdims), o = input(odims);
    int gb = gather(x, band_index(L, J, S, 3), axis);
    output(side == 0 ? OP("MatMul", gb, o) : OP("MatMul", o, gb));
    for (int t = 1; t <= 2; t++) {
        ts_plan_stats st = compare_at(t);
        cr_assert_eq(st.steps, 2, "threads %d: %d steps", t, st.steps);
        cr_assert_eq(st.fallback_steps, 0);
        cr_assert_lt(st.arena_bytes, band_bytes, "threads %d: arena %zu: the band was materialized", t,
                     st.arena_bytes);
    }
}

Test(band, scores) { band_case(0, "1x3x20x8", "1x3x20x8x1", 20, 5, 20, 2, 1 * 3 * 20 * 5 * 8 * 4); }
Test(band, context) { band_case(1, "1x3x20x8", "1x3x20x1x5", 20, 5, 20, -2, 1 * 3 * 20 * 5 * 8 * 4); }
Test(band, no_leading_dims_fewer_queries) { band_case(0, "30x7", "10x7x1", 10, 4, 30, 0, 10 * 4 * 7 * 4); }
Test(band, threaded_sizes)
{
    band_case(0, "1x4x128x32", "1x4x128x32x1", 128, 17, 128, 2, 4 * 128 * 17 * 32 * 4);
    band_case(1, "2x2x128x33", "2x2x128x1x17", 128, 17, 128, 2, 4 * 128 * 17 * 33 * 4);
}

/* The band is also a graph output: it must exist, the Gather runs for real. */
Test(band, gather_with_other_reader)
{
    graph(17);
    int x = input("1x2x12x4"), q = input("1x2x12x4x1");
    int gb = gather(x, band_index(12, 3, 12, 1), 2);
    output(OP("MatMul", gb, q));
    output(gb);
    ts_plan_stats st = compare_at(2);
    cr_assert_eq(st.fallback_steps, 0);
}

Test(band, no_fusion_materializes)
{
    graph(17);
    int x = input("1x2x12x4"), q = input("1x2x12x4x1");
    output(OP("MatMul", gather(x, band_index(12, 3, 12, 1), 2), q));
    ts_plan_stats st = compare_opts(1, true);
    cr_assert_geq(st.arena_bytes, (size_t)(2 * 12 * 3 * 4 * 4));
}

/* Shapes outside the two forms: an ordinary Gather and MatMul. */
Test(band, other_shapes_decline)
{
    graph(17);
    int x = input("1x2x12x4"), w = input("1x2x12x4x2"); /* two columns: not a vector per row */
    output(OP("MatMul", gather(x, band_index(12, 3, 12, 1), 2), w));
    ts_plan_stats st = compare_at(1);
    cr_assert_eq(st.fallback_steps, 0);
    cr_assert_geq(st.arena_bytes, (size_t)(2 * 12 * 3 * 4 * 4));
}
