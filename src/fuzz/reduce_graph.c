/* Delta debugging of a runtime seed graph's finding (gen.c): one graph,
 * no pair to remake, so the cuts of reduce.c (an output dropped, a node's
 * result replaced by one of its inputs of the same shape or by a new graph
 * input) are tried on the graph itself, kept while the target still gives
 * a finding of the same kind, stage and oracle, until no cut is kept or
 * 300 trials are spent.  Inputs are seeded by name, so the ones left keep
 * their values. */
#include <stdlib.h>
#include <string.h>
#include "fuzz/fuzz.h"

static void free_inputs(ts_tensor **in, int n)
{
    for (int i = 0; in && i < n; i++) ts_tensor_unref(in[i]);
    free(in);
}

/* Checks c; true (c taken into *cur, its inputs into *in) when it gives
 * the same finding as v. */
static ts_status trial(ts_fuzz_target *t, ts_graph *c, uint64_t seed, const ts_fuzz_verdict *v, ts_graph **cur,
                       ts_tensor ***in, bool *kept, ts_error *err)
{
    *kept = false;
    ts_tensor **ci = calloc((size_t)c->ninputs + 1, sizeof *ci);
    ts_fuzz_verdict w;
    ts_status st = ci ? ts_fuzz_inputs(c, seed, ci, err) : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!st) st = ts_fuzz_target_check_graph(t, c, ci, seed, &w, err);
    if (!st && w.kind == v->kind && !strcmp(w.stage, v->stage) && !strcmp(w.oracle, v->oracle)) {
        ts_graph *old = *cur;
        free_inputs(*in, old->ninputs);
        ts_graph_free(old);
        *cur = c, *in = ci, *kept = true;
        return TS_OK;
    }
    free_inputs(ci, c->ninputs);
    ts_graph_free(c);
    return st == TS_ERR_NOMEM ? st : TS_OK;
}

ts_status ts_fuzz_reduce_graph(ts_fuzz_target *t, const ts_graph *g, uint64_t seed, const ts_fuzz_verdict *v,
                               ts_graph **out, ts_tensor ***in_out, ts_error *err)
{
    ts_graph *cur = ts_graph_copy(g);
    ts_tensor **in = cur ? calloc((size_t)cur->ninputs + 1, sizeof *in) : NULL;
    if (!in || ts_fuzz_inputs(cur, seed, in, err)) {
        ts_graph_free(cur);
        free(in);
        return err->code ? err->code : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    int trials = 0;
    bool progress = true;
    ts_status st = TS_OK;
    while (progress && trials < 300 && !st) {
        progress = false;
        for (int k = cur->noutputs - 1; k >= 0 && !progress && !st && trials < 300; k--) {
            ts_graph *c = ts_fuzz_drop_output(cur, k, err);
            if (!c) continue;
            trials++;
            st = trial(t, c, seed, v, &cur, &in, &progress, err);
        }
        for (int n = cur->nnodes - 1; n >= 0 && !progress && !st && trials < 300; n--) {
            if (cur->nodes[n].dead) continue;
            for (int j = 0; j <= cur->nodes[n].ninputs && !progress && !st && trials < 300; j++) {
                ts_graph *c = ts_fuzz_cut_node(cur, n, j < cur->nodes[n].ninputs ? j : -1, err);
                if (!c) continue;
                trials++;
                st = trial(t, c, seed, v, &cur, &in, &progress, err);
            }
        }
    }
    *out = cur;
    *in_out = in;
    return st;
}
