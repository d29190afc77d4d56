/* Subsumption: which rules of a set follow from other rules of the set by
 * instantiation and congruence, checked syntactically (docs/taso.md,
 * "Subsumption").  The generator's pruning passes drop a rule when a more
 * general rule is *valid on the test inputs*; this pass instead drops a rule
 * only when rules that are *kept* (and so proved with the file) derive it:
 * every dropped rule is then reachable by the search through kept ones.
 *
 * A rewrite a -> b is derived from the kept set S when
 * - a and b are the same term;
 * - some rule K of S, in a direction it can be applied (its source not a
 *   bare variable; reversed only when its target holds every variable of its
 *   source, as ts_rules_add_reverses has it), matches a and b under one
 *   substitution of K's variables by terms (a is an instance of K's source
 *   and b of its target: Figure 4b's common subgraph is such a substitution);
 * - a and b have the same operator and parameters, and each argument pair
 *   is derived (the rewrite happens inside a common context: Figure 4c).
 * A rule of n outputs is derived when each output pair is, or when a rule of
 * S with n outputs matches it as a whole under some order of its outputs.
 * A rule that the search uses in both directions must be derived in both.
 *
 * Terms are compared strictly (ewadd's argument order matters): the graph
 * matcher does not commute arguments either. */
#include <stdlib.h>
#include <string.h>
#include "taso/gen.h"

#define MAX_BIND 32

typedef struct subst {
    int n;
    const char *var[MAX_BIND];
    const ts_rexpr *val[MAX_BIND];
} subst;

/* Whether t is an instance of pattern p, extending s. */
static bool instance(const ts_rexpr *p, const ts_rexpr *t, subst *s)
{
    if (p->op == TS_ROP_VAR) {
        for (int i = 0; i < s->n; i++)
            if (!strcmp(s->var[i], p->var)) return ts_rexpr_equal(s->val[i], t);
        if (s->n == MAX_BIND) return false;
        s->var[s->n] = p->var;
        s->val[s->n++] = t;
        return true;
    }
    if (t->op != p->op || t->nargs != p->nargs) return false;
    /* same operator and parameters: ts_rexpr_equal on the heads alone */
    ts_rexpr hp = *p, ht = *t;
    hp.nargs = ht.nargs = 0;
    if (!ts_rexpr_equal(&hp, &ht)) return false;
    for (int i = 0; i < p->nargs; i++)
        if (!instance(p->arg[i], t->arg[i], s)) return false;
    return true;
}

static bool has_var(const ts_rexpr *e, const char *v)
{
    if (e->op == TS_ROP_VAR) return !strcmp(e->var, v);
    for (int i = 0; i < e->nargs; i++)
        if (has_var(e->arg[i], v)) return true;
    return false;
}

/* Every variable of `to` occurs in one of the n `from` terms. */
static bool vars_covered(const ts_rexpr *to, ts_rexpr *const *from, int n)
{
    if (to->op == TS_ROP_VAR) {
        for (int i = 0; i < n; i++)
            if (has_var(from[i], to->var)) return true;
        return false;
    }
    for (int i = 0; i < to->nargs; i++)
        if (!vars_covered(to->arg[i], from, n)) return false;
    return true;
}

/* One usable direction of a kept rule. */
typedef struct dir {
    ts_rexpr *const *from, *const *to;
    int n;
} dir;

struct gen_subsumer {
    /* directions of single-output kept rules, bucketed by the source's
     * root operator; multi-output ones in one list */
    dir *b[TS_ROP_COUNT];
    int nb[TS_ROP_COUNT], cb[TS_ROP_COUNT];
    dir *multi;
    int nmulti, cmulti;
};

static bool push(dir **a, int *n, int *cap, dir d)
{
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 16;
        dir *t = realloc(*a, (size_t)c * sizeof *t);
        if (!t) return false;
        *a = t, *cap = c;
    }
    (*a)[(*n)++] = d;
    return true;
}

gen_subsumer *gen_subsumer_new(void) { return calloc(1, sizeof(gen_subsumer)); }

void gen_subsumer_free(gen_subsumer *s)
{
    if (!s) return;
    for (int i = 0; i < TS_ROP_COUNT; i++) free(s->b[i]);
    free(s->multi);
    free(s);
}

/* A direction from -> to is usable when no source is a bare variable and
 * the targets invent no variable. */
static bool usable(ts_rexpr *const *from, ts_rexpr *const *to, int n)
{
    for (int i = 0; i < n; i++)
        if (from[i]->op == TS_ROP_VAR || !vars_covered(to[i], from, n)) return false;
    return true;
}

bool gen_subsumer_add(gen_subsumer *s, ts_rexpr *const *l, ts_rexpr *const *r, int n)
{
    for (int k = 0; k < 2; k++) {
        ts_rexpr *const *from = k ? r : l, *const *to = k ? l : r;
        if (!usable(from, to, n)) continue;
        dir d = {from, to, n};
        bool ok = n == 1 ? push(&s->b[from[0]->op], &s->nb[from[0]->op], &s->cb[from[0]->op], d)
                         : push(&s->multi, &s->nmulti, &s->cmulti, d);
        if (!ok) return false;
    }
    return true;
}

static bool derive(const gen_subsumer *s, const ts_rexpr *a, const ts_rexpr *b)
{
    if (ts_rexpr_equal(a, b)) return true;
    if (a->op != TS_ROP_VAR) {
        const dir *ds = s->b[a->op];
        for (int i = 0; i < s->nb[a->op]; i++) {
            subst sb = {0};
            if (instance(ds[i].from[0], a, &sb) && instance(ds[i].to[0], b, &sb)) return true;
        }
    }
    if (a->op == TS_ROP_VAR || a->op != b->op || a->nargs == 0) return false;
    ts_rexpr ha = *a, hb = *b;
    ha.nargs = hb.nargs = 0;
    if (!ts_rexpr_equal(&ha, &hb)) return false;
    for (int i = 0; i < a->nargs; i++)
        if (!derive(s, a->arg[i], b->arg[i])) return false;
    return true;
}

/* A kept rule of n outputs matching from -> to as a whole, its outputs in
 * some order (n <= 4: every permutation). */
static bool derive_multi(const gen_subsumer *s, ts_rexpr *const *from, ts_rexpr *const *to, int n)
{
    if (n > 4) return false;
    int perm[4] = {0, 1, 2, 3};
    for (int i = 0; i < s->nmulti; i++) {
        const dir *d = &s->multi[i];
        if (d->n != n) continue;
        /* permutations of n <= 4 by Heap's algorithm, iteratively */
        int c[4] = {0}, p[4];
        memcpy(p, perm, sizeof p);
        for (int k = 0;;) {
            subst sb = {0};
            bool ok = true;
            for (int j = 0; j < n && ok; j++) ok = instance(d->from[j], from[p[j]], &sb);
            for (int j = 0; j < n && ok; j++) ok = instance(d->to[j], to[p[j]], &sb);
            if (ok) return true;
            while (k < n && c[k] >= k) c[k++] = 0;
            if (k >= n) break;
            int j = k % 2 ? c[k] : 0, t = p[j];
            p[j] = p[k], p[k] = t;
            c[k]++;
            k = 0;
        }
    }
    return false;
}

static bool derive_dir(const gen_subsumer *s, ts_rexpr *const *from, ts_rexpr *const *to, int n)
{
    bool each = true;
    for (int i = 0; i < n && each; i++) each = derive(s, from[i], to[i]);
    return each || (n > 1 && derive_multi(s, from, to, n));
}

bool gen_subsumer_derives(const gen_subsumer *s, ts_rexpr *const *l, ts_rexpr *const *r, int n)
{
    if (!derive_dir(s, l, r, n)) return false;
    /* the search also uses the reverse, where it is usable */
    return !usable(r, l, n) || derive_dir(s, r, l, n);
}
