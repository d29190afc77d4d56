/* ts_session: an ONNX model run at whatever sizes its inputs come in, as
 * ONNX Runtime's InferenceSession does.  tsopt's graphs have static shapes
 * (shape arithmetic is folded at import), so new input sizes mean loading
 * the model again with those sizes bound and building a plan for it; the
 * last SESSION_PLANS shape signatures keep theirs. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ir/meta.h"
#include "tsopt.h"

#define SESSION_PLANS 4

typedef struct entry {
    ts_shape *shapes; /* one per graph input: the signature */
    ts_graph *g;      /* owned, unless it is the session's own graph */
    ts_plan *p;
    uint64_t used; /* last run, for eviction */
} entry;

struct ts_session {
    char *path;
    /* The file's bytes and folder, kept for loading at new sizes (models
     * with symbolic dimensions only): the file may be gone by then. */
    void *bytes;
    size_t size;
    char *base_dir;
    ts_graph *graph; /* at the default sizes */
    ts_plan_opts popts;
    ts_io_info *ins, *outs;
    entry cache[SESSION_PLANS];
    uint64_t clock;
    pthread_mutex_t lock;
};

static bool has_symbolic(const ts_graph *g)
{
    for (int i = 0; i < g->ninputs; i++)
        for (int d = 0; d < g->values[g->inputs[i]].shape.rank; d++)
            if (ts_graph_input_dim_param(g, i, d)) return true;
    return false;
}

static ts_status read_file(ts_session *s, ts_error *err)
{
    FILE *f = fopen(s->path, "rb");
    if (!f) return ts_error_set(err, TS_ERR_IO, "cannot open model '%s': %s", s->path, strerror(errno));
    struct stat sb;
    ts_status st = TS_OK;
    if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode))
        st = ts_error_set(err, TS_ERR_IO, "cannot read model '%s': not a regular file", s->path);
    else if (!(s->bytes = malloc((size_t)sb.st_size + 1)))
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory reading model '%s'", s->path);
    else if ((s->size = fread(s->bytes, 1, (size_t)sb.st_size, f)) != (size_t)sb.st_size || ferror(f))
        st = ts_error_set(err, TS_ERR_IO, "cannot read model '%s': short read", s->path);
    fclose(f);
    if (st) return st;
    /* external data is found relative to the model's folder */
    if (!(s->base_dir = strdup(s->path))) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    char *slash = strrchr(s->base_dir, '/');
    if (!slash) strcpy(s->base_dir, ".");
    else if (slash == s->base_dir) slash[1] = 0;
    else *slash = 0;
    return TS_OK;
}

static ts_io_info *io_infos(const ts_graph *g, bool output)
{
    int n = output ? g->noutputs : g->ninputs;
    ts_io_info *v = calloc((size_t)n + 1, sizeof *v);
    if (!v) return NULL;
    for (int i = 0; i < n; i++) {
        const ts_value *x = &g->values[output ? g->outputs[i] : g->inputs[i]];
        v[i].name = x->name;
        v[i].dtype = x->dtype;
        v[i].shape = x->shape;
        for (int d = 0; d < x->shape.rank; d++)
            v[i].dim_params[d] = output ? ts_graph_output_dim_param(g, i, d) : ts_graph_input_dim_param(g, i, d);
    }
    return v;
}

ts_status ts_session_open(const char *path, int threads, ts_session **out, ts_error *err)
{
    *out = NULL;
    if (threads < 0) return ts_error_set(err, TS_ERR_INVALID, "session: threads must be >= 0 (0: one per core), got %d", threads);
    ts_session *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory opening model '%s'", path);
    }
    pthread_mutex_init(&s->lock, NULL);
    s->popts.threads = threads;
    ts_status st = ts_onnx_load(path, NULL, 0, &s->graph, err);
    if (!st && has_symbolic(s->graph)) st = read_file(s, err);
    if (!st && (!(s->ins = io_infos(s->graph, false)) || !(s->outs = io_infos(s->graph, true))))
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory opening model '%s'", path);
    if (st) {
        ts_session_free(s);
        return st;
    }
    *out = s;
    return TS_OK;
}

static void entry_clear(ts_session *s, entry *e)
{
    ts_plan_free(e->p);
    if (e->g != s->graph) ts_graph_free(e->g);
    free(e->shapes);
    memset(e, 0, sizeof *e);
}

void ts_session_free(ts_session *s)
{
    if (!s) return;
    for (int k = 0; k < SESSION_PLANS; k++) entry_clear(s, &s->cache[k]);
    ts_graph_free(s->graph);
    free(s->ins);
    free(s->outs);
    free(s->bytes);
    free(s->base_dir);
    free(s->path);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

const ts_graph *ts_session_graph(const ts_session *s) { return s->graph; }
int ts_session_ninputs(const ts_session *s) { return s->graph->ninputs; }
int ts_session_noutputs(const ts_session *s) { return s->graph->noutputs; }

bool ts_session_input_info(const ts_session *s, int i, ts_io_info *info)
{
    if (i < 0 || i >= s->graph->ninputs) return false;
    *info = s->ins[i];
    return true;
}

bool ts_session_output_info(const ts_session *s, int i, ts_io_info *info)
{
    if (i < 0 || i >= s->graph->noutputs) return false;
    *info = s->outs[i];
    return true;
}

/* Shape as the model declares it: "batchx3x224x224" ('?' for an unnamed
 * symbolic dimension). */
static const char *declared_str(const ts_io_info *in, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int d = 0; d < in->shape.rank && k < n; d++) {
        const char *p = in->dim_params[d];
        int w = p ? snprintf(buf + k, n - k, "%s%s", d ? "x" : "", *p ? p : "?")
                  : snprintf(buf + k, n - k, "%s%lld", d ? "x" : "", (long long)in->shape.dims[d]);
        k += w > 0 ? (size_t)w : 0;
    }
    if (!in->shape.rank) snprintf(buf, n, "scalar");
    return buf;
}

/* Inputs against the model's declaration, before anything is loaded: the
 * same checks the importer makes, said in terms of the run. */
static ts_status check_inputs(const ts_session *s, ts_tensor *const *inputs, ts_error *err)
{
    for (int i = 0; i < s->graph->ninputs; i++) {
        const ts_io_info *in = &s->ins[i];
        const ts_tensor *t = inputs[i];
        char a[200], b[160];
        if (!t) return ts_error_set(err, TS_ERR_INVALID, "run: input '%s' is missing", in->name);
        if (t->dtype != in->dtype)
            return ts_error_set(err, TS_ERR_INVALID, "run: input '%s' is %s, the model expects %s", in->name,
                                ts_dtype_name(t->dtype), ts_dtype_name(in->dtype));
        bool ok = t->shape.rank == in->shape.rank;
        for (int d = 0; ok && d < t->shape.rank; d++)
            ok = in->dim_params[d] ? t->shape.dims[d] >= 1 : t->shape.dims[d] == in->shape.dims[d];
        if (!ok)
            return ts_error_set(err, TS_ERR_INVALID, "run: input '%s' has shape %s, the model expects %s", in->name,
                                ts_shape_str(&t->shape, b, sizeof b), declared_str(in, a, sizeof a));
    }
    return TS_OK;
}

static bool same_signature(const ts_session *s, const ts_shape *shapes, ts_tensor *const *inputs)
{
    for (int i = 0; i < s->graph->ninputs; i++)
        if (!ts_shape_eq(&shapes[i], &inputs[i]->shape)) return false;
    return true;
}

/* The graph and plan for the inputs' shapes: cached, or made now in the
 * least recently used slot. */
static entry *plan_for(ts_session *s, ts_tensor *const *inputs, ts_error *err)
{
    entry *e = NULL, *lru = &s->cache[0];
    for (int k = 0; k < SESSION_PLANS; k++) {
        entry *c = &s->cache[k];
        if (c->shapes && same_signature(s, c->shapes, inputs)) e = c;
        if (!c->shapes || (lru->shapes && c->used < lru->used)) lru = c;
    }
    if (e) return e;
    e = lru;
    entry_clear(s, e);
    int n = s->graph->ninputs;
    ts_input_bind *binds = calloc((size_t)n + 1, sizeof *binds);
    if (!binds || !(e->shapes = calloc((size_t)n + 1, sizeof *e->shapes))) {
        free(binds);
        ts_error_set(err, TS_ERR_NOMEM, "out of memory planning model '%s'", s->path);
        return NULL;
    }
    bool defaults = true;
    for (int i = 0; i < n; i++) {
        e->shapes[i] = inputs[i]->shape;
        binds[i] = (ts_input_bind){s->ins[i].name, inputs[i]->shape};
        defaults &= ts_shape_eq(&inputs[i]->shape, &s->ins[i].shape);
    }
    ts_status st = TS_OK;
    if (defaults) e->g = s->graph;
    else if (!s->bytes) /* no symbolic dimension: check_inputs let only the declared shapes through */
        st = ts_error_set(err, TS_ERR_INVALID, "run: model '%s' has no symbolic dimension to bind", s->path);
    else if ((st = ts_onnx_load_buffer(s->bytes, s->size, s->base_dir, binds, n, &e->g, err)))
        ts_error_prefix(err, "model '%s' at the inputs' sizes", s->path);
    free(binds);
    if (!st && (st = ts_plan_build(e->g, &s->popts, &e->p, err))) ts_error_prefix(err, "model '%s'", s->path);
    if (st) {
        entry_clear(s, e);
        return NULL;
    }
    return e;
}

ts_status ts_session_run(ts_session *s, ts_tensor *const *inputs, ts_tensor **outputs, ts_error *err)
{
    int nout = s->graph->noutputs;
    for (int o = 0; o < nout; o++) outputs[o] = NULL;
    ts_status st = check_inputs(s, inputs, err);
    if (st) return st;
    pthread_mutex_lock(&s->lock);
    entry *e = plan_for(s, inputs, err);
    if (!e) st = err->code ? err->code : TS_ERR_INVALID;
    for (int o = 0; !st && o < nout; o++) {
        const ts_value *v = &e->g->values[e->g->outputs[o]];
        if (!(outputs[o] = ts_tensor_new(v->dtype, &v->shape, err))) st = err->code;
    }
    if (!st) {
        e->used = ++s->clock;
        st = ts_plan_run(e->p, inputs, outputs, err);
    }
    pthread_mutex_unlock(&s->lock);
    if (st)
        for (int o = 0; o < nout; o++) {
            ts_tensor_unref(outputs[o]);
            outputs[o] = NULL;
        }
    return st;
}
