/* Building the nodes that stand for atoms (atom.h, ts_rbuild): node and
 * constant names, the ONNX axis of a TASO axis, window padding.  Shared by
 * the applier (models' reading) and the axiom checker (the theory's). */
#include <stdio.h>
#include <string.h>
#include "rules/atom.h"

/* Node names must be unique in an ONNX file (ONNX Runtime checks): the
 * builder's default (op and node count) repeats once compaction has
 * shrunk the count, so names are checked against the graph. */
static const char *node_name(const ts_rbuild *b, const ts_op_desc *op, char *buf, size_t n)
{
    if (!b->prefix) return NULL;
    for (int k = b->g->nnodes;; k++) {
        snprintf(buf, n, "%s_%s_%d", b->prefix, op->name, k);
        bool used = false;
        for (int i = 0; i < b->g->nnodes && !used; i++) used = !strcmp(b->g->nodes[i].name, buf);
        if (!used) return buf;
    }
}

int ts_rbuild_node(ts_rbuild *b, const ts_op_desc *op, const int *ins, int nin, const ts_attr *a, int na, int nout,
                   int *outs)
{
    char name[96];
    return ts_graph_add_node(b->g, op->name, node_name(b, op, name, sizeof name), ins, nin, a, na, nout, NULL, outs,
                             &b->err);
}

int ts_rbuild_node1(ts_rbuild *b, const ts_op_desc *op, const int *ins, int nin, const ts_attr *a, int na)
{
    int out = -1;
    return ts_rbuild_node(b, op, ins, nin, a, na, 1, &out) < 0 ? -1 : out;
}

int ts_rbuild_const(ts_rbuild *b, ts_tensor *t)
{
    char prefix[48], name[64];
    snprintf(prefix, sizeof prefix, "%s_const", b->prefix ? b->prefix : "rule");
    int v = ts_graph_add_constant(b->g, ts_graph_fresh_name(b->g, prefix, name, sizeof name), t, &b->err);
    ts_tensor_unref(t);
    return v;
}

int ts_rbuild_axis(const ts_rbuild *b, int rank, int a)
{
    return !b->theory && rank == 3 ? a + 1 : a;
}

void ts_same_pads(const ts_shape *x, const int64_t *k, int64_t s, int64_t *pb, int64_t *pe)
{
    for (int d = 0; d < 2; d++) {
        int64_t in = x->dims[2 + d], out = (in + s - 1) / s;
        int64_t total = (out - 1) * s + k[d] - in;
        if (total < 0) total = 0;
        pb[d] = total / 2;
        pe[d] = total - total / 2;
    }
}

bool ts_rbuild_pads(const ts_rbuild *b, const ts_shape *x, const int64_t *k, int s, ts_rpad pad, int64_t pads[4])
{
    memset(pads, 0, 4 * sizeof *pads);
    if (pad != TS_RPAD_SAME) return true;
    /* SAME keeps the output centred: odd kernels only */
    if (k[0] % 2 == 0 || k[1] % 2 == 0) return false;
    if (!b->tf_same) {
        for (int d = 0; d < 2; d++) pads[d] = pads[d + 2] = (k[d] - 1) / 2;
        return true;
    }
    int64_t pb[2], pe[2];
    ts_same_pads(x, k, s, pb, pe);
    pads[0] = pb[0], pads[1] = pb[1], pads[2] = pe[0], pads[3] = pe[1];
    return true;
}
