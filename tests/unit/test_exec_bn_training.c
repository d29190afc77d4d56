/* BatchNormalization with training_mode = 1 normalizes by the batch's own
 * mean and variance, so neither the runtime's affine folds (a Conv's
 * post-op, src/dnnl/dnnl_util.c) nor the optimizer's Conv+BN fold
 * (src/opt/passes.c) may take its parameters for the statistics: the plan
 * must equal the reference interpreter, the fold must leave it alone. */
#include "exec_check.h"
#include "opt/passes.h"

static uint64_t rng = 4242;

/* Conv 3x3 (constant weights) -> BatchNormalization -> Relu on 2x4x6x6. */
static ts_graph *conv_bn(int training)
{
    ts_graph *g = ts_graph_new("t", 15);
    int x = xt_input(g, "x", "2x4x6x6");
    int c = xt_node(g, "Conv", (int[]){x, xt_const_random(g, "5x4x3x3", -1, 1, &rng)}, 2,
                    (ts_attr[]){ts_attr_ints("pads", (const int64_t[]){1, 1, 1, 1}, 4)}, 1);
    int bn_in[5] = {c, xt_const_random(g, "5", 0.5, 2, &rng), xt_const_random(g, "5", -1, 1, &rng),
                    xt_const_random(g, "5", -1, 1, &rng), xt_const_random(g, "5", 0.5, 2, &rng)};
    int b = xt_node(g, "BatchNormalization", bn_in, 5, (ts_attr[]){ts_attr_int("training_mode", training)}, 1);
    xt_output(g, xt_node(g, "Relu", &b, 1, NULL, 0));
    return g;
}

Test(exec_bn_training, plan_matches_reference)
{
    for (int training = 0; training < 2; training++) {
        ts_graph *g = conv_bn(training);
        ts_plan_free(xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX));
        ts_graph_free(g);
    }
}

Test(exec_bn_training, optimizer_fold_skips_it)
{
    for (int training = 0; training < 2; training++) {
        ts_graph *g = conv_bn(training);
        ts_error e = {0};
        int folded = ts_fold_affine(g, &e);
        cr_assert_eq(folded, training ? 0 : 1, "training_mode %d: %d folded (%s)", training, folded, e.msg);
        ts_graph_free(g);
    }
}
