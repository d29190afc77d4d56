/* GELU after a MatMul/Gemm/Conv, whatever element-wise nodes an exporter
 * wrote it with, as oneDNN's gelu post-op (dnnl_util.c's fusion walker).
 *
 * Exporters spell GELU in many ways: PyTorch's erf form
 * Mul(Mul(x, Add(Erf(Div(x, 1.414..)), 1)), 0.5), Hugging Face's
 * x * 0.5 * (1 + erf(x * 0.7071..)), the tanh form with x*x*x or
 * Pow(x, 3), constants on either side.  Matching each spelling would miss
 * the next exporter's, so the nodes are taken by structure only -- the
 * element-wise nodes that read x, scalar constants and each other, ending
 * in one value -- and that small function is then evaluated at a dozen
 * points against both GELUs.  Fused, the transformer MLP's hidden tensor
 * (swin_t stage 1: 56x56x384) is written once instead of written, read
 * twice by a five-op pass and written again. */
#include <math.h>
#include "exec/dnnl_util.h"
#include "ops/list.h"

#define GELU_MAX_NODES 12

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
static bool candidate(const xplan *p, const ts_node *nd, const ts_shape *xs, const int *vals, int nv)
{
    const ts_op_desc *op = nd->op;
    if (op != &ts_op_add && op != &ts_op_sub && op != &ts_op_mul && op != &ts_op_div && op != &ts_op_pow &&
        op != &ts_op_erf && op != &ts_op_tanh)
        return false;
    int want = op == &ts_op_erf || op == &ts_op_tanh ? 1 : 2;
    if (nd->ninputs != want || nd->noutputs != 1 || nd->outputs[0] < 0) return false;
    const ts_value *o = &p->g->values[nd->outputs[0]];
    if (o->dtype != TS_F32 || !ts_shape_eq(&o->shape, xs)) return false;
    bool reads_set = false;
    for (int i = 0; i < nd->ninputs; i++) {
        int in = nd->inputs[i];
        if (in >= 0 && index_of(vals, nv, in) >= 0) {
            reads_set = true;
            continue;
        }
        const ts_tensor *t = in >= 0 ? xplan_const(p, in) : NULL;
        if (!t || ts_tensor_numel(t) != 1 || !ts_dtype_is_float(t->dtype)) return false;
    }
    return reads_set;
}

static double gelu_erf(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double gelu_tanh(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * /* sqrt(2 / pi) */ (x + 0.044715 * x * x * x)));
}

/* The collected nodes applied to x (in double). */
static double eval(const xplan *p, const int *nodes, int nn, const int *vals, double x)
{
    double v[GELU_MAX_NODES + 1];
    v[0] = x;
    for (int k = 0; k < nn; k++) {
        const ts_node *nd = &p->g->nodes[nodes[k]];
        double a[2] = {0, 0};
        for (int i = 0; i < nd->ninputs; i++) {
            int j = index_of(vals, k + 1, nd->inputs[i]);
            a[i] = j >= 0 ? v[j] : ts_tensor_get_f64(xplan_const(p, nd->inputs[i]), 0);
        }
        const ts_op_desc *op = nd->op;
        v[k + 1] = op == &ts_op_add   ? a[0] + a[1]
                   : op == &ts_op_sub ? a[0] - a[1]
                   : op == &ts_op_mul ? a[0] * a[1]
                   : op == &ts_op_div ? a[0] / a[1]
                   : op == &ts_op_pow ? pow(a[0], a[1])
                   : op == &ts_op_erf ? erf(a[0])
                                      : tanh(a[0]);
    }
    return v[nn];
}

int xd_gelu_after(const xplan *p, int v, int *nodes, int max, int *nnodes, dnnl_alg_kind_t *alg)
{
    const ts_graph *g = p->g;
    if (v < 0 || xgraph_is_output(g, v) || g->values[v].dtype != TS_F32) return -1;
    const ts_shape *xs = &g->values[v].shape;
    int vals[GELU_MAX_NODES + 1] = {v}, nn = 0;
    if (max > GELU_MAX_NODES) max = GELU_MAX_NODES;
    /* closure over consumers, in dependency order (a node joins once all
     * it reads is in the set) */
    for (bool grew = true; grew;) {
        grew = false;
        for (int n = 0; n < g->nnodes; n++) {
            const ts_node *nd = &g->nodes[n];
            if (nd->dead || p->claimed[n] || index_of(nodes, nn, n) >= 0 || !candidate(p, nd, xs, vals, nn + 1))
                continue;
            if (nn == max) return -1;
            nodes[nn++] = n;
            vals[nn] = nd->outputs[0];
            grew = true;
        }
    }
    if (nn < 3) return -1;
    /* x and every value but the last are read inside only; the last is
     * read outside only (or is a graph output) */
    for (int k = 0; k <= nn; k++) {
        int inside = 0, outside = 0;
        for (int n = 0; n < g->nnodes; n++) {
            if (g->nodes[n].dead || !uses(&g->nodes[n], vals[k])) continue;
            if (index_of(nodes, nn, n) >= 0)
                inside++;
            else
                outside++;
        }
        if (k < nn && (outside || !inside || (k > 0 && xgraph_is_output(g, vals[k])))) return -1;
        if (k == nn && inside) return -1;
    }
    static const double xs_test[] = {-7.5, -4.0, -2.2, -1.3, -0.7, -0.25, 0.0, 0.1, 0.55, 1.1, 1.9, 3.3, 6.0};
    bool is_erf = true, is_tanh = true;
    for (size_t i = 0; i < sizeof xs_test / sizeof *xs_test; i++) {
        double x = xs_test[i], y = eval(p, nodes, nn, vals, x);
        double ge = gelu_erf(x), gt = gelu_tanh(x);
        is_erf &= fabs(y - ge) <= 1e-6 * (1 + fabs(ge));
        is_tanh &= fabs(y - gt) <= 1e-6 * (1 + fabs(gt));
    }
    if (!is_erf && !is_tanh) return -1;
    *alg = is_erf ? dnnl_eltwise_gelu_erf : dnnl_eltwise_gelu_tanh;
    *nnodes = nn;
    return vals[nn];
}
