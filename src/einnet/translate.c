/* Operators to expressions (paper section 3): the expression each node
 * computes, built from its attributes and its inputs' shapes (the op
 * descriptors' `expr` strings are the canonical forms at default
 * attributes, for the reader; this is what the optimizer uses).
 *
 * Padding is never materialized: a read outside the input is 0.  Groups
 * are a merged traversal: the output channel iterator is split into
 * (group, channel in group) and the root's traversal is reshaped to the
 * output (expr.h), so every index stays affine. */
#include <stdio.h>
#include <string.h>
#include "ein/expr.h"
#include "ops/attrs.h"

typedef struct tr {
    const ts_graph *g;
    const ts_node *nd;
    ts_ein *e;
    ts_error *err;
} tr;

static ts_status unsupported(tr *t, const char *fmt, const char *what)
{
    return ts_error_set(t->err, TS_ERR_UNSUPPORTED, "einnet: node '%s' (%s): %s%s", t->nd->name, t->nd->op->name, fmt,
                        what ? what : "");
}

static ts_status full(tr *t)
{
    return unsupported(t, "expression too large for the fixed storage", NULL);
}

static const ts_shape *in_shape(tr *t, int k)
{
    return &t->e->in_shape[k];
}

/* A new scope traversing [0, dims[d]) for each d; its iterators in its[]. */
static int scope_over(ts_ein *e, const ts_shape *s, int *its)
{
    int sc = ts_ein_scope_new(e);
    if (sc < 0 || s->rank > EIN_MAX_TRAV) return -1;
    for (int d = 0; d < s->rank; d++) {
        its[d] = ts_ein_iter_new(e, 0, s->dims[d]);
        if (its[d] < 0) return -1;
        e->scope[sc].trav[d] = (int16_t)its[d];
    }
    e->scope[sc].ntrav = (int8_t)s->rank;
    return sc;
}

static int add_sum(ts_ein *e, int sc, int64_t hi)
{
    int it = ts_ein_iter_new(e, 0, hi);
    if (it < 0 || e->scope[sc].nsum >= EIN_MAX_SUM) return -1;
    e->scope[sc].sum[e->scope[sc].nsum++] = (int16_t)it;
    return it;
}

/* Read of input k broadcast (numpy, right-aligned) onto traversal its[] of
 * an output of rank orank. */
static int read_bcast(ts_ein *e, int k, const int *its, int orank)
{
    const ts_shape *s = &e->in_shape[k];
    ts_ein_idx ix[TS_MAX_RANK];
    for (int d = 0; d < s->rank; d++) {
        int od = orank - s->rank + d;
        ix[d] = s->dims[d] == 1 ? ts_ein_idx_const(0) : ts_ein_idx_it(its[od]);
    }
    return ts_ein_read(e, k, s->rank, ix);
}

static ts_status elementwise(tr *t, ts_ein_op op)
{
    ts_ein *e = t->e;
    int its[TS_MAX_RANK];
    if (scope_over(e, &e->out_shape, its) != 0) return full(t);
    int a = read_bcast(e, 0, its, e->out_shape.rank);
    int b = op == EIN_NEG || op == EIN_RELU || op == EIN_READ ? -2 : read_bcast(e, 1, its, e->out_shape.rank);
    int body = op == EIN_READ ? a : b == -2 ? ts_ein_un(e, op, a) : ts_ein_bin(e, op, a, b);
    if (body < 0) return full(t);
    e->scope[0].body = (int16_t)body;
    return TS_OK;
}

/* Reshape-like: the output is the input's elements in order. */
static ts_status reshape(tr *t)
{
    ts_ein *e = t->e;
    int its[TS_MAX_RANK];
    if (scope_over(e, in_shape(t, 0), its) != 0) return full(t);
    ts_ein_idx ix[TS_MAX_RANK];
    for (int d = 0; d < in_shape(t, 0)->rank; d++) ix[d] = ts_ein_idx_it(its[d]);
    int r = ts_ein_read(e, 0, in_shape(t, 0)->rank, ix);
    if (r < 0) return full(t);
    e->scope[0].body = (int16_t)r;
    e->ninputs = 1; /* Reshape's shape input is not data */
    return TS_OK;
}

static ts_status transpose(tr *t)
{
    ts_ein *e = t->e;
    const ts_transpose_attrs *a = t->nd->attrs;
    int rank = in_shape(t, 0)->rank, its[TS_MAX_RANK];
    if (scope_over(e, &e->out_shape, its) != 0) return full(t);
    ts_ein_idx ix[TS_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        int p = a->nperm < 0 ? rank - 1 - d : (int)a->perm[d];
        ix[p] = ts_ein_idx_it(its[d]);
    }
    int r = ts_ein_read(e, 0, rank, ix);
    if (r < 0) return full(t);
    e->scope[0].body = (int16_t)r;
    return TS_OK;
}

/* MatMul (ranks >= 2, numpy batch broadcast) and Gemm. */
static ts_status matmul(tr *t, const ts_gemm_attrs *gm)
{
    ts_ein *e = t->e;
    const ts_shape *A = in_shape(t, 0), *B = in_shape(t, 1), *O = &e->out_shape;
    if (A->rank < 2 || B->rank < 2) return unsupported(t, "a rank-1 operand", NULL);
    bool bias = gm && e->ninputs > 2 && gm->beta != 0;
    int its[TS_MAX_RANK], root_its[TS_MAX_RANK];
    int sc = 0;
    if (bias) {
        if (scope_over(e, O, root_its) != 0) return full(t);
        sc = 1;
    }
    if (scope_over(e, O, its) != sc) return full(t);
    int64_t K = A->dims[gm && gm->trans_a ? A->rank - 2 : A->rank - 1];
    int k = add_sum(e, sc, K);
    if (k < 0) return full(t);
    int orank = O->rank, m = its[orank - 2], n = its[orank - 1];
    ts_ein_idx ia[TS_MAX_RANK], ib[TS_MAX_RANK];
    for (int d = 0; d < A->rank - 2; d++)
        ia[d] = A->dims[d] == 1 ? ts_ein_idx_const(0) : ts_ein_idx_it(its[orank - A->rank + d]);
    for (int d = 0; d < B->rank - 2; d++)
        ib[d] = B->dims[d] == 1 ? ts_ein_idx_const(0) : ts_ein_idx_it(its[orank - B->rank + d]);
    bool ta = gm && gm->trans_a, tb = gm && gm->trans_b;
    ia[A->rank - 2] = ts_ein_idx_it(ta ? k : m);
    ia[A->rank - 1] = ts_ein_idx_it(ta ? m : k);
    ib[B->rank - 2] = ts_ein_idx_it(tb ? n : k);
    ib[B->rank - 1] = ts_ein_idx_it(tb ? k : n);
    int body = ts_ein_bin(e, EIN_MUL, ts_ein_read(e, 0, A->rank, ia), ts_ein_read(e, 1, B->rank, ib));
    if (gm && gm->alpha != 1) body = ts_ein_bin(e, EIN_MUL, ts_ein_num(e, gm->alpha), body);
    if (body < 0) return full(t);
    e->scope[sc].body = (int16_t)body;
    if (bias) {
        ts_ein_idx ix[TS_MAX_RANK];
        for (int d = 0; d < orank; d++) ix[d] = ts_ein_idx_it(root_its[d]);
        int c = read_bcast(e, 2, root_its, orank);
        if (gm->beta != 1) c = ts_ein_bin(e, EIN_MUL, ts_ein_num(e, gm->beta), c);
        int r = ts_ein_bin(e, EIN_ADD, ts_ein_read(e, -sc - 1, orank, ix), c);
        if (r < 0) return full(t);
        e->scope[0].body = (int16_t)r;
    } else if (gm) {
        e->ninputs = 2;
    }
    return TS_OK;
}

/* Traversal n, [g,] f, o... of a conv-like output; returns the scope. */
static int conv_scope(ts_ein *e, int64_t N, int64_t G, int64_t Fg, int nsp, const int64_t *O, int *n, int *g, int *f,
                      int *o)
{
    int sc = ts_ein_scope_new(e);
    if (sc < 0) return -1;
    ts_ein_scope *s = &e->scope[sc];
    int k = 0;
    *n = ts_ein_iter_new(e, 0, N);
    s->trav[k++] = (int16_t)*n;
    *g = -1;
    if (G > 1) {
        *g = ts_ein_iter_new(e, 0, G);
        s->trav[k++] = (int16_t)*g;
    }
    *f = ts_ein_iter_new(e, 0, Fg);
    s->trav[k++] = (int16_t)*f;
    for (int d = 0; d < nsp; d++) {
        o[d] = ts_ein_iter_new(e, 0, O[d]);
        if (o[d] < 0) return -1;
        s->trav[k++] = (int16_t)o[d];
    }
    s->ntrav = (int8_t)k;
    return *n < 0 || *f < 0 || (G > 1 && *g < 0) ? -1 : sc;
}

/* channel index g*size + c (g < 0: c) */
static ts_ein_idx chan(int g, int64_t size, int c)
{
    ts_ein_idx x = ts_ein_idx_it(c);
    if (g >= 0) {
        ts_ein_idx gi = ts_ein_idx_it(g);
        ts_ein_idx_axpy(&x, size, &gi);
    }
    return x;
}

/* Adds the bias (input 2) to the conv-like scope `sc` in a new root scope 0
 * made before it (the caller made scope 0 empty first). */
static ts_status with_bias(tr *t, int sc, int64_t G, int64_t Fg)
{
    ts_ein *e = t->e;
    const ts_ein_scope *c = &e->scope[sc];
    ts_ein_scope *r = &e->scope[0];
    ts_ein_idx ix[EIN_MAX_TRAV];
    r->ntrav = c->ntrav;
    for (int d = 0; d < c->ntrav; d++) {
        int it = ts_ein_iter_new(e, e->iter[c->trav[d]].lo, e->iter[c->trav[d]].hi);
        if (it < 0) return full(t);
        r->trav[d] = (int16_t)it;
        ix[d] = ts_ein_idx_it(it);
    }
    ts_ein_idx bi = chan(G > 1 ? r->trav[1] : -1, Fg, r->trav[G > 1 ? 2 : 1]);
    int body = ts_ein_bin(e, EIN_ADD, ts_ein_read(e, -sc - 1, c->ntrav, ix), ts_ein_read(e, 2, 1, &bi));
    if (body < 0) return full(t);
    r->body = (int16_t)body;
    return TS_OK;
}

static ts_status conv(tr *t)
{
    ts_ein *e = t->e;
    const ts_conv_attrs *a = t->nd->attrs;
    const ts_shape *X = in_shape(t, 0), *W = in_shape(t, 1);
    int nsp = X->rank - 2;
    ts_window_geom geo;
    char why[200];
    if (!ts_window_resolve(&a->win, nsp, X->dims + 2, W->dims + 2, &geo, why, sizeof why))
        return unsupported(t, why, NULL);
    int64_t G = a->group, Cg = W->dims[1], Fg = W->dims[0] / G;
    bool bias = e->ninputs > 2;
    if (bias && ts_ein_scope_new(e) != 0) return full(t);
    int n, g, f, o[TS_WIN_MAX], k[TS_WIN_MAX];
    int sc = conv_scope(e, X->dims[0], G, Fg, nsp, e->out_shape.dims + 2, &n, &g, &f, o);
    if (sc < 0) return full(t);
    int c = add_sum(e, sc, Cg);
    for (int d = 0; d < nsp; d++) k[d] = add_sum(e, sc, W->dims[2 + d]);
    ts_ein_idx ix[TS_MAX_RANK], iw[TS_MAX_RANK];
    ix[0] = ts_ein_idx_it(n);
    ix[1] = chan(g, Cg, c);
    iw[0] = chan(g, Fg, f);
    iw[1] = ts_ein_idx_it(c);
    for (int d = 0; d < nsp; d++) {
        if (k[d] < 0) return full(t);
        /* input position o*stride + k*dilation - pad_begin */
        ts_ein_idx p = ts_ein_idx_const(-geo.pad_begin[d]), oi = ts_ein_idx_it(o[d]), ki = ts_ein_idx_it(k[d]);
        ts_ein_idx_axpy(&p, geo.stride[d], &oi);
        ts_ein_idx_axpy(&p, geo.dil[d], &ki);
        ix[2 + d] = p;
        iw[2 + d] = ki;
    }
    int body = ts_ein_bin(e, EIN_MUL, ts_ein_read(e, 0, X->rank, ix), ts_ein_read(e, 1, W->rank, iw));
    if (body < 0 || c < 0) return full(t);
    e->scope[sc].body = (int16_t)body;
    return bias ? with_bias(t, sc, G, Fg) : TS_OK;
}

/* ConvTranspose: Y[n,f,o] = Sum_{c,i} X[n,c,i] * W[c,f,o+pad-i*stride]:
 * kernel positions out of [0,K) read 0, so no divisibility condition is
 * needed (dilation 1 only). */
static ts_status conv_transpose(tr *t)
{
    ts_ein *e = t->e;
    const ts_convt_attrs *a = t->nd->attrs;
    const ts_shape *X = in_shape(t, 0), *W = in_shape(t, 1), *Y = &e->out_shape;
    int nsp = X->rank - 2;
    int64_t G = a->group, Cg = X->dims[1] / G, Fg = W->dims[1];
    int64_t pad[TS_WIN_MAX], stride[TS_WIN_MAX];
    for (int d = 0; d < nsp; d++) {
        int64_t s = a->win.nstrides >= 0 ? a->win.strides[d] : 1, dil = a->win.ndilations >= 0 ? a->win.dilations[d] : 1;
        int64_t K = W->dims[2 + d], in = X->dims[2 + d], op = a->nout_pad >= 0 ? a->out_pad[d] : 0;
        if (dil != 1) return unsupported(t, "dilated transposed convolution", NULL);
        bool same = a->win.auto_pad == TS_PAD_SAME_UPPER || a->win.auto_pad == TS_PAD_SAME_LOWER;
        if (a->nout_shape >= 0 || same) {
            int64_t total = s * (in - 1) + op + K - Y->dims[2 + d];
            pad[d] = a->win.auto_pad == TS_PAD_SAME_UPPER ? total / 2 : total - total / 2;
        } else {
            pad[d] = a->win.auto_pad == TS_PAD_NOTSET && a->win.npads >= 0 ? a->win.pads[d] : 0;
        }
        stride[d] = s;
    }
    bool bias = e->ninputs > 2;
    if (bias && ts_ein_scope_new(e) != 0) return full(t);
    int n, g, f, o[TS_WIN_MAX], i[TS_WIN_MAX];
    int sc = conv_scope(e, X->dims[0], G, Fg, nsp, Y->dims + 2, &n, &g, &f, o);
    if (sc < 0) return full(t);
    int c = add_sum(e, sc, Cg);
    ts_ein_idx ix[TS_MAX_RANK], iw[TS_MAX_RANK];
    ix[0] = ts_ein_idx_it(n);
    ix[1] = chan(g, Cg, c);
    iw[0] = chan(g, Cg, c);
    iw[1] = ts_ein_idx_it(f);
    for (int d = 0; d < nsp; d++) {
        i[d] = add_sum(e, sc, X->dims[2 + d]);
        if (i[d] < 0) return full(t);
        ix[2 + d] = ts_ein_idx_it(i[d]);
        ts_ein_idx p = ts_ein_idx_it(o[d]), ii = ts_ein_idx_it(i[d]);
        p.c = pad[d];
        ts_ein_idx_axpy(&p, -stride[d], &ii);
        iw[2 + d] = p;
    }
    int body = ts_ein_bin(e, EIN_MUL, ts_ein_read(e, 0, X->rank, ix), ts_ein_read(e, 1, W->rank, iw));
    if (body < 0 || c < 0) return full(t);
    e->scope[sc].body = (int16_t)body;
    return bias ? with_bias(t, sc, G, Fg) : TS_OK;
}

/* AveragePool when every window divides by the full kernel size
 * (count_include_pad, or no padding), GlobalAveragePool. */
static ts_status avgpool(tr *t, bool global)
{
    ts_ein *e = t->e;
    const ts_shape *X = in_shape(t, 0);
    int nsp = X->rank - 2;
    ts_window_geom geo;
    if (global) {
        memset(&geo, 0, sizeof geo);
        for (int d = 0; d < nsp; d++) geo.kernel[d] = X->dims[2 + d], geo.stride[d] = geo.dil[d] = 1;
    } else {
        const ts_pool_attrs *a = t->nd->attrs;
        char why[200];
        if (a->win.ceil_mode) return unsupported(t, "ceil_mode", NULL);
        if (!ts_window_resolve(&a->win, nsp, X->dims + 2, NULL, &geo, why, sizeof why)) return unsupported(t, why, NULL);
        for (int d = 0; d < nsp && !a->count_include_pad; d++)
            if (geo.pad_begin[d] || geo.pad_end[d]) return unsupported(t, "padding not counted in the average", NULL);
    }
    int n, g, f, o[TS_WIN_MAX];
    int64_t ones[TS_WIN_MAX], ksize = 1;
    for (int d = 0; d < nsp; d++) ones[d] = global ? 1 : e->out_shape.dims[2 + d], ksize *= geo.kernel[d];
    int sc = conv_scope(e, X->dims[0], 1, X->dims[1], global ? 0 : nsp, ones, &n, &g, &f, o);
    if (sc != 0) return full(t);
    ts_ein_idx ix[TS_MAX_RANK];
    ix[0] = ts_ein_idx_it(n);
    ix[1] = ts_ein_idx_it(f);
    for (int d = 0; d < nsp; d++) {
        int k = add_sum(e, sc, geo.kernel[d]);
        if (k < 0) return full(t);
        ts_ein_idx p = ts_ein_idx_const(-geo.pad_begin[d]), ki = ts_ein_idx_it(k);
        if (!global) {
            ts_ein_idx oi = ts_ein_idx_it(o[d]);
            ts_ein_idx_axpy(&p, geo.stride[d], &oi);
        }
        ts_ein_idx_axpy(&p, geo.dil[d], &ki);
        ix[2 + d] = p;
    }
    int body = ts_ein_bin(e, EIN_MUL, ts_ein_read(e, 0, X->rank, ix), ts_ein_num(e, 1.0 / (double)ksize));
    if (body < 0) return full(t);
    e->scope[0].body = (int16_t)body;
    return TS_OK;
}

ts_status ts_ein_from_node(const ts_graph *g, int n, ts_ein *e, int *inputs, ts_error *err)
{
    const ts_node *nd = &g->nodes[n];
    memset(e, 0, sizeof *e);
    tr t = {g, nd, e, err};
    for (int i = 0; i < nd->ninputs; i++) {
        if (nd->inputs[i] < 0) {
            if (i + 1 < nd->ninputs) return unsupported(&t, "an absent optional input before a present one", NULL);
            break;
        }
        if (e->ninputs >= EIN_MAX_INPUTS) return unsupported(&t, "too many inputs", NULL);
        if (inputs) inputs[e->ninputs] = nd->inputs[i];
        e->in_shape[e->ninputs++] = g->values[nd->inputs[i]].shape;
    }
    if (nd->noutputs < 1) return unsupported(&t, "no output", NULL);
    const ts_value *out = &g->values[nd->outputs[0]];
    if (!ts_dtype_is_float(out->dtype)) return unsupported(&t, "a non-float output", NULL);
    e->out_shape = out->shape;
    const char *op = nd->op->name;
    if (!strcmp(op, "Conv")) return conv(&t);
    if (!strcmp(op, "ConvTranspose")) return conv_transpose(&t);
    if (!strcmp(op, "MatMul")) return matmul(&t, NULL);
    if (!strcmp(op, "Gemm")) return matmul(&t, nd->attrs);
    if (!strcmp(op, "Add")) return elementwise(&t, EIN_ADD);
    if (!strcmp(op, "Sub")) return elementwise(&t, EIN_SUB);
    if (!strcmp(op, "Mul")) return elementwise(&t, EIN_MUL);
    if (!strcmp(op, "Div")) return elementwise(&t, EIN_DIV);
    if (!strcmp(op, "Neg")) return elementwise(&t, EIN_NEG);
    if (!strcmp(op, "Relu")) return elementwise(&t, EIN_RELU);
    if (!strcmp(op, "Identity")) return elementwise(&t, EIN_READ);
    if (!strcmp(op, "Transpose")) return transpose(&t);
    if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze"))
        return reshape(&t);
    if (!strcmp(op, "AveragePool")) return avgpool(&t, false);
    if (!strcmp(op, "GlobalAveragePool")) return avgpool(&t, true);
    return unsupported(&t, "no translation for this operator", NULL);
}
