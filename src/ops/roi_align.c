/* RoiAlign (opset 10/16): for each region of interest (x1, y1, x2, y2 in
 * input coordinates times spatial_scale) of image batch_indices[r], an
 * output_height x output_width grid of bins, each the average (mode avg)
 * or maximum (mode max: of the weighted corner values, as ONNX Runtime
 * defines it) of sampling_ratio^2 bilinear samples (adaptive,
 * ceil(bin size), when 0).  coordinate_transformation_mode half_pixel
 * (the opset 16 default) shifts by half a pixel; output_half_pixel (the
 * opset 10 behaviour) does not and makes every region at least 1x1. */
#include <math.h>
#include <string.h>
#include "ops/elementwise.h"

typedef struct roi_attrs {
    int max_mode, half_pixel;
    int64_t out_h, out_w, sampling;
    double scale;
} roi_attrs;

static ts_status roi_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    roi_attrs *p = attrs;
    char mode[16], ctm[32];
    if (ts_attr_get_string(a, na, "mode", "avg", mode, sizeof mode, err) ||
        ts_attr_get_string(a, na, "coordinate_transformation_mode", opset >= 16 ? "half_pixel" : "output_half_pixel", ctm,
                           sizeof ctm, err) ||
        ts_attr_get_int(a, na, "output_height", 1, &p->out_h, err) || ts_attr_get_int(a, na, "output_width", 1, &p->out_w, err) ||
        ts_attr_get_int(a, na, "sampling_ratio", 0, &p->sampling, err) ||
        ts_attr_get_float(a, na, "spatial_scale", 1.0, &p->scale, err))
        return err->code;
    if (strcmp(mode, "avg") && strcmp(mode, "max")) return ts_attr_fail(err, ts_attr_find(a, na, "mode"), "expected avg or max");
    if (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel"))
        return ts_attr_fail(err, ts_attr_find(a, na, "coordinate_transformation_mode"),
                            "expected half_pixel or output_half_pixel");
    if (p->out_h < 1 || p->out_w < 1 || p->sampling < 0)
        return ts_error_set(err, TS_ERR_INVALID, "output_height/width must be positive and sampling_ratio non-negative");
    p->max_mode = !strcmp(mode, "max");
    p->half_pixel = !strcmp(ctm, "half_pixel");
    return TS_OK;
}

static int roi_emit(const void *attrs, ts_attr *out, int max)
{
    const roi_attrs *p = attrs;
    if (max < 6) return 0;
    out[0] = ts_attr_string("mode", p->max_mode ? "max" : "avg");
    out[1] = ts_attr_string("coordinate_transformation_mode", p->half_pixel ? "half_pixel" : "output_half_pixel");
    out[2] = ts_attr_int("output_height", p->out_h);
    out[3] = ts_attr_int("output_width", p->out_w);
    out[4] = ts_attr_int("sampling_ratio", p->sampling);
    out[5] = ts_attr_float("spatial_scale", p->scale);
    return 6;
}

static ts_status roi_infer(ts_infer_ctx *c)
{
    const roi_attrs *p = c->attrs;
    const ts_value *x = c->in[0], *r = c->in[1], *b = c->in[2];
    if (!ts_dtype_is_float(x->dtype) || x->shape.rank != 4) return ts_infer_fail(c, "X must be a float [N, C, H, W] tensor");
    if (r->shape.rank != 2 || r->shape.dims[1] != 4) return ts_infer_fail(c, "rois must be [num_rois, 4]");
    if ((b->dtype != TS_I64 && b->dtype != TS_I32) || b->shape.rank != 1 || b->shape.dims[0] != r->shape.dims[0])
        return ts_infer_fail(c, "batch_indices must be int64 with one entry per region");
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = ts_shape_make(4, (int64_t[]){r->shape.dims[0], x->shape.dims[1], p->out_h, p->out_w});
    return TS_OK;
}

static ts_status roi_kernel(ts_kernel_ctx *k)
{
    const roi_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0], *rois = k->in[1], *bi = k->in[2];
    const ts_num *num = k->num;
    if (need_float_domain(k)) return k->err->code;
    int64_t N = x->shape.dims[0], C = x->shape.dims[1], H = x->shape.dims[2], W = x->shape.dims[3];
    int64_t R = rois->shape.dims[0], PH = p->out_h, PW = p->out_w;
    double off = p->half_pixel ? 0.5 : 0;
    for (int64_t r = 0; r < R; r++) {
        int64_t b = ts_tensor_get_i64(bi, r);
        if (b < 0 || b >= N)
            return ts_kernel_fail(k, TS_ERR_INVALID, "batch index %lld of region %lld is out of range", (long long)b, (long long)r);
        double x1 = el_get(num, rois, 4 * r) * p->scale - off, y1 = el_get(num, rois, 4 * r + 1) * p->scale - off;
        double x2 = el_get(num, rois, 4 * r + 2) * p->scale - off, y2 = el_get(num, rois, 4 * r + 3) * p->scale - off;
        double rw = x2 - x1, rh = y2 - y1;
        if (!p->half_pixel) rw = fmax(rw, 1.0), rh = fmax(rh, 1.0);
        double bh = rh / (double)PH, bw = rw / (double)PW;
        int64_t gh = p->sampling > 0 ? p->sampling : (int64_t)ceil(rh / (double)PH);
        int64_t gw = p->sampling > 0 ? p->sampling : (int64_t)ceil(rw / (double)PW);
        double count = (double)(gh * gw > 1 ? gh * gw : 1);
        for (int64_t c = 0; c < C; c++) {
            int64_t base = (b * C + c) * H * W;
            for (int64_t ph = 0; ph < PH; ph++)
                for (int64_t pw = 0; pw < PW; pw++) {
                    double acc = 0;
                    bool first = true;
                    for (int64_t iy = 0; iy < gh; iy++)
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double y = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                            double xx = x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            double v = 0;
                            if (!(y < -1.0 || y > (double)H || xx < -1.0 || xx > (double)W)) {
                                y = fmax(y, 0), xx = fmax(xx, 0);
                                int64_t yl = (int64_t)y, xl = (int64_t)xx, yh, xh;
                                if (yl >= H - 1) yh = yl = H - 1, y = (double)yl;
                                else yh = yl + 1;
                                if (xl >= W - 1) xh = xl = W - 1, xx = (double)xl;
                                else xh = xl + 1;
                                double ly = y - (double)yl, lx = xx - (double)xl, hy = 1 - ly, hx = 1 - lx;
                                double v1 = hy * hx * el_get(num, x, base + yl * W + xl);
                                double v2 = hy * lx * el_get(num, x, base + yl * W + xh);
                                double v3 = ly * hx * el_get(num, x, base + yh * W + xl);
                                double v4 = ly * lx * el_get(num, x, base + yh * W + xh);
                                v = p->max_mode ? fmax(fmax(v1, v2), fmax(v3, v4)) : v1 + v2 + v3 + v4;
                            }
                            if (p->max_mode) acc = first || v > acc ? v : acc;
                            else acc += v;
                            first = false;
                        }
                    el_set(num, k->out[0], ((r * C + c) * PH + ph) * PW + pw, p->max_mode ? acc : acc / count);
                }
        }
    }
    return TS_OK;
}

const ts_op_desc ts_op_roi_align = {.opset_min = 10, 
    .name = "RoiAlign", .attr_size = sizeof(roi_attrs), .min_inputs = 3, .max_inputs = 3, .min_outputs = 1,
    .max_outputs = 1, .parse = roi_parse, .emit = roi_emit, .infer = roi_infer, .kernel = roi_kernel,
};
