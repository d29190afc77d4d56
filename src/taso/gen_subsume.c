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

/* Single-output directions are indexed in a discrimination tree (the index
 * of term-rewriting provers) by their source followed by their target, each
 * flattened in preorder into symbols (operator and arity; every variable is
 * one wildcard).  A lookup walks the tree with the pair a, b, following at
 * each position both the wildcard edge (skipping the term's whole subtree)
 * and the edge of the term's own symbol.  Only directions that could rewrite
 * a into b come back; instance() then checks parameters and repeated
 * variables.
 * Bucketing by the root operator alone made the pass quadratic: with three
 * operators, 5-operator candidates met lists of tens of thousands of kept
 * rules at every subterm (docs/distributed.md). */
#define WILD (-1)
#define MAX_PRE 64 /* two terms flattened; larger pairs scan every direction */

typedef struct tnode {
    int nch, cch;
    int *sym, *child; /* edges */
    int nd, cd;
    int *dirs; /* directions whose source ends here */
} tnode;

struct gen_subsumer {
    dir *one; /* single-output directions, indexed by `tree` */
    int none, cone;
    tnode *tree; /* tree[0] is the root */
    int ntree, ctree;
    dir *multi; /* multi-output ones, scanned */
    int nmulti, cmulti;
};

static int symbol(const ts_rexpr *e) { return e->op == TS_ROP_VAR ? WILD : (int)e->op * 4 + e->nargs; }

/* e's preorder: pre[i] its nodes, end[i] the position after i's subtree. */
static int flatten(const ts_rexpr *e, const ts_rexpr **pre, int *end, int i)
{
    if (i < 0 || i >= MAX_PRE) return -1;
    int self = i++;
    pre[self] = e;
    if (e->op != TS_ROP_VAR)
        for (int k = 0; k < e->nargs && i >= 0; k++) i = flatten(e->arg[k], pre, end, i);
    if (i >= 0) end[self] = i;
    return i;
}

/* Room for element n of the array *pp points to (any element type). */
static bool grow(void *pp, int n, int *cap, size_t size)
{
    if (n < *cap) return true;
    int c = *cap ? 2 * *cap : 16;
    void *a, *t;
    memcpy(&a, pp, sizeof a);
    if (!(t = realloc(a, (size_t)c * size))) return false;
    memcpy(pp, &t, sizeof t);
    *cap = c;
    return true;
}

/* The child of node t along sym, made when `make`; -1 when absent. */
static int edge(gen_subsumer *s, int t, int sym, bool make)
{
    for (int k = 0; k < s->tree[t].nch; k++)
        if (s->tree[t].sym[k] == sym) return s->tree[t].child[k];
    if (!make || !grow(&s->tree, s->ntree, &s->ctree, sizeof *s->tree)) return -1;
    int c = s->ntree++;
    memset(&s->tree[c], 0, sizeof s->tree[c]);
    tnode *n = &s->tree[t];
    int cap = n->cch; /* sym and child grow together */
    if (!grow(&n->sym, n->nch, &cap, sizeof *n->sym) || !grow(&n->child, n->nch, &n->cch, sizeof *n->child))
        return -1;
    n->sym[n->nch] = sym, n->child[n->nch++] = c;
    return c;
}

/* Index direction d (s->one[d]) under its source. */
static bool index_dir(gen_subsumer *s, int d)
{
    const ts_rexpr *pre[MAX_PRE];
    int end[MAX_PRE];
    int n = flatten(s->one[d].to[0], pre, end, flatten(s->one[d].from[0], pre, end, 0)), t = 0;
    /* too large to index: it can only match pairs as large, which scan() checks */
    if (n < 0) return true;
    for (int i = 0; i < n && t >= 0; i++) t = edge(s, t, symbol(pre[i]), true);
    if (t < 0 || !grow(&s->tree[t].dirs, s->tree[t].nd, &s->tree[t].cd, sizeof(int))) return false;
    s->tree[t].dirs[s->tree[t].nd++] = d;
    return true;
}

/* Whether a direction found under node t from position i of the flattened
 * term rewrites a into b. */
static bool lookup(const gen_subsumer *s, int t, const ts_rexpr **pre, const int *end, int i, int n,
                   const ts_rexpr *a, const ts_rexpr *b)
{
    const tnode *tn = &s->tree[t];
    if (i == n) {
        for (int k = 0; k < tn->nd; k++) {
            const dir *d = &s->one[tn->dirs[k]];
            subst sb = {0};
            if (instance(d->from[0], a, &sb) && instance(d->to[0], b, &sb)) return true;
        }
        return false;
    }
    int sym = symbol(pre[i]);
    for (int k = 0; k < tn->nch; k++) {
        if (tn->sym[k] == WILD && lookup(s, tn->child[k], pre, end, end[i], n, a, b)) return true;
        if (tn->sym[k] == sym && sym != WILD && lookup(s, tn->child[k], pre, end, i + 1, n, a, b)) return true;
    }
    return false;
}

gen_subsumer *gen_subsumer_new(void)
{
    gen_subsumer *s = calloc(1, sizeof *s);
    if (s && !grow(&s->tree, 0, &s->ctree, sizeof *s->tree)) {
        free(s);
        return NULL;
    }
    if (s) memset(&s->tree[s->ntree++], 0, sizeof *s->tree);
    return s;
}

void gen_subsumer_free(gen_subsumer *s)
{
    if (!s) return;
    for (int i = 0; i < s->ntree; i++) {
        free(s->tree[i].sym);
        free(s->tree[i].child);
        free(s->tree[i].dirs);
    }
    free(s->tree);
    free(s->one);
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
        if (n > 1) {
            if (!grow(&s->multi, s->nmulti, &s->cmulti, sizeof d)) return false;
            s->multi[s->nmulti++] = d;
        } else {
            if (!grow(&s->one, s->none, &s->cone, sizeof d)) return false;
            s->one[s->none++] = d;
            if (!index_dir(s, s->none - 1)) return false;
        }
    }
    return true;
}

/* Every single-output direction, for terms too large to flatten. */
static bool scan(const gen_subsumer *s, const ts_rexpr *a, const ts_rexpr *b)
{
    for (int i = 0; i < s->none; i++) {
        subst sb = {0};
        if (instance(s->one[i].from[0], a, &sb) && instance(s->one[i].to[0], b, &sb)) return true;
    }
    return false;
}

static bool derive(const gen_subsumer *s, const ts_rexpr *a, const ts_rexpr *b)
{
    if (ts_rexpr_equal(a, b)) return true;
    if (a->op != TS_ROP_VAR) {
        const ts_rexpr *pre[MAX_PRE];
        int end[MAX_PRE];
        int n = flatten(b, pre, end, flatten(a, pre, end, 0));
        if (n >= 0 ? lookup(s, 0, pre, end, 0, n, a, b) : scan(s, a, b)) return true;
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
