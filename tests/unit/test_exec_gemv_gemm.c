/* vec.gemv taking Gemm (src/vec/vec_gemv.c): the batch-1 classifier head
 * (GlobalAveragePool -> Flatten -> Gemm) with constant B, transB 0/1,
 * alpha, beta and a bias C broadcast along rows (scalar, [N], [1, N]),
 * against the reference interpreter on K, N not multiples of 16 or 64.
 * The plan statistics tell which kernel ran: vec.gemv packs B as panels of
 * 64 columns (weight_bytes = ceil(N/64)*64*K*4, its bias lives in the step
 * state), oneDNN's copy is padded differently and its bias is a buffer.
 * What vec.gemv declines (transA, C varying along rows, runtime B) still
 * runs correctly elsewhere. */
#define XT_GLOBAL_GRAPH
#include "exec_check.h"

static uint64_t Rng = 4711;

TestSuite(gemv_gemm, .fini = xt_done);

static int weight(const char *dims) { return xt_const_random(G, dims, -1, 1, &Rng); }

static size_t packed_bytes(int64_t K, int64_t N) { return (size_t)((N + 63) / 64 * 64 * K) * sizeof(float); }

static int gemm(int a, int b, int c, int ta, int tb, double alpha, double beta)
{
    ts_attr at[] = {ts_attr_int("transA", ta), ts_attr_int("transB", tb), ts_attr_float("alpha", alpha),
                    ts_attr_float("beta", beta)};
    return op("Gemm", (int[]){a, b, c}, c >= 0 ? 3 : 2, at, 4);
}

/* Both thread counts match the reference; returns the 2-thread stats.
 * any_kernel: the reference kernel may run a step (declined cases). */
static ts_plan_stats compare_any(bool any_kernel)
{
    ts_plan_stats st = {0};
    for (int t = 1; t <= 2; t++) {
        ts_plan_opts o = {.threads = t};
        st = xt_plan_stats(G, &o, 99, -1, 1, 1e-4, XT_TOL_ELEM);
        if (!any_kernel) cr_assert_eq(st.fallback_steps, 0, "threads %d: reference steps", t);
    }
    return st;
}

static ts_plan_stats compare(void) { return compare_any(false); }

/* rows x K times B (K x N, or N x K when tb) plus C of dims cdims (NULL: none) */
static void head(int64_t rows, int64_t K, int64_t N, int tb, double alpha, double beta, const char *cdims)
{
    char a[32], b[32];
    graph(13);
    snprintf(a, sizeof a, "%lldx%lld", (long long)rows, (long long)K);
    if (tb)
        snprintf(b, sizeof b, "%lldx%lld", (long long)N, (long long)K);
    else
        snprintf(b, sizeof b, "%lldx%lld", (long long)K, (long long)N);
    output(gemm(input(a), weight(b), cdims ? weight(cdims) : -1, 0, tb, alpha, beta));
    ts_plan_stats st = compare();
    cr_assert_eq(st.steps, 1);
    cr_assert_eq(st.weight_bytes, packed_bytes(K, N), "%lldx%lldx%lld tb %d: weight bytes %zu (not vec.gemv's)",
                 (long long)rows, (long long)K, (long long)N, tb, st.weight_bytes);
}

Test(gemv_gemm, plain_no_bias) { head(1, 37, 70, 0, 1, 1, NULL); }
Test(gemv_gemm, transb_bias_n) { head(1, 129, 77, 1, 1, 1, "77"); }
Test(gemv_gemm, alpha_beta_bias_1xn) { head(1, 33, 65, 0, 0.5, 2.0, "1x65"); }
Test(gemv_gemm, transb_scalar_bias) { head(1, 17, 3, 1, 1.5, 0.25, "1"); }
Test(gemv_gemm, beta_zero_ignores_c) { head(1, 45, 130, 1, -2.0, 0.0, "130"); }
Test(gemv_gemm, few_rows) { head(7, 31, 99, 1, 1, 1, "99"); }
/* K*N over XG_PAR_STREAM: the two-thread (weight-streaming) path, odd sizes */
Test(gemv_gemm, streamed_threaded) { head(1, 1283, 1001, 1, 1, 1, "1001"); }

/* Hand-computed: [1 2] x B^T with B = [[1 0] [0 1] [1 1]], alpha 2, beta 3,
 * C = [1 -1 0.5]: 2*[1 2 3] + [3 -3 1.5] = [5 1 7.5]. */
Test(gemv_gemm, hand_computed)
{
    graph(13);
    int y = gemm(F32("1x2", 1, 2), F32("3x2", 1, 0, 0, 1, 1, 1), F32("3", 1, -1, 0.5), 0, 1, 2.0, 3.0);
    y = op("Add", (int[]){y, input("1x3")}, 2, NULL, 0); /* keeps the graph from folding to a constant */
    output(y);
    ts_plan_opts o = {.threads = 1};
    ts_plan *p = NULL;
    cr_assert_eq(ts_plan_build(G, &o, &p, &E), TS_OK, "%s", E.msg);
    ts_shape s1 = {.rank = 2, .dims = {1, 3}};
    ts_tensor *zero = ts_tensor_new(TS_F32, &s1, &E), *out = ts_tensor_new(TS_F32, &s1, &E);
    cr_assert(zero && out);
    memset(zero->data, 0, zero->nbytes);
    cr_assert_eq(ts_plan_run(p, (ts_tensor *[]){zero}, (ts_tensor *[]){out}, &E), TS_OK, "%s", E.msg);
    const float *v = out->data, want[3] = {5, 1, 7.5f};
    for (int j = 0; j < 3; j++) cr_assert_float_eq(v[j], want[j], 1e-6, "y[%d] = %g, want %g", j, v[j], want[j]);
    ts_tensor_unref(zero);
    ts_tensor_unref(out);
    ts_plan_free(p);
}

/* The head as CNNs end: GlobalAveragePool -> Flatten -> Gemm (+ Relu fused). */
Test(gemv_gemm, classifier_head)
{
    graph(13);
    int x = op("GlobalAveragePool", (int[]){input("1x40x5x5")}, 1, NULL, 0);
    x = op("Flatten", &x, 1, NULL, 0);
    x = gemm(x, weight("100x40"), weight("100"), 0, 1, 1, 1);
    output(op("Relu", &x, 1, NULL, 0));
    compare();
}

/* Declined by vec.gemv, still correct: transA, C varying along rows,
 * runtime B. */
Test(gemv_gemm, declines_stay_correct)
{
    graph(13);
    output(gemm(input("9x3"), weight("9x11"), weight("11"), 1, 0, 1, 1));
    compare();
    graph(13);
    output(gemm(input("3x9"), weight("9x11"), weight("3x11"), 0, 0, 1, 1));
    compare_any(true); /* a full C: oneDNN's Gemm declines it too */
    graph(13);
    output(gemm(input("2x9"), input("9x11"), weight("11"), 0, 0, 1, 1));
    compare();
}

/* A weight the plan holds alone (release_packed_weights) is packed while
 * its pages go back to the OS (from 1 MiB): both stored orders, the
 * result still right, the original released. */
static void consumed(int tb)
{
    graph(13);
    output(gemm(input("1x700"), weight(tb ? "401x700" : "700x401"), weight("401"), 0, tb, 1, 1));
    ts_plan_opts o = {.threads = 2, .release_packed_weights = true};
    ts_plan_stats st = xt_plan_stats(G, &o, 5, -1, 1, 1e-4, XT_TOL_ELEM); /* the reference runs before the plan */
    cr_assert_eq(st.fallback_steps, 0);
    cr_assert_eq(st.weight_bytes, packed_bytes(700, 401), "tb %d: not vec.gemv's panels", tb);
    cr_assert_geq(st.released_bytes, (size_t)(700 * 401) * sizeof(float), "tb %d: the original was not released", tb);
}

Test(gemv_gemm, consumed_while_packed) { consumed(0); consumed(1); }
