/* Expand (bidirectional broadcast to a constant shape) and Tile (repeats
 * along every axis): both copy input elements to many output positions. */
#include <string.h>
#include "ops/op.h"

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

static ts_status expand_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0];
    int64_t dims[TS_MAX_RANK];
    int n;
    char sa[160], sb[160];
    if (c->in[1]->shape.rank != 1) return ts_infer_fail(c, "shape input must be 1-D");
    if (ts_infer_const_ints(c, 1, dims, TS_MAX_RANK, &n)) return c->err->code;
    for (int i = 0; i < n; i++)
        if (dims[i] < 0) return ts_infer_fail(c, "shape entry %d is negative (%lld)", i, (long long)dims[i]);
    ts_shape want = ts_shape_make(n, dims);
    if (!ts_shape_broadcast(&x->shape, &want, &c->out_shape[0]))
        return ts_infer_fail(c, "cannot expand %s to %s (dimensions must match or be 1)",
                             ts_shape_str(&x->shape, sa, sizeof sa), ts_shape_str(&want, sb, sizeof sb));
    c->out_dtype[0] = x->dtype;
    return TS_OK;
}

static ts_status expand_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    size_t elem = ts_dtype_size(y->dtype);
    int64_t st[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, off = 0, n = ts_tensor_numel(y);
    int r = y->shape.rank;
    ts_shape_bcast_strides(&x->shape, &y->shape, st);
    for (int64_t i = 0; i < n; i++) {
        memcpy((char *)y->data + (size_t)i * elem, (const char *)x->data + (size_t)off * elem, elem);
        for (int d = r - 1; d >= 0; d--) {
            off += st[d];
            if (++idx[d] < y->shape.dims[d]) break;
            off -= st[d] * y->shape.dims[d];
            idx[d] = 0;
        }
    }
    return TS_OK;
}

const ts_op_desc ts_op_expand = {.opset_min = 8, 
    .name = "Expand", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1, .infer = expand_infer, .kernel = expand_kernel,
    .flops = no_flops,
};

static ts_status tile_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0];
    int64_t rep[TS_MAX_RANK];
    int n;
    if (ts_infer_const_ints(c, 1, rep, TS_MAX_RANK, &n)) return c->err->code;
    if (n != x->shape.rank)
        return ts_infer_fail(c, "%d repeats given, expected %d (the input rank)", n, x->shape.rank);
    ts_shape out = x->shape;
    for (int d = 0; d < n; d++) {
        if (rep[d] < 0) return ts_infer_fail(c, "repeat %lld on axis %d is negative", (long long)rep[d], d);
        if (rep[d] && out.dims[d] > TS_MAX_ELEMENTS / rep[d])
            return ts_infer_fail(c, "repeat %lld on axis %d is too large", (long long)rep[d], d);
        out.dims[d] *= rep[d];
    }
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = out;
    return TS_OK;
}

static ts_status tile_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    size_t elem = ts_dtype_size(y->dtype);
    int64_t xs[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, n = ts_tensor_numel(y);
    int r = y->shape.rank;
    ts_shape_strides(&x->shape, xs);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int d = 0; d < r; d++) off += idx[d] % x->shape.dims[d] * xs[d];
        memcpy((char *)y->data + (size_t)i * elem, (const char *)x->data + (size_t)off * elem, elem);
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < y->shape.dims[d]) break;
            idx[d] = 0;
        }
    }
    return TS_OK;
}

const ts_op_desc ts_op_tile = {.opset_min = 1, 
    .name = "Tile", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1, .infer = tile_infer, .kernel = tile_kernel,
    .flops = no_flops,
};
