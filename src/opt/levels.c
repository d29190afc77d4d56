/* Graph optimization levels (tsopt.h, ts_graph_opt), as ONNX Runtime's:
 * the rewrites a session, `tsopt run` and `tsopt bench` apply to a graph
 * before planning it.  Each is a checked pass of the optimize pipeline
 * (passes.h; tests/unit/test_graph_opt.c refutes a planted wrong variant
 * of each); the rewrites the plan still makes itself are left out below
 * the level that makes them through ts_plan_opts.graph_opt (exec/skip.c).
 * Size-independent only: what depends on sizes is chosen per bound shape
 * at plan time. */
#include <string.h>
#include "opt/passes.h"

static const char *const names[] = {"all", "none", "basic", "all"};

bool ts_graph_opt_parse(const char *s, ts_graph_opt *out)
{
    for (int l = TS_GRAPH_OPT_NONE; s && l <= TS_GRAPH_OPT_ALL; l++)
        if (!strcmp(s, names[l])) return *out = (ts_graph_opt)l, true;
    return false;
}

const char *ts_graph_opt_name(ts_graph_opt level)
{
    return level >= TS_GRAPH_OPT_DEFAULT && level <= TS_GRAPH_OPT_ALL ? names[level] : "?";
}

int ts_graph_opt_apply(ts_graph *g, ts_graph_opt level, ts_error *err)
{
    if (level == TS_GRAPH_OPT_NONE) return 0;
    if (level < TS_GRAPH_OPT_DEFAULT || level > TS_GRAPH_OPT_ALL)
        return ts_error_set(err, TS_ERR_INVALID, "graph optimization level %d: expected none, basic or all", level), -1;
    /* exact: a node computing what another already computed reads that
     * result (NASNet-A applies a separate Relu to a cell input in every
     * branch reading it: 60 duplicates of 192) */
    int total = 0, r;
    if ((r = ts_cse(g, err)) < 0) return -1;
    total += r;
    /* exact in real arithmetic: per-channel scales and shifts (inference
     * BatchNormalization, Mul, Add) into the weights and bias before them */
    if ((r = ts_fold_affine(g, err)) < 0) return -1;
    total += r;
    /* exact in real arithmetic: DenseNet's transitions pool first */
    if ((r = ts_pool_before_conv(g, err)) < 0) return -1;
    total += r;
    /* a QDQ model's products on its 8-bit tensors (as ONNX Runtime's basic
     * level fuses them): up to one quantization step, fuse_qdq.c */
    if ((r = ts_fuse_qdq(g, err)) < 0) return -1;
    total += r;
    if (level == TS_GRAPH_OPT_BASIC) return total;
    /* fusions into operators the model does not spell */
    if ((r = ts_fuse_layernorm(g, err)) < 0) return -1;
    total += r;
    if ((r = ts_fuse_gelu(g, err)) < 0) return -1;
    total += r;
    /* exact in real arithmetic: a squeeze-excite gate scales the next
     * conv's weights where they are smaller than the activations */
    if ((r = ts_fold_gate(g, err)) < 0) return -1;
    return total + r;
}

ts_status ts_graph_opt_plan(ts_graph *g, const ts_plan_opts *o, ts_plan **out, ts_error *err)
{
    *out = NULL;
    if (ts_graph_opt_apply(g, o ? (ts_graph_opt)o->graph_opt : TS_GRAPH_OPT_DEFAULT, err) < 0) return err->code;
    return ts_plan_build(g, o, out, err);
}
