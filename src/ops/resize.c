/* Resize (opsets 10 to 18) and Upsample (opsets 7 and 9).
 *
 * Supported: mode nearest (nearest_mode round_prefer_floor,
 * round_prefer_ceil, floor, ceil), linear (n-linear over every axis whose
 * size or scale changes) and cubic (opset 11+: 4 taps per axis with
 * cubic_coeff_a, edge-clamped, or renormalized without the taps outside
 * with exclude_outside), with coordinate_transformation_mode half_pixel,
 * pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn,
 * half_pixel_symmetric and tf_crop_and_resize (the input roi's box, in
 * normalized coordinates, is resized; an output whose coordinate falls
 * outside the input on any axis is extrapolation_value).  antialias is
 * refused.  Opset-10
 * Resize and Upsample use asymmetric coordinates with ONNX Runtime's
 * "simple" nearest rule (ceil when downscaling, else floor).
 *
 * Coordinates are computed in float32 as ONNX Runtime does, so that ties in
 * nearest rounding fall the same way.  Nearest is pure data movement (every
 * domain); linear needs real weights and so runs in the float domains only.
 * In the mod-p domain float constants are residues, so there the scales are
 * recovered as output/input sizes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/elementwise.h"

static const char *const modes[] = {"nearest", "linear", "cubic", "bilinear", NULL};
static const char *const coords[] = {"half_pixel",        "pytorch_half_pixel", "align_corners",
                                     "asymmetric",        "tf_half_pixel_for_nn", "tf_crop_and_resize",
                                     "half_pixel_symmetric", NULL};
static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
static const char *const policies[] = {"stretch", "not_larger", "not_smaller", NULL};

/* Attributes given explicitly (bit per name), so export writes only those. */
enum { G_MODE = 1, G_COORD = 2, G_NEAREST = 4, G_AXES = 8, G_POLICY = 16, G_ANTIALIAS = 32, G_CUBIC_A = 64,
       G_EXCLUDE = 128, G_EXTRAP = 256 };

static ts_status get_choice(const ts_attr *a, int na, const char *name, const char *const *names, const char *def,
                            int *out, unsigned bit, unsigned *given, ts_error *err)
{
    char s[48];
    if (ts_attr_get_string(a, na, name, def, s, sizeof s, err)) return err->code;
    if (ts_attr_find(a, na, name)) *given |= bit;
    for (int i = 0; names[i]; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return TS_OK;
        }
    return ts_error_set(err, TS_ERR_INVALID, "attribute '%s': unknown value '%s'", name, s);
}

/* cubic_ok: Resize from opset 11 (Upsample and opset-10 Resize have no cubic). */
static ts_status common_parse(ts_resize_attrs *p, const ts_attr *a, int na, bool cubic_ok, ts_error *err)
{
    if (get_choice(a, na, "mode", modes, "nearest", &p->mode, G_MODE, &p->given, err)) return err->code;
    if (p->mode == TS_RESIZE_CUBIC && !cubic_ok)
        return ts_error_set(err, TS_ERR_INVALID, "attribute 'mode': 'cubic' needs Resize from opset 11");
    return TS_OK;
}

static ts_status resize_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_resize_attrs *p = attrs;
    p->nscales = -1;
    if (common_parse(p, a, na, opset >= 11, err)) return err->code;
    if (opset < 11) { /* opset 10: no coordinate or nearest mode attributes */
        p->coord = TS_RESIZE_ASYMMETRIC;
        p->nearest = TS_RESIZE_SIMPLE;
        p->naxes = -1;
        return TS_OK;
    }
    if (get_choice(a, na, "coordinate_transformation_mode", coords, "half_pixel", &p->coord, G_COORD, &p->given,
                   err) ||
        get_choice(a, na, "nearest_mode", nearests, "round_prefer_floor", &p->nearest, G_NEAREST, &p->given, err) ||
        get_choice(a, na, "keep_aspect_ratio_policy", policies, "stretch", &p->policy, G_POLICY, &p->given, err) ||
        ts_attr_get_int(a, na, "antialias", 0, &p->antialias, err) ||
        ts_attr_get_int(a, na, "exclude_outside", 0, &p->exclude_outside, err) ||
        ts_attr_get_float(a, na, "cubic_coeff_a", -0.75, &p->cubic_coeff_a, err) ||
        ts_attr_get_float(a, na, "extrapolation_value", 0.0, &p->extrapolation_value, err) ||
        ts_attr_get_ints(a, na, "axes", p->axes, TS_MAX_RANK, &p->naxes, err))
        return err->code;
    if (ts_attr_find(a, na, "antialias")) p->given |= G_ANTIALIAS;
    if (ts_attr_find(a, na, "exclude_outside")) p->given |= G_EXCLUDE;
    if (ts_attr_find(a, na, "cubic_coeff_a")) p->given |= G_CUBIC_A;
    if (ts_attr_find(a, na, "extrapolation_value")) p->given |= G_EXTRAP;
    if (p->naxes >= 0) p->given |= G_AXES;
    if (p->antialias && p->mode != TS_RESIZE_NEAREST)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "antialias=1 is not supported");
    return TS_OK;
}

static ts_status upsample_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_resize_attrs *p = attrs;
    p->upsample = true;
    p->coord = TS_RESIZE_ASYMMETRIC;
    p->nearest = TS_RESIZE_SIMPLE;
    p->naxes = -1;
    p->nscales = -1;
    if (common_parse(p, a, na, false, err)) return err->code;
    const ts_attr *s = ts_attr_find(a, na, "scales");
    if (s) {
        if (s->kind != TS_ATTR_FLOATS) return ts_attr_fail(err, s, "expected a list of floats");
        if (s->n > TS_MAX_RANK) return ts_attr_fail(err, s, "too many values");
        for (int i = 0; i < s->n; i++) p->scales[i] = s->floats[i];
        p->nscales = s->n;
    }
    if (opset < 9 && p->nscales < 0)
        return ts_error_set(err, TS_ERR_INVALID, "attribute 'scales' is required before opset 9");
    return TS_OK;
}

static int resize_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_resize_attrs *p = attrs;
    int n = 0;
#define PUT(x)                                                                                                     \
    do {                                                                                                           \
        if (n < max) out[n++] = (x);                                                                               \
    } while (0)
    PUT(ts_attr_string("mode", modes[p->mode]));
    if (p->given & G_COORD) PUT(ts_attr_string("coordinate_transformation_mode", coords[p->coord]));
    if (p->given & G_NEAREST) PUT(ts_attr_string("nearest_mode", nearests[p->nearest]));
    if (p->given & G_POLICY) PUT(ts_attr_string("keep_aspect_ratio_policy", policies[p->policy]));
    if (p->given & G_ANTIALIAS) PUT(ts_attr_int("antialias", p->antialias));
    if (p->given & G_EXCLUDE) PUT(ts_attr_int("exclude_outside", p->exclude_outside));
    if (p->given & G_CUBIC_A) PUT(ts_attr_float("cubic_coeff_a", p->cubic_coeff_a));
    if (p->given & G_EXTRAP) PUT(ts_attr_float("extrapolation_value", p->extrapolation_value));
    if (p->given & G_AXES) PUT(ts_attr_ints("axes", p->axes, p->naxes));
    if (p->nscales >= 0) PUT(ts_attr_floats("scales", p->scales, p->nscales));
#undef PUT
    return n;
}

/* Where the scales and sizes come from, per operator form. */
int ts_resize_scales_input(const ts_resize_attrs *p, int opset)
{
    if (p->upsample) return opset >= 9 ? 1 : -1;
    return opset >= 11 ? 2 : 1;
}

/* Raw scale/size lists (n = -1 when absent) -> per-axis scale and output
 * size.  Returns an error message or NULL. */
const char *ts_resize_sizes(const ts_resize_attrs *p, const ts_shape *in, const double *scl, int nscl,
                              const int64_t *sizes, int nsizes, float *scale, int64_t *out, char *msg, size_t msz)
{
    int r = in->rank, n = nscl >= 0 ? nscl : nsizes, ax[TS_MAX_RANK];
    int naxes = p->naxes >= 0 ? p->naxes : r;
    if ((nscl >= 0) == (nsizes >= 0)) {
        snprintf(msg, msz, "exactly one of scales and sizes must be given");
        return msg;
    }
    if (n != naxes) {
        snprintf(msg, msz, "%d %s given, expected %d", n, nscl >= 0 ? "scales" : "sizes", naxes);
        return msg;
    }
    for (int d = 0; d < r; d++) {
        scale[d] = 1.0f;
        out[d] = in->dims[d];
    }
    for (int i = 0; i < n; i++) {
        ax[i] = i;
        if (p->naxes >= 0 && !ts_axis_norm(p->axes[i], r, &ax[i])) {
            snprintf(msg, msz, "axis %lld is out of range for rank %d", (long long)p->axes[i], r);
            return msg;
        }
    }
    if (nscl >= 0) {
        for (int i = 0; i < n; i++) {
            int d = ax[i];
            if (!(scl[i] > 0)) {
                snprintf(msg, msz, "scale %g on axis %d must be positive", scl[i], d);
                return msg;
            }
            scale[d] = (float)scl[i];
            float size = scale[d] * (float)in->dims[d]; /* float product, as ONNX Runtime */
            if (!(size <= (float)TS_MAX_ELEMENTS)) { /* also rejects inf: the cast would be undefined */
                snprintf(msg, msz, "scale %g on axis %d makes the output too large", scl[i], d);
                return msg;
            }
            out[d] = (int64_t)size;
        }
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (sizes[i] < 0) {
            snprintf(msg, msz, "size %lld on axis %d is negative", (long long)sizes[i], ax[i]);
            return msg;
        }
    if (p->policy == TS_RESIZE_STRETCH) {
        for (int i = 0; i < n; i++) {
            int d = ax[i];
            out[d] = sizes[i];
            scale[d] = in->dims[d] ? (float)sizes[i] / (float)in->dims[d] : 1.0f;
        }
        return NULL;
    }
    float s = p->policy == TS_RESIZE_NOT_LARGER ? INFINITY : 0.0f; /* one scale for all axes keeps the aspect ratio */
    for (int i = 0; i < n; i++) {
        float t = in->dims[ax[i]] ? (float)sizes[i] / (float)in->dims[ax[i]] : 1.0f;
        s = p->policy == TS_RESIZE_NOT_LARGER ? fminf(s, t) : fmaxf(s, t);
    }
    for (int i = 0; i < n; i++) {
        scale[ax[i]] = s;
        out[ax[i]] = (int64_t)roundf(s * (float)in->dims[ax[i]]);
    }
    return NULL;
}

static ts_status resize_infer(ts_infer_ctx *c)
{
    const ts_resize_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    double scl[TS_MAX_RANK];
    int64_t sizes[TS_MAX_RANK], out[TS_MAX_RANK];
    float scale[TS_MAX_RANK];
    int nscl = -1, nsizes = -1, si = ts_resize_scales_input(p, c->opset);
    char msg[200];
    if (p->mode != TS_RESIZE_NEAREST && !ts_dtype_is_float(x->dtype))
        return ts_infer_fail(c, "%s mode needs float data, got %s", modes[p->mode], ts_dtype_name(x->dtype));
    if (si < 0) {
        nscl = p->nscales;
        for (int i = 0; i < nscl; i++) scl[i] = p->scales[i];
    } else {
        if (si < c->nin && c->in[si] && ts_shape_numel(&c->in[si]->shape) > 0 &&
            ts_infer_const_floats(c, si, scl, TS_MAX_RANK, &nscl))
            return c->err->code;
        if (!p->upsample && c->opset >= 11 && c->nin > 3 && c->in[3] && ts_shape_numel(&c->in[3]->shape) > 0 &&
            ts_infer_const_ints(c, 3, sizes, TS_MAX_RANK, &nsizes))
            return c->err->code;
    }
    if (ts_resize_sizes(p, &x->shape, scl, nscl, sizes, nsizes, scale, out, msg, sizeof msg))
        return ts_infer_fail(c, "%s", msg);
    if (p->coord == TS_RESIZE_TF_CROP_AND_RESIZE) {
        const ts_value *roi = c->nin > 1 ? c->in[1] : NULL;
        int64_t want = 2 * (p->naxes >= 0 ? p->naxes : x->shape.rank);
        if (!roi || !ts_dtype_is_float(roi->dtype) || roi->shape.rank != 1 || roi->shape.dims[0] != want)
            return ts_infer_fail(c, "tf_crop_and_resize needs input 1 (roi) as %lld floats (starts, then ends)",
                                 (long long)want);
    }
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = ts_shape_make(x->shape.rank, out);
    return TS_OK;
}

/* Output coordinate -> input coordinate, in float32. */
float ts_resize_coord(int mode, float x, float scale, int64_t in_len, int64_t out_len)
{
    switch (mode) {
    case TS_RESIZE_HALF_PIXEL: return (x + 0.5f) / scale - 0.5f;
    case TS_RESIZE_PYTORCH_HALF_PIXEL: return out_len > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
    case TS_RESIZE_ALIGN_CORNERS: return out_len == 1 ? 0.0f : x * (float)(in_len - 1) / (float)(out_len - 1);
    case TS_RESIZE_TF_HALF_PIXEL_FOR_NN: return (x + 0.5f) / scale;
    case TS_RESIZE_HALF_PIXEL_SYMMETRIC: {
        float adjustment = (float)out_len / (scale * (float)in_len);
        float offset = (float)in_len / 2 * (1 - adjustment);
        return offset + (x + 0.5f) / scale - 0.5f;
    }
    default: return x / scale; /* asymmetric */
    }
}

int64_t ts_resize_nearest(int mode, float x, float scale, int64_t in_len)
{
    int64_t i;
    switch (mode) {
    case TS_RESIZE_ROUND_PREFER_FLOOR: i = x == (float)(int64_t)x + 0.5f ? (int64_t)floorf(x) : (int64_t)roundf(x); break;
    case TS_RESIZE_ROUND_PREFER_CEIL: i = (int64_t)roundf(x); break;
    case TS_RESIZE_FLOOR: i = (int64_t)floorf(x); break;
    case TS_RESIZE_CEIL: i = (int64_t)ceilf(x); break;
    default: i = scale < 1.0f ? (int64_t)ceilf(x) : (int64_t)x; break; /* ORT's "simple" */
    }
    return i < 0 ? 0 : i >= in_len ? in_len - 1 : i;
}

/* tf_crop_and_resize's box per axis: start and end in normalized input
 * coordinates (roi's starts then ends over the axes; 0 and 1 elsewhere). */
typedef struct crop_box {
    bool on;
    float start[TS_MAX_RANK], end[TS_MAX_RANK];
} crop_box;

static ts_status crop_read(ts_kernel_ctx *k, crop_box *b)
{
    const ts_resize_attrs *p = k->attrs;
    const ts_tensor *roi = k->nin > 1 ? k->in[1] : NULL;
    int r = k->in[0]->shape.rank, n = p->naxes >= 0 ? p->naxes : r;
    b->on = p->coord == TS_RESIZE_TF_CROP_AND_RESIZE;
    if (!b->on) return TS_OK;
    if (k->num->exact)
        return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "tf_crop_and_resize has no kernel in the %s domain",
                              k->num->name);
    if (!roi || ts_tensor_numel(roi) != 2 * n)
        return ts_kernel_fail(k, TS_ERR_INVALID, "tf_crop_and_resize needs input 1 (roi) as %d floats", 2 * n);
    for (int d = 0; d < r; d++) b->start[d] = 0, b->end[d] = 1;
    for (int i = 0; i < n; i++) {
        int d = i;
        if (p->naxes >= 0) ts_axis_norm(p->axes[i], r, &d);
        b->start[d] = (float)k->num->to_f64(ts_num_cat(k->num, roi->data, i));
        b->end[d] = (float)k->num->to_f64(ts_num_cat(k->num, roi->data, n + i));
    }
    return TS_OK;
}

/* Input coordinate of output position o on axis d; *outside when a crop
 * box puts it past the input's ends.  Float32 as ONNX Runtime computes it. */
static float coord_at(const ts_resize_attrs *p, const crop_box *b, int d, int64_t o, float scale, int64_t in_len,
                      int64_t out_len, bool *outside)
{
    *outside = false;
    if (!b->on) return ts_resize_coord(p->coord, (float)o, scale, in_len, out_len);
    float span = (float)(in_len - 1), s = b->start[d], e = b->end[d];
    float c = out_len > 1 ? s * span + (float)o * (e - s) * span / (float)(out_len - 1) : 0.5f * (s + e) * span;
    *outside = c < 0 || c > span;
    return c;
}

/* Cubic: per axis and output position, 4 taps (edge-clamped indices) and
 * their weights, as ONNX's reference computes them; exclude_outside drops
 * the taps past the edge and renormalizes.  Axes whose weights are all a
 * single 1 on the same index are copied, the others summed over. */
static ts_status cubic_kernel(ts_kernel_ctx *k, const float *scale, const crop_box *box)
{
    const ts_resize_attrs *p = k->attrs;
    const ts_num *num = k->num;
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    int r = x->shape.rank;
    int64_t total = 0, n = ts_tensor_numel(y), base[TS_MAX_RANK], xs[TS_MAX_RANK], idx[TS_MAX_RANK] = {0};
    for (int d = 0; d < r; d++) total += y->shape.dims[d];
    int64_t *ti = malloc(sizeof(int64_t) * (size_t)total * 4 + 1);
    double *tw = malloc(sizeof(double) * (size_t)total * 4 + 1), A = p->cubic_coeff_a;
    bool *outside = calloc((size_t)total + 1, sizeof(bool));
    if (!ti || !tw || !outside) {
        free(ti);
        free(tw);
        free(outside);
        return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    }
    bool active[TS_MAX_RANK] = {0};
    ts_shape_strides(&x->shape, xs);
    for (int d = 0, at = 0; d < r; d++) {
        int64_t in_len = x->shape.dims[d], out_len = y->shape.dims[d];
        base[d] = at;
        for (int64_t o = 0; o < out_len; o++, at++) {
            double c = coord_at(p, box, d, o, scale[d], in_len, out_len, &outside[at]), f = floor(c), t = c - f;
            double w[4] = {((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A,
                           ((A + 2) * t - (A + 3)) * t * t + 1, ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1,
                           ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A};
            double sum = 0;
            for (int j = 0; j < 4; j++) {
                int64_t i = (int64_t)f - 1 + j;
                if (p->exclude_outside && (i < 0 || i >= in_len)) w[j] = 0;
                sum += w[j];
                ti[at * 4 + j] = i < 0 ? 0 : i >= in_len ? in_len - 1 : i;
            }
            for (int j = 0; j < 4; j++) {
                tw[at * 4 + j] = p->exclude_outside && sum != 0 ? w[j] / sum : w[j];
                bool unit = tw[at * 4 + j] == 0 || (tw[at * 4 + j] == 1 && ti[at * 4 + j] == o);
                if (!unit || in_len != out_len) active[d] = true;
            }
        }
    }
    int act[TS_MAX_RANK], na = 0;
    for (int d = 0; d < r; d++)
        if (active[d]) act[na++] = d;
    for (int64_t i = 0; i < n; i++) {
        double acc = 0;
        bool out_box = false;
        for (int d = 0; d < r; d++) out_box |= outside[base[d] + idx[d]];
        for (int m = 0; m < 1 << (2 * na) && !out_box; m++) { /* 4 taps on each active axis */
            double w = 1;
            int64_t off = 0;
            for (int d = 0, a = 0; d < r && w != 0; d++) {
                int64_t at = base[d] + idx[d];
                if (a < na && act[a] == d) {
                    int j = (m >> (2 * a++)) & 3;
                    w *= tw[at * 4 + j];
                    off += ti[at * 4 + j] * xs[d];
                } else
                    off += idx[d] * xs[d];
            }
            if (w != 0) acc += w * num->to_f64(ts_num_cat(num, x->data, off));
        }
        num->from_f64(ts_num_at(num, y->data, i), out_box ? p->extrapolation_value : acc);
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < y->shape.dims[d]) break;
            idx[d] = 0;
        }
    }
    free(ti);
    free(tw);
    free(outside);
    return TS_OK;
}

static ts_status resize_kernel(ts_kernel_ctx *k)
{
    const ts_resize_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    const ts_num *num = k->num;
    int r = x->shape.rank, si = ts_resize_scales_input(p, k->opset);
    double scl[TS_MAX_RANK];
    int64_t sizes[TS_MAX_RANK], out[TS_MAX_RANK];
    float scale[TS_MAX_RANK];
    int nscl = -1, nsizes = -1;
    char msg[200];
    if (si < 0) {
        nscl = p->nscales;
        for (int i = 0; i < nscl; i++) scl[i] = p->scales[i];
    } else {
        const ts_tensor *st = si < k->nin ? k->in[si] : NULL;
        const ts_tensor *sz = !p->upsample && k->opset >= 11 && k->nin > 3 ? k->in[3] : NULL;
        if (st && ts_tensor_numel(st) > 0) {
            nscl = (int)ts_tensor_numel(st);
            if (nscl > TS_MAX_RANK) nscl = TS_MAX_RANK;
            for (int i = 0; i < nscl; i++)
                scl[i] = st->dtype == num->storage ? num->to_f64(ts_num_cat(num, st->data, i)) : ts_tensor_get_f64(st, i);
        }
        if (sz && ts_tensor_numel(sz) > 0) {
            nsizes = (int)ts_tensor_numel(sz);
            if (nsizes > TS_MAX_RANK) nsizes = TS_MAX_RANK;
            for (int i = 0; i < nsizes; i++) sizes[i] = ts_tensor_get_i64(sz, i);
        }
        if (num->exact && nscl >= 0 && st->dtype == num->storage) { /* residues, not scales: use the sizes */
            int naxes = p->naxes >= 0 ? p->naxes : r;
            for (int i = 0; i < nscl && i < naxes; i++) {
                int d = i;
                if (p->naxes >= 0) ts_axis_norm(p->axes[i], r, &d);
                scl[i] = x->shape.dims[d] ? (double)((float)y->shape.dims[d] / (float)x->shape.dims[d]) : 1.0;
            }
        }
    }
    if (ts_resize_sizes(p, &x->shape, scl, nscl, sizes, nsizes, scale, out, msg, sizeof msg))
        return ts_kernel_fail(k, TS_ERR_INVALID, "%s", msg);
    if (p->mode != TS_RESIZE_NEAREST && num->exact)
        return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "%s interpolation has no kernel in the %s domain", modes[p->mode],
                              num->name);
    crop_box box;
    if (crop_read(k, &box)) return k->err->code;
    if (p->mode == TS_RESIZE_CUBIC) return ts_tensor_numel(y) ? cubic_kernel(k, scale, &box) : TS_OK;
    int64_t total_len = 0, n = ts_tensor_numel(y);
    for (int d = 0; d < r; d++) total_len += y->shape.dims[d];
    if (!n) return TS_OK;
    /* per axis and output position: lower index, upper index, upper weight */
    int64_t *i0 = malloc(sizeof(int64_t) * (size_t)total_len * 2 + 1);
    float *w1 = malloc(sizeof(float) * (size_t)total_len + 1);
    bool *outside = calloc((size_t)total_len + 1, sizeof(bool)); /* past the input in a crop box */
    if (!i0 || !w1 || !outside) {
        free(i0);
        free(w1);
        free(outside);
        return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    }
    int64_t *i1 = i0 + total_len, base[TS_MAX_RANK], xs[TS_MAX_RANK], idx[TS_MAX_RANK] = {0};
    bool active[TS_MAX_RANK] = {0};
    ts_shape_strides(&x->shape, xs);
    for (int d = 0, at = 0; d < r; d++) {
        int64_t in_len = x->shape.dims[d], out_len = y->shape.dims[d];
        base[d] = at;
        for (int64_t o = 0; o < out_len; o++, at++) {
            float c = coord_at(p, &box, d, o, scale[d], in_len, out_len, &outside[at]);
            if (p->mode == TS_RESIZE_NEAREST) {
                i0[at] = i1[at] = ts_resize_nearest(p->nearest, c, scale[d], in_len);
                w1[at] = 0;
                continue;
            }
            c = c < 0 ? 0 : c > (float)(in_len - 1) ? (float)(in_len - 1) : c;
            i0[at] = (int64_t)c;
            i1[at] = i0[at] + 1 < in_len ? i0[at] + 1 : in_len - 1;
            w1[at] = c - (float)i0[at];
            if (w1[at] != 0 && i1[at] != i0[at]) active[d] = true;
        }
    }
    size_t elem = ts_dtype_size(y->dtype);
    int act[TS_MAX_RANK], na = 0;
    for (int d = 0; d < r; d++)
        if (active[d]) act[na++] = d;
    for (int64_t i = 0; i < n; i++) {
        bool out_box = false;
        for (int d = 0; box.on && d < r; d++) out_box |= outside[base[d] + idx[d]];
        if (out_box)
            el_set(num, y, i, p->extrapolation_value);
        else if (!na) { /* nearest, or linear landing on whole coordinates */
            int64_t off = 0;
            for (int d = 0; d < r; d++) off += i0[base[d] + idx[d]] * xs[d];
            memcpy((char *)y->data + (size_t)i * elem, (const char *)x->data + (size_t)off * elem, elem);
        } else {
            double acc = 0;
            for (int m = 0; m < 1 << na; m++) { /* corners of the active axes */
                double w = 1;
                int64_t off = 0;
                for (int d = 0, a = 0; d < r; d++) {
                    int64_t at = base[d] + idx[d];
                    bool up = a < na && act[a] == d ? (m >> a++) & 1 : false;
                    if (active[d]) w *= up ? w1[at] : 1.0 - w1[at];
                    off += (up ? i1[at] : i0[at]) * xs[d];
                }
                if (w != 0) acc += w * num->to_f64(ts_num_cat(num, x->data, off));
            }
            num->from_f64(ts_num_at(num, y->data, i), acc);
        }
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < y->shape.dims[d]) break;
            idx[d] = 0;
        }
    }
    free(i0);
    free(w1);
    free(outside);
    return TS_OK;
}

static double resize_flops(const ts_node *n, const ts_graph *g)
{
    const ts_resize_attrs *p = n->attrs;
    double out = (double)ts_shape_numel(&g->values[n->outputs[0]].shape);
    return p->mode == TS_RESIZE_NEAREST ? 0 : 4 * out;
}

/* Linear in the data for every mode (interpolation weights do not depend on
 * it).  TS_OP_EXACT: nearest runs in the mod-p domain; linear refuses it in
 * the kernel with a clear message. */
const ts_op_desc ts_op_resize = {.opset_min = 10, 
    .name = "Resize", .attr_size = sizeof(ts_resize_attrs), .min_inputs = 1, .max_inputs = 4, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT, .linear_inputs = 0x1, .parse = resize_parse, .emit = resize_emit,
    .infer = resize_infer, .kernel = resize_kernel, .flops = resize_flops,
};
const ts_op_desc ts_op_upsample = {.opset_min = 7, 
    .name = "Upsample", .attr_size = sizeof(ts_resize_attrs), .min_inputs = 1, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT, .linear_inputs = 0x1, .parse = upsample_parse, .emit = resize_emit,
    .infer = resize_infer, .kernel = resize_kernel, .flops = resize_flops,
};
