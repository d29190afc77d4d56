/* Longformer-style encoder (Beltagy et al. 2020) as EinNet evaluates it:
 * post-LN transformer layers whose attention is a dilated sliding window,
 * the "G2BMM" (general to band matrix multiplication)
 *     S[b,h,i,j] = sum_c Q[b,h,i,c] K[b,h, i + D(j - W), c],  j in [0, 2W]
 * and its counterpart O[b,h,i,c] = sum_j P[b,h,i,j] V[b,h, i + D(j - W), c].
 * No ONNX operator computes a band product, so it is written in standard
 * operators the way one would export it without a custom op: Gather the
 * 2W+1 key (value) rows of each query through a constant index table, then a
 * batched MatMul against the query (probabilities).  Window positions that
 * fall outside the sequence gather a clamped row and get -1e4 added to their
 * score before Softmax; exp(-1e4) underflows to exactly 0 in float32, so the
 * clamped rows contribute nothing and the result is the band product
 * exactly.  Global attention tokens are left out: EinNet's workload is the
 * sliding-window G2BMM. */
#include <math.h>
#include <stdlib.h>
#include "zoo/transformer.h"
#include "zoo/zoo.h"

typedef struct band {
    int w, dil;
    int idx, mask; /* shared constants: seq x (2w+1) int64 rows, float additive mask */
} band;

static int band_attention(zb *b, const char *name_, int q, int k, int v, const tf_cfg *c, void *ctx)
{
    const band *bd = ctx;
    ZB_KEEP(name, name_);
    int64_t dh = c->hidden / c->heads, win = 2 * bd->w + 1;
    ts_attr axis2 = ts_attr_int("axis", 2);
    /* Hugging Face's Longformer scales the query, not the scores. */
    q = zb_binary(b, "Div", zb_name(b, "%s.scale", name), q,
                  zb_const_scalar(b, zb_name(b, "%s.sqrt_d", name), (float)sqrt((double)dh)));
    /* Keys of each query's window: batch x heads x seq x (2w+1) x head_dim. */
    int ins[2] = {k, bd->idx};
    int kw = zb_node(b, "Gather", zb_name(b, "%s.key_band", name), ins, 2, &axis2, 1);
    /* Query as a column so the band product is one batched MatMul
     * (matrix-vector per query): (2w+1) x head_dim @ head_dim x 1. */
    int64_t qd[5] = {c->batch, c->heads, c->seq, dh, 1};
    q = zb_reshape(b, zb_name(b, "%s.query_col", name), q, 5, qd);
    int s = zb_matmul(b, zb_name(b, "%s.band_scores", name), kw, q);
    int64_t sd[4] = {c->batch, c->heads, c->seq, win};
    s = zb_reshape(b, zb_name(b, "%s.scores", name), s, 4, sd);
    s = zb_binary(b, "Add", zb_name(b, "%s.masked", name), s, bd->mask);
    s = zb_softmax(b, zb_name(b, "%s.probs", name), s, -1);
    int64_t pd[5] = {c->batch, c->heads, c->seq, 1, win};
    s = zb_reshape(b, zb_name(b, "%s.probs_row", name), s, 5, pd);
    ins[0] = v;
    int vw = zb_node(b, "Gather", zb_name(b, "%s.value_band", name), ins, 2, &axis2, 1);
    int o = zb_matmul(b, zb_name(b, "%s.band_context", name), s, vw);
    int64_t od[4] = {c->batch, c->heads, c->seq, dh};
    return zb_reshape(b, zb_name(b, "%s.context", name), o, 4, od);
}

/* Index and mask tables of the dilated window, shared by every layer. */
static void band_tables(zb *b, band *bd, int seq)
{
    int64_t win = 2 * bd->w + 1, dims[2] = {seq, win};
    int64_t *idx = malloc(sizeof *idx * (size_t)(seq * win));
    float *mask = malloc(sizeof *mask * (size_t)(seq * win));
    if (!idx || !mask) {
        ts_error_set(b->err, TS_ERR_NOMEM, "out of memory");
        b->failed = true;
    } else {
        for (int64_t i = 0; i < seq; i++)
            for (int64_t j = 0; j < win; j++) {
                int64_t p = i + bd->dil * (j - bd->w);
                bool in = p >= 0 && p < seq;
                idx[i * win + j] = in ? p : p < 0 ? 0 : seq - 1;
                mask[i * win + j] = in ? 0.0f : -1e4f;
            }
        bd->idx = tf_const(b, "band.index", TS_I64, 2, dims, idx);
        bd->mask = tf_const(b, "band.mask", TS_F32, 2, dims, mask);
    }
    free(idx);
    free(mask);
}

ZOO_BUILDER(ts_zoo_longformer)
{
    /* Hidden 512 / 8 heads of 64 as in EinNet's G2BMM [8, 10000, 64]; the
     * sequence is 1024 rather than 10000 so the reference interpreter (and
     * the gathered windows, seq x (2w+1) x hidden floats) stay tractable. */
    tf_cfg c = {zoo_batch(o), 1024, 512, 8, 2048, 1e-5, {0, 2, 1, 3}};
    band bd = {.w = 64, .dil = 2, .idx = -1, .mask = -1};
    int layers = o && o->layers > 0 ? o->layers : 2;
    zb b;
    zb_begin(&b, "longformer", o, err);
    int64_t in_dims[3] = {c.batch, c.seq, c.hidden};
    int x = zb_input(&b, "input", 3, in_dims);
    band_tables(&b, &bd, c.seq);
    for (int i = 0; i < layers; i++)
        x = tf_layer(&b, zb_name(&b, "encoder.layer.%d", i), x, &c, band_attention, &bd);
    return zb_finish(&b, &x, 1, out);
}
