/* GridSample (opset 16): samples X [N, C, H, W] at the normalized (x, y)
 * positions of grid [N, Hout, Wout, 2] (-1 and 1 are the edges: the
 * outer pixel edges, or the outer pixel centres with align_corners),
 * by bilinear, nearest (ties to even) or bicubic (A = -0.75)
 * interpolation; positions outside read zeros, the border, or the image
 * reflected at its edges (padding_mode).  Follows the definition ONNX took
 * from PyTorch's grid_sample, whose values the suite's cases hold. */
#include <math.h>
#include <string.h>
#include "ops/elementwise.h"

enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

typedef struct gs_attrs {
    int mode, padding, align_corners;
} gs_attrs;

static const char *const MODES[] = {"bilinear", "nearest", "bicubic"};
static const char *const PADS[] = {"zeros", "border", "reflection"};

static ts_status gs_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    gs_attrs *p = attrs;
    char mode[32], pad[32];
    int64_t ac;
    (void)opset;
    if (ts_attr_get_string(a, na, "mode", "bilinear", mode, sizeof mode, err) ||
        ts_attr_get_string(a, na, "padding_mode", "zeros", pad, sizeof pad, err) ||
        ts_attr_get_int(a, na, "align_corners", 0, &ac, err))
        return err->code;
    p->mode = p->padding = -1;
    for (int i = 0; i < 3; i++) {
        if (!strcmp(mode, MODES[i])) p->mode = i;
        if (!strcmp(pad, PADS[i])) p->padding = i;
    }
    if (p->mode < 0) return ts_attr_fail(err, ts_attr_find(a, na, "mode"), "expected bilinear, nearest or bicubic");
    if (p->padding < 0)
        return ts_attr_fail(err, ts_attr_find(a, na, "padding_mode"), "expected zeros, border or reflection");
    p->align_corners = ac != 0;
    return TS_OK;
}

static int gs_emit(const void *attrs, ts_attr *out, int max)
{
    const gs_attrs *p = attrs;
    if (max < 3) return 0;
    out[0] = ts_attr_string("mode", MODES[p->mode]);
    out[1] = ts_attr_string("padding_mode", PADS[p->padding]);
    out[2] = ts_attr_int("align_corners", p->align_corners);
    return 3;
}

static ts_status gs_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0], *g = c->in[1];
    char a[160], b[160];
    if (x->shape.rank != 4 || g->shape.rank != 4 || g->shape.dims[3] != 2 || g->shape.dims[0] != x->shape.dims[0])
        return ts_infer_fail(c, "X %s and grid %s: expected [N, C, H, W] and [N, Hout, Wout, 2]",
                             ts_shape_str(&x->shape, a, sizeof a), ts_shape_str(&g->shape, b, sizeof b));
    if (!ts_dtype_is_float(x->dtype) || !ts_dtype_is_float(g->dtype))
        return ts_infer_fail(c, "X and grid must be float tensors");
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = ts_shape_make(4, (int64_t[]){x->shape.dims[0], x->shape.dims[1], g->shape.dims[1], g->shape.dims[2]});
    return TS_OK;
}

/* A normalized coordinate in pixel units. */
static double unnormalize(double v, int64_t size, bool align)
{
    return align ? (v + 1) / 2 * (double)(size - 1) : ((v + 1) * (double)size - 1) / 2;
}

/* Reflects v into [lo2/2, hi2/2] (bounds given doubled, as PyTorch does). */
static double reflect(double v, double lo2, double hi2)
{
    if (lo2 == hi2) return 0;
    double lo = lo2 / 2, span = (hi2 - lo2) / 2;
    v = fabs(v - lo);
    double extra = fmod(v, span);
    int64_t flips = (int64_t)floor(v / span);
    return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

/* A coordinate after padding: clamped (border), reflected then clamped. */
static double pad_coord(double v, int64_t size, int padding, bool align)
{
    if (padding == GS_BORDER) return fmin(fmax(v, 0), (double)(size - 1));
    if (padding == GS_REFLECTION) {
        v = align ? reflect(v, 0, 2.0 * (double)(size - 1)) : reflect(v, -1, 2.0 * (double)size - 1);
        return fmin(fmax(v, 0), (double)(size - 1));
    }
    return v;
}

typedef struct plane {
    const ts_num *num;
    const ts_tensor *x;
    int64_t base, h, w;
} plane;

/* Pixel (iy, ix) of the plane, 0 outside. */
static double pixel(const plane *p, int64_t iy, int64_t ix)
{
    if (iy < 0 || ix < 0 || iy >= p->h || ix >= p->w) return 0;
    return el_get(p->num, p->x, p->base + iy * p->w + ix);
}

static double cubic(double t, int k) /* weight of tap k in 0..3 at fraction t */
{
    const double A = -0.75;
    double d = fabs(t - (k - 1));
    if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
    if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
    return 0;
}

static double sample(const gs_attrs *a, const plane *p, double gx, double gy)
{
    bool al = a->align_corners;
    double x = unnormalize(gx, p->w, al), y = unnormalize(gy, p->h, al);
    if (a->mode == GS_BICUBIC) {
        /* taps at integer positions around the unpadded point; each tap padded on its own */
        double x0 = floor(x), y0 = floor(y), tx = x - x0, ty = y - y0, sum = 0;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                double yy = y0 - 1 + i, xx = x0 - 1 + j;
                if (a->padding != GS_ZEROS) {
                    yy = pad_coord(yy, p->h, a->padding, al);
                    xx = pad_coord(xx, p->w, a->padding, al);
                }
                sum += cubic(ty, i) * cubic(tx, j) * pixel(p, (int64_t)yy, (int64_t)xx);
            }
        return sum;
    }
    x = pad_coord(x, p->w, a->padding, al);
    y = pad_coord(y, p->h, a->padding, al);
    if (a->mode == GS_NEAREST) return pixel(p, (int64_t)nearbyint(y), (int64_t)nearbyint(x));
    double x0 = floor(x), y0 = floor(y), tx = x - x0, ty = y - y0;
    int64_t ix = (int64_t)x0, iy = (int64_t)y0;
    return (1 - ty) * ((1 - tx) * pixel(p, iy, ix) + tx * pixel(p, iy, ix + 1)) +
           ty * ((1 - tx) * pixel(p, iy + 1, ix) + tx * pixel(p, iy + 1, ix + 1));
}

static ts_status gs_kernel(ts_kernel_ctx *k)
{
    const gs_attrs *a = k->attrs;
    const ts_tensor *x = k->in[0], *g = k->in[1];
    ts_tensor *y = k->out[0];
    if (need_float_domain(k)) return k->err->code;
    int64_t n = x->shape.dims[0], ch = x->shape.dims[1], ho = g->shape.dims[1], wo = g->shape.dims[2];
    for (int64_t b = 0; b < n; b++)
        for (int64_t c = 0; c < ch; c++) {
            plane p = {k->num, x, (b * ch + c) * x->shape.dims[2] * x->shape.dims[3], x->shape.dims[2], x->shape.dims[3]};
            for (int64_t i = 0; i < ho * wo; i++) {
                int64_t gi = (b * ho * wo + i) * 2;
                double v = sample(a, &p, el_get(k->num, g, gi), el_get(k->num, g, gi + 1));
                el_set(k->num, y, (b * ch + c) * ho * wo + i, v);
            }
        }
    return TS_OK;
}

const ts_op_desc ts_op_grid_sample = {.opset_min = 16, 
    .name = "GridSample", .attr_size = sizeof(gs_attrs), .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .parse = gs_parse, .emit = gs_emit, .infer = gs_infer, .kernel = gs_kernel,
};
