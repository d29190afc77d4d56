/* HannWindow, HammingWindow, BlackmanWindow (opset 17): the window of
 * `size` samples (a scalar input: it sets the output shape, so it must be
 * known when the graph is built), periodic (default: denominator size)
 * or symmetric (size - 1), of element type output_datatype (an ONNX type
 * code, default float). */
#include <math.h>
#include "ops/elementwise.h"

typedef struct swin_attrs {
    int64_t onnx_dtype;
    int periodic;
} swin_attrs;

static ts_status swin_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    swin_attrs *p = attrs;
    int64_t per;
    (void)opset;
    if (ts_attr_get_int(a, na, "output_datatype", 1, &p->onnx_dtype, err) ||
        ts_attr_get_int(a, na, "periodic", 1, &per, err))
        return err->code;
    if (ts_dtype_from_onnx(p->onnx_dtype) == TS_UNDEFINED)
        return ts_attr_fail(err, ts_attr_find(a, na, "output_datatype"), "element type not supported");
    p->periodic = per != 0;
    return TS_OK;
}

static int swin_emit(const void *attrs, ts_attr *out, int max)
{
    const swin_attrs *p = attrs;
    if (max < 2) return 0;
    out[0] = ts_attr_int("output_datatype", p->onnx_dtype);
    out[1] = ts_attr_int("periodic", p->periodic);
    return 2;
}

static ts_status swin_infer(ts_infer_ctx *c)
{
    const swin_attrs *p = c->attrs;
    int64_t size;
    int n;
    if (ts_shape_numel(&c->in[0]->shape) != 1) return ts_infer_fail(c, "size ('%s') must be a scalar", c->in[0]->name);
    if (ts_infer_const_ints(c, 0, &size, 1, &n)) return c->err->code;
    if (size < 0 || size > TS_MAX_ELEMENTS) return ts_infer_fail(c, "size %lld is out of range", (long long)size);
    c->out_dtype[0] = ts_dtype_from_onnx(p->onnx_dtype);
    c->out_shape[0] = ts_shape_make(1, &size);
    return TS_OK;
}

/* cos terms of each window: w(n) = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) */
static ts_status swin_run(ts_kernel_ctx *k, double a0, double a1, double a2)
{
    const swin_attrs *p = k->attrs;
    ts_tensor *y = k->out[0];
    bool flt = y->dtype == k->num->storage;
    if (flt && need_float_domain(k)) return k->err->code;
    int64_t size = ts_tensor_numel(y);
    double den = (double)(p->periodic ? size : size - 1);
    for (int64_t i = 0; i < size; i++) {
        double t = den > 0 ? 2 * M_PI * (double)i / den : 0;
        double v = a0 - a1 * cos(t) + a2 * cos(2 * t);
        if (flt) el_set(k->num, y, i, v);
        else ts_tensor_set_f64(y, i, v);
    }
    return TS_OK;
}

static ts_status hann_kernel(ts_kernel_ctx *k) { return swin_run(k, 0.5, 0.5, 0); }
static ts_status hamming_kernel(ts_kernel_ctx *k) { return swin_run(k, 25.0 / 46, 21.0 / 46, 0); }
static ts_status blackman_kernel(ts_kernel_ctx *k) { return swin_run(k, 0.42, 0.5, 0.08); }

#define SWIN(NAME) .opset_min = 17, .name = NAME, .attr_size = sizeof(swin_attrs), .min_inputs = 1, .max_inputs = 1, \
                   .min_outputs = 1, .max_outputs = 1, .parse = swin_parse, .emit = swin_emit, .infer = swin_infer
const ts_op_desc ts_op_hann_window = {SWIN("HannWindow"), .kernel = hann_kernel};
const ts_op_desc ts_op_hamming_window = {SWIN("HammingWindow"), .kernel = hamming_kernel};
const ts_op_desc ts_op_blackman_window = {SWIN("BlackmanWindow"), .kernel = blackman_kernel};
