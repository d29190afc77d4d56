/* The lowering stage's fused groups (issue 27 §3: "one lowering stage
 * forms fused steps from adjacent nodes ... kernels no longer walk the
 * graph").  Before a kernel that serves a group is asked to build node n,
 * this stage decides the group: which adjacent nodes the step computes,
 * and what it needs to know of them (values, constants, geometry).  The
 * kernel is then asked only when the group forms, builds from the group
 * alone (it reads no node: xplan_node refuses one it was not handed, and
 * tests/cli/kernel_nodes.sh keeps graph walks out of its file), and the
 * plan claims the group's nodes for the step.  A kernel so served never
 * declines after touching the plan.
 *
 * Kernels served so far: vec.layernorm.ops, vec.batchnorm, vec.shuffle, vec.slice_transpose,
 * vec.eltwise's element-wise chains (lower_chain.c), vec.attention and
 * vec.sdpa (lower_attention.c), vec.gemv's stacked products and epilogue chain
 * (lower_gemv.c), vec.band and the Gather it reads through (lower_band.c),
 * vec.concat with the Relus reading it and dnnl.dense_concat's chains
 * (lower_concat.c),
 * dnnl.matmul_integer
 * with the requantization after it, and the convolutions and products
 * with their post-op tails (lower_post.c: dnnl.conv, dnnl.deconv,
 * deconv.gemm, vec.dwconv, vec.gconv, dnnl.conv_gated, dnnl.matmul, dnnl.gemm,
 * vec.se).  The list in tests/cli/kernel_nodes.sh says which files are
 * served.  Every kernel, served or not, decides what it may decline on
 * before it makes a buffer or a step (xplan_value_layout answers layout
 * questions without making one): the plan keeps no undo, and
 * xplan_build_step fails a plan whose kernel declined after changing it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_util.h"
#include "exec/half.h"
#include "vec/vec.h"
#include "ops/attrs.h"
#include "ops/list.h"

/* ---------------------------------------- LayerNorm written out in ops
 *
 * m = ReduceMean(x), d = Sub(x, m), v = ReduceMean(Pow(d, 2) or Mul(d, d)),
 * y = Div(d, Sqrt(Add(v, eps))) [, Mul(y, gamma)] [, Add(y, beta)], over
 * trailing axes or a block of axes followed by others (NCHW's channels);
 * the intermediate values read by the pattern only; gamma and beta
 * constants varying along the normalized axes only.  In a half plan
 * through half.c's refusal, every node rounding to the same type (the
 * kernel rounds as each node would), rows only. */

/* The geometry of a ReduceMean that keeps its dims: x viewed as
 * [outer, d, inner] with the reduced axes in the middle (size-1 dims
 * anywhere are free); mask[k]: axis k is reduced. */
static bool mean_geom(const xplan *p, int r, xgroup_layernorm *gm)
{
    const ts_node *nd = &p->g->nodes[r];
    if (nd->op != &ts_op_reducemean || nd->noutputs != 1 || p->g->values[nd->inputs[0]].dtype != TS_F32 ||
        p->g->values[nd->outputs[0]].dtype != TS_F32) /* axes (opset 18) are int64 */
        return false;
    const ts_reduce_attrs *a = nd->attrs;
    const ts_shape *sh = &p->g->values[nd->inputs[0]].shape;
    int64_t axes[TS_MAX_RANK];
    int naxes = a->naxes;
    if (!a->keepdims || sh->rank < 1) return false;
    memcpy(axes, a->axes, sizeof axes);
    if (nd->ninputs > 1 && nd->inputs[1] >= 0) { /* opset 18: axes as an input */
        const ts_tensor *t = xplan_const(p, nd->inputs[1]);
        if (!t || t->dtype != TS_I64 || ts_tensor_numel(t) > TS_MAX_RANK) return false;
        naxes = (int)ts_tensor_numel(t);
        for (int i = 0; i < naxes; i++) axes[i] = ((const int64_t *)t->data)[i];
    }
    if (naxes <= 0) return false;
    memset(gm->mask, 0, sizeof gm->mask);
    for (int i = 0; i < naxes; i++) {
        int ax;
        if (!ts_axis_norm(axes[i], sh->rank, &ax)) return false;
        gm->mask[ax] = true;
    }
    int phase = 0; /* 0: kept before, 1: reduced, 2: kept after */
    gm->outer = gm->d = gm->inner = 1;
    for (int k = 0; k < sh->rank; k++) {
        if (sh->dims[k] == 1) continue;
        if (gm->mask[k]) {
            if (phase == 2) return false;
            phase = 1;
            gm->d *= sh->dims[k];
        } else if (phase == 0) {
            gm->outer *= sh->dims[k];
        } else {
            phase = 2;
            gm->inner *= sh->dims[k];
        }
    }
    return phase > 0 && gm->d > 0 && gm->inner > 0 && gm->outer > 0;
}

/* The node reading v, when it is the only one (and v no graph output). */
static int only_reader(const xplan *p, int v, const ts_op_desc *op)
{
    int c = xhalf_sole_consumer(p, v);
    if (c < 0 || p->g->nodes[c].op != op || p->g->nodes[c].noutputs != 1) return -1;
    if (op == &ts_op_reducemean) return c; /* mean_geom checks its types */
    return xv_all_f32(p, c) ? c : -1;
}

static bool is_scalar(const xplan *p, int v, double want, double *got)
{
    const ts_tensor *t = xplan_const(p, v);
    if (!t || ts_tensor_numel(t) != 1 || !ts_dtype_is_float(t->dtype)) return false;
    *got = ts_tensor_get_f64(t, 0);
    return want != want || *got == want; /* NaN want: any value */
}

/* The constant operand of binary node c besides value v when it is float32
 * and, broadcast onto x's shape xs, varies along the normalized axes only:
 * its value, else -1. */
static int norm_param(const xplan *p, int c, int v, const ts_shape *xs, const xgroup_layernorm *gm)
{
    const ts_node *nd = &p->g->nodes[c];
    if (nd->ninputs != 2) return -1;
    int o = nd->inputs[0] == v ? nd->inputs[1] : nd->inputs[0];
    const ts_tensor *t = o != v ? xplan_const(p, o) : NULL;
    if (!t || !t->data || t->dtype != TS_F32 || t->shape.rank > xs->rank) return -1;
    int64_t st[TS_MAX_RANK];
    ts_shape_bcast_strides(&t->shape, xs, st);
    for (int k = 0; k < xs->rank; k++)
        if (!gm->mask[k] && xs->dims[k] != 1 && st[k] != 0) return -1;
    return o;
}

/* Adds the optional scale (op Mul) or shift (Add) after the group's output. */
static void norm_tail(const xplan *p, xgroup *gr, const ts_op_desc *op, int *param)
{
    xgroup_layernorm *ln = &gr->ln;
    const ts_shape *xs = &p->g->values[ln->x].shape;
    int c = only_reader(p, gr->y, op);
    if (c < 0 || xhalf_node_round(p, c) != ln->round || !ts_shape_eq(&p->g->values[p->g->nodes[c].outputs[0]].shape, xs))
        return;
    if ((*param = norm_param(p, c, gr->y, xs, ln)) < 0) return;
    gr->nodes[gr->nnodes++] = c;
    gr->y = p->g->nodes[c].outputs[0];
}

static bool layernorm_ops(const xplan *p, int n, xgroup *gr)
{
    const ts_graph *g = p->g;
    xgroup_layernorm *m = &gr->ln;
    m->gamma = m->beta = -1;
    if (p->opts.no_fusion || !mean_geom(p, n, m)) return false;
    m->x = g->nodes[n].inputs[0];
    int sub = only_reader(p, g->nodes[n].outputs[0], &ts_op_sub);
    if (sub < 0 || g->nodes[sub].inputs[0] != m->x) return false;
    int dv = g->nodes[sub].outputs[0];
    const ts_shape *xs = &g->values[m->x].shape;
    if (!ts_shape_eq(&g->values[dv].shape, xs) || xhalf_consumers(p, dv) != 2 || ts_graph_is_output(g, dv))
        return false;
    /* d's two readers: the square and the Div */
    int sq = -1, div = -1;
    for (int c = 0; c < g->nnodes; c++) {
        const ts_node *nd = &g->nodes[c];
        if (nd->dead || p->claimed[c] || nd->ninputs != 2 || nd->noutputs != 1) continue;
        bool a = nd->inputs[0] == dv, b = nd->inputs[1] == dv;
        if (!a && !b) continue;
        double e;
        if ((nd->op == &ts_op_pow && a && !b && is_scalar(p, nd->inputs[1], 2.0, &e)) ||
            (nd->op == &ts_op_mul && a && b))
            sq = c;
        else if (nd->op == &ts_op_div && a && !b)
            div = c;
        else
            return false;
    }
    if (sq < 0 || div < 0 || !xv_all_f32(p, sq) || !xv_all_f32(p, div)) return false;
    xgroup_layernorm g2;
    int var = only_reader(p, g->nodes[sq].outputs[0], &ts_op_reducemean);
    if (var < 0 || !mean_geom(p, var, &g2) || memcmp(g2.mask, m->mask, sizeof g2.mask)) return false;
    int add = only_reader(p, g->nodes[var].outputs[0], &ts_op_add);
    if (add < 0) return false;
    int vv = g->nodes[var].outputs[0];
    const ts_node *an = &g->nodes[add];
    double eps;
    if (an->ninputs != 2 || !is_scalar(p, an->inputs[an->inputs[0] == vv ? 1 : 0], NAN, &eps) || eps < 0)
        return false;
    int sqrt_n = only_reader(p, an->outputs[0], &ts_op_sqrt);
    if (sqrt_n < 0 || xhalf_sole_consumer(p, g->nodes[sqrt_n].outputs[0]) != div ||
        g->nodes[div].inputs[1] != g->nodes[sqrt_n].outputs[0])
        return false;
    m->eps = (float)eps;
    gr->y = g->nodes[div].outputs[0];
    if (!ts_shape_eq(&g->values[gr->y].shape, xs)) return false;
    const int list[] = {n, sub, sq, var, add, sqrt_n, div};
    memcpy(gr->nodes, list, sizeof list);
    gr->nnodes = 7;
    /* a half plan's rounding: the same for every node, rows only */
    m->round = xhalf_node_round(p, n);
    for (int k = 1; k < gr->nnodes; k++)
        if (xhalf_node_round(p, gr->nodes[k]) != m->round) return false;
    if (m->round && m->inner != 1) return false;
    norm_tail(p, gr, &ts_op_mul, &m->gamma);
    norm_tail(p, gr, &ts_op_add, &m->beta);
    return true;
}

/* ------------------------------- BatchNormalization (inference) [-> Relu]
 *
 * The Relu is taken when it alone reads the normalized value (float32);
 * vec.batchnorm applies it in the same pass.  Stated tolerance 0: the
 * same float32 operations as the unfused BatchNormalization and Relu
 * steps (test_lowering). */

static bool batchnorm_relu(const xplan *p, int n, xgroup *gr)
{
    gr->nodes[0] = n;
    gr->nnodes = 1;
    gr->y = p->g->nodes[n].noutputs == 1 ? p->g->nodes[n].outputs[0] : -1;
    int c = p->opts.no_fusion || gr->y < 0 ? -1 : xplan_sole_consumer(p, gr->y);
    if (c >= 0 && p->g->nodes[c].op == &ts_op_relu && p->g->nodes[c].noutputs == 1 &&
        p->g->values[p->g->nodes[c].outputs[0]].dtype == TS_F32) {
        gr->nodes[gr->nnodes++] = c;
        gr->y = p->g->nodes[c].outputs[0];
    }
    return gr->y >= 0;
}

/* ---------------------------------------- channel shuffle (vec.shuffle)
 *
 * Concat(axis 1) of float32 [N, C, H, W] -> Reshape [N, g, C/g, H, W] ->
 * Transpose [0, 2, 1, 3, 4] -> Reshape [N, C, H, W], each value but the
 * last read by the next node only and no graph output.  Stated tolerance
 * 0: a copy (test_lowering; another permutation is not taken). */

/* The sole reader of value v when it is a node of op `op` reading v first (else -1). */
static int first_reader(const xplan *p, int v, const ts_op_desc *op)
{
    int c = xplan_sole_consumer(p, v);
    return c >= 0 && p->g->nodes[c].op == op && p->g->nodes[c].inputs[0] == v ? c : -1;
}

static bool channel_shuffle(const xplan *p, int n, xgroup *gr)
{
    static const int64_t perm[5] = {0, 2, 1, 3, 4};
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    int yv = nd->outputs[0], axis;
    const ts_shape *ys = &g->values[yv].shape;
    if (p->opts.no_fusion || nd->ninputs < 1 || ys->rank != 4 || !xv_all_f32(p, n) || ts_graph_is_output(g, yv) ||
        !ts_axis_norm(((const ts_concat_attrs *)nd->attrs)->axis, 4, &axis) || axis != 1)
        return false;
    for (int j = 0; j < nd->ninputs; j++)
        if (nd->inputs[j] < 0) return false;
    int r1 = first_reader(p, yv, &ts_op_reshape);
    if (r1 < 0) return false;
    int v1 = g->nodes[r1].outputs[0];
    const ts_shape *s1 = &g->values[v1].shape;
    if (s1->rank != 5 || s1->dims[0] != ys->dims[0] || s1->dims[1] < 1 || s1->dims[1] * s1->dims[2] != ys->dims[1] ||
        s1->dims[3] != ys->dims[2] || s1->dims[4] != ys->dims[3] || ts_graph_is_output(g, v1))
        return false;
    int tr = first_reader(p, v1, &ts_op_transpose);
    if (tr < 0) return false;
    const ts_transpose_attrs *ta = g->nodes[tr].attrs;
    int v2 = g->nodes[tr].outputs[0];
    if (ta->nperm != 5 || memcmp(ta->perm, perm, sizeof perm) || ts_graph_is_output(g, v2)) return false;
    int r2 = first_reader(p, v2, &ts_op_reshape);
    if (r2 < 0) return false;
    int zv = g->nodes[r2].outputs[0];
    if (!ts_shape_eq(&g->values[zv].shape, ys) || g->values[zv].dtype != TS_F32) return false;
    const int list[] = {n, r1, tr, r2};
    memcpy(gr->nodes, list, sizeof list);
    gr->nnodes = 4;
    gr->y = zv;
    gr->shuffle_groups = s1->dims[1];
    return true;
}

/* ------------- Slice -> [Reshape] -> Transpose [-> Mul or Div by a scalar]
 *
 * torch's MultiheadAttention as exported (ViT, nn.TransformerEncoder): the
 * packed in-projection [S, 3E] sliced into q, k and v, each reshaped to
 * [S, H, d] heads and transposed, q then divided by sqrt(d).  Each is one
 * strided copy reading the slice where it lies (vec_movement.c), in place
 * of a copy for the Slice, one for the Transpose and one for the Div:
 * ViT-B/16 and the encoder 7 steps a layer -> 3.  The Reshape must be a
 * view of the slice (vec_movement.c declines otherwise); each value before
 * the last read by the next node only, none a graph output; not a
 * Transpose that starts vec.attention's group (a decoder's keys).  Not in
 * half plans; TSOPT_SKIP=slice.transpose turns it off (A/B). */
static bool slice_transpose(const xplan *p, int n, xgroup *gr)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    if (p->opts.no_fusion || p->half || xplan_skips(p, "slice.transpose") || nd->op != &ts_op_slice ||
        nd->noutputs != 1 || ts_graph_is_output(g, nd->outputs[0]))
        return false;
    int v = nd->outputs[0], k = 0;
    gr->nodes[k++] = n;
    int r = first_reader(p, v, &ts_op_reshape);
    gr->st_reshape = r;
    if (r >= 0) {
        v = g->nodes[r].outputs[0];
        if (ts_graph_is_output(g, v)) return false;
        gr->nodes[k++] = r;
    }
    int t = first_reader(p, v, &ts_op_transpose);
    if (t < 0) return false;
    xgroup att; /* a decoder's keys: vec.attention's group starts at this Transpose */
    memset(&att, 0, sizeof att);
    att.k = &xk_vec_attention;
    bool is_att = xgroup_attention(p, t, &att);
    xgroup_free(&att);
    if (is_att) return false;
    gr->nodes[k++] = t;
    gr->st_transpose = t;
    v = g->nodes[t].outputs[0];
    gr->st_op = 0;
    gr->st_scale = 1.0f;
    int c = xplan_sole_consumer(p, v);
    const ts_node *cn = c >= 0 ? &g->nodes[c] : NULL;
    if (cn && (cn->op == &ts_op_mul || cn->op == &ts_op_div) && cn->ninputs == 2 && cn->noutputs == 1 &&
        !ts_graph_is_output(g, v) && g->values[v].dtype == TS_F32 &&
        ts_shape_eq(&g->values[cn->outputs[0]].shape, &g->values[v].shape) &&
        (cn->inputs[0] == v || cn->op == &ts_op_mul)) {
        int o = cn->inputs[0] == v ? cn->inputs[1] : cn->inputs[0];
        const ts_tensor *ct = o >= 0 ? xplan_const(p, o) : NULL;
        if (ct && ct->dtype == TS_F32 && ts_tensor_numel(ct) == 1 && o != v) {
            gr->st_scale = ((const float *)ct->data)[0];
            gr->st_op = cn->op == &ts_op_mul ? 1 : 2;
            gr->nodes[k++] = c;
            v = cn->outputs[0];
        }
    }
    gr->nnodes = k;
    gr->y = v;
    return true;
}

/* ------------------ requantization after an int8 product (dnnl.matmul_integer)
 *
 * quantize_dynamic's MatMulInteger -> Cast(float32) -> Mul(s) [-> Add(b)]
 * [-> Relu], s a float32 scalar computed per run, b a constant [N] bias,
 * each value read by the next node only: the kernel runs it as oneDNN
 * post-ops of the product (dnnl_int8.c, which states the roundings:
 * tolerance 0, bit for bit; a scale that is not one value is not taken,
 * test_lowering's near misses).
 * Choice 0 the chain (TSOPT_SKIP=int8.dyn_chain: none), choice 1 the
 * product alone (oneDNN refused the post-ops). */

static bool requant_chain(const xplan *p, int n, int variant, xgroup *gr)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    gr->nodes[0] = n;
    gr->nnodes = 1;
    gr->y = nd->outputs[0];
    gr->dyn_scale = gr->dyn_bias = -1;
    if (variant) return true;
    if (p->opts.no_fusion || xplan_skips(p, "int8.dyn_chain") || nd->ninputs < 2 || nd->inputs[1] < 0) return false;
    const ts_shape *bsh = &g->values[nd->inputs[1]].shape, *ysh = &g->values[gr->y].shape;
    int64_t N = bsh->rank > 1 ? bsh->dims[bsh->rank - 1] : 1;
    int c = xplan_sole_consumer(p, gr->y);
    if (c < 0 || g->nodes[c].op != &ts_op_cast || g->values[g->nodes[c].outputs[0]].dtype != TS_F32) return false;
    int cv = g->nodes[c].outputs[0], m = xplan_sole_consumer(p, cv);
    if (m < 0 || g->nodes[m].op != &ts_op_mul || g->nodes[m].ninputs != 2 || !xplan_inputs_ready(p, m, cv)) return false;
    const ts_node *mn = &g->nodes[m];
    int sv = mn->inputs[0] == cv ? mn->inputs[1] : mn->inputs[0];
    if (sv == cv || g->values[sv].dtype != TS_F32 || ts_shape_numel(&g->values[sv].shape) != 1 ||
        !ts_shape_eq(&g->values[mn->outputs[0]].shape, ysh))
        return false;
    const int list[] = {n, c, m};
    memcpy(gr->nodes, list, sizeof list);
    gr->nnodes = 3;
    gr->dyn_scale = sv;
    gr->y = mn->outputs[0];
    int a = xplan_sole_consumer(p, gr->y);
    if (a >= 0 && g->nodes[a].op == &ts_op_add && g->nodes[a].ninputs == 2) {
        const ts_node *an = &g->nodes[a];
        int bv = an->inputs[0] == gr->y ? an->inputs[1] : an->inputs[0];
        const ts_tensor *b = xplan_const(p, bv);
        const ts_shape *bs = &g->values[bv].shape;
        if (b && b->dtype == TS_F32 && ts_tensor_numel(b) == N && bs->rank >= 1 && bs->dims[bs->rank - 1] == N &&
            ts_shape_eq(&g->values[an->outputs[0]].shape, ysh)) {
            gr->nodes[gr->nnodes++] = a;
            gr->dyn_bias = bv;
            gr->y = an->outputs[0];
        }
    }
    int r = xplan_sole_consumer(p, gr->y);
    if ((gr->dyn_relu = r >= 0 && g->nodes[r].op == &ts_op_relu)) {
        gr->nodes[gr->nnodes++] = r;
        gr->y = g->nodes[r].outputs[0];
    }
    return true;
}

/* ------------------------------------------------------------- the stage */

extern const xkernel xk_vec_shuffle, xk_vec_se; /* vec_shuffle.c, vec_se.c */
extern const xkernel xk_vec_slice_transpose;    /* vec_movement.c */
extern const xkernel xk_dnnl_matmul_integer;    /* dnnl_int8.c */
extern const xkernel xk_vec_attention;          /* vec_attention.c */
extern const xkernel xk_vec_sdpa;               /* vec_sdpa.c */
extern const xkernel xk_dense_concat;           /* dense_concat.c */

static const struct {
    const xkernel *k;
    bool (*form)(const xplan *p, int n, xgroup *gr);
} formers[] = {
    {&xk_vec_layernorm_ops, layernorm_ops},
    {&xk_vec_batchnorm, batchnorm_relu},
    {&xk_vec_shuffle, channel_shuffle},
    {&xk_vec_slice_transpose, slice_transpose},
    {&xk_vec_eltwise, xgroup_eltwise_chain}, /* lower_chain.c */
    {&xk_vec_attention, xgroup_attention},   /* lower_attention.c */
    {&xk_vec_sdpa, xgroup_sdpa},             /* lower_attention.c */
    {&xk_vec_gemv, xgroup_gemv},             /* lower_gemv.c */
    {&xk_vec_band, xgroup_band_matmul},      /* lower_band.c */
    {&xk_vec_band_defer, xgroup_band_gather},
    {&xk_vec_concat, xgroup_concat_relu},     /* lower_concat.c */
    {&xk_dense_concat, xgroup_dense_concat},
};

int xgroup_form(const xplan *p, const xkernel *k, int n, int variant, xgroup *gr)
{
    memset(gr, 0, sizeof *gr);
    gr->k = k;
    int formed = 0;
    if (xgroup_serves_post(k)) formed = xgroup_post(p, k, n, variant, gr) ? 1 : -1; /* lower_post.c */
    if (k == &xk_dnnl_matmul_integer) formed = requant_chain(p, n, variant, gr) ? 1 : -1;
    for (size_t i = 0; !formed && i < sizeof formers / sizeof *formers; i++)
        if (formers[i].k == k) formed = variant == 0 && formers[i].form(p, n, gr) ? 1 : -1;
    if (formed < 0) xgroup_free(gr); /* what a former allocated before it gave up */
    return formed;
}

int xgroup_choices(const xkernel *k)
{
    return xgroup_serves_post(k) ? XGROUP_VARIANTS : k == &xk_dnnl_matmul_integer ? 2 : 1;
}

void xgroup_free(xgroup *gr)
{
    if (gr->k == &xk_vec_se) {
        xd_fuse_free(&gr->se1);
        xd_fuse_free(&gr->se2);
    } else if (xgroup_serves_post(gr->k)) {
        xd_fuse_free(&gr->post);
    } else if (gr->k == &xk_vec_eltwise) {
        free(gr->chain);
    } else if (gr->k == &xk_vec_gemv) {
        free(gr->gemv_chain);
    } else if (gr->k == &xk_dense_concat) {
        free(gr->dc_direct);
    }
}
