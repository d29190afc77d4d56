/* Integer convolutions of quantized models: ConvInteger (int32 sums of
 * (x - x_zero_point) * (w - w_zero_point)) and QLinearConv (those sums
 * scaled by x_scale * w_scale[m] / y_scale, rounded half to even, plus the
 * int32 bias and y_zero_point, saturated to uint8/int8).  Window
 * attributes as Conv's (ts_window), with groups.  A direct reference loop. */
#include <math.h>
#include <stdlib.h>
#include "ops/attrs.h"
#include "ops/elementwise.h"

static ts_status convi_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_conv_attrs *p = attrs;
    (void)opset;
    if (ts_window_parse(&p->win, a, na, false, err) || ts_attr_get_int(a, na, "group", 1, &p->group, err))
        return err->code;
    if (p->group < 1) return ts_attr_fail(err, ts_attr_find(a, na, "group"), "must be at least 1");
    return TS_OK;
}

static int convi_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_conv_attrs *p = attrs;
    int n = ts_window_emit(&p->win, out, max - 1);
    if (n < 0) return 0;
    out[n++] = ts_attr_int("group", p->group);
    return n;
}

static bool is_8bit(ts_dtype t) { return t == TS_U8 || t == TS_I8; }

/* Output shape of x * w; fills g.  xi, wi: the inputs' slots. */
static ts_status conv_shape(ts_infer_ctx *c, int xi, int wi, ts_window_geom *g)
{
    const ts_conv_attrs *p = c->attrs;
    const ts_value *x = c->in[xi], *w = c->in[wi];
    char why[200];
    int nsp = x->shape.rank - 2;
    if (nsp < 1 || w->shape.rank != x->shape.rank) return ts_infer_fail(c, "X and W must have one rank, at least 3");
    if (x->shape.dims[1] != w->shape.dims[1] * p->group || w->shape.dims[0] % p->group)
        return ts_infer_fail(c, "channels of X (%lld), W (%lld) and group %lld do not fit", (long long)x->shape.dims[1],
                             (long long)w->shape.dims[1], (long long)p->group);
    if (!ts_window_check(&p->win, nsp, w->shape.dims + 2, why, sizeof why) ||
        !ts_window_resolve(&p->win, nsp, x->shape.dims + 2, w->shape.dims + 2, g, why, sizeof why))
        return ts_infer_fail(c, "%s", why);
    ts_shape o = {.rank = x->shape.rank};
    o.dims[0] = x->shape.dims[0];
    o.dims[1] = w->shape.dims[0];
    for (int d = 0; d < nsp; d++) o.dims[2 + d] = g->out[d];
    c->out_shape[0] = o;
    return TS_OK;
}

static int64_t zp_at(const ts_tensor *z, int64_t i)
{
    return z ? ts_tensor_get_i64(z, ts_tensor_numel(z) == 1 ? 0 : i) : 0;
}

/* acc[n, m, out...] over groups; x zero point per tensor, w per tensor or per output channel. */
static void conv_acc(const ts_conv_attrs *p, const ts_tensor *x, const ts_tensor *xz, const ts_tensor *w,
                     const ts_tensor *wz, const ts_shape *ys, int64_t *acc)
{
    int nsp = x->shape.rank - 2;
    ts_window_geom g;
    char why[200];
    ts_window_resolve(&p->win, nsp, x->shape.dims + 2, w->shape.dims + 2, &g, why, sizeof why);
    int64_t N = x->shape.dims[0], C = x->shape.dims[1], M = w->shape.dims[0], cg = C / p->group, mg = M / p->group;
    int64_t osz = 1, isz = 1, ksz = 1;
    for (int d = 0; d < nsp; d++) osz *= ys->dims[2 + d], isz *= g.in[d], ksz *= g.kernel[d];
    int64_t xzp = zp_at(xz, 0);
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            int64_t grp = m / mg, wzp = zp_at(wz, m);
            for (int64_t o = 0; o < osz; o++) {
                int64_t opos[TS_WIN_MAX], rem = o, s = 0;
                for (int d = nsp - 1; d >= 0; d--) opos[d] = rem % g.out[d], rem /= g.out[d];
                for (int64_t cc = 0; cc < cg; cc++)
                    for (int64_t kk = 0; kk < ksz; kk++) {
                        int64_t kr = kk, xoff = 0;
                        bool inside = true;
                        for (int d = nsp - 1; d >= 0; d--) {
                            int64_t kd = kr % g.kernel[d];
                            kr /= g.kernel[d];
                            int64_t pos = opos[d] * g.stride[d] - g.pad_begin[d] + kd * g.dil[d];
                            if (pos < 0 || pos >= g.in[d]) inside = false;
                            int64_t mul = 1;
                            for (int e = d + 1; e < nsp; e++) mul *= g.in[e];
                            xoff += pos * mul;
                        }
                        if (!inside) continue; /* padding holds the zero point: contributes 0 */
                        int64_t xv = ts_tensor_get_i64(x, (n * C + grp * cg + cc) * isz + xoff) - xzp;
                        int64_t wv = ts_tensor_get_i64(w, (m * cg + cc) * ksz + kk) - wzp;
                        s += xv * wv;
                    }
                acc[(n * M + m) * osz + o] = s;
            }
        }
}

static ts_status convi_infer(ts_infer_ctx *c)
{
    ts_window_geom g;
    if (!is_8bit(c->in[0]->dtype) || !is_8bit(c->in[1]->dtype)) return ts_infer_fail(c, "X and W must be uint8 or int8");
    if (conv_shape(c, 0, 1, &g)) return c->err->code;
    c->out_dtype[0] = TS_I32;
    return TS_OK;
}

static ts_status convi_kernel(ts_kernel_ctx *k)
{
    ts_tensor *y = k->out[0];
    int64_t n = ts_tensor_numel(y), *acc = malloc(sizeof *acc * (size_t)(n + 1));
    if (!acc) return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    conv_acc(k->attrs, k->in[0], k->nin > 2 ? k->in[2] : NULL, k->in[1], k->nin > 3 ? k->in[3] : NULL, &y->shape, acc);
    for (int64_t i = 0; i < n; i++) ((int32_t *)y->data)[i] = (int32_t)acc[i];
    free(acc);
    return TS_OK;
}

/* 2 * output elements * (C/group * kernel), as a float Conv: the roofline's
 * FLOPs, one multiply-add of 8-bit products counted as two */
static double convi_flops_w(const ts_node *n, const ts_graph *g, int wi)
{
    const ts_shape *w = &g->values[n->inputs[wi]].shape, *y = &g->values[n->outputs[0]].shape;
    return w->dims[0] ? 2.0 * (double)ts_shape_numel(y) * ((double)ts_shape_numel(w) / (double)w->dims[0]) : 0;
}
static double convi_flops(const ts_node *n, const ts_graph *g) { return convi_flops_w(n, g, 1); }
static double qconv_flops(const ts_node *n, const ts_graph *g) { return convi_flops_w(n, g, 3); }

#define CONVI(NAME) .name = NAME, .attr_size = sizeof(ts_conv_attrs), .min_outputs = 1, .max_outputs = 1, \
                    .parse = convi_parse, .emit = convi_emit
const ts_op_desc ts_op_conv_integer = {.opset_min = 10, CONVI("ConvInteger"), .min_inputs = 2, .max_inputs = 4,
                                       .flags = TS_OP_EXACT, .infer = convi_infer, .kernel = convi_kernel,
                                       .flops = convi_flops};

/* --------------------------------------------------------- QLinearConv */

/* inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B (int32, optional) */
static ts_status qconv_infer(ts_infer_ctx *c)
{
    ts_window_geom g;
    const ts_value *yz = c->in[7];
    if (!is_8bit(c->in[0]->dtype) || !is_8bit(c->in[3]->dtype) || !is_8bit(yz->dtype))
        return ts_infer_fail(c, "x, w and y_zero_point must be uint8 or int8");
    if (!ts_dtype_is_float(c->in[1]->dtype) || !ts_dtype_is_float(c->in[4]->dtype) || !ts_dtype_is_float(c->in[6]->dtype))
        return ts_infer_fail(c, "scales must be float");
    if (c->nin > 8 && c->in[8] && c->in[8]->dtype != TS_I32) return ts_infer_fail(c, "B must be int32");
    if (conv_shape(c, 0, 3, &g)) return c->err->code;
    int64_t M = c->in[3]->shape.dims[0], nws = ts_shape_numel(&c->in[4]->shape);
    if (nws != 1 && nws != M) return ts_infer_fail(c, "w_scale must be a scalar or have one value per output channel");
    c->out_dtype[0] = yz->dtype;
    return TS_OK;
}

static ts_status qconv_kernel(ts_kernel_ctx *k)
{
    ts_tensor *y = k->out[0];
    if (need_float_domain(k)) return k->err->code;
    int64_t n = ts_tensor_numel(y), *acc = malloc(sizeof *acc * (size_t)(n + 1));
    if (!acc) return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    conv_acc(k->attrs, k->in[0], k->in[2], k->in[3], k->in[5], &y->shape, acc);
    int64_t M = y->shape.dims[1], osz = M ? n / (y->shape.dims[0] * M) : 0;
    const ts_tensor *ws = k->in[4], *b = k->nin > 8 ? k->in[8] : NULL;
    double xs = el_get(k->num, k->in[1], 0), ys = el_get(k->num, k->in[6], 0), yz = (double)ts_tensor_get_i64(k->in[7], 0);
    double lo = y->dtype == TS_I8 ? -128 : 0, hi = y->dtype == TS_I8 ? 127 : 255;
    for (int64_t i = 0; i < n; i++) {
        int64_t m = osz ? (i / osz) % M : 0;
        float scale = (float)xs * (float)el_get(k->num, ws, ts_tensor_numel(ws) == 1 ? 0 : m) / (float)ys;
        double v = nearbyint((double)(acc[i] + (b ? ts_tensor_get_i64(b, m) : 0)) * (double)scale) + yz;
        el_set_i64(y, i, (int64_t)(v < lo ? lo : v > hi ? hi : v));
    }
    free(acc);
    return TS_OK;
}

const ts_op_desc ts_op_qlinear_conv = {.opset_min = 10, CONVI("QLinearConv"), .min_inputs = 8, .max_inputs = 9,
                                       .infer = qconv_infer, .kernel = qconv_kernel, .flops = qconv_flops};
