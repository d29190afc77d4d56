/* Operator registry.  Each family file (list_*.c) exports a NULL-terminated
 * table of its descriptors; this file only chains the families. */
#include <string.h>
#include "ops/op.h"

extern const ts_op_desc *const ts_ops_nn[];     /* conv, pooling, normalization, matmul */
extern const ts_op_desc *const ts_ops_math[];   /* element-wise, activations, reductions */
extern const ts_op_desc *const ts_ops_tensor[]; /* data movement, shapes, constants */

static const ts_op_desc *const *const families[] = {ts_ops_nn, ts_ops_math, ts_ops_tensor};

const ts_op_desc *ts_op_at(int i)
{
    for (size_t f = 0; f < sizeof families / sizeof *families; f++)
        for (const ts_op_desc *const *d = families[f]; *d; d++)
            if (i-- == 0) return *d;
    return NULL;
}

/* Every node built looks its operator up here: walk the families once
 * (through ts_op_at the walk was quadratic in the number of operators). */
const ts_op_desc *ts_op_find(const char *name)
{
    for (size_t f = 0; f < sizeof families / sizeof *families; f++)
        for (const ts_op_desc *const *d = families[f]; *d; d++)
            if (!strcmp((*d)->name, name)) return *d;
    return NULL;
}
