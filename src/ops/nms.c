/* NonMaxSuppression (opset 10/11): per batch and class, boxes taken by
 * descending score (ties: lower box index first), each kept unless its
 * intersection-over-union with a box already kept exceeds iou_threshold;
 * only scores above score_threshold take part, at most
 * max_output_boxes_per_class per class.  Output [M, 3] int64 rows (batch,
 * class, box).  M depends on the values of every input, so all must be
 * known when the graph is built (a session loads the model at the run's
 * values); the kernel repeats the selection on the data it is given. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops/elementwise.h"

typedef struct nms_attrs {
    int center_point_box;
} nms_attrs;

static ts_status nms_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    int64_t v;
    (void)opset;
    if (ts_attr_get_int(a, na, "center_point_box", 0, &v, err)) return err->code;
    if (v != 0 && v != 1) return ts_attr_fail(err, ts_attr_find(a, na, "center_point_box"), "expected 0 or 1");
    ((nms_attrs *)attrs)->center_point_box = (int)v;
    return TS_OK;
}

static int nms_emit(const void *attrs, ts_attr *out, int max)
{
    if (max < 1) return 0;
    out[0] = ts_attr_int("center_point_box", ((const nms_attrs *)attrs)->center_point_box);
    return 1;
}

/* Element access on either a graph constant (declared dtype) or a kernel
 * tensor (float data in the domain's storage). */
typedef struct reader {
    const ts_num *num; /* NULL: declared dtype */
    const ts_tensor *t;
} reader;

static double rd(const reader *r, int64_t i)
{
    return r->num ? el_get(r->num, r->t, i) : ts_tensor_get_f64(r->t, i);
}

typedef struct cand {
    double score;
    int64_t box;
} cand;

static int by_score(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->box > y->box) - (x->box < y->box);
}

/* corners (y1, x1, y2, x2) of box i, ordered */
static void corners(const reader *boxes, int64_t i, int center, double c[4])
{
    double a = rd(boxes, 4 * i), b = rd(boxes, 4 * i + 1), d = rd(boxes, 4 * i + 2), e = rd(boxes, 4 * i + 3);
    if (center) { /* x_center, y_center, width, height */
        c[0] = b - e / 2, c[1] = a - d / 2, c[2] = b + e / 2, c[3] = a + d / 2;
        return;
    }
    c[0] = fmin(a, d), c[1] = fmin(b, e), c[2] = fmax(a, d), c[3] = fmax(b, e);
}

static bool overlaps(const double *p, const double *q, double thr)
{
    double ap = (p[2] - p[0]) * (p[3] - p[1]), aq = (q[2] - q[0]) * (q[3] - q[1]);
    if (ap <= 0 || aq <= 0) return false;
    double h = fmin(p[2], q[2]) - fmax(p[0], q[0]), w = fmin(p[3], q[3]) - fmax(p[1], q[1]);
    if (h <= 0 || w <= 0) return false;
    double inter = h * w;
    return inter / (ap + aq - inter) > thr;
}

/* Runs the selection; writes rows to out (when not NULL) and returns how
 * many, or -1 out of memory. */
static int64_t nms_select(const reader *boxes, const reader *scores, int64_t max_out, double iou, double thr,
                          bool has_thr, int center, int64_t *out)
{
    int64_t nb = scores->t->shape.dims[0], nc = scores->t->shape.dims[1], n = scores->t->shape.dims[2], m = 0;
    cand *c = malloc(sizeof *c * (size_t)(n + 1));
    int64_t *kept = malloc(sizeof *kept * (size_t)(n + 1));
    double *box = malloc(sizeof *box * 4 * (size_t)(n + 1));
    if (!c || !kept || !box) {
        free(c);
        free(kept);
        free(box);
        return -1;
    }
    for (int64_t b = 0; b < nb; b++) {
        for (int64_t i = 0; i < n; i++) corners(boxes, b * n + i, center, box + 4 * i);
        for (int64_t k = 0; k < nc; k++) {
            int64_t nk = 0, nkept = 0;
            for (int64_t i = 0; i < n; i++) {
                double s = rd(scores, (b * nc + k) * n + i);
                if (!has_thr || s > thr) c[nk++] = (cand){s, i};
            }
            qsort(c, (size_t)nk, sizeof *c, by_score);
            for (int64_t j = 0; j < nk && nkept < max_out; j++) {
                bool drop = false;
                for (int64_t q = 0; q < nkept && !drop; q++) drop = overlaps(box + 4 * c[j].box, box + 4 * kept[q], iou);
                if (drop) continue;
                kept[nkept++] = c[j].box;
                if (out) out[3 * m] = b, out[3 * m + 1] = k, out[3 * m + 2] = c[j].box;
                m++;
            }
        }
    }
    free(c);
    free(kept);
    free(box);
    return m;
}

static ts_status nms_infer(ts_infer_ctx *c)
{
    const nms_attrs *p = c->attrs;
    const ts_value *bv = c->in[0], *sv = c->in[1];
    char a[160], b[160];
    if (bv->shape.rank != 3 || bv->shape.dims[2] != 4 || sv->shape.rank != 3 ||
        sv->shape.dims[0] != bv->shape.dims[0] || sv->shape.dims[2] != bv->shape.dims[1])
        return ts_infer_fail(c, "boxes %s and scores %s: expected [batch, boxes, 4] and [batch, classes, boxes]",
                             ts_shape_str(&bv->shape, a, sizeof a), ts_shape_str(&sv->shape, b, sizeof b));
    if (!ts_dtype_is_float(bv->dtype) || !ts_dtype_is_float(sv->dtype))
        return ts_infer_fail(c, "boxes and scores must be float tensors");
    const ts_tensor *bt = ts_infer_const_tensor(c, 0), *st = bt ? ts_infer_const_tensor(c, 1) : NULL;
    if (!st) return c->err->code;
    int64_t max_out = 0;
    double iou = 0, thr = 0;
    int n;
    if (c->nin > 2 && c->in[2] && ts_infer_const_ints(c, 2, &max_out, 1, &n)) return c->err->code;
    if (c->nin > 3 && c->in[3] && ts_infer_const_floats(c, 3, &iou, 1, &n)) return c->err->code;
    if (c->nin > 4 && c->in[4] && ts_infer_const_floats(c, 4, &thr, 1, &n)) return c->err->code;
    if (iou < 0 || iou > 1) return ts_infer_fail(c, "iou_threshold %g is outside [0, 1]", iou);
    int64_t m = nms_select(&(reader){NULL, bt}, &(reader){NULL, st}, max_out, iou, thr, c->nin > 4 && c->in[4],
                           p->center_point_box, NULL);
    if (m < 0) return ts_error_set(c->err, TS_ERR_NOMEM, "out of memory");
    c->out_dtype[0] = TS_I64;
    c->out_shape[0] = ts_shape_make(2, (int64_t[]){m, 3});
    return TS_OK;
}

static ts_status nms_kernel(ts_kernel_ctx *k)
{
    const nms_attrs *p = k->attrs;
    if (need_float_domain(k)) return k->err->code;
    int64_t max_out = k->nin > 2 && k->in[2] ? ts_tensor_get_i64(k->in[2], 0) : 0;
    double iou = k->nin > 3 && k->in[3] ? el_get(k->num, k->in[3], 0) : 0;
    double thr = k->nin > 4 && k->in[4] ? el_get(k->num, k->in[4], 0) : 0;
    reader b = {k->num, k->in[0]}, s = {k->num, k->in[1]};
    int64_t m = nms_select(&b, &s, max_out, iou, thr, k->nin > 4 && k->in[4], p->center_point_box, NULL);
    if (m < 0) return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    /* the output was sized from the values the graph was built with */
    if (m != k->out[0]->shape.dims[0])
        return ts_kernel_fail(k, TS_ERR_INVALID, "%lld boxes selected, the graph was built for %lld", (long long)m,
                              (long long)k->out[0]->shape.dims[0]);
    nms_select(&b, &s, max_out, iou, thr, k->nin > 4 && k->in[4], p->center_point_box, k->out[0]->data);
    return TS_OK;
}

const ts_op_desc ts_op_nms = {.opset_min = 10, 
    .name = "NonMaxSuppression", .attr_size = sizeof(nms_attrs), .min_inputs = 2, .max_inputs = 5,
    .min_outputs = 1, .max_outputs = 1, .parse = nms_parse, .emit = nms_emit, .infer = nms_infer,
    .kernel = nms_kernel,
};
