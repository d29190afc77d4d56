/* The fast runtime's kernel for eOperators (EinNetOp, src/ops/einnet_op.c):
 * the node's expression compiled to native code (src/einnet/codegen.c) at
 * plan time, called on plain float32 buffers at run time.  It declines
 * (the reference kernel, which evaluates the expression, runs instead)
 * what the generator does not cover and whenever no kernel can be made --
 * no compiler, a compile error, a load error; TSOPT_DEBUG=1 says why. */
#include <stdlib.h>
#include "ein/codegen.h"
#include "vec/vec.h"
#include "ops/list.h"

typedef struct eop_state {
    ts_ein_kernel *k;
    int threads;
} eop_state;

static ts_status eop_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    const ts_ein *e = nd->attrs;
    if (nd->ninputs != e->ninputs || nd->noutputs != 1) return TS_ERR_UNSUPPORTED;
    for (int i = 0; i < nd->ninputs; i++)
        if (nd->inputs[i] < 0 || p->g->values[nd->inputs[i]].dtype != TS_F32) return TS_ERR_UNSUPPORTED;
    if (p->g->values[nd->outputs[0]].dtype != TS_F32) return TS_ERR_UNSUPPORTED;
    ts_error why = {0};
    ts_ein_kernel *k;
    if (ts_ein_compile(e, &k, &why)) return TS_ERR_UNSUPPORTED; /* the reference kernel runs it */
    eop_state *es = xv_state(sizeof *es, err);
    if (!es) {
        ts_ein_kernel_free(k);
        return err->code;
    }
    *es = (eop_state){k, xv_threads(p)};
    s->state = es;
    s->scratch_bytes = k->scratch_floats * sizeof(float);
    return xv_bind_io(p, n, s, err);
}

static void eop_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    const eop_state *es = s->state;
    const float *ins[EIN_MAX_INPUTS];
    for (int i = 0; i < s->nin && i < EIN_MAX_INPUTS; i++) ins[i] = in[i];
    es->k->fn(ins, out[0], scratch, es->threads);
}

static void eop_destroy(void *state)
{
    eop_state *es = state;
    if (es) ts_ein_kernel_free(es->k);
    free(es);
}

const xkernel xk_einnet = {"einnet.eop", eop_build, eop_run, eop_destroy};
