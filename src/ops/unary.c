/* Element-wise unary operators without attributes.  Neg is polynomial and
 * Relu has a polynomial stand-in in the mod-p domain (see relu_kernel);
 * the rest are float-only, computed in double through the domain
 * (trigonometric and hyperbolic functions, rounding, Sign, Softsign,
 * Softplus; IsNaN gives bools). */
#include <math.h>
#include "ops/elementwise.h"

/* Same dtype and shape as the input.  `ints`: integer tensors allowed too. */
static ts_status infer_same(ts_infer_ctx *c, bool ints)
{
    ts_dtype t = c->in[0]->dtype;
    if (!ts_dtype_is_float(t) && !(ints && dtype_is_int(t)))
        return ts_infer_fail(c, "input '%s' has type %s, expected %s", c->in[0]->name, ts_dtype_name(t),
                             ints ? "a number type" : "a float type");
    c->out_dtype[0] = t;
    c->out_shape[0] = c->in[0]->shape;
    return TS_OK;
}
static ts_status infer_float(ts_infer_ctx *c) { return infer_same(c, false); }
static ts_status infer_number(ts_infer_ctx *c) { return infer_same(c, true); }

/* y[i] = f(x[i]) in double, or fi(x[i]) on integer tensors (fi NULL: none). */
static ts_status unary_apply(ts_kernel_ctx *k, double (*f)(double), int64_t (*fi)(int64_t))
{
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    int64_t n = ts_tensor_numel(y);
    if (dtype_is_int(x->dtype)) {
        if (!fi) return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "dtype %s not supported", ts_dtype_name(x->dtype));
        for (int64_t i = 0; i < n; i++) el_set_i64(y, i, fi(ts_tensor_get_i64(x, i)));
        return TS_OK;
    }
    if (need_float_domain(k)) return k->err->code;
    for (int64_t i = 0; i < n; i++) el_set(k->num, y, i, f(el_get(k->num, x, i)));
    return TS_OK;
}

static double relu_f(double x) { return x > 0 || isnan(x) ? x : 0; }
static int64_t relu_i(int64_t x) { return x > 0 ? x : 0; }
static double neg_f(double x) { return -x; }
static int64_t neg_i(int64_t x) { return (int64_t)(0 - (uint64_t)x); } /* INT64_MIN wraps */
static double abs_f(double x) { return fabs(x); }
static int64_t abs_i(int64_t x) { return x < 0 ? neg_i(x) : x; }
static double recip_f(double x) { return 1.0 / x; }
static double sigmoid_f(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

/* Relu in the exact domain is TASO's stand-in x(x+1)+1: not relu, but a
 * fixed non-linear polynomial, so that fingerprints of graphs containing
 * relu stay exact and two graphs agree only if they agree with relu treated
 * as an opaque function (relu(a)+relu(b) != relu(a+b) stays distinguished). */
static ts_status relu_kernel(ts_kernel_ctx *k)
{
    const ts_num *num = k->num;
    const ts_tensor *x = k->in[0];
    if (!num->exact || x->dtype != num->storage) return unary_apply(k, relu_f, relu_i);
    ts_scalar one, t;
    num->one(&one);
    int64_t n = ts_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        const void *xi = ts_num_cat(num, x->data, i);
        void *yi = ts_num_at(num, k->out[0]->data, i);
        num->add(&t, xi, &one);
        num->mul(&t, &t, xi);
        num->add(yi, &t, &one);
    }
    return TS_OK;
}

/* Neg is linear: computed in the domain itself, so it is exact. */
static ts_status neg_kernel(ts_kernel_ctx *k)
{
    const ts_num *num = k->num;
    const ts_tensor *x = k->in[0];
    if (x->dtype != num->storage) return unary_apply(k, neg_f, neg_i);
    int64_t n = ts_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) num->neg(ts_num_at(num, k->out[0]->data, i), ts_num_cat(num, x->data, i));
    return TS_OK;
}

static ts_status abs_kernel(ts_kernel_ctx *k) { return unary_apply(k, abs_f, abs_i); }
static ts_status sqrt_kernel(ts_kernel_ctx *k) { return unary_apply(k, sqrt, NULL); }
static ts_status exp_kernel(ts_kernel_ctx *k) { return unary_apply(k, exp, NULL); }
static ts_status log_kernel(ts_kernel_ctx *k) { return unary_apply(k, log, NULL); }
static ts_status recip_kernel(ts_kernel_ctx *k) { return unary_apply(k, recip_f, NULL); }
static ts_status erf_kernel(ts_kernel_ctx *k) { return unary_apply(k, erf, NULL); }
static ts_status sigmoid_kernel(ts_kernel_ctx *k) { return unary_apply(k, sigmoid_f, NULL); }
static ts_status tanh_kernel(ts_kernel_ctx *k) { return unary_apply(k, tanh, NULL); }

static double sign_f(double x) { return x > 0 ? 1 : x < 0 ? -1 : x; } /* NaN stays NaN */
static int64_t sign_i(int64_t x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }
static int64_t same_i(int64_t x) { return x; }
static double softsign_f(double x) { return x / (1 + fabs(x)); }
/* log(1 + e^x) without overflow for large x */
static double softplus_f(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

#define FLOAT_UNARY(NAME, F) \
    static ts_status NAME##_kernel(ts_kernel_ctx *k) { return unary_apply(k, F, NULL); }
FLOAT_UNARY(acos, acos)
FLOAT_UNARY(acosh, acosh)
FLOAT_UNARY(asin, asin)
FLOAT_UNARY(asinh, asinh)
FLOAT_UNARY(atan, atan)
FLOAT_UNARY(atanh, atanh)
FLOAT_UNARY(cos, cos)
FLOAT_UNARY(cosh, cosh)
FLOAT_UNARY(sin, sin)
FLOAT_UNARY(sinh, sinh)
FLOAT_UNARY(tan, tan)
FLOAT_UNARY(softsign, softsign_f)
FLOAT_UNARY(softplus, softplus_f)
/* Round is half to even (nearbyint in the default rounding mode). */
FLOAT_UNARY(round, nearbyint)
static ts_status ceil_kernel(ts_kernel_ctx *k) { return unary_apply(k, ceil, same_i); }
static ts_status floor_kernel(ts_kernel_ctx *k) { return unary_apply(k, floor, same_i); }
static ts_status sign_kernel(ts_kernel_ctx *k) { return unary_apply(k, sign_f, sign_i); }

/* IsNaN: float -> bool. */
static ts_status infer_isnan(ts_infer_ctx *c)
{
    if (infer_float(c)) return c->err->code;
    c->out_dtype[0] = TS_BOOL;
    return TS_OK;
}
static ts_status isnan_kernel(ts_kernel_ctx *k)
{
    if (need_float_domain(k)) return k->err->code;
    int64_t n = ts_tensor_numel(k->in[0]);
    for (int64_t i = 0; i < n; i++) ((uint8_t *)k->out[0]->data)[i] = isnan(el_get(k->num, k->in[0], i));
    return TS_OK;
}

/* IsInf: float -> bool, each sign enabled by its attribute (default both). */
typedef struct isinf_attrs {
    int neg, pos;
} isinf_attrs;

static ts_status isinf_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    isinf_attrs *p = attrs;
    int64_t n, q;
    (void)opset;
    if (ts_attr_get_int(a, na, "detect_negative", 1, &n, err) || ts_attr_get_int(a, na, "detect_positive", 1, &q, err))
        return err->code;
    p->neg = n != 0;
    p->pos = q != 0;
    return TS_OK;
}
static int isinf_emit(const void *attrs, ts_attr *out, int max)
{
    const isinf_attrs *p = attrs;
    if (max < 2) return 0;
    out[0] = ts_attr_int("detect_negative", p->neg);
    out[1] = ts_attr_int("detect_positive", p->pos);
    return 2;
}
static ts_status isinf_kernel(ts_kernel_ctx *k)
{
    const isinf_attrs *p = k->attrs;
    if (need_float_domain(k)) return k->err->code;
    int64_t n = ts_tensor_numel(k->in[0]);
    for (int64_t i = 0; i < n; i++) {
        double v = el_get(k->num, k->in[0], i);
        ((uint8_t *)k->out[0]->data)[i] = isinf(v) && (v > 0 ? p->pos : p->neg);
    }
    return TS_OK;
}

/* Not: bool -> bool, exact (no arithmetic at all). */
static ts_status infer_not(ts_infer_ctx *c)
{
    if (c->in[0]->dtype != TS_BOOL)
        return ts_infer_fail(c, "input '%s' has type %s, expected bool", c->in[0]->name,
                             ts_dtype_name(c->in[0]->dtype));
    c->out_dtype[0] = TS_BOOL;
    c->out_shape[0] = c->in[0]->shape;
    return TS_OK;
}
static ts_status not_kernel(ts_kernel_ctx *k)
{
    int64_t n = ts_tensor_numel(k->in[0]);
    for (int64_t i = 0; i < n; i++) ((uint8_t *)k->out[0]->data)[i] = !((const uint8_t *)k->in[0]->data)[i];
    return TS_OK;
}

#define UNARY(NAME) .name = NAME, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1

const ts_op_desc ts_op_relu = {.opset_min = 1, UNARY("Relu"), .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT,
                               .infer = infer_number,
                               .kernel = relu_kernel};
const ts_op_desc ts_op_neg = {.opset_min = 1, UNARY("Neg"), .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT,
                              .linear_inputs = 0x1,
                              .expr = "L[i] -A[i]", .infer = infer_number, .kernel = neg_kernel};
const ts_op_desc ts_op_abs = {.opset_min = 1, UNARY("Abs"), .flags = TS_OP_ELEMENTWISE, .infer = infer_number,
                              .kernel = abs_kernel};
const ts_op_desc ts_op_sqrt = {.opset_min = 1, UNARY("Sqrt"), .flags = TS_OP_ELEMENTWISE, .infer = infer_float,
                               .kernel = sqrt_kernel};
const ts_op_desc ts_op_exp = {.opset_min = 1, UNARY("Exp"), .flags = TS_OP_ELEMENTWISE, .infer = infer_float,
                              .kernel = exp_kernel};
const ts_op_desc ts_op_log = {.opset_min = 1, UNARY("Log"), .flags = TS_OP_ELEMENTWISE, .infer = infer_float,
                              .kernel = log_kernel};
const ts_op_desc ts_op_reciprocal = {.opset_min = 1, UNARY("Reciprocal"), .flags = TS_OP_ELEMENTWISE,
                                     .infer = infer_float,
                                     .kernel = recip_kernel};
const ts_op_desc ts_op_erf = {.opset_min = 9, UNARY("Erf"), .flags = TS_OP_ELEMENTWISE, .infer = infer_float,
                              .kernel = erf_kernel};
const ts_op_desc ts_op_sigmoid = {.opset_min = 1, UNARY("Sigmoid"), .flags = TS_OP_ELEMENTWISE, .infer = infer_float,
                                  .kernel = sigmoid_kernel};
const ts_op_desc ts_op_tanh = {.opset_min = 1, UNARY("Tanh"), .flags = TS_OP_ELEMENTWISE, .infer = infer_float,
                               .kernel = tanh_kernel};
const ts_op_desc ts_op_not = {.opset_min = 1, UNARY("Not"), .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT,
                              .infer = infer_not,
                              .kernel = not_kernel};

#define FLOAT_DESC(SYM, NAME, INFER, SINCE) \
    const ts_op_desc ts_op_##SYM = {.opset_min = SINCE, UNARY(NAME), .flags = TS_OP_ELEMENTWISE, .infer = INFER, \
                                    .kernel = SYM##_kernel};
FLOAT_DESC(acos, "Acos", infer_float, 7)
FLOAT_DESC(acosh, "Acosh", infer_float, 9)
FLOAT_DESC(asin, "Asin", infer_float, 7)
FLOAT_DESC(asinh, "Asinh", infer_float, 9)
FLOAT_DESC(atan, "Atan", infer_float, 7)
FLOAT_DESC(atanh, "Atanh", infer_float, 9)
FLOAT_DESC(cos, "Cos", infer_float, 7)
FLOAT_DESC(cosh, "Cosh", infer_float, 9)
FLOAT_DESC(sin, "Sin", infer_float, 7)
FLOAT_DESC(sinh, "Sinh", infer_float, 9)
FLOAT_DESC(tan, "Tan", infer_float, 7)
FLOAT_DESC(softsign, "Softsign", infer_float, 1)
FLOAT_DESC(softplus, "Softplus", infer_float, 1)
FLOAT_DESC(round, "Round", infer_float, 11)
FLOAT_DESC(ceil, "Ceil", infer_number, 1)
FLOAT_DESC(floor, "Floor", infer_number, 1)
FLOAT_DESC(sign, "Sign", infer_number, 9)
FLOAT_DESC(isnan, "IsNaN", infer_isnan, 9)
const ts_op_desc ts_op_isinf = {.opset_min = 10, UNARY("IsInf"), .attr_size = sizeof(isinf_attrs),
                                .flags = TS_OP_ELEMENTWISE,
                                .parse = isinf_parse, .emit = isinf_emit, .infer = infer_isnan, .kernel = isinf_kernel};
