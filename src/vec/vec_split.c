/* Split on plain buffers: per index of the dimensions before the axis, each
 * output receives one contiguous block (memcpy).  Contiguous splits (all
 * dimensions before the axis 1) never get here: the planner makes their
 * outputs aliases of the input (plan.c).  This one serves the rest, e.g. the
 * column split after MatMuls merged by `tsopt optimize` at batch > 1, which
 * the reference kernel did element by element.  A dense permuted input
 * (channels-last conv outputs, vec_layout.h) is split in its physical order
 * and the pieces keep that order, so conv -> Split -> convs needs no
 * conversion to plain and back. */
#include <stdlib.h>
#include "vec/vec.h"
#include "vec/vec_layout.h"

typedef struct split_state {
    int nout, threads;
    int64_t outer, in_row; /* bytes of one input row (all outputs' blocks) */
    int64_t *blk;          /* bytes of output j's block */
    int64_t bytes;
} split_state;

static void split_free(void *p)
{
    split_state *s = p;
    if (s) free(s->blk);
    free(s);
}

static void split_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const split_state *s = st->state;
    const char *x = in[0];
    (void)scratch;
    XV_PAR_FOR(o, s->outer, s->threads, XV_SPLITS(s->threads, 2 * s->bytes), {
        const char *src = x + o * s->in_row;
        for (int j = 0; j < s->nout; j++) {
            memcpy((char *)out[j] + o * s->blk[j], src, (size_t)s->blk[j]);
            src += s->blk[j];
        }
    });
}

static ts_status split_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    const ts_value *x = &p->g->values[nd->inputs[0]];
    if (x->dtype == TS_MODP || !nd->op->emit) return TS_ERR_UNSUPPORTED;
    ts_attr a[4];
    int na = nd->op->emit(nd->attrs, a, 4), axis;
    int64_t ax = 0;
    for (int i = 0; i < na; i++)
        if (!strcmp(a[i].name, "axis")) ax = a[i].i;
    if (!ts_axis_norm(ax, x->shape.rank, &axis)) return TS_ERR_UNSUPPORTED;
    split_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->threads = xv_threads(p);
    s->nout = nd->noutputs;
    if (!(s->blk = calloc((size_t)s->nout + 1, sizeof *s->blk)))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    xbuf scratch; /* X's layout: its buffer is made once nothing can decline */
    int order[TS_MAX_RANK], rank = x->shape.rank;
    bool keep = x->dtype == TS_F32 && rank >= 2 &&
                xbuf_dense_order(xplan_value_layout(p, nd->inputs[0], &scratch), order) &&
                !xbuf_order_plain(order, rank);
    for (int j = 0; j < nd->noutputs && keep; j++) {
        /* a graph output is the caller's plain tensor */
        for (int k = 0; k < p->g->noutputs; k++) keep &= p->g->outputs[k] != nd->outputs[j];
    }
    if (!keep)
        for (int d = 0; d < rank; d++) order[d] = d;
    int pax = axis;
    for (int k = 0; k < rank; k++)
        if (order[k] == axis) pax = k;
    int64_t inner = (int64_t)ts_dtype_size(x->dtype), sum = 0;
    s->outer = 1;
    for (int k = 0; k < pax; k++) s->outer *= x->shape.dims[order[k]];
    for (int k = pax + 1; k < rank; k++) inner *= x->shape.dims[order[k]];
    for (int j = 0; j < s->nout; j++) {
        if (nd->outputs[j] < 0) return TS_ERR_UNSUPPORTED;
        const ts_value *y = &p->g->values[nd->outputs[j]];
        if (y->shape.rank != x->shape.rank) return TS_ERR_UNSUPPORTED;
        s->blk[j] = inner * y->shape.dims[axis];
        sum += y->shape.dims[axis];
    }
    if (sum != x->shape.dims[axis]) return TS_ERR_UNSUPPORTED;
    s->in_row = inner * sum;
    s->bytes = s->outer * s->in_row;
    if (xstep_alloc(st, 1, s->nout, err)) return err->code;
    int xb = xplan_value_buf(p, nd->inputs[0]);
    if (xb < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    if ((st->in[0] = keep ? xb : xplan_plain(p, xb, err)) < 0) return err->code ? err->code : TS_ERR_INVALID;
    for (int j = 0; j < s->nout; j++) {
        if ((st->out[j] = xplan_value_buf(p, nd->outputs[j])) < 0)
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
        if (keep) xv_set_order(p, st->out[j], order);
    }
    return TS_OK;
}

const xkernel xk_vec_split = {"vec.split", split_build, split_run, split_free};
