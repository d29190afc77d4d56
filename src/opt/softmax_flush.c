/* Subnormal probabilities of a masked Softmax flushed to zero
 * (passes.h, ts_flush_softmax_subnormals):
 *
 *     y = Softmax(s)  ->  p = Softmax(s); y = Where(Less(p, FLT_MIN), 0, p)
 *
 * for a float Softmax whose scores come from an Add of a constant holding
 * a value between -206.6 and ln(FLT_MIN) = -87.34 (an additive attention mask:
 * Swin's shifted windows add -100 where two tokens come from different
 * regions of the rolled map), seen through at most a few Reshapes and Adds.
 *
 * What it changes: a probability below the smallest normal float (2^-126)
 * becomes 0; every other value passes bit for bit.  So each probability
 * moves by less than 2^-126 in absolute value, and a MatMul reading them
 * (attention times V over K keys) by less than K * 2^-126 * max|V|: below
 * 1e-30 for any K * max|V| under 1e7, far under every tolerance.  It is what
 * an engine computes with denormals flushed (ONNX Runtime's
 * session.set_denormal_as_zero, a GPU, tsopt's own softmax kernel:
 * vec/vec_softmax.c xv_flush), and the final check compares the written
 * graph in ONNX Runtime as for every rewrite.
 *
 * Why it pays in ONNX Runtime (measured, docs/optimize.md): with the mask,
 * e^(s - max) of a masked score is about e^-100, a subnormal, and MLAS's
 * MatMul that reads the probabilities next (attention x V) runs 20-50x
 * slower on subnormal operands (x86 microcode assists; ORT does not set
 * DAZ unless the session asks): swin_t's shifted blocks' attn @ V 7-9 ms
 * per run against 0.1-0.4 ms in the unshifted ones (ORT profiler, 1 thread,
 * loaded Intel Xeon, 12-07).  With the flush the whole model ran x1.19 per
 * round in CPU time (by hand, 1 thread, 5 alternating rounds of 3, all
 * won).  The Less and Where are two passes over the probabilities, so the
 * rewrite is only offered where the constant makes subnormals expected;
 * whether it pays is the target's cost to decide (a costed pass). */
#include <float.h>
#include <math.h>

#include "ir/ir.h"
#include "ops/list.h"
#include "ops/op.h"
#include "opt/passes.h"

/* How many Reshape/Add producers above the Softmax are searched for the
 * mask: Swin adds the position bias, reshapes to [B, windows, heads, N, N],
 * adds the mask, reshapes back. */
#define FLUSH_DEPTH 6

/* Whether constant value c (float) holds a value in [2 ln(2^-149),
 * ln(FLT_MIN)] = [-206.6, -87.3]: a mask that leaves e^(s - max) of a
 * masked score subnormal for scores spread by up to ~100 (Swin's -100).
 * A mask far below (BERT's -10000, -inf) makes those exactly 0, no
 * subnormal, and is left alone. */
static bool masks_low(const ts_graph *g, int c)
{
    const ts_value *v = &g->values[c];
    if (!v->constant || v->dtype != TS_F32) return false;
    const double hi = log((double)FLT_MIN), lo = 2 * log(0x1p-149);
    for (int64_t i = 0; i < ts_tensor_numel(v->constant); i++) {
        double x = ts_tensor_get_f64(v->constant, i);
        if (x <= hi && x >= lo) return true;
    }
    return false;
}

/* Whether value v is computed by Reshapes and Adds, within FLUSH_DEPTH
 * nodes, one of which adds a constant masks_low holds. */
static bool masked_scores(const ts_graph *g, int v, int depth)
{
    if (v < 0 || depth == 0) return false;
    int p = g->values[v].producer;
    if (p < 0) return false;
    const ts_node *n = &g->nodes[p];
    if (n->dead) return false;
    if (n->op == &ts_op_reshape && n->ninputs >= 1) return masked_scores(g, n->inputs[0], depth - 1);
    if (n->op != &ts_op_add || n->ninputs != 2) return false;
    for (int i = 0; i < 2; i++)
        if (n->inputs[i] >= 0 && masks_low(g, n->inputs[i])) return true;
    for (int i = 0; i < 2; i++)
        if (n->inputs[i] >= 0 && !g->values[n->inputs[i]].constant && masked_scores(g, n->inputs[i], depth - 1))
            return true;
    return false;
}

static int scalar(ts_graph *g, const char *prefix, double x, ts_error *err)
{
    ts_shape s = ts_shape_make(0, NULL);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, err);
    if (!t) return -1;
    ts_tensor_set_f64(t, 0, x);
    char name[64];
    int v = ts_graph_add_constant(g, ts_graph_fresh_name(g, prefix, name, sizeof name), t, err);
    ts_tensor_unref(t);
    return v;
}

/* 1: the Softmax at node k flushed; 0: not a candidate; -1: error. */
static int flush_at(ts_graph *g, int k, ts_error *err)
{
    const ts_node *n = &g->nodes[k];
    if (n->dead || n->op != &ts_op_softmax || n->ninputs != 1 || n->noutputs != 1 || n->inputs[0] < 0) return 0;
    int y = n->outputs[0];
    if (g->values[y].dtype != TS_F32 || g->opset < 9 || ts_graph_is_output(g, y) ||
        !masked_scores(g, n->inputs[0], FLUSH_DEPTH))
        return 0;
    for (int r = 0; r < g->nnodes; r++) /* already flushed: its reader is the Less of a flush */
        for (int j = 0; !g->nodes[r].dead && j < g->nodes[r].ninputs; j++)
            if (g->nodes[r].inputs[j] == y && g->nodes[r].op == &ts_op_less) return 0;
    int lo = scalar(g, "flush_min", (double)FLT_MIN, err), zero = lo < 0 ? -1 : scalar(g, "flush_zero", 0.0, err);
    if (zero < 0) return -1;
    char name[64];
    int in_lt[2] = {y, lo}, lt = -1, ln = g->nnodes;
    if (ts_graph_add_node(g, "Less", ts_graph_fresh_name(g, "flush_less", name, sizeof name), in_lt, 2, NULL, 0, 1,
                          NULL, &lt, err) < 0)
        return -1;
    int in_w[3] = {lt, zero, y}, fresh = -1, wn = g->nnodes;
    if (ts_graph_add_node(g, "Where", ts_graph_fresh_name(g, "flush_where", name, sizeof name), in_w, 3, NULL, 0, 1,
                          NULL, &fresh, err) < 0)
        return -1;
    /* the Softmax writes the fresh value, the Less and the Where read it,
     * the Where writes y: every reader of y unchanged */
    g->nodes[k].outputs[0] = fresh;
    g->values[fresh].producer = k;
    g->values[fresh].producer_slot = 0;
    g->nodes[ln].inputs[0] = fresh;
    g->nodes[wn].inputs[2] = fresh;
    g->nodes[wn].outputs[0] = y;
    g->values[y].producer = wn;
    g->values[y].producer_slot = 0;
    return 1;
}

int ts_flush_softmax_subnormals(ts_graph *g, ts_error *err)
{
    return ts_opt_each_node(g, flush_at, err);
}
