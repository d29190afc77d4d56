/* Mod in the fast runtime: float32 Mod (fmod = 1, C's fmod: the result has
 * the dividend's sign) lowers to vec.eltwise with both operands, a scalar
 * divisor or a scalar dividend, fuses into element-wise chains, and gives
 * the hand-computed values; integer Mod (fmod 0, the divisor's sign, like
 * Python's %) runs the reference kernel with the same values the
 * interpreter's tests use. */
#include "exec_check.h"
#include "ir/ir.h"
#include "ops/list.h"


/* Runs the plan of g on one float32 input x holding xs; out gets y (n). */
static ts_plan_stats run_f32(ts_graph *g, const float *xs, int nx, float *out, int n)
{
    ts_error e = {0};
    ts_plan *plan = NULL;
    ts_plan_opts o = {.threads = 2};
    cr_assert_eq(ts_plan_build(g, &o, &plan, &e), TS_OK, "%s", e.msg);
    ts_tensor *in = ts_tensor_new(TS_F32, &g->values[g->inputs[0]].shape, &e);
    ts_tensor *y = ts_tensor_new(TS_F32, &g->values[g->outputs[0]].shape, &e);
    cr_assert(in && y && ts_tensor_numel(in) == nx && ts_tensor_numel(y) == n);
    memcpy(in->data, xs, sizeof(float) * (size_t)nx);
    cr_assert_eq(ts_plan_run(plan, &in, &y, &e), TS_OK, "%s", e.msg);
    memcpy(out, y->data, sizeof(float) * (size_t)n);
    ts_plan_stats st;
    ts_plan_stats_get(plan, &st);
    ts_plan_free(plan);
    ts_tensor_unref(in);
    ts_tensor_unref(y);
    return st;
}

static void expect(const float *got, const float *want, int n, const char *what)
{
    for (int i = 0; i < n; i++) cr_expect_eq(got[i], want[i], "%s [%d]: %g, expected %g", what, i, got[i], want[i]);
}

Test(exec_mod, float_fmod_vector_scalar_and_reverse)
{
    const ts_attr fm[] = {ts_attr_int("fmod", 1)};
    const float xs[] = {-4.5f, 7.5f, 5.0f, -5.0f, 0.25f, -0.0f};
    float y[6];
    /* x fmod [2, 2, -3, -3, 1, 2]: the dividend's sign, |r| < |divisor| */
    ts_graph *g = ts_graph_new("mod", 13);
    int x = xt_input(g, "x", "6");
    int b = xt_const_values(g, TS_F32, "6", (double[]){2, 2, -3, -3, 1, 2}, 6);
    xt_output(g, xt_node(g, "Mod", INS(x, b), fm, 1));
    ts_plan_stats st = run_f32(g, xs, 6, y, 6);
    expect(y, (const float[]){-0.5f, 1.5f, 2.0f, -2.0f, 0.25f, -0.0f}, 6, "x fmod b");
    cr_expect(signbit(y[5]), "-0 fmod 2 keeps the sign");
    cr_expect_eq(st.fallback_steps, 0, "Mod fell back to the reference kernel");
    ts_graph_free(g);
    /* x fmod 2.5 (an immediate) */
    g = ts_graph_new("mod_s", 13);
    x = xt_input(g, "x", "6");
    xt_output(g, xt_node(g, "Mod", INS(x, xt_const_values(g, TS_F32, "", (double[]){2.5}, 1)), fm, 1));
    st = run_f32(g, xs, 6, y, 6);
    expect(y, (const float[]){-2.0f, 0.0f, 0.0f, -0.0f, 0.25f, -0.0f}, 6, "x fmod 2.5");
    cr_expect_eq(st.fallback_steps, 0);
    ts_graph_free(g);
    /* 7 fmod x (the scalar is the dividend) */
    const float ds[] = {2.0f, -2.0f, 3.0f, -3.0f, 0.5f, 10.0f};
    g = ts_graph_new("mod_r", 13);
    x = xt_input(g, "x", "6");
    xt_output(g, xt_node(g, "Mod", INS(xt_const_values(g, TS_F32, "", (double[]){7}, 1), x), fm, 1));
    st = run_f32(g, ds, 6, y, 6);
    expect(y, (const float[]){1.0f, 1.0f, 1.0f, 1.0f, 0.0f, 7.0f}, 6, "7 fmod x");
    cr_expect_eq(st.fallback_steps, 0);
    ts_graph_free(g);
}

/* Swin's window index: (x * 7) fmod 3 then Relu, one fused step; broadcast
 * of a [3,1] divisor onto [3,4]; checked against the interpreter on random
 * data in both signs. */
Test(exec_mod, fused_and_broadcast)
{
    const ts_attr fm[] = {ts_attr_int("fmod", 1)};
    ts_graph *g = ts_graph_new("chain", 13);
    int x = xt_input(g, "x", "3x4");
    int m = xt_node(g, "Mul", INS(x, xt_const_values(g, TS_F32, "", (double[]){7}, 1)), NOATTR);
    int r = xt_node(g, "Mod", INS(m, xt_const_values(g, TS_F32, "3x1", (double[]){3, -1.5, 0.75}, 3)), fm, 1);
    xt_output(g, xt_node(g, "Relu", INS(r), NOATTR));
    ts_plan *p = xt_plan_check(g, NULL, 7, -5, 5, 0, XT_TOL_ELEM);
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    cr_expect_eq(st.steps, 1, "Mul, Mod and Relu in one step (got %d)", st.steps);
    cr_expect_eq(st.fallback_steps, 0);
    ts_plan_free(p);
    ts_graph_free(g);
}

Test(exec_mod, integer_mod_takes_the_divisors_sign)
{
    ts_error e = {0};
    ts_graph *g = ts_graph_new("imod", 13);
    ts_shape s = xt_shape("6");
    int x = ts_graph_add_input(g, "x", TS_I64, &s, &e);
    cr_assert_geq(x, 0, "%s", e.msg);
    int b = xt_const_values(g, TS_I64, "6", (double[]){3, 3, -3, -3, 4, -4}, 6);
    int y = xt_node(g, "Mod", INS(x, b), NOATTR);
    int z = xt_node(g, "Mod", INS(x, b), ATTRS(ts_attr_int("fmod", 1)));
    xt_output(g, y);
    xt_output(g, z);
    ts_plan *plan = NULL;
    ts_plan_opts o = {.threads = 1};
    cr_assert_eq(ts_plan_build(g, &o, &plan, &e), TS_OK, "%s", e.msg);
    ts_tensor *in = ts_tensor_new(TS_I64, &s, &e), *out[2] = {ts_tensor_new(TS_I64, &s, &e), ts_tensor_new(TS_I64, &s, &e)};
    const int64_t xs[] = {-7, 7, -7, 7, 8, -9};
    memcpy(in->data, xs, sizeof xs);
    cr_assert_eq(ts_plan_run(plan, &in, out, &e), TS_OK, "%s", e.msg);
    const int64_t want_mod[] = {2, 1, -1, -2, 0, -1}, want_fmod[] = {-1, 1, -1, 1, 0, -1};
    for (int i = 0; i < 6; i++) {
        cr_expect_eq(((int64_t *)out[0]->data)[i], want_mod[i], "mod [%d]", i);
        cr_expect_eq(((int64_t *)out[1]->data)[i], want_fmod[i], "fmod [%d]", i);
    }
    ts_plan_free(plan);
    ts_tensor_unref(in);
    ts_tensor_unref(out[0]);
    ts_tensor_unref(out[1]);
    ts_graph_free(g);
}
