/* A convolution whose result is a graph output (src/dnnl/dnnl_conv.c).
 * It used to be kept off Winograd and written straight into the caller's
 * plain tensor; inside a graph the same conv ran on Winograd in 16-channel
 * blocks, 1.6x faster at 64 -> 64 channels, 56x56.  Now it runs on Winograd
 * too, writes its blocks into the arena, and the planner's final reorder
 * fills the caller's tensor.  Checked against the reference interpreter:
 * channel counts off the 16-channel blocks, a Relu, Add or residual fused
 * into it (sigmoid and SiLU too), a graph input read directly, a conv output that is both a graph
 * output and another conv's input, batch 2, and the plain-layout option. */
#define XT_GLOBAL_GRAPH
#include "exec_check.h"
#include "dnnl/dnnl_conv.h"

TestSuite(exec_conv_output, .fini = xt_done);

static uint64_t rng = 5150;

/* 3x3 conv, pads 1, C -> F with a bias. */
static int conv3(int x, int C, int F)
{
    char w[64], b[16];
    snprintf(w, sizeof w, "%dx%dx3x3", F, C);
    snprintf(b, sizeof b, "%d", F);
    int ins[] = {x, xt_const_random(G, w, -0.2, 0.2, &rng), xt_const_random(G, b, -0.5, 0.5, &rng)};
    return op("Conv", ins, 3, ATTRS(ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4)));
}

static int relu(int x) { return op("Relu", INS(x), NOATTR); }

/* The conv step writing value v (through its fused nodes): its step index,
 * or -1. */
static int conv_step_of(const xplan *p, int v)
{
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        if (strcmp(s->k->name, "dnnl.conv")) continue;
        if (p->bufs[s->out[0]].value == v) return i;
    }
    return -1;
}

/* Whether the plan has a step copying or reordering buffer b into the
 * caller's tensor. */
static bool reordered_out(const xplan *p, int b)
{
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        if (!strcmp(s->k->name, "reorder") && s->in[0] == b && p->bufs[s->out[0]].kind == XB_OUTPUT) return true;
    }
    return false;
}

/* Plans G, checks every output against the reference, and returns whether
 * the conv writing value v runs on Winograd; when it does and v is a graph
 * output, it writes an arena buffer that a reorder step converts. */
static bool check_wino(int v, const ts_plan_opts *o)
{
    ts_plan *plan = xt_plan_check(G, o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    const xplan *p = (const xplan *)plan;
    ts_plan_stats st;
    ts_plan_stats_get(plan, &st);
    cr_assert_eq(st.fallback_steps, 0);
    cr_assert_eq(st.ref_impls, 0);
    int i = conv_step_of(p, v);
    cr_assert_geq(i, 0, "no conv step writes value %d", v);
    bool wino = xd_conv_is_winograd(&p->steps[i], NULL);
    if (wino && ts_graph_is_output(G, v)) {
        int b = p->steps[i].out[0];
        cr_assert_eq(p->bufs[b].kind, XB_ARENA, "a Winograd graph output is written into the arena");
        cr_assert(p->bufs[b].blocked);
        cr_assert(reordered_out(p, b), "no reorder into the caller's tensor");
    }
    ts_plan_free(plan);
    return wino;
}

/* Whether this machine's oneDNN runs a C -> F 3x3 conv at HxW on Winograd
 * when the conv is inside the graph (a Relu reads it): the output case must
 * then do so too. */
static bool wino_inside(int64_t n, int C, int F, int H)
{
    graph(13);
    char d[64];
    snprintf(d, sizeof d, "%lldx%dx%dx%d", (long long)n, C, H, H);
    int y = conv3(relu(input(d)), C, F);
    int z = op("Neg", INS(y), NOATTR);
    xt_output(G, z);
    return check_wino(y, NULL);
}

Test(exec_conv_output, winograd_conv_as_graph_output)
{
    /* off the blocks (33 -> 35: 48 channels of padding in the blocks) and on
     * them; batch 1 and 2; the input a graph input read directly */
    const int shapes[][3] = {{33, 35, 9}, {64, 64, 12}, {32, 48, 7}};
    for (int k = 0; k < 3; k++)
        for (int64_t n = 1; n <= 2; n++) {
            int C = shapes[k][0], F = shapes[k][1], H = shapes[k][2];
            bool inside = wino_inside(n, C, F, H);
            char d[64];
            snprintf(d, sizeof d, "%lldx%dx%dx%d", (long long)n, C, H, H);
            /* conv + Relu, a graph output */
            graph(13);
            int y = relu(conv3(relu(input(d)), C, F));
            xt_output(G, y);
            cr_assert_eq(check_wino(y, NULL), inside, "%dx%d at %d: graph output %s Winograd", C, F, H,
                         inside ? "not on" : "on");
            /* straight from a graph input to a graph output */
            graph(13);
            y = conv3(input(d), C, F);
            xt_output(G, y);
            cr_assert_eq(check_wino(y, NULL), inside);
        }
}

Test(exec_conv_output, output_also_read_inside)
{
    /* the conv's output is a graph output and the next conv's input: the
     * blocked arena buffer feeds both the reorder and the conv */
    graph(13);
    int y = conv3(relu(input("1x40x10x10")), 40, 40);
    int z = relu(conv3(y, 40, 36));
    xt_output(G, y);
    xt_output(G, z);
    check_wino(y, NULL);
    check_wino(z, NULL);
    /* two outputs from one value, and the plain-layout option */
    graph(13);
    y = relu(conv3(relu(input("1x40x10x10")), 40, 40));
    xt_output(G, y);
    xt_output(G, y);
    check_wino(y, NULL);
    ts_plan_opts plain = {.plain_layout = true};
    cr_assert_not(check_wino(y, &plain), "plain layout: no Winograd");
}

Test(exec_conv_output, fused_add_as_graph_output)
{
    /* conv + residual Add (the residual dies at the Add but the result is a
     * graph output: no writing over the residual) and conv + per-channel Add */
    graph(13);
    int x = relu(input("1x48x9x9"));
    int y = op("Add", INS(conv3(x, 48, 48), x), NOATTR);
    xt_output(G, y);
    check_wino(y, NULL);
    graph(13);
    int b = xt_const_random(G, "1x40x1x1", -1, 1, &rng);
    y = op("Add", INS(conv3(relu(input("1x40x8x8")), 40, 40), b), NOATTR);
    xt_output(G, y);
    check_wino(y, NULL);
}

Test(exec_conv_output, sigmoid_and_silu_as_graph_output)
{
    /* activations applied after oneDNN's kernel (vec_post.c) over the
     * blocks' padding (35 channels in 48): sigmoid(0) is not 0 */
    graph(13);
    int y = op("Sigmoid", INS(conv3(relu(input("1x33x9x9")), 33, 35)), NOATTR);
    xt_output(G, y);
    check_wino(y, NULL);
    graph(13);
    int c = conv3(relu(input("1x33x9x9")), 33, 35);
    y = op("Mul", INS(c, op("Sigmoid", INS(c), NOATTR)), NOATTR);
    xt_output(G, y);
    check_wino(y, NULL);
}
