/* Attention over a key/value cache as one step (vec.attention; issue 29 §3).
 *
 * A decoder's self-attention, as exported, is six nodes after the cache's
 * Concats:
 *     Kt = Transpose(K, perm ...,-1,-2)    S = MatMul(Q, Kt)
 *     S = Mul(S, c)        (optional, c a float scalar constant)
 *     S = Where(M, f, S)   (optional, M a bool constant broadcast to S, f a
 *                           float scalar constant; or Where(M, S, f))
 *     P = Softmax(S, last axis)            Y = MatMul(P, V)
 * with Q [..., s, d], K [..., t, d], V [..., t, dv] of the same leading
 * dims.  Lowered node by node that is a transpose of the whole key cache,
 * two oneDNN matmuls (a primitive made at each new past length: a token's
 * plan re-bind) and three element-wise steps; here each query row reads its
 * key rows in place, scales, masks and normalizes its scores in a scratch
 * row and sums the value rows, computing what those nodes say: the scores
 * in float32 with another summation order than oneDNN's (a few ulp), the
 * softmax as vec.softmax computes it.  Tested against the unfused plan
 * (tests/unit/test_vec_attention.c: within 1e-5).  The mask and scalars
 * are step inputs, so a re-bind that changes them rebuilds the step.
 * The lowering stage decides the group (lower_attention.c); this file
 * reads no graph node (tests/cli/kernel_nodes.sh).
 * Only a few query rows per head (ATT_MAX_ROWS there: a token, a short chunk):
 * the score loop is a dot product per key, where oneDNN's matmuls win for a
 * prompt's or an encoder's square blocks.  TSOPT_SKIP=vec.attention gives
 * the unfused plan. */
#include <float.h>
#include <omp.h>
#include <stdlib.h>
#include "vec/vec.h"
#include "ops/attrs.h"
#include "ops/list.h"

typedef struct att_state {
    int64_t nb, s, t, d, dv; /* leading dims (flattened), query rows, keys, widths */
    int64_t mstride[3];      /* the mask's element strides along (batch, s, t); 0 where broadcast */
    bool mask_fills;         /* Where(M, f, S): true entries take f (else Where(M, S, f)) */
    int threads;
    int64_t row; /* scratch floats per thread (t rounded up to a cache line) */
} att_state;


/* as vec_softmax.c: e^d, 0 below e^-80; probabilities below FLT_MIN 0 */
#define ATT_EXP_MIN (-80.0f)

XV_CLONES static void att_row(const att_state *s, const float *q, const float *k, const float *v, const uint8_t *m,
                              float c, float fill, float *sc, float *y)
{
    const int64_t t = s->t, d = s->d, dv = s->dv;
    for (int64_t j = 0; j < t; j++) {
        const float *kr = k + j * d;
        float acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < d; i++) acc += q[i] * kr[i];
        acc *= c;
        if (m && (m[j * s->mstride[2]] != 0) == s->mask_fills) acc = fill;
        sc[j] = acc;
    }
    float mx = -INFINITY, sum = 0;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < t; j++) mx = sc[j] > mx ? sc[j] : mx;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < t; j++) {
        float e = sc[j] - mx;
        e = e < ATT_EXP_MIN ? 0.0f : xv_exp(e < ATT_EXP_MIN ? ATT_EXP_MIN : e);
        sc[j] = e;
        sum += e;
    }
    const float r = 1.0f / sum;
    for (int64_t i = 0; i < dv; i++) y[i] = 0;
    for (int64_t j = 0; j < t; j++) {
        float pj = sc[j] * r;
        pj = pj < FLT_MIN ? 0.0f : pj;
        const float *vr = v + j * dv;
#pragma omp simd
        for (int64_t i = 0; i < dv; i++) y[i] += pj * vr[i];
    }
}

static void att_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const att_state *s = st->state;
    const float *q = in[XATT_Q], *k = in[XATT_K], *v = in[XATT_V];
    const uint8_t *m = in[XATT_MASK];
    const float c = in[XATT_SCALE] ? *(const float *)in[XATT_SCALE] : 1.0f;
    const float fill = in[XATT_FILL] ? *(const float *)in[XATT_FILL] : 0.0f;
    float *y = out[0];
    const int64_t rows = s->nb * s->s;
#define ATT_ROW(r, sc)                                                                                      \
    att_row(s, q + (r) * s->d, k + (r) / s->s * s->t * s->d, v + (r) / s->s * s->t * s->dv,                  \
            m ? m + (r) / s->s * s->mstride[0] + (r) % s->s * s->mstride[1] : NULL, c, fill, sc, y + (r) * s->dv)
    if (s->threads > 1 && rows > 1 && rows * s->t * (s->d + s->dv) >= XV_PAR_MIN / 4) {
#pragma omp parallel num_threads(s->threads)
        {
            float *sc = (float *)scratch + (int64_t)omp_get_thread_num() * s->row;
#pragma omp for schedule(static)
            for (int64_t r = 0; r < rows; r++) ATT_ROW(r, sc);
        }
    } else /* no team for a small step (vec.h: XV_PAR_FOR) */
        for (int64_t r = 0; r < rows; r++) ATT_ROW(r, (float *)scratch);
#undef ATT_ROW
}

static ts_status att_build(xplan *p, int n, xstep *st, ts_error *err)
{
    (void)n; /* the group holds the nodes, the step's inputs and the mask's layout */
    const ts_graph *g = p->g;
    const xgroup *gr = p->group;
    const int *in = gr->att_in;
    const ts_shape *qs = &g->values[in[XATT_Q]].shape, *ks = &g->values[in[XATT_K]].shape, *vs = &g->values[in[XATT_V]].shape;
    const int r = ks->rank;
    att_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->nb = 1;
    for (int d = 0; d < r - 2; d++) s->nb *= ks->dims[d];
    s->s = qs->dims[r - 2];
    s->t = ks->dims[r - 2];
    s->d = ks->dims[r - 1];
    s->dv = vs->dims[r - 1];
    memcpy(s->mstride, gr->att_mstride, sizeof s->mstride);
    s->mask_fills = gr->att_fills;
    s->threads = xv_threads(p);
    s->row = (s->t + 15) & ~(int64_t)15;
    st->scratch_bytes = sizeof(float) * (size_t)s->row * (size_t)s->threads;
    if (xstep_alloc(st, XATT_N, 1, err)) return err->code;
    for (int j = 0; j < XATT_N; j++) {
        st->in[j] = in[j] < 0 ? -1 : xplan_plain(p, xplan_value_buf(p, in[j]), err);
        if (in[j] >= 0 && st->in[j] < 0) return err->code ? err->code : TS_ERR_INVALID;
    }
    st->out[0] = xplan_value_buf(p, gr->y);
    if (st->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    return TS_OK;
}

/* Re-bound to a cache of another length (a decoder's next token): the
 * sizes and the mask's strides from the new shapes, under the conditions
 * the group formed on (xattention_shapes); the mask and scalars stay step
 * inputs, read through their buffers at run time. */
ts_status xv_attention_resize(const xplan *p, const xstep *st, const ts_graph *g, void **state, size_t *scratch,
                            ts_error *err)
{
    const att_state *o = st->state;
    const ts_shape *sh[XATT_N] = {0};
    for (int j = 0; j <= XATT_MASK; j++) {
        if (st->in[j] < 0) continue;
        if (p->bufs[st->in[j]].value < 0) /* a plan-made copy: not followed */
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "vec.attention: an input is a plan buffer");
        sh[j] = &g->values[p->bufs[st->in[j]].value].shape;
    }
    int64_t nb, ms[3] = {0};
    if (!xattention_shapes(sh[XATT_Q], sh[XATT_K], sh[XATT_V], sh[XATT_MASK], &nb, ms))
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "vec.attention: not an attention at the new sizes");
    att_state *s = malloc(sizeof *s);
    if (!s) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    *s = *o;
    const int r = sh[XATT_K]->rank;
    s->nb = nb;
    s->s = sh[XATT_Q]->dims[r - 2];
    s->t = sh[XATT_K]->dims[r - 2];
    s->d = sh[XATT_K]->dims[r - 1];
    s->dv = sh[XATT_V]->dims[r - 1];
    if (sh[XATT_MASK]) memcpy(s->mstride, ms, sizeof s->mstride);
    s->row = (s->t + 15) & ~(int64_t)15;
    *scratch = sizeof(float) * (size_t)s->row * (size_t)s->threads;
    *state = s;
    return TS_OK;
}

const xkernel xk_vec_attention = {"vec.attention", att_build, att_run, free};
