/* Signal operators of opset 17: DFT (the discrete Fourier transform along
 * `axis` of a real [..., 1] or complex [..., 2] signal, optionally of
 * dft_length points (zero-padded or cut), inverse (scaled by 1 / length),
 * onesided (the first length / 2 + 1 bins)), STFT (DFTs of frames of
 * frame_length samples every frame_step, each multiplied by the window)
 * and MelWeightMatrix (triangular mel filters over the DFT bins, by ONNX's
 * own definition).  Lengths set output shapes, so they must be known when
 * the graph is built.  Direct O(n^2) sums in double. */
#include <math.h>
#include <stdlib.h>
#include "ops/elementwise.h"

typedef struct dft_attrs {
    int64_t axis;
    int inverse, onesided;
} dft_attrs;

static ts_status dft_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    dft_attrs *p = attrs;
    int64_t inv, one;
    (void)opset;
    if (ts_attr_get_int(a, na, "axis", 1, &p->axis, err) || ts_attr_get_int(a, na, "inverse", 0, &inv, err) ||
        ts_attr_get_int(a, na, "onesided", 0, &one, err))
        return err->code;
    p->inverse = inv != 0;
    p->onesided = one != 0;
    return TS_OK;
}

static int dft_emit(const void *attrs, ts_attr *out, int max)
{
    const dft_attrs *p = attrs;
    if (max < 3) return 0;
    out[0] = ts_attr_int("axis", p->axis);
    out[1] = ts_attr_int("inverse", p->inverse);
    out[2] = ts_attr_int("onesided", p->onesided);
    return 3;
}

/* The signal's axis among its dimensions before the last (real/imaginary). */
static bool signal_axis(const dft_attrs *p, const ts_shape *x, int *axis)
{
    return x->rank >= 2 && ts_axis_norm(p->axis, x->rank - 1, axis) && *axis >= 0;
}

static ts_status dft_infer(ts_infer_ctx *c)
{
    const dft_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int axis;
    if (!ts_dtype_is_float(x->dtype)) return ts_infer_fail(c, "input must be a float tensor");
    if (x->shape.rank < 2 || (x->shape.dims[x->shape.rank - 1] != 1 && x->shape.dims[x->shape.rank - 1] != 2))
        return ts_infer_fail(c, "input must end in a dimension of 1 (real) or 2 (complex)");
    if (!signal_axis(p, &x->shape, &axis)) return ts_infer_fail(c, "axis %lld is out of range", (long long)p->axis);
    int64_t len = x->shape.dims[axis];
    if (c->nin > 1 && c->in[1]) {
        int n;
        if (ts_infer_const_ints(c, 1, &len, 1, &n)) return c->err->code;
        if (len < 1) return ts_infer_fail(c, "dft_length %lld is not positive", (long long)len);
    }
    if (p->onesided && p->inverse) return ts_infer_fail(c, "onesided with inverse is not supported");
    ts_shape o = x->shape;
    o.dims[axis] = p->onesided ? len / 2 + 1 : len;
    o.dims[o.rank - 1] = 2;
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = o;
    return TS_OK;
}

/* One transform of n input points (stride in_step elements, complex when
 * cplx) into bins points of length len; the window w (n values) or NULL. */
static void transform(const ts_num *num, const ts_tensor *x, int64_t base, int64_t step, bool cplx, int64_t n,
                      const ts_tensor *w, int64_t len, int64_t bins, bool inverse, ts_tensor *y, int64_t ybase,
                      int64_t ystep)
{
    double sign = inverse ? 1 : -1;
    for (int64_t k = 0; k < bins; k++) {
        double re = 0, im = 0;
        for (int64_t j = 0; j < n && j < len; j++) {
            int64_t at = base + j * step;
            double win = w ? el_get(num, w, j) : 1;
            double xr = el_get(num, x, at) * win, xi = cplx ? el_get(num, x, at + 1) * win : 0;
            double t = sign * 2 * M_PI * (double)((j * k) % len) / (double)len, cr = cos(t), ci = sin(t);
            re += xr * cr - xi * ci;
            im += xr * ci + xi * cr;
        }
        if (inverse) re /= (double)len, im /= (double)len;
        el_set(num, y, ybase + k * ystep, re);
        el_set(num, y, ybase + k * ystep + 1, im);
    }
}

static ts_status dft_kernel(ts_kernel_ctx *k)
{
    const dft_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    if (need_float_domain(k)) return k->err->code;
    int axis, r = x->shape.rank;
    signal_axis(p, &x->shape, &axis);
    int64_t c = x->shape.dims[r - 1], n = x->shape.dims[axis], bins = y->shape.dims[axis];
    int64_t len = k->nin > 1 && k->in[1] ? ts_tensor_get_i64(k->in[1], 0) : n;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->shape.dims[d];
    for (int d = axis + 1; d < r - 1; d++) inner *= x->shape.dims[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++)
            transform(k->num, x, (o * n * inner + i) * c, inner * c, c == 2, n, NULL, len, bins, p->inverse, y,
                      (o * bins * inner + i) * 2, inner * 2);
    return TS_OK;
}

const ts_op_desc ts_op_dft = {.opset_min = 17, 
    .name = "DFT", .attr_size = sizeof(dft_attrs), .min_inputs = 1, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .parse = dft_parse, .emit = dft_emit, .infer = dft_infer, .kernel = dft_kernel,
};

/* ---------------------------------------------------------------- STFT */

typedef struct stft_attrs {
    int onesided;
} stft_attrs;

static ts_status stft_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    int64_t v;
    (void)opset;
    if (ts_attr_get_int(a, na, "onesided", 1, &v, err)) return err->code;
    ((stft_attrs *)attrs)->onesided = v != 0;
    return TS_OK;
}

static int stft_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_int("onesided", ((const stft_attrs *)attrs)->onesided);
    return 1;
}

/* inputs: signal [batch, length, 1|2], frame_step, window [frame_length], frame_length */
static ts_status stft_infer(ts_infer_ctx *c)
{
    const stft_attrs *p = c->attrs;
    const ts_value *x = c->in[0], *w = c->nin > 2 ? c->in[2] : NULL;
    int64_t step, flen = -1;
    int n;
    if (!ts_dtype_is_float(x->dtype) || x->shape.rank != 3 || x->shape.dims[2] < 1 || x->shape.dims[2] > 2)
        return ts_infer_fail(c, "signal must be a float [batch, length, 1 or 2] tensor");
    if (ts_infer_const_ints(c, 1, &step, 1, &n)) return c->err->code;
    if (w && (w->shape.rank != 1 || !ts_dtype_is_float(w->dtype))) return ts_infer_fail(c, "window must be a float vector");
    if (w) flen = w->shape.dims[0];
    if (c->nin > 3 && c->in[3]) {
        int64_t l;
        if (ts_infer_const_ints(c, 3, &l, 1, &n)) return c->err->code;
        if (flen >= 0 && l != flen) return ts_infer_fail(c, "frame_length %lld differs from the window's %lld", (long long)l, (long long)flen);
        flen = l;
    }
    if (flen < 1 || step < 1 || flen > x->shape.dims[1])
        return ts_infer_fail(c, "frame_length (%lld) and frame_step (%lld) do not fit the signal", (long long)flen, (long long)step);
    if (p->onesided && x->shape.dims[2] == 2) return ts_infer_fail(c, "onesided output of a complex signal");
    int64_t frames = (x->shape.dims[1] - flen) / step + 1;
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = ts_shape_make(4, (int64_t[]){x->shape.dims[0], frames, p->onesided ? flen / 2 + 1 : flen, 2});
    return TS_OK;
}

static ts_status stft_kernel(ts_kernel_ctx *k)
{
    const ts_tensor *x = k->in[0], *w = k->nin > 2 ? k->in[2] : NULL;
    ts_tensor *y = k->out[0];
    if (need_float_domain(k)) return k->err->code;
    int64_t step = ts_tensor_get_i64(k->in[1], 0), c = x->shape.dims[2], frames = y->shape.dims[1], bins = y->shape.dims[2];
    int64_t flen = w ? w->shape.dims[0] : ts_tensor_get_i64(k->in[3], 0), length = x->shape.dims[1];
    for (int64_t b = 0; b < x->shape.dims[0]; b++)
        for (int64_t f = 0; f < frames; f++)
            transform(k->num, x, (b * length + f * step) * c, c, c == 2, flen, w, flen, bins, false, y,
                      ((b * frames + f) * bins) * 2, 2);
    return TS_OK;
}

const ts_op_desc ts_op_stft = {.opset_min = 17, 
    .name = "STFT", .attr_size = sizeof(stft_attrs), .min_inputs = 2, .max_inputs = 4, .min_outputs = 1,
    .max_outputs = 1, .parse = stft_parse, .emit = stft_emit, .infer = stft_infer, .kernel = stft_kernel,
};

/* ------------------------------------------------------ MelWeightMatrix */

typedef struct mel_attrs {
    int64_t onnx_dtype;
} mel_attrs;

static ts_status mel_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    mel_attrs *p = attrs;
    (void)opset;
    if (ts_attr_get_int(a, na, "output_datatype", 1, &p->onnx_dtype, err)) return err->code;
    if (!ts_dtype_is_float(ts_dtype_from_onnx(p->onnx_dtype)))
        return ts_attr_fail(err, ts_attr_find(a, na, "output_datatype"), "expected a float type");
    return TS_OK;
}

static int mel_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_int("output_datatype", ((const mel_attrs *)attrs)->onnx_dtype);
    return 1;
}

static ts_status mel_infer(ts_infer_ctx *c)
{
    const mel_attrs *p = c->attrs;
    int64_t bins, len;
    int n;
    if (ts_infer_const_ints(c, 0, &bins, 1, &n) || ts_infer_const_ints(c, 1, &len, 1, &n)) return c->err->code;
    if (bins < 1 || len < 1 || bins > 65536 || len > TS_MAX_ELEMENTS / (bins + 2))
        return ts_infer_fail(c, "num_mel_bins %lld and dft_length %lld are out of range", (long long)bins, (long long)len);
    c->out_dtype[0] = ts_dtype_from_onnx(p->onnx_dtype);
    c->out_shape[0] = ts_shape_make(2, (int64_t[]){len / 2 + 1, bins});
    return TS_OK;
}

static double scalar(ts_kernel_ctx *k, int i)
{
    const ts_tensor *t = k->in[i];
    return t->dtype == k->num->storage ? el_get(k->num, t, 0) : ts_tensor_get_f64(t, 0);
}

static ts_status mel_kernel(ts_kernel_ctx *k)
{
    ts_tensor *y = k->out[0];
    if (need_float_domain(k)) return k->err->code;
    int64_t nb = y->shape.dims[1], nspec = y->shape.dims[0], len = (int64_t)scalar(k, 1);
    double rate = scalar(k, 2), lo = scalar(k, 3), hi = scalar(k, 4);
    if (rate <= 0) return ts_kernel_fail(k, TS_ERR_INVALID, "sample_rate %g is not positive", rate);
    int64_t *edge = malloc(sizeof *edge * (size_t)(nb + 2));
    if (!edge) return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    /* nb + 2 points in mel, as DFT bin indices; ONNX's definition steps by
     * (high - low) / (nb + 2), so the last point stays below high */
    double mlo = 2595 * log10(1 + lo / 700), mhi = 2595 * log10(1 + hi / 700), step = (mhi - mlo) / (double)(nb + 2);
    for (int64_t i = 0; i < nb + 2; i++) {
        double hz = 700 * (pow(10, ((double)i * step + mlo) / 2595) - 1);
        edge[i] = (int64_t)floor((double)(len + 1) * hz / rate);
    }
    ts_status st = TS_OK;
    for (int64_t i = 0; i < nb && !st; i++) {
        int64_t l = edge[i], c = edge[i + 1], h = edge[i + 2];
        if (l < 0 || h >= nspec || l > c || c > h) {
            st = ts_kernel_fail(k, TS_ERR_INVALID, "mel band %lld spans bins %lld..%lld outside 0..%lld", (long long)i,
                                (long long)l, (long long)h, (long long)(nspec - 1));
            break;
        }
        if (c == l) el_set(k->num, y, c * nb + i, 1);
        else
            for (int64_t j = l; j <= c; j++) el_set(k->num, y, j * nb + i, (double)(j - l) / (double)(c - l));
        for (int64_t j = c; j < h; j++) el_set(k->num, y, j * nb + i, (double)(h - j) / (double)(h - c));
    }
    free(edge);
    return st;
}

const ts_op_desc ts_op_mel_weight_matrix = {.opset_min = 17, 
    .name = "MelWeightMatrix", .attr_size = sizeof(mel_attrs), .min_inputs = 5, .max_inputs = 5, .min_outputs = 1,
    .max_outputs = 1, .parse = mel_parse, .emit = mel_emit, .infer = mel_infer, .kernel = mel_kernel,
};
