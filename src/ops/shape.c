/* Shape, Size and ConstantOfShape: computations on shapes.  Both are exact in
 * every domain (their outputs are integers or constants). */
#include <string.h>
#include "ops/op.h"

/* --------------------------------------------------------------- Shape */

typedef struct shape_attrs {
    int64_t start, end;
    bool has_end;
} shape_attrs;

static ts_status shape_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    shape_attrs *p = attrs;
    (void)opset;
    p->has_end = ts_attr_find(a, na, "end") != NULL;
    if (ts_attr_get_int(a, na, "start", 0, &p->start, err) || ts_attr_get_int(a, na, "end", 0, &p->end, err))
        return err->code;
    return TS_OK;
}

static int shape_emit(const void *attrs, ts_attr *out, int max)
{
    const shape_attrs *p = attrs;
    int n = 0;
    if (p->start && n < max) out[n++] = ts_attr_int("start", p->start);
    if (p->has_end && n < max) out[n++] = ts_attr_int("end", p->end);
    return n;
}

/* ONNX: negative counts from the back, then clamp to [0, rank]. */
static void shape_range(const shape_attrs *p, int r, int64_t *s, int64_t *e)
{
    int64_t a = p->start, b = p->has_end ? p->end : r;
    if (a < 0) a += r;
    if (b < 0) b += r;
    *s = a < 0 ? 0 : a > r ? r : a;
    *e = b < 0 ? 0 : b > r ? r : b;
    if (*e < *s) *e = *s;
}

static ts_status shape_infer(ts_infer_ctx *c)
{
    int64_t s, e;
    shape_range(c->attrs, c->in[0]->shape.rank, &s, &e);
    int64_t n = e - s;
    c->out_dtype[0] = TS_I64;
    c->out_shape[0] = ts_shape_make(1, &n);
    return TS_OK;
}

static ts_status shape_kernel(ts_kernel_ctx *k)
{
    int64_t s, e;
    shape_range(k->attrs, k->in[0]->shape.rank, &s, &e);
    for (int64_t i = s; i < e; i++) ((int64_t *)k->out[0]->data)[i - s] = k->in[0]->shape.dims[i];
    return TS_OK;
}

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

const ts_op_desc ts_op_shape = {.opset_min = 1, 
    .name = "Shape", .attr_size = sizeof(shape_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_SHAPE | TS_OP_SHAPE_ONLY, .parse = shape_parse, .emit = shape_emit,
    .infer = shape_infer, .kernel = shape_kernel, .flops = no_flops,
};

/* ------------------------------------------------------ ConstantOfShape */

/* The 'value' attribute is a one-element tensor; it is kept as plain data
 * (dtype and value) so that attributes stay memcpy-able. */
typedef struct cos_attrs {
    ts_dtype dtype;
    double fval;
    int64_t ival;
} cos_attrs;

static ts_status cos_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    cos_attrs *p = attrs;
    const ts_attr *v = ts_attr_find(a, na, "value");
    (void)opset;
    p->dtype = TS_F32;
    if (!v) return TS_OK;
    if (v->kind != TS_ATTR_TENSOR || !v->t) return ts_attr_fail(err, v, "expected a tensor");
    if (ts_tensor_numel(v->t) != 1) return ts_attr_fail(err, v, "expected a tensor of one element");
    if (v->t->dtype == TS_MODP || v->t->dtype == TS_UNDEFINED || v->t->dtype >= TS_DTYPE_COUNT)
        return ts_attr_fail(err, v, "unsupported element type");
    p->dtype = v->t->dtype;
    if (ts_dtype_is_float(p->dtype))
        p->fval = ts_tensor_get_f64(v->t, 0);
    else
        p->ival = ts_tensor_get_i64(v->t, 0);
    return TS_OK;
}

static int cos_emit(const void *attrs, ts_attr *out, int max)
{
    const cos_attrs *p = attrs;
    if (max < 1) return 0;
    /* int64 values beyond 2^53 do not survive a double: write them directly */
    ts_attr_set_scalar_tensor(&out[0], "value", p->dtype, ts_dtype_is_float(p->dtype) ? p->fval : (double)p->ival);
    if (p->dtype == TS_I64) out[0].scalar_data.i64 = p->ival;
    return 1;
}

static ts_status cos_infer(ts_infer_ctx *c)
{
    const cos_attrs *p = c->attrs;
    int64_t dims[TS_MAX_RANK];
    int n;
    if (c->in[0]->shape.rank != 1) return ts_infer_fail(c, "shape input must be 1-D");
    if (ts_infer_const_ints(c, 0, dims, TS_MAX_RANK, &n)) return c->err->code;
    for (int i = 0; i < n; i++)
        if (dims[i] < 0) return ts_infer_fail(c, "shape entry %d is negative (%lld)", i, (long long)dims[i]);
    c->out_dtype[0] = p->dtype;
    c->out_shape[0] = ts_shape_make(n, dims);
    return TS_OK;
}

static ts_status cos_kernel(ts_kernel_ctx *k)
{
    const cos_attrs *p = k->attrs;
    ts_tensor *y = k->out[0];
    size_t elem = ts_dtype_size(y->dtype);
    int64_t n = ts_tensor_numel(y);
    unsigned char v[16] = {0};
    if (!n) return TS_OK;
    if (ts_dtype_is_float(p->dtype)) /* float outputs live in the domain's storage */
        k->num->from_f64(v, p->fval);
    else {
        ts_tensor one = {.dtype = y->dtype, .data = v, .nbytes = elem};
        if (y->dtype == TS_I64)
            memcpy(v, &p->ival, sizeof p->ival);
        else
            ts_tensor_set_f64(&one, 0, (double)p->ival);
    }
    for (int64_t i = 0; i < n; i++) memcpy((char *)y->data + (size_t)i * elem, v, elem);
    return TS_OK;
}

const ts_op_desc ts_op_constant_of_shape = {.opset_min = 9, 
    .name = "ConstantOfShape", .attr_size = sizeof(cos_attrs), .min_inputs = 1, .max_inputs = 1,
    .min_outputs = 1, .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_SHAPE, .parse = cos_parse, .emit = cos_emit,
    .infer = cos_infer, .kernel = cos_kernel, .flops = no_flops,
};

/* ---------------------------------------------------------------- Size */

/* The input's element count as an int64 scalar: reads only the shape. */
static ts_status size_infer(ts_infer_ctx *c)
{
    c->out_dtype[0] = TS_I64;
    c->out_shape[0] = (ts_shape){0};
    return TS_OK;
}

static ts_status size_kernel(ts_kernel_ctx *k)
{
    ((int64_t *)k->out[0]->data)[0] = ts_tensor_numel(k->in[0]);
    return TS_OK;
}

const ts_op_desc ts_op_size = {.opset_min = 1, 
    .name = "Size", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_EXACT | TS_OP_SHAPE | TS_OP_SHAPE_ONLY, .infer = size_infer, .kernel = size_kernel,
    .flops = no_flops,
};
