/* Helpers shared by the math family's kernels (binary.c, unary.c,
 * activation.c, where.c, reduce.c, softmax.c): a multidirectional broadcast
 * walker over a few operands, and element access that reads a tensor in the
 * domain's storage (float tensors) or in its own dtype (integers, bool). */
#ifndef TS_OPS_ELEMENTWISE_H
#define TS_OPS_ELEMENTWISE_H

#include "ops/op.h"

#define BCAST_MAX 4

/* Walks an output shape in row-major order keeping, for each operand, the
 * element offset of the broadcast view onto the output. */
typedef struct bcast_iter {
    ts_shape out;
    int n;
    int64_t stride[BCAST_MAX][TS_MAX_RANK];
    int64_t idx[TS_MAX_RANK];
    int64_t off[BCAST_MAX];
} bcast_iter;

static inline void bcast_init(bcast_iter *it, const ts_shape *out, const ts_shape *const *in, int n)
{
    it->out = *out;
    it->n = n;
    for (int j = 0; j < n; j++) {
        ts_shape_bcast_strides(in[j], out, it->stride[j]);
        it->off[j] = 0;
    }
    for (int d = 0; d < TS_MAX_RANK; d++) it->idx[d] = 0;
}

static inline void bcast_next(bcast_iter *it)
{
    for (int d = it->out.rank - 1; d >= 0; d--) { /* odometer increment */
        for (int j = 0; j < it->n; j++) it->off[j] += it->stride[j][d];
        if (++it->idx[d] < it->out.dims[d]) return;
        for (int j = 0; j < it->n; j++) it->off[j] -= it->stride[j][d] * it->out.dims[d];
        it->idx[d] = 0;
    }
}

static inline bool dtype_is_int(ts_dtype t)
{
    return t == TS_I64 || t == TS_I32 || t == TS_I8 || t == TS_U8 || t == TS_I16 || t == TS_U16 || t == TS_U32 ||
           t == TS_U64;
}

/* Float tensors arrive in the domain's storage; everything else keeps its dtype. */
static inline double el_get(const ts_num *num, const ts_tensor *t, int64_t i)
{
    return t->dtype == num->storage ? num->to_f64(ts_num_cat(num, t->data, i)) : ts_tensor_get_f64(t, i);
}

static inline void el_set(const ts_num *num, ts_tensor *t, int64_t i, double v)
{
    if (t->dtype == num->storage)
        num->from_f64(ts_num_at(num, t->data, i), v);
    else
        ts_tensor_set_f64(t, i, v);
}

/* Writes an int64 result into an integer tensor of any width (wraps like C). */
static inline void el_set_i64(ts_tensor *t, int64_t i, int64_t v)
{
    switch (t->dtype) {
    case TS_I64: ((int64_t *)t->data)[i] = v; break;
    case TS_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case TS_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case TS_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case TS_I16: ((int16_t *)t->data)[i] = (int16_t)v; break;
    case TS_U16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
    case TS_U32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
    case TS_U64: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
    case TS_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    default: break;
    }
}

/* Checks that a float-typed tensor is in the domain's storage: a kernel
 * written through to_f64/from_f64 must not run on mod-p residues. */
static inline ts_status need_float_domain(ts_kernel_ctx *k)
{
    if (k->num->exact)
        return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "operator has no kernel in the %s domain", k->num->name);
    return TS_OK;
}

#endif
