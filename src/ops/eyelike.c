/* EyeLike: a 2-D tensor shaped like the input with ones on diagonal k
 * (k > 0 above the main one) and zeros elsewhere, of the attribute dtype
 * (an ONNX type code) or the input's.  Only the input's shape is read. */
#include "ops/elementwise.h"

typedef struct eyelike_attrs {
    int64_t k, onnx_dtype; /* 0: the input's */
} eyelike_attrs;


static ts_status eye_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    eyelike_attrs *p = attrs;
    (void)opset;
    if (ts_attr_get_int(a, na, "k", 0, &p->k, err) || ts_attr_get_int(a, na, "dtype", 0, &p->onnx_dtype, err))
        return err->code;
    if (p->onnx_dtype && ts_dtype_from_onnx(p->onnx_dtype) == TS_UNDEFINED)
        return ts_attr_fail(err, ts_attr_find(a, na, "dtype"), "element type not supported");
    return TS_OK;
}

static int eye_emit(const void *attrs, ts_attr *out, int max)
{
    const eyelike_attrs *p = attrs;
    int n = 0;
    if (max < 2) return 0;
    out[n++] = ts_attr_int("k", p->k);
    if (p->onnx_dtype) out[n++] = ts_attr_int("dtype", p->onnx_dtype);
    return n;
}

static ts_status eye_infer(ts_infer_ctx *c)
{
    const eyelike_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    if (x->shape.rank != 2) return ts_infer_fail(c, "input '%s' has rank %d, expected 2", x->name, x->shape.rank);
    c->out_dtype[0] = p->onnx_dtype ? ts_dtype_from_onnx(p->onnx_dtype) : x->dtype;
    c->out_shape[0] = x->shape;
    return TS_OK;
}

static ts_status eye_kernel(ts_kernel_ctx *k)
{
    const eyelike_attrs *p = k->attrs;
    ts_tensor *y = k->out[0];
    int64_t rows = y->shape.dims[0], cols = y->shape.dims[1];
    for (int64_t i = 0; i < rows; i++) {
        int64_t j = i + p->k;
        if (j < 0 || j >= cols) continue;
        if (y->dtype == k->num->storage)
            k->num->one(ts_num_at(k->num, y->data, i * cols + j));
        else
            el_set_i64(y, i * cols + j, 1);
    }
    return TS_OK;
}

const ts_op_desc ts_op_eyelike = {.opset_min = 9, 
    .name = "EyeLike", .attr_size = sizeof(eyelike_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_SHAPE_ONLY, .parse = eye_parse, .emit = eye_emit,
    .infer = eye_infer, .kernel = eye_kernel,
};
