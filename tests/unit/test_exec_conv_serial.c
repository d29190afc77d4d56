/* Which oneDNN convolutions run on one thread (src/dnnl/dnnl_serial.h): a
 * conv under XD_SERIAL_FLOPS stays serial unless it moves at least the
 * measured split threshold (TSOPT_SPLIT_MIN_BYTES sets it here, as the
 * machine's measurement would), as a depthwise conv does: few FLOPs per
 * byte, so it takes 5-10x the time of a dense conv of the same FLOPs.
 * Every plan is checked against the reference interpreter on two threads. */
#include <stdlib.h>
#include "dnnl/dnnl_conv.h"
#include "exec_check.h"

static uint64_t rng = 4242;

/* x (1 x C x H x H) -> 1x1 conv C -> C -> depthwise KxK (pads K/2) -> Relu.
 * Returns the number of serial conv steps of its plan on two threads, and
 * in *convs the number of conv steps. */
static int serial_steps(int C, int H, int K, int *convs)
{
    ts_graph *g = ts_graph_new("t", 17);
    char x[32], w1[32], wd[32], b[16];
    snprintf(x, sizeof x, "1x%dx%dx%d", C, H, H);
    snprintf(w1, sizeof w1, "%dx%dx1x1", C, C);
    snprintf(wd, sizeof wd, "%dx1x%dx%d", C, K, K);
    snprintf(b, sizeof b, "%d", C);
    int y = xt_node(g, "Conv", (int[]){xt_input(g, "x", x), xt_const_random(g, w1, -0.3, 0.3, &rng)}, 2, NULL, 0);
    int64_t p = K / 2;
    ts_attr at[] = {ts_attr_ints("pads", (int64_t[]){p, p, p, p}, 4), ts_attr_int("group", C)};
    y = xt_node(g, "Conv", (int[]){y, xt_const_random(g, wd, -0.3, 0.3, &rng), xt_const_random(g, b, -0.5, 0.5, &rng)},
                3, at, 2);
    y = xt_node(g, "Relu", &y, 1, NULL, 0);
    xt_output(g, y);
    ts_plan_opts o = {.threads = 2};
    ts_plan *plan = xt_plan_check(g, &o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    const xplan *pl = (const xplan *)plan;
    int n = 0;
    *convs = 0;
    for (int i = 0; i < pl->nsteps; i++) {
        if (!strcmp(pl->steps[i].k->name, "dnnl.conv")) ++*convs;
        if (xd_conv_serial(&pl->steps[i])) n++;
    }
    ts_plan_free(plan);
    ts_graph_free(g);
    return n;
}

/* mnasnet1_0's 5x5 depthwise at 14x14 on 240 channels: 2.35 MFLOP (under
 * XD_SERIAL_FLOPS), 0.40 MB moved (over a 200 kB threshold): split; the
 * 1x1 before it (22.6 MFLOP) too. */
Test(conv_serial, depthwise_over_split_bytes_splits)
{
    setenv("TSOPT_SPLIT_MIN_BYTES", "200000", 1);
    int convs;
    cr_assert_eq(serial_steps(240, 14, 5, &convs), 0);
    cr_assert_eq(convs, 2);
}

/* The same layer where the measured threshold is above its bytes (a region
 * timed while the team waits for cores): serial, as before the rule. */
Test(conv_serial, depthwise_under_split_bytes_serial)
{
    setenv("TSOPT_SPLIT_MIN_BYTES", "1000000", 1);
    int convs;
    cr_assert_eq(serial_steps(240, 14, 5, &convs), 1);
    cr_assert_eq(convs, 2);
}

/* 16 channels at 7x7: 0.03 MFLOP and 7 kB per conv, both serial. */
Test(conv_serial, tiny_convs_serial)
{
    setenv("TSOPT_SPLIT_MIN_BYTES", "200000", 1);
    int convs;
    cr_assert_eq(serial_steps(16, 7, 3, &convs), 2);
    cr_assert_eq(convs, 2);
}
