/* Atoms of concatenation: concat (two-input Concat) and split0/split1 (the
 * outputs of a two-way Split cut where the argument's last concat along
 * that axis joined its parts: TASO's split tree).  Rows in atom.c. */
#include <string.h>
#include "ops/attrs.h"
#include "rules/atom.h"

/* TASO axis -> ONNX axis in model graphs (rank 3: a batch of row blocks). */
static int model_axis(int rank, int a) { return rank == 3 ? a + 1 : a; }

bool ts_atom_concat_match(ts_rmatch *s, const ts_rexpr *e, int v)
{
    int p = ts_rmatch_producer(s, v, &ts_op_concat);
    if (p < 0) return false;
    const ts_node *n = &s->g->nodes[p];
    if (n->ninputs != 2) return false;
    const ts_concat_attrs *a = n->attrs;
    int rank = ts_rvshape(s->g, v)->rank, axis;
    if (!ts_axis_norm(a->axis, rank, &axis) || axis != model_axis(rank, e->p.axis)) return false;
    return ts_rmatch_node(s, p) && ts_rmatch_arg(s, e->arg[0], n->inputs[0]) &&
           ts_rmatch_arg(s, e->arg[1], n->inputs[1]);
}

int ts_atom_concat_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)op;
    ts_graph *g = b->g;
    const ts_shape *s0 = ts_rvshape(g, x[0]);
    int axis = ts_rbuild_axis(b, s0->rank, p->axis);
    if (axis >= s0->rank || s0->rank != ts_rvshape(g, x[1])->rank) return -1;
    if (!b->theory && g->values[x[0]].constant && g->values[x[1]].constant) {
        /* concatenated weights: made here (memoized), not folded later */
        ts_tensor *parts[2] = {g->values[x[0]].constant, g->values[x[1]].constant};
        return ts_graph_const_value(g, ts_const_concat(b->cc, parts, 2, axis, &b->err), &b->err);
    }
    ts_attr a = ts_attr_int("axis", axis);
    return ts_rbuild_node1(b, &ts_op_concat, x, 2, &a, 1);
}

/* Along its own axis a concat is the split point (its first part's size);
 * along the others, its first argument's. */
int64_t ts_atom_concat_split(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx)
{
    if (e->p.axis != axis) return ts_rexpr_split_point(e->arg[0], axis, shape_of, ctx);
    const ts_shape *a = shape_of(ctx, e->arg[0]);
    return a ? a->dims[model_axis(a->rank, axis)] : -1;
}

bool ts_atom_split_match(ts_rmatch *s, const ts_rexpr *e, int v)
{
    const ts_graph *g = s->g;
    int p = ts_rmatch_producer(s, v, &ts_op_split);
    if (p < 0) return false;
    const ts_node *n = &g->nodes[p];
    if (n->noutputs != 2 || g->values[v].producer_slot != (e->op == TS_ROP_SPLIT1)) return false;
    ts_attr buf[4];
    const ts_attr *ax = ts_node_attr(n, "axis", buf, 4);
    int rank = ts_rvshape(g, v)->rank, axis;
    if (!ts_axis_norm(ax ? ax->i : 0, rank, &axis) || axis != model_axis(rank, e->p.axis)) return false;
    if (!ts_rmatch_node(s, p) || !ts_rmatch_arg(s, e->arg[0], n->inputs[0])) return false;
    /* the rule means the split at the last concat point of its argument */
    int64_t sp = ts_rexpr_split_point(e->arg[0], e->p.axis, ts_rmatch_shape_of, s);
    return sp >= 0 && sp == ts_rvshape(g, n->outputs[0])->dims[axis];
}

int ts_atom_split_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    int slot = op == TS_ROP_SPLIT1;
    for (int i = 0; i < b->nsplit; i++)
        if (b->split[i].in == x[0] && b->split[i].axis == p->axis && b->split[i].at == b->split_at)
            return b->split[i].out[slot];
    if (b->nsplit >= TS_RBUILD_MAX_SPLITS) return -1;
    const ts_shape *xs = ts_rvshape(b->g, x[0]);
    int axis = ts_rbuild_axis(b, xs->rank, p->axis);
    if (axis >= xs->rank) return -1;
    int64_t sp = b->split_at;
    if (sp <= 0 || sp >= xs->dims[axis]) return -1;
    int64_t sizes[2] = {sp, xs->dims[axis] - sp};
    ts_attr a[2];
    int na = 0, ins[2] = {x[0], -1}, nin = 1;
    a[na++] = ts_attr_int("axis", axis);
    if (b->g->opset >= 13) {
        /* opset 13 moved the sizes from an attribute to an input */
        int64_t two = 2;
        ts_shape s = ts_shape_make(1, &two);
        ts_tensor *t = ts_tensor_new(TS_I64, &s, &b->err);
        if (!t) return -1;
        memcpy(t->data, sizes, sizeof sizes);
        if ((ins[1] = ts_rbuild_const(b, t)) < 0) return -1;
        nin = 2;
    } else {
        a[na++] = ts_attr_ints("split", sizes, 2);
    }
    int outs[2];
    if (ts_rbuild_node(b, &ts_op_split, ins, nin, a, na, 2, outs) < 0) return -1;
    b->split[b->nsplit].in = x[0];
    b->split[b->nsplit].axis = p->axis;
    b->split[b->nsplit].at = sp;
    b->split[b->nsplit].out[0] = outs[0];
    b->split[b->nsplit].out[1] = outs[1];
    b->nsplit++;
    return outs[slot];
}
