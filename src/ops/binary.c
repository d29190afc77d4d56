/* Element-wise binary operators with NumPy (multidirectional) broadcasting.
 * Add/Sub/Mul are polynomial and so run in every number domain. */
#include "ops/op.h"

typedef void (*scalar_fn)(const ts_num *num, void *d, const void *a, const void *b);

static ts_status infer_broadcast(ts_infer_ctx *c)
{
    const ts_value *a = c->in[0], *b = c->in[1];
    char sa[160], sb[160];
    if (a->dtype != b->dtype)
        return ts_infer_fail(c, "input types differ (%s vs %s)", ts_dtype_name(a->dtype), ts_dtype_name(b->dtype));
    if (!ts_shape_broadcast(&a->shape, &b->shape, &c->out_shape[0]))
        return ts_infer_fail(c, "shapes %s and %s do not broadcast", ts_shape_str(&a->shape, sa, sizeof sa),
                             ts_shape_str(&b->shape, sb, sizeof sb));
    c->out_dtype[0] = a->dtype;
    return TS_OK;
}

/* Walks the output in row-major order with broadcast strides per input. */
static void broadcast_apply(ts_kernel_ctx *k, size_t elem, void (*fn)(ts_kernel_ctx *, void *, const void *, const void *))
{
    const ts_tensor *a = k->in[0], *b = k->in[1];
    ts_tensor *y = k->out[0];
    int64_t sa[TS_MAX_RANK], sb[TS_MAX_RANK], idx[TS_MAX_RANK] = {0};
    ts_shape_bcast_strides(&a->shape, &y->shape, sa);
    ts_shape_bcast_strides(&b->shape, &y->shape, sb);
    int64_t n = ts_shape_numel(&y->shape), ia = 0, ib = 0;
    int r = y->shape.rank;
    for (int64_t i = 0; i < n; i++) {
        fn(k, (char *)y->data + (size_t)i * elem, (const char *)a->data + (size_t)ia * elem,
           (const char *)b->data + (size_t)ib * elem);
        for (int d = r - 1; d >= 0; d--) { /* odometer increment */
            ia += sa[d];
            ib += sb[d];
            if (++idx[d] < y->shape.dims[d]) break;
            ia -= sa[d] * y->shape.dims[d];
            ib -= sb[d] * y->shape.dims[d];
            idx[d] = 0;
        }
    }
}

/* Integer tensors (shape arithmetic) are computed in int64 whatever the
 * domain; float tensors through the domain. */
#define INT_OR_NUM(NAME, EXPR, NUMOP)                                                              \
    static void NAME##_el(ts_kernel_ctx *k, void *d, const void *a, const void *b)                \
    {                                                                                              \
        if (k->out[0]->dtype == TS_I64) {                                                          \
            int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;                              \
            *(int64_t *)d = EXPR;                                                                  \
        } else if (k->out[0]->dtype == TS_I32) {                                                   \
            int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;                              \
            *(int32_t *)d = EXPR;                                                                  \
        } else                                                                                     \
            k->num->NUMOP(d, a, b);                                                                \
    }                                                                                              \
    static ts_status NAME##_kernel(ts_kernel_ctx *k)                                               \
    {                                                                                              \
        if (k->out[0]->dtype != TS_I64 && k->out[0]->dtype != TS_I32 && k->out[0]->dtype != k->num->storage) \
            return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "dtype %s not supported",                 \
                                  ts_dtype_name(k->out[0]->dtype));                                \
        broadcast_apply(k, ts_dtype_size(k->out[0]->dtype), NAME##_el);                            \
        return TS_OK;                                                                              \
    }

INT_OR_NUM(add, x + y, add)
INT_OR_NUM(sub, x - y, sub)
INT_OR_NUM(mul, x * y, mul)

static double binary_flops(const ts_node *n, const ts_graph *g)
{
    return (double)ts_shape_numel(&g->values[n->outputs[0]].shape);
}

const ts_op_desc ts_op_add = {
    .name = "Add", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT, .linear_inputs = 0, /* affine in each, linear in neither alone */
    .expr = "L[i] A[i] + B[i]", .infer = infer_broadcast, .kernel = add_kernel, .flops = binary_flops,
};
const ts_op_desc ts_op_sub = {
    .name = "Sub", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT, .expr = "L[i] A[i] - B[i]",
    .infer = infer_broadcast, .kernel = sub_kernel, .flops = binary_flops,
};
const ts_op_desc ts_op_mul = {
    .name = "Mul", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT, .linear_inputs = 0x3, .expr = "L[i] A[i] * B[i]",
    .infer = infer_broadcast, .kernel = mul_kernel, .flops = binary_flops,
};
