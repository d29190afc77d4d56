/* OneHot (opset 9/11): indices (any number type) expanded along a new axis
 * of length depth, holding values[1] where the index is and values[0]
 * elsewhere.  Negative indices count from depth (opset 11); indices
 * outside [-depth, depth) give a row of values[0].  depth sets the output
 * shape, so it must be known when the graph is built. */
#include <math.h>
#include <string.h>
#include "ops/elementwise.h"

typedef struct onehot_attrs {
    int64_t axis;
} onehot_attrs;

static ts_status onehot_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    return ts_attr_get_int(a, na, "axis", -1, &((onehot_attrs *)attrs)->axis, err);
}

static int onehot_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_int("axis", ((const onehot_attrs *)attrs)->axis);
    return 1;
}

static ts_status onehot_infer(ts_infer_ctx *c)
{
    const onehot_attrs *p = c->attrs;
    const ts_value *ind = c->in[0], *vals = c->in[2];
    int axis, n;
    double depth;
    if (ind->shape.rank + 1 > TS_MAX_RANK) return ts_infer_fail(c, "indices have rank %d: too large", ind->shape.rank);
    if (!ts_axis_norm(p->axis, ind->shape.rank + 1, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for rank %d", (long long)p->axis, ind->shape.rank + 1);
    if (ts_shape_numel(&vals->shape) != 2) return ts_infer_fail(c, "values ('%s') must have 2 elements", vals->name);
    if (ts_shape_numel(&c->in[1]->shape) != 1) return ts_infer_fail(c, "depth ('%s') must be a scalar", c->in[1]->name);
    if (ts_infer_const_floats(c, 1, &depth, 1, &n)) return c->err->code;
    if (!(depth >= 1 && depth <= (double)TS_MAX_ELEMENTS)) return ts_infer_fail(c, "depth %g is not positive", depth);
    ts_shape o = {.rank = ind->shape.rank + 1};
    for (int d = 0, s = 0; d < o.rank; d++) o.dims[d] = d == axis ? (int64_t)depth : ind->shape.dims[s++];
    c->out_dtype[0] = vals->dtype;
    c->out_shape[0] = o;
    return TS_OK;
}

static ts_status onehot_kernel(ts_kernel_ctx *k)
{
    const onehot_attrs *p = k->attrs;
    const ts_tensor *ind = k->in[0], *vals = k->in[2];
    ts_tensor *y = k->out[0];
    int axis;
    ts_axis_norm(p->axis, y->shape.rank, &axis);
    int64_t depth = y->shape.dims[axis], inner = 1, outer = 1;
    for (int d = 0; d < axis; d++) outer *= y->shape.dims[d];
    for (int d = axis + 1; d < y->shape.rank; d++) inner *= y->shape.dims[d];
    size_t es = ts_dtype_size(y->dtype); /* values and y share their storage: copied as they are */
    const char *off = vals->data, *on = (const char *)vals->data + es;
    bool findex = ts_dtype_is_float(ind->dtype) || ind->dtype == k->num->storage;
    if (findex && need_float_domain(k)) return k->err->code;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t d = 0; d < depth; d++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t at = o * inner + i;
                double v = findex ? el_get(k->num, ind, at) : (double)ts_tensor_get_i64(ind, at);
                int64_t hot = (int64_t)trunc(v);
                if (hot < 0) hot += depth;
                memcpy((char *)y->data + (size_t)((o * depth + d) * inner + i) * es, hot == d ? on : off, es);
            }
    return TS_OK;
}

const ts_op_desc ts_op_onehot = {.opset_min = 9, 
    .name = "OneHot", .attr_size = sizeof(onehot_attrs), .min_inputs = 3, .max_inputs = 3, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT, .parse = onehot_parse, .emit = onehot_emit, .infer = onehot_infer,
    .kernel = onehot_kernel,
};
