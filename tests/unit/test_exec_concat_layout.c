/* Channel Concat of inputs in mixed layouts (src/dnnl/dnnl_concat.c): a
 * Winograd conv's 16-channel blocks, a 1x1 conv's channels-last, a plain
 * graph input.  The result equals the reference interpreter, is written by
 * one dnnl.concat step into a channels-last buffer, and no reorder step is
 * inserted around it; inputs in one dense layout, a graph output and
 * another axis stay with vec.concat. */
#include <stdlib.h>
#include "exec_check.h"

static uint64_t rng = 4711;

static int conv_relu(ts_graph *g, int x, int C) { return xt_conv3x3_relu(g, x, C, &rng); }

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

static int conv1x1(ts_graph *g, int x, int C, int F) { return xt_conv1x1(g, x, C, F, &rng); }

static int concat(ts_graph *g, const int *ins, int n, int axis)
{
    ts_error e = {0};
    ts_attr at[] = {ts_attr_int("axis", axis)};
    int out;
    cr_assert_geq(ts_graph_add_node(g, "Concat", NULL, ins, n, at, 1, 1, NULL, &out, &e), 0, "%s", e.msg);
    return out;
}

static int count_steps(const xplan *p, const char *kernel)
{
    int n = 0;
    for (int i = 0; i < p->nsteps; i++) n += !strcmp(p->steps[i].k->name, kernel);
    return n;
}

/* The step writing value v. */
static const xstep *writer(const xplan *p, int v)
{
    for (int i = 0; i < p->nsteps; i++)
        if (p->bufs[p->steps[i].out[0]].value == v) return &p->steps[i];
    return NULL;
}

static bool channels_last(const xbuf *b)
{
    if (!b->blocked || b->md.format_kind != dnnl_blocked || b->md.format_desc.blocking.inner_nblks) return false;
    const dnnl_dims_t *st = &b->md.format_desc.blocking.strides;
    return (*st)[1] == 1 && (*st)[3] == b->shape.dims[1];
}

/* Inception-style: Winograd 3x3 (16-channel blocks), 1x1 (oneDNN's pick),
 * and the plain graph input, concatenated and read by a 1x1 conv.  C and F
 * not multiples of 16 in the odd case. */
static void mixed(int C, int F, int hw)
{
    ts_graph *g = ts_graph_new("t", 17);
    char dims[32];
    snprintf(dims, sizeof dims, "1x%dx%dx%d", C, hw, hw);
    int x = xt_input(g, "x", dims);
    int a = conv_relu(g, conv_relu(g, x, C), C); /* 3x3, >= 32 channels: Winograd at >= 28x28 */
    int b = conv1x1(g, x, C, F);
    int y = concat(g, (int[]){a, x, b}, 3, 1);
    xt_output(g, conv1x1(g, y, 2 * C + F, 16));
    ts_plan *plan = check(g);
    const xplan *p = (const xplan *)plan;
    const xstep *s = writer(p, y);
    cr_assert_not_null(s);
    cr_assert_str_eq(s->k->name, "dnnl.concat");
    cr_assert(channels_last(&p->bufs[s->out[0]]), "the concat result is not channels-last");
    ts_plan_stats st;
    ts_plan_stats_get(plan, &st);
    /* only the graph input's conversion for the first conv may remain */
    cr_assert_leq(st.reorders, 1, "%d reorder steps", st.reorders);
    ts_plan_free(plan);
    ts_graph_free(g);
}

Test(concat_layout, mixed_layouts) { mixed(32, 48, 28); }
Test(concat_layout, mixed_odd_channels) { mixed(40, 24, 29); }

/* The concat result as a graph output: plain, vec.concat. */
Test(concat_layout, graph_output_stays_vec)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x32x28x28");
    int a = conv_relu(g, conv_relu(g, x, 32), 32);
    xt_output(g, concat(g, (int[]){a, x}, 2, 1));
    ts_plan *plan = check(g);
    cr_assert_eq(count_steps((const xplan *)plan, "dnnl.concat"), 0);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* Concat along H (axis 2) of mixed layouts: not this kernel's case. */
Test(concat_layout, other_axis_stays_vec)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x32x28x28");
    int a = conv_relu(g, conv_relu(g, x, 32), 32);
    int y = concat(g, (int[]){a, x}, 2, 2);
    xt_output(g, conv1x1(g, y, 32, 16));
    ts_plan *plan = check(g);
    cr_assert_eq(count_steps((const xplan *)plan, "dnnl.concat"), 0);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* Two 1x1 convs (both channels-last): vec.concat keeps that layout itself. */
Test(concat_layout, common_layout_stays_vec)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x64x14x14");
    int y = concat(g, (int[]){conv1x1(g, x, 64, 32), conv1x1(g, x, 64, 48)}, 2, 1);
    xt_output(g, conv1x1(g, y, 80, 16));
    ts_plan *plan = check(g);
    const xplan *p = (const xplan *)plan;
    const xstep *s = writer(p, y);
    cr_assert_not_null(s);
    bool same = p->bufs[s->in[0]].blocked == p->bufs[s->in[1]].blocked;
    if (same) cr_assert_str_eq(s->k->name, "vec.concat");
    ts_plan_free(plan);
    ts_graph_free(g);
}
