/* Graph optimization levels and the plan's skip list (tsopt.h ts_graph_opt,
 * ts_plan_opts.skip; src/opt/levels.c, src/exec/skip.c): each level's
 * rewrites are made or left out, a skipped kernel is not used, the level's
 * passes keep the graph's function and a planted wrong variant of each is
 * refuted by the optimizer's check (src/opt/check.c). */
#include "exec_check.h"
#include "ops/attrs.h"
#include "ops/list.h"
#include "opt/check.h"
#include "ops/gelu_form.h"
#include "opt/passes.h"
#include "pet/pet.h"
#include "rules/rule.h"

/* DenseNet's transition: conv 1x1 -> AveragePool 2x2 stride 2. */
static ts_graph *transition(void)
{
    uint64_t rng = 7;
    ts_graph *g = ts_graph_new("t", 13);
    int y = xt_conv1x1(g, xt_input(g, "x", "1x32x16x16"), 32, 16, &rng);
    const int64_t k[] = {2, 2};
    y = xt_node(g, "AveragePool", INS(y), ATTRS(ts_attr_ints("kernel_shape", k, 2), ts_attr_ints("strides", k, 2)));
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

static int pool_steps(const ts_graph *g, const ts_plan_opts *o)
{
    ts_plan *p = xt_plan_check(g, o, 3, -1, 1, 1e-4, XT_TOL_MAX);
    int k = xt_steps_of(p, "dnnl.pool");
    ts_plan_free(p);
    return k;
}

/* Rewrites level l makes on a copy of g. */
static int rewrites(const ts_graph *g, ts_graph_opt l)
{
    ts_error e = {0};
    ts_graph *c = ts_graph_copy(g);
    int n = ts_graph_opt_apply(c, l, &e);
    cr_assert_geq(n, 0, "%s", e.msg);
    ts_graph_free(c);
    return n;
}

/* The pool-first rewrite is BASIC's: made at BASIC, ALL and the default,
 * not at NONE; a kernel listed in skip or $TSOPT_SKIP is not used. */
Test(graph_opt, levels_and_skip)
{
    ts_graph *g = transition();
    cr_assert_eq(rewrites(g, TS_GRAPH_OPT_DEFAULT), 1);
    cr_assert_eq(rewrites(g, TS_GRAPH_OPT_ALL), 1);
    cr_assert_eq(rewrites(g, TS_GRAPH_OPT_BASIC), 1);
    cr_assert_eq(rewrites(g, TS_GRAPH_OPT_NONE), 0);
    cr_assert_eq(pool_steps(g, NULL), 1);
    cr_assert_eq(pool_steps(g, &(ts_plan_opts){.skip = "winograd,dnnl.pool"}), 0);
    cr_assert_eq(pool_steps(g, &(ts_plan_opts){.skip = "dnnl.pool_not"}), 1);
    setenv("TSOPT_SKIP", " dnnl.pool ", 1);
    cr_assert_eq(pool_steps(g, NULL), 0);
    unsetenv("TSOPT_SKIP");
    ts_graph_free(g);
}

Test(graph_opt, names)
{
    ts_graph_opt l = TS_GRAPH_OPT_DEFAULT;
    cr_assert(ts_graph_opt_parse("none", &l) && l == TS_GRAPH_OPT_NONE);
    cr_assert(ts_graph_opt_parse("basic", &l) && l == TS_GRAPH_OPT_BASIC);
    cr_assert(ts_graph_opt_parse("all", &l) && l == TS_GRAPH_OPT_ALL);
    cr_assert_not(ts_graph_opt_parse("extended", &l));
    cr_assert_str_eq(ts_graph_opt_name(TS_GRAPH_OPT_DEFAULT), "all");
    ts_error e = {0};
    ts_graph *g = ts_graph_new("t", 13);
    cr_assert_eq(ts_graph_opt_apply(g, (ts_graph_opt)7, &e), -1);
    cr_assert(strstr(e.msg, "none, basic or all"), "%s", e.msg);
    ts_graph_free(g);
}

/* x -> LeakyRelu(0.1), LeakyRelu(0.1), LeakyRelu(0.2) -> summed: one
 * duplicate. */
static ts_graph *duplicates(void)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = xt_input(g, "x", "4x64");
    int a = xt_node(g, "LeakyRelu", INS(x), ATTRS(ts_attr_float("alpha", 0.1)));
    int b = xt_node(g, "LeakyRelu", INS(x), ATTRS(ts_attr_float("alpha", 0.1)));
    int c = xt_node(g, "LeakyRelu", INS(x), ATTRS(ts_attr_float("alpha", 0.2)));
    int s = xt_node(g, "Add", INS(a, b), NOATTR);
    xt_output(g, xt_node(g, "Add", INS(s, c), NOATTR));
    return g;
}

static int live_nodes(const ts_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !g->nodes[i].dead;
    return n;
}

/* The planted wrong CSE: merges nodes of one operator on the same inputs
 * whatever their attributes. */
static void cse_ignoring_attributes(ts_graph *g)
{
    for (int n = 0; n < g->nnodes; n++)
        for (int m = 0; m < n; m++) {
            ts_node *a = &g->nodes[m], *b = &g->nodes[n];
            if (a->dead || b->dead || a->op != b->op || a->inputs[0] != b->inputs[0] || a->ninputs != 1) continue;
            for (int k = 0; k < g->nnodes; k++)
                for (int j = 0; j < g->nodes[k].ninputs; j++)
                    if (g->nodes[k].inputs[j] == b->outputs[0]) g->nodes[k].inputs[j] = a->outputs[0];
            b->dead = true;
        }
}

static double check(const ts_graph *g0, const ts_graph *g1)
{
    double worst = 0;
    ts_error e = {0};
    cr_assert_eq(ts_opt_check(g0, g1, 11, &worst, &e), TS_OK, "%s", e.msg);
    return worst;
}

Test(graph_opt, cse_checked_and_wrong_variant_refuted)
{
    ts_graph *g0 = duplicates(), *g1 = ts_graph_copy(g0), *bad = ts_graph_copy(g0);
    ts_error e = {0};
    cr_assert_eq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_NONE, &e), 0);
    cr_assert_eq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_BASIC, &e), 1, "%s", e.msg);
    cr_assert_eq(live_nodes(g1), live_nodes(g0) - 1);
    cr_assert_eq(check(g0, g1), 0, "CSE changed the outputs");
    cse_ignoring_attributes(bad);
    cr_assert_eq(live_nodes(bad), live_nodes(g0) - 2);
    cr_assert_gt(check(g0, bad), 1, "the planted CSE merging alpha 0.1 and 0.2 was not refuted");
    ts_graph_free(g0);
    ts_graph_free(g1);
    ts_graph_free(bad);
}

/* x -> Conv 1x1 (bias) -> AveragePool k x k stride k, pads p, counting
 * them (count_include_pad=1) -> Neg. */
static ts_graph *conv_pool(int pads, bool pool_first)
{
    uint64_t rng = 5;
    ts_graph *g = ts_graph_new("t", 13);
    int x = xt_input(g, "x", "1x8x12x12");
    int w = xt_const_random(g, "4x8x1x1", -0.5, 0.5, &rng), b = xt_const_random(g, "4", 0.5, 1, &rng);
    const int64_t k[] = {2, 2}, pd[] = {pads, pads, pads, pads};
    const ts_attr pa[] = {ts_attr_ints("kernel_shape", k, 2), ts_attr_ints("strides", k, 2), ts_attr_ints("pads", pd, 4),
                          ts_attr_int("count_include_pad", 1)};
    int y;
    if (pool_first) {
        y = xt_node(g, "AveragePool", INS(x), pa, 4);
        y = xt_node(g, "Conv", INS(y, w, b), NOATTR);
    } else {
        y = xt_node(g, "Conv", INS(x, w, b), NOATTR);
        y = xt_node(g, "AveragePool", INS(y), pa, 4);
    }
    xt_output(g, xt_node(g, "Neg", INS(y), NOATTR));
    return g;
}

static bool equal_modp(const ts_graph *a, const ts_graph *b)
{
    bool eq = false;
    ts_error e = {0};
    cr_assert_eq(ts_pet_equal_modp(a, b, 3, 1, &eq, &e), TS_OK, "%s", e.msg);
    return eq;
}

/* Pool before a 1x1 conv (BASIC): made where the windows tile the image,
 * equal to the original in F_p (PET's check of its mutants: both are
 * linear) and within float tolerance; the planted variant that also swaps
 * a padded pool counting its padding (the bias would be averaged with the
 * conv's zeros) is refuted by both checks, and the pass leaves that graph
 * alone. */
Test(graph_opt, pool_first_checked_and_wrong_variant_refuted)
{
    ts_graph *g0 = conv_pool(0, false), *g1 = ts_graph_copy(g0);
    ts_error e = {0};
    cr_assert_eq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_NONE, &e), 0);
    cr_assert_eq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_BASIC, &e), 1, "%s", e.msg);
    for (int n = 0; n < g1->nnodes; n++)
        if (g1->nodes[n].inputs[0] == g1->inputs[0])
            cr_assert_eq(g1->nodes[n].op, &ts_op_avgpool, "x is read by a %s", g1->nodes[n].op->name);
    cr_assert(equal_modp(g0, g1));
    cr_assert_leq(check(g0, g1), 1);
    ts_graph *p0 = conv_pool(1, false), *planted = conv_pool(1, true), *p1 = ts_graph_copy(p0);
    cr_assert_eq(ts_graph_opt_apply(p1, TS_GRAPH_OPT_ALL, &e), 0, "the padded pool was swapped");
    cr_assert_not(equal_modp(p0, planted), "the planted pool-first over padding was not refuted in F_p");
    cr_assert_gt(check(p0, planted), 1, "the planted pool-first over padding was not refuted in float");
    ts_graph_free(g0);
    ts_graph_free(g1);
    ts_graph_free(p0);
    ts_graph_free(p1);
    ts_graph_free(planted);
}

/* x [4, 6, 32] -> LayerNorm written out over the last axis (var_axis: the
 * axis the variance's ReduceMean reduces; pow: the exponent of the square)
 * -> * gamma + beta -> Relu; or, fused, LayerNormalization(x, gamma, beta)
 * -> Relu. */
static ts_graph *layernorm(int var_axis, double pow, bool fused)
{
    uint64_t rng = 9;
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "4x6x32");
    int gamma = xt_const_random(g, "32", 0.5, 1.5, &rng), beta = xt_const_random(g, "32", -0.5, 0.5, &rng), y;
    const int64_t last[] = {-1}, var[] = {var_axis};
    if (fused) {
        y = xt_node(g, "LayerNormalization", INS(x, gamma, beta), ATTRS(ts_attr_float("epsilon", 1e-5)));
    } else {
        int mu = xt_node(g, "ReduceMean", INS(x), ATTRS(ts_attr_ints("axes", last, 1)));
        int d = xt_node(g, "Sub", INS(x, mu), NOATTR);
        int sq = xt_node(g, "Pow", INS(d, xt_const_values(g, TS_F32, "", &pow, 1)), NOATTR);
        int v = xt_node(g, "ReduceMean", INS(sq), ATTRS(ts_attr_ints("axes", var, 1)));
        double eps = 1e-5;
        int sd = xt_node(g, "Sqrt", INS(xt_node(g, "Add", INS(v, xt_const_values(g, TS_F32, "", &eps, 1)), NOATTR)),
                         NOATTR);
        y = xt_node(g, "Div", INS(d, sd), NOATTR);
        y = xt_node(g, "Add", INS(xt_node(g, "Mul", INS(y, gamma), NOATTR), beta), NOATTR);
    }
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

static int count_op(const ts_graph *g, const ts_op_desc *op)
{
    int k = 0;
    for (int n = 0; n < g->nnodes; n++) k += !g->nodes[n].dead && g->nodes[n].op == op;
    return k;
}

/* LayerNorm spelled out -> LayerNormalization (ALL, not BASIC), within
 * float tolerance; not where the variance reduces another axis or the
 * square is a cube, and the planted variant fusing those is refuted. */
Test(graph_opt, layernorm_checked_and_wrong_variants_refuted)
{
    ts_graph *g0 = layernorm(-1, 2, false), *g1 = ts_graph_copy(g0);
    ts_error e = {0};
    cr_assert_eq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_BASIC, &e), 0, "%s", e.msg);
    cr_assert_eq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_ALL, &e), 1, "%s", e.msg);
    cr_assert_eq(count_op(g1, &ts_op_layernorm), 1);
    cr_assert_eq(live_nodes(g1), 2, "LayerNormalization and the Relu left, got %d nodes", live_nodes(g1));
    cr_assert_leq(check(g0, g1), 1);
    ts_plan *p = xt_plan_check(g1, NULL, 3, -2, 2, 1e-4, XT_TOL_MAX);
    cr_assert_eq(xt_steps_of(p, "vec.layernorm"), 1);
    ts_plan_free(p);
    /* the LayerNorm's result also a graph output: fused, its name kept */
    ts_graph *o0 = layernorm(-1, 2, false), *o1;
    for (int n = 0; n < o0->nnodes; n++)
        if (o0->nodes[n].op == &ts_op_relu) xt_output(o0, o0->nodes[n].inputs[0]);
    const char *name = o0->values[o0->outputs[1]].name;
    o1 = ts_graph_copy(o0);
    cr_assert_eq(ts_graph_opt_apply(o1, TS_GRAPH_OPT_ALL, &e), 1, "%s", e.msg);
    cr_assert_eq(count_op(o1, &ts_op_layernorm), 1);
    cr_assert_str_eq(o1->values[o1->outputs[1]].name, name, "the graph output was renamed");
    cr_assert_leq(check(o0, o1), 1);
    ts_graph_free(o0);
    ts_graph_free(o1);
    const struct {
        int axis;
        double pow;
    } wrong[] = {{1, 2}, {-1, 3}};
    ts_graph *planted = layernorm(-1, 2, true);
    for (int i = 0; i < 2; i++) {
        ts_graph *w0 = layernorm(wrong[i].axis, wrong[i].pow, false), *w1 = ts_graph_copy(w0);
        cr_assert_eq(ts_graph_opt_apply(w1, TS_GRAPH_OPT_ALL, &e), 0, "wrong spelling %d fused", i);
        cr_assert_gt(check(w0, planted), 1, "the planted fusion of wrong spelling %d was not refuted", i);
        ts_graph_free(w0);
        ts_graph_free(w1);
    }
    ts_graph_free(planted);
    ts_graph_free(g0);
    ts_graph_free(g1);
}

/* x [2, 19, 13] -> MatMul + bias -> GELU spelled as an exporter does
 * (form 0: PyTorch's erf, 1: Hugging Face's, 2: tanh with Pow(h, 3), 3:
 * PyTorch's tanh with h * (h * h)) -> a graph output.  half: the 0.5 of
 * the erf forms (any other: a wrong constant); cube: a look-alike adding
 * cube * h^3; fused: Gelu(h) itself (opset 20's operator). */
static ts_graph *gelu(int form, double half, double cube, bool fused)
{
    uint64_t rng = 5;
    ts_graph *g = ts_graph_new("t", 14);
#define K(v) xt_const_values(g, TS_F32, "", (const double[]){v}, 1)
#define OP(name, ...) xt_node(g, name, INS(__VA_ARGS__), NOATTR)
    int x = xt_input(g, "x", "2x19x13");
    int h = OP("Add", OP("MatMul", x, xt_const_random(g, "13x37", -1, 1, &rng)), xt_const_random(g, "37", -1, 1, &rng));
    int y;
    if (fused) {
        const ts_attr a = ts_attr_string("approximate", form >= 2 ? "tanh" : "none");
        y = xt_node(g, "Gelu", INS(h), &a, 1);
    } else if (form == 0) {
        int a = OP("Add", OP("Erf", OP("Div", h, K(1.4142135623730951))), K(1.0));
        y = OP("Mul", OP("Mul", h, a), K(half));
    } else if (form == 1) {
        int e = OP("Erf", OP("Mul", K(0.7071067811865476), h));
        y = OP("Mul", OP("Mul", h, K(half)), OP("Add", K(1.0), e));
    } else {
        int h3 = form == 2 ? OP("Pow", h, K(3.0)) : OP("Mul", h, OP("Mul", h, h));
        int in = OP("Mul", OP("Add", h, OP("Mul", h3, K(0.044715))), K(0.7978845608028654));
        y = OP("Mul", K(0.5), OP("Mul", h, OP("Add", OP("Tanh", in), K(1.0))));
    }
    if (cube != 0) y = OP("Add", y, OP("Mul", OP("Pow", h, K(3.0)), K(cube)));
#undef K
#undef OP
    xt_output(g, y);
    return g;
}

/* Each exporter's GELU -> one Gelu node (ALL, not BASIC) writing the
 * graph output under its name, within tolerance of the graph as written,
 * and planned as the MatMul's gelu post-op (one step); a wrong constant
 * and the GELU + 1e-9 x^3 look-alike are left as written, and the planted
 * fusion of the wrong constant is refuted. */
Test(graph_opt, gelu_checked_and_wrong_variants_refuted)
{
    ts_error e = {0};
    for (int form = 0; form < 4; form++) {
        ts_graph *g0 = gelu(form, 0.5, 0, false), *g1 = ts_graph_copy(g0);
        const char *out = g0->values[g0->outputs[0]].name;
        cr_assert_eq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_BASIC, &e), 0, "%s", e.msg);
        cr_assert_eq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_ALL, &e), 1, "form %d: %s", form, e.msg);
        cr_assert_eq(count_op(g1, &ts_op_gelu), 1);
        cr_assert_eq(live_nodes(g1), 3, "form %d: MatMul, Add, Gelu left, got %d nodes", form, live_nodes(g1));
        cr_assert_str_eq(g1->values[g1->outputs[0]].name, out, "the graph output was renamed");
        cr_assert_eq(((const ts_gelu_attrs *)g1->nodes[g1->values[g1->outputs[0]].producer].attrs)->tanh, form >= 2);
        cr_assert_leq(check(g0, g1), 1, "form %d", form);
        ts_plan_stats st = xt_plan_stats(g1, NULL, 3, -3, 3, 1e-4, XT_TOL_MAX); /* the Gelu node's post-op */
        cr_assert_eq(st.steps, 1, "form %d: the Gelu is not the MatMul's post-op", form);
        ts_graph_free(g0);
        ts_graph_free(g1);
    }
    ts_graph *planted = gelu(0, 0.5, 0, true);
    const struct {
        double half, cube;
    } wrong[] = {{0.6, 0}, {0.5, 1e-9}};
    for (int i = 0; i < 2; i++) {
        ts_graph *w0 = gelu(0, wrong[i].half, wrong[i].cube, false), *w1 = ts_graph_copy(w0);
        cr_assert_eq(ts_graph_opt_apply(w1, TS_GRAPH_OPT_ALL, &e), 0, "wrong spelling %d fused", i);
        ts_graph_free(w0);
        ts_graph_free(w1);
    }
    ts_graph *w0 = gelu(0, 0.6, 0, false);
    cr_assert_gt(check(w0, planted), 1, "the planted fusion of the wrong constant was not refuted");
    ts_graph_free(w0);
    ts_graph_free(planted);
}

/* ---- ts_fold_affine (BASIC): per-channel scales and shifts into the
 * product's weights and bias */

static double *uniform(int n, double lo, double hi, uint64_t *rng)
{
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) {
        *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = lo + (hi - lo) * (double)(*rng >> 11) / 9007199254740992.0;
    }
    return v;
}

/* x [1, 8, 6, 6] -> Conv 1x1 (W, B) -> [BatchNormalization] -> Mul s ->
 * Add t [6, 1, 1] -> Relu.  form 0: with the BatchNormalization, s
 * [1, 6, 1, 1]; 1: without; 2: s [6] varies along the width, not the
 * channels; 3: the planted wrong fold of 2 (channel f scaled by the
 * width's s[f]); 4: the planted wrong fold of 1 (the bias not scaled). */
static ts_graph *conv_affine(int form)
{
    uint64_t rng = 3;
    double *w = uniform(48, -0.5, 0.5, &rng), *b = uniform(6, -1, 1, &rng), *s = uniform(6, 0.5, 2, &rng),
           *t = uniform(6, -1, 1, &rng), *bn = uniform(24, 0.5, 1.5, &rng);
    ts_graph *g = ts_graph_new("t", 13);
    int x = xt_input(g, "x", "1x8x6x6");
    for (int f = 0; form >= 3 && f < 6; f++) {
        for (int c = 0; c < 8; c++) w[f * 8 + c] *= s[f];
        b[f] = form == 3 ? b[f] * s[f] : b[f] + t[f];
    }
    int y = xt_node(g, "Conv", INS(x, xt_const_values(g, TS_F32, "6x8x1x1", w, 48), xt_const_values(g, TS_F32, "6", b, 6)),
                    NOATTR);
    if (form == 0)
        y = xt_node(g, "BatchNormalization",
                    INS(y, xt_const_values(g, TS_F32, "6", bn, 6), xt_const_values(g, TS_F32, "6", bn + 6, 6),
                        xt_const_values(g, TS_F32, "6", bn + 12, 6), xt_const_values(g, TS_F32, "6", bn + 18, 6)),
                    NOATTR);
    if (form < 3) y = xt_node(g, "Mul", INS(y, xt_const_values(g, TS_F32, form == 2 ? "6" : "1x6x1x1", s, 6)), NOATTR);
    if (form != 4) y = xt_node(g, "Add", INS(y, xt_const_values(g, TS_F32, "6x1x1", t, 6)), NOATTR);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    free(w), free(b), free(s), free(t), free(bn);
    return g;
}

/* x [2, 5, 16] -> MatMul W [16, 12] -> Add c [12] -> Mul s [12], a graph
 * output (gemm: Gemm transB W [12, 16] with C [12] on x [5, 16]). */
static ts_graph *matmul_affine(bool gemm)
{
    uint64_t rng = 4;
    ts_graph *g = ts_graph_new("t", 13);
    int y;
    if (gemm)
        y = xt_node(g, "Gemm",
                    INS(xt_input(g, "x", "5x16"), xt_const_random(g, "12x16", -1, 1, &rng),
                        xt_const_random(g, "12", -1, 1, &rng)),
                    ATTRS(ts_attr_int("transB", 1), ts_attr_float("beta", 0.5)));
    else
        y = xt_node(g, "MatMul", INS(xt_input(g, "x", "2x5x16"), xt_const_random(g, "16x12", -1, 1, &rng)), NOATTR);
    y = xt_node(g, "Add", INS(y, xt_const_random(g, "12", -1, 1, &rng)), NOATTR);
    xt_output(g, xt_node(g, "Mul", INS(xt_const_random(g, "12", 0.5, 2, &rng), y), NOATTR));
    return g;
}

/* x [1, 4, 5, 5] -> ConvTranspose group 2 (W [4, 3, 3, 3]: 6 channels out)
 * -> Mul s [1, 6, 1, 1]. */
static ts_graph *deconv_affine(void)
{
    uint64_t rng = 6;
    ts_graph *g = ts_graph_new("t", 13);
    int y = xt_node(g, "ConvTranspose", INS(xt_input(g, "x", "1x4x5x5"), xt_const_random(g, "4x3x3x3", -1, 1, &rng)),
                    ATTRS(ts_attr_int("group", 2)));
    xt_output(g, xt_node(g, "Mul", INS(y, xt_const_random(g, "1x6x1x1", 0.5, 2, &rng)), NOATTR));
    return g;
}

/* Each product's chain folded at BASIC (not NONE) into it, within float
 * tolerance of the graph as written (the graph output's name kept); a Mul
 * varying along the width is left alone, and the planted folds (the width
 * scale taken per channel; the bias not scaled) are refuted. */
Test(graph_opt, affine_fold_checked_and_wrong_variants_refuted)
{
    ts_error e = {0};
    const int live[] = {2, 2, 2, 1, 1};
    for (int i = 0; i < 5; i++) {
        ts_graph *g0 = i < 2 ? conv_affine(i) : i == 4 ? deconv_affine() : matmul_affine(i == 3);
        ts_graph *g1 = ts_graph_copy(g0);
        const char *out = g0->values[g0->outputs[0]].name;
        cr_assert_eq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_NONE, &e), 0);
        cr_assert_eq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_BASIC, &e), 1, "case %d: %s", i, e.msg);
        cr_assert_eq(live_nodes(g1), live[i], "case %d: %d nodes left", i, live_nodes(g1));
        cr_assert_str_eq(g1->values[g1->outputs[0]].name, out, "case %d: the graph output was renamed", i);
        double wv = check(g0, g1);
        cr_assert_leq(wv, 1, "case %d: %g", i, wv);
        ts_graph_free(g0);
        ts_graph_free(g1);
    }
    ts_graph *w0 = conv_affine(2), *w1 = ts_graph_copy(w0);
    cr_assert_eq(ts_graph_opt_apply(w1, TS_GRAPH_OPT_ALL, &e), 0, "the Mul along the width was folded");
    const struct {
        int form, planted;
    } wrong[] = {{2, 3}, {1, 4}};
    for (int i = 0; i < 2; i++) {
        ts_graph *g0 = conv_affine(wrong[i].form), *planted = conv_affine(wrong[i].planted);
        cr_assert_gt(check(g0, planted), 1, "the planted fold %d was not refuted", wrong[i].planted);
        ts_graph_free(g0);
        ts_graph_free(planted);
    }
    ts_graph_free(w0);
    ts_graph_free(w1);
}

/* The lowering's contract (exec/step_check.c): a step reads only inputs of
 * the nodes it implements.  x -> Relu -> Neg, one step per node: the Neg
 * step passes the check; the planted one reading x (the Relu's input, not
 * the Neg's) is refused, naming x. */
Test(graph_opt, step_reads_only_its_nodes)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = xt_input(g, "x", "4x8");
    xt_output(g, xt_node(g, "Neg", INS(xt_node(g, "Relu", INS(x), NOATTR)), NOATTR));
    ts_plan *plan = NULL;
    ts_error e = {0};
    cr_assert_eq(ts_plan_build(g, &(ts_plan_opts){.no_fusion = true}, &plan, &e), TS_OK, "%s", e.msg);
    const xplan *p = (const xplan *)plan;
    const xstep *neg = NULL;
    for (int i = 0; i < p->nsteps; i++)
        if (g->nodes[p->steps[i].node].op == &ts_op_neg) neg = &p->steps[i];
    cr_assert(neg && neg->nin == 1);
    cr_assert_eq(xstep_check_reads(p, neg, NULL, 0, p->nbufs, &e), TS_OK, "%s", e.msg);
    xstep planted = *neg;
    int in = p->value_buf[x];
    planted.in = &in;
    cr_assert_eq(xstep_check_reads(p, &planted, NULL, 0, p->nbufs, &e), TS_ERR_INVALID, "the planted read passed");
    cr_assert(strstr(e.msg, "reads value 'x'"), "%s", e.msg);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* x [N, 16, 40, 40] -> gate g = Sigmoid(GlobalAveragePool(x)) (one value
 * per channel, or per image and channel when N > 1) -> Mul(x, g) -> Conv
 * (F x 16 x 3 x 3 / group, pads 1) -> Relu.  wrong: the planted fold that
 * scales the weights' output channels (dimension 0) instead, gate
 * reshaped to [16, 1, 1, 1] (F = 16). */
static ts_graph *gated(int N, int F, int group, bool fold, bool wrong)
{
    uint64_t rng = 21;
    char xd[32], wd[32];
    snprintf(xd, sizeof xd, "%dx16x40x40", N);
    snprintf(wd, sizeof wd, "%dx%dx3x3", F, 16 / group);
    ts_graph *g = ts_graph_new("t", 13);
    int x = xt_input(g, "x", xd), w = xt_const_random(g, wd, -0.5, 0.5, &rng);
    int gate = xt_node(g, "Sigmoid", INS(xt_node(g, "GlobalAveragePool", INS(x), NOATTR)), NOATTR);
    const int64_t pads[] = {1, 1, 1, 1};
    const ts_attr ca[] = {ts_attr_ints("pads", pads, 4), ts_attr_int("group", group)};
    int y;
    if (fold) {
        if (wrong) {
            const double to[] = {16, 1, 1, 1};
            gate = xt_node(g, "Reshape", INS(gate, xt_const_values(g, TS_I64, "4", to, 4)), NOATTR);
        }
        y = xt_node(g, "Conv", INS(x, xt_node(g, "Mul", INS(w, gate), NOATTR)), ca, 2);
    } else {
        y = xt_node(g, "Conv", INS(xt_node(g, "Mul", INS(x, gate), NOATTR), w), ca, 2);
    }
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

/* The gate fold (ALL, opt/fold_gate.c): made once, equal to the original
 * within tolerance and lowered as one dnnl.conv_gated step; left alone at
 * BASIC, with a gate per image (batch 2), a grouped conv, and weights over
 * a quarter of x; the planted fold onto the output channels is refuted. */
Test(graph_opt, gate_fold_checked_and_wrong_variant_refuted)
{
    ts_error e = {0};
    ts_graph *g0 = gated(1, 16, 1, false, false), *g1 = ts_graph_copy(g0);
    cr_assert_eq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_BASIC, &e), 0, "%s", e.msg);
    cr_assert_eq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_ALL, &e), 1, "%s", e.msg);
    cr_assert_leq(check(g0, g1), 1);
    ts_plan *p = xt_plan_check(g1, NULL, 5, -1, 1, 1e-4, XT_TOL_MAX);
    cr_assert_eq(xt_steps_of(p, "dnnl.conv_gated"), 1);
    ts_plan_free(p);
    const struct {
        int N, F, group;
    } keep[] = {{2, 16, 1}, {1, 16, 2}, {1, 200, 1}};
    for (int i = 0; i < 3; i++) {
        ts_graph *k = gated(keep[i].N, keep[i].F, keep[i].group, false, false);
        cr_assert_eq(ts_fold_gate(k, &e), 0, "case %d folded", i);
        ts_graph_free(k);
    }
    ts_graph *planted = gated(1, 16, 1, true, true);
    cr_assert_gt(check(g0, planted), 1, "the planted fold onto the output channels was not refuted");
    ts_graph_free(planted);
    ts_graph_free(g0);
    ts_graph_free(g1);
}

/* A constant or input tensor of dt over dims, values k / q for integers k
 * with lo <= k / q < hi drawn from *rng. */
static ts_tensor *grid_tensor(ts_dtype dt, const char *dims, int lo, int hi, int q, uint64_t *rng)
{
    ts_error e = {0};
    ts_shape s = xt_shape(dims);
    ts_tensor *t = ts_tensor_new(dt, &s, &e);
    cr_assert_not_null(t, "%s", e.msg);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) {
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        int64_t k = lo * q + (int64_t)((*rng >> 33) % (uint64_t)((hi - lo) * q));
        ts_tensor_set_f64(t, i, (double)(k ? k : 1) / q);
    }
    return t;
}

/* x [1, 16, 8, 8] and gate [1, 16, 1, 1] (inputs) -> Mul -> Conv 1x1 by W
 * [16, 16, 1, 1] in type dt, with the values chosen so that every sum is
 * exact in float32 and the only roundings are the graph's 16-bit ones: x
 * in multiples of 1/16, |W| in [1/2, 1) in multiples of 1/64, the gate in
 * [1/2, 1) in multiples of 1/128, so W * gate has 13 significant bits and
 * rounding it to 11 (float16) or 8 (bfloat16) bits changes it. */
static ts_graph *gated_half(ts_dtype dt, ts_dtype out)
{
    uint64_t rng = 77;
    ts_error e = {0};
    ts_graph *g = ts_graph_new("t", 17);
    ts_shape xs = xt_shape("1x16x8x8"), gs = xt_shape("1x16x1x1");
    int x = ts_graph_add_input(g, "x", dt, &xs, &e), gate = ts_graph_add_input(g, "gate", dt, &gs, &e);
    ts_tensor *w = grid_tensor(dt, "16x16x1x1", -1, 1, 64, &rng);
    for (int64_t i = 0; i < ts_tensor_numel(w); i++) {
        double v = ts_tensor_get_f64(w, i);
        ts_tensor_set_f64(w, i, fabs(v) < 0.5 ? v + (v < 0 ? -0.5 : 0.5) : v);
    }
    int y = xt_node(g, "Conv", INS(xt_node(g, "Mul", INS(x, gate), NOATTR), xt_const(g, w)), NOATTR);
    if (out != dt) y = xt_node(g, "Cast", INS(y), ATTRS(ts_attr_int("to", out == TS_F16 ? 10 : 16)));
    cr_assert_eq(ts_graph_add_output(g, y, &e), TS_OK, "%s", e.msg);
    return g;
}

/* The gate fold in float16 and bfloat16 graphs (ts_fold_gate took float32
 * only): folded, lowered as one dnnl.conv_gated step (the conv fused into
 * the Mul's step, inside half.step) that rounds the scaled weights to the
 * graph's type, and equal to the reference
 * interpreter bit for bit on the folded graph; the same graph with the
 * weights scaled in float32 (`loose`, only its output 16-bit) differs, so
 * a step that skipped the rounding would fail.  Not fused past the
 * rounding with TSOPT_SKIP=half.fuse (the conv then has run-time weights:
 * the reference kernel). */
Test(graph_opt, gate_fold_half)
{
    /* the plan that rounds every node (exec/half.h xhalf_native_f16), whatever this CPU has */
    setenv("TSOPT_HALF_NATIVE", "0", 1);
    ts_dtype types[] = {TS_F16, TS_BF16};
    for (int k = 0; k < 2; k++) {
        ts_error e = {0};
        ts_graph *g = gated_half(types[k], types[k]), *loose = gated_half(TS_F32, types[k]);
        cr_assert_eq(ts_graph_opt_apply(g, TS_GRAPH_OPT_ALL, &e), 1, "%s: %s", ts_dtype_name(types[k]), e.msg);
        cr_assert_eq(ts_graph_opt_apply(loose, TS_GRAPH_OPT_ALL, &e), 1, "%s", e.msg);
        uint64_t rng = 5;
        ts_tensor *in[2] = {grid_tensor(types[k], "1x16x8x8", -1, 1, 16, &rng),
                            grid_tensor(types[k], "1x16x1x1", 0, 1, 128, &rng)};
        for (int64_t i = 0; i < 16; i++)
            ts_tensor_set_f64(in[1], i, 0.5 + fmod(ts_tensor_get_f64(in[1], i), 0.5));
        ts_tensor *in64[2];
        for (int j = 0; j < 2; j++) {
            in64[j] = ts_tensor_new(TS_F64, &in[j]->shape, &e);
            for (int64_t i = 0; i < ts_tensor_numel(in[j]); i++) {
                cr_assert_eq(ts_dtype_round(types[k], ts_tensor_get_f64(in[j], i)), ts_tensor_get_f64(in[j], i));
                ts_tensor_set_f64(in64[j], i, ts_tensor_get_f64(in[j], i));
            }
        }
        ts_tensor *ref = NULL, *unrounded = NULL;
        cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F64, in64, &ref, &e), TS_OK, "%s", e.msg);
        cr_assert_eq(ts_graph_run_reference(loose, TS_DOMAIN_F64, in64, &unrounded, &e), TS_OK, "%s", e.msg);
        for (int skip = 0; skip < 2; skip++) {
            ts_plan *p = NULL;
            ts_plan_opts o = {.skip = skip ? "half.fuse" : NULL};
            cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
            ts_plan_stats st;
            ts_plan_stats_get(p, &st);
            cr_assert_eq(st.fused_nodes, !skip, "%s skip %d: %d fused", ts_dtype_name(types[k]), skip, st.fused_nodes);
            cr_assert_eq(st.fallback_steps, skip, "%s skip %d", ts_dtype_name(types[k]), skip);
            ts_tensor *out = ts_tensor_new(types[k], &ref->shape, &e);
            cr_assert_eq(ts_plan_run(p, in, &out, &e), TS_OK, "%s", e.msg);
            int differ = 0;
            for (int64_t i = 0; !skip && i < ts_tensor_numel(ref); i++) {
                double got = ts_tensor_get_f64(out, i), want = ts_tensor_get_f64(ref, i);
                cr_assert_eq(got, want, "%s [%lld]: %.9g, reference %.9g (weights unrounded: %.9g)",
                             ts_dtype_name(types[k]), (long long)i, got, want, ts_tensor_get_f64(unrounded, i));
                differ += ts_tensor_get_f64(unrounded, i) != want;
            }
            cr_assert(skip || differ > 0, "rounding the scaled weights changes no output: the test cannot fail");
            ts_tensor_unref(out);
            ts_plan_free(p);
        }
        for (int j = 0; j < 2; j++) {
            ts_tensor_unref(in[j]);
            ts_tensor_unref(in64[j]);
        }
        ts_tensor_unref(ref);
        ts_tensor_unref(unrounded);
        ts_graph_free(g);
        ts_graph_free(loose);
    }
}

/* ---- the fusions take only proved spellings (opt/fusion_proof.c) */

/* The nodes of rule pattern e on x (shape xs: 2x5x8 over the last axis, the
 * rule's axes otherwise).  ?eps a 1e-5 scalar; ?g, ?b constants along the
 * last axis.  A subterm written twice is built twice; CSE (level basic)
 * merges the copies as it does an exporter's. */
static int from_pattern(ts_graph *g, const ts_rexpr *e, int x, uint64_t *rng)
{
    if (e->op == TS_ROP_VAR) {
        if (!strcmp(e->var, "x")) return x;
        if (!strcmp(e->var, "eps")) return xt_const_values(g, TS_F32, "", (const double[]){1e-5}, 1);
        return xt_const_random(g, g->values[x].shape.rank == 4 ? "8x1x1" : "8", 0.5, 1.5, rng);
    }
    if (e->op == TS_ROP_NUM) return xt_const_values(g, TS_F32, "", (const double[]){e->p.value}, 1);
    int in[2];
    for (int i = 0; i < e->nargs; i++) in[i] = from_pattern(g, e->arg[i], x, rng);
    if (e->op != TS_ROP_REDUCEMEAN) return xt_node(g, ts_rop_table[e->op].op->name, in, e->nargs, NOATTR);
    int64_t axes[8];
    int na = 0;
    for (int a = -8; a < 8; a++)
        if (e->p.axes & ts_raxes_bit(a)) axes[na++] = a;
    return xt_node(g, "ReduceMean", in, 1, ATTRS(ts_attr_ints("axes", axes, na), ts_attr_int("keepdims", 1)));
}

/* Every GELU and trailing-axis LayerNorm rule of rules/fusions.rules,
 * built as a graph, is fused (one Gelu / LayerNormalization) and checked
 * equal to the graph as written; ConvNeXt's channel LayerNorm (r1) is the
 * plan's lowering, not a fusion.  A GELU that ops/gelu_form.c's algebra
 * accepts but no rule states (x * 0.25 * (2 * (1 + erf(x / sqrt 2))): the
 * same function, another spelling) is left as written: with the proof
 * gate taken out of fuse_gelu.c it would be fused, and this test fails. */
Test(graph_opt, fusions_take_only_proved_spellings)
{
    ts_rule *rules = NULL;
    int n = 0, fused = 0;
    ts_error e = {0};
    cr_assert_eq(ts_rules_parse_string(ts_fusions_rules, "fusions", &rules, &n, &e), TS_OK, "%s", e.msg);
    for (int r = 0; r < n; r++) {
        const ts_rule *ru = &rules[r];
        const bool gelu = !strncmp(ru->name, "gelu-", 5), r1 = strstr(ru->name, "-r1-") != NULL;
        uint64_t rng = 9 + (uint64_t)r;
        ts_graph *g0 = ts_graph_new("t", 14);
        int x = xt_input(g0, "x", r1 ? "2x8x3x3" : "2x5x8");
        xt_output(g0, from_pattern(g0, ru->lhs[0], x, &rng));
        ts_graph *g1 = ts_graph_copy(g0);
        cr_assert_geq(ts_graph_opt_apply(g1, TS_GRAPH_OPT_ALL, &e), 0, "%s: %s", ru->name, e.msg);
        const int k = count_op(g1, gelu ? &ts_op_gelu : &ts_op_layernorm);
        cr_expect_eq(k, !r1, "%s: %d fused nodes", ru->name, k);
        if (k) cr_expect_leq(check(g0, g1), 1, "%s", ru->name);
        fused += k;
        ts_graph_free(g0);
        ts_graph_free(g1);
    }
    cr_assert_geq(fused, n - 2);
    ts_rules_free(rules, n);

    ts_graph *g = ts_graph_new("t", 14);
#define K(v) xt_const_values(g, TS_F32, "", (const double[]){v}, 1)
#define OP(name, ...) xt_node(g, name, INS(__VA_ARGS__), NOATTR)
    int x = xt_input(g, "x", "2x5x8");
    int gate = OP("Mul", K(2.0), OP("Add", K(1.0), OP("Erf", OP("Div", x, K(1.4142135623730951)))));
    xt_output(g, OP("Mul", OP("Mul", x, K(0.25)), gate));
#undef K
#undef OP
    int nodes[GELU_MAX_NODES], nn;
    bool tanh_form;
    cr_assert_geq(ts_gelu_spelling(g, x, true, NULL, nodes, GELU_MAX_NODES, &nn, &tanh_form), 0,
                  "the algebra no longer takes the unstated spelling: the test would not show the gate");
    cr_assert_eq(ts_graph_opt_apply(g, TS_GRAPH_OPT_ALL, &e), 0, "a GELU spelling no rule states was fused");
    ts_graph_free(g);
}
