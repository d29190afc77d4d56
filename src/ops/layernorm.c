/* LayerNormalization (opset 17): normalizes over the dimensions [axis, rank)
 *   Y = (X - mean) / sqrt(var + epsilon) * Scale + B
 * Scale and B broadcast unidirectionally to X.shape[axis:].  The optional
 * outputs Mean and InvStdDev have X's shape with 1 from axis on, in float32
 * (stash_type 1, the default) or X's type.  Needs sqrt
 * and division: float domains only; statistics are accumulated in double. */
#include <math.h>
#include <stdlib.h>
#include "ops/window.h"
#include "ops/attrs.h"

static ts_status ln_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_layernorm_attrs *l = attrs;
    ts_status st;
    (void)opset;
    if ((st = ts_attr_get_int(a, na, "axis", -1, &l->axis, err)) ||
        (st = ts_attr_get_float(a, na, "epsilon", 1e-5, &l->epsilon, err)) ||
        (st = ts_attr_get_int(a, na, "stash_type", 1, &l->stash_type, err)))
        return st;
    if (l->epsilon < 0) return ts_error_set(err, TS_ERR_INVALID, "attribute 'epsilon': must not be negative");
    return TS_OK;
}

static int ln_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_layernorm_attrs *l = attrs;
    int n = 0;
    if (max < 3) return -1;
    if (l->axis != -1) out[n++] = ts_attr_int("axis", l->axis);
    if (l->epsilon != 1e-5) out[n++] = ts_attr_float("epsilon", l->epsilon);
    if (l->stash_type != 1) out[n++] = ts_attr_int("stash_type", l->stash_type);
    return n;
}

/* The normalized shape X.shape[axis:] and the axis resolved. */
static bool ln_norm_shape(const ts_layernorm_attrs *a, const ts_shape *x, ts_shape *norm, int *axis)
{
    if (!ts_axis_norm(a->axis, x->rank, axis)) return false;
    norm->rank = x->rank - *axis;
    for (int i = 0; i < norm->rank; i++) norm->dims[i] = x->dims[*axis + i];
    return true;
}

static ts_status ln_infer(ts_infer_ctx *c)
{
    const ts_layernorm_attrs *a = c->attrs;
    ts_shape norm, out;
    int axis;
    char s1[160], s2[160];
    if (!ts_nn_float_input(c, 0) || !ts_nn_float_input(c, 1) || (c->nin > 2 && c->in[2] && !ts_nn_float_input(c, 2)))
        return c->err->code;
    const ts_shape *x = &c->in[0]->shape;
    if (!ln_norm_shape(a, x, &norm, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for X of rank %d", (long long)a->axis, x->rank);
    for (int i = 1; i < c->nin; i++) {
        if (!c->in[i]) continue;
        const ts_shape *p = &c->in[i]->shape;
        if (!ts_shape_broadcast(p, &norm, &out) || !ts_shape_eq(&out, &norm))
            return ts_infer_fail(c, "%s (%s) does not broadcast to the normalized shape %s", i == 1 ? "Scale" : "B",
                                 ts_shape_str(p, s1, sizeof s1), ts_shape_str(&norm, s2, sizeof s2));
    }
    c->out_shape[0] = *x;
    c->out_dtype[0] = c->in[0]->dtype;
    for (int i = 1; i < c->nout; i++) { /* Mean, InvStdDev */
        c->out_shape[i] = *x;
        for (int d = axis; d < x->rank; d++) c->out_shape[i].dims[d] = 1;
        c->out_dtype[i] = a->stash_type == 1 ? TS_F32 : c->in[0]->dtype;
    }
    return TS_OK;
}

/* Expands a parameter broadcast onto the normalized shape into doubles. */
static void expand(const ts_num *num, const ts_tensor *t, const ts_shape *norm, double *out, double def)
{
    int64_t n = ts_shape_numel(norm), st[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, off = 0;
    if (!t) {
        for (int64_t i = 0; i < n; i++) out[i] = def;
        return;
    }
    ts_shape_bcast_strides(&t->shape, norm, st);
    for (int64_t i = 0; i < n; i++) {
        out[i] = num->to_f64(ts_num_cat(num, t->data, off));
        for (int d = norm->rank - 1; d >= 0; d--) {
            off += st[d];
            if (++idx[d] < norm->dims[d]) break;
            off -= st[d] * norm->dims[d];
            idx[d] = 0;
        }
    }
}

static ts_status ln_kernel(ts_kernel_ctx *k)
{
    const ts_layernorm_attrs *a = k->attrs;
    const ts_num *num = k->num;
    const ts_tensor *X = k->in[0];
    ts_shape norm;
    int axis;
    if (!ln_norm_shape(a, &X->shape, &norm, &axis))
        return ts_kernel_fail(k, TS_ERR_INVALID, "axis %lld is out of range", (long long)a->axis);
    const size_t es = num->size;
    const int64_t inner = ts_shape_numel(&norm), outer = inner ? ts_tensor_numel(X) / inner : 0;
    double *scale = malloc(sizeof(double) * (size_t)(inner + 1)), *bias = malloc(sizeof(double) * (size_t)(inner + 1));
    double *row = malloc(sizeof(double) * (size_t)(inner + 1));
    if (!scale || !bias || !row) {
        free(scale);
        free(bias);
        free(row);
        return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    }
    expand(num, k->in[1], &norm, scale, 1.0);
    expand(num, k->nin > 2 ? k->in[2] : NULL, &norm, bias, 0.0);
    for (int64_t o = 0; o < outer; o++) {
        const char *x = (const char *)X->data + (size_t)(o * inner) * es;
        char *y = (char *)k->out[0]->data + (size_t)(o * inner) * es;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < inner; i++) mean += row[i] = num->to_f64(x + (size_t)i * es);
        mean /= (double)inner;
        for (int64_t i = 0; i < inner; i++) var += (row[i] - mean) * (row[i] - mean);
        double inv = 1.0 / sqrt(var / (double)inner + a->epsilon);
        for (int64_t i = 0; i < inner; i++) num->from_f64(y + (size_t)i * es, (row[i] - mean) * inv * scale[i] + bias[i]);
        if (k->nout > 1 && k->out[1]) num->from_f64(ts_num_at(num, k->out[1]->data, o), mean);
        if (k->nout > 2 && k->out[2]) num->from_f64(ts_num_at(num, k->out[2]->data, o), inv);
    }
    free(scale);
    free(bias);
    free(row);
    return TS_OK;
}

static double ln_flops(const ts_node *n, const ts_graph *g)
{
    return 5.0 * (double)ts_shape_numel(&g->values[n->outputs[0]].shape);
}

const ts_op_desc ts_op_layernorm = {.opset_min = 17, 
    .name = "LayerNormalization", .attr_size = sizeof(ts_layernorm_attrs), .min_inputs = 2, .max_inputs = 3,
    .min_outputs = 1, .max_outputs = 3, .flags = 0, .parse = ln_parse, .emit = ln_emit, .infer = ln_infer,
    .kernel = ln_kernel, .flops = ln_flops,
};
