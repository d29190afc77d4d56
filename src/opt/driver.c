/* The search driver.  Graph passes first (passes.h: conv+BN fold, CSE,
 * merges; each whole-graph pass kept when the cost model says the graph got
 * cheaper, repeated until nothing improves), then Algorithm 2 of the TASO
 * paper: a priority queue of graphs ordered by cost; every candidate that
 * a source proposes for a popped graph is costed, and queued when cheaper
 * than alpha x the best so far (alpha slightly above 1 lets the search pass
 * through slightly worse graphs to reach better ones); graphs seen before
 * (by structural hash) are skipped.
 *
 * Deterministic for a given budget: sources, rules and matches are visited
 * in a fixed order, ties in the queue broken by insertion order.
 *
 * Sources are asked in proportion to what they give: one whose proposals
 * for a graph all cost more than that graph is skipped on the next graph,
 * then on the next 3, 7, ... (at most 31) until one of its proposals beats
 * the graph it rewrites again; a graph that leaves the queue empty is
 * given to the skipped sources too.  A source that finds nothing in a model
 * (PET or EinNet on a graph whose convolutions oneDNN already runs best)
 * would otherwise take most of the time limit from one that does: on
 * nasnet_a, 3 graphs explored in 20 s with all sources against 48 with
 * TASO's rules alone.  Counted in explored graphs, so still deterministic.
 *
 * Memory is bounded: a queued graph shares its weights with the original,
 * so what it costs is its structure plus the weights its rewrites made
 * (concatenations); the frontier's total is kept under half of
 * max_memory_mb by dropping its most expensive graphs, and the process's
 * resident size is watched so a source that allocates elsewhere cannot
 * take the machine (the search then stops with "memory"). */
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cost/cost.h"
#include "opt/bodies.h"
#include "opt/driver.h"
#include "opt/passes.h"
#include "util/clock.h"
#include "util/heap.h"

typedef struct hist {
    int source;       /* index of the source, TS_DRIVE_PASSES for a pass */
    const char *what; /* rule / pass name (lives as long as the source) */
    int count;
    double gain; /* cost of the graph it rewrote less its own (target's cost model, ms) */
    struct hist *parent;
    int refs;
} hist;

typedef struct qent {
    ts_graph *g;
    double cost;
    long seq;
    size_t bytes;
    hist *h;
} qent;

/* At least the number of graph passes (NPASSES, below). */
#define NPASSES_MAX 20

/* Set of pointers (the original's constant tensors). */
typedef struct pset {
    const void **slot;
    size_t cap;
} pset;

/* How often a source is asked (see the top of the file). */
typedef struct sched {
    int streak; /* graphs in a row on which it beat nothing */
    int next;   /* explored count from which it is asked again */
    bool won;   /* a proposal for the current graph cost less than it */
    bool asked; /* asked about the current graph */
} sched;

typedef struct dctx {
    const ts_optimize_opts *o;
    ts_costdb *db;
    const ts_source *const *src;
    void *const *state;
    int nsrc;
    ts_const_cache *cc;
    qent *heap;
    size_t n, cap;
    size_t bytes, max_bytes, peak_bytes;
    uint64_t *seen;
    size_t seen_cap, seen_n;
    pset orig;
    ts_graph *best;
    double best_cost, cost0;
    hist *best_h;
    int nalts; /* runners-up below the original's cost, cheapest first */
    ts_graph *alts[TS_DRIVE_ALTS];
    double alt_cost[TS_DRIVE_ALTS];
    hist *alt_h[TS_DRIVE_ALTS];
    int npalts; /* the passes' alternatives (pass_runner_up), cheapest first */
    ts_graph *palts[TS_DRIVE_PASS_ALTS];
    double palt_cost[TS_DRIVE_PASS_ALTS];
    hist *palt_h[TS_DRIVE_PASS_ALTS];
    int pass_round; /* passes(): the round running (0: the first) */
    bool pass_cont; /* passes(): continuing a first-round alternative (no alternatives of its own) */
    int nfirst;     /* the first round's graphs not kept (pass_runner_up), continued after it */
    ts_graph *first[NPASSES_MAX];
    double first_cost[NPASSES_MAX];
    hist *first_h[NPASSES_MAX];
    long seq;
    int explored, generated, duplicates;
    double t0, last_tick, last_line;
    bool tty; /* progress goes to a terminal */
    hist *cur_h;
    double cur_cost; /* of the graph being expanded */
    int cur_src;
    sched *sched;    /* one per source */
    ts_error *err;
    bool failed;
    const char *stop; /* set once the search must end */
    double rss0;      /* resident MiB when the search began: the model's weights (mapped or read) are not the search's */
    ts_source_emit emit;
    double cost_s; /* the slowest candidate costing so far (s): one that would end past the limit is skipped */
    ts_drive_cost_fn cost_fn; /* the target's cost (ort: opt/ort_target.c); NULL: tsopt's own */
    void *cost_ctx;
} dctx;

/* Anonymous resident MiB: pages of a file mapping (weights memory-mapped
 * from external data, which the search reads when it hashes or folds
 * them) are the kernel's to drop, not memory the search holds. */
static double rss_mb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0, shared = 0;
    if (f) {
        if (fscanf(f, "%ld %ld %ld", &pages, &res, &shared) != 3) res = shared = 0;
        fclose(f);
    }
    return (double)(res - shared) * 4096.0 / (1 << 20);
}

/* ---- history: a tree of rewrites shared by the queued graphs */

static void hist_unref(hist *h)
{
    while (h && --h->refs == 0) {
        hist *p = h->parent;
        free(h);
        h = p;
    }
}

static hist *hist_push(hist *parent, int source, const char *what, int count)
{
    hist *h = malloc(sizeof *h);
    if (!h) return NULL;
    *h = (hist){.source = source, .what = what, .count = count, .parent = parent, .refs = 1};
    if (parent) parent->refs++;
    return h;
}

static bool nomem(dctx *s)
{
    s->failed = true;
    ts_error_set(s->err, TS_ERR_NOMEM, "out of memory in search");
    return false;
}

/* ---- sets */

static bool seen_add(dctx *s, uint64_t h)
{
    if (!h) h = 1; /* 0 marks an empty slot */
    if (2 * (s->seen_n + 1) > s->seen_cap) {
        size_t cap = s->seen_cap ? 2 * s->seen_cap : 1024;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t) return false;
        for (size_t i = 0; i < s->seen_cap; i++)
            if (s->seen[i])
                for (size_t j = s->seen[i] & (cap - 1);; j = (j + 1) & (cap - 1))
                    if (!t[j]) {
                        t[j] = s->seen[i];
                        break;
                    }
        free(s->seen);
        s->seen = t;
        s->seen_cap = cap;
    }
    for (size_t j = h & (s->seen_cap - 1);; j = (j + 1) & (s->seen_cap - 1)) {
        if (s->seen[j] == h) return false;
        if (!s->seen[j]) {
            s->seen[j] = h;
            s->seen_n++;
            return true;
        }
    }
}

static size_t ptr_hash(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull); }

static bool pset_init(pset *ps, const ts_graph *g)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)g->nvalues + 2) cap *= 2;
    if (!(ps->slot = calloc(cap, sizeof *ps->slot))) return false;
    ps->cap = cap;
    for (int v = 0; v < g->nvalues; v++) {
        const void *p = g->values[v].constant;
        if (!p) continue;
        for (size_t j = ptr_hash(p) & (cap - 1);; j = (j + 1) & (cap - 1)) {
            if (ps->slot[j] == p) break;
            if (!ps->slot[j]) {
                ps->slot[j] = p;
                break;
            }
        }
    }
    return true;
}

static bool pset_has(const pset *ps, const void *p)
{
    for (size_t j = ptr_hash(p) & (ps->cap - 1);; j = (j + 1) & (ps->cap - 1)) {
        if (ps->slot[j] == p) return true;
        if (!ps->slot[j]) return false;
    }
}

size_t ts_graph_struct_bytes(const ts_graph *g)
{
    size_t b = sizeof *g + (size_t)g->cap_values * sizeof(ts_value) + (size_t)g->cap_nodes * sizeof(ts_node) +
               sizeof(int) * (size_t)(g->ninputs + g->noutputs);
    for (int v = 0; v < g->nvalues; v++) b += g->values[v].name ? strlen(g->values[v].name) + 1 : 0;
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        b += n->op->attr_size + sizeof(int) * (size_t)(n->ninputs + n->noutputs) + (n->name ? strlen(n->name) + 1 : 0);
    }
    return b;
}

/* What a candidate costs to keep: its structure and the weights no
 * earlier graph had (counted in every candidate holding them: an upper
 * bound, as two candidates may share one concatenation). */
static size_t entry_bytes(const dctx *s, const ts_graph *g)
{
    size_t b = ts_graph_struct_bytes(g);
    for (int v = 0; v < g->nvalues; v++) {
        const ts_tensor *t = g->values[v].constant;
        if (t && !pset_has(&s->orig, t)) b += t->nbytes;
    }
    return b;
}

/* ---- min-heap by (cost, seq) */

static bool less(const void *pa, const void *pb)
{
    const qent *a = pa, *b = pb;
    return a->cost < b->cost || (a->cost == b->cost && a->seq < b->seq);
}

static void drop(dctx *s, size_t w)
{
    s->bytes -= s->heap[w].bytes;
    ts_graph_free(s->heap[w].g);
    hist_unref(s->heap[w].h);
    ts_heap_remove(s->heap, sizeof *s->heap, &s->n, w, NULL, less);
}

static void drop_worst(dctx *s)
{
    size_t w = s->n / 2; /* the worst is among the leaves */
    for (size_t i = s->n / 2; i < s->n; i++)
        if (less(&s->heap[w], &s->heap[i])) w = i;
    drop(s, w);
}

static qent pop(dctx *s)
{
    qent e;
    ts_heap_remove(s->heap, sizeof *s->heap, &s->n, 0, &e, less);
    s->bytes -= e.bytes;
    return e;
}

/* Takes g; false only out of memory (g freed). */
static bool push(dctx *s, ts_graph *g, double cost, hist *h)
{
    /* the most expensive graphs make room; a graph larger than the whole
     * cap is still kept alone, so the search never starves */
    size_t b = entry_bytes(s, g);
    while (s->n > 0 && s->bytes + b > s->max_bytes) drop_worst(s);
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        qent *t = realloc(s->heap, sizeof *t * cap);
        if (!t) {
            ts_graph_free(g);
            hist_unref(h);
            return false;
        }
        s->heap = t;
        s->cap = cap;
    }
    qent e = {.g = g, .cost = cost, .seq = s->seq++, .bytes = b, .h = h};
    ts_heap_push(s->heap, sizeof e, &s->n, &e, less);
    s->bytes += b;
    if (s->bytes > s->peak_bytes) s->peak_bytes = s->bytes;
    return true;
}

/* ---- costs */

/* A machine-independent roofline: 100 GFLOP/s, 20 GB/s and 2 us of fixed
 * cost (dispatch, the threads' fork and join) per fused group -- the
 * groups of the measured model, so fusion is predicted alike. */
static double roofline_cost(const ts_graph *g)
{
    int *group_of = malloc(sizeof *group_of * ((size_t)g->nnodes + 1));
    int *members = malloc(sizeof *members * ((size_t)g->nnodes + 1));
    double ms = 0;
    if (group_of && members && !xcost_groups(g, group_of))
        for (int n = 0; n < g->nnodes; n++) {
            if (group_of[n] != n || xcost_is_free(&g->nodes[n])) continue;
            double flops, bytes;
            xcost_group_work(g, members, xcost_members(g, group_of, n, members), &flops, &bytes);
            ms += 0.002 + fmax(flops / 100e6, bytes / 20e6);
        }
    free(group_of);
    free(members);
    return ms;
}

/* What tsopt's runtime will run for g: a copy at graph optimization level
 * `all` (levels.c), the level sessions load at and the keep decision times
 * (measure.c); tsopt's cost models (measured and roofline) cost that.
 * Costed as written, a candidate that moves a GELU's 0.5 into the next
 * MatMul (taso-0148, taso-0600) looked no dearer, yet the runtime then no
 * longer fuses the GELU into the MatMul before it, and the original was
 * charged its spelled-out GELU as a separate step.  Longformer, 12-07,
 * quiet: the search's best predicted 60.8 vs 66.8 ms, measured 61.8 vs
 * 61.3 ms (band-phases' gain spent on two unfused GELUs), so optimize
 * wrote the original.  The copy shares the weights (ts_graph_copy); NULL
 * (out of memory, a pass failing) costs g as written. */
static ts_graph *as_run(const ts_graph *g)
{
    ts_graph *c = ts_graph_copy(g);
    ts_error err = {0};
    if (c && ts_graph_opt_apply(c, TS_GRAPH_OPT_ALL, &err) < 0) ts_graph_free(c), c = NULL;
    return c;
}

double ts_drive_graph_cost(const ts_optimize_opts *o, ts_costdb *db, const ts_graph *g)
{
    ts_graph *c = as_run(g);
    const ts_graph *r = c ? c : g;
    double ms = o->roofline ? roofline_cost(r) : ts_cost_graph(db, r, true);
    ts_graph_free(c);
    return ms;
}

static double graph_cost(const dctx *s, const ts_graph *g)
{
    /* the target's own cost (ort: ONNX Runtime makes its own fusions of the model as written) */
    return s->cost_fn && !s->o->roofline ? s->cost_fn(s->cost_ctx, g) : ts_drive_graph_cost(s->o, s->db, g);
}

/* g's cost, NAN when costing it ran into the search's time limit (the cost
 * db's deadline, set by ts_drive_costed): groups it could not time were
 * estimated on the roofline, which does not compare with measured costs,
 * so the candidate is dropped and the search ends ("time limit"). */
static double graph_cost_in_time(dctx *s, const ts_graph *g)
{
    int late = s->db ? xcost_db_late(s->db) : 0;
    double c = graph_cost(s, g);
    if (s->db && xcost_db_late(s->db) > late) {
        s->stop = "time limit";
        return NAN;
    }
    return c;
}

/* ---- limits and progress */

static void tick(dctx *s, bool final)
{
    double t = ts_clock_s();
    if (!final && t - s->last_tick < 0.25) return;
    s->last_tick = t;
    double limit = s->o->max_memory_mb > 0 ? s->o->max_memory_mb : 1536;
    if (!final && rss_mb() - s->rss0 > limit) {
        /* the frontier is the one thing the driver can give back */
        while (s->n > 0 && s->bytes > s->max_bytes / 4) drop_worst(s);
        s->max_bytes /= 2;
        malloc_trim(0);
        if (rss_mb() - s->rss0 > limit && !s->stop) s->stop = "memory";
    }
    if (!s->o->progress) return;
    /* a line rewritten in place on a terminal; elsewhere (a log) a plain
     * line every few seconds */
    if (s->tty)
        fprintf(stderr, "\roptimize: best %.3f ms (from %.3f)  explored %d  generated %d  queue %zu  %.1f s   %s",
                s->best_cost, s->cost0, s->explored, s->generated, s->n, t - s->t0, final ? "\n" : "");
    else if (final || t - s->last_line >= 5) {
        s->last_line = t;
        fprintf(stderr, "optimize: %.1f s: best %.3f ms (from %.3f), explored %d, generated %d, queue %zu%s\n",
                t - s->t0, s->best_cost, s->cost0, s->explored, s->generated, s->n, final ? " (done)" : "");
    }
    fflush(stderr);
}

static bool must_stop(dctx *s)
{
    if (s->stop) return true;
    if (s->o->stop && *s->o->stop) s->stop = "interrupted";
    else if (s->o->time_limit > 0 && ts_clock_s() - s->t0 > s->o->time_limit) s->stop = "time limit";
    return s->stop != NULL;
}

static bool emit_stopped(ts_source_emit *e)
{
    dctx *s = e->driver;
    return s->failed || must_stop(s);
}

/* Keeps g (owned, as is the reference on h) in the list gs/cs/hs of *n
 * graphs (at most max, cheapest first) when it costs less than ceiling and
 * than the last of a full list. */
static void ranked_add(ts_graph **gs, double *cs, hist **hs, int *n, int max, ts_graph *g, double c, hist *h,
                       double ceiling)
{
    if (!g || !(c < ceiling) || (*n == max && !(c < cs[max - 1]))) {
        ts_graph_free(g);
        hist_unref(h);
        return;
    }
    if (*n == max) {
        --*n;
        ts_graph_free(gs[*n]);
        hist_unref(hs[*n]);
    }
    int i = (*n)++;
    for (; i > 0 && c < cs[i - 1]; i--) {
        gs[i] = gs[i - 1];
        cs[i] = cs[i - 1];
        hs[i] = hs[i - 1];
    }
    gs[i] = g;
    cs[i] = c;
    hs[i] = h;
}

/* Keeps g among the search's runners-up when it costs less than ceiling
 * (the original's cost) and than the last of them. */
static void alt_add(dctx *s, ts_graph *g, double c, hist *h, double ceiling)
{
    ranked_add(s->alts, s->alt_cost, s->alt_h, &s->nalts, TS_DRIVE_ALTS, g, c, h, ceiling);
}

/* emit(): a source proposes candidate ng made from the graph being
 * expanded. */
static bool consider(ts_source_emit *e, ts_graph *ng, const char *what, int count)
{
    dctx *s = e->driver;
    if (s->failed || must_stop(s)) {
        ts_graph_free(ng);
        return false;
    }
    e->gain = NAN;
    if (!seen_add(s, ts_graph_hash(ng))) {
        ts_graph_free(ng);
        s->duplicates++;
        return true;
    }
    /* costing times new groups in context (seconds each on a 256x256
     * model under load): one that would end past the time limit is not
     * started, so the search ends on time with the best costed so far */
    if (s->o->time_limit > 0 && ts_clock_s() + s->cost_s > s->t0 + s->o->time_limit) {
        ts_graph_free(ng);
        s->stop = "time limit";
        return false;
    }
    s->generated++;
    double tc = ts_clock_s(), c = graph_cost_in_time(s, ng);
    if (ts_clock_s() - tc > s->cost_s) s->cost_s = ts_clock_s() - tc;
    if (isnan(c)) {
        ts_graph_free(ng);
        return false;
    }
    e->gain = s->cur_cost - c;
    if (c < s->cur_cost) s->sched[s->cur_src].won = true;
    hist *h = hist_push(s->cur_h, s->cur_src, what, count);
    if (!h) {
        ts_graph_free(ng);
        return nomem(s);
    }
    h->gain = s->cur_cost - c;
    if (c < s->best_cost) {
        ts_graph *copy = ts_graph_copy(ng);
        if (!copy) {
            ts_graph_free(ng);
            hist_unref(h);
            return nomem(s);
        }
        alt_add(s, s->best, s->best_cost, s->best_h, s->cost0); /* the old best is the first runner-up */
        s->best = copy;
        s->best_cost = c;
        s->best_h = h;
        h->refs++;
    } else if (c < s->cost0 && (s->nalts < TS_DRIVE_ALTS || c < s->alt_cost[TS_DRIVE_ALTS - 1])) {
        h->refs++;
        alt_add(s, ts_graph_copy(ng), c, h, s->cost0);
    }
    if (c < s->o->alpha * s->best_cost) {
        if (!push(s, ng, c, h)) return nomem(s);
    } else {
        ts_graph_free(ng);
        hist_unref(h);
    }
    tick(s, false);
    return !must_stop(s);
}

/* ---- graph passes */

enum { PASS_BN, PASS_CSE, PASS_BODIES, PASS_SOFTMAX_FLUSH, PASS_SUMS, PASS_SIBLINGS, PASS_SUMS_SIBLINGS, PASS_STACK,
       PASS_POOL_CONV, PASS_POOL_FIRST, PASS_FOLD_GATE, PASS_PRELU_DW, PASS_GROUP_BLOCKS, PASS_RESIZE_MM,
       PASS_CONV3D_FRAMES, PASS_LN_ANCHOR, PASS_SCALE_FIRST, PASS_DEAD_TAPS, NPASSES };
_Static_assert(NPASSES <= NPASSES_MAX, "NPASSES_MAX");
static const char *const PASS_NAMES[] = {"fold-conv-batchnorm", "cse", "optimize-bodies",
                                         "flush-softmax-subnormals", "merge-matmul-sums",
                                         "merge-siblings", "merge-matmul-sums+siblings",
                                         "stack-shared-weight-matmuls", "pool-after-pointwise-conv",
                                         "pool-before-pointwise-conv", "fold-gate-into-conv",
                                         "prelu-as-depthwise-conv", "group-conv-as-blocks",
                                         "resize-as-matmul", "conv3d-as-frames",
                                         "anchor-layernorm-transpose", "scale-before-transpose",
                                         "conv-trim-dead-taps"};

static int apply_pass(dctx *s, int k, ts_graph *g)
{
    switch (k) {
    case PASS_BN: {
        int n = ts_fold_affine(g, s->err);
        if (n > 0 && ts_graph_fold_constants(g, s->err) < 0) return -1;
        return n;
    }
    case PASS_CSE: return ts_cse(g, s->err);
    case PASS_BODIES: return ts_opt_bodies(g, s->err); /* control flow (opt/bodies.c) */
    case PASS_SUMS: return ts_merge_matmul_sums(g, s->cc, s->err);
    case PASS_SUMS_SIBLINGS: {
        /* merging the sums pays mostly through the sibling merge it enables
         * (the Concat [x h] becomes the shared input) */
        int n = ts_merge_matmul_sums(g, s->cc, s->err), m = n > 0 ? ts_merge_siblings(g, -1, s->cc, s->err) : 0;
        return n < 0 || m < 0 ? -1 : m > 0 ? n + m : 0;
    }
    case PASS_STACK: return ts_merge_shared_weights(g, s->cc, s->err);
    case PASS_POOL_CONV: return ts_swap_pool_conv(g, s->err);
    case PASS_POOL_FIRST: return ts_pool_before_conv(g, s->err);
    case PASS_FOLD_GATE: return ts_fold_gate(g, s->err); /* the target's cost decides (ORT runs the Mul) */
    case PASS_PRELU_DW: return ts_prelu_as_dwconv(g, s->err); /* the target's cost decides (pays in ORT) */
    case PASS_GROUP_BLOCKS: return ts_group_conv_blocks(g, s->err); /* likewise (ORT's NCHWc blocks) */
    case PASS_RESIZE_MM: return ts_resize_as_matmul(g, s->err); /* likewise (ORT's slow linear Resize) */
    case PASS_CONV3D_FRAMES: return ts_conv3d_as_frames(g, s->err); /* likewise (ORT's 3-D conv outside NCHWc) */
    case PASS_LN_ANCHOR: return ts_anchor_layernorm_transpose(g, s->err); /* likewise (ORT's LayerNorm fusion) */
    case PASS_DEAD_TAPS: return ts_conv_trim_dead_taps(g, s->err); /* fewer multiply-adds; the cost decides */
    case PASS_SCALE_FIRST: {
        /* the moved scale then folds into the product before it (ORT runs
         * a Mul after a Transpose alone): the target's cost decides */
        int n = ts_scale_before_transpose(g, s->err);
        if (n > 0 && (ts_fold_affine(g, s->err) < 0 || ts_graph_fold_constants(g, s->err) < 0)) return -1;
        return n;
    }
    case PASS_SOFTMAX_FLUSH:
        /* only for a target that keeps subnormals (ORT): tsopt's softmax
         * kernel flushes them itself (vec_softmax.c xv_flush) */
        return s->cost_fn && !s->o->roofline ? ts_flush_softmax_subnormals(g, s->err) : 0;
    default: return ts_merge_siblings(g, -1, s->cc, s->err);
    }
}

/* A pass's graph that the target's cost (cost_fn: ort) puts above the
 * graph it rewrote by less than this factor is still a runner-up
 * (ts_drive_result.alts), which the target times whole before it decides
 * (optimize.c, ort_rank).  Region sums charge a rewrite that adds many
 * small layout regions each timed alone, and they mix timings taken at
 * different moments: r3d_18's conv3d-as-frames (20 convs, 167 regions
 * against 48) summed to 0.852, 0.925 and 1.039 of the original in three
 * runs (12-07, Intel Xeon; the 1.039 from the cost cache of a 22-model
 * bench run, quiet), while whole in ONNX Runtime it ran 0.79-0.80 of it
 * per round: the pass was refused in the bench run and kept when run
 * alone.  Only the ranking's whole-graph timing gives such a pass a fair
 * hearing; the search still continues from the cheaper graph.
 *
 * In the first round every pass's graph the round does not keep is an
 * alternative, whatever its sum: the merges of MatMuls are summed as
 * Concat/Split and MatMul regions each timed alone, which miss ORT's work
 * across them by more than PASS_NEAR.  nasrnn's merge-matmul-sums+siblings
 * summed to x2.25 of the graph it rewrote (3.418 against 1.521 ms) while
 * whole it ran 0.75-0.93 of it per round (12-07, loaded Intel Xeon), and on
 * the AMD EPYC it was the x2.67 graph written; here the round kept
 * stack-shared-weight-matmuls (0.69-0.73 whole), and the runners-up, all
 * its descendants, gave the ranking no other graph to time.  Each
 * first-round alternative is continued by the later rounds as the kept
 * graph is (the sums decide there, and its continuations are no
 * alternatives): nasrnn's merge-siblings (x2.68 of the graph by its sum)
 * then takes the stacking of the MatMuls it left, and that graph ran
 * 0.53-0.73 of the original per round where the stacking alone ran
 * 0.61-0.75 in the same requests (6 of 7 rank requests lower; loaded Intel
 * Xeon).  The alternatives have slots of their own in the result
 * (TS_DRIVE_PASS_ALTS, the cheapest kept), ahead of the search's
 * runners-up. */
#define PASS_NEAR 1.15

/* A pass's graph ng (owned, cost c) made from cur (cost cur_c) that the
 * round does not keep: an alternative in the first round, later when near
 * (PASS_NEAR); target costs only. */
static bool pass_runner_up(dctx *s, int k, int n, ts_graph *ng, double c, double cur_c, hist *cur_h)
{
    bool first = s->pass_round == 0;
    double ceiling = first ? INFINITY : PASS_NEAR * cur_c;
    if (!s->cost_fn || s->o->roofline || s->pass_cont || !(c < ceiling) ||
        (!first && s->npalts == TS_DRIVE_PASS_ALTS && !(c < s->palt_cost[TS_DRIVE_PASS_ALTS - 1]))) {
        ts_graph_free(ng);
        return true;
    }
    hist *nh = hist_push(cur_h, TS_DRIVE_PASSES, PASS_NAMES[k], n);
    if (!nh) {
        ts_graph_free(ng);
        return nomem(s);
    }
    nh->gain = cur_c - c;
    if (first) /* all of them, continued after the round (passes) */
        ranked_add(s->first, s->first_cost, s->first_h, &s->nfirst, NPASSES_MAX, ng, c, nh, ceiling);
    else
        ranked_add(s->palts, s->palt_cost, s->palt_h, &s->npalts, TS_DRIVE_PASS_ALTS, ng, c, nh, ceiling);
    return true;
}

/* Runs pass k on a copy of *cur; the copy replaces *cur when `always` or
 * when the cost model says it is cheaper.  Returns false only on a hard
 * error (out of memory); a pass that does not fit is skipped.  Not kept,
 * it may be a runner-up (pass_runner_up). */
static bool try_pass(dctx *s, int k, bool always, ts_graph **cur, double *cost, hist **h, ts_graph **best,
                     double *best_c, int *best_k, int *best_n)
{
    ts_graph *ng = ts_graph_copy(*cur);
    if (!ng) return nomem(s);
    int n = apply_pass(s, k, ng);
    if (n < 0) {
        ts_graph_free(ng);
        if (s->err->code == TS_ERR_NOMEM) return !(s->failed = true);
        *s->err = (ts_error){0};
        return true;
    }
    double c = n > 0 ? graph_cost_in_time(s, ng) : 0;
    if (n == 0 || isnan(c)) {
        ts_graph_free(ng);
        return true;
    }
    if (!always && !(c < *best_c)) return pass_runner_up(s, k, n, ng, c, *cost, *h);
    if (always) {
        hist *nh = hist_push(*h, TS_DRIVE_PASSES, PASS_NAMES[k], n);
        if (!nh) {
            ts_graph_free(ng);
            return nomem(s);
        }
        nh->gain = *cost - c;
        hist_unref(*h);
        *h = nh;
        ts_graph_free(*cur);
        *cur = ng;
        *cost = c;
        return true;
    }
    /* the round's cheapest so far gives way: a runner-up perhaps */
    bool ok = !*best || pass_runner_up(s, *best_k, *best_n, *best, *best_c, *cost, *h);
    *best = ng;
    *best_c = c;
    *best_k = k;
    *best_n = n;
    return ok;
}

/* Rounds from..to-1 of the merge passes on *cur: each applies every pass
 * to the whole graph and keeps the cheapest when the cost model says the
 * graph got cheaper, until nothing improves (*more false).  False on a
 * hard error. */
static bool pass_rounds(dctx *s, int from, int to, ts_graph **cur, double *cost, hist **h, bool *more)
{
    *more = true;
    for (int round = from; round < to && !must_stop(s); round++) {
        s->pass_round = round;
        /* moves overlap (the sums merge and the sibling merge compete for
         * the same MatMuls): each round keeps the cheapest */
        ts_graph *best = NULL;
        double best_c = *cost;
        int best_k = -1, best_n = 0;
        for (int k = PASS_SUMS; k < NPASSES && !must_stop(s); k++)
            if (!try_pass(s, k, false, cur, cost, h, &best, &best_c, &best_k, &best_n)) {
                ts_graph_free(best);
                return false;
            }
        if (!best) {
            *more = false;
            break;
        }
        hist *nh = hist_push(*h, TS_DRIVE_PASSES, PASS_NAMES[best_k], best_n);
        if (!nh) {
            ts_graph_free(best);
            return nomem(s);
        }
        nh->gain = *cost - best_c;
        hist_unref(*h);
        *h = nh;
        ts_graph_free(*cur);
        *cur = best;
        *cost = best_c;
    }
    return true;
}

#define PASS_ROUNDS 8

/* BatchNormalization after a conv is folded first, whatever the cost model
 * says: the runtime fuses the pair anyway (the costs differ only by noise),
 * and only a folded conv matches a rule's conv (NasNet-A's branch sums are
 * Add(BN(conv), BN(conv)), which no ewadd(conv, conv) matches unfolded).
 * CSE never makes a graph slower and is kept likewise, and so are the
 * control-flow bodies' own passes (opt/bodies.c).  For a target that
 * keeps subnormals (ORT) a masked Softmax's subnormal probabilities are
 * flushed whatever the cost says: a region is timed alone on random
 * inputs, and the MatMul after the Softmax timed so has no subnormal
 * operand, so the sums need not see the 20-50x slower MatMul that the
 * model's own mask causes (softmax_flush.c); the whole-graph ranking and
 * the keep decision time the model whole.  Then each merge
 * pass is applied to the whole graph and the cheapest kept when the cost
 * model says the graph got cheaper, until nothing improves: one whole-graph
 * merge stands for many rule applications (merging 8 MatMuls is 7 pairwise
 * merges, each of which Algorithm 2 would have had to cost and queue), so
 * the search starts from a much better graph.  The first round's graphs
 * not kept are alternatives for the target (pass_runner_up). */
static bool passes(dctx *s, ts_graph **cur, double *cost, hist **h)
{
    ts_graph *unused = NULL;
    double unused_c = 0;
    int uk = 0, un = 0;
    if (!try_pass(s, PASS_BN, true, cur, cost, h, &unused, &unused_c, &uk, &un) ||
        !try_pass(s, PASS_CSE, true, cur, cost, h, &unused, &unused_c, &uk, &un) ||
        !try_pass(s, PASS_BODIES, true, cur, cost, h, &unused, &unused_c, &uk, &un) ||
        !try_pass(s, PASS_SOFTMAX_FLUSH, true, cur, cost, h, &unused, &unused_c, &uk, &un))
        return false;
    bool more, cont, ok = pass_rounds(s, 0, 1, cur, cost, h, &more);
    /* the first round's alternatives (pass_runner_up), each continued by
     * the later rounds, the cheapest TS_DRIVE_PASS_ALTS kept */
    s->pass_cont = true;
    for (int i = 0; i < s->nfirst; i++) {
        if (ok) ok = pass_rounds(s, 1, PASS_ROUNDS, &s->first[i], &s->first_cost[i], &s->first_h[i], &cont);
        ranked_add(s->palts, s->palt_cost, s->palt_h, &s->npalts, TS_DRIVE_PASS_ALTS, s->first[i], s->first_cost[i],
                   s->first_h[i], INFINITY);
    }
    s->nfirst = 0;
    s->pass_cont = false;
    return ok && (!more || pass_rounds(s, 1, PASS_ROUNDS, cur, cost, h, &more));
}

/* ---- result */

static int cmp_count(const void *a, const void *b)
{
    const ts_optimize_count *x = a, *y = b;
    return x->count != y->count ? y->count - x->count : strcmp(x->name, y->name);
}

/* The rewrites on the path bh into res (names, gains, per_source, nsteps). */
static void collect(hist *bh, int nsrc, ts_drive_result *res)
{
    int cap = 0;
    for (hist *h = bh; h; h = h->parent) cap++;
    res->names = calloc((size_t)cap + 1, sizeof *res->names);
    for (hist *h = bh; h; h = h->parent) {
        res->nsteps += h->count;
        res->per_source[h->source == TS_DRIVE_PASSES ? nsrc : h->source] += h->count;
        if (!res->names) continue;
        int k = 0;
        while (k < res->nnames && strcmp(res->names[k].name, h->what)) k++;
        if (k == res->nnames) snprintf(res->names[res->nnames++].name, TS_OPT_NAME_MAX, "%s", h->what);
        res->names[k].count += h->count;
    }
    if (!res->names) return;
    qsort(res->names, (size_t)res->nnames, sizeof *res->names, cmp_count);
    /* each rewrite's gain, summed over its steps on the path, in the sorted order */
    if (!(res->gains = calloc((size_t)res->nnames + 1, sizeof *res->gains))) return;
    for (hist *h = bh; h; h = h->parent)
        for (int k = 0; k < res->nnames; k++)
            if (!strcmp(res->names[k].name, h->what)) res->gains[k] += h->gain;
}

ts_status ts_drive(const ts_graph *g0, const ts_optimize_opts *o, ts_costdb *db, const ts_source *const *sources,
                   void *const *states, int nsrc, ts_const_cache *cc, ts_drive_result *res, ts_error *err)
{
    return ts_drive_costed(g0, o, db, NULL, NULL, sources, states, nsrc, cc, res, err);
}

ts_status ts_drive_costed(const ts_graph *g0, const ts_optimize_opts *o, ts_costdb *db, ts_drive_cost_fn cost_fn,
                          void *cost_ctx, const ts_source *const *sources, void *const *states, int nsrc,
                          ts_const_cache *cc, ts_drive_result *res, ts_error *err)
{
    memset(res, 0, sizeof *res);
    double cap_mb = o->max_memory_mb > 0 ? o->max_memory_mb : 1536;
    dctx s = {.o = o, .db = db, .src = sources, .state = states, .nsrc = nsrc, .cc = cc, .err = err, .t0 = ts_clock_s(),
              .max_bytes = (size_t)(cap_mb / 2 * (1 << 20))};
    s.emit = (ts_source_emit){.fn = consider, .stopped = emit_stopped, .driver = &s};
    s.cost_fn = cost_fn;
    s.cost_ctx = cost_ctx;
    s.tty = isatty(2);
    s.last_line = s.t0;
    s.rss0 = rss_mb();
    /* no group is timed past the limit (graph_cost_in_time) */
    double deadline0 = db && o->time_limit > 0 ? xcost_db_set_deadline(db, s.t0 + o->time_limit) : 0;
    ts_graph *start = ts_graph_copy(g0);
    s.sched = calloc((size_t)nsrc + 1, sizeof *s.sched);
    if (!start || !s.sched || !pset_init(&s.orig, g0)) {
        ts_graph_free(start);
        free(s.sched);
        free(s.orig.slot);
        if (db && o->time_limit > 0) xcost_db_set_deadline(db, deadline0);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory copying the graph");
    }
    res->cost_before = s.cost0 = graph_cost(&s, g0);
    double c0 = res->cost_before;
    hist *h0 = NULL;
    if (!passes(&s, &start, &c0, &h0)) goto done_start;
    res->passes_seconds = ts_clock_s() - s.t0;
    s.best = ts_graph_copy(start);
    s.best_cost = c0;
    s.best_h = h0;
    if (h0) h0->refs++;
    seen_add(&s, ts_graph_hash(start));
    if (!s.best) {
        nomem(&s);
        goto done_start;
    }
    if (!push(&s, start, c0, h0)) {
        nomem(&s);
        goto done;
    }
    start = NULL;
    h0 = NULL;
    while (s.n > 0 && !s.failed && !must_stop(&s)) {
        if (o->budget > 0 && s.explored >= o->budget) {
            s.stop = "budget";
            break;
        }
        qent e = pop(&s);
        s.explored++;
        s.cur_h = e.h;
        s.cur_cost = e.cost;
        /* Second pass: when the queue ran dry, the sources skipped for this
         * graph get it after all, or the search would end "exhausted"
         * without them ever seeing its last graph. */
        for (int k = 0; k < nsrc; k++) s.sched[k].asked = false;
        for (int pass = 0; pass < 2 && !(pass == 1 && s.n > 0); pass++) {
            for (int k = 0; k < nsrc && !s.failed && !must_stop(&s); k++) {
                sched *q = &s.sched[k];
                if (q->asked || (pass == 0 && s.explored < q->next)) continue;
                q->asked = true;
                s.cur_src = k;
                q->won = false;
                if (sources[k]->propose(states[k], e.g, &s.emit, err)) s.failed = true;
                q->streak = q->won ? 0 : q->streak < 5 ? q->streak + 1 : 5;
                q->next = s.explored + (1 << q->streak);
            }
        }
        ts_graph_free(e.g);
        hist_unref(e.h);
        tick(&s, false);
    }
    if (!s.stop && !s.failed) s.stop = "exhausted";
done_start:
    ts_graph_free(start);
    hist_unref(h0);
done:
    if (o->progress) tick(&s, true);
    while (s.n > 0) drop(&s, s.n - 1);
    free(s.heap);
    free(s.sched);
    free(s.seen);
    free(s.orig.slot);
    res->explored = s.explored;
    res->generated = s.generated;
    res->duplicates = s.duplicates;
    res->seconds = ts_clock_s() - s.t0;
    res->cost_after = s.best ? s.best_cost : res->cost_before;
    res->peak_frontier_mb = (double)s.peak_bytes / (1 << 20);
    snprintf(res->stop, sizeof res->stop, "%s", s.stop ? s.stop : "error");
    res->best = s.best;
    collect(s.best_h, nsrc, res);
    res->best_hist = s.best_h;
    res->nsrc = nsrc;
    if (db && o->time_limit > 0) xcost_db_set_deadline(db, deadline0);
    /* the passes' alternatives first: the ranking times them whatever the
     * number of the search's runners-up */
    for (int i = 0; i < s.npalts; i++) {
        res->alts[res->nalts] = s.palts[i];
        res->alt_costs[res->nalts] = s.palt_cost[i];
        res->alt_hist[res->nalts++] = s.palt_h[i];
    }
    res->npass_alts = s.npalts;
    for (int i = 0; i < s.nalts; i++) {
        res->alts[res->nalts] = s.alts[i];
        res->alt_costs[res->nalts] = s.alt_cost[i];
        res->alt_hist[res->nalts++] = s.alt_h[i];
    }
    if (s.failed) {
        ts_status st = err->code ? err->code : TS_ERR_NOMEM;
        ts_drive_result_free(res);
        return st;
    }
    return TS_OK;
}

void ts_drive_result_free(ts_drive_result *res)
{
    ts_graph_free(res->best);
    free(res->names);
    free(res->gains);
    hist_unref(res->best_hist);
    for (int i = 0; i < res->nalts; i++) {
        ts_graph_free(res->alts[i]);
        hist_unref(res->alt_hist[i]);
    }
    memset(res, 0, sizeof *res);
}

void ts_drive_result_describe(const ts_drive_result *res, int i, char *buf, size_t n)
{
    const hist *h0 = i < 0 ? res->best_hist : res->alt_hist[i];
    size_t len = 0;
    buf[0] = 0;
    for (const hist *h = h0; h && len + 1 < n; h = h->parent) {
        snprintf(buf + len, n - len, "%s%s x%d", h == h0 ? "" : " < ", h->what, h->count);
        len = strlen(buf);
    }
}

void ts_drive_result_choose(ts_drive_result *res, int i)
{
    ts_graph *g = res->best;
    void *h = res->best_hist;
    double c = res->cost_after;
    res->best = res->alts[i];
    res->best_hist = res->alt_hist[i];
    res->cost_after = res->alt_costs[i];
    res->alts[i] = g;
    res->alt_hist[i] = h;
    res->alt_costs[i] = c;
    free(res->names);
    free(res->gains);
    res->names = NULL;
    res->gains = NULL;
    res->nnames = res->nsteps = 0;
    memset(res->per_source, 0, sizeof res->per_source);
    collect(res->best_hist, res->nsrc, res);
}
