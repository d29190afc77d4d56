/* Identity and Dropout (inference form: output = input; the optional mask
 * is all true).  Dropout in training mode with a non-zero ratio draws
 * random numbers whose values the spec leaves to the implementation: it is
 * refused, naming the node, at inference when training_mode and ratio are
 * constants, else by the kernel when the run gives them (never a silent
 * identity). */
#include <string.h>
#include "ops/op.h"

static ts_status copy_infer(ts_infer_ctx *c)
{
    c->out_dtype[0] = c->in[0]->dtype;
    c->out_shape[0] = c->in[0]->shape;
    if (c->nout > 1) {
        c->out_dtype[1] = TS_BOOL;
        c->out_shape[1] = c->in[0]->shape;
    }
    return TS_OK;
}

static ts_status copy_kernel(ts_kernel_ctx *k)
{
    if (k->out[0]->nbytes) memcpy(k->out[0]->data, k->in[0]->data, k->out[0]->nbytes);
    if (k->nout > 1 && k->out[1]->nbytes) memset(k->out[1]->data, 1, k->out[1]->nbytes);
    return TS_OK;
}

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

const ts_op_desc ts_op_identity = {.opset_min = 1, 
    .name = "Identity", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_EXACT | TS_OP_MOVEMENT | TS_OP_ELEMENTWISE, .linear_inputs = 0x1, .expr = "L[i] A[i]",
    .infer = copy_infer, .kernel = copy_kernel, .flops = no_flops,
};

/* Dropout keeps its ratio attribute (opset < 12) so the export says what the
 * model said. */
typedef struct dropout_attrs {
    bool has_ratio;
    double ratio;
} dropout_attrs;

static ts_status dropout_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    dropout_attrs *p = attrs;
    (void)opset;
    p->has_ratio = ts_attr_find(a, na, "ratio") != NULL;
    return ts_attr_get_float(a, na, "ratio", 0.5, &p->ratio, err);
}

static int dropout_emit(const void *attrs, ts_attr *out, int max)
{
    const dropout_attrs *p = attrs;
    if (!p->has_ratio || max < 1) return 0;
    out[0] = ts_attr_float("ratio", p->ratio);
    return 1;
}

/* The ratio the node drops with: input 1 (a float scalar, in the domain's
 * storage at run time) or the opset < 12 attribute, 0.5 by default. */
static bool training_with_drops(const dropout_attrs *p, const ts_tensor *ratio, const ts_tensor *mode,
                                const ts_num *num, double *r)
{
    if (!mode || !mode->nbytes || !((const uint8_t *)mode->data)[0]) return false;
    *r = p->ratio;
    if (ratio && ratio->nbytes) {
        if (num && ratio->dtype == num->storage) *r = num->to_f64(ratio->data);
        else *r = ts_tensor_get_f64(ratio, 0);
    }
    return *r != 0;
}

#define TRAINING_WHY                                                                                        \
    "training_mode is true with ratio %g: the dropped elements are random draws the spec leaves to the "  \
    "implementation; tsopt runs Dropout for inference only (training_mode false, or ratio 0)"

static ts_status dropout_infer(ts_infer_ctx *c)
{
    const ts_value *ratio = c->nin > 1 ? c->in[1] : NULL, *mode = c->nin > 2 ? c->in[2] : NULL;
    if (ratio && (!ts_dtype_is_float(ratio->dtype) || ts_shape_numel(&ratio->shape) != 1))
        return ts_infer_fail(c, "ratio must be a float scalar");
    if (mode && (mode->dtype != TS_BOOL || ts_shape_numel(&mode->shape) != 1))
        return ts_infer_fail(c, "training_mode must be a bool scalar");
    double r;
    /* both known now: refuse at load; otherwise the kernel decides at run time */
    if (mode && mode->constant && (!ratio || ratio->constant) &&
        training_with_drops(c->attrs, ratio ? ratio->constant : NULL, mode->constant, NULL, &r))
        return ts_infer_fail(c, TRAINING_WHY, r);
    return copy_infer(c);
}

static ts_status dropout_kernel(ts_kernel_ctx *k)
{
    double r;
    if (training_with_drops(k->attrs, k->nin > 1 ? k->in[1] : NULL, k->nin > 2 ? k->in[2] : NULL, k->num, &r))
        return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, TRAINING_WHY, r);
    return copy_kernel(k);
}

const ts_op_desc ts_op_dropout = {.opset_min = 1, 
    .name = "Dropout", .attr_size = sizeof(dropout_attrs), .min_inputs = 1, .max_inputs = 3, .min_outputs = 1,
    .max_outputs = 2, .flags = TS_OP_EXACT | TS_OP_MOVEMENT | TS_OP_ELEMENTWISE | TS_OP_RANDOM, .linear_inputs = 0x1,
    .parse = dropout_parse, .emit = dropout_emit, .infer = dropout_infer, .kernel = dropout_kernel, .flops = no_flops,
};
