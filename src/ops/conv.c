/* Conv: N-D grouped convolution (ONNX opsets 1 and 11: same semantics).
 *   Y[n, g*Fg+f, o] = B[f] + sum_{c<Cg, k} W[g*Fg+f, c, k] * X[n, g*Cg+c, o*s - pb + k*d]
 * The reference kernel lowers each (image, group) to im2col + a product of
 * rows (num->axpy over whole output planes), so it is polynomial and runs
 * in every number domain, and fast enough for real models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/window.h"
#include "ops/attrs.h"

static ts_status conv_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_conv_attrs *c = attrs;
    (void)opset;
    ts_status st = ts_window_parse(&c->win, a, na, false, err);
    if (st || (st = ts_attr_get_int(a, na, "group", 1, &c->group, err))) return st;
    if (c->group < 1) return ts_error_set(err, TS_ERR_INVALID, "attribute 'group': expected >= 1, got %lld", (long long)c->group);
    return TS_OK;
}

static int conv_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_conv_attrs *c = attrs;
    int n = ts_window_emit(&c->win, out, max);
    if (n < 0 || c->group == 1) return n;
    if (n >= max) return -1;
    out[n++] = ts_attr_int("group", c->group);
    return n;
}

/* Checks X, W, B and resolves the geometry (also used by the kernel). */
static ts_status conv_shapes(const ts_conv_attrs *a, const ts_shape *x, const ts_shape *w, const ts_shape *b,
                             ts_window_geom *g, char *why, size_t n)
{
    char sx[160], sw[160];
    if (x->rank < 3) {
        snprintf(why, n, "input X must have rank >= 3 (N, C, spatial...), got %s", ts_shape_str(x, sx, sizeof sx));
        return TS_ERR_INVALID;
    }
    if (w->rank != x->rank) {
        snprintf(why, n, "weight W must have rank %d like X (%s), got %s", x->rank, ts_shape_str(x, sx, sizeof sx),
                 ts_shape_str(w, sw, sizeof sw));
        return TS_ERR_INVALID;
    }
    int64_t C = x->dims[1], F = w->dims[0];
    if (C % a->group) {
        snprintf(why, n, "group %lld does not divide the %lld input channels", (long long)a->group, (long long)C);
        return TS_ERR_INVALID;
    }
    if (F % a->group) {
        snprintf(why, n, "group %lld does not divide the %lld output channels (W dim 0)", (long long)a->group,
                 (long long)F);
        return TS_ERR_INVALID;
    }
    if (w->dims[1] * a->group != C) {
        snprintf(why, n, "X has %lld channels but W (%s) expects %lld (W dim 1 = %lld times group %lld)", (long long)C,
                 ts_shape_str(w, sw, sizeof sw), (long long)(w->dims[1] * a->group), (long long)w->dims[1],
                 (long long)a->group);
        return TS_ERR_INVALID;
    }
    if (b && (b->rank != 1 || b->dims[0] != F)) {
        snprintf(why, n, "bias B must have shape %lld (one per output channel), got %s", (long long)F,
                 ts_shape_str(b, sx, sizeof sx));
        return TS_ERR_INVALID;
    }
    if (!ts_window_resolve(&a->win, x->rank - 2, x->dims + 2, w->dims + 2, g, why, n)) return TS_ERR_INVALID;
    return TS_OK;
}

static ts_status conv_infer(ts_infer_ctx *c)
{
    const ts_conv_attrs *a = c->attrs;
    ts_window_geom g;
    char why[512];
    if (!ts_nn_conv_operands(c)) return c->err->code;
    const ts_shape *b = c->nin > 2 && c->in[2] ? &c->in[2]->shape : NULL;
    if (conv_shapes(a, &c->in[0]->shape, &c->in[1]->shape, b, &g, why, sizeof why)) return ts_infer_fail(c, "%s", why);
    ts_shape *y = &c->out_shape[0];
    y->rank = c->in[0]->shape.rank;
    y->dims[0] = c->in[0]->shape.dims[0];
    y->dims[1] = c->in[1]->shape.dims[0];
    for (int i = 0; i < g.nsp; i++) y->dims[2 + i] = g.out[i];
    c->out_dtype[0] = c->in[0]->dtype;
    return TS_OK;
}

/* Column buffer limit (elements): im2col is built for a band of output rows. */
#define COL_LIMIT ((int64_t)1 << 22)

/* Fills col[j, p] (j = c*K + kernel offset, p = output position within the
 * band of output rows [r0, r1)) from one group's channels x. Rows are the
 * output positions with the last spatial coordinate free. */
static void im2col(const ts_num *num, const char *x, int64_t cg, const ts_window_geom *g, int64_t r0, int64_t r1,
                   char *col)
{
    const int nsp = g->nsp, last = nsp - 1;
    const size_t es = num->size;
    int64_t K = 1, inplane = 1, instr[TS_WIN_MAX];
    for (int d = nsp - 1; d >= 0; d--) {
        instr[d] = inplane;
        inplane *= g->in[d];
        K *= g->kernel[d];
    }
    const int64_t OW = g->out[last], P = (r1 - r0) * OW, s = g->stride[last];
    memset(col, 0, (size_t)(cg * K * P) * es); /* zero is all-bits-zero in every domain */
    for (int64_t c = 0; c < cg; c++) {
        int64_t k[TS_WIN_MAX] = {0};
        for (int64_t kk = 0; kk < K; kk++) {
            char *dst = col + (size_t)((c * K + kk) * P) * es;
            int64_t off = k[last] * g->dil[last] - g->pad_begin[last];
            /* valid ow: 0 <= ow*s + off < in */
            int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
            int64_t hi = g->in[last] - 1 - off < 0 ? 0 : (g->in[last] - 1 - off) / s + 1;
            if (hi > OW) hi = OW;
            for (int64_t r = r0; r < r1 && lo < hi; r++) {
                int64_t rem = r, base = 0;
                bool ok = true;
                for (int d = last - 1; d >= 0; d--) {
                    int64_t o = rem % g->out[d];
                    rem /= g->out[d];
                    int64_t i = o * g->stride[d] - g->pad_begin[d] + k[d] * g->dil[d];
                    if (i < 0 || i >= g->in[d]) {
                        ok = false;
                        break;
                    }
                    base += i * instr[d];
                }
                if (!ok) continue;
                ts_nn_copy_strided(es, hi - lo, x + (size_t)(c * inplane + base + lo * s + off) * es, s,
                                   dst + (size_t)((r - r0) * OW + lo) * es);
            }
            for (int d = last; d >= 0; d--) { /* next kernel offset */
                if (++k[d] < g->kernel[d]) break;
                k[d] = 0;
            }
        }
    }
}

static bool is_pointwise(const ts_window_geom *g)
{
    for (int d = 0; d < g->nsp; d++)
        if (g->kernel[d] != 1 || g->stride[d] != 1 || g->pad_begin[d] || g->pad_end[d]) return false;
    return true;
}

static ts_status conv_kernel(ts_kernel_ctx *k)
{
    const ts_conv_attrs *a = k->attrs;
    const ts_num *num = k->num;
    const ts_tensor *X = k->in[0], *W = k->in[1], *B = k->nin > 2 ? k->in[2] : NULL;
    ts_tensor *Y = k->out[0];
    ts_window_geom g;
    char why[512];
    if (conv_shapes(a, &X->shape, &W->shape, B ? &B->shape : NULL, &g, why, sizeof why))
        return ts_kernel_fail(k, TS_ERR_INVALID, "%s", why);
    const size_t es = num->size;
    const int64_t N = X->shape.dims[0], C = X->shape.dims[1], F = W->shape.dims[0], G = a->group;
    const int64_t Cg = C / G, Fg = F / G, K = ts_window_kernel_size(&g), Kc = Cg * K;
    int64_t inplane = 1, outplane = 1, rows = 1;
    for (int d = 0; d < g.nsp; d++) {
        inplane *= g.in[d];
        outplane *= g.out[d];
        if (d < g.nsp - 1) rows *= g.out[d];
    }
    const int64_t OW = g.out[g.nsp - 1];
    const bool pw = is_pointwise(&g); /* 1x1, stride 1, no padding: X itself is the column matrix */
    int64_t band = pw ? rows : COL_LIMIT / (Kc * OW > 0 ? Kc * OW : 1);
    if (band < 1) band = 1;
    if (band > rows) band = rows;
    char *col = NULL;
    if (!pw && outplane > 0 && Kc > 0) {
        col = malloc((size_t)(Kc * band * OW) * es);
        if (!col) return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory for a %lld x %lld column buffer",
                                        (long long)Kc, (long long)(band * OW));
    }
    const char *x = X->data, *w = W->data;
    char *y = Y->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < G; gi++) {
            const char *xg = x + (size_t)((n * C + gi * Cg) * inplane) * es;
            for (int64_t r0 = 0; r0 < rows; r0 += band) {
                int64_t r1 = r0 + band < rows ? r0 + band : rows, P = (r1 - r0) * OW;
                if (!pw) im2col(num, xg, Cg, &g, r0, r1, col);
                for (int64_t f = 0; f < Fg; f++) {
                    int64_t fo = gi * Fg + f;
                    char *yf = y + (size_t)((n * F + fo) * outplane + r0 * OW) * es;
                    const char *wf = w + (size_t)(fo * Kc) * es;
                    for (int64_t j = 0; j < Kc; j++) {
                        const char *row = pw ? xg + (size_t)(j * inplane + r0 * OW) * es : col + (size_t)(j * P) * es;
                        num->axpy(P, wf + (size_t)j * es, row, 1, yf, 1);
                    }
                }
            }
        }
    free(col);
    if (B) ts_nn_add_bias(num, B, N, F, outplane, es, y);
    return TS_OK;
}

static double conv_flops(const ts_node *n, const ts_graph *g)
{
    const ts_shape *w = &g->values[n->inputs[1]].shape, *y = &g->values[n->outputs[0]].shape;
    double k = (double)ts_shape_numel(w) / (double)w->dims[0]; /* Cg * kernel */
    return 2.0 * (double)ts_shape_numel(y) * k;
}

const ts_op_desc ts_op_conv = {.opset_min = 1, 
    .name = "Conv", .attr_size = sizeof(ts_conv_attrs), .min_inputs = 2, .max_inputs = 3, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_CONTRACTION, .linear_inputs = 0x7, /* degree 1 in X, W and B (docs/pet.md) */
    .expr = "L[n,f,h,w] Sum[c,r,s] A[n,c,h+r,w+s]*B[f,c,r,s]",
    .parse = conv_parse, .emit = conv_emit, .infer = conv_infer, .kernel = conv_kernel, .flops = conv_flops,
};
