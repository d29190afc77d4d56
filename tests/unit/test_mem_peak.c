/* Weights held once, end to end (issue 12): loading a model from its file
 * (src/onnx/raw_spans.c: the initializers' raw_data goes from the file into
 * the tensors, not through protobuf-c's message), planning it with
 * release_packed_weights (the packed copies replace the originals; a large
 * one is packed in slices, weights_once.c) and a session on it (the file is
 * kept open, not copied) each peak at about the weights once.  Peaks are
 * VmHWM, reset through /proc/self/clear_refs; criterion runs every test in
 * a process of its own.  The bounds fail when the weights are in memory
 * twice at any moment (the old loader peaked at twice the file, packing a
 * weight beside its original at twice that weight).
 *
 * The model: y = 2 * Gemm(x, W, b, transB) with x [batch, K] (batch
 * symbolic), W [N, K], b [N]; the scalar 2 is a 4-byte initializer (left in
 * the message), b and W are cut.  Every value is a multiple of 1/8 and every
 * sum stays far below 2^21, so float arithmetic is exact in any order and
 * the outputs are compared with what the formulas give, computed here. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "exec/plan_internal.h"
#include "onnx/proto.h"
#include "onnx_pack.h"
#include "tsopt.h"
#include "util/mem_check.h"

static double wval(int64_t n, int64_t k) { return (double)((n * 7 + k * 3) % 9 - 4) / 8; }
static double bval(int64_t n) { return (double)(n % 5) / 8; }
static double xval(int64_t r, int64_t k) { return (double)((r + k) % 3 - 1); }

static double want_y(int64_t r, int64_t n, int64_t K)
{
    double s = bval(n);
    for (int64_t k = 0; k < K; k++) s += xval(r, k) * wval(n, k);
    return 2 * s;
}

/* The model's bytes (malloc'ed, *size), W [N, K]. */
static uint8_t *gemm_model(int64_t N, int64_t K, size_t *size)
{
    float *w = malloc(sizeof(float) * (size_t)(N * K)), *b = malloc(sizeof(float) * (size_t)N), two = 2;
    cr_assert(w && b);
    for (int64_t n = 0; n < N; n++) {
        b[n] = (float)bval(n);
        for (int64_t k = 0; k < K; k++) w[n * K + k] = (float)wval(n, k);
    }
    Onnx__TensorShapeProto__Dimension xd[2], yd[2], *xdp[2] = {&xd[0], &xd[1]}, *ydp[2] = {&yd[0], &yd[1]};
    Onnx__TensorShapeProto xs, ys;
    Onnx__TypeProto__Tensor xt, yt;
    Onnx__TypeProto xtp, ytp;
    Onnx__ValueInfoProto xv, yv;
    const int64_t cols[2] = {K, N};
    Onnx__TensorShapeProto__Dimension *dims[2] = {xd, yd}, **dps[2] = {xdp, ydp};
    Onnx__TensorShapeProto *shapes[2] = {&xs, &ys};
    Onnx__TypeProto__Tensor *tts[2] = {&xt, &yt};
    Onnx__TypeProto *tps[2] = {&xtp, &ytp};
    Onnx__ValueInfoProto *vis[2] = {&xv, &yv};
    for (int k = 0; k < 2; k++) {
        onnx__tensor_shape_proto__dimension__init(&dims[k][0]);
        onnx__tensor_shape_proto__dimension__init(&dims[k][1]);
        dims[k][0].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        dims[k][0].dim_param = "batch";
        dims[k][1].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims[k][1].dim_value = cols[k];
        onnx__tensor_shape_proto__init(shapes[k]);
        shapes[k]->n_dim = 2, shapes[k]->dim = dps[k];
        onnx__type_proto__tensor__init(tts[k]);
        tts[k]->has_elem_type = 1, tts[k]->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, tts[k]->shape = shapes[k];
        onnx__type_proto__init(tps[k]);
        tps[k]->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, tps[k]->tensor_type = tts[k];
        onnx__value_info_proto__init(vis[k]);
        vis[k]->name = k ? "y" : "x", vis[k]->type = tps[k];
    }
    Onnx__TensorProto ti[3];
    int64_t wd[2] = {N, K}, bd[1] = {N};
    const char *names[3] = {"two", "b", "W"};
    const void *data[3] = {&two, b, w};
    size_t nbytes[3] = {4, sizeof(float) * (size_t)N, sizeof(float) * (size_t)(N * K)};
    size_t ndims[3] = {0, 1, 2};
    int64_t *dimv[3] = {NULL, bd, wd};
    Onnx__TensorProto *inits[3];
    for (int i = 0; i < 3; i++) {
        onnx__tensor_proto__init(&ti[i]);
        ti[i].name = (char *)names[i], ti[i].has_data_type = 1, ti[i].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        ti[i].n_dims = ndims[i], ti[i].dims = dimv[i];
        ti[i].has_raw_data = 1, ti[i].raw_data.len = nbytes[i], ti[i].raw_data.data = (uint8_t *)data[i];
        ti[i].doc_string = "kept in the message"; /* a field after raw_data, as some exporters write */
        inits[i] = &ti[i];
    }
    char *gin[3] = {"x", "W", "b"}, *gout[1] = {"g"}, *min[2] = {"g", "two"}, *mout[1] = {"y"};
    Onnx__AttributeProto tb;
    onnx__attribute_proto__init(&tb);
    tb.name = "transB", tb.has_type = 1, tb.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, tb.has_i = 1, tb.i = 1;
    Onnx__AttributeProto *tbs[1] = {&tb};
    Onnx__NodeProto gemm, mul;
    onnx__node_proto__init(&gemm);
    gemm.op_type = "Gemm", gemm.name = "fc", gemm.n_input = 3, gemm.input = gin, gemm.n_output = 1;
    gemm.output = gout, gemm.n_attribute = 1, gemm.attribute = tbs;
    onnx__node_proto__init(&mul);
    mul.op_type = "Mul", mul.name = "twice", mul.n_input = 2, mul.input = min, mul.n_output = 1, mul.output = mout;
    Onnx__NodeProto *nodes[2] = {&gemm, &mul};
    Onnx__ValueInfoProto *ins[1] = {&xv}, *outs[1] = {&yv};
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = "mem_peak", g.n_node = 2, g.node = nodes, g.n_input = 1, g.input = ins, g.n_output = 1;
    g.output = outs, g.n_initializer = 3, g.initializer = inits;
    uint8_t *buf = test_pack_model(&g, "test_mem_peak", size);
    free(w);
    free(b);
    return buf;
}

static char path[64];

static void write_file(const uint8_t *buf, size_t size)
{
    snprintf(path, sizeof path, "/tmp/tsopt_mem_peak_%d.onnx", (int)getpid());
    FILE *f = fopen(path, "wb");
    cr_assert(f && fwrite(buf, 1, size, f) == size);
    fclose(f);
}

static void write_model(int64_t N, int64_t K)
{
    size_t size;
    uint8_t *buf = gemm_model(N, K, &size);
    write_file(buf, size);
    free(buf);
}

/* VmRSS now, after resetting VmHWM to it. */
static size_t reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    cr_assert_not_null(f, "cannot reset the peak through /proc/self/clear_refs");
    fputs("5", f);
    fclose(f);
    return xmem_rss();
}

/* Peaks are only meaningful without a sanitizer (ASan's quarantine holds
 * freed memory back). */
#if defined(__SANITIZE_ADDRESS__)
#define PEAKS_MEAN_SOMETHING 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PEAKS_MEAN_SOMETHING 0
#endif
#endif
#ifndef PEAKS_MEAN_SOMETHING
#define PEAKS_MEAN_SOMETHING 1
#endif

static void check_peak(size_t base, size_t weights, double at_most, const char *when)
{
    size_t peak = xmem_peak_rss(), grew = peak > base ? peak - base : 0;
    cr_log_info("%s: peak grew by %.1f MiB for %.1f MiB of weights", when, grew / 1048576.0, weights / 1048576.0);
    if (PEAKS_MEAN_SOMETHING)
        cr_assert_leq((double)grew, at_most * (double)weights, "%s: the peak grew by %.1f MiB for %.1f MiB of weights "
                      "(bound %.2fx)", when, grew / 1048576.0, weights / 1048576.0, at_most);
}

static ts_tensor *input(int64_t rows, int64_t K)
{
    ts_error e = {0};
    ts_shape s = ts_shape_make(2, (int64_t[]){rows, K});
    ts_tensor *x = ts_tensor_new(TS_F32, &s, &e);
    cr_assert_not_null(x, "%s", e.msg);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < K; k++) ((float *)x->data)[r * K + k] = (float)xval(r, k);
    return x;
}

static void check_output(const ts_tensor *y, int64_t rows, int64_t N, int64_t K)
{
    cr_assert_eq(ts_tensor_numel(y), rows * N);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t n = 0; n < N; n++)
            cr_assert_float_eq(((const float *)y->data)[r * N + n], want_y(r, n, K), 1e-6, "y[%lld][%lld]",
                               (long long)r, (long long)n);
}

static void run_plan(ts_graph *g, int64_t N, int64_t K)
{
    ts_error e = {0};
    ts_plan_opts o = {.release_packed_weights = true};
    ts_plan *p = NULL;
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    int64_t rows = g->values[g->inputs[0]].shape.dims[0];
    ts_tensor *x = input(rows, K), *y = ts_tensor_new(TS_F32, &g->values[g->outputs[0]].shape, &e);
    cr_assert_eq(ts_plan_run(p, &x, &y, &e), TS_OK, "%s", e.msg);
    check_output(y, rows, N, K);
    ts_tensor_unref(x);
    ts_tensor_unref(y);
    ts_plan_free(p);
}

static void remove_file(void) { remove(path); }

TestSuite(mem_peak, .fini = remove_file);

/* 64 MiB of W: the load peaks at W (not the file plus the message), the
 * plan at W plus a slice (not the original beside its packed copy). */
Test(mem_peak, load_and_plan_hold_weights_once)
{
    const int64_t N = 4096, K = 4096;
    const size_t wbytes = sizeof(float) * (size_t)(N * K);
    cr_assert_geq(wbytes, 2 * XWEIGHTS_SLICE_MIN_BYTES);
    write_model(N, K);
    ts_error e = {0};
    ts_graph *g = NULL;
    size_t base = reset_peak();
    cr_assert_eq(ts_onnx_load(path, NULL, 0, &g, &e), TS_OK, "%s", e.msg);
    check_peak(base, wbytes, 1.2, "loading");
    base = reset_peak();
    run_plan(g, N, K);
    check_peak(base, wbytes, 0.5, "planning and running (W is in memory already)");
    ts_graph_free(g);
}

/* The same model from its file, from memory, and with every initializer
 * left in the message (all below the cut size) gives the same tensors. */
Test(mem_peak, file_and_buffer_load_the_same)
{
    const int64_t N = 200, K = 300;
    size_t size;
    uint8_t *buf = gemm_model(N, K, &size);
    write_file(buf, size);
    ts_error e = {0};
    ts_graph *a = NULL, *b = NULL;
    cr_assert_eq(ts_onnx_load(path, NULL, 0, &a, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_onnx_load_buffer(buf, size, "/tmp", NULL, 0, &b, &e), TS_OK, "%s", e.msg);
    const char *names[3] = {"two", "b", "W"};
    for (int i = 0; i < 3; i++) {
        int va = ts_graph_find_value(a, names[i]), vb = ts_graph_find_value(b, names[i]);
        cr_assert(va >= 0 && vb >= 0 && a->values[va].constant && b->values[vb].constant, "%s", names[i]);
        const ts_tensor *ta = a->values[va].constant, *tb = b->values[vb].constant;
        cr_assert_eq(ta->nbytes, tb->nbytes);
        cr_assert(!memcmp(ta->data, tb->data, ta->nbytes), "%s differs between file and buffer", names[i]);
        const float *d = ta->data;
        for (int64_t j = 0; j < (int64_t)(ta->nbytes / 4); j++) {
            double want = i == 0 ? 2 : i == 1 ? bval(j) : wval(j / K, j % K);
            cr_assert_float_eq(d[j], want, 0, "%s[%lld]", names[i], (long long)j);
        }
    }
    run_plan(a, N, K);
    run_plan(b, N, K);
    ts_graph_free(a);
    ts_graph_free(b);
    /* tiny: W [3, 5] is 60 bytes, nothing is cut */
    ts_graph *c = NULL;
    free(buf);
    buf = gemm_model(3, 5, &size);
    write_file(buf, size);
    cr_assert_eq(ts_onnx_load(path, NULL, 0, &c, &e), TS_OK, "%s", e.msg);
    run_plan(c, 3, 5);
    ts_graph_free(c);
    free(buf);
}

/* A file cut short anywhere (inside W's bytes, inside the graph, in the
 * headers) is one clear error, never a crash or a half-loaded graph. */
Test(mem_peak, truncated_file_is_one_error)
{
    size_t size;
    uint8_t *buf = gemm_model(40, 50, &size);
    for (size_t cut = 1; cut < size; cut += cut < 64 ? 1 : 97) {
        write_file(buf, cut);
        ts_error e = {0};
        ts_graph *g = NULL;
        ts_status st = ts_onnx_load(path, NULL, 0, &g, &e);
        cr_assert_neq(st, TS_OK, "%zu of %zu bytes loaded", cut, size);
        cr_assert_null(g);
        cr_assert(strstr(e.msg, path) && !strchr(e.msg, '\n'), "cut at %zu: '%s'", cut, e.msg);
    }
    free(buf);
}

/* raw_data whose size does not match the dims: the same message as before
 * the bytes were cut from the message. */
Test(mem_peak, raw_data_of_the_wrong_size)
{
    size_t size;
    uint8_t *buf = gemm_model(40, 50, &size);
    /* W's dims are {40, 50}: make them {40, 51} in place (same varint size) */
    size_t hits = 0;
    for (size_t i = 0; i + 3 < size; i++)
        if (buf[i] == 0x08 && buf[i + 1] == 40 && buf[i + 2] == 0x08 && buf[i + 3] == 50) {
            buf[i + 3] = 51;
            hits++;
        }
    cr_assert_eq(hits, 1);
    write_file(buf, size);
    ts_error e = {0};
    ts_graph *g = NULL;
    cr_assert_eq(ts_onnx_load(path, NULL, 0, &g, &e), TS_ERR_PARSE);
    cr_assert(strstr(e.msg, "initializer 'W' has 8000 bytes of raw data, expected 8160"), "%s", e.msg);
    e = (ts_error){0};
    cr_assert_eq(ts_onnx_load_buffer(buf, size, "/tmp", NULL, 0, &g, &e), TS_ERR_PARSE);
    cr_assert(strstr(e.msg, "initializer 'W' has 8000 bytes of raw data, expected 8160"), "%s", e.msg);
    free(buf);
}

/* A session on a model with a symbolic batch keeps the file open, not a
 * copy of it; it loads other batch sizes from the file, even once the file
 * is gone from its folder. */
Test(mem_peak, session_keeps_no_copy_of_the_file)
{
    const int64_t N = 2048, K = 4096;
    const size_t wbytes = sizeof(float) * (size_t)(N * K);
    write_model(N, K);
    ts_error e = {0};
    ts_session *s = NULL;
    size_t base = reset_peak();
    cr_assert_eq(ts_session_open(path, 1, &s, &e), TS_OK, "%s", e.msg);
    check_peak(base, wbytes, 1.2, "opening the session");
    remove(path);
    const int64_t batches[] = {1, 3};
    for (int i = 0; i < 2; i++) {
        ts_tensor *x = input(batches[i], K), *y = NULL;
        cr_assert_eq(ts_session_run(s, &x, &y, &e), TS_OK, "batch %lld: %s", (long long)batches[i], e.msg);
        check_output(y, batches[i], N, K);
        ts_tensor_unref(x);
        ts_tensor_unref(y);
    }
    ts_session_free(s);
}
