/* The element type of an input read from .npy, against the model's.
 * numpy has no bfloat16: besides the 2-byte void that ml_dtypes' np.save
 * writes (read as bfloat16 by ts_npy_load), a bfloat16 input may come as
 * '<u2' holding the bits, as ONNX 1.12's numpy_helper and backend data
 * and ONNX Runtime's Python API keep bfloat16 (docs/conformance.md, ".npy
 * files"). */
#include "cli/cli.h"

bool cli_npy_dtype_fits(ts_tensor *t, ts_dtype want)
{
    if (t->dtype == TS_U16 && want == TS_BF16) t->dtype = TS_BF16; /* same 16 bits */
    return t->dtype == want;
}
