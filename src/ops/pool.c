/* Pooling: MaxPool, AveragePool and their global forms.
 * Geometry comes from window.c.  Padding never enters a max; an average
 * divides by the number of window positions inside the input
 * (count_include_pad = 0) or inside the padded input (= 1; a ceil_mode
 * window hanging past the end padding counts only up to the padded end, as
 * in PyTorch and the ONNX reference).  Averages are polynomial (sum times
 * the inverse of an integer count) and run in every domain; max needs an
 * order: float domains only (int8/uint8 inputs, read as they are, too);
 * MaxPool's optional Indices output says where each max was. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "ops/window.h"
#include "ops/attrs.h"
#include "ops/elementwise.h"

static ts_status pool_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_pool_attrs *p = attrs;
    int64_t cip, so;
    ts_status st;
    (void)opset;
    if ((st = ts_window_parse(&p->win, a, na, true, err)) ||
        (st = ts_attr_get_int(a, na, "count_include_pad", 0, &cip, err)) ||
        (st = ts_attr_get_int(a, na, "storage_order", 0, &so, err)))
        return st;
    if (p->win.nkernel < 0) return ts_error_set(err, TS_ERR_INVALID, "attribute 'kernel_shape' is required");
    if ((cip != 0 && cip != 1) || (so != 0 && so != 1))
        return ts_error_set(err, TS_ERR_INVALID, "attributes 'count_include_pad'/'storage_order': expected 0 or 1");
    p->count_include_pad = (int32_t)cip;
    p->storage_order = (int32_t)so;
    return TS_OK;
}

static int pool_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_pool_attrs *p = attrs;
    int n = ts_window_emit(&p->win, out, max);
    if (n < 0 || n + 2 > max) return -1;
    if (p->count_include_pad) out[n++] = ts_attr_int("count_include_pad", 1);
    if (p->storage_order) out[n++] = ts_attr_int("storage_order", 1);
    return n;
}

static bool pool_geom(const ts_pool_attrs *p, const ts_shape *x, ts_window_geom *g, char *why, size_t n)
{
    char sx[160];
    if (x->rank < 3) {
        snprintf(why, n, "input X must have rank >= 3 (N, C, spatial...), got %s", ts_shape_str(x, sx, sizeof sx));
        return false;
    }
    return ts_window_resolve(&p->win, x->rank - 2, x->dims + 2, NULL, g, why, n);
}

/* MaxPool also takes int8/uint8 (opset 12): a max needs only an order. */
static bool pool_input_ok(ts_infer_ctx *c, bool is_max)
{
    ts_dtype t = c->in[0]->dtype;
    if (is_max && (t == TS_I8 || t == TS_U8)) return true;
    if (!is_max || ts_dtype_is_float(t)) return ts_nn_float_input(c, 0);
    ts_infer_fail(c, "input 0 ('%s') must be float, int8 or uint8, got %s", c->in[0]->name, ts_dtype_name(t));
    return false;
}

static ts_status pool_infer(ts_infer_ctx *c, bool is_max)
{
    ts_window_geom g;
    char why[512];
    if (!pool_input_ok(c, is_max)) return c->err->code;
    if (!pool_geom(c->attrs, &c->in[0]->shape, &g, why, sizeof why)) return ts_infer_fail(c, "%s", why);
    ts_shape *y = &c->out_shape[0];
    *y = c->in[0]->shape;
    for (int i = 0; i < g.nsp; i++) y->dims[2 + i] = g.out[i];
    c->out_dtype[0] = c->in[0]->dtype;
    if (c->nout > 1) { /* MaxPool's Indices: same shape, int64 */
        c->out_shape[1] = *y;
        c->out_dtype[1] = TS_I64;
    }
    return TS_OK;
}

static ts_status maxpool_infer(ts_infer_ctx *c) { return pool_infer(c, true); }
static ts_status avgpool_infer(ts_infer_ctx *c) { return pool_infer(c, false); }

/* One (n, c) plane: per output, the taps inside the input are reduced and
 * an average divides by `valid` (taps inside the input) or `padded` (taps
 * inside the padded extent).  Elements are read at X's element index x0 +
 * offset (el_get: X may be an integer tensor) and written at Y's y0 + p.
 * A max keeps the first largest tap in scan order (a NaN wins) and, when
 * I is given, its index in X counted over the whole tensor: row-major
 * within the plane, or column-major (storage_order 1).  A window wholly in
 * the padding (pads past the kernel) gives the type's lowest value (-inf
 * for floats) and index -1. */
typedef struct pool_walk {
    const ts_num *num;
    bool is_max;
    bool include_pad;
    bool col_major;
    const ts_tensor *X;
    ts_tensor *Y, *I;
} pool_walk;

static void pool_plane(const pool_walk *pw, const ts_window_geom *g, int64_t x0, int64_t y0)
{
    const ts_num *num = pw->num;
    const int nsp = g->nsp;
    int64_t istr[TS_WIN_MAX], icol[TS_WIN_MAX], s = 1, outn = 1;
    for (int d = nsp - 1; d >= 0; d--) {
        istr[d] = s;
        s *= g->in[d];
        outn *= g->out[d];
    }
    s = 1;
    for (int d = 0; d < nsp; d++) {
        icol[d] = s;
        s *= g->in[d];
    }
    int64_t o[TS_WIN_MAX] = {0};
    for (int64_t p = 0; p < outn; p++) {
        /* per dim: valid kernel taps and the padded-extent count */
        int64_t start[TS_WIN_MAX], klo[TS_WIN_MAX], khi[TS_WIN_MAX], valid = 1, padded = 1;
        for (int d = 0; d < nsp; d++) {
            start[d] = o[d] * g->stride[d] - g->pad_begin[d];
            klo[d] = 0;
            khi[d] = 0;
            int64_t pv = 0;
            for (int64_t kk = 0; kk < g->kernel[d]; kk++) {
                int64_t i = start[d] + kk * g->dil[d];
                if (i >= -g->pad_begin[d] && i < g->in[d] + g->pad_end[d]) pv++;
                if (i < 0) klo[d] = kk + 1;
                else if (i < g->in[d]) khi[d] = kk + 1;
            }
            if (khi[d] < klo[d]) khi[d] = klo[d];
            valid *= khi[d] - klo[d];
            padded *= pv;
        }
        double best = -INFINITY;
        int64_t arg = -1;
        ts_scalar sum;
        num->zero(&sum);
        if (valid > 0) {
            int64_t k[TS_WIN_MAX];
            for (int d = 0; d < nsp; d++) k[d] = klo[d];
            for (;;) {
                int64_t off = 0, coff = 0;
                for (int d = 0; d < nsp; d++) {
                    int64_t i = start[d] + k[d] * g->dil[d];
                    off += i * istr[d];
                    coff += i * icol[d];
                }
                if (pw->is_max) {
                    double v = el_get(num, pw->X, x0 + off);
                    if (v > best || (isnan(v) && !isnan(best)) || arg < 0) {
                        best = v;
                        arg = pw->col_major ? coff : off;
                    }
                } else
                    num->add(&sum, &sum, ts_num_cat(num, pw->X->data, x0 + off));
                int d = nsp - 1;
                for (; d >= 0; d--) {
                    if (++k[d] < khi[d]) break;
                    k[d] = klo[d];
                }
                if (d < 0) break;
            }
        }
        if (pw->is_max) {
            if (arg < 0 && !ts_dtype_is_float(pw->Y->dtype)) best = pw->Y->dtype == TS_I8 ? INT8_MIN : 0;
            el_set(num, pw->Y, y0 + p, best);
            if (pw->I) ((int64_t *)pw->I->data)[y0 + p] = arg < 0 ? -1 : x0 + arg;
        } else {
            void *out = ts_num_at(num, pw->Y->data, y0 + p);
            int64_t cnt = pw->include_pad ? padded : valid;
            ts_scalar c, inv;
            num->from_i64(&c, cnt);
            if (num->inv(&inv, &c)) num->mul(out, &sum, &inv);
            else num->zero(out); /* empty window (not reachable with valid geometry) */
        }
        for (int d = nsp - 1; d >= 0; d--) {
            if (++o[d] < g->out[d]) break;
            o[d] = 0;
        }
    }
}

static ts_status pool_run(ts_kernel_ctx *k, bool is_max)
{
    const ts_pool_attrs *a = k->attrs;
    const ts_tensor *X = k->in[0];
    ts_window_geom g;
    char why[512];
    if (!pool_geom(a, &X->shape, &g, why, sizeof why)) return ts_kernel_fail(k, TS_ERR_INVALID, "%s", why);
    int64_t planes = X->shape.dims[0] * X->shape.dims[1], inplane = 1, outplane = 1;
    for (int d = 0; d < g.nsp; d++) {
        inplane *= g.in[d];
        outplane *= g.out[d];
    }
    pool_walk pw = {.num = k->num, .is_max = is_max, .include_pad = a->count_include_pad,
                    .col_major = a->storage_order == 1, .X = X, .Y = k->out[0], .I = k->nout > 1 ? k->out[1] : NULL};
    for (int64_t p = 0; p < planes; p++) pool_plane(&pw, &g, p * inplane, p * outplane);
    return TS_OK;
}

static ts_status maxpool_kernel(ts_kernel_ctx *k) { return pool_run(k, true); }
static ts_status avgpool_kernel(ts_kernel_ctx *k) { return pool_run(k, false); }

static double pool_flops(const ts_node *n, const ts_graph *g)
{
    const ts_pool_attrs *a = n->attrs;
    double k = 1;
    for (int i = 0; i < a->win.nkernel; i++) k *= (double)a->win.kernel[i];
    return (double)ts_shape_numel(&g->values[n->outputs[0]].shape) * k;
}

const ts_op_desc ts_op_maxpool = {.opset_min = 1, 
    .name = "MaxPool", .attr_size = sizeof(ts_pool_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 2, .flags = 0, .parse = pool_parse, .emit = pool_emit, .infer = maxpool_infer,
    .kernel = maxpool_kernel, .flops = pool_flops,
};
const ts_op_desc ts_op_avgpool = {.opset_min = 1, 
    .name = "AveragePool", .attr_size = sizeof(ts_pool_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT, .linear_inputs = 0x1, .parse = pool_parse, .emit = pool_emit,
    .infer = avgpool_infer, .kernel = avgpool_kernel, .flops = pool_flops,
};

/* ------------------------------------------------------------ global pools */

static ts_status global_infer(ts_infer_ctx *c)
{
    char sx[160];
    if (!ts_nn_float_input(c, 0)) return c->err->code;
    const ts_shape *x = &c->in[0]->shape;
    if (x->rank < 3)
        return ts_infer_fail(c, "input X must have rank >= 3 (N, C, spatial...), got %s", ts_shape_str(x, sx, sizeof sx));
    c->out_shape[0] = *x;
    for (int i = 2; i < x->rank; i++) c->out_shape[0].dims[i] = 1;
    c->out_dtype[0] = c->in[0]->dtype;
    return TS_OK;
}

static ts_status global_run(ts_kernel_ctx *k, bool is_max)
{
    const ts_num *num = k->num;
    const ts_tensor *X = k->in[0];
    const size_t es = num->size;
    int64_t planes = X->shape.dims[0] * X->shape.dims[1], inner = 1;
    for (int d = 2; d < X->shape.rank; d++) inner *= X->shape.dims[d];
    ts_scalar one, cnt, inv;
    num->one(&one);
    num->from_i64(&cnt, inner);
    bool has_inv = num->inv(&inv, &cnt);
    for (int64_t p = 0; p < planes; p++) {
        const char *x = (const char *)X->data + (size_t)(p * inner) * es;
        void *y = (char *)k->out[0]->data + (size_t)p * es;
        if (is_max) {
            double best = -INFINITY;
            for (int64_t i = 0; i < inner; i++) {
                double v = num->to_f64(x + (size_t)i * es);
                if (v > best || isnan(v)) best = v;
            }
            num->from_f64(y, best);
        } else {
            ts_scalar sum;
            num->zero(&sum);
            num->dot(inner, x, 1, &one, 0, &sum); /* sum of the plane */
            if (has_inv) num->mul(y, &sum, &inv);
        }
    }
    return TS_OK;
}

static ts_status gmax_kernel(ts_kernel_ctx *k) { return global_run(k, true); }
static ts_status gavg_kernel(ts_kernel_ctx *k) { return global_run(k, false); }

static double global_flops(const ts_node *n, const ts_graph *g)
{
    return (double)ts_shape_numel(&g->values[n->inputs[0]].shape);
}

const ts_op_desc ts_op_global_maxpool = {.opset_min = 1, 
    .name = "GlobalMaxPool", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .flags = 0,
    .infer = global_infer, .kernel = gmax_kernel, .flops = global_flops,
};
const ts_op_desc ts_op_global_avgpool = {.opset_min = 1, 
    .name = "GlobalAveragePool", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_EXACT, .linear_inputs = 0x1, .expr = "L[n,c] Sum[h,w] A[n,c,h,w]", .infer = global_infer,
    .kernel = gavg_kernel, .flops = global_flops,
};
