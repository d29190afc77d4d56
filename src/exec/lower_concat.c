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
        if (!direct_any) return false;
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
