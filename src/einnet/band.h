/* Longformer's band product as an expression (band.c). */
#ifndef TS_EINNET_BAND_H
#define TS_EINNET_BAND_H

#include "ein/expr.h"

/* S[.., i, j] = Sum_c K[.., i + D*j + c0, c] * Q[.., i, c], out of range
 * reads 0, as the [.., L, J, 1] result of the exported MatMul. */
bool ts_ein_band_expr(ts_ein *e, const ts_shape *K, const ts_shape *Q, int64_t D, int64_t c0, int64_t J);

/* O[.., i, 0, c] = Sum_j P[.., i, j] * V[.., i + D*j + c0, c]: the band's
 * counterpart (the context), as the [.., L, 1, C] result of its MatMul. */
bool ts_ein_band_ctx_expr(ts_ein *e, const ts_shape *V, const ts_shape *P, int64_t D, int64_t c0);

typedef struct ts_ein_band {
    bool context;     /* the counterpart: k is V, q is P */
    ts_ein e;         /* its expression: input 0 = k, input 1 = q */
    int gather;       /* the Gather node */
    int k, q;         /* values: the keys, the queries (before the column Reshape) */
    int64_t D, c0, J; /* the band */
} ts_ein_band;

/* Whether MatMul node mm of g is the scores of a band: MatMul(Gather(K,
 * T, axis -2), Reshape(Q) [.., L, C, 1]), T constant = clamp(i + D*j +
 * c0), and the scores, reshaped to [.., L, J], get a constant mask that
 * is <= -1e4 wherever the clamp acts before a Softmax over j (so the
 * expression, 0 there, and the gathered clamped rows give the same
 * probabilities: exp underflows to 0 either way). */
/* Or the context: MatMul(Reshape(P) [.., L, 1, J], Gather(V, T)), P a
 * Softmax over j of scores plus such a mask (P is 0 where T clamps). */
bool ts_ein_band_match(const ts_graph *g, int mm, ts_ein_band *b);

#endif
