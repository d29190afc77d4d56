/* Op-cost model: the on-disk cache, which time a group costs (in-plan,
 * in-context, isolated, roofline), the isolated measurement, the roofline
 * fallback and the machine's peak (see cost.h for groups).
 *
 * Cache file (TSV, one measurement a line):  KEY \t MEDIAN_MS \t COUNT
 * with a header line "# cpu\t<id>".  A file whose cpu differs from this
 * machine's is ignored (its timings describe another machine) and
 * overwritten on save.  Peaks are stored as keys "!peak_gflops" and
 * "!peak_gbps".  "@plan KEY" is a group's time inside a whole model's plan
 * (cost_plan.c: ts_cost_prime, `tsopt profile`), "@ctx KEY" inside a plan
 * of its neighbourhood (cost_ctx.c: the optimizer's new groups), a bare
 * KEY its isolated measurement: the group as a graph of its own, with the
 * runtime's default options and plain-layout inputs and outputs at its
 * boundary (a fallback, and `tsopt profile`'s comparison: it misses the
 * caches, layouts and merges of the model, docs/runtime.md). */
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "cost/cost.h"
#include "measure/rounds.h"
#include "exec/roofline.h"
#include "measure/step_timer.h"
#include "util/cpu_id.h"
#include "measure/wait_policy.h"
#include "ops/list.h"
#include "util/clock.h"
#include "util/hash.h"
#include "util/union_find.h"

typedef struct centry {
    char *key; /* NULL: empty slot */
    double ms;
    int count;
} centry;

struct ts_costdb {
    char *path;
    char cpu[256];
    centry *tab;
    size_t cap, n;
    int measured;
    char *evict;         /* buffer read before each in-context run (cost_ctx.c) */
    size_t evict_bytes;  /* its size (allocated lazily, up to the cap) */
    volatile long evict_sink; /* keeps the reads */
    int nplan;                /* "@plan" entries: 0 until a graph was primed */
    double deadline;          /* ts_clock_s() after which nothing is timed (0: none) */
    int late;                 /* groups costed on the roofline because of it */
};

static centry *lookup(const ts_costdb *db, const char *key)
{
    if (!db->cap) return NULL;
    for (size_t i = ts_hash_str(TS_HASH_SEED, key) & (db->cap - 1);; i = (i + 1) & (db->cap - 1)) {
        if (!db->tab[i].key) return &db->tab[i];
        if (!strcmp(db->tab[i].key, key)) return &db->tab[i];
    }
}

static bool grow(ts_costdb *db)
{
    size_t cap = db->cap ? db->cap * 2 : 256;
    centry *nt = calloc(cap, sizeof *nt), *old = db->tab;
    if (!nt) return false;
    size_t ocap = db->cap;
    db->tab = nt;
    db->cap = cap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].key) *lookup(db, old[i].key) = old[i];
    free(old);
    return true;
}

/* Inserts or replaces; takes no ownership of key. */
static bool put(ts_costdb *db, const char *key, double ms, int count)
{
    if ((db->n + 1) * 2 > db->cap && !grow(db)) return false;
    centry *e = lookup(db, key);
    if (!e->key) {
        if (!(e->key = strdup(key))) return false;
        db->n++;
        db->nplan += !strncmp(key, XCOST_PLAN_PREFIX, sizeof XCOST_PLAN_PREFIX - 1);
    }
    e->ms = ms;
    e->count = count;
    return true;
}

void xcost_cpu_id(char *buf, size_t n)
{
    char model[240];
    ts_cpu_model(model, sizeof model);
    /* the tag after ';' names what a cached time means: bump it when that
     * changes, so that old caches are ignored (m2: isolated times count
     * only the group's own steps; m3: keys name merge partners, so an old
     * key without them may hold an alias's 0).  The OpenMP wait policy is part of it:
     * a step's time includes waking the pool's threads when they sleep
     * (docs/runtime.md), so costs taken under one policy do not predict
     * runs under the other. */
    snprintf(buf, n, "%s; m3; wait %s", model, ts_wait_policy_name());
}

const char *xcost_db_path(const ts_costdb *db) { return db->path; }
int xcost_db_measured(const ts_costdb *db) { return db->measured; }

double xcost_db_set_deadline(ts_costdb *db, double end_s)
{
    double old = db->deadline;
    db->deadline = end_s;
    return old;
}

int xcost_db_late(const ts_costdb *db) { return db->late; }

bool xcost_db_past_deadline(const ts_costdb *db) { return db->deadline > 0 && ts_clock_s() > db->deadline; }
int xcost_db_size(const ts_costdb *db) { return (int)db->n; }

static ts_status mkdir_p(char *dir, ts_error *err)
{
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int r = mkdir(dir, 0755);
        *p = '/';
        if (r && errno != EEXIST) return ts_error_set(err, TS_ERR_IO, "cannot create '%s': %s", dir, strerror(errno));
    }
    if (mkdir(dir, 0755) && errno != EEXIST)
        return ts_error_set(err, TS_ERR_IO, "cannot create '%s': %s", dir, strerror(errno));
    return TS_OK;
}

static ts_status default_path(const char *cpu, char **out, ts_error *err)
{
    const char *dir = getenv("TSOPT_CACHE_DIR"), *home = getenv("HOME");
    char base[4096], name[300];
    if (dir && *dir)
        snprintf(base, sizeof base, "%s", dir);
    else
        snprintf(base, sizeof base, "%s/.cache/tsopt", home && *home ? home : "/tmp");
    size_t k = 0;
    for (const char *c = cpu; *c && k + 1 < sizeof name; c++) /* a file name made of the cpu id */
        name[k++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ? *c : '_';
    name[k] = 0;
    ts_status st = mkdir_p(base, err);
    if (st) return st;
    size_t len = strlen(base) + strlen(name) + 32;
    if (!(*out = malloc(len))) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    snprintf(*out, len, "%s/costs-%s.tsv", base, name);
    return TS_OK;
}

ts_status ts_costdb_open(const char *path, ts_costdb **out, ts_error *err)
{
    *out = NULL;
    ts_costdb *db = calloc(1, sizeof *db);
    if (!db) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    xcost_cpu_id(db->cpu, sizeof db->cpu);
    ts_status st = TS_OK;
    if (path)
        db->path = strdup(path), st = db->path ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    else
        st = default_path(db->cpu, &db->path, err);
    if (st || !grow(db)) {
        ts_costdb_free(db);
        return st ? st : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    FILE *f = fopen(db->path, "r");
    if (!f) {
        if (errno == ENOENT) { /* a new cache */
            *out = db;
            return TS_OK;
        }
        st = ts_error_set(err, TS_ERR_IO, "cost cache '%s': %s", db->path, strerror(errno));
        ts_costdb_free(db);
        return st;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0;
    bool same_cpu = true;
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!strncmp(line, "# cpu\t", 6)) {
            same_cpu = !strcmp(line + 6, db->cpu);
            continue;
        }
        if (!len || line[0] == '#' || !same_cpu) continue;
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL, *end;
        if (!t2) {
            st = ts_error_set(err, TS_ERR_PARSE, "cost cache '%s' line %d: want KEY<tab>MS<tab>COUNT", db->path, lineno);
            break;
        }
        *t1 = 0;
        double ms = strtod(t1 + 1, &end);
        long count = strtol(t2 + 1, NULL, 10);
        if (end != t2 || !(ms >= 0)) {
            st = ts_error_set(err, TS_ERR_PARSE, "cost cache '%s' line %d: bad time", db->path, lineno);
            break;
        }
        if (!put(db, line, ms, (int)count)) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            break;
        }
    }
    free(line);
    fclose(f);
    if (st) {
        ts_costdb_free(db);
        return st;
    }
    *out = db;
    return TS_OK;
}

static int cmp_key(const void *a, const void *b)
{
    const centry *x = a, *y = b;
    return strcmp(x->key, y->key);
}

ts_status ts_costdb_save(ts_costdb *db, ts_error *err)
{
    /* sorted, so that the file is stable and diffable */
    centry *all = malloc(sizeof *all * (db->n + 1));
    if (!all) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < db->cap; i++)
        if (db->tab[i].key) all[k++] = db->tab[i];
    qsort(all, k, sizeof *all, cmp_key);
    size_t plen = strlen(db->path) + 16;
    char *tmp = malloc(plen);
    FILE *f = tmp ? (snprintf(tmp, plen, "%s.tmp", db->path), fopen(tmp, "w")) : NULL;
    ts_status st = TS_OK;
    if (!f) {
        st = tmp ? ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno))
                 : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    } else {
        fprintf(f, "# tsopt op-cost cache v1: KEY<tab>MEDIAN_MS<tab>COUNT\n# cpu\t%s\n", db->cpu);
        for (size_t i = 0; i < k; i++) fprintf(f, "%s\t%.17g\t%d\n", all[i].key, all[i].ms, all[i].count);
        if (fclose(f) || rename(tmp, db->path)) {
            st = ts_error_set(err, TS_ERR_IO, "cannot write '%s': %s", db->path, strerror(errno));
            remove(tmp);
        }
    }
    free(tmp);
    free(all);
    return st;
}

void ts_costdb_free(ts_costdb *db)
{
    if (!db) return;
    for (size_t i = 0; i < db->cap; i++) free(db->tab[i].key);
    free(db->tab);
    free(db->path);
    free(db->evict);
    free(db);
}

/* ---------------------------------------------------------- measuring */

/* Seeded random inputs and output tensors for timing g (in/out: arrays of
 * g's input/output count, zeroed; filled even on error, for the caller to
 * free).  Integer inputs stay 0: always a valid index, whatever the table
 * size. */
ts_status xcost_io_new(const ts_graph *g, ts_tensor **in, ts_tensor **out, ts_error *err)
{
    uint64_t rng = 0xc057;
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        if (!(in[i] = ts_tensor_new(v->dtype, &v->shape, err))) return err->code;
        if (ts_dtype_is_float(v->dtype) || v->dtype == TS_BOOL)
            ts_tensor_fill_random(in[i], &rng, v->dtype == TS_BOOL ? 0 : -1, 1);
    }
    for (int i = 0; i < g->noutputs; i++) {
        const ts_value *v = &g->values[g->outputs[i]];
        if (!(out[i] = ts_tensor_new(v->dtype, &v->shape, err))) return err->code;
    }
    return TS_OK;
}

/* Median (and fastest) of up to iters timed runs of g after warmup runs,
 * at least 3, stopping once budget_ms is spent.  lo < 0 times whole runs;
 * else a run's time is the sum of its steps named after nodes lo..hi-1,
 * leaving out conversions at the graph's boundary (step_timer.h). */
static ts_status time_graph(const ts_graph *g, int warmup, int iters, double budget_ms, int lo, int hi, double *ms,
                            double *min_ms, ts_error *err)
{
    int nin = g->ninputs, nout = g->noutputs;
    ts_tensor **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out);
    double *t = calloc((size_t)iters + 1, sizeof *t), *steps = NULL;
    ts_plan *plan = NULL;
    ts_plan_opts o = {0};
    ts_status st = TS_OK;
    if (!in || !out || !t) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!st) st = xcost_io_new(g, in, out, err);
    if (st || (st = ts_plan_build(g, &o, &plan, err))) goto done;
    int ns = xplan_step_count(plan);
    if (lo >= 0) {
        if (!(steps = calloc((size_t)ns + 1, sizeof *steps))) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            goto done;
        }
        xplan_step_timer(plan, steps);
    }
    for (int i = 0; i < warmup && !st; i++) st = ts_plan_run(plan, in, out, err);
    int n = 0;
    double start = ts_clock_ms();
    while (!st && n < iters) {
        double s = ts_clock_ms();
        if ((st = ts_plan_run(plan, in, out, err))) break;
        t[n] = ts_clock_ms() - s;
        if (lo >= 0) {
            t[n] = 0;
            for (int i = 0; i < ns; i++) {
                int nd = xplan_step_node(plan, i);
                if (nd >= lo && nd < hi && !xplan_step_is_boundary(plan, i)) t[n] += steps[i];
            }
        }
        n++;
        if (n >= 3 && ts_clock_ms() - start > budget_ms) break;
    }
    if (!st) {
        *ms = ts_median(t, n); /* sorts t */
        if (min_ms) *min_ms = t[0];
    }
done:
    for (int i = 0; i < nin; i++)
        if (in) ts_tensor_unref(in[i]);
    for (int i = 0; i < nout; i++)
        if (out) ts_tensor_unref(out[i]);
    free(in);
    free(out);
    free(t);
    free(steps);
    ts_plan_free(plan);
    return st;
}

ts_status xcost_time_graph_min(const ts_graph *g, int warmup, int iters, double budget_ms, double *ms, double *min_ms,
                               ts_error *err)
{
    return time_graph(g, warmup, iters, budget_ms, -1, 0, ms, min_ms, err);
}

ts_status xcost_time_graph(const ts_graph *g, int warmup, int iters, double budget_ms, double *ms, ts_error *err)
{
    return time_graph(g, warmup, iters, budget_ms, -1, 0, ms, NULL, err);
}

static bool is_conv(const ts_node *nd)
{
    return nd->op == &ts_op_conv || nd->op == &ts_op_conv_transpose;
}

/* The group as a graph of its own: constants stay constants (weights are
 * pre-packed, Reshape-like ops read them), other external inputs become
 * graph inputs, the last member's outputs are the graph outputs. */
ts_graph *xcost_group_graph(const ts_graph *g, const int *members, int nm, ts_error *err)
{
    ts_graph *s = ts_graph_new("cost", g->opset);
    int *map = s ? malloc(sizeof *map * ((size_t)g->nvalues + 1)) : NULL;
    if (!map) {
        ts_graph_free(s);
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int v = 0; v < g->nvalues; v++) map[v] = -1;
    ts_status st = TS_OK;
    for (int m = 0; m < nm && !st; m++) {
        const ts_node *nd = &g->nodes[members[m]];
        int ins[64], outs[64];
        if (nd->ninputs > 64 || nd->noutputs > 64) {
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s': too many inputs to measure", nd->name);
            break;
        }
        for (int j = 0; j < nd->ninputs && !st; j++) {
            int v = nd->inputs[j];
            ins[j] = -1;
            if (v < 0) continue;
            if (map[v] < 0) {
                const ts_value *val = &g->values[v];
                map[v] = val->constant ? ts_graph_add_constant(s, val->name, val->constant, err)
                                       : ts_graph_add_input(s, val->name, val->dtype, &val->shape, err);
                if (map[v] < 0) st = err->code;
            }
            ins[j] = map[v];
        }
        if (st) break;
        ts_attr at[64];
        int na = nd->op->emit ? nd->op->emit(nd->attrs, at, 64) : 0;
        const char *names[64];
        for (int o = 0; o < nd->noutputs; o++) names[o] = g->values[nd->outputs[o]].name;
        if (ts_graph_add_node(s, nd->op->name, nd->name, ins, nd->ninputs, at, na, nd->noutputs, names, outs, err) < 0) {
            st = err->code;
            break;
        }
        for (int o = 0; o < nd->noutputs; o++) map[nd->outputs[o]] = outs[o];
        if (m < nm - 1) continue;
        /* A convolution whose result is a graph output must write plain
         * NCHW, for which oneDNN may pick a slow kernel; inside a model its
         * result stays blocked unless it is the model's output.  An Identity
         * after it lets the group choose its blocked layout as in the model
         * (the measurement then includes one reorder back to plain). */
        if (nd->noutputs == 1 && !ts_graph_is_output(g, nd->outputs[0]) && is_conv(&g->nodes[members[0]])) {
            int id;
            if (ts_graph_add_node(s, "Identity", "cost_sink", outs, 1, NULL, 0, 1, NULL, &id, err) < 0) {
                st = err->code;
                break;
            }
            outs[0] = id;
        }
        for (int o = 0; o < nd->noutputs && !st; o++) st = ts_graph_add_output(s, outs[o], err);
    }
    free(map);
    if (st) {
        ts_graph_free(s);
        return NULL;
    }
    return s;
}

/* The group members[np..nm-1] as a graph of its own, after its layout
 * producer members[0..np-1]; only the group's own steps are timed (not the
 * producer, not the conversions at the cut-out graph's boundary, which the
 * model does not run).  The nodes of the cut-out graph are the members in
 * order, so the group's steps are those named after nodes np..nm-1. */
static ts_status measure_group(const ts_graph *g, const int *members, int np, int nm, double *ms, ts_error *err)
{
    ts_graph *s = xcost_group_graph(g, members, nm, err);
    if (!s) return err->code;
    /* median of up to 10 runs after 2 warm-ups, at most ~50 ms of runs */
    ts_status st = time_graph(s, 2, 10, 50, np, nm, ms, NULL, err);
    ts_graph_free(s);
    return st;
}

/* ---------------------------------------------------------------- peak */

/* GFLOP/s of the fastest of 15 runs of a one-node graph: op on input x
 * (dims xd) and constant weight w (dims wd). */
static ts_status peak_of_types(const char *op, ts_dtype xt, int xr, const int64_t *xd, ts_dtype wt, int wr,
                               const int64_t *wd, const ts_attr *at, int na, double flops, double *gflops, ts_error *err)
{
    ts_shape xs = ts_shape_make(xr, xd), ws = ts_shape_make(wr, wd);
    ts_graph *g = ts_graph_new("peak", 17);
    ts_tensor *b = g ? ts_tensor_new(wt, &ws, err) : NULL;
    ts_status st = TS_OK;
    if (!g || !b) {
        st = g ? err->code : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto out;
    }
    uint64_t rng = 0x9e37;
    ts_tensor_fill_random(b, &rng, ts_dtype_is_float(wt) ? -1 : -127, ts_dtype_is_float(wt) ? 1 : 127);
    int a = ts_graph_add_input(g, "a", xt, &xs, err), w = a >= 0 ? ts_graph_add_constant(g, "b", b, err) : -1, y;
    if (w < 0 || ts_graph_add_node(g, op, "peak", (int[]){a, w}, 2, at, na, 1, NULL, &y, err) < 0 ||
        ts_graph_add_output(g, y, err)) {
        st = err->code;
        goto out;
    }
    /* the fastest of 15 runs: the peak is what the machine can do when
     * nothing else gets in the way (a shared machine's median is not) */
    double best = 1e30, med;
    st = xcost_time_graph_min(g, 2, 15, 1e9, &med, &best, err);
    if (!st) *gflops = flops / (best * 1e6);
out:
    ts_tensor_unref(b);
    ts_graph_free(g);
    return st;
}

static ts_status peak_of(const char *op, int xr, const int64_t *xd, int wr, const int64_t *wd, const ts_attr *at,
                         int na, double flops, double *gflops, ts_error *err)
{
    return peak_of_types(op, TS_F32, xr, xd, TS_F32, wr, wd, at, na, flops, gflops, err);
}

/* The best of a few large, well-shaped problems: a 1024^3 matmul alone
 * fell below what some models reach (resnet3d18's convolutions ran at 107%
 * of it): a larger matmul amortizes its packing, and a convolution with
 * many channels is what the models' heaviest steps are. */
static ts_status measure_peak_flops(double *gflops, double parts[XCOST_PEAK_PARTS], ts_error *err)
{
    double best = 0, r = 0;
    ts_status st;
    for (int64_t n = 1024, k = 0; n <= 2048; n *= 2, k++) {
        if ((st = peak_of("MatMul", 2, (int64_t[]){n, n}, 2, (int64_t[]){n, n}, NULL, 0, 2.0 * (double)n * n * n, &r,
                          err)))
            return st;
        best = r > best ? r : best;
        if (parts) parts[k] = r;
    }
    /* 3x3 convolution, 256 -> 256 channels on 56x56, padding 1 */
    const int64_t pads[4] = {1, 1, 1, 1};
    ts_attr at[1] = {ts_attr_ints("pads", pads, 4)};
    if ((st = peak_of("Conv", 4, (int64_t[]){1, 256, 56, 56}, 4, (int64_t[]){256, 256, 3, 3}, at, 1,
                      2.0 * 256 * 256 * 9 * 56 * 56, &r, err)))
        return st;
    if (parts) parts[2] = r;
    *gflops = r > best ? r : best;
    return TS_OK;
}

/* STREAM's copy and triad (roofline.c); the bandwidth is the better of
 * the two (parts[3], parts[4]). */
static ts_status measure_peak_bw(double *gbps, double parts[XCOST_PEAK_PARTS], ts_error *err)
{
    double copy = 0, triad = 0;
    ts_status st = xroof_measure_bw(&copy, &triad, err);
    if (st) return st;
    if (parts) parts[3] = copy, parts[4] = triad;
    *gbps = copy > triad ? copy : triad;
    return TS_OK;
}

ts_status xcost_peak(ts_costdb *db, double *gflops, double *gbps, ts_error *err)
{
    centry *f = lookup(db, "!peak_gflops"), *b = lookup(db, "!peak_gbps");
    if (f->key && b->key) {
        *gflops = f->ms;
        *gbps = b->ms;
        return TS_OK;
    }
    return xcost_peak_measure(db, NULL, gflops, gbps, err);
}

ts_status xcost_peak_measure(ts_costdb *db, double parts[XCOST_PEAK_PARTS], double *gflops, double *gbps,
                             ts_error *err)
{
    ts_status st;
    if ((st = measure_peak_flops(gflops, parts, err)) || (st = measure_peak_bw(gbps, parts, err))) return st;
    /* a peak is a maximum: a measurement disturbed by other work never
     * lowers one taken earlier */
    centry *f = lookup(db, "!peak_gflops"), *b = lookup(db, "!peak_gbps");
    if (f->key && f->ms > *gflops) *gflops = f->ms;
    if (b->key && b->ms > *gbps) *gbps = b->ms;
    if (!put(db, "!peak_gflops", *gflops, 1) || !put(db, "!peak_gbps", *gbps, 1))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    db->measured += 2;
    return TS_OK;
}

ts_status xcost_machine(ts_costdb *db, bool remeasure, xroof_machine *m, ts_error *err)
{
    static const char *const key[XROOF_DRAM] = {"!bw_l1_gbps", "!bw_l2_gbps", "!bw_l3_gbps"};
    memset(m, 0, sizeof *m);
    ts_status st = xcost_peak(db, &m->gflops, &m->gbps[XROOF_DRAM], err);
    if (st) return st;
    bool have = true;
    for (int l = 0; l < XROOF_DRAM; l++) have = have && lookup(db, key[l]) && lookup(db, key[l])->key;
    if (remeasure || !have) {
        double bw[XROOF_DRAM];
        if ((st = xroof_measure_cache_bw(bw, err))) return st;
        for (int l = 0; l < XROOF_DRAM; l++) {
            centry *e = lookup(db, key[l]); /* the larger, as the peak */
            if (e && e->key && e->ms > bw[l]) bw[l] = e->ms;
            if (!put(db, key[l], bw[l], 1)) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        }
        db->measured += XROOF_DRAM;
    }
    centry *f = lookup(db, "!fma_gflops");
    if (remeasure || !f || !f->key) {
        double fma = xroof_measure_fma();
        if (f && f->key && f->ms > fma) fma = f->ms;
        if (!put(db, "!fma_gflops", fma, 1)) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        db->measured++;
    }
    /* 8-bit products (a u8 x s8 MatMulInteger, the dnnl int8 kernel): VNNI
     * does four multiply-adds where an FMA does one, so against the float
     * peak an int8 step would read as faster than its limit */
    centry *q = lookup(db, "!int8_gops");
    if (remeasure || !q || !q->key) {
        double gops = 0;
        const int64_t n = 1024;
        if ((st = peak_of_types("MatMulInteger", TS_U8, 2, (int64_t[]){n, n}, TS_I8, 2, (int64_t[]){n, n}, NULL, 0,
                                2.0 * (double)n * n * n, &gops, err)))
            return st;
        if (q && q->key && q->ms > gops) gops = q->ms;
        if (!put(db, "!int8_gops", gops, 1)) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        db->measured++;
    }
    m->int8_gops = lookup(db, "!int8_gops")->ms;
    m->fma_gflops = lookup(db, "!fma_gflops")->ms;
    for (int l = 0; l < XROOF_DRAM; l++) m->gbps[l] = lookup(db, key[l])->ms;
    m->caches = xroof_caches_get();
    m->threads = omp_get_max_threads();
    return TS_OK;
}

/* ------------------------------------------------------------- costs */

static double roofline(ts_costdb *db, const ts_graph *g, const int *members, int nm)
{
    double gflops = 0, gbps = 0, flops, bytes;
    ts_error e = {0};
    xcost_group_work(g, members, nm, &flops, &bytes);
    /* past the deadline a peak missing from the cache (seconds to measure)
     * is not measured either: the estimate is 0, and counted late by the
     * caller (group_cost), whose caller drops such a cost */
    const centry *pf = lookup(db, "!peak_gflops");
    if (xcost_db_past_deadline(db) && !(pf && pf->key)) return 0;
    if (xcost_peak(db, &gflops, &gbps, &e) || gflops <= 0 || gbps <= 0) return 0;
    return xroof_limit_ms(bytes, flops, gbps, gflops);
}

/* oneDNN pooling reads a convolution's blocked output as it is; measured
 * alone it would get a plain input and pay for plain-layout pooling
 * (inception_v3's MaxPools: 9.5 ms alone, ~0.2 ms in the model). */
static bool is_pool(const ts_node *nd)
{
    const ts_op_desc *op = nd->op;
    return op == &ts_op_maxpool || op == &ts_op_avgpool || op == &ts_op_global_avgpool || op == &ts_op_global_maxpool;
}

/* The group producing a convolution's (or pooling's) data input when that
 * group is itself a convolution whose last value is that input: its blocked
 * output layout decides which oneDNN kernel the consumer gets (a plain
 * input lets oneDNN choose freely; the producer's layout may leave it only
 * a reference kernel, or spare it a reorder).  Returns its member count
 * (0: none). */
static int layout_producer(const ts_graph *g, const int *group_of, int head, int *pm)
{
    const ts_node *hd = &g->nodes[head];
    if (!(is_conv(hd) || is_pool(hd)) || hd->ninputs < 1 || hd->inputs[0] < 0) return 0;
    int x = hd->inputs[0], pn = g->values[x].producer;
    if (pn < 0 || group_of[pn] < 0) return 0;
    int ph = group_of[pn];
    if (ph == head || !is_conv(&g->nodes[ph])) return 0;
    int np = xcost_members(g, group_of, ph, pm);
    return g->nodes[pm[np - 1]].noutputs == 1 && g->nodes[pm[np - 1]].outputs[0] == x ? np : 0;
}

bool xcost_is_free(const ts_node *hd)
{
    const ts_op_desc *op = hd->op;
    return hd->noutputs == 1 && hd->ninputs >= 1 && hd->inputs[0] >= 0 &&
           (op == &ts_op_reshape || op == &ts_op_flatten || op == &ts_op_squeeze || op == &ts_op_unsqueeze ||
            op == &ts_op_identity || (op == &ts_op_dropout && (hd->ninputs < 3 || hd->inputs[2] < 0)));
}

/* True when node nd's first input is a graph input or a constant. */
static bool ready_first(const ts_graph *g, const ts_node *nd)
{
    return nd->ninputs >= 1 && nd->inputs[0] >= 0 && g->values[nd->inputs[0]].producer < 0;
}

/* How many nodes the runtime may merge the group's members with: other
 * live readers, with the same element-wise operator, of a member's input
 * (plan.c's CSE turns the later one into an alias), and other MatMuls by a
 * member's weights, both of the model's inputs (vec.gemv stacks them into
 * one step).  A group's time in a plan depends on them (0 for an alias, a
 * share of a stacked step), so they are part of its key: a rewrite that
 * merges a partner away makes a new key, timed in its new context,
 * instead of reusing a time that held only with the partner. */
static void merge_partners(const ts_graph *g, const int *m, int nm, int *dup, int *stack)
{
    *dup = *stack = 0;
    for (int i = 0; i < nm; i++) {
        const ts_node *nd = &g->nodes[m[i]];
        bool elt = (nd->op->flags & TS_OP_ELEMENTWISE) != 0, mm = nd->op == &ts_op_matmul;
        if (!elt && !mm) continue;
        for (int j = 0; j < nd->ninputs; j++) {
            int v = nd->inputs[j];
            if (v < 0) continue;
            const ts_value *val = &g->values[v];
            bool weight = val->constant && ts_shape_numel(&val->shape) >= 4096;
            if (!(elt && !val->constant) && !(mm && weight)) continue;
            /* MatMuls stack only when their inputs exist together, which
             * for two products of the model's inputs always holds (nasrnn's
             * x-side products) and otherwise rarely: products of computed
             * values (its h-side ones) are not counted */
            if (weight && !ready_first(g, nd)) continue;
            for (int c = 0; c < g->nnodes; c++) {
                const ts_node *o = &g->nodes[c];
                if (c == m[i] || o->dead || o->op != nd->op || (weight && !ready_first(g, o))) continue;
                bool reads = false;
                for (int q = 0; q < o->ninputs && !reads; q++) reads = o->inputs[q] == v;
                if (reads) ++*(weight ? stack : dup);
            }
        }
    }
}

/* Key of the group (members after the np producer members in m[]), with
 * the producer's key in front when there is one, and its merge partners
 * after it (" ~dupN", " ~stackN", when there are). */
static char *group_key(const ts_graph *g, const int *m, int np, int nm)
{
    char *key = xcost_key(g, m + np, nm), *pkey = np ? xcost_key(g, m, np) : NULL;
    if (!key || (np && !pkey)) {
        free(key);
        free(pkey);
        return NULL;
    }
    int dup, stack;
    merge_partners(g, m + np, nm, &dup, &stack);
    size_t len = strlen(key) + (np ? strlen(pkey) : 0) + 64;
    char *all = malloc(len);
    if (all) {
        int k = np ? snprintf(all, len, "%s => %s", pkey, key) : snprintf(all, len, "%s", key);
        if (dup) k += snprintf(all + k, len - (size_t)k, " ~dup%d", dup);
        if (stack) snprintf(all + k, len - (size_t)k, " ~stack%d", stack);
    }
    free(key);
    free(pkey);
    return all;
}

char *xcost_group_key(const ts_graph *g, const int *group_of, int head)
{
    int members[2 * XCOST_MAX_GROUP];
    int np = layout_producer(g, group_of, head, members);
    int nm = xcost_members(g, group_of, head, members + np);
    return group_key(g, members, np, nm);
}

/* The cache key of a group's in-plan (cost_plan.c) or in-context
 * (cost_ctx.c) time: prefix + group key. */
static char *prefixed(const char *prefix, const char *key)
{
    size_t len = strlen(key) + strlen(prefix) + 1;
    char *k = malloc(len);
    if (k) snprintf(k, len, "%s%s", prefix, key);
    return k;
}

static bool put_prefixed(ts_costdb *db, const char *prefix, const char *key, double ms, int count)
{
    char *k = prefixed(prefix, key);
    bool ok = k && put(db, k, ms, count);
    free(k);
    return ok;
}

bool xcost_db_put(ts_costdb *db, const char *key, double ms) { return put(db, key, ms, 1); }

bool xcost_db_get(const ts_costdb *db, const char *key, double *ms)
{
    const centry *e = lookup(db, key);
    if (!e || !e->key) return false;
    *ms = e->ms;
    return true;
}

bool xcost_put_plan(ts_costdb *db, const char *key, double ms, int count)
{
    return put_prefixed(db, XCOST_PLAN_PREFIX, key, ms, count);
}

bool xcost_put_ctx(ts_costdb *db, const char *key, double ms, int count)
{
    return put_prefixed(db, XCOST_CTX_PREFIX, key, ms, count);
}

/* The cached entry prefix + key, or NULL. */
static const centry *get_prefixed(const ts_costdb *db, const char *prefix, const char *key)
{
    char *k = prefixed(prefix, key);
    const centry *e = k ? lookup(db, k) : NULL;
    free(k);
    return e && e->key ? e : NULL;
}

void xcost_cached_times(ts_costdb *db, const ts_graph *g, const int *group_of, int head, double *plan_ms,
                        bool *has_plan, double *ctx_ms, bool *has_ctx)
{
    char *key = xcost_group_key(g, group_of, head);
    const centry *p = key ? get_prefixed(db, XCOST_PLAN_PREFIX, key) : NULL;
    const centry *c = key ? get_prefixed(db, XCOST_CTX_PREFIX, key) : NULL;
    if (has_plan) *has_plan = p != NULL;
    if (plan_ms) *plan_ms = p ? p->ms : 0;
    if (has_ctx) *has_ctx = c != NULL;
    if (ctx_ms) *ctx_ms = c ? c->ms : 0;
    free(key);
}

/* ------------------------------------------------------- eviction */

/* Beyond this, reading more changes what the caches hold no further on any
 * machine we run on (L2 2-4 MiB a core; the LLC a VM reports is not its
 * share), but costs ~1 ms per 20 MiB before every context run. */
#define EVICT_CAP ((size_t)32 << 20)

size_t xcost_evict_bytes(double rest)
{
    const char *env = getenv("TSOPT_CTX_EVICT_MB"); /* experiments: docs/runtime.md */
    size_t cap = EVICT_CAP;
    if (env && *env) cap = (size_t)(strtod(env, NULL) * (1 << 20));
    if (!(rest > 0)) return 0;
    return rest < (double)cap ? (size_t)rest : cap;
}

void xcost_evict(ts_costdb *db, size_t bytes)
{
    if (!bytes) return;
    if (bytes > db->evict_bytes) {
        char *b = realloc(db->evict, bytes);
        if (!b) return; /* a measurement with warmer caches, not an error */
        memset(b + db->evict_bytes, 1, bytes - db->evict_bytes); /* fault the pages in now */
        db->evict = b;
        db->evict_bytes = bytes;
    }
    const char *b = db->evict;
    long sum = 0, lines = (long)(bytes / 64);
    /* All threads read their share, in a parallel region like a step's:
     * the first step of the run then finds the threads as a step finds
     * them in the model, just finished the previous region. */
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (long i = 0; i < lines; i++) sum += b[i * 64];
    db->evict_sink += sum;
}

/* in_context: an in-plan time of the group, when cached, wins (it is what
 * the runtime spends on it in the model), then an in-context one, cached
 * or (measure) measured now; the isolated measurement is only a fallback
 * for a neighbourhood that cannot be run as a plan. */
static double group_cost(ts_costdb *db, const ts_graph *g, const int *group_of, int head, bool measure,
                         bool in_context, xcost_src *src)
{
    int members[2 * XCOST_MAX_GROUP];
    const ts_node *hd = &g->nodes[head];
    *src = XCOST_FREE;
    if (hd->dead || group_of[head] != head) return 0;
    if (xcost_is_free(hd)) return 0; /* views: aliases, no step */
    /* an opaque node cannot run here, and no rewrite changes it: the same
     * (unknown) cost in every candidate, so none (docs/onnx-models.md) */
    if (hd->op->flags & TS_OP_OPAQUE) return 0;
    /* A convolution fed by a convolution is measured after that producer,
     * so that it sees its input in the layout it gets in the model; the key
     * names both. */
    int np = layout_producer(g, group_of, head, members);
    int nm = xcost_members(g, group_of, head, members + np);
    char *key = group_key(g, members, np, nm);
    if (!key) return *src = XCOST_ROOFLINE, roofline(db, g, members + np, nm);
    /* past the deadline a missing group is estimated, and counted */
    bool late = measure && xcost_db_past_deadline(db);
    if (late) measure = false;
    const centry *e;
    if (in_context) {
        if ((e = get_prefixed(db, XCOST_PLAN_PREFIX, key))) {
            free(key);
            *src = XCOST_PLAN;
            return e->ms;
        }
        ts_error err = {0};
        if (!(e = get_prefixed(db, XCOST_CTX_PREFIX, key)) && measure &&
            !xcost_ctx_measure(db, g, group_of, &head, 1, NULL, NULL, &err)) {
            db->measured++;
            e = get_prefixed(db, XCOST_CTX_PREFIX, key);
        }
        if (e) {
            free(key);
            *src = XCOST_CONTEXT;
            return e->ms;
        }
    }
    e = lookup(db, key);
    double ms;
    if (e && e->key) {
        ms = e->ms;
        *src = XCOST_CACHED;
    } else {
        ts_error err = {0};
        if (measure && !measure_group(g, members, np, np + nm, &ms, &err) && put(db, key, ms, 1)) {
            db->measured++;
            *src = XCOST_MEASURED;
        } else {
            ms = roofline(db, g, members + np, nm);
            *src = XCOST_ROOFLINE;
            db->late += late;
        }
    }
    free(key);
    return ms;
}

double xcost_group(ts_costdb *db, const ts_graph *g, const int *group_of, int head, bool measure, xcost_src *src)
{
    return group_cost(db, g, group_of, head, measure, true, src);
}

double xcost_group_isolated(ts_costdb *db, const ts_graph *g, const int *group_of, int head, bool measure,
                            xcost_src *src)
{
    return group_cost(db, g, group_of, head, measure, false, src);
}

double ts_cost_node(ts_costdb *db, const ts_graph *g, int n, bool measure)
{
    int *group_of = malloc(sizeof *group_of * ((size_t)g->nnodes + 1));
    double ms = 0;
    xcost_src src;
    if (group_of && !xcost_groups(g, group_of) && group_of[n] == n) ms = xcost_group(db, g, group_of, n, measure, &src);
    free(group_of);
    return ms;
}

/* Times g's whole plan step by step (when some group lacks an in-plan
 * time): up to 20 runs after 2 warm-ups, at least 5, stopping after ~2 s. */
static ts_status prime(ts_costdb *db, const ts_graph *g, const int *group_of, ts_error *err)
{
    int missing = 0;
    for (int n = 0; n < g->nnodes; n++) {
        if (group_of[n] != n || g->nodes[n].dead || xcost_is_free(&g->nodes[n])) continue;
        char *key = xcost_group_key(g, group_of, n);
        if (!key) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        missing += !get_prefixed(db, XCOST_PLAN_PREFIX, key);
        free(key);
    }
    if (!missing) return TS_OK; /* once per machine: the cache has them all */
    xcost_plan_times r;
    ts_status st = xcost_time_plan_budget(db, g, 2, 20, 5, 2000, &r, err);
    if (!st) db->measured += r.groups;
    return st;
}

ts_status ts_cost_prime(ts_costdb *db, const ts_graph *g, ts_error *err)
{
    int *group_of = malloc(sizeof *group_of * ((size_t)g->nnodes + 1));
    ts_status st = !group_of || xcost_groups(g, group_of) ? ts_error_set(err, TS_ERR_NOMEM, "out of memory")
                                                           : prime(db, g, group_of, err);
    free(group_of);
    return st;
}

/* The group whose output value v is (through views): -1 for a graph input
 * or constant. */
static int producer_group(const ts_graph *g, const int *group_of, int v)
{
    for (int hops = 0; v >= 0 && hops < 16; hops++) {
        int p = g->values[v].producer, h = p >= 0 ? group_of[p] : -1;
        if (h < 0) return -1;
        if (!xcost_is_free(&g->nodes[h])) return h;
        v = g->nodes[h].inputs[0];
    }
    return -1;
}

/* Times heads[0..k-1] in context: clusters of them joined by a value one
 * produces and the other reads, in pieces of XCOST_CTX_MAX_GROUPS.  A
 * piece that fails leaves its groups to the caller's fallback; the others
 * are still timed.  Returns the last failure. */
static ts_status measure_heads(ts_costdb *db, const ts_graph *g, const int *group_of, const int *heads, int k,
                               int *ntimed, ts_error *err)
{
    int nn = g->nnodes;
    int *up = malloc(sizeof *up * ((size_t)nn + 1)), *cl = malloc(sizeof *cl * ((size_t)nn + 1));
    ts_status st = TS_OK;
    *ntimed = 0;
    if (!up || !cl) {
        free(up);
        free(cl);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int n = 0; n < nn; n++) up[n] = -1;
    for (int i = 0; i < k; i++) up[heads[i]] = heads[i];
    for (int n = 0; n < nn; n++) {
        int h = group_of[n];
        if (h < 0 || up[h] < 0) continue;
        const ts_node *nd = &g->nodes[n];
        for (int j = 0; j < nd->ninputs; j++) {
            int p = producer_group(g, group_of, nd->inputs[j]);
            if (p >= 0 && up[p] >= 0) up[ts_uf_root(up, p)] = ts_uf_root(up, h);
        }
    }
    for (int i = 0; i < k; i++) {
        int r = ts_uf_root(up, heads[i]), ncl = 0;
        bool done = false; /* the cluster of an earlier head */
        for (int j = 0; j < i; j++) done |= ts_uf_root(up, heads[j]) == r;
        if (done) continue;
        for (int j = i; j < k; j++)
            if (ts_uf_root(up, heads[j]) == r) cl[ncl++] = heads[j];
        /* a neighbourhood stays small: a large cluster (a graph never
         * primed, a move rewriting a whole chain) in pieces of
         * XCOST_CTX_MAX_GROUPS consecutive groups, each piece with its own
         * neighbours; never the whole graph as one plan */
        for (int a = 0; a < ncl && !xcost_db_past_deadline(db); a += XCOST_CTX_MAX_GROUPS) {
            int m = ncl - a < XCOST_CTX_MAX_GROUPS ? ncl - a : XCOST_CTX_MAX_GROUPS;
            ts_error e1 = {0};
            ts_status s1 = xcost_ctx_measure(db, g, group_of, cl + a, m, NULL, NULL, &e1);
            if (s1) {
                st = s1;
                *err = e1;
                if (s1 == TS_ERR_NOMEM) goto out;
            } else {
                *ntimed += m;
            }
        }
    }
out:
    free(up);
    free(cl);
    return st;
}

typedef struct hkey {
    char *key;
    int head;
} hkey;

static int cmp_hkey(const void *a, const void *b)
{
    const hkey *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->head > y->head) - (x->head < y->head);
}

/* The first of heads[0..k-1] (in node order) for each distinct group key,
 * in node order, into out; returns the count (-1: out of memory). */
static int distinct_keys(const ts_graph *g, const int *group_of, const int *heads, int k, int *out)
{
    hkey *hk = calloc((size_t)k + 1, sizeof *hk);
    int n = 0, bad = !hk;
    for (int i = 0; i < k && !bad; i++) {
        hk[i].head = heads[i];
        bad = !(hk[i].key = xcost_group_key(g, group_of, heads[i]));
    }
    if (!bad) {
        qsort(hk, (size_t)k, sizeof *hk, cmp_hkey);
        for (int i = 0; i < k; i++)
            if (!i || strcmp(hk[i].key, hk[i - 1].key)) out[n++] = hk[i].head;
        /* node order again: clusters follow the graph */
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
                int t = out[j];
                out[j] = out[j - 1];
                out[j - 1] = t;
            }
    }
    for (int i = 0; i < k && hk; i++) free(hk[i].key);
    free(hk);
    return bad ? -1 : n;
}

/* One pass over the groups: cached in-plan or in-context times are summed,
 * the other groups collected; with `measure` those are timed in context
 * first (measure_heads: a candidate's new groups are usually next to each
 * other, and one plan for them costs less than several), then costed one
 * by one (xcost_group: the time just cached, or a fallback). */
static double graph_cost(ts_costdb *db, const ts_graph *g, bool measure, bool may_prime)
{
    int nn = g->nnodes, k = 0, ng = 0;
    int *group_of = malloc(sizeof *group_of * ((size_t)nn + 1)), *heads = malloc(sizeof *heads * ((size_t)nn + 1));
    int *pending = malloc(sizeof *pending * ((size_t)nn + 1));
    double ms = 0;
    xcost_src src;
    if (group_of && heads && pending && !xcost_groups(g, group_of)) {
        for (int n = 0; n < nn; n++) {
            if (group_of[n] != n || g->nodes[n].dead || xcost_is_free(&g->nodes[n])) continue;
            char *key = xcost_group_key(g, group_of, n);
            const centry *e = key ? get_prefixed(db, XCOST_PLAN_PREFIX, key) : NULL;
            if (key && !e) e = get_prefixed(db, XCOST_CTX_PREFIX, key);
            free(key);
            ng++;
            if (e)
                ms += e->ms;
            else
                heads[k++] = n;
        }
        ts_error err = {0};
        int timed = 0;
        /* The first graph costed with a cache that has no in-plan time at
         * all, none of whose groups it knows, is an original that was not
         * primed (the optimizer's first call on a new cache): prime it; in
         * pieces it would be charged less than it runs (nasrnn: 0.77 ms in
         * pieces of 4, 1.03 ms measured).  Never a later graph: a rewrite
         * whose every group is new (a greedy move merging all MatMuls) is
         * not timed as a whole (nasrnn: such a graph, primed inside a
         * search, predicted 1.31 ms; costed afresh in context 1.78 ms;
         * measured 1.95-2.15 ms). */
        if (measure && may_prime && k && k == ng && !db->nplan && !xcost_db_past_deadline(db) &&
            !prime(db, g, group_of, &err)) {
            for (int i = 0; i < k; i++) ms += xcost_group(db, g, group_of, heads[i], false, &src);
            k = 0;
        }
        if (measure && k && !xcost_db_past_deadline(db)) {
            /* one group per key: repeated blocks (nasnet_a's cells) share
             * keys, and a search has a few seconds for its new groups */
            int nt = distinct_keys(g, group_of, heads, k, pending);
            if (nt >= 0) measure_heads(db, g, group_of, pending, nt, &timed, &err);
        }
        db->measured += timed;
        for (int i = 0; i < k; i++) ms += xcost_group(db, g, group_of, heads[i], measure, &src);
    }
    free(group_of);
    free(heads);
    free(pending);
    return ms;
}

double ts_cost_graph(ts_costdb *db, const ts_graph *g, bool measure) { return graph_cost(db, g, measure, true); }

double xcost_graph_in_context(ts_costdb *db, const ts_graph *g) { return graph_cost(db, g, true, false); }
