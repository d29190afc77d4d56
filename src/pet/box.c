/* Box analysis (PET §5.2, step 1): split points propagated forward
 * through a program.  A tensor's boxes are the cells of the grid its split
 * points draw; inside one box every output position has the same
 * summation interval and reads its inputs through one affine map, which is
 * what Theorem 1 needs.  Graph inputs start with no split point; each
 * operator adds the points where its own structure changes (a window
 * reaching into padding, a concatenation seam, a reshape wrapping a row)
 * and carries its inputs' points to where they land in its output.
 *
 * Points may only be too many, never too few: an extra point splits a box
 * in two, each still checked; a missing one would let Theorem 1 vouch for
 * positions it does not cover.  So every rule errs on the side of adding. */
#include <stdlib.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "pet/pet.h"

bool ts_pet_points_add(ts_pet_points *s, int d, int64_t x, int64_t len)
{
    if (x <= 0 || x >= len) return true;
    int lo = 0, hi = s->n[d];
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->p[d][mid] < x) lo = mid + 1;
        else hi = mid;
    }
    if (lo < s->n[d] && s->p[d][lo] == x) return true;
    if (s->n[d] >= TS_PET_MAX_POINTS) return false;
    if (s->n[d] == s->cap[d]) {
        int cap = s->cap[d] ? 2 * s->cap[d] : 8;
        int64_t *p = realloc(s->p[d], sizeof(int64_t) * (size_t)cap);
        if (!p) return false;
        s->p[d] = p;
        s->cap[d] = cap;
    }
    memmove(s->p[d] + lo + 1, s->p[d] + lo, sizeof(int64_t) * (size_t)(s->n[d] - lo));
    s->p[d][lo] = x;
    s->n[d]++;
    return true;
}

void ts_pet_points_free(ts_pet_points *s)
{
    for (int d = 0; d < TS_MAX_RANK; d++) free(s->p[d]);
    memset(s, 0, sizeof *s);
}

void ts_pet_points_free_all(ts_pet_points *v, int n)
{
    if (!v) return;
    for (int i = 0; i < n; i++) ts_pet_points_free(&v[i]);
    free(v);
}

/* One node's rule: reads pts of its inputs, fills pts of its outputs. */
typedef struct prop {
    const ts_graph *g;
    const ts_node *n;
    ts_pet_points *pts;
} prop;

static const ts_shape *shape_of(const prop *c, int v)
{
    return &c->g->values[v].shape;
}
static ts_pet_points *in_pts(const prop *c, int i)
{
    return &c->pts[c->n->inputs[i]];
}
static ts_pet_points *out_pts(const prop *c, int o)
{
    return &c->pts[c->n->outputs[o]];
}

/* dst dim dd gets src dim sd's points in (lo, hi), moved by shift - lo. */
static bool carry(ts_pet_points *dst, int dd, int64_t len, const ts_pet_points *src, int sd, int64_t lo, int64_t hi,
                  int64_t shift)
{
    for (int k = 0; k < src->n[sd]; k++) {
        int64_t x = src->p[sd][k];
        if (x > lo && x < hi && !ts_pet_points_add(dst, dd, x - lo + shift, len)) return false;
    }
    return true;
}

/* Inputs aligned to the output from the right (NumPy broadcasting): a
 * dimension of the input's own size carries its points, a broadcast one
 * (size 1) has none. */
static bool rule_broadcast(prop *c)
{
    for (int o = 0; o < c->n->noutputs; o++) {
        const ts_shape *y = shape_of(c, c->n->outputs[o]);
        for (int i = 0; i < c->n->ninputs; i++) {
            int v = c->n->inputs[i];
            if (v < 0) continue;
            const ts_shape *x = shape_of(c, v);
            if (x->rank > y->rank) return false;
            for (int d = 0; d < x->rank; d++) {
                int od = d + y->rank - x->rank;
                if (x->dims[d] == y->dims[od] &&
                    !carry(out_pts(c, o), od, y->dims[od], in_pts(c, i), d, 0, y->dims[od], 0))
                    return false;
            }
        }
    }
    return true;
}

/* Conv and AveragePool: output position o of a spatial dim reads input
 * o*s - pb + k*dil for each tap k.  A tap enters the input at
 * o = ceil((pb - k*dil) / s), leaves it after floor((in-1+pb-k*dil) / s),
 * and crosses an input point x at ceil((x + pb - k*dil) / s). */
static int64_t ceil_div(int64_t a, int64_t b)
{
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}
static int64_t floor_div(int64_t a, int64_t b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

static bool rule_window(prop *c, bool conv)
{
    const ts_shape *x = shape_of(c, c->n->inputs[0]), *y = shape_of(c, c->n->outputs[0]);
    const ts_window *w = conv ? &((const ts_conv_attrs *)c->n->attrs)->win : &((const ts_pool_attrs *)c->n->attrs)->win;
    const int64_t *k = conv ? shape_of(c, c->n->inputs[1])->dims + 2 : NULL;
    ts_window_geom geo;
    char why[256];
    if (!ts_window_resolve(w, x->rank - 2, x->dims + 2, k, &geo, why, sizeof why)) return false;
    ts_pet_points *out = out_pts(c, 0);
    const ts_pet_points *xin = in_pts(c, 0);
    if (!carry(out, 0, y->dims[0], xin, 0, 0, y->dims[0], 0)) return false;
    if (conv) {
        int64_t group = ((const ts_conv_attrs *)c->n->attrs)->group, F = y->dims[1];
        if (!carry(out, 1, F, in_pts(c, 1), 0, 0, F, 0)) return false;
        if (c->n->ninputs > 2 && c->n->inputs[2] >= 0 && !carry(out, 1, F, in_pts(c, 2), 0, 0, F, 0)) return false;
        /* a group reads its own input channels: a new affine map per group */
        for (int64_t gi = 1; gi < group; gi++)
            if (!ts_pet_points_add(out, 1, gi * (F / group), F)) return false;
    } else if (!carry(out, 1, y->dims[1], xin, 1, 0, y->dims[1], 0))
        return false;
    for (int d = 0; d < geo.nsp; d++) {
        int64_t len = y->dims[2 + d], s = geo.stride[d], pb = geo.pad_begin[d], in = geo.in[d];
        for (int64_t t = 0; t < geo.kernel[d]; t++) {
            int64_t off = pb - t * geo.dil[d];
            if (!ts_pet_points_add(out, 2 + d, ceil_div(off, s), len) ||
                !ts_pet_points_add(out, 2 + d, floor_div(in - 1 + off, s) + 1, len))
                return false;
            for (int q = 0; q < xin->n[2 + d]; q++)
                if (!ts_pet_points_add(out, 2 + d, ceil_div(xin->p[2 + d][q] + off, s), len)) return false;
        }
    }
    return true;
}

static bool rule_global_pool(prop *c)
{
    const ts_shape *y = shape_of(c, c->n->outputs[0]);
    return carry(out_pts(c, 0), 0, y->dims[0], in_pts(c, 0), 0, 0, y->dims[0], 0) &&
           carry(out_pts(c, 0), 1, y->dims[1], in_pts(c, 0), 1, 0, y->dims[1], 0);
}

/* MatMul: rows from A, columns from B, batch dimensions broadcast. */
static bool rule_matmul(prop *c)
{
    const ts_shape *a = shape_of(c, c->n->inputs[0]), *b = shape_of(c, c->n->inputs[1]);
    const ts_shape *y = shape_of(c, c->n->outputs[0]);
    ts_pet_points *out = out_pts(c, 0);
    if (a->rank < 2 || b->rank < 2) return false;
    int r = y->rank;
    if (!carry(out, r - 2, y->dims[r - 2], in_pts(c, 0), a->rank - 2, 0, y->dims[r - 2], 0) ||
        !carry(out, r - 1, y->dims[r - 1], in_pts(c, 1), b->rank - 1, 0, y->dims[r - 1], 0))
        return false;
    for (int i = 0; i < 2; i++) {
        const ts_shape *x = i ? b : a;
        for (int d = 0; d < x->rank - 2; d++) {
            int od = d + (r - x->rank);
            if (x->dims[d] == y->dims[od] && !carry(out, od, y->dims[od], in_pts(c, i), d, 0, y->dims[od], 0))
                return false;
        }
    }
    return true;
}

static bool rule_gemm(prop *c)
{
    const ts_gemm_attrs *p = c->n->attrs;
    const ts_shape *y = shape_of(c, c->n->outputs[0]);
    ts_pet_points *out = out_pts(c, 0);
    if (!carry(out, 0, y->dims[0], in_pts(c, 0), p->trans_a ? 1 : 0, 0, y->dims[0], 0) ||
        !carry(out, 1, y->dims[1], in_pts(c, 1), p->trans_b ? 0 : 1, 0, y->dims[1], 0))
        return false;
    if (c->n->ninputs > 2 && c->n->inputs[2] >= 0) {
        const ts_shape *cs = shape_of(c, c->n->inputs[2]);
        for (int d = 0; d < cs->rank; d++) {
            int od = d + 2 - cs->rank;
            if (cs->dims[d] == y->dims[od] && !carry(out, od, y->dims[od], in_pts(c, 2), d, 0, y->dims[od], 0))
                return false;
        }
    }
    return true;
}

static bool rule_transpose(prop *c)
{
    const ts_transpose_attrs *p = c->n->attrs;
    const ts_shape *y = shape_of(c, c->n->outputs[0]);
    for (int d = 0; d < y->rank; d++) {
        int sd = p->nperm < 0 ? y->rank - 1 - d : (int)p->perm[d];
        if (!carry(out_pts(c, 0), d, y->dims[d], in_pts(c, 0), sd, 0, y->dims[d], 0)) return false;
    }
    return true;
}

/* Concat: the seams are split points; other dimensions carry every input's. */
static bool rule_concat(prop *c)
{
    const ts_shape *y = shape_of(c, c->n->outputs[0]);
    int axis;
    if (!ts_axis_norm(((const ts_concat_attrs *)c->n->attrs)->axis, y->rank, &axis)) return false;
    int64_t off = 0;
    for (int i = 0; i < c->n->ninputs; i++) {
        const ts_shape *x = shape_of(c, c->n->inputs[i]);
        if (!ts_pet_points_add(out_pts(c, 0), axis, off, y->dims[axis])) return false;
        for (int d = 0; d < y->rank; d++)
            if (!carry(out_pts(c, 0), d, y->dims[d], in_pts(c, i), d, 0, x->dims[d], d == axis ? off : 0))
                return false;
        off += x->dims[axis];
    }
    return true;
}

/* The axis along which input and output differ (-1: none or several). */
static int changed_axis(const ts_shape *x, const ts_shape *y)
{
    int axis = -1;
    if (x->rank != y->rank) return -2;
    for (int d = 0; d < x->rank; d++)
        if (x->dims[d] != y->dims[d]) {
            if (axis >= 0) return -2;
            axis = d;
        }
    return axis;
}

static bool rule_split(prop *c)
{
    const ts_shape *x = shape_of(c, c->n->inputs[0]);
    int64_t off = 0;
    for (int o = 0; o < c->n->noutputs; o++) {
        const ts_shape *y = shape_of(c, c->n->outputs[o]);
        int axis = changed_axis(x, y);
        if (axis == -2) return false;
        for (int d = 0; d < y->rank; d++) {
            int64_t lo = d == axis ? off : 0;
            if (!carry(out_pts(c, o), d, y->dims[d], in_pts(c, 0), d, lo, lo + y->dims[d], 0)) return false;
        }
        if (axis >= 0) off += y->dims[axis];
    }
    return true;
}

/* Constant int64/int32 input i of the node (starts, ends, pads). */
static int const_ints(const prop *c, int i, int64_t *out, int max)
{
    if (i >= c->n->ninputs || c->n->inputs[i] < 0) return -1;
    const ts_tensor *t = c->g->values[c->n->inputs[i]].constant;
    if (!t || (t->dtype != TS_I64 && t->dtype != TS_I32)) return -2;
    int64_t n = ts_tensor_numel(t);
    if (n > max) return -2;
    for (int64_t k = 0; k < n; k++) out[k] = ts_tensor_get_i64(t, k);
    return (int)n;
}

/* Slice (opset >= 10, step 1): the window's points, moved to its start. */
static bool rule_slice(prop *c)
{
    const ts_shape *x = shape_of(c, c->n->inputs[0]), *y = shape_of(c, c->n->outputs[0]);
    int64_t st[TS_MAX_RANK], en[TS_MAX_RANK], ax[TS_MAX_RANK], sp[TS_MAX_RANK], lo[TS_MAX_RANK] = {0};
    int ns = const_ints(c, 1, st, TS_MAX_RANK), ne = const_ints(c, 2, en, TS_MAX_RANK);
    int na = const_ints(c, 3, ax, TS_MAX_RANK), nsp = const_ints(c, 4, sp, TS_MAX_RANK);
    if (ns < 0 || ne != ns || na == -2 || nsp == -2 || (na >= 0 && na != ns)) return false;
    for (int k = 0; k < ns; k++) {
        int a;
        if (!ts_axis_norm(na >= 0 ? ax[k] : k, x->rank, &a)) return false;
        if (nsp >= 0 && sp[k] != 1) return false;
        int64_t s = st[k] < 0 ? st[k] + x->dims[a] : st[k];
        lo[a] = s < 0 ? 0 : s > x->dims[a] ? x->dims[a] : s;
    }
    for (int d = 0; d < y->rank; d++)
        if (!carry(out_pts(c, 0), d, y->dims[d], in_pts(c, 0), d, lo[d], lo[d] + y->dims[d], 0)) return false;
    return true;
}

/* Pad (constant mode): input points move by the begin pad; the border of
 * the padding is a split point on each side. */
static bool rule_pad(prop *c)
{
    const ts_pad_attrs *p = c->n->attrs;
    const ts_shape *x = shape_of(c, c->n->inputs[0]), *y = shape_of(c, c->n->outputs[0]);
    int64_t pads[2 * TS_MAX_RANK];
    int np = p->npads;
    if (p->mode != TS_PAD_CONSTANT) return false;
    if (np >= 0) memcpy(pads, p->pads, sizeof(int64_t) * (size_t)np);
    else if ((np = const_ints(c, 1, pads, 2 * TS_MAX_RANK)) < 0)
        return false;
    if (np != 2 * x->rank || (c->n->ninputs > 3 && c->n->inputs[3] >= 0)) return false; /* axes: not handled */
    for (int d = 0; d < x->rank; d++) {
        int64_t pb = pads[d];
        if (pb < 0 || pads[d + x->rank] < 0) return false;
        if (!ts_pet_points_add(out_pts(c, 0), d, pb, y->dims[d]) ||
            !ts_pet_points_add(out_pts(c, 0), d, pb + x->dims[d], y->dims[d]) ||
            !carry(out_pts(c, 0), d, y->dims[d], in_pts(c, 0), d, 0, x->dims[d], pb))
            return false;
    }
    return true;
}

/* Reshape (and Flatten, Squeeze, Unsqueeze): dimensions of size 1 are
 * dropped, the rest fall into groups of equal products.  A group that is
 * one dimension on both sides carries its points; otherwise positions are
 * read through the group's flat index: the input's boxes, and the rows of
 * every inner input dimension (where its index wraps, the map from flat
 * index to input position stops being affine), give flat split points y,
 * and output dimension j (inner size Q, size b) splits at its digit
 * (y / Q) % b of each, and one past it when y is not on a row boundary. */
static bool rule_reshape(prop *c)
{
    const ts_shape *x = shape_of(c, c->n->inputs[0]), *y = shape_of(c, c->n->outputs[0]);
    int ia[TS_MAX_RANK], ib[TS_MAX_RANK], na = 0, nb = 0;
    for (int d = 0; d < x->rank; d++)
        if (x->dims[d] != 1) ia[na++] = d;
    for (int d = 0; d < y->rank; d++)
        if (y->dims[d] != 1) ib[nb++] = d;
    const ts_pet_points *src = in_pts(c, 0);
    ts_pet_points *dst = out_pts(c, 0);
    int i = 0, j = 0;
    while (i < na && j < nb) {
        int i0 = i, j0 = j;
        int64_t pa = x->dims[ia[i++]], pb = y->dims[ib[j++]];
        while (pa != pb) {
            if (pa < pb && i < na) pa *= x->dims[ia[i++]];
            else if (pb < pa && j < nb) pb *= y->dims[ib[j++]];
            else return false;
        }
        if (i - i0 == 1 && j - j0 == 1) {
            if (!carry(dst, ib[j0], pb, src, ia[i0], 0, pb, 0)) return false;
            continue;
        }
        int64_t total = pa, *flat = NULL;
        int nflat = 0, cap = 0;
        bool ok = true;
        for (int k = i0; k < i && ok; k++) {
            int64_t inner = 1;
            for (int q = k + 1; q < i; q++) inner *= x->dims[ia[q]];
            int64_t row = inner * x->dims[ia[k]], rows = total / row;
            int64_t per = (k > i0 ? 1 : 0) + src->n[ia[k]];
            if (rows * per + nflat > 16 * TS_PET_MAX_POINTS) {
                ok = false;
                break;
            }
            if (nflat + rows * per > cap) {
                cap = (int)(nflat + rows * per + 8);
                int64_t *f = realloc(flat, sizeof(int64_t) * (size_t)cap);
                if (!f) {
                    ok = false;
                    break;
                }
                flat = f;
            }
            for (int64_t q = 0; q < rows; q++) {
                if (k > i0) flat[nflat++] = q * row; /* the wrap of dimension k */
                for (int s = 0; s < src->n[ia[k]]; s++) flat[nflat++] = q * row + src->p[ia[k]][s] * inner;
            }
        }
        for (int f = 0; f < nflat && ok; f++) {
            int64_t yv = flat[f];
            if (yv <= 0 || yv >= total) continue;
            for (int k = j0; k < j && ok; k++) {
                int64_t inner = 1;
                for (int q = k + 1; q < j; q++) inner *= y->dims[ib[q]];
                int64_t b = y->dims[ib[k]], digit = (yv / inner) % b;
                ok = ts_pet_points_add(dst, ib[k], digit, b) &&
                     (yv % inner == 0 || ts_pet_points_add(dst, ib[k], digit + 1, b));
            }
        }
        free(flat);
        if (!ok) return false;
    }
    return true;
}

typedef bool (*rule_fn)(prop *c);

static bool rule_conv(prop *c)
{
    return rule_window(c, true);
}
static bool rule_avgpool(prop *c)
{
    return rule_window(c, false);
}

static rule_fn rule_of(const ts_node *n)
{
    const ts_op_desc *op = n->op;
    if (op == &ts_op_conv) return rule_conv;
    if (op == &ts_op_avgpool) return rule_avgpool;
    if (op == &ts_op_global_avgpool) return rule_global_pool;
    if (op == &ts_op_matmul) return rule_matmul;
    if (op == &ts_op_gemm) return rule_gemm;
    if (op == &ts_op_transpose) return rule_transpose;
    if (op == &ts_op_concat) return rule_concat;
    if (op == &ts_op_split) return rule_split;
    if (op == &ts_op_slice) return rule_slice;
    if (op == &ts_op_pad) return rule_pad;
    if (op == &ts_op_reshape || op == &ts_op_flatten || op == &ts_op_squeeze || op == &ts_op_unsqueeze)
        return rule_reshape;
    if (op == &ts_op_expand || (op->flags & TS_OP_ELEMENTWISE)) return rule_broadcast;
    return NULL;
}

ts_status ts_pet_propagate(const ts_graph *g, ts_pet_points **out, ts_error *err)
{
    ts_pet_points *pts = calloc((size_t)g->nvalues + 1, sizeof *pts);
    int *order = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    int count = 0;
    *out = NULL;
    if (!pts || !order) {
        free(order);
        free(pts);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory in box analysis");
    }
    for (int v = 0; v < g->nvalues; v++) pts[v].rank = g->values[v].shape.rank;
    if (ts_graph_topo_order(g, order, &count, err)) goto fail;
    for (int k = 0; k < count; k++) {
        prop c = {.g = g, .n = &g->nodes[order[k]], .pts = pts};
        rule_fn f = rule_of(c.n);
        if (!f) {
            ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s' (%s): box analysis has no rule for this operator",
                         c.n->name, c.n->op->name);
            goto fail;
        }
        if (!f(&c)) {
            ts_error_set(err, TS_ERR_UNSUPPORTED,
                         "node '%s' (%s): box analysis gave up (attributes it does not model, or over %d split points)",
                         c.n->name, c.n->op->name, TS_PET_MAX_POINTS);
            goto fail;
        }
    }
    free(order);
    *out = pts;
    return TS_OK;
fail:
    free(order);
    ts_pet_points_free_all(pts, g->nvalues);
    return err->code;
}

bool ts_pet_grid(const ts_shape *s, const ts_pet_points *a, const ts_pet_points *b, int max, ts_pet_box **boxes,
                 int *n)
{
    ts_pet_points m = {.rank = s->rank};
    bool ok = true;
    int64_t total = 1;
    for (int d = 0; d < s->rank && ok; d++) {
        for (int k = 0; a && k < a->n[d] && ok; k++) ok = ts_pet_points_add(&m, d, a->p[d][k], s->dims[d]);
        for (int k = 0; b && k < b->n[d] && ok; k++) ok = ts_pet_points_add(&m, d, b->p[d][k], s->dims[d]);
        total *= m.n[d] + 1;
        if (total > max) ok = false;
    }
    *boxes = NULL;
    *n = 0;
    if (ok) *boxes = malloc(sizeof **boxes * (size_t)total);
    if (ok && !*boxes) ok = false;
    for (int64_t i = 0; ok && i < total; i++) {
        ts_pet_box *bx = &(*boxes)[i];
        memset(bx, 0, sizeof *bx);
        int64_t r = i;
        for (int d = s->rank - 1; d >= 0; d--) {
            int cell = (int)(r % (m.n[d] + 1));
            r /= m.n[d] + 1;
            bx->lo[d] = cell ? m.p[d][cell - 1] : 0;
            bx->hi[d] = cell < m.n[d] ? m.p[d][cell] : s->dims[d];
        }
    }
    if (ok) *n = (int)total;
    ts_pet_points_free(&m);
    return ok;
}
