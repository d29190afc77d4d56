/* Zoo model-building helpers (see zb.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "zoo/zb.h"

#define LIVE(b) (!(b)->failed)

void zb_begin(zb *b, const char *name, const ts_zoo_opts *o, ts_error *err)
{
    memset(b, 0, sizeof *b);
    b->g = ts_graph_new(name, 17);
    b->err = err;
    b->rng = o && o->seed ? o->seed : 0x7a0;
    b->weights = !(o && o->no_weights);
    if (!b->g) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        b->failed = true;
    }
}

ts_status zb_finish(zb *b, const int *outputs, int n, ts_graph **out)
{
    *out = NULL;
    for (int i = 0; i < n && LIVE(b); i++)
        if (outputs[i] < 0 || ts_graph_add_output(b->g, outputs[i], b->err)) b->failed = true;
    if (LIVE(b) && ts_graph_validate(b->g, b->err)) b->failed = true;
    if (b->failed) {
        ts_graph_free(b->g);
        return b->err->code ? b->err->code : TS_ERR_INVALID;
    }
    *out = b->g;
    return TS_OK;
}

const char *zb_name(zb *b, const char *fmt, ...)
{
    char *buf = b->names[b->next_name++ % 16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof b->names[0], fmt, ap);
    va_end(ap);
    return buf;
}

static int fail_if(zb *b, int v)
{
    if (v < 0) b->failed = true;
    return v;
}

int zb_input(zb *b, const char *name, int rank, const int64_t *dims)
{
    if (!LIVE(b)) return -1;
    ts_shape s = ts_shape_make(rank, dims);
    return fail_if(b, ts_graph_add_input(b->g, name, TS_F32, &s, b->err));
}

static int add_tensor(zb *b, const char *name, ts_dtype dt, int rank, const int64_t *dims, double lo, double hi)
{
    if (!LIVE(b)) return -1;
    ts_shape s = ts_shape_make(rank, dims);
    ts_tensor *t = ts_tensor_new(dt, &s, b->err);
    if (!t) return fail_if(b, -1);
    if (b->weights) ts_tensor_fill_random(t, &b->rng, lo, hi);
    int v = ts_graph_add_constant(b->g, name, t, b->err);
    ts_tensor_unref(t);
    return fail_if(b, v);
}

int zb_weight(zb *b, const char *name, int rank, const int64_t *dims, double bound)
{
    return add_tensor(b, name, TS_F32, rank, dims, -bound, bound);
}

int zb_uniform(zb *b, const char *name, int rank, const int64_t *dims, double lo, double hi)
{
    return add_tensor(b, name, TS_F32, rank, dims, lo, hi);
}

int zb_const_ints(zb *b, const char *name, int n, const int64_t *vals)
{
    if (!LIVE(b)) return -1;
    int64_t d = n;
    ts_shape s = ts_shape_make(1, &d);
    ts_tensor *t = ts_tensor_new(TS_I64, &s, b->err);
    if (!t) return fail_if(b, -1);
    memcpy(t->data, vals, sizeof(int64_t) * (size_t)n);
    int v = ts_graph_add_constant(b->g, name, t, b->err);
    ts_tensor_unref(t);
    return fail_if(b, v);
}

int zb_const_scalar(zb *b, const char *name, float val)
{
    if (!LIVE(b)) return -1;
    ts_shape s = {.rank = 0};
    ts_tensor *t = ts_tensor_new(TS_F32, &s, b->err);
    if (!t) return fail_if(b, -1);
    *(float *)t->data = val;
    int v = ts_graph_add_constant(b->g, name, t, b->err);
    ts_tensor_unref(t);
    return fail_if(b, v);
}

int zb_node_n(zb *b, const char *op, const char *name, const int *ins, int nin, const ts_attr *attrs, int nattrs,
              int nout, int *outs)
{
    if (!LIVE(b)) return -1;
    for (int i = 0; i < nin; i++)
        if (ins[i] < -1) return fail_if(b, -1);
    char oname[300];
    const char *onames[1] = {oname};
    if (nout == 1) snprintf(oname, sizeof oname, "%s", name); /* value named like its node */
    if (ts_graph_add_node(b->g, op, name, ins, nin, attrs, nattrs, nout, nout == 1 ? onames : NULL, outs, b->err) < 0)
        return fail_if(b, -1);
    return outs[0];
}

int zb_node(zb *b, const char *op, const char *name, const int *ins, int nin, const ts_attr *attrs, int nattrs)
{
    int out = -1;
    return zb_node_n(b, op, name, ins, nin, attrs, nattrs, 1, &out);
}

const ts_shape *zb_shape(zb *b, int v)
{
    static const ts_shape none = {0};
    return LIVE(b) && v >= 0 ? &b->g->values[v].shape : &none;
}

int zb_conv_nd(zb *b, const char *name, int x, int cout, const int64_t *k, const int64_t *stride, const int64_t *pad,
               const int64_t *dil, int group, bool bias)
{
    if (!LIVE(b) || x < 0) return fail_if(b, -1);
    const ts_shape *xs = zb_shape(b, x);
    int sp = xs->rank - 2;
    int64_t wd[2 + 3] = {cout, xs->dims[1] / group};
    int64_t fan_in = wd[1], pads[6];
    for (int i = 0; i < sp; i++) {
        wd[2 + i] = k[i];
        fan_in *= k[i];
        pads[i] = pads[sp + i] = pad[i];
    }
    char wn[300];
    snprintf(wn, sizeof wn, "%s.weight", name);
    int ins[3] = {x, zb_weight(b, wn, 2 + sp, wd, sqrt(3.0 / (double)fan_in)), -1};
    int nin = 2;
    if (bias) {
        int64_t c = cout;
        snprintf(wn, sizeof wn, "%s.bias", name);
        ins[nin++] = zb_uniform(b, wn, 1, &c, -0.1, 0.1);
    }
    int64_t ones[3] = {1, 1, 1};
    ts_attr a[5] = {ts_attr_ints("kernel_shape", k, sp), ts_attr_ints("strides", stride ? stride : ones, sp),
                    ts_attr_ints("pads", pads, 2 * sp), ts_attr_ints("dilations", dil ? dil : ones, sp),
                    ts_attr_int("group", group)};
    return zb_node(b, "Conv", name, ins, nin, a, 5);
}

int zb_conv(zb *b, const char *name, int x, int cout, int k, int stride, int pad, int group, bool bias)
{
    int64_t kk[2] = {k, k}, ss[2] = {stride, stride}, pp[2] = {pad, pad};
    return zb_conv_nd(b, name, x, cout, kk, ss, pp, NULL, group, bias);
}

int zb_conv_same(zb *b, const char *name, const char *params, int x, int cout, const zb_conv_spec *s)
{
    if (!LIVE(b) || x < 0) return fail_if(b, -1);
    if (!params) params = name;
    int64_t cin = zb_shape(b, x)->dims[1], wd[4] = {cout, cin, s->kh, s->kw}, c = cout;
    int64_t kk[2] = {s->kh, s->kw}, ss[2] = {s->stride, s->stride}, dd[2] = {s->dil, s->dil};
    int64_t dil = s->dil > 1 ? s->dil : 1;
    int64_t pp[4] = {dil * (s->kh - 1) / 2, dil * (s->kw - 1) / 2, dil * (s->kh - 1) / 2, dil * (s->kw - 1) / 2};
    char wn[300];
    snprintf(wn, sizeof wn, "%s.weight", params);
    int ins[3] = {x, zb_weight(b, wn, 4, wd, sqrt(s->scale / (double)(cin * s->kh * s->kw))), -1};
    if (s->bias) {
        snprintf(wn, sizeof wn, "%s.bias", params);
        ins[2] = zb_uniform(b, wn, 1, &c, -0.1, 0.1);
    }
    ts_attr a[4];
    int na = 0;
    a[na++] = ts_attr_ints("kernel_shape", kk, 2);
    if (s->stride > 0) a[na++] = ts_attr_ints("strides", ss, 2);
    a[na++] = ts_attr_ints("pads", pp, 4);
    if (s->dil > 1) a[na++] = ts_attr_ints("dilations", dd, 2);
    return zb_node(b, "Conv", name, ins, s->bias ? 3 : 2, a, na);
}

int zb_conv_transpose(zb *b, const char *name, int x, int cout, int k, int stride, int pad, int out_pad, bool bias,
                      double scale)
{
    if (!LIVE(b) || x < 0) return fail_if(b, -1);
    const ts_shape *xs = zb_shape(b, x);
    int64_t cin = xs->dims[1], wd[4] = {cin, cout, k, k};
    double taps = xs->dims[2] == 1 && xs->dims[3] == 1 ? (double)cin : (double)(cin * k * k) / (stride * stride);
    char wn[300];
    snprintf(wn, sizeof wn, "%s.weight", name);
    int ins[3] = {x, zb_weight(b, wn, 4, wd, sqrt(scale / taps)), -1};
    int nin = 2;
    if (bias) {
        int64_t c = cout;
        snprintf(wn, sizeof wn, "%s.bias", name);
        ins[nin++] = zb_uniform(b, wn, 1, &c, -0.1, 0.1);
    }
    int64_t kk[2] = {k, k}, ss[2] = {stride, stride}, pp[4] = {pad, pad, pad, pad}, op[2] = {out_pad, out_pad};
    ts_attr a[4] = {ts_attr_ints("kernel_shape", kk, 2), ts_attr_ints("strides", ss, 2), ts_attr_ints("pads", pp, 4),
                    ts_attr_ints("output_padding", op, 2)};
    return zb_node(b, "ConvTranspose", name, ins, nin, a, out_pad ? 4 : 3);
}

int zb_bn_eps(zb *b, const char *name, int x, double eps)
{
    if (!LIVE(b) || x < 0) return fail_if(b, -1);
    int64_t c = zb_shape(b, x)->dims[1];
    int ins[5] = {x, zb_uniform(b, zb_name(b, "%s.weight", name), 1, &c, 0.5, 1.5),
                  zb_uniform(b, zb_name(b, "%s.bias", name), 1, &c, -0.2, 0.2),
                  zb_uniform(b, zb_name(b, "%s.running_mean", name), 1, &c, -0.2, 0.2),
                  zb_uniform(b, zb_name(b, "%s.running_var", name), 1, &c, 0.5, 1.5)};
    ts_attr a[1] = {ts_attr_float("epsilon", eps)};
    return zb_node(b, "BatchNormalization", name, ins, 5, a, 1);
}

int zb_bn(zb *b, const char *name, int x) { return zb_bn_eps(b, name, x, 1e-5); }

int zb_unary(zb *b, const char *op, const char *name, int x) { return zb_node(b, op, name, &x, 1, NULL, 0); }
int zb_relu(zb *b, const char *name, int x) { return zb_unary(b, "Relu", name, x); }

int zb_binary(zb *b, const char *op, const char *name, int x, int y)
{
    int ins[2] = {x, y};
    return zb_node(b, op, name, ins, 2, NULL, 0);
}

int zb_maxpool(zb *b, const char *name, int x, int k, int stride, int pad)
{
    int64_t kk[2] = {k, k}, ss[2] = {stride, stride}, pp[4] = {pad, pad, pad, pad};
    ts_attr a[3] = {ts_attr_ints("kernel_shape", kk, 2), ts_attr_ints("strides", ss, 2), ts_attr_ints("pads", pp, 4)};
    return zb_node(b, "MaxPool", name, &x, 1, a, 3);
}

int zb_avgpool(zb *b, const char *name, int x, int k, int stride, int pad, bool count_include_pad)
{
    int64_t kk[2] = {k, k}, ss[2] = {stride, stride}, pp[4] = {pad, pad, pad, pad};
    ts_attr a[4] = {ts_attr_ints("kernel_shape", kk, 2), ts_attr_ints("strides", ss, 2), ts_attr_ints("pads", pp, 4),
                    ts_attr_int("count_include_pad", count_include_pad)};
    return zb_node(b, "AveragePool", name, &x, 1, a, 4);
}

int zb_global_avgpool(zb *b, const char *name, int x) { return zb_unary(b, "GlobalAveragePool", name, x); }

int zb_concat(zb *b, const char *name, const int *xs, int n, int axis)
{
    ts_attr a[1] = {ts_attr_int("axis", axis)};
    return zb_node(b, "Concat", name, xs, n, a, 1);
}

int zb_reshape(zb *b, const char *name, int x, int rank, const int64_t *dims)
{
    int ins[2] = {x, zb_const_ints(b, zb_name(b, "%s.shape", name), rank, dims)};
    return zb_node(b, "Reshape", name, ins, 2, NULL, 0);
}

int zb_transpose(zb *b, const char *name, int x, int rank, const int64_t *perm)
{
    ts_attr a[1] = {ts_attr_ints("perm", perm, rank)};
    return zb_node(b, "Transpose", name, &x, 1, a, 1);
}

int zb_softmax(zb *b, const char *name, int x, int axis)
{
    ts_attr a[1] = {ts_attr_int("axis", axis)};
    return zb_node(b, "Softmax", name, &x, 1, a, 1);
}

int zb_matmul(zb *b, const char *name, int x, int y) { return zb_binary(b, "MatMul", name, x, y); }

int zb_linear(zb *b, const char *name, int x, int out_features, bool bias)
{
    if (!LIVE(b) || x < 0) return fail_if(b, -1);
    const ts_shape *xs = zb_shape(b, x);
    int64_t in = xs->dims[xs->rank - 1], wd[2] = {in, out_features}, bd = out_features;
    int w = zb_weight(b, zb_name(b, "%s.weight", name), 2, wd, sqrt(3.0 / (double)in));
    int y = zb_matmul(b, bias ? zb_name(b, "%s.matmul", name) : name, x, w);
    if (!bias) return y;
    return zb_binary(b, "Add", name, y, zb_uniform(b, zb_name(b, "%s.bias", name), 1, &bd, -0.1, 0.1));
}

int zb_gemm(zb *b, const char *name, int x, int out_features)
{
    if (!LIVE(b) || x < 0) return fail_if(b, -1);
    int64_t in = zb_shape(b, x)->dims[1], wd[2] = {out_features, in}, bd = out_features;
    int ins[3] = {x, zb_weight(b, zb_name(b, "%s.weight", name), 2, wd, sqrt(3.0 / (double)in)),
                  zb_uniform(b, zb_name(b, "%s.bias", name), 1, &bd, -0.1, 0.1)};
    ts_attr a[1] = {ts_attr_int("transB", 1)};
    return zb_node(b, "Gemm", name, ins, 3, a, 1);
}

int zb_layernorm(zb *b, const char *name, int x, double eps)
{
    if (!LIVE(b) || x < 0) return fail_if(b, -1);
    const ts_shape *xs = zb_shape(b, x);
    int64_t c = xs->dims[xs->rank - 1];
    int ins[3] = {x, zb_uniform(b, zb_name(b, "%s.weight", name), 1, &c, 0.5, 1.5),
                  zb_uniform(b, zb_name(b, "%s.bias", name), 1, &c, -0.2, 0.2)};
    ts_attr a[2] = {ts_attr_int("axis", -1), ts_attr_float("epsilon", eps)};
    return zb_node(b, "LayerNormalization", name, ins, 3, a, 2);
}

int zb_gelu(zb *b, const char *name, int x)
{
    int d = zb_binary(b, "Div", zb_name(b, "%s.div", name), x, zb_const_scalar(b, zb_name(b, "%s.sqrt2", name), (float)M_SQRT2));
    int e = zb_unary(b, "Erf", zb_name(b, "%s.erf", name), d);
    int p = zb_binary(b, "Add", zb_name(b, "%s.add", name), e, zb_const_scalar(b, zb_name(b, "%s.one", name), 1.0f));
    int m = zb_binary(b, "Mul", zb_name(b, "%s.mul", name), x, p);
    return zb_binary(b, "Mul", name, m, zb_const_scalar(b, zb_name(b, "%s.half", name), 0.5f));
}
