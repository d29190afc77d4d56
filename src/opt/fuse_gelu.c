/* GELU written out -> one Gelu node (passes.h, ts_fuse_gelu), the
 * spelling recognized by ops/gelu_form.c when it is a rule of
 * rules/fusions.rules, proved by `tsopt verify` (fusion_proof.c).  The
 * Gelu node is then lowered
 * to oneDNN's gelu_erf / gelu_tanh, a post-op of the MatMul, Gemm or Conv
 * before it: the transformer MLP's hidden tensor is written once instead
 * of written, read twice by a five-op pass and written again. */
#include "ops/attrs.h"
#include "ops/gelu_form.h"
#include "ops/list.h"
#include "ops/op.h"
#include "opt/passes.h"
#include "rules/apply.h"
#include "rules/rule.h"

/* 1: the GELU reading value x replaced by one Gelu node writing the
 * spelling's result value (its name kept); 0: none there; -1: error. */
static int fuse_at(ts_graph *g, int x, ts_error *err)
{
    int nodes[GELU_MAX_NODES], nn, out;
    ts_gelu_attrs ga;
    int y = ts_gelu_spelling(g, x, true, NULL, nodes, GELU_MAX_NODES, &nn, &ga.tanh);
    if (y < 0 || !ts_fusion_rule_of(g, x, y, nodes, nn, ga.tanh ? TS_ROP_GELUTANH : TS_ROP_GELU)) return 0;
    char name[64];
    int n = g->nnodes;
    if (ts_graph_add_node_parsed(g, &ts_op_gelu, ts_graph_fresh_name(g, "gelu", name, sizeof name), &x, 1, &ga, 1,
                                 NULL, &out, err) < 0)
        return -1;
    for (int k = 0; k < nn; k++) g->nodes[nodes[k]].dead = true;
    ts_opt_take_value(g, n, y);
    return 1;
}

int ts_fuse_gelu(ts_graph *g, ts_error *err)
{
    int total = 0, nv = g->nvalues;
    for (int v = 0; v < nv; v++) {
        if (g->values[v].constant) continue;
        int r = fuse_at(g, v, err);
        if (r < 0) return -1;
        total += r;
    }
    return ts_opt_settle(g, total, err);
}
