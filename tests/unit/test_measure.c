/* The keep decision under load (src/opt/measure.c, src/measure/rounds.c): the judgment over
 * recorded rounds is tested on synthetic samples, so nothing here depends
 * on how fast or how busy the machine is; the one test that times real
 * plans checks only facts that hold under any load. */
#include <math.h>
#include <string.h>
#include "exec_check.h"
#include "opt/measure.h"

/* 2 threads on 2 cores: both busy in an undisturbed round (share 1). */
static const ts_measure_machine M2 = {.threads = 2, .cores = 2};

/* An undisturbed half-round of 100 ms wall. */
static ts_measure_sample quiet(int graph, double min_ms, double med_ms)
{
    return (ts_measure_sample){.graph = graph, .min_ms = min_ms, .med_ms = med_ms, .wall_ms = 100, .cpu_ms = 199,
                               .wait_ms = 0.4, .steal_ms = 0, .others = 0};
}

/* Rounds of (original, result) halves in ABBA order from k. */
static void rounds(ts_measure_sample *s, int k, int n, double min0, double med0, double min1, double med1)
{
    for (int i = k; i < k + n; i++) {
        /* a little jitter so that medians are not all the same value */
        double j = 0.01 * (i % 3);
        int first = i % 2;
        s[2 * i] = first ? quiet(1, min1 + j, med1 + j) : quiet(0, min0 + j, med0 + j);
        s[2 * i + 1] = first ? quiet(0, min0 + j, med0 + j) : quiet(1, min1 + j, med1 + j);
    }
}

static const ts_measure_opts OPTS = {.min_rounds = 4, .max_rounds = 8, .min_gain = 3};

Test(measure, clean_rounds_with_a_real_gain_say_faster)
{
    ts_measure_sample s[12];
    ts_measure_result r;
    rounds(s, 0, 6, 10, 10.5, 8, 8.4);
    cr_assert_eq(ts_measure_judge(s, 12, &M2, &OPTS, &r), 6);
    for (int i = 0; i < 12; i++) cr_expect_eq(s[i].flags, 0u, "sample %d flags %#x", i, s[i].flags);
    cr_expect(r.faster);
    cr_expect_not(r.busy);
    cr_expect_eq(r.rounds, 6);
    cr_expect_eq(r.discarded, 0);
    cr_expect_float_eq(r.min0_ms, 10, 1e-9);
    cr_expect_float_eq(r.min1_ms, 8, 1e-9);
    cr_expect_float_eq(r.median0_ms, 10.51, 1e-9);
    cr_expect_float_eq(r.median1_ms, 8.41, 1e-9);
    cr_expect(strncmp(r.why, "faster:", 7) == 0, "%s", r.why);
}

Test(measure, clean_equal_rounds_are_not_faster)
{
    ts_measure_sample s[12];
    ts_measure_result r;
    rounds(s, 0, 6, 10, 10.5, 9.9, 10.5); /* 1% gain in the fastest run: noise, below min_gain */
    cr_assert_eq(ts_measure_judge(s, 12, &M2, &OPTS, &r), 6);
    cr_expect_not(r.faster);
    cr_expect_not(r.busy);
    cr_expect(strncmp(r.why, "not faster:", 11) == 0, "%s", r.why);
    /* the fastest run gains enough but the median is worse: not faster */
    rounds(s, 0, 6, 10, 10.5, 9, 10.6);
    ts_measure_judge(s, 12, &M2, &OPTS, &r);
    cr_expect_not(r.faster, "%s", r.why);
}

Test(measure, collapsed_round_is_discarded)
{
    ts_measure_sample s[14];
    ts_measure_result r;
    rounds(s, 0, 7, 10, 10.5, 10, 10.5);
    /* round 3: the original collapses (spinning threads meet a competitor)
     * though no counter noticed */
    s[6].min_ms = 40, s[6].med_ms = 60;
    cr_assert_eq(ts_measure_judge(s, 14, &M2, &OPTS, &r), 6);
    cr_expect(s[6].flags & TS_MEASURE_COLLAPSE, "flags %#x", s[6].flags);
    cr_expect_eq(s[7].flags, 0u);
    cr_expect_eq(r.discarded, 1);
    cr_expect_not(r.busy);
    cr_expect_float_eq(r.median0_ms, 10.51, 1e-9);
    cr_expect(strstr(r.why, "1 discarded"), "%s", r.why);
}

Test(measure, gain_seen_only_in_disturbed_rounds_is_not_faster)
{
    ts_measure_sample s[16];
    ts_measure_result r;
    rounds(s, 0, 8, 10, 10.5, 10, 10.5);
    /* rounds 4..7: the result looks 30% faster, because the original's
     * halves were disturbed: its threads waited for a CPU a third of the
     * time, or its CPU share fell, or another task was runnable */
    for (int k = 4; k < 8; k++) {
        ts_measure_sample *o = s[2 * k].graph == 0 ? &s[2 * k] : &s[2 * k + 1];
        ts_measure_sample *x = o == &s[2 * k] ? &s[2 * k + 1] : &s[2 * k];
        x->min_ms = 7, x->med_ms = 7.3;
        o->med_ms = 14;
        if (k == 4) o->wait_ms = 33;
        if (k == 5) o->cpu_ms = 120;
        if (k == 6) o->others = 1;
        if (k == 7) o->steal_ms = 20;
    }
    ts_measure_judge(s, 16, &M2, &OPTS, &r);
    cr_expect_eq(r.rounds, 4);
    cr_expect_eq(r.discarded, 4);
    cr_expect_not(r.faster, "%s", r.why);
    cr_expect_float_eq(r.min1_ms, 10, 1e-9);
    unsigned want[4] = {TS_MEASURE_WAITED, TS_MEASURE_CPU_SHARE, TS_MEASURE_OTHERS, TS_MEASURE_STOLEN};
    for (int k = 4; k < 8; k++) {
        ts_measure_sample *o = s[2 * k].graph == 0 ? &s[2 * k] : &s[2 * k + 1];
        cr_expect(o->flags & want[k - 4], "round %d flags %#x", k, o->flags);
    }
}

Test(measure, all_rounds_disturbed_is_busy)
{
    ts_measure_sample s[12];
    ts_measure_result r;
    rounds(s, 0, 6, 10, 10.5, 7, 7.3);
    for (int i = 0; i < 12; i++) s[i].others = 2, s[i].wait_ms = 60; /* 2 threads: 30% of their time */
    cr_assert_eq(ts_measure_judge(s, 12, &M2, &OPTS, &r), 0);
    cr_expect(r.busy);
    cr_expect_not(r.faster);
    cr_expect_eq(r.rounds, 0);
    cr_expect_eq(r.discarded, 6);
    cr_expect(strncmp(r.why, "busy ", 5) == 0, "%s", r.why);
    cr_expect(strstr(r.why, "waited for a CPU 30%"), "%s", r.why);
    cr_expect(strstr(r.why, "2 other tasks runnable"), "%s", r.why);
}

Test(measure, too_few_clean_rounds_is_busy)
{
    ts_measure_sample s[12];
    ts_measure_result r;
    rounds(s, 0, 6, 10, 10.5, 7, 7.3);
    for (int i = 4; i < 12; i++) s[i].wait_ms = 30;
    cr_assert_eq(ts_measure_judge(s, 12, &M2, &OPTS, &r), 2);
    cr_expect(r.busy);
    cr_expect_not(r.faster);
}

Test(measure, too_few_rounds_without_disturbance_is_undecided_not_busy)
{
    ts_measure_sample s[4];
    ts_measure_result r;
    rounds(s, 0, 2, 10, 10.5, 7, 7.3);
    cr_assert_eq(ts_measure_judge(s, 4, &M2, &OPTS, &r), 2);
    cr_expect_not(r.busy);
    cr_expect_not(r.faster);
    cr_expect(strncmp(r.why, "undecided:", 10) == 0, "%s", r.why);
    cr_assert_eq(ts_measure_judge(s, 0, &M2, &OPTS, &r), 0);
    cr_expect_not(r.faster);
}

Test(measure, runnable_tasks_count_against_idle_cores_only)
{
    /* a serial graph with sleeping workers: 2 threads keep one core busy
     * (CPU share 0.5), so one other runnable task takes the idle core and
     * does not disturb it; two do */
    ts_measure_sample s[12];
    ts_measure_result r;
    rounds(s, 0, 6, 10, 10.5, 10, 10.5);
    for (int i = 0; i < 12; i++) s[i].cpu_ms = 100, s[i].others = 1;
    cr_expect_eq(ts_measure_judge(s, 12, &M2, &OPTS, &r), 6);
    for (int i = 0; i < 12; i++) s[i].others = 2;
    cr_expect_eq(ts_measure_judge(s, 12, &M2, &OPTS, &r), 0);
    cr_expect(r.busy);
    /* unknown counters (no /proc) are no evidence either way */
    rounds(s, 0, 6, 10, 10.5, 10, 10.5);
    for (int i = 0; i < 12; i++) s[i].others = -1, s[i].wait_ms = -1, s[i].steal_ms = -1;
    cr_expect_eq(ts_measure_judge(s, 12, &M2, &OPTS, &r), 6);
}

/* x (1x64) -> MatMul 64x64 -> Relu */
static ts_graph *tiny(void)
{
    uint64_t rng = 7;
    ts_graph *g = ts_graph_new("tiny", 17);
    int x = xt_input(g, "x", "1x64");
    int y = xt_node(g, "MatMul", INS(x, xt_const_random(g, "64x64", -1, 1, &rng)), NOATTR);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

/* tsopt bench's rounds: one graph, every round judged on its own evidence
 * against the best round (ts_measure_judge_runs). */
Test(measure, bench_rounds_of_one_graph_are_judged_alone)
{
    ts_measure_sample s[8];
    for (int i = 0; i < 8; i++) s[i] = quiet(0, 1.0, 1.05 + 0.01 * (i % 3));
    cr_expect_eq(ts_measure_judge_runs(s, 8, &M2), 8);
    s[1].wait_ms = 30;     /* threads waited 30 ms of 100 */
    s[3].cpu_ms = 100;     /* half the CPU of the best round */
    s[4].others = 1;       /* a competitor runnable, no idle core */
    s[5].steal_ms = 20;    /* the hypervisor took 20% */
    s[6].med_ms = 3.0;     /* collapsed */
    cr_expect_eq(ts_measure_judge_runs(s, 8, &M2), 3);
    cr_expect_eq(s[0].flags, 0u);
    cr_expect_eq(s[1].flags, (unsigned)TS_MEASURE_WAITED);
    cr_expect_eq(s[3].flags, (unsigned)TS_MEASURE_CPU_SHARE);
    cr_expect_eq(s[4].flags, (unsigned)TS_MEASURE_OTHERS);
    cr_expect_eq(s[5].flags, (unsigned)TS_MEASURE_STOLEN);
    cr_expect_eq(s[6].flags, (unsigned)TS_MEASURE_COLLAPSE);
    cr_expect_eq(s[2].flags | s[7].flags, 0u);
    /* no samples: nothing undisturbed, no crash */
    cr_expect_eq(ts_measure_judge_runs(s, 0, &M2), 0);
}

Test(measure, pair_of_identical_graphs_gives_sane_numbers)
{
    ts_graph *a = tiny(), *b = tiny();
    ts_measure_opts o = {.min_rounds = 2, .max_rounds = 4, .budget_s = 2, .min_gain = 3, .seed = 1};
    ts_measure_result r;
    ts_error e = {0};
    cr_assert_eq(ts_measure_pair(a, b, &o, &r, &e), TS_OK, "%s", e.msg);
    /* a busy machine may discard rounds; no round at all only when the
     * budget ran out first (plans built under heavy load) */
    cr_expect(r.rounds + r.discarded >= 1 || strncmp(r.why, "undecided", 9) == 0, "%s", r.why);
    cr_expect_leq(r.rounds, 4);
    cr_expect_gt(strlen(r.why), 0);
    cr_expect(!(r.busy && r.faster));
    if (r.rounds >= 2) {
        cr_expect_gt(r.min0_ms, 0);
        cr_expect_gt(r.min1_ms, 0);
        cr_expect_leq(r.min0_ms, r.median0_ms);
        cr_expect_leq(r.min1_ms, r.median1_ms);
    }
    ts_graph_free(a);
    ts_graph_free(b);
}

Test(measure, graphs_with_different_inputs_are_refused)
{
    ts_graph *a = tiny(), *b = ts_graph_new("other", 17);
    xt_output(b, xt_node(b, "Relu", INS(xt_input(b, "x", "1x32")), NOATTR));
    ts_measure_opts o = {.budget_s = 1};
    ts_measure_result r;
    ts_error e = {0};
    cr_expect_eq(ts_measure_pair(a, b, &o, &r, &e), TS_ERR_INVALID);
    cr_expect(strstr(e.msg, "input 0"), "%s", e.msg);
    ts_graph_free(a);
    ts_graph_free(b);
}
