/* nn operator family: hand-computed values for Conv, ConvTranspose, MatMul,
 * Gemm, BatchNormalization, pools and LayerNormalization; the exact ops in
 * the mod-p domain; float32 vs float64 agreement and a brute-force check of
 * the im2col/col2im kernels; error messages of bad attributes and shapes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/op.h"
#include "tsopt.h"

#define P_MOD 2147483647LL

/* ------------------------------------------------------------- helpers */

static ts_shape shp(const char *dims)
{
    ts_shape s = {0};
    ts_error e = {0};
    if (*dims) cr_assert_eq(ts_shape_parse(dims, &s, &e), TS_OK, "%s", e.msg);
    return s;
}

static int input(ts_graph *g, const char *name, const char *dims)
{
    ts_error e = {0};
    ts_shape s = shp(dims);
    int v = ts_graph_add_input(g, name, TS_F32, &s, &e);
    cr_assert_geq(v, 0, "%s", e.msg);
    return v;
}

static int cst(ts_graph *g, const char *name, const char *dims, const float *vals)
{
    ts_error e = {0};
    ts_shape s = shp(dims);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    cr_assert_not_null(t, "%s", e.msg);
    memcpy(t->data, vals, t->nbytes);
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert_geq(v, 0, "%s", e.msg);
    return v;
}

static ts_status try_node(ts_graph *g, const char *op, const int *ins, int nin, const ts_attr *at, int na, int nout,
                          int *out, ts_error *e)
{
    int outs[4];
    int r = ts_graph_add_node(g, op, NULL, ins, nin, at, na, nout, NULL, outs, e);
    if (r < 0) return e->code;
    if (out) *out = outs[0];
    return TS_OK;
}

/* Adds the node and makes its output the graph output. */
static void node(ts_graph *g, const char *op, const int *ins, int nin, const ts_attr *at, int na)
{
    ts_error e = {0};
    int y = -1;
    cr_assert_eq(try_node(g, op, ins, nin, at, na, 1, &y, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_add_output(g, y, &e), TS_OK, "%s", e.msg);
}

/* Runs g in domain d; graph input i gets values ins[i] (converted into the
 * domain).  Writes output 0 as doubles (mod-p: the residue); returns its
 * element count and shape. */
static int64_t run_d(ts_graph *g, ts_domain_kind d, const double *const *ins, double *out, ts_shape *oshape,
                     ts_error *e)
{
    const ts_num *num = ts_num_get(d);
    ts_tensor *in[8] = {0}, *res[1] = {0};
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        in[i] = ts_tensor_new(num->storage, &v->shape, e);
        cr_assert_not_null(in[i]);
        for (int64_t j = 0; j < ts_tensor_numel(in[i]); j++) num->from_f64(ts_num_at(num, in[i]->data, j), ins[i][j]);
    }
    ts_status st = ts_graph_run_reference(g, d, in, res, e);
    for (int i = 0; i < g->ninputs; i++) ts_tensor_unref(in[i]);
    if (st) return -1;
    int64_t n = ts_tensor_numel(res[0]);
    for (int64_t j = 0; j < n; j++) out[j] = num->to_f64(ts_num_cat(num, res[0]->data, j));
    if (oshape) *oshape = res[0]->shape;
    ts_tensor_unref(res[0]);
    return n;
}

static int64_t run(ts_graph *g, ts_domain_kind d, const double *const *ins, double *out, ts_shape *oshape)
{
    ts_error e = {0};
    int64_t n = run_d(g, d, ins, out, oshape, &e);
    cr_assert_geq(n, 0, "run failed: %s", e.msg);
    return n;
}

static void expect(const double *got, int64_t n, const double *want, int64_t nwant, double tol)
{
    cr_assert_eq(n, nwant, "got %lld values, expected %lld", (long long)n, (long long)nwant);
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= tol, "value %lld: got %.9g, expected %.9g", (long long)i, got[i], want[i]);
}

static void expect_shape(const ts_shape *s, const char *dims)
{
    ts_shape want = shp(dims);
    char a[160], b[160];
    cr_assert(ts_shape_eq(s, &want), "shape %s, expected %s", ts_shape_str(s, a, sizeof a), ts_shape_str(&want, b, sizeof b));
}

#define N_OF(a) ((int64_t)(sizeof(a) / sizeof *(a)))
#define INTS(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static const double X9[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}; /* 3x3 */
static const float ONES[64] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                               1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

/* Conv of the 3x3 image 1..9 with a 1x1xKxK weight w and attributes. */
static int64_t conv9(ts_domain_kind d, const char *wdims, const float *w, const float *bias, const ts_attr *at, int na,
                     double *out, ts_shape *os)
{
    ts_graph *g = ts_graph_new("conv", 17);
    int ins[3] = {input(g, "X", "1x1x3x3"), cst(g, "W", wdims, w), bias ? cst(g, "B", "1", bias) : -1};
    node(g, "Conv", ins, bias ? 3 : 2, at, na);
    const double *xs[] = {X9};
    int64_t n = run(g, d, xs, out, os);
    ts_graph_free(g);
    return n;
}

/* ---------------------------------------------------------------- Conv */

Test(conv, plain_and_bias)
{
    double out[16];
    ts_shape os;
    static const double want[] = {12, 16, 24, 28}, wantb[] = {13, 17, 25, 29};
    expect(out, conv9(TS_DOMAIN_F32, "1x1x2x2", ONES, NULL, NULL, 0, out, &os), want, 4, 1e-6);
    expect_shape(&os, "1x1x2x2");
    const float b = 1;
    expect(out, conv9(TS_DOMAIN_F64, "1x1x2x2", ONES, &b, NULL, 0, out, &os), wantb, 4, 1e-12);
    expect(out, conv9(TS_DOMAIN_MODP, "1x1x2x2", ONES, &b, NULL, 0, out, &os), wantb, 4, 0);
}

Test(conv, stride_pads)
{
    double out[16];
    ts_shape os;
    ts_attr at[] = {ts_attr_ints("pads", INTS(1, 1, 1, 1)), ts_attr_ints("strides", INTS(2, 2))};
    static const double want[] = {12, 16, 24, 28};
    expect(out, conv9(TS_DOMAIN_F32, "1x1x3x3", ONES, NULL, at, 2, out, &os), want, 4, 1e-6);
    /* asymmetric: pad only the beginning of W, stride 1 along H */
    ts_attr at2[] = {ts_attr_ints("pads", INTS(0, 1, 0, 0)), ts_attr_ints("strides", INTS(1, 2))};
    static const double want2[] = {1 + 4, 2 + 3 + 5 + 6, 4 + 7, 5 + 6 + 8 + 9};
    expect(out, conv9(TS_DOMAIN_F64, "1x1x2x2", ONES, NULL, at2, 2, out, &os), want2, 4, 1e-12);
    expect_shape(&os, "1x1x2x2");
}

Test(conv, dilation)
{
    double out[4];
    ts_shape os;
    static const float w[] = {1, 2, 3, 4};
    ts_attr at[] = {ts_attr_ints("dilations", INTS(2, 2)), ts_attr_ints("kernel_shape", INTS(2, 2))};
    static const double want[] = {1 * 1 + 2 * 3 + 3 * 7 + 4 * 9};
    expect(out, conv9(TS_DOMAIN_F32, "1x1x2x2", w, NULL, at, 2, out, &os), want, 1, 1e-6);
    expect(out, conv9(TS_DOMAIN_MODP, "1x1x2x2", w, NULL, at, 2, out, &os), want, 1, 0);
}

Test(conv, same_upper_vs_lower)
{
    double out[9];
    ts_shape os;
    ts_attr up = ts_attr_string("auto_pad", "SAME_UPPER"), lo = ts_attr_string("auto_pad", "SAME_LOWER");
    static const double want_up[] = {12, 16, 9, 24, 28, 15, 15, 17, 9};
    static const double want_lo[] = {1, 3, 5, 5, 12, 16, 11, 24, 28};
    expect(out, conv9(TS_DOMAIN_F32, "1x1x2x2", ONES, NULL, &up, 1, out, &os), want_up, 9, 1e-6);
    expect_shape(&os, "1x1x3x3");
    expect(out, conv9(TS_DOMAIN_F32, "1x1x2x2", ONES, NULL, &lo, 1, out, &os), want_lo, 9, 1e-6);
    /* SAME with stride 2: ceil(3/2) = 2 outputs, total pad 1 at the end (UPPER) */
    ts_attr at[] = {up, ts_attr_ints("strides", INTS(2, 2))};
    static const double want_s2[] = {12, 9, 15, 9};
    expect(out, conv9(TS_DOMAIN_F64, "1x1x2x2", ONES, NULL, at, 2, out, &os), want_s2, 4, 1e-12);
    ts_attr valid = ts_attr_string("auto_pad", "VALID");
    static const double want_v[] = {12, 16, 24, 28};
    expect(out, conv9(TS_DOMAIN_F64, "1x1x2x2", ONES, NULL, &valid, 1, out, &os), want_v, 4, 1e-12);
}

Test(conv, groups_and_depthwise)
{
    double out[8];
    ts_shape os;
    static const double x[] = {1, 2, 3, 4, 5, 6, 7, 8};
    const double *xs[] = {x};
    static const float w[] = {2, 3};
    ts_attr grp = ts_attr_int("group", 2);
    ts_graph *g = ts_graph_new("g", 17);
    int ins[] = {input(g, "X", "1x2x2x2"), cst(g, "W", "2x1x1x1", w)};
    node(g, "Conv", ins, 2, &grp, 1);
    static const double want[] = {2, 4, 6, 8, 15, 18, 21, 24};
    expect(out, run(g, TS_DOMAIN_MODP, xs, out, &os), want, 8, 0);
    ts_graph_free(g);

    g = ts_graph_new("dw", 17);
    int ins2[] = {input(g, "X", "1x2x2x2"), cst(g, "W", "2x1x2x2", ONES)};
    node(g, "Conv", ins2, 2, &grp, 1);
    static const double want2[] = {10, 26};
    expect(out, run(g, TS_DOMAIN_F32, xs, out, &os), want2, 2, 1e-6);
    expect_shape(&os, "1x2x1x1");
    ts_graph_free(g);
}

Test(conv, one_d_and_three_d)
{
    double out[8];
    ts_shape os;
    static const double x1[] = {1, 2, 3, 4, 5};
    const double *xs1[] = {x1};
    static const float w1[] = {1, -1};
    ts_attr s2 = ts_attr_ints("strides", INTS(2));
    ts_graph *g = ts_graph_new("c1", 17);
    int ins[] = {input(g, "X", "1x1x5"), cst(g, "W", "1x1x2", w1)};
    node(g, "Conv", ins, 2, &s2, 1);
    static const double want1[] = {-1, -1};
    expect(out, run(g, TS_DOMAIN_F32, xs1, out, &os), want1, 2, 1e-6);
    expect_shape(&os, "1x1x2");
    ts_graph_free(g);

    static const double x3[] = {1, 2, 3, 4, 5, 6, 7, 8};
    const double *xs3[] = {x3};
    g = ts_graph_new("c3", 17);
    int ins3[] = {input(g, "X", "1x1x2x2x2"), cst(g, "W", "1x1x2x2x2", ONES)};
    node(g, "Conv", ins3, 2, NULL, 0);
    static const double want3[] = {36};
    expect(out, run(g, TS_DOMAIN_MODP, xs3, out, &os), want3, 1, 0);
    expect_shape(&os, "1x1x1x1x1");
    ts_graph_free(g);
}

/* Brute-force Conv (double) for one random configuration. */
static void naive_conv(const double *x, const double *w, const double *b, int N, int C, int H, int W, int F, int G,
                       int KH, int KW, const int s[2], const int d[2], const int p[4], int OH, int OW, double *y)
{
    int Cg = C / G, Fg = F / G;
    for (int n = 0; n < N; n++)
        for (int f = 0; f < F; f++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double acc = b ? b[f] : 0;
                    int gi = f / Fg;
                    for (int c = 0; c < Cg; c++)
                        for (int kh = 0; kh < KH; kh++)
                            for (int kw = 0; kw < KW; kw++) {
                                int ih = oh * s[0] - p[0] + kh * d[0], iw = ow * s[1] - p[1] + kw * d[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                acc += x[((n * C + gi * Cg + c) * H + ih) * W + iw] * w[((f * Cg + c) * KH + kh) * KW + kw];
                            }
                    y[((n * F + f) * OH + oh) * OW + ow] = acc;
                }
}

Test(conv, random_matches_brute_force_f32_f64)
{
    enum { N = 2, C = 4, H = 7, W = 6, F = 6, G = 2, KH = 3, KW = 2 };
    const int s[2] = {2, 1}, d[2] = {1, 2}, p[4] = {1, 0, 2, 1};
    const int OH = (H + p[0] + p[2] - ((KH - 1) * d[0] + 1)) / s[0] + 1;
    const int OW = (W + p[1] + p[3] - ((KW - 1) * d[1] + 1)) / s[1] + 1;
    static double x[N * C * H * W], wd[F * (C / G) * KH * KW], bd[F], want[N * F * 8 * 8], got[N * F * 8 * 8];
    static float wf[F * (C / G) * KH * KW], bf[F];
    uint64_t r = 12345;
    for (int i = 0; i < N * C * H * W; i++) x[i] = (double)((r = r * 6364136223846793005ULL + 1) >> 40) / (1 << 24) - 0.5;
    for (int i = 0; i < F * (C / G) * KH * KW; i++) wd[i] = wf[i] = (float)((double)((r = r * 6364136223846793005ULL + 1) >> 40) / (1 << 24) - 0.5);
    for (int i = 0; i < F; i++) bd[i] = bf[i] = (float)i / 4;
    naive_conv(x, wd, bd, N, C, H, W, F, G, KH, KW, s, d, p, OH, OW, want);
    ts_graph *g = ts_graph_new("r", 17);
    char xd[64], wdims[64];
    snprintf(xd, sizeof xd, "%dx%dx%dx%d", N, C, H, W);
    snprintf(wdims, sizeof wdims, "%dx%dx%dx%d", F, C / G, KH, KW);
    int ins[] = {input(g, "X", xd), cst(g, "W", wdims, wf), cst(g, "B", "6", bf)};
    ts_attr at[] = {ts_attr_ints("strides", INTS(2, 1)), ts_attr_ints("dilations", INTS(1, 2)),
                    ts_attr_ints("pads", INTS(1, 0, 2, 1)), ts_attr_int("group", G)};
    node(g, "Conv", ins, 3, at, 4);
    const double *xs[] = {x};
    ts_shape os;
    int64_t n = run(g, TS_DOMAIN_F64, xs, got, &os);
    expect(got, n, want, N * F * OH * OW, 1e-12);
    n = run(g, TS_DOMAIN_F32, xs, got, &os);
    expect(got, n, want, N * F * OH * OW, 1e-5);
    ts_graph_free(g);
}

/* ------------------------------------------------------- ConvTranspose */

static int64_t convt4(ts_domain_kind dom, const ts_attr *at, int na, double *out, ts_shape *os)
{
    static const double x[] = {1, 2, 3, 4};
    const double *xs[] = {x};
    ts_graph *g = ts_graph_new("ct", 17);
    int ins[] = {input(g, "X", "1x1x2x2"), cst(g, "W", "1x1x2x2", ONES)};
    node(g, "ConvTranspose", ins, 2, at, na);
    int64_t n = run(g, dom, xs, out, os);
    ts_graph_free(g);
    return n;
}

Test(conv_transpose, stride_output_padding_pads_output_shape)
{
    double out[25];
    ts_shape os;
    static const double w1[] = {1, 3, 2, 4, 10, 6, 3, 7, 4};
    expect(out, convt4(TS_DOMAIN_MODP, NULL, 0, out, &os), w1, 9, 0);
    expect_shape(&os, "1x1x3x3");

    ts_attr s2 = ts_attr_ints("strides", INTS(2, 2));
    static const double w2[] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    expect(out, convt4(TS_DOMAIN_F32, &s2, 1, out, &os), w2, 16, 1e-6);

    ts_attr op[] = {s2, ts_attr_ints("output_padding", INTS(1, 1))};
    static const double w3[] = {1, 1, 2, 2, 0, 1, 1, 2, 2, 0, 3, 3, 4, 4, 0, 3, 3, 4, 4, 0, 0, 0, 0, 0, 0};
    expect(out, convt4(TS_DOMAIN_F32, op, 2, out, &os), w3, 25, 1e-6);
    expect_shape(&os, "1x1x5x5");

    ts_attr pads = ts_attr_ints("pads", INTS(1, 1, 1, 1));
    static const double w4[] = {10};
    expect(out, convt4(TS_DOMAIN_F64, &pads, 1, out, &os), w4, 1, 1e-12);

    /* output_shape 3x3 with stride 2: total padding 1, the odd pixel at the
     * beginning (ONNX: not SAME_UPPER) -> the 4x4 result without row/col 0 */
    ts_attr osh[] = {s2, ts_attr_ints("output_shape", INTS(3, 3))};
    static const double w5[] = {1, 2, 2, 3, 4, 4, 3, 4, 4};
    expect(out, convt4(TS_DOMAIN_F64, osh, 2, out, &os), w5, 9, 1e-12);
    ts_attr up[] = {s2, ts_attr_ints("output_shape", INTS(3, 3)), ts_attr_string("auto_pad", "SAME_UPPER")};
    static const double w6[] = {1, 1, 2, 1, 1, 2, 3, 3, 4};
    expect(out, convt4(TS_DOMAIN_F64, up, 3, out, &os), w6, 9, 1e-12);
}

Test(conv_transpose, output_shape_larger_than_natural)
{
    /* stride 2 makes 4x4 (w2 above); output_shape 5x6 keeps it at the top
     * left and adds zero rows/columns at the end (ONNX Runtime, ONNX's
     * reference and test_convtranspose_output_shape), SAME_UPPER too */
    double out[30];
    ts_shape os;
    static const double w[] = {1, 1, 2, 2, 0, 0, 1, 1, 2, 2, 0, 0, 3, 3, 4, 4, 0, 0,
                               3, 3, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0};
    ts_attr s2 = ts_attr_ints("strides", INTS(2, 2));
    ts_attr big[] = {s2, ts_attr_ints("output_shape", INTS(5, 6))};
    expect(out, convt4(TS_DOMAIN_F32, big, 2, out, &os), w, 30, 1e-6);
    expect_shape(&os, "1x1x5x6");
    ts_attr up[] = {s2, ts_attr_ints("output_shape", INTS(5, 6)), ts_attr_string("auto_pad", "SAME_UPPER")};
    expect(out, convt4(TS_DOMAIN_MODP, up, 3, out, &os), w, 30, 0);
    /* one dim larger, the other smaller (total padding 1: row 0 dropped) */
    ts_attr mix[] = {s2, ts_attr_ints("output_shape", INTS(3, 5))};
    static const double w2[] = {1, 1, 2, 2, 0, 3, 3, 4, 4, 0, 3, 3, 4, 4, 0};
    expect(out, convt4(TS_DOMAIN_F64, mix, 2, out, &os), w2, 15, 1e-12);
    /* the bias reaches the added positions too */
    static const double x[] = {1, 2, 3, 4};
    const double *xs[] = {x};
    static const float b[] = {0.5f};
    ts_graph *g = ts_graph_new("ct", 17);
    int ins[] = {input(g, "X", "1x1x2x2"), cst(g, "W", "1x1x2x2", ONES), cst(g, "B", "1", b)};
    node(g, "ConvTranspose", ins, 3, big, 2);
    run(g, TS_DOMAIN_F32, xs, out, &os);
    for (int i = 0; i < 30; i++) cr_assert_float_eq(out[i], w[i] + 0.5, 1e-6, "element %d: %g", i, out[i]);
    ts_graph_free(g);
}

Test(conv_transpose, group_and_bias)
{
    double out[2];
    static const double x[] = {1, 2};
    const double *xs[] = {x};
    static const float w[] = {3, 4}, b[] = {10, 20};
    ts_attr grp = ts_attr_int("group", 2);
    ts_graph *g = ts_graph_new("ctg", 17);
    int ins[] = {input(g, "X", "1x2x1x1"), cst(g, "W", "2x1x1x1", w), cst(g, "B", "2", b)};
    node(g, "ConvTranspose", ins, 3, &grp, 1);
    static const double want[] = {13, 28};
    expect(out, run(g, TS_DOMAIN_MODP, xs, out, NULL), want, 2, 0);
    ts_graph_free(g);
}

Test(conv_transpose, random_adjoint_of_conv)
{
    /* <ConvT(x), y> == <x, Conv(y)> with the same weight, strides, pads,
     * dilations and groups: checks the scatter against the gather. */
    enum { C = 4, F = 6, G = 2, H = 4, W = 5 };
    float wv[C * (F / G) * 3 * 2];
    for (int i = 0; i < C * (F / G) * 6; i++) wv[i] = (float)((i * 7) % 11) - 5;
    ts_attr at[] = {ts_attr_ints("strides", INTS(2, 3)), ts_attr_ints("dilations", INTS(2, 1)),
                    ts_attr_ints("pads", INTS(1, 0, 0, 1)), ts_attr_int("group", G)};
    ts_graph *gt = ts_graph_new("ct", 17);
    int in1[] = {input(gt, "X", "1x4x4x5"), cst(gt, "W", "4x3x3x2", wv)};
    node(gt, "ConvTranspose", in1, 2, at, 4);
    const ts_shape ys = gt->values[gt->outputs[0]].shape; /* 1x6xOHxOW */
    char yd[64];
    snprintf(yd, sizeof yd, "1x6x%lldx%lld", (long long)ys.dims[2], (long long)ys.dims[3]);
    /* the adjoint is Conv with the same weight tensor read as [C][F/G][k]:
     * C output channels, F/G input channels per group */
    ts_graph *gc = ts_graph_new("c", 17);
    int in2[] = {input(gc, "Y", yd), cst(gc, "W", "4x3x3x2", wv)};
    node(gc, "Conv", in2, 2, at, 4);
    expect_shape(&gc->values[gc->outputs[0]].shape, "1x4x4x5");
    static double x[C * H * W], y[1024], tx[1024], cy[C * H * W];
    int64_t ny = ts_shape_numel(&ys);
    cr_assert_leq(ny, 1024);
    for (int i = 0; i < C * H * W; i++) x[i] = (i * 5) % 9 - 4;
    for (int i = 0; i < ny; i++) y[i] = (i * 3) % 7 - 3;
    const double *xs[] = {x}, *yv[] = {y};
    cr_assert_eq(run(gt, TS_DOMAIN_MODP, xs, tx, NULL), ny);
    cr_assert_eq(run(gc, TS_DOMAIN_MODP, yv, cy, NULL), C * H * W);
    int64_t lhs = 0, rhs = 0; /* residues mod p; y and x reduced too */
    for (int i = 0; i < ny; i++) lhs = (lhs + (int64_t)tx[i] * (((int64_t)y[i] + P_MOD) % P_MOD)) % P_MOD;
    for (int i = 0; i < C * H * W; i++) rhs = (rhs + (int64_t)cy[i] * (((int64_t)x[i] + P_MOD) % P_MOD)) % P_MOD;
    cr_assert_eq(lhs, rhs);
    cr_assert_neq(lhs, 0);
    ts_graph_free(gt);
    ts_graph_free(gc);
}

/* ------------------------------------------------------ MatMul / Gemm */

static int64_t mm(ts_domain_kind dom, const char *ad, const double *a, const char *bd, const double *b, double *out,
                  ts_shape *os)
{
    ts_graph *g = ts_graph_new("mm", 17);
    int ins[] = {input(g, "A", ad), input(g, "B", bd)};
    node(g, "MatMul", ins, 2, NULL, 0);
    const double *xs[] = {a, b};
    int64_t n = run(g, dom, xs, out, os);
    ts_graph_free(g);
    return n;
}

Test(matmul, shapes_and_values)
{
    double out[16];
    ts_shape os;
    static const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, 0, 0, 1, 1, 1}, ones[] = {1, 1, 1};
    static const double w1[] = {4, 5, 10, 11};
    expect(out, mm(TS_DOMAIN_MODP, "2x3", a, "3x2", b, out, &os), w1, 4, 0);
    expect_shape(&os, "2x2");
    static const double w2[] = {4, 5};
    expect(out, mm(TS_DOMAIN_F32, "3", a, "3x2", b, out, &os), w2, 2, 1e-6);
    expect_shape(&os, "2");
    static const double w3[] = {6, 15};
    expect(out, mm(TS_DOMAIN_F32, "2x3", a, "3", ones, out, &os), w3, 2, 1e-6);
    expect_shape(&os, "2");
    static const double w4[] = {14};
    expect(out, mm(TS_DOMAIN_F64, "3", a, "3", a, out, &os), w4, 1, 1e-12);
    expect_shape(&os, "");
    /* batch dims [2,1] and [3] broadcast to [2,3] */
    static const double ba[] = {1, 2, 3, 4}, bb[] = {1, 1, 2, 1, 3, 1};
    static const double w5[] = {3, 4, 5, 7, 10, 13};
    expect(out, mm(TS_DOMAIN_MODP, "2x1x1x2", ba, "3x2x1", bb, out, &os), w5, 6, 0);
    expect_shape(&os, "2x3x1x1");
    /* a 1-D operand against a batched one: [1,2] x [[1,1,1],[1,1,1]] and x [[1,1,1],[2,2,2]] */
    static const double bt[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2};
    static const double v2[] = {1, 2}, w6[] = {3, 3, 3, 5, 5, 5};
    expect(out, mm(TS_DOMAIN_F64, "2", v2, "2x2x3", bt, out, &os), w6, 6, 1e-12);
    expect_shape(&os, "2x3");
}

Test(matmul, modp_wraps)
{
    /* 2 * (2^30)^2 = 2^61 = 2^30 (mod 2^31-1, since 2^31 = 1) */
    double out[1];
    static const double a[] = {1073741824.0, 1073741824.0};
    static const double want[] = {1073741824.0};
    expect(out, mm(TS_DOMAIN_MODP, "1x2", a, "2x1", a, out, NULL), want, 1, 0);
}

static int64_t gemm(ts_domain_kind dom, const ts_attr *at, int na, const char *cd, const float *c, double *out,
                    ts_error *e)
{
    static const double a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
    ts_graph *g = ts_graph_new("gemm", 17);
    int ins[] = {input(g, "A", "2x2"), input(g, "B", "2x2"), c ? cst(g, "C", cd, c) : -1};
    node(g, "Gemm", ins, c ? 3 : 2, at, na);
    const double *xs[] = {a, b};
    int64_t n = run_d(g, dom, xs, out, NULL, e);
    ts_graph_free(g);
    return n;
}

Test(gemm, trans_alpha_beta_broadcast)
{
    double out[4];
    ts_error e = {0};
    static const double w1[] = {19, 22, 43, 50}, w2[] = {26, 30, 38, 44}, w3[] = {17, 23, 39, 53};
    expect(out, gemm(TS_DOMAIN_MODP, NULL, 0, NULL, NULL, out, &e), w1, 4, 0);
    ts_attr ta = ts_attr_int("transA", 1), tb = ts_attr_int("transB", 1);
    expect(out, gemm(TS_DOMAIN_F32, &ta, 1, NULL, NULL, out, &e), w2, 4, 1e-6);
    expect(out, gemm(TS_DOMAIN_F32, &tb, 1, NULL, NULL, out, &e), w3, 4, 1e-6);
    ts_attr all[] = {ta, tb, ts_attr_float("alpha", 2), ts_attr_float("beta", 3)};
    static const float crow[] = {1, 10}, ccol[] = {1, 2}, cs[] = {5};
    static const double w4[] = {49, 92, 71, 122};
    expect(out, gemm(TS_DOMAIN_MODP, all, 4, "2", crow, out, &e), w4, 4, 0);
    expect(out, gemm(TS_DOMAIN_F64, all, 4, "1x2", crow, out, &e), w4, 4, 1e-12);
    static const double w5[] = {20, 23, 45, 52};
    expect(out, gemm(TS_DOMAIN_F32, NULL, 0, "2x1", ccol, out, &e), w5, 4, 1e-6);
    static const double w6[] = {24, 27, 48, 55};
    expect(out, gemm(TS_DOMAIN_F32, NULL, 0, "", cs, out, &e), w6, 4, 1e-6);
    /* a fractional alpha has no exact form: the mod-p kernel refuses it */
    ts_attr half = ts_attr_float("alpha", 0.5);
    static const double w7[] = {9.5, 11, 21.5, 25};
    expect(out, gemm(TS_DOMAIN_F32, &half, 1, NULL, NULL, out, &e), w7, 4, 1e-6);
    cr_assert_lt(gemm(TS_DOMAIN_MODP, &half, 1, NULL, NULL, out, &e), 0);
    cr_assert_eq(e.code, TS_ERR_UNSUPPORTED);
    cr_assert(strstr(e.msg, "alpha = 0.5 is not an integer"), "%s", e.msg);
}

/* ------------------------------------------------ BatchNorm / LayerNorm */

Test(batchnorm, inference)
{
    double out[4];
    static const double x[] = {1, 2, 3, 4};
    const double *xs[] = {x};
    static const float sc[] = {1, 2}, b[] = {0, 1}, mean[] = {1, 3}, var[] = {4, 1};
    ts_graph *g = ts_graph_new("bn", 15);
    int ins[] = {input(g, "X", "1x2x1x2"), cst(g, "s", "2", sc), cst(g, "b", "2", b), cst(g, "m", "2", mean),
                 cst(g, "v", "2", var)};
    ts_attr eps = ts_attr_float("epsilon", 0);
    node(g, "BatchNormalization", ins, 5, &eps, 1);
    static const double want[] = {0, 0.5, 1, 3};
    expect(out, run(g, TS_DOMAIN_F32, xs, out, NULL), want, 4, 1e-6);
    /* not polynomial: refused in the exact domain */
    ts_error e = {0};
    cr_assert_lt(run_d(g, TS_DOMAIN_MODP, xs, out, NULL, &e), 0);
    cr_assert(strstr(e.msg, "no kernel in the modp domain"), "%s", e.msg);
    ts_graph_free(g);
}

Test(batchnorm, per_activation_spatial0)
{
    /* opset 7, spatial = 0: parameters of shape C x D, y = x * scale here */
    double out[4];
    static const double x[] = {1, 1, 1, 1};
    const double *xs[] = {x};
    static const float sc[] = {1, 2, 3, 4}, z[] = {0, 0, 0, 0}, one[] = {1, 1, 1, 1};
    ts_graph *g = ts_graph_new("bn7", 7);
    int ins[] = {input(g, "X", "1x2x2"), cst(g, "s", "2x2", sc), cst(g, "b", "2x2", z), cst(g, "m", "2x2", z),
                 cst(g, "v", "2x2", one)};
    ts_attr at[] = {ts_attr_int("spatial", 0), ts_attr_float("epsilon", 0)};
    node(g, "BatchNormalization", ins, 5, at, 2);
    static const double want[] = {1, 2, 3, 4};
    expect(out, run(g, TS_DOMAIN_F64, xs, out, NULL), want, 4, 1e-12);
    ts_graph_free(g);
}

/* Runs g in domain d on the given input tensors (float ones in the
 * domain's storage); returns its outputs (caller unrefs). */
static void run_all(ts_graph *g, ts_domain_kind d, ts_tensor **in, ts_tensor **out)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_run_reference(g, d, in, out, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < g->ninputs; i++) ts_tensor_unref(in[i]);
}

static ts_tensor *tvals(ts_dtype dt, const char *dims, const double *v)
{
    ts_error e = {0};
    ts_shape s = shp(dims);
    ts_tensor *t = ts_tensor_new(dt, &s, &e);
    cr_assert_not_null(t, "%s", e.msg);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) ts_tensor_set_f64(t, i, v[i]);
    return t;
}

static void expect_t(const ts_tensor *t, ts_dtype dt, const double *want, int64_t n, double tol)
{
    cr_assert_eq(t->dtype, dt, "dtype %s, expected %s", ts_dtype_name(t->dtype), ts_dtype_name(dt));
    cr_assert_eq(ts_tensor_numel(t), n);
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(ts_tensor_get_f64(t, i) - want[i]) <= tol, "value %lld: got %.9g, expected %.9g", (long long)i,
                  ts_tensor_get_f64(t, i), want[i]);
}

Test(batchnorm, training_mode)
{
    /* X (N 2, C 2, 2): channel 0 holds 1 3 | 5 7 (mean 4, population
     * variance 5), channel 1 holds 0 0 | 2 2 (mean 1, variance 1) */
    static const double x[] = {1, 3, 0, 0, 5, 7, 2, 2};
    static const float sc[] = {2, 1}, b[] = {1, 0}, mean[] = {0, 10}, var[] = {1, 1};
    for (int nout = 1; nout <= 3; nout++) {
        ts_graph *g = ts_graph_new("bn", 15);
        int ins[] = {input(g, "X", "2x2x2"), cst(g, "s", "2", sc), cst(g, "b", "2", b), cst(g, "m", "2", mean),
                     cst(g, "v", "2", var)};
        ts_attr at[] = {ts_attr_int("training_mode", 1), ts_attr_float("epsilon", 0), ts_attr_float("momentum", 0.8)};
        ts_error e = {0};
        int outs[3];
        cr_assert_geq(ts_graph_add_node(g, "BatchNormalization", NULL, ins, 5, at, 3, nout, NULL, outs, &e), 0, "%s",
                      e.msg);
        for (int o = 0; o < nout; o++) cr_assert_eq(ts_graph_add_output(g, outs[o], &e), TS_OK);
        ts_tensor *in[] = {tvals(TS_F64, "2x2x2", x)}, *out[3] = {0};
        run_all(g, TS_DOMAIN_F64, in, out);
        double r = 2 / sqrt(5);
        const double y[] = {-3 * r + 1, -r + 1, -1, -1, r + 1, 3 * r + 1, 1, 1};
        expect_t(out[0], TS_F64, y, 8, 1e-12);
        /* running = given * 0.8 + batch * 0.2 */
        if (nout > 1) expect_t(out[1], TS_F64, (const double[]){0.8, 8.2}, 2, 1e-12);
        if (nout > 2) expect_t(out[2], TS_F64, (const double[]){1.8, 1.0}, 2, 1e-12);
        for (int o = 0; o < nout; o++) ts_tensor_unref(out[o]);
        ts_graph_free(g);
    }
}

Test(layernorm, axes)
{
    double out[4];
    static const double x[] = {1, 3, 0, 4};
    const double *xs[] = {x};
    static const float sc[] = {2, 1}, b[] = {0.5f, 0}, one2[] = {1, 1};
    ts_graph *g = ts_graph_new("ln", 17);
    int ins[] = {input(g, "X", "2x2"), cst(g, "s", "2", sc), cst(g, "b", "2", b)};
    ts_attr eps = ts_attr_float("epsilon", 0);
    node(g, "LayerNormalization", ins, 3, &eps, 1);
    static const double want[] = {-1.5, 1, -1.5, 1};
    expect(out, run(g, TS_DOMAIN_F64, xs, out, NULL), want, 4, 1e-12);
    ts_graph_free(g);

    g = ts_graph_new("ln2", 17);
    int ins2[] = {input(g, "X", "2x2"), cst(g, "s", "2", one2)};
    ts_attr at[] = {eps, ts_attr_int("axis", -2)};
    node(g, "LayerNormalization", ins2, 2, at, 2);
    double r = sqrt(2.5);
    const double want2[] = {-1 / r, 1 / r, -2 / r, 2 / r};
    expect(out, run(g, TS_DOMAIN_F32, xs, out, NULL), want2, 4, 1e-6);
    ts_graph_free(g);
}

/* ----------------------------------------------------------------- pools */

static int64_t pool9(ts_domain_kind dom, const char *op, const double *x, const ts_attr *at, int na, double *out,
                     ts_shape *os)
{
    const double *xs[] = {x ? x : X9};
    ts_graph *g = ts_graph_new("pool", 17);
    int ins[] = {input(g, "X", "1x1x3x3")};
    node(g, op, ins, 1, at, na);
    int64_t n = run(g, dom, xs, out, os);
    ts_graph_free(g);
    return n;
}

Test(pool, average_pads_count_include_pad_ceil)
{
    double out[9];
    ts_shape os;
    ts_attr at[] = {ts_attr_ints("kernel_shape", INTS(2, 2)), ts_attr_ints("strides", INTS(2, 2)),
                    ts_attr_ints("pads", INTS(0, 0, 1, 1)), ts_attr_int("count_include_pad", 0)};
    static const double w0[] = {3, 4.5, 7.5, 9}, w1[] = {3, 2.25, 3.75, 2.25};
    expect(out, pool9(TS_DOMAIN_F32, "AveragePool", NULL, at, 4, out, &os), w0, 4, 1e-6);
    expect_shape(&os, "1x1x2x2");
    at[3] = ts_attr_int("count_include_pad", 1);
    expect(out, pool9(TS_DOMAIN_F64, "AveragePool", NULL, at, 4, out, &os), w1, 4, 1e-12);
    /* ceil_mode without pads: the last windows hang past the edge */
    ts_attr ce[] = {at[0], at[1], ts_attr_int("ceil_mode", 1)};
    expect(out, pool9(TS_DOMAIN_F32, "AveragePool", NULL, ce, 3, out, &os), w0, 4, 1e-6);
    ts_attr fl[] = {at[0], at[1]};
    static const double w2[] = {3};
    expect(out, pool9(TS_DOMAIN_F32, "AveragePool", NULL, fl, 2, out, &os), w2, 1, 1e-6);
    expect_shape(&os, "1x1x1x1");
}

Test(pool, average_modp_inverse)
{
    /* (1 + 2) * inv(2) mod p = 3 * 2^30 mod p = 1073741825 */
    double out[1];
    static const double x[] = {1, 2};
    const double *xs[] = {x};
    ts_graph *g = ts_graph_new("ap", 17);
    int ins[] = {input(g, "X", "1x1x1x2")};
    ts_attr k = ts_attr_ints("kernel_shape", INTS(1, 2));
    node(g, "AveragePool", ins, 1, &k, 1);
    static const double want[] = {1073741825.0};
    expect(out, run(g, TS_DOMAIN_MODP, xs, out, NULL), want, 1, 0);
    cr_assert_eq((1073741825LL * 2) % P_MOD, 3);
    ts_graph_free(g);

    /* GlobalAveragePool: 10 * inv(4) = 5 * inv(2) = 1073741826; 26/4 = 13 * inv(2) */
    static const double x8[] = {1, 2, 3, 4, 5, 6, 7, 8};
    const double *xs8[] = {x8};
    g = ts_graph_new("gap", 17);
    int in2[] = {input(g, "X", "1x2x2x2")};
    node(g, "GlobalAveragePool", in2, 1, NULL, 0);
    double o2[2];
    static const double wm[] = {1073741826.0, (13 * 1073741824LL) % P_MOD}, wf[] = {2.5, 6.5};
    expect(o2, run(g, TS_DOMAIN_MODP, xs8, o2, NULL), wm, 2, 0);
    ts_shape os;
    expect(o2, run(g, TS_DOMAIN_F32, xs8, o2, &os), wf, 2, 1e-6);
    expect_shape(&os, "1x2x1x1");
    ts_graph_free(g);

    g = ts_graph_new("gmp", 17);
    int in3[] = {input(g, "X", "1x2x2x2")};
    node(g, "GlobalMaxPool", in3, 1, NULL, 0);
    static const double wx[] = {4, 8};
    expect(o2, run(g, TS_DOMAIN_F64, xs8, o2, NULL), wx, 2, 1e-12);
    ts_graph_free(g);
}

Test(pool, max_ceil_dilation_pads)
{
    double out[9];
    ts_shape os;
    static const double x[] = {1, 9, 2, 8, 3, 7, 4, 6, 5};
    ts_attr k2 = ts_attr_ints("kernel_shape", INTS(2, 2));
    static const double w1[] = {9, 9, 8, 7};
    expect(out, pool9(TS_DOMAIN_F32, "MaxPool", x, &k2, 1, out, &os), w1, 4, 0);
    ts_attr ce[] = {k2, ts_attr_ints("strides", INTS(2, 2)), ts_attr_int("ceil_mode", 1)};
    static const double w2[] = {9, 7, 6, 5};
    expect(out, pool9(TS_DOMAIN_F32, "MaxPool", x, ce, 3, out, &os), w2, 4, 0);
    expect_shape(&os, "1x1x2x2");
    static const double w3[] = {9};
    expect(out, pool9(TS_DOMAIN_F32, "MaxPool", x, ce, 2, out, &os), w3, 1, 0);
    ts_attr dil[] = {k2, ts_attr_ints("dilations", INTS(2, 2))};
    static const double w4[] = {5};
    expect(out, pool9(TS_DOMAIN_F64, "MaxPool", x, dil, 2, out, &os), w4, 1, 0);
    /* padding never wins a max, even over negative values */
    static const double neg[] = {-3, -1, -2, -5, -4, -6, -9, -8, -7};
    ts_attr pd[] = {ts_attr_ints("kernel_shape", INTS(3, 3)), ts_attr_ints("pads", INTS(1, 1, 1, 1)),
                    ts_attr_ints("strides", INTS(2, 2))};
    static const double w5[] = {-1, -1, -4, -4};
    expect(out, pool9(TS_DOMAIN_F32, "MaxPool", neg, pd, 3, out, &os), w5, 4, 0);
    /* SAME_LOWER puts the odd pad first */
    ts_attr sl[] = {k2, ts_attr_string("auto_pad", "SAME_LOWER")};
    static const double w6[] = {1, 9, 9, 8, 9, 9, 8, 8, 7};
    expect(out, pool9(TS_DOMAIN_F32, "MaxPool", x, sl, 2, out, &os), w6, 9, 0);
}

Test(pool, ceil_mode_drops_window_starting_in_padding)
{
    /* in 4, kernel 2, stride 2, pad end 1, ceil: ceil((4+1-2)/2)+1 = 3, but
     * the third window would start at 4 >= in + pad_begin: dropped -> 2 */
    double out[4];
    static const double x[] = {1, 2, 3, 4};
    const double *xs[] = {x};
    ts_graph *g = ts_graph_new("c", 17);
    int ins[] = {input(g, "X", "1x1x4")};
    ts_attr at[] = {ts_attr_ints("kernel_shape", INTS(2)), ts_attr_ints("strides", INTS(2)),
                    ts_attr_ints("pads", INTS(0, 1)), ts_attr_int("ceil_mode", 1)};
    node(g, "MaxPool", ins, 1, at, 4);
    static const double want[] = {2, 4};
    expect(out, run(g, TS_DOMAIN_F32, xs, out, NULL), want, 2, 0);
    ts_graph_free(g);
}

Test(pool, max_indices_and_integers)
{
    /* two planes of {1, 9, 2, 8, 3, 7, 4, 6, 5}, kernel 2x2: maxima 9 9 8 7 at
     * (0,1) (0,1) (1,0) (1,2): flat indices 1 1 3 5 in the first plane, +9
     * in the second; column-major (storage_order 1) h + 3w: 3 3 1 7 */
    static const double x[] = {1, 9, 2, 8, 3, 7, 4, 6, 5, 1, 9, 2, 8, 3, 7, 4, 6, 5};
    static const double y[] = {9, 9, 8, 7, 9, 9, 8, 7};
    static const double rows[] = {1, 1, 3, 5, 10, 10, 12, 14}, cols[] = {3, 3, 1, 7, 12, 12, 10, 16};
    for (int so = 0; so < 2; so++) {
        ts_graph *g = ts_graph_new("mp", 12);
        int xi = input(g, "X", "1x2x3x3"), outs[2];
        ts_attr at[] = {ts_attr_ints("kernel_shape", INTS(2, 2)), ts_attr_int("storage_order", so)};
        ts_error e = {0};
        cr_assert_geq(ts_graph_add_node(g, "MaxPool", NULL, &xi, 1, at, 2, 2, NULL, outs, &e), 0, "%s", e.msg);
        for (int o = 0; o < 2; o++) cr_assert_eq(ts_graph_add_output(g, outs[o], &e), TS_OK);
        ts_tensor *in[] = {tvals(TS_F32, "1x2x3x3", x)}, *out[2] = {0};
        run_all(g, TS_DOMAIN_F32, in, out);
        expect_t(out[0], TS_F32, y, 8, 0);
        expect_t(out[1], TS_I64, so ? cols : rows, 8, 0);
        ts_tensor_unref(out[0]);
        ts_tensor_unref(out[1]);
        ts_graph_free(g);
    }
    /* ties: the first tap in scan order; a window partly in the padding
     * takes the first tap inside the input */
    ts_graph *g = ts_graph_new("mp", 12);
    int xi = input(g, "X", "1x1x2x2"), outs[2];
    ts_attr at[] = {ts_attr_ints("kernel_shape", INTS(2, 2)), ts_attr_ints("pads", INTS(1, 1, 0, 0))};
    ts_error e = {0};
    cr_assert_geq(ts_graph_add_node(g, "MaxPool", NULL, &xi, 1, at, 2, 2, NULL, outs, &e), 0, "%s", e.msg);
    cr_assert_eq(ts_graph_add_output(g, outs[1], &e), TS_OK);
    ts_tensor *in[] = {tvals(TS_F32, "1x1x2x2", (const double[]){7, 7, 7, 7})}, *out[1] = {0};
    run_all(g, TS_DOMAIN_F32, in, out);
    expect_t(out[0], TS_I64, (const double[]){0, 0, 0, 0}, 4, 0);
    ts_tensor_unref(out[0]);
    ts_graph_free(g);

    /* pads past the kernel: windows wholly in the padding give the type's
     * lowest value and index -1 (uint8 [5 7], kernel 2, pads 3 before) */
    g = ts_graph_new("mp", 12);
    ts_shape s2 = shp("1x1x2");
    xi = ts_graph_add_input(g, "X", TS_U8, &s2, &e);
    ts_attr pa[] = {ts_attr_ints("kernel_shape", INTS(2)), ts_attr_ints("pads", INTS(3, 0))};
    cr_assert_geq(ts_graph_add_node(g, "MaxPool", NULL, &xi, 1, pa, 2, 2, NULL, outs, &e), 0, "%s", e.msg);
    for (int o = 0; o < 2; o++) cr_assert_eq(ts_graph_add_output(g, outs[o], &e), TS_OK);
    ts_tensor *pi[] = {tvals(TS_U8, "1x1x2", (const double[]){5, 7})}, *po[2] = {0};
    run_all(g, TS_DOMAIN_F32, pi, po);
    expect_t(po[0], TS_U8, (const double[]){0, 0, 5, 7}, 4, 0);
    expect_t(po[1], TS_I64, (const double[]){-1, -1, 0, 1}, 4, 0);
    ts_tensor_unref(po[0]);
    ts_tensor_unref(po[1]);
    ts_graph_free(g);

    /* uint8 (values past 127 stay unsigned) and int8 data keep their type */
    const ts_dtype types[] = {TS_U8, TS_I8};
    static const double u[] = {1, 200, 2, 8, 3, 7, 4, 6, 255}, s8[] = {-1, -9, -2, -8, -3, -7, -4, -6, -128};
    static const double wu[] = {200, 200, 8, 255}, ws[] = {-1, -2, -3, -3};
    for (int t = 0; t < 2; t++) {
        g = ts_graph_new("mp", 12);
        ts_shape s = shp("1x1x3x3");
        xi = ts_graph_add_input(g, "X", types[t], &s, &e);
        cr_assert_geq(xi, 0, "%s", e.msg);
        node(g, "MaxPool", &xi, 1, at, 1);
        ts_tensor *ti[] = {tvals(types[t], "1x1x3x3", t ? s8 : u)}, *to[1] = {0};
        run_all(g, TS_DOMAIN_F32, ti, to);
        expect_t(to[0], types[t], t ? ws : wu, 4, 0);
        ts_tensor_unref(to[0]);
        ts_graph_free(g);
    }
}

/* ---------------------------------------------------------------- errors */

static void expect_error(ts_graph *g, const char *op, const int *ins, int nin, const ts_attr *at, int na, int nout,
                         ts_status code, const char *text)
{
    ts_error e = {0};
    cr_assert_eq(try_node(g, op, ins, nin, at, na, nout, NULL, &e), code, "code %d: %s", e.code, e.msg);
    cr_assert(strstr(e.msg, text), "message '%s' lacks '%s'", e.msg, text);
    cr_assert(strstr(e.msg, op), "message '%s' does not name the operator", e.msg);
}

Test(errors, conv)
{
    static float w[4 * 3 * 3 * 3];
    ts_graph *g = ts_graph_new("e", 17);
    int x = input(g, "X", "1x3x5x5"), x1 = input(g, "X1", "1x1x2x2"), x4 = input(g, "X4", "1x4x5x5");
    int w423 = cst(g, "W423", "4x2x3x3", w), w433 = cst(g, "W433", "4x3x3x3", w), w133 = cst(g, "W133", "1x1x3x3", w);
    int b3 = cst(g, "B3", "3", w), bad = input(g, "I", "1x3");
    expect_error(g, "Conv", (int[]){x, w423}, 2, NULL, 0, 1, TS_ERR_INVALID, "X has 3 channels but W");
    ts_attr g2 = ts_attr_int("group", 2);
    expect_error(g, "Conv", (int[]){x, w423}, 2, &g2, 1, 1, TS_ERR_INVALID, "group 2 does not divide the 3 input channels");
    ts_attr g3 = ts_attr_int("group", 3);
    expect_error(g, "Conv", (int[]){x4, w423}, 2, &g3, 1, 1, TS_ERR_INVALID, "group 3 does not divide the 4 input");
    expect_error(g, "Conv", (int[]){x1, w133}, 2, NULL, 0, 1, TS_ERR_INVALID, "larger than spatial dimension");
    expect_error(g, "Conv", (int[]){x, w433, b3}, 3, NULL, 0, 1, TS_ERR_INVALID, "bias B must have shape 4");
    expect_error(g, "Conv", (int[]){bad, w433}, 2, NULL, 0, 1, TS_ERR_INVALID, "rank >= 3");
    ts_attr ks = ts_attr_ints("kernel_shape", INTS(2, 2));
    expect_error(g, "Conv", (int[]){x, w433}, 2, &ks, 1, 1, TS_ERR_INVALID, "kernel_shape[0] = 2 but the weight");
    ts_attr ap = ts_attr_string("auto_pad", "SAME");
    expect_error(g, "Conv", (int[]){x, w433}, 2, &ap, 1, 1, TS_ERR_INVALID, "'auto_pad': 'SAME' is not");
    ts_attr st = ts_attr_ints("strides", INTS(0, 1));
    expect_error(g, "Conv", (int[]){x, w433}, 2, &st, 1, 1, TS_ERR_INVALID, "'strides': value 0 is below 1");
    ts_attr pd = ts_attr_ints("pads", INTS(1, 1));
    expect_error(g, "Conv", (int[]){x, w433}, 2, &pd, 1, 1, TS_ERR_INVALID, "pads has 2 values, expected 4");
    expect_error(g, "ConvTranspose", (int[]){x, w423}, 2, NULL, 0, 1, TS_ERR_INVALID, "X has 3 channels but W");
    ts_attr osh = ts_attr_ints("output_shape", INTS(0, 5));
    expect_error(g, "ConvTranspose", (int[]){x4, w423}, 2, &osh, 1, 1, TS_ERR_INVALID, "values must be >= 1");
    ts_graph_free(g);
}

Test(errors, others)
{
    static float w[64];
    ts_graph *g = ts_graph_new("e", 17);
    int x = input(g, "X", "1x2x4x4"), a = input(g, "A", "2x3"), c2 = cst(g, "c2", "2", w), c3 = cst(g, "c3", "3", w);
    ts_attr k = ts_attr_ints("kernel_shape", INTS(2, 2));
    expect_error(g, "AveragePool", &x, 1, &k, 1, 2, TS_ERR_INVALID, "has 2 outputs, expected 1 to 1");
    expect_error(g, "MaxPool", &x, 1, NULL, 0, 1, TS_ERR_INVALID, "'kernel_shape' is required");
    ts_attr k5 = ts_attr_ints("kernel_shape", INTS(5, 5));
    expect_error(g, "AveragePool", &x, 1, &k5, 1, 1, TS_ERR_INVALID, "larger than spatial dimension 0 of 4");
    ts_attr k1 = ts_attr_ints("kernel_shape", INTS(2));
    expect_error(g, "AveragePool", &x, 1, &k1, 1, 1, TS_ERR_INVALID, "kernel_shape has 1 values, expected 2");
    expect_error(g, "MatMul", (int[]){a, a}, 2, NULL, 0, 1, TS_ERR_INVALID, "inner dimensions differ");
    expect_error(g, "Gemm", (int[]){a, a}, 2, NULL, 0, 1, TS_ERR_INVALID, "inner dimensions differ");
    ts_attr tb = ts_attr_int("transB", 1);
    expect_error(g, "Gemm", (int[]){a, a, c3}, 3, &tb, 1, 1, TS_ERR_INVALID, "does not broadcast to the 2x2 result");
    expect_error(g, "BatchNormalization", (int[]){x, c2, c2, c2, c2}, 5, NULL, 0, 3, TS_ERR_UNSUPPORTED,
                 "outputs running_mean and running_var need training_mode = 1");
    expect_error(g, "BatchNormalization", (int[]){x, c3, c2, c2, c2}, 5, NULL, 0, 1, TS_ERR_INVALID, "expected 2 (one per channel");
    expect_error(g, "LayerNormalization", (int[]){a, c2}, 2, NULL, 0, 1, TS_ERR_INVALID, "does not broadcast to the normalized shape 3");
    ts_attr ax = ts_attr_int("axis", 2);
    expect_error(g, "LayerNormalization", (int[]){a, c3}, 2, &ax, 1, 1, TS_ERR_INVALID, "axis 2 is out of range");
    expect_error(g, "GlobalAveragePool", &a, 1, NULL, 0, 1, TS_ERR_INVALID, "rank >= 3");
    ts_graph_free(g);

    /* MaxPool needs an order: refused in the exact domain */
    g = ts_graph_new("m", 17);
    int xi = input(g, "X", "1x1x2x2");
    node(g, "MaxPool", &xi, 1, &k, 1);
    double out[1], xv[4] = {1, 2, 3, 4};
    const double *xs[] = {xv};
    ts_error e = {0};
    cr_assert_lt(run_d(g, TS_DOMAIN_MODP, xs, out, NULL, &e), 0);
    cr_assert_eq(e.code, TS_ERR_UNSUPPORTED);
    cr_assert(strstr(e.msg, "MaxPool"), "%s", e.msg);
    ts_graph_free(g);
}

/* ------------------------------------------------- descriptors, domains */

Test(descriptors, flags_and_flops)
{
    const char *exact[] = {"Conv", "ConvTranspose", "MatMul", "Gemm", "AveragePool", "GlobalAveragePool"};
    const char *floaty[] = {"MaxPool", "GlobalMaxPool", "BatchNormalization", "LayerNormalization"};
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++) {
        const ts_op_desc *d = ts_op_find(exact[i]);
        cr_assert_not_null(d, "%s is not registered", exact[i]);
        cr_assert(d->flags & TS_OP_EXACT, "%s should be exact", exact[i]);
    }
    for (size_t i = 0; i < sizeof floaty / sizeof *floaty; i++) {
        const ts_op_desc *d = ts_op_find(floaty[i]);
        cr_assert_not_null(d, "%s is not registered", floaty[i]);
        cr_assert_not(d->flags & TS_OP_EXACT, "%s cannot be exact", floaty[i]);
    }
    cr_assert_eq(ts_op_find("Conv")->linear_inputs, 0x7); /* X, W and the bias: degree 1 in each (docs/pet.md) */
    cr_assert_eq(ts_op_find("MatMul")->linear_inputs, 0x3);
    cr_assert_not_null(ts_op_find("Conv")->expr);
    /* Conv 1x64x56x56, 64 filters 3x3 pad 1: 2 * 64*56*56 * 64*9 flops */
    ts_graph *g = ts_graph_new("f", 17);
    static float w[64 * 64 * 9];
    int ins[] = {input(g, "X", "1x64x56x56"), cst(g, "W", "64x64x3x3", w)};
    ts_attr p = ts_attr_ints("pads", INTS(1, 1, 1, 1));
    node(g, "Conv", ins, 2, &p, 1);
    ts_graph_stats st;
    ts_graph_stats_get(g, &st);
    cr_assert_float_eq(st.flops, 2.0 * 64 * 56 * 56 * 64 * 9, 1);
    ts_graph_free(g);
}

Test(domains, f32_and_f64_agree)
{
    /* ConvTranspose (grouped, strided) -> MatMul -> LayerNorm chain */
    static float w[4 * 2 * 3 * 3], m[6 * 5];
    for (int i = 0; i < 72; i++) w[i] = (float)sin(i * 0.7);
    for (int i = 0; i < 30; i++) m[i] = (float)cos(i * 1.3);
    static const float one[5] = {1, 1, 1, 1, 1};
    ts_graph *g = ts_graph_new("chain", 17);
    int x = input(g, "X", "1x4x3x3"), y = -1, z = -1, ys[1] = {-1};
    ts_error e = {0};
    ts_attr at[] = {ts_attr_ints("strides", INTS(2, 2)), ts_attr_int("group", 2), ts_attr_ints("pads", INTS(1, 1, 1, 1))};
    cr_assert_eq(try_node(g, "ConvTranspose", (int[]){x, cst(g, "W", "4x2x3x3", w)}, 2, at, 3, 1, &y, &e), TS_OK, "%s", e.msg);
    expect_shape(&g->values[y].shape, "1x4x5x5");
    cr_assert_eq(try_node(g, "MatMul", (int[]){y, cst(g, "M", "5x6", m)}, 2, NULL, 0, 1, &z, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(try_node(g, "LayerNormalization", (int[]){z, cst(g, "S", "1", one)}, 2, NULL, 0, 1, ys, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_add_output(g, ys[0], &e), TS_OK);
    static double xv[36], o32[120], o64[120];
    for (int i = 0; i < 36; i++) xv[i] = cos(i * 0.37);
    const double *xs[] = {xv};
    int64_t n = run(g, TS_DOMAIN_F32, xs, o32, NULL);
    cr_assert_eq(n, 120);
    cr_assert_eq(run(g, TS_DOMAIN_F64, xs, o64, NULL), 120);
    for (int i = 0; i < 120; i++) cr_assert(fabs(o32[i] - o64[i]) < 1e-4, "%d: %g vs %g", i, o32[i], o64[i]);
    ts_graph_free(g);
}
