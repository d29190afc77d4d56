/* The float32 channels-last -> 16-channel blocks conversion (acdb ->
 * aBcd16b; src/dnnl/dnnl_util.c, xd_reorder with bl_cb): tsopt's own copy
 * of 64-byte pieces instead of oneDNN's reorder (ResNet-50's downsample
 * output before the sum post-op of the block's last conv).  Against
 * hand-computed positions and bit for bit against oneDNN's reorder
 * (TSOPT_SKIP=reorder.blocks16), on one thread and split between two;
 * other channel counts and types stay oneDNN's. */
#include <stdlib.h>
#include "dnnl/dnnl_util.h"
#include "exec_check.h"
#include "tsopt.h"

/* A plan for its engine and stream, built with opts o. */
static ts_plan *any_plan(ts_graph **g, const ts_plan_opts *o)
{
    ts_error e = {0};
    *g = ts_graph_new("t", 17);
    xt_output(*g, xt_node(*g, "Relu", (int[]){xt_input(*g, "x", "1x4")}, 1, NULL, 0));
    ts_plan *plan = NULL;
    cr_assert_eq(ts_plan_build(*g, o, &plan, &e), TS_OK, "%s", e.msg);
    return plan;
}

static void positions(int threads)
{
    const int64_t N = 2, C = 48, H = 5, W = 7, HW = H * W, n_el = N * C * HW;
    dnnl_dims_t d = {N, C, H, W};
    dnnl_memory_desc_t from, to;
    cr_assert_eq(dnnl_memory_desc_init_by_tag(&from, 4, d, dnnl_f32, dnnl_acdb), dnnl_success);
    cr_assert_eq(dnnl_memory_desc_init_by_tag(&to, 4, d, dnnl_f32, dnnl_aBcd16b), dnnl_success);
    ts_graph *g, *g2;
    ts_plan *plan = any_plan(&g, &(ts_plan_opts){.threads = threads});
    ts_plan *skip = any_plan(&g2, &(ts_plan_opts){.threads = threads, .skip = "reorder.blocks16"});
    const xplan *xp = (const xplan *)plan, *xs = (const xplan *)skip;
    ts_error e = {0};
    xd_reorder r, o;
    cr_assert_eq(xd_reorder_init(&r, &from, &to, xp, 0, &e), TS_OK, "%s", e.msg);
    cr_assert(r.prim == NULL && r.bl_cb == 3 && r.bl_hw == HW && r.bl_n == N, "tsopt's copy");
    cr_assert_eq(r.bl_par, threads > 1, "split between %d threads (TSOPT_SPLIT_MIN_BYTES=0)", threads);
    cr_assert_eq(xd_reorder_init(&o, &from, &to, xs, 0, &e), TS_OK, "%s", e.msg);
    cr_assert(o.prim != NULL && o.bl_cb == 0, "skipped: oneDNN's reorder");
    float *x = malloc(sizeof(float) * (size_t)n_el), *y = malloc(sizeof(float) * (size_t)(n_el + 1)),
          *z = malloc(sizeof(float) * (size_t)n_el);
    cr_assert(x && y && z);
    /* x[n][h][w][c] = 10000 n + 100 q + c (q = h W + w) */
    for (int64_t n = 0; n < N; n++)
        for (int64_t q = 0; q < HW; q++)
            for (int64_t c = 0; c < C; c++) x[(n * HW + q) * C + c] = (float)(10000 * n + 100 * q + c);
    y[n_el] = -7; /* nothing written past the tensor */
    xd_reorder_run(&r, x, y, xp->stream);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t q = 0; q < HW; q++)
                cr_assert_eq(y[((n * (C / 16) + c / 16) * HW + q) * 16 + c % 16], (float)(10000 * n + 100 * q + c),
                             "n %lld c %lld q %lld", (long long)n, (long long)c, (long long)q);
    cr_assert_eq(y[n_el], -7);
    xd_reorder_run(&o, x, z, xs->stream);
    dnnl_stream_wait(xs->stream);
    cr_assert_eq(memcmp(y, z, sizeof(float) * (size_t)n_el), 0, "differs from oneDNN's reorder");
    free(x), free(y), free(z);
    xd_reorder_fini(&r);
    xd_reorder_fini(&o);
    ts_plan_free(plan);
    ts_plan_free(skip);
    ts_graph_free(g);
    ts_graph_free(g2);
}

/* TSOPT_SPLIT_MIN_BYTES=0 before anything measures the split threshold
 * (each Criterion test runs in a process of its own): two threads split */
Test(blocks_reorder, positions_one_thread)
{
    setenv("TSOPT_SPLIT_MIN_BYTES", "0", 1);
    positions(1);
}

Test(blocks_reorder, positions_two_threads)
{
    setenv("TSOPT_SPLIT_MIN_BYTES", "0", 1);
    positions(2);
}

/* Not this conversion: 24 channels (no whole blocks), bytes, the other
 * direction: oneDNN's reorder */
Test(blocks_reorder, only_whole_float_blocks)
{
    ts_graph *g;
    ts_plan *plan = any_plan(&g, NULL);
    const xplan *xp = (const xplan *)plan;
    ts_error e = {0};
    struct {
        int64_t c;
        dnnl_data_type_t t;
        bool back;
    } cases[] = {{24, dnnl_f32, false}, {32, dnnl_u8, false}, {32, dnnl_f32, true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        dnnl_dims_t d = {1, cases[i].c, 4, 4};
        dnnl_memory_desc_t cl, bl;
        cr_assert_eq(dnnl_memory_desc_init_by_tag(&cl, 4, d, cases[i].t, dnnl_acdb), dnnl_success);
        cr_assert_eq(dnnl_memory_desc_init_by_tag(&bl, 4, d, cases[i].t, dnnl_aBcd16b), dnnl_success);
        xd_reorder r;
        cr_assert_eq(xd_reorder_init(&r, cases[i].back ? &bl : &cl, cases[i].back ? &cl : &bl, xp, 0, &e), TS_OK, "%s",
                     e.msg);
        cr_assert(r.bl_cb == 0 && r.prim, "case %zu: oneDNN's reorder", i);
        xd_reorder_fini(&r);
    }
    ts_plan_free(plan);
    ts_graph_free(g);
}
