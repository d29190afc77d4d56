/* In-context costs of the op-cost model: groups that were never timed in a
 * whole plan (the optimizer's new candidates) timed inside a small plan of
 * their neighbourhood.
 *
 * Why not the isolated measurement (cost.c, measure_group): cut out of its
 * model and run back to back, a group differs from the same group inside
 * the model's plan in ways that do not average out (docs/runtime.md; nasrnn
 * on a quiet machine: isolated sum 0.37 ms, in-plan 0.95 ms, end to end
 * 0.98 ms; nasnet_a +40%, resnext50 -25%):
 *  - its weights stay in the core's L2 from one run to the next, while in
 *    the model every other group's weights and activations pass through
 *    the caches in between (nasrnn's 1 MiB MatMul weights: ~4 us alone,
 *    ~19 us in the plan);
 *  - its inputs arrive plain and its output must be written plain, while in
 *    the model they arrive and leave in whatever layout the neighbours use
 *    (channels-last and blocked convolutions; nasnet_a's AveragePools: 2.3
 *    ms alone, 1.1 ms in the plan);
 *  - the runtime merges across groups, which a group alone cannot show:
 *    duplicate Relus become aliases (plan.c's CSE), MatMuls by one weight
 *    share a step (vec_gemv.c's stacking), a residual Add joins the
 *    convolution that reads it last.
 * So the groups to cost (S) are cut out with: the groups producing their
 * inputs and consuming their outputs (through views); the nodes the
 * runtime may merge with them (add_siblings); upstream, the producers that
 * decide the layouts their inputs arrive in (add_layout_sources).  The
 * cut-out graph keeps the model's order (cut_build: what the planner fuses
 * depends on it), every value read outside it has an extra reader (a
 * sink: the runtime fuses and reuses memory as with the model's readers),
 * and before every run a buffer the size of what the rest of the model
 * touches is read by all threads (rest_bytes: the weights then come from
 * as far as in the model, and the threads are found as after a step).
 * Only the steps the model would run for S count (cost_plan.c's
 * attribution; conversions at the cuts and for the sinks are left out,
 * those of the model's own inputs and outputs kept).  Each S group's time
 * is cached as "@ctx KEY".  Validated group by group against the in-plan
 * times with `tsopt profile MODEL --context` (docs/runtime.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cost/cost.h"
#include "measure/rounds.h"
#include "measure/step_timer.h"

/* Value -> consuming nodes, as compressed rows. */
typedef struct uses {
    int *start, *node;
} uses;

static bool uses_build(const ts_graph *g, uses *u)
{
    int nv = g->nvalues, k = 0;
    u->start = calloc((size_t)nv + 2, sizeof *u->start);
    int total = 0;
    for (int n = 0; n < g->nnodes; n++)
        if (!g->nodes[n].dead) total += g->nodes[n].ninputs;
    u->node = malloc(sizeof *u->node * ((size_t)total + 1));
    if (!u->start || !u->node) return false;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead) continue;
        for (int j = 0; j < nd->ninputs; j++)
            if (nd->inputs[j] >= 0) u->start[nd->inputs[j] + 1]++;
    }
    for (int v = 0; v < nv; v++) u->start[v + 1] += u->start[v];
    int *fill = malloc(sizeof *fill * ((size_t)nv + 1));
    if (!fill) return false;
    memcpy(fill, u->start, sizeof *fill * (size_t)nv);
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead) continue;
        for (int j = 0; j < nd->ninputs; j++) {
            int v = nd->inputs[j];
            if (v < 0) continue;
            /* a node reading v twice is one consumer */
            bool dup = false;
            for (int q = u->start[v]; q < fill[v]; q++) dup |= u->node[q] == n;
            if (!dup) u->node[fill[v]++] = n;
        }
    }
    /* close the gaps left by duplicates: rows end where the next starts,
     * so compact them */
    for (int v = 0; v < nv; v++) {
        int s = u->start[v], e = fill[v];
        u->start[v] = k;
        for (int q = s; q < e; q++) u->node[k++] = u->node[q];
    }
    u->start[nv] = k;
    free(fill);
    return true;
}

static void uses_free(uses *u)
{
    free(u->start);
    free(u->node);
}

/* The neighbourhood being cut out. */
typedef struct hood {
    const ts_graph *g;
    const int *group_of;
    const uses *u;
    bool *in;  /* node -> in the cut-out graph */
    int count; /* nodes in it */
} hood;

static void add_group(hood *h, int head)
{
    for (int n = 0; n < h->g->nnodes; n++)
        if (h->group_of[n] == head && !h->in[n]) h->in[n] = true, h->count++;
}

/* The group producing value v, through views (which are added too): the
 * group whose output is v's storage in the model. */
static void add_producer(hood *h, int v, int hops)
{
    int p = v >= 0 ? h->g->values[v].producer : -1;
    if (p < 0 || h->group_of[p] < 0 || hops > 8) return;
    int head = h->group_of[p];
    add_group(h, head);
    const ts_node *hd = &h->g->nodes[head];
    if (xcost_is_free(hd)) add_producer(h, hd->inputs[0], hops + 1);
}

/* The groups consuming value v, through views. */
static void add_consumers(hood *h, int v, int hops)
{
    if (hops > 8) return;
    for (int q = h->u->start[v]; q < h->u->start[v + 1]; q++) {
        int c = h->u->node[q], head = h->group_of[c];
        if (head < 0) continue;
        add_group(h, head);
        const ts_node *hd = &h->g->nodes[head];
        if (xcost_is_free(hd) && head == c) add_consumers(h, hd->outputs[0], hops + 1);
    }
}

/* Nodes the runtime may merge with node n across group boundaries: other
 * readers of n's inputs with n's operator (a duplicate Relu becomes an
 * alias of the first, plan.c's CSE: nasnet_a's 117 Relus are 57 steps),
 * and for a weight (a constant of 4096 elements or more) its other
 * readers with n's operator (vec.gemv stacks MatMuls by one weight into
 * one step: nasrnn's x-side products).  Their groups join the
 * neighbourhood, so that the merge happens (or not) as in the model; the
 * step it makes is charged as in the model, to the first node lowered. */
static void add_siblings(hood *h, int n)
{
    const ts_node *nd = &h->g->nodes[n];
    for (int j = 0; j < nd->ninputs; j++) {
        int v = nd->inputs[j];
        if (v < 0) continue;
        const ts_value *val = &h->g->values[v];
        if (val->constant && ts_shape_numel(&val->shape) < 4096) continue;
        for (int q = h->u->start[v]; q < h->u->start[v + 1]; q++) {
            int c = h->u->node[q];
            if (c != n && h->g->nodes[c].op == nd->op && h->group_of[c] >= 0) add_group(h, h->group_of[c]);
        }
    }
}

/* Upstream until the layouts are the model's.  A value from outside
 * arrives plain, while in the model it has the layout its producer chose:
 * convolutions choose theirs (blocked, channels-last), element-wise ops,
 * pooling, Concat, Slice, Pad keep their input's (docs/runtime.md).  So
 * the producers of the inputs of a cut-out node that keeps layouts join,
 * up to a convolution or matmul (which choose) or the model's inputs,
 * within `rounds` steps and a bound on the size (nasnet_a: an AveragePool
 * fed by a Relu of a convolution's output pools channels-last in the
 * model, plain when the Relu's input is cut: 0.32 ms vs 0.08 ms). */
static void add_layout_sources(hood *h, int rounds, int max_nodes)
{
    const ts_graph *g = h->g;
    bool *was = malloc((size_t)g->nnodes + 1);
    if (!was) return;
    for (int r = 0; r < rounds && h->count < max_nodes; r++) {
        memcpy(was, h->in, (size_t)g->nnodes);
        for (int n = 0; n < g->nnodes && h->count < max_nodes; n++) {
            /* a convolution or matmul converts its own data input; the
             * operands of its fused post-ops (a residual) are read as
             * they come */
            if (!was[n] || h->group_of[n] < 0 || (n == h->group_of[n] && (g->nodes[n].op->flags & TS_OP_CONTRACTION))) continue;
            const ts_node *nd = &g->nodes[n];
            for (int j = 0; j < nd->ninputs; j++) {
                int v = nd->inputs[j], p = v >= 0 ? g->values[v].producer : -1;
                if (p >= 0 && !h->in[p]) add_producer(h, v, 0);
            }
        }
    }
    free(was);
}

static double value_bytes(const ts_value *v)
{
    return (double)ts_shape_numel(&v->shape) * (double)ts_dtype_size(v->dtype);
}

/* Distinct bytes the model touches between two runs of the cut-out
 * groups, besides the neighbourhood: the weights it does not read, plus
 * the activations' working set.  Activations share memory (the memory
 * plan reuses the arena), so not their sum: the most that are alive at
 * once in the model's order (a lower bound of the arena, which memplan.c
 * approaches).  Counting every activation overshoots: nasnet_a's context
 * sum was +26% over its in-plan sum with 128 MiB read before each run,
 * -7% with 32 MiB, -15% with none. */
static double rest_bytes(const ts_graph *g, const uses *u, const bool *in)
{
    int nn = g->nnodes, nv = g->nvalues, cnt = 0;
    int *order = malloc(sizeof *order * ((size_t)nn + 1)), *pos = malloc(sizeof *pos * ((size_t)nn + 1));
    bool *mine = calloc((size_t)nv + 1, 1);
    double weights = 0, live = 0, peak = 0;
    if (!order || !pos || !mine || ts_graph_topo_order(g, order, &cnt, NULL)) goto out;
    for (int n = 0; n < nn; n++)
        if (in[n])
            for (int j = 0; j < g->nodes[n].ninputs; j++)
                if (g->nodes[n].inputs[j] >= 0) mine[g->nodes[n].inputs[j]] = true;
    for (int v = 0; v < nv; v++)
        if (g->values[v].constant && !mine[v] && u->start[v + 1] > u->start[v]) weights += value_bytes(&g->values[v]);
    for (int k = 0; k < cnt; k++) pos[order[k]] = k;
    for (int i = 0; i < g->ninputs; i++) live += value_bytes(&g->values[g->inputs[i]]);
    for (int k = 0; k < cnt; k++) {
        const ts_node *nd = &g->nodes[order[k]];
        for (int o = 0; o < nd->noutputs; o++) live += value_bytes(&g->values[nd->outputs[o]]);
        peak = live > peak ? live : peak;
        /* values whose last reader is this node die here */
        for (int side = 0; side < 2; side++)
            for (int j = 0; j < (side ? nd->noutputs : nd->ninputs); j++) {
                int v = side ? nd->outputs[j] : nd->inputs[j], last = -1;
                if (v < 0 || g->values[v].constant || ts_graph_is_output(g, v)) continue;
                if (!side && g->values[v].producer < 0) continue; /* graph inputs stay */
                for (int q = u->start[v]; q < u->start[v + 1]; q++)
                    last = pos[u->node[q]] > last ? pos[u->node[q]] : last;
                if (side && last < 0) last = k; /* never read */
                bool dup = false; /* read twice by this node: counted once */
                for (int i = 0; i < j && !side; i++) dup |= nd->inputs[i] == v;
                if (last == k && !dup) live -= value_bytes(&g->values[v]);
            }
    }
out:
    free(order);
    free(pos);
    free(mine);
    return weights + peak;
}

/* The cut-out graph: the marked nodes in the model's order; constants stay
 * constants (shared), other values from outside become inputs (real_in: an
 * input of the model too), values read outside the neighbourhood become
 * outputs: a model output as it is (real_out), any other through a sink
 * (a reduction to one element), so that the producer keeps its layout, its
 * value its number of readers (what the runtime fuses depends on it) and
 * its lifetime.
 *
 * Order.  The planner lowers nodes in Kahn's order (order.c: first-in
 * first-out, so by longest path from the graph's sources), and what it
 * fuses depends on it: a convolution absorbs a residual Add only when the
 * other operand was computed before (xplan_inputs_ready).  Cut out, a node
 * fed from outside has no producer and would be lowered first (nasnet_a: a
 * pointwise convolution before the AveragePool whose result it adds, so no
 * fusion, two reorders and a plain Add: AveragePools 2.2x their in-plan
 * time).  So each node's depth in the model is kept, compressed to ranks
 * among the cut-out nodes: an input from outside read by a node of rank r
 * reaches it through a chain of r Identity views (aliases: no step, no
 * cost), which gives the node the longest path it has in the model, and
 * the planner the model's order. */
typedef struct cut {
    ts_graph *s;
    int *gnode;    /* node of s -> node of g (-1: a sink or a chain view) */
    bool *real_in, *real_out;
    int cap_nodes;
} cut;

static void cut_free(cut *c)
{
    ts_graph_free(c->s);
    free(c->gnode);
    free(c->real_in);
    free(c->real_out);
    memset(c, 0, sizeof *c);
}

/* Records s-node sn as standing for g-node gn (-1: none). */
static bool cut_map(cut *c, int sn, int gn)
{
    if (sn >= c->cap_nodes) {
        int cap = 2 * sn + 16, *ng = realloc(c->gnode, sizeof *ng * (size_t)cap);
        if (!ng) return false;
        c->gnode = ng;
        c->cap_nodes = cap;
    }
    c->gnode[sn] = gn;
    return true;
}

static ts_status cut_build(const ts_graph *g, const uses *u, const bool *in, cut *c, ts_error *err)
{
    int nn = g->nnodes, nv = g->nvalues, cnt = 0, nranks = 0;
    memset(c, 0, sizeof *c);
    int *order = malloc(sizeof *order * ((size_t)nn + 1)), *map = malloc(sizeof *map * ((size_t)nv + 1));
    int *depth = calloc((size_t)nn + 1, sizeof *depth), *rank = calloc((size_t)nn + 1, sizeof *rank);
    int *chain_len = calloc((size_t)nv + 1, sizeof *chain_len);
    int *chain_end = malloc(sizeof *chain_end * ((size_t)nv + 1));
    int *levels = malloc(sizeof *levels * ((size_t)nn + 1));
    c->s = ts_graph_new("cost_ctx", g->opset);
    c->real_in = calloc((size_t)nv + 1, sizeof *c->real_in);
    c->real_out = calloc((size_t)nv + 1, sizeof *c->real_out);
    ts_status st = TS_OK;
    if (!order || !map || !depth || !rank || !chain_len || !chain_end || !levels || !c->s || !c->real_in ||
        !c->real_out) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = ts_graph_topo_order(g, order, &cnt, err))) goto out;
    /* longest path from the model's sources, then ranks among the cut-out
     * nodes (the order is by depth, so ranks grow along it) */
    for (int k = 0; k < cnt; k++) {
        const ts_node *nd = &g->nodes[order[k]];
        for (int j = 0; j < nd->ninputs; j++) {
            int v = nd->inputs[j], p = v >= 0 ? g->values[v].producer : -1;
            if (p >= 0 && depth[p] + 1 > depth[order[k]]) depth[order[k]] = depth[p] + 1;
        }
    }
    for (int k = 0, last = -1; k < cnt; k++) {
        int n = order[k];
        if (!in[n]) continue;
        if (depth[n] != last) levels[nranks++] = depth[n], last = depth[n];
    }
    for (int v = 0; v < nv; v++) map[v] = -1;
    for (int k = 0, r = 0; k < cnt && !st; k++) {
        int n = order[k];
        if (!in[n]) continue;
        while (r + 1 < nranks && levels[r] < depth[n]) r++;
        rank[n] = r;
        const ts_node *nd = &g->nodes[n];
        int ins[64], outs[64];
        if (nd->ninputs > 64 || nd->noutputs > 64) {
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s': too many inputs to measure", nd->name);
            break;
        }
        for (int j = 0; j < nd->ninputs && !st; j++) {
            int v = nd->inputs[j];
            ins[j] = -1;
            if (v < 0) continue;
            const ts_value *val = &g->values[v];
            if (map[v] < 0) {
                if (val->constant) {
                    map[v] = ts_graph_add_constant(c->s, val->name, val->constant, err);
                } else {
                    map[v] = ts_graph_add_input(c->s, val->name, val->dtype, &val->shape, err);
                    /* a model input: its conversion is the model's too */
                    if (map[v] >= 0) c->real_in[c->s->ninputs - 1] = val->producer < 0;
                }
                if (map[v] < 0) {
                    st = err->code;
                    break;
                }
                chain_end[v] = map[v];
            }
            ins[j] = map[v];
            /* from outside (not a model input): through rank views */
            if (val->constant || val->producer < 0 || in[val->producer]) continue;
            while (chain_len[v] < rank[n] && !st) {
                char name[64];
                int o, sn;
                snprintf(name, sizeof name, "cost_ctx_v%d_%d", v, chain_len[v]);
                if ((sn = ts_graph_add_node(c->s, "Identity", name, &chain_end[v], 1, NULL, 0, 1, NULL, &o, err)) < 0)
                    st = err->code;
                else if (!cut_map(c, sn, -1))
                    st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
                chain_end[v] = o;
                chain_len[v]++;
            }
            ins[j] = chain_end[v];
        }
        if (st) break;
        ts_attr at[64];
        int na = nd->op->emit ? nd->op->emit(nd->attrs, at, 64) : 0;
        const char *names[64];
        for (int o = 0; o < nd->noutputs; o++) names[o] = g->values[nd->outputs[o]].name;
        int sn = ts_graph_add_node(c->s, nd->op->name, nd->name, ins, nd->ninputs, at, na, nd->noutputs, names, outs,
                                   err);
        if (sn < 0) {
            st = err->code;
            break;
        }
        if (!cut_map(c, sn, n)) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            break;
        }
        for (int o = 0; o < nd->noutputs; o++) map[nd->outputs[o]] = outs[o];
    }
    /* outputs, in the order of the model's values */
    for (int v = 0; v < nv && !st; v++) {
        if (map[v] < 0 || g->values[v].producer < 0 || !in[g->values[v].producer]) continue;
        bool model_out = ts_graph_is_output(g, v), outside = false;
        for (int q = u->start[v]; q < u->start[v + 1]; q++) outside |= !in[u->node[q]];
        if (!model_out && !outside) continue;
        int o = map[v];
        if (!model_out) {
            /* A ReduceMax to one element reads any layout and is fused into
             * nothing (an Identity would be: vec_fuse.c absorbs it into an
             * element-wise producer, which then writes the graph output
             * plain and is no longer there for the model's CSE, nasnet_a's
             * Relus).  Other types have one layout: an Identity. */
            char name[64];
            const ts_attr keep = ts_attr_int("keepdims", 1);
            bool f32 = g->values[v].dtype == TS_F32;
            snprintf(name, sizeof name, "cost_ctx_sink%d", v);
            int sn = ts_graph_add_node(c->s, f32 ? "ReduceMax" : "Identity", name, &map[v], 1, f32 ? &keep : NULL,
                                       f32 ? 1 : 0, 1, NULL, &o, err);
            if (sn < 0) {
                st = err->code;
                break;
            }
            if (!cut_map(c, sn, -1)) {
                st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
                break;
            }
        }
        if ((st = ts_graph_add_output(c->s, o, err))) break;
        c->real_out[c->s->noutputs - 1] = model_out;
    }
    if (!st && !c->s->noutputs) st = ts_error_set(err, TS_ERR_UNSUPPORTED, "cost context: nothing to time");
out:
    free(order);
    free(map);
    free(depth);
    free(rank);
    free(chain_len);
    free(chain_end);
    free(levels);
    if (st) cut_free(c);
    return st;
}

typedef struct kms {
    char *key;
    double ms;
} kms;

static int cmp_kms(const void *a, const void *b) { return strcmp(((const kms *)a)->key, ((const kms *)b)->key); }

ts_status xcost_ctx_measure(ts_costdb *db, const ts_graph *g, const int *group_of, const int *heads, int nheads,
                            double *head_ms, xcost_ctx_stats *r, ts_error *err)
{
    xcost_ctx_stats dummy;
    if (!r) r = &dummy;
    memset(r, 0, sizeof *r);
    int nn = g->nnodes;
    uses u = {0};
    cut c = {0};
    hood h = {g, group_of, &u, calloc((size_t)nn + 1, sizeof(bool)), 0};
    int *sidx = malloc(sizeof *sidx * ((size_t)nn + 1)), *charge = NULL;
    bool *sink = NULL;
    double *t = NULL, *col = NULL, *gt = calloc((size_t)nheads + 1, sizeof *gt);
    ts_tensor **in = NULL, **out = NULL;
    ts_plan *plan = NULL;
    kms *keys = NULL;
    int nkeys = 0, ns = 0, runs = 0;
    ts_status st = TS_OK;
    double t0 = ts_clock_ms();
    if (!h.in || !sidx || !gt || !uses_build(g, &u)) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int n = 0; n < nn; n++) sidx[n] = -1;
    for (int k = 0; k < nheads; k++) sidx[heads[k]] = k;
    for (int k = 0; k < nheads; k++) add_group(&h, heads[k]);
    for (int k = 0; k < nheads; k++)
        for (int n = 0; n < nn; n++) {
            if (group_of[n] != heads[k]) continue;
            const ts_node *nd = &g->nodes[n];
            for (int j = 0; j < nd->ninputs; j++) add_producer(&h, nd->inputs[j], 0);
            for (int o = 0; o < nd->noutputs; o++) add_consumers(&h, nd->outputs[o], 0);
            add_siblings(&h, n);
        }
    add_layout_sources(&h, 3, 64);
    r->nodes = h.count;
    double rest = rest_bytes(g, &u, h.in);
    if ((st = cut_build(g, &u, h.in, &c, err))) goto done;
    const char *dump = getenv("TSOPT_COST_DUMP"); /* debugging: the cut-out graphs, for tsopt bench/profile */
    if (dump && *dump) {
        static int seq;
        char path[4096];
        ts_error e2 = {0};
        snprintf(path, sizeof path, "%s.%d.onnx", dump, seq++);
        ts_onnx_save(c.s, path, &e2);
    }
    in = calloc((size_t)c.s->ninputs + 1, sizeof *in);
    out = calloc((size_t)c.s->noutputs + 1, sizeof *out);
    if (!in || !out) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    ts_plan_opts o = {0};
    if ((st = xcost_io_new(c.s, in, out, err)) || (st = ts_plan_build(c.s, &o, &plan, err))) goto done;
    ns = xplan_step_count(plan);
    r->steps = ns;
    /* step -> index in heads[] of the group it is charged to (-1: none) */
    charge = malloc(sizeof *charge * ((size_t)ns + 1));
    if (!charge) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* s nodes that are sinks or chain views: conversions made only for
     * them are the cut's, not the model's */
    sink = calloc((size_t)c.s->nnodes + 1, sizeof *sink);
    if (!sink) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < c.s->nnodes; k++) sink[k] = c.gnode[k] < 0;
    for (int i = ns - 1, next = -1; i >= 0; i--) {
        bool is_out;
        int io = xplan_step_boundary_io(plan, i, &is_out), w = -1;
        int sn = xplan_step_node(plan, i), gn = sn >= 0 ? c.gnode[sn] : -1;
        if (io >= 0 && !(is_out ? c.real_out[io] : c.real_in[io]))
            w = -1; /* a conversion at a cut: the model does not run it */
        else if (xplan_step_only_feeds(plan, i, sink))
            w = -1; /* a conversion for a sink */
        else if (io >= 0 && !is_out)
            w = next; /* converting a model input: for the step after it, as in cost_plan.c */
        else if (gn >= 0) {
            int ow = xcost_owner_of(g, group_of, gn);
            w = ow >= 0 ? sidx[ow] : -1;
        }
        charge[i] = w;
        if (sn >= 0 && gn >= 0) {
            int ow = xcost_owner_of(g, group_of, gn);
            next = ow >= 0 ? sidx[ow] : -1;
        }
    }
    /* Runs: warm-up, then timed ones, each after reading the rest of the
     * model's bytes; medians per step.  Up to 12 timed runs, at least 5
     * (a median of 5 survives two preemptions), stopping once the runs
     * themselves took ~40 ms (a search measures many groups). */
    /* A run whose threads waited for a CPU (or, adaptive policy, began
     * sleeping) is not what a quiet bench measures: up to 24 tries for the
     * 12, and the medians read the good ones (xcost_keep_runs). */
    const int warmup = 2, iters = 12, min_iters = 5, tries = 24;
    const double budget_ms = 40;
    t = calloc((size_t)tries * (size_t)ns + 1, sizeof *t);
    col = malloc(sizeof *col * ((size_t)tries + 1));
    unsigned char kind[24];
    if (!t || !col) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t evict = xcost_evict_bytes(rest);
    r->evict_bytes = (double)evict;
    for (int i = 0; i < warmup && !st; i++) {
        xcost_evict(db, evict);
        st = ts_plan_run(plan, in, out, err);
    }
    double spent = 0;
    int good = 0;
    while (!st && runs < tries && good < iters) {
        xcost_evict(db, evict);
        xplan_step_timer(plan, t + (size_t)runs * (size_t)ns);
        xcost_run_probe rp;
        xcost_run_begin(&rp);
        double t1 = ts_clock_ms();
        st = ts_plan_run(plan, in, out, err);
        double wall = ts_clock_ms() - t1;
        spent += wall;
        xplan_step_timer(plan, NULL);
        kind[runs] = (unsigned char)xcost_run_end(&rp, wall);
        good += kind[runs] == XCOST_RUN_GOOD;
        runs++;
        if (runs >= min_iters && spent > budget_ms && (good >= min_iters || spent > 3 * budget_ms)) break;
        if (runs >= min_iters && xcost_db_past_deadline(db)) break; /* the caller's time is up: what is there */
    }
    if (st) goto done;
    runs = xcost_keep_runs(kind, runs, t, ns, NULL, NULL);
    r->runs = runs;
    bool debug = getenv("TSOPT_COST_DEBUG") != NULL; /* which steps a time is made of */
    if (debug)
        fprintf(stderr, "cost ctx: %d groups, %d nodes, %d steps, %d runs, %.1f MiB read before each\n", nheads,
                r->nodes, ns, runs, (double)evict / (1 << 20));
    for (int i = 0; i < ns; i++) {
        for (int it = 0; it < runs; it++) col[it] = t[(size_t)it * (size_t)ns + (size_t)i];
        double med = ts_median(col, runs);
        if (debug) {
            int sn = xplan_step_node(plan, i), gn = sn >= 0 ? c.gnode[sn] : -1;
            fprintf(stderr, "  step %3d %-14s %-32s %s %.4f ms%s\n", i, xplan_step_kernel(plan, i),
                    gn >= 0 ? g->nodes[gn].name : sn >= 0 ? "(sink)" : "(input)", charge[i] >= 0 ? "*" : " ", med,
                    xplan_step_is_boundary(plan, i) ? " boundary" : "");
        }
        int many[16], nm = xcost_step_owners(g, group_of, plan, c.s, c.gnode, i, many, 16);
        for (int k = 0; k < nm; k++) /* stacked: an even share each, as in cost_plan.c */
            if (sidx[many[k]] >= 0) gt[sidx[many[k]]] += med / nm;
        if (!nm && charge[i] >= 0) gt[charge[i]] += med;
    }
    if (!(keys = calloc((size_t)nheads + 1, sizeof *keys))) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < nheads; k++) {
        if (!(keys[nkeys].key = xcost_group_key(g, group_of, heads[k]))) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            goto done;
        }
        keys[nkeys++].ms = gt[k];
        if (head_ms) head_ms[k] = gt[k];
        r->sum_ms += gt[k];
    }
    /* groups sharing a key get their mean, as in cost_plan.c */
    qsort(keys, (size_t)nkeys, sizeof *keys, cmp_kms);
    for (int a = 0, b; a < nkeys; a = b) {
        double sum = 0;
        for (b = a; b < nkeys && !strcmp(keys[a].key, keys[b].key); b++) sum += keys[b].ms;
        if (!xcost_put_ctx(db, keys[a].key, sum / (b - a), b - a)) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            goto done;
        }
        r->groups++;
    }
done:
    r->wall_ms = ts_clock_ms() - t0;
    for (int i = 0; c.s && in && i < c.s->ninputs; i++) ts_tensor_unref(in[i]);
    for (int i = 0; c.s && out && i < c.s->noutputs; i++) ts_tensor_unref(out[i]);
    for (int k = 0; k < nkeys; k++) free(keys[k].key);
    free(keys);
    free(in);
    free(out);
    ts_plan_free(plan);
    cut_free(&c);
    uses_free(&u);
    free(h.in);
    free(sidx);
    free(charge);
    free(sink);
    free(t);
    free(col);
    free(gt);
    return st;
}
