/* MatMul and Gemm on oneDNN's matmul primitive (batched, with NumPy
 * broadcasting of batch dimensions).  Constant weights are folded (Gemm's
 * alpha, a following per-column Mul) and pre-packed once in the format the
 * primitive asks for; Gemm's constant C and a following Add of a constant
 * row vector become the bias; a residual Add and activations become
 * post-ops, as for convolutions (dnnl_util.c).  Operands are plain
 * row-major (transposes through strides).
 *
 * Why not OpenBLAS here: measured on the target (AMD EPYC, AVX-512, one
 * thread, medians of 50, machine shared) oneDNN's matmul with pre-packed
 * weights beat cblas_sgemm on every shape tried: 128x768x768 0.79 vs
 * 1.8 ms, 128x768x3072 11 vs 22 ms, 1x2048x1000 0.10 vs 0.52 ms; and one
 * library keeps the post-op fusion in the same call. */
#include <stdlib.h>
#include <string.h>
#include "dnnl/bf16_split.h"
#include "dnnl/dnnl_conv.h"
#include "dnnl/dnnl_residual.h"
#include "dnnl/dnnl_util.h"
#include "exec/half.h"
#include "exec/pack_cache.h"
#include "exec/plan_internal.h"
#include "exec/roofline.h"
#include "ops/attrs.h"
#include "vec/vec_eltwise.h"

typedef struct mm_state {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    xd_mem src, wei, bias, dst, pad;
    bool has_bias, has_sum;
    int wei_in, bias_in, res_in;
    xd_reorder res_r;
    dnnl_exec_arg_t args[6];
    int nargs;
    /* Half plans (half.c): a large weight stored 16-bit is widened and
     * multiplied in column chunks of at most MM_CHUNK_BYTES in float32
     * (instead of the whole weight widened into the step's scratch before
     * one product: 9.4 MB for ViT's MLP, its run-time arena's largest
     * part: ViT-B/16-l4 float16 arena 12.46 -> 5.77 MiB).  The packed
     * layout (BA16a64b: 64-column panels, outermost) makes a chunk of
     * whole panels one contiguous range.  Prepared at build, used when
     * half.c hands the 16-bit weight over (xd_matmul_half_chunks). */
    dnnl_primitive_t cprim;
    xd_mem cs, cw, cb, cd, cpad;
    dnnl_exec_arg_t cargs[6];
    int cnargs, nchunks;
    int64_t ccols, rows;       /* columns per chunk, rows of A */
    size_t celems, coff, doff; /* weight elements per chunk; the widened chunk's and the product's offsets in the scratch */
    ts_dtype chalf;      /* TS_UNDEFINED: not handed over, the plain path runs */
    bool csum;           /* a sum post-op (residual Add): each chunk's product starts from the residual's columns */
    /* A half plan that rounds every node: the bias Add absorbed as
     * round(round(y) + bias) (xd_fuse.half_bias), applied per row as each
     * chunk is copied into place, or over y after a whole product; the
     * bias is in[bias_in], not oneDNN's (rhalf: the 16-bit type). */
    bool rbias;
    ts_dtype rhalf;
    int64_t rrows, rcols; /* the whole product */
    /* and the chain reading that sum (xd_fuse.half_chain: ViT's GELU) run
     * on each row piece of it as it is made, y its result; NULL: none.
     * rtab: the chain as a table of its 16-bit result for each 16-bit
     * value of the sum (chain_table), NULL: the program runs */
    xv_prog *rprog;
    uint16_t *rtab;
    int rext[XV_MAXIN]; /* the program's operand j: -1 the sum, else in[rext[j]] (y's shape, plain) */
    /* A float16 plan's product on AMX-BF16 (x3; bf16_split.h, as dnnl_conv.c
     * does for convolutions): the weight stays float16 at rest, packed in
     * column chunks of whole panels in the bfloat16 primitives' layout
     * (xcw 16-bit values each); a run splits A into Xh, Xl (xnx values, at
     * xh_off / xl_off in the scratch) once, then per chunk the weight into
     * Wh, Wl (wh_off, wl_off) and runs three passes into the chunk's dst
     * (y itself when there is one chunk, else the scratch at xd_off, copied
     * into y's columns): xprim[0] Xh.Wh + bias (+ a leading residual sum),
     * xprim[1] + Xl.Wh, xprim[2] + Xh.Wl then the element-wise post-ops. */
    bool x3, xsum, xinplace; /* xinplace: Xh where A lies (xd_bf16_split_hi_inplace), no scratch for it */
    bool xlo_inplace;        /* and Xl after it (xd_bf16_split_inplace): no scratch for either */
    int xthreads;            /* the plan's threads, for the in-place split's row buffers (at xt_off) */
    int64_t xk;
    dnnl_primitive_t xprim[3];
    xd_mem xs[3], xw[3], xdm[3], xpad[3], xb[3];
    dnnl_exec_arg_t xargs[3][6];
    int xnargs[3], xchunks;
    int64_t xcols;
    size_t xnx, xcw, xh_off, xl_off, wh_off, wl_off, xd_off, xt_off;
} mm_state;

static void mm_destroy(void *state)
{
    mm_state *c = state;
    if (!c) return;
    if (c->prim) dnnl_primitive_destroy(c->prim);
    free(c->rprog);
    free(c->rtab);
    xd_mem_fini(&c->src);
    xd_mem_fini(&c->wei);
    xd_mem_fini(&c->bias);
    xd_mem_fini(&c->dst);
    xd_mem_fini(&c->pad);
    xd_reorder_fini(&c->res_r);
    if (c->cprim) dnnl_primitive_destroy(c->cprim);
    xd_mem_fini(&c->cs);
    xd_mem_fini(&c->cw);
    xd_mem_fini(&c->cb);
    xd_mem_fini(&c->cd);
    xd_mem_fini(&c->cpad);
    for (int i = 0; i < 3; i++) {
        if (c->xprim[i]) dnnl_primitive_destroy(c->xprim[i]);
        xd_mem_fini(&c->xs[i]);
        xd_mem_fini(&c->xw[i]);
        xd_mem_fini(&c->xdm[i]);
        xd_mem_fini(&c->xpad[i]);
        xd_mem_fini(&c->xb[i]);
    }
    free(c);
}

/* The three AMX-BF16 passes (mm_state x3) of A (float32, plain) by the
 * float16 weight, chunk by chunk. */
static void mm_run_x3(mm_state *c, void *const *in, void *const *out, char *scratch)
{
    uint16_t *xh = (uint16_t *)(scratch + c->xh_off), *xl = (uint16_t *)(scratch + c->xl_off),
             *wh = (uint16_t *)(scratch + c->wh_off), *wl = (uint16_t *)(scratch + c->wl_off);
    float *y = out[0], *d = c->xchunks > 1 ? (float *)(scratch + c->xd_off) : y;
    const int64_t cols = c->xcols, N = cols * c->xchunks;
    if (c->xlo_inplace) {
        xd_bf16_split_inplace(in[0], c->rows, c->xk, scratch + c->xt_off, c->xthreads);
        xh = in[0];
        xl = xh + c->xnx;
    } else if (c->xinplace) {
        xd_bf16_split_hi_inplace(in[0], xl, c->rows, c->xk);
        xh = in[0];
    } else {
        xd_bf16_split(in[0], xh, xl, c->xnx);
    }
    if (c->xchunks == 1 && c->has_sum) xd_reorder_run(&c->res_r, in[c->res_in], y, c->stream);
    /* in chunks, the residual's columns start each chunk's dst: its own plain buffer, or y itself */
    const float *r = c->xchunks == 1 || !c->xsum ? NULL : c->has_sum ? (const float *)in[c->res_in] : y;
    uint16_t *srcs[3] = {xh, xl, xh}, *const weis[3] = {wh, wh, wl};
    for (int j = 0; j < c->xchunks; j++) {
        xd_bf16_split_f16((const uint16_t *)in[c->wei_in] + (size_t)j * c->xcw, wh, wl, c->xcw);
        for (int64_t i = 0; r && i < c->rows; i++) memcpy(d + i * cols, r + i * N + j * cols, sizeof(float) * (size_t)cols);
        if (c->has_bias) xd_mem_bind(&c->xb[0], (float *)in[c->bias_in] + j * cols, c->stream);
        for (int k = 0; k < 3; k++) {
            xd_mem_bind(&c->xs[k], srcs[k], c->stream);
            xd_mem_bind(&c->xw[k], weis[k], c->stream);
            xd_mem_bind(&c->xdm[k], d, c->stream);
            xd_mem_bind(&c->xpad[k], scratch, c->stream);
            dnnl_primitive_execute(c->xprim[k], c->stream, c->xnargs[k], c->xargs[k]);
        }
        dnnl_stream_wait(c->stream);
        for (int64_t i = 0; d != y && i < c->rows; i++)
            memcpy(y + i * N + j * cols, d + i * cols, sizeof(float) * (size_t)cols);
    }
}

/* y[i][j] = round(round(d[i][j]) + b[j]) over `cols` columns: the
 * unfused plan's arithmetic (the Add's program rounds its operand on
 * load, adds in float32, rounds the sum), so the result is bit-identical.
 * With a chain after the sum (prog), y is the chain's result: the sum is
 * made XV_BLK columns at a time aside (d may be y: a piece of d is read
 * before the same piece of y is written) and the program reads it there,
 * as vec.eltwise's step would read it from memory. */
static void round_bias_row(ts_dtype half, const xv_prog *prog, const uint16_t *tab, const float *d, const float *b,
                           float *y, int64_t cols, const float *const *ext)
{
    if (!prog) {
        xhalf_round_into(half, d, y, (size_t)cols);
        for (int64_t j = 0; j < cols; j++) y[j] += b[j];
        xhalf_round_into(half, y, y, (size_t)cols);
        return;
    }
    float t[XV_BLK];
    const float *src[XV_MAXIN];
    for (int64_t j0 = 0; j0 < cols; j0 += XV_BLK) {
        const int64_t n = cols - j0 < XV_BLK ? cols - j0 : XV_BLK;
        for (int j = 0; j < prog->next; j++) src[j] = ext[j] ? ext[j] + j0 : t; /* the sum or a residual's row */
        xhalf_round_into(half, d + j0, t, (size_t)n);
        for (int64_t j = 0; j < n; j++) t[j] += b[j0 + j];
        if (tab) { /* the sum is on the 16-bit grid: narrowing is exact */
            uint16_t h[XV_BLK];
            xhalf_narrow(half, t, h, (size_t)n);
            for (int64_t j = 0; j < n; j++) h[j] = tab[h[j]];
            xhalf_widen(half, h, y + j0, (size_t)n);
            continue;
        }
        xhalf_round_into(half, t, t, (size_t)n);
        xv_prog_block(prog, y + j0, src, n);
    }
}

/* The chain after the rounded sum reads the sum alone (xv_chain_reading)
 * and ends rounded: a function from the sum's 16-bit values to 16-bit
 * values, so a table of its 65536 results (128 KiB, made at build by the
 * same program over every value) replaces it per element.  Why: ViT-B/16's
 * GELU (Div, Erf, Add, Mul, Mul, each rounded) cost 0.80-0.85 ms per layer
 * at batch 1 whether a step of its own or run in the product's copy (in
 * cache): its erf and division are the cost, not memory (emulated EPYC,
 * `tsopt profile --against-skip half.bias_chain`, loaded).  Bit-identical
 * to the program (NaNs aside: a NaN result comes back as 16-bit NaN);
 * TSOPT_SKIP=half.chain_table runs the program. */
static uint16_t *chain_table(ts_dtype half, const xv_prog *prog)
{
    uint16_t *tab = malloc(sizeof *tab * 65536);
    if (!tab) return NULL;
    float x[XV_BLK], y[XV_BLK];
    const float *src[XV_MAXIN];
    for (int j = 0; j < prog->next; j++) src[j] = x;
    for (uint32_t h0 = 0; h0 < 65536; h0 += XV_BLK) {
        uint16_t h[XV_BLK];
        for (uint32_t i = 0; i < XV_BLK; i++) h[i] = (uint16_t)(h0 + i);
        xhalf_widen(half, h, x, XV_BLK);
        xv_prog_block(prog, y, src, XV_BLK);
        xhalf_narrow(half, y, tab + h0, XV_BLK);
    }
    return tab;
}

/* rows x cols of d (row stride ds) into y (row stride ys) with the bias
 * of those columns, rows over the threads. */
static void round_bias_rows(const mm_state *c, void *const *in, int64_t col0, const float *d, int64_t ds,
                            const float *b, float *y, int64_t ys, int64_t rows, int64_t cols)
{
#pragma omp parallel for schedule(static) if (rows * cols >= 16384)
    for (int64_t i = 0; i < rows; i++) {
        const float *ext[XV_MAXIN] = {NULL}; /* the chain's other operands: row i, from column col0 (y's indexing) */
        for (int j = 0; c->rprog && j < c->rprog->next; j++)
            ext[j] = c->rext[j] < 0 ? NULL : (const float *)in[c->rext[j]] + i * ys + col0;
        round_bias_row(c->rhalf, c->rprog, c->rtab, d + i * ds, b, y + i * ys, cols, ext);
    }
}

static void mm_run_chunks(const mm_state *c, void *const *in, void *const *out, void *scratch)
{
    mm_state *m = (mm_state *)c;
    float *w = (float *)((char *)scratch + c->coff), *d = (float *)((char *)scratch + c->doff), *y = out[0];
    const int64_t cols = c->ccols, N = cols * c->nchunks;
    xd_mem_bind(&m->cs, in[0], c->stream);
    xd_mem_bind(&m->cw, w, c->stream);
    xd_mem_bind(&m->cd, d, c->stream);
    xd_mem_bind(&m->cpad, scratch, c->stream);
    /* the residual: its own plain buffer, or dst itself when it is accumulated where it lies */
    const float *r = !c->csum ? NULL : c->has_sum ? (const float *)in[c->res_in] : y;
    for (int j = 0; j < c->nchunks; j++) {
        xhalf_widen(c->chalf, (const uint16_t *)in[c->wei_in] + (size_t)j * c->celems, w, c->celems);
        if (c->has_bias) xd_mem_bind(&m->cb, (float *)in[c->bias_in] + j * cols, c->stream);
        /* chunk j's columns of the residual are read before the same columns of y are written */
        for (int64_t i = 0; r && i < c->rows; i++) memcpy(d + i * cols, r + i * N + j * cols, sizeof(float) * (size_t)cols);
        dnnl_primitive_execute(c->cprim, c->stream, c->cnargs, c->cargs);
        dnnl_stream_wait(c->stream);
        /* oneDNN's fast matmul writes a dense dst only: the chunk's columns copied into place */
        if (c->rbias) /* and the bias Add applied as they are, still in cache */
            round_bias_rows(c, in, j * cols, d, cols, (const float *)in[c->bias_in] + j * cols, y + j * cols, N, c->rows, cols);
        else
            for (int64_t i = 0; i < c->rows; i++) memcpy(y + i * N + j * cols, d + i * cols, sizeof(float) * (size_t)cols);
    }
}

static void mm_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    mm_state *c = s->state;
    if (c->x3) {
        mm_run_x3(c, in, out, scratch);
        return;
    }
    if (c->chalf) {
        mm_run_chunks(c, in, out, scratch);
        return;
    }
    if (c->has_sum) xd_reorder_run(&c->res_r, in[c->res_in], out[0], c->stream);
    xd_mem_bind(&c->src, in[0], c->stream);
    xd_mem_bind(&c->wei, in[c->wei_in], c->stream);
    if (c->has_bias) xd_mem_bind(&c->bias, in[c->bias_in], c->stream);
    xd_mem_bind(&c->dst, out[0], c->stream);
    xd_mem_bind(&c->pad, scratch, c->stream);
    dnnl_primitive_execute(c->prim, c->stream, c->nargs, c->args);
    dnnl_stream_wait(c->stream);
    if (c->rbias)
        round_bias_rows(c, in, 0, out[0], c->rcols, in[c->bias_in], out[0], c->rcols, c->rrows, c->rcols);
}

/* Problem in oneDNN's terms: src [b.., M, K], wei [b.., K, N], dst [b.., M, N],
 * all of rank r; A/B may be transposed (Gemm) through strides. */
typedef struct mm_prob {
    int r;
    dnnl_dims_t a, b, d;
    bool ta, tb;
    double alpha, beta;
    int av, bv, cv; /* values; cv -1 when absent */
    int64_t M, K, N;
} mm_prob;

static void dims_md(dnnl_memory_desc_t *md, int r, const dnnl_dims_t dims, bool trans, bool any)
{
    if (any) {
        dnnl_memory_desc_init_by_tag(md, r, dims, dnnl_f32, dnnl_format_tag_any);
        return;
    }
    dnnl_dims_t st;
    /* row-major over the stored order: the last two dims swapped when transposed */
    int64_t acc;
    int i0 = r - 2, i1 = r - 1;
    if (trans) {
        st[i0] = 1, st[i1] = dims[i0];
    } else {
        st[i1] = 1, st[i0] = dims[i1];
    }
    acc = dims[i0] * dims[i1];
    for (int i = r - 3; i >= 0; i--) {
        st[i] = acc;
        acc *= dims[i];
    }
    dnnl_memory_desc_init_by_strides(md, r, dims, dnnl_f32, st);
}

static bool matmul_prob(const ts_graph *g, const ts_node *nd, mm_prob *m)
{
    const ts_shape *a = &g->values[nd->inputs[0]].shape, *b = &g->values[nd->inputs[1]].shape;
    if (a->rank < 1 || b->rank < 1) return false;
    int r = a->rank > b->rank ? a->rank : b->rank;
    if (r < 2) r = 2;
    if (r > DNNL_MAX_NDIMS) return false;
    memset(m, 0, sizeof *m);
    m->r = r;
    for (int i = 0; i < r; i++) m->a[i] = m->b[i] = 1;
    /* 1-D A is a row vector [1, K]; 1-D B a column [K, 1]; right-aligned */
    if (a->rank == 1)
        m->a[r - 1] = a->dims[0];
    else
        for (int i = 0; i < a->rank; i++) m->a[r - a->rank + i] = a->dims[i];
    if (b->rank == 1)
        m->b[r - 2] = b->dims[0];
    else
        for (int i = 0; i < b->rank; i++) m->b[r - b->rank + i] = b->dims[i];
    for (int i = 0; i < r - 2; i++) m->d[i] = m->a[i] > m->b[i] ? m->a[i] : m->b[i];
    m->M = m->a[r - 2], m->K = m->a[r - 1], m->N = m->b[r - 1];
    m->d[r - 2] = m->M, m->d[r - 1] = m->N;
    m->alpha = 1, m->beta = 1;
    m->av = nd->inputs[0], m->bv = nd->inputs[1], m->cv = -1;
    return true;
}

/* A [b.., M, K] times a 2-D B: one [b..*M, K] x [K, N] product (the
 * rows of a plain A are contiguous).  Why: with 3-D operands oneDNN 2.6's
 * brgemm matmul asks for its weights plain (`abc`: the "pre-packed" copy
 * was a plain copy, read with a row stride of N floats); 2-D it asks for
 * `BA16a64b` panels.  BERT's products, 2 threads, median of six minima of
 * 50 runs (load ~8): 128x768x768 0.694 -> 0.683 ms, 128x768x3072 3.10 ->
 * 2.95, 128x3072x768 3.69 -> 2.96. */
static void flatten_rows(mm_prob *m)
{
    int64_t rows = 1;
    for (int i = 0; i < m->r - 1; i++) rows *= m->a[i];
    m->M = rows;
    m->a[0] = rows, m->a[1] = m->K;
    m->b[0] = m->K, m->b[1] = m->N;
    m->d[0] = rows, m->d[1] = m->N;
    m->r = 2;
}

static void gemm_prob(const ts_graph *g, const ts_node *nd, mm_prob *m)
{
    const ts_shape *a = &g->values[nd->inputs[0]].shape, *b = &g->values[nd->inputs[1]].shape;
    const ts_gemm_attrs *ga = nd->attrs;
    int64_t ta = ga->trans_a, tb = ga->trans_b;
    memset(m, 0, sizeof *m);
    m->alpha = ga->alpha, m->beta = ga->beta;
    m->r = 2;
    m->ta = ta, m->tb = tb;
    m->M = a->dims[ta ? 1 : 0], m->K = a->dims[ta ? 0 : 1], m->N = b->dims[tb ? 0 : 1];
    m->a[0] = m->M, m->a[1] = m->K;
    m->b[0] = m->K, m->b[1] = m->N;
    m->d[0] = m->M, m->d[1] = m->N;
    m->av = nd->inputs[0], m->bv = nd->inputs[1];
    m->cv = nd->ninputs > 2 ? nd->inputs[2] : -1;
}

/* dst = B x alpha x scale[column] (dst may be B itself), row by row of the
 * stored layout (no division per element for the column). */
static void fold_weights(float *dst, const float *b, size_t nbytes, const mm_prob *m, const float *scale)
{
    const int64_t total = (int64_t)(nbytes / sizeof(float)), w = m->tb ? m->K : m->N, rows = w ? total / w : 0;
    const double alpha = m->alpha;
    for (int64_t r = 0; r < rows; r++) {
        float *y = dst + r * w;
        const float *x = b + r * w;
        if (m->tb) { /* [.., N, K]: a stored row is one column */
            const double s = scale ? scale[r % m->N] : 1.0f;
            for (int64_t k = 0; k < w; k++) y[k] = (float)(x[k] * alpha * s);
        } else if (scale)
            for (int64_t j = 0; j < w; j++) y[j] = (float)(x[j] * alpha * (double)scale[j]);
        else
            for (int64_t j = 0; j < w; j++) y[j] = (float)(x[j] * alpha);
    }
}

typedef struct fold_ctx {
    const ts_tensor *B;
    const mm_prob *m;
    const float *scale;
} fold_ctx;

static void fold_in_place(void *ctx)
{
    const fold_ctx *c = ctx;
    fold_weights(c->B->data, c->B->data, c->B->nbytes, c->m, c->scale);
}

static ts_status make_pd(const xplan *p, int n, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                         const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst, const xd_fuse *f, double alpha,
                         dnnl_primitive_desc_t *pd, ts_error *err)
{
    dnnl_primitive_attr_t attr;
    ts_status st = xd_check(dnnl_primitive_attr_create(&attr), p, n, "attr_create", err);
    if (st) return st;
    st = xd_check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), p, n, "scratchpad", err);
    if (!st && alpha != 1.0) {
        float a = (float)alpha;
        st = xd_check(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &a), p, n, "output scales", err);
    }
    if (!st) st = xd_fuse_attr(f, attr, p, n, err);
    if (!st) {
        dnnl_matmul_desc_t d;
        dnnl_status_t ds = dnnl_matmul_desc_init(&d, src, wei, bias, dst);
        if (ds == dnnl_success) ds = dnnl_primitive_desc_create(pd, &d, attr, p->engine, NULL);
        st = xd_check(ds, p, n, "matmul", err);
    }
    dnnl_primitive_attr_destroy(attr);
    return st;
}

#define MM_CHUNK_BYTES (2048 * 1024) /* a widened chunk at most (unless one 64-column panel is more) */

/* The column-chunk primitive of a half plan's large constant weight (see
 * mm_state); left out (c->cprim NULL) whenever the shapes or the packed
 * layout do not allow it. */
static void prepare_chunks(const xplan *p, int n, mm_state *c, const mm_prob *m, const dnnl_memory_desc_t *cwei,
                           bool has_bias, const xd_fuse *f)
{
    const int64_t K = m->K, N = m->N;
    /* a sum post-op reads dst: chunks start from the residual's columns when it is plain (copied, not reordered) */
    bool sum = f->sum_value >= 0, sum_plain = !c->has_sum || (!c->res_r.prim && !c->res_r.cl_c && !c->res_r.bl_cb);
    if (!p->half || xplan_skips(p, "half.chunk") || m->r != 2 || m->ta || (sum && (!sum_plain || xplan_skips(p, "half.chunk_sum"))) ||
        K % 16 || N % 64 || (size_t)(K * N) * sizeof(float) < 2 * MM_CHUNK_BYTES)
        return;
    dnnl_memory_desc_t whole, src, wei, dst, bmd;
    if (dnnl_memory_desc_init_by_tag(&whole, 2, (dnnl_dims_t){K, N}, dnnl_f32, dnnl_BA16a64b) != dnnl_success ||
        !dnnl_memory_desc_equal(&whole, cwei))
        return;
    /* the widened chunk and the product's chunk (M rows of it) together
     * within MM_CHUNK_BYTES: at ViT's batch 4 (788 rows) the dense dst
     * chunk was as large as the weight's (1.8 MB for 576 columns), both
     * in the arena at the MLP's peak (TSOPT_SKIP=half.chunk_dst: the
     * weight's chunk alone counted) */
    const size_t per_col = (size_t)(xplan_skips(p, "half.chunk_dst") ? K : K + m->M) * sizeof(float);
    int64_t cols = (int64_t)(MM_CHUNK_BYTES / per_col) / 64 * 64;
    if (cols < 64) cols = 64;
    while (N % cols) cols -= 64;
    if (cols == N) return;
    dims_md(&src, 2, m->a, false, false);
    dnnl_memory_desc_init_by_tag(&wei, 2, (dnnl_dims_t){K, cols}, dnnl_f32, dnnl_BA16a64b);
    dnnl_memory_desc_init_by_tag(&dst, 2, (dnnl_dims_t){m->M, cols}, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&bmd, 2, (dnnl_dims_t){1, cols}, dnnl_f32, dnnl_ab);
    dnnl_primitive_desc_t pd = NULL;
    ts_error e = {0};
    if (make_pd(p, n, &src, &wei, has_bias ? &bmd : NULL, &dst, f, 1.0, &pd, &e) || xd_pd_is_ref(pd) ||
        !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), &wei) ||
        dnnl_primitive_create(&c->cprim, pd) != dnnl_success) {
        c->cprim = NULL;
        if (pd) dnnl_primitive_desc_destroy(pd);
        return;
    }
    const dnnl_memory_desc_t *cpad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    const xd_weighted w = {&c->cs, &c->cw, &c->cd, &c->cpad, &c->cb};
    if (xd_weighted_init(&w, &src, &wei, &dst, cpad, has_bias ? &bmd : NULL, p, n, c->cargs, &c->cnargs, &e)) {
        dnnl_primitive_destroy(c->cprim);
        c->cprim = NULL;
    } else {
        c->ccols = cols;
        c->csum = sum;
        c->nchunks = (int)(N / cols);
        c->celems = (size_t)(K * cols);
        c->rows = m->M;
        c->coff = xd_round(dnnl_memory_desc_get_size(cpad));
        c->doff = c->coff + xd_round(c->celems * sizeof(float));
    }
    dnnl_primitive_desc_destroy(pd);
}

/* ------------------------------------------------ float16 on AMX-BF16 (mm_state x3) */

/* Rows of A and weight elements (multiply-adds per row) below which a
 * product stays on the float32 kernels: per row the passes split A's row
 * and add into dst three times, per weight element each run splits it, so
 * the passes pay only where both are amortized.  The thresholds are the
 * convolution's (dnnl_conv.c X3_MIN_PIXELS / X3_MIN_MACS, measured on
 * ResNet-50 per step: output pixels there are A's rows here, the weight's
 * elements per pixel its K x N); ViT-B/16's products (197 rows per image,
 * 589824 to 2359296 weights) are far above, its classifier at batch 1 (one
 * row) below. */
#define MM_X3_MIN_ROWS 196
#define MM_X3_MIN_MACS 32768

/* Columns per chunk of the three passes (mm_run_x3): each chunk's weight
 * is split into Wh + Wl (4 bytes a weight) and its M x cols float32 dst
 * is a scratch buffer the passes add into twice (sum post-ops); A's rows
 * stream from the outer caches either way.  The chunk is sized so that
 * that working set, Wh + Wl + dst, fits one core's L2 (read from the CPU,
 * roofline.c): then passes 2 and 3 re-read the weight and accumulate into
 * dst from L2, and the step's scratch is at most one L2.  The dst's rows
 * are in the bound, so the chunk narrows as the batch grows: ViT-B/16
 * float16 on a 2 MiB L2 gets 512 columns of its first MLP product at
 * batch 1 (197 rows: 1.5 MiB of weight + 0.38 MiB dst) and 256 at batch 4
 * (788 rows: 0.75 + 0.77 MiB).  Measured there (Intel Xeon, ViT-B/16-l4
 * float16), a fixed weight chunk fits one batch only: 1 MiB (a6853b7, for
 * b4's arena: 2 MiB chunks put the first MLP product's 1.5 MiB weight +
 * 1.54 MiB dst above the attention's 16.34 MiB peak, RSS 0.593 -> 0.617
 * of float32) cost b1 x1.19 in time (55.0 vs 46.0 ms, in-process A/B,
 * quiet), its second MLP product then in 12 chunks of 64 columns.  This
 * bound: b1 36.6 vs 39.8 ms against the fixed 1 MiB (in-process A/B, 14
 * undisturbed rounds of a loaded machine), arena 4.41 -> 5.36 MiB (RSS
 * 0.575 of float32); b4's arena stays at the attention's 16.34 MiB.
 * Whole columns: whole 64-column panels dividing N; N
 * itself when the weight alone fits `bytes` (one chunk: no dst scratch,
 * the passes write the output) or N is no multiple of 64.
 * TSOPT_SKIP=half.amx_chunk_l2: the fixed 1 MiB weight chunk (X3_CHUNK_
 * BYTES); half.amx_chunk: MM_CHUNK_BYTES, 2 MiB (each as it was). */
#define X3_CHUNK_BYTES (1024 * 1024)
static int64_t x3_cols(const xplan *p, int64_t M, int64_t K, int64_t N)
{
    const bool fixed = xplan_skips(p, "half.amx_chunk") || xplan_skips(p, "half.amx_chunk_l2");
    const size_t bytes = xplan_skips(p, "half.amx_chunk")      ? MM_CHUNK_BYTES
                         : xplan_skips(p, "half.amx_chunk_l2") ? X3_CHUNK_BYTES
                                                               : (size_t)xroof_caches_get().l2;
    if ((size_t)(K * N) * 4 <= bytes || N % 64) return N;
    int64_t cols = (int64_t)(bytes / ((size_t)(fixed ? K : K + M) * 4)) / 64 * 64;
    if (cols < 64) cols = 64;
    while (N % cols) cols -= 64;
    return cols;
}

/* The three passes' primitive descriptors for one chunk of cols columns
 * (A [M, K] bfloat16 plain, the chunk's weight in the layout oneDNN picks
 * for the first pass, dst [M, cols] float32 plain): q[0] with the bias and
 * a leading residual sum, q[1] + sum, q[2] + sum and the element-wise
 * post-ops; all on AMX in the same weight layout, else nonzero (none
 * left). */
static int x3_pds(const xplan *p, int n, const mm_prob *m, const xd_fuse *f, bool has_bias, int64_t cols,
                  dnnl_primitive_desc_t q[3])
{
    dnnl_memory_desc_t src, wei, dst, bmd;
    dims_md(&src, 2, m->a, false, false);
    src.data_type = dnnl_bf16; /* strides in elements: the same layout, 16-bit */
    dnnl_memory_desc_init_by_tag(&wei, 2, (dnnl_dims_t){m->K, cols}, dnnl_bf16, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&dst, 2, (dnnl_dims_t){m->M, cols}, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&bmd, 2, (dnnl_dims_t){1, cols}, dnnl_f32, dnnl_ab);
    xd_fuse fs[3] = {*f, *f, *f};
    int lead = f->npo && f->po[0].kind == XD_PO_SUM;
    fs[0].npo = lead;
    fs[1].npo = 1;
    fs[1].po[0] = (xd_po){.kind = XD_PO_SUM};
    fs[2].po[0] = fs[1].po[0];
    for (int i = lead; i < f->npo; i++) fs[2].po[1 + i - lead] = f->po[i];
    fs[2].npo = 1 + f->npo - lead;
    int bad = 0;
    q[0] = q[1] = q[2] = NULL;
    for (int i = 0; i < 3 && !bad; i++) {
        ts_error e = {0};
        const dnnl_memory_desc_t *w = i ? dnnl_primitive_desc_query_md(q[0], dnnl_query_weights_md, 0) : &wei;
        bad = make_pd(p, n, &src, w, i == 0 && has_bias ? &bmd : NULL, &dst, &fs[i], 1.0, &q[i], &e) ||
              !xd_pd_is_amx(q[i]) ||
              (i && !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(q[i], dnnl_query_weights_md, 0), w)) ||
              !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(q[i], dnnl_query_src_md, 0), &src) ||
              !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(q[i], dnnl_query_dst_md, 0), &dst);
    }
    if (bad)
        for (int i = 0; i < 3; i++)
            if (q[i]) dnnl_primitive_desc_destroy(q[i]), q[i] = NULL;
    return bad;
}

bool xd_matmul_amx_wanted(const xplan *p, int64_t M, int64_t K, int64_t N)
{
    return xd_conv_amx_wanted(p) && M >= MM_X3_MIN_ROWS && K * N >= MM_X3_MIN_MACS;
}

/* Narrows the float32 values of B (n, on the float16 grid: exact) to
 * float16 in place, into its first half, block by block (each block's
 * 16-bit values land on floats read already), and gives the second half's
 * pages back. */
static void narrow_in_place(float *B, size_t n)
{
    enum { BLK = 4096 };
    uint16_t h[BLK];
    for (size_t i = 0; i < n; i += BLK) {
        size_t k = n - i < BLK ? n - i : BLK;
        xhalf_narrow(TS_F16, B + i, h, k);
        memcpy((uint16_t *)B + i, h, k * sizeof(uint16_t));
    }
    uintptr_t next = (uintptr_t)((uint16_t *)B + n);
    xweights_drop_pages(&next, (uintptr_t)(B + n));
}

/* Packs the float32 weight B (on the float16 grid) chunk by chunk into
 * float16 values in the passes' layout (cw16: one chunk's md), into w.
 * consume: B is this step's alone and released after it (weights_once.c):
 * it is narrowed to float16 where it lies first and packed from there, so
 * the packed copy never sits beside the float32 one (ViT-B/16's MLP
 * weight: 9.4 MB widened + 4.7 MB packed set the float16 plan's build
 * peak at batch 1, above its run's).  TSOPT_SKIP=half.amx_narrow: from
 * float32.  The reorder from float16 is made before B changes (declined:
 * B stays float32, packed from there); a failure after it fails the plan
 * (a kernel that touched the plan cannot decline, plan.c), so no other
 * kernel reads the narrowed B. */
static ts_status x3_pack(const xplan *p, int n, const mm_prob *m, float *B, int64_t cols, int nchunks,
                         const dnnl_memory_desc_t *cw16, uint16_t *w, bool consume, ts_error *err)
{
    size_t per = dnnl_memory_desc_get_size(cw16) / sizeof(uint16_t);
    /* chunk j's columns where they lie: B [K, N] (stride N) or, transposed, [N, K] */
    dnnl_dims_t dims = {m->K, cols}, st = {m->tb ? 1 : m->N, m->tb ? m->K : 1};
    dnnl_memory_desc_t sub;
    xd_reorder r;
    ts_status s = TS_ERR_UNSUPPORTED; /* not narrowed (yet) */
    if (consume && !xplan_skips(p, "half.amx_narrow")) {
        ts_error e = {0};
        dnnl_memory_desc_init_by_strides(&sub, 2, dims, dnnl_f16, st);
        if (!(s = xd_reorder_init(&r, &sub, cw16, p, n, &e))) narrow_in_place(B, (size_t)(m->K * m->N));
    }
    const bool narrowed = !s;
    if (!narrowed) {
        dnnl_memory_desc_init_by_strides(&sub, 2, dims, dnnl_f32, st);
        if ((s = xd_reorder_init(&r, &sub, cw16, p, n, err))) return s;
    }
    for (int j = 0; j < nchunks; j++) {
        size_t off = m->tb ? (size_t)(j * cols * m->K) : (size_t)(j * cols);
        xd_reorder_run(&r, narrowed ? (void *)((uint16_t *)B + off) : (void *)(B + off), w + (size_t)j * per,
                       p->stream);
        dnnl_stream_wait(p->stream);
    }
    xd_reorder_fini(&r);
    return TS_OK;
}

size_t xd_matmul_half_chunks(xstep *s, int slot, ts_dtype half)
{
    extern const xkernel xk_dnnl_matmul, xk_dnnl_gemm;
    mm_state *c = s->state;
    if ((s->k != &xk_dnnl_matmul && s->k != &xk_dnnl_gemm) || !c || !c->cprim || slot != c->wei_in) return 0;
    c->chalf = half;
    return c->doff + xd_round((size_t)(c->rows * c->ccols) * sizeof(float));
}

/* MatMul or Gemm node n with the post-op tail the lowering stage handed
 * (lower_post.c): whole, its affine folds alone, or nothing; the step
 * computes all of it or declines (then the stage offers the next). */
static ts_status build(xplan *p, int n, xstep *s, bool gemm, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    mm_prob m;
    if (g->values[nd->inputs[0]].dtype != TS_F32 || g->values[nd->inputs[1]].dtype != TS_F32) return TS_ERR_UNSUPPORTED;
    if (gemm)
        gemm_prob(g, nd, &m);
    else if (!matmul_prob(g, nd, &m))
        return TS_ERR_UNSUPPORTED;
    const ts_tensor *Bt = xplan_const(p, m.bv), *Ct = m.cv >= 0 ? xplan_const(p, m.cv) : NULL;
    /* C must be a constant row vector (or scalar): it becomes the bias */
    if (m.cv >= 0 && (!Ct || Ct->dtype != TS_F32 || (ts_tensor_numel(Ct) != m.N && ts_tensor_numel(Ct) != 1) ||
                      (Ct->shape.rank == 2 && Ct->shape.dims[0] != 1)))
        return TS_ERR_UNSUPPORTED;
    /* with runtime weights, alpha becomes an output scale: then no bias */
    if (!Bt && m.alpha != 1.0 && m.cv >= 0 && m.beta != 0.0) return TS_ERR_UNSUPPORTED;

    xd_fuse f = p->group->post; /* its scale and shift stay the group's */
    /* the column scale to fold into the weights: none when every one is 1
     * (a bias Add alone sets scales of 1 beside its shift: the weights were
     * copied unchanged, ~90 % of a decoder prompt's plan build, 75 MB) */
    const float *wscale = NULL;
    for (int64_t j = 0; f.scale && !wscale && j < m.N; j++)
        if (f.scale[j] != 1.0f) wscale = f.scale;
    ts_status st;
    if (f.scale && !Bt) return TS_ERR_UNSUPPORTED; /* a column scale needs constant weights to fold into */
    bool has_bias = (m.cv >= 0 && m.beta != 0.0) || (f.scale && !f.half_bias);
    double out_alpha = Bt ? 1.0 : m.alpha;

    /* A 2-D constant B with batched A: one 2-D product (flatten_rows),
     * unless a blocked residual needs the N-D dst to reorder into */
    xbuf scratch;
    if (!gemm && Bt && Bt->shape.rank == 2 && m.r > 2 &&
        !(f.sum_value >= 0 && xplan_value_layout(p, f.sum_value, &scratch)->blocked))
        flatten_rows(&m);
    /* the rounded bias (lower_post.c half_bias_collect): a 2-D product of
     * a constant weight with no bias of its own, off the AMX passes */
    if (f.half_bias && (!Bt || m.r != 2 || m.cv >= 0 || m.alpha != 1.0 || xd_matmul_amx_wanted(p, m.M, m.K, m.N)))
        return TS_ERR_UNSUPPORTED;
    /* A weight shared with another graph (a session re-planning from the
     * model it keeps: ts_pack_cache's test) is read where it lies, plain,
     * when nothing is to be folded into it: such a plan is one of many
     * sizes (a decoder's prompt), packing was ~95 % of its build (6 layers
     * d512: ~0.45 s of CPU for 90 MB run once) and the packed copy stayed
     * beside the shared original for the plan's life.  oneDNN copies the
     * panels it needs per run instead (TSOPT_SKIP=matmul.plain_shared:
     * packed as any other plan). */
    bool plain_w = Bt && !p->half && m.alpha == 1.0 && !wscale && g->values[m.bv].constant == Bt &&
                   xpack_cacheable(p->opts.pack_cache, Bt) && !xplan_skips(p, "matmul.plain_shared");
    const int r = m.r;
    dnnl_memory_desc_t src, wei, dst, bmd, *bias = NULL;
    dims_md(&src, r, m.a, m.ta, false);
    dims_md(&wei, r, m.b, m.tb, Bt != NULL && !plain_w);
    dims_md(&dst, r, m.d, false, false);
    if (has_bias || f.half_bias) {
        dnnl_dims_t bd;
        for (int i = 0; i < r; i++) bd[i] = 1;
        bd[r - 1] = m.N;
        dims_md(&bmd, r, bd, false, false);
        bias = has_bias ? &bmd : NULL; /* half_bias: tsopt adds it, after rounding */
    }
    dnnl_primitive_desc_t pd = NULL;
    st = make_pd(p, n, &src, &wei, bias, &dst, &f, out_alpha, &pd, err);
    if (!st && plain_w && xd_pd_is_ref(pd)) { /* no fast kernel for plain weights: packed */
        dnnl_primitive_desc_destroy(pd);
        plain_w = false;
        dims_md(&wei, r, m.b, m.tb, true);
        st = make_pd(p, n, &src, &wei, bias, &dst, &f, out_alpha, &pd, err);
    }
    if (st) return st; /* with post-ops: the affine folds alone are offered next */
    /* A float16 plan on AMX-BF16: the three passes (mm_state x3), for a
     * constant weight on the float16 grid once folded (then it splits
     * exactly), a plain A, a plain residual (copied into a chunk's dst) */
    dnnl_primitive_desc_t xpd[3] = {NULL, NULL, NULL};
    int64_t xcols = 0;
    float *xfold = NULL;
    if (Bt && !plain_w && m.r == 2 && !m.ta && xd_x3_post_ok(&f) && xd_matmul_amx_wanted(p, m.M, m.K, m.N) &&
        !(f.sum_value >= 0 && xplan_value_layout(p, f.sum_value, &scratch)->blocked)) {
        xcols = x3_cols(p, m.M, m.K, m.N);
        if ((m.alpha != 1.0 || wscale) && (xfold = xd_alloc(Bt->nbytes)))
            fold_weights(xfold, Bt->data, Bt->nbytes, &m, wscale);
        if (((m.alpha != 1.0 || wscale) && !xfold) || !xd_on_f16_grid(xfold ? xfold : Bt->data, (size_t)(m.K * m.N)) ||
            x3_pds(p, n, &m, &f, has_bias, xcols, xpd)) {
            free(xfold);
            xfold = NULL;
        }
    }
    const bool x3 = xpd[0] != NULL;
    /* A and run-time B made plain only now: a declined product leaves the
     * plan as it found it (no reorder steps, no buffers) */
    int ab = xplan_plain(p, xplan_value_buf(p, m.av), err), bb_in = -1;
    if (ab < 0 || (!Bt && (bb_in = xplan_plain(p, xplan_value_buf(p, m.bv), err)) < 0)) {
        dnnl_primitive_desc_destroy(pd);
        for (int i = 0; i < 3; i++)
            if (xpd[i]) dnnl_primitive_desc_destroy(xpd[i]);
        free(xfold);
        return err->code ? err->code : ts_error_set(err, TS_ERR_NOMEM, "node '%s': out of memory", nd->name);
    }
    s->ref_impl = !x3 && xd_pd_is_ref(pd); /* counted in the plan stats */
    mm_state *c = calloc(1, sizeof *c);
    float *wplain = xfold;
    void *wpacked = NULL;
    if (!c) goto nomem;
    s->state = c;
    c->stream = p->stream;
    const dnnl_memory_desc_t *cwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *cpad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    c->x3 = x3;
    if (!x3 && (st = xd_check(dnnl_primitive_create(&c->prim, pd), p, n, "primitive_create", err))) goto fail;

    int wb = bb_in;
    dnnl_memory_desc_t wsrc;
    bool consume = false, fold = false;
    void *wdst = NULL;
    if (plain_w && (wb = xplan_value_buf(p, m.bv)) < 0) goto nomem;
    if (plain_w) xpack_note_plain(p->opts.pack_cache);
    if (x3) { /* float16 (exact) in column chunks of the passes' layout, no float32 copy */
        dnnl_memory_desc_t cw16 = *dnnl_primitive_desc_query_md(xpd[0], dnnl_query_weights_md, 0), all;
        cw16.data_type = dnnl_f16;
        c->xcols = xcols;
        c->xchunks = (int)(m.N / xcols);
        c->xcw = dnnl_memory_desc_get_size(&cw16) / sizeof(uint16_t);
        dnnl_memory_desc_init_by_tag(&all, 1, (dnnl_dims_t){(int64_t)c->xcw * c->xchunks}, dnnl_f16, dnnl_a);
        if (!(wpacked = xd_alloc(c->xcw * (size_t)c->xchunks * sizeof(uint16_t)))) goto nomem;
        if ((st = x3_pack(p, n, &m, wplain ? wplain : Bt->data, xcols, c->xchunks, &cw16, wpacked,
                          !wplain && xweights_once_consumable(p, m.bv, n), err)))
            goto fail;
        free(wplain);
        wplain = NULL;
        ts_shape ws = Bt->shape;
        if ((wb = xd_const_buf(p, &all, &ws, wpacked)) < 0) goto nomem;
        wpacked = NULL;
        p->bufs[wb].dtype = TS_F16; /* split by the step itself: half.c leaves it */
    } else if (Bt && !plain_w) { /* fold alpha and column scales, pre-pack */
        fold = m.alpha != 1.0 || wscale;
        /* the graph's own tensor, released after this node: folded in place
         * and packed last, giving its pages back as it goes (weights_once.c);
         * else packed now, from a folded copy only when there is something
         * to fold (a copy beside it held a large FC weight three times) */
        consume = xweights_once_consumable(p, m.bv, n);
        if (fold && !consume) {
            if (!(wplain = xd_alloc(Bt->nbytes))) goto nomem;
            fold_weights(wplain, Bt->data, Bt->nbytes, &m, wscale);
        }
        dims_md(&wsrc, r, m.b, m.tb, false);
        if (!(wpacked = xd_alloc(dnnl_memory_desc_get_size(cwei)))) goto nomem;
        if (!consume && (st = xweights_pack(p, n, fold ? wplain : Bt->data, Bt->nbytes, &wsrc, cwei, wpacked, false,
                                            NULL, NULL, err)))
            goto fail;
        free(wplain);
        wplain = NULL;
        ts_shape ws = Bt->shape;
        if ((wb = xd_const_buf(p, cwei, &ws, wpacked)) < 0) goto nomem;
        wdst = wpacked;
        wpacked = NULL;
    }
    int biasb = -1;
    if (has_bias || f.half_bias) {
        float *b = xd_alloc(sizeof(float) * (size_t)m.N);
        if (!b) goto nomem;
        for (int64_t j = 0; j < m.N; j++) {
            float cval = Ct && m.beta != 0.0 ? (float)(m.beta * ((const float *)Ct->data)[ts_tensor_numel(Ct) == 1 ? 0 : j])
                                             : 0.0f;
            b[j] = f.scale ? cval * f.scale[j] + f.shift[j] : cval;
        }
        ts_shape bs = {.rank = 1, .dims = {m.N}};
        if ((biasb = xd_const_buf(p, &bmd, &bs, b)) < 0) {
            free(b);
            goto nomem;
        }
    }
    /* a plain residual that dies at the fused Add is accumulated onto where
     * it lies (dnnl_residual.h): no copy into dst */
    int rb = f.sum_value >= 0 ? xplan_value_buf(p, f.sum_value) : -1, yb = -1;
    if (rb >= 0 && !p->bufs[rb].blocked) {
        const int reads[2] = {ab, wb};
        yb = xd_residual_dst(p, &f, rb, reads, 2);
        if (yb >= 0) rb = -1; /* read through dst */
    }
    if (yb < 0) yb = xplan_value_buf(p, f.out_value);
    if (yb < 0) goto nomem;
    if (rb >= 0) {
        dnnl_memory_desc_t rmd;
        xd_md_of(&p->bufs[rb], &rmd);
        if (!p->bufs[rb].blocked) rmd = dst; /* same bytes; the rank may differ (1-D operands) */
        if ((st = xd_reorder_init(&c->res_r, &rmd, &dst, p, n, err))) goto fail;
        c->has_sum = true;
    }
    s->scratch_bytes = xd_round(dnnl_memory_desc_get_size(cpad));
    if (x3) { /* [oneDNN's scratchpad | Xh | Xl | Wh | Wl | a chunk's dst] */
        /* Xh where A lies when A dies here (read by this step's nodes
         * only, plain arena memory, not the residual's or dst's storage) */
        int ar = xbuf_root(p, ab);
        c->xinplace = !xplan_skips(p, "half.amx_inplace") && xplan_inplace_ok_step(p, ab) &&
                      p->bufs[ab].bytes == (size_t)(m.M * m.K) * sizeof(float) && ar != xbuf_root(p, yb) &&
                      (rb < 0 || ar != xbuf_root(p, rb));
        for (int i = 0; i < 3; i++)
            if ((st = xd_check(dnnl_primitive_create(&c->xprim[i], xpd[i]), p, n, "primitive_create", err))) goto fail;
        c->xk = m.K;
        size_t pad = 0;
        for (int i = 0; i < 3; i++) {
            size_t ps = xd_round(dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(xpd[i], dnnl_query_scratchpad_md, 0)));
            if (ps > pad) pad = ps;
        }
        c->xnx = (size_t)(m.M * m.K);
        c->rows = m.M;
        c->xsum = f.sum_value >= 0;
        c->xh_off = pad;
        c->xlo_inplace = c->xinplace && !xplan_skips(p, "half.amx_inplace_lo");
        c->xthreads = p->opts.threads;
        c->xl_off = c->xh_off + (c->xinplace ? 0 : xd_round(c->xnx * sizeof(uint16_t)));
        c->wh_off = c->xl_off + (c->xlo_inplace ? 0 : xd_round(c->xnx * sizeof(uint16_t)));
        c->wl_off = c->wh_off + xd_round(c->xcw * sizeof(uint16_t));
        c->xd_off = c->wl_off + xd_round(c->xcw * sizeof(uint16_t));
        c->xt_off = c->wh_off; /* the split's row buffers: used before the weight's chunks */
        s->scratch_bytes = c->xd_off + (c->xchunks > 1 ? xd_round((size_t)(m.M * xcols) * sizeof(float)) : 0);
        size_t t = c->xt_off + xd_round(xd_bf16_split_inplace_tmp(m.M, m.K, c->xthreads));
        if (c->xlo_inplace && t > s->scratch_bytes) s->scratch_bytes = t;
    }
    /* the rounded sum's chain (xd_fuse.half_chain): operands other than the sum read where they lie, plain */
    const int hsum = f.half_chain ? f.half_chain_sum : -1;
    int next = 0, nother = 0, xb[XV_MAXIN];
    for (int j = 0; f.half_chain && j < f.half_chain->prog.next; j++, next++) {
        int w = f.half_chain->ext[j];
        xb[j] = w == hsum ? -1 : xplan_plain(p, xplan_value_buf(p, w), err);
        if (w != hsum && xb[j] < 0) {
            st = err->code ? err->code : TS_ERR_INVALID;
            goto fail;
        }
        nother += w != hsum;
    }
    int nin = 2 + (biasb >= 0) + (rb >= 0) + nother, k = 0;
    if ((st = xstep_alloc(s, nin, 1, err))) goto fail;
    s->in[k++] = ab;
    c->wei_in = k, s->in[k++] = wb;
    if (biasb >= 0) c->bias_in = k, s->in[k++] = biasb;
    if (rb >= 0) c->res_in = k, s->in[k++] = rb;
    for (int j = 0; j < next; j++)
        if ((c->rext[j] = xb[j] < 0 ? -1 : k) >= 0) s->in[k++] = xb[j];
    s->out[0] = yb;
    c->has_bias = biasb >= 0 && !f.half_bias;
    c->rbias = f.half_bias;
    if (f.half_chain) {
        if (!(c->rprog = malloc(sizeof *c->rprog))) goto nomem;
        *c->rprog = f.half_chain->prog;
        /* a function of the sum alone: its table */
        if (!nother && !xplan_skips(p, "half.chain_table") && !(c->rtab = chain_table(p->half, c->rprog))) goto nomem;
    }
    c->rhalf = p->half;
    c->rrows = m.M, c->rcols = m.N;
    const xd_weighted w = {&c->src, &c->wei, &c->dst, &c->pad, &c->bias};
    if (!x3 && (st = xd_weighted_init(&w, &src, cwei, &dst, cpad, c->has_bias ? bias : NULL, p, n, c->args, &c->nargs,
                                      err)))
        goto fail;
    dnnl_memory_desc_t xbias;
    dnnl_memory_desc_init_by_tag(&xbias, 2, (dnnl_dims_t){1, xcols ? xcols : 1}, dnnl_f32, dnnl_ab);
    for (int i = 0; x3 && i < 3; i++) {
        const xd_weighted wx = {&c->xs[i], &c->xw[i], &c->xdm[i], &c->xpad[i], &c->xb[i]};
        const dnnl_primitive_desc_t q = xpd[i];
        if ((st = xd_weighted_init(&wx, dnnl_primitive_desc_query_md(q, dnnl_query_src_md, 0),
                                   dnnl_primitive_desc_query_md(q, dnnl_query_weights_md, 0),
                                   dnnl_primitive_desc_query_md(q, dnnl_query_dst_md, 0),
                                   dnnl_primitive_desc_query_md(q, dnnl_query_scratchpad_md, 0),
                                   i == 0 && c->has_bias ? &xbias : NULL,
                                   p, n, c->xargs[i], &c->xnargs[i], err)))
            goto fail;
    }
    if (Bt && !plain_w && !x3) prepare_chunks(p, n, c, &m, cwei, c->has_bias, &f);
    fold_ctx fc = {Bt, &m, wscale};
    if (consume && (st = xweights_pack(p, n, Bt->data, Bt->nbytes, &wsrc, cwei, wdst, true,
                                       fold ? fold_in_place : NULL, &fc, err)))
        goto fail;
    dnnl_primitive_desc_destroy(pd);
    for (int i = 0; i < 3; i++)
        if (xpd[i]) dnnl_primitive_desc_destroy(xpd[i]);
    return TS_OK;

nomem:
    st = ts_error_set(err, TS_ERR_NOMEM, "node '%s' (%s): out of memory building the oneDNN kernel", nd->name,
                      nd->op->name);
fail:
    free(wplain);
    free(wpacked);
    dnnl_primitive_desc_destroy(pd);
    for (int i = 0; i < 3; i++)
        if (xpd[i]) dnnl_primitive_desc_destroy(xpd[i]);
    mm_destroy(c);
    s->state = NULL;
    return st;
}

static ts_status matmul_build(xplan *p, int n, xstep *s, ts_error *err) { return build(p, n, s, false, err); }
static ts_status gemm_build(xplan *p, int n, xstep *s, ts_error *err) { return build(p, n, s, true, err); }

bool xd_matmul_rounds_bias(const xstep *s)
{
    extern const xkernel xk_dnnl_matmul;
    s = xhalf_inner(s);
    return s->k == &xk_dnnl_matmul && s->state && ((const mm_state *)s->state)->rbias;
}

bool xd_matmul_is_amx(const xstep *s)
{
    extern const xkernel xk_dnnl_matmul, xk_dnnl_gemm;
    s = xhalf_inner(s);
    const mm_state *c = s->k == &xk_dnnl_matmul || s->k == &xk_dnnl_gemm ? s->state : NULL;
    return c && c->x3;
}

int64_t xd_matmul_amx_cols(const xstep *s)
{
    if (!xd_matmul_is_amx(s)) return 0;
    return ((const mm_state *)xhalf_inner(s)->state)->xcols;
}

const xkernel xk_dnnl_matmul = {"dnnl.matmul", matmul_build, mm_run, mm_destroy};
const xkernel xk_dnnl_gemm = {"dnnl.gemm", gemm_build, mm_run, mm_destroy};
