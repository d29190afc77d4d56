/* The lowering stage's contract (docs/architecture.md, "Pipeline"): a
 * kernel implements the graph nodes its step claims and reads only their
 * inputs.  Rewrites that change what is computed are graph passes of
 * src/opt/ (checked there); a kernel that reads a value no node of its
 * step reads computes something other than the graph, which this check
 * refuses.  On in debug builds and with $TSOPT_CHECK_STEPS=1 (tests); off
 * in release builds (it costs a scan of the graph's nodes per step). */
#include <stdlib.h>
#include "exec/exec.h"

bool xstep_checking(void)
{
#ifndef NDEBUG
    return true;
#else
    const char *e = getenv("TSOPT_CHECK_STEPS");
    return e && *e && *e != '0';
#endif
}

/* Buffer b holds value v: v's current buffer or one it aliases, or a
 * buffer made for v (a copy in another layout; an alias of one). */
static bool holds(const xplan *p, int b, int v)
{
    if (v < 0) return false;
    for (int vb = p->value_buf[v], hops = 0; vb >= 0 && hops < 64; hops++) {
        if (vb == b) return true;
        vb = p->bufs[vb].kind == XB_ALIAS ? p->bufs[vb].alias_of : -1;
    }
    for (int hops = 0; b >= 0 && hops < 64; hops++) {
        if (p->bufs[b].value == v) return true;
        b = p->bufs[b].kind == XB_ALIAS ? p->bufs[b].alias_of : -1;
    }
    return false;
}

static bool node_reads(const xplan *p, int m, int b)
{
    const ts_node *nd = &p->g->nodes[m];
    for (int j = 0; j < nd->ninputs; j++)
        if (holds(p, b, nd->inputs[j])) return true;
    for (int j = 0; j < nd->noutputs; j++) /* accumulating into its own output */
        if (holds(p, b, nd->outputs[j])) return true;
    return false;
}

ts_status xstep_check_reads(const xplan *p, const xstep *s, const int *nodes, int nnodes, int nbufs_before,
                            ts_error *err)
{
    const ts_graph *g = p->g;
    for (int i = 0; i < s->nin; i++) {
        int b = s->in[i];
        /* absent, made by this build (packed weights, a reorder of an input),
         * or a constant's copy packed by an earlier step (shared weights) */
        if (b < 0 || b >= nbufs_before || (p->bufs[b].kind == XB_CONST && p->bufs[b].packed_from)) continue;
        bool own = node_reads(p, s->node, b);
        for (int i = 0; !own && i < nnodes; i++) own = nodes[i] != s->node && node_reads(p, nodes[i], b);
        if (own) continue;
        int v = p->bufs[b].value;
        if (v < 0 || v >= g->nvalues)
            for (v = 0; v < g->nvalues && !holds(p, b, v);) v++;
        int prod = v < g->nvalues ? g->values[v].producer : -1;
        return ts_error_set(err, TS_ERR_INVALID,
                            "kernel %s of node '%s' reads value '%s' (of node '%s'; buffer %d, kind %d), which no node "
                            "of its step reads",
                            s->k->name, g->nodes[s->node].name, v < g->nvalues ? g->values[v].name : "?",
                            prod >= 0 ? g->nodes[prod].name : "(graph input or constant)", b, (int)p->bufs[b].kind);
    }
    return TS_OK;
}
