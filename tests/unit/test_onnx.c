/* ONNX import/export: round trips, hand-built models (protobuf-c structs
 * assembled here, so the tests need no fixture files) and bad input, each
 * asserting the error text. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ir/ir.h"
#include "ir/meta.h"
#include "onnx.pb-c.h"

/* ------------------------------------------------ model builder (tests) */

#define MAXP 512
typedef struct mb {
    void *mem[MAXP]; /* everything allocated for the model */
    int nmem;
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
} mb;

static void *mb_alloc(mb *m, size_t n)
{
    cr_assert(m->nmem < MAXP);
    return m->mem[m->nmem++] = calloc(1, n ? n : 1);
}

static char *mb_str(mb *m, const char *s)
{
    char *d = mb_alloc(m, strlen(s) + 1);
    strcpy(d, s);
    return d;
}

static void mb_init(mb *m, int opset)
{
    memset(m, 0, sizeof *m);
    onnx__model_proto__init(&m->model);
    onnx__graph_proto__init(&m->graph);
    onnx__operator_set_id_proto__init(&m->opset);
    m->opset.domain = "";
    m->opset.has_version = 1;
    m->opset.version = opset;
    m->opsets[0] = &m->opset;
    m->model.has_ir_version = 1;
    m->model.ir_version = 8;
    m->model.n_opset_import = 1;
    m->model.opset_import = m->opsets;
    m->model.graph = &m->graph;
    m->graph.name = "test";
    m->graph.input = mb_alloc(m, 16 * sizeof(void *));
    m->graph.output = mb_alloc(m, 16 * sizeof(void *));
    m->graph.node = mb_alloc(m, 32 * sizeof(void *));
    m->graph.initializer = mb_alloc(m, 16 * sizeof(void *));
}

static void mb_free(mb *m)
{
    for (int i = 0; i < m->nmem; i++) free(m->mem[i]);
}

/* dims: -1 marks a dynamic dimension (dim_param "n"). */
static Onnx__ValueInfoProto *mb_vi(mb *m, const char *name, int elem, int rank, const int64_t *dims)
{
    Onnx__ValueInfoProto *vi = mb_alloc(m, sizeof *vi);
    Onnx__TypeProto *tp = mb_alloc(m, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = mb_alloc(m, sizeof *tt);
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    vi->name = mb_str(m, name);
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    if (rank >= 0) {
        Onnx__TensorShapeProto *sp = mb_alloc(m, sizeof *sp);
        onnx__tensor_shape_proto__init(sp);
        sp->n_dim = (size_t)rank;
        sp->dim = mb_alloc(m, sizeof(void *) * (size_t)rank);
        for (int i = 0; i < rank; i++) {
            Onnx__TensorShapeProto__Dimension *d = mb_alloc(m, sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (dims[i] == -1) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = "n";
            } else {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[i];
            }
            sp->dim[i] = d;
        }
        tt->shape = sp;
    }
    return vi;
}

static void mb_input(mb *m, const char *name, int rank, const int64_t *dims)
{
    m->graph.input[m->graph.n_input++] = mb_vi(m, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims);
}

static void mb_output(mb *m, const char *name)
{
    m->graph.output[m->graph.n_output++] = mb_vi(m, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL);
}

static Onnx__TensorProto *mb_tensor(mb *m, const char *name, int rank, const int64_t *dims, const float *data)
{
    Onnx__TensorProto *t = mb_alloc(m, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = name ? mb_str(m, name) : NULL;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_dims = (size_t)rank;
    t->dims = mb_alloc(m, sizeof(int64_t) * (size_t)rank);
    if (rank) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    if (data) {
        t->has_raw_data = 1;
        t->raw_data.len = (size_t)n * 4;
        t->raw_data.data = mb_alloc(m, (size_t)n * 4);
        memcpy(t->raw_data.data, data, (size_t)n * 4);
    }
    return t;
}

static Onnx__TensorProto *mb_init_f32(mb *m, const char *name, int rank, const int64_t *dims, const float *data)
{
    Onnx__TensorProto *t = mb_tensor(m, name, rank, dims, data);
    m->graph.initializer[m->graph.n_initializer++] = t;
    return t;
}

/* ins/outs: NULL-terminated lists of names. */
static Onnx__NodeProto *mb_node(mb *m, const char *op, const char *name, const char *const *ins,
                                const char *const *outs)
{
    Onnx__NodeProto *n = mb_alloc(m, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = mb_str(m, op);
    n->name = name ? mb_str(m, name) : NULL;
    n->input = mb_alloc(m, 8 * sizeof(char *));
    n->output = mb_alloc(m, 8 * sizeof(char *));
    n->attribute = mb_alloc(m, 8 * sizeof(void *));
    for (; ins && ins[n->n_input]; n->n_input++) n->input[n->n_input] = mb_str(m, ins[n->n_input]);
    for (; outs && outs[n->n_output]; n->n_output++) n->output[n->n_output] = mb_str(m, outs[n->n_output]);
    m->graph.node[m->graph.n_node++] = n;
    return n;
}

static Onnx__AttributeProto *mb_attr(mb *m, Onnx__NodeProto *n, const char *name, int type)
{
    Onnx__AttributeProto *a = mb_alloc(m, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = mb_str(m, name);
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

static uint8_t *mb_pack(mb *m, size_t *len)
{
    *len = onnx__model_proto__get_packed_size(&m->model);
    uint8_t *buf = malloc(*len ? *len : 1);
    onnx__model_proto__pack(&m->model, buf);
    return buf;
}

/* Loads m from memory: returns the status, graph in *g (NULL on error). */
static ts_status mb_load(mb *m, const ts_input_bind *binds, int nb, ts_graph **g, ts_error *err)
{
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    ts_status st = ts_onnx_load_buffer(buf, len, NULL, binds, nb, g, err);
    free(buf);
    if (st) cr_assert_null(*g);
    return st;
}

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

static void expect_error(ts_status st, const ts_error *err, const char *text)
{
    cr_assert_neq(st, TS_OK, "expected an error containing \"%s\"", text);
    cr_assert(strstr(err->msg, text), "error \"%s\" does not contain \"%s\"", err->msg, text);
}

/* A per-test scratch directory. */
static char tmpdir[64];
static void make_tmpdir(void)
{
    strcpy(tmpdir, "/tmp/tsopt_onnx_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}
static void remove_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

static bool file_exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* ----------------------------------------------------------- round trip */

static ts_tensor *f32_tensor(int rank, const int64_t *dims, uint64_t seed)
{
    ts_shape s = ts_shape_make(rank, dims);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, NULL);
    ts_tensor_fill_random(t, &seed, -1, 1);
    return t;
}

/* x -> Conv(pads, strides) -> Relu -> LeakyRelu(alpha) -> Add(c) -> Mul(x2) -> y, plus a Sub output. */
static ts_graph *sample_graph(void)
{
    ts_error err = {0};
    ts_graph *g = ts_graph_new("sample", 13);
    int x = ts_graph_add_input(g, "x", TS_F32, &(ts_shape){4, {1, 2, 5, 5}}, &err);
    ts_tensor *w = f32_tensor(4, DIMS(4, 2, 3, 3), 1), *b = f32_tensor(1, DIMS(4), 2),
              *c = f32_tensor(3, DIMS(4, 1, 1), 3);
    int vw = ts_graph_add_constant(g, "conv.weight", w, &err);
    int vb = ts_graph_add_constant(g, "conv.bias", b, &err);
    int vc = ts_graph_add_constant(g, "shift", c, &err);
    ts_tensor_unref(w);
    ts_tensor_unref(b);
    ts_tensor_unref(c);
    cr_assert(x >= 0 && vw >= 0 && vb >= 0 && vc >= 0, "%s", err.msg);
    int64_t pads[] = {1, 1, 1, 1}, strides[] = {2, 2}, ks[] = {3, 3};
    ts_attr ca[] = {ts_attr_ints("pads", pads, 4), ts_attr_ints("strides", strides, 2),
                    ts_attr_ints("kernel_shape", ks, 2)};
    int y1, y2, y3, y4, y5, y6;
    cr_assert(ts_graph_add_node(g, "Conv", "conv", (int[]){x, vw, vb}, 3, ca, 3, 1, NAMES("conv_out"), &y1, &err) >= 0,
              "%s", err.msg);
    cr_assert(ts_graph_add_node(g, "Relu", "relu", &y1, 1, NULL, 0, 1, NULL, &y2, &err) >= 0, "%s", err.msg);
    ts_attr la = ts_attr_float("alpha", 0.25);
    cr_assert(ts_graph_add_node(g, "LeakyRelu", "leaky", &y2, 1, &la, 1, 1, NULL, &y3, &err) >= 0, "%s", err.msg);
    cr_assert(ts_graph_add_node(g, "Add", "add", (int[]){y3, vc}, 2, NULL, 0, 1, NULL, &y4, &err) >= 0, "%s", err.msg);
    cr_assert(ts_graph_add_node(g, "Mul", "mul", (int[]){y4, y4}, 2, NULL, 0, 1, NAMES("y"), &y5, &err) >= 0, "%s",
              err.msg);
    cr_assert(ts_graph_add_node(g, "Sub", "sub", (int[]){y5, y2}, 2, NULL, 0, 1, NAMES("z"), &y6, &err) >= 0, "%s",
              err.msg);
    ts_graph_add_output(g, y5, &err);
    ts_graph_add_output(g, y6, &err);
    cr_assert_eq(ts_graph_validate(g, &err), TS_OK, "%s", err.msg);
    return g;
}

static void assert_same_graph(const ts_graph *a, const ts_graph *b)
{
    cr_assert_eq(ts_graph_hash(a), ts_graph_hash(b));
    cr_assert_eq(a->opset, b->opset);
    cr_assert_str_eq(a->name, b->name);
    cr_assert_eq(a->nnodes, b->nnodes);
    for (int i = 0; i < a->nnodes; i++) {
        const ts_node *na = &a->nodes[i], *nb = &b->nodes[i];
        cr_assert_str_eq(na->op->name, nb->op->name);
        cr_assert_str_eq(na->name, nb->name);
        cr_assert_eq(na->ninputs, nb->ninputs);
        cr_assert_eq(memcmp(na->attrs, nb->attrs, na->op->attr_size), 0, "attributes of %s differ", na->name);
        for (int j = 0; j < na->ninputs; j++) {
            const ts_value *va = &a->values[na->inputs[j]], *vb = &b->values[nb->inputs[j]];
            cr_assert_str_eq(va->name, vb->name);
            cr_assert_eq(!va->constant, !vb->constant);
            if (va->constant) {
                cr_assert_eq(va->constant->nbytes, vb->constant->nbytes);
                cr_assert_eq(memcmp(va->constant->data, vb->constant->data, va->constant->nbytes), 0,
                             "weights of %s differ", va->name);
            }
        }
        for (int j = 0; j < na->noutputs; j++)
            cr_assert_str_eq(a->values[na->outputs[j]].name, b->values[nb->outputs[j]].name);
    }
    cr_assert_eq(a->ninputs, b->ninputs);
    cr_assert_eq(a->noutputs, b->noutputs);
    for (int i = 0; i < a->noutputs; i++)
        cr_assert_str_eq(a->values[a->outputs[i]].name, b->values[b->outputs[i]].name);
}

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(*len + 1);
    cr_assert_eq(fread(buf, 1, *len, f), *len);
    fclose(f);
    return buf;
}

Test(onnx, round_trip_is_exact, .init = make_tmpdir, .fini = remove_tmpdir)
{
    ts_error err = {0};
    ts_graph *g = sample_graph(), *h = NULL, *k = NULL;
    char p1[128], p2[128];
    snprintf(p1, sizeof p1, "%s/a.onnx", tmpdir);
    snprintf(p2, sizeof p2, "%s/b.onnx", tmpdir);
    cr_assert_eq(ts_onnx_save(g, p1, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(ts_onnx_load(p1, NULL, 0, &h, &err), TS_OK, "%s", err.msg);
    assert_same_graph(g, h);
    /* export is deterministic: a second save writes the same bytes */
    cr_assert_eq(ts_onnx_save(h, p2, &err), TS_OK, "%s", err.msg);
    size_t l1, l2;
    uint8_t *b1 = read_all(p1, &l1), *b2 = read_all(p2, &l2);
    cr_assert_eq(l1, l2);
    cr_assert_eq(memcmp(b1, b2, l1), 0);
    cr_assert_eq(ts_onnx_load_buffer(b2, l2, NULL, NULL, 0, &k, &err), TS_OK, "%s", err.msg);
    assert_same_graph(g, k);
    cr_assert(!file_exists(strcat(p1, ".tmp")));
    free(b1);
    free(b2);
    ts_graph_free(g);
    ts_graph_free(h);
    ts_graph_free(k);
}

Test(onnx, save_into_missing_directory, .init = make_tmpdir, .fini = remove_tmpdir)
{
    ts_error err = {0};
    ts_graph *g = sample_graph();
    char p[128], msg[256];
    snprintf(p, sizeof p, "%s/nodir/x.onnx", tmpdir);
    snprintf(msg, sizeof msg, "cannot write '%s': No such file or directory", p);
    expect_error(ts_onnx_save(g, p, &err), &err, msg);
    cr_assert(!file_exists(p));
    cr_assert(!file_exists(strcat(p, ".tmp")));
    ts_graph_free(g);
}

/* ------------------------------------------------------ unreadable input */

static uint8_t *valid_model(size_t *len)
{
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 2, DIMS(2, 3));
    mb_init_f32(&m, "w", 2, DIMS(2, 3), (const float[]){1, 2, 3, 4, 5, 6});
    mb_node(&m, "Add", "add", NAMES("x", "w"), NAMES("y"));
    mb_output(&m, "y");
    uint8_t *buf = mb_pack(&m, len);
    mb_free(&m);
    return buf;
}

Test(onnx, file_errors, .init = make_tmpdir, .fini = remove_tmpdir)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    char p[128], msg[256];
    snprintf(p, sizeof p, "%s/missing.onnx", tmpdir);
    snprintf(msg, sizeof msg, "cannot open model '%s': No such file or directory", p);
    expect_error(ts_onnx_load(p, NULL, 0, &g, &err), &err, msg);
    snprintf(p, sizeof p, "%s/empty.onnx", tmpdir);
    fclose(fopen(p, "wb"));
    snprintf(msg, sizeof msg, "model '%s' is empty", p);
    expect_error(ts_onnx_load(p, NULL, 0, &g, &err), &err, msg);
    size_t len;
    uint8_t *buf = valid_model(&len);
    snprintf(p, sizeof p, "%s/half.onnx", tmpdir);
    FILE *f = fopen(p, "wb");
    fwrite(buf, 1, len / 2, f);
    fclose(f);
    snprintf(msg, sizeof msg, "model '%s' is not a valid ONNX protobuf (truncated or corrupt)", p);
    expect_error(ts_onnx_load(p, NULL, 0, &g, &err), &err, msg);
    cr_assert_null(g);
    free(buf);
}

Test(onnx, buffer_errors)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    size_t len;
    uint8_t *buf = valid_model(&len);
    cr_assert_eq(ts_onnx_load_buffer(buf, len, NULL, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    ts_graph_free(g);
    expect_error(ts_onnx_load_buffer(buf, 0, NULL, NULL, 0, &g, &err), &err, "model is empty");
    expect_error(ts_onnx_load_buffer(buf, len / 2, NULL, NULL, 0, &g, &err), &err,
                 "model is not a valid ONNX protobuf (truncated or corrupt)");
    cr_assert_null(g);
    /* every prefix fails cleanly (some prefixes parse but lack parts) */
    for (size_t cut = 1; cut < len; cut++) {
        memset(&err, 0, sizeof err);
        cr_assert_neq(ts_onnx_load_buffer(buf, cut, NULL, NULL, 0, &g, &err), TS_OK, "prefix %zu loaded", cut);
        cr_assert(err.msg[0]);
        cr_assert_null(g);
    }
    free(buf);
}

Test(onnx, random_bytes)
{
    for (uint64_t seed = 1; seed <= 32; seed++) {
        uint64_t s = seed * 0x9e3779b97f4a7c15ull;
        size_t len = 1 + (size_t)(seed * 37 % 700);
        uint8_t *buf = malloc(len);
        for (size_t i = 0; i < len; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            buf[i] = (uint8_t)s;
        }
        ts_error err = {0};
        ts_graph *g = NULL;
        expect_error(ts_onnx_load_buffer(buf, len, NULL, NULL, 0, &g, &err), &err, "not a valid ONNX");
        free(buf);
    }
}

Test(onnx, model_level_errors)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 1, DIMS(2));
    mb_node(&m, "Relu", "r", NAMES("x"), NAMES("y"));
    mb_output(&m, "y");
    m.model.ir_version = 0;
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "model is not a valid ONNX model: ir_version is missing or 0");
    m.model.ir_version = 8;
    m.opset.domain = "com.microsoft";
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "model has no opset_import for the ai.onnx domain");
    m.opset.domain = "ai.onnx";
    cr_assert_eq(mb_load(&m, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    ts_graph_free(g);
    m.model.graph = NULL;
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "model is not a valid ONNX model: it has no graph");
    mb_free(&m);
}

/* ------------------------------------------------------------ node list */

Test(onnx, unknown_operator_is_reported_first)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 1, DIMS(2));
    mb_node(&m, "Add", "a", NAMES("x", "nowhere"), NAMES("t"));
    mb_node(&m, "Foo", "foo1", NAMES("t"), NAMES("u"));
    mb_node(&m, "Bar", "bar1", NAMES("u"), NAMES("y"));
    mb_output(&m, "y");
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "node 'foo1': operator 'Foo' (opset 13) is not supported");
    cr_assert_eq(err.code, TS_ERR_UNSUPPORTED);
    mb_free(&m);
}

Test(onnx, unsupported_domain_and_control_flow)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 1, DIMS(2));
    Onnx__NodeProto *n = mb_node(&m, "Gelu", "g", NAMES("x"), NAMES("y"));
    n->domain = "com.microsoft";
    mb_output(&m, "y");
    /* a custom-domain node is kept as it is (opaque), once its output's
     * shape is known: here from the user's binding */
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err,
                 "node 'g' (com.microsoft::Gelu): tsopt cannot compute this operator, and to keep it as it is "
                 "(opaque), the model declares no shape for its output 'y'");
    ts_input_bind yb = {"y", {1, {2}}};
    cr_assert_eq(mb_load(&m, &yb, 1, &g, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(g->nnodes, 1);
    cr_assert(g->nodes[0].op->flags & TS_OP_OPAQUE);
    ts_graph_free(g);
    g = NULL;
    n->domain = NULL;
    n->op_type = "If";
    /* control flow is imported (docs/control-flow.md): an If without its branches is not valid */
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "node 'g' (If): attribute 'then_branch' is missing");
    mb_free(&m);
}

Test(onnx, missing_input)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 1, DIMS(2));
    mb_node(&m, "Add", "a", NAMES("x", "ghost"), NAMES("y"));
    mb_output(&m, "y");
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err,
                 "node 'a' (Add): input 'ghost' is not produced by any node or graph input");
    mb_free(&m);
}

Test(onnx, cycle)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 1, DIMS(2));
    mb_node(&m, "Relu", "head", NAMES("x"), NAMES("h"));
    mb_node(&m, "Add", "p", NAMES("h", "t2"), NAMES("t1"));
    mb_node(&m, "Mul", "q", NAMES("t1", "x"), NAMES("t2"));
    mb_output(&m, "t2");
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "graph has a cycle through node '");
    cr_assert(strstr(err.msg, "'p'") || strstr(err.msg, "'q'"), "%s", err.msg);
    mb_free(&m);
}

Test(onnx, out_of_order_nodes_are_sorted)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 2, DIMS(2, 3));
    mb_node(&m, "Mul", NULL, NAMES("t1", "t2"), NAMES("y"));
    mb_node(&m, "Relu", "second", NAMES("t0"), NAMES("t2"));
    mb_node(&m, "Add", "first", NAMES("x", "x"), NAMES("t0"));
    mb_node(&m, "Sub", "third", NAMES("t0", "x"), NAMES("t1"));
    mb_output(&m, "y");
    cr_assert_eq(mb_load(&m, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(g->nnodes, 4);
    const char *ops[] = {"Add", "Relu", "Sub", "Mul"};
    for (int i = 0; i < 4; i++) cr_assert_str_eq(g->nodes[i].op->name, ops[i]);
    cr_assert_str_eq(g->nodes[3].name, "Mul_0"); /* unnamed nodes get op_fileindex */
    cr_assert_str_eq(g->values[g->outputs[0]].name, "y");
    ts_graph_free(g);
    mb_free(&m);
}

Test(onnx, constant_nodes_become_values_and_fold)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 1, DIMS(3));
    Onnx__NodeProto *c1 = mb_node(&m, "Constant", "c1", NULL, NAMES("k1"));
    mb_attr(&m, c1, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        mb_tensor(&m, NULL, 1, DIMS(3), (const float[]){1, 2, 3});
    Onnx__NodeProto *c2 = mb_node(&m, "Constant", "c2", NULL, NAMES("k2"));
    Onnx__AttributeProto *a = mb_attr(&m, c2, "value_floats", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    a->n_floats = 3;
    a->floats = (float[]){10, 20, 30};
    Onnx__NodeProto *c3 = mb_node(&m, "Constant", "c3", NULL, NAMES("k3"));
    Onnx__AttributeProto *a3 = mb_attr(&m, c3, "value_float", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a3->has_f = 1;
    a3->f = 0.5f;
    mb_node(&m, "Add", "sum", NAMES("k1", "k2"), NAMES("k12"));  /* constant: folded at import */
    mb_node(&m, "Mul", "scale", NAMES("k12", "k3"), NAMES("k")); /* folded too */
    mb_node(&m, "Add", "use", NAMES("x", "k"), NAMES("y"));
    mb_output(&m, "y");
    cr_assert_eq(mb_load(&m, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(g->nnodes, 1);
    const ts_value *k = &g->values[g->nodes[0].inputs[1]];
    cr_assert_str_eq(k->name, "k");
    cr_assert_not_null(k->constant);
    const float *d = k->constant->data;
    cr_assert(d[0] == 5.5f && d[1] == 11 && d[2] == 16.5f);
    ts_graph_free(g);
    mb_free(&m);
}

Test(onnx, initializer_forms_and_weights_listed_as_inputs)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 1, DIMS(2));
    mb_input(&m, "w", 1, DIMS(2)); /* old exporters: weight also listed as input */
    Onnx__TensorProto *w = mb_init_f32(&m, "w", 1, DIMS(2), NULL);
    w->n_float_data = 2;
    w->float_data = (float[]){1.5f, -2};
    mb_node(&m, "Mul", "m", NAMES("x", "w"), NAMES("y"));
    mb_output(&m, "y");
    cr_assert_eq(mb_load(&m, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(g->ninputs, 1);
    const float *d = g->values[g->nodes[0].inputs[1]].constant->data;
    cr_assert(d[0] == 1.5f && d[1] == -2);
    ts_graph_free(g);
    /* size mismatch names the tensor */
    w->n_float_data = 1;
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "initializer 'w' has 1 values, expected 2");
    w->n_float_data = 0;
    w->has_raw_data = 1;
    w->raw_data.len = 7;
    w->raw_data.data = (uint8_t *)"1234567";
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "initializer 'w' has 7 bytes of raw data, expected 8");
    w->has_raw_data = 0;
    w->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64;
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "initializer 'w': element type complex64 is not supported");
    mb_free(&m);
}

/* ----------------------------------------------------------- external data */

static void set_external(mb *m, Onnx__TensorProto *t, const char *loc, const char *off, const char *len)
{
    t->has_raw_data = 0;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    t->n_external_data = 0;
    t->external_data = mb_alloc(m, 3 * sizeof(void *));
    const char *kv[3][2] = {{"location", loc}, {"offset", off}, {"length", len}};
    for (int i = 0; i < 3; i++) {
        if (!kv[i][1]) continue;
        Onnx__StringStringEntryProto *e = mb_alloc(m, sizeof *e);
        onnx__string_string_entry_proto__init(e);
        e->key = (char *)kv[i][0];
        e->value = (char *)kv[i][1];
        t->external_data[t->n_external_data++] = e;
    }
}

static ts_status save_and_load(mb *m, const char *path, ts_graph **g, ts_error *err)
{
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, len, f);
    fclose(f);
    free(buf);
    return ts_onnx_load(path, NULL, 0, g, err);
}

Test(onnx, external_data, .init = make_tmpdir, .fini = remove_tmpdir)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    char path[128], model[128];
    snprintf(path, sizeof path, "%s/weights.bin", tmpdir);
    snprintf(model, sizeof model, "%s/m.onnx", tmpdir);
    float data[8] = {0, 0, 0, 0, 1.25f, -3, 7, 0};
    FILE *f = fopen(path, "wb");
    fwrite(data, 4, 8, f);
    fclose(f);
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 1, DIMS(3));
    Onnx__TensorProto *w = mb_init_f32(&m, "w", 1, DIMS(3), NULL);
    set_external(&m, w, "weights.bin", "16", "12");
    mb_node(&m, "Add", "a", NAMES("x", "w"), NAMES("y"));
    mb_output(&m, "y");
    cr_assert_eq(save_and_load(&m, model, &g, &err), TS_OK, "%s", err.msg);
    const float *d = g->values[g->nodes[0].inputs[1]].constant->data;
    cr_assert(d[0] == 1.25f && d[1] == -3 && d[2] == 7);
    ts_graph_free(g);
    set_external(&m, w, "weights.bin", "16", NULL); /* length defaults to the rest of the file */
    expect_error(save_and_load(&m, model, &g, &err), &err, "initializer 'w': external data in");
    cr_assert(strstr(err.msg, "has 16 bytes, expected 12"), "%s", err.msg);
    set_external(&m, w, "weights.bin", "28", "12");
    expect_error(save_and_load(&m, model, &g, &err), &err,
                 "initializer 'w': external data (offset 28, length 12) lies past the end of");
    set_external(&m, w, "../weights.bin", "0", "12");
    expect_error(save_and_load(&m, model, &g, &err), &err,
                 "initializer 'w': external data location '../weights.bin' must be a relative path");
    set_external(&m, w, "/etc/passwd", "0", "12");
    expect_error(save_and_load(&m, model, &g, &err), &err, "external data location '/etc/passwd' must be a relative");
    set_external(&m, w, "a/../../x", "0", "12");
    expect_error(save_and_load(&m, model, &g, &err), &err, "must be a relative path");
    set_external(&m, w, "nothere.bin", "0", "12");
    expect_error(save_and_load(&m, model, &g, &err), &err, "initializer 'w': cannot open external data file");
    cr_assert(strstr(err.msg, "nothere.bin': No such file or directory"), "%s", err.msg);
    set_external(&m, w, "weights.bin", "x", "12");
    expect_error(save_and_load(&m, model, &g, &err), &err, "external data offset 'x' is not a number");
    set_external(&m, w, "weights.bin", "16", "12");
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "cannot be found for a model loaded from memory");
    mb_free(&m);
}

/* -------------------------------------------------------- inputs and binds */

Test(onnx, binds)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 2, DIMS(-1, 3));
    mb_node(&m, "Relu", "r", NAMES("x"), NAMES("y"));
    mb_output(&m, "y");
    cr_assert_eq(mb_load(&m, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    cr_assert(ts_shape_eq(&g->values[g->inputs[0]].shape, &(ts_shape){2, {1, 3}}), "unbound dims default to 1");
    ts_graph_free(g);
    ts_input_bind b = {"x", {2, {4, 3}}};
    cr_assert_eq(mb_load(&m, &b, 1, &g, &err), TS_OK, "%s", err.msg);
    cr_assert(ts_shape_eq(&g->values[g->outputs[0]].shape, &(ts_shape){2, {4, 3}}));
    ts_graph_free(g);
    ts_input_bind bad = {"nope", {2, {4, 3}}};
    expect_error(mb_load(&m, &bad, 1, &g, &err), &err, "input bind 'nope' does not name a graph input");
    ts_input_bind rank = {"x", {3, {4, 3, 1}}};
    expect_error(mb_load(&m, &rank, 1, &g, &err), &err,
                 "input bind 'x': shape 4x3x1 has rank 3, the model declares rank 2");
    ts_input_bind fixed = {"x", {2, {4, 5}}};
    expect_error(mb_load(&m, &fixed, 1, &g, &err), &err, "input bind 'x': dimension 1 is 5, the model fixes it at 3");
    mb_free(&m);
}

Test(onnx, bad_declared_dims)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 2, DIMS(-2, 3));
    mb_node(&m, "Relu", "r", NAMES("x"), NAMES("y"));
    mb_output(&m, "y");
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "input 'x' has negative dimension -2 at axis 0");
    m.graph.input[0] = mb_vi(&m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, DIMS(1 << 30, 1 << 30, 1 << 30));
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "input 'x' is too large");
    m.graph.input[0] = mb_vi(&m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64, 1, DIMS(2));
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "input 'x': element type complex64 is not supported");
    m.graph.input[0] = mb_vi(&m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL);
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "input 'x' has no declared shape");
    ts_input_bind b = {"x", {1, {7}}};
    cr_assert_eq(mb_load(&m, &b, 1, &g, &err), TS_OK, "%s", err.msg);
    ts_graph_free(g);
    /* an initializer with an absurd shape is rejected before any allocation */
    Onnx__TensorProto *w = mb_init_f32(&m, "big", 3, DIMS(1 << 30, 1 << 30, 4), NULL);
    w->has_raw_data = 1;
    w->raw_data.len = 4;
    w->raw_data.data = (uint8_t *)"abcd";
    expect_error(mb_load(&m, &b, 1, &g, &err), &err, "initializer 'big' is too large");
    mb_free(&m);
}

Test(onnx, graph_output_must_exist)
{
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 1, DIMS(2));
    mb_node(&m, "Relu", "r", NAMES("x"), NAMES("y"));
    mb_output(&m, "yy");
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "graph output 'yy' is not produced by any node or graph input");
    mb_free(&m);
}

Test(onnx, required_input_without_name)
{
    /* found by fuzzing: "" where Conv needs its data input */
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 4, DIMS(1, 1, 3, 3));
    mb_init_f32(&m, "w", 4, DIMS(1, 1, 1, 1), (const float[]){2});
    mb_node(&m, "Conv", "conv", NAMES("", "w"), NAMES("y"));
    mb_output(&m, "y");
    expect_error(mb_load(&m, NULL, 0, &g, &err), &err, "node 'conv' (Conv): required input 0 has no name");
    mb_free(&m);
}

static void mb_init_i64(mb *m, const char *name, int rank, const int64_t *dims, const int64_t *data)
{
    Onnx__TensorProto *t = mb_tensor(m, name, rank, dims, NULL);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t->n_int64_data = (size_t)n;
    t->int64_data = mb_alloc(m, sizeof(int64_t) * (size_t)n);
    memcpy(t->int64_data, data, sizeof(int64_t) * (size_t)n);
    m->graph.initializer[m->graph.n_initializer++] = t;
}

Test(onnx, shape_arithmetic_folds_after_bind)
{
    /* torch's flatten: Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])) */
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 3, DIMS(-1, 2, 3));
    mb_init_i64(&m, "zero", 0, NULL, (const int64_t[]){0});
    mb_init_i64(&m, "ax", 1, DIMS(1), (const int64_t[]){0});
    mb_init_i64(&m, "minus1", 1, DIMS(1), (const int64_t[]){-1});
    mb_node(&m, "Shape", "shape", NAMES("x"), NAMES("shp"));
    mb_node(&m, "Gather", "gather", NAMES("shp", "zero"), NAMES("n"));
    mb_node(&m, "Unsqueeze", "unsq", NAMES("n", "ax"), NAMES("n1"));
    Onnx__NodeProto *c = mb_node(&m, "Concat", "concat", NAMES("n1", "minus1"), NAMES("newshape"));
    Onnx__AttributeProto *a = mb_attr(&m, c, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    mb_node(&m, "Reshape", "reshape", NAMES("x", "newshape"), NAMES("y"));
    mb_output(&m, "y");
    ts_input_bind b = {"x", {3, {5, 2, 3}}};
    cr_assert_eq(mb_load(&m, &b, 1, &g, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(g->nnodes, 1);
    cr_assert_str_eq(g->nodes[0].op->name, "Reshape");
    cr_assert(ts_shape_eq(&g->values[g->outputs[0]].shape, &(ts_shape){2, {5, 6}}));
    ts_graph_free(g);
    mb_free(&m);
}

/* ------------------------------------- what the file had beyond the graph */

/* The file at path, unpacked (free with onnx__model_proto__free_unpacked). */
static Onnx__ModelProto *unpack_file(const char *path)
{
    size_t len;
    uint8_t *buf = read_all(path, &len);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, buf);
    free(buf);
    cr_assert_not_null(mp, "%s does not unpack", path);
    return mp;
}

/* Dimension d of graph input (in) or output k: its dim_param, or its value
 * printed, or "?" when it has neither. */
static const char *dim_of(const Onnx__ModelProto *mp, bool in, int k, int d, char *buf)
{
    const Onnx__ValueInfoProto *vi = in ? mp->graph->input[k] : mp->graph->output[k];
    const Onnx__TensorShapeProto *sp = vi->type->tensor_type->shape;
    cr_assert_not_null(sp, "%s has no shape", vi->name);
    cr_assert_lt((size_t)d, sp->n_dim);
    const Onnx__TensorShapeProto__Dimension *dm = sp->dim[d];
    if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) return dm->dim_param;
    if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
        sprintf(buf, "%lld", (long long)dm->dim_value);
        return buf;
    }
    return "?";
}

static const Onnx__TensorProto *find_init(const Onnx__ModelProto *mp, const char *name)
{
    for (size_t i = 0; i < mp->graph->n_initializer; i++)
        if (!strcmp(mp->graph->initializer[i]->name, name)) return mp->graph->initializer[i];
    cr_assert_fail("no initializer '%s'", name);
    return NULL;
}

/* The int64 entries of an initializer the exporter wrote (raw data). */
static void init_ints(const Onnx__TensorProto *t, int64_t *out, int n)
{
    cr_assert_eq(t->data_type, ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    cr_assert_eq(t->raw_data.len, sizeof(int64_t) * (size_t)n, "initializer '%s' has %zu bytes", t->name,
                 t->raw_data.len);
    memcpy(out, t->raw_data.data, t->raw_data.len);
}

Test(onnx, metadata_round_trip, .init = make_tmpdir, .fini = remove_tmpdir)
{
    ts_error err = {0};
    ts_graph *g = NULL, *h = NULL;
    mb m;
    mb_init(&m, 13);
    m.model.ir_version = 7;
    m.model.producer_name = "pytorch";
    m.model.producer_version = "1.13.0";
    m.model.domain = "org.example";
    m.model.has_model_version = 1;
    m.model.model_version = 42;
    m.model.doc_string = "a model";
    m.graph.doc_string = "its graph";
    Onnx__StringStringEntryProto kv[2], *kvp[2] = {&kv[0], &kv[1]};
    const char *keys[2] = {"author", "license"}, *vals[2] = {"someone", "MIT"};
    for (int i = 0; i < 2; i++) {
        onnx__string_string_entry_proto__init(&kv[i]);
        kv[i].key = (char *)keys[i];
        kv[i].value = (char *)vals[i];
    }
    m.model.n_metadata_props = 2;
    m.model.metadata_props = kvp;
    /* opsets of other domains are kept though no node uses them */
    Onnx__OperatorSetIdProto os[3], *osp[3] = {&os[0], &os[1], &os[2]};
    const char *doms[3] = {"ai.onnx.ml", "", "com.example"};
    int64_t vers[3] = {3, 13, 1};
    for (int i = 0; i < 3; i++) {
        onnx__operator_set_id_proto__init(&os[i]);
        os[i].domain = (char *)doms[i];
        os[i].has_version = 1;
        os[i].version = vers[i];
    }
    m.model.n_opset_import = 3;
    m.model.opset_import = osp;
    mb_input(&m, "x", 2, DIMS(-1, 3));
    mb_node(&m, "Relu", "relu", NAMES("x"), NAMES("t"))->doc_string = "relu's doc";
    mb_node(&m, "Neg", "neg", NAMES("t"), NAMES("y"));
    m.graph.output[m.graph.n_output++] = mb_vi(&m, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, DIMS(-1, 3));
    cr_assert_eq(mb_load(&m, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    cr_assert_not_null(g->meta);
    char p1[128], p2[128], buf[32];
    snprintf(p1, sizeof p1, "%s/a.onnx", tmpdir);
    snprintf(p2, sizeof p2, "%s/b.onnx", tmpdir);
    cr_assert_eq(ts_onnx_save(g, p1, &err), TS_OK, "%s", err.msg);
    Onnx__ModelProto *mp = unpack_file(p1);
    cr_assert_eq(mp->ir_version, 7);
    cr_assert_str_eq(mp->producer_name, "pytorch");
    cr_assert_str_eq(mp->producer_version, "1.13.0");
    cr_assert_str_eq(mp->domain, "org.example");
    cr_assert(mp->has_model_version && mp->model_version == 42);
    cr_assert_str_eq(mp->doc_string, "a model");
    cr_assert_str_eq(mp->graph->name, "test");
    cr_assert_str_eq(mp->graph->doc_string, "its graph");
    cr_assert_eq(mp->n_metadata_props, 2);
    for (int i = 0; i < 2; i++) {
        cr_assert_str_eq(mp->metadata_props[i]->key, keys[i]);
        cr_assert_str_eq(mp->metadata_props[i]->value, vals[i]);
    }
    cr_assert_eq(mp->n_opset_import, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_str_eq(mp->opset_import[i]->domain, doms[i]);
        cr_assert_eq(mp->opset_import[i]->version, vers[i]);
    }
    cr_assert_str_eq(mp->graph->node[0]->doc_string, "relu's doc");
    cr_assert(!mp->graph->node[1]->doc_string || !*mp->graph->node[1]->doc_string);
    cr_assert_str_eq(dim_of(mp, true, 0, 0, buf), "n");
    cr_assert_str_eq(dim_of(mp, true, 0, 1, buf), "3");
    cr_assert_str_eq(dim_of(mp, false, 0, 0, buf), "n");
    cr_assert_str_eq(dim_of(mp, false, 0, 1, buf), "3");
    onnx__model_proto__free_unpacked(mp, NULL);
    /* what was written is kept again, byte for byte */
    cr_assert_eq(ts_onnx_load(p1, NULL, 0, &h, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(ts_onnx_save(h, p2, &err), TS_OK, "%s", err.msg);
    size_t l1, l2;
    uint8_t *b1 = read_all(p1, &l1), *b2 = read_all(p2, &l2);
    cr_assert(l1 == l2 && !memcmp(b1, b2, l1), "a second round trip changed the file");
    free(b1);
    free(b2);
    ts_graph_free(h);
    /* copies share the record; each frees its reference */
    ts_graph *c = ts_graph_copy(g);
    cr_assert_eq(c->meta, g->meta);
    cr_assert_eq(g->meta->refcount, 2);
    ts_graph_free(c);
    cr_assert_eq(g->meta->refcount, 1);
    ts_graph_free(g);
    mb_free(&m);
}

Test(onnx, built_graph_writes_tsopt_as_producer, .init = make_tmpdir, .fini = remove_tmpdir)
{
    ts_error err = {0};
    ts_graph *g = sample_graph();
    char p[128], why[256];
    snprintf(p, sizeof p, "%s/a.onnx", tmpdir);
    cr_assert_null(g->meta);
    cr_assert(!ts_onnx_keeps_symbolic(g, why, sizeof why));
    cr_assert_str_eq(why, "the graph was not loaded from an ONNX file");
    cr_assert_eq(ts_onnx_save(g, p, &err), TS_OK, "%s", err.msg);
    Onnx__ModelProto *mp = unpack_file(p);
    cr_assert_str_eq(mp->producer_name, "tsopt");
    cr_assert_eq(mp->ir_version, 8);
    cr_assert_eq(mp->n_opset_import, 1);
    cr_assert_eq(mp->opset_import[0]->version, 13);
    onnx__model_proto__free_unpacked(mp, NULL);
    ts_graph_free(g);
}

/* Graph input x [n,2,3] -> Reshape(x, S) -> MatMul(w [6,4]) -> y, where S
 * is torch's x.view(x.size(0), -1) (Shape, Gather, Unsqueeze, Concat). */
static void view_model(mb *m)
{
    mb_init(m, 13);
    mb_input(m, "x", 3, DIMS(-1, 2, 3));
    mb_init_i64(m, "zero", 0, NULL, (const int64_t[]){0});
    mb_init_i64(m, "ax", 1, DIMS(1), (const int64_t[]){0});
    mb_init_i64(m, "minus1", 1, DIMS(1), (const int64_t[]){-1});
    float w[24];
    for (int i = 0; i < 24; i++) w[i] = (float)(i % 7) - 3;
    mb_init_f32(m, "w", 2, DIMS(6, 4), w);
    mb_node(m, "Shape", "shape", NAMES("x"), NAMES("shp"));
    mb_node(m, "Gather", "gather", NAMES("shp", "zero"), NAMES("n"));
    mb_node(m, "Unsqueeze", "unsq", NAMES("n", "ax"), NAMES("n1"));
    Onnx__NodeProto *c = mb_node(m, "Concat", "concat", NAMES("n1", "minus1"), NAMES("newshape"));
    mb_attr(m, c, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)->has_i = 1;
    mb_node(m, "Reshape", "view", NAMES("x", "newshape"), NAMES("flat"));
    mb_node(m, "MatMul", "fc", NAMES("flat", "w"), NAMES("y"));
    mb_output(m, "y"); /* no declared shape: export derives it */
}

/* Runs g (reference, float32) on x and returns its first output. */
static ts_tensor *run1(const ts_graph *g, ts_tensor *x)
{
    ts_error err = {0};
    ts_tensor *y = NULL;
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, &x, &y, &err), TS_OK, "%s", err.msg);
    return y;
}

Test(onnx, symbolic_dims_survive_folded_view, .init = make_tmpdir, .fini = remove_tmpdir)
{
    ts_error err = {0};
    ts_graph *g = NULL, *h = NULL, *ref = NULL;
    mb m;
    view_model(&m);
    cr_assert_eq(mb_load(&m, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    /* bound at 1: the view's shape folded to [1, -1] */
    cr_assert_eq(g->nnodes, 2);
    const ts_tensor *s = g->values[g->nodes[0].inputs[1]].constant;
    cr_assert(s && ((int64_t *)s->data)[0] == 1 && ((int64_t *)s->data)[1] == -1);
    char p[128], ps[128], buf[32], why[256];
    snprintf(p, sizeof p, "%s/dyn.onnx", tmpdir);
    snprintf(ps, sizeof ps, "%s/static.onnx", tmpdir);
    cr_assert(ts_onnx_keeps_symbolic(g, why, sizeof why), "%s", why);
    cr_assert_eq(ts_onnx_save(g, p, &err), TS_OK, "%s", err.msg);
    Onnx__ModelProto *mp = unpack_file(p);
    cr_assert_str_eq(dim_of(mp, true, 0, 0, buf), "n");
    cr_assert_str_eq(dim_of(mp, false, 0, 0, buf), "n", "the output follows n, so it is named after it");
    cr_assert_str_eq(dim_of(mp, false, 0, 1, buf), "4");
    int64_t e[2];
    init_ints(find_init(mp, "newshape"), e, 2);
    cr_assert(e[0] == 0 && e[1] == -1, "the view's shape is written [%lld, %lld], not [0, -1]", (long long)e[0],
              (long long)e[1]);
    onnx__model_proto__free_unpacked(mp, NULL);
    /* the written model at batch 4 computes what the original does */
    ts_input_bind b = {"x", {3, {4, 2, 3}}};
    cr_assert_eq(ts_onnx_load(p, &b, 1, &h, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(mb_load(&m, &b, 1, &ref, &err), TS_OK, "%s", err.msg);
    ts_tensor *x = f32_tensor(3, DIMS(4, 2, 3), 7), *y1 = run1(ref, x), *y2 = run1(h, x);
    cr_assert(ts_shape_eq(&y2->shape, &(ts_shape){2, {4, 4}}));
    cr_assert_eq(memcmp(y1->data, y2->data, y1->nbytes), 0);
    ts_tensor_unref(x);
    ts_tensor_unref(y1);
    ts_tensor_unref(y2);
    /* static_dims: as before symbolic dims were kept */
    ts_onnx_save_opts o = {.static_dims = true};
    cr_assert_eq(ts_onnx_save_with(g, ps, &o, &err), TS_OK, "%s", err.msg);
    mp = unpack_file(ps);
    cr_assert_str_eq(dim_of(mp, true, 0, 0, buf), "1");
    cr_assert_str_eq(dim_of(mp, false, 0, 0, buf), "1");
    init_ints(find_init(mp, "newshape"), e, 2);
    cr_assert(e[0] == 1 && e[1] == -1);
    onnx__model_proto__free_unpacked(mp, NULL);
    ts_graph_free(g);
    ts_graph_free(h);
    ts_graph_free(ref);
    mb_free(&m);
}

Test(onnx, symbolic_dims_batch_times_heads_and_expand, .init = make_tmpdir, .fini = remove_tmpdir)
{
    /* x [n,2,3] -> Reshape to [n*2, 3] (an entry that is no input
     * dimension: written -1); e [n,1] -> Expand to [n, 3] (written [1, 3])
     * -> Concat on axis 1 -> [n, 6] */
    ts_error err = {0};
    ts_graph *g = NULL, *h = NULL, *ref = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 3, DIMS(-1, 2, 3));
    mb_input(&m, "e", 2, DIMS(-1, 1));
    mb_init_i64(&m, "zero", 0, NULL, (const int64_t[]){0});
    mb_init_i64(&m, "two", 0, NULL, (const int64_t[]){2});
    mb_init_i64(&m, "ax", 1, DIMS(1), (const int64_t[]){0});
    mb_init_i64(&m, "three", 1, DIMS(1), (const int64_t[]){3});
    Onnx__AttributeProto *a;
    mb_node(&m, "Shape", "shape", NAMES("x"), NAMES("shp"));
    mb_node(&m, "Gather", "gather", NAMES("shp", "zero"), NAMES("n"));
    mb_node(&m, "Mul", "times2", NAMES("n", "two"), NAMES("n2"));
    mb_node(&m, "Unsqueeze", "unsq", NAMES("n2", "ax"), NAMES("n2v"));
    mb_node(&m, "Unsqueeze", "unsq1", NAMES("n", "ax"), NAMES("nv"));
    Onnx__NodeProto *c = mb_node(&m, "Concat", "concat", NAMES("n2v", "three"), NAMES("rows"));
    mb_attr(&m, c, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)->has_i = 1;
    c = mb_node(&m, "Concat", "concat1", NAMES("nv", "three"), NAMES("eshape"));
    mb_attr(&m, c, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)->has_i = 1;
    mb_node(&m, "Reshape", "rows2", NAMES("x", "rows"), NAMES("r"));
    mb_node(&m, "Expand", "expand", NAMES("e", "eshape"), NAMES("ex"));
    c = mb_node(&m, "Concat", "cat", NAMES("ex", "ex"), NAMES("ee"));
    a = mb_attr(&m, c, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = 1;
    mb_output(&m, "r");
    mb_output(&m, "ee");
    ts_input_bind b1[] = {{"x", {3, {2, 2, 3}}}, {"e", {2, {2, 1}}}};
    cr_assert_eq(mb_load(&m, b1, 2, &g, &err), TS_OK, "%s", err.msg);
    char p[128], buf[32], why[256];
    snprintf(p, sizeof p, "%s/dyn.onnx", tmpdir);
    cr_assert(ts_onnx_keeps_symbolic(g, why, sizeof why), "%s", why);
    cr_assert_eq(ts_onnx_save(g, p, &err), TS_OK, "%s", err.msg);
    Onnx__ModelProto *mp = unpack_file(p);
    int64_t e[2];
    init_ints(find_init(mp, "rows"), e, 2);
    cr_assert(e[0] == -1 && e[1] == 3, "rows written [%lld, %lld]", (long long)e[0], (long long)e[1]);
    init_ints(find_init(mp, "eshape"), e, 2);
    cr_assert(e[0] == 1 && e[1] == 3, "eshape written [%lld, %lld]", (long long)e[0], (long long)e[1]);
    cr_assert_str_eq(dim_of(mp, false, 0, 0, buf), "?", "2n follows no input dimension alone: unnamed");
    cr_assert_str_eq(dim_of(mp, false, 0, 1, buf), "3");
    cr_assert_str_eq(dim_of(mp, false, 1, 0, buf), "n");
    onnx__model_proto__free_unpacked(mp, NULL);
    ts_input_bind b5[] = {{"x", {3, {5, 2, 3}}}, {"e", {2, {5, 1}}}};
    cr_assert_eq(ts_onnx_load(p, b5, 2, &h, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(mb_load(&m, b5, 2, &ref, &err), TS_OK, "%s", err.msg);
    for (int k = 0; k < 2; k++)
        cr_assert(ts_shape_eq(&h->values[h->outputs[k]].shape, &ref->values[ref->outputs[k]].shape));
    ts_graph_free(g);
    ts_graph_free(h);
    ts_graph_free(ref);
    mb_free(&m);
}

Test(onnx, symbolic_dims_bound_where_sizes_are_data, .init = make_tmpdir, .fini = remove_tmpdir)
{
    /* y = x / x.size(0): the folded size is data, not a shape; the model
     * cannot stay symbolic and is written at its bound sizes */
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 2, DIMS(-1, 3));
    mb_init_i64(&m, "zero", 0, NULL, (const int64_t[]){0});
    mb_node(&m, "Shape", "shape", NAMES("x"), NAMES("shp"));
    mb_node(&m, "Gather", "gather", NAMES("shp", "zero"), NAMES("n"));
    Onnx__NodeProto *cast = mb_node(&m, "Cast", "cast", NAMES("n"), NAMES("nf"));
    Onnx__AttributeProto *a = mb_attr(&m, cast, "to", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    mb_node(&m, "Div", "mean", NAMES("x", "nf"), NAMES("y"));
    mb_output(&m, "y");
    cr_assert_eq(mb_load(&m, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    char p[128], buf[32], why[512], msg[1024];
    snprintf(p, sizeof p, "%s/m.onnx", tmpdir);
    cr_assert(!ts_onnx_keeps_symbolic(g, why, sizeof why));
    cr_assert_str_eq(why, "node 'mean' (Div) reads 'nf', computed from the sizes of 'n' (only Reshape and Expand "
                          "shapes are rewritten to follow them)");
    ts_onnx_save_opts o = {.require_symbolic = true};
    snprintf(msg, sizeof msg, "cannot write '%s' with symbolic dimensions: %s", p, why);
    expect_error(ts_onnx_save_with(g, p, &o, &err), &err, msg);
    cr_assert(!file_exists(p));
    cr_assert_eq(ts_onnx_save(g, p, &err), TS_OK, "%s", err.msg);
    Onnx__ModelProto *mp = unpack_file(p);
    cr_assert_str_eq(dim_of(mp, true, 0, 0, buf), "1");
    onnx__model_proto__free_unpacked(mp, NULL);
    ts_graph_free(g);
    mb_free(&m);
}

Test(onnx, symbolic_dims_bound_when_other_sizes_do_not_load, .init = make_tmpdir, .fini = remove_tmpdir)
{
    /* Reshape to a literal [3]: only n = 1 is valid */
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 2, DIMS(-1, 3));
    mb_init_i64(&m, "s", 1, DIMS(1), (const int64_t[]){3});
    mb_node(&m, "Reshape", "r", NAMES("x", "s"), NAMES("y"));
    mb_output(&m, "y");
    cr_assert_eq(mb_load(&m, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    char why[512];
    cr_assert(!ts_onnx_keeps_symbolic(g, why, sizeof why));
    cr_assert(strstr(why, "at other sizes of 'n' the model does not load: node 'r' (Reshape): cannot reshape 3x3"),
              "%s", why);
    ts_graph_free(g);
    /* the user's bind is one more way to pick the sizes; two inputs that
     * share a dim_param must agree on it */
    mb_input(&m, "z", 1, DIMS(-1));
    ts_input_bind b[] = {{"x", {2, {1, 3}}}, {"z", {1, {2}}}};
    cr_assert_eq(mb_load(&m, b, 2, &g, &err), TS_OK, "%s", err.msg);
    cr_assert(!ts_onnx_keeps_symbolic(g, why, sizeof why));
    cr_assert_str_eq(why, "dimension 'n' is bound to 1 for one input and to 2 for another");
    ts_graph_free(g);
    mb_free(&m);
}

Test(onnx, symbolic_dims_checked_after_rewrites, .init = make_tmpdir, .fini = remove_tmpdir)
{
    /* The optimizer rewrites graphs after import: export checks the graph
     * as it is.  A rebuilt shape constant (not the one import folded) is
     * still made to follow the batch; a Split sized at the bound batch (as
     * the stacked-MatMul rewrite makes) keeps the model bound. */
    ts_error err = {0};
    ts_graph *g = NULL;
    mb m;
    view_model(&m);
    cr_assert_eq(mb_load(&m, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    char p[128], why[512];
    snprintf(p, sizeof p, "%s/m.onnx", tmpdir);
    ts_graph *c = ts_graph_copy(g);
    int view = 0, fc = 1;
    cr_assert_str_eq(c->nodes[view].name, "view");
    ts_tensor *s = ts_tensor_clone(c->values[c->nodes[view].inputs[1]].constant, &err);
    ts_tensor_unref(c->values[c->nodes[view].inputs[1]].constant);
    c->values[c->nodes[view].inputs[1]].constant = s;
    cr_assert(ts_onnx_keeps_symbolic(c, why, sizeof why), "%s", why);
    cr_assert_eq(ts_onnx_save(c, p, &err), TS_OK, "%s", err.msg);
    Onnx__ModelProto *mp = unpack_file(p);
    int64_t e[2];
    init_ints(find_init(mp, "newshape"), e, 2);
    cr_assert(e[0] == 0 && e[1] == -1);
    onnx__model_proto__free_unpacked(mp, NULL);
    /* flat -> Split(axis 0, sizes [1]) -> fc */
    ts_tensor *one = ts_tensor_new(TS_I64, &(ts_shape){1, {1}}, &err);
    *(int64_t *)one->data = 1;
    int vone = ts_graph_add_constant(c, "split_sizes", one, &err), part;
    ts_tensor_unref(one);
    cr_assert(vone >= 0, "%s", err.msg);
    ts_attr ax = ts_attr_int("axis", 0);
    cr_assert(ts_graph_add_node(c, "Split", "split", (int[]){c->nodes[view].outputs[0], vone}, 2, &ax, 1, 1, NULL,
                                &part, &err) >= 0,
              "%s", err.msg);
    c->nodes[fc].inputs[0] = part;
    cr_assert_eq(ts_graph_validate(c, &err), TS_OK, "%s", err.msg);
    cr_assert(!ts_onnx_keeps_symbolic(c, why, sizeof why));
    cr_assert(strstr(why, "at other sizes of 'n', node 'split' (Split): split sizes sum to 1, expected 3"), "%s",
              why);
    ts_graph_free(c);
    ts_graph_free(g);
    mb_free(&m);
}

Test(onnx, symbolic_dims_keep_literal_shapes, .init = make_tmpdir, .fini = remove_tmpdir)
{
    /* x [n,3,4] -> Reshape to the literal [1, -1] -> Softmax over everything
     * -> Reshape to Shape(x): the literal means one row at every n (it must
     * not become [0, -1], one row per batch item: same shapes, other
     * numbers); the shape computed from x becomes [-1, 3, 4] */
    ts_error err = {0};
    ts_graph *g = NULL, *h = NULL, *ref = NULL;
    mb m;
    mb_init(&m, 13);
    mb_input(&m, "x", 3, DIMS(-1, 3, 4));
    mb_init_i64(&m, "row", 1, DIMS(2), (const int64_t[]){1, -1});
    mb_node(&m, "Reshape", "flat", NAMES("x", "row"), NAMES("f"));
    mb_node(&m, "Softmax", "softmax", NAMES("f"), NAMES("s"));
    mb_node(&m, "Shape", "shape", NAMES("x"), NAMES("shp"));
    mb_node(&m, "Reshape", "back", NAMES("s", "shp"), NAMES("y"));
    mb_output(&m, "y");
    cr_assert_eq(mb_load(&m, NULL, 0, &g, &err), TS_OK, "%s", err.msg);
    char p[128], buf[32], why[256];
    snprintf(p, sizeof p, "%s/m.onnx", tmpdir);
    cr_assert(ts_onnx_keeps_symbolic(g, why, sizeof why), "%s", why);
    cr_assert_eq(ts_onnx_save(g, p, &err), TS_OK, "%s", err.msg);
    Onnx__ModelProto *mp = unpack_file(p);
    int64_t e[3];
    init_ints(find_init(mp, "row"), e, 2);
    cr_assert(e[0] == 1 && e[1] == -1, "the literal became [%lld, %lld]", (long long)e[0], (long long)e[1]);
    init_ints(find_init(mp, "shp"), e, 3);
    cr_assert(e[0] == -1 && e[1] == 3 && e[2] == 4);
    cr_assert_str_eq(dim_of(mp, false, 0, 0, buf), "n");
    onnx__model_proto__free_unpacked(mp, NULL);
    ts_input_bind b = {"x", {3, {3, 3, 4}}};
    cr_assert_eq(ts_onnx_load(p, &b, 1, &h, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(mb_load(&m, &b, 1, &ref, &err), TS_OK, "%s", err.msg);
    ts_tensor *x = f32_tensor(3, DIMS(3, 3, 4), 11), *y1 = run1(ref, x), *y2 = run1(h, x);
    cr_assert(ts_shape_eq(&y1->shape, &y2->shape));
    cr_assert_eq(memcmp(y1->data, y2->data, y1->nbytes), 0);
    ts_tensor_unref(x);
    ts_tensor_unref(y1);
    ts_tensor_unref(y2);
    ts_graph_free(g);
    ts_graph_free(h);
    ts_graph_free(ref);
    mb_free(&m);
}
