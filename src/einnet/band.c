/* Longformer's band (docs/einnet.md): the sliding-window product exported
 * without a custom operator, MatMul(Gather(K, T, axis = -2), Q as a
 * column), T a constant [L, J] table of source rows i + D*j + c0 clamped
 * into the sequence.  Its expression is the dilated G2BMM
 *
 *     S[.., i, j] = Sum_c K[.., i + D*j + c0, c] * Q[.., i, c]
 *
 * wherever the clamp does not act; where it does, the model adds -1e4 to
 * the score before a Softmax over j, so those scores never matter (the
 * source checks that side condition on the graph, band.h). */
#include <stdlib.h>
#include <string.h>
#include "einnet/band.h"
#include "ops/attrs.h"
#include "ops/list.h"

bool ts_ein_band_expr(ts_ein *e, const ts_shape *K, const ts_shape *Q, int64_t D, int64_t c0, int64_t J)
{
    int r = K->rank;
    if (r < 3 || r > TS_MAX_RANK - 1 || Q->rank != r || K->dims[r - 1] != Q->dims[r - 1]) return false;
    memset(e, 0, sizeof *e);
    e->ninputs = 2;
    e->in_shape[0] = *K;
    e->in_shape[1] = *Q;
    int s = ts_ein_scope_new(e);
    if (s != 0) return false;
    ts_ein_scope *sc = &e->scope[0];
    ts_ein_idx ik[TS_MAX_RANK], iq[TS_MAX_RANK];
    for (int d = 0; d < r - 1; d++) {
        int it = ts_ein_iter_new(e, 0, Q->dims[d]);
        if (it < 0) return false;
        sc->trav[sc->ntrav++] = (int16_t)it;
        ik[d] = iq[d] = ts_ein_idx_it(it);
    }
    int j = ts_ein_iter_new(e, 0, J), c = ts_ein_iter_new(e, 0, K->dims[r - 1]);
    if (j < 0 || c < 0) return false;
    sc->trav[sc->ntrav++] = (int16_t)j;
    sc->sum[sc->nsum++] = (int16_t)c;
    ts_ein_idx jj = ts_ein_idx_it(j);
    ts_ein_idx_axpy(&ik[r - 2], D, &jj);
    ik[r - 2].c = c0;
    ik[r - 1] = iq[r - 1] = ts_ein_idx_it(c);
    int body = ts_ein_bin(e, EIN_MUL, ts_ein_read(e, 0, r, ik), ts_ein_read(e, 1, r, iq));
    if (body < 0) return false;
    sc->body = (int16_t)body;
    /* the MatMul's [.., L, J, 1]: the root's traversal reshaped */
    e->out_shape = *Q;
    e->out_shape.dims[r - 1] = J;
    e->out_shape.dims[r] = 1;
    e->out_shape.rank = r + 1;
    return true;
}

bool ts_ein_band_ctx_expr(ts_ein *e, const ts_shape *V, const ts_shape *P, int64_t D, int64_t c0)
{
    int r = V->rank;
    if (r < 3 || r > TS_MAX_RANK - 1 || P->rank != r) return false;
    memset(e, 0, sizeof *e);
    e->ninputs = 2;
    e->in_shape[0] = *V;
    e->in_shape[1] = *P;
    if (ts_ein_scope_new(e) != 0) return false;
    ts_ein_scope *sc = &e->scope[0];
    ts_ein_idx iv[TS_MAX_RANK], ip[TS_MAX_RANK];
    for (int d = 0; d < r - 1; d++) {
        int it = ts_ein_iter_new(e, 0, P->dims[d]);
        if (it < 0) return false;
        sc->trav[sc->ntrav++] = (int16_t)it;
        iv[d] = ip[d] = ts_ein_idx_it(it);
    }
    int c = ts_ein_iter_new(e, 0, V->dims[r - 1]), j = ts_ein_iter_new(e, 0, P->dims[r - 1]);
    if (j < 0 || c < 0) return false;
    sc->trav[sc->ntrav++] = (int16_t)c;
    sc->sum[sc->nsum++] = (int16_t)j;
    ts_ein_idx jj = ts_ein_idx_it(j);
    ts_ein_idx_axpy(&iv[r - 2], D, &jj);
    iv[r - 2].c = c0;
    iv[r - 1] = ts_ein_idx_it(c);
    ip[r - 1] = jj;
    int body = ts_ein_bin(e, EIN_MUL, ts_ein_read(e, 1, r, ip), ts_ein_read(e, 0, r, iv));
    if (body < 0) return false;
    sc->body = (int16_t)body;
    /* the MatMul's [.., L, 1, C] */
    e->out_shape = *V;
    e->out_shape.dims[r - 2] = P->dims[r - 2];
    e->out_shape.dims[r - 1] = 1;
    e->out_shape.dims[r] = V->dims[r - 1];
    e->out_shape.rank = r + 1;
    return true;
}

/* The value producing v when its producer is op (NULL otherwise). */
static const ts_node *made_by(const ts_graph *g, int v, const ts_op_desc *op)
{
    if (v < 0 || g->values[v].producer < 0) return NULL;
    const ts_node *n = &g->nodes[g->values[v].producer];
    return n->dead || n->op != op ? NULL : n;
}

static const ts_node *only_consumer(const ts_graph *g, int v)
{
    const ts_node *c = NULL;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *x = &g->nodes[n];
        for (int k = 0; !x->dead && k < x->ninputs; k++)
            if (x->inputs[k] == v) {
                if (c && c != x) return NULL;
                c = x;
            }
    }
    for (int k = 0; k < g->noutputs; k++)
        if (g->outputs[k] == v) return NULL;
    return c;
}

/* The clamped positions of a band table (NULL when T is not one); *D,
 * *c0 its step and offset. */
static uint8_t *band_table(const ts_tensor *T, int64_t S, int64_t *D, int64_t *c0)
{
    int64_t L = T->shape.dims[0], J = T->shape.dims[1];
    bool have = false;
    for (int64_t i = 0; i < L && !have; i++)
        for (int64_t j = 0; j + 1 < J && !have; j++) {
            int64_t a = ts_tensor_get_i64(T, i * J + j), z = ts_tensor_get_i64(T, i * J + j + 1);
            if (a > 0 && z < S - 1 && z > a) {
                *D = z - a, *c0 = a - i - *D * j;
                have = true;
            }
        }
    uint8_t *cl = have ? calloc((size_t)(L * J), 1) : NULL;
    for (int64_t i = 0; cl && i < L; i++)
        for (int64_t j = 0; j < J; j++) {
            int64_t p = i + *D * j + *c0, want = p < 0 ? 0 : p >= S ? S - 1 : p;
            if (ts_tensor_get_i64(T, i * J + j) != want) {
                free(cl);
                return NULL;
            }
            cl[i * J + j] = p != want;
        }
    return cl;
}

/* Node `add` adds to value v a constant [L, J] mask <= -1e4 at every
 * clamped position. */
static bool masks(const ts_graph *g, const ts_node *add, int v, const uint8_t *cl, int64_t L, int64_t J)
{
    if (!add || add->op != &ts_op_add || add->ninputs != 2) return false;
    int mv = add->inputs[0] == v ? add->inputs[1] : add->inputs[0];
    const ts_tensor *M = g->values[mv].constant;
    if (!M || M->dtype != TS_F32 || M->shape.rank != 2 || M->shape.dims[0] != L || M->shape.dims[1] != J) return false;
    for (int64_t k = 0; k < L * J; k++)
        if (cl[k] && ((const float *)M->data)[k] > -1e4f) return false;
    return true;
}

static bool softmax_last(const ts_node *sm, int r)
{
    if (!sm || sm->op != &ts_op_softmax) return false;
    const ts_softmax_attrs *sa = sm->attrs;
    return !sa->flatten && (sa->axis == -1 || sa->axis == r - 1);
}

/* The context: MatMul(Reshape(P) [.., L, 1, J], Gather(V, T)), P the
 * Softmax over j of scores masked where T clamps: P is 0 there. */
static bool context_match(const ts_graph *g, const ts_node *m, ts_ein_band *b)
{
    const ts_node *rp = made_by(g, m->inputs[0], &ts_op_reshape), *ga = made_by(g, m->inputs[1], &ts_op_gather);
    if (!ga || !rp || ga->ninputs != 2) return false;
    const ts_shape *V = &g->values[ga->inputs[0]].shape, *P = &g->values[rp->inputs[0]].shape;
    const ts_tensor *T = g->values[ga->inputs[1]].constant;
    const ts_gather_attrs *at = ga->attrs;
    int r = V->rank;
    if (!T || T->shape.rank != 2 || r < 3 || P->rank != r || g->values[ga->inputs[0]].dtype != TS_F32 ||
        (at->axis != r - 2 && at->axis != -2))
        return false;
    int64_t L = T->shape.dims[0], J = T->shape.dims[1], S = V->dims[r - 2];
    const ts_shape *pr = &g->values[m->inputs[0]].shape;
    for (int d = 0; d < r - 2; d++)
        if (V->dims[d] != P->dims[d]) return false;
    if (L != S || P->dims[r - 2] != L || P->dims[r - 1] != J || pr->rank != r + 1 || pr->dims[r - 1] != 1 ||
        pr->dims[r] != J)
        return false;
    int64_t D = 0, c0 = 0;
    uint8_t *cl = band_table(T, S, &D, &c0);
    if (!cl) return false;
    const ts_node *sm = made_by(g, rp->inputs[0], &ts_op_softmax);
    const ts_node *ad = sm ? made_by(g, sm->inputs[0], &ts_op_add) : NULL;
    bool ok = softmax_last(sm, r) && ad && (masks(g, ad, ad->inputs[0], cl, L, J) || masks(g, ad, ad->inputs[1], cl, L, J));
    free(cl);
    if (!ok) return false;
    b->context = true;
    b->gather = g->values[ga->outputs[0]].producer;
    b->k = ga->inputs[0];
    b->q = rp->inputs[0];
    b->D = D, b->c0 = c0, b->J = J;
    return ts_ein_band_ctx_expr(&b->e, V, P, D, c0);
}

bool ts_ein_band_match(const ts_graph *g, int mm, ts_ein_band *b)
{
    const ts_node *m = &g->nodes[mm];
    memset(b, 0, sizeof *b);
    if (m->dead || m->op != &ts_op_matmul || m->ninputs != 2) return false;
    if (context_match(g, m, b)) return true;
    const ts_node *ga = made_by(g, m->inputs[0], &ts_op_gather), *rq = made_by(g, m->inputs[1], &ts_op_reshape);
    if (!ga || !rq || ga->ninputs != 2) return false;
    const ts_shape *K = &g->values[ga->inputs[0]].shape, *Q = &g->values[rq->inputs[0]].shape;
    const ts_tensor *T = g->values[ga->inputs[1]].constant;
    const ts_gather_attrs *at = ga->attrs;
    int r = K->rank;
    if (!T || T->shape.rank != 2 || r < 3 || Q->rank != r || g->values[ga->inputs[0]].dtype != TS_F32 ||
        (at->axis != r - 2 && at->axis != -2))
        return false;
    for (int d = 0; d < r; d++)
        if (K->dims[d] != Q->dims[d]) return false; /* self-attention: the same sequence */
    int64_t L = T->shape.dims[0], J = T->shape.dims[1], S = K->dims[r - 2];
    const ts_shape *qc = &g->values[m->inputs[1]].shape, *out = &g->values[m->outputs[0]].shape;
    if (L != S || J < 2 || qc->rank != r + 1 || qc->dims[r] != 1 || qc->dims[r - 1] != Q->dims[r - 1] ||
        qc->dims[r - 2] != L || out->rank != r + 1 || out->dims[r - 1] != J || out->dims[r] != 1)
        return false;
    int64_t D = 0, c0 = 0;
    uint8_t *cl = band_table(T, S, &D, &c0);
    if (!cl) return false;
    /* the side condition: scores reshaped to [.., L, J], + mask <= -1e4
     * at every clamped position, Softmax over j, nothing else reads them */
    const ts_node *rs = only_consumer(g, m->outputs[0]);
    const ts_node *ad = rs && rs->op == &ts_op_reshape ? only_consumer(g, rs->outputs[0]) : NULL;
    const ts_node *sm = ad && ad->op == &ts_op_add ? only_consumer(g, ad->outputs[0]) : NULL;
    bool ok = softmax_last(sm, r) && g->values[rs->outputs[0]].shape.rank == r &&
              masks(g, ad, rs->outputs[0], cl, L, J);
    free(cl);
    if (!ok) return false;
    b->gather = ga->outputs[0] >= 0 ? g->values[ga->outputs[0]].producer : -1;
    b->k = ga->inputs[0];
    b->q = rq->inputs[0];
    b->D = D, b->c0 = c0, b->J = J;
    return ts_ein_band_expr(&b->e, K, Q, D, c0, J);
}
