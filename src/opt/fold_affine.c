/* Per-channel affine nodes folded into the product before them (passes.h,
 * ts_fold_affine): a Conv, ConvTranspose, Gemm or MatMul with constant
 * weights, followed by a chain of inference BatchNormalizations and Muls /
 * Adds of per-channel (or scalar) constants, each the only reader of the
 * one before, computes  scale[f] * P(x)[f] + shift[f]  per output channel
 * f: the weights of channel f are multiplied by scale[f] and shift[f] goes
 * into the bias (a MatMul, which has none, keeps one Add of the shift).
 * Exact in real arithmetic (a product is linear in its weights); in float
 * the products round once instead of twice.  ONNX Runtime's
 * ConvBNFusion / ConvMulFusion / ConvAddFusion / MatMulScaleFusion.  Until
 * 2026-12 the runtime made these folds itself while planning
 * (dnnl/dnnl_util.c), where no check saw them. */
#include <math.h>
#include <stdlib.h>
#include "ir/ir.h"
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/op.h"
#include "opt/passes.h"
#include "rules/apply.h"

#define CHAIN_MAX 16

typedef struct fold {
    int head, axis; /* the product node; the channel axis of its output */
    int64_t F;      /* output channels */
    double *scale, *shift;
    int nodes[CHAIN_MAX], n; /* the affine nodes folded, in order */
    bool scaled;             /* a Mul or BatchNormalization among them */
} fold;

/* The only live node reading v, reading it once; -1 when none, several,
 * or v is a graph output.  users[v]: that node, -1 none, -2 several. */
static int *sole_users(const ts_graph *g)
{
    int *u = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    if (!u) return NULL;
    for (int v = 0; v < g->nvalues; v++) u[v] = -1;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead) continue;
        for (int j = 0; j < nd->ninputs; j++)
            if (nd->inputs[j] >= 0) u[nd->inputs[j]] = u[nd->inputs[j]] == -1 ? n : -2;
    }
    for (int j = 0; j < g->noutputs; j++) u[g->outputs[j]] = -2;
    return u;
}

/* Elements of constant c step by (0: c is one number broadcast; 1: c
 * holds one number per channel along `axis` of `out`), or -1 when c is
 * not such a float32 constant. */
static int per_channel(const ts_tensor *c, const ts_shape *out, int axis, int64_t F)
{
    if (!c || c->dtype != TS_F32 || c->shape.rank > out->rank) return -1;
    int off = out->rank - c->shape.rank, step = 0;
    for (int i = 0; i < c->shape.rank; i++) {
        if (c->shape.dims[i] == 1) continue;
        if (i + off != axis || c->shape.dims[i] != F) return -1;
        step = 1;
    }
    return step;
}

static const ts_tensor *f32_const(const ts_graph *g, int v)
{
    return v >= 0 && g->values[v].constant && g->values[v].dtype == TS_F32 ? g->values[v].constant : NULL;
}

/* Takes node c, reading v, into the chain; false when it is not affine
 * per channel.  Folded in double: the caller rounds once. */
static bool take(const ts_graph *g, int c, int v, fold *f)
{
    const ts_node *nd = &g->nodes[c];
    if (nd->noutputs != 1 || g->values[nd->outputs[0]].dtype != TS_F32 ||
        !ts_shape_eq(&g->values[nd->outputs[0]].shape, &g->values[v].shape))
        return false;
    if (nd->op == &ts_op_batchnorm) {
        /* training_mode normalizes by the batch's statistics, not these */
        if (f->axis != 1 || nd->ninputs != 5 || nd->inputs[0] != v ||
            ((const ts_batchnorm_attrs *)nd->attrs)->training_mode)
            return false;
        const ts_tensor *t[4];
        for (int i = 0; i < 4; i++)
            if (!(t[i] = f32_const(g, nd->inputs[1 + i])) || ts_tensor_numel(t[i]) != f->F) return false;
        double eps = ((const ts_batchnorm_attrs *)nd->attrs)->epsilon;
        for (int64_t k = 0; k < f->F; k++) {
            double s = ts_tensor_get_f64(t[0], k) / sqrt(ts_tensor_get_f64(t[3], k) + eps);
            f->scale[k] *= s;
            f->shift[k] = (f->shift[k] - ts_tensor_get_f64(t[2], k)) * s + ts_tensor_get_f64(t[1], k);
        }
        return f->scaled = true;
    }
    bool add = nd->op == &ts_op_add;
    if ((!add && nd->op != &ts_op_mul) || nd->ninputs != 2) return false;
    int other = nd->inputs[0] == v ? nd->inputs[1] : nd->inputs[0];
    const ts_tensor *t = other == v ? NULL : f32_const(g, other);
    int step = per_channel(t, &g->values[v].shape, f->axis, f->F);
    if (step < 0) return false;
    for (int64_t k = 0; k < f->F; k++) {
        double x = ts_tensor_get_f64(t, k * step);
        if (add)
            f->shift[k] += x;
        else
            f->scale[k] *= x, f->shift[k] *= x;
    }
    f->scaled |= !add;
    return true;
}

/* The head's weight tensor W, where output channel f's weights are, and
 * the bias input (-1: none). */
static bool head(const ts_graph *g, int n, fold *f, const ts_tensor **W, int *bias)
{
    const ts_node *nd = &g->nodes[n];
    if (nd->dead || nd->noutputs != 1 || nd->ninputs < 2 || g->values[nd->outputs[0]].dtype != TS_F32) return false;
    *W = f32_const(g, nd->inputs[1]);
    *bias = nd->ninputs > 2 ? nd->inputs[2] : -1;
    if (!*W || (*bias >= 0 && !f32_const(g, *bias))) return false;
    int r = g->values[nd->outputs[0]].shape.rank, wr = (*W)->shape.rank;
    f->head = n;
    if (nd->op == &ts_op_conv && wr >= 3) {
        f->axis = 1, f->F = (*W)->shape.dims[0];
    } else if (nd->op == &ts_op_conv_transpose && wr >= 3) {
        f->axis = 1, f->F = (*W)->shape.dims[1] * ((const ts_convt_attrs *)nd->attrs)->group;
    } else if (nd->op == &ts_op_matmul && wr == 2 && r >= 2) {
        f->axis = r - 1, f->F = (*W)->shape.dims[1];
    } else if (nd->op == &ts_op_gemm && !((const ts_gemm_attrs *)nd->attrs)->trans_a) {
        const ts_gemm_attrs *a = nd->attrs;
        f->axis = 1, f->F = (*W)->shape.dims[a->trans_b ? 0 : 1];
        /* a bias per row, or one per element, is not a bias per channel */
        if (*bias >= 0 && per_channel(g->values[*bias].constant, &g->values[nd->outputs[0]].shape, 1, f->F) < 0)
            return false;
    } else
        return false;
    return *bias < 0 || ts_tensor_numel(g->values[*bias].constant) == f->F ||
           ts_tensor_numel(g->values[*bias].constant) == 1;
}

/* Weight element i (of W, dims as stored) scales with which channel. */
static int64_t channel_of(const ts_node *nd, const ts_tensor *W, int64_t i)
{
    const int64_t *d = W->shape.dims;
    int64_t per = ts_tensor_numel(W) / (d[0] ? d[0] : 1);
    if (nd->op == &ts_op_conv) return i / (per ? per : 1);
    if (nd->op == &ts_op_matmul) return i % d[1];
    if (nd->op == &ts_op_gemm) return ((const ts_gemm_attrs *)nd->attrs)->trans_b ? i / d[1] : i % d[1];
    /* ConvTranspose: W is [C, F/group, k...], input channel c in group c / (C/group) */
    int64_t group = ((const ts_convt_attrs *)nd->attrs)->group, Fg = d[1], k = per / (Fg ? Fg : 1);
    int64_t c = i / (per ? per : 1), j = (i / (k ? k : 1)) % Fg;
    return c / (d[0] / group) * Fg + j;
}

static int rewrite(ts_graph *g, fold *f, const ts_tensor *W, int bias, const int *users, ts_error *err)
{
    ts_node *nd = &g->nodes[f->head];
    int last = g->nodes[f->nodes[f->n - 1]].outputs[0];
    bool matmul = nd->op == &ts_op_matmul, shift = false;
    for (int64_t k = 0; k < f->F; k++) {
        if (!isfinite(f->scale[k]) || !isfinite(f->shift[k])) return 0; /* Mul by inf: 0 * inf is not W * inf */
        shift |= f->shift[k] != 0;
    }
    /* Scaled in place when nothing else can see the weights (this node is
     * their only reader and the graph their only holder, in memory it owns):
     * a new tensor would hold a second copy of the model's largest weights
     * at once -- a session opening a 32 MiB Gemm peaked at 64 MiB
     * (test_mem_peak).  Otherwise (shared with a copy, memory-mapped) a new
     * constant. */
    char name[64];
    int wv = nd->inputs[1], bv = -1;
    if (users[wv] == f->head && W->refcount == 1 && W->owns_data && !W->keep) {
        float *w = ((ts_tensor *)W)->data;
        for (int64_t i = 0, n = ts_tensor_numel(W); i < n; i++)
            w[i] = (float)((double)w[i] * f->scale[channel_of(nd, W, i)]);
    } else {
        ts_tensor *nw = ts_tensor_new(TS_F32, &W->shape, err);
        if (!nw) return -1;
        for (int64_t i = 0, n = ts_tensor_numel(W); i < n; i++)
            ((float *)nw->data)[i] = (float)(ts_tensor_get_f64(W, i) * f->scale[channel_of(nd, W, i)]);
        wv = ts_graph_add_constant(g, ts_graph_fresh_name(g, "folded_w", name, sizeof name), nw, err);
        ts_tensor_unref(nw);
        if (wv < 0) return -1;
    }
    if (!matmul || shift) {
        const ts_tensor *B = bias >= 0 ? g->values[bias].constant : NULL;
        double beta = nd->op == &ts_op_gemm ? ((const ts_gemm_attrs *)nd->attrs)->beta : 1;
        ts_shape bs = ts_shape_make(1, &f->F);
        ts_tensor *nb = ts_tensor_new(TS_F32, &bs, err);
        if (!nb) return -1;
        for (int64_t k = 0; k < f->F; k++) {
            double b = B ? beta * ts_tensor_get_f64(B, ts_tensor_numel(B) == 1 ? 0 : k) : 0;
            ((float *)nb->data)[k] = (float)(matmul ? f->shift[k] : b * f->scale[k] + f->shift[k]);
        }
        bv = ts_graph_add_constant(g, ts_graph_fresh_name(g, "folded_b", name, sizeof name), nb, err);
        ts_tensor_unref(nb);
        if (bv < 0) return -1;
    }
    nd = &g->nodes[f->head];
    for (int i = 0; i < f->n; i++) g->nodes[f->nodes[i]].dead = true;
    g->nodes[f->head].inputs[1] = wv;
    int writer = f->head;
    if (matmul && shift) { /* MatMul then one Add of the shift, writing the chain's value */
        int in[2] = {nd->outputs[0], bv}, out;
        writer = g->nnodes;
        if (ts_graph_add_node_parsed(g, &ts_op_add, ts_graph_fresh_name(g, "bias", name, sizeof name), in, 2, NULL,
                                     1, NULL, &out, err) < 0)
            return -1;
        g->values[out].producer = -1; /* read and produced by none: goes at compaction */
    } else if (!matmul) {
        if (nd->ninputs < 3) {
            int *ins = realloc(nd->inputs, sizeof(int) * 3);
            if (!ins) return ts_error_set(err, TS_ERR_NOMEM, "node '%s': out of memory folding into its bias", nd->name), -1;
            nd->inputs = ins;
            nd->ninputs = 3;
        }
        nd->inputs[2] = bv;
        if (nd->op == &ts_op_gemm) ((ts_gemm_attrs *)nd->attrs)->beta = 1;
    }
    /* the writer writes the chain's last value itself (a graph output keeps its name) */
    if (writer == f->head) g->values[g->nodes[f->head].outputs[0]].producer = -1;
    g->nodes[writer].outputs[0] = last;
    g->values[last].producer = writer;
    g->values[last].producer_slot = 0;
    return 1;
}

int ts_fold_affine(ts_graph *g, ts_error *err)
{
    int *users = sole_users(g), total = 0, nn = g->nnodes;
    if (!users) return ts_error_set(err, TS_ERR_NOMEM, "out of memory folding affine nodes"), -1;
    for (int n = 0; n < nn && total >= 0; n++) {
        fold f = {0};
        const ts_tensor *W;
        int bias;
        if (!head(g, n, &f, &W, &bias)) continue;
        f.scale = malloc(sizeof(double) * (size_t)f.F);
        f.shift = malloc(sizeof(double) * (size_t)f.F);
        if (!f.scale || !f.shift) {
            ts_error_set(err, TS_ERR_NOMEM, "node '%s': out of memory folding affine nodes", g->nodes[n].name);
            total = -1;
        } else {
            for (int64_t k = 0; k < f.F; k++) f.scale[k] = 1, f.shift[k] = 0;
            int v = g->nodes[n].outputs[0], c;
            while (f.n < CHAIN_MAX && (c = users[v]) >= 0 && take(g, c, v, &f)) {
                f.nodes[f.n++] = c;
                v = g->nodes[c].outputs[0];
            }
            /* a MatMul's Adds alone are its bias: nothing to fold */
            if (f.n && (f.scaled || g->nodes[n].op != &ts_op_matmul)) {
                int r = rewrite(g, &f, W, bias, users, err);
                total = r < 0 ? -1 : total + r;
            }
        }
        free(f.scale);
        free(f.shift);
    }
    free(users);
    if (total > 0) ts_graph_compact(g);
    return total;
}
