/* The window-geometry axioms (W1..W16 in axioms.c) at work: one generated
 * 2- or 3-operator rule of each kind the Table 2 axioms could not prove
 * (docs/taso.md, "Verifier") is proved, and near-miss wrong rules of the
 * same shapes (the stride not moved, averaging instead of selecting, max
 * instead of average, ...) are still rejected. */
#include <criterion/criterion.h>
#include <string.h>
#include "taso/verify.h"
#include "verify_check.h"

static const char RULES[] =
    "; tsopt rules v1\n"
    /* Iconv: a same conv cropped by a valid Iconv is the valid conv (W4) */
    "(rule crop (lhs (conv s1 valid none (conv s1 same none ?i1 ?k1) (Iconv k3)))\n"
    "           (rhs (conv s1 valid none ?i1 ?k1)))\n"
    /* relu commutes with the selection (W1) */
    "(rule crop-relu (lhs (conv s1 valid none (relu ?i1) (Iconv k3))) (rhs (conv s1 valid relu ?i1 (Iconv k3))))\n"
    /* subsampling a stride-1 conv (W2) */
    "(rule sub (lhs (conv s2 same none (conv s1 same none ?i1 ?q1) (Iconv k3))) (rhs (conv s2 same none ?i1 ?q1)))\n"
    /* the same for average pooling, through A24 */
    "(rule sub-avg (lhs (conv s2 same none (poolavg k3 s1 same ?i1) (Iconv k3))) (rhs (poolavg k3 s2 same ?i1)))\n"
    /* enlarge: A21 with its multi-pattern trigger, then W4 */
    "(rule crop-enl (lhs (conv s1 valid none ?i1 (enlarge ?q1 ?k1)))\n"
    "               (rhs (conv s1 valid none (conv s1 same none ?i1 ?q1) (Iconv k3))) (where (weight ?q1)))\n"
    /* crop after subsampling (W2 right to left, W7, W4) */
    "(rule crop-sub (lhs (conv s1 valid none (conv s2 same none ?i1 ?k1) (Iconv k3)))\n"
    "               (rhs (conv s2 valid none (conv s1 valid none ?i1 ?k1) (Iconv k3))))\n"
    /* the same for max pooling (W3, W7, W5) */
    "(rule crop-sub-max (lhs (conv s1 valid none (poolmax k3 s2 same ?i1) (Iconv k3)))\n"
    "                   (rhs (conv s2 valid none (poolmax k3 s1 valid ?i1) (Iconv k3))))\n"
    /* a crop commutes with a valid max pool (W8) */
    "(rule crop-max (lhs (conv s1 valid none (poolmax k3 s1 valid ?i1) (Iconv k3)))\n"
    "               (rhs (poolmax k3 s1 valid (conv s1 valid none ?i1 (Iconv k3)))))\n"
    /* conv and average pool across valid windows (W9, W10), with Cpool,
     * smul and a second conv */
    "(rule avg-v (lhs (conv s2 valid none (poolavg k3 s1 valid ?i1) ?q1))\n"
    "            (rhs (poolavg k3 s2 valid (conv s1 valid none ?i1 ?q1))))\n"
    "(rule avg-s (lhs (conv s1 valid none (poolavg k3 s1 same ?i1) ?k1))\n"
    "            (rhs (poolavg k3 s1 valid (conv s1 same none ?i1 ?k1))))\n"
    "(rule avg-cpool (lhs (conv s1 valid none (conv s1 same none ?i1 (Cpool k3)) ?k1))\n"
    "                (rhs (poolavg k3 s1 valid (conv s1 same none ?i1 ?k1))))\n"
    "(rule avg-2conv (lhs (conv s1 valid none (conv s1 valid none (poolavg k3 s1 same ?i1) ?k1) ?k2))\n"
    "                (rhs (poolavg k3 s1 valid (conv s1 valid none (conv s1 same none ?i1 ?k1) ?k2))))\n"
    "(rule avg-smul (lhs (conv s1 valid none (poolavg k3 s1 same ?i1) (smul ?k1 ?s1)))\n"
    "               (rhs (poolavg k3 s1 valid (conv s1 same none (smul ?i1 ?s1) ?k1))))\n"
    /* max pools: same/valid swap (W11), stride-2 windows (W12, W13) */
    "(rule max-swap (lhs (poolmax k3 s2 same (poolmax k3 s1 valid ?i1)))\n"
    "               (rhs (poolmax k3 s2 valid (poolmax k3 s1 same ?i1))))\n"
    "(rule max-s2 (lhs (poolmax k3 s1 same (poolmax k3 s2 same ?i1)))\n"
    "             (rhs (poolmax k3 s2 same (poolmax k3 s1 same (poolmax k3 s1 same ?i1)))))\n"
    "(rule max-s2v (lhs (poolmax k3 s1 valid (poolmax k3 s2 same ?i1)))\n"
    "              (rhs (poolmax k3 s2 valid (poolmax k3 s1 valid (poolmax k3 s1 same ?i1)))))\n"
    "(rule max-3 (lhs (poolmax k3 s2 same (poolmax k3 s1 same (poolmax k3 s1 valid ?i1))))\n"
    "            (rhs (poolmax k3 s2 valid (poolmax k3 s1 same (poolmax k3 s1 same ?i1)))))\n"
    /* 4-operator kinds: selection of a channel concat (W14), of an ewmul
     * (W16), Iconv idempotent (W15) */
    "(rule sub-concat (lhs (concat 1 (conv s2 same none ?i1 (Iconv k3)) (conv s2 same none ?i2 (Iconv k3))))\n"
    "                 (rhs (conv s2 same none (concat 1 ?i1 ?i2) (Iconv k3))))\n"
    "(rule crop-ewmul (lhs (conv s1 valid none (ewmul ?i1 (conv s1 same none ?i2 ?k1)) (Iconv k3)))\n"
    "                 (rhs (ewmul (conv s1 valid none ?i2 ?k1) (conv s1 valid none ?i1 (Iconv k3)))))\n"
    "(rule iconv-mask (lhs (concat 0 (Iconv k3) (ewmul ?k1 ?k2)))\n"
    "                 (rhs (ewmul (concat 0 (Iconv k3) ?k1) (concat 0 (Iconv k3) ?k2))))\n"
    /* planted wrong rules, each a near miss of one above: must be rejected */
    "(rule bad-crop-stride (lhs (conv s2 valid none (conv s1 valid none ?x (Iconv k3)) ?y))\n"
    "                      (rhs (conv s1 valid none (conv s2 valid none ?x ?y) (Iconv k3))))\n"
    "(rule bad-sub-twice (lhs (conv s2 same none (conv s2 same none ?x ?y) (Iconv k3)))\n"
    "                    (rhs (conv s2 same none ?x ?y)))\n"
    "(rule bad-crop-same (lhs (conv s1 valid none (conv s1 same none ?x ?y) (Iconv k3)))\n"
    "                    (rhs (conv s1 same none ?x ?y)))\n"
    "(rule bad-cpool-relu (lhs (conv s1 valid none (relu ?x) (Cpool k3))) (rhs (conv s1 valid relu ?x (Cpool k3))))\n"
    "(rule bad-max-conv (lhs (conv s1 valid none (poolmax k3 s1 valid ?x) ?y))\n"
    "                   (rhs (poolmax k3 s1 valid (conv s1 valid none ?x ?y))))\n"
    "(rule bad-avg-swap (lhs (poolavg k3 s1 same (poolavg k3 s1 valid ?x)))\n"
    "                   (rhs (poolavg k3 s1 valid (poolavg k3 s1 same ?x))))\n"
    "(rule bad-max-stride (lhs (poolmax k3 s2 same (poolmax k3 s1 valid ?x)))\n"
    "                     (rhs (poolmax k3 s1 valid (poolmax k3 s2 same ?x))))\n"
    "(rule bad-concat-order (lhs (concat 1 (conv s2 same none ?i2 (Iconv k3)) (conv s2 same none ?i1 (Iconv k3))))\n"
    "                       (rhs (conv s2 same none (concat 1 ?i1 ?i2) (Iconv k3))))\n"
    "(rule bad-cpool-ewmul (lhs (conv s1 valid none (ewmul ?x ?y) (Cpool k3)))\n"
    "                      (rhs (ewmul (conv s1 valid none ?x (Cpool k3)) (conv s1 valid none ?y (Cpool k3)))))\n"
    "(rule bad-cpool-mask (lhs (ewmul (Cpool k3) (Cpool k3))) (rhs (Cpool k3)))\n"
    "(rule bad-sub-valid (lhs (conv s1 valid none (conv s1 valid none ?x (Iconv k3)) (Iconv k3)))\n"
    "                    (rhs (conv s1 valid none ?x (Iconv k3))))\n";

Test(verify_window, proves_window_rules_rejects_near_misses)
{
    vt_proves_good_rejects_bad(RULES, 31, 5000);
}

Test(verify_window, table2_alone_does_not_prove_them)
{
    /* The rules above need the window axioms: leaving out W4 loses the
     * crop of a same conv (nothing else relates a valid conv to a same
     * one). */
    ts_prover *p = vt_prover();
    char why[128];
    int w4 = ts_axiom_find("W4");
    cr_assert_geq(w4, 0);
    cr_expect_eq(ts_prover_prove_text(p, "(conv s1 valid none (conv s1 same none ?x ?y) (Iconv k3))",
                                      "(conv s1 valid none ?x ?y)", -1, false, 5000, why, sizeof why),
                 TS_PROOF_PROVED, "%s", why);
    cr_expect_neq(ts_prover_prove_text(p, "(conv s1 valid none (conv s1 same none ?x ?y) (Iconv k3))",
                                       "(conv s1 valid none ?x ?y)", w4, false, 2000, why, sizeof why),
                  TS_PROOF_PROVED);
    ts_prover_free(p);
}
