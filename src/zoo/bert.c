/* BERT-base encoder (Devlin et al. 2018; TASO's BERT benchmark), laid out as
 * Hugging Face's BertModel exports to ONNX: 12 post-LN layers, hidden 768,
 * 12 heads, FFN 3072 with erf GELU, LayerNorm eps 1e-12.  The input is the
 * embedding output (batch x 128 x 768): the token/position embedding lookup
 * is a Gather that none of the seed papers optimizes, and starting from
 * floats keeps the program all-float for the optimizers. */
#include <math.h>
#include "zoo/transformer.h"
#include "zoo/zoo.h"

/* Dense scaled-dot-product attention as exporters write it: scores =
 * (Q @ K^T) / sqrt(d), Softmax over keys, @ V.  No attention mask: with all
 * tokens valid the exporter's additive mask is zeros. */
static int dense_attention(zb *b, const char *name_, int q, int k, int v, const tf_cfg *c, void *ctx)
{
    (void)ctx;
    ZB_KEEP(name, name_);
    int s = zb_matmul(b, zb_name(b, "%s.scores", name), q, k);
    s = zb_binary(b, "Div", zb_name(b, "%s.scale", name), s,
                  zb_const_scalar(b, zb_name(b, "%s.sqrt_d", name), (float)sqrt((double)(c->hidden / c->heads))));
    s = zb_softmax(b, zb_name(b, "%s.probs", name), s, -1);
    return zb_matmul(b, zb_name(b, "%s.context", name), s, v);
}

ZOO_BUILDER(ts_zoo_bert)
{
    tf_cfg c = {zoo_batch(o), 128, 768, 12, 3072, 1e-12, {0, 2, 3, 1}};
    int layers = o && o->layers > 0 ? o->layers : 12;
    zb b;
    zb_begin(&b, "bert", o, err);
    int64_t in_dims[3] = {c.batch, c.seq, c.hidden};
    int x = zb_input(&b, "input", 3, in_dims);
    for (int i = 0; i < layers; i++)
        x = tf_layer(&b, zb_name(&b, "encoder.layer.%d", i), x, &c, dense_attention, NULL);
    return zb_finish(&b, &x, 1, out);
}
