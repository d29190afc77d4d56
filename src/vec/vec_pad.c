/* Pad (constant, reflect, edge; any rank and element type but the exact
 * domain; negative pads crop) as row copies: the output is walked one
 * innermost row at a time, the source row found per outer dim (constant
 * mode: none when outside, the whole row is the fill value), and within the
 * row one memcpy for the inside span plus the borders.  In constant mode
 * unpadded inner dims merge into the row, so NHWC padding of H and W copies
 * whole pixels.  A dense permuted input (channels-last from a conv) is
 * padded in its own order and the result keeps it: no reorders around.
 * pads, constant_value and axes must be constants (opset >= 11 inputs).
 * All pads zero (PyTorch exports one before every AvgPool2d: DenseNet's
 * transitions copied 1.3 MB each, and a blocked input was converted to
 * plain for it) is a view: the result is the input's storage, in any
 * layout, and the step does nothing. */
#include <stdlib.h>
#include "vec/vec.h"
#include "vec/vec_layout.h"
#include "ops/attrs.h"

typedef struct pad_state {
    int mode, rank, threads;
    size_t es;
    int64_t in[TS_MAX_RANK], out[TS_MAX_RANK], beg[TS_MAX_RANK], istride[TS_MAX_RANK];
    int64_t rows, bytes;
    unsigned char cval[16];
    bool view; /* all pads zero: the output is an alias of the input */
} pad_state;

/* Source index on one axis for output index i, or -1 (constant: outside). */
static inline int64_t src_index(int mode, int64_t i, int64_t beg, int64_t len)
{
    int64_t j = i - beg;
    if (j >= 0 && j < len) return j;
    if (mode == TS_PAD_CONSTANT) return -1;
    if (mode == TS_PAD_EDGE) return j < 0 ? 0 : len - 1;
    return j < 0 ? -j : 2 * (len - 1) - j; /* reflect: pads are < len (checked at inference) */
}

static void fill(char *dst, int64_t n, const unsigned char *cval, size_t es)
{
    if (es == 4) {
        uint32_t v;
        memcpy(&v, cval, 4);
        for (int64_t i = 0; i < n; i++) ((uint32_t *)dst)[i] = v;
    } else {
        for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * es, cval, es);
    }
}

static void pad_row(const pad_state *s, const char *src, char *dst)
{
    const int r = s->rank - 1;
    const int64_t len = s->in[r], olen = s->out[r], beg = s->beg[r];
    const size_t es = s->es;
    if (!src) {
        fill(dst, olen, s->cval, es);
        return;
    }
    int64_t lo = beg > 0 ? beg : 0, hi = len + beg < olen ? len + beg : olen;
    if (hi < lo) hi = lo;
    if (hi > lo) memcpy(dst + (size_t)lo * es, src + (size_t)(lo - beg) * es, (size_t)(hi - lo) * es);
    if (s->mode == TS_PAD_CONSTANT) {
        fill(dst, lo, s->cval, es);
        fill(dst + (size_t)hi * es, olen - hi, s->cval, es);
        return;
    }
    for (int64_t i = 0; i < lo; i++) memcpy(dst + (size_t)i * es, src + (size_t)src_index(s->mode, i, beg, len) * es, es);
    for (int64_t i = hi; i < olen; i++)
        memcpy(dst + (size_t)i * es, src + (size_t)src_index(s->mode, i, beg, len) * es, es);
}

static void pad_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const pad_state *s = st->state;
    const char *x = in[0];
    char *y = out[0];
    (void)scratch;
    if (s->view) return;
    const int64_t orow = s->out[s->rank - 1] * (int64_t)s->es;
    XV_PAR_FOR(row, s->rows, s->threads, XV_SPLITS(s->threads, 2 * s->bytes), {
        int64_t off = 0, rest = row;
        bool inside = true;
        for (int d = s->rank - 2; d >= 0; d--) {
            int64_t j = src_index(s->mode, rest % s->out[d], s->beg[d], s->in[d]);
            rest /= s->out[d];
            if (j < 0) inside = false;
            off += j * s->istride[d];
        }
        pad_row(s, inside ? x + off * (int64_t)s->es : NULL, y + row * orow);
    });
}

/* Constant integer input i of node nd (count in *cnt); false when absent or
 * not a constant. */
static bool const_ints(const xplan *p, const ts_node *nd, int i, int64_t *out, int max, int *cnt)
{
    if (i >= nd->ninputs || nd->inputs[i] < 0) return false;
    const ts_tensor *t = xplan_const(p, nd->inputs[i]);
    if (!t || (t->dtype != TS_I64 && t->dtype != TS_I32) || ts_tensor_numel(t) > max) return false;
    *cnt = (int)ts_tensor_numel(t);
    for (int k = 0; k < *cnt; k++) out[k] = ts_tensor_get_i64(t, k);
    return true;
}

static bool has_input(const ts_node *nd, int i) { return i < nd->ninputs && nd->inputs[i] >= 0; }

/* All pads zero: the output becomes an alias of input buffer xb (its
 * layout too) and the step is empty. */
static ts_status pad_view(xplan *p, int n, xstep *st, int xb, ts_error *err)
{
    pad_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->view = true;
    if (xstep_alloc(st, 1, 1, err)) return err->code;
    int v = xplan_node(p, n)->outputs[0], yb = xplan_new_buf(p, v, p->g->values[v].dtype, &p->g->values[v].shape);
    if (yb < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    const xbuf *x = &p->bufs[xb];
    xbuf *y = &p->bufs[yb];
    y->kind = XB_ALIAS;
    y->alias_of = xb;
    y->offset = 0;
    while (p->bufs[y->alias_of].kind == XB_ALIAS) { /* an alias names its root directly */
        y->offset += p->bufs[y->alias_of].offset;
        y->alias_of = p->bufs[y->alias_of].alias_of;
    }
    y->blocked = x->blocked;
    y->md = x->md;
    y->bytes = x->bytes;
    xplan_bind_value(p, v, yb);
    st->in[0] = xb;
    st->out[0] = yb;
    return TS_OK;
}

static ts_status pad_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const ts_pad_attrs *a = nd->attrs;
    const ts_value *x = &g->values[nd->inputs[0]], *y = &g->values[nd->outputs[0]];
    const int rank = x->shape.rank;
    if (x->dtype == TS_MODP || rank == 0) return TS_ERR_UNSUPPORTED;
    int64_t pads[2 * TS_MAX_RANK], axes[TS_MAX_RANK], beg[TS_MAX_RANK] = {0};
    int npads = a->npads, naxes = -1;
    unsigned char cval[16] = {0};
    size_t es = ts_dtype_size(x->dtype);
    if (es > sizeof cval) return TS_ERR_UNSUPPORTED;
    if (g->opset >= 11) {
        if (!const_ints(p, nd, 1, pads, 2 * TS_MAX_RANK, &npads)) return TS_ERR_UNSUPPORTED;
        if (has_input(nd, 2)) {
            const ts_tensor *c = xplan_const(p, nd->inputs[2]);
            if (!c || c->dtype != x->dtype || ts_tensor_numel(c) != 1) return TS_ERR_UNSUPPORTED;
            memcpy(cval, c->data, es);
        }
        if (has_input(nd, 3) && !const_ints(p, nd, 3, axes, TS_MAX_RANK, &naxes)) return TS_ERR_UNSUPPORTED;
    } else {
        memcpy(pads, a->pads, sizeof pads);
        ts_tensor one = {.dtype = x->dtype, .data = cval, .nbytes = es};
        ts_tensor_set_f64(&one, 0, a->value);
    }
    int na = naxes >= 0 ? naxes : rank;
    if (npads != 2 * na) return TS_ERR_UNSUPPORTED; /* inference reported it; be safe */
    for (int i = 0; i < na; i++) {
        int d = i;
        if (naxes >= 0 && !ts_axis_norm(axes[i], rank, &d)) return TS_ERR_UNSUPPORTED;
        beg[d] = pads[i];
    }

    int xb = xplan_value_buf(p, nd->inputs[0]);
    if (xb < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    bool zero = x->dtype == y->dtype && !ts_graph_is_output(g, nd->outputs[0]);
    for (int i = 0; i < npads; i++) zero &= pads[i] == 0;
    if (zero) return pad_view(p, n, st, xb, err);

    /* the input's layout: plain, or dense permuted when the result can keep
     * it (a graph output is the caller's plain tensor) */
    int order[TS_MAX_RANK];
    if (!xbuf_dense_order(&p->bufs[xb], order) || ts_graph_is_output(g, nd->outputs[0]) || x->dtype != TS_F32) {
        for (int k = 0; k < rank; k++) order[k] = k;
        if ((xb = xplan_plain(p, xb, err)) < 0) return err->code ? err->code : TS_ERR_INVALID;
    }

    pad_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->mode = a->mode;
    s->es = es;
    memcpy(s->cval, cval, sizeof cval);
    s->threads = xv_threads(p);
    int r = 0;
    for (int k = 0; k < rank; k++) {
        int d = order[k];
        int64_t b = beg[d], e = y->shape.dims[d] - x->shape.dims[d] - b;
        /* constant mode: an unpadded dim joins the row of the dim outside it */
        if (a->mode == TS_PAD_CONSTANT && r > 0 && b == 0 && e == 0) {
            s->in[r - 1] *= x->shape.dims[d];
            s->out[r - 1] *= y->shape.dims[d];
            s->beg[r - 1] *= x->shape.dims[d];
            continue;
        }
        s->in[r] = x->shape.dims[d];
        s->out[r] = y->shape.dims[d];
        s->beg[r++] = b;
    }
    s->rank = r;
    int64_t is = 1;
    for (int d = r - 1; d >= 0; d--) {
        s->istride[d] = is;
        is *= s->in[d];
    }
    s->rows = 1;
    for (int d = 0; d < r - 1; d++) s->rows *= s->out[d];
    if (s->out[r - 1] == 0) s->rows = 0;
    s->bytes = ts_shape_numel(&y->shape) * (int64_t)es;
    return xv_step_unary(p, n, st, xb, order, err);
}

const xkernel xk_vec_pad = {"vec.pad", pad_build, pad_run, free};
