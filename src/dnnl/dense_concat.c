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
 * Concat outside such a chain.  The lowering stage decides the chain and
 * each member's part in it (lower_concat.c); this file binds the buffers
 * and reads no other node (tests/cli/kernel_nodes.sh). */
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_layout.h"
#include "dnnl/dnnl_util.h"
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

void xdc_block_md(dnnl_memory_desc_t *md, const ts_shape *s, int block)
{
    dnnl_dims_t d = {s->dims[0], s->dims[1], s->dims[2], s->dims[3]};
    dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, block == 16 ? dnnl_aBcd16b : dnnl_aBcd8b);
}

static ts_status dc_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const xgroup *gr = p->group; /* lower_concat.c: this member's part in its chain */
    const int yv = nd->outputs[0], first = gr->dc_first, block = gr->dc_block;
    const bool *direct = gr->dc_direct;
    int root = gr->dc_root;
    const ts_shape *ys = &g->values[yv].shape, *rs = &g->values[gr->dc_last_y].shape;
    dnnl_memory_desc_t rmd, ymd;
    xdc_block_md(&rmd, rs, block);
    xdc_block_md(&ymd, ys, block);

    dc_state *c = calloc(1, sizeof *c);
    if (!c || !(c->copy = calloc((size_t)nd->ninputs, sizeof *c->copy))) {
        free(c);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    }
    s->state = c;
    c->stream = p->stream;
    ts_status st = xstep_alloc(s, nd->ninputs - first, 1, err);
    if (st) return st;
    int64_t *choff = calloc((size_t)nd->ninputs + 1, sizeof *choff);
    if (!choff) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a kernel state");
    for (int j = 0; j < nd->ninputs; j++) choff[j + 1] = choff[j] + g->values[nd->inputs[j]].shape.dims[1];
    const int64_t plane = ys->dims[2] * ys->dims[3] * (int64_t)sizeof(float);
    for (int j = first; j < nd->ninputs && !st; j++) {
        int v = nd->inputs[j], b = xplan_value_buf(p, v);
        if (b < 0) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
            break;
        }
        if (direct[j]) continue;
        dc_copy *k = &c->copy[c->ncopy];
        k->in = c->ncopy;
        s->in[c->ncopy] = b;
        k->off = choff[j] * plane;
        k->bytes = (size_t)(choff[j + 1] - choff[j]) * (size_t)plane;
        dnnl_memory_desc_t from, to;
        xd_md_of(&p->bufs[b], &from);
        xdc_block_md(&to, &g->values[v].shape, block);
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
        root = xplan_new_buf(p, gr->dc_last_y, TS_F32, rs);
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
    free(choff);
    return st; /* declined only before the plan was touched; later failures are errors */
}

const xkernel xk_dense_concat = {"dnnl.dense_concat", dc_build, dc_run, dc_destroy};
