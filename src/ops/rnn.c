/* The recurrent operators RNN, GRU and LSTM (opsets 7/14), with their
 * default activations (RNN: Tanh; GRU and LSTM: Sigmoid, Tanh[, Tanh]),
 * forward, reverse or bidirectional, optional biases, initial states,
 * sequence lengths (steps past a sequence's end give zeros in Y and leave
 * its state), LSTM peepholes and input_forget, GRU linear_before_reset,
 * clip, and layout 1 (batch first).  Other activation lists are refused.
 * Reference kernel in double; gate order as ONNX gives it (GRU z r h,
 * LSTM i o f c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops/elementwise.h"

enum { K_RNN, K_GRU, K_LSTM };

typedef struct rnn_attrs {
    int kind, dirs, reverse; /* reverse: direction "reverse" (dirs 1) */
    int64_t hidden, layout, linear_before_reset, input_forget;
    double clip; /* 0: none */
} rnn_attrs;

static ts_status rnn_parse_kind(void *attrs, const ts_attr *a, int na, int kind, ts_error *err)
{
    rnn_attrs *p = attrs;
    char dir[32];
    p->kind = kind;
    if (ts_attr_get_string(a, na, "direction", "forward", dir, sizeof dir, err) ||
        ts_attr_get_int(a, na, "hidden_size", 0, &p->hidden, err) || ts_attr_get_int(a, na, "layout", 0, &p->layout, err) ||
        ts_attr_get_int(a, na, "linear_before_reset", 0, &p->linear_before_reset, err) ||
        ts_attr_get_int(a, na, "input_forget", 0, &p->input_forget, err) || ts_attr_get_float(a, na, "clip", 0, &p->clip, err))
        return err->code;
    if (!strcmp(dir, "forward")) p->dirs = 1;
    else if (!strcmp(dir, "reverse")) p->dirs = 1, p->reverse = 1;
    else if (!strcmp(dir, "bidirectional")) p->dirs = 2;
    else return ts_attr_fail(err, ts_attr_find(a, na, "direction"), "expected forward, reverse or bidirectional");
    if (p->hidden < 1) return ts_error_set(err, TS_ERR_INVALID, "attribute 'hidden_size' must be given and positive");
    if (p->layout != 0 && p->layout != 1) return ts_attr_fail(err, ts_attr_find(a, na, "layout"), "expected 0 or 1");
    if (p->clip < 0) return ts_attr_fail(err, ts_attr_find(a, na, "clip"), "must be positive");
    const ts_attr *acts = ts_attr_find(a, na, "activations");
    if (acts) return ts_attr_fail(err, acts, "only the default activations are supported");
    return TS_OK;
}

static ts_status rnn_parse(void *at, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    return rnn_parse_kind(at, a, na, K_RNN, err);
}
static ts_status gru_parse(void *at, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    return rnn_parse_kind(at, a, na, K_GRU, err);
}
static ts_status lstm_parse(void *at, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    return rnn_parse_kind(at, a, na, K_LSTM, err);
}

static int rnn_emit(const void *attrs, ts_attr *out, int max)
{
    const rnn_attrs *p = attrs;
    int n = 0;
    if (max < 6) return 0;
    out[n++] = ts_attr_string("direction", p->dirs == 2 ? "bidirectional" : p->reverse ? "reverse" : "forward");
    out[n++] = ts_attr_int("hidden_size", p->hidden);
    if (p->layout) out[n++] = ts_attr_int("layout", p->layout);
    if (p->clip > 0) out[n++] = ts_attr_float("clip", p->clip);
    if (p->kind == K_GRU && p->linear_before_reset) out[n++] = ts_attr_int("linear_before_reset", 1);
    if (p->kind == K_LSTM && p->input_forget) out[n++] = ts_attr_int("input_forget", 1);
    return n;
}

static int gates(const rnn_attrs *p) { return p->kind == K_RNN ? 1 : p->kind == K_GRU ? 3 : 4; }

static ts_status rnn_infer(ts_infer_ctx *c)
{
    const rnn_attrs *p = c->attrs;
    const ts_value *x = c->in[0], *w = c->in[1], *r = c->in[2];
    int64_t g = gates(p), h = p->hidden;
    if (!ts_dtype_is_float(x->dtype)) return ts_infer_fail(c, "X must be a float tensor");
    if (x->shape.rank != 3) return ts_infer_fail(c, "X has rank %d, expected 3", x->shape.rank);
    int64_t seq = x->shape.dims[p->layout ? 1 : 0], batch = x->shape.dims[p->layout ? 0 : 1], in = x->shape.dims[2];
    if (w->shape.rank != 3 || w->shape.dims[0] != p->dirs || w->shape.dims[1] != g * h || w->shape.dims[2] != in)
        return ts_infer_fail(c, "W must be [%d, %lld, %lld]", p->dirs, (long long)(g * h), (long long)in);
    if (r->shape.rank != 3 || r->shape.dims[0] != p->dirs || r->shape.dims[1] != g * h || r->shape.dims[2] != h)
        return ts_infer_fail(c, "R must be [%d, %lld, %lld]", p->dirs, (long long)(g * h), (long long)h);
    if (c->nin > 3 && c->in[3] && ts_shape_numel(&c->in[3]->shape) != p->dirs * 2 * g * h)
        return ts_infer_fail(c, "B must be [%d, %lld]", p->dirs, (long long)(2 * g * h));
    if (c->nin > 4 && c->in[4] && (c->in[4]->shape.rank != 1 || c->in[4]->shape.dims[0] != batch))
        return ts_infer_fail(c, "sequence_lens must have one entry per batch (%lld)", (long long)batch);
    for (int i = 5; i < c->nin && i < 7; i++)
        if (c->in[i] && ts_shape_numel(&c->in[i]->shape) != p->dirs * batch * h)
            return ts_infer_fail(c, "input %d ('%s') must hold [%d, %lld, %lld] states", i, c->in[i]->name, p->dirs,
                                 (long long)batch, (long long)h);
    if (c->nin > 7 && c->in[7] && ts_shape_numel(&c->in[7]->shape) != p->dirs * 3 * h)
        return ts_infer_fail(c, "P must be [%d, %lld]", p->dirs, (long long)(3 * h));
    if (c->nout > (p->kind == K_LSTM ? 3 : 2)) return ts_infer_fail(c, "too many outputs");
    for (int o = 0; o < c->nout; o++) {
        c->out_dtype[o] = x->dtype;
        if (o == 0)
            c->out_shape[o] = p->layout ? ts_shape_make(4, (int64_t[]){batch, seq, p->dirs, h})
                                        : ts_shape_make(4, (int64_t[]){seq, p->dirs, batch, h});
        else
            c->out_shape[o] = p->layout ? ts_shape_make(3, (int64_t[]){batch, p->dirs, h})
                                        : ts_shape_make(3, (int64_t[]){p->dirs, batch, h});
    }
    return TS_OK;
}

static double sigm(double v) { return 1 / (1 + exp(-v)); }

typedef struct rnn_ctx {
    const rnn_attrs *p;
    ts_kernel_ctx *k;
    int64_t seq, batch, in, h, g;
    double *tmp; /* 4 h scratch values */
} rnn_ctx;

static double get(const rnn_ctx *c, int i, int64_t at)
{
    const ts_tensor *t = c->k->nin > i ? c->k->in[i] : NULL;
    return t ? el_get(c->k->num, t, at) : 0;
}

static double clipped(const rnn_ctx *c, double v)
{
    double m = c->p->clip;
    return m > 0 ? fmin(fmax(v, -m), m) : v;
}

/* One direction d over the whole sequence.  hs, cs: [batch, h] states. */
static void run_dir(const rnn_ctx *c, int d, double *hs, double *cs, double *gx, double *gh)
{
    const rnn_attrs *p = c->p;
    ts_kernel_ctx *k = c->k;
    int64_t h = c->h, g = c->g, B = c->batch;
    bool back = p->reverse || d == 1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < h; j++) {
            int64_t at = p->layout ? (b * p->dirs + d) * h + j : (d * B + b) * h + j;
            hs[b * h + j] = get(c, 5, at);
            cs[b * h + j] = get(c, 6, at);
        }
    for (int64_t step = 0; step < c->seq; step++)
        for (int64_t b = 0; b < B; b++) {
            int64_t len = k->nin > 4 && k->in[4] ? ts_tensor_get_i64(k->in[4], b) : c->seq;
            int64_t t = back ? len - 1 - step : step;
            int64_t yat = -1;
            if (step < len && t >= 0) yat = p->layout ? ((b * c->seq + t) * p->dirs + d) * h : ((t * p->dirs + d) * B + b) * h;
            if (yat < 0) continue; /* past the sequence: Y stays zero, the state stays */
            double *H = hs + b * h, *C = cs + b * h;
            /* gx = W x_t + Wb + Rb (the recurrent bias is added here, except GRU's h gate with
             * linear_before_reset), gh = R H */
            for (int64_t q = 0; q < g * h; q++) {
                double sx = get(c, 3, d * 2 * g * h + q), sh = 0;
                bool rb_in_h = p->kind == K_GRU && q >= 2 * h && p->linear_before_reset;
                if (!rb_in_h) sx += get(c, 3, d * 2 * g * h + g * h + q);
                else sh = get(c, 3, d * 2 * g * h + g * h + q);
                int64_t xat = p->layout ? (b * c->seq + t) * c->in : (t * B + b) * c->in;
                for (int64_t i = 0; i < c->in; i++) sx += get(c, 1, (d * g * h + q) * c->in + i) * el_get(k->num, k->in[0], xat + i);
                gx[q] = sx;
                gh[q] = sh;
            }
            if (p->kind == K_RNN) {
                double *nh = c->tmp;
                for (int64_t j = 0; j < h; j++) {
                    double s = gx[j];
                    for (int64_t i = 0; i < h; i++) s += get(c, 2, (d * h + j) * h + i) * H[i];
                    nh[j] = tanh(clipped(c, s));
                }
                memcpy(H, nh, sizeof(double) * (size_t)h);
            } else if (p->kind == K_GRU) {
                double *z = c->tmp, *r = z + h, *nh = r + h;
                for (int64_t j = 0; j < h; j++) {
                    double sz = gx[j], sr = gx[h + j];
                    for (int64_t i = 0; i < h; i++) {
                        sz += get(c, 2, (d * 3 * h + j) * h + i) * H[i];
                        sr += get(c, 2, (d * 3 * h + h + j) * h + i) * H[i];
                    }
                    z[j] = sigm(clipped(c, sz));
                    r[j] = sigm(clipped(c, sr));
                }
                for (int64_t j = 0; j < h; j++) {
                    double rh = 0;
                    for (int64_t i = 0; i < h; i++)
                        rh += get(c, 2, (d * 3 * h + 2 * h + j) * h + i) * (p->linear_before_reset ? H[i] : r[i] * H[i]);
                    double s = p->linear_before_reset ? gx[2 * h + j] + r[j] * (rh + gh[2 * h + j]) : gx[2 * h + j] + rh;
                    nh[j] = tanh(clipped(c, s));
                }
                for (int64_t j = 0; j < h; j++) H[j] = (1 - z[j]) * nh[j] + z[j] * H[j];
            } else {
                double *gi = c->tmp, *go = gi + h, *gf = go + h, *gc = gf + h;
                for (int64_t j = 0; j < h; j++) {
                    double s[4];
                    for (int q = 0; q < 4; q++) {
                        s[q] = gx[q * h + j];
                        for (int64_t i = 0; i < h; i++) s[q] += get(c, 2, (d * 4 * h + q * h + j) * h + i) * H[i];
                    }
                    gi[j] = sigm(clipped(c, s[0] + get(c, 7, d * 3 * h + j) * C[j]));
                    gf[j] = sigm(clipped(c, s[2] + get(c, 7, d * 3 * h + 2 * h + j) * C[j]));
                    if (p->input_forget) gf[j] = 1 - gi[j];
                    gc[j] = tanh(clipped(c, s[3]));
                    go[j] = s[1]; /* the output gate's peephole reads the new cell state */
                }
                for (int64_t j = 0; j < h; j++) {
                    C[j] = gf[j] * C[j] + gi[j] * gc[j];
                    double o = sigm(clipped(c, go[j] + get(c, 7, d * 3 * h + h + j) * C[j]));
                    H[j] = o * tanh(C[j]);
                }
            }
            if (k->nout > 0 && k->out[0])
                for (int64_t j = 0; j < h; j++) el_set(k->num, k->out[0], yat + j, H[j]);
        }
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < h; j++) {
            int64_t at = p->layout ? (b * p->dirs + d) * h + j : (d * B + b) * h + j;
            if (k->nout > 1 && k->out[1]) el_set(k->num, k->out[1], at, hs[b * h + j]);
            if (k->nout > 2 && k->out[2]) el_set(k->num, k->out[2], at, cs[b * h + j]);
        }
}

static ts_status rnn_kernel(ts_kernel_ctx *k)
{
    const rnn_attrs *p = k->attrs;
    if (need_float_domain(k)) return k->err->code;
    const ts_shape *xs = &k->in[0]->shape;
    rnn_ctx c = {p, k, xs->dims[p->layout ? 1 : 0], xs->dims[p->layout ? 0 : 1], xs->dims[2], p->hidden, gates(p), NULL};
    for (int64_t b = 0; k->nin > 4 && k->in[4] && b < c.batch; b++) {
        int64_t len = ts_tensor_get_i64(k->in[4], b);
        if (len < 0 || len > c.seq)
            return ts_kernel_fail(k, TS_ERR_INVALID, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                                  (long long)len, (long long)c.seq);
    }
    double *hs = calloc((size_t)(c.batch * c.h) + 1, sizeof *hs), *cs = calloc((size_t)(c.batch * c.h) + 1, sizeof *cs);
    double *gx = calloc((size_t)(c.g * c.h) + 1, sizeof *gx), *gh = calloc((size_t)(c.g * c.h) + 1, sizeof *gh);
    c.tmp = calloc((size_t)(4 * c.h) + 1, sizeof *c.tmp);
    if (!hs || !cs || !gx || !gh || !c.tmp) {
        free(hs), free(cs), free(gx), free(gh), free(c.tmp);
        return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    }
    for (int d = 0; d < p->dirs; d++) run_dir(&c, d, hs, cs, gx, gh);
    free(hs), free(cs), free(gx), free(gh), free(c.tmp);
    return TS_OK;
}

#define RNN(NAME, MAXIN, MAXOUT) .name = NAME, .attr_size = sizeof(rnn_attrs), .min_inputs = 3, .max_inputs = MAXIN, \
                                 .min_outputs = 0, .max_outputs = MAXOUT, .emit = rnn_emit, .infer = rnn_infer, \
                                 .kernel = rnn_kernel
const ts_op_desc ts_op_rnn = {.opset_min = 7, RNN("RNN", 6, 2), .parse = rnn_parse};
const ts_op_desc ts_op_gru = {.opset_min = 7, RNN("GRU", 6, 2), .parse = gru_parse};
const ts_op_desc ts_op_lstm = {.opset_min = 7, RNN("LSTM", 8, 3), .parse = lstm_parse};
