/* GELU spelled out after a MatMul/Gemm/Conv, as oneDNN's gelu post-op
 * (dnnl_util.c's fusion walker), for plans built without the graph levels
 * (the optimizer's measurements, ts_plan on a raw graph).  Sessions, run
 * and bench at level all have already rewritten every spelling into one
 * Gelu node (opt/fuse_gelu.c), which the walker fuses like any activation;
 * the recognizer, which proves the spelling by its algebra, is
 * ops/gelu_form.c. */
#include "exec/dnnl_util.h"
#include "ops/gelu_form.h"

int xd_gelu_after(const xplan *p, int v, int *nodes, int max, int *nnodes, dnnl_alg_kind_t *alg)
{
    bool tanh_form;
    int y = ts_gelu_spelling(p->g, v, false, p->claimed, nodes, max, nnodes, &tanh_form);
    if (y >= 0) *alg = tanh_form ? dnnl_eltwise_gelu_tanh : dnnl_eltwise_gelu_erf;
    return y;
}
