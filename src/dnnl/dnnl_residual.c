/* Residual sum post-op written over the residual's storage (dnnl_residual.h). */
#include <stdlib.h>
#include "dnnl/dnnl_residual.h"
#include "exec/plan_internal.h"

int xd_residual_dst(xplan *p, const xd_fuse *f, int rb, const int *reads, int nreads)
{
    if (xplan_skips(p, "residual_inplace") || f->sum_value < 0 || rb < 0 || ts_graph_is_output(p->g, f->out_value))
        return -1;
    int add = f->sum_node; /* the fused Add reading the residual (lower_post.c) */
    /* xplan_inplace_ok: the storage is arena memory (not a graph input,
     * output or constant), not a piece at an offset, and every value kept
     * there (the residual, its views, twins in another layout) has the Add
     * as its last pending reader; a value still read later, by another
     * node or as a graph output, keeps its copy */
    if (add < 0 || !xplan_inplace_ok(p, rb, add)) return -1;
    int root = xbuf_root(p, rb);
    /* the step must not read what it overwrites (a conv's own input in the
     * same storage: xplan_inplace_ok already refuses it while the conv is
     * still a pending reader; checked again, cheaply) */
    for (int i = 0; i < nreads; i++)
        if (reads[i] >= 0 && xbuf_root(p, reads[i]) == root) return -1;
    const ts_value *v = &p->g->values[f->out_value];
    int b = xplan_new_buf(p, f->out_value, v->dtype, &v->shape);
    if (b < 0) return -1;
    xbuf *x = &p->bufs[b];
    x->kind = XB_ALIAS;
    x->alias_of = root;
    x->offset = 0;
    x->blocked = p->bufs[rb].blocked;
    x->md = p->bufs[rb].md;
    x->bytes = p->bufs[rb].bytes;
    xplan_bind_value(p, f->out_value, b);
    return b;
}
