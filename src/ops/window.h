/* Sliding-window geometry shared by the nn family (Conv, ConvTranspose,
 * MaxPool, AveragePool): the ONNX attributes kernel_shape / strides / pads /
 * dilations / auto_pad / ceil_mode, and the output size they give. */
#ifndef TS_OPS_WINDOW_H
#define TS_OPS_WINDOW_H

#include "ops/op.h"

#define TS_WIN_MAX (TS_MAX_RANK - 2) /* spatial dims: rank minus N and C */

typedef enum ts_auto_pad { TS_PAD_NOTSET, TS_PAD_SAME_UPPER, TS_PAD_SAME_LOWER, TS_PAD_VALID } ts_auto_pad;

/* The attributes as the model gave them; counts are -1 when absent (the
 * export then omits them, so a round trip keeps the structure). */
typedef struct ts_window {
    int32_t nkernel, nstrides, npads, ndilations;
    int64_t kernel[TS_WIN_MAX];
    int64_t strides[TS_WIN_MAX];
    int64_t pads[2 * TS_WIN_MAX]; /* begins of every dim, then ends */
    int64_t dilations[TS_WIN_MAX];
    int32_t auto_pad; /* ts_auto_pad */
    int32_t ceil_mode;
} ts_window;

/* Geometry resolved against an input's spatial dims. */
typedef struct ts_window_geom {
    int nsp;
    int64_t in[TS_WIN_MAX], kernel[TS_WIN_MAX], stride[TS_WIN_MAX], dil[TS_WIN_MAX];
    int64_t pad_begin[TS_WIN_MAX], pad_end[TS_WIN_MAX], out[TS_WIN_MAX];
} ts_window_geom;

/* Reads the window attributes; ceil_mode only when `ceil` (pools). */
ts_status ts_window_parse(ts_window *w, const ts_attr *a, int na, bool ceil, ts_error *err);
/* Writes the attributes that were given; returns the count or -1 when max is too small. */
int ts_window_emit(const ts_window *w, ts_attr *out, int max);
/* Checks the attribute counts against nsp spatial dims and fills g.  kernel
 * is the effective kernel (from W for Conv; NULL: w->kernel).  On failure
 * writes a sentence into why and returns false. */
bool ts_window_check(const ts_window *w, int nsp, const int64_t *kernel, char *why, size_t n);
bool ts_window_resolve(const ts_window *w, int nsp, const int64_t *in, const int64_t *kernel, ts_window_geom *g,
                       char *why, size_t n);
int64_t ts_window_kernel_size(const ts_window_geom *g);

/* The taps [*k0, *k1) of a K-tap window starting at input position base
 * (negative: in the padding) with dilation dil whose positions lie inside
 * an input of len: direct kernels loop over those only, padding unread. */
static inline void ts_window_taps(int64_t base, int64_t dil, int64_t K, int64_t len, int64_t *k0, int64_t *k1)
{
    int64_t a = 0, b = K;
    while (a < K && base + a * dil < 0) a++;
    while (b > a && base + (b - 1) * dil >= len) b--;
    *k0 = a;
    *k1 = b;
}

/* Infer-time failure for a valid model tsopt does not implement. */
static inline ts_status ts_nn_unsupported(ts_infer_ctx *c, const char *what)
{
    ts_infer_fail(c, "%s", what);
    c->err->code = TS_ERR_UNSUPPORTED;
    return TS_ERR_UNSUPPORTED;
}

/* Float tensors only: the family has no integer variants (ConvInteger,
 * QLinear* are other operators). */
static inline bool ts_nn_float_input(ts_infer_ctx *c, int i)
{
    if (c->in[i] && ts_dtype_is_float(c->in[i]->dtype)) return true;
    if (c->in[i])
        ts_infer_fail(c, "input %d ('%s') must be float32 or float64, got %s", i, c->in[i]->name,
                      ts_dtype_name(c->in[i]->dtype));
    return false;
}

/* Conv/ConvTranspose operands: X and W float of one type, B (optional) float. */
static inline bool ts_nn_conv_operands(ts_infer_ctx *c)
{
    if (!ts_nn_float_input(c, 0) || !ts_nn_float_input(c, 1) || (c->nin > 2 && c->in[2] && !ts_nn_float_input(c, 2)))
        return false;
    if (c->in[1]->dtype == c->in[0]->dtype) return true;
    ts_infer_fail(c, "W is %s but X is %s", ts_dtype_name(c->in[1]->dtype), ts_dtype_name(c->in[0]->dtype));
    return false;
}

/* Copies n elements of es bytes from a strided source to a contiguous run. */
static inline void ts_nn_copy_strided(size_t es, int64_t n, const void *src, int64_t incs, void *dst)
{
    if (es == 4) {
        const uint32_t *s = src;
        uint32_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = s[i * incs];
    } else {
        const uint64_t *s = src;
        uint64_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = s[i * incs];
    }
}

/* y[n, f, :] += B[f] over outplane positions per channel, in the domain
 * num (Conv and ConvTranspose add their bias this way after the products). */
static inline void ts_nn_add_bias(const ts_num *num, const ts_tensor *B, int64_t N, int64_t F, int64_t outplane,
                                  size_t es, char *y)
{
    ts_scalar one;
    num->one(&one);
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++)
            num->axpy(outplane, &one, (const char *)B->data + (size_t)f * es, 0,
                      y + (size_t)((n * F + f) * outplane) * es, 1);
}

#endif
