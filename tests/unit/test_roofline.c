/* The per-step roofline (src/exec/roofline.c): bytes and FLOPs of plan steps
 * worked out by hand for small graphs.  A fused conv + Relu is one step that
 * reads x and its weights and writes y once (the conv's result never leaves
 * the step); a weight read by two steps is charged once; a planner-inserted
 * conversion moves its input and its output. */
#define XT_GLOBAL_GRAPH
#include "exec_check.h"
#include "exec/roofline.h"
#include "measure/step_timer.h"

TestSuite(roofline, .fini = xt_done);

static uint64_t rng = 77;

static ts_plan *plan_of(void)
{
    ts_plan *p = xt_plan_check(G, NULL, 5, -1, 1, 1e-4, XT_TOL_MAX);
    return p;
}

Test(roofline, conv_relu_one_step)
{
    graph(17);
    int x = input("1x16x10x10");
    int w = xt_const_random(G, "32x16x3x3", -0.2, 0.2, &rng), b = xt_const_random(G, "32", -0.1, 0.1, &rng);
    int64_t pads[4] = {1, 1, 1, 1};
    int c = xt_node(G, "Conv", INS(x, w, b), ATTRS(ts_attr_ints("pads", pads, 4)));
    int y = xt_node(G, "Relu", INS(c), NOATTR);
    output(y);
    ts_plan *p = plan_of();
    int ns = xplan_step_count(p);
    xroof_step r[16];
    cr_assert_leq(ns, 16);
    ts_error e = {0};
    cr_assert_eq(xroof_plan(p, r, &e), TS_OK, "%s", e.msg);
    double conv_flops = 2.0 * 32 * 16 * 9 * 100, bytes = 4.0 * (1600 + 32 * 16 * 9 + 32 + 3200);
    int found = 0;
    double total_bytes = 0;
    for (int i = 0; i < ns; i++) {
        total_bytes += r[i].bytes;
        if (strcmp(xplan_step_kernel(p, i), "dnnl.conv")) continue;
        found++;
        cr_assert_eq(r[i].nodes, 2, "conv and Relu in one step: %d nodes", r[i].nodes);
        cr_assert_float_eq(r[i].flops, conv_flops + 3200, 1e-6, "flops %g", r[i].flops);
        cr_assert_float_eq(r[i].bytes, bytes, 1e-6, "bytes %g, expected %g", r[i].bytes, bytes);
        cr_assert_float_eq(r[i].weight_bytes, 4.0 * (32 * 16 * 9 + 32), 1e-6);
    }
    cr_assert_eq(found, 1);
    /* a conversion into the plain graph output adds its input and output */
    cr_assert_geq(total_bytes, bytes);
    cr_assert_float_eq(xroof_limit_ms(2e6, 1e6, 1.0, 1e6), 2.0, 1e-12); /* 2 MB at 1 GB/s */
    cr_assert_float_eq(xroof_limit_ms(1e3, 4e9, 1.0, 2.0), 2000.0, 1e-9); /* 4 GFLOP at 2 GFLOP/s */
    ts_plan_free(p);
}

Test(roofline, shared_weight_once)
{
    graph(17);
    int x = input("1x64"), z = input("1x64");
    int w = xt_const_random(G, "64x64", -0.2, 0.2, &rng);
    int a = xt_node(G, "MatMul", INS(x, w), NOATTR);
    int t = xt_node(G, "Tanh", INS(a), NOATTR); /* the second product waits for the first */
    int bsum = xt_node(G, "Add", INS(t, z), NOATTR);
    int c = xt_node(G, "MatMul", INS(bsum, w), NOATTR);
    output(c);
    ts_plan *p = plan_of();
    int ns = xplan_step_count(p);
    xroof_step r[16];
    cr_assert_leq(ns, 16);
    ts_error e = {0};
    cr_assert_eq(xroof_plan(p, r, &e), TS_OK, "%s", e.msg);
    double wsum = 0, flops = 0;
    for (int i = 0; i < ns; i++) wsum += r[i].weight_bytes, flops += r[i].flops;
    cr_assert_float_eq(wsum, 64.0 * 64 * 4, 1e-6, "the weight counted %g times", wsum / (64.0 * 64 * 4));
    /* 2 products of 2*64*64, Tanh and Add one per element */
    cr_assert_float_eq(flops, 2 * 2.0 * 64 * 64 + 64 + 64, 1e-6, "flops %g", flops);
    ts_plan_free(p);
}

Test(roofline, caches_sane)
{
    xroof_caches c = xroof_caches_get();
    cr_assert(c.l1d >= 16 << 10 && c.l1d <= c.l2 && c.l2 <= c.l3 && c.l3 <= 96L << 20, "%ld %ld %ld", c.l1d, c.l2,
              c.l3);
}

/* The limit at the level a step's bytes fit in, worked out by hand for a
 * made-up machine: 2 threads, L1d 32 KiB, L2 1 MiB a core, 16 MiB last
 * level; 400 / 200 / 100 / 20 GB/s; 100 GFLOP/s. */
Test(roofline, level_bandwidth)
{
    xroof_machine m = {.gflops = 100, .gbps = {400, 200, 100, 20}, .caches = {32 << 10, 1 << 20, 16 << 20}, .threads = 2};
    cr_assert_eq(xroof_level(&m, 64 << 10), XROOF_L1);        /* two L1s hold 64 KiB */
    cr_assert_eq(xroof_level(&m, (64 << 10) + 1), XROOF_L2);
    cr_assert_eq(xroof_level(&m, 2 << 20), XROOF_L2);
    cr_assert_eq(xroof_level(&m, 3 << 20), XROOF_L3);
    cr_assert_eq(xroof_level(&m, 17 << 20), XROOF_DRAM);
    /* 1 MB of activations in L2 (200 GB/s: 5 us) and 0.2 MB of weights of a
     * run with 10 MB of them (L3, 100 GB/s: 2 us); 1 MFLOP at 100 GFLOP/s
     * is 10 us: FLOP-bound at 0.01 ms */
    xroof_step s = {.bytes = 1.2e6, .weight_bytes = 0.2e6, .flops = 1e6};
    int level = -1;
    bool mb = true;
    cr_assert_float_eq(xroof_memory_ms(&m, &s, 10e6, &level), 0.005 + 0.002, 1e-12);
    cr_assert_eq(level, XROOF_L2);
    cr_assert_float_eq(xroof_step_limit_ms(&m, &s, 10e6, &mb, NULL), 0.01, 1e-12);
    cr_assert(!mb);
    /* 8-bit products at their own peak: 1 MFLOP of which 0.8 int8 at 400
     * GOP/s is 2 + 2 us, under the 7 us of memory; unknown, all at 100 */
    s.int8_flops = 0.8e6;
    m.int8_gops = 400;
    cr_assert_float_eq(xroof_step_limit_ms(&m, &s, 10e6, &mb, NULL), 0.007, 1e-12);
    cr_assert(mb);
    m.int8_gops = 0;
    cr_assert_float_eq(xroof_step_limit_ms(&m, &s, 10e6, &mb, NULL), 0.01, 1e-12);
    s.int8_flops = 0;
    /* without FLOPs, memory-bound; the run's weights in DRAM (20 GB/s: 10 us) */
    s.flops = 0;
    cr_assert_float_eq(xroof_step_limit_ms(&m, &s, 40e6, &mb, NULL), 0.005 + 0.01, 1e-12);
    cr_assert(mb);
    /* weights never come from closer than the step's own level: 40 KB
     * step in L1 (400 GB/s: 0.075 us for 30 KB activations), weights of a
     * 1.5 MB run in L2 (200 GB/s: 0.05 us for 10 KB) */
    s = (xroof_step){.bytes = 40e3, .weight_bytes = 10e3};
    cr_assert_float_eq(xroof_memory_ms(&m, &s, 1.5e6, &level), 30e3 / 400e6 + 10e3 / 200e6, 1e-15);
    cr_assert_eq(level, XROOF_L1);
    /* a level measured slower than the one beyond it counts at that speed */
    m.gbps[XROOF_L2] = 50;
    s = (xroof_step){.bytes = 1e6};
    cr_assert_float_eq(xroof_memory_ms(&m, &s, 0, NULL), 1e6 / 100e6, 1e-12);
    /* unmeasured levels: no limit from them */
    m = (xroof_machine){.caches = m.caches, .threads = 2};
    cr_assert_float_eq(xroof_step_limit_ms(&m, &s, 0, &mb, NULL), 0, 1e-15);
}

/* The measured levels: positive, and L1 faster than memory (a machine
 * where it is not has a broken measurement, not a slow cache). */
Test(roofline, cache_bandwidth_measured)
{
    double bw[XROOF_DRAM];
    ts_error e = {0};
    cr_assert_eq(xroof_measure_cache_bw(bw, &e), TS_OK, "%s", e.msg);
    for (int l = 0; l < XROOF_DRAM; l++) cr_assert(bw[l] > 0, "level %d: %g GB/s", l, bw[l]);
#ifndef __SANITIZE_ADDRESS__
    /* under ASan every load is checked: the loop is bound by the checks,
     * and L1 and L3 measured 6.03 and 6.04 GB/s (CI, 12-07) */
    cr_assert(bw[XROOF_L1] > bw[XROOF_L3], "L1 %g GB/s, L3 %g", bw[XROOF_L1], bw[XROOF_L3]);
#endif
    if (__builtin_cpu_supports("fma")) cr_assert(xroof_measure_fma() > 0);
}
