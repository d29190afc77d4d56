/* The tsopt binary's OpenMP wait policy (src/util/wait_policy.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "util/wait_policy.h"

Test(wait_policy, counts_other_runnable_tasks)
{
    cr_expect_eq(ts_wait_others_runnable("0.52 0.58 0.59 1/250 4242\n"), 0);
    cr_expect_eq(ts_wait_others_runnable("3.10 2.00 1.50 4/312 99"), 3);
    cr_expect_eq(ts_wait_others_runnable("0.00 0.00 0.00 17/17 1"), 16);
}

Test(wait_policy, rejects_text_that_is_not_loadavg)
{
    cr_expect_eq(ts_wait_others_runnable(NULL), -1);
    cr_expect_eq(ts_wait_others_runnable(""), -1);
    cr_expect_eq(ts_wait_others_runnable("0.5 0.5 0.5"), -1);
    cr_expect_eq(ts_wait_others_runnable("0.5 0.5 0.5 x/250 1"), -1);
    cr_expect_eq(ts_wait_others_runnable("0.5 0.5 0.5 0/250 1"), -1);   /* the reader itself runs */
    cr_expect_eq(ts_wait_others_runnable("0.5 0.5 0.5 300/250 1"), -1); /* more running than exist */
}

Test(wait_policy, leaves_a_users_choice_alone)
{
    unsetenv("GOMP_SPINCOUNT");
    setenv("OMP_WAIT_POLICY", "active", 1);
    cr_expect_not(ts_wait_policy_choose());
    cr_expect_str_eq(getenv("OMP_WAIT_POLICY"), "active");
    cr_expect_null(getenv("GOMP_SPINCOUNT"));
    unsetenv("OMP_WAIT_POLICY");
    setenv("GOMP_SPINCOUNT", "5", 1);
    cr_expect_not(ts_wait_policy_choose());
    cr_expect_str_eq(getenv("GOMP_SPINCOUNT"), "5");
    cr_expect_null(getenv("OMP_WAIT_POLICY"));
}

Test(wait_policy, sets_exactly_one_policy)
{
    unsetenv("GOMP_SPINCOUNT");
    unsetenv("OMP_WAIT_POLICY");
    cr_assert(ts_wait_policy_choose());
    const char *spin = getenv("GOMP_SPINCOUNT"), *passive = getenv("OMP_WAIT_POLICY");
    cr_expect((spin != NULL) != (passive != NULL));
    if (spin) cr_expect_str_eq(spin, TS_WAIT_SPINCOUNT);
    if (passive) cr_expect_str_eq(passive, "passive");
}
