/* A graph into the e-graph: inputs and weights become leaves, every node
 * the e-node of the atom that stands for it, outputs the roots.  Which atom
 * stands for a node is the rule matcher's answer (each row's match
 * function, src/rules/atom_*.c), asked with a one-atom pattern over
 * variables at each value; the atom's parameters are tried from the few
 * the node can have (its window attributes, the axes of its rank, the
 * divisors of its channels).  A match must cover exactly the value's
 * producer and carry no bias: the e-graph has no atom for a bias.  The
 * split atoms are the exception: their matcher needs the split tree of a
 * pattern, so a two-way Split of the row's descriptor is read directly (the
 * cut is the first output's size along the axis). */
#include <stdlib.h>
#include <string.h>
#include "egraph/egraph_impl.h"
#include "rules/atom.h"

typedef struct fg {
    const ts_graph *g;
    ts_egraph *eg;
    ts_match_index ix;
    int32_t *cls; /* per value */
    bool bias_seen;
} fg;

/* The class of value v: a leaf for an input or weight, else its producer's
 * e-node (mapped already: nodes go in topological order). */
static int32_t value_class(fg *f, int v, ts_error *err)
{
    if (v < 0 || v >= f->g->nvalues) return -1;
    if (f->cls[v] >= 0) return f->cls[v];
    const ts_value *val = &f->g->values[v];
    if (val->producer >= 0) return -1;
    f->cls[v] = ts_egraph_add_leaf(f->eg, val->name, &val->shape, val->dtype, val->constant != NULL, err);
    return f->cls[v];
}

static int ints_attr(const ts_node *n, const char *name, int64_t *out, int max)
{
    ts_attr buf[24];
    const ts_attr *a = ts_node_attr(n, name, buf, 24);
    if (!a || a->kind != TS_ATTR_INTS) return -1;
    int k = a->n < max ? a->n : max;
    memcpy(out, a->ints, sizeof(int64_t) * (size_t)k);
    return k;
}

/* Parameter sets atom op could have at node n producing a value of shape
 * s: the cartesian product of each parameter's few candidates. */
static int candidates(ts_rop op, const ts_node *n, const ts_shape *s, ts_rparams *out, int max)
{
    unsigned m = ts_rop_table[op].params;
    int64_t k[2] = {0, 0}, st[2] = {1, 1};
    if ((m & TS_RPARAM_KERNEL) && ints_attr(n, "kernel_shape", k, 2) != 2) return 0;
    if (m & TS_RPARAM_STRIDE) ints_attr(n, "strides", st, 2);
    int npad = (m & TS_RPARAM_PAD) ? 2 : 1, naxis = (m & TS_RPARAM_AXIS) ? 4 : 1;
    int mults[32], nmult = 1;
    mults[0] = 0;
    if (m & TS_RPARAM_MULT) {
        nmult = 0;
        int64_t ch = s->rank == 4 ? s->dims[1] : 0;
        for (int64_t d = 1; d <= ch && nmult < 32; d++)
            if (ch % d == 0) mults[nmult++] = (int)d;
    }
    int cnt = 0;
    for (int pd = 0; pd < npad; pd++)
        for (int ax = 0; ax < naxis; ax++)
            for (int mu = 0; mu < nmult && cnt < max; mu++) {
                ts_rparams p = {0};
                if (m & TS_RPARAM_KERNEL) p.kh = (int)k[0], p.kw = (int)k[1];
                if (m & TS_RPARAM_STRIDE) p.stride = (int)st[0];
                if (m & TS_RPARAM_PAD) p.pad = pd ? TS_RPAD_VALID : TS_RPAD_SAME;
                if (m & TS_RPARAM_AXIS) p.axis = ax;
                if (m & TS_RPARAM_MULT) p.mult = mults[mu];
                out[cnt++] = p; /* act stays none: a Relu is its own e-node */
            }
    return cnt;
}

/* The e-node for the split atom op at value v, -2 when it is not one. */
static int32_t map_split(fg *f, ts_rop op, int v, ts_error *err)
{
    const ts_value *val = &f->g->values[v];
    const ts_node *n = &f->g->nodes[val->producer];
    if (n->op != ts_rop_table[op].op || n->noutputs != 2 || val->producer_slot != (op == TS_ROP_SPLIT1)) return -2;
    ts_attr buf[8];
    const ts_attr *a = ts_node_attr(n, "axis", buf, 8);
    int rank = val->shape.rank, axis;
    if (!ts_axis_norm(a ? a->i : 0, rank, &axis)) return -2;
    int taso = rank == 3 ? axis - 1 : axis; /* a rank-3 tensor is a batch of row blocks (rules/apply.h) */
    if (taso < 0) return -2;
    int32_t x = value_class(f, n->inputs[0], err);
    if (x < 0) return -1;
    int64_t at = f->g->values[n->outputs[0]].shape.dims[axis];
    return ts_egraph_add_split(f->eg, op, taso, at, x, err);
}

/* The e-node for atom op at value v, -2 when the atom does not stand for
 * its producer. */
static int32_t map_atom(fg *f, ts_rop op, int v, ts_error *err)
{
    const ts_ropinfo *in = &ts_rop_table[op];
    const ts_value *val = &f->g->values[v];
    int p = val->producer;
    ts_rparams cand[64];
    int nc = candidates(op, &f->g->nodes[p], &val->shape, cand, 64);
    char na[] = "a", nb[] = "b";
    ts_rexpr va = {.op = TS_ROP_VAR, .var = na}, vb = {.op = TS_ROP_VAR, .var = nb};
    ts_rmatch *s = calloc(1, sizeof *s);
    if (!s) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory mapping node '%s'", f->g->nodes[p].name);
        return -1;
    }
    int32_t res = -2;
    for (int i = 0; i < nc && res == -2; i++) {
        ts_rexpr e = {.op = op, .p = cand[i], .nargs = in->nargs, .arg = {&va, &vb}};
        memset(s, 0, sizeof *s);
        s->ix = &f->ix;
        s->g = f->g;
        if (!ts_rmatch_arg(s, &e, v)) continue;
        bool bias = false;
        for (int k = 0; k < s->m.nvars; k++) bias |= s->m.bias[k] >= 0;
        if (bias || s->m.nnodes != 1 || s->m.node[0] != p) {
            f->bias_seen |= bias;
            continue;
        }
        int32_t args[2] = {-1, -1};
        for (int k = 0; k < s->m.nvars; k++) {
            int slot = !strcmp(s->m.var[k], "b");
            if ((args[slot] = value_class(f, s->m.val[k], err)) < 0) {
                res = -1;
                break;
            }
        }
        if (res == -1) break;
        res = ts_egraph_add_node(f->eg, op, &cand[i], 0, in->nargs, args, err);
    }
    free(s);
    return res;
}

static int32_t map_value(fg *f, int v, ts_error *err)
{
    for (int op = TS_ROP_VAR + 1; op < TS_ROP_COUNT; op++) {
        const ts_ropinfo *in = &ts_rop_table[op];
        int32_t c = -2;
        if (in->cuts)
            c = map_split(f, (ts_rop)op, v, err);
        else if (in->match)
            c = map_atom(f, (ts_rop)op, v, err);
        if (c != -2) return c;
    }
    const ts_node *n = &f->g->nodes[f->g->values[v].producer];
    ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s' (%s): %s", n->name, n->op->name,
                 f->bias_seen ? "a bias added to a product, which no e-graph atom carries"
                              : "no e-graph atom stands for it (docs/rules.md lists the atoms)");
    return -1;
}

ts_status ts_egraph_from_graph(const ts_graph *g, ts_egraph **out, ts_eclass_id **roots, int *nroots, ts_error *err)
{
    *out = NULL;
    *roots = NULL;
    *nroots = 0;
    fg f = {.g = g, .eg = ts_egraph_new()};
    int *order = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    int32_t *r = malloc(sizeof *r * ((size_t)g->noutputs + 1));
    f.cls = malloc(sizeof *f.cls * ((size_t)g->nvalues + 1));
    ts_status rc = TS_OK;
    if (!f.eg || !order || !r || !f.cls) {
        rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory building an e-graph of '%s'", g->name);
        goto done;
    }
    for (int v = 0; v < g->nvalues; v++) f.cls[v] = -1;
    if ((rc = ts_match_index_build(&f.ix, g, err))) goto done;
    int count = 0;
    if ((rc = ts_graph_topo_order(g, order, &count, err))) goto free_ix;
    /* every input is a leaf, used or not: an extracted graph takes them all */
    for (int i = 0; i < g->ninputs; i++)
        if (value_class(&f, g->inputs[i], err) < 0) {
            rc = err ? err->code : TS_ERR_INVALID;
            goto free_ix;
        }
    for (int k = 0; k < count; k++) {
        const ts_node *n = &g->nodes[order[k]];
        for (int o = 0; o < n->noutputs; o++) {
            int v = n->outputs[o];
            f.bias_seen = false;
            if ((f.cls[v] = map_value(&f, v, err)) < 0) {
                rc = err && err->code ? err->code : TS_ERR_UNSUPPORTED;
                goto free_ix;
            }
            /* the e-node just made or found: with no union made yet, a
             * class holds one e-node */
            if (!ts_idvec_push(&f.eg->seeds, f.eg->cls[f.cls[v]].nodes.v[0])) {
                rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory building an e-graph of '%s'", g->name);
                goto free_ix;
            }
        }
    }
    for (int i = 0; i < g->noutputs; i++)
        if ((r[i] = value_class(&f, g->outputs[i], err)) < 0) {
            rc = ts_error_set(err, TS_ERR_INVALID, "graph '%s': output %d is computed by no node", g->name, i);
            goto free_ix;
        }
    ts_egraph_rebuild(f.eg);
    *out = f.eg;
    *roots = r;
    *nroots = g->noutputs;
    f.eg = NULL;
    r = NULL;
free_ix:
    ts_match_index_free(&f.ix);
done:
    ts_egraph_free(f.eg);
    free(order);
    free(r);
    free(f.cls);
    return rc;
}
