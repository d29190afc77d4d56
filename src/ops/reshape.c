/* Reshape, Flatten, Squeeze, Unsqueeze: new shapes over the same row-major
 * data.  The kernel is one copy; only inference differs. */
#include <stdio.h>
#include <string.h>
#include "ops/op.h"

static ts_status relabel_kernel(ts_kernel_ctx *k)
{
    if (k->out[0]->nbytes) memcpy(k->out[0]->data, k->in[0]->data, k->out[0]->nbytes);
    return TS_OK;
}

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

/* ------------------------------------------------------------- Reshape */

typedef struct reshape_attrs {
    int64_t allowzero;
} reshape_attrs;

static ts_status reshape_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    reshape_attrs *p = attrs;
    (void)opset;
    if (ts_attr_get_int(a, na, "allowzero", 0, &p->allowzero, err)) return err->code;
    if (p->allowzero != 0 && p->allowzero != 1)
        return ts_error_set(err, TS_ERR_INVALID, "attribute 'allowzero' must be 0 or 1");
    return TS_OK;
}

static int reshape_emit(const void *attrs, ts_attr *out, int max)
{
    const reshape_attrs *p = attrs;
    if (!p->allowzero || max < 1) return 0;
    out[0] = ts_attr_int("allowzero", 1);
    return 1;
}

static ts_status reshape_infer(ts_infer_ctx *c)
{
    const reshape_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int64_t want[TS_MAX_RANK];
    int n, infer_at = -1;
    char sa[160], sb[160];
    if (c->nin < 2 || !c->in[1]) return ts_infer_fail(c, "expected a shape input (opset 5 form)");
    if (c->in[1]->shape.rank != 1) return ts_infer_fail(c, "shape input must be 1-D");
    if (ts_infer_const_ints(c, 1, want, TS_MAX_RANK, &n)) return c->err->code;
    ts_shape out = ts_shape_make(n, want);
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        if (want[i] == -1) {
            if (infer_at >= 0) return ts_infer_fail(c, "shape has more than one -1");
            infer_at = i;
            continue;
        }
        if (want[i] < -1) return ts_infer_fail(c, "shape entry %lld at %d is invalid", (long long)want[i], i);
        if (want[i] == 0 && !p->allowzero) {
            if (i >= x->shape.rank)
                return ts_infer_fail(c, "shape entry 0 at %d copies a dimension the %d-D input lacks", i,
                                     x->shape.rank);
            out.dims[i] = x->shape.dims[i];
        }
        /* guard the product: shape inputs are user data (fuzzing found this) */
        if (out.dims[i] > TS_MAX_ELEMENTS || (out.dims[i] && known > TS_MAX_ELEMENTS / out.dims[i]))
            return ts_infer_fail(c, "shape entry %lld at %d makes the tensor too large", (long long)out.dims[i], i);
        known *= out.dims[i];
    }
    int64_t total = ts_shape_numel(&x->shape);
    if (infer_at >= 0) {
        if (known == 0 || total % known) {
            size_t at = 0;
            for (int i = 0; i < n && at < sizeof sb; i++)
                at += (size_t)snprintf(sb + at, sizeof sb - at, i ? "x%lld" : "%lld",
                                       (long long)(i == infer_at ? -1 : out.dims[i]));
            return ts_infer_fail(c, "cannot reshape %s (%lld elements) to %s", ts_shape_str(&x->shape, sa, sizeof sa),
                                 (long long)total, sb);
        }
        out.dims[infer_at] = total / known;
    }
    if (ts_shape_numel(&out) != total)
        return ts_infer_fail(c, "cannot reshape %s (%lld elements) to %s", ts_shape_str(&x->shape, sa, sizeof sa),
                             (long long)total, ts_shape_str(&out, sb, sizeof sb));
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = out;
    return TS_OK;
}

const ts_op_desc ts_op_reshape = {.opset_min = 5, 
    .name = "Reshape", .attr_size = sizeof(reshape_attrs), .min_inputs = 2, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1, .parse = reshape_parse,
    .emit = reshape_emit, .infer = reshape_infer, .kernel = relabel_kernel, .flops = no_flops,
};

/* ------------------------------------------------------------- Flatten */

typedef struct flatten_attrs {
    int64_t axis;
} flatten_attrs;

static ts_status flatten_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    flatten_attrs *p = attrs;
    (void)opset;
    return ts_attr_get_int(a, na, "axis", 1, &p->axis, err);
}

static int flatten_emit(const void *attrs, ts_attr *out, int max)
{
    const flatten_attrs *p = attrs;
    if (max < 1) return 0;
    out[0] = ts_attr_int("axis", p->axis);
    return 1;
}

static ts_status flatten_infer(ts_infer_ctx *c)
{
    const flatten_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int r = x->shape.rank;
    /* axis may equal rank (everything in the first dimension) */
    int64_t axis = p->axis < 0 ? p->axis + r : p->axis;
    if (axis < 0 || axis > r)
        return ts_infer_fail(c, "axis %lld is out of range for rank %d (expected %d to %d)", (long long)p->axis, r,
                             -r, r);
    int64_t a = 1, b = 1;
    for (int d = 0; d < r; d++) *(d < axis ? &a : &b) *= x->shape.dims[d];
    int64_t dims[2] = {a, b};
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = ts_shape_make(2, dims);
    return TS_OK;
}

const ts_op_desc ts_op_flatten = {.opset_min = 1, 
    .name = "Flatten", .attr_size = sizeof(flatten_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1, .parse = flatten_parse,
    .emit = flatten_emit, .infer = flatten_infer, .kernel = relabel_kernel, .flops = no_flops,
};

/* ---------------------------------------------------- Squeeze, Unsqueeze */

/* Axes are an attribute before opset 13 and an input from 13 on. */
typedef struct axes_attrs {
    int naxes; /* -1: absent */
    int64_t axes[TS_MAX_RANK];
} axes_attrs;

static ts_status axes_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    axes_attrs *p = attrs;
    (void)opset;
    return ts_attr_get_ints(a, na, "axes", p->axes, TS_MAX_RANK, &p->naxes, err);
}

static int axes_emit(const void *attrs, ts_attr *out, int max)
{
    const axes_attrs *p = attrs;
    if (p->naxes < 0 || max < 1) return 0;
    out[0] = ts_attr_ints("axes", p->axes, p->naxes);
    return 1;
}

/* Reads the axes from the input (opset >= 13) or the attribute; *n = -1
 * when there are none. */
static ts_status axes_get(ts_infer_ctx *c, int64_t *axes, int *n)
{
    const axes_attrs *p = c->attrs;
    if (c->opset >= 13) {
        *n = -1;
        if (c->nin > 1 && c->in[1]) return ts_infer_const_ints(c, 1, axes, TS_MAX_RANK, n);
        return TS_OK;
    }
    *n = p->naxes;
    memcpy(axes, p->axes, sizeof p->axes);
    return TS_OK;
}

static ts_status squeeze_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0];
    int64_t axes[TS_MAX_RANK];
    bool drop[TS_MAX_RANK] = {0};
    int n, r = x->shape.rank;
    if (axes_get(c, axes, &n)) return c->err->code;
    if (n < 0)
        for (int d = 0; d < r; d++) drop[d] = x->shape.dims[d] == 1;
    for (int i = 0; i < n; i++) {
        int d;
        if (!ts_axis_norm(axes[i], r, &d))
            return ts_infer_fail(c, "axis %lld is out of range for rank %d", (long long)axes[i], r);
        if (x->shape.dims[d] != 1)
            return ts_infer_fail(c, "cannot squeeze axis %d of size %lld (expected size 1)", d,
                                 (long long)x->shape.dims[d]);
        drop[d] = true;
    }
    ts_shape out = {0};
    for (int d = 0; d < r; d++)
        if (!drop[d]) out.dims[out.rank++] = x->shape.dims[d];
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = out;
    return TS_OK;
}

static ts_status unsqueeze_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0];
    int64_t axes[TS_MAX_RANK];
    bool add[TS_MAX_RANK] = {0};
    int n;
    if (axes_get(c, axes, &n)) return c->err->code;
    if (n < 0) return ts_infer_fail(c, "axes are required (%s)", c->opset >= 13 ? "second input" : "attribute");
    int r = x->shape.rank + n;
    if (r > TS_MAX_RANK) return ts_infer_fail(c, "output rank %d exceeds %d", r, TS_MAX_RANK);
    for (int i = 0; i < n; i++) {
        int d;
        if (!ts_axis_norm(axes[i], r, &d))
            return ts_infer_fail(c, "axis %lld is out of range for output rank %d", (long long)axes[i], r);
        if (add[d]) return ts_infer_fail(c, "axis %d appears twice", d);
        add[d] = true;
    }
    ts_shape out = {.rank = r};
    for (int d = 0, j = 0; d < r; d++) out.dims[d] = add[d] ? 1 : x->shape.dims[j++];
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = out;
    return TS_OK;
}

const ts_op_desc ts_op_squeeze = {.opset_min = 1, 
    .name = "Squeeze", .attr_size = sizeof(axes_attrs), .min_inputs = 1, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1, .parse = axes_parse,
    .emit = axes_emit, .infer = squeeze_infer, .kernel = relabel_kernel, .flops = no_flops,
};
const ts_op_desc ts_op_unsqueeze = {.opset_min = 1, 
    .name = "Unsqueeze", .attr_size = sizeof(axes_attrs), .min_inputs = 1, .max_inputs = 2, .min_outputs = 1,
    .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1, .parse = axes_parse,
    .emit = axes_emit, .infer = unsqueeze_infer, .kernel = relabel_kernel, .flops = no_flops,
};
