/* Gather: picks slices of `data` along one axis by integer indices (int64
 * or int32, any rank; negative counts from the end).  Output shape is
 * data[:axis] + indices + data[axis+1:]. */
#include <string.h>
#include "ops/op.h"
#include "ops/attrs.h"

static ts_status gather_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_gather_attrs *p = attrs;
    (void)opset;
    return ts_attr_get_int(a, na, "axis", 0, &p->axis, err);
}

static int gather_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_gather_attrs *p = attrs;
    if (max < 1) return 0;
    out[0] = ts_attr_int("axis", p->axis);
    return 1;
}

static ts_status gather_infer(ts_infer_ctx *c)
{
    const ts_gather_attrs *p = c->attrs;
    const ts_value *x = c->in[0], *ix = c->in[1];
    int axis;
    if (!ix) return ts_infer_fail(c, "indices input is missing");
    if (ix->dtype != TS_I64 && ix->dtype != TS_I32)
        return ts_infer_fail(c, "indices must be int64 or int32, got %s", ts_dtype_name(ix->dtype));
    if (!ts_axis_norm(p->axis, x->shape.rank, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for rank %d", (long long)p->axis, x->shape.rank);
    int r = x->shape.rank - 1 + ix->shape.rank;
    if (r > TS_MAX_RANK) return ts_infer_fail(c, "output rank %d exceeds %d", r, TS_MAX_RANK);
    int64_t dim = x->shape.dims[axis];
    if (ix->constant) /* catch bad constant indices early, with the same message as the kernel */
        for (int64_t i = 0; i < ts_tensor_numel(ix->constant); i++) {
            int64_t v = ts_tensor_get_i64(ix->constant, i);
            if (v < -dim || v >= dim)
                return ts_infer_fail(c, "index %lld is out of range for axis %d of size %lld", (long long)v, axis,
                                     (long long)dim);
        }
    ts_shape out = {.rank = r};
    int j = 0;
    for (int d = 0; d < axis; d++) out.dims[j++] = x->shape.dims[d];
    for (int d = 0; d < ix->shape.rank; d++) out.dims[j++] = ix->shape.dims[d];
    for (int d = axis + 1; d < x->shape.rank; d++) out.dims[j++] = x->shape.dims[d];
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = out;
    return TS_OK;
}

static ts_status gather_kernel(ts_kernel_ctx *k)
{
    const ts_gather_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0], *ix = k->in[1];
    ts_tensor *y = k->out[0];
    size_t elem = ts_dtype_size(y->dtype);
    int axis;
    ts_axis_norm(p->axis, x->shape.rank, &axis);
    int64_t outer = 1, inner = 1, dim = x->shape.dims[axis], ni = ts_tensor_numel(ix);
    for (int d = 0; d < axis; d++) outer *= x->shape.dims[d];
    for (int d = axis + 1; d < x->shape.rank; d++) inner *= x->shape.dims[d];
    size_t chunk = (size_t)inner * elem;
    for (int64_t i = 0; i < ni; i++) {
        int64_t v = ts_tensor_get_i64(ix, i);
        if (v < -dim || v >= dim)
            return ts_kernel_fail(k, TS_ERR_INVALID, "index %lld is out of range for axis %d of size %lld",
                                  (long long)v, axis, (long long)dim);
        if (v < 0) v += dim;
        for (int64_t o = 0; o < outer && chunk; o++)
            memcpy((char *)y->data + (size_t)(o * ni + i) * chunk,
                   (const char *)x->data + (size_t)(o * dim + v) * chunk, chunk);
    }
    return TS_OK;
}

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

const ts_op_desc ts_op_gather = {.opset_min = 1, 
    .name = "Gather", .attr_size = sizeof(ts_gather_attrs), .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1, .parse = gather_parse,
    .emit = gather_emit, .infer = gather_infer, .kernel = gather_kernel, .flops = no_flops,
};
