/* Opaque nodes (opaque.h): the descriptor, the record table, messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir/ir.h"
#include "ir/meta.h"
#include "ops/control_flow.h"
#include "ops/opaque.h"

const char *ts_opaque_what(const ts_node *n, char *buf, size_t size)
{
    const ts_opaque_attrs *a = n->attrs;
    if (!ts_node_is_opaque(n)) /* a control-flow node holding one */
        snprintf(buf, size, "%s holding an opaque node", n->op->name);
    else if (a->domain[0])
        snprintf(buf, size, "%s::%s", a->domain, a->op_type);
    else
        snprintf(buf, size, "%s", a->op_type);
    return buf;
}

/* Outputs are what the file declared, valid at the input shapes the model
 * was loaded with.  At other shapes (export's symbolic probe) the
 * dimensions the file declared symbolic follow the graph input dimension
 * of the same dim_param; an output with no such dimension cannot follow,
 * and saying so keeps the graph from being written as if it did. */
static ts_status opaque_infer(ts_infer_ctx *c)
{
    const ts_opaque_attrs *a = c->attrs;
    char what[2 * TS_OPAQUE_NAME_MAX + 4];
    ts_opaque_what(c->node, what, sizeof what);
    if (c->nin != a->nin || c->nout != a->nout)
        return ts_error_set(c->err, TS_ERR_INVALID, "node '%s' (%s): opaque node rewired (%d inputs, %d outputs)",
                            c->node->name, what, c->nin, c->nout);
    int moved = -1;
    for (int i = 0; i < c->nin && moved < 0; i++)
        if (c->in[i] && !ts_shape_eq(&c->in[i]->shape, &a->in_shape[i])) moved = i;
    const ts_graph *g = c->graph;
    for (int o = 0; o < c->nout; o++) {
        c->out_dtype[o] = a->out_dtype[o];
        c->out_shape[o] = a->out_shape[o];
        if (moved < 0) continue;
        int follows = 0;
        for (int d = 0; d < a->out_shape[o].rank; d++) {
            int k = a->follow_in[o][d], ax = a->follow_axis[o][d];
            if (k < 0 || k >= g->ninputs || ax >= g->values[g->inputs[k]].shape.rank) continue;
            c->out_shape[o].dims[d] = g->values[g->inputs[k]].shape.dims[ax];
            follows++;
        }
        if (!follows && a->out_shape[o].rank > 0) {
            char x[160], y[160];
            return ts_error_set(c->err, TS_ERR_UNSUPPORTED,
                                "node '%s' (%s): tsopt knows this opaque node's output shapes only for input %d of "
                                "shape %s, not %s (the model declares its output %d without symbolic dimensions)",
                                c->node->name, what, moved, ts_shape_str(&a->in_shape[moved], x, sizeof x),
                                ts_shape_str(&c->in[moved]->shape, y, sizeof y), o);
        }
    }
    return TS_OK;
}

static ts_status opaque_kernel(ts_kernel_ctx *k)
{
    char what[2 * TS_OPAQUE_NAME_MAX + 4];
    return ts_error_set(k->err, TS_ERR_UNSUPPORTED, "node '%s' (%s): tsopt cannot execute this operator (%s)",
                        k->node->name, ts_opaque_what(k->node, what, sizeof what),
                        ((const ts_opaque_attrs *)k->attrs)->domain[0] ? "custom domain" : "unknown operator");
}

static double opaque_flops(const ts_node *n, const ts_graph *g)
{
    (void)n;
    (void)g;
    return 0; /* unknown: it costs the same before and after any rewrite */
}

/* TS_OP_RANDOM: two opaque nodes are never merged (CSE), whatever they
 * read -- a custom op may have state or side effects. */
const ts_op_desc ts_op_opaque = {
    .name = "tsopt.Opaque",
    .attr_size = sizeof(ts_opaque_attrs),
    .min_inputs = 0,
    .max_inputs = TS_OPAQUE_MAX_IO,
    .min_outputs = 1,
    .max_outputs = TS_OPAQUE_MAX_IO,
    .flags = TS_OP_OPAQUE | TS_OP_RANDOM,
    .infer = opaque_infer,
    .kernel = opaque_kernel,
    .flops = opaque_flops,
};

int ts_opaque_add(ts_graph *g, const char *name, const ts_opaque_attrs *a, const int *inputs,
                  const char *const *out_names, ts_error *err)
{
    return ts_graph_add_node_parsed(g, &ts_op_opaque, name, inputs, a->nin, a, a->nout, out_names, NULL, err);
}

int ts_opaque_table_add(ts_opaque_table *t, uint8_t *node_proto, size_t len)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 8;
        ts_opaque_rec *r = realloc(t->recs, sizeof *r * (size_t)cap);
        if (!r) {
            free(node_proto);
            return -1;
        }
        t->recs = r;
        t->cap = cap;
    }
    t->recs[t->n] = (ts_opaque_rec){node_proto, len};
    return t->n++;
}

void ts_opaque_table_free(ts_opaque_table *t)
{
    if (!t) return;
    for (int i = 0; i < t->n; i++) free(t->recs[i].node_proto);
    free(t->recs);
    free(t);
}

const ts_opaque_rec *ts_opaque_rec_of(const ts_graph *g, const ts_node *n)
{
    const ts_opaque_attrs *a = n->attrs;
    const ts_opaque_table *t = g->meta ? g->meta->opaque : NULL;
    return t && a->id >= 0 && a->id < t->n ? &t->recs[a->id] : NULL;
}

bool ts_node_holds_opaque(const ts_node *n)
{
    if (ts_node_is_opaque(n)) return true;
    ts_body *b[TS_CF_MAX_BODIES];
    int nb = ts_cf_bodies(n, b);
    for (int j = 0; j < nb; j++)
        if (ts_graph_first_opaque(b[j]->g) >= 0) return true;
    return false;
}

int ts_graph_first_opaque(const ts_graph *g)
{
    for (int i = 0; i < g->nnodes; i++)
        if (!g->nodes[i].dead && ts_node_holds_opaque(&g->nodes[i])) return i;
    return -1;
}

ts_status ts_graph_check_runnable(const ts_graph *g, ts_error *err)
{
    int i = ts_graph_first_opaque(g);
    if (i < 0) return TS_OK;
    if (!ts_node_is_opaque(&g->nodes[i])) { /* the opaque node is inside a body: named there */
        const ts_node *n = &g->nodes[i];
        ts_body *b[TS_CF_MAX_BODIES];
        int nb = ts_cf_bodies(n, b);
        for (int j = 0; j < nb; j++)
            if (ts_graph_check_runnable(b[j]->g, err))
                return ts_error_prefix(err, "node '%s' (%s): attribute '%s'", n->name, n->op->name,
                                       ts_cf_body_attr_name(n->op, j));
    }
    const ts_node *n = &g->nodes[i];
    const ts_opaque_attrs *a = n->attrs;
    char what[2 * TS_OPAQUE_NAME_MAX + 4];
    ts_opaque_what(n, what, sizeof what);
    if (a->domain[0])
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "node '%s' (%s): tsopt cannot execute operators of domain '%s' (optimize keeps the node "
                            "as it is)",
                            n->name, what, a->domain);
    return ts_error_set(err, TS_ERR_UNSUPPORTED,
                        "node '%s': operator '%s' (opset %d) is not supported: tsopt cannot execute it (optimize "
                        "keeps the node as it is)",
                        n->name, a->op_type, g->opset);
}
