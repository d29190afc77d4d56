/* ScatterElements (and Scatter, its opset 9-10 name) and ScatterND: a copy
 * of data with the elements that indices address replaced by (or, with
 * reduction add/mul, combined with) updates.  Indices are int64 or int32,
 * negative ones count from the end; out-of-range ones are an error at run
 * time.  Updates are applied in order, so with duplicate indices and no
 * reduction the last one wins (ONNX leaves that order open; its reference
 * applies them in order too).  Without reduction these move data only:
 * exact in every domain. */
#include <string.h>
#include "ops/elementwise.h"

enum { RED_NONE, RED_ADD, RED_MUL };

typedef struct scatter_attrs {
    int64_t axis;
    int reduction;
} scatter_attrs;

static ts_status scatter_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    scatter_attrs *p = attrs;
    char r[16];
    (void)opset;
    if (ts_attr_get_int(a, na, "axis", 0, &p->axis, err) ||
        ts_attr_get_string(a, na, "reduction", "none", r, sizeof r, err))
        return err->code;
    if (!strcmp(r, "none")) p->reduction = RED_NONE;
    else if (!strcmp(r, "add")) p->reduction = RED_ADD;
    else if (!strcmp(r, "mul")) p->reduction = RED_MUL;
    else return ts_attr_fail(err, ts_attr_find(a, na, "reduction"), "expected none, add or mul");
    return TS_OK;
}

static const char *const RED_NAMES[] = {"none", "add", "mul"};

static int scatter_emit(const void *attrs, ts_attr *out, int max)
{
    const scatter_attrs *p = attrs;
    int n = 0;
    if (max < 2) return 0;
    out[n++] = ts_attr_int("axis", p->axis);
    if (p->reduction) out[n++] = ts_attr_string("reduction", RED_NAMES[p->reduction]);
    return n;
}

static int scatternd_emit(const void *attrs, ts_attr *out, int max)
{
    const scatter_attrs *p = attrs;
    if (max < 1 || !p->reduction) return 0;
    out[0] = ts_attr_string("reduction", RED_NAMES[p->reduction]);
    return 1;
}

static ts_status check_indices(ts_infer_ctx *c)
{
    const ts_value *ix = c->in[1];
    if (ix->dtype != TS_I64 && ix->dtype != TS_I32)
        return ts_infer_fail(c, "indices must be int64 or int32, got %s", ts_dtype_name(ix->dtype));
    if (c->in[2]->dtype != c->in[0]->dtype)
        return ts_infer_fail(c, "updates are %s, data %s", ts_dtype_name(c->in[2]->dtype),
                             ts_dtype_name(c->in[0]->dtype));
    c->out_dtype[0] = c->in[0]->dtype;
    c->out_shape[0] = c->in[0]->shape;
    return TS_OK;
}

static ts_status scatter_infer(ts_infer_ctx *c)
{
    const scatter_attrs *p = c->attrs;
    const ts_value *x = c->in[0], *ix = c->in[1], *up = c->in[2];
    int axis;
    char a[160], b[160];
    if (check_indices(c)) return c->err->code;
    if (ix->shape.rank != x->shape.rank || !ts_shape_eq(&ix->shape, &up->shape))
        return ts_infer_fail(c, "indices %s and updates %s must have one shape, of data's rank %d",
                             ts_shape_str(&ix->shape, a, sizeof a), ts_shape_str(&up->shape, b, sizeof b), x->shape.rank);
    if (!ts_axis_norm(p->axis, x->shape.rank, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for rank %d", (long long)p->axis, x->shape.rank);
    for (int d = 0; d < x->shape.rank; d++)
        if (d != axis && ix->shape.dims[d] > x->shape.dims[d])
            return ts_infer_fail(c, "indices dimension %d (%lld) exceeds data's (%lld)", d, (long long)ix->shape.dims[d],
                                 (long long)x->shape.dims[d]);
    return TS_OK;
}

/* y[dst] = up[src], or combined with it by the reduction. */
static ts_status put(ts_kernel_ctx *k, int red, ts_tensor *y, int64_t dst, const ts_tensor *up, int64_t src)
{
    size_t es = ts_dtype_size(y->dtype);
    if (red == RED_NONE) {
        memcpy((char *)y->data + (size_t)dst * es, (const char *)up->data + (size_t)src * es, es);
        return TS_OK;
    }
    const ts_num *num = k->num;
    if (y->dtype == num->storage) {
        void *d = ts_num_at(num, y->data, dst);
        const void *s = ts_num_cat(num, up->data, src);
        if (red == RED_ADD) num->add(d, d, s);
        else num->mul(d, d, s);
    } else if (dtype_is_int(y->dtype)) {
        int64_t a = ts_tensor_get_i64(y, dst), b = ts_tensor_get_i64(up, src);
        el_set_i64(y, dst, red == RED_ADD ? (int64_t)((uint64_t)a + (uint64_t)b) : (int64_t)((uint64_t)a * (uint64_t)b));
    } else {
        return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "reduction on %s", ts_dtype_name(y->dtype));
    }
    return TS_OK;
}

static ts_status scatter_kernel(ts_kernel_ctx *k)
{
    const scatter_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0], *ix = k->in[1], *up = k->in[2];
    ts_tensor *y = k->out[0];
    int axis, r = x->shape.rank;
    ts_axis_norm(p->axis, r, &axis);
    if (y->nbytes) memcpy(y->data, x->data, y->nbytes);
    int64_t xs[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, n = ts_tensor_numel(ix), dim = x->shape.dims[axis];
    ts_shape_strides(&x->shape, xs);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = ts_tensor_get_i64(ix, i), off = 0;
        if (v < -dim || v >= dim)
            return ts_kernel_fail(k, TS_ERR_INVALID, "index %lld is out of range for axis %d of size %lld",
                                  (long long)v, axis, (long long)dim);
        if (v < 0) v += dim;
        for (int d = 0; d < r; d++) off += (d == axis ? v : idx[d]) * xs[d];
        if (put(k, p->reduction, y, off, up, i)) return k->err->code;
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < ix->shape.dims[d]) break;
            idx[d] = 0;
        }
    }
    return TS_OK;
}

/* ScatterND: indices [..., q] address slices of data's trailing rank - q
 * dimensions; updates = indices.shape[:-1] + data.shape[q:]. */
static ts_status scatternd_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0], *ix = c->in[1], *up = c->in[2];
    if (check_indices(c)) return c->err->code;
    int q = ix->shape.rank ? (int)ix->shape.dims[ix->shape.rank - 1] : -1;
    if (ix->shape.rank < 1 || q > x->shape.rank || q < 0)
        return ts_infer_fail(c, "indices' last dimension (%d) must be at most data's rank %d", q, x->shape.rank);
    ts_shape want = {.rank = ix->shape.rank - 1 + x->shape.rank - q};
    if (want.rank > TS_MAX_RANK) return ts_infer_fail(c, "updates would have rank %d", want.rank);
    for (int d = 0; d < ix->shape.rank - 1; d++) want.dims[d] = ix->shape.dims[d];
    for (int d = q; d < x->shape.rank; d++) want.dims[ix->shape.rank - 1 + d - q] = x->shape.dims[d];
    char a[160], b[160];
    if (!ts_shape_eq(&want, &up->shape))
        return ts_infer_fail(c, "updates have shape %s, expected %s", ts_shape_str(&up->shape, a, sizeof a),
                             ts_shape_str(&want, b, sizeof b));
    return TS_OK;
}

static ts_status scatternd_kernel(ts_kernel_ctx *k)
{
    const scatter_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0], *ix = k->in[1], *up = k->in[2];
    ts_tensor *y = k->out[0];
    if (y->nbytes) memcpy(y->data, x->data, y->nbytes);
    int q = (int)ix->shape.dims[ix->shape.rank - 1];
    int64_t xs[TS_MAX_RANK], slice = 1, nupd = q ? ts_tensor_numel(ix) / q : 1;
    ts_shape_strides(&x->shape, xs);
    for (int d = q; d < x->shape.rank; d++) slice *= x->shape.dims[d];
    for (int64_t u = 0; u < nupd; u++) {
        int64_t off = 0;
        for (int d = 0; d < q; d++) {
            int64_t v = ts_tensor_get_i64(ix, u * q + d), dim = x->shape.dims[d];
            if (v < -dim || v >= dim)
                return ts_kernel_fail(k, TS_ERR_INVALID, "index %lld is out of range for axis %d of size %lld",
                                      (long long)v, d, (long long)dim);
            off += (v < 0 ? v + dim : v) * xs[d];
        }
        for (int64_t e = 0; e < slice; e++)
            if (put(k, p->reduction, y, off + e, up, u * slice + e)) return k->err->code;
    }
    return TS_OK;
}

static ts_status scatternd_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    return scatter_parse(attrs, a, na, opset, err);
}

#define SCATTER(NAME) .name = NAME, .attr_size = sizeof(scatter_attrs), .min_inputs = 3, .max_inputs = 3, \
                      .min_outputs = 1, .max_outputs = 1, .flags = TS_OP_EXACT
const ts_op_desc ts_op_scatter_elements = {.opset_min = 11, SCATTER("ScatterElements"), .parse = scatter_parse,
                                           .emit = scatter_emit, .infer = scatter_infer, .kernel = scatter_kernel};
const ts_op_desc ts_op_scatter = {.opset_min = 9, .opset_max = 10, SCATTER("Scatter"), .parse = scatter_parse,
                                  .emit = scatter_emit, .infer = scatter_infer, .kernel = scatter_kernel};
const ts_op_desc ts_op_scatternd = {.opset_min = 11, SCATTER("ScatterND"), .parse = scatternd_parse,
                                    .emit = scatternd_emit, .infer = scatternd_infer, .kernel = scatternd_kernel};
