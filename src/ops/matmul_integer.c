/* Integer matrix products of quantized models: MatMulInteger (int32 sums
 * of (a - a_zero_point) * (b - b_zero_point), zero points per tensor, per
 * row of A or per column of B) and QLinearMatMul (the same sums scaled by
 * a_scale * b_scale / y_scale, rounded half to even, plus y_zero_point,
 * saturated to uint8/int8).  Batch dimensions broadcast as MatMul's; 1-D
 * operands are promoted and the added dimension dropped. */
#include <math.h>
#include <stdlib.h>
#include "ops/elementwise.h"

static bool is_8bit(ts_dtype t) { return t == TS_U8 || t == TS_I8; }

/* Output shape of a MatMul of a and b (numpy rules); false if they do not fit. */
static bool matmul_shape(const ts_shape *a, const ts_shape *b, ts_shape *o)
{
    if (a->rank < 1 || b->rank < 1) return false;
    ts_shape A = *a, B = *b;
    if (A.rank == 1) A = ts_shape_make(2, (int64_t[]){1, a->dims[0]});
    if (B.rank == 1) B = ts_shape_make(2, (int64_t[]){b->dims[0], 1});
    if (A.dims[A.rank - 1] != B.dims[B.rank - 2]) return false;
    ts_shape ba = {.rank = A.rank - 2}, bb = {.rank = B.rank - 2};
    for (int d = 0; d < ba.rank; d++) ba.dims[d] = A.dims[d];
    for (int d = 0; d < bb.rank; d++) bb.dims[d] = B.dims[d];
    if (!ts_shape_broadcast(&ba, &bb, o) || o->rank + 2 > TS_MAX_RANK) return false;
    if (a->rank > 1) o->dims[o->rank++] = A.dims[A.rank - 2];
    if (b->rank > 1) o->dims[o->rank++] = B.dims[B.rank - 1];
    return true;
}

/* Zero point of a row (A) or column (B): per tensor or per index. */
static int64_t zp_at(const ts_tensor *z, int64_t i)
{
    if (!z) return 0;
    return ts_tensor_get_i64(z, ts_tensor_numel(z) == 1 ? 0 : i);
}

/* acc[batch, m, n] = sum_k (a - za) (b - zb), over the broadcast batch. */
static void int_matmul(const ts_tensor *a, const ts_tensor *za, const ts_tensor *b, const ts_tensor *zb,
                       const ts_shape *out, int64_t *acc)
{
    int ra = a->shape.rank, rb = b->shape.rank;
    int64_t M = ra > 1 ? a->shape.dims[ra - 2] : 1, K = a->shape.dims[ra - 1], N = rb > 1 ? b->shape.dims[rb - 1] : 1;
    ts_shape batch = *out, sa = {.rank = ra > 2 ? ra - 2 : 0}, sb = {.rank = rb > 2 ? rb - 2 : 0};
    batch.rank -= (ra > 1) + (rb > 1);
    for (int d = 0; d < sa.rank; d++) sa.dims[d] = a->shape.dims[d];
    for (int d = 0; d < sb.rank; d++) sb.dims[d] = b->shape.dims[d];
    const ts_shape *shapes[2] = {&sa, &sb};
    bcast_iter it;
    bcast_init(&it, &batch, shapes, 2);
    for (int64_t bi = 0, nb = ts_shape_numel(&batch); bi < nb; bi++, bcast_next(&it)) {
        int64_t ao = it.off[0] * M * K, bo = it.off[1] * K * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                int64_t s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (ts_tensor_get_i64(a, ao + m * K + k) - zp_at(za, m)) *
                         (ts_tensor_get_i64(b, bo + k * N + n) - zp_at(zb, n));
                acc[(bi * M + m) * N + n] = s;
            }
    }
}

static ts_status check_zp(ts_infer_ctx *c, int i, ts_dtype like, int64_t len)
{
    const ts_value *z = c->nin > i ? c->in[i] : NULL;
    if (!z) return TS_OK;
    int64_t n = ts_shape_numel(&z->shape);
    if (z->dtype != like) return ts_infer_fail(c, "zero point '%s' is %s, its operand %s", z->name, ts_dtype_name(z->dtype), ts_dtype_name(like));
    if (n != 1 && (z->shape.rank != 1 || n != len))
        return ts_infer_fail(c, "zero point '%s' must be a scalar or have %lld values", z->name, (long long)len);
    return TS_OK;
}

static ts_status mmi_infer(ts_infer_ctx *c)
{
    const ts_value *a = c->in[0], *b = c->in[1];
    char sa[160], sb[160];
    if (!is_8bit(a->dtype) || !is_8bit(b->dtype)) return ts_infer_fail(c, "A and B must be uint8 or int8");
    if (!matmul_shape(&a->shape, &b->shape, &c->out_shape[0]))
        return ts_infer_fail(c, "shapes %s and %s do not multiply", ts_shape_str(&a->shape, sa, sizeof sa),
                             ts_shape_str(&b->shape, sb, sizeof sb));
    int64_t M = a->shape.rank > 1 ? a->shape.dims[a->shape.rank - 2] : 1, N = b->shape.rank > 1 ? b->shape.dims[b->shape.rank - 1] : 1;
    if (check_zp(c, 2, a->dtype, M) || check_zp(c, 3, b->dtype, N)) return c->err->code;
    c->out_dtype[0] = TS_I32;
    return TS_OK;
}

static ts_status mmi_kernel(ts_kernel_ctx *k)
{
    ts_tensor *y = k->out[0];
    int64_t n = ts_tensor_numel(y);
    int64_t *acc = malloc(sizeof *acc * (size_t)(n + 1));
    if (!acc) return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    int_matmul(k->in[0], k->nin > 2 ? k->in[2] : NULL, k->in[1], k->nin > 3 ? k->in[3] : NULL, &y->shape, acc);
    for (int64_t i = 0; i < n; i++) ((int32_t *)y->data)[i] = (int32_t)acc[i];
    free(acc);
    return TS_OK;
}

/* 2 * output elements * K, as MatMul (A is input 0 of both forms) */
static double mmi_flops(const ts_node *n, const ts_graph *g)
{
    const ts_shape *a = &g->values[n->inputs[0]].shape, *y = &g->values[n->outputs[0]].shape;
    return 2.0 * (double)ts_shape_numel(y) * (double)(a->rank ? a->dims[a->rank - 1] : 1);
}

const ts_op_desc ts_op_matmul_integer = {.opset_min = 10, 
    .name = "MatMulInteger", .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_EXACT, .infer = mmi_infer, .kernel = mmi_kernel, .flops = mmi_flops,
};

/* ------------------------------------------------------- QLinearMatMul */

/* inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point */
static ts_status qmm_infer(ts_infer_ctx *c)
{
    const ts_value *a = c->in[0], *b = c->in[3], *yz = c->in[7];
    char sa[160], sb[160];
    if (!is_8bit(a->dtype) || !is_8bit(b->dtype) || !is_8bit(yz->dtype))
        return ts_infer_fail(c, "a, b and y_zero_point must be uint8 or int8");
    if (c->in[2]->dtype != a->dtype || c->in[5]->dtype != b->dtype) return ts_infer_fail(c, "zero points differ in type from their operands");
    for (int i = 1; i < 6; i += 3)
        if (!ts_dtype_is_float(c->in[i]->dtype)) return ts_infer_fail(c, "scale '%s' must be float", c->in[i]->name);
    if (!ts_dtype_is_float(c->in[6]->dtype)) return ts_infer_fail(c, "y_scale must be float");
    if (ts_shape_numel(&c->in[6]->shape) != 1 || ts_shape_numel(&yz->shape) != 1)
        return ts_infer_fail(c, "y_scale and y_zero_point must be scalars");
    if (!matmul_shape(&a->shape, &b->shape, &c->out_shape[0]))
        return ts_infer_fail(c, "shapes %s and %s do not multiply", ts_shape_str(&a->shape, sa, sizeof sa),
                             ts_shape_str(&b->shape, sb, sizeof sb));
    int64_t M = a->shape.rank > 1 ? a->shape.dims[a->shape.rank - 2] : 1, N = b->shape.rank > 1 ? b->shape.dims[b->shape.rank - 1] : 1;
    if (ts_shape_numel(&c->in[1]->shape) != ts_shape_numel(&c->in[2]->shape) ||
        ts_shape_numel(&c->in[4]->shape) != ts_shape_numel(&c->in[5]->shape))
        return ts_infer_fail(c, "each scale must have its zero point's shape");
    if (check_zp(c, 2, a->dtype, M) || check_zp(c, 5, b->dtype, N)) return c->err->code;
    c->out_dtype[0] = yz->dtype;
    return TS_OK;
}

static ts_status qmm_kernel(ts_kernel_ctx *k)
{
    ts_tensor *y = k->out[0];
    if (need_float_domain(k)) return k->err->code;
    const ts_shape *bsh = &k->in[3]->shape;
    int64_t n = ts_tensor_numel(y), N = bsh->rank > 1 ? bsh->dims[bsh->rank - 1] : 1;
    int64_t M = k->in[0]->shape.rank > 1 ? k->in[0]->shape.dims[k->in[0]->shape.rank - 2] : 1;
    int64_t *acc = malloc(sizeof *acc * (size_t)(n + 1));
    if (!acc) return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    int_matmul(k->in[0], k->in[2], k->in[3], k->in[5], &y->shape, acc);
    const ts_tensor *as = k->in[1], *bs = k->in[4];
    double ys = el_get(k->num, k->in[6], 0), yz = (double)ts_tensor_get_i64(k->in[7], 0);
    for (int64_t i = 0; i < n; i++) {
        int64_t col = i % N, row = (i / N) % M;
        double sa = el_get(k->num, as, ts_tensor_numel(as) == 1 ? 0 : row);
        double sb = el_get(k->num, bs, ts_tensor_numel(bs) == 1 ? 0 : col);
        /* the scale products in float32, as the operator's float scales multiply */
        float scale = (float)sa * (float)sb / (float)ys;
        double v = nearbyint((double)acc[i] * (double)scale) + yz;
        double lo = y->dtype == TS_I8 ? -128 : 0, hi = y->dtype == TS_I8 ? 127 : 255;
        el_set_i64(y, i, (int64_t)(v < lo ? lo : v > hi ? hi : v));
    }
    free(acc);
    return TS_OK;
}

const ts_op_desc ts_op_qlinear_matmul = {.opset_min = 10, 
    .name = "QLinearMatMul", .min_inputs = 8, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
    .infer = qmm_infer, .kernel = qmm_kernel, .flops = mmi_flops,
};
