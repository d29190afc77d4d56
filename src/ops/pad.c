/* Pad: modes constant, reflect and edge.  Pads are an attribute before
 * opset 11 ([b1..bn, e1..en], with 'value'), inputs from 11 on (pads,
 * optional constant_value, and from 18 optional axes).  Negative pads
 * crop. */
#include <stdio.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/op.h"

/* the struct is in attrs.h: the runtime's vec.pad kernel reads it */
enum { PAD_CONSTANT = TS_PAD_CONSTANT, PAD_REFLECT = TS_PAD_REFLECT, PAD_EDGE = TS_PAD_EDGE };
static const char *const mode_names[] = {"constant", "reflect", "edge"};

typedef ts_pad_attrs pad_attrs;

static ts_status pad_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    pad_attrs *p = attrs;
    char mode[32];
    if (ts_attr_get_string(a, na, "mode", "constant", mode, sizeof mode, err) ||
        ts_attr_get_ints(a, na, "pads", p->pads, 2 * TS_MAX_RANK, &p->npads, err) ||
        ts_attr_get_float(a, na, "value", 0.0, &p->value, err))
        return err->code;
    p->mode = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(mode, mode_names[i])) p->mode = i;
    if (p->mode < 0)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "attribute 'mode': '%s' is not supported (expected constant, "
                                                     "reflect or edge)", mode);
    if (opset < 11 && p->npads < 0) return ts_error_set(err, TS_ERR_INVALID, "attribute 'pads' is required before opset 11");
    return TS_OK;
}

static int pad_emit(const void *attrs, ts_attr *out, int max)
{
    const pad_attrs *p = attrs;
    int n = 0;
    if (n < max) out[n++] = ts_attr_string("mode", mode_names[p->mode]);
    if (p->npads >= 0 && n < max) out[n++] = ts_attr_ints("pads", p->pads, p->npads);
    if (p->npads >= 0 && p->value != 0 && n < max) out[n++] = ts_attr_float("value", p->value);
    return n;
}

/* Spreads the pads over all axes: begin[d], end[d]. */
static const char *pads_spread(int rank, const int64_t *pads, int npads, const int64_t *axes, int naxes,
                               int64_t *begin, int64_t *end, char *msg, size_t msz)
{
    int n = naxes >= 0 ? naxes : rank;
    for (int d = 0; d < rank; d++) begin[d] = end[d] = 0;
    if (npads != 2 * n) {
        snprintf(msg, msz, "%d pads given, expected %d (two per axis)", npads, 2 * n);
        return msg;
    }
    for (int i = 0; i < n; i++) {
        int d = i;
        if (naxes >= 0 && !ts_axis_norm(axes[i], rank, &d)) {
            snprintf(msg, msz, "axis %lld is out of range for rank %d", (long long)axes[i], rank);
            return msg;
        }
        begin[d] = pads[i];
        end[d] = pads[i + n];
    }
    return NULL;
}

static ts_status pad_infer(ts_infer_ctx *c)
{
    const pad_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int64_t pads[2 * TS_MAX_RANK], axes[TS_MAX_RANK], begin[TS_MAX_RANK], end[TS_MAX_RANK];
    int npads = p->npads, naxes = -1, r = x->shape.rank;
    char msg[200];
    if (c->opset >= 11) {
        if (c->nin < 2 || !c->in[1]) return ts_infer_fail(c, "expected a pads input (opset %d)", c->opset);
        if (ts_infer_const_ints(c, 1, pads, 2 * TS_MAX_RANK, &npads)) return c->err->code;
        if (c->nin > 2 && c->in[2]) {
            if (c->in[2]->dtype != x->dtype)
                return ts_infer_fail(c, "constant_value is %s, expected %s like the data",
                                     ts_dtype_name(c->in[2]->dtype), ts_dtype_name(x->dtype));
            if (ts_shape_numel(&c->in[2]->shape) != 1)
                return ts_infer_fail(c, "constant_value must have one element");
        }
        if (c->nin > 3 && c->in[3] && ts_infer_const_ints(c, 3, axes, TS_MAX_RANK, &naxes)) return c->err->code;
    } else {
        memcpy(pads, p->pads, sizeof pads);
    }
    if (pads_spread(r, pads, npads, axes, naxes, begin, end, msg, sizeof msg)) return ts_infer_fail(c, "%s", msg);
    ts_shape out = x->shape;
    for (int d = 0; d < r; d++) {
        int64_t dim = x->shape.dims[d];
        out.dims[d] = dim + begin[d] + end[d];
        if (out.dims[d] < 0)
            return ts_infer_fail(c, "pads %lld and %lld crop more than the %lld elements of axis %d",
                                 (long long)begin[d], (long long)end[d], (long long)dim, d);
        if (p->mode == PAD_REFLECT && (begin[d] > dim - 1 || end[d] > dim - 1) && (begin[d] > 0 || end[d] > 0))
            return ts_infer_fail(c, "reflect pads on axis %d must be smaller than its size %lld", d, (long long)dim);
        if (p->mode == PAD_EDGE && dim == 0 && (begin[d] > 0 || end[d] > 0))
            return ts_infer_fail(c, "edge padding of the empty axis %d", d);
    }
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = out;
    return TS_OK;
}

static int read_ints(const ts_tensor *t, int64_t *out, int max)
{
    if (!t) return -1;
    int64_t n = ts_tensor_numel(t);
    for (int64_t i = 0; i < n && i < max; i++) out[i] = ts_tensor_get_i64(t, i);
    return (int)(n < max ? n : max);
}

static ts_status pad_kernel(ts_kernel_ctx *k)
{
    const pad_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    int64_t pads[2 * TS_MAX_RANK], axes[TS_MAX_RANK], begin[TS_MAX_RANK], end[TS_MAX_RANK];
    int npads = p->npads, naxes = -1, r = x->shape.rank;
    size_t elem = ts_dtype_size(y->dtype);
    unsigned char cval[16] = {0}; /* zero bytes are zero in every domain */
    char msg[200];
    if (k->opset >= 11) {
        npads = read_ints(k->in[1], pads, 2 * TS_MAX_RANK);
        if (k->nin > 3) naxes = read_ints(k->in[3], axes, TS_MAX_RANK);
        if (k->nin > 2 && k->in[2]) memcpy(cval, k->in[2]->data, elem); /* already in the domain's storage */
    } else {
        memcpy(pads, p->pads, sizeof pads);
        if (ts_dtype_is_float(y->dtype) || y->dtype == k->num->storage)
            k->num->from_f64(cval, p->value);
        else {
            ts_tensor one = {.dtype = y->dtype, .data = cval, .nbytes = elem};
            ts_tensor_set_f64(&one, 0, p->value);
        }
    }
    if (pads_spread(r, pads, npads, axes, naxes, begin, end, msg, sizeof msg))
        return ts_kernel_fail(k, TS_ERR_INVALID, "%s", msg);
    int64_t xs[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, n = ts_tensor_numel(y);
    ts_shape_strides(&x->shape, xs);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        bool inside = true;
        for (int d = 0; d < r; d++) {
            int64_t dim = x->shape.dims[d], j = idx[d] - begin[d];
            if (j < 0 || j >= dim) {
                if (p->mode == PAD_CONSTANT) {
                    inside = false;
                    break;
                }
                if (p->mode == PAD_EDGE)
                    j = j < 0 ? 0 : dim - 1;
                else
                    j = j < 0 ? -j : 2 * (dim - 1) - j;
            }
            off += j * xs[d];
        }
        memcpy((char *)y->data + (size_t)i * elem, inside ? (const char *)x->data + (size_t)off * elem : (const char *)cval,
               elem);
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < y->shape.dims[d]) break;
            idx[d] = 0;
        }
    }
    return TS_OK;
}

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

/* Degree 1 in the data (docs/pet.md: with a non-zero pad value, affine). */
const ts_op_desc ts_op_pad = {.opset_min = 2, 
    .name = "Pad", .attr_size = sizeof(pad_attrs), .min_inputs = 1, .max_inputs = 4, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1, .parse = pad_parse, .emit = pad_emit,
    .infer = pad_infer, .kernel = pad_kernel, .flops = no_flops,
};
