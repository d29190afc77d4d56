/* Algorithm 2 of the TASO paper: a priority queue of graphs ordered by
 * measured cost; every substitution of every popped graph yields a
 * candidate; candidates cheaper than alpha x the best so far are queued
 * (alpha slightly above 1 lets the search pass through slightly worse
 * graphs to reach better ones); graphs seen before (by structural hash) are
 * skipped.  Deterministic for a given budget: rules and matches are visited
 * in a fixed order, ties in the queue broken by insertion order. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "opt/search.h"
#include "opt/passes.h"

typedef struct hist {
    int rule; /* index into the rules, or -1 - k for hand-written rewrite k */
    struct hist *parent;
    int refs;
} hist;

typedef struct qent {
    ts_graph *g;
    double cost;
    long seq;
    hist *h;
} qent;

typedef struct sctx {
    const ts_search_opts *o;
    qent *heap;
    int n, cap, max;
    uint64_t *seen;
    size_t seen_cap, seen_n;
    ts_graph *best;
    double best_cost;
    hist *best_h;
    long seq;
    int explored, generated, matches;
    double t0, last_progress, cost0;
    const ts_graph *cur;
    hist *cur_h;
    int cur_rule;
    ts_error *err;
    bool failed, out_of_time;
    ts_const_cache *cc; /* concatenated weights, shared by all candidates */
} sctx;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void hist_unref(hist *h)
{
    while (h && --h->refs == 0) {
        hist *p = h->parent;
        free(h);
        h = p;
    }
}

static hist *hist_push(hist *parent, int rule)
{
    hist *h = malloc(sizeof *h);
    if (!h) return NULL;
    h->rule = rule;
    h->parent = parent;
    h->refs = 1;
    if (parent) parent->refs++;
    return h;
}

/* n applications of one rule on top of *h (a whole-graph move counts as
 * one per rewrite it made); false out of memory, *h then unchanged. */
static bool hist_push_n(hist **h, int rule, int n)
{
    for (int i = 0; i < n; i++) {
        hist *nh = hist_push(*h, rule);
        if (!nh) return false;
        hist_unref(*h);
        *h = nh;
    }
    return true;
}

/* ---- hash set of graphs seen */

static bool seen_add(sctx *s, uint64_t h)
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

/* ---- min-heap by (cost, seq) */

static bool less(const qent *a, const qent *b) { return a->cost < b->cost || (a->cost == b->cost && a->seq < b->seq); }

static void heap_up(qent *h, int i)
{
    while (i > 0 && less(&h[i], &h[(i - 1) / 2])) {
        qent t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static void heap_down(qent *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && less(&h[l], &h[m])) m = l;
        if (r < n && less(&h[r], &h[m])) m = r;
        if (m == i) return;
        qent t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void drop_worst(sctx *s)
{
    /* the worst is among the leaves */
    int w = s->n / 2;
    for (int i = s->n / 2; i < s->n; i++)
        if (less(&s->heap[w], &s->heap[i])) w = i;
    ts_graph_free(s->heap[w].g);
    hist_unref(s->heap[w].h);
    s->heap[w] = s->heap[--s->n];
    if (w < s->n) {
        heap_up(s->heap, w);
        heap_down(s->heap, s->n, w);
    }
}

static bool push(sctx *s, ts_graph *g, double cost, hist *h)
{
    if (s->n == s->max) drop_worst(s);
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 256;
        qent *t = realloc(s->heap, sizeof *t * (size_t)cap);
        if (!t) return false;
        s->heap = t;
        s->cap = cap;
    }
    s->heap[s->n] = (qent){.g = g, .cost = cost, .seq = s->seq++, .h = h};
    heap_up(s->heap, s->n++);
    return true;
}

static void progress(sctx *s, bool final)
{
    double t = now_s();
    if (!s->o->progress || (!final && t - s->last_progress < 0.2)) return;
    s->last_progress = t;
    fprintf(stderr, "\roptimize: best %.3f ms (from %.3f)  explored %d  generated %d  queue %d  %.1f s   %s",
            s->best_cost, s->cost0, s->explored, s->generated, s->n, t - s->t0, final ? "\n" : "");
    fflush(stderr);
}

static bool time_up(sctx *s)
{
    if (s->o->time_limit > 0 && now_s() - s->t0 > s->o->time_limit) s->out_of_time = true;
    return s->out_of_time;
}

/* Queues candidate ng (owned) made from the current graph by rule cur_rule. */
static bool consider(sctx *s, ts_graph *ng)
{
    if (!seen_add(s, ts_graph_hash(ng))) {
        ts_graph_free(ng);
        return true;
    }
    s->generated++;
    double c = ts_cost_graph(s->o->db, ng, true);
    hist *h = hist_push(s->cur_h, s->cur_rule);
    if (!h) {
        ts_graph_free(ng);
        s->failed = true;
        ts_error_set(s->err, TS_ERR_NOMEM, "out of memory in search");
        return false;
    }
    if (c < s->best_cost) {
        ts_graph_free(s->best);
        s->best = ts_graph_copy(ng);
        s->best_cost = c;
        hist_unref(s->best_h);
        s->best_h = h;
        h->refs++;
        if (!s->best) {
            s->failed = true;
            ts_error_set(s->err, TS_ERR_NOMEM, "out of memory in search");
        }
    }
    if (c < s->o->alpha * s->best_cost) {
        if (!push(s, ng, c, h)) {
            ts_graph_free(ng);
            hist_unref(h);
        }
    } else {
        ts_graph_free(ng);
        hist_unref(h);
    }
    progress(s, false);
    return !s->failed;
}

static bool on_match(const ts_match *m, void *ctx)
{
    sctx *s = ctx;
    ts_graph *ng = NULL;
    s->matches++;
    if (time_up(s)) return false;
    if (ts_rule_apply_cached(s->cur, &s->o->rules[s->cur_rule], m, s->cc, &ng, s->err)) {
        s->failed = true;
        return false;
    }
    if (!ng) return true;
    return consider(s, ng);
}

/* Hand-written moves: whole-graph rewrites, each an exhaustive application
 * of a proved rule (opt/passes.h).  Numbered -1 - k in the history. */
enum { MOVE_BN, MOVE_CSE, MOVE_SUMS, MOVE_SIBLINGS, MOVE_SUMS_SIBLINGS, MOVE_STACK, NMOVES };
static const char *const HAND_NAMES[] = {"fold-conv-batchnorm", "cse", "merge-matmul-sums", "merge-siblings",
                                         "merge-matmul-sums+siblings", "stack-shared-weight-matmuls"};

static int apply_move(sctx *s, int k, ts_graph *g, int value)
{
    switch (k) {
    case MOVE_BN: {
        int n = ts_fold_conv_bn(g, s->err);
        if (n > 0 && ts_graph_fold_constants(g, s->err) < 0) return -1;
        return n;
    }
    case MOVE_CSE: return ts_cse(g, s->err);
    case MOVE_SUMS: return ts_merge_matmul_sums(g, s->cc, s->err);
    case MOVE_SUMS_SIBLINGS: {
        /* merging the sums pays mostly through the sibling merge it enables
         * (the Concat [x h] becomes the shared input) */
        int n = ts_merge_matmul_sums(g, s->cc, s->err), m = n > 0 ? ts_merge_siblings(g, -1, s->cc, s->err) : 0;
        return n < 0 || m < 0 ? -1 : m > 0 ? n + m : 0;
    }
    case MOVE_STACK: return ts_merge_shared_weights(g, s->cc, s->err);
    default: return ts_merge_siblings(g, value, s->cc, s->err);
    }
}

/* Greedy phase: each move applied to the whole graph is kept when the cost
 * model says the graph got cheaper; repeated until nothing improves.  One
 * whole-graph move stands for many rule applications (merging 8 MatMuls is
 * 7 pairwise merges, each of which Algorithm 2 would have had to cost and
 * queue), so the backtracking search starts from a much better graph. */
static ts_status greedy(sctx *s, ts_graph **cur, double *cost, hist **h)
{
    for (int round = 0; round < 8; round++) {
        /* each round keeps the cheapest move (moves overlap: the sums
         * merge and the sibling merge compete for the same MatMuls) */
        ts_graph *best = NULL;
        double best_c = *cost;
        int best_k = -1, best_n = 0;
        for (int k = 0; k < NMOVES && !time_up(s); k++) {
            ts_graph *ng = ts_graph_copy(*cur);
            if (!ng) {
                ts_graph_free(best);
                return ts_error_set(s->err, TS_ERR_NOMEM, "out of memory in search");
            }
            int n = apply_move(s, k, ng, -1);
            if (n < 0) {
                ts_graph_free(ng);
                /* a move that does not fit (a shape it cannot take) is skipped */
                if (s->err->code == TS_ERR_NOMEM) {
                    ts_graph_free(best);
                    return s->err->code;
                }
                *s->err = (ts_error){0};
                continue;
            }
            double c = n > 0 ? ts_cost_graph(s->o->db, ng, true) : 0;
            if (getenv("TSOPT_SEARCH_DEBUG")) {
                /* a debugging aid: each move's graph, for `tsopt profile` */
                fprintf(stderr, "greedy: %s x%d: cost %.3f -> %.3f ms\n", HAND_NAMES[k], n, *cost, c);
                char path[512];
                ts_error e2 = {0};
                snprintf(path, sizeof path, "%s.r%d.%s.onnx", getenv("TSOPT_SEARCH_DEBUG"), round, HAND_NAMES[k]);
                if (n > 0 && strlen(getenv("TSOPT_SEARCH_DEBUG")) > 1) ts_onnx_save(ng, path, &e2);
            }
            if (n == 0 || !(c < best_c)) {
                ts_graph_free(ng);
                continue;
            }
            ts_graph_free(best);
            best = ng;
            best_c = c;
            best_k = k;
            best_n = n;
        }
        if (!best) break;
        seen_add(s, ts_graph_hash(best));
        if (!hist_push_n(h, -1 - best_k, best_n)) {
            ts_graph_free(best);
            return ts_error_set(s->err, TS_ERR_NOMEM, "out of memory in search");
        }
        ts_graph_free(*cur);
        *cur = best;
        *cost = best_c;
    }
    return TS_OK;
}

/* Per-value sibling merges as candidates of Algorithm 2: where merging
 * everything at once was not cheaper, merging at one input may be. */
static void sibling_moves(sctx *s, const ts_graph *g)
{
    int vals[256];
    int nv = ts_merge_candidates(g, vals, 256);
    s->cur_rule = -1 - MOVE_SIBLINGS;
    for (int i = 0; i < nv && !s->failed && !time_up(s); i++) {
        ts_graph *ng = ts_graph_copy(g);
        if (!ng) {
            s->failed = true;
            ts_error_set(s->err, TS_ERR_NOMEM, "out of memory in search");
            return;
        }
        int n = ts_merge_siblings(ng, vals[i], s->cc, s->err);
        if (n <= 0) {
            ts_graph_free(ng);
            if (n < 0 && s->err->code == TS_ERR_NOMEM) s->failed = true;
            else *s->err = (ts_error){0};
            continue;
        }
        consider(s, ng);
    }
}

static int cmp_applied(const void *a, const void *b)
{
    const ts_search_applied *x = a, *y = b;
    return x->count != y->count ? y->count - x->count : strcmp(x->name, y->name);
}

ts_status ts_search_run(const ts_graph *g0, const ts_search_opts *o, ts_search_result *res, ts_error *err)
{
    memset(res, 0, sizeof *res);
    sctx s = {.o = o, .err = err, .t0 = now_s(), .cc = ts_const_cache_new()};
    s.max = o->max_queue > 0 ? o->max_queue : 4096;
    ts_status st = TS_OK;
    res->cost_before = ts_cost_graph(o->db, g0, true);

    ts_graph *start = ts_graph_copy(g0);
    if (!start || !s.cc) {
        ts_graph_free(start);
        ts_const_cache_free(s.cc);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory copying the graph");
    }
    hist *h0 = NULL;
    s.cost0 = res->cost_before;
    double c0 = res->cost_before;
    /* BatchNormalization after a conv is folded first, whatever the cost
     * model says: the runtime fuses the pair anyway (the costs differ only
     * by noise), and only a folded conv matches a rule's conv (NasNet-A's
     * branch sums are Add(BN(conv), BN(conv)), which no ewadd(conv, conv)
     * matches unfolded) */
    ts_graph *folded = ts_graph_copy(start);
    int nf = folded ? apply_move(&s, MOVE_BN, folded, -1) : -1;
    if (nf > 0) {
        ts_graph_free(start);
        start = folded;
        c0 = ts_cost_graph(o->db, start, true);
        if (!hist_push_n(&h0, -1 - MOVE_BN, nf)) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory in search");
    } else {
        ts_graph_free(folded);
        if (err->code == TS_ERR_NOMEM || !folded) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory in search");
        else *err = (ts_error){0};
    }
    if (st || greedy(&s, &start, &c0, &h0)) {
        ts_graph_free(start);
        hist_unref(h0);
        ts_const_cache_free(s.cc);
        return err->code;
    }
    res->greedy_seconds = now_s() - s.t0;
    s.best = ts_graph_copy(start);
    s.best_cost = c0;
    s.best_h = h0;
    if (h0) h0->refs++;
    seen_add(&s, ts_graph_hash(start));
    if (!s.best || !push(&s, start, c0, h0)) {
        ts_graph_free(start);
        hist_unref(h0);
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory in search");
        goto done;
    }
    while (s.n > 0 && !s.failed && !time_up(&s) && (o->budget <= 0 || s.explored < o->budget)) {
        qent e = s.heap[0];
        s.heap[0] = s.heap[--s.n];
        heap_down(s.heap, s.n, 0);
        s.explored++;
        ts_match_index ix;
        if (ts_match_index_build(&ix, e.g, err)) {
            s.failed = true;
        } else {
            s.cur = e.g;
            s.cur_h = e.h;
            sibling_moves(&s, e.g);
            for (int r = 0; r < o->nrules && !s.failed && !s.out_of_time; r++) {
                s.cur_rule = r;
                ts_match_all(&ix, &o->rules[r], on_match, &s);
            }
            ts_match_index_free(&ix);
        }
        ts_graph_free(e.g);
        hist_unref(e.h);
        progress(&s, false);
    }
    if (s.failed) st = err->code ? err->code : TS_ERR_NOMEM;
    progress(&s, true);
done:
    for (int i = 0; i < s.n; i++) {
        ts_graph_free(s.heap[i].g);
        hist_unref(s.heap[i].h);
    }
    free(s.heap);
    free(s.seen);
    ts_const_cache_free(s.cc);
    res->explored = s.explored;
    res->generated = s.generated;
    res->matches = s.matches;
    res->seconds = now_s() - s.t0;
    res->cost_after = s.best_cost;
    res->best = s.best;
    /* the path to the best graph, counted per substitution */
    int cap = 0;
    for (hist *h = s.best_h; h; h = h->parent) cap++;
    res->nsteps = cap;
    res->applied = calloc((size_t)cap + 1, sizeof *res->applied);
    if (res->applied)
        for (hist *h = s.best_h; h; h = h->parent) {
            const char *name = h->rule >= 0 ? o->rules[h->rule].name : HAND_NAMES[-1 - h->rule];
            int k = 0;
            while (k < res->napplied && strcmp(res->applied[k].name, name)) k++;
            if (k == res->napplied) res->applied[res->napplied++] = (ts_search_applied){name, 0};
            res->applied[k].count++;
        }
    if (res->applied) qsort(res->applied, (size_t)res->napplied, sizeof *res->applied, cmp_applied);
    hist_unref(s.best_h);
    if (st) {
        ts_search_result_free(res);
        return st;
    }
    return TS_OK;
}

void ts_search_result_free(ts_search_result *res)
{
    ts_graph_free(res->best);
    free(res->applied);
    memset(res, 0, sizeof *res);
}
