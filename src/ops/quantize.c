/* Linear quantization: QuantizeLinear (y = saturate(round(x / scale) +
 * zero_point), rounding half to even, into uint8 or int8 as zero_point
 * is), DequantizeLinear (y = (x - zero_point) * scale) with a scalar or
 * per-axis (1-D along `axis`) scale and zero point, and
 * DynamicQuantizeLinear (uint8 with the scale and zero point that map
 * [min(x, 0), max(x, 0)] onto [0, 255]). */
#include <math.h>
#include "ops/elementwise.h"

typedef struct quant_attrs {
    int64_t axis;
} quant_attrs;

static ts_status quant_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    return ts_attr_get_int(a, na, "axis", 1, &((quant_attrs *)attrs)->axis, err);
}

static int quant_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_int("axis", ((const quant_attrs *)attrs)->axis);
    return 1;
}

/* Checks scale (input 1) and zero point (input 2): scalars, or 1-D along
 * the axis; *axis receives the normalized axis (-1: per tensor). */
static ts_status check_params(ts_infer_ctx *c, int *axis)
{
    const quant_attrs *p = c->attrs;
    const ts_value *x = c->in[0], *s = c->in[1], *z = c->nin > 2 ? c->in[2] : NULL;
    *axis = -1;
    if (s->shape.rank == 0 || ts_shape_numel(&s->shape) == 1) {
        if (z && ts_shape_numel(&z->shape) != 1) return ts_infer_fail(c, "zero point must be a scalar like the scale");
        return TS_OK;
    }
    if (s->shape.rank != 1 || !ts_axis_norm(p->axis, x->shape.rank, axis) || s->shape.dims[0] != x->shape.dims[*axis])
        return ts_infer_fail(c, "scale must be a scalar or have one value per element of axis %lld", (long long)p->axis);
    if (z && !ts_shape_eq(&z->shape, &s->shape)) return ts_infer_fail(c, "zero point and scale differ in shape");
    return TS_OK;
}

static ts_status q_infer(ts_infer_ctx *c)
{
    int axis;
    const ts_value *z = c->nin > 2 ? c->in[2] : NULL;
    if (!ts_dtype_is_float(c->in[0]->dtype)) return ts_infer_fail(c, "input must be a float tensor");
    if (z && z->dtype != TS_U8 && z->dtype != TS_I8) return ts_infer_fail(c, "zero point must be uint8 or int8");
    if (check_params(c, &axis)) return c->err->code;
    c->out_dtype[0] = z ? z->dtype : TS_U8;
    c->out_shape[0] = c->in[0]->shape;
    return TS_OK;
}

static ts_status dq_infer(ts_infer_ctx *c)
{
    int axis;
    ts_dtype t = c->in[0]->dtype;
    if (t != TS_U8 && t != TS_I8 && t != TS_I32) return ts_infer_fail(c, "input must be uint8, int8 or int32");
    if (c->nin > 2 && c->in[2] && c->in[2]->dtype != t) return ts_infer_fail(c, "zero point's type differs from the input's");
    if (check_params(c, &axis)) return c->err->code;
    c->out_dtype[0] = c->in[1]->dtype;
    c->out_shape[0] = c->in[0]->shape;
    return TS_OK;
}

/* Index into the per-axis parameters of element i of x. */
static int64_t param_index(const ts_tensor *s, int64_t axis_inner, int64_t i)
{
    int64_t n = ts_tensor_numel(s);
    return n == 1 ? 0 : (i / axis_inner) % n;
}

static int64_t inner_of(const quant_attrs *p, const ts_tensor *x, const ts_tensor *s)
{
    int axis;
    if (ts_tensor_numel(s) == 1 || !ts_axis_norm(p->axis, x->shape.rank, &axis)) return 1;
    int64_t inner = 1;
    for (int d = axis + 1; d < x->shape.rank; d++) inner *= x->shape.dims[d];
    return inner;
}

static double saturate(ts_dtype t, double v)
{
    double lo = t == TS_I8 ? -128 : 0, hi = t == TS_I8 ? 127 : 255;
    return v < lo ? lo : v > hi ? hi : v;
}

static ts_status q_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0], *s = k->in[1], *z = k->nin > 2 ? k->in[2] : NULL;
    ts_tensor *y = k->out[0];
    if (need_float_domain(k)) return k->err->code;
    int64_t inner = inner_of(k->attrs, x, s);
    for (int64_t i = 0, n = ts_tensor_numel(x); i < n; i++) {
        int64_t j = param_index(s, inner, i);
        double zp = z ? (double)ts_tensor_get_i64(z, j) : 0;
        double q = el_get(k->num, x, i) / el_get(k->num, s, j);
        if (k->num->storage == TS_F32) q = (float)el_get(k->num, x, i) / (float)el_get(k->num, s, j); /* as ONNX's float32 reference divides */
        double v = nearbyint(q) + zp;
        el_set_i64(y, i, (int64_t)saturate(y->dtype, isnan(v) ? 0 : v));
    }
    return TS_OK;
}

static ts_status dq_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0], *s = k->in[1], *z = k->nin > 2 ? k->in[2] : NULL;
    if (need_float_domain(k)) return k->err->code;
    int64_t inner = inner_of(k->attrs, x, s);
    for (int64_t i = 0, n = ts_tensor_numel(x); i < n; i++) {
        int64_t j = param_index(s, inner, i);
        int64_t zp = z ? ts_tensor_get_i64(z, j) : 0;
        el_set(k->num, k->out[0], i, (double)(ts_tensor_get_i64(x, i) - zp) * el_get(k->num, s, j));
    }
    return TS_OK;
}

#define QUANT(NAME) .name = NAME, .attr_size = sizeof(quant_attrs), .min_inputs = 2, .max_inputs = 3, \
                    .min_outputs = 1, .max_outputs = 1, .parse = quant_parse, .emit = quant_emit, \
                    .flags = TS_OP_NO_FOLD /* Q/DQ pairs stay as written (docs/onnx-models.md) */
const ts_op_desc ts_op_quantize_linear = {.opset_min = 10, QUANT("QuantizeLinear"), .infer = q_infer, .kernel = q_kernel};
const ts_op_desc ts_op_dequantize_linear = {.opset_min = 10, QUANT("DequantizeLinear"), .infer = dq_infer,
                                            .kernel = dq_kernel};

/* ----------------------------------------------- DynamicQuantizeLinear */

static ts_status dyn_infer(ts_infer_ctx *c)
{
    if (c->in[0]->dtype != TS_F32) return ts_infer_fail(c, "input must be float32");
    c->out_dtype[0] = TS_U8;
    c->out_shape[0] = c->in[0]->shape;
    c->out_dtype[1] = TS_F32;
    c->out_shape[1] = ts_shape_make(0, NULL);
    c->out_dtype[2] = TS_U8;
    c->out_shape[2] = ts_shape_make(0, NULL);
    return TS_OK;
}

static ts_status dyn_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0];
    if (need_float_domain(k)) return k->err->code;
    int64_t n = ts_tensor_numel(x);
    double lo = 0, hi = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = el_get(k->num, x, i);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    /* float32 arithmetic throughout, as the operator's definition (and
     * ONNX's reference) computes: a quotient rounded to float32 first can
     * land on the other side of a .5 */
    float scale = ((float)hi - (float)lo) / 255.0f;
    double zp = scale ? saturate(TS_U8, nearbyintf(0.0f - (float)lo / scale)) : 0;
    for (int64_t i = 0; i < n; i++) {
        double v = scale ? nearbyintf((float)el_get(k->num, x, i) / scale) + zp : zp;
        el_set_i64(k->out[0], i, (int64_t)saturate(TS_U8, v));
    }
    el_set(k->num, k->out[1], 0, scale);
    el_set_i64(k->out[2], 0, (int64_t)zp);
    return TS_OK;
}

const ts_op_desc ts_op_dynamic_quantize_linear = {.opset_min = 11, 
    .name = "DynamicQuantizeLinear", .min_inputs = 1, .max_inputs = 1, .min_outputs = 3, .max_outputs = 3,
    .infer = dyn_infer, .kernel = dyn_kernel,
};
