/* Trilu: keeps the upper (upper=1, default) or lower triangle of the last
 * two dimensions, shifted by the optional scalar input k (diagonal offset),
 * zeroing the rest.  Pure data movement: exact in every domain.  k is read
 * when the kernel runs, so it need not be a constant. */
#include <string.h>
#include "ops/op.h"

typedef struct trilu_attrs {
    int upper;
} trilu_attrs;

static ts_status trilu_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    int64_t v;
    (void)opset;
    if (ts_attr_get_int(a, na, "upper", 1, &v, err)) return err->code;
    if (v != 0 && v != 1) return ts_attr_fail(err, ts_attr_find(a, na, "upper"), "expected 0 or 1");
    ((trilu_attrs *)attrs)->upper = (int)v;
    return TS_OK;
}

static int trilu_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_int("upper", ((const trilu_attrs *)attrs)->upper);
    return 1;
}

static ts_status trilu_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0], *kv = c->nin > 1 ? c->in[1] : NULL;
    if (x->shape.rank < 2) return ts_infer_fail(c, "input '%s' has rank %d, expected at least 2", x->name, x->shape.rank);
    if (kv && (kv->dtype != TS_I64 || ts_shape_numel(&kv->shape) != 1))
        return ts_infer_fail(c, "k ('%s') must be an int64 scalar", kv->name);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = x->shape;
    return TS_OK;
}

static ts_status trilu_kernel(ts_kernel_ctx *k)
{
    const trilu_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0], *kv = k->nin > 1 ? k->in[1] : NULL;
    int64_t diag = kv ? ts_tensor_get_i64(kv, 0) : 0;
    int r = x->shape.rank;
    int64_t rows = x->shape.dims[r - 2], cols = x->shape.dims[r - 1];
    int64_t mats = rows > 0 && cols > 0 ? ts_tensor_numel(x) / (rows * cols) : 0;
    size_t es = ts_dtype_size(x->dtype);
    /* the output is zeroed: copy only the kept elements */
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                bool keep = p->upper ? j - i >= diag : j - i <= diag;
                size_t at = (size_t)((m * rows + i) * cols + j) * es;
                if (keep) memcpy((char *)k->out[0]->data + at, (const char *)x->data + at, es);
            }
    return TS_OK;
}

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

const ts_op_desc ts_op_trilu = {.opset_min = 14, 
    .name = "Trilu", .attr_size = sizeof(trilu_attrs), .min_inputs = 1, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1, .parse = trilu_parse,
    .emit = trilu_emit, .infer = trilu_infer, .kernel = trilu_kernel, .flops = no_flops,
};
