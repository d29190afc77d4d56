/* Channel Concat of 2-D feature maps whose inputs arrive in mixed oneDNN
 * layouts (channels-last and 16- or 8-channel blocks), into a channels-last
 * result: the case dnnl.concat takes, where oneDNN 2.6 picks its reference
 * concat (ref:any, one generic reorder per input into a strided view).
 * SqueezeNet's fire modules (a 1x1 expand writes channels-last, the 3x3
 * expand's Winograd kernel 16-channel blocks) and GoogLeNet's inception
 * blocks meet it at every Concat.  Per-step medians in the model (2
 * threads, load ~5 on the 2-core VM) beside ORT's profiler: googlenet's 9
 * concats 1.09 ms / ORT 0.65.
 *
 * The output pixels are split between the threads; each copies, input by
 * input, its pixels' channels: a channels-last input a contiguous run per
 * pixel, a blocked one block by block (one 64-byte line per pixel and
 * block, read in order).  The result's layout is dnnl.concat's
 * (channels-last), so the steps after it see no change.
 *
 * Declines (dnnl.concat, then vec.concat run): other ranks or axes, a
 * graph output, the plain_layout option, an input in any other layout (plain
 * included), or no blocked input (vec.concat's common dense layout). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_util.h"
#include "vec/vec.h"
#include "vec/vec_layout.h"
#include "ops/attrs.h"
#include "ops/list.h"

typedef struct cc_in {
    int64_t C, off; /* channels, first output channel */
    int block;      /* 16 / 8: aBcd16b / aBcd8b; 0: channels-last */
} cc_in;

typedef struct cc_state {
    int64_t N, HW, Ct; /* batch, pixels per image, output channels */
    int nin, threads;
    cc_in *in;
} cc_state;

static void cc_destroy(void *state)
{
    cc_state *c = state;
    if (!c) return;
    free(c->in);
    free(c);
}

/* 16 and 8 floats as one unaligned vector: a block's channels of a pixel
 * move as one load and one store. */
typedef float cc_v16 __attribute__((vector_size(64), aligned(4)));
typedef float cc_v8 __attribute__((vector_size(32), aligned(4)));

/* Pixels q0..q1 of every image (q: n * HW + pixel), pixel by pixel, so the
 * output is written in order; a blocked input is read as nb streams. */
XV_CLONES static void cc_pixels(const cc_state *c, void *const *in, float *y, int64_t q0, int64_t q1)
{
    for (int64_t q = q0; q < q1; q++) {
        const int64_t n = q / c->HW, pix = q % c->HW;
        float *yq = y + q * c->Ct;
        for (int j = 0; j < c->nin; j++) {
            const cc_in *k = &c->in[j];
            const float *x = in[j];
            float *dst = yq + k->off;
            if (!k->block) {
                memcpy(dst, x + q * k->C, sizeof(float) * (size_t)k->C);
                continue;
            }
            const int64_t B = k->block, full = k->C / B, nb = (k->C + B - 1) / B, bs = c->HW * B;
            const float *src = x + (n * nb * c->HW + pix) * B;
            int64_t b = 0;
            if (B == 16)
                for (; b < full; b++) *(cc_v16 *)(dst + b * 16) = *(const cc_v16 *)(src + b * bs);
            else
                for (; b < full; b++) *(cc_v8 *)(dst + b * 8) = *(const cc_v8 *)(src + b * bs);
            for (int64_t i = b * B; i < k->C; i++) dst[i] = src[b * bs + i - b * B];
        }
    }
}

static void cc_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    (void)scratch;
    const cc_state *c = s->state;
    int64_t px = c->N * c->HW;
    if (px < 2 || !XV_SPLITS(c->threads, 2 * px * c->Ct * (int64_t)sizeof(float))) {
        cc_pixels(c, in, out[0], 0, px);
        return;
    }
#pragma omp parallel num_threads(c->threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        cc_pixels(c, in, out[0], px * t / nt, px * (t + 1) / nt);
    }
}

/* The channel block of buffer b: 16 or 8 when it is exactly aBcd16b /
 * aBcd8b of its shape, 0 when channels-last, -1 for anything else. */
static int in_layout(const xbuf *b)
{
    static const int nhwc[4] = {0, 2, 3, 1};
    int order[TS_MAX_RANK];
    if (b->shape.rank != 4) return -1;
    if (b->blocked && xbuf_dense_order(b, order) && !memcmp(order, nhwc, sizeof nhwc)) return 0;
    if (!b->blocked) return -1;
    dnnl_dims_t d = {b->shape.dims[0], b->shape.dims[1], b->shape.dims[2], b->shape.dims[3]};
    for (int block = 16; block >= 8; block /= 2) {
        dnnl_memory_desc_t md;
        dnnl_memory_desc_init_by_tag(&md, 4, d, dnnl_f32, block == 16 ? dnnl_aBcd16b : dnnl_aBcd8b);
        if (dnnl_memory_desc_equal(&md, &b->md)) return block;
    }
    return -1;
}

static ts_status cc_build(xplan *p, int n, xstep *s, ts_error *err)
{
    static const int nhwc[4] = {0, 2, 3, 1};
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    int yv = nd->outputs[0], nin = nd->ninputs, axis;
    const ts_shape *ys = &g->values[yv].shape;
    if (p->opts.plain_layout || nin < 2 || ys->rank != 4 || !xv_all_f32(p, n) || ts_graph_is_output(g, yv) ||
        !ts_axis_norm(((const ts_concat_attrs *)nd->attrs)->axis, 4, &axis) || axis != 1)
        return TS_ERR_UNSUPPORTED;
    int *lay = calloc((size_t)nin, sizeof *lay);
    if (!lay) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    /* every input's layout decided before the plan is touched: an input
     * with no buffer yet would get a plain one, which declines */
    ts_status st = TS_OK;
    bool any_block = false;
    for (int j = 0; j < nin && !st; j++) {
        xbuf scratch;
        int v = nd->inputs[j];
        if (v < 0 || (lay[j] = in_layout(xplan_value_layout(p, v, &scratch))) < 0) st = TS_ERR_UNSUPPORTED;
        any_block |= !st && lay[j] > 0;
    }
    if (!st && !any_block) st = TS_ERR_UNSUPPORTED;
    cc_state *c = NULL;
    if (!st && !(c = xv_state(sizeof *c, err))) st = err->code;
    if (!st) {
        s->state = c;
        *c = (cc_state){.N = ys->dims[0], .HW = ys->dims[2] * ys->dims[3], .Ct = ys->dims[1], .nin = nin,
                        .threads = xv_threads(p)};
        if (!(c->in = calloc((size_t)nin, sizeof *c->in))) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    if (!st) st = xstep_alloc(s, nin, 1, err);
    if (!st) {
        int64_t off = 0;
        for (int j = 0; j < nin; j++) {
            c->in[j] = (cc_in){.C = g->values[nd->inputs[j]].shape.dims[1], .off = off, .block = lay[j]};
            off += c->in[j].C;
            if ((s->in[j] = xplan_value_buf(p, nd->inputs[j])) < 0) st = TS_ERR_NOMEM;
        }
        if (!st && (s->out[0] = xplan_value_buf(p, yv)) >= 0)
            xv_set_order(p, s->out[0], nhwc);
        else
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    }
    free(lay);
    return st; /* declined only above, before the plan was touched; later failures are errors */
}

const xkernel xk_vec_concat_cl = {"vec.concat_cl", cc_build, cc_run, cc_destroy};
