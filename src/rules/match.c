/* Matcher: occurrences of a rule's source pattern in an ONNX graph.  What
 * each atom matches is its row of the atom table (atom.c, functions in
 * atom_*.c); this file binds variables, walks the pattern, and finds the
 * candidate roots through the per-graph index (apply.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "rules/atom.h"

const ts_attr *ts_node_attr(const ts_node *n, const char *name, ts_attr *buf, int nbuf)
{
    if (!n->op->emit) return NULL;
    int k = n->op->emit(n->attrs, buf, nbuf);
    for (int i = 0; i < k; i++)
        if (!strcmp(buf[i].name, name)) return &buf[i];
    return NULL;
}

/* ---- the index */

static int cmp_byop(const void *a, const void *b)
{
    const ts_match_opnode *x = a, *y = b;
    uintptr_t p = (uintptr_t)x->op, q = (uintptr_t)y->op;
    if (p != q) return p < q ? -1 : 1;
    return (x->node > y->node) - (x->node < y->node);
}

ts_status ts_match_index_build(ts_match_index *ix, const ts_graph *g, ts_error *err)
{
    memset(ix, 0, sizeof *ix);
    ix->g = g;
    ix->ustart = calloc((size_t)g->nvalues + 2, sizeof(int));
    ix->outuse = calloc((size_t)g->nvalues + 1, sizeof(int));
    ix->byop = malloc(sizeof *ix->byop * ((size_t)g->nnodes + 1));
    if (!ix->ustart || !ix->outuse || !ix->byop) goto nomem;
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        ix->byop[ix->nbyop++] = (ts_match_opnode){n->op, i};
        for (int j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0) ix->ustart[n->inputs[j] + 1]++;
    }
    /* nodes grouped by descriptor, in node order within a group: a rule
     * is tried only at nodes that can be its root */
    qsort(ix->byop, (size_t)ix->nbyop, sizeof *ix->byop, cmp_byop);
    for (int v = 0; v < g->nvalues; v++) ix->ustart[v + 1] += ix->ustart[v];
    ix->user = malloc(sizeof(int) * ((size_t)ix->ustart[g->nvalues] + 1));
    int *fill = calloc((size_t)g->nvalues + 1, sizeof(int));
    if (!ix->user || !fill) {
        free(fill);
        goto nomem;
    }
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->ninputs; j++) {
            int v = n->inputs[j];
            if (v >= 0) ix->user[ix->ustart[v] + fill[v]++] = i;
        }
    }
    free(fill);
    for (int i = 0; i < g->noutputs; i++) ix->outuse[g->outputs[i]]++;
    return TS_OK;
nomem:
    ts_match_index_free(ix);
    return ts_error_set(err, TS_ERR_NOMEM, "out of memory indexing graph '%s'", g->name ? g->name : "");
}

void ts_match_index_free(ts_match_index *ix)
{
    free(ix->ustart);
    free(ix->user);
    free(ix->outuse);
    free(ix->byop);
    memset(ix, 0, sizeof *ix);
}

/* The index's nodes of descriptor op: byop[*lo .. *hi). */
static void op_range(const ts_match_index *ix, const ts_op_desc *op, int *lo, int *hi)
{
    uintptr_t key = (uintptr_t)op;
    int a = 0, b = ix->nbyop;
    while (a < b) { /* first entry with op >= key */
        int m = a + (b - a) / 2;
        if ((uintptr_t)ix->byop[m].op < key) a = m + 1;
        else b = m;
    }
    *lo = a;
    for (b = ix->nbyop; a < b;) { /* first entry with op > key */
        int m = a + (b - a) / 2;
        if ((uintptr_t)ix->byop[m].op <= key) a = m + 1;
        else b = m;
    }
    *hi = a;
}

/* Descriptors whose nodes can produce a value e matches (at most 2). */
static int root_ops(const ts_rexpr *e, const ts_op_desc **out)
{
    const ts_ropinfo *in = &ts_rop_table[e->op];
    if (in->roots) return in->roots(e, out);
    out[0] = in->op;
    return in->op ? 1 : 0;
}

static bool is_root_op(const ts_op_desc *op, const ts_op_desc *const *ops, int n)
{
    for (int i = 0; i < n; i++)
        if (ops[i] == op) return true;
    return false;
}

/* ---- which rules the matcher and applier take */

static bool expr_applicable(const ts_rexpr *e, bool build)
{
    const ts_ropinfo *in = &ts_rop_table[e->op];
    /* atoms without a counterpart in model graphs (enlarge, the constants
     * Iconv, Cpool, ...) have no match function: never in a source; a
     * target only needs build (enlarge pads a weight, which then folds) */
    if (e->op != TS_ROP_VAR && (build ? !in->build : !in->match)) return false;
    /* e-graph nodes have two arguments; crop (three) is the verifier's */
    if (e->nargs > 2) return false;
    for (int i = 0; i < e->nargs; i++)
        if (!expr_applicable(e->arg[i], build)) return false;
    return true;
}

bool ts_rule_applicable(const ts_rule *r)
{
    if (r->nout < 1 || r->nout > 8) return false;
    for (int i = 0; i < r->nout; i++) {
        /* a bare variable as a source output would match every value */
        if (r->lhs[i]->op == TS_ROP_VAR) return false;
        if (!expr_applicable(r->lhs[i], false) || !expr_applicable(r->rhs[i], true)) return false;
    }
    return true;
}

/* ---- what atoms ask of the matcher (atom.h) */

static int var_slot(const ts_match *m, const char *name)
{
    for (int i = 0; i < m->nvars; i++)
        if (!strcmp(m->var[i], name)) return i;
    return -1;
}

bool ts_rmatch_node(ts_rmatch *s, int n)
{
    ts_match *m = &s->m;
    for (int i = 0; i < m->nnodes; i++)
        if (m->node[i] == n) return true;
    if (m->nnodes >= TS_MATCH_MAX_NODES) return false;
    m->node[m->nnodes++] = n;
    return true;
}

int ts_rmatch_producer(const ts_rmatch *s, int v, const ts_op_desc *op)
{
    int p = s->g->values[v].producer;
    if (p < 0 || s->g->nodes[p].dead || s->g->nodes[p].op != op) return -1;
    return p;
}

bool ts_rmatch_only_use(const ts_rmatch *s, int v, int n)
{
    const ts_match_index *ix = s->ix;
    return ix->outuse[v] == 0 && ix->ustart[v + 1] - ix->ustart[v] == 1 && ix->user[ix->ustart[v]] == n;
}

bool ts_rmatch_bias(ts_rmatch *s, const ts_rexpr *w, int bias)
{
    ts_match *m = &s->m;
    if (bias < 0) return true;
    if (w->op != TS_ROP_VAR) return false;
    int i = var_slot(m, w->var);
    if (i < 0) return false;
    if (m->bias[i] >= 0 && m->bias[i] != bias) return false;
    m->bias[i] = bias;
    m->bias_uses[i]++;
    return true;
}

const ts_shape *ts_rmatch_shape_of(void *ctx, const ts_rexpr *e)
{
    ts_rmatch *s = ctx;
    if (e->op == TS_ROP_VAR) {
        int i = var_slot(&s->m, e->var);
        return i >= 0 ? ts_rvshape(s->g, s->m.val[i]) : NULL;
    }
    for (int i = 0; i < s->m.nexprs; i++)
        if (s->m.expr[i] == e) return ts_rvshape(s->g, s->m.exval[i]);
    return NULL;
}

bool ts_rmatch_arg(ts_rmatch *s, const ts_rexpr *e, int v)
{
    ts_match *m = &s->m;
    if (v < 0) return false;
    if (e->op == TS_ROP_VAR) {
        int i = var_slot(m, e->var);
        if (i >= 0) return m->val[i] == v;
        if (m->nvars >= TS_MATCH_MAX_VARS) return false;
        m->var[m->nvars] = e->var;
        m->val[m->nvars] = v;
        m->bias[m->nvars] = -1;
        m->bias_uses[m->nvars] = 0;
        m->nvars++;
        return true;
    }
    if (m->nexprs >= TS_MATCH_MAX_EXPRS) return false;
    int slot = m->nexprs++;
    m->expr[slot] = e;
    m->exval[slot] = v;
    const ts_ropinfo *in = &ts_rop_table[e->op];
    return in->match && in->match(s, e, v);
}

/* ---- whole matches */

/* Matched interior values must not escape: every output of a matched node
 * that a matched node reads is read only by matched nodes (the roots may be
 * used anywhere). */
static bool closed(const ts_rmatch *s)
{
    const ts_graph *g = s->g;
    const ts_match *m = &s->m;
    for (int i = 0; i < m->nnodes; i++) {
        const ts_node *n = &g->nodes[m->node[i]];
        for (int o = 0; o < n->noutputs; o++) {
            int v = n->outputs[o];
            bool root = false, inner = false, outer = s->ix->outuse[v] > 0;
            for (int k = 0; k < m->nroots; k++) root |= m->root[k] == v;
            if (root) continue;
            for (int u = s->ix->ustart[v]; u < s->ix->ustart[v + 1]; u++) {
                bool mine = false;
                for (int k = 0; k < m->nnodes; k++) mine |= m->node[k] == s->ix->user[u];
                if (mine)
                    inner = true;
                else
                    outer = true;
            }
            if (inner && outer) return false;
        }
    }
    return true;
}

static bool constraints_hold(ts_rmatch *s)
{
    for (int c = 0; c < s->r->ncons; c++) {
        const ts_rcons *k = &s->r->cons[c];
        int a = var_slot(&s->m, k->var[0]), b = k->nvars > 1 ? var_slot(&s->m, k->var[1]) : -1;
        if (a < 0) return false;
        if (k->kind == TS_RCONS_SAME_SHAPE) {
            if (b < 0 || !ts_shape_eq(ts_rvshape(s->g, s->m.val[a]), ts_rvshape(s->g, s->m.val[b]))) return false;
        } else if (k->kind == TS_RCONS_WEIGHT) {
            if (!s->g->values[s->m.val[a]].constant) return false;
        }
    }
    return true;
}

/* A variable of e bound already, and its depth in e: lhs output i is then
 * searched among the values within that many uses of it. */
static const ts_rexpr *bound_leaf(const ts_match *m, const ts_rexpr *e, int depth, int *at)
{
    if (e->op == TS_ROP_VAR) {
        if (var_slot(m, e->var) >= 0) {
            *at = depth;
            return e;
        }
        return NULL;
    }
    for (int i = 0; i < e->nargs; i++) {
        const ts_rexpr *l = bound_leaf(m, e->arg[i], depth + 1, at);
        if (l) return l;
    }
    return NULL;
}

typedef struct walk {
    bool (*fn)(const ts_match *m, void *ctx);
    void *ctx;
    int count;
    bool stop;
} walk;

static void match_root(ts_rmatch *s, int i, walk *w);

/* What a failed attempt must undo: the match's arrays only grow (reset by
 * their counts), except the biases of variables bound before. */
typedef struct mark {
    int nvars, nroots, nnodes, nexprs;
    int bias[TS_MATCH_MAX_VARS], bias_uses[TS_MATCH_MAX_VARS];
} mark;

static void mark_save(const ts_match *m, mark *k)
{
    k->nvars = m->nvars, k->nroots = m->nroots, k->nnodes = m->nnodes, k->nexprs = m->nexprs;
    memcpy(k->bias, m->bias, sizeof(int) * (size_t)m->nvars);
    memcpy(k->bias_uses, m->bias_uses, sizeof(int) * (size_t)m->nvars);
}

static void mark_restore(ts_match *m, const mark *k)
{
    m->nvars = k->nvars, m->nroots = k->nroots, m->nnodes = k->nnodes, m->nexprs = k->nexprs;
    memcpy(m->bias, k->bias, sizeof(int) * (size_t)k->nvars);
    memcpy(m->bias_uses, k->bias_uses, sizeof(int) * (size_t)k->nvars);
}

static void try_root(ts_rmatch *s, int i, int v, walk *w)
{
    for (int k = 0; k < i; k++)
        if (s->m.root[k] == v) return;
    /* a whole ts_match is 1.4 kB: copying it per candidate root was the
     * matcher's largest cost */
    mark saved;
    mark_save(&s->m, &saved);
    s->m.root[i] = v;
    s->m.nroots = i + 1;
    if (ts_rmatch_arg(s, s->r->lhs[i], v)) {
        if (i + 1 < s->r->nout)
            match_root(s, i + 1, w);
        else if (closed(s) && constraints_hold(s)) {
            w->count++;
            if (!w->fn(&s->m, w->ctx)) w->stop = true;
        }
    }
    mark_restore(&s->m, &saved);
}

/* Every output of the nodes that can be lhs output i's root, in node order
 * (the order of a scan of all nodes, so the index changes no result). */
static void try_indexed(ts_rmatch *s, int i, walk *w)
{
    const ts_graph *g = s->g;
    const ts_match_index *ix = s->ix;
    if (ix->scan_all) {
        for (int n = 0; n < g->nnodes && !w->stop; n++) {
            if (g->nodes[n].dead) continue;
            for (int o = 0; o < g->nodes[n].noutputs && !w->stop; o++) try_root(s, i, g->nodes[n].outputs[o], w);
        }
        return;
    }
    const ts_op_desc *ops[2];
    int nops = root_ops(s->r->lhs[i], ops), lo[2] = {0, 0}, hi[2] = {0, 0};
    for (int k = 0; k < nops; k++) op_range(ix, ops[k], &lo[k], &hi[k]);
    while (!w->stop) {
        /* merge the (at most two) ranges by node id */
        int pick = -1;
        for (int k = 0; k < nops; k++)
            if (lo[k] < hi[k] && (pick < 0 || ix->byop[lo[k]].node < ix->byop[lo[pick]].node)) pick = k;
        if (pick < 0) break;
        const ts_node *n = &g->nodes[ix->byop[lo[pick]++].node];
        for (int o = 0; o < n->noutputs && !w->stop; o++) try_root(s, i, n->outputs[o], w);
    }
}

static void match_root(ts_rmatch *s, int i, walk *w)
{
    const ts_graph *g = s->g;
    const ts_match_index *ix = s->ix;
    int depth = 0;
    const ts_rexpr *leaf = i > 0 ? bound_leaf(&s->m, s->r->lhs[i], 0, &depth) : NULL;
    if (!leaf) {
        try_indexed(s, i, w);
        return;
    }
    const ts_op_desc *ops[2];
    int nops = ix->scan_all ? 0 : root_ops(s->r->lhs[i], ops);
    /* breadth-first over users of the bound value, depth levels */
    int start = s->m.val[var_slot(&s->m, leaf->var)];
    int cap = 64, nf = 1, *front = malloc(sizeof(int) * (size_t)cap);
    if (!front) return;
    front[0] = start;
    for (int d = 0; d < depth && nf > 0 && !w->stop; d++) {
        int nn = 0, ncap = 64, *next = malloc(sizeof(int) * (size_t)ncap);
        if (!next) break;
        for (int f = 0; f < nf; f++) {
            int v = front[f];
            for (int u = ix->ustart[v]; u < ix->ustart[v + 1]; u++) {
                const ts_node *n = &g->nodes[ix->user[u]];
                for (int o = 0; o < n->noutputs; o++) {
                    bool seen = false;
                    for (int k = 0; k < nn && !seen; k++) seen = next[k] == n->outputs[o];
                    if (seen) continue;
                    if (nn == ncap) {
                        int *t = realloc(next, sizeof(int) * (size_t)(ncap *= 2));
                        if (!t) continue;
                        next = t;
                    }
                    next[nn++] = n->outputs[o];
                }
            }
        }
        free(front);
        front = next;
        nf = nn;
        if (d + 1 == depth)
            for (int k = 0; k < nf && !w->stop; k++) {
                /* the root must come from a node that can produce it */
                if (!ix->scan_all && !is_root_op(g->nodes[g->values[front[k]].producer].op, ops, nops)) continue;
                try_root(s, i, front[k], w);
            }
    }
    free(front);
}

int ts_match_all(const ts_match_index *ix, const ts_rule *r, bool (*fn)(const ts_match *m, void *ctx), void *ctx)
{
    if (r->nout < 1) return 0;
    if (!ix->scan_all) {
        /* most rules' root operator is absent from a given graph: done
         * first, before walking the rule or allocating */
        const ts_op_desc *ops[2];
        int nops = root_ops(r->lhs[0], ops), n = 0;
        for (int k = 0; k < nops; k++) {
            int lo, hi;
            op_range(ix, ops[k], &lo, &hi);
            n += hi - lo;
        }
        if (!n) return 0;
    }
    if (!ts_rule_applicable(r)) return 0;
    ts_rmatch *s = calloc(1, sizeof *s);
    if (!s) return 0;
    s->ix = ix;
    s->g = ix->g;
    s->r = r;
    walk w = {.fn = fn, .ctx = ctx};
    match_root(s, 0, &w);
    free(s);
    return w.count;
}
