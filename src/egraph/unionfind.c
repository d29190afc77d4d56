/* Union-find over e-class ids: a flat parent array, ids handed out in
 * order; find halves paths; linking is by the caller's choice of root (the
 * e-graph keeps the class with more parents as the root, so fewer parents
 * need re-hashing).  Also the id vectors the e-graph is made of. */
#include <stdlib.h>
#include "egraph/egraph_impl.h"
#include "util/union_find.h"

bool ts_idvec_push(ts_idvec *a, int32_t x)
{
    if (a->n == a->cap) {
        int nc = a->cap ? a->cap * 2 : 4;
        int32_t *p = realloc(a->v, sizeof *p * (size_t)nc);
        if (!p) return false;
        a->v = p;
        a->cap = nc;
    }
    a->v[a->n++] = x;
    return true;
}

void ts_idvec_free(ts_idvec *a)
{
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

int32_t ts_uf_make(ts_uf *u)
{
    if (u->n == u->cap) {
        int nc = u->cap ? u->cap * 2 : 64;
        int32_t *p = realloc(u->parent, sizeof *p * (size_t)nc);
        if (!p) return -1;
        u->parent = p;
        u->cap = nc;
    }
    u->parent[u->n] = u->n;
    return u->n++;
}

int32_t ts_uf_find(ts_uf *u, int32_t x) { return ts_uf_root(u->parent, x); }

int32_t ts_uf_find_const(const ts_uf *u, int32_t x) { return ts_uf_root_const(u->parent, x); }

void ts_uf_link(ts_uf *u, int32_t child_root, int32_t root)
{
    u->parent[child_root] = root;
}

void ts_uf_free(ts_uf *u)
{
    free(u->parent);
    u->parent = NULL;
    u->n = u->cap = 0;
}
