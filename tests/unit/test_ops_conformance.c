/* Operators and element types added for ONNX's backend suite
 * (docs/conformance.md): hand-computed values through the reference
 * interpreter, float16/bfloat16 rounding, the error messages of bad
 * attributes, and a session loading a model whose shapes depend on the
 * values of its inputs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "ops/op.h"

#define NV(...) ((const double[]){__VA_ARGS__}), (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double))

static ts_shape shp(const char *dims)
{
    ts_shape s = {0};
    ts_error e = {0};
    if (*dims) cr_assert_eq(ts_shape_parse(dims, &s, &e), TS_OK, "%s", e.msg);
    return s;
}

static ts_tensor *vals(ts_dtype dt, const char *dims, const double *v, int n)
{
    ts_error e = {0};
    ts_shape s = shp(dims);
    ts_tensor *t = ts_tensor_new(dt, &s, &e);
    cr_assert(t, "%s", e.msg);
    cr_assert_eq(ts_tensor_numel(t), n);
    for (int i = 0; i < n; i++) ts_tensor_set_f64(t, i, v[i]);
    return t;
}

static int cst(ts_graph *g, const char *name, ts_dtype dt, const char *dims, const double *v, int n)
{
    ts_error e = {0};
    ts_tensor *t = vals(dt, dims, v, n);
    int id = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(id >= 0, "%s", e.msg);
    return id;
}

static int node(ts_graph *g, const char *op, const int *ins, int nin, const ts_attr *a, int na, int nout, int *outs)
{
    ts_error e = {0};
    int n = ts_graph_add_node(g, op, NULL, ins, nin, a, na, nout, NULL, outs, &e);
    cr_assert(n >= 0, "%s", e.msg);
    for (int i = 0; i < nout; i++) cr_assert_eq(ts_graph_add_output(g, outs[i], &e), TS_OK);
    return n;
}

static void node_fails(ts_graph *g, const char *op, const int *ins, int nin, const ts_attr *a, int na, int nout,
                       const char *want)
{
    ts_error e = {0};
    int outs[8];
    cr_assert_lt(ts_graph_add_node(g, op, "bad", ins, nin, a, na, nout, NULL, outs, &e), 0, "expected: %s", want);
    cr_assert(strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
    cr_assert(strstr(e.msg, "bad"), "message '%s' does not name the node", e.msg);
}

/* Runs a graph without inputs (all constants) in the f32 domain. */
static void run(ts_graph *g, ts_tensor **out)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_validate(g, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, NULL, out, &e), TS_OK, "%s", e.msg);
}

static void expect(ts_tensor *t, const char *dims, const double *v, int n)
{
    char a[160], b[160];
    ts_shape s = shp(dims);
    cr_assert(ts_shape_eq(&t->shape, &s), "shape %s, expected %s", ts_shape_str(&t->shape, a, sizeof a),
              ts_shape_str(&s, b, sizeof b));
    cr_assert_eq(ts_tensor_numel(t), n, "wrong element count in expectation");
    for (int i = 0; i < n; i++)
        cr_assert(isinf(v[i]) ? ts_tensor_get_f64(t, i) == v[i] : fabs(ts_tensor_get_f64(t, i) - v[i]) <= 1e-5 + 1e-5 * fabs(v[i]),
                  "element %d: %.9g, expected %.9g", i,
                  ts_tensor_get_f64(t, i), v[i]);
    ts_tensor_unref(t);
}

/* One node on constant inputs, its first output checked. */
static void check(ts_graph *g, const char *dims, const double *v, int n)
{
    ts_tensor *out[4] = {0};
    run(g, out);
    expect(out[0], dims, v, n);
    for (int i = 1; i < g->noutputs; i++) ts_tensor_unref(out[i]);
    ts_graph_free(g);
}

/* ------------------------------------------------------------ dtypes */

Test(dtypes, float16_rounding)
{
    cr_assert_eq(ts_dtype_size(TS_F16), 2);
    cr_assert_str_eq(ts_dtype_name(TS_BF16), "bfloat16");
    cr_assert(ts_dtype_is_float(TS_F16) && ts_dtype_is_float(TS_BF16) && !ts_dtype_is_float(TS_U16));
    cr_assert_eq(ts_dtype_round(TS_F16, 1.0 / 3), 0.333251953125); /* 1365 / 4096 */
    cr_assert_eq(ts_dtype_round(TS_BF16, 1.0 / 3), 0.333984375);   /* 171 / 512 */
    cr_assert_eq(ts_dtype_round(TS_F16, 0.1), 0.0999755859375);
    cr_assert_eq(ts_dtype_round(TS_F16, 65519), 65504);              /* largest finite */
    cr_assert(isinf(ts_dtype_round(TS_F16, 65520)));                 /* the tie goes to the even infinity */
    cr_assert_eq(ts_dtype_round(TS_F16, ldexp(1, -24)), ldexp(1, -24)); /* smallest subnormal */
    cr_assert_eq(ts_dtype_round(TS_F16, ldexp(1, -25)), 0);           /* half of it: ties to even zero */
    cr_assert_eq(ts_dtype_round(TS_F16, ldexp(3, -26)), ldexp(1, -24));
    cr_assert_eq(ts_dtype_round(TS_F16, -2.5), -2.5);
    cr_assert(isnan(ts_dtype_round(TS_F16, NAN)));
    /* storage: the 16 bits as IEEE half */
    ts_tensor *t = vals(TS_F16, "3", NV(1, -2, 65504));
    const uint16_t *h = t->data;
    cr_assert_eq(h[0], 0x3c00);
    cr_assert_eq(h[1], 0xc000);
    cr_assert_eq(h[2], 0x7bff);
    ts_tensor_unref(t);
    t = vals(TS_U64, "1", NV(4e18));
    cr_assert_eq(((const uint64_t *)t->data)[0], 4000000000000000000ull);
    ts_tensor_unref(t);
}

/* Cast float32 -> float16 rounds once; float16 arithmetic rounds at each
 * node's output. */
Test(dtypes, cast_and_compute_in_float16)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = cst(g, "x", TS_F32, "3", NV(1.0 / 3, 0.1, 70000));
    ts_attr to = ts_attr_int("to", 10);
    int h, y;
    node(g, "Cast", &x, 1, &to, 1, 1, &h);
    int ab[2] = {h, h};
    ts_error e = {0};
    cr_assert(ts_graph_add_node(g, "Add", NULL, ab, 2, NULL, 0, 1, NULL, &y, &e) >= 0, "%s", e.msg);
    cr_assert_eq(ts_graph_add_output(g, y, &e), TS_OK);
    cr_assert_eq(g->values[h].dtype, TS_F16);
    ts_tensor *out[2];
    run(g, out); /* in the f32 domain's storage, rounded to float16 */
    expect(out[0], "3", NV(0.333251953125, 0.0999755859375, INFINITY));
    expect(out[1], "3", NV(0.66650390625, 0.199951171875, INFINITY));
    ts_graph_free(g);
}

Test(dtypes, castlike_takes_the_second_inputs_type)
{
    ts_graph *g = ts_graph_new("t", 15);
    int in[2] = {cst(g, "x", TS_F64, "2", NV(1.5, -3)), cst(g, "like", TS_I32, "1", NV(0))};
    int y;
    node(g, "CastLike", in, 2, NULL, 0, 1, &y);
    cr_assert_eq(g->values[y].dtype, TS_I32);
    check(g, "2", NV(1, -3));
}

/* ---------------------------------------------------------- operators */

Test(ops, range)
{
    ts_graph *g = ts_graph_new("t", 11);
    int in[3] = {cst(g, "s", TS_F32, "", NV(1)), cst(g, "l", TS_F32, "", NV(2.1)), cst(g, "d", TS_F32, "", NV(0.5))};
    int y;
    node(g, "Range", in, 3, NULL, 0, 1, &y);
    check(g, "3", NV(1, 1.5, 2));
    g = ts_graph_new("t", 11);
    int jn[3] = {cst(g, "s", TS_I32, "", NV(10)), cst(g, "l", TS_I32, "", NV(6)), cst(g, "d", TS_I32, "", NV(-3))};
    node(g, "Range", jn, 3, NULL, 0, 1, &y);
    check(g, "2", NV(10, 7));
}

Test(ops, range_needs_its_values)
{
    ts_graph *g = ts_graph_new("t", 11);
    ts_error e = {0};
    ts_shape sc = ts_shape_make(0, NULL);
    int in[3] = {ts_graph_add_input(g, "s", TS_F32, &sc, &e), cst(g, "l", TS_F32, "", NV(2)), cst(g, "d", TS_F32, "", NV(1))};
    node_fails(g, "Range", in, 3, NULL, 0, 1, "must be a constant");
    ts_graph_free(g);
}

Test(ops, topk)
{
    ts_graph *g = ts_graph_new("t", 11);
    int in[2] = {cst(g, "x", TS_F32, "2x4", NV(3, 1, 3, 2, 0, 5, -1, 5)), cst(g, "k", TS_I64, "1", NV(2))};
    int o[2];
    node(g, "TopK", in, 2, NULL, 0, 2, o);
    ts_tensor *out[2];
    run(g, out);
    expect(out[0], "2x2", NV(3, 3, 5, 5));
    expect(out[1], "2x2", NV(0, 2, 1, 3)); /* ties: the lower index first */
    ts_graph_free(g);
    g = ts_graph_new("t", 11);
    int jn[2] = {cst(g, "x", TS_F32, "2x3", NV(3, 1, 2, 0, 5, -1)), cst(g, "k", TS_I64, "1", NV(1))};
    ts_attr a[] = {ts_attr_int("axis", 0), ts_attr_int("largest", 0)};
    node(g, "TopK", jn, 2, a, 2, 2, o);
    check(g, "1x3", NV(0, 1, -1));
}

Test(ops, onehot)
{
    ts_graph *g = ts_graph_new("t", 11);
    int in[3] = {cst(g, "i", TS_I64, "3", NV(0, -1, 7)), cst(g, "d", TS_F32, "1", NV(3)),
                 cst(g, "v", TS_F32, "2", NV(-1, 4))};
    int y;
    node(g, "OneHot", in, 3, NULL, 0, 1, &y);
    check(g, "3x3", NV(4, -1, -1, -1, -1, 4, -1, -1, -1)); /* -1 is depth - 1; 7 is out of range */
    g = ts_graph_new("t", 11);
    int jn[3] = {cst(g, "i", TS_I64, "2", NV(1, 0)), cst(g, "d", TS_I64, "", NV(2)), cst(g, "v", TS_I32, "2", NV(0, 1))};
    ts_attr a = ts_attr_int("axis", 0);
    node(g, "OneHot", jn, 3, &a, 1, 1, &y);
    check(g, "2x2", NV(0, 1, 1, 0));
}

Test(ops, non_max_suppression)
{
    ts_graph *g = ts_graph_new("t", 11);
    /* box 1 overlaps box 0 with IoU 0.81 (> 0.5): suppressed; box 2 is apart */
    int in[5] = {cst(g, "b", TS_F32, "1x3x4", NV(0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, 10, 1, 11)),
                 cst(g, "s", TS_F32, "1x1x3", NV(0.9, 0.95, 0.3)), cst(g, "m", TS_I64, "1", NV(3)),
                 cst(g, "iou", TS_F32, "1", NV(0.5)), cst(g, "thr", TS_F32, "1", NV(0.0))};
    int y;
    node(g, "NonMaxSuppression", in, 5, NULL, 0, 1, &y);
    check(g, "2x3", NV(0, 0, 1, 0, 0, 2));
}

Test(ops, grid_sample)
{
    /* 2x2 image, bilinear, align_corners: (0, 0) is the centre, (-1, -1) the top-left pixel */
    ts_graph *g = ts_graph_new("t", 16);
    int in[2] = {cst(g, "x", TS_F32, "1x1x2x2", NV(1, 2, 3, 4)), cst(g, "g", TS_F32, "1x1x3x2", NV(0, 0, -1, -1, 1, 0))};
    ts_attr a = ts_attr_int("align_corners", 1);
    int y;
    node(g, "GridSample", in, 2, &a, 1, 1, &y);
    check(g, "1x1x1x3", NV(2.5, 1, 3));
    /* without align_corners -1 is the outer edge: half a pixel outside reads half zeros */
    g = ts_graph_new("t", 16);
    int jn[2] = {cst(g, "x", TS_F32, "1x1x2x2", NV(1, 2, 3, 4)), cst(g, "g", TS_F32, "1x1x1x2", NV(-1, -1))};
    node(g, "GridSample", jn, 2, NULL, 0, 1, &y);
    check(g, "1x1x1x1", NV(0.25));
    g = ts_graph_new("t", 16);
    int kn[2] = {cst(g, "x", TS_F32, "1x1x2x2", NV(1, 2, 3, 4)), cst(g, "g", TS_F32, "1x1x1x2", NV(-1, -1))};
    ts_attr b = ts_attr_string("padding_mode", "border");
    node(g, "GridSample", kn, 2, &b, 1, 1, &y);
    check(g, "1x1x1x1", NV(1));
    ts_attr m = ts_attr_string("mode", "cubic");
    g = ts_graph_new("t", 16);
    int ln[2] = {cst(g, "x", TS_F32, "1x1x2x2", NV(1, 2, 3, 4)), cst(g, "g", TS_F32, "1x1x1x2", NV(-1, -1))};
    node_fails(g, "GridSample", ln, 2, &m, 1, 1, "expected bilinear, nearest or bicubic");
    ts_graph_free(g);
}

Test(ops, scatter_and_gather_nd)
{
    ts_graph *g = ts_graph_new("t", 16);
    int in[3] = {cst(g, "x", TS_F32, "2x3", NV(0, 0, 0, 0, 0, 0)), cst(g, "i", TS_I64, "1x2", NV(2, -3)),
                 cst(g, "u", TS_F32, "1x2", NV(7, 8))};
    ts_attr a = ts_attr_int("axis", 1);
    int y;
    node(g, "ScatterElements", in, 3, &a, 1, 1, &y);
    check(g, "2x3", NV(8, 0, 7, 0, 0, 0));
    g = ts_graph_new("t", 16);
    int jn[3] = {cst(g, "x", TS_F32, "4", NV(1, 2, 3, 4)), cst(g, "i", TS_I64, "3x1", NV(1, 1, 3)),
                 cst(g, "u", TS_F32, "3", NV(10, 20, 30))};
    ts_attr r = ts_attr_string("reduction", "add");
    node(g, "ScatterND", jn, 3, &r, 1, 1, &y);
    check(g, "4", NV(1, 32, 3, 34));
    g = ts_graph_new("t", 13);
    int kn[2] = {cst(g, "x", TS_F32, "2x2", NV(0, 1, 2, 3)), cst(g, "i", TS_I64, "2x1", NV(1, 0))};
    node(g, "GatherND", kn, 2, NULL, 0, 1, &y);
    check(g, "2x2", NV(2, 3, 0, 1));
    g = ts_graph_new("t", 13);
    int ln[2] = {cst(g, "x", TS_F32, "2x2x2", NV(0, 1, 2, 3, 4, 5, 6, 7)), cst(g, "i", TS_I64, "2x1", NV(1, 0))};
    ts_attr b = ts_attr_int("batch_dims", 1);
    node(g, "GatherND", ln, 2, &b, 1, 1, &y);
    check(g, "2x2", NV(2, 3, 4, 5));
}

Test(ops, normalizations)
{
    ts_graph *g = ts_graph_new("t", 13);
    /* channel 0: mean 2, std 1, scale 2; channel 1: mean 7, std 2, bias 7 */
    int in[3] = {cst(g, "x", TS_F32, "1x2x2", NV(1, 3, 5, 9)), cst(g, "s", TS_F32, "2", NV(2, 1)),
                 cst(g, "b", TS_F32, "2", NV(0, 7))};
    ts_attr eps = ts_attr_float("epsilon", 0);
    int y;
    node(g, "InstanceNormalization", in, 3, &eps, 1, 1, &y);
    check(g, "1x2x2", NV(-2, 2, 6, 8));
    g = ts_graph_new("t", 13);
    int x = cst(g, "x", TS_F32, "1x2x1x1", NV(1, 3));
    ts_attr lrn[] = {ts_attr_int("size", 3), ts_attr_float("alpha", 3), ts_attr_float("beta", 1), ts_attr_float("bias", 1)};
    node(g, "LRN", &x, 1, lrn, 4, 1, &y); /* both see the sum of squares 10: x / (1 + 3 / 3 * 10) */
    check(g, "1x2x1x1", NV(1.0 / 11, 3.0 / 11));
}

Test(ops, data_dependent_shapes)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = cst(g, "x", TS_F32, "2x2", NV(1, 0, 0, 3)), y;
    node(g, "NonZero", &x, 1, NULL, 0, 1, &y);
    check(g, "2x2", NV(0, 1, 0, 1));
    g = ts_graph_new("t", 13);
    int in[2] = {cst(g, "x", TS_F32, "2x3", NV(1, 2, 3, 4, 5, 6)), cst(g, "c", TS_BOOL, "2", NV(0, 1))};
    ts_attr ax = ts_attr_int("axis", 1);
    node(g, "Compress", in, 2, &ax, 1, 1, &y);
    check(g, "2x1", NV(2, 5));
    g = ts_graph_new("t", 13);
    x = cst(g, "x", TS_F32, "6", NV(2, 1, 1, 3, 4, 3));
    int o[4];
    ts_attr uns = ts_attr_int("sorted", 0);
    node(g, "Unique", &x, 1, &uns, 1, 4, o);
    ts_tensor *out[4];
    run(g, out);
    expect(out[0], "4", NV(2, 1, 3, 4));
    expect(out[1], "4", NV(0, 1, 3, 4));
    expect(out[2], "6", NV(0, 1, 1, 2, 3, 2));
    expect(out[3], "4", NV(1, 2, 2, 1));
    ts_graph_free(g);
}

Test(ops, bitshift_and_unsigned_types)
{
    ts_graph *g = ts_graph_new("t", 11);
    int in[2] = {cst(g, "x", TS_U16, "3", NV(1, 0x8001, 7)), cst(g, "s", TS_U16, "3", NV(3, 1, 16))};
    ts_attr d = ts_attr_string("direction", "LEFT");
    int y;
    node(g, "BitShift", in, 2, &d, 1, 1, &y);
    check(g, "3", NV(8, 2, 0)); /* bits past 16 are lost */
    g = ts_graph_new("t", 13);
    int jn[2] = {cst(g, "a", TS_U32, "2", NV(4000000000.0, 1)), cst(g, "b", TS_U32, "2", NV(5, 9))};
    node(g, "Max", jn, 2, NULL, 0, 1, &y);
    check(g, "2", NV(4000000000.0, 9));
    g = ts_graph_new("t", 11);
    int kn[2] = {cst(g, "x", TS_I32, "1", NV(1)), cst(g, "s", TS_I32, "1", NV(1))};
    node_fails(g, "BitShift", kn, 2, &d, 1, 1, "unsigned");
    ts_graph_free(g);
}

Test(ops, windows_det_einsum)
{
    ts_graph *g = ts_graph_new("t", 17);
    int n = cst(g, "n", TS_I64, "", NV(5)), y;
    node(g, "HannWindow", &n, 1, NULL, 0, 1, &y);
    check(g, "5", NV(0, 0.345491503, 0.904508497, 0.904508497, 0.345491503));
    g = ts_graph_new("t", 13);
    int m = cst(g, "m", TS_F32, "2x2x2", NV(1, 2, 3, 4, 0, 1, 1, 0));
    node(g, "Det", &m, 1, NULL, 0, 1, &y);
    check(g, "2", NV(-2, -1));
    g = ts_graph_new("t", 13);
    int in[2] = {cst(g, "a", TS_F32, "2x3", NV(1, 2, 3, 4, 5, 6)), cst(g, "b", TS_F32, "3", NV(1, 0, -1))};
    ts_attr eq = ts_attr_string("equation", "ij,j->i");
    node(g, "Einsum", in, 2, &eq, 1, 1, &y);
    check(g, "2", NV(-2, -2));
    g = ts_graph_new("t", 13);
    int d = cst(g, "d", TS_F32, "2x2x2", NV(1, 2, 3, 4, 5, 6, 7, 8));
    ts_attr diag = ts_attr_string("equation", "...ii->...i");
    node(g, "Einsum", &d, 1, &diag, 1, 1, &y);
    check(g, "2x2", NV(1, 4, 5, 8));
    g = ts_graph_new("t", 13);
    d = cst(g, "d", TS_F32, "2x3", NV(1, 2, 3, 4, 5, 6));
    ts_attr impl = ts_attr_string("equation", "ji");
    node(g, "Einsum", &d, 1, &impl, 1, 1, &y); /* implicit output: i j, a transpose */
    check(g, "3x2", NV(1, 4, 2, 5, 3, 6));
}

Test(ops, tfidf_quantize_reverse)
{
    ts_graph *g = ts_graph_new("t", 11);
    int x = cst(g, "x", TS_I64, "6", NV(1, 2, 3, 1, 2, 5)), y;
    /* pool: 1-grams {1, 5}, 2-grams {(1, 2), (2, 5)} at slots 0..3 */
    static const int64_t counts[] = {0, 2}, idx[] = {0, 1, 2, 3}, pool[] = {1, 5, 1, 2, 2, 5};
    ts_attr a[] = {ts_attr_int("min_gram_length", 1), ts_attr_int("max_gram_length", 2), ts_attr_int("max_skip_count", 0),
                   ts_attr_string("mode", "TF"),       ts_attr_ints("ngram_counts", counts, 2),
                   ts_attr_ints("ngram_indexes", idx, 4), ts_attr_ints("pool_int64s", pool, 6)};
    node(g, "TfIdfVectorizer", &x, 1, a, 7, 1, &y);
    check(g, "4", NV(2, 1, 2, 1));
    g = ts_graph_new("t", 13);
    int in[3] = {cst(g, "x", TS_F32, "4", NV(-1, 0.5, 1.5, 300)), cst(g, "s", TS_F32, "", NV(0.5)),
                 cst(g, "z", TS_U8, "", NV(10))};
    node(g, "QuantizeLinear", in, 3, NULL, 0, 1, &y);
    check(g, "4", NV(8, 11, 13, 255)); /* 0.5 / 0.5 = 1 and 1.5 / 0.5 = 3: exact; 600 saturates */
    g = ts_graph_new("t", 13);
    int jn[3] = {cst(g, "x", TS_I8, "2", NV(-3, 4)), cst(g, "s", TS_F32, "", NV(0.25)), cst(g, "z", TS_I8, "", NV(1))};
    node(g, "DequantizeLinear", jn, 3, NULL, 0, 1, &y);
    check(g, "2", NV(-1, 0.75));
    g = ts_graph_new("t", 13);
    int kn[2] = {cst(g, "x", TS_F32, "3x2", NV(1, 2, 3, 4, 5, 6)), cst(g, "l", TS_I64, "2", NV(3, 1))};
    node(g, "ReverseSequence", kn, 2, NULL, 0, 1, &y); /* time axis 0, batch axis 1 */
    check(g, "3x2", NV(5, 2, 3, 4, 1, 6));
}

Test(ops, simple_rnn)
{
    /* hidden 1, input 1: h1 = tanh(1 * 1), h2 = tanh(1 * 2 + 0.5 * h1) */
    ts_graph *g = ts_graph_new("t", 14);
    int in[3] = {cst(g, "x", TS_F32, "2x1x1", NV(1, 2)), cst(g, "w", TS_F32, "1x1x1", NV(1)),
                 cst(g, "r", TS_F32, "1x1x1", NV(0.5))};
    ts_attr h = ts_attr_int("hidden_size", 1);
    int o[2];
    node(g, "RNN", in, 3, &h, 1, 2, o);
    ts_tensor *out[2];
    run(g, out);
    expect(out[0], "2x1x1x1", NV(0.761594156, 0.983041101));
    expect(out[1], "1x1x1", NV(0.983041101));
    ts_graph_free(g);
}

/* A model whose Reshape shape is a graph input (ONNX's own test): the
 * session loads it at each run's value of that input. */
Test(session, shapes_from_input_values)
{
    const char *model = "/usr/share/libonnx-testdata/data/node/test_reshape_reordered_all_dims/model.onnx";
    if (access(model, R_OK)) cr_skip_test("libonnx-testdata is not installed");
    ts_session *s = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_session_open(model, 1, &s, &e), TS_OK, "%s", e.msg);
    cr_assert_null(ts_session_graph(s));
    cr_assert_eq(ts_session_ninputs(s), 2);
    ts_io_info info;
    cr_assert(ts_session_input_info(s, 0, &info));
    ts_tensor *x = ts_tensor_new(TS_F32, &info.shape, &e), *out[1];
    for (int64_t i = 0; i < ts_tensor_numel(x); i++) ts_tensor_set_f64(x, i, (double)i);
    static const int64_t shapes[3][3] = {{4, 2, 3}, {2, 12, 1}, {4, 2, 3}};
    for (int k = 0; k < 3; k++) {
        ts_tensor *sh = vals(TS_I64, "3", NV((double)shapes[k][0], (double)shapes[k][1], (double)shapes[k][2]));
        ts_tensor *in[2] = {x, sh};
        cr_assert_eq(ts_session_run(s, in, out, &e), TS_OK, "%s", e.msg);
        cr_assert_eq(out[0]->shape.rank, 3);
        for (int d = 0; d < 3; d++) cr_assert_eq(out[0]->shape.dims[d], shapes[k][d]);
        cr_assert_eq(ts_tensor_get_f64(out[0], 23), 23);
        ts_tensor_unref(out[0]);
        ts_tensor_unref(sh);
    }
    /* a value that cannot be a shape of 24 elements: one clear error */
    ts_tensor *bad = vals(TS_I64, "3", NV(5, 5, 1)), *in[2] = {x, bad};
    cr_assert_neq(ts_session_run(s, in, out, &e), TS_OK);
    cr_assert(strstr(e.msg, "Reshape") || strstr(e.msg, "reshape"), "%s", e.msg);
    ts_tensor_unref(bad);
    ts_tensor_unref(x);
    ts_session_free(s);
}

Test(ops, integer_products)
{
    ts_graph *g = ts_graph_new("t", 13);
    int in[3] = {cst(g, "a", TS_U8, "2x2", NV(1, 2, 3, 4)), cst(g, "b", TS_U8, "2x1", NV(1, 2)), cst(g, "za", TS_U8, "", NV(1))};
    int y;
    node(g, "MatMulInteger", in, 3, NULL, 0, 1, &y);
    cr_assert_eq(g->values[y].dtype, TS_I32);
    check(g, "2x1", NV(2, 8)); /* (a - 1) b */
    g = ts_graph_new("t", 13);
    int jn[3] = {cst(g, "x", TS_U8, "1x1x3x3", NV(1, 2, 3, 4, 5, 6, 7, 8, 9)), cst(g, "w", TS_U8, "1x1x2x2", NV(1, 1, 1, 1)),
                 cst(g, "zx", TS_U8, "", NV(1))};
    node(g, "ConvInteger", jn, 3, NULL, 0, 1, &y);
    check(g, "1x1x2x2", NV(8, 12, 20, 24)); /* 2x2 window sums of 0..8 */
    g = ts_graph_new("t", 13);
    int kn[8] = {cst(g, "a", TS_U8, "1x2", NV(2, 4)), cst(g, "as", TS_F32, "", NV(0.5)), cst(g, "az", TS_U8, "", NV(0)),
                 cst(g, "b", TS_U8, "2x1", NV(1, 3)), cst(g, "bs", TS_F32, "", NV(1)),   cst(g, "bz", TS_U8, "", NV(1)),
                 cst(g, "ys", TS_F32, "", NV(2)),   cst(g, "yz", TS_U8, "", NV(10))};
    node(g, "QLinearMatMul", kn, 8, NULL, 0, 1, &y);
    check(g, "1x1", NV(12)); /* (2 * 0 + 4 * 2) * 0.5 * 1 / 2 + 10 */
}

Test(ops, roi_align_and_max_unpool)
{
    ts_graph *g = ts_graph_new("t", 10);
    int in[3] = {cst(g, "x", TS_F32, "1x1x2x2", NV(1, 2, 3, 4)), cst(g, "r", TS_F32, "1x4", NV(0, 0, 1, 1)),
                 cst(g, "b", TS_I64, "1", NV(0))};
    ts_attr a = ts_attr_int("sampling_ratio", 1);
    int y;
    node(g, "RoiAlign", in, 3, &a, 1, 1, &y);
    check(g, "1x1x1x1", NV(2.5)); /* one sample at the centre (0.5, 0.5) */
    g = ts_graph_new("t", 11);
    static const int64_t two[] = {2, 2};
    ts_attr w[] = {ts_attr_ints("kernel_shape", two, 2), ts_attr_ints("strides", two, 2)};
    int jn[2] = {cst(g, "x", TS_F32, "1x1x2x2", NV(5, 6, 7, 8)), cst(g, "i", TS_I64, "1x1x2x2", NV(5, 7, 13, 15))};
    node(g, "MaxUnpool", jn, 2, w, 2, 1, &y);
    check(g, "1x1x4x4", NV(0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 7, 0, 8));
    g = ts_graph_new("t", 11);
    int kn[3] = {cst(g, "x", TS_F32, "1x1x2x2", NV(5, 6, 7, 8)), cst(g, "i", TS_I64, "1x1x2x2", NV(5, 7, 13, 15)),
                 cst(g, "s", TS_I64, "4", NV(1, 1, 5, 5))};
    node(g, "MaxUnpool", kn, 3, w, 2, 1, &y); /* same coordinates in a larger output */
    check(g, "1x1x5x5", NV(0, 0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 0, 0, 7, 0, 8, 0, 0, 0, 0, 0, 0));
}

Test(ops, dft)
{
    /* X[k] = sum_j x[j] e^(-2 pi i j k / 4) of 1, 2, 3, 4 */
    ts_graph *g = ts_graph_new("t", 17);
    int x = cst(g, "x", TS_F32, "1x4x1", NV(1, 2, 3, 4)), y;
    node(g, "DFT", &x, 1, NULL, 0, 1, &y);
    check(g, "1x4x2", NV(10, 0, -2, 2, -2, 0, -2, -2));
    g = ts_graph_new("t", 17);
    x = cst(g, "x", TS_F32, "1x4x2", NV(10, 0, -2, 2, -2, 0, -2, -2));
    ts_attr inv = ts_attr_int("inverse", 1);
    node(g, "DFT", &x, 1, &inv, 1, 1, &y);
    check(g, "1x4x2", NV(1, 0, 2, 0, 3, 0, 4, 0));
    g = ts_graph_new("t", 17);
    x = cst(g, "x", TS_F32, "1x4x1", NV(1, 2, 3, 4));
    ts_attr one = ts_attr_int("onesided", 1);
    node(g, "DFT", &x, 1, &one, 1, 1, &y);
    check(g, "1x3x2", NV(10, 0, -2, 2, -2, 0));
}

/* The optimizer keeps operators it has no rules for: a graph of suite
 * operators around a Conv goes through ts_optimize (roofline costs, no
 * timing) and comes back checked, with those nodes in it. */
Test(ops, optimizer_keeps_suite_operators)
{
    ts_error e = {0};
    ts_graph *g = ts_graph_new("t", 16);
    ts_shape xs = ts_shape_make(4, (const int64_t[]){1, 2, 4, 5}), gs = ts_shape_make(4, (const int64_t[]){1, 3, 3, 2});
    int in[2] = {ts_graph_add_input(g, "x", TS_F32, &xs, &e), ts_graph_add_input(g, "grid", TS_F32, &gs, &e)};
    int s, r, n, k[2];
    ts_error e2 = {0};
    cr_assert(ts_graph_add_node(g, "GridSample", NULL, in, 2, NULL, 0, 1, NULL, &s, &e2) >= 0, "%s", e2.msg);
    cr_assert(ts_graph_add_node(g, "Relu", NULL, &s, 1, NULL, 0, 1, NULL, &r, &e2) >= 0, "%s", e2.msg);
    int nin[3] = {r, cst(g, "sc", TS_F32, "2", NV(1, 2)), cst(g, "b", TS_F32, "2", NV(0, 1))};
    cr_assert(ts_graph_add_node(g, "InstanceNormalization", NULL, nin, 3, NULL, 0, 1, NULL, &n, &e2) >= 0, "%s", e2.msg);
    int tin[2] = {n, cst(g, "k", TS_I64, "1", NV(2))};
    cr_assert(ts_graph_add_node(g, "TopK", NULL, tin, 2, NULL, 0, 2, NULL, k, &e2) >= 0, "%s", e2.msg);
    cr_assert_eq(ts_graph_add_output(g, k[0], &e2), TS_OK);
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.roofline = true;
    o.no_timing = true;
    o.budget = 5;
    o.time_limit = 10;
    o.transforms = "taso";
    ts_optimize_result res;
    cr_assert_eq(ts_optimize(g, &o, &res, &e), TS_OK, "%s", e.msg);
    const char *want[] = {"GridSample", "InstanceNormalization", "TopK"};
    for (int w = 0; w < 3; w++) {
        bool found = false;
        for (int i = 0; i < res.graph->nnodes; i++)
            found |= !res.graph->nodes[i].dead && !strcmp(res.graph->nodes[i].op->name, want[w]);
        cr_assert(found, "%s is missing from the optimized graph", want[w]);
    }
    ts_optimize_result_free(&res);
    ts_graph_free(g);
}

/* uint64 runs through int64: a value of 2^63 or more is refused, not
 * compared wrongly; moving and converting it stays exact */
Test(dtypes, uint64_beyond_int64)
{
    ts_graph *g = ts_graph_new("t", 13);
    int in[2] = {cst(g, "a", TS_U64, "2", NV(1e19, 1)), cst(g, "b", TS_U64, "2", NV(5, 9))};
    int y;
    node(g, "Max", in, 2, NULL, 0, 1, &y);
    ts_tensor *out[1];
    ts_error e = {0};
    cr_assert_neq(ts_graph_run_reference(g, TS_DOMAIN_F32, NULL, out, &e), TS_OK);
    cr_assert(strstr(e.msg, "2^63") && strstr(e.msg, "Max"), "%s", e.msg);
    ts_graph_free(g);
    g = ts_graph_new("t", 13);
    int x = cst(g, "a", TS_U64, "2", NV(1e19, 1));
    ts_attr to = ts_attr_int("to", 11);
    node(g, "Cast", &x, 1, &to, 1, 1, &y);
    check(g, "2", NV(1e19, 1));
}
