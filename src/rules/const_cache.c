/* Memo of constant concatenations (rules/apply.h): the search builds the
 * same concatenated weights for thousands of candidate graphs, and folding
 * them through the interpreter each time was 80% of its time on NasRNN
 * (perf).  Used by the applier and by the graph passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rules/apply.h"

#define CACHE_MAX 1024
#define PARTS_MAX 64
/* Results the memo may hold: the search's memory is bounded (driver.c),
 * and a memo of NasRNN's 1-8 MiB merged weights reached 1 GiB within
 * seconds; past this the oldest entries go (a graph still holding one
 * keeps its own reference). */
#define CACHE_BYTES ((size_t)192 << 20)

typedef struct centry {
    int n, axis;
    ts_tensor *part[PARTS_MAX];
    ts_tensor *out;
} centry;

struct ts_const_cache {
    int n;
    size_t bytes;
    centry *e;
};

static void drop_oldest(ts_const_cache *c)
{
    centry *e = &c->e[0];
    for (int k = 0; k < e->n; k++) ts_tensor_unref(e->part[k]);
    c->bytes -= e->out->nbytes;
    ts_tensor_unref(e->out);
    memmove(&c->e[0], &c->e[1], sizeof *c->e * (size_t)--c->n);
}

ts_const_cache *ts_const_cache_new(void) { return calloc(1, sizeof(ts_const_cache)); }

void ts_const_cache_free(ts_const_cache *c)
{
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        for (int k = 0; k < c->e[i].n; k++) ts_tensor_unref(c->e[i].part[k]);
        ts_tensor_unref(c->e[i].out);
    }
    free(c->e);
    free(c);
}

ts_tensor *ts_const_concat(ts_const_cache *c, ts_tensor *const *part, int n, int axis, ts_error *err)
{
    if (n < 1 || n > PARTS_MAX) return NULL;
    const ts_shape *s0 = &part[0]->shape;
    if (axis < 0 || axis >= s0->rank) return NULL;
    for (int i = 0; c && i < c->n; i++) {
        centry *e = &c->e[i];
        if (e->n != n || e->axis != axis) continue;
        bool same = true;
        for (int k = 0; k < n && same; k++) same = e->part[k] == part[k];
        if (same) return ts_tensor_ref(e->out);
    }
    ts_shape os = *s0;
    os.dims[axis] = 0;
    for (int k = 0; k < n; k++) {
        const ts_shape *s = &part[k]->shape;
        if (s->rank != s0->rank || part[k]->dtype != part[0]->dtype) return NULL;
        for (int d = 0; d < s->rank; d++)
            if (d != axis && s->dims[d] != s0->dims[d]) return NULL;
        os.dims[axis] += s->dims[axis];
    }
    ts_tensor *t = ts_tensor_new(part[0]->dtype, &os, err);
    if (!t) return NULL;
    /* row-major: per index of the dimensions before the axis, each part
     * contributes one contiguous block */
    size_t es = ts_dtype_size(t->dtype), inner = es;
    int64_t outer = 1;
    for (int d = 0; d < axis; d++) outer *= os.dims[d];
    for (int d = axis + 1; d < os.rank; d++) inner *= (size_t)os.dims[d];
    char *dst = t->data;
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < n; k++) {
            size_t blk = inner * (size_t)part[k]->shape.dims[axis];
            memcpy(dst, (const char *)part[k]->data + (size_t)o * blk, blk);
            dst += blk;
        }
    if (c && t->nbytes <= CACHE_BYTES / 4) {
        if (!c->e && !(c->e = calloc(CACHE_MAX, sizeof *c->e))) return t;
        while (c->n > 0 && (c->n == CACHE_MAX || c->bytes + t->nbytes > CACHE_BYTES)) drop_oldest(c);
        centry *e = &c->e[c->n++];
        e->n = n;
        e->axis = axis;
        for (int k = 0; k < n; k++) e->part[k] = ts_tensor_ref(part[k]);
        e->out = ts_tensor_ref(t);
        c->bytes += t->nbytes;
    }
    return t;
}

const char *ts_graph_fresh_name(const ts_graph *g, const char *prefix, char *buf, size_t n)
{
    for (int k = g->nnodes + g->nvalues;; k++) {
        snprintf(buf, n, "%s_%d", prefix, k);
        bool used = ts_graph_find_value(g, buf) >= 0;
        for (int i = 0; i < g->nnodes && !used; i++) used = !strcmp(g->nodes[i].name, buf);
        if (!used) return buf;
    }
}

int ts_graph_const_value(ts_graph *g, ts_tensor *t, ts_error *err)
{
    if (!t) return -1;
    /* one value per tensor: weights merged the same way at every step of an
     * unrolled RNN stay one initializer (and one packed copy at run time) */
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].constant == t) {
            ts_tensor_unref(t);
            return v;
        }
    char name[64];
    int v = ts_graph_add_constant(g, ts_graph_fresh_name(g, "taso_const", name, sizeof name), t, err);
    ts_tensor_unref(t);
    return v;
}

