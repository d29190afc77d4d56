/* A Pad whose pads are all zero (PyTorch exports one before every
 * AvgPool2d) is a view of its input in src/vec/vec_pad.c: no copy, no
 * conversion of a blocked input to plain, in any layout; a graph output
 * still gets its own tensor written.  Checked against the reference
 * interpreter and, for a plain input, against the input itself. */
#include "exec_check.h"

static uint64_t rng = 99;

static int zero_pad(ts_graph *g, int x, int rank)
{
    double z[8] = {0};
    char dims[8];
    snprintf(dims, sizeof dims, "%d", 2 * rank);
    int ins[] = {x, xt_const_values(g, TS_I64, dims, z, 2 * rank)};
    return xt_node(g, "Pad", ins, 2, NULL, 0);
}

static const xstep *step_of(const xplan *p, const char *kernel)
{
    for (int i = 0; i < p->nsteps; i++)
        if (!strcmp(p->steps[i].k->name, kernel)) return &p->steps[i];
    return NULL;
}

/* conv (16-channel blocks) -> zero Pad -> AvgPool 2x2: the pad's result
 * is an alias of the conv's blocked buffer and the pool reads it as is. */
Test(pad_view, blocked_conv_output_into_avgpool)
{
    ts_graph *g = ts_graph_new("padview", 17);
    int x = xt_input(g, "x", "1x32x28x28");
    int c = xt_conv3x3_relu(g, x, 32, &rng);
    int pd = zero_pad(g, c, 4);
    ts_attr at[] = {ts_attr_ints("kernel_shape", (int64_t[]){2, 2}, 2), ts_attr_ints("strides", (int64_t[]){2, 2}, 2)};
    xt_output(g, xt_node(g, "AveragePool", &pd, 1, at, 2));
    ts_plan *plan = xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    const xplan *p = (const xplan *)plan;
    const xstep *s = step_of(p, "vec.pad");
    cr_assert_not_null(s);
    const xbuf *in = &p->bufs[s->in[0]], *out = &p->bufs[s->out[0]];
    cr_assert_eq(out->kind, XB_ALIAS, "the zero pad copies");
    cr_assert_eq(out->alias_of, s->in[0]);
    cr_assert_eq(out->blocked, in->blocked);
    cr_assert(!in->blocked || dnnl_memory_desc_equal(&in->md, &out->md));
    ts_plan_stats st;
    ts_plan_stats_get(plan, &st);
    cr_assert_leq(st.reorders, 2, "%d reorders (input and output conversions at most)", st.reorders);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* Plain graph input -> zero Pad -> Relu, and a zero Pad that is itself a
 * graph output (must be written into the caller's tensor): both equal the
 * reference; the second equals the input bit for bit. */
Test(pad_view, plain_and_graph_output)
{
    ts_graph *g = ts_graph_new("padview2", 17);
    int x = xt_input(g, "x", "2x3x5");
    int a = zero_pad(g, x, 3);
    xt_output(g, xt_node(g, "Relu", &a, 1, NULL, 0));
    int b = zero_pad(g, x, 3);
    xt_output(g, b);
    ts_plan *plan = xt_plan_check(g, NULL, rng++, -1, 1, 0, XT_TOL_ELEM);
    ts_error e = {0};
    ts_shape s = xt_shape("2x3x5");
    ts_tensor *in = ts_tensor_new(TS_F32, &s, &e), *out[2] = {ts_tensor_new(TS_F32, &s, &e), ts_tensor_new(TS_F32, &s, &e)};
    for (int k = 0; k < 30; k++) ((float *)in->data)[k] = (float)k - 14.5f;
    cr_assert_eq(ts_plan_run(plan, &in, out, &e), TS_OK, "%s", e.msg);
    for (int k = 0; k < 30; k++) {
        float v = (float)k - 14.5f;
        cr_assert_eq(((float *)out[0]->data)[k], v > 0 ? v : 0.0f);
        cr_assert_eq(((float *)out[1]->data)[k], v);
    }
    ts_tensor_unref(in);
    ts_tensor_unref(out[0]);
    ts_tensor_unref(out[1]);
    ts_plan_free(plan);
    ts_graph_free(g);
}
