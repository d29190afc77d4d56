/* ONNX external data (docs/onnx-models.md): weights kept in a file beside
 * the model, each TensorProto saying where ("location", "offset",
 * "length").
 *
 * Reading: a large, aligned tensor is memory-mapped from the file rather
 * than copied, so a model of W bytes of weights runs in about W plus its
 * working memory (the runtime reads constants in place); the mapping is
 * private (copy-on-write), so nothing written to a tensor reaches the
 * file.  Anything else is read by tensor_proto.c's pread path, which also
 * reports every error.
 *
 * Writing: every initializer of at least EXTERNAL_MIN_BYTES moves into
 * PATH.data at offsets aligned to EXTERNAL_ALIGN (so it maps when read
 * back); the data file is written and renamed before the model, and
 * removed again if the model cannot be written. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "onnx/proto.h"

/* Tensors smaller than this stay in the .onnx file (ONNX's own
 * convert_model_to_external_data uses 1 KiB too). */
#define EXTERNAL_MIN_BYTES 1024
/* Offsets of tensors written to the data file: a page, so each maps. */
#define EXTERNAL_ALIGN 4096
/* Tensors mapped when read: at least this large, offset this aligned. */
#define MAP_MIN_BYTES (64u << 10)
#define MAP_ALIGN 64

typedef struct mapping {
    void *base;
    size_t len;
} mapping;

static void mapping_release(void *keep)
{
    mapping *m = keep;
    munmap(m->base, m->len);
    free(m);
}

int ts_onnx_external_map(const Onnx__TensorProto *tp, const char *base_dir, ts_dtype dt, const ts_shape *shape,
                         size_t want, ts_tensor **out)
{
    const char *loc = NULL;
    int64_t off = 0, len = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key) continue;
        if (!strcmp(e->key, "location")) loc = e->value;
        else if (!strcmp(e->key, "offset") && !ts_onnx_parse_offset(e->value, &off)) return 0;
        else if (!strcmp(e->key, "length") && !ts_onnx_parse_offset(e->value, &len)) return 0;
    }
    /* the pread path checks the location and reports every problem */
    if (!loc || !*loc || loc[0] == '/' || strstr(loc, "..") || !base_dir || dt == TS_BOOL) return 0;
    if (want < MAP_MIN_BYTES || off % MAP_ALIGN || (len >= 0 && (uint64_t)len != want)) return 0;
    size_t plen = strlen(base_dir) + strlen(loc) + 2;
    char *path = malloc(plen);
    if (!path) return 0;
    snprintf(path, plen, "%s/%s", *base_dir ? base_dir : ".", loc);
    int fd = open(path, O_RDONLY);
    free(path);
    if (fd < 0) return 0;
    struct stat sb;
    long page = sysconf(_SC_PAGESIZE);
    int64_t start = off - off % (page > 0 ? page : 4096);
    void *base = MAP_FAILED;
    size_t mlen = (size_t)(off - start) + want;
    if (!fstat(fd, &sb) && S_ISREG(sb.st_mode) && off <= (int64_t)sb.st_size &&
        (int64_t)want <= (int64_t)sb.st_size - off)
        base = mmap(NULL, mlen, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, (off_t)start);
    close(fd); /* the mapping stays valid */
    if (base == MAP_FAILED) return 0;
    mapping *m = malloc(sizeof *m);
    ts_tensor *t = m ? ts_tensor_wrap(dt, shape, (char *)base + (off - start)) : NULL;
    if (!t) {
        free(m);
        munmap(base, mlen);
        return 0;
    }
    *m = (mapping){base, mlen};
    t->keep = m;
    t->release = mapping_release;
    *out = t;
    return 1;
}

/* ------------------------------------------------------------ writing */

/* "dir/name.onnx" -> "name.onnx.data": the location, relative to the
 * model's folder as the convention wants. */
static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static ts_status write_all(int fd, const void *buf, size_t n, const char *path, ts_error *err)
{
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, (const char *)buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        done += (size_t)w;
    }
    return TS_OK;
}

ts_status ts_onnx_external_write(Onnx__GraphProto *gp, const char *model_path, void *(*alloc)(void *ctx, size_t size),
                                 void *ctx, char **data_path, ts_error *err)
{
    *data_path = NULL;
    size_t plen = strlen(model_path) + 16;
    char *path = malloc(plen), *tmp = malloc(plen), *loc = alloc(ctx, plen);
    if (!path || !tmp || !loc) {
        free(path);
        free(tmp);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory writing ONNX model");
    }
    snprintf(path, plen, "%s.data", model_path);
    snprintf(tmp, plen, "%s.data.tmp", model_path);
    snprintf(loc, plen, "%s.data", base_name(model_path));
    ts_status st = TS_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        st = ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        goto out;
    }
    static const char zeros[EXTERNAL_ALIGN];
    int64_t off = 0;
    for (size_t i = 0; i < gp->n_initializer && !st; i++) {
        Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp->has_raw_data || tp->raw_data.len < EXTERNAL_MIN_BYTES) continue;
        size_t pad = (size_t)((EXTERNAL_ALIGN - off % EXTERNAL_ALIGN) % EXTERNAL_ALIGN);
        if ((st = write_all(fd, zeros, pad, path, err))) break;
        off += (int64_t)pad;
        if ((st = write_all(fd, tp->raw_data.data, tp->raw_data.len, path, err))) break;
        Onnx__StringStringEntryProto *kv = alloc(ctx, 3 * sizeof *kv);
        Onnx__StringStringEntryProto **kvp = alloc(ctx, 3 * sizeof *kvp);
        char *num = alloc(ctx, 48);
        if (!kv || !kvp || !num) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory writing ONNX model");
            break;
        }
        snprintf(num, 48, "%lld", (long long)off);
        snprintf(num + 24, 24, "%zu", tp->raw_data.len);
        const char *keys[3] = {"location", "offset", "length"}, *vals[3] = {loc, num, num + 24};
        for (int k = 0; k < 3; k++) {
            onnx__string_string_entry_proto__init(&kv[k]);
            kv[k].key = (char *)keys[k];
            kv[k].value = (char *)vals[k];
            kvp[k] = &kv[k];
        }
        off += (int64_t)tp->raw_data.len;
        tp->n_external_data = 3;
        tp->external_data = kvp;
        tp->has_data_location = 1;
        tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        tp->has_raw_data = 0;
        tp->raw_data.len = 0;
        tp->raw_data.data = NULL;
    }
    if (fsync(fd) && !st) st = ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    if (close(fd) && !st) st = ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    if (!st && rename(tmp, path)) st = ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    if (st) unlink(tmp);
out:
    free(tmp);
    if (st)
        free(path);
    else
        *data_path = path;
    return st;
}
