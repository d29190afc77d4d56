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
#include <string.h>
#include "exec/exec.h"

static bool in_blocks(const ts_graph *g)
{
    static const char *const ok[] = {"Conv",    "Relu",        "Clip",    "Add",  "BatchNormalization",
                                     "MaxPool", "AveragePool", "GlobalAveragePool", "ReduceMean",
                                     "Flatten", "Gemm",        "MatMul",  "Identity", "Dropout",
                                     "Sigmoid", "HardSigmoid", "HardSwish", "Mul"};
    bool dw = false;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        size_t k = 0;
        while (k < sizeof ok / sizeof *ok && strcmp(nd->op->name, ok[k])) k++;
        if (k == sizeof ok / sizeof *ok) return false;
        if (!strcmp(nd->op->name, "Conv") && nd->ninputs > 1) {
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
