/* MaxUnpool (opset 9/11): the inverse of MaxPool with Indices: a zero
 * tensor of the pooled-from size ((in - 1) * stride + kernel - pads per
 * spatial dimension, or the optional output_shape input, which then must
 * be known when the graph is built) with each X value written at its flat
 * index from I.  Data movement: exact. */
#include <string.h>
#include "ops/window.h"

typedef struct unpool_attrs {
    ts_window win;
} unpool_attrs;

static ts_status unpool_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    unpool_attrs *p = attrs;
    (void)opset;
    if (ts_window_parse(&p->win, a, na, false, err)) return err->code;
    if (p->win.nkernel < 1) return ts_error_set(err, TS_ERR_INVALID, "attribute 'kernel_shape' is required");
    return TS_OK;
}

static int unpool_emit(const void *attrs, ts_attr *out, int max)
{
    int n = ts_window_emit(&((const unpool_attrs *)attrs)->win, out, max);
    return n < 0 ? 0 : n;
}

/* The pooled-from spatial size: (in - 1) * stride + kernel - pads. */
static void default_dims(const unpool_attrs *p, const ts_shape *x, int64_t *dims)
{
    int nsp = x->rank - 2;
    for (int d = 0; d < nsp; d++) {
        int64_t stride = p->win.nstrides > 0 ? p->win.strides[d] : 1;
        int64_t pads = p->win.npads > 0 ? p->win.pads[d] + p->win.pads[nsp + d] : 0;
        dims[d] = (x->dims[2 + d] - 1) * stride + p->win.kernel[d] - pads;
    }
}

static ts_status unpool_infer(ts_infer_ctx *c)
{
    const unpool_attrs *p = c->attrs;
    const ts_value *x = c->in[0], *ix = c->in[1];
    int nsp = x->shape.rank - 2;
    char why[200];
    if (nsp < 1 || nsp != p->win.nkernel) return ts_infer_fail(c, "X must have %d spatial dimensions", p->win.nkernel);
    if (ix->dtype != TS_I64 || !ts_shape_eq(&ix->shape, &x->shape)) return ts_infer_fail(c, "I must be int64 of X's shape");
    if (!ts_window_check(&p->win, nsp, NULL, why, sizeof why)) return ts_infer_fail(c, "%s", why);
    ts_shape o = x->shape;
    if (c->nin > 2 && c->in[2]) {
        int64_t dims[TS_MAX_RANK];
        int n;
        if (ts_infer_const_ints(c, 2, dims, TS_MAX_RANK, &n)) return c->err->code;
        if (n != x->shape.rank) return ts_infer_fail(c, "output_shape has %d values for rank %d", n, x->shape.rank);
        for (int d = 0; d < n; d++) {
            if (d < 2 ? dims[d] != x->shape.dims[d] : dims[d] < 0) return ts_infer_fail(c, "output_shape value %d is invalid", d);
            o.dims[d] = dims[d];
        }
    } else {
        default_dims(p, &x->shape, o.dims + 2);
        for (int d = 0; d < nsp; d++)
            if (o.dims[2 + d] < 0) return ts_infer_fail(c, "output dimension %d would be negative", 2 + d);
    }
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = o;
    return TS_OK;
}

static ts_status unpool_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0], *ix = k->in[1];
    ts_tensor *y = k->out[0];
    int nsp = x->shape.rank - 2;
    int64_t n = ts_tensor_numel(x), per_in = 1, per_def = 1, per_out = 1, def[TS_WIN_MAX];
    default_dims(k->attrs, &x->shape, def);
    for (int d = 0; d < nsp; d++) per_in *= x->shape.dims[2 + d], per_def *= def[d], per_out *= y->shape.dims[2 + d];
    size_t es = ts_dtype_size(x->dtype);
    for (int64_t i = 0; i < n; i++) {
        /* indices are flat over the whole pooled-from tensor (MaxPool's
         * Indices, in the default size); an output_shape places each value
         * at the same coordinates of the larger output */
        int64_t at = ts_tensor_get_i64(ix, i), plane = per_in ? i / per_in : 0, rem = at - plane * per_def, off = 0;
        bool ok = rem >= 0 && rem < per_def;
        int64_t mul = 1;
        for (int d = nsp - 1; d >= 0 && ok; d--) {
            int64_t pos = rem % def[d];
            rem /= def[d];
            ok = pos < y->shape.dims[2 + d];
            off += pos * mul;
            mul *= y->shape.dims[2 + d];
        }
        if (!ok)
            return ts_kernel_fail(k, TS_ERR_INVALID, "index %lld of element %lld is outside its output plane", (long long)at,
                                  (long long)i);
        memcpy((char *)y->data + (size_t)(plane * per_out + off) * es, (const char *)x->data + (size_t)i * es, es);
    }
    return TS_OK;
}

const ts_op_desc ts_op_max_unpool = {.opset_min = 9, 
    .name = "MaxUnpool", .attr_size = sizeof(unpool_attrs), .min_inputs = 2, .max_inputs = 3, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .parse = unpool_parse, .emit = unpool_emit,
    .infer = unpool_infer, .kernel = unpool_kernel,
};
