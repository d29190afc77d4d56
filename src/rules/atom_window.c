/* Atoms over sliding windows: conv (Conv, group 1, no dilation, optional
 * constant bias, optionally followed by Relu), gconv (the same with groups:
 * mult output channels per group), poolavg and poolmax
 * (AveragePool counting the padding, MaxPool).  A window's SAME or VALID
 * padding is recognised from the node's pads and the input's shape.
 * Rows in atom.c. */
#include <string.h>
#include "ops/attrs.h"
#include "rules/atom.h"

/* Whether a window node's attributes are TASO's stride and padding for
 * kernel k over input x (group 1, no dilation, floor mode).  `same` is the
 * axioms' SAME: (k-1)/2 on both sides, odd kernels (docs/taso.md,
 * "Semantics the axioms fix").  TensorFlow's SAME_UPPER puts the odd pad
 * pixel after; it is the same window only where the total pad is even
 * (stride 1, or an odd input at stride 2): elsewhere axioms such as A21 and
 * W2 are false for it, so such a node is not `same`.  PyTorch's
 * symmetric pads are `same` at any stride. */
static bool window_ok(const ts_window *w, const ts_shape *x, const int64_t *k, int stride, ts_rpad pad)
{
    int64_t strides[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
    if (x->rank != 4 || w->ceil_mode) return false;
    if (w->nstrides >= 0) {
        if (w->nstrides != 2) return false;
        strides[0] = w->strides[0], strides[1] = w->strides[1];
    }
    if (w->npads >= 0) {
        if (w->npads != 4) return false;
        memcpy(pads, w->pads, sizeof pads);
    }
    for (int j = 0; j < w->ndilations; j++)
        if (w->dilations[j] != 1) return false;
    if (strides[0] != stride || strides[1] != stride) return false;
    if (w->auto_pad == TS_PAD_SAME_UPPER || w->auto_pad == TS_PAD_SAME_LOWER) {
        int64_t pb[2], pe[2];
        ts_same_pads(x, k, stride, pb, pe);
        bool lower = w->auto_pad == TS_PAD_SAME_LOWER; /* the odd pixel before */
        pads[0] = lower ? pe[0] : pb[0], pads[1] = lower ? pe[1] : pb[1];
        pads[2] = lower ? pb[0] : pe[0], pads[3] = lower ? pb[1] : pe[1];
    } else if (w->auto_pad == TS_PAD_VALID) {
        memset(pads, 0, sizeof pads);
    }
    if (pad == TS_RPAD_VALID) return !pads[0] && !pads[1] && !pads[2] && !pads[3];
    if (k[0] % 2 == 0 || k[1] % 2 == 0) return false;
    return pads[0] == (k[0] - 1) / 2 && pads[2] == (k[0] - 1) / 2 && pads[1] == (k[1] - 1) / 2 &&
           pads[3] == (k[1] - 1) / 2;
}

bool ts_atom_conv_match(ts_rmatch *s, const ts_rexpr *e, int v)
{
    const ts_graph *g = s->g;
    int relu = -1, cv = v;
    if (e->p.act == TS_RACT_RELU) {
        relu = ts_rmatch_producer(s, v, &ts_op_relu);
        if (relu < 0) return false;
        cv = g->nodes[relu].inputs[0];
        if (!ts_rmatch_only_use(s, cv, relu)) return false;
    }
    int p = ts_rmatch_producer(s, cv, &ts_op_conv);
    if (p < 0) return false;
    const ts_node *n = &g->nodes[p];
    const ts_conv_attrs *a = n->attrs;
    const ts_shape *x = ts_rvshape(g, n->inputs[0]), *w = ts_rvshape(g, n->inputs[1]);
    if (x->rank != 4 || w->rank != 4 || a->group < 1 || w->dims[1] * a->group != x->dims[1]) return false;
    /* conv: group 1 only (A39/A40 are false for groups); gconv: any group
     * with the atom's output channels per group */
    if (e->op == TS_ROP_CONV ? a->group != 1 : w->dims[0] != a->group * e->p.mult) return false;
    if (!window_ok(&a->win, x, w->dims + 2, e->p.stride, e->p.pad)) return false;
    int bias = n->ninputs > 2 ? n->inputs[2] : -1;
    if (bias >= 0 && !g->values[bias].constant) return false;
    if ((relu >= 0 && !ts_rmatch_node(s, relu)) || !ts_rmatch_node(s, p)) return false;
    if (!ts_rmatch_arg(s, e->arg[0], n->inputs[0]) || !ts_rmatch_arg(s, e->arg[1], n->inputs[1])) return false;
    return ts_rmatch_bias(s, e->arg[1], bias);
}

int ts_atom_conv_roots(const ts_rexpr *e, const ts_op_desc **out)
{
    out[0] = e->p.act == TS_RACT_RELU ? &ts_op_relu : &ts_op_conv;
    return 1;
}

int ts_atom_conv_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    const ts_shape *xs = ts_rvshape(b->g, x[0]), *ws = ts_rvshape(b->g, x[1]);
    if (xs->rank != 4 || ws->rank != 4) return -1;
    /* gconv: groups = output channels / mult, each reading ws->dims[1]
     * input channels; undefined where the channels do not divide */
    int64_t group = 1;
    if (op == TS_ROP_GCONV) {
        if (p->mult < 1 || ws->dims[0] % p->mult) return -1;
        group = ws->dims[0] / p->mult;
    }
    if (ws->dims[1] * group != xs->dims[1]) return -1;
    int64_t strides[2] = {p->stride, p->stride}, pads[4];
    if (!ts_rbuild_pads(b, xs, ws->dims + 2, p->stride, p->pad, pads)) return -1;
    ts_attr a[3] = {ts_attr_ints("strides", strides, 2), ts_attr_ints("pads", pads, 4), ts_attr_int("group", group)};
    int ins[3] = {x[0], x[1], b->bias};
    int y = ts_rbuild_node1(b, &ts_op_conv, ins, b->bias >= 0 ? 3 : 2, a, group > 1 ? 3 : 2);
    if (y < 0) return -1;
    return p->act == TS_RACT_RELU ? ts_rbuild_node1(b, &ts_op_relu, &y, 1, NULL, 0) : y;
}

/* Batch from the input, output channels from the kernel's first axis. */
int64_t ts_atom_conv_split(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx)
{
    if (axis > 1) return -1;
    return ts_rexpr_split_point(e->arg[axis], 0, shape_of, ctx);
}

bool ts_atom_pool_match(ts_rmatch *s, const ts_rexpr *e, int v)
{
    const ts_graph *g = s->g;
    int p = ts_rmatch_producer(s, v, ts_rop_table[e->op].op);
    if (p < 0) return false;
    const ts_node *n = &g->nodes[p];
    const ts_pool_attrs *a = n->attrs;
    if (n->noutputs != 1) return false;
    if (a->win.nkernel != 2 || a->win.kernel[0] != e->p.kh || a->win.kernel[1] != e->p.kw) return false;
    /* TASO's average pool counts the padding (it is conv by Cpool) */
    if (e->op == TS_ROP_POOLAVG && e->p.pad == TS_RPAD_SAME && !a->count_include_pad) return false;
    int64_t kk[2] = {e->p.kh, e->p.kw};
    if (!window_ok(&a->win, ts_rvshape(g, n->inputs[0]), kk, e->p.stride, e->p.pad)) return false;
    return ts_rmatch_node(s, p) && ts_rmatch_arg(s, e->arg[0], n->inputs[0]);
}

int ts_atom_pool_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    const ts_shape *xs = ts_rvshape(b->g, x[0]);
    if (xs->rank != 4) return -1;
    int64_t k[2] = {p->kh, p->kw}, strides[2] = {p->stride, p->stride}, pads[4];
    if (!ts_rbuild_pads(b, xs, k, p->stride, p->pad, pads)) return -1;
    ts_attr a[4] = {ts_attr_ints("kernel_shape", k, 2), ts_attr_ints("strides", strides, 2),
                    ts_attr_ints("pads", pads, 4), ts_attr_int("count_include_pad", 1)};
    /* padding counts only where there is some */
    bool cip = op == TS_ROP_POOLAVG && p->pad == TS_RPAD_SAME;
    return ts_rbuild_node1(b, ts_rop_table[op].op, x, 1, a, cip ? 4 : 3);
}
