/* Which element-wise subgraphs compute GELU (ts_gelu_spelling, gelu_form.h):
 * the optimizer's fuse_gelu.c finds them here and rewrites those that are
 * a rule of rules/fusions.rules, proved by `tsopt verify`
 * (opt/fusion_proof.c), into one Gelu node; the runtime takes no spelling
 * itself (it lowers the Gelu node).
 *
 * Exporters before opset 20 spell GELU in many ways: PyTorch's erf form
 * Mul(Mul(x, Add(Erf(Div(x, 1.414..)), 1)), 0.5), Hugging Face's
 * x * 0.5 * (1 + erf(x * 0.7071..)), the tanh form with x*x*x or
 * Pow(x, 3), constants on either side.  Matching each spelling would miss
 * the next exporter's, so the nodes are taken by structure only -- the
 * element-wise nodes that read x, scalar constants and each other, ending
 * in one value -- and that small function is then computed symbolically
 * (which_gelu: polynomials in x around one Erf or Tanh) and must be one
 * GELU exactly, its constants equal to float32 rounding: algebra, not
 * values at sample points (GELU + 1e-9 x^3 is refused). */
#include <math.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/op.h"
#include "ops/gelu_form.h"

static bool uses(const ts_node *nd, int v)
{
    for (int i = 0; i < nd->ninputs; i++)
        if (nd->inputs[i] == v) return true;
    return false;
}

static int index_of(const int *vals, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (vals[i] == v) return i;
    return -1;
}

/* Node nd may join: a unary or binary element-wise op of float32 with the
 * shape of x, reading only values of the set and scalar constants. */
static bool candidate(const ts_graph *g, const ts_node *nd, const ts_shape *xs, const int *vals, int nv)
{
    const ts_op_desc *op = nd->op;
    if (op != &ts_op_add && op != &ts_op_sub && op != &ts_op_mul && op != &ts_op_div && op != &ts_op_pow &&
        op != &ts_op_erf && op != &ts_op_tanh)
        return false;
    int want = op == &ts_op_erf || op == &ts_op_tanh ? 1 : 2;
    if (nd->ninputs != want || nd->noutputs != 1 || nd->outputs[0] < 0) return false;
    const ts_value *o = &g->values[nd->outputs[0]];
    if (o->dtype != TS_F32 || !ts_shape_eq(&o->shape, xs)) return false;
    bool reads_set = false;
    for (int i = 0; i < nd->ninputs; i++) {
        int in = nd->inputs[i];
        if (in >= 0 && index_of(vals, nv, in) >= 0) {
            reads_set = true;
            continue;
        }
        const ts_tensor *t = in >= 0 ? g->values[in].constant : NULL;
        if (!t || ts_tensor_numel(t) != 1 || !ts_dtype_is_float(t->dtype)) return false;
    }
    return reads_set;
}

/* What a value of the subgraph is, symbolically: P(x) * (1 + f(u)) when
 * `gate`, else P(x); P a polynomial of degree <= 3 in x; f(u) alone (`atom`:
 * an Erf or Tanh output, only valid as the operand of + 1). */
typedef struct sym {
    double c[4]; /* P's coefficients, x^0 .. x^3 */
    bool gate, atom;
} sym;

/* The single Erf or Tanh of the subgraph: its operator and argument u(x). */
typedef struct gate_fn {
    const ts_op_desc *op;
    double u[4];
} gate_fn;

static bool poly_mul(const double *a, const double *b, double *out)
{
    double r[7] = {0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) r[i + j] += a[i] * b[j];
    for (int k = 4; k < 7; k++)
        if (r[k] != 0) return false;
    memcpy(out, r, 4 * sizeof *out);
    return true;
}

/* a == b within a float32 constant's rounding (relative 1e-6). */
static bool near(double a, double b) { return fabs(a - b) <= 1e-6 * fmax(fabs(a), fabs(b)); }

static bool poly_is(const double *c, const double *want)
{
    for (int k = 0; k < 4; k++)
        if (want[k] == 0 ? fabs(c[k]) > 1e-12 : !near(c[k], want[k])) return false;
    return true;
}

/* Node nd's result from its operands' (a: the first; b: the second, or
 * a constant's), false when it leaves the forms above. */
static bool sym_step(const ts_op_desc *op, const sym *a, const sym *b, bool b_const, gate_fn *gf, sym *r)
{
    memset(r, 0, sizeof *r);
    if (op == &ts_op_erf || op == &ts_op_tanh) {
        if (a->gate || a->atom || gf->op) return false; /* one Erf or Tanh */
        gf->op = op;
        memcpy(gf->u, a->c, sizeof gf->u);
        r->atom = true;
        return true;
    }
    if (a->atom || b->atom) { /* f(u) + 1, either order */
        const sym *o = a->atom ? b : a;
        if (op != &ts_op_add || (a->atom && b->atom) || o->gate || !poly_is(o->c, (double[4]){1, 0, 0, 0}))
            return false;
        r->gate = true;
        r->c[0] = 1;
        return true;
    }
    if (op == &ts_op_mul) {
        if (a->gate && b->gate) return false;
        r->gate = a->gate || b->gate;
        return poly_mul(a->c, b->c, r->c);
    }
    if (op == &ts_op_div) { /* by a constant only */
        if (!b_const || b->c[0] == 0) return false;
        r->gate = a->gate;
        for (int k = 0; k < 4; k++) r->c[k] = a->c[k] / b->c[0];
        return true;
    }
    if (op == &ts_op_add || op == &ts_op_sub) {
        if (a->gate || b->gate) return false;
        for (int k = 0; k < 4; k++) r->c[k] = op == &ts_op_add ? a->c[k] + b->c[k] : a->c[k] - b->c[k];
        return true;
    }
    if (op == &ts_op_pow) { /* x^2, x^3 */
        double e = b->c[0];
        if (!b_const || a->gate || (e != 2 && e != 3)) return false;
        double t[4];
        if (!poly_mul(a->c, a->c, t)) return false;
        if (e == 3 && !poly_mul(t, a->c, t)) return false;
        memcpy(r->c, t, sizeof t);
        return true;
    }
    return false;
}

/* Which GELU the collected nodes compute, proved by their algebra rather
 * than sampled: the result must be 0.5 x (1 + erf(x / sqrt 2)) or
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) as polynomials, the
 * constants equal to float32 rounding.  0: neither, 1: erf, 2: tanh. */
static int which_gelu(const ts_graph *g, const int *nodes, int nn, const int *vals, double *erf_s)
{
    sym v[GELU_MAX_NODES + 1];
    memset(v, 0, sizeof v);
    v[0].c[1] = 1; /* x */
    gate_fn gf = {0};
    for (int k = 0; k < nn; k++) {
        const ts_node *nd = &g->nodes[nodes[k]];
        sym a[2];
        bool is_const[2] = {false, false};
        memset(a, 0, sizeof a);
        for (int i = 0; i < nd->ninputs; i++) {
            int j = index_of(vals, k + 1, nd->inputs[i]);
            if (j >= 0) {
                a[i] = v[j];
            } else {
                a[i].c[0] = ts_tensor_get_f64(g->values[nd->inputs[i]].constant, 0);
                is_const[i] = true;
            }
        }
        if (is_const[0] && nd->ninputs == 2 && (nd->op == &ts_op_div || nd->op == &ts_op_pow)) return 0;
        if (!sym_step(nd->op, &a[0], &a[1], is_const[1], &gf, &v[k + 1])) return 0;
    }
    const sym *y = &v[nn];
    static const double half_x[4] = {0, 0.5, 0, 0}, erf_u[4] = {0, 0.70710678118654752, 0, 0},
                        tanh_u[4] = {0, 0.7978845608028654, 0, 0.7978845608028654 * 0.044715};
    if (!y->gate || y->atom || !poly_is(y->c, half_x)) return 0;
    if (erf_s) { /* erf(s x), s within a 16-bit rounding of 1/sqrt 2 (the export's 1.414.. stored 16-bit) */
        if (gf.op != &ts_op_erf || !poly_is(gf.u, (double[4]){0, gf.u[1], 0, 0}) ||
            !(fabs(gf.u[1] * 1.4142135623730951 - 1) <= 0x1p-8))
            return 0;
        *erf_s = gf.u[1];
        return 1;
    }
    if (gf.op == &ts_op_erf && poly_is(gf.u, erf_u)) return 1;
    if (gf.op == &ts_op_tanh && poly_is(gf.u, tanh_u)) return 2;
    return 0;
}

static int spelling(const ts_graph *g, int v, bool x_shared, const bool *skip, int *nodes, int max, int *nnodes,
                    bool *tanh_form, double *erf_s)
{
    if (v < 0 || (!x_shared && ts_graph_is_output(g, v)) || g->values[v].dtype != TS_F32) return -1;
    const ts_shape *xs = &g->values[v].shape;
    int vals[GELU_MAX_NODES + 1] = {v}, nn = 0;
    if (max > GELU_MAX_NODES) max = GELU_MAX_NODES;
    /* closure over consumers, in dependency order (a node joins once all
     * it reads is in the set) */
    for (bool grew = true; grew;) {
        grew = false;
        for (int n = 0; n < g->nnodes; n++) {
            const ts_node *nd = &g->nodes[n];
            if (nd->dead || (skip && skip[n]) || index_of(nodes, nn, n) >= 0 || !candidate(g, nd, xs, vals, nn + 1))
                continue;
            if (nn == max) return -1;
            nodes[nn++] = n;
            vals[nn] = nd->outputs[0];
            grew = true;
        }
    }
    if (nn < 3) return -1;
    /* x (unless x_shared) and every value but the last are read inside
     * only; the last is read outside only (or is a graph output) */
    for (int k = 0; k <= nn; k++) {
        int inside = 0, outside = 0;
        for (int n = 0; n < g->nnodes; n++) {
            if (g->nodes[n].dead || !uses(&g->nodes[n], vals[k])) continue;
            if (index_of(nodes, nn, n) >= 0)
                inside++;
            else
                outside++;
        }
        if (k < nn && (!inside || (outside && (k > 0 || !x_shared)) || (k > 0 && ts_graph_is_output(g, vals[k])))) return -1;
        if (k == nn && inside) return -1;
    }
    int a = which_gelu(g, nodes, nn, vals, erf_s);
    if (!a) return -1;
    if (tanh_form) *tanh_form = a == 2;
    *nnodes = nn;
    return vals[nn];
}

int ts_gelu_spelling(const ts_graph *g, int v, bool x_shared, const bool *skip, int *nodes, int max, int *nnodes,
                     bool *tanh_form)
{
    return spelling(g, v, x_shared, skip, nodes, max, nnodes, tanh_form, NULL);
}

int ts_gelu_spelling_scaled(const ts_graph *g, int v, const bool *skip, int *nodes, int max, int *nnodes,
                            double *erf_s)
{
    return spelling(g, v, false, skip, nodes, max, nnodes, NULL, erf_s);
}

