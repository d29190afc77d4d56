/* Control-flow bodies optimized as graphs of their own (bodies.h). */
#include "opt/bodies.h"
#include "ir/ir.h"
#include "ops/control_flow.h"
#include "ops/opaque.h"
#include "opt/passes.h"

/* The passes on one body graph, in place: rewrites made, or -1. */
static int body_passes(ts_graph *c, ts_error *err)
{
    int total = 0, r;
    if ((r = ts_opt_bodies(c, err)) < 0) return -1;
    total += r;
    if ((r = ts_graph_fold_constants(c, err)) < 0) return -1;
    total += r;
    if ((r = ts_fold_affine(c, err)) < 0) return -1;
    if (r > 0 && ts_graph_fold_constants(c, err) < 0) return -1;
    total += r;
    if ((r = ts_cse(c, err)) < 0) return -1;
    return total + r;
}

int ts_opt_bodies(ts_graph *g, ts_error *err)
{
    int total = 0;
    for (int i = 0; i < g->nnodes; i++) {
        ts_node *nd = &g->nodes[i];
        /* a body holding an opaque node is kept as it is, like the node */
        if (nd->dead || !ts_op_is_control_flow(nd->op) || ts_node_holds_opaque(nd)) continue;
        ts_cf_attrs *p = nd->attrs;
        for (int k = 0; k < p->nbodies; k++) {
            ts_body *b = p->body[k];
            ts_graph *c = ts_graph_copy(b->g);
            if (!c) return ts_error_set(err, TS_ERR_NOMEM, "out of memory"), -1;
            int n = body_passes(c, err);
            if (n <= 0 || ts_graph_validate(c, err)) {
                ts_graph_free(c);
                if (n < 0 || err->code) {
                    ts_error_prefix(err, "node '%s' (%s): body '%s'", nd->name, nd->op->name, b->g->name);
                    return -1;
                }
                continue;
            }
            ts_body *nb = ts_body_with_graph(b, c, err);
            if (!nb) return -1;
            ts_body_unref(b);
            p->body[k] = nb;
            total += n;
        }
    }
    return total;
}
