/* GatherND (opset 11, batch_dims from 12): indices [..., q] pick slices of
 * data's trailing rank - b - q dimensions, the first b (batch_dims)
 * dimensions shared by data and indices.  Output shape:
 * indices.shape[:-1] + data.shape[b + q:].  Data movement: exact. */
#include <string.h>
#include "ops/op.h"

typedef struct gathernd_attrs {
    int64_t batch_dims;
} gathernd_attrs;

static ts_status gnd_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    return ts_attr_get_int(a, na, "batch_dims", 0, &((gathernd_attrs *)attrs)->batch_dims, err);
}

static int gnd_emit(const void *attrs, ts_attr *out, int max)
{
    const gathernd_attrs *p = attrs;
    if (max < 1 || !p->batch_dims) return 0;
    out[0] = ts_attr_int("batch_dims", p->batch_dims);
    return 1;
}

static ts_status gnd_infer(ts_infer_ctx *c)
{
    const gathernd_attrs *p = c->attrs;
    const ts_value *x = c->in[0], *ix = c->in[1];
    if (ix->dtype != TS_I64 && ix->dtype != TS_I32)
        return ts_infer_fail(c, "indices must be int64 or int32, got %s", ts_dtype_name(ix->dtype));
    int b = (int)p->batch_dims, r = x->shape.rank, qr = ix->shape.rank;
    if (qr < 1 || b < 0 || b >= qr || b >= r) return ts_infer_fail(c, "batch_dims %d does not fit ranks %d and %d", b, r, qr);
    int q = (int)ix->shape.dims[qr - 1];
    if (q < 1 || b + q > r) return ts_infer_fail(c, "indices' last dimension %d does not fit data's rank %d", q, r);
    for (int d = 0; d < b; d++)
        if (x->shape.dims[d] != ix->shape.dims[d]) return ts_infer_fail(c, "batch dimension %d differs", d);
    ts_shape o = {.rank = qr - 1 + r - b - q};
    if (o.rank > TS_MAX_RANK) return ts_infer_fail(c, "output would have rank %d", o.rank);
    for (int d = 0; d < qr - 1; d++) o.dims[d] = ix->shape.dims[d];
    for (int d = b + q; d < r; d++) o.dims[qr - 1 + d - b - q] = x->shape.dims[d];
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = o;
    return TS_OK;
}

static ts_status gnd_kernel(ts_kernel_ctx *k)
{
    const gathernd_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0], *ix = k->in[1];
    int b = (int)p->batch_dims, r = x->shape.rank, qr = ix->shape.rank;
    int q = (int)ix->shape.dims[qr - 1];
    int64_t xs[TS_MAX_RANK], slice = 1, batches = 1, per = 1;
    ts_shape_strides(&x->shape, xs);
    for (int d = b + q; d < r; d++) slice *= x->shape.dims[d];
    for (int d = 0; d < b; d++) batches *= x->shape.dims[d];
    for (int d = b; d < qr - 1; d++) per *= ix->shape.dims[d];
    size_t es = ts_dtype_size(x->dtype);
    int64_t bstride = b ? xs[b - 1] : 0; /* elements per batch of data */
    for (int64_t bi = 0; bi < batches; bi++)
        for (int64_t j = 0; j < per; j++) {
            int64_t row = bi * per + j, off = bi * bstride;
            for (int d = 0; d < q; d++) {
                int64_t v = ts_tensor_get_i64(ix, row * q + d), dim = x->shape.dims[b + d];
                if (v < -dim || v >= dim)
                    return ts_kernel_fail(k, TS_ERR_INVALID, "index %lld is out of range for axis %d of size %lld",
                                          (long long)v, b + d, (long long)dim);
                off += (v < 0 ? v + dim : v) * xs[b + d];
            }
            memcpy((char *)k->out[0]->data + (size_t)(row * slice) * es, (const char *)x->data + (size_t)off * es,
                   (size_t)slice * es);
        }
    return TS_OK;
}

const ts_op_desc ts_op_gathernd = {.opset_min = 11, 
    .name = "GatherND", .attr_size = sizeof(gathernd_attrs), .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .parse = gnd_parse, .emit = gnd_emit,
    .infer = gnd_infer, .kernel = gnd_kernel,
};
