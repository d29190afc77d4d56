/* vec.attention (src/vec/vec_attention.c): a decoder's Transpose(K) -
 * MatMul - Mul - Where - Softmax - MatMul as one step.  Each shape is
 * checked against the reference interpreter (1 and 2 threads) and against
 * the unfused plan (TSOPT_SKIP=vec.attention: the nodes lowered one by one)
 * within 1e-5 of the largest output; the fused plan must hold one
 * vec.attention step per block and the unfused none.  Covers a token over
 * a cache (one query row, a mask row), a chunk of tokens (causal mask,
 * Where's other operand order, no scale), what declines (a prompt's square
 * block, K transposed for a second reader), and a plan re-bound to a longer cache and back (ts_plan_rebind resizes
 * the step, or lowers it again, and equals a cold plan bit for bit). */
#define XT_GLOBAL_GRAPH
#include "exec_check.h"

TestSuite(vec_attention, .fini = xt_done);

static const int64_t PERM[] = {0, 1, 3, 2};

/* The attention block on Q [b,h,s,d], K/V [b,h,t,d]: the mask entry (i, j)
 * is true for keys after the query's place (j > past + i); fills: Where(M,
 * -inf, S) as torch's masked_fill, else Where(!M, S, -inf). */
static int block(int q, int k, int v, int s, int t, bool scale, bool fills)
{
    int kt = op("Transpose", INS(k), ATTRS(ts_attr_ints("perm", PERM, 4)));
    int sc = op("MatMul", INS(q, kt), NOATTR);
    if (scale) sc = op("Mul", INS(sc, F32("1", 0.25)), NOATTR);
    double m[64 * 64];
    for (int i = 0; i < s; i++)
        for (int j = 0; j < t; j++) m[i * t + j] = (j > t - s + i) == fills;
    char dims[32];
    snprintf(dims, sizeof dims, "%dx%d", s, t);
    int mask = xt_const_values(G, TS_BOOL, dims, m, s * t), inf = F32("1", -INFINITY);
    sc = fills ? op("Where", INS(mask, inf, sc), NOATTR) : op("Where", INS(mask, sc, inf), NOATTR);
    int p = op("Softmax", INS(sc), ATTRS(ts_attr_int("axis", -1)));
    return op("MatMul", INS(p, v), NOATTR);
}

/* Outputs of G planned with o on inputs drawn from seed (caller frees). */
static ts_plan *plan_run(const ts_plan_opts *o, uint64_t seed, ts_tensor **out)
{
    ts_error e = {0};
    ts_plan *p = NULL;
    cr_assert_eq(ts_plan_build(G, o, &p, &e), TS_OK, "%s", e.msg);
    ts_tensor *in[8];
    for (int i = 0; i < G->ninputs; i++) {
        in[i] = ts_tensor_new(TS_F32, &G->values[G->inputs[i]].shape, &e);
        ts_tensor_fill_random(in[i], &seed, -1, 1);
    }
    for (int i = 0; i < G->noutputs; i++) out[i] = ts_tensor_new(TS_F32, &G->values[G->outputs[i]].shape, &e);
    cr_assert_eq(ts_plan_run(p, in, out, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < G->ninputs; i++) ts_tensor_unref(in[i]);
    return p;
}

static double max_diff(const ts_tensor *a, const ts_tensor *b, double *big)
{
    const float *x = a->data, *y = b->data;
    double worst = 0;
    *big = 1;
    for (int64_t k = 0; k < ts_tensor_numel(a); k++) {
        *big = fmax(*big, fabs(y[k]));
        worst = fmax(worst, fabs((double)x[k] - y[k]));
    }
    return worst;
}

/* G against the reference, then fused vs unfused: `fused` steps of
 * vec.attention in the fused plan, none in the skip's */
static void check(int fused)
{
    uint64_t seed = 11;
    cr_assert_eq(xt_kernel_steps_1_2(G, "vec.attention", &seed), fused);
    for (int t = 1; t <= 2; t++) {
        ts_tensor *a[4], *b[4];
        ts_plan *pa = plan_run(&(ts_plan_opts){.threads = t}, 5, a);
        ts_plan *pb = plan_run(&(ts_plan_opts){.threads = t, .skip = "vec.attention"}, 5, b);
        cr_assert_eq(xt_steps_of(pb, "vec.attention"), 0);
        for (int i = 0; i < G->noutputs; i++) {
            double big, d = max_diff(a[i], b[i], &big);
            cr_assert_leq(d, 1e-5 * big, "threads %d, output %d: fused differs from the unfused by %g", t, i, d);
            ts_tensor_unref(a[i]);
            ts_tensor_unref(b[i]);
        }
        ts_plan_free(pa);
        ts_plan_free(pb);
    }
}

/* A token: one query row over a cache of 37, 8 heads of 64, batch 2 */
Test(vec_attention, token_over_cache)
{
    graph(17);
    int q = input("2x8x1x64"), k = input("2x8x37x64"), v = input("2x8x37x64");
    output(block(q, k, v, 1, 37, true, true));
    check(1);
}

/* A chunk of 4 tokens after 8 (causal: row i sees keys 0 .. 8 + i);
 * Where's kept operand first; no scale; V wider than K */
Test(vec_attention, chunk_causal)
{
    graph(17);
    int q = input("1x4x4x16"), k = input("1x4x12x16"), v = input("1x4x12x32");
    output(block(q, k, v, 4, 12, false, false));
    check(1);
}

/* A prompt's square block (12 query rows): oneDNN's matmuls keep it */
Test(vec_attention, prompt_declines)
{
    graph(17);
    int q = input("1x4x12x16"), k = input("1x4x12x16"), v = input("1x4x12x16");
    output(block(q, k, v, 12, 12, true, true));
    check(0);
}

/* K transposed for a second reader: declined, nothing fused */
Test(vec_attention, shared_transpose_declines)
{
    graph(17);
    int q = input("1x2x1x16"), k = input("1x2x9x16"), v = input("1x2x9x16");
    output(block(q, k, v, 1, 9, true, true));
    output(op("Transpose", INS(k), ATTRS(ts_attr_ints("perm", PERM, 4))));
    check(1); /* the second Transpose has no MatMul reader: only the block fuses */
    graph(17);
    q = input("1x2x1x16"), k = input("1x2x9x16"), v = input("1x2x9x16");
    int kt = op("Transpose", INS(k), ATTRS(ts_attr_ints("perm", PERM, 4)));
    output(kt);
    int p = op("Softmax", INS(op("MatMul", INS(q, kt), NOATTR)), ATTRS(ts_attr_int("axis", -1)));
    output(op("MatMul", INS(p, v), NOATTR));
    check(0);
}

/* p's outputs on G equal a cold plan's, bit for bit */
static void equals_cold(ts_plan *p, const ts_plan_opts *o)
{
    ts_error e = {0};
    ts_tensor *cold[1], *got[1], *in[3];
    ts_plan *pc = plan_run(o, 7, cold);
    uint64_t seed = 7;
    for (int i = 0; i < 3; i++) {
        in[i] = ts_tensor_new(TS_F32, &G->values[G->inputs[i]].shape, &e);
        ts_tensor_fill_random(in[i], &seed, -1, 1);
    }
    got[0] = ts_tensor_new(TS_F32, &G->values[G->outputs[0]].shape, &e);
    cr_assert_eq(ts_plan_run(p, in, got, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(memcmp(got[0]->data, cold[0]->data, got[0]->nbytes), 0, "re-bound plan differs from a cold plan");
    for (int i = 0; i < 3; i++) ts_tensor_unref(in[i]);
    ts_tensor_unref(got[0]);
    ts_tensor_unref(cold[0]);
    ts_plan_free(pc);
}

/* A plan built at a cache of 20 re-bound to the same graph at 23 (the mask
 * row changes too): the step is resized in place (ts_plan_rebind_stats:
 * nothing lowered), or with skip "rebind.resize" lowered again; outputs
 * equal a cold plan's; then re-bound to the graph loaded again at 20, the
 * 23 one freed (as a session does): its buffers take the built sizes back
 * and its mask the built graph's (they kept 23's shapes and read the freed
 * mask) */
static void rebind_to_longer(const char *skip)
{
    ts_graph *g[3];
    const int len[3] = {20, 23, 20};
    for (int i = 0; i < 3; i++) {
        graph(17);
        char kd[32];
        snprintf(kd, sizeof kd, "1x4x%dx32", len[i]);
        int q = input("1x4x1x32"), k = input(kd), v = input(kd);
        output(block(q, k, v, 1, len[i], true, true));
        g[i] = G;
        G = NULL;
    }
    ts_error e = {0};
    ts_plan *p = NULL;
    ts_plan_opts o = {.threads = 2, .skip = skip};
    int64_t lowered, resized;
    cr_assert_eq(ts_plan_build(g[0], &o, &p, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_plan_rebind(p, g[1], &e), TS_OK, "%s", e.msg);
    cr_assert_eq(xt_steps_of(p, "vec.attention"), 1);
    ts_plan_rebind_stats(p, &lowered, &resized);
    cr_assert(skip ? lowered == 1 && resized == 0 : lowered == 0 && resized == 1, "lowered %lld resized %lld",
              (long long)lowered, (long long)resized);
    G = g[1];
    equals_cold(p, &o);
    cr_assert_eq(ts_plan_rebind(p, g[2], &e), TS_OK, "%s", e.msg);
    ts_graph_free(g[1]);
    G = g[2];
    equals_cold(p, &o);
    ts_plan_rebind_stats(p, &lowered, &resized);
    cr_assert_eq(skip ? lowered : resized, 2);
    ts_plan_free(p);
    ts_graph_free(g[0]);
    ts_graph_free(G);
    G = NULL;
}

Test(vec_attention, rebind_to_longer_cache) { rebind_to_longer(NULL); }
Test(vec_attention, rebind_to_longer_cache_lowered) { rebind_to_longer("rebind.resize"); }
