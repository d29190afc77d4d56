/* ReduceSum / ReduceMean / ReduceMax on float32.  Size-1 dims are dropped
 * and neighbouring dims of the same kind merged, which turns every axes set
 * into alternating kept/reduced blocks; the common cases (one reduced
 * block: trailing, as in layer-norm patterns, or inner, as in
 * GlobalAveragePool-like means) are [outer, R, inner] with contiguous loops.
 * Other patterns decline to the reference kernel. */
#include <stdlib.h>
#include "dnnl/dnnl_layout.h"
#include "vec/vec.h"
#include "vec/vec_layout.h"
#include "ops/attrs.h"
#include "ops/list.h"

enum { RD_SUM, RD_MEAN, RD_MAX };

typedef struct rd_state {
    int kind;
    int64_t outer, r, inner;
    int64_t pc, pnb; /* padded 16-channel blocks (gap_build): C and blocks per image, else 0 */
    int threads;
} rd_state;

#define RD_CHUNK 256

XV_CLONES static float rd_row(const float *x, int64_t n, int kind)
{
    if (kind == RD_MAX) {
        float m = -INFINITY;
#pragma omp simd reduction(max : m)
        for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
        return m;
    }
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
}

/* y[0..cn) = reduction over r rows of stride `inner` starting at x. */
XV_CLONES static void rd_cols(const float *x, float *y, int64_t r, int64_t inner, int64_t cn, int kind)
{
    if (cn == 16 && kind != RD_MAX) {
        /* one vector of 16-channel blocks (a global mean of aBcd16b: the
         * SE nets' heads): a fixed-width accumulator, where the general loop
         * ran at half the speed of oneDNN's channels-last pool (960 x 7 x 7:
         * 0.0165 vs 0.0083 ms, fastest of 60, loaded) */
        float a[16] = {0};
        for (int64_t l = 0; l < r; l++)
#pragma omp simd
            for (int j = 0; j < 16; j++) a[j] += x[l * inner + j];
        for (int j = 0; j < 16; j++) y[j] = a[j];
        return;
    }
    for (int64_t i = 0; i < cn; i++) y[i] = kind == RD_MAX ? -INFINITY : 0.0f;
    for (int64_t l = 0; l < r; l++) {
        const float *xr = x + l * inner;
        if (kind == RD_MAX) {
#pragma omp simd
            for (int64_t i = 0; i < cn; i++) y[i] = xr[i] > y[i] ? xr[i] : y[i];
        } else {
#pragma omp simd
            for (int64_t i = 0; i < cn; i++) y[i] += xr[i];
        }
    }
}

static void rd_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const rd_state *s = st->state;
    const float *x = in[0];
    float *y = out[0];
    const float scale = s->kind == RD_MEAN ? 1.0f / (float)s->r : 1.0f;
    (void)scratch;
    if (s->inner == 1) {
        XV_PAR_FOR(o, s->outer, s->threads, s->threads > 1 && s->outer > 1 && s->outer * s->r >= XV_PAR_MIN,
                   { y[o] = rd_row(x + o * s->r, s->r, s->kind) * scale; });
        return;
    }
    const int64_t nchunk = (s->inner + RD_CHUNK - 1) / RD_CHUNK, items = s->outer * nchunk;
    XV_PAR_FOR(it, items, s->threads, s->threads > 1 && items > 1 && s->outer * s->r * s->inner >= XV_PAR_MIN, {
        int64_t o = it / nchunk, c0 = (it % nchunk) * RD_CHUNK;
        int64_t cn = s->inner - c0 < RD_CHUNK ? s->inner - c0 : RD_CHUNK;
        float *yo = y + o * s->inner + c0;
        if (s->pc) { /* block o % pnb of image o / pnb: its channels below C, written plain */
            int64_t b = o % s->pnb;
            yo = y + o / s->pnb * s->pc + b * 16;
            cn = s->pc - b * 16 < 16 ? s->pc - b * 16 : 16;
        }
        rd_cols(x + o * s->r * s->inner + c0, yo, s->r, s->inner, cn, s->kind);
        if (scale != 1.0f)
            for (int64_t i = 0; i < cn; i++) yo[i] *= scale;
    });
}

static ts_status rd_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    /* X and Y float32 (the optional axes input is int64) */
    if (nd->noutputs != 1 ||
        p->g->values[nd->inputs[0]].dtype != TS_F32 || p->g->values[nd->outputs[0]].dtype != TS_F32)
        return TS_ERR_UNSUPPORTED;
    const ts_reduce_attrs *a = nd->attrs;
    const ts_shape *sh = &p->g->values[nd->inputs[0]].shape;
    int64_t axes[TS_MAX_RANK];
    int naxes = a->naxes;
    memcpy(axes, a->axes, sizeof axes);
    if (nd->ninputs > 1 && nd->inputs[1] >= 0) {
        const ts_tensor *t = xplan_const(p, nd->inputs[1]);
        if (!t || t->dtype != TS_I64 || ts_tensor_numel(t) > TS_MAX_RANK) return TS_ERR_UNSUPPORTED;
        naxes = (int)ts_tensor_numel(t);
        for (int i = 0; i < naxes; i++) axes[i] = ((const int64_t *)t->data)[i];
    }
    bool mask[TS_MAX_RANK];
    if (naxes <= 0 && a->noop_empty) return TS_ERR_UNSUPPORTED; /* identity: leave it to the reference */
    for (int d = 0; d < sh->rank; d++) mask[d] = naxes <= 0;
    for (int i = 0; i < naxes; i++) {
        int ax;
        if (!ts_axis_norm(axes[i], sh->rank, &ax)) return TS_ERR_UNSUPPORTED;
        mask[ax] = true;
    }
    /* The input as its producer laid it out when that is a dense
     * permutation (a conv's channels-last result before a global mean:
     * mnasnet's and the mobile nets' heads), walked in physical order; the
     * kept dims must come in their logical order (the result is plain).
     * Else converted to plain first. */
    xbuf scratch; /* decided on X's layout before the plan is touched */
    int order[TS_MAX_RANK], last_kept = -1;
    bool dense = xbuf_dense_order(xplan_value_layout(p, nd->inputs[0], &scratch), order);
    for (int k = 0; dense && k < sh->rank; k++) {
        int d = order[k];
        if (sh->dims[d] == 1 || mask[d]) continue;
        dense = d > last_kept;
        last_kept = d;
    }
    if (!dense)
        for (int d = 0; d < sh->rank; d++) order[d] = d;
    /* blocks of kept / reduced dims, size-1 dims ignored */
    int64_t outer = 1, r = 1, inner = 1;
    int phase = 0; /* 0: kept before, 1: reduced, 2: kept after */
    /* A global mean over H and W of 16-channel blocks (a conv's aBcd16b
     * result in a net run in blocks, conv.stem_blocks: mnasnet1_0's head)
     * read as it lies: [N][C/16][H][W][16] is [outer = N C/16, r = H W,
     * inner = 16], whose result [N][C/16][16] is plain [N][C] when C is a
     * multiple of 16 (no padding).  Before, a reorder step converted the
     * 1280 x 7 x 7 input to plain first. */
    bool blocks16 = !dense && sh->rank == 4 && sh->dims[1] % 16 == 0 && !mask[0] && !mask[1] && mask[2] && mask[3] &&
                    xbuf_is_blocks16(xplan_value_layout(p, nd->inputs[0], &scratch));
    if (blocks16) {
        outer = sh->dims[0] * (sh->dims[1] / 16), r = sh->dims[2] * sh->dims[3], inner = 16;
        phase = 3; /* the walk below is not needed */
    }
    for (int k = 0; k < sh->rank && phase != 3; k++) {
        int d = order[k];
        if (sh->dims[d] == 1) continue;
        if (mask[d]) {
            if (phase == 2) return TS_ERR_UNSUPPORTED;
            phase = 1;
            r *= sh->dims[d];
        } else if (phase == 0) {
            outer *= sh->dims[d];
        } else {
            phase = 2;
            inner *= sh->dims[d];
        }
    }
    if (r == 0 || ts_shape_numel(sh) == 0) return TS_ERR_UNSUPPORTED;
    int xb = xplan_value_buf(p, nd->inputs[0]);
    if (xb < 0) return ts_error_set(err, TS_ERR_NOMEM, "node '%s': out of memory for a buffer", nd->name);
    rd_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->kind = nd->op == &ts_op_reducemax ? RD_MAX : nd->op == &ts_op_reducemean ? RD_MEAN : RD_SUM;
    s->outer = outer;
    s->r = r;
    s->inner = inner;
    s->threads = xv_threads(p);
    /* only X is read at run time: bind it and Y (the axes stay constant) */
    return xv_step_unary(p, n, st, dense || blocks16 ? xb : xplan_plain(p, xb, err), NULL, err);
}

const xkernel xk_vec_reduce = {"vec.reduce", rd_build, rd_run, free};

/* GlobalAveragePool of unpadded 16-channel blocks (mobilenet_v2's head in a
 * net run in blocks, conv.stem_blocks): the mean above, [N C/16, H W, 16],
 * written plain (N x C x 1 x 1).  oneDNN's pooling kept the blocks and a
 * reorder step then made the 1280 means plain for the classifier (0.024 +
 * 0.012 ms against 0.010 channels-last, loaded).
 *
 * Padded blocks (C not a multiple of 16) too when the means' one reader is
 * a Flatten or Reshape (the classifier's input, which reads them plain):
 * each block's channels below C written plain.  squeezenet1_1's head
 * (1000 x 13 x 13 in 1008-channel blocks) ran dnnl.pool, means in blocks,
 * then a reorder step for the Flatten.  Padded means read by anything else
 * stay on dnnl.pool.  TSOPT_SKIP=gap.padded.  Any other input declines to
 * dnnl.pool. */
static ts_status gap_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    if (nd->ninputs != 1 || nd->noutputs != 1 || p->g->values[nd->inputs[0]].dtype != TS_F32) return TS_ERR_UNSUPPORTED;
    const ts_shape *sh = &p->g->values[nd->inputs[0]].shape;
    if (sh->rank != 4) return TS_ERR_UNSUPPORTED;
    xbuf scratch;
    const xbuf *xl = xplan_value_layout(p, nd->inputs[0], &scratch);
    bool padded = false;
    if (!xbuf_is_blocks16(xl)) {
        padded = xbuf_is_blocks16_padded(xl) && !xplan_skips(p, "gap.padded") &&
                 xlow_flatten_reader(p, nd->outputs[0]);
        if (!padded) return TS_ERR_UNSUPPORTED;
    }
    int xb = xplan_value_buf(p, nd->inputs[0]);
    if (xb < 0) return ts_error_set(err, TS_ERR_NOMEM, "node '%s': out of memory for a buffer", nd->name);
    rd_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    const int64_t nb = (sh->dims[1] + 15) / 16;
    *s = (rd_state){.kind = RD_MEAN, .outer = sh->dims[0] * nb, .r = sh->dims[2] * sh->dims[3], .inner = 16,
                    .pc = padded ? sh->dims[1] : 0, .pnb = padded ? nb : 0, .threads = xv_threads(p)};
    return xv_step_unary(p, n, st, xb, NULL, err);
}

const xkernel xk_vec_gap_blocks = {"vec.reduce", gap_build, rd_run, free};
