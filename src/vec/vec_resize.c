/* Resize and Upsample on float32, nearest and (bi)linear over the last
 * two dims, as exporters emit for NCHW images.  The tensor is viewed as
 * [planes, H, W]; nearest also takes any index map on the leading dims (a
 * table of source planes), linear needs them untouched.
 *
 * Everything that depends on coordinates is computed at plan time with
 * the op file's own helpers (ts_resize_sizes / ts_resize_coord /
 * ts_resize_nearest, src/ops/resize.c), so the indices are the reference
 * kernel's to the bit.  Linear keeps the reference's arithmetic as well:
 * corner weights (1 - w) and w in double, products wh * ww, terms summed
 * from +0 in the reference's corner order with zero-weight terms skipped
 * (so 0 * inf never makes a NaN the reference does not), then rounded to
 * float once.  An axis whose positions all land on whole coordinates is
 * not interpolated by the reference; it gets weights 1 and 0 here, which
 * adds exact zeros only.  Under -std=c11 GCC does not contract a*b+c into
 * an FMA, so the AVX clones round like the reference.
 *
 * Anything else (cubic, antialias, other types, linear along a batch or
 * channel axis, scales or sizes not constant) declines to the reference. */
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include "vec/vec.h"
#include "vec/vec_layout.h"
#include "ops/attrs.h"

typedef struct rz_state {
    bool linear;
    bool pairs; /* linear: reuse gathered source rows (TSOPT_SKIP=resize.pairs: gather every output row's) */
    int64_t planes, hin, win, hout, wout;
    int64_t *plane; /* per output plane: offset of its source plane (elements) */
    int64_t nblk; /* row blocks per plane: parallel work items are planes * nblk */
    int threads;
    /* per output row / column: lower and upper source index and weights */
    int64_t *h0, *h1;
    int32_t *c0, *c1; /* columns: int32 indices gather faster (W fits, checked at build) */
    double *hw0, *hw1, *ww0, *ww1;
} rz_state;

static void rz_free(void *p)
{
    rz_state *s = p;
    if (s) {
        free(s->plane);
        free(s->h0);
        free(s->c0);
        free(s->hw0);
    }
    free(s);
}

/* One output row of nearest: a gather.  SSE/AVX loads and stores copy
 * float bits unchanged (NaN payloads too), as the reference's memcpy. */
XV_CLONES static void rz_nearest_row(const float *restrict src, float *restrict dst, const int32_t *restrict ix,
                                     int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) dst[i] = src[ix[i]];
}

/* Source row r's values at every output column's two source columns:
 * [r at c0 | r at c1] (2 x wout floats).  Linear reads rows h0 and h1 =
 * h0 or h0 + 1, so two slots by the row's parity hold every row a pair
 * needs, and an upscale reads each source row's gathered values for all
 * the output rows that use it: lraspp's 28 -> 224 head gathers each of
 * a plane's 28 rows once for 224 output rows (deeplabv3's 14 -> 224: 14
 * rows; before: four values per output row), lraspp's 14 -> 28 once (28
 * output rows, each its own pair).  The
 * values are the same floats, so the sums below are the reference's to
 * the bit. */
static void rz_gather_row(const float *restrict r, const rz_state *s, float *restrict e)
{
    const int64_t w = s->wout;
    const int32_t *restrict i0 = s->c0, *restrict i1 = s->c1;
    for (int64_t i = 0; i < w; i++) {
        e[i] = r[i0[i]];
        e[w + i] = r[i1[i]];
    }
}

/* A corner's term as the reference adds it: w * x, or +0.0 where the
 * weight is zero (so 0 * inf never makes a NaN the reference does not).
 * Every product is computed and the zero-weight ones masked to +0.0 by
 * their bits: GCC (-ftrapping-math) keeps a `w != 0 ? w * x : 0.0` as a
 * branch per term and the row ran scalar (deeplabv3's 14 -> 224 head, 21
 * planes: 3.7 ms per step, loaded); the mask lets it run in vectors. */
static inline double rz_term(double w, double t)
{
    union {
        double d;
        uint64_t u;
    } b = {t};
    b.u &= -(uint64_t)(w != 0);
    return b.d;
}

/* e0, e1: rows h0 and h1 gathered (rz_gather_row). */
XV_CLONES static void rz_linear_row(const float *restrict e0, const float *restrict e1, double a0, double a1,
                                    const rz_state *s, float *restrict dst)
{
    const int64_t w = s->wout;
    const float *restrict e00 = e0, *restrict e10 = e1, *restrict e01 = e0 + w, *restrict e11 = e1 + w;
    const double *restrict b0 = s->ww0, *restrict b1 = s->ww1;
#pragma omp simd
    for (int64_t i = 0; i < w; i++) {
        double w00 = a0 * b0[i], w10 = a1 * b0[i], w01 = a0 * b1[i], w11 = a1 * b1[i];
        double acc = 0;
        acc += rz_term(w00, w00 * (double)e00[i]);
        acc += rz_term(w10, w10 * (double)e10[i]);
        acc += rz_term(w01, w01 * (double)e01[i]);
        acc += rz_term(w11, w11 * (double)e11[i]);
        dst[i] = (float)acc;
    }
}

/* Rows hb..he of output plane pl; e: this thread's 4 x wout floats (two
 * gathered source rows, rz_gather_row). */
static void rz_rows(const rz_state *s, const float *x, float *y, int64_t pl, int64_t hb, int64_t he, float *e)
{
    const float *xp = x + s->plane[pl];
    float *yp = y + pl * s->hout * s->wout;
    int64_t tag[2] = {-1, -1}; /* the source row gathered in each slot of e */
    for (int64_t h = hb; h < he; h++) {
        float *dst = yp + h * s->wout;
        /* Upscaling repeats source rows: copy the row just written. */
        if (h > hb && s->h0[h] == s->h0[h - 1] && s->h1[h] == s->h1[h - 1] &&
            (!s->linear || (s->hw0[h] == s->hw0[h - 1] && s->hw1[h] == s->hw1[h - 1]))) {
            memcpy(dst, dst - s->wout, (size_t)s->wout * sizeof *dst);
            continue;
        }
        if (s->linear) {
            const int64_t r0 = s->h0[h], r1 = s->h1[h];
            if (!s->pairs) tag[0] = tag[1] = -1; /* TSOPT_SKIP=resize.pairs: gather every row */
            for (int k = 0; k < 2; k++) {
                int64_t r = k ? r1 : r0;
                if (tag[r & 1] != r) {
                    rz_gather_row(xp + r * s->win, s, e + (r & 1) * 2 * s->wout);
                    tag[r & 1] = r;
                }
            }
            rz_linear_row(e + (r0 & 1) * 2 * s->wout, e + (r1 & 1) * 2 * s->wout, s->hw0[h], s->hw1[h], s, dst);
        } else
            rz_nearest_row(xp + s->h0[h] * s->win, dst, s->c0, s->wout);
    }
}

static void rz_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const rz_state *s = st->state;
    const float *x = in[0];
    float *y = out[0];
    const int64_t rows = (s->hout + s->nblk - 1) / s->nblk, items = s->planes * s->nblk;
    if (s->threads > 1 && items > 1 && s->planes * s->hout * s->wout >= XV_PAR_MIN) {
#pragma omp parallel num_threads(s->threads)
        {
            float *e = (float *)scratch + (int64_t)omp_get_thread_num() * 4 * s->wout;
#pragma omp for schedule(static)
            for (int64_t it = 0; it < items; it++) {
                int64_t hb = (it % s->nblk) * rows;
                rz_rows(s, x, y, it / s->nblk, hb, hb + rows < s->hout ? hb + rows : s->hout, e);
            }
        }
    } else /* no team for a small step (vec.h: XV_PAR_FOR) */
        for (int64_t it = 0; it < items; it++) {
            int64_t hb = (it % s->nblk) * rows;
            rz_rows(s, x, y, it / s->nblk, hb, hb + rows < s->hout ? hb + rows : s->hout, scratch);
        }
}

/* The raw scales and sizes, as the reference kernel reads them, from the
 * node's constants; false when one that is present is not a constant. */
static bool rz_lists(const xplan *p, const ts_node *nd, const ts_resize_attrs *a, double *scl, int *nscl,
                     int64_t *sizes, int *nsizes)
{
    int si = ts_resize_scales_input(a, p->g->opset);
    *nscl = *nsizes = -1;
    if (si < 0) {
        *nscl = a->nscales;
        for (int i = 0; i < a->nscales; i++) scl[i] = a->scales[i];
        return true;
    }
    int v = si < nd->ninputs ? nd->inputs[si] : -1;
    if (v >= 0 && ts_shape_numel(&p->g->values[v].shape) > 0) {
        const ts_tensor *t = xplan_const(p, v);
        if (!t) return false;
        *nscl = (int)ts_tensor_numel(t);
        if (*nscl > TS_MAX_RANK) *nscl = TS_MAX_RANK;
        for (int i = 0; i < *nscl; i++) scl[i] = ts_tensor_get_f64(t, i);
    }
    v = !a->upsample && p->g->opset >= 11 && nd->ninputs > 3 ? nd->inputs[3] : -1;
    if (v >= 0 && ts_shape_numel(&p->g->values[v].shape) > 0) {
        const ts_tensor *t = xplan_const(p, v);
        if (!t) return false;
        *nsizes = (int)ts_tensor_numel(t);
        if (*nsizes > TS_MAX_RANK) *nsizes = TS_MAX_RANK;
        for (int i = 0; i < *nsizes; i++) sizes[i] = ts_tensor_get_i64(t, i);
    }
    return true;
}

/* Source index (lower, upper) and weights (lower, upper) of every output
 * position of one axis, exactly as resize_kernel computes them; returns
 * whether the axis is the identity (nothing to do along it). */
static bool rz_axis(const ts_resize_attrs *a, float scale, int64_t in_len, int64_t out_len, int64_t *i0, int64_t *i1,
                    double *wlo, double *whi)
{
    bool active = false, ident = in_len == out_len;
    for (int64_t o = 0; o < out_len; o++) {
        float c = ts_resize_coord(a->coord, (float)o, scale, in_len, out_len), w1 = 0;
        if (a->mode == TS_RESIZE_NEAREST) {
            i0[o] = i1[o] = ts_resize_nearest(a->nearest, c, scale, in_len);
        } else {
            c = c < 0 ? 0 : c > (float)(in_len - 1) ? (float)(in_len - 1) : c;
            i0[o] = (int64_t)c;
            i1[o] = i0[o] + 1 < in_len ? i0[o] + 1 : in_len - 1;
            w1 = c - (float)i0[o];
            if (w1 != 0 && i1[o] != i0[o]) active = true;
        }
        whi[o] = w1; /* exact in double; the lower weight needs `active`, known after the loop */
    }
    for (int64_t o = 0; o < out_len; o++) {
        if (active) {
            wlo[o] = 1.0 - whi[o];
        } else { /* the reference reads the lower index only */
            i1[o] = i0[o];
            wlo[o] = 1.0;
            whi[o] = 0.0;
        }
        if (i0[o] != o) ident = false;
    }
    return ident && !active;
}

static ts_status rz_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    const ts_resize_attrs *a = nd->attrs;
    if (nd->ninputs < 1 || nd->noutputs != 1 || p->g->values[nd->inputs[0]].dtype != TS_F32 ||
        p->g->values[nd->outputs[0]].dtype != TS_F32)
        return TS_ERR_UNSUPPORTED;
    if ((a->mode != TS_RESIZE_NEAREST && a->mode != TS_RESIZE_LINEAR && a->mode != TS_RESIZE_BILINEAR) ||
        a->antialias || a->coord == TS_RESIZE_TF_CROP_AND_RESIZE)
        return TS_ERR_UNSUPPORTED;
    const ts_shape *xs = &p->g->values[nd->inputs[0]].shape, *ys = &p->g->values[nd->outputs[0]].shape;
    int r = xs->rank;
    double scl[TS_MAX_RANK];
    int64_t sizes[TS_MAX_RANK], out[TS_MAX_RANK];
    float scale[TS_MAX_RANK];
    int nscl = -1, nsizes = -1;
    char msg[200];
    if (r < 1 || ys->rank != r || !rz_lists(p, nd, a, scl, &nscl, sizes, &nsizes) ||
        ts_resize_sizes(a, xs, scl, nscl, sizes, nsizes, scale, out, msg, sizeof msg))
        return TS_ERR_UNSUPPORTED; /* the reference reports any error */
    for (int d = 0; d < r; d++)
        if (out[d] != ys->dims[d]) return TS_ERR_UNSUPPORTED;
    if (!ts_shape_numel(xs) || !ts_shape_numel(ys) || xs->dims[r - 1] > INT32_MAX) return TS_ERR_UNSUPPORTED;

    /* Leading axes: the reference maps them too.  Usually that is the
     * identity, but not always (tf_half_pixel_for_nn reads c + 0.5, so
     * round_prefer_ceil picks the next channel and linear blends two; a
     * scale of 1.1 on a dim of 5 keeps the size but moves indices), so ask
     * the coordinate maps rather than compare sizes.  Nearest takes any
     * map as a table of source planes; linear along them declines. */
    int64_t planes_out = 1, maxlen = 1;
    for (int d = 0; d < r - 2; d++) {
        planes_out *= ys->dims[d];
        maxlen = ys->dims[d] > maxlen ? ys->dims[d] : maxlen;
    }
    int64_t *ti = malloc(sizeof(int64_t) * 2 * (size_t)maxlen);
    double *tw = malloc(sizeof(double) * 2 * (size_t)maxlen);
    int64_t *plane = malloc(sizeof(int64_t) * (size_t)planes_out);
    bool ok = ti && tw && plane;
    for (int64_t i = 0; ok && i < planes_out; i++) plane[i] = 0;
    int64_t in_plane = r >= 2 ? xs->dims[r - 2] * xs->dims[r - 1] : xs->dims[0], rep = 1;
    for (int d = r - 3; ok && d >= 0; d--) { /* row-major: d's index repeats every `rep` planes */
        bool ident = rz_axis(a, scale[d], xs->dims[d], ys->dims[d], ti, ti + maxlen, tw, tw + maxlen);
        if (!ident && a->mode != TS_RESIZE_NEAREST) ok = false;
        for (int64_t i = 0; ok && i < planes_out; i++) plane[i] += ti[(i / rep) % ys->dims[d]] * in_plane;
        in_plane *= xs->dims[d];
        rep *= ys->dims[d];
    }
    free(ti);
    free(tw);
    if (!ok) { /* out of memory here too: the reference kernel may still fit */
        free(plane);
        return TS_ERR_UNSUPPORTED;
    }

    rz_state *s = xv_state(sizeof *s, err);
    if (!s) {
        free(plane);
        return err->code;
    }
    st->state = s;
    s->plane = plane;
    s->linear = a->mode != TS_RESIZE_NEAREST;
    s->pairs = !xplan_skips(p, "resize.pairs");
    s->planes = planes_out;
    s->hin = r >= 2 ? xs->dims[r - 2] : 1;
    s->hout = r >= 2 ? ys->dims[r - 2] : 1;
    s->win = xs->dims[r - 1];
    s->wout = ys->dims[r - 1];
    s->threads = xv_threads(p);
    /* Few planes (a 1x3 image): split rows too, so every thread has work. */
    s->nblk = 1;
    if (s->planes < 4 * (int64_t)s->threads) {
        s->nblk = (4 * (int64_t)s->threads + s->planes - 1) / s->planes;
        if (s->nblk > s->hout) s->nblk = s->hout;
    }
    s->h0 = malloc(sizeof(int64_t) * 2 * (size_t)s->hout);
    s->hw0 = malloc(sizeof(double) * 2 * (size_t)(s->hout + s->wout));
    int64_t *wi = malloc(sizeof(int64_t) * 2 * (size_t)s->wout);
    s->c0 = malloc(sizeof(int32_t) * 2 * (size_t)s->wout);
    if (!s->h0 || !s->hw0 || !wi || !s->c0) {
        free(wi);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a resize table");
    }
    s->h1 = s->h0 + s->hout;
    s->hw1 = s->hw0 + s->hout;
    s->ww0 = s->hw1 + s->hout;
    s->ww1 = s->ww0 + s->wout;
    s->c1 = s->c0 + s->wout;
    if (r >= 2)
        rz_axis(a, scale[r - 2], s->hin, s->hout, s->h0, s->h1, s->hw0, s->hw1);
    else
        s->h0[0] = s->h1[0] = 0, s->hw0[0] = 1.0, s->hw1[0] = 0.0;
    rz_axis(a, scale[r - 1], s->win, s->wout, wi, wi + s->wout, s->ww0, s->ww1);
    for (int64_t i = 0; i < s->wout; i++) {
        s->c0[i] = (int32_t)wi[i];
        s->c1[i] = (int32_t)wi[s->wout + i];
    }
    free(wi);
    /* linear: each thread's gathered pair of source rows (rz_gather_pair) */
    st->scratch_bytes = s->linear ? sizeof(float) * 4 * (size_t)s->wout * (size_t)s->threads : 0;

    return xv_step_unary(p, n, st, xplan_plain(p, xplan_value_buf(p, nd->inputs[0]), err), NULL, err);
}

const xkernel xk_vec_resize = {"vec.resize", rz_build, rz_run, rz_free};
