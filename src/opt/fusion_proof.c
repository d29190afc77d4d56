/* Which proved rule a fusion applies (passes.h, ts_fusion_rule_of).
 *
 * ts_fuse_gelu and ts_fuse_layernorm find a spelled-out GELU or LayerNorm
 * by structure (ops/gelu_form.c's algebra, fuse_layernorm.c's pattern).
 * Before either rewrites, the nodes it found must be the left side of a
 * rule of rules/fusions.rules whose right side is the fused operator:
 * those rules are what `tsopt verify` proves from the operators' ONNX
 * definitions (axioms O1..O18, tests/unit/test_verify_fusions.c), so the
 * runtime replaces only spellings that are proved, and a spelling found
 * by structure but in no rule file stays as written (add the rule, and
 * the proof, to take it).  The match allows what the axioms make free:
 * the operands of add and mul in either order (O1, O3), and one axes set
 * for every reduction of the rule (no axiom reads the axes; the fusion
 * normalizes over those same axes). */
#include <pthread.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/op.h"
#include "opt/passes.h"
#include "rules/rule.h"

enum { MAX_VARS = 8, MAX_NODES = 32 };

typedef struct pmatch {
    const ts_graph *g;
    const char *var[MAX_VARS];
    int val[MAX_VARS], nvar;
    int node[MAX_NODES], nnode;
    unsigned axes; /* the reductions' axes (bit per axis); 0: none met yet */
} pmatch;

static ts_rule *fusion_rules;
static int nfusion_rules;
static pthread_once_t rules_once = PTHREAD_ONCE_INIT;

static void rules_load(void)
{
    ts_error err = {0};
    /* embedded at build time and parsed by the tests: cannot fail but out
     * of memory, and then no fusion is made */
    if (ts_rules_parse_string(ts_fusions_rules, "rules/fusions.rules", &fusion_rules, &nfusion_rules, &err))
        fusion_rules = NULL, nfusion_rules = 0;
}

unsigned ts_opt_mean_axes(const ts_graph *g, const ts_node *nd)
{
    const ts_reduce_attrs *a = nd->attrs;
    int rank = g->values[nd->inputs[0]].shape.rank, naxes = a->naxes;
    const int64_t *axes = a->axes;
    if (!a->keepdims) return 0;
    if (nd->ninputs > 1 && nd->inputs[1] >= 0) { /* opset 18: axes as an input */
        const ts_tensor *t = g->values[nd->inputs[1]].constant;
        if (!t || t->dtype != TS_I64 || ts_tensor_numel(t) > TS_MAX_RANK) return 0;
        naxes = (int)ts_tensor_numel(t);
        axes = t->data;
    }
    unsigned m = 0;
    for (int i = 0; i < naxes; i++) {
        int ax;
        if (!ts_axis_norm(axes[i], rank, &ax)) return 0;
        m |= 1u << ax;
    }
    return m;
}

static bool match(pmatch *s, const ts_rexpr *e, int v);

static bool match_args(pmatch *s, const ts_rexpr *e, const int *in, bool swap)
{
    if (e->nargs == 1) return match(s, e->arg[0], in[0]);
    return match(s, e->arg[0], in[swap]) && match(s, e->arg[1], in[!swap]);
}

/* Value v of s->g is what pattern e computes, binding e's variables (?x
 * bound before; every other one a constant). */
static bool match(pmatch *s, const ts_rexpr *e, int v)
{
    const ts_graph *g = s->g;
    if (v < 0) return false;
    const ts_tensor *t = g->values[v].constant;
    if (e->op == TS_ROP_VAR) {
        for (int i = 0; i < s->nvar; i++)
            if (!strcmp(s->var[i], e->var)) return s->val[i] == v;
        if (!t || s->nvar == MAX_VARS) return false;
        s->var[s->nvar] = e->var;
        s->val[s->nvar++] = v;
        return true;
    }
    if (e->op == TS_ROP_NUM) /* the number as a model stores it, float32 */
        return t && ts_tensor_numel(t) == 1 && ts_dtype_is_float(t->dtype) &&
               (float)ts_tensor_get_f64(t, 0) == e->p.value;
    const ts_ropinfo *ri = &ts_rop_table[e->op];
    const int n = g->values[v].producer;
    if (t || n < 0 || !ri->op) return false;
    const ts_node *nd = &g->nodes[n];
    const bool mean = e->op == TS_ROP_REDUCEMEAN;
    if (nd->dead || nd->op != ri->op || nd->noutputs != 1 || (mean ? nd->ninputs < 1 : nd->ninputs != e->nargs))
        return false;
    if (mean) {
        unsigned m = ts_opt_mean_axes(g, nd);
        if (!m || (s->axes && s->axes != m)) return false;
        s->axes = m;
    }
    bool seen = false;
    for (int i = 0; i < s->nnode; i++) seen |= s->node[i] == n;
    if (!seen) {
        if (s->nnode == MAX_NODES) return false;
        s->node[s->nnode++] = n;
    }
    const pmatch before = *s;
    if (match_args(s, e, nd->inputs, false)) return true;
    *s = before;
    if (ri->commutative && match_args(s, e, nd->inputs, true)) return true;
    *s = before;
    return false;
}

static bool has_op(const ts_rexpr *e, ts_rop op)
{
    if (e->op == op) return true;
    for (int i = 0; i < e->nargs; i++)
        if (has_op(e->arg[i], op)) return true;
    return false;
}

const char *ts_fusion_rule_of(const ts_graph *g, int x, int y, const int *nodes, int nn, int fused)
{
    pthread_once(&rules_once, rules_load);
    for (int r = 0; r < nfusion_rules; r++) {
        const ts_rule *ru = &fusion_rules[r];
        if (ru->nout != 1 || !has_op(ru->rhs[0], (ts_rop)fused)) continue;
        pmatch s = {.g = g, .var = {"x"}, .val = {x}, .nvar = 1};
        if (!match(&s, ru->lhs[0], y) || s.nnode != nn) continue;
        bool same = true; /* the nodes the fusion removes are the rule's */
        for (int k = 0; k < nn && same; k++) {
            bool in = false;
            for (int i = 0; i < s.nnode; i++) in |= s.node[i] == nodes[k];
            same = in;
        }
        if (same) return ru->name;
    }
    return NULL;
}
