/* Attention as one step (vec.attention, issue 29 §3), formed by the
 * lowering stage (issue 27 §3): a decoder's self-attention as exported,
 *     Kt = Transpose(K, perm ...,-1,-2)    S = MatMul(Q, Kt)
 *     S = Mul(S, c)        (optional, c a float scalar constant)
 *     S = Where(M, f, S)   (optional, M a bool constant broadcast to S, f a
 *                           float scalar constant; or Where(M, S, f))
 *     P = Softmax(S, last axis)            Y = MatMul(P, V)
 * with Q [..., s, d], K [..., t, d], V [..., t, dv] of the same leading
 * dims and at most ATT_MAX_ROWS query rows, each intermediate value read
 * by the next node only.  The stage hands vec_attention.c the six nodes,
 * the step's inputs (Q, K, V, the mask, c, f) and the mask's strides;
 * what the kernel computes and its tolerance are stated there.  Not in
 * half plans, not with TSOPT_SKIP=vec.attention. */
#include "exec/roofline.h"
#include "vec/vec.h"
#include "ops/attrs.h"
#include "ops/list.h"

#define ATT_MAX_ROWS 4 /* query rows per head: a token, a short chunk (vec_attention.c) */

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

bool xattention_shapes(const ts_shape *qs, const ts_shape *ks, const ts_shape *vs, const ts_shape *ms, int64_t *nb,
                       int64_t *mstride)
{
    /* Q [L..., s, d], K [L..., t, d], V [L..., t, dv], no broadcast */
    const int r = ks->rank;
    if (r < 3 || qs->rank != r || vs->rank != r) return false;
    *nb = 1;
    for (int d = 0; d < r - 2; d++) {
        if (qs->dims[d] != ks->dims[d] || vs->dims[d] != ks->dims[d]) return false;
        *nb *= ks->dims[d];
    }
    if (qs->dims[r - 2] > ATT_MAX_ROWS || qs->dims[r - 1] != ks->dims[r - 1] || vs->dims[r - 2] != ks->dims[r - 2] ||
        ks->dims[r - 2] < 1)
        return false;
    ts_shape ss = *qs; /* the scores: [L..., s, t] */
    ss.dims[r - 1] = ks->dims[r - 2];
    return !ms || mask_strides(ms, &ss, *nb, mstride);
}

/* The scores' optional Mul by a float scalar constant, taken into gr (its
 * constant as XATT_SCALE): the value after it, cur when no such Mul reads
 * cur, -1 when one does in a form the kernels do not compute. */
static int take_scale(const xplan *p, xgroup *gr, int cur)
{
    const ts_graph *g = p->g;
    const int c = reader(p, cur, &ts_op_mul);
    if (c < 0 || !xv_all_f32(p, c)) return cur;
    const ts_node *x = &g->nodes[c];
    const int other = x->inputs[0] == cur ? x->inputs[1] : x->inputs[0];
    if (x->inputs[0] == x->inputs[1] || !f32_scalar(p, other) ||
        !ts_shape_eq(&g->values[x->outputs[0]].shape, &g->values[cur].shape))
        return -1;
    gr->att_in[XATT_SCALE] = other;
    gr->nodes[gr->nnodes++] = c;
    return x->outputs[0];
}

bool xgroup_attention(const xplan *p, int n, xgroup *gr)
{
    const ts_graph *g = p->g;
    const ts_node *tr = &g->nodes[n];
    if (p->opts.no_fusion || p->half || xplan_skips(p, "vec.attention") || tr->noutputs != 1 || !xv_all_f32(p, n))
        return false;
    const ts_transpose_attrs *ta = tr->attrs;
    const ts_shape *ks = &g->values[tr->inputs[0]].shape;
    const int r = ks->rank;
    if (r < 3 || ta->nperm != r) return false;
    for (int d = 0; d < r; d++)
        if (ta->perm[d] != (d == r - 2 ? r - 1 : d == r - 1 ? r - 2 : d)) return false;
    const int kt = tr->outputs[0];
    int mm = reader(p, kt, &ts_op_matmul);
    if (mm < 0 || g->nodes[mm].inputs[1] != kt || g->nodes[mm].inputs[0] == kt || !xv_all_f32(p, mm) ||
        !xplan_inputs_ready(p, mm, kt))
        return false;
    int *in = gr->att_in;
    in[XATT_Q] = g->nodes[mm].inputs[0], in[XATT_K] = tr->inputs[0];
    in[XATT_V] = in[XATT_MASK] = in[XATT_SCALE] = in[XATT_FILL] = -1;
    gr->nodes[0] = n, gr->nodes[1] = mm, gr->nnodes = 2;
    int cur = g->nodes[mm].outputs[0], c;
    bool fills = true;
    if ((cur = take_scale(p, gr, cur)) < 0) return false;
    if ((c = reader(p, cur, &ts_op_where)) >= 0) {
        const ts_node *x = &g->nodes[c];
        const ts_tensor *mt = xplan_const(p, x->inputs[0]);
        fills = x->inputs[2] == cur;
        int other = fills ? x->inputs[1] : x->inputs[2];
        if (!mt || mt->dtype != TS_BOOL || x->inputs[0] == cur || x->inputs[1] == x->inputs[2] ||
            (!fills && x->inputs[1] != cur) || !f32_scalar(p, other) || g->values[x->outputs[0]].dtype != TS_F32 ||
            !ts_shape_eq(&g->values[x->outputs[0]].shape, &g->values[cur].shape))
            return false;
        in[XATT_MASK] = x->inputs[0];
        in[XATT_FILL] = other;
        gr->nodes[gr->nnodes++] = c;
        cur = x->outputs[0];
    }
    if ((c = reader(p, cur, &ts_op_softmax)) < 0 || !xv_all_f32(p, c)) return false;
    const ts_softmax_attrs *sa = g->nodes[c].attrs;
    const ts_shape *ss = &g->values[cur].shape;
    int axis;
    if (!ts_axis_norm(sa->axis, ss->rank, &axis) || axis != ss->rank - 1) return false;
    gr->nodes[gr->nnodes++] = c;
    cur = g->nodes[c].outputs[0];
    int mm2 = reader(p, cur, &ts_op_matmul);
    if (mm2 < 0 || g->nodes[mm2].inputs[0] != cur || g->nodes[mm2].inputs[1] == cur || !xv_all_f32(p, mm2) ||
        !xplan_inputs_ready(p, mm2, cur))
        return false;
    gr->nodes[gr->nnodes++] = mm2;
    in[XATT_V] = g->nodes[mm2].inputs[1];
    const ts_shape *ys = &g->values[g->nodes[mm2].outputs[0]].shape;
    int64_t nb;
    if (ys->rank != r || ss->rank != r ||
        !xattention_shapes(&g->values[in[XATT_Q]].shape, ks, &g->values[in[XATT_V]].shape,
                           in[XATT_MASK] >= 0 ? &g->values[in[XATT_MASK]].shape : NULL, &nb, gr->att_mstride))
        return false;
    gr->att_fills = fills;
    gr->y = g->nodes[mm2].outputs[0];
    return true;
}

/* ---------------------------------------------- an encoder's whole attention
 *
 * torch's MultiheadAttention as exported (ViT, nn.TransformerEncoder) after
 * vec.slice_transpose made its operands:
 *     S = MatMul(Q, Kt)    [S = Mul(S, c)]    P = Softmax(S, last axis)
 *     Y = MatMul(P, V)     [Y = Transpose(Y) swapping heads and rows]
 * with Q [L..., s, d], Kt [L..., d, t] (the keys already transposed), V
 * [L..., t, dv], dv a whole number of 16-float vectors, the same leading
 * dims, each intermediate value read by the next node only.  vec.sdpa
 * (vec_sdpa.c) computes it a block of query rows at a time with the
 * scores in L1: the unfused plan writes and reads them three times (a
 * [h, s, t] tensor: ViT-B/16's 1.9 MB, the encoder's 0.5 MB).  A
 * Transpose [.., H, s, dv] -> [.., s, H, dv] after it (the heads merged
 * back) is the step's output order.  AVX-512 only (elsewhere the nodes
 * lower one by one); not in half plans; TSOPT_SKIP=vec.sdpa gives the
 * unfused plan. */
#define SDPA_ROWS 16 /* query rows an item (vec_sdpa.c: SD_BLOCK) */

bool xgroup_sdpa(const xplan *p, int n, xgroup *gr)
{
    const ts_graph *g = p->g;
    const ts_node *mm = &g->nodes[n];
    if (p->opts.no_fusion || p->half || xplan_skips(p, "vec.sdpa") || !__builtin_cpu_supports("avx512f") ||
        mm->op != &ts_op_matmul || mm->ninputs != 2 || mm->noutputs != 1 || !xv_all_f32(p, n) ||
        mm->inputs[0] == mm->inputs[1])
        return false;
    const ts_shape *qs = &g->values[mm->inputs[0]].shape, *ks = &g->values[mm->inputs[1]].shape;
    const int r = qs->rank;
    if (r < 3 || ks->rank != r) return false;
    for (int d = 0; d < r - 2; d++)
        if (qs->dims[d] != ks->dims[d]) return false;
    const int64_t s = qs->dims[r - 2], d = qs->dims[r - 1], t = ks->dims[r - 1];
    if (ks->dims[r - 2] != d || s < 1 || d < 1 || t < 1) return false;
    /* a block's scores (SDPA_ROWS rows of t, padded to vectors) within half of L1d */
    const long l1 = xroof_caches_get().l1d;
    if ((int64_t)sizeof(float) * SDPA_ROWS * ((t + 15) & ~(int64_t)15) > (l1 > 0 ? l1 : 32768) / 2) return false;
    int *in = gr->att_in;
    for (int j = 0; j < XATT_N; j++) in[j] = -1;
    in[XATT_Q] = mm->inputs[0], in[XATT_K] = mm->inputs[1];
    gr->nodes[0] = n, gr->nnodes = 1;
    int cur = mm->outputs[0], c;
    if ((cur = take_scale(p, gr, cur)) < 0) return false;
    if ((c = reader(p, cur, &ts_op_softmax)) < 0 || !xv_all_f32(p, c)) return false;
    const ts_softmax_attrs *sa = g->nodes[c].attrs;
    int axis;
    if (!ts_axis_norm(sa->axis, r, &axis) || axis != r - 1) return false;
    gr->nodes[gr->nnodes++] = c;
    cur = g->nodes[c].outputs[0];
    int m2 = reader(p, cur, &ts_op_matmul);
    if (m2 < 0 || g->nodes[m2].inputs[0] != cur || g->nodes[m2].inputs[1] == cur || !xv_all_f32(p, m2) ||
        !xplan_inputs_ready(p, m2, cur))
        return false;
    const ts_shape *vs = &g->values[g->nodes[m2].inputs[1]].shape;
    if (vs->rank != r || vs->dims[r - 2] != t || vs->dims[r - 1] % 16 || vs->dims[r - 1] < 16) return false;
    for (int k = 0; k < r - 2; k++)
        if (vs->dims[k] != qs->dims[k]) return false;
    in[XATT_V] = g->nodes[m2].inputs[1];
    gr->nodes[gr->nnodes++] = m2;
    gr->y = g->nodes[m2].outputs[0];
    gr->att_ytr = false;
    int tr = reader(p, gr->y, &ts_op_transpose);
    if (tr >= 0 && xv_all_f32(p, tr)) {
        const ts_transpose_attrs *ta = g->nodes[tr].attrs;
        bool swap = ta->nperm == r;
        for (int k = 0; swap && k < r; k++)
            swap = ta->perm[k] == (k == r - 3 ? r - 2 : k == r - 2 ? r - 3 : k);
        if (swap) {
            gr->nodes[gr->nnodes++] = tr;
            gr->y = g->nodes[tr].outputs[0];
            gr->att_ytr = true;
        }
    }
    return true;
}
