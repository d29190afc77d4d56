/* TensorProto <-> ts_tensor: element types, the three ways ONNX stores
 * data (raw_data, typed repeated fields, external files), and the checks
 * that keep a malformed file from allocating or reading out of bounds. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "onnx/proto.h"

static const struct {
    int32_t onnx;
    ts_dtype ts;
} dtype_map[] = {
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, TS_F32}, {ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, TS_F64},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT64, TS_I64}, {ONNX__TENSOR_PROTO__DATA_TYPE__INT32, TS_I32},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT8, TS_I8},   {ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, TS_U8},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, TS_BOOL}, {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, TS_F16},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, TS_BF16}, {ONNX__TENSOR_PROTO__DATA_TYPE__INT16, TS_I16},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, TS_U16}, {ONNX__TENSOR_PROTO__DATA_TYPE__UINT32, TS_U32},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, TS_U64},
};

bool ts_onnx_dtype_from(int32_t onnx_type, ts_dtype *out)
{
    for (size_t i = 0; i < sizeof dtype_map / sizeof *dtype_map; i++)
        if (dtype_map[i].onnx == onnx_type) {
            *out = dtype_map[i].ts;
            return true;
        }
    return false;
}

int32_t ts_onnx_dtype_to(ts_dtype t)
{
    for (size_t i = 0; i < sizeof dtype_map / sizeof *dtype_map; i++)
        if (dtype_map[i].ts == t) return dtype_map[i].onnx;
    return 0;
}

const char *ts_onnx_dtype_name(int32_t t)
{
    static const char *const names[] = {"undefined", "float32", "uint8",   "int8",     "uint16",    "int16",
                                        "int32",     "int64",   "string",  "bool",     "float16",   "float64",
                                        "uint32",    "uint64",  "complex64", "complex128", "bfloat16",
                                        "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
                                        "uint4",     "int4"};
    if (t >= 0 && (size_t)t < sizeof names / sizeof *names) return names[t];
    return "unknown";
}

bool ts_onnx_parse_offset(const char *s, int64_t *out)
{
    if (!s || !*s) return false;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (INT64_MAX - 9) / 10) return false;
        v = v * 10 + (*s - '0');
    }
    *out = v;
    return true;
}

/* A location must stay inside the model's directory: relative, no "..". */
static bool location_safe(const char *loc)
{
    if (!*loc || loc[0] == '/' || loc[0] == '\\') return false;
    const char *p = loc;
    while (*p) {
        size_t n = strcspn(p, "/\\");
        if (n == 2 && p[0] == '.' && p[1] == '.') return false;
        p += n;
        if (*p) p++;
    }
    return true;
}

static ts_status read_external(const Onnx__TensorProto *tp, const char *base_dir, const char *what, void *dst,
                               size_t want, ts_error *err)
{
    const char *loc = NULL;
    int64_t off = 0, len = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key) continue;
        if (!strcmp(e->key, "location")) loc = e->value ? e->value : "";
        else if (!strcmp(e->key, "offset")) {
            if (!ts_onnx_parse_offset(e->value, &off))
                return ts_error_set(err, TS_ERR_PARSE, "%s: external data offset '%s' is not a number", what,
                                    e->value ? e->value : "");
        } else if (!strcmp(e->key, "length")) {
            if (!ts_onnx_parse_offset(e->value, &len))
                return ts_error_set(err, TS_ERR_PARSE, "%s: external data length '%s' is not a number", what,
                                    e->value ? e->value : "");
        }
    }
    if (!loc) return ts_error_set(err, TS_ERR_PARSE, "%s: external data has no location", what);
    if (!location_safe(loc))
        return ts_error_set(err, TS_ERR_INVALID,
                            "%s: external data location '%s' must be a relative path inside the model's directory",
                            what, loc);
    if (!base_dir)
        return ts_error_set(err, TS_ERR_INVALID,
                            "%s: external data file '%s' cannot be found for a model loaded from memory", what, loc);
    size_t plen = strlen(base_dir) + strlen(loc) + 2;
    char *path = malloc(plen);
    if (!path) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    snprintf(path, plen, "%s/%s", *base_dir ? base_dir : ".", loc);
    ts_status st = TS_OK;
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0) {
        st = ts_error_set(err, TS_ERR_IO, "%s: cannot open external data file '%s': %s", what, path, strerror(errno));
        goto out;
    }
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        st = ts_error_set(err, TS_ERR_IO, "%s: external data file '%s' is not a regular file", what, path);
        goto out;
    }
    int64_t fsize = (int64_t)sb.st_size;
    if (len < 0) len = off <= fsize ? fsize - off : 0;
    if (off > fsize || len > fsize - off) {
        st = ts_error_set(err, TS_ERR_PARSE,
                          "%s: external data (offset %lld, length %lld) lies past the end of '%s' (%lld bytes)", what,
                          (long long)off, (long long)len, path, (long long)fsize);
        goto out;
    }
    if ((uint64_t)len != (uint64_t)want) {
        st = ts_error_set(err, TS_ERR_PARSE, "%s: external data in '%s' has %lld bytes, expected %zu", what, path,
                          (long long)len, want);
        goto out;
    }
    for (size_t done = 0; done < want;) {
        ssize_t r = pread(fd, (char *)dst + done, want - done, (off_t)(off + (int64_t)done));
        if (r <= 0) {
            st = ts_error_set(err, TS_ERR_IO, "%s: cannot read external data file '%s': %s", what, path,
                              r < 0 ? strerror(errno) : "unexpected end of file");
            goto out;
        }
        done += (size_t)r;
    }
out:
    if (fd >= 0) close(fd);
    free(path);
    return st;
}

/* Number of elements in the typed field that matches dtype (-1: none used). */
static int64_t typed_count(const Onnx__TensorProto *tp, ts_dtype dt)
{
    switch (dt) {
    case TS_F32: return (int64_t)tp->n_float_data;
    case TS_F64: return (int64_t)tp->n_double_data;
    case TS_I64: return (int64_t)tp->n_int64_data;
    case TS_U32: case TS_U64: return (int64_t)tp->n_uint64_data;
    default: return (int64_t)tp->n_int32_data; /* 8- and 16-bit types, float16/bfloat16 bit patterns too */
    }
}

static void copy_typed(const Onnx__TensorProto *tp, ts_tensor *t)
{
    int64_t n = ts_tensor_numel(t);
    switch (t->dtype) {
    case TS_F32: memcpy(t->data, tp->float_data, (size_t)n * 4); break;
    case TS_F64: memcpy(t->data, tp->double_data, (size_t)n * 8); break;
    case TS_I64: memcpy(t->data, tp->int64_data, (size_t)n * 8); break;
    case TS_I32: memcpy(t->data, tp->int32_data, (size_t)n * 4); break;
    case TS_I8:
        for (int64_t i = 0; i < n; i++) ((int8_t *)t->data)[i] = (int8_t)tp->int32_data[i];
        break;
    case TS_U8:
        for (int64_t i = 0; i < n; i++) ((uint8_t *)t->data)[i] = (uint8_t)tp->int32_data[i];
        break;
    case TS_BOOL:
        for (int64_t i = 0; i < n; i++) ((uint8_t *)t->data)[i] = tp->int32_data[i] != 0;
        break;
    case TS_I16:
        for (int64_t i = 0; i < n; i++) ((int16_t *)t->data)[i] = (int16_t)tp->int32_data[i];
        break;
    case TS_F16: case TS_BF16: case TS_U16: /* the 16 bits, as stored */
        for (int64_t i = 0; i < n; i++) ((uint16_t *)t->data)[i] = (uint16_t)(uint32_t)tp->int32_data[i];
        break;
    case TS_U32:
        for (int64_t i = 0; i < n; i++) ((uint32_t *)t->data)[i] = (uint32_t)tp->uint64_data[i];
        break;
    case TS_U64: memcpy(t->data, tp->uint64_data, (size_t)n * 8); break;
    default: break;
    }
}

ts_status ts_onnx_tensor_decode(const Onnx__TensorProto *tp, const char *base_dir, const char *what,
                                ts_tensor **out, ts_error *err)
{
    return ts_onnx_tensor_decode_span(tp, NULL, NULL, base_dir, what, out, err);
}

ts_status ts_onnx_tensor_decode_span(const Onnx__TensorProto *tp, const ts_onnx_src *src, const ts_onnx_span *span,
                                     const char *base_dir, const char *what, ts_tensor **out, ts_error *err)
{
    /* raw_data cut from the message (raw_spans.c): as if it were there */
    bool cut = src && span && span->len;
    bool has_raw = tp->has_raw_data || cut;
    size_t raw_len = cut ? (size_t)span->len : tp->raw_data.len;
    *out = NULL;
    ts_dtype dt;
    int32_t ot = tp->has_data_type ? tp->data_type : 0;
    if (!ts_onnx_dtype_from(ot, &dt))
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s: element type %s is not supported", what,
                            ts_onnx_dtype_name(ot));
    if (tp->n_dims > TS_MAX_RANK)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s has rank %zu (at most %d supported)", what, tp->n_dims,
                            TS_MAX_RANK);
    if (tp->segment) return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s: segmented tensors are not supported", what);
    ts_shape shape = {.rank = (int)tp->n_dims};
    int64_t numel = 1;
    for (int i = 0; i < shape.rank; i++) {
        int64_t d = tp->dims[i];
        if (d < 0)
            return ts_error_set(err, TS_ERR_PARSE, "%s has negative dimension %lld at axis %d", what, (long long)d, i);
        if (d && numel > TS_MAX_ELEMENTS / d)
            return ts_error_set(err, TS_ERR_PARSE, "%s is too large (dimension %lld at axis %d)", what, (long long)d,
                                i);
        numel *= d;
        shape.dims[i] = d;
    }
    size_t want = (size_t)numel * ts_dtype_size(dt);
    bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    /* Sizes are checked against what the file holds before allocating, so a
     * tiny file cannot make tsopt allocate a huge tensor. */
    if (!external) {
        if (has_raw) {
            if (raw_len != want)
                return ts_error_set(err, TS_ERR_PARSE, "%s has %zu bytes of raw data, expected %zu (%s, %lld elements)",
                                    what, raw_len, want, ts_dtype_name(dt), (long long)numel);
        } else if (typed_count(tp, dt) != numel)
            return ts_error_set(err, TS_ERR_PARSE, "%s has %lld values, expected %lld", what,
                                (long long)typed_count(tp, dt), (long long)numel);
    }
    /* large external weights are mapped from their file, not copied */
    if (external && ts_onnx_external_map(tp, base_dir, dt, &shape, want, out)) return TS_OK;
    ts_tensor *t = ts_tensor_new(dt, &shape, err);
    if (!t) return ts_error_prefix(err, "%s", what);
    if (external) {
        if (read_external(tp, base_dir, what, t->data, want, err)) {
            ts_tensor_unref(t);
            return err->code;
        }
    } else if (cut) {
        if (ts_onnx_span_read(src, span, t->data, what, err)) {
            ts_tensor_unref(t);
            return err->code;
        }
    } else if (tp->has_raw_data) {
        if (want) memcpy(t->data, tp->raw_data.data, want);
    } else if (numel)
        copy_typed(tp, t);
    if (dt == TS_BOOL) /* anything but 0 is true; keep bools canonical */
        for (size_t i = 0; i < want; i++) ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
    *out = t;
    return TS_OK;
}

ts_status ts_onnx_tensor_encode(Onnx__TensorProto *tp, const ts_tensor *t, const char *name, ts_error *err)
{
    int32_t ot = ts_onnx_dtype_to(t->dtype);
    if (!ot)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "tensor '%s': type %s cannot be written to ONNX", name,
                            ts_dtype_name(t->dtype));
    tp->name = (char *)name;
    tp->has_data_type = 1;
    tp->data_type = ot;
    tp->n_dims = (size_t)t->shape.rank;
    tp->dims = (int64_t *)t->shape.dims;
    tp->has_raw_data = 1;
    tp->raw_data.len = t->nbytes;
    tp->raw_data.data = t->data;
    return TS_OK;
}
