/* Control-flow bodies: ownership and capture bookkeeping (subgraph.h). */
#include <stdlib.h>
#include <string.h>
#include "ir/ir.h"
#include "ir/subgraph.h"
#include "ops/control_flow.h"

ts_body *ts_body_new(ts_graph *g, int nformal, ts_error *err)
{
    ts_body *b = calloc(1, sizeof *b);
    if (!b) {
        ts_graph_free(g);
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    b->refcount = 1;
    b->g = g;
    b->nformal = nformal;
    return b;
}

ts_body *ts_body_ref(ts_body *b)
{
    if (b) b->refcount++;
    return b;
}

void ts_body_unref(ts_body *b)
{
    if (!b || --b->refcount > 0) return;
    ts_graph_free(b->g);
    for (int j = 0; j < b->ncap; j++) free(b->cap_name[j]);
    free(b->cap_name);
    free(b->cap_slot);
    free(b->decl_dtype);
    free(b->decl_shape);
    free(b);
}

ts_status ts_body_add_capture(ts_body *b, const char *name, int slot, ts_error *err)
{
    char **n = realloc(b->cap_name, sizeof *n * (size_t)(b->ncap + 1));
    if (n) b->cap_name = n;
    int *s = realloc(b->cap_slot, sizeof *s * (size_t)(b->ncap + 1));
    if (s) b->cap_slot = s;
    char *d = ts_strdup(name);
    if (!n || !s || !d) {
        free(d);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    b->cap_name[b->ncap] = d;
    b->cap_slot[b->ncap++] = slot;
    return TS_OK;
}

ts_status ts_body_set_declared(ts_body *b, int nout, const ts_dtype *dt, const ts_shape *sh, ts_error *err)
{
    ts_dtype *d = malloc(sizeof *d * (size_t)(nout + 1));
    ts_shape *s = malloc(sizeof *s * (size_t)(nout + 1));
    if (!d || !s) {
        free(d);
        free(s);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    memcpy(d, dt, sizeof *d * (size_t)nout);
    memcpy(s, sh, sizeof *s * (size_t)nout);
    free(b->decl_dtype);
    free(b->decl_shape);
    b->decl_dtype = d;
    b->decl_shape = s;
    b->ndecl = nout;
    return TS_OK;
}

ts_body *ts_body_with_graph(const ts_body *b, ts_graph *g, ts_error *err)
{
    /* a capture the rewrite no longer reads stays listed: its node input
     * slot keeps the node's explicit inputs where they are */
    ts_body *c = ts_body_new(g, b->nformal, err);
    if (!c) return NULL;
    for (int j = 0; j < b->ncap; j++)
        if (ts_body_add_capture(c, b->cap_name[j], b->cap_slot[j], err)) goto fail;
    if (b->ndecl && ts_body_set_declared(c, b->ndecl, b->decl_dtype, b->decl_shape, err)) goto fail;
    return c;
fail:
    ts_body_unref(c);
    return NULL;
}

int ts_body_capture_index(const ts_body *b, const char *name)
{
    for (int j = 0; j < b->ncap; j++)
        if (!strcmp(b->cap_name[j], name)) return j;
    return -1;
}

int ts_body_input_slot(const ts_body *b, int i)
{
    if (i < b->nformal || i >= b->g->ninputs) return -1;
    int j = ts_body_capture_index(b, b->g->values[b->g->inputs[i]].name);
    return j < 0 ? -1 : b->cap_slot[j];
}

ts_status ts_body_reinfer(const ts_body *b, const ts_shape *in_sh, ts_dtype *odt, ts_shape *osh, ts_error *err)
{
    ts_graph *c = ts_graph_copy(b->g);
    int *order = malloc(sizeof(int) * ((size_t)b->g->nnodes + 1)), cnt = 0;
    ts_dtype *dt = NULL;
    ts_shape *sh = NULL;
    ts_status st = c && order ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!st) {
        for (int i = 0; i < c->ninputs; i++) c->values[c->inputs[i]].shape = in_sh[i];
        st = ts_graph_topo_order(c, order, &cnt, err);
    }
    for (int k = 0; !st && k < cnt; k++) {
        const ts_node *n = &c->nodes[order[k]];
        ts_dtype *d2 = realloc(dt, sizeof *dt * (size_t)(n->noutputs + 1));
        if (d2) dt = d2;
        ts_shape *s2 = realloc(sh, sizeof *sh * (size_t)(n->noutputs + 1));
        if (s2) sh = s2;
        if (!d2 || !s2) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            break;
        }
        if ((st = ts_node_infer(c, order[k], dt, sh, err))) break;
        for (int o = 0; o < n->noutputs; o++) {
            c->values[n->outputs[o]].dtype = dt[o];
            c->values[n->outputs[o]].shape = sh[o];
        }
    }
    for (int o = 0; !st && o < c->noutputs; o++) {
        odt[o] = c->values[c->outputs[o]].dtype;
        osh[o] = c->values[c->outputs[o]].shape;
    }
    free(order);
    free(dt);
    free(sh);
    ts_graph_free(c);
    return st;
}

int ts_body_count_nodes(const ts_body *b)
{
    int n = 0;
    for (int i = 0; i < b->g->nnodes; i++) {
        const ts_node *nd = &b->g->nodes[i];
        if (nd->dead) continue;
        n++;
        ts_body *sub[TS_CF_MAX_BODIES];
        int ns = ts_cf_bodies(nd, sub);
        for (int k = 0; k < ns; k++) n += ts_body_count_nodes(sub[k]);
    }
    return n;
}
