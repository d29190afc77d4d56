/* Transpose: permutes axes (default: reverses them).  out.dims[i] =
 * in.dims[perm[i]]. */
#include <string.h>
#include "ops/op.h"
#include "ops/attrs.h"

static ts_status transpose_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_transpose_attrs *p = attrs;
    (void)opset;
    return ts_attr_get_ints(a, na, "perm", p->perm, TS_MAX_RANK, &p->nperm, err);
}

static int transpose_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_transpose_attrs *p = attrs;
    if (p->nperm < 0 || max < 1) return 0;
    out[0] = ts_attr_ints("perm", p->perm, p->nperm);
    return 1;
}

static void perm_get(const ts_transpose_attrs *p, int rank, int *perm)
{
    for (int i = 0; i < rank; i++) perm[i] = p->nperm >= 0 ? (int)p->perm[i] : rank - 1 - i;
}

static ts_status transpose_infer(ts_infer_ctx *c)
{
    const ts_transpose_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int r = x->shape.rank, perm[TS_MAX_RANK];
    bool seen[TS_MAX_RANK] = {0};
    if (p->nperm >= 0) {
        if (p->nperm != r) return ts_infer_fail(c, "perm has %d entries, expected %d (the input rank)", p->nperm, r);
        for (int i = 0; i < r; i++)
            if (p->perm[i] < 0 || p->perm[i] >= r || seen[p->perm[i]])
                return ts_infer_fail(c, "perm is not a permutation of 0..%d (entry %d is %lld)", r - 1, i,
                                     (long long)p->perm[i]);
            else
                seen[p->perm[i]] = true;
    }
    perm_get(p, r, perm);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = x->shape;
    for (int i = 0; i < r; i++) c->out_shape[0].dims[i] = x->shape.dims[perm[i]];
    return TS_OK;
}

static ts_status transpose_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    size_t elem = ts_dtype_size(y->dtype);
    int r = x->shape.rank, perm[TS_MAX_RANK];
    int64_t xs[TS_MAX_RANK], st[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, off = 0, n = ts_tensor_numel(y);
    perm_get(k->attrs, r, perm);
    ts_shape_strides(&x->shape, xs);
    for (int i = 0; i < r; i++) st[i] = xs[perm[i]]; /* input stride of output axis i */
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

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

const ts_op_desc ts_op_transpose = {.opset_min = 1, 
    .name = "Transpose", .attr_size = sizeof(ts_transpose_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1, .parse = transpose_parse,
    .emit = transpose_emit, .infer = transpose_infer, .kernel = transpose_kernel, .flops = no_flops,
};
