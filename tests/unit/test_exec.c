/* The executor core (src/exec/plan.c, memplan.c, run.c, ref_kernel.c):
 * plans of small graphs against the reference interpreter, memory plan
 * invariants, views, outputs that are inputs or constants, run-time errors. */
#include "exec_check.h"
#include "ir/ir.h"

static int unary(ts_graph *g, const char *op, int x) { return xt_node(g, op, &x, 1, NULL, 0); }

static void output(ts_graph *g, int v)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, v, &e), TS_OK, "%s", e.msg);
}

static int const_i64(ts_graph *g, const char *name, int n, const int64_t *vals)
{
    ts_error e = {0};
    int64_t d = n;
    ts_shape s = ts_shape_make(1, &d);
    ts_tensor *t = ts_tensor_new(TS_I64, &s, &e);
    memcpy(t->data, vals, sizeof(int64_t) * (size_t)n);
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static int const_f32(ts_graph *g, const char *name, const char *dims, uint64_t seed)
{
    ts_error e = {0};
    ts_shape s = xt_shape(dims);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    ts_tensor_fill_random(t, &seed, -1, 1);
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static ts_tensor **random_inputs(const ts_graph *g, uint64_t seed)
{
    ts_tensor **in = calloc((size_t)g->ninputs + 1, sizeof *in);
    ts_error e = {0};
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        in[i] = ts_tensor_new(v->dtype, &v->shape, &e);
        cr_assert(in[i], "%s", e.msg);
        ts_tensor_fill_random(in[i], &seed, -2, 2);
    }
    return in;
}

static ts_tensor **new_outputs(const ts_graph *g)
{
    ts_tensor **out = calloc((size_t)g->noutputs + 1, sizeof *out);
    ts_error e = {0};
    for (int i = 0; i < g->noutputs; i++) {
        const ts_value *v = &g->values[g->outputs[i]];
        out[i] = ts_tensor_new(v->dtype, &v->shape, &e);
        cr_assert(out[i], "%s", e.msg);
        /* garbage, so that an output the plan forgets to write is caught */
        memset(out[i]->data, 0x7f, out[i]->nbytes);
    }
    return out;
}

static void free_tensors(ts_tensor **t, int n)
{
    for (int i = 0; i < n; i++) ts_tensor_unref(t[i]);
    free(t);
}

static void assert_close(const ts_tensor *got, const ts_tensor *want, const char *what)
{
    cr_assert(ts_shape_eq(&got->shape, &want->shape), "%s: shape", what);
    for (int64_t i = 0; i < ts_tensor_numel(want); i++) {
        double a = ts_tensor_get_f64(got, i), b = ts_tensor_get_f64(want, i);
        cr_assert(fabs(a - b) <= 1e-5 + 1e-4 * fabs(b), "%s[%lld]: plan %.9g, reference %.9g", what, (long long)i,
                  a, b);
    }
}

/* Builds a plan for g, runs it (twice: results must not change) and
 * compares every output with the reference interpreter. */
static void check_against_reference(ts_graph *g, const ts_plan_opts *o)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_validate(g, &e), TS_OK, "%s", e.msg);
    ts_tensor **in = random_inputs(g, 42), **out = new_outputs(g);
    ts_tensor **ref = calloc((size_t)g->noutputs + 1, sizeof *ref);
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, in, ref, &e), TS_OK, "%s", e.msg);
    ts_plan *plan = NULL;
    cr_assert_eq(ts_plan_build(g, o, &plan, &e), TS_OK, "%s", e.msg);
    xt_check_memplan(plan);
    cr_assert_eq(ts_plan_run(plan, in, out, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < g->noutputs; i++) assert_close(out[i], ref[i], g->values[g->outputs[i]].name);
    ts_tensor **again = new_outputs(g);
    cr_assert_eq(ts_plan_run(plan, in, again, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < g->noutputs; i++)
        cr_assert(!memcmp(again[i]->data, out[i]->data, out[i]->nbytes), "second run differs");
    ts_plan_free(plan);
    free_tensors(in, g->ninputs);
    free_tensors(out, g->noutputs);
    free_tensors(again, g->noutputs);
    free_tensors(ref, g->noutputs);
}

static int transpose(ts_graph *g, int x)
{
    int64_t perm[2] = {1, 0};
    ts_attr a = ts_attr_ints("perm", perm, 2);
    return xt_node(g, "Transpose", &x, 1, &a, 1);
}

Test(exec, small_graph_matches_reference)
{
    ts_graph *g = ts_graph_new("t", 17);
    int a = xt_input(g, "a", "2x3"), b = xt_input(g, "b", "3");
    int ab[2] = {a, b};
    int s = xt_node(g, "Add", ab, 2, NULL, 0);
    int sb[2] = {s, b};
    int m = xt_node(g, "Mul", sb, 2, NULL, 0);
    int t = unary(g, "Tanh", m);
    int64_t ax = 1;
    ts_attr axis = ts_attr_int("axis", ax);
    int sm = xt_node(g, "Softmax", &t, 1, &axis, 1);
    output(g, sm);
    output(g, s); /* an intermediate that is also an output */
    check_against_reference(g, NULL);
    ts_plan_opts o = {.threads = 1, .no_fusion = true, .plain_layout = true};
    check_against_reference(g, &o);
    ts_graph_free(g);
}

Test(exec, conv_graph_matches_reference)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x4x9x9");
    int w = const_f32(g, "w", "8x4x3x3", 1), bias = const_f32(g, "bias", "8", 2);
    int64_t pads[4] = {1, 1, 1, 1};
    ts_attr pa = ts_attr_ints("pads", pads, 4);
    int cin[3] = {x, w, bias};
    int c = xt_node(g, "Conv", cin, 3, &pa, 1);
    int r = unary(g, "Relu", c);
    int w2 = const_f32(g, "w2", "8x8x3x3", 3);
    int cin2[2] = {r, w2};
    int c2 = xt_node(g, "Conv", cin2, 2, &pa, 1);
    int add[2] = {c2, r}; /* residual */
    int y = unary(g, "Relu", xt_node(g, "Add", add, 2, NULL, 0));
    int f = unary(g, "Flatten", y);
    output(g, f);
    check_against_reference(g, NULL);
    ts_plan_opts o = {.plain_layout = true, .no_fusion = true};
    check_against_reference(g, &o);
    ts_graph_free(g);
}

/* A chain of transposes: t1 dies when t3 is born, so they share memory. */
Test(exec, memory_plan_reuses_buffers)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "8x16");
    int t = x;
    for (int i = 0; i < 6; i++) t = transpose(g, t);
    output(g, t);
    ts_error e = {0};
    ts_plan *plan = NULL;
    cr_assert_eq(ts_plan_build(g, NULL, &plan, &e), TS_OK, "%s", e.msg);
    ts_plan_stats st;
    ts_plan_stats_get(plan, &st);
    xt_check_memplan(plan);
    cr_assert_eq(st.naive_bytes, 5 * 8 * 16 * 4, "naive %zu", st.naive_bytes); /* t1..t5; t6 is the output */
    cr_assert(st.arena_bytes < st.naive_bytes, "arena %zu, naive %zu", st.arena_bytes, st.naive_bytes);
    cr_assert_eq(st.arena_bytes, 2 * 8 * 16 * 4, "arena %zu", st.arena_bytes);
    ts_plan_free(plan);
    check_against_reference(g, NULL);
    ts_graph_free(g);
}

/* The memory plan's placement orders (memplan.c): four buffers, A 192 B
 * over steps [0,1], C 128 B over [0,3], B and D 128 B each at step 3.  By
 * size alone A settles first, then B at 0, C above A, D above C: 448 B,
 * where at most 384 are alive at once (step 3: B, C, D).  C first (the
 * largest size x lifetime) packs them in 384.  A plan's build keeps the
 * smallest placement; a re-bind's one order still places validly. */
Test(exec, memory_plan_keeps_the_smallest_placement)
{
    static const struct { size_t bytes; int first, last; } b[] = {{192, 0, 1}, {128, 3, 3}, {128, 0, 3}, {128, 3, 3}};
    xbuf bufs[4];
    xstep steps[4];
    memset(bufs, 0, sizeof bufs);
    memset(steps, 0, sizeof steps);
    xplan p;
    memset(&p, 0, sizeof p);
    p.bufs = bufs, p.nbufs = 4, p.steps = steps, p.nsteps = 4;
    for (int i = 0; i < 4; i++) bufs[i] = (xbuf){.kind = XB_ARENA, .bytes = b[i].bytes, .first_step = b[i].first,
                                                 .last_step = b[i].last, .value = -1, .alias_of = -1};
    for (int every = 0; every < 2; every++) {
        size_t arena = xmemplan_assign(&p, every);
        p.arena_bytes = arena;
        xt_check_memplan((const ts_plan *)&p);
        if (every)
            cr_assert_eq(arena, 384, "arena %zu: not the 384 B alive at step 3", arena);
        else
            cr_assert_gt(arena, 384, "size order alone places in %zu: the case tests nothing", arena);
    }
}

/* Reshape/Flatten/Squeeze/Unsqueeze/Identity cost no step: their outputs
 * are aliases of their inputs. */
Test(exec, views_are_aliases)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "2x3x4");
    int a = transpose(g, unary(g, "Flatten", x)); /* 2x12 -> 12x2 */
    int shape[1];
    shape[0] = const_i64(g, "shape", 3, (int64_t[]){4, 3, 2});
    int rin[2] = {a, shape[0]};
    int r = xt_node(g, "Reshape", rin, 2, NULL, 0);
    int id = unary(g, "Identity", r);
    int u = xt_node(g, "Unsqueeze", (int[]){id, const_i64(g, "axes", 1, (int64_t[]){0})}, 2, NULL, 0);
    int y = transpose(g, unary(g, "Flatten", u));
    output(g, y);
    ts_error e = {0};
    ts_plan *plan = NULL;
    cr_assert_eq(ts_plan_build(g, NULL, &plan, &e), TS_OK, "%s", e.msg);
    const xplan *p = xt_check_memplan(plan);
    cr_assert_eq(p->nsteps, 2, "steps %d: only the transposes run", p->nsteps);
    cr_assert_eq(p->bufs[p->value_buf[r]].kind, XB_ALIAS);
    cr_assert_eq(p->bufs[p->value_buf[u]].kind, XB_ALIAS);
    cr_assert_eq(p->bufs[p->value_buf[x]].kind, XB_INPUT);
    ts_plan_free(plan);
    check_against_reference(g, NULL);
    ts_graph_free(g);
}

/* A view that is a graph output must still land in the caller's tensor. */
Test(exec, view_as_output)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "2x3");
    int t = transpose(g, x);
    int f = unary(g, "Flatten", t);
    int i = unary(g, "Identity", x); /* a view of a graph input */
    output(g, f);
    output(g, t);
    output(g, i);
    check_against_reference(g, NULL);
    ts_graph_free(g);
}

Test(exec, output_is_input_or_constant_or_duplicate)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "2x3");
    int c = const_f32(g, "c", "4", 7);
    int y = unary(g, "Neg", x);
    output(g, x);
    output(g, c);
    output(g, y);
    output(g, y);
    ts_error e = {0};
    ts_tensor **in = random_inputs(g, 5), **out = new_outputs(g);
    ts_plan *plan = NULL;
    cr_assert_eq(ts_plan_build(g, NULL, &plan, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_plan_run(plan, in, out, &e), TS_OK, "%s", e.msg);
    cr_assert(!memcmp(out[0]->data, in[0]->data, in[0]->nbytes));
    cr_assert(!memcmp(out[1]->data, g->values[c].constant->data, 16));
    for (int k = 0; k < 6; k++) {
        cr_assert_eq(((float *)out[2]->data)[k], -((float *)in[0]->data)[k]);
        cr_assert_eq(((float *)out[3]->data)[k], -((float *)in[0]->data)[k]);
    }
    ts_plan_free(plan);
    free_tensors(in, g->ninputs);
    free_tensors(out, g->noutputs);
    ts_graph_free(g);
}

/* An element-wise step may overwrite its input only when nothing else
 * reads it later: here x1 is read again by the final Add. */
Test(exec, in_place_respects_later_readers)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "4x5");
    int x1 = transpose(g, x);
    int e1 = unary(g, "Exp", x1);
    int s1 = unary(g, "Sigmoid", e1);
    int add[2] = {s1, x1};
    int y = transpose(g, xt_node(g, "Add", add, 2, NULL, 0));
    output(g, y);
    check_against_reference(g, NULL);
    ts_plan_opts o = {.no_fusion = true};
    check_against_reference(g, &o);
    ts_graph_free(g);
}

Test(exec, wrong_input_is_refused)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "2x3");
    output(g, unary(g, "Relu", x));
    ts_error e = {0};
    ts_plan *plan = NULL;
    cr_assert_eq(ts_plan_build(g, NULL, &plan, &e), TS_OK, "%s", e.msg);
    ts_shape bad = xt_shape("3x2");
    ts_tensor **outs = new_outputs(g);
    ts_tensor *in = ts_tensor_new(TS_F32, &bad, &e), *out = outs[0];
    cr_assert_eq(ts_plan_run(plan, &in, &out, &e), TS_ERR_INVALID);
    cr_assert_str_eq(e.msg, "input 'x': expected float32 2x3, got float32 3x2");
    ts_tensor *wrong = ts_tensor_new(TS_I64, &g->values[x].shape, &e);
    e = (ts_error){0};
    cr_assert_eq(ts_plan_run(plan, &wrong, &out, &e), TS_ERR_INVALID);
    cr_assert_str_eq(e.msg, "input 'x': expected float32 2x3, got int64 2x3");
    ts_plan_free(plan);
    ts_tensor_unref(in);
    ts_tensor_unref(wrong);
    free_tensors(outs, g->noutputs);
    ts_graph_free(g);
}

/* A reference step's run-time failure comes back as the run's error. */
Test(exec, run_time_kernel_error)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "4x3");
    ts_error e = {0};
    ts_shape s2 = xt_shape("2");
    int idx = ts_graph_add_input(g, "idx", TS_I64, &s2, &e);
    int gin[2] = {x, idx};
    output(g, xt_node(g, "Gather", gin, 2, NULL, 0));
    ts_plan *plan = NULL;
    cr_assert_eq(ts_plan_build(g, NULL, &plan, &e), TS_OK, "%s", e.msg);
    ts_tensor **in = random_inputs(g, 1), **out = new_outputs(g);
    ((int64_t *)in[1]->data)[0] = 1;
    ((int64_t *)in[1]->data)[1] = 9;
    cr_assert_neq(ts_plan_run(plan, in, out, &e), TS_OK);
    cr_assert(strstr(e.msg, "out of range") && strstr(e.msg, "Gather"), "%s", e.msg);
    ((int64_t *)in[1]->data)[1] = 3;
    e = (ts_error){0};
    cr_assert_eq(ts_plan_run(plan, in, out, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(((float *)out[0]->data)[3], ((float *)in[0]->data)[9]);
    ts_plan_free(plan);
    free_tensors(in, g->ninputs);
    free_tensors(out, g->noutputs);
    ts_graph_free(g);
}

#if !defined(__SANITIZE_ADDRESS__)
/* Counting allocator: glibc's own entry points behind a counter, so that
 * the test can see whether running a plan allocates (the sanitizers bring
 * their own allocator, so the test is compiled out there). */
#include <stdatomic.h>
extern void *__libc_malloc(size_t), *__libc_calloc(size_t, size_t), *__libc_realloc(void *, size_t);
static atomic_long nallocs;
void *malloc(size_t n)
{
    atomic_fetch_add(&nallocs, 1);
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t m)
{
    atomic_fetch_add(&nallocs, 1);
    return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n)
{
    atomic_fetch_add(&nallocs, 1);
    return __libc_realloc(p, n);
}

/* Reference steps (Transpose's kernel allocates nothing), views and output
 * copies: the plan's own machinery must not allocate while running. */
Test(exec, running_allocates_nothing)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "6x5");
    int t = transpose(g, transpose(g, x));
    int f = unary(g, "Flatten", t);
    output(g, transpose(g, f));
    output(g, x);
    output(g, f);
    ts_error e = {0};
    ts_tensor **in = random_inputs(g, 3), **out = new_outputs(g);
    ts_plan *plan = NULL;
    cr_assert_eq(ts_plan_build(g, NULL, &plan, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_plan_run(plan, in, out, &e), TS_OK, "%s", e.msg);
    long before = atomic_load(&nallocs);
    cr_assert(before > 0, "the counting allocator is not in use");
    cr_assert_eq(ts_plan_run(plan, in, out, &e), TS_OK, "%s", e.msg);
    long during = atomic_load(&nallocs) - before;
    cr_assert_eq(during, 0, "a run made %ld allocations", during);
    ts_plan_free(plan);
    free_tensors(in, g->ninputs);
    free_tensors(out, g->noutputs);
    ts_graph_free(g);
}
#endif
