/* ONNX export: ts_graph -> ModelProto -> file.
 *
 * The protobuf-c message tree is built over the graph's own memory (names,
 * shapes, weight bytes are pointed to, not copied); everything the tree
 * itself needs comes from one arena freed after packing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ir/ir.h"
#include "onnx/proto.h"

/* Zeroed allocations freed together. */
typedef struct arena {
    void **blocks;
    size_t n, cap;
    bool failed;
} arena;

static void *arena_alloc(arena *a, size_t count, size_t size)
{
    if (a->failed) return NULL;
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 256;
        void **b = realloc(a->blocks, nc * sizeof *b);
        if (!b) {
            a->failed = true;
            return NULL;
        }
        a->blocks = b;
        a->cap = nc;
    }
    void *p = calloc(count ? count : 1, size);
    if (!p) {
        a->failed = true;
        return NULL;
    }
    a->blocks[a->n++] = p;
    return p;
}

static void arena_free(arena *a)
{
    for (size_t i = 0; i < a->n; i++) free(a->blocks[i]);
    free(a->blocks);
}

typedef struct exporter {
    const ts_graph *g;
    arena ar;
    ts_error *err;
} exporter;

static ts_status oom(exporter *ex) { return ts_error_set(ex->err, TS_ERR_NOMEM, "out of memory writing ONNX model"); }

static Onnx__ValueInfoProto *value_info(exporter *ex, int v)
{
    const ts_value *val = &ex->g->values[v];
    int32_t et = ts_onnx_dtype_to(val->dtype);
    if (!et) {
        ts_error_set(ex->err, TS_ERR_UNSUPPORTED, "tensor '%s': type %s cannot be written to ONNX", val->name,
                     ts_dtype_name(val->dtype));
        return NULL;
    }
    arena *a = &ex->ar;
    Onnx__ValueInfoProto *vi = arena_alloc(a, 1, sizeof *vi);
    Onnx__TypeProto *tp = arena_alloc(a, 1, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = arena_alloc(a, 1, sizeof *tt);
    Onnx__TensorShapeProto *sp = arena_alloc(a, 1, sizeof *sp);
    Onnx__TensorShapeProto__Dimension *dims = arena_alloc(a, (size_t)val->shape.rank, sizeof *dims);
    Onnx__TensorShapeProto__Dimension **dimp = arena_alloc(a, (size_t)val->shape.rank, sizeof *dimp);
    if (a->failed) {
        oom(ex);
        return NULL;
    }
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sp);
    for (int i = 0; i < val->shape.rank; i++) {
        onnx__tensor_shape_proto__dimension__init(&dims[i]);
        dims[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims[i].dim_value = val->shape.dims[i];
        dimp[i] = &dims[i];
    }
    sp->n_dim = (size_t)val->shape.rank;
    sp->dim = dimp;
    tt->has_elem_type = 1;
    tt->elem_type = et;
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = val->name;
    vi->type = tp;
    return vi;
}

static Onnx__AttributeProto *attribute(exporter *ex, const ts_node *n, const ts_attr *at)
{
    Onnx__AttributeProto *a = arena_alloc(&ex->ar, 1, sizeof *a);
    if (!a) {
        oom(ex);
        return NULL;
    }
    onnx__attribute_proto__init(a);
    a->name = (char *)at->name;
    a->has_type = 1;
    switch (at->kind) {
    case TS_ATTR_INT:
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        a->has_i = 1;
        a->i = at->i;
        break;
    case TS_ATTR_FLOAT:
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        a->has_f = 1;
        a->f = (float)at->f;
        break;
    case TS_ATTR_STRING:
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        a->has_s = 1;
        a->s.data = (uint8_t *)at->s;
        a->s.len = at->s ? strlen(at->s) : 0;
        break;
    case TS_ATTR_INTS:
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        a->n_ints = (size_t)(at->n > 0 ? at->n : 0);
        a->ints = (int64_t *)at->ints;
        break;
    case TS_ATTR_FLOATS:
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        a->n_floats = (size_t)(at->n > 0 ? at->n : 0);
        a->floats = (float *)at->floats;
        break;
    case TS_ATTR_TENSOR: {
        Onnx__TensorProto *tp = arena_alloc(&ex->ar, 1, sizeof *tp);
        if (!tp || !at->t) {
            if (!tp) oom(ex);
            else
                ts_error_set(ex->err, TS_ERR_INVALID, "node '%s' (%s): attribute '%s' has no tensor", n->name,
                             n->op->name, at->name);
            return NULL;
        }
        onnx__tensor_proto__init(tp);
        if (ts_onnx_tensor_encode(tp, at->t, at->name, ex->err)) {
            ts_error_prefix(ex->err, "node '%s' (%s): attribute '%s'", n->name, n->op->name, at->name);
            return NULL;
        }
        tp->name = NULL;
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
        a->t = tp;
        break;
    }
    }
    return a;
}

#define MAX_ATTRS 64

static Onnx__NodeProto *node_proto(exporter *ex, const ts_node *n)
{
    const ts_graph *g = ex->g;
    Onnx__NodeProto *np = arena_alloc(&ex->ar, 1, sizeof *np);
    char **ins = arena_alloc(&ex->ar, (size_t)n->ninputs, sizeof *ins);
    char **outs = arena_alloc(&ex->ar, (size_t)n->noutputs, sizeof *outs);
    ts_attr *attrs = arena_alloc(&ex->ar, MAX_ATTRS, sizeof *attrs);
    Onnx__AttributeProto **ap = arena_alloc(&ex->ar, MAX_ATTRS, sizeof *ap);
    if (ex->ar.failed) {
        oom(ex);
        return NULL;
    }
    onnx__node_proto__init(np);
    np->name = n->name;
    np->op_type = (char *)n->op->name;
    for (int j = 0; j < n->ninputs; j++) ins[j] = n->inputs[j] >= 0 ? g->values[n->inputs[j]].name : "";
    for (int j = 0; j < n->noutputs; j++) outs[j] = g->values[n->outputs[j]].name;
    np->n_input = (size_t)n->ninputs;
    np->input = ins;
    np->n_output = (size_t)n->noutputs;
    np->output = outs;
    int na = n->op->emit ? n->op->emit(n->attrs, attrs, MAX_ATTRS) : 0;
    if (na < 0 || na > MAX_ATTRS) {
        ts_error_set(ex->err, TS_ERR_INVALID, "node '%s' (%s): cannot write its attributes", n->name, n->op->name);
        return NULL;
    }
    for (int k = 0; k < na; k++)
        if (!(ap[k] = attribute(ex, n, &attrs[k]))) return NULL;
    np->n_attribute = (size_t)na;
    np->attribute = ap;
    return np;
}

/* Builds the model; every pointer in it refers to g or the arena. */
static ts_status build_model(exporter *ex, Onnx__ModelProto *mp, Onnx__GraphProto *gp, Onnx__OperatorSetIdProto *os)
{
    const ts_graph *g = ex->g;
    arena *a = &ex->ar;
    int *order = arena_alloc(a, (size_t)g->nnodes, sizeof(int));
    char *used = arena_alloc(a, (size_t)g->nvalues, 1);
    if (a->failed) return oom(ex);
    int cnt;
    if (ts_graph_topo_order(g, order, &cnt, ex->err)) return ex->err->code;

    onnx__model_proto__init(mp);
    onnx__graph_proto__init(gp);
    onnx__operator_set_id_proto__init(os);
    os->domain = "";
    os->has_version = 1;
    os->version = g->opset;
    Onnx__OperatorSetIdProto **osp = arena_alloc(a, 1, sizeof *osp);
    if (!osp) return oom(ex);
    osp[0] = os;
    mp->has_ir_version = 1;
    /* ir 8 is what ONNX 1.10-1.13 write for opsets up to 18; older opsets
     * get the ir version of their era so older runtimes accept them. */
    mp->ir_version = g->opset <= 12 ? 7 : 8;
    mp->producer_name = "tsopt";
    mp->n_opset_import = 1;
    mp->opset_import = osp;
    mp->graph = gp;
    gp->name = g->name;

    gp->input = arena_alloc(a, (size_t)g->ninputs, sizeof *gp->input);
    gp->output = arena_alloc(a, (size_t)g->noutputs, sizeof *gp->output);
    gp->node = arena_alloc(a, (size_t)cnt, sizeof *gp->node);
    if (a->failed) return oom(ex);
    for (int i = 0; i < g->ninputs; i++)
        if (!(gp->input[i] = value_info(ex, g->inputs[i]))) return ex->err->code;
    gp->n_input = (size_t)g->ninputs;
    for (int i = 0; i < g->noutputs; i++)
        if (!(gp->output[i] = value_info(ex, g->outputs[i]))) return ex->err->code;
    gp->n_output = (size_t)g->noutputs;
    for (int k = 0; k < cnt; k++) {
        const ts_node *n = &g->nodes[order[k]];
        if (!(gp->node[k] = node_proto(ex, n))) return ex->err->code;
        for (int j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0) used[n->inputs[j]] = 1;
    }
    gp->n_node = (size_t)cnt;
    for (int i = 0; i < g->noutputs; i++) used[g->outputs[i]] = 1;

    /* Initializers: every constant something reads, in value order. */
    size_t ninit = 0;
    for (int v = 0; v < g->nvalues; v++) ninit += used[v] && g->values[v].constant;
    gp->initializer = arena_alloc(a, ninit, sizeof *gp->initializer);
    Onnx__TensorProto *tps = arena_alloc(a, ninit, sizeof *tps);
    if (a->failed) return oom(ex);
    for (int v = 0; v < g->nvalues; v++) {
        const ts_value *val = &g->values[v];
        if (!used[v] || !val->constant) continue;
        Onnx__TensorProto *tp = &tps[gp->n_initializer];
        onnx__tensor_proto__init(tp);
        if (ts_onnx_tensor_encode(tp, val->constant, val->name, ex->err)) return ex->err->code;
        gp->initializer[gp->n_initializer++] = tp;
    }
    return TS_OK;
}

static ts_status write_file(const char *path, const uint8_t *buf, size_t len, ts_error *err)
{
    size_t tlen = strlen(path) + 8;
    char *tmp = malloc(tlen);
    if (!tmp) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    snprintf(tmp, tlen, "%s.tmp", path);
    ts_status st = TS_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        free(tmp);
        return st;
    }
    bool ok = fwrite(buf, 1, len, f) == len;
    int e = errno;
    if (fflush(f)) {
        ok = false;
        e = errno;
    }
    if (fclose(f)) {
        if (ok) e = errno;
        ok = false;
    }
    if (ok && rename(tmp, path)) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        st = ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(e));
        unlink(tmp);
    }
    free(tmp);
    return st;
}

ts_status ts_onnx_save(const ts_graph *g, const char *path, ts_error *err)
{
    exporter ex = {.g = g, .err = err};
    Onnx__ModelProto mp;
    Onnx__GraphProto gp;
    Onnx__OperatorSetIdProto os;
    ts_status st = build_model(&ex, &mp, &gp, &os);
    uint8_t *buf = NULL;
    if (!st) {
        size_t len = protobuf_c_message_get_packed_size(&mp.base);
        /* protobuf messages are limited to 2 GiB; larger weights would need
         * external data, which export does not write */
        if (len > ((size_t)1 << 31) - 1)
            st = ts_error_set(err, TS_ERR_UNSUPPORTED,
                              "cannot write '%s': model is %zu bytes, over the 2 GiB ONNX limit", path, len);
        else if (!(buf = malloc(len ? len : 1)))
            st = oom(&ex);
        else {
            size_t packed = protobuf_c_message_pack(&mp.base, buf);
            st = write_file(path, buf, packed, err);
        }
    }
    free(buf);
    arena_free(&ex.ar);
    return st;
}
