/* NASNet-A Mobile (4 @ 1056), the TASO paper's NasNet-A: the normal and
 * reduction cells of Zoph et al. 2018, "Learning Transferable Architectures
 * for Scalable Image Recognition", laid out as the widely used PyTorch port
 * (Cadene's pretrainedmodels nasnetamobile), which is what users export.
 *
 *   conv0 3x3/2 (32) + BN -> cell_stem_0 -> cell_stem_1
 *   3 stages of N cells (a "first" cell, then N-1 normal cells), with a
 *   reduction cell between stages; filters 44, 88, 176 (penultimate
 *   filters 1056 = 24 * 44); ReLU, global average pool, Gemm.
 *
 * Every cell takes the two previous cells' outputs.  Its five blocks each
 * add two operations (separable convolutions, 3x3 pooling, identity) and
 * the unused block outputs are concatenated.  A separable branch is
 * ReLU, depthwise + pointwise conv, BN, ReLU, depthwise + pointwise, BN.
 * BatchNorm eps is 0.001 throughout, as in the port.  ts_zoo_opts.layers
 * sets N (default 4). */
#include <stdint.h>
#include "zoo/zb.h"
#include "zoo/zoo.h"

#define BN_EPS 1e-3

/* nn.ZeroPad2d((left, right, top, bottom)) as ONNX Pad (opset >= 11 takes
 * pads as an input: begins of every axis, then ends). */
static int zero_pad(zb *b, const char *name_, int x, int left, int right, int top, int bottom)
{
    ZB_KEEP(name, name_);
    int64_t pads[8] = {0, 0, top, left, 0, 0, bottom, right};
    int ins[2] = {x, zb_const_ints(b, zb_name(b, "%s.pads", name), 8, pads)};
    return zb_node(b, "Pad", name, ins, 2, NULL, 0);
}

/* x[:, :, 1:, 1:] as the exporter writes it: Slice with INT64_MAX ends. */
static int drop_first(zb *b, const char *name_, int x)
{
    ZB_KEEP(name, name_);
    int64_t st[2] = {1, 1}, en[2] = {INT64_MAX, INT64_MAX}, ax[2] = {2, 3};
    int ins[4] = {x, zb_const_ints(b, zb_name(b, "%s.starts", name), 2, st),
                  zb_const_ints(b, zb_name(b, "%s.ends", name), 2, en),
                  zb_const_ints(b, zb_name(b, "%s.axes", name), 2, ax)};
    return zb_node(b, "Slice", name, ins, 4, NULL, 0);
}

/* ReLU, 1x1 conv, BN: how every cell adapts its inputs' channel counts. */
static int relu_conv_bn(zb *b, const char *name_, int x, int cout)
{
    ZB_KEEP(name, name_);
    x = zb_relu(b, zb_name(b, "%s.relu", name), x);
    x = zb_conv(b, zb_name(b, "%s.conv", name), x, cout, 1, 1, 0, 1, false);
    return zb_bn_eps(b, zb_name(b, "%s.bn", name), x, BN_EPS);
}

/* Depthwise k x k conv (group = channels) then pointwise 1x1. */
static int sep_conv(zb *b, const char *name_, int x, int cout, int k, int stride)
{
    ZB_KEEP(name, name_);
    int cin = (int)zb_shape(b, x)->dims[1];
    x = zb_conv(b, zb_name(b, "%s.depthwise", name), x, cin, k, stride, k / 2, cin, false);
    return zb_conv(b, zb_name(b, "%s.pointwise", name), x, cout, 1, 1, 0, 1, false);
}

enum {
    SEP_PLAIN,   /* first separable keeps the input's channels */
    SEP_STEM,    /* cell_stem_0: first separable already maps to cout */
    SEP_SHIFTED, /* reduction_cell_0: TF "SAME" padding on even sizes,
                    emulated with a top-left zero row/column that the
                    first separable's output then drops */
};

static int branch_sep(zb *b, const char *name_, int x, int cout, int k, int stride, int mode)
{
    ZB_KEEP(name, name_);
    int mid = mode == SEP_STEM ? cout : (int)zb_shape(b, x)->dims[1];
    x = zb_relu(b, zb_name(b, "%s.relu", name), x);
    if (mode == SEP_SHIFTED) x = zero_pad(b, zb_name(b, "%s.pad", name), x, 1, 0, 1, 0);
    x = sep_conv(b, zb_name(b, "%s.separable_1", name), x, mid, k, stride);
    if (mode == SEP_SHIFTED) x = drop_first(b, zb_name(b, "%s.crop", name), x);
    x = zb_bn_eps(b, zb_name(b, "%s.bn_sep_1", name), x, BN_EPS);
    x = zb_relu(b, zb_name(b, "%s.relu1", name), x);
    x = sep_conv(b, zb_name(b, "%s.separable_2", name), x, cout, k, 1);
    return zb_bn_eps(b, zb_name(b, "%s.bn_sep_2", name), x, BN_EPS);
}

/* 3x3 stride-2 pooling, shifted like SEP_SHIFTED when asked (MaxPoolPad and
 * AvgPoolPad in the port).  Average pooling excludes the padding. */
static int pool_s2(zb *b, const char *name_, int x, bool is_max, bool shifted)
{
    ZB_KEEP(name, name_);
    if (shifted) x = zero_pad(b, zb_name(b, "%s.pad", name), x, 1, 0, 1, 0);
    x = is_max ? zb_maxpool(b, zb_name(b, "%s.pool", name), x, 3, 2, 1)
               : zb_avgpool(b, zb_name(b, "%s.pool", name), x, 3, 2, 1, false);
    return shifted ? drop_first(b, zb_name(b, "%s.crop", name), x) : x;
}

static int avg3(zb *b, const char *name, int x) { return zb_avgpool(b, name, x, 3, 1, 1, false); }

static int add(zb *b, const char *name, int x, int y) { return zb_binary(b, "Add", name, x, y); }

/* The "adjust" path for a previous output at twice the resolution:
 * factorized reduction.  Two stride-2 subsamplings (1x1 average pools),
 * the second shifted by one pixel (zero pad right/bottom, drop the first
 * row and column), each through a 1x1 conv to cout/2, concatenated, BN. */
static int factorized_reduce(zb *b, const char *name_, int x, int cout)
{
    ZB_KEEP(name, name_);
    x = zb_relu(b, zb_name(b, "%s.relu", name), x);
    int p[2];
    int t = zb_avgpool(b, zb_name(b, "%s.path_1.avgpool", name), x, 1, 2, 0, false);
    p[0] = zb_conv(b, zb_name(b, "%s.path_1.conv", name), t, cout / 2, 1, 1, 0, 1, false);
    t = zero_pad(b, zb_name(b, "%s.path_2.pad", name), x, 0, 1, 0, 1);
    t = drop_first(b, zb_name(b, "%s.path_2.crop", name), t);
    t = zb_avgpool(b, zb_name(b, "%s.path_2.avgpool", name), t, 1, 2, 0, false);
    p[1] = zb_conv(b, zb_name(b, "%s.path_2.conv", name), t, cout / 2, 1, 1, 0, 1, false);
    t = zb_concat(b, zb_name(b, "%s.concat", name), p, 2, 1);
    return zb_bn_eps(b, zb_name(b, "%s.final_path_bn", name), t, BN_EPS);
}

/* Reduction-cell body shared by the two stem cells and the two reduction
 * cells: p feeds the pooling ops (and the 5x5 separable of block 0), q the
 * other separables; all stride 2 except block 3/4's second-level ops.
 * q_mode is SEP_STEM in cell_stem_0 (q is the 32-channel stem), otherwise
 * the same as the p-side separables'. */
static int reduction_body(zb *b, const char *name_, int p, int q, int filters, int p_mode, int q_mode)
{
    ZB_KEEP(name, name_);
    bool sh = p_mode == SEP_SHIFTED;
    int c[5];
    c[0] = add(b, zb_name(b, "%s.comb_iter_0", name),
               branch_sep(b, zb_name(b, "%s.comb_iter_0_left", name), p, filters, 5, 2, p_mode),
               branch_sep(b, zb_name(b, "%s.comb_iter_0_right", name), q, filters, 7, 2, q_mode));
    c[1] = add(b, zb_name(b, "%s.comb_iter_1", name), pool_s2(b, zb_name(b, "%s.comb_iter_1_left", name), p, true, sh),
               branch_sep(b, zb_name(b, "%s.comb_iter_1_right", name), q, filters, 7, 2, q_mode));
    c[2] = add(b, zb_name(b, "%s.comb_iter_2", name), pool_s2(b, zb_name(b, "%s.comb_iter_2_left", name), p, false, sh),
               branch_sep(b, zb_name(b, "%s.comb_iter_2_right", name), q, filters, 5, 2, q_mode));
    c[3] = add(b, zb_name(b, "%s.comb_iter_3", name), avg3(b, zb_name(b, "%s.comb_iter_3_right", name), c[0]), c[1]);
    c[4] = add(b, zb_name(b, "%s.comb_iter_4", name),
               branch_sep(b, zb_name(b, "%s.comb_iter_4_left", name), c[0], filters, 3, 1, p_mode),
               pool_s2(b, zb_name(b, "%s.comb_iter_4_right", name), p, true, sh));
    return zb_concat(b, zb_name(b, "%s.concat", name), c + 1, 4, 1);
}

/* Normal-cell body (first and normal cells): left is the adapted previous
 * output, right the adapted current one, both `filters` channels. */
static int normal_body(zb *b, const char *name_, int left, int right, int filters)
{
    ZB_KEEP(name, name_);
    int c[6] = {left};
    c[1] = add(b, zb_name(b, "%s.comb_iter_0", name),
               branch_sep(b, zb_name(b, "%s.comb_iter_0_left", name), right, filters, 5, 1, SEP_PLAIN),
               branch_sep(b, zb_name(b, "%s.comb_iter_0_right", name), left, filters, 3, 1, SEP_PLAIN));
    c[2] = add(b, zb_name(b, "%s.comb_iter_1", name),
               branch_sep(b, zb_name(b, "%s.comb_iter_1_left", name), left, filters, 5, 1, SEP_PLAIN),
               branch_sep(b, zb_name(b, "%s.comb_iter_1_right", name), left, filters, 3, 1, SEP_PLAIN));
    c[3] = add(b, zb_name(b, "%s.comb_iter_2", name), avg3(b, zb_name(b, "%s.comb_iter_2_left", name), right), left);
    c[4] = add(b, zb_name(b, "%s.comb_iter_3", name), avg3(b, zb_name(b, "%s.comb_iter_3_left", name), left),
               avg3(b, zb_name(b, "%s.comb_iter_3_right", name), left));
    c[5] = add(b, zb_name(b, "%s.comb_iter_4", name),
               branch_sep(b, zb_name(b, "%s.comb_iter_4_left", name), right, filters, 3, 1, SEP_PLAIN), right);
    return zb_concat(b, zb_name(b, "%s.concat", name), c, 6, 1);
}

/* x: the previous cell's output; prev: the one before.  A first cell
 * follows a reduction, so prev is at twice x's resolution. */
static int first_cell(zb *b, const char *name_, int x, int prev, int filters)
{
    ZB_KEEP(name, name_);
    int left = factorized_reduce(b, zb_name(b, "%s.adjust", name), prev, filters);
    int right = relu_conv_bn(b, zb_name(b, "%s.conv_1x1", name), x, filters);
    return normal_body(b, name, left, right, filters);
}

static int normal_cell(zb *b, const char *name_, int x, int prev, int filters)
{
    ZB_KEEP(name, name_);
    int left = relu_conv_bn(b, zb_name(b, "%s.conv_prev_1x1", name), prev, filters);
    int right = relu_conv_bn(b, zb_name(b, "%s.conv_1x1", name), x, filters);
    return normal_body(b, name, left, right, filters);
}

static int reduction_cell(zb *b, const char *name_, int x, int prev, int filters, bool shifted)
{
    ZB_KEEP(name, name_);
    int left = relu_conv_bn(b, zb_name(b, "%s.conv_prev_1x1", name), prev, filters);
    int right = relu_conv_bn(b, zb_name(b, "%s.conv_1x1", name), x, filters);
    int mode = shifted ? SEP_SHIFTED : SEP_PLAIN;
    return reduction_body(b, name, right, left, filters, mode, mode);
}

ZOO_BUILDER(ts_zoo_nasnet_a)
{
    enum { STEM = 32, PENULTIMATE = 1056 };
    const int f = PENULTIMATE / 24; /* 44: the first stage's cell filters */
    const int n = o && o->layers > 0 ? o->layers : 4;
    zb b;
    zb_begin(&b, "nasnet_a", o, err);
    int64_t in_dims[4] = {zoo_batch(o), 3, 224, 224};
    int x = zb_input(&b, "input", 4, in_dims);
    int conv0 = zb_bn_eps(&b, "conv0.bn", zb_conv(&b, "conv0.conv", x, STEM, 3, 2, 0, 1, false), BN_EPS); /* 111 */

    /* cell_stem_0 (56x56, 4 * f/4 channels) works on conv0 directly. */
    int x1 = relu_conv_bn(&b, "cell_stem_0.conv_1x1", conv0, f / 4);
    int stem0 = reduction_body(&b, "cell_stem_0", x1, conv0, f / 4, SEP_PLAIN, SEP_STEM);
    /* cell_stem_1 (28x28, 4 * f/2): conv0 reaches it through the adjust path. */
    int left = relu_conv_bn(&b, "cell_stem_1.conv_1x1", stem0, f / 2);
    int right = factorized_reduce(&b, "cell_stem_1.adjust", conv0, f / 2);
    int stem1 = reduction_body(&b, "cell_stem_1", left, right, f / 2, SEP_PLAIN, SEP_PLAIN);

    int prev = stem0, cur = stem1;
    for (int s = 0; s < 3; s++) {
        int filters = f << s;
        if (s > 0) {
            /* Only the first reduction cell uses the shifted ops, as in the
             * port (the second one's plain padding is what its weights were
             * converted for). */
            int r = reduction_cell(&b, zb_name(&b, "reduction_cell_%d", s - 1), cur, prev, filters, s == 1);
            prev = cur;
            cur = r;
        }
        for (int i = 0; i < n; i++) {
            const char *name = zb_name(&b, "stage%d.cell%d", s, i);
            int c = i == 0 ? first_cell(&b, name, cur, prev, filters) : normal_cell(&b, name, cur, prev, filters);
            prev = cur;
            cur = c;
        }
    }
    x = zb_relu(&b, "relu", cur);
    x = zb_global_avgpool(&b, "avgpool", x);
    int64_t flat[2] = {zoo_batch(o), zb_shape(&b, x)->dims[1]};
    x = zb_reshape(&b, "flatten", x, 2, flat);
    int y = zb_gemm(&b, "last_linear", x, 1000);
    return zb_finish(&b, &y, 1, out);
}
