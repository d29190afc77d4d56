/* CumSum: running sum along the axis given by the scalar input `axis`
 * (int32/int64, read when the kernel runs, so it need not be a constant);
 * `exclusive` leaves each element out of its own sum, `reverse` runs from
 * the end.  Additions only: linear in x and exact in every domain. */
#include <string.h>
#include "ops/elementwise.h"

typedef struct cumsum_attrs {
    int exclusive, reverse;
} cumsum_attrs;

static ts_status cs_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    cumsum_attrs *p = attrs;
    int64_t e, r;
    (void)opset;
    if (ts_attr_get_int(a, na, "exclusive", 0, &e, err) || ts_attr_get_int(a, na, "reverse", 0, &r, err))
        return err->code;
    if (e != 0 && e != 1) return ts_attr_fail(err, ts_attr_find(a, na, "exclusive"), "expected 0 or 1");
    if (r != 0 && r != 1) return ts_attr_fail(err, ts_attr_find(a, na, "reverse"), "expected 0 or 1");
    p->exclusive = (int)e;
    p->reverse = (int)r;
    return TS_OK;
}

static int cs_emit(const void *attrs, ts_attr *out, int max)
{
    const cumsum_attrs *p = attrs;
    if (max < 2) return 0;
    out[0] = ts_attr_int("exclusive", p->exclusive);
    out[1] = ts_attr_int("reverse", p->reverse);
    return 2;
}

static ts_status cs_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0], *ax = c->in[1];
    if (!ts_dtype_is_float(x->dtype) && !dtype_is_int(x->dtype))
        return ts_infer_fail(c, "input '%s' has type %s, expected a number type", x->name, ts_dtype_name(x->dtype));
    if ((ax->dtype != TS_I64 && ax->dtype != TS_I32) || ts_shape_numel(&ax->shape) != 1)
        return ts_infer_fail(c, "axis ('%s') must be an int32 or int64 scalar", ax->name);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = x->shape;
    return TS_OK;
}

static ts_status cs_kernel(ts_kernel_ctx *k)
{
    const cumsum_attrs *p = k->attrs;
    const ts_num *num = k->num;
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    int axis, r = x->shape.rank;
    int64_t a = ts_tensor_get_i64(k->in[1], 0);
    bool ints = dtype_is_int(x->dtype);
    if (!ts_axis_norm(a, r, &axis))
        return ts_kernel_fail(k, TS_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)a, r);
    if (!ints && x->dtype != num->storage)
        return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "dtype %s not supported", ts_dtype_name(x->dtype));
    int64_t outer = 1, n = x->shape.dims[axis], inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->shape.dims[d];
    for (int d = axis + 1; d < r; d++) inner *= x->shape.dims[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            ts_scalar acc;
            int64_t iacc = 0;
            num->zero(&acc);
            for (int64_t s = 0; s < n; s++) {
                int64_t j = p->reverse ? n - 1 - s : s, at = (o * n + j) * inner + i;
                if (ints) {
                    int64_t v = ts_tensor_get_i64(x, at);
                    if (!p->exclusive) iacc = (int64_t)((uint64_t)iacc + (uint64_t)v);
                    el_set_i64(y, at, iacc);
                    if (p->exclusive) iacc = (int64_t)((uint64_t)iacc + (uint64_t)v);
                } else {
                    const void *v = ts_num_cat(num, x->data, at);
                    if (!p->exclusive) num->add(&acc, &acc, v);
                    memcpy(ts_num_at(num, y->data, at), &acc, num->size);
                    if (p->exclusive) num->add(&acc, &acc, v);
                }
            }
        }
    return TS_OK;
}

const ts_op_desc ts_op_cumsum = {.opset_min = 11, 
    .name = "CumSum", .attr_size = sizeof(cumsum_attrs), .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT, .linear_inputs = 0x1, .parse = cs_parse, .emit = cs_emit,
    .infer = cs_infer, .kernel = cs_kernel,
};
