/* PET (src/pet/, docs/pet.md): the multi-linear splitter over the op
 * descriptors, box propagation on hand-drawn split points, the F_p box
 * check with a negative control, and the paper's cases found by the
 * mutant generator from the unmodified original and corrected. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include "opt/check.h"
#include "opt/source.h"
#include "pet/pet.h"

static int input(ts_graph *g, const char *name, int rank, const int64_t *dims)
{
    ts_error e = {0};
    ts_shape s = ts_shape_make(rank, dims);
    int v = ts_graph_add_input(g, name, TS_F32, &s, &e);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static int weight(ts_graph *g, const char *name, int rank, const int64_t *dims, uint64_t *rng)
{
    ts_error e = {0};
    ts_shape s = ts_shape_make(rank, dims);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    cr_assert(t, "%s", e.msg);
    ts_tensor_fill_random(t, rng, -1, 1);
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static int node(ts_graph *g, const char *op, const int *ins, int nin, const ts_attr *a, int na)
{
    ts_error e = {0};
    int out = -1;
    cr_assert(ts_graph_add_node(g, op, NULL, ins, nin, a, na, 1, NULL, &out, &e) >= 0, "%s: %s", op, e.msg);
    return out;
}

static int conv(ts_graph *g, int x, int w, int b, int64_t pad, int64_t dil)
{
    int64_t pads[4] = {pad, pad, pad, pad}, dils[2] = {dil, dil};
    ts_attr a[2] = {ts_attr_ints("pads", pads, 4), ts_attr_ints("dilations", dils, 2)};
    int ins[3] = {x, w, b};
    return node(g, "Conv", ins, b >= 0 ? 3 : 2, a, 2);
}

static int unary(ts_graph *g, const char *op, int x)
{
    return node(g, op, &x, 1, NULL, 0);
}

static void output(ts_graph *g, int v)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, v, &e), TS_OK, "%s", e.msg);
}

static void expect_points(const ts_pet_points *p, int d, const int64_t *want, int n)
{
    char got[256] = "";
    for (int k = 0; k < p->n[d]; k++)
        snprintf(got + strlen(got), sizeof got - strlen(got), " %lld", (long long)p->p[d][k]);
    cr_assert_eq(p->n[d], n, "dim %d: %d points (%s), expected %d", d, p->n[d], got, n);
    for (int k = 0; k < n; k++) cr_assert_eq(p->p[d][k], want[k], "dim %d point %d: got%s", d, k, got);
}

/* ------------------------------------------------------------ splitter */

Test(pet_split, residual_block_is_one_subprogram)
{
    /* relu -> conv(+bias) -> conv -> add(residual) -> relu: the two convs
     * and the Add are one multi-linear subprogram (Add is degree 1 in
     * each input), the Relus split it from the rest */
    uint64_t rng = 1;
    ts_graph *g = ts_graph_new("res", 17);
    int a = unary(g, "Relu", input(g, "x", 4, (int64_t[]){1, 4, 6, 6}));
    int w1 = weight(g, "w1", 4, (int64_t[]){4, 4, 3, 3}, &rng), b1 = weight(g, "b1", 1, (int64_t[]){4}, &rng);
    int c1 = conv(g, a, w1, b1, 1, 1);
    int c2 = conv(g, c1, weight(g, "w2", 4, (int64_t[]){4, 4, 3, 3}, &rng), -1, 1, 1);
    int s = node(g, "Add", (int[]){c2, a}, 2, NULL, 0);
    output(g, unary(g, "Relu", s));
    ts_pet_split sp;
    ts_error e = {0};
    cr_assert_eq(ts_pet_split_graph(g, &sp, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(sp.nsubs, 1);
    cr_assert_eq(sp.subs[0].nnodes, 3, "conv, conv, add: got %d", sp.subs[0].nnodes);
    cr_assert_eq(sp.sub_of[g->values[a].producer], -1, "Relu is a split point");
    cr_assert_eq(sp.subs[0].ninputs, 4, "a, w1, b1, w2: got %d", sp.subs[0].ninputs);
    cr_assert_eq(sp.subs[0].noutputs, 1);
    cr_assert_eq(sp.subs[0].outputs[0], s);
    /* conv1: x,w,b -> 3; conv2: +w2 -> 4; add: + a -> 5 (a bound) */
    cr_assert_eq(sp.subs[0].degree, 5, "degree %d", sp.subs[0].degree);
    ts_pet_split_free(&sp);
    ts_graph_free(g);
}

Test(pet_split, nonlinear_ops_and_dynamic_coefficients_split)
{
    /* Sigmoid has no linear input; Div has no mod-p kernel: both cut */
    uint64_t rng = 2;
    ts_graph *g = ts_graph_new("cut", 17);
    int x = input(g, "x", 2, (int64_t[]){4, 4});
    int m1 = node(g, "MatMul", (int[]){x, weight(g, "w", 2, (int64_t[]){4, 4}, &rng)}, 2, NULL, 0);
    int sg = unary(g, "Sigmoid", m1);
    int m2 = node(g, "MatMul", (int[]){sg, weight(g, "w2", 2, (int64_t[]){4, 4}, &rng)}, 2, NULL, 0);
    int dv = node(g, "Div", (int[]){m2, weight(g, "d", 2, (int64_t[]){4, 4}, &rng)}, 2, NULL, 0);
    output(g, dv);
    ts_pet_split sp;
    ts_error e = {0};
    cr_assert_eq(ts_pet_split_graph(g, &sp, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(sp.nsubs, 2);
    cr_assert_eq(sp.sub_of[g->values[sg].producer], -1);
    cr_assert_eq(sp.sub_of[g->values[dv].producer], -1);
    cr_assert_neq(sp.sub_of[g->values[m1].producer], sp.sub_of[g->values[m2].producer]);
    ts_pet_split_free(&sp);
    ts_graph_free(g);
}

/* ------------------------------------------------------ box propagation */

static ts_pet_points *propagate(const ts_graph *g)
{
    ts_pet_points *p = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_pet_propagate(g, &p, &e), TS_OK, "%s", e.msg);
    return p;
}

Test(pet_box, conv_has_nine_boxes)
{
    /* PET Figure 4: 3x3 kernel, pad 1 -> rows/cols {0}, [1,5), {5} */
    ts_graph *g = ts_graph_new("b", 17);
    int y = conv(g, input(g, "x", 4, (int64_t[]){1, 2, 6, 6}), input(g, "w", 4, (int64_t[]){3, 2, 3, 3}), -1, 1, 1);
    output(g, y);
    ts_pet_points *p = propagate(g);
    expect_points(&p[y], 0, NULL, 0);
    expect_points(&p[y], 1, NULL, 0);
    expect_points(&p[y], 2, (int64_t[]){1, 5}, 2);
    expect_points(&p[y], 3, (int64_t[]){1, 5}, 2);
    ts_pet_box *boxes;
    int n;
    cr_assert(ts_pet_grid(&g->values[y].shape, &p[y], NULL, 100, &boxes, &n));
    cr_assert_eq(n, 9);
    cr_assert_eq(boxes[4].lo[2], 1);
    cr_assert_eq(boxes[4].hi[2], 5);
    free(boxes);
    ts_pet_points_free_all(p, g->nvalues);
    ts_graph_free(g);
}

Test(pet_box, dilated_conv_and_concat_seam)
{
    /* dilation 2, pad 2 on 8 wide: taps at o-2, o, o+2 -> {0,1}, [2,6), {6,7} */
    ts_graph *g = ts_graph_new("d", 17);
    int x = input(g, "x", 4, (int64_t[]){1, 1, 8, 4});
    int x2 = input(g, "x2", 4, (int64_t[]){1, 1, 8, 4});
    int cat = node(g, "Concat", (int[]){x, x2}, 2, (ts_attr[]){ts_attr_int("axis", 3)}, 1);
    int y = conv(g, cat, input(g, "w", 4, (int64_t[]){1, 1, 3, 3}), -1, 2, 2);
    output(g, y);
    ts_pet_points *p = propagate(g);
    expect_points(&p[cat], 3, (int64_t[]){4}, 1);
    expect_points(&p[y], 2, (int64_t[]){2, 6}, 2);
    /* width: the padding's {2, 6} and the seam at 4 seen by taps at
     * offsets -2, 0, +2: outputs 6, 4, 2 */
    expect_points(&p[y], 3, (int64_t[]){2, 4, 6}, 3);
    ts_pet_points_free_all(p, g->nvalues);
    ts_graph_free(g);
}

Test(pet_box, reshape_transpose_chain_of_figure_1)
{
    /* two images side by side: [2,1,4,4] -> [1,2,1,4,4] -> [1,1,4,2,4]
     * -> [1,1,4,8]: the seam at column 4; and back, the seam gone but the
     * batch split at image 1 */
    ts_graph *g = ts_graph_new("rt", 17);
    ts_error e = {0};
    int x = input(g, "x", 4, (int64_t[]){2, 1, 4, 4});
    int a = ts_pet_reshape(g, x, (int64_t[]){1, 2, 1, 4, 4}, 5, &e);
    int b = ts_pet_transpose(g, a, (int64_t[]){0, 2, 3, 1, 4}, 5, &e);
    int c = ts_pet_reshape(g, b, (int64_t[]){1, 1, 4, 8}, 4, &e);
    int d = ts_pet_pad(g, c, (int64_t[]){0, 0, 0, 1, 0, 0, 0, 1}, &e);
    int s = ts_pet_slice(g, d, 3, 1, 9, &e);
    int f = ts_pet_reshape(g, s, (int64_t[]){1, 1, 4, 2, 4}, 5, &e);
    int h = ts_pet_transpose(g, f, (int64_t[]){0, 3, 1, 2, 4}, 5, &e);
    int k = ts_pet_reshape(g, h, (int64_t[]){2, 1, 4, 4}, 4, &e);
    cr_assert(k >= 0, "%s", e.msg);
    output(g, k);
    ts_pet_points *p = propagate(g);
    expect_points(&p[c], 3, (int64_t[]){4}, 1);
    expect_points(&p[d], 3, (int64_t[]){1, 5, 9}, 3); /* pad borders and the seam moved by 1 */
    expect_points(&p[s], 3, (int64_t[]){4}, 1);
    expect_points(&p[k], 0, (int64_t[]){1}, 1);
    expect_points(&p[k], 3, NULL, 0);
    ts_pet_points_free_all(p, g->nvalues);
    ts_graph_free(g);
}

/* ------------------------------------------------------------ box check */

static ts_graph *conv_program(int64_t n, int64_t c, int64_t hw, int64_t pad, int64_t dil)
{
    ts_graph *g = ts_graph_new("p", 17);
    int y = conv(g, input(g, "x", 4, (int64_t[]){n, c, hw, hw}), input(g, "w", 4, (int64_t[]){c, c, 3, 3}), -1, pad,
                 dil);
    output(g, y);
    return g;
}

Test(pet_check, equal_programs_pass_every_box)
{
    ts_graph *p0 = conv_program(1, 2, 8, 1, 1), *p1 = conv_program(1, 2, 8, 1, 1);
    ts_pet_verdict v;
    ts_error e = {0};
    cr_assert_eq(ts_pet_check(p0, p1, 2, 1, &v, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(v.nboxes, 9);
    cr_assert_eq(v.nfail, 0);
    cr_assert_eq(v.degree, 2);
    cr_assert_lt(v.error, 1e-17, "(2/p)^2 = %g", v.error);
    ts_pet_verdict_free(&v);
    ts_graph_free(p0);
    ts_graph_free(p1);
}

Test(pet_check, negative_control_dropped_dilation_is_rejected)
{
    /* a mutant with the right shape and the wrong values: the dilated
     * convolution replaced by a regular one (pad halved) */
    ts_graph *p0 = conv_program(1, 2, 8, 2, 2), *p1 = conv_program(1, 2, 8, 1, 1);
    ts_pet_verdict v;
    ts_error e = {0};
    cr_assert_eq(ts_pet_check(p0, p1, 2, 1, &v, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(v.nfail, v.nboxes, "every box differs (%d of %d failed)", v.nfail, v.nboxes);
    int n = 0;
    ts_graph *c = ts_pet_correct(p0, p1, &v, 0.25, &n, &e);
    cr_assert_null(c, "a correction of the whole output is not a transformation");
    ts_pet_verdict_free(&v);
    ts_graph_free(p0);
    ts_graph_free(p1);
}

/* -------------------------------------- the paper's cases, found by search */

typedef struct collect {
    ts_source_emit emit;
    double gain; /* reported after each candidate */
    ts_graph *g[64];
    char what[64][80];
    int count[64];
    int n;
} collect;

static bool never(ts_source_emit *em)
{
    (void)em;
    return false;
}

static bool take(ts_source_emit *em, ts_graph *g, const char *what, int count)
{
    collect *c = (collect *)em;
    cr_assert_geq(count, 1);
    cr_assert_lt(c->n, 64);
    c->count[c->n] = count;
    c->g[c->n] = g;
    snprintf(c->what[c->n], sizeof c->what[c->n], "%s", what);
    c->n++;
    em->gain = c->gain; /* what the driver would say: NAN, not costed */
    return true;
}

static void propose(const ts_graph *g, collect *c)
{
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    ts_source_env env = {.opts = &o};
    void *state = NULL;
    ts_error e = {0};
    memset(c, 0, sizeof *c);
    c->gain = NAN;
    c->emit.fn = take;
    c->emit.stopped = never;
    cr_assert_eq(ts_source_pet.open(&env, &state, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_source_pet.propose(state, g, &c->emit, &e), TS_OK, "%s", e.msg);
    char line[256];
    ts_source_pet.describe(state, line, sizeof line);
    cr_log_info("%s", line);
    ts_source_pet.close(state);
}

static int count_op(const ts_graph *g, const char *op)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !g->nodes[i].dead && !strcmp(g->nodes[i].op->name, op);
    return n;
}

/* relu -> conv -> relu, so the conv is a subprogram of its own */
static ts_graph *conv_model(int64_t n, int64_t c, int64_t h, int64_t w, int64_t pad, int64_t dil)
{
    uint64_t rng = 11;
    ts_graph *g = ts_graph_new("m", 17);
    int x = unary(g, "Relu", input(g, "x", 4, (int64_t[]){n, c, h, w}));
    int y = conv(g, x, weight(g, "w", 4, (int64_t[]){c, c, 3, 3}, &rng), weight(g, "b", 1, (int64_t[]){c}, &rng), pad,
                 dil);
    output(g, unary(g, "Relu", y));
    return g;
}

static int find(const collect *c, const char *what)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->what[i], what)) return i;
    return -1;
}

static void expect_same(const ts_graph *g0, const ts_graph *g1)
{
    double worst = 1e30;
    ts_error e = {0};
    cr_assert_eq(ts_graph_validate(g1, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_opt_check(g0, g1, 5, &worst, &e), TS_OK, "%s", e.msg);
    cr_assert_leq(worst, 1, "scaled error %g", worst);
}

Test(pet_cases, figure1_two_images_side_by_side_corrected_at_the_seam)
{
    ts_graph *g = conv_model(2, 4, 8, 8, 1, 1);
    collect c;
    propose(g, &c);
    for (int i = 0; i < c.n; i++) cr_log_info("proposed %s", c.what[i]);
    int k = find(&c, "pet:b2w2.conv.w2b2+corr");
    cr_assert_geq(k, 0, "the batch-to-width mutant, corrected, was not found (%d proposals)", c.n);
    const ts_graph *m = c.g[k];
    expect_same(g, m);
    cr_assert_geq(count_op(m, "Concat"), 1, "corrections are stitched in with Concat");
    cr_assert_eq(count_op(m, "Conv"), 3, "the mutant's conv and one correction per seam column run");
    /* the uncorrected mutant must not be proposed: it differs at the seam */
    cr_assert_lt(find(&c, "pet:b2w2.conv.w2b2"), 0);
    for (int i = 0; i < c.n; i++) {
        expect_same(g, c.g[i]);
        ts_graph_free(c.g[i]);
    }
    ts_graph_free(g);
}

Test(pet_cases, figure3_dilated_conv_becomes_a_regular_one)
{
    ts_graph *g = conv_model(1, 4, 8, 8, 2, 2);
    collect c;
    propose(g, &c);
    for (int i = 0; i < c.n; i++) cr_log_info("proposed %s", c.what[i]);
    int k = find(&c, "pet:s2b2.conv-undilated.b2s2");
    cr_assert_geq(k, 0, "the phase-split mutant was not found (%d proposals)", c.n);
    const ts_graph *m = c.g[k];
    expect_same(g, m);
    bool dilated = false;
    for (int i = 0; i < m->nnodes; i++)
        if (!strcmp(m->nodes[i].op->name, "Conv")) {
            ts_attr buf[4];
            const ts_attr *d = ts_node_attr(&m->nodes[i], "dilations", buf, 4);
            dilated |= d && d->ints[0] > 1;
        }
    cr_assert_not(dilated, "no dilated convolution is left");
    /* the wrong mutant (dilation dropped in place) is never proposed */
    cr_assert_lt(find(&c, "pet:conv-undilated"), 0);
    cr_assert_lt(find(&c, "pet:conv-undilated+corr"), 0);
    for (int i = 0; i < c.n; i++) {
        expect_same(g, c.g[i]);
        ts_graph_free(c.g[i]);
    }
    ts_graph_free(g);
}

/* ------------------------------- CPU mutants: merged groups, space-to-depth */

static int conv_sg(ts_graph *g, int x, int w, int b, int64_t pad, int64_t stride, int64_t group)
{
    int64_t pads[4] = {pad, pad, pad, pad}, strides[2] = {stride, stride};
    ts_attr a[3] = {ts_attr_ints("pads", pads, 4), ts_attr_ints("strides", strides, 2), ts_attr_int("group", group)};
    int ins[3] = {x, w, b};
    return node(g, "Conv", ins, b >= 0 ? 3 : 2, a, 3);
}

/* relu -> conv(group, stride) + bias -> relu on [1, c, hw, hw] */
static ts_graph *conv_model_sg(int64_t c, int64_t f, int64_t hw, int64_t k, int64_t pad, int64_t stride, int64_t group)
{
    uint64_t rng = 13;
    ts_graph *g = ts_graph_new("m", 17);
    int x = unary(g, "Relu", input(g, "x", 4, (int64_t[]){1, c, hw, hw}));
    int y = conv_sg(g, x, weight(g, "w", 4, (int64_t[]){f, c / group, k, k}, &rng),
                    weight(g, "b", 1, (int64_t[]){f}, &rng), pad, stride, group);
    output(g, unary(g, "Relu", y));
    return g;
}

/* The attribute `name` of the only live Conv of g. */
static int64_t conv_attr(const ts_graph *g, const char *name, int64_t dflt)
{
    int64_t v = dflt;
    int convs = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (!g->nodes[i].dead && !strcmp(g->nodes[i].op->name, "Conv")) {
            ts_attr buf[4];
            const ts_attr *a = ts_node_attr(&g->nodes[i], name, buf, 4);
            if (a) v = a->kind == TS_ATTR_INTS ? a->ints[0] : a->i;
            convs++;
        }
    cr_assert_eq(convs, 1, "one Conv expected, %d found", convs);
    return v;
}

static void free_all(collect *c)
{
    for (int i = 0; i < c->n; i++) ts_graph_free(c->g[i]);
}

Test(pet_cases, grouped_conv_merges_groups_over_a_block_diagonal_weight)
{
    /* 4 groups of 2 channels: merged by 2 (2 groups of 4) and by 4 (a
     * regular conv); the weight work is folded away */
    ts_graph *g = conv_model_sg(8, 8, 6, 3, 1, 1, 4);
    collect c;
    propose(g, &c);
    for (int i = 0; i < c.n; i++) cr_log_info("proposed %s", c.what[i]);
    int k2 = find(&c, "pet:conv-g2"), k1 = find(&c, "pet:conv-g1");
    cr_assert_geq(k2, 0, "the conv with groups merged by 2 was not found (%d proposals)", c.n);
    cr_assert_geq(k1, 0, "the grouped conv as a regular conv was not found (%d proposals)", c.n);
    expect_same(g, c.g[k2]);
    expect_same(g, c.g[k1]);
    cr_assert_eq(conv_attr(c.g[k2], "group", 1), 2);
    cr_assert_eq(conv_attr(c.g[k1], "group", 1), 1);
    cr_assert_eq(count_op(c.g[k1], "Pad") + count_op(c.g[k1], "Slice") + count_op(c.g[k1], "Concat"), 0,
                 "the block-diagonal weight is precomputed");
    for (int i = 0; i < c.n; i++) expect_same(g, c.g[i]);
    free_all(&c);
    ts_graph_free(g);
}

Test(pet_check, negative_control_block_diagonal_in_the_wrong_place_is_rejected)
{
    /* groups merged by 2 with each block in the other group's slot */
    ts_error e = {0};
    ts_graph *p0 = ts_graph_new("p0", 17), *p1 = ts_graph_new("p1", 17);
    int x0 = input(p0, "x", 4, (int64_t[]){1, 4, 6, 6}), w0 = input(p0, "w", 4, (int64_t[]){4, 2, 3, 3});
    output(p0, conv_sg(p0, x0, w0, -1, 1, 1, 2));
    int x1 = input(p1, "x", 4, (int64_t[]){1, 4, 6, 6}), w1 = input(p1, "w", 4, (int64_t[]){4, 2, 3, 3});
    int lo = ts_pet_slice(p1, w1, 0, 0, 2, &e), hi = ts_pet_slice(p1, w1, 0, 2, 4, &e);
    int plo = ts_pet_pad(p1, lo, (int64_t[]){0, 2, 0, 0, 0, 0, 0, 0}, &e); /* should be after */
    int phi = ts_pet_pad(p1, hi, (int64_t[]){0, 0, 0, 0, 0, 2, 0, 0}, &e); /* should be before */
    int wb = ts_pet_concat(p1, (int[]){plo, phi}, 2, 0, &e);
    cr_assert(wb >= 0, "%s", e.msg);
    output(p1, conv_sg(p1, x1, wb, -1, 1, 1, 1));
    ts_pet_verdict v;
    cr_assert_eq(ts_pet_check(p0, p1, 2, 1, &v, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(v.nfail, v.nboxes, "every box differs (%d of %d failed)", v.nfail, v.nboxes);
    ts_pet_verdict_free(&v);
    ts_graph_free(p0);
    ts_graph_free(p1);
}

static void expect_s2d(int64_t c, int64_t hw, int64_t k, int64_t pad)
{
    ts_graph *g = conv_model_sg(c, 4, hw, k, pad, 2, 1);
    collect cl;
    propose(g, &cl);
    for (int i = 0; i < cl.n; i++) cr_log_info("proposed %s", cl.what[i]);
    int m = find(&cl, "pet:conv-s2d2");
    cr_assert_geq(m, 0, "%lldx%lld stride 2 pad %lld on %lld: the space-to-depth mutant was not found (%d proposals)",
                  (long long)k, (long long)k, (long long)pad, (long long)hw, cl.n);
    expect_same(g, cl.g[m]);
    cr_assert_eq(conv_attr(cl.g[m], "strides", 1), 1, "the convolution runs at stride 1");
    for (int i = 0; i < cl.n; i++) expect_same(g, cl.g[i]);
    free_all(&cl);
    ts_graph_free(g);
}

Test(pet_cases, strided_conv_becomes_stride_1_by_space_to_depth)
{
    expect_s2d(3, 16, 7, 3); /* a ResNet stem: input padded past its end */
    expect_s2d(3, 15, 3, 1); /* odd size */
    expect_s2d(4, 15, 3, 0); /* "valid" */
    expect_s2d(2, 17, 2, 0); /* the last input row is never read: cut */
}

Test(pet_cases, pointwise_strided_conv_is_not_padded_to_4x_the_work)
{
    ts_graph *g = conv_model_sg(4, 4, 8, 1, 0, 2, 1);
    collect c;
    propose(g, &c);
    cr_assert_lt(find(&c, "pet:conv-s2d2"), 0, "a 1x1 stride-2 conv padded to 2x2 does 4x the work");
    free_all(&c);
    ts_graph_free(g);
}

Test(pet_check, negative_control_weight_not_rearranged_like_the_input_is_rejected)
{
    /* space-to-depth on the input, but the weight's phases swapped (rows
     * and columns exchanged): right shapes, wrong values */
    ts_error e = {0};
    ts_graph *p0 = ts_graph_new("p0", 17), *p1 = ts_graph_new("p1", 17);
    int x0 = input(p0, "x", 4, (int64_t[]){1, 1, 8, 8}), w0 = input(p0, "w", 4, (int64_t[]){1, 1, 2, 2});
    output(p0, conv_sg(p0, x0, w0, -1, 0, 2, 1));
    int x1 = input(p1, "x", 4, (int64_t[]){1, 1, 8, 8}), w1 = input(p1, "w", 4, (int64_t[]){1, 1, 2, 2});
    int xa = ts_pet_reshape(p1, x1, (int64_t[]){1, 1, 4, 2, 4, 2}, 6, &e);
    int xb = ts_pet_transpose(p1, xa, (int64_t[]){0, 1, 3, 5, 2, 4}, 6, &e);
    int xc = ts_pet_reshape(p1, xb, (int64_t[]){1, 4, 4, 4}, 4, &e);
    int wa = ts_pet_reshape(p1, w1, (int64_t[]){1, 1, 1, 2, 1, 2}, 6, &e);
    int wb = ts_pet_transpose(p1, wa, (int64_t[]){0, 1, 5, 3, 2, 4}, 6, &e); /* should be 3, 5 */
    int wc = ts_pet_reshape(p1, wb, (int64_t[]){1, 4, 1, 1}, 4, &e);
    cr_assert(xc >= 0 && wc >= 0, "%s", e.msg);
    output(p1, conv_sg(p1, xc, wc, -1, 0, 1, 1));
    ts_pet_verdict v;
    cr_assert_eq(ts_pet_check(p0, p1, 2, 1, &v, &e), TS_OK, "%s", e.msg);
    cr_assert_gt(v.nfail, 0, "the swapped weight passed every box");
    ts_pet_verdict_free(&v);
    ts_graph_free(p0);
    ts_graph_free(p1);
}

/* ------------------------------------------ post-optimization: layout pairs */

/* [N,C,H,W] -> phases of 2 in the batch (as the mutants' s2b2), or back */
static int phase_split(ts_graph *g, int x, bool back)
{
    ts_error e = {0};
    const ts_shape *s = &g->values[x].shape;
    int64_t N = s->dims[0], C = s->dims[1], H = s->dims[2], W = s->dims[3];
    int v;
    if (!back) {
        v = ts_pet_reshape(g, x, (int64_t[]){N, C, H / 2, 2, W / 2, 2}, 6, &e);
        v = ts_pet_transpose(g, v, (int64_t[]){3, 5, 0, 1, 2, 4}, 6, &e);
        v = ts_pet_reshape(g, v, (int64_t[]){4 * N, C, H / 2, W / 2}, 4, &e);
    } else {
        v = ts_pet_reshape(g, x, (int64_t[]){2, 2, N / 4, C, H, W}, 6, &e);
        v = ts_pet_transpose(g, v, (int64_t[]){2, 3, 4, 0, 5, 1}, 6, &e);
        v = ts_pet_reshape(g, v, (int64_t[]){N / 4, C, H * 2, W * 2}, 4, &e);
    }
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

Test(pet_post, inverse_layouts_around_an_elementwise_op_cancel)
{
    ts_graph *g = ts_graph_new("l", 17);
    int x = unary(g, "Neg", input(g, "x", 4, (int64_t[]){1, 2, 8, 8}));
    int r = unary(g, "Relu", phase_split(g, x, false));
    output(g, unary(g, "Neg", phase_split(g, r, true)));
    ts_graph *g0 = ts_graph_copy(g);
    ts_error e = {0};
    cr_assert_eq(ts_pet_cancel_layouts(g, &e), 1, "%s", e.msg);
    cr_assert_eq(count_op(g, "Transpose") + count_op(g, "Reshape"), 0);
    cr_assert_eq(count_op(g, "Relu"), 1);
    expect_same(g0, g);
    ts_graph_free(g0);
    ts_graph_free(g);
}

Test(pet_post, layouts_that_do_not_compose_to_the_identity_stay)
{
    /* phase split, then the phase split again (not its inverse) */
    ts_graph *g = ts_graph_new("l", 17);
    int x = unary(g, "Neg", input(g, "x", 4, (int64_t[]){1, 2, 8, 8}));
    int r = unary(g, "Relu", phase_split(g, x, false));
    int y = phase_split(g, r, false);
    output(g, unary(g, "Neg", y));
    ts_error e = {0};
    cr_assert_eq(ts_pet_cancel_layouts(g, &e), 0, "%s", e.msg);
    cr_assert_eq(count_op(g, "Transpose"), 2);
    ts_graph_free(g);
}

Test(pet_post, neighbouring_dilated_convs_share_one_phase_split)
{
    /* relu -> dconv -> relu -> dconv -> relu: after both rewrites the
     * activation between them stays phase-split */
    uint64_t rng = 17;
    ts_graph *g = ts_graph_new("m", 17);
    int x = unary(g, "Relu", input(g, "x", 4, (int64_t[]){1, 4, 8, 8}));
    int y = conv(g, x, weight(g, "w", 4, (int64_t[]){4, 4, 3, 3}, &rng), weight(g, "b", 1, (int64_t[]){4}, &rng), 2, 2);
    y = unary(g, "Relu", y);
    y = conv(g, y, weight(g, "w2", 4, (int64_t[]){4, 4, 3, 3}, &rng), weight(g, "b2", 1, (int64_t[]){4}, &rng), 2, 2);
    output(g, unary(g, "Relu", y));
    collect c;
    propose(g, &c);
    for (int i = 0; i < c.n; i++) cr_log_info("proposed %s x%d", c.what[i], c.count[i]);
    int k = find(&c, "pet:s2b2.conv-undilated.b2s2");
    cr_assert_geq(k, 0, "the phase-split mutant was not found (%d proposals)", c.n);
    cr_assert_eq(c.count[k], 2, "both convolutions (one program) rewritten in one candidate");
    cr_assert_eq(count_op(c.g[k], "Transpose"), 2, "one split before the first conv, one merge after the second");
    cr_assert_eq(count_op(c.g[k], "Relu"), 3);
    int alone = 0;
    for (int i = 0; i < c.n; i++) {
        expect_same(g, c.g[i]);
        if (!strcmp(c.what[i], "pet:s2b2.conv-undilated.b2s2") && c.count[i] == 1) {
            alone++;
            cr_assert_eq(count_op(c.g[i], "Transpose"), 2, "one conv rewritten: its own split and merge");
        }
    }
    cr_assert_eq(alone, 2, "each conv alone is proposed too");
    free_all(&c);
    ts_graph_free(g);
}

/* A mutant the driver costed above the graph it rewrote is not proposed
 * again for the same program (source.h, `gain`): the second graph gets
 * none of the first one's losers. */
Test(pet_post, losing_mutants_not_proposed_again)
{
    uint64_t rng = 17;
    ts_graph *g = ts_graph_new("m", 17);
    int x = unary(g, "Relu", input(g, "x", 4, (int64_t[]){1, 4, 8, 8}));
    int y = conv(g, x, weight(g, "w", 4, (int64_t[]){4, 4, 3, 3}, &rng), weight(g, "b", 1, (int64_t[]){4}, &rng), 2, 2);
    output(g, unary(g, "Relu", y));
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    ts_source_env env = {.opts = &o};
    void *state = NULL;
    ts_error e = {0};
    collect c;
    memset(&c, 0, sizeof c);
    c.gain = -1; /* every candidate costs more */
    c.emit.fn = take;
    c.emit.stopped = never;
    cr_assert_eq(ts_source_pet.open(&env, &state, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_source_pet.propose(state, g, &c.emit, &e), TS_OK, "%s", e.msg);
    int first = c.n;
    cr_assert_gt(first, 0, "nothing proposed");
    cr_assert_eq(ts_source_pet.propose(state, g, &c.emit, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(c.n, first, "%d losers proposed again", c.n - first);
    ts_source_pet.close(state);
    free_all(&c);
    ts_graph_free(g);
}

Test(pet_post, identity_chains_are_recognized_by_running_them)
{
    ts_graph *g = ts_graph_new("l", 17);
    ts_error e = {0};
    int x = input(g, "x", 4, (int64_t[]){1, 2, 8, 8});
    int there = phase_split(g, x, false), back = phase_split(g, there, true);
    /* two width splits by 2 undone by one merge of 4 (an identity the
     * "never follow a layout by its inverse" pruning does not see) */
    int a = ts_pet_reshape(g, x, (int64_t[]){1, 2, 8, 4, 2}, 5, &e);
    a = ts_pet_reshape(g, a, (int64_t[]){1, 2, 8, 8}, 4, &e);
    int t = ts_pet_transpose(g, x, (int64_t[]){0, 1, 3, 2}, 4, &e);
    cr_assert(a >= 0 && t >= 0, "%s", e.msg);
    cr_assert(ts_pet_chain_is_identity(g, x, back));
    cr_assert(ts_pet_chain_is_identity(g, x, a), "reshapes alone move nothing");
    cr_assert_not(ts_pet_chain_is_identity(g, x, t), "a transpose of a square image has the shape, not the order");
    cr_assert_not(ts_pet_chain_is_identity(g, x, there));
    ts_graph_free(g);
}

Test(pet_mutants, no_mutant_is_the_original_behind_layouts_that_cancel)
{
    ts_graph *p0 = conv_program(4, 2, 8, 1, 1);
    ts_pet_gen_opts o = {.depth = 4, .keep = 1 << 20};
    ts_pet_mutant *m;
    int n;
    ts_error e = {0};
    cr_assert_eq(ts_pet_mutants(p0, &o, &m, &n, &e), TS_OK, "%s", e.msg);
    cr_assert_gt(n, 0);
    int x = p0->inputs[0];
    for (int i = 0; i < n; i++) {
        const ts_graph *q = m[i].prog;
        for (int k = 0; k < q->nnodes; k++) {
            if (q->nodes[k].dead || strcmp(q->nodes[k].op->name, "Conv")) continue;
            int in = q->nodes[k].inputs[0], out = q->nodes[k].outputs[0];
            cr_assert(in == x || !ts_pet_chain_is_identity(q, x, in), "%s: layouts before the conv cancel", m[i].what);
            cr_assert(out == q->outputs[0] || !ts_pet_chain_is_identity(q, out, q->outputs[0]),
                      "%s: layouts after the conv cancel", m[i].what);
        }
    }
    ts_pet_mutants_free(m, n);
    ts_graph_free(p0);
}

Test(pet_mutants, pointwise_conv_gets_no_layout_mutants)
{
    /* a 1x1 conv is a GEMM over all positions: moving space into the
     * batch and back only adds copies */
    ts_graph *p0 = ts_graph_new("p", 17);
    output(p0, conv(p0, input(p0, "x", 4, (int64_t[]){2, 4, 8, 8}), input(p0, "w", 4, (int64_t[]){4, 4, 1, 1}), -1,
                    0, 1));
    ts_pet_gen_opts o = {.depth = 4, .keep = 1 << 20};
    ts_pet_mutant *m;
    int n;
    ts_error e = {0};
    cr_assert_eq(ts_pet_mutants(p0, &o, &m, &n, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(n, 0, "%d mutants, the first %s", n, n ? m[0].what : "");
    ts_pet_mutants_free(m, n);
    ts_graph_free(p0);
}

/* ------------------- two-operator subsets: AveragePool -> pointwise Conv */

/* relu -> AveragePool 3x3/1 pad 1 -> Conv 1x1 (c -> f, bias) -> relu:
 * Inception-v3's pool branch */
static ts_graph *pool_conv_model(int64_t c, int64_t f, int64_t hw, int count_include_pad)
{
    uint64_t rng = 19;
    ts_graph *g = ts_graph_new("m", 17);
    int x = unary(g, "Relu", input(g, "x", 4, (int64_t[]){1, c, hw, hw}));
    int64_t k[2] = {3, 3}, pads[4] = {1, 1, 1, 1};
    ts_attr a[3] = {ts_attr_ints("kernel_shape", k, 2), ts_attr_ints("pads", pads, 4),
                    ts_attr_int("count_include_pad", count_include_pad)};
    int p = node(g, "AveragePool", &x, 1, a, 3);
    int y = conv(g, p, weight(g, "w", 4, (int64_t[]){f, c, 1, 1}, &rng), weight(g, "b", 1, (int64_t[]){f}, &rng), 0, 1);
    output(g, unary(g, "Relu", y));
    return g;
}

Test(pet_cases, pool_then_pointwise_conv_commuted_bias_moved_after_the_pool)
{
    ts_graph *g = pool_conv_model(64, 8, 16, 1);
    collect c;
    propose(g, &c);
    for (int i = 0; i < c.n; i++) cr_log_info("proposed %s", c.what[i]);
    int k = find(&c, "pet:conv-nobias.pool.add-bias");
    cr_assert_geq(k, 0, "the commuted pair was not found (%d proposals)", c.n);
    const ts_graph *m = c.g[k];
    expect_same(g, m);
    /* the pool now reads the conv's 8 channels, not the input's 64 */
    int pools = 0;
    for (int i = 0; i < m->nnodes; i++)
        if (!m->nodes[i].dead && !strcmp(m->nodes[i].op->name, "AveragePool")) {
            pools++;
            cr_assert_eq(m->values[m->nodes[i].inputs[0]].shape.dims[1], 8);
        }
    cr_assert_eq(pools, 1);
    cr_assert_eq(count_op(m, "Reshape"), 0, "the bias's reshape is precomputed");
    /* with count_include_pad the bias kept in the conv is averaged with
     * the padding's zeros at the border: never proposed */
    cr_assert_lt(find(&c, "pet:conv.pool"), 0);
    cr_assert_lt(find(&c, "pet:conv-nobias.add-bias.pool"), 0);
    /* the original order with the bias as an extra Add: right, and
     * predicted to cost more than the original */
    cr_assert_lt(find(&c, "pet:pool.conv-nobias.add-bias"), 0);
    for (int i = 0; i < c.n; i++) expect_same(g, c.g[i]);
    free_all(&c);
    ts_graph_free(g);
}

Test(pet_check, negative_control_bias_through_a_padded_pool_fails_the_border_boxes)
{
    /* the generator's "conv.pool" on a count_include_pad pool: the box
     * check fails exactly the boxes that touch the border, and without
     * count_include_pad (the pool of a constant is that constant) none */
    for (int cip = 1; cip >= 0; cip--) {
        ts_graph *g = pool_conv_model(3, 2, 7, cip);
        int pool = -1, cv = -1, map[3], nmap = 0;
        for (int i = 0; i < g->nnodes; i++) {
            if (!strcmp(g->nodes[i].op->name, "AveragePool")) pool = i;
            if (!strcmp(g->nodes[i].op->name, "Conv")) cv = i;
        }
        cr_assert_eq(ts_pet_pool_conv_pair(g, NULL, cv, NULL), pool);
        ts_error e = {0};
        ts_graph *p0 = ts_pet_pair_program(g, pool, cv, 0, 0, map, &nmap, &e);
        cr_assert(p0, "%s", e.msg);
        cr_assert_eq(nmap, 3);
        ts_pet_mutant *m;
        int n;
        cr_assert_eq(ts_pet_commute_mutants(p0, &m, &n, &e), TS_OK, "%s", e.msg);
        int wrong = -1, right = -1;
        for (int i = 0; i < n; i++) {
            cr_log_info("mutant %s", m[i].what);
            if (!strcmp(m[i].what, "pet:conv.pool")) wrong = i;
            if (!strcmp(m[i].what, "pet:conv-nobias.pool.add-bias")) right = i;
        }
        cr_assert(wrong >= 0 && right >= 0, "both orders are generated (%d mutants)", n);
        ts_pet_verdict v;
        cr_assert_eq(ts_pet_check(p0, m[right].prog, 2, 3, &v, &e), TS_OK, "%s", e.msg);
        cr_assert_eq(v.nfail, 0, "bias after the pool: %d of %d boxes fail", v.nfail, v.nboxes);
        ts_pet_verdict_free(&v);
        cr_assert_eq(ts_pet_check(p0, m[wrong].prog, 2, 3, &v, &e), TS_OK, "%s", e.msg);
        if (cip) {
            /* boxes along H and W: a 3x3 grid, the middle one is interior */
            int border = 0;
            for (int b = 0; b < v.nboxes; b++) {
                bool edge = false;
                for (int d = 2; d < 4; d++) edge |= v.boxes[b].lo[d] == 0 || v.boxes[b].hi[d] == 7;
                border += edge;
                cr_assert_eq(!v.ok[b], edge, "box %d: fails %d, on the border %d", b, !v.ok[b], edge);
            }
            cr_log_info("count_include_pad: %d of %d boxes fail, all on the border", v.nfail, v.nboxes);
            cr_assert_eq(v.nfail, border);
            cr_assert_gt(v.nfail, 0);
            cr_assert_lt(v.nfail, v.nboxes, "the interior agrees");
        } else {
            cr_assert_eq(v.nfail, 0, "without count_include_pad the bias commutes too");
        }
        ts_pet_verdict_free(&v);
        ts_pet_mutants_free(m, n);
        ts_graph_free(p0);
        ts_graph_free(g);
    }
}

/* A stop asked while a program's mutants are being checked ends the
 * checking there (a search must not overrun its time limit by the
 * seconds CSRNet's full-size checks take): the driver says "go on" when
 * the convolution is reached, "stop" from then on, and nothing is
 * proposed. */
static int stop_calls;
static bool stop_after_first(ts_source_emit *em)
{
    (void)em;
    return stop_calls++ > 0;
}

Test(pet_post, stop_during_the_checks_ends_them)
{
    ts_graph *g = conv_model(1, 4, 8, 8, 2, 2);
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    ts_source_env env = {.opts = &o};
    void *state = NULL;
    ts_error e = {0};
    collect c;
    memset(&c, 0, sizeof c);
    c.gain = NAN;
    c.emit.fn = take;
    c.emit.stopped = stop_after_first;
    stop_calls = 0;
    cr_assert_eq(ts_source_pet.open(&env, &state, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_source_pet.propose(state, g, &c.emit, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(c.n, 0, "%d proposals after a stop", c.n);
    cr_assert_geq(stop_calls, 2, "the checks asked whether to stop");
    ts_source_pet.close(state);
    /* the same source without a stop finds the phase split (figure 3) */
    propose(g, &c);
    cr_assert_geq(find(&c, "pet:s2b2.conv-undilated.b2s2"), 0);
    free_all(&c);
    ts_graph_free(g);
}

/* relu -> Conv 1x1 (c -> f, no bias) -> Pad of zeros -> AveragePool 2x2/2
 * -> relu: DenseNet's transition as PyTorch exports it */
static ts_graph *transition_model(int64_t c, int64_t f, int64_t hw)
{
    uint64_t rng = 23;
    ts_error e = {0};
    ts_graph *g = ts_graph_new("m", 17);
    int x = unary(g, "Relu", input(g, "x", 4, (int64_t[]){1, c, hw, hw}));
    int y = conv(g, x, weight(g, "w", 4, (int64_t[]){f, c, 1, 1}, &rng), -1, 0, 1);
    int64_t eight = 8;
    ts_shape ps = ts_shape_make(1, &eight);
    ts_tensor *zeros = ts_tensor_new(TS_I64, &ps, &e);
    cr_assert(zeros, "%s", e.msg);
    memset(zeros->data, 0, zeros->nbytes);
    int pads = ts_graph_add_constant(g, "pads", zeros, &e);
    ts_tensor_unref(zeros);
    y = node(g, "Pad", (int[]){y, pads}, 2, NULL, 0);
    int64_t k[2] = {2, 2};
    ts_attr a[2] = {ts_attr_ints("kernel_shape", k, 2), ts_attr_ints("strides", k, 2)};
    output(g, unary(g, "Relu", node(g, "AveragePool", &y, 1, a, 2)));
    return g;
}

Test(pet_cases, pointwise_conv_then_pool_commuted_conv_on_a_quarter_of_the_positions)
{
    ts_graph *g = transition_model(32, 16, 16);
    collect c;
    propose(g, &c);
    for (int i = 0; i < c.n; i++) cr_log_info("proposed %s", c.what[i]);
    int k = find(&c, "pet:pool.conv");
    cr_assert_geq(k, 0, "the pool-first mutant was not found (%d proposals)", c.n);
    const ts_graph *m = c.g[k];
    expect_same(g, m);
    cr_assert_eq(count_op(m, "Pad"), 0, "the Pad of zeros goes with the pair");
    for (int i = 0; i < m->nnodes; i++)
        if (!m->nodes[i].dead && !strcmp(m->nodes[i].op->name, "Conv"))
            cr_assert_eq(m->values[m->nodes[i].outputs[0]].shape.dims[2], 8, "the conv runs on the pooled 8x8");
    for (int i = 0; i < c.n; i++) expect_same(g, c.g[i]);
    free_all(&c);
    ts_graph_free(g);
}
