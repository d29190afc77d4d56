/* Binding symbolic dimensions (docs/decisions.md, "Binding symbolic
 * dimensions"): a model that does not load with its dimensions at the
 * placeholder 1 (y = reflect-pad(x, 2 on each side of axis 1), x: [N, L])
 * - fails to load unbound with the placeholder named in the error, loads
 *   once bound;
 * - is described from its declaration (ts_onnx_read_io);
 * - opens as a session and runs at the sizes of each run's inputs;
 * - binds from .npy files (ts_model_io_bind_dir), a file of the wrong rank
 *   or fixed size being one error line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "onnx.pb-c.h"
#include "onnx_pack.h"
#include "tsopt.h"

static char model_path[64], dir[64];

static void dim(Onnx__TensorShapeProto__Dimension *d, const char *p)
{
    onnx__tensor_shape_proto__dimension__init(d);
    d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    d->dim_param = (char *)p;
}

static void setup(void)
{
    Onnx__TensorShapeProto__Dimension d[2], *dp[2] = {&d[0], &d[1]};
    dim(&d[0], "N");
    dim(&d[1], "L");
    Onnx__TensorShapeProto sp;
    onnx__tensor_shape_proto__init(&sp);
    sp.n_dim = 2, sp.dim = dp;
    Onnx__TypeProto__Tensor tt;
    onnx__type_proto__tensor__init(&tt);
    tt.has_elem_type = 1, tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, tt.shape = &sp;
    Onnx__TypeProto tp;
    onnx__type_proto__init(&tp);
    tp.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, tp.tensor_type = &tt;
    Onnx__ValueInfoProto x, y;
    onnx__value_info_proto__init(&x);
    onnx__value_info_proto__init(&y);
    x.name = "x", x.type = &tp;
    y.name = "y", y.type = &tp;
    int64_t pads[4] = {0, 2, 0, 2}, pdims[1] = {4};
    Onnx__TensorProto p;
    onnx__tensor_proto__init(&p);
    p.name = "pads", p.has_data_type = 1, p.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    p.n_dims = 1, p.dims = pdims, p.n_int64_data = 4, p.int64_data = pads;
    Onnx__AttributeProto mode;
    onnx__attribute_proto__init(&mode);
    mode.name = "mode", mode.has_type = 1, mode.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    mode.has_s = 1, mode.s.data = (uint8_t *)"reflect", mode.s.len = 7;
    Onnx__AttributeProto *attrs[1] = {&mode};
    char *in[2] = {"x", "pads"}, *out[1] = {"y"};
    Onnx__NodeProto pad;
    onnx__node_proto__init(&pad);
    pad.op_type = "Pad", pad.name = "pad", pad.n_input = 2, pad.input = in, pad.n_output = 1, pad.output = out;
    pad.n_attribute = 1, pad.attribute = attrs;
    Onnx__NodeProto *nodes[1] = {&pad};
    Onnx__ValueInfoProto *ins[1] = {&x}, *outs[1] = {&y};
    Onnx__TensorProto *inits[1] = {&p};
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = "reflect", g.n_node = 1, g.node = nodes, g.n_input = 1, g.input = ins, g.n_output = 1, g.output = outs;
    g.n_initializer = 1, g.initializer = inits;
    size_t n;
    uint8_t *buf = test_pack_model(&g, NULL, &n);
    snprintf(model_path, sizeof model_path, "/tmp/tsopt-symdims-%d.onnx", (int)getpid());
    snprintf(dir, sizeof dir, "/tmp/tsopt-symdims-%d.in", (int)getpid());
    FILE *f = fopen(model_path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
    free(buf);
    cr_assert_eq(mkdir(dir, 0777), 0);
}

static void cleanup(void)
{
    char p[128];
    snprintf(p, sizeof p, "%s/x.npy", dir);
    remove(p);
    rmdir(dir);
    remove(model_path);
}

TestSuite(symdims, .init = setup, .fini = cleanup);

/* x[i][j] = 10 i + j: the reflect pad of row i is known by heart */
static ts_tensor *input(int64_t rows, int64_t len)
{
    ts_error err = {0};
    ts_shape sh = ts_shape_make(2, (int64_t[]){rows, len});
    ts_tensor *x = ts_tensor_new(TS_F32, &sh, &err);
    cr_assert(x, "%s", err.msg);
    float *d = x->data;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < len; j++) d[i * len + j] = (float)(10 * i + j);
    return x;
}

static void check_reflect(const ts_tensor *y, int64_t rows, int64_t len)
{
    cr_assert_eq(y->shape.rank, 2);
    cr_assert_eq(y->shape.dims[0], rows);
    cr_assert_eq(y->shape.dims[1], len + 4);
    const float *d = y->data;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < len + 4; j++) {
            int64_t k = j - 2;
            k = k < 0 ? -k : k >= len ? 2 * (len - 1) - k : k;
            cr_assert_float_eq(d[i * (len + 4) + j], (float)(10 * i + k), 0, "row %lld col %lld", (long long)i,
                               (long long)j);
        }
}

Test(symdims, load_unbound_says_why)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    cr_assert_neq(ts_onnx_load(model_path, NULL, 0, &g, &err), TS_OK);
    cr_assert(strstr(err.msg, "reflect pads"), "%s", err.msg);
    cr_assert(strstr(err.msg, "placeholder size 1 of the unbound symbolic dimensions 'N', 'L'"), "%s", err.msg);
    ts_input_bind b = {"x", ts_shape_make(2, (int64_t[]){2, 5})};
    cr_assert_eq(ts_onnx_load(model_path, &b, 1, &g, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(g->values[g->outputs[0]].shape.dims[1], 9);
    ts_graph_free(g);
    /* bound, a size the model refuses is the operator's error alone */
    b.shape.dims[1] = 2;
    err = (ts_error){0};
    cr_assert_neq(ts_onnx_load(model_path, &b, 1, &g, &err), TS_OK);
    cr_assert_null(strstr(err.msg, "placeholder"), "%s", err.msg);
}

Test(symdims, declaration)
{
    ts_error err = {0};
    ts_model_io *io = NULL;
    cr_assert_eq(ts_onnx_read_io(model_path, &io, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(io->ninputs, 1); /* the pads initializer is no input */
    cr_assert_eq(io->noutputs, 1);
    cr_assert_str_eq(io->inputs[0].name, "x");
    cr_assert_str_eq(io->inputs[0].dim_params[0], "N");
    cr_assert_str_eq(io->inputs[0].dim_params[1], "L");
    cr_assert(ts_model_io_symbolic(io));
    char buf[64];
    cr_assert_str_eq(ts_io_declared_str(&io->inputs[0], buf, sizeof buf), "[N, L]");
    ts_model_io_free(io);
    cr_assert_neq(ts_onnx_read_io("/nonexistent/m.onnx", &io, &err), TS_OK);
    cr_assert_null(io);
}

Test(symdims, session_binds_at_run)
{
    ts_error err = {0};
    ts_session *s = NULL;
    cr_assert_eq(ts_session_open(model_path, 1, &s, &err), TS_OK, "%s", err.msg);
    cr_assert_null(ts_session_graph(s)); /* loaded at the first run's sizes */
    ts_io_info in;
    cr_assert(ts_session_input_info(s, 0, &in));
    cr_assert_str_eq(in.dim_params[1], "L");
    static const int64_t sizes[][2] = {{2, 5}, {3, 4}, {1, 300}, {2, 5}};
    for (int k = 0; k < 4; k++) {
        ts_tensor *x = input(sizes[k][0], sizes[k][1]), *y = NULL;
        cr_assert_eq(ts_session_run(s, &x, &y, &err), TS_OK, "%lldx%lld: %s", (long long)sizes[k][0],
                     (long long)sizes[k][1], err.msg);
        check_reflect(y, sizes[k][0], sizes[k][1]);
        ts_tensor_unref(x);
        ts_tensor_unref(y);
    }
    /* too short for the pads: the run's error, the session stays usable */
    ts_tensor *x = input(1, 2), *y = NULL;
    cr_assert_neq(ts_session_run(s, &x, &y, &err), TS_OK);
    cr_assert(strstr(err.msg, "reflect pads"), "%s", err.msg);
    ts_tensor_unref(x);
    x = input(1, 3);
    cr_assert_eq(ts_session_run(s, &x, &y, &err), TS_OK, "%s", err.msg);
    check_reflect(y, 1, 3);
    ts_tensor_unref(x);
    ts_tensor_unref(y);
    ts_session_free(s);
}

Test(symdims, bind_from_files)
{
    ts_error err = {0};
    ts_model_io *io = NULL;
    cr_assert_eq(ts_onnx_read_io(model_path, &io, &err), TS_OK, "%s", err.msg);
    char p[128];
    snprintf(p, sizeof p, "%s/x.npy", dir);
    ts_tensor *x = input(3, 7);
    cr_assert_eq(ts_npy_save(p, x, &err), TS_OK, "%s", err.msg);
    ts_tensor_unref(x);
    ts_input_bind *b = NULL;
    int n = 0;
    cr_assert_eq(ts_model_io_bind_dir(io, dir, &b, &n, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(b[0].name, "x");
    cr_assert_eq(b[0].shape.dims[0], 3);
    cr_assert_eq(b[0].shape.dims[1], 7);
    /* given already: the file is not read again */
    cr_assert_eq(ts_model_io_bind_dir(io, dir, &b, &n, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(n, 1);
    free(b);
    b = NULL;
    n = 0;
    x = ts_tensor_new(TS_F32, &(ts_shape){.rank = 3, .dims = {1, 2, 3}}, &err);
    cr_assert_eq(ts_npy_save(p, x, &err), TS_OK, "%s", err.msg);
    ts_tensor_unref(x);
    cr_assert_neq(ts_model_io_bind_dir(io, dir, &b, &n, &err), TS_OK);
    cr_assert(strstr(err.msg, "input 'x': the model wants float32 [N, L], the file holds float32 1x2x3"), "%s",
              err.msg);
    cr_assert_null(strchr(err.msg, '\n'));
    free(b);
    ts_model_io_free(io);
}
