/* float16 convolutions on AMX-BF16 in three exact passes (dnnl_conv.c
 * conv_state x3, dnnl/bf16_split.h).  The split against every float16
 * value; the decision (xd_conv_amx_wanted) with the CPU's answer forced
 * both ways, so that it is tested on any CPU; and, where the CPU has
 * AMX-BF16 (skipped with a message elsewhere), a ResNet block in float16
 * run on the passes: against the reference interpreter (which rounds every
 * node's output to float16 as ONNX does) and against the float32-kernel
 * plan of the same graph (TSOPT_SKIP=half.amx), within 2 units in the last
 * place of the output's scale each.  Plain bfloat16 (the inputs and weights
 * rounded to 8 bits) misses that by far: ResNet-50's output moved 0.177
 * from ONNX Runtime's at a tolerance of 0.053. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dnnl/bf16_split.h"
#include "dnnl/dnnl_conv.h"
#include "exec/half.h"
#include "exec/plan_internal.h"
#include "exec/roofline.h"
#include "tsopt.h"
#include "util/mem_check.h"

static float bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* x and x64 get the same seeded values in [-1, 1), on the float16 grid. */
static void fill_f16(ts_tensor *x, ts_tensor *x64, uint64_t rng)
{
    for (int64_t i = 0; i < ts_tensor_numel(x); i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        double v = ts_dtype_round(TS_F16, 2 * ((double)(rng >> 11) / 9007199254740992.0) - 1);
        ts_tensor_set_f64(x, i, v);
        ts_tensor_set_f64(x64, i, v);
    }
}

Test(half_amx, split_is_exact_for_every_float16)
{
    static uint16_t h[65536], hi[65536], lo[65536], hi2[65536], lo2[65536];
    static float x[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    xhalf_widen(TS_F16, h, x, 65536);
    xd_bf16_split(x, hi, lo, 65536);
    xd_bf16_split_f16(h, hi2, lo2, 65536);
    int finite = 0;
    for (int i = 0; i < 65536; i++) {
        cr_assert(hi[i] == hi2[i] && lo[i] == lo2[i], "float16 0x%04x: the float16 and float32 splits differ", i);
        if (!isfinite(x[i])) {
            cr_assert_eq(lo[i], 0, "0x%04x: lo of infinity/NaN %04x", i, lo[i]);
            continue;
        }
        finite++;
        cr_assert_eq(bf16_value(hi[i]) + bf16_value(lo[i]), x[i], "0x%04x: %g + %g != %g", i, bf16_value(hi[i]),
                     bf16_value(lo[i]), x[i]);
    }
    cr_assert_eq(finite, 63488);
    /* hand values: 1 + 2^-10 is 1 and 2^-10; a float32 value with more
     * than 16 significant bits keeps 16 of them (lo rounded) */
    float v[3] = {1.0f + 0x1p-10f, -3.140625f, 1.0f + 0x1p-10f + 0x1p-20f};
    uint16_t vh[3], vl[3];
    xd_bf16_split(v, vh, vl, 3);
    cr_assert(vh[0] == 0x3F80 && bf16_value(vl[0]) == 0x1p-10f);
    cr_assert_eq(bf16_value(vh[1]) + bf16_value(vl[1]), -3.140625f);
    cr_assert(vh[2] == 0x3F80 && bf16_value(vl[2]) == 0x1p-10f, "1 + 2^-10 + 2^-20: lo %04x", vl[2]);
}

static int node(ts_graph *g, const char *op, const int *ins, int nin, const ts_attr *at, int na)
{
    ts_error e = {0};
    int out;
    cr_assert_geq(ts_graph_add_node(g, op, NULL, ins, nin, at, na, 1, NULL, &out, &e), 0, "%s: %s", op, e.msg);
    return out;
}

/* values uniform in [-a, a], float16-rounded */
static int cst(ts_graph *g, ts_dtype dt, const ts_shape *s, double a, uint64_t *rng)
{
    ts_error e = {0};
    ts_tensor *t = ts_tensor_new(dt, s, &e);
    cr_assert_not_null(t);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) {
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(*rng >> 11) / 9007199254740992.0;
        ts_tensor_set_f64(t, i, ts_dtype_round(TS_F16, a * (2 * u - 1)));
    }
    char name[32];
    snprintf(name, sizeof name, "c%d", g->nvalues);
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert_geq(v, 0, "%s", e.msg);
    return v;
}

/* x -> Conv 3x3 (bias) -> Relu -> Conv 1x1 (bias) -> + x -> Relu, C
 * channels at HxH: a ResNet block's convolutions and post-ops. */
static ts_graph *build_block(ts_dtype dt, int64_t C, int64_t H)
{
    ts_error e = {0};
    ts_graph *g = ts_graph_new("amx", 17);
    uint64_t rng = 7;
    ts_shape xs = {.rank = 4, .dims = {1, C, H, H}}, w3 = {.rank = 4, .dims = {C, C, 3, 3}},
             w1 = {.rank = 4, .dims = {C, C, 1, 1}}, bs = {.rank = 1, .dims = {C}};
    int x = ts_graph_add_input(g, "x", dt, &xs, &e);
    cr_assert_geq(x, 0, "%s", e.msg);
    ts_attr pads = ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4);
    double a3 = 1.0 / sqrt(9.0 * (double)C), a1 = 1.0 / sqrt((double)C);
    int c1 = node(g, "Conv", (const int[]){x, cst(g, dt, &w3, a3, &rng), cst(g, dt, &bs, 0.5, &rng)}, 3, &pads, 1);
    int r1 = node(g, "Relu", &c1, 1, NULL, 0);
    int c2 = node(g, "Conv", (const int[]){r1, cst(g, dt, &w1, a1, &rng), cst(g, dt, &bs, 0.5, &rng)}, 3, NULL, 0);
    int s = node(g, "Add", (const int[]){c2, x}, 2, NULL, 0);
    int y = node(g, "Relu", &s, 1, NULL, 0);
    cr_assert_eq(ts_graph_add_output(g, y, &e), TS_OK);
    return g;
}

/* Builds g's plan; its AMX conv steps in *namx, whether the plan wants
 * them in *wanted; runs it on x into *out when x is given. */
static void plan_of(const ts_graph *g, const char *skip, int *namx, bool *wanted, const ts_tensor *x, ts_tensor **out)
{
    ts_error e = {0};
    ts_plan *p = NULL;
    ts_plan_opts o = {.threads = 2, .skip = skip};
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    const xplan *q = (const xplan *)p;
    *wanted = xd_conv_amx_wanted(q);
    *namx = 0;
    for (int i = 0; i < q->nsteps; i++) *namx += xd_conv_is_amx(&q->steps[i]);
    if (x) {
        ts_plan_stats st;
        ts_plan_stats_get(p, &st);
        cr_assert_eq(st.fallback_steps, 0);
        *out = ts_tensor_new(g->values[g->outputs[0]].dtype, &g->values[g->outputs[0]].shape, &e);
        ts_tensor *in[] = {(ts_tensor *)x};
        cr_assert_eq(ts_plan_run(p, in, out, &e), TS_OK, "%s", e.msg);
    }
    ts_plan_free(p);
}

/* The decision, on any CPU: forced off, no step asks; forced on, a float16
 * plan wants the passes (its steps then depend on oneDNN's kernels: none
 * where oneDNN has no AMX one), a float32 plan and TSOPT_SKIP=half.amx do
 * not. */
Test(half_amx, decision_with_the_cpu_forced)
{
    ts_graph *h = build_block(TS_F16, 32, 8), *f = build_block(TS_F32, 32, 8);
    int n;
    bool w;
    xd_cpu_amx_bf16_force(0);
    plan_of(h, NULL, &n, &w, NULL, NULL);
    cr_assert(!w && n == 0, "no AMX: wanted %d, %d steps on it", w, n);
    xd_cpu_amx_bf16_force(1);
    plan_of(h, NULL, &n, &w, NULL, NULL);
    cr_assert(w, "float16 plan, AMX: not wanted");
    plan_of(h, "half.amx", &n, &w, NULL, NULL);
    cr_assert(!w && n == 0, "TSOPT_SKIP=half.amx: wanted %d, %d steps", w, n);
    plan_of(f, NULL, &n, &w, NULL, NULL);
    cr_assert(!w && n == 0, "float32 plan: wanted %d, %d steps", w, n);
    xd_cpu_amx_bf16_force(-1);
    ts_graph_free(h);
    ts_graph_free(f);
}

static double ulp16(double v)
{
    int ex;
    frexp(fabs(v) > 0x1p-14 ? v : 0x1p-14, &ex);
    return ldexp(1.0, ex - 11);
}

Test(half_amx, block_on_amx_matches_reference_and_float32_kernels)
{
    if (!xd_cpu_amx_bf16()) cr_skip_test("this CPU (oneDNN's effective ISA) has no AMX-BF16: the float32 kernels run");
    const int64_t C = 192, H = 14; /* both convolutions past X3_MIN_MACS (192 x 192 for the 1x1) */
    ts_graph *g = build_block(TS_F16, C, H);
    ts_error e = {0};
    ts_shape xs = {.rank = 4, .dims = {1, C, H, H}};
    ts_tensor *x = ts_tensor_new(TS_F16, &xs, &e), *x64 = ts_tensor_new(TS_F64, &xs, &e), *amx = NULL, *f32k = NULL,
              *ref = NULL;
    fill_f16(x, x64, 3);
    int n, n32;
    bool w, w32;
    plan_of(g, NULL, &n, &w, x, &amx);
    plan_of(g, "half.amx", &n32, &w32, x, &f32k);
    cr_assert(w && n == 2, "AMX CPU: wanted %d, %d of the 2 convolutions on it", w, n);
    cr_assert_eq(n32, 0);
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F64, &x64, &ref, &e), TS_OK, "%s", e.msg);
    double scale = 0, worst = 0, worst32 = 0;
    for (int64_t i = 0; i < ts_tensor_numel(ref); i++) scale = fmax(scale, fabs(ts_tensor_get_f64(ref, i)));
    int64_t differ = 0;
    for (int64_t i = 0; i < ts_tensor_numel(ref); i++) {
        double want = ts_tensor_get_f64(ref, i), got = ts_tensor_get_f64(amx, i), k = ts_tensor_get_f64(f32k, i);
        worst = fmax(worst, fabs(got - want));
        worst32 = fmax(worst32, fabs(got - k));
        differ += got != k;
    }
    cr_assert_leq(worst, 2 * ulp16(scale), "against the reference: %g, scale %g", worst, scale);
    cr_assert_leq(worst32, 2 * ulp16(scale), "against the float32 kernels: %g, scale %g", worst32, scale);
    cr_log_info("AMX passes: max |diff| %g vs reference, %g vs float32 kernels (%lld of %lld differ), scale %g",
                worst, worst32, (long long)differ, (long long)ts_tensor_numel(ref), scale);
    ts_tensor_unref(amx);
    ts_tensor_unref(f32k);
    ts_tensor_unref(ref);
    ts_tensor_unref(x);
    ts_tensor_unref(x64);
    ts_graph_free(g);
}

/* ---- products (dnnl_matmul.c mm_state x3) */

/* values uniform in [-a, a], float16-rounded, then rounded to `also`
 * (TS_BF16: a float16 weight as bfloat16 alone would hold it) unless
 * TS_F16 */
static int cst_r(ts_graph *g, const ts_shape *s, double a, uint64_t *rng, ts_dtype also)
{
    int v = cst(g, TS_F16, s, a, rng);
    ts_tensor *t = g->values[v].constant;
    for (int64_t i = 0; also != TS_F16 && i < ts_tensor_numel(t); i++)
        ts_tensor_set_f64(t, i, ts_dtype_round(TS_F16, ts_dtype_round(also, ts_tensor_get_f64(t, i))));
    return v;
}

static int scalar(ts_graph *g, double v)
{
    ts_error e = {0};
    ts_shape s = {.rank = 0};
    ts_tensor *t = ts_tensor_new(TS_F16, &s, &e);
    ts_tensor_set_f64(t, 0, ts_dtype_round(TS_F16, v));
    char name[32];
    snprintf(name, sizeof name, "s%d", g->nvalues);
    int c = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    return c;
}

/* A ViT encoder's MLP in float16 as PyTorch exports it: x [1, M, D] ->
 * MatMul W1 [D, H] + b1 -> GELU (Div by sqrt 2 stored 16-bit, 1.4140625,
 * Erf, Add 1, Mul, Mul 0.5) -> MatMul W2 [H, D] + b2 -> + x.  Natively
 * (AVX512-FP16, TSOPT_HALF_NATIVE=1) two steps: MatMul + bias + scaled
 * GELU, MatMul + bias + residual sum.  Weights rounded to `wr` on top.
 * relu_in: the first product reads Relu(x) (which dies there, as ViT's
 * LayerNorm output does), the residual x. */
static ts_graph *build_mlp_in(int64_t M, int64_t D, int64_t H, ts_dtype wr, bool relu_in)
{
    ts_error e = {0};
    ts_graph *g = ts_graph_new("mlp", 17);
    uint64_t rng = 11;
    ts_shape xs = {.rank = 3, .dims = {1, M, D}}, w1 = {.rank = 2, .dims = {D, H}}, w2 = {.rank = 2, .dims = {H, D}},
             b1 = {.rank = 1, .dims = {H}}, b2 = {.rank = 1, .dims = {D}};
    int x = ts_graph_add_input(g, "x", TS_F16, &xs, &e);
    cr_assert_geq(x, 0, "%s", e.msg);
    int xin = relu_in ? node(g, "Relu", &x, 1, NULL, 0) : x;
    int h = node(g, "MatMul", (const int[]){xin, cst_r(g, &w1, 1.0 / sqrt((double)D), &rng, wr)}, 2, NULL, 0);
    h = node(g, "Add", (const int[]){h, cst_r(g, &b1, 0.5, &rng, TS_F16)}, 2, NULL, 0);
    int er = node(g, "Erf", (const int[]){node(g, "Div", (const int[]){h, scalar(g, 1.4142135623730951)}, 2, NULL, 0)}, 1,
                  NULL, 0);
    int ge = node(g, "Mul", (const int[]){h, node(g, "Add", (const int[]){er, scalar(g, 1.0)}, 2, NULL, 0)}, 2, NULL, 0);
    ge = node(g, "Mul", (const int[]){ge, scalar(g, 0.5)}, 2, NULL, 0);
    int y = node(g, "MatMul", (const int[]){ge, cst_r(g, &w2, 1.0 / sqrt((double)H), &rng, wr)}, 2, NULL, 0);
    y = node(g, "Add", (const int[]){y, cst_r(g, &b2, 0.5, &rng, TS_F16)}, 2, NULL, 0);
    y = node(g, "Add", (const int[]){y, x}, 2, NULL, 0);
    cr_assert_eq(ts_graph_add_output(g, y, &e), TS_OK);
    return g;
}

static ts_graph *build_mlp(int64_t M, int64_t D, int64_t H, ts_dtype wr) { return build_mlp_in(M, D, H, wr, false); }

/* g's plan's steps running products on the passes */
static int plan_mm_amx(const ts_graph *g, const char *skip)
{
    ts_error e = {0};
    ts_plan *p = NULL;
    ts_plan_opts o = {.threads = 2, .skip = skip};
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    const xplan *q = (const xplan *)p;
    int k = 0;
    for (int i = 0; i < q->nsteps; i++) k += xd_matmul_is_amx(&q->steps[i]);
    ts_plan_free(p);
    return k;
}

/* The decision, on any CPU: the gate (forced off: never; forced on: a
 * float16 plan past the size floor wants it, TSOPT_SKIP=half.amx and a
 * float32 plan do not) and the floor (196 rows of A, 32768 weights): a
 * batch-1 classifier's one row stays on the float32 kernels. */
Test(half_amx, matmul_decision_with_the_cpu_forced)
{
    ts_graph *g = build_mlp(197, 64, 256, TS_F16);
    ts_error e = {0};
    ts_plan *p = NULL, *p32 = NULL;
    ts_plan_opts o = {.threads = 1}, oskip = {.threads = 1, .skip = "half.amx"};
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    const xplan *q = (const xplan *)p;
    xd_cpu_amx_bf16_force(0);
    cr_assert(!xd_matmul_amx_wanted(q, 197, 768, 3072), "no AMX: wanted");
    cr_assert_eq(plan_mm_amx(g, NULL), 0, "no AMX: products on the passes");
    xd_cpu_amx_bf16_force(1);
    cr_assert(xd_matmul_amx_wanted(q, 197, 768, 3072), "AMX, float16, ViT's MLP: not wanted");
    cr_assert(xd_matmul_amx_wanted(q, 196, 128, 256), "AMX, at the floor: not wanted");
    cr_assert(!xd_matmul_amx_wanted(q, 1, 768, 1000), "AMX, one row: wanted");
    cr_assert(!xd_matmul_amx_wanted(q, 195, 768, 3072), "AMX, 195 rows: wanted");
    cr_assert(!xd_matmul_amx_wanted(q, 4096, 64, 256), "AMX, 16384 weights: wanted");
    ts_plan_free(p);
    cr_assert_eq(ts_plan_build(g, &oskip, &p, &e), TS_OK, "%s", e.msg);
    cr_assert(!xd_matmul_amx_wanted((const xplan *)p, 197, 768, 3072), "TSOPT_SKIP=half.amx: wanted");
    cr_assert_eq(plan_mm_amx(g, "half.amx"), 0, "TSOPT_SKIP=half.amx: products on the passes");
    ts_plan_free(p);
    ts_graph *f = build_block(TS_F32, 32, 8);
    cr_assert_eq(ts_plan_build(f, &o, &p32, &e), TS_OK, "%s", e.msg);
    cr_assert(!xd_matmul_amx_wanted((const xplan *)p32, 197, 768, 3072), "float32 plan: wanted");
    ts_plan_free(p32);
    ts_graph_free(f);
    xd_cpu_amx_bf16_force(-1);
    ts_graph_free(g);
}

static ts_tensor *run_plan(const ts_graph *g, const char *skip, const ts_tensor *x, int *namx)
{
    ts_error e = {0};
    ts_plan *p = NULL;
    ts_plan_opts o = {.threads = 2, .skip = skip};
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    const xplan *q = (const xplan *)p;
    *namx = 0;
    for (int i = 0; i < q->nsteps; i++) *namx += xd_matmul_is_amx(&q->steps[i]);
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    cr_assert_eq(st.fallback_steps, 0);
    ts_tensor *out = ts_tensor_new(TS_F16, &g->values[g->outputs[0]].shape, &e);
    ts_tensor *in[] = {(ts_tensor *)x};
    cr_assert_eq(ts_plan_run(p, in, &out, &e), TS_OK, "%s", e.msg);
    ts_plan_free(p);
    return out;
}

static double mean_diff(const ts_tensor *a, const ts_tensor *b)
{
    double w = 0;
    for (int64_t i = 0; i < ts_tensor_numel(a); i++) w += fabs(ts_tensor_get_f64(a, i) - ts_tensor_get_f64(b, i));
    return w / (double)ts_tensor_numel(a);
}

static double max_diff(const ts_tensor *a, const ts_tensor *b)
{
    double w = 0;
    for (int64_t i = 0; i < ts_tensor_numel(a); i++) w = fmax(w, fabs(ts_tensor_get_f64(a, i) - ts_tensor_get_f64(b, i)));
    return w;
}

/* The MLP on the passes, both products in three column chunks (D 512, H
 * 1536: the split weight 3 MiB, over X3_CHUNK_BYTES; the second's chunks
 * start from the residual's columns, the first's take their bias columns):
 * within 4 float16 ulps of the output's scale from the reference
 * interpreter (which rounds every node, the plan at step outputs only) and
 * 2 from the float32-kernel plan (TSOPT_SKIP=half.amx), and on average
 * within 1.1x of the latter's distance from the reference.  A wrong split
 * fails that: the same MLP with bfloat16 weights (the Wl.Xh pass left out)
 * is measured against the reference here and must miss the mean bound. */
Test(half_amx, vit_mlp_on_amx_matches_reference_and_float32_kernels)
{
    if (!xd_cpu_amx_bf16()) cr_skip_test("this CPU (oneDNN's effective ISA) has no AMX-BF16: the float32 kernels run");
    const int64_t M = 197, D = 512, H = 1536;
    setenv("TSOPT_HALF_NATIVE", "1", 1);
    ts_graph *g = build_mlp(M, D, H, TS_F16), *wrong = build_mlp(M, D, H, TS_BF16);
    ts_error e = {0};
    ts_shape xs = {.rank = 3, .dims = {1, M, D}};
    ts_tensor *x = ts_tensor_new(TS_F16, &xs, &e), *x64 = ts_tensor_new(TS_F64, &xs, &e), *ref = NULL, *refw = NULL;
    fill_f16(x, x64, 5);
    int n, n32;
    ts_tensor *amx = run_plan(g, NULL, x, &n), *f32k = run_plan(g, "half.amx", x, &n32);
    cr_assert_eq(n, 2, "AMX CPU: %d of the 2 products on the passes", n);
    cr_assert_eq(n32, 0);
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F64, &x64, &ref, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_run_reference(wrong, TS_DOMAIN_F64, &x64, &refw, &e), TS_OK, "%s", e.msg);
    double scale = 0;
    for (int64_t i = 0; i < ts_tensor_numel(ref); i++) scale = fmax(scale, fabs(ts_tensor_get_f64(ref, i)));
    double worst = max_diff(amx, ref), worst32 = max_diff(amx, f32k), planted = max_diff(refw, ref);
    double mean = mean_diff(amx, ref), mean32 = mean_diff(f32k, ref), mplanted = mean_diff(refw, ref);
    cr_assert_leq(worst, 4 * ulp16(scale), "against the reference: %g, scale %g", worst, scale);
    cr_assert_leq(worst32, 2 * ulp16(scale), "against the float32 kernels: %g, scale %g", worst32, scale);
    /* on average as near the reference as the float32 kernels (measured
     * 9.52e-5 vs 9.51e-5); bfloat16 weights are 2.6x as far (2.52e-4),
     * while their largest error is 2 ulps: the mean is what refutes them */
    cr_assert_leq(mean, 1.1 * mean32, "mean |diff| %g vs the float32 kernels' %g", mean, mean32);
    cr_assert_gt(mplanted, 2 * mean32, "bfloat16 weights: mean |diff| %g, float32 kernels %g", mplanted, mean32);
    cr_log_info("ViT MLP on AMX: max |diff| %g vs reference, %g vs float32 kernels; mean %g, float32 kernels %g, "
                "bfloat16 weights %g (max %g); scale %g",
                worst, worst32, mean, mean32, mplanted, planted, scale);
    unsetenv("TSOPT_HALF_NATIVE");
    ts_tensor_unref(amx);
    ts_tensor_unref(f32k);
    ts_tensor_unref(ref);
    ts_tensor_unref(refw);
    ts_tensor_unref(x);
    ts_tensor_unref(x64);
    ts_graph_free(g);
    ts_graph_free(wrong);
}

static ts_tensor *run_plan_stats(const ts_graph *g, const char *skip, const ts_tensor *x, ts_plan_stats *st)
{
    ts_error e = {0};
    ts_plan *p = NULL;
    ts_plan_opts o = {.threads = 2, .skip = skip};
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    ts_plan_stats_get(p, st);
    ts_tensor *out = ts_tensor_new(TS_F16, &g->values[g->outputs[0]].shape, &e);
    ts_tensor *in[] = {(ts_tensor *)x};
    cr_assert_eq(ts_plan_run(p, in, &out, &e), TS_OK, "%s", e.msg);
    ts_plan_free(p);
    return out;
}

/* The split's both halves where A lies (xd_bf16_split_inplace: A's rows
 * split in place, then the half-rows permuted into an Xh matrix followed
 * by an Xl one) equal the out-of-place split, for odd shapes, one row, and
 * values off the float16 grid. */
Test(half_amx, split_in_place_equals_split)
{
    const int64_t shapes[][2] = {{1, 5}, {2, 16}, {7, 37}, {197, 768}, {33, 1030}, {64, 3072}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        int64_t rows = shapes[c][0], k = shapes[c][1], n = rows * k;
        float *a = malloc(sizeof(float) * (size_t)n);
        uint16_t *hi = malloc(2 * (size_t)n), *lo = malloc(2 * (size_t)n);
        void *tmp = malloc(xd_bf16_split_inplace_tmp(rows, k, 3));
        uint64_t rng = 9 + c;
        for (int64_t i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            double u = 2 * ((double)(rng >> 11) / 9007199254740992.0) - 1;
            a[i] = (float)(c % 2 ? u * 1000 : ts_dtype_round(TS_F16, u * 8));
        }
        xd_bf16_split(a, hi, lo, (size_t)n);
        xd_bf16_split_inplace(a, rows, k, tmp, 3);
        const uint16_t *u = (const uint16_t *)a;
        cr_assert(!memcmp(u, hi, 2 * (size_t)n), "%lldx%lld: hi values differ", (long long)rows, (long long)k);
        cr_assert(!memcmp(u + n, lo, 2 * (size_t)n), "%lldx%lld: lo values differ", (long long)rows, (long long)k);
        free(a);
        free(hi);
        free(lo);
        free(tmp);
    }
}

/* ViT's MLP at batch 4 in small: each product's input dies there, so
 * both its halves are split where it lies (no scratch for Xl), and the
 * passes take chunks whose weight and dst fit one L2 (D 512, H 1536: four
 * chunks of each product with a 2 MiB L2, two at MM_CHUNK_BYTES).  Each shrinks the arena (set at the
 * first product: Relu(x), x, the hidden tensor, the chunk); the in-place
 * split gives the same bits as the scratch one (TSOPT_SKIP=
 * half.amx_inplace_lo), the smaller chunks (another accumulation order in
 * oneDNN's kernel) agree within 2 float16 ulps of the output's scale. */
Test(half_amx, mlp_lo_in_place_and_small_chunks_shrink_the_arena)
{
    if (!xd_cpu_amx_bf16()) cr_skip_test("this CPU (oneDNN's effective ISA) has no AMX-BF16: the float32 kernels run");
    const int64_t M = 4 * 197, D = 512, H = 1536;
    setenv("TSOPT_HALF_NATIVE", "1", 1);
    ts_graph *g = build_mlp_in(M, D, H, TS_F16, true);
    ts_error e = {0};
    ts_shape xs = {.rank = 3, .dims = {1, M, D}};
    ts_tensor *x = ts_tensor_new(TS_F16, &xs, &e), *x64 = ts_tensor_new(TS_F64, &xs, &e);
    fill_f16(x, x64, 13);
    ts_plan_stats now, lo, chunk;
    ts_tensor *a = run_plan_stats(g, NULL, x, &now), *b = run_plan_stats(g, "half.amx_inplace_lo", x, &lo),
              *c = run_plan_stats(g, "half.amx_chunk", x, &chunk);
    cr_assert(!memcmp(a->data, b->data, a->nbytes), "the in-place split's result differs from the scratch one's");
    double scale = 0;
    for (int64_t i = 0; i < ts_tensor_numel(c); i++) scale = fmax(scale, fabs(ts_tensor_get_f64(c, i)));
    cr_assert_leq(max_diff(a, c), 2 * ulp16(scale), "L2 vs 2 MiB chunks: %g, scale %g", max_diff(a, c), scale);
    /* Xl of the first product: M x D bfloat16 values */
    cr_assert_leq(now.arena_bytes + (size_t)(M * D) * 2, lo.arena_bytes, "arena %zu, Xl in scratch %zu",
                  now.arena_bytes, lo.arena_bytes);
    cr_assert_lt(now.arena_bytes, chunk.arena_bytes, "arena %zu, 2 MiB chunks %zu", now.arena_bytes, chunk.arena_bytes);
    cr_log_info("MLP %lldx%lldx%lld arena: %zu, Xl in scratch %zu, 2 MiB chunks %zu", (long long)M, (long long)D,
                (long long)H, now.arena_bytes, lo.arena_bytes, chunk.arena_bytes);
    unsetenv("TSOPT_HALF_NATIVE");
    ts_tensor_unref(a);
    ts_tensor_unref(b);
    ts_tensor_unref(c);
    ts_tensor_unref(x);
    ts_tensor_unref(x64);
    ts_graph_free(g);
}

static ts_graph *build_product(int64_t M, int64_t K, int64_t N);

/* The chunk columns of the passes in g's plan (one product), and its
 * output for x in *out. */
static int64_t plan_cols(const ts_graph *g, const char *skip, const ts_tensor *x, ts_tensor **out)
{
    ts_error e = {0};
    ts_plan *p = NULL;
    ts_plan_opts o = {.threads = 2, .skip = skip};
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    const xplan *q = (const xplan *)p;
    int64_t cols = 0;
    for (int i = 0; i < q->nsteps; i++)
        if (xd_matmul_amx_cols(&q->steps[i])) cols = xd_matmul_amx_cols(&q->steps[i]);
    *out = ts_tensor_new(TS_F16, &g->values[g->outputs[0]].shape, &e);
    ts_tensor *in[] = {(ts_tensor *)x};
    cr_assert_eq(ts_plan_run(p, in, out, &e), TS_OK, "%s", e.msg);
    ts_plan_free(p);
    return cols;
}

/* The passes' chunk per shape (dnnl_matmul.c x3_cols): the widest whole
 * 64-column panels dividing N whose split weight and float32 dst (4 bytes
 * each per K x cols weight and M x cols output) fit this CPU's L2, so the
 * chunk narrows as the rows grow.  ViT-B/16's four products at batch 1
 * and 4: with a 2 MiB L2 its MLP's first product takes 512 columns at
 * batch 1 and 256 at 4, where the fixed 1 MiB weight chunk took 256 at
 * both (b1 then 12 chunks of the second product of 64 columns each, 6
 * here).  Each shape's output agrees with the fixed chunk's
 * (TSOPT_SKIP=half.amx_chunk_l2; another accumulation order in oneDNN)
 * within 2 float16 ulps of its scale. */
Test(half_amx, chunk_fits_l2_and_narrows_with_rows)
{
    if (!xd_cpu_amx_bf16()) cr_skip_test("this CPU (oneDNN's effective ISA) has no AMX-BF16: the float32 kernels run");
    const int64_t l2 = xroof_caches_get().l2;
    const int64_t shapes[][3] = {{197, 768, 3072}, {788, 768, 3072}, {197, 3072, 768}, {788, 3072, 768},
                                 {197, 768, 2304}, {788, 768, 2304}, {197, 768, 768},   {788, 768, 768}};
    int64_t got[8];
    for (int c = 0; c < 8; c++) {
        const int64_t M = shapes[c][0], K = shapes[c][1], N = shapes[c][2];
        int64_t want = N;
        if (K * N * 4 > l2) {
            want = 64;
            for (int64_t w = 64; w <= N; w += 64)
                if (N % w == 0 && w * (K + M) * 4 <= l2) want = w;
        }
        ts_graph *g = build_product(M, K, N);
        ts_error e = {0};
        ts_shape xs = {.rank = 2, .dims = {M, K}};
        ts_tensor *x = ts_tensor_new(TS_F16, &xs, &e), *x64 = ts_tensor_new(TS_F64, &xs, &e), *y = NULL, *yf = NULL;
        fill_f16(x, x64, 31 + (uint64_t)c);
        got[c] = plan_cols(g, NULL, x, &y);
        int64_t fixed = plan_cols(g, "half.amx_chunk_l2", x, &yf);
        cr_log_info("%lldx%lldx%lld: %lld columns a chunk (L2 %lld KiB), %lld at the fixed 1 MiB", (long long)M,
                    (long long)K, (long long)N, (long long)got[c], (long long)(l2 >> 10), (long long)fixed);
        cr_assert_eq(got[c], want, "%lldx%lldx%lld: %lld columns, the L2 rule gives %lld", (long long)M, (long long)K,
                     (long long)N, (long long)got[c], (long long)want);
        double scale = 0;
        for (int64_t i = 0; i < ts_tensor_numel(yf); i++) scale = fmax(scale, fabs(ts_tensor_get_f64(yf, i)));
        cr_assert_leq(max_diff(y, yf), 2 * ulp16(scale), "%lldx%lldx%lld: %g from the fixed chunk's, scale %g",
                      (long long)M, (long long)K, (long long)N, max_diff(y, yf), scale);
        ts_tensor_unref(y);
        ts_tensor_unref(yf);
        ts_tensor_unref(x);
        ts_tensor_unref(x64);
        ts_graph_free(g);
    }
    for (int c = 0; c < 8; c += 2)
        cr_assert_geq(got[c], got[c + 1], "batch 1 %lld columns, batch 4 %lld", (long long)got[c], (long long)got[c + 1]);
    if (l2 == 2L << 20) /* this project's Intel Xeon: the figures in dnnl_matmul.c's comment */
        cr_assert(got[0] == 512 && got[1] == 256 && got[2] == 128 && got[3] == 128, "%lld %lld %lld %lld",
                  (long long)got[0], (long long)got[1], (long long)got[2], (long long)got[3]);
}

/* How much the peak resident set grew while g's plan was built (the caller
 * giving its weights up), and the plan's output for x in *out. */
static size_t build_peak(ts_graph *g, const char *skip, const ts_tensor *x, ts_tensor **out, int *namx)
{
    ts_error e = {0};
    ts_plan *p = NULL;
    ts_plan_opts o = {.threads = 2, .skip = skip, .release_packed_weights = true};
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) cr_skip_test("no /proc/self/clear_refs: the peak cannot be reset");
    fputs("5", f); /* VmHWM := VmRSS */
    fclose(f);
    size_t base = xmem_rss();
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    size_t peak = xmem_peak_rss();
    const xplan *q = (const xplan *)p;
    *namx = 0;
    for (int i = 0; i < q->nsteps; i++) *namx += xd_matmul_is_amx(&q->steps[i]);
    *out = ts_tensor_new(TS_F16, &g->values[g->outputs[0]].shape, &e);
    ts_tensor *in[] = {(ts_tensor *)x};
    cr_assert_eq(ts_plan_run(p, in, out, &e), TS_OK, "%s", e.msg);
    ts_plan_free(p);
    return peak > base ? peak - base : 0;
}

static ts_graph *build_product(int64_t M, int64_t K, int64_t N)
{
    ts_error e = {0};
    ts_graph *g = ts_graph_new("mm", 17);
    uint64_t rng = 17;
    ts_shape xs = {.rank = 2, .dims = {M, K}}, ws = {.rank = 2, .dims = {K, N}};
    int x = ts_graph_add_input(g, "x", TS_F16, &xs, &e);
    cr_assert_geq(x, 0, "%s", e.msg);
    int y = node(g, "MatMul", (const int[]){x, cst(g, TS_F16, &ws, 1.0 / sqrt((double)K), &rng)}, 2, NULL, 0);
    cr_assert_eq(ts_graph_add_output(g, y, &e), TS_OK);
    return g;
}

/* Peaks mean nothing under ASan (its quarantine holds freed memory). */
#if defined(__SANITIZE_ADDRESS__)
#define PEAKS_MEAN_SOMETHING 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PEAKS_MEAN_SOMETHING 0
#endif
#endif
#ifndef PEAKS_MEAN_SOMETHING
#define PEAKS_MEAN_SOMETHING 1
#endif

/* A float16 weight the passes pack (32 MiB, 64 MiB widened): narrowed to
 * float16 where its widened copy lies, then packed from there, the plan's
 * build grows the resident set by about the weight once (the widened copy
 * with the original given back as it was read; then the narrowed copy and
 * the packed one); packed from float32 (TSOPT_SKIP=half.amx_narrow), the
 * widened copy and the packed one sit side by side: twice.  The same
 * packed bits: the outputs are equal. */
Test(half_amx, weight_packed_from_float16_where_it_was_widened)
{
    if (!xd_cpu_amx_bf16()) cr_skip_test("this CPU (oneDNN's effective ISA) has no AMX-BF16: the float32 kernels run");
    if (!PEAKS_MEAN_SOMETHING) cr_skip_test("a sanitizer holds freed memory back: peaks mean nothing");
    const int64_t M = 256, K = 4096, N = 4096;
    const double w16 = (double)(K * N) * 2;
    ts_graph *a = build_product(M, K, N), *b = build_product(M, K, N);
    ts_error e = {0};
    ts_shape xs = {.rank = 2, .dims = {M, K}};
    ts_tensor *x = ts_tensor_new(TS_F16, &xs, &e), *x64 = ts_tensor_new(TS_F64, &xs, &e), *ya = NULL, *yb = NULL;
    fill_f16(x, x64, 21);
    int na, nb;
    size_t grew_b = build_peak(b, "half.amx_narrow", x, &yb, &nb), grew_a = build_peak(a, NULL, x, &ya, &na);
    cr_assert(na == 1 && nb == 1, "the product on the passes: %d, %d", na, nb);
    cr_assert(!memcmp(ya->data, yb->data, ya->nbytes), "packed from float16 and from float32: the outputs differ");
    cr_log_info("build peak grew %.1f MiB from float16, %.1f from float32, for a %.1f MiB weight", grew_a / 1048576.0,
                grew_b / 1048576.0, w16 / 1048576.0);
    cr_assert_leq((double)grew_a, 1.5 * w16, "from float16: the peak grew %.1f MiB for a %.1f MiB weight",
                  grew_a / 1048576.0, w16 / 1048576.0);
    ts_tensor_unref(ya);
    ts_tensor_unref(yb);
    ts_tensor_unref(x);
    ts_tensor_unref(x64);
    ts_graph_free(a);
    ts_graph_free(b);
}
