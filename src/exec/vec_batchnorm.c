/* BatchNormalization (inference) that no convolution absorbed, e.g. after
 * a Concat (NASNet's factorized reductions) or a Slice: one pass
 * y = x * a[c] + b[c], a and b folded once at plan time from the constant
 * scale, bias, mean and variance.  A dense permuted input (channels-last
 * from a conv) is read in place and the result keeps its layout; with the
 * channels innermost a pixel's channels are one vector loop. */
#include <math.h>
#include <stdlib.h>
#include "exec/vec.h"
#include "exec/vec_layout.h"
#include "ops/attrs.h"

typedef struct bn_state {
    int64_t outer, C, inner, bytes;
    int threads;
    float *a, *b; /* C each, one allocation */
} bn_state;

static void bn_free(void *p)
{
    bn_state *s = p;
    if (s) free(s->a);
    free(s);
}

XV_CLONES static void bn_block(const float *x, float *y, const float *a, const float *b, int64_t C, int64_t inner)
{
    if (inner == 1) {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) y[c] = x[c] * a[c] + b[c];
        return;
    }
    for (int64_t c = 0; c < C; c++) {
        const float ac = a[c], bc = b[c];
        const float *xc = x + c * inner;
        float *yc = y + c * inner;
#pragma omp simd
        for (int64_t i = 0; i < inner; i++) yc[i] = xc[i] * ac + bc;
    }
}

static void bn_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const bn_state *s = st->state;
    const float *x = in[0];
    float *y = out[0];
    const int64_t blk = s->C * s->inner;
    (void)scratch;
#pragma omp parallel for schedule(static) num_threads(s->threads) if (s->threads > 1 && s->bytes >= 4 * XV_PAR_MIN)
    for (int64_t o = 0; o < s->outer; o++) bn_block(x + o * blk, y + o * blk, s->a, s->b, s->C, s->inner);
}

static ts_status bn_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    const ts_batchnorm_attrs *a = nd->attrs;
    const ts_value *x = &g->values[nd->inputs[0]];
    if (a->training_mode || nd->noutputs != 1 || nd->ninputs != 5 || !xv_all_f32(p, n) || x->shape.rank < 2)
        return TS_ERR_UNSUPPORTED;
    const int64_t C = x->shape.dims[1];
    const ts_tensor *par[4];
    for (int i = 0; i < 4; i++) {
        par[i] = xplan_const(p, nd->inputs[1 + i]);
        if (!par[i] || ts_tensor_numel(par[i]) != C) return TS_ERR_UNSUPPORTED; /* per-activation form: ref */
    }
    int xb = xplan_value_buf(p, nd->inputs[0]), order[TS_MAX_RANK];
    if (xb < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    bool graph_out = false;
    for (int i = 0; i < g->noutputs; i++) graph_out |= g->outputs[i] == nd->outputs[0];
    if (graph_out || !xbuf_dense_order(&p->bufs[xb], order)) {
        for (int k = 0; k < x->shape.rank; k++) order[k] = k;
        if ((xb = xplan_plain(p, xb, err)) < 0) return err->code ? err->code : TS_ERR_INVALID;
    }
    bn_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    if (!(s->a = malloc(sizeof(float) * 2 * (size_t)(C ? C : 1))))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    s->b = s->a + C;
    for (int64_t c = 0; c < C; c++) {
        double sc = ((const float *)par[0]->data)[c], bias = ((const float *)par[1]->data)[c];
        double mean = ((const float *)par[2]->data)[c], var = ((const float *)par[3]->data)[c];
        double m = sc / sqrt(var + a->epsilon);
        s->a[c] = (float)m;
        s->b[c] = (float)(bias - mean * m);
    }
    /* physical view: outer dims, the channel axis, inner dims */
    s->outer = s->inner = 1;
    s->C = C;
    bool before = true;
    for (int k = 0; k < x->shape.rank; k++) {
        int d = order[k];
        if (d == 1)
            before = false;
        else if (before)
            s->outer *= x->shape.dims[d];
        else
            s->inner *= x->shape.dims[d];
    }
    s->bytes = ts_shape_numel(&x->shape) * 4;
    s->threads = xv_threads(p);
    return xv_step_unary(p, n, st, xb, order, err);
}

const xkernel xk_vec_batchnorm = {"vec.batchnorm", bn_build, bn_run, bn_free};
