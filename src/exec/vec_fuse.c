/* Fusion of element-wise chains: the step for an element-wise node absorbs
 * the node consuming its result, then that node's consumer, and so on,
 * while each is element-wise, float32, the result's sole consumer, and does
 * not grow the shape (GELU's Div -> Erf -> Add -> Mul -> Mul becomes one
 * pass over memory).  The program it builds runs in vec_eltwise.c.
 * In a half-precision plan each node's 16-bit output is rounded inside the
 * program where the unfused graph would round it (half.c), so the chain
 * fuses past the refusal half plans put on those values. */
#include <stdlib.h>
#include "exec/half.h"
#include "exec/plan_internal.h"
#include "exec/vec_eltwise.h"
#include "exec/vec_layout.h"
#include "ops/op.h"

/* Node c can join a chain whose result is value cur of shape `shape`. */
static bool joinable(const xplan *p, int c, int cur, const ts_shape *shape)
{
    const ts_node *nd = &p->g->nodes[c];
    if (!(nd->op->flags & TS_OP_ELEMENTWISE) || nd->noutputs != 1 || !xv_all_f32(p, c)) return false;
    return ts_shape_eq(&p->g->values[nd->outputs[0]].shape, shape) && xplan_inputs_ready(p, c, cur);
}

/* The chain may run on its inputs' own layout when those of the result's
 * shape share one dense permuted layout, like the channels-last outputs of
 * convolutions (element i of each is the same logical element); the result
 * then keeps that layout.  Saves a conversion to plain per input and one
 * back before the next conv.  Broadcast operands (a squeeze-excite block's
 * N x C x 1 x 1 scale) are read plain, walked in the same stored order:
 * they must then be contiguous or one value along the innermost stored
 * dim.  in_order[j]: operand j is read in `order`. */
static bool keep_order(xplan *p, const xv_prog *pr, const int *ext, int cur, const ts_shape *shape, int *order,
                       bool *in_order)
{
    for (int i = 0; i < p->g->noutputs; i++)
        if (p->g->outputs[i] == cur) return false; /* the caller's tensor is plain */
    bool any = false;
    for (int j = 0; j < pr->next; j++) {
        int o[TS_MAX_RANK] = {0}, b = xplan_value_buf(p, ext[j]); /* set up to the rank; compared whole below */
        if (b < 0) return false;
        in_order[j] = ts_shape_eq(&p->g->values[ext[j]].shape, shape);
        if (!in_order[j]) continue;
        if (!xbuf_dense_order(&p->bufs[b], o)) return false;
        if (!any)
            memcpy(order, o, sizeof o);
        else if (memcmp(order, o, sizeof o))
            return false;
        any = true;
    }
    if (!any || shape->rank == 0 || xbuf_order_plain(order, shape->rank)) return false;
    int k = shape->rank - 1;
    while (k > 0 && shape->dims[order[k]] == 1) k--;
    for (int j = 0; j < pr->next; j++) {
        int64_t st[TS_MAX_RANK];
        if (in_order[j]) continue;
        ts_shape_bcast_strides(&p->g->values[ext[j]].shape, shape, st);
        if (st[order[k]] > 1) return false;
    }
    return true;
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

/* Half plans: the result written over an input of its own shape that dies
 * here.  The float32 plan fuses a MatMul's bias Add and GELU into the
 * MatMul; split by the half plan's rounding (half.c), each of those steps
 * held a second full-size buffer beside its input.  ViT-B/16-l4 at batch 4
 * holds 9.7 MB MLP products (TSOPT_MEM_TRACE).  TSOPT_SKIP=half.inplace
 * turns it off (A/B). */
int xv_inplace_out(xplan *p, int n, int b, int out)
{
    const ts_value *v = &p->g->values[out];
    if (!p->half || xplan_skips(p, "half.inplace") || b < 0 || ts_graph_is_output(p->g, out) ||
        v->dtype != TS_F32 || p->value_buf[out] >= 0) /* placed already (a Concat's piece) */
        return -1;
    int root = xbuf_root(p, b);
    const xbuf *x = &p->bufs[b];
    if (x->dtype != TS_F32 || x->blocked || p->bufs[root].blocked || !ts_shape_eq(&x->shape, &v->shape) ||
        xbuf_alias_offset(p, b) || !xplan_inplace_ok(p, b, n))
        return -1;
    size_t bytes = x->bytes;
    int o = xplan_new_buf(p, out, v->dtype, &v->shape);
    if (o < 0) return -1;
    xbuf *y = &p->bufs[o];
    y->kind = XB_ALIAS;
    y->alias_of = root;
    y->offset = 0;
    y->bytes = bytes;
    xplan_bind_value(p, out, o);
    return o;
}

/* The chain's output over one of its operands' storage: the program
 * copies each block of that operand aside before running the block
 * (xv_prog.inplace), since GELU's chain reads x again after its first
 * instruction wrote the result. */
static int chain_inplace(xplan *p, int n, xv_prog *pr, const xstep *s, int cur)
{
    for (int j = 0; j < pr->next; j++) {
        bool alone = true; /* no other operand read from that storage */
        for (int k = 0; alone && k < pr->next; k++) alone = k == j || xbuf_root(p, s->in[k]) != xbuf_root(p, s->in[j]);
        int o = alone ? xv_inplace_out(p, n, s->in[j], cur) : -1;
        if (o >= 0) {
            pr->inplace = j + 1;
            return o;
        }
    }
    return -1;
}

static ts_status eltwise_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    int ext[XV_MAXIN];
    if (nd->noutputs != 1 || !xv_all_f32(p, n)) return TS_ERR_UNSUPPORTED;
    xv_prog *pr = xv_state(sizeof *pr, err);
    if (!pr) return err->code;
    if (!lower_rounded(p, n, -1, pr, ext)) {
        free(pr);
        return TS_ERR_UNSUPPORTED;
    }
    round_on_load(p, pr, ext);
    int cur = nd->outputs[0];
    const ts_shape shape = g->values[cur].shape;
    while (!p->opts.no_fusion) {
        int c = xhalf_sole_consumer(p, cur);
        if (c < 0 || p->claimed[c] || !joinable(p, c, cur, &shape)) break;
        xv_prog trial = *pr; /* lowering may fail half way */
        int text[XV_MAXIN];
        memcpy(text, ext, sizeof ext);
        if (!lower_rounded(p, c, cur, &trial, text)) break;
        *pr = trial;
        memcpy(ext, text, sizeof ext);
        xplan_claim(p, c, s);
        cur = g->nodes[c].outputs[0];
    }
    s->state = pr;
    if (xstep_alloc(s, pr->next, 1, err)) return err->code;
    const ts_shape *shapes[XV_MAXIN];
    int order[TS_MAX_RANK];
    bool in_order[XV_MAXIN];
    bool keep = keep_order(p, pr, ext, cur, &shape, order, in_order);
    for (int j = 0; j < pr->next; j++) {
        shapes[j] = &g->values[ext[j]].shape;
        s->in[j] = keep && in_order[j] ? xplan_value_buf(p, ext[j]) : xplan_plain(p, xplan_value_buf(p, ext[j]), err);
        if (s->in[j] < 0) return err->code ? err->code : TS_ERR_INVALID;
    }
    s->out[0] = keep ? -1 : chain_inplace(p, n, pr, s, cur);
    if (s->out[0] < 0) s->out[0] = xplan_value_buf(p, cur);
    if (s->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    if (keep) xv_set_order(p, s->out[0], order);
    xv_geometry_order(pr, &shape, shapes, keep ? order : NULL, in_order);
    pr->threads = xv_threads(p);
    return TS_OK;
}

const xkernel xk_vec_eltwise = {"vec.eltwise", eltwise_build, xv_prog_run, free};
