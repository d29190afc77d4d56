/* Transformer encoder layer shared by the BERT and Longformer builders:
 * everything but the attention core, laid out as PyTorch/Hugging Face
 * exporters write it (MatMul+Add projections, Reshape/Transpose head split,
 * post-LayerNorm residuals, erf GELU), so the graphs look like what users
 * bring.  The attention core is a callback because that is the only part in
 * which the two models differ (dense vs sliding-window band). */
#ifndef TS_ZOO_TRANSFORMER_H
#define TS_ZOO_TRANSFORMER_H

#include "zoo/zb.h"

typedef struct tf_cfg {
    int batch, seq, hidden, heads, ffn;
    double ln_eps;
    /* Transpose perm of K after its head split: {0,2,3,1} gives
     * batch x heads x head_dim x seq (BERT's K^T); {0,2,1,3} gives K like Q. */
    int64_t k_perm[4];
} tf_cfg;

/* Attention core: q and v are batch x heads x seq x head_dim, k is laid out
 * by cfg->k_perm; returns batch x heads x seq x head_dim. */
typedef int (*tf_attention_fn)(zb *b, const char *name, int q, int k, int v, const tf_cfg *c, void *ctx);

/* One post-LN encoder layer: x (batch x seq x hidden) -> same shape. */
int tf_layer(zb *b, const char *name, int x, const tf_cfg *c, tf_attention_fn attn, void *ctx);

/* Constant of any dtype and shape from caller data (index and mask tables). */
int tf_const(zb *b, const char *name, ts_dtype dt, int rank, const int64_t *dims, const void *data);

#endif
