/* BatchNormalization (inference) that no convolution absorbed, e.g. after
 * a Concat (NASNet's factorized reductions) or a Slice: one pass
 * y = x * a[c] + b[c], a and b folded once at plan time from the constant
 * scale, bias, mean and variance.  A dense permuted input (channels-last
 * from a conv) is read in place and the result keeps its layout; with the
 * channels innermost a pixel's channels are one vector loop.
 *
 * A Relu that alone reads the result is applied in the same pass (DenseNet's
 * pre-activation BN -> ReLU -> conv: two passes were 10% of a run).  An
 * input in oneDNN's channel-blocked layout (nChw16c/nChw8c: a dense
 * concatenation's shared buffer, dense_concat.c) is read as it is and the
 * result keeps that layout: the 1x1 conv after it then runs oneDNN's
 * blocked kernel and writes the 16-channel blocks the 3x3 (Winograd) conv
 * reads, instead of channels-last that the 3x3 conv converted inside its
 * step.  densenet121, 1 thread, sums of per-step minima over 7 runs on the
 * loaded 2-core VM, two rounds: convs 34.0/34.9 ms blocked vs 35.8/36.4
 * channels-last, this pass 3.8/4.0 vs 4.2/4.2 (channels-last output). */
#include <math.h>
#include <stdlib.h>
#include "vec/vec.h"
#include "vec/vec_layout.h"
#include "ops/attrs.h"

typedef struct bn_state {
    int64_t outer, C, inner, bytes;
    int threads;
    bool relu;
    int block; /* > 0: input nChw<block>c (outer = N, inner = H*W), output channels-last */
    float *a, *b; /* C each, one allocation */
} bn_state;

static void bn_free(void *p)
{
    bn_state *s = p;
    if (s) free(s->a);
    free(s);
}

XV_CLONES static void bn_block(const float *x, float *y, const float *a, const float *b, int64_t C, int64_t inner,
                               bool relu)
{
    if (inner == 1) {
        if (relu) {
#pragma omp simd
            for (int64_t c = 0; c < C; c++) y[c] = fmaxf(x[c] * a[c] + b[c], 0.0f);
        } else {
#pragma omp simd
            for (int64_t c = 0; c < C; c++) y[c] = x[c] * a[c] + b[c];
        }
        return;
    }
    for (int64_t c = 0; c < C; c++) {
        const float ac = a[c], bc = b[c];
        const float *xc = x + c * inner;
        float *yc = y + c * inner;
        if (relu) {
#pragma omp simd
            for (int64_t i = 0; i < inner; i++) yc[i] = fmaxf(xc[i] * ac + bc, 0.0f);
        } else {
#pragma omp simd
            for (int64_t i = 0; i < inner; i++) yc[i] = xc[i] * ac + bc;
        }
    }
}

/* Pixels [p0, p1) of one image in nChw<blk>c: each block plane holds hw
 * pixels x blk channels, a pixel's blk channels one vector. */
XV_CLONES static void bn_blocked(const float *restrict x, float *restrict y, const float *a, const float *b,
                                 int64_t C, int64_t hw, int64_t p0, int64_t p1, int blk, bool relu)
{
    for (int64_t cb = 0; cb < C; cb += blk) {
        const float *xs = x + cb * hw + p0 * blk;
        float *ys = y + cb * hw + p0 * blk;
        const int64_t n = (p1 - p0) * blk;
        float av[16], bv[16];
        for (int l = 0; l < blk; l++) av[l] = a[cb + l], bv[l] = b[cb + l];
        if (blk == 16) {
            for (int64_t i = 0; i < n; i += 16) {
#pragma omp simd
                for (int l = 0; l < 16; l++) {
                    float t = xs[i + l] * av[l] + bv[l];
                    ys[i + l] = relu && t < 0.0f ? 0.0f : t;
                }
            }
        } else {
            for (int64_t i = 0; i < n; i += 8) {
#pragma omp simd
                for (int l = 0; l < 8; l++) {
                    float t = xs[i + l] * av[l] + bv[l];
                    ys[i + l] = relu && t < 0.0f ? 0.0f : t;
                }
            }
        }
    }
}

static void bn_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const bn_state *s = st->state;
    const float *x = in[0];
    float *y = out[0];
    const int64_t blk = s->C * s->inner;
    (void)scratch;
    if (s->block) { /* pieces of pixel rows: batch 1 has one image */
        const int64_t pieces = XV_SPLITS(s->threads, 2 * s->bytes) ? 4 * (int64_t)s->threads : 1;
        XV_PAR_FOR(w, s->outer * pieces, s->threads, pieces > 1, {
            const int64_t o = w / pieces, k = w % pieces;
            const int64_t p0 = s->inner * k / pieces, p1 = s->inner * (k + 1) / pieces;
            bn_blocked(x + o * blk, y + o * blk, s->a, s->b, s->C, s->inner, p0, p1, s->block, s->relu);
        });
        return;
    }
    XV_PAR_FOR(o, s->outer, s->threads, XV_SPLITS(s->threads, 2 * s->bytes),
               { bn_block(x + o * blk, y + o * blk, s->a, s->b, s->C, s->inner, s->relu); });
}

/* Block size (16 or 8) when buffer b holds a rank-4 tensor in oneDNN's
 * nChw16c / nChw8c layout with no padded channels, else 0. */
static int channel_block(const xbuf *b)
{
    if (!b->blocked || b->shape.rank != 4 || b->dtype != TS_F32) return 0;
    dnnl_dims_t d = {b->shape.dims[0], b->shape.dims[1], b->shape.dims[2], b->shape.dims[3]};
    for (int blk = 16; blk >= 8; blk -= 8) {
        dnnl_memory_desc_t md;
        if (d[1] % blk) continue;
        dnnl_memory_desc_init_by_tag(&md, 4, d, dnnl_f32, blk == 16 ? dnnl_aBcd16b : dnnl_aBcd8b);
        if (dnnl_memory_desc_equal(&md, &b->md)) return blk;
    }
    return 0;
}

/* Served by the lowering stage (lower_group.c): the node, and the Relu
 * after it when the group holds one. */
static ts_status bn_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const ts_batchnorm_attrs *a = nd->attrs;
    const ts_value *x = &g->values[nd->inputs[0]];
    if (a->training_mode || nd->noutputs != 1 || nd->ninputs != 5 || !xv_all_f32(p, n) || x->shape.rank < 2)
        return TS_ERR_UNSUPPORTED;
    const int64_t C = x->shape.dims[1];
    const ts_tensor *par[4];
    for (int i = 0; i < 4; i++) {
        par[i] = xplan_const(p, nd->inputs[1 + i]);
        if (!par[i] || ts_tensor_numel(par[i]) != C) return TS_ERR_UNSUPPORTED; /* per-activation form: ref */
    }
    int xb = xplan_value_buf(p, nd->inputs[0]), order[TS_MAX_RANK];
    if (xb < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    const bool relu = p->group->nnodes > 1;
    const int yv = p->group->y;
    bool graph_out = ts_graph_is_output(g, yv);
    int block = graph_out ? 0 : channel_block(&p->bufs[xb]);
    if (block) { /* blocked in and out: order unused */
        for (int k = 0; k < 4; k++) order[k] = k;
    } else if (graph_out || !xbuf_dense_order(&p->bufs[xb], order)) {
        for (int k = 0; k < x->shape.rank; k++) order[k] = k;
        if ((xb = xplan_plain(p, xb, err)) < 0) return err->code ? err->code : TS_ERR_INVALID;
    }
    bn_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    if (!(s->a = malloc(sizeof(float) * 2 * (size_t)(C ? C : 1))))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    s->b = s->a + C;
    for (int64_t c = 0; c < C; c++) {
        double sc = ((const float *)par[0]->data)[c], bias = ((const float *)par[1]->data)[c];
        double mean = ((const float *)par[2]->data)[c], var = ((const float *)par[3]->data)[c];
        double m = sc / sqrt(var + a->epsilon);
        s->a[c] = (float)m;
        s->b[c] = (float)(bias - mean * m);
    }
    /* physical view: outer dims, the channel axis, inner dims */
    s->outer = s->inner = 1;
    s->C = C;
    s->relu = relu;
    s->block = block;
    s->bytes = ts_shape_numel(&x->shape) * 4;
    s->threads = xv_threads(p);
    if (block) {
        s->outer = x->shape.dims[0];
        s->inner = x->shape.dims[2] * x->shape.dims[3];
    }
    bool before = true;
    for (int k = 0; k < x->shape.rank && !block; k++) {
        int d = order[k];
        if (d == 1)
            before = false;
        else if (before)
            s->outer *= x->shape.dims[d];
        else
            s->inner *= x->shape.dims[d];
    }
    if (xstep_alloc(st, 1, 1, err)) return err->code;
    st->in[0] = xb;
    if ((st->out[0] = xplan_value_buf(p, yv)) < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    if (block) {
        xbuf *y = &p->bufs[st->out[0]];
        y->md = p->bufs[xb].md;
        y->blocked = true;
        y->bytes = dnnl_memory_desc_get_size(&y->md);
    } else {
        xv_set_order(p, st->out[0], order);
    }
    return TS_OK;
}

const xkernel xk_vec_batchnorm = {"vec.batchnorm", bn_build, bn_run, bn_free};
