/* How idle OpenMP threads wait (src/measure/wait_policy.c): the decision is a
 * state machine tested on synthetic samples; the one test that uses real
 * threads checks what the sleeping mode is for (idle threads stop burning
 * CPU) with bounds that hold under any load.  This program runs without
 * OMP_WAIT_POLICY (tests/CMakeLists.txt), so libgomp spins by default. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <time.h>
#include "measure/wait_policy.h"
#include "util/clock.h"

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

Test(wait_policy, parses_schedstat_and_stat)
{
    uint64_t v = 7;
    cr_assert(ts_wait_parse_schedstat("123456789 4567 89\n", &v));
    cr_expect_eq(v, 4567u);
    cr_expect_not(ts_wait_parse_schedstat("123456789\n", &v));
    cr_expect_not(ts_wait_parse_schedstat(NULL, &v));
    /* user nice system idle iowait irq softirq steal guest guest_nice:
     * busy = 100+2+30 + 4+5+6 */
    cr_assert(ts_wait_parse_stat("cpu  100 2 30 900 50 4 5 6 0 0\ncpu0 50 1 15 450 25 2 2 3 0 0\n", &v));
    cr_expect_eq(v, 147u);
    cr_expect_not(ts_wait_parse_stat("cpu0 50 1 15 450 25 2 2 3 0 0\n", &v));
    cr_expect_not(ts_wait_parse_stat("cpu  100 2 30", &v));
    cr_expect_not(ts_wait_parse_stat("intr 5", &v));
    /* a process allowed on CPUs 1 and 3 of 4 counts their lines only */
    const char *st = "cpu  400 0 40 0 0 0 0 0 0 0\n"
                     "cpu0 100 0 10 900 0 0 0 0 0 0\ncpu1 50 1 5 900 7 2 3 4 0 0\n"
                     "cpu2 100 0 10 900 0 0 0 0 0 0\ncpu3 150 0 15 900 0 0 0 1 0 0\nintr 12345 6 7\n";
    const unsigned char allowed[4] = {0, 1, 0, 1};
    cr_assert(ts_wait_parse_stat_cpus(st, allowed, 4, &v));
    cr_expect_eq(v, (50u + 1 + 5 + 2 + 3 + 4) + (150u + 15 + 1));
    const unsigned char none[4] = {0, 0, 0, 0};
    cr_expect_not(ts_wait_parse_stat_cpus(st, none, 4, &v));
    cr_expect_not(ts_wait_parse_stat_cpus("cpu  1 2 3 4 5 6 7 8\n", allowed, 4, &v));
}

Test(wait_policy, spins_while_the_threads_get_their_cores)
{
    ts_wait_ctl c;
    ts_wait_ctl_init(&c, 0);
    cr_expect_eq(c.mode, TS_WAIT_SPIN);
    /* 100 runs of 1 ms on 2 threads, 0.5% of their time waiting */
    for (int i = 1; i <= 100; i++) cr_assert_eq(ts_wait_ctl_run(&c, i, 1.0, 0.01, 2, -1, 2), TS_WAIT_SPIN);
    cr_expect_eq(c.to_sleep, 0);
}

Test(wait_policy, sleeps_once_two_windows_in_a_row_show_waiting)
{
    ts_wait_ctl c;
    ts_wait_ctl_init(&c, 0);
    /* 9 ms of runs waiting 50% is not a window yet */
    for (int i = 1; i <= 9; i++) cr_assert_eq(ts_wait_ctl_run(&c, i, 1.0, 1.0, 2, -1, 2), TS_WAIT_SPIN);
    /* the first disturbed window may be a moment's noise ... */
    cr_expect_eq(ts_wait_ctl_run(&c, 10, 1.0, 1.0, 2, -1, 2), TS_WAIT_SPIN);
    cr_expect_eq(c.strikes, 1);
    /* ... the second in a row is not */
    cr_expect_eq(ts_wait_ctl_run(&c, 20, 10.0, 10.0, 2, -1, 2), TS_WAIT_SLEEP);
    cr_expect_eq(c.to_sleep, 1);
    cr_expect_eq(c.since_ms, 20);
    /* an undisturbed window between two disturbed ones starts the count again */
    ts_wait_ctl_init(&c, 0);
    cr_expect_eq(ts_wait_ctl_run(&c, 10, 10.0, 10.0, 2, -1, 2), TS_WAIT_SPIN);
    cr_expect_eq(ts_wait_ctl_run(&c, 20, 10.0, 0.1, 2, -1, 2), TS_WAIT_SPIN);
    cr_expect_eq(ts_wait_ctl_run(&c, 30, 10.0, 10.0, 2, -1, 2), TS_WAIT_SPIN);
    cr_expect_eq(ts_wait_ctl_run(&c, 40, 10.0, 10.0, 2, -1, 2), TS_WAIT_SLEEP);
    /* a long collapsed run is a whole window */
    ts_wait_ctl_init(&c, 0);
    cr_expect_eq(ts_wait_ctl_run(&c, 80, 77.0, 60.0, 2, -1, 2), TS_WAIT_SPIN);
    cr_expect_eq(ts_wait_ctl_run(&c, 160, 77.0, 60.0, 2, -1, 2), TS_WAIT_SLEEP);
    /* a single thread never waits for a teammate: no decision */
    ts_wait_ctl_init(&c, 0);
    for (int i = 1; i <= 4; i++) cr_expect_eq(ts_wait_ctl_run(&c, 80 * i, 77.0, 60.0, 1, -1, 2), TS_WAIT_SPIN);
    /* just under the limit (7% of 10 ms, summed over the threads) never
     * switches; just over does */
    ts_wait_ctl_init(&c, 0);
    for (int i = 1; i <= 4; i++) cr_expect_eq(ts_wait_ctl_run(&c, 10 * i, 10.0, 0.7, 2, -1, 2), TS_WAIT_SPIN);
    cr_expect_eq(ts_wait_ctl_run(&c, 50, 10.0, 0.9, 2, -1, 2), TS_WAIT_SPIN);
    cr_expect_eq(ts_wait_ctl_run(&c, 60, 10.0, 0.9, 2, -1, 2), TS_WAIT_SLEEP);
    /* 16 threads of which one waits half the time: the team stalls */
    ts_wait_ctl_init(&c, 0);
    cr_expect_eq(ts_wait_ctl_run(&c, 10, 10.0, 5.0, 16, -1, 2), TS_WAIT_SPIN);
    cr_expect_eq(ts_wait_ctl_run(&c, 20, 10.0, 5.0, 16, -1, 2), TS_WAIT_SLEEP);
}

Test(wait_policy, waiting_without_a_competitor_keeps_spinning)
{
    ts_wait_ctl c;
    ts_wait_ctl_init(&c, 0);
    /* a short task preempted a thread in every window (20% waited), but the
     * other processes used 0.1 core of 2: no competitor, spin on */
    for (int i = 1; i <= 50; i++)
        cr_assert_eq(ts_wait_ctl_run(&c, 10 * i, 10.0, 2.0, 2, 0.1, 2), TS_WAIT_SPIN, "window %d", i);
    cr_expect_eq(c.to_sleep, 0);
    cr_expect_eq(c.busy_windows, 50);
    cr_expect_eq(c.vetoed, 49); /* every window from the second strike on */
    /* a busy loop appears: run delay and the others' CPU (0.7 core) agree */
    cr_expect_eq(ts_wait_ctl_run(&c, 600, 10.0, 6.0, 2, 0.7, 2), TS_WAIT_SLEEP);
    cr_expect_eq(c.to_sleep, 1);
    /* not measurable yet (NAN: under 100 ms since spinning began): the
     * strikes stay and the switch comes with the first measurable stretch */
    ts_wait_ctl_init(&c, 0);
    cr_expect_eq(ts_wait_ctl_run(&c, 10, 10.0, 6.0, 2, NAN, 2), TS_WAIT_SPIN);
    cr_expect_eq(ts_wait_ctl_run(&c, 20, 10.0, 6.0, 2, NAN, 2), TS_WAIT_SPIN);
    cr_expect_eq(ts_wait_ctl_run(&c, 30, 10.0, 6.0, 2, NAN, 2), TS_WAIT_SPIN);
    cr_expect_eq(c.strikes, 3);
    cr_expect_eq(ts_wait_ctl_run(&c, 40, 10.0, 6.0, 2, 1.0, 2), TS_WAIT_SLEEP);
    /* 2 threads on 8 cores: others on 5.5 cores leave the team its cores */
    ts_wait_ctl_init(&c, 0);
    for (int i = 1; i <= 4; i++) cr_expect_eq(ts_wait_ctl_run(&c, 10 * i, 10.0, 6.0, 2, 5.5, 8), TS_WAIT_SPIN);
    cr_expect_eq(ts_wait_ctl_run(&c, 50, 10.0, 6.0, 2, 6.5, 8), TS_WAIT_SLEEP);
}

/* Two disturbed windows: the switch to sleeping at `t`. */
static void to_sleep(ts_wait_ctl *c, double t)
{
    ts_wait_ctl_run(c, t - 1, 20.0, 20.0, 2, -1, 2);
    ts_wait_ctl_run(c, t, 20.0, 20.0, 2, -1, 2);
}

Test(wait_policy, looks_at_the_machine_after_the_quiet_wait)
{
    ts_wait_ctl c;
    ts_wait_ctl_init(&c, 0);
    to_sleep(&c, 100);
    cr_assert_eq(c.mode, TS_WAIT_SLEEP);
    cr_expect_not(ts_wait_ctl_look_due(&c, 100 + TS_WAIT_QUIET_MS - 1));
    cr_expect(ts_wait_ctl_look_due(&c, 100 + TS_WAIT_QUIET_MS));
    /* a busy loop took one of 2 cores: keep sleeping, look again later */
    cr_expect_eq(ts_wait_ctl_look(&c, 400, 1.0, 2, 2), TS_WAIT_SLEEP);
    cr_expect_not(ts_wait_ctl_look_due(&c, 401));
    cr_expect(ts_wait_ctl_look_due(&c, 400 + TS_WAIT_QUIET_MS));
    /* unknown (no /proc): keep sleeping */
    cr_expect_eq(ts_wait_ctl_look(&c, 700, -1, 2, 2), TS_WAIT_SLEEP);
    /* the others left: spin again */
    cr_expect_eq(ts_wait_ctl_look(&c, 1000, 0.05, 2, 2), TS_WAIT_SPIN);
    cr_expect_eq(c.to_spin, 1);
    cr_expect_not(ts_wait_ctl_look_due(&c, 5000)); /* only a sleeping process looks */
}

Test(wait_policy, counts_only_the_cores_the_team_needs)
{
    ts_wait_ctl c;
    ts_wait_ctl_init(&c, 0);
    to_sleep(&c, 100);
    /* 2 threads on 8 cores: others using 5.5 cores leave ours free */
    cr_expect_eq(ts_wait_ctl_look(&c, 400, 5.5, 8, 2), TS_WAIT_SPIN);
    to_sleep(&c, 500);
    cr_expect_eq(ts_wait_ctl_look(&c, 800, 6.5, 8, 2), TS_WAIT_SLEEP);
}

Test(wait_policy, looks_less_often_while_spinning_keeps_failing)
{
    ts_wait_ctl c;
    ts_wait_ctl_init(&c, 0);
    double t = 100, wait = TS_WAIT_QUIET_MS;
    to_sleep(&c, t);
    for (int k = 0; k < 8; k++) {
        cr_assert_eq(c.quiet_ms, wait, "round %d: %g", k, c.quiet_ms);
        t += c.quiet_ms;
        cr_assert_eq(ts_wait_ctl_look(&c, t, 0.0, 2, 2), TS_WAIT_SPIN); /* looked quiet ... */
        t += 50;
        cr_assert_eq(ts_wait_ctl_run(&c, t, 20.0, 20.0, 2, -1, 2), TS_WAIT_SPIN); /* ... but was not */
        cr_assert_eq(ts_wait_ctl_run(&c, t + 1, 20.0, 20.0, 2, -1, 2), TS_WAIT_SLEEP);
        t += 1;
        wait = wait * 2 > TS_WAIT_QUIET_MAX_MS ? TS_WAIT_QUIET_MAX_MS : wait * 2;
    }
    cr_expect_eq(c.quiet_ms, TS_WAIT_QUIET_MAX_MS);
    /* spinning that holds resets the wait */
    t += c.quiet_ms;
    ts_wait_ctl_look(&c, t, 0.0, 2, 2);
    for (int i = 0; i < 300; i++) ts_wait_ctl_run(&c, t += 10, 10.0, 0.0, 2, -1, 2);
    cr_expect_eq(c.mode, TS_WAIT_SPIN);
    cr_expect_eq(c.quiet_ms, TS_WAIT_QUIET_MS);
}

/* CPU time the process burns over a 30 ms pause after a 2-thread region:
 * an idle spinning libgomp thread burns it, a sleeping one does not. */
static double idle_burn_ms(void)
{
    volatile int x = 0;
#pragma omp parallel num_threads(2)
    {
#pragma omp atomic
        x++;
    }
    double c0 = ts_clock_cpu_ms();
    nanosleep(&(struct timespec){0, 30000000}, NULL);
    return ts_clock_cpu_ms() - c0;
}

Test(wait_policy, the_sleeping_mode_stops_idle_threads_spinning)
{
    unsetenv("OMP_WAIT_POLICY");
    unsetenv("GOMP_SPINCOUNT");
    unsetenv("TSOPT_WAIT");
    cr_expect_str_eq(ts_wait_policy_name(), "adaptive");
    cr_expect_not(ts_wait_threads_sleep());
    /* libgomp's default spin (300000 iterations, milliseconds): seen unless
     * the machine is too loaded to give the idle thread a core */
    double spin = 0;
    for (int i = 0; i < 5 && spin < 1.0; i++) spin = idle_burn_ms();
    if (spin < 1.0) cr_skip_test("an idle spinning thread burnt only %.2f ms: cannot tell modes apart", spin);

    /* the helper's team starts on its own thread: give it up to 10 pauses */
    ts_wait_set_mode(TS_WAIT_SLEEP, 2);
    cr_expect(ts_wait_threads_sleep());
    double sleep = spin;
    for (int i = 0; i < 10 && sleep >= 0.5; i++) sleep = idle_burn_ms();
    cr_expect_lt(sleep, 0.5, "sleeping mode burnt %.2f ms in 30 ms (spinning: %.2f)", sleep, spin);

    ts_wait_set_mode(TS_WAIT_SPIN, 2);
    cr_expect_not(ts_wait_threads_sleep());
    /* up to 40 pauses (1.2 s): with another test running beside this one on
     * two cores, the idle thread went without a core through 10 of them
     * (0.04 ms burnt, CI of 12-07) */
    double again = 0;
    for (int i = 0; i < 40 && again <= 0.5; i++) again = idle_burn_ms();
    cr_expect_gt(again, 0.5, "spinning again burnt only %.2f ms (before: %.2f)", again, spin);
    ts_wait_stats st;
    ts_wait_get_stats(&st);
    cr_expect_eq(st.spin_runs + st.sleep_runs, 0); /* no plan ran */
}

Test(wait_policy, a_users_choice_is_left_alone)
{
    setenv("OMP_WAIT_POLICY", "passive", 1);
    cr_expect_str_eq(ts_wait_policy_name(), "passive");
    cr_expect(ts_wait_threads_sleep());
    ts_wait_set_mode(TS_WAIT_SPIN, 2);
    cr_expect(ts_wait_threads_sleep());
}

Test(wait_policy, tsopt_wait_forces_a_mode)
{
    unsetenv("OMP_WAIT_POLICY");
    unsetenv("GOMP_SPINCOUNT");
    setenv("TSOPT_WAIT", "spin", 1);
    cr_expect_str_eq(ts_wait_policy_name(), "spin");
    ts_wait_run r;
    ts_wait_run_begin(&r, 2);
    ts_wait_run_end(&r);
    cr_expect_not(ts_wait_threads_sleep());
    ts_wait_stats st;
    ts_wait_get_stats(&st);
    cr_expect_eq(st.spin_runs, 1);
    cr_expect_eq(st.to_sleep, 0);
}
