/* Plan building: lowers the graph to steps in topological order.
 *
 * For each node the registry's fast kernels are tried best first; one that
 * declines (TS_ERR_UNSUPPORTED) is rolled back completely (steps, buffers,
 * value bindings, claims), so a kernel may give up half way through its
 * build.  The reference kernel is the last resort and never declines for a
 * float32 graph.  View operators (Reshape, Flatten, ...) on plain buffers
 * become aliases with no step at all.  Graph outputs are written straight
 * into the caller's tensors (XB_OUTPUT); an output that is an input, a
 * constant, a view or a duplicate gets a final copy step. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "exec/half.h"
#include "util/mem_check.h"
#include "util/code_pages.h"
#include "exec/pack_cache.h"
#include "exec/plan_internal.h"
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/opaque.h"

static size_t dense_bytes(ts_dtype dt, const ts_shape *s)
{
    return (size_t)ts_shape_numel(s) * ts_dtype_size(dt);
}

static int slot_of(const int *ids, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == v) return i;
    return -1;
}


static int add_buf(xplan *p, const xbuf *b)
{
    if (p->nbufs == p->cap_bufs) {
        int cap = p->cap_bufs ? 2 * p->cap_bufs : 64;
        xbuf *nb = realloc(p->bufs, sizeof *nb * (size_t)cap);
        if (!nb) return -1;
        p->bufs = nb;
        p->cap_bufs = cap;
    }
    p->bufs[p->nbufs] = *b;
    return p->nbufs++;
}

static xbuf plain_buf(int v, ts_dtype dt, const ts_shape *shape, xbuf_kind kind)
{
    return (xbuf){.dtype = dt, .shape = *shape, .bytes = dense_bytes(dt, shape), .kind = kind, .value = v,
                  .alias_of = -1, .first_step = -1, .last_step = -1};
}

int xplan_new_buf(xplan *p, int v, ts_dtype dt, const ts_shape *shape)
{
    xbuf b = plain_buf(v, dt, shape, XB_ARENA);
    return add_buf(p, &b);
}

/* The buffer xplan_value_buf makes for value v on first use: the
 * constant's data, the graph input or output slot, or arena memory. */
static xbuf first_buf(const xplan *p, int v)
{
    const ts_graph *g = p->g;
    const ts_value *val = &g->values[v];
    xbuf b = plain_buf(v, val->dtype, &val->shape, XB_ARENA);
    int slot;
    if (val->constant) {
        b.kind = XB_CONST;
        b.data = val->constant->data; /* the graph outlives the plan */
    } else if ((slot = slot_of(g->inputs, g->ninputs, v)) >= 0) {
        b.kind = XB_INPUT;
        b.offset = slot;
    } else if ((slot = slot_of(g->outputs, g->noutputs, v)) >= 0) {
        b.kind = XB_OUTPUT;
        b.offset = slot;
    }
    return b;
}

int xplan_value_buf(xplan *p, int v)
{
    if (p->value_buf[v] >= 0) return p->value_buf[v];
    xbuf b = first_buf(p, v);
    int id = add_buf(p, &b);
    if (id >= 0) p->value_buf[v] = id;
    return id;
}

const xbuf *xplan_value_layout(const xplan *p, int v, xbuf *scratch)
{
    if (p->value_buf[v] >= 0) return &p->bufs[p->value_buf[v]];
    *scratch = first_buf(p, v);
    return scratch;
}

void xplan_bind_value(xplan *p, int v, int b) { p->value_buf[v] = b; }

/* Identity of a constant is that constant: PyTorch's exporter shares the
 * weights of cloned layers (torch.nn.TransformerEncoder) through Identity
 * nodes, which import keeps when folding them would copy the weights; seen
 * through, their MatMuls get pre-packed weights instead of runtime ones. */
const ts_tensor *xplan_const(const xplan *p, int v)
{
    while (v >= 0 && !p->g->values[v].constant && p->g->values[v].producer >= 0) {
        const ts_node *nd = &p->g->nodes[p->g->values[v].producer];
        if (nd->op != &ts_op_identity || nd->ninputs != 1) break;
        v = nd->inputs[0];
    }
    return v >= 0 ? p->g->values[v].constant : NULL;
}

ts_status xstep_alloc(xstep *s, int nin, int nout, ts_error *err)
{
    s->in = malloc(sizeof(int) * (size_t)(nin + 1));
    s->out = malloc(sizeof(int) * (size_t)(nout + 1));
    if (!s->in || !s->out) {
        free(s->in);
        free(s->out);
        s->in = s->out = NULL;
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < nin; i++) s->in[i] = -1;
    for (int i = 0; i < nout; i++) s->out[i] = -1;
    s->nin = nin;
    s->nout = nout;
    return TS_OK;
}

static bool node_uses(const ts_node *nd, int v)
{
    for (int j = 0; j < nd->ninputs; j++)
        if (nd->inputs[j] == v) return true;
    return false;
}

/* One live consumer per node however many of its slots read the value. */
static void release_inputs(xplan *p, int n)
{
    const ts_node *nd = &p->g->nodes[n];
    for (int j = 0; j < nd->ninputs; j++) {
        int v = nd->inputs[j];
        bool first = v >= 0;
        for (int i = 0; first && i < j; i++) first = nd->inputs[i] != v;
        if (first) p->consumers[v]--;
    }
}

int xplan_sole_consumer(const xplan *p, int v)
{
    if (p->consumers[v] != 1 || ts_graph_is_output(p->g, v)) return -1;
    for (int n = 0; n < p->g->nnodes; n++) {
        const ts_node *nd = &p->g->nodes[n];
        if (!nd->dead && !p->claimed[n] && node_uses(nd, v)) return n;
    }
    return -1;
}

const ts_node *xplan_node(const xplan *p, int k)
{
    bool handed = k == p->lowering;
    for (int i = 0; !handed && p->group && i < p->group->nnodes; i++) handed = p->group->nodes[i] == k;
    /* kernels' helpers see the plan const; the plan itself is not */
    if (!handed && p->stray_node < 0 && xstep_checking()) ((xplan *)p)->stray_node = k;
    return &p->g->nodes[k];
}

void xplan_claim(xplan *p, int n, xstep *s)
{
    if (p->claimed[n]) return;
    p->claimed[n] = true;
    p->claimed_by[n] = s->k;
    release_inputs(p, n);
    s->nfused++;
}

bool xplan_inputs_ready(const xplan *p, int c, int cur)
{
    const ts_node *nd = &p->g->nodes[c];
    for (int i = 0; i < nd->ninputs; i++) {
        int v = nd->inputs[i];
        if (v < 0 || v == cur) continue;
        if (p->g->values[v].producer >= 0 && p->value_buf[v] < 0) return false;
    }
    return true;
}

/* Readers of value w among the nodes step_nodes (n, or with n < 0 the
 * node being lowered and its group). */
static int step_readers(const xplan *p, int n, int w)
{
    if (n >= 0) return node_uses(&p->g->nodes[n], w);
    int k = node_uses(&p->g->nodes[p->lowering], w);
    for (int i = 0; p->group && i < p->group->nnodes; i++)
        if (p->group->nodes[i] != p->lowering) k += node_uses(&p->g->nodes[p->group->nodes[i]], w);
    return k;
}

/* Every value stored in b's memory (its root, the root's views, its plain
 * twins) is dead after the step of n (n < 0: the step being built): its
 * pending readers are the step's nodes. */
static bool inplace_ok(const xplan *p, int b, int n)
{
    int r = xbuf_root(p, b);
    if (p->bufs[r].kind != XB_ARENA) return false;
    for (int c = 0; c < p->nbufs; c++) {
        int w = p->bufs[c].value;
        if (xbuf_root(p, c) != r) continue;
        /* Split pieces are views at offsets: writing over one in place
         * would need the piece's size and offset, not the root's */
        if (xbuf_alias_offset(p, c)) return false;
        if (w < 0) continue;
        int left = p->consumers[w];
        if (left == 0) continue;
        if (ts_graph_is_output(p->g, w) || left != step_readers(p, n, w)) return false;
    }
    return true;
}

bool xplan_inplace_ok(const xplan *p, int b, int n) { return inplace_ok(p, b, n); }

bool xplan_inplace_ok_step(const xplan *p, int b) { return p->lowering >= 0 && inplace_ok(p, b, -1); }

ts_status xplan_push_step(xplan *p, const xstep *s, ts_error *err)
{
    if (p->nsteps == p->cap_steps) {
        int cap = p->cap_steps ? 2 * p->cap_steps : 64;
        xstep *ns = realloc(p->steps, sizeof *ns * (size_t)cap);
        if (!ns) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        p->steps = ns;
        p->cap_steps = cap;
    }
    p->steps[p->nsteps++] = *s;
    return TS_OK;
}

static void step_clear(xstep *s)
{
    if (s->state && s->k && s->k->destroy) s->k->destroy(s->state);
    free(s->in);
    free(s->out);
    *s = (xstep){0};
}

/* Node index to name a plan-inserted step after: the value's producer. */
static int step_node_for(const xplan *p, int b)
{
    int v = p->bufs[b].value;
    return v >= 0 ? p->g->values[v].producer : -1;
}

int xplan_plain(xplan *p, int b, ts_error *err)
{
    if (b < 0 || !p->bufs[b].blocked) return b;
    /* One conversion per blocked buffer, shared by all plain readers. */
    for (int i = 0; i < p->nsteps; i++)
        if (p->steps[i].k == &xk_reorder && p->steps[i].in[0] == b && !p->bufs[p->steps[i].out[0]].blocked)
            return p->steps[i].out[0];
    xstep s = {.k = &xk_reorder, .node = step_node_for(p, b)};
    int o = xplan_new_buf(p, p->bufs[b].value, p->bufs[b].dtype, &p->bufs[b].shape);
    if (o < 0) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return -1;
    }
    if (xstep_alloc(&s, 1, 1, err)) return -1;
    s.in[0] = b;
    s.out[0] = o;
    if (xreorder_build(p, &s, err) || xplan_push_step(p, &s, err)) {
        step_clear(&s);
        return -1;
    }
    return o;
}

/* ---------------------------------------------------------------- copies */

static void copy_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    (void)scratch;
    size_t n = *(const size_t *)s->state;
    if (n && out[0] != in[0]) memcpy(out[0], in[0], n);
}

const xkernel xk_copy = {"copy", NULL, copy_run, free};

/* --------------------------------------------------------------- views */

static bool is_view(const ts_node *nd)
{
    const ts_op_desc *op = nd->op;
    if (nd->noutputs != 1 || nd->ninputs < 1 || nd->inputs[0] < 0) return false;
    if (op == &ts_op_dropout) /* inference: identity unless training_mode is given */
        return nd->ninputs < 3 || nd->inputs[2] < 0;
    return op == &ts_op_reshape || op == &ts_op_flatten || op == &ts_op_squeeze || op == &ts_op_unsqueeze ||
           op == &ts_op_identity;
}

/* The scalar constant input i of nd, or def when absent; false when it is
 * not a one-element constant. */
static bool const_scalar_in(const xplan *p, const ts_node *nd, int i, double def, double *v)
{
    *v = def;
    if (nd->ninputs <= i || nd->inputs[i] < 0) return true;
    const ts_tensor *t = xplan_const(p, nd->inputs[i]);
    if (!t || ts_tensor_numel(t) != 1) return false;
    *v = ts_tensor_get_f64(t, 0);
    return true;
}

/* Dropout as torch.nn.functional.dropout exports it: an identity when
 * training_mode is a constant false, or true with a constant ratio 0
 * (torchvision 0.14's Swin calls F.dropout(attn, p=0.0) with training
 * left at True: 24 such nodes ran the reference kernel as copies), and
 * nothing reads the mask output. */
static bool is_dropout_view(const xplan *p, const ts_node *nd)
{
    double train, ratio;
    if (nd->op != &ts_op_dropout || nd->ninputs < 1 || nd->inputs[0] < 0 || nd->noutputs > 2) return false;
    if (!const_scalar_in(p, nd, 2, 0, &train) || !const_scalar_in(p, nd, 1, 0.5, &ratio)) return false;
    if (train != 0 && ratio != 0) return false;
    return nd->noutputs < 2 || nd->outputs[1] < 0 || p->consumers[nd->outputs[1]] == 0;
}

/* A Transpose that moves only dims of extent 1 leaves every element at its
 * row-major offset: a Reshape.  nn.MultiheadAttention's exports (ViT,
 * transformer_encoder) go [1, s, e] -> [s, 1, e] before the in-projection
 * and back after the out-projection at batch 1: two copies of the
 * activations a layer (vec.transpose, as a memcpy), now none. */
static bool is_transpose_view(const xplan *p, const ts_node *nd)
{
    if (nd->op != &ts_op_transpose || nd->noutputs != 1 || nd->ninputs < 1 || nd->inputs[0] < 0) return false;
    const ts_value *x = &p->g->values[nd->inputs[0]];
    if (x->dtype == TS_MODP) return false;
    const ts_transpose_attrs *a = nd->attrs;
    int64_t last = -1;
    for (int d = 0; d < x->shape.rank; d++) {
        int64_t pd = a->nperm < 0 ? x->shape.rank - 1 - d : a->perm[d];
        if (pd < 0 || pd >= x->shape.rank) return false;
        if (x->shape.dims[pd] == 1) continue;
        if (pd < last) return false; /* two dims of extent > 1 swap */
        last = pd;
    }
    return true;
}

/* A Transpose whose input already lies in memory in the order of its
 * result: the input's buffer is a dense permutation (a convolution's
 * channels-last output, oneDNN's acdb) that the Transpose undoes, so the
 * plain result is that memory as it is.  ConvNeXt permutes each block's
 * depthwise conv output to NHWC for the LayerNorm and the MLP, Swin its
 * patch embedding's: each was a copy of the tensor (dnnl.transpose, one
 * reorder pass), now none.  Dims of extent 1 go anywhere.  Looked up, not
 * made: a value with no buffer yet is plain.  TSOPT_SKIP=transpose.undo
 * keeps the copy (A/B). */
static bool is_transpose_undoing(const xplan *p, const ts_node *nd)
{
    if (nd->op != &ts_op_transpose || nd->noutputs != 1 || nd->ninputs < 1 || nd->inputs[0] < 0) return false;
    int b = p->value_buf[nd->inputs[0]];
    const ts_shape *xs = &p->g->values[nd->inputs[0]].shape;
    int order[TS_MAX_RANK], r = xs->rank;
    if (b < 0 || !p->bufs[b].blocked || !xbuf_dense_order(&p->bufs[b], order) || xplan_skips(p, "transpose.undo"))
        return false;
    const ts_transpose_attrs *a = nd->attrs;
    /* the result's dims of extent > 1, in logical order, must be the
     * input's in physical order */
    int k = 0;
    for (int d = 0; d < r; d++) {
        int64_t pd = a->nperm < 0 ? r - 1 - d : a->perm[d];
        if (pd < 0 || pd >= r) return false;
        if (xs->dims[pd] == 1) continue;
        while (k < r && xs->dims[order[k]] == 1) k++;
        if (k >= r || order[k] != pd) return false;
        k++;
    }
    return true;
}

/* A Transpose of a plain NHWC tensor back to NCHW (perm 0,3,1,2: the end
 * of ConvNeXt's blocks, after the MLP) leaves every element where it is
 * if the result is described as channels-last (oneDNN's acdb), the layout
 * the convolutions read and write: a view.  Its readers take it as they
 * take a conv's output: an element-wise step whose operands share that
 * layout runs on it and keeps it (vec_fuse.c, ConvNeXt's residual sum), a
 * convolution reads it without converting, a reader that needs NCHW gets
 * one conversion (the copy this was).  TSOPT_SKIP=transpose.cl (A/B). */
static bool is_transpose_to_cl_view(const xplan *p, const ts_node *nd)
{
    static const int64_t to_nchw[4] = {0, 3, 1, 2};
    if (nd->op != &ts_op_transpose || nd->noutputs != 1 || nd->ninputs < 1 || nd->inputs[0] < 0) return false;
    const ts_value *x = &p->g->values[nd->inputs[0]];
    const ts_transpose_attrs *a = nd->attrs;
    if (x->dtype != TS_F32 || x->shape.rank != 4 || a->nperm != 4 || memcmp(a->perm, to_nchw, sizeof to_nchw))
        return false;
    int b = p->value_buf[nd->inputs[0]];
    return (b < 0 || !p->bufs[b].blocked) && !xplan_skips(p, "transpose.cl");
}

/* A Reshape of a buffer in a dense permuted layout that only merges dims
 * lying next to each other, in order, in memory (ViT's patch embedding:
 * the conv's channels-last [1, 768, 14, 14] flattened to [1, 768, 196],
 * H and W adjacent inside each channel-last pixel row) is the same bytes
 * in a permuted layout of the new shape: *md gets it.  It was a conversion
 * to NCHW for the Reshape and, after it, a copy for the Transpose to
 * [1, 196, 768] that is_transpose_undoing now takes as a view.  False when
 * the shape splits a dim or merges dims apart in memory (then the plain
 * path: one conversion).  TSOPT_SKIP=reshape.order (A/B). */
static bool reshape_keeps_order(const xplan *p, int b, const ts_shape *xs, const ts_shape *ys, dnnl_memory_desc_t *md)
{
    int order[TS_MAX_RANK], pos[TS_MAX_RANK];
    if (b < 0 || !p->bufs[b].blocked || p->bufs[b].dtype != TS_F32 || !xbuf_dense_order(&p->bufs[b], order) ||
        xplan_skips(p, "reshape.order"))
        return false;
    for (int k = 0; k < xs->rank; k++) pos[order[k]] = k;
    const dnnl_dims_t *xst = &p->bufs[b].md.format_desc.blocking.strides;
    dnnl_dims_t dims, strides;
    int i = 0;
    for (int j = 0; j < ys->rank; j++) {
        dims[j] = ys->dims[j];
        int64_t prod = 1;
        int last = -1; /* the group's innermost dim of extent > 1 so far */
        strides[j] = 1;
        while (prod < ys->dims[j]) {
            if (i >= xs->rank) return false;
            int64_t e = xs->dims[i];
            if (e != 1) {
                if (last >= 0 && pos[i] != pos[last] + 1) return false; /* apart or reversed in memory */
                last = i;
            }
            prod *= e;
            i++;
        }
        if (prod != ys->dims[j]) return false;
        if (last >= 0) strides[j] = (*xst)[last];
    }
    while (i < xs->rank && xs->dims[i] == 1) i++;
    if (i != xs->rank || ys->rank > DNNL_MAX_NDIMS) return false;
    /* extent-1 output dims: a stride inside their neighbours' keeps the layout dense */
    for (int j = ys->rank - 1; j >= 0; j--)
        if (dims[j] == 1) strides[j] = j + 1 < ys->rank ? strides[j + 1] * dims[j + 1] : 1;
    if (dnnl_memory_desc_init_by_strides(md, ys->rank, dims, dnnl_f32, strides) != dnnl_success) return false;
    xbuf t = {.blocked = true, .md = *md, .shape = *ys};
    int o[TS_MAX_RANK];
    return xbuf_dense_order(&t, o) && !xbuf_order_plain(o, ys->rank);
}

/* 1: node n became an alias of its input; 0: not a view here; -1: error. */
static int try_view(xplan *p, int n, ts_error *err)
{
    const ts_node *nd = &p->g->nodes[n];
    bool undoing = is_transpose_undoing(p, nd), to_cl = !undoing && is_transpose_to_cl_view(p, nd);
    if (!undoing && !to_cl && !is_view(nd) && !is_dropout_view(p, nd) && !is_transpose_view(p, nd)) return 0;
    int vi = nd->inputs[0], vo = nd->outputs[0];
    const ts_value *in = &p->g->values[vi], *out = &p->g->values[vo];
    /* A graph output must land in the caller's tensor: let a step copy it. */
    if (ts_graph_is_output(p->g, vo) || in->dtype != out->dtype ||
        ts_shape_numel(&in->shape) != ts_shape_numel(&out->shape))
        return 0;
    int b = xplan_value_buf(p, vi);
    if (b < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory"), -1;
    dnnl_memory_desc_t kept;
    bool keep = !undoing && !to_cl && is_view(nd) && reshape_keeps_order(p, b, &in->shape, &out->shape, &kept);
    if (!undoing && !keep && (b = xplan_plain(p, b, err)) < 0) return -1;
    xbuf a = plain_buf(vo, out->dtype, &out->shape, XB_ALIAS);
    if (keep) {
        a.md = kept;
        a.blocked = true;
    }
    if (to_cl) {
        dnnl_dims_t d = {out->shape.dims[0], out->shape.dims[1], out->shape.dims[2], out->shape.dims[3]};
        if (dnnl_memory_desc_init_by_tag(&a.md, 4, d, dnnl_f32, dnnl_acdb) != dnnl_success) return 0;
        a.blocked = true;
    }
    a.alias_of = xbuf_root(p, b);
    a.offset = xbuf_alias_offset(p, b); /* a view of a Split piece */
    int id = add_buf(p, &a);
    if (id < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory"), -1;
    xplan_bind_value(p, vo, id);
    return 1;
}

/* A Split whose pieces are contiguous in its plain input (every dimension
 * before the axis is 1: a channel split of an N=1 NCHW tensor, a column
 * split of a one-row matrix) needs no copy: each output is an alias at a
 * byte offset into the input; likewise an N=1 channel-blocked conv output
 * split at block boundaries.  1: done; 0: not contiguous here; -1: error. */
static int try_split_view(xplan *p, int n, ts_error *err)
{
    const ts_node *nd = &p->g->nodes[n];
    if (nd->op != &ts_op_split || nd->ninputs < 1 || nd->inputs[0] < 0 || !nd->op->emit) return 0;
    const ts_value *in = &p->g->values[nd->inputs[0]];
    ts_attr a[4];
    int na = nd->op->emit(nd->attrs, a, 4), axis = -1;
    int64_t ax = 0;
    for (int i = 0; i < na; i++)
        if (!strcmp(a[i].name, "axis")) ax = a[i].i;
    axis = (int)(ax < 0 ? ax + in->shape.rank : ax);
    if (axis < 0 || axis >= in->shape.rank) return 0;
    for (int d = 0; d < axis; d++)
        if (in->shape.dims[d] != 1) return 0;
    for (int o = 0; o < nd->noutputs; o++) {
        const ts_value *out = &p->g->values[nd->outputs[o]];
        /* a graph output must land in the caller's tensor: let a step copy it */
        if (nd->outputs[o] < 0 || ts_graph_is_output(p->g, nd->outputs[o]) || out->dtype != in->dtype) return 0;
    }
    int b = xplan_value_buf(p, nd->inputs[0]);
    if (b < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory"), -1;
    /* A conv's output in oneDNN's channel-blocked layout (N=1, blocks of 8
     * or 16 channels) splits at block boundaries into pieces that are
     * themselves blocked tensors: views too, with no reorder either way. */
    int block = 0;
    if (p->bufs[b].blocked && axis == 1 && in->shape.rank == 4 && in->dtype == TS_F32) {
        for (int k = 0; k < 2 && !block; k++) {
            dnnl_memory_desc_t md;
            dnnl_dims_t d = {in->shape.dims[0], in->shape.dims[1], in->shape.dims[2], in->shape.dims[3]};
            dnnl_memory_desc_init_by_tag(&md, 4, d, dnnl_f32, k ? dnnl_aBcd8b : dnnl_aBcd16b);
            if (dnnl_memory_desc_equal(&md, &p->bufs[b].md)) block = k ? 8 : 16;
        }
        for (int o = 0; o < nd->noutputs && block; o++)
            if (p->g->values[nd->outputs[o]].shape.dims[1] % block) block = 0;
    }
    if (!block && p->bufs[b].blocked && in->dtype == TS_F32) {
        /* a channels-last conv output (acdb): its channel pieces are not
         * contiguous, and making them views would convert the whole tensor
         * to plain and each piece back for the convs that read it (NasNet-A
         * after merge-siblings: 136 reorders a run against 1); vec.split
         * copies the pieces in the physical order instead */
        int order[TS_MAX_RANK];
        if (xbuf_dense_order(&p->bufs[b], order) && !xbuf_order_plain(order, in->shape.rank)) return 0;
    }
    if (!block && (b = xplan_plain(p, b, err)) < 0) return -1;
    int64_t off = xbuf_alias_offset(p, b);
    int root = xbuf_root(p, b);
    for (int o = 0; o < nd->noutputs; o++) {
        const ts_value *out = &p->g->values[nd->outputs[o]];
        xbuf v = plain_buf(nd->outputs[o], out->dtype, &out->shape, XB_ALIAS);
        if (block) {
            dnnl_dims_t d = {out->shape.dims[0], out->shape.dims[1], out->shape.dims[2], out->shape.dims[3]};
            dnnl_memory_desc_init_by_tag(&v.md, 4, d, dnnl_f32, block == 8 ? dnnl_aBcd8b : dnnl_aBcd16b);
            v.blocked = true;
            v.bytes = dnnl_memory_desc_get_size(&v.md);
        }
        v.alias_of = root;
        v.offset = off;
        int id = add_buf(p, &v);
        if (id < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory"), -1;
        xplan_bind_value(p, nd->outputs[o], id);
        off += (int64_t)v.bytes;
    }
    return 1;
}

/* ------------------------------------------------------------- lowering */

/* The step's buffer ids must all exist (a kernel may have hit an
 * out-of-memory in xplan_new_buf without noticing). */
static bool step_valid(const xplan *p, const xstep *s)
{
    for (int i = 0; i < s->nin; i++)
        if (s->in[i] < -1 || s->in[i] >= p->nbufs) return false;
    for (int i = 0; i < s->nout; i++)
        if (s->out[i] < 0 || s->out[i] >= p->nbufs) return false;
    return true;
}

/* Kernel k builds node n into s.  A kernel the lowering stage serves
 * (lower_group.c) is handed its group's variant-th choice, decided first
 * (TS_ERR_UNSUPPORTED when none forms), and the plan claims the group's
 * nodes for the step.
 *
 * A kernel decides before it touches the plan: it declines
 * (TS_ERR_UNSUPPORTED) only while the plan is as it found it, so that the
 * next candidate starts from the same plan and nothing needs undoing (the
 * plan keeps no copy to restore).  A decline that made steps or buffers
 * fails the plan here, naming the kernel: two counts compared, so on in
 * every build.  With the step check on (xstep_checking), a kernel that read
 * a node it was not handed (xplan_node) or a value none of the step's nodes
 * reads (step_check.c) fails it too. */
ts_status xplan_build_step(xplan *p, const xkernel *k, int n, int variant, xstep *s, ts_error *err)
{
    xgroup grp;
    int formed = xgroup_form(p, k, n, variant, &grp);
    if (formed < 0) return TS_ERR_UNSUPPORTED;
    if (!formed && variant) return TS_ERR_UNSUPPORTED;
    s->variant = variant;
    p->lowering = n;
    p->group = formed ? &grp : NULL;
    p->stray_node = -1;
    const int nsteps = p->nsteps, nbufs = p->nbufs;
    ts_status st = k->build(p, n, s, err);
    if (st == TS_ERR_UNSUPPORTED && (p->nsteps != nsteps || p->nbufs != nbufs))
        st = ts_error_set(err, TS_ERR_INVALID,
                          "kernel %s of node '%s' declined after changing the plan (%d steps, %d buffers made): it "
                          "must decide before it touches the plan",
                          k->name, p->g->nodes[n].name, p->nsteps - nsteps, p->nbufs - nbufs);
    if (st == TS_OK && p->stray_node >= 0)
        st = ts_error_set(err, TS_ERR_INVALID, "kernel %s of node '%s' reads node '%s', which is not its own", k->name,
                          p->g->nodes[n].name, p->g->nodes[p->stray_node].name);
    if (st == TS_OK && xstep_checking())
        st = xstep_check_reads(p, s, formed ? grp.nodes : NULL, formed ? grp.nnodes : 0, nbufs, err);
    for (int i = 1; st == TS_OK && formed && i < grp.nnodes; i++) xplan_claim(p, grp.nodes[i], s);
    if (formed) xgroup_free(&grp);
    p->group = NULL;
    p->lowering = -1;
    return st;
}

static ts_status lower_node(xplan *p, int n, ts_error *err)
{
    const ts_node *nd = &p->g->nodes[n];
    int r = try_view(p, n, err);
    if (!r) r = try_split_view(p, n, err);
    if (r < 0) return err->code;
    if (r > 0) {
        p->claimed[n] = true;
        p->claimed_by[n] = NULL;
        release_inputs(p, n);
        return TS_OK;
    }
    const xkernel *cand[XKERNELS_MAX + 2];
    int nc = 0;
    xkernels_for(nd->op, cand);
    while (cand[nc]) nc++;
    cand[nc++] = &xk_ref;
    /* each candidate with each choice of its group (lower_group.c), largest first */
    for (int i = 0; i < nc * XGROUP_VARIANTS; i++) {
        int c = i / XGROUP_VARIANTS, variant = i % XGROUP_VARIANTS;
        bool last = c == nc - 1;
        if ((!last && xplan_skips(p, cand[c]->name)) || variant >= xgroup_choices(cand[c])) continue;
        xstep s = {.k = cand[c], .node = n};
        ts_error e = {0};
        ts_status st = xplan_build_step(p, cand[c], n, variant, &s, &e); /* a decline left the plan as it was */
        if (st == TS_OK && !step_valid(p, &s)) st = ts_error_set(&e, TS_ERR_NOMEM, "out of memory");
        if (st == TS_OK) {
            p->claimed[n] = true;
            p->claimed_by[n] = cand[c];
            release_inputs(p, n);
            if ((st = xplan_push_step(p, &s, err))) step_clear(&s);
            return st;
        }
        step_clear(&s);
        if (st != TS_ERR_UNSUPPORTED || last) {
            *err = e;
            if (!strstr(err->msg, nd->name))
                ts_error_prefix(err, "node '%s' (%s), kernel %s", nd->name, nd->op->name, cand[c]->name);
            return st;
        }
    }
    return ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s' (%s): no kernel", nd->name, nd->op->name);
}

/* Each graph output slot ends in its own XB_OUTPUT buffer. */
static ts_status bind_outputs(xplan *p, ts_error *err)
{
    const ts_graph *g = p->g;
    for (int i = 0; i < g->noutputs; i++) {
        int v = g->outputs[i];
        int b = xplan_value_buf(p, v);
        if (b < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        if (p->bufs[b].kind == XB_OUTPUT && p->bufs[b].offset == i) continue;
        xbuf ob = plain_buf(v, g->values[v].dtype, &g->values[v].shape, XB_OUTPUT);
        ob.offset = i;
        int o = add_buf(p, &ob);
        xstep s = {.k = p->bufs[b].blocked ? &xk_reorder : &xk_copy, .node = step_node_for(p, b)};
        if (o < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        if (xstep_alloc(&s, 1, 1, err)) return err->code;
        s.in[0] = b;
        s.out[0] = o;
        ts_status st = TS_OK;
        if (s.k == &xk_reorder) {
            st = xreorder_build(p, &s, err);
        } else if (!(s.state = malloc(sizeof(size_t)))) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        } else {
            *(size_t *)s.state = ob.bytes;
        }
        if (st || (st = xplan_push_step(p, &s, err))) {
            step_clear(&s);
            return ts_error_prefix(err, "output '%s'", g->values[v].name);
        }
    }
    return TS_OK;
}

static void mark_use(xplan *p, int b, int i)
{
    for (;;) {
        xbuf *x = &p->bufs[b];
        if (x->first_step < 0 || i < x->first_step) x->first_step = i;
        if (i > x->last_step) x->last_step = i;
        if (x->kind != XB_ALIAS) return;
        b = x->alias_of; /* a view keeps its storage alive */
    }
}

static void compute_lifetimes(xplan *p)
{
    for (int b = 0; b < p->nbufs; b++) p->bufs[b].first_step = p->bufs[b].last_step = -1;
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        for (int j = 0; j < s->nin; j++)
            if (s->in[j] >= 0) mark_use(p, s->in[j], i);
        for (int j = 0; j < s->nout; j++) mark_use(p, s->out[j], i);
    }
}

static void fill_stats(xplan *p)
{
    ts_plan_stats *st = &p->stats;
    st->steps = p->nsteps;
    st->fused_nodes = st->reorders = st->fallback_steps = st->ref_impls = 0;
    st->weight_bytes = 0;
    for (int i = 0; i < p->nsteps; i++) {
        st->fused_nodes += p->steps[i].nfused;
        st->reorders += p->steps[i].k == &xk_reorder;
        st->fallback_steps += xhalf_inner(&p->steps[i])->k == &xk_ref;
        st->ref_impls += p->steps[i].ref_impl;
    }
    for (int b = 0; b < p->nbufs; b++)
        if (p->bufs[b].kind == XB_CONST && (p->bufs[b].first_step >= 0 || p->bufs[b].owns_data))
            st->weight_bytes += p->bufs[b].bytes;
}

static void plan_destroy(xplan *p)
{
    if (!p) return;
    for (int i = 0; i < p->nsteps; i++) step_clear(&p->steps[i]);
    for (int b = 0; b < p->nbufs; b++) {
        if (p->bufs[b].owns_data) free(p->bufs[b].data);
        xpack_unref(p->bufs[b].shared);
    }
    free(p->steps);
    free(p->bufs);
    free(p->value_buf);
    free(p->claimed);
    free(p->claimed_by);
    free(p->consumers);
    free(p->rebound);
    free(p->rebuf);
    free(p->arena);
    free(p->ptrs);
    ts_graph_free(p->own_g);
    if (p->stream) dnnl_stream_destroy(p->stream);
    if (p->engine) dnnl_engine_destroy(p->engine);
    free(p);
}

void ts_plan_free(ts_plan *p) { plan_destroy((xplan *)p); }

void ts_plan_stats_get(const ts_plan *p, ts_plan_stats *st) { *st = ((const xplan *)p)->stats; }

static ts_status init_plan(xplan *p, ts_error *err)
{
    const ts_graph *g = p->g;
    size_t nv = (size_t)g->nvalues + 1, nn = (size_t)g->nnodes + 1;
    p->value_buf = malloc(sizeof(int) * nv);
    p->consumers = calloc(nv, sizeof(int));
    p->claimed = calloc(nn, sizeof(bool));
    p->claimed_by = calloc(nn, sizeof *p->claimed_by);
    if (!p->value_buf || !p->consumers || !p->claimed || !p->claimed_by)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int v = 0; v < g->nvalues; v++) p->value_buf[v] = -1;
    p->lowering = p->stray_node = -1;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead) continue;
        for (int j = 0; j < nd->ninputs; j++) {
            int v = nd->inputs[j];
            bool first = v >= 0;
            for (int i = 0; first && i < j; i++) first = nd->inputs[i] != v;
            if (first) p->consumers[v]++;
        }
    }
    for (int i = 0; i < g->noutputs; i++) p->consumers[g->outputs[i]]++;
    if (dnnl_engine_create(&p->engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&p->stream, p->engine, dnnl_stream_default_flags) != dnnl_success)
        return ts_error_set(err, TS_ERR_INVALID, "oneDNN: cannot create the CPU engine");
    return TS_OK;
}

static ts_status lower_all(xplan *p, ts_error *err)
{
    const ts_graph *g = p->g;
    int *order = malloc(sizeof(int) * ((size_t)g->nnodes + 1)), cnt = 0;
    ts_status st = TS_OK;
    if (!order)
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    else
        st = ts_graph_topo_order(g, order, &cnt, err);
    bool once = !st && xweights_once_allowed(p);
    /* checked[n]: node n's constants were offered to xweights_once_node */
    bool *checked = once ? calloc((size_t)g->nnodes + 1, sizeof(bool)) : NULL;
    if (once && !checked) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int k = 0; !st && k < cnt; k++) {
        if (p->claimed[order[k]]) continue;
        int nbufs = p->nbufs, nsteps = p->nsteps;
        if (!(st = xhalf_before_node(p, order[k], err)) && !(st = lower_node(p, order[k], err)) && once) {
            /* this layer's originals go before the next layer packs: those
             * of the nodes its step fused too (a squeeze-excite block's two
             * FC weights, claimed with its pool, waited for the plan's end:
             * mobilenet_v3_large held 5.8 MiB of them at its peak) */
            bool fused = false;
            for (int i = nsteps; i < p->nsteps; i++) fused |= p->steps[i].nfused > 0;
            for (int j = k; j < cnt && (j == k || fused); j++)
                if (p->claimed[order[j]] && !checked[order[j]]) {
                    checked[order[j]] = true;
                    xweights_once_node(p, order[j]);
                }
        }
        if (!st) st = xhalf_after_node(p, nbufs, err); /* its packed weights stored 16-bit again */
    }
    free(checked);
    free(order);
    return st;
}

/* The code only loading and planning ran goes back (util/code_pages.c):
 * tsopt's own import and graph passes as the plan starts, so that the
 * lowering's peak (a layer packed beside the originals still held: dcgan,
 * infogan, nasrnn) does not carry them; libdnnl's kernel generators and
 * the lowering's code once the plan's primitives exist, before the arena is
 * made, so that the resident set at run time holds the code running
 * touches.  Only for a plan built once
 * to be run (ts_plan_opts.release_packed_weights: tsopt run/bench, a
 * session's graph); a decoder's per-token re-binds and the optimizer's
 * costing build plans again and again and would fault the generators back
 * in each time.  Measured (peak RSS, tsopt bench --iters 3, loaded Intel
 * Xeon, TSOPT_SKIP=code_pages / not): squeezenet1_1 28.0 -> 25.0 MiB,
 * densenet121 73.0 -> 69.9, efficientnet_b0 44.3 -> 41.8; the peak is
 * then the lowering's; at the plan's start too: nasrnn 35.0 -> 33.9 MiB,
 * infogan 43.3 -> 42.7 (355ae46: 34.6, 42.9).  TSOPT_SKIP=code_pages
 * keeps them (A/B). */
void xplan_release_code(const xplan *p)
{
    if (!p->release_code) return;
    const uintptr_t in[] = {(uintptr_t)&dnnl_primitive_desc_create, (uintptr_t)&xplan_release_code};
    xcode_pages_release(in, 2);
    xmem_trace("plan: code pages released");
}

static ts_status plan_build(const ts_graph *g, const ts_plan_opts *o, ts_plan **out, ts_error *err)
{
    *out = NULL;
    if (ts_graph_check_runnable(g, err)) return err->code; /* opaque nodes: one line naming the first */
    xplan *p = calloc(1, sizeof *p);
    if (!p) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    p->g = p->built_g = g;
    if (o) p->opts = *o;
    if (p->opts.threads <= 0) p->opts.threads = omp_get_num_procs();
    bool lean = p->opts.release_packed_weights; /* as the caller asked (half plans set it for themselves) */
    omp_set_num_threads(p->opts.threads); /* oneDNN builds for the pool it will run on */
    ts_status st = xhalf_begin(p, err); /* float16/bfloat16: p->g becomes a float32-computing copy */
    if (!st) st = init_plan(p, err);
    p->release_code = !st && lean && !xplan_skips(p, "code_pages");
    xplan_release_code(p); /* the import's */
    xmem_trace("plan: start");
    if (!st) st = lower_all(p, err);
    xmem_trace("plan: nodes lowered");
    if (!st) st = bind_outputs(p, err);
    if (!st && xweights_once_allowed(p)) xweights_once_all(p);
    if (!st) st = xhalf_finish(p, err);
    xmem_trace("plan: originals released");
    if (st) {
        plan_destroy(p);
        return st;
    }
    xplan_release_code(p);
    compute_lifetimes(p);
    p->arena_bytes = xmemplan_assign(p, true);
    bool kept_float = false; /* half plans: float32 copies of weights within a byte budget */
    if (xhalf_spend_budget(p, &kept_float, err)) {
        plan_destroy(p);
        return err->code;
    }
    if (kept_float) p->arena_bytes = xmemplan_assign(p, true);
    /* ptrs: one per buffer, then room for the largest step's in+out
     * argument vectors, so that running needs no allocation. */
    size_t args = 0;
    for (int i = 0; i < p->nsteps; i++)
        if ((size_t)(p->steps[i].nin + p->steps[i].nout) > args) args = (size_t)(p->steps[i].nin + p->steps[i].nout);
    p->ptrs = calloc((size_t)p->nbufs + args + 1, sizeof(void *));
    /* the arena is the plan's one large allocation: checked against the
     * memory left before it is made (mem_check.c) */
    if (p->arena_bytes && ts_mem_check(p->arena_bytes, "the plan's arena (activations and scratch)", err)) {
        plan_destroy(p);
        return err->code;
    }
    if (p->arena_bytes) {
        size_t sz = (p->arena_bytes + 63) & ~(size_t)63;
        p->arena = aligned_alloc(64, sz);
        if (p->arena) memset(p->arena, 0, sz); /* deterministic padding, pages touched once now */
        p->arena_cap = sz;
    }
    if (!p->ptrs || (p->arena_bytes && !p->arena)) {
        plan_destroy(p);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory: plan arena of %zu bytes", p->arena_bytes);
    }
    fill_stats(p);
    xmem_trace("plan: arena allocated");
    *out = (ts_plan *)p;
    return TS_OK;
}

ts_status ts_plan_build(const ts_graph *g, const ts_plan_opts *o, ts_plan **out, ts_error *err)
{
    /* the OpenMP thread count is the caller's process-wide setting: give it
     * back as found */
    int caller_threads = omp_get_max_threads();
    ts_status st = plan_build(g, o, out, err);
    omp_set_num_threads(caller_threads);
    return st;
}

/* ---- for plan_rebind.c */
ts_status xplan_init(xplan *p, ts_error *err) { return init_plan(p, err); }
void xplan_release_inputs(xplan *p, int n) { release_inputs(p, n); }
void xstep_clear(xstep *s) { step_clear(s); }
void xplan_relayout(xplan *p)
{
    compute_lifetimes(p);
    fill_stats(p);
}
