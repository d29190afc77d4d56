/* Per-step timer accessors (see step_timer.h); the timing itself is two
 * clock reads around each kernel call in run.c. */
#include "exec/step_timer.h"
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
