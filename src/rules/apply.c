/* Applier: rewrites one match of a rule into a new graph (see
 * rules/apply.h).  The nodes of each rhs atom come from its row of the atom
 * table (atom.c); this file hash-conses subterms, carries biases through
 * the rewrite, redirects users and drops what the match replaced. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rules/atom.h"

#define MAX_BUILT 64

typedef struct bstate {
    ts_rbuild rb; /* the graph being built and the Split memo (atom.h) */
    const ts_match *m;
    int nbuilt;
    const ts_rexpr *built[MAX_BUILT]; /* rhs subterms built so far (hash-consing) */
    int bval[MAX_BUILT];
    int bias_used[TS_MATCH_MAX_VARS];
} bstate;

static int var_val(const ts_match *m, const char *name, int *slot)
{
    for (int i = 0; i < m->nvars; i++)
        if (!strcmp(m->var[i], name)) {
            if (slot) *slot = i;
            return m->val[i];
        }
    return -1;
}

static const ts_shape *rhs_shape_of(void *ctx, const ts_rexpr *e)
{
    bstate *b = ctx;
    if (e->op == TS_ROP_VAR) {
        int v = var_val(b->m, e->var, NULL);
        return v >= 0 ? ts_rvshape(b->rb.g, v) : NULL;
    }
    for (int i = 0; i < b->nbuilt; i++)
        if (ts_rexpr_equal(b->built[i], e)) return ts_rvshape(b->rb.g, b->bval[i]);
    return NULL;
}

static bool has_biased_var(const ts_match *m, const ts_rexpr *e)
{
    if (e->op == TS_ROP_VAR) {
        int i = -1;
        return var_val(m, e->var, &i) >= 0 && m->bias[i] >= 0;
    }
    for (int k = 0; k < e->nargs; k++)
        if (has_biased_var(m, e->arg[k])) return true;
    return false;
}

static int zeros(bstate *b, int64_t n)
{
    ts_shape s = ts_shape_make(1, &n);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &b->rb.err);
    return t ? ts_rbuild_const(&b->rb, t) : -1;
}

/* The bias that follows a conv/matmul weight expression w through the
 * rewrite: -1 none, -2 impossible (the rewrite is rejected).  out_axis is
 * the weight's TASO axis that indexes output channels (conv 0, matmul 1):
 * concatenating weights there concatenates biases; concatenating along the
 * other axis, or adding weights, adds the partial products, so biases add. */
static int bias_of(bstate *b, const ts_rexpr *w, int wval, int out_axis, int *pending)
{
    const ts_match *m = b->m;
    if (w->op == TS_ROP_VAR) {
        int i = -1;
        var_val(m, w->var, &i);
        if (i < 0 || m->bias[i] < 0) return -1;
        pending[i]++;
        return m->bias[i];
    }
    bool cat = w->op == TS_ROP_CONCAT, add = w->op == TS_ROP_EWADD;
    if (!cat && !add) return has_biased_var(m, w) ? -2 : -1;
    int part[2];
    (void)wval;
    for (int k = 0; k < 2; k++) {
        const ts_shape *as = rhs_shape_of(b, w->arg[k]);
        int av = w->arg[k]->op == TS_ROP_VAR ? var_val(m, w->arg[k]->var, NULL) : -1;
        for (int i = 0; i < b->nbuilt; i++)
            if (ts_rexpr_equal(b->built[i], w->arg[k])) av = b->bval[i];
        if (!as || av < 0) return -2;
        part[k] = bias_of(b, w->arg[k], av, out_axis, pending);
        if (part[k] == -2) return -2;
    }
    if (part[0] == -1 && part[1] == -1) return -1;
    if (cat && w->p.axis == out_axis) {
        for (int k = 0; k < 2; k++)
            if (part[k] == -1) {
                const ts_shape *as = rhs_shape_of(b, w->arg[k]);
                part[k] = zeros(b, as->dims[ts_rbuild_axis(&b->rb, as->rank, out_axis)]);
                if (part[k] < 0) return -2;
            }
        ts_attr ax = ts_attr_int("axis", 0);
        int v = ts_rbuild_node1(&b->rb, &ts_op_concat, part, 2, &ax, 1);
        return v < 0 ? -2 : v;
    }
    if (part[0] == -1) return part[1];
    if (part[1] == -1) return part[0];
    int v = ts_rbuild_node1(&b->rb, &ts_op_add, part, 2, NULL, 0);
    return v < 0 ? -2 : v;
}

static int build(bstate *b, const ts_rexpr *e);

/* The node(s) of one rhs atom, through its row of the atom table; what the
 * row's builder cannot see (the bias its weight carries, where a split
 * cuts) is worked out here from the rule. */
static int build_op(bstate *b, const ts_rexpr *e)
{
    const ts_ropinfo *in = &ts_rop_table[e->op];
    int x[3] = {-1, -1, -1}, pending[TS_MATCH_MAX_VARS] = {0};
    if (!in->build) return -1;
    for (int k = 0; k < e->nargs; k++)
        if ((x[k] = build(b, e->arg[k])) < 0) return -1;
    b->rb.bias = -1;
    if (in->bias && (b->rb.bias = bias_of(b, e->arg[1], x[1], in->bias_axis, pending)) == -2) return -1;
    if (in->cuts) b->rb.split_at = ts_rexpr_split_point(e->arg[0], e->p.axis, rhs_shape_of, b);
    int v = in->build(&b->rb, e->op, &e->p, x);
    if (v < 0) return -1;
    /* every bias of the source must reappear exactly as often */
    for (int i = 0; i < TS_MATCH_MAX_VARS; i++) b->bias_used[i] += pending[i];
    return v;
}

static int build(bstate *b, const ts_rexpr *e)
{
    if (e->op == TS_ROP_VAR) return var_val(b->m, e->var, NULL);
    for (int i = 0; i < b->nbuilt; i++)
        if (ts_rexpr_equal(b->built[i], e)) return b->bval[i];
    int v = build_op(b, e);
    if (v < 0 || b->nbuilt >= MAX_BUILT) return -1;
    b->built[b->nbuilt] = e;
    b->bval[b->nbuilt++] = v;
    return v;
}

/* A matched conv/matmul carries its bias (y = x W + b) only where adding
 * a constant to its output adds it to the rule's output: at the root, or
 * under ewadd, concat and split.  Under any other atom (smul, ewmul, relu,
 * transpose, a product's input, ...) the rewrite would move the bias
 * through an operator that does not commute with adding it:
 * matmul(smul(x, s), w) + b became smul(matmul(x, w) + b, s) and changed
 * BERT's outputs.  False when e (an lhs or rhs tree) puts a biased product
 * under such an atom. */
static bool bias_in_context(const ts_match *m, const ts_rexpr *e, bool additive)
{
    if (e->op == TS_ROP_VAR) return true;
    const ts_ropinfo *in = &ts_rop_table[e->op];
    if (in->bias && !additive && e->nargs > 1 && has_biased_var(m, e->arg[1])) return false;
    bool pass = e->op == TS_ROP_EWADD || e->op == TS_ROP_CONCAT || e->op == TS_ROP_SPLIT0 || e->op == TS_ROP_SPLIT1;
    for (int k = 0; k < e->nargs; k++)
        if (!bias_in_context(m, e->arg[k], additive && pass)) return false;
    return true;
}

ts_status ts_rule_apply(const ts_graph *g0, const ts_rule *r, const ts_match *m, ts_graph **out, ts_error *err)
{
    return ts_rule_apply_cached(g0, r, m, NULL, out, err);
}

ts_status ts_rule_apply_cached(const ts_graph *g0, const ts_rule *r, const ts_match *m, ts_const_cache *cc,
                               ts_graph **out, ts_error *err)
{
    *out = NULL;
    for (int i = 0; i < r->nout; i++)
        if (!bias_in_context(m, r->lhs[i], true) || !bias_in_context(m, r->rhs[i], true)) return TS_OK;
    ts_graph *g = ts_graph_copy(g0);
    bstate *b = calloc(1, sizeof *b);
    int *uses = NULL;
    if (!g || !b) {
        ts_graph_free(g);
        free(b);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory applying rule %s", r->name);
    }
    b->rb.g = g;
    b->rb.prefix = "taso";
    b->rb.cc = cc;
    b->m = m;
    int nold = g->nnodes, newv[8];
    bool ok = true;
    for (int i = 0; i < r->nout && ok; i++) {
        newv[i] = build(b, r->rhs[i]);
        ok = newv[i] >= 0 && newv[i] != m->root[i] && ts_shape_eq(ts_rvshape(g, newv[i]), ts_rvshape(g, m->root[i])) &&
             g->values[newv[i]].dtype == g->values[m->root[i]].dtype;
    }
    /* every bias the source carried must reappear exactly as often */
    for (int i = 0; i < m->nvars && ok; i++) ok = b->bias_used[i] == m->bias_uses[i];
    for (int j = 0; j < g->noutputs && ok; j++)
        for (int i = 0; i < r->nout; i++)
            if (g->outputs[j] == m->root[i] && g->values[newv[i]].producer < 0) ok = false;
    if (!ok) goto reject;
    for (int n = 0; n < nold; n++) {
        ts_node *nd = &g->nodes[n];
        if (nd->dead) continue;
        for (int j = 0; j < nd->ninputs; j++)
            for (int i = 0; i < r->nout; i++)
                if (nd->inputs[j] == m->root[i]) nd->inputs[j] = newv[i];
    }
    for (int j = 0; j < g->noutputs; j++)
        for (int i = 0; i < r->nout; i++)
            if (g->outputs[j] == m->root[i]) {
                /* a graph output keeps its name: swap it onto the new value */
                char *t = g->values[newv[i]].name;
                g->values[newv[i]].name = g->values[m->root[i]].name;
                g->values[m->root[i]].name = t;
                g->outputs[j] = newv[i];
            }
    /* drop the matched nodes nothing reads any more (a Split whose other
     * half is still used stays) */
    uses = calloc((size_t)g->nvalues + 1, sizeof(int));
    if (!uses) goto nomem;
    for (int n = 0; n < g->nnodes; n++) {
        if (g->nodes[n].dead) continue;
        for (int j = 0; j < g->nodes[n].ninputs; j++)
            if (g->nodes[n].inputs[j] >= 0) uses[g->nodes[n].inputs[j]]++;
    }
    for (int j = 0; j < g->noutputs; j++) uses[g->outputs[j]]++;
    for (bool changed = true; changed;) {
        changed = false;
        for (int k = 0; k < m->nnodes; k++) {
            ts_node *nd = &g->nodes[m->node[k]];
            if (nd->dead) continue;
            bool used = false;
            for (int o = 0; o < nd->noutputs; o++) used |= uses[nd->outputs[o]] > 0;
            if (used) continue;
            nd->dead = true;
            changed = true;
            for (int j = 0; j < nd->ninputs; j++)
                if (nd->inputs[j] >= 0) uses[nd->inputs[j]]--;
        }
    }
    /* a cycle shows here: ordering fails */
    if (ts_graph_fold_constants(g, &b->rb.err) < 0) goto reject;
    ts_graph_compact(g);
    if (ts_graph_validate(g, &b->rb.err)) goto reject;
    free(uses);
    free(b);
    *out = g;
    return TS_OK;
reject:
    /* a rewrite that does not fit here (its reason in b->rb.err) is not an
     * error: the caller just gets no graph */
    if (b->rb.err.code == TS_ERR_NOMEM) goto nomem;
    free(uses);
    free(b);
    ts_graph_free(g);
    return TS_OK;
nomem:
    free(uses);
    free(b);
    ts_graph_free(g);
    return ts_error_set(err, TS_ERR_NOMEM, "out of memory applying rule %s", r->name);
}
