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
 * Only a few query rows per head (ATT_MAX_ROWS: a token, a short chunk):
 * the score loop is a dot product per key, where oneDNN's matmuls win for a
 * prompt's or an encoder's square blocks.  TSOPT_SKIP=vec.attention gives
 * the unfused plan. */
#include <float.h>
#include <omp.h>
#include <stdlib.h>
#include "exec/vec.h"
#include "ops/attrs.h"
#include "ops/list.h"

typedef struct att_state {
    int64_t nb, s, t, d, dv; /* leading dims (flattened), query rows, keys, widths */
    int64_t mstride[3];      /* the mask's element strides along (batch, s, t); 0 where broadcast */
    bool mask_fills;         /* Where(M, f, S): true entries take f (else Where(M, S, f)) */
    int threads;
    int64_t row; /* scratch floats per thread (t rounded up to a cache line) */
} att_state;

#define ATT_MAX_ROWS 4

enum { IN_Q, IN_K, IN_V, IN_MASK, IN_SCALE, IN_FILL, IN_N };

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
    const float *q = in[IN_Q], *k = in[IN_K], *v = in[IN_V];
    const uint8_t *m = in[IN_MASK];
    const float c = in[IN_SCALE] ? *(const float *)in[IN_SCALE] : 1.0f;
    const float fill = in[IN_FILL] ? *(const float *)in[IN_FILL] : 0.0f;
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

/* The node reading v, when it is the only one (v no graph output), of type op. */
static int reader(const xplan *p, int v, const ts_op_desc *op)
{
    int c = xplan_sole_consumer(p, v);
    return c >= 0 && p->g->nodes[c].op == op && p->g->nodes[c].noutputs == 1 && !p->claimed[c] ? c : -1;
}

static bool f32_scalar(const xplan *p, int v)
{
    const ts_tensor *t = xplan_const(p, v);
    return t && t->dtype == TS_F32 && ts_tensor_numel(t) == 1;
}

/* The mask's strides along (batch, s, t) of the scores [lead..., s, t]:
 * a bool constant whose shape broadcasts to them (rank at most theirs,
 * leading dims 1 or all equal to the scores'). */
static bool mask_strides(const ts_shape *ms, const ts_shape *ss, int64_t nb, int64_t *stride)
{
    const int r = ss->rank, o = r - ms->rank;
    if (o < 0) return false;
    int64_t lead = 1, ld = 1;
    bool all1 = true;
    for (int d = 0; d < ms->rank; d++) {
        int64_t md = ms->dims[d], sd = ss->dims[d + o];
        if (md != 1 && md != sd) return false;
        if (d + o < r - 2) {
            lead *= md;
            all1 &= md == 1;
        }
    }
    for (int d = 0; d < r - 2; d++) ld *= ss->dims[d];
    if (!all1 && (o > 0 || lead != ld || ld != nb)) return false; /* partly broadcast leading dims: declined */
    int64_t tdim = ms->rank >= 1 ? ms->dims[ms->rank - 1] : 1, sdim = ms->rank >= 2 ? ms->dims[ms->rank - 2] : 1;
    stride[2] = tdim == 1 ? 0 : 1;
    stride[1] = sdim == 1 ? 0 : tdim;
    stride[0] = all1 ? 0 : sdim * tdim;
    return true;
}

static ts_status att_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *tr = &g->nodes[n];
    if (p->opts.no_fusion || p->half || xplan_skips(p, "vec.attention") || tr->noutputs != 1 || !xv_all_f32(p, n))
        return TS_ERR_UNSUPPORTED;
    const ts_transpose_attrs *ta = tr->attrs;
    const ts_shape *ks = &g->values[tr->inputs[0]].shape;
    const int r = ks->rank;
    if (r < 3 || ta->nperm != r) return TS_ERR_UNSUPPORTED;
    for (int d = 0; d < r; d++)
        if (ta->perm[d] != (d == r - 2 ? r - 1 : d == r - 1 ? r - 2 : d)) return TS_ERR_UNSUPPORTED;
    const int kt = tr->outputs[0];
    int mm = reader(p, kt, &ts_op_matmul);
    if (mm < 0 || g->nodes[mm].inputs[1] != kt || g->nodes[mm].inputs[0] == kt || !xv_all_f32(p, mm) ||
        !xplan_inputs_ready(p, mm, kt))
        return TS_ERR_UNSUPPORTED;
    int in[IN_N] = {g->nodes[mm].inputs[0], tr->inputs[0], -1, -1, -1, -1};
    int nodes[5] = {mm}, nn = 1, cur = g->nodes[mm].outputs[0], c;
    bool fills = true;
    if ((c = reader(p, cur, &ts_op_mul)) >= 0 && xv_all_f32(p, c)) {
        const ts_node *x = &g->nodes[c];
        int other = x->inputs[0] == cur ? x->inputs[1] : x->inputs[0];
        if (x->inputs[0] == x->inputs[1] || !f32_scalar(p, other) ||
            !ts_shape_eq(&g->values[x->outputs[0]].shape, &g->values[cur].shape))
            return TS_ERR_UNSUPPORTED;
        in[IN_SCALE] = other;
        nodes[nn++] = c;
        cur = x->outputs[0];
    }
    if ((c = reader(p, cur, &ts_op_where)) >= 0) {
        const ts_node *x = &g->nodes[c];
        const ts_tensor *mt = xplan_const(p, x->inputs[0]);
        fills = x->inputs[2] == cur;
        int other = fills ? x->inputs[1] : x->inputs[2];
        if (!mt || mt->dtype != TS_BOOL || x->inputs[0] == cur || x->inputs[1] == x->inputs[2] ||
            (!fills && x->inputs[1] != cur) || !f32_scalar(p, other) || g->values[x->outputs[0]].dtype != TS_F32 ||
            !ts_shape_eq(&g->values[x->outputs[0]].shape, &g->values[cur].shape))
            return TS_ERR_UNSUPPORTED;
        in[IN_MASK] = x->inputs[0];
        in[IN_FILL] = other;
        nodes[nn++] = c;
        cur = x->outputs[0];
    }
    if ((c = reader(p, cur, &ts_op_softmax)) < 0 || !xv_all_f32(p, c)) return TS_ERR_UNSUPPORTED;
    const ts_softmax_attrs *sa = g->nodes[c].attrs;
    const ts_shape *ss = &g->values[cur].shape;
    int axis;
    if (!ts_axis_norm(sa->axis, ss->rank, &axis) || axis != ss->rank - 1) return TS_ERR_UNSUPPORTED;
    nodes[nn++] = c;
    cur = g->nodes[c].outputs[0];
    int mm2 = reader(p, cur, &ts_op_matmul);
    if (mm2 < 0 || g->nodes[mm2].inputs[0] != cur || g->nodes[mm2].inputs[1] == cur || !xv_all_f32(p, mm2) ||
        !xplan_inputs_ready(p, mm2, cur))
        return TS_ERR_UNSUPPORTED;
    nodes[nn++] = mm2;
    in[IN_V] = g->nodes[mm2].inputs[1];
    /* shapes: Q [L..., s, d], K [L..., t, d], V [L..., t, dv], no broadcast */
    const ts_shape *qs = &g->values[in[IN_Q]].shape, *vs = &g->values[in[IN_V]].shape;
    const ts_shape *ys = &g->values[g->nodes[mm2].outputs[0]].shape;
    if (qs->rank != r || vs->rank != r || ys->rank != r || ss->rank != r) return TS_ERR_UNSUPPORTED;
    int64_t nb = 1;
    for (int d = 0; d < r - 2; d++) {
        if (qs->dims[d] != ks->dims[d] || vs->dims[d] != ks->dims[d]) return TS_ERR_UNSUPPORTED;
        nb *= ks->dims[d];
    }
    if (qs->dims[r - 2] > ATT_MAX_ROWS || qs->dims[r - 1] != ks->dims[r - 1] || vs->dims[r - 2] != ks->dims[r - 2] || ks->dims[r - 2] < 1)
        return TS_ERR_UNSUPPORTED;
    int64_t mstride[3] = {0, 0, 0};
    if (in[IN_MASK] >= 0 && !mask_strides(&g->values[in[IN_MASK]].shape, ss, nb, mstride)) return TS_ERR_UNSUPPORTED;
    att_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->nb = nb;
    s->s = qs->dims[r - 2];
    s->t = ks->dims[r - 2];
    s->d = ks->dims[r - 1];
    s->dv = vs->dims[r - 1];
    memcpy(s->mstride, mstride, sizeof mstride);
    s->mask_fills = fills;
    s->threads = xv_threads(p);
    s->row = (s->t + 15) & ~(int64_t)15;
    st->scratch_bytes = sizeof(float) * (size_t)s->row * (size_t)s->threads;
    if (xstep_alloc(st, IN_N, 1, err)) return err->code;
    for (int j = 0; j < IN_N; j++) {
        st->in[j] = in[j] < 0 ? -1 : xplan_plain(p, xplan_value_buf(p, in[j]), err);
        if (in[j] >= 0 && st->in[j] < 0) return err->code ? err->code : TS_ERR_INVALID;
    }
    for (int k = 0; k < nn; k++) xplan_claim(p, nodes[k], st);
    st->out[0] = xplan_value_buf(p, g->nodes[mm2].outputs[0]);
    if (st->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    return TS_OK;
}

const xkernel xk_vec_attention = {"vec.attention", att_build, att_run, free};
