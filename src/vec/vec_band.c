/* Banded attention without materializing the band: a Gather of rows by a
 * constant 2-D index table followed by a MatMul against one vector per
 * query row (longformer's sliding-window attention, docs/zoo.md):
 *
 *   scores:  MatMul(Gather(K, idx, axis=-2), Q)   K [.., S, C], idx [L, J],
 *            Q [.., L, C, 1]  ->  [.., L, J, 1]:  dot(K[.., idx[i,j], :], Q[.., i, :])
 *   context: MatMul(P, Gather(V, idx, axis=-2))   P [.., L, 1, J]
 *                              ->  [.., L, 1, C]:  sum_j P[.., i, j] V[.., idx[i,j], :]
 *
 * Gathered, the band is J times the size of K (longformer: 129 x 2 MiB =
 * 270 MiB per head group and layer) and costs more to write and read back
 * than the products themselves; read through the index, K stays in cache.
 * The Gather's step (vec.band.defer) computes nothing: its output becomes
 * a view of K's storage, and the MatMul's step (vec.band) reads K through
 * the index.  The lowering stage decides both (lower_band.c), so the
 * Gather is deferred exactly when the MatMul will take it; this file reads
 * no other node (tests/cli/kernel_nodes.sh). */
#include <omp.h>
#include <stdlib.h>
#include "exec/plan_internal.h"
#include "vec/vec.h"
#include "ops/attrs.h"
#include "ops/list.h"

typedef struct band_state {
    xgroup_band b;
    int64_t *idx; /* L*J source rows, normalized */
    int threads;
} band_state;

static void band_free(void *p)
{
    band_state *s = p;
    if (s) free(s->idx);
    free(s);
}

/* ------------------------------------------------- the deferred Gather */

static void defer_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    (void)s, (void)in, (void)out, (void)scratch; /* the MatMul reads the source */
}

static ts_status defer_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n); /* its reader (lower_band.c) takes the band */
    int src = xplan_plain(p, xplan_value_buf(p, nd->inputs[0]), err);
    if (src < 0) return err->code ? err->code : TS_ERR_INVALID;
    const ts_value *ov = &p->g->values[nd->outputs[0]];
    int a = xplan_new_buf(p, nd->outputs[0], ov->dtype, &ov->shape);
    if (a < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    /* a view of the source: no storage for the band */
    p->bufs[a].kind = XB_ALIAS;
    p->bufs[a].alias_of = xbuf_root(p, src);
    p->bufs[a].offset = xbuf_alias_offset(p, src);
    xplan_bind_value(p, nd->outputs[0], a);
    if (xstep_alloc(s, 1, 1, err)) return err->code;
    s->in[0] = src;
    s->out[0] = a;
    return TS_OK;
}

const xkernel xk_vec_band_defer = {"vec.band.defer", defer_build, defer_run, NULL};

/* ----------------------------------------------------- the band MatMul */

XV_CLONES static void scores_rows(const band_state *st, const float *x, const float *q, float *y, int64_t r0,
                                  int64_t r1)
{
    const int64_t S = st->b.S, C = st->b.C, L = st->b.L, J = st->b.J;
    for (int64_t r = r0; r < r1; r++) { /* r = h * L + i */
        const int64_t h = r / L, i = r % L;
        const float *qr = q + r * C, *xh = x + h * S * C;
        const int64_t *ix = st->idx + i * J;
        float *yr = y + r * J;
        for (int64_t j = 0; j < J; j++) {
            const float *kr = xh + ix[j] * C;
            float acc = 0;
#pragma omp simd reduction(+ : acc)
            for (int64_t c = 0; c < C; c++) acc += kr[c] * qr[c];
            yr[j] = acc;
        }
    }
}

XV_CLONES static void context_rows(const band_state *st, const float *pr, const float *x, float *y, int64_t r0,
                                   int64_t r1)
{
    const int64_t S = st->b.S, C = st->b.C, L = st->b.L, J = st->b.J;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t h = r / L, i = r % L;
        const float *pw = pr + r * J, *xh = x + h * S * C;
        const int64_t *ix = st->idx + i * J;
        float *yr = y + r * C;
        for (int64_t c = 0; c < C; c++) yr[c] = 0;
        for (int64_t j = 0; j < J; j++) {
            const float w = pw[j], *vr = xh + ix[j] * C;
#pragma omp simd
            for (int64_t c = 0; c < C; c++) yr[c] += w * vr[c];
        }
    }
}

static void band_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    const band_state *st = s->state;
    const int64_t rows = st->b.H * st->b.L, work = rows * st->b.J * st->b.C;
    (void)scratch;
    /* in[0]: the gather's source, in[1]: the other operand */
#pragma omp parallel num_threads(st->threads) if (st->threads > 1 && work >= 4 * XV_PAR_MIN)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
        if (st->b.side == 0)
            scores_rows(st, in[0], in[1], out[0], r0, r1);
        else
            context_rows(st, in[1], in[0], out[0], r0, r1);
    }
}

static ts_status band_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    const xgroup_band b = p->group->band; /* lower_band.c: the band and its deferred Gather */
    const ts_tensor *idx = xplan_const(p, b.idx);
    band_state *st = xv_state(sizeof *st, err);
    if (!st) return err->code;
    s->state = st;
    st->b = b;
    st->threads = xv_threads(p);
    if (!(st->idx = malloc(sizeof *st->idx * (size_t)(b.L * b.J))))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    for (int64_t k = 0; k < b.L * b.J; k++) {
        int64_t v = ts_tensor_get_i64(idx, k);
        st->idx[k] = v < 0 ? v + b.S : v;
    }
    if (xstep_alloc(s, 2, 1, err)) return err->code;
    s->in[0] = p->group->band_src;
    s->in[1] = xplan_plain(p, xplan_value_buf(p, nd->inputs[1 - b.side]), err);
    s->out[0] = xplan_value_buf(p, nd->outputs[0]);
    if (s->in[1] < 0 || s->out[0] < 0) return err->code ? err->code : TS_ERR_NOMEM;
    return TS_OK;
}

const xkernel xk_vec_band = {"vec.band", band_build, band_run, band_free};
