/* Running a plan: bind the caller's inputs and outputs, resolve every
 * buffer's pointer, call each step.  Nothing is allocated: the argument
 * vectors live at the end of p->ptrs (sized at plan time).  Outputs are
 * written in place into the caller's tensors, which must not share storage
 * with the inputs. */
#include <omp.h>
#include "exec/plan_internal.h"
#include "exec/half.h"
#include "measure/step_timer.h"
#include "measure/wait_policy.h"

static ts_status check_tensor(const char *what, const ts_value *v, const ts_tensor *t, ts_error *err)
{
    char a[160], b[160];
    if (t && t->dtype == v->dtype && ts_shape_eq(&t->shape, &v->shape) &&
        t->nbytes >= (size_t)ts_shape_numel(&v->shape) * ts_dtype_size(v->dtype) && (t->data || !t->nbytes))
        return TS_OK;
    return ts_error_set(err, TS_ERR_INVALID, "%s '%s': expected %s %s, got %s %s", what, v->name,
                        ts_dtype_name(v->dtype), ts_shape_str(&v->shape, a, sizeof a),
                        t ? ts_dtype_name(t->dtype) : "nothing", t ? ts_shape_str(&t->shape, b, sizeof b) : "");
}

static ts_status plan_run(ts_plan *plan, ts_tensor *const *inputs, ts_tensor *const *outputs, ts_wait_run *w,
                          ts_error *err)
{
    xplan *p = (xplan *)plan;
    const ts_graph *g = p->g;
    for (int i = 0; i < g->ninputs; i++)
        if (check_tensor("input", &g->values[g->inputs[i]], inputs[i], err)) return err->code;
    for (int i = 0; i < g->noutputs; i++)
        if (check_tensor("output", &g->values[g->outputs[i]], outputs[i], err)) return err->code;
    omp_set_num_threads(p->opts.threads);
    char *arena = p->arena;
    for (int b = 0; b < p->nbufs; b++) {
        const xbuf *x = &p->bufs[b];
        switch (x->kind) {
        case XB_ARENA: p->ptrs[b] = arena + x->offset; break;
        case XB_INPUT: p->ptrs[b] = inputs[x->offset]->data; break;
        case XB_OUTPUT: p->ptrs[b] = outputs[x->offset]->data; break;
        case XB_CONST: p->ptrs[b] = x->data; break;
        case XB_ALIAS: break;
        }
    }
    for (int b = 0; b < p->nbufs; b++)
        if (p->bufs[b].kind == XB_ALIAS) p->ptrs[b] = (char *)p->ptrs[xbuf_root(p, b)] + p->bufs[b].offset;
    void **args = p->ptrs + p->nbufs;
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        void **in = args, **out = args + s->nin;
        for (int j = 0; j < s->nin; j++) in[j] = s->in[j] >= 0 ? p->ptrs[s->in[j]] : NULL;
        for (int j = 0; j < s->nout; j++) out[j] = p->ptrs[s->out[j]];
        /* the optional timer costs one test per step when off */
        double t0 = p->step_ms ? ts_clock_ms() : 0;
        s->k->run(s, in, out, s->scratch_bytes ? arena + s->scratch_offset : NULL);
        if (p->step_ms) p->step_ms[i] = ts_clock_ms() - t0;
        if (xhalf_inner(s)->k == &xk_ref && xk_ref_take_error(xhalf_inner(s), err)) return err->code;
        if (s->k == &xk_cf && xk_cf_take_error(s, err)) return err->code;
        if ((i & 15) == 15) ts_wait_run_poll(w); /* a long run is judged while it runs */
    }
    return TS_OK;
}

ts_status ts_plan_run(ts_plan *plan, ts_tensor *const *inputs, ts_tensor *const *outputs, ts_error *err)
{
    /* the OpenMP thread count is the caller's process-wide setting: give it
     * back as found */
    int caller_threads = omp_get_max_threads();
    /* how idle threads wait adapts to the machine's load, run by run */
    ts_wait_run w;
    ts_wait_run_begin(&w, ((xplan *)plan)->opts.threads);
    ts_status st = plan_run(plan, inputs, outputs, &w, err);
    ts_wait_run_end(&w);
    omp_set_num_threads(caller_threads);
    return st;
}
