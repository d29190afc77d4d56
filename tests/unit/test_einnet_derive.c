/* EinNet derivations (src/einnet/derive.c, search.c, instantiate.c): each
 * rule keeps the value (exact mod-p evaluation), the search finds the
 * paper's Conv3x3 -> MatMul + OffsetReduce (Figure 5) from the unmodified
 * operator, the instantiated graph equals the original in the reference
 * interpreter, and a planted wrong derivation is rejected. */
#include <criterion/criterion.h>
#include <string.h>
#include "einnet/derive.h"
#include "einnet/instantiate.h"
#include "exec_check.h"

#define I(...) ((const int64_t[]){__VA_ARGS__})

static uint64_t rng = 99;

/* x (N,C,H,W) -> Conv(W constant F,C,K,K) with attrs; the graph's last node. */
static ts_graph *conv_graph(const char *x, const char *w, bool bias, const ts_attr *at, int na)
{
    ts_graph *g = ts_graph_new("c", 17);
    int ins[3] = {xt_input(g, "x", x), xt_const_random(g, w, -1, 1, &rng), -1};
    if (bias) {
        char b[16];
        snprintf(b, sizeof b, "%lld", (long long)xt_shape(w).dims[0]);
        ins[2] = xt_const_random(g, b, -1, 1, &rng);
    }
    xt_output(g, xt_node(g, "Conv", ins, bias ? 3 : 2, at, na));
    return g;
}

static void translate(const ts_graph *g, ts_ein *e, int *inputs)
{
    ts_error err = {0};
    cr_assert_eq(ts_ein_from_node(g, g->nnodes - 1, e, inputs, &err), TS_OK, "%s", err.msg);
}

static int equal(const ts_ein *a, const ts_ein *b)
{
    ts_error err = {0};
    int r = ts_ein_check_equal(a, b, 50000000, &err);
    cr_assert_geq(r, 0, "%s", err.msg);
    cr_assert_neq(r, 2, "not checked");
    return r;
}

static bool accept(const ts_ein *e, void *arg)
{
    (void)arg;
    return ts_ein_instantiable(e);
}

/* Runs the search; returns the first found expression described as `want`. */
static bool find(const ts_ein *e, const char *want, ts_ein *out, ts_ein_search_stats *st)
{
    static ts_ein_found found[8];
    ts_ein_search_opts o = {.max_depth = 7, .max_states = 2000, .accept = accept};
    int n = ts_ein_search(e, &o, found, 8, st);
    cr_assert_geq(n, 0);
    for (int i = 0; i < n; i++) {
        char d[64];
        ts_ein_describe(&found[i].e, d, sizeof d);
        cr_assert_eq(equal(e, &found[i].e), 1, "derivation %s (%s) changed the value", found[i].path, d);
        if (!strcmp(d, want)) {
            *out = found[i].e;
            return true;
        }
    }
    return false;
}

/* Replaces the graph's last node by the instantiation of d and checks the
 * result against the original in the reference interpreter (exact mod p,
 * weights included: the interpreter converts constants). */
static void check_instantiated(const ts_graph *g, const ts_ein *d, const int *inputs, const char *must_have,
                               const char *must_not)
{
    ts_error err = {0};
    ts_graph *h = ts_graph_copy(g);
    int out = -1, old = h->nodes[h->nnodes - 1].outputs[0];
    cr_assert_eq(ts_ein_instantiate(d, h, inputs, "t", &out, &err), TS_OK, "%s", err.msg);
    h->outputs[0] = out;
    h->nodes[g->nnodes - 1].dead = true;
    (void)old;
    cr_assert_geq(ts_graph_fold_constants(h, &err), 0, "%s", err.msg);
    ts_graph_compact(h);
    cr_assert_eq(ts_graph_validate(h, &err), TS_OK, "%s", err.msg);
    int has = 0, hasnot = 0;
    for (int i = 0; i < h->nnodes; i++) {
        has += !strcmp(h->nodes[i].op->name, must_have);
        hasnot += !strcmp(h->nodes[i].op->name, must_not);
    }
    cr_assert(has && !hasnot, "the instantiation has %d %s and %d %s", has, must_have, hasnot, must_not);
    const ts_num *num = ts_num_get(TS_DOMAIN_MODP);
    ts_tensor *x = ts_tensor_new(num->storage, &g->values[g->inputs[0]].shape, &err);
    for (int64_t i = 0; i < ts_tensor_numel(x); i++) ((uint32_t *)x->data)[i] = (uint32_t)(i * 2654435761u % TS_MODP_P);
    ts_tensor *ra = NULL, *rb = NULL;
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_MODP, &x, &ra, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(ts_graph_run_reference(h, TS_DOMAIN_MODP, &x, &rb, &err), TS_OK, "%s", err.msg);
    cr_assert(ts_shape_eq(&ra->shape, &rb->shape));
    cr_assert(!memcmp(ra->data, rb->data, ra->nbytes), "the instantiated graph differs from the original");
    ts_tensor_unref(x);
    ts_tensor_unref(ra);
    ts_tensor_unref(rb);
    ts_graph_free(h);
}

Test(einnet_derive, conv3x3_to_matmul_offset_reduce)
{
    ts_attr pad[] = {ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    ts_graph *g = conv_graph("1x5x7x6", "4x5x3x3", false, pad, 1);
    ts_ein e, d;
    int inputs[4];
    translate(g, &e, inputs);
    ts_ein_search_stats st;
    cr_assert(find(&e, "matmul+reduce9", &d, &st), "the search did not find Matmul + OffsetReduce (%d visited)",
              st.visited);
    cr_assert_gt(st.duplicates, 0, "two substitution orders reach one expression: the fingerprint must see it");
    /* Figure 5's shape: the MatMul scope reads X and W at plain iterators */
    cr_assert_eq(d.nscope, 2);
    cr_assert_eq(ts_ein_scope_kind(&d, 1), EIN_KIND_MATMUL);
    cr_assert_eq(ts_ein_scope_kind(&d, 0), EIN_KIND_REDUCE);
    check_instantiated(g, &d, inputs, "MatMul", "Conv");
    ts_graph_free(g);
}

Test(einnet_derive, dilated_conv_with_bias_odd_shape)
{
    ts_attr at[] = {ts_attr_ints("pads", I(2, 2, 2, 2), 4), ts_attr_ints("dilations", I(2, 2), 2)};
    ts_graph *g = conv_graph("1x3x9x7", "5x3x3x3", true, at, 2);
    ts_ein e, d;
    int inputs[4];
    translate(g, &e, inputs);
    ts_ein_search_stats st;
    cr_assert(find(&e, "matmul+reduce9+ew", &d, &st), "no Matmul + OffsetReduce for the dilated conv");
    check_instantiated(g, &d, inputs, "MatMul", "Conv");
    ts_graph_free(g);
}

Test(einnet_derive, separable_kx1_kernel)
{
    /* GCN's large separable kernels: 7x1, padding 3 */
    ts_attr at[] = {ts_attr_ints("pads", I(3, 0, 3, 0), 4)};
    ts_graph *g = conv_graph("1x4x11x5", "3x4x7x1", false, at, 1);
    ts_ein e, d;
    int inputs[4];
    translate(g, &e, inputs);
    ts_ein_search_stats st;
    cr_assert(find(&e, "matmul+reduce7", &d, &st), "no Matmul + OffsetReduce for the 7x1 conv");
    check_instantiated(g, &d, inputs, "MatMul", "Conv");
    ts_graph_free(g);
}

/* Every rule on its own keeps the value, on a strided, padded, grouped conv. */
Test(einnet_derive, rules_keep_the_value)
{
    ts_attr at[] = {ts_attr_ints("pads", I(1, 0, 1, 2), 4), ts_attr_ints("strides", I(1, 2), 2), ts_attr_int("group", 2)};
    ts_graph *g = conv_graph("1x4x6x7", "4x2x3x2", true, at, 3);
    ts_ein e, a, b;
    translate(g, &e, NULL);
    ts_ein_gc(&e);
    int applied = 0;
    int cs = e.scope[1].nsum ? 1 : 0; /* the conv scope (the root adds the bias) */
    for (unsigned m = 1; m + 1 < (1u << e.scope[cs].nsum); m++) {
        if (!ts_ein_split_sum(&e, cs, m, &a)) continue;
        cr_assert_eq(equal(&e, &a), 1, "split %u changed the value", m);
        applied++;
        /* every substitution the split scope allows */
        int ns = a.nscope - 1;
        for (int n = 0; n < a.nnode; n++) {
            if (a.node[n].op != EIN_READ || a.node[n].src != 0) continue;
            for (int dd = 0; dd < a.node[n].rank; dd++)
                for (int p = 0; p < a.scope[ns].ntrav; p++) {
                    if (!ts_ein_substitute(&a, ns, p, &a.idx[a.node[n].idx + dd], &b)) continue;
                    cr_assert_eq(equal(&e, &b), 1, "substitution changed the value");
                    ts_ein c = b;
                    if (ts_ein_tighten(&c)) cr_assert_eq(equal(&e, &c), 1, "tightening changed the value");
                    applied++;
                }
        }
    }
    for (int k = 0; k < 2; k++)
        if (ts_ein_extract_read(&e, cs, k, &a)) {
            cr_assert_eq(equal(&e, &a), 1, "read extraction changed the value");
            applied++;
        }
    cr_assert_gt(applied, 10, "too few rule applications (%d) to mean anything", applied);
    ts_graph_free(g);
}

/* Negative control: a wrong derivation (a substitution that forgets to
 * rewrite the readers, or an off-by-one in the OffsetReduce) is caught by
 * the mod-p check the source runs before proposing anything. */
Test(einnet_derive, planted_wrong_derivation_rejected)
{
    ts_attr pad[] = {ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    ts_graph *g = conv_graph("1x3x5x6", "2x3x3x3", false, pad, 1);
    ts_ein e, d;
    translate(g, &e, NULL);
    ts_ein_search_stats st;
    cr_assert(find(&e, "matmul+reduce9", &d, &st));
    /* off by one in the root's read of the MatMul scope */
    ts_ein bad = d;
    const ts_ein_node *r = &bad.node[bad.scope[0].body];
    cr_assert_eq(r->op, EIN_READ);
    bad.idx[r->idx + 2].c += 1;
    cr_assert_eq(equal(&e, &bad), 0, "an off-by-one derivation passed the check");
    /* a substitution whose readers were not rewritten */
    ts_ein split, sub;
    cr_assert(ts_ein_split_sum(&e, 0, 0x6, &split)); /* r, s outer; c inner */
    int n = -1;
    for (int i = 0; i < split.nnode && n < 0; i++)
        if (split.node[i].op == EIN_READ && split.node[i].src == 0) n = i;
    cr_assert(ts_ein_substitute(&split, 1, 2, &split.idx[split.node[n].idx + 2], &sub));
    cr_assert_eq(equal(&e, &sub), 1);
    ts_ein wrong = sub;
    const ts_ein_node *rr = &wrong.node[wrong.scope[0].body];
    const ts_ein_node *orig = &split.node[split.scope[0].body];
    wrong.idx[rr->idx + 2] = split.idx[orig->idx + 2]; /* the reader's old index */
    cr_assert_eq(equal(&e, &wrong), 0, "a substitution without its readers passed the check");
    ts_graph_free(g);
}

/* DCGAN's transposed convolution (kernel 4, stride 2, pad 1): the search
 * splits the input positions out of the sum one axis at a time, a MatMul
 * then two aggregations (col2im, one axis each). */
Test(einnet_derive, conv_transpose_to_matmul_aggregation)
{
    ts_attr at[] = {ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    ts_graph *g = ts_graph_new("ct", 17);
    int ins[2] = {xt_input(g, "x", "1x3x4x3"), xt_const_random(g, "3x2x4x4", -1, 1, &rng)};
    xt_output(g, xt_node(g, "ConvTranspose", ins, 2, at, 2));
    ts_ein e, d;
    int inputs[4];
    translate(g, &e, inputs);
    ts_ein_search_stats st;
    cr_assert(find(&e, "matmul+reduce4+reduce3", &d, &st) || find(&e, "matmul+reduce3+reduce4", &d, &st),
              "no MatMul + aggregation for the transposed conv");
    check_instantiated(g, &d, inputs, "MatMul", "ConvTranspose");
    ts_graph_free(g);
}
