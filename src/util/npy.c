/* NumPy .npy files (format versions 1.0 and 2.0, C order, little-endian).
 * The header is a Python dict literal; we parse just enough of Python's
 * syntax to read numpy's own output and reject anything else with an error
 * naming the file.  Sizes are checked against the file length before any
 * allocation, so a lying header cannot make us allocate a huge buffer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tsopt.h"

static const unsigned char MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
/* numpy keeps headers small; anything larger than this is not numpy's. */
#define MAX_HEADER (1u << 20)

/* numpy's own descr for every dtype the runtime computes, except bfloat16,
 * which numpy lacks: it is written as '<V2', the descr np.save gives an
 * ml_dtypes.bfloat16 array (numpy reads it back as 2-byte void;
 * `.view(ml_dtypes.bfloat16)` or `.view(np.uint16)` recovers it), and read
 * from any 2-byte void.  docs/conformance.md, ".npy files". */
static const struct {
    const char *descr;
    ts_dtype dtype;
} DESCRS[] = {
    {"<f4", TS_F32}, {"<f8", TS_F64}, {"<f2", TS_F16}, {"<V2", TS_BF16}, {"<i8", TS_I64},
    {"<i4", TS_I32}, {"<i2", TS_I16}, {"|i1", TS_I8},  {"<u8", TS_U64},  {"<u4", TS_U32},
    {"<u2", TS_U16}, {"|u1", TS_U8},  {"|b1", TS_BOOL},
};

static const char *descr_of(ts_dtype t)
{
    for (size_t i = 0; i < sizeof DESCRS / sizeof DESCRS[0]; i++)
        if (DESCRS[i].dtype == t) return DESCRS[i].descr;
    return NULL;
}

/* Maps a descr to a dtype.  One-byte types have no byte order, so any order
 * character is fine for them; '=' (native) is little-endian on our hosts. */
static ts_status dtype_of(const char *descr, const char *path, ts_dtype *out, ts_error *err)
{
    size_t n = strlen(descr);
    if (n == 3 && strchr("<>|=", descr[0])) {
        for (size_t i = 0; i < sizeof DESCRS / sizeof DESCRS[0]; i++) {
            if (strcmp(descr + 1, DESCRS[i].descr + 1)) continue;
            bool one_byte = descr[2] == '1', is_void = descr[1] == 'V';
            if (!one_byte && descr[0] == '>')
                return ts_error_set(err, TS_ERR_UNSUPPORTED, "big-endian .npy dtype '%s' is not supported (%s)",
                                    descr, path);
            /* void has no byte order: numpy writes '|V2', ml_dtypes '<V2' */
            if (!one_byte && !is_void && descr[0] == '|') break;
            *out = DESCRS[i].dtype;
            return TS_OK;
        }
    }
    return ts_error_set(err, TS_ERR_UNSUPPORTED,
                        "unsupported .npy dtype '%.40s' (want <f4 <f8 <f2 <i8 <i4 <i2 |i1 <u8 <u4 <u2 |u1 |b1, "
                        "or <V2 for bfloat16) (%s)",
                        descr, path);
}

/* ------------------------------------------------------ header parsing */

typedef struct hparser {
    const char *p, *end;
} hparser;

static void skip_ws(hparser *h)
{
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')) h->p++;
}

static bool eat(hparser *h, char c)
{
    skip_ws(h);
    if (h->p < h->end && *h->p == c) {
        h->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes (numpy never writes any in headers). */
static bool parse_str(hparser *h, char *out, size_t n)
{
    skip_ws(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return false;
    char q = *h->p++;
    size_t i = 0;
    while (h->p < h->end && *h->p != q) {
        if (*h->p == '\\' || i + 1 >= n) return false;
        out[i++] = *h->p++;
    }
    if (h->p >= h->end) return false;
    h->p++;
    out[i] = 0;
    return true;
}

static bool parse_word(hparser *h, const char *w)
{
    skip_ws(h);
    size_t n = strlen(w);
    if ((size_t)(h->end - h->p) < n || memcmp(h->p, w, n)) return false;
    h->p += n;
    return true;
}

/* (d0, d1, ...) with optional trailing comma; Python 2's "3L" accepted. */
static bool parse_shape(hparser *h, ts_shape *s)
{
    memset(s, 0, sizeof *s);
    if (!eat(h, '(')) return false;
    for (;;) {
        skip_ws(h);
        if (eat(h, ')')) return true;
        if (s->rank == TS_MAX_RANK) return false;
        if (h->p >= h->end || *h->p < '0' || *h->p > '9') return false;
        int64_t v = 0;
        while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
            if (v > (INT64_MAX - 9) / 10) return false;
            v = v * 10 + (*h->p++ - '0');
        }
        if (h->p < h->end && *h->p == 'L') h->p++;
        s->dims[s->rank++] = v;
        if (!eat(h, ',')) return eat(h, ')');
    }
}

typedef struct header {
    char descr[64];
    int fortran; /* -1 absent */
    bool have_shape;
    ts_shape shape;
} header;

static bool parse_header(const char *text, size_t n, header *hd)
{
    hparser h = {text, text + n};
    hd->descr[0] = 0;
    hd->fortran = -1;
    hd->have_shape = false;
    if (!eat(&h, '{')) return false;
    for (;;) {
        if (eat(&h, '}')) break;
        char key[32];
        if (!parse_str(&h, key, sizeof key) || !eat(&h, ':')) return false;
        if (!strcmp(key, "descr")) {
            if (!parse_str(&h, hd->descr, sizeof hd->descr)) return false;
        } else if (!strcmp(key, "fortran_order")) {
            if (parse_word(&h, "True"))
                hd->fortran = 1;
            else if (parse_word(&h, "False"))
                hd->fortran = 0;
            else
                return false;
        } else if (!strcmp(key, "shape")) {
            if (!parse_shape(&h, &hd->shape)) return false;
            hd->have_shape = true;
        } else {
            return false;
        }
        if (!eat(&h, ',')) {
            if (!eat(&h, '}')) return false;
            break;
        }
    }
    skip_ws(&h); /* numpy pads with spaces and ends with '\n' */
    return h.p == h.end && hd->descr[0] && hd->fortran >= 0 && hd->have_shape;
}

/* ---------------------------------------------------------------- load */

static ts_status read_exact(FILE *f, void *buf, size_t n, const char *what, const char *path, ts_error *err)
{
    if (n && fread(buf, 1, n, f) != n)
        return ts_error_set(err, TS_ERR_PARSE, "truncated .npy file: %s is cut short (%s)", what, path);
    return TS_OK;
}

ts_status ts_npy_load(const char *path, ts_tensor **out, ts_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ts_error_set(err, TS_ERR_IO, "cannot open .npy file: %s (%s)", strerror(errno), path);
    ts_status st = TS_OK;
    char *text = NULL;
    ts_tensor *t = NULL;
    struct stat sb;
    unsigned char pre[12];
    if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode)) {
        st = ts_error_set(err, TS_ERR_IO, "not a regular file (%s)", path);
        goto done;
    }
    if (sb.st_size < 10 || fread(pre, 1, 10, f) != 10 || memcmp(pre, MAGIC, 6)) {
        st = ts_error_set(err, TS_ERR_PARSE, "not a .npy file (bad magic) (%s)", path);
        goto done;
    }
    size_t hlen, hstart;
    if (pre[6] == 1) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
        hstart = 10;
    } else if (pre[6] == 2) {
        if ((st = read_exact(f, pre + 10, 2, "the header length", path, err))) goto done;
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
        hstart = 12;
    } else {
        st = ts_error_set(err, TS_ERR_UNSUPPORTED, "unsupported .npy version %d.%d (want 1.0 or 2.0) (%s)", pre[6],
                          pre[7], path);
        goto done;
    }
    if (hlen > MAX_HEADER) {
        st = ts_error_set(err, TS_ERR_PARSE, "bad .npy header: length %zu is absurd (%s)", hlen, path);
        goto done;
    }
    if ((int64_t)(hstart + hlen) > (int64_t)sb.st_size) {
        st = ts_error_set(err, TS_ERR_PARSE, "truncated .npy file: header is cut short (%s)", path);
        goto done;
    }
    text = malloc(hlen + 1);
    if (!text) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory (%s)", path);
        goto done;
    }
    if ((st = read_exact(f, text, hlen, "the header", path, err))) goto done;
    text[hlen] = 0;
    header hd;
    if (memchr(text, 0, hlen) || !parse_header(text, hlen, &hd)) {
        st = ts_error_set(err, TS_ERR_PARSE, "bad .npy header: not a {'descr', 'fortran_order', 'shape'} dict (%s)",
                          path);
        goto done;
    }
    if (hd.fortran) {
        st = ts_error_set(err, TS_ERR_UNSUPPORTED, "Fortran-order .npy arrays are not supported (%s)", path);
        goto done;
    }
    ts_dtype dt = TS_UNDEFINED;
    if ((st = dtype_of(hd.descr, path, &dt, err))) goto done;
    int64_t numel = 1;
    for (int i = 0; i < hd.shape.rank; i++) {
        int64_t d = hd.shape.dims[i];
        if (d && numel > TS_MAX_ELEMENTS / d) {
            numel = TS_MAX_ELEMENTS + 1;
            break;
        }
        numel *= d;
    }
    if (numel > TS_MAX_ELEMENTS) {
        char sb2[160];
        st = ts_error_set(err, TS_ERR_PARSE, ".npy shape %s is too large (more than %lld elements) (%s)",
                          ts_shape_str(&hd.shape, sb2, sizeof sb2), (long long)TS_MAX_ELEMENTS, path);
        goto done;
    }
    int64_t want = numel * (int64_t)ts_dtype_size(dt);
    int64_t have = (int64_t)sb.st_size - (int64_t)(hstart + hlen);
    if (have != want) {
        st = ts_error_set(err, TS_ERR_PARSE, "%s .npy data: header says %lld bytes, file holds %lld (%s)",
                          have < want ? "truncated" : "trailing bytes after", (long long)want, (long long)have, path);
        goto done;
    }
    if (!(t = ts_tensor_new(dt, &hd.shape, err))) {
        st = ts_error_prefix(err, "%s", path);
        goto done;
    }
    if ((st = read_exact(f, t->data, t->nbytes, "the data", path, err))) goto done;
    if (dt == TS_BOOL) /* numpy bools are 0/1; normalize anything else */
        for (size_t i = 0; i < t->nbytes; i++) ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
    *out = t;
    t = NULL;
done:
    ts_tensor_unref(t);
    free(text);
    fclose(f);
    return st;
}

/* ---------------------------------------------------------------- save */

ts_status ts_npy_save(const char *path, const ts_tensor *t, ts_error *err)
{
    const char *descr = descr_of(t->dtype);
    if (!descr)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "cannot save a %s tensor as .npy (%s)", ts_dtype_name(t->dtype),
                            path);
    char dict[512];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < t->shape.rank; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "", (long long)t->shape.dims[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", t->shape.rank == 1 ? "," : "");
    /* Pad with spaces so the data starts on a 64-byte boundary, as numpy
     * does; the header always fits version 1.0 since rank <= 8. */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)n + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) return ts_error_set(err, TS_ERR_NOMEM, "out of memory (%s)", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        ts_status st = ts_error_set(err, TS_ERR_IO, "cannot write .npy file: %s (%s)", strerror(errno), path);
        free(tmp);
        return st;
    }
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)n, f) == (size_t)n;
    for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    if (ok && t->nbytes) {
        if (t->dtype == TS_BOOL) {
            for (size_t i = 0; ok && i < t->nbytes; i++) ok = fputc(((const uint8_t *)t->data)[i] != 0, f) != EOF;
        } else {
            ok = fwrite(t->data, 1, t->nbytes, f) == t->nbytes;
        }
    }
    int saved_errno = errno;
    if (fclose(f)) ok = false, saved_errno = errno;
    if (ok && rename(tmp, path)) ok = false, saved_errno = errno;
    ts_status st = TS_OK;
    if (!ok) {
        unlink(tmp);
        st = ts_error_set(err, TS_ERR_IO, "cannot write .npy file: %s (%s)", strerror(saved_errno), path);
    }
    free(tmp);
    return st;
}
