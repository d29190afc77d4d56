/* A residual Add fused into a convolution / matmul (oneDNN sum post-op)
 * accumulates onto the residual's own storage when the residual dies at the
 * Add (src/dnnl/dnnl_residual.c), instead of copying it into dst first.
 * Each case checks the plan against the reference interpreter (two runs:
 * the second sees the arena as the first left it) and whether the step's
 * output shares the residual's storage.  The cases where it must not: the
 * residual is read again after the Add (by a later node or as a graph
 * output), is a graph input, or is the conv's own input. */
#include <stdlib.h>
#include "exec_check.h"

static uint64_t rng = 777;

static int cst(ts_graph *g, const char *dims, double lo, double hi) { return xt_const_random(g, dims, lo, hi, &rng); }

static int node(ts_graph *g, const char *op, const int *ins, int nin) { return xt_node(g, op, ins, nin, NULL, 0); }

static int conv(ts_graph *g, int x, int C) { return xt_conv3x3(g, x, C, &rng); }

static int conv_relu(ts_graph *g, int x, int C) { return xt_conv3x3_relu(g, x, C, &rng); }

static int matmul(ts_graph *g, int x, int K, int N)
{
    char w[32];
    snprintf(w, sizeof w, "%dx%d", K, N);
    return node(g, "MatMul", (int[]){x, cst(g, w, -0.2, 0.2)}, 2);
}

/* Plans g (outputs already added) and compares every output with the
 * reference, twice; no reference kernels; the caller frees the plan. */
static ts_plan *check(ts_graph *g)
{
    ts_plan *p = xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    cr_assert_eq(st.fallback_steps, 0);
    return p;
}

static int root(const xplan *p, int b)
{
    while (p->bufs[b].kind == XB_ALIAS) b = p->bufs[b].alias_of;
    return b;
}

/* The oneDNN step whose output buffer holds value v (the fused chain's
 * last value: the Relu after the residual Add). */
static const xstep *step_of(const xplan *p, int v)
{
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        if ((!strcmp(s->k->name, "dnnl.conv") || !strcmp(s->k->name, "dnnl.matmul")) &&
            p->bufs[s->out[0]].value == v)
            return s;
    }
    return NULL;
}

/* True when value v's buffer shares storage with the step's output. */
static bool shares(const xplan *p, const xstep *s, int v)
{
    int b = p->value_buf[v];
    return b >= 0 && root(p, b) == root(p, s->out[0]);
}

/* Sum-fused steps whose output aliases another buffer's storage. */
static int inplace_sums(const xplan *p)
{
    int n = 0;
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        if (strcmp(s->k->name, "dnnl.conv") && strcmp(s->k->name, "dnnl.matmul")) continue;
        n += p->bufs[s->out[0]].kind == XB_ALIAS;
    }
    return n;
}

/* ResNet's basic block: r = conv(x); y = relu(conv(relu(conv(r))) + r);
 * r dies at the Add, so the second conv writes over r. */
static void basic_block(int C, int hw, bool disabled)
{
    ts_graph *g = ts_graph_new("t", 17);
    char dims[32];
    snprintf(dims, sizeof dims, "1x%dx%dx%d", C, hw, hw);
    int r = conv_relu(g, xt_input(g, "x", dims), C);
    int a = conv(g, conv_relu(g, r, C), C);
    a = node(g, "Add", (int[]){a, r}, 2);
    a = node(g, "Relu", &a, 1);
    xt_output(g, conv(g, a, C)); /* the block's result is no graph output */
    if (disabled) setenv("TSOPT_SKIP", "vec.maxpool, residual_inplace", 1); /* a list, spaces allowed */
    ts_plan *plan = check(g);
    unsetenv("TSOPT_SKIP");
    const xplan *p = (const xplan *)plan;
    const xstep *s = step_of(p, a);
    cr_assert_not_null(s, "the residual Add was not fused into a conv");
    if (disabled) {
        cr_assert_not(shares(p, s, r), "TSOPT_SKIP=residual_inplace: the conv still wrote over the residual");
        cr_assert_eq(inplace_sums(p), 0);
    } else {
        cr_assert(shares(p, s, r), "the conv did not write over the dying residual");
        for (int j = 0; j < s->nin; j++)
            cr_assert(s->in[j] < 0 || root(p, s->in[j]) != root(p, s->out[0]),
                      "the step reads input %d from the storage it writes", j);
    }
    ts_plan_free(plan);
    ts_graph_free(g);
}

Test(residual, basic_block_in_place) { basic_block(64, 14, false); }
/* 40 channels: blocks padded to 48, the residual's bytes include the pad */
Test(residual, basic_block_odd_channels) { basic_block(40, 9, false); }
/* 64x28x28: the convs run on Winograd (16-channel blocks) */
Test(residual, basic_block_winograd) { basic_block(64, 28, false); }
Test(residual, disabled_by_env) { basic_block(64, 14, true); }

/* Two blocks in a row: the second's residual is the first's in-place
 * result (an alias), which must be overwritable in turn. */
Test(residual, chained_blocks)
{
    ts_graph *g = ts_graph_new("t", 17);
    int r = conv_relu(g, xt_input(g, "x", "1x32x10x10"), 32);
    for (int k = 0; k < 2; k++) {
        int a = conv(g, conv_relu(g, r, 32), 32);
        a = node(g, "Add", (int[]){a, r}, 2);
        r = node(g, "Relu", &a, 1);
    }
    xt_output(g, conv(g, r, 32));
    ts_plan *plan = check(g);
    cr_assert_eq(inplace_sums((const xplan *)plan), 2);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* The residual is read again after the Add (a second Add further on): it
 * must keep its values, so the conv writes elsewhere. */
Test(residual, residual_live_after_add)
{
    ts_graph *g = ts_graph_new("t", 17);
    int r = conv_relu(g, xt_input(g, "x", "1x64x14x14"), 64);
    int a = conv(g, conv_relu(g, r, 64), 64);
    a = node(g, "Add", (int[]){a, r}, 2);
    int y = a = node(g, "Relu", &a, 1);
    a = conv(g, a, 64);
    a = node(g, "Add", (int[]){a, r}, 2); /* r read again */
    xt_output(g, conv(g, a, 64));
    ts_plan *plan = check(g);
    const xplan *p = (const xplan *)plan;
    const xstep *s = step_of(p, y);
    cr_assert_not_null(s, "the residual Add was not fused into a conv");
    cr_assert_not(shares(p, s, r), "the conv overwrote a residual that is read after the Add");
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* The residual is also a graph output: never overwritten. */
Test(residual, residual_is_graph_output)
{
    ts_graph *g = ts_graph_new("t", 17);
    int r = conv_relu(g, xt_input(g, "x", "1x32x8x8"), 32);
    int a = conv(g, conv_relu(g, r, 32), 32);
    a = node(g, "Add", (int[]){a, r}, 2);
    a = node(g, "Relu", &a, 1);
    xt_output(g, conv(g, a, 32));
    xt_output(g, r);
    ts_plan *plan = check(g);
    cr_assert_eq(inplace_sums((const xplan *)plan), 0);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* conv(r) + r: r is the conv's own input (still read while the conv
 * writes), and x + conv(x) with x a graph input (the caller's memory). */
Test(residual, own_input_and_graph_input)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x32x8x8");
    int a = conv(g, x, 32);
    a = node(g, "Add", (int[]){x, a}, 2);
    int r = node(g, "Relu", &a, 1);
    a = conv(g, r, 32);
    a = node(g, "Add", (int[]){a, r}, 2);
    a = node(g, "Relu", &a, 1);
    xt_output(g, conv(g, a, 32));
    ts_plan *plan = check(g);
    cr_assert_eq(inplace_sums((const xplan *)plan), 0);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* MatMul + residual (64 rows: oneDNN's matmul, not vec.gemv): in place when
 * the residual dies at the Add, a copy when it is read again. */
static void matmul_block(bool live)
{
    ts_graph *g = ts_graph_new("t", 17);
    int r = matmul(g, xt_input(g, "x", "64x96"), 96, 128);
    r = node(g, "Relu", &r, 1);
    int a = matmul(g, r, 128, 128);
    a = node(g, "Relu", &a, 1);
    a = matmul(g, a, 128, 128); /* not the matmul reading r */
    a = node(g, "Add", (int[]){r, a}, 2);
    int y = a = node(g, "Relu", &a, 1);
    if (live) a = node(g, "Add", (int[]){matmul(g, a, 128, 128), r}, 2); /* r read after the first Add */
    xt_output(g, matmul(g, a, 128, 32));
    ts_plan *plan = check(g);
    const xplan *p = (const xplan *)plan;
    const xstep *s = step_of(p, y);
    cr_assert_not_null(s, "the residual Add was not fused into the matmul");
    cr_assert_str_eq(s->k->name, "dnnl.matmul");
    cr_assert(shares(p, s, r) == !live, "%s", live ? "overwrote a live residual" : "did not write over the residual");
    ts_plan_free(plan);
    ts_graph_free(g);
}

Test(residual, matmul_in_place) { matmul_block(false); }
Test(residual, matmul_residual_live) { matmul_block(true); }
