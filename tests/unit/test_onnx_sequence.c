/* ONNX sequences resolved at import (src/onnx/sequence.c): models built by
 * hand (protobuf-c), loaded, run by the reference interpreter and checked
 * against hand-computed values; positions, splits and bad models; and a
 * position the run gives, through a session (loaded at the run's values). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "onnx.pb-c.h"
#include "tsopt.h"

/* ------------------------------------------------------- model builder */

typedef struct mb {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    void *mem[512];
    int nmem;
    Onnx__ValueInfoProto *in[8], *out[8];
    Onnx__NodeProto *nodes[32];
} mb;

static void *mb_alloc(mb *m, size_t n)
{
    cr_assert_lt(m->nmem, 512);
    void *p = calloc(1, n);
    cr_assert_not_null(p);
    return m->mem[m->nmem++] = p;
}

static char *mb_str(mb *m, const char *s) { return strcpy(mb_alloc(m, strlen(s) + 1), s); }

static void mb_init(mb *m)
{
    memset(m, 0, sizeof *m);
    onnx__model_proto__init(&m->model);
    onnx__graph_proto__init(&m->graph);
    onnx__operator_set_id_proto__init(&m->opset);
    m->opset.domain = "", m->opset.has_version = 1, m->opset.version = 13;
    m->opsets[0] = &m->opset;
    m->model.has_ir_version = 1, m->model.ir_version = 8;
    m->model.n_opset_import = 1, m->model.opset_import = m->opsets, m->model.graph = &m->graph;
    m->graph.name = "seq", m->graph.input = m->in, m->graph.output = m->out, m->graph.node = m->nodes;
}

static void mb_free(mb *m)
{
    for (int i = 0; i < m->nmem; i++) free(m->mem[i]);
}

/* A tensor value info; elem an ONNX data type, dims NULL: no shape. */
static Onnx__ValueInfoProto *mb_vi(mb *m, const char *name, int elem, int rank, const int64_t *dims)
{
    Onnx__ValueInfoProto *vi = mb_alloc(m, sizeof *vi);
    Onnx__TypeProto *tp = mb_alloc(m, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = mb_alloc(m, sizeof *tt);
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    vi->name = mb_str(m, name), vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, tp->tensor_type = tt;
    tt->has_elem_type = 1, tt->elem_type = elem;
    if (dims) {
        Onnx__TensorShapeProto *sp = mb_alloc(m, sizeof *sp);
        onnx__tensor_shape_proto__init(sp);
        sp->n_dim = (size_t)rank;
        sp->dim = mb_alloc(m, sizeof(void *) * (size_t)(rank + 1));
        for (int i = 0; i < rank; i++) {
            Onnx__TensorShapeProto__Dimension *d = mb_alloc(m, sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE, d->dim_value = dims[i];
            sp->dim[i] = d;
        }
        tt->shape = sp;
    }
    return vi;
}

#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define DIMS(...) (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})

static void mb_input(mb *m, const char *name, int elem, int rank, const int64_t *dims)
{
    m->in[m->graph.n_input++] = mb_vi(m, name, elem, rank, dims);
}

static void mb_output(mb *m, const char *name) { m->out[m->graph.n_output++] = mb_vi(m, name, F32, 0, NULL); }

/* ins/outs NULL-terminated ("" for an absent optional input). */
static Onnx__NodeProto *mb_node(mb *m, const char *op, const char *const *ins, const char *const *outs)
{
    Onnx__NodeProto *n = mb_alloc(m, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = mb_str(m, op);
    n->input = mb_alloc(m, 8 * sizeof(char *));
    n->output = mb_alloc(m, 8 * sizeof(char *));
    n->attribute = mb_alloc(m, 4 * sizeof(void *));
    for (; ins && ins[n->n_input]; n->n_input++) n->input[n->n_input] = mb_str(m, ins[n->n_input]);
    for (; outs[n->n_output]; n->n_output++) n->output[n->n_output] = mb_str(m, outs[n->n_output]);
    m->nodes[m->graph.n_node++] = n;
    return n;
}

static void mb_int(mb *m, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = mb_alloc(m, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = mb_str(m, name), a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1, a->i = v;
    n->attribute[n->n_attribute++] = a;
}

/* Constant node `name`: an int64 scalar (value_int), or a 1-D int64 list (value_ints, n >= 0). */
static void mb_const_ints(mb *m, const char *name, int n, const int64_t *v)
{
    Onnx__NodeProto *c = mb_node(m, "Constant", NULL, NAMES(name));
    Onnx__AttributeProto *a = mb_alloc(m, sizeof *a);
    onnx__attribute_proto__init(a);
    a->has_type = 1;
    if (n < 0) {
        a->name = "value_int", a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, a->has_i = 1, a->i = v[0];
    } else {
        a->name = "value_ints", a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        a->n_ints = (size_t)n, a->ints = mb_alloc(m, sizeof(int64_t) * (size_t)(n + 1));
        memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
    }
    c->attribute[c->n_attribute++] = a;
}
#define SCALAR(m, name, v) mb_const_ints(m, name, -1, (const int64_t[]){v})

static ts_status mb_load(mb *m, ts_graph **g, ts_error *err)
{
    size_t len = onnx__model_proto__get_packed_size(&m->model);
    uint8_t *buf = malloc(len);
    cr_assert_not_null(buf);
    onnx__model_proto__pack(&m->model, buf);
    ts_status st = ts_onnx_load_buffer(buf, len, NULL, NULL, 0, g, err);
    free(buf);
    return st;
}

/* Loads m, runs it by reference on float inputs (values ins[i]) and
 * returns its outputs in out[]. */
static ts_graph *run(mb *m, const double *const *ins, ts_tensor **out)
{
    ts_graph *g = NULL;
    ts_error e = {0};
    cr_assert_eq(mb_load(m, &g, &e), TS_OK, "%s", e.msg);
    ts_tensor *in[8] = {0};
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        in[i] = ts_tensor_new(v->dtype, &v->shape, &e);
        cr_assert_not_null(in[i], "%s", e.msg);
        for (int64_t j = 0; j < ts_tensor_numel(in[i]); j++) ts_tensor_set_f64(in[i], j, ins[i][j]);
    }
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, in, out, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < g->ninputs; i++) ts_tensor_unref(in[i]);
    return g;
}

static void expect(ts_tensor *t, const char *dims, const double *v, int n)
{
    char a[160], b[160];
    ts_shape s = {0};
    ts_error e = {0};
    if (*dims) cr_assert_eq(ts_shape_parse(dims, &s, &e), TS_OK);
    cr_assert(ts_shape_eq(&t->shape, &s), "shape %s, expected %s", ts_shape_str(&t->shape, a, sizeof a),
              ts_shape_str(&s, b, sizeof b));
    cr_assert_eq(ts_tensor_numel(t), n);
    for (int i = 0; i < n; i++)
        cr_assert_float_eq(ts_tensor_get_f64(t, i), v[i], 1e-6, "element %d: %g, expected %g", i,
                           ts_tensor_get_f64(t, i), v[i]);
    ts_tensor_unref(t);
}
#define P(...) ((const double[]){__VA_ARGS__})
#define V(...) P(__VA_ARGS__), (int)(sizeof(P(__VA_ARGS__)) / sizeof(double))

static void expect_error(mb *m, const char *text)
{
    ts_graph *g = NULL;
    ts_error e = {0};
    cr_assert_neq(mb_load(m, &g, &e), TS_OK, "expected an error containing \"%s\"", text);
    cr_assert_null(g);
    cr_assert(strstr(e.msg, text), "error \"%s\" does not contain \"%s\"", e.msg, text);
}

/* ------------------------------------------------------------------ tests */

/* a = [1 2], b = [3 4], c = [5 6] (1x2 each):
 *   s1 = Construct(a, b)        [a b]
 *   s2 = Insert(s1, c)          [a b c]      (no position: at the end)
 *   s3 = Insert(s2, b, -3)      [b a b c]
 *   s4 = Erase(s3, 1)           [b b c]
 *   s5 = Erase(s4)              [b b]        (no position: the last)
 * outputs: At(s3, -1) = c; Length(s4) = 3; Concat(s3, axis 0) 4x2;
 * Concat(s5, axis -1, new_axis) = 1x2x2 [[3 3] [4 4]] */
Test(sequence, construct_insert_erase_at_length_concat)
{
    mb m;
    mb_init(&m);
    mb_input(&m, "a", F32, DIMS(1, 2));
    mb_input(&m, "b", F32, DIMS(1, 2));
    mb_input(&m, "c", F32, DIMS(1, 2));
    SCALAR(&m, "m3", -3);
    SCALAR(&m, "p1", 1);
    SCALAR(&m, "m1", -1);
    mb_node(&m, "SequenceConstruct", NAMES("a", "b"), NAMES("s1"));
    mb_node(&m, "SequenceInsert", NAMES("s1", "c"), NAMES("s2"));
    mb_node(&m, "SequenceInsert", NAMES("s2", "b", "m3"), NAMES("s3"));
    mb_node(&m, "SequenceErase", NAMES("s3", "p1"), NAMES("s4"));
    mb_node(&m, "SequenceErase", NAMES("s4"), NAMES("s5"));
    mb_node(&m, "SequenceAt", NAMES("s3", "m1"), NAMES("at"));
    mb_node(&m, "SequenceLength", NAMES("s4"), NAMES("len"));
    mb_int(&m, mb_node(&m, "ConcatFromSequence", NAMES("s3"), NAMES("cat")), "axis", 0);
    Onnx__NodeProto *st = mb_node(&m, "ConcatFromSequence", NAMES("s5"), NAMES("stack"));
    mb_int(&m, st, "axis", -1);
    mb_int(&m, st, "new_axis", 1);
    const char *outs[] = {"at", "len", "cat", "stack"};
    for (int i = 0; i < 4; i++) mb_output(&m, outs[i]);
    ts_tensor *out[4];
    ts_graph *g = run(&m, (const double *const[]){P(1, 2), P(3, 4), P(5, 6)}, out);
    for (int i = 0; i < 4; i++) cr_assert_str_eq(g->values[g->outputs[i]].name, outs[i]);
    expect(out[0], "1x2", V(5, 6));
    cr_assert_eq(out[1]->dtype, TS_I64);
    expect(out[1], "", V(3));
    expect(out[2], "4x2", V(3, 4, 1, 2, 3, 4, 5, 6));
    expect(out[3], "1x2x2", V(3, 3, 4, 4));
    ts_graph_free(g);
    mb_free(&m);
}

/* x 2x5 = 0..9:
 *   SplitToSequence(x, 2, axis 1): 2x2 2x2 2x1 (the last piece smaller)
 *   SplitToSequence(x, axis 0, keepdims 0): two rows of shape 5
 *   SplitToSequence(x, [1 4], axis 1) then ConcatFromSequence(axis 1): x */
Test(sequence, split_to_sequence)
{
    mb m;
    mb_init(&m);
    mb_input(&m, "x", F32, DIMS(2, 5));
    SCALAR(&m, "two", 2);
    SCALAR(&m, "p2", 2);
    SCALAR(&m, "p1", 1);
    mb_const_ints(&m, "sizes", 2, (const int64_t[]){1, 4});
    mb_int(&m, mb_node(&m, "SplitToSequence", NAMES("x", "two"), NAMES("s")), "axis", 1);
    Onnx__NodeProto *r = mb_node(&m, "SplitToSequence", NAMES("x"), NAMES("rows"));
    mb_int(&m, r, "keepdims", 0);
    mb_int(&m, mb_node(&m, "SplitToSequence", NAMES("x", "sizes"), NAMES("parts")), "axis", -1);
    mb_node(&m, "SequenceAt", NAMES("s", "p2"), NAMES("last"));
    mb_node(&m, "SequenceLength", NAMES("s"), NAMES("n"));
    mb_node(&m, "SequenceAt", NAMES("rows", "p1"), NAMES("row1"));
    mb_int(&m, mb_node(&m, "ConcatFromSequence", NAMES("parts"), NAMES("back")), "axis", 1);
    const char *outs[] = {"last", "n", "row1", "back"};
    for (int i = 0; i < 4; i++) mb_output(&m, outs[i]);
    ts_tensor *out[4];
    ts_graph *g = run(&m, (const double *const[]){P(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)}, out);
    expect(out[0], "2x1", V(4, 9));
    expect(out[1], "", V(3));
    expect(out[2], "5", V(5, 6, 7, 8, 9));
    expect(out[3], "2x5", V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
    ts_graph_free(g);
    mb_free(&m);
}

/* One bad model per case, each refused at load with a message naming it. */
Test(sequence, errors)
{
    struct {
        const char *op, *ins[4], *text;
    } cases[] = {
        {"SequenceAt", {"s", "p3"}, "position 3 is out of range for a sequence of 2 tensors"},
        {"SequenceAt", {"s", "pm3"}, "position -3 is out of range"},
        {"SequenceErase", {"s", "p3"}, "position 3 is out of range"},
        {"SequenceInsert", {"s", "i", "p1"}, "tensor 'i' is int64, the sequence holds float32"},
        {"SequenceAt", {"s", "q"}, "input 1 ('q') must be a constant"},
        {"SequenceAt", {"x", "p1"}, "input 0 ('x') is not a sequence"},
        {"SequenceLength", {"s"}, NULL}, /* fine: the check below is on the sequence output */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        mb m;
        mb_init(&m);
        mb_input(&m, "x", F32, DIMS(1, 2));
        mb_input(&m, "q", I64, 0, (const int64_t[]){0});
        SCALAR(&m, "p3", 3);
        SCALAR(&m, "pm3", -3);
        SCALAR(&m, "p1", 1);
        SCALAR(&m, "i", 7);
        mb_node(&m, "SequenceConstruct", NAMES("x", "x"), NAMES("s"));
        const char *const ins[] = {cases[k].ins[0], cases[k].ins[1], cases[k].ins[2], NULL};
        mb_node(&m, cases[k].op, ins, NAMES("y"));
        mb_output(&m, cases[k].text ? "y" : "s");
        expect_error(&m, cases[k].text ? cases[k].text : "graph output 's' is a sequence");
        mb_free(&m);
    }
    /* concatenating an empty sequence; a split that does not add up */
    mb m;
    mb_init(&m);
    mb_input(&m, "x", F32, DIMS(2, 5));
    mb_node(&m, "SequenceEmpty", NULL, NAMES("e"));
    mb_int(&m, mb_node(&m, "ConcatFromSequence", NAMES("e"), NAMES("y")), "axis", 0);
    mb_output(&m, "y");
    expect_error(&m, "input sequence is empty");
    mb_free(&m);
    mb_init(&m);
    mb_input(&m, "x", F32, DIMS(2, 5));
    mb_const_ints(&m, "sizes", 2, (const int64_t[]){1, 3});
    mb_int(&m, mb_node(&m, "SplitToSequence", NAMES("x", "sizes"), NAMES("s")), "axis", 1);
    mb_node(&m, "SequenceLength", NAMES("s"), NAMES("y"));
    mb_output(&m, "y");
    expect_error(&m, "split sums to 4, axis 1 has 5");
    mb_free(&m);
}

/* A position the run gives (a graph input): the session loads the model
 * at the run's value, as for any shape-carrying input. */
Test(sequence, position_given_by_the_run)
{
    mb m;
    mb_init(&m);
    mb_input(&m, "a", F32, DIMS(1, 2));
    mb_input(&m, "b", F32, DIMS(1, 2));
    mb_input(&m, "pos", I64, 0, (const int64_t[]){0});
    mb_node(&m, "SequenceConstruct", NAMES("a", "b"), NAMES("s"));
    mb_node(&m, "SequenceAt", NAMES("s", "pos"), NAMES("y"));
    mb_output(&m, "y");
    char path[] = "/tmp/tsopt_seq_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    size_t len = onnx__model_proto__get_packed_size(&m.model);
    uint8_t *buf = malloc(len);
    onnx__model_proto__pack(&m.model, buf);
    cr_assert_eq(write(fd, buf, len), (ssize_t)len);
    close(fd);
    free(buf);
    ts_session *s = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_session_open(path, 1, &s, &e), TS_OK, "%s", e.msg);
    ts_shape s12 = {2, {1, 2}}, sc = {0};
    for (int p = -2; p < 2; p++) {
        ts_tensor *in[3] = {ts_tensor_new(TS_F32, &s12, &e), ts_tensor_new(TS_F32, &s12, &e),
                            ts_tensor_new(TS_I64, &sc, &e)}, *out[1] = {0};
        for (int j = 0; j < 2; j++) ts_tensor_set_f64(in[0], j, 1 + j), ts_tensor_set_f64(in[1], j, 3 + j);
        *(int64_t *)in[2]->data = p;
        cr_assert_eq(ts_session_run(s, in, out, &e), TS_OK, "pos %d: %s", p, e.msg);
        bool second = p == 1 || p == -1;
        expect(out[0], "1x2", second ? P(3, 4) : P(1, 2), 2);
        for (int j = 0; j < 3; j++) ts_tensor_unref(in[j]);
    }
    ts_session_free(s);
    unlink(path);
    mb_free(&m);
}
