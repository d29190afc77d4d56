/* Grouped convolution (gconv) in the verifier: the G axioms' wrong twins
 * fail the concrete check, the core gconv rules are proved, and planted
 * wrong grouped rules are refuted (not timed out). */
#include <criterion/criterion.h>
#include <string.h>
#include "taso/verify.h"
#include "verify_check.h"

static void expect_wrong(const char *lhs, const char *rhs, const char *shapes)
{
    ts_axiom ax = {"wrong", lhs, rhs, shapes, "planted"};
    ts_axiom_check_stats st;
    ts_error err = {0};
    ts_axiom_check_opts o = {.max_dim = 3, .trials = 2, .seed = 7};
    cr_assert_eq(ts_axiom_check(&ax, &o, &st, &err), TS_OK, "%s", err.msg);
    cr_assert_gt(st.failures, 0, "%s = %s passed the concrete check", lhs, rhs);
}

/* The check must exercise groups of several channels: each near miss is
 * true for one group (where it is A39, A40 or a relabelling). */
Test(axiom, wrong_gconv_axioms_fail_concretely)
{
    const char *G8 = "x:1,c,h,h y:o,d,k,k z:1,e,h,h w:q,d,k,k wide=c,e,o,q";
    /* (A39's twin, one input with the kernels concatenated, is never
     * defined on the right with channels per group as the parameter: the
     * right reads twice the channels.  The prover test refutes it.) */
    /* A40 is false for groups */
    expect_wrong("(gconv ?s ?p none ?m (concat 1 ?x ?z) (concat 1 ?y ?w))",
                 "(ewadd (gconv ?s ?p none ?m ?x ?y) (gconv ?s ?p none ?m ?z ?w))",
                 "x:1,c,h,h z:1,e,h,h y:o,d,k,k w:o,f,k,k wide=c,e,o");
    /* G8 with the kernels in the other order */
    expect_wrong("(concat 1 (gconv ?s ?p ?c ?m ?x ?y) (gconv ?s ?p ?c ?m ?z ?w))",
                 "(gconv ?s ?p ?c ?m (concat 1 ?x ?z) (concat 0 ?w ?y))", G8);
    /* G8 with the inputs in the other order */
    expect_wrong("(concat 1 (gconv ?s ?p ?c ?m ?x ?y) (gconv ?s ?p ?c ?m ?z ?w))",
                 "(gconv ?s ?p ?c ?m (concat 1 ?z ?x) (concat 0 ?y ?w))", G8);
    /* gconv is not linear under relu */
    expect_wrong("(gconv ?s ?p ?c ?m ?x (ewadd ?y ?z))",
                 "(ewadd (gconv ?s ?p ?c ?m ?x ?y) (gconv ?s ?p ?c ?m ?x ?z))",
                 "x:1,c,h,h y:o,d,k,k z:o,d,k,k wide=c,o");
}

/* The check must see groups of several channels: A40's twin is A40 (true)
 * where the gconv has one group and false elsewhere, so both kinds of
 * points must occur.  Guards the "wide" channels of the G axioms. */
Test(axiom, gconv_check_sees_groups)
{
    ts_axiom ax = {"wrong", "(gconv s1 same none ?m (concat 1 ?x ?z) (concat 1 ?y ?w))",
                   "(ewadd (gconv s1 same none ?m ?x ?y) (gconv s1 same none ?m ?z ?w))",
                   "x:1,c,2,2 z:1,e,2,2 y:o,d,1,1 w:o,f,1,1 wide=c,e,o", "planted"};
    ts_axiom_check_stats st;
    ts_error err = {0};
    ts_axiom_check_opts o = {.max_dim = 2, .trials = 1, .seed = 3};
    cr_assert_eq(ts_axiom_check(&ax, &o, &st, &err), TS_OK, "%s", err.msg);
    cr_assert_gt(st.failures, 0, "no point with several groups");
    cr_assert_lt(st.failures, st.obligations, "no point with one group");
}

static const char RULES[] =
    "; tsopt rules v1\n"
    /* G8 at depthwise, with relu, and at 2 channels per group */
    "(rule g-concat (lhs (concat 1 (gconv s1 same relu m1 ?x1 ?k1) (gconv s1 same relu m1 ?x2 ?k2)))\n"
    "  (rhs (gconv s1 same relu m1 (concat 1 ?x1 ?x2) (concat 0 ?k1 ?k2))))\n"
    "(rule g-concat-m2 (lhs (concat 1 (gconv s2 valid none m2 ?x1 ?k1) (gconv s2 valid none m2 ?x2 ?k2)))\n"
    "  (rhs (gconv s2 valid none m2 (concat 1 ?x1 ?x2) (concat 0 ?k1 ?k2))))\n"
    /* the same input twice: G8 with x1 = x2 */
    "(rule g-one-input (lhs (concat 1 (gconv s1 same none m1 ?x ?k1) (gconv s1 same none m1 ?x ?k2)))\n"
    "  (rhs (gconv s1 same none m1 (concat 1 ?x ?x) (concat 0 ?k1 ?k2))))\n"
    /* bilinearity and relu */
    "(rule g-linear (lhs (ewadd (gconv s1 same none m1 ?x ?k1) (gconv s1 same none m1 ?x ?k2)))\n"
    "  (rhs (gconv s1 same none m1 ?x (ewadd ?k1 ?k2))))\n"
    "(rule g-relu (lhs (relu (gconv s2 same none m4 ?x ?k))) (rhs (gconv s2 same relu m4 ?x ?k)))\n"
    /* planted wrong: A39 for groups */
    "(rule bad-g-a39 (lhs (concat 1 (gconv s1 same none m1 ?x ?k1) (gconv s1 same none m1 ?x ?k2)))\n"
    "  (rhs (gconv s1 same none m1 ?x (concat 0 ?k1 ?k2))))\n"
    /* planted wrong: a grouped conv is not a group-1 conv */
    "(rule bad-g-is-conv (lhs (gconv s1 same none m1 ?x ?k)) (rhs (conv s1 same none ?x ?k)))\n"
    /* planted wrong: the kernels swapped */
    "(rule bad-g-swap (lhs (concat 1 (gconv s1 same none m1 ?x1 ?k1) (gconv s1 same none m1 ?x2 ?k2)))\n"
    "  (rhs (gconv s1 same none m1 (concat 1 ?x1 ?x2) (concat 0 ?k2 ?k1))))\n"
    /* planted wrong: other channels per group on the two sides */
    "(rule bad-g-mult (lhs (concat 1 (gconv s1 same none m1 ?x1 ?k1) (gconv s1 same none m1 ?x2 ?k2)))\n"
    "  (rhs (gconv s1 same none m2 (concat 1 ?x1 ?x2) (concat 0 ?k1 ?k2))))\n"
    /* planted wrong: the separable sum with the pointwise kernels swapped */
    "(rule bad-sepconv (lhs (ewadd (conv s1 same none (gconv s1 same none m1 ?x1 ?k1) ?w1)\n"
    "                               (conv s1 same none (gconv s1 same none m1 ?x2 ?k2) ?w2)))\n"
    "  (rhs (conv s1 same none (gconv s1 same none m1 (concat 1 ?x1 ?x2) (concat 0 ?k1 ?k2)) (concat 1 ?w2 ?w1))))\n";

Test(verify, gconv_rules_proved_planted_wrong_refuted)
{
    vt_proves_good_rejects_bad(RULES, 10, 10000);
}

/* The shipped gconv rules of rules/core.rules are proved (all of the file:
 * tests/cli/shipped_rules.sh checks it too, with the binary). */
Test(verify, core_gconv_rules_proved)
{
    ts_rule *rules = NULL;
    int n = 0, ng = 0;
    ts_error err = {0};
    cr_assert_eq(ts_rules_parse_string(ts_core_rules, "core", &rules, &n, &err), TS_OK, "%s", err.msg);
    ts_prover *p = vt_prover();
    for (int i = 0; i < n; i++) {
        if (!strstr(rules[i].name, "gconv") && !strstr(rules[i].name, "sepconv")) continue;
        char why[256];
        cr_expect_eq(ts_prover_prove_rule(p, &rules[i], 10000, false, why, sizeof why), TS_PROOF_PROVED, "%s: %s",
                     rules[i].name, why);
        ng++;
    }
    cr_assert_geq(ng, 6);
    ts_prover_free(p);
    ts_rules_free(rules, n);
}
