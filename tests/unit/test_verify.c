/* TASO verifier: the axioms' concrete checks (one test per axiom), wrong
 * axioms caught by the concrete check, rules proved by Z3 and planted
 * wrong rules rejected. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>
#include "taso/verify.h"
#include "taso/z3_load.h"
#include "tsopt.h"
#include "verify_check.h"

/* ------------------------------------------------ axioms, concretely */

ParameterizedTestParameters(axiom, concrete_check)
{
    static int idx[128];
    int n = ts_axioms_count();
    for (int i = 0; i < n; i++) idx[i] = i;
    return cr_make_param_array(int, idx, (size_t)n);
}

ParameterizedTest(int *i, axiom, concrete_check)
{
    const ts_axiom *ax = ts_axiom_at(*i);
    ts_axiom_check_stats st;
    ts_error err = {0};
    ts_axiom_check_opts o = {.max_dim = 3, .trials = 2, .seed = 1};
    cr_assert_lt(ts_axioms_count(), 128);
    cr_assert_eq(ts_axiom_check(ax, &o, &st, &err), TS_OK, "%s: %s", ax->name, err.msg);
    cr_assert_gt(st.obligations, 0, "%s: nothing checked", ax->name);
    cr_assert_eq(st.failures, 0, "%s: %s", ax->name, st.first_failure);
}

Test(axiom, table_is_the_papers)
{
    /* 43 from Table 2, numbered A1..A43 in order, then ours */
    cr_assert_geq(ts_axioms_count(), 43);
    for (int i = 0; i < 43; i++) {
        char name[8];
        snprintf(name, sizeof name, "A%d", i + 1);
        cr_assert_str_eq(ts_axiom_at(i)->name, name);
    }
    cr_assert_eq(ts_axiom_find("A21"), 20);
    cr_assert_eq(ts_axiom_find("nope"), -1);
}

static void expect_wrong(const char *lhs, const char *rhs, const char *shapes)
{
    ts_axiom ax = {"wrong", lhs, rhs, shapes, "planted"};
    ts_axiom_check_stats st;
    ts_error err = {0};
    ts_axiom_check_opts o = {.max_dim = 3, .trials = 2, .seed = 7};
    cr_assert_eq(ts_axiom_check(&ax, &o, &st, &err), TS_OK, "%s", err.msg);
    cr_assert_gt(st.failures, 0, "%s = %s passed the concrete check", lhs, rhs);
    cr_assert(strstr(st.first_failure, "wrong: "), "%s", st.first_failure);
}

/* A bad shape specification is refused with a message naming it. */
Test(axiom, bad_kernel_binding_refused)
{
    ts_axiom ax = {"bad", "(matmul ?x Imatmul)", "?x", "x:m,m Imatmul:kernel", "planted"};
    ts_axiom_check_stats st;
    ts_error err = {0};
    ts_axiom_check_opts o = {.max_dim = 3, .trials = 1, .seed = 1};
    cr_assert_eq(ts_axiom_check(&ax, &o, &st, &err), TS_ERR_PARSE);
    cr_assert(strstr(err.msg, "'Imatmul:kernel': only Iconv and Cpool"), "%s", err.msg);
}

Test(axiom, wrong_axioms_fail_concretely)
{
    /* the paper's example: conv is not linear under relu */
    expect_wrong("(conv ?s ?p ?c (ewadd ?x ?y) ?z)", "(ewadd (conv ?s ?p ?c ?x ?z) (conv ?s ?p ?c ?y ?z))",
                 "x:n,c,h,wd y:n,c,h,wd z:o,c,kh,kw");
    /* enlarging a kernel changes a "valid" convolution */
    expect_wrong("(conv ?s valid ?c ?x ?y)", "(conv ?s valid ?c ?x (enlarge ?y ?r))",
                 "x:n,c,h,wd y:o,c,kh,kw r:1,1,rh,rw");
    /* transpose does not distribute over matmul in this order */
    expect_wrong("(transpose (matmul ?x ?y))", "(matmul (transpose ?x) (transpose ?y))", "x:m,m y:m,m");
    /* relu is not additive */
    expect_wrong("(relu (ewadd ?x ?y))", "(ewadd (relu ?x) (relu ?y))", "x:@ y:@");
    /* concatenation axes do not commute with transpose this way */
    expect_wrong("(concat 0 (transpose ?x) (transpose ?y))", "(transpose (concat 0 ?x ?y))", "x:m,m y:m,m");
    /* max pooling does not commute with smul (negative scalars) */
    expect_wrong("(smul (poolmax ?k ?s ?p ?x) ?w)", "(poolmax ?k ?s ?p (smul ?x ?w))", "x:n,c,h,wd w:");
}

/* One wrong twin per window axiom (W1..W13 in axioms.c): each differs from
 * the true axiom in one detail a careless statement could get wrong, and
 * the concrete check (wide images) must catch it.  The guarded ones
 * (guard=shape) must still fail on values where the shapes agree. */
Test(axiom, wrong_window_axioms_fail_concretely)
{
    const char *X = "x:n,c,h,wd Iconv:c,c,?k,?k wide=h,wd";
    /* W1: averaging (Cpool) does not commute with relu, selection does */
    expect_wrong("(conv ?s ?p none (relu ?x) (Cpool ?k))", "(conv ?s ?p relu ?x (Cpool ?k))",
                 "x:n,c,h,wd Cpool:c,c,?k,?k wide=h,wd");
    /* W2: subsampling a stride-2 conv subsamples twice */
    expect_wrong("(conv ?s same none (conv s2 ?p ?c ?x ?y) (Iconv ?k))", "(conv ?s ?p ?c ?x ?y)",
                 "x:1,c,h,wd y:o,c,kh,kw Iconv:o,o,?k,?k wide=h,wd");
    /* W3: the inner pool's padding is not the outer's */
    expect_wrong("(conv ?s same none (poolmax ?j s1 ?p ?x) (Iconv ?k))", "(poolmax ?j ?s same ?x)", X);
    /* W4: a crop with an averaging kernel is no crop (guarded like W4) */
    expect_wrong("(conv ?s valid none (conv s1 same ?c ?x ?y) (Cpool ?k))", "(conv ?s valid ?c ?x ?y)",
                 "x:1,c,h,wd y:o,c,kh,kw Cpool:o,o,?k,?k wide=h,wd guard=shape");
    /* W5: cropping a stride-2 pool crops the subsampled grid */
    expect_wrong("(conv s1 valid none (poolmax ?k s2 same ?x) (Iconv ?k))", "(poolmax ?k s2 valid ?x)", X);
    /* W6: the stride must move out of the crop */
    expect_wrong("(conv ?s valid ?c (conv s1 valid none ?x (Iconv ?k)) ?y)",
                 "(conv s1 valid none (conv ?s valid ?c ?x ?y) (Iconv ?k))",
                 "x:1,c,h,wd y:c,c,kh,kw Iconv:c,c,?k,?k wide=h,wd");
    /* W7: holds for stride 2 only (stride 1 crops once vs twice) */
    expect_wrong("(conv s1 valid none (conv ?s same none ?x (Iconv ?k)) (Iconv ?k))",
                 "(conv ?s valid none (conv s1 valid none ?x (Iconv ?k)) (Iconv ?k))", X);
    /* W8: a same inner pool reads the border differently */
    expect_wrong("(conv ?s valid none (poolmax ?j s1 same ?x) (Iconv ?k))",
                 "(poolmax ?j ?s same (conv s1 valid none ?x (Iconv ?k)))", X);
    /* W9: max pooling is not linear, so it does not commute with conv */
    expect_wrong("(conv ?s valid none (poolmax ?k s1 valid ?x) ?y)", "(poolmax ?k ?s valid (conv s1 valid none ?x ?y))",
                 "x:1,c,h,wd y:o,c,kh,kw wide=h,wd");
    /* W10: the same with same padding, guarded */
    expect_wrong("(conv ?s valid none (poolmax ?k s1 same ?x) ?y)", "(poolmax ?k ?s valid (conv s1 same none ?x ?y))",
                 "x:1,c,h,wd y:o,c,kh,kw wide=h,wd guard=shape");
    /* W11: average pools count the padding, so they do not swap */
    expect_wrong("(poolavg ?k ?s same (poolavg ?j s1 valid ?x))", "(poolavg ?j ?s valid (poolavg ?k s1 same ?x))",
                 "x:n,c,h,wd wide=h,wd");
    /* W12: a 1x1 stride-2 pool leaves gaps a later window does not cover */
    expect_wrong("(poolmax ?k s1 same (poolmax ?j s2 same ?x))",
                 "(poolmax ?j s2 same (poolmax ?k s1 same (poolmax ?k s1 same ?x)))", "x:n,c,h,wd wide=h,wd");
    /* W14: the halves must stay in order */
    expect_wrong("(concat 1 (conv ?s ?p ?c ?y (Iconv ?k)) (conv ?s ?p ?c ?x (Iconv ?k)))",
                 "(conv ?s ?p ?c (concat 1 ?x ?y) (Iconv ?k))", "x:n,c,h,wd y:n,d,h,wd Iconv:kernel wide=h,wd");
    /* W15: Cpool's entries 1/k^2 are not idempotent */
    expect_wrong("(ewmul (Cpool ?k) (Cpool ?k))", "(Cpool ?k)", "Cpool:c,c,?k,?k");
    /* W16: averaging does not distribute over ewmul */
    expect_wrong("(conv ?s ?p none (ewmul ?x ?y) (Cpool ?k))",
                 "(ewmul (conv ?s ?p none ?x (Cpool ?k)) (conv ?s ?p none ?y (Cpool ?k)))",
                 "x:n,c,h,wd y:n,c,h,wd Cpool:c,c,?k,?k wide=h,wd");
    /* W13: only for 3x3 windows */
    expect_wrong("(poolmax ?k s1 valid (poolmax k3 s2 same ?x))",
                 "(poolmax k3 s2 valid (poolmax ?k s1 same (poolmax ?k s1 valid ?x)))", "x:n,c,h,wd wide=h,wd");
}

/* Near misses of W17/W18 (a valid conv by an enlarged kernel crops a same
 * average pool) and of C1 (concat associativity): each differs from the
 * true axiom in one detail and fails on values. */
Test(axiom, wrong_enlarge_and_concat_axioms_fail_concretely)
{
    const char *E = "x:1,c,h,wd y:c,c,kh,kw z:c,c,zh,zw r:1,1,rh,rh wide=h,wd guard=shape";
    /* max pooling is not linear: the crop does not pass the convs */
    expect_wrong("(conv ?s valid ?c (conv s1 valid none (poolmax ?k s1 same ?x) ?y) (enlarge ?z ?r))",
                 "(conv ?s valid ?c (poolmax ?k s1 valid (conv s1 same none ?x ?y)) ?z)", E);
    /* the stride must stay on the outer conv, not move into the pool */
    expect_wrong("(conv ?s valid ?c (conv s1 valid none (poolavg ?k s1 same ?x) ?y) (enlarge ?z ?r))",
                 "(conv s1 valid ?c (poolavg ?k ?s valid (conv s1 same none ?x ?y)) ?z)", E);
    /* the crop in the wrong place: pooling the valid conv pads its output,
     * not x (a wrong crop *size* changes the shape: the guard skips it,
     * and where the sizes still fit, e.g. enlarging on both sides, W10
     * makes it true) */
    expect_wrong("(conv ?s valid ?c (conv s1 valid none (poolavg ?k s1 same ?x) ?y) ?z)",
                 "(conv ?s valid ?c (poolavg ?k s1 same (conv s1 valid none ?x ?y)) ?z)", E);
    /* W18: relu does not pass the average */
    expect_wrong("(conv ?s valid ?c (relu (conv s1 valid none (poolavg ?k s1 same ?x) ?y)) (enlarge ?z ?r))",
                 "(conv ?s valid ?c (poolavg ?k s1 valid (relu (conv s1 same none ?x ?y))) ?z)", E);
    /* C1: the operands must keep their order */
    expect_wrong("(concat ?a (concat ?a ?x ?y) ?z)", "(concat ?a ?y (concat ?a ?x ?z))", "x:@a y:@a z:@A");
    expect_wrong("(concat ?a (concat ?a ?x ?y) ?z)", "(concat ?a ?x (concat ?a ?z ?y))", "x:@ y:@a z:@A");
}

/* A28/A29 are the split theory's, C1 the split-free theory's, the rest
 * both (ts_axiom_theories). */
Test(axiom, theories)
{
    const int both = TS_THEORY_SPLIT | TS_THEORY_SPLIT_FREE;
    int n_split = 0, n_free = 0;
    for (int i = 0; i < ts_axioms_count(); i++) {
        unsigned t = ts_axiom_theories(i);
        const ts_axiom *ax = ts_axiom_at(i);
        bool split = strstr(ax->lhs, "split") || strstr(ax->rhs, "split");
        cr_expect(t != 0 && (t & ~(unsigned)both) == 0, "%s", ax->name);
        if (split) cr_expect_eq(t, TS_THEORY_SPLIT, "%s mentions split", ax->name);
        n_split += t == TS_THEORY_SPLIT;
        n_free += t == TS_THEORY_SPLIT_FREE;
    }
    cr_expect_eq(ts_axiom_theories(ts_axiom_find("A28")), TS_THEORY_SPLIT);
    cr_expect_eq(ts_axiom_theories(ts_axiom_find("A29")), TS_THEORY_SPLIT);
    cr_expect_eq(ts_axiom_theories(ts_axiom_find("C1")), TS_THEORY_SPLIT_FREE);
    cr_expect_eq(ts_axiom_theories(ts_axiom_find("A30")), both);
    cr_expect_eq(ts_axiom_theories(ts_axiom_find("W17")), both);
    cr_expect_eq(n_split, 2);
    cr_expect_eq(n_free, 1);
}

Test(axiom, shape_guard_skips_only_mismatched_shapes)
{
    /* W4 without its guard fails on shapes (a 1x1 conv cropped by a 3x3
     * Iconv is smaller than the valid 1x1 conv); with it, no failure, and
     * the mismatched points are counted as skipped. */
    const ts_axiom *w4 = ts_axiom_at(ts_axiom_find("W4"));
    cr_assert(w4);
    ts_axiom unguarded = *w4;
    unguarded.shapes = "x:1,c,h,wd y:o,c,kh,kw Iconv:o,o,?k,?k wide=h,wd";
    ts_axiom_check_opts o = {.max_dim = 3, .trials = 1, .seed = 5};
    ts_axiom_check_stats st;
    ts_error err = {0};
    cr_assert_eq(ts_axiom_check(&unguarded, &o, &st, &err), TS_OK, "%s", err.msg);
    cr_assert_gt(st.failures, 0);
    cr_assert(strstr(st.first_failure, "shapes differ"), "%s", st.first_failure);
    cr_assert_eq(ts_axiom_check(w4, &o, &st, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(st.failures, 0, "%s", st.first_failure);
    cr_assert_gt(st.shape_guarded, 0);
    cr_assert_gt(st.obligations, 0);
}

Test(axiom, enlarge_needs_symmetric_same)
{
    /* With TensorFlow's SAME (pad split smaller half first), stride 2 and an
     * even input size, enlarging the kernel moves the window: A21 is false
     * there, which is why tsopt reads "same" as symmetric (k-1)/2 pads. */
    const ts_axiom *ax = ts_axiom_at(ts_axiom_find("A21"));
    ts_axiom_check_opts o = {.max_dim = 4, .trials = 1, .seed = 3, .tf_same = true};
    ts_axiom_check_stats st;
    ts_error err = {0};
    cr_assert_eq(ts_axiom_check(ax, &o, &st, &err), TS_OK, "%s", err.msg);
    cr_assert_gt(st.failures, 0);
    cr_assert(strstr(st.first_failure, "s=2"), "%s", st.first_failure);
}

/* --------------------------------------------------------- Z3 proofs */

static const char RULES[] =
    "; tsopt rules v1\n"
    "(rule comm (lhs (ewadd ?x ?y)) (rhs (ewadd ?y ?x)))\n"
    "(rule two-out\n"
    "  (lhs (conv s1 same none ?x ?w1) (conv s1 same none ?x ?w2))\n"
    "  (rhs (split0 1 (conv s1 same none ?x (concat 0 ?w1 ?w2)))\n"
    "       (split1 1 (conv s1 same none ?x (concat 0 ?w1 ?w2)))))\n"
    "(rule tr (lhs (transpose (matmul (transpose ?x) ?y))) (rhs (matmul (transpose ?y) ?x)))\n"
    "(rule enl (lhs (ewadd (conv s1 same relu ?x ?w1) (conv s1 same none ?x ?w2)))\n"
    "          (rhs (ewadd (relu (conv s1 same none ?x (enlarge ?w1 ?w2))) (conv s1 same none ?x ?w2))))\n"
    "(rule pool (lhs (ewadd (poolavg k3 s1 same ?x) (poolavg k3 s1 same ?y)))\n"
    "           (rhs (conv s1 same none (ewadd ?x ?y) (Cpool k3))))\n"
    "(rule ident (lhs (matmul Imatmul (matmul ?x Imatmul))) (rhs ?x))\n"
    /* planted wrong rules: each must be rejected */
    "(rule bad-relu (lhs (relu (ewadd ?x ?y))) (rhs (ewadd (relu ?x) (relu ?y))))\n"
    "(rule bad-order (lhs (matmul ?x (matmul ?y ?z))) (rhs (matmul (matmul ?y ?x) ?z)))\n"
    "(rule bad-act (lhs (conv s1 same relu (ewadd ?x ?y) ?w))\n"
    "              (rhs (ewadd (conv s1 same relu ?x ?w) (conv s1 same relu ?y ?w))))\n"
    "(rule bad-axis (lhs (split0 0 (concat 1 ?x ?y))) (rhs ?x))\n"
    "(rule bad-stride (lhs (conv s1 same none ?x ?w)) (rhs (conv s2 same none ?x ?w)))\n"
    "(rule bad-two-out\n"
    "  (lhs (conv s1 same none ?x ?w1) (conv s1 same none ?x ?w2))\n"
    "  (rhs (split1 1 (conv s1 same none ?x (concat 0 ?w1 ?w2)))\n"
    "       (split0 1 (conv s1 same none ?x (concat 0 ?w1 ?w2)))))\n";

Test(verify, proves_good_rejects_planted_wrong)
{
    vt_proves_good_rejects_bad(RULES, 12, 3000);
}

Test(verify, axioms_prove_themselves_and_lemmas_follow)
{
    ts_prover *p = vt_prover();
    char why[128];
    /* every axiom follows from the set that contains it */
    for (int i = 0; i < ts_axioms_count(); i++) {
        const ts_axiom *ax = ts_axiom_at(i);
        cr_expect_eq(ts_prover_prove_text(p, ax->lhs, ax->rhs, -1, false, 5000, why, sizeof why), TS_PROOF_PROVED,
                     "%s: %s", ax->name, why);
    }
    /* TASO's third lemma needs no axiom of its own (A24 + A38) */
    cr_expect_eq(ts_prover_prove_text(p, "(concat 0 (poolavg ?k ?s ?p ?x) (poolavg ?k ?s ?p ?y))",
                                      "(poolavg ?k ?s ?p (concat 0 ?x ?y))", -1, false, 5000, why, sizeof why),
                 TS_PROOF_PROVED, "%s", why);
    /* without A22, conv-relu is unrelated to relu(conv) */
    cr_expect_neq(ts_prover_prove_text(p, "(conv s1 same relu ?x ?y)", "(relu (conv s1 same none ?x ?y))",
                                       ts_axiom_find("A22"), false, 2000, why, sizeof why),
                  TS_PROOF_PROVED);
    ts_prover_free(p);
}

Test(verify, parse_errors_are_one_line)
{
    ts_aterm *t = NULL;
    ts_error err = {0};
    cr_assert_neq(ts_aterm_parse("(conv ?s bogus none ?x ?y)", &t, &err), TS_OK);
    cr_assert(strstr(err.msg, "bogus"), "%s", err.msg);
    cr_assert_null(strchr(err.msg, '\n'));
    cr_assert_neq(ts_aterm_parse("(frobnicate ?x)", &t, &err), TS_OK);
    cr_assert_neq(ts_aterm_parse("(relu ?x ?y)", &t, &err), TS_OK);
    cr_assert_eq(ts_aterm_parse("(conv s2 same relu ?x (Iconv k3))", &t, &err), TS_OK, "%s", err.msg);
    cr_assert_str_eq(t->t[1]->p[0]->name, "k3x3");
    ts_aterm_free(t);
}

/* ------------------------------------------------ libz3 on demand */

/* libz3 is opened by the first prover (taso/z3_load.h), not at start: a
 * process that builds and runs a plan never maps it (~1 MiB resident at
 * ViT float16's peak when it was linked), and the prover still proves. */
Test(z3_load, mapped_by_the_first_prover_only)
{
    ts_error err = {0};
    ts_graph *g = ts_graph_new("relu", 17);
    ts_shape s = {.rank = 1, .dims = {8}};
    int x = ts_graph_add_input(g, "x", TS_F32, &s, &err), y;
    cr_assert_geq(x, 0, "%s", err.msg);
    cr_assert_geq(ts_graph_add_node(g, "Relu", NULL, &x, 1, NULL, 0, 1, NULL, &y, &err), 0, "%s", err.msg);
    cr_assert_eq(ts_graph_add_output(g, y, &err), TS_OK);
    ts_plan *p = NULL;
    ts_plan_opts o = {.threads = 1};
    cr_assert_eq(ts_plan_build(g, &o, &p, &err), TS_OK, "%s", err.msg);
    ts_tensor *in = ts_tensor_new(TS_F32, &s, &err), *out = ts_tensor_new(TS_F32, &s, &err);
    for (int i = 0; i < 8; i++) ts_tensor_set_f64(in, i, i - 4);
    cr_assert_eq(ts_plan_run(p, &in, &out, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(ts_tensor_get_f64(out, 0), 0.0);
    cr_assert_eq(ts_tensor_get_f64(out, 7), 3.0);
    cr_assert(!xz3_mapped(), "a plan was built and run: libz3 is mapped");
    ts_prover *pr = ts_prover_new(&err);
    cr_assert_not_null(pr, "%s", err.msg);
    cr_assert(xz3_mapped(), "a prover was made: libz3 is not mapped");
    char why[256];
    cr_assert_eq(ts_prover_prove_text(pr, "(relu (transpose ?x))", "(transpose (relu ?x))", -1, false, 2000, why, sizeof why),
                 TS_PROOF_PROVED, "%s", why);
    ts_prover_free(pr);
    ts_plan_free(p);
    ts_tensor_unref(in);
    ts_tensor_unref(out);
    ts_graph_free(g);
}

/* A libz3 that cannot be opened (TSOPT_Z3_LIB, z3_load.c): making a
 * prover fails with one error naming Z3 and the library, nothing else
 * breaks.  Criterion runs each test in its own process, so this one's
 * first prover is the one that loads. */
Test(z3_load, missing_library_is_one_clear_error)
{
    setenv("TSOPT_Z3_LIB", "/nonexistent/libz3-missing.so", 1);
    ts_error err = {0};
    ts_prover *pr = ts_prover_new(&err);
    cr_assert_null(pr);
    cr_assert_eq(err.code, TS_ERR_UNSUPPORTED, "%d", err.code);
    cr_assert(strstr(err.msg, "Z3 (the rule verifier's prover) cannot be loaded") != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, "libz3-missing.so") != NULL, "%s", err.msg);
    cr_assert(!xz3_mapped(), "libz3 mapped although it could not be opened");
}
