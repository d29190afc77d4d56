/* Element-wise operators on 8-bit quantized tensors that ONNX spells only
 * as DequantizeLinear -> float op -> QuantizeLinear; tsopt-internal (the
 * dot in the name: never read from or written to a file), made by
 * opt/fuse_qdq.c so a QDQ model's residual adds and activations run on its
 * 8-bit tensors (vec/vec_qlinear.c).
 *
 * tsopt.QLinearAdd(a, a_scale, a_zero_point, b, b_scale, b_zero_point,
 *                  y_scale, y_zero_point)                  (ORT's QLinearAdd)
 *   y = Q(DQ(a) + DQ(b)), a and b of one shape, per-tensor parameters, in
 *   the float32 arithmetic of the three nodes it replaces: each operand
 *   (q - z) * s rounded to float32, their float32 sum, divided by y_scale in
 *   float32, rounded half to even, plus y's zero point, saturated.  The
 *   result is the QDQ graph's, bit for bit.
 * tsopt.QLinearChannelMul(x, x_scale, x_zero_point, s, y_scale, y_zero_point)
 *   y = Q(DQ(x) * s), x [N, C, H, W] 8-bit, s float32 [N or 1, C, 1, 1]
 *   (a squeeze-excite gate), with the float32 roundings of the three nodes
 *   it replaces: bit for bit theirs.
 * tsopt.QLinearGlobalAveragePool(x, x_scale, x_zero_point, y_scale, y_zero_point)
 *   y = Q(GlobalAveragePool(DQ(x))) over x [N, C, H, W]: the sum of
 *   (x - x_zero_point) exact in integers, times x_scale / (H W) in double
 *   precision, rounded to float32, then Q.  The QDQ graph sums float32
 *   values in some order: the two differ only where the mean lies within
 *   float32 rounding of a .5 boundary, by one step (ORT's
 *   QLinearGlobalAveragePool sums in integers too).
 * tsopt.QLinearLookup(x, table)
 *   y = table[x] (x uint8; int8 x reads table[x + 128]): any element-wise
 *   f between a DQ and a Q with per-tensor parameters takes one of 256
 *   values per input value, tabulated once by the pass.  The table's type
 *   is y's. */
#include <math.h>
#include "ops/elementwise.h"
#include "ops/qlinear_eltwise.h"

static bool is_8bit(ts_dtype t) { return t == TS_U8 || t == TS_I8; }

static bool scalar(const ts_value *v) { return ts_shape_numel(&v->shape) == 1; }

static ts_status qadd_infer(ts_infer_ctx *c)
{
    const ts_value *a = c->in[0], *b = c->in[3], *yz = c->in[7];
    char sa[160], sb[160];
    if (!is_8bit(a->dtype) || !is_8bit(b->dtype) || !is_8bit(yz->dtype))
        return ts_infer_fail(c, "a, b and y_zero_point must be uint8 or int8");
    if (c->in[2]->dtype != a->dtype || c->in[5]->dtype != b->dtype)
        return ts_infer_fail(c, "zero points differ in type from their operands");
    for (int i = 1; i < 8; i++)
        if (i != 3 && !scalar(c->in[i])) return ts_infer_fail(c, "scales and zero points must be scalars");
    for (int i = 1; i < 8; i += i == 4 ? 2 : 3) /* a_scale, b_scale, y_scale */
        if (c->in[i]->dtype != TS_F32) return ts_infer_fail(c, "scale '%s' must be float32", c->in[i]->name);
    if (!ts_shape_eq(&a->shape, &b->shape))
        return ts_infer_fail(c, "a %s and b %s differ in shape", ts_shape_str(&a->shape, sa, sizeof sa),
                             ts_shape_str(&b->shape, sb, sizeof sb));
    c->out_dtype[0] = yz->dtype;
    c->out_shape[0] = a->shape;
    return TS_OK;
}

static float f32_of(const ts_num *num, const ts_tensor *t) { return (float)el_get(num, t, 0); }

static double saturate8(ts_dtype t, double v)
{
    double lo = t == TS_I8 ? -128 : 0, hi = t == TS_I8 ? 127 : 255;
    return v < lo ? lo : v > hi ? hi : v;
}

static ts_status qadd_kernel(ts_kernel_ctx *k)
{
    if (need_float_domain(k)) return k->err->code;
    const ts_tensor *a = k->in[0], *b = k->in[3];
    float as = f32_of(k->num, k->in[1]), bs = f32_of(k->num, k->in[4]), ys = f32_of(k->num, k->in[6]);
    int64_t az = ts_tensor_get_i64(k->in[2], 0), bz = ts_tensor_get_i64(k->in[5], 0), yz = ts_tensor_get_i64(k->in[7], 0);
    ts_tensor *y = k->out[0];
    for (int64_t i = 0, n = ts_tensor_numel(y); i < n; i++) {
        float fa = (float)(ts_tensor_get_i64(a, i) - az) * as, fb = (float)(ts_tensor_get_i64(b, i) - bz) * bs;
        el_set_i64(y, i, (int64_t)saturate8(y->dtype, nearbyintf((fa + fb) / ys) + (double)yz));
    }
    return TS_OK;
}

const ts_op_desc ts_op_qlinear_add = {
    .name = "tsopt.QLinearAdd", /* internal (the dot): never an ai.onnx operator */
    .opset_min = 1, .min_inputs = 8, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
    .infer = qadd_infer, .kernel = qadd_kernel,
};

/* The scalar parameters at ins[] (scales float32, zero points 8-bit). */
static ts_status scalar_params(ts_infer_ctx *c, const int *ins, int n)
{
    for (int i = 0; i < n; i++) {
        const ts_value *v = c->in[ins[i]];
        if (!scalar(v)) return ts_infer_fail(c, "'%s' must be a scalar", v->name);
        if (i % 2 ? !is_8bit(v->dtype) : v->dtype != TS_F32)
            return ts_infer_fail(c, "'%s' must be %s", v->name, i % 2 ? "uint8 or int8" : "float32");
    }
    return TS_OK;
}

static ts_status chmul_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0], *s = c->in[3];
    char sx[160], ss[160];
    if (!is_8bit(x->dtype) || c->in[2]->dtype != x->dtype) return ts_infer_fail(c, "x and its zero point must be one 8-bit type");
    if (scalar_params(c, (const int[]){1, 2, 4, 5}, 4)) return c->err->code;
    if (s->dtype != TS_F32 || x->shape.rank != 4 || s->shape.rank != 4 ||
        (s->shape.dims[0] != 1 && s->shape.dims[0] != x->shape.dims[0]) || s->shape.dims[1] != x->shape.dims[1] ||
        s->shape.dims[2] != 1 || s->shape.dims[3] != 1)
        return ts_infer_fail(c, "s %s must be float32 [N or 1, C, 1, 1] for x %s", ts_shape_str(&s->shape, ss, sizeof ss),
                             ts_shape_str(&x->shape, sx, sizeof sx));
    c->out_dtype[0] = c->in[5]->dtype;
    c->out_shape[0] = x->shape;
    return TS_OK;
}

static ts_status chmul_kernel(ts_kernel_ctx *k)
{
    if (need_float_domain(k)) return k->err->code;
    const ts_tensor *x = k->in[0], *s = k->in[3];
    ts_tensor *y = k->out[0];
    float xs = f32_of(k->num, k->in[1]), ys = f32_of(k->num, k->in[4]);
    int64_t xz = ts_tensor_get_i64(k->in[2], 0), yz = ts_tensor_get_i64(k->in[5], 0);
    int64_t C = x->shape.dims[1], hw = x->shape.dims[2] * x->shape.dims[3], per_n = ts_tensor_numel(s) == C ? 0 : C;
    for (int64_t i = 0, n = ts_tensor_numel(y); i < n; i++) {
        int64_t nc = i / hw, c = nc % C;
        float g = (float)el_get(k->num, s, (nc / C) * per_n + c);
        float v = (float)(ts_tensor_get_i64(x, i) - xz) * xs * g;
        el_set_i64(y, i, (int64_t)saturate8(y->dtype, nearbyintf(v / ys) + (double)yz));
    }
    return TS_OK;
}

const ts_op_desc ts_op_qlinear_channel_mul = {
    .name = "tsopt.QLinearChannelMul", /* internal (the dot): never an ai.onnx operator */
    .opset_min = 1, .min_inputs = 6, .max_inputs = 6, .min_outputs = 1, .max_outputs = 1,
    .infer = chmul_infer, .kernel = chmul_kernel,
};

static ts_status qgap_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0];
    if (!is_8bit(x->dtype) || c->in[2]->dtype != x->dtype) return ts_infer_fail(c, "x and its zero point must be one 8-bit type");
    if (x->shape.rank != 4) return ts_infer_fail(c, "x must be [N, C, H, W]");
    if (scalar_params(c, (const int[]){1, 2, 3, 4}, 4)) return c->err->code;
    c->out_dtype[0] = c->in[4]->dtype;
    c->out_shape[0] = ts_shape_make(4, (const int64_t[]){x->shape.dims[0], x->shape.dims[1], 1, 1});
    return TS_OK;
}

static ts_status qgap_kernel(ts_kernel_ctx *k)
{
    if (need_float_domain(k)) return k->err->code;
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    float xs = f32_of(k->num, k->in[1]), ys = f32_of(k->num, k->in[3]);
    int64_t xz = ts_tensor_get_i64(k->in[2], 0), yz = ts_tensor_get_i64(k->in[4], 0);
    int64_t hw = x->shape.dims[2] * x->shape.dims[3];
    for (int64_t r = 0, n = ts_tensor_numel(y); r < n; r++) {
        int64_t sum = 0;
        for (int64_t i = 0; i < hw; i++) sum += ts_tensor_get_i64(x, r * hw + i);
        float m = ts_qgap_mean(sum, hw, xz, xs);
        el_set_i64(y, r, (int64_t)saturate8(y->dtype, nearbyintf(m / ys) + (double)yz));
    }
    return TS_OK;
}

const ts_op_desc ts_op_qlinear_gap = {
    .name = "tsopt.QLinearGlobalAveragePool", /* internal (the dot): never an ai.onnx operator */
    .opset_min = 1, .min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .infer = qgap_infer, .kernel = qgap_kernel,
};

static ts_status lookup_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0], *t = c->in[1];
    if (!is_8bit(x->dtype) || !is_8bit(t->dtype)) return ts_infer_fail(c, "x and table must be uint8 or int8");
    if (t->shape.rank != 1 || t->shape.dims[0] != 256) return ts_infer_fail(c, "table must have 256 entries");
    c->out_dtype[0] = t->dtype;
    c->out_shape[0] = x->shape;
    return TS_OK;
}

static ts_status lookup_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0], *t = k->in[1];
    int64_t off = x->dtype == TS_I8 ? 128 : 0;
    for (int64_t i = 0, n = ts_tensor_numel(x); i < n; i++)
        el_set_i64(k->out[0], i, ts_tensor_get_i64(t, ts_tensor_get_i64(x, i) + off));
    return TS_OK;
}

const ts_op_desc ts_op_qlinear_lookup = {
    .name = "tsopt.QLinearLookup", /* internal (the dot): never an ai.onnx operator */
    .opset_min = 1, .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .infer = lookup_infer, .kernel = lookup_kernel,
};
