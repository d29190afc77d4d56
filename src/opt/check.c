/* The final check: the optimized graph against the original, run by the
 * fast runtime -- as whole models when both can run, and stretch by
 * stretch between opaque nodes when there are any (so models tsopt cannot
 * run as a whole are checked too); the rewritten regions are counted by a
 * name-based diff of the two graphs (check.h, docs/onnx-models.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ir/ir.h"
#include "opt/check.h"
#include "ops/opaque.h"
#include "util/clock.h"
#include "util/union_find.h"

/* The check's deadline, polled before each plan is built and run (a run
 * cannot be stopped halfway): as the driver does with a graph's costing, a
 * run that would end past the deadline, judged by the longest run so far,
 * is not started.  end 0: no deadline. */
typedef struct check_clock {
    double end, longest;
    bool *out_of_time;
} check_clock;

static bool late(const check_clock *c)
{
    if (c->end > 0 && ts_clock_s() + c->longest > c->end) *c->out_of_time = true;
    return *c->out_of_time;
}

/* Runs g with the fast runtime on inputs; outputs allocated here.  Past
 * clk's deadline (clk may be NULL) nothing runs: *clk->out_of_time is
 * then set and the outputs are left NULL. */
static ts_status run_plan(check_clock *clk, const ts_graph *g, ts_tensor *const *in, ts_tensor **out, ts_error *err)
{
    if (clk && late(clk)) return TS_OK;
    double t0 = ts_clock_s();
    ts_plan *p = NULL;
    ts_plan_opts o = {0};
    for (int i = 0; i < g->noutputs; i++) {
        const ts_value *v = &g->values[g->outputs[i]];
        if (!(out[i] = ts_tensor_new(v->dtype, &v->shape, err))) return err->code;
    }
    ts_status st = ts_plan_build(g, &o, &p, err);
    if (!st) st = ts_plan_run(p, in, out, err);
    ts_plan_free(p);
    if (clk) clk->longest = fmax(clk->longest, ts_clock_s() - t0);
    return st;
}

/* Scaled difference of b from a (the original's): <= 1 passes. */
static double compare_one(const ts_tensor *a, const ts_tensor *b)
{
    if (a->dtype != b->dtype || !ts_shape_eq(&a->shape, &b->shape)) return INFINITY;
    if (!ts_dtype_is_float(a->dtype))
        return a->nbytes != b->nbytes || (a->nbytes && memcmp(a->data, b->data, a->nbytes)) ? INFINITY : 0;
    int64_t n = ts_tensor_numel(a);
    double scale = 1.0, worst = 0;
    for (int64_t k = 0; k < n; k++) {
        double x = ts_tensor_get_f64(a, k);
        if (isfinite(x)) scale = fmax(scale, fabs(x));
    }
    for (int64_t k = 0; k < n; k++) {
        double x = ts_tensor_get_f64(a, k), y = ts_tensor_get_f64(b, k);
        if (x == y || (isnan(x) && isnan(y))) continue; /* equal infinities, both NaN */
        double e = fabs(x - y) / (1e-4 * scale + 1e-3 * fabs(x));
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

static void unref_all(ts_tensor **t, int n)
{
    for (int i = 0; t && i < n; i++) ts_tensor_unref(t[i]);
    free(t);
}

/* ------------------------------------------------------- the whole model */

static ts_status check_whole(const ts_graph *g0, const ts_graph *g1, uint64_t seed, ts_tensor *const *given,
                             double *worst, check_clock *clk, ts_error *err)
{
    int nin = g0->ninputs, nout = g0->noutputs;
    ts_tensor **in = calloc((size_t)nin + 1, sizeof *in), **o0 = calloc((size_t)nout + 1, sizeof *o0),
              **o1 = calloc((size_t)nout + 1, sizeof *o1);
    ts_status st = TS_OK;
    if (!in || !o0 || !o1) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < nin && !st; i++) {
        const ts_value *v = &g0->values[g0->inputs[i]];
        if (given) in[i] = ts_tensor_ref(given[i]);
        else if (!(in[i] = ts_tensor_new(v->dtype, &v->shape, err)))
            st = err->code;
        else if (ts_dtype_is_float(v->dtype))
            ts_tensor_fill_random(in[i], &rng, -1, 1);
    }
    if (!st) st = run_plan(clk, g0, in, o0, err);
    if (!st) st = run_plan(clk, g1, in, o1, err);
    *worst = 0;
    bool ran = !st && !(clk && *clk->out_of_time);
    for (int i = 0; ran && i < nout; i++) *worst = fmax(*worst, compare_one(o0[i], o1[i]));
    unref_all(in, nin);
    unref_all(o0, nout);
    unref_all(o1, nout);
    return st;
}

ts_status ts_opt_check(const ts_graph *g0, const ts_graph *g1, uint64_t seed, double *worst, ts_error *err)
{
    if (g1->ninputs != g0->ninputs || g1->noutputs != g0->noutputs)
        return ts_error_set(err, TS_ERR_INVALID, "optimized graph has different inputs/outputs");
    return check_whole(g0, g1, seed, NULL, worst, NULL, err);
}

/* ------------------------------------------------------------- regions */

typedef struct rctx {
    const ts_graph *g0, *g1;
    int *pair1;   /* g1 node -> the g0 node it is (kept), or -1 (rewritten: in a region) */
    int *pair0;   /* g0 node -> g1 node, or -1 (replaced: in a region) */
    int *key0;    /* g0 value -> the g1 value it is (kept values and graph inputs), or -1 */
    int *bpair;   /* boundary pairs (v1, v0), 2 per pair */
    int nb;
} rctx;

typedef struct named {
    const char *name;
    int node;
} named;

static int cmp_named(const void *a, const void *b) { return strcmp(((const named *)a)->name, ((const named *)b)->name); }

static bool same_tensor(const ts_tensor *a, const ts_tensor *b)
{
    return a == b || (a->dtype == b->dtype && ts_shape_eq(&a->shape, &b->shape) && a->nbytes == b->nbytes &&
                      (!a->nbytes || !memcmp(a->data, b->data, a->nbytes)));
}

/* Whether g1's node n1 computes what g0's node n0 does from corresponding
 * inputs: operator, attributes, weights, and the outputs' types. */
static bool same_node(const ts_graph *g0, int n0, const ts_graph *g1, int n1)
{
    const ts_node *a = &g0->nodes[n0], *b = &g1->nodes[n1];
    if (a->op != b->op || a->ninputs != b->ninputs || a->noutputs != b->noutputs) return false;
    if (a->op->attr_size && memcmp(a->attrs, b->attrs, a->op->attr_size)) return false;
    for (int j = 0; j < a->ninputs; j++) {
        int x = a->inputs[j], y = b->inputs[j];
        if ((x < 0) != (y < 0)) return false;
        if (x < 0) continue;
        const ts_tensor *tx = g0->values[x].constant, *ty = g1->values[y].constant;
        if (!tx != !ty || (tx && !same_tensor(tx, ty))) return false;
    }
    for (int o = 0; o < a->noutputs; o++) {
        const ts_value *x = &g0->values[a->outputs[o]], *y = &g1->values[b->outputs[o]];
        if (x->dtype != y->dtype || !ts_shape_eq(&x->shape, &y->shape)) return false;
    }
    return true;
}

/* The g1 value that g0's value v0 is when it is kept (produced by a kept
 * node, or a graph input), else -1. */
static int kept_key(const rctx *c, int v0)
{
    const ts_value *v = &c->g0->values[v0];
    if (v->constant) return -1;
    if (v->producer < 0) {
        for (int i = 0; i < c->g0->ninputs; i++)
            if (c->g0->inputs[i] == v0) return c->g1->inputs[i];
        return -1;
    }
    int n1 = c->pair0[v->producer];
    return n1 >= 0 ? c->g1->nodes[n1].outputs[v->producer_slot] : -1;
}

static bool kept1(const rctx *c, int v1)
{
    const ts_value *v = &c->g1->values[v1];
    return !v->constant && (v->producer < 0 || c->pair1[v->producer] >= 0);
}

/* Pairs nodes by name, then un-pairs those that read, at some input, kept
 * values that are not each other (a rewiring among kept nodes: only the
 * whole graph could judge it) until every kept node is consistent. */
static ts_status pair_nodes(rctx *c, ts_error *err)
{
    const ts_graph *g0 = c->g0, *g1 = c->g1;
    named *idx = malloc(sizeof *idx * ((size_t)g0->nnodes + 1));
    if (!idx) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    int m = 0;
    for (int i = 0; i < g0->nnodes; i++)
        if (!g0->nodes[i].dead) idx[m++] = (named){g0->nodes[i].name, i};
    qsort(idx, (size_t)m, sizeof *idx, cmp_named);
    for (int i = 0; i < g0->nnodes; i++) c->pair0[i] = -1;
    for (int n1 = 0; n1 < g1->nnodes; n1++) {
        c->pair1[n1] = -1;
        if (g1->nodes[n1].dead) continue;
        const char *name = g1->nodes[n1].name;
        int lo = 0, hi = m - 1, at = -1;
        while (lo <= hi) {
            int mid = (lo + hi) / 2, k = strcmp(idx[mid].name, name);
            if (!k) {
                at = mid;
                break;
            }
            if (k < 0) lo = mid + 1;
            else hi = mid - 1;
        }
        if (at < 0) continue;
        bool unique = (at == 0 || strcmp(idx[at - 1].name, name)) && (at == m - 1 || strcmp(idx[at + 1].name, name));
        int n0 = idx[at].node;
        if (unique && c->pair0[n0] < 0 && same_node(g0, n0, g1, n1)) {
            c->pair1[n1] = n0;
            c->pair0[n0] = n1;
        }
    }
    free(idx);
    /* Where a kept node (or a graph output) reads different values in the
     * two graphs, both must come out of regions computed from the same
     * inputs: a kept node producing one of them is un-kept (its region
     * then computes it).  CSE's survivor is the example: the consumers of
     * the duplicate it replaced now read it.  And the regions of the two
     * sides must start from the same values: a kept value one side's
     * regions read and the other's do not (they compute it another way)
     * has its producer un-kept.  Until nothing changes. */
    char *read1 = malloc((size_t)g1->nvalues + 1), *read0 = malloc((size_t)g0->nvalues + 1);
    if (!read1 || !read0) {
        free(read1);
        free(read0);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int s = 0; s < 2; s++) {
            const ts_graph *g = s ? g0 : g1;
            const int *pair = s ? c->pair0 : c->pair1;
            char *rd = s ? read0 : read1;
            memset(rd, 0, (size_t)g->nvalues + 1);
            for (int i = 0; i < g->nnodes; i++)
                for (int j = 0; !g->nodes[i].dead && pair[i] < 0 && j < g->nodes[i].ninputs; j++)
                    if (g->nodes[i].inputs[j] >= 0) rd[g->nodes[i].inputs[j]] = 1;
        }
        for (int s = 0; s < 2; s++) {
            const ts_graph *g = s ? g0 : g1, *o = s ? g1 : g0;
            int *pair = s ? c->pair0 : c->pair1, *opair = s ? c->pair1 : c->pair0;
            const char *rd = s ? read0 : read1, *ord = s ? read1 : read0;
            for (int v = 0; v < g->nvalues; v++) {
                int p = g->values[v].producer;
                if (!rd[v] || g->values[v].constant || p < 0 || pair[p] < 0) continue;
                int ov = o->nodes[pair[p]].outputs[g->values[v].producer_slot];
                if (ord[ov]) continue;
                opair[pair[p]] = -1;
                pair[p] = -1;
                changed = true;
            }
        }
        for (int n1 = 0; n1 <= g1->nnodes; n1++) {
            bool outs = n1 == g1->nnodes;
            int n0 = outs ? -1 : c->pair1[n1];
            if (!outs && n0 < 0) continue;
            int n = outs ? g1->noutputs : g1->nodes[n1].ninputs;
            for (int j = 0; j < n; j++) {
                int v1 = outs ? g1->outputs[j] : g1->nodes[n1].inputs[j];
                int v0 = outs ? g0->outputs[j] : g0->nodes[n0].inputs[j];
                if (v1 < 0 || v0 < 0 || kept_key(c, v0) == v1) continue;
                int p1 = g1->values[v1].constant ? -1 : g1->values[v1].producer;
                int p0 = g0->values[v0].constant ? -1 : g0->values[v0].producer;
                if (p1 >= 0 && c->pair1[p1] >= 0) {
                    c->pair0[c->pair1[p1]] = -1;
                    c->pair1[p1] = -1;
                    changed = true;
                }
                if (p0 >= 0 && c->pair0[p0] >= 0) {
                    c->pair1[c->pair0[p0]] = -1;
                    c->pair0[p0] = -1;
                    changed = true;
                }
            }
        }
    }
    free(read1);
    free(read0);
    return TS_OK;
}

/* Keeps only the opaque nodes, paired by name with the original's (the
 * optimizer never rewrites them); fails when one cannot be. */
static ts_status pair_opaque(rctx *c, ts_error *err)
{
    const ts_graph *g0 = c->g0, *g1 = c->g1;
    for (int i = 0; i < g0->nnodes; i++) c->pair0[i] = -1;
    for (int n1 = 0; n1 < g1->nnodes; n1++) {
        c->pair1[n1] = -1;
        const ts_node *b = &g1->nodes[n1];
        if (b->dead || !ts_node_holds_opaque(b)) continue; /* a control-flow node with one in a body too */
        int n0 = -1, same = 0;
        for (int i = 0; i < g0->nnodes; i++)
            if (!g0->nodes[i].dead && !strcmp(g0->nodes[i].name, b->name)) {
                n0 = i;
                same++;
            }
        char what[256];
        if (same != 1 || !same_node(g0, n0, g1, n1))
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "opaque node '%s' (%s) is not the original's", b->name,
                                ts_opaque_what(b, what, sizeof what));
        c->pair1[n1] = n0;
        c->pair0[n0] = n1;
    }
    for (int i = 0; i < g0->nnodes; i++)
        if (!g0->nodes[i].dead && ts_node_holds_opaque(&g0->nodes[i]) && c->pair0[i] < 0) {
            char what[256];
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "opaque node '%s' (%s) is missing from the optimized graph",
                                g0->nodes[i].name, ts_opaque_what(&g0->nodes[i], what, sizeof what));
        }
    return TS_OK;
}

/* The boundary pairs: every input of a kept node and every graph output
 * where g1 and g0 read values that are not the same kept value. */
static ts_status boundary(rctx *c, ts_error *err)
{
    const ts_graph *g0 = c->g0, *g1 = c->g1;
    size_t cap = (size_t)g1->noutputs + 1;
    for (int n1 = 0; n1 < g1->nnodes; n1++)
        if (c->pair1[n1] >= 0) cap += (size_t)g1->nodes[n1].ninputs;
    if (!(c->bpair = malloc(sizeof(int) * 2 * cap))) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int n1 = 0; n1 <= g1->nnodes; n1++) {
        bool outs = n1 == g1->nnodes;
        if (!outs && c->pair1[n1] < 0) continue;
        int n = outs ? g1->noutputs : g1->nodes[n1].ninputs;
        for (int j = 0; j < n; j++) {
            int v1 = outs ? g1->outputs[j] : g1->nodes[n1].inputs[j];
            int v0 = outs ? g0->outputs[j] : g0->nodes[c->pair1[n1]].inputs[j];
            /* a kept node's constant inputs are its own (same_node); a
             * graph output folded to a constant is compared as one */
            if (v1 < 0 || (!outs && g1->values[v1].constant)) continue;
            if (kept_key(c, v0) == v1) continue;
            bool dup = false;
            for (int k = 0; k < c->nb && !dup; k++) dup = c->bpair[2 * k] == v1 && c->bpair[2 * k + 1] == v0;
            if (dup) continue;
            c->bpair[2 * c->nb] = v1;
            c->bpair[2 * c->nb + 1] = v0;
            c->nb++;
        }
    }
    return TS_OK;
}

/* Regions: rewritten nodes joined through the values they share and
 * through the boundary pairs that link g1's side to g0's (a union-find over
 * g1's nodes, then g0's, offset). */
static int count_regions(const rctx *c)
{
    const ts_graph *g0 = c->g0, *g1 = c->g1;
    int n1 = g1->nnodes, n = g1->nnodes + g0->nnodes;
    int *up = malloc(sizeof(int) * ((size_t)n + 1));
    if (!up) return 0;
    for (int i = 0; i < n; i++) up[i] = i;
    for (int s = 0; s < 2; s++) {
        const ts_graph *g = s ? g0 : g1;
        const int *pair = s ? c->pair0 : c->pair1;
        for (int i = 0; i < g->nnodes; i++) {
            if (g->nodes[i].dead || pair[i] >= 0) continue;
            for (int j = 0; j < g->nodes[i].ninputs; j++) {
                int v = g->nodes[i].inputs[j], p = v >= 0 ? g->values[v].producer : -1;
                if (p >= 0 && pair[p] < 0) ts_uf_join(up, s * n1 + i, s * n1 + p);
            }
        }
    }
    for (int k = 0; k < c->nb; k++) {
        int p1 = g1->values[c->bpair[2 * k]].producer, p0 = g0->values[c->bpair[2 * k + 1]].producer;
        bool r1 = p1 >= 0 && c->pair1[p1] < 0, r0 = p0 >= 0 && c->pair0[p0] < 0;
        if (r1 && r0) ts_uf_join(up, p1, n1 + p0);
    }
    int regions = 0;
    for (int i = 0; i < n; i++) {
        bool region = i < n1 ? !g1->nodes[i].dead && c->pair1[i] < 0 : !g0->nodes[i - n1].dead && c->pair0[i - n1] < 0;
        regions += region && ts_uf_root(up, i) == i;
    }
    free(up);
    return regions;
}

/* The rewritten nodes of one side as a graph of their own: kept values
 * they read become inputs (ids into the side's graph in in_vals), the
 * boundary values they produce its outputs (out_vals). */
static ts_graph *side_graph(const ts_graph *g, const int *pair, const int *outs, int nouts, int **in_vals, int *nin,
                            ts_error *err)
{
    ts_graph *s = ts_graph_copy(g);
    char *is_in = calloc((size_t)g->nvalues + 1, 1);
    int *ins = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    int *outv = malloc(sizeof(int) * ((size_t)nouts + 1));
    if (!s || !is_in || !ins || !outv) {
        ts_graph_free(s);
        free(is_in);
        free(ins);
        free(outv);
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int n = 0;
    for (int i = 0; i < s->nnodes; i++) {
        ts_node *nd = &s->nodes[i];
        if (nd->dead) continue;
        if (pair[i] >= 0) {
            nd->dead = true;
            continue;
        }
        for (int j = 0; j < nd->ninputs; j++) {
            int v = nd->inputs[j];
            if (v < 0 || s->values[v].constant || is_in[v]) continue;
            int p = s->values[v].producer;
            if (p < 0 || pair[p] >= 0) {
                is_in[v] = 1;
                ins[n++] = v;
            }
        }
    }
    for (int k = 0; k < n; k++) s->values[ins[k]].producer = -1;
    free(s->inputs);
    s->inputs = malloc(sizeof(int) * ((size_t)n + 1));
    int no = 0;
    for (int k = 0; k < nouts; k++) {
        bool dup = false;
        for (int q = 0; q < no && !dup; q++) dup = outv[q] == outs[k];
        if (!dup) outv[no++] = outs[k];
    }
    free(s->outputs);
    s->outputs = outv;
    s->noutputs = no;
    ts_status st = s->inputs ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!st) {
        memcpy(s->inputs, ins, sizeof(int) * (size_t)n);
        s->ninputs = n;
    }
    free(is_in);
    if (st) {
        free(ins);
        ts_graph_free(s);
        return NULL;
    }
    /* ids before compaction, for the caller to find each input's data */
    *in_vals = ins;
    *nin = n;
    return s;
}

static ts_status check_regions(const ts_graph *g0, const ts_graph *g1, uint64_t seed, ts_check_result *r,
                               check_clock *clk, ts_error *err)
{
    rctx c = {.g0 = g0, .g1 = g1};
    c.pair1 = malloc(sizeof(int) * ((size_t)g1->nnodes + 1));
    c.pair0 = malloc(sizeof(int) * ((size_t)g0->nnodes + 1));
    ts_tensor **data = calloc((size_t)g1->nvalues + 1, sizeof *data); /* per kept g1 value: its random tensor */
    ts_graph *s1 = NULL, *s0 = NULL;
    int *in1 = NULL, *in0 = NULL, *out1 = NULL, *out0 = NULL, nin1 = 0, nin0 = 0, nout1 = 0, nout0 = 0;
    ts_tensor **x1 = NULL, **x0 = NULL, **y1 = NULL, **y0 = NULL;
    ts_status st = c.pair1 && c.pair0 && data ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!st) st = pair_nodes(&c, err);
    if (!st) st = boundary(&c, err); /* joins each region to what it replaced, for the count */
    if (st) goto done;
    r->regions = count_regions(&c);
    free(c.bpair);
    c.bpair = NULL;
    c.nb = 0;
    /* What runs: a model tsopt can run is checked whole (ts_opt_check_all);
     * around opaque nodes, every stretch between them, the graph's inputs
     * and outputs is run on both sides from the same random tensors at
     * the opaque nodes' outputs and compared at their inputs and the
     * graph's outputs.  Cutting only at opaque nodes (never rewritten)
     * keeps every compared value a function of the same free inputs on
     * both sides, whatever the rewrites did in between. */
    if (ts_graph_first_opaque(g0) < 0 && ts_graph_first_opaque(g1) < 0) goto done;
    if ((st = pair_opaque(&c, err))) goto done;
    if ((st = boundary(&c, err))) goto done;
    r->boundary = c.nb;
    if (!c.nb) goto done;
    /* the region outputs of each side: boundary values its rewritten nodes produce */
    out1 = malloc(sizeof(int) * ((size_t)c.nb + 1));
    out0 = malloc(sizeof(int) * ((size_t)c.nb + 1));
    if (!out1 || !out0) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < c.nb; k++) {
        int v1 = c.bpair[2 * k], v0 = c.bpair[2 * k + 1];
        if (!kept1(&c, v1) && !g1->values[v1].constant) out1[nout1++] = v1;
        if (kept_key(&c, v0) < 0 && !g0->values[v0].constant) out0[nout0++] = v0;
    }
    if (nout1 && !(s1 = side_graph(g1, c.pair1, out1, nout1, &in1, &nin1, err))) st = err->code;
    if (!st && nout0 && !(s0 = side_graph(g0, c.pair0, out0, nout0, &in0, &nin0, err))) st = err->code;
    if (st) goto done;
    if ((s1 && ts_graph_check_runnable(s1, err)) || (s0 && ts_graph_check_runnable(s0, err))) {
        st = ts_error_prefix(err, "cannot check a rewritten region");
        goto done;
    }
    /* one seeded random tensor per kept value, shared by both sides */
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 7;
    for (int side = 0; side < 2 && !st; side++) {
        const int *ins = side ? in0 : in1;
        int nin = side ? nin0 : nin1;
        for (int k = 0; k < nin && !st; k++) {
            int v1 = side ? kept_key(&c, ins[k]) : ins[k];
            if (v1 < 0 || data[v1]) continue;
            const ts_value *v = &g1->values[v1];
            if (!(data[v1] = ts_tensor_new(v->dtype, &v->shape, err))) st = err->code;
            else if (ts_dtype_is_float(v->dtype))
                ts_tensor_fill_random(data[v1], &rng, -1, 1);
        }
    }
    for (int k = 0; k < c.nb && !st; k++) { /* kept values compared as they are (CSE's survivor) */
        int v1 = c.bpair[2 * k];
        if (g1->values[v1].constant || !kept1(&c, v1) || data[v1]) continue;
        const ts_value *v = &g1->values[v1];
        if (!(data[v1] = ts_tensor_new(v->dtype, &v->shape, err))) st = err->code;
        else if (ts_dtype_is_float(v->dtype))
            ts_tensor_fill_random(data[v1], &rng, -1, 1);
    }
    if (st) goto done;
    x1 = calloc((size_t)nin1 + 1, sizeof *x1);
    x0 = calloc((size_t)nin0 + 1, sizeof *x0);
    if (!x1 || !x0) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* each run gets copies: a plan may reuse a dying input's buffer */
    for (int k = 0; k < nin1 && !st; k++)
        if (!(x1[k] = ts_tensor_clone(data[in1[k]], err))) st = err->code;
    for (int k = 0; k < nin0 && !st; k++)
        if (!(x0[k] = ts_tensor_clone(data[kept_key(&c, in0[k])], err))) st = err->code;
    if (st) goto done;
    if (s1) {
        ts_graph_compact(s1);
        if (!(y1 = calloc((size_t)s1->noutputs + 1, sizeof *y1))) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        else st = run_plan(clk, s1, x1, y1, err);
    }
    if (!st && s0) {
        ts_graph_compact(s0);
        if (!(y0 = calloc((size_t)s0->noutputs + 1, sizeof *y0))) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        else st = run_plan(clk, s0, x0, y0, err);
    }
    if (st) {
        ts_error_prefix(err, "checking the rewritten regions");
        goto done;
    }
    if (r->out_of_time) goto done;
    for (int k = 0; k < c.nb; k++) {
        int v1 = c.bpair[2 * k], v0 = c.bpair[2 * k + 1];
        const ts_tensor *a = NULL, *b = NULL;
        /* a region's outputs by name: names are unique and compaction keeps them */
        if (g1->values[v1].constant)
            b = g1->values[v1].constant;
        else if (kept1(&c, v1))
            b = data[v1];
        else
            for (int q = 0; s1 && q < s1->noutputs && !b; q++)
                if (!strcmp(s1->values[s1->outputs[q]].name, g1->values[v1].name)) b = y1[q];
        int k0 = kept_key(&c, v0);
        if (g0->values[v0].constant)
            a = g0->values[v0].constant;
        else if (k0 >= 0)
            a = data[k0];
        else
            for (int q = 0; s0 && q < s0->noutputs && !a; q++)
                if (!strcmp(s0->values[s0->outputs[q]].name, g0->values[v0].name)) a = y0[q];
        double e = a && b ? compare_one(a, b) : INFINITY;
        if (e > r->region_worst || (isinf(e) && !isinf(r->region_worst))) {
            r->region_worst = e;
            snprintf(r->worst_at, sizeof r->worst_at, "value '%.100s' (the original's '%.100s')", g1->values[v1].name,
                     g0->values[v0].name);
        }
    }
done:
    if (s1) unref_all(y1, s1->noutputs);
    else free(y1);
    if (s0) unref_all(y0, s0->noutputs);
    else free(y0);
    unref_all(x1, nin1);
    unref_all(x0, nin0);
    if (data) unref_all(data, g1->nvalues);
    ts_graph_free(s1);
    ts_graph_free(s0);
    free(in1);
    free(in0);
    free(out1);
    free(out0);
    free(c.pair1);
    free(c.pair0);
    free(c.bpair);
    return st;
}

ts_status ts_opt_check_all(const ts_graph *g0, const ts_graph *g1, uint64_t seed, ts_tensor *const *inputs,
                           double time_limit, ts_check_result *r, ts_error *err)
{
    memset(r, 0, sizeof *r);
    check_clock clk = {.end = time_limit > 0 ? ts_clock_s() + time_limit : 0, .out_of_time = &r->out_of_time};
    if (g1->ninputs != g0->ninputs || g1->noutputs != g0->noutputs)
        return ts_error_set(err, TS_ERR_INVALID, "optimized graph has different inputs/outputs");
    if (check_regions(g0, g1, seed, r, &clk, err)) return err->code;
    ts_error why = {0};
    if (r->out_of_time) {
        /* the regions were not all compared: nothing more to do, the caller keeps the original */
    } else if (ts_graph_check_runnable(g0, &why) || ts_graph_check_runnable(g1, &why))
        snprintf(r->why_not_whole, sizeof r->why_not_whole, "%.250s", why.msg);
    else {
        if (check_whole(g0, g1, seed, inputs, &r->whole_worst, &clk, err)) return err->code;
        r->whole = !r->out_of_time;
        r->user_inputs = r->whole && inputs != NULL;
    }
    r->worst = fmax(r->region_worst, r->whole_worst);
    return TS_OK;
}

ts_status ts_opt_inputs_load(const ts_graph *g, const char *dir, ts_tensor **out, ts_error *err)
{
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        char stem[1024], path[4096], a[160], b[160];
        ts_name_sanitize(v->name, stem, sizeof stem);
        snprintf(path, sizeof path, "%s/%s.npy", dir, stem);
        if (ts_npy_load(path, &out[i], err)) return ts_error_prefix(err, "--inputs: input '%s'", v->name);
        if (out[i]->dtype != v->dtype || !ts_shape_eq(&out[i]->shape, &v->shape))
            return ts_error_set(err, TS_ERR_INVALID, "--inputs: input '%s': the model wants %s %s, '%s' holds %s %s",
                                v->name, ts_dtype_name(v->dtype), ts_shape_str(&v->shape, a, sizeof a), path,
                                ts_dtype_name(out[i]->dtype), ts_shape_str(&out[i]->shape, b, sizeof b));
    }
    return TS_OK;
}
