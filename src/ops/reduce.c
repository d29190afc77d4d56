/* Reductions: ReduceSum, ReduceMean, ReduceMax, and ReduceMin, ReduceProd,
 * ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare.  Axes
 * come from the `axes` attribute, or from an optional second input from
 * opset 13 (ReduceSum) or 18 (the others).  No axes means all axes, unless
 * noop_with_empty_axes asks for the identity.  Sum and Mean are linear and
 * exact (Mean multiplies by the domain's inverse of the count); the others
 * are float-only and accumulate in double (one slot per output element).
 * Integer tensors are reduced in int64 (Sum, Mean, Max) or in double and
 * truncated (the others). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/elementwise.h"
#include "ops/attrs.h"

enum reduce_kind { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_SUMSQ };

static ts_status parse_common(void *attrs, const ts_attr *a, int na, int opset, int axes_input_opset, ts_error *err)
{
    ts_reduce_attrs *p = attrs;
    int64_t v;
    const ts_attr *ax = ts_attr_find(a, na, "axes");
    p->naxes = -1;
    /* ignoring it would silently reduce over all axes */
    if (ax && opset >= axes_input_opset)
        return ts_attr_fail(err, ax, axes_input_opset == 13 ? "not allowed from opset 13; axes are the second input"
                                                            : "not allowed from opset 18; axes are the second input");
    if (ts_attr_get_ints(a, na, "axes", p->axes, TS_MAX_RANK, &p->naxes, err)) return err->code;
    if (ts_attr_get_int(a, na, "keepdims", 1, &v, err)) return err->code;
    if (v != 0 && v != 1) return ts_attr_fail(err, ts_attr_find(a, na, "keepdims"), "expected 0 or 1");
    p->keepdims = (int)v;
    if (ts_attr_get_int(a, na, "noop_with_empty_axes", 0, &v, err)) return err->code;
    if (v != 0 && v != 1) return ts_attr_fail(err, ts_attr_find(a, na, "noop_with_empty_axes"), "expected 0 or 1");
    p->noop_empty = (int)v;
    return TS_OK;
}
static ts_status sum_parse(void *at, const ts_attr *a, int na, int opset, ts_error *err)
{
    return parse_common(at, a, na, opset, 13, err);
}
static ts_status mean_max_parse(void *at, const ts_attr *a, int na, int opset, ts_error *err)
{
    return parse_common(at, a, na, opset, 18, err);
}

static int reduce_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_reduce_attrs *p = attrs;
    int n = 0;
    if (max < 3) return 0;
    if (p->naxes >= 0) out[n++] = ts_attr_ints("axes", p->axes, p->naxes);
    out[n++] = ts_attr_int("keepdims", p->keepdims);
    /* the attribute exists only in the opsets with axes as an input */
    if (p->noop_empty) out[n++] = ts_attr_int("noop_with_empty_axes", 1);
    return n;
}

/* Turns the axes list into a mask over the input's dims.  Returns NULL on
 * success or a message; *noop is set for the identity case. */
static const char *axes_mask(const ts_reduce_attrs *p, const int64_t *axes, int naxes, int rank, bool mask[TS_MAX_RANK],
                             bool *noop, char *msg, size_t msgn)
{
    *noop = false;
    for (int d = 0; d < TS_MAX_RANK; d++) mask[d] = naxes <= 0;
    if (naxes <= 0) {
        *noop = p->noop_empty != 0;
        if (*noop)
            for (int d = 0; d < TS_MAX_RANK; d++) mask[d] = false;
        return NULL;
    }
    for (int i = 0; i < naxes; i++) {
        int ax;
        if (!ts_axis_norm(axes[i], rank, &ax)) {
            snprintf(msg, msgn, "axis %lld is out of range for rank %d (expected %d to %d)", (long long)axes[i], rank,
                     -rank, rank - 1);
            return msg;
        }
        if (mask[ax]) {
            snprintf(msg, msgn, "axis %lld is listed twice", (long long)axes[i]);
            return msg;
        }
        mask[ax] = true;
    }
    return NULL;
}

static ts_status reduce_infer(ts_infer_ctx *c, int axes_input_opset)
{
    const ts_reduce_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int64_t axes[TS_MAX_RANK];
    int naxes = p->naxes;
    bool mask[TS_MAX_RANK], noop;
    char msg[256];
    if (!ts_dtype_is_float(x->dtype) && !dtype_is_int(x->dtype))
        return ts_infer_fail(c, "input '%s' has type %s, expected a number type", x->name, ts_dtype_name(x->dtype));
    memcpy(axes, p->axes, sizeof axes);
    if (c->nin > 1 && c->in[1]) {
        if (c->opset < axes_input_opset)
            return ts_infer_fail(c, "axes as an input needs opset %d or later (graph opset %d uses the attribute)",
                                 axes_input_opset, c->opset);
        if (ts_infer_const_ints(c, 1, axes, TS_MAX_RANK, &naxes)) return c->err->code;
    }
    if (axes_mask(p, axes, naxes, x->shape.rank, mask, &noop, msg, sizeof msg)) return ts_infer_fail(c, "%s", msg);
    ts_shape o = {0};
    for (int d = 0; d < x->shape.rank; d++) {
        if (!mask[d])
            o.dims[o.rank++] = x->shape.dims[d];
        else if (p->keepdims)
            o.dims[o.rank++] = 1;
    }
    c->out_shape[0] = o;
    c->out_dtype[0] = x->dtype;
    return TS_OK;
}
static ts_status sum_infer(ts_infer_ctx *c) { return reduce_infer(c, 13); }
static ts_status mean_max_infer(ts_infer_ctx *c) { return reduce_infer(c, 18); }

static double acc_init(enum reduce_kind kind)
{
    return kind == R_MIN ? INFINITY : kind == R_MAX ? -INFINITY : kind == R_PROD ? 1 : 0;
}

static double acc_step(enum reduce_kind kind, double a, double v)
{
    switch (kind) {
    case R_MIN: return v < a || isnan(v) ? v : a;
    case R_MAX: return v > a || isnan(v) ? v : a;
    case R_PROD: return a * v;
    case R_L1: return a + fabs(v);
    case R_L2:
    case R_SUMSQ: return a + v * v;
    case R_LOGSUMEXP: return a + exp(v);
    default: return a + v;
    }
}

static double acc_final(enum reduce_kind kind, double a)
{
    return kind == R_L2 ? sqrt(a) : kind == R_LOGSUM || kind == R_LOGSUMEXP ? log(a) : a;
}

/* The float-only reductions: in double, then written once per output.
 * LogSumExp subtracts each slice's max first so exp cannot overflow. */
static ts_status reduce_double(ts_kernel_ctx *k, enum reduce_kind kind, const bool mask[TS_MAX_RANK])
{
    const ts_num *num = k->num;
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    bool ints = dtype_is_int(x->dtype);
    int rank = x->shape.rank;
    if (!ints && need_float_domain(k)) return k->err->code;
    int64_t nin = ts_tensor_numel(x), nout = ts_tensor_numel(y);
    double *acc = malloc(((size_t)nout + 1) * sizeof *acc), *shift = NULL;
    if (!acc) return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    int64_t ostride[TS_MAX_RANK], st = 1;
    for (int d = rank - 1; d >= 0; d--) {
        ostride[d] = mask[d] ? 0 : st;
        if (!mask[d]) st *= x->shape.dims[d];
    }
    for (int pass = kind == R_LOGSUMEXP ? 0 : 1; pass < 2; pass++) {
        enum reduce_kind kd = pass ? kind : R_MAX;
        for (int64_t o = 0; o < nout; o++) acc[o] = acc_init(kd);
        int64_t idx[TS_MAX_RANK] = {0}, off = 0;
        for (int64_t i = 0; i < nin; i++) {
            double v = ints ? (double)ts_tensor_get_i64(x, i) : el_get(num, x, i);
            if (shift && isfinite(shift[off])) v -= shift[off];
            acc[off] = acc_step(kd, acc[off], v);
            for (int d = rank - 1; d >= 0; d--) { /* odometer increment */
                off += ostride[d];
                if (++idx[d] < x->shape.dims[d]) break;
                off -= ostride[d] * x->shape.dims[d];
                idx[d] = 0;
            }
        }
        if (!pass) { /* the maxima become the shift of the second pass */
            shift = acc;
            if (!(acc = malloc(((size_t)nout + 1) * sizeof *acc))) {
                free(shift);
                return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
            }
        }
    }
    for (int64_t o = 0; o < nout; o++) {
        double v = acc_final(kind, acc[o]);
        if (shift && isfinite(shift[o])) v += shift[o];
        if (ints)
            el_set_i64(y, o, isnan(v) ? 0 : v >= 0x1p63 ? INT64_MAX : v <= -0x1p63 ? INT64_MIN : (int64_t)v);
        else
            el_set(num, y, o, v);
    }
    free(acc);
    free(shift);
    return TS_OK;
}

static ts_status reduce_run(ts_kernel_ctx *k, enum reduce_kind kind)
{
    const ts_reduce_attrs *p = k->attrs;
    const ts_num *num = k->num;
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    int64_t axes[TS_MAX_RANK];
    int naxes = p->naxes, rank = x->shape.rank;
    bool mask[TS_MAX_RANK], noop, ints = dtype_is_int(x->dtype);
    char msg[256];
    memcpy(axes, p->axes, sizeof axes);
    if (k->nin > 1 && k->in[1]) {
        naxes = (int)ts_tensor_numel(k->in[1]);
        if (naxes > TS_MAX_RANK) return ts_kernel_fail(k, TS_ERR_INVALID, "too many axes (%d)", naxes);
        for (int i = 0; i < naxes; i++) axes[i] = ts_tensor_get_i64(k->in[1], i);
    }
    if (axes_mask(p, axes, naxes, rank, mask, &noop, msg, sizeof msg)) return ts_kernel_fail(k, TS_ERR_INVALID, "%s", msg);
    if (noop) {
        memcpy(y->data, x->data, x->nbytes);
        return TS_OK;
    }
    if (kind > R_MAX) return reduce_double(k, kind, mask);
    if (!ints && kind == R_MAX && need_float_domain(k)) return k->err->code;
    if (!ints && x->dtype != num->storage)
        return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "dtype %s not supported", ts_dtype_name(x->dtype));
    int64_t nin = ts_tensor_numel(x), nout = ts_tensor_numel(y);
    /* output strides over the keepdims layout (same order without keepdims);
     * reduced axes get stride 0 so every input element finds its slot */
    int64_t ostride[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, st = 1;
    for (int d = rank - 1; d >= 0; d--) {
        ostride[d] = mask[d] ? 0 : st;
        if (!mask[d]) st *= x->shape.dims[d];
    }
    if (kind == R_MAX)
        for (int64_t o = 0; o < nout; o++) {
            if (ints)
                el_set_i64(y, o, INT64_MIN);
            else
                el_set(num, y, o, -INFINITY);
        }
    int64_t off = 0;
    for (int64_t i = 0; i < nin; i++) {
        if (ints) {
            int64_t v = ts_tensor_get_i64(x, i), a = ts_tensor_get_i64(y, off);
            el_set_i64(y, off, kind == R_MAX ? (v > a ? v : a) : (int64_t)((uint64_t)a + (uint64_t)v));
        } else if (kind == R_MAX) {
            double v = el_get(num, x, i), a = el_get(num, y, off);
            if (v > a || isnan(v)) el_set(num, y, off, v);
        } else {
            void *acc = ts_num_at(num, y->data, off);
            num->add(acc, acc, ts_num_cat(num, x->data, i));
        }
        for (int d = rank - 1; d >= 0; d--) { /* odometer increment */
            off += ostride[d];
            if (++idx[d] < x->shape.dims[d]) break;
            off -= ostride[d] * x->shape.dims[d];
            idx[d] = 0;
        }
    }
    if (kind != R_MEAN || nout == 0) return TS_OK;
    int64_t count = nin / nout;
    if (ints) {
        for (int64_t o = 0; o < nout; o++) el_set_i64(y, o, count ? ts_tensor_get_i64(y, o) / count : 0);
        return TS_OK;
    }
    ts_scalar c, inv;
    num->from_i64(&c, count);
    if (!num->inv(&inv, &c)) {
        if (num->exact) return ts_kernel_fail(k, TS_ERR_INVALID, "mean over an empty set of elements");
        num->from_f64(&inv, NAN);
    }
    for (int64_t o = 0; o < nout; o++) num->mul(ts_num_at(num, y->data, o), ts_num_cat(num, y->data, o), &inv);
    return TS_OK;
}

static ts_status sum_kernel(ts_kernel_ctx *k) { return reduce_run(k, R_SUM); }
static ts_status mean_kernel(ts_kernel_ctx *k) { return reduce_run(k, R_MEAN); }
static ts_status max_kernel(ts_kernel_ctx *k) { return reduce_run(k, R_MAX); }
static ts_status min_kernel(ts_kernel_ctx *k) { return reduce_run(k, R_MIN); }
static ts_status prod_kernel(ts_kernel_ctx *k) { return reduce_run(k, R_PROD); }
static ts_status l1_kernel(ts_kernel_ctx *k) { return reduce_run(k, R_L1); }
static ts_status l2_kernel(ts_kernel_ctx *k) { return reduce_run(k, R_L2); }
static ts_status logsum_kernel(ts_kernel_ctx *k) { return reduce_run(k, R_LOGSUM); }
static ts_status logsumexp_kernel(ts_kernel_ctx *k) { return reduce_run(k, R_LOGSUMEXP); }
static ts_status sumsq_kernel(ts_kernel_ctx *k) { return reduce_run(k, R_SUMSQ); }

/* one add (or compare) per input element */
static double reduce_flops(const ts_node *n, const ts_graph *g)
{
    return (double)ts_shape_numel(&g->values[n->inputs[0]].shape);
}

#define REDUCE(NAME) .name = NAME, .attr_size = sizeof(ts_reduce_attrs), .min_inputs = 1, .max_inputs = 2, \
                     .min_outputs = 1, .max_outputs = 1, .emit = reduce_emit, .flops = reduce_flops

const ts_op_desc ts_op_reducesum = {.opset_min = 1, REDUCE("ReduceSum"), .flags = TS_OP_EXACT, .linear_inputs = 0x1,
                                    .parse = sum_parse, .infer = sum_infer, .kernel = sum_kernel};
const ts_op_desc ts_op_reducemean = {.opset_min = 1, REDUCE("ReduceMean"), .flags = TS_OP_EXACT, .linear_inputs = 0x1,
                                     .parse = mean_max_parse, .infer = mean_max_infer, .kernel = mean_kernel};
const ts_op_desc ts_op_reducemax = {.opset_min = 1, REDUCE("ReduceMax"), .parse = mean_max_parse,
                                    .infer = mean_max_infer,
                                    .kernel = max_kernel};

/* Float-only reductions with axes as an input from opset 18. */
#define REDUCE18(NAME, KERNEL)                                                                                 \
    {.opset_min = 1, REDUCE(NAME), .parse = mean_max_parse, .infer = mean_max_infer, .kernel = KERNEL}
const ts_op_desc ts_op_reducemin = REDUCE18("ReduceMin", min_kernel);
const ts_op_desc ts_op_reduceprod = REDUCE18("ReduceProd", prod_kernel);
const ts_op_desc ts_op_reducel1 = REDUCE18("ReduceL1", l1_kernel);
const ts_op_desc ts_op_reducel2 = REDUCE18("ReduceL2", l2_kernel);
const ts_op_desc ts_op_reducelogsum = REDUCE18("ReduceLogSum", logsum_kernel);
const ts_op_desc ts_op_reducelogsumexp = REDUCE18("ReduceLogSumExp", logsumexp_kernel);
const ts_op_desc ts_op_reducesumsquare = REDUCE18("ReduceSumSquare", sumsq_kernel);
