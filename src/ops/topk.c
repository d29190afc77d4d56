/* TopK: the k largest (largest=1) or smallest elements along an axis, with
 * their int64 indices, sorted (ties: the smaller index first, as ONNX's
 * reference and ONNX Runtime order them).  k is an attribute before opset
 * 10, then a 1-element int64 input that sets the output shape, so it must
 * be known when the graph is built. */
#include <math.h>
#include <stdlib.h>
#include "ops/elementwise.h"

typedef struct topk_attrs {
    int64_t axis, k; /* k: opset < 10 only */
    int largest, sorted;
} topk_attrs;

static ts_status topk_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    topk_attrs *p = attrs;
    int64_t l, s;
    if (ts_attr_get_int(a, na, "axis", -1, &p->axis, err) || ts_attr_get_int(a, na, "largest", 1, &l, err) ||
        ts_attr_get_int(a, na, "sorted", 1, &s, err) || ts_attr_get_int(a, na, "k", -1, &p->k, err))
        return err->code;
    if (opset < 10 && p->k < 0) return ts_error_set(err, TS_ERR_INVALID, "attribute 'k' is required before opset 10");
    p->largest = l != 0;
    p->sorted = s != 0;
    return TS_OK;
}

static int topk_emit(const void *attrs, ts_attr *out, int max)
{
    const topk_attrs *p = attrs;
    int n = 0;
    if (max < 4) return 0;
    out[n++] = ts_attr_int("axis", p->axis);
    if (p->k >= 0) out[n++] = ts_attr_int("k", p->k);
    if (!p->largest) out[n++] = ts_attr_int("largest", 0);
    if (!p->sorted) out[n++] = ts_attr_int("sorted", 0);
    return n;
}

static ts_status topk_infer(ts_infer_ctx *c)
{
    const topk_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int axis, n;
    int64_t k = p->k;
    if (!ts_dtype_is_float(x->dtype) && !dtype_is_int(x->dtype))
        return ts_infer_fail(c, "input '%s' has type %s, expected a number type", x->name, ts_dtype_name(x->dtype));
    if (!ts_axis_norm(p->axis, x->shape.rank, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for rank %d", (long long)p->axis, x->shape.rank);
    if (c->nin > 1 && c->in[1] && ts_infer_const_ints(c, 1, &k, 1, &n)) return c->err->code;
    if (k < 0 || k > x->shape.dims[axis])
        return ts_infer_fail(c, "k = %lld is outside [0, %lld]", (long long)k, (long long)x->shape.dims[axis]);
    ts_shape o = x->shape;
    o.dims[axis] = k;
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = o;
    c->out_dtype[1] = TS_I64;
    c->out_shape[1] = o;
    return TS_OK;
}

typedef struct item {
    double v;
    int64_t i;
} item;

/* -1, 0, 1 as a < b, with NaN above every number (a total order qsort
 * can rely on) */
static int cmp_v(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    return (a > b) - (a < b);
}

static int by_largest(const void *a, const void *b)
{
    const item *x = a, *y = b;
    int c = cmp_v(y->v, x->v);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int by_smallest(const void *a, const void *b)
{
    const item *x = a, *y = b;
    int c = cmp_v(x->v, y->v);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

static ts_status topk_kernel(ts_kernel_ctx *k)
{
    const topk_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    ts_tensor *vals = k->out[0];
    int64_t *idx = k->out[1]->data;
    bool ints = dtype_is_int(x->dtype);
    int axis;
    if (!ints && need_float_domain(k)) return k->err->code;
    ts_axis_norm(p->axis, x->shape.rank, &axis);
    int64_t outer = 1, n = x->shape.dims[axis], inner = 1, kk = vals->shape.dims[axis];
    for (int d = 0; d < axis; d++) outer *= x->shape.dims[d];
    for (int d = axis + 1; d < x->shape.rank; d++) inner *= x->shape.dims[d];
    item *row = malloc(sizeof *row * (size_t)(n + 1));
    if (!row) return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in;
            for (int64_t j = 0; j < n; j++) {
                int64_t at = base + j * inner;
                row[j] = (item){ints ? (double)ts_tensor_get_i64(x, at) : el_get(k->num, x, at), j};
            }
            qsort(row, (size_t)n, sizeof *row, p->largest ? by_largest : by_smallest);
            for (int64_t j = 0; j < kk; j++) {
                int64_t src = base + row[j].i * inner, dst = o * kk * inner + j * inner + in;
                if (ints)
                    el_set_i64(vals, dst, ts_tensor_get_i64(x, src));
                else
                    el_set(k->num, vals, dst, el_get(k->num, x, src));
                idx[dst] = row[j].i;
            }
        }
    free(row);
    return TS_OK;
}

const ts_op_desc ts_op_topk = {.opset_min = 1, 
    .name = "TopK", .attr_size = sizeof(topk_attrs), .min_inputs = 1, .max_inputs = 2, .min_outputs = 2,
    .max_outputs = 2, .parse = topk_parse, .emit = topk_emit, .infer = topk_infer, .kernel = topk_kernel,
};
