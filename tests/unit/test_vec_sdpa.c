/* vec.sdpa (src/vec/vec_sdpa.c, grouped by lower_attention.c's
 * xgroup_sdpa): an encoder's MatMul(Q, Kt) - [Mul c] - Softmax - MatMul(P, V)
 * [- Transpose merging the heads] as one step.  Each graph is checked
 * against the reference interpreter (1 and 2 threads) and against the
 * unfused plan (TSOPT_SKIP=vec.sdpa) within 1e-5 of the largest output; the
 * fused plan holds one vec.sdpa step per block where the CPU has AVX-512
 * (none elsewhere: the nodes lower one by one), the skip's none.  Covers
 * the encoder's shape with the Transpose after it, ViT-like sizes that are
 * no whole number of row blocks or key vectors (37 rows and keys, widths
 * 24 and 48, a scale, batch and heads), a row of scores far below its
 * maximum (exponentials under e^-80 give 0), and what declines. */
#define XT_GLOBAL_GRAPH
#include "exec_check.h"

TestSuite(vec_sdpa, .fini = xt_done);

/* Y = MatMul(Softmax(MatMul(q, kt) [* c]), v) */
static int block(int q, int kt, int v, bool scale)
{
    int sc = op("MatMul", INS(q, kt), NOATTR);
    if (scale) sc = op("Mul", INS(sc, F32("1", 0.125)), NOATTR);
    int p = op("Softmax", INS(sc), ATTRS(ts_attr_int("axis", -1)));
    return op("MatMul", INS(p, v), NOATTR);
}

static ts_plan *plan_run(const ts_plan_opts *o, uint64_t seed, float lo, float hi, ts_tensor **out)
{
    ts_error e = {0};
    ts_plan *p = NULL;
    cr_assert_eq(ts_plan_build(G, o, &p, &e), TS_OK, "%s", e.msg);
    ts_tensor *in[8];
    for (int i = 0; i < G->ninputs; i++) {
        in[i] = ts_tensor_new(TS_F32, &G->values[G->inputs[i]].shape, &e);
        ts_tensor_fill_random(in[i], &seed, lo, hi);
    }
    for (int i = 0; i < G->noutputs; i++) out[i] = ts_tensor_new(TS_F32, &G->values[G->outputs[i]].shape, &e);
    cr_assert_eq(ts_plan_run(p, in, out, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < G->ninputs; i++) ts_tensor_unref(in[i]);
    return p;
}

/* G against the reference, then fused vs unfused on inputs in [lo, hi):
 * `fused` vec.sdpa steps where the CPU has AVX-512, none in the skip's */
static void check_range(int fused, float lo, float hi)
{
    uint64_t seed = 3;
    if (!__builtin_cpu_supports("avx512f")) fused = 0;
    cr_assert_eq(xt_kernel_steps_1_2(G, "vec.sdpa", &seed), fused);
    for (int t = 1; t <= 2; t++) {
        ts_tensor *a[4], *b[4];
        ts_plan *pa = plan_run(&(ts_plan_opts){.threads = t}, 5, lo, hi, a);
        ts_plan *pb = plan_run(&(ts_plan_opts){.threads = t, .skip = "vec.sdpa"}, 5, lo, hi, b);
        cr_assert_eq(xt_steps_of(pa, "vec.sdpa"), fused);
        cr_assert_eq(xt_steps_of(pb, "vec.sdpa"), 0);
        for (int i = 0; i < G->noutputs; i++) {
            const float *x = a[i]->data, *y = b[i]->data;
            double worst = 0, big = 1;
            for (int64_t k = 0; k < ts_tensor_numel(a[i]); k++) {
                cr_assert(!isnan(x[k]) && !isnan(y[k]), "output %d, %lld: NaN", i, (long long)k);
                big = fmax(big, fabs(y[k]));
                worst = fmax(worst, fabs((double)x[k] - y[k]));
            }
            cr_assert_leq(worst, 1e-5 * big, "threads %d, output %d: fused differs from the unfused by %g", t, i, worst);
            ts_tensor_unref(a[i]);
            ts_tensor_unref(b[i]);
        }
        ts_plan_free(pa);
        ts_plan_free(pb);
    }
}

static void check(int fused) { check_range(fused, -1, 1); }

/* nn.TransformerEncoder's attention: 8 heads of 32, 128 tokens, the
 * heads merged back by Transpose(1, 0, 2) (the step writes [s, h, dv]) */
Test(vec_sdpa, encoder_heads_merged)
{
    graph(17);
    int q = input("8x128x32"), kt = input("8x32x128"), v = input("8x128x32");
    static const int64_t perm[] = {1, 0, 2};
    output(op("Transpose", INS(block(q, kt, v, false)), ATTRS(ts_attr_ints("perm", perm, 3))));
    check(1);
}

/* 37 query rows and keys (a short last row block, a masked last key
 * vector), d 24, dv 48, a scale, batch 2 of 3 heads; then the Transpose
 * that merges the heads in rank 4 ([b, h, s, dv] -> [b, s, h, dv]) */
Test(vec_sdpa, ragged_sizes)
{
    graph(17);
    int q = input("2x3x37x24"), kt = input("2x3x24x37"), v = input("2x3x37x48");
    output(block(q, kt, v, true));
    check(1);
    xt_done();
    graph(17);
    q = input("2x3x37x24"), kt = input("2x3x24x37"), v = input("2x3x37x48");
    static const int64_t perm[] = {0, 2, 1, 3};
    output(op("Transpose", INS(block(q, kt, v, true)), ATTRS(ts_attr_ints("perm", perm, 4))));
    check(1);
}

/* Scores in the hundreds (inputs in [-8, 8), d 16; numpy's draw of the
 * same distribution: |scores| up to ~370, 86% more than 80 below their
 * row's maximum): their exponentials are 0, no NaN, as unfused */
Test(vec_sdpa, far_below_the_maximum)
{
    graph(17);
    int q = input("2x21x16"), kt = input("2x16x50"), v = input("2x50x16");
    output(block(q, kt, v, false));
    check_range(1, -8, 8);
}

/* Not taken: dv no whole number of vectors; the scores also an output;
 * a Softmax over another axis; a Transpose after it that moves more than
 * the heads (the step forms, the Transpose stays a step of its own) */
Test(vec_sdpa, declines)
{
    graph(17);
    int q = input("2x16x16"), kt = input("2x16x16"), v = input("2x16x20");
    output(block(q, kt, v, false));
    check(0);
    xt_done();
    graph(17);
    q = input("2x16x16"), kt = input("2x16x16"), v = input("2x16x16");
    int sc = op("MatMul", INS(q, kt), NOATTR);
    output(sc);
    output(op("MatMul", INS(op("Softmax", INS(sc), ATTRS(ts_attr_int("axis", -1))), v), NOATTR));
    check(0);
    xt_done();
    graph(17);
    q = input("2x16x16"), kt = input("2x16x16"), v = input("2x16x16");
    sc = op("MatMul", INS(q, kt), NOATTR);
    output(op("MatMul", INS(op("Softmax", INS(sc), ATTRS(ts_attr_int("axis", 1))), v), NOATTR));
    check(0);
    xt_done();
    graph(17);
    q = input("2x16x16"), kt = input("2x16x16"), v = input("2x16x16");
    static const int64_t perm[] = {2, 1, 0};
    output(op("Transpose", INS(block(q, kt, v, false)), ATTRS(ts_attr_ints("perm", perm, 3))));
    check(1);
}
