/* Whether a network runs its convs in oneDNN's 16-channel blocks
 * (conv.stem_blocks in dnnl_conv.c; docs/runtime.md, "Depthwise nets in
 * 16-channel blocks"): it has a depthwise conv and every node is one whose
 * lowering reads oneDNN's blocked layouts as they are (convs with their
 * activations and residual Adds as post-ops, pools, the head's global mean,
 * Flatten and Gemm, the activations and gates of squeeze-excite blocks:
 * vec.se pools and scales the blocks as they lie, a conv fuses its
 * HardSwish or SiLU).  A shuffle, Concat or Transpose runs on kernels that
 * read channels-last.  Before vec.se read blocks, mobilenet_v3_large had 92
 * steps in blocks instead of 57 (reorders around each squeeze-excite) and
 * was 1.03-1.07x slower, efficientnet_b0 138 instead of 67, 1.15x.  A
 * property of the whole graph, so it is the planner side's to decide, not
 * a served kernel's. */
#include "exec/exec.h"
#include "ops/list.h"

static bool in_blocks(const ts_graph *g)
{
    static const ts_op_desc *const ok[] = {
        &ts_op_conv,    &ts_op_relu,    &ts_op_clip,     &ts_op_add,         &ts_op_batchnorm,  &ts_op_maxpool,
        &ts_op_avgpool, &ts_op_global_avgpool, &ts_op_reducemean, &ts_op_flatten, &ts_op_gemm, &ts_op_matmul,
        &ts_op_identity, &ts_op_dropout, &ts_op_sigmoid, &ts_op_hardsigmoid, &ts_op_hardswish, &ts_op_mul};
    bool dw = false;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        size_t k = 0;
        while (k < sizeof ok / sizeof *ok && nd->op != ok[k]) k++;
        if (k == sizeof ok / sizeof *ok) return false;
        if (nd->op == &ts_op_conv && nd->ninputs > 1) {
            const ts_shape *x = &g->values[nd->inputs[0]].shape, *w = &g->values[nd->inputs[1]].shape;
            dw = dw || (x->rank == 4 && w->rank == 4 && w->dims[1] == 1 && x->dims[1] > 1 && w->dims[0] == x->dims[1]);
        }
    }
    return dw;
}

bool xplan_net_in_blocks(xplan *p)
{
    if (!p->net_in_blocks) p->net_in_blocks = in_blocks(p->g) ? 2 : 1;
    return p->net_in_blocks == 2;
}
