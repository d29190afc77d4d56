/* The e-graph (src/egraph/): hashcons, union + rebuild (congruence),
 * saturation (exact counts for (a+b)+c under commutativity and
 * associativity, limits, constraints, multi-output rules, ill-shaped
 * right-hand sides), graphs in (atoms recognised by the matcher, unsupported
 * nodes named), and both extractions: SIMPLEST smallest, COMPLEX larger
 * with intermediate tensors exposed, acyclic, one pair per seed, and both
 * computing what the original computes (reference interpreter, random
 * inputs, rtol 1e-3 / atol 1e-4). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include "egraph/egraph.h"
#include "ir/ir.h"
#include "ops/attrs.h"

static const ts_shape S23 = {.rank = 2, .dims = {2, 3}};

static ts_rule *parse(const char *text, int *n, bool reverses)
{
    ts_rule *r = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_rules_parse_string(text, "test", &r, n, &e), TS_OK, "%s", e.msg);
    int added = 0;
    if (reverses) cr_assert_eq(ts_rules_add_reverses(&r, n, &added, &e), TS_OK, "%s", e.msg);
    return r;
}

static ts_eclass_id leaf(ts_egraph *eg, const char *name, const ts_shape *s)
{
    ts_error e = {0};
    ts_eclass_id c = ts_egraph_add_leaf(eg, name, s, TS_F32, false, &e);
    cr_assert_geq(c, 0, "%s", e.msg);
    return c;
}

static ts_eclass_id add2(ts_egraph *eg, ts_rop op, ts_eclass_id a, ts_eclass_id b)
{
    ts_error e = {0};
    ts_eclass_id args[2] = {a, b};
    ts_eclass_id c = ts_egraph_add(eg, op, NULL, ts_rop_table[op].nargs, args, &e);
    cr_assert_geq(c, 0, "%s", e.msg);
    return c;
}

Test(egraph, hashcons_dedups)
{
    ts_egraph *eg = ts_egraph_new();
    ts_eclass_id x = leaf(eg, "x", &S23), y = leaf(eg, "y", &S23);
    cr_assert_eq(leaf(eg, "x", &S23), x);
    ts_eclass_id s1 = add2(eg, TS_ROP_EWADD, x, y), s2 = add2(eg, TS_ROP_EWADD, x, y);
    cr_assert_eq(s1, s2);
    cr_assert_neq(add2(eg, TS_ROP_EWADD, y, x), s1); /* no rule says so yet */
    cr_assert_eq(ts_egraph_nodes(eg), 4);
    cr_assert_eq(ts_egraph_classes(eg), 4);
    /* the analysis: the atoms' own shape rules */
    ts_eclass_id t = ts_egraph_add(eg, TS_ROP_TRANSPOSE, NULL, 1, &x, NULL);
    cr_assert_geq(t, 0);
    cr_assert_eq(ts_egraph_shape(eg, t)->dims[0], 3);
    cr_assert_eq(ts_egraph_shape(eg, t)->dims[1], 2);
    ts_error e = {0};
    ts_eclass_id bad[2] = {x, t};
    cr_assert_eq(ts_egraph_add(eg, TS_ROP_EWADD, NULL, 2, bad, &e), -1);
    cr_assert(strstr(e.msg, "ewadd does not fit"), "%s", e.msg);
    ts_rparams p1 = {.axis = 1};
    ts_eclass_id cat = ts_egraph_add(eg, TS_ROP_CONCAT, &p1, 2, (ts_eclass_id[]){x, y}, &e);
    cr_assert_eq(ts_egraph_shape(eg, cat)->dims[1], 6);
    ts_eclass_id half = ts_egraph_add(eg, TS_ROP_SPLIT1, &p1, 1, &cat, &e);
    cr_assert_geq(half, 0, "%s", e.msg);
    cr_assert(ts_shape_eq(ts_egraph_shape(eg, half), &S23));
    /* bad input: one line naming what */
    ts_eclass_id none = 999;
    cr_assert_eq(ts_egraph_add(eg, TS_ROP_RELU, NULL, 1, &none, &e), -1);
    cr_assert(strstr(e.msg, "relu argument 0 is no e-class"), "%s", e.msg);
    const ts_shape s32 = {.rank = 2, .dims = {3, 2}};
    cr_assert_eq(ts_egraph_add_leaf(eg, "x", &s32, TS_F32, false, &e), -1);
    cr_assert(strstr(e.msg, "'x' added twice"), "%s", e.msg);
    cr_assert_eq(ts_egraph_add(eg, TS_ROP_SPLIT0, &p1, 1, &x, &e), -1); /* no concat to cut at */
    cr_assert(strstr(e.msg, "no concat along axis 1"), "%s", e.msg);
    ts_egraph_free(eg);
}

Test(egraph, union_rebuild_restores_congruence)
{
    ts_egraph *eg = ts_egraph_new();
    ts_eclass_id a = leaf(eg, "a", &S23), b = leaf(eg, "b", &S23);
    ts_eclass_id fa = ts_egraph_add(eg, TS_ROP_RELU, NULL, 1, &a, NULL);
    ts_eclass_id fb = ts_egraph_add(eg, TS_ROP_RELU, NULL, 1, &b, NULL);
    ts_eclass_id gfa = ts_egraph_add(eg, TS_ROP_RELU, NULL, 1, &fa, NULL);
    ts_eclass_id gfb = ts_egraph_add(eg, TS_ROP_RELU, NULL, 1, &fb, NULL);
    cr_assert_eq(ts_egraph_classes(eg), 6);
    cr_assert(ts_egraph_union(eg, a, b));
    cr_assert_not(ts_egraph_union(eg, b, a));
    cr_assert_neq(ts_egraph_find(eg, fa), ts_egraph_find(eg, fb)); /* not before rebuild */
    ts_egraph_rebuild(eg);
    cr_assert_eq(ts_egraph_find(eg, fa), ts_egraph_find(eg, fb));
    cr_assert_eq(ts_egraph_find(eg, gfa), ts_egraph_find(eg, gfb)); /* upward, to the fixpoint */
    cr_assert_eq(ts_egraph_classes(eg), 3);
    cr_assert_eq(ts_egraph_nodes(eg), 4); /* a, b, relu(ab), relu(relu(ab)) */
    /* an unsound union (shapes differ) is refused */
    ts_eclass_id t = ts_egraph_add(eg, TS_ROP_TRANSPOSE, NULL, 1, &a, NULL);
    cr_assert_not(ts_egraph_union(eg, a, t));
    ts_egraph_free(eg);
}

static const char ACRULES[] = "; tsopt rules v1\n"
                              "(rule comm (lhs (ewadd ?x ?y)) (rhs (ewadd ?y ?x)))\n"
                              "(rule assoc (lhs (ewadd (ewadd ?x ?y) ?z)) (rhs (ewadd ?x (ewadd ?y ?z))))\n";

static ts_egraph *abc(ts_eclass_id *root)
{
    ts_egraph *eg = ts_egraph_new();
    ts_eclass_id a = leaf(eg, "a", &S23), b = leaf(eg, "b", &S23), c = leaf(eg, "c", &S23);
    *root = add2(eg, TS_ROP_EWADD, add2(eg, TS_ROP_EWADD, a, b), c);
    return eg;
}

Test(egraph, saturation_reaches_every_ac_form)
{
    int n = 0;
    ts_rule *rules = parse(ACRULES, &n, true);
    cr_assert_eq(n, 4); /* comm~rev and assoc~rev added */
    ts_eclass_id root;
    ts_egraph *eg = abc(&root);
    ts_saturate_stats st;
    ts_error e = {0};
    cr_assert_eq(ts_egraph_saturate(eg, rules, n, NULL, &st, &e), TS_OK, "%s", e.msg);
    cr_assert_str_eq(st.stop, "saturated");
    /* classes: a, b, c, the three pair sums, the total; e-nodes: 3 leaves,
     * 2 orders per pair, and (pair + rest) in 2 orders for 3 pairs */
    cr_assert_eq(ts_egraph_classes(eg), 7);
    cr_assert_eq(ts_egraph_nodes(eg), 15);
    cr_assert_eq(st.classes, 7);
    cr_assert_eq(st.nodes, 15);
    cr_assert_gt(st.applied, 0);
    /* saturated: once more changes nothing */
    cr_assert_eq(ts_egraph_saturate(eg, rules, n, NULL, &st, &e), TS_OK);
    cr_assert_str_eq(st.stop, "saturated");
    cr_assert_eq(st.iters, 1);
    cr_assert_eq(st.applied, 0);
    ts_egraph_free(eg);
    ts_rules_free(rules, n);
}

Test(egraph, limits_stop_with_their_reason)
{
    int n = 0;
    ts_rule *rules = parse(ACRULES, &n, true);
    ts_saturate_stats st;
    ts_eclass_id root;
    ts_egraph *eg = abc(&root);
    ts_saturate_limits it = {.max_iters = 1};
    cr_assert_eq(ts_egraph_saturate(eg, rules, n, &it, &st, NULL), TS_OK);
    cr_assert_str_eq(st.stop, "iteration limit");
    cr_assert_eq(st.iters, 1);
    cr_assert_lt(st.nodes, 15);
    ts_egraph_free(eg);
    eg = abc(&root);
    ts_saturate_limits nodes = {.max_nodes = 6};
    cr_assert_eq(ts_egraph_saturate(eg, rules, n, &nodes, &st, NULL), TS_OK);
    cr_assert_str_eq(st.stop, "node limit");
    cr_assert_gt(st.nodes, 6);
    cr_assert_lt(st.nodes, 15);
    ts_egraph_free(eg);
    eg = abc(&root);
    ts_saturate_limits tm = {.time_s = 1e-9};
    cr_assert_eq(ts_egraph_saturate(eg, rules, n, &tm, &st, NULL), TS_OK);
    cr_assert_str_eq(st.stop, "time limit");
    cr_assert_eq(st.nodes, 5);
    ts_egraph_free(eg);
    ts_rules_free(rules, n);
}

Test(egraph, constraints_and_shapes_are_honoured)
{
    int n = 0;
    ts_rule *rules = parse("; tsopt rules v1\n"
                           "(rule w (lhs (ewadd ?x ?w)) (rhs (ewadd ?w ?x)) (where (weight ?w)))\n"
                           "(rule t (lhs (ewadd ?x ?y)) (rhs (transpose (ewadd (transpose ?x) (transpose ?y)))))\n",
                           &n, false);
    ts_egraph *eg = ts_egraph_new();
    ts_error e = {0};
    const ts_shape s4 = {.rank = 4, .dims = {1, 2, 3, 3}};
    ts_eclass_id x = leaf(eg, "x", &s4), y = leaf(eg, "y", &s4);
    ts_eclass_id w = ts_egraph_add_leaf(eg, "w", &s4, TS_F32, true, &e);
    add2(eg, TS_ROP_EWADD, x, y);
    ts_saturate_stats st;
    /* rule w: ?w must be a weight; rule t: transpose is 2-D only */
    cr_assert_eq(ts_egraph_saturate(eg, rules, n, NULL, &st, &e), TS_OK);
    cr_assert_str_eq(st.stop, "saturated");
    cr_assert_eq(st.applied, 0);
    cr_assert_eq(ts_egraph_nodes(eg), 4);
    ts_eclass_id xw = add2(eg, TS_ROP_EWADD, x, w);
    cr_assert_eq(ts_egraph_saturate(eg, rules, n, NULL, &st, &e), TS_OK);
    cr_assert_eq(st.applied, 1);
    cr_assert_eq(ts_egraph_nodes(eg), 6); /* w + x joined x + w */
    cr_assert_eq(ts_egraph_find(eg, xw), ts_egraph_find(eg, add2(eg, TS_ROP_EWADD, w, x)));
    ts_egraph_free(eg);
    ts_rules_free(rules, n);
}

Test(egraph, multi_output_rule_binds_consistently)
{
    int n = 0;
    ts_rule *rules = parse("; tsopt rules v1\n"
                           "(rule merge (lhs (matmul ?x ?w1) (matmul ?x ?w2))\n"
                           "  (rhs (split0 1 (matmul ?x (concat 1 ?w1 ?w2)))\n"
                           "       (split1 1 (matmul ?x (concat 1 ?w1 ?w2)))))\n",
                           &n, false);
    ts_egraph *eg = ts_egraph_new();
    const ts_shape sx = {.rank = 2, .dims = {4, 6}}, sw1 = {.rank = 2, .dims = {6, 5}},
                   sw2 = {.rank = 2, .dims = {6, 3}};
    ts_eclass_id x = leaf(eg, "x", &sx), z = leaf(eg, "z", &sx), w1 = leaf(eg, "w1", &sw1),
                 w2 = leaf(eg, "w2", &sw2);
    ts_eclass_id m1 = add2(eg, TS_ROP_MATMUL, x, w1), m2 = add2(eg, TS_ROP_MATMUL, x, w2);
    add2(eg, TS_ROP_MATMUL, z, w1); /* another input: pairs with neither */
    ts_saturate_limits lim = {.max_iters = 1};
    ts_saturate_stats st;
    ts_error e = {0};
    cr_assert_eq(ts_egraph_saturate(eg, rules, n, &lim, &st, &e), TS_OK, "%s", e.msg);
    /* (m1,m2), (m2,m1), (m1,m1), (m2,m2) share ?x = x, and (z w1, z w1)
     * shares ?x = z: never x with z; each merged matmul is new */
    cr_assert_eq(st.applied, 5);
    ts_rparams p1 = {.axis = 1};
    ts_eclass_id cat = ts_egraph_add(eg, TS_ROP_CONCAT, &p1, 2, (ts_eclass_id[]){w1, w2}, &e);
    ts_eclass_id mm = add2(eg, TS_ROP_MATMUL, x, cat);
    ts_eclass_id s0 = ts_egraph_add_split(eg, TS_ROP_SPLIT0, 1, 5, mm, &e);
    ts_eclass_id s1 = ts_egraph_add_split(eg, TS_ROP_SPLIT1, 1, 5, mm, &e);
    cr_assert_eq(ts_egraph_find(eg, s0), ts_egraph_find(eg, m1));
    cr_assert_eq(ts_egraph_find(eg, s1), ts_egraph_find(eg, m2));
    ts_egraph_free(eg);
    ts_rules_free(rules, n);
}

/* ---- graphs in and out */

static ts_tensor *rnd(const ts_shape *s, uint64_t *rng)
{
    ts_tensor *t = ts_tensor_new(TS_F32, s, NULL);
    ts_tensor_fill_random(t, rng, -1, 1);
    return t;
}

static int node(ts_graph *g, const char *op, int a, int b, const ts_attr *at, int na)
{
    ts_error e = {0};
    int ins[2] = {a, b}, out = -1;
    cr_assert_geq(ts_graph_add_node(g, op, NULL, ins, b >= 0 ? 2 : 1, at, na, 1, NULL, &out, &e), 0, "%s", e.msg);
    return out;
}

static void run(const ts_graph *g, ts_tensor **in, ts_tensor **out)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, in, out, &e), TS_OK, "%s", e.msg);
}

/* Same outputs on random inputs (rtol 1e-3, atol 1e-4), same names. */
static void assert_same(const ts_graph *a, const ts_graph *b)
{
    uint64_t rng = 11;
    ts_tensor *in[8], *oa[8], *ob[8];
    cr_assert_eq(a->ninputs, b->ninputs);
    cr_assert_geq(b->noutputs, a->noutputs);
    for (int i = 0; i < a->ninputs; i++) {
        cr_assert_str_eq(a->values[a->inputs[i]].name, b->values[b->inputs[i]].name);
        in[i] = rnd(&a->values[a->inputs[i]].shape, &rng);
    }
    run(a, in, oa);
    run(b, in, ob);
    for (int i = 0; i < a->noutputs; i++) {
        cr_assert_str_eq(a->values[a->outputs[i]].name, b->values[b->outputs[i]].name);
        cr_assert_eq(ts_tensor_numel(oa[i]), ts_tensor_numel(ob[i]));
        for (int64_t k = 0; k < ts_tensor_numel(oa[i]); k++) {
            double x = ts_tensor_get_f64(ob[i], k), y = ts_tensor_get_f64(oa[i], k);
            cr_assert_leq(fabs(x - y), 1e-4 + 1e-3 * fabs(y), "output %d[%lld]: %g vs %g", i, (long long)k, x, y);
        }
    }
    for (int i = 0; i < a->noutputs; i++) ts_tensor_unref(oa[i]);
    for (int i = 0; i < b->noutputs; i++) ts_tensor_unref(ob[i]);
    for (int i = 0; i < a->ninputs; i++) ts_tensor_unref(in[i]);
}

static int live_nodes(const ts_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !g->nodes[i].dead;
    return n;
}

typedef struct pair {
    ts_graph *simple, *complex;
    ts_saturate_stats st;
} pair;

/* Saturates g with POLYJUICE's rules (and their reverses), extracts both. */
static pair polyjuice(const ts_graph *g, const ts_saturate_limits *lim, uint64_t seed)
{
    int n = 0;
    ts_rule *rules = parse(ts_polyjuice_rules, &n, true);
    ts_egraph *eg = NULL;
    ts_eclass_id *roots = NULL;
    int nroots = 0;
    ts_error e = {0};
    pair p = {0};
    cr_assert_eq(ts_egraph_from_graph(g, &eg, &roots, &nroots, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(nroots, g->noutputs);
    cr_assert_eq(ts_egraph_saturate(eg, rules, n, lim, &p.st, &e), TS_OK, "%s", e.msg);
    p.simple = ts_egraph_extract(eg, g, roots, nroots, TS_EXTRACT_SIMPLEST, seed, &e);
    cr_assert_not_null(p.simple, "%s", e.msg);
    p.complex = ts_egraph_extract(eg, g, roots, nroots, TS_EXTRACT_COMPLEX, seed, &e);
    cr_assert_not_null(p.complex, "%s", e.msg);
    /* acyclic and well-formed: validate orders the nodes and re-infers */
    cr_assert_eq(ts_graph_validate(p.simple, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_validate(p.complex, &e), TS_OK, "%s", e.msg);
    free(roots);
    ts_egraph_free(eg);
    ts_rules_free(rules, n);
    return p;
}

Test(egraph, distributed_product_extracts_factored_and_larger)
{
    /* x*y + x*z: SIMPLEST is x*(y+z), two nodes */
    ts_graph *g = ts_graph_new("dist", 17);
    ts_error e = {0};
    const ts_shape s = {.rank = 2, .dims = {3, 4}};
    int x = ts_graph_add_input(g, "x", TS_F32, &s, &e), y = ts_graph_add_input(g, "y", TS_F32, &s, &e),
        z = ts_graph_add_input(g, "z", TS_F32, &s, &e);
    int out = node(g, "Add", node(g, "Mul", x, y, NULL, 0), node(g, "Mul", x, z, NULL, 0), NULL, 0);
    cr_assert_eq(ts_graph_add_output(g, out, &e), TS_OK);
    ts_saturate_limits lim = {.max_nodes = 3000, .max_iters = 4};
    for (uint64_t seed = 1; seed <= 3; seed++) {
        pair p = polyjuice(g, &lim, seed);
        /* a seed gives one pair */
        pair q = polyjuice(g, &lim, seed);
        cr_assert_eq(ts_graph_hash(p.complex), ts_graph_hash(q.complex));
        cr_assert_eq(ts_graph_hash(p.simple), ts_graph_hash(q.simple));
        cr_assert_eq(q.st.nodes, p.st.nodes);
        ts_graph_free(q.simple);
        ts_graph_free(q.complex);
        cr_assert_eq(live_nodes(p.simple), 2, "seed %llu: simplest has %d nodes", (unsigned long long)seed,
                     live_nodes(p.simple));
        cr_assert_gt(live_nodes(p.complex), live_nodes(g), "seed %llu: complex has %d nodes",
                     (unsigned long long)seed, live_nodes(p.complex));
        /* intermediate tensors exposed after the roots */
        cr_assert_eq(p.simple->noutputs, 1);
        cr_assert_geq(p.complex->noutputs, 2);
        cr_assert_leq(p.complex->noutputs, 3);
        assert_same(g, p.simple);
        assert_same(g, p.complex);
        ts_graph_free(p.simple);
        ts_graph_free(p.complex);
    }
    ts_graph_free(g);
}

Test(egraph, model_graph_round_trips_through_atoms)
{
    /* two outputs; matmuls sharing an input, a transpose, relu, a split of
     * a concat, and a conv + average pool branch */
    ts_graph *g = ts_graph_new("model", 11); /* Split's sizes as an attribute */
    ts_error e = {0};
    uint64_t rng = 3;
    const ts_shape sx = {.rank = 2, .dims = {4, 6}}, sw = {.rank = 2, .dims = {6, 4}},
                   si = {.rank = 4, .dims = {1, 3, 6, 6}}, sk = {.rank = 4, .dims = {3, 3, 3, 3}};
    int x = ts_graph_add_input(g, "x", TS_F32, &sx, &e), img = ts_graph_add_input(g, "img", TS_F32, &si, &e);
    ts_tensor *t1 = rnd(&sw, &rng), *t2 = rnd(&sw, &rng), *tk = rnd(&sk, &rng);
    int w1 = ts_graph_add_constant(g, "w1", t1, &e), w2 = ts_graph_add_constant(g, "w2", t2, &e),
        k = ts_graph_add_constant(g, "k", tk, &e);
    ts_tensor_unref(t1), ts_tensor_unref(t2), ts_tensor_unref(tk);
    int64_t perm[2] = {1, 0};
    ts_attr tp = ts_attr_ints("perm", perm, 2);
    int m1 = node(g, "MatMul", x, w1, NULL, 0), m2 = node(g, "MatMul", x, w2, NULL, 0);
    int r = node(g, "Relu", node(g, "Transpose", m2, -1, &tp, 1), -1, NULL, 0);
    ts_attr ax0 = ts_attr_int("axis", 0);
    int cat = node(g, "Concat", m1, node(g, "Transpose", r, -1, &tp, 1), &ax0, 1);
    int outs[2];
    int64_t sizes[2] = {4, 4};
    ts_attr sp[2] = {ts_attr_int("axis", 0), ts_attr_ints("split", sizes, 2)};
    cr_assert_geq(ts_graph_add_node(g, "Split", NULL, &cat, 1, sp, 2, 2, NULL, outs, &e), 0, "%s", e.msg);
    int o1 = node(g, "Add", outs[0], outs[1], NULL, 0);
    int64_t strides[2] = {1, 1}, pads[4] = {1, 1, 1, 1}, ks[2] = {3, 3};
    ts_attr ca[2] = {ts_attr_ints("strides", strides, 2), ts_attr_ints("pads", pads, 4)};
    int cv = node(g, "Conv", img, k, ca, 2);
    ts_attr pa[4] = {ts_attr_ints("kernel_shape", ks, 2), ts_attr_ints("strides", strides, 2),
                     ts_attr_ints("pads", pads, 4), ts_attr_int("count_include_pad", 1)};
    int o2 = node(g, "AveragePool", node(g, "Relu", cv, -1, NULL, 0), -1, pa, 4);
    cr_assert_eq(ts_graph_add_output(g, o1, &e), TS_OK);
    cr_assert_eq(ts_graph_add_output(g, o2, &e), TS_OK);
    ts_saturate_limits lim = {.max_nodes = 4000, .max_iters = 3};
    pair p = polyjuice(g, &lim, 5);
    cr_assert_lt(live_nodes(p.simple), live_nodes(g)); /* relu(T(T x)), split of a concat fold away */
    cr_assert_gt(live_nodes(p.complex), live_nodes(g));
    assert_same(g, p.simple);
    assert_same(g, p.complex);
    /* the weights keep their names and values */
    int wv = ts_graph_find_value(p.complex, "w1");
    if (wv >= 0) cr_assert_eq(p.complex->values[wv].constant, g->values[w1].constant);
    ts_graph_free(p.simple);
    ts_graph_free(p.complex);
    ts_graph_free(g);
}

Test(egraph, outputs_that_are_inputs_or_equal_keep_their_names)
{
    /* outputs: the input itself, T(T(x)) (equal to x), relu(x), and a weight */
    ts_graph *g = ts_graph_new("outs", 17);
    ts_error e = {0};
    uint64_t rng = 9;
    int x = ts_graph_add_input(g, "x", TS_F32, &S23, &e);
    ts_tensor *tw = rnd(&S23, &rng);
    int w = ts_graph_add_constant(g, "w", tw, &e);
    ts_tensor_unref(tw);
    int64_t perm[2] = {1, 0};
    ts_attr tp = ts_attr_ints("perm", perm, 2);
    int tt = node(g, "Transpose", node(g, "Transpose", x, -1, &tp, 1), -1, &tp, 1);
    int r = node(g, "Relu", node(g, "Add", x, w, NULL, 0), -1, NULL, 0);
    int outs[4] = {x, tt, r, w};
    for (int i = 0; i < 4; i++) cr_assert_eq(ts_graph_add_output(g, outs[i], &e), TS_OK);
    ts_saturate_limits lim = {.max_nodes = 2000, .max_iters = 3};
    for (uint64_t seed = 1; seed <= 4; seed++) {
        pair p = polyjuice(g, &lim, seed);
        cr_assert_eq(p.simple->noutputs, 4);
        cr_assert_eq(live_nodes(p.simple), 3); /* a copy of x for tt, Add, Relu */
        for (int i = 0; i < 4; i++) {
            cr_assert_str_eq(p.simple->values[p.simple->outputs[i]].name, g->values[outs[i]].name);
            cr_assert_str_eq(p.complex->values[p.complex->outputs[i]].name, g->values[outs[i]].name);
        }
        cr_assert_str_eq(p.complex->values[p.complex->inputs[0]].name, "x");
        assert_same(g, p.simple);
        assert_same(g, p.complex);
        ts_graph_free(p.simple);
        ts_graph_free(p.complex);
    }
    ts_graph_free(g);
}

Test(egraph, unsupported_nodes_are_named)
{
    ts_graph *g = ts_graph_new("unsup", 17);
    ts_error e = {0};
    int x = ts_graph_add_input(g, "x", TS_F32, &S23, &e);
    int out = -1;
    cr_assert_geq(ts_graph_add_node(g, "Sigmoid", "the_sigmoid", &x, 1, NULL, 0, 1, NULL, &out, &e), 0);
    cr_assert_eq(ts_graph_add_output(g, out, &e), TS_OK);
    ts_egraph *eg = NULL;
    ts_eclass_id *roots = NULL;
    int nroots = 0;
    cr_assert_eq(ts_egraph_from_graph(g, &eg, &roots, &nroots, &e), TS_ERR_UNSUPPORTED);
    cr_assert(strstr(e.msg, "the_sigmoid"), "%s", e.msg);
    cr_assert_null(eg);
    ts_graph_free(g);
    /* a MatMul with its bias Add: no atom carries the bias */
    g = ts_graph_new("bias", 17);
    uint64_t rng = 1;
    const ts_shape sw = {.rank = 2, .dims = {3, 4}}, sb = {.rank = 1, .dims = {4}};
    x = ts_graph_add_input(g, "x", TS_F32, &S23, &e);
    ts_tensor *tw = rnd(&sw, &rng), *tb = rnd(&sb, &rng);
    int w = ts_graph_add_constant(g, "w", tw, &e), b = ts_graph_add_constant(g, "b", tb, &e);
    ts_tensor_unref(tw), ts_tensor_unref(tb);
    int mm = node(g, "MatMul", x, w, NULL, 0);
    cr_assert_geq(ts_graph_add_node(g, "Add", "the_bias", (int[]){mm, b}, 2, NULL, 0, 1, NULL, &out, &e), 0);
    cr_assert_eq(ts_graph_add_output(g, out, &e), TS_OK);
    cr_assert_eq(ts_egraph_from_graph(g, &eg, &roots, &nroots, &e), TS_ERR_UNSUPPORTED);
    cr_assert(strstr(e.msg, "the_bias") && strstr(e.msg, "bias"), "%s", e.msg);
    ts_graph_free(g);
}
