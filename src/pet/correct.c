/* Corrections (PET §5.2 step 3): the boxes where the mutant differs are
 * recomputed by the original operator.  The failing boxes are projected on
 * one output axis -- the one where that recomputes the least -- and each
 * run of failing positions becomes a slab: the original operator on the
 * input window that slab reads (a Slice, and the original's own zero
 * padding where the window leaves the input), with the same weights.  The
 * output is stitched with Concat from slices of the mutant's output and
 * the slabs: standard ONNX, so any engine runs it.
 *
 * A slab may recompute positions that were right (a box in another image
 * on the same columns); that costs time, never correctness.  The caller
 * checks the corrected program again (box check, every position in F_p,
 * and floats) before anything is proposed. */
#include <stdlib.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "pet/pet.h"
#include "rules/apply.h"

typedef struct range {
    int64_t lo, hi;
} range;

/* Merged runs of the failing boxes along axis a; returns how many. */
static int runs(const ts_pet_verdict *v, int a, range *r, int max)
{
    int n = 0;
    for (int i = 0; i < v->nboxes; i++) {
        if (v->ok[i]) continue;
        range x = {v->boxes[i].lo[a], v->boxes[i].hi[a]};
        int k = 0;
        while (k < n && r[k].lo < x.lo) k++;
        if (n == max) return -1;
        memmove(r + k + 1, r + k, sizeof *r * (size_t)(n - k));
        r[k] = x;
        n++;
    }
    int m = 0;
    for (int k = 0; k < n; k++) {
        if (m && r[k].lo <= r[m - 1].hi) {
            if (r[k].hi > r[m - 1].hi) r[m - 1].hi = r[k].hi;
        } else
            r[m++] = r[k];
    }
    return m;
}

/* Value of p0's value v in the corrected program q (same inputs). */
static int in_q(const ts_graph *p0, ts_graph *q, int v, ts_error *err)
{
    for (int k = 0; k < p0->ninputs; k++)
        if (p0->inputs[k] == v) return q->inputs[k];
    if (p0->values[v].constant) return ts_graph_const_value(q, ts_tensor_ref(p0->values[v].constant), err);
    ts_error_set(err, TS_ERR_INVALID, "PET correction: value '%s' is neither input nor constant", p0->values[v].name);
    return -1;
}

/* The original window operator cn of p0 computing output positions
 * [lo, hi) of axis a only. */
static int slab(const ts_graph *p0, int cn, ts_graph *q, int a, int64_t lo, int64_t hi, ts_error *err)
{
    const ts_node *n = &p0->nodes[cn];
    bool conv = n->op == &ts_op_conv;
    int ins[3];
    for (int i = 0; i < n->ninputs && i < 3; i++)
        if ((ins[i] = n->inputs[i] >= 0 ? in_q(p0, q, n->inputs[i], err) : -1) < 0 && n->inputs[i] >= 0) return -1;
    if (a == 0) {
        if ((ins[0] = ts_pet_slice(q, ins[0], 0, lo, hi, err)) < 0) return -1;
        return ts_pet_node_like(q, p0, cn, NULL, ins, n->ninputs, err);
    }
    union {
        ts_conv_attrs c;
        ts_pool_attrs p;
    } at;
    memcpy(&at, n->attrs, n->op->attr_size);
    ts_window *w = conv ? &at.c.win : &at.p.win;
    const ts_shape *x = &p0->values[n->inputs[0]].shape;
    ts_window_geom geo;
    char why[256];
    if (!ts_window_resolve(w, x->rank - 2, x->dims + 2, conv ? p0->values[n->inputs[1]].shape.dims + 2 : NULL, &geo,
                           why, sizeof why)) {
        ts_error_set(err, TS_ERR_UNSUPPORTED, "PET correction: %s", why);
        return -1;
    }
    int d = a - 2;
    int64_t span = (geo.kernel[d] - 1) * geo.dil[d] + 1;
    int64_t start = lo * geo.stride[d] - geo.pad_begin[d], end = (hi - 1) * geo.stride[d] - geo.pad_begin[d] + span;
    int64_t cs = start < 0 ? 0 : start, ce = end > geo.in[d] ? geo.in[d] : end;
    /* every pad explicit: this slab's own on axis a, the original's elsewhere */
    w->auto_pad = TS_PAD_NOTSET;
    w->npads = 2 * geo.nsp;
    for (int k = 0; k < geo.nsp; k++) {
        w->pads[k] = geo.pad_begin[k];
        w->pads[k + geo.nsp] = geo.pad_end[k];
    }
    w->pads[d] = cs - start;
    w->pads[d + geo.nsp] = end - ce;
    if ((ins[0] = ts_pet_slice(q, ins[0], a, cs, ce, err)) < 0) return -1;
    return ts_pet_node_like(q, p0, cn, &at, ins, n->ninputs, err);
}

ts_graph *ts_pet_correct(const ts_graph *p0, const ts_graph *p1, const ts_pet_verdict *v, double max_frac,
                         int *ncorr, ts_error *err)
{
    *ncorr = 0;
    int cn = -1;
    for (int i = 0; i < p0->nnodes; i++)
        if (!p0->nodes[i].dead) cn = cn < 0 ? i : -2;
    if (cn < 0 || (p0->nodes[cn].op != &ts_op_conv && p0->nodes[cn].op != &ts_op_avgpool)) {
        ts_error_set(err, TS_ERR_UNSUPPORTED, "PET correction: the original must be one Conv or AveragePool");
        return NULL;
    }
    if (p0->nodes[cn].op == &ts_op_avgpool && ((const ts_pool_attrs *)p0->nodes[cn].attrs)->win.ceil_mode) {
        ts_error_set(err, TS_ERR_UNSUPPORTED, "PET correction: ceil_mode pools are not corrected");
        return NULL;
    }
    const ts_shape *y = &p0->values[p0->outputs[0]].shape;
    range best[64], r[64];
    int nbest = 0, axis = -1;
    double frac = 2;
    for (int a = 0; a < y->rank; a++) {
        if (a == 1) continue; /* channels: a slab would slice the weights; not done */
        int n = runs(v, a, r, 64);
        if (n < 0) continue;
        int64_t len = 0;
        for (int k = 0; k < n; k++) len += r[k].hi - r[k].lo;
        double f = (double)len / (double)y->dims[a];
        if (f < frac) {
            frac = f, axis = a, nbest = n;
            memcpy(best, r, sizeof *r * (size_t)n);
        }
    }
    if (v->nfail && (axis < 0 || frac > max_frac)) return NULL;
    ts_graph *q = ts_graph_copy(p1);
    if (!q) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory correcting a mutant");
        return NULL;
    }
    if (!v->nfail) return q;
    int m = q->outputs[0], pieces[129], np = 0;
    q->noutputs = 0;
    int64_t at = 0;
    for (int k = 0; k <= nbest; k++) {
        int64_t lo = k < nbest ? best[k].lo : y->dims[axis];
        if (lo > at && (pieces[np++] = ts_pet_slice(q, m, axis, at, lo, err)) < 0) goto fail;
        if (k == nbest) break;
        if ((pieces[np++] = slab(p0, cn, q, axis, best[k].lo, best[k].hi, err)) < 0) goto fail;
        at = best[k].hi;
    }
    int out = ts_pet_concat(q, pieces, np, axis, err);
    if (out < 0 || ts_graph_add_output(q, out, err)) goto fail;
    ts_graph_compact(q);
    *ncorr = nbest;
    return q;
fail:
    ts_graph_free(q);
    return NULL;
}
