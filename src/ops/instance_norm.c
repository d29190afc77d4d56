/* Normalizations over windows other than LayerNormalization's:
 * InstanceNormalization (per sample and channel over the spatial
 * dimensions, then scale[c] and B[c]), MeanVarianceNormalization (over
 * `axes`, default N, H, W: (x - mean) / (std + 1e-9) as ONNX's function
 * body defines it) and LRN (across channels: x / (bias + alpha / size *
 * sum of squares)^beta).  Reference kernels in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops/elementwise.h"

/* ------------------------------------------------ InstanceNormalization */

typedef struct inorm_attrs {
    double epsilon;
} inorm_attrs;

static ts_status inorm_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    return ts_attr_get_float(a, na, "epsilon", 1e-5, &((inorm_attrs *)attrs)->epsilon, err);
}

static int inorm_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_float("epsilon", ((const inorm_attrs *)attrs)->epsilon);
    return 1;
}

static ts_status inorm_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0];
    if (!ts_dtype_is_float(x->dtype)) return ts_infer_fail(c, "input '%s' must be a float tensor", x->name);
    if (x->shape.rank < 3) return ts_infer_fail(c, "input '%s' has rank %d, expected at least 3", x->name, x->shape.rank);
    for (int i = 1; i < 3; i++)
        if (c->in[i]->shape.rank != 1 || c->in[i]->shape.dims[0] != x->shape.dims[1])
            return ts_infer_fail(c, "input %d ('%s') must have one value per channel (%lld)", i, c->in[i]->name,
                                 (long long)x->shape.dims[1]);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = x->shape;
    return TS_OK;
}

static ts_status inorm_kernel(ts_kernel_ctx *k)
{
    const inorm_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    if (need_float_domain(k)) return k->err->code;
    int64_t n = x->shape.dims[0], ch = x->shape.dims[1], sp = 1;
    for (int d = 2; d < x->shape.rank; d++) sp *= x->shape.dims[d];
    for (int64_t b = 0; b < n; b++)
        for (int64_t c = 0; c < ch; c++) {
            int64_t base = (b * ch + c) * sp;
            double mean = 0, var = 0;
            for (int64_t i = 0; i < sp; i++) mean += el_get(k->num, x, base + i);
            mean /= (double)(sp ? sp : 1);
            for (int64_t i = 0; i < sp; i++) {
                double d = el_get(k->num, x, base + i) - mean;
                var += d * d;
            }
            var /= (double)(sp ? sp : 1);
            double s = el_get(k->num, k->in[1], c) / sqrt(var + p->epsilon), bias = el_get(k->num, k->in[2], c);
            for (int64_t i = 0; i < sp; i++)
                el_set(k->num, k->out[0], base + i, (el_get(k->num, x, base + i) - mean) * s + bias);
        }
    return TS_OK;
}

const ts_op_desc ts_op_instance_norm = {.opset_min = 6, 
    .name = "InstanceNormalization", .attr_size = sizeof(inorm_attrs), .min_inputs = 3, .max_inputs = 3,
    .min_outputs = 1, .max_outputs = 1, .parse = inorm_parse, .emit = inorm_emit, .infer = inorm_infer,
    .kernel = inorm_kernel,
};

/* ------------------------------------------- MeanVarianceNormalization */

typedef struct mvn_attrs {
    int naxes;
    int64_t axes[TS_MAX_RANK];
} mvn_attrs;

static ts_status mvn_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    mvn_attrs *p = attrs;
    (void)opset;
    if (ts_attr_get_ints(a, na, "axes", p->axes, TS_MAX_RANK, &p->naxes, err)) return err->code;
    if (p->naxes < 0) {
        p->naxes = 3;
        p->axes[0] = 0, p->axes[1] = 2, p->axes[2] = 3;
    }
    return TS_OK;
}

static int mvn_emit(const void *attrs, ts_attr *out, int max)
{
    const mvn_attrs *p = attrs;
    if (max < 1) return 0;
    out[0] = ts_attr_ints("axes", p->axes, p->naxes);
    return 1;
}

static ts_status mvn_infer(ts_infer_ctx *c)
{
    const mvn_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int ax;
    if (!ts_dtype_is_float(x->dtype)) return ts_infer_fail(c, "input '%s' must be a float tensor", x->name);
    for (int i = 0; i < p->naxes; i++)
        if (!ts_axis_norm(p->axes[i], x->shape.rank, &ax))
            return ts_infer_fail(c, "axis %lld is out of range for rank %d", (long long)p->axes[i], x->shape.rank);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = x->shape;
    return TS_OK;
}

static ts_status mvn_kernel(ts_kernel_ctx *k)
{
    const mvn_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    if (need_float_domain(k)) return k->err->code;
    int r = x->shape.rank;
    bool red[TS_MAX_RANK] = {0};
    for (int i = 0; i < p->naxes; i++) {
        int ax;
        ts_axis_norm(p->axes[i], r, &ax);
        red[ax] = true;
    }
    /* group: index of an element's reduction group in the kept dimensions */
    int64_t n = ts_tensor_numel(x), groups = 1, per = 1;
    for (int d = 0; d < r; d++) *(red[d] ? &per : &groups) *= x->shape.dims[d];
    double *sum = calloc((size_t)groups + 1, sizeof *sum), *sq = calloc((size_t)groups + 1, sizeof *sq);
    int64_t *grp = malloc(sizeof *grp * (size_t)(n + 1));
    if (!sum || !sq || !grp) {
        free(sum), free(sq), free(grp);
        return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    }
    int64_t idx[TS_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t g = 0;
        for (int d = 0; d < r; d++)
            if (!red[d]) g = g * x->shape.dims[d] + idx[d];
        grp[i] = g;
        double v = el_get(k->num, x, i);
        sum[g] += v;
        sq[g] += v * v;
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < x->shape.dims[d]) break;
            idx[d] = 0;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        double mean = sum[grp[i]] / (double)per, var = sq[grp[i]] / (double)per - mean * mean;
        el_set(k->num, k->out[0], i, (el_get(k->num, x, i) - mean) / (sqrt(var > 0 ? var : 0) + 1e-9));
    }
    free(sum), free(sq), free(grp);
    return TS_OK;
}

const ts_op_desc ts_op_mvn = {.opset_min = 9, 
    .name = "MeanVarianceNormalization", .attr_size = sizeof(mvn_attrs), .min_inputs = 1, .max_inputs = 1,
    .min_outputs = 1, .max_outputs = 1, .parse = mvn_parse, .emit = mvn_emit, .infer = mvn_infer,
    .kernel = mvn_kernel,
};

/* ------------------------------------------------------------------ LRN */

typedef struct lrn_attrs {
    double alpha, beta, bias;
    int64_t size;
} lrn_attrs;

static ts_status lrn_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    lrn_attrs *p = attrs;
    (void)opset;
    if (!ts_attr_find(a, na, "size")) return ts_error_set(err, TS_ERR_INVALID, "attribute 'size' is required");
    if (ts_attr_get_float(a, na, "alpha", 1e-4, &p->alpha, err) || ts_attr_get_float(a, na, "beta", 0.75, &p->beta, err) ||
        ts_attr_get_float(a, na, "bias", 1.0, &p->bias, err) || ts_attr_get_int(a, na, "size", 1, &p->size, err))
        return err->code;
    if (p->size < 1) return ts_attr_fail(err, ts_attr_find(a, na, "size"), "must be at least 1");
    return TS_OK;
}

static int lrn_emit(const void *attrs, ts_attr *out, int max)
{
    const lrn_attrs *p = attrs;
    if (max < 4) return 0;
    out[0] = ts_attr_float("alpha", p->alpha);
    out[1] = ts_attr_float("beta", p->beta);
    out[2] = ts_attr_float("bias", p->bias);
    out[3] = ts_attr_int("size", p->size);
    return 4;
}

static ts_status lrn_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0];
    if (!ts_dtype_is_float(x->dtype)) return ts_infer_fail(c, "input '%s' must be a float tensor", x->name);
    if (x->shape.rank < 2) return ts_infer_fail(c, "input '%s' has rank %d, expected at least 2", x->name, x->shape.rank);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = x->shape;
    return TS_OK;
}

static ts_status lrn_kernel(ts_kernel_ctx *k)
{
    const lrn_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    if (need_float_domain(k)) return k->err->code;
    int64_t n = x->shape.dims[0], ch = x->shape.dims[1], sp = 1;
    for (int d = 2; d < x->shape.rank; d++) sp *= x->shape.dims[d];
    int64_t lo = (p->size - 1) / 2, hi = p->size - 1 - lo; /* floor and ceil of (size - 1) / 2 */
    for (int64_t b = 0; b < n; b++)
        for (int64_t c = 0; c < ch; c++)
            for (int64_t i = 0; i < sp; i++) {
                double sum = 0;
                for (int64_t j = c - lo; j <= c + hi; j++)
                    if (j >= 0 && j < ch) {
                        double v = el_get(k->num, x, (b * ch + j) * sp + i);
                        sum += v * v;
                    }
                int64_t at = (b * ch + c) * sp + i;
                el_set(k->num, k->out[0], at, el_get(k->num, x, at) / pow(p->bias + p->alpha / (double)p->size * sum, p->beta));
            }
    return TS_OK;
}

const ts_op_desc ts_op_lrn = {.opset_min = 1, 
    .name = "LRN", .attr_size = sizeof(lrn_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .parse = lrn_parse, .emit = lrn_emit, .infer = lrn_infer, .kernel = lrn_kernel,
};
