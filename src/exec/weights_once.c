/* Weights held once (ts_plan_opts.release_packed_weights).
 *
 * The convolution and matrix-multiply kernels copy their constant weights
 * at plan time into a layout of their own (oneDNN's blocked formats, gemv
 * panels) and fold biases and batch-norm parameters into buffers they
 * own; at run time they never read the graph's tensor again.  Left alone,
 * the graph's float copy sits beside the packed one for the plan's whole
 * life: a ViT-B/16 held 330 MB of weights twice (issue 12, item 6).
 *
 * So, when the caller says it needs the graph for nothing but the plan
 * (tsopt run/bench, ts_session), a constant is released as soon as it is
 * provably dead:
 *   - every node reading it was lowered by a kernel of the list below,
 *     whose build() copies whatever it reads from constants (its state
 *     keeps no pointer into them);
 *   - no step reads the constant's buffer (or a view of it) at run time;
 *   - it is no graph output, and its tensor is referenced once (a tensor
 *     shared with another graph is not ours to empty).  A control-flow
 *     body reads an outer constant through an input of its node (a
 *     capture, ir/subgraph.h), which is no packing kernel: such a constant
 *     stays.
 * The check runs after each node is lowered, for it and the nodes its step
 * fused, so that a layer's original is freed before the next layer packs
 * its own (the peak is the weights once plus one layer, not twice the
 * weights), and once more at the end for the constants of nodes that a
 * later step reads too.
 *
 * Releasing frees the tensor's data (or drops its hold on a memory-mapped
 * file) and leaves data NULL, nbytes unchanged: the value keeps its dtype
 * and shape for whoever prints the graph, but the graph can no longer be
 * planned, interpreted or saved. */
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <unistd.h>
#include "dnnl/dnnl_util.h"
#include "exec/plan_internal.h"

extern const xkernel xk_dnnl_conv, xk_dnnl_deconv, xk_dnnl_matmul, xk_dnnl_gemm, xk_deconv_gemm, xk_vec_gemv;
extern const xkernel xk_vec_se, xk_vec_dwconv, xk_vec_gconv; /* vec_se.c, vec_depthwise.c, vec_gconv.c: copy their weights at build */
extern const xkernel xk_dnnl_conv_gated; /* dnnl_conv.c: packs the conv's weights (scaled per run from that copy) */
extern const xkernel xk_dnnl_patch; /* dnnl_patch.c: packs the weight, copies the bias */

static bool packs_its_constants(const xkernel *k)
{
    return k && (k == &xk_dnnl_conv || k == &xk_dnnl_deconv || k == &xk_dnnl_matmul || k == &xk_dnnl_gemm ||
                 k == &xk_deconv_gemm || k == &xk_vec_gemv || k == &xk_vec_se || k == &xk_vec_dwconv || k == &xk_vec_gconv ||
                 k == &xk_dnnl_conv_gated || k == &xk_dnnl_patch);
}

bool xweights_once_allowed(const xplan *p)
{
    return p->opts.release_packed_weights && p->claimed_by;
}

static bool read_by_step(const xplan *p, int v)
{
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        for (int j = 0; j < s->nin; j++) {
            if (s->in[j] < 0) continue;
            const xbuf *r = &p->bufs[xbuf_root(p, s->in[j])];
            if (r->kind == XB_CONST && !r->owns_data && r->value == v) return true;
        }
    }
    return false;
}

static bool releasable(const xplan *p, int v)
{
    const ts_graph *g = p->g;
    const ts_tensor *t = g->values[v].constant;
    if (!t || !t->data || t->refcount != 1 || (!t->owns_data && !t->release) || ts_graph_is_output(g, v))
        return false;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead) continue;
        for (int j = 0; j < nd->ninputs; j++)
            if (nd->inputs[j] == v && (!p->claimed[n] || !packs_its_constants(p->claimed_by[n]))) return false;
    }
    return !read_by_step(p, v);
}

static void release(xplan *p, int v)
{
    ts_tensor *t = p->g->values[v].constant;
    /* the graph's own buffer and any packing note must not keep the
     * address (a later allocation may reuse it) */
    for (int b = 0; b < p->nbufs; b++) {
        xbuf *x = &p->bufs[b];
        if (x->packed_from == t->data) x->packed_from = NULL;
        if (x->kind == XB_CONST && !x->owns_data && x->data == t->data) x->data = NULL;
    }
    if (t->owns_data) free(t->data);
    if (t->release) t->release(t->keep);
    t->data = NULL;
    t->owns_data = false;
    t->release = NULL;
    t->keep = NULL;
    p->stats.released_bytes += t->nbytes;
}

static void trim_heap(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

void xweights_once_node(xplan *p, int n)
{
    const ts_node *nd = &p->g->nodes[n];
    size_t before = p->stats.released_bytes;
    for (int j = 0; j < nd->ninputs; j++)
        if (nd->inputs[j] >= 0 && releasable(p, nd->inputs[j])) release(p, nd->inputs[j]);
    /* freed originals go back to the OS now: left in malloc's heap,
     * fragments of them sat beside the packed copies (ConvNeXt-T peaked at
     * 219 MiB for 109 MiB of weights, 143 MiB with this) */
    if (p->stats.released_bytes != before) trim_heap();
}

void xweights_once_all(xplan *p)
{
    size_t before = p->stats.released_bytes;
    for (int v = 0; v < p->g->nvalues; v++)
        if (p->g->values[v].constant && releasable(p, v)) release(p, v);
    p->released_late += p->stats.released_bytes - before;
}

/* ---- packing that consumes the original
 *
 * A weight released right after its node is lowered need not sit whole
 * beside its packed copy while it is packed: vgg11's 411 MB FC weight did,
 * and the peak was the other weights plus twice that one.  So a large one is
 * packed a slice at a time along its outermost stored dimension, and each
 * slice's pages of the original go back to the OS as soon as that slice is
 * packed (madvise: the tensor is released after this node anyway, and its
 * allocation stays valid until then). */

/* Node k is n or, while n is lowered, a node of its step's group. */
static bool of_step(const xplan *p, int k, int n)
{
    bool in = k == n;
    for (int i = 0; !in && n == p->lowering && p->group && i < p->group->nnodes; i++) in = p->group->nodes[i] == k;
    return in;
}

bool xweights_once_consumable(const xplan *p, int v, int n)
{
    const ts_graph *g = p->g;
    if (v < 0 || !xweights_once_allowed(p) || !g->values[v].constant) return false;
    const ts_tensor *t = g->values[v].constant;
    if (!t->data || t->refcount != 1 || (!t->owns_data && !t->release) || ts_graph_is_output(g, v)) return false;
    /* read once by each node of the step (vec.gemv's stacked products)
     * and by no other */
    for (int k = 0; k < g->nnodes; k++) {
        const ts_node *nd = &g->nodes[k];
        if (nd->dead) continue;
        int uses = 0;
        for (int j = 0; j < nd->ninputs; j++) uses += nd->inputs[j] == v;
        if (uses && (!of_step(p, k, n) || uses != 1)) return false;
    }
    return !read_by_step(p, v);
}

/* Whole pages from *next up to `end` back to the OS; *next: the first
 * page not yet given back (start it at the data, rounded up). */
void xweights_drop_pages(uintptr_t *next, uintptr_t end)
{
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t page = pg > 0 ? (uintptr_t)pg : 4096, a = (*next + page - 1) & ~(page - 1), b = end & ~(page - 1);
    if (b > a) {
        madvise((void *)a, b - a, MADV_DONTNEED);
        *next = b;
    }
}

/* The dimension along which `from` (plain) stores its rows outermost, and
 * the rows per slice for `to`; -1 when the layouts do not allow slicing. */
static int slice_dim(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, size_t slice_bytes, int64_t *rows)
{
    if (from->ndims != 2 || to->ndims != 2 || from->format_kind != dnnl_blocked || to->format_kind != dnnl_blocked ||
        from->data_type != dnnl_f32 || from->format_desc.blocking.inner_nblks || from->offset0 || to->offset0)
        return -1;
    const dnnl_dims_t *st = &from->format_desc.blocking.strides;
    int d = (*st)[0] >= (*st)[1] ? 0 : 1, o = 1 - d;
    if ((*st)[o] != 1 || (*st)[d] != from->dims[o]) return -1; /* dense rows only */
    int64_t blk = 1;
    for (int i = 0; i < to->format_desc.blocking.inner_nblks; i++)
        if (to->format_desc.blocking.inner_idxs[i] == d) blk *= to->format_desc.blocking.inner_blks[i];
    /* no padding anywhere: the slices then write every byte of the packed
     * copy (zeroing it first would touch all of it before the original
     * gives a page back) */
    if (to->padded_dims[0] != to->dims[0] || to->padded_dims[1] != to->dims[1] || to->padded_offsets[0] ||
        to->padded_offsets[1] || from->dims[d] % blk)
        return -1;
    int64_t per = (int64_t)(slice_bytes / (sizeof(float) * (size_t)from->dims[o])) / blk * blk;
    *rows = per > blk ? per : blk;
    return *rows < from->dims[d] ? d : -1;
}

/* One slice's descriptor inside md (rows [r0, r0 + n) of dimension d) with
 * its offset taken out (*off, elements): the same descriptor for every slice
 * of n rows, so one reorder serves them all. */
static bool slice_md(const dnnl_memory_desc_t *md, int d, int64_t r0, int64_t n, dnnl_memory_desc_t *out,
                     int64_t *off)
{
    dnnl_dims_t dims = {md->dims[0], md->dims[1]}, offs = {0, 0};
    dims[d] = n;
    offs[d] = r0;
    if (dnnl_memory_desc_init_submemory(out, md, dims, offs) != dnnl_success) return false;
    *off = out->offset0;
    out->offset0 = 0;
    return true;
}

ts_status xweights_pack(xplan *p, int n, void *w, size_t wbytes, const dnnl_memory_desc_t *from,
                        const dnnl_memory_desc_t *to, void *dst, bool consume, void (*prepare)(void *ctx), void *ctx,
                        ts_error *err)
{
    int64_t rows = 0;
    size_t min = p->half ? XWEIGHTS_HALF_SLICE_MIN_BYTES : XWEIGHTS_SLICE_MIN_BYTES,
           slice = p->half ? wbytes / 8 : XWEIGHTS_SLICE_BYTES;
    int d = consume && wbytes >= min ? slice_dim(from, to, slice, &rows) : -1;
    /* a large packing is the lowering's peak: the code run so far need not
     * be resident beside it (plan.c, xplan_release_code) */
    if (wbytes >= XWEIGHTS_RELEASE_CODE_BYTES) xplan_release_code(p);
    xd_reorder r[2];
    memset(r, 0, sizeof r);
    int64_t D = d >= 0 ? from->dims[d] : 0, last = d >= 0 ? D - (D - 1) / rows * rows : 0, off;
    dnnl_memory_desc_t a, b;
    /* every slice's descriptors, and both reorders (full slices, the last
     * one), are made before any page goes: once the first is given back,
     * packing cannot fail half-way.  Anything oneDNN declines: whole. */
    for (int64_t r0 = 0; d >= 0 && r0 < D; r0 += rows) {
        int64_t nr = r0 + rows >= D ? last : rows;
        if (!slice_md(from, d, r0, nr, &a, &off) || !slice_md(to, d, r0, nr, &b, &off)) d = -1;
    }
    for (int k = 0; d >= 0 && k < 2; k++) {
        ts_error e = {0};
        int64_t nr = k ? last : rows;
        if (!slice_md(from, d, 0, nr, &a, &off) || !slice_md(to, d, 0, nr, &b, &off) ||
            xd_reorder_init(&r[k], &a, &b, p, n, &e))
            d = -1;
    }
    if (d < 0) {
        xd_reorder_fini(&r[0]);
        xd_reorder_fini(&r[1]);
        ts_status st = xd_reorder_init(&r[0], from, to, p, n, err);
        if (!st) {
            if (prepare) prepare(ctx);
            xd_reorder_run(&r[0], w, dst, p->stream);
            dnnl_stream_wait(p->stream);
        }
        xd_reorder_fini(&r[0]);
        return st;
    }
    if (prepare) prepare(ctx);
    size_t row_bytes = sizeof(float) * (size_t)from->dims[1 - d];
    uintptr_t next = (uintptr_t)w;
    for (int64_t r0 = 0; r0 < D; r0 += rows) {
        int k = r0 + rows >= D && last != rows;
        int64_t nr = r0 + rows >= D ? last : rows, soff = 0, doff = 0;
        slice_md(from, d, r0, nr, &a, &soff); /* checked above */
        slice_md(to, d, r0, nr, &b, &doff);
        xd_reorder_run(&r[k], (float *)w + soff, (float *)dst + doff, p->stream);
        dnnl_stream_wait(p->stream);
        xweights_drop_pages(&next, (uintptr_t)w + (size_t)(r0 + nr) * row_bytes);
    }
    xd_reorder_fini(&r[0]);
    xd_reorder_fini(&r[1]);
    return TS_OK;
}
