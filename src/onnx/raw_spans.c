/* Weights read once: the model message without its large raw_data.
 *
 * protobuf-c's unpack copies every bytes field out of the buffer it
 * parses, so loading a model the plain way holds its weights twice (the
 * file's bytes and the unpacked message: 2x the weights at the peak, a
 * 531 MB VGG-11 peaked at 1.02 GiB before a single tensor existed), and the
 * importer's tensors are a third copy beside the message.  Here the
 * model's bytes are walked at the wire-format level first: the raw_data of
 * the main graph's initializers (ModelProto.graph = 7, GraphProto.initializer
 * = 5, TensorProto.raw_data = 9) is cut out, recording where it lies, and
 * the enclosing lengths are rewritten.  protobuf-c then unpacks a message of
 * a few hundred kilobytes, and each initializer's bytes go from the file
 * straight into its tensor (tensor_proto.c), one tensor at a time.
 *
 * The file is read with pread through a small window, not mapped: a file
 * truncated while it loads gives a read error, not SIGBUS, and the page
 * cache it goes through is not this process's memory.
 *
 * Only what the walk can prove is cut.  Anything unusual (a deprecated group
 * wire type, a second `graph` or `raw_data` field that protobuf would merge
 * or override, a length past the end) makes ts_onnx_raw_spans report "not
 * cut", and the caller parses the whole model as before: protobuf-c then
 * says what is wrong with it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "onnx/proto.h"

/* raw_data of at least this many bytes is cut (smaller ones cost more in
 * reads than they weigh) */
#define CUT_MIN_BYTES 1024
#define WINDOW (64u << 10)

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };
enum { MODEL_GRAPH = 7, GRAPH_INITIALIZER = 5, TENSOR_RAW_DATA = 9 };

typedef struct reader {
    const ts_onnx_src *src;
    uint8_t *win;
    uint64_t win_off;
    size_t win_len;
    int io_errno; /* a failed read (0: none, -1: short) */
} reader;

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
} buf;

typedef struct walk {
    reader r;
    ts_onnx_span *spans;
    size_t nspans, cap;
    bool bad; /* not cut: the caller parses the whole model */
    bool nomem;
} walk;

/* n bytes at off into dst; false (w->r.io_errno set) on a failed read */
static bool rd(reader *r, uint64_t off, void *dst, size_t n)
{
    if (r->src->mem) {
        memcpy(dst, r->src->mem + off, n);
        return true;
    }
    if (off >= r->win_off && off + n <= r->win_off + r->win_len) {
        memcpy(dst, r->win + (off - r->win_off), n);
        return true;
    }
    if (n > WINDOW / 2) { /* large: straight into dst */
        for (size_t done = 0; done < n;) {
            ssize_t k = pread(r->src->fd, (char *)dst + done, n - done, (off_t)(off + done));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) {
                r->io_errno = k < 0 ? errno : -1;
                return false;
            }
            done += (size_t)k;
        }
        return true;
    }
    size_t want = WINDOW;
    if (off + want > r->src->size) want = (size_t)(r->src->size - off);
    size_t done = 0;
    int e = -1;
    while (done < want) {
        ssize_t k = pread(r->src->fd, r->win + done, want - done, (off_t)(off + done));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) e = errno;
        if (k <= 0) break;
        done += (size_t)k;
    }
    r->win_off = off;
    r->win_len = done;
    if (done < n) {
        r->io_errno = e;
        return false;
    }
    memcpy(dst, r->win, n);
    return true;
}

/* A varint at *pos (< end); false when malformed or unreadable. */
static bool varint(walk *w, uint64_t *pos, uint64_t end, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        uint8_t b;
        if (*pos >= end || !rd(&w->r, *pos, &b, 1)) return false;
        (*pos)++;
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

static bool reserve(walk *w, buf *b, size_t more)
{
    if (b->len + more <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        w->nomem = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static bool put_varint(walk *w, buf *b, uint64_t v)
{
    if (!reserve(w, b, 10)) return false;
    do {
        b->p[b->len++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return true;
}

/* Bytes [from, to) of the source, as they are. */
static bool copy_range(walk *w, buf *b, uint64_t from, uint64_t to)
{
    size_t n = (size_t)(to - from);
    if (!reserve(w, b, n)) return false;
    if (n && !rd(&w->r, from, b->p + b->len, n)) return false;
    b->len += n;
    return true;
}

static bool add_span(walk *w, uint64_t off, uint64_t len)
{
    if (w->nspans == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        ts_onnx_span *s = realloc(w->spans, cap * sizeof *s);
        if (!s) {
            w->nomem = true;
            return false;
        }
        w->spans = s;
        w->cap = cap;
    }
    w->spans[w->nspans++] = (ts_onnx_span){off, len};
    return true;
}

/* Message [pos, end) at `level` (0 model, 1 graph, 2 tensor) into out, less
 * what is cut.  false: stop (w->bad, w->nomem or a read error says why). */
static bool rewrite(walk *w, uint64_t pos, uint64_t end, int level, buf *out)
{
    bool seen = false; /* the one field followed at this level */
    uint64_t cut_off = 0, cut_len = 0;
    while (pos < end) {
        uint64_t start = pos, key, len = 0;
        if (!varint(w, &pos, end, &key)) goto bad;
        unsigned wt = (unsigned)(key & 7);
        uint64_t field = key >> 3;
        switch (wt) {
        case WT_VARINT:
            if (!varint(w, &pos, end, &len)) goto bad;
            break;
        case WT_I64:
        case WT_I32:
            if (end - pos < (wt == WT_I64 ? 8u : 4u)) goto bad;
            pos += wt == WT_I64 ? 8 : 4;
            break;
        case WT_LEN:
            if (!varint(w, &pos, end, &len) || len > end - pos) goto bad;
            break;
        default: goto bad; /* groups (3, 4) and invalid types */
        }
        if (!field) goto bad;
        bool follow =
            wt == WT_LEN && ((level == 0 && field == MODEL_GRAPH) || (level == 1 && field == GRAPH_INITIALIZER));
        if (wt == WT_LEN && level == 2 && field == TENSOR_RAW_DATA) {
            if (seen) goto bad; /* the last would win: keep it simple */
            seen = true;
            if (len >= CUT_MIN_BYTES) {
                cut_off = pos;
                cut_len = len;
                pos += len;
                continue;
            }
        }
        if (follow) {
            if (level == 0 && seen) goto bad; /* a second graph would be merged into the first */
            seen = level == 0 ? true : seen;
            buf child = {0};
            size_t before = w->nspans;
            bool ok = rewrite(w, pos, pos + len, level + 1, &child);
            if (ok && level == 1 && w->nspans == before && !add_span(w, 0, 0)) ok = false; /* nothing cut */
            ok = ok && put_varint(w, out, key) && put_varint(w, out, child.len) && reserve(w, out, child.len);
            if (ok) {
                if (child.len) memcpy(out->p + out->len, child.p, child.len);
                out->len += child.len;
            }
            free(child.p);
            if (!ok) return false;
            pos += len;
            continue;
        }
        if (wt == WT_LEN) pos += len;
        if (!copy_range(w, out, start, pos)) return false;
    }
    if (pos != end) goto bad;
    if (level == 2 && cut_len) return add_span(w, cut_off, cut_len);
    return true;
bad:
    w->bad = true;
    return false;
}

ts_status ts_onnx_raw_spans(const ts_onnx_src *src, uint8_t **msg, size_t *msg_len, ts_onnx_span **spans,
                            size_t *nspans, const char *model, ts_error *err)
{
    *msg = NULL;
    *msg_len = 0;
    *spans = NULL;
    *nspans = 0;
    walk w = {.r = {.src = src}};
    if (!src->mem && !(w.r.win = malloc(WINDOW)))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory reading %s", model);
    buf out = {0};
    bool ok = rewrite(&w, 0, src->size, 0, &out);
    free(w.r.win);
    if (ok && reserve(&w, &out, 1)) { /* never a NULL message, even an empty one */
        *msg = out.p;
        *msg_len = out.len;
        *spans = w.spans;
        *nspans = w.nspans;
        return TS_OK;
    }
    free(out.p);
    free(w.spans);
    if (w.nomem) return ts_error_set(err, TS_ERR_NOMEM, "out of memory reading %s", model);
    if (w.r.io_errno)
        return ts_error_set(err, TS_ERR_IO, "cannot read %s: %s", model,
                            w.r.io_errno > 0 ? strerror(w.r.io_errno) : "short read (the file changed while loading)");
    return TS_OK; /* w.bad: not cut, *msg NULL */
}

ts_status ts_onnx_span_read(const ts_onnx_src *src, const ts_onnx_span *span, void *dst, const char *what,
                            ts_error *err)
{
    if (src->mem) {
        memcpy(dst, src->mem + span->off, (size_t)span->len);
        return TS_OK;
    }
    for (size_t done = 0; done < span->len;) {
        ssize_t k = pread(src->fd, (char *)dst + done, (size_t)span->len - done, (off_t)(span->off + done));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return ts_error_set(err, TS_ERR_IO, "%s: cannot read its data from the model file: %s", what,
                                k < 0 ? strerror(errno) : "short read (the file changed while loading)");
        done += (size_t)k;
    }
    return TS_OK;
}
