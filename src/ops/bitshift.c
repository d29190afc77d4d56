/* BitShift (opset 11): x << y or x >> y on unsigned integers, broadcast;
 * bits shifted past the type's width are lost (a shift by the width or
 * more gives 0).  Exact: integers only. */
#include <string.h>
#include "ops/elementwise.h"

typedef struct bitshift_attrs {
    int left;
} bitshift_attrs;

static ts_status bitshift_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    char dir[16];
    (void)opset;
    if (!ts_attr_find(a, na, "direction")) return ts_error_set(err, TS_ERR_INVALID, "attribute 'direction' is required");
    if (ts_attr_get_string(a, na, "direction", "", dir, sizeof dir, err)) return err->code;
    if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
        return ts_attr_fail(err, ts_attr_find(a, na, "direction"), "expected LEFT or RIGHT");
    ((bitshift_attrs *)attrs)->left = !strcmp(dir, "LEFT");
    return TS_OK;
}

static int bitshift_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_string("direction", ((const bitshift_attrs *)attrs)->left ? "LEFT" : "RIGHT");
    return 1;
}

static ts_status bitshift_infer(ts_infer_ctx *c)
{
    const ts_value *a = c->in[0], *b = c->in[1];
    char sa[160], sb[160];
    ts_dtype t = a->dtype;
    if (t != TS_U8 && t != TS_U16 && t != TS_U32 && t != TS_U64)
        return ts_infer_fail(c, "input '%s' is %s, expected an unsigned integer type", a->name, ts_dtype_name(t));
    if (b->dtype != t) return ts_infer_fail(c, "inputs are %s and %s (they must match)", ts_dtype_name(t), ts_dtype_name(b->dtype));
    if (!ts_shape_broadcast(&a->shape, &b->shape, &c->out_shape[0]))
        return ts_infer_fail(c, "shapes %s and %s do not broadcast", ts_shape_str(&a->shape, sa, sizeof sa),
                             ts_shape_str(&b->shape, sb, sizeof sb));
    c->out_dtype[0] = t;
    return TS_OK;
}

static ts_status bitshift_kernel(ts_kernel_ctx *k)
{
    const bitshift_attrs *p = k->attrs;
    const ts_tensor *a = k->in[0], *b = k->in[1];
    ts_tensor *y = k->out[0];
    const ts_shape *shapes[2] = {&a->shape, &b->shape};
    unsigned bits = (unsigned)ts_dtype_size(y->dtype) * 8;
    bcast_iter it;
    bcast_init(&it, &y->shape, shapes, 2);
    for (int64_t i = 0, n = ts_tensor_numel(y); i < n; i++, bcast_next(&it)) {
        uint64_t x = (uint64_t)ts_tensor_get_i64(a, it.off[0]), s = (uint64_t)ts_tensor_get_i64(b, it.off[1]);
        uint64_t r = s >= bits ? 0 : p->left ? x << s : x >> s;
        el_set_i64(y, i, (int64_t)r); /* narrowed to the type's width */
    }
    return TS_OK;
}

const ts_op_desc ts_op_bitshift = {.opset_min = 11, 
    .name = "BitShift", .attr_size = sizeof(bitshift_attrs), .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_ELEMENTWISE, .parse = bitshift_parse, .emit = bitshift_emit,
    .infer = bitshift_infer, .kernel = bitshift_kernel,
};
