/* What a plan runs, step by step, for coverage-guided fuzzing (tsopt fuzz,
 * docs/fuzz.md): each step's kernel, the operator it lowered, the nodes it
 * covers and the layouts of its first input and its output; and the kernel
 * tables' entries, the coverage's denominator.  Read at plan time, nothing
 * added to a run. */
#include "exec/exec.h"
#include "ops/op.h"

int ts_plan_step_count(const ts_plan *p) { return ((const xplan *)p)->nsteps; }

/* "plain", "perm" (a dense permutation of its dims: channels-last) or
 * "blocked" (oneDNN's blocked formats); "-" for no buffer. */
static const char *layout_name(const xplan *p, int b)
{
    if (b < 0 || b >= p->nbufs) return "-";
    int order[TS_MAX_RANK + 1];
    const xbuf *x = &p->bufs[b];
    if (!x->blocked) return "plain";
    if (!xbuf_dense_order(x, order)) return "blocked";
    return xbuf_order_plain(order, x->shape.rank) ? "plain" : "perm";
}

void ts_plan_step_get(const ts_plan *pl, int k, ts_plan_step_info *out)
{
    const xplan *p = (const xplan *)pl;
    const xstep *s = &p->steps[k];
    const ts_node *nd = s->node >= 0 && s->node < p->g->nnodes ? &p->g->nodes[s->node] : NULL;
    *out = (ts_plan_step_info){.kernel = s->k ? s->k->name : "?", .op = nd ? nd->op->name : "-",
                               .nodes = 1 + s->nfused,
                               .dtype = nd && nd->noutputs ? p->g->values[nd->outputs[0]].dtype : TS_F32,
                               .in_layout = layout_name(p, s->nin ? s->in[0] : -1),
                               .out_layout = layout_name(p, s->nout ? s->out[0] : -1)};
}

extern const xentry xkernels_vec_first[], xkernels_dnnl[], xkernels_vec[], xkernels_cf[];

int ts_plan_kernel_table(const char **ops, const char **kernels, int max)
{
    static const xentry *const tables[] = {xkernels_vec_first, xkernels_dnnl, xkernels_vec, xkernels_cf};
    int n = 0;
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
        for (const xentry *e = tables[t]; e->op; e++, n++)
            if (n < max) {
                if (ops) ops[n] = e->op->name;
                if (kernels) kernels[n] = e->k->name;
            }
    return n;
}
