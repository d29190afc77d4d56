/* Opaque nodes on the ONNX side (src/ops/opaque.h): which file nodes are
 * kept as they are, where their outputs' types and shapes come from, and
 * how they are written back.  Used by import.c and export.c only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir/ir.h"
#include "onnx/proto.h"
#include "onnx/sequence.h"
#include "ops/opaque.h"

static bool default_domain(const char *d) { return !d || !*d || !strcmp(d, "ai.onnx"); }

bool ts_onnx_node_is_opaque(const Onnx__NodeProto *n)
{
    const char *op = n->op_type ? n->op_type : "";
    if (!default_domain(n->domain)) return true;
    /* control flow has its own handling in the importer */
    if (!strcmp(op, "Constant") || !strcmp(op, "If") || !strcmp(op, "Loop") || !strcmp(op, "Scan")) return false;
    if (ts_onnx_seq_is_op(n)) return false; /* resolved at import (onnx/sequence.h) */
    return !ts_op_find(op);
}

static const Onnx__ValueInfoProto *find_vi(const Onnx__GraphProto *gp, const char *name)
{
    for (size_t i = 0; i < gp->n_output; i++)
        if (gp->output[i]->name && !strcmp(gp->output[i]->name, name)) return gp->output[i];
    for (size_t i = 0; i < gp->n_value_info; i++)
        if (gp->value_info[i]->name && !strcmp(gp->value_info[i]->name, name)) return gp->value_info[i];
    return NULL;
}

static bool is_read(const Onnx__GraphProto *gp, const char *name)
{
    for (size_t i = 0; i < gp->n_output; i++)
        if (gp->output[i]->name && !strcmp(gp->output[i]->name, name)) return true;
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t k = 0; k < gp->node[i]->n_input; k++)
            if (gp->node[i]->input[k] && !strcmp(gp->node[i]->input[k], name)) return true;
    return false;
}

/* Inside control-flow bodies too (the body importer gets the same binds);
 * depth as the importer bounds it. */
static bool opaque_output_in(const Onnx__GraphProto *gp, const char *name, int depth)
{
    for (size_t i = 0; i < gp->n_node && depth <= 64; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (ts_onnx_node_is_opaque(n)) {
            for (size_t k = 0; k < n->n_output; k++)
                if (n->output[k] && !strcmp(n->output[k], name)) return true;
            continue;
        }
        for (size_t a = 0; a < n->n_attribute; a++) {
            const Onnx__AttributeProto *at = n->attribute[a];
            if (at->g && opaque_output_in(at->g, name, depth + 1)) return true;
            for (size_t q = 0; q < at->n_graphs; q++)
                if (at->graphs[q] && opaque_output_in(at->graphs[q], name, depth + 1)) return true;
        }
    }
    return false;
}

bool ts_onnx_opaque_output(const Onnx__GraphProto *gp, const char *name)
{
    return opaque_output_in(gp, name, 0);
}

/* Size of a symbolic dimension named p: the size bound to the graph input
 * dimension of the same dim_param (at the sizes this import binds), or -1;
 * *in, *axis: which graph input dimension that is. */
static int64_t param_size(const Onnx__GraphProto *gp, const ts_graph *g, const char *p, int *in, int *axis)
{
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        int v = vi->name ? ts_graph_find_value(g, vi->name) : -1;
        if (v < 0 || g->values[v].constant || !vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
            !vi->type->tensor_type || !vi->type->tensor_type->shape)
            continue;
        const Onnx__TensorShapeProto *sp = vi->type->tensor_type->shape;
        for (size_t d = 0; d < sp->n_dim && (int)d < g->values[v].shape.rank; d++)
            if (sp->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && sp->dim[d]->dim_param &&
                !strcmp(sp->dim[d]->dim_param, p)) {
                *in = -1;
                for (int k = 0; k < g->ninputs; k++)
                    if (g->inputs[k] == v) *in = k;
                *axis = (int)d;
                return g->values[v].shape.dims[d];
            }
    }
    return -1;
}

/* Output k's dtype and shape: the file's value_info (or graph output), its
 * symbolic dimensions sized as the inputs of the same name are, or the
 * user's --input binding of that name. */
static ts_status output_type(const Onnx__GraphProto *gp, const ts_graph *g, const char *why, const char *out,
                             const ts_input_bind *binds, int nbinds, ts_dtype *dt, ts_shape *sh, int16_t *fin,
                             int16_t *faxis, ts_error *err)
{
    for (int d = 0; d < TS_MAX_RANK; d++) fin[d] = faxis[d] = -1;
    const ts_input_bind *bind = NULL;
    for (int b = 0; b < nbinds; b++)
        if (binds[b].name && !strcmp(binds[b].name, out)) bind = &binds[b];
    const Onnx__ValueInfoProto *vi = find_vi(gp, out);
    const Onnx__TypeProto__Tensor *tt =
        vi && vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? vi->type->tensor_type : NULL;
    *dt = TS_F32;
    if (tt && tt->has_elem_type && !ts_onnx_dtype_from(tt->elem_type, dt))
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s its output '%s' is %s, which tsopt does not handle", why, out,
                            ts_onnx_dtype_name(tt->elem_type));
    if (bind) {
        *sh = bind->shape;
        return TS_OK;
    }
    if (!tt || !tt->shape) {
        if (!is_read(gp, out)) { /* nothing reads it: any shape does */
            *sh = (ts_shape){0};
            return TS_OK;
        }
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "%s the model declares no %s for its output '%s' (add it to the value_info of the graph "
                            "holding the node, a body's own for a node inside one, or give its shape with --input "
                            "%s:DIMS)",
                            why, tt ? "shape" : "type and shape", out, out);
    }
    const Onnx__TensorShapeProto *sp = tt->shape;
    if (sp->n_dim > TS_MAX_RANK)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s its output '%s' has rank %zu (at most %d supported)", why,
                            out, sp->n_dim, TS_MAX_RANK);
    sh->rank = (int)sp->n_dim;
    for (int d = 0; d < sh->rank; d++) {
        const Onnx__TensorShapeProto__Dimension *dm = sp->dim[d];
        int64_t s = -1;
        int in = -1, axis = -1;
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            s = dm->dim_value;
        else if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dm->dim_param) {
            s = param_size(gp, g, dm->dim_param, &in, &axis);
            fin[d] = (int16_t)in;
            faxis[d] = (int16_t)axis;
        }
        if (s < 0)
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "%s dimension %d of its output '%s' is not known (give its shape with --input %s:DIMS)",
                                why, d, out, out);
        sh->dims[d] = s;
    }
    return TS_OK;
}

/* The start of every message about node n: what it is, why it must be
 * kept as it is. */
static void why_opaque(const Onnx__NodeProto *n, const char *name, int opset, char *why, size_t size)
{
    if (default_domain(n->domain))
        snprintf(why, size, "node '%s': operator '%s' (opset %d) is not supported, and to keep it as it is (opaque),",
                 name, n->op_type, opset);
    else
        snprintf(why, size, "node '%s' (%s::%s): tsopt cannot compute this operator, and to keep it as it is (opaque),",
                 name, n->domain, n->op_type);
}

ts_status ts_onnx_opaque_check(const ts_graph *g, const Onnx__GraphProto *gp, const Onnx__NodeProto *n,
                               const char *name, const ts_input_bind *binds, int nbinds, ts_error *err)
{
    char why[600];
    why_opaque(n, name, g->opset, why, sizeof why);
    for (size_t o = 0; o < n->n_output; o++) {
        ts_dtype dt;
        ts_shape sh;
        int16_t fin[TS_MAX_RANK], fax[TS_MAX_RANK];
        if (n->output[o] && *n->output[o] &&
            output_type(gp, g, why, n->output[o], binds, nbinds, &dt, &sh, fin, fax, err))
            return err->code;
    }
    return TS_OK;
}

int ts_onnx_opaque_import(ts_graph *g, const Onnx__GraphProto *gp, const Onnx__NodeProto *n, const char *name,
                          const int *ins, int nin, const ts_input_bind *binds, int nbinds, ts_opaque_table **tab,
                          ts_error *err)
{
    ts_opaque_attrs a;
    memset(&a, 0, sizeof a);
    snprintf(a.op_type, sizeof a.op_type, "%s", n->op_type ? n->op_type : "");
    snprintf(a.domain, sizeof a.domain, "%s", default_domain(n->domain) ? "" : n->domain);
    char what[2 * TS_OPAQUE_NAME_MAX + 4], why[600];
    if (a.domain[0])
        snprintf(what, sizeof what, "%s::%s", a.domain, a.op_type);
    else
        snprintf(what, sizeof what, "%s", a.op_type);
    why_opaque(n, name, g->opset, why, sizeof why);
    int nout = (int)n->n_output;
    while (nout > 0 && (!n->output[nout - 1] || !*n->output[nout - 1])) nout--;
    if (nin > TS_OPAQUE_MAX_IO || nout > TS_OPAQUE_MAX_IO) {
        ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s' (%s): an opaque node has at most %d inputs and outputs", name,
                     what, TS_OPAQUE_MAX_IO);
        return -1;
    }
    if (nout == 0) {
        ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s' (%s): a node without outputs cannot be kept", name, what);
        return -1;
    }
    a.nin = nin;
    a.nout = nout;
    for (int o = 0; o < TS_OPAQUE_MAX_IO; o++)
        for (int d = 0; d < TS_MAX_RANK; d++) a.follow_in[o][d] = a.follow_axis[o][d] = -1;
    for (int i = 0; i < nin; i++)
        if (ins[i] >= 0) a.in_shape[i] = g->values[ins[i]].shape;
    for (int o = 0; o < nout; o++) {
        const char *out = n->output[o] && *n->output[o] ? n->output[o] : NULL;
        if (!out) continue; /* an absent output in the middle: nothing can read it */
        if (output_type(gp, g, why, out, binds, nbinds, &a.out_dtype[o], &a.out_shape[o], a.follow_in[o],
                        a.follow_axis[o], err))
            return -1;
    }
    if (!*tab && !(*tab = calloc(1, sizeof **tab))) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory importing ONNX model");
        return -1;
    }
    size_t len = onnx__node_proto__get_packed_size(n);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf || (a.id = ts_opaque_table_add(*tab, buf, len)) < 0) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory importing ONNX model");
        return -1;
    }
    onnx__node_proto__pack(n, buf);
    return ts_opaque_add(g, name, &a, ins, (const char *const *)n->output, err);
}

/* protobuf-c's allocator over the exporter's arena: an opaque node's
 * message is unpacked into memory freed with the rest of the model. */
typedef struct {
    void *(*alloc)(void *ctx, size_t size);
    void *ctx;
} arena_ref;

static void *pb_alloc(void *data, size_t size)
{
    arena_ref *r = data;
    return r->alloc(r->ctx, size);
}

static void pb_free(void *data, void *p)
{
    (void)data;
    (void)p; /* freed with the arena */
}

Onnx__NodeProto *ts_onnx_opaque_export(const ts_graph *g, const ts_node *n, void *(*alloc)(void *ctx, size_t size),
                                       void *ctx, ts_error *err)
{
    const ts_opaque_rec *rec = ts_opaque_rec_of(g, n);
    char what[2 * TS_OPAQUE_NAME_MAX + 4];
    if (!rec) {
        ts_error_set(err, TS_ERR_INVALID, "node '%s' (%s): the opaque node's record is missing", n->name,
                     ts_opaque_what(n, what, sizeof what));
        return NULL;
    }
    arena_ref r = {alloc, ctx};
    ProtobufCAllocator pa = {.alloc = pb_alloc, .free = pb_free, .allocator_data = &r};
    Onnx__NodeProto *np = onnx__node_proto__unpack(&pa, rec->node_len, rec->node_proto);
    char **ins = alloc(ctx, sizeof(char *) * (size_t)(n->ninputs + 1));
    char **outs = alloc(ctx, sizeof(char *) * (size_t)(n->noutputs + 1));
    if (!np || !ins || !outs) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory writing ONNX model");
        return NULL;
    }
    /* the names the graph has now: a rewrite upstream may have renamed an input */
    for (int j = 0; j < n->ninputs; j++) ins[j] = n->inputs[j] >= 0 ? g->values[n->inputs[j]].name : "";
    for (int j = 0; j < n->noutputs; j++) outs[j] = g->values[n->outputs[j]].name;
    np->name = n->name;
    np->n_input = (size_t)n->ninputs;
    np->input = ins;
    np->n_output = (size_t)n->noutputs;
    np->output = outs;
    return np;
}
