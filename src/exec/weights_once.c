/* Weights held once (ts_plan_opts.release_packed_weights).
 *
 * The convolution and matrix-multiply kernels copy their constant weights
 * at plan time into a layout of their own (oneDNN's blocked formats, gemv
 * panels) and fold biases and batch-norm parameters into buffers they
 * own; at run time they never read the graph's tensor again.  Left alone,
 * the graph's float copy sits beside the packed one for the plan's whole
 * life: a ViT-B/16 held 330 MB of weights twice (issue 12, item 6).
 *
 * So, when the caller says it needs the graph for nothing but the plan
 * (tsopt run/bench, ts_session), a constant is released as soon as it is
 * provably dead:
 *   - every node reading it was lowered by a kernel of the list below,
 *     whose build() copies whatever it reads from constants (its state
 *     keeps no pointer into them);
 *   - no step reads the constant's buffer (or a view of it) at run time;
 *   - it is no graph output, and its tensor is referenced once (a tensor
 *     shared with another graph is not ours to empty);
 *   - the graph has no control flow (bodies may read outer constants
 *     without being their consumer nodes here).
 * The check runs after each node is lowered, so that a layer's original is
 * freed before the next layer packs its own (the peak is the weights once
 * plus one layer, not twice the weights), and once more at the end for the
 * constants of nodes fused into a later step.
 *
 * Releasing frees the tensor's data (or drops its hold on a memory-mapped
 * file) and leaves data NULL, nbytes unchanged: the value keeps its dtype
 * and shape for whoever prints the graph, but the graph can no longer be
 * planned, interpreted or saved. */
#include <stdlib.h>
#include "exec/plan_internal.h"
#include "ops/control_flow.h"

extern const xkernel xk_dnnl_conv, xk_dnnl_deconv, xk_dnnl_matmul, xk_dnnl_gemm, xk_deconv_gemm, xk_vec_gemv;

static bool packs_its_constants(const xkernel *k)
{
    return k && (k == &xk_dnnl_conv || k == &xk_dnnl_deconv || k == &xk_dnnl_matmul || k == &xk_dnnl_gemm ||
                 k == &xk_deconv_gemm || k == &xk_vec_gemv);
}

bool xweights_once_allowed(const xplan *p)
{
    if (!p->opts.release_packed_weights || !p->claimed_by) return false;
    for (int n = 0; n < p->g->nnodes; n++)
        if (!p->g->nodes[n].dead && ts_op_is_control_flow(p->g->nodes[n].op)) return false;
    return true;
}

static bool read_by_step(const xplan *p, int v)
{
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        for (int j = 0; j < s->nin; j++) {
            if (s->in[j] < 0) continue;
            const xbuf *r = &p->bufs[xbuf_root(p, s->in[j])];
            if (r->kind == XB_CONST && !r->owns_data && r->value == v) return true;
        }
    }
    return false;
}

static bool releasable(const xplan *p, int v)
{
    const ts_graph *g = p->g;
    const ts_tensor *t = g->values[v].constant;
    if (!t || !t->data || t->refcount != 1 || (!t->owns_data && !t->release) || xgraph_is_output(g, v))
        return false;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead) continue;
        for (int j = 0; j < nd->ninputs; j++)
            if (nd->inputs[j] == v && (!p->claimed[n] || !packs_its_constants(p->claimed_by[n]))) return false;
    }
    return !read_by_step(p, v);
}

static void release(xplan *p, int v)
{
    ts_tensor *t = p->g->values[v].constant;
    /* the graph's own buffer and any packing note must not keep the
     * address (a later allocation may reuse it) */
    for (int b = 0; b < p->nbufs; b++) {
        xbuf *x = &p->bufs[b];
        if (x->packed_from == t->data) x->packed_from = NULL;
        if (x->kind == XB_CONST && !x->owns_data && x->data == t->data) x->data = NULL;
    }
    if (t->owns_data) free(t->data);
    if (t->release) t->release(t->keep);
    t->data = NULL;
    t->owns_data = false;
    t->release = NULL;
    t->keep = NULL;
    p->stats.released_bytes += t->nbytes;
}

void xweights_once_node(xplan *p, int n)
{
    const ts_node *nd = &p->g->nodes[n];
    for (int j = 0; j < nd->ninputs; j++)
        if (nd->inputs[j] >= 0 && releasable(p, nd->inputs[j])) release(p, nd->inputs[j]);
}

void xweights_once_all(xplan *p)
{
    for (int v = 0; v < p->g->nvalues; v++)
        if (p->g->values[v].constant && releasable(p, v)) release(p, v);
}
