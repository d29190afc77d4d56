/* Fingerprints of expressions (paper section 6.2): the search's
 * deduplication key.  Two derivations reaching the same expression by
 * different paths differ in the order of their summations, the order of
 * commutative operands, the numbering of their iterators and of their
 * scopes (intermediate tensors); the fingerprint ignores all four.  It
 * does not ignore the order of traversal iterators: that is the layout.
 *
 * Iterators are named by their role, not their number: a traversal
 * iterator by its position and range; a summation iterator by its range,
 * refined twice (as in Weisfeiler-Lehman colouring) by where it occurs —
 * which tensor, which dimension, with which coefficient, next to which
 * other iterators — so Sum_ij A[i,j]B[j,i] and Sum_ij A[i,j]B[i,j] differ
 * although all their iterators have one range.  A scope is named by its
 * own fingerprint, an input by its number. */
#include "ein/expr.h"
#include "util/hash.h"

static uint64_t h2(uint64_t a, uint64_t b)
{
    return ts_hash_mix64(a * TS_HASH_PRIME ^ ts_hash_mix64(b));
}

typedef struct fp {
    const ts_ein *e;
    uint64_t label[EIN_MAX_ITERS];
    uint64_t scope_fp[EIN_MAX_SCOPES];
    bool scope_done[EIN_MAX_SCOPES];
} fp;

static uint64_t scope_fp(fp *f, int s);

static uint64_t src_fp(fp *f, int src)
{
    return src >= 0 ? h2(0x1a, (uint64_t)src) : scope_fp(f, ts_ein_src_scope(src));
}

static uint64_t idx_fp(const fp *f, const ts_ein_idx *x, int skip)
{
    uint64_t h = h2(h2((uint64_t)x->c, (uint64_t)x->div), (uint64_t)x->mod);
    for (int k = 0; k < x->n; k++)
        if (x->it[k] != skip) h += ts_hash_mix64(h2(f->label[x->it[k]], (uint64_t)x->co[k]));
    return h;
}

static uint64_t node_fp(fp *f, int n)
{
    const ts_ein_node *x = &f->e->node[n];
    switch (x->op) {
    case EIN_READ: {
        uint64_t h = h2(src_fp(f, x->src), (uint64_t)x->rank);
        for (int d = 0; d < x->rank; d++) h = h2(h, idx_fp(f, &f->e->idx[x->idx + d], -1));
        return h;
    }
    case EIN_NUM: {
        union {
            double d;
            uint64_t u;
        } v = {.d = x->num};
        return h2(0x2b, v.u);
    }
    case EIN_NEG:
    case EIN_RELU: return h2(x->op, node_fp(f, x->a));
    case EIN_ADD:
    case EIN_MUL: return h2(x->op, ts_hash_mix64(node_fp(f, x->a)) + ts_hash_mix64(node_fp(f, x->b)));
    default: return h2(h2(x->op, node_fp(f, x->a)), node_fp(f, x->b));
    }
}

/* Adds to occ[it] one term per occurrence of each iterator in the reads
 * of node n: the read's source, dimension, coefficient and the rest of
 * that index. */
static void occurrences(fp *f, int n, uint64_t *occ)
{
    const ts_ein_node *x = &f->e->node[n];
    if (x->op != EIN_READ) {
        if (x->a >= 0) occurrences(f, x->a, occ);
        if (x->b >= 0) occurrences(f, x->b, occ);
        return;
    }
    uint64_t s = src_fp(f, x->src);
    for (int d = 0; d < x->rank; d++) {
        const ts_ein_idx *ix = &f->e->idx[x->idx + d];
        for (int k = 0; k < ix->n; k++)
            occ[ix->it[k]] += ts_hash_mix64(h2(h2(h2(s, (uint64_t)d), (uint64_t)ix->co[k]), idx_fp(f, ix, ix->it[k])));
    }
}

static uint64_t scope_fp(fp *f, int s)
{
    if (f->scope_done[s]) return f->scope_fp[s];
    const ts_ein *e = f->e;
    const ts_ein_scope *sc = &e->scope[s];
    for (int d = 0; d < sc->ntrav; d++) {
        const ts_ein_iter *r = &e->iter[sc->trav[d]];
        f->label[sc->trav[d]] = h2(h2(h2(0x3c, (uint64_t)d), (uint64_t)r->lo), (uint64_t)r->hi);
    }
    for (int d = 0; d < sc->nsum; d++) {
        const ts_ein_iter *r = &e->iter[sc->sum[d]];
        f->label[sc->sum[d]] = h2(h2(0x4d, (uint64_t)r->lo), (uint64_t)r->hi);
    }
    for (int round = 0; round < 2 && sc->nsum; round++) {
        uint64_t occ[EIN_MAX_ITERS] = {0};
        occurrences(f, sc->body, occ);
        for (int d = 0; d < sc->nsum; d++) f->label[sc->sum[d]] = h2(f->label[sc->sum[d]], occ[sc->sum[d]]);
    }
    uint64_t h = h2(0x5e, (uint64_t)sc->ntrav), sums = 0;
    for (int d = 0; d < sc->ntrav; d++) h = h2(h, f->label[sc->trav[d]]);
    for (int d = 0; d < sc->nsum; d++) sums += ts_hash_mix64(f->label[sc->sum[d]]);
    h = h2(h2(h, sums), node_fp(f, sc->body));
    f->scope_fp[s] = h;
    f->scope_done[s] = true;
    return h;
}

uint64_t ts_ein_fingerprint(const ts_ein *e)
{
    fp f = {.e = e};
    uint64_t h = scope_fp(&f, 0);
    for (int d = 0; d < e->out_shape.rank; d++) h = h2(h, (uint64_t)e->out_shape.dims[d]);
    return h;
}
