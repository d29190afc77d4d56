/* Channel Split of a channels-last conv output at N = 1 (what
 * `tsopt optimize`'s merge-siblings leaves: one merged 1x1 conv, a Split,
 * the branches' convs).  The pieces are not contiguous in that layout;
 * plan.c used to convert the whole tensor to plain to make them views and
 * every reading conv converted its piece back.  Now vec.split copies the
 * pieces in the physical order: results equal the reference interpreter,
 * and no reorder step is left.  Pieces that are graph outputs, and a Split
 * at N = 2, take the other paths and stay correct. */
#define XT_GLOBAL_GRAPH
#include "exec_check.h"
#include "vec/vec_layout.h"

TestSuite(exec_split_layout, .fini = xt_done);

static uint64_t rng = 9001;
static int conv_out; /* the Relu after the merged conv: the Split's input */

static int count_steps(const xplan *p, const char *kernel)
{
    int n = 0;
    for (int i = 0; i < p->nsteps; i++) n += !strcmp(p->steps[i].k->name, kernel);
    return n;
}

/* x (N x 64 x 14 x 14) -> 1x1 conv to 96 channels + Relu -> Split 20/44/32
 * (not multiples of 8: no blocked views) -> a 3x3 conv on each of the first
 * two pieces; the third goes through Tanh and a 1x1 conv, or is itself a
 * graph output when piece_out. */
static void build(int64_t n, bool piece_out)
{
    graph(17);
    char dims[32];
    snprintf(dims, sizeof dims, "%lldx64x14x14", (long long)n);
    int x = input(dims);
    int w0 = xt_const_random(G, "96x64x1x1", -0.2, 0.2, &rng), b0 = xt_const_random(G, "96", -0.1, 0.1, &rng);
    int y = conv_out = xt_node(G, "Relu", INS(xt_node(G, "Conv", INS(x, w0, b0), NOATTR)), NOATTR);
    int64_t sizes[3] = {20, 44, 32}, pads[4] = {1, 1, 1, 1};
    int out[3];
    ts_error e = {0};
    ts_attr sa[2] = {ts_attr_int("axis", 1), ts_attr_ints("split", sizes, 3)};
    cr_assert_geq(ts_graph_add_node(G, "Split", "split", &y, 1, sa, 2, 3, NULL, out, &e), 0, "%s", e.msg);
    int w1 = xt_const_random(G, "24x20x3x3", -0.2, 0.2, &rng), w2 = xt_const_random(G, "16x44x3x3", -0.2, 0.2, &rng);
    int c1 = xt_node(G, "Conv", INS(out[0], w1), ATTRS(ts_attr_ints("pads", pads, 4)));
    int c2 = xt_node(G, "Conv", INS(out[1], w2), ATTRS(ts_attr_ints("pads", pads, 4)));
    cr_assert_eq(ts_graph_add_output(G, c1, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_add_output(G, c2, &e), TS_OK, "%s", e.msg);
    int w3 = xt_const_random(G, "8x32x1x1", -0.2, 0.2, &rng);
    int last = piece_out ? out[2] : xt_node(G, "Conv", INS(xt_node(G, "Tanh", INS(out[2]), NOATTR), w3), NOATTR);
    cr_assert_eq(ts_graph_add_output(G, last, &e), TS_OK, "%s", e.msg);
}

/* The buffer the step producing value v writes is a dense permuted
 * (channels-last) layout. */
static bool channels_last(const xplan *p, int v)
{
    int order[TS_MAX_RANK];
    for (int i = 0; i < p->nsteps; i++) {
        const xbuf *b = &p->bufs[p->steps[i].out[0]];
        if (b->value == v) return b->blocked && xbuf_dense_order(b, order) && !xbuf_order_plain(order, b->shape.rank);
    }
    return false;
}

Test(exec_split_layout, channels_last_pieces_are_copied_not_converted)
{
    for (int threads = 1; threads <= 2; threads++) {
        build(1, false);
        ts_plan_opts o = {.threads = threads};
        ts_plan *plan = xt_plan_check(G, &o, 7, -1, 1, 1e-4, XT_TOL_MAX);
        const xplan *p = (const xplan *)plan;
        cr_assert(channels_last(p, conv_out) || count_steps(p, "vec.split") == 0);
        if (channels_last(p, conv_out)) {
            cr_assert_eq(count_steps(p, "vec.split"), 1, "the pieces are copied by one vec.split step");
            /* the only conversions left are those of the graph outputs into
             * the caller's plain tensors */
            for (int i = 0; i < p->nsteps; i++) {
                if (strcmp(p->steps[i].k->name, "reorder")) continue;
                int v = p->bufs[p->steps[i].in[0]].value;
                bool out = false;
                for (int k = 0; k < G->noutputs; k++) out |= G->outputs[k] == v;
                cr_assert(out, "step %d converts value %d, not a graph output", i, v);
            }
        }
        ts_plan_free(plan);
    }
}

Test(exec_split_layout, piece_as_graph_output_and_batch_two)
{
    for (int64_t n = 1; n <= 2; n++) {
        build(n, true);
        ts_plan_opts o = {.threads = 2};
        ts_plan_free(xt_plan_check(G, &o, 8, -1, 1, 1e-4, XT_TOL_MAX));
        build(n, false);
        ts_plan_free(xt_plan_check(G, &o, 9, -1, 1, 1e-4, XT_TOL_MAX));
    }
}
