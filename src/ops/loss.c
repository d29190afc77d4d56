/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12/13).
 * Input (N, C, d1..dk), target (N, d1..dk) int32/int64, optional class
 * weights (C).  loss[n, d] = -w[t] * x[n, t, d] with t = target[n, d];
 * elements whose target is ignore_index count 0 and weigh 0.  reduction:
 * "none" (target's shape), "sum", or "mean" (sum over the sum of the
 * weights that counted).  SoftmaxCrossEntropyLoss takes the log-softmax
 * over axis 1 first and may also return it.  Float-only (log, division). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops/elementwise.h"

enum { RED_NONE, RED_SUM, RED_MEAN };
static const char *const RED_NAMES[] = {"none", "sum", "mean"};

typedef struct loss_attrs {
    int reduction;
    bool has_ignore;
    int64_t ignore_index;
} loss_attrs;

static ts_status loss_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    loss_attrs *p = attrs;
    char red[16];
    (void)opset;
    if (ts_attr_get_string(a, na, "reduction", "mean", red, sizeof red, err)) return err->code;
    p->reduction = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(red, RED_NAMES[i])) p->reduction = i;
    if (p->reduction < 0) return ts_attr_fail(err, ts_attr_find(a, na, "reduction"), "expected none, sum or mean");
    p->has_ignore = ts_attr_find(a, na, "ignore_index") != NULL;
    return ts_attr_get_int(a, na, "ignore_index", 0, &p->ignore_index, err);
}

static int loss_emit(const void *attrs, ts_attr *out, int max)
{
    const loss_attrs *p = attrs;
    int n = 0;
    if (max < 2) return 0;
    out[n++] = ts_attr_string("reduction", RED_NAMES[p->reduction]);
    if (p->has_ignore) out[n++] = ts_attr_int("ignore_index", p->ignore_index);
    return n;
}

static ts_status loss_infer(ts_infer_ctx *c)
{
    const loss_attrs *p = c->attrs;
    const ts_value *x = c->in[0], *t = c->in[1], *w = c->nin > 2 ? c->in[2] : NULL;
    char a[160], b[160];
    if (!ts_dtype_is_float(x->dtype))
        return ts_infer_fail(c, "input '%s' has type %s, expected a float type", x->name, ts_dtype_name(x->dtype));
    if (x->shape.rank < 2) return ts_infer_fail(c, "input '%s' has rank %d, expected (N, C, ...)", x->name, x->shape.rank);
    if (t->dtype != TS_I64 && t->dtype != TS_I32)
        return ts_infer_fail(c, "target '%s' has type %s, expected int64 or int32", t->name, ts_dtype_name(t->dtype));
    bool ok = t->shape.rank == x->shape.rank - 1 && t->shape.dims[0] == x->shape.dims[0];
    for (int d = 1; ok && d < t->shape.rank; d++) ok = t->shape.dims[d] == x->shape.dims[d + 1];
    if (!ok)
        return ts_infer_fail(c, "target shape %s does not match input shape %s (expected (N, d1..dk))",
                             ts_shape_str(&t->shape, a, sizeof a), ts_shape_str(&x->shape, b, sizeof b));
    if (w && (w->dtype != x->dtype || w->shape.rank != 1 || w->shape.dims[0] != x->shape.dims[1]))
        return ts_infer_fail(c, "weights '%s' must be a 1-D %s tensor of C = %lld elements", w->name,
                             ts_dtype_name(x->dtype), (long long)x->shape.dims[1]);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = p->reduction == RED_NONE ? t->shape : (ts_shape){0};
    if (c->nout > 1) { /* SoftmaxCrossEntropyLoss's log_prob */
        c->out_dtype[1] = x->dtype;
        c->out_shape[1] = x->shape;
    }
    return TS_OK;
}

/* The loss from log-probabilities lp (N*C*D doubles). */
static ts_status loss_from(ts_kernel_ctx *k, const double *lp, int64_t N, int64_t C, int64_t D)
{
    const loss_attrs *p = k->attrs;
    const ts_tensor *t = k->in[1], *w = k->nin > 2 ? k->in[2] : NULL;
    ts_tensor *y = k->out[0];
    double sum = 0, wsum = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) {
            int64_t i = n * D + d, c = ts_tensor_get_i64(t, i);
            double l = 0, wt = 0;
            if (!p->has_ignore || c != p->ignore_index) {
                if (c < 0 || c >= C)
                    return ts_kernel_fail(k, TS_ERR_INVALID, "target %lld is out of range for %lld classes",
                                          (long long)c, (long long)C);
                wt = w ? el_get(k->num, w, c) : 1;
                l = -wt * lp[(n * C + c) * D + d];
            }
            if (p->reduction == RED_NONE) el_set(k->num, y, i, l);
            sum += l;
            wsum += wt;
        }
    if (p->reduction == RED_SUM) el_set(k->num, y, 0, sum);
    if (p->reduction == RED_MEAN) el_set(k->num, y, 0, sum / wsum);
    return TS_OK;
}

/* Reads (N, C, D) from the input, optionally as log-softmax over C. */
static ts_status loss_run(ts_kernel_ctx *k, bool softmax)
{
    const ts_tensor *x = k->in[0];
    if (need_float_domain(k)) return k->err->code;
    int64_t N = x->shape.dims[0], C = x->shape.dims[1], D = C && N ? ts_tensor_numel(x) / (N * C) : 0;
    int64_t total = ts_tensor_numel(x);
    double *lp = malloc(((size_t)total + 1) * sizeof *lp);
    if (!lp) return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < total; i++) lp[i] = el_get(k->num, x, i);
    if (softmax)
        for (int64_t n = 0; n < N; n++)
            for (int64_t d = 0; d < D; d++) {
                double m = -INFINITY, s = 0;
                for (int64_t c = 0; c < C; c++) m = fmax(m, lp[(n * C + c) * D + d]);
                for (int64_t c = 0; c < C; c++) s += exp(lp[(n * C + c) * D + d] - m);
                for (int64_t c = 0; c < C; c++) lp[(n * C + c) * D + d] -= m + log(s);
            }
    if (softmax && k->nout > 1 && k->out[1])
        for (int64_t i = 0; i < total; i++) el_set(k->num, k->out[1], i, lp[i]);
    ts_status st = loss_from(k, lp, N, C, D);
    free(lp);
    return st;
}

static ts_status nll_kernel(ts_kernel_ctx *k) { return loss_run(k, false); }
static ts_status sce_kernel(ts_kernel_ctx *k) { return loss_run(k, true); }

const ts_op_desc ts_op_nll_loss = {.opset_min = 12, 
    .name = "NegativeLogLikelihoodLoss", .attr_size = sizeof(loss_attrs), .min_inputs = 2, .max_inputs = 3,
    .min_outputs = 1, .max_outputs = 1, .parse = loss_parse, .emit = loss_emit, .infer = loss_infer,
    .kernel = nll_kernel,
};
const ts_op_desc ts_op_softmax_ce_loss = {.opset_min = 12, 
    .name = "SoftmaxCrossEntropyLoss", .attr_size = sizeof(loss_attrs), .min_inputs = 2, .max_inputs = 3,
    .min_outputs = 1, .max_outputs = 2, .parse = loss_parse, .emit = loss_emit, .infer = loss_infer,
    .kernel = sce_kernel,
};
