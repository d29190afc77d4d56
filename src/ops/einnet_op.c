/* tsopt.EinNetOp (the ai.tsopt EinNetOp; the dot marks an
 * internal operator, never read from a file): an eOperator, a node that computes one
 * EinNet expression (src/einnet/, docs/einnet.md) given as the string
 * attribute `expr` (ts_ein_to_text).  Its reference kernel evaluates the
 * expression point by point (einnet/eval.c), in any number domain the
 * expression allows (RELU and DIV have no exact value), so the reference
 * interpreter and the optimizer's checks see it as any other operator;
 * the fast runtime runs the compiled kernel (src/vec/einnet_kernel.c).
 *
 * Written to a file, it is a call of a model-local function of the domain
 * ai.tsopt whose body is the expression in standard operators (the
 * exporter builds it: einnet/function.h), so ONNX Runtime runs the file
 * and tsopt's importer reads the call back as this operator.  Its
 * attributes keep the text they were parsed from, which emit writes. */
#include <stdlib.h>
#include <string.h>
#include "ein/expr.h"
#include "ops/op.h"

#define EIN_TEXT_MAX 16384

/* The parsed expression first (kernels read attrs as a ts_ein), then the
 * text it was parsed from, for emit: attributes are plain data, copied
 * with memcpy, so the text is held inline. */
typedef struct einop_attrs {
    ts_ein e;
    char text[EIN_TEXT_MAX + 1];
} einop_attrs;

static ts_status einop_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    const ts_attr *x = ts_attr_find(a, na, "expr");
    if (!x) return ts_error_set(err, TS_ERR_INVALID, "attribute 'expr': missing (EinNetOp needs its expression)");
    if (x->kind != TS_ATTR_STRING || !x->s) return ts_attr_fail(err, x, "must be a string");
    if (strlen(x->s) > EIN_TEXT_MAX) return ts_attr_fail(err, x, "is longer than any expression");
    einop_attrs *w = attrs;
    ts_status st = ts_ein_from_text(x->s, &w->e, err);
    if (st) return ts_error_prefix(err, "attribute 'expr'"), st;
    memcpy(w->text, x->s, strlen(x->s) + 1);
    return TS_OK;
}

static int einop_emit(const void *attrs, ts_attr *out, int max)
{
    const einop_attrs *w = attrs;
    if (max < 1) return -1;
    out[0] = ts_attr_string("expr", w->text);
    return 1;
}

static ts_status einop_infer(ts_infer_ctx *c)
{
    const ts_ein *e = c->attrs;
    if (c->nin != e->ninputs)
        return ts_infer_fail(c, "%d inputs, its expression reads %d", c->nin, e->ninputs);
    for (int i = 0; i < c->nin; i++) {
        char a[160], b[160];
        if (!c->in[i]) return ts_infer_fail(c, "input %d is absent", i);
        if (!ts_dtype_is_float(c->in[i]->dtype)) return ts_infer_fail(c, "input %d is not a float tensor", i);
        if (!ts_shape_eq(&c->in[i]->shape, &e->in_shape[i]))
            return ts_infer_fail(c, "input %d has shape %s, its expression reads %s", i,
                                 ts_shape_str(&c->in[i]->shape, a, sizeof a), ts_shape_str(&e->in_shape[i], b, sizeof b));
        if (c->in[i]->dtype != c->in[0]->dtype) return ts_infer_fail(c, "inputs of different dtypes");
    }
    c->out_dtype[0] = c->nin ? c->in[0]->dtype : TS_F32;
    c->out_shape[0] = e->out_shape;
    return TS_OK;
}

static ts_status einop_kernel(ts_kernel_ctx *k)
{
    ts_tensor *r = NULL;
    ts_status st = ts_ein_eval(k->attrs, k->num, k->in, &r, k->err);
    if (st) return ts_error_prefix(k->err, "node '%s' (EinNetOp)", k->node->name), st;
    if (r->nbytes != k->out[0]->nbytes) {
        ts_tensor_unref(r);
        return ts_kernel_fail(k, TS_ERR_INVALID, "expression result of another size than the output");
    }
    memcpy(k->out[0]->data, r->data, r->nbytes);
    ts_tensor_unref(r);
    return TS_OK;
}

/* Multiply-adds of the evaluation: two flops per traversal x summation point. */
static double einop_flops(const ts_node *n, const ts_graph *g)
{
    (void)g;
    return 2.0 * (double)ts_ein_points(n->attrs);
}

const ts_op_desc ts_op_einnet = {
    .name = "tsopt.EinNetOp", /* internal (the dot): never an ai.onnx operator */
    .attr_size = sizeof(einop_attrs),
    .min_inputs = 0,
    .max_inputs = EIN_MAX_INPUTS,
    .min_outputs = 1,
    .max_outputs = 1,
    .opset_min = 1,
    .parse = einop_parse,
    .emit = einop_emit,
    .infer = einop_infer,
    .kernel = einop_kernel,
    .flops = einop_flops,
};
