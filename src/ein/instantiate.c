/* Instantiation of expressions as graph nodes (instantiate.h).
 *
 * A scope's result is a tensor whose physical dimension j holds the
 * scope's traversal position lay[j]: the matcher leaves a MatMul's result
 * in the layout MatMul makes ([batch, M, N]) and its readers slice it in
 * that layout, so no transpose is spent on an intermediate (the paper's
 * point that an instantiated scope chooses its layout).  Only the root is
 * put in traversal order, then reshaped to the output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ein/instantiate.h"
#include "ops/window.h"

typedef struct tref {
    int v;                    /* value id */
    int nd;                   /* logical dims (= physical) */
    int lay[TS_MAX_RANK];     /* physical dim j -> logical position */
    int64_t lo[TS_MAX_RANK];  /* first index of each logical position */
    int64_t ext[TS_MAX_RANK]; /* extent of each logical position */
} tref;

/* ------------------------------------------------------- the analysis */

static bool plain(const ts_ein_idx *x)
{
    return x->n == 1 && x->co[0] == 1 && x->c == 0 && x->div == 1 && !x->mod;
}

static int pos_in(const int16_t *list, int n, int it)
{
    for (int d = 0; d < n; d++)
        if (list[d] == it) return d;
    return -1;
}

/* First index and extent of logical dimension d of src. */
static void src_range(const ts_ein *e, int src, int d, int64_t *lo, int64_t *ext)
{
    if (src >= 0) {
        *lo = 0;
        *ext = e->in_shape[src].dims[d];
    } else {
        const ts_ein_iter *r = &e->iter[e->scope[ts_ein_src_scope(src)].trav[d]];
        *lo = r->lo;
        *ext = r->hi - r->lo;
    }
}

typedef struct mm {
    int read[2];
    int16_t grp[4][EIN_MAX_TRAV]; /* batch, m, n, k */
    int ngrp[4];
} mm;
enum { G_BATCH, G_M, G_N, G_K };

static bool mm_analyze(const ts_ein *e, int s, mm *m)
{
    const ts_ein_scope *sc = &e->scope[s];
    const ts_ein_node *b = &e->node[sc->body];
    if (!sc->nsum || b->op != EIN_MUL || e->node[b->a].op != EIN_READ || e->node[b->b].op != EIN_READ) return false;
    if (sc->ntrav > TS_MAX_RANK) return false;
    memset(m, 0, sizeof *m);
    m->read[0] = b->a;
    m->read[1] = b->b;
    /* the iterator mapping table: in which of A, B each iterator is */
    unsigned in[EIN_MAX_ITERS] = {0};
    for (int o = 0; o < 2; o++) {
        const ts_ein_node *r = &e->node[m->read[o]];
        if (r->rank > TS_MAX_RANK) return false;
        for (int d = 0; d < r->rank; d++) {
            const ts_ein_idx *x = &e->idx[r->idx + d];
            int64_t lo, ext;
            src_range(e, r->src, d, &lo, &ext);
            if (x->n == 0 && x->div == 1 && !x->mod && x->c == lo && ext == 1) continue;
            if (!plain(x) || (in[x->it[0]] & (1u << o))) return false;
            const ts_ein_iter *it = &e->iter[x->it[0]];
            if (it->lo != lo || it->hi - it->lo != ext) return false; /* would need a slice or a pad */
            in[x->it[0]] |= 1u << o;
        }
    }
    for (int d = 0; d < sc->ntrav; d++) {
        unsigned w = in[sc->trav[d]];
        int g = w == 3 ? G_BATCH : w == 1 ? G_M : w == 2 ? G_N : -1;
        if (g < 0) return false;
        m->grp[g][m->ngrp[g]++] = sc->trav[d];
    }
    for (int d = 0; d < sc->nsum; d++) {
        if (in[sc->sum[d]] != 3) return false; /* a reduction of one operand is not a MatMul */
        m->grp[G_K][m->ngrp[G_K]++] = sc->sum[d];
    }
    return true;
}

/* Read rn with the iterators of scope s set in fixed[] (summation ones)
 * as a slice of its source: per logical dim, the start, the step (0: one
 * point) and the traversal position it spans (-1: none). */
typedef struct rslice {
    int64_t start[TS_MAX_RANK], step[TS_MAX_RANK];
    int tpos[TS_MAX_RANK];
} rslice;

static bool read_slice(const ts_ein *e, int s, int rn, const int64_t *val, bool with_sums, rslice *rs)
{
    const ts_ein_scope *sc = &e->scope[s];
    const ts_ein_node *r = &e->node[rn];
    if (r->rank > TS_MAX_RANK) return false;
    bool used[EIN_MAX_TRAV] = {0};
    for (int d = 0; d < r->rank; d++) {
        const ts_ein_idx *x = &e->idx[r->idx + d];
        if (x->div != 1 || x->mod) return false;
        int64_t c = x->c, lo, ext;
        rs->tpos[d] = -1;
        rs->step[d] = 0;
        for (int k = 0; k < x->n; k++) {
            int p = pos_in(sc->trav, sc->ntrav, x->it[k]);
            if (p < 0) {
                if (!with_sums || pos_in(sc->sum, sc->nsum, x->it[k]) < 0) return false;
                c += x->co[k] * val[x->it[k]];
                continue;
            }
            if (rs->tpos[d] >= 0 || used[p] || x->co[k] < 1) return false;
            used[p] = true;
            rs->tpos[d] = p;
            rs->step[d] = x->co[k];
            c += x->co[k] * e->iter[x->it[k]].lo;
        }
        src_range(e, r->src, d, &lo, &ext);
        rs->start[d] = c - lo;
    }
    return true;
}

static bool covers_all(const ts_ein *e, int s, const int *reads, int nr)
{
    const ts_ein_scope *sc = &e->scope[s];
    int64_t zero[EIN_MAX_ITERS] = {0};
    bool seen[EIN_MAX_TRAV] = {0};
    for (int i = 0; i < nr; i++) {
        rslice rs;
        if (!read_slice(e, s, reads[i], zero, true, &rs)) return false;
        for (int d = 0; d < e->node[reads[i]].rank; d++)
            if (rs.tpos[d] >= 0) seen[rs.tpos[d]] = true;
    }
    for (int p = 0; p < sc->ntrav; p++)
        if (!seen[p]) return false;
    return true;
}

static bool arith_reads(const ts_ein *e, int n, int *reads, int *nr)
{
    const ts_ein_node *x = &e->node[n];
    if (x->op == EIN_READ) {
        if (*nr >= 8) return false;
        reads[(*nr)++] = n;
        return true;
    }
    if (x->a >= 0 && !arith_reads(e, x->a, reads, nr)) return false;
    return x->b < 0 || arith_reads(e, x->b, reads, nr);
}

static int64_t sum_points(const ts_ein *e, const ts_ein_scope *sc)
{
    int64_t n = 1;
    for (int d = 0; d < sc->nsum; d++) {
        n *= e->iter[sc->sum[d]].hi - e->iter[sc->sum[d]].lo;
        if (n > EIN_MAX_UNROLL) return n;
    }
    return n;
}

static bool full_range(const ts_ein *e, int it, int64_t ext)
{
    return e->iter[it].lo == 0 && e->iter[it].hi == ext;
}

/* G2BMM (banded product, Longformer's scores): body A[batch..., i, c] *
 * B[batch..., i + j + c1, c] summed over c alone, A and B scopes or
 * inputs from 0, the batch dims plain traversal iterators read at the
 * same positions in both, traversal = batch, i, j; the band symmetric
 * (c1 = -(J-1)/2) and at most G2_BLOCK wide on each side, the rows a
 * multiple of G2_BLOCK.  Built blocked (build_g2bmm). */
#define G2_BLOCK 64

typedef struct g2 {
    int ar, br;      /* the reads */
    int nb;          /* batch dims */
    int i, j;        /* row and band iterators */
    int64_t L, J, C; /* rows, band width, channels */
} g2;

static bool g2_analyze(const ts_ein *e, int s, g2 *q)
{
    const ts_ein_scope *sc = &e->scope[s];
    const ts_ein_node *b = &e->node[sc->body];
    if (sc->nsum != 1 || b->op != EIN_MUL || e->node[b->a].op != EIN_READ || e->node[b->b].op != EIN_READ) return false;
    memset(q, 0, sizeof *q);
    const ts_ein_node *x = &e->node[b->a], *y = &e->node[b->b];
    if (x->rank != y->rank || x->rank < 3 || x->rank > TS_MAX_RANK || sc->ntrav != x->rank) return false;
    int r = x->rank;
    const ts_ein_idx *row_b = &e->idx[y->idx + r - 2];
    if (row_b->n != 2) {
        const ts_ein_node *t = x;
        x = y, y = t;
        row_b = &e->idx[y->idx + r - 2];
    }
    q->ar = x == &e->node[b->a] ? b->a : b->b;
    q->br = q->ar == b->a ? b->b : b->a;
    const ts_ein_idx *xi = &e->idx[x->idx], *yi = &e->idx[y->idx];
    for (int d = 0; d < r; d++) {
        int64_t lo, ext, lo2, ext2;
        src_range(e, x->src, d, &lo, &ext);
        src_range(e, y->src, d, &lo2, &ext2);
        if (lo || lo2 || (d != r - 2 && ext != ext2)) return false;
        if (d < r - 2 && (!plain(&xi[d]) || !plain(&yi[d]) || xi[d].it[0] != yi[d].it[0] ||
                          pos_in(sc->trav, sc->ntrav, xi[d].it[0]) < 0 || !full_range(e, xi[d].it[0], ext)))
            return false;
    }
    q->nb = r - 2;
    int c = sc->sum[0];
    if (!plain(&xi[r - 1]) || !plain(&yi[r - 1]) || xi[r - 1].it[0] != c || yi[r - 1].it[0] != c) return false;
    src_range(e, x->src, r - 1, &(int64_t){0}, &q->C);
    if (!full_range(e, c, q->C) || !plain(&xi[r - 2])) return false;
    q->i = xi[r - 2].it[0];
    int64_t lo;
    src_range(e, x->src, r - 2, &lo, &q->L);
    int64_t Lb;
    src_range(e, y->src, r - 2, &lo, &Lb);
    if (Lb != q->L || !full_range(e, q->i, q->L) || pos_in(sc->trav, sc->ntrav, q->i) < 0) return false;
    if (row_b->div != 1 || row_b->mod || row_b->co[0] != 1 || row_b->co[1] != 1) return false;
    q->j = row_b->it[0] == q->i ? row_b->it[1] : row_b->it[1] == q->i ? row_b->it[0] : -1;
    if (q->j < 0 || pos_in(sc->trav, sc->ntrav, q->j) < 0 || e->iter[q->j].lo) return false;
    q->J = e->iter[q->j].hi;
    return q->J % 2 == 1 && row_b->c == -(q->J - 1) / 2 && (q->J - 1) / 2 <= G2_BLOCK && q->L % G2_BLOCK == 0;
}

/* The band's counterpart (Longformer's context): body A[batch..., i, j] *
 * B[batch..., i + j + c1, c] summed over j alone: the probabilities of a
 * band times the rows they weigh.  Same conditions as g2_analyze (j over
 * [0, J) is the summation, c a traversal iterator). */
static bool g2t_analyze(const ts_ein *e, int s, g2 *q)
{
    const ts_ein_scope *sc = &e->scope[s];
    const ts_ein_node *b = &e->node[sc->body];
    if (sc->nsum != 1 || b->op != EIN_MUL || e->node[b->a].op != EIN_READ || e->node[b->b].op != EIN_READ) return false;
    memset(q, 0, sizeof *q);
    const ts_ein_node *x = &e->node[b->a], *y = &e->node[b->b];
    if (x->rank != y->rank || x->rank < 3 || x->rank > TS_MAX_RANK || sc->ntrav != x->rank) return false;
    int r = x->rank;
    if (e->idx[y->idx + r - 2].n != 2) {
        const ts_ein_node *t = x;
        x = y, y = t;
    }
    q->ar = x == &e->node[b->a] ? b->a : b->b;
    q->br = q->ar == b->a ? b->b : b->a;
    const ts_ein_idx *xi = &e->idx[x->idx], *yi = &e->idx[y->idx], *row_b = &yi[r - 2];
    for (int d = 0; d < r; d++) {
        int64_t lo, ext, lo2, ext2;
        src_range(e, x->src, d, &lo, &ext);
        src_range(e, y->src, d, &lo2, &ext2);
        if (lo || lo2 || (d < r - 2 && ext != ext2)) return false;
        if (d < r - 2 && (!plain(&xi[d]) || !plain(&yi[d]) || xi[d].it[0] != yi[d].it[0] ||
                          pos_in(sc->trav, sc->ntrav, xi[d].it[0]) < 0 || !full_range(e, xi[d].it[0], ext)))
            return false;
    }
    q->nb = r - 2;
    q->j = sc->sum[0];
    int64_t lo;
    src_range(e, x->src, r - 1, &lo, &q->J);
    src_range(e, x->src, r - 2, &lo, &q->L);
    int64_t Lb;
    src_range(e, y->src, r - 2, &lo, &Lb);
    src_range(e, y->src, r - 1, &lo, &q->C);
    if (!plain(&xi[r - 1]) || xi[r - 1].it[0] != q->j || !full_range(e, q->j, q->J) || !plain(&xi[r - 2])) return false;
    q->i = xi[r - 2].it[0];
    if (Lb != q->L || !full_range(e, q->i, q->L) || pos_in(sc->trav, sc->ntrav, q->i) < 0) return false;
    if (!plain(&yi[r - 1]) || pos_in(sc->trav, sc->ntrav, yi[r - 1].it[0]) < 0 || !full_range(e, yi[r - 1].it[0], q->C))
        return false;
    if (row_b->div != 1 || row_b->mod || row_b->co[0] != 1 || row_b->co[1] != 1) return false;
    bool ij = (row_b->it[0] == q->i && row_b->it[1] == q->j) || (row_b->it[1] == q->i && row_b->it[0] == q->j);
    return ij && q->J % 2 == 1 && row_b->c == -(q->J - 1) / 2 && (q->J - 1) / 2 <= G2_BLOCK && q->L % G2_BLOCK == 0;
}

/* A regular convolution over a scope: body X[b..., c, st*o + dl*k + c0, ...]
 * * W[f, c, k, ...] with W an input, X a scope (phase images: the
 * convolution of an input is the operator itself, not a derivation), the
 * leading indices of X plain traversal iterators (the batch, merged), c
 * and the kernel iterators summed over W's whole range, the output
 * positions o from 0.  Group 1. */
typedef struct cv {
    int xr, wr;            /* the reads */
    int nb, nsp;           /* batch dims of X, spatial dims */
    int f, o[TS_WIN_MAX];  /* iterators: output channel, positions */
    int64_t stride[TS_WIN_MAX], dil[TS_WIN_MAX], pb[TS_WIN_MAX], pe[TS_WIN_MAX];
} cv;

static bool conv_analyze(const ts_ein *e, int s, cv *c)
{
    const ts_ein_scope *sc = &e->scope[s];
    const ts_ein_node *b = &e->node[sc->body];
    if (b->op != EIN_MUL || e->node[b->a].op != EIN_READ || e->node[b->b].op != EIN_READ) return false;
    memset(c, 0, sizeof *c);
    c->xr = e->node[b->a].src < 0 ? b->a : b->b;
    c->wr = c->xr == b->a ? b->b : b->a;
    const ts_ein_node *x = &e->node[c->xr], *w = &e->node[c->wr];
    if (x->src >= 0 || w->src < 0 || w->rank < 3 || w->rank - 2 > TS_WIN_MAX) return false;
    const ts_shape *W = &e->in_shape[w->src];
    c->nsp = w->rank - 2;
    c->nb = x->rank - c->nsp - 1;
    if (c->nb < 1 || x->rank > TS_MAX_RANK) return false;
    for (int d = 0; d < x->rank; d++) {
        int64_t lo, ext;
        src_range(e, x->src, d, &lo, &ext);
        if (lo) return false;
    }
    const ts_ein_idx *wi = &e->idx[w->idx];
    for (int d = 0; d < w->rank; d++)
        if (!plain(&wi[d]) || !full_range(e, wi[d].it[0], W->dims[d])) return false;
    c->f = wi[0].it[0];
    if (pos_in(sc->trav, sc->ntrav, c->f) < 0 || pos_in(sc->sum, sc->nsum, wi[1].it[0]) < 0) return false;
    if (sc->nsum != w->rank - 1 || sc->ntrav != c->nb + 1 + c->nsp) return false;
    const ts_ein_idx *xi = &e->idx[x->idx];
    bool used[EIN_MAX_ITERS] = {0};
    used[c->f] = true;
    for (int d = 0; d < c->nb; d++) {
        int64_t lo, ext;
        src_range(e, x->src, d, &lo, &ext);
        if (!plain(&xi[d]) || !full_range(e, xi[d].it[0], ext) || used[xi[d].it[0]] ||
            pos_in(sc->trav, sc->ntrav, xi[d].it[0]) < 0)
            return false;
        used[xi[d].it[0]] = true;
    }
    if (!plain(&xi[c->nb]) || xi[c->nb].it[0] != wi[1].it[0]) return false;
    for (int i = 0; i < c->nsp; i++) {
        const ts_ein_idx *y = &xi[c->nb + 1 + i];
        int k = wi[2 + i].it[0], o = -1;
        if (y->n != 2 || y->div != 1 || y->mod || pos_in(sc->sum, sc->nsum, k) < 0) return false;
        for (int t = 0; t < 2; t++) {
            if (y->co[t] < 1) return false;
            if (y->it[t] == k) c->dil[i] = y->co[t];
            else o = y->it[t], c->stride[i] = y->co[t];
        }
        if (o < 0 || !c->dil[i] || used[o] || pos_in(sc->trav, sc->ntrav, o) < 0 || e->iter[o].lo) return false;
        used[o] = true;
        c->o[i] = o;
        int64_t lo, in;
        src_range(e, x->src, c->nb + 1 + i, &lo, &in);
        int64_t O = e->iter[o].hi, K = W->dims[2 + i];
        c->pb[i] = -y->c;
        c->pe[i] = (O - 1) * c->stride[i] + c->dil[i] * (K - 1) + 1 - in - c->pb[i];
        if (c->pb[i] < 0 || c->pe[i] < 0) return false;
    }
    return true;
}

/* A movement scope putting phases of a tensor outermost: body one read of
 * an input or scope (from 0), every index a plain iterator over the whole
 * dimension or f*y + a with a over [0, f), y over [0, dim/f); every
 * traversal iterator used once.  A Reshape and a Transpose. */
static bool phase_analyze(const ts_ein *e, int s)
{
    const ts_ein_scope *sc = &e->scope[s];
    const ts_ein_node *r = &e->node[sc->body];
    if (sc->nsum || r->op != EIN_READ || r->rank > TS_MAX_RANK) return false;
    int nused = 0, nph = 0;
    bool used[EIN_MAX_ITERS] = {0};
    for (int d = 0; d < r->rank; d++) {
        const ts_ein_idx *x = &e->idx[r->idx + d];
        int64_t lo, ext;
        src_range(e, r->src, d, &lo, &ext);
        if (lo || x->div != 1 || x->mod || x->c) return false;
        if (plain(x)) {
            if (!full_range(e, x->it[0], ext) || used[x->it[0]]) return false;
            used[x->it[0]] = true, nused++;
            continue;
        }
        if (x->n != 2) return false;
        int ka = x->co[0] == 1 ? 0 : 1, a = x->it[ka], y = x->it[1 - ka];
        int64_t f = x->co[1 - ka];
        if (x->co[ka] != 1 || f < 2 || ext % f || !full_range(e, a, f) || !full_range(e, y, ext / f) || used[a] ||
            used[y])
            return false;
        used[a] = used[y] = true, nused += 2, nph++;
    }
    if (!nph || nused != sc->ntrav || r->rank + nph > TS_MAX_RANK) return false;
    for (int p = 0; p < sc->ntrav; p++)
        if (!used[sc->trav[p]]) return false;
    return true;
}

ts_ein_kind ts_ein_scope_kind(const ts_ein *e, int s)
{
    const ts_ein_scope *sc = &e->scope[s];
    if (sc->ntrav > TS_MAX_RANK || sc->ntrav < 1) return EIN_KIND_NONE;
    mm m;
    if (mm_analyze(e, s, &m)) return EIN_KIND_MATMUL;
    cv c;
    if (conv_analyze(e, s, &c)) return EIN_KIND_CONV;
    g2 q;
    if (g2_analyze(e, s, &q)) return EIN_KIND_G2BMM;
    if (g2t_analyze(e, s, &q)) return EIN_KIND_G2BMM_T;
    if (phase_analyze(e, s)) return EIN_KIND_PHASE;
    const ts_ein_node *b = &e->node[sc->body];
    int reads[8], nr = 0;
    if (b->op == EIN_READ && sum_points(e, sc) <= EIN_MAX_UNROLL) {
        reads[0] = sc->body;
        if (!covers_all(e, s, reads, 1)) return EIN_KIND_NONE;
        return EIN_KIND_REDUCE;
    }
    if (!sc->nsum && arith_reads(e, sc->body, reads, &nr) && covers_all(e, s, reads, nr)) return EIN_KIND_ELEMENTWISE;
    return EIN_KIND_NONE;
}

bool ts_ein_undilated_conv(const ts_ein *e)
{
    int nconv = 0;
    for (int s = 0; s < e->nscope; s++) {
        cv c;
        if (!conv_analyze(e, s, &c)) continue;
        nconv++;
        for (int i = 0; i < c.nsp; i++)
            if (c.dil[i] != 1) return false;
    }
    return nconv > 0;
}

bool ts_ein_instantiable(const ts_ein *e)
{
    for (int s = 0; s < e->nscope; s++)
        if (ts_ein_scope_kind(e, s) == EIN_KIND_NONE) return false;
    return true;
}

void ts_ein_describe(const ts_ein *e, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    /* innermost first: the order the nodes run in */
    for (int s = e->nscope - 1; s >= 0 && len + 1 < n; s--) {
        ts_ein_kind k = ts_ein_scope_kind(e, s);
        const char *name = k == EIN_KIND_MATMUL ? "matmul" : k == EIN_KIND_REDUCE ? "reduce" : k == EIN_KIND_ELEMENTWISE ? "ew"
                         : k == EIN_KIND_CONV ? "conv" : k == EIN_KIND_PHASE ? "phases" : k == EIN_KIND_G2BMM ? "g2bmm"
                         : k == EIN_KIND_G2BMM_T ? "g2bmmt" : "eop";
        char pts[32] = "";
        if (k == EIN_KIND_REDUCE && e->scope[s].nsum)
            snprintf(pts, sizeof pts, "%lld", (long long)sum_points(e, &e->scope[s]));
        if (k == EIN_KIND_REDUCE && !e->scope[s].nsum) name = "move";
        int w = snprintf(buf + len, n - len, "%s%s%s", len ? "+" : "", name, pts);
        if (w > 0) len += (size_t)w;
    }
}

/* ------------------------------------------------------------ building */

typedef struct bld {
    const ts_ein *e;
    ts_graph *g;
    const int *inputs;
    const char *prefix;
    ts_dtype dtype;
    int count;
    ts_error *err;
    tref scope[EIN_MAX_SCOPES];
    bool done[EIN_MAX_SCOPES];
    bool mixed; /* building the MatMuls an eOperator reads (ts_ein_instantiate_mixed) */
} bld;

static void fresh(bld *b, const char *kind, char *out, size_t n)
{
    do snprintf(out, n, "%s.%s%d", b->prefix, kind, b->count++);
    while (ts_graph_find_value(b->g, out) >= 0);
}

static int node(bld *b, const char *op, const int *ins, int nin, const ts_attr *at, int na)
{
    char name[200];
    fresh(b, "ein", name, sizeof name);
    const char *oname = name;
    int out = -1;
    if (ts_graph_add_node(b->g, op, name, ins, nin, at, na, 1, &oname, &out, b->err) < 0) return -1;
    return out;
}

static int i64s(bld *b, const int64_t *v, int n)
{
    char name[200];
    fresh(b, "c", name, sizeof name);
    int64_t d = n;
    ts_shape s = ts_shape_make(1, &d);
    ts_tensor *t = ts_tensor_new(TS_I64, &s, b->err);
    if (!t) return -1;
    memcpy(t->data, v, sizeof *v * (size_t)n);
    int id = ts_graph_add_constant(b->g, name, t, b->err);
    ts_tensor_unref(t);
    return id;
}

static int scalar(bld *b, double v)
{
    char name[200];
    fresh(b, "c", name, sizeof name);
    ts_shape s = {0};
    ts_tensor *t = ts_tensor_new(b->dtype, &s, b->err);
    if (!t) return -1;
    ts_tensor_set_f64(t, 0, v);
    int id = ts_graph_add_constant(b->g, name, t, b->err);
    ts_tensor_unref(t);
    return id;
}

static int reshape(bld *b, int v, const int64_t *dims, int nd);

static int transpose(bld *b, int v, const int *perm, int nd)
{
    bool id = true;
    for (int j = 0; j < nd; j++) id &= perm[j] == j;
    if (id || v < 0) return v;
    /* moving only dimensions of size 1 keeps the bytes in place: a Reshape,
     * a view, instead of a copy (NCHW with N = 1 read as [C, N*H*W]) */
    const ts_shape *sh = &b->g->values[v].shape;
    int last = -1;
    bool inplace = sh->rank == nd;
    for (int j = 0; j < nd && inplace; j++) {
        if (sh->dims[perm[j]] == 1) continue;
        inplace = perm[j] > last;
        last = perm[j];
    }
    if (inplace) {
        int64_t dims[TS_MAX_RANK];
        for (int j = 0; j < nd; j++) dims[j] = sh->dims[perm[j]];
        return reshape(b, v, dims, nd);
    }
    int64_t p[TS_MAX_RANK];
    for (int j = 0; j < nd; j++) p[j] = perm[j];
    ts_attr at = ts_attr_ints("perm", p, nd);
    return node(b, "Transpose", &v, 1, &at, 1);
}

static int reshape(bld *b, int v, const int64_t *dims, int nd)
{
    if (v < 0) return -1;
    ts_shape want = ts_shape_make(nd, dims);
    if (ts_shape_eq(&b->g->values[v].shape, &want)) return v;
    int ins[2] = {v, i64s(b, dims, nd)};
    return ins[1] < 0 ? -1 : node(b, "Reshape", ins, 2, NULL, 0);
}

static ts_status scope_build(bld *b, int s);

static ts_status src_ref(bld *b, int src, tref *t)
{
    if (src < 0) {
        int s = ts_ein_src_scope(src);
        if (!b->done[s] && scope_build(b, s)) return b->err->code;
        *t = b->scope[s];
        return TS_OK;
    }
    const ts_shape *sh = &b->e->in_shape[src];
    *t = (tref){.v = b->inputs[src], .nd = sh->rank};
    for (int d = 0; d < sh->rank; d++) t->lay[d] = d, t->ext[d] = sh->dims[d];
    return TS_OK;
}

static ts_status fail(bld *b)
{
    if (!b->err->code) ts_error_set(b->err, TS_ERR_INVALID, "einnet: instantiation failed");
    return b->err->code;
}

/* An ordered list of iterators (one MatMul dimension once flattened). */
typedef struct ilist {
    int n;
    int16_t it[EIN_MAX_TRAV];
} ilist;

/* Operand o of a MatMul as [l0, l1, l2] flattened (l0 empty: 2-D). */
static int mm_operand(bld *b, const mm *m, int o, const ilist *l)
{
    const ts_ein *e = b->e;
    const ts_ein_node *r = &e->node[m->read[o]];
    tref t;
    if (src_ref(b, r->src, &t)) return -1;
    int perm[TS_MAX_RANK], np = 0;
    int64_t dims[3] = {1, 1, 1};
    for (int gi = 0; gi < 3; gi++)
        for (int k = 0; k < l[gi].n; k++)
            for (int d = 0; d < r->rank; d++) {
                const ts_ein_idx *x = &e->idx[r->idx + d];
                if (x->n != 1 || x->it[0] != l[gi].it[k]) continue;
                for (int j = 0; j < t.nd; j++)
                    if (t.lay[j] == d) perm[np++] = j;
                dims[gi] *= t.ext[d];
            }
    for (int j = 0; j < t.nd; j++) { /* size-1 constant dims last */
        bool in = false;
        for (int k = 0; k < np; k++) in |= perm[k] == j;
        if (!in) perm[np++] = j;
    }
    int v = transpose(b, t.v, perm, t.nd);
    return l[0].n ? reshape(b, v, dims, 3) : reshape(b, v, dims + 1, 2);
}

/* Traversal positions of scope s that a reader reads at a point fixed by
 * its own summation (an OffsetReduce slices them one at a time): the
 * MatMul puts them outermost, as a broadcast batch, so each point is one
 * contiguous block instead of a strided gather. */
static void fixed_positions(const ts_ein *e, int s, bool *fixed)
{
    bool is_sum[EIN_MAX_ITERS] = {0};
    for (int k = 0; k < e->nscope; k++)
        for (int d = 0; d < e->scope[k].nsum; d++) is_sum[e->scope[k].sum[d]] = true;
    memset(fixed, 0, sizeof(bool) * EIN_MAX_TRAV);
    for (int n = 0; n < e->nnode; n++) {
        const ts_ein_node *r = &e->node[n];
        if (r->op != EIN_READ || r->src != -s - 1) continue;
        for (int d = 0; d < r->rank; d++) {
            const ts_ein_idx *x = &e->idx[r->idx + d];
            bool f = x->n > 0;
            for (int k = 0; k < x->n; k++) f &= is_sum[x->it[k]];
            fixed[d] |= f;
        }
    }
}

static void split_fixed(const ts_ein *e, int s, const mm *m, int g, const bool *fixed, ilist *fx, ilist *rest)
{
    fx->n = rest->n = 0;
    for (int k = 0; k < m->ngrp[g]; k++) {
        int p = pos_in(e->scope[s].trav, e->scope[s].ntrav, m->grp[g][k]);
        ilist *l = fixed[p] ? fx : rest;
        l->it[l->n++] = m->grp[g][k];
    }
}

static ts_status build_matmul(bld *b, int s, const mm *m)
{
    const ts_ein *e = b->e;
    bool fixed[EIN_MAX_TRAV];
    fixed_positions(e, s, fixed);
    ilist batch = {0}, mf, mr, nf, nr, k = {0}, none = {0};
    for (int i = 0; i < m->ngrp[G_BATCH]; i++) batch.it[batch.n++] = m->grp[G_BATCH][i];
    for (int i = 0; i < m->ngrp[G_K]; i++) k.it[k.n++] = m->grp[G_K][i];
    split_fixed(e, s, m, G_M, fixed, &mf, &mr);
    split_fixed(e, s, m, G_N, fixed, &nf, &nr);
    /* the result's dimension lists, outermost first */
    ilist A[3], B[3], out[3];
    if (!batch.n && nf.n) { /* [1?] x [Nf, K, Nr] -> [Nf, M, Nr] */
        ilist mall = mf;
        for (int i = 0; i < mr.n; i++) mall.it[mall.n++] = mr.it[i];
        A[0] = none, A[1] = mall, A[2] = k;
        B[0] = nf, B[1] = k, B[2] = nr;
        out[0] = nf, out[1] = mall, out[2] = nr;
    } else if (!batch.n && mf.n) { /* [Mf, Mr, K] x [K, N] -> [Mf, Mr, N] */
        ilist nall = nf;
        for (int i = 0; i < nr.n; i++) nall.it[nall.n++] = nr.it[i];
        A[0] = mf, A[1] = mr, A[2] = k;
        B[0] = none, B[1] = k, B[2] = nall;
        out[0] = mf, out[1] = mr, out[2] = nall;
    } else {
        ilist mall = mf, nall = nf;
        for (int i = 0; i < mr.n; i++) mall.it[mall.n++] = mr.it[i];
        for (int i = 0; i < nr.n; i++) nall.it[nall.n++] = nr.it[i];
        A[0] = batch, A[1] = mall, A[2] = k;
        B[0] = batch, B[1] = k, B[2] = nall;
        out[0] = batch, out[1] = mall, out[2] = nall;
    }
    int a = mm_operand(b, m, 0, A), bb = mm_operand(b, m, 1, B);
    if (a < 0 || bb < 0) return fail(b);
    /* [Mf, Mr, K] x [K, N]: B is shared by every Mf, so the product is one
     * GEMM of Mf * Mr rows (a view of A), not Mf batched GEMMs of Mr rows:
     * GCN's [11, 21, 256] x [256, 3136] ran as 11 GEMMs of 21 rows, which
     * oneDNN blocks poorly (measured in docs/einnet.md) */
    if (!batch.n && !nf.n && mf.n && b->g->values[a].shape.rank == 3) {
        const ts_shape *as = &b->g->values[a].shape;
        a = reshape(b, a, (int64_t[]){as->dims[0] * as->dims[1], as->dims[2]}, 2);
        if (a < 0) return fail(b);
    }
    int ins[2] = {a, bb};
    int v = node(b, "MatMul", ins, 2, NULL, 0);
    tref *t = &b->scope[s];
    *t = (tref){.nd = e->scope[s].ntrav};
    int64_t dims[TS_MAX_RANK];
    int j = 0;
    for (int gi = 0; gi < 3; gi++)
        for (int i = 0; i < out[gi].n; i++) {
            int it = out[gi].it[i];
            t->lay[j] = pos_in(e->scope[s].trav, e->scope[s].ntrav, it);
            dims[j++] = e->iter[it].hi - e->iter[it].lo;
        }
    t->v = reshape(b, v, dims, j);
    return t->v < 0 ? fail(b) : TS_OK;
}

/* Read rn of scope s at each of npts points (values of the summation
 * iterators in vals[pt*EIN_MAX_ITERS...]) as tensors in traversal order,
 * dimensions the read does not span being 1; writes the value ids (-1 for
 * a point wholly out of range, which reads 0). */
typedef struct arrange {
    int perm[TS_MAX_RANK], nd;     /* physical dims of a sliced point, in traversal order */
    int64_t dims[EIN_MAX_TRAV];    /* the scope's traversal shape, 1 where the read does not span */
    int ntrav;
} arrange;

/* Puts a sliced point (or a sum of them: every point of one read slices
 * the same dimensions) in traversal order. */
static int arranged(bld *b, int v, const arrange *a)
{
    return reshape(b, transpose(b, v, a->perm, a->nd), a->dims, a->ntrav);
}

static ts_status read_points(bld *b, int s, int rn, const int64_t *vals, int npts, int *outv, arrange *arr)
{
    const ts_ein *e = b->e;
    const ts_ein_scope *sc = &e->scope[s];
    const ts_ein_node *r = &e->node[rn];
    tref t;
    if (src_ref(b, r->src, &t)) return b->err->code;
    rslice rs[EIN_MAX_UNROLL];
    bool skip[EIN_MAX_UNROLL] = {0};
    int64_t before[TS_MAX_RANK] = {0}, after[TS_MAX_RANK] = {0};
    for (int pt = 0; pt < npts; pt++) {
        if (!read_slice(e, s, rn, vals + pt * EIN_MAX_ITERS, true, &rs[pt])) return fail(b);
        for (int d = 0; d < r->rank; d++) {
            int64_t len = rs[pt].tpos[d] >= 0 ? e->iter[sc->trav[rs[pt].tpos[d]]].hi - e->iter[sc->trav[rs[pt].tpos[d]]].lo : 1;
            int64_t first = rs[pt].start[d], last = first + (len - 1) * (rs[pt].step[d] ? rs[pt].step[d] : 1);
            if (last < 0 || first >= t.ext[d]) skip[pt] = true;
        }
        for (int d = 0; d < r->rank && !skip[pt]; d++) {
            int64_t len = rs[pt].tpos[d] >= 0 ? e->iter[sc->trav[rs[pt].tpos[d]]].hi - e->iter[sc->trav[rs[pt].tpos[d]]].lo : 1;
            int64_t first = rs[pt].start[d], last = first + (len - 1) * (rs[pt].step[d] ? rs[pt].step[d] : 1);
            if (-first > before[d]) before[d] = -first;
            if (last + 1 - t.ext[d] > after[d]) after[d] = last + 1 - t.ext[d];
        }
    }
    int padded = t.v;
    bool any_pad = false;
    for (int d = 0; d < r->rank; d++) any_pad |= before[d] || after[d];
    if (any_pad) {
        int64_t pads[2 * TS_MAX_RANK];
        for (int j = 0; j < t.nd; j++) pads[j] = before[t.lay[j]], pads[t.nd + j] = after[t.lay[j]];
        int ins[2] = {t.v, i64s(b, pads, 2 * t.nd)};
        if (ins[1] < 0 || (padded = node(b, "Pad", ins, 2, NULL, 0)) < 0) return fail(b);
    }
    for (int pt = 0; pt < npts; pt++) {
        outv[pt] = -1;
        if (skip[pt]) continue;
        int64_t st[TS_MAX_RANK], en[TS_MAX_RANK], ax[TS_MAX_RANK], sp[TS_MAX_RANK], full_dims = 0;
        int nax = 0;
        int64_t pdims[TS_MAX_RANK]; /* physical dims after slicing */
        for (int j = 0; j < t.nd; j++) {
            int d = t.lay[j];
            int tp = rs[pt].tpos[d];
            int64_t len = tp >= 0 ? e->iter[sc->trav[tp]].hi - e->iter[sc->trav[tp]].lo : 1;
            int64_t step = rs[pt].step[d] ? rs[pt].step[d] : 1, first = rs[pt].start[d] + before[d];
            int64_t whole = t.ext[d] + before[d] + after[d];
            pdims[j] = len;
            if (first == 0 && step == 1 && len == whole) {
                full_dims++;
                continue;
            }
            st[nax] = first;
            en[nax] = first + (len - 1) * step + 1;
            ax[nax] = j;
            sp[nax++] = step;
        }
        int v = padded;
        if (nax) {
            bool unit = true; /* the steps input only when needed: the fast Slice takes none */
            for (int k = 0; k < nax; k++) unit &= sp[k] == 1;
            int ins[5] = {padded, i64s(b, st, nax), i64s(b, en, nax), i64s(b, ax, nax), unit ? 0 : i64s(b, sp, nax)};
            for (int k = 1; k < 5; k++)
                if (ins[k] < 0) return fail(b);
            if ((v = node(b, "Slice", ins, unit ? 4 : 5, NULL, 0)) < 0) return fail(b);
        }
        /* physical dims in traversal order, single points last */
        int perm[TS_MAX_RANK], np = 0;
        for (int p = 0; p < sc->ntrav; p++)
            for (int j = 0; j < t.nd; j++)
                if (rs[pt].tpos[t.lay[j]] == p) perm[np++] = j;
        for (int j = 0; j < t.nd; j++)
            if (rs[pt].tpos[t.lay[j]] < 0) perm[np++] = j;
        memcpy(arr->perm, perm, sizeof perm);
        arr->nd = t.nd;
        arr->ntrav = sc->ntrav;
        for (int p = 0; p < sc->ntrav; p++) {
            arr->dims[p] = 1;
            for (int j = 0; j < t.nd; j++)
                if (rs[pt].tpos[t.lay[j]] == p) arr->dims[p] = pdims[j];
        }
        outv[pt] = v;
        (void)full_dims;
    }
    return TS_OK;
}

static void trav_ref(bld *b, int s, int v)
{
    const ts_ein_scope *sc = &b->e->scope[s];
    tref *t = &b->scope[s];
    *t = (tref){.v = v, .nd = sc->ntrav};
    for (int p = 0; p < sc->ntrav; p++) {
        t->lay[p] = p;
        t->lo[p] = b->e->iter[sc->trav[p]].lo;
        t->ext[p] = b->e->iter[sc->trav[p]].hi - t->lo[p];
    }
}

static ts_status build_reduce(bld *b, int s)
{
    const ts_ein *e = b->e;
    const ts_ein_scope *sc = &e->scope[s];
    /* the source first: building a nested reduction must not interleave
     * with this one's enumeration */
    tref src;
    if (src_ref(b, e->node[sc->body].src, &src)) return b->err->code;
    int64_t vals[EIN_MAX_UNROLL * EIN_MAX_ITERS];
    int npts = 0;
    int64_t cur[EIN_MAX_ITERS] = {0};
    for (int d = 0; d < sc->nsum; d++) cur[sc->sum[d]] = e->iter[sc->sum[d]].lo;
    for (;;) {
        memcpy(vals + npts * EIN_MAX_ITERS, cur, sizeof cur);
        npts++;
        int d = sc->nsum - 1;
        for (; d >= 0; d--) {
            if (++cur[sc->sum[d]] < e->iter[sc->sum[d]].hi) break;
            cur[sc->sum[d]] = e->iter[sc->sum[d]].lo;
        }
        if (d < 0) break;
    }
    int outv[EIN_MAX_UNROLL];
    arrange arr;
    if (read_points(b, s, sc->body, vals, npts, outv, &arr)) return b->err->code;
    int acc = -1;
    for (int pt = 0; pt < npts; pt++) {
        if (outv[pt] < 0) continue;
        if (acc < 0) {
            acc = outv[pt];
            continue;
        }
        int ins[2] = {acc, outv[pt]};
        if ((acc = node(b, "Add", ins, 2, NULL, 0)) < 0) return fail(b);
    }
    if (acc < 0) return ts_error_set(b->err, TS_ERR_UNSUPPORTED, "einnet: a reduction reads only padding");
    /* summed in the source's layout, put in traversal order once */
    if ((acc = arranged(b, acc, &arr)) < 0) return fail(b);
    trav_ref(b, s, acc);
    return TS_OK;
}

static int build_arith(bld *b, int s, int n)
{
    const ts_ein_node *x = &b->e->node[n];
    static const char *ops[] = {[EIN_ADD] = "Add", [EIN_SUB] = "Sub", [EIN_MUL] = "Mul", [EIN_DIV] = "Div",
                                [EIN_NEG] = "Neg", [EIN_RELU] = "Relu"};
    if (x->op == EIN_READ) {
        int64_t zero[EIN_MAX_ITERS] = {0};
        int v;
        arrange arr;
        if (read_points(b, s, n, zero, 1, &v, &arr)) return -1;
        return v < 0 ? scalar(b, 0) : arranged(b, v, &arr);
    }
    if (x->op == EIN_NUM) return scalar(b, x->num);
    int ins[2] = {build_arith(b, s, x->a), x->b >= 0 ? build_arith(b, s, x->b) : 0};
    if (ins[0] < 0 || ins[1] < 0) return -1;
    return node(b, ops[x->op], ins, x->b >= 0 ? 2 : 1, NULL, 0);
}

/* Whether a reader of scope s reads, at one of its dimensions, the
 * innermost traversal iterator of the scope it is in (the eOperator's
 * contiguous, vectorized loop) while that dimension is in MatMul s's M
 * group: then the operands are swapped so it becomes N, the innermost
 * dimension of the MatMul's result, and the eOperator reads it
 * contiguously (a 1x11 conv's OffsetReduce read its [11, H*W, 21] result
 * at stride 21 and took longer than the Slices and Adds it replaced). */
static bool inner_in_m(const ts_ein *e, int s, const mm *m)
{
    for (int k = 0; k < e->nscope; k++) {
        if (k == s || !e->scope[k].ntrav) continue;
        int last = e->scope[k].trav[e->scope[k].ntrav - 1];
        for (int n = 0; n < e->nnode; n++) {
            const ts_ein_node *r = &e->node[n];
            if (r->op != EIN_READ || r->src != -s - 1) continue;
            for (int d = 0; d < r->rank && d < e->scope[s].ntrav; d++) {
                if (!ts_ein_idx_coef(&e->idx[r->idx + d], last)) continue;
                int it = e->scope[s].trav[d];
                for (int j = 0; j < m->ngrp[G_M]; j++)
                    if (m->grp[G_M][j] == it) return true;
            }
        }
    }
    return false;
}

/* t's value with its logical dimensions in order (physical = logical). */
static int in_logical_order(bld *b, const tref *t)
{
    int perm[TS_MAX_RANK];
    for (int d = 0; d < t->nd; d++)
        for (int j = 0; j < t->nd; j++)
            if (t->lay[j] == d) perm[d] = j;
    return transpose(b, t->v, perm, t->nd);
}

/* Phase scope: the source's phased dims split (y, a) by a Reshape, then
 * one Transpose into traversal order (phases outermost). */
static ts_status build_phase(bld *b, int s)
{
    const ts_ein *e = b->e;
    const ts_ein_scope *sc = &e->scope[s];
    const ts_ein_node *r = &e->node[sc->body];
    tref t;
    if (src_ref(b, r->src, &t)) return b->err->code;
    int v = in_logical_order(b, &t), its[TS_MAX_RANK], n = 0;
    int64_t dims[TS_MAX_RANK];
    for (int d = 0; d < r->rank; d++) {
        const ts_ein_idx *x = &e->idx[r->idx + d];
        if (plain(x)) {
            its[n] = x->it[0], dims[n++] = t.ext[d];
            continue;
        }
        int ka = x->co[0] == 1 ? 0 : 1;
        int64_t f = x->co[1 - ka];
        its[n] = x->it[1 - ka], dims[n++] = t.ext[d] / f;
        its[n] = x->it[ka], dims[n++] = f;
    }
    int perm[TS_MAX_RANK];
    for (int p = 0; p < sc->ntrav; p++)
        for (int j = 0; j < n; j++)
            if (its[j] == sc->trav[p]) perm[p] = j;
    v = transpose(b, reshape(b, v, dims, n), perm, n);
    if (v < 0) return fail(b);
    trav_ref(b, s, v);
    return TS_OK;
}

/* Conv scope: the source's batch dims merged, one Conv (with the bias
 * value `bias`, -1: none), the result left as [batch..., F, O...]. */
static ts_status build_conv(bld *b, int s, int bias)
{
    const ts_ein *e = b->e;
    const ts_ein_scope *sc = &e->scope[s];
    cv c;
    if (!conv_analyze(e, s, &c)) return fail(b);
    const ts_ein_node *x = &e->node[c.xr], *w = &e->node[c.wr];
    tref t;
    if (src_ref(b, x->src, &t)) return b->err->code;
    int64_t dims[TS_MAX_RANK], B = 1;
    for (int d = 0; d < c.nb; d++) B *= t.ext[d];
    dims[0] = B;
    for (int d = c.nb; d < x->rank; d++) dims[1 + d - c.nb] = t.ext[d];
    int v = reshape(b, in_logical_order(b, &t), dims, 2 + c.nsp);
    int64_t st[TS_WIN_MAX], dl[TS_WIN_MAX], pads[2 * TS_WIN_MAX];
    for (int i = 0; i < c.nsp; i++) {
        st[i] = c.stride[i], dl[i] = c.dil[i];
        pads[i] = c.pb[i], pads[c.nsp + i] = c.pe[i];
    }
    ts_attr at[3] = {ts_attr_ints("strides", st, c.nsp), ts_attr_ints("dilations", dl, c.nsp),
                     ts_attr_ints("pads", pads, 2 * c.nsp)};
    int ins[3] = {v, b->inputs[w->src], bias};
    if (v < 0 || (v = node(b, "Conv", ins, bias >= 0 ? 3 : 2, at, 3)) < 0) return fail(b);
    tref *o = &b->scope[s];
    *o = (tref){.nd = sc->ntrav};
    int j = 0;
    for (int d = 0; d < c.nb; d++) {
        int it = e->idx[x->idx + d].it[0];
        o->lay[j] = pos_in(sc->trav, sc->ntrav, it);
        dims[j++] = t.ext[d];
    }
    o->lay[j] = pos_in(sc->trav, sc->ntrav, c.f);
    dims[j++] = e->iter[c.f].hi;
    for (int i = 0; i < c.nsp; i++) {
        o->lay[j] = pos_in(sc->trav, sc->ntrav, c.o[i]);
        dims[j++] = e->iter[c.o[i]].hi;
    }
    for (int p = 0; p < sc->ntrav; p++) {
        o->lo[p] = e->iter[sc->trav[p]].lo;
        o->ext[p] = e->iter[sc->trav[p]].hi - o->lo[p];
    }
    o->v = reshape(b, v, dims, j);
    return o->v < 0 ? fail(b) : TS_OK;
}

/* B [Bt, L, C] (t's value in logical order) as the rows each block of
 * G2_BLOCK rows can reach: [Bt, L/BK, 3 BK, C] (padded by a block of
 * zeros each side, then one Gather of whole blocks, block b's window
 * being blocks b, b+1, b+2: one copy of BK x C rows (16 KiB in
 * Longformer), where three Slices and a Concat wrote the windows twice;
 * measured in docs/einnet.md). */
static int g2_windows(bld *b, const tref *t, int64_t Bt, int64_t L, int64_t C)
{
    int64_t BK = G2_BLOCK, nb = L / BK;
    int k = reshape(b, in_logical_order(b, t), (int64_t[]){Bt, L, C}, 3);
    int ins[2] = {k, i64s(b, (int64_t[]){0, BK, 0, 0, BK, 0}, 6)};
    if (k < 0 || ins[1] < 0 || (k = node(b, "Pad", ins, 2, NULL, 0)) < 0) return -1;
    k = reshape(b, k, (int64_t[]){Bt, nb + 2, BK, C}, 4);
    int64_t *blocks = malloc(sizeof *blocks * (size_t)(3 * nb));
    if (!blocks) return ts_error_set(b->err, TS_ERR_NOMEM, "out of memory in einnet"), -1;
    for (int64_t i = 0; i < 3 * nb; i++) blocks[i] = i / 3 + i % 3;
    int gi[2] = {k, i64s(b, blocks, (int)(3 * nb))};
    free(blocks);
    ts_attr ax = ts_attr_int("axis", 1);
    if (k < 0 || gi[1] < 0 || (k = node(b, "Gather", gi, 2, &ax, 1)) < 0) return -1; /* [Bt, 3 nb, BK, C] */
    return reshape(b, k, (int64_t[]){Bt, nb, 3 * BK, C}, 4);
}

/* The result of a band builder, [batch..., L, last] (last: the iterator
 * `last` of the scope), as scope s's tref. */
static ts_status g2_result(bld *b, int s, const g2 *q, const tref *ta, int rn, int last, int64_t nlast, int v)
{
    const ts_ein *e = b->e;
    const ts_ein_scope *sc = &e->scope[s];
    tref *o = &b->scope[s];
    *o = (tref){.nd = sc->ntrav};
    int64_t dims[TS_MAX_RANK];
    int j = 0;
    for (int d = 0; d < q->nb; d++) {
        o->lay[j] = pos_in(sc->trav, sc->ntrav, e->idx[e->node[rn].idx + d].it[0]);
        dims[j++] = ta->ext[d];
    }
    o->lay[j] = pos_in(sc->trav, sc->ntrav, q->i), dims[j++] = q->L;
    o->lay[j] = pos_in(sc->trav, sc->ntrav, last), dims[j++] = nlast;
    for (int p = 0; p < sc->ntrav; p++) {
        o->lo[p] = e->iter[sc->trav[p]].lo;
        o->ext[p] = e->iter[sc->trav[p]].hi - o->lo[p];
    }
    o->v = v < 0 ? -1 : reshape(b, v, dims, j);
    return o->v < 0 ? fail(b) : TS_OK;
}

/* What both blocked forms start from: the band's analysis (analyze: the
 * scores' or the context's), the tensors of its two reads, the batch they
 * share flattened (Bt), the block count and the band's offset in a block. */
typedef struct g2_setup {
    g2 q;
    tref ta, tb;
    int64_t Bt, BK, nb, off;
} g2_setup;

static ts_status g2_begin(bld *b, int s, bool (*analyze)(const ts_ein *, int, g2 *), g2_setup *u)
{
    const ts_ein *e = b->e;
    if (!analyze(e, s, &u->q)) return fail(b);
    if (src_ref(b, e->node[u->q.ar].src, &u->ta) || src_ref(b, e->node[u->q.br].src, &u->tb)) return b->err->code;
    u->BK = G2_BLOCK;
    u->nb = u->q.L / u->BK;
    u->off = u->BK - (u->q.J - 1) / 2;
    u->Bt = 1;
    for (int d = 0; d < u->q.nb; d++) u->Bt *= u->ta.ext[d];
    return TS_OK;
}

/* The band's counterpart blocked: each block of probabilities [BK, J]
 * skewed into the dense [BK, 3BK] it is in the reached rows (pad each row
 * to 3BK + 1 with the band at column t + j + off, flatten, keep BK * 3BK,
 * read as [BK, 3BK]), times those rows [3BK, C]: one batched MatMul. */
static ts_status build_g2bmm_t(bld *b, int s)
{
    g2_setup u;
    if (g2_begin(b, s, g2t_analyze, &u)) return b->err->code;
    const g2 q = u.q;
    const int64_t Bt = u.Bt, BK = u.BK, nb = u.nb, off = u.off;
    tref ta = u.ta, tb = u.tb;
    const ts_ein_node *y = &b->e->node[q.br];
    int p = reshape(b, in_logical_order(b, &ta), (int64_t[]){Bt, nb, BK, q.J}, 4);
    int ins[2] = {p, i64s(b, (int64_t[]){0, 0, 0, off, 0, 0, 0, 3 * BK + 1 - q.J - off}, 8)};
    if (p < 0 || ins[1] < 0 || (p = node(b, "Pad", ins, 2, NULL, 0)) < 0) return fail(b);
    p = reshape(b, p, (int64_t[]){Bt, nb, BK * (3 * BK + 1)}, 3);
    int si[4] = {p, i64s(b, (int64_t[]){0}, 1), i64s(b, (int64_t[]){BK * 3 * BK}, 1), i64s(b, (int64_t[]){2}, 1)};
    if (p < 0 || si[1] < 0 || si[2] < 0 || si[3] < 0 || (p = node(b, "Slice", si, 4, NULL, 0)) < 0) return fail(b);
    p = reshape(b, p, (int64_t[]){Bt, nb, BK, 3 * BK}, 4);
    int mm[2] = {p, g2_windows(b, &tb, Bt, q.L, q.C)};
    int v = p < 0 || mm[1] < 0 ? -1 : node(b, "MatMul", mm, 2, NULL, 0); /* [Bt, nb, BK, C] */
    int c = b->e->idx[y->idx + y->rank - 1].it[0];
    return g2_result(b, s, &q, &ta, q.ar, c, q.C, v);
}

/* G2BMM blocked: rows in blocks of G2_BLOCK; each block of A against the
 * three blocks of B its band can reach (B padded by a block each side,
 * three Slices, a Concat) as one batched MatMul [BK, C] x [C, 3 BK], then
 * the band taken out of the dense block by the skew: [BK, 3BK] flattened,
 * padded by BK, read as [BK, 3BK + 1] (row t starts t further), Slice J
 * columns.  1.5x the multiply-adds of the band, at MatMul speed. */
static ts_status build_g2bmm(bld *b, int s)
{
    g2_setup u;
    if (g2_begin(b, s, g2_analyze, &u)) return b->err->code;
    const g2 q = u.q;
    const int64_t Bt = u.Bt, BK = u.BK, nb = u.nb, off = u.off;
    tref ta = u.ta, tb = u.tb;
    int a = reshape(b, in_logical_order(b, &ta), (int64_t[]){Bt, nb, BK, q.C}, 4);
    int kw = transpose(b, g2_windows(b, &tb, Bt, q.L, q.C), (const int[]){0, 1, 3, 2}, 4);
    int ins[2];
    if (a < 0) return fail(b);
    int mm[2] = {a, kw};
    int m = kw < 0 ? -1 : node(b, "MatMul", mm, 2, NULL, 0); /* [Bt, nb, BK, 3BK] */
    m = reshape(b, m, (int64_t[]){Bt, nb, BK * 3 * BK}, 3);
    ins[0] = m, ins[1] = i64s(b, (int64_t[]){0, 0, 0, 0, 0, BK}, 6);
    if (m < 0 || ins[1] < 0 || (m = node(b, "Pad", ins, 2, NULL, 0)) < 0) return fail(b);
    m = reshape(b, m, (int64_t[]){Bt, nb, BK, 3 * BK + 1}, 4);
    int si[4] = {m, i64s(b, (int64_t[]){off}, 1), i64s(b, (int64_t[]){off + q.J}, 1), i64s(b, (int64_t[]){3}, 1)};
    if (m < 0 || si[1] < 0 || si[2] < 0 || si[3] < 0 || (m = node(b, "Slice", si, 4, NULL, 0)) < 0) return fail(b);
    return g2_result(b, s, &q, &ta, q.ar, q.j, q.J, m); /* [batch..., L, J] */
}

/* An element-wise scope "Conv scope + bias[f]" (the translation of a
 * Conv with bias): the bias goes into the Conv node, and the scope is the
 * Conv's result rearranged.  Returns the read node of the Conv scope to
 * build the scope from, or -1 when the body is not that. */
static int bias_fusable(bld *b, int s, int *bias)
{
    const ts_ein *e = b->e;
    const ts_ein_node *x = &e->node[e->scope[s].body];
    if (x->op != EIN_ADD) return -1;
    for (int o = 0; o < 2; o++) {
        int rn = o ? x->b : x->a, bn = o ? x->a : x->b;
        const ts_ein_node *r = &e->node[rn], *bb = &e->node[bn];
        if (r->op != EIN_READ || bb->op != EIN_READ || r->src >= 0 || bb->src < 0 || bb->rank != 1) continue;
        int cs = ts_ein_src_scope(r->src);
        cv c;
        if (b->done[cs] || !conv_analyze(e, cs, &c)) continue;
        int readers = 0;
        for (int n = 0; n < e->nnode; n++) readers += e->node[n].op == EIN_READ && e->node[n].src == r->src;
        int fp = pos_in(e->scope[cs].trav, e->scope[cs].ntrav, c.f);
        const ts_ein_idx *bi = &e->idx[bb->idx], *fi = &e->idx[r->idx + fp];
        if (readers != 1 || !plain(bi) || !plain(fi) || bi->it[0] != fi->it[0] ||
            e->in_shape[bb->src].dims[0] != e->iter[c.f].hi)
            continue;
        for (int d = 0; d < r->rank; d++)
            if (!plain(&e->idx[r->idx + d])) return -1;
        *bias = b->inputs[bb->src];
        return rn;
    }
    return -1;
}

static ts_status scope_build(bld *b, int s)
{
    mm m;
    ts_status st;
    switch (ts_ein_scope_kind(b->e, s)) {
    case EIN_KIND_MATMUL:
        mm_analyze(b->e, s, &m);
        if (b->mixed && inner_in_m(b->e, s, &m)) { /* A x B as (B^T A^T)^T: the same scope */
            int r = m.read[0];
            m.read[0] = m.read[1], m.read[1] = r;
            int16_t g[EIN_MAX_TRAV];
            memcpy(g, m.grp[G_M], sizeof g);
            memcpy(m.grp[G_M], m.grp[G_N], sizeof g);
            memcpy(m.grp[G_N], g, sizeof g);
            int n = m.ngrp[G_M];
            m.ngrp[G_M] = m.ngrp[G_N], m.ngrp[G_N] = n;
        }
        st = build_matmul(b, s, &m);
        break;
    case EIN_KIND_REDUCE: st = build_reduce(b, s); break;
    case EIN_KIND_CONV: st = build_conv(b, s, -1); break;
    case EIN_KIND_PHASE: st = build_phase(b, s); break;
    case EIN_KIND_G2BMM: st = build_g2bmm(b, s); break;
    case EIN_KIND_G2BMM_T: st = build_g2bmm_t(b, s); break;
    case EIN_KIND_ELEMENTWISE: {
        int bias = -1, rn = bias_fusable(b, s, &bias), cs = rn >= 0 ? ts_ein_src_scope(b->e->node[rn].src) : -1;
        if (rn >= 0) {
            if (build_conv(b, cs, bias)) return b->err->code;
            b->done[cs] = true;
        }
        int v = build_arith(b, s, rn >= 0 ? rn : b->e->scope[s].body);
        if (v < 0) return fail(b);
        trav_ref(b, s, v);
        st = TS_OK;
        break;
    }
    default: return ts_error_set(b->err, TS_ERR_UNSUPPORTED, "einnet: scope %d has no instantiation", s);
    }
    if (st) return st;
    /* logical ranges of the scope, whatever the builder's layout */
    const ts_ein_scope *sc = &b->e->scope[s];
    for (int p = 0; p < sc->ntrav; p++) {
        b->scope[s].lo[p] = b->e->iter[sc->trav[p]].lo;
        b->scope[s].ext[p] = b->e->iter[sc->trav[p]].hi - b->scope[s].lo[p];
    }
    b->done[s] = true;
    return TS_OK;
}

ts_status ts_ein_instantiate(const ts_ein *e, ts_graph *g, const int *inputs, const char *prefix, int *out,
                             ts_error *err)
{
    bld b = {.e = e, .g = g, .inputs = inputs, .prefix = prefix, .err = err, .dtype = TS_F32};
    if (e->ninputs) b.dtype = g->values[inputs[0]].dtype;
    if (g->opset < 11) return ts_error_set(err, TS_ERR_UNSUPPORTED, "einnet: opset %d < 11 (Pad/Slice as inputs)", g->opset);
    if (scope_build(&b, 0)) return err->code;
    const tref *t = &b.scope[0];
    int perm[TS_MAX_RANK];
    for (int p = 0; p < t->nd; p++)
        for (int j = 0; j < t->nd; j++)
            if (t->lay[j] == p) perm[p] = j;
    int v = transpose(&b, t->v, perm, t->nd);
    v = reshape(&b, v, e->out_shape.dims, e->out_shape.rank);
    if (v < 0) return fail(&b);
    *out = v;
    return TS_OK;
}

/* ------------------------------------------- library MatMul + eOperator */

bool ts_ein_mixable(const ts_ein *e)
{
    if (e->nscope < 2 || ts_ein_scope_kind(e, 0) == EIN_KIND_MATMUL) return false;
    int nmm = 0;
    for (int s = 0; s < e->nscope; s++) {
        ts_ein_kind k = ts_ein_scope_kind(e, s);
        if (k == EIN_KIND_NONE) return false;
        if (k != EIN_KIND_MATMUL) continue;
        nmm++;
        /* a MatMul reads inputs and other MatMuls only: it is built first */
        mm m;
        mm_analyze(e, s, &m);
        for (int o = 0; o < 2; o++) {
            int src = e->node[m.read[o]].src;
            if (src < 0 && ts_ein_scope_kind(e, ts_ein_src_scope(src)) != EIN_KIND_MATMUL) return false;
        }
    }
    return nmm > 0;
}

/* Every MatMul scope of e built as library nodes, every other scope
 * fused into one eOperator reading the MatMul results in the layout they
 * were built in (their tref: physical dim j holds position lay[j], from
 * lo[lay[j]]) and the inputs those scopes read. */
ts_status ts_ein_instantiate_mixed(const ts_ein *e, ts_graph *g, const int *inputs, const char *prefix, int *out,
                                   ts_error *err)
{
    if (!ts_ein_mixable(e)) return ts_error_set(err, TS_ERR_UNSUPPORTED, "einnet: no MatMul to keep in a library");
    if (g->opset < 11) return ts_error_set(err, TS_ERR_UNSUPPORTED, "einnet: opset %d < 11", g->opset);
    bld b = {.e = e, .g = g, .inputs = inputs, .prefix = prefix, .err = err, .dtype = TS_F32, .mixed = true};
    if (e->ninputs) b.dtype = g->values[inputs[0]].dtype;
    for (int s = 1; s < e->nscope; s++)
        if (ts_ein_scope_kind(e, s) == EIN_KIND_MATMUL && !b.done[s] && scope_build(&b, s)) return err->code;
    /* the eOperator: e without its MatMul scopes, whose reads become reads of new inputs */
    ts_ein f = *e;
    int map_in[EIN_MAX_INPUTS], map_mm[EIN_MAX_SCOPES], vals[EIN_MAX_INPUTS], nin = 0;
    bool used_in[EIN_MAX_INPUTS] = {0}, used_mm[EIN_MAX_SCOPES] = {0};
    /* which inputs and MatMul scopes the remaining scopes read: walk each body */
    for (int s = 0; s < e->nscope; s++) {
        if (ts_ein_scope_kind(e, s) == EIN_KIND_MATMUL) continue;
        int stack[EIN_MAX_NODES], sp = 0;
        stack[sp++] = e->scope[s].body;
        while (sp) {
            const ts_ein_node *x = &e->node[stack[--sp]];
            if (x->op == EIN_READ) {
                if (x->src >= 0) used_in[x->src] = true;
                else if (ts_ein_scope_kind(e, ts_ein_src_scope(x->src)) == EIN_KIND_MATMUL)
                    used_mm[ts_ein_src_scope(x->src)] = true;
                continue;
            }
            if (x->op == EIN_NUM) continue;
            if (x->a >= 0 && sp < EIN_MAX_NODES) stack[sp++] = x->a;
            if (x->b >= 0 && sp < EIN_MAX_NODES) stack[sp++] = x->b;
        }
    }
    for (int i = 0; i < e->ninputs; i++) {
        map_in[i] = -1;
        if (!used_in[i]) continue;
        if (nin == EIN_MAX_INPUTS) return ts_error_set(err, TS_ERR_UNSUPPORTED, "einnet: too many eOperator inputs");
        f.in_shape[nin] = e->in_shape[i];
        vals[nin] = inputs[i];
        map_in[i] = nin++;
    }
    for (int s = 0; s < e->nscope; s++) {
        map_mm[s] = -1;
        if (!used_mm[s]) continue;
        if (nin == EIN_MAX_INPUTS) return ts_error_set(err, TS_ERR_UNSUPPORTED, "einnet: too many eOperator inputs");
        f.in_shape[nin] = g->values[b.scope[s].v].shape;
        if (f.in_shape[nin].rank != b.scope[s].nd)
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "einnet: a MatMul result of another rank than its scope");
        vals[nin] = b.scope[s].v;
        map_mm[s] = nin++;
    }
    f.ninputs = nin;
    for (int n = 0; n < f.nnode; n++) {
        ts_ein_node *x = &f.node[n];
        if (x->op != EIN_READ) continue;
        if (x->src >= 0) {
            x->src = (int16_t)(map_in[x->src] >= 0 ? map_in[x->src] : x->src); /* unused reads are dropped by gc */
            continue;
        }
        int s = ts_ein_src_scope(x->src);
        if (map_mm[s] < 0) continue;
        const tref *t = &b.scope[s];
        ts_ein_idx old[EIN_MAX_TRAV];
        for (int d = 0; d < x->rank; d++) old[d] = e->idx[x->idx + d];
        for (int j = 0; j < t->nd; j++) {
            ts_ein_idx ix = old[t->lay[j]];
            ix.c -= t->lo[t->lay[j]];
            f.idx[x->idx + j] = ix;
        }
        x->src = (int16_t)map_mm[s];
    }
    ts_ein_gc(&f);
    size_t need = ts_ein_to_text(&f, NULL, 0) + 1;
    char text[16384];
    if (need > sizeof text) return ts_error_set(err, TS_ERR_UNSUPPORTED, "einnet: eOperator text too long");
    ts_ein_to_text(&f, text, sizeof text);
    ts_ein check;
    if (ts_ein_from_text(text, &check, err)) return err->code; /* what the node will parse */
    char name[200];
    fresh(&b, "eop", name, sizeof name);
    const char *oname = name;
    ts_attr at = ts_attr_string("expr", text);
    if (ts_graph_add_node(g, "tsopt.EinNetOp", name, vals, nin, &at, 1, 1, &oname, out, err) < 0) return err->code;
    return TS_OK;
}
