/* Slice: a strided window of a tensor.  Opset < 10 takes starts/ends/axes
 * as attributes; from opset 10 they are inputs (starts, ends, optional axes,
 * optional steps).  Negative indices count from the end; out-of-range
 * values (INT64_MAX for "to the end") are clamped as ONNX specifies. */
#include <stdio.h>
#include <string.h>
#include "ops/op.h"
#include "ops/attrs.h"

static ts_status slice_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_slice_attrs *p = attrs;
    if (ts_attr_get_ints(a, na, "starts", p->starts, TS_MAX_RANK, &p->nstarts, err) ||
        ts_attr_get_ints(a, na, "ends", p->ends, TS_MAX_RANK, &p->nends, err) ||
        ts_attr_get_ints(a, na, "axes", p->axes, TS_MAX_RANK, &p->naxes, err))
        return err->code;
    if (opset < 10 && (p->nstarts < 0 || p->nends < 0))
        return ts_error_set(err, TS_ERR_INVALID, "attributes 'starts' and 'ends' are required before opset 10");
    return TS_OK;
}

static int slice_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_slice_attrs *p = attrs;
    int n = 0;
    if (p->nstarts >= 0 && n < max) out[n++] = ts_attr_ints("starts", p->starts, p->nstarts);
    if (p->nends >= 0 && n < max) out[n++] = ts_attr_ints("ends", p->ends, p->nends);
    if (p->naxes >= 0 && n < max) out[n++] = ts_attr_ints("axes", p->axes, p->naxes);
    return n;
}

/* Per-axis plan: first index, step and count.  Axes not named keep all. */
typedef struct slice_plan {
    int64_t start[TS_MAX_RANK], step[TS_MAX_RANK], count[TS_MAX_RANK];
} slice_plan;

/* Fills plan from the raw lists; returns NULL or an error message in msg. */
static const char *plan_make(const ts_shape *s, const int64_t *starts, const int64_t *ends, int n,
                             const int64_t *axes, int naxes, const int64_t *steps, int nsteps, slice_plan *pl,
                             char *msg, size_t msz)
{
    bool seen[TS_MAX_RANK] = {0};
    for (int d = 0; d < s->rank; d++) {
        pl->start[d] = 0;
        pl->step[d] = 1;
        pl->count[d] = s->dims[d];
    }
    if ((naxes >= 0 && naxes != n) || (nsteps >= 0 && nsteps != n)) {
        snprintf(msg, msz, "starts, ends, axes and steps must have the same length (%d starts)", n);
        return msg;
    }
    for (int i = 0; i < n; i++) {
        int64_t ax = naxes >= 0 ? axes[i] : i;
        int d;
        if (!ts_axis_norm(ax, s->rank, &d)) {
            snprintf(msg, msz, "axis %lld is out of range for rank %d", (long long)ax, s->rank);
            return msg;
        }
        if (seen[d]) {
            snprintf(msg, msz, "axis %d is sliced twice", d);
            return msg;
        }
        seen[d] = true;
        int64_t dim = s->dims[d], st = starts[i], en = ends[i], step = nsteps >= 0 ? steps[i] : 1;
        if (step == 0) {
            snprintf(msg, msz, "step 0 on axis %d (steps must be non-zero)", d);
            return msg;
        }
        if (st < 0) st = st < -dim ? -1 - dim : st + dim; /* stays below zero: clamped next */
        if (en < 0) en = en < -dim ? -1 - dim : en + dim;
        if (step > 0) {
            st = st < 0 ? 0 : st > dim ? dim : st;
            en = en < 0 ? 0 : en > dim ? dim : en;
        } else {
            st = st < 0 ? -1 : st > dim - 1 ? dim - 1 : st;
            en = en < -1 ? -1 : en > dim - 1 ? dim - 1 : en;
        }
        if (step == INT64_MIN) step = -INT64_MAX; /* same slice, and -step stays representable */
        int64_t cnt = step > 0 ? (en > st ? (en - st - 1) / step + 1 : 0) : (st > en ? (st - en - 1) / -step + 1 : 0);
        pl->start[d] = st;
        pl->step[d] = cnt > 1 ? step : 1; /* a huge step over one element must not overflow the odometer */
        pl->count[d] = cnt;
    }
    return NULL;
}

static ts_status slice_infer(ts_infer_ctx *c)
{
    const ts_slice_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int64_t starts[TS_MAX_RANK], ends[TS_MAX_RANK], axes[TS_MAX_RANK], steps[TS_MAX_RANK];
    int n = p->nstarts, ne = p->nends, naxes = p->naxes, nsteps = -1;
    char msg[256];
    slice_plan pl;
    if (c->opset >= 10) {
        if (c->nin < 3) return ts_infer_fail(c, "expected inputs data, starts, ends (opset %d)", c->opset);
        if (ts_infer_const_ints(c, 1, starts, TS_MAX_RANK, &n) || ts_infer_const_ints(c, 2, ends, TS_MAX_RANK, &ne))
            return c->err->code;
        if (c->nin > 3 && c->in[3] && ts_infer_const_ints(c, 3, axes, TS_MAX_RANK, &naxes)) return c->err->code;
        if (c->nin > 4 && c->in[4] && ts_infer_const_ints(c, 4, steps, TS_MAX_RANK, &nsteps)) return c->err->code;
        if (c->nin <= 3 || !c->in[3]) naxes = -1;
    } else {
        memcpy(starts, p->starts, sizeof starts);
        memcpy(ends, p->ends, sizeof ends);
        memcpy(axes, p->axes, sizeof axes);
    }
    if (n != ne) return ts_infer_fail(c, "%d starts but %d ends", n, ne);
    if (plan_make(&x->shape, starts, ends, n, axes, naxes, steps, nsteps, &pl, msg, sizeof msg))
        return ts_infer_fail(c, "%s", msg);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = x->shape;
    for (int d = 0; d < x->shape.rank; d++) c->out_shape[0].dims[d] = pl.count[d];
    return TS_OK;
}

static int read_ints(const ts_tensor *t, int64_t *out)
{
    if (!t) return -1;
    int64_t n = ts_tensor_numel(t);
    for (int64_t i = 0; i < n && i < TS_MAX_RANK; i++) out[i] = ts_tensor_get_i64(t, i);
    return (int)(n < TS_MAX_RANK ? n : TS_MAX_RANK);
}

static ts_status slice_kernel(ts_kernel_ctx *k)
{
    const ts_slice_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    int64_t starts[TS_MAX_RANK], ends[TS_MAX_RANK], axes[TS_MAX_RANK], steps[TS_MAX_RANK];
    int n = p->nstarts, naxes = p->naxes, nsteps = -1;
    char msg[256];
    slice_plan pl;
    if (k->opset >= 10) {
        n = read_ints(k->in[1], starts);
        read_ints(k->in[2], ends);
        naxes = k->nin > 3 ? read_ints(k->in[3], axes) : -1;
        nsteps = k->nin > 4 ? read_ints(k->in[4], steps) : -1;
    } else {
        memcpy(starts, p->starts, sizeof starts);
        memcpy(ends, p->ends, sizeof ends);
        memcpy(axes, p->axes, sizeof axes);
    }
    if (plan_make(&x->shape, starts, ends, n, axes, naxes, steps, nsteps, &pl, msg, sizeof msg))
        return ts_kernel_fail(k, TS_ERR_INVALID, "%s", msg);
    size_t elem = ts_dtype_size(y->dtype);
    int64_t xs[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, total = ts_tensor_numel(y), off = 0;
    int r = x->shape.rank;
    ts_shape_strides(&x->shape, xs);
    for (int d = 0; d < r; d++) off += pl.start[d] * xs[d];
    for (int64_t i = 0; i < total; i++) {
        memcpy((char *)y->data + (size_t)i * elem, (const char *)x->data + (size_t)off * elem, elem);
        for (int d = r - 1; d >= 0; d--) { /* odometer over the output */
            off += pl.step[d] * xs[d];
            if (++idx[d] < pl.count[d]) break;
            off -= pl.step[d] * xs[d] * pl.count[d];
            idx[d] = 0;
        }
    }
    return TS_OK;
}

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

const ts_op_desc ts_op_slice = {.opset_min = 1, 
    .name = "Slice", .attr_size = sizeof(ts_slice_attrs), .min_inputs = 1, .max_inputs = 5, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1, .parse = slice_parse,
    .emit = slice_emit, .infer = slice_infer, .kernel = slice_kernel, .flops = no_flops,
};
