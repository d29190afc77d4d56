/* Applier: rewrites one match of a rule into a new graph (see
 * rules/apply.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rules/apply.h"

#define MAX_BUILT 64

typedef struct bstate {
    ts_graph *g;
    const ts_match *m;
    int nbuilt;
    const ts_rexpr *built[MAX_BUILT]; /* rhs subterms built so far (hash-consing) */
    int bval[MAX_BUILT];
    int nsplit;
    const ts_rexpr *split_arg[MAX_BUILT]; /* Split nodes made: argument, axis, outputs */
    int split_axis[MAX_BUILT];
    int split_out[MAX_BUILT][2];
    int bias_used[TS_MATCH_MAX_VARS];
    int nconst;
    ts_const_cache *cc; /* memo of constant concatenations, may be NULL */
    ts_error err; /* scratch: a rejected rewrite is not an error */
} bstate;

static int onnx_axis(int rank, int a) { return rank == 3 ? a + 1 : a; }

static const ts_shape *vshape(const ts_graph *g, int v) { return &g->values[v].shape; }

/* Node names must be unique in an ONNX file (ONNX Runtime checks): the
 * builder's default (op and node count) repeats once compaction has
 * shrunk the count, so names are checked against the graph. */
static const char *node_name(bstate *b, const char *op, char *buf, size_t n)
{
    for (int k = b->g->nnodes;; k++) {
        snprintf(buf, n, "taso_%s_%d", op, k);
        bool used = false;
        for (int i = 0; i < b->g->nnodes && !used; i++) used = !strcmp(b->g->nodes[i].name, buf);
        if (!used) return buf;
    }
}

static int node1(bstate *b, const char *op, const int *ins, int nin, const ts_attr *attrs, int na)
{
    int out = -1;
    char name[96];
    if (ts_graph_add_node(b->g, op, node_name(b, op, name, sizeof name), ins, nin, attrs, na, 1, NULL, &out,
                          &b->err) < 0)
        return -1;
    return out;
}

static int add_const(bstate *b, ts_tensor *t)
{
    char name[64];
    int v;
    do snprintf(name, sizeof name, "taso_const_%d", b->nconst++);
    while (ts_graph_find_value(b->g, name) >= 0);
    v = ts_graph_add_constant(b->g, name, t, &b->err);
    ts_tensor_unref(t);
    return v;
}

static int zeros(bstate *b, int64_t n)
{
    ts_shape s = ts_shape_make(1, &n);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &b->err);
    return t ? add_const(b, t) : -1;
}

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
        return v >= 0 ? vshape(b->g, v) : NULL;
    }
    for (int i = 0; i < b->nbuilt; i++)
        if (ts_rexpr_equal(b->built[i], e)) return vshape(b->g, b->bval[i]);
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
    const ts_shape *ws = vshape(b->g, wval);
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
                part[k] = zeros(b, as->dims[onnx_axis(as->rank, out_axis)]);
                if (part[k] < 0) return -2;
            }
        ts_attr ax = ts_attr_int("axis", 0);
        int v = node1(b, "Concat", part, 2, &ax, 1);
        return v < 0 ? -2 : v;
    }
    (void)ws;
    if (part[0] == -1) return part[1];
    if (part[1] == -1) return part[0];
    int v = node1(b, "Add", part, 2, NULL, 0);
    return v < 0 ? -2 : v;
}

static int build(bstate *b, const ts_rexpr *e);

static void commit_bias(bstate *b, const int *pending)
{
    for (int i = 0; i < TS_MATCH_MAX_VARS; i++) b->bias_used[i] += pending[i];
}

static int build_split(bstate *b, const ts_rexpr *e)
{
    int x = build(b, e->arg[0]);
    if (x < 0) return -1;
    int slot = e->op == TS_ROP_SPLIT1;
    for (int i = 0; i < b->nsplit; i++)
        if (b->split_axis[i] == e->p.axis && ts_rexpr_equal(b->split_arg[i], e->arg[0])) return b->split_out[i][slot];
    if (b->nsplit >= MAX_BUILT) return -1;
    const ts_shape *xs = vshape(b->g, x);
    int axis = onnx_axis(xs->rank, e->p.axis);
    if (axis >= xs->rank) return -1;
    int64_t sp = ts_rexpr_split_point(e->arg[0], e->p.axis, rhs_shape_of, b);
    if (sp <= 0 || sp >= xs->dims[axis]) return -1;
    int64_t sizes[2] = {sp, xs->dims[axis] - sp};
    ts_attr a[2];
    int na = 0, ins[2] = {x, -1}, nin = 1;
    a[na++] = ts_attr_int("axis", axis);
    if (b->g->opset >= 13) {
        /* opset 13 moved the sizes from an attribute to an input */
        int64_t two = 2;
        ts_shape s = ts_shape_make(1, &two);
        ts_tensor *t = ts_tensor_new(TS_I64, &s, &b->err);
        if (!t) return -1;
        memcpy(t->data, sizes, sizeof sizes);
        ins[1] = add_const(b, t);
        if (ins[1] < 0) return -1;
        nin = 2;
    } else {
        a[na++] = ts_attr_ints("split", sizes, 2);
    }
    int outs[2];
    char name[96];
    if (ts_graph_add_node(b->g, "Split", node_name(b, "Split", name, sizeof name), ins, nin, a, na, 2, NULL, outs, &b->err) < 0) return -1;
    b->split_arg[b->nsplit] = e->arg[0];
    b->split_axis[b->nsplit] = e->p.axis;
    b->split_out[b->nsplit][0] = outs[0];
    b->split_out[b->nsplit][1] = outs[1];
    b->nsplit++;
    return outs[slot];
}

static int build_op(bstate *b, const ts_rexpr *e)
{
    ts_graph *g = b->g;
    int x[2] = {-1, -1};
    if (e->op == TS_ROP_SPLIT0 || e->op == TS_ROP_SPLIT1) return build_split(b, e);
    for (int k = 0; k < e->nargs; k++)
        if ((x[k] = build(b, e->arg[k])) < 0) return -1;
    switch (e->op) {
    case TS_ROP_EWADD:
    case TS_ROP_EWMUL:
        if (!ts_shape_eq(vshape(g, x[0]), vshape(g, x[1]))) return -1;
        return node1(b, e->op == TS_ROP_EWADD ? "Add" : "Mul", x, 2, NULL, 0);
    case TS_ROP_SMUL:
        if (ts_shape_numel(vshape(g, x[1])) != 1) return -1;
        return node1(b, "Mul", x, 2, NULL, 0);
    case TS_ROP_RELU:
        return node1(b, "Relu", x, 1, NULL, 0);
    case TS_ROP_TRANSPOSE: {
        if (vshape(g, x[0])->rank != 2) return -1;
        int64_t perm[2] = {1, 0};
        ts_attr a = ts_attr_ints("perm", perm, 2);
        return node1(b, "Transpose", x, 1, &a, 1);
    }
    case TS_ROP_MATMUL: {
        int ra = vshape(g, x[0])->rank;
        if (vshape(g, x[1])->rank != 2 || (ra != 2 && ra != 3)) return -1;
        int pending[TS_MATCH_MAX_VARS] = {0};
        int bias = bias_of(b, e->arg[1], x[1], 1, pending);
        if (bias == -2) return -1;
        int y = node1(b, "MatMul", x, 2, NULL, 0);
        if (y < 0 || bias < 0) {
            if (y >= 0) commit_bias(b, pending);
            return y;
        }
        int ins[2] = {y, bias};
        int z = node1(b, "Add", ins, 2, NULL, 0);
        if (z >= 0) commit_bias(b, pending);
        return z;
    }
    case TS_ROP_CONV: {
        const ts_shape *xs = vshape(g, x[0]), *ws = vshape(g, x[1]);
        if (xs->rank != 4 || ws->rank != 4 || ws->dims[1] != xs->dims[1]) return -1;
        int64_t strides[2] = {e->p.stride, e->p.stride}, pads[4] = {0, 0, 0, 0};
        if (e->p.pad == TS_RPAD_SAME)
            for (int d = 0; d < 2; d++) {
                int64_t in = xs->dims[2 + d], s = e->p.stride, out = (in + s - 1) / s;
                int64_t total = (out - 1) * s + ws->dims[2 + d] - in;
                if (total < 0) total = 0;
                pads[d] = total / 2;
                pads[d + 2] = total - total / 2;
            }
        ts_attr a[2] = {ts_attr_ints("strides", strides, 2), ts_attr_ints("pads", pads, 4)};
        int pending[TS_MATCH_MAX_VARS] = {0};
        int bias = bias_of(b, e->arg[1], x[1], 0, pending);
        if (bias == -2) return -1;
        int ins[3] = {x[0], x[1], bias};
        int y = node1(b, "Conv", ins, bias >= 0 ? 3 : 2, a, 2);
        if (y < 0) return -1;
        commit_bias(b, pending);
        return e->p.act == TS_RACT_RELU ? node1(b, "Relu", &y, 1, NULL, 0) : y;
    }
    case TS_ROP_POOLAVG:
    case TS_ROP_POOLMAX: {
        const ts_shape *xs = vshape(g, x[0]);
        if (xs->rank != 4) return -1;
        int64_t k[2] = {e->p.kh, e->p.kw}, strides[2] = {e->p.stride, e->p.stride}, pads[4] = {0, 0, 0, 0};
        if (e->p.pad == TS_RPAD_SAME)
            for (int d = 0; d < 2; d++) {
                int64_t in = xs->dims[2 + d], s = e->p.stride, out = (in + s - 1) / s;
                int64_t total = (out - 1) * s + k[d] - in;
                if (total < 0) total = 0;
                pads[d] = total / 2;
                pads[d + 2] = total - total / 2;
            }
        ts_attr a[4] = {ts_attr_ints("kernel_shape", k, 2), ts_attr_ints("strides", strides, 2),
                        ts_attr_ints("pads", pads, 4), ts_attr_int("count_include_pad", 1)};
        bool avg = e->op == TS_ROP_POOLAVG;
        return node1(b, avg ? "AveragePool" : "MaxPool", x, 1, a, avg && e->p.pad == TS_RPAD_SAME ? 4 : 3);
    }
    case TS_ROP_CONCAT: {
        int rank = vshape(g, x[0])->rank, axis = onnx_axis(rank, e->p.axis);
        if (axis >= rank) return -1;
        if (g->values[x[0]].constant && g->values[x[1]].constant) {
            /* concatenated weights: made here (memoized), not folded later */
            ts_tensor *parts[2] = {g->values[x[0]].constant, g->values[x[1]].constant};
            return ts_graph_const_value(g, ts_const_concat(b->cc, parts, 2, axis, &b->err), &b->err);
        }
        ts_attr a = ts_attr_int("axis", axis);
        return node1(b, "Concat", x, 2, &a, 1);
    }
    default:
        return -1;
    }
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

ts_status ts_rule_apply(const ts_graph *g0, const ts_rule *r, const ts_match *m, ts_graph **out, ts_error *err)
{
    return ts_rule_apply_cached(g0, r, m, NULL, out, err);
}

ts_status ts_rule_apply_cached(const ts_graph *g0, const ts_rule *r, const ts_match *m, ts_const_cache *cc,
                               ts_graph **out, ts_error *err)
{
    *out = NULL;
    ts_graph *g = ts_graph_copy(g0);
    bstate *b = calloc(1, sizeof *b);
    int *uses = NULL;
    if (!g || !b) {
        ts_graph_free(g);
        free(b);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory applying rule %s", r->name);
    }
    b->g = g;
    b->m = m;
    b->cc = cc;
    int nold = g->nnodes, newv[8];
    bool ok = true;
    for (int i = 0; i < r->nout && ok; i++) {
        newv[i] = build(b, r->rhs[i]);
        ok = newv[i] >= 0 && newv[i] != m->root[i] && ts_shape_eq(vshape(g, newv[i]), vshape(g, m->root[i])) &&
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
    if (ts_graph_fold_constants(g, &b->err) < 0) goto reject;
    ts_graph_compact(g);
    if (ts_graph_validate(g, &b->err)) goto reject;
    free(uses);
    free(b);
    *out = g;
    return TS_OK;
reject:
    /* a rewrite that does not fit here (its reason in b->err) is not an
     * error: the caller just gets no graph */
    if (b->err.code == TS_ERR_NOMEM) goto nomem;
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
