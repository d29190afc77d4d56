/* Inference Dropout in the fast runtime: PyTorch's functional dropout
 * exports Dropout(x, ratio, training_mode) with a mask output; with
 * training_mode a constant false, or true with ratio 0 (an identity either
 * way), and nothing reading the mask, the node is a view of x (no step), as
 * a plain Dropout is; a mask that is read keeps the reference kernel (the
 * mask must be written).  (Training with a nonzero ratio is refused when
 * the node is built.) */
#include "exec_check.h"
#include "ir/ir.h"

static ts_graph *graph(bool mask_out, double training, double r)
{
    ts_error e = {0};
    ts_graph *g = ts_graph_new("drop", 14);
    int x = xt_input(g, "x", "2x3x4");
    int ratio = xt_const_values(g, TS_F32, "", (double[]){r}, 1);
    int train = xt_const_values(g, TS_BOOL, "", (double[]){training}, 1);
    int outs[2];
    cr_assert_geq(ts_graph_add_node(g, "Dropout", "d", (const int[]){x, ratio, train}, 3, NULL, 0, 2, NULL, outs, &e), 0,
                  "%s", e.msg);
    xt_output(g, xt_node(g, "Relu", INS(outs[0]), NOATTR));
    if (mask_out) xt_output(g, outs[1]);
    return g;
}

Test(exec_dropout, unread_mask_is_a_view)
{
    for (int k = 0; k < 2; k++) { /* inference, ratio 0.25; training, ratio 0 */
        ts_graph *g = k ? graph(false, 1, 0) : graph(false, 0, 0.25);
        ts_plan *p = xt_plan_check(g, NULL, 3, -2, 2, 0, XT_TOL_ELEM);
        ts_plan_stats st;
        ts_plan_stats_get(p, &st);
        cr_expect_eq(st.fallback_steps, 0, "case %d: Dropout ran the reference kernel", k);
        cr_expect_eq(st.steps, 1, "case %d: only the Relu step (got %d)", k, st.steps);
        ts_plan_free(p);
        ts_graph_free(g);
    }
}

Test(exec_dropout, read_mask_keeps_a_step)
{
    ts_graph *g = graph(true, 0, 0.25);
    ts_error e = {0};
    ts_plan *p = NULL;
    cr_assert_eq(ts_plan_build(g, NULL, &p, &e), TS_OK, "%s", e.msg);
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    cr_expect_eq(st.fallback_steps, 1, "the mask must be written by a step");
    ts_plan_free(p);
    ts_graph_free(g);
}
