/* Data movement on plain buffers of any element type: Transpose, Slice and
 * Expand are one strided copy (the output walked in row-major order, each
 * output dim with its input stride), Concat and Gather copy contiguous
 * blocks with memcpy.  Dims that stay adjacent are merged first, so a
 * transpose that keeps the last axis, a slice of whole rows or a broadcast
 * of a row become row memcpys.  Rows are split over threads when large. */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include "exec/plan_internal.h"
#include "vec/vec.h"
#include "vec/vec_layout.h"
#include "ops/attrs.h"
#include "ops/list.h"

/* ------------------------------------------------------- strided copy */

#define MV_TILE 16 /* output rows per block of the tiled 2-D transpose (below) */

typedef struct mv_state {
    size_t es;
    int rank;
    int64_t dims[TS_MAX_RANK], stride[TS_MAX_RANK]; /* input stride (elements) per output dim */
    int64_t base, nrows, len, bytes;
    int threads;
    /* a 4-byte transpose whose last two output dims are a 2-D transpose of
     * the input (stride[rank-2] == 1): copied in tiles (mv_tile_rows) */
    bool tiled;
    int64_t tblocks; /* row blocks of MV_TILE output rows per outer index */
    int scale_op;    /* vec.slice_transpose: 1 y = x * scale, 2 y = x / scale (float32), 0 a copy */
    float scale;
    /* Concat / Gather */
    int nin;
    int64_t outer, inner_bytes, *blk;  /* Concat: bytes per input block; Gather: source row per index */
    bool relu;                         /* Concat: writes max(x, 0) (its Relu readers fused) */
    int64_t pieces;                    /* Concat: byte ranges each output row is cut into */
    int64_t nidx, src_rows;
    int axis;      /* Concat: the axis */
    bool permuted; /* Concat: done in a permuted layout (not resized) */
} mv_state;

static void mv_free(void *p)
{
    mv_state *s = p;
    if (s) free(s->blk);
    free(s);
}

static void strided_setup(mv_state *s, const ts_shape *out, const int64_t *stride)
{
    int r = 0;
    for (int d = 0; d < out->rank; d++) {
        if (out->dims[d] == 1) continue;
        if (r > 0 && s->stride[r - 1] == stride[d] * out->dims[d]) {
            s->dims[r - 1] *= out->dims[d];
            s->stride[r - 1] = stride[d];
        } else {
            s->dims[r] = out->dims[d];
            s->stride[r++] = stride[d];
        }
    }
    if (r == 0) s->dims[r] = 1, s->stride[r++] = 1;
    s->rank = r;
    s->len = s->dims[r - 1];
    s->nrows = ts_shape_numel(out) / (s->len ? s->len : 1);
    if (!s->len) s->nrows = 0;
    s->bytes = ts_shape_numel(out) * (int64_t)s->es;
    s->tiled = s->es == 4 && r >= 2 && s->stride[r - 2] == 1 && s->stride[r - 1] != 1 && s->nrows > 0;
    s->tblocks = s->tiled ? (s->dims[r - 2] + MV_TILE - 1) / MV_TILE : 0;
}

/* ------------------------------------------- 2-D transpose in tiles */
/* Output row r, column c of a block is input element c * is + r: the
 * input's contiguous axis became an outer output axis (Transpose to NCHW
 * from channels-last, K^T in attention [s, h, d] -> [h, d, s]).  Element by
 * element (the strided path above) every load touches another cache line
 * and the next output row comes back for the neighbouring float of each:
 * 3-5x a plain copy's time (convnext_tiny's NHWC -> NCHW transposes 0.31-
 * 0.34 ms against 0.07 for dnnl.transpose's same bytes, loaded Intel
 * Xeon, 12-07).  In tiles of MV_TILE output rows x 8 columns every input
 * cache line read is used whole (16 floats: two 8x8 tiles); the 8x8 tiles
 * are transposed in AVX registers where the CPU has AVX2 (both x86 CPUs
 * of the bench machines), else by scalar copies in the same order.  Pure
 * movement: the output bits are the input's. */
__attribute__((target("avx2"))) static void mv_tr8x8_avx2(const uint32_t *in, int64_t is, uint32_t *out,
                                                           int64_t os)
{
    __m256 a0 = _mm256_loadu_ps((const float *)(in + 0 * is)), a1 = _mm256_loadu_ps((const float *)(in + 1 * is));
    __m256 a2 = _mm256_loadu_ps((const float *)(in + 2 * is)), a3 = _mm256_loadu_ps((const float *)(in + 3 * is));
    __m256 a4 = _mm256_loadu_ps((const float *)(in + 4 * is)), a5 = _mm256_loadu_ps((const float *)(in + 5 * is));
    __m256 a6 = _mm256_loadu_ps((const float *)(in + 6 * is)), a7 = _mm256_loadu_ps((const float *)(in + 7 * is));
    __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1);
    __m256 t2 = _mm256_unpacklo_ps(a2, a3), t3 = _mm256_unpackhi_ps(a2, a3);
    __m256 t4 = _mm256_unpacklo_ps(a4, a5), t5 = _mm256_unpackhi_ps(a4, a5);
    __m256 t6 = _mm256_unpacklo_ps(a6, a7), t7 = _mm256_unpackhi_ps(a6, a7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps((float *)(out + 0 * os), _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps((float *)(out + 1 * os), _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps((float *)(out + 2 * os), _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps((float *)(out + 3 * os), _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps((float *)(out + 4 * os), _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps((float *)(out + 5 * os), _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps((float *)(out + 6 * os), _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps((float *)(out + 7 * os), _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* Output rows [0, rn) (rn <= MV_TILE) of one block, all `cn` columns:
 * out[r * os + c] = in[c * is + r]. */
static void mv_tile_rows(const uint32_t *in, int64_t is, uint32_t *out, int64_t os, int64_t rn, int64_t cn,
                         bool avx2)
{
    int64_t c = 0;
    for (; c + 8 <= cn; c += 8) {
        int64_t r = 0;
        if (avx2)
            for (; r + 8 <= rn; r += 8) mv_tr8x8_avx2(in + c * is + r, is, out + r * os + c, os);
        for (; r < rn; r++)
            for (int64_t k = 0; k < 8; k++) out[r * os + c + k] = in[(c + k) * is + r];
    }
    for (; c < cn; c++)
        for (int64_t r = 0; r < rn; r++) out[r * os + c] = in[c * is + r];
}

static void tiled_run(const mv_state *s, const uint32_t *x, uint32_t *y)
{
    const int rank = s->rank;
    const int64_t rows = s->dims[rank - 2], len = s->len, is = s->stride[rank - 1], nb = s->tblocks;
    const int64_t items = s->nrows / rows * nb;
    const bool avx2 = __builtin_cpu_supports("avx2");
    XV_PAR_FOR(it, items, s->threads, XV_SPLITS(s->threads, 2 * s->bytes), {
        int64_t o = it / nb, r0 = (it % nb) * MV_TILE, off = 0, q = o;
        for (int d = rank - 3; d >= 0; d--) {
            off += (q % s->dims[d]) * s->stride[d];
            q /= s->dims[d];
        }
        int64_t rn = rows - r0 < MV_TILE ? rows - r0 : MV_TILE;
        mv_tile_rows(x + off + r0, is, y + (o * rows + r0) * len, len, rn, len, avx2);
    });
}

static void strided_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const mv_state *s = st->state;
    const char *x = (const char *)in[0] + s->base * (int64_t)s->es;
    char *y = out[0];
    const size_t es = s->es;
    const int64_t len = s->len, is = s->stride[s->rank - 1];
    (void)scratch;
    if (s->tiled) {
        tiled_run(s, (const uint32_t *)x, (uint32_t *)y);
        return;
    }
    XV_PAR_FOR(row, s->nrows, s->threads, XV_SPLITS(s->threads, 2 * s->bytes), {
        int64_t off = 0, r = row;
        for (int d = s->rank - 2; d >= 0; d--) {
            off += (r % s->dims[d]) * s->stride[d];
            r /= s->dims[d];
        }
        const char *src = x + off * (int64_t)es;
        char *dst = y + row * len * (int64_t)es;
        if (is == 1) {
            memcpy(dst, src, (size_t)len * es);
        } else if (es == 4) {
            for (int64_t i = 0; i < len; i++) ((uint32_t *)dst)[i] = *(const uint32_t *)(src + i * is * 4);
        } else if (es == 8) {
            for (int64_t i = 0; i < len; i++) ((uint64_t *)dst)[i] = *(const uint64_t *)(src + i * is * 8);
        } else {
            for (int64_t i = 0; i < len; i++) memcpy(dst + i * (int64_t)es, src + i * is * (int64_t)es, es);
        }
    });
}

static mv_state *mv_new(xplan *p, int n, ts_error *err)
{
    mv_state *s = xv_state(sizeof *s, err);
    if (s) {
        s->es = ts_dtype_size(p->g->values[xplan_node(p, n)->outputs[0]].dtype);
        s->threads = xv_threads(p);
    }
    return s;
}

/* Binds input 0 and output 0 only (the other inputs are constants read at build). */
static ts_status bind_first(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    return xv_step_unary(p, n, st, xplan_plain(p, xplan_value_buf(p, nd->inputs[0]), err), NULL, err);
}

static ts_status transpose_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    if (p->g->values[nd->inputs[0]].dtype == TS_MODP)
        return TS_ERR_UNSUPPORTED;
    const ts_transpose_attrs *a = nd->attrs;
    const ts_shape *xs = &p->g->values[nd->inputs[0]].shape, *ys = &p->g->values[nd->outputs[0]].shape;
    int64_t xst[TS_MAX_RANK], stride[TS_MAX_RANK];
    ts_shape_strides(xs, xst);
    for (int d = 0; d < ys->rank; d++) {
        int64_t pd = a->nperm < 0 ? ys->rank - 1 - d : a->perm[d];
        if (pd < 0 || pd >= xs->rank) return TS_ERR_UNSUPPORTED;
        stride[d] = xst[pd];
    }
    mv_state *s = mv_new(p, n, err);
    if (!s) return err->code;
    st->state = s;
    strided_setup(s, ys, stride);
    return bind_first(p, n, st, err);
}

/* Constant int64/int32 input i of node n into out (count in *cnt); false if absent/not constant. */
static bool const_ints(const xplan *p, const ts_node *nd, int i, int64_t *out, int max, int *cnt)
{
    if (i >= nd->ninputs || nd->inputs[i] < 0) return false;
    const ts_tensor *t = xplan_const(p, nd->inputs[i]);
    if (!t || (t->dtype != TS_I64 && t->dtype != TS_I32) || ts_tensor_numel(t) > max) return false;
    *cnt = (int)ts_tensor_numel(t);
    for (int k = 0; k < *cnt; k++) out[k] = ts_tensor_get_i64(t, k);
    return true;
}

/* The dense permuted layout (vec_layout.h) that input 0 of node nd and
 * every further input in [1, nshared) have in common, for a result that may
 * keep it (not a graph output, float32): false when it is plain or they
 * differ. */
static bool common_order(const xplan *p, const ts_node *nd, int nshared, int *order)
{
    const ts_value *y = &p->g->values[nd->outputs[0]];
    if (y->dtype != TS_F32 || y->shape.rank < 2 || ts_graph_is_output(p->g, nd->outputs[0])) return false;
    for (int j = 0; j < nshared; j++) {
        xbuf scratch; /* the layouts as they are or will be: the buffers are made once nothing declines */
        int o[TS_MAX_RANK];
        if (nd->inputs[j] < 0 || p->g->values[nd->inputs[j]].shape.rank != y->shape.rank ||
            !xbuf_dense_order(xplan_value_layout(p, nd->inputs[j], &scratch), o))
            return false;
        if (j == 0)
            memcpy(order, o, sizeof o);
        else if (memcmp(order, o, sizeof o))
            return false;
    }
    return !xbuf_order_plain(order, y->shape.rank);
}

/* Slice node nd's start offset (*base) and per-dim strides of its result
 * in its input, whose dims have strides xst (elements); false when its
 * starts, ends, axes or steps are not constants this can read. */
static bool slice_geom(const xplan *p, const ts_node *nd, const int64_t *xst, int64_t *base, int64_t *stride)
{
    const ts_slice_attrs *a = nd->attrs;
    const ts_shape *xs = &p->g->values[nd->inputs[0]].shape, *ys = &p->g->values[nd->outputs[0]].shape;
    int64_t starts[TS_MAX_RANK], ends[TS_MAX_RANK], axes[TS_MAX_RANK], steps[TS_MAX_RANK];
    int ns = a->nstarts, ne = a->nends, na = a->naxes, nst = -1;
    memcpy(starts, a->starts, sizeof starts);
    memcpy(ends, a->ends, sizeof ends);
    memcpy(axes, a->axes, sizeof axes);
    if (nd->ninputs > 1) { /* opset 10+: everything is an input, and must be constant here */
        if (!const_ints(p, nd, 1, starts, TS_MAX_RANK, &ns) || !const_ints(p, nd, 2, ends, TS_MAX_RANK, &ne))
            return false;
        if (!const_ints(p, nd, 3, axes, TS_MAX_RANK, &na)) {
            if (nd->ninputs > 3 && nd->inputs[3] >= 0) return false;
            na = -1;
        }
        if (!const_ints(p, nd, 4, steps, TS_MAX_RANK, &nst)) {
            if (nd->ninputs > 4 && nd->inputs[4] >= 0) return false;
            nst = -1;
        }
    }
    if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns)) return false;
    *base = 0;
    for (int d = 0; d < xs->rank; d++) stride[d] = xst[d];
    for (int i = 0; i < ns; i++) { /* the same clamping as src/ops/slice.c */
        int d;
        if (!ts_axis_norm(na >= 0 ? axes[i] : i, xs->rank, &d)) return false;
        int64_t dim = xs->dims[d], s0 = starts[i], step = nst >= 0 ? steps[i] : 1;
        if (step == 0) return false;
        if (s0 < 0) s0 = s0 < -dim ? -1 - dim : s0 + dim;
        if (step > 0)
            s0 = s0 < 0 ? 0 : s0 > dim ? dim : s0;
        else
            s0 = s0 < 0 ? -1 : s0 > dim - 1 ? dim - 1 : s0;
        if (ys->dims[d] > 0) *base += s0 * xst[d];
        stride[d] = xst[d] * step;
    }
    return true;
}

/* A dense permuted input (vec_layout.h) is sliced in its own order and the
 * result keeps it. */
static ts_status slice_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    if (p->g->values[nd->inputs[0]].dtype == TS_MODP)
        return TS_ERR_UNSUPPORTED;
    const ts_shape *xs = &p->g->values[nd->inputs[0]].shape, *ys = &p->g->values[nd->outputs[0]].shape;
    int64_t xst[TS_MAX_RANK], stride[TS_MAX_RANK], base = 0;
    int order[TS_MAX_RANK];
    bool keep = common_order(p, nd, 1, order);
    if (keep) {
        int64_t e = 1;
        for (int k = xs->rank - 1; k >= 0; k--) xst[order[k]] = e, e *= xs->dims[order[k]];
    } else {
        ts_shape_strides(xs, xst);
    }
    if (!slice_geom(p, nd, xst, &base, stride)) return TS_ERR_UNSUPPORTED;
    mv_state *s = mv_new(p, n, err);
    if (!s) return err->code;
    st->state = s;
    s->base = base;
    if (!keep) {
        strided_setup(s, ys, stride);
        return bind_first(p, n, st, err);
    }
    /* walk the output in its physical order */
    ts_shape yp = *ys;
    int64_t sp[TS_MAX_RANK];
    for (int k = 0; k < ys->rank; k++) yp.dims[k] = ys->dims[order[k]], sp[k] = stride[order[k]];
    strided_setup(s, &yp, sp);
    return xv_step_unary(p, n, st, xplan_value_buf(p, nd->inputs[0]), order, err);
}

/* The strides (elements) that view a tensor of dims od / strides os as
 * dims nd (the same count) without a copy, as NumPy's reshape finds them:
 * each run of new dims must cover a run of old dims that lie evenly one
 * inside the other.  False when it takes a copy. */
static bool view_strides(const ts_shape *od, const int64_t *os, const ts_shape *nd, int64_t *ns)
{
    int64_t d[TS_MAX_RANK], st[TS_MAX_RANK];
    int on = 0;
    for (int k = 0; k < od->rank; k++) /* size-1 dims move nothing */
        if (od->dims[k] != 1) d[on] = od->dims[k], st[on++] = os[k];
    int oi = 0, ni = 0;
    for (int k = 0; k < nd->rank; k++) ns[k] = 0;
    while (ni < nd->rank && nd->dims[ni] == 1) ni++;
    while (ni < nd->rank && oi < on) {
        int oj = oi + 1, nj = ni + 1;
        int64_t np = nd->dims[ni], op = d[oi];
        while (np != op) {
            if (np < op) {
                if (nj >= nd->rank) return false;
                np *= nd->dims[nj++];
            } else {
                if (oj >= on) return false;
                op *= d[oj++];
            }
        }
        for (int k = oi; k < oj - 1; k++)
            if (st[k] != d[k + 1] * st[k + 1]) return false;
        ns[nj - 1] = st[oj - 1];
        for (int k = nj - 1; k > ni; k--) ns[k - 1] = ns[k] * nd->dims[k];
        ni = nj, oi = oj;
        while (ni < nd->rank && nd->dims[ni] == 1) ni++;
    }
    return ni == nd->rank && oi == on;
}

/* One output row of vec.slice_transpose: len elements at input stride is,
 * times or divided by c (op 1 / 2) or copied (op 0). */
XV_CLONES static void st_row(const float *x, float *y, int64_t len, int64_t is, int op, float c)
{
    /* omp simd: the output never overlaps the Slice's input (another
     * buffer), which GCC's -O2 cost model would not check at run time, so
     * the scaled rows (ViT's q) ran as scalar mulss/divss (-fopt-info-vec-
     * missed); mulps/divps round as those do: the same bits. */
    if (is == 1) {
        if (op == 1) {
#pragma omp simd
            for (int64_t i = 0; i < len; i++) y[i] = x[i] * c;
        } else if (op == 2) {
#pragma omp simd
            for (int64_t i = 0; i < len; i++) y[i] = x[i] / c;
        } else
            memcpy(y, x, (size_t)len * sizeof *y);
        return;
    }
    if (op == 1)
        for (int64_t i = 0; i < len; i++) y[i] = x[i * is] * c;
    else if (op == 2)
        for (int64_t i = 0; i < len; i++) y[i] = x[i * is] / c;
    else
        for (int64_t i = 0; i < len; i++) y[i] = x[i * is];
}

/* Heads x tokens x head dims (rank 3 once adjacent dims merge: the
 * attention's q, k, v) walked as nested loops over whole rows, the heads
 * split over the threads: no division per row (strided_run's row index
 * into an offset), and a scale on contiguous rows vectorizes.  Anything
 * else, and k's 2-D transposes (tiled), by strided_run. */
static void slice_transpose_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const mv_state *s = st->state;
    if (s->rank != 3 || s->tiled || s->es != 4) {
        strided_run(st, in, out, scratch);
        return;
    }
    const float *x = (const float *)in[0] + s->base;
    float *y = out[0];
    const int64_t d1 = s->dims[1], len = s->len, is = s->stride[2], s0 = s->stride[0], s1 = s->stride[1];
    const int op = s->scale_op;
    const float c = s->scale;
    XV_PAR_FOR(i0, s->dims[0], s->threads, XV_SPLITS(s->threads, 2 * s->bytes), {
        for (int64_t i1 = 0; i1 < d1; i1++) st_row(x + i0 * s0 + i1 * s1, y + (i0 * d1 + i1) * len, len, is, op, c);
    });
}

/* Served by the lowering stage (lower_group.c): a Slice, the Reshape after
 * it (a view of the slice), a Transpose and a Mul or Div by a scalar, as one
 * strided copy from the Slice's input (plain) into the last node's result:
 * each output dim's stride is the Slice's, through the Reshape's view and
 * the Transpose's permutation.  The scalar is applied as the node says
 * (x * c or x / c): bit-identical to the steps it replaces. */
static ts_status slice_transpose_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const xgroup *gr = p->group;
    const ts_node *sn = xplan_node(p, n);
    const ts_graph *g = p->g;
    if (g->values[sn->inputs[0]].dtype == TS_MODP || (gr->st_op && g->values[gr->y].dtype != TS_F32))
        return TS_ERR_UNSUPPORTED;
    const ts_shape *xs = &g->values[sn->inputs[0]].shape;
    int64_t xst[TS_MAX_RANK], cur[TS_MAX_RANK], next[TS_MAX_RANK], base = 0;
    ts_shape_strides(xs, xst);
    if (!slice_geom(p, sn, xst, &base, cur)) return TS_ERR_UNSUPPORTED;
    const ts_shape *shape = &g->values[sn->outputs[0]].shape;
    const int chain[2] = {gr->st_reshape, gr->st_transpose};
    for (int k = 0; k < 2; k++) {
        if (chain[k] < 0) continue;
        const ts_node *nd = xplan_node(p, chain[k]);
        const ts_shape *ys = &g->values[nd->outputs[0]].shape;
        if (nd->op == &ts_op_reshape) {
            if (!view_strides(shape, cur, ys, next)) return TS_ERR_UNSUPPORTED;
        } else {
            const ts_transpose_attrs *a = nd->attrs;
            for (int d = 0; d < ys->rank; d++) {
                int64_t pd = a->nperm < 0 ? ys->rank - 1 - d : a->perm[d];
                if (pd < 0 || pd >= shape->rank) return TS_ERR_UNSUPPORTED;
                next[d] = cur[pd];
            }
        }
        memcpy(cur, next, sizeof cur);
        shape = ys;
    }
    mv_state *s = mv_new(p, n, err);
    if (!s) return err->code;
    st->state = s;
    s->base = base;
    strided_setup(s, shape, cur);
    s->scale_op = gr->st_op;
    s->scale = gr->st_scale;
    /* x / c is x * (1 / c) bit for bit when c is a power of two (1 / c
     * exact, both the correctly rounded x / c): ViT's sqrt(64) = 8; a
     * division costs ~10x a product (the encoder's q by sqrt(32): 0.017-0.020
     * ms alone, loaded) */
    int ex;
    if (s->scale_op == 2 && isfinite(s->scale) && frexpf(s->scale, &ex) == 0.5f && ex > -125 && ex < 126)
        s->scale_op = 1, s->scale = 1.0f / s->scale;
    if (s->scale_op) s->tiled = false; /* the scaled rows below */
    int xb = xplan_plain(p, xplan_value_buf(p, sn->inputs[0]), err);
    if (xb < 0) return err->code ? err->code : TS_ERR_INVALID;
    if (xstep_alloc(st, 1, 1, err)) return err->code;
    st->in[0] = xb;
    if ((st->out[0] = xplan_value_buf(p, gr->y)) < 0)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    return TS_OK;
}

static ts_status expand_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    if (p->g->values[nd->inputs[0]].dtype == TS_MODP) return TS_ERR_UNSUPPORTED;
    const ts_shape *xs = &p->g->values[nd->inputs[0]].shape, *ys = &p->g->values[nd->outputs[0]].shape;
    int64_t stride[TS_MAX_RANK];
    ts_shape_bcast_strides(xs, ys, stride);
    mv_state *s = mv_new(p, n, err);
    if (!s) return err->code;
    st->state = s;
    strided_setup(s, ys, stride);
    return bind_first(p, n, st, err);
}

/* -------------------------------------------------------------- Concat */

XV_CLONES static void relu_copy(float *restrict dst, const float *restrict src, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) dst[i] = src[i] > 0 ? src[i] : 0.0f;
}

/* Output bytes [lo, hi) of one row of the concatenation. */
static void concat_range(const mv_state *s, void *const *in, int64_t o, int64_t lo, int64_t hi, char *row)
{
    int64_t at = 0;
    for (int j = 0; j < s->nin && at < hi; at += s->blk[j], j++) {
        int64_t a = lo > at ? lo : at, b = hi < at + s->blk[j] ? hi : at + s->blk[j];
        if (a >= b) continue;
        const char *src = (const char *)in[j] + o * s->blk[j] + (a - at);
        if (s->relu)
            relu_copy((float *)(row + a), (const float *)src, (b - a) / (int64_t)sizeof(float));
        else
            memcpy(row + a, src, (size_t)(b - a));
    }
}

/* Work items are pieces of rows: with few rows (a batch-1 NCHW concat on
 * the channel axis is one row) a row is cut into `pieces` byte ranges, so
 * both threads copy. */
static void concat_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const mv_state *s = st->state;
    char *y = out[0];
    const int64_t pieces = s->pieces, items = s->outer * pieces, unit = s->relu ? (int64_t)sizeof(float) : 1;
    (void)scratch;
    XV_PAR_FOR(it, items, s->threads, XV_SPLITS(s->threads, 2 * s->bytes), {
        int64_t o = it / pieces, k = it % pieces;
        int64_t lo = s->inner_bytes / unit * k / pieces * unit, hi = s->inner_bytes / unit * (k + 1) / pieces * unit;
        concat_range(s, in, o, lo, hi, y + o * s->inner_bytes);
    });
}

/* outer, inner_bytes, bytes and pieces of a concatenation into y (dims
 * in `order`, the axis at pax); the bytes per unit of the axis. */
static int64_t concat_sizes(mv_state *s, const ts_shape *y, const int *order, int pax)
{
    s->outer = 1;
    for (int k = 0; k < pax; k++) s->outer *= y->dims[order[k]];
    int64_t inner = (int64_t)s->es;
    for (int k = pax + 1; k < y->rank; k++) inner *= y->dims[order[k]];
    s->inner_bytes = inner * y->dims[order[pax]];
    s->bytes = s->outer * s->inner_bytes;
    s->pieces = 1;
    if (s->outer < 2 * s->threads) { /* pieces of at least 64 KiB, a few per thread */
        s->pieces = s->inner_bytes >> 16;
        s->pieces = s->pieces < 1 ? 1 : s->pieces > 4 * s->threads ? 4 * s->threads : s->pieces;
    }
    return inner;
}

/* Inputs in one dense permuted layout (channels-last conv outputs) are
 * concatenated in it: the same block copies over the physical dims, with
 * the concat axis at its physical position; the result keeps the layout. */
static ts_status concat_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    const ts_value *y = &p->g->values[nd->outputs[0]];
    int axis;
    if (y->dtype == TS_MODP) return TS_ERR_UNSUPPORTED;
    if (!ts_axis_norm(((const ts_concat_attrs *)nd->attrs)->axis, y->shape.rank, &axis)) return TS_ERR_UNSUPPORTED;
    for (int j = 0; j < nd->ninputs; j++) /* declined before the plan is touched */
        if (nd->inputs[j] < 0) return TS_ERR_UNSUPPORTED;
    int order[TS_MAX_RANK], pax = axis;
    bool keep = common_order(p, nd, nd->ninputs, order);
    if (!keep)
        for (int d = 0; d < y->shape.rank; d++) order[d] = d;
    for (int k = 0; k < y->shape.rank; k++)
        if (order[k] == axis) pax = k;
    mv_state *s = mv_new(p, n, err);
    if (!s) return err->code;
    st->state = s;
    s->nin = nd->ninputs;
    if (!(s->blk = calloc((size_t)s->nin + 1, sizeof *s->blk)))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    s->axis = axis;
    for (int k = 0; k < y->shape.rank; k++) s->permuted |= order[k] != k;
    const int64_t inner = concat_sizes(s, &y->shape, order, pax);
    if (xstep_alloc(st, nd->ninputs, 1, err)) return err->code;
    for (int j = 0; j < nd->ninputs; j++) {
        s->blk[j] = inner * p->g->values[nd->inputs[j]].shape.dims[axis];
        int b = xplan_value_buf(p, nd->inputs[j]);
        if ((st->in[j] = keep ? b : xplan_plain(p, b, err)) < 0) return err->code ? err->code : TS_ERR_INVALID;
    }
    /* the Relus reading the result, when they are all its readers
     * (lower_concat.c): max(x, 0) written once, every Relu's value */
    const xgroup *gr = p->group;
    s->relu = gr->nrelu > 0;
    st->out[0] = xplan_value_buf(p, gr->y);
    if (st->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    for (int k = 1; k < gr->nrelu; k++) xplan_bind_value(p, gr->relu_y[k], st->out[0]);
    if (keep) xv_set_order(p, st->out[0], order);
    return TS_OK;
}

/* -------------------------------------------------------------- Gather */

static void gather_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const mv_state *s = st->state;
    const char *x = in[0];
    char *y = out[0];
    (void)scratch;
    XV_PAR_FOR(o, s->outer, s->threads, XV_SPLITS(s->threads, 2 * s->bytes), {
        for (int64_t k = 0; k < s->nidx; k++)
            memcpy(y + (o * s->nidx + k) * s->inner_bytes, x + (o * s->src_rows + s->blk[k]) * s->inner_bytes,
                   (size_t)s->inner_bytes);
    });
}

/* One index into a tensor whose dims before the axis are all 1 (Swin's
 * q, k, v = qkv[0], qkv[1], qkv[2] of a [3, windows, heads, 49, 32]) picks
 * one contiguous block: the result is a view at that offset, no copy.  The
 * step stays (it names the node in profiles) and moves nothing. */
static ts_status gather_view(xplan *p, int n, xstep *st, int64_t offset, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    mv_state *s = st->state;
    int src = xplan_plain(p, xplan_value_buf(p, nd->inputs[0]), err);
    if (src < 0) return err->code ? err->code : TS_ERR_INVALID;
    const ts_value *ov = &p->g->values[nd->outputs[0]];
    int a = xplan_new_buf(p, nd->outputs[0], ov->dtype, &ov->shape);
    if (a < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    p->bufs[a].kind = XB_ALIAS;
    p->bufs[a].alias_of = xbuf_root(p, src);
    p->bufs[a].offset = xbuf_alias_offset(p, src) + offset;
    xplan_bind_value(p, nd->outputs[0], a);
    s->nidx = 0; /* gather_run copies nothing */
    if (xstep_alloc(st, 1, 1, err)) return err->code;
    st->in[0] = src;
    st->out[0] = a;
    return TS_OK;
}

/* Constant indices only: they are checked here once, while a run cannot
 * report an index out of range (the reference kernel does). */
static ts_status gather_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    const ts_value *x = &p->g->values[nd->inputs[0]];
    const ts_tensor *idx = xplan_const(p, nd->inputs[1]);
    int axis;
    if (x->dtype == TS_MODP || !idx ||
        (idx->dtype != TS_I64 && idx->dtype != TS_I32))
        return TS_ERR_UNSUPPORTED;
    if (!ts_axis_norm(((const ts_gather_attrs *)nd->attrs)->axis, x->shape.rank, &axis)) return TS_ERR_UNSUPPORTED;
    int64_t dim = x->shape.dims[axis], ni = ts_tensor_numel(idx);
    for (int64_t k = 0; k < ni; k++) {
        int64_t v = ts_tensor_get_i64(idx, k);
        if (v < -dim || v >= dim) return TS_ERR_UNSUPPORTED; /* the reference reports it */
    }
    mv_state *s = mv_new(p, n, err);
    if (!s) return err->code;
    st->state = s;
    if (!(s->blk = malloc(sizeof *s->blk * (size_t)(ni + 1))))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    for (int64_t k = 0; k < ni; k++) {
        int64_t v = ts_tensor_get_i64(idx, k);
        s->blk[k] = v < 0 ? v + dim : v;
    }
    s->nidx = ni;
    s->src_rows = dim;
    s->outer = 1;
    for (int d = 0; d < axis; d++) s->outer *= x->shape.dims[d];
    s->inner_bytes = (int64_t)s->es;
    for (int d = axis + 1; d < x->shape.rank; d++) s->inner_bytes *= x->shape.dims[d];
    s->bytes = s->outer * ni * s->inner_bytes;
    if (s->outer == 1 && ni == 1 && !ts_graph_is_output(p->g, nd->outputs[0]))
        return gather_view(p, n, st, s->blk[0] * s->inner_bytes, err);
    return bind_first(p, n, st, err);
}

const xkernel xk_vec_transpose = {"vec.transpose", transpose_build, strided_run, mv_free};
const xkernel xk_vec_slice = {"vec.slice", slice_build, strided_run, mv_free};
const xkernel xk_vec_slice_transpose = {"vec.slice_transpose", slice_transpose_build, slice_transpose_run, mv_free};
const xkernel xk_vec_expand = {"vec.expand", expand_build, strided_run, mv_free};
/* Re-bound to other sizes (a decoder's cache one row longer): the block
 * sizes from the new shapes, in the plain layout only. */
ts_status xv_concat_resize(const xplan *p, const xstep *st, const ts_graph *g, void **state, size_t *scratch,
                               ts_error *err)
{
    const mv_state *o = st->state;
    bool graph = st->nout == 1 && st->nin == o->nin && p->bufs[st->out[0]].value >= 0;
    for (int j = 0; graph && j < st->nin; j++) graph = st->in[j] >= 0 && p->bufs[st->in[j]].value >= 0;
    if (o->permuted || !graph || o->axis >= g->values[p->bufs[st->out[0]].value].shape.rank)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "vec.concat: laid out permuted or over plan buffers");
    const ts_shape *y = &g->values[p->bufs[st->out[0]].value].shape;
    int order[TS_MAX_RANK];
    for (int k = 0; k < y->rank; k++) order[k] = k;
    mv_state *s = malloc(sizeof *s);
    int64_t *blk = malloc(sizeof *blk * ((size_t)o->nin + 1));
    if (!s || !blk) {
        free(s);
        free(blk);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    }
    *s = *o;
    s->blk = blk;
    const int64_t inner = concat_sizes(s, y, order, o->axis);
    int64_t sum = 0;
    for (int j = 0; j < s->nin; j++) {
        const ts_shape *x = &g->values[p->bufs[st->in[j]].value].shape;
        s->blk[j] = inner * x->dims[o->axis];
        sum += s->blk[j];
    }
    *state = s;
    *scratch = st->scratch_bytes;
    if (sum != s->inner_bytes) { /* the shapes do not concatenate (never for an inferred graph) */
        mv_free(s);
        *state = NULL;
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "vec.concat: inputs do not add up at the new sizes");
    }
    return TS_OK;
}

const xkernel xk_vec_concat = {"vec.concat", concat_build, concat_run, mv_free};
const xkernel xk_vec_gather = {"vec.gather", gather_build, gather_run, mv_free};
