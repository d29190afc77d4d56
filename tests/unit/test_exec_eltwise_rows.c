/* vec.eltwise over short rows (vec_eltwise.c prog_rows): rows of at most
 * half a block run several to a block, each operand that is not
 * contiguous across them laid out for the block (a per-channel slope
 * repeated on every row, one value per row, a scalar input).  Each case
 * is computed here element by element as ONNX defines it, with the same
 * float32 operation (x < 0 ? x * s : x, x + y, x * y): the plan's output
 * equals it bit for bit at 1 and 2 threads, with and without
 * TSOPT_SKIP=eltwise.rows (a row at a time).  Planted wrong variants (the
 * slopes in another channel order, along another axis) differ from the
 * output, so the comparison can fail.  Also FSRCNN's shape of the case:
 * PRelu with per-channel slopes after a convolution that writes
 * channels-last, rows against a row at a time. */
#include "exec_check.h"
#include "exec/plan_internal.h"
#include "vec/vec_eltwise.h"

static uint64_t Rng = 2718;

static ts_tensor *random_input(const ts_graph *g, int i)
{
    ts_error e = {0};
    ts_tensor *t = ts_tensor_new(TS_F32, &g->values[g->inputs[i]].shape, &e);
    cr_assert(t, "%s", e.msg);
    ts_tensor_fill_random(t, &Rng, -1, 1);
    return t;
}

static int64_t Rows_per; /* the last run's vec.eltwise step: rows to a block */

/* The graph's one output at `threads`, skipping `skip` (NULL: none); the
 * plan must run vec.eltwise. */
static ts_tensor *run(const ts_graph *g, ts_tensor **in, int threads, const char *skip)
{
    ts_error e = {0};
    ts_plan *plan = NULL;
    cr_assert_eq(ts_plan_build(g, &(ts_plan_opts){.threads = threads, .skip = skip}, &plan, &e), TS_OK, "%s", e.msg);
    cr_assert_geq(xt_steps_of(plan, "vec.eltwise"), 1);
    const xplan *p = (const xplan *)plan;
    for (int i = 0; i < p->nsteps; i++)
        if (!strcmp(p->steps[i].k->name, "vec.eltwise")) Rows_per = ((const xv_prog *)p->steps[i].state)->rows_per;
    ts_tensor *out = ts_tensor_new(TS_F32, &g->values[g->outputs[0]].shape, &e);
    cr_assert_eq(ts_plan_run(plan, in, &out, &e), TS_OK, "%s", e.msg);
    ts_plan_free(plan);
    return out;
}

static int64_t mismatches(const ts_tensor *a, const float *want)
{
    int64_t bad = 0, n = ts_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) bad += ((const float *)a->data)[i] != want[i];
    return bad;
}

/* Every run of g equals want; each planted wrong expectation differs. */
static void expect_exact(const ts_graph *g, ts_tensor **in, const float *want, const float *const *wrong, int nwrong)
{
    for (int threads = 1; threads <= 2; threads++)
        for (int skip = 0; skip < 2; skip++) {
            ts_tensor *y = run(g, in, threads, skip ? "eltwise.rows" : NULL);
            if (skip)
                cr_expect_eq(Rows_per, 1);
            else /* the case is one of short rows */
                cr_expect_geq(Rows_per, 2);
            cr_expect_eq(mismatches(y, want), 0, "%d threads%s: %lld elements differ", threads,
                         skip ? ", a row at a time" : "", (long long)mismatches(y, want));
            for (int w = 0; w < nwrong; w++)
                cr_expect_gt(mismatches(y, wrong[w]), 0, "planted wrong variant %d not told apart", w);
            ts_tensor_unref(y);
        }
}

/* PRelu of x [N, H, W, C] (stored as given: rows of C) by a slope [N, 1,
 * 1, C] (one per channel, another per image: the block's laid-out slope
 * is made again at the next image).  H*W rows of C per image, not a
 * multiple of the rows a block holds; 2 x 37 x 29 x 12 is past
 * XV_PAR_MIN, so 2 threads split it. */
static void prelu_rows(int64_t N, int64_t H, int64_t W, int64_t C)
{
    char xd[64], sd[64];
    snprintf(xd, sizeof xd, "%lldx%lldx%lldx%lld", (long long)N, (long long)H, (long long)W, (long long)C);
    snprintf(sd, sizeof sd, "%lldx1x1x%lld", (long long)N, (long long)C);
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", xd), s = xt_input(g, "s", sd);
    xt_output(g, xt_node(g, "PRelu", (int[]){x, s}, 2, NULL, 0));
    ts_tensor *in[2] = {random_input(g, 0), random_input(g, 1)};
    const float *xv = in[0]->data, *sv = in[1]->data;
    int64_t n = N * H * W * C;
    float *want = malloc(sizeof(float) * (size_t)n), *reversed = malloc(sizeof(float) * (size_t)n),
          *along_w = malloc(sizeof(float) * (size_t)n);
    cr_assert(want && reversed && along_w);
    for (int64_t i = 0; i < n; i++) {
        int64_t c = i % C, w = i / C % W, b = i / (H * W * C);
        float v = xv[i];
        want[i] = v < 0 ? v * sv[b * C + c] : v;
        reversed[i] = v < 0 ? v * sv[b * C + (C - 1 - c)] : v;
        along_w[i] = v < 0 ? v * sv[b * C + w % C] : v;
    }
    expect_exact(g, in, want, (const float *const[]){reversed, along_w}, 2);
    free(want);
    free(reversed);
    free(along_w);
    ts_tensor_unref(in[0]);
    ts_tensor_unref(in[1]);
    ts_graph_free(g);
}

Test(exec_eltwise_rows, prelu_per_channel_12) { prelu_rows(2, 37, 29, 12); }
Test(exec_eltwise_rows, prelu_per_channel_56) { prelu_rows(2, 23, 31, 56); }
/* 200 channels: two rows to a block */
Test(exec_eltwise_rows, prelu_per_channel_200) { prelu_rows(1, 9, 11, 200); }

/* Add of y [A, B, 1] to x [A, B, 3] (one value per row, rows of 3) and
 * Mul by a one-element input (one value for all): each laid out per block. */
Test(exec_eltwise_rows, value_per_row_and_scalar)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "5x401x3"), y = xt_input(g, "y", "5x401x1"), z = xt_input(g, "z", "1");
    xt_output(g, xt_node(g, "Mul", (int[]){xt_node(g, "Add", (int[]){x, y}, 2, NULL, 0), z}, 2, NULL, 0));
    ts_tensor *in[3] = {random_input(g, 0), random_input(g, 1), random_input(g, 2)};
    const float *xv = in[0]->data, *yv = in[1]->data, *zv = in[2]->data;
    const int64_t n = 5 * 401 * 3;
    float *want = malloc(sizeof(float) * n), *shifted = malloc(sizeof(float) * n);
    cr_assert(want && shifted);
    for (int64_t i = 0; i < n; i++) {
        want[i] = (xv[i] + yv[i / 3]) * zv[0];
        shifted[i] = (xv[i] + yv[(i / 3 + 1) % (5 * 401)]) * zv[0]; /* the next row's value */
    }
    expect_exact(g, in, want, (const float *const[]){shifted}, 1);
    free(want);
    free(shifted);
    for (int i = 0; i < 3; i++) ts_tensor_unref(in[i]);
    ts_graph_free(g);
}

/* FSRCNN's pair: a 3x3 convolution to 12 / 56 channels, then PRelu by
 * constant slopes [C, 1, 1] (not all equal: a step of its own).  Where
 * the convolution writes channels-last (oneDNN's brgconv on AVX-512) the
 * PRelu runs rows of C; at every layout, rows and a row at a time give
 * the same bits, and the reference interpreter's values (1e-4). */
static void conv_prelu(int C)
{
    ts_graph *g = ts_graph_new("t", 17);
    char sd[32], xd[32];
    snprintf(sd, sizeof sd, "%dx1x1", C);
    snprintf(xd, sizeof xd, "1x%dx40x36", C);
    int c = xt_conv3x3(g, xt_input(g, "x", xd), C, &Rng);
    xt_output(g, xt_node(g, "PRelu", (int[]){c, xt_const_random(g, sd, 0.05, 0.5, &Rng)}, 2, NULL, 0));
    ts_tensor *in[1] = {random_input(g, 0)};
    for (int threads = 1; threads <= 2; threads++) {
        ts_tensor *rows = run(g, in, threads, NULL), *one = run(g, in, threads, "eltwise.rows");
        cr_expect_eq(mismatches(rows, one->data), 0, "%d channels, %d threads", C, threads);
        ts_tensor_unref(rows);
        ts_tensor_unref(one);
    }
    ts_tensor_unref(in[0]);
    ts_plan_stats st = xt_plan_stats(g, NULL, Rng++, -1, 1, 1e-4, XT_TOL_MAX);
    cr_expect_eq(st.fallback_steps, 0);
    ts_graph_free(g);
}

Test(exec_eltwise_rows, conv_prelu_12) { conv_prelu(12); }
Test(exec_eltwise_rows, conv_prelu_56) { conv_prelu(56); }
