/* Model-building helpers for the zoo: thin wrappers over the public builder
 * API that create weights (seeded, non-trivial) and name every node.  The
 * first failure is kept in the context and every later call returns -1, so
 * model code reads as a straight line without error checks. */
#ifndef TS_ZOO_ZB_H
#define TS_ZOO_ZB_H

#include <stdio.h>
#include "tsopt.h"

typedef struct zb {
    ts_graph *g;
    ts_error *err;
    uint64_t rng;
    bool weights; /* false: leave weights zero (statistics only) */
    bool failed;
    char names[16][256]; /* zb_name's rotating buffers */
    int next_name;
} zb;

/* Starts a graph (opset 17); zb_finish marks outputs and validates. */
void zb_begin(zb *b, const char *name, const ts_zoo_opts *o, ts_error *err);
ts_status zb_finish(zb *b, const int *outputs, int n, ts_graph **out);

int zb_input(zb *b, const char *name, int rank, const int64_t *dims);
/* Uniform(-bound, bound) weights of the given shape. */
int zb_weight(zb *b, const char *name, int rank, const int64_t *dims, double bound);
/* Uniform(lo, hi) constant (BatchNorm statistics and the like). */
int zb_uniform(zb *b, const char *name, int rank, const int64_t *dims, double lo, double hi);
int zb_const_ints(zb *b, const char *name, int n, const int64_t *vals);
int zb_const_scalar(zb *b, const char *name, float v);

/* Generic single-output node. */
int zb_node(zb *b, const char *op, const char *name, const int *ins, int nin, const ts_attr *attrs, int nattrs);
/* Multi-output node (Split); writes outs, returns the first output. */
int zb_node_n(zb *b, const char *op, const char *name, const int *ins, int nin, const ts_attr *attrs, int nattrs,
              int nout, int *outs);

/* Shape of a value (its rank and dims), for channel counts. */
const ts_shape *zb_shape(zb *b, int v);

/* Convolution with Kaiming-uniform weights; pads symmetric per spatial dim.
 * k, stride, pad, dil have one entry per spatial dim (2 for 2-D, 3 for 3-D,
 * taken from x's rank). */
int zb_conv_nd(zb *b, const char *name, int x, int cout, const int64_t *k, const int64_t *stride,
               const int64_t *pad, const int64_t *dil, int group, bool bias);
/* 2-D square-kernel convenience. */
int zb_conv(zb *b, const char *name, int x, int cout, int k, int stride, int pad, int group, bool bias);
/* Weight gains of the convolutions below: uniform weights within
 * sqrt(scale / fan_in).  3 is zb_conv's Kaiming-uniform bound; 6 is the ReLU
 * gain, which nets without BatchNorm need, or each ReLU layer would halve
 * the signal's power; less than 3 keeps a residual branch small relative to
 * its shortcut. */
typedef struct zb_conv_spec {
    int kh, kw;
    int stride;   /* > 0: written as a strides attribute; 0: none (stride 1) */
    int dil;      /* > 1: written as a dilations attribute */
    bool bias;
    double scale; /* weight bound sqrt(scale / fan_in) */
} zb_conv_spec;
/* 2-D convolution in the form an exporter writes a plain Conv2d: "same"
 * pads dil*(k-1)/2 and only the attributes the spec asks for.  Parameters
 * are named "<params>.weight" / "<params>.bias" (params NULL: name). */
int zb_conv_same(zb *b, const char *name, const char *params, int x, int cout, const zb_conv_spec *s);
/* ConvTranspose with weights within sqrt(scale / taps), taps being the
 * inputs that reach one output: Cin*k*k/stride^2, or Cin on a 1x1 input.
 * (The kernel's full fan-in would shrink the signal stride^2 times per
 * layer.)  output_padding is written when out_pad is not 0. */
int zb_conv_transpose(zb *b, const char *name, int x, int cout, int k, int stride, int pad, int out_pad, bool bias,
                      double scale);
/* Inference BatchNormalization with non-trivial statistics, so folding bugs show. */
int zb_bn(zb *b, const char *name, int x);
/* Same with a given epsilon (Inception and NASNet use 0.001). */
int zb_bn_eps(zb *b, const char *name, int x, double eps);
int zb_relu(zb *b, const char *name, int x);
int zb_unary(zb *b, const char *op, const char *name, int x);
int zb_binary(zb *b, const char *op, const char *name, int x, int y);
int zb_maxpool(zb *b, const char *name, int x, int k, int stride, int pad);
int zb_avgpool(zb *b, const char *name, int x, int k, int stride, int pad, bool count_include_pad);
int zb_global_avgpool(zb *b, const char *name, int x);
int zb_concat(zb *b, const char *name, const int *xs, int n, int axis);
int zb_reshape(zb *b, const char *name, int x, int rank, const int64_t *dims);
int zb_transpose(zb *b, const char *name, int x, int rank, const int64_t *perm);
int zb_softmax(zb *b, const char *name, int x, int axis);
int zb_matmul(zb *b, const char *name, int x, int y);
/* x @ W + bias over the last dim (MatMul + Add, as exporters write it). */
int zb_linear(zb *b, const char *name, int x, int out_features, bool bias);
/* Gemm with transB (classifier heads as torchvision exports them). */
int zb_gemm(zb *b, const char *name, int x, int out_features);
int zb_layernorm(zb *b, const char *name, int x, double eps);
/* 0.5 x (1 + erf(x / sqrt 2)), as exporters write GELU. */
int zb_gelu(zb *b, const char *name, int x);

/* Formats a node name into one of 16 rotating buffers: valid for the next 15
 * zb_name calls, so a block function that names many nodes after its own
 * `name` argument copies it first (ZB_KEEP). */
const char *zb_name(zb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ZB_KEEP(var, name)                                                                         \
    char var[256];                                                                                 \
    snprintf(var, sizeof var, "%s", name)

#endif
