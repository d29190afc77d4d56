/* float16 / bfloat16 graphs in the fast runtime (src/exec/half.c): the
 * conversions against hand values and ts_dtype_round; a small CNN and a
 * small transformer block in 16 bits run by fast kernels only
 * (fallback_steps 0), with their weights held 16-bit (the plan's
 * weight_bytes about half the float32 plan's), and matching the reference
 * interpreter, which rounds every node's output to its 16-bit type as ONNX
 * does, to 2 units in the last place of the output's scale; two chains
 * whose intermediates must be rounded, exactly. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dnnl.h>
#include "dnnl/dnnl_conv.h"
#include "exec/half.h"
#include "exec/plan_internal.h"
#include "tsopt.h"

static uint16_t narrow1(ts_dtype t, float v)
{
    uint16_t h;
    xhalf_narrow(t, &v, &h, 1);
    return h;
}

Test(half, hand_values)
{
    cr_assert_eq(narrow1(TS_F16, 1.0f), 0x3C00);
    cr_assert_eq(narrow1(TS_F16, -2.0f), 0xC000);
    cr_assert_eq(narrow1(TS_F16, 65504.0f), 0x7BFF);
    cr_assert_eq(narrow1(TS_F16, 65520.0f), 0x7C00);         /* the tie past the largest: infinity */
    cr_assert_eq(narrow1(TS_F16, 0x1p-24f), 0x0001);         /* least subnormal */
    cr_assert_eq(narrow1(TS_F16, 0x1p-25f), 0x0000);         /* tie to even: zero */
    cr_assert_eq(narrow1(TS_F16, 0x1.8p-24f), 0x0002);       /* 1.5 ulp: tie to even, 2 */
    cr_assert_eq(narrow1(TS_F16, 0.1f), 0x2E66);
    cr_assert_eq(narrow1(TS_F16, 1.0f + 0x1p-11f), 0x3C00);  /* tie: even mantissa kept */
    cr_assert_eq(narrow1(TS_F16, 1.0f + 0x3p-11f), 0x3C02);  /* tie: rounds up to even */
    cr_assert_eq(narrow1(TS_BF16, 1.0f), 0x3F80);
    cr_assert_eq(narrow1(TS_BF16, 1.0f + 0x1p-8f), 0x3F80);
    cr_assert_eq(narrow1(TS_BF16, 1.0f + 0x3p-8f), 0x3F82);
    cr_assert_eq(narrow1(TS_BF16, -0.0f), 0x8000);
    float nan = NAN, w;
    uint16_t h = narrow1(TS_F16, nan);
    xhalf_widen(TS_F16, &h, &w, 1);
    cr_assert(isnan(w));
    h = narrow1(TS_BF16, nan);
    xhalf_widen(TS_BF16, &h, &w, 1);
    cr_assert(isnan(w));
}

/* Every conversion path (vector body, scalar tail, threads) agrees with
 * ts_dtype_round on values over float16's whole range, on each instruction
 * set the CPU has: AVX-512, AVX2 + F16C (older Zen: before, the scalar
 * code), the scalar code (xhalf_isa_force). */
Test(half, sweep_matches_dtype_round)
{
    enum { N = 200003 };
    static float src[N], back[N], r1[N], r2[N];
    static uint16_t h[N];
    uint64_t rng = 7;
    ts_dtype types[] = {TS_F16, TS_BF16};
    const bool has[3] = {true, __builtin_cpu_supports("avx2") && xhalf_cpu_f16c(),
                         __builtin_cpu_supports("avx512f")};
    for (int level = 2; level >= 0; level--) {
        if (!has[level]) continue;
        xhalf_isa_force(level);
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < N; i++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                double m = (double)(rng >> 11) / 9007199254740992.0 - 0.5;
                src[i] = (float)ldexp(m, (int)((rng >> 3) % 44) - 28);
            }
            xhalf_narrow(types[k], src, h, N);
            xhalf_widen(types[k], h, back, N);
            memcpy(r1, src, sizeof r1);
            xhalf_round(types[k], r1, N);
            xhalf_round_into(types[k], src, r2, N - 5); /* a tail past the vectors */
            for (int i = 0; i < N; i++) {
                double want = ts_dtype_round(types[k], src[i]);
                cr_assert_eq((double)back[i], want, "level %d %s: %a -> %a, want %a", level, ts_dtype_name(types[k]),
                             src[i], back[i], want);
                cr_assert_eq((double)r1[i], want, "level %d %s round: %a -> %a", level, ts_dtype_name(types[k]), src[i],
                             r1[i]);
                if (i < N - 5)
                    cr_assert_eq((double)r2[i], want, "level %d %s round_into: %a -> %a", level,
                                 ts_dtype_name(types[k]), src[i], r2[i]);
            }
            /* a conv's residual tail (half.sum): relu(round(round(y) + r)), r on the grid */
            memcpy(r1, src, sizeof r1);
            xhalf_round_add(types[k], r1, back, N - 3, k == 0);
            for (int i = 0; i < N - 3; i++) {
                float sum = (float)ts_dtype_round(types[k], src[i]) + back[i]; /* in float32, as the plan adds */
                double v = ts_dtype_round(types[k], sum);
                double want = k == 0 ? (v > 0 ? v : 0.0) : v;
                cr_assert_eq((double)r1[i], want, "level %d %s round_add: %a + %a -> %a, want %a", level,
                             ts_dtype_name(types[k]), src[i], back[i], r1[i], want);
                if (k == 0) cr_assert(!signbit(r1[i]), "level %d round_add relu: -0 (%a + %a)", level, src[i], back[i]);
            }
        }
    }
    xhalf_isa_force(-1);
}

/* ---- graphs built twice: in the 16-bit type, and in float32 holding the
 * same (rounded) values */

typedef struct gb {
    ts_graph *g;
    ts_dtype dt;    /* the graph's float type */
    ts_dtype round; /* the values' precision */
    uint64_t rng;
} gb;

static ts_shape shp(const char *d)
{
    ts_shape s = {0};
    ts_error e = {0};
    if (*d) cr_assert_eq(ts_shape_parse(d, &s, &e), TS_OK, "%s", e.msg);
    return s;
}

static int cst(gb *b, const char *dims, double lo, double hi)
{
    ts_error e = {0};
    ts_shape s = shp(dims);
    ts_tensor *t = ts_tensor_new(b->dt, &s, &e);
    cr_assert_not_null(t);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) {
        b->rng = b->rng * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(b->rng >> 11) / 9007199254740992.0;
        ts_tensor_set_f64(t, i, ts_dtype_round(b->round, lo + (hi - lo) * u));
    }
    char name[32];
    snprintf(name, sizeof name, "c%d", b->g->nvalues);
    int v = ts_graph_add_constant(b->g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert_geq(v, 0, "%s", e.msg);
    return v;
}

static int node(gb *b, const char *op, const int *ins, int nin, const ts_attr *at, int na)
{
    ts_error e = {0};
    int out;
    cr_assert_geq(ts_graph_add_node(b->g, op, NULL, ins, nin, at, na, 1, NULL, &out, &e), 0, "%s: %s", op, e.msg);
    return out;
}
#define N(op, ...) node(b, op, (const int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), NULL, 0)

/* Conv 3x3 + Relu, 1x1 Conv, residual Add, MaxPool, GlobalAveragePool,
 * Flatten, Gemm, Softmax: ResNet's operators. */
static void build_cnn(gb *b)
{
    ts_error e = {0};
    ts_shape xs = shp("1x32x12x12");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    cr_assert_geq(x, 0);
    ts_attr pads = ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4);
    int c1 = node(b, "Conv", (const int[]){x, cst(b, "64x32x3x3", -0.1, 0.1), cst(b, "64", -0.5, 0.5)}, 3, &pads, 1);
    int r1 = N("Relu", c1);
    int c2 = N("Conv", r1, cst(b, "64x64x1x1", -0.2, 0.2));
    int a = N("Add", c2, r1);
    int r2 = N("Relu", a);
    ts_attr mp[] = {ts_attr_ints("kernel_shape", (int64_t[]){2, 2}, 2), ts_attr_ints("strides", (int64_t[]){2, 2}, 2)};
    int p = node(b, "MaxPool", &r2, 1, mp, 2);
    int gp = N("GlobalAveragePool", p);
    int f = N("Flatten", gp);
    ts_attr tb = ts_attr_int("transB", 1);
    int fc = node(b, "Gemm", (const int[]){f, cst(b, "300x64", -0.3, 0.3), cst(b, "300", -0.1, 0.1)}, 3, &tb, 1);
    int sm = N("Softmax", fc);
    cr_assert_eq(ts_graph_add_output(b->g, sm, &e), TS_OK);
    cr_assert_eq(ts_graph_add_output(b->g, fc, &e), TS_OK);
}

/* MatMul + bias, GELU in erf form, MatMul, residual, LayerNormalization,
 * Reshape/Transpose, attention-like Softmax: ViT's operators. */
static void build_block(gb *b)
{
    ts_error e = {0};
    ts_shape xs = shp("2x16x64");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    cr_assert_geq(x, 0);
    int h = N("Add", N("MatMul", x, cst(b, "64x256", -0.2, 0.2)), cst(b, "256", -0.1, 0.1));
    int er = N("Erf", N("Mul", h, cst(b, "", 0.70710678, 0.70710678)));
    int ge = N("Mul", N("Mul", h, N("Add", er, cst(b, "", 1, 1))), cst(b, "", 0.5, 0.5));
    int o = N("Add", N("MatMul", ge, cst(b, "256x64", -0.1, 0.1)), x);
    ts_attr ax = ts_attr_int("axis", -1);
    int ln = node(b, "LayerNormalization", (const int[]){o, cst(b, "64", 0.5, 1.5), cst(b, "64", -0.2, 0.2)}, 3, &ax, 1);
    int64_t dims[] = {2, 16, 4, 16};
    ts_error e2 = {0};
    ts_shape ds = shp("4");
    ts_tensor *dt = ts_tensor_new(TS_I64, &ds, &e2);
    memcpy(dt->data, dims, sizeof dims);
    int dv = ts_graph_add_constant(b->g, "dims", dt, &e2);
    ts_tensor_unref(dt);
    int rs = N("Reshape", ln, dv);
    ts_attr perm = ts_attr_ints("perm", (int64_t[]){0, 2, 1, 3}, 4);
    int tr = node(b, "Transpose", &rs, 1, &perm, 1);
    int sc = N("MatMul", tr, cst(b, "16x16", -0.5, 0.5));
    int sm = node(b, "Softmax", &sc, 1, &ax, 1);
    cr_assert_eq(ts_graph_add_output(b->g, sm, &e), TS_OK);
    cr_assert_eq(ts_graph_add_output(b->g, ln, &e), TS_OK);
}

/* These tests check ONNX's rounding of every node, the plan of a CPU
 * without native float16 (half.h xhalf_native_f16), whatever this CPU has;
 * the native plan's tests below force the decision on. */
__attribute__((constructor)) static void per_node_rounding(void) { setenv("TSOPT_HALF_NATIVE", "0", 1); }

typedef struct run_out {
    ts_tensor *out[2];
    ts_plan_stats st;
} run_out;

/* Plans and runs g on x (its dtype), copying the outputs out; `skip` as
 * ts_plan_opts.skip. */
static run_out run_skip(const ts_graph *g, const ts_tensor *x, const char *skip)
{
    ts_error e = {0};
    ts_plan *p = NULL;
    ts_plan_opts o = {.threads = 2, .skip = skip};
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    run_out r = {0};
    ts_plan_stats_get(p, &r.st);
    for (int i = 0; i < g->noutputs; i++) {
        r.out[i] = ts_tensor_new(g->values[g->outputs[i]].dtype, &g->values[g->outputs[i]].shape, &e);
        cr_assert_not_null(r.out[i]);
    }
    ts_tensor *in[] = {(ts_tensor *)x};
    cr_assert_eq(ts_plan_run(p, in, r.out, &e), TS_OK, "%s", e.msg);
    ts_plan_free(p);
    return r;
}

static run_out run(const ts_graph *g, const ts_tensor *x) { return run_skip(g, x, NULL); }

/* The weight chunks and the Winograd budget act on the layouts oneDNN
 * gives its AVX-512 kernels (a product's BA16a64b panels, 16-channel conv
 * blocks, Winograd: avx512_core only in oneDNN 2.6); with less (an AVX2
 * Zen, DNNL_MAX_CPU_ISA=AVX2) those plans widen whole, as they must, and
 * these tests have nothing to assert.  Called first, before anything is
 * allocated (a skipped test must not leak under ASan). */
static void skip_without_avx512_layouts(void)
{
    const unsigned a512 = (unsigned)dnnl_cpu_isa_avx512_core;
    if (((unsigned)dnnl_get_effective_cpu_isa() & a512) != a512)
        cr_skip_test("oneDNN runs below avx512_core here: no chunked or Winograd layouts to check");
}

/* One unit in the last place of t at |v|. */
static double ulp(ts_dtype t, double v)
{
    int ex;
    frexp(fabs(v) > 0x1p-14 ? v : 0x1p-14, &ex);
    return ldexp(1.0, ex - (t == TS_F16 ? 11 : 8));
}

static void check_model(ts_dtype half, void (*build)(gb *), const char *dims)
{
    ts_error e = {0};
    gb h = {ts_graph_new("h", 17), half, half, 11}, f = {ts_graph_new("f", 17), TS_F32, half, 11};
    build(&h);
    build(&f);
    ts_shape xs = shp(dims);
    ts_tensor *xh = ts_tensor_new(half, &xs, &e), *xf = ts_tensor_new(TS_F32, &xs, &e);
    uint64_t rng = 3;
    ts_tensor_fill_random(xf, &rng, -1, 1);
    for (int64_t i = 0; i < ts_tensor_numel(xf); i++) {
        double v = ts_dtype_round(half, ts_tensor_get_f64(xf, i));
        ts_tensor_set_f64(xf, i, v);
        ts_tensor_set_f64(xh, i, v);
    }
    run_out rh = run(h.g, xh), rf = run(f.g, xf);
    cr_assert_eq(rh.st.fallback_steps, 0, "%s: %d steps on the reference kernel", ts_dtype_name(half),
                 rh.st.fallback_steps);
    /* no float32 copy of the weights: the 16-bit plan holds about half
     * (small constants, below half.c's 64 KiB, stay float32) */
    cr_assert_leq((double)rh.st.weight_bytes, 0.6 * (double)rf.st.weight_bytes, "%s: weights %zu vs float32 %zu",
                  ts_dtype_name(half), rh.st.weight_bytes, rf.st.weight_bytes);
    /* against the reference interpreter, which rounds every node's output
     * to the 16-bit type as ONNX types it: equal but where float32 and
     * float64 sums fall on different sides of a rounding, which moves an
     * output by an ulp or two of its scale */
    ts_tensor *x64 = ts_tensor_new(TS_F64, &xs, &e), *ref[2] = {0};
    for (int64_t i = 0; i < ts_tensor_numel(xf); i++) ts_tensor_set_f64(x64, i, ts_tensor_get_f64(xf, i));
    cr_assert_eq(ts_graph_run_reference(h.g, TS_DOMAIN_F64, &x64, ref, &e), TS_OK, "%s", e.msg);
    for (int o = 0; o < h.g->noutputs; o++) {
        cr_assert_eq(rh.out[o]->dtype, half);
        double scale = 0;
        for (int64_t i = 0; i < ts_tensor_numel(ref[o]); i++) scale = fmax(scale, fabs(ts_tensor_get_f64(ref[o], i)));
        for (int64_t i = 0; i < ts_tensor_numel(ref[o]); i++) {
            double want = ts_tensor_get_f64(ref[o], i), got = ts_tensor_get_f64(rh.out[o], i);
            cr_assert_leq(fabs(got - want), 2 * ulp(half, scale), "%s output %d [%lld]: %g, reference %g (scale %g)",
                          ts_dtype_name(half), o, (long long)i, got, want, scale);
        }
        ts_tensor_unref(rh.out[o]);
        ts_tensor_unref(rf.out[o]);
        ts_tensor_unref(ref[o]);
    }
    ts_tensor_unref(x64);
    ts_tensor_unref(xh);
    ts_tensor_unref(xf);
    ts_graph_free(h.g);
    ts_graph_free(f.g);
}

Test(half, cnn_float16) { check_model(TS_F16, build_cnn, "1x32x12x12"); }
Test(half, cnn_bfloat16) { check_model(TS_BF16, build_cnn, "1x32x12x12"); }
Test(half, block_float16) { check_model(TS_F16, build_block, "2x16x64"); }
Test(half, block_bfloat16) { check_model(TS_BF16, build_block, "2x16x64"); }

/* ViT's patch embedding in small (dnnl.patch: 3 x 16 x 16 patches as rows
 * times the weight, 256 x 768 values) then Flatten: its packed weight is
 * stored 16-bit and widened per run like the others' (half.c widenable;
 * kept float32, the weights would be 0.74 of the float32 plan's). */
static void build_patch(gb *b)
{
    ts_error e = {0};
    ts_shape xs = shp("1x3x64x64");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    cr_assert_geq(x, 0);
    ts_attr st = ts_attr_ints("strides", (int64_t[]){16, 16}, 2);
    int c = node(b, "Conv", (const int[]){x, cst(b, "256x3x16x16", -0.05, 0.05), cst(b, "256", -0.5, 0.5)}, 3, &st, 1);
    cr_assert_eq(ts_graph_add_output(b->g, N("Flatten", c), &e), TS_OK);
}

Test(half, patch_float16) { check_model(TS_F16, build_patch, "1x3x64x64"); }

/* y = Relu(x * 3 - 1) on hand values: the Cast-free 16-bit path end to end,
 * exact (every value is a float16 and a bfloat16). */
Test(half, relu_hand_values)
{
    ts_dtype types[] = {TS_F16, TS_BF16};
    for (int k = 0; k < 2; k++) {
        ts_error e = {0};
        gb bb = {ts_graph_new("r", 17), types[k], types[k], 1}, *b = &bb;
        ts_shape s = shp("4");
        int x = ts_graph_add_input(b->g, "x", b->dt, &s, &e);
        int y = N("Relu", N("Sub", N("Mul", x, cst(b, "", 3, 3)), cst(b, "", 1, 1)));
        cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
        ts_tensor *xt = ts_tensor_new(types[k], &s, &e);
        double xv[] = {-1, 0.5, 1, 2.25}, yv[] = {0, 0.5, 2, 5.75};
        for (int i = 0; i < 4; i++) ts_tensor_set_f64(xt, i, xv[i]);
        run_out r = run(b->g, xt);
        for (int i = 0; i < 4; i++) cr_assert_eq(ts_tensor_get_f64(r.out[0], i), yv[i]);
        ts_tensor_unref(r.out[0]);
        ts_tensor_unref(xt);
        ts_graph_free(b->g);
    }
}

/* A float32 graph with a 16-bit middle (convert_fp16.py --keep-io-types):
 * the Cast to 16 bits computes in float32 but still rounds, as ONNX says. */
Test(half, cast_in_the_model_rounds)
{
    ts_dtype types[] = {TS_F16, TS_BF16};
    for (int k = 0; k < 2; k++) {
        ts_error e = {0};
        gb bb = {ts_graph_new("c", 17), TS_F32, TS_F32, 1}, *b = &bb;
        ts_shape s = shp("3");
        int x = ts_graph_add_input(b->g, "x", TS_F32, &s, &e);
        ts_attr to16 = ts_attr_int("to", types[k] == TS_F16 ? 10 : 16), to32 = ts_attr_int("to", 1);
        int h = node(b, "Cast", &x, 1, &to16, 1);
        int r = N("Relu", h);
        int y = node(b, "Cast", &r, 1, &to32, 1);
        cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
        ts_tensor *xt = ts_tensor_new(TS_F32, &s, &e);
        double xv[] = {0.1, -3.3, 1000.7};
        for (int i = 0; i < 3; i++) ts_tensor_set_f64(xt, i, xv[i]);
        run_out ro = run(b->g, xt);
        cr_assert_eq(ro.st.fallback_steps, 0);
        for (int i = 0; i < 3; i++) {
            double want = xv[i] > 0 ? ts_dtype_round(types[k], (float)xv[i]) : 0;
            cr_assert_eq(ts_tensor_get_f64(ro.out[0], i), want, "%s [%d]: %.9g, want %.9g", ts_dtype_name(types[k]), i,
                         ts_tensor_get_f64(ro.out[0], i), want);
        }
        ts_tensor_unref(ro.out[0]);
        ts_tensor_unref(xt);
        ts_graph_free(b->g);
    }
}

/* ---- every 16-bit value rounded where it is produced, as ONNX types it:
 * the reference interpreter (float64, rounding each node's output to its
 * type) and the fast plan must agree exactly.  Inputs and weights are
 * multiples of 1/64, 1/16 or 1/8, small enough that every product and sum is
 * exact in float32 and float64 alike: the only roundings are the 16-bit
 * ones, so a value the plan leaves unrounded shows as a difference. */

static gb grid_graph(ts_dtype dt) { return (gb){ts_graph_new("g", 17), dt, dt, 5}; }

/* A constant of multiples of 1/q in [-1, 1]. */
static int grid_cst(gb *b, const char *dims, double q)
{
    ts_error e = {0};
    ts_shape s = shp(dims);
    ts_tensor *t = ts_tensor_new(b->dt, &s, &e);
    cr_assert_not_null(t);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) {
        b->rng = b->rng * 6364136223846793005ull + 1442695040888963407ull;
        ts_tensor_set_f64(t, i, (double)((int64_t)((b->rng >> 33) % (uint64_t)(2 * q + 1)) - (int64_t)q) / q);
    }
    char name[32];
    snprintf(name, sizeof name, "g%d", b->g->nvalues);
    int v = ts_graph_add_constant(b->g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert_geq(v, 0, "%s", e.msg);
    return v;
}

/* Runs g on x (multiples of 1/16 in [-1, 1]) by the plan and by the
 * reference; asserts equality; returns how many outputs differ from what
 * an unrounded intermediate would give (`loose`, the same graph with every
 * intermediate float32, run by the reference). */
static void check_exact_skip(const gb *b, const gb *loose, const char *dims, int min_fused, const char *skip)
{
    ts_error e = {0};
    ts_shape xs = shp(dims);
    ts_tensor *x = ts_tensor_new(b->dt, &xs, &e), *x64 = ts_tensor_new(TS_F64, &xs, &e);
    uint64_t rng = 9;
    for (int64_t i = 0; i < ts_tensor_numel(x); i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        double v = (double)((int64_t)((rng >> 33) % 33) - 16) / 16;
        ts_tensor_set_f64(x, i, v);
        ts_tensor_set_f64(x64, i, v);
    }
    run_out r = run_skip(b->g, x, skip);
    if (skip) /* the skipped kernel's nodes fall back to the reference kernel */
        cr_assert_gt(r.st.fallback_steps, 0);
    else
        cr_assert_eq(r.st.fallback_steps, 0);
    cr_assert_geq(r.st.fused_nodes, min_fused, "fused nodes %d", r.st.fused_nodes);
    ts_tensor *ref = NULL, *unrounded = NULL;
    cr_assert_eq(ts_graph_run_reference(b->g, TS_DOMAIN_F64, &x64, &ref, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_run_reference(loose->g, TS_DOMAIN_F64, &x64, &unrounded, &e), TS_OK, "%s", e.msg);
    int differ = 0;
    for (int64_t i = 0; i < ts_tensor_numel(ref); i++) {
        double got = ts_tensor_get_f64(r.out[0], i), want = ts_tensor_get_f64(ref, i);
        cr_assert_eq(got, want, "%s [%lld]: %.9g, reference %.9g (unrounded intermediate: %.9g)",
                     ts_dtype_name(b->dt), (long long)i, got, want, ts_tensor_get_f64(unrounded, i));
        differ += ts_tensor_get_f64(unrounded, i) != want;
    }
    cr_assert_gt(differ, 0, "the rounding of the intermediate changes no output: the test cannot fail");
    ts_tensor_unref(r.out[0]);
    ts_tensor_unref(ref);
    ts_tensor_unref(unrounded);
    ts_tensor_unref(x);
    ts_tensor_unref(x64);
}

static void check_exact(const gb *b, const gb *loose, const char *dims, int min_fused)
{
    check_exact_skip(b, loose, dims, min_fused, NULL);
}

/* bfloat16 Gemm -> Cast to float32 (the fuzzer's half family, seed 8): the
 * Gemm's output is bfloat16, so the float32 result is the rounded product.
 * `loose` casts to float32 first and multiplies in float32. */
static void build_gemm_cast(gb *b, bool loose)
{
    ts_error e = {0};
    ts_shape xs = shp("3x16");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    ts_attr to32 = ts_attr_int("to", 1), tb = ts_attr_int("transB", 1);
    int w = grid_cst(b, "5x16", 16), c = grid_cst(b, "5", 8);
    int y;
    if (loose) {
        int x32 = node(b, "Cast", &x, 1, &to32, 1), w32 = node(b, "Cast", &w, 1, &to32, 1);
        int c32 = node(b, "Cast", &c, 1, &to32, 1);
        y = node(b, "Gemm", (const int[]){x32, w32, c32}, 3, &tb, 1);
    } else {
        int gm = node(b, "Gemm", (const int[]){x, w, c}, 3, &tb, 1);
        y = node(b, "Cast", &gm, 1, &to32, 1);
    }
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

Test(half, gemm_bf16_then_cast_rounds_the_product)
{
    gb b = grid_graph(TS_BF16), l = grid_graph(TS_BF16);
    build_gemm_cast(&b, false);
    build_gemm_cast(&l, true);
    check_exact(&b, &l, "3x16", 0);
    ts_graph_free(b.g);
    ts_graph_free(l.g);
}

/* float16 Conv 3x3 -> Relu -> Conv 1x1: the first Conv's output is rounded
 * (Conv + Relu stay one step: Relu commutes with the rounding).  `loose`
 * runs the same in float32 with a float16 output. */
static void build_conv_chain(gb *b, ts_dtype out)
{
    ts_error e = {0};
    ts_shape xs = shp("1x4x6x6");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    ts_attr pads = ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4), to = ts_attr_int("to", out == TS_F16 ? 10 : 1);
    int c1 = node(b, "Conv", (const int[]){x, grid_cst(b, "8x4x3x3", 64), grid_cst(b, "8", 16)}, 3, &pads, 1);
    int c2 = N("Conv", N("Relu", c1), grid_cst(b, "8x8x1x1", 8));
    if (b->dt != out) c2 = node(b, "Cast", &c2, 1, &to, 1);
    cr_assert_eq(ts_graph_add_output(b->g, c2, &e), TS_OK);
}

Test(half, conv_relu_conv_f16_rounds_between)
{
    gb b = grid_graph(TS_F16), l = grid_graph(TS_F32);
    build_conv_chain(&b, TS_F16);
    build_conv_chain(&l, TS_F16);
    check_exact(&b, &l, "1x4x6x6", 1);
    ts_graph_free(b.g);
    ts_graph_free(l.g);
}

/* An element-wise chain x * a * b + c, then * d (broadcast constants): one
 * vec.eltwise step whose program rounds after every node (vec_fuse.c), as
 * node-by-node steps would.  `loose` computes the chain in float32 with a
 * 16-bit output. */
static void build_eltwise_chain(gb *b, ts_dtype out)
{
    ts_error e = {0};
    ts_shape xs = shp("3x40");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    ts_attr to = ts_attr_int("to", out == TS_F16 ? 10 : 16);
    int m = N("Mul", N("Mul", x, grid_cst(b, "40", 64)), grid_cst(b, "1x40", 64));
    int y = N("Mul", N("Add", m, grid_cst(b, "3x40", 8)), grid_cst(b, "40", 64));
    if (b->dt != out) y = node(b, "Cast", &y, 1, &to, 1);
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

Test(half, eltwise_chain_fused_rounds_each_node)
{
    ts_dtype types[] = {TS_F16, TS_BF16};
    for (int k = 0; k < 2; k++) {
        gb b = grid_graph(types[k]), l = grid_graph(TS_F32);
        build_eltwise_chain(&b, types[k]);
        build_eltwise_chain(&l, types[k]);
        check_exact(&b, &l, "3x40", 3); /* the four nodes in one step */
        ts_graph_free(b.g);
        ts_graph_free(l.g);
    }
}

/* The same chain with vec.eltwise skipped: its nodes run on the reference
 * kernel, whose steps round too (they were left unwrapped, so a 16-bit graph
 * kept float32's values wherever a node fell back; tsopt fuzz seed 11). */
Test(half, eltwise_chain_on_the_reference_kernel_rounds_each_node)
{
    ts_dtype types[] = {TS_F16, TS_BF16};
    for (int k = 0; k < 2; k++) {
        gb b = grid_graph(types[k]), l = grid_graph(TS_F32);
        build_eltwise_chain(&b, types[k]);
        build_eltwise_chain(&l, types[k]);
        check_exact_skip(&b, &l, "3x40", 0, "vec.eltwise");
        ts_graph_free(b.g);
        ts_graph_free(l.g);
    }
}

/* LayerNorm written out as PyTorch exports it before opset 17 (ViT's):
 * one vec.layernorm.ops step rounding each of its nine nodes' outputs
 * (ln_row_round) must equal the node-by-node plan (TSOPT_SKIP=half.fuse)
 * exactly, and the reference to 2 ulps of scale; without the roundings
 * (half.round skipped) some output differs.  Rows of 96 and of 100 (float16
 * on AVX-512 fuses the element-wise passes of the first 96: ln_tail_f16;
 * bit-equal to the plan with ln.f16_fused skipped). */
Test(half, layernorm_ops_fused_rounds_each_node)
{
    ts_dtype types[] = {TS_F16, TS_BF16, TS_F16};
    const char *widths[] = {"512x96", "512x96", "300x100"}, *gdims[] = {"96", "96", "100"};
    for (int k = 0; k < 3; k++) {
        ts_error e = {0};
        gb bb = {ts_graph_new("ln", 17), types[k], types[k], 21}, *b = &bb;
        ts_shape xs = shp(widths[k]);
        int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
        ts_attr ax = ts_attr_ints("axes", (int64_t[]){-1}, 1);
        int mean = node(b, "ReduceMean", &x, 1, &ax, 1);
        int d = N("Sub", x, mean);
        int sq = N("Pow", d, cst(b, "", 2, 2));
        int var = node(b, "ReduceMean", &sq, 1, &ax, 1);
        int sd = N("Sqrt", N("Add", var, cst(b, "", 1e-5, 1e-5)));
        int y = N("Add", N("Mul", N("Div", d, sd), cst(b, gdims[k], 0.5, 1.5)), cst(b, gdims[k], -0.5, 0.5));
        cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
        ts_tensor *xt = ts_tensor_new(b->dt, &xs, &e), *x64 = ts_tensor_new(TS_F64, &xs, &e);
        uint64_t rng = 5;
        for (int64_t i = 0; i < ts_tensor_numel(xt); i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            double v = ts_dtype_round(b->dt, 3.0 * ((double)(rng >> 11) / 9007199254740992.0) - 1.0);
            ts_tensor_set_f64(xt, i, v);
            ts_tensor_set_f64(x64, i, v);
        }
        run_out fused = run(b->g, xt), nodes = run_skip(b->g, xt, "half.fuse"),
                loose = run_skip(b->g, xt, "half.round"), apart = run_skip(b->g, xt, "ln.f16_fused");
        cr_assert_eq(memcmp(fused.out[0]->data, apart.out[0]->data, fused.out[0]->nbytes), 0,
                     "%s: element-wise passes fused and apart differ", ts_dtype_name(b->dt));
        ts_tensor_unref(apart.out[0]);
        cr_assert_geq(fused.st.fused_nodes, 8, "%s: fused nodes %d", ts_dtype_name(b->dt), fused.st.fused_nodes);
        cr_assert_eq(nodes.st.fused_nodes, 0);
        ts_tensor *ref = NULL;
        cr_assert_eq(ts_graph_run_reference(b->g, TS_DOMAIN_F64, &x64, &ref, &e), TS_OK, "%s", e.msg);
        double scale = 0;
        for (int64_t i = 0; i < ts_tensor_numel(ref); i++) scale = fmax(scale, fabs(ts_tensor_get_f64(ref, i)));
        int differ = 0;
        for (int64_t i = 0; i < ts_tensor_numel(ref); i++) {
            double got = ts_tensor_get_f64(fused.out[0], i);
            cr_assert_eq(got, ts_tensor_get_f64(nodes.out[0], i), "%s [%lld]: fused %.9g, node by node %.9g",
                         ts_dtype_name(b->dt), (long long)i, got, ts_tensor_get_f64(nodes.out[0], i));
            cr_assert_leq(fabs(got - ts_tensor_get_f64(ref, i)), 2 * ulp(b->dt, scale));
            differ += ts_tensor_get_f64(loose.out[0], i) != got;
        }
        cr_assert_gt(differ, 0, "%s: the roundings change no output: the test cannot fail", ts_dtype_name(b->dt));
        ts_tensor_unref(fused.out[0]);
        ts_tensor_unref(nodes.out[0]);
        ts_tensor_unref(loose.out[0]);
        ts_tensor_unref(ref);
        ts_tensor_unref(xt);
        ts_tensor_unref(x64);
        ts_graph_free(b->g);
    }
}

/* float16 MatMul -> Add(bias) -> Relu: the product is rounded by the Add's
 * step as it reads it (vec_fuse.c round_on_load; the MatMul's step leaves
 * it), which must equal the reference exactly.  `loose` adds the bias to
 * the unrounded product. */
static void build_matmul_bias(gb *b, ts_dtype out)
{
    ts_error e = {0};
    ts_shape xs = shp("4x256");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    ts_attr to = ts_attr_int("to", out == TS_F16 ? 10 : 16);
    int y = N("Relu", N("Add", N("MatMul", x, grid_cst(b, "256x24", 64)), grid_cst(b, "24", 1024)));
    if (b->dt != out) y = node(b, "Cast", &y, 1, &to, 1);
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

Test(half, matmul_bias_rounded_on_load)
{
    ts_dtype types[] = {TS_F16, TS_BF16};
    for (int k = 0; k < 2; k++) {
        gb b = grid_graph(types[k]), l = grid_graph(TS_F32);
        build_matmul_bias(&b, types[k]);
        build_matmul_bias(&l, types[k]);
        check_exact(&b, &l, "4x256", 1); /* Add + Relu one step */
        ts_graph_free(b.g);
        ts_graph_free(l.g);
    }
}

/* float16 MatMul with a 4 MB float32-equivalent weight -> Add(bias) ->
 * Relu: the product runs in column chunks, each widened from the 16-bit
 * packed weight into a scratch of 2 MB at most (dnnl_matmul.c), and the
 * weight was widened, packed and narrowed a slice at a time while the plan
 * was built, the caller's original given back as it was read (half.c
 * widen_consuming, weights_once.c).  Equal to the reference exactly, to
 * the plan widening the weight whole (TSOPT_SKIP=half.chunk) bit for bit,
 * with a smaller arena. */
static void build_matmul_wide(gb *b, ts_dtype out)
{
    ts_error e = {0};
    ts_shape xs = shp("64x512");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    ts_attr to = ts_attr_int("to", out == TS_F16 ? 10 : 16);
    int y = N("Relu", N("Add", N("MatMul", x, grid_cst(b, "512x2048", 64)), grid_cst(b, "2048", 1024)));
    if (b->dt != out) y = node(b, "Cast", &y, 1, &to, 1);
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

Test(half, matmul_wide_weight_in_chunks)
{
    skip_without_avx512_layouts();
    gb b = grid_graph(TS_F16), l = grid_graph(TS_F32);
    build_matmul_wide(&b, TS_F16);
    build_matmul_wide(&l, TS_F16);
    check_exact(&b, &l, "64x512", 1);
    ts_error e = {0};
    ts_shape xs = shp("64x512");
    ts_tensor *x = ts_tensor_new(TS_F16, &xs, &e);
    uint64_t rng = 5;
    for (int64_t i = 0; i < ts_tensor_numel(x); i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        ts_tensor_set_f64(x, i, (double)((int64_t)((rng >> 33) % 33) - 16) / 16);
    }
    run_out whole = run_skip(b.g, x, "half.chunk");
    /* the chunked plan given the graph's weights (its originals released as
     * they are widened): a graph of its own, built the same */
    gb c = grid_graph(TS_F16);
    build_matmul_wide(&c, TS_F16);
    ts_plan *p = NULL;
    ts_plan_opts o = {.threads = 2, .release_packed_weights = true};
    cr_assert_eq(ts_plan_build(c.g, &o, &p, &e), TS_OK, "%s", e.msg);
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    ts_tensor *y = ts_tensor_new(TS_F16, &c.g->values[c.g->outputs[0]].shape, &e), *in[] = {x};
    cr_assert_eq(ts_plan_run(p, in, &y, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(memcmp(y->data, whole.out[0]->data, y->nbytes), 0, "chunked and whole products differ");
    cr_assert_lt(st.arena_bytes + (1u << 20), whole.st.arena_bytes, "arena %zu, widened whole %zu", st.arena_bytes,
                 whole.st.arena_bytes);
    cr_assert_geq(st.released_bytes, (size_t)512 * 2048 * 2, "released %zu", st.released_bytes);
    ts_plan_free(p);
    ts_tensor_unref(y);
    ts_tensor_unref(whole.out[0]);
    ts_tensor_unref(x);
    ts_graph_free(b.g);
    ts_graph_free(l.g);
    ts_graph_free(c.g);
}

/* MatMul -> Add(bias) -> y * tanh(y), where every node rounds (no
 * AVX512-FP16): the bias Add is absorbed by the product's step as
 * round(round(y) + bias) (lower_post.c half_bias_collect, dnnl_matmul.c),
 * over the whole product (64x256 by 256x64) or as each column chunk of a
 * widened weight is copied into place (64x512 by 512x2048).  Exact against
 * the reference (the rounding of the product and of the sum both show in
 * the result), bit-equal to the plan running the Add as a step of its own
 * (TSOPT_SKIP=half.bias), one step fewer. */
static void build_matmul_bias_tanh(gb *b, const char *xd, const char *wd, const char *bd)
{
    ts_error e = {0};
    ts_shape xs = shp(xd);
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    int y = N("Add", N("MatMul", x, grid_cst(b, wd, 64)), grid_cst(b, bd, 1024));
    y = N("Mul", y, N("Tanh", y)); /* two readers: the Add does not join a chain after it (ViT's GELU) */
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

Test(half, matmul_bias_rounded_in_step)
{
    const char *dims[][3] = {{"64x256", "256x64", "64"}, {"64x512", "512x2048", "2048"}};
    ts_dtype types[] = {TS_F16, TS_BF16};
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < 2; t++) {
            gb b = grid_graph(types[t]), l = grid_graph(TS_F32);
            build_matmul_bias_tanh(&b, dims[k][0], dims[k][1], dims[k][2]);
            build_matmul_bias_tanh(&l, dims[k][0], dims[k][1], dims[k][2]);
            check_exact(&b, &l, dims[k][0], 1);
            ts_error e = {0};
            ts_shape xs = shp(dims[k][0]);
            ts_tensor *x = ts_tensor_new(types[t], &xs, &e);
            uint64_t rng = 3;
            for (int64_t i = 0; i < ts_tensor_numel(x); i++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                ts_tensor_set_f64(x, i, (double)((int64_t)((rng >> 33) % 33) - 16) / 16);
            }
            /* the Mul, Tanh chain after the sum stays a step (half.bias_chain, below) */
            run_out in = run_skip(b.g, x, "half.bias_chain"), out = run_skip(b.g, x, "half.bias,half.bias_chain");
            cr_assert_eq(in.st.steps + 1, out.st.steps, "%s %s: %d steps, %d with the Add a step of its own",
                         ts_dtype_name(types[t]), dims[k][0], in.st.steps, out.st.steps);
            cr_assert_eq(memcmp(in.out[0]->data, out.out[0]->data, in.out[0]->nbytes), 0, "%s %s: outputs differ",
                         ts_dtype_name(types[t]), dims[k][0]);
            ts_tensor_unref(in.out[0]);
            ts_tensor_unref(out.out[0]);
            ts_tensor_unref(x);
            ts_graph_free(b.g);
            ts_graph_free(l.g);
        }
}

/* MatMul -> Add(bias) -> GELU as torch exports it from float16 (Div by a
 * 16-bit sqrt 2, Erf, Add 1, Mul by the sum, Mul 0.5: ViT's MLP), every
 * node rounding: the chain reads the rounded bias sum alone and is its
 * every reader, so it joins the product's step (lower_post.c
 * half_chain_collect) and runs as a 65536-entry table of its 16-bit results
 * (dnnl_matmul.c chain_table) on each row of the sum as it is written, the
 * sum never stored.  Over the whole product (64x256 by 256x64) and per
 * column chunk of a widened weight (64x512 by 512x2048).  Exact against the
 * reference (each node's rounding shows), one step fewer than the chain as
 * a step of its own (TSOPT_SKIP=half.bias_chain) and bit-equal to it and
 * to the program run per element (half.chain_table). */
static void build_matmul_bias_gelu(gb *b, const char *xd, const char *wd, const char *bd)
{
    ts_error e = {0};
    ts_shape xs = shp(xd);
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    int y = N("Add", N("MatMul", x, grid_cst(b, wd, 64)), grid_cst(b, bd, 1024));
    ts_shape one = {0};
    ts_tensor *c = ts_tensor_new(b->dt, &one, &e), *h = ts_tensor_new(b->dt, &one, &e), *u = ts_tensor_new(b->dt, &one, &e);
    ts_tensor_set_f64(c, 0, 1.4140625); /* sqrt 2 in float16 */
    ts_tensor_set_f64(h, 0, 0.5);
    ts_tensor_set_f64(u, 0, 1.0);
    int vc = ts_graph_add_constant(b->g, "sqrt2", c, &e), vh = ts_graph_add_constant(b->g, "half", h, &e),
        vu = ts_graph_add_constant(b->g, "one", u, &e);
    ts_tensor_unref(c);
    ts_tensor_unref(h);
    ts_tensor_unref(u);
    int g = N("Mul", N("Mul", y, N("Add", N("Erf", N("Div", y, vc)), vu)), vh);
    cr_assert_eq(ts_graph_add_output(b->g, g, &e), TS_OK);
}

Test(half, matmul_bias_gelu_in_step)
{
    const char *dims[][3] = {{"64x256", "256x64", "64"}, {"64x512", "512x2048", "2048"}};
    ts_dtype types[] = {TS_F16, TS_BF16};
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < 2; t++) {
            gb b = grid_graph(types[t]), l = grid_graph(TS_F32);
            build_matmul_bias_gelu(&b, dims[k][0], dims[k][1], dims[k][2]);
            build_matmul_bias_gelu(&l, dims[k][0], dims[k][1], dims[k][2]);
            check_exact(&b, &l, dims[k][0], 6);
            ts_error e = {0};
            ts_shape xs = shp(dims[k][0]);
            ts_tensor *x = ts_tensor_new(types[t], &xs, &e);
            uint64_t rng = 3;
            for (int64_t i = 0; i < ts_tensor_numel(x); i++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                ts_tensor_set_f64(x, i, (double)((int64_t)((rng >> 33) % 33) - 16) / 16);
            }
            run_out in = run(b.g, x), prog = run_skip(b.g, x, "half.chain_table"),
                    out = run_skip(b.g, x, "half.bias_chain");
            cr_assert_eq(in.st.steps + 1, out.st.steps, "%s %s: %d steps, %d with the chain a step of its own",
                         ts_dtype_name(types[t]), dims[k][0], in.st.steps, out.st.steps);
            cr_assert_eq(in.st.steps, prog.st.steps);
            cr_assert_eq(memcmp(in.out[0]->data, out.out[0]->data, in.out[0]->nbytes), 0, "%s %s: outputs differ",
                         ts_dtype_name(types[t]), dims[k][0]);
            cr_assert_eq(memcmp(in.out[0]->data, prog.out[0]->data, in.out[0]->nbytes), 0,
                         "%s %s: table and program differ", ts_dtype_name(types[t]), dims[k][0]);
            ts_tensor_unref(in.out[0]);
            ts_tensor_unref(prog.out[0]);
            ts_tensor_unref(out.out[0]);
            ts_tensor_unref(x);
            ts_graph_free(b.g);
            ts_graph_free(l.g);
        }
}

/* MatMul -> Add(bias) -> Add(residual) (the MLP's second product; the
 * residual computed before, Tanh(x)), every node rounding: the sum's one
 * reader, the residual Add, joins the product's step with it (the chain
 * reads the residual where it lies, row by row as each chunk is copied),
 * one step fewer than with half.bias_chain skipped (the bias and residual
 * Adds then one vec.eltwise step), bit-equal to it, exact against the
 * reference.  Whole product (64x256 by 256x256) and column chunks of a
 * widened weight (64x1024 by 1024x1024). */
static void build_matmul_bias_residual(gb *b, const char *xd, const char *wd, const char *bd)
{
    ts_error e = {0};
    ts_shape xs = shp(xd);
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    int r = N("Tanh", x); /* computed before the product (ViT's residual stream) */
    int y = N("Add", N("Add", N("MatMul", x, grid_cst(b, wd, 64)), grid_cst(b, bd, 1024)), r);
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

Test(half, matmul_bias_residual_in_step)
{
    const char *dims[][3] = {{"64x256", "256x256", "256"}, {"64x1024", "1024x1024", "1024"}};
    for (int k = 0; k < 2; k++) {
        gb b = grid_graph(TS_F16), l = grid_graph(TS_F32);
        build_matmul_bias_residual(&b, dims[k][0], dims[k][1], dims[k][2]);
        build_matmul_bias_residual(&l, dims[k][0], dims[k][1], dims[k][2]);
        check_exact(&b, &l, dims[k][0], 2);
        ts_error e = {0};
        ts_shape xs = shp(dims[k][0]);
        ts_tensor *x = ts_tensor_new(TS_F16, &xs, &e);
        uint64_t rng = 3;
        for (int64_t i = 0; i < ts_tensor_numel(x); i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            ts_tensor_set_f64(x, i, (double)((int64_t)((rng >> 33) % 33) - 16) / 16);
        }
        run_out in = run(b.g, x), out = run_skip(b.g, x, "half.bias_chain");
        cr_assert_eq(in.st.steps + 1, out.st.steps, "%s: %d steps, %d with the Adds a step of their own", dims[k][0],
                     in.st.steps, out.st.steps);
        cr_assert_eq(memcmp(in.out[0]->data, out.out[0]->data, in.out[0]->nbytes), 0, "%s: outputs differ", dims[k][0]);
        ts_tensor_unref(in.out[0]);
        ts_tensor_unref(out.out[0]);
        ts_tensor_unref(x);
        ts_graph_free(b.g);
        ts_graph_free(l.g);
    }
}

/* Column chunks of a widened weight sized with the product's chunk counted
 * (dnnl_matmul.c prepare_chunks): 1024 rows by a 512x2048 float16 weight
 * had chunks of 1024 columns, a 2 MB widened chunk and a 4 MB dense dst
 * chunk in the arena; now both within 2 MB (256 columns).  Bit-equal to
 * the chunks of TSOPT_SKIP=half.chunk_dst, an arena at least 2 MB smaller. */
static void build_matmul_tall(gb *b)
{
    ts_error e = {0};
    ts_shape xs = shp("1024x512");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    int y = N("Relu", N("MatMul", x, grid_cst(b, "512x2048", 64)));
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

/* Runs a fresh build_matmul_tall graph whose weights the plan may release
 * (the chunked 16-bit path), TSOPT_SKIP-like `skip`. */
static run_out run_tall(const ts_tensor *x, const char *skip)
{
    gb b = grid_graph(TS_F16);
    build_matmul_tall(&b);
    ts_error e = {0};
    ts_plan *p = NULL;
    ts_plan_opts o = {.threads = 2, .release_packed_weights = true, .skip = skip};
    cr_assert_eq(ts_plan_build(b.g, &o, &p, &e), TS_OK, "%s", e.msg);
    run_out r = {0};
    ts_plan_stats_get(p, &r.st);
    r.out[0] = ts_tensor_new(TS_F16, &b.g->values[b.g->outputs[0]].shape, &e);
    ts_tensor *in[] = {(ts_tensor *)x};
    cr_assert_eq(ts_plan_run(p, in, r.out, &e), TS_OK, "%s", e.msg);
    ts_plan_free(p);
    ts_graph_free(b.g);
    return r;
}

Test(half, matmul_chunks_count_the_product)
{
    skip_without_avx512_layouts();
    ts_error e = {0};
    ts_shape xs = shp("1024x512");
    ts_tensor *x = ts_tensor_new(TS_F16, &xs, &e);
    uint64_t rng = 3;
    for (int64_t i = 0; i < ts_tensor_numel(x); i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        ts_tensor_set_f64(x, i, (double)((int64_t)((rng >> 33) % 33) - 16) / 16);
    }
    /* the float32 kernels over widened chunks (the AMX passes size their own: x3_cols) */
    run_out in = run_tall(x, "half.amx"), old = run_tall(x, "half.amx,half.chunk_dst");
    cr_assert_eq(memcmp(in.out[0]->data, old.out[0]->data, in.out[0]->nbytes), 0, "outputs differ");
    cr_assert_leq(in.st.arena_bytes + (2u << 20), old.st.arena_bytes, "arena %zu, weight's chunk alone counted %zu",
                  in.st.arena_bytes, old.st.arena_bytes);
    ts_tensor_unref(in.out[0]);
    ts_tensor_unref(old.out[0]);
    ts_tensor_unref(x);
}

/* A float16 classifier head (Gemm transB + bias, 2 rows: vec.gemv) whose
 * 512x512 weight is stored 16-bit: its panels are read as float16 values,
 * converted as they are loaded (vec_gemv.c panel16), not widened into the
 * step's scratch first (TSOPT_SKIP=half.gemv).  Exact against the
 * reference, bit-equal to the widening plan, the 1 MiB widening scratch
 * gone from the arena (more than half of it: the step keeps 64 bytes). */
static void build_head(gb *b)
{
    ts_error e = {0};
    ts_shape xs = shp("2x512");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    ts_attr tb = ts_attr_int("transB", 1);
    int ins[] = {x, grid_cst(b, "512x512", 64), grid_cst(b, "512", 1024)};
    int y = node(b, "Gemm", ins, 3, &tb, 1);
    y = N("Mul", y, N("Tanh", y)); /* the head's rounding shows in the result */
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

Test(half, gemv_reads_float16_panels)
{
    if (!__builtin_cpu_supports("avx512f")) cr_skip_test("panel16 needs AVX-512");
    gb b = grid_graph(TS_F16), l = grid_graph(TS_F32);
    build_head(&b);
    build_head(&l);
    check_exact(&b, &l, "2x512", 0);
    ts_error e = {0};
    ts_shape xs = shp("2x512");
    ts_tensor *x = ts_tensor_new(TS_F16, &xs, &e);
    uint64_t rng = 7;
    for (int64_t i = 0; i < ts_tensor_numel(x); i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        ts_tensor_set_f64(x, i, (double)((int64_t)((rng >> 33) % 33) - 16) / 16);
    }
    run_out in = run(b.g, x), wide = run_skip(b.g, x, "half.gemv");
    cr_assert_eq(memcmp(in.out[0]->data, wide.out[0]->data, in.out[0]->nbytes), 0, "float16 panels and widened differ");
    cr_assert_leq(in.st.weight_bytes, (size_t)512 * 512 * 2 + 65536, "weights %zu: not stored 16-bit", in.st.weight_bytes);
    cr_assert_lt(in.st.arena_bytes + (size_t)512 * 512 * 2, wide.st.arena_bytes, "arena %zu, widening %zu",
                  in.st.arena_bytes, wide.st.arena_bytes);
    ts_tensor_unref(in.out[0]);
    ts_tensor_unref(wide.out[0]);
    ts_tensor_unref(x);
    ts_graph_free(b.g);
    ts_graph_free(l.g);
}

/* float16 Conv 3x3 with a 2.4 MB float32-equivalent weight (256 -> 256
 * channels) -> Relu -> squared: the convolution runs in output-channel
 * chunks, each widened from its 16-bit weights into a scratch of 1 MB at
 * most (dnnl_conv.c conv_state), or read as they are when half.c's budget
 * keeps the weight float32.  Exact against the reference (the square is
 * of the rounded convolution), bit-equal to the plan widening the weight
 * whole (TSOPT_SKIP=half.chunk), with a smaller arena. */
static void build_conv_wide(gb *b, ts_dtype out)
{
    ts_error e = {0};
    ts_shape xs = shp("1x256x6x6");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    ts_attr pads = ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4), to = ts_attr_int("to", out == TS_F16 ? 10 : 1);
    int c = node(b, "Conv", (const int[]){x, grid_cst(b, "256x256x3x3", 64), grid_cst(b, "256", 16)}, 3, &pads, 1);
    int r = N("Relu", c), y = N("Mul", r, r);
    if (b->dt != out) y = node(b, "Cast", &y, 1, &to, 1);
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

Test(half, conv_wide_weight_in_chunks)
{
    skip_without_avx512_layouts();
    gb b = grid_graph(TS_F16), l = grid_graph(TS_F32);
    build_conv_wide(&b, TS_F16);
    build_conv_wide(&l, TS_F16);
    check_exact(&b, &l, "1x256x6x6", 0);
    ts_error e = {0};
    ts_shape xs = shp("1x256x6x6");
    ts_tensor *x = ts_tensor_new(TS_F16, &xs, &e);
    uint64_t rng = 5;
    for (int64_t i = 0; i < ts_tensor_numel(x); i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        ts_tensor_set_f64(x, i, (double)((int64_t)((rng >> 33) % 33) - 16) / 16);
    }
    /* the float32 kernels' mechanism: not on AMX (conv_amx_* below) */
    run_out whole = run_skip(b.g, x, "half.amx,half.chunk,half.budget"), chunks = run_skip(b.g, x, "half.amx,half.budget"),
            kept = run_skip(b.g, x, "half.amx");
    cr_assert_eq(memcmp(chunks.out[0]->data, whole.out[0]->data, whole.out[0]->nbytes), 0,
                 "chunked and whole convolutions differ");
    cr_assert_eq(memcmp(kept.out[0]->data, whole.out[0]->data, whole.out[0]->nbytes), 0,
                 "chunks kept float32 and the whole widening differ");
    cr_assert_lt(chunks.st.arena_bytes + (1u << 20), whole.st.arena_bytes, "arena %zu, widened whole %zu",
                 chunks.st.arena_bytes, whole.st.arena_bytes);
    cr_assert_lt(chunks.st.weight_bytes, (size_t)256 * 256 * 9 * 3, "weights %zu: not 16-bit", chunks.st.weight_bytes);
    ts_tensor_unref(whole.out[0]);
    ts_tensor_unref(chunks.out[0]);
    ts_tensor_unref(kept.out[0]);
    ts_tensor_unref(x);
    ts_graph_free(b.g);
    ts_graph_free(l.g);
}

/* A ResNet bottleneck's tail in float16: a = Relu(Conv 1x1 x), Conv 3x3 a
 * -> Add(., a) -> Relu -> Conv 1x1.  Per-node rounding keeps the residual
 * Add out of oneDNN's sum post-op (it adds before the conv's output is
 * rounded); the conv step absorbs Add and Relu as relu(round(round(y) + a))
 * over its result (lower_post.c half_sum_collect, dnnl_conv.c hsum).
 * Exact against the reference, one step fewer than with the Add a step of
 * its own (TSOPT_SKIP=half.sum) and bit-equal to it; the wide case (a
 * 2.4 MB float32-equivalent weight) convolves in output-channel chunks. */
static void build_conv_residual(gb *b, const char *xd, const char *w1, const char *w2, const char *bd)
{
    ts_error e = {0};
    ts_shape xs = shp(xd);
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    ts_attr pads = ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4);
    int a = N("Relu", N("Conv", x, grid_cst(b, w1, 8), grid_cst(b, bd, 16)));
    int c = node(b, "Conv", (const int[]){a, grid_cst(b, w2, 64), grid_cst(b, bd, 16)}, 3, &pads, 1);
    int y = N("Conv", N("Relu", N("Add", c, a)), grid_cst(b, w1, 8));
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

Test(half, conv_residual_add_rounded_in_step)
{
    const char *dims[][4] = {{"1x16x8x8", "16x16x1x1", "16x16x3x3", "16"},
                             {"1x256x6x6", "256x256x1x1", "256x256x3x3", "256"}};
    for (int k = 0; k < 2; k++) {
        gb b = grid_graph(TS_F16), l = grid_graph(TS_F32);
        build_conv_residual(&b, dims[k][0], dims[k][1], dims[k][2], dims[k][3]);
        build_conv_residual(&l, dims[k][0], dims[k][1], dims[k][2], dims[k][3]);
        if (k == 0) check_exact(&b, &l, dims[k][0], 0);
        ts_error e = {0};
        ts_shape xs = shp(dims[k][0]);
        ts_tensor *x = ts_tensor_new(TS_F16, &xs, &e);
        uint64_t rng = 11;
        for (int64_t i = 0; i < ts_tensor_numel(x); i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            ts_tensor_set_f64(x, i, (double)((int64_t)((rng >> 33) % 33) - 16) / 16);
        }
        /* the float32 kernels' path (the AMX passes fuse nothing here) */
        run_out in = run_skip(b.g, x, "half.amx"), out = run_skip(b.g, x, "half.amx,half.sum");
        /* one fewer (more where the Add's step needs its operands reordered: AVX2's 8-channel blocks) */
        cr_assert_lt(in.st.steps, out.st.steps, "%s: %d steps, %d with the Add a step of its own", dims[k][0],
                     in.st.steps, out.st.steps);
        cr_assert_eq(memcmp(in.out[0]->data, out.out[0]->data, in.out[0]->nbytes), 0, "%s: outputs differ", dims[k][0]);
        ts_tensor_unref(in.out[0]);
        ts_tensor_unref(out.out[0]);
        ts_tensor_unref(x);
        ts_graph_free(b.g);
        ts_graph_free(l.g);
    }
}

/* float16 MatMul -> Add(bias) -> h * c + h -> Relu, and Mul -> Softmax ->
 * Relu: the bias Add writes over the product, the chain (reading h twice)
 * over h and Softmax over its input, each dying there (vec.h
 * xv_inplace_out: the half plan's split MLP held two ViT-sized products
 * side by side).  Exact against the reference (the chain copies each block
 * of h aside before overwriting it: without that copy its second read
 * finds the result), bit-equal to the plan without it
 * (TSOPT_SKIP=half.inplace) and with a smaller arena. */
static void build_inplace(gb *b, ts_dtype out)
{
    ts_error e = {0};
    ts_shape xs = shp("256x64");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    ts_attr to = ts_attr_int("to", out == TS_F16 ? 10 : 16);
    int h = N("Add", N("MatMul", x, grid_cst(b, "64x512", 64)), grid_cst(b, "512", 1024));
    int y = N("Relu", N("Add", N("Mul", h, grid_cst(b, "512", 64)), h));
    if (b->dt != out) y = node(b, "Cast", &y, 1, &to, 1);
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

static void build_softmax(gb *b)
{
    ts_error e = {0};
    ts_shape xs = shp("16x384");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    int y = N("Relu", N("Softmax", N("Mul", x, grid_cst(b, "384", 16))));
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

static void check_smaller_and_equal(const gb *b, const char *dims)
{
    ts_error e = {0};
    ts_shape xs = shp(dims);
    ts_tensor *x = ts_tensor_new(b->dt, &xs, &e);
    uint64_t rng = 3;
    for (int64_t i = 0; i < ts_tensor_numel(x); i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        ts_tensor_set_f64(x, i, (double)((int64_t)((rng >> 33) % 33) - 16) / 16);
    }
    run_out in = run(b->g, x), apart = run_skip(b->g, x, "half.inplace");
    cr_assert_lt(in.st.arena_bytes, apart.st.arena_bytes, "arena %zu, not in place %zu", in.st.arena_bytes,
                 apart.st.arena_bytes);
    cr_assert_eq(memcmp(in.out[0]->data, apart.out[0]->data, in.out[0]->nbytes), 0, "in place and apart differ");
    ts_tensor_unref(in.out[0]);
    ts_tensor_unref(apart.out[0]);
    ts_tensor_unref(x);
}

Test(half, results_written_over_dying_inputs)
{
    gb b = grid_graph(TS_F16), l = grid_graph(TS_F32);
    build_inplace(&b, TS_F16);
    build_inplace(&l, TS_F16);
    check_exact(&b, &l, "256x64", 1);
    check_smaller_and_equal(&b, "256x64");
    ts_graph_free(b.g);
    ts_graph_free(l.g);
    /* Softmax over its input (values past exactness: compared with the plan apart) */
    gb s = grid_graph(TS_F16);
    build_softmax(&s);
    check_smaller_and_equal(&s, "16x384");
    ts_graph_free(s.g);
}

/* Twelve 3x3 convolutions, 256 channels at 8x8 (14 MiB of float16
 * weights): the float32 plan runs them on Winograd (transformed weights
 * several times the direct ones), so the half plan has room to keep packed
 * weights float32 (half.c xhalf_spend_budget) and still hold at most 0.6
 * of what the float32 plan holds, with a process's fixed part (24 MiB) on
 * both sides; the weights it kept are not widened per run, and the outputs
 * are those of the plan that widens them all (TSOPT_SKIP=half.budget). */
static void build_wino_stack(gb *b)
{
    ts_error e = {0};
    ts_shape xs = shp("1x256x8x8");
    int y = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    ts_attr pads = ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4);
    for (int i = 0; i < 12; i++)
        y = N("Relu", node(b, "Conv", (const int[]){y, cst(b, "256x256x3x3", -0.04, 0.04), cst(b, "256", -0.1, 0.1)}, 3,
                           &pads, 1));
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

/* One seeded input in [-1, 1] rounded to float16, as float16 (*xh) and
 * float32 (*xf) tensors of shape xs. */
static void f16_input(const ts_shape *xs, ts_tensor **xh, ts_tensor **xf)
{
    ts_error e = {0};
    *xh = ts_tensor_new(TS_F16, xs, &e);
    *xf = ts_tensor_new(TS_F32, xs, &e);
    cr_assert(*xh && *xf, "%s", e.msg);
    uint64_t rng = 7;
    ts_tensor_fill_random(*xf, &rng, -1, 1);
    for (int64_t i = 0; i < ts_tensor_numel(*xf); i++) {
        double v = ts_dtype_round(TS_F16, ts_tensor_get_f64(*xf, i));
        ts_tensor_set_f64(*xf, i, v);
        ts_tensor_set_f64(*xh, i, v);
    }
}

Test(half, float32_weights_kept_within_the_byte_budget)
{
    skip_without_avx512_layouts();
    gb h = {ts_graph_new("h", 17), TS_F16, TS_F16, 13}, f = {ts_graph_new("f", 17), TS_F32, TS_F16, 13};
    build_wino_stack(&h);
    build_wino_stack(&f);
    ts_shape xs = shp("1x256x8x8");
    ts_tensor *xh, *xf;
    f16_input(&xs, &xh, &xf);
    /* the float32 copies alone (Winograd's share of the budget: the next test) */
    run_out kept = run_skip(h.g, xh, "half.amx,half.wino"), all16 = run_skip(h.g, xh, "half.amx,half.budget"),
            f32 = run(f.g, xf);
    size_t w16 = (size_t)12 * 256 * 256 * 9 * 2;
    cr_assert_geq(all16.st.weight_bytes, w16);
    cr_assert_gt(f32.st.weight_bytes, 2 * all16.st.weight_bytes, "float32 plan %zu: no Winograd extras?",
                 f32.st.weight_bytes);
    cr_assert_geq(kept.st.weight_bytes, all16.st.weight_bytes + w16 / 12, "kept %zu, 16-bit %zu", kept.st.weight_bytes,
                  all16.st.weight_bytes);
    double fixed = 24.0 * 1048576, held = (double)(kept.st.weight_bytes + kept.st.arena_bytes) + fixed,
           held32 = (double)(f32.st.weight_bytes + f32.st.arena_bytes) + fixed;
    cr_assert_leq(held, 0.6 * held32, "half plan holds %.0f, float32 plan %.0f", held, held32);
    cr_assert_eq(memcmp(kept.out[0]->data, all16.out[0]->data, kept.out[0]->nbytes), 0, "kept and widened differ");
    ts_tensor_unref(kept.out[0]);
    ts_tensor_unref(all16.out[0]);
    ts_tensor_unref(f32.out[0]);
    ts_tensor_unref(xh);
    ts_tensor_unref(xf);
    ts_graph_free(h.g);
    ts_graph_free(f.g);
}

/* The fused programs' round op rounds from its operand into the result in
 * one pass (xhalf_round_into): equal to copying and rounding in place, for
 * both types, in place too, with a tail past the 16-lane vectors. */
Test(half, round_into_equals_copy_and_round)
{
    enum { N = 16 * 5 + 7 };
    const ts_dtype types[] = {TS_F16, TS_BF16};
    for (int k = 0; k < 2; k++) {
        float x[N], y[N], want[N];
        uint64_t rng = 9;
        for (int i = 0; i < N; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            double m = (double)(rng >> 11) / 9007199254740992.0 - 0.5;
            x[i] = (float)ldexp(m, (int)((rng >> 3) % 50) - 30); /* past float16's range and subnormals */
        }
        memcpy(want, x, sizeof x);
        xhalf_round(types[k], want, N);
        xhalf_round_into(types[k], x, y, N);
        cr_assert_eq(memcmp(y, want, sizeof y), 0, "%s: out of place", ts_dtype_name(types[k]));
        xhalf_round_into(types[k], x, x, N);
        cr_assert_eq(memcmp(x, want, sizeof x), 0, "%s: in place", ts_dtype_name(types[k]));
    }
}

/* A stack of 3x3 convolutions: the budget goes first to Winograd for convolutions the
 * float32 plan runs on Winograd (half.c spend_on_winograd, dnnl_conv.c
 * xd_conv_to_winograd: weights transformed and held float32, the
 * neighbours' layouts converted in the step).  Some of the 48 take it,
 * the plan still holds at most 0.6 of the float32 plan's (fixed part on
 * both sides), and the output is that of the plan without it
 * (TSOPT_SKIP=half.wino) to 2 units in the last place at the output's
 * scale (Winograd's sums differ from the direct kernel's in float32
 * rounding only; each layer's output is then rounded to float16). */
/* 24 convolutions of 128 channels (weights of 0.3 MiB float16 each, not
 * convolved in chunks) */
static void build_wino_stack128(gb *b)
{
    ts_error e = {0};
    ts_shape xs = shp("1x128x8x8");
    int y = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    ts_attr pads = ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4);
    for (int i = 0; i < 48; i++)
        y = N("Relu", node(b, "Conv", (const int[]){y, cst(b, "128x128x3x3", -0.06, 0.06), cst(b, "128", -0.1, 0.1)}, 3,
                           &pads, 1));
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

static int wino_steps(const ts_graph *g, const char *skip, run_out *r, const ts_tensor *x)
{
    ts_error e = {0};
    ts_plan *p = NULL;
    ts_plan_opts o = {.threads = 2, .skip = skip};
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    const xplan *q = (const xplan *)p;
    int n = 0;
    for (int i = 0; i < q->nsteps; i++) n += xd_conv_is_winograd(xhalf_inner(&q->steps[i]), NULL);
    ts_plan_stats_get(p, &r->st);
    r->out[0] = ts_tensor_new(g->values[g->outputs[0]].dtype, &g->values[g->outputs[0]].shape, &e);
    ts_tensor *in[] = {(ts_tensor *)x};
    cr_assert_eq(ts_plan_run(p, in, r->out, &e), TS_OK, "%s", e.msg);
    ts_plan_free(p);
    return n;
}

/* The budget's Winograd share (half.c spend_on_winograd): the converted
 * steps' scratch (Winograd's scratchpad, converted activations) lives in
 * the arena the steps share, so it is counted once (TSOPT_SKIP=
 * half.wino_scratch counts it per step: fewer take it), and convolutions
 * run in output-channel chunks (256 channels: 2.4 MB float32 weights) are
 * converted too (TSOPT_SKIP=half.wino_chunks: none of them).  The plan
 * still holds at most 0.6 of the float32 plan's; outputs within 2 ulps of
 * the direct plan's. */
Test(half, winograd_budget_counts_scratch_once_and_takes_chunked_convs)
{
    for (int k = 0; k < 2; k++) {
        gb h = {ts_graph_new("h", 17), TS_F16, TS_F16, 13}, f = {ts_graph_new("f", 17), TS_F32, TS_F16, 13};
        if (k == 0) {
            build_wino_stack128(&h);
            build_wino_stack128(&f);
        } else {
            build_wino_stack(&h);
            build_wino_stack(&f);
        }
        ts_shape xs = shp(k == 0 ? "1x128x8x8" : "1x256x8x8");
        ts_tensor *xh, *xf;
        f16_input(&xs, &xh, &xf);
        run_out now = {0}, old = {0}, direct = {0}, f32 = {0};
        int nn = wino_steps(h.g, "half.amx", &now, xh),
            no = wino_steps(h.g, k == 0 ? "half.amx,half.wino_scratch" : "half.amx,half.wino_chunks", &old, xh),
            nd = wino_steps(h.g, "half.amx,half.wino", &direct, xh);
        if (!wino_steps(f.g, NULL, &f32, xf)) cr_skip_test("no Winograd in the float32 plan (no AVX-512 kernel)");
        cr_assert_eq(nd, 0);
        if (k == 0)
            cr_assert_gt(nn, no, "128 channels: %d on Winograd, %d with the scratch counted per step", nn, no);
        else
            cr_assert(nn >= 1 && no == 0, "256 channels (chunked): %d on Winograd, %d without chunked ones", nn, no);
        double fixed = 24.0 * 1048576, held = (double)(now.st.weight_bytes + now.st.arena_bytes) + fixed,
               held32 = (double)(f32.st.weight_bytes + f32.st.arena_bytes) + fixed;
        cr_assert_leq(held, 0.6 * held32, "half plan holds %.0f, float32 plan %.0f", held, held32);
        double scale = 0, worst = 0;
        for (int64_t i = 0; i < ts_tensor_numel(direct.out[0]); i++) {
            double a = ts_tensor_get_f64(now.out[0], i), b = ts_tensor_get_f64(direct.out[0], i);
            scale = fmax(scale, fabs(b));
            worst = fmax(worst, fabs(a - b));
        }
        cr_assert_gt(scale, 0);
        cr_assert_leq(worst, 2 * ulp(TS_F16, scale), "Winograd and direct differ by %g at scale %g", worst, scale);
        ts_tensor_unref(now.out[0]);
        ts_tensor_unref(old.out[0]);
        ts_tensor_unref(direct.out[0]);
        ts_tensor_unref(f32.out[0]);
        ts_tensor_unref(xh);
        ts_tensor_unref(xf);
        ts_graph_free(h.g);
        ts_graph_free(f.g);
    }
}

Test(half, winograd_within_the_byte_budget)
{
    skip_without_avx512_layouts();
    gb h = {ts_graph_new("h", 17), TS_F16, TS_F16, 13}, f = {ts_graph_new("f", 17), TS_F32, TS_F16, 13};
    build_wino_stack128(&h);
    build_wino_stack128(&f);
    ts_shape xs = shp("1x128x8x8");
    ts_tensor *xh, *xf;
    f16_input(&xs, &xh, &xf);
    run_out wino = {0}, direct = {0}, f32 = {0};
    int nw = wino_steps(h.g, "half.amx", &wino, xh), nd = wino_steps(h.g, "half.amx,half.wino", &direct, xh);
    int n32 = wino_steps(f.g, NULL, &f32, xf);
    cr_assert_geq(n32, 48, "the float32 plan runs %d of 48 on Winograd", n32);
    cr_assert_eq(nd, 0);
    cr_assert(nw >= 1 && nw < 48, "%d of 48 on Winograd: the budget is spent on none or on all", nw);
    double fixed = 24.0 * 1048576, held = (double)(wino.st.weight_bytes + wino.st.arena_bytes) + fixed,
           held32 = (double)(f32.st.weight_bytes + f32.st.arena_bytes) + fixed;
    cr_assert_leq(held, 0.6 * held32, "half plan holds %.0f, float32 plan %.0f", held, held32);
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < ts_tensor_numel(direct.out[0]); i++) {
        double a = ts_tensor_get_f64(wino.out[0], i), b = ts_tensor_get_f64(direct.out[0], i);
        scale = fmax(scale, fabs(b));
        worst = fmax(worst, fabs(a - b));
    }
    cr_assert_gt(scale, 0);
    cr_assert_leq(worst, 2 * ulp(TS_F16, scale), "Winograd and direct differ by %g at scale %g", worst, scale);
    ts_tensor_unref(wino.out[0]);
    ts_tensor_unref(direct.out[0]);
    ts_tensor_unref(f32.out[0]);
    ts_tensor_unref(xh);
    ts_tensor_unref(xf);
    ts_graph_free(h.g);
    ts_graph_free(f.g);
}

/* ---- native float16 (xhalf_native_f16 forced on: TSOPT_HALF_NATIVE=1,
 * which needs no FP16 instruction): steps compute in float32 inside and
 * round once, at their 16-bit outputs, as native float16 kernels do; so
 * MatMul + bias + GELU, MatMul + residual Add and LayerNorm fuse as in the
 * float32 plan.  Forced off (TSOPT_SKIP=half.native), the plan is the one
 * that rounds every node (the tests above). */

/* The transformer block: fewer steps than the per-node plan, and within
 * 4 ulps of each output's scale of the float32 graph over the same 16-bit
 * weights and input, run unrounded by the reference (float64).  Why 4:
 * the native plan rounds 5 step outputs on the way to the scores (MLP's
 * first and second products, the LayerNorm, the scores' product, the
 * Softmax), each by half an ulp of its value; measured 1 ulp at most. */
Test(half, native_block_rounds_at_step_outputs)
{
    ts_error e = {0};
    gb h = {ts_graph_new("h", 17), TS_F16, TS_F16, 11}, f = {ts_graph_new("f", 17), TS_F32, TS_F16, 11};
    build_block(&h);
    build_block(&f);
    ts_shape xs = shp("2x16x64");
    ts_tensor *xh = ts_tensor_new(TS_F16, &xs, &e), *x64 = ts_tensor_new(TS_F64, &xs, &e);
    uint64_t rng = 3;
    for (int64_t i = 0; i < ts_tensor_numel(xh); i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        double v = ts_dtype_round(TS_F16, (double)(rng >> 11) / 4503599627370496.0 - 1);
        ts_tensor_set_f64(xh, i, v);
        ts_tensor_set_f64(x64, i, v);
    }
    run_out per_node = run_skip(h.g, xh, "half.native");
    setenv("TSOPT_HALF_NATIVE", "1", 1);
    run_out nat = run(h.g, xh), forced_off = run_skip(h.g, xh, "half.native");
    cr_assert_eq(nat.st.fallback_steps, 0);
    cr_assert_lt(nat.st.steps, per_node.st.steps, "native %d steps, per node %d", nat.st.steps, per_node.st.steps);
    cr_assert_eq(forced_off.st.steps, per_node.st.steps, "TSOPT_SKIP=half.native is the per-node plan");
    ts_tensor *ref[2] = {0};
    cr_assert_eq(ts_graph_run_reference(f.g, TS_DOMAIN_F64, &x64, ref, &e), TS_OK, "%s", e.msg);
    for (int o = 0; o < 2; o++) {
        double scale = 0, worst = 0;
        for (int64_t i = 0; i < ts_tensor_numel(ref[o]); i++) scale = fmax(scale, fabs(ts_tensor_get_f64(ref[o], i)));
        for (int64_t i = 0; i < ts_tensor_numel(ref[o]); i++) {
            double d = fabs(ts_tensor_get_f64(nat.out[o], i) - ts_tensor_get_f64(ref[o], i));
            worst = fmax(worst, d);
            cr_assert_leq(d, 4 * ulp(TS_F16, scale), "output %d [%lld]: %g, float32 reference %g (scale %g)", o,
                          (long long)i, ts_tensor_get_f64(nat.out[o], i), ts_tensor_get_f64(ref[o], i), scale);
        }
        cr_log_info("output %d: worst %g = %.2f ulps of scale %g", o, worst, worst / ulp(TS_F16, scale), scale);
        ts_tensor_unref(ref[o]);
        ts_tensor_unref(nat.out[o]);
        ts_tensor_unref(per_node.out[o]);
        ts_tensor_unref(forced_off.out[o]);
    }
    ts_tensor_unref(xh);
    ts_tensor_unref(x64);
    ts_graph_free(h.g);
    ts_graph_free(f.g);
}

/* y = MatMul(x, W) + b + x with a 4 MB float32-equivalent W (ViT's second
 * MLP product with its residual): natively one step, the product in column
 * chunks with the residual as oneDNN's sum post-op (each chunk starts from
 * the residual's columns, dnnl_matmul.c).  On grid values every float32
 * sum is exact, so the native result is the exact value rounded once:
 * equal to ts_dtype_round of the float64 reference of the float32 graph,
 * where the per-node plan (rounding the product and the bias sum too)
 * differs; bit-equal to the weight widened whole, in a smaller arena. */
static void build_matmul_residual(gb *b)
{
    ts_error e = {0};
    ts_shape xs = shp("64x1024");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    int y = N("Add", N("Add", N("MatMul", x, grid_cst(b, "1024x1024", 64)), grid_cst(b, "1024", 1024)), x);
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

Test(half, native_matmul_residual_in_chunks_rounds_once)
{
    skip_without_avx512_layouts();
    ts_error e = {0};
    gb b = grid_graph(TS_F16), l = grid_graph(TS_F32);
    build_matmul_residual(&b);
    build_matmul_residual(&l);
    ts_shape xs = shp("64x1024");
    ts_tensor *x = ts_tensor_new(TS_F16, &xs, &e), *x64 = ts_tensor_new(TS_F64, &xs, &e);
    uint64_t rng = 5;
    for (int64_t i = 0; i < ts_tensor_numel(x); i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        double v = (double)((int64_t)((rng >> 33) % 33) - 16) / 16;
        ts_tensor_set_f64(x, i, v);
        ts_tensor_set_f64(x64, i, v);
    }
    /* the per-node plan without its own fusion of the Adds into the step (half.bias_chain, rounding each) */
    run_out per_node = run_skip(b.g, x, "half.native,half.bias_chain");
    setenv("TSOPT_HALF_NATIVE", "1", 1);
    run_out nat = run(b.g, x), whole = run_skip(b.g, x, "half.chunk");
    cr_assert_eq(nat.st.fallback_steps, 0);
    cr_assert_lt(nat.st.steps, per_node.st.steps, "native %d steps, per node %d", nat.st.steps, per_node.st.steps);
    cr_assert_eq(memcmp(nat.out[0]->data, whole.out[0]->data, nat.out[0]->nbytes), 0, "chunked and whole differ");
    cr_assert_lt(nat.st.arena_bytes + (1u << 20), whole.st.arena_bytes, "arena %zu, widened whole %zu",
                 nat.st.arena_bytes, whole.st.arena_bytes);
    ts_tensor *ref = NULL;
    cr_assert_eq(ts_graph_run_reference(l.g, TS_DOMAIN_F64, &x64, &ref, &e), TS_OK, "%s", e.msg);
    int differ = 0;
    for (int64_t i = 0; i < ts_tensor_numel(ref); i++) {
        double want = ts_dtype_round(TS_F16, ts_tensor_get_f64(ref, i)), got = ts_tensor_get_f64(nat.out[0], i);
        cr_assert_eq(got, want, "[%lld]: %.9g, exact rounded once %.9g", (long long)i, got, want);
        differ += ts_tensor_get_f64(per_node.out[0], i) != want;
    }
    cr_assert_gt(differ, 0, "the per-node roundings change no output: the test cannot fail");
    ts_tensor_unref(ref);
    ts_tensor_unref(nat.out[0]);
    ts_tensor_unref(whole.out[0]);
    ts_tensor_unref(per_node.out[0]);
    ts_tensor_unref(x);
    ts_tensor_unref(x64);
    ts_graph_free(b.g);
    ts_graph_free(l.g);
}

/* PyTorch's GELU export in float16: Div(h, 1.4140625) -- sqrt 2 stored
 * 16-bit, so not GELU and not fused by fuse_gelu --, Erf, Add 1, Mul h,
 * Mul 0.5, after MatMul + bias.  Natively one step (lower_post.c
 * scaled_gelu_after: gelu_erf(k h) / k as post-ops, k = sqrt2 / 1.4140625),
 * each output within one float16 ulp of its value from the float32
 * graph's float64 reference (the one rounding, plus float32 sums and the
 * post-ops' 2^-20) and 1e-6: where h < -2.5, 1 + erf(h / c) cancels in
 * float32 (absolute error a few 2^-24, times 0.5 |h| < 2: below 1e-6, at
 * outputs of 1e-4 in float16's subnormals); negative h included, where
 * erf and the scalings matter most.  (k is 1 + 1.1e-4, below a float16
 * ulp: what this checks is the chain computing the GELU, its sign and
 * scale, not k itself.)  With TSOPT_SKIP=half.gelu the chain is a step of its own. */
static void build_mlp_gelu(gb *b)
{
    ts_error e = {0};
    ts_shape xs = shp("64x256");
    int x = ts_graph_add_input(b->g, "x", b->dt, &xs, &e);
    int h = N("Add", N("MatMul", x, cst(b, "256x512", -0.15, 0.15)), cst(b, "512", -0.5, 0.5));
    int er = N("Erf", N("Div", h, cst(b, "", 1.4142135623730951, 1.4142135623730951)));
    int y = N("Mul", N("Mul", h, N("Add", er, cst(b, "", 1, 1))), cst(b, "", 0.5, 0.5));
    cr_assert_eq(ts_graph_add_output(b->g, y, &e), TS_OK);
}

Test(half, native_gelu_with_rounded_sqrt2_as_post_ops)
{
    ts_error e = {0};
    gb h = {ts_graph_new("h", 17), TS_F16, TS_F16, 13}, f = {ts_graph_new("f", 17), TS_F32, TS_F16, 13};
    build_mlp_gelu(&h);
    build_mlp_gelu(&f);
    ts_shape xs = shp("64x256");
    ts_tensor *xh = ts_tensor_new(TS_F16, &xs, &e), *x64 = ts_tensor_new(TS_F64, &xs, &e);
    uint64_t rng = 7;
    for (int64_t i = 0; i < ts_tensor_numel(xh); i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        double v = ts_dtype_round(TS_F16, 2 * ((double)(rng >> 11) / 9007199254740992.0) - 1);
        ts_tensor_set_f64(xh, i, v);
        ts_tensor_set_f64(x64, i, v);
    }
    setenv("TSOPT_HALF_NATIVE", "1", 1);
    run_out nat = run(h.g, xh), apart = run_skip(h.g, xh, "half.gelu");
    cr_assert_eq(nat.st.fallback_steps, 0);
    cr_assert_eq(nat.st.steps + 1, apart.st.steps, "native %d steps, GELU apart %d", nat.st.steps, apart.st.steps);
    cr_assert_geq(nat.st.fused_nodes, 6, "fused %d", nat.st.fused_nodes);
    ts_tensor *ref = NULL;
    cr_assert_eq(ts_graph_run_reference(f.g, TS_DOMAIN_F64, &x64, &ref, &e), TS_OK, "%s", e.msg);
    int negative = 0;
    for (int64_t i = 0; i < ts_tensor_numel(ref); i++) {
        double want = ts_tensor_get_f64(ref, i), got = ts_tensor_get_f64(nat.out[0], i);
        cr_assert_leq(fabs(got - want), ulp(TS_F16, want) + 1e-6, "[%lld]: %.9g, float32 reference %.9g", (long long)i,
                      got, want);
        negative += want < 0;
    }
    cr_assert_gt(negative, 100, "negative outputs %d", negative);
    ts_tensor_unref(ref);
    ts_tensor_unref(nat.out[0]);
    ts_tensor_unref(apart.out[0]);
    ts_tensor_unref(xh);
    ts_tensor_unref(x64);
    ts_graph_free(h.g);
    ts_graph_free(f.g);
}
