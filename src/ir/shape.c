/* Shapes: static, row-major, rank <= TS_MAX_RANK. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tsopt.h"

ts_shape ts_shape_make(int rank, const int64_t *dims)
{
    ts_shape s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
    return s;
}

int64_t ts_shape_numel(const ts_shape *s)
{
    /* Saturates: shapes come from user files, and a product beyond int64
     * must read as "too large" (> TS_MAX_ELEMENTS), never overflow. */
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        if (__builtin_mul_overflow(n, s->dims[i], &n)) return INT64_MAX;
    return n;
}

bool ts_shape_eq(const ts_shape *a, const ts_shape *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

const char *ts_shape_str(const ts_shape *s, char *buf, size_t n)
{
    if (s->rank == 0) {
        snprintf(buf, n, "scalar");
        return buf;
    }
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < s->rank && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, i ? "x%lld" : "%lld", (long long)s->dims[i]);
    return buf;
}

ts_status ts_shape_parse(const char *text, ts_shape *out, ts_error *err)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    if (!*p) return ts_error_set(err, TS_ERR_INVALID, "empty shape");
    while (*p) {
        if (out->rank == TS_MAX_RANK)
            return ts_error_set(err, TS_ERR_INVALID, "shape '%s' has more than %d dimensions", text, TS_MAX_RANK);
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v > TS_MAX_ELEMENTS)
            return ts_error_set(err, TS_ERR_INVALID, "bad dimension in shape '%s' (want e.g. 1x3x224x224)", text);
        out->dims[out->rank++] = v;
        p = end;
        if (*p == 'x' || *p == 'X' || *p == ',') {
            p++;
            if (!*p) return ts_error_set(err, TS_ERR_INVALID, "shape '%s' ends with a separator", text);
        } else if (*p) {
            return ts_error_set(err, TS_ERR_INVALID, "bad character '%c' in shape '%s'", *p, text);
        }
    }
    return TS_OK;
}

bool ts_shape_broadcast(const ts_shape *a, const ts_shape *b, ts_shape *out)
{
    ts_shape r;
    memset(&r, 0, sizeof r);
    r.rank = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r.rank; i++) {
        int ia = a->rank - r.rank + i, ib = b->rank - r.rank + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        r.dims[i] = da == 1 ? db : da;
    }
    *out = r;
    return true;
}

void ts_shape_strides(const ts_shape *s, int64_t strides[TS_MAX_RANK])
{
    int64_t st = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        strides[i] = st;
        st *= s->dims[i];
    }
}

void ts_shape_bcast_strides(const ts_shape *in, const ts_shape *out, int64_t strides[TS_MAX_RANK])
{
    int64_t own[TS_MAX_RANK];
    ts_shape_strides(in, own);
    for (int i = 0; i < out->rank; i++) {
        int j = in->rank - out->rank + i;
        strides[i] = (j < 0 || in->dims[j] == 1) ? 0 : own[j];
    }
}
