/* Element-wise binary (and variadic Max/Min) operators with NumPy
 * multidirectional broadcasting; comparisons (Equal, Greater, Less, ...)
 * and logical And/Or/Xor give bools; Mod follows its fmod attribute.  Add/Sub/Mul are polynomial and so run in
 * every number domain; Div, Pow, Max, Min are float-only.  Integer tensors
 * (shape arithmetic from exporters) are computed in int64 whatever the
 * domain, wrapping on overflow like the hardware rather than trapping. */
#include <math.h>
#include <stdint.h>
#include "ops/elementwise.h"

/* ------------------------------------------------------------ inference */

static ts_status check_numeric(ts_infer_ctx *c, int i)
{
    ts_dtype t = c->in[i]->dtype;
    if (t == TS_BOOL || t == TS_UNDEFINED || t == TS_MODP)
        return ts_infer_fail(c, "input %d ('%s') has type %s, expected a number type", i, c->in[i]->name,
                             ts_dtype_name(t));
    return TS_OK;
}

/* All present inputs share a dtype and broadcast together; out = that dtype. */
static ts_status infer_common(ts_infer_ctx *c, bool numeric)
{
    char sa[160], sb[160];
    ts_shape s;
    for (int i = 0; i < c->nin; i++)
        if (!c->in[i]) return ts_infer_fail(c, "input %d is missing", i);
    s = c->in[0]->shape;
    for (int i = 0; i < c->nin; i++) {
        if (c->in[i]->dtype != c->in[0]->dtype)
            return ts_infer_fail(c, "input types differ (%s vs %s)", ts_dtype_name(c->in[0]->dtype),
                                 ts_dtype_name(c->in[i]->dtype));
        if (numeric && check_numeric(c, i)) return c->err->code;
        ts_shape r;
        if (!ts_shape_broadcast(&s, &c->in[i]->shape, &r))
            return ts_infer_fail(c, "shapes %s and %s do not broadcast", ts_shape_str(&s, sa, sizeof sa),
                                 ts_shape_str(&c->in[i]->shape, sb, sizeof sb));
        s = r;
    }
    c->out_shape[0] = s;
    c->out_dtype[0] = c->in[0]->dtype;
    return TS_OK;
}

static ts_status infer_arith(ts_infer_ctx *c) { return infer_common(c, true); }

static ts_status infer_equal(ts_infer_ctx *c)
{
    if (infer_common(c, false)) return c->err->code;
    c->out_dtype[0] = TS_BOOL;
    return TS_OK;
}

/* Pow (opset 12+) lets the exponent have its own numeric type. */
static ts_status infer_pow(ts_infer_ctx *c)
{
    char sa[160], sb[160];
    const ts_value *a = c->in[0], *b = c->in[1];
    if (check_numeric(c, 0) || check_numeric(c, 1)) return c->err->code;
    if (!ts_shape_broadcast(&a->shape, &b->shape, &c->out_shape[0]))
        return ts_infer_fail(c, "shapes %s and %s do not broadcast", ts_shape_str(&a->shape, sa, sizeof sa),
                             ts_shape_str(&b->shape, sb, sizeof sb));
    c->out_dtype[0] = a->dtype;
    return TS_OK;
}

/* -------------------------------------------------------------- kernels */

/* One scalar operation, in each of the three representations a kernel may
 * meet: int64 (integer tensors), the domain (exact ops only), double. */
typedef struct binop {
    bool (*i64)(int64_t a, int64_t b, int64_t *out); /* false: undefined (x/0); NULL: ints unsupported */
    void (*dom)(const ts_num *num, void *d, const void *a, const void *b); /* NULL: float-only op */
    double (*f64)(double a, double b);
} binop;

/* y = op(a, b) with a and b broadcast onto y (y may alias neither). */
static ts_status binary_apply(ts_kernel_ctx *k, const binop *op, const ts_tensor *a, const ts_tensor *b,
                              ts_tensor *y)
{
    const ts_num *num = k->num;
    const ts_shape *shapes[2] = {&a->shape, &b->shape};
    bcast_iter it;
    int64_t n = ts_shape_numel(&y->shape);
    bcast_init(&it, &y->shape, shapes, 2);
    if (dtype_is_int(a->dtype)) {
        if (!op->i64)
            return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "dtype %s not supported", ts_dtype_name(a->dtype));
        for (int64_t i = 0; i < n; i++, bcast_next(&it)) {
            int64_t v;
            if (!op->i64(ts_tensor_get_i64(a, it.off[0]), ts_tensor_get_i64(b, it.off[1]), &v))
                return ts_kernel_fail(k, TS_ERR_INVALID, "integer division by zero");
            el_set_i64(y, i, v);
        }
        return TS_OK;
    }
    if (a->dtype != num->storage)
        return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "dtype %s not supported", ts_dtype_name(a->dtype));
    if (op->dom) {
        for (int64_t i = 0; i < n; i++, bcast_next(&it))
            op->dom(num, ts_num_at(num, y->data, i), ts_num_cat(num, a->data, it.off[0]),
                    ts_num_cat(num, b->data, it.off[1]));
        return TS_OK;
    }
    if (need_float_domain(k)) return k->err->code;
    for (int64_t i = 0; i < n; i++, bcast_next(&it))
        el_set(num, y, i, op->f64(num->to_f64(ts_num_cat(num, a->data, it.off[0])), el_get(num, b, it.off[1])));
    return TS_OK;
}

/* Unsigned arithmetic: int64 overflow wraps instead of being undefined. */
static bool add_i(int64_t a, int64_t b, int64_t *r) { *r = (int64_t)((uint64_t)a + (uint64_t)b); return true; }
static bool sub_i(int64_t a, int64_t b, int64_t *r) { *r = (int64_t)((uint64_t)a - (uint64_t)b); return true; }
static bool mul_i(int64_t a, int64_t b, int64_t *r) { *r = (int64_t)((uint64_t)a * (uint64_t)b); return true; }
static bool div_i(int64_t a, int64_t b, int64_t *r)
{
    if (b == 0) return false;
    /* INT64_MIN / -1 wraps; otherwise truncate toward zero, as ONNX Runtime does */
    *r = b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
    return true;
}
static bool max_i(int64_t a, int64_t b, int64_t *r) { *r = a > b ? a : b; return true; }
static bool min_i(int64_t a, int64_t b, int64_t *r) { *r = a < b ? a : b; return true; }
static int64_t pow_i(int64_t a, int64_t b)
{
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    uint64_t r = 1, base = (uint64_t)a;
    for (; b; b >>= 1) { /* square and multiply, wrapping like int64 */
        if (b & 1) r *= base;
        base *= base;
    }
    return (int64_t)r;
}

static void add_d(const ts_num *n, void *d, const void *a, const void *b) { n->add(d, a, b); }
static void sub_d(const ts_num *n, void *d, const void *a, const void *b) { n->sub(d, a, b); }
static void mul_d(const ts_num *n, void *d, const void *a, const void *b) { n->mul(d, a, b); }

static double add_f(double a, double b) { return a + b; }
static double sub_f(double a, double b) { return a - b; }
static double mul_f(double a, double b) { return a * b; }
static double div_f(double a, double b) { return a / b; }
/* NaN propagates, as in ONNX Runtime's Max/Min. */
static double max_f(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static double min_f(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }

static const binop op_add = {add_i, add_d, add_f}, op_sub = {sub_i, sub_d, sub_f}, op_mul = {mul_i, mul_d, mul_f},
                   op_div = {div_i, NULL, div_f}, op_max = {max_i, NULL, max_f}, op_min = {min_i, NULL, min_f};

static ts_status add_kernel(ts_kernel_ctx *k) { return binary_apply(k, &op_add, k->in[0], k->in[1], k->out[0]); }
static ts_status sub_kernel(ts_kernel_ctx *k) { return binary_apply(k, &op_sub, k->in[0], k->in[1], k->out[0]); }
static ts_status mul_kernel(ts_kernel_ctx *k) { return binary_apply(k, &op_mul, k->in[0], k->in[1], k->out[0]); }
static ts_status div_kernel(ts_kernel_ctx *k) { return binary_apply(k, &op_div, k->in[0], k->in[1], k->out[0]); }

/* Pow's operands may differ in type, so each is read on its own terms. */
static ts_status pow_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *a = k->in[0], *b = k->in[1];
    ts_tensor *y = k->out[0];
    const ts_shape *shapes[2] = {&a->shape, &b->shape};
    bcast_iter it;
    int64_t n = ts_shape_numel(&y->shape);
    bcast_init(&it, &y->shape, shapes, 2);
    if (dtype_is_int(a->dtype) && dtype_is_int(b->dtype)) {
        for (int64_t i = 0; i < n; i++, bcast_next(&it))
            el_set_i64(y, i, pow_i(ts_tensor_get_i64(a, it.off[0]), ts_tensor_get_i64(b, it.off[1])));
        return TS_OK;
    }
    if (need_float_domain(k)) return k->err->code;
    for (int64_t i = 0; i < n; i++, bcast_next(&it)) {
        double v = pow(el_get(k->num, a, it.off[0]), el_get(k->num, b, it.off[1]));
        if (dtype_is_int(y->dtype)) /* int base, float exponent: truncate, saturating */
            el_set_i64(y, i, isnan(v) ? 0 : v >= 0x1p63 ? INT64_MAX : v <= -0x1p63 ? INT64_MIN : (int64_t)v);
        else
            el_set(k->num, y, i, v);
    }
    return TS_OK;
}

/* Variadic: y = in0 broadcast to y, then y = op(y, in_j) for each j. */
static ts_status fold_kernel(ts_kernel_ctx *k, const binop *op)
{
    ts_tensor *y = k->out[0];
    ts_error *err = k->err;
    const ts_shape *shapes[1] = {&k->in[0]->shape};
    bcast_iter it;
    size_t es = ts_dtype_size(y->dtype);
    int64_t n = ts_shape_numel(&y->shape);
    bcast_init(&it, &y->shape, shapes, 1);
    for (int64_t i = 0; i < n; i++, bcast_next(&it))
        for (size_t b = 0; b < es; b++)
            ((char *)y->data)[(size_t)i * es + b] = ((const char *)k->in[0]->data)[(size_t)it.off[0] * es + b];
    for (int j = 1; j < k->nin; j++) {
        ts_tensor *acc = ts_tensor_clone(y, err);
        if (!acc) return err->code;
        ts_status st = binary_apply(k, op, acc, k->in[j], y);
        ts_tensor_unref(acc);
        if (st) return st;
    }
    if (k->nin == 1 && !dtype_is_int(y->dtype) && need_float_domain(k)) return k->err->code;
    return TS_OK;
}

static ts_status max_kernel(ts_kernel_ctx *k) { return fold_kernel(k, &op_max); }
static ts_status sum_kernel(ts_kernel_ctx *k) { return fold_kernel(k, &op_add); }

/* Mean: the sum times the domain's inverse of the input count (exact). */
static ts_status mean_kernel(ts_kernel_ctx *k)
{
    const ts_num *num = k->num;
    ts_tensor *y = k->out[0];
    if (fold_kernel(k, &op_add)) return k->err->code;
    if (y->dtype != num->storage)
        return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "dtype %s not supported", ts_dtype_name(y->dtype));
    ts_scalar c, inv;
    num->from_i64(&c, k->nin);
    if (!num->inv(&inv, &c)) return ts_kernel_fail(k, TS_ERR_INVALID, "mean of %d inputs in the %s domain", k->nin, num->name);
    int64_t n = ts_tensor_numel(y);
    for (int64_t i = 0; i < n; i++) num->mul(ts_num_at(num, y->data, i), ts_num_cat(num, y->data, i), &inv);
    return TS_OK;
}

static ts_status infer_mean(ts_infer_ctx *c)
{
    if (infer_arith(c)) return c->err->code;
    if (!ts_dtype_is_float(c->in[0]->dtype))
        return ts_infer_fail(c, "inputs have type %s, expected a float type", ts_dtype_name(c->in[0]->dtype));
    return TS_OK;
}
static ts_status min_kernel(ts_kernel_ctx *k) { return fold_kernel(k, &op_min); }

/* Equal is exact on integers and bools; on floats it compares real values,
 * which residues mod p cannot do. */
static ts_status equal_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *a = k->in[0], *b = k->in[1];
    ts_tensor *y = k->out[0];
    const ts_shape *shapes[2] = {&a->shape, &b->shape};
    bcast_iter it;
    int64_t n = ts_shape_numel(&y->shape);
    bool ints = dtype_is_int(a->dtype) || a->dtype == TS_BOOL;
    if (!ints && need_float_domain(k)) return k->err->code;
    bcast_init(&it, &y->shape, shapes, 2);
    for (int64_t i = 0; i < n; i++, bcast_next(&it))
        ((uint8_t *)y->data)[i] = ints ? ts_tensor_get_i64(a, it.off[0]) == ts_tensor_get_i64(b, it.off[1])
                                       : el_get(k->num, a, it.off[0]) == el_get(k->num, b, it.off[1]);
    return TS_OK;
}

/* Greater, Less, GreaterOrEqual, LessOrEqual: like Equal, through double
 * for floats (NaN compares false) and int64 for integers. */
enum cmp_kind { CMP_GT, CMP_LT, CMP_GE, CMP_LE };

static bool cmp_i(enum cmp_kind c, int64_t a, int64_t b)
{
    return c == CMP_GT ? a > b : c == CMP_LT ? a < b : c == CMP_GE ? a >= b : a <= b;
}
static bool cmp_f(enum cmp_kind c, double a, double b)
{
    return c == CMP_GT ? a > b : c == CMP_LT ? a < b : c == CMP_GE ? a >= b : a <= b;
}

static ts_status compare_kernel(ts_kernel_ctx *k, enum cmp_kind c)
{
    const ts_tensor *a = k->in[0], *b = k->in[1];
    ts_tensor *y = k->out[0];
    const ts_shape *shapes[2] = {&a->shape, &b->shape};
    bcast_iter it;
    int64_t n = ts_shape_numel(&y->shape);
    bool ints = dtype_is_int(a->dtype);
    if (!ints && need_float_domain(k)) return k->err->code;
    bcast_init(&it, &y->shape, shapes, 2);
    for (int64_t i = 0; i < n; i++, bcast_next(&it))
        ((uint8_t *)y->data)[i] = ints ? cmp_i(c, ts_tensor_get_i64(a, it.off[0]), ts_tensor_get_i64(b, it.off[1]))
                                       : cmp_f(c, el_get(k->num, a, it.off[0]), el_get(k->num, b, it.off[1]));
    return TS_OK;
}
static ts_status greater_kernel(ts_kernel_ctx *k) { return compare_kernel(k, CMP_GT); }
static ts_status less_kernel(ts_kernel_ctx *k) { return compare_kernel(k, CMP_LT); }
static ts_status greater_eq_kernel(ts_kernel_ctx *k) { return compare_kernel(k, CMP_GE); }
static ts_status less_eq_kernel(ts_kernel_ctx *k) { return compare_kernel(k, CMP_LE); }

static ts_status infer_compare(ts_infer_ctx *c)
{
    if (infer_common(c, true)) return c->err->code;
    c->out_dtype[0] = TS_BOOL;
    return TS_OK;
}

/* And, Or, Xor: bool x bool -> bool, exact (no arithmetic). */
enum logic_kind { L_AND, L_OR, L_XOR };

static ts_status infer_logic(ts_infer_ctx *c)
{
    if (infer_common(c, false)) return c->err->code;
    if (c->in[0]->dtype != TS_BOOL)
        return ts_infer_fail(c, "inputs have type %s, expected bool", ts_dtype_name(c->in[0]->dtype));
    return TS_OK;
}

static ts_status logic_kernel(ts_kernel_ctx *k, enum logic_kind l)
{
    const ts_tensor *a = k->in[0], *b = k->in[1];
    ts_tensor *y = k->out[0];
    const ts_shape *shapes[2] = {&a->shape, &b->shape};
    bcast_iter it;
    int64_t n = ts_shape_numel(&y->shape);
    bcast_init(&it, &y->shape, shapes, 2);
    for (int64_t i = 0; i < n; i++, bcast_next(&it)) {
        bool p = ((const uint8_t *)a->data)[it.off[0]], q = ((const uint8_t *)b->data)[it.off[1]];
        ((uint8_t *)y->data)[i] = l == L_AND ? p && q : l == L_OR ? p || q : p != q;
    }
    return TS_OK;
}
static ts_status and_kernel(ts_kernel_ctx *k) { return logic_kernel(k, L_AND); }
static ts_status or_kernel(ts_kernel_ctx *k) { return logic_kernel(k, L_OR); }
static ts_status xor_kernel(ts_kernel_ctx *k) { return logic_kernel(k, L_XOR); }

/* Mod: fmod 0 (integers only) takes the divisor's sign, like Python's %;
 * fmod 1 takes the dividend's, like C's fmod (required for floats). */
typedef struct mod_attrs {
    int fmod;
} mod_attrs;

static ts_status mod_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    int64_t v;
    (void)opset;
    if (ts_attr_get_int(a, na, "fmod", 0, &v, err)) return err->code;
    if (v != 0 && v != 1) return ts_attr_fail(err, ts_attr_find(a, na, "fmod"), "expected 0 or 1");
    ((mod_attrs *)attrs)->fmod = (int)v;
    return TS_OK;
}
static int mod_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_int("fmod", ((const mod_attrs *)attrs)->fmod);
    return 1;
}
static ts_status infer_mod(ts_infer_ctx *c)
{
    if (infer_arith(c)) return c->err->code;
    if (ts_dtype_is_float(c->in[0]->dtype) && !((const mod_attrs *)c->attrs)->fmod)
        return ts_infer_fail(c, "fmod must be 1 for float inputs (%s)", ts_dtype_name(c->in[0]->dtype));
    return TS_OK;
}
static bool mod_i(int64_t a, int64_t b, int64_t *r)
{
    if (b == 0) return false;
    int64_t m = b == -1 ? 0 : a % b; /* INT64_MIN % -1 traps in C */
    if (m && (m < 0) != (b < 0)) m += b;
    *r = m;
    return true;
}
static bool fmod_i(int64_t a, int64_t b, int64_t *r)
{
    if (b == 0) return false;
    *r = b == -1 ? 0 : a % b;
    return true;
}
static double fmod_f(double a, double b) { return fmod(a, b); }
static const binop op_mod = {mod_i, NULL, fmod_f}, op_fmod = {fmod_i, NULL, fmod_f};
static ts_status mod_kernel(ts_kernel_ctx *k)
{
    const binop *op = ((const mod_attrs *)k->attrs)->fmod ? &op_fmod : &op_mod;
    return binary_apply(k, op, k->in[0], k->in[1], k->out[0]);
}

static double variadic_flops(const ts_node *n, const ts_graph *g)
{
    double out = (double)ts_shape_numel(&g->values[n->outputs[0]].shape);
    return out * (n->ninputs > 1 ? n->ninputs - 1 : 1);
}

#define BINARY(NAME) .name = NAME, .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1

const ts_op_desc ts_op_add = {.opset_min = 7, 
    BINARY("Add"), .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT,
    .linear_inputs = 0x3, /* degree 1 in each (PET: a sum of multi-linear terms, docs/pet.md) */
    .expr = "L[i] A[i] + B[i]", .infer = infer_arith, .kernel = add_kernel,
};
const ts_op_desc ts_op_sub = {.opset_min = 7, 
    BINARY("Sub"), .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT, .linear_inputs = 0x3, .expr = "L[i] A[i] - B[i]",
    .infer = infer_arith, .kernel = sub_kernel,
};
const ts_op_desc ts_op_mul = {.opset_min = 7, 
    BINARY("Mul"), .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT, .linear_inputs = 0x3, .expr = "L[i] A[i] * B[i]",
    .infer = infer_arith, .kernel = mul_kernel,
};
const ts_op_desc ts_op_div = {.opset_min = 7, 
    BINARY("Div"), .flags = TS_OP_ELEMENTWISE, .linear_inputs = 0x1, /* linear in the dividend */
    .expr = "L[i] A[i] / B[i]", .infer = infer_arith, .kernel = div_kernel,
};
const ts_op_desc ts_op_pow = {.opset_min = 7, 
    BINARY("Pow"), .flags = TS_OP_ELEMENTWISE, .infer = infer_pow, .kernel = pow_kernel,
};
const ts_op_desc ts_op_equal = {.opset_min = 7, 
    BINARY("Equal"), .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT, .infer = infer_equal, .kernel = equal_kernel,
};
const ts_op_desc ts_op_max = {.opset_min = 1, 
    .name = "Max", .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_ELEMENTWISE, .infer = infer_arith, .kernel = max_kernel, .flops = variadic_flops,
};
/* Sum and Mean: variadic, polynomial (exact) and linear in every input. */
const ts_op_desc ts_op_sum = {.opset_min = 1, 
    .name = "Sum", .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT, .linear_inputs = 0xffffffffu, .infer = infer_arith,
    .kernel = sum_kernel, .flops = variadic_flops,
};
const ts_op_desc ts_op_mean = {.opset_min = 1, 
    .name = "Mean", .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_ELEMENTWISE | TS_OP_EXACT, .linear_inputs = 0xffffffffu, .infer = infer_mean,
    .kernel = mean_kernel, .flops = variadic_flops,
};
const ts_op_desc ts_op_min = {.opset_min = 1, 
    .name = "Min", .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_ELEMENTWISE, .infer = infer_arith, .kernel = min_kernel, .flops = variadic_flops,
};

#define CMP_DESC(SYM, NAME, INFER, FLAGS, SINCE) \
    const ts_op_desc ts_op_##SYM = {.opset_min = SINCE, BINARY(NAME), .flags = FLAGS, .infer = INFER, \
                                    .kernel = SYM##_kernel};
CMP_DESC(greater, "Greater", infer_compare, TS_OP_ELEMENTWISE, 7)
CMP_DESC(less, "Less", infer_compare, TS_OP_ELEMENTWISE, 7)
CMP_DESC(greater_eq, "GreaterOrEqual", infer_compare, TS_OP_ELEMENTWISE, 12)
CMP_DESC(less_eq, "LessOrEqual", infer_compare, TS_OP_ELEMENTWISE, 12)
CMP_DESC(and, "And", infer_logic, TS_OP_ELEMENTWISE | TS_OP_EXACT, 7)
CMP_DESC(or, "Or", infer_logic, TS_OP_ELEMENTWISE | TS_OP_EXACT, 7)
CMP_DESC(xor, "Xor", infer_logic, TS_OP_ELEMENTWISE | TS_OP_EXACT, 7)
const ts_op_desc ts_op_mod = {.opset_min = 10, 
    BINARY("Mod"), .attr_size = sizeof(mod_attrs), .flags = TS_OP_ELEMENTWISE, .parse = mod_parse,
    .emit = mod_emit, .infer = infer_mod, .kernel = mod_kernel,
};
