/* DepthToSpace and SpaceToDepth: move blocksize x blocksize tiles between
 * the channel and the spatial dimensions of an NCHW tensor.  DepthToSpace's
 * mode DCR (default) reads the channel as (block row, block col, channel),
 * CRD as (channel, block row, block col).  Pure data movement: exact. */
#include <string.h>
#include "ops/op.h"

typedef struct ds_attrs {
    int64_t blocksize;
    int crd;      /* DepthToSpace mode CRD */
    int has_mode; /* write the mode back only when the model had it */
} ds_attrs;

static ts_status ds_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ds_attrs *p = attrs;
    char mode[8];
    (void)opset;
    if (!ts_attr_find(a, na, "blocksize")) return ts_error_set(err, TS_ERR_INVALID, "attribute 'blocksize' is required");
    if (ts_attr_get_int(a, na, "blocksize", 0, &p->blocksize, err)) return err->code;
    if (p->blocksize < 1) return ts_attr_fail(err, ts_attr_find(a, na, "blocksize"), "must be at least 1");
    p->has_mode = ts_attr_find(a, na, "mode") != NULL;
    if (ts_attr_get_string(a, na, "mode", "DCR", mode, sizeof mode, err)) return err->code;
    if (strcmp(mode, "DCR") && strcmp(mode, "CRD"))
        return ts_attr_fail(err, ts_attr_find(a, na, "mode"), "expected DCR or CRD");
    p->crd = !strcmp(mode, "CRD");
    return TS_OK;
}

static int ds_emit(const void *attrs, ts_attr *out, int max)
{
    const ds_attrs *p = attrs;
    int n = 0;
    if (max < 2) return 0;
    out[n++] = ts_attr_int("blocksize", p->blocksize);
    if (p->has_mode) out[n++] = ts_attr_string("mode", p->crd ? "CRD" : "DCR");
    return n;
}

static ts_status ds_infer(ts_infer_ctx *c, bool to_space)
{
    const ds_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int64_t b = p->blocksize;
    if (x->shape.rank != 4) return ts_infer_fail(c, "input '%s' has rank %d, expected 4 (NCHW)", x->name, x->shape.rank);
    ts_shape o = x->shape;
    if (to_space) {
        if (o.dims[1] % (b * b))
            return ts_infer_fail(c, "channels %lld are not a multiple of blocksize^2 = %lld", (long long)o.dims[1],
                                 (long long)(b * b));
        o.dims[1] /= b * b, o.dims[2] *= b, o.dims[3] *= b;
    } else {
        if (o.dims[2] % b || o.dims[3] % b)
            return ts_infer_fail(c, "height %lld and width %lld must be multiples of blocksize %lld",
                                 (long long)o.dims[2], (long long)o.dims[3], (long long)b);
        o.dims[1] *= b * b, o.dims[2] /= b, o.dims[3] /= b;
    }
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = o;
    return TS_OK;
}
static ts_status d2s_infer(ts_infer_ctx *c) { return ds_infer(c, true); }
static ts_status s2d_infer(ts_infer_ctx *c) { return ds_infer(c, false); }

/* Walks the space side (N, C, H*b, W*b) and the matching depth-side element. */
static ts_status ds_kernel(ts_kernel_ctx *k, bool to_space)
{
    const ds_attrs *p = k->attrs;
    const ts_tensor *sp = to_space ? k->out[0] : k->in[0], *dp = to_space ? k->in[0] : k->out[0];
    int64_t b = p->blocksize, N = sp->shape.dims[0], C = sp->shape.dims[1], H = dp->shape.dims[2],
            W = dp->shape.dims[3];
    size_t es = ts_dtype_size(sp->dtype);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < b; i++)
                    for (int64_t w = 0; w < W; w++)
                        for (int64_t j = 0; j < b; j++) {
                            int64_t dc = to_space && p->crd ? c * b * b + i * b + j : (i * b + j) * C + c;
                            int64_t s = ((n * C + c) * H * b + h * b + i) * W * b + w * b + j;
                            int64_t d = ((n * C * b * b + dc) * H + h) * W + w;
                            if (to_space)
                                memcpy((char *)k->out[0]->data + (size_t)s * es,
                                       (const char *)k->in[0]->data + (size_t)d * es, es);
                            else
                                memcpy((char *)k->out[0]->data + (size_t)d * es,
                                       (const char *)k->in[0]->data + (size_t)s * es, es);
                        }
    return TS_OK;
}
static ts_status d2s_kernel(ts_kernel_ctx *k) { return ds_kernel(k, true); }
static ts_status s2d_kernel(ts_kernel_ctx *k) { return ds_kernel(k, false); }

static double no_flops(const ts_node *n, const ts_graph *g)
{
    (void)n, (void)g;
    return 0;
}

#define DS(NAME) .name = NAME, .attr_size = sizeof(ds_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, \
                 .max_outputs = 1, .flags = TS_OP_EXACT | TS_OP_MOVEMENT, .linear_inputs = 0x1,                      \
                 .parse = ds_parse, .emit = ds_emit, .flops = no_flops
const ts_op_desc ts_op_depth_to_space = {.opset_min = 1, DS("DepthToSpace"), .infer = d2s_infer, .kernel = d2s_kernel};
const ts_op_desc ts_op_space_to_depth = {.opset_min = 1, DS("SpaceToDepth"), .infer = s2d_infer, .kernel = s2d_kernel};
