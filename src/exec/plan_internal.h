/* Shared between the executor core's files (plan.c, memplan.c, run.c,
 * ref_kernel.c, reorder.c); kernels use exec.h only. */
#ifndef TS_EXEC_PLAN_INTERNAL_H
#define TS_EXEC_PLAN_INTERNAL_H

#include "exec/exec.h"

/* The buffer whose storage b shares (b itself unless it is an alias). */
static inline int xbuf_root(const xplan *p, int b)
{
    while (p->bufs[b].kind == XB_ALIAS) b = p->bufs[b].alias_of;
    return b;
}

/* Byte offset of alias b in its root's storage (0 but for Split pieces,
 * plan.c); an alias always names its root directly, so one step suffices. */
static inline int64_t xbuf_alias_offset(const xplan *p, int b)
{
    return p->bufs[b].kind == XB_ALIAS ? p->bufs[b].offset : 0;
}

/* Plain copy between two plain buffers of equal size (graph outputs that
 * cannot be written in place: inputs, constants, views, duplicates). */
extern const xkernel xk_copy;

/* Reference steps can fail at run time (an index out of range): the error
 * is kept in the step's state; true (err filled) when the last run failed. */
bool xk_ref_take_error(const xstep *s, ts_error *err);
/* The same for control-flow steps (control_flow.c). */
extern const xkernel xk_cf;
bool xk_cf_take_error(const xstep *s, ts_error *err);

/* Builds the reorder step s whose in[0]/out[0] are already set. */
ts_status xreorder_build(xplan *p, xstep *s, ts_error *err);

/* Appends a copy of s to the plan's steps (s's arrays move with it). */
ts_status xplan_push_step(xplan *p, const xstep *s, ts_error *err);

/* Weights held once (weights_once.c, opts.release_packed_weights): whether
 * the plan may release constants at all; after node n was lowered, release
 * its constant inputs that only packing kernels read; at the end, all such
 * constants. */
bool xweights_once_allowed(const xplan *p);
void xweights_once_node(xplan *p, int n);
void xweights_once_all(xplan *p);

#endif
