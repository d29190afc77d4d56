/* Graph construction, copying and compaction. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir/ir.h"
#include "ir/meta.h"
#include "ir/name_map.h"

char *ts_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

ts_graph *ts_graph_new(const char *name, int opset)
{
    ts_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->name = ts_strdup(name ? name : "graph");
    g->opset = opset > 0 ? opset : 17;
    return g;
}

static void node_clear(ts_node *n)
{
    if (n->attrs && n->op && n->op->attrs_release) n->op->attrs_release(n->attrs);
    free(n->name);
    free(n->inputs);
    free(n->outputs);
    free(n->attrs);
}

void ts_graph_free(ts_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->nvalues; i++) {
        free(g->values[i].name);
        ts_tensor_unref(g->values[i].constant);
    }
    for (int i = 0; i < g->nnodes; i++) node_clear(&g->nodes[i]);
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->name);
    ts_model_meta_unref(g->meta);
    ts_graph_index_names(g, false);
    free(g);
}

static void *dup_mem(const void *p, size_t n)
{
    if (!p || !n) return NULL;
    void *d = malloc(n);
    if (d) memcpy(d, p, n);
    return d;
}

ts_graph *ts_graph_copy(const ts_graph *g)
{
    ts_graph *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = *g;
    c->index = NULL; /* a copy is not being built */
    c->name = ts_strdup(g->name);
    c->values = calloc((size_t)(g->cap_values ? g->cap_values : 1), sizeof *c->values);
    c->nodes = calloc((size_t)(g->cap_nodes ? g->cap_nodes : 1), sizeof *c->nodes);
    c->inputs = dup_mem(g->inputs, sizeof(int) * (size_t)g->ninputs);
    c->outputs = dup_mem(g->outputs, sizeof(int) * (size_t)g->noutputs);
    if (!c->values || !c->nodes) {
        free(c->values);
        free(c->nodes);
        free(c->name);
        free(c->inputs);
        free(c->outputs);
        free(c);
        return NULL;
    }
    for (int i = 0; i < g->nvalues; i++) {
        c->values[i] = g->values[i];
        c->values[i].name = ts_strdup(g->values[i].name);
        ts_tensor_ref(c->values[i].constant);
    }
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *s = &g->nodes[i];
        ts_node *d = &c->nodes[i];
        *d = *s;
        d->name = ts_strdup(s->name);
        d->inputs = dup_mem(s->inputs, sizeof(int) * (size_t)s->ninputs);
        d->outputs = dup_mem(s->outputs, sizeof(int) * (size_t)s->noutputs);
        d->attrs = dup_mem(s->attrs, s->op->attr_size);
        if (d->attrs && s->op->attrs_retain) s->op->attrs_retain(d->attrs); /* bodies are shared by copies */
    }
    ts_model_meta_ref(c->meta);
    return c;
}

bool ts_graph_index_names(ts_graph *g, bool on)
{
    if (g->index) ts_name_map_free(g->index);
    free(g->index);
    g->index = NULL;
    if (!on) return true;
    ts_name_map *m = calloc(1, sizeof *m);
    for (int i = 0; m && i < g->nvalues; i++)
        if (!ts_name_map_put(m, g->values[i].name, i)) {
            ts_name_map_free(m);
            free(m);
            m = NULL;
        }
    g->index = m;
    return m != NULL;
}

int ts_graph_find_value(const ts_graph *g, const char *name)
{
    int v;
    if (g->index) return ts_name_map_find(g->index, name, &v) ? v : -1;
    for (int i = 0; i < g->nvalues; i++)
        if (!strcmp(g->values[i].name, name)) return i;
    return -1;
}

bool ts_graph_is_output(const ts_graph *g, int v)
{
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == v) return true;
    return false;
}

static bool grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return true;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return false;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *arr = p;
    *cap = nc;
    return true;
}

static int new_value(ts_graph *g, const char *name, ts_dtype dtype, const ts_shape *shape, ts_error *err)
{
    if (ts_graph_find_value(g, name) >= 0) {
        ts_error_set(err, TS_ERR_INVALID, "tensor name '%s' is defined twice", name);
        return -1;
    }
    if (!grow((void **)&g->values, &g->cap_values, g->nvalues + 1, sizeof *g->values)) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory adding tensor '%s'", name);
        return -1;
    }
    ts_value *v = &g->values[g->nvalues];
    memset(v, 0, sizeof *v);
    v->name = ts_strdup(name);
    v->dtype = dtype;
    v->shape = *shape;
    v->producer = -1;
    if (g->index && (!v->name || !ts_name_map_put(g->index, v->name, g->nvalues)))
        ts_graph_index_names(g, false); /* out of memory: searched from now on */
    return g->nvalues++;
}

static ts_status check_shape(const char *what, const char *name, const ts_shape *s, ts_error *err)
{
    if (s->rank < 0 || s->rank > TS_MAX_RANK)
        return ts_error_set(err, TS_ERR_INVALID, "%s '%s' has rank %d (at most %d supported)", what, name, s->rank,
                            TS_MAX_RANK);
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dims[i] < 0)
            return ts_error_set(err, TS_ERR_INVALID, "%s '%s' has negative dimension %lld at axis %d", what, name,
                                (long long)s->dims[i], i);
        if (s->dims[i] && n > TS_MAX_ELEMENTS / s->dims[i])
            return ts_error_set(err, TS_ERR_INVALID, "%s '%s' is too large (dimension %lld at axis %d)", what, name,
                                (long long)s->dims[i], i);
        n *= s->dims[i];
    }
    return TS_OK;
}

int ts_graph_add_input(ts_graph *g, const char *name, ts_dtype dtype, const ts_shape *shape, ts_error *err)
{
    if (check_shape("input", name, shape, err)) return -1;
    int v = new_value(g, name, dtype, shape, err);
    if (v < 0) return -1;
    int *p = realloc(g->inputs, sizeof(int) * (size_t)(g->ninputs + 1));
    if (!p) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return -1;
    }
    g->inputs = p;
    g->inputs[g->ninputs++] = v;
    return v;
}

int ts_graph_add_constant(ts_graph *g, const char *name, ts_tensor *t, ts_error *err)
{
    int v = new_value(g, name, t->dtype, &t->shape, err);
    if (v >= 0) g->values[v].constant = ts_tensor_ref(t);
    return v;
}

ts_status ts_graph_add_output(ts_graph *g, int value, ts_error *err)
{
    if (value < 0 || value >= g->nvalues) return ts_error_set(err, TS_ERR_INVALID, "output value %d does not exist", value);
    int *p = realloc(g->outputs, sizeof(int) * (size_t)(g->noutputs + 1));
    if (!p) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    g->outputs = p;
    g->outputs[g->noutputs++] = value;
    return TS_OK;
}

static void unique_name(const ts_graph *g, const char *base, char *out, size_t n)
{
    snprintf(out, n, "%s", base);
    for (int k = 1; ts_graph_find_value(g, out) >= 0; k++) snprintf(out, n, "%s_%d", base, k);
}

static int add_node(ts_graph *g, const ts_op_desc *op, const char *name, const int *inputs, int ninputs,
                    const ts_attr *attrs, int nattrs, const void *parsed, int nout, const char *const *out_names,
                    int *outputs, ts_error *err);

int ts_graph_add_node(ts_graph *g, const char *opname, const char *name, const int *inputs, int ninputs,
                      const ts_attr *attrs, int nattrs, int nout, const char *const *out_names, int *outputs,
                      ts_error *err)
{
    char autoname[256];
    if (!name || !*name) {
        snprintf(autoname, sizeof autoname, "%s_%d", opname, g->nnodes);
        name = autoname;
    }
    const ts_op_desc *op = ts_op_find(opname);
    if (!op) {
        ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s': operator '%s' is not supported", name, opname);
        return -1;
    }
    return add_node(g, op, name, inputs, ninputs, attrs, nattrs, NULL, nout, out_names, outputs, err);
}

int ts_graph_add_node_parsed(ts_graph *g, const ts_op_desc *op, const char *name, const int *inputs, int ninputs,
                             const void *attrs, int nout, const char *const *out_names, int *outputs, ts_error *err)
{
    return add_node(g, op, name, inputs, ninputs, NULL, 0, attrs, nout, out_names, outputs, err);
}

/* parsed: the attribute struct itself (copied), else attrs are parsed. */
static int add_node(ts_graph *g, const ts_op_desc *op, const char *name, const int *inputs, int ninputs,
                    const ts_attr *attrs, int nattrs, const void *parsed, int nout, const char *const *out_names,
                    int *outputs, ts_error *err)
{
    const char *opname = op->name;
    if (ninputs < op->min_inputs || (op->max_inputs >= 0 && ninputs > op->max_inputs)) {
        ts_error_set(err, TS_ERR_INVALID, "node '%s' (%s): has %d inputs, expected %d to %d", name, opname, ninputs,
                     op->min_inputs, op->max_inputs);
        return -1;
    }
    if (nout < op->min_outputs || (op->max_outputs >= 0 && nout > op->max_outputs)) {
        ts_error_set(err, TS_ERR_INVALID, "node '%s' (%s): has %d outputs, expected %d to %d", name, opname, nout,
                     op->min_outputs, op->max_outputs);
        return -1;
    }
    for (int i = 0; i < ninputs; i++)
        if (inputs[i] < -1 || inputs[i] >= g->nvalues || (inputs[i] == -1 && i < op->min_inputs)) {
            ts_error_set(err, TS_ERR_INVALID, "node '%s' (%s): %s input %d refers to no tensor", name, opname,
                         i < op->min_inputs ? "required" : "optional", i);
            return -1;
        }
    if (!grow((void **)&g->nodes, &g->cap_nodes, g->nnodes + 1, sizeof *g->nodes)) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory adding node '%s'", name);
        return -1;
    }
    ts_node nd = {.op = op, .ninputs = ninputs, .noutputs = nout};
    nd.name = ts_strdup(name);
    nd.inputs = calloc((size_t)(ninputs ? ninputs : 1), sizeof(int));
    nd.outputs = calloc((size_t)(nout ? nout : 1), sizeof(int));
    nd.attrs = calloc(1, op->attr_size ? op->attr_size : 1);
    ts_dtype *dt = calloc((size_t)(nout ? nout : 1), sizeof *dt);
    ts_shape *sh = calloc((size_t)(nout ? nout : 1), sizeof *sh);
    const ts_value **in = calloc((size_t)(ninputs ? ninputs : 1), sizeof *in);
    int idx = -1;
    if (!nd.name || !nd.inputs || !nd.outputs || !nd.attrs || !dt || !sh || !in) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory adding node '%s'", name);
        goto out;
    }
    memcpy(nd.inputs, inputs, sizeof(int) * (size_t)ninputs);
    if (parsed)
        memcpy(nd.attrs, parsed, op->attr_size);
    else if (op->parse && op->parse(nd.attrs, attrs, nattrs, g->opset, err)) {
        ts_error_prefix(err, "node '%s' (%s)", name, opname);
        goto out;
    }
    for (int i = 0; i < ninputs; i++) in[i] = inputs[i] >= 0 ? &g->values[inputs[i]] : NULL;
    ts_infer_ctx c = {.graph = g, .node = &nd, .attrs = nd.attrs, .opset = g->opset, .nin = ninputs, .in = in,
                      .nout = nout, .out_dtype = dt, .out_shape = sh, .err = err};
    if (op->infer(&c)) goto out;
    for (int o = 0; o < nout; o++) {
        char oname[300];
        if (check_shape("output", name, &sh[o], err)) {
            ts_error_prefix(err, "node '%s' (%s)", name, opname);
            goto out;
        }
        if (out_names && out_names[o] && *out_names[o])
            snprintf(oname, sizeof oname, "%s", out_names[o]);
        else {
            char base[280];
            snprintf(base, sizeof base, nout > 1 ? "%s_out%d" : "%s_out", name, o);
            unique_name(g, base, oname, sizeof oname);
        }
        int v = new_value(g, oname, dt[o], &sh[o], err);
        if (v < 0) {
            /* values already made for earlier outputs stay, unused; compaction drops them */
            ts_error_prefix(err, "node '%s' (%s)", name, opname);
            goto out;
        }
        g->values[v].producer = g->nnodes;
        g->values[v].producer_slot = o;
        nd.outputs[o] = v;
        if (outputs) outputs[o] = v;
    }
    g->nodes[g->nnodes] = nd;
    idx = g->nnodes++;
    memset(&nd, 0, sizeof nd);
out:
    if (idx < 0) node_clear(&nd);
    free(dt);
    free(sh);
    free(in);
    return idx;
}

int ts_value_uses(const ts_graph *g, int v)
{
    int uses = 0;
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].dead) continue;
        for (int j = 0; j < g->nodes[i].ninputs; j++) uses += g->nodes[i].inputs[j] == v;
    }
    for (int i = 0; i < g->noutputs; i++) uses += g->outputs[i] == v;
    return uses;
}

void ts_graph_compact(ts_graph *g)
{
    /* Values are kept when used, produced by a live node, or a graph input. */
    char *keep = calloc((size_t)g->nvalues + 1, 1);
    int *remap = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    int *nremap = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    if (!keep || !remap || !nremap) goto out; /* compaction is an optimization: skip it */
    for (int i = 0; i < g->ninputs; i++) keep[g->inputs[i]] = 1;
    for (int i = 0; i < g->noutputs; i++) keep[g->outputs[i]] = 1;
    for (int i = 0; i < g->nnodes; i++) {
        ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0) keep[n->inputs[j]] = 1;
        for (int j = 0; j < n->noutputs; j++) keep[n->outputs[j]] = 1;
    }
    int nn = 0;
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].dead) {
            node_clear(&g->nodes[i]);
            nremap[i] = -1;
        } else {
            nremap[i] = nn;
            g->nodes[nn++] = g->nodes[i];
        }
    }
    g->nnodes = nn;
    int nv = 0;
    for (int i = 0; i < g->nvalues; i++) {
        if (!keep[i]) {
            free(g->values[i].name);
            ts_tensor_unref(g->values[i].constant);
            remap[i] = -1;
            continue;
        }
        remap[i] = nv;
        g->values[nv] = g->values[i];
        if (g->values[nv].producer >= 0) g->values[nv].producer = nremap[g->values[nv].producer];
        nv++;
    }
    g->nvalues = nv;
    for (int i = 0; i < g->nnodes; i++) {
        ts_node *n = &g->nodes[i];
        for (int j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0) n->inputs[j] = remap[n->inputs[j]];
        for (int j = 0; j < n->noutputs; j++) n->outputs[j] = remap[n->outputs[j]];
    }
    for (int i = 0; i < g->ninputs; i++) g->inputs[i] = remap[g->inputs[i]];
    for (int i = 0; i < g->noutputs; i++) g->outputs[i] = remap[g->outputs[i]];
    if (g->index) ts_graph_index_names(g, true); /* the ids moved */
out:
    free(keep);
    free(remap);
    free(nremap);
}
