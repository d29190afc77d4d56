/* Gelu (opset 20): y = 0.5 x (1 + erf(x / sqrt 2)), or with approximate =
 * "tanh" 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).  Before opset
 * 20 exporters spelled it out in element-wise nodes; opt/fuse_gelu.c
 * rewrites those spellings into this operator, which the fast runtime
 * computes as oneDNN's gelu_erf / gelu_tanh (a post-op of the MatMul, Gemm
 * or Conv before it, else one vectorized pass). */
#include <math.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/elementwise.h"

static ts_status gelu_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    ts_gelu_attrs *p = attrs;
    char s[8];
    if (ts_attr_get_string(a, na, "approximate", "none", s, sizeof s, err)) return err->code;
    if (strcmp(s, "none") && strcmp(s, "tanh"))
        return ts_error_set(err, TS_ERR_INVALID, "attribute 'approximate': '%s', expected 'none' or 'tanh'", s);
    p->tanh = !strcmp(s, "tanh");
    return TS_OK;
}

static int gelu_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1 || !((const ts_gelu_attrs *)attrs)->tanh) return 0; /* "none" is the default */
    out[0] = ts_attr_string("approximate", "tanh");
    return 1;
}

static ts_status gelu_infer(ts_infer_ctx *c)
{
    ts_dtype t = c->in[0]->dtype;
    if (!ts_dtype_is_float(t))
        return ts_infer_fail(c, "input '%s' has type %s, expected a float type", c->in[0]->name, ts_dtype_name(t));
    c->out_dtype[0] = t;
    c->out_shape[0] = c->in[0]->shape;
    return TS_OK;
}

double ts_gelu(double x, bool tanh_form)
{
    if (tanh_form) return 0.5 * x * (1 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x * 0.70710678118654752440));
}

static ts_status gelu_kernel(ts_kernel_ctx *k)
{
    if (need_float_domain(k)) return k->err->code;
    bool t = ((const ts_gelu_attrs *)k->attrs)->tanh;
    int64_t n = ts_tensor_numel(k->out[0]);
    for (int64_t i = 0; i < n; i++) el_set(k->num, k->out[0], i, ts_gelu(el_get(k->num, k->in[0], i), t));
    return TS_OK;
}

const ts_op_desc ts_op_gelu = {.opset_min = 20, .name = "Gelu", .min_inputs = 1, .max_inputs = 1,
                               .min_outputs = 1, .max_outputs = 1, .attr_size = sizeof(ts_gelu_attrs),
                               .flags = TS_OP_ELEMENTWISE, .parse = gelu_parse, .emit = gelu_emit,
                               .infer = gelu_infer, .kernel = gelu_kernel};
