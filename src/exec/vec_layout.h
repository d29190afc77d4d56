/* Dense permuted layouts.  oneDNN's activation formats on this CPU are
 * mostly channels-last (acdb, acdeb): a plain row-major array whose logical
 * dims are stored in another order, no blocking, no padding.  Kernels that
 * only move or map elements (Pad, element-wise chains, Concat, Slice) can
 * work on such a buffer as a row-major array of the permuted shape and
 * leave their result in the same order, so a conv -> relu -> pad -> conv
 * chain needs no conversion to plain and back. */
#ifndef TS_EXEC_VEC_LAYOUT_H
#define TS_EXEC_VEC_LAYOUT_H

#include "exec/exec.h"

/* True when buffer b is plain or a dense permutation of its logical dims;
 * order[k] is then the logical dim stored at physical position k
 * (outermost first), for b's rank (rank 0 counts as 1). */
bool xv_dense_order(const xbuf *b, int *order);

/* True when order is 0, 1, ..., rank-1 (plain row-major). */
bool xv_order_plain(const int *order, int rank);

/* Makes buffer b (a fresh float32 arena buffer of its logical shape) hold
 * the dense layout `order`: blocked with a strided md, or plain for the
 * identity. */
void xv_set_order(xplan *p, int b, const int *order);

/* Wires a one-input, one-output step: input buffer xb (< 0: resolving it
 * failed, err says why), output = node n's output value in the dense
 * layout `order` (NULL: plain). */
ts_status xv_step_unary(xplan *p, int n, xstep *st, int xb, const int *order, ts_error *err);

#endif
