/* Element-wise chains, formed by the lowering stage (issue 27 §3): the
 * step for an element-wise node computes the node consuming its result,
 * then that node's consumer, and so on, while each is element-wise,
 * float32, the result's sole reader, and does not grow the shape (GELU's
 * Div -> Erf -> Add -> Mul -> Mul becomes one pass over memory).  The
 * stage lowers the chain to one element-wise program (xv_lower_node: one
 * node to instructions; a node the program cannot take ends the chain)
 * and hands it to vec.eltwise (vec_fuse.c), which binds buffers and runs
 * it (vec_eltwise.c).  In a half-precision plan each node's 16-bit output
 * is rounded inside the program where the unfused graph would round it
 * (half.c), so the chain fuses past the refusal half plans put on those
 * values.  Each fused program computes the nodes' float32 operations in
 * their order: bit-identical to the unfused steps (test_lowering). */
#include <stdlib.h>
#include "exec/half.h"
#include "vec/vec_eltwise.h"
#include "ops/attrs.h"
#include "ops/list.h"

/* A node's types, asked by the stage's formers of the nodes they join and
 * by kernels of their own node. */
bool xv_all_f32(const xplan *p, int n)
{
    const ts_node *nd = &p->g->nodes[n];
    for (int i = 0; i < nd->ninputs; i++)
        if (nd->inputs[i] >= 0 && p->g->values[nd->inputs[i]].dtype != TS_F32) return false;
    for (int i = 0; i < nd->noutputs; i++)
        if (p->g->values[nd->outputs[i]].dtype != TS_F32) return false;
    return true;
}

/* ------------------------------------------------------------ lowering */

/* The float32 scalar of constant value v with one element, or false. */
static bool const_scalar(const xplan *p, int v, float *out)
{
    const ts_tensor *t = v >= 0 ? xplan_const(p, v) : NULL;
    if (!t || t->dtype != TS_F32 || ts_tensor_numel(t) != 1) return false;
    *out = *(const float *)t->data;
    return true;
}

/* Operand index for value v: acc, or an external (added once). */
static int operand(int v, int cur, xv_prog *pr, int *ext)
{
    if (v == cur) return XV_ACC;
    for (int j = 0; j < pr->next; j++)
        if (ext[j] == v) return j;
    if (pr->next == XV_MAXIN) return -2;
    ext[pr->next] = v;
    return pr->next++;
}

static bool emit(xv_prog *pr, xv_opc opc, int a, int b, float p0, float p1)
{
    if (pr->nins == XV_MAXPROG || a == -2 || b == -2) return false;
    pr->ins[pr->nins++] = (xv_instr){opc, a, b, p0, p1};
    return true;
}

static const struct {
    const ts_op_desc *op;
    xv_opc opc;
} unary_ops[] = {
    {&ts_op_relu, XO_RELU},       {&ts_op_neg, XO_NEG},   {&ts_op_abs, XO_ABS},             {&ts_op_sqrt, XO_SQRT},
    {&ts_op_exp, XO_EXP},         {&ts_op_log, XO_LOG},   {&ts_op_reciprocal, XO_RECIP},   {&ts_op_erf, XO_ERF},
    {&ts_op_sigmoid, XO_SIGMOID}, {&ts_op_tanh, XO_TANH}, {&ts_op_hardswish, XO_HSWISH},   {&ts_op_identity, XO_COPY},
};

static const struct {
    const ts_op_desc *op;
    xv_opc opc, imm, rimm; /* both operands; b immediate; a immediate */
} binary_ops[] = {
    {&ts_op_add, XO_ADD, XO_ADD_S, XO_ADD_S}, {&ts_op_sub, XO_SUB, XO_SUB_S, XO_RSUB_S},
    {&ts_op_mul, XO_MUL, XO_MUL_S, XO_MUL_S}, {&ts_op_div, XO_DIV, XO_DIV_S, XO_RDIV_S},
    {&ts_op_pow, XO_POW, XO_POW_S, XO_POW},   {&ts_op_max, XO_MAX, XO_MAX_S, XO_MAX_S},
    {&ts_op_min, XO_MIN, XO_MIN_S, XO_MIN_S}, {&ts_op_prelu, XO_PRELU, XO_PRELU, XO_PRELU},
    /* float Mod has fmod = 1 (its inference refuses 0): C's fmod, the
     * dividend's sign; integer Mod is not float32 and runs elsewhere */
    {&ts_op_mod, XO_FMOD, XO_FMOD_S, XO_RFMOD_S},
};

static bool lower_binary(const xplan *p, const ts_node *nd, int k, int cur, xv_prog *pr, int *ext)
{
    int va = nd->inputs[0], vb = nd->inputs[1];
    float c;
    xv_opc opc = binary_ops[k].opc;
    /* a scalar constant becomes an immediate (no broadcast walk, no input) */
    if (va != vb && opc != XO_PRELU && const_scalar(p, vb, &c)) {
        int a = operand(va, cur, pr, ext);
        if (opc == XO_POW) { /* the exponents models use, without powf */
            if (c == 2.0f) return emit(pr, XO_SQUARE, a, 0, 0, 0);
            if (c == 1.0f) return emit(pr, XO_COPY, a, 0, 0, 0);
            if (c == 0.5f) return emit(pr, XO_SQRT, a, 0, 0, 0);
        }
        return emit(pr, binary_ops[k].imm, a, 0, c, 0);
    }
    if (va != vb && opc != XO_PRELU && opc != XO_POW && const_scalar(p, va, &c))
        return emit(pr, binary_ops[k].rimm, operand(vb, cur, pr, ext), 0, c, 0);
    int a = operand(va, cur, pr, ext);
    int b = operand(vb, cur, pr, ext);
    return emit(pr, opc, a, b, 0, 0);
}

bool xv_lower_node(const xplan *p, int n, int cur, xv_prog *pr, int *ext)
{
    const ts_node *nd = &p->g->nodes[n];
    const ts_op_desc *op = nd->op;
    if (nd->noutputs != 1) return false;
    for (size_t k = 0; k < sizeof unary_ops / sizeof *unary_ops; k++)
        if (op == unary_ops[k].op)
            return nd->ninputs == 1 && emit(pr, unary_ops[k].opc, operand(nd->inputs[0], cur, pr, ext), 0, 0, 0);
    for (size_t k = 0; k < sizeof binary_ops / sizeof *binary_ops; k++)
        if (op == binary_ops[k].op)
            return nd->ninputs == 2 && nd->inputs[0] >= 0 && nd->inputs[1] >= 0 &&
                   lower_binary(p, nd, (int)k, cur, pr, ext);
    if (op == &ts_op_leakyrelu || op == &ts_op_hardsigmoid) {
        const ts_alpha_beta_attrs *ab = nd->attrs;
        return emit(pr, op == &ts_op_leakyrelu ? XO_LEAKY : XO_HSIG, operand(nd->inputs[0], cur, pr, ext), 0, ab->alpha,
                    ab->beta);
    }
    if (op == &ts_op_gelu)
        return emit(pr, ((const ts_gelu_attrs *)nd->attrs)->tanh ? XO_GELU_TANH : XO_GELU_ERF,
                    operand(nd->inputs[0], cur, pr, ext), 0, 0, 0);
    if (op == &ts_op_clip) {
        const ts_clip_attrs *ca = nd->attrs;
        float lo = ca->has_min ? ca->min : -INFINITY, hi = ca->has_max ? ca->max : INFINITY;
        if (nd->ninputs > 1 && nd->inputs[1] >= 0 && !const_scalar(p, nd->inputs[1], &lo)) return false;
        if (nd->ninputs > 2 && nd->inputs[2] >= 0 && !const_scalar(p, nd->inputs[2], &hi)) return false;
        return emit(pr, XO_CLIP, operand(nd->inputs[0], cur, pr, ext), 0, lo, hi);
    }
    return false;
}

/* Node c can join a chain whose result is value cur of shape `shape`. */
static bool joinable(const xplan *p, int c, int cur, const ts_shape *shape)
{
    const ts_node *nd = &p->g->nodes[c];
    if (!(nd->op->flags & TS_OP_ELEMENTWISE) || nd->noutputs != 1 || !xv_all_f32(p, c)) return false;
    return ts_shape_eq(&p->g->values[nd->outputs[0]].shape, shape) && xplan_inputs_ready(p, c, cur);
}

/* xv_lower_node, then node n's rounding to its 16-bit type (half plans). */
static bool lower_rounded(const xplan *p, int n, int cur, xv_prog *pr, int *ext)
{
    if (!xv_lower_node(p, n, cur, pr, ext)) return false;
    ts_dtype r = xhalf_node_round(p, n);
    if (r == TS_UNDEFINED) { /* a selection of values on the grid stays there */
        pr->rounded = xhalf_grid_exact(p->g->nodes[n].op) && (cur < 0 || pr->rounded);
        return true;
    }
    if (pr->nins == XV_MAXPROG) return false;
    pr->ins[pr->nins++] = (xv_instr){r == TS_F16 ? XO_ROUND_F16 : XO_ROUND_BF16, XV_ACC, 0, 0, 0};
    pr->rounded = true;
    return true;
}

/* Half plans: one 16-bit input of the chain's first node, read by that
 * node only and by the first instruction only, is rounded as it is read
 * (an instruction before it) instead of by its producer's step in a pass
 * of its own (half.c skips that one): a Conv's or MatMul's output going
 * into a residual or bias Add. */
static void round_on_load(const xplan *p, xv_prog *pr, const int *ext)
{
    if (pr->nins == 0 || pr->nins == XV_MAXPROG) return;
    for (int j = 0; j < pr->next; j++) {
        ts_dtype r = xhalf_round_on_load(p, ext[j]);
        if (r == TS_UNDEFINED) continue;
        int reads = 0, at = -1;
        for (int k = 0; k < pr->nins; k++) {
            const xv_instr *in = &pr->ins[k];
            bool two = in->opc <= XO_FMOD; /* the binary ops come first: b is an operand */
            if (in->a == j) reads++, at = k;
            if (two && in->b == j) reads++, at = k;
        }
        if (reads != 1 || at != 0) continue;
        memmove(pr->ins + 1, pr->ins, sizeof *pr->ins * (size_t)pr->nins);
        pr->ins[0] = (xv_instr){r == TS_F16 ? XO_ROUND_F16 : XO_ROUND_BF16, j, 0, 0, 0};
        pr->nins++;
        if (pr->ins[1].a == j) pr->ins[1].a = XV_ACC; /* the first node's operands are external: acc is free */
        else pr->ins[1].b = XV_ACC;
        pr->round_on_load = ext[j] + 1;
        return;
    }
}

int xgroup_chain_after(const xplan *p, int cur, xgroup *gr, xv_chain *ch, bool half)
{
    const ts_graph *g = p->g;
    const ts_shape *shape = &g->values[cur].shape;
    while (!p->opts.no_fusion && gr->nnodes < XGROUP_MAX) {
        int c = half ? xhalf_sole_consumer(p, cur) : xplan_sole_consumer(p, cur);
        if (c < 0 || p->claimed[c] || !joinable(p, c, cur, shape)) break;
        xv_prog trial = ch->prog; /* lowering may fail half way */
        int text[XV_MAXIN];
        memcpy(text, ch->ext, sizeof text);
        if (!(half ? lower_rounded(p, c, cur, &trial, text) : xv_lower_node(p, c, cur, &trial, text))) break;
        ch->prog = trial;
        memcpy(ch->ext, text, sizeof text);
        gr->nodes[gr->nnodes++] = c;
        cur = g->nodes[c].outputs[0];
    }
    return cur;
}

/* vec.eltwise's group: node n and the chain after it, lowered to one
 * program (gr->chain, owned by the group). */
bool xgroup_eltwise_chain(const xplan *p, int n, xgroup *gr)
{
    const ts_node *nd = &p->g->nodes[n];
    if (nd->noutputs != 1 || !xv_all_f32(p, n) || !(gr->chain = calloc(1, sizeof *gr->chain))) return false;
    xv_prog *pr = &gr->chain->prog;
    int *ext = gr->chain->ext;
    if (!lower_rounded(p, n, -1, pr, ext)) return false;
    round_on_load(p, pr, ext);
    gr->nodes[0] = n;
    gr->nnodes = 1;
    gr->y = xgroup_chain_after(p, nd->outputs[0], gr, gr->chain, true);
    return true;
}

/* Node c can join a chain computing from value v (not stored yet: the
 * step computes it) whose result is value cur. */
static bool joinable_from(const xplan *p, int c, int v, int cur, const ts_shape *shape)
{
    const ts_node *nd = &p->g->nodes[c];
    if (!(nd->op->flags & TS_OP_ELEMENTWISE) || nd->noutputs != 1 || !xv_all_f32(p, c) ||
        !ts_shape_eq(&p->g->values[nd->outputs[0]].shape, shape))
        return false;
    for (int i = 0; i < nd->ninputs; i++) {
        int w = nd->inputs[i];
        if (w >= 0 && w != cur && w != v && p->g->values[w].producer >= 0 && p->value_buf[w] < 0) return false;
    }
    return true;
}

/* Half plans that round every node (lower_post.c half_chain_collect): the
 * element-wise chain that reads value v and is v's every reader -- ViT's
 * GELU (Div, Erf, Add, Mul, Mul) reads the MLP's bias sum twice --, its
 * other inputs values of v's shape computed already (a residual), lowered
 * with each node's rounding into ch, its nodes into nodes[] (*nn of them,
 * max at most).  Returns the chain's last value, -1 where no such chain
 * ends on the 16-bit grid. */
int xv_chain_reading(const xplan *p, int v, xv_chain *ch, int *nodes, int *nn, int max)
{
    const ts_graph *g = p->g;
    const ts_shape *shape = &g->values[v].shape;
    memset(ch, 0, sizeof *ch);
    *nn = 0;
    if (ts_graph_is_output(g, v) || p->opts.no_fusion || max < 1) return -1;
    int first = -1, cur = -1;
    for (int n = 0; first < 0 && n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        for (int j = 0; !nd->dead && !p->claimed[n] && j < nd->ninputs; j++)
            if (nd->inputs[j] == v) first = n;
    }
    if (first < 0 || !joinable_from(p, first, v, v, shape) || !lower_rounded(p, first, -1, &ch->prog, ch->ext))
        return -1;
    nodes[(*nn)++] = first;
    cur = g->nodes[first].outputs[0];
    while (*nn < max) { /* as xgroup_chain_after, v counted as ready */
        int c = xhalf_sole_consumer(p, cur);
        if (c < 0 || p->claimed[c] || !joinable_from(p, c, v, cur, shape)) break;
        xv_prog trial = ch->prog;
        int text[XV_MAXIN];
        memcpy(text, ch->ext, sizeof text);
        if (!lower_rounded(p, c, cur, &trial, text)) break;
        ch->prog = trial;
        memcpy(ch->ext, text, sizeof text);
        nodes[(*nn)++] = c;
        cur = g->nodes[c].outputs[0];
    }
    bool ok = ch->prog.rounded;
    for (int j = 0; ok && j < ch->prog.next; j++) {
        int w = ch->ext[j];
        ok = w == v || (ts_shape_eq(&g->values[w].shape, shape) && g->values[w].dtype == TS_F32 &&
                        (g->values[w].producer < 0 || p->value_buf[w] >= 0));
    }
    /* v is never stored: every reader must be one of the chain's nodes */
    for (int n = 0; ok && n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        bool reads = false, in = false;
        for (int j = 0; !nd->dead && j < nd->ninputs; j++) reads |= nd->inputs[j] == v;
        for (int i = 0; reads && i < *nn; i++) in |= nodes[i] == n;
        ok = !reads || in;
    }
    if (!ok) *nn = 0;
    return ok ? cur : -1;
}
