/* A residual Add fused into a convolution / matmul as oneDNN's sum post-op
 * accumulates the result onto what dst already holds.  Copying the
 * residual into dst first costs a full extra pass over the tensor per
 * residual block; when the residual dies at the Add, the step can instead
 * write its result over the residual's own storage (dst = residual). */
#ifndef TS_DNNL_DNNL_RESIDUAL_H
#define TS_DNNL_DNNL_RESIDUAL_H

#include "dnnl/dnnl_util.h"

/* Output buffer for a step with fusion f whose sum post-op reads the
 * residual from buffer rb, laid out exactly as the step's dst (the caller
 * checks that): a new alias of rb's storage, bound to f->out_value with
 * rb's layout, when writing there is safe; else -1 (copy as before).
 * Safe: the fused result is no graph output, rb is plain arena memory every
 * value of which dies at the fused Add (xplan_inplace_ok), and none of the
 * step's other inputs `reads` shares that storage.  TSOPT_SKIP=residual_inplace
 * turns it off (A/B measurements). */
int xd_residual_dst(xplan *p, const xd_fuse *f, int rb, const int *reads, int nreads);

#endif
