/* LayerNormalization (Y only) on float32: each row of D = prod(X.shape[axis:])
 * elements is normalized with a two-pass mean / variance (the row is in
 * cache for the second pass, and two passes avoid the cancellation of
 * E[x^2] - E[x]^2), then scaled and shifted in a third vector loop.
 * Scale and B must have D elements, or be constants, which are expanded
 * onto the normalized shape once at plan time. */
#include <stdlib.h>
#include "exec/vec.h"
#include "ops/attrs.h"

typedef struct ln_state {
    int64_t rows, d;
    float eps;
    int threads;
    int scale_in, bias_in; /* step input index, or -1: use the expanded copy (or none for bias) */
    float *scale, *bias;   /* plan-time expansions of constant parameters */
} ln_state;

static void ln_free(void *p)
{
    ln_state *s = p;
    if (!s) return;
    free(s->scale);
    free(s->bias);
    free(s);
}

XV_CLONES static void ln_row(const float *x, float *y, int64_t d, float eps, const float *g, const float *b)
{
    float sum = 0, var = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < d; i++) sum += x[i];
    const float mean = sum / (float)d;
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < d; i++) var += (x[i] - mean) * (x[i] - mean);
    const float r = 1.0f / sqrtf(var / (float)d + eps);
    if (b) {
#pragma omp simd
        for (int64_t i = 0; i < d; i++) y[i] = (x[i] - mean) * r * g[i] + b[i];
    } else {
#pragma omp simd
        for (int64_t i = 0; i < d; i++) y[i] = (x[i] - mean) * r * g[i];
    }
}

static void ln_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const ln_state *s = st->state;
    const float *x = in[0], *g = s->scale_in >= 0 ? in[s->scale_in] : s->scale;
    const float *b = s->bias_in >= 0 ? in[s->bias_in] : s->bias;
    float *y = out[0];
    (void)scratch;
#pragma omp parallel for schedule(static) num_threads(s->threads) \
    if (s->threads > 1 && s->rows > 1 && s->rows * s->d >= XV_PAR_MIN / 4)
    for (int64_t r = 0; r < s->rows; r++) ln_row(x + r * s->d, y + r * s->d, s->d, s->eps, g, b);
}

/* Constant t broadcast onto `norm`, as a new float array (NULL: no memory). */
static float *expand(const ts_tensor *t, const ts_shape *norm, int64_t d)
{
    int64_t st[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, off = 0;
    float *o = malloc(sizeof(float) * (size_t)(d ? d : 1));
    if (!o) return NULL;
    ts_shape_bcast_strides(&t->shape, norm, st);
    for (int64_t i = 0; i < d; i++) {
        o[i] = ((const float *)t->data)[off];
        for (int k = norm->rank - 1; k >= 0; k--) {
            off += st[k];
            if (++idx[k] < norm->dims[k]) break;
            off -= st[k] * norm->dims[k];
            idx[k] = 0;
        }
    }
    return o;
}

static ts_status ln_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = &p->g->nodes[n];
    if (nd->noutputs != 1 || !xv_all_f32(p, n)) return TS_ERR_UNSUPPORTED;
    const ts_layernorm_attrs *a = nd->attrs;
    const ts_shape *sh = &p->g->values[nd->inputs[0]].shape;
    int axis;
    if (!ts_axis_norm(a->axis, sh->rank, &axis)) return TS_ERR_UNSUPPORTED;
    ts_shape norm = {.rank = sh->rank - axis};
    int64_t d = 1;
    for (int i = axis; i < sh->rank; i++) d *= (norm.dims[i - axis] = sh->dims[i]);
    if (d == 0) return TS_ERR_UNSUPPORTED;
    /* parameters: full size as given, or constants to expand */
    const ts_tensor *pc[2] = {NULL, NULL};
    for (int i = 1; i < nd->ninputs && i < 3; i++) {
        int v = nd->inputs[i];
        if (v < 0 || ts_shape_numel(&p->g->values[v].shape) == d) continue;
        if (!(pc[i - 1] = xplan_const(p, v))) return TS_ERR_UNSUPPORTED;
    }
    ln_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->rows = ts_shape_numel(sh) / d;
    s->d = d;
    s->eps = (float)a->epsilon;
    s->threads = xv_threads(p);
    s->scale_in = s->bias_in = -1;
    for (int k = 0; k < 2; k++) {
        if (!pc[k]) continue;
        float *e = expand(pc[k], &norm, d);
        if (!e) return ts_error_set(err, TS_ERR_NOMEM, "out of memory expanding a LayerNormalization parameter");
        *(k ? &s->bias : &s->scale) = e;
    }
    if (xv_bind_io(p, n, st, err)) return err->code;
    /* bound inputs are X, Scale, then B when present (xv_bind_io skips absent ones) */
    if (!s->scale) s->scale_in = 1;
    if (nd->ninputs > 2 && nd->inputs[2] >= 0 && !s->bias) s->bias_in = 2;
    return TS_OK;
}

const xkernel xk_vec_layernorm = {"vec.layernorm", ln_build, ln_run, ln_free};
