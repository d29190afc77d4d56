/* ONNX export: ts_graph -> ModelProto -> file.
 *
 * The protobuf-c message tree is built over the graph's own memory (names,
 * shapes, weight bytes are pointed to, not copied); everything the tree
 * itself needs comes from one arena freed after packing.
 *
 * A graph loaded from ONNX carries what its file had beyond the graph
 * (g->meta, src/ir/meta.h): metadata is written back as it was, and
 * symbolic input/output dimensions are written symbolic again when
 * symbolic_copy() can show the graph holds at other sizes. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ir/ir.h"
#include "ein/function.h"
#include "ir/meta.h"
#include "onnx/proto.h"
#include "ops/control_flow.h"
#include "ops/opaque.h"
#include "ops/list.h"

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

/* A Reshape's shape that no constant can write at every size (two entries
 * following the sizes, as [sequence, batch, 64] from [sequence*batch, 64]):
 * written as arithmetic on the inputs' sizes, Shape -> Gather -> Mul ->
 * Concat.  Entry k is coef[k] times the product of the symbols in mask[k]
 * (ts_model_meta.syms; mask 0: the constant coef[k]).  value: the shape
 * input in the symbolic copy. */
typedef struct shape_formula {
    int value, ne;
    int64_t coef[TS_MAX_RANK];
    uint32_t mask[TS_MAX_RANK];
} shape_formula;

typedef struct shape_formulas {
    shape_formula *f;
    int n;
} shape_formulas;

typedef struct exporter {
    const ts_graph *g;
    const shape_formulas *fs; /* shapes written as arithmetic (symbolic copies only) */
    const ts_model_meta *meta; /* NULL for built graphs */
    bool symbolic;             /* write the inputs' and outputs' symbolic dimensions */
    arena ar;
    ts_error *err;
    /* eOperators written as model-local functions (einnet/function.h):
     * one per distinct expression, bodies freed after packing */
    char **fn_name;
    ts_graph **fn_body;
    int nfn, capfn;
} exporter;

static ts_status oom(exporter *ex) { return ts_error_set(ex->err, TS_ERR_NOMEM, "out of memory writing ONNX model"); }

/* The symbol whose sizes are (bound, probe), or NULL. */
static const ts_meta_sym *sym_sized(const ts_model_meta *m, int64_t bound, int64_t probe)
{
    for (int i = 0; i < m->nsyms; i++)
        if (m->syms[i].bound == bound && m->syms[i].probe == probe) return &m->syms[i];
    return NULL;
}

/* Dimension d of a graph input or output (io) written symbolic: as the file
 * declared it, else (outputs the file gave no shape) named after the input
 * symbol it follows, or left unnamed when it follows none alone (2*batch). */
static void symbolic_dim(const ts_model_meta *m, const ts_meta_io *io, int d, int64_t bound,
                         Onnx__TensorShapeProto__Dimension *dim)
{
    const ts_meta_sym *s;
    if (io->rank > d && io->dims[d].symbolic) {
        if (io->dims[d].param) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = io->dims[d].param;
        }
    } else if (io->probe.dims[d] == bound) {
        dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dim->dim_value = bound;
    } else if ((s = sym_sized(m, bound, io->probe.dims[d])) && s->name) {
        dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        dim->dim_param = s->name;
    }
}

/* io: the value's record when it is written with symbolic dimensions. */
static Onnx__ValueInfoProto *value_info(exporter *ex, int v, const ts_meta_io *io)
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
        if (io)
            symbolic_dim(ex->meta, io, i, val->shape.dims[i], &dims[i]);
        else {
            dims[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dims[i].dim_value = val->shape.dims[i];
        }
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

static Onnx__GraphProto *body_proto(exporter *ex, const ts_node *n, const struct ts_body *b);

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
    case TS_ATTR_GRAPH:
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
        if (!at->body) {
            ts_error_set(ex->err, TS_ERR_INVALID, "node '%s' (%s): attribute '%s' has no graph", n->name, n->op->name,
                         at->name);
            return NULL;
        }
        if (!(a->g = body_proto(ex, n, at->body))) return NULL;
        break;
    }
    return a;
}

#define MAX_ATTRS 64
/* protobuf's limit on a message: 2 GiB - 1 */
#define PROTOBUF_LIMIT (((size_t)1 << 31) - 1)

static void *arena_alloc1(void *a, size_t size) { return arena_alloc(a, 1, size); }

/* ------------------------------------------------ eOperators as functions */

static Onnx__NodeProto *node_proto(exporter *ex, const ts_node *n);

/* np (an eOperator node, attribute expr = text) becomes a call of its
 * function in the domain ai.tsopt; the function's body is built once per
 * distinct expression.  An expression without a standard-operator form
 * cannot be written: one error naming the node, no file. */
static ts_status einnet_call(exporter *ex, const ts_node *n, Onnx__NodeProto *np, const char *text)
{
    const ts_value *out = &ex->g->values[n->outputs[0]];
    char name[64];
    ts_ein_function_name(text ? text : "", out->dtype, name, sizeof name);
    int f = 0;
    while (f < ex->nfn && strcmp(ex->fn_name[f], name)) f++;
    if (f == ex->nfn) {
        if (ex->nfn == ex->capfn) {
            int nc = ex->capfn ? 2 * ex->capfn : 8;
            char **nn = arena_alloc(&ex->ar, (size_t)nc, sizeof *nn);
            ts_graph **nb = arena_alloc(&ex->ar, (size_t)nc, sizeof *nb);
            if (ex->ar.failed) return oom(ex);
            if (ex->nfn) memcpy(nn, ex->fn_name, sizeof *nn * (size_t)ex->nfn);
            if (ex->nfn) memcpy(nb, ex->fn_body, sizeof *nb * (size_t)ex->nfn);
            ex->fn_name = nn, ex->fn_body = nb, ex->capfn = nc;
        }
        if (!(ex->fn_name[f] = arena_alloc(&ex->ar, strlen(name) + 1, 1))) return oom(ex);
        strcpy(ex->fn_name[f], name);
        if (ts_ein_function_body(n->attrs, out->dtype, ex->g->opset, &ex->fn_body[f], ex->err))
            return ts_error_prefix(ex->err, "node '%s' (%s): cannot write it", n->name, n->op->name), ex->err->code;
        ex->nfn++;
    }
    np->domain = TS_EIN_DOMAIN;
    np->op_type = ex->fn_name[f];
    return TS_OK;
}

/* Function f's proto: its body's nodes, its index constants as Constant
 * nodes (a function has no initializers), the graph's opset. */
static Onnx__FunctionProto *einnet_function(exporter *ex, int f, Onnx__OperatorSetIdProto **os)
{
    ts_graph *b = ex->fn_body[f];
    exporter sub = {.g = b, .ar = ex->ar, .err = ex->err};
    Onnx__FunctionProto *fp = arena_alloc(&sub.ar, 1, sizeof *fp);
    char **ins = arena_alloc(&sub.ar, (size_t)b->ninputs, sizeof *ins);
    char **outs = arena_alloc(&sub.ar, (size_t)b->noutputs, sizeof *outs);
    static char *attr_names[] = {"expr"};
    int *order = arena_alloc(&sub.ar, (size_t)b->nnodes, sizeof *order);
    Onnx__NodeProto **nodes = arena_alloc(&sub.ar, (size_t)(b->nnodes + b->nvalues), sizeof *nodes);
    int cnt = 0;
    size_t nn = 0;
    if (sub.ar.failed || ts_graph_topo_order(b, order, &cnt, ex->err)) goto fail;
    onnx__function_proto__init(fp);
    fp->name = ex->fn_name[f];
    fp->domain = TS_EIN_DOMAIN;
    fp->doc_string = "tsopt eOperator (docs/einnet.md): tsopt runs the expression in the calling node's "
                     "attribute expr as a generated kernel";
    for (int i = 0; i < b->ninputs; i++) ins[i] = b->values[b->inputs[i]].name;
    for (int i = 0; i < b->noutputs; i++) outs[i] = b->values[b->outputs[i]].name;
    fp->n_input = (size_t)b->ninputs, fp->input = ins;
    fp->n_output = (size_t)b->noutputs, fp->output = outs;
    fp->n_attribute = 1, fp->attribute = attr_names;
    fp->n_opset_import = 1, fp->opset_import = os;
    for (int v = 0; v < b->nvalues; v++) {
        if (!b->values[v].constant) continue;
        Onnx__NodeProto *np = arena_alloc(&sub.ar, 1, sizeof *np);
        char **o = arena_alloc(&sub.ar, 1, sizeof *o);
        Onnx__AttributeProto *a = arena_alloc(&sub.ar, 1, sizeof *a), **ap = arena_alloc(&sub.ar, 1, sizeof *ap);
        Onnx__TensorProto *tp = arena_alloc(&sub.ar, 1, sizeof *tp);
        if (sub.ar.failed) goto fail;
        onnx__node_proto__init(np);
        onnx__attribute_proto__init(a);
        onnx__tensor_proto__init(tp);
        if (ts_onnx_tensor_encode(tp, b->values[v].constant, NULL, ex->err)) goto fail;
        tp->name = NULL;
        a->name = "value", a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR, a->t = tp;
        *ap = a;
        *o = b->values[v].name;
        np->name = b->values[v].name, np->op_type = "Constant";
        np->n_output = 1, np->output = o, np->n_attribute = 1, np->attribute = ap;
        nodes[nn++] = np;
    }
    for (int k = 0; k < cnt; k++)
        if (!(nodes[nn++] = node_proto(&sub, &b->nodes[order[k]]))) goto fail;
    fp->n_node = nn, fp->node = nodes;
    ex->ar = sub.ar;
    return fp;
fail:
    ex->ar = sub.ar;
    if (ex->ar.failed) oom(ex);
    return NULL;
}

/* After the graph's nodes: the functions its eOperators call, and the
 * ai.tsopt opset they need (local functions need IR version 8). */
static ts_status einnet_functions(exporter *ex, Onnx__ModelProto *mp, Onnx__OperatorSetIdProto *deflt)
{
    if (!ex->nfn) return TS_OK;
    Onnx__FunctionProto **fps = arena_alloc(&ex->ar, (size_t)ex->nfn, sizeof *fps);
    Onnx__OperatorSetIdProto **osp = arena_alloc(&ex->ar, mp->n_opset_import + 1, sizeof *osp);
    Onnx__OperatorSetIdProto **fos = arena_alloc(&ex->ar, 1, sizeof *fos);
    Onnx__OperatorSetIdProto *tos = arena_alloc(&ex->ar, 1, sizeof *tos);
    if (ex->ar.failed) return oom(ex);
    *fos = deflt;
    for (int f = 0; f < ex->nfn; f++)
        if (!(fps[f] = einnet_function(ex, f, fos))) return ex->err->code;
    mp->n_functions = (size_t)ex->nfn, mp->functions = fps;
    bool has = false;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        osp[i] = mp->opset_import[i];
        has |= osp[i]->domain && !strcmp(osp[i]->domain, TS_EIN_DOMAIN);
    }
    if (!has) {
        onnx__operator_set_id_proto__init(tos);
        tos->domain = TS_EIN_DOMAIN, tos->has_version = 1, tos->version = 1;
        osp[mp->n_opset_import++] = tos;
    }
    mp->opset_import = osp;
    if (mp->ir_version < 8) mp->ir_version = 8;
    return TS_OK;
}

static Onnx__NodeProto *node_proto(exporter *ex, const ts_node *n)
{
    const ts_graph *g = ex->g;
    if (ts_node_is_opaque(n)) { /* as the file had it (src/onnx/opaque.c) */
        Onnx__NodeProto *np = ts_onnx_opaque_export(g, n, arena_alloc1, &ex->ar, ex->err);
        if (np) np->doc_string = (char *)ts_model_meta_node_doc(ex->meta, n->name);
        return np;
    }
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
    np->doc_string = (char *)ts_model_meta_node_doc(ex->meta, n->name);
    np->op_type = (char *)n->op->name;
    for (int j = 0; j < n->ninputs; j++) ins[j] = n->inputs[j] >= 0 ? g->values[n->inputs[j]].name : "";
    for (int j = 0; j < n->noutputs; j++) outs[j] = g->values[n->outputs[j]].name;
    np->n_input = (size_t)(ts_op_is_control_flow(n->op) ? ts_cf_explicit_inputs(n) : n->ninputs); /* not captures */
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
    if (n->op == &ts_op_einnet && einnet_call(ex, n, np, na ? attrs[0].s : NULL)) return NULL;
    return np;
}

/* The types and shapes of opaque nodes' outputs: no engine can infer
 * them, and tsopt needs them to load the model again. */
static ts_status opaque_value_infos(exporter *ex, Onnx__GraphProto *gp, const int *order, int cnt)
{
    const ts_graph *g = ex->g;
    size_t nvi = 0;
    for (int k = 0; k < cnt; k++)
        if (ts_node_is_opaque(&g->nodes[order[k]])) nvi += (size_t)g->nodes[order[k]].noutputs;
    if (!nvi) return TS_OK;
    if (!(gp->value_info = arena_alloc(&ex->ar, nvi, sizeof *gp->value_info))) return oom(ex);
    for (int k = 0; k < cnt; k++) {
        const ts_node *n = &g->nodes[order[k]];
        if (!ts_node_is_opaque(n)) continue;
        for (int o = 0; o < n->noutputs; o++) {
            bool is_out = false;
            for (int i = 0; i < g->noutputs; i++) is_out |= g->outputs[i] == n->outputs[o];
            if (is_out) continue; /* written with the graph's outputs */
            Onnx__ValueInfoProto *vi = value_info(ex, n->outputs[o], NULL);
            if (!vi) return ex->err->code;
            gp->value_info[gp->n_value_info++] = vi;
            /* written symbolic: the dimensions that follow an input's symbolic one say so */
            const ts_opaque_attrs *a = n->attrs;
            Onnx__TensorShapeProto *sp = vi->type->tensor_type->shape;
            for (size_t d = 0; ex->symbolic && o < TS_OPAQUE_MAX_IO && d < sp->n_dim && d < TS_MAX_RANK; d++) {
                int k = a->follow_in[o][d], ax = a->follow_axis[o][d];
                if (!ex->meta || k < 0 || k >= ex->meta->ninputs || ax < 0 || ax >= ex->meta->inputs[k].rank ||
                    !ex->meta->inputs[k].dims[ax].symbolic)
                    continue;
                const char *p = ex->meta->inputs[k].dims[ax].param;
                sp->dim[d]->value_case = p ? ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                                           : ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET;
                sp->dim[d]->dim_param = (char *)p;
            }
        }
    }
    return TS_OK;
}

/* ------------------------------------------------- control-flow bodies */

static Onnx__NodeProto *node_proto(exporter *ex, const ts_node *n);

static Onnx__NodeProto *identity_proto(exporter *ex, const char *name, const char *in, const char *out)
{
    Onnx__NodeProto *np = arena_alloc(&ex->ar, 1, sizeof *np);
    char **ins = arena_alloc(&ex->ar, 1, sizeof *ins), **outs = arena_alloc(&ex->ar, 1, sizeof *outs);
    char *nm = arena_alloc(&ex->ar, strlen(name) + 1, 1);
    if (ex->ar.failed) return NULL;
    onnx__node_proto__init(np);
    strcpy(nm, name);
    np->name = nm;
    np->op_type = "Identity";
    ins[0] = (char *)in;
    outs[0] = (char *)out;
    np->n_input = np->n_output = 1;
    np->input = ins;
    np->output = outs;
    return np;
}

static char *arena_printf(exporter *ex, const char *fmt, const char *a, int k)
{
    size_t len = strlen(fmt) + strlen(a) + 24;
    char *s = arena_alloc(&ex->ar, len, 1);
    if (s) snprintf(s, len, fmt, a, k);
    return s;
}

/* Leaves every dimension of vi unknown (the rank stays). */
static void unsized(Onnx__ValueInfoProto *vi)
{
    Onnx__TensorShapeProto *sp = vi->type->tensor_type->shape;
    for (size_t d = 0; sp && d < sp->n_dim; d++) {
        sp->dim[d]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET;
        sp->dim[d]->dim_value = 0;
    }
}

/* Body b of control-flow node n (of ex->g) as a GraphProto: its formal
 * inputs, its nodes (nested bodies recursively), its outputs and its own
 * constants.  Captures are read by their name in the enclosing graph; one
 * the optimizer renamed there gets an Identity to the body's name.  Outputs
 * that no node of the body computes (an input, a capture, a constant) get
 * an Identity too: a graph output that is another scope's value or an
 * initializer is read differently by different runtimes. */
static Onnx__GraphProto *body_proto(exporter *ex, const ts_node *n, const ts_body *b)
{
    const ts_graph *outer = ex->g, *g = b->g;
    const ts_model_meta *meta = ex->meta;
    bool symbolic = ex->symbolic;
    arena *a = &ex->ar;
    Onnx__GraphProto *gp = arena_alloc(a, 1, sizeof *gp);
    int *order = arena_alloc(a, (size_t)g->nnodes, sizeof(int));
    char *used = arena_alloc(a, (size_t)g->nvalues, 1);
    if (a->failed) {
        oom(ex);
        return NULL;
    }
    int cnt;
    if (ts_graph_topo_order(g, order, &cnt, ex->err)) return NULL;
    onnx__graph_proto__init(gp);
    gp->name = g->name;
    size_t maxnodes = (size_t)cnt + (size_t)b->ncap + (size_t)g->noutputs;
    gp->node = arena_alloc(a, maxnodes, sizeof *gp->node);
    gp->input = arena_alloc(a, (size_t)b->nformal, sizeof *gp->input);
    gp->output = arena_alloc(a, (size_t)g->noutputs, sizeof *gp->output);
    if (a->failed) {
        oom(ex);
        return NULL;
    }
    ex->g = g;
    ex->meta = NULL; /* ex->symbolic stays: nested bodies are written unsized too */
    Onnx__GraphProto *res = NULL;
    for (int j = 0; j < b->ncap; j++) {
        int slot = b->cap_slot[j], ov = slot >= 0 && slot < n->ninputs ? n->inputs[slot] : -1;
        if (ov < 0) {
            ts_error_set(ex->err, TS_ERR_INVALID, "node '%s' (%s): captured '%s' is not among its inputs", n->name,
                         n->op->name, b->cap_name[j]);
            goto done;
        }
        const char *oname = outer->values[ov].name;
        if (strcmp(oname, b->cap_name[j]) &&
            !(gp->node[gp->n_node++] = identity_proto(ex, b->cap_name[j], oname, b->cap_name[j]))) {
            oom(ex);
            goto done;
        }
    }
    /* a body is built at the bound sizes: written with symbolic dimensions
     * outside, its inputs and outputs keep their ranks, not their sizes */
    for (int i = 0; i < b->nformal; i++) {
        if (!(gp->input[gp->n_input++] = value_info(ex, g->inputs[i], NULL))) goto done;
        if (symbolic) unsized(gp->input[i]);
    }
    for (int k = 0; k < cnt; k++) {
        const ts_node *m = &g->nodes[order[k]];
        if (!(gp->node[gp->n_node++] = node_proto(ex, m))) goto done;
        for (int j = 0; j < m->ninputs; j++)
            if (m->inputs[j] >= 0) used[m->inputs[j]] = 1;
    }
    if (opaque_value_infos(ex, gp, order, cnt)) goto done; /* opaque nodes inside the body */
    for (int o = 0; o < g->noutputs; o++) {
        int v = g->outputs[o];
        Onnx__ValueInfoProto *vi = value_info(ex, v, NULL);
        if (!vi) goto done;
        if (symbolic) unsized(vi);
        if (g->values[v].producer < 0) {
            char *nm = arena_printf(ex, "%s_out%d", g->values[v].name, o);
            if (!nm || !(gp->node[gp->n_node++] = identity_proto(ex, nm, g->values[v].name, nm))) {
                oom(ex);
                goto done;
            }
            vi->name = nm;
            used[v] = 1;
        }
        gp->output[gp->n_output++] = vi;
    }
    size_t ninit = 0;
    for (int v = 0; v < g->nvalues; v++)
        ninit += used[v] && g->values[v].constant && ts_body_capture_index(b, g->values[v].name) < 0;
    gp->initializer = arena_alloc(a, ninit, sizeof *gp->initializer);
    Onnx__TensorProto *tps = arena_alloc(a, ninit, sizeof *tps);
    if (a->failed) {
        oom(ex);
        goto done;
    }
    for (int v = 0; v < g->nvalues; v++) {
        const ts_value *val = &g->values[v];
        if (!used[v] || !val->constant || ts_body_capture_index(b, val->name) >= 0) continue;
        Onnx__TensorProto *tp = &tps[gp->n_initializer];
        onnx__tensor_proto__init(tp);
        if (ts_onnx_tensor_encode(tp, val->constant, val->name, ex->err)) goto done;
        gp->initializer[gp->n_initializer++] = tp;
    }
    res = gp;
done:
    ex->g = outer;
    ex->meta = meta;
    ex->symbolic = symbolic;
    return res;
}

/* Builds the model; every pointer in it refers to g or the arena. */
/* The shape formula writing value v, or NULL. */
static const shape_formula *formula_of(const exporter *ex, int v)
{
    for (int i = 0; ex->symbolic && ex->fs && i < ex->fs->n; i++)
        if (ex->fs->f[i].value == v) return &ex->fs->f[i];
    return NULL;
}

static Onnx__NodeProto *small_node(exporter *ex, const char *op, const char *out, const char *a, const char *b)
{
    Onnx__NodeProto *np = arena_alloc(&ex->ar, 1, sizeof *np);
    char **in = arena_alloc(&ex->ar, 2, sizeof *in), **o = arena_alloc(&ex->ar, 1, sizeof *o);
    if (ex->ar.failed) return NULL;
    onnx__node_proto__init(np);
    np->name = (char *)out;
    np->op_type = (char *)op;
    in[0] = (char *)a, in[1] = (char *)b, o[0] = (char *)out;
    np->n_input = b ? 2 : 1;
    np->input = in;
    np->n_output = 1;
    np->output = o;
    return np;
}

static Onnx__TensorProto *i64_init(exporter *ex, const char *name, int64_t v)
{
    Onnx__TensorProto *tp = arena_alloc(&ex->ar, 1, sizeof *tp);
    int64_t *d = arena_alloc(&ex->ar, 2, sizeof *d);
    if (ex->ar.failed) return NULL;
    onnx__tensor_proto__init(tp);
    tp->name = (char *)name;
    tp->has_data_type = 1;
    tp->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    d[0] = v, d[1] = 1;
    tp->n_dims = 1, tp->dims = &d[1];
    tp->n_int64_data = 1, tp->int64_data = &d[0];
    return tp;
}

/* Writes formula f (shape_formula) as nodes and initializers appended to
 * nodes / inits: per symbol used, Shape of the input it comes from and a
 * Gather of its axis; per entry a constant, or the symbols' product (Mul)
 * times its coefficient; one Concat, whose output is the shape's value.
 * At most 2 * nsyms + ne * (nsyms + 1) + 1 nodes and nsyms + ne
 * initializers. */
static ts_status formula_write(exporter *ex, const shape_formula *f, Onnx__NodeProto **nodes, size_t *nn,
                               Onnx__TensorProto **inits, size_t *ni)
{
    const ts_model_meta *m = ex->meta;
    const char *vn = ex->g->values[f->value].name;
    uint32_t used = 0;
    char *sym[32] = {0}, *ent[TS_MAX_RANK];
    for (int k = 0; k < f->ne; k++) used |= f->mask[k];
    for (int i = 0; i < m->nsyms; i++) {
        if (!(used >> i & 1)) continue;
        const ts_meta_sym *s = &m->syms[i];
        char *shape = arena_printf(ex, "%s/size%d_shape", vn, i), *axis = arena_printf(ex, "%s/size%d_axis", vn, i);
        sym[i] = arena_printf(ex, "%s/size%d", vn, i);
        if (!shape || !axis || !sym[i] || !(nodes[(*nn)++] = small_node(ex, "Shape", shape, m->inputs[s->input].name, NULL)) ||
            !(nodes[(*nn)++] = small_node(ex, "Gather", sym[i], shape, axis)) ||
            !(inits[(*ni)++] = i64_init(ex, axis, s->axis)))
            return oom(ex);
    }
    for (int k = 0; k < f->ne; k++) {
        if (!f->mask[k]) {
            if (!(ent[k] = arena_printf(ex, "%s/entry%d", vn, k)) || !(inits[(*ni)++] = i64_init(ex, ent[k], f->coef[k])))
                return oom(ex);
            continue;
        }
        ent[k] = NULL;
        for (int i = 0; i < m->nsyms; i++) {
            if (!(f->mask[k] >> i & 1)) continue;
            if (!ent[k]) {
                ent[k] = sym[i];
                continue;
            }
            char *p = arena_printf(ex, "%s/entry%d_", vn, k);
            char *q = p ? arena_printf(ex, "%s%d", p, i) : NULL;
            if (!q || !(nodes[(*nn)++] = small_node(ex, "Mul", q, ent[k], sym[i]))) return oom(ex);
            ent[k] = q;
        }
        if (f->coef[k] != 1) {
            char *c = arena_printf(ex, "%s/coef%d", vn, k), *q = arena_printf(ex, "%s/entry%d", vn, k);
            if (!c || !q || !(inits[(*ni)++] = i64_init(ex, c, f->coef[k])) ||
                !(nodes[(*nn)++] = small_node(ex, "Mul", q, ent[k], c)))
                return oom(ex);
            ent[k] = q;
        }
    }
    Onnx__NodeProto *cat = small_node(ex, "Concat", vn, NULL, NULL);
    char **in = arena_alloc(&ex->ar, (size_t)f->ne, sizeof *in);
    Onnx__AttributeProto *ax = arena_alloc(&ex->ar, 1, sizeof *ax), **axp = arena_alloc(&ex->ar, 1, sizeof *axp);
    char *name = arena_printf(ex, "%s/concat%d", vn, 0);
    if (!cat || !in || !ax || !axp || !name) return oom(ex);
    memcpy(in, ent, sizeof *in * (size_t)f->ne);
    onnx__attribute_proto__init(ax);
    ax->name = "axis", ax->has_type = 1, ax->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, ax->has_i = 1, ax->i = 0;
    axp[0] = ax;
    cat->name = name;
    cat->input = in, cat->n_input = (size_t)f->ne;
    cat->attribute = axp, cat->n_attribute = 1;
    nodes[(*nn)++] = cat;
    return TS_OK;
}

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
    mp->has_ir_version = 1;
    /* ir 8 is what ONNX 1.10-1.13 write for opsets up to 18; older opsets
     * get the ir version of their era so older runtimes accept them. */
    mp->ir_version = g->opset <= 12 ? 7 : 8;
    mp->producer_name = "tsopt";
    mp->n_opset_import = 1;
    mp->graph = gp;
    gp->name = g->name;
    const ts_model_meta *m = ex->meta;
    if (m) {
        /* The user's model keeps its identity.  Its ir_version is kept
         * unless below 4 (which would require initializers to be listed as
         * inputs, as this writer does not). */
        if (m->ir_version >= 4) mp->ir_version = m->ir_version;
        mp->producer_name = m->producer_name;
        mp->producer_version = m->producer_version;
        mp->domain = m->domain;
        mp->doc_string = m->doc_string;
        mp->has_model_version = m->has_model_version;
        mp->model_version = m->model_version;
        gp->doc_string = m->graph_doc;
        mp->metadata_props = arena_alloc(a, (size_t)m->nprops, sizeof *mp->metadata_props);
        Onnx__StringStringEntryProto *kv = arena_alloc(a, (size_t)m->nprops, sizeof *kv);
        if (a->failed) return oom(ex);
        for (int i = 0; i < m->nprops; i++) {
            onnx__string_string_entry_proto__init(&kv[i]);
            kv[i].key = m->props[i].key;
            kv[i].value = m->props[i].value;
            mp->metadata_props[i] = &kv[i];
        }
        mp->n_metadata_props = (size_t)m->nprops;
    }
    /* Every opset the file imported, other domains included; the default
     * domain's version is the graph's. */
    int nos = m && m->nopsets ? m->nopsets : 1;
    Onnx__OperatorSetIdProto **osp = arena_alloc(a, (size_t)nos, sizeof *osp);
    Onnx__OperatorSetIdProto *oss = arena_alloc(a, (size_t)nos, sizeof *oss);
    if (a->failed) return oom(ex);
    osp[0] = os;
    for (int i = 0; m && i < m->nopsets; i++) {
        const ts_meta_opset *o = &m->opsets[i];
        onnx__operator_set_id_proto__init(&oss[i]);
        oss[i].domain = o->domain ? o->domain : "";
        bool deflt = !o->domain || !strcmp(o->domain, "ai.onnx");
        oss[i].has_version = deflt || o->version >= 0;
        oss[i].version = deflt ? g->opset : o->version;
        osp[i] = &oss[i];
    }
    mp->n_opset_import = (size_t)nos;
    mp->opset_import = osp;

    gp->input = arena_alloc(a, (size_t)g->ninputs, sizeof *gp->input);
    gp->output = arena_alloc(a, (size_t)g->noutputs, sizeof *gp->output);
    /* shapes written as arithmetic on the sizes come first: they read
     * graph inputs only */
    size_t fnodes = 0, finits = 0;
    int nsyms = m ? m->nsyms : 0;
    for (int i = 0; ex->symbolic && ex->fs && i < ex->fs->n; i++) {
        fnodes += (size_t)(2 * nsyms + ex->fs->f[i].ne * (nsyms + 1) + 1);
        finits += (size_t)(nsyms + ex->fs->f[i].ne);
    }
    gp->node = arena_alloc(a, (size_t)cnt + fnodes, sizeof *gp->node);
    Onnx__TensorProto **fin = arena_alloc(a, finits + 1, sizeof *fin);
    if (a->failed) return oom(ex);
    size_t nfn = 0, nfi = 0;
    for (int i = 0; ex->symbolic && ex->fs && i < ex->fs->n; i++)
        if (formula_write(ex, &ex->fs->f[i], gp->node, &nfn, fin, &nfi)) return ex->err->code;
    for (int i = 0; i < g->ninputs; i++)
        if (!(gp->input[i] = value_info(ex, g->inputs[i], ex->symbolic ? &m->inputs[i] : NULL))) return ex->err->code;
    gp->n_input = (size_t)g->ninputs;
    for (int i = 0; i < g->noutputs; i++)
        if (!(gp->output[i] = value_info(ex, g->outputs[i], ex->symbolic ? &m->outputs[i] : NULL)))
            return ex->err->code;
    gp->n_output = (size_t)g->noutputs;
    for (int k = 0; k < cnt; k++) {
        const ts_node *n = &g->nodes[order[k]];
        if (!(gp->node[nfn + (size_t)k] = node_proto(ex, n))) return ex->err->code;
        for (int j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0 && !formula_of(ex, n->inputs[j])) used[n->inputs[j]] = 1;
    }
    gp->n_node = nfn + (size_t)cnt;
    if (einnet_functions(ex, mp, os)) return ex->err->code;
    for (int i = 0; i < g->noutputs; i++) used[g->outputs[i]] = 1;
    if (opaque_value_infos(ex, gp, order, cnt)) return ex->err->code;

    /* Initializers: every constant something reads, in value order. */
    size_t ninit = 0;
    for (int v = 0; v < g->nvalues; v++) ninit += used[v] && g->values[v].constant;
    gp->initializer = arena_alloc(a, ninit + nfi, sizeof *gp->initializer);
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
    for (size_t i = 0; i < nfi; i++) gp->initializer[gp->n_initializer++] = fin[i];
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

/* ------------------------------------------------ symbolic dimensions */

/* Writes the one line saying why a graph cannot be written symbolic;
 * returns false for `return why_set(...)`. */
__attribute__((format(printf, 3, 4))) static bool why_set(char *why, size_t nwhy, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, nwhy, fmt, ap);
    va_end(ap);
    return false;
}
#define WHY(...) why_set(why, nwhy, __VA_ARGS__)

/* The same for functions returning a status: the graph is fine, it just
 * cannot be written symbolic. */
__attribute__((format(printf, 3, 4))) static ts_status why_status(char *why, size_t nwhy, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, nwhy, fmt, ap);
    va_end(ap);
    return TS_OK;
}

/* Whether node n's attributes say allowzero=1 (Reshape). */
static bool allowzero(const ts_node *n)
{
    ts_attr a[4];
    int na = n->op->emit ? n->op->emit(n->attrs, a, 4) : 0;
    for (int i = 0; i < na; i++)
        if (!strcmp(a[i].name, "allowzero") && a[i].kind == TS_ATTR_INT && a[i].i) return true;
    return false;
}

/* New entries for the shape input of Reshape/Expand node n so that it
 * follows the symbolic sizes instead of holding their bound value: an entry
 * that equals the data input's dimension at the same place (aligned right
 * for Expand) while that dimension is symbolic is written 0 (Reshape: copy
 * the input's dimension; not with allowzero) or 1 (Expand: keep it), which
 * is the same at the bound sizes.  One Reshape entry that follows the sizes
 * otherwise (batch*heads) becomes -1 when there is none yet: the element
 * count then gives it at every size (probe_node checks the result).
 * e1: the entries; e2: their values at the probe sizes when import found
 * them computed from the sizes (entries that differ must be patched), else
 * NULL (a shape the optimizer made from static shapes: patched where the
 * pattern holds; the file's literals never get here).  in_b, in_p: the
 * data input's shape at the bound and probe sizes.  *changed tells whether
 * any entry changed; false with why when the entries cannot follow the
 * sizes.  A Reshape shape whose entries follow the sizes in more ways than
 * one -1 can take is written as arithmetic on the sizes when each entry is
 * a constant times a product of symbols (shape_formula_find): f receives
 * it, *formula is set, and out holds the entries at the probe sizes. */
static bool shape_formula_find(const ts_model_meta *m, const int64_t *e1, const int64_t *e2, int64_t *out, int ne,
                               shape_formula *f);
static bool patch_shape(const ts_node *n, const int64_t *e1, const int64_t *e2, int ne, const ts_shape *in_b,
                        const ts_shape *in_p, int64_t *out, bool *changed, const ts_model_meta *m, shape_formula *f,
                        bool *formula, const char *syms, char *why, size_t nwhy)
{
    *formula = false;
    bool reshape = n->op == &ts_op_reshape, zero_ok = reshape && !allowzero(n), has_minus = false;
    int nfree = 0, free_at = -1;
    *changed = false;
    for (int k = 0; k < ne; k++) has_minus |= reshape && e1[k] == -1;
    for (int k = 0; k < ne; k++) {
        out[k] = e1[k];
        int d = reshape ? k : k - (ne - in_b->rank); /* Expand broadcasts right-aligned */
        bool place = d >= 0 && d < in_b->rank && (reshape ? zero_ok : true);
        bool follows = place && e1[k] == in_b->dims[d] && in_p->dims[d] != in_b->dims[d];
        if (e2) {
            if (e1[k] == e2[k]) continue;
            if (!follows || e2[k] != in_p->dims[d]) {
                nfree++;
                free_at = k;
                continue;
            }
        } else if (!follows || e1[k] <= 0)
            continue;
        if (reshape ? e1[k] == 0 : e1[k] == 1) continue;
        out[k] = reshape ? 0 : 1;
        *changed = true;
    }
    if (!nfree) return true;
    if (reshape && (nfree > 1 || has_minus) && shape_formula_find(m, e1, e2, out, ne, f))
        return *changed = *formula = true;
    if (!reshape || nfree > 1 || has_minus)
        return WHY("node '%s' (%s): shape entry %d follows the sizes of %s, not as the input's dimension at "
                   "that place does",
                   n->name, n->op->name, free_at, syms);
    out[free_at] = -1;
    *changed = true;
    return true;
}

/* Entry k (e1[k] at the bound sizes, e2[k] at the probe's) as coef times
 * the product of a set of symbols, for each entry that follows the sizes
 * and was not patched (out[k] == e1[k] != e2[k]); the others are the
 * constants out[k].  On success out holds the entries at the probe sizes. */
static bool shape_formula_find(const ts_model_meta *m, const int64_t *e1, const int64_t *e2, int64_t *out, int ne,
                               shape_formula *f)
{
    if (!f || !e2 || m->nsyms > 16) return false;
    f->ne = ne;
    for (int k = 0; k < ne; k++) {
        f->mask[k] = 0;
        f->coef[k] = out[k];
        if (e1[k] == e2[k] || out[k] != e1[k]) continue;
        bool found = false;
        for (uint32_t s = 1; s < (1u << m->nsyms) && !found; s++) {
            int64_t p1 = 1, p2 = 1;
            for (int i = 0; i < m->nsyms; i++)
                if (s >> i & 1) p1 *= m->syms[i].bound, p2 *= m->syms[i].probe;
            if (p1 < 1 || e1[k] % p1 || e1[k] / p1 < 1 || e1[k] / p1 * p2 != e2[k]) continue;
            f->coef[k] = e1[k] / p1;
            f->mask[k] = s;
            found = true;
        }
        if (!found) return false;
    }
    for (int k = 0; k < ne; k++)
        if (f->mask[k]) out[k] = e2[k];
    return true;
}

/* Gives input j of node ni of c the int64 vector ents (a new constant,
 * or the old one replaced when nothing else reads it). */
static bool set_shape_input(ts_graph *c, int ni, int j, const int64_t *ents, int ne, ts_error *err)
{
    int v = c->nodes[ni].inputs[j];
    ts_shape sh = {1, {ne}};
    ts_tensor *t = ts_tensor_new(TS_I64, &sh, err);
    if (!t) return false;
    if (ne) memcpy(t->data, ents, sizeof(int64_t) * (size_t)ne);
    if (ts_value_uses(c, v) == 1) {
        ts_tensor_unref(c->values[v].constant);
        c->values[v].constant = t;
        return true;
    }
    char name[400];
    for (int k = 0;; k++) {
        snprintf(name, sizeof name, "%s_sym%d", c->values[v].name, k);
        if (ts_graph_find_value(c, name) < 0) break;
    }
    int nv = ts_graph_add_constant(c, name, t, err);
    ts_tensor_unref(t);
    if (nv < 0) return false;
    c->nodes[ni].inputs[j] = nv;
    return true;
}

/* Node ni of c at the probe sizes: rewrites its shape input where it froze
 * them, then re-infers its outputs' shapes.  false with why when the node
 * cannot follow the sizes; *oom on allocation failure. */
static bool probe_node(const ts_graph *g, ts_graph *c, int ni, shape_formulas *fs, const char *syms, char *why,
                       size_t nwhy, bool *oom)
{
    const ts_model_meta *m = g->meta;
    const ts_node *n = &c->nodes[ni];
    bool shape_op = n->op == &ts_op_reshape || n->op == &ts_op_expand;
    const int64_t *expect = NULL; /* a Reshape's shape at the probe sizes, as the model computed it */
    int nexpect = 0;
    for (int j = 0; j < n->ninputs; j++) {
        int v = n->inputs[j];
        const ts_tensor *t = v >= 0 ? c->values[v].constant : NULL;
        if (!t) continue;
        const ts_tensor *tp = ts_model_meta_sized_probe(m, t);
        /* a Resize to sizes computed from the input's (upsampling back to
         * [batch, c, h, w]) follows them as arithmetic (shape_formula) */
        if (tp && n->op == &ts_op_resize && j == 3 && t->dtype == TS_I64 && tp->dtype == TS_I64 &&
            t->shape.rank == 1 && ts_tensor_numel(t) == ts_tensor_numel(tp) && ts_tensor_numel(t) <= TS_MAX_RANK) {
            int ne = (int)ts_tensor_numel(t);
            int64_t ents[TS_MAX_RANK];
            shape_formula f;
            memcpy(ents, t->data, sizeof *ents * (size_t)ne);
            if (!shape_formula_find(m, t->data, tp->data, ents, ne, &f))
                return WHY("node '%s' (%s): its sizes '%s' are no products of the sizes of %s", n->name, n->op->name,
                           c->values[v].name, syms);
            ts_error e = {0};
            shape_formula *nf = realloc(fs->f, sizeof *nf * (size_t)(fs->n + 1));
            if (!nf || !set_shape_input(c, ni, j, ents, ne, &e)) {
                if (nf) fs->f = nf;
                *oom = true;
                return false;
            }
            f.value = c->nodes[ni].inputs[j];
            fs->f = nf;
            fs->f[fs->n++] = f;
            n = &c->nodes[ni];
            continue;
        }
        if (!(shape_op && j == 1)) {
            if (tp)
                return WHY("node '%s' (%s) reads '%s', computed from the sizes of %s (only Reshape and Expand "
                           "shapes are rewritten to follow them)",
                           n->name, n->op->name, c->values[v].name, syms);
            continue;
        }
        int ne = (int)ts_tensor_numel(t);
        if (t->dtype != TS_I64 || t->shape.rank != 1 || ne > TS_MAX_RANK) {
            if (tp) return WHY("node '%s' (%s): its shape input '%s' is computed from the sizes of %s", n->name,
                               n->op->name, c->values[v].name, syms);
            continue;
        }
        if (tp && (tp->dtype != TS_I64 || ts_tensor_numel(tp) != ne))
            return WHY("node '%s' (%s): its shape input '%s' changes length with the sizes of %s", n->name,
                       n->op->name, c->values[v].name, syms);
        int x = n->inputs[0];
        int64_t ents[TS_MAX_RANK];
        bool changed;
        if (tp && n->op == &ts_op_reshape) {
            expect = tp->data;
            nexpect = ne;
        }
        /* the file's literal shapes mean the same at every size */
        if (!tp && ts_model_meta_is_literal(m, t)) continue;
        shape_formula f;
        bool formula;
        if (!patch_shape(n, t->data, tp ? tp->data : NULL, ne, &g->values[x].shape, &c->values[x].shape, ents,
                         &changed, m, &f, &formula, syms, why, nwhy))
            return false;
        ts_error e = {0};
        shape_formula *nf = formula ? realloc(fs->f, sizeof *nf * (size_t)(fs->n + 1)) : NULL;
        if ((changed && !set_shape_input(c, ni, j, ents, ne, &e)) || (formula && !nf)) {
            *oom = true;
            return false;
        }
        if (formula) {
            f.value = c->nodes[ni].inputs[j];
            fs->f = nf;
            fs->f[fs->n++] = f;
        }
        n = &c->nodes[ni];
    }
    ts_dtype dt[64];
    ts_shape sh[64];
    ts_error e = {0};
    if (n->noutputs > 64) return WHY("node '%s' (%s) has too many outputs", n->name, n->op->name);
    if (ts_node_infer(c, ni, dt, sh, &e)) {
        *oom = e.code == TS_ERR_NOMEM;
        return WHY("at other sizes of %s, %s", syms, e.msg);
    }
    for (int k = 0; k < n->noutputs; k++) c->values[n->outputs[k]].shape = sh[k];
    /* the rewritten Reshape gives what the model's own shape arithmetic
     * gave at the probe sizes */
    const ts_shape *in_p = &c->values[n->inputs[0]].shape;
    for (int k = 0; expect && k < nexpect; k++) {
        int64_t want = expect[k] == 0 && !allowzero(n) && k < in_p->rank ? in_p->dims[k] : expect[k];
        if (want >= 0 && (k >= sh[0].rank || sh[0].dims[k] != want))
            return WHY("node '%s' (%s): its shape cannot follow the sizes of %s", n->name, n->op->name, syms);
    }
    return true;
}

/* A copy of g to write with symbolic dimensions: every node is re-inferred
 * at the probe sizes import tried (ts_model_meta), shape inputs that froze
 * the bound sizes are rewritten (patch_shape), and the outputs must come
 * out at the sizes the original model gave there.  Checked on the graph as
 * it is now, so rewrites the optimizer made are checked too.  *out NULL and
 * why set when g cannot be written symbolic; fails only when out of
 * memory. */
static ts_status symbolic_copy(const ts_graph *g, ts_graph **out, shape_formulas *fs, char *why, size_t nwhy,
                               ts_error *err)
{
    const ts_model_meta *m = g->meta;
    *out = NULL;
    if (!m) return why_status(why, nwhy, "the graph was not loaded from an ONNX file");
    if (!m->nsyms) return why_status(why, nwhy, "the model has no symbolic dimensions");
    if (m->why_static[0]) return why_status(why, nwhy, "%s", m->why_static);
    if (g->ninputs != m->ninputs || g->noutputs != m->noutputs)
        return why_status(why, nwhy, "the graph's inputs or outputs are not the model's");
    for (int k = 0; k < g->ninputs + g->noutputs; k++) {
        bool in = k < g->ninputs;
        const ts_meta_io *io = in ? &m->inputs[k] : &m->outputs[k - g->ninputs];
        const ts_value *val = &g->values[in ? g->inputs[k] : g->outputs[k - g->ninputs]];
        const char *what = in ? "input" : "output";
        char a[160], b[160];
        if (strcmp(val->name, io->name))
            return why_status(why, nwhy, "graph %s %d is '%s', the model's was '%s'", what, in ? k : k - g->ninputs,
                              val->name, io->name);
        if (!ts_shape_eq(&val->shape, &io->bound))
            return why_status(why, nwhy, "graph %s '%s' is %s, the model's was %s", what, val->name,
                              ts_shape_str(&val->shape, a, sizeof a), ts_shape_str(&io->bound, b, sizeof b));
    }
    char syms[200];
    ts_model_meta_syms_str(m, syms, sizeof syms);
    ts_graph *c = ts_graph_copy(g);
    int *order = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    int cnt = 0;
    bool ok = c && order, oom = !ok;
    if (ok && ts_graph_topo_order(c, order, &cnt, err)) {
        ts_graph_free(c);
        free(order);
        return err->code;
    }
    for (int k = 0; ok && k < c->ninputs; k++) c->values[c->inputs[k]].shape = m->inputs[k].probe;
    for (int k = 0; ok && k < cnt; k++) ok = probe_node(g, c, order[k], fs, syms, why, nwhy, &oom);
    for (int k = 0; ok && k < c->noutputs; k++) {
        const ts_value *val = &c->values[c->outputs[k]];
        if (!ts_shape_eq(&val->shape, &m->outputs[k].probe)) {
            char a[160], b[160];
            ok = WHY("at other sizes of %s, output '%s' would be %s where the model gives %s", syms, val->name,
                     ts_shape_str(&val->shape, a, sizeof a), ts_shape_str(&m->outputs[k].probe, b, sizeof b));
        }
    }
    free(order);
    if (!ok) {
        fs->n = 0;
        ts_graph_free(c);
        return oom ? ts_error_set(err, TS_ERR_NOMEM, "out of memory writing ONNX model") : TS_OK;
    }
    /* back to the bound sizes: what the exporter writes where a dimension
     * is not symbolic */
    for (int v = 0; v < c->nvalues; v++)
        c->values[v].shape = v < g->nvalues ? g->values[v].shape : c->values[v].constant->shape;
    *out = c;
    return TS_OK;
}

#undef WHY

bool ts_onnx_keeps_symbolic(const ts_graph *g, char *why, size_t n)
{
    ts_error err = {0};
    char buf[sizeof err.msg];
    ts_graph *c = NULL;
    shape_formulas fs = {0};
    if (symbolic_copy(g, &c, &fs, buf, sizeof buf, &err)) snprintf(buf, sizeof buf, "%s", err.msg);
    free(fs.f);
    bool keeps = c != NULL;
    if (why && n) snprintf(why, n, "%s", keeps ? "" : buf);
    ts_graph_free(c);
    return keeps;
}

ts_status ts_onnx_save_with(const ts_graph *g, const char *path, const ts_onnx_save_opts *o, ts_error *err)
{
    shape_formulas fs = {0}; /* filled by symbolic_copy */
    ts_graph *sym = NULL;
    if (!(o && o->static_dims) && g->meta && g->meta->nsyms) {
        char why[sizeof err->msg];
        if (symbolic_copy(g, &sym, &fs, why, sizeof why, err)) {
            free(fs.f);
            return err->code;
        }
        if (!sym && o && o->require_symbolic)
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "cannot write '%s' with symbolic dimensions: %s", path, why);
    }
    exporter ex = {.g = sym ? sym : g, .fs = &fs, .meta = g->meta, .symbolic = sym != NULL, .err = err};
    Onnx__ModelProto mp;
    Onnx__GraphProto gp;
    Onnx__OperatorSetIdProto os;
    ts_status st = build_model(&ex, &mp, &gp, &os);
    uint8_t *buf = NULL;
    char *data_path = NULL;
    if (!st) {
        size_t len = protobuf_c_message_get_packed_size(&mp.base);
        /* protobuf messages are limited to 2 GiB: larger models go to
         * external data whether asked or not (external_data.c) */
        if ((o && o->external_data) || len > PROTOBUF_LIMIT) {
            st = ts_onnx_external_write(&gp, path, arena_alloc1, &ex.ar, &data_path, err);
            if (!st) len = protobuf_c_message_get_packed_size(&mp.base);
        }
        if (st)
            ;
        else if (len > PROTOBUF_LIMIT)
            st = ts_error_set(err, TS_ERR_UNSUPPORTED,
                              "cannot write '%s': model is %zu bytes without its external data, over the 2 GiB ONNX "
                              "limit",
                              path, len);
        else if (!(buf = malloc(len ? len : 1)))
            st = oom(&ex);
        else {
            size_t packed = protobuf_c_message_pack(&mp.base, buf);
            st = write_file(path, buf, packed, err);
        }
        if (st && data_path) unlink(data_path); /* written together or not at all */
    }
    free(data_path);
    free(buf);
    for (int f = 0; f < ex.nfn; f++) ts_graph_free(ex.fn_body[f]);
    arena_free(&ex.ar);
    ts_graph_free(sym);
    free(fs.f);
    return st;
}

ts_status ts_onnx_save(const ts_graph *g, const char *path, ts_error *err)
{
    return ts_onnx_save_with(g, path, NULL, err);
}
