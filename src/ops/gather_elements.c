/* GatherElements: out[i..] = data[i.. with index[i..] on `axis`]; indices
 * (int64 or int32, negative counts from the end) have data's rank and give
 * the output shape.  Data movement: exact in every domain. */
#include <string.h>
#include "ops/op.h"

typedef struct gather_el_attrs {
    int64_t axis;
} gather_el_attrs;

static ts_status ge_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    return ts_attr_get_int(a, na, "axis", 0, &((gather_el_attrs *)attrs)->axis, err);
}

static int ge_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_int("axis", ((const gather_el_attrs *)attrs)->axis);
    return 1;
}

static ts_status ge_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0], *ix = c->in[1];
    int axis;
    if (ix->dtype != TS_I64 && ix->dtype != TS_I32)
        return ts_infer_fail(c, "indices must be int64 or int32, got %s", ts_dtype_name(ix->dtype));
    if (ix->shape.rank != x->shape.rank)
        return ts_infer_fail(c, "indices have rank %d, data rank %d (they must match)", ix->shape.rank, x->shape.rank);
    if (!ts_axis_norm(((const gather_el_attrs *)c->attrs)->axis, x->shape.rank, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for rank %d",
                             (long long)((const gather_el_attrs *)c->attrs)->axis, x->shape.rank);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = ix->shape;
    return TS_OK;
}

static ts_status ge_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0], *ix = k->in[1];
    int axis, r = x->shape.rank;
    ts_axis_norm(((const gather_el_attrs *)k->attrs)->axis, r, &axis);
    int64_t xs[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, n = ts_tensor_numel(ix), dim = x->shape.dims[axis];
    ts_shape_strides(&x->shape, xs);
    size_t es = ts_dtype_size(x->dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = ts_tensor_get_i64(ix, i), off = 0;
        if (v < -dim || v >= dim)
            return ts_kernel_fail(k, TS_ERR_INVALID, "index %lld is out of range for axis %d of size %lld",
                                  (long long)v, axis, (long long)dim);
        if (v < 0) v += dim;
        for (int d = 0; d < r; d++) {
            /* indices may be smaller than data on other axes, never larger */
            if (d != axis && idx[d] >= x->shape.dims[d])
                return ts_kernel_fail(k, TS_ERR_INVALID, "indices dimension %d exceeds data's", d);
            off += (d == axis ? v : idx[d]) * xs[d];
        }
        memcpy((char *)k->out[0]->data + (size_t)i * es, (const char *)x->data + (size_t)off * es, es);
        for (int d = r - 1; d >= 0; d--) { /* odometer over the indices' shape */
            if (++idx[d] < ix->shape.dims[d]) break;
            idx[d] = 0;
        }
    }
    return TS_OK;
}

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

const ts_op_desc ts_op_gather_elements = {.opset_min = 11, 
    .name = "GatherElements", .attr_size = sizeof(gather_el_attrs), .min_inputs = 2, .max_inputs = 2,
    .min_outputs = 1, .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1,
    .parse = ge_parse, .emit = ge_emit, .infer = ge_infer, .kernel = ge_kernel, .flops = no_flops,
};
