/* Channel Concat of convolution outputs in mixed oneDNN layouts, on
 * oneDNN's concat primitive.
 *
 * vec.concat keeps a common dense layout (all inputs channels-last) as it
 * is; inputs in different layouts (Inception's branches: Winograd convs
 * write 16-channel blocks, 1x1 convs channels-last, a pooling plain) it
 * converts to plain first, concatenates plain, and every conv reading the
 * result converts it back inside its step: Inception-v3 spent 33 reorders
 * per run on that.  Here each input is converted once, straight into its
 * channel range of the output (oneDNN's concat writes each source through
 * a view of dst at its channel offset), and the result stays channels-last,
 * which the convs (brgconv), poolings and vec kernels after it read as is.
 * Not the inputs' common 16-channel blocks when they share them: the convs
 * after it then keep that layout through the rest of the network, where
 * oneDNN's blocked kernels were slower than brgconv on channels-last
 * (inception_v3, 1 thread, sum of per-step minima over 20 runs, load ~12:
 * convs 52.3-65 ms blocked vs 48-53 channels-last).  Declines (vec.concat then runs) for: another axis than 1, a graph
 * output, the plain_layout option, no input in a oneDNN layout, or inputs
 * already sharing one dense layout. */
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_util.h"
#include "vec/vec_layout.h"
#include "ops/attrs.h"

typedef struct concat_state {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    int nin;
    xd_mem *src; /* nin */
    xd_mem dst, pad;
    dnnl_exec_arg_t *args; /* nin + 2 */
} concat_state;

static void concat_destroy(void *state)
{
    concat_state *c = state;
    if (!c) return;
    if (c->prim) dnnl_primitive_destroy(c->prim);
    for (int j = 0; c->src && j < c->nin; j++) xd_mem_fini(&c->src[j]);
    xd_mem_fini(&c->dst);
    xd_mem_fini(&c->pad);
    free(c->src);
    free(c->args);
    free(c);
}

static void concat_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    concat_state *c = s->state;
    for (int j = 0; j < c->nin; j++) xd_mem_bind(&c->src[j], in[j], c->stream);
    xd_mem_bind(&c->dst, out[0], c->stream);
    xd_mem_bind(&c->pad, scratch, c->stream);
    dnnl_primitive_execute(c->prim, c->stream, c->nin + 2, c->args);
    dnnl_stream_wait(c->stream);
}

static ts_status make_pd(const xplan *p, int n, const dnnl_memory_desc_t *dst, int nin,
                         const dnnl_memory_desc_t *src, dnnl_primitive_desc_t *pd, ts_error *err)
{
    dnnl_primitive_attr_t attr;
    ts_status st = xd_check(dnnl_primitive_attr_create(&attr), p, n, "attr_create", err);
    if (st) return st;
    st = xd_check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), p, n, "scratchpad", err);
    if (!st)
        st = xd_check(dnnl_concat_primitive_desc_create(pd, dst, nin, 1, src, attr, p->engine), p, n, "concat", err);
    dnnl_primitive_attr_destroy(attr);
    return st;
}

static ts_status concat_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    int yv = nd->outputs[0], nin = nd->ninputs, axis;
    const ts_shape *ys = &g->values[yv].shape;
    if (p->opts.plain_layout || nin < 2 || g->values[yv].dtype != TS_F32 || ys->rank < 3 || ys->rank > 5 ||
        ts_graph_is_output(g, yv) || !ts_axis_norm(((const ts_concat_attrs *)nd->attrs)->axis, ys->rank, &axis) ||
        axis != 1)
        return TS_ERR_UNSUPPORTED;
    dnnl_memory_desc_t *src = calloc((size_t)nin, sizeof *src);
    int *bufs = calloc((size_t)nin, sizeof *bufs);
    if (!src || !bufs) {
        free(src);
        free(bufs);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    }
    /* blocked: some input in a oneDNN layout; dense: all in one dense
     * order (vec.concat's case) */
    bool blocked = false, dense = true;
    int order0[TS_MAX_RANK], order[TS_MAX_RANK];
    ts_status st = TS_OK;
    /* decided from the buffers that exist (a value with none yet is
     * plain), so that the kernel declines before touching the plan; the
     * missing ones are made once it takes the node */
    for (int j = 0; j < nin && !st; j++) {
        int v = nd->inputs[j];
        if (v < 0 || g->values[v].dtype != TS_F32) {
            st = TS_ERR_UNSUPPORTED;
            break;
        }
        const xbuf *b = p->value_buf[v] >= 0 ? &p->bufs[p->value_buf[v]] : NULL;
        blocked |= b && b->blocked;
        for (int k = 0; !b && k < ys->rank; k++) (j ? order : order0)[k] = k;
        if (dense)
            dense = (!b || xbuf_dense_order(b, j ? order : order0)) &&
                    (!j || !memcmp(order, order0, sizeof(int) * (size_t)ys->rank));
    }
    if (!st && (!blocked || dense)) st = TS_ERR_UNSUPPORTED;
    /* the primitive from the layouts the buffers have or will have: made
     * only once oneDNN takes it */
    dnnl_primitive_desc_t pd = NULL;
    int cl[TS_MAX_RANK], yb = -1; /* channels-last: logical dims 0, 2, ..., rank-1, 1 */
    cl[0] = 0;
    for (int k = 1; k < ys->rank - 1; k++) cl[k] = k + 1;
    cl[ys->rank - 1] = 1;
    if (!st) {
        xbuf scratch, y;
        for (int j = 0; j < nin; j++) xd_md_of(xplan_value_layout(p, nd->inputs[j], &scratch), &src[j]);
        y = *xplan_value_layout(p, yv, &scratch);
        xv_buf_set_order(&y, cl);
        st = make_pd(p, n, &y.md, nin, src, &pd, err);
    }
    for (int j = 0; j < nin && !st; j++)
        if ((bufs[j] = xplan_value_buf(p, nd->inputs[j])) < 0) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!st) {
        yb = xplan_value_buf(p, yv);
        if (yb < 0) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        else xv_set_order(p, yb, cl);
    }
    concat_state *c = NULL;
    if (!st && !(c = calloc(1, sizeof *c))) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!st) {
        s->state = c;
        c->stream = p->stream;
        c->nin = nin;
        c->src = calloc((size_t)nin, sizeof *c->src);
        c->args = calloc((size_t)nin + 2, sizeof *c->args);
        if (!c->src || !c->args) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    if (!st) st = xd_check(dnnl_primitive_create(&c->prim, pd), p, n, "primitive_create", err);
    if (!st) st = xstep_alloc(s, nin, 1, err);
    if (!st) {
        const dnnl_memory_desc_t *cdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        const dnnl_memory_desc_t *cpad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        s->scratch_bytes = xd_round(dnnl_memory_desc_get_size(cpad));
        for (int j = 0; j < nin && !st; j++) {
            s->in[j] = bufs[j];
            st = xd_mem_init(&c->src[j], &src[j], p, n, err);
            c->args[j] = (dnnl_exec_arg_t){DNNL_ARG_MULTIPLE_SRC + j, c->src[j].m};
        }
        if (!st) st = xd_mem_init(&c->dst, cdst, p, n, err);
        if (!st) st = xd_mem_init(&c->pad, cpad, p, n, err);
        if (!st) {
            c->args[nin] = (dnnl_exec_arg_t){DNNL_ARG_DST, c->dst.m};
            c->args[nin + 1] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, c->pad.m};
            s->out[0] = yb;
        }
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    free(src);
    free(bufs);
    return st; /* declined only before the plan was touched; later failures are errors */
}

const xkernel xk_dnnl_concat = {"dnnl.concat", concat_build, concat_run, concat_destroy};
