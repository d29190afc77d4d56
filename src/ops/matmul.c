/* Matrix products.
 * MatMul: NumPy matmul semantics (a 1-D A is a row vector, a 1-D B a
 *   column vector, the added dimension is dropped again; batch dimensions
 *   broadcast).
 * Gemm: Y = alpha * A' * B' + beta * C, A' = transA ? A^T : A, same for B;
 *   C (optional since opset 11) broadcasts unidirectionally to (M, N).
 * Both are polynomial: one kernel over the number domain, inner loops as
 * num->axpy over rows of B (or num->dot when the result rows are short). */
#include <math.h>
#include <stdio.h>
#include "ops/window.h"
#include "ops/attrs.h"

/* ------------------------------------------------------------------ MatMul */

typedef struct mm_geom {
    int64_t M, K, N, batches;
    ts_shape batch;                              /* broadcast batch shape */
    int64_t sa[TS_MAX_RANK], sb[TS_MAX_RANK];     /* batch strides in matrices */
} mm_geom;

static bool mm_shapes(const ts_shape *a, const ts_shape *b, mm_geom *m, ts_shape *y, char *why, size_t n)
{
    char s1[160], s2[160];
    if (a->rank < 1 || b->rank < 1) {
        snprintf(why, n, "operands must have rank >= 1, got %s and %s", ts_shape_str(a, s1, sizeof s1),
                 ts_shape_str(b, s2, sizeof s2));
        return false;
    }
    ts_shape ab = {0}, bb = {0};
    m->M = a->rank == 1 ? 1 : a->dims[a->rank - 2];
    m->K = a->dims[a->rank - 1];
    int64_t kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
    m->N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
    if (m->K != kb) {
        snprintf(why, n, "inner dimensions differ: A is %s (K = %lld), B is %s (K = %lld)",
                 ts_shape_str(a, s1, sizeof s1), (long long)m->K, ts_shape_str(b, s2, sizeof s2), (long long)kb);
        return false;
    }
    ab.rank = a->rank > 2 ? a->rank - 2 : 0;
    for (int i = 0; i < ab.rank; i++) ab.dims[i] = a->dims[i];
    bb.rank = b->rank > 2 ? b->rank - 2 : 0;
    for (int i = 0; i < bb.rank; i++) bb.dims[i] = b->dims[i];
    if (!ts_shape_broadcast(&ab, &bb, &m->batch)) {
        snprintf(why, n, "batch dimensions of %s and %s do not broadcast", ts_shape_str(a, s1, sizeof s1),
                 ts_shape_str(b, s2, sizeof s2));
        return false;
    }
    ts_shape_bcast_strides(&ab, &m->batch, m->sa);
    ts_shape_bcast_strides(&bb, &m->batch, m->sb);
    m->batches = ts_shape_numel(&m->batch);
    if (y) {
        *y = m->batch;
        if (a->rank > 1) y->dims[y->rank++] = m->M;
        if (b->rank > 1) y->dims[y->rank++] = m->N;
    }
    return true;
}

static ts_status matmul_infer(ts_infer_ctx *c)
{
    mm_geom m;
    char why[512];
    if (!ts_nn_float_input(c, 0) || !ts_nn_float_input(c, 1)) return c->err->code;
    if (c->in[0]->dtype != c->in[1]->dtype)
        return ts_infer_fail(c, "input types differ (%s vs %s)", ts_dtype_name(c->in[0]->dtype),
                             ts_dtype_name(c->in[1]->dtype));
    if (!mm_shapes(&c->in[0]->shape, &c->in[1]->shape, &m, &c->out_shape[0], why, sizeof why))
        return ts_infer_fail(c, "%s", why);
    c->out_dtype[0] = c->in[0]->dtype;
    return TS_OK;
}

/* y[M,N] += A'[M,K] * B'[K,N], with element strides: A'[i,k] = a[i*ai + k*ak],
 * B'[k,j] = b[k*bk + j*bj]; y is contiguous. */
static void gemm_rows(const ts_num *num, int64_t M, int64_t K, int64_t N, const char *a, int64_t ai, int64_t ak,
                      const char *b, int64_t bk, int64_t bj, char *y)
{
    const size_t es = num->size;
    if (bj == 1 && N >= 8) { /* rows of B are contiguous: y row += a_ik * B row k */
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++)
                num->axpy(N, a + (size_t)(i * ai + k * ak) * es, b + (size_t)(k * bk) * es, 1, y + (size_t)(i * N) * es, 1);
        return;
    }
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
            num->dot(K, a + (size_t)(i * ai) * es, ak, b + (size_t)(j * bj) * es, bk, y + (size_t)(i * N + j) * es);
}

static ts_status matmul_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *A = k->in[0], *B = k->in[1];
    mm_geom m;
    char why[512];
    if (!mm_shapes(&A->shape, &B->shape, &m, NULL, why, sizeof why)) return ts_kernel_fail(k, TS_ERR_INVALID, "%s", why);
    const size_t es = k->num->size;
    int64_t idx[TS_MAX_RANK] = {0}, oa = 0, ob = 0;
    for (int64_t t = 0; t < m.batches; t++) {
        gemm_rows(k->num, m.M, m.K, m.N, (const char *)A->data + (size_t)(oa * m.M * m.K) * es, m.K, 1,
                  (const char *)B->data + (size_t)(ob * m.K * m.N) * es, m.N, 1,
                  (char *)k->out[0]->data + (size_t)(t * m.M * m.N) * es);
        for (int d = m.batch.rank - 1; d >= 0; d--) { /* odometer over batch dims */
            oa += m.sa[d];
            ob += m.sb[d];
            if (++idx[d] < m.batch.dims[d]) break;
            oa -= m.sa[d] * m.batch.dims[d];
            ob -= m.sb[d] * m.batch.dims[d];
            idx[d] = 0;
        }
    }
    return TS_OK;
}

static double matmul_flops(const ts_node *n, const ts_graph *g)
{
    const ts_shape *a = &g->values[n->inputs[0]].shape;
    const ts_shape *y = &g->values[n->outputs[0]].shape;
    return 2.0 * (double)ts_shape_numel(y) * (double)a->dims[a->rank - 1];
}

const ts_op_desc ts_op_matmul = {.opset_min = 1, 
    .name = "MatMul", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = TS_OP_EXACT | TS_OP_CONTRACTION, .linear_inputs = 0x3, .expr = "L[b,i,j] Sum[k] A[b,i,k]*B[b,k,j]",
    .infer = matmul_infer, .kernel = matmul_kernel, .flops = matmul_flops,
};

/* -------------------------------------------------------------------- Gemm */

static ts_status gemm_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_gemm_attrs *g = attrs;
    int64_t ta, tb;
    ts_status st;
    (void)opset;
    if ((st = ts_attr_get_float(a, na, "alpha", 1.0, &g->alpha, err)) ||
        (st = ts_attr_get_float(a, na, "beta", 1.0, &g->beta, err)) ||
        (st = ts_attr_get_int(a, na, "transA", 0, &ta, err)) || (st = ts_attr_get_int(a, na, "transB", 0, &tb, err)))
        return st;
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
        return ts_error_set(err, TS_ERR_INVALID, "attributes 'transA'/'transB': expected 0 or 1");
    g->trans_a = (int32_t)ta;
    g->trans_b = (int32_t)tb;
    return TS_OK;
}

static int gemm_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_gemm_attrs *g = attrs;
    int n = 0;
    if (max < 4) return -1;
    if (g->alpha != 1.0) out[n++] = ts_attr_float("alpha", g->alpha);
    if (g->beta != 1.0) out[n++] = ts_attr_float("beta", g->beta);
    if (g->trans_a) out[n++] = ts_attr_int("transA", 1);
    if (g->trans_b) out[n++] = ts_attr_int("transB", 1);
    return n;
}

static bool gemm_shapes(const ts_gemm_attrs *g, const ts_shape *a, const ts_shape *b, const ts_shape *c, int64_t *M,
                        int64_t *K, int64_t *N, char *why, size_t n)
{
    char s1[160], s2[160];
    if (a->rank != 2 || b->rank != 2) {
        snprintf(why, n, "A and B must be matrices (rank 2), got %s and %s", ts_shape_str(a, s1, sizeof s1),
                 ts_shape_str(b, s2, sizeof s2));
        return false;
    }
    *M = a->dims[g->trans_a ? 1 : 0];
    *K = a->dims[g->trans_a ? 0 : 1];
    *N = b->dims[g->trans_b ? 0 : 1];
    int64_t kb = b->dims[g->trans_b ? 1 : 0];
    if (*K != kb) {
        snprintf(why, n, "inner dimensions differ: A%s is %s (K = %lld), B%s is %s (K = %lld)", g->trans_a ? "^T" : "",
                 ts_shape_str(a, s1, sizeof s1), (long long)*K, g->trans_b ? "^T" : "", ts_shape_str(b, s2, sizeof s2),
                 (long long)kb);
        return false;
    }
    if (c) {
        ts_shape mn = {.rank = 2, .dims = {*M, *N}}, out;
        if (c->rank > 2 || !ts_shape_broadcast(c, &mn, &out) || !ts_shape_eq(&out, &mn)) {
            snprintf(why, n, "C (%s) does not broadcast to the %lldx%lld result", ts_shape_str(c, s1, sizeof s1),
                     (long long)*M, (long long)*N);
            return false;
        }
    }
    return true;
}

static ts_status gemm_infer(ts_infer_ctx *c)
{
    const ts_gemm_attrs *g = c->attrs;
    int64_t M, K, N;
    char why[512];
    const ts_value *cv = c->nin > 2 ? c->in[2] : NULL;
    if (!cv && c->opset < 11) return ts_infer_fail(c, "input C is required before opset 11");
    if (!ts_nn_float_input(c, 0) || !ts_nn_float_input(c, 1) || (cv && !ts_nn_float_input(c, 2))) return c->err->code;
    if (c->in[0]->dtype != c->in[1]->dtype || (cv && cv->dtype != c->in[0]->dtype))
        return ts_infer_fail(c, "input types differ");
    if (!gemm_shapes(g, &c->in[0]->shape, &c->in[1]->shape, cv ? &cv->shape : NULL, &M, &K, &N, why, sizeof why))
        return ts_infer_fail(c, "%s", why);
    c->out_shape[0] = (ts_shape){.rank = 2, .dims = {M, N}};
    c->out_dtype[0] = c->in[0]->dtype;
    return TS_OK;
}

/* alpha/beta as domain scalars; in the exact domain only integers are exact. */
static bool scalar_of(ts_kernel_ctx *k, double v, const char *name, ts_scalar *out)
{
    if (k->num->exact && v != nearbyint(v)) {
        ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "%s = %g is not an integer: no exact form in the %s domain", name, v,
                       k->num->name);
        return false;
    }
    k->num->from_f64(out, v);
    return true;
}

static ts_status gemm_kernel(ts_kernel_ctx *k)
{
    const ts_gemm_attrs *g = k->attrs;
    const ts_num *num = k->num;
    const ts_tensor *A = k->in[0], *B = k->in[1], *C = k->nin > 2 ? k->in[2] : NULL;
    int64_t M, K, N;
    char why[512];
    ts_scalar alpha, beta;
    if (!gemm_shapes(g, &A->shape, &B->shape, C ? &C->shape : NULL, &M, &K, &N, why, sizeof why))
        return ts_kernel_fail(k, TS_ERR_INVALID, "%s", why);
    if (!scalar_of(k, g->alpha, "alpha", &alpha) || !scalar_of(k, g->beta, "beta", &beta)) return k->err->code;
    const size_t es = num->size;
    char *y = k->out[0]->data;
    gemm_rows(num, M, K, N, A->data, g->trans_a ? 1 : K, g->trans_a ? M : 1, B->data, g->trans_b ? 1 : N,
              g->trans_b ? K : 1, y);
    if (g->alpha != 1.0)
        for (int64_t i = 0; i < M * N; i++) num->mul(y + (size_t)i * es, y + (size_t)i * es, &alpha);
    if (C) {
        ts_shape mn = {.rank = 2, .dims = {M, N}};
        int64_t st[TS_MAX_RANK];
        ts_shape_bcast_strides(&C->shape, &mn, st);
        for (int64_t i = 0; i < M; i++)
            num->axpy(N, &beta, (const char *)C->data + (size_t)(i * st[0]) * es, st[1], y + (size_t)(i * N) * es, 1);
    }
    return TS_OK;
}

static double gemm_flops(const ts_node *n, const ts_graph *g)
{
    const ts_gemm_attrs *a = n->attrs;
    const ts_shape *A = &g->values[n->inputs[0]].shape;
    const ts_shape *y = &g->values[n->outputs[0]].shape;
    return 2.0 * (double)ts_shape_numel(y) * (double)A->dims[a->trans_a ? 0 : 1];
}

const ts_op_desc ts_op_gemm = {.opset_min = 7, 
    .name = "Gemm", .attr_size = sizeof(ts_gemm_attrs), .min_inputs = 2, .max_inputs = 3, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_CONTRACTION, .linear_inputs = 0x7, /* degree 1 in A, B and C (docs/pet.md) */
    .expr = "L[i,j] Sum[k] A[i,k]*B[k,j] + C[i,j]",
    .parse = gemm_parse, .emit = gemm_emit, .infer = gemm_infer, .kernel = gemm_kernel, .flops = gemm_flops,
};
