/* Softmax and LogSoftmax.  Before opset 13 the input is coerced to 2-D at
 * `axis` (default 1) and the softmax runs over the whole flattened trailing
 * block; from opset 13 it runs along the single axis (default -1).  Which
 * rule applies is fixed at parse time from the graph's opset, so a node
 * keeps its meaning when copied.  Float-only. */
#include <math.h>
#include "ops/elementwise.h"
#include "ops/attrs.h"

static ts_status softmax_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_softmax_attrs *p = attrs;
    p->flatten = opset < 13;
    return ts_attr_get_int(a, na, "axis", p->flatten ? 1 : -1, &p->axis, err);
}

static int softmax_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_int("axis", ((const ts_softmax_attrs *)attrs)->axis);
    return 1;
}

static ts_status softmax_infer(ts_infer_ctx *c)
{
    const ts_softmax_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int axis, rank = x->shape.rank;
    if (!ts_dtype_is_float(x->dtype))
        return ts_infer_fail(c, "input '%s' has type %s, expected a float type", x->name, ts_dtype_name(x->dtype));
    /* a scalar has no axis; ONNX Runtime rejects it too */
    if (!ts_axis_norm(p->axis, rank, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for rank %d (expected %d to %d)", (long long)p->axis,
                             rank, -rank, rank - 1);
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = x->shape;
    return TS_OK;
}

/* Views the input as [outer, len, inner] and normalizes along len. */
static ts_status softmax_run(ts_kernel_ctx *k, bool log_out)
{
    const ts_softmax_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    const ts_shape *s = &x->shape;
    int axis;
    if (need_float_domain(k)) return k->err->code;
    if (!ts_axis_norm(p->axis, s->rank, &axis))
        return ts_kernel_fail(k, TS_ERR_INVALID, "axis %lld is out of range", (long long)p->axis);
    int64_t outer = 1, len = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= s->dims[d];
    for (int d = axis; d < s->rank; d++) {
        if (d == axis || p->flatten)
            len *= s->dims[d];
        else
            inner *= s->dims[d];
    }
    const ts_num *num = k->num;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in;
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < len; j++) m = fmax(m, el_get(num, x, base + j * inner));
            for (int64_t j = 0; j < len; j++) sum += exp(el_get(num, x, base + j * inner) - m);
            for (int64_t j = 0; j < len; j++) {
                double v = el_get(num, x, base + j * inner) - m;
                el_set(num, y, base + j * inner, log_out ? v - log(sum) : exp(v) / sum);
            }
        }
    return TS_OK;
}

static ts_status softmax_kernel(ts_kernel_ctx *k) { return softmax_run(k, false); }
static ts_status logsoftmax_kernel(ts_kernel_ctx *k) { return softmax_run(k, true); }

/* max, subtract, exp, sum, divide: about 5 flops per element */
static double softmax_flops(const ts_node *n, const ts_graph *g)
{
    return 5.0 * (double)ts_shape_numel(&g->values[n->outputs[0]].shape);
}

const ts_op_desc ts_op_softmax = {.opset_min = 1, 
    .name = "Softmax", .attr_size = sizeof(ts_softmax_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .parse = softmax_parse, .emit = softmax_emit, .infer = softmax_infer,
    .kernel = softmax_kernel, .flops = softmax_flops,
};
const ts_op_desc ts_op_logsoftmax = {.opset_min = 1, 
    .name = "LogSoftmax", .attr_size = sizeof(ts_softmax_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .parse = softmax_parse, .emit = softmax_emit, .infer = softmax_infer,
    .kernel = logsoftmax_kernel, .flops = softmax_flops,
};
