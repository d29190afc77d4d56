/* ConvTranspose: the adjoint of Conv (N-D, grouped).
 *   Y[n, g*Fg+f, i*s - pb + k*d] += X[n, g*Cg+c, i] * W[g*Cg+c, f, k]   (+ B[f])
 * Output size: output_shape when given (the padding is then derived), else
 *   s*(in-1) + output_padding + (k-1)*d + 1 - pb - pe;  SAME_*: in*s.
 * A derived total padding is split per the ONNX specification: the odd
 * pixel goes to the end for SAME_UPPER, to the beginning otherwise.  An
 * output_shape larger than the natural size (a negative total) extends
 * the output at the end with positions no input reaches (the bias only),
 * as ONNX's reference implementation and its backend test
 * (test_convtranspose_output_shape) do, and ONNX Runtime for up to
 * stride - 1 more (it refuses larger ones).
 * Kernel: per (image, group) a product of rows builds col[(f,k), i], which
 * is scattered into Y row by row (num->axpy with the output stride). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/window.h"
#include "ops/attrs.h"

static ts_status convt_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_convt_attrs *c = attrs;
    int n;
    (void)opset;
    ts_status st = ts_window_parse(&c->win, a, na, false, err);
    if (st || (st = ts_attr_get_int(a, na, "group", 1, &c->group, err))) return st;
    if (c->group < 1) return ts_error_set(err, TS_ERR_INVALID, "attribute 'group': expected >= 1, got %lld", (long long)c->group);
    if ((st = ts_attr_get_ints(a, na, "output_padding", c->out_pad, TS_WIN_MAX, &n, err))) return st;
    c->nout_pad = n;
    for (int i = 0; i < n; i++)
        if (c->out_pad[i] < 0) return ts_error_set(err, TS_ERR_INVALID, "attribute 'output_padding': negative value");
    if ((st = ts_attr_get_ints(a, na, "output_shape", c->out_shape, TS_WIN_MAX + 2, &n, err))) return st;
    c->nout_shape = n;
    for (int i = 0; i < n; i++)
        if (c->out_shape[i] < 1) return ts_error_set(err, TS_ERR_INVALID, "attribute 'output_shape': values must be >= 1");
    return TS_OK;
}

static int convt_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_convt_attrs *c = attrs;
    int n = ts_window_emit(&c->win, out, max);
    if (n < 0 || n + 3 > max) return -1;
    if (c->group != 1) out[n++] = ts_attr_int("group", c->group);
    if (c->nout_pad >= 0) out[n++] = ts_attr_ints("output_padding", c->out_pad, c->nout_pad);
    if (c->nout_shape >= 0) out[n++] = ts_attr_ints("output_shape", c->out_shape, c->nout_shape);
    return n;
}

bool ts_convt_geom(const ts_convt_attrs *a, const ts_shape *x, const ts_shape *w, const ts_shape *b,
                         ts_window_geom *g, char *why, size_t n)
{
    char sx[160], sw[160];
    if (x->rank < 3) {
        snprintf(why, n, "input X must have rank >= 3 (N, C, spatial...), got %s", ts_shape_str(x, sx, sizeof sx));
        return false;
    }
    if (w->rank != x->rank) {
        snprintf(why, n, "weight W must have rank %d like X (%s), got %s", x->rank, ts_shape_str(x, sx, sizeof sx),
                 ts_shape_str(w, sw, sizeof sw));
        return false;
    }
    int nsp = x->rank - 2;
    int64_t C = x->dims[1], F = w->dims[1] * a->group;
    if (C % a->group) {
        snprintf(why, n, "group %lld does not divide the %lld input channels", (long long)a->group, (long long)C);
        return false;
    }
    if (w->dims[0] != C) {
        snprintf(why, n, "X has %lld channels but W (%s) has %lld in dim 0 (expected the input channel count)",
                 (long long)C, ts_shape_str(w, sw, sizeof sw), (long long)w->dims[0]);
        return false;
    }
    if (b && (b->rank != 1 || b->dims[0] != F)) {
        snprintf(why, n, "bias B must have shape %lld (one per output channel), got %s", (long long)F,
                 ts_shape_str(b, sx, sizeof sx));
        return false;
    }
    if (a->nout_pad >= 0 && a->nout_pad != nsp) {
        snprintf(why, n, "output_padding has %d values, expected %d", a->nout_pad, nsp);
        return false;
    }
    int shape_off = a->nout_shape == nsp + 2 ? 2 : 0; /* some exporters include N and C */
    if (a->nout_shape >= 0 && a->nout_shape != nsp && a->nout_shape != nsp + 2) {
        snprintf(why, n, "output_shape has %d values, expected %d", a->nout_shape, nsp);
        return false;
    }
    if (!ts_window_check(&a->win, nsp, w->dims + 2, why, n)) return false;
    memset(g, 0, sizeof *g);
    g->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        int64_t in = x->dims[2 + i], k = w->dims[2 + i];
        int64_t s = a->win.nstrides >= 0 ? a->win.strides[i] : 1, d = a->win.ndilations >= 0 ? a->win.dilations[i] : 1;
        int64_t op = a->nout_pad >= 0 ? a->out_pad[i] : 0, span = (k - 1) * d + 1;
        g->in[i] = in;
        g->kernel[i] = k;
        g->stride[i] = s;
        g->dil[i] = d;
        if (op >= s && op >= d) {
            snprintf(why, n, "output_padding[%d] = %lld must be smaller than the stride or the dilation", i, (long long)op);
            return false;
        }
        bool same = a->win.auto_pad == TS_PAD_SAME_UPPER || a->win.auto_pad == TS_PAD_SAME_LOWER;
        if (a->nout_shape >= 0 || same) {
            int64_t out = a->nout_shape >= 0 ? a->out_shape[shape_off + i] : in * s;
            int64_t total = s * (in - 1) + op + span - out;
            g->out[i] = out;
            g->pad_begin[i] = total < 0 ? 0 : a->win.auto_pad == TS_PAD_SAME_UPPER ? total / 2 : total - total / 2;
            g->pad_end[i] = total - g->pad_begin[i];
            continue;
        }
        if (a->win.auto_pad == TS_PAD_NOTSET && a->win.npads >= 0) {
            g->pad_begin[i] = a->win.pads[i];
            g->pad_end[i] = a->win.pads[nsp + i];
        }
        g->out[i] = s * (in - 1) + op + span - g->pad_begin[i] - g->pad_end[i];
        if (g->out[i] < 1) {
            snprintf(why, n, "pads %lld+%lld leave no output along spatial dimension %d", (long long)g->pad_begin[i],
                     (long long)g->pad_end[i], i);
            return false;
        }
    }
    return true;
}

static ts_status convt_infer(ts_infer_ctx *c)
{
    const ts_convt_attrs *a = c->attrs;
    ts_window_geom g;
    char why[512];
    if (!ts_nn_conv_operands(c)) return c->err->code;
    const ts_shape *b = c->nin > 2 && c->in[2] ? &c->in[2]->shape : NULL;
    if (!ts_convt_geom(a, &c->in[0]->shape, &c->in[1]->shape, b, &g, why, sizeof why)) return ts_infer_fail(c, "%s", why);
    ts_shape *y = &c->out_shape[0];
    y->rank = c->in[0]->shape.rank;
    y->dims[0] = c->in[0]->shape.dims[0];
    y->dims[1] = c->in[1]->shape.dims[1] * a->group;
    for (int i = 0; i < g.nsp; i++) y->dims[2 + i] = g.out[i];
    c->out_dtype[0] = c->in[0]->dtype;
    return TS_OK;
}

#define COL_LIMIT ((int64_t)1 << 22)

/* Adds col (rows j = f*K + kernel offset, columns = input positions of the
 * band of input rows [r0, r1)) into the group's output channels y. */
static void col2im(const ts_num *num, const char *col, int64_t fg, const ts_window_geom *g, int64_t r0, int64_t r1,
                   char *y)
{
    const int nsp = g->nsp, last = nsp - 1;
    const size_t es = num->size;
    int64_t K = 1, outplane = 1, ostr[TS_WIN_MAX];
    for (int d = nsp - 1; d >= 0; d--) {
        ostr[d] = outplane;
        outplane *= g->out[d];
        K *= g->kernel[d];
    }
    const int64_t IW = g->in[last], P = (r1 - r0) * IW, s = g->stride[last];
    ts_scalar one;
    num->one(&one);
    for (int64_t f = 0; f < fg; f++) {
        int64_t k[TS_WIN_MAX] = {0};
        for (int64_t kk = 0; kk < K; kk++) {
            const char *src = col + (size_t)((f * K + kk) * P) * es;
            int64_t off = k[last] * g->dil[last] - g->pad_begin[last];
            /* valid iw: 0 <= iw*s + off < out */
            int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
            int64_t hi = g->out[last] - 1 - off < 0 ? 0 : (g->out[last] - 1 - off) / s + 1;
            if (hi > IW) hi = IW;
            for (int64_t r = r0; r < r1 && lo < hi; r++) {
                int64_t rem = r, base = 0;
                bool ok = true;
                for (int d = last - 1; d >= 0; d--) {
                    int64_t i = rem % g->in[d];
                    rem /= g->in[d];
                    int64_t o = i * g->stride[d] - g->pad_begin[d] + k[d] * g->dil[d];
                    if (o < 0 || o >= g->out[d]) {
                        ok = false;
                        break;
                    }
                    base += o * ostr[d];
                }
                if (!ok) continue;
                num->axpy(hi - lo, &one, src + (size_t)((r - r0) * IW + lo) * es, 1,
                          y + (size_t)(f * outplane + base + lo * s + off) * es, s);
            }
            for (int d = last; d >= 0; d--) {
                if (++k[d] < g->kernel[d]) break;
                k[d] = 0;
            }
        }
    }
}

static ts_status convt_kernel(ts_kernel_ctx *k)
{
    const ts_convt_attrs *a = k->attrs;
    const ts_num *num = k->num;
    const ts_tensor *X = k->in[0], *W = k->in[1], *B = k->nin > 2 ? k->in[2] : NULL;
    ts_tensor *Y = k->out[0];
    ts_window_geom g;
    char why[512];
    if (!ts_convt_geom(a, &X->shape, &W->shape, B ? &B->shape : NULL, &g, why, sizeof why))
        return ts_kernel_fail(k, TS_ERR_INVALID, "%s", why);
    const size_t es = num->size;
    const int64_t N = X->shape.dims[0], C = X->shape.dims[1], G = a->group, Cg = C / G, Fg = W->shape.dims[1];
    const int64_t F = Fg * G, K = ts_window_kernel_size(&g), Kf = Fg * K;
    int64_t inplane = 1, outplane = 1, rows = 1;
    for (int d = 0; d < g.nsp; d++) {
        inplane *= g.in[d];
        outplane *= g.out[d];
        if (d < g.nsp - 1) rows *= g.in[d];
    }
    const int64_t IW = g.in[g.nsp - 1];
    int64_t band = COL_LIMIT / (Kf * IW > 0 ? Kf * IW : 1);
    if (band < 1) band = 1;
    if (band > rows) band = rows;
    char *col = Kf * IW > 0 ? malloc((size_t)(Kf * band * IW) * es) : NULL;
    if (Kf * IW > 0 && !col)
        return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory for a %lld x %lld column buffer", (long long)Kf,
                              (long long)(band * IW));
    const char *x = X->data, *w = W->data;
    char *y = Y->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < G; gi++)
            for (int64_t r0 = 0; r0 < rows; r0 += band) {
                int64_t r1 = r0 + band < rows ? r0 + band : rows, P = (r1 - r0) * IW;
                memset(col, 0, (size_t)(Kf * P) * es); /* zero is all-bits-zero in every domain */
                for (int64_t c = 0; c < Cg; c++) {
                    const char *xc = x + (size_t)((n * C + gi * Cg + c) * inplane + r0 * IW) * es;
                    const char *wc = w + (size_t)((gi * Cg + c) * Kf) * es;
                    for (int64_t j = 0; j < Kf; j++)
                        num->axpy(P, wc + (size_t)j * es, xc, 1, col + (size_t)(j * P) * es, 1);
                }
                col2im(num, col, Fg, &g, r0, r1, y + (size_t)((n * F + gi * Fg) * outplane) * es);
            }
    free(col);
    if (B) ts_nn_add_bias(num, B, N, F, outplane, es, y);
    return TS_OK;
}

static double convt_flops(const ts_node *n, const ts_graph *g)
{
    const ts_shape *w = &g->values[n->inputs[1]].shape, *x = &g->values[n->inputs[0]].shape;
    double per_in = (double)ts_shape_numel(w) / (double)w->dims[0]; /* Fg * kernel */
    return 2.0 * (double)ts_shape_numel(x) * per_in;
}

const ts_op_desc ts_op_conv_transpose = {.opset_min = 1, 
    .name = "ConvTranspose", .attr_size = sizeof(ts_convt_attrs), .min_inputs = 2, .max_inputs = 3, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_CONTRACTION, .linear_inputs = 0x7, /* degree 1 in X, W and B (docs/pet.md) */
    .expr = "L[n,f,h,w] Sum[c,r,s] A[n,c,h-r,w-s]*B[c,f,r,s]",
    .parse = convt_parse, .emit = convt_emit, .infer = convt_infer, .kernel = convt_kernel, .flops = convt_flops,
};
