/* If, Loop and Scan in the fast runtime: each body is a nested plan, built
 * once with the outer plan and run per iteration (per branch taken) on
 * the step's buffers; the iteration semantics are the reference kernel's
 * (ts_cf_execute, src/ops/control_flow.c), so both paths agree by
 * construction.  A run allocates the loop's working tensors (carried
 * values, slices): unlike other steps, control flow is not allocation
 * free.  A body the fast runtime cannot plan (TS_ERR_UNSUPPORTED) leaves
 * the node to the reference kernel, which runs bodies in the interpreter. */
#include <stdlib.h>
#include <string.h>
#include "exec/plan_internal.h"
#include "ops/control_flow.h"

typedef struct cf_state {
    const ts_node *node;
    ts_plan *plans[TS_CF_MAX_BODIES];
    int nin, nout;
    ts_tensor *tin, *tout;
    const ts_tensor **pin;
    ts_tensor **pout;
    bool failed;
    ts_error err;
} cf_state;

static void cf_destroy(void *state)
{
    cf_state *st = state;
    if (!st) return;
    for (int k = 0; k < TS_CF_MAX_BODIES; k++) ts_plan_free(st->plans[k]);
    free(st->tin);
    free(st->tout);
    free(st->pin);
    free(st->pout);
    free(st);
}

static ts_status cf_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    cf_state *st = calloc(1, sizeof *st);
    if (!st) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    s->state = st;
    st->node = nd;
    /* the bodies first: one the fast runtime cannot plan declines the node
     * before the outer plan is touched */
    ts_body *bodies[TS_CF_MAX_BODIES];
    int nb = ts_cf_bodies(nd, bodies);
    ts_plan_opts o = p->opts;
    o.release_packed_weights = false; /* a body the plan declines runs in the interpreter, on its weights */
    for (int k = 0; k < nb; k++) {
        ts_status r = ts_plan_build(bodies[k]->g, &o, &st->plans[k], err);
        if (r) {
            if (r != TS_ERR_UNSUPPORTED) ts_error_prefix(err, "node '%s' (%s): body '%s'", nd->name, nd->op->name,
                                                         bodies[k]->g->name);
            return r;
        }
    }
    if (xstep_alloc(s, nd->ninputs, nd->noutputs, err)) return err->code;
    for (int j = 0; j < nd->ninputs; j++) {
        int v = nd->inputs[j];
        if (v < 0) continue;
        int b = xplan_value_buf(p, v);
        if (b < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        if ((s->in[j] = xplan_plain(p, b, err)) < 0) return err->code;
    }
    for (int o = 0; o < nd->noutputs; o++)
        if ((s->out[o] = xplan_value_buf(p, nd->outputs[o])) < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    size_t ni = (size_t)nd->ninputs, no = (size_t)nd->noutputs;
    st->nin = nd->ninputs;
    st->nout = nd->noutputs;
    st->tin = calloc(ni + 1, sizeof *st->tin);
    st->tout = calloc(no + 1, sizeof *st->tout);
    st->pin = calloc(ni + 1, sizeof *st->pin);
    st->pout = calloc(no + 1, sizeof *st->pout);
    if (!st->tin || !st->tout || !st->pin || !st->pout) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
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
    }
    return TS_OK;
}

static ts_status plan_body_run(void *ctx, int body, ts_tensor *const *in, ts_tensor *const *out, ts_error *err)
{
    cf_state *st = ctx;
    return ts_plan_run(st->plans[body], in, out, err);
}

static ts_dtype plan_storage(void *ctx, ts_dtype dt)
{
    (void)ctx;
    return dt;
}

static void cf_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    (void)scratch;
    cf_state *st = s->state;
    for (int j = 0; j < st->nin; j++)
        if (st->pin[j]) st->tin[j].data = in[j];
    for (int o = 0; o < st->nout; o++) st->tout[o].data = out[o];
    st->err.code = TS_OK;
    st->err.msg[0] = 0;
    ts_cf_runner r = {plan_body_run, plan_storage, st};
    st->failed = ts_cf_execute(st->node, &r, st->pin, st->pout, &st->err) != TS_OK;
}

bool xk_cf_take_error(const xstep *s, ts_error *err)
{
    cf_state *st = s->state;
    if (!st->failed) return false;
    *err = st->err;
    if (!err->code) err->code = TS_ERR_INVALID;
    if (!strstr(err->msg, st->node->name)) ts_error_prefix(err, "node '%s' (%s)", st->node->name, st->node->op->name);
    return true;
}

const xkernel xk_cf = {"control_flow", cf_build, cf_run, cf_destroy};

const xentry xkernels_cf[] = {
    {&ts_op_if, &xk_cf},
    {&ts_op_loop, &xk_cf},
    {&ts_op_scan, &xk_cf},
    {NULL, NULL},
};
