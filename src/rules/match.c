/* Matcher: occurrences of a TASO rule's source pattern in an ONNX graph
 * (the atom <-> ONNX mapping is described in rules/apply.h). */
#include <stdlib.h>
#include <string.h>
#include "rules/apply.h"

const ts_attr *ts_node_attr(const ts_node *n, const char *name, ts_attr *buf, int nbuf)
{
    if (!n->op->emit) return NULL;
    int k = n->op->emit(n->attrs, buf, nbuf);
    for (int i = 0; i < k; i++)
        if (!strcmp(buf[i].name, name)) return &buf[i];
    return NULL;
}

ts_status ts_match_index_build(ts_match_index *ix, const ts_graph *g, ts_error *err)
{
    memset(ix, 0, sizeof *ix);
    ix->g = g;
    ix->ustart = calloc((size_t)g->nvalues + 2, sizeof(int));
    ix->outuse = calloc((size_t)g->nvalues + 1, sizeof(int));
    if (!ix->ustart || !ix->outuse) goto nomem;
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0) ix->ustart[n->inputs[j] + 1]++;
    }
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
    memset(ix, 0, sizeof *ix);
}

static bool expr_applicable(const ts_rexpr *e)
{
    switch (e->op) {
    case TS_ROP_VAR:
    case TS_ROP_EWADD:
    case TS_ROP_EWMUL:
    case TS_ROP_SMUL:
    case TS_ROP_TRANSPOSE:
    case TS_ROP_MATMUL:
    case TS_ROP_CONV:
    case TS_ROP_RELU:
    case TS_ROP_POOLAVG:
    case TS_ROP_POOLMAX:
    case TS_ROP_CONCAT:
    case TS_ROP_SPLIT0:
    case TS_ROP_SPLIT1:
        break;
    default:
        /* enlarge and the constant atoms (Iconv, Cpool, ...) have no
         * counterpart in a model graph yet */
        return false;
    }
    for (int i = 0; i < e->nargs; i++)
        if (!expr_applicable(e->arg[i])) return false;
    return true;
}

bool ts_rule_applicable(const ts_rule *r)
{
    if (r->nout < 1 || r->nout > 8) return false;
    for (int i = 0; i < r->nout; i++) {
        /* a bare variable as a source output would match every value */
        if (r->lhs[i]->op == TS_ROP_VAR) return false;
        if (!expr_applicable(r->lhs[i]) || !expr_applicable(r->rhs[i])) return false;
    }
    return true;
}

/* ---- shape helpers shared with apply.c through the conventions in apply.h */

/* TASO axis -> ONNX axis for a tensor of this rank. */
static int onnx_axis(int rank, int a) { return rank == 3 ? a + 1 : a; }

/* Pads of a SAME conv/pool (TASO: output = ceil(in / stride)). */
static void same_pads(const ts_shape *x, const int64_t *k, int64_t s, int64_t *pb, int64_t *pe)
{
    for (int d = 0; d < 2; d++) {
        int64_t in = x->dims[2 + d], out = (in + s - 1) / s;
        int64_t total = (out - 1) * s + k[d] - in;
        if (total < 0) total = 0;
        pb[d] = total / 2;
        pe[d] = total - total / 2;
    }
}

/* Checks a Conv/pool node's window against TASO's stride and padding. */
static bool window_ok(const ts_node *n, const ts_shape *x, const int64_t *k, int stride, ts_rpad pad)
{
    ts_attr buf[12];
    int na = n->op->emit ? n->op->emit(n->attrs, buf, 12) : 0;
    int64_t strides[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
    const char *autopad = NULL;
    if (x->rank != 4) return false;
    for (int i = 0; i < na; i++) {
        const ts_attr *a = &buf[i];
        if (!strcmp(a->name, "strides")) {
            if (a->n != 2) return false;
            strides[0] = a->ints[0], strides[1] = a->ints[1];
        } else if (!strcmp(a->name, "pads")) {
            if (a->n != 4) return false;
            memcpy(pads, a->ints, sizeof pads);
        } else if (!strcmp(a->name, "dilations")) {
            for (int j = 0; j < a->n; j++)
                if (a->ints[j] != 1) return false;
        } else if (!strcmp(a->name, "auto_pad")) {
            autopad = a->s;
        } else if (!strcmp(a->name, "ceil_mode")) {
            if (a->i) return false;
        } else if (!strcmp(a->name, "group")) {
            if (a->i != 1) return false;
        }
    }
    if (strides[0] != stride || strides[1] != stride) return false;
    int64_t pb[2], pe[2];
    same_pads(x, k, stride, pb, pe);
    if (autopad && strcmp(autopad, "NOTSET")) {
        if (!strcmp(autopad, "VALID")) return pad == TS_RPAD_VALID;
        if (!strcmp(autopad, "SAME_UPPER")) return pad == TS_RPAD_SAME;
        return false;
    }
    if (pad == TS_RPAD_VALID) return !pads[0] && !pads[1] && !pads[2] && !pads[3];
    return pads[0] == pb[0] && pads[1] == pb[1] && pads[2] == pe[0] && pads[3] == pe[1];
}

/* ---- matching */

typedef struct mstate {
    const ts_match_index *ix;
    const ts_graph *g;
    const ts_rule *r;
    ts_match m;
} mstate;

static int var_slot(ts_match *m, const char *name)
{
    for (int i = 0; i < m->nvars; i++)
        if (!strcmp(m->var[i], name)) return i;
    return -1;
}

static bool add_node(ts_match *m, int n)
{
    for (int i = 0; i < m->nnodes; i++)
        if (m->node[i] == n) return true;
    if (m->nnodes >= TS_MATCH_MAX_NODES) return false;
    m->node[m->nnodes++] = n;
    return true;
}

static const ts_shape *vshape(const ts_graph *g, int v) { return &g->values[v].shape; }

static int live_producer(const ts_graph *g, int v, const char *op)
{
    int p = g->values[v].producer;
    if (p < 0 || g->nodes[p].dead || strcmp(g->nodes[p].op->name, op)) return -1;
    return p;
}

/* Whether value v is used by nothing but node n (exactly once, not an output). */
static bool only_use(const ts_match_index *ix, int v, int n)
{
    return ix->outuse[v] == 0 && ix->ustart[v + 1] - ix->ustart[v] == 1 && ix->user[ix->ustart[v]] == n;
}

static bool match_expr(mstate *s, const ts_rexpr *e, int v);

/* Binds a conv/matmul weight var's bias. */
static bool bind_bias(ts_match *m, const ts_rexpr *w, int bias)
{
    if (bias < 0) return true;
    if (w->op != TS_ROP_VAR) return false;
    int i = var_slot(m, w->var);
    if (i < 0) return false;
    if (m->bias[i] >= 0 && m->bias[i] != bias) return false;
    m->bias[i] = bias;
    m->bias_uses[i]++;
    return true;
}

/* Split size along TASO axis `axis` of the value matched (or built) for e:
 * the point where e's last concat along that axis joined its parts; -1 when
 * e carries no such point.  shape_of gives the shape of a subterm. */
int64_t ts_rexpr_split_point(const ts_rexpr *e, int axis, const ts_shape *(*shape_of)(void *, const ts_rexpr *),
                             void *ctx)
{
    switch (e->op) {
    case TS_ROP_CONCAT:
        if (e->p.axis == axis) {
            const ts_shape *a = shape_of(ctx, e->arg[0]);
            return a ? a->dims[onnx_axis(a->rank, axis)] : -1;
        }
        return ts_rexpr_split_point(e->arg[0], axis, shape_of, ctx);
    case TS_ROP_EWADD:
    case TS_ROP_EWMUL: {
        int64_t p = ts_rexpr_split_point(e->arg[0], axis, shape_of, ctx);
        return p >= 0 ? p : ts_rexpr_split_point(e->arg[1], axis, shape_of, ctx);
    }
    case TS_ROP_SMUL:
    case TS_ROP_RELU:
    case TS_ROP_POOLAVG:
    case TS_ROP_POOLMAX:
        return axis <= 1 ? ts_rexpr_split_point(e->arg[0], axis, shape_of, ctx) : -1;
    case TS_ROP_TRANSPOSE:
        return axis <= 1 ? ts_rexpr_split_point(e->arg[0], 1 - axis, shape_of, ctx) : -1;
    case TS_ROP_MATMUL:
        return axis == 0 ? ts_rexpr_split_point(e->arg[0], 0, shape_of, ctx)
                         : axis == 1 ? ts_rexpr_split_point(e->arg[1], 1, shape_of, ctx) : -1;
    case TS_ROP_CONV:
        return axis == 0 ? ts_rexpr_split_point(e->arg[0], 0, shape_of, ctx)
                         : axis == 1 ? ts_rexpr_split_point(e->arg[1], 0, shape_of, ctx) : -1;
    default:
        return -1;
    }
}

static const ts_shape *lhs_shape_of(void *ctx, const ts_rexpr *e)
{
    mstate *s = ctx;
    if (e->op == TS_ROP_VAR) {
        int i = var_slot(&s->m, e->var);
        return i >= 0 ? vshape(s->g, s->m.val[i]) : NULL;
    }
    for (int i = 0; i < s->m.nexprs; i++)
        if (s->m.expr[i] == e) return vshape(s->g, s->m.exval[i]);
    return NULL;
}

static bool same_shapes2(const ts_graph *g, const ts_node *n)
{
    return n->ninputs == 2 && n->inputs[0] >= 0 && n->inputs[1] >= 0 &&
           ts_shape_eq(vshape(g, n->inputs[0]), vshape(g, n->inputs[1])) &&
           ts_shape_eq(vshape(g, n->inputs[0]), vshape(g, n->outputs[0]));
}

static bool match_op(mstate *s, const ts_rexpr *e, int v)
{
    const ts_graph *g = s->g;
    ts_match *m = &s->m;
    int p;
    switch (e->op) {
    case TS_ROP_EWADD:
    case TS_ROP_EWMUL:
        p = live_producer(g, v, e->op == TS_ROP_EWADD ? "Add" : "Mul");
        if (p < 0 || !same_shapes2(g, &g->nodes[p])) return false;
        return add_node(m, p) && match_expr(s, e->arg[0], g->nodes[p].inputs[0]) &&
               match_expr(s, e->arg[1], g->nodes[p].inputs[1]);
    case TS_ROP_SMUL: {
        p = live_producer(g, v, "Mul");
        if (p < 0) return false;
        const ts_node *n = &g->nodes[p];
        if (ts_shape_numel(vshape(g, n->inputs[1])) != 1 || !ts_shape_eq(vshape(g, n->inputs[0]), vshape(g, v)))
            return false;
        return add_node(m, p) && match_expr(s, e->arg[0], n->inputs[0]) && match_expr(s, e->arg[1], n->inputs[1]);
    }
    case TS_ROP_RELU:
        p = live_producer(g, v, "Relu");
        return p >= 0 && add_node(m, p) && match_expr(s, e->arg[0], g->nodes[p].inputs[0]);
    case TS_ROP_TRANSPOSE: {
        p = live_producer(g, v, "Transpose");
        if (p < 0 || vshape(g, v)->rank != 2) return false;
        ts_attr buf[4];
        const ts_attr *perm = ts_node_attr(&g->nodes[p], "perm", buf, 4);
        if (perm && (perm->n != 2 || perm->ints[0] != 1 || perm->ints[1] != 0)) return false;
        return add_node(m, p) && match_expr(s, e->arg[0], g->nodes[p].inputs[0]);
    }
    case TS_ROP_MATMUL: {
        int bias = -1, add = live_producer(g, v, "Add");
        p = -1;
        if (add >= 0) {
            /* MatMul + Add(constant bias vector): one fused matmul for the runtime */
            const ts_node *a = &g->nodes[add];
            int mm = live_producer(g, a->inputs[0], "MatMul");
            int b = a->inputs[1];
            if (mm < 0 || !g->values[b].constant || vshape(g, b)->rank != 1 ||
                !ts_shape_eq(vshape(g, a->inputs[0]), vshape(g, v)) || !only_use(s->ix, a->inputs[0], add))
                return false;
            p = mm;
            bias = b;
            if (!add_node(m, add)) return false;
        } else {
            p = live_producer(g, v, "MatMul");
        }
        if (p < 0) return false;
        const ts_node *n = &g->nodes[p];
        int ra = vshape(g, n->inputs[0])->rank, rb = vshape(g, n->inputs[1])->rank;
        if (rb != 2 || (ra != 2 && ra != 3)) return false;
        if (!add_node(m, p) || !match_expr(s, e->arg[0], n->inputs[0]) || !match_expr(s, e->arg[1], n->inputs[1]))
            return false;
        return bind_bias(m, e->arg[1], bias);
    }
    case TS_ROP_CONV: {
        int relu = -1, cv = v;
        if (e->p.act == TS_RACT_RELU) {
            relu = live_producer(g, v, "Relu");
            if (relu < 0) return false;
            cv = g->nodes[relu].inputs[0];
            if (!only_use(s->ix, cv, relu)) return false;
        }
        p = live_producer(g, cv, "Conv");
        if (p < 0) return false;
        const ts_node *n = &g->nodes[p];
        const ts_shape *x = vshape(g, n->inputs[0]), *w = vshape(g, n->inputs[1]);
        if (x->rank != 4 || w->rank != 4 || w->dims[1] != x->dims[1]) return false;
        if (!window_ok(n, x, w->dims + 2, e->p.stride, e->p.pad)) return false;
        int bias = n->ninputs > 2 ? n->inputs[2] : -1;
        if (bias >= 0 && !g->values[bias].constant) return false;
        if ((relu >= 0 && !add_node(m, relu)) || !add_node(m, p)) return false;
        if (!match_expr(s, e->arg[0], n->inputs[0]) || !match_expr(s, e->arg[1], n->inputs[1])) return false;
        return bind_bias(m, e->arg[1], bias);
    }
    case TS_ROP_POOLAVG:
    case TS_ROP_POOLMAX: {
        bool avg = e->op == TS_ROP_POOLAVG;
        p = live_producer(g, v, avg ? "AveragePool" : "MaxPool");
        if (p < 0) return false;
        const ts_node *n = &g->nodes[p];
        if (n->noutputs != 1) return false;
        ts_attr buf[12];
        const ts_attr *k = ts_node_attr(n, "kernel_shape", buf, 12);
        if (!k || k->n != 2 || k->ints[0] != e->p.kh || k->ints[1] != e->p.kw) return false;
        /* TASO's average pool counts the padding (it is conv by Cpool) */
        if (avg && e->p.pad == TS_RPAD_SAME && !ts_node_attr(n, "count_include_pad", buf, 12)) return false;
        int64_t kk[2] = {e->p.kh, e->p.kw};
        if (!window_ok(n, vshape(g, n->inputs[0]), kk, e->p.stride, e->p.pad)) return false;
        return add_node(m, p) && match_expr(s, e->arg[0], n->inputs[0]);
    }
    case TS_ROP_CONCAT: {
        p = live_producer(g, v, "Concat");
        if (p < 0) return false;
        const ts_node *n = &g->nodes[p];
        if (n->ninputs != 2) return false;
        ts_attr buf[2];
        const ts_attr *ax = ts_node_attr(n, "axis", buf, 2);
        int rank = vshape(g, v)->rank, axis;
        if (!ax || !ts_axis_norm(ax->i, rank, &axis) || axis != onnx_axis(rank, e->p.axis)) return false;
        return add_node(m, p) && match_expr(s, e->arg[0], n->inputs[0]) && match_expr(s, e->arg[1], n->inputs[1]);
    }
    case TS_ROP_SPLIT0:
    case TS_ROP_SPLIT1: {
        p = live_producer(g, v, "Split");
        if (p < 0) return false;
        const ts_node *n = &g->nodes[p];
        if (n->noutputs != 2 || g->values[v].producer_slot != (e->op == TS_ROP_SPLIT1)) return false;
        ts_attr buf[4];
        const ts_attr *ax = ts_node_attr(n, "axis", buf, 4);
        int rank = vshape(g, v)->rank, axis;
        if (!ts_axis_norm(ax ? ax->i : 0, rank, &axis) || axis != onnx_axis(rank, e->p.axis)) return false;
        if (!add_node(m, p) || !match_expr(s, e->arg[0], n->inputs[0])) return false;
        /* the rule means the split at the last concat point of its argument */
        int64_t sp = ts_rexpr_split_point(e->arg[0], e->p.axis, lhs_shape_of, s);
        return sp >= 0 && sp == vshape(g, n->outputs[0])->dims[axis];
    }
    default:
        return false;
    }
}

static bool match_expr(mstate *s, const ts_rexpr *e, int v)
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
    return match_op(s, e, v);
}

/* Matched interior values must not escape: every output of a matched node
 * that a matched node reads is read only by matched nodes (the roots may be
 * used anywhere). */
static bool closed(const mstate *s)
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

static bool constraints_hold(mstate *s)
{
    for (int c = 0; c < s->r->ncons; c++) {
        const ts_rcons *k = &s->r->cons[c];
        int a = var_slot(&s->m, k->var[0]), b = k->nvars > 1 ? var_slot(&s->m, k->var[1]) : -1;
        if (a < 0) return false;
        if (k->kind == TS_RCONS_SAME_SHAPE) {
            if (b < 0 || !ts_shape_eq(vshape(s->g, s->m.val[a]), vshape(s->g, s->m.val[b]))) return false;
        } else if (k->kind == TS_RCONS_WEIGHT) {
            if (!s->g->values[s->m.val[a]].constant) return false;
        }
    }
    return true;
}

/* Candidate values for lhs output i: every value, or, when the expression
 * reads a variable bound already, the values within reach of it. */
static const ts_rexpr *bound_leaf(const ts_match *m, const ts_rexpr *e, int depth, int *at)
{
    if (e->op == TS_ROP_VAR) {
        if (var_slot((ts_match *)m, e->var) >= 0) {
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

static void match_root(mstate *s, int i, walk *w);

static void try_root(mstate *s, int i, int v, walk *w)
{
    for (int k = 0; k < i; k++)
        if (s->m.root[k] == v) return;
    ts_match saved = s->m;
    s->m.root[i] = v;
    s->m.nroots = i + 1;
    if (match_expr(s, s->r->lhs[i], v)) {
        if (i + 1 < s->r->nout)
            match_root(s, i + 1, w);
        else if (closed(s) && constraints_hold(s)) {
            w->count++;
            if (!w->fn(&s->m, w->ctx)) w->stop = true;
        }
    }
    s->m = saved;
}

static void match_root(mstate *s, int i, walk *w)
{
    const ts_graph *g = s->g;
    const ts_match_index *ix = s->ix;
    int depth = 0;
    const ts_rexpr *leaf = i > 0 ? bound_leaf(&s->m, s->r->lhs[i], 0, &depth) : NULL;
    if (!leaf) {
        for (int n = 0; n < g->nnodes && !w->stop; n++) {
            if (g->nodes[n].dead) continue;
            for (int o = 0; o < g->nodes[n].noutputs && !w->stop; o++) try_root(s, i, g->nodes[n].outputs[o], w);
        }
        return;
    }
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
            for (int k = 0; k < nf && !w->stop; k++) try_root(s, i, front[k], w);
    }
    free(front);
}

int ts_match_all(const ts_match_index *ix, const ts_rule *r, bool (*fn)(const ts_match *m, void *ctx), void *ctx)
{
    if (!ts_rule_applicable(r)) return 0;
    mstate *s = calloc(1, sizeof *s);
    if (!s) return 0;
    s->ix = ix;
    s->g = ix->g;
    s->r = r;
    walk w = {.fn = fn, .ctx = ctx};
    match_root(s, 0, &w);
    free(s);
    return w.count;
}
