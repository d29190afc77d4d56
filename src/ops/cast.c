/* Cast: converts element types.  Float tensors live in the number domain's
 * storage, so float->float is a copy and float->int reads num->to_f64.  In
 * the exact mod-p domain only int->int and float->float keep their meaning;
 * the other directions are refused there. */
#include <math.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/op.h"

typedef ts_cast_attrs cast_attrs;


static ts_status cast_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    cast_attrs *p = attrs;
    const ts_attr *to = ts_attr_find(a, na, "to");
    (void)opset;
    if (!to) return ts_error_set(err, TS_ERR_INVALID, "attribute 'to' is required");
    if (ts_attr_get_int(a, na, "to", 0, &p->onnx_to, err)) return err->code;
    p->to = ts_dtype_from_onnx(p->onnx_to);
    p->via = TS_UNDEFINED;
    if (p->to == TS_UNDEFINED)
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "attribute 'to': element type %lld is not supported (expected float32, float64, "
                            "float16, bfloat16, int64, int32, int16, int8, uint64, uint32, uint16, uint8 or bool)",
                            (long long)p->onnx_to);
    return TS_OK;
}

static int cast_emit(const void *attrs, ts_attr *out, int max)
{
    const cast_attrs *p = attrs;
    if (max < 1) return 0;
    out[0] = ts_attr_int("to", p->onnx_to);
    return 1;
}

static ts_status cast_infer(ts_infer_ctx *c)
{
    const cast_attrs *p = c->attrs;
    ts_dtype from = c->in[0]->dtype;
    if (from == TS_UNDEFINED || from == TS_MODP)
        return ts_infer_fail(c, "cannot cast from %s", ts_dtype_name(from));
    c->out_dtype[0] = p->to;
    c->out_shape[0] = c->in[0]->shape;
    return TS_OK;
}

/* Float -> integer truncates toward zero; values outside the target range
 * are clamped so the conversion itself is defined (ONNX leaves it open). */
static int64_t f64_to_i64(double v)
{
    if (isnan(v)) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

static void put_int(ts_tensor *t, int64_t i, int64_t v)
{
    switch (t->dtype) { /* narrowing wraps modulo 2^bits, as C casts do in ORT */
    case TS_I64: ((int64_t *)t->data)[i] = v; break;
    case TS_I32: ((int32_t *)t->data)[i] = (int32_t)(uint32_t)(uint64_t)v; break;
    case TS_I8: ((int8_t *)t->data)[i] = (int8_t)(uint8_t)(uint64_t)v; break;
    case TS_U8: ((uint8_t *)t->data)[i] = (uint8_t)(uint64_t)v; break;
    case TS_I16: ((int16_t *)t->data)[i] = (int16_t)(uint16_t)(uint64_t)v; break;
    case TS_U16: ((uint16_t *)t->data)[i] = (uint16_t)(uint64_t)v; break;
    case TS_U32: ((uint32_t *)t->data)[i] = (uint32_t)(uint64_t)v; break;
    case TS_U64: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
    case TS_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    default: break;
    }
}

extern const ts_op_desc ts_op_cast;

static ts_status cast_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    const ts_num *num = k->num;
    bool ffrom = ts_dtype_is_float(x->dtype) || x->dtype == num->storage;
    bool fto = ts_dtype_is_float(y->dtype) || y->dtype == num->storage;
    int64_t n = ts_tensor_numel(y);
    if (ffrom && fto) { /* same domain storage on both sides */
        if (y->nbytes) memcpy(y->data, x->data, y->nbytes);
        const cast_attrs *a = k->attrs;
        if (k->node->op == &ts_op_cast && a->via != TS_UNDEFINED && !num->exact)
            for (int64_t i = 0; i < n; i++) { /* a Cast to 16 bits computed in float32: rounded all the same */
                void *e = ts_num_at(num, y->data, i);
                num->from_f64(e, ts_dtype_round(a->via, num->to_f64(e)));
            }
        return TS_OK;
    }
    if (num->exact && (ffrom || fto))
        return ts_kernel_fail(k, TS_ERR_UNSUPPORTED,
                              "cast between integer and float types has no meaning in the %s domain", num->name);
    if (ffrom) {
        for (int64_t i = 0; i < n; i++) {
            double v = num->to_f64(ts_num_cat(num, x->data, i));
            put_int(y, i, y->dtype == TS_BOOL ? (v != 0) : f64_to_i64(v));
        }
    } else if (fto) {
        for (int64_t i = 0; i < n; i++) /* get_f64 reads uint64 above 2^63 as the unsigned value */
            num->from_f64(ts_num_at(num, y->data, i), ts_tensor_get_f64(x, i));
    } else {
        for (int64_t i = 0; i < n; i++) put_int(y, i, ts_tensor_get_i64(x, i));
    }
    return TS_OK;
}

const ts_op_desc ts_op_cast = {.opset_min = 6, 
    .name = "Cast", .attr_size = sizeof(cast_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_ELEMENTWISE, .parse = cast_parse, .emit = cast_emit,
    .infer = cast_infer, .kernel = cast_kernel,
};

/* CastLike (opset 15): Cast to the element type of the second input, whose
 * values are not read. */
static ts_status castlike_infer(ts_infer_ctx *c)
{
    ts_dtype from = c->in[0]->dtype, to = c->in[1]->dtype;
    if (from == TS_UNDEFINED || from == TS_MODP) return ts_infer_fail(c, "cannot cast from %s", ts_dtype_name(from));
    if (to == TS_UNDEFINED || to == TS_MODP) return ts_infer_fail(c, "cannot cast to %s", ts_dtype_name(to));
    c->out_dtype[0] = to;
    c->out_shape[0] = c->in[0]->shape;
    return TS_OK;
}

const ts_op_desc ts_op_castlike = {.opset_min = 15, 
    .name = "CastLike", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_EXACT, .infer = castlike_infer, .kernel = cast_kernel,
};
