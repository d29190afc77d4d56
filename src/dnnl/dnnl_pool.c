/* MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool on oneDNN's
 * pooling primitive.  It reads its input in whatever layout the producer
 * left (a convolution's blocked format) and writes the same kind of layout,
 * so conv -> pool -> conv chains never convert. */
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_serial.h"
#include "dnnl/dnnl_util.h"
#include "ops/attrs.h"
#include "ops/list.h"

typedef struct pool_state {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    xd_mem src, dst, pad;
    dnnl_exec_arg_t args[3];
    bool serial; /* tiny: built and run on one thread (dnnl_serial.h) */
} pool_state;

static void pool_destroy(void *state)
{
    pool_state *c = state;
    if (!c) return;
    if (c->prim) dnnl_primitive_destroy(c->prim);
    xd_mem_fini(&c->src);
    xd_mem_fini(&c->dst);
    xd_mem_fini(&c->pad);
    free(c);
}

static void pool_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    pool_state *c = s->state;
    int threads = xd_serial_enter(c->serial);
    xd_mem_bind(&c->src, in[0], c->stream);
    xd_mem_bind(&c->dst, out[0], c->stream);
    xd_mem_bind(&c->pad, scratch, c->stream);
    dnnl_primitive_execute(c->prim, c->stream, 3, c->args);
    dnnl_stream_wait(c->stream);
    xd_serial_leave(c->serial, threads);
}

static ts_status pool_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    int xv = nd->inputs[0], yv = nd->outputs[0];
    const ts_shape *xs = &g->values[xv].shape, *ys = &g->values[yv].shape;
    /* MaxPool's optional Indices output is not produced by oneDNN */
    const int nsp = xs->rank - 2;
    bool global = nd->op == &ts_op_global_maxpool || nd->op == &ts_op_global_avgpool;
    bool maxp = nd->op == &ts_op_maxpool || nd->op == &ts_op_global_maxpool;
    /* int8/uint8 max pooling: a QDQ model's MaxPool on its 8-bit tensor (opt/fuse_qdq.c) */
    ts_dtype xt = g->values[xv].dtype;
    bool q8 = maxp && (xt == TS_U8 || xt == TS_I8);
    if (nd->noutputs != 1 || (xt != TS_F32 && !q8) || xs->rank < 3 || xs->rank > 5) return TS_ERR_UNSUPPORTED;
    dnnl_data_type_t dt = xt == TS_U8 ? dnnl_u8 : xt == TS_I8 ? dnnl_s8 : dnnl_f32;
    dnnl_dims_t stride, kernel, dil, pl, pr;
    int64_t cip = 0;
    if (global) {
        for (int i = 0; i < nsp; i++) stride[i] = 1, kernel[i] = xs->dims[2 + i], dil[i] = 0, pl[i] = pr[i] = 0;
    } else {
        /* MaxPool / AveragePool: the Global ones have no attributes */
        const ts_pool_attrs *pa = nd->attrs;
        const ts_window *win = &pa->win;
        ts_window_geom wg;
        char why[256];
        cip = pa->count_include_pad;
        if (!ts_window_resolve(win, nsp, xs->dims + 2, NULL, &wg, why, sizeof why))
            return ts_error_set(err, TS_ERR_INVALID, "node '%s' (%s): %s", nd->name, nd->op->name, why);
        for (int i = 0; i < nsp; i++) {
            stride[i] = wg.stride[i], kernel[i] = wg.kernel[i], dil[i] = wg.dil[i] - 1, pl[i] = wg.pad_begin[i];
            /* from the inferred size: covers ceil_mode */
            pr[i] = (ys->dims[2 + i] - 1) * wg.stride[i] + (wg.kernel[i] - 1) * wg.dil[i] + 1 - xs->dims[2 + i] - pl[i];
        }
        /* ceil_mode windows starting past the padded input average over
         * fewer elements: oneDNN's include-pad divisor would differ */
        if (!maxp && cip && win->ceil_mode) return TS_ERR_UNSUPPORTED;
    }
    dnnl_alg_kind_t alg = maxp ? dnnl_pooling_max : cip ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
    int xb = xplan_value_buf(p, xv);
    if (xb < 0) return ts_error_set(err, TS_ERR_NOMEM, "node '%s': out of memory", nd->name);
    dnnl_memory_desc_t src, dst;
    xd_md_of(&p->bufs[xb], &src);
    bool plain_out = p->opts.plain_layout || ts_graph_is_output(g, yv) || !p->bufs[xb].blocked;
    if (plain_out)
        xd_md_plain(&dst, ys);
    else
        xd_md_any(&dst, ys);
    src.data_type = dst.data_type = dt;
    dnnl_pooling_v2_desc_t d;
    dnnl_primitive_attr_t attr;
    dnnl_primitive_desc_t pd = NULL;
    ts_status st = xd_check(dnnl_primitive_attr_create(&attr), p, n, "attr_create", err);
    if (st) return st;
    st = xd_check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), p, n, "scratchpad", err);
    if (!st)
        st = xd_check(dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_inference, alg, &src, &dst, stride, kernel, dil,
                                                        pl, pr),
                      p, n, "pooling", err);
    if (!st) st = xd_check(dnnl_primitive_desc_create(&pd, &d, attr, p->engine, NULL), p, n, "pooling", err);
    dnnl_primitive_attr_destroy(attr);
    if (st) return st;
    s->ref_impl = xd_pd_is_ref(pd); /* counted in the plan stats */
    pool_state *c = calloc(1, sizeof *c);
    if (!c) {
        dnnl_primitive_desc_destroy(pd);
        return ts_error_set(err, TS_ERR_NOMEM, "node '%s': out of memory", nd->name);
    }
    s->state = c;
    c->stream = p->stream;
    const dnnl_memory_desc_t *cdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *cpad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    int yb = -1;
    if ((st = xd_check(dnnl_primitive_create(&c->prim, pd), p, n, "primitive_create", err)) ||
        (st = xd_mem_init(&c->src, &src, p, n, err)) || (st = xd_mem_init(&c->dst, cdst, p, n, err)) ||
        (st = xd_mem_init(&c->pad, cpad, p, n, err)) || (st = xstep_alloc(s, 1, 1, err)))
        goto fail;
    if ((yb = xplan_value_buf(p, yv)) < 0) {
        st = ts_error_set(err, TS_ERR_NOMEM, "node '%s': out of memory", nd->name);
        goto fail;
    }
    if (!plain_out) {
        dnnl_memory_desc_t pl_md;
        xd_md_plain(&pl_md, ys);
        pl_md.data_type = dt;
        if (!dnnl_memory_desc_equal(cdst, &pl_md)) {
            p->bufs[yb].blocked = true;
            p->bufs[yb].md = *cdst;
            p->bufs[yb].bytes = dnnl_memory_desc_get_size(cdst);
        }
    }
    s->in[0] = xb;
    s->out[0] = yb;
    s->scratch_bytes = xd_round(dnnl_memory_desc_get_size(cpad));
    c->args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, c->src.m};
    c->args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, c->dst.m};
    c->args[2] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, c->pad.m};
    dnnl_primitive_desc_destroy(pd);
    return TS_OK;
fail:
    dnnl_primitive_desc_destroy(pd);
    pool_destroy(c);
    s->state = NULL;
    return st;
}

/* Work: one operation per window element and output element. */
static ts_status pool_build_sized(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const ts_shape *xs = &g->values[nd->inputs[0]].shape, *ys = &g->values[nd->outputs[0]].shape;
    double win = 1;
    if (nd->op == &ts_op_global_maxpool || nd->op == &ts_op_global_avgpool) {
        for (int i = 2; i < xs->rank; i++) win *= (double)xs->dims[i];
    } else {
        const ts_pool_attrs *pa = nd->attrs;
        for (int i = 0; i < pa->win.nkernel; i++) win *= (double)pa->win.kernel[i];
    }
    /* pooling is memory-bound: a large input is worth the second thread
     * even when its window work is small (resnet50's first MaxPool, 1.8 M
     * window operations over 3.2 MB); its own bytes rule below */
    bool serial = xd_serial(p, win * (double)ts_shape_numel(ys), 0) &&
                  ts_shape_numel(xs) * (int64_t)sizeof(float) < xd_serial_pool_bytes();
    int threads = xd_serial_enter(serial);
    ts_status st = pool_build(p, n, s, err);
    xd_serial_leave(serial, threads);
    if (!st) ((pool_state *)s->state)->serial = serial;
    return st;
}

const xkernel xk_dnnl_pool = {"dnnl.pool", pool_build_sized, pool_run, pool_destroy};
