/* Which dense permutation of its logical dims a buffer holds (exec.h).
 * A query on the buffer's descriptor alone: the plan (plan.c) and the
 * layout-preserving kernels (vec_layout.c and its users) both ask it, so it
 * lives below both. */
#include "exec/exec.h"

bool xbuf_order_plain(const int *order, int rank)
{
    for (int k = 0; k < rank; k++)
        if (order[k] != k) return false;
    return true;
}

bool xbuf_dense_order(const xbuf *b, int *order)
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

/* 16-channel blocks, the channel dim padded to a multiple of 16 where
 * pad_ok (oneDNN zero-fills the padding of what it writes). */
static bool blocks16(const xbuf *b, bool pad_ok)
{
    const dnnl_memory_desc_t *md = &b->md;
    const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
    if (!b->blocked || md->format_kind != dnnl_blocked || md->ndims != 4 || md->offset0 != 0 || bd->inner_nblks != 1 ||
        bd->inner_blks[0] != 16 || bd->inner_idxs[0] != 1 || (!pad_ok && md->dims[1] % 16))
        return false;
    const int64_t cp = (md->dims[1] + 15) / 16 * 16;
    for (int d = 0; d < 4; d++)
        if (md->padded_dims[d] != (d == 1 ? cp : md->dims[d]) || md->padded_offsets[d] != 0) return false;
    /* outer dims N, C/16, H, W dense in that order, each block of 16 innermost */
    const int64_t want[4] = {cp * md->dims[2] * md->dims[3], 16 * md->dims[2] * md->dims[3], 16 * md->dims[3], 16};
    for (int d = 0; d < 4; d++)
        if ((d == 1 ? cp / 16 : md->dims[d]) != 1 && bd->strides[d] != want[d]) return false;
    return true;
}

bool xbuf_is_blocks16(const xbuf *b) { return blocks16(b, false); }

bool xbuf_is_blocks16_padded(const xbuf *b) { return blocks16(b, true); }
