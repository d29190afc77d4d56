/* Shared by the verifier tests: a prover, and a rule file whose rules named
 * "bad-..." are planted wrong ones; every other rule must be proved, no
 * planted one. */
#ifndef TS_TESTS_VERIFY_CHECK_H
#define TS_TESTS_VERIFY_CHECK_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "taso/verify.h"

/* A prover with the full axiom set; the test stops if Z3 cannot start. */
static inline ts_prover *vt_prover(void)
{
    ts_error err = {0};
    ts_prover *p = ts_prover_new(&err);
    cr_assert(p, "%s", err.msg);
    return p;
}

static inline void vt_proves_good_rejects_bad(const char *text, int nrules, int timeout_ms)
{
    ts_rule *rules = NULL;
    int n = 0;
    ts_error err = {0};
    cr_assert_eq(ts_rules_parse_string(text, "test", &rules, &n, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(n, nrules);
    ts_rule_result *res = calloc((size_t)n, sizeof *res);
    cr_assert_not_null(res);
    ts_verify_opts o = {.timeout_ms = timeout_ms, .threads = 2};
    cr_assert_eq(ts_verify_rules(rules, n, &o, res, &err), TS_OK, "%s", err.msg);
    for (int i = 0; i < n; i++) {
        /* a planted wrong rule must be refuted, not merely unproved: a
         * timeout would pass a test that could then never fail */
        if (!strncmp(rules[i].name, "bad-", 4))
            cr_expect_eq(res[i].proof, TS_PROOF_FAILED, "planted wrong rule %s: %s (want failed)", rules[i].name,
                         res[i].proof == TS_PROOF_PROVED ? "proved" : "timed out");
        else
            cr_expect_eq(res[i].proof, TS_PROOF_PROVED, "%s not proved: %s", rules[i].name, res[i].why);
    }
    free(res);
    ts_rules_free(rules, n);
}

#endif
