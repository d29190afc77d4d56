/* Minimizing a finding by delta debugging on the seed graph.  The pair
 * itself cannot be cut freely (its two graphs must stay equivalent), but
 * any smaller seed graph gives a new equivalent pair through the e-graph;
 * so the reducer shrinks the seed -- dropping outputs, bypassing nodes, or
 * turning a node's result into a new graph input -- remaking the pair
 * after each cut and keeping the cut while the target still shows the same
 * kind of finding at the same stage.  Last, the variant's exposed
 * intermediates are dropped where the finding survives without them.
 * Every step is deterministic (the pair's seed fixes ties and inputs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz/fuzz.h"

int ts_fuzz_count_nodes(const ts_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !g->nodes[i].dead;
    return n;
}

/* Marks dead every node none of whose results is read or an output, drops
 * graph inputs nothing reads, and compacts. */
static void prune(ts_graph *g)
{
    int *uses = calloc((size_t)g->nvalues + 1, sizeof *uses);
    if (!uses) return;
    for (bool changed = true; changed;) {
        changed = false;
        memset(uses, 0, sizeof *uses * (size_t)g->nvalues);
        for (int i = 0; i < g->noutputs; i++) uses[g->outputs[i]]++;
        for (int i = 0; i < g->nnodes; i++)
            if (!g->nodes[i].dead)
                for (int j = 0; j < g->nodes[i].ninputs; j++)
                    if (g->nodes[i].inputs[j] >= 0) uses[g->nodes[i].inputs[j]]++;
        for (int i = 0; i < g->nnodes; i++) {
            ts_node *n = &g->nodes[i];
            if (n->dead) continue;
            bool used = false;
            for (int j = 0; j < n->noutputs; j++) used |= uses[n->outputs[j]] > 0;
            if (!used) n->dead = changed = true;
        }
    }
    int k = 0;
    for (int i = 0; i < g->ninputs; i++)
        if (uses[g->inputs[i]]) g->inputs[k++] = g->inputs[i];
    g->ninputs = k;
    free(uses);
    ts_graph_compact(g);
}

static ts_graph *finish(ts_graph *c, ts_error *err)
{
    prune(c);
    if (ts_fuzz_count_nodes(c) == 0 || c->noutputs == 0 || ts_graph_validate(c, err)) {
        ts_graph_free(c);
        *err = (ts_error){0};
        return NULL;
    }
    return c;
}

ts_graph *ts_fuzz_drop_output(const ts_graph *g, int k, ts_error *err)
{
    if (g->noutputs < 2 || k < 0 || k >= g->noutputs) return NULL;
    ts_graph *c = ts_graph_copy(g);
    if (!c) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    memmove(c->outputs + k, c->outputs + k + 1, sizeof *c->outputs * (size_t)(c->noutputs - k - 1));
    c->noutputs--;
    return finish(c, err);
}

ts_graph *ts_fuzz_cut_node(const ts_graph *g, int n, int j, ts_error *err)
{
    if (n < 0 || n >= g->nnodes || g->nodes[n].dead) return NULL;
    const ts_node *nd = &g->nodes[n];
    if (j >= nd->ninputs || (j >= 0 && nd->inputs[j] < 0)) return NULL;
    for (int s = 0; s < nd->noutputs; s++) {
        if (j >= 0 && !ts_shape_eq(&g->values[nd->inputs[j]].shape, &g->values[nd->outputs[s]].shape)) return NULL;
        /* a graph output may move to the input it is replaced by, if a node
         * makes that one (an output never becomes an input or a weight)
         * and it is not an output already */
        for (int i = 0; i < g->noutputs; i++)
            if (g->outputs[i] == nd->outputs[s]) {
                if (j < 0 || g->values[nd->inputs[j]].producer < 0) return NULL;
                for (int q = 0; q < g->noutputs; q++)
                    if (g->outputs[q] == nd->inputs[j]) return NULL;
            }
    }
    ts_graph *c = ts_graph_copy(g);
    if (!c) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int nout = nd->noutputs;
    for (int s = 0; s < nout; s++) {
        int old = c->nodes[n].outputs[s], rep;
        if (j >= 0) {
            rep = c->nodes[n].inputs[j];
        } else {
            char name[300];
            snprintf(name, sizeof name, "cut.%s", c->values[old].name);
            ts_shape sh = c->values[old].shape;
            if ((rep = ts_graph_add_input(c, name, c->values[old].dtype, &sh, err)) < 0) {
                ts_graph_free(c);
                return NULL;
            }
        }
        for (int i = 0; i < c->nnodes; i++)
            for (int q = 0; !c->nodes[i].dead && i != n && q < c->nodes[i].ninputs; q++)
                if (c->nodes[i].inputs[q] == old) c->nodes[i].inputs[q] = rep;
        for (int i = 0; i < c->noutputs; i++)
            if (c->outputs[i] == old) c->outputs[i] = rep;
    }
    c->nodes[n].dead = true;
    return finish(c, err);
}

/* ------------------------------------------------------------- reducer */

void ts_fuzz_reduced_free(ts_fuzz_reduced *r)
{
    if (r->inputs && r->pair.original)
        for (int i = 0; i < r->pair.original->ninputs; i++) ts_tensor_unref(r->inputs[i]);
    free(r->inputs);
    ts_fuzz_pair_free(&r->pair);
    ts_graph_free(r->seed_graph);
    memset(r, 0, sizeof *r);
}

static bool same_finding(const ts_fuzz_verdict *a, const ts_fuzz_verdict *b)
{
    return a->kind == b->kind && !strcmp(a->stage, b->stage) && !strcmp(a->wrong, "pair") == !strcmp(b->wrong, "pair");
}

/* Makes the pair of seed graph g and checks it: true (and *out filled,
 * owning g) when it gives the same finding as v; false otherwise (g is
 * freed).  Fails only out of memory. */
static ts_status trial(const ts_fuzz_reducer *r, ts_graph *g, const ts_fuzz_verdict *v, ts_fuzz_reduced *out,
                       bool *kept, ts_error *err)
{
    *kept = false;
    ts_fuzz_reduced c = {.seed_graph = g};
    ts_error e = {0};
    ts_status st = TS_OK;
    if (r->make_pair(r->make_ctx, g, r->seed, &c.pair, &e)) {
        if (e.code == TS_ERR_NOMEM) st = (*err = e, e.code);
        goto done;
    }
    if (!(c.inputs = calloc((size_t)c.pair.original->ninputs + 1, sizeof *c.inputs))) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = ts_fuzz_inputs(c.pair.original, r->seed, c.inputs, err))) {
        free(c.inputs);
        c.inputs = NULL;
        goto done;
    }
    if ((st = ts_fuzz_target_check(r->target, c.pair.original, c.pair.variant, c.pair.nroots, c.inputs, r->seed,
                                   &c.verdict, err)))
        goto done;
    if (same_finding(&c.verdict, v)) {
        ts_fuzz_reduced_free(out);
        *out = c;
        *kept = true;
        return TS_OK;
    }
done:
    ts_fuzz_reduced_free(&c);
    return st;
}

/* Checks g as a pair with itself (original = variant = g): kept (and out
 * replaced, its seed graph moved over) when it gives the same finding;
 * g is taken over either way. */
static ts_status trial_alone(const ts_fuzz_reducer *r, ts_graph *g, const ts_fuzz_verdict *v, ts_fuzz_reduced *out,
                             bool *kept, ts_error *err)
{
    *kept = false;
    ts_fuzz_reduced c = {.pair = {.original = g, .variant = ts_graph_copy(g), .nroots = g->noutputs}};
    ts_status st = TS_OK;
    if (!c.pair.variant || !(c.inputs = calloc((size_t)g->ninputs + 1, sizeof *c.inputs)))
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    else if ((st = ts_fuzz_inputs(g, r->seed, c.inputs, err))) {
        free(c.inputs);
        c.inputs = NULL;
    }
    if (!st) st = ts_fuzz_target_check(r->target, g, c.pair.variant, c.pair.nroots, c.inputs, r->seed, &c.verdict, err);
    if (!st && same_finding(&c.verdict, v)) {
        c.pair.stop = out->pair.stop;
        c.pair.applied = out->pair.applied;
        c.seed_graph = out->seed_graph;
        out->seed_graph = NULL;
        ts_fuzz_reduced_free(out);
        *out = c;
        *kept = true;
        return TS_OK;
    }
    ts_fuzz_reduced_free(&c);
    return st;
}

/* A finding of the optimizer is about one graph: the optimizer goes wrong
 * on the variant whatever the original is.  So the variant is cut further
 * on its own, as a pair with itself (a graph is equivalent to itself),
 * which no e-graph would give back from a smaller seed. */
static ts_status reduce_alone(const ts_fuzz_reducer *r, const ts_fuzz_verdict *v, ts_fuzz_reduced *out, int *trials,
                              int max, int *accepted, ts_error *err)
{
    bool kept;
    for (bool progress = true; progress && *trials < max;) {
        progress = false;
        const ts_graph *cur = out->pair.variant;
        for (int k = 0; !progress && k < cur->noutputs && *trials < max; k++) {
            ts_graph *c = ts_fuzz_drop_output(cur, k, err);
            if (!c) {
                if (err->code) return err->code;
                continue;
            }
            ++*trials;
            if (trial_alone(r, c, v, out, &kept, err)) return err->code;
            progress = kept;
        }
        for (int n = progress ? -1 : cur->nnodes - 1; !progress && n >= 0 && *trials < max; n--) {
            if (cur->nodes[n].dead) continue;
            for (int j = 0; !progress && j <= cur->nodes[n].ninputs && *trials < max; j++) {
                ts_graph *c = ts_fuzz_cut_node(cur, n, j < cur->nodes[n].ninputs ? j : -1, err);
                if (!c) {
                    if (err->code) return err->code;
                    continue;
                }
                ++*trials;
                if (trial_alone(r, c, v, out, &kept, err)) return err->code;
                progress = kept;
            }
        }
        *accepted += progress;
    }
    return TS_OK;
}

static ts_status reduce(const ts_fuzz_reducer *r, const ts_graph *seed_graph, const ts_fuzz_verdict *v,
                        ts_fuzz_reduced *out, ts_error *err)
{
    memset(out, 0, sizeof *out);
    int max = r->max_trials > 0 ? r->max_trials : 300;
    bool kept = false;
    ts_status st = TS_OK;
    int trials = 0, accepted = 0;
    /* the fewest saturation rounds that still give it, else the default */
    for (int rounds = r->set_rounds && r->max_rounds > 1 ? 1 : 0;;) {
        if (r->set_rounds) r->set_rounds(r->make_ctx, rounds);
        ts_graph *g = ts_graph_copy(seed_graph);
        if (!g) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        trials++;
        st = trial(r, g, v, out, &kept, err);
        if (st || kept || rounds == 0) break;
        rounds = rounds + 1 < r->max_rounds ? rounds + 1 : 0;
    }
    out->trials = trials;
    if (st || !kept) { /* not reproducible from the seed graph: nothing to reduce */
        ts_fuzz_reduced_free(out);
        return st ? st : ts_error_set(err, TS_ERR_INVALID, "the finding does not reproduce from its seed graph");
    }
    for (bool progress = true; progress && trials < max;) {
        progress = false;
        const ts_graph *cur = out->seed_graph;
        for (int k = 0; !progress && k < cur->noutputs && trials < max; k++) {
            ts_graph *c = ts_fuzz_drop_output(cur, k, err);
            if (!c) {
                if (err->code) return err->code;
                continue;
            }
            trials++;
            if ((st = trial(r, c, v, out, &kept, err))) return st;
            progress = kept;
        }
        /* nodes from the outputs back: cutting near the outputs drops most
         * (cur is freed once a cut is kept: nothing reads it after) */
        for (int n = progress ? -1 : cur->nnodes - 1; !progress && n >= 0 && trials < max; n--) {
            if (cur->nodes[n].dead) continue;
            for (int j = 0; !progress && j <= cur->nodes[n].ninputs && trials < max; j++) {
                int jj = j < cur->nodes[n].ninputs ? j : -1; /* bypass to each input, then a new input */
                ts_graph *c = ts_fuzz_cut_node(cur, n, jj, err);
                if (!c) {
                    if (err->code) return err->code;
                    continue;
                }
                trials++;
                if ((st = trial(r, c, v, out, &kept, err))) return st;
                progress = kept;
            }
        }
        accepted += progress;
    }
    /* the variant's exposed intermediates, where the finding holds without them */
    for (int k = out->pair.variant->noutputs - 1; k >= out->pair.nroots && trials < max; k--) {
        ts_graph *c = ts_fuzz_drop_output(out->pair.variant, k, err);
        if (!c) {
            if (err->code) return err->code;
            continue;
        }
        ts_fuzz_verdict nv;
        trials++;
        if ((st = ts_fuzz_target_check(r->target, out->pair.original, c, out->pair.nroots, out->inputs, r->seed, &nv,
                                       err))) {
            ts_graph_free(c);
            return st;
        }
        if (same_finding(&nv, v)) {
            ts_graph_free(out->pair.variant);
            out->pair.variant = c;
            out->verdict = nv;
            accepted++;
        } else {
            ts_graph_free(c);
        }
    }
    if (!strcmp(v->stage, "optimizer") && (st = reduce_alone(r, v, out, &trials, max, &accepted, err))) return st;
    out->trials = trials;
    out->accepted = accepted;
    return TS_OK;
}

ts_status ts_fuzz_reduce(const ts_fuzz_reducer *r, const ts_graph *seed_graph, const ts_fuzz_verdict *v,
                         ts_fuzz_reduced *out, ts_error *err)
{
    ts_status st = reduce(r, seed_graph, v, out, err);
    if (r->set_rounds) r->set_rounds(r->make_ctx, 0); /* the campaign goes on with the default */
    return st;
}
