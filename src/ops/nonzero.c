/* Operators whose output shape is the count of something in their input
 * data: NonZero (indices of the non-zero elements, [rank, count] int64)
 * and Compress (the slices along `axis`, or elements of the flattened
 * input, whose condition is true).  The count must be known when the
 * graph is built, so the data it depends on must be constant there (a
 * session loads the model at the run's values); the kernels check that
 * the data they are given yields the same count. */
#include <string.h>
#include "ops/elementwise.h"

/* Element i as a double: graph constants hold their declared dtype,
 * kernel tensors float data in the domain's storage. */
static double value_at(const ts_num *num, const ts_tensor *t, int64_t i)
{
    return num ? el_get(num, t, i) : ts_tensor_get_f64(t, i);
}

/* ------------------------------------------------------------- NonZero */

static int64_t count_nonzero(const ts_num *num, const ts_tensor *t)
{
    int64_t n = ts_tensor_numel(t), c = 0;
    for (int64_t i = 0; i < n; i++) c += value_at(num, t, i) != 0;
    return c;
}

static ts_status nonzero_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0];
    if (x->shape.rank < 1) return ts_infer_fail(c, "input '%s' is a scalar", x->name);
    const ts_tensor *t = ts_infer_const_tensor(c, 0);
    if (!t) return c->err->code;
    c->out_dtype[0] = TS_I64;
    c->out_shape[0] = ts_shape_make(2, (int64_t[]){x->shape.rank, count_nonzero(NULL, t)});
    return TS_OK;
}

static ts_status nonzero_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0];
    bool flt = x->dtype == k->num->storage;
    if (flt && need_float_domain(k)) return k->err->code;
    const ts_num *num = flt ? k->num : NULL;
    int64_t cnt = k->out[0]->shape.dims[1], n = ts_tensor_numel(x), j = 0, idx[TS_MAX_RANK] = {0};
    if (count_nonzero(num, x) != cnt)
        return ts_kernel_fail(k, TS_ERR_INVALID, "%lld non-zero elements, the graph was built for %lld",
                              (long long)count_nonzero(num, x), (long long)cnt);
    int64_t *y = k->out[0]->data;
    for (int64_t i = 0; i < n; i++) {
        if (value_at(num, x, i) != 0) {
            for (int d = 0; d < x->shape.rank; d++) y[d * cnt + j] = idx[d];
            j++;
        }
        for (int d = x->shape.rank - 1; d >= 0; d--) {
            if (++idx[d] < x->shape.dims[d]) break;
            idx[d] = 0;
        }
    }
    return TS_OK;
}

const ts_op_desc ts_op_nonzero = {.opset_min = 9, 
    .name = "NonZero", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .flags = TS_OP_EXACT,
    .infer = nonzero_infer, .kernel = nonzero_kernel,
};

/* ------------------------------------------------------------ Compress */

typedef struct compress_attrs {
    int64_t axis;
    bool has_axis;
} compress_attrs;

static ts_status compress_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    compress_attrs *p = attrs;
    (void)opset;
    p->has_axis = ts_attr_find(a, na, "axis") != NULL;
    return ts_attr_get_int(a, na, "axis", 0, &p->axis, err);
}

static int compress_emit(const void *attrs, ts_attr *out, int max)
{
    const compress_attrs *p = attrs;
    if (max < 1 || !p->has_axis) return 0;
    out[0] = ts_attr_int("axis", p->axis);
    return 1;
}

/* Selected slices among the first `len` (the axis length). */
static int64_t count_true(const ts_tensor *cond, int64_t len)
{
    int64_t n = ts_tensor_numel(cond), c = 0;
    for (int64_t i = 0; i < n && i < len; i++) c += ts_tensor_get_i64(cond, i) != 0;
    return c;
}

static ts_status compress_infer(ts_infer_ctx *c)
{
    const compress_attrs *p = c->attrs;
    const ts_value *x = c->in[0], *cv = c->in[1];
    int axis = 0;
    if (cv->dtype != TS_BOOL || cv->shape.rank != 1) return ts_infer_fail(c, "condition ('%s') must be a 1-D bool tensor", cv->name);
    if (p->has_axis && !ts_axis_norm(p->axis, x->shape.rank, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for rank %d", (long long)p->axis, x->shape.rank);
    const ts_tensor *cond = ts_infer_const_tensor(c, 1);
    if (!cond) return c->err->code;
    int64_t len = p->has_axis ? x->shape.dims[axis] : ts_shape_numel(&x->shape);
    ts_shape o = x->shape;
    if (!p->has_axis) o = ts_shape_make(1, (int64_t[]){0});
    o.dims[axis] = count_true(cond, len);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = o;
    return TS_OK;
}

static ts_status compress_kernel(ts_kernel_ctx *k)
{
    const compress_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0], *cond = k->in[1];
    int axis = 0;
    if (p->has_axis) ts_axis_norm(p->axis, x->shape.rank, &axis);
    int64_t len = p->has_axis ? x->shape.dims[axis] : ts_tensor_numel(x), outer = 1, inner = 1;
    if (p->has_axis) {
        for (int d = 0; d < axis; d++) outer *= x->shape.dims[d];
        for (int d = axis + 1; d < x->shape.rank; d++) inner *= x->shape.dims[d];
    }
    int64_t sel = count_true(cond, len);
    if (sel != (p->has_axis ? k->out[0]->shape.dims[axis] : k->out[0]->shape.dims[0]))
        return ts_kernel_fail(k, TS_ERR_INVALID, "condition selects %lld slices, the graph was built for another count",
                              (long long)sel);
    size_t es = ts_dtype_size(x->dtype), row = (size_t)inner * es;
    char *y = k->out[0]->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < len && i < ts_tensor_numel(cond); i++)
            if (ts_tensor_get_i64(cond, i)) {
                memcpy(y, (const char *)x->data + (size_t)(o * len + i) * row, row);
                y += row;
            }
    return TS_OK;
}

const ts_op_desc ts_op_compress = {.opset_min = 9, 
    .name = "Compress", .attr_size = sizeof(compress_attrs), .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT, .parse = compress_parse, .emit = compress_emit, .infer = compress_infer,
    .kernel = compress_kernel,
};
