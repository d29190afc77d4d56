/* Core IR: builder, copy, hash, order, validation, folding, number domains. */
#include <criterion/criterion.h>
#include <string.h>
#include "ir/ir.h"

static ts_shape sh(const char *s)
{
    ts_shape r;
    ts_error e = {0};
    cr_assert_eq(ts_shape_parse(s, &r, &e), TS_OK, "%s", e.msg);
    return r;
}

/* y = (a + b) * b with a:2x3, b:3 */
static ts_graph *small_graph(int *a, int *b, int *sum, int *y)
{
    ts_error e = {0};
    ts_graph *g = ts_graph_new("t", 17);
    ts_shape s23 = sh("2x3"), s3 = sh("3");
    *a = ts_graph_add_input(g, "a", TS_F32, &s23, &e);
    *b = ts_graph_add_input(g, "b", TS_F32, &s3, &e);
    int in1[2] = {*a, *b};
    cr_assert(ts_graph_add_node(g, "Add", "add", in1, 2, NULL, 0, 1, NULL, sum, &e) >= 0, "%s", e.msg);
    int in2[2] = {*sum, *b};
    cr_assert(ts_graph_add_node(g, "Mul", "mul", in2, 2, NULL, 0, 1, NULL, y, &e) >= 0, "%s", e.msg);
    cr_assert_eq(ts_graph_add_output(g, *y, &e), TS_OK);
    return g;
}

Test(shape, parse_and_print)
{
    ts_shape s = sh("1x3x224x224");
    char buf[160];
    cr_assert_eq(s.rank, 4);
    cr_assert_str_eq(ts_shape_str(&s, buf, sizeof buf), "1x3x224x224");
    ts_error e = {0};
    cr_assert_neq(ts_shape_parse("2x-1", &s, &e), TS_OK);
    cr_assert_neq(ts_shape_parse("2x", &s, &e), TS_OK);
    cr_assert(strstr(e.msg, "ends with a separator"), "%s", e.msg);
    cr_assert_neq(ts_shape_parse("2y3", &s, &e), TS_OK);
    cr_assert(strstr(e.msg, "bad character 'y'"), "%s", e.msg);
}

Test(shape, broadcast)
{
    ts_shape a = sh("4x1x3"), b = sh("5x1"), o;
    char buf[160];
    cr_assert(ts_shape_broadcast(&a, &b, &o));
    cr_assert_str_eq(ts_shape_str(&o, buf, sizeof buf), "4x5x3");
    ts_shape c = sh("2x3"), d = sh("4");
    cr_assert_not(ts_shape_broadcast(&c, &d, &o));
    int64_t st[TS_MAX_RANK];
    ts_shape_bcast_strides(&b, &o, st);
    cr_assert(st[0] == 0 && st[1] == 1 && st[2] == 0);
}

Test(tensor, absurd_size_is_refused)
{
    ts_error e = {0};
    ts_shape s = sh("1000000x1000000x1000");
    cr_assert_null(ts_tensor_new(TS_F32, &s, &e));
    cr_assert(strstr(e.msg, "too large"), "%s", e.msg);
}

Test(graph, run_all_domains)
{
    int a, b, sum, y;
    ts_graph *g = small_graph(&a, &b, &sum, &y);
    ts_error e = {0};
    for (int d = 0; d < 3; d++) {
        ts_dtype st = d == 0 ? TS_F32 : d == 1 ? TS_F64 : TS_MODP;
        ts_tensor *A = ts_tensor_new(st, &g->values[a].shape, &e), *B = ts_tensor_new(st, &g->values[b].shape, &e);
        for (int i = 0; i < 6; i++) ts_tensor_set_f64(A, i, i);
        for (int i = 0; i < 3; i++) ts_tensor_set_f64(B, i, 10 + i);
        ts_tensor *in[2] = {A, B}, *out[1];
        cr_assert_eq(ts_graph_run_reference(g, (ts_domain_kind)d, in, out, &e), TS_OK, "%s", e.msg);
        const double want[6] = {100, 132, 168, 130, 165, 204}; /* (i + 10+j) * (10+j) */
        for (int i = 0; i < 6; i++) cr_assert_eq(ts_tensor_get_f64(out[0], i), want[i]);
        ts_tensor_unref(A);
        ts_tensor_unref(B);
        ts_tensor_unref(out[0]);
    }
    ts_graph_free(g);
}

Test(graph, wrong_input_shape_is_named)
{
    int a, b, sum, y;
    ts_graph *g = small_graph(&a, &b, &sum, &y);
    ts_error e = {0};
    ts_shape s = sh("3x3");
    ts_tensor *A = ts_tensor_new(TS_F32, &s, &e), *B = ts_tensor_new(TS_F32, &g->values[b].shape, &e);
    ts_tensor *in[2] = {A, B}, *out[1];
    cr_assert_neq(ts_graph_run_reference(g, TS_DOMAIN_F32, in, out, &e), TS_OK);
    cr_assert(strstr(e.msg, "input 'a': expected float32 2x3, got float32 3x3"), "%s", e.msg);
    ts_tensor_unref(A);
    ts_tensor_unref(B);
    ts_graph_free(g);
}

Test(graph, copy_shares_weights_and_hash)
{
    int a, b, sum, y;
    ts_graph *g = small_graph(&a, &b, &sum, &y);
    ts_error e = {0};
    ts_shape s3 = sh("3");
    ts_tensor *w = ts_tensor_new(TS_F32, &s3, &e);
    int wv = ts_graph_add_constant(g, "w", w, &e);
    int in[2] = {y, wv}, z;
    cr_assert(ts_graph_add_node(g, "Add", "bias", in, 2, NULL, 0, 1, NULL, &z, &e) >= 0);
    ts_graph *c = ts_graph_copy(g);
    cr_assert_eq(c->values[wv].constant, w, "weights are shared, not copied");
    cr_assert_eq(w->refcount, 3);
    cr_assert_eq(ts_graph_hash(c), ts_graph_hash(g));
    /* renaming values does not change the hash; changing an op does */
    free(c->values[sum].name);
    c->values[sum].name = ts_strdup("renamed");
    cr_assert_eq(ts_graph_hash(c), ts_graph_hash(g));
    c->nodes[1].op = ts_op_find("Add");
    cr_assert_neq(ts_graph_hash(c), ts_graph_hash(g));
    ts_graph_free(c);
    ts_graph_free(g);
    cr_assert_eq(w->refcount, 1);
    ts_tensor_unref(w);
}

Test(graph, hash_ignores_node_order)
{
    int a, b, sum, y;
    ts_graph *g = small_graph(&a, &b, &sum, &y);
    ts_graph *c = ts_graph_copy(g);
    ts_node t = c->nodes[0]; /* swap storage order of the two nodes */
    c->nodes[0] = c->nodes[1];
    c->nodes[1] = t;
    c->values[sum].producer = 1;
    c->values[y].producer = 0;
    ts_error e = {0};
    cr_assert_eq(ts_graph_validate(c, &e), TS_OK, "%s", e.msg);
    int order[2], n;
    cr_assert_eq(ts_graph_topo_order(c, order, &n, &e), TS_OK);
    cr_assert(n == 2 && order[0] == 1 && order[1] == 0);
    cr_assert_eq(ts_graph_hash(c), ts_graph_hash(g));
    ts_graph_free(c);
    ts_graph_free(g);
}

Test(graph, cycle_is_reported)
{
    int a, b, sum, y;
    ts_graph *g = small_graph(&a, &b, &sum, &y);
    g->nodes[0].inputs[0] = y; /* add consumes mul's output: a cycle */
    ts_error e = {0};
    cr_assert_neq(ts_graph_validate(g, &e), TS_OK);
    cr_assert(strstr(e.msg, "graph has a cycle through node 'add' (Add)"), "%s", e.msg);
    ts_graph_free(g);
}

Test(graph, dangling_and_double_producer)
{
    int a, b, sum, y;
    ts_graph *g = small_graph(&a, &b, &sum, &y);
    ts_error e = {0};
    g->nodes[0].dead = true;
    cr_assert_neq(ts_graph_validate(g, &e), TS_OK);
    cr_assert(strstr(e.msg, "node 'mul' (Mul): input 'add_out' is never computed"), "%s", e.msg);
    g->nodes[0].dead = false;
    g->nodes[1].outputs[0] = sum;
    cr_assert_neq(ts_graph_validate(g, &e), TS_OK);
    cr_assert(strstr(e.msg, "tensor 'add_out' is produced by both 'mul' and 'add'"), "%s", e.msg);
    ts_graph_free(g);
}

Test(graph, shape_mismatch_is_reported)
{
    int a, b, sum, y;
    ts_graph *g = small_graph(&a, &b, &sum, &y);
    g->values[y].shape = sh("3x2");
    ts_error e = {0};
    cr_assert_neq(ts_graph_validate(g, &e), TS_OK);
    cr_assert(strstr(e.msg, "output 'mul_out' is declared float32 3x2 but computes float32 2x3"), "%s", e.msg);
    ts_graph_free(g);
}

Test(graph, builder_errors)
{
    int a, b, sum, y;
    ts_graph *g = small_graph(&a, &b, &sum, &y);
    ts_error e = {0};
    int in[2] = {a, b}, o;
    cr_assert_lt(ts_graph_add_node(g, "NoSuchOp", "n", in, 2, NULL, 0, 1, NULL, &o, &e), 0);
    cr_assert(strstr(e.msg, "node 'n': operator 'NoSuchOp' is not supported"), "%s", e.msg);
    cr_assert_lt(ts_graph_add_node(g, "Add", "n", in, 1, NULL, 0, 1, NULL, &o, &e), 0);
    cr_assert(strstr(e.msg, "has 1 inputs, expected 2 to 2"), "%s", e.msg);
    ts_shape s = sh("4x5");
    int c = ts_graph_add_input(g, "c", TS_F32, &s, &e);
    int bad[2] = {a, c};
    cr_assert_lt(ts_graph_add_node(g, "Add", "n", bad, 2, NULL, 0, 1, NULL, &o, &e), 0);
    cr_assert(strstr(e.msg, "node 'n' (Add): shapes 2x3 and 4x5 do not broadcast"), "%s", e.msg);
    cr_assert_lt(ts_graph_add_input(g, "a", TS_F32, &s, &e), 0);
    cr_assert(strstr(e.msg, "tensor name 'a' is defined twice"), "%s", e.msg);
    ts_shape neg = {.rank = 2, .dims = {2, -3}};
    cr_assert_lt(ts_graph_add_input(g, "neg", TS_F32, &neg, &e), 0);
    cr_assert(strstr(e.msg, "input 'neg' has negative dimension -3 at axis 1"), "%s", e.msg);
    ts_graph_free(g);
}

Test(graph, fold_constants)
{
    ts_error e = {0};
    ts_graph *g = ts_graph_new("f", 17);
    ts_shape s = sh("3");
    ts_tensor *k = ts_tensor_new(TS_F32, &s, &e);
    for (int i = 0; i < 3; i++) ((float *)k->data)[i] = (float)i;
    int x = ts_graph_add_input(g, "x", TS_F32, &s, &e);
    int kv = ts_graph_add_constant(g, "k", k, &e);
    int in1[2] = {kv, kv}, kk, y;
    ts_graph_add_node(g, "Mul", "sq", in1, 2, NULL, 0, 1, NULL, &kk, &e); /* constant: folds */
    int in2[2] = {x, kk};
    ts_graph_add_node(g, "Add", "add", in2, 2, NULL, 0, 1, NULL, &y, &e);
    ts_graph_add_output(g, y, &e);
    cr_assert_eq(ts_graph_fold_constants(g, &e), 1, "%s", e.msg);
    cr_assert_eq(g->nnodes, 1);
    cr_assert_str_eq(g->nodes[0].op->name, "Add");
    const ts_tensor *c = g->values[g->nodes[0].inputs[1]].constant;
    cr_assert_not_null(c);
    cr_assert(((float *)c->data)[2] == 4.0f);
    cr_assert_eq(ts_graph_validate(g, &e), TS_OK, "%s", e.msg);
    ts_tensor_unref(k);
    ts_graph_free(g);
}

Test(num, modp_arithmetic)
{
    const ts_num *m = ts_num_get(TS_DOMAIN_MODP);
    uint32_t a = TS_MODP_P - 1, b = 5, r;
    m->add(&r, &a, &b);
    cr_assert_eq(r, 4u);
    m->mul(&r, &a, &a); /* (-1)^2 */
    cr_assert_eq(r, 1u);
    m->sub(&r, &b, &a);
    cr_assert_eq(r, 6u);
    cr_assert(m->inv(&r, &b));
    uint32_t one;
    m->mul(&one, &r, &b);
    cr_assert_eq(one, 1u);
    uint32_t zero = 0;
    cr_assert_not(m->inv(&r, &zero));
    m->from_i64(&r, -3);
    cr_assert_eq(r, TS_MODP_P - 3);
    uint32_t x[3] = {1, 2, 3}, y[3] = {TS_MODP_P - 1, 0, 1}, acc = 0;
    m->dot(3, x, 1, y, 1, &acc); /* -1 + 0 + 3 */
    cr_assert_eq(acc, 2u);
    m->axpy(3, &b, x, 1, y, 1); /* y += 5x */
    cr_assert(y[0] == 4 && y[1] == 10 && y[2] == 16);
}

Test(num, float_axpy_strided)
{
    const ts_num *f = ts_num_get(TS_DOMAIN_F64);
    double x[6] = {1, 9, 2, 9, 3, 9}, y[3] = {0}, al = 2;
    f->axpy(3, &al, x, 2, y, 1);
    cr_assert(y[0] == 2 && y[1] == 4 && y[2] == 6);
}
