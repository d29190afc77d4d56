/* Dense permuted layouts: see vec_layout.h. */
#include "exec/vec_layout.h"

bool xv_order_plain(const int *order, int rank)
{
    for (int k = 0; k < rank; k++)
        if (order[k] != k) return false;
    return true;
}

bool xv_dense_order(const xbuf *b, int *order)
{
    int r = b->shape.rank ? b->shape.rank : 1;
    for (int k = 0; k < r; k++) order[k] = k;
    if (!b->blocked) return true;
    const dnnl_memory_desc_t *md = &b->md;
    const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
    if (md->format_kind != dnnl_blocked || md->ndims != r || bd->inner_nblks != 0 || md->offset0 != 0) return false;
    for (int d = 0; d < r; d++)
        if (md->padded_dims[d] != md->dims[d] || md->padded_offsets[d] != 0) return false;
    /* physical order: strides descending (insertion sort keeps ties, which
     * only size-1 dims can produce in a dense layout, in logical order) */
    for (int k = 1; k < r; k++) {
        int d = order[k], j = k;
        while (j > 0 && bd->strides[order[j - 1]] < bd->strides[d]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = d;
    }
    /* dense: each dim's stride is the product of the dims inside it
     * (a size-1 dim's stride is never used to address anything) */
    int64_t want = 1;
    for (int k = r - 1; k >= 0; k--) {
        int d = order[k];
        if (md->dims[d] != 1 && bd->strides[d] != want) return false;
        want *= md->dims[d];
    }
    return true;
}

ts_status xv_step_unary(xplan *p, int n, xstep *st, int xb, const int *order, ts_error *err)
{
    if (xb < 0) return err->code ? err->code : TS_ERR_INVALID;
    if (xstep_alloc(st, 1, 1, err)) return err->code;
    st->in[0] = xb;
    st->out[0] = xplan_value_buf(p, p->g->nodes[n].outputs[0]);
    if (st->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    if (order) xv_set_order(p, st->out[0], order);
    return TS_OK;
}

void xv_set_order(xplan *p, int b, const int *order)
{
    xbuf *x = &p->bufs[b];
    int r = x->shape.rank;
    if (r == 0 || xv_order_plain(order, r)) return;
    dnnl_dims_t dims, strides;
    int64_t st = 1;
    for (int k = r - 1; k >= 0; k--) {
        strides[order[k]] = st;
        st *= x->shape.dims[order[k]];
    }
    for (int d = 0; d < r; d++) dims[d] = x->shape.dims[d];
    dnnl_memory_desc_init_by_strides(&x->md, r, dims, dnnl_f32, strides);
    x->blocked = true;
    x->bytes = dnnl_memory_desc_get_size(&x->md);
}
