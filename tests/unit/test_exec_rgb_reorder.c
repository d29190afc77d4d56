/* The NCHW -> channels-last conversion of a 3- or 4-channel input before a
 * convolution (src/dnnl/dnnl_util.c, xd_reorder with cl_c): tsopt's own
 * loop instead of oneDNN's reorder.  Directly, against hand-computed
 * positions (batch 2, an odd image); through a stem convolution against
 * the reference interpreter on 1 and 2 threads. */
#include "dnnl/dnnl_util.h"
#include "exec_check.h"
#include "tsopt.h"

static uint64_t rng = 31337;

#define I(...) (int64_t[]){__VA_ARGS__}

/* x[n][c][q] = 1000 n + 100 c + q lands at y[n][q][c]; 5 channels go to
 * oneDNN (a primitive). */
Test(rgb_reorder, hand_computed_positions)
{
    for (int64_t C = 3; C <= 5; C++) {
        const int64_t N = 2, H = 5, W = 7, HW = H * W;
        dnnl_dims_t d = {N, C, H, W};
        dnnl_memory_desc_t from, to;
        cr_assert_eq(dnnl_memory_desc_init_by_strides(&from, 4, d, dnnl_f32, NULL), dnnl_success);
        cr_assert_eq(dnnl_memory_desc_init_by_tag(&to, 4, d, dnnl_f32, dnnl_acdb), dnnl_success);
        xd_reorder r;
        ts_error e = {0};
        if (C == 5) {
            /* the oneDNN path needs a plan's engine: any plan will do */
            ts_graph *g = ts_graph_new("t", 17);
            xt_output(g, xt_node(g, "Relu", (int[]){xt_input(g, "x", "1x4")}, 1, NULL, 0));
            ts_plan *plan = NULL;
            cr_assert_eq(ts_plan_build(g, NULL, &plan, &e), TS_OK, "%s", e.msg);
            cr_assert_eq(xd_reorder_init(&r, &from, &to, (const xplan *)plan, 0, &e), TS_OK, "%s", e.msg);
            cr_assert_not_null(r.prim, "5 channels: oneDNN's reorder");
            float x[2 * 5 * 35], y[2 * 5 * 35];
            for (int64_t i = 0; i < N * C * HW; i++) x[i] = (float)i;
            xd_reorder_run(&r, x, y, ((const xplan *)plan)->stream);
            dnnl_stream_wait(((const xplan *)plan)->stream);
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = 0; c < C; c++)
                    for (int64_t q = 0; q < HW; q++)
                        cr_assert_eq(y[(n * HW + q) * C + c], x[(n * C + c) * HW + q]);
            xd_reorder_fini(&r);
            ts_plan_free(plan);
            ts_graph_free(g);
            continue;
        }
        cr_assert_eq(xd_reorder_init(&r, &from, &to, NULL, 0, &e), TS_OK, "%s", e.msg);
        cr_assert_null(r.prim);
        cr_assert_eq(r.cl_c, C);
        float x[2 * 4 * 35], y[2 * 4 * 35 + 1];
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t q = 0; q < HW; q++) x[(n * C + c) * HW + q] = (float)(1000 * n + 100 * c + q);
        y[N * C * HW] = -7; /* nothing written past the tensor */
        xd_reorder_run(&r, x, y, NULL);
        for (int64_t n = 0; n < N; n++)
            for (int64_t q = 0; q < HW; q++)
                for (int64_t c = 0; c < C; c++)
                    cr_assert_eq(y[(n * HW + q) * C + c], (float)(1000 * n + 100 * c + q), "C %lld n %lld q %lld c %lld",
                                 (long long)C, (long long)n, (long long)q, (long long)c);
        cr_assert_eq(y[N * C * HW], -7);
        xd_reorder_fini(&r);
    }
}

/* The same on bytes (u8/s8: a quantized model's image before its int8
 * stem conv): x[n][c][q] = 50 n + 20 c + q (mod 256) lands at y[n][q][c]. */
Test(rgb_reorder, hand_computed_positions_bytes)
{
    for (int dt = 0; dt < 2; dt++)
        for (int64_t C = 3; C <= 4; C++) {
            const int64_t N = 2, H = 5, W = 7, HW = H * W;
            dnnl_dims_t d = {N, C, H, W};
            dnnl_data_type_t t = dt ? dnnl_s8 : dnnl_u8;
            dnnl_memory_desc_t from, to;
            cr_assert_eq(dnnl_memory_desc_init_by_strides(&from, 4, d, t, NULL), dnnl_success);
            cr_assert_eq(dnnl_memory_desc_init_by_tag(&to, 4, d, t, dnnl_acdb), dnnl_success);
            xd_reorder r;
            ts_error e = {0};
            cr_assert_eq(xd_reorder_init(&r, &from, &to, NULL, 0, &e), TS_OK, "%s", e.msg);
            cr_assert(r.prim == NULL && r.cl_c == C && r.cl_size == 1);
            uint8_t x[2 * 4 * 35], y[2 * 4 * 35 + 1];
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = 0; c < C; c++)
                    for (int64_t q = 0; q < HW; q++) x[(n * C + c) * HW + q] = (uint8_t)(50 * n + 20 * c + q);
            y[N * C * HW] = 0xA5; /* nothing written past the tensor */
            xd_reorder_run(&r, x, y, NULL);
            for (int64_t n = 0; n < N; n++)
                for (int64_t q = 0; q < HW; q++)
                    for (int64_t c = 0; c < C; c++)
                        cr_assert_eq(y[(n * HW + q) * C + c], (uint8_t)(50 * n + 20 * c + q), "C %lld n %lld q %lld c %lld",
                                     (long long)C, (long long)n, (long long)q, (long long)c);
            cr_assert_eq(y[N * C * HW], 0xA5);
            xd_reorder_fini(&r);
        }
}

/* Not this conversion: a 3-channel reorder to 16-channel blocks, and a
 * plain -> channels-last one of 3-D tensors, stay oneDNN's. */
Test(rgb_reorder, only_4d_channels_last)
{
    dnnl_dims_t d = {1, 3, 4, 4};
    dnnl_memory_desc_t from, blk;
    cr_assert_eq(dnnl_memory_desc_init_by_strides(&from, 4, d, dnnl_f32, NULL), dnnl_success);
    cr_assert_eq(dnnl_memory_desc_init_by_tag(&blk, 4, d, dnnl_f32, dnnl_aBcd16b), dnnl_success);
    ts_graph *g = ts_graph_new("t", 17);
    xt_output(g, xt_node(g, "Relu", (int[]){xt_input(g, "x", "1x4")}, 1, NULL, 0));
    ts_plan *plan = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_plan_build(g, NULL, &plan, &e), TS_OK, "%s", e.msg);
    xd_reorder r;
    cr_assert_eq(xd_reorder_init(&r, &from, &blk, (const xplan *)plan, 0, &e), TS_OK, "%s", e.msg);
    cr_assert(r.cl_c == 0 && r.prim);
    xd_reorder_fini(&r);
    dnnl_dims_t d3 = {1, 3, 9};
    dnnl_memory_desc_t f3, t3;
    cr_assert_eq(dnnl_memory_desc_init_by_strides(&f3, 3, d3, dnnl_f32, NULL), dnnl_success);
    cr_assert_eq(dnnl_memory_desc_init_by_tag(&t3, 3, d3, dnnl_f32, dnnl_acb), dnnl_success);
    cr_assert_eq(xd_reorder_init(&r, &f3, &t3, (const xplan *)plan, 0, &e), TS_OK, "%s", e.msg);
    cr_assert(r.cl_c == 0 && r.prim);
    xd_reorder_fini(&r);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* A mobile net's stem: 3 (and 4) channels, 3x3 stride 2, pads 1, SiLU, on
 * batch 2 and an odd image, against the reference. */
Test(rgb_reorder, stem_conv_against_reference)
{
    for (int C = 3; C <= 4; C++) {
        ts_graph *g = ts_graph_new("t", 17);
        char xd[32], wd[32];
        snprintf(xd, sizeof xd, "2x%dx37x41", C);
        snprintf(wd, sizeof wd, "24x%dx3x3", C);
        int y = xt_node(g, "Conv",
                        (int[]){xt_input(g, "x", xd), xt_const_random(g, wd, -0.5, 0.5, &rng),
                                xt_const_random(g, "24", -0.5, 0.5, &rng)},
                        3, (ts_attr[]){ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4)},
                        2);
        int s = xt_node(g, "Sigmoid", &y, 1, NULL, 0);
        y = xt_node(g, "Mul", (int[]){y, s}, 2, NULL, 0);
        /* a consumer that keeps the stem channels-last */
        y = xt_node(g, "Conv", (int[]){y, xt_const_random(g, "8x24x1x1", -0.5, 0.5, &rng)}, 2, NULL, 0);
        xt_output(g, y);
        for (int threads = 1; threads <= 2; threads++) {
            ts_plan_opts o = {.threads = threads};
            ts_plan_free(xt_plan_check(g, &o, rng++, -1, 1, 1e-4, XT_TOL_MAX));
        }
        ts_graph_free(g);
    }
}
