/* Shared transformer encoder layer (see transformer.h). */
#include <math.h>
#include <string.h>
#include "zoo/transformer.h"

int tf_const(zb *b, const char *name, ts_dtype dt, int rank, const int64_t *dims, const void *data)
{
    if (b->failed) return -1;
    ts_shape s = ts_shape_make(rank, dims);
    ts_tensor *t = ts_tensor_new(dt, &s, b->err);
    int v = -1;
    if (t) {
        memcpy(t->data, data, t->nbytes);
        v = ts_graph_add_constant(b->g, name, t, b->err);
        ts_tensor_unref(t);
    }
    if (v < 0) b->failed = true;
    return v;
}

/* Linear projection then split into heads: batch x seq x hidden ->
 * Reshape batch x seq x heads x head_dim -> Transpose(perm). */
static int heads(zb *b, const char *name_, int x, const tf_cfg *c, const int64_t *perm)
{
    ZB_KEEP(name, name_);
    int y = zb_linear(b, name, x, c->hidden, true);
    int64_t d[4] = {c->batch, c->seq, c->heads, c->hidden / c->heads};
    y = zb_reshape(b, zb_name(b, "%s.split", name), y, 4, d);
    return zb_transpose(b, zb_name(b, "%s.heads", name), y, 4, perm);
}

int tf_layer(zb *b, const char *name_, int x, const tf_cfg *c, tf_attention_fn attn, void *ctx)
{
    ZB_KEEP(name, name_);
    static const int64_t qv_perm[4] = {0, 2, 1, 3};
    int q = heads(b, zb_name(b, "%s.attention.query", name), x, c, qv_perm);
    int k = heads(b, zb_name(b, "%s.attention.key", name), x, c, c->k_perm);
    int v = heads(b, zb_name(b, "%s.attention.value", name), x, c, qv_perm);
    int ctxv = b->failed ? -1 : attn(b, zb_name(b, "%s.attention.core", name), q, k, v, c, ctx);
    if (ctxv < 0) b->failed = true;
    /* Merge heads back: batch x heads x seq x head_dim -> batch x seq x hidden. */
    ctxv = zb_transpose(b, zb_name(b, "%s.attention.merge", name), ctxv, 4, qv_perm);
    int64_t d[3] = {c->batch, c->seq, c->hidden};
    ctxv = zb_reshape(b, zb_name(b, "%s.attention.context", name), ctxv, 3, d);
    int y = zb_linear(b, zb_name(b, "%s.attention.output", name), ctxv, c->hidden, true);
    y = zb_binary(b, "Add", zb_name(b, "%s.attention.residual", name), y, x);
    x = zb_layernorm(b, zb_name(b, "%s.attention.norm", name), y, c->ln_eps);
    y = zb_linear(b, zb_name(b, "%s.intermediate", name), x, c->ffn, true);
    y = zb_gelu(b, zb_name(b, "%s.intermediate.gelu", name), y);
    y = zb_linear(b, zb_name(b, "%s.output", name), y, c->hidden, true);
    y = zb_binary(b, "Add", zb_name(b, "%s.output.residual", name), y, x);
    return zb_layernorm(b, zb_name(b, "%s.output.norm", name), y, c->ln_eps);
}
