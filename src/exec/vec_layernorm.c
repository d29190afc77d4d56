/* LayerNormalization (Y only) on float32: each row of D = prod(X.shape[axis:])
 * elements is normalized with a two-pass mean / variance (the row is in
 * cache for the second pass, and two passes avoid the cancellation of
 * E[x^2] - E[x]^2), then scaled and shifted in a third vector loop.
 * Scale and B must have D elements, or be constants, which are expanded
 * onto the normalized shape once at plan time. */
#include <stdlib.h>
#include "exec/half.h"
#include "exec/vec.h"
#include "ops/attrs.h"
#include "ops/list.h"

#define LN_SQ 256 /* squares rounded together (a stack array) */

typedef struct ln_state {
    int64_t rows, d;
    int64_t inner; /* decomposed form over channels: positions after the normalized axes (1: rows) */
    float eps;
    int threads;
    int scale_in, bias_in; /* step input index, or -1: use the expanded copy (or none for bias) */
    float *scale, *bias;   /* plan-time expansions of constant parameters */
    ts_dtype round;        /* half plans, written-out form: every node's output rounded to it (or TS_UNDEFINED) */
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

/* The written-out LayerNorm of a float16 / bfloat16 graph, each node's
 * output rounded to type h as the unfused nodes round it (half.c): mean,
 * d = x - mean, d^2, its mean, + eps, sqrt, d / sqrt, * gamma, + beta.
 * Division as the graph divides (not a reciprocal's product), so the
 * values equal the node-by-node plan's. */
static void ln_row_round(const float *x, float *y, int64_t d, float eps, const float *g, const float *b, ts_dtype h)
{
    float sum = 0, var = 0, sq[LN_SQ];
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < d; i++) sum += x[i];
    float mean = sum / (float)d;
    xhalf_round(h, &mean, 1);
#pragma omp simd
    for (int64_t i = 0; i < d; i++) y[i] = x[i] - mean;
    xhalf_round(h, y, (size_t)d);
    for (int64_t i0 = 0; i0 < d; i0 += LN_SQ) {
        int64_t m = d - i0 < LN_SQ ? d - i0 : LN_SQ;
#pragma omp simd
        for (int64_t i = 0; i < m; i++) sq[i] = y[i0 + i] * y[i0 + i];
        xhalf_round(h, sq, (size_t)m);
#pragma omp simd reduction(+ : var)
        for (int64_t i = 0; i < m; i++) var += sq[i];
    }
    float v[3];
    v[0] = var / (float)d;
    xhalf_round(h, v, 1);
    v[1] = v[0] + eps;
    xhalf_round(h, v + 1, 1);
    v[2] = sqrtf(v[1]);
    xhalf_round(h, v + 2, 1);
    const float sd = v[2];
#pragma omp simd
    for (int64_t i = 0; i < d; i++) y[i] = y[i] / sd;
    xhalf_round(h, y, (size_t)d);
#pragma omp simd
    for (int64_t i = 0; i < d; i++) y[i] = y[i] * g[i];
    xhalf_round(h, y, (size_t)d);
    if (b) {
#pragma omp simd
        for (int64_t i = 0; i < d; i++) y[i] = y[i] + b[i];
        xhalf_round(h, y, (size_t)d);
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
    for (int64_t r = 0; r < s->rows; r++) {
        if (s->round)
            ln_row_round(x + r * s->d, y + r * s->d, s->d, s->eps, g, b, s->round);
        else
            ln_row(x + r * s->d, y + r * s->d, s->d, s->eps, g, b);
    }
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

/* ------------------------------------------- LayerNorm written out in ops
 *
 * Exporters before opset 17 (PyTorch's LayerNorm, and every LayerNorm2d
 * that permutes channels last first) write LayerNorm as
 *   m = ReduceMean(x), d = Sub(x, m), v = ReduceMean(Pow(d, 2) or Mul(d, d)),
 *   y = Div(d, Sqrt(Add(v, eps))) [, Mul(y, gamma)] [, Add(y, beta)]
 * nine element-wise and reduction steps, five full passes over memory.
 * Taken at the first ReduceMean, the whole pattern is one pass per row (the
 * row stays in cache).  The normalized axes are the trailing ones (rows,
 * ln_row) or a block followed by others: LayerNorm over the channels of
 * NCHW as ConvNeXt-style code writes it (x.mean(1, keepdim=True)...), run
 * across the contiguous H*W positions (ln_cols).  Intermediate values must
 * be read by the pattern only; gamma and beta constants varying along the
 * normalized axes only (ConvNeXt's [C, 1, 1]).
 *
 * A lowering, made at every graph optimization level: each node's function
 * in float32, the two means summed in this step's order and d / sqrt(v +
 * eps) taken as d times its reciprocal; stated tolerance 2^-20 of the
 * largest output against the unfused steps (tests/unit/test_lowering.c;
 * a half plan rounds as each node would: test_exec_half.c).  Level all
 * rewrites the trailing-axes spelling into LayerNormalization first
 * (opt/fuse_layernorm.c); over NCHW's channels no ONNX operator spells it,
 * so this step is its only fused form (a Transpose -> LayerNormalization
 * -> Transpose rewrite would add two passes over the tensor). */

#define LN_CHUNK 256 /* positions across `inner` handled together (stack arrays) */

/* `cn` positions at x (stride `inner` between the d normalized elements). */
XV_CLONES static void ln_cols(const float *x, float *y, int64_t d, int64_t inner, int64_t cn, float eps,
                              const float *g, const float *b)
{
    float mean[LN_CHUNK], r[LN_CHUNK];
    for (int64_t i = 0; i < cn; i++) mean[i] = 0, r[i] = 0;
    for (int64_t c = 0; c < d; c++) {
        const float *xr = x + c * inner;
#pragma omp simd
        for (int64_t i = 0; i < cn; i++) mean[i] += xr[i];
    }
    for (int64_t i = 0; i < cn; i++) mean[i] /= (float)d;
    for (int64_t c = 0; c < d; c++) {
        const float *xr = x + c * inner;
#pragma omp simd
        for (int64_t i = 0; i < cn; i++) r[i] += (xr[i] - mean[i]) * (xr[i] - mean[i]);
    }
    for (int64_t i = 0; i < cn; i++) r[i] = 1.0f / sqrtf(r[i] / (float)d + eps);
    for (int64_t c = 0; c < d; c++) {
        const float *xr = x + c * inner;
        float *yr = y + c * inner;
        const float gc = g[c], bc = b ? b[c] : 0.0f;
#pragma omp simd
        for (int64_t i = 0; i < cn; i++) yr[i] = (xr[i] - mean[i]) * r[i] * gc + bc;
    }
}

static void lnd_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const ln_state *s = st->state;
    if (s->inner == 1) {
        ln_run(st, in, out, scratch);
        return;
    }
    const float *x = in[0];
    float *y = out[0];
    const int64_t nchunk = (s->inner + LN_CHUNK - 1) / LN_CHUNK, items = s->rows * nchunk;
#pragma omp parallel for schedule(static) num_threads(s->threads) \
    if (s->threads > 1 && items > 1 && s->rows * s->d * s->inner >= XV_PAR_MIN / 4)
    for (int64_t it = 0; it < items; it++) {
        int64_t o = it / nchunk, c0 = (it % nchunk) * LN_CHUNK;
        int64_t off = o * s->d * s->inner + c0;
        ln_cols(x + off, y + off, s->d, s->inner, s->inner - c0 < LN_CHUNK ? s->inner - c0 : LN_CHUNK, s->eps,
                s->scale, s->bias);
    }
}

/* The geometry of a ReduceMean that keeps its dims: x viewed as
 * [outer, d, inner] with the reduced axes in the middle (size-1 dims
 * anywhere are free); mask[k]: axis k is reduced. */
typedef struct ln_geom {
    int64_t outer, d, inner;
    bool mask[TS_MAX_RANK];
} ln_geom;

static bool mean_geom(const xplan *p, int r, ln_geom *gm)
{
    const ts_node *nd = &p->g->nodes[r];
    if (nd->op != &ts_op_reducemean || nd->noutputs != 1 || p->g->values[nd->inputs[0]].dtype != TS_F32 ||
        p->g->values[nd->outputs[0]].dtype != TS_F32) /* axes (opset 18) are int64 */
        return false;
    const ts_reduce_attrs *a = nd->attrs;
    const ts_shape *sh = &p->g->values[nd->inputs[0]].shape;
    int64_t axes[TS_MAX_RANK];
    int naxes = a->naxes;
    if (!a->keepdims || sh->rank < 1) return false;
    memcpy(axes, a->axes, sizeof axes);
    if (nd->ninputs > 1 && nd->inputs[1] >= 0) { /* opset 18: axes as an input */
        const ts_tensor *t = xplan_const(p, nd->inputs[1]);
        if (!t || t->dtype != TS_I64 || ts_tensor_numel(t) > TS_MAX_RANK) return false;
        naxes = (int)ts_tensor_numel(t);
        for (int i = 0; i < naxes; i++) axes[i] = ((const int64_t *)t->data)[i];
    }
    if (naxes <= 0) return false;
    memset(gm, 0, sizeof *gm);
    for (int i = 0; i < naxes; i++) {
        int ax;
        if (!ts_axis_norm(axes[i], sh->rank, &ax)) return false;
        gm->mask[ax] = true;
    }
    int phase = 0; /* 0: kept before, 1: reduced, 2: kept after */
    gm->outer = gm->d = gm->inner = 1;
    for (int k = 0; k < sh->rank; k++) {
        if (sh->dims[k] == 1) continue;
        if (gm->mask[k]) {
            if (phase == 2) return false;
            phase = 1;
            gm->d *= sh->dims[k];
        } else if (phase == 0) {
            gm->outer *= sh->dims[k];
        } else {
            phase = 2;
            gm->inner *= sh->dims[k];
        }
    }
    return phase > 0 && gm->d > 0 && gm->inner > 0 && gm->outer > 0;
}

/* The node reading v, when it is the only one (and v no graph output).
 * In a half plan, through half.c's refusal: lnd_build then rounds each
 * node's output (ln_row_round) or declines. */
static int only_reader(const xplan *p, int v, const ts_op_desc *op)
{
    int c = xhalf_sole_consumer(p, v);
    if (c < 0 || p->g->nodes[c].op != op || p->g->nodes[c].noutputs != 1) return -1;
    if (op == &ts_op_reducemean) return c; /* mean_geom checks its types */
    return xv_all_f32(p, c) ? c : -1;
}

static bool is_scalar(const xplan *p, int v, double want, double *got)
{
    const ts_tensor *t = xplan_const(p, v);
    if (!t || ts_tensor_numel(t) != 1 || !ts_dtype_is_float(t->dtype)) return false;
    *got = ts_tensor_get_f64(t, 0);
    return want != want || *got == want; /* NaN want: any value */
}

/* Constant operand of binary node c besides value v, broadcast onto x's
 * shape xs, varying along the normalized axes only: its d values in the
 * normalized order (new array), or NULL (*nomem set when allocation failed). */
static float *norm_param(const xplan *p, int c, int v, const ts_shape *xs, const ln_geom *gm, bool *nomem)
{
    const ts_node *nd = &p->g->nodes[c];
    if (nd->ninputs != 2) return NULL;
    int o = nd->inputs[0] == v ? nd->inputs[1] : nd->inputs[0];
    const ts_tensor *t = o != v ? xplan_const(p, o) : NULL;
    if (!t || t->dtype != TS_F32 || t->shape.rank > xs->rank) return NULL;
    int64_t st[TS_MAX_RANK];
    ts_shape_bcast_strides(&t->shape, xs, st);
    for (int k = 0; k < xs->rank; k++)
        if (!gm->mask[k] && xs->dims[k] != 1 && st[k] != 0) return NULL;
    float *out = malloc(sizeof(float) * (size_t)gm->d);
    if (!out) {
        *nomem = true;
        return NULL;
    }
    /* walk the normalized axes in row-major order */
    int64_t idx[TS_MAX_RANK] = {0}, off = 0;
    for (int64_t i = 0; i < gm->d; i++) {
        out[i] = ((const float *)t->data)[off];
        for (int k = xs->rank - 1; k >= 0; k--) {
            if (!gm->mask[k]) continue;
            off += st[k];
            if (++idx[k] < xs->dims[k]) break;
            off -= st[k] * xs->dims[k];
            idx[k] = 0;
        }
    }
    return out;
}

typedef struct ln_match {
    int nodes[10], nn;
    int x, y;
    ln_geom gm;
    float eps;
    int gamma_node, beta_node; /* the Mul / Add taken as scale / shift, or -1 */
} ln_match;

static bool ln_decomposed(const xplan *p, int n, ln_match *m)
{
    const ts_graph *g = p->g;
    memset(m, 0, sizeof *m);
    m->gamma_node = m->beta_node = -1;
    if (!mean_geom(p, n, &m->gm)) return false;
    m->x = g->nodes[n].inputs[0];
    int sub = only_reader(p, g->nodes[n].outputs[0], &ts_op_sub);
    if (sub < 0 || g->nodes[sub].inputs[0] != m->x) return false;
    int dv = g->nodes[sub].outputs[0];
    const ts_shape *xs = &g->values[m->x].shape;
    if (!ts_shape_eq(&g->values[dv].shape, xs) || xhalf_consumers(p, dv) != 2 || ts_graph_is_output(g, dv))
        return false;
    /* d's two readers: the square and the Div */
    int sq = -1, div = -1;
    for (int c = 0; c < g->nnodes; c++) {
        const ts_node *nd = &g->nodes[c];
        if (nd->dead || p->claimed[c] || nd->ninputs != 2 || nd->noutputs != 1) continue;
        bool a = nd->inputs[0] == dv, b = nd->inputs[1] == dv;
        if (!a && !b) continue;
        double e;
        if ((nd->op == &ts_op_pow && a && !b && is_scalar(p, nd->inputs[1], 2.0, &e)) ||
            (nd->op == &ts_op_mul && a && b))
            sq = c;
        else if (nd->op == &ts_op_div && a && !b)
            div = c;
        else
            return false;
    }
    if (sq < 0 || div < 0 || !xv_all_f32(p, sq) || !xv_all_f32(p, div)) return false;
    ln_geom g2;
    int var = only_reader(p, g->nodes[sq].outputs[0], &ts_op_reducemean);
    if (var < 0 || !mean_geom(p, var, &g2) || memcmp(g2.mask, m->gm.mask, sizeof g2.mask)) return false;
    int add = only_reader(p, g->nodes[var].outputs[0], &ts_op_add);
    if (add < 0) return false;
    int vv = g->nodes[var].outputs[0];
    const ts_node *an = &g->nodes[add];
    double eps;
    if (an->ninputs != 2 || !is_scalar(p, an->inputs[an->inputs[0] == vv ? 1 : 0], NAN, &eps) || eps < 0)
        return false;
    int sqrt_n = only_reader(p, an->outputs[0], &ts_op_sqrt);
    if (sqrt_n < 0 || xhalf_sole_consumer(p, g->nodes[sqrt_n].outputs[0]) != div ||
        g->nodes[div].inputs[1] != g->nodes[sqrt_n].outputs[0])
        return false;
    m->eps = (float)eps;
    int list[] = {n, sub, sq, var, add, sqrt_n, div};
    memcpy(m->nodes, list, sizeof list);
    m->nn = 7;
    m->y = g->nodes[div].outputs[0];
    return ts_shape_eq(&g->values[m->y].shape, xs);
}

static ts_status lnd_build(xplan *p, int n, xstep *st, ts_error *err)
{
    ln_match m;
    if (p->opts.no_fusion || !ln_decomposed(p, n, &m)) return TS_ERR_UNSUPPORTED;
    /* a half plan's rounding: the same for every node, rows only */
    const ts_dtype round = xhalf_node_round(p, n);
    for (int k = 1; k < m.nn; k++)
        if (xhalf_node_round(p, m.nodes[k]) != round) return TS_ERR_UNSUPPORTED;
    if (round && m.gm.inner != 1) return TS_ERR_UNSUPPORTED;
    const ts_graph *g = p->g;
    const ts_shape *xs = &g->values[m.x].shape;
    ln_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->d = m.gm.d;
    s->inner = m.gm.inner;
    s->rows = m.gm.outer;
    s->eps = m.eps;
    s->threads = xv_threads(p);
    s->scale_in = s->bias_in = -1;
    s->round = round;
    bool nomem = false;
    /* optional scale, then shift */
    int c = only_reader(p, m.y, &ts_op_mul);
    if (c >= 0 && xhalf_node_round(p, c) == round && ts_shape_eq(&g->values[g->nodes[c].outputs[0]].shape, xs) &&
        (s->scale = norm_param(p, c, m.y, xs, &m.gm, &nomem))) {
        m.nodes[m.nn++] = c;
        m.y = g->nodes[c].outputs[0];
    }
    c = nomem ? -1 : only_reader(p, m.y, &ts_op_add);
    if (c >= 0 && xhalf_node_round(p, c) == round && ts_shape_eq(&g->values[g->nodes[c].outputs[0]].shape, xs) &&
        (s->bias = norm_param(p, c, m.y, xs, &m.gm, &nomem))) {
        m.nodes[m.nn++] = c;
        m.y = g->nodes[c].outputs[0];
    }
    if (!nomem && !s->scale && (s->scale = malloc(sizeof(float) * (size_t)s->d)))
        for (int64_t i = 0; i < s->d; i++) s->scale[i] = 1.0f;
    if (nomem || !s->scale) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a LayerNorm's parameters");
    if (xstep_alloc(st, 1, 1, err)) return err->code;
    st->in[0] = xplan_plain(p, xplan_value_buf(p, m.x), err);
    if (st->in[0] < 0) return err->code ? err->code : TS_ERR_INVALID;
    for (int k = 1; k < m.nn; k++) xplan_claim(p, m.nodes[k], st);
    st->out[0] = xplan_value_buf(p, m.y);
    if (st->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    return TS_OK;
}

const xkernel xk_vec_layernorm_ops = {"vec.layernorm.ops", lnd_build, lnd_run, ln_free};

bool xv_layernorm_rounds(const xstep *s)
{
    return s->k == &xk_vec_layernorm_ops && ((const ln_state *)s->state)->round != TS_UNDEFINED;
}
