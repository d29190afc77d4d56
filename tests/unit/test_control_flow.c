/* If, Loop and Scan built through the C builder (bodies as ts_body, a
 * captured outer value each): hand-computed results from the reference
 * interpreter and from the fast runtime (nested plans), the same after an
 * ONNX round trip (bodies written and read back), graph copies sharing
 * bodies, and the refusals (a carried value that changes shape, a branch
 * whose shape differs from the declared one). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "ir/ir.h"
#include "ir/subgraph.h"

static const ts_shape SCALAR = {0, {0}};

static ts_tensor *vec(const float *v, int n)
{
    ts_shape s = {1, {n}};
    ts_error e = {0};
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    cr_assert(t, "%s", e.msg);
    memcpy(t->data, v, sizeof(float) * (size_t)n);
    return t;
}

static int node(ts_graph *g, const char *op, const int *in, int nin, const ts_attr *a, int na, const char *out)
{
    ts_error e = {0};
    int o = -1;
    const char *names[1] = {out};
    cr_assert(ts_graph_add_node(g, op, NULL, in, nin, a, na, 1, names, &o, &e) >= 0, "%s", e.msg);
    return o;
}

/* Runs g (inputs in) with the interpreter and the fast runtime; both must
 * give want[k] (nwant[k] floats) for output k. */
static void expect(const ts_graph *g, ts_tensor **in, const float *const *want, const int *nwant)
{
    ts_error e = {0};
    ts_tensor *ref[4] = {0}, *fast[4] = {0};
    cr_assert(g->noutputs <= 4);
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, in, ref, &e), TS_OK, "%s", e.msg);
    ts_plan *p = NULL;
    cr_assert_eq(ts_plan_build(g, NULL, &p, &e), TS_OK, "%s", e.msg);
    ts_plan_stats ps;
    ts_plan_stats_get(p, &ps);
    cr_expect_eq(ps.fallback_steps, 0, "the control-flow node runs as nested plans, not the reference kernel");
    for (int k = 0; k < g->noutputs; k++) {
        const ts_value *v = &g->values[g->outputs[k]];
        fast[k] = ts_tensor_new(v->dtype, &v->shape, &e);
        cr_assert(fast[k]);
    }
    cr_assert_eq(ts_plan_run(p, in, fast, &e), TS_OK, "%s", e.msg);
    for (int k = 0; k < g->noutputs; k++) {
        cr_assert_eq(ts_tensor_numel(ref[k]), nwant[k], "output %d", k);
        for (int i = 0; i < nwant[k]; i++) {
            cr_expect_float_eq(((float *)ref[k]->data)[i], want[k][i], 1e-6, "reference output %d[%d]", k, i);
            cr_expect_float_eq(((float *)fast[k]->data)[i], want[k][i], 1e-6, "fast output %d[%d]", k, i);
        }
        ts_tensor_unref(ref[k]);
        ts_tensor_unref(fast[k]);
    }
    ts_plan_free(p);
}

/* The same after writing g to ONNX and reading it back. */
static void expect_round_trip(const ts_graph *g, ts_tensor **in, const float *const *want, const int *nwant)
{
    char path[] = "/tmp/tsopt_cf_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    ts_error e = {0};
    cr_assert_eq(ts_onnx_save(g, path, &e), TS_OK, "%s", e.msg);
    ts_graph *r = NULL;
    cr_assert_eq(ts_onnx_load(path, NULL, 0, &r, &e), TS_OK, "%s", e.msg);
    unlink(path);
    expect(r, in, want, nwant);
    ts_graph_free(r);
}

/* Loop: M = 3 (constant; with m_input, a graph input "M" instead, the
 * scan length then declared 3), carried x, captured k; the body computes
 * x * k + float(i) and scans it. */
static ts_graph *loop_graph_m(bool m_input)
{
    ts_error e = {0};
    ts_shape s2 = {1, {2}};
    ts_graph *b = ts_graph_new("loop_body", 17);
    int i = ts_graph_add_input(b, "i", TS_I64, &SCALAR, &e);
    int c = ts_graph_add_input(b, "c", TS_BOOL, &SCALAR, &e);
    int x = ts_graph_add_input(b, "x", TS_F32, &s2, &e);
    int k = ts_graph_add_input(b, "k", TS_F32, &s2, &e); /* captured */
    cr_assert(i >= 0 && c >= 0 && x >= 0 && k >= 0, "%s", e.msg);
    ts_attr to = ts_attr_int("to", 1);
    int fi = node(b, "Cast", &i, 1, &to, 1, "fi");
    int xk = node(b, "Mul", (int[]){x, k}, 2, NULL, 0, "xk");
    int xo = node(b, "Add", (int[]){xk, fi}, 2, NULL, 0, "x_out");
    int co = node(b, "Identity", &c, 1, NULL, 0, "c_out");
    int so = node(b, "Identity", &xo, 1, NULL, 0, "scan");
    cr_assert_eq(ts_graph_add_output(b, co, &e) | ts_graph_add_output(b, xo, &e) | ts_graph_add_output(b, so, &e),
                 TS_OK);
    ts_body *body = ts_body_new(b, 3, &e);
    cr_assert(body);
    cr_assert_eq(ts_body_add_capture(body, "k", 3, &e), TS_OK);

    ts_graph *g = ts_graph_new("loop", 17);
    int x0 = ts_graph_add_input(g, "x0", TS_F32, &s2, &e);
    int kk = ts_graph_add_input(g, "k", TS_F32, &s2, &e);
    ts_shape s0 = SCALAR;
    int mv;
    if (m_input) {
        mv = ts_graph_add_input(g, "M", TS_I64, &s0, &e);
        ts_dtype dt[2] = {TS_F32, TS_F32};
        ts_shape sh[2] = {s2, {2, {3, 2}}};
        cr_assert_eq(ts_body_set_declared(body, 2, dt, sh, &e), TS_OK);
    } else {
        ts_tensor *m = ts_tensor_new(TS_I64, &s0, &e);
        *(int64_t *)m->data = 3;
        mv = ts_graph_add_constant(g, "M", m, &e);
        ts_tensor_unref(m);
    }
    ts_attr a = {.name = "body", .kind = TS_ATTR_GRAPH, .body = body};
    int outs[2];
    const char *names[2] = {"xf", "scans"};
    cr_assert(ts_graph_add_node(g, "Loop", "loop", (int[]){mv, -1, x0, kk}, 4, &a, 1, 2, names, outs, &e) >= 0, "%s",
              e.msg);
    ts_body_unref(body); /* the node holds its own reference */
    cr_assert_eq(g->values[outs[1]].shape.rank, 2);
    cr_assert_eq(g->values[outs[1]].shape.dims[0], 3, "the scan length is the constant trip count");
    cr_assert_eq(ts_graph_add_output(g, outs[0], &e) | ts_graph_add_output(g, outs[1], &e), TS_OK);
    return g;
}

static ts_graph *loop_graph(void) { return loop_graph_m(false); }

Test(control_flow, loop_carried_scan_and_capture)
{
    ts_graph *g = loop_graph();
    ts_tensor *in[2] = {vec((float[]){1, -1}, 2), vec((float[]){2, 2}, 2)};
    /* x: [1,-1] -> [2,-2] (i=0) -> [5,-3] (i=1) -> [12,-4] (i=2) */
    const float xf[] = {12, -4}, scans[] = {2, -2, 5, -3, 12, -4};
    const float *want[] = {xf, scans};
    const int n[] = {2, 6};
    expect(g, in, want, n);
    expect_round_trip(g, in, want, n);
    /* copies share the body; freeing one leaves the other whole */
    ts_graph *c = ts_graph_copy(g);
    ts_graph_free(g);
    expect(c, in, want, n);
    ts_graph_free(c);
    ts_tensor_unref(in[0]);
    ts_tensor_unref(in[1]);
}

/* A trip count from the data: the scan length is the declared one, and a
 * run that gives another count fails naming the node. */
Test(control_flow, loop_data_dependent_trip_count)
{
    ts_graph *g = loop_graph_m(true);
    ts_error e = {0};
    ts_tensor *m = ts_tensor_new(TS_I64, &SCALAR, &e);
    *(int64_t *)m->data = 3;
    ts_tensor *in[3] = {vec((float[]){1, -1}, 2), vec((float[]){2, 2}, 2), m};
    cr_assert_eq(g->inputs[2], ts_graph_find_value(g, "M"));
    const float xf[] = {12, -4}, scans[] = {2, -2, 5, -3, 12, -4};
    const int n[] = {2, 6};
    expect(g, in, (const float *[]){xf, scans}, n);
    expect_round_trip(g, in, (const float *[]){xf, scans}, n);
    *(int64_t *)m->data = 2;
    ts_tensor *out[2] = {0};
    cr_assert_neq(ts_graph_run_reference(g, TS_DOMAIN_F32, in, out, &e), TS_OK);
    cr_assert(strstr(e.msg, "node 'loop' (Loop): ran 2 iterations, but its scan outputs were bound at load to 3"),
              "%s", e.msg);
    *(int64_t *)m->data = 4;
    ts_plan *p = NULL;
    cr_assert_eq(ts_plan_build(g, NULL, &p, &e), TS_OK, "%s", e.msg);
    ts_tensor *fast[2] = {ts_tensor_new(TS_F32, &g->values[g->outputs[0]].shape, &e),
                          ts_tensor_new(TS_F32, &g->values[g->outputs[1]].shape, &e)};
    cr_assert_neq(ts_plan_run(p, in, fast, &e), TS_OK);
    cr_assert(strstr(e.msg, "node 'loop' (Loop): runs more than 3 iterations"), "%s", e.msg);
    ts_plan_free(p);
    for (int k = 0; k < 3; k++) ts_tensor_unref(in[k]);
    ts_tensor_unref(fast[0]);
    ts_tensor_unref(fast[1]);
    ts_graph_free(g);
}

static ts_body *branch(const char *name, const char *op, ts_error *e)
{
    ts_shape s3 = {1, {3}};
    ts_graph *b = ts_graph_new(name, 17);
    int a = ts_graph_add_input(b, "a", TS_F32, &s3, e);
    int o = strcmp(op, "Add") ? node(b, op, &a, 1, NULL, 0, "o") : node(b, op, (int[]){a, a}, 2, NULL, 0, "o");
    cr_assert_eq(ts_graph_add_output(b, o, e), TS_OK);
    ts_body *body = ts_body_new(b, 0, e);
    cr_assert(body);
    cr_assert_eq(ts_body_add_capture(body, "a", 1, e), TS_OK);
    return body;
}

Test(control_flow, if_both_branches)
{
    ts_error e = {0};
    ts_shape s3 = {1, {3}};
    ts_graph *g = ts_graph_new("if", 17);
    int c = ts_graph_add_input(g, "c", TS_BOOL, &SCALAR, &e);
    int a = ts_graph_add_input(g, "a", TS_F32, &s3, &e);
    ts_body *t = branch("then", "Add", &e), *f = branch("else", "Neg", &e);
    ts_attr at[2] = {{.name = "then_branch", .kind = TS_ATTR_GRAPH, .body = t},
                     {.name = "else_branch", .kind = TS_ATTR_GRAPH, .body = f}};
    int o;
    cr_assert(ts_graph_add_node(g, "If", "if", (int[]){c, a}, 2, at, 2, 1, NULL, &o, &e) >= 0, "%s", e.msg);
    ts_body_unref(t);
    ts_body_unref(f);
    cr_assert_eq(ts_graph_add_output(g, o, &e), TS_OK);
    ts_tensor *cond = ts_tensor_new(TS_BOOL, &SCALAR, &e);
    ts_tensor *in[2] = {cond, vec((float[]){1, -2, 3}, 3)};
    const float twice[] = {2, -4, 6}, neg[] = {-1, 2, -3};
    const int n[] = {3};
    *(uint8_t *)cond->data = 1;
    expect(g, in, (const float *[]){twice}, n);
    expect_round_trip(g, in, (const float *[]){twice}, n);
    *(uint8_t *)cond->data = 0;
    expect(g, in, (const float *[]){neg}, n);
    expect_round_trip(g, in, (const float *[]){neg}, n);
    ts_graph_free(g);
    ts_tensor_unref(in[0]);
    ts_tensor_unref(in[1]);
}

/* Scan: running sum over the rows of a 3x2 input, read forwards or
 * backwards. */
static ts_graph *scan_graph(int64_t direction)
{
    ts_error e = {0};
    ts_shape s2 = {1, {2}}, s32 = {2, {3, 2}};
    ts_graph *b = ts_graph_new("scan_body", 17);
    int st = ts_graph_add_input(b, "s", TS_F32, &s2, &e);
    int x = ts_graph_add_input(b, "x", TS_F32, &s2, &e);
    int so = node(b, "Add", (int[]){st, x}, 2, NULL, 0, "s_out");
    int y = node(b, "Identity", &so, 1, NULL, 0, "y");
    cr_assert_eq(ts_graph_add_output(b, so, &e) | ts_graph_add_output(b, y, &e), TS_OK);
    ts_body *body = ts_body_new(b, 2, &e);
    ts_graph *g = ts_graph_new("scan", 17);
    int s0 = ts_graph_add_input(g, "s0", TS_F32, &s2, &e);
    int xs = ts_graph_add_input(g, "xs", TS_F32, &s32, &e);
    ts_attr a[3] = {{.name = "body", .kind = TS_ATTR_GRAPH, .body = body}, ts_attr_int("num_scan_inputs", 1),
                    ts_attr_ints("scan_input_directions", &direction, 1)};
    int outs[2];
    cr_assert(ts_graph_add_node(g, "Scan", "scan", (int[]){s0, xs}, 2, a, 3, 2, NULL, outs, &e) >= 0, "%s", e.msg);
    ts_body_unref(body);
    cr_assert_eq(ts_graph_add_output(g, outs[0], &e) | ts_graph_add_output(g, outs[1], &e), TS_OK);
    return g;
}

Test(control_flow, scan_forward_and_reverse)
{
    ts_error e = {0};
    ts_shape s32 = {2, {3, 2}};
    ts_tensor *xs = ts_tensor_new(TS_F32, &s32, &e);
    for (int i = 0; i < 6; i++) ((float *)xs->data)[i] = (float)(i + 1); /* rows [1,2] [3,4] [5,6] */
    ts_tensor *in[2] = {vec((float[]){0, 0}, 2), xs};
    const int n[] = {2, 6};
    ts_graph *g = scan_graph(0);
    const float fin[] = {9, 12}, fwd[] = {1, 2, 4, 6, 9, 12}, rev[] = {5, 6, 8, 10, 9, 12};
    expect(g, in, (const float *[]){fin, fwd}, n);
    expect_round_trip(g, in, (const float *[]){fin, fwd}, n);
    ts_graph_free(g);
    g = scan_graph(1);
    expect(g, in, (const float *[]){fin, rev}, n);
    expect_round_trip(g, in, (const float *[]){fin, rev}, n);
    ts_graph_free(g);
    ts_tensor_unref(in[0]);
    ts_tensor_unref(in[1]);
}

/* Scan of opset 8: the same running sum per batch row of s0 [2,2] and
 * xs [2,3,2] (axis 0 the batch, 1 the sequence), sequence_lens empty. */
static ts_graph *scan8_graph(int64_t direction)
{
    ts_error e = {0};
    ts_shape s2 = {1, {2}}, sb = {2, {2, 2}}, sbx = {3, {2, 3, 2}};
    ts_graph *b = ts_graph_new("scan8_body", 8);
    int st = ts_graph_add_input(b, "s", TS_F32, &s2, &e);
    int x = ts_graph_add_input(b, "x", TS_F32, &s2, &e);
    int so = node(b, "Add", (int[]){st, x}, 2, NULL, 0, "s_out");
    int y = node(b, "Identity", &so, 1, NULL, 0, "y");
    cr_assert_eq(ts_graph_add_output(b, so, &e) | ts_graph_add_output(b, y, &e), TS_OK);
    ts_body *body = ts_body_new(b, 2, &e);
    ts_graph *g = ts_graph_new("scan8", 8);
    int s0 = ts_graph_add_input(g, "s0", TS_F32, &sb, &e);
    int xs = ts_graph_add_input(g, "xs", TS_F32, &sbx, &e);
    ts_attr a[3] = {{.name = "body", .kind = TS_ATTR_GRAPH, .body = body}, ts_attr_int("num_scan_inputs", 1),
                    ts_attr_ints("directions", &direction, 1)};
    int outs[2];
    cr_assert(ts_graph_add_node(g, "Scan", "scan8", (int[]){-1, s0, xs}, 3, a, 3, 2, NULL, outs, &e) >= 0, "%s",
              e.msg);
    ts_body_unref(body);
    cr_assert_eq(ts_graph_add_output(g, outs[0], &e) | ts_graph_add_output(g, outs[1], &e), TS_OK);
    const ts_shape *ys = &g->values[outs[1]].shape;
    cr_assert(ys->rank == 3 && ys->dims[0] == 2 && ys->dims[1] == 3 && ys->dims[2] == 2, "scan output [2,3,2]");
    return g;
}

Test(control_flow, scan_opset8_batched)
{
    ts_error e = {0};
    ts_shape sb = {2, {2, 2}}, sbx = {3, {2, 3, 2}};
    ts_tensor *s0 = ts_tensor_new(TS_F32, &sb, &e), *xs = ts_tensor_new(TS_F32, &sbx, &e);
    const float s0v[] = {0, 0, 1, 1}, xv[] = {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60};
    memcpy(s0->data, s0v, sizeof s0v);
    memcpy(xs->data, xv, sizeof xv);
    ts_tensor *in[2] = {s0, xs};
    const int n[] = {4, 12};
    /* row 0 from 0: 1,2 / 4,6 / 9,12; row 1 from 1: 11,21 / 41,61 / 91,121; reversed: from the last row */
    const float fin[] = {9, 12, 91, 121}, fwd[] = {1, 2, 4, 6, 9, 12, 11, 21, 41, 61, 91, 121},
                rev[] = {5, 6, 8, 10, 9, 12, 51, 61, 81, 101, 91, 121};
    for (int dir = 0; dir < 2; dir++) {
        ts_graph *g = scan8_graph(dir);
        expect(g, in, (const float *[]){fin, dir ? rev : fwd}, n);
        expect_round_trip(g, in, (const float *[]){fin, dir ? rev : fwd}, n);
        ts_graph_free(g);
    }
    ts_tensor_unref(s0);
    ts_tensor_unref(xs);
}

Test(control_flow, carried_value_changing_shape_is_refused)
{
    ts_error e = {0};
    ts_shape s2 = {1, {2}};
    ts_graph *b = ts_graph_new("grow", 17);
    int i = ts_graph_add_input(b, "i", TS_I64, &SCALAR, &e);
    int c = ts_graph_add_input(b, "c", TS_BOOL, &SCALAR, &e);
    int x = ts_graph_add_input(b, "x", TS_F32, &s2, &e);
    (void)i;
    ts_attr ax = ts_attr_int("axis", 0);
    int xo = node(b, "Concat", (int[]){x, x}, 2, &ax, 1, "x2");
    int co = node(b, "Identity", &c, 1, NULL, 0, "c2");
    cr_assert_eq(ts_graph_add_output(b, co, &e) | ts_graph_add_output(b, xo, &e), TS_OK);
    ts_body *body = ts_body_new(b, 3, &e);
    ts_graph *g = ts_graph_new("g", 17);
    int x0 = ts_graph_add_input(g, "x0", TS_F32, &s2, &e);
    ts_attr a = {.name = "body", .kind = TS_ATTR_GRAPH, .body = body};
    int o;
    cr_assert_eq(ts_graph_add_node(g, "Loop", "grow", (int[]){-1, -1, x0}, 3, &a, 1, 1, NULL, &o, &e), -1);
    cr_assert(strstr(e.msg, "node 'grow' (Loop): loop-carried value 0 enters the body as float32 2 and leaves it as "
                            "float32 4"),
              "%s", e.msg);
    ts_body_unref(body);
    ts_graph_free(g);
}

Test(control_flow, branch_shapes_differ_without_declaration)
{
    ts_error e = {0};
    ts_shape s2 = {1, {2}}, s3 = {1, {3}};
    ts_graph *g = ts_graph_new("g", 17);
    int c = ts_graph_add_input(g, "c", TS_BOOL, &SCALAR, &e);
    ts_body *br[2];
    for (int k = 0; k < 2; k++) {
        ts_graph *b = ts_graph_new(k ? "else" : "then", 17);
        ts_tensor *t = ts_tensor_new(TS_F32, k ? &s3 : &s2, &e);
        int v = ts_graph_add_constant(b, "v", t, &e);
        ts_tensor_unref(t);
        int o = node(b, "Identity", &v, 1, NULL, 0, "o");
        cr_assert_eq(ts_graph_add_output(b, o, &e), TS_OK);
        br[k] = ts_body_new(b, 0, &e);
    }
    ts_attr at[2] = {{.name = "then_branch", .kind = TS_ATTR_GRAPH, .body = br[0]},
                     {.name = "else_branch", .kind = TS_ATTR_GRAPH, .body = br[1]}};
    int o;
    cr_assert_eq(ts_graph_add_node(g, "If", "if", &c, 1, at, 2, 1, NULL, &o, &e), -1);
    cr_assert(strstr(e.msg, "node 'if' (If): output 0 is 2 in then_branch and 3 in else_branch, and the model declares "
                            "no static shape for it"),
              "%s", e.msg);
    /* declared: taken as the output's shape; the branch that disagrees fails when run */
    ts_dtype dt = TS_F32;
    for (int k = 0; k < 2; k++) cr_assert_eq(ts_body_set_declared(br[k], 1, &dt, &s3, &e), TS_OK);
    e = (ts_error){0};
    cr_assert(ts_graph_add_node(g, "If", "if", &c, 1, at, 2, 1, NULL, &o, &e) >= 0, "%s", e.msg);
    cr_assert_eq(ts_graph_add_output(g, o, &e), TS_OK);
    ts_tensor *cond = ts_tensor_new(TS_BOOL, &SCALAR, &e), *out[1] = {0};
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, &cond, out, &e), TS_OK, "%s", e.msg); /* else: 3 */
    ts_tensor_unref(out[0]);
    *(uint8_t *)cond->data = 1;
    cr_assert_neq(ts_graph_run_reference(g, TS_DOMAIN_F32, &cond, out, &e), TS_OK);
    cr_assert(strstr(e.msg, "node 'if' (If): then_branch gives output 0 as 2, the shape bound at load is 3"), "%s",
              e.msg);
    ts_tensor_unref(cond);
    ts_body_unref(br[0]);
    ts_body_unref(br[1]);
    ts_graph_free(g);
}

Test(control_flow, loop_that_never_ends_is_refused)
{
    ts_error e = {0};
    ts_shape s2 = {1, {2}};
    ts_graph *b = ts_graph_new("forever", 17);
    ts_graph_add_input(b, "i", TS_I64, &SCALAR, &e);
    int c = ts_graph_add_input(b, "c", TS_BOOL, &SCALAR, &e);
    int x = ts_graph_add_input(b, "x", TS_F32, &s2, &e);
    int co = node(b, "Identity", &c, 1, NULL, 0, "c2");
    int xo = node(b, "Neg", &x, 1, NULL, 0, "x2");
    cr_assert_eq(ts_graph_add_output(b, co, &e) | ts_graph_add_output(b, xo, &e), TS_OK);
    ts_body *body = ts_body_new(b, 3, &e);
    ts_graph *g = ts_graph_new("g", 17);
    int x0 = ts_graph_add_input(g, "x0", TS_F32, &s2, &e);
    ts_attr a = {.name = "body", .kind = TS_ATTR_GRAPH, .body = body};
    int o;
    cr_assert_eq(ts_graph_add_node(g, "Loop", "forever", (int[]){-1, -1, x0}, 3, &a, 1, 1, NULL, &o, &e), -1);
    cr_assert(strstr(e.msg, "node 'forever' (Loop): never ends: it has no trip count and its condition stays true"),
              "%s", e.msg);
    ts_body_unref(body);
    ts_graph_free(g);
}
