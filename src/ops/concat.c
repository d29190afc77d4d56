/* Concat: joins tensors along one axis.  Pure data movement, so the kernel
 * copies bytes and runs in every number domain. */
#include <string.h>
#include "ops/op.h"
#include "ops/attrs.h"

static ts_status concat_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_concat_attrs *p = attrs;
    (void)opset;
    if (!ts_attr_find(a, na, "axis")) return ts_error_set(err, TS_ERR_INVALID, "attribute 'axis' is required");
    return ts_attr_get_int(a, na, "axis", 0, &p->axis, err);
}

static int concat_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_concat_attrs *p = attrs;
    if (max < 1) return 0;
    out[0] = ts_attr_int("axis", p->axis);
    return 1;
}

static ts_status concat_infer(ts_infer_ctx *c)
{
    const ts_concat_attrs *p = c->attrs;
    const ts_value *x0 = c->in[0];
    char sa[160], sb[160];
    int axis;
    for (int i = 0; i < c->nin; i++)
        if (!c->in[i]) return ts_infer_fail(c, "input %d is missing", i);
    if (x0->shape.rank == 0) return ts_infer_fail(c, "cannot concatenate scalars (rank 0)");
    if (!ts_axis_norm(p->axis, x0->shape.rank, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for rank %d", (long long)p->axis, x0->shape.rank);
    ts_shape out = x0->shape;
    out.dims[axis] = 0;
    for (int i = 0; i < c->nin; i++) {
        const ts_value *x = c->in[i];
        if (x->dtype != x0->dtype)
            return ts_infer_fail(c, "input %d is %s, expected %s like input 0", i, ts_dtype_name(x->dtype),
                                 ts_dtype_name(x0->dtype));
        bool ok = x->shape.rank == x0->shape.rank;
        for (int d = 0; ok && d < x->shape.rank; d++) ok = d == axis || x->shape.dims[d] == x0->shape.dims[d];
        if (!ok)
            return ts_infer_fail(c, "input %d has shape %s, expected %s except along axis %d", i,
                                 ts_shape_str(&x->shape, sa, sizeof sa), ts_shape_str(&x0->shape, sb, sizeof sb),
                                 axis);
        out.dims[axis] += x->shape.dims[axis];
    }
    c->out_dtype[0] = x0->dtype;
    c->out_shape[0] = out;
    return TS_OK;
}

static ts_status concat_kernel(ts_kernel_ctx *k)
{
    const ts_concat_attrs *p = k->attrs;
    ts_tensor *y = k->out[0];
    size_t elem = ts_dtype_size(y->dtype);
    int axis;
    ts_axis_norm(p->axis, y->shape.rank, &axis);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= y->shape.dims[d];
    for (int d = axis + 1; d < y->shape.rank; d++) inner *= y->shape.dims[d];
    size_t row = (size_t)(y->shape.dims[axis] * inner) * elem, at = 0;
    for (int i = 0; i < k->nin; i++) {
        const ts_tensor *x = k->in[i];
        size_t chunk = (size_t)(x->shape.dims[axis] * inner) * elem;
        for (int64_t o = 0; o < outer && chunk; o++)
            memcpy((char *)y->data + (size_t)o * row + at, (const char *)x->data + (size_t)o * chunk, chunk);
        at += chunk;
    }
    return TS_OK;
}

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

/* Every output element is one element of one input: linear in each input
 * (PET treats concat as multi-linear). */
const ts_op_desc ts_op_concat = {.opset_min = 4, 
    .name = "Concat", .attr_size = sizeof(ts_concat_attrs), .min_inputs = 1, .max_inputs = -1, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0xffffffffu,
    .parse = concat_parse, .emit = concat_emit, .infer = concat_infer, .kernel = concat_kernel, .flops = no_flops,
};
