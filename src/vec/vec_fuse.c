/* vec.eltwise: the step for an element-wise chain the lowering stage
 * formed and lowered to one program (lower_chain.c): its buffers (the
 * inputs' own layout where they share one), the result over a dying
 * operand in half plans, the program's geometry.  It reads no graph node
 * (tests/cli/kernel_nodes.sh). */
#include <stdlib.h>
#include "exec/plan_internal.h"
#include "vec/vec_eltwise.h"
#include "vec/vec_layout.h"

/* The chain may run on its inputs' own layout when those of the result's
 * shape share one dense permuted layout, like the channels-last outputs of
 * convolutions (element i of each is the same logical element); the result
 * then keeps that layout.  Saves a conversion to plain per input and one
 * back before the next conv.  Broadcast operands (a squeeze-excite block's
 * N x C x 1 x 1 scale) are read plain, walked in the same stored order:
 * they must then be contiguous or one value along the innermost stored
 * dim.  in_order[j]: operand j is read in `order`. */
static bool keep_order(xplan *p, const xv_prog *pr, const int *ext, int cur, const ts_shape *shape, int *order,
                       bool *in_order)
{
    for (int i = 0; i < p->g->noutputs; i++)
        if (p->g->outputs[i] == cur) return false; /* the caller's tensor is plain */
    bool any = false;
    for (int j = 0; j < pr->next; j++) {
        int o[TS_MAX_RANK] = {0}, b = xplan_value_buf(p, ext[j]); /* set up to the rank; compared whole below */
        if (b < 0) return false;
        in_order[j] = ts_shape_eq(&p->g->values[ext[j]].shape, shape);
        if (!in_order[j]) continue;
        if (!xbuf_dense_order(&p->bufs[b], o)) return false;
        if (!any)
            memcpy(order, o, sizeof o);
        else if (memcmp(order, o, sizeof o))
            return false;
        any = true;
    }
    if (!any || shape->rank == 0 || xbuf_order_plain(order, shape->rank)) return false;
    int k = shape->rank - 1;
    while (k > 0 && shape->dims[order[k]] == 1) k--;
    for (int j = 0; j < pr->next; j++) {
        int64_t st[TS_MAX_RANK];
        if (in_order[j]) continue;
        ts_shape_bcast_strides(&p->g->values[ext[j]].shape, shape, st);
        if (st[order[k]] > 1) return false;
    }
    return true;
}

/* Half plans: the result written over an input of its own shape that dies
 * here.  The float32 plan fuses a MatMul's bias Add and GELU into the
 * MatMul; split by the half plan's rounding (half.c), each of those steps
 * held a second full-size buffer beside its input.  ViT-B/16-l4 at batch 4
 * holds 9.7 MB MLP products (TSOPT_MEM_TRACE).  TSOPT_SKIP=half.inplace
 * turns it off (A/B). */
int xv_inplace_out(xplan *p, int b, int out)
{
    const ts_value *v = &p->g->values[out];
    if (!p->half || xplan_skips(p, "half.inplace") || b < 0 || ts_graph_is_output(p->g, out) ||
        v->dtype != TS_F32 || p->value_buf[out] >= 0) /* placed already (a Concat's piece) */
        return -1;
    int root = xbuf_root(p, b);
    const xbuf *x = &p->bufs[b];
    if (x->dtype != TS_F32 || x->blocked || p->bufs[root].blocked || !ts_shape_eq(&x->shape, &v->shape) ||
        xbuf_alias_offset(p, b) || !xplan_inplace_ok_step(p, b))
        return -1;
    size_t bytes = x->bytes;
    int o = xplan_new_buf(p, out, v->dtype, &v->shape);
    if (o < 0) return -1;
    xbuf *y = &p->bufs[o];
    y->kind = XB_ALIAS;
    y->alias_of = root;
    y->offset = 0;
    y->bytes = bytes;
    xplan_bind_value(p, out, o);
    return o;
}

/* The chain's output over one of its operands' storage: the program
 * copies each block of that operand aside before running the block
 * (xv_prog.inplace), since GELU's chain reads x again after its first
 * instruction wrote the result. */
static int chain_inplace(xplan *p, xv_prog *pr, const xstep *s, int cur)
{
    for (int j = 0; j < pr->next; j++) {
        bool alone = true; /* no other operand read from that storage */
        for (int k = 0; alone && k < pr->next; k++) alone = k == j || xbuf_root(p, s->in[k]) != xbuf_root(p, s->in[j]);
        int o = alone ? xv_inplace_out(p, s->in[j], cur) : -1;
        if (o >= 0) {
            pr->inplace = j + 1;
            return o;
        }
    }
    return -1;
}

static ts_status eltwise_build(xplan *p, int n, xstep *s, ts_error *err)
{
    (void)n; /* the group holds the chain's nodes and program */
    const ts_graph *g = p->g;
    const xv_chain *ch = p->group->chain;
    const int *ext = ch->ext;
    int cur = p->group->y;
    const ts_shape shape = g->values[cur].shape;
    xv_prog *pr = xv_state(sizeof *pr, err);
    if (!pr) return err->code;
    *pr = ch->prog;
    s->state = pr;
    if (xstep_alloc(s, pr->next, 1, err)) return err->code;
    const ts_shape *shapes[XV_MAXIN];
    int order[TS_MAX_RANK];
    bool in_order[XV_MAXIN];
    bool keep = keep_order(p, pr, ext, cur, &shape, order, in_order);
    for (int j = 0; j < pr->next; j++) {
        shapes[j] = &g->values[ext[j]].shape;
        s->in[j] = keep && in_order[j] ? xplan_value_buf(p, ext[j]) : xplan_plain(p, xplan_value_buf(p, ext[j]), err);
        if (s->in[j] < 0) return err->code ? err->code : TS_ERR_INVALID;
    }
    s->out[0] = keep ? -1 : chain_inplace(p, pr, s, cur);
    if (s->out[0] < 0) s->out[0] = xplan_value_buf(p, cur);
    if (s->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    if (keep) xv_set_order(p, s->out[0], order);
    xv_geometry_order(pr, &shape, shapes, keep ? order : NULL, in_order);
    if (xplan_skips(p, "eltwise.rows")) pr->rows_per = 1;
    pr->threads = xv_threads(p);
    return TS_OK;
}

/* Re-bound with every buffer of the same shape (a decoder's position row,
 * a constant input of new contents): the program reads its inputs through
 * their buffers at run time (a scalar taken in as an immediate is no input:
 * plan_rebind.c declines when one changes), so it stays as it is. */
ts_status xv_eltwise_resize(const xplan *p, const xstep *s, const ts_graph *g, void **state, size_t *scratch,
                                ts_error *err)
{
    for (int j = 0; j < s->nin + s->nout; j++) {
        int b = j < s->nin ? s->in[j] : s->out[j - s->nin];
        if (b >= 0 && (p->bufs[b].value < 0 || !ts_shape_eq(&p->bufs[b].shape, &g->values[p->bufs[b].value].shape)))
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "vec.eltwise: shapes change");
    }
    *state = NULL;
    *scratch = s->scratch_bytes;
    return TS_OK;
}

const xkernel xk_vec_eltwise = {"vec.eltwise", eltwise_build, xv_prog_run, free};
