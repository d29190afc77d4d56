/* Graph passes of the optimize pipeline (passes.c): whole-graph rewrites
 * that the driver runs on every graph it starts from.  Each is an
 * exhaustive application of a rule `tsopt verify` proves
 * (core-matmul-merge, core-conv-merge-*, core-matmul-sum, the concat-0
 * matmul axiom) or plain CSE / constant folding, so no source justifies
 * them: they count under `applied.passes`. */
#ifndef TS_OPT_PASSES_H
#define TS_OPT_PASSES_H

#include "rules/apply.h"

/* Graph passes, in place; each returns how
 * many rewrites it made (0: g untouched) or -1 (err set).  A graph that
 * changed is compacted and validated.
 * - ts_merge_siblings: every MatMul with a constant 2-D weight (optionally
 *   followed by an Add of a constant bias vector) reading value `value`
 *   becomes one MatMul on the concatenated weights and a Split; likewise
 *   group-1 Convs with equal attributes and kernel size (optionally each
 *   followed by a Relu).  value -1: at every value.  (core-matmul-merge /
 *   core-conv-merge-* applied to all siblings at once.)
 * - ts_merge_matmul_sums: Add(MatMul(x, W1), MatMul(y, W2)), constant
 *   weights, -> MatMul(Concat(x, y), [W1; W2]), one Concat per (x, y)
 *   (core-matmul-sum everywhere).
 * - ts_cse: nodes with the same operator, attributes and inputs (constants
 *   holding the same tensor count as the same input) are merged;
 *   nondeterministic operators and graph outputs are left alone. */
int ts_merge_siblings(ts_graph *g, int value, ts_const_cache *cc, ts_error *err);
int ts_merge_matmul_sums(ts_graph *g, ts_const_cache *cc, ts_error *err);
int ts_cse(ts_graph *g, ts_error *err);
/* MatMuls with the same constant weight and independent 2-D left operands
 * (none reachable from another's output): MatMul(Concat(x1..xn, axis 0), W)
 * and a Split of the rows (TASO's concat-0 matmul identity, A-axiom
 * matmul(concat0(x, y), w) = concat0(matmul(x, w), matmul(y, w))). */
int ts_merge_shared_weights(ts_graph *g, ts_const_cache *cc, ts_error *err);
/* Values where ts_merge_siblings would merge something (up to max). */
int ts_merge_candidates(const ts_graph *g, int *values, int max);

/* A Conv, ConvTranspose, Gemm or MatMul with constant weights followed by
 * inference BatchNormalizations and Muls / Adds of per-channel constants
 * (each the only reader of the one before): the scales go into the
 * weights, the shifts into the bias (a MatMul keeps one Add of them).
 * Exact in real arithmetic (fold_affine.c).  Returns the number of
 * products rewritten, or -1 (err set). */
int ts_fold_affine(ts_graph *g, ts_error *err);

/* Conv(Mul(x, g), W, B) -> Conv(x, Mul(W, g), B) where g is one value per
 * channel of x (a squeeze-excite gate), the Mul's result feeds only that
 * group-1 Conv with constant weights, and the weights are at most a
 * quarter of x (fold_gate.c: why it is exact in real arithmetic and when it
 * pays).  Returns the number of folds, or -1 (err set). */
int ts_fold_gate(ts_graph *g, ts_error *err);

/* PRelu(x, s), s one constant float per channel of a rank-4 x, each at
 * most 1 -> Add(x, Relu(Conv(x, s - 1, 1x1, group C))) (prelu_dwconv.c:
 * why it is exact and why it pays in ONNX Runtime).  Returns the number
 * of PRelus rewritten, or -1 (err set). */
int ts_prelu_as_dwconv(ts_graph *g, ts_error *err);

/* Conv(x, W, group G) with I input channels per group, I < 16 dividing 16
 * (k = 16 / I), G a multiple of k and k times the output channels per
 * group a multiple of 16 -> Conv(x, W', group G / k), W' block-diagonal
 * with zeros (group_blocks.c: why it is exact for finite inputs and why it
 * pays in ONNX Runtime).  Returns the number of convolutions rewritten, or
 * -1 (err set). */
int ts_group_conv_blocks(ts_graph *g, ts_error *err);

/* Conv(x, W) over [N, C, T, H, W] with group 1 and temporal dilation 1 ->
 * a 2-D Conv over the frames in the batch, the temporal taps stacked on
 * its input channels (Transpose, Pad, Slice per tap, Concat, Reshape before
 * it; Reshape, Transpose after; conv3d_frames.c: why it is exact and why it
 * pays in ONNX Runtime).  Models at opset 11 or newer.  Returns the number
 * of convolutions rewritten, or -1 (err set). */
int ts_conv3d_as_frames(ts_graph *g, ts_error *err);

/* Transpose whose value is read by a ReduceMean over its last axis and a
 * Sub of it and that mean (a spelled-out LayerNorm) -> the Transpose, then
 * Reshape(·, [0, ..., 0, -1]), the identity, writing the value
 * (layernorm_anchor.c: why it is exact and why it pays in ONNX Runtime).
 * Returns the number of anchors put, or -1 (err set). */
int ts_anchor_layernorm_transpose(ts_graph *g, ts_error *err);
/* Whether value v is read by a ReduceMean over its last axis and by a Sub
 * of v and that mean: the head of a spelled-out LayerNorm. */
bool ts_layernorm_reads(const ts_graph *g, int v);

/* Mul(Transpose(x, perm), c), c a constant with at most one dimension
 * other than 1 -> Transpose(Mul(x, c'), perm), c' the same values on the
 * axis of x the Transpose moves there (scale_transpose.c: why it is exact
 * and where it pays).  Returns the number of Muls moved, or -1 (err set). */
int ts_scale_before_transpose(ts_graph *g, ts_error *err);

/* y = Softmax(s), s computed by Reshapes and Adds one of which adds a
 * float constant holding a value in [-206.6, ln(FLT_MIN) = -87.3] (an
 * additive attention mask such as Swin's -100) -> p = Softmax(s), y = Where(Less(p, FLT_MIN), 0, p): subnormal
 * probabilities become 0, every other value is unchanged (softmax_flush.c:
 * the error bound and why it pays in ONNX Runtime).  Models at opset 9 or
 * newer.  Returns the number of Softmaxes flushed, or -1 (err set). */
int ts_flush_softmax_subnormals(ts_graph *g, ts_error *err);

/* Resize (or Upsample), mode linear, of a float tensor over its last two
 * axes with constant scales or sizes -> MatMul(A_h, MatMul(x, A_w^T)) (the
 * cheaper order first; an axis that is the identity skipped), A the
 * interpolation matrices computed as the Resize kernel computes its weights
 * (resize_matmul.c: why it is right and why it pays in ONNX Runtime).
 * Returns the number of Resizes rewritten, or -1 (err set). */
int ts_resize_as_matmul(ts_graph *g, ts_error *err);

/* Conv whose outer kernel taps read only padding for every output position
 * (a spatial size known, finite weights) -> the same Conv with those taps
 * cut from the kernel and the pads shrunk to match; one tap left: a 1x1
 * conv (conv_dead_taps.c: why it is exact and where it pays).  Returns the
 * number of convolutions rewritten, or -1 (err set). */
int ts_conv_trim_dead_taps(ts_graph *g, ts_error *err);

/* The plan `tsopt run` and `bench` run: o->graph_opt (0: all) applied to
 * g in place, then g planned with o (g must outlive the plan).  Optimize's
 * measurements and `tsopt profile` plan through it, so they time what a
 * session runs. */
ts_status ts_graph_opt_plan(ts_graph *g, const ts_plan_opts *o, ts_plan **out, ts_error *err);

/* AveragePool (same spatial size out as in) read only by a 1x1 stride-1
 * Conv with K < C channels: Conv(AvgPool(x)) -> AvgPool(Conv(x)), the
 * pooling then averaging K channels instead of C (exact: both are linear
 * and one mixes channels, the other pixels; the bias is added after the
 * pooling where padded pixels count in the divisor).  Inception's pool
 * branches.  Returns the number of swaps, or -1 (err set). */
int ts_swap_pool_conv(ts_graph *g, ts_error *err);

/* The other direction where the pooling shrinks the image: a 1x1 stride-1
 * Conv (constant weights, group 1, no padding) whose result feeds, alone
 * and through Pads that change nothing, an AveragePool with k x k windows
 * (k >= 2) at stride k tiling the image exactly (no padding):
 * AvgPool(Conv(x)) -> Conv(AvgPool(x)), k^2 times fewer multiply-adds
 * (DenseNet's transitions).  Exact in real arithmetic: both are linear,
 * the conv mixes channels per pixel, the pool averages pixels per channel,
 * and the average of the bias is the bias.  Returns the number of swaps,
 * or -1 (err set). */
int ts_pool_before_conv(ts_graph *g, ts_error *err);

/* LayerNorm written out over the trailing axes (ReduceMean, Sub, Pow 2 or
 * Mul, ReduceMean, Add eps, Sqrt, Div, then optionally Mul by and Add of
 * constants varying along the normalized axes only) -> one
 * LayerNormalization (fuse_layernorm.c) writing the same value (a graph
 * output keeps its name), matched structurally.  Returns the number of
 * fusions, or -1. */
int ts_fuse_layernorm(ts_graph *g, ts_error *err);

/* GELU written out in any exporter's element-wise spelling (the nodes
 * reading x, scalar constants and each other, ending in one value, whose
 * algebra is exactly 0.5 x (1 + erf(x / sqrt 2)) or the tanh form) -> one
 * Gelu node (fuse_gelu.c) writing the same value.  Returns the number of
 * fusions, or -1. */
int ts_fuse_gelu(ts_graph *g, ts_error *err);

/* The name of the rule of rules/fusions.rules (proved by `tsopt verify`)
 * whose left side is the subgraph `nodes` (nn of them) computing value y
 * from value x and whose right side holds the fused atom `fused`
 * (TS_ROP_GELU, TS_ROP_GELUTANH, TS_ROP_LAYERNORM of rules/rule.h); add
 * and mul operands in either order, one axes set for all reductions
 * (fusion_proof.c).  NULL: no proved rule, the fusion must not be made. */
const char *ts_fusion_rule_of(const ts_graph *g, int x, int y, const int *nodes, int nn, int fused);
/* ReduceMean node nd's axes as a bit mask (bit a: axis a of its input,
 * normalized; the attribute or opset 18's constant input), keepdims only;
 * 0: not one (fusion_proof.c). */
unsigned ts_opt_mean_axes(const ts_graph *g, const ts_node *nd);

/* QDQ products -> QLinearConv / QLinearMatMul (a Gemm: a 1x1 QLinearConv),
 * a Relu before a Q at the type's minimum dropped, DQ -> MaxPool -> Q on
 * the same parameters run on the 8-bit tensor (fuse_qdq.c: why each is
 * ONNX's meaning up to the one rounding the fused kernels make).  Returns
 * the number of rewrites, or -1. */
int ts_fuse_qdq(ts_graph *g, ts_error *err);


/* The only live node reading v (reading it once), v not a graph output;
 * else -1.  The passes' test for "this value can be rewritten away". */
int ts_opt_sole_user(const ts_graph *g, int v);
/* The end of a pass that rewrote `total` places: the graph compacted and
 * validated when any; total, or -1 (err set). */
int ts_opt_settle(ts_graph *g, int total, ts_error *err);
/* A pass over the nodes g has now (nodes the rewrite adds are not
 * candidates): at(g, n) rewrites at n (1), declines (0) or fails (-1);
 * then ts_opt_settle. */
int ts_opt_each_node(ts_graph *g, int (*at)(ts_graph *g, int n, ts_error *err), ts_error *err);
/* Node n, just added with one fresh output, writes the value y instead (a
 * graph output keeps its name); the fresh value, produced and read by
 * none, goes at compaction. */
void ts_opt_take_value(ts_graph *g, int n, int y);

#endif
