/* Concat groups, formed by the lowering stage (issue 27 §3): the Relus
 * reading a Concat (vec.concat) and DenseNet's chains of channel Concats
 * sharing one buffer (dnnl.dense_concat, dense_concat.c says why and how
 * it runs).  The kernels bind buffers from what is decided here and read
 * no other node (tests/cli/kernel_nodes.sh).  Stated tolerance of both: 0,
 * bit for bit (copies, max(x, 0) once for every Relu; test_lowering). */
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_layout.h"
#include "dnnl/dnnl_util.h"
#include "exec/plan_internal.h"
#include "vec/vec.h"
#include "ops/attrs.h"
#include "ops/list.h"

/* ------------------------------------------ Concat read only by Relus
 *
 * NASNet-A's cells end in a Concat that the next two cells read only
 * through Relu (each branch its own copy, all identical): when every
 * reader of the result is such a Relu, vec.concat writes max(x, 0) once
 * and the Relus' values all become that output (vec_movement.c).  Else the
 * Concat alone. */

bool xgroup_concat_relu(const xplan *p, int n, xgroup *gr)
{
    const ts_graph *g = p->g;
    int v = g->nodes[n].outputs[0];
    gr->nodes[0] = n;
    gr->nnodes = 1;
    gr->y = v;
    if (p->opts.no_fusion || g->values[v].dtype != TS_F32 || ts_graph_is_output(g, v)) return true;
    for (int m = 0; m < g->nnodes; m++) {
        const ts_node *c = &g->nodes[m];
        bool reads = false;
        for (int j = 0; j < c->ninputs; j++) reads |= c->inputs[j] == v;
        if (c->dead || !reads) continue;
        if (p->claimed[m] || c->op != &ts_op_relu || gr->nrelu == 16 || ts_graph_is_output(g, c->outputs[0])) {
            gr->nnodes = 1, gr->nrelu = 0;
            return true;
        }
        gr->relu_y[gr->nrelu++] = c->outputs[0];
        gr->nodes[gr->nnodes++] = m;
    }
    if (gr->nrelu) gr->y = gr->relu_y[0];
    return true;
}

/* ------------------------------------------ dense chains of channel Concats */

extern const xkernel xk_dense_concat;

/* Node m is a live channel Concat of a float32 rank-4 result. */
static bool chan_concat(const ts_graph *g, int m)
{
    const ts_node *nd = &g->nodes[m];
    int axis;
    if (nd->dead || nd->op != &ts_op_concat || nd->noutputs != 1 || nd->outputs[0] < 0) return false;
    const ts_value *y = &g->values[nd->outputs[0]];
    return y->dtype == TS_F32 && y->shape.rank == 4 &&
           ts_axis_norm(((const ts_concat_attrs *)nd->attrs)->axis, 4, &axis) && axis == 1;
}

/* a's inputs are the first inputs of b. */
static bool is_prefix(const ts_node *a, const ts_node *b)
{
    return a->ninputs <= b->ninputs && !memcmp(a->inputs, b->inputs, sizeof(int) * (size_t)a->ninputs);
}

/* The chain's block: 16 when every input of the last member r has a
 * multiple of 16 channels, else 8, else 0 (not this kernel's case); 0 too
 * when some input is not float32 of r's batch 1 and spatial size. */
static int chain_block(const ts_graph *g, int r)
{
    const ts_node *nd = &g->nodes[r];
    const ts_shape *ys = &g->values[nd->outputs[0]].shape;
    int block = 16;
    for (int j = 0; j < nd->ninputs; j++) {
        int v = nd->inputs[j];
        if (v < 0) return 0;
        const ts_value *x = &g->values[v];
        if (x->dtype != TS_F32 || x->shape.rank != 4 || x->shape.dims[0] != 1 || x->shape.dims[2] != ys->dims[2] ||
            x->shape.dims[3] != ys->dims[3])
            return 0;
        if (x->shape.dims[1] % 16) block = 8;
        if (x->shape.dims[1] % 8) return 0;
    }
    return block;
}

/* True when value v's producer may write straight into its slice of the
 * chain ending at node r: its buffer is a plain arena buffer (no view of
 * anything, nothing a view of it) in the slice's layout, v appears once in
 * r's inputs, and only members of the chain read it. */
static bool producer_writes_slice(const xplan *p, int v, int r, int block)
{
    const ts_graph *g = p->g;
    int b = p->value_buf[v], seen = 0;
    if (b < 0 || ts_graph_is_output(g, v)) return false;
    const xbuf *x = &p->bufs[b];
    if (x->kind != XB_ARENA || !x->blocked || x->value != v) return false;
    dnnl_memory_desc_t md;
    xdc_block_md(&md, &g->values[v].shape, block);
    if (!dnnl_memory_desc_equal(&md, &x->md)) return false;
    for (int c = 0; c < p->nbufs; c++)
        if (p->bufs[c].kind == XB_ALIAS && p->bufs[c].alias_of == b) return false;
    for (int j = 0; j < g->nodes[r].ninputs; j++) seen += g->nodes[r].inputs[j] == v;
    if (seen != 1) return false;
    for (int m = 0; m < g->nnodes; m++) {
        const ts_node *nd = &g->nodes[m];
        bool reads = false;
        for (int j = 0; j < nd->ninputs; j++) reads |= nd->inputs[j] == v;
        if (reads && (!chan_concat(g, m) || !is_prefix(nd, &g->nodes[r]))) return false;
    }
    return true;
}

int xdc_slice_block(const xplan *p, int v)
{
    const ts_graph *g = p->g;
    if (p->opts.plain_layout || p->opts.no_fusion || ts_graph_is_output(g, v)) return 0;
    int block = 16, readers = 0;
    for (int m = 0; m < g->nnodes; m++) {
        const ts_node *nd = &g->nodes[m];
        int seen = 0;
        for (int j = 0; j < nd->ninputs; j++) seen += nd->inputs[j] == v;
        if (!seen || nd->dead) continue;
        if (seen > 1 || !chan_concat(g, m) || ts_graph_is_output(g, nd->outputs[0])) return 0;
        int b = chain_block(g, m);
        if (!b) return 0;
        block = b < block ? b : block;
        readers++;
    }
    return readers ? block : 0;
}

/* The Relu that is value y's one reader, or -1. */
static int sole_relu(const ts_graph *g, int y)
{
    int r = -1;
    for (int m = 0; m < g->nnodes; m++) {
        const ts_node *nd = &g->nodes[m];
        bool reads = false;
        for (int j = 0; j < nd->ninputs; j++) reads |= nd->inputs[j] == y;
        if (!reads || nd->dead) continue;
        if (r >= 0 || nd->op != &ts_op_relu || nd->noutputs != 1 || nd->outputs[0] < 0) return -1;
        r = m;
    }
    return r >= 0 && !ts_graph_is_output(g, y) ? r : -1;
}

/* Whether a lone Concat's view would turn a conv after it from oneDNN's
 * channels-last brgconv to jit on 16-channel blocks.  The view leaves the
 * Concat's result in blocks, and on blocks oneDNN's convs stay on blocks:
 * pointwise ones on jit_1x1 (as fast as brgconv_1x1, lower_post.c) and
 * Winograd shapes read blocks whatever they are given, but a spatial conv
 * that is no Winograd shape (5x5, 1x7, 7x1, 3x3 stride 2) runs jit where
 * channels-last gets brgconv.  inception_v3 (Intel Xeon, quiet, A/B against
 * TSOPT_SKIP=dnnl.dense_concat.single, 2026-12-07): 36 such convs after its
 * Mixed Concats went brgconv -> jit and the whole run 1.031-1.054x slower;
 * googlenet (mostly 1x1s and Winograd 3x3s after its Concats) 0.992,
 * squeezenet1_1 0.905 (its 3x3 expand convs read 16 channels and write the
 * next Concat's blocks anyway): the views pay there.  Looked for from value
 * v through pools and Relus and, at depth 0, a pointwise conv; returns the
 * multiply-adds of the convs turned.  Only where oneDNN has brgconv
 * (AVX-512 cores; on AVX2 both layouts run jit).  That includes the AMD
 * EPYC (Zen 4, AVX-512) the views were tuned on: whether inception_v3
 * prefers its views there was not measured with this rule. */
static double brgconv_macs_turned(const xplan *p, int v, int depth)
{
    const ts_graph *g = p->g;
    if (depth > 3 || g->values[v].shape.rank != 4) return 0;
    double macs = 0;
    for (int m = 0; m < g->nnodes; m++) {
        const ts_node *nd = &g->nodes[m];
        bool reads = false;
        for (int j = 0; j < nd->ninputs; j++) reads |= nd->inputs[j] == v;
        if (!reads || nd->dead || nd->noutputs != 1 || nd->outputs[0] < 0) continue;
        int y = nd->outputs[0];
        if (nd->op == &ts_op_maxpool || nd->op == &ts_op_avgpool || nd->op == &ts_op_relu) {
            macs += brgconv_macs_turned(p, y, depth + 1);
            continue;
        }
        if (nd->op != &ts_op_conv || nd->inputs[0] != v || nd->ninputs < 2) continue;
        const ts_conv_attrs *ca = nd->attrs;
        const ts_shape *xs = &g->values[v].shape, *ws = &g->values[nd->inputs[1]].shape;
        ts_window_geom wg;
        char why[256];
        if (ws->rank != 4 || !ts_window_resolve(&ca->win, 2, xs->dims + 2, ws->dims + 2, &wg, why, sizeof why))
            continue;
        /* its result, through the Relu its step takes in */
        int r = sole_relu(g, y), out = r >= 0 ? g->nodes[r].outputs[0] : y;
        if (xd_wino_shape(xs, ws, ca->group, wg.stride, wg.dil)) continue;
        /* 16 channels channels-last are the bytes of one 16-channel block:
         * such a conv writing its slice of a Concat stays on blocks */
        if (xs->dims[1] == 16 && xdc_slice_block(p, out)) continue;
        if (ws->dims[2] * ws->dims[3] > 1)
            macs += (double)ts_shape_numel(&g->values[y].shape) * (double)(ws->dims[1] * ws->dims[2] * ws->dims[3]);
        else if (depth == 0)
            macs += brgconv_macs_turned(p, y, depth + 1);
    }
    return macs;
}

/* The view is declined where the convs it turns do at least
 * DENSE_CONCAT_TURN_MACS multiply-adds per byte of the Concat's result
 * (the copy it saves): the convs' work against the copy's.  Computed from
 * the shapes: inception_v3's Mixed_5b/5c/5d/6a Concats 75.0 / 66.7 / 203.8
 * / 74.7 (Mixed_5b: a 5x5 48->64 at 35x35, 94 M, for 1.25 MB); googlenet's
 * inception4a/4b 6.8 (a 3x3 24->64 at 14x14), its others and squeezenet1_1's
 * 0.  The threshold lies between the models the A/B figures above decided;
 * it is no measured break-even.  TSOPT_SKIP=dense_concat.kind keeps every
 * lone view (A/B). */
#define DENSE_CONCAT_TURN_MACS 32.0

static bool view_turns_brgconv(const xplan *p, int v)
{
    const unsigned need = (unsigned)dnnl_cpu_isa_avx512_core;
    if (((unsigned)dnnl_get_effective_cpu_isa() & need) != need) return false;
    double bytes = (double)ts_shape_numel(&p->g->values[v].shape) * sizeof(float);
    return brgconv_macs_turned(p, v, 0) >= DENSE_CONCAT_TURN_MACS * bytes;
}

/* Concat n as a member of a dense chain: the chain's last member (whose
 * value B carries), B's buffer when an earlier member made it, the inputs
 * that member wrote, the block, and which inputs' producers write their
 * slices themselves.  Every input is decided here, before the kernel
 * changes any buffer. */
bool xgroup_dense_concat(const xplan *p, int n, xgroup *gr)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    if (p->opts.plain_layout || p->opts.no_fusion || !chan_concat(g, n)) return false;
    int yv = nd->outputs[0];
    if (g->values[yv].shape.dims[0] != 1 || ts_graph_is_output(g, yv)) return false;

    /* the longest member lowered before, whose buffer is the chain's */
    int prev = -1;
    for (int m = 0; m < g->nnodes; m++)
        if (m != n && p->claimed_by[m] == &xk_dense_concat && chan_concat(g, m) && is_prefix(&g->nodes[m], nd) &&
            g->nodes[m].ninputs < nd->ninputs && (prev < 0 || g->nodes[m].ninputs > g->nodes[prev].ninputs))
            prev = m;
    int root = -1, r = n, first = 0;
    if (prev >= 0) {
        int pb = p->value_buf[g->nodes[prev].outputs[0]];
        if (pb < 0) return false;
        root = xbuf_root(p, pb);
        int rv = p->bufs[root].value;
        r = rv >= 0 ? g->values[rv].producer : -1;
        if (r < 0 || !chan_concat(g, r) || !is_prefix(nd, &g->nodes[r])) return false;
        first = g->nodes[prev].ninputs;
    } else {
        /* a chain starts here: its last member r extends n the most, and
         * every other Concat extending n is a prefix of r (one line) */
        for (int m = 0; m < g->nnodes; m++)
            if (!p->claimed[m] && chan_concat(g, m) && is_prefix(nd, &g->nodes[m]) &&
                g->nodes[m].ninputs > g->nodes[r].ninputs)
                r = m;
        if ((r == n && xplan_skips(p, "dnnl.dense_concat.single")) || ts_graph_is_output(g, g->nodes[r].outputs[0]))
            return false;
        for (int m = 0; m < g->nnodes; m++)
            if (chan_concat(g, m) && is_prefix(nd, &g->nodes[m]) && !is_prefix(&g->nodes[m], &g->nodes[r]))
                return false;
    }
    int block = chain_block(g, r);
    if (!block) return false;
    if (root >= 0) {
        dnnl_memory_desc_t rmd;
        xdc_block_md(&rmd, &g->values[g->nodes[r].outputs[0]].shape, block);
        if (!dnnl_memory_desc_equal(&rmd, &p->bufs[root].md)) return false;
    }
    if (!(gr->dc_direct = calloc((size_t)nd->ninputs + 1, sizeof *gr->dc_direct))) return false;
    bool direct_any = false;
    for (int j = first; j < nd->ninputs; j++) direct_any |= gr->dc_direct[j] = producer_writes_slice(p, nd->inputs[j], r, block);
    /* a lone Concat (SqueezeNet's fire modules): where a producer writes
     * its slice itself and every other input is a step's output in a
     * oneDNN layout (a plain or graph input: dnnl.concat's case) */
    if (prev < 0 && r == n) {
        for (int j = 0; j < nd->ninputs; j++) {
            int b = p->value_buf[nd->inputs[j]];
            if (b < 0 || p->bufs[b].kind != XB_ARENA || !p->bufs[b].blocked) return false;
        }
        if (!direct_any || (!xplan_skips(p, "dense_concat.kind") && view_turns_brgconv(p, yv))) return false;
    }
    gr->nodes[0] = n;
    gr->nnodes = 1;
    gr->y = yv;
    gr->dc_last_y = g->nodes[r].outputs[0];
    gr->dc_root = root;
    gr->dc_first = first;
    gr->dc_block = block;
    return true;
}
