/* Generic attributes (API boundary) and typed readers for op parsers. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "ops/list.h"
#include "ops/op.h"

ts_attr ts_attr_int(const char *name, int64_t v) { return (ts_attr){.name = name, .kind = TS_ATTR_INT, .i = v}; }
ts_attr ts_attr_float(const char *name, double v) { return (ts_attr){.name = name, .kind = TS_ATTR_FLOAT, .f = v}; }
ts_attr ts_attr_string(const char *name, const char *s) { return (ts_attr){.name = name, .kind = TS_ATTR_STRING, .s = s}; }
ts_attr ts_attr_ints(const char *name, const int64_t *v, int n)
{
    return (ts_attr){.name = name, .kind = TS_ATTR_INTS, .ints = v, .n = n};
}
ts_attr ts_attr_floats(const char *name, const float *v, int n)
{
    return (ts_attr){.name = name, .kind = TS_ATTR_FLOATS, .floats = v, .n = n};
}
ts_attr ts_attr_tensor(const char *name, const ts_tensor *t) { return (ts_attr){.name = name, .kind = TS_ATTR_TENSOR, .t = t}; }

void ts_attr_set_scalar_tensor(ts_attr *a, const char *name, ts_dtype dtype, double v)
{
    memset(a, 0, sizeof *a);
    a->name = name;
    a->kind = TS_ATTR_TENSOR;
    a->scalar.dtype = dtype;
    a->scalar.shape = ts_shape_make(1, (const int64_t[]){1});
    a->scalar.data = &a->scalar_data;
    a->scalar.nbytes = ts_dtype_size(dtype);
    a->scalar.refcount = 1;
    ts_tensor_set_f64(&a->scalar, 0, v);
    a->t = &a->scalar;
}

const ts_attr *ts_attr_find(const ts_attr *a, int na, const char *name)
{
    for (int i = 0; i < na; i++)
        if (a[i].name && !strcmp(a[i].name, name)) return &a[i];
    return NULL;
}

ts_status ts_attr_fail(ts_error *err, const ts_attr *a, const char *what)
{
    return ts_error_set(err, TS_ERR_INVALID, "attribute '%s': %s", a->name, what);
}

ts_status ts_attr_get_int(const ts_attr *a, int na, const char *name, int64_t def, int64_t *out, ts_error *err)
{
    const ts_attr *x = ts_attr_find(a, na, name);
    *out = def;
    if (!x) return TS_OK;
    if (x->kind != TS_ATTR_INT) return ts_attr_fail(err, x, "expected an integer");
    *out = x->i;
    return TS_OK;
}

ts_status ts_attr_get_float(const ts_attr *a, int na, const char *name, double def, double *out, ts_error *err)
{
    const ts_attr *x = ts_attr_find(a, na, name);
    *out = def;
    if (!x) return TS_OK;
    if (x->kind == TS_ATTR_INT) { /* exporters sometimes write 0 for 0.0 */
        *out = (double)x->i;
        return TS_OK;
    }
    if (x->kind != TS_ATTR_FLOAT) return ts_attr_fail(err, x, "expected a float");
    *out = x->f;
    return TS_OK;
}

ts_status ts_attr_get_ints(const ts_attr *a, int na, const char *name, int64_t *out, int max, int *n, ts_error *err)
{
    const ts_attr *x = ts_attr_find(a, na, name);
    *n = -1;
    if (!x) return TS_OK;
    if (x->kind != TS_ATTR_INTS) return ts_attr_fail(err, x, "expected a list of integers");
    if (x->n > max) return ts_attr_fail(err, x, "too many values");
    for (int i = 0; i < x->n; i++) out[i] = x->ints[i];
    *n = x->n;
    return TS_OK;
}

ts_status ts_attr_get_string(const ts_attr *a, int na, const char *name, const char *def, char *out, size_t n,
                             ts_error *err)
{
    const ts_attr *x = ts_attr_find(a, na, name);
    const char *s = def;
    if (x) {
        if (x->kind != TS_ATTR_STRING) return ts_attr_fail(err, x, "expected a string");
        s = x->s;
    }
    if (strlen(s) >= n) return ts_error_set(err, TS_ERR_INVALID, "attribute '%s': string too long", name);
    strcpy(out, s);
    return TS_OK;
}

bool ts_axis_norm(int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

static ts_status node_fail(ts_error *err, ts_status code, const ts_node *n, const char *fmt, va_list ap)
{
    char msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return ts_error_set(err, code, "node '%s' (%s): %s", n && n->name ? n->name : "?", n && n->op ? n->op->name : "?", msg);
}

ts_status ts_infer_fail(ts_infer_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ts_status s = node_fail(c->err, TS_ERR_INVALID, c->node, fmt, ap);
    va_end(ap);
    return s;
}

ts_status ts_kernel_fail(ts_kernel_ctx *k, ts_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ts_status s = node_fail(k->err, code, k->node, fmt, ap);
    va_end(ap);
    return s;
}

static const ts_value *const_input(ts_infer_ctx *c, int i)
{
    if (i >= c->nin || !c->in[i]) {
        ts_infer_fail(c, "input %d is missing", i);
        return NULL;
    }
    if (!c->in[i]->constant) {
        ts_infer_fail(c, "input %d ('%s') must be a constant (bind dynamic dimensions with --input)", i,
                      c->in[i]->name);
        return NULL;
    }
    return c->in[i];
}

ts_status ts_infer_const_ints(ts_infer_ctx *c, int i, int64_t *out, int max, int *n)
{
    const ts_value *v = const_input(c, i);
    if (!v) return c->err->code;
    const ts_tensor *t = v->constant;
    if (t->dtype != TS_I64 && t->dtype != TS_I32)
        return ts_infer_fail(c, "input %d ('%s') must be int64, got %s", i, v->name, ts_dtype_name(t->dtype));
    int64_t cnt = ts_tensor_numel(t);
    if (cnt > max) return ts_infer_fail(c, "input %d ('%s') has too many values (%lld)", i, v->name, (long long)cnt);
    for (int64_t j = 0; j < cnt; j++) out[j] = ts_tensor_get_i64(t, j);
    *n = (int)cnt;
    return TS_OK;
}

ts_status ts_kernel_u64_check(const ts_node *n, int nin, const ts_tensor *const *in, ts_error *err)
{
    if ((n->op->flags & TS_OP_MOVEMENT) || n->op == &ts_op_cast || n->op == &ts_op_castlike || n->op == &ts_op_bitshift)
        return TS_OK;
    for (int j = 0; j < nin; j++) {
        const ts_tensor *t = in[j];
        if (!t || t->dtype != TS_U64 || !t->data) continue;
        for (int64_t i = 0, cnt = ts_tensor_numel(t); i < cnt; i++)
            if (((const uint64_t *)t->data)[i] >> 63)
                return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                    "node '%s' (%s): uint64 input %d holds %llu: values of 2^63 and above are not "
                                    "supported",
                                    n->name, n->op->name, j, (unsigned long long)((const uint64_t *)t->data)[i]);
    }
    return TS_OK;
}

const ts_tensor *ts_infer_const_tensor(ts_infer_ctx *c, int i)
{
    const ts_value *v = const_input(c, i);
    return v ? v->constant : NULL;
}

ts_status ts_infer_const_floats(ts_infer_ctx *c, int i, double *out, int max, int *n)
{
    const ts_value *v = const_input(c, i);
    if (!v) return c->err->code;
    const ts_tensor *t = v->constant;
    int64_t cnt = ts_tensor_numel(t);
    if (cnt > max) return ts_infer_fail(c, "input %d ('%s') has too many values (%lld)", i, v->name, (long long)cnt);
    for (int64_t j = 0; j < cnt; j++) out[j] = ts_tensor_get_f64(t, j);
    *n = (int)cnt;
    return TS_OK;
}

ts_dtype ts_dtype_from_onnx(int64_t code)
{
    switch (code) {
    case 1: return TS_F32;
    case 2: return TS_U8;
    case 3: return TS_I8;
    case 6: return TS_I32;
    case 7: return TS_I64;
    case 9: return TS_BOOL;
    case 11: return TS_F64;
    case 4: return TS_U16;
    case 5: return TS_I16;
    case 10: return TS_F16;
    case 12: return TS_U32;
    case 13: return TS_U64;
    case 16: return TS_BF16;
    default: return TS_UNDEFINED;
    }
}
