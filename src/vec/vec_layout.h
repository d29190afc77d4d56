/* Dense permuted layouts.  oneDNN's activation formats on this CPU are
 * mostly channels-last (acdb, acdeb): a plain row-major array whose logical
 * dims are stored in another order, no blocking, no padding.  Kernels that
 * only move or map elements (Pad, element-wise chains, Concat, Slice) can
 * work on such a buffer as a row-major array of the permuted shape and
 * leave their result in the same order, so a conv -> relu -> pad -> conv
 * chain needs no conversion to plain and back. */
#ifndef TS_VEC_VEC_LAYOUT_H
#define TS_VEC_VEC_LAYOUT_H

#include "exec/exec.h"

/* Makes buffer b (a fresh float32 arena buffer of its logical shape) hold
 * the dense layout `order`: blocked with a strided md, or plain for the
 * identity. */
void xv_set_order(xplan *p, int b, const int *order);
/* The same on a buffer description (one not yet in the plan: a kernel's
 * decision before it touches the plan). */
void xv_buf_set_order(xbuf *x, const int *order);

/* Wires a one-input, one-output step: input buffer xb (< 0: resolving it
 * failed, err says why), output = node n's output value in the dense
 * layout `order` (NULL: plain). */
ts_status xv_step_unary(xplan *p, int n, xstep *st, int xb, const int *order, ts_error *err);

#endif
