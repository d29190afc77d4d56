/* Where(condition, X, Y): selects elements of X or Y by a bool condition,
 * all three broadcast together.  It only moves elements, so it runs in every
 * domain (TS_OP_EXACT). */
#include <string.h>
#include "ops/elementwise.h"

static ts_status where_infer(ts_infer_ctx *c)
{
    const ts_value *cond = c->in[0], *x = c->in[1], *y = c->in[2];
    char a[160], b[160], d[160];
    ts_shape s, r;
    if (cond->dtype != TS_BOOL)
        return ts_infer_fail(c, "condition ('%s') has type %s, expected bool", cond->name, ts_dtype_name(cond->dtype));
    if (x->dtype != y->dtype)
        return ts_infer_fail(c, "X and Y types differ (%s vs %s)", ts_dtype_name(x->dtype), ts_dtype_name(y->dtype));
    if (!ts_shape_broadcast(&cond->shape, &x->shape, &s) || !ts_shape_broadcast(&s, &y->shape, &r))
        return ts_infer_fail(c, "shapes %s, %s and %s do not broadcast", ts_shape_str(&cond->shape, a, sizeof a),
                             ts_shape_str(&x->shape, b, sizeof b), ts_shape_str(&y->shape, d, sizeof d));
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = r;
    return TS_OK;
}

static ts_status where_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *cond = k->in[0], *x = k->in[1], *y = k->in[2];
    ts_tensor *out = k->out[0];
    const ts_shape *shapes[3] = {&cond->shape, &x->shape, &y->shape};
    size_t es = ts_dtype_size(out->dtype);
    int64_t n = ts_tensor_numel(out);
    bcast_iter it;
    bcast_init(&it, &out->shape, shapes, 3);
    for (int64_t i = 0; i < n; i++, bcast_next(&it)) {
        bool take_x = ((const uint8_t *)cond->data)[it.off[0]] != 0;
        const ts_tensor *src = take_x ? x : y;
        memcpy((char *)out->data + (size_t)i * es, (const char *)src->data + (size_t)it.off[take_x ? 1 : 2] * es, es);
    }
    return TS_OK;
}

const ts_op_desc ts_op_where = {.opset_min = 9, 
    .name = "Where", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT, .infer = where_infer, .kernel = where_kernel,
};
