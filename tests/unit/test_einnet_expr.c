/* EinNet expressions (src/einnet/): every translated operator, evaluated
 * point by point, must equal the reference interpreter exactly in the mod-p
 * domain (float64 within 1e-12 for the average pools, whose 1/k has no
 * small mod-p form) on odd shapes; fingerprints must ignore summation
 * order, operand order and iterator/scope numbering, and must see the
 * layout and a swapped index. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include "ein/expr.h"
#include "exec_check.h"

#define I(...) ((const int64_t[]){__VA_ARGS__})

static uint64_t rng = 4242;

static ts_tensor *random_domain(const ts_shape *s, ts_domain_kind dom)
{
    ts_error e = {0};
    const ts_num *num = ts_num_get(dom);
    ts_tensor *t = ts_tensor_new(num->storage, s, &e);
    cr_assert(t, "%s", e.msg);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t r = (uint32_t)(rng >> 33);
        if (dom == TS_DOMAIN_MODP)
            ((uint32_t *)t->data)[i] = r % TS_MODP_P;
        else
            ((double *)t->data)[i] = (double)(r % 2001) / 1000.0 - 1.0;
    }
    return t;
}

/* Builds one node over fresh graph inputs of the given shapes, translates
 * it and compares the expression's value with the reference interpreter's. */
static void check_op(ts_domain_kind dom, const char *op, const char *const *dims, int nin, const ts_attr *at, int na)
{
    ts_graph *g = ts_graph_new("t", 17);
    int ins[4];
    for (int i = 0; i < nin; i++) ins[i] = xt_input(g, NULL, dims[i]);
    int out = xt_node(g, op, ins, nin, at, na);
    xt_output(g, out);
    ts_error e = {0};
    ts_ein x;
    int vin[EIN_MAX_INPUTS];
    cr_assert_eq(ts_ein_from_node(g, g->nnodes - 1, &x, vin, &e), TS_OK, "%s: %s", op, e.msg);
    ts_tensor *in[4] = {0}, *ref = NULL, *got = NULL;
    for (int i = 0; i < nin; i++) in[i] = random_domain(&g->values[ins[i]].shape, dom);
    cr_assert_eq(ts_graph_run_reference(g, dom, in, &ref, &e), TS_OK, "%s", e.msg);
    const ts_tensor *xin[4];
    for (int k = 0; k < x.ninputs; k++) {
        int j = 0;
        while (ins[j] != vin[k]) j++;
        xin[k] = in[j];
    }
    cr_assert_eq(ts_ein_eval(&x, ts_num_get(dom), xin, &got, &e), TS_OK, "%s", e.msg);
    cr_assert(ts_shape_eq(&got->shape, &ref->shape), "%s: shapes differ", op);
    char buf[1024];
    ts_ein_print(&x, buf, sizeof buf);
    for (int64_t i = 0; i < ts_tensor_numel(ref); i++) {
        if (dom == TS_DOMAIN_MODP)
            cr_assert_eq(((uint32_t *)got->data)[i], ((uint32_t *)ref->data)[i], "%s element %lld differs: %s", op,
                         (long long)i, buf);
        else
            cr_assert(fabs(((double *)got->data)[i] - ((double *)ref->data)[i]) < 1e-12, "%s element %lld: %s", op,
                      (long long)i, buf);
    }
    for (int i = 0; i < nin; i++) ts_tensor_unref(in[i]);
    ts_tensor_unref(ref);
    ts_tensor_unref(got);
    ts_graph_free(g);
}

#define P TS_DOMAIN_MODP
#define DIMS(...) ((const char *const[]){__VA_ARGS__})

Test(einnet_translate, conv_plain_and_bias)
{
    check_op(P, "Conv", DIMS("1x3x5x7", "4x3x3x3"), 2, NULL, 0);
    check_op(P, "Conv", DIMS("2x3x5x7", "4x3x3x2", "4"), 3, NULL, 0);
}

Test(einnet_translate, conv_strided_dilated_padded)
{
    ts_attr at[] = {ts_attr_ints("strides", I(2, 3), 2), ts_attr_ints("dilations", I(2, 1), 2),
                    ts_attr_ints("pads", I(1, 2, 2, 0), 4)};
    check_op(P, "Conv", DIMS("1x2x9x11", "3x2x3x3", "3"), 3, at, 3);
    ts_attr same[] = {ts_attr_string("auto_pad", "SAME_UPPER"), ts_attr_ints("strides", I(2, 2), 2)};
    check_op(P, "Conv", DIMS("1x2x7x6", "3x2x4x3"), 2, same, 2);
}

Test(einnet_translate, conv_grouped_and_depthwise)
{
    ts_attr g2[] = {ts_attr_int("group", 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    check_op(P, "Conv", DIMS("1x4x5x6", "6x2x3x3", "6"), 3, g2, 2);
    ts_attr dw[] = {ts_attr_int("group", 3)};
    check_op(P, "Conv", DIMS("2x3x5x5", "3x1x2x2"), 2, dw, 1);
}

Test(einnet_translate, conv_1d_and_3d)
{
    ts_attr p1[] = {ts_attr_ints("pads", I(2, 1), 2)};
    check_op(P, "Conv", DIMS("1x3x9", "2x3x5"), 2, p1, 1);
    check_op(P, "Conv", DIMS("1x2x4x5x3", "3x2x2x3x2"), 2, NULL, 0);
}

Test(einnet_translate, conv_transpose)
{
    check_op(P, "ConvTranspose", DIMS("1x3x4x5", "3x2x3x3"), 2, NULL, 0);
    ts_attr dc[] = {ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    check_op(P, "ConvTranspose", DIMS("1x3x4x5", "3x2x4x4", "2"), 3, dc, 2);
    ts_attr op[] = {ts_attr_ints("strides", I(3, 2), 2), ts_attr_ints("output_padding", I(1, 1), 2),
                    ts_attr_int("group", 3)};
    check_op(P, "ConvTranspose", DIMS("1x3x3x4", "3x2x2x3", "6"), 3, op, 3);
}

Test(einnet_translate, matmul_gemm)
{
    check_op(P, "MatMul", DIMS("5x7", "7x3"), 2, NULL, 0);
    check_op(P, "MatMul", DIMS("2x1x5x7", "3x7x4"), 2, NULL, 0);
    ts_attr tr[] = {ts_attr_int("transA", 1), ts_attr_int("transB", 1), ts_attr_float("alpha", 2),
                    ts_attr_float("beta", 3)};
    check_op(P, "Gemm", DIMS("7x5", "3x7", "3"), 3, tr, 4);
    check_op(P, "Gemm", DIMS("5x7", "7x3"), 2, NULL, 0);
}

Test(einnet_translate, elementwise_movement)
{
    check_op(P, "Add", DIMS("2x3x5", "5"), 2, NULL, 0);
    check_op(P, "Sub", DIMS("3x1", "1x4"), 2, NULL, 0);
    check_op(P, "Mul", DIMS("2x3x5", "3x1"), 2, NULL, 0);
    check_op(P, "Neg", DIMS("3x5"), 1, NULL, 0);
    ts_attr perm[] = {ts_attr_ints("perm", I(2, 0, 1), 3)};
    check_op(P, "Transpose", DIMS("2x3x5"), 1, perm, 1);
    ts_attr ax[] = {ts_attr_int("axis", 2)};
    check_op(P, "Flatten", DIMS("2x3x5x7"), 1, ax, 1);
    check_op(TS_DOMAIN_F64, "Relu", DIMS("3x5"), 1, NULL, 0);
    check_op(TS_DOMAIN_F64, "Div", DIMS("3x5", "5"), 2, NULL, 0);
}

Test(einnet_translate, average_pools)
{
    ts_attr ap[] = {ts_attr_ints("kernel_shape", I(3, 2), 2), ts_attr_ints("strides", I(2, 1), 2),
                    ts_attr_ints("pads", I(1, 0, 1, 0), 4), ts_attr_int("count_include_pad", 1)};
    check_op(TS_DOMAIN_F64, "AveragePool", DIMS("1x3x7x5"), 1, ap, 4);
    check_op(TS_DOMAIN_F64, "GlobalAveragePool", DIMS("2x3x5x3"), 1, NULL, 0);
}

Test(einnet_translate, unsupported_is_said)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "3x5");
    xt_node(g, "Softmax", &x, 1, NULL, 0);
    ts_error e = {0};
    ts_ein ex;
    cr_assert_eq(ts_ein_from_node(g, 0, &ex, NULL, &e), TS_ERR_UNSUPPORTED);
    cr_assert(strstr(e.msg, "Softmax"), "%s", e.msg);
    ts_graph_free(g);
}

/* ------------------------------------------------------- fingerprints */

/* Sum_{k,l} A0[i, k, l] * A1[l, k, j] built with the summation iterators in
 * order (k,l) or (l,k), operands swapped, and iterator ids scrambled. */
static void contraction(ts_ein *e, bool swap_sums, bool swap_ops, bool scramble, bool swap_index)
{
    memset(e, 0, sizeof *e);
    e->ninputs = 2;
    e->in_shape[0] = ts_shape_make(3, I(3, 4, 4));
    e->in_shape[1] = ts_shape_make(3, I(4, 4, 5));
    e->out_shape = ts_shape_make(2, I(3, 5));
    if (scramble)
        for (int i = 0; i < 5; i++) ts_ein_iter_new(e, 0, 99); /* unused ids shift the numbering */
    ts_ein_scope_new(e);
    int k, l, i, j;
    if (scramble) {
        l = ts_ein_iter_new(e, 0, 4);
        j = ts_ein_iter_new(e, 0, 5);
        k = ts_ein_iter_new(e, 0, 4);
        i = ts_ein_iter_new(e, 0, 3);
    } else {
        i = ts_ein_iter_new(e, 0, 3);
        j = ts_ein_iter_new(e, 0, 5);
        k = ts_ein_iter_new(e, 0, 4);
        l = ts_ein_iter_new(e, 0, 4);
    }
    ts_ein_scope *s = &e->scope[0];
    s->ntrav = 2;
    s->trav[0] = (int16_t)i;
    s->trav[1] = (int16_t)j;
    s->nsum = 2;
    s->sum[0] = (int16_t)(swap_sums ? l : k);
    s->sum[1] = (int16_t)(swap_sums ? k : l);
    ts_ein_idx a[3] = {ts_ein_idx_it(i), ts_ein_idx_it(k), ts_ein_idx_it(l)};
    ts_ein_idx b[3] = {ts_ein_idx_it(l), ts_ein_idx_it(k), ts_ein_idx_it(j)};
    if (swap_index) b[0] = ts_ein_idx_it(k), b[1] = ts_ein_idx_it(l);
    int ra = ts_ein_read(e, 0, 3, a), rb = ts_ein_read(e, 1, 3, b);
    s->body = (int16_t)ts_ein_bin(e, EIN_MUL, swap_ops ? rb : ra, swap_ops ? ra : rb);
}

Test(einnet_fingerprint, invariances)
{
    ts_ein a, b;
    contraction(&a, false, false, false, false);
    uint64_t h = ts_ein_fingerprint(&a);
    contraction(&b, true, false, false, false);
    cr_assert_eq(ts_ein_fingerprint(&b), h, "summation order changed the fingerprint");
    contraction(&b, false, true, false, false);
    cr_assert_eq(ts_ein_fingerprint(&b), h, "operand order changed the fingerprint");
    contraction(&b, true, true, true, false);
    cr_assert_eq(ts_ein_fingerprint(&b), h, "iterator numbering changed the fingerprint");
    ts_ein_gc(&b);
    cr_assert_eq(ts_ein_fingerprint(&b), h, "gc changed the fingerprint");
    /* the one thing that changes the value must change the fingerprint */
    contraction(&b, false, false, false, true);
    cr_assert_neq(ts_ein_fingerprint(&b), h, "A1[l,k,j] and A1[k,l,j] share a fingerprint");
}

Test(einnet_fingerprint, layout_and_scope_numbering)
{
    ts_ein a, b;
    contraction(&a, false, false, false, false);
    uint64_t h = ts_ein_fingerprint(&a);
    b = a;
    int16_t t = b.scope[0].trav[0];
    b.scope[0].trav[0] = b.scope[0].trav[1];
    b.scope[0].trav[1] = t;
    b.out_shape = ts_shape_make(2, I(5, 3));
    cr_assert_neq(ts_ein_fingerprint(&b), h, "the traversal order is the layout: it must count");
    /* the contraction as an inner scope read by an identity root, with an
     * unused scope before it: renumbered scopes, one fingerprint */
    ts_ein c, d;
    for (int pad = 0; pad < 2; pad++) {
        ts_ein *x = pad ? &d : &c;
        contraction(x, false, false, false, false);
        ts_ein inner = *x;
        memset(x, 0, sizeof *x);
        *x = inner;
        int root_body = x->scope[0].body;
        /* move the contraction to a new scope and make scope 0 read it */
        if (pad) ts_ein_scope_new(x);
        int s = ts_ein_scope_new(x);
        x->scope[s] = x->scope[0];
        x->scope[s].body = (int16_t)root_body;
        int i = ts_ein_iter_new(x, 0, 3), j = ts_ein_iter_new(x, 0, 5);
        ts_ein_idx ix[2] = {ts_ein_idx_it(i), ts_ein_idx_it(j)};
        x->scope[0] = (ts_ein_scope){.ntrav = 2, .trav = {(int16_t)i, (int16_t)j}};
        x->scope[0].body = (int16_t)ts_ein_read(x, -s - 1, 2, ix);
    }
    cr_assert_eq(ts_ein_fingerprint(&c), ts_ein_fingerprint(&d), "scope numbering changed the fingerprint");
    cr_assert_neq(ts_ein_fingerprint(&c), h, "a scope read is not the scope");
}
