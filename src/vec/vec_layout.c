/* Dense permuted layouts: see vec_layout.h. */
#include "vec/vec_layout.h"

ts_status xv_step_unary(xplan *p, int n, xstep *st, int xb, const int *order, ts_error *err)
{
    if (xb < 0) return err->code ? err->code : TS_ERR_INVALID;
    if (xstep_alloc(st, 1, 1, err)) return err->code;
    st->in[0] = xb;
    st->out[0] = xplan_value_buf(p, xplan_node(p, n)->outputs[0]);
    if (st->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    if (order) xv_set_order(p, st->out[0], order);
    return TS_OK;
}

void xv_set_order(xplan *p, int b, const int *order) { xv_buf_set_order(&p->bufs[b], order); }

void xv_buf_set_order(xbuf *x, const int *order)
{
    int r = x->shape.rank;
    if (r == 0 || xbuf_order_plain(order, r)) return;
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
