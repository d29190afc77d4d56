/* EinNet derivations (src/einnet/derive.c, search.c, instantiate.c): each
 * rule keeps the value (exact mod-p evaluation), the search finds the
 * paper's Conv3x3 -> MatMul + OffsetReduce (Figure 5) from the unmodified
 * operator, the instantiated graph equals the original in the reference
 * interpreter, and a planted wrong derivation is rejected. */
#include <criterion/criterion.h>
#include <string.h>
#include "einnet/band.h"
#include "einnet/derive.h"
#include "ein/instantiate.h"
#include "exec_check.h"
#include "ops/attrs.h"

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

static bool accept_phases(const ts_ein *e, void *arg)
{
    (void)arg;
    return ts_ein_instantiable(e) && ts_ein_undilated_conv(e);
}

/* CSRNet's dilated 3x3 convs (dilation 2, pad 2, bias): the phase search
 * splits the output positions h = 2h' + a, w = 2w' + b (in the root, then
 * in the conv scope its reader reads at 2h' + a), extracts the input's
 * phases P[a,b,n,c,y,x] = X[n,c,2y+a,2x+b], and what is left is a regular
 * 3x3 conv (pad 1) over the four phase images: the paper's dilated G2BMM
 * -> G2BMM substitution for a convolution. */
Test(einnet_derive, dilated_conv_to_conv_on_phases)
{
    ts_attr at[] = {ts_attr_ints("pads", I(2, 2, 2, 2), 4), ts_attr_ints("dilations", I(2, 2), 2)};
    const char *xs[] = {"1x3x8x6", "2x4x6x10"}, *ws[] = {"5x3x3x3", "5x4x3x3"};
    for (int bias = 0; bias < 2; bias++) {
        ts_graph *g = conv_graph(xs[bias], ws[bias], bias, at, 2);
        ts_ein e;
        int inputs[4];
        translate(g, &e, inputs);
        static ts_ein_found found[4];
        ts_ein_search_opts o = {.max_depth = 7, .max_states = 2000, .accept = accept_phases, .phases = true};
        ts_ein_search_stats st;
        int n = ts_ein_search(&e, &o, found, 4, &st);
        cr_assert_gt(n, 0, "no conv over phases found (%d visited)", st.visited);
        char d[64];
        ts_ein_describe(&found[0].e, d, sizeof d);
        cr_assert_str_eq(d, bias ? "phases+conv+ew" : "phases+conv", "%s", found[0].path);
        cr_assert_eq(equal(&e, &found[0].e), 1, "the phase derivation %s changed the value", found[0].path);
        check_instantiated(g, &found[0].e, inputs, "Conv", "Pad");
        /* the instantiated Conv is undilated, on 4x the batch, pads 1 */
        ts_graph *h = ts_graph_copy(g);
        int out = -1;
        ts_error err = {0};
        cr_assert_eq(ts_ein_instantiate(&found[0].e, h, inputs, "t", &out, &err), TS_OK, "%s", err.msg);
        const ts_node *cn = &h->nodes[h->nnodes - 1];
        for (int i = g->nnodes; i < h->nnodes; i++)
            if (h->nodes[i].op == g->nodes[g->nnodes - 1].op) cn = &h->nodes[i];
        const ts_conv_attrs *ca = cn->attrs;
        cr_assert_eq(cn->ninputs, bias ? 3 : 2, "the bias is not fused into the Conv");
        cr_assert_eq(h->values[cn->inputs[0]].shape.dims[0], 4 * g->values[g->inputs[0]].shape.dims[0]);
        for (int k = 0; k < 2; k++) {
            cr_assert(ca->win.ndilations < 0 || ca->win.dilations[k] == 1);
            cr_assert_eq(ca->win.pads[k], 1);
        }
        ts_graph_free(h);
        /* negative control: the phases read in the other order (a <-> b),
         * right shapes everywhere, must be rejected by the check */
        ts_ein wrong = found[0].e;
        bool swapped = false;
        for (int s = 1; s < wrong.nscope && !swapped; s++) {
            if (ts_ein_scope_kind(&wrong, s) != EIN_KIND_PHASE) continue;
            int16_t t = wrong.scope[s].trav[0];
            wrong.scope[s].trav[0] = wrong.scope[s].trav[1];
            wrong.scope[s].trav[1] = t;
            swapped = true;
        }
        cr_assert(swapped);
        cr_assert_eq(equal(&e, &wrong), 0, "phases read in the wrong order passed the check");
        ts_graph_free(g);
    }
}

static bool accept_g2bmm(const ts_ein *e, void *arg)
{
    (void)arg;
    if (!ts_ein_instantiable(e)) return false;
    for (int s = 0; s < e->nscope; s++)
        if (ts_ein_scope_kind(e, s) == EIN_KIND_G2BMM || ts_ein_scope_kind(e, s) == EIN_KIND_G2BMM_T) return true;
    return false;
}

/* Longformer's dilated band (dilation 2, window 2W+1 = 9): the phase
 * search splits the rows i = 2i' + a and extracts the phases of K and Q;
 * what is left is an undilated G2BMM over the phases (the paper's dilated
 * G2BMM -> G2BMM), built blocked: MatMul of 64-row blocks against the
 * three key blocks the band reaches, then the skew.  Checked exactly mod p
 * against the band expression and, instantiated, against its evaluation;
 * keys read in the wrong phase are rejected. */
Test(einnet_derive, dilated_g2bmm_to_g2bmm_blocked)
{
    ts_shape K = xt_shape("1x2x256x3");
    ts_ein e;
    cr_assert(ts_ein_band_expr(&e, &K, &K, 2, -8, 9));
    static ts_ein_found found[2];
    ts_ein_search_opts o = {.max_depth = 7, .max_states = 500, .accept = accept_g2bmm, .phases = true};
    ts_ein_search_stats st;
    int n = ts_ein_search(&e, &o, found, 1, &st);
    cr_assert_eq(n, 1, "no G2BMM over phases found (%d visited)", st.visited);
    char d[64];
    ts_ein_describe(&found[0].e, d, sizeof d);
    cr_assert_str_eq(d, "phases+phases+g2bmm", "%s (%s)", d, found[0].path);
    cr_assert_eq(equal(&e, &found[0].e), 1, "the derivation %s changed the value", found[0].path);
    /* instantiated: a graph of K, Q inputs; its value against ts_ein_eval */
    ts_graph *g = ts_graph_new("band", 17);
    int inputs[2] = {xt_input(g, "k", "1x2x256x3"), xt_input(g, "q", "1x2x256x3")}, out = -1;
    ts_error err = {0};
    cr_assert_eq(ts_ein_instantiate(&found[0].e, g, inputs, "t", &out, &err), TS_OK, "%s", err.msg);
    xt_output(g, out);
    cr_assert_geq(ts_graph_fold_constants(g, &err), 0, "%s", err.msg);
    ts_graph_compact(g);
    cr_assert_eq(ts_graph_validate(g, &err), TS_OK, "%s", err.msg);
    int mm = 0, gathers = 0;
    for (int i = 0; i < g->nnodes; i++) {
        mm += !strcmp(g->nodes[i].op->name, "MatMul");
        /* the windows are one Gather of whole blocks (block b reads b, b+1,
         * b+2: 3 indices a block); no Gather by a band table ([L, J]) */
        if (!strcmp(g->nodes[i].op->name, "Gather"))
            gathers += g->values[g->nodes[i].inputs[1]].shape.rank == 1 &&
                               ts_shape_numel(&g->values[g->nodes[i].inputs[1]].shape) % 3 == 0
                           ? 1
                           : 100;
    }
    cr_assert(mm == 1 && gathers == 1, "%d MatMul, Gathers %d (1: the windows' block gather; 100s: others)", mm,
              gathers);
    const ts_num *num = ts_num_get(TS_DOMAIN_MODP);
    ts_tensor *in[2], *ra = NULL, *rb = NULL;
    for (int k = 0; k < 2; k++) {
        in[k] = ts_tensor_new(num->storage, &K, &err);
        for (int64_t i = 0; i < ts_tensor_numel(in[k]); i++)
            ((uint32_t *)in[k]->data)[i] = (uint32_t)((i + 7 * k) * 2654435761u % TS_MODP_P);
    }
    cr_assert_eq(ts_ein_eval(&e, num, (const ts_tensor *const *)in, &ra, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_MODP, in, &rb, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(ts_tensor_numel(ra), ts_tensor_numel(rb));
    cr_assert(!memcmp(ra->data, rb->data, ra->nbytes), "the blocked G2BMM differs from the band");
    /* negative control: the key phases swapped (a <-> 1 - a) */
    ts_ein wrong = found[0].e;
    bool planted = false;
    for (int s = 1; s < wrong.nscope && !planted; s++) {
        if (ts_ein_scope_kind(&wrong, s) != EIN_KIND_PHASE) continue;
        ts_ein_node *r = &wrong.node[wrong.scope[s].body];
        for (int dd = 0; dd < r->rank && !planted; dd++) {
            ts_ein_idx *x = &wrong.idx[r->idx + dd];
            if (x->n == 2 && r->src == 0) { /* K's row 2y + a -> 2y + 1 - a */
                int ka = x->co[0] == 1 ? 0 : 1;
                x->co[ka] = -1;
                x->c += 1;
                planted = true;
            }
        }
    }
    cr_assert(planted);
    cr_assert_eq(equal(&e, &wrong), 0, "keys of the other phase passed the check");
    for (int k = 0; k < 2; k++) ts_tensor_unref(in[k]);
    ts_tensor_unref(ra);
    ts_tensor_unref(rb);
    ts_graph_free(g);
}

/* The band's counterpart (Longformer's context, P[.., i, j] V[.., i +
 * 2j - 8, c] summed over j): the same phase split, then the inverse skew
 * and one blocked MatMul; exact against the expression, wrong phase
 * rejected. */
Test(einnet_derive, dilated_band_context_blocked)
{
    ts_shape V = xt_shape("1x2x256x3"), P = xt_shape("1x2x256x9");
    ts_ein e;
    cr_assert(ts_ein_band_ctx_expr(&e, &V, &P, 2, -8));
    static ts_ein_found found[2];
    ts_ein_search_opts o = {.max_depth = 7, .max_states = 500, .accept = accept_g2bmm, .phases = true};
    ts_ein_search_stats st;
    cr_assert_eq(ts_ein_search(&e, &o, found, 1, &st), 1, "nothing found (%d visited)", st.visited);
    char d[64];
    ts_ein_describe(&found[0].e, d, sizeof d);
    cr_assert(!strcmp(d, "phases+phases+g2bmmt"), "%s (%s)", d, found[0].path);
    cr_assert_eq(equal(&e, &found[0].e), 1, "the derivation %s changed the value", found[0].path);
    ts_graph *g = ts_graph_new("ctx", 17);
    int inputs[2] = {xt_input(g, "v", "1x2x256x3"), xt_input(g, "p", "1x2x256x9")}, out = -1;
    ts_error err = {0};
    cr_assert_eq(ts_ein_instantiate(&found[0].e, g, inputs, "t", &out, &err), TS_OK, "%s", err.msg);
    xt_output(g, out);
    cr_assert_geq(ts_graph_fold_constants(g, &err), 0, "%s", err.msg);
    ts_graph_compact(g);
    cr_assert_eq(ts_graph_validate(g, &err), TS_OK, "%s", err.msg);
    const ts_num *num = ts_num_get(TS_DOMAIN_MODP);
    ts_tensor *in[2] = {ts_tensor_new(num->storage, &V, &err), ts_tensor_new(num->storage, &P, &err)}, *ra = NULL,
              *rb = NULL;
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < ts_tensor_numel(in[k]); i++)
            ((uint32_t *)in[k]->data)[i] = (uint32_t)((i + 5 * k) * 2654435761u % TS_MODP_P);
    cr_assert_eq(ts_ein_eval(&e, num, (const ts_tensor *const *)in, &ra, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_MODP, in, &rb, &err), TS_OK, "%s", err.msg);
    cr_assert_eq(ts_tensor_numel(ra), ts_tensor_numel(rb));
    cr_assert(!memcmp(ra->data, rb->data, ra->nbytes), "the blocked context differs from the band");
    ts_ein wrong = found[0].e; /* V's rows 2y + a -> 2y + 1 - a */
    bool planted = false;
    for (int s = 1; s < wrong.nscope && !planted; s++) {
        ts_ein_node *r = &wrong.node[wrong.scope[s].body];
        for (int dd = 0; ts_ein_scope_kind(&wrong, s) == EIN_KIND_PHASE && r->src == 0 && dd < r->rank && !planted; dd++) {
            ts_ein_idx *x = &wrong.idx[r->idx + dd];
            if (x->n != 2) continue;
            x->co[x->co[0] == 1 ? 0 : 1] = -1;
            x->c += 1;
            planted = true;
        }
    }
    cr_assert(planted);
    cr_assert_eq(equal(&e, &wrong), 0, "rows of the other phase passed the check");
    for (int k = 0; k < 2; k++) ts_tensor_unref(in[k]);
    ts_tensor_unref(ra);
    ts_tensor_unref(rb);
    ts_graph_free(g);
}
