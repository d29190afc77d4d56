/* Transpose of a convolution's output still in oneDNN's blocked layout, as
 * one reorder.  ConvNeXt's blocks (and Swin's and ViT's patch embeddings)
 * permute a convolution's NCHW result to channels last for a LayerNorm and
 * the MLP: done naively that is a reorder from nChw16c to plain NCHW and
 * then a strided copy to NHWC, two passes over the tensor.  oneDNN's
 * reorder writes any strided destination, so the destination here is the
 * input's logical dims with the strides the plain transposed result has:
 * one pass.  Declines plain inputs (vec.transpose takes them). */
#include <stdlib.h>
#include "dnnl/dnnl_util.h"
#include "ops/attrs.h"

typedef struct tr_state {
    xd_reorder r;
    dnnl_stream_t stream;
} tr_state;

static void tr_destroy(void *state)
{
    tr_state *s = state;
    if (!s) return;
    xd_reorder_fini(&s->r);
    free(s);
}

static void tr_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    tr_state *s = st->state;
    (void)scratch;
    xd_reorder_run(&s->r, in[0], out[0], s->stream);
    dnnl_stream_wait(s->stream);
}

static ts_status tr_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    if (nd->noutputs != 1 || nd->ninputs != 1 || nd->inputs[0] < 0) return TS_ERR_UNSUPPORTED;
    /* looked up, not made: a value with no buffer yet is plain, and the
     * kernel declines before touching the plan */
    int b = p->value_buf[nd->inputs[0]];
    const ts_value *x = &p->g->values[nd->inputs[0]], *y = &p->g->values[nd->outputs[0]];
    if (b < 0 || !p->bufs[b].blocked || x->dtype != TS_F32 || x->shape.rank > DNNL_MAX_NDIMS) return TS_ERR_UNSUPPORTED;
    const ts_transpose_attrs *a = nd->attrs;
    int64_t yst[TS_MAX_RANK];
    ts_shape_strides(&y->shape, yst);
    /* x's dim perm[d] is y's dim d: it steps by y's stride of d */
    dnnl_dims_t dims, strides;
    for (int d = 0; d < x->shape.rank; d++) dims[d] = x->shape.dims[d];
    for (int d = 0; d < y->shape.rank; d++) {
        int64_t pd = a->nperm < 0 ? y->shape.rank - 1 - d : a->perm[d];
        if (pd < 0 || pd >= x->shape.rank) return TS_ERR_UNSUPPORTED;
        strides[pd] = yst[d];
    }
    dnnl_memory_desc_t to;
    if (dnnl_memory_desc_init_by_strides(&to, x->shape.rank, dims, dnnl_f32, strides) != dnnl_success)
        return TS_ERR_UNSUPPORTED;
    tr_state *s = calloc(1, sizeof *s);
    if (!s) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    st->state = s;
    s->stream = p->stream;
    ts_status rc = xd_reorder_init(&s->r, &p->bufs[b].md, &to, p, n, err);
    if (rc) return rc;
    if (xstep_alloc(st, 1, 1, err)) return err->code;
    st->in[0] = b;
    st->out[0] = xplan_value_buf(p, nd->outputs[0]);
    if (st->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    return TS_OK;
}

const xkernel xk_dnnl_transpose = {"dnnl.transpose", tr_build, tr_run, tr_destroy};
