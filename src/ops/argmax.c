/* ArgMax and ArgMin: int64 index of the largest (smallest) element along
 * one axis; the first one on ties, or the last with select_last_index
 * (opset 12).  Float inputs compare real values, so they run in the float
 * domains only; integer inputs in any. */
#include <math.h>
#include "ops/elementwise.h"

typedef struct arg_attrs {
    int64_t axis;
    int keepdims, last;
} arg_attrs;

static ts_status arg_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    arg_attrs *p = attrs;
    int64_t v;
    (void)opset;
    if (ts_attr_get_int(a, na, "axis", 0, &p->axis, err)) return err->code;
    if (ts_attr_get_int(a, na, "keepdims", 1, &v, err)) return err->code;
    if (v != 0 && v != 1) return ts_attr_fail(err, ts_attr_find(a, na, "keepdims"), "expected 0 or 1");
    p->keepdims = (int)v;
    if (ts_attr_get_int(a, na, "select_last_index", 0, &v, err)) return err->code;
    if (v != 0 && v != 1) return ts_attr_fail(err, ts_attr_find(a, na, "select_last_index"), "expected 0 or 1");
    p->last = (int)v;
    return TS_OK;
}

static int arg_emit(const void *attrs, ts_attr *out, int max)
{
    const arg_attrs *p = attrs;
    int n = 0;
    if (max < 3) return 0;
    out[n++] = ts_attr_int("axis", p->axis);
    out[n++] = ts_attr_int("keepdims", p->keepdims);
    if (p->last) out[n++] = ts_attr_int("select_last_index", 1); /* opset 12+ only */
    return n;
}

static ts_status arg_infer(ts_infer_ctx *c)
{
    const arg_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int axis;
    if (!ts_dtype_is_float(x->dtype) && !dtype_is_int(x->dtype))
        return ts_infer_fail(c, "input '%s' has type %s, expected a number type", x->name, ts_dtype_name(x->dtype));
    if (!ts_axis_norm(p->axis, x->shape.rank, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for rank %d", (long long)p->axis, x->shape.rank);
    if (x->shape.dims[axis] == 0) return ts_infer_fail(c, "axis %d is empty: no index to return", axis);
    ts_shape o = {0};
    for (int d = 0; d < x->shape.rank; d++)
        if (d != axis)
            o.dims[o.rank++] = x->shape.dims[d];
        else if (p->keepdims)
            o.dims[o.rank++] = 1;
    c->out_dtype[0] = TS_I64;
    c->out_shape[0] = o;
    return TS_OK;
}

/* sign +1: ArgMax, -1: ArgMin.  NaN counts as the extreme (first NaN wins,
 * or the last with select_last_index), as numpy's argmax does. */
static ts_status arg_run(ts_kernel_ctx *k, int sign)
{
    const arg_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    bool ints = dtype_is_int(x->dtype);
    int axis;
    if (!ints && need_float_domain(k)) return k->err->code;
    ts_axis_norm(p->axis, x->shape.rank, &axis);
    int64_t outer = 1, n = x->shape.dims[axis], inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->shape.dims[d];
    for (int d = axis + 1; d < x->shape.rank; d++) inner *= x->shape.dims[d];
    int64_t *y = k->out[0]->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i, best = 0;
            double bv = ints ? (double)ts_tensor_get_i64(x, base) : el_get(k->num, x, base);
            int64_t bi = ints ? ts_tensor_get_i64(x, base) : 0;
            for (int64_t j = 1; j < n && !(!ints && isnan(bv) && !p->last); j++) {
                int64_t at = base + j * inner;
                bool better;
                if (ints) {
                    int64_t v = ts_tensor_get_i64(x, at);
                    better = p->last ? (sign > 0 ? v >= bi : v <= bi) : (sign > 0 ? v > bi : v < bi);
                    if (better) bi = v;
                } else {
                    double v = el_get(k->num, x, at);
                    if (isnan(bv) && p->last) better = isnan(v);
                    else if (isnan(v)) better = true;
                    else better = p->last ? (sign > 0 ? v >= bv : v <= bv) : (sign > 0 ? v > bv : v < bv);
                    if (better) bv = v;
                }
                if (better) best = j;
            }
            y[o * inner + i] = best;
        }
    return TS_OK;
}

static ts_status argmax_kernel(ts_kernel_ctx *k) { return arg_run(k, 1); }
static ts_status argmin_kernel(ts_kernel_ctx *k) { return arg_run(k, -1); }

#define ARG(NAME) .name = NAME, .attr_size = sizeof(arg_attrs), .min_inputs = 1, .max_inputs = 1, \
                  .min_outputs = 1, .max_outputs = 1, .parse = arg_parse, .emit = arg_emit, .infer = arg_infer
const ts_op_desc ts_op_argmax = {.opset_min = 1, ARG("ArgMax"), .kernel = argmax_kernel};
const ts_op_desc ts_op_argmin = {.opset_min = 1, ARG("ArgMin"), .kernel = argmin_kernel};
