/* Reference-counted dense tensors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tsopt.h"
#include "util/hash.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[TS_DTYPE_COUNT] = {
    [TS_UNDEFINED] = {"undefined", 0}, [TS_F32] = {"float32", 4}, [TS_F64] = {"float64", 8},
    [TS_I64] = {"int64", 8},           [TS_I32] = {"int32", 4},   [TS_I8] = {"int8", 1},
    [TS_U8] = {"uint8", 1},            [TS_BOOL] = {"bool", 1},   [TS_MODP] = {"modp", 4},
    [TS_F16] = {"float16", 2},         [TS_BF16] = {"bfloat16", 2}, [TS_I16] = {"int16", 2},
    [TS_U16] = {"uint16", 2},          [TS_U32] = {"uint32", 4},  [TS_U64] = {"uint64", 8},
};

size_t ts_dtype_size(ts_dtype t) { return t < TS_DTYPE_COUNT ? dtypes[t].size : 0; }
const char *ts_dtype_name(ts_dtype t) { return t < TS_DTYPE_COUNT ? dtypes[t].name : "invalid"; }
bool ts_dtype_is_float(ts_dtype t) { return t == TS_F32 || t == TS_F64 || t == TS_F16 || t == TS_BF16; }

/* IEEE-style binary floats narrower than float32: float16 (5 exponent
 * bits, 10 mantissa bits) and bfloat16 (8, 7).  Encoded straight from
 * double, so a value is rounded once (to nearest, ties to even). */
typedef struct narrow_fmt {
    int mant, bias, emax; /* mantissa bits, exponent bias, all-ones exponent field */
} narrow_fmt;

static const narrow_fmt F16_FMT = {10, 15, 31}, BF16_FMT = {7, 127, 255};

static uint16_t narrow_encode(const narrow_fmt *f, double v)
{
    uint32_t sign = signbit(v) ? 0x8000u : 0; /* bit 15 in both formats */
    uint32_t inf = (uint32_t)f->emax << f->mant;
    if (isnan(v)) return (uint16_t)(sign | inf | (1u << (f->mant - 1)));
    double a = fabs(v);
    if (a == 0) return (uint16_t)sign;
    if (isinf(a)) return (uint16_t)(sign | inf);
    int ex;
    double fr = frexp(a, &ex); /* a = fr * 2^ex, fr in [0.5, 1) */
    int e = ex - 1;
    if (e < 1 - f->bias) /* subnormal: a multiple of 2^(1 - bias - mant); 2^mant carries into the smallest normal */
        return (uint16_t)(sign | (uint32_t)nearbyint(ldexp(a, f->bias - 1 + f->mant)));
    double m = nearbyint(ldexp(fr, f->mant + 1)); /* in [2^mant, 2^(mant+1)] */
    if (m >= ldexp(1, f->mant + 1)) {
        m /= 2;
        e++;
    }
    if (e + f->bias >= f->emax) return (uint16_t)(sign | inf);
    return (uint16_t)(sign | (uint32_t)(e + f->bias) << f->mant | ((uint32_t)m - (1u << f->mant)));
}

static double narrow_decode(const narrow_fmt *f, uint16_t bits)
{
    double s = bits & 0x8000u ? -1 : 1;
    uint32_t e = (uint32_t)bits >> f->mant & (uint32_t)f->emax, m = bits & ((1u << f->mant) - 1);
    if (e == (uint32_t)f->emax) return m ? NAN : s * INFINITY;
    if (!e) return s * ldexp(m, 1 - f->bias - f->mant);
    return s * ldexp((double)(m | 1u << f->mant), (int)e - f->bias - f->mant);
}

double ts_dtype_round(ts_dtype t, double v)
{
    switch (t) {
    case TS_F16: return narrow_decode(&F16_FMT, narrow_encode(&F16_FMT, v));
    case TS_BF16: return narrow_decode(&BF16_FMT, narrow_encode(&BF16_FMT, v));
    case TS_F32: return (float)v;
    default: return v;
    }
}

static bool numel_ok(const ts_shape *s, int64_t *numel)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dims[i] < 0) return false;
        if (s->dims[i] && n > TS_MAX_ELEMENTS / s->dims[i]) return false;
        n *= s->dims[i];
    }
    *numel = n;
    return n <= TS_MAX_ELEMENTS;
}

ts_tensor *ts_tensor_new(ts_dtype dtype, const ts_shape *shape, ts_error *err)
{
    int64_t n;
    char buf[160];
    if (shape->rank < 0 || shape->rank > TS_MAX_RANK || !numel_ok(shape, &n)) {
        ts_error_set(err, TS_ERR_INVALID, "tensor shape %s is negative or too large",
                     shape->rank >= 0 && shape->rank <= TS_MAX_RANK ? ts_shape_str(shape, buf, sizeof buf) : "(bad rank)");
        return NULL;
    }
    ts_tensor *t = calloc(1, sizeof *t);
    size_t nbytes = (size_t)n * ts_dtype_size(dtype);
    void *data = calloc(1, nbytes ? nbytes : 1);
    if (!t || !data) {
        free(t);
        free(data);
        ts_error_set(err, TS_ERR_NOMEM, "out of memory allocating %s tensor of %zu bytes", ts_dtype_name(dtype), nbytes);
        return NULL;
    }
    t->dtype = dtype;
    t->shape = *shape;
    t->data = data;
    t->nbytes = nbytes;
    t->refcount = 1;
    t->owns_data = true;
    return t;
}

ts_tensor *ts_tensor_wrap(ts_dtype dtype, const ts_shape *shape, void *data)
{
    ts_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->dtype = dtype;
    t->shape = *shape;
    t->data = data;
    t->nbytes = (size_t)ts_shape_numel(shape) * ts_dtype_size(dtype);
    t->refcount = 1;
    return t;
}

ts_tensor *ts_tensor_clone(const ts_tensor *t, ts_error *err)
{
    ts_tensor *c = ts_tensor_new(t->dtype, &t->shape, err);
    if (c && t->nbytes) memcpy(c->data, t->data, t->nbytes);
    return c;
}

ts_tensor *ts_tensor_ref(ts_tensor *t)
{
    if (t) t->refcount++;
    return t;
}

void ts_tensor_unref(ts_tensor *t)
{
    if (!t || --t->refcount > 0) return;
    if (t->owns_data) free(t->data);
    if (t->release) t->release(t->keep);
    free(t);
}

int64_t ts_tensor_numel(const ts_tensor *t) { return ts_shape_numel(&t->shape); }

int64_t ts_tensor_get_i64(const ts_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case TS_I64: return ((const int64_t *)t->data)[i];
    case TS_I32: return ((const int32_t *)t->data)[i];
    case TS_I8: return ((const int8_t *)t->data)[i];
    case TS_U8: case TS_BOOL: return ((const uint8_t *)t->data)[i];
    case TS_MODP: return ((const uint32_t *)t->data)[i];
    case TS_I16: return ((const int16_t *)t->data)[i];
    case TS_U16: return ((const uint16_t *)t->data)[i];
    case TS_U32: return ((const uint32_t *)t->data)[i];
    case TS_U64: return (int64_t)((const uint64_t *)t->data)[i]; /* above INT64_MAX wraps */
    case TS_F32: return (int64_t)((const float *)t->data)[i];
    case TS_F64: return (int64_t)((const double *)t->data)[i];
    case TS_F16: case TS_BF16: return (int64_t)ts_tensor_get_f64(t, i);
    default: return 0;
    }
}

double ts_tensor_get_f64(const ts_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case TS_F32: return ((const float *)t->data)[i];
    case TS_F64: return ((const double *)t->data)[i];
    case TS_F16: return narrow_decode(&F16_FMT, ((const uint16_t *)t->data)[i]);
    case TS_BF16: return narrow_decode(&BF16_FMT, ((const uint16_t *)t->data)[i]);
    case TS_U64: return (double)((const uint64_t *)t->data)[i];
    default: return (double)ts_tensor_get_i64(t, i);
    }
}

void ts_tensor_set_f64(ts_tensor *t, int64_t i, double v)
{
    switch (t->dtype) {
    case TS_F32: ((float *)t->data)[i] = (float)v; break;
    case TS_F64: ((double *)t->data)[i] = v; break;
    case TS_I64: ((int64_t *)t->data)[i] = (int64_t)v; break;
    case TS_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case TS_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case TS_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case TS_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    case TS_F16: ((uint16_t *)t->data)[i] = narrow_encode(&F16_FMT, v); break;
    case TS_BF16: ((uint16_t *)t->data)[i] = narrow_encode(&BF16_FMT, v); break;
    case TS_I16: ((int16_t *)t->data)[i] = (int16_t)v; break;
    case TS_U16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
    case TS_U32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
    case TS_U64: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
    case TS_MODP: {
        double r = fmod(nearbyint(v), (double)TS_MODP_P);
        ((uint32_t *)t->data)[i] = (uint32_t)(r < 0 ? r + TS_MODP_P : r);
        break;
    }
    default: break;
    }
}

void ts_tensor_fill_random(ts_tensor *t, uint64_t *rng, double lo, double hi)
{
    int64_t n = ts_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = ts_rand_next(rng);
        if (t->dtype == TS_MODP)
            ((uint32_t *)t->data)[i] = (uint32_t)(r % TS_MODP_P);
        else if (ts_dtype_is_float(t->dtype))
            ts_tensor_set_f64(t, i, lo + (hi - lo) * ((double)(r >> 11) * 0x1.0p-53));
        else
            ts_tensor_set_f64(t, i, lo + (double)(r % (uint64_t)(hi - lo + 1)));
    }
}

void ts_name_sanitize(const char *name, char *out, size_t n)
{
    size_t i = 0;
    for (; name[i] && i + 1 < n; i++) {
        char c = name[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '_' || c == '-';
        out[i] = ok ? c : '_';
    }
    if (n) out[i] = 0;
}
