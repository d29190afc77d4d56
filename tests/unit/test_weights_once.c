/* Weights held once (src/exec/weights_once.c): with
 * ts_plan_opts.release_packed_weights a plan frees the graph's copy of each
 * constant that only packing kernels (convolutions, matrix products) read,
 * keeps every constant something else still reads, and computes the same
 * outputs. */
#include "exec_check.h"
#include "exec/plan_internal.h"

static const ts_tensor *constant(const ts_graph *g, int v) { return g->values[v].constant; }

/* conv -> relu -> conv + residual -> relu, flattened, then a matrix
 * product and a bias add: weights of dnnl.conv and of a matmul kernel. */
static ts_graph *conv_mlp(int *w1, int *b1, int *w2, int *wm, int *bm, uint64_t *rng)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x4x6x6");
    ts_attr pads = ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4);
    *w1 = xt_const_random(g, "8x4x3x3", -0.3, 0.3, rng);
    *b1 = xt_const_random(g, "8", -0.5, 0.5, rng);
    int c1 = xt_node(g, "Conv", (int[]){x, *w1, *b1}, 3, &pads, 1);
    int r1 = xt_node(g, "Relu", &c1, 1, NULL, 0);
    *w2 = xt_const_random(g, "8x8x3x3", -0.3, 0.3, rng);
    int c2 = xt_node(g, "Conv", (int[]){r1, *w2}, 2, &pads, 1);
    int s = xt_node(g, "Add", (int[]){c2, r1}, 2, NULL, 0);
    int r2 = xt_node(g, "Relu", &s, 1, NULL, 0);
    int f = xt_node(g, "Flatten", &r2, 1, NULL, 0);
    *wm = xt_const_random(g, "288x10", -0.1, 0.1, rng);
    int m = xt_node(g, "MatMul", (int[]){f, *wm}, 2, NULL, 0);
    *bm = xt_const_random(g, "10", -0.5, 0.5, rng);
    xt_output(g, xt_node(g, "Add", (int[]){m, *bm}, 2, NULL, 0));
    return g;
}

Test(weights_once, packed_weights_are_released_and_outputs_match)
{
    uint64_t rng = 7;
    int w1, b1, w2, wm, bm;
    ts_graph *g = conv_mlp(&w1, &b1, &w2, &wm, &bm, &rng);
    size_t want = constant(g, w1)->nbytes + constant(g, b1)->nbytes + constant(g, w2)->nbytes +
                  constant(g, wm)->nbytes, bias = constant(g, bm)->nbytes;
    ts_plan_opts o = {.release_packed_weights = true};
    /* the reference runs before the plan is built (the weights are gone after) */
    ts_plan *p = xt_plan_check(g, &o, 11, -1, 1, 1e-4, XT_TOL_MAX);
    /* the product's bias is folded into the product's step or read by an
     * Add step, depending on the kernel: released only in the first case */
    if (!constant(g, bm)->data) want += bias;
    int ws[] = {w1, b1, w2, wm};
    for (int i = 0; i < 4; i++) {
        cr_assert_null(constant(g, ws[i])->data, "constant %s still holds its data", g->values[ws[i]].name);
        cr_assert(!constant(g, ws[i])->owns_data);
    }
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    cr_assert_eq(st.released_bytes, want, "released %zu bytes, the weights are %zu", st.released_bytes, want);
    cr_assert_geq(st.weight_bytes, want, "the plan's packed copies are counted");
    ts_plan_free(p);
    ts_graph_free(g);
}

Test(weights_once, off_by_default)
{
    uint64_t rng = 7;
    int w1, b1, w2, wm, bm;
    ts_graph *g = conv_mlp(&w1, &b1, &w2, &wm, &bm, &rng);
    const void *d = constant(g, w2)->data;
    ts_plan *p = xt_plan_check(g, NULL, 11, -1, 1, 1e-4, XT_TOL_MAX);
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    cr_assert_eq(st.released_bytes, 0);
    cr_assert_eq(constant(g, w2)->data, d);
    ts_plan_free(p);
    /* the graph can be planned again: nothing was taken from it */
    ts_plan_free(xt_plan_check(g, NULL, 12, -1, 1, 1e-4, XT_TOL_MAX));
    ts_graph_free(g);
}

/* x (1x2) @ W (2x2) = [1 2] [[1 2] [3 4]] = [7 10], computed by hand; W is
 * freed and the product stays right on both runs. */
Test(weights_once, hand_computed_product)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x2");
    int w = xt_const_values(g, TS_F32, "2x2", (const double[]){1, 2, 3, 4}, 4);
    xt_output(g, xt_node(g, "MatMul", (int[]){x, w}, 2, NULL, 0));
    ts_plan_opts o = {.release_packed_weights = true};
    ts_plan *p = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    cr_assert_null(constant(g, w)->data);
    ts_shape s1 = xt_shape("1x2");
    ts_tensor *in = ts_tensor_new(TS_F32, &s1, &e), *out = ts_tensor_new(TS_F32, &s1, &e);
    ((float *)in->data)[0] = 1, ((float *)in->data)[1] = 2;
    for (int rep = 0; rep < 2; rep++) {
        memset(out->data, 0x7f, out->nbytes);
        cr_assert_eq(ts_plan_run(p, &in, &out, &e), TS_OK, "%s", e.msg);
        cr_assert_float_eq(((float *)out->data)[0], 7.0f, 1e-6);
        cr_assert_float_eq(((float *)out->data)[1], 10.0f, 1e-6);
    }
    ts_tensor_unref(in);
    ts_tensor_unref(out);
    ts_plan_free(p);
    ts_graph_free(g);
}

/* A weight that another kind of node also reads (here an element-wise Add
 * whose kernel reads the constant at run time), or that is a graph output,
 * or whose tensor another graph shares, keeps its data. */
Test(weights_once, constants_still_read_are_kept)
{
    uint64_t rng = 3;
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "4x16"), y = xt_input(g, "y", "16x16");
    int shared = xt_const_random(g, "16x16", -0.5, 0.5, &rng);
    int out_w = xt_const_random(g, "16x16", -0.5, 0.5, &rng);
    int alone = xt_const_random(g, "16x16", -0.5, 0.5, &rng);
    int m1 = xt_node(g, "MatMul", (int[]){x, shared}, 2, NULL, 0);
    int a = xt_node(g, "Add", (int[]){y, shared}, 2, NULL, 0);
    int m2 = xt_node(g, "MatMul", (int[]){m1, out_w}, 2, NULL, 0);
    int m3 = xt_node(g, "MatMul", (int[]){m2, alone}, 2, NULL, 0);
    xt_output(g, m3);
    xt_output(g, a);
    xt_output(g, out_w);
    /* a second holder of `alone`'s tensor: not the plan's to free */
    ts_tensor *held = ts_tensor_ref(g->values[alone].constant);
    ts_plan_opts o = {.release_packed_weights = true};
    ts_plan *p = xt_plan_check(g, &o, 5, -1, 1, 1e-4, XT_TOL_MAX);
    cr_assert_not_null(constant(g, shared)->data, "read by the Add too");
    cr_assert_not_null(constant(g, out_w)->data, "a graph output");
    cr_assert_not_null(constant(g, alone)->data, "shared with another holder");
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    cr_assert_eq(st.released_bytes, 0);
    ts_plan_free(p);
    ts_tensor_unref(held);
    ts_graph_free(g);
}

/* ---- ts_session: y = x @ W, x [N, 3], W = [[1 2] [3 4] [5 6]].  The plan
 * at the default sizes holds the session graph's only copy of W: more
 * sizes than the session keeps plans for must not evict it (a new plan
 * could not be built from the emptied graph). */
#include <unistd.h>
#include "onnx.pb-c.h"
#include "onnx_pack.h"

static char session_model[64];

static void write_matmul_model(void)
{
    Onnx__TensorShapeProto__Dimension xd[2], yd[2], *xdp[2] = {&xd[0], &xd[1]}, *ydp[2] = {&yd[0], &yd[1]};
    Onnx__TensorShapeProto xs, ys;
    Onnx__TypeProto__Tensor xt, yt;
    Onnx__TypeProto xtp, ytp;
    Onnx__ValueInfoProto xv, yv;
    const char *cols[2] = {"3", "2"};
    Onnx__TensorShapeProto__Dimension *dims[2] = {xd, yd};
    Onnx__TensorShapeProto *shapes[2] = {&xs, &ys};
    Onnx__TypeProto__Tensor *tts[2] = {&xt, &yt};
    Onnx__TypeProto *tps[2] = {&xtp, &ytp};
    Onnx__ValueInfoProto *vis[2] = {&xv, &yv};
    Onnx__TensorShapeProto__Dimension **dps[2] = {xdp, ydp};
    for (int k = 0; k < 2; k++) {
        onnx__tensor_shape_proto__dimension__init(&dims[k][0]);
        onnx__tensor_shape_proto__dimension__init(&dims[k][1]);
        dims[k][0].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        dims[k][0].dim_param = "N";
        dims[k][1].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims[k][1].dim_value = atoi(cols[k]);
        onnx__tensor_shape_proto__init(shapes[k]);
        shapes[k]->n_dim = 2, shapes[k]->dim = dps[k];
        onnx__type_proto__tensor__init(tts[k]);
        tts[k]->has_elem_type = 1, tts[k]->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, tts[k]->shape = shapes[k];
        onnx__type_proto__init(tps[k]);
        tps[k]->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, tps[k]->tensor_type = tts[k];
        onnx__value_info_proto__init(vis[k]);
        vis[k]->name = k ? "y" : "x", vis[k]->type = tps[k];
    }
    float wdata[6] = {1, 2, 3, 4, 5, 6};
    int64_t wdims[2] = {3, 2};
    Onnx__TensorProto w;
    onnx__tensor_proto__init(&w);
    w.name = "W", w.has_data_type = 1, w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    w.n_dims = 2, w.dims = wdims, w.n_float_data = 6, w.float_data = wdata;
    char *mm_in[2] = {"x", "W"}, *mm_out[1] = {"y"};
    Onnx__NodeProto mm;
    onnx__node_proto__init(&mm);
    mm.op_type = "MatMul", mm.name = "mm", mm.n_input = 2, mm.input = mm_in, mm.n_output = 1, mm.output = mm_out;
    Onnx__NodeProto *nodes[1] = {&mm};
    Onnx__ValueInfoProto *ins[1] = {&xv}, *outs[1] = {&yv};
    Onnx__TensorProto *inits[1] = {&w};
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = "weights_once", g.n_node = 1, g.node = nodes, g.n_input = 1, g.input = ins, g.n_output = 1;
    g.output = outs, g.n_initializer = 1, g.initializer = inits;
    size_t n;
    uint8_t *buf = test_pack_model(&g, NULL, &n);
    snprintf(session_model, sizeof session_model, "/tmp/tsopt-weights-once-%d.onnx", (int)getpid());
    FILE *f = fopen(session_model, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
    free(buf);
}

static void remove_matmul_model(void) { remove(session_model); }

TestSuite(weights_once_session, .init = write_matmul_model, .fini = remove_matmul_model);

Test(weights_once_session, default_plan_is_kept)
{
    ts_error err = {0};
    ts_session *s = NULL;
    cr_assert_eq(ts_session_open(session_model, 1, &s, &err), TS_OK, "%s", err.msg);
    const ts_graph *g = ts_session_graph(s);
    int64_t def = g->values[g->inputs[0]].shape.dims[0];
    int wv = -1;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].constant && !strcmp(g->values[v].name, "W")) wv = v;
    cr_assert_geq(wv, 0);
    /* the default size first, then more other sizes than the session keeps
     * plans for, then the default again */
    const int64_t sizes[] = {def, def + 1, def + 2, def + 3, def + 4, def + 5, def, def + 1, def};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        ts_shape sh = ts_shape_make(2, (int64_t[]){sizes[k], 3});
        ts_tensor *x = ts_tensor_new(TS_F32, &sh, &err), *y = NULL;
        float *xd = x->data;
        for (int64_t i = 0; i < sizes[k] * 3; i++) xd[i] = (float)(i % 4) - 1;
        cr_assert_eq(ts_session_run(s, &x, &y, &err), TS_OK, "N=%lld: %s", (long long)sizes[k], err.msg);
        const float *yd = y->data;
        for (int64_t r = 0; r < sizes[k]; r++) /* by hand: row r of x times W */
            for (int j = 0; j < 2; j++) {
                const float *xr = xd + r * 3;
                float want = xr[0] * (float)(1 + j) + xr[1] * (float)(3 + j) + xr[2] * (float)(5 + j);
                cr_assert_float_eq(yd[r * 2 + j], want, 1e-5, "N=%lld y[%lld][%d]", (long long)sizes[k],
                                   (long long)r, j);
            }
        ts_tensor_unref(x);
        ts_tensor_unref(y);
        if (!k) cr_assert_null(g->values[wv].constant->data, "the default plan packed W: the graph's copy is freed");
    }
    ts_session_free(s);
}

/* ---- large weights pack in slices (xweights_pack): a weight of at least
 * XWEIGHTS_SLICE_MIN_BYTES that the plan releases is packed a slice at a
 * time, giving the original's pages back as it goes.  The products must
 * match the reference interpreter exactly as the whole-weight packing does:
 * Gemm with transB (sliced along N, the original's rows), MatMul (along K)
 * and a padded N (2000 is no multiple of oneDNN's 64-column blocks: packed
 * whole). */
static void check_large_product(const char *op, const char *x, const char *w, bool trans_b, bool with_bias,
                                double alpha)
{
    uint64_t rng = 21;
    ts_graph *g = ts_graph_new("t", 17);
    int xv = xt_input(g, "x", x);
    int wv = xt_const_random(g, w, -0.05, 0.05, &rng);
    cr_assert_geq(g->values[wv].constant->nbytes, XWEIGHTS_SLICE_MIN_BYTES, "large enough to be sliced");
    /* alpha != 1 is folded into the weight in place before it is sliced */
    ts_attr at[2] = {ts_attr_int("transB", 1), ts_attr_float("alpha", alpha)};
    int nat = (trans_b ? 1 : 0) + (alpha != 1.0);
    if (!trans_b) at[0] = at[1];
    int ins[3] = {xv, wv, -1}, nin = 2;
    if (with_bias) {
        int64_t nout = g->values[wv].shape.dims[trans_b ? 0 : 1];
        char b[32];
        snprintf(b, sizeof b, "%lld", (long long)nout);
        ins[nin++] = xt_const_random(g, b, -0.5, 0.5, &rng);
    }
    xt_output(g, xt_node(g, op, ins, nin, nat ? at : NULL, nat));
    ts_plan_opts o = {.release_packed_weights = true};
    ts_plan *p = xt_plan_check(g, &o, 9, -1, 1, 1e-4, XT_TOL_MAX);
    cr_assert_null(g->values[wv].constant->data, "%s: the original is released", op);
    ts_plan_free(p);
    ts_graph_free(g);
}

Test(weights_once, gemm_weight_packed_in_slices) { check_large_product("Gemm", "3x4096", "2048x4096", true, true, 1); }
Test(weights_once, scaled_gemm_weight_packed_in_slices)
{
    check_large_product("Gemm", "3x4096", "2048x4096", true, true, 0.5);
}
Test(weights_once, matmul_weight_packed_in_slices)
{
    check_large_product("MatMul", "64x4096", "4096x2048", false, false, 1); /* rows enough for oneDNN (not vec.gemv) */
}
Test(weights_once, padded_weight_packed_whole) { check_large_product("Gemm", "2x4200", "2000x4200", true, false, 1); }

/* A squeeze-excite block's FC weights are read by nodes its step (vec.se)
 * claims after its pool: they go when that step is made, not at the plan's
 * end (mobilenet_v3_large held 5.8 MiB of them beside the packed weights at
 * its peak).  Then a conv packs its own. */
Test(weights_once, fused_nodes_constants_go_with_their_step)
{
    uint64_t rng = 23;
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x8x10x10");
    int b = xt_node(g, "Conv", (int[]){x, xt_const_random(g, "72x8x1x1", -0.5, 0.5, &rng)}, 2, NULL, 0);
    int fc1 = xt_const_random(g, "18x72x1x1", -1, 1, &rng), fc2 = xt_const_random(g, "72x18x1x1", -1, 1, &rng);
    int y = xt_node(g, "GlobalAveragePool", &b, 1, NULL, 0);
    y = xt_node(g, "Conv", (int[]){y, fc1, xt_const_random(g, "18", -0.5, 0.5, &rng)}, 3, NULL, 0);
    y = xt_node(g, "Relu", &y, 1, NULL, 0);
    y = xt_node(g, "Conv", (int[]){y, fc2, xt_const_random(g, "72", -0.5, 0.5, &rng)}, 3, NULL, 0);
    y = xt_node(g, "HardSigmoid", &y, 1, (ts_attr[]){ts_attr_float("alpha", 1.0f / 6), ts_attr_float("beta", 0.5f)},
                2);
    y = xt_node(g, "Mul", (int[]){b, y}, 2, NULL, 0);
    xt_output(g, xt_node(g, "Conv", (int[]){y, xt_const_random(g, "16x72x1x1", -0.5, 0.5, &rng)}, 2, NULL, 0));
    ts_plan_opts o = {.release_packed_weights = true};
    ts_plan *p = xt_plan_check(g, &o, 5, -1, 1, 1e-4, XT_TOL_MAX);
    cr_assert_eq(xt_steps_of(p, "vec.se"), 1, "the block is one vec.se step");
    cr_assert_null(constant(g, fc1)->data);
    cr_assert_null(constant(g, fc2)->data);
    cr_assert_eq(((const xplan *)p)->released_late, 0, "%zu bytes waited for the plan's end",
                 ((const xplan *)p)->released_late);
    ts_plan_free(p);
    ts_graph_free(g);
}
