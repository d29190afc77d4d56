/* Range (opset 11): start, start + delta, ... up to limit (excluded), from
 * three scalars of one number type.  The length max(ceil((limit - start) /
 * delta), 0) is the output's shape, so the three must be known when the
 * graph is built (a session loads the model at the run's values). */
#include <math.h>
#include "ops/elementwise.h"

static ts_status range_infer(ts_infer_ctx *c)
{
    double v[3];
    ts_dtype dt = c->in[0]->dtype;
    for (int i = 0; i < 3; i++) {
        const ts_value *x = c->in[i];
        if (x->dtype != dt)
            return ts_infer_fail(c, "input %d ('%s') is %s, input 0 is %s", i, x->name, ts_dtype_name(x->dtype),
                                 ts_dtype_name(dt));
        if (ts_shape_numel(&x->shape) != 1 || x->shape.rank > 1)
            return ts_infer_fail(c, "input %d ('%s') must be a scalar", i, x->name);
    }
    if (dt != TS_F32 && dt != TS_F64 && dt != TS_I16 && dt != TS_I32 && dt != TS_I64)
        return ts_infer_fail(c, "type %s is not one of float, double, int16, int32, int64", ts_dtype_name(dt));
    for (int i = 0; i < 3; i++) {
        int n;
        if (ts_infer_const_floats(c, i, &v[i], 1, &n)) return c->err->code;
    }
    if (v[2] == 0) return ts_infer_fail(c, "delta is 0");
    double len = ceil((v[1] - v[0]) / v[2]);
    if (!(len <= (double)TS_MAX_ELEMENTS)) return ts_infer_fail(c, "%g elements are too many", len);
    c->out_dtype[0] = dt;
    c->out_shape[0] = ts_shape_make(1, (int64_t[]){len > 0 ? (int64_t)len : 0});
    return TS_OK;
}

static ts_status range_kernel(ts_kernel_ctx *k)
{
    ts_tensor *y = k->out[0];
    bool flt = ts_dtype_is_float(y->dtype) || y->dtype == k->num->storage;
    if (flt && need_float_domain(k)) return k->err->code;
    int64_t n = ts_tensor_numel(y);
    if (flt) {
        double start = el_get(k->num, k->in[0], 0), delta = el_get(k->num, k->in[2], 0);
        for (int64_t i = 0; i < n; i++) el_set(k->num, y, i, start + (double)i * delta);
    } else {
        int64_t start = ts_tensor_get_i64(k->in[0], 0), delta = ts_tensor_get_i64(k->in[2], 0);
        for (int64_t i = 0; i < n; i++) el_set_i64(y, i, start + i * delta);
    }
    return TS_OK;
}

const ts_op_desc ts_op_range = {.opset_min = 11, 
    .name = "Range", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1, .flags = TS_OP_SHAPE,
    .infer = range_infer, .kernel = range_kernel,
};
