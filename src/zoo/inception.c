/* Inception-v3, laid out as torchvision's inception_v3 (aux logits off,
 * transform_input off) so the exported graph matches what users bring:
 * every convolution is BasicConv2d (conv without bias, BatchNorm eps 0.001,
 * ReLU); the stem, Mixed_5b..5d (InceptionA), 6a (B), 6b..6e (C, 7x7
 * factorized into 1x7 and 7x1), 7a (D), 7b/7c (E, parallel 1x3/3x1),
 * global average pool, Gemm.  Dropout is the identity at inference and is
 * left out, as exporters do. */
#include "zoo/zb.h"
#include "zoo/zoo.h"

/* BasicConv2d with a kh x kw kernel (the factorized 1x7/7x1 and 1x3/3x1
 * convolutions are not square). */
static int basic(zb *b, const char *name_, int x, int cout, int kh, int kw, int stride, int ph, int pw)
{
    ZB_KEEP(name, name_);
    int64_t k[2] = {kh, kw}, s[2] = {stride, stride}, p[2] = {ph, pw};
    int y = zb_conv_nd(b, zb_name(b, "%s.conv", name), x, cout, k, s, p, NULL, 1, false);
    y = zb_bn_eps(b, zb_name(b, "%s.bn", name), y, 1e-3);
    return zb_relu(b, zb_name(b, "%s.relu", name), y);
}

/* Square-kernel shorthand. */
static int conv(zb *b, const char *name, int x, int cout, int k, int stride, int pad)
{
    return basic(b, name, x, cout, k, k, stride, pad, pad);
}

/* F.avg_pool2d(x, 3, stride=1, padding=1): count_include_pad defaults to
 * True in PyTorch, and the exporter keeps it. */
static int pool_branch(zb *b, const char *name, int x, int cout)
{
    int p = zb_avgpool(b, zb_name(b, "%s.pool", name), x, 3, 1, 1, true);
    return conv(b, zb_name(b, "%s.branch_pool", name), p, cout, 1, 1, 0);
}

static int inception_a(zb *b, const char *name_, int x, int pool_features)
{
    ZB_KEEP(name, name_);
    int br[4];
    br[0] = conv(b, zb_name(b, "%s.branch1x1", name), x, 64, 1, 1, 0);
    int t = conv(b, zb_name(b, "%s.branch5x5_1", name), x, 48, 1, 1, 0);
    br[1] = conv(b, zb_name(b, "%s.branch5x5_2", name), t, 64, 5, 1, 2);
    t = conv(b, zb_name(b, "%s.branch3x3dbl_1", name), x, 64, 1, 1, 0);
    t = conv(b, zb_name(b, "%s.branch3x3dbl_2", name), t, 96, 3, 1, 1);
    br[2] = conv(b, zb_name(b, "%s.branch3x3dbl_3", name), t, 96, 3, 1, 1);
    br[3] = pool_branch(b, name, x, pool_features);
    return zb_concat(b, zb_name(b, "%s.concat", name), br, 4, 1);
}

/* Grid reduction 35 -> 17. */
static int inception_b(zb *b, const char *name_, int x)
{
    ZB_KEEP(name, name_);
    int br[3];
    br[0] = conv(b, zb_name(b, "%s.branch3x3", name), x, 384, 3, 2, 0);
    int t = conv(b, zb_name(b, "%s.branch3x3dbl_1", name), x, 64, 1, 1, 0);
    t = conv(b, zb_name(b, "%s.branch3x3dbl_2", name), t, 96, 3, 1, 1);
    br[1] = conv(b, zb_name(b, "%s.branch3x3dbl_3", name), t, 96, 3, 2, 0);
    br[2] = zb_maxpool(b, zb_name(b, "%s.pool", name), x, 3, 2, 0);
    return zb_concat(b, zb_name(b, "%s.concat", name), br, 3, 1);
}

/* 7x7 convolutions factorized into 1x7 and 7x1 (c7 channels inside). */
static int inception_c(zb *b, const char *name_, int x, int c7)
{
    ZB_KEEP(name, name_);
    int br[4];
    br[0] = conv(b, zb_name(b, "%s.branch1x1", name), x, 192, 1, 1, 0);
    int t = conv(b, zb_name(b, "%s.branch7x7_1", name), x, c7, 1, 1, 0);
    t = basic(b, zb_name(b, "%s.branch7x7_2", name), t, c7, 1, 7, 1, 0, 3);
    br[1] = basic(b, zb_name(b, "%s.branch7x7_3", name), t, 192, 7, 1, 1, 3, 0);
    t = conv(b, zb_name(b, "%s.branch7x7dbl_1", name), x, c7, 1, 1, 0);
    t = basic(b, zb_name(b, "%s.branch7x7dbl_2", name), t, c7, 7, 1, 1, 3, 0);
    t = basic(b, zb_name(b, "%s.branch7x7dbl_3", name), t, c7, 1, 7, 1, 0, 3);
    t = basic(b, zb_name(b, "%s.branch7x7dbl_4", name), t, c7, 7, 1, 1, 3, 0);
    br[2] = basic(b, zb_name(b, "%s.branch7x7dbl_5", name), t, 192, 1, 7, 1, 0, 3);
    br[3] = pool_branch(b, name, x, 192);
    return zb_concat(b, zb_name(b, "%s.concat", name), br, 4, 1);
}

/* Grid reduction 17 -> 8. */
static int inception_d(zb *b, const char *name_, int x)
{
    ZB_KEEP(name, name_);
    int br[3];
    int t = conv(b, zb_name(b, "%s.branch3x3_1", name), x, 192, 1, 1, 0);
    br[0] = conv(b, zb_name(b, "%s.branch3x3_2", name), t, 320, 3, 2, 0);
    t = conv(b, zb_name(b, "%s.branch7x7x3_1", name), x, 192, 1, 1, 0);
    t = basic(b, zb_name(b, "%s.branch7x7x3_2", name), t, 192, 1, 7, 1, 0, 3);
    t = basic(b, zb_name(b, "%s.branch7x7x3_3", name), t, 192, 7, 1, 1, 3, 0);
    br[1] = conv(b, zb_name(b, "%s.branch7x7x3_4", name), t, 192, 3, 2, 0);
    br[2] = zb_maxpool(b, zb_name(b, "%s.pool", name), x, 3, 2, 0);
    return zb_concat(b, zb_name(b, "%s.concat", name), br, 3, 1);
}

/* Expanded filter bank: the 3x3 branches split into parallel 1x3 and 3x1
 * convolutions whose outputs are concatenated. */
static int inception_e(zb *b, const char *name_, int x)
{
    ZB_KEEP(name, name_);
    int br[4], pair[2];
    br[0] = conv(b, zb_name(b, "%s.branch1x1", name), x, 320, 1, 1, 0);
    int t = conv(b, zb_name(b, "%s.branch3x3_1", name), x, 384, 1, 1, 0);
    pair[0] = basic(b, zb_name(b, "%s.branch3x3_2a", name), t, 384, 1, 3, 1, 0, 1);
    pair[1] = basic(b, zb_name(b, "%s.branch3x3_2b", name), t, 384, 3, 1, 1, 1, 0);
    br[1] = zb_concat(b, zb_name(b, "%s.branch3x3", name), pair, 2, 1);
    t = conv(b, zb_name(b, "%s.branch3x3dbl_1", name), x, 448, 1, 1, 0);
    t = conv(b, zb_name(b, "%s.branch3x3dbl_2", name), t, 384, 3, 1, 1);
    pair[0] = basic(b, zb_name(b, "%s.branch3x3dbl_3a", name), t, 384, 1, 3, 1, 0, 1);
    pair[1] = basic(b, zb_name(b, "%s.branch3x3dbl_3b", name), t, 384, 3, 1, 1, 1, 0);
    br[2] = zb_concat(b, zb_name(b, "%s.branch3x3dbl", name), pair, 2, 1);
    br[3] = pool_branch(b, name, x, 192);
    return zb_concat(b, zb_name(b, "%s.concat", name), br, 4, 1);
}

ZOO_BUILDER(ts_zoo_inception_v3)
{
    zb b;
    zb_begin(&b, "inception_v3", o, err);
    int64_t in_dims[4] = {zoo_batch(o), 3, 299, 299};
    int x = zb_input(&b, "input", 4, in_dims);
    x = conv(&b, "Conv2d_1a_3x3", x, 32, 3, 2, 0); /* 149 */
    x = conv(&b, "Conv2d_2a_3x3", x, 32, 3, 1, 0); /* 147 */
    x = conv(&b, "Conv2d_2b_3x3", x, 64, 3, 1, 1);
    x = zb_maxpool(&b, "maxpool1", x, 3, 2, 0); /* 73 */
    x = conv(&b, "Conv2d_3b_1x1", x, 80, 1, 1, 0);
    x = conv(&b, "Conv2d_4a_3x3", x, 192, 3, 1, 0); /* 71 */
    x = zb_maxpool(&b, "maxpool2", x, 3, 2, 0);     /* 35 */
    x = inception_a(&b, "Mixed_5b", x, 32);
    x = inception_a(&b, "Mixed_5c", x, 64);
    x = inception_a(&b, "Mixed_5d", x, 64);
    x = inception_b(&b, "Mixed_6a", x); /* 17 */
    x = inception_c(&b, "Mixed_6b", x, 128);
    x = inception_c(&b, "Mixed_6c", x, 160);
    x = inception_c(&b, "Mixed_6d", x, 160);
    x = inception_c(&b, "Mixed_6e", x, 192);
    x = inception_d(&b, "Mixed_7a", x); /* 8 */
    x = inception_e(&b, "Mixed_7b", x);
    x = inception_e(&b, "Mixed_7c", x);
    x = zb_global_avgpool(&b, "avgpool", x);
    int64_t flat[2] = {zoo_batch(o), zb_shape(&b, x)->dims[1]};
    x = zb_reshape(&b, "flatten", x, 2, flat);
    int y = zb_gemm(&b, "fc", x, 1000);
    return zb_finish(&b, &y, 1, out);
}
