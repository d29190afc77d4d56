/* Element-wise operators on 8-bit quantized tensors that ONNX spells only
 * as DequantizeLinear -> float op -> QuantizeLinear; tsopt-internal (the
 * dot in the name: never read from or written to a file), made by
 * opt/fuse_qdq.c so a QDQ model's residual adds and activations run on its
 * 8-bit tensors (exec/vec_qlinear.c).
 *
 * tsopt.QLinearAdd(a, a_scale, a_zero_point, b, b_scale, b_zero_point,
 *                  y_scale, y_zero_point)                  (ORT's QLinearAdd)
 *   y = Q(DQ(a) + DQ(b)), a and b of one shape, per-tensor parameters, in
 *   the float32 arithmetic of the three nodes it replaces: each operand
 *   (q - z) * s rounded to float32, their float32 sum, divided by y_scale in
 *   float32, rounded half to even, plus y's zero point, saturated.  The
 *   result is the QDQ graph's, bit for bit.
 * tsopt.QLinearLookup(x, table)
 *   y = table[x] (x uint8; int8 x reads table[x + 128]): any element-wise
 *   f between a DQ and a Q with per-tensor parameters takes one of 256
 *   values per input value, tabulated once by the pass.  The table's type
 *   is y's. */
#include <math.h>
#include "ops/elementwise.h"

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

static ts_status qadd_kernel(ts_kernel_ctx *k)
{
    if (need_float_domain(k)) return k->err->code;
    const ts_tensor *a = k->in[0], *b = k->in[3];
    float as = f32_of(k->num, k->in[1]), bs = f32_of(k->num, k->in[4]), ys = f32_of(k->num, k->in[6]);
    int64_t az = ts_tensor_get_i64(k->in[2], 0), bz = ts_tensor_get_i64(k->in[5], 0), yz = ts_tensor_get_i64(k->in[7], 0);
    ts_tensor *y = k->out[0];
    double lo = y->dtype == TS_I8 ? -128 : 0, hi = y->dtype == TS_I8 ? 127 : 255;
    for (int64_t i = 0, n = ts_tensor_numel(y); i < n; i++) {
        float fa = (float)(ts_tensor_get_i64(a, i) - az) * as, fb = (float)(ts_tensor_get_i64(b, i) - bz) * bs;
        double v = nearbyintf((fa + fb) / ys) + (double)yz;
        el_set_i64(y, i, (int64_t)(v < lo ? lo : v > hi ? hi : v));
    }
    return TS_OK;
}

const ts_op_desc ts_op_qlinear_add = {
    .name = "tsopt.QLinearAdd", /* internal (the dot): never an ai.onnx operator */
    .opset_min = 1, .min_inputs = 8, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
    .infer = qadd_infer, .kernel = qadd_kernel,
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
