/* Channel shuffle as one strided copy: Concat(axis 1) -> Reshape [N, g, C/g,
 * H, W] -> Transpose [0, 2, 1, 3, 4] -> Reshape [N, C, H, W], ShuffleNet's
 * block ending (issue 32).  Output channel c = j g + i holds concat channel
 * i (C/g) + j: the nodes' function, computed in one pass, with no concat
 * result, no conversion of it to plain for the 5-D view, no transposed copy.
 * Before: vec/dnnl.concat (channels-last), a reorder to plain, vec.transpose,
 * each a pass over the tensor (shufflenet_v2_x1_0: 48 steps of its 134).
 *
 * Inputs may be plain or channels-last, each on its own; the result is
 * channels-last (what the convs reading it want, and what vec.slice keeps
 * for the split that follows), plain when it is a graph output, under
 * plain_layout, or when every input is plain.  The output's pixels are
 * split between threads from the measured XV_SPLITS bytes (read + written).
 *
 * A blocked input (16/8-channel blocks) is converted to plain first.
 * Declines (the nodes are then lowered one by one): other ranks, axes,
 * reshapes or permutations; an intermediate value with another reader or a
 * graph output; non-float32 data. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "vec/vec.h"
#include "vec/vec_layout.h"
#include "ops/attrs.h"
#include "ops/list.h"

typedef struct sh_in {
    int64_t C;   /* channels */
    bool nhwc;   /* channels-last, else plain */
} sh_in;

typedef struct sh_state {
    int64_t N, HW, C, g;
    int nin, threads;
    bool nhwc_out;
    bool interleave;  /* every input channels-last with C/g channels and nin == g */
    int64_t bytes;
    sh_in *in;
    int *src_in;      /* output channel -> input */
    int64_t *src_ch;  /* output channel -> channel of that input */
} sh_state;

static void sh_destroy(void *state)
{
    sh_state *s = state;
    if (!s) return;
    free(s->in);
    free(s->src_in);
    free(s->src_ch);
    free(s);
}

/* Source element of output channel c at pixel pix of image n. */
static inline float sh_src(const sh_state *s, void *const *in, int64_t n, int64_t pix, int64_t c)
{
    const sh_in *k = &s->in[s->src_in[c]];
    const float *x = in[s->src_in[c]];
    int64_t ch = s->src_ch[c];
    return k->nhwc ? x[(n * s->HW + pix) * k->C + ch] : x[(n * k->C + ch) * s->HW + pix];
}

/* Channels-last output, pixels q0..q1 (q = n HW + pix). */
XV_CLONES static void sh_pixels(const sh_state *s, void *const *in, float *y, int64_t q0, int64_t q1)
{
    const int64_t C = s->C, g = s->g, Cg = C / g;
    if (s->interleave && g == 2) {
        const float *a = in[0], *b = in[1];
        for (int64_t q = q0; q < q1; q++) {
            const float *aq = a + q * Cg, *bq = b + q * Cg;
            float *yq = y + q * C;
#pragma omp simd
            for (int64_t j = 0; j < Cg; j++) {
                yq[2 * j] = aq[j];
                yq[2 * j + 1] = bq[j];
            }
        }
        return;
    }
    if (s->interleave) {
        for (int64_t q = q0; q < q1; q++)
            for (int64_t i = 0; i < g; i++) {
                const float *xq = (const float *)in[i] + q * Cg;
                float *yq = y + q * C + i;
                for (int64_t j = 0; j < Cg; j++) yq[j * g] = xq[j];
            }
        return;
    }
    for (int64_t q = q0; q < q1; q++) {
        int64_t n = q / s->HW, pix = q % s->HW;
        for (int64_t c = 0; c < C; c++) y[q * C + c] = sh_src(s, in, n, pix, c);
    }
}

/* Plain output, rows r0..r1 (r = n C + c): one channel plane each. */
static void sh_planes(const sh_state *s, void *const *in, float *y, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / s->C, c = r % s->C;
        const sh_in *k = &s->in[s->src_in[c]];
        const float *x = in[s->src_in[c]];
        float *yr = y + r * s->HW;
        if (!k->nhwc) {
            memcpy(yr, x + (n * k->C + s->src_ch[c]) * s->HW, sizeof(float) * (size_t)s->HW);
            continue;
        }
        const float *xs = x + n * s->HW * k->C + s->src_ch[c];
        for (int64_t pix = 0; pix < s->HW; pix++) yr[pix] = xs[pix * k->C];
    }
}

static void sh_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const sh_state *s = st->state;
    (void)scratch;
    const int64_t items = s->nhwc_out ? s->N * s->HW : s->N * s->C;
    if (items < 2 || !XV_SPLITS(s->threads, s->bytes)) {
        if (s->nhwc_out)
            sh_pixels(s, in, out[0], 0, items);
        else
            sh_planes(s, in, out[0], 0, items);
        return;
    }
#pragma omp parallel num_threads(s->threads)
    {
        int64_t t = omp_get_thread_num(), nt = omp_get_num_threads(), lo = items * t / nt, hi = items * (t + 1) / nt;
        if (s->nhwc_out)
            sh_pixels(s, in, out[0], lo, hi);
        else
            sh_planes(s, in, out[0], lo, hi);
    }
}

/* Served by the lowering stage (lower_group.c): the Concat, the Reshape,
 * Transpose and Reshape after it, the group count. */
static ts_status sh_build(xplan *p, int n, xstep *st, ts_error *err)
{
    static const int nhwc[4] = {0, 2, 3, 1};
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const int nin = nd->ninputs, zv = p->group->y;
    const ts_shape *ys = &g->values[zv].shape;
    const int64_t N = ys->dims[0], C = ys->dims[1], H = ys->dims[2], W = ys->dims[3];
    sh_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    *s = (sh_state){.N = N, .HW = H * W, .C = C, .g = p->group->shuffle_groups, .nin = nin, .threads = xv_threads(p),
                    .bytes = 2 * N * C * H * W * (int64_t)sizeof(float)};
    s->in = calloc((size_t)nin, sizeof *s->in);
    s->src_in = malloc(sizeof *s->src_in * (size_t)C);
    s->src_ch = malloc(sizeof *s->src_ch * (size_t)C);
    if (!s->in || !s->src_in || !s->src_ch || xstep_alloc(st, nin, 1, err))
        return err->code ? err->code : ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    /* every input checked before the plan is touched: present, and plain
     * or channels-last, or in another layout that is made plain below */
    for (int j = 0; j < nin; j++) {
        xbuf scratch;
        int v = nd->inputs[j], order[TS_MAX_RANK];
        if (v < 0) return TS_ERR_UNSUPPORTED;
        if (xbuf_dense_order(xplan_value_layout(p, v, &scratch), order) && memcmp(order, nhwc, sizeof nhwc) &&
            !xbuf_order_plain(order, 4))
            return TS_ERR_UNSUPPORTED;
    }
    bool any_nhwc = false, all_nhwc = true;
    for (int j = 0; j < nin; j++) {
        int v = nd->inputs[j], b = xplan_value_buf(p, v), order[TS_MAX_RANK];
        if (b < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
        /* a blocked input (oneDNN's nChw8c/16c: what convs write on CPUs
         * without AVX-512) is converted to plain first */
        if (!xbuf_dense_order(&p->bufs[b], order)) {
            if ((b = xplan_plain(p, b, err)) < 0) return err->code;
            xbuf_dense_order(&p->bufs[b], order);
        }
        bool cl = !memcmp(order, nhwc, sizeof nhwc); /* else plain: checked above */
        s->in[j] = (sh_in){.C = g->values[v].shape.dims[1], .nhwc = cl};
        st->in[j] = b;
        any_nhwc |= cl;
        all_nhwc &= cl;
    }
    /* output channel c = j g + i <- concat channel i (C/g) + j */
    const int64_t gs = s->g, Cg = C / gs;
    for (int64_t c = 0; c < C; c++) {
        int64_t k = (c % gs) * Cg + c / gs;
        int j = 0;
        while (k >= s->in[j].C) k -= s->in[j++].C;
        s->src_in[c] = j;
        s->src_ch[c] = k;
    }
    s->interleave = all_nhwc && nin == gs;
    for (int j = 0; j < nin && s->interleave; j++) s->interleave = s->in[j].C == Cg;
    s->nhwc_out = any_nhwc && !p->opts.plain_layout && !ts_graph_is_output(g, zv);
    if ((st->out[0] = xplan_value_buf(p, zv)) < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    if (s->nhwc_out) xv_set_order(p, st->out[0], nhwc);
    return TS_OK;
}

const xkernel xk_vec_shuffle = {"vec.shuffle", sh_build, sh_run, sh_destroy};
