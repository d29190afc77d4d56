/* Dense concatenation without copies (DenseNet's pattern).
 *
 * A densely connected block exports as a chain of channel Concats, each
 * reading every earlier output again: Concat(x0), Concat(x0, y1), ...,
 * Concat(x0, y1, ..., yL).  Run one by one they copy O(L^2) channels
 * (densenet121: 58 concats, 13% of a run).  But with batch 1 in oneDNN's
 * channel-blocked layout (nChw16c or nChw8c, channel counts multiples of
 * the block) the first c channels of a tensor are a contiguous prefix of
 * it, and that prefix is itself a tensor of c channels in the same layout.
 * So the whole chain shares one buffer B of the last Concat's shape; every
 * member's result is a view of B's prefix (an alias at offset 0), and each
 * member step only writes the inputs the previous member did not have, at
 * their channel offsets.  A producer that already writes the slice's
 * layout (the 3x3 convs, 16-channel blocks) and that only the chain reads
 * is turned into a view of its slice of B: it writes there itself, and the
 * member step has nothing left to do.
 *
 * Safety: members form one linear chain (every channel Concat extending the
 * first is a prefix of the last), so no two members write different data
 * to one slice; B carries the last Concat's value, which keeps in-place
 * kernels (xplan_inplace_ok) off B until the chain is done; the aliases at
 * offsets keep them off it after that.  A lone Concat is a chain of one
 * when a producer writes its slice and the other inputs are steps' outputs
 * in oneDNN layouts (SqueezeNet's fire modules: once one module's result
 * is in 16-channel blocks, both expand convs of the next write their
 * slices and the step does nothing; TSOPT_SKIP=dnnl.dense_concat.single
 * turns this off).  Declines (vec/dnnl concat run) for batch > 1, channel
 * counts not multiples of 8, a graph output, the plain_layout option, or a
 * Concat outside such a chain. */
#include <stdlib.h>
#include <string.h>
#include "exec/dnnl_layout.h"
#include "exec/dnnl_util.h"
#include "exec/plan_internal.h"
#include "ops/attrs.h"
#include "ops/list.h"

extern const xkernel xk_dense_concat;

typedef struct dc_copy {
    int in;        /* step input index */
    bool flat;     /* same block layout: one memcpy at off */
    int64_t off;   /* byte offset of the slice in the member's buffer */
    size_t bytes;
    xd_reorder r;  /* !flat: source layout -> the slice (a submemory) */
} dc_copy;

typedef struct dc_state {
    dnnl_stream_t stream;
    int ncopy;
    dc_copy *copy;
} dc_state;

static void dc_destroy(void *state)
{
    dc_state *c = state;
    if (!c) return;
    for (int i = 0; i < c->ncopy; i++)
        if (!c->copy[i].flat) xd_reorder_fini(&c->copy[i].r);
    free(c->copy);
    free(c);
}

static void dc_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    const dc_state *c = s->state;
    (void)scratch;
    for (int i = 0; i < c->ncopy; i++) {
        dc_copy *k = &c->copy[i];
        if (k->flat)
            memcpy((char *)out[0] + k->off, in[k->in], k->bytes);
        else
            xd_reorder_run(&k->r, in[k->in], out[0], c->stream);
    }
}

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

static void block_md(dnnl_memory_desc_t *md, const ts_shape *s, int block)
{
    dnnl_dims_t d = {s->dims[0], s->dims[1], s->dims[2], s->dims[3]};
    dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, block == 16 ? dnnl_aBcd16b : dnnl_aBcd8b);
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
    block_md(&md, &g->values[v].shape, block);
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

static ts_status dc_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    if (p->opts.plain_layout || p->opts.no_fusion || !chan_concat(g, n)) return TS_ERR_UNSUPPORTED;
    int yv = nd->outputs[0];
    const ts_shape *ys = &g->values[yv].shape;
    if (ys->dims[0] != 1 || ts_graph_is_output(g, yv)) return TS_ERR_UNSUPPORTED;

    /* the longest member lowered before, whose buffer is the chain's */
    int prev = -1;
    for (int m = 0; m < g->nnodes; m++)
        if (m != n && p->claimed_by[m] == &xk_dense_concat && chan_concat(g, m) && is_prefix(&g->nodes[m], nd) &&
            g->nodes[m].ninputs < nd->ninputs && (prev < 0 || g->nodes[m].ninputs > g->nodes[prev].ninputs))
            prev = m;
    int root = -1, r = n, first = 0;
    if (prev >= 0) {
        int pb = p->value_buf[g->nodes[prev].outputs[0]];
        if (pb < 0) return TS_ERR_UNSUPPORTED;
        root = xbuf_root(p, pb);
        int rv = p->bufs[root].value;
        r = rv >= 0 ? g->values[rv].producer : -1;
        if (r < 0 || !chan_concat(g, r) || !is_prefix(nd, &g->nodes[r])) return TS_ERR_UNSUPPORTED;
        first = g->nodes[prev].ninputs;
    } else {
        /* a chain starts here: its last member r extends n the most, and
         * every other Concat extending n is a prefix of r (one line) */
        for (int m = 0; m < g->nnodes; m++)
            if (!p->claimed[m] && chan_concat(g, m) && is_prefix(nd, &g->nodes[m]) &&
                g->nodes[m].ninputs > g->nodes[r].ninputs)
                r = m;
        if ((r == n && xplan_skips(p, "dnnl.dense_concat.single")) || ts_graph_is_output(g, g->nodes[r].outputs[0]))
            return TS_ERR_UNSUPPORTED;
        for (int m = 0; m < g->nnodes; m++)
            if (chan_concat(g, m) && is_prefix(nd, &g->nodes[m]) && !is_prefix(&g->nodes[m], &g->nodes[r]))
                return TS_ERR_UNSUPPORTED;
    }
    int block = chain_block(g, r);
    if (!block) return TS_ERR_UNSUPPORTED;
    const ts_shape *rs = &g->values[g->nodes[r].outputs[0]].shape;
    dnnl_memory_desc_t rmd, ymd;
    block_md(&rmd, rs, block);
    block_md(&ymd, ys, block);
    if (root >= 0 && !dnnl_memory_desc_equal(&rmd, &p->bufs[root].md)) return TS_ERR_UNSUPPORTED;
    /* a lone Concat (SqueezeNet's fire modules): where a producer writes
     * its slice itself and every other input is a step's output in a
     * oneDNN layout (a plain or graph input: dnnl.concat's case) */
    if (prev < 0 && r == n) {
        bool direct_any = false;
        for (int j = 0; j < nd->ninputs; j++) {
            int b = p->value_buf[nd->inputs[j]];
            if (b < 0 || p->bufs[b].kind != XB_ARENA || !p->bufs[b].blocked) return TS_ERR_UNSUPPORTED;
            direct_any |= producer_writes_slice(p, nd->inputs[j], r, block);
        }
        if (!direct_any) return TS_ERR_UNSUPPORTED;
    }

    dc_state *c = calloc(1, sizeof *c);
    if (!c || !(c->copy = calloc((size_t)nd->ninputs, sizeof *c->copy))) {
        free(c);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    }
    s->state = c;
    c->stream = p->stream;
    ts_status st = xstep_alloc(s, nd->ninputs - first, 1, err);
    if (st) return st;
    /* decide every input before changing any buffer: a decline after a
     * buffer became a view could not be rolled back */
    bool *direct = calloc((size_t)nd->ninputs, sizeof *direct);
    int64_t *choff = calloc((size_t)nd->ninputs + 1, sizeof *choff);
    if (!direct || !choff) {
        free(direct);
        free(choff);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    }
    for (int j = 0; j < nd->ninputs; j++) choff[j + 1] = choff[j] + g->values[nd->inputs[j]].shape.dims[1];
    const int64_t plane = ys->dims[2] * ys->dims[3] * (int64_t)sizeof(float);
    for (int j = first; j < nd->ninputs && !st; j++) {
        int v = nd->inputs[j], b = xplan_value_buf(p, v);
        if (b < 0) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
            break;
        }
        direct[j] = producer_writes_slice(p, v, r, block);
        if (direct[j]) continue;
        dc_copy *k = &c->copy[c->ncopy];
        k->in = c->ncopy;
        s->in[c->ncopy] = b;
        k->off = choff[j] * plane;
        k->bytes = (size_t)(choff[j + 1] - choff[j]) * (size_t)plane;
        dnnl_memory_desc_t from, to;
        xd_md_of(&p->bufs[b], &from);
        block_md(&to, &g->values[v].shape, block);
        k->flat = dnnl_memory_desc_equal(&from, &to);
        if (!k->flat) {
            dnnl_dims_t dims = {1, choff[j + 1] - choff[j], ys->dims[2], ys->dims[3]}, offs = {0, choff[j], 0, 0};
            st = xd_check(dnnl_memory_desc_init_submemory(&to, &ymd, dims, offs), p, n, "submemory", err);
            if (!st) st = xd_reorder_init(&k->r, &from, &to, p, n, err);
            if (st) break;
        }
        c->ncopy++;
    }
    s->nin = c->ncopy;
    int yb = -1;
    if (!st && root < 0) { /* B: the last member's value, not bound to it yet */
        root = xplan_new_buf(p, g->nodes[r].outputs[0], TS_F32, rs);
        if (root < 0) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
        if (!st) {
            p->bufs[root].md = rmd;
            p->bufs[root].blocked = true;
            p->bufs[root].bytes = dnnl_memory_desc_get_size(&rmd);
        }
    }
    if (!st && (yb = xplan_new_buf(p, yv, TS_F32, ys)) < 0) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!st) {
        xbuf *y = &p->bufs[yb];
        y->kind = XB_ALIAS;
        y->alias_of = root;
        y->offset = 0;
        y->md = ymd;
        y->blocked = true;
        y->bytes = dnnl_memory_desc_get_size(&ymd);
        xplan_bind_value(p, yv, yb);
        s->out[0] = yb;
        for (int j = first; j < nd->ninputs; j++)
            if (direct[j]) { /* the producer writes its slice of B */
                xbuf *x = &p->bufs[p->value_buf[nd->inputs[j]]];
                x->kind = XB_ALIAS;
                x->alias_of = root;
                x->offset = choff[j] * plane;
            }
    }
    free(direct);
    free(choff);
    return st; /* on failure the planner rolls back and destroys the state */
}

const xkernel xk_dense_concat = {"dnnl.dense_concat", dc_build, dc_run, dc_destroy};
