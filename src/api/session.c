/* ts_session: an ONNX model run at whatever sizes its inputs come in, as
 * ONNX Runtime's InferenceSession does.  tsopt's graphs have static shapes
 * (shape arithmetic is folded at import), so new input sizes mean loading
 * the model again with those sizes bound (from the model parsed once, its
 * weights shared: ts_onnx_kept) and building a plan for it; the last
 * SESSION_PLANS shape signatures keep theirs.  Sizes of the same class as
 * a cached plan's (each dimension equal, or both above 1: a decoder's past
 * growing by one each token) re-bind that plan to the graph loaded at the
 * new sizes (ts_plan_rebind: only the steps whose shapes changed are
 * rebuilt) instead of building one; other new sizes build a plan, reusing
 * the weights earlier plans packed (ts_pack_cache).  A model whose shapes
 * depend on input values (value_inputs.h) is loaded at each run's shapes
 * and values of those inputs, and cached by both.  A model that does not
 * load at its default sizes (symbolic dimensions 1: a reflect Pad wider
 * than 1...) opens from its declared inputs and outputs (ts_onnx_read_io)
 * and is loaded at the first run's sizes: its shape checks run on the
 * sizes the inputs bring, never on the placeholder 1s. */
#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "api/value_inputs.h"
#include "ir/ir.h"
#include "ir/meta.h"
#include "onnx/proto.h"
#include "tsopt.h"
#include "util/hash.h"

#define SESSION_PLANS 4

typedef struct entry {
    ts_shape *shapes; /* one per graph input: the signature */
    ts_tensor **values; /* by value: the values of the inputs made constants (NULL for the others) */
    int *slot;          /* by value: session input of each of g's inputs */
    ts_graph *g;      /* owned, unless it is the session's own graph */
    /* the graph p was built from, when p was re-bound to g since (its
     * kept steps may point into it); owned */
    ts_graph *built;
    ts_plan *p;
    uint64_t used; /* last run, for eviction */
    /* its plan holds the only copy of the session graph's packed weights
     * (weights held once): never evicted, a new plan could not be built */
    bool pinned;
    /* its plan reads shared weights unpacked (ts_pack_cache_stats.plain:
     * built for sizes that may run once, a decoder's prompt): built again,
     * packed, when these sizes run again (repack) */
    bool plain;
    /* g's topological order (ts_graph_topo_order), kept while g is derived
     * in place: derive changes shapes and constants there, never nodes or
     * their edges, and recomputing it each token was 10 % of derive's CPU
     * (perf, decoder, 1 thread).  Dropped whenever g is replaced. */
    int *order, norder;
} entry;

struct ts_session {
    char *path;
    /* The file, kept open for loading at new sizes (models with symbolic
     * dimensions only; -1 otherwise): it may be gone from its folder by
     * then.  Not its bytes: those would be a second copy of the weights for
     * the session's whole life. */
    int fd;
    uint64_t size;
    char *base_dir;
    /* The model parsed and its weights decoded once, shared by every graph
     * loaded at new sizes (each re-plan read the whole file and released its
     * copy of the weights again: 60% of a decoder step's re-plan, perf).
     * Made at open for a model with symbolic dimensions (open_kept), which
     * loads the session's graph from it; dropped when the default sizes are
     * planned first, and made again at a later run at other sizes. */
    ts_onnx_kept *kept;
    /* Made with kept: the packed weights of the plans of graphs loaded from
     * kept (which share its tensors), held once and reused by each re-plan
     * instead of packing them again (half of a decoder re-plan's CPU);
     * popts.pack_cache. */
    ts_pack_cache *pack;
    ts_graph *graph; /* at the default sizes; NULL by value, or when it does not load at them */
    ts_model_io *decl; /* the declared inputs and outputs, when graph is NULL for not loading at the defaults */
    ts_plan_opts popts; /* popts.skip: owned copy of the options' */
    ts_io_info *ins, *outs;
    int nin, nout;
    /* By value: shapes depend on the values of some inputs (value_in,
     * grown as loads name them); the file is kept unpacked. */
    Onnx__ModelProto *mp;
    bool *value_in, *any_shape;
    entry cache[SESSION_PLANS];
    bool graph_spent; /* a plan build released weights of `graph` */
    bool graph_raw;   /* `graph` not rewritten yet (loaded from kept: rewritten when planned) */
    uint64_t clock;
    int64_t plan_builds; /* ts_session_plan_builds */
    int64_t plan_rebinds; /* ts_session_plan_rebinds */
    int64_t rebind_lowered, rebind_resized; /* ts_session_rebind_stats */
    int64_t graph_derives; /* ts_session_graph_derives */
    int64_t graph_derives_inplace; /* of those, derived in place (ts_session_rebind_stats) */
    int64_t derive_orders, derive_passes; /* ts_session_derive_stats */
    /* derive(): checked once against the model loaded at the sizes it
     * derived for; off for the session when the two differed */
    bool derive_checked, derive_off;
    /* signatures whose plans re-binds took over (a ring of hashes): one
     * coming back builds its own plan instead, so that sizes alternating
     * within a class are served from the cache, not re-bound back and forth */
    uint64_t retired[8];
    unsigned nretired;
    pthread_mutex_t lock;
};

static bool has_symbolic(const ts_graph *g)
{
    for (int i = 0; i < g->ninputs; i++)
        for (int d = 0; d < g->values[g->inputs[i]].shape.rank; d++)
            if (ts_graph_input_dim_param(g, i, d)) return true;
    return false;
}

static ts_status open_file(ts_session *s, ts_error *err)
{
    s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
    if (s->fd < 0) return ts_error_set(err, TS_ERR_IO, "cannot open model '%s': %s", s->path, strerror(errno));
    struct stat sb;
    if (fstat(s->fd, &sb) || !S_ISREG(sb.st_mode))
        return ts_error_set(err, TS_ERR_IO, "cannot read model '%s': not a regular file", s->path);
    s->size = (uint64_t)sb.st_size;
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

/* A model that does not load without the values of some inputs: its
 * inputs and outputs come from the file; graphs are made at run time. */
static ts_status open_by_value(ts_session *s, ts_error *err)
{
    ts_status st = open_file(s, err);
    if (st) return st;
    uint8_t *bytes = malloc(s->size ? (size_t)s->size : 1);
    if (!bytes) return ts_error_set(err, TS_ERR_NOMEM, "out of memory reading model '%s'", s->path);
    const ts_onnx_src src = {.fd = s->fd, .size = s->size};
    const ts_onnx_span all = {0, s->size};
    char what[300];
    snprintf(what, sizeof what, "model '%.250s'", s->path);
    if (!(st = ts_onnx_span_read(&src, &all, bytes, what, err)))
        s->mp = onnx__model_proto__unpack(NULL, (size_t)s->size, bytes);
    free(bytes); /* the unpacked message is what loads read */
    if (st) return st;
    if (!s->mp || !s->mp->graph)
        return ts_error_set(err, TS_ERR_PARSE, "model '%s' is not a valid ONNX protobuf", s->path);
    if ((st = ts_vin_io_infos(s->mp, &s->ins, &s->nin, &s->any_shape, &s->outs, &s->nout, err)))
        return ts_error_prefix(err, "model '%s'", s->path);
    if (!(s->value_in = calloc((size_t)s->nin + 1, sizeof *s->value_in)))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory opening model '%s'", s->path);
    return TS_OK;
}

/* The session's graph optimization level applied to a graph it loaded. */
static ts_status rewrite(const ts_session *s, ts_graph *g, ts_error *err)
{
    if (ts_graph_opt_apply(g, (ts_graph_opt)s->popts.graph_opt, err) < 0)
        return ts_error_prefix(err, "model '%s': graph optimization", s->path);
    return TS_OK;
}

/* A model with symbolic dimensions that does not load at the default sizes:
 * its inputs and outputs as declared; every run loads it at its sizes.
 * Any other failure (a missing operator, a bad file) is the open's error;
 * err holds the load's message, and stays when this does not apply. */
static ts_status open_deferred(ts_session *s, ts_error *err)
{
    ts_error e = {0};
    if (err->code == TS_ERR_IO || err->code == TS_ERR_PARSE || err->code == TS_ERR_NOMEM ||
        !strstr(err->msg, "unbound symbolic dimension") || ts_onnx_read_io(s->path, &s->decl, &e))
        return err->code;
    if (!ts_model_io_symbolic(s->decl)) return err->code;
    s->nin = s->decl->ninputs;
    s->nout = s->decl->noutputs;
    if (!(s->ins = calloc((size_t)s->nin + 1, sizeof *s->ins)) || !(s->outs = calloc((size_t)s->nout + 1, sizeof *s->outs)))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory opening model '%s'", s->path);
    memcpy(s->ins, s->decl->inputs, sizeof *s->ins * (size_t)s->nin);
    memcpy(s->outs, s->decl->outputs, sizeof *s->outs * (size_t)s->nout);
    ts_status st = open_file(s, &e);
    *err = e; /* the load's complaint waits for the run's sizes */
    return st;
}

/* The file opened, parsed and its weights decoded once into kept, and the
 * session's graph loaded from it.  A model with symbolic dimensions is run
 * at other sizes (a decoder's every run), which load from kept: read at
 * open by ts_onnx_load and again for kept at the first run at other sizes,
 * the file was read twice (a 6-layer d512 decoder's 110 MB: about half of
 * its prompt's CPU, perf).  Without symbolic dimensions kept is dropped
 * here (the graph then holds its weights alone).  False, with nothing
 * left open, where this does not load the model: the caller's ts_onnx_load
 * then says why (or loads it by value, or deferred). */
static bool open_kept(ts_session *s)
{
    ts_error e = {0};
    if (!open_file(s, &e) &&
        !ts_onnx_kept_open(&(ts_onnx_src){.fd = s->fd, .size = s->size}, s->base_dir, "model", &s->kept, &e) &&
        !ts_onnx_kept_load(s->kept, s->base_dir, "model", NULL, 0, &s->graph, &e)) {
        if (has_symbolic(s->graph)) return true;
        ts_onnx_kept_free(s->kept);
        s->kept = NULL;
        close(s->fd);
        s->fd = -1;
        return true;
    }
    ts_graph_free(s->graph);
    s->graph = NULL;
    ts_onnx_kept_free(s->kept);
    s->kept = NULL;
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    free(s->base_dir);
    s->base_dir = NULL;
    return false;
}

ts_status ts_session_open(const char *path, int threads, ts_session **out, ts_error *err)
{
    return ts_session_open_with(path, &(ts_session_options){.threads = threads}, out, err);
}

ts_status ts_session_open_with(const char *path, const ts_session_options *o, ts_session **out, ts_error *err)
{
    *out = NULL;
    const ts_session_options none = {0};
    if (!o) o = &none;
    if (o->threads < 0)
        return ts_error_set(err, TS_ERR_INVALID, "session: threads must be >= 0 (0: one per core), got %d", o->threads);
    if (o->graph_opt < TS_GRAPH_OPT_DEFAULT || o->graph_opt > TS_GRAPH_OPT_ALL)
        return ts_error_set(err, TS_ERR_INVALID, "session: graph_opt must be a ts_graph_opt (0-%d), got %d",
                            TS_GRAPH_OPT_ALL, o->graph_opt);
    ts_session *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path)) || (o->skip && !(s->popts.skip = strdup(o->skip)))) {
        if (s) free(s->path);
        free(s);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory opening model '%s'", path);
    }
    s->fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    s->popts.threads = o->threads;
    s->popts.graph_opt = o->graph_opt;
    s->popts.release_packed_weights = true; /* each graph here is planned once (weights held once) */
    ts_status st = open_kept(s) ? TS_OK : ts_onnx_load(path, NULL, 0, &s->graph, err);
    /* with kept, the rewrites wait for the default sizes' plan: a rewrite
     * folding into a weight kept shares would copy it (fold_affine scales
     * a weight held alone in place), a second copy of it from open on */
    if (!st && s->kept) s->graph_raw = true;
    else if (!st) st = rewrite(s, s->graph, err);
    char name[256];
    if (st && ts_vin_needs_value(err, name, sizeof name)) {
        ts_error e = {0};
        st = open_by_value(s, &e);
        *err = e; /* the load's complaint is answered: no error left on success */
    } else if (st) {
        st = open_deferred(s, err);
    } else {
        if (has_symbolic(s->graph) && s->fd < 0) st = open_file(s, err);
        if (!st && (!(s->ins = io_infos(s->graph, false)) || !(s->outs = io_infos(s->graph, true))))
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory opening model '%s'", path);
        if (!st) {
            s->nin = s->graph->ninputs;
            s->nout = s->graph->noutputs;
        }
    }
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
    ts_graph_free(e->built);
    for (int i = 0; e->values && i < s->nin; i++) ts_tensor_unref(e->values[i]);
    free(e->values);
    free(e->slot);
    free(e->shapes);
    free(e->order);
    memset(e, 0, sizeof *e);
}

void ts_session_free(ts_session *s)
{
    if (!s) return;
    for (int k = 0; k < SESSION_PLANS; k++) entry_clear(s, &s->cache[k]);
    ts_graph_free(s->graph);
    ts_model_io_free(s->decl);
    if (s->mp) onnx__model_proto__free_unpacked(s->mp, NULL);
    free(s->value_in);
    free(s->any_shape);
    free(s->ins);
    free(s->outs);
    ts_pack_cache_free(s->pack); /* after the plans, which hold its entries */
    ts_onnx_kept_free(s->kept);
    if (s->fd >= 0) close(s->fd);
    free(s->base_dir);
    free(s->path);
    free((char *)s->popts.skip);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

const ts_graph *ts_session_graph(const ts_session *s) { return s->graph; }
int ts_session_ninputs(const ts_session *s) { return s->nin; }
int ts_session_noutputs(const ts_session *s) { return s->nout; }

ts_pack_cache_stats ts_session_pack_stats(const ts_session *s)
{
    pthread_mutex_t *m = (pthread_mutex_t *)&s->lock;
    pthread_mutex_lock(m);
    ts_pack_cache_stats st = ts_pack_cache_get_stats(s->pack);
    pthread_mutex_unlock(m);
    return st;
}

int64_t ts_session_plan_builds(const ts_session *s)
{
    pthread_mutex_t *m = (pthread_mutex_t *)&s->lock; /* runs of other threads count them */
    pthread_mutex_lock(m);
    int64_t n = s->plan_builds;
    pthread_mutex_unlock(m);
    return n;
}

int64_t ts_session_graph_derives(const ts_session *s)
{
    pthread_mutex_lock((pthread_mutex_t *)&s->lock);
    int64_t n = s->graph_derives;
    pthread_mutex_unlock((pthread_mutex_t *)&s->lock);
    return n;
}

void ts_session_sized_fold_stats(const ts_session *s, int64_t *folded, int64_t *shared)
{
    pthread_mutex_lock((pthread_mutex_t *)&s->lock);
    ts_onnx_kept_fold_stats(s->kept, folded, shared);
    pthread_mutex_unlock((pthread_mutex_t *)&s->lock);
}

void ts_session_derive_stats(const ts_session *s, int64_t *orders, int64_t *passes)
{
    pthread_mutex_lock((pthread_mutex_t *)&s->lock);
    *orders = s->derive_orders;
    *passes = s->derive_passes;
    pthread_mutex_unlock((pthread_mutex_t *)&s->lock);
}

void ts_session_rebind_stats(const ts_session *s, int64_t *lowered, int64_t *resized, int64_t *inplace)
{
    pthread_mutex_lock((pthread_mutex_t *)&s->lock);
    *lowered = s->rebind_lowered;
    *resized = s->rebind_resized;
    *inplace = s->graph_derives_inplace;
    pthread_mutex_unlock((pthread_mutex_t *)&s->lock);
}

int64_t ts_session_plan_rebinds(const ts_session *s)
{
    pthread_mutex_t *m = (pthread_mutex_t *)&s->lock;
    pthread_mutex_lock(m);
    int64_t n = s->plan_rebinds;
    pthread_mutex_unlock(m);
    return n;
}

bool ts_session_input_info(const ts_session *s, int i, ts_io_info *info)
{
    if (i < 0 || i >= s->nin) return false;
    *info = s->ins[i];
    return true;
}

bool ts_session_output_info(const ts_session *s, int i, ts_io_info *info)
{
    if (i < 0 || i >= s->nout) return false;
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
    for (int i = 0; i < s->nin; i++) {
        const ts_io_info *in = &s->ins[i];
        const ts_tensor *t = inputs[i];
        char a[200], b[160];
        if (!t) return ts_error_set(err, TS_ERR_INVALID, "run: input '%s' is missing", in->name);
        if (t->dtype != in->dtype)
            return ts_error_set(err, TS_ERR_INVALID, "run: input '%s' is %s, the model expects %s", in->name,
                                ts_dtype_name(t->dtype), ts_dtype_name(in->dtype));
        if ((s->any_shape && s->any_shape[i]) || in->shape.rank < 0) continue; /* no declared shape */
        bool ok = t->shape.rank == in->shape.rank;
        for (int d = 0; ok && d < t->shape.rank; d++)
            ok = in->dim_params[d] ? t->shape.dims[d] >= 0 /* ONNX allows empty tensors */
                                   : t->shape.dims[d] == in->shape.dims[d];
        if (!ok)
            return ts_error_set(err, TS_ERR_INVALID, "run: input '%s' has shape %s, the model expects %s", in->name,
                                ts_shape_str(&t->shape, b, sizeof b), declared_str(in, a, sizeof a));
    }
    return TS_OK;
}

static bool same_signature(const ts_session *s, const entry *e, ts_tensor *const *inputs)
{
    for (int i = 0; i < s->nin; i++) {
        if (!ts_shape_eq(&e->shapes[i], &inputs[i]->shape)) return false;
        const ts_tensor *v = e->values ? e->values[i] : NULL;
        if (v && (v->nbytes != inputs[i]->nbytes || (v->nbytes && memcmp(v->data, inputs[i]->data, v->nbytes))))
            return false;
    }
    return true;
}

/* By value: loads the model with the value inputs as constants, adding to
 * them each input that a load names as feeding a shape. */
static ts_status load_by_value(ts_session *s, entry *e, ts_tensor *const *inputs, ts_error *err)
{
    char name[256];
    if (!(e->values = calloc((size_t)s->nin + 1, sizeof *e->values)) ||
        !(e->slot = calloc((size_t)s->nin + 1, sizeof *e->slot)))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory planning model '%s'", s->path);
    for (;;) {
        ts_error e2 = {0};
        if (!ts_vin_load(s->mp, s->base_dir, s->ins, s->nin, s->value_in, inputs, &e->g, e->slot, &e2)) break;
        if (!ts_vin_needs_value(&e2, name, sizeof name) || !ts_vin_mark_sources(s->mp, name, s->value_in)) {
            *err = e2;
            return ts_error_prefix(err, "model '%s' at the inputs' sizes and values", s->path);
        }
    }
    for (int i = 0; i < s->nin; i++)
        if (s->value_in[i] && !(e->values[i] = ts_tensor_clone(inputs[i], err))) return err->code;
    return TS_OK;
}

/* A session that re-plans (a model run at several sizes: a decoder, each
 * token) frees a plan's packed weights and allocates the next one's.
 * glibc maps blocks over its threshold (128 KiB at first) one by one, and
 * raises the threshold only as mapped blocks are freed, so the first
 * re-plans page-fault ~100 MiB of fresh zeroed pages each.  The threshold
 * set at once to where glibc's adaptation ends (its maximum, 32 MiB):
 * 6-layer d512 decoder, a new past length each run, the first 10
 * re-plans + runs 367 -> 87 ms of CPU (median), from about the 10th on
 * 31-32 ms either way (docs/decoder.md).  Process-wide, so set once, and
 * not where the program chose its own setting through glibc's
 * environment. */
static pthread_once_t heap_once = PTHREAD_ONCE_INIT;
static void keep_heap_blocks(void)
{
#ifdef __GLIBC__
    /* and the trim threshold where glibc's adaptation puts it (twice that):
     * set by hand, the mmap threshold stops the adaptation and left trimming
     * at 128 KiB, so a run's outputs freed at the heap's top (a decoder
     * prompt's logits, 4 MB at batch 4) went back to the kernel and were
     * page-faulted again at the next run: 1,288 faults, prompt run 39 -> 58
     * ms CPU once the plan build left no free blocks lower in the heap */
    if (!getenv("MALLOC_MMAP_THRESHOLD_") && !getenv("GLIBC_TUNABLES")) {
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
        if (!getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 64 << 20);
    }
#endif
}

/* Sizes of the same class: every dimension equal, or both above 1 (a
 * past of 5 and of 6 tokens; not 1 and 32: a kernel chosen for one row
 * would stay for 32). */
static bool same_class(const ts_session *s, const entry *e, ts_tensor *const *inputs)
{
    for (int i = 0; i < s->nin; i++) {
        const ts_shape *a = &e->shapes[i], *b = &inputs[i]->shape;
        if (a->rank != b->rank) return false;
        for (int d = 0; d < a->rank; d++)
            if (a->dims[d] != b->dims[d] && (a->dims[d] <= 1 || b->dims[d] <= 1)) return false;
    }
    return true;
}

static uint64_t signature_hash(const ts_session *s, const ts_shape *shapes)
{
    uint64_t h = TS_HASH_SEED;
    for (int i = 0; i < s->nin; i++)
        for (int d = 0; d < shapes[i].rank; d++) h = ts_hash_word(h, (uint64_t)shapes[i].dims[d]);
    return h;
}

static bool retired(const ts_session *s, const ts_shape *shapes)
{
    uint64_t h = signature_hash(s, shapes);
    unsigned n = s->nretired < 8 ? s->nretired : 8;
    for (unsigned k = 0; k < n; k++)
        if (s->retired[k] == h) return true;
    return false;
}

/* The most recently used plan of the same class as the inputs' sizes, or
 * NULL. */
static entry *rebind_candidate(ts_session *s, ts_tensor *const *inputs)
{
    entry *c = NULL;
    for (int k = 0; k < SESSION_PLANS; k++) {
        entry *x = &s->cache[k];
        if (x->p && !x->values && x->g != s->graph && same_class(s, x, inputs) && (!c || x->used > c->used)) c = x;
    }
    return c;
}

static bool same_contents(const ts_tensor *a, const ts_tensor *b)
{
    return a == b || (a && b && a->nbytes == b->nbytes && (!a->nbytes || !memcmp(a->data, b->data, a->nbytes)));
}

/* Every node's outputs of g re-inferred in order; false when a type changes
 * or inference fails.  Guess: a node whose inference fails (it reads a
 * constant of the old sizes, a causal mask) keeps the shapes its outputs
 * had in the graph copied (the old sizes), so that what follows it is
 * inferred at once: a decoder's residual stream after the attention does
 * not depend on the cache's length, and layer i + 1's keys are known before
 * layer i's mask is recomputed.  derive checks the guesses (every sized
 * constant recomputed at the final shapes must be the one taken, then a
 * strict re-inference).  touched (NULL: every node): only the nodes reading
 * a value marked there are inferred, and an output whose shape changes is
 * marked; inference being a function of the inputs' types, shapes and
 * constants, the others would come out as they are.  *guessed: the nodes
 * that kept their old shapes (0 when strict). */
static bool reinfer(ts_graph *g, const int *order, int cnt, bool guess, bool *touched, int *guessed)
{
    ts_error e = {0};
    *guessed = 0;
    for (int k = 0; k < cnt; k++) {
        const ts_node *n = &g->nodes[order[k]];
        ts_dtype dt[16];
        ts_shape sh[16];
        bool any = !touched;
        for (int i = 0; !any && i < n->ninputs; i++) any = n->inputs[i] >= 0 && touched[n->inputs[i]];
        if (!any) continue;
        bool known = n->noutputs <= 16;
        for (int i = 0; known && i < n->ninputs; i++) known = n->inputs[i] < 0 || g->values[n->inputs[i]].shape.rank >= 0;
        if (!known || ts_node_infer(g, order[k], dt, sh, &e)) {
            if (!guess) return false;
            ++*guessed;
            continue;
        }
        for (int o = 0; o < n->noutputs; o++) {
            if (n->outputs[o] < 0) continue;
            ts_value *y = &g->values[n->outputs[o]];
            if (y->dtype != dt[o]) return false;
            if (touched && !ts_shape_eq(&y->shape, &sh[o])) touched[n->outputs[o]] = true;
            y->shape = sh[o];
        }
    }
    return true;
}

/* The graph of a model run at new sizes of a re-bound plan's class,
 * derived from the one the plan is bound to instead of loaded and
 * rewritten again (which was 40 % of a decoder token's CPU: the import
 * 25 %, the rewrites 12 %, perf, 1 thread): a copy whose inputs take the
 * new shapes and every node's outputs re-inferred in order, its constants
 * shared, except those computed from an input's size, taken from a load of
 * only the nodes they are computed from (ts_onnx_kept_sized_consts: a
 * decoder's position row, causal masks and reshape targets; what their
 * Shape nodes read is taken at its shape re-inferred here, so the shapes
 * are inferred again after and must not change).  A constant that is
 * neither a weight shared by both graphs seen (built and bound) nor
 * computed from a size (a rewrite's, a Constant's) must have been equal in
 * both, or this declines.  NULL when it declines (the caller loads).
 *
 * In place (the bound graph is the entry's own, derived or loaded at an
 * earlier re-bind, not the one the plan was built from): g2 itself takes the
 * new sizes, and only the nodes downstream of a changed input or constant
 * are inferred again (a decoder token: the cache's Concats and the
 * attention, ~50 of 184 nodes), where the copy, the full re-inference and
 * freeing the previous graph were half of derive's CPU (perf, 1 thread).
 * A failure then leaves g2 changed: the caller drops the entry. */
static ts_graph *derive(ts_session *s, entry *c, ts_tensor *const *inputs, const ts_input_bind *binds, bool inplace)
{
    const ts_graph *g1 = c->built, *g2 = c->g;
    ts_graph *g = inplace ? c->g : ts_graph_copy(g2);
    int nv = g ? g->nvalues : 0, nw = 0, cnt = 0, guessed = 0;
    /* in place, the order kept from the entry's previous derive (same graph, same nodes) */
    const bool kept_order = inplace && c->order && c->norder <= g->nnodes;
    const char **names = calloc((size_t)nv + 1, sizeof *names);
    int *which = calloc((size_t)nv + 1, sizeof *which),
        *order = kept_order ? c->order : g ? calloc((size_t)g->nnodes + 1, sizeof *order) : NULL;
    ts_tensor **got = calloc((size_t)nv + 1, sizeof *got);
    ts_shape *first = calloc((size_t)nv + 1, sizeof *first);
    bool *later = calloc((size_t)nv + 1, sizeof *later);
    bool *touched = inplace ? calloc((size_t)nv + 1, sizeof *touched) : NULL;
    ts_error e = {0};
    bool ok = g && names && which && order && got && first && later && (touched || !inplace) && g->ninputs == s->nin &&
              g1->nvalues == nv;
    for (int i = 0; ok && i < s->nin; i++) {
        ts_value *v = &g->values[g->inputs[i]];
        ok = !strcmp(v->name, s->ins[i].name) && v->dtype == inputs[i]->dtype;
        if (touched && !ts_shape_eq(&v->shape, &inputs[i]->shape)) touched[g->inputs[i]] = true;
        v->shape = inputs[i]->shape;
    }
    for (int v = 0; ok && v < nv; v++)
        if (g2->values[v].constant && g1->values[v].constant != g2->values[v].constant) {
            names[nw] = g->values[v].name;
            which[nw++] = v;
        }
    /* the name index stays on a graph derived in place: its values and
     * their names never change there, and every token looks names up
     * (building it was 7 % of a decoder token's plan_for, perf) */
    if (kept_order)
        cnt = c->norder;
    else if (ok) {
        ok = !ts_graph_topo_order(g, order, &cnt, &e);
        s->derive_orders++;
        if (ok && inplace) { /* kept for the next token's derive of this graph */
            c->order = order;
            c->norder = cnt;
        }
    }
    s->derive_passes += ok;
    ok = ok && reinfer(g, order, cnt, true, touched, &guessed) &&
         ((inplace && g->index) || ts_graph_index_names(g, true));
    /* rounds until a fixed point: the first folds every sized constant at
     * the shapes re-inferred with guesses (one import for the position row
     * and every layer's mask, where a mask read layer i's keys only once
     * layer i - 1's mask was in: 6 imports for 6 layers); the next finds
     * each again at the shapes inferred with the new constants (the memo's
     * fold, the same tensor) and ends.  A wrong guess folds again there. */
    for (int round = 0; ok; round++) {
        ok = round <= nw + 1 &&
             !ts_onnx_kept_sized_consts(s->kept, s->base_dir, "model", binds, s->nin, g, names, nw, got, later, &e);
        bool changed = false;
        for (int k = 0; ok && k < nw; k++) {
            ts_value *v = &g->values[which[k]];
            if (!names[k]) continue; /* not computed from a size: checked */
            ok = !later[k]; /* shapes are guessed, never unknown */
            if (!got[k]) {
                /* compared once per graph: a kept order means this graph's
                 * previous derive in place succeeded, which compared this
                 * constant, and nothing but derive's sized constants
                 * replaces a constant here (a memcmp each token was 8 % of
                 * derive, the decoder's rewritten constants, perf) */
                ok = ok && (kept_order || same_contents(g1->values[which[k]].constant, v->constant));
                names[k] = NULL;
            } else if (got[k] == v->constant) /* the memo's: folded at these shapes */
                ts_tensor_unref(got[k]);
            else {
                ok = ok && got[k]->dtype == v->dtype;
                ts_tensor_unref(v->constant);
                v->constant = got[k];
                v->shape = got[k]->shape;
                if (touched) touched[which[k]] = true;
                changed = true;
            }
            got[k] = NULL;
        }
        if (!changed) break;
        s->derive_passes += ok;
        ok = ok && reinfer(g, order, cnt, true, touched, &guessed);
    }
    if (g && !inplace) ts_graph_index_names(g, false);
    /* The strict pass checks the guesses; when the last pass (after the
     * last constant changed) kept no node's old shapes, every node it
     * reached was inferred from its final inputs and the others read no
     * changed value, so a strict pass would infer the same shapes again
     * (inference is a function of the inputs' types, shapes and constants):
     * skipped (it was a third of derive's re-inference, a decoder token). */
    if (guessed) {
        for (int v = 0; ok && v < nv; v++) first[v] = g->values[v].shape;
        s->derive_passes += ok;
        int strict = 0;
        ok = ok && reinfer(g, order, cnt, false, touched, &strict);
        for (int v = 0; ok && v < nv; v++) ok = first[v].rank < 0 || ts_shape_eq(&first[v], &g->values[v].shape);
    }
    for (int k = 0; got && k < nw; k++) ts_tensor_unref(got[k]);
    free(names);
    free(which);
    if (order != c->order) free(order);
    free(got);
    free(first);
    free(later);
    free(touched);
    if (ok) return g;
    if (!inplace) ts_graph_free(g);
    return NULL;
}

/* Same nodes, values, shapes and constants' contents. */
static bool same_graph(const ts_graph *a, const ts_graph *b)
{
    if (a->nnodes != b->nnodes || a->nvalues != b->nvalues) return false;
    for (int v = 0; v < a->nvalues; v++) {
        const ts_value *x = &a->values[v], *y = &b->values[v];
        if (x->dtype != y->dtype || x->producer != y->producer || !ts_shape_eq(&x->shape, &y->shape) ||
            !x->constant != !y->constant || (x->constant && !same_contents(x->constant, y->constant)))
            return false;
    }
    for (int n = 0; n < a->nnodes; n++) {
        const ts_node *x = &a->nodes[n], *y = &b->nodes[n];
        if (x->op != y->op || x->dead != y->dead || x->ninputs != y->ninputs || x->noutputs != y->noutputs ||
            memcmp(x->inputs, y->inputs, sizeof(int) * (size_t)x->ninputs) ||
            memcmp(x->outputs, y->outputs, sizeof(int) * (size_t)x->noutputs))
            return false;
    }
    return true;
}

/* derive(), checked the first time against the model loaded and rewritten
 * at the same sizes, whose graph is then used (and derive turned off for
 * the session if the two differ); NULL when it declines or that load
 * fails (the caller loads and reports). */
static ts_graph *derived(ts_session *s, entry *c, ts_tensor *const *inputs, const ts_input_bind *binds)
{
    const char *env = getenv("TSOPT_SKIP"); /* TSOPT_SKIP=session.derive: load every re-bind's graph (A/B) */
    if (!c->built || s->derive_off || !s->kept || (env && strstr(env, "session.derive")) ||
        (s->popts.skip && strstr(s->popts.skip, "session.derive")))
        return NULL;
    /* in place once checked, and when the bound graph is the entry's own */
    const bool inplace = s->derive_checked && c->g != c->built && c->g != s->graph && !(env && strstr(env, "derive.copy"));
    ts_graph *d = derive(s, c, inputs, binds, inplace), *full = NULL;
    if (inplace && !d) /* c->g changed under its plan: c goes */
        entry_clear(s, c);
    if (!d || s->derive_checked) {
        s->graph_derives += d != NULL;
        s->graph_derives_inplace += d && inplace;
        return d;
    }
    ts_error e = {0};
    if (ts_onnx_kept_load(s->kept, s->base_dir, "model", binds, s->nin, &full, &e) || rewrite(s, full, &e)) {
        ts_graph_free(full);
        full = NULL;
    } else {
        s->derive_checked = true;
        s->derive_off = !same_graph(d, full);
    }
    ts_graph_free(d);
    return full;
}

/* c's plan re-bound to g (loaded or derived at the inputs' sizes and
 * rewritten), which c takes; NULL when it cannot follow (g is then the
 * caller's).  An entry whose re-bind failed otherwise is cleared (its plan
 * is unusable). */
static entry *rebind(ts_session *s, entry *c, ts_graph *g)
{
    if (!c) return NULL;
    ts_error e = {0};
    int64_t low0, res0, low1, res1;
    ts_plan_rebind_stats(c->p, &low0, &res0);
    ts_status st = ts_plan_rebind(c->p, g, &e);
    ts_plan_rebind_stats(c->p, &low1, &res1);
    s->rebind_lowered += low1 - low0;
    s->rebind_resized += res1 - res0;
    if (st) {
        /* g derived in place is c->g, changed under c's plan: c goes */
        if (g == c->g) c->g = NULL; /* g stays the caller's: a plan is built for it */
        if (st != TS_ERR_UNSUPPORTED || !c->g) entry_clear(s, c);
        return NULL;
    }
    s->retired[s->nretired++ % 8] = signature_hash(s, c->shapes);
    if (c->built) {
        if (g != c->g) ts_graph_free(c->g); /* the previous re-bind's (not derived in place) */
    } else
        c->built = c->g;
    if (g != c->g) { /* another graph: its order is computed again */
        free(c->order);
        c->order = NULL;
        c->norder = 0;
    }
    c->g = g;
    s->plan_rebinds++;
    return c;
}

/* e's plan, read shared weights unpacked, built again with them packed:
 * its sizes ran a second time (a prompt's plan packing its 90 MB of weights
 * was ~95 % of the build, for a plan that may run once).  Left as it is if
 * that build fails. */
static void repack(ts_session *s, entry *e)
{
    const char *old = s->popts.skip ? s->popts.skip : "";
    size_t n = strlen(old) + sizeof ",matmul.plain_shared";
    char *skip = malloc(n);
    ts_plan *p = NULL;
    ts_error err = {0};
    e->plain = false;
    if (!skip) return;
    snprintf(skip, n, "%s,matmul.plain_shared", old);
    ts_plan_opts o = s->popts;
    o.skip = skip;
    o.release_packed_weights = false; /* kept graphs share their weights: nothing to release */
    if (!ts_plan_build(e->g, &o, &p, &err)) {
        ts_plan_free(e->p);
        e->p = p;
        ts_graph_free(e->built); /* p was built from e->g */
        e->built = NULL;
        s->plan_builds++;
    }
    free(skip);
}

/* The graph and plan for the inputs' shapes: cached, re-bound, or made
 * now in the least recently used slot. */
static entry *plan_for(ts_session *s, ts_tensor *const *inputs, ts_error *err)
{
    entry *e = NULL, *lru = NULL;
    for (int k = 0; k < SESSION_PLANS; k++) {
        entry *c = &s->cache[k];
        if (c->shapes && same_signature(s, c, inputs)) e = c;
        if (c->pinned) continue;
        if (!lru || !c->shapes || (lru->shapes && c->used < lru->used)) lru = c;
    }
    if (e && e->plain) repack(s, e);
    if (e) return e;
    int n = s->nin;
    ts_input_bind *binds = calloc((size_t)n + 1, sizeof *binds);
    ts_shape *shapes = calloc((size_t)n + 1, sizeof *shapes);
    if (!binds || !shapes) {
        free(binds);
        free(shapes);
        ts_error_set(err, TS_ERR_NOMEM, "out of memory planning model '%s'", s->path);
        return NULL;
    }
    bool defaults = true;
    for (int i = 0; i < n; i++) {
        shapes[i] = inputs[i]->shape;
        binds[i] = (ts_input_bind){s->ins[i].name, inputs[i]->shape};
        defaults &= ts_shape_eq(&inputs[i]->shape, &s->ins[i].shape);
    }
    ts_status st = TS_OK;
    ts_graph *g = NULL; /* loaded from kept at the new sizes */
    if (!s->mp && !(defaults && s->graph) && s->fd >= 0) {
        if (!s->pack) pthread_once(&heap_once, keep_heap_blocks); /* the session's first load at new sizes */
        entry *c = retired(s, shapes) ? NULL : rebind_candidate(s, inputs);
        if (!s->pack && !(s->popts.pack_cache = s->pack = ts_pack_cache_new()))
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        else if (!(c && (g = derived(s, c, inputs, binds))) &&
                 ((!s->kept && (st = ts_onnx_kept_open(&(ts_onnx_src){.fd = s->fd, .size = s->size}, s->base_dir,
                                                       "model", &s->kept, err))) ||
                  (st = ts_onnx_kept_load(s->kept, s->base_dir, "model", binds, n, &g, err)) || (st = rewrite(s, g, err))))
            ts_error_prefix(err, "model '%s' at the inputs' sizes", s->path);
        if (c && !c->p) /* derived in place and declined: c was dropped */
            c = NULL;
        if (!st && (e = rebind(s, c, g))) {
            memcpy(e->shapes, shapes, sizeof *shapes * (size_t)n);
            free(binds);
            free(shapes);
            return e;
        }
    }
    e = lru;
    entry_clear(s, e);
    e->shapes = shapes;
    e->g = g;
    if (!st && !g) {
        if (s->mp) {
            if (!(st = load_by_value(s, e, inputs, err))) st = rewrite(s, e->g, err);
        } else if (defaults && s->graph)
            e->g = s->graph;
        else /* no symbolic dimension: check_inputs let only the declared shapes through */
            st = ts_error_set(err, TS_ERR_INVALID, "run: model '%s' has no symbolic dimension to bind", s->path);
    }
    free(binds);
    /* the default sizes' plan empties the session graph's packed weights:
     * planning it again (after a failed build) would read freed memory */
    if (!st && e->g == s->graph && s->graph_spent)
        st = ts_error_set(err, TS_ERR_INVALID, "model '%s': an earlier plan build failed after releasing its weights; "
                          "open the session again", s->path);
    if (!st && e->g == s->graph && s->popts.release_packed_weights) s->graph_spent = e->pinned = true;
    /* the default sizes planned before any other: kept is dropped, so that
     * the rewrites and the plan hold the weights alone (folded in place,
     * released once packed, as a session that never made kept); a later
     * run at other sizes opens it again */
    if (!st && e->g == s->graph && s->kept && !s->pack) {
        ts_onnx_kept_free(s->kept);
        s->kept = NULL;
    }
    if (!st && e->g == s->graph && s->graph_raw && !(st = rewrite(s, s->graph, err))) s->graph_raw = false;
    if (!st) s->plan_builds++;
    /* a graph loaded at new sizes may read the weights it shares with kept
     * unpacked (dnnl_matmul.c): planned again if these sizes run again, so
     * its own constants stay (they are small: the weights are shared) */
    ts_plan_opts o = s->popts;
    int64_t plain = s->pack ? ts_pack_cache_get_stats(s->pack).plain : 0;
    if (s->pack && e->g != s->graph) o.release_packed_weights = false;
    if (!st && (st = ts_plan_build(e->g, &o, &e->p, err))) ts_error_prefix(err, "model '%s'", s->path);
    e->plain = !st && s->pack && e->g != s->graph && ts_pack_cache_get_stats(s->pack).plain > plain;
    if (st) {
        entry_clear(s, e);
        return NULL;
    }
    return e;
}

/* A run's output with its data left uninitialized: the plan writes every
 * element (an output is a buffer its producing step fills, as every value
 * in the arena); a decoder's presents and logits were zero-filled at each
 * token first (13 outputs, 1.6 MB at past 64). */
static ts_tensor *output_new(ts_dtype dtype, const ts_shape *shape, ts_error *err)
{
    ts_tensor *t = ts_tensor_new(dtype, &(ts_shape){.rank = 0}, err); /* checks dtype; one element */
    const size_t nbytes = t ? (size_t)ts_shape_numel(shape) * ts_dtype_size(dtype) : 0;
    void *d = t ? malloc(nbytes ? nbytes : 1) : NULL;
    if (t && !d) ts_error_set(err, TS_ERR_NOMEM, "out of memory for a %zu-byte output", nbytes);
    if (!d) {
        ts_tensor_unref(t);
        return NULL;
    }
    free(t->data);
    t->data = d;
    t->shape = *shape;
    t->nbytes = nbytes;
    return t;
}

ts_status ts_session_run(ts_session *s, ts_tensor *const *inputs, ts_tensor **outputs, ts_error *err)
{
    int nout = s->nout;
    for (int o = 0; o < nout; o++) outputs[o] = NULL;
    ts_status st = check_inputs(s, inputs, err);
    if (st) return st;
    pthread_mutex_lock(&s->lock);
    entry *e = plan_for(s, inputs, err);
    if (!e) st = err->code ? err->code : TS_ERR_INVALID;
    for (int o = 0; !st && o < nout; o++) {
        const ts_value *v = &e->g->values[e->g->outputs[o]];
        if (!(outputs[o] = output_new(v->dtype, &v->shape, err))) st = err->code;
    }
    ts_tensor **gin = NULL; /* by value: the graph's inputs, in its order */
    if (!st && e->slot && !(gin = calloc((size_t)e->g->ninputs + 1, sizeof *gin)))
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory running model '%s'", s->path);
    for (int k = 0; gin && k < e->g->ninputs; k++) gin[k] = inputs[e->slot[k]];
    if (!st) {
        e->used = ++s->clock;
        st = ts_plan_run(e->p, gin ? gin : inputs, outputs, err);
    }
    free(gin);
    pthread_mutex_unlock(&s->lock);
    if (st)
        for (int o = 0; o < nout; o++) {
            ts_tensor_unref(outputs[o]);
            outputs[o] = NULL;
        }
    return st;
}
