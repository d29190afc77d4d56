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

/* plan.c's steps for re-binding a plan (plan_rebind.c): the lowering
 * state of a new plan over p->g, a node's inputs released, a step's state
 * and arrays freed, buffer lifetimes and stats computed again. */
ts_status xplan_init(xplan *p, ts_error *err);
void xplan_release_inputs(xplan *p, int n);
void xstep_clear(xstep *s);
void xplan_relayout(xplan *p);

/* Appends a copy of s to the plan's steps (s's arrays move with it). */
ts_status xplan_push_step(xplan *p, const xstep *s, ts_error *err);

/* Weights held once (weights_once.c, opts.release_packed_weights): whether
 * the plan may release constants at all; after node n was lowered, release
 * its constant inputs that only packing kernels read; at the end, all such
 * constants. */
bool xweights_once_allowed(const xplan *p);
void xweights_once_node(xplan *p, int n);
void xweights_once_all(xplan *p);
/* Whether constant v is read by node n alone and released once n is
 * lowered: n's kernel may then give its pages back as it packs them. */
bool xweights_once_consumable(const xplan *p, int v, int n);
/* The whole pages of a consumable constant's data from *next up to end go
 * back to the OS (*next: the first page not yet given back; start it at the
 * data).  The data reads as zeros after: only once nothing can decline. */
void xweights_drop_pages(uintptr_t *next, uintptr_t end);
/* Packs the f32 weight w (wbytes, laid out as `from`, plain 2-D) into dst
 * (`to`) with a reorder; with consume, a weight of at least
 * XWEIGHTS_SLICE_MIN_BYTES goes a slice of about XWEIGHTS_SLICE_BYTES at a
 * time, each slice's pages of w given back once packed (w is garbage after:
 * only for a consumable constant, and as the kernel's last step that can
 * fail).  prepare(ctx), when given, runs once nothing can fail any more,
 * before w is read (folding scales into w in place). */
#define XWEIGHTS_SLICE_MIN_BYTES ((size_t)32 << 20)
#define XWEIGHTS_SLICE_BYTES ((size_t)8 << 20)
/* In a half plan (half.c) the weight is the plan's float32 widening of a
 * 16-bit one, twice the size it is held at: from this size on it is packed
 * in slices of an eighth of it (ViT's 9 MiB MLP weight widened and packed
 * whole sat twice beside the others: its plan's peak). */
#define XWEIGHTS_HALF_SLICE_MIN_BYTES ((size_t)2 << 20)
ts_status xweights_pack(xplan *p, int n, void *w, size_t wbytes, const dnnl_memory_desc_t *from,
                        const dnnl_memory_desc_t *to, void *dst, bool consume, void (*prepare)(void *ctx), void *ctx,
                        ts_error *err);

#endif
