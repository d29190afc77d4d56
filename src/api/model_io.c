/* ts_onnx_read_io: a model's inputs and outputs as its file declares them,
 * read without building the graph.  Building checks every node's shapes,
 * and with symbolic dimensions not yet bound those checks run on
 * placeholder sizes (1) that a model may refuse (a reflect Pad wider than
 * 1, a kernel larger than 1x1 without padding): what binds the sizes from
 * the user's inputs (the command line's --inputs DIR, the session) and
 * what describes an unbound model (tsopt info) read the declaration
 * instead.  The weights' raw_data is cut before parsing (raw_spans.c), so
 * this reads a few hundred kilobytes of any model. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "api/value_inputs.h"
#include "ir/ir.h"

static size_t io_strings(const ts_io_info *v, int n)
{
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        k += strlen(v[i].name ? v[i].name : "") + 1;
        for (int d = 0; d < v[i].shape.rank; d++) k += v[i].dim_params[d] ? strlen(v[i].dim_params[d]) + 1 : 0;
    }
    return k;
}

static char *put(char **p, const char *s)
{
    char *d = *p;
    size_t n = strlen(s) + 1;
    memcpy(d, s, n);
    *p += n;
    return d;
}

static void io_copy(ts_io_info *dst, const ts_io_info *src, const bool *any_shape, int n, char **p)
{
    for (int i = 0; i < n; i++) {
        dst[i] = src[i];
        dst[i].name = put(p, src[i].name ? src[i].name : "");
        for (int d = 0; d < src[i].shape.rank; d++)
            if (src[i].dim_params[d]) dst[i].dim_params[d] = put(p, src[i].dim_params[d]);
        if (any_shape && any_shape[i]) dst[i].shape.rank = -1;
    }
}

static ts_status from_proto(const Onnx__ModelProto *mp, ts_model_io **out, ts_error *err)
{
    ts_io_info *ins = NULL, *outs = NULL;
    bool *any_shape = NULL;
    int nin = 0, nout = 0;
    ts_status st = ts_vin_io_infos(mp, &ins, &nin, &any_shape, &outs, &nout, err);
    if (!st) {
        bool *out_any = calloc((size_t)nout + 1, sizeof *out_any);
        const Onnx__GraphProto *gp = mp->graph;
        for (int o = 0; out_any && o < nout; o++) {
            const Onnx__TypeProto *tp = gp->output[o]->type;
            out_any[o] = !tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
                         !tp->tensor_type->shape || tp->tensor_type->shape->n_dim > TS_MAX_RANK;
        }
        size_t ns = io_strings(ins, nin) + io_strings(outs, nout);
        size_t head = sizeof(ts_model_io) + sizeof(ts_io_info) * (size_t)(nin + nout);
        ts_model_io *m = out_any ? calloc(1, head + ns + 1) : NULL;
        if (!m) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory reading a model's inputs");
        } else {
            m->ninputs = nin;
            m->noutputs = nout;
            m->inputs = (ts_io_info *)(m + 1);
            m->outputs = m->inputs + nin;
            char *p = (char *)(m->outputs + nout);
            io_copy(m->inputs, ins, any_shape, nin, &p);
            io_copy(m->outputs, outs, out_any, nout, &p);
            *out = m;
        }
        free(out_any);
    }
    free(ins);
    free(outs);
    free(any_shape);
    return st;
}

ts_status ts_onnx_read_io(const char *path, ts_model_io **out, ts_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ts_error_set(err, TS_ERR_IO, "cannot open model '%s': %s", path, strerror(errno));
    struct stat sb;
    char model[300];
    snprintf(model, sizeof model, "model '%.280s'", path);
    ts_status st = TS_OK;
    uint8_t *msg = NULL;
    size_t mlen = 0, nspans = 0;
    ts_onnx_span *spans = NULL;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode))
        st = ts_error_set(err, TS_ERR_IO, "cannot read model '%s': not a regular file", path);
    else if (!sb.st_size)
        st = ts_error_set(err, TS_ERR_PARSE, "%s is empty", model);
    const ts_onnx_src src = {.fd = fd, .size = (uint64_t)sb.st_size};
    if (!st) st = ts_onnx_raw_spans(&src, &msg, &mlen, &spans, &nspans, model, err);
    if (!st && !msg) { /* not cut: parse it whole */
        if (!(msg = malloc((size_t)src.size))) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory reading %s", model);
        else if (!(st = ts_onnx_span_read(&src, &(ts_onnx_span){0, src.size}, msg, model, err)))
            mlen = (size_t)src.size;
    }
    close(fd);
    free(spans);
    Onnx__ModelProto *mp = st ? NULL : onnx__model_proto__unpack(NULL, mlen, msg);
    free(msg);
    if (!st && (!mp || !mp->graph))
        st = ts_error_set(err, TS_ERR_PARSE, "%s is not a valid ONNX protobuf (truncated or corrupt)", model);
    if (!st && (st = from_proto(mp, out, err))) ts_error_prefix(err, "%s", model);
    if (mp) onnx__model_proto__free_unpacked(mp, NULL);
    return st;
}

void ts_model_io_free(ts_model_io *io) { free(io); }

bool ts_model_io_symbolic(const ts_model_io *io)
{
    for (int i = 0; io && i < io->ninputs; i++)
        for (int d = 0; d < io->inputs[i].shape.rank; d++)
            if (io->inputs[i].dim_params[d]) return true;
    return false;
}

const char *ts_io_declared_str(const ts_io_info *in, char *buf, size_t n)
{
    size_t k = 0;
    if (!n) return buf;
    buf[0] = 0;
    if (in->shape.rank < 0) {
        snprintf(buf, n, "any shape");
        return buf;
    }
    k += (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < in->shape.rank && k < n; d++) {
        const char *p = in->dim_params[d];
        int w = p ? snprintf(buf + k, n - k, "%s%s", d ? ", " : "", *p ? p : "?")
                  : snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)in->shape.dims[d]);
        k += w > 0 ? (size_t)w : 0;
    }
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* Whether t's rank and fixed dimensions are those declared. */
static bool fits(const ts_io_info *in, const ts_tensor *t)
{
    if (t->shape.rank != in->shape.rank) return false;
    for (int d = 0; d < t->shape.rank; d++)
        if (!in->dim_params[d] && t->shape.dims[d] != in->shape.dims[d]) return false;
    return true;
}

ts_status ts_model_io_bind_dir(const ts_model_io *io, const char *dir, ts_input_bind **binds, int *n, ts_error *err)
{
    for (int i = 0; i < io->ninputs; i++) {
        const ts_io_info *in = &io->inputs[i];
        bool symbolic = in->shape.rank < 0, given = false;
        for (int d = 0; d < in->shape.rank; d++) symbolic |= in->dim_params[d] != NULL;
        for (int b = 0; b < *n && !given; b++) given = !strcmp((*binds)[b].name, in->name);
        if (!symbolic || given) continue;
        char stem[1024], path[4096], a[200], s[160];
        ts_name_sanitize(in->name, stem, sizeof stem);
        snprintf(path, sizeof path, "%s/%s.npy", dir, stem);
        ts_tensor *t = NULL;
        ts_error e = {0};
        if (ts_npy_load(path, &t, &e)) {
            /* absent: the input is random or named by its reader; present
             * but unreadable: said here, or the load would fail first on
             * the placeholder sizes and never name the file */
            if (access(path, F_OK)) continue;
            return ts_error_set(err, e.code ? e.code : TS_ERR_PARSE, "input '%s': %s", in->name, e.msg);
        }
        ts_status st = TS_OK;
        if (in->shape.rank >= 0 && !fits(in, t))
            st = ts_error_set(err, TS_ERR_INVALID, "input '%s': the model wants %s %s, the file holds %s %s (%s)",
                              in->name, ts_dtype_name(in->dtype), ts_io_declared_str(in, a, sizeof a),
                              ts_dtype_name(t->dtype), ts_shape_str(&t->shape, s, sizeof s), path);
        ts_input_bind *nb = st ? NULL : realloc(*binds, sizeof *nb * (size_t)(*n + 1));
        if (!st && !nb) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory binding input '%s'", in->name);
        if (!st) {
            *binds = nb;
            nb[(*n)++] = (ts_input_bind){in->name, t->shape};
        }
        ts_tensor_unref(t);
        if (st) return st;
    }
    return TS_OK;
}
