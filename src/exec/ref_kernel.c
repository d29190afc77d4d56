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
    /* float16/bfloat16 tensors: the kernel works on shadows in the domain's
     * storage (allocated here, at build), converted before and rounded
     * after; ts_dtype of the plan's buffer, TS_UNDEFINED for none */
    ts_dtype *narrow_in, *narrow_out;
    void **shadow_in, **shadow_out;
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

static bool narrow(ts_dtype t) { return t == TS_F16 || t == TS_BF16; }

/* Turns t (a narrow float tensor) into its domain-storage shadow: the
 * returned memory is what t->data will point at while the kernel runs. */
static void *shadow(ts_tensor *t, const ts_num *num)
{
    t->dtype = num->storage;
    t->nbytes = (size_t)ts_shape_numel(&t->shape) * num->size;
    return calloc(1, t->nbytes ? t->nbytes : 1);
}

static ts_status ref_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    bool f32 = false, f64 = false;
    for (int j = 0; j < nd->ninputs + nd->noutputs; j++) {
        int v = j < nd->ninputs ? nd->inputs[j] : nd->outputs[j - nd->ninputs];
        if (v < 0) continue;
        f32 |= g->values[v].dtype == TS_F32;
        f64 |= g->values[v].dtype == TS_F64;
    }
    bool convert = f32 && f64 && (nd->op == &ts_op_cast || nd->op == &ts_op_castlike);
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
    bool inplace = in0 >= 0 && inplace_safe(nd->op) && !p->opts.no_fusion && !narrow(p->bufs[in0].dtype) &&
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
    st->narrow_in = calloc(ni + 1, sizeof *st->narrow_in);
    st->narrow_out = calloc(no + 1, sizeof *st->narrow_out);
    st->shadow_in = calloc(ni + 1, sizeof *st->shadow_in);
    st->shadow_out = calloc(no + 1, sizeof *st->shadow_out);
    if (!st->narrow_in || !st->narrow_out || !st->shadow_in || !st->shadow_out)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int j = 0; j < nd->ninputs; j++) {
        if (s->in[j] < 0) continue;
        const xbuf *b = &p->bufs[s->in[j]];
        st->tin[j] = (ts_tensor){.dtype = b->dtype, .shape = b->shape, .nbytes = b->bytes, .refcount = 1};
        st->pin[j] = &st->tin[j];
        if (narrow(b->dtype)) {
            st->narrow_in[j] = b->dtype;
            if (!(st->shadow_in[j] = shadow(&st->tin[j], st->num))) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        }
    }
    for (int o = 0; o < nd->noutputs; o++) {
        const xbuf *b = &p->bufs[s->out[o]];
        st->tout[o] = (ts_tensor){.dtype = b->dtype, .shape = b->shape, .nbytes = b->bytes, .refcount = 1};
        st->pout[o] = &st->tout[o];
        st->zero[o] = !(inplace && o == 0);
        if (narrow(b->dtype)) {
            st->narrow_out[o] = b->dtype;
            st->zero[o] = true;
            if (!(st->shadow_out[o] = shadow(&st->tout[o], st->num))) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        }
    }
    return TS_OK;
}

static void ref_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    (void)scratch;
    ref_state *st = s->state;
    for (int j = 0; j < st->nin; j++) {
        if (!st->pin[j]) continue;
        st->tin[j].data = in[j];
        if (st->narrow_in[j]) {
            ts_tensor src = {.dtype = st->narrow_in[j], .shape = st->tin[j].shape, .data = in[j]};
            st->tin[j].data = st->shadow_in[j];
            for (int64_t i = 0, n = ts_tensor_numel(&src); i < n; i++)
                st->num->from_f64(ts_num_at(st->num, st->shadow_in[j], i), ts_tensor_get_f64(&src, i));
        }
    }
    for (int o = 0; o < st->nout; o++) {
        st->tout[o].data = st->narrow_out[o] ? st->shadow_out[o] : out[o];
        if (st->zero[o] && st->tout[o].nbytes) memset(st->tout[o].data, 0, st->tout[o].nbytes);
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
    st->failed = ts_kernel_u64_check(st->node, st->nin, st->pin, &st->err) || st->node->op->kernel(&k) != TS_OK;
    for (int o = 0; o < st->nout && !st->failed; o++) {
        if (!st->narrow_out[o]) continue; /* rounded to the narrow type once, here */
        ts_tensor dst = {.dtype = st->narrow_out[o], .shape = st->tout[o].shape, .data = out[o]};
        for (int64_t i = 0, n = ts_tensor_numel(&dst); i < n; i++)
            ts_tensor_set_f64(&dst, i, st->num->to_f64(ts_num_cat(st->num, st->shadow_out[o], i)));
    }
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
    for (int j = 0; st->shadow_in && j < st->nin; j++) free(st->shadow_in[j]);
    for (int o = 0; st->shadow_out && o < st->nout; o++) free(st->shadow_out[o]);
    free(st->narrow_in);
    free(st->narrow_out);
    free(st->shadow_in);
    free(st->shadow_out);
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
