/* Matcher/applier (src/rules/match.c, apply.c) on small graphs: a
 * commutation, the classic merge of two convolutions sharing an input (with
 * the concatenated kernel folded to a constant), a rule used right to left
 * (two convolutions whose sum is one convolution of concatenated inputs), a
 * rewrite that would make a cycle, and parameters that must not match. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include "ops/attrs.h"
#include "rules/apply.h"

static const char RULES[] =
    "; tsopt rules v1\n"
    "(rule comm (lhs (ewadd ?x ?y)) (rhs (ewadd ?y ?x)))\n"
    "(rule convmerge\n"
    "  (lhs (conv s1 same none ?x ?w1) (conv s1 same none ?x ?w2))\n"
    "  (rhs (split0 1 (conv s1 same none ?x (concat 0 ?w1 ?w2)))\n"
    "       (split1 1 (conv s1 same none ?x (concat 0 ?w1 ?w2)))))\n"
    "(rule mmmerge\n"
    "  (lhs (matmul ?x ?w1) (matmul ?x ?w2))\n"
    "  (rhs (split0 1 (matmul ?x (concat 1 ?w1 ?w2))) (split1 1 (matmul ?x (concat 1 ?w1 ?w2)))))\n"
    /* as the generator writes it (rules/taso.rules taso-0328): the merged
     * form on the left, so only its reverse merges two convs */
    "(rule convsum\n"
    "  (lhs (conv s1 same none (concat 1 ?i1 ?i2) (concat 1 ?k1 ?k2)))\n"
    "  (rhs (ewadd (conv s1 same none ?i1 ?k1) (conv s1 same none ?i2 ?k2))))\n";

static ts_rule *rules;
static int nrules;

static void setup(void)
{
    ts_error e = {0};
    cr_assert_eq(ts_rules_parse_string(RULES, "test", &rules, &nrules, &e), TS_OK, "%s", e.msg);
    int added = 0;
    cr_assert_eq(ts_rules_add_reverses(&rules, &nrules, &added, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(added, 4);
}
static void teardown(void) { ts_rules_free(rules, nrules); }

static const ts_rule *rule(const char *name)
{
    for (int i = 0; i < nrules; i++)
        if (!strcmp(rules[i].name, name)) return &rules[i];
    cr_assert_fail("no rule %s", name);
    return NULL;
}

typedef struct collect {
    ts_match m[8];
    int n;
} collect;

static bool keep(const ts_match *m, void *ctx)
{
    collect *c = ctx;
    if (c->n < 8) c->m[c->n++] = *m;
    return true;
}

static int matches(const ts_graph *g, const ts_rule *r, collect *c)
{
    ts_match_index ix;
    ts_error e = {0};
    memset(c, 0, sizeof *c);
    cr_assert_eq(ts_match_index_build(&ix, g, &e), TS_OK);
    int n = ts_match_all(&ix, r, keep, c);
    ts_match_index_free(&ix);
    return n;
}

static ts_tensor *rand_tensor(int rank, const int64_t *dims, uint64_t *rng)
{
    ts_shape s = ts_shape_make(rank, dims);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, NULL);
    ts_tensor_fill_random(t, rng, -1, 1);
    return t;
}

/* Runs both graphs on the same random inputs with the reference interpreter. */
static void assert_same(const ts_graph *a, const ts_graph *b)
{
    ts_error e = {0};
    uint64_t rng = 7;
    ts_tensor *in[4], *oa[4], *ob[4];
    cr_assert_eq(a->ninputs, b->ninputs);
    cr_assert_eq(a->noutputs, b->noutputs);
    for (int i = 0; i < a->ninputs; i++) {
        const ts_value *v = &a->values[a->inputs[i]];
        in[i] = rand_tensor(v->shape.rank, v->shape.dims, &rng);
    }
    cr_assert_eq(ts_graph_run_reference(a, TS_DOMAIN_F32, in, oa, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_run_reference(b, TS_DOMAIN_F32, in, ob, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < a->noutputs; i++) {
        cr_assert_str_eq(a->values[a->outputs[i]].name, b->values[b->outputs[i]].name);
        cr_assert_eq(ts_tensor_numel(oa[i]), ts_tensor_numel(ob[i]));
        for (int64_t k = 0; k < ts_tensor_numel(oa[i]); k++)
            cr_assert(fabs(ts_tensor_get_f64(oa[i], k) - ts_tensor_get_f64(ob[i], k)) < 1e-4, "output %d[%lld]", i,
                      (long long)k);
        ts_tensor_unref(oa[i]);
        ts_tensor_unref(ob[i]);
    }
    for (int i = 0; i < a->ninputs; i++) ts_tensor_unref(in[i]);
}

static int count_op(const ts_graph *g, const char *op)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !g->nodes[i].dead && !strcmp(g->nodes[i].op->name, op);
    return n;
}

Test(match, ewadd_commutes, .init = setup, .fini = teardown)
{
    ts_error e = {0};
    int64_t d[2] = {3, 4};
    ts_shape s = ts_shape_make(2, d);
    ts_graph *g = ts_graph_new("comm", 17);
    int in[2] = {ts_graph_add_input(g, "a", TS_F32, &s, &e), ts_graph_add_input(g, "b", TS_F32, &s, &e)}, y;
    cr_assert(ts_graph_add_node(g, "Add", "add", in, 2, NULL, 0, 1, (const char *const[]){"y"}, &y, &e) >= 0);
    ts_graph_add_output(g, y, &e);
    collect c;
    cr_assert_eq(matches(g, rule("comm"), &c), 1);
    ts_graph *h = NULL;
    cr_assert_eq(ts_rule_apply(g, rule("comm"), &c.m[0], &h, &e), TS_OK, "%s", e.msg);
    cr_assert_not_null(h);
    cr_assert_eq(count_op(h, "Add"), 1);
    const ts_node *n = &h->nodes[h->values[h->outputs[0]].producer];
    cr_assert_str_eq(h->values[n->inputs[0]].name, "b");
    cr_assert_str_eq(h->values[n->inputs[1]].name, "a");
    cr_assert_neq(ts_graph_hash(g), ts_graph_hash(h));
    assert_same(g, h);
    ts_graph_free(h);
    ts_graph_free(g);
}

/* x -> Conv(w1), Conv(w2) (3x3, pads 1, stride s) -> two outputs */
static ts_graph *two_convs(int stride, int pad)
{
    ts_error e = {0};
    uint64_t rng = 3;
    int64_t xd[4] = {1, 4, 8, 8}, w1d[4] = {3, 4, 3, 3}, w2d[4] = {5, 4, 3, 3};
    ts_shape xs = ts_shape_make(4, xd);
    ts_graph *g = ts_graph_new("convs", 17);
    int x = ts_graph_add_input(g, "x", TS_F32, &xs, &e);
    ts_tensor *t1 = rand_tensor(4, w1d, &rng), *t2 = rand_tensor(4, w2d, &rng);
    int w1 = ts_graph_add_constant(g, "w1", t1, &e), w2 = ts_graph_add_constant(g, "w2", t2, &e);
    ts_tensor_unref(t1);
    ts_tensor_unref(t2);
    int64_t st[2] = {stride, stride}, pads[4] = {pad, pad, pad, pad};
    ts_attr a[2] = {ts_attr_ints("strides", st, 2), ts_attr_ints("pads", pads, 4)};
    int y1, y2, i1[2] = {x, w1}, i2[2] = {x, w2};
    cr_assert(ts_graph_add_node(g, "Conv", "c1", i1, 2, a, 2, 1, (const char *const[]){"y1"}, &y1, &e) >= 0, "%s",
              e.msg);
    cr_assert(ts_graph_add_node(g, "Conv", "c2", i2, 2, a, 2, 1, (const char *const[]){"y2"}, &y2, &e) >= 0, "%s",
              e.msg);
    ts_graph_add_output(g, y1, &e);
    ts_graph_add_output(g, y2, &e);
    return g;
}

Test(match, conv_merge_folds_weights, .init = setup, .fini = teardown)
{
    ts_error e = {0};
    ts_graph *g = two_convs(1, 1);
    collect c;
    cr_assert_eq(matches(g, rule("convmerge"), &c), 2); /* (c1, c2) and (c2, c1) */
    ts_graph *h = NULL;
    cr_assert_eq(ts_rule_apply(g, rule("convmerge"), &c.m[0], &h, &e), TS_OK, "%s", e.msg);
    cr_assert_not_null(h);
    cr_assert_eq(ts_graph_validate(h, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(count_op(h, "Conv"), 1);
    cr_assert_eq(count_op(h, "Split"), 1);
    cr_assert_eq(count_op(h, "Concat"), 0, "the kernel concat is a weight-only subgraph: folded");
    const ts_node *conv = NULL;
    for (int i = 0; i < h->nnodes; i++)
        if (!strcmp(h->nodes[i].op->name, "Conv")) conv = &h->nodes[i];
    cr_assert_not_null(h->values[conv->inputs[1]].constant);
    cr_assert_eq(h->values[conv->inputs[1]].shape.dims[0], 8);
    assert_same(g, h);
    ts_graph_free(h);
    ts_graph_free(g);
}

/* Add(Conv(x, w1, b1), Conv(y, w2, b2)), 1x1 kernels with biases */
static ts_graph *conv_sum(void)
{
    ts_error e = {0};
    uint64_t rng = 5;
    int64_t xd[4] = {1, 3, 6, 6}, yd[4] = {1, 5, 6, 6}, w1d[4] = {4, 3, 1, 1}, w2d[4] = {4, 5, 1, 1}, bd[1] = {4};
    ts_shape xs = ts_shape_make(4, xd), ys = ts_shape_make(4, yd);
    ts_graph *g = ts_graph_new("convsum", 17);
    int x = ts_graph_add_input(g, "x", TS_F32, &xs, &e), y = ts_graph_add_input(g, "y", TS_F32, &ys, &e);
    ts_tensor *t[4] = {rand_tensor(4, w1d, &rng), rand_tensor(4, w2d, &rng), rand_tensor(1, bd, &rng),
                       rand_tensor(1, bd, &rng)};
    int c[4];
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "k%d", i);
        c[i] = ts_graph_add_constant(g, name, t[i], &e);
        ts_tensor_unref(t[i]);
    }
    int y1, y2, s, i1[3] = {x, c[0], c[2]}, i2[3] = {y, c[1], c[3]};
    cr_assert(ts_graph_add_node(g, "Conv", "c1", i1, 3, NULL, 0, 1, (const char *const[]){"y1"}, &y1, &e) >= 0);
    cr_assert(ts_graph_add_node(g, "Conv", "c2", i2, 3, NULL, 0, 1, (const char *const[]){"y2"}, &y2, &e) >= 0);
    int ia[2] = {y1, y2};
    cr_assert(ts_graph_add_node(g, "Add", "add", ia, 2, NULL, 0, 1, (const char *const[]){"s"}, &s, &e) >= 0);
    ts_graph_add_output(g, s, &e);
    return g;
}

Test(match, reversed_rule_merges_a_conv_sum, .init = setup, .fini = teardown)
{
    ts_error e = {0};
    ts_graph *g = conv_sum();
    collect c;
    cr_assert_eq(matches(g, rule("convsum"), &c), 0, "the merged form is not in the graph");
    cr_assert_eq(matches(g, rule("convsum~rev"), &c), 1);
    ts_graph *h = NULL;
    cr_assert_eq(ts_rule_apply(g, rule("convsum~rev"), &c.m[0], &h, &e), TS_OK, "%s", e.msg);
    cr_assert_not_null(h);
    cr_assert_eq(ts_graph_validate(h, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(count_op(h, "Conv"), 1);
    cr_assert_eq(count_op(h, "Add"), 0, "the biases are added into one constant");
    cr_assert_eq(count_op(h, "Concat"), 1, "only the inputs' concat is left; the kernels' is folded");
    assert_same(g, h);
    ts_graph_free(h);
    ts_graph_free(g);
}

Test(match, parameters_must_agree, .init = setup, .fini = teardown)
{
    collect c;
    ts_graph *g = two_convs(2, 1); /* stride 2: the rule says s1 */
    cr_assert_eq(matches(g, rule("convmerge"), &c), 0);
    ts_graph_free(g);
    g = two_convs(1, 0); /* VALID padding: the rule says same */
    cr_assert_eq(matches(g, rule("convmerge"), &c), 0);
    ts_graph_free(g);
}

Test(match, cycle_rejected, .init = setup, .fini = teardown)
{
    /* c2 = x * relu(x * w1): merging the two MatMuls on x would make the
     * merged MatMul read its own output through the Relu */
    ts_error e = {0};
    uint64_t rng = 5;
    int64_t d[2] = {4, 4};
    ts_shape s = ts_shape_make(2, d);
    ts_graph *g = ts_graph_new("cyc", 17);
    int x = ts_graph_add_input(g, "x", TS_F32, &s, &e);
    ts_tensor *t = rand_tensor(2, d, &rng);
    int w1 = ts_graph_add_constant(g, "w1", t, &e);
    ts_tensor_unref(t);
    int c1, r, c2, i1[2] = {x, w1};
    cr_assert(ts_graph_add_node(g, "MatMul", "m1", i1, 2, NULL, 0, 1, NULL, &c1, &e) >= 0);
    cr_assert(ts_graph_add_node(g, "Relu", "r", &c1, 1, NULL, 0, 1, NULL, &r, &e) >= 0);
    int i2[2] = {x, r};
    cr_assert(ts_graph_add_node(g, "MatMul", "m2", i2, 2, NULL, 0, 1, (const char *const[]){"y"}, &c2, &e) >= 0);
    ts_graph_add_output(g, c2, &e);
    collect c;
    cr_assert_geq(matches(g, rule("mmmerge"), &c), 1);
    for (int i = 0; i < c.n; i++) {
        ts_graph *h = (ts_graph *)1;
        cr_assert_eq(ts_rule_apply(g, rule("mmmerge"), &c.m[i], &h, &e), TS_OK, "%s", e.msg);
        cr_assert_null(h, "a rewrite that makes a cycle is rejected");
    }
    ts_graph_free(g);
}

Test(match, interior_value_used_outside, .init = setup, .fini = teardown)
{
    /* relu(conv) with the conv output also a graph output: a conv act=relu
     * pattern must not swallow the conv */
    ts_error e = {0};
    const char *txt = "; tsopt rules v1\n(rule cr (lhs (conv s1 same relu ?x ?w)) (rhs (conv s1 same relu ?x ?w)))\n";
    ts_rule *rr;
    int nr;
    cr_assert_eq(ts_rules_parse_string(txt, "t", &rr, &nr, &e), TS_OK, "%s", e.msg);
    ts_graph *g = two_convs(1, 1);
    int y1 = g->outputs[0], z;
    cr_assert(ts_graph_add_node(g, "Relu", "relu", &y1, 1, NULL, 0, 1, NULL, &z, &e) >= 0);
    ts_graph_add_output(g, z, &e);
    collect c;
    cr_assert_eq(matches(g, &rr[0], &c), 0);
    ts_graph_free(g);
    ts_rules_free(rr, nr);
}

/* ---- the root index (ts_match_index groups live nodes by descriptor) */

/* Relu(Add(a, b)) on 3x4 tensors: neither MatMul nor Conv in the graph. */
static ts_graph *add_relu(void)
{
    ts_error e = {0};
    int64_t d[2] = {3, 4};
    ts_shape s = ts_shape_make(2, d);
    ts_graph *g = ts_graph_new("addrelu", 17);
    int in[2] = {ts_graph_add_input(g, "a", TS_F32, &s, &e), ts_graph_add_input(g, "b", TS_F32, &s, &e)}, y, z;
    cr_assert(ts_graph_add_node(g, "Add", "add", in, 2, NULL, 0, 1, NULL, &y, &e) >= 0);
    cr_assert(ts_graph_add_node(g, "Relu", "relu", &y, 1, NULL, 0, 1, NULL, &z, &e) >= 0);
    ts_graph_add_output(g, z, &e);
    return g;
}

static ts_rule *parse1(const char *txt)
{
    ts_error e = {0};
    ts_rule *r;
    int n;
    cr_assert_eq(ts_rules_parse_string(txt, "t", &r, &n, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(n, 1);
    return r;
}

Test(match, absent_root_operator_matches_nothing)
{
    /* roots MatMul (or Add, its bias) / Relu for conv..relu / Conv */
    ts_rule *mm = parse1("; tsopt rules v1\n(rule mm (lhs (matmul ?x ?w)) (rhs (matmul ?x ?w)))\n");
    ts_rule *cr = parse1("; tsopt rules v1\n"
                         "(rule cr (lhs (conv s1 same relu ?x ?w)) (rhs (conv s1 same relu ?x ?w)))\n");
    ts_rule *cv = parse1("; tsopt rules v1\n"
                         "(rule cv (lhs (conv s1 same none ?x ?w)) (rhs (conv s1 same none ?x ?w)))\n");
    ts_graph *g = add_relu();
    collect c;
    /* the graph has Add and Relu nodes, which these roots may be, but no
     * MatMul under the Add and no Conv under the Relu */
    cr_assert_eq(matches(g, mm, &c), 0);
    cr_assert_eq(matches(g, cr, &c), 0);
    cr_assert_eq(matches(g, cv, &c), 0);
    ts_graph_free(g);
    /* nodes of other operators beside the root's do not matter */
    g = two_convs(1, 1);
    cr_assert_eq(matches(g, mm, &c), 0);
    cr_assert_eq(matches(g, cr, &c), 0);
    cr_assert_eq(matches(g, cv, &c), 2);
    ts_graph_free(g);
    ts_rules_free(mm, 1);
    ts_rules_free(cr, 1);
    ts_rules_free(cv, 1);
}

Test(match, matmul_rooted_at_its_bias)
{
    /* MatMul + Add of a constant bias vector is one matmul whose root is
     * the Add: the index must offer Add nodes to matmul rules */
    ts_error e = {0};
    uint64_t rng = 9;
    int64_t xd[2] = {2, 4}, wd[2] = {4, 3}, bd[1] = {3};
    ts_shape xs = ts_shape_make(2, xd);
    ts_graph *g = ts_graph_new("mmbias", 17);
    int x = ts_graph_add_input(g, "x", TS_F32, &xs, &e);
    ts_tensor *tw = rand_tensor(2, wd, &rng), *tb = rand_tensor(1, bd, &rng);
    int w = ts_graph_add_constant(g, "w", tw, &e), b = ts_graph_add_constant(g, "bias", tb, &e), y, z;
    ts_tensor_unref(tw);
    ts_tensor_unref(tb);
    int i1[2] = {x, w};
    cr_assert(ts_graph_add_node(g, "MatMul", "mm", i1, 2, NULL, 0, 1, NULL, &y, &e) >= 0);
    int i2[2] = {y, b};
    cr_assert(ts_graph_add_node(g, "Add", "add", i2, 2, NULL, 0, 1, (const char *const[]){"z"}, &z, &e) >= 0);
    ts_graph_add_output(g, z, &e);
    ts_rule *mm = parse1("; tsopt rules v1\n(rule mm (lhs (matmul ?x ?w)) (rhs (matmul ?x ?w)))\n");
    collect c;
    /* at the Add (bias bound to ?w) and at the MatMul alone */
    cr_assert_eq(matches(g, mm, &c), 2);
    int at_add = c.m[0].root[0] == z ? 0 : 1;
    cr_assert_eq(c.m[at_add].root[0], z);
    cr_assert_eq(c.m[at_add].bias[1], b, "the bias is bound to ?w");
    cr_assert_eq(c.m[1 - at_add].root[0], y);
    ts_rules_free(mm, 1);
    ts_graph_free(g);
}

/* Folds every match (roots, nodes, bindings) into a running hash, in the
 * order the matcher reports them. */
typedef struct tally {
    long n;
    uint64_t h;
} tally;

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static bool fold(const ts_match *m, void *ctx)
{
    tally *t = ctx;
    t->n++;
    for (int i = 0; i < m->nroots; i++) t->h = mix(t->h, (uint64_t)m->root[i]);
    for (int i = 0; i < m->nnodes; i++) t->h = mix(t->h, (uint64_t)m->node[i] + 1000000);
    for (int i = 0; i < m->nvars; i++) t->h = mix(t->h, (uint64_t)m->val[i] * 31 + (uint64_t)(m->bias[i] + 1));
    return true;
}

Test(match, index_changes_no_match_on_the_zoo)
{
    /* every rule of the shipped set (both directions) on every zoo model
     * at a small size: the indexed matcher reports exactly what trying
     * every node as a root reports, in the same order */
    ts_error e = {0};
    ts_rule *rs;
    int nr, added;
    cr_assert_eq(ts_rules_parse_string(ts_taso_rules, "taso.rules", &rs, &nr, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_rules_add_reverses(&rs, &nr, &added, &e), TS_OK, "%s", e.msg);
    long total = 0;
    const ts_zoo_model *zm;
    for (int z = 0; (zm = ts_zoo_at(z)); z++) {
        ts_zoo_opts o = {.batch = 1, .layers = 1, .steps = 2, .seed = 1, .no_weights = true};
        ts_graph *g = NULL;
        cr_assert_eq(ts_zoo_build(zm->name, &o, &g, &e), TS_OK, "%s: %s", zm->name, e.msg);
        ts_match_index ix, brute;
        cr_assert_eq(ts_match_index_build(&ix, g, &e), TS_OK);
        cr_assert_eq(ts_match_index_build(&brute, g, &e), TS_OK);
        brute.scan_all = true;
        tally a = {0}, b = {0};
        for (int r = 0; r < nr; r++) {
            int na = ts_match_all(&ix, &rs[r], fold, &a), nb = ts_match_all(&brute, &rs[r], fold, &b);
            cr_assert_eq(na, nb, "%s, rule %s: %d matches with the index, %d without", zm->name, rs[r].name, na, nb);
        }
        cr_assert_eq(a.n, b.n, "%s", zm->name);
        cr_assert_eq(a.h, b.h, "%s: the matches differ", zm->name);
        total += a.n;
        ts_match_index_free(&ix);
        ts_match_index_free(&brute);
        ts_graph_free(g);
    }
    cr_assert_gt(total, 1000, "the zoo has matches of the shipped rules (%ld)", total);
    ts_rules_free(rs, nr);
}

/* `same` is the axioms' SAME, (k-1)/2 on both sides (docs/taso.md,
 * "Semantics the axioms fix").  At stride 2 on an even image, PyTorch's
 * symmetric pads are that window and TensorFlow's SAME_UPPER (the odd pad
 * pixel after) is not, so only the former matches; on an odd image they
 * agree.  A rewrite at stride 2 rebuilds the same window. */
static ts_graph *one_conv(int hw, const int64_t *pads, const char *auto_pad)
{
    ts_error e = {0};
    uint64_t rng = 11;
    int64_t xd[4] = {1, 2, hw, hw}, wd[4] = {3, 2, 3, 3}, st[2] = {2, 2};
    ts_shape xs = ts_shape_make(4, xd);
    ts_graph *g = ts_graph_new("conv", 17);
    int x = ts_graph_add_input(g, "x", TS_F32, &xs, &e);
    ts_tensor *t = rand_tensor(4, wd, &rng);
    int w = ts_graph_add_constant(g, "w", t, &e), y, in[2] = {x, w};
    ts_tensor_unref(t);
    ts_attr a[2] = {ts_attr_ints("strides", st, 2),
                    auto_pad ? ts_attr_string("auto_pad", auto_pad) : ts_attr_ints("pads", pads, 4)};
    cr_assert(ts_graph_add_node(g, "Conv", "c", in, 2, a, 2, 1, (const char *const[]){"y"}, &y, &e) >= 0, "%s", e.msg);
    ts_graph_add_output(g, y, &e);
    return g;
}

Test(match, same_is_symmetric)
{
    ts_rule *r = parse1("; tsopt rules v1\n(rule s (lhs (conv s2 same none ?x ?w)) (rhs (conv s2 same none ?x ?w)))\n");
    const int64_t sym[4] = {1, 1, 1, 1}, tf[4] = {0, 0, 1, 1};
    collect c;
    ts_graph *g = one_conv(8, sym, NULL);
    cr_assert_eq(matches(g, r, &c), 1, "symmetric pads, even image");
    ts_graph_free(g);
    g = one_conv(8, tf, NULL);
    cr_assert_eq(matches(g, r, &c), 0, "TensorFlow's pads, even image: another window");
    ts_graph_free(g);
    g = one_conv(8, NULL, "SAME_UPPER");
    cr_assert_eq(matches(g, r, &c), 0, "SAME_UPPER, even image: another window");
    ts_graph_free(g);
    g = one_conv(9, NULL, "SAME_UPPER");
    cr_assert_eq(matches(g, r, &c), 1, "SAME_UPPER, odd image: the same window");
    ts_graph_free(g);
    ts_rules_free(r, 1);
}

Test(match, stride2_merge_keeps_the_window)
{
    ts_error e = {0};
    ts_rule *r = parse1("; tsopt rules v1\n(rule m\n"
                        "  (lhs (conv s2 same none ?x ?w1) (conv s2 same none ?x ?w2))\n"
                        "  (rhs (split0 1 (conv s2 same none ?x (concat 0 ?w1 ?w2)))\n"
                        "       (split1 1 (conv s2 same none ?x (concat 0 ?w1 ?w2)))))\n");
    ts_graph *g = two_convs(2, 1); /* 8x8, stride 2, pads 1: symmetric */
    collect c;
    cr_assert_eq(matches(g, r, &c), 2);
    ts_graph *h = NULL;
    cr_assert_eq(ts_rule_apply(g, r, &c.m[0], &h, &e), TS_OK, "%s", e.msg);
    cr_assert_not_null(h);
    cr_assert_eq(count_op(h, "Conv"), 1);
    assert_same(g, h);
    ts_graph_free(h);
    ts_graph_free(g);
    ts_rules_free(r, 1);
}

/* ---- grouped and depthwise convolution (gconv) */

static const ts_rule *core_rule(ts_rule *rs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(rs[i].name, name)) return &rs[i];
    cr_assert_fail("no core rule %s", name);
    return NULL;
}

static int add_conv(ts_graph *g, const char *name, int x, int w, int b, int64_t pad, int64_t group)
{
    ts_error e = {0};
    int64_t st[2] = {1, 1}, pads[4] = {pad, pad, pad, pad};
    ts_attr a[3] = {ts_attr_ints("strides", st, 2), ts_attr_ints("pads", pads, 4), ts_attr_int("group", group)};
    int in[3] = {x, w, b}, y;
    cr_assert(ts_graph_add_node(g, "Conv", name, in, b >= 0 ? 3 : 2, a, 3, 1, (const char *const[]){name}, &y, &e) >= 0,
              "%s", e.msg);
    return y;
}

static int add_weight(ts_graph *g, const char *name, int rank, const int64_t *d, uint64_t *rng)
{
    ts_error e = {0};
    ts_tensor *t = rand_tensor(rank, d, rng);
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    return v;
}

/* NasNet-A's two separable branches summed: Add(pw1(dw5(x1)), pw2(dw3(x2))),
 * depthwise 5x5 and 3x3 (group = channels), 1x1 pointwise with biases. */
static ts_graph *sepconv_sum(int k1, int k2)
{
    ts_error e = {0};
    uint64_t rng = 11;
    int64_t xd[4] = {1, 4, 7, 7}, d1[4] = {4, 1, k1, k1}, d2[4] = {4, 1, k2, k2}, pd[4] = {6, 4, 1, 1}, bd[1] = {6};
    ts_shape xs = ts_shape_make(4, xd);
    ts_graph *g = ts_graph_new("sepsum", 17);
    int x1 = ts_graph_add_input(g, "x1", TS_F32, &xs, &e), x2 = ts_graph_add_input(g, "x2", TS_F32, &xs, &e);
    int a = add_conv(g, "dw1", x1, add_weight(g, "k1", 4, d1, &rng), -1, k1 / 2, 4);
    int b = add_conv(g, "dw2", x2, add_weight(g, "k2", 4, d2, &rng), -1, k2 / 2, 4);
    a = add_conv(g, "pw1", a, add_weight(g, "w1", 4, pd, &rng), add_weight(g, "b1", 1, bd, &rng), 0, 1);
    b = add_conv(g, "pw2", b, add_weight(g, "w2", 4, pd, &rng), add_weight(g, "b2", 1, bd, &rng), 0, 1);
    int ia[2] = {a, b}, s;
    cr_assert(ts_graph_add_node(g, "Add", "add", ia, 2, NULL, 0, 1, (const char *const[]){"s"}, &s, &e) >= 0);
    ts_graph_add_output(g, s, &e);
    return g;
}

Test(match, sepconv_sum_merges_depthwise_convs)
{
    ts_error e = {0};
    ts_rule *rs = NULL;
    int n = 0;
    cr_assert_eq(ts_rules_parse_string(ts_core_rules, "core", &rs, &n, &e), TS_OK, "%s", e.msg);
    ts_graph *g = sepconv_sum(5, 3);
    collect c;
    cr_assert_eq(matches(g, core_rule(rs, n, "core-sepconv-sum"), &c), 1);
    ts_graph *h = NULL;
    cr_assert_eq(ts_rule_apply(g, core_rule(rs, n, "core-sepconv-sum"), &c.m[0], &h, &e), TS_OK, "%s", e.msg);
    cr_assert_not_null(h);
    cr_assert_eq(ts_graph_validate(h, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(count_op(h, "Conv"), 2, "one depthwise, one pointwise");
    cr_assert_eq(count_op(h, "Add"), 0, "the biases add into one constant");
    cr_assert_eq(count_op(h, "Pad"), 0, "the enlarged kernel is folded");
    for (int i = 0; i < h->nnodes; i++) {
        const ts_node *nd = &h->nodes[i];
        if (nd->dead || strcmp(nd->op->name, "Conv")) continue;
        const ts_shape *w = &h->values[nd->inputs[1]].shape;
        if (w->dims[2] == 5) cr_assert_eq(((const ts_conv_attrs *)nd->attrs)->group, 8, "depthwise over 8 channels");
    }
    assert_same(g, h);
    ts_graph_free(h);
    /* the other orientation cannot shrink a 5x5 kernel to 3x3: no rewrite */
    cr_assert_eq(matches(g, core_rule(rs, n, "core-sepconv-sum-up"), &c), 1);
    h = NULL;
    ts_status st = ts_rule_apply(g, core_rule(rs, n, "core-sepconv-sum-up"), &c.m[0], &h, &e);
    cr_assert(st != TS_OK || h == NULL, "a 5x5 kernel was enlarged to 3x3");
    ts_graph_free(h);
    ts_graph_free(g);
    /* the same kernel size: either orientation, nothing to enlarge */
    g = sepconv_sum(3, 3);
    cr_assert_eq(matches(g, core_rule(rs, n, "core-sepconv-sum-up"), &c), 1);
    h = NULL;
    cr_assert_eq(ts_rule_apply(g, core_rule(rs, n, "core-sepconv-sum-up"), &c.m[0], &h, &e), TS_OK, "%s", e.msg);
    cr_assert_not_null(h);
    assert_same(g, h);
    ts_graph_free(h);
    ts_graph_free(g);
    ts_rules_free(rs, n);
}

/* conv is group 1 only; gconv m matches a Conv with m output channels per
 * group, whatever the group count. */
Test(match, gconv_matches_by_channels_per_group)
{
    ts_error e = {0};
    static const char R[] = "; tsopt rules v1\n"
                            "(rule c (lhs (conv s1 same none ?x ?k)) (rhs (conv s1 same none ?x ?k)))\n"
                            "(rule g1 (lhs (gconv s1 same none m1 ?x ?k)) (rhs (gconv s1 same none m1 ?x ?k)))\n"
                            "(rule g2 (lhs (gconv s1 same none m2 ?x ?k)) (rhs (gconv s1 same none m2 ?x ?k)))\n";
    ts_rule *rs = NULL;
    int n = 0;
    cr_assert_eq(ts_rules_parse_string(R, "t", &rs, &n, &e), TS_OK, "%s", e.msg);
    uint64_t rng = 3;
    int64_t xd[4] = {1, 4, 6, 6}, dw[4] = {4, 1, 3, 3}, gw[4] = {4, 2, 3, 3};
    ts_shape xs = ts_shape_make(4, xd);
    ts_graph *g = ts_graph_new("groups", 17);
    int x = ts_graph_add_input(g, "x", TS_F32, &xs, &e);
    ts_graph_add_output(g, add_conv(g, "dw", x, add_weight(g, "kd", 4, dw, &rng), -1, 1, 4), &e);
    ts_graph_add_output(g, add_conv(g, "g2", x, add_weight(g, "kg", 4, gw, &rng), -1, 1, 2), &e);
    collect c;
    cr_assert_eq(matches(g, &rs[0], &c), 0, "conv matched a grouped Conv");
    cr_assert_eq(matches(g, &rs[1], &c), 1, "gconv m1: the depthwise Conv only");
    cr_assert_eq(matches(g, &rs[2], &c), 1, "gconv m2: the 2-group Conv (4 outputs, 2 per group)");
    ts_graph *h = NULL;
    cr_assert_eq(ts_rule_apply(g, &rs[2], &c.m[0], &h, &e), TS_OK, "%s", e.msg);
    cr_assert_not_null(h);
    assert_same(g, h);
    ts_graph_free(h);
    ts_graph_free(g);
    ts_rules_free(rs, n);
}

Test(apply, bias_is_not_moved_through_a_scalar_multiply)
{
    /* (x s) W + b = ((x W) + b) s is false: the matched matmul's bias may
     * follow it only where adding commutes with the operators around it.
     * The same rewrite without the bias is applied and keeps the value. */
    ts_error e = {0};
    uint64_t rng = 13;
    int64_t xd[2] = {2, 4}, wd[2] = {4, 3}, bd[1] = {3}, sd[1] = {1};
    ts_shape xs = ts_shape_make(2, xd);
    ts_graph *g = ts_graph_new("smulbias", 17);
    int x = ts_graph_add_input(g, "x", TS_F32, &xs, &e);
    ts_tensor *tw = rand_tensor(2, wd, &rng), *tb = rand_tensor(1, bd, &rng), *ts = rand_tensor(1, sd, &rng);
    int w = ts_graph_add_constant(g, "w", tw, &e), b = ts_graph_add_constant(g, "bias", tb, &e);
    int s = ts_graph_add_constant(g, "s", ts, &e), xs1, y, z;
    ts_tensor_unref(tw);
    ts_tensor_unref(tb);
    ts_tensor_unref(ts);
    int i0[2] = {x, s}, i1[2], i2[2];
    cr_assert(ts_graph_add_node(g, "Mul", "scale", i0, 2, NULL, 0, 1, NULL, &xs1, &e) >= 0);
    i1[0] = xs1, i1[1] = w;
    cr_assert(ts_graph_add_node(g, "MatMul", "mm", i1, 2, NULL, 0, 1, NULL, &y, &e) >= 0);
    i2[0] = y, i2[1] = b;
    cr_assert(ts_graph_add_node(g, "Add", "add", i2, 2, NULL, 0, 1, (const char *const[]){"z"}, &z, &e) >= 0);
    ts_graph_add_output(g, z, &e);
    ts_rule *r = parse1("; tsopt rules v1\n"
                        "(rule sm (lhs (matmul (smul ?x ?s) ?w)) (rhs (smul (matmul ?x ?w) ?s)))\n");
    collect c;
    cr_assert_eq(matches(g, r, &c), 2);
    for (int k = 0; k < 2; k++) {
        ts_graph *out = NULL;
        cr_assert_eq(ts_rule_apply(g, r, &c.m[k], &out, &e), TS_OK, "%s", e.msg);
        if (c.m[k].root[0] == z) {
            cr_assert_null(out, "the biased match was rewritten");
        } else {
            /* at the MatMul alone: y = (x s) W -> (x W) s, then + b */
            cr_assert_not_null(out);
            assert_same(g, out);
            ts_graph_free(out);
        }
    }
    ts_rules_free(r, 1);
    ts_graph_free(g);
}
