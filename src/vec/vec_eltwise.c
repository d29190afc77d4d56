/* Element-wise unary and binary operators (float32) with NumPy broadcasting:
 * the broadcast geometry (xv_geometry) and the block interpreter
 * (xv_prog_run) of the programs the lowering stage builds from nodes
 * (lower_chain.c); the step's build is vec_fuse.c.  This file reads no
 * graph node (tests/cli/kernel_nodes.sh). */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "exec/half.h"
#include "exec/roofline.h"
#include "vec/vec_eltwise.h"

/* ------------------------------------------------------ family helpers */

int xv_threads(const xplan *p)
{
    int t = p->opts.threads > 0 ? p->opts.threads : omp_get_max_threads();
    xv_split_min_bytes(t); /* measured here, at a build, never inside a run */
    return t;
}

static double split_base;      /* region us x one core's L2 bytes per us */
static int64_t split_set = -1; /* TSOPT_SPLIT_MIN_BYTES */
static long split_l2;          /* one core's L2, bytes */

static void split_measure(void)
{
    const char *e = getenv("TSOPT_SPLIT_MIN_BYTES");
    char *end;
    if (e && *e) {
        long long v = strtoll(e, &end, 10);
        if (!*end && v >= 0) {
            split_set = v;
            return;
        }
        fprintf(stderr, "tsopt: TSOPT_SPLIT_MIN_BYTES=%s is not a byte count; measuring instead\n", e);
    }
    double region_us, gbps;
    split_l2 = xroof_caches_get().l2;
    xroof_measure_split(&region_us, &gbps);
    split_base = region_us * 1e3 * gbps;
    if (!(split_base > 0)) split_base = 4.0 * XV_PAR_MIN * sizeof(float); /* nothing measured: 1 MiB at 2 threads */
}

int64_t xv_split_min_bytes(int threads)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (threads < 2) return INT64_MAX;
    pthread_once(&once, split_measure);
    if (split_set >= 0) return split_set;
    /* past every core's L2 twice over the data streams from further out,
     * where more cores add bandwidth: a region measured during a burst of
     * load must not keep large copies serial for the process's life */
    double cap = 2.0 * threads * (double)split_l2, v = split_base * threads / (threads - 1);
    return (int64_t)(v < cap ? v : cap);
}

void *xv_state(size_t size, ts_error *err)
{
    void *s = calloc(1, size);
    if (!s) ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    return s;
}

ts_status xv_bind_io(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    int nin = 0;
    for (int i = 0; i < nd->ninputs; i++) nin += nd->inputs[i] >= 0;
    if (xstep_alloc(s, nin, nd->noutputs, err)) return err->code;
    nin = 0;
    for (int i = 0; i < nd->ninputs; i++) {
        if (nd->inputs[i] < 0) continue;
        int b = xplan_plain(p, xplan_value_buf(p, nd->inputs[i]), err);
        if (b < 0) return err->code ? err->code : TS_ERR_INVALID;
        s->in[nin++] = b;
    }
    for (int i = 0; i < nd->noutputs; i++) {
        s->out[i] = xplan_value_buf(p, nd->outputs[i]);
        if (s->out[i] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    }
    return TS_OK;
}

/* ------------------------------------------------------------ geometry */

void xv_geometry(xv_prog *pr, const ts_shape *out, const ts_shape *const *in)
{
    xv_geometry_order(pr, out, in, NULL, NULL);
}

void xv_geometry_order(xv_prog *pr, const ts_shape *out, const ts_shape *const *in, const int *order,
                       const bool *in_order)
{
    int64_t st[XV_MAXIN][TS_MAX_RANK];
    int r = 0;
    if (ts_shape_numel(out) == 0) { /* nothing to compute: no rows, so the run divides by no extent */
        pr->rank = 1, pr->dims[0] = 0, pr->len = pr->numel = pr->nrows = 0, pr->rows_per = 1;
        for (int j = 0; j < pr->next; j++) pr->stride[j][0] = 0;
        return;
    }
    for (int j = 0; j < pr->next; j++) {
        if (order && in_order[j]) { /* dense in `order`: logical dim order[k] is physical position k */
            int64_t step = 1;
            for (int k = out->rank - 1; k >= 0; k--) {
                st[j][order[k]] = step;
                step *= out->dims[order[k]];
            }
        } else {
            ts_shape_bcast_strides(in[j], out, st[j]);
        }
    }
    for (int k = 0; k < out->rank; k++) {
        int d = order ? order[k] : k; /* walk the dims outermost-first as the output is stored */
        if (out->dims[d] == 1) continue; /* no extent: its strides never matter */
        bool merge = r > 0;
        for (int j = 0; j < pr->next && merge; j++)
            merge = pr->stride[j][r - 1] == st[j][d] * out->dims[d];
        if (merge) {
            pr->dims[r - 1] *= out->dims[d];
            for (int j = 0; j < pr->next; j++) pr->stride[j][r - 1] = st[j][d];
        } else {
            pr->dims[r] = out->dims[d];
            for (int j = 0; j < pr->next; j++) pr->stride[j][r] = st[j][d];
            r++;
        }
    }
    if (r == 0) { /* a scalar or all-ones shape: one element */
        pr->dims[0] = 1;
        for (int j = 0; j < pr->next; j++) pr->stride[j][0] = 0;
        r = 1;
    }
    pr->rank = r;
    pr->len = pr->dims[r - 1];
    pr->numel = 1;
    for (int d = 0; d < r; d++) pr->numel *= pr->dims[d];
    pr->nrows = pr->numel / pr->len;
    pr->rows_per = r >= 2 && pr->len * 2 <= XV_BLK ? XV_BLK / pr->len : 1;
}

/* ----------------------------------------------------------- execution */

#define LOOP(EXPR)                                                                                               \
    do {                                                                                                         \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = (EXPR);                                       \
    } while (0)

/* One block: n elements of every operand are contiguous at src[j]. */
XV_CLONES static void run_block(const xv_prog *pr, float *y, const float *const *src, int64_t n)
{
    for (int k = 0; k < pr->nins; k++) {
        const xv_instr *in = &pr->ins[k];
        const float *a = in->a == XV_ACC ? y : src[in->a];
        const float *b = in->b == XV_ACC ? y : src[in->b];
        const float c = in->p0, d = in->p1;
        switch (in->opc) {
        case XO_ADD: LOOP(a[i] + b[i]); break;
        case XO_SUB: LOOP(a[i] - b[i]); break;
        case XO_MUL: LOOP(a[i] * b[i]); break;
        case XO_DIV: LOOP(a[i] / b[i]); break;
        case XO_POW:
            for (int64_t i = 0; i < n; i++) y[i] = powf(a[i], b[i]);
            break;
        case XO_MAX: LOOP(a[i] > b[i] ? a[i] : b[i]); break;
        case XO_MIN: LOOP(a[i] < b[i] ? a[i] : b[i]); break;
        case XO_PRELU: LOOP(a[i] < 0 ? a[i] * b[i] : a[i]); break;
        case XO_FMOD:
            for (int64_t i = 0; i < n; i++) y[i] = fmodf(a[i], b[i]);
            break;
        case XO_FMOD_S:
            for (int64_t i = 0; i < n; i++) y[i] = fmodf(a[i], c);
            break;
        case XO_RFMOD_S:
            for (int64_t i = 0; i < n; i++) y[i] = fmodf(c, a[i]);
            break;
        case XO_ADD_S: LOOP(a[i] + c); break;
        case XO_SUB_S: LOOP(a[i] - c); break;
        case XO_RSUB_S: LOOP(c - a[i]); break;
        case XO_MUL_S: LOOP(a[i] * c); break;
        case XO_DIV_S: LOOP(a[i] / c); break;
        case XO_RDIV_S: LOOP(c / a[i]); break;
        case XO_POW_S:
            for (int64_t i = 0; i < n; i++) y[i] = powf(a[i], c);
            break;
        case XO_MAX_S: LOOP(a[i] > c ? a[i] : c); break;
        case XO_MIN_S: LOOP(a[i] < c ? a[i] : c); break;
        case XO_COPY: if (y != a) memcpy(y, a, (size_t)n * sizeof *y); break;
        case XO_SQUARE: LOOP(a[i] * a[i]); break;
        case XO_RELU: LOOP(a[i] > 0 ? a[i] : 0.0f); break;
        case XO_NEG: LOOP(-a[i]); break;
        case XO_ABS: LOOP(fabsf(a[i])); break;
        case XO_SQRT: LOOP(__builtin_sqrtf(a[i])); break;
        case XO_EXP: LOOP(xv_exp(a[i])); break;
        case XO_LOG:
            for (int64_t i = 0; i < n; i++) y[i] = logf(a[i]);
            break;
        case XO_RECIP: LOOP(1.0f / a[i]); break;
        case XO_ERF: LOOP(xv_erf(a[i])); break;
        case XO_SIGMOID: LOOP(xv_sigmoid(a[i])); break;
        case XO_TANH: LOOP(xv_tanh(a[i])); break;
        case XO_LEAKY: LOOP(a[i] >= 0 ? a[i] : a[i] * c); break;
        case XO_HSIG: {
            LOOP(c * a[i] + d);
            LOOP(y[i] < 0 ? 0.0f : y[i] > 1 ? 1.0f : y[i]);
            break;
        }
        case XO_HSWISH: {
            LOOP(a[i] * (a[i] / 6.0f + 0.5f < 0 ? 0.0f : a[i] / 6.0f + 0.5f > 1 ? 1.0f : a[i] / 6.0f + 0.5f));
            break;
        }
        case XO_GELU_ERF: LOOP(0.5f * a[i] * (1.0f + xv_erf(a[i] * 0.70710678f))); break;
        case XO_GELU_TANH: LOOP(0.5f * a[i] * (1.0f + xv_tanh(0.7978845608f * (a[i] + 0.044715f * a[i] * a[i] * a[i]))));
            break;
        case XO_CLIP: {
            LOOP(a[i] < c ? c : a[i]);
            LOOP(y[i] > d ? d : y[i]);
            break;
        }
        case XO_ROUND_F16:
        case XO_ROUND_BF16:
            xhalf_round_into(in->opc == XO_ROUND_F16 ? TS_F16 : TS_BF16, a, y, (size_t)n);
            break;
        }
    }
}

void xv_prog_block(const xv_prog *pr, float *y, const float *const *src, int64_t n)
{
    run_block(pr, y, src, n);
}

/* Items lo..hi-1 (blocks of a row) of the program. */
static void prog_items(const xv_prog *pr, void *const *in, float *y, int64_t lo, int64_t hi)
{
    const int64_t len = pr->len, nchunk = (len + XV_BLK - 1) / XV_BLK;
    for (int64_t it = lo; it < hi; it++) {
        float splat[XV_MAXIN][XV_BLK], own[XV_BLK];
        const float *src[XV_MAXIN];
        int64_t row = it / nchunk, start = (it % nchunk) * XV_BLK, n = len - start < XV_BLK ? len - start : XV_BLK;
        int64_t off[XV_MAXIN] = {0}, r = row;
        for (int d = pr->rank - 2; d >= 0; d--) { /* row index -> each input's offset */
            int64_t i = r % pr->dims[d];
            r /= pr->dims[d];
            for (int j = 0; j < pr->next; j++) off[j] += i * pr->stride[j][d];
        }
        for (int j = 0; j < pr->next; j++) {
            const float *x = (const float *)in[j] + off[j];
            if (pr->stride[j][pr->rank - 1]) {
                src[j] = x + start;
            } else { /* one value along the row: spread it over the block */
                float v = *x;
                for (int64_t i = 0; i < n; i++) splat[j][i] = v;
                src[j] = splat[j];
            }
        }
        if (pr->inplace) { /* y is that input's storage: later instructions may read it after the first wrote y */
            memcpy(own, src[pr->inplace - 1], (size_t)n * sizeof *own);
            src[pr->inplace - 1] = own;
        }
        run_block(pr, y + row * len + start, src, n);
    }
}

/* Rows of at most XV_BLK / 2 elements run several to a block (rows_per):
 * items lo..hi-1 are groups of pr->rows_per consecutive rows within one
 * index of the dims outside the last two.  An input contiguous across
 * those rows is read where it lies; any other (a per-channel slope or
 * bias repeated on every row of a channels-last tensor, one value per
 * row, a scalar) is laid out for the group in a block of its own, which
 * is kept while the next group's rows read the same values (the common
 * case: an operand constant along the rows).  One row at a time, FSRCNN's
 * PRelus over rows of 12-56 channels paid the row's dispatch (offsets,
 * instruction switch, a loop tail) per 12-56 elements: 1.8-2.5 ms for 6-29 MB
 * (issue 27). */
static void prog_rows(const xv_prog *pr, void *const *in, float *y, int64_t lo, int64_t hi)
{
    const int rk = pr->rank;
    const int64_t len = pr->len, R = pr->dims[rk - 2], k = pr->rows_per, ngroups = (R + k - 1) / k;
    float buf[XV_MAXIN][XV_BLK], own[XV_BLK];
    const float *src[XV_MAXIN];
    int64_t held[XV_MAXIN], held_rows[XV_MAXIN]; /* what buf[j] holds: the first row's offset, rows laid out */
    for (int j = 0; j < pr->next; j++) held[j] = -1, held_rows[j] = 0;
    for (int64_t it = lo; it < hi; it++) {
        int64_t outer = it / ngroups, r0 = (it % ngroups) * k, rows = R - r0 < k ? R - r0 : k, n = rows * len;
        int64_t off[XV_MAXIN] = {0}, o = outer;
        for (int d = rk - 3; d >= 0; d--) {
            int64_t i = o % pr->dims[d];
            o /= pr->dims[d];
            for (int j = 0; j < pr->next; j++) off[j] += i * pr->stride[j][d];
        }
        for (int j = 0; j < pr->next; j++) {
            const int64_t s1 = pr->stride[j][rk - 1], s2 = pr->stride[j][rk - 2], at = off[j] + r0 * s2;
            const float *x = (const float *)in[j] + at;
            if (s1 == 1 && s2 == len) {
                src[j] = x;
                continue;
            }
            src[j] = buf[j];
            /* the same values as the block holds: an operand constant along
             * the rows (s2 == 0) at the same offset, as many rows or fewer */
            if (s2 == 0 && held[j] == at && held_rows[j] >= rows) continue;
            for (int64_t t = 0; t < rows; t++) {
                const float *xr = x + t * s2;
                float *b = buf[j] + t * len;
                if (s1 == 1)
                    memcpy(b, xr, (size_t)len * sizeof *b);
                else
                    for (int64_t i = 0; i < len; i++) b[i] = xr[i * s1];
            }
            held[j] = s2 == 0 ? at : -1;
            held_rows[j] = rows;
        }
        if (pr->inplace) {
            memcpy(own, src[pr->inplace - 1], (size_t)n * sizeof *own);
            src[pr->inplace - 1] = own;
        }
        run_block(pr, y + (outer * R + r0) * len, src, n);
    }
}

void xv_prog_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    const xv_prog *pr = s->state;
    const bool rows = pr->rows_per > 1;
    const int64_t items = rows ? pr->nrows / pr->dims[pr->rank - 2] *
                                     ((pr->dims[pr->rank - 2] + pr->rows_per - 1) / pr->rows_per)
                               : pr->nrows * ((pr->len + XV_BLK - 1) / XV_BLK);
    void (*run)(const xv_prog *, void *const *, float *, int64_t, int64_t) = rows ? prog_rows : prog_items;
    float *y = out[0];
    (void)scratch;
    /* no parallel region at all below the threshold: libgomp's serial
     * region (an `if` clause that is false) still costs about a
     * microsecond, as much as a small step's whole work */
    if (pr->numel < XV_PAR_MIN || pr->threads < 2) {
        run(pr, in, y, 0, items);
        return;
    }
#pragma omp parallel num_threads(pr->threads)
    {
        int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        run(pr, in, y, items * t / nt, items * (t + 1) / nt);
    }
}
