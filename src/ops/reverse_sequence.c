/* ReverseSequence (opset 10): for each batch entry b (along batch_axis),
 * the first sequence_lens[b] elements along time_axis are reversed, the
 * rest copied.  Data movement: exact. */
#include <string.h>
#include "ops/op.h"

typedef struct revseq_attrs {
    int64_t batch_axis, time_axis;
} revseq_attrs;

static ts_status revseq_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    revseq_attrs *p = attrs;
    (void)opset;
    if (ts_attr_get_int(a, na, "batch_axis", 1, &p->batch_axis, err) ||
        ts_attr_get_int(a, na, "time_axis", 0, &p->time_axis, err))
        return err->code;
    if (!((p->batch_axis == 0 && p->time_axis == 1) || (p->batch_axis == 1 && p->time_axis == 0)))
        return ts_error_set(err, TS_ERR_INVALID, "batch_axis and time_axis must be 0 and 1 (in either order)");
    return TS_OK;
}

static int revseq_emit(const void *attrs, ts_attr *out, int max)
{
    const revseq_attrs *p = attrs;
    if (max < 2) return 0;
    out[0] = ts_attr_int("batch_axis", p->batch_axis);
    out[1] = ts_attr_int("time_axis", p->time_axis);
    return 2;
}

static ts_status revseq_infer(ts_infer_ctx *c)
{
    const revseq_attrs *p = c->attrs;
    const ts_value *x = c->in[0], *l = c->in[1];
    if (x->shape.rank < 2) return ts_infer_fail(c, "input '%s' has rank %d, expected at least 2", x->name, x->shape.rank);
    if (l->dtype != TS_I64 || l->shape.rank != 1 || l->shape.dims[0] != x->shape.dims[p->batch_axis])
        return ts_infer_fail(c, "sequence_lens ('%s') must be int64 with one entry per batch", l->name);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = x->shape;
    return TS_OK;
}

static ts_status revseq_kernel(ts_kernel_ctx *k)
{
    const revseq_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0], *l = k->in[1];
    int64_t st[TS_MAX_RANK], inner = 1;
    ts_shape_strides(&x->shape, st);
    for (int d = 2; d < x->shape.rank; d++) inner *= x->shape.dims[d];
    size_t es = ts_dtype_size(x->dtype);
    int64_t nb = x->shape.dims[p->batch_axis], nt = x->shape.dims[p->time_axis];
    for (int64_t b = 0; b < nb; b++) {
        int64_t len = ts_tensor_get_i64(l, b);
        if (len < 0 || len > nt)
            return ts_kernel_fail(k, TS_ERR_INVALID, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                                  (long long)len, (long long)nt);
        for (int64_t t = 0; t < nt; t++) {
            int64_t src = t < len ? len - 1 - t : t;
            int64_t to = b * st[p->batch_axis] + t * st[p->time_axis], from = b * st[p->batch_axis] + src * st[p->time_axis];
            memcpy((char *)k->out[0]->data + (size_t)to * es, (const char *)x->data + (size_t)from * es, (size_t)inner * es);
        }
    }
    return TS_OK;
}

const ts_op_desc ts_op_reverse_sequence = {.opset_min = 10, 
    .name = "ReverseSequence", .attr_size = sizeof(revseq_attrs), .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .parse = revseq_parse, .emit = revseq_emit,
    .infer = revseq_infer, .kernel = revseq_kernel,
};
