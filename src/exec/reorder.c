/* Layout conversion step: a oneDNN reorder from one buffer's layout to
 * another's (blocked <-> plain).  Inserted by xplan_plain for plain readers
 * of a blocked tensor, and for graph outputs left in a blocked layout.  The
 * memory objects are made at plan time with no storage; running only sets
 * their data handles. */
#include <stdlib.h>
#include "exec/plan_internal.h"

typedef struct reorder_state {
    dnnl_primitive_t prim;
    dnnl_memory_t src, dst;
    dnnl_stream_t stream;
} reorder_state;

static bool dnnl_type(ts_dtype t, dnnl_data_type_t *out)
{
    switch (t) {
    case TS_F32: *out = dnnl_f32; return true;
    case TS_I32: *out = dnnl_s32; return true;
    case TS_I8: *out = dnnl_s8; return true;
    case TS_U8:
    case TS_BOOL: *out = dnnl_u8; return true;
    default: return false;
    }
}

/* The buffer's layout: its md when blocked, else row-major strides. */
static bool buf_md(const xbuf *b, dnnl_memory_desc_t *md)
{
    if (b->blocked) {
        *md = b->md;
        return true;
    }
    dnnl_data_type_t dt;
    dnnl_dims_t dims, strides;
    int rank = b->shape.rank ? b->shape.rank : 1;
    if (!dnnl_type(b->dtype, &dt) || rank > DNNL_MAX_NDIMS) return false;
    int64_t st = 1;
    for (int d = rank - 1; d >= 0; d--) {
        dims[d] = b->shape.rank ? b->shape.dims[d] : 1;
        strides[d] = st;
        st *= dims[d] ? dims[d] : 1;
    }
    return dnnl_memory_desc_init_by_strides(md, rank, dims, dt, strides) == dnnl_success;
}

static void reorder_destroy(void *state)
{
    reorder_state *r = state;
    if (!r) return;
    if (r->prim) dnnl_primitive_destroy(r->prim);
    if (r->src) dnnl_memory_destroy(r->src);
    if (r->dst) dnnl_memory_destroy(r->dst);
    free(r);
}

ts_status xreorder_build(xplan *p, xstep *s, ts_error *err)
{
    const xbuf *in = &p->bufs[s->in[0]], *out = &p->bufs[s->out[0]];
    dnnl_memory_desc_t smd, dmd;
    const char *what = s->node >= 0 ? p->g->nodes[s->node].name : "(graph input)";
    if (!buf_md(in, &smd) || !buf_md(out, &dmd))
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s': no layout conversion for %s tensors", what,
                            ts_dtype_name(in->dtype));
    reorder_state *r = calloc(1, sizeof *r);
    if (!r) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    s->state = r;
    r->stream = p->stream;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_reorder_primitive_desc_create(&pd, &smd, p->engine, &dmd, p->engine, NULL) != dnnl_success ||
        dnnl_primitive_create(&r->prim, pd) != dnnl_success ||
        dnnl_memory_create(&r->src, &smd, p->engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&r->dst, &dmd, p->engine, DNNL_MEMORY_NONE) != dnnl_success) {
        if (pd) dnnl_primitive_desc_destroy(pd);
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s': oneDNN cannot convert this layout", what);
    }
    dnnl_primitive_desc_destroy(pd);
    return TS_OK;
}

static ts_status reorder_build(xplan *p, int n, xstep *s, ts_error *err)
{
    (void)n; /* inserted by the planner with in[0]/out[0] set, never chosen for a node */
    if (s->nin != 1 || s->nout != 1) return ts_error_set(err, TS_ERR_UNSUPPORTED, "reorder: not a node kernel");
    return xreorder_build(p, s, err);
}

static void reorder_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    (void)scratch;
    reorder_state *r = s->state;
    dnnl_memory_set_data_handle(r->src, in[0]);
    dnnl_memory_set_data_handle(r->dst, out[0]);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, r->src}, {DNNL_ARG_TO, r->dst}};
    dnnl_primitive_execute(r->prim, r->stream, 2, args);
    dnnl_stream_wait(r->stream);
}

const xkernel xk_reorder = {"reorder", reorder_build, reorder_run, reorder_destroy};
