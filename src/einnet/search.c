/* Explorative derivation (paper section 6.1): breadth first from the
 * operator's expression, every rule at every place, boundaries tightened
 * after each step (tightening is a normalization: it only ever helps the
 * matcher), duplicates dropped by fingerprint (fingerprint.c).  The
 * paper's converging phase, which steers toward one target operator by
 * the distance of the iterator mapping table, is replaced here by the
 * acceptance test on every state (every scope instantiable), which is
 * affordable at the depths a single operator needs (docs/einnet.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "einnet/derive.h"

typedef struct state {
    ts_ein e;
    char path[96];
    int depth;
} state;

typedef struct seen {
    uint64_t *keys;
    size_t cap, n;
} seen;

/* true when newly inserted */
static bool seen_add(seen *s, uint64_t h)
{
    if (!h) h = 1;
    size_t i = h & (s->cap - 1);
    while (s->keys[i]) {
        if (s->keys[i] == h) return false;
        i = (i + 1) & (s->cap - 1);
    }
    s->keys[i] = h;
    s->n++;
    return true;
}

typedef struct run {
    const ts_ein_search_opts *o;
    state *q;
    int nq, head, cap;
    seen seen;
    ts_ein_found *found;
    int nfound, max;
    ts_ein_search_stats *st;
    state tmp;
} run;

static void offer(run *r, const state *from, const char *rule)
{
    state *t = &r->tmp;
    while (ts_ein_tighten(&t->e)) {
    }
    if (!seen_add(&r->seen, ts_ein_fingerprint(&t->e))) {
        r->st->duplicates++;
        return;
    }
    r->st->visited++;
    t->depth = from->depth + 1;
    /* the path is for the reader: a long one is cut */
    size_t len = strlen(from->path);
    memcpy(t->path, from->path, len + 1);
    if (len + strlen(rule) + 2 < sizeof t->path) {
        if (len) t->path[len++] = ',';
        memcpy(t->path + len, rule, strlen(rule) + 1);
    }
    if (t->depth > r->st->depth_reached) r->st->depth_reached = t->depth;
    if (r->o->accept && r->nfound < r->max && r->o->accept(&t->e, r->o->arg)) {
        r->found[r->nfound].e = t->e;
        snprintf(r->found[r->nfound].path, sizeof r->found[r->nfound].path, "%s", t->path);
        r->nfound++;
    }
    if (t->depth < r->o->max_depth && r->nq < r->cap) r->q[r->nq++] = *t;
    else if (r->nq >= r->cap) r->st->truncated = true;
}

/* whether node n is in the subtree at m (reads end a subtree) */
static bool in_body(const ts_ein *e, int m, int n)
{
    if (m == n) return true;
    const ts_ein_node *y = &e->node[m];
    if (y->op == EIN_READ) return false;
    return (y->a >= 0 && in_body(e, y->a, n)) || (y->b >= 0 && in_body(e, y->b, n));
}

/* Factors a traversal may be split by: coefficients above 1 of the
 * summation iterators in the reads of inputs (dilations) and of the
 * traversal ones (strides). */
static int split_factors(const ts_ein *e, int64_t *fac, int max)
{
    int n = 0;
    for (int k = 0; k < e->nnode; k++) {
        const ts_ein_node *x = &e->node[k];
        if (x->op != EIN_READ || x->src < 0) continue;
        for (int d = 0; d < x->rank; d++) {
            const ts_ein_idx *ix = &e->idx[x->idx + d];
            for (int t = 0; t < ix->n; t++) {
                int64_t c = ix->co[t] < 0 ? -ix->co[t] : ix->co[t];
                bool dup = c < 2;
                for (int j = 0; j < n; j++) dup |= fac[j] == c;
                if (!dup && n < max) fac[n++] = c;
            }
        }
    }
    return n;
}

static void expand_phases(run *r, const state *s)
{
    const ts_ein *e = &s->e;
    int64_t fac[8];
    int nf = split_factors(e, fac, 8);
    for (int sc = 0; sc < e->nscope; sc++) {
        for (int p = 0; p < e->scope[sc].ntrav; p++)
            for (int i = 0; i < nf; i++)
                if (ts_ein_split_trav(e, sc, p, fac[i], &r->tmp.e)) offer(r, s, "tsplit");
        for (int k = 0; k < 4; k++)
            if (ts_ein_extract_phase(e, sc, k, &r->tmp.e)) offer(r, s, "phase");
    }
}

static void expand(run *r, const state *s)
{
    const ts_ein *e = &s->e;
    if (r->o->phases) {
        expand_phases(r, s);
        return;
    }
    for (int sc = 0; sc < e->nscope; sc++) {
        const ts_ein_scope *c = &e->scope[sc];
        for (unsigned m = 1; c->nsum >= 2 && m + 1 < (1u << c->nsum); m++)
            if (ts_ein_split_sum(e, sc, m, &r->tmp.e)) offer(r, s, "split");
        for (int k = 0; k < 4; k++)
            if (ts_ein_extract_read(e, sc, k, &r->tmp.e)) offer(r, s, "extract");
        if (!sc) continue;
        /* substitution candidates: every index of every read in the body */
        for (int n = 0; n < e->nnode; n++) {
            const ts_ein_node *x = &e->node[n];
            if (x->op != EIN_READ) continue;
            if (!in_body(e, c->body, n)) continue;
            for (int d = 0; d < x->rank; d++)
                for (int p = 0; p < c->ntrav; p++)
                    if (ts_ein_substitute(e, sc, p, &e->idx[x->idx + d], &r->tmp.e)) offer(r, s, "subst");
        }
    }
}

int ts_ein_search(const ts_ein *e, const ts_ein_search_opts *o, ts_ein_found *found, int max,
                  ts_ein_search_stats *st)
{
    memset(st, 0, sizeof *st);
    run *r = calloc(1, sizeof *r);
    if (!r) return -1;
    r->o = o;
    r->cap = o->max_states > 0 ? o->max_states : 1000;
    r->q = malloc(sizeof *r->q * (size_t)r->cap);
    r->seen.cap = 1;
    while (r->seen.cap < (size_t)r->cap * 8) r->seen.cap <<= 1;
    r->seen.keys = calloc(r->seen.cap, sizeof(uint64_t));
    if (!r->q || !r->seen.keys) {
        free(r->q);
        free(r->seen.keys);
        free(r);
        return -1;
    }
    r->found = found;
    r->max = max;
    r->st = st;
    state *s0 = &r->q[r->nq++];
    s0->e = *e;
    ts_ein_gc(&s0->e);
    while (ts_ein_tighten(&s0->e)) {
    }
    s0->path[0] = 0;
    s0->depth = 0;
    seen_add(&r->seen, ts_ein_fingerprint(&s0->e));
    while (r->head < r->nq && r->nfound < max) {
        state cur = r->q[r->head++];
        expand(r, &cur);
    }
    int nf = r->nfound;
    free(r->q);
    free(r->seen.keys);
    free(r);
    return nf;
}
