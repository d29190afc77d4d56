/* Kernel registry: for each ONNX op type, the fast kernels to try, best
 * first.  Families register in their own tables (list_dnnl.c, list_vec.c);
 * a node no candidate accepts runs the reference kernel. */
#include "exec/exec.h"

extern const xentry xkernels_dnnl[]; /* oneDNN: conv, matmul, ... */
extern const xentry xkernels_vec[];  /* tsopt's vectorized kernels */
extern const xentry xkernels_vec_first[]; /* vec kernels that beat oneDNN where they accept */
extern const xentry xkernels_cf[];        /* If, Loop, Scan: bodies as nested plans (control_flow.c) */

static const xentry *const tables[] = {xkernels_vec_first, xkernels_dnnl, xkernels_vec, xkernels_cf};

const xkernel *const *xkernels_for(const ts_op_desc *op, const xkernel **buf)
{
    int n = 0;
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
        for (const xentry *e = tables[t]; e->op; e++)
            if (e->op == op && n < XKERNELS_MAX) buf[n++] = e->k;
    buf[n] = NULL;
    return buf;
}
