/* Parameterized activations: LeakyRelu, HardSigmoid, HardSwish, Clip, PRelu,
 * Elu, Selu, Celu, ThresholdedRelu, Shrink.
 * All are piecewise and so float-only (no mod-p kernel).  Attribute values
 * are kept as float, the precision ONNX stores them in, so results match
 * ONNX Runtime bit for bit where the formula allows. */
#include <float.h>
#include <math.h>
#include "ops/elementwise.h"
#include "ops/attrs.h"

static ts_status infer_float(ts_infer_ctx *c)
{
    ts_dtype t = c->in[0]->dtype;
    if (!ts_dtype_is_float(t))
        return ts_infer_fail(c, "input '%s' has type %s, expected a float type", c->in[0]->name, ts_dtype_name(t));
    c->out_dtype[0] = t;
    c->out_shape[0] = c->in[0]->shape;
    return TS_OK;
}

/* y[i] = f(x[i], attrs) through the (float) domain. */
static ts_status apply(ts_kernel_ctx *k, double (*f)(double, const ts_alpha_beta_attrs *),
                       const ts_alpha_beta_attrs *p)
{
    if (need_float_domain(k)) return k->err->code;
    int64_t n = ts_tensor_numel(k->out[0]);
    for (int64_t i = 0; i < n; i++) el_set(k->num, k->out[0], i, f(el_get(k->num, k->in[0], i), p));
    return TS_OK;
}

static ts_status parse_ab(void *attrs, const ts_attr *a, int na, double alpha, double beta, ts_error *err)
{
    ts_alpha_beta_attrs *p = attrs;
    double v;
    if (ts_attr_get_float(a, na, "alpha", alpha, &v, err)) return err->code;
    p->alpha = (float)v;
    if (ts_attr_get_float(a, na, "beta", beta, &v, err)) return err->code;
    p->beta = (float)v;
    return TS_OK;
}

/* ------------------------------------------------------------ LeakyRelu */

static ts_status leaky_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    return parse_ab(attrs, a, na, 0.01, 0, err);
}
static int leaky_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_float("alpha", ((const ts_alpha_beta_attrs *)attrs)->alpha);
    return 1;
}
static double leaky_f(double x, const ts_alpha_beta_attrs *p) { return x >= 0 ? x : x * p->alpha; }
static ts_status leaky_kernel(ts_kernel_ctx *k) { return apply(k, leaky_f, k->attrs); }

/* ---------------------------------------------------------- HardSigmoid */

static ts_status hsig_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    return parse_ab(attrs, a, na, 0.2, 0.5, err);
}
static int hsig_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_alpha_beta_attrs *p = attrs;
    if (max < 2) return 0;
    out[0] = ts_attr_float("alpha", p->alpha);
    out[1] = ts_attr_float("beta", p->beta);
    return 2;
}
static double clamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }
static double hsig_f(double x, const ts_alpha_beta_attrs *p) { return clamp01(p->alpha * x + p->beta); }
static ts_status hsig_kernel(ts_kernel_ctx *k) { return apply(k, hsig_f, k->attrs); }

/* HardSwish = x * HardSigmoid(x) with alpha 1/6, beta 0.5 (opset 14). */
static double hswish_f(double x, const ts_alpha_beta_attrs *p)
{
    (void)p;
    return x * clamp01(x / 6 + 0.5);
}
static ts_status hswish_kernel(ts_kernel_ctx *k) { return apply(k, hswish_f, NULL); }

/* ----------------------------------------------------------------- Clip */

/* Bounds are attributes before opset 11 and optional scalar inputs after;
 * either may be absent (no bound on that side). */
static ts_status clip_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_clip_attrs *p = attrs;
    double v;
    if (opset >= 11) {
        const ts_attr *m = ts_attr_find(a, na, "min");
        if (!m) m = ts_attr_find(a, na, "max");
        /* ignoring them would silently drop the bounds */
        return m ? ts_attr_fail(err, m, "not allowed from opset 11; bounds are the inputs min and max") : TS_OK;
    }
    p->has_min = ts_attr_find(a, na, "min") != NULL;
    p->has_max = ts_attr_find(a, na, "max") != NULL;
    if (ts_attr_get_float(a, na, "min", -FLT_MAX, &v, err)) return err->code;
    p->min = (float)v;
    if (ts_attr_get_float(a, na, "max", FLT_MAX, &v, err)) return err->code;
    p->max = (float)v;
    return TS_OK;
}
static int clip_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_clip_attrs *p = attrs;
    int n = 0;
    if (p->has_min && n < max) out[n++] = ts_attr_float("min", p->min);
    if (p->has_max && n < max) out[n++] = ts_attr_float("max", p->max);
    return n;
}

static ts_status clip_infer(ts_infer_ctx *c)
{
    static const char *const what[3] = {"input", "min", "max"};
    const ts_value *x = c->in[0];
    char s[160];
    if (!ts_dtype_is_float(x->dtype) && !dtype_is_int(x->dtype))
        return ts_infer_fail(c, "input '%s' has type %s, expected a number type", x->name, ts_dtype_name(x->dtype));
    if (dtype_is_int(x->dtype) && c->opset < 12)
        return ts_infer_fail(c, "input '%s' has type %s; integer Clip needs opset 12", x->name,
                             ts_dtype_name(x->dtype));
    if (c->opset < 11 && c->nin > 1)
        return ts_infer_fail(c, "has %d inputs; before opset 11 the bounds are the attributes min and max", c->nin);
    for (int i = 1; i < c->nin; i++) {
        if (!c->in[i]) continue;
        if (ts_shape_numel(&c->in[i]->shape) != 1)
            return ts_infer_fail(c, "%s ('%s') must be a scalar, got shape %s", what[i], c->in[i]->name,
                                 ts_shape_str(&c->in[i]->shape, s, sizeof s));
        if (c->in[i]->dtype != x->dtype)
            return ts_infer_fail(c, "%s ('%s') has type %s, expected %s like the input", what[i], c->in[i]->name,
                                 ts_dtype_name(c->in[i]->dtype), ts_dtype_name(x->dtype));
    }
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = x->shape;
    return TS_OK;
}

static ts_status clip_kernel(ts_kernel_ctx *k)
{
    const ts_clip_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0], *lo = k->nin > 1 ? k->in[1] : NULL, *hi = k->nin > 2 ? k->in[2] : NULL;
    ts_tensor *y = k->out[0];
    int64_t n = ts_tensor_numel(y);
    if (dtype_is_int(x->dtype)) {
        int64_t l = lo ? ts_tensor_get_i64(lo, 0) : INT64_MIN, h = hi ? ts_tensor_get_i64(hi, 0) : INT64_MAX;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = ts_tensor_get_i64(x, i);
            v = v < l ? l : v;
            el_set_i64(y, i, v > h ? h : v);
        }
        return TS_OK;
    }
    if (need_float_domain(k)) return k->err->code;
    double l = lo ? el_get(k->num, lo, 0) : p->has_min ? p->min : -INFINITY;
    double h = hi ? el_get(k->num, hi, 0) : p->has_max ? p->max : INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double v = el_get(k->num, x, i);
        v = v < l ? l : v; /* min(max(x, lo), hi): lo > hi gives hi, as ORT does */
        el_set(k->num, y, i, v > h ? h : v);
    }
    return TS_OK;
}

/* ---------------------------------------------------------------- PRelu */

/* slope broadcasts onto x in one direction only (opset 7+). */
static ts_status prelu_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0], *s = c->in[1];
    char a[160], b[160];
    ts_shape r;
    if (infer_float(c)) return c->err->code;
    if (s->dtype != x->dtype)
        return ts_infer_fail(c, "slope ('%s') has type %s, expected %s like the input", s->name,
                             ts_dtype_name(s->dtype), ts_dtype_name(x->dtype));
    if (!ts_shape_broadcast(&x->shape, &s->shape, &r) || !ts_shape_eq(&r, &x->shape))
        return ts_infer_fail(c, "slope shape %s does not broadcast to input shape %s",
                             ts_shape_str(&s->shape, b, sizeof b), ts_shape_str(&x->shape, a, sizeof a));
    return TS_OK;
}

static ts_status prelu_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0], *s = k->in[1];
    ts_tensor *y = k->out[0];
    const ts_shape *shapes[1] = {&s->shape};
    bcast_iter it;
    int64_t n = ts_tensor_numel(y);
    if (need_float_domain(k)) return k->err->code;
    bcast_init(&it, &y->shape, shapes, 1);
    for (int64_t i = 0; i < n; i++, bcast_next(&it)) {
        double v = el_get(k->num, x, i);
        el_set(k->num, y, i, v < 0 ? v * el_get(k->num, s, it.off[0]) : v);
    }
    return TS_OK;
}

#define UNARY(NAME) .name = NAME, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1

const ts_op_desc ts_op_leakyrelu = {.opset_min = 1, UNARY("LeakyRelu"), .attr_size = sizeof(ts_alpha_beta_attrs),
                                    .flags = TS_OP_ELEMENTWISE, .parse = leaky_parse, .emit = leaky_emit,
                                    .infer = infer_float, .kernel = leaky_kernel};
const ts_op_desc ts_op_hardsigmoid = {.opset_min = 1, UNARY("HardSigmoid"), .attr_size = sizeof(ts_alpha_beta_attrs),
                                      .flags = TS_OP_ELEMENTWISE, .parse = hsig_parse, .emit = hsig_emit,
                                      .infer = infer_float, .kernel = hsig_kernel};
const ts_op_desc ts_op_hardswish = {.opset_min = 14, UNARY("HardSwish"), .flags = TS_OP_ELEMENTWISE,
                                    .infer = infer_float,
                                    .kernel = hswish_kernel};
const ts_op_desc ts_op_clip = {.opset_min = 1, 
    .name = "Clip", .attr_size = sizeof(ts_clip_attrs), .min_inputs = 1, .max_inputs = 3, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_ELEMENTWISE, .parse = clip_parse, .emit = clip_emit, .infer = clip_infer,
    .kernel = clip_kernel,
};
const ts_op_desc ts_op_prelu = {.opset_min = 7, 
    .name = "PRelu", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_ELEMENTWISE, .infer = prelu_infer, .kernel = prelu_kernel,
};

/* ------------------------------------ Elu, Selu, Celu, ThresholdedRelu, Shrink */

/* Two float attributes under their ONNX names, kept in alpha/beta, and
 * written back only when the model gave them. */
typedef struct named_pair {
    const char *a, *b; /* NULL b: one attribute */
    double da, db;
} named_pair;

static const named_pair ELU = {"alpha", NULL, 1.0, 0}, CELU = {"alpha", NULL, 1.0, 0},
                        THRELU = {"alpha", NULL, 1.0, 0}, SHRINK = {"bias", "lambd", 0.0, 0.5},
                        /* the spec's float constants, exactly */
    SELU = {"alpha", "gamma", 1.67326319217681884765625, 1.05070102214813232421875};

static ts_status pair_parse(const named_pair *np, void *attrs, const ts_attr *a, int na, ts_error *err)
{
    ts_alpha_beta_attrs *p = attrs;
    double v;
    if (ts_attr_get_float(a, na, np->a, np->da, &v, err)) return err->code;
    p->alpha = (float)v;
    if (np->b && ts_attr_get_float(a, na, np->b, np->db, &v, err)) return err->code;
    p->beta = np->b ? (float)v : 0;
    return TS_OK;
}
static int pair_emit(const named_pair *np, const void *attrs, ts_attr *out, int max)
{
    const ts_alpha_beta_attrs *p = attrs;
    if (max < 2) return 0;
    out[0] = ts_attr_float(np->a, p->alpha);
    if (!np->b) return 1;
    out[1] = ts_attr_float(np->b, p->beta);
    return 2;
}

static double elu_f(double x, const ts_alpha_beta_attrs *p) { return x >= 0 ? x : p->alpha * expm1(x); }
static double selu_f(double x, const ts_alpha_beta_attrs *p)
{
    return p->beta * (x > 0 ? x : p->alpha * expm1(x));
}
static double celu_f(double x, const ts_alpha_beta_attrs *p)
{
    return fmax(0, x) + fmin(0, p->alpha * expm1(x / p->alpha));
}
static double threlu_f(double x, const ts_alpha_beta_attrs *p) { return x > p->alpha ? x : 0; }
/* Shrink: alpha holds bias, beta lambd */
static double shrink_f(double x, const ts_alpha_beta_attrs *p)
{
    return x < -p->beta ? x + p->alpha : x > p->beta ? x - p->alpha : 0;
}

#define PAIR_ACT(SYM, NAME, PAIR, SINCE)                                                                           \
    static ts_status SYM##_parse(void *at, const ts_attr *a, int na, int opset, ts_error *err)                     \
    {                                                                                                              \
        (void)opset;                                                                                               \
        return pair_parse(&PAIR, at, a, na, err);                                                                  \
    }                                                                                                              \
    static int SYM##_emit(const void *at, ts_attr *out, int max) { return pair_emit(&PAIR, at, out, max); }       \
    static ts_status SYM##_kernel(ts_kernel_ctx *k) { return apply(k, SYM##_f, k->attrs); }                       \
    const ts_op_desc ts_op_##SYM = {.opset_min = SINCE, .name = NAME, .attr_size = sizeof(ts_alpha_beta_attrs),    \
                                    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,          \
                                    .flags = TS_OP_ELEMENTWISE, .parse = SYM##_parse, .emit = SYM##_emit,          \
                                    .infer = infer_float, .kernel = SYM##_kernel};
PAIR_ACT(elu, "Elu", ELU, 1)
PAIR_ACT(selu, "Selu", SELU, 1)
PAIR_ACT(celu, "Celu", CELU, 12)
PAIR_ACT(threlu, "ThresholdedRelu", THRELU, 10)
PAIR_ACT(shrink, "Shrink", SHRINK, 9)
