/* Re-binding a plan to its graph loaded at other sizes (ts_plan_rebind).
 *
 * A decoder step with a key/value cache differs from the one before only in
 * the past length: the graph loaded at the new sizes has the same nodes,
 * values and shared weights, with some values' shapes changed (the pasts,
 * the presents, the attention scores) and some folded constants new (the
 * position row, the causal mask).  So instead of lowering the whole graph
 * again (a decoder token's re-plan: as much CPU as its run), the plan keeps
 * every step whose values kept their shapes and whose constants are the
 * same tensors, and rebuilds only the others, each with the kernel it had,
 * in a scratch plan over the new graph whose lowering replays the order of
 * the original.  A rebuilt step must come out as the same computation: the
 * same kernel, reading and writing the same graph values through plain
 * buffers of the same kinds, nothing packed or inserted; anything else
 * declines (TS_ERR_UNSUPPORTED, plan unchanged) and the caller builds a
 * plan.  Buffers take the new shapes, constants the new tensors, and the
 * arena is laid out again, kept when it is large enough and grown by half
 * again beyond the need otherwise, so that a growing cache moves rarely.
 *
 * Steps never rebuilt may still point into the graph the plan was built
 * from (built_g): it must live as long as the plan.  A step rebuilt once is
 * rebuilt at every later re-bind (its state points into the graph of that
 * re-bind, which the caller frees at the next, or has the sizes of that
 * re-bind, not the built ones).
 *
 * When every step to rebuild has a resize hook (xresize_fn, resize_of) and every
 * constant that changed is one of those steps' input buffers (not a scalar
 * a kernel took in at build), the steps are resized in place instead: no
 * scratch plan, nothing lowered.  A decoder token's steps (the cache's
 * Concats, vec.attention, the position row's Add) all resize, so a token's
 * re-bind lowers nothing: half of a re-bind's CPU was the scratch plan
 * (perf, 1 thread, 65-token loop: xplan_build_step and the replay). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "exec/plan_internal.h"
#include "vec/vec.h"

/* The kernels whose steps resize in place (xresize_fn). */
static xresize_fn resize_of(const xkernel *k)
{
    return k == &xk_vec_concat ? xv_concat_resize : k == &xk_vec_attention ? xv_attention_resize
         : k == &xk_vec_eltwise ? xv_eltwise_resize : NULL;
}

/* Same nodes, values and wiring, value types; shapes may differ. */
static bool same_structure(const ts_graph *a, const ts_graph *b)
{
    if (a->nnodes != b->nnodes || a->nvalues != b->nvalues || a->ninputs != b->ninputs ||
        a->noutputs != b->noutputs || memcmp(a->inputs, b->inputs, sizeof(int) * (size_t)a->ninputs) ||
        memcmp(a->outputs, b->outputs, sizeof(int) * (size_t)a->noutputs))
        return false;
    for (int v = 0; v < a->nvalues; v++)
        if (a->values[v].dtype != b->values[v].dtype || a->values[v].producer != b->values[v].producer ||
            !a->values[v].constant != !b->values[v].constant || a->values[v].shape.rank != b->values[v].shape.rank)
            return false;
    for (int n = 0; n < a->nnodes; n++) {
        const ts_node *x = &a->nodes[n], *y = &b->nodes[n];
        if (x->op != y->op || x->dead != y->dead || x->ninputs != y->ninputs || x->noutputs != y->noutputs ||
            memcmp(x->inputs, y->inputs, sizeof(int) * (size_t)x->ninputs) ||
            memcmp(x->outputs, y->outputs, sizeof(int) * (size_t)x->noutputs) ||
            /* attributes holding pointers (bodies) differ: declined; none: NULL */
            (x->op->attr_size && memcmp(x->attrs, y->attrs, x->op->attr_size)))
            return false;
    }
    return true;
}

/* Value v of the new graph differs from the built one's: another shape, or
 * a constant of other contents (a constant folded or rewritten is a new
 * tensor per load: the same contents stay read from the built graph's). */
static bool value_changed(const ts_graph *old, const ts_graph *g, int v)
{
    const ts_tensor *a = old->values[v].constant, *b = g->values[v].constant;
    if (!ts_shape_eq(&old->values[v].shape, &g->values[v].shape)) return true;
    if (a == b) return false;
    return !a->data || !b->data || a->nbytes != b->nbytes || memcmp(a->data, b->data, a->nbytes);
}

/* chg: value_changed of every value of g, computed once per re-bind (each
 * buffer was compared once per step touching it and again in commit, a
 * memcmp of every rewritten constant each time: mark_steps was half of a
 * decoder token's re-bind, perf) */
static bool buf_changed(const xplan *p, const bool *chg, int b)
{
    return b >= 0 && p->bufs[b].value >= 0 && chg[p->bufs[b].value];
}

/* The lowered steps (not planner-inserted reorders and copies) to rebuild:
 * rebuilt before, or touching a changed value.  TS_ERR_UNSUPPORTED for a
 * changed value this cannot follow (in a blocked, packed or plan-owned
 * buffer, a Split piece, read by a reorder). */
static ts_status mark_steps(const xplan *p, const ts_graph *g, const bool *chg, bool *redo, ts_error *err)
{
    for (int b = 0; b < p->nbufs; b++) {
        const xbuf *x = &p->bufs[b];
        if (!buf_changed(p, chg, b)) continue;
        if (x->blocked || x->half || x->packed_from || x->owns_data || x->shared || (x->kind == XB_ALIAS && x->offset))
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "plan re-bind: '%s' changes in a %s buffer",
                                g->values[x->value].name, x->blocked ? "blocked" : x->kind == XB_ALIAS ? "split" : "packed");
    }
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        bool ch = p->rebound && p->rebound[i];
        for (int j = 0; j < s->nin; j++) ch |= buf_changed(p, chg, s->in[j]);
        for (int j = 0; j < s->nout; j++) ch |= buf_changed(p, chg, s->out[j]);
        redo[i] = ch && s->k != &xk_copy; /* an output copy takes the new size below */
        bool ok = !redo[i] || (s->k != &xk_reorder && s->node >= 0);
        for (int j = 0; redo[i] && j < s->nin + s->nout; j++) {
            int b = j < s->nin ? s->in[j] : s->out[j - s->nin];
            ok &= b < 0 || (p->bufs[b].value >= 0 && !p->bufs[b].blocked);
        }
        if (!ok)
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "plan re-bind: step %d (%s, node '%s') cannot be rebuilt alone",
                                i, s->k->name, s->node >= 0 ? g->nodes[s->node].name : "-");
    }
    return TS_OK;
}

/* Step t (built in q over the new graph) is step s of p: same kernel, same
 * values in the same slots, views where p has views, nothing extra. */
static bool same_step(const xplan *p, const xstep *s, const xplan *q, const xstep *t)
{
    if (t->k != s->k || t->nin != s->nin || t->nout != s->nout || t->nfused != s->nfused) return false;
    for (int j = 0; j < s->nin + s->nout; j++) {
        int a = j < s->nin ? s->in[j] : s->out[j - s->nin], b = j < s->nin ? t->in[j] : t->out[j - s->nin];
        if ((a < 0) != (b < 0)) return false;
        if (a < 0) continue;
        const xbuf *x = &p->bufs[a], *y = &q->bufs[b];
        if (y->value != x->value || y->blocked || (y->kind == XB_ALIAS) != (x->kind == XB_ALIAS)) return false;
    }
    return true;
}

/* Builds the steps marked in redo over g in q, replaying the lowering
 * order: every other node counts as lowered (its outputs exist) when its
 * turn comes.  TS_ERR_UNSUPPORTED when a step does not come out the same. */
static ts_status rebuild(const xplan *p, xplan *q, const bool *redo, int *made, ts_error *err)
{
    const ts_graph *g = q->g;
    int *order = malloc(sizeof(int) * ((size_t)g->nnodes + 1)), *at = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    int cnt = 0;
    ts_status st = !order || !at ? ts_error_set(err, TS_ERR_NOMEM, "out of memory") : ts_graph_topo_order(g, order, &cnt, err);
    for (int n = 0; !st && n < g->nnodes; n++) at[n] = -1;
    for (int i = 0; !st && i < p->nsteps; i++) {
        made[i] = -1;
        if (redo[i]) at[p->steps[i].node] = i;
    }
    for (int k = 0; !st && k < cnt; k++) {
        int n = order[k];
        if (q->claimed[n]) continue;
        int i = at[n];
        if (i < 0) { /* lowered by a kept step, or a view */
            const ts_node *nd = &g->nodes[n];
            for (int o = 0; o < nd->noutputs; o++)
                if (nd->outputs[o] >= 0 && xplan_value_buf(q, nd->outputs[o]) < 0)
                    st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            q->claimed[n] = true;
            xplan_release_inputs(q, n);
            continue;
        }
        const xstep *s = &p->steps[i];
        xstep t = {.k = s->k, .node = n};
        int before = q->nsteps;
        st = xplan_build_step(q, s->k, n, s->variant, &t, err);
        if (st == TS_OK) {
            q->claimed[n] = true;
            xplan_release_inputs(q, n);
            if ((st = xplan_push_step(q, &t, err))) xstep_clear(&t);
        } else
            xstep_clear(&t);
        if (!st && (q->nsteps != before + 1 || !same_step(p, s, q, &q->steps[before])))
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s': step differs at the new sizes", g->nodes[n].name);
        if (!st) made[i] = before;
    }
    for (int i = 0; !st && i < p->nsteps; i++) /* its node went into another step */
        if (redo[i] && made[i] < 0)
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s': lowered by another step at the new sizes",
                              g->nodes[p->steps[i].node].name);
    free(order);
    free(at);
    return st;
}

/* The states of the steps marked in redo resized to g's shapes (ns[i]:
 * the new state, NULL to keep it; sb[i] the scratch bytes), when every one
 * has a resize hook and every constant that differs from the built graph's
 * is an input buffer of one of them; TS_ERR_UNSUPPORTED otherwise (the
 * caller lowers them), nothing of p changed either way. */
static ts_status resize_steps(const xplan *p, const ts_graph *g, const bool *chg, const bool *redo, void **ns, size_t *sb,
                              ts_error *err)
{
    bool *read = calloc((size_t)g->nvalues + 1, sizeof *read);
    ts_status st = read ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        if (!redo[i]) continue;
        if (!resize_of(s->k))
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "plan re-bind: %s does not resize", s->k->name);
        for (int j = 0; !st && j < s->nin; j++)
            if (s->in[j] >= 0 && p->bufs[s->in[j]].value >= 0) read[p->bufs[s->in[j]].value] = true;
    }
    for (int v = 0; !st && v < g->nvalues; v++)
        if (g->values[v].constant && !read[v] && chg[v])
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "plan re-bind: constant '%s' changes inside a step", g->values[v].name);
    for (int i = 0; !st && i < p->nsteps; i++)
        if (redo[i]) st = resize_of(p->steps[i].k)(p, &p->steps[i], g, &ns[i], &sb[i], err);
    if (st)
        for (int i = 0; i < p->nsteps; i++)
            if (ns[i]) {
                p->steps[i].k->destroy(ns[i]);
                ns[i] = NULL;
            }
    free(read);
    return st;
}

/* The rebuilt steps (built in q, or resized: ns, sb) and the new sizes
 * into p; false when out of memory for the arena (p is then unusable: the
 * caller frees it). */
static bool commit(xplan *p, xplan *q, const ts_graph *g, const bool *chg, const bool *redo, const int *made, void **ns,
                   const size_t *sb)
{
    for (int i = 0; i < p->nsteps; i++) {
        xstep *s = &p->steps[i];
        if (!redo[i]) continue;
        if (q) {
            xstep *t = &q->steps[made[i]];
            if (s->state && s->k->destroy) s->k->destroy(s->state);
            s->state = t->state;
            t->state = NULL;
            s->scratch_bytes = t->scratch_bytes;
            s->ref_impl = t->ref_impl;
            p->rebind_lowered++;
        } else {
            if (ns[i]) {
                if (s->state && s->k->destroy) s->k->destroy(s->state);
                s->state = ns[i];
                ns[i] = NULL;
            }
            s->scratch_bytes = sb[i];
            p->rebind_resized++;
        }
        p->rebound[i] = true;
    }
    /* A value an earlier re-bind changed and this one brings back to its
     * built shape and contents (a session re-bound to a past length it had
     * before) takes them again: its buffer had the earlier shape, and a
     * constant pointed into that re-bind's graph, which the caller frees.
     * Known by the buffer (rebuf), not by comparing with the previous
     * graph: the session derives a token's graph in place of it. */
    for (int b = 0; b < p->nbufs; b++) {
        xbuf *x = &p->bufs[b];
        bool ch = buf_changed(p, chg, b), back = !ch && p->rebuf[b];
        p->rebuf[b] = ch;
        if (!back && !ch) continue;
        const ts_value *v = &g->values[x->value];
        x->shape = v->shape;
        x->bytes = (size_t)ts_shape_numel(&v->shape) * ts_dtype_size(v->dtype);
        if (x->kind == XB_CONST) x->data = (back ? p->built_g->values[x->value].constant : v->constant)->data;
    }
    for (int i = 0; i < p->nsteps; i++) /* output copies: the size of what they copy */
        if (p->steps[i].k == &xk_copy) *(size_t *)p->steps[i].state = p->bufs[p->steps[i].out[0]].bytes;
    p->g = g;
    xplan_relayout(p);
    size_t need = xmemplan_assign(p, false);
    p->arena_bytes = need;
    if (need > p->arena_cap) {
        size_t cap = ((need + need / 2) + 63) & ~(size_t)63;
        void *a = aligned_alloc(64, cap);
        if (!a) return false;
        memset(a, 0, cap);
        free(p->arena);
        p->arena = a;
        p->arena_cap = cap;
    }
    return true;
}

ts_status ts_plan_rebind(ts_plan *plan, const ts_graph *g, ts_error *err)
{
    xplan *p = (xplan *)plan;
    if (p->half || p->own_g || !same_structure(p->built_g, g))
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "plan re-bind: not the graph the plan was built from");
    bool *redo = calloc((size_t)p->nsteps + 1, sizeof *redo), *chg = malloc((size_t)g->nvalues + 1);
    int *made = calloc((size_t)p->nsteps + 1, sizeof *made);
    if (!p->rebound) p->rebound = calloc((size_t)p->nsteps + 1, sizeof *p->rebound);
    if (!p->rebuf) p->rebuf = calloc((size_t)p->nbufs + 1, sizeof *p->rebuf);
    if (!redo || !chg || !made || !p->rebound || !p->rebuf) {
        free(redo);
        free(chg);
        free(made);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int v = 0; v < g->nvalues; v++) chg[v] = value_changed(p->built_g, g, v);
    ts_status st = mark_steps(p, g, chg, redo, err);
    void **ns = st ? NULL : calloc((size_t)p->nsteps + 1, sizeof *ns);
    size_t *sb = ns ? calloc((size_t)p->nsteps + 1, sizeof *sb) : NULL;
    ts_error rerr = {0};
    const char *env = getenv("TSOPT_SKIP"); /* TSOPT_SKIP=rebind.resize: lower every re-bound step (A/B) */
    bool skip = (env && strstr(env, "rebind.resize")) || xplan_skips(p, "rebind.resize");
    if (!st && (!ns || !sb)) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    else if (!st && !skip && !resize_steps(p, g, chg, redo, ns, sb, &rerr)) {
        if (!commit(p, NULL, g, chg, redo, NULL, ns, sb))
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory: plan arena of %zu bytes", p->arena_bytes);
        free(redo);
        free(chg);
        free(made);
        free(ns);
        free(sb);
        return st;
    } else if (!st && rerr.code == TS_ERR_NOMEM)
        st = ts_error_set(err, TS_ERR_NOMEM, "%s", rerr.msg);
    free(ns);
    free(sb);
    xplan *q = st ? NULL : calloc(1, sizeof *q);
    if (!st && !q) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    int caller_threads = omp_get_max_threads();
    if (q) {
        q->g = q->built_g = g;
        q->opts = p->opts;
        q->opts.release_packed_weights = false; /* the new graph's constants stay whole */
        omp_set_num_threads(q->opts.threads);
        if (!(st = xplan_init(q, err))) {
            /* the rebuilt steps' primitives run on p's stream: made on its engine */
            dnnl_stream_destroy(q->stream);
            dnnl_engine_destroy(q->engine);
            q->engine = p->engine;
            q->stream = p->stream;
            st = rebuild(p, q, redo, made, err);
        }
        for (int b = 0; !st && b < q->nbufs; b++) /* a state may point into memory q owns */
            if (q->bufs[b].owns_data || q->bufs[b].shared)
                st = ts_error_set(err, TS_ERR_UNSUPPORTED, "plan re-bind: a rebuilt step packed a constant");
        if (!st && !commit(p, q, g, chg, redo, made, NULL, NULL))
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory: plan arena of %zu bytes", p->arena_bytes);
        omp_set_num_threads(caller_threads);
        q->engine = NULL;
        q->stream = NULL;
        ts_plan_free((ts_plan *)q);
    }
    free(redo);
    free(chg);
    free(made);
    return st;
}

void ts_plan_rebind_stats(const ts_plan *plan, int64_t *lowered, int64_t *resized)
{
    const xplan *p = (const xplan *)plan;
    if (lowered) *lowered = p ? p->rebind_lowered : 0;
    if (resized) *resized = p ? p->rebind_resized : 0;
}
