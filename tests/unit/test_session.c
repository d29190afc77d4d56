/* src/api/ and src/draw/: the session (declared dims, runs at several
 * batch sizes past the number of kept plans, input errors), the declared
 * symbolic dims of a graph, ts_optimize_opts_set, tsopt_version, and
 * ts_graph_draw's DOT (diff, bad extension).  The model is assembled here
 * with protobuf-c: y = relu(x + c), s = x + c, x: [N, 3]. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "onnx.pb-c.h"
#include "onnx_pack.h"
#include "tsopt.h"

static char model_path[64];

/* One dimension: "N" (dim_param), "?" (symbolic, no name) or a size. */
static void set_dim(Onnx__TensorShapeProto__Dimension *d, const char *what)
{
    onnx__tensor_shape_proto__dimension__init(d);
    if (!strcmp(what, "?")) return;
    if (what[0] >= '0' && what[0] <= '9') {
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d->dim_value = atoi(what);
    } else {
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        d->dim_param = (char *)what;
    }
}

typedef struct vi2 {
    Onnx__ValueInfoProto vi;
    Onnx__TypeProto tp;
    Onnx__TypeProto__Tensor tt;
    Onnx__TensorShapeProto sp;
    Onnx__TensorShapeProto__Dimension d[2], *dp[2];
} vi2;

static void make_vi(vi2 *v, const char *name, const char *d0, const char *d1)
{
    onnx__value_info_proto__init(&v->vi);
    onnx__type_proto__init(&v->tp);
    onnx__type_proto__tensor__init(&v->tt);
    onnx__tensor_shape_proto__init(&v->sp);
    v->vi.name = (char *)name;
    v->vi.type = &v->tp;
    v->tp.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    v->tp.tensor_type = &v->tt;
    v->tt.has_elem_type = 1;
    v->tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    v->tt.shape = &v->sp;
    set_dim(&v->d[0], d0);
    set_dim(&v->d[1], d1);
    v->dp[0] = &v->d[0];
    v->dp[1] = &v->d[1];
    v->sp.n_dim = 2;
    v->sp.dim = v->dp;
}

static void write_model(void)
{
    vi2 x, y, s;
    make_vi(&x, "x", "N", "3");
    make_vi(&y, "y", "N", "3");
    make_vi(&s, "s", "?", "3");
    float cdata[3] = {1, -2, 3};
    int64_t cdims[1] = {3};
    Onnx__TensorProto c;
    onnx__tensor_proto__init(&c);
    c.name = "c";
    c.has_data_type = 1;
    c.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    c.n_dims = 1;
    c.dims = cdims;
    c.n_float_data = 3;
    c.float_data = cdata;
    char *add_in[2] = {"x", "c"}, *add_out[1] = {"s"}, *relu_in[1] = {"s"}, *relu_out[1] = {"y"};
    Onnx__NodeProto add, relu;
    onnx__node_proto__init(&add);
    onnx__node_proto__init(&relu);
    add.op_type = "Add", add.name = "add", add.n_input = 2, add.input = add_in, add.n_output = 1, add.output = add_out;
    relu.op_type = "Relu", relu.name = "relu", relu.n_input = 1, relu.input = relu_in, relu.n_output = 1;
    relu.output = relu_out;
    Onnx__NodeProto *nodes[2] = {&add, &relu};
    Onnx__ValueInfoProto *ins[1] = {&x.vi}, *outs[2] = {&y.vi, &s.vi};
    Onnx__TensorProto *inits[1] = {&c};
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = "session_test", g.n_node = 2, g.node = nodes, g.n_input = 1, g.input = ins, g.n_output = 2;
    g.output = outs, g.n_initializer = 1, g.initializer = inits;
    size_t n;
    uint8_t *buf = test_pack_model(&g, NULL, &n);
    snprintf(model_path, sizeof model_path, "/tmp/tsopt-session-%d.onnx", (int)getpid());
    FILE *f = fopen(model_path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
    free(buf);
}

static void cleanup(void) { remove(model_path); }

TestSuite(session, .init = write_model, .fini = cleanup);

Test(session, declared_dims)
{
    ts_error err = {0};
    ts_session *s = NULL;
    cr_assert_eq(ts_session_open(model_path, 1, &s, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(ts_session_ninputs(s), 1);
    cr_assert_eq(ts_session_noutputs(s), 2);
    ts_io_info in, y, sum;
    cr_assert(ts_session_input_info(s, 0, &in));
    cr_assert(ts_session_output_info(s, 0, &y));
    cr_assert(ts_session_output_info(s, 1, &sum));
    cr_assert_not(ts_session_input_info(s, 1, &in));
    cr_assert_str_eq(in.name, "x");
    cr_assert_eq(in.dtype, TS_F32);
    cr_assert_eq(in.shape.rank, 2);
    cr_assert_eq(in.shape.dims[1], 3);
    cr_assert_str_eq(in.dim_params[0], "N");
    cr_assert_null(in.dim_params[1]);
    cr_assert_str_eq(y.dim_params[0], "N");
    cr_assert_str_eq(sum.name, "s");
    cr_assert_str_eq(sum.dim_params[0], ""); /* symbolic without a name */
    const ts_graph *g = ts_session_graph(s);
    cr_assert_str_eq(ts_graph_input_dim_param(g, 0, 0), "N");
    cr_assert_null(ts_graph_input_dim_param(g, 0, 1));
    cr_assert_null(ts_graph_input_dim_param(g, 1, 0));
    cr_assert_null(ts_graph_output_dim_param(g, 0, 7));
    ts_session_free(s);
    /* a graph built through the API has no file behind it */
    ts_graph *b = ts_graph_new("built", 13);
    ts_shape sh = ts_shape_make(2, (int64_t[]){1, 3});
    cr_assert_geq(ts_graph_add_input(b, "x", TS_F32, &sh, &err), 0);
    cr_assert_null(ts_graph_input_dim_param(b, 0, 0));
    ts_graph_free(b);
}

Test(session, runs_at_any_batch)
{
    ts_error err = {0};
    ts_session *s = NULL;
    cr_assert_eq(ts_session_open(model_path, 0, &s, &err), TS_OK, "%s", err.msg);
    static const float c[3] = {1, -2, 3};
    /* more sizes than the session keeps plans for, some coming back */
    static const int64_t sizes[] = {1, 2, 5, 3, 2, 7, 4, 1, 6, 5};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        ts_shape sh = ts_shape_make(2, (int64_t[]){sizes[k], 3});
        ts_tensor *x = ts_tensor_new(TS_F32, &sh, &err), *out[2];
        float *xd = x->data;
        for (int64_t i = 0; i < sizes[k] * 3; i++) xd[i] = (float)(i % 5) - 2.5f;
        cr_assert_eq(ts_session_run(s, &x, out, &err), TS_OK, "N=%lld: %s", (long long)sizes[k], err.msg);
        cr_assert(ts_shape_eq(&out[0]->shape, &sh));
        const float *yd = out[0]->data, *sd = out[1]->data;
        for (int64_t i = 0; i < sizes[k] * 3; i++) {
            float v = xd[i] + c[i % 3];
            cr_assert_float_eq(sd[i], v, 1e-6);
            cr_assert_float_eq(yd[i], v > 0 ? v : 0, 1e-6);
        }
        ts_tensor_unref(out[0]);
        ts_tensor_unref(out[1]);
        ts_tensor_unref(x);
    }
    ts_session_free(s);
}

/* Sizes of one class (N above 1) re-bind the last plan instead of building
 * one (ts_plan_rebind); a size whose plan a re-bind took over builds its
 * own when it comes back, so that two sizes alternating are served from
 * the cache instead of re-bound back and forth. */
Test(session, sizes_of_one_class_rebind)
{
    ts_error err = {0};
    ts_session *s = NULL;
    cr_assert_eq(ts_session_open(model_path, 0, &s, &err), TS_OK, "%s", err.msg);
    static const float c[3] = {1, -2, 3};
    static const int64_t sizes[] = {2, 3, 4, 5, 6, 5, 6, 5, 6};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        ts_shape sh = ts_shape_make(2, (int64_t[]){sizes[k], 3});
        ts_tensor *x = ts_tensor_new(TS_F32, &sh, &err), *out[2];
        float *xd = x->data;
        for (int64_t i = 0; i < sizes[k] * 3; i++) xd[i] = (float)(i % 7) - 3.5f;
        cr_assert_eq(ts_session_run(s, &x, out, &err), TS_OK, "N=%lld: %s", (long long)sizes[k], err.msg);
        cr_assert(ts_shape_eq(&out[0]->shape, &sh));
        const float *yd = out[0]->data, *sd = out[1]->data;
        for (int64_t i = 0; i < sizes[k] * 3; i++) {
            float v = xd[i] + c[i % 3];
            cr_assert_float_eq(sd[i], v, 1e-6, "N=%lld", (long long)sizes[k]);
            cr_assert_float_eq(yd[i], v > 0 ? v : 0, 1e-6, "N=%lld", (long long)sizes[k]);
        }
        ts_tensor_unref(out[0]);
        ts_tensor_unref(out[1]);
        ts_tensor_unref(x);
        if (k == 4) cr_assert_eq(ts_session_plan_builds(s), 1, "N=2..6: one plan, re-bound 4 times");
    }
    cr_assert_eq(ts_session_plan_rebinds(s), 4);
    /* 3 loads its graph, 4 checks a derived one against a load, 5 and 6 derive it */
    cr_assert_eq(ts_session_graph_derives(s), 2);
    /* 4 (a copy, checked) and 5 (in place, kept) order the graph, 6 reuses
     * 5's order; each derive re-infers once: this model has no size-dependent
     * constant and no node keeps a guessed shape, so no strict pass */
    int64_t orders, passes;
    ts_session_derive_stats(s, &orders, &passes);
    cr_assert_eq(orders, 2, "orders %lld", (long long)orders);
    cr_assert_eq(passes, 3, "passes %lld", (long long)passes);
    cr_assert_eq(ts_session_plan_builds(s), 2, "5 and 6 alternating: 5 builds its own plan once");
    ts_session_free(s);
}

Test(session, input_errors)
{
    ts_error err = {0};
    ts_session *s = NULL;
    cr_assert_eq(ts_session_open("/nonexistent/m.onnx", 0, &s, &err), TS_ERR_IO);
    cr_assert(strstr(err.msg, "cannot open model '/nonexistent/m.onnx'"), "%s", err.msg);
    cr_assert_null(s);
    cr_assert_eq(ts_session_open(model_path, 0, &s, &err), TS_OK, "%s", err.msg);
    ts_tensor *out[2] = {NULL, NULL};
    ts_shape bad_dim = ts_shape_make(2, (int64_t[]){2, 4}), bad_rank = ts_shape_make(1, (int64_t[]){3});
    ts_tensor *a = ts_tensor_new(TS_F32, &bad_dim, &err), *b = ts_tensor_new(TS_F32, &bad_rank, &err);
    ts_shape ok = ts_shape_make(2, (int64_t[]){2, 3});
    ts_tensor *d = ts_tensor_new(TS_F64, &ok, &err), *none = NULL;
    cr_assert_eq(ts_session_run(s, &a, out, &err), TS_ERR_INVALID);
    cr_assert_str_eq(err.msg, "run: input 'x' has shape 2x4, the model expects Nx3");
    cr_assert_eq(ts_session_run(s, &b, out, &err), TS_ERR_INVALID);
    cr_assert_str_eq(err.msg, "run: input 'x' has shape 3, the model expects Nx3");
    cr_assert_eq(ts_session_run(s, &d, out, &err), TS_ERR_INVALID);
    cr_assert_str_eq(err.msg, "run: input 'x' is float64, the model expects float32");
    cr_assert_eq(ts_session_run(s, &none, out, &err), TS_ERR_INVALID);
    cr_assert_str_eq(err.msg, "run: input 'x' is missing");
    cr_assert_null(out[0]);
    ts_tensor_unref(a);
    ts_tensor_unref(b);
    ts_tensor_unref(d);
    ts_session_free(s);
    cr_assert_eq(ts_session_open(model_path, -1, &s, &err), TS_ERR_INVALID);
}

Test(api, optimize_opts_set)
{
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    ts_error err = {0};
    cr_assert_eq(ts_optimize_opts_set(&o, "time_limit", "2.5", &err), TS_OK);
    cr_assert_eq(ts_optimize_opts_set(&o, "budget", "12", &err), TS_OK);
    cr_assert_eq(ts_optimize_opts_set(&o, "seed", "7", &err), TS_OK);
    cr_assert_eq(ts_optimize_opts_set(&o, "transforms", "taso", &err), TS_OK);
    cr_assert_eq(ts_optimize_opts_set(&o, "cost_model", "roofline", &err), TS_OK);
    cr_assert_eq(ts_optimize_opts_set(&o, "no_timing", "1", &err), TS_OK);
    cr_assert_float_eq(o.time_limit, 2.5, 1e-12);
    cr_assert_eq(o.budget, 12);
    cr_assert_eq(o.seed, 7);
    cr_assert_str_eq(o.transforms, "taso");
    cr_assert(o.roofline && o.no_timing);
    cr_assert_eq(ts_optimize_opts_set(&o, "budget", "1.5", &err), TS_ERR_INVALID);
    cr_assert_str_eq(err.msg, "optimize option 'budget': expected a whole number >= 0, got '1.5'");
    cr_assert_eq(ts_optimize_opts_set(&o, "alpha", "x", &err), TS_ERR_INVALID);
    cr_assert_str_eq(err.msg, "optimize option 'alpha': expected a number, got 'x'");
    cr_assert_eq(ts_optimize_opts_set(&o, "no_timing", "yes", &err), TS_ERR_INVALID);
    cr_assert_eq(ts_optimize_opts_set(&o, "colour", "1", &err), TS_ERR_INVALID);
    cr_assert(strstr(err.msg, "unknown optimize option 'colour' (known: time_limit,"), "%s", err.msg);
    char *json = (char *)"unset";
    const char *bad[] = {"time_limit"};
    cr_assert_eq(ts_optimize_file(model_path, "/tmp/never.onnx", NULL, 0, bad, 1, &json, &err), TS_ERR_INVALID);
    cr_assert_str_eq(err.msg, "optimize option 'time_limit': expected key=value");
    cr_assert_null(json);
}

Test(api, version)
{
    const char *v = tsopt_version();
    int a, b, c;
    char end;
    cr_assert_eq(sscanf(v, "%d.%d.%d%c", &a, &b, &c, &end), 3, "version '%s'", v);
    ts_free(NULL);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot read %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

Test(session, draw_dot)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    cr_assert_eq(ts_onnx_load(model_path, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    char path[96];
    snprintf(path, sizeof path, "/tmp/tsopt-draw-%d.dot", (int)getpid());
    cr_assert_eq(ts_graph_draw(g, NULL, path, &err), TS_OK, "%s", err.msg);
    const char *t = read_text(path);
    cr_assert(strstr(t, "digraph \"session_test\""), "%s", t);
    cr_assert(strstr(t, "label=\"x\\nNx3 float32\""), "%s", t);     /* the declared symbolic dim */
    cr_assert(strstr(t, "label=\"Add\\nadd\\n1x3\\nweights 3\""), "%s", t); /* c folded into Add */
    cr_assert(strstr(t, "label=\"Relu\\nrelu\\n1x3\""), "%s", t);
    cr_assert_null(strstr(t, "optimization:"));
    /* against itself: nothing new, nothing removed */
    cr_assert_eq(ts_graph_draw(g, g, path, &err), TS_OK, "%s", err.msg);
    cr_assert(strstr(read_text(path), "optimization: 0 nodes new (orange)\""));
    /* against a graph without the Relu: the Relu is the new node */
    ts_graph *o = ts_graph_copy(g);
    for (int i = 0; i < o->nnodes; i++)
        if (!strcmp(o->nodes[i].name, "relu")) o->nodes[i].dead = true;
    cr_assert_eq(ts_graph_draw(g, o, path, &err), TS_OK, "%s", err.msg);
    t = read_text(path);
    cr_assert(strstr(t, "optimization: 1 node new (orange)\""), "%s", t);
    cr_assert(strstr(t, "fillcolor=\"#fbd3a8\", color=\"#d9730d\", penwidth=2.2, tooltip=\"relu\""), "%s", t);
    cr_assert_eq(ts_graph_draw(o, g, path, &err), TS_OK, "%s", err.msg);
    cr_assert(strstr(read_text(path), "0 nodes new (orange); 1 removed: Relu x1\""));
    remove(path);
    cr_assert_eq(ts_graph_draw(g, NULL, "/tmp/x.jpg", &err), TS_ERR_INVALID);
    cr_assert_str_eq(err.msg, "draw: '/tmp/x.jpg': expected a file ending in .svg, .png or .dot");
    cr_assert_eq(ts_graph_draw(g, NULL, "/nonexistent/dir/x.dot", &err), TS_ERR_IO);
    cr_assert(strstr(err.msg, "draw: cannot write '/nonexistent/dir/x.dot': No such file"), "%s", err.msg);
    ts_graph_free(o);
    ts_graph_free(g);
}
