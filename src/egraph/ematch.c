/* E-matching: every way a rule's source pattern (all its outputs, with one
 * binding of its variables) occurs in the e-graph.  A pattern node matches
 * an e-class through any of its e-nodes of the same atom and params, so a
 * match is a choice of e-node per pattern node; the search is a
 * backtracking walk over a to-do stack of (pattern node, class) pairs.
 * Output 0's root is sought among the classes holding its atom (the op
 * index); a later output's root among the parents of a class bound already
 * where the pattern allows (the merge rules share ?x), else by the index.
 * The split atoms cut where their argument's split tree says (rule.h):
 * that point is computed from the pattern once every subterm is matched,
 * and must be the e-node's. */
#include <string.h>
#include "egraph/egraph_impl.h"

/* ---- compiling rules */

_Static_assert(TS_ROP_COUNT <= 64, "ts_cpat.atoms has a bit per atom");

int ts_cpat_var(const ts_cpat *c, const char *name)
{
    for (int i = 0; i < c->nvars; i++)
        if (!strcmp(c->var[i], name)) return i;
    return -1;
}

static int compile(ts_cpat *c, const ts_rexpr *e)
{
    if (c->n >= TS_EPAT_MAX) return -1;
    if (e->op == TS_ROP_VAR) {
        int v = ts_cpat_var(c, e->var);
        if (v < 0) {
            if (c->nvars >= TS_EPAT_VARS) return -1;
            v = c->nvars++;
            c->var[v] = e->var;
        }
        int i = c->n++;
        c->node[i] = (ts_pnode){.op = TS_ROP_VAR, .var = v, .e = e};
        return i;
    }
    const ts_ropinfo *in = ts_rop_info(e->op);
    if (!in || in->constant || !in->build) return -1;
    c->atoms |= 1ull << e->op;
    int i = c->n++;
    c->node[i] = (ts_pnode){.op = e->op, .p = ts_egraph_norm_params(e->op, &e->p), .nargs = e->nargs, .var = -1,
                            .e = e};
    for (int k = 0; k < e->nargs; k++) {
        int a = compile(c, e->arg[k]);
        if (a < 0) return -1;
        c->node[i].arg[k] = a;
    }
    return i;
}

static bool rhs_buildable(const ts_rexpr *e)
{
    if (e->op == TS_ROP_VAR) return true;
    const ts_ropinfo *in = ts_rop_info(e->op);
    if (!in || in->constant || !in->build) return false;
    for (int k = 0; k < e->nargs; k++)
        if (!rhs_buildable(e->arg[k])) return false;
    return true;
}

bool ts_cpat_compile(const ts_rule *r, int index, ts_cpat *c, ts_pnode *buf)
{
    /* a few thousand rules are compiled per saturation: no memset of
     * the whole record */
    c->r = r;
    c->index = index;
    c->nvars = c->n = c->ncons = 0;
    c->atoms = 0;
    c->node = buf;
    if (r->nout < 1 || r->nout > TS_EPAT_OUTS || r->ncons > TS_EPAT_CONS) return false;
    c->nout = r->nout;
    for (int i = 0; i < r->nout; i++) {
        /* a bare variable as a source output would match every class */
        if (r->lhs[i]->op == TS_ROP_VAR || !rhs_buildable(r->rhs[i])) return false;
        if ((c->root[i] = compile(c, r->lhs[i])) < 0) return false;
    }
    c->ncons = r->ncons;
    for (int k = 0; k < r->ncons; k++) {
        c->cons_kind[k] = r->cons[k].kind;
        for (int j = 0; j < 2; j++) {
            c->cons_var[k][j] = j < r->cons[k].nvars ? ts_cpat_var(c, r->cons[k].var[j]) : -1;
            if (j < r->cons[k].nvars && c->cons_var[k][j] < 0) return false;
        }
    }
    return true;
}

/* ---- the op index */

bool ts_eopindex_build(const ts_egraph *eg, ts_eopindex *ix)
{
    memset(ix, 0, sizeof *ix);
    for (int c = 0; c < eg->uf.n; c++) {
        if (ts_uf_find_const(&eg->uf, c) != c) continue;
        const ts_idvec *ns = &eg->cls[c].nodes;
        for (int i = 0; i < ns->n; i++) {
            int op = eg->nodes[ns->v[i]].op;
            ts_idvec *l = &ix->byop[op];
            if (l->n && l->v[l->n - 1] == c) continue; /* once per class */
            ix->present |= 1ull << op;
            if (!ts_idvec_push(l, c)) {
                ts_eopindex_free(ix);
                return false;
            }
        }
    }
    return true;
}

void ts_eopindex_free(ts_eopindex *ix)
{
    for (int i = 0; i < TS_ROP_COUNT; i++) ts_idvec_free(&ix->byop[i]);
}

/* ---- the search */

typedef struct search {
    const ts_egraph *eg;
    const ts_eopindex *ix;
    const ts_cpat *c;
    bool (*emit)(void *ctx, const ts_ematch *m);
    void *ctx;
    bool stop;
    int out; /* the output being matched */
    ts_ematch m;
    int32_t subcls[TS_EPAT_MAX], subnode[TS_EPAT_MAX];
    int ntodo;
    int todo[TS_EPAT_MAX * 2];
    int32_t todocls[TS_EPAT_MAX * 2];
} search;

static const ts_shape *class_shape(const ts_egraph *eg, int32_t c)
{
    return &eg->cls[ts_uf_find_const(&eg->uf, c)].shape;
}

/* ts_rshape_fn over a complete match: the shape a lhs subterm matched. */
static const ts_shape *match_shape_of(void *ctx, const ts_rexpr *e)
{
    const search *s = ctx;
    for (int i = 0; i < s->c->n; i++) {
        const ts_pnode *pn = &s->c->node[i];
        if (pn->e != e) continue;
        return pn->op == TS_ROP_VAR ? class_shape(s->eg, s->m.bind[pn->var]) : class_shape(s->eg, s->subcls[i]);
    }
    return NULL;
}

static bool finish_ok(search *s)
{
    const ts_cpat *c = s->c;
    for (int k = 0; k < c->ncons; k++) {
        int32_t a = s->m.bind[c->cons_var[k][0]];
        if (c->cons_kind[k] == TS_RCONS_SAME_SHAPE) {
            int32_t b = s->m.bind[c->cons_var[k][1]];
            if (!ts_shape_eq(class_shape(s->eg, a), class_shape(s->eg, b))) return false;
        } else if (c->cons_kind[k] == TS_RCONS_WEIGHT) {
            if (!s->eg->cls[ts_uf_find_const(&s->eg->uf, a)].constant) return false;
        } else {
            return false; /* a constraint this matcher does not know is not assumed to hold */
        }
    }
    for (int i = 0; i < c->n; i++) {
        const ts_pnode *pn = &c->node[i];
        if (pn->op == TS_ROP_VAR || !ts_rop_table[pn->op].cuts) continue;
        int64_t sp = ts_rexpr_split_point(pn->e->arg[0], pn->p.axis, match_shape_of, s);
        if (sp < 0 || sp != s->eg->nodes[s->subnode[i]].at) return false;
    }
    return true;
}

static void step(search *s);

/* Matches output k's pattern at class cls, then the rest. */
static void try_root(search *s, int k, int32_t cls)
{
    int saved_out = s->out;
    s->out = k;
    s->m.root[k] = cls;
    s->todo[s->ntodo] = s->c->root[k];
    s->todocls[s->ntodo++] = cls;
    step(s);
    s->ntodo--;
    s->out = saved_out;
}

/* Output k's root: among the parents of a bound variable that is a direct
 * argument of its pattern, else every class holding its atom. */
static void next_output(search *s, int k)
{
    const ts_cpat *c = s->c;
    const ts_egraph *eg = s->eg;
    const ts_pnode *root = &c->node[c->root[k]];
    int32_t via = -1;
    for (int a = 0; a < root->nargs && via < 0; a++) {
        const ts_pnode *an = &c->node[root->arg[a]];
        if (an->op == TS_ROP_VAR && s->m.bind[an->var] >= 0) via = s->m.bind[an->var];
    }
    if (via < 0) {
        const ts_idvec *l = &s->ix->byop[root->op];
        for (int i = 0; i < l->n && !s->stop; i++) try_root(s, k, l->v[i]);
        return;
    }
    /* parents lists are canonical (sorted, live) after a rebuild; a class
     * holding several such parents is tried once */
    const ts_idvec *ps = &eg->cls[ts_uf_find_const(&eg->uf, via)].parents;
    int32_t seen[64];
    int nseen = 0;
    for (int i = 0; i < ps->n && !s->stop; i++) {
        const ts_enode *pn = &eg->nodes[ps->v[i]];
        if (pn->op != root->op) continue;
        int32_t cl = ts_uf_find_const(&eg->uf, pn->cls);
        bool dup = false;
        for (int j = 0; j < nseen && !dup; j++) dup = seen[j] == cl;
        if (dup) continue;
        if (nseen < 64) seen[nseen++] = cl;
        try_root(s, k, cl);
    }
}

static void step(search *s)
{
    if (s->stop) return;
    if (s->ntodo == 0) {
        if (s->out + 1 < s->c->nout) {
            next_output(s, s->out + 1);
        } else if (finish_ok(s) && !s->emit(s->ctx, &s->m)) {
            s->stop = true;
        }
        return;
    }
    int pi = s->todo[--s->ntodo];
    int32_t cls = s->todocls[s->ntodo];
    const ts_pnode *pn = &s->c->node[pi];
    if (pn->op == TS_ROP_VAR) {
        int32_t *b = &s->m.bind[pn->var];
        if (*b < 0) {
            *b = cls;
            step(s);
            *b = -1;
        } else if (*b == cls) {
            step(s);
        }
    } else {
        const ts_idvec *ns = &s->eg->cls[cls].nodes;
        /* class lists are sorted by (atom, id): the e-nodes of pn's atom
         * are one run */
        int lo = 0, hi = ns->n;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (s->eg->nodes[ns->v[mid]].op < pn->op) lo = mid + 1;
            else hi = mid;
        }
        for (int i = lo; i < ns->n && !s->stop; i++) {
            const ts_enode *n = &s->eg->nodes[ns->v[i]];
            if (n->op != pn->op) break;
            if (ts_rop_table[pn->op].params && memcmp(&n->p, &pn->p, sizeof n->p)) continue;
            s->subcls[pi] = cls;
            s->subnode[pi] = ns->v[i];
            for (int a = pn->nargs - 1; a >= 0; a--) {
                s->todo[s->ntodo] = pn->arg[a];
                s->todocls[s->ntodo++] = n->arg[a];
            }
            step(s);
            s->ntodo -= pn->nargs;
        }
    }
    s->todo[s->ntodo] = pi;
    s->todocls[s->ntodo++] = cls;
}

bool ts_ematch_rule(const ts_egraph *eg, const ts_eopindex *ix, const ts_cpat *c,
                    bool (*emit)(void *ctx, const ts_ematch *m), void *ctx)
{
    /* most rules need an atom the e-graph does not hold */
    if (c->atoms & ~ix->present) return true;
    search s;
    memset(&s, 0, sizeof s);
    s.eg = eg;
    s.ix = ix;
    s.c = c;
    s.emit = emit;
    s.ctx = ctx;
    s.out = -1;
    s.m.rule = c->index;
    for (int i = 0; i < TS_EPAT_VARS; i++) s.m.bind[i] = -1;
    next_output(&s, 0);
    return !s.stop;
}
