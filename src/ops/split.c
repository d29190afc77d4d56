/* Split: cuts a tensor into pieces along one axis.  Sizes come from the
 * 'split' attribute (opset < 13), the optional second input (opset >= 13),
 * 'num_outputs' (opset 18: ceil-sized pieces, the last one smaller), or by
 * default equal pieces, one per output. */
#include <string.h>
#include "ops/op.h"

#define SPLIT_MAX 64

typedef struct split_attrs {
    int64_t axis;
    int64_t num_outputs; /* 0: absent */
    int nsplit;          /* -1: no 'split' attribute */
    int64_t split[SPLIT_MAX];
} split_attrs;

static ts_status split_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    split_attrs *p = attrs;
    (void)opset;
    if (ts_attr_get_int(a, na, "axis", 0, &p->axis, err) ||
        ts_attr_get_int(a, na, "num_outputs", 0, &p->num_outputs, err) ||
        ts_attr_get_ints(a, na, "split", p->split, SPLIT_MAX, &p->nsplit, err))
        return err->code;
    if (p->num_outputs < 0) return ts_error_set(err, TS_ERR_INVALID, "attribute 'num_outputs' must be positive");
    return TS_OK;
}

static int split_emit(const void *attrs, ts_attr *out, int max)
{
    const split_attrs *p = attrs;
    int n = 0;
    if (n < max) out[n++] = ts_attr_int("axis", p->axis);
    if (p->num_outputs && n < max) out[n++] = ts_attr_int("num_outputs", p->num_outputs);
    if (p->nsplit >= 0 && n < max) out[n++] = ts_attr_ints("split", p->split, p->nsplit);
    return n;
}

static ts_status split_infer(ts_infer_ctx *c)
{
    const split_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int64_t sizes[SPLIT_MAX];
    int n = -1, axis;
    if (!ts_axis_norm(p->axis, x->shape.rank, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for rank %d", (long long)p->axis, x->shape.rank);
    int64_t dim = x->shape.dims[axis];
    if (c->nout > SPLIT_MAX) return ts_infer_fail(c, "%d outputs, at most %d supported", c->nout, SPLIT_MAX);
    if (c->nin > 1 && c->in[1]) {
        if (ts_infer_const_ints(c, 1, sizes, SPLIT_MAX, &n)) return c->err->code;
    } else if (p->nsplit >= 0) {
        n = p->nsplit;
        memcpy(sizes, p->split, sizeof(int64_t) * (size_t)n);
    }
    if (n >= 0) {
        int64_t sum = 0;
        if (n != c->nout) return ts_infer_fail(c, "%d split sizes given for %d outputs", n, c->nout);
        for (int i = 0; i < n; i++) {
            if (sizes[i] < 0) return ts_infer_fail(c, "split size %lld is negative", (long long)sizes[i]);
            sum += sizes[i];
        }
        if (sum != dim)
            return ts_infer_fail(c, "split sizes sum to %lld, expected %lld (dimension of axis %d)", (long long)sum,
                                 (long long)dim, axis);
    } else if (p->num_outputs) {
        if (p->num_outputs != c->nout)
            return ts_infer_fail(c, "num_outputs is %lld but the node has %d outputs", (long long)p->num_outputs,
                                 c->nout);
        int64_t piece = (dim + c->nout - 1) / c->nout, left = dim;
        for (int i = 0; i < c->nout; i++) {
            sizes[i] = left < piece ? left : piece;
            left -= sizes[i];
        }
    } else {
        if (dim % c->nout)
            return ts_infer_fail(c, "dimension %lld of axis %d does not split evenly into %d outputs", (long long)dim,
                                 axis, c->nout);
        for (int i = 0; i < c->nout; i++) sizes[i] = dim / c->nout;
    }
    for (int i = 0; i < c->nout; i++) {
        c->out_dtype[i] = x->dtype;
        c->out_shape[i] = x->shape;
        c->out_shape[i].dims[axis] = sizes[i];
    }
    return TS_OK;
}

/* The pieces' sizes are the outputs' shapes along the axis. */
static ts_status split_kernel(ts_kernel_ctx *k)
{
    const split_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    size_t elem = ts_dtype_size(x->dtype);
    int axis;
    ts_axis_norm(p->axis, x->shape.rank, &axis);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->shape.dims[d];
    for (int d = axis + 1; d < x->shape.rank; d++) inner *= x->shape.dims[d];
    size_t row = (size_t)(x->shape.dims[axis] * inner) * elem, at = 0;
    for (int i = 0; i < k->nout; i++) {
        ts_tensor *y = k->out[i];
        size_t chunk = (size_t)(y->shape.dims[axis] * inner) * elem;
        for (int64_t o = 0; o < outer && chunk; o++)
            memcpy((char *)y->data + (size_t)o * chunk, (const char *)x->data + (size_t)o * row + at, chunk);
        at += chunk;
    }
    return TS_OK;
}

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

const ts_op_desc ts_op_split = {.opset_min = 2, 
    .name = "Split", .attr_size = sizeof(split_attrs), .min_inputs = 1, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = SPLIT_MAX, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1, .parse = split_parse,
    .emit = split_emit, .infer = split_infer, .kernel = split_kernel, .flops = no_flops,
};
