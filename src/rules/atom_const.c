/* enlarge (a Pad of a weight: it exists for the generator and the axioms;
 * in model graphs weights are folded, so it is never matched) and the
 * constant atoms, whose values are written through a number domain so the
 * generator (mod p, double) and the axiom checker (double) share them.
 * Rows in atom.c. */
#include <string.h>
#include "rules/atom.h"

int ts_atom_enlarge_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)op, (void)p;
    const ts_shape *w = ts_rvshape(b->g, x[0]), *ref = ts_rvshape(b->g, x[1]);
    if (w->rank != 4 || ref->rank != 4) return -1;
    /* w's kernel, zero-padded (centred) to ref's kernel size */
    int64_t dh = ref->dims[2] - w->dims[2], dw = ref->dims[3] - w->dims[3];
    if (dh < 0 || dw < 0 || dh % 2 || dw % 2) return -1;
    int64_t pads[8] = {0, 0, dh / 2, dw / 2, 0, 0, dh / 2, dw / 2};
    if (b->g->opset < 11) {
        ts_attr a = ts_attr_ints("pads", pads, 8);
        return ts_rbuild_node1(b, &ts_op_pad, x, 1, &a, 1);
    }
    /* opset 11 moved the pads from an attribute to an input */
    ts_shape ps = {.rank = 1, .dims = {8}};
    ts_tensor *t = ts_tensor_new(TS_I64, &ps, &b->err);
    if (!t) return -1;
    memcpy(t->data, pads, sizeof pads);
    int ins[2] = {x[0], ts_rbuild_const(b, t)};
    return ins[1] < 0 ? -1 : ts_rbuild_node1(b, &ts_op_pad, ins, 2, NULL, 0);
}

/* crop x y r: x without (|r| - |y|)/2 rows and columns on each side,
 * what a valid conv by enlarge(y, r) leaves of its input for y to read
 * (enlarge's sizes: the difference even, r not smaller). */
int ts_atom_crop_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)op, (void)p;
    const ts_shape *xs = ts_rvshape(b->g, x[0]), *y = ts_rvshape(b->g, x[1]), *r = ts_rvshape(b->g, x[2]);
    if (xs->rank != 4 || y->rank != 4 || r->rank != 4) return -1;
    int64_t dh = r->dims[2] - y->dims[2], dw = r->dims[3] - y->dims[3];
    if (dh < 0 || dw < 0 || dh % 2 || dw % 2 || xs->dims[2] <= dh || xs->dims[3] <= dw) return -1;
    int64_t starts[2] = {dh / 2, dw / 2}, ends[2] = {xs->dims[2] - dh / 2, xs->dims[3] - dw / 2}, axes[2] = {2, 3};
    if (b->g->opset < 10) {
        ts_attr a[3] = {ts_attr_ints("starts", starts, 2), ts_attr_ints("ends", ends, 2), ts_attr_ints("axes", axes, 2)};
        return ts_rbuild_node1(b, &ts_op_slice, x, 1, a, 3);
    }
    /* opset 10 moved them to inputs */
    const int64_t *vals[3] = {starts, ends, axes};
    int ins[4] = {x[0]};
    ts_shape s2 = {.rank = 1, .dims = {2}};
    for (int i = 0; i < 3; i++) {
        ts_tensor *t = ts_tensor_new(TS_I64, &s2, &b->err);
        if (!t) return -1;
        memcpy(t->data, vals[i], 2 * sizeof(int64_t));
        if ((ins[i + 1] = ts_rbuild_const(b, t)) < 0) return -1;
    }
    return ts_rbuild_node1(b, &ts_op_slice, ins, 4, NULL, 0);
}

static void fill_zero(const ts_num *num, void *data, int64_t n)
{
    for (int64_t i = 0; i < n; i++) num->zero(ts_num_at(num, data, i));
}

/* C x C x kh x kw: the one value v at tap (ky, kx) of every channel's
 * diagonal kernel, or (all) at every tap. */
static bool kernel_fill(const ts_shape *s, const ts_num *num, void *data, const void *v, bool all)
{
    if (s->rank != 4 || s->dims[0] != s->dims[1]) return false;
    int64_t c = s->dims[0], kh = s->dims[2], kw = s->dims[3];
    fill_zero(num, data, ts_shape_numel(s));
    for (int64_t o = 0; o < c; o++) {
        int64_t base = (o * c + o) * kh * kw;
        for (int64_t t = 0; t < kh * kw; t++)
            if (all || t == (kh / 2) * kw + kw / 2) memcpy(ts_num_at(num, data, base + t), v, num->size);
    }
    return true;
}

/* Average pooling as a convolution: 1/(kh*kw) on the channel diagonal. */
bool ts_atom_cpool_fill(const ts_rparams *p, const ts_shape *s, const ts_num *num, void *data)
{
    (void)p;
    if (s->rank != 4) return false;
    ts_scalar n, inv;
    num->from_i64(&n, s->dims[2] * s->dims[3]);
    return num->inv(&inv, &n) && kernel_fill(s, num, data, &inv, true);
}

/* The identity convolution: 1 at the centre tap of the channel diagonal
 * (odd kernels only: an even one has no centre). */
bool ts_atom_iconv_fill(const ts_rparams *p, const ts_shape *s, const ts_num *num, void *data)
{
    (void)p;
    if (s->rank != 4 || s->dims[2] % 2 == 0 || s->dims[3] % 2 == 0) return false;
    ts_scalar one;
    num->one(&one);
    return kernel_fill(s, num, data, &one, false);
}

bool ts_atom_imatmul_fill(const ts_rparams *p, const ts_shape *s, const ts_num *num, void *data)
{
    (void)p;
    if (s->rank != 2 || s->dims[0] != s->dims[1]) return false;
    fill_zero(num, data, ts_shape_numel(s));
    for (int64_t i = 0; i < s->dims[0]; i++) num->one(ts_num_at(num, data, i * s->dims[0] + i));
    return true;
}

bool ts_atom_iewmul_fill(const ts_rparams *p, const ts_shape *s, const ts_num *num, void *data)
{
    (void)p;
    for (int64_t i = 0; i < ts_shape_numel(s); i++) num->one(ts_num_at(num, data, i));
    return true;
}
