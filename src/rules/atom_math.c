/* Atoms of ONNX arithmetic, reductions and the fusions the runtime forms
 * from them: numbers, add/sub/mul/div/pow (broadcasting as ONNX does),
 * sqrt, recip, erf, tanh, sigmoid, reducemean, gelu, gelutanh, layernorm,
 * broadcast, gather.  Rows in atom.c; docs/rules.md, "Arithmetic,
 * reductions and fusions".
 *
 * They have no `match` yet (the optimizer's passes that rewrite these
 * spellings name the rule files instead); `build` serves the axiom checker
 * (theory: float64 numbers) and the applier (models: float32 numbers). */
#include "ops/attrs.h"
#include "ops/num.h"
#include "rules/atom.h"

/* A number as a rank-0 constant: float64 for the axioms' check, float32 (as
 * models store their constants) in a model. */
static int number(ts_rbuild *b, float v)
{
    ts_shape s = {.rank = 0};
    ts_tensor *t = ts_tensor_new(b->theory ? TS_F64 : TS_F32, &s, &b->err);
    if (!t) return -1;
    ts_tensor_set_f64(t, 0, (double)v);
    return ts_rbuild_const(b, t);
}

int ts_atom_num_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)op, (void)x;
    return number(b, p->value);
}

bool ts_atom_num_fill(const ts_rparams *p, const ts_shape *s, const ts_num *num, void *data)
{
    if (s->rank != 0) return false;
    num->from_f64(data, (double)p->value);
    return true;
}

int ts_atom_arith_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)p;
    const ts_ropinfo *in = &ts_rop_table[op];
    return ts_rbuild_node1(b, in->op, x, in->nargs, NULL, 0);
}

/* The axes of mask m on a tensor of rank r, as ONNX writes them (the
 * spelling of the mask: negative or not); -1 when an axis is out of range. */
static int axes_of(int m, int r, int64_t *out)
{
    int n = 0;
    for (int a = -8; a < 8; a++)
        if (m & ts_raxes_bit(a)) {
            if (a >= r || a < -r) return -1;
            out[n++] = a;
        }
    return n;
}

int ts_atom_reducemean_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)op;
    int64_t axes[16];
    int n = axes_of(p->axes, ts_rvshape(b->g, x[0])->rank, axes);
    if (n < 1) return -1;
    ts_attr a[2] = {ts_attr_ints("axes", axes, n), ts_attr_int("keepdims", 1)};
    return ts_rbuild_node1(b, &ts_op_reducemean, x, 1, a, 2);
}

/* ONNX Gelu is a function (opset 20): its nodes are the definition,
 * 0.5 * x * (1 + erf(x / sqrt(2))) or, approximate = "tanh",
 * 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))).  tsopt's
 * runtime has no Gelu kernel, so a Gelu is built as that body. */
int ts_atom_gelu_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)p;
    int h = number(b, 0.5), one = number(b, 1);
    if (h < 0 || one < 0) return -1;
    int t;
    if (op == TS_ROP_GELU) {
        int two = number(b, 2);
        int r2 = two < 0 ? -1 : ts_rbuild_node1(b, &ts_op_sqrt, &two, 1, NULL, 0);
        int d = r2 < 0 ? -1 : ts_rbuild_node1(b, &ts_op_div, (int[]){x[0], r2}, 2, NULL, 0);
        t = d < 0 ? -1 : ts_rbuild_node1(b, &ts_op_erf, &d, 1, NULL, 0);
    } else {
        int c = number(b, 0.044715f), k = number(b, 0.7978845608028654f), three = number(b, 3);
        if (c < 0 || k < 0 || three < 0) return -1;
        int cube = ts_rbuild_node1(b, &ts_op_pow, (int[]){x[0], three}, 2, NULL, 0);
        int m = cube < 0 ? -1 : ts_rbuild_node1(b, &ts_op_mul, (int[]){c, cube}, 2, NULL, 0);
        int s = m < 0 ? -1 : ts_rbuild_node1(b, &ts_op_add, (int[]){x[0], m}, 2, NULL, 0);
        int u = s < 0 ? -1 : ts_rbuild_node1(b, &ts_op_mul, (int[]){k, s}, 2, NULL, 0);
        t = u < 0 ? -1 : ts_rbuild_node1(b, &ts_op_tanh, &u, 1, NULL, 0);
    }
    int a = t < 0 ? -1 : ts_rbuild_node1(b, &ts_op_add, (int[]){one, t}, 2, NULL, 0);
    int hx = a < 0 ? -1 : ts_rbuild_node1(b, &ts_op_mul, (int[]){h, x[0]}, 2, NULL, 0);
    return hx < 0 ? -1 : ts_rbuild_node1(b, &ts_op_mul, (int[]){hx, a}, 2, NULL, 0);
}

/* LayerNormalization(x, Scale = 1) with epsilon the constant number x[1];
 * the axes must be the trailing ones from ONNX's `axis` on. */
int ts_atom_layernorm_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)op;
    const ts_shape *xs = ts_rvshape(b->g, x[0]);
    const ts_tensor *eps = b->g->values[x[1]].constant;
    if (!eps || ts_tensor_numel(eps) != 1) return -1;
    int first = -1;
    for (int a = 0; a < xs->rank; a++) {
        bool in = ts_raxes_has(p->axes, a, xs->rank);
        if (in && first < 0) first = a;
        if (first >= 0 && !in) return -1; /* not a trailing block */
    }
    for (int a = -8; a < 8; a++) /* and nothing beyond the rank */
        if ((p->axes & ts_raxes_bit(a)) && (a >= xs->rank || a < -xs->rank)) return -1;
    if (first < 0) return -1;
    ts_shape ns = {.rank = xs->rank - first};
    for (int a = first; a < xs->rank; a++) ns.dims[a - first] = xs->dims[a];
    ts_tensor *one = ts_tensor_new(b->g->values[x[0]].dtype, &ns, &b->err);
    if (!one) return -1;
    for (int64_t i = 0; i < ts_tensor_numel(one); i++) ts_tensor_set_f64(one, i, 1);
    int sc = ts_rbuild_const(b, one);
    if (sc < 0) return -1;
    ts_attr a[2] = {ts_attr_int("axis", first), ts_attr_float("epsilon", ts_tensor_get_f64(eps, 0))};
    return ts_rbuild_node1(b, &ts_op_layernorm, (int[]){x[0], sc}, 2, a, 2);
}

int ts_atom_broadcast_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)op, (void)p;
    /* Expand infers its shape from a constant: ref's shape is known here */
    const ts_shape *rs = ts_rvshape(b->g, x[1]);
    ts_shape ss = {.rank = 1, .dims = {rs->rank}};
    ts_tensor *t = ts_tensor_new(TS_I64, &ss, &b->err);
    if (!t) return -1;
    for (int i = 0; i < rs->rank; i++) ((int64_t *)t->data)[i] = rs->dims[i];
    int s = ts_rbuild_const(b, t);
    return s < 0 ? -1 : ts_rbuild_node1(b, &ts_op_expand, (int[]){x[0], s}, 2, NULL, 0);
}

int ts_atom_gather_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)op;
    if (b->g->values[x[1]].dtype != TS_I64 || p->axis >= ts_rvshape(b->g, x[0])->rank) return -1;
    ts_attr a = ts_attr_int("axis", p->axis);
    return ts_rbuild_node1(b, &ts_op_gather, x, 2, &a, 1);
}
