/* Derivation rules (paper section 4, derive.h).  Each rule works on a
 * copy and ends with ts_ein_gc, so the expressions a search holds never
 * carry garbage (the readers' scan below relies on it). */
#include <string.h>
#include "einnet/derive.h"

#define MAX_READS 16

static void collect_reads(const ts_ein *e, int n, int *reads, int *nr)
{
    const ts_ein_node *x = &e->node[n];
    if (x->op == EIN_READ) {
        if (*nr < MAX_READS) reads[(*nr)++] = n;
        return;
    }
    if (x->a >= 0) collect_reads(e, x->a, reads, nr);
    if (x->b >= 0) collect_reads(e, x->b, reads, nr);
}

/* Deep copy of the subtree at n with iterators renamed by map. */
static int copy_body(ts_ein *e, int n, const int16_t *map)
{
    ts_ein_node x = e->node[n];
    if (x.op == EIN_READ) {
        ts_ein_idx ix[TS_MAX_RANK + 4];
        for (int d = 0; d < x.rank; d++) {
            ix[d] = e->idx[x.idx + d];
            for (int k = 0; k < ix[d].n; k++) ix[d].it[k] = map[ix[d].it[k]];
        }
        return ts_ein_read(e, x.src, x.rank, ix);
    }
    if (x.a >= 0 && (x.a = (int16_t)copy_body(e, x.a, map)) < 0) return -1;
    if (x.b >= 0 && (x.b = (int16_t)copy_body(e, x.b, map)) < 0) return -1;
    if (e->nnode >= EIN_MAX_NODES) return -1;
    e->node[e->nnode] = x;
    return e->nnode++;
}

static bool plain(const ts_ein_idx *x)
{
    return x->n == 1 && x->co[0] == 1 && x->c == 0 && x->div == 1 && !x->mod;
}

static int trav_pos(const ts_ein_scope *s, int it)
{
    for (int d = 0; d < s->ntrav; d++)
        if (s->trav[d] == it) return d;
    return -1;
}

bool ts_ein_split_sum(const ts_ein *e, int s, unsigned outer, ts_ein *out)
{
    const ts_ein_scope *sc = &e->scope[s];
    unsigned all = (1u << sc->nsum) - 1;
    if (sc->nsum < 2 || !(outer & all) || (outer & all) == all) return false;
    int nouter = __builtin_popcount(outer & all);
    if (sc->ntrav + nouter > EIN_MAX_TRAV) return false;
    *out = *e;
    int t = ts_ein_scope_new(out);
    if (t < 0) return false;
    int16_t map[EIN_MAX_ITERS];
    for (int i = 0; i < EIN_MAX_ITERS; i++) map[i] = (int16_t)i;
    ts_ein_scope in = {0}, outer_sc = *sc;
    ts_ein_idx ix[EIN_MAX_TRAV];
    for (int d = 0; d < sc->ntrav; d++) {
        int it = ts_ein_iter_new(out, e->iter[sc->trav[d]].lo, e->iter[sc->trav[d]].hi);
        if (it < 0) return false;
        map[sc->trav[d]] = (int16_t)it;
        ix[in.ntrav] = ts_ein_idx_it(sc->trav[d]);
        in.trav[in.ntrav++] = (int16_t)it;
    }
    outer_sc.nsum = 0;
    for (int d = 0; d < sc->nsum; d++) {
        int old = sc->sum[d], it = ts_ein_iter_new(out, e->iter[old].lo, e->iter[old].hi);
        if (it < 0) return false;
        map[old] = (int16_t)it;
        if (outer & (1u << d)) {
            ix[in.ntrav] = ts_ein_idx_it(old);
            in.trav[in.ntrav++] = (int16_t)it;
            outer_sc.sum[outer_sc.nsum++] = (int16_t)old;
        } else {
            in.sum[in.nsum++] = (int16_t)it;
        }
    }
    int body = copy_body(out, sc->body, map);
    if (body < 0) return false;
    in.body = (int16_t)body;
    out->scope[t] = in;
    int r = ts_ein_read(out, -t - 1, in.ntrav, ix);
    if (r < 0) return false;
    outer_sc.body = (int16_t)r;
    out->scope[s] = outer_sc;
    ts_ein_gc(out);
    return true;
}

bool ts_ein_substitute(const ts_ein *e, int s, int p, const ts_ein_idx *x, ts_ein *out)
{
    if (s == 0 || s >= e->nscope) return false;
    const ts_ein_scope *sc = &e->scope[s];
    int a = sc->trav[p];
    if (x->div != 1 || x->mod || x->n < 2 || ts_ein_idx_coef(x, a) != 1) return false;
    for (int k = 0; k < x->n; k++)
        if (trav_pos(sc, x->it[k]) < 0) return false;
    /* every reader reads the positions x involves at plain in-range iterators */
    for (int n = 0; n < e->nnode; n++) {
        const ts_ein_node *r = &e->node[n];
        if (r->op != EIN_READ || r->src != -s - 1) continue;
        for (int k = 0; k < x->n; k++) {
            int q = trav_pos(sc, x->it[k]);
            const ts_ein_idx *y = &e->idx[r->idx + q];
            if (!plain(y)) return false;
            const ts_ein_iter *ri = &e->iter[y->it[0]], *si = &e->iter[sc->trav[q]];
            if (ri->lo < si->lo || ri->hi > si->hi) return false;
        }
    }
    *out = *e;
    int64_t lo, hi;
    ts_ein_idx_bounds(e, x, &lo, &hi);
    int t = ts_ein_iter_new(out, lo, hi + 1);
    if (t < 0) return false;
    /* a = t - (x - a) */
    ts_ein_idx rest = *x, repl = ts_ein_idx_it(t);
    ts_ein_idx ai = ts_ein_idx_it(a);
    if (!ts_ein_idx_axpy(&rest, -1, &ai) || !ts_ein_idx_axpy(&repl, -1, &rest)) return false;
    int reads[MAX_READS], nr = 0;
    collect_reads(out, sc->body, reads, &nr);
    for (int i = 0; i < nr; i++) {
        const ts_ein_node *r = &out->node[reads[i]];
        for (int d = 0; d < r->rank; d++)
            if (!ts_ein_idx_subst(&out->idx[r->idx + d], a, &repl)) return false;
    }
    out->scope[s].trav[p] = (int16_t)t;
    for (int n = 0; n < out->nnode; n++) {
        const ts_ein_node *r = &out->node[n];
        if (r->op != EIN_READ || r->src != -s - 1) continue;
        ts_ein_idx nx = ts_ein_idx_const(x->c);
        for (int k = 0; k < x->n; k++) {
            ts_ein_idx y = out->idx[r->idx + trav_pos(sc, x->it[k])];
            if (!ts_ein_idx_axpy(&nx, x->co[k], &y)) return false;
        }
        out->idx[r->idx + p] = nx;
    }
    ts_ein_gc(out);
    return true;
}

static bool is_product(const ts_ein *e, int n)
{
    const ts_ein_node *x = &e->node[n];
    switch (x->op) {
    case EIN_READ:
    case EIN_NUM: return true;
    case EIN_NEG: return is_product(e, x->a);
    case EIN_MUL: return is_product(e, x->a) && is_product(e, x->b);
    default: return false;
    }
}

static bool tighten_iter(ts_ein *e, int it, const int *reads, int nr)
{
    int64_t lo = e->iter[it].lo, hi = e->iter[it].hi;
    for (int i = 0; i < nr; i++) {
        const ts_ein_node *r = &e->node[reads[i]];
        int64_t dims[EIN_MAX_TRAV];
        ts_ein_src_dims(e, r->src, dims);
        for (int d = 0; d < r->rank; d++) {
            const ts_ein_idx *x = &e->idx[r->idx + d];
            if (x->n != 1 || x->it[0] != it || x->co[0] != 1 || x->div != 1 || x->mod) continue;
            int64_t slo = r->src >= 0 ? 0 : e->iter[e->scope[ts_ein_src_scope(r->src)].trav[d]].lo;
            int64_t shi = slo + dims[d];
            if (slo - x->c > lo) lo = slo - x->c;
            if (shi - x->c < hi) hi = shi - x->c;
        }
    }
    if (lo >= hi || (lo == e->iter[it].lo && hi == e->iter[it].hi)) return false;
    e->iter[it].lo = lo;
    e->iter[it].hi = hi;
    return true;
}

bool ts_ein_tighten(ts_ein *e)
{
    bool changed = false;
    for (int s = 0; s < e->nscope; s++) {
        const ts_ein_scope *sc = &e->scope[s];
        /* only a product is 0 wherever one of its reads is out of range */
        if (!is_product(e, sc->body)) continue;
        int reads[MAX_READS], nr = 0;
        collect_reads(e, sc->body, reads, &nr);
        if (nr >= MAX_READS) continue;
        for (int d = 0; s && d < sc->ntrav; d++) changed |= tighten_iter(e, sc->trav[d], reads, nr);
        for (int d = 0; d < sc->nsum; d++) changed |= tighten_iter(e, sc->sum[d], reads, nr);
    }
    return changed;
}

bool ts_ein_extract_read(const ts_ein *e, int s, int k, ts_ein *out)
{
    const ts_ein_scope *sc = &e->scope[s];
    int reads[MAX_READS], nr = 0, seen = 0, rn = -1;
    collect_reads(e, sc->body, reads, &nr);
    if (nr < 2) return false;
    for (int i = 0; i < nr && rn < 0; i++)
        if (e->node[reads[i]].src >= 0 && seen++ == k) rn = reads[i];
    if (rn < 0) return false;
    const ts_ein_node *r = &e->node[rn];
    int its[EIN_MAX_TRAV], m = 0;
    bool trivial = true;
    for (int d = 0; d < r->rank; d++) {
        const ts_ein_idx *x = &e->idx[r->idx + d];
        trivial &= plain(x) || (x->n == 0 && x->c == 0);
        for (int t = 0; t < x->n; t++) {
            bool dup = false;
            for (int j = 0; j < m; j++) dup |= its[j] == x->it[t];
            if (dup) continue;
            if (m >= EIN_MAX_TRAV) return false;
            its[m++] = x->it[t];
        }
    }
    if (trivial) return false;
    *out = *e;
    int u = ts_ein_scope_new(out);
    if (u < 0) return false;
    int16_t map[EIN_MAX_ITERS];
    for (int i = 0; i < EIN_MAX_ITERS; i++) map[i] = (int16_t)i;
    ts_ein_scope us = {.ntrav = (int8_t)m};
    ts_ein_idx ix[EIN_MAX_TRAV];
    for (int j = 0; j < m; j++) {
        int it = ts_ein_iter_new(out, e->iter[its[j]].lo, e->iter[its[j]].hi);
        if (it < 0) return false;
        map[its[j]] = (int16_t)it;
        us.trav[j] = (int16_t)it;
        ix[j] = ts_ein_idx_it(its[j]);
    }
    int body = copy_body(out, rn, map);
    if (body < 0) return false;
    us.body = (int16_t)body;
    out->scope[u] = us;
    int nrd = ts_ein_read(out, -u - 1, m, ix);
    if (nrd < 0) return false;
    out->node[rn] = out->node[nrd]; /* the read in s's body now reads the scope */
    ts_ein_gc(out);
    return true;
}

/* The read node's indices with index p replaced by (u, v): a reader of a
 * scope whose traversal position p was split into two. */
static bool reader_split(ts_ein *out, int rn, int p, const ts_ein_idx *u, const ts_ein_idx *v)
{
    const ts_ein_node *r = &out->node[rn];
    if (r->rank + 1 > EIN_MAX_TRAV) return false;
    ts_ein_idx ix[EIN_MAX_TRAV];
    int k = 0;
    for (int d = 0; d < r->rank; d++) {
        if (d == p) {
            ix[k++] = *u;
            ix[k++] = *v;
        } else
            ix[k++] = out->idx[r->idx + d];
    }
    int nr = ts_ein_read(out, r->src, k, ix);
    if (nr < 0) return false;
    out->node[rn] = out->node[nr];
    return true;
}

bool ts_ein_split_trav(const ts_ein *e, int s, int p, int64_t f, ts_ein *out)
{
    if (s < 0 || s >= e->nscope || p < 0 || p >= e->scope[s].ntrav || f < 2) return false;
    const ts_ein_scope *sc = &e->scope[s];
    int a = sc->trav[p];
    int64_t H = e->iter[a].hi;
    if (e->iter[a].lo != 0 || H % f || H == f || sc->ntrav + 1 > EIN_MAX_TRAV) return false;
    /* readers must read position p at f*u + v, v over [0, f), u within
     * [0, H/f): then they read (u, v) of the split scope, same element */
    int rd[EIN_MAX_NODES], nrd = 0;
    for (int n = 0; n < e->nnode; n++) {
        const ts_ein_node *r = &e->node[n];
        if (r->op != EIN_READ || r->src != -s - 1) continue;
        const ts_ein_idx *x = &e->idx[r->idx + p];
        if (x->n != 2 || x->c || x->div != 1 || x->mod) return false;
        int ku = x->co[0] == f ? 0 : x->co[1] == f ? 1 : -1;
        if (ku < 0 || x->co[1 - ku] != 1) return false;
        const ts_ein_iter *u = &e->iter[x->it[ku]], *v = &e->iter[x->it[1 - ku]];
        if (u->lo < 0 || u->hi > H / f || v->lo < 0 || v->hi > f) return false;
        rd[nrd++] = n;
    }
    *out = *e;
    int hq = ts_ein_iter_new(out, 0, H / f), hr = ts_ein_iter_new(out, 0, f);
    if (hq < 0 || hr < 0) return false;
    ts_ein_idx repl = ts_ein_idx_it(hr), q = ts_ein_idx_it(hq);
    ts_ein_idx_axpy(&repl, f, &q); /* a = f*hq + hr */
    int reads[MAX_READS], nr = 0;
    collect_reads(out, sc->body, reads, &nr);
    if (nr >= MAX_READS) return false;
    for (int i = 0; i < nr; i++) {
        const ts_ein_node *r = &out->node[reads[i]];
        for (int d = 0; d < r->rank; d++)
            if (!ts_ein_idx_subst(&out->idx[r->idx + d], a, &repl)) return false;
    }
    ts_ein_scope *ns = &out->scope[s];
    for (int d = ns->ntrav; d > p + 1; d--) ns->trav[d] = ns->trav[d - 1];
    ns->trav[p] = (int16_t)hq;
    ns->trav[p + 1] = (int16_t)hr;
    ns->ntrav++;
    for (int i = 0; i < nrd; i++) {
        const ts_ein_idx *x = &out->idx[out->node[rd[i]].idx + p];
        int ku = x->co[0] == f ? 0 : 1;
        ts_ein_idx u = ts_ein_idx_it(x->it[ku]), v = ts_ein_idx_it(x->it[1 - ku]);
        if (!reader_split(out, rd[i], p, &u, &v)) return false;
    }
    ts_ein_gc(out);
    return true;
}

bool ts_ein_extract_phase(const ts_ein *e, int s, int k, ts_ein *out)
{
    const ts_ein_scope *sc = &e->scope[s];
    int reads[MAX_READS], nr = 0, seen = 0, rn = -1;
    collect_reads(e, sc->body, reads, &nr);
    for (int i = 0; i < nr && rn < 0; i++)
        if (e->node[reads[i]].src >= 0 && seen++ == k) rn = reads[i];
    if (rn < 0) return false;
    const ts_ein_node *r = &e->node[rn];
    const ts_shape *X = &e->in_shape[r->src];
    /* per dimension: the phase iterator (-1: a plain index) and factor */
    int ph[TS_MAX_RANK], nph = 0;
    int64_t fac[TS_MAX_RANK];
    if (r->rank > TS_MAX_RANK) return false;
    for (int d = 0; d < r->rank; d++) {
        const ts_ein_idx *x = &e->idx[r->idx + d];
        ph[d] = -1;
        if (plain(x) || x->div != 1 || x->mod) {
            if (!plain(x)) return false;
            continue;
        }
        /* x = f*(...) + a, a a traversal iterator of s over [0, f) */
        for (int t = 0; t < x->n && ph[d] < 0; t++) {
            const ts_ein_iter *it = &e->iter[x->it[t]];
            int64_t f = it->hi;
            if (x->co[t] != 1 || it->lo != 0 || f < 2 || trav_pos(sc, x->it[t]) < 0) continue;
            bool ok = x->c % f == 0 && X->dims[d] % f == 0;
            for (int u = 0; u < x->n; u++) ok &= u == t || x->co[u] % f == 0;
            for (int j = 0; j < d; j++) ok &= ph[j] != x->it[t];
            if (ok) ph[d] = x->it[t], fac[d] = f;
        }
        if (ph[d] < 0) return false;
        nph++;
    }
    if (!nph || nph + r->rank > EIN_MAX_TRAV) return false;
    *out = *e;
    int u = ts_ein_scope_new(out);
    if (u < 0) return false;
    /* P[phases..., dims...] = X[..., f*y + a, ...] */
    ts_ein_scope us = {0};
    ts_ein_idx body_ix[TS_MAX_RANK], rd_ix[EIN_MAX_TRAV];
    int pit[TS_MAX_RANK];
    for (int d = 0; d < r->rank; d++) {
        if (ph[d] < 0) continue;
        if ((pit[d] = ts_ein_iter_new(out, 0, fac[d])) < 0) return false;
        rd_ix[us.ntrav] = ts_ein_idx_it(ph[d]);
        us.trav[us.ntrav++] = (int16_t)pit[d];
    }
    for (int d = 0; d < r->rank; d++) {
        const ts_ein_idx *x = &e->idx[r->idx + d];
        int y = ts_ein_iter_new(out, 0, ph[d] < 0 ? X->dims[d] : X->dims[d] / fac[d]);
        if (y < 0) return false;
        body_ix[d] = ts_ein_idx_it(y);
        if (ph[d] < 0) {
            rd_ix[us.ntrav] = *x;
        } else {
            ts_ein_idx a = ts_ein_idx_it(pit[d]);
            body_ix[d].co[0] = fac[d];
            ts_ein_idx_axpy(&body_ix[d], 1, &a);
            /* the reader's quotient (x - a) / f, exact by construction */
            ts_ein_idx q = {.div = 1};
            for (int t = 0; t < x->n; t++)
                if (x->it[t] != ph[d]) {
                    q.it[q.n] = x->it[t];
                    q.co[q.n++] = x->co[t] / fac[d];
                }
            q.c = x->c / fac[d];
            rd_ix[us.ntrav] = q;
        }
        us.trav[us.ntrav++] = (int16_t)y;
    }
    int body = ts_ein_read(out, r->src, r->rank, body_ix);
    if (body < 0) return false;
    us.body = (int16_t)body;
    out->scope[u] = us;
    int nrd = ts_ein_read(out, -u - 1, us.ntrav, rd_ix);
    if (nrd < 0) return false;
    out->node[rn] = out->node[nrd];
    ts_ein_gc(out);
    return true;
}
