/* BatchNormalization:
 *   Y = (X - mean) / sqrt(var + epsilon) * scale + B
 * per channel (dim 1).  Old models (opset < 9, spatial = 0) may carry
 * per-activation parameters of shape X.shape[1:]; both layouts are taken
 * from the parameters' size.  With training_mode = 1 (opset >= 14), mean
 * and var are the batch's own statistics per channel (the population
 * variance, over every axis but 1), and the optional outputs 1 and 2 are
 * the updated running statistics
 *   running_mean = mean_in * momentum + mean * (1 - momentum)
 *   running_var  = var_in  * momentum + var  * (1 - momentum).
 * The training outputs of opsets < 14 (saved mean and variance, selected
 * by the output count) are not supported.  Needs sqrt and division: float
 * domains only. */
#include <math.h>
#include <stdlib.h>
#include "ops/window.h"
#include "ops/attrs.h"

static ts_status bn_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_batchnorm_attrs *b = attrs;
    int64_t tm, sp;
    ts_status st;
    (void)opset;
    if ((st = ts_attr_get_float(a, na, "epsilon", 1e-5, &b->epsilon, err)) ||
        (st = ts_attr_get_float(a, na, "momentum", 0.9, &b->momentum, err)) ||
        (st = ts_attr_get_int(a, na, "training_mode", 0, &tm, err)) ||
        (st = ts_attr_get_int(a, na, "spatial", 1, &sp, err)))
        return st;
    if (b->epsilon < 0) return ts_error_set(err, TS_ERR_INVALID, "attribute 'epsilon': must not be negative");
    b->training_mode = tm != 0;
    b->spatial = sp != 0;
    return TS_OK;
}

static int bn_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_batchnorm_attrs *b = attrs;
    int n = 0;
    if (max < 4) return -1;
    if (b->epsilon != 1e-5) out[n++] = ts_attr_float("epsilon", b->epsilon);
    if (b->momentum != 0.9) out[n++] = ts_attr_float("momentum", b->momentum);
    if (b->training_mode) out[n++] = ts_attr_int("training_mode", 1);
    if (!b->spatial) out[n++] = ts_attr_int("spatial", 0);
    return n;
}

static ts_status bn_infer(ts_infer_ctx *c)
{
    const ts_batchnorm_attrs *a = c->attrs;
    char s1[160], s2[160];
    if (!a->training_mode && c->nout > 1)
        return ts_nn_unsupported(c, c->opset >= 14 ? "outputs running_mean and running_var need training_mode = 1"
                                                   : "only the output Y is supported (the mean/var outputs of opsets "
                                                     "< 14 are training-only)");
    if (a->training_mode && c->nout > 3)
        return ts_infer_fail(c, "training_mode gives at most 3 outputs (Y, running_mean, running_var), got %d", c->nout);
    for (int i = 0; i < 5; i++)
        if (!c->in[i]) return ts_infer_fail(c, "input %d is missing (expected X, scale, B, mean, var)", i);
        else if (!ts_nn_float_input(c, i)) return c->err->code;
    const ts_shape *x = &c->in[0]->shape;
    if (x->rank < 2) return ts_infer_fail(c, "input X must have rank >= 2 (N, C, ...), got %s", ts_shape_str(x, s1, sizeof s1));
    ts_shape per_act = {.rank = x->rank - 1};
    for (int i = 1; i < x->rank; i++) per_act.dims[i - 1] = x->dims[i];
    for (int i = 1; i < 5; i++) {
        const ts_shape *p = &c->in[i]->shape;
        bool ok = (p->rank == 1 && p->dims[0] == x->dims[1]) || (!a->spatial && ts_shape_eq(p, &per_act));
        if (!ok)
            return ts_infer_fail(c, "input %d ('%s') has shape %s, expected %lld (one per channel of X %s)", i,
                                 c->in[i]->name, ts_shape_str(p, s2, sizeof s2), (long long)x->dims[1],
                                 ts_shape_str(x, s1, sizeof s1));
    }
    c->out_shape[0] = *x;
    c->out_dtype[0] = c->in[0]->dtype;
    for (int o = 1; o < c->nout; o++) { /* running_mean, running_var: as the given ones */
        c->out_shape[o] = c->in[2 + o]->shape;
        c->out_dtype[o] = c->in[2 + o]->dtype;
    }
    return TS_OK;
}

/* training_mode: the batch's mean and population variance of each of the
 * np channels (rep elements per channel and batch item) into mean/var,
 * and the running statistics into the optional outputs. */
static void bn_batch_stats(ts_kernel_ctx *k, int64_t N, int64_t np, int64_t rep, double *mean, double *var)
{
    const ts_num *num = k->num;
    const ts_batchnorm_attrs *a = k->attrs;
    const char *x = k->in[0]->data;
    const double cnt = (double)(N * rep);
    for (int64_t p = 0; p < np; p++) {
        double sum = 0, sq = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < rep; i++) sum += num->to_f64(ts_num_cat(num, x, (n * np + p) * rep + i));
        mean[p] = cnt > 0 ? sum / cnt : 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < rep; i++) {
                double d = num->to_f64(ts_num_cat(num, x, (n * np + p) * rep + i)) - mean[p];
                sq += d * d;
            }
        var[p] = cnt > 0 ? sq / cnt : 0;
        const double *cur[2] = {&mean[p], &var[p]};
        for (int o = 1; o < k->nout; o++) {
            double given = num->to_f64(ts_num_cat(num, k->in[2 + o]->data, p));
            num->from_f64(ts_num_at(num, k->out[o]->data, p), given * a->momentum + *cur[o - 1] * (1 - a->momentum));
        }
    }
}

static ts_status bn_kernel(ts_kernel_ctx *k)
{
    const ts_batchnorm_attrs *a = k->attrs;
    const ts_num *num = k->num;
    const ts_tensor *X = k->in[0];
    const size_t es = num->size;
    const int64_t N = X->shape.dims[0], C = X->shape.dims[1], inner = ts_tensor_numel(X) / (N * C > 0 ? N * C : 1);
    const int64_t np = ts_tensor_numel(k->in[1]); /* C, or C*inner for per-activation parameters */
    const int64_t rep = np == C ? inner : 1;      /* elements sharing one parameter */
    size_t nb = sizeof(double) * (size_t)(np ? np : 1);
    double *mul = malloc(nb), *add = malloc(nb), *bmean = a->training_mode ? malloc(nb) : NULL,
           *bvar = a->training_mode ? malloc(nb) : NULL;
    if (!mul || !add || (a->training_mode && (!bmean || !bvar))) {
        free(mul);
        free(add);
        free(bmean);
        free(bvar);
        return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    }
    if (a->training_mode) bn_batch_stats(k, N, np, rep, bmean, bvar);
    for (int64_t i = 0; i < np; i++) {
        double scale = num->to_f64(ts_num_cat(num, k->in[1]->data, i)), bias = num->to_f64(ts_num_cat(num, k->in[2]->data, i));
        double mean = a->training_mode ? bmean[i] : num->to_f64(ts_num_cat(num, k->in[3]->data, i));
        double var = a->training_mode ? bvar[i] : num->to_f64(ts_num_cat(num, k->in[4]->data, i));
        mul[i] = scale / sqrt(var + a->epsilon);
        add[i] = bias - mean * mul[i];
    }
    const char *x = X->data;
    char *y = k->out[0]->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < np; p++) {
            int64_t off = (n * np + p) * rep;
            for (int64_t i = 0; i < rep; i++)
                num->from_f64(y + (size_t)(off + i) * es, num->to_f64(x + (size_t)(off + i) * es) * mul[p] + add[p]);
        }
    free(mul);
    free(add);
    free(bmean);
    free(bvar);
    return TS_OK;
}

static double bn_flops(const ts_node *n, const ts_graph *g)
{
    return 2.0 * (double)ts_shape_numel(&g->values[n->outputs[0]].shape);
}

const ts_op_desc ts_op_batchnorm = {.opset_min = 1, 
    .name = "BatchNormalization", .attr_size = sizeof(ts_batchnorm_attrs), .min_inputs = 5, .max_inputs = 5,
    .min_outputs = 1, .max_outputs = 5, .flags = 0,
    .linear_inputs = 0xf, /* degree 1 in X, scale, B, mean; not in var (docs/pet.md) */
    .parse = bn_parse, .emit = bn_emit, .infer = bn_infer,
    .kernel = bn_kernel, .flops = bn_flops,
};
