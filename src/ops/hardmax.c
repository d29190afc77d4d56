/* Hardmax: 1 at the first maximum along the axis, 0 elsewhere.  From
 * opset 13 the axis (default -1) is one dimension; before, the input is
 * seen as 2-D [prod(dims[:axis]), prod(dims[axis:])] (axis default 1), as
 * Softmax did.  Compares real values: float domains only. */
#include <math.h>
#include "ops/elementwise.h"

typedef struct hardmax_attrs {
    int64_t axis;
} hardmax_attrs;

static ts_status hm_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    return ts_attr_get_int(a, na, "axis", opset >= 13 ? -1 : 1, &((hardmax_attrs *)attrs)->axis, err);
}

static int hm_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_int("axis", ((const hardmax_attrs *)attrs)->axis);
    return 1;
}

static ts_status hm_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0];
    int axis;
    if (!ts_dtype_is_float(x->dtype))
        return ts_infer_fail(c, "input '%s' has type %s, expected a float type", x->name, ts_dtype_name(x->dtype));
    if (!ts_axis_norm(((const hardmax_attrs *)c->attrs)->axis, x->shape.rank, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for rank %d",
                             (long long)((const hardmax_attrs *)c->attrs)->axis, x->shape.rank);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = x->shape;
    return TS_OK;
}

static ts_status hm_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0];
    int axis, r = x->shape.rank;
    if (need_float_domain(k)) return k->err->code;
    ts_axis_norm(((const hardmax_attrs *)k->attrs)->axis, r, &axis);
    /* outer x n x inner; the old form has inner 1 and n the flattened tail */
    int64_t outer = 1, n = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->shape.dims[d];
    if (k->opset >= 13) {
        n = x->shape.dims[axis];
        for (int d = axis + 1; d < r; d++) inner *= x->shape.dims[d];
    } else
        for (int d = axis; d < r; d++) n *= x->shape.dims[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i, best = 0;
            double bv = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                double v = el_get(k->num, x, base + j * inner);
                if (v > bv) bv = v, best = j;
            }
            for (int64_t j = 0; j < n; j++) el_set(k->num, k->out[0], base + j * inner, j == best && n ? 1 : 0);
        }
    return TS_OK;
}

const ts_op_desc ts_op_hardmax = {.opset_min = 1, 
    .name = "Hardmax", .attr_size = sizeof(hardmax_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .parse = hm_parse, .emit = hm_emit, .infer = hm_infer, .kernel = hm_kernel,
};
