/* Det (opset 11): determinant of each square matrix in the last two
 * dimensions, by Gaussian elimination with partial pivoting in double. */
#include <math.h>
#include <stdlib.h>
#include "ops/elementwise.h"

static ts_status det_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0];
    int r = x->shape.rank;
    if (!ts_dtype_is_float(x->dtype)) return ts_infer_fail(c, "input '%s' must be a float tensor", x->name);
    if (r < 2 || x->shape.dims[r - 1] != x->shape.dims[r - 2])
        return ts_infer_fail(c, "input '%s' must end in square matrices", x->name);
    ts_shape o = x->shape;
    o.rank -= 2;
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = o;
    return TS_OK;
}

static ts_status det_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0];
    if (need_float_domain(k)) return k->err->code;
    int64_t m = x->shape.dims[x->shape.rank - 1], mats = ts_tensor_numel(k->out[0]);
    double *a = malloc(sizeof *a * (size_t)(m * m + 1));
    if (!a) return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    for (int64_t b = 0; b < mats; b++) {
        for (int64_t i = 0; i < m * m; i++) a[i] = el_get(k->num, x, b * m * m + i);
        double det = 1;
        for (int64_t c = 0; c < m && det != 0; c++) {
            int64_t piv = c;
            for (int64_t r = c + 1; r < m; r++)
                if (fabs(a[r * m + c]) > fabs(a[piv * m + c])) piv = r;
            if (a[piv * m + c] == 0) {
                det = 0;
                break;
            }
            if (piv != c) {
                for (int64_t j = 0; j < m; j++) {
                    double t = a[c * m + j];
                    a[c * m + j] = a[piv * m + j];
                    a[piv * m + j] = t;
                }
                det = -det;
            }
            det *= a[c * m + c];
            for (int64_t r = c + 1; r < m; r++) {
                double f = a[r * m + c] / a[c * m + c];
                for (int64_t j = c; j < m; j++) a[r * m + j] -= f * a[c * m + j];
            }
        }
        el_set(k->num, k->out[0], b, det);
    }
    free(a);
    return TS_OK;
}

const ts_op_desc ts_op_det = {.opset_min = 11, 
    .name = "Det", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = det_infer,
    .kernel = det_kernel,
};
