/* Identity and Dropout (inference form: output = input; the optional mask
 * is all true; ratio and training_mode are ignored). */
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

const ts_op_desc ts_op_identity = {
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

const ts_op_desc ts_op_dropout = {
    .name = "Dropout", .attr_size = sizeof(dropout_attrs), .min_inputs = 1, .max_inputs = 3, .min_outputs = 1,
    .max_outputs = 2, .flags = TS_OP_EXACT | TS_OP_MOVEMENT | TS_OP_ELEMENTWISE | TS_OP_RANDOM, .linear_inputs = 0x1,
    .parse = dropout_parse, .emit = dropout_emit, .infer = copy_infer, .kernel = copy_kernel, .flops = no_flops,
};
