/* Whole-graph moves of the search (src/opt/passes.c) on small graphs: each
 * rewritten graph must compute what the original did (reference
 * interpreter), and the cases that must not be rewritten are left alone:
 * convs with different windows or groups, MatMuls whose stacking would make
 * a cycle, nondeterministic nodes under CSE.  Also the runtime's Split
 * views (plan.c) the merges rely on, against the reference interpreter. */
#include <criterion/criterion.h>
#include <string.h>
#include "graph_build.h"
#include "opt/passes.h"

/* Outputs of a and b on the same random inputs; b run by the reference
 * interpreter or (fast) by the runtime's plan. */
static void assert_same_as(const ts_graph *a, const ts_graph *b, bool fast)
{
    gb_assert_same(a, b, 11, fast ? GB_PLAN : GB_REFERENCE, 1e-4, 0);
}

static void assert_same(const ts_graph *a, const ts_graph *b) { assert_same_as(a, b, false); }

/* x (M x 8) -> three MatMuls (N = 4, 6, 5), two with a bias Add, the
 * third also read by a Relu; each result a graph output through a Tanh. */
static ts_graph *three_matmuls(int64_t m)
{
    uint64_t rng = 5;
    ts_graph *g = ts_graph_new("mm3", 17);
    int64_t xd[2] = {m, 8};
    int x = gb_input(g, "x", 2, xd);
    int64_t n[3] = {4, 6, 5};
    for (int i = 0; i < 3; i++) {
        int64_t wd[2] = {8, n[i]};
        char nm[8];
        snprintf(nm, sizeof nm, "w%d", i);
        int in[2] = {x, gb_weight(g, nm, 2, wd, &rng)};
        int y = gb_node(g, "MatMul", in, 2, NULL, 0);
        if (i < 2) {
            snprintf(nm, sizeof nm, "b%d", i);
            int ab[2] = {y, gb_weight(g, nm, 1, &n[i], &rng)};
            y = gb_node(g, "Add", ab, 2, NULL, 0);
        }
        gb_output(g, gb_node(g, "Tanh", &y, 1, NULL, 0));
    }
    return g;
}

Test(merge, matmul_siblings_with_bias)
{
    ts_error e = {0};
    ts_const_cache *cc = ts_const_cache_new();
    for (int64_t m = 1; m <= 3; m += 2) { /* m 1: the split is a view; m 3: a strided copy */
        ts_graph *g = three_matmuls(m), *h = ts_graph_copy(g);
        cr_assert_eq(ts_merge_siblings(h, -1, cc, &e), 1, "%s", e.msg);
        cr_assert_eq(gb_count_op(h, "MatMul"), 1);
        cr_assert_eq(gb_count_op(h, "Split"), 1);
        cr_assert_eq(gb_count_op(h, "Add"), 1, "one bias Add, zeros where a member had none");
        assert_same(g, h);
        assert_same_as(g, h, true);
        ts_graph_free(h);
        ts_graph_free(g);
    }
    ts_const_cache_free(cc);
}

Test(merge, const_concat_memo_shares_tensors)
{
    ts_error e = {0};
    uint64_t rng = 1;
    int64_t d[2] = {2, 3};
    ts_tensor *p[2] = {gb_rand_tensor(2, d, &rng), gb_rand_tensor(2, d, &rng)};
    ts_const_cache *cc = ts_const_cache_new();
    ts_tensor *a = ts_const_concat(cc, p, 2, 1, &e), *b = ts_const_concat(cc, p, 2, 1, &e);
    ts_tensor *c = ts_const_concat(cc, p, 2, 0, &e);
    cr_assert(a && a == b, "same parts and axis: the memo's tensor");
    cr_assert(c && c != a);
    cr_assert_eq(a->shape.dims[1], 6);
    cr_assert_eq(c->shape.dims[0], 4);
    /* row 1 of the axis-1 concat: p0 row 1 then p1 row 1 */
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(((float *)a->data)[6 + k], ((float *)p[0]->data)[3 + k]);
        cr_assert_eq(((float *)a->data)[9 + k], ((float *)p[1]->data)[3 + k]);
    }
    ts_tensor_unref(a);
    ts_tensor_unref(b);
    ts_tensor_unref(c);
    ts_const_cache_free(cc);
    ts_tensor_unref(p[0]);
    ts_tensor_unref(p[1]);
}

/* x (1x4x6x6) -> convs: two 3x3 pad 1 with Relu, one 3x3 pad 1 without,
 * one 1x1, one grouped 3x3 (group 2): only the two Relu ones merge. */
static ts_graph *convs(void)
{
    uint64_t rng = 9;
    ts_graph *g = ts_graph_new("convs", 17);
    int64_t xd[4] = {1, 4, 6, 6};
    int x = gb_input(g, "x", 4, xd);
    int64_t p1[4] = {1, 1, 1, 1}, p0[4] = {0, 0, 0, 0}, st[2] = {1, 1};
    struct {
        int64_t f, c, k;
        bool relu;
        int64_t group;
    } cv[5] = {{3, 4, 3, true, 1}, {5, 4, 3, true, 1}, {2, 4, 3, false, 1}, {3, 4, 1, true, 1}, {4, 2, 3, true, 2}};
    for (int i = 0; i < 5; i++) {
        int64_t wd[4] = {cv[i].f, cv[i].c, cv[i].k, cv[i].k}, bd = cv[i].f;
        char nm[8];
        snprintf(nm, sizeof nm, "w%d", i);
        int w = gb_weight(g, nm, 4, wd, &rng);
        snprintf(nm, sizeof nm, "b%d", i);
        int in[3] = {x, w, gb_weight(g, nm, 1, &bd, &rng)};
        ts_attr a[3] = {ts_attr_ints("pads", cv[i].k == 3 ? p1 : p0, 4), ts_attr_ints("strides", st, 2),
                        ts_attr_int("group", cv[i].group)};
        int y = gb_node(g, "Conv", in, 3, a, 3);
        if (cv[i].relu) y = gb_node(g, "Relu", &y, 1, NULL, 0);
        gb_output(g, gb_node(g, "Sigmoid", &y, 1, NULL, 0));
    }
    return g;
}

Test(merge, conv_siblings_only_compatible)
{
    ts_error e = {0};
    ts_graph *g = convs(), *h = ts_graph_copy(g);
    cr_assert_eq(ts_merge_siblings(h, -1, NULL, &e), 1, "%s", e.msg);
    cr_assert_eq(gb_count_op(h, "Conv"), 4, "5 convs, the two 3x3+Relu merged into one");
    cr_assert_eq(gb_count_op(h, "Relu"), 3, "the merged pair's Relu, the 1x1's, the grouped conv's");
    cr_assert_eq(gb_count_op(h, "Split"), 1);
    assert_same(g, h);
    assert_same_as(g, h, true);
    ts_graph_free(h);
    ts_graph_free(g);
}

Test(merge, nothing_to_merge_leaves_graph)
{
    ts_error e = {0};
    ts_graph *g = convs();
    /* at a value read by one Conv only: nothing */
    ts_graph *h = ts_graph_copy(g);
    int one = -1;
    for (int i = 0; i < h->nnodes; i++)
        if (!strcmp(h->nodes[i].op->name, "Conv")) one = h->nodes[i].outputs[0];
    uint64_t before = ts_graph_hash(h);
    cr_assert_eq(ts_merge_siblings(h, one, NULL, &e), 0);
    cr_assert_eq(ts_graph_hash(h), before);
    ts_graph_free(h);
    ts_graph_free(g);
    /* two grouped convs on one input: TASO's conv is group 1 (A39/A40 are
     * false for groups), so they are not merged */
    uint64_t rng = 2;
    g = ts_graph_new("grouped", 17);
    int64_t xd[4] = {1, 4, 5, 5}, wd[4] = {4, 2, 3, 3}, p1[4] = {1, 1, 1, 1};
    int x = gb_input(g, "x", 4, xd);
    for (int i = 0; i < 2; i++) {
        int in[2] = {x, gb_weight(g, i ? "w1" : "w0", 4, wd, &rng)};
        ts_attr a[2] = {ts_attr_ints("pads", p1, 4), ts_attr_int("group", 2)};
        gb_output(g, gb_node(g, "Tanh", (int[]){gb_node(g, "Conv", in, 2, a, 2)}, 1, NULL, 0));
    }
    cr_assert_eq(ts_merge_siblings(g, -1, NULL, &e), 0);
    cr_assert_eq(gb_count_op(g, "Conv"), 2);
    ts_graph_free(g);
}

/* An RNN-like chain: h1 = tanh(x0 W + h0 U), h2 = tanh(x1 W + h1 U).
 * The x-side MatMuls (x0 W, x1 W) are independent and stack; the h-side
 * ones (h0 U, h1 U) must not: h1 U reads h0 U's result. */
static ts_graph *rnn(void)
{
    uint64_t rng = 3;
    ts_graph *g = ts_graph_new("rnn", 17);
    int64_t xd[2] = {1, 6}, wd[2] = {6, 6};
    int w = gb_weight(g, "W", 2, wd, &rng), u = gb_weight(g, "U", 2, wd, &rng);
    int h = gb_input(g, "h0", 2, xd);
    for (int t = 0; t < 2; t++) {
        char nm[8];
        snprintf(nm, sizeof nm, "x%d", t);
        int x = gb_input(g, nm, 2, xd);
        int a[2] = {x, w}, b[2] = {h, u};
        int s[2] = {gb_node(g, "MatMul", a, 2, NULL, 0), gb_node(g, "MatMul", b, 2, NULL, 0)};
        int sum = gb_node(g, "Add", s, 2, NULL, 0);
        h = gb_node(g, "Tanh", &sum, 1, NULL, 0);
    }
    gb_output(g, h);
    return g;
}

Test(merge, stack_shared_weight_not_through_a_cycle)
{
    ts_error e = {0};
    ts_graph *g = rnn(), *h = ts_graph_copy(g);
    cr_assert_eq(ts_merge_shared_weights(h, NULL, &e), 1, "%s", e.msg);
    cr_assert_eq(gb_count_op(h, "MatMul"), 3, "x0 W, x1 W stacked; h0 U and h1 U stay apart");
    cr_assert_eq(gb_count_op(h, "Concat"), 1);
    cr_assert_eq(ts_graph_validate(h, &e), TS_OK, "%s", e.msg);
    assert_same(g, h);
    assert_same_as(g, h, true);
    ts_graph_free(h);
    ts_graph_free(g);
}

Test(merge, matmul_sums_then_siblings)
{
    ts_error e = {0};
    ts_graph *g = rnn(), *h = ts_graph_copy(g);
    cr_assert_eq(ts_merge_matmul_sums(h, NULL, &e), 2, "%s", e.msg);
    cr_assert_eq(gb_count_op(h, "MatMul"), 2);
    cr_assert_eq(gb_count_op(h, "Add"), 0);
    cr_assert_eq(gb_count_op(h, "Concat"), 2, "[x_t h_t] per step");
    assert_same(g, h);
    assert_same_as(g, h, true);
    ts_graph_free(h);
    ts_graph_free(g);
}

Test(merge, cse_merges_duplicates_only)
{
    ts_error e = {0};
    ts_graph *g = ts_graph_new("cse", 17);
    int64_t d[2] = {3, 4};
    int x = gb_input(g, "x", 2, d), y = gb_input(g, "y", 2, d);
    int a1 = gb_node(g, "Relu", &x, 1, NULL, 0), a2 = gb_node(g, "Relu", &x, 1, NULL, 0);
    int s1[2] = {a1, y}, s2[2] = {a2, y}, s3[2] = {y, a2};
    int b1 = gb_node(g, "Add", s1, 2, NULL, 0), b2 = gb_node(g, "Add", s2, 2, NULL, 0);
    int b3 = gb_node(g, "Sub", s3, 2, NULL, 0); /* not the same as Sub(a2, y) */
    int b4[2] = {a1, y};
    int c = gb_node(g, "Sub", b4, 2, NULL, 0);
    int m1[2] = {b1, b2}, m2[2] = {b3, c};
    gb_output(g, gb_node(g, "Mul", m1, 2, NULL, 0));
    gb_output(g, gb_node(g, "Mul", m2, 2, NULL, 0));
    ts_graph *h = ts_graph_copy(g);
    cr_assert_eq(ts_cse(h, &e), 2, "the second Relu and then the second Add; %s", e.msg);
    cr_assert_eq(gb_count_op(h, "Relu"), 1);
    cr_assert_eq(gb_count_op(h, "Add"), 1);
    cr_assert_eq(gb_count_op(h, "Sub"), 2, "Sub(y, r) and Sub(r, y) differ");
    assert_same(g, h);
    cr_assert_eq(ts_cse(h, &e), 0, "nothing left");
    ts_graph_free(h);
    ts_graph_free(g);
}

/* Runtime: a contiguous Split (N = 1) whose pieces are read by further
 * nodes, one through a Reshape: the pieces are views at offsets. */
Test(merge, split_views_in_the_runtime)
{
    for (int64_t n = 1; n <= 2; n++) {
        ts_graph *g = ts_graph_new("split", 17);
        int64_t xd[4] = {n, 6, 2, 3};
        int x = gb_input(g, "x", 4, xd);
        int r = gb_node(g, "Relu", &x, 1, NULL, 0);
        int64_t sz[3] = {1, 3, 2}, three = 3;
        ts_shape ss = ts_shape_make(1, &three);
        ts_error e = {0};
        ts_tensor *t = ts_tensor_new(TS_I64, &ss, &e);
        memcpy(t->data, sz, sizeof sz);
        int sv = ts_graph_add_constant(g, "sizes", t, &e);
        ts_tensor_unref(t);
        int in[2] = {r, sv}, out[3];
        ts_attr ax = ts_attr_int("axis", 1);
        cr_assert(ts_graph_add_node(g, "Split", "split", in, 2, &ax, 1, 3, NULL, out, &e) >= 0, "%s", e.msg);
        int64_t rs[2] = {n, -1};
        ts_shape s2 = ts_shape_make(1, (int64_t[]){2});
        ts_tensor *shp = ts_tensor_new(TS_I64, &s2, &e);
        memcpy(shp->data, rs, sizeof rs);
        int shv = ts_graph_add_constant(g, "shape", shp, &e);
        ts_tensor_unref(shp);
        int rin[2] = {out[1], shv};
        int flat = gb_node(g, "Reshape", rin, 2, NULL, 0);
        gb_output(g, gb_node(g, "Sigmoid", &out[0], 1, NULL, 0));
        gb_output(g, gb_node(g, "Tanh", &flat, 1, NULL, 0));
        gb_output(g, gb_node(g, "Neg", &out[2], 1, NULL, 0));
        assert_same_as(g, g, true);
        ts_graph_free(g);
    }
}

/* Runtime: a Split of a conv's output (N = 1, pieces of 16 and 32
 * channels) read by convs and an element-wise op: with a channel-blocked
 * conv output the pieces are blocked views; results as the reference. */
Test(merge, split_of_blocked_conv_output)
{
    uint64_t rng = 21;
    for (int64_t n = 1; n <= 2; n++) {
        ts_graph *g = ts_graph_new("bsplit", 11);
        int64_t xd[4] = {n, 8, 10, 10}, w0[4] = {48, 8, 1, 1}, w1[4] = {8, 16, 3, 3}, w2[4] = {8, 32, 3, 3};
        int64_t p1[4] = {1, 1, 1, 1}, b0 = 48;
        int x = gb_input(g, "x", 4, xd);
        int c0[3] = {x, gb_weight(g, "w0", 4, w0, &rng), gb_weight(g, "b0", 1, &b0, &rng)};
        int y = gb_node(g, "Conv", c0, 3, NULL, 0);
        y = gb_node(g, "Relu", &y, 1, NULL, 0);
        int64_t sizes[2] = {16, 32};
        ts_attr a[2] = {ts_attr_int("axis", 1), ts_attr_ints("split", sizes, 2)};
        int out[2];
        ts_error e = {0};
        cr_assert(ts_graph_add_node(g, "Split", "split", &y, 1, a, 2, 2, NULL, out, &e) >= 0, "%s", e.msg);
        ts_attr pa = ts_attr_ints("pads", p1, 4);
        int c1[2] = {out[0], gb_weight(g, "w1", 4, w1, &rng)}, c2[2] = {out[1], gb_weight(g, "w2", 4, w2, &rng)};
        gb_output(g, gb_node(g, "Tanh", (int[]){gb_node(g, "Conv", c1, 2, &pa, 1)}, 1, NULL, 0));
        gb_output(g, gb_node(g, "Tanh", (int[]){gb_node(g, "Conv", c2, 2, &pa, 1)}, 1, NULL, 0));
        gb_output(g, gb_node(g, "Sigmoid", &out[1], 1, NULL, 0));
        assert_same_as(g, g, true);
        ts_graph_free(g);
    }
}
