/* The reference kernel as a plan step: the node's descriptor kernel (src/ops)
 * runs in the float32 domain (float64 for a node whose floats are all
 * float64) directly on the plan's buffers.  The ts_tensor wrappers it needs
 * are made at plan time and only get their data pointers at run time, so
 * the step itself allocates nothing (some reference kernels allocate their
 * own temporaries: im2col in Conv, tables in Resize).  It is the fallback
 * for every node no fast kernel takes, so it must accept everything the
 * interpreter accepts. */
#include <stdlib.h>
#include <string.h>
#include "exec/plan_internal.h"
#include "ops/list.h"

typedef struct ref_state {
    const ts_node *node;
    int opset;
    const ts_num *num;
    int nin, nout;
    ts_tensor *tin, *tout;
    const ts_tensor **pin;
    ts_tensor **pout;
    bool *zero; /* output needs zeroing first (reference kernels expect it) */
    bool convert; /* Cast between float32 and float64: no domain holds both */
    bool failed;
    ts_error err;
} ref_state;

/* Element-wise operators whose reference kernel reads x[i] before writing
 * y[i] and nothing else: safe to run with y aliasing x. */
static bool inplace_safe(const ts_op_desc *op)
{
    static const ts_op_desc *const ops[] = {&ts_op_relu, &ts_op_neg,        &ts_op_abs, &ts_op_sqrt,
                                            &ts_op_exp,  &ts_op_log,        &ts_op_reciprocal,
                                            &ts_op_erf,  &ts_op_sigmoid,    &ts_op_tanh, NULL};
    for (int i = 0; ops[i]; i++)
        if (ops[i] == op) return true;
    return false;
}

static bool slot_free_output(const xplan *p, int v)
{
    for (int i = 0; i < p->g->noutputs; i++)
        if (p->g->outputs[i] == v) return false;
    return true;
}

static ts_status ref_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    bool f32 = false, f64 = false;
    for (int j = 0; j < nd->ninputs + nd->noutputs; j++) {
        int v = j < nd->ninputs ? nd->inputs[j] : nd->outputs[j - nd->ninputs];
        if (v < 0) continue;
        f32 |= g->values[v].dtype == TS_F32;
        f64 |= g->values[v].dtype == TS_F64;
    }
    bool convert = f32 && f64 && nd->op == &ts_op_cast;
    if (f32 && f64 && !convert)
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "node '%s' (%s): mixes float32 and float64 tensors, which the fast runtime "
                            "does not run (use the reference interpreter)",
                            nd->name, nd->op->name);
    if (xstep_alloc(s, nd->ninputs, nd->noutputs, err)) return err->code;
    for (int j = 0; j < nd->ninputs; j++) {
        int v = nd->inputs[j];
        if (v < 0) continue;
        int b = xplan_value_buf(p, v);
        if (b < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        if ((s->in[j] = xplan_plain(p, b, err)) < 0) return err->code;
    }
    /* In place when the op allows it and nothing else needs the input. */
    int in0 = nd->ninputs == 1 ? s->in[0] : -1;
    bool inplace = in0 >= 0 && inplace_safe(nd->op) && !p->opts.no_fusion &&
                   p->bufs[in0].dtype == g->values[nd->outputs[0]].dtype &&
                   p->bufs[in0].bytes == (size_t)ts_shape_numel(&g->values[nd->outputs[0]].shape) *
                                             ts_dtype_size(p->bufs[in0].dtype) &&
                   slot_free_output(p, nd->outputs[0]) && xplan_inplace_ok(p, in0, n);
    for (int o = 0; o < nd->noutputs; o++) {
        int v = nd->outputs[o], b;
        if (inplace && o == 0) {
            b = xplan_new_buf(p, v, g->values[v].dtype, &g->values[v].shape);
            if (b >= 0) {
                p->bufs[b].kind = XB_ALIAS;
                p->bufs[b].alias_of = xbuf_root(p, in0);
                xplan_bind_value(p, v, b);
            }
        } else {
            b = xplan_value_buf(p, v);
        }
        if (b < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        s->out[o] = b;
    }
    size_t ni = (size_t)nd->ninputs, no = (size_t)nd->noutputs;
    ref_state *st = calloc(1, sizeof *st);
    if (!st) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    s->state = st;
    st->tin = calloc(ni + 1, sizeof *st->tin);
    st->tout = calloc(no + 1, sizeof *st->tout);
    st->pin = calloc(ni + 1, sizeof *st->pin);
    st->pout = calloc(no + 1, sizeof *st->pout);
    st->zero = calloc(no + 1, sizeof *st->zero);
    if (!st->tin || !st->tout || !st->pin || !st->pout || !st->zero)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    st->node = nd;
    st->opset = g->opset;
    st->num = ts_num_get(f64 ? TS_DOMAIN_F64 : TS_DOMAIN_F32);
    st->nin = nd->ninputs;
    st->nout = nd->noutputs;
    st->convert = convert;
    for (int j = 0; j < nd->ninputs; j++) {
        if (s->in[j] < 0) continue;
        const xbuf *b = &p->bufs[s->in[j]];
        st->tin[j] = (ts_tensor){.dtype = b->dtype, .shape = b->shape, .nbytes = b->bytes, .refcount = 1};
        st->pin[j] = &st->tin[j];
    }
    for (int o = 0; o < nd->noutputs; o++) {
        const xbuf *b = &p->bufs[s->out[o]];
        st->tout[o] = (ts_tensor){.dtype = b->dtype, .shape = b->shape, .nbytes = b->bytes, .refcount = 1};
        st->pout[o] = &st->tout[o];
        st->zero[o] = !(inplace && o == 0);
    }
    return TS_OK;
}

static void ref_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    (void)scratch;
    ref_state *st = s->state;
    for (int j = 0; j < st->nin; j++)
        if (st->pin[j]) st->tin[j].data = in[j];
    for (int o = 0; o < st->nout; o++) {
        st->tout[o].data = out[o];
        if (st->zero[o] && st->tout[o].nbytes) memset(out[o], 0, st->tout[o].nbytes);
    }
    if (st->convert) { /* element by element through double: exact both ways */
        int64_t n = ts_tensor_numel(&st->tout[0]);
        for (int64_t i = 0; i < n; i++) ts_tensor_set_f64(&st->tout[0], i, ts_tensor_get_f64(&st->tin[0], i));
        st->failed = false;
        return;
    }
    st->err.code = TS_OK;
    st->err.msg[0] = 0;
    ts_kernel_ctx k = {.node = st->node, .attrs = st->node->attrs, .opset = st->opset, .num = st->num,
                       .nin = st->nin, .in = st->pin, .nout = st->nout, .out = st->pout, .err = &st->err};
    st->failed = st->node->op->kernel(&k) != TS_OK;
}

static void ref_destroy(void *state)
{
    ref_state *st = state;
    if (!st) return;
    free(st->tin);
    free(st->tout);
    free(st->pin);
    free(st->pout);
    free(st->zero);
    free(st);
}

bool xk_ref_take_error(const xstep *s, ts_error *err)
{
    ref_state *st = s->state;
    if (!st->failed) return false;
    *err = st->err;
    if (!err->code) err->code = TS_ERR_INVALID;
    if (!strstr(err->msg, st->node->name))
        ts_error_prefix(err, "node '%s' (%s)", st->node->name, st->node->op->name);
    return true;
}

const xkernel xk_ref = {"ref", ref_build, ref_run, ref_destroy};
