/* Per-step timer accessors (see step_timer.h); the timing itself is two
 * clock reads around each kernel call in run.c. */
#include "measure/step_timer.h"
#include "exec/plan_internal.h"

int xplan_step_count(const ts_plan *p) { return ((const xplan *)p)->nsteps; }

void xplan_step_timer(ts_plan *p, double *ms) { ((xplan *)p)->step_ms = ms; }

int xplan_step_node(const ts_plan *p, int i) { return ((const xplan *)p)->steps[i].node; }

const char *xplan_step_kernel(const ts_plan *p, int i) { return ((const xplan *)p)->steps[i].k->name; }

bool xplan_step_is_boundary(const ts_plan *plan, int i)
{
    const xplan *p = (const xplan *)plan;
    const xstep *s = &p->steps[i];
    if (s->k != &xk_reorder && s->k != &xk_copy) return false;
    return s->node < 0 || (s->nout == 1 && p->bufs[s->out[0]].kind == XB_OUTPUT);
}

int xplan_step_boundary_io(const ts_plan *plan, int i, bool *is_output)
{
    const xplan *p = (const xplan *)plan;
    const xstep *s = &p->steps[i];
    *is_output = false;
    if (!xplan_step_is_boundary(plan, i)) return -1;
    if (s->nout == 1 && p->bufs[s->out[0]].kind == XB_OUTPUT) {
        *is_output = true;
        return (int)p->bufs[s->out[0]].offset;
    }
    int b = s->nin >= 1 && s->in[0] >= 0 ? xbuf_root(p, s->in[0]) : -1;
    return b >= 0 && p->bufs[b].kind == XB_INPUT ? (int)p->bufs[b].offset : -1;
}

bool xplan_step_only_feeds(const ts_plan *plan, int i, const bool *skip)
{
    const xplan *p = (const xplan *)plan;
    const xstep *s = &p->steps[i];
    if ((s->k != &xk_reorder && s->k != &xk_copy) || s->nout != 1) return false;
    int root = xbuf_root(p, s->out[0]), readers = 0;
    for (int j = i + 1; j < p->nsteps; j++) {
        const xstep *t = &p->steps[j];
        bool reads = false;
        for (int k = 0; k < t->nin && !reads; k++) reads = t->in[k] >= 0 && xbuf_root(p, t->in[k]) == root;
        if (!reads) continue;
        if (t->node < 0 || !skip[t->node]) return false;
        readers++;
    }
    return readers > 0;
}

int xplan_step_values(const ts_plan *plan, int i, int *values, int max)
{
    const xplan *p = (const xplan *)plan;
    const xstep *s = &p->steps[i];
    int n = 0;
    for (int k = 0; k < s->nout && n < max; k++)
        if (s->out[k] >= 0 && p->bufs[s->out[k]].value >= 0) values[n++] = p->bufs[s->out[k]].value;
    return n;
}
