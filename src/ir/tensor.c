/* Reference-counted dense tensors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tsopt.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[TS_DTYPE_COUNT] = {
    [TS_UNDEFINED] = {"undefined", 0}, [TS_F32] = {"float32", 4}, [TS_F64] = {"float64", 8},
    [TS_I64] = {"int64", 8},           [TS_I32] = {"int32", 4},   [TS_I8] = {"int8", 1},
    [TS_U8] = {"uint8", 1},            [TS_BOOL] = {"bool", 1},   [TS_MODP] = {"modp", 4},
};

size_t ts_dtype_size(ts_dtype t) { return t < TS_DTYPE_COUNT ? dtypes[t].size : 0; }
const char *ts_dtype_name(ts_dtype t) { return t < TS_DTYPE_COUNT ? dtypes[t].name : "invalid"; }
bool ts_dtype_is_float(ts_dtype t) { return t == TS_F32 || t == TS_F64; }

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
    case TS_F32: return (int64_t)((const float *)t->data)[i];
    case TS_F64: return (int64_t)((const double *)t->data)[i];
    default: return 0;
    }
}

double ts_tensor_get_f64(const ts_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case TS_F32: return ((const float *)t->data)[i];
    case TS_F64: return ((const double *)t->data)[i];
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
    case TS_MODP: {
        double r = fmod(nearbyint(v), (double)TS_MODP_P);
        ((uint32_t *)t->data)[i] = (uint32_t)(r < 0 ? r + TS_MODP_P : r);
        break;
    }
    default: break;
    }
}

/* splitmix64: small, seedable, good enough for test inputs */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ts_tensor_fill_random(ts_tensor *t, uint64_t *rng, double lo, double hi)
{
    int64_t n = ts_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = next_u64(rng);
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
