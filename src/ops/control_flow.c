/* If, Loop (opset 1+) and Scan (opset 8+; 8 is batched): descriptors and iteration
 * semantics (control_flow.h, docs/control-flow.md).
 *
 * Shapes are static in tsopt, so inference asks the bodies: an If's
 * output is static when both branches agree (or the condition is a
 * constant), a Loop's carried values must keep their shape from one
 * iteration to the next, and a scan output's length is the trip count
 * when it is a constant the body cannot cut short; otherwise the shape the
 * model declares for the output is taken, and the run checks it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir/ir.h"
#include "ops/control_flow.h"
#include "ops/list.h"

bool ts_op_is_control_flow(const ts_op_desc *op) { return op == &ts_op_if || op == &ts_op_loop || op == &ts_op_scan; }

int ts_cf_bodies(const ts_node *n, ts_body **out)
{
    if (!ts_op_is_control_flow(n->op) || !n->attrs) return 0;
    const ts_cf_attrs *p = n->attrs;
    int k = 0;
    for (int i = 0; i < p->nbodies; i++)
        if (p->body[i]) out[k++] = p->body[i];
    return k;
}

int ts_cf_explicit_inputs(const ts_node *n)
{
    ts_body *b[TS_CF_MAX_BODIES];
    int nb = ts_cf_bodies(n, b), e = n->ninputs;
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < b[i]->ncap; j++)
            if (b[i]->cap_slot[j] < e) e = b[i]->cap_slot[j];
    return e;
}

const char *ts_cf_body_attr_name(const ts_op_desc *op, int k)
{
    if (op == &ts_op_if) return k ? "else_branch" : "then_branch";
    return "body";
}

/* ------------------------------------------------------------ attributes */

static void cf_retain(void *attrs)
{
    ts_cf_attrs *p = attrs;
    for (int k = 0; k < TS_CF_MAX_BODIES; k++) ts_body_ref(p->body[k]);
}

static void cf_release(void *attrs)
{
    ts_cf_attrs *p = attrs;
    for (int k = 0; k < TS_CF_MAX_BODIES; k++) {
        ts_body_unref(p->body[k]);
        p->body[k] = NULL;
    }
}

static ts_status parse_bodies(ts_cf_attrs *p, const ts_op_desc *op, int nb, const ts_attr *a, int na, ts_error *err)
{
    for (int k = 0; k < nb; k++) {
        const char *name = ts_cf_body_attr_name(op, k);
        const ts_attr *x = ts_attr_find(a, na, name);
        if (!x) return ts_error_set(err, TS_ERR_INVALID, "attribute '%s' is missing", name);
        if (x->kind != TS_ATTR_GRAPH || !x->body) return ts_attr_fail(err, x, "expected a graph");
        p->body[k] = ts_body_ref((ts_body *)x->body);
    }
    p->nbodies = nb;
    return TS_OK;
}

static ts_status if_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    return parse_bodies(attrs, &ts_op_if, 2, a, na, err);
}

static ts_status loop_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    (void)opset;
    return parse_bodies(attrs, &ts_op_loop, 1, a, na, err);
}

static ts_status scan_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    ts_cf_attrs *p = attrs;
    p->batched = opset < 9;
    if (parse_bodies(p, &ts_op_scan, 1, a, na, err)) return err->code;
    int64_t m;
    if (ts_attr_get_int(a, na, "num_scan_inputs", -1, &m, err)) return err->code;
    if (m < 1 || m > TS_CF_MAX_SCAN)
        return ts_error_set(err, TS_ERR_INVALID, "attribute 'num_scan_inputs' is %lld (1 to %d supported)",
                            (long long)m, TS_CF_MAX_SCAN);
    p->num_scan_inputs = (int32_t)m;
    int n;
    p->nin_axes = p->nout_axes = p->nout_dirs = -1;
    if (p->batched) { /* opset 8: the scan inputs' directions only */
        if (ts_attr_get_ints(a, na, "directions", p->in_dirs, TS_CF_MAX_SCAN, &n, err)) return err->code;
        p->nin_dirs = n;
        return TS_OK;
    }
    if (ts_attr_get_ints(a, na, "scan_input_axes", p->in_axes, TS_CF_MAX_SCAN, &n, err)) return err->code;
    p->nin_axes = n;
    if (ts_attr_get_ints(a, na, "scan_input_directions", p->in_dirs, TS_CF_MAX_SCAN, &n, err)) return err->code;
    p->nin_dirs = n;
    if (ts_attr_get_ints(a, na, "scan_output_axes", p->out_axes, TS_CF_MAX_SCAN, &n, err)) return err->code;
    p->nout_axes = n;
    if (ts_attr_get_ints(a, na, "scan_output_directions", p->out_dirs, TS_CF_MAX_SCAN, &n, err)) return err->code;
    p->nout_dirs = n;
    return TS_OK;
}

static int emit_bodies(const ts_cf_attrs *p, const ts_op_desc *op, ts_attr *out, int max)
{
    int k = 0;
    for (int i = 0; i < p->nbodies && k < max; i++)
        out[k++] = (ts_attr){.name = ts_cf_body_attr_name(op, i), .kind = TS_ATTR_GRAPH, .body = p->body[i]};
    return k;
}

static int if_emit(const void *attrs, ts_attr *out, int max) { return emit_bodies(attrs, &ts_op_if, out, max); }
static int loop_emit(const void *attrs, ts_attr *out, int max) { return emit_bodies(attrs, &ts_op_loop, out, max); }

static int scan_emit(const void *attrs, ts_attr *out, int max)
{
    const ts_cf_attrs *p = attrs;
    int k = emit_bodies(p, &ts_op_scan, out, max);
    if (k < max) out[k++] = ts_attr_int("num_scan_inputs", p->num_scan_inputs);
    if (p->batched) {
        if (p->nin_dirs >= 0 && k < max) out[k++] = ts_attr_ints("directions", p->in_dirs, p->nin_dirs);
        return k;
    }
    if (p->nin_axes >= 0 && k < max) out[k++] = ts_attr_ints("scan_input_axes", p->in_axes, p->nin_axes);
    if (p->nin_dirs >= 0 && k < max) out[k++] = ts_attr_ints("scan_input_directions", p->in_dirs, p->nin_dirs);
    if (p->nout_axes >= 0 && k < max) out[k++] = ts_attr_ints("scan_output_axes", p->out_axes, p->nout_axes);
    if (p->nout_dirs >= 0 && k < max) out[k++] = ts_attr_ints("scan_output_directions", p->out_dirs, p->nout_dirs);
    return k;
}

/* ------------------------------------------------------------- inference */

static const ts_value *body_in(const ts_body *b, int i) { return &b->g->values[b->g->inputs[i]]; }
static const ts_value *body_out(const ts_body *b, int i) { return &b->g->values[b->g->outputs[i]]; }

/* A body's output types for the node's inputs as they are.  Where they
 * have the shapes the body was built for (always, but in export's check
 * at other sizes of a symbolic dimension), the body's own; else the body
 * is re-inferred on a copy (ts_body_reinfer) and `other` is set. */
typedef struct btypes {
    ts_dtype *dt;
    ts_shape *sh;
    bool other;
} btypes;

static void btypes_free(btypes *t)
{
    free(t->dt);
    free(t->sh);
}

/* fdt/fsh: the types of the body's formal inputs. */
static ts_status body_types(ts_infer_ctx *c, const ts_body *b, const char *which, const ts_dtype *fdt,
                            const ts_shape *fsh, btypes *t)
{
    int ni = b->g->ninputs, no = b->g->noutputs;
    ts_shape *in = malloc(sizeof *in * (size_t)(ni + 1));
    t->dt = malloc(sizeof *t->dt * (size_t)(no + 1));
    t->sh = malloc(sizeof *t->sh * (size_t)(no + 1));
    t->other = false;
    if (!in || !t->dt || !t->sh) {
        free(in);
        return ts_error_set(c->err, TS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < ni; i++) {
        const ts_value *bv = body_in(b, i);
        ts_dtype dt;
        if (i < b->nformal) {
            dt = fdt[i];
            in[i] = fsh[i];
        } else {
            int slot = ts_body_input_slot(b, i);
            if (slot < 0 || slot >= c->nin || !c->in[slot]) {
                free(in);
                return ts_infer_fail(c, "%s reads '%s', which is not among the node's inputs", which, bv->name);
            }
            dt = c->in[slot]->dtype;
            in[i] = c->in[slot]->shape;
        }
        if (dt != bv->dtype) {
            free(in);
            return ts_infer_fail(c, "%s was built for '%s' as %s; it is %s here", which, bv->name,
                                 ts_dtype_name(bv->dtype), ts_dtype_name(dt));
        }
        t->other |= !ts_shape_eq(&in[i], &bv->shape);
    }
    ts_status st = TS_OK;
    if (!t->other)
        for (int o = 0; o < no; o++) {
            t->dt[o] = body_out(b, o)->dtype;
            t->sh[o] = body_out(b, o)->shape;
        }
    else if ((st = ts_body_reinfer(b, in, t->dt, t->sh, c->err)))
        ts_error_prefix(c->err, "node '%s' (%s): %s at other sizes", c->node->name, c->node->op->name, which);
    free(in);
    return st;
}

static bool declared(const ts_body *b, int o) { return o < b->ndecl && b->decl_shape[o].rank >= 0; }

static ts_status if_infer(ts_infer_ctx *c)
{
    const ts_cf_attrs *p = c->attrs;
    const ts_body *tb = p->body[0], *eb = p->body[1];
    if (c->in[0]->dtype != TS_BOOL || ts_shape_numel(&c->in[0]->shape) != 1)
        return ts_infer_fail(c, "condition must be one bool, got %s with %lld elements", ts_dtype_name(c->in[0]->dtype),
                             (long long)ts_shape_numel(&c->in[0]->shape));
    if (tb->nformal || eb->nformal) return ts_infer_fail(c, "If branches take no inputs");
    if (tb->g->noutputs != c->nout || eb->g->noutputs != c->nout)
        return ts_infer_fail(c, "has %d outputs, its branches give %d and %d", c->nout, tb->g->noutputs,
                             eb->g->noutputs);
    btypes t = {0}, e = {0};
    ts_status st = body_types(c, tb, "then_branch", NULL, NULL, &t);
    if (!st) st = body_types(c, eb, "else_branch", NULL, NULL, &e);
    const ts_tensor *cond = c->in[0]->constant;
    for (int o = 0; !st && o < c->nout; o++) {
        char x[160], y[160];
        if (t.dt[o] != e.dt[o]) {
            st = ts_infer_fail(c, "output %d is %s in then_branch and %s in else_branch", o, ts_dtype_name(t.dt[o]),
                               ts_dtype_name(e.dt[o]));
            break;
        }
        c->out_dtype[o] = t.dt[o];
        if (cond)
            c->out_shape[o] = ts_tensor_get_i64(cond, 0) ? t.sh[o] : e.sh[o];
        else if (ts_shape_eq(&t.sh[o], &e.sh[o]))
            c->out_shape[o] = t.sh[o];
        else if (declared(tb, o) && !t.other && !e.other)
            c->out_shape[o] = tb->decl_shape[o]; /* the branch taken is checked against it when run */
        else
            st = ts_infer_fail(c,
                               "output %d is %s in then_branch and %s in else_branch, and the model declares no "
                               "static shape for it",
                               o, ts_shape_str(&t.sh[o], x, sizeof x), ts_shape_str(&e.sh[o], y, sizeof y));
    }
    btypes_free(&t);
    btypes_free(&e);
    return st;
}

/* Whether the body's condition output is its condition input passed
 * through (Identity chains) or a constant true: the loop then never stops
 * before its trip count. */
static bool cond_passes(const ts_body *b)
{
    const ts_graph *g = b->g;
    int v = g->outputs[0];
    while (g->values[v].producer >= 0 && g->nodes[g->values[v].producer].op == &ts_op_identity)
        v = g->nodes[g->values[v].producer].inputs[0];
    if (g->values[v].constant) return ts_tensor_get_i64(g->values[v].constant, 0) != 0;
    return g->ninputs > 1 && v == g->inputs[1];
}

/* Carried values: formal input fin+i of the body (types fdt/fsh) comes back
 * as its output fout+i (types t) and is the node's output i. */
static ts_status infer_carried(ts_infer_ctx *c, int n, int fin, const ts_dtype *fdt, const ts_shape *fsh,
                               const btypes *t, int fout)
{
    for (int i = 0; i < n; i++) {
        char x[160], y[160];
        const ts_shape *si = &fsh[fin + i], *so = &t->sh[fout + i];
        ts_dtype di = fdt[fin + i], dout = t->dt[fout + i];
        if (di != dout || !ts_shape_eq(si, so))
            return ts_infer_fail(c, "loop-carried value %d enters the body as %s %s and leaves it as %s %s (tsopt "
                                    "needs shapes that stay the same)",
                                 i, ts_dtype_name(di), ts_shape_str(si, x, sizeof x), ts_dtype_name(dout),
                                 ts_shape_str(so, y, sizeof y));
        c->out_dtype[i] = di;
        c->out_shape[i] = *si;
    }
    return TS_OK;
}

/* Formal input types of a Loop or Scan body from the node's inputs
 * in[first..first+n-1]; NULL entries are an error naming `what`. */
static ts_status formal_from(ts_infer_ctx *c, int first, int n, ts_dtype *fdt, ts_shape *fsh, const char *what)
{
    for (int i = 0; i < n; i++) {
        const ts_value *v = first + i < c->nin ? c->in[first + i] : NULL;
        if (!v) return ts_infer_fail(c, "%s %d is absent", what, i);
        fdt[i] = v->dtype;
        fsh[i] = v->shape;
    }
    return TS_OK;
}

static ts_status loop_infer(ts_infer_ctx *c)
{
    const ts_cf_attrs *p = c->attrs;
    const ts_body *b = p->body[0];
    int nexp = ts_cf_explicit_inputs(c->node), n = nexp - 2, k = c->nout - n;
    if (c->nin < 2) return ts_infer_fail(c, "needs its trip count and condition slots (either may be empty)");
    if (n < 0 || k < 0 || b->nformal != 2 + n || b->g->noutputs != 1 + n + k)
        return ts_infer_fail(c, "%d inputs and %d outputs do not fit a body of %d inputs and %d outputs", nexp, c->nout,
                             b->nformal, b->g->noutputs);
    const ts_value *m = c->in[0], *cond = c->in[1];
    if (m && (m->dtype != TS_I64 || ts_shape_numel(&m->shape) != 1))
        return ts_infer_fail(c, "trip count M must be one int64");
    if (cond && (cond->dtype != TS_BOOL || ts_shape_numel(&cond->shape) != 1))
        return ts_infer_fail(c, "condition must be one bool");
    const ts_value *bi0 = body_in(b, 0), *bi1 = body_in(b, 1), *bo0 = body_out(b, 0);
    if (bi0->dtype != TS_I64 || bi0->shape.rank > 1 || bi1->dtype != TS_BOOL || bi1->shape.rank > 1 ||
        bo0->dtype != TS_BOOL || ts_shape_numel(&bo0->shape) != 1)
        return ts_infer_fail(c, "the body's iteration number, condition input and condition output must be an "
                                "int64 and two bools");
    ts_dtype *fdt = malloc(sizeof *fdt * (size_t)(nexp + 1));
    ts_shape *fsh = malloc(sizeof *fsh * (size_t)(nexp + 1));
    btypes t = {0};
    ts_status st = fdt && fsh ? TS_OK : ts_error_set(c->err, TS_ERR_NOMEM, "out of memory");
    if (!st) {
        fdt[0] = bi0->dtype;
        fsh[0] = bi0->shape;
        fdt[1] = bi1->dtype;
        fsh[1] = bi1->shape;
        st = formal_from(c, 2, n, fdt + 2, fsh + 2, "loop-carried input");
    }
    if (!st) st = body_types(c, b, "the body", fdt, fsh, &t);
    if (!st) st = infer_carried(c, n, 2, fdt, fsh, &t, 1);
    /* the static trip count, -1 when it depends on the data */
    int64_t trips = -1;
    bool cond_true = !cond || (cond->constant && ts_tensor_get_i64(cond->constant, 0));
    if (!st && !m && cond_true && cond_passes(b))
        st = ts_infer_fail(c, "never ends: it has no trip count and its condition stays true");
    if (cond && cond->constant && !ts_tensor_get_i64(cond->constant, 0))
        trips = 0;
    else if (m && m->constant && cond_true && cond_passes(b)) {
        trips = ts_tensor_get_i64(m->constant, 0);
        if (trips < 0) trips = 0;
    }
    for (int j = 0; !st && j < k; j++) {
        const ts_shape *s = &t.sh[1 + n + j];
        int o = n + j;
        if (s->rank + 1 > TS_MAX_RANK) {
            st = ts_infer_fail(c, "scan output %d has too high a rank", j);
            break;
        }
        ts_shape sh = {.rank = s->rank + 1};
        memcpy(sh.dims + 1, s->dims, sizeof(int64_t) * (size_t)s->rank);
        sh.dims[0] = trips;
        if (trips < 0) {
            /* the declaration is at the sizes the body was built for */
            const ts_shape *d = declared(b, o) && !t.other ? &b->decl_shape[o] : NULL;
            bool fits = d && d->rank == sh.rank;
            for (int i = 1; fits && i < sh.rank; i++) fits = d->dims[i] == sh.dims[i];
            if (!fits) {
                st = ts_infer_fail(c,
                                   "scan output %d has a length that depends on the data (%s), and the model "
                                   "declares no static shape for it",
                                   j,
                                   !m ? "no trip count" : !m->constant ? "the trip count is computed"
                                                                       : "the body's condition can end the loop");
                break;
            }
            sh.dims[0] = d->dims[0]; /* the run checks the count */
        }
        c->out_dtype[o] = t.dt[1 + n + j];
        c->out_shape[o] = sh;
    }
    btypes_free(&t);
    free(fdt);
    free(fsh);
    return st;
}

static int scan_axis(const int64_t *axes, int n, int j, int rank)
{
    int a = 0;
    if (j < n && !ts_axis_norm(axes[j], rank, &a)) return -1;
    return a;
}

/* Scan of opset 8: in[0] is sequence_lens (may be absent), then the
 * states [B, ...] and the scan inputs [B, T, ...]; the body sees one batch
 * row of each state and one [B, T] element of each scan input, and the
 * outputs are the states [B, ...] and the scan outputs [B, T, ...]. */
static ts_status scan8_infer(ts_infer_ctx *c)
{
    const ts_cf_attrs *p = c->attrs;
    const ts_body *b = p->body[0];
    int m = p->num_scan_inputs, nexp = ts_cf_explicit_inputs(c->node), n = nexp - 1 - m, k = c->nout - n;
    if (n < 0 || k < 0 || b->nformal != n + m || b->g->noutputs != n + k)
        return ts_infer_fail(c, "%d inputs (%d scanned) and %d outputs do not fit a body of %d inputs and %d outputs",
                             nexp, m, c->nout, b->nformal, b->g->noutputs);
    if (p->nin_dirs > m) return ts_infer_fail(c, "more directions than scan inputs");
    ts_dtype *fdt = malloc(sizeof *fdt * (size_t)(nexp + 1));
    ts_shape *fsh = malloc(sizeof *fsh * (size_t)(nexp + 1));
    btypes t = {0};
    ts_status st = fdt && fsh ? TS_OK : ts_error_set(c->err, TS_ERR_NOMEM, "out of memory");
    if (!st) st = formal_from(c, 1, n + m, fdt, fsh, "input");
    int64_t batch = -1, len = -1;
    for (int i = 0; !st && i < n + m; i++) {
        ts_shape *x = &fsh[i];
        int strip = i < n ? 1 : 2; /* the batch axis; and the scan axis of a scan input */
        if (x->rank < strip) {
            st = ts_infer_fail(c, "input %d has rank %d, less than its batch%s axes", 1 + i, x->rank,
                               strip > 1 ? " and sequence" : "");
            break;
        }
        if (batch >= 0 && x->dims[0] != batch) {
            st = ts_infer_fail(c, "inputs have batch sizes %lld and %lld", (long long)batch, (long long)x->dims[0]);
            break;
        }
        batch = x->dims[0];
        if (strip > 1) {
            if (len >= 0 && x->dims[1] != len) {
                st = ts_infer_fail(c, "scan inputs have lengths %lld and %lld", (long long)len, (long long)x->dims[1]);
                break;
            }
            len = x->dims[1];
        }
        for (int d = 0; d + strip < x->rank; d++) x->dims[d] = x->dims[d + strip];
        x->rank -= strip;
    }
    const ts_value *sl = c->in[0];
    if (!st && sl && (sl->dtype != TS_I32 || sl->shape.rank != 1 || sl->shape.dims[0] != batch))
        st = ts_infer_fail(c, "sequence_lens must be int32 of shape [%lld]", (long long)batch);
    if (!st) st = body_types(c, b, "the body", fdt, fsh, &t);
    if (!st) st = infer_carried(c, n, 0, fdt, fsh, &t, 0);
    for (int o = 0; !st && o < n + k; o++) {
        const ts_shape *s = o < n ? &fsh[o] : &t.sh[o];
        int add = o < n ? 1 : 2;
        if (s->rank + add > TS_MAX_RANK) {
            st = ts_infer_fail(c, "output %d has too high a rank", o);
            break;
        }
        ts_shape sh = {.rank = s->rank + add};
        sh.dims[0] = batch;
        sh.dims[1] = len; /* overwritten below for a state */
        memcpy(sh.dims + add, s->dims, sizeof(int64_t) * (size_t)s->rank);
        c->out_dtype[o] = t.dt[o];
        c->out_shape[o] = sh;
    }
    btypes_free(&t);
    free(fdt);
    free(fsh);
    return st;
}

static ts_status scan_infer(ts_infer_ctx *c)
{
    const ts_cf_attrs *p = c->attrs;
    const ts_body *b = p->body[0];
    if (p->batched) return scan8_infer(c);
    int m = p->num_scan_inputs, nexp = ts_cf_explicit_inputs(c->node), n = nexp - m, k = c->nout - n;
    if (n < 0 || k < 0 || b->nformal != n + m || b->g->noutputs != n + k)
        return ts_infer_fail(c, "%d inputs (%d scanned) and %d outputs do not fit a body of %d inputs and %d outputs",
                             nexp, m, c->nout, b->nformal, b->g->noutputs);
    if (p->nin_axes > m || p->nin_dirs > m || p->nout_axes > k || p->nout_dirs > k)
        return ts_infer_fail(c, "more scan axes or directions than scan inputs or outputs");
    ts_dtype *fdt = malloc(sizeof *fdt * (size_t)(nexp + 1));
    ts_shape *fsh = malloc(sizeof *fsh * (size_t)(nexp + 1));
    btypes t = {0};
    ts_status st = fdt && fsh ? TS_OK : ts_error_set(c->err, TS_ERR_NOMEM, "out of memory");
    if (!st) st = formal_from(c, 0, nexp, fdt, fsh, "input");
    int64_t len = -1;
    for (int j = 0; !st && j < m; j++) {
        ts_shape *x = &fsh[n + j];
        int a = scan_axis(p->in_axes, p->nin_axes, j, x->rank);
        if (a < 0 || x->rank < 1) {
            st = ts_infer_fail(c, "scan input %d has no axis to scan", j);
            break;
        }
        if (len >= 0 && x->dims[a] != len) {
            st = ts_infer_fail(c, "scan inputs have lengths %lld and %lld", (long long)len, (long long)x->dims[a]);
            break;
        }
        len = x->dims[a];
        for (int d = a; d + 1 < x->rank; d++) x->dims[d] = x->dims[d + 1]; /* the body gets one slice */
        x->rank--;
    }
    if (!st) st = body_types(c, b, "the body", fdt, fsh, &t);
    if (!st) st = infer_carried(c, n, 0, fdt, fsh, &t, 0);
    for (int j = 0; !st && j < k; j++) {
        const ts_shape *s = &t.sh[n + j];
        int a = s->rank + 1 > TS_MAX_RANK ? -1 : scan_axis(p->out_axes, p->nout_axes, j, s->rank + 1);
        if (a < 0) {
            st = ts_infer_fail(c, "scan output %d: axis out of range or rank too high", j);
            break;
        }
        ts_shape sh = {.rank = s->rank + 1};
        for (int d = 0, e = 0; d < sh.rank; d++) sh.dims[d] = d == a ? len : s->dims[e++];
        c->out_dtype[n + j] = t.dt[n + j];
        c->out_shape[n + j] = sh;
    }
    btypes_free(&t);
    free(fdt);
    free(fsh);
    return st;
}

/* ------------------------------------------------------------- execution */

static ts_tensor *new_for(const ts_cf_runner *r, const ts_value *v, ts_error *err)
{
    return ts_tensor_new(r->storage(r->ctx, v->dtype), &v->shape, err);
}

/* Body b's captured inputs, from the node's inputs. */
static ts_status fill_captures(const ts_node *n, const ts_body *b, const ts_tensor *const *in, ts_tensor **bin,
                               ts_error *err)
{
    for (int i = b->nformal; i < b->g->ninputs; i++) {
        int slot = ts_body_input_slot(b, i);
        if (slot < 0 || slot >= n->ninputs || !in[slot])
            return ts_error_set(err, TS_ERR_INVALID, "node '%s' (%s): captured '%s' is not among its inputs", n->name,
                                n->op->name, body_in(b, i)->name);
        bin[i] = (ts_tensor *)in[slot]; /* read only */
    }
    return TS_OK;
}

static ts_status check_out(const ts_node *n, const char *which, const ts_value *bv, const ts_cf_runner *r,
                           const ts_tensor *t, int o, ts_error *err)
{
    if (t->dtype == r->storage(r->ctx, bv->dtype) && ts_shape_eq(&t->shape, &bv->shape)) return TS_OK;
    char x[160], y[160];
    return ts_error_set(err, TS_ERR_INVALID, "node '%s' (%s): %s gives output %d as %s, the shape bound at load is %s",
                        n->name, n->op->name, which, o, ts_shape_str(&bv->shape, x, sizeof x),
                        ts_shape_str(&t->shape, y, sizeof y));
}

static ts_status run_if(const ts_node *n, const ts_cf_attrs *p, const ts_cf_runner *r, const ts_tensor *const *in,
                        ts_tensor *const *out, ts_error *err)
{
    int which = ts_tensor_get_i64(in[0], 0) ? 0 : 1;
    const ts_body *b = p->body[which];
    const char *name = which ? "else_branch" : "then_branch";
    for (int o = 0; o < n->noutputs; o++)
        if (check_out(n, name, body_out(b, o), r, out[o], o, err)) return err->code;
    ts_tensor **bin = calloc((size_t)b->g->ninputs + 1, sizeof *bin);
    if (!bin) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    ts_status st = fill_captures(n, b, in, bin, err);
    if (!st) st = r->run(r->ctx, which, bin, out, err);
    free(bin);
    return st;
}

/* Copies slice t of x along axis a into s (extract) or s into slice t of x. */
static void slice_copy(ts_tensor *x, int a, int64_t t, ts_tensor *s, bool extract)
{
    int64_t outer = 1, inner = (int64_t)ts_dtype_size(x->dtype), len = x->shape.dims[a];
    for (int d = 0; d < a; d++) outer *= x->shape.dims[d];
    for (int d = a + 1; d < x->shape.rank; d++) inner *= x->shape.dims[d];
    char *xd = x->data, *sd = s->data;
    for (int64_t o = 0; o < outer; o++) {
        char *xp = xd + (o * len + t) * inner, *sp = sd + o * inner;
        if (extract)
            memcpy(sp, xp, (size_t)inner);
        else
            memcpy(xp, sp, (size_t)inner);
    }
}

/* Working tensors of one Loop or Scan run. */
typedef struct iter_state {
    int ncur;
    ts_tensor **cur, **nxt; /* carried values: this iteration's and the next's */
    ts_tensor **tmp;        /* Loop: iteration number, condition in, condition out; Scan: slices, outputs */
    int ntmp;
    ts_tensor **bin, **bout; /* argument vectors of the body */
} iter_state;

static void iter_free(iter_state *s)
{
    for (int i = 0; i < s->ncur; i++) {
        if (s->cur) ts_tensor_unref(s->cur[i]);
        if (s->nxt) ts_tensor_unref(s->nxt[i]);
    }
    for (int i = 0; s->tmp && i < s->ntmp; i++) ts_tensor_unref(s->tmp[i]);
    free(s->cur);
    free(s->nxt);
    free(s->tmp);
    free(s->bin);
    free(s->bout);
}

/* Allocates carried values (body inputs cin..cin+n-1) initialised from
 * in[0..n-1], and the argument vectors. */
static ts_status iter_init(iter_state *s, const ts_body *b, const ts_cf_runner *r, int n, int cin,
                           const ts_tensor *const *init, int ntmp, ts_error *err)
{
    memset(s, 0, sizeof *s);
    s->ncur = n;
    s->ntmp = ntmp;
    s->cur = calloc((size_t)n + 1, sizeof *s->cur);
    s->nxt = calloc((size_t)n + 1, sizeof *s->nxt);
    s->tmp = calloc((size_t)ntmp + 1, sizeof *s->tmp);
    s->bin = calloc((size_t)b->g->ninputs + 1, sizeof *s->bin);
    s->bout = calloc((size_t)b->g->noutputs + 1, sizeof *s->bout);
    if (!s->cur || !s->nxt || !s->tmp || !s->bin || !s->bout) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const ts_value *v = body_in(b, cin + i);
        if (!(s->cur[i] = new_for(r, v, err)) || !(s->nxt[i] = new_for(r, v, err))) return err->code;
        if (init[i]->nbytes != s->cur[i]->nbytes || init[i]->dtype != s->cur[i]->dtype)
            return ts_error_set(err, TS_ERR_INVALID, "loop-carried input %d is not what the body was built for", i);
        if (s->cur[i]->nbytes) memcpy(s->cur[i]->data, init[i]->data, s->cur[i]->nbytes);
    }
    return TS_OK;
}

static void iter_swap(iter_state *s)
{
    ts_tensor **t = s->cur;
    s->cur = s->nxt;
    s->nxt = t;
}

static void copy_out(iter_state *s, ts_tensor *const *out)
{
    for (int i = 0; i < s->ncur; i++)
        if (out[i]->nbytes) memcpy(out[i]->data, s->cur[i]->data, out[i]->nbytes);
}

static ts_status run_loop(const ts_node *n, const ts_cf_attrs *p, const ts_cf_runner *r, const ts_tensor *const *in,
                          ts_tensor *const *out, ts_error *err)
{
    const ts_body *b = p->body[0];
    int nc = ts_cf_explicit_inputs(n) - 2, k = n->noutputs - nc;
    int64_t bound = k ? out[nc]->shape.dims[0] : -1;
    iter_state s;
    ts_tensor *slices = calloc((size_t)k + 1, sizeof *slices);
    ts_status st = slices ? iter_init(&s, b, r, nc, 2, in + 2, 3, err) : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!st && !(s.tmp[0] = new_for(r, body_in(b, 0), err))) st = err->code;
    if (!st && !(s.tmp[1] = new_for(r, body_in(b, 1), err))) st = err->code;
    if (!st && !(s.tmp[2] = new_for(r, body_out(b, 0), err))) st = err->code;
    if (!st) st = fill_captures(n, b, in, s.bin, err);
    for (int j = 0; !st && j < k; j++) {
        const ts_value *sv = body_out(b, 1 + nc + j);
        slices[j] = (ts_tensor){.dtype = out[nc + j]->dtype, .shape = sv->shape, .refcount = 1};
        slices[j].nbytes = (size_t)ts_shape_numel(&sv->shape) * ts_dtype_size(slices[j].dtype);
        if (slices[j].dtype != r->storage(r->ctx, sv->dtype))
            st = ts_error_set(err, TS_ERR_INVALID, "node '%s' (Loop): scan output %d has the wrong type", n->name, j);
    }
    bool has_m = in[0] != NULL, cond = in[1] ? ts_tensor_get_i64(in[1], 0) != 0 : true;
    int64_t m = has_m ? ts_tensor_get_i64(in[0], 0) : 0, t = 0;
    for (; !st && (!has_m || t < m) && cond; t++) {
        if (k && t >= bound) {
            st = ts_error_set(err, TS_ERR_INVALID,
                              "node '%s' (Loop): runs more than %lld iterations, the length of its scan outputs bound "
                              "at load (from the model's declared shape; the inputs decide the count: give ones that "
                              "fit with --inputs)",
                              n->name, (long long)bound);
            break;
        }
        *(int64_t *)s.tmp[0]->data = t;
        *(uint8_t *)s.tmp[1]->data = 1;
        s.bin[0] = s.tmp[0];
        s.bin[1] = s.tmp[1];
        s.bout[0] = s.tmp[2];
        for (int i = 0; i < nc; i++) {
            s.bin[2 + i] = s.cur[i];
            s.bout[1 + i] = s.nxt[i];
        }
        for (int j = 0; j < k; j++) {
            slices[j].data = (char *)out[nc + j]->data + (size_t)t * slices[j].nbytes;
            s.bout[1 + nc + j] = &slices[j];
        }
        if ((st = r->run(r->ctx, 0, s.bin, s.bout, err))) break;
        iter_swap(&s);
        cond = ts_tensor_get_i64(s.tmp[2], 0) != 0;
    }
    if (!st && k && t != bound)
        st = ts_error_set(err, TS_ERR_INVALID,
                          "node '%s' (Loop): ran %lld iterations, but its scan outputs were bound at load to %lld "
                          "(the model's declared shape; the inputs decide the count: give ones that fit with --inputs)",
                          n->name, (long long)t, (long long)bound);
    if (!st) copy_out(&s, out);
    if (slices) iter_free(&s);
    free(slices);
    return st;
}

/* Scan over in[first..] (states, then scan inputs); first is 1 for the
 * opset-8 form, whose callers pass one batch row as views (scan axis 0). */
static ts_status scan_rows(const ts_node *n, const ts_cf_attrs *p, const ts_cf_runner *r, const ts_tensor *const *in,
                           ts_tensor *const *out, int first, ts_error *err)
{
    const ts_body *b = p->body[0];
    int m = p->num_scan_inputs, nc = ts_cf_explicit_inputs(n) - first - m, k = n->noutputs - nc;
    const ts_tensor *const *x = in + first;
    iter_state s;
    ts_status st = iter_init(&s, b, r, nc, 0, x, m + k, err);
    int in_ax[TS_CF_MAX_SCAN], out_ax[TS_CF_MAX_SCAN];
    int64_t len = 0;
    for (int j = 0; !st && j < m; j++) {
        in_ax[j] = p->batched ? 0 : scan_axis(p->in_axes, p->nin_axes, j, x[nc + j]->shape.rank);
        len = x[nc + j]->shape.dims[in_ax[j]];
        if (!(s.tmp[j] = new_for(r, body_in(b, nc + j), err))) st = err->code;
    }
    for (int j = 0; !st && j < k; j++) {
        out_ax[j] = p->batched ? 0 : scan_axis(p->out_axes, p->nout_axes, j, out[nc + j]->shape.rank);
        if (!(s.tmp[m + j] = new_for(r, body_out(b, nc + j), err))) st = err->code;
    }
    if (!st) st = fill_captures(n, b, in, s.bin, err);
    for (int64_t t = 0; !st && t < len; t++) {
        for (int j = 0; j < m; j++) {
            bool rev = j < p->nin_dirs && p->in_dirs[j];
            slice_copy((ts_tensor *)x[nc + j], in_ax[j], rev ? len - 1 - t : t, s.tmp[j], true);
            s.bin[nc + j] = s.tmp[j];
        }
        for (int i = 0; i < nc; i++) {
            s.bin[i] = s.cur[i];
            s.bout[i] = s.nxt[i];
        }
        for (int j = 0; j < k; j++) s.bout[nc + j] = s.tmp[m + j];
        if ((st = r->run(r->ctx, 0, s.bin, s.bout, err))) break;
        for (int j = 0; j < k; j++) {
            bool rev = j < p->nout_dirs && p->out_dirs[j];
            slice_copy(out[nc + j], out_ax[j], rev ? len - 1 - t : t, s.tmp[m + j], false);
        }
        iter_swap(&s);
    }
    if (!st) copy_out(&s, out);
    iter_free(&s);
    return st;
}

/* Row i of t (axis 0 dropped) as a view sharing t's data. */
static ts_tensor row_view(const ts_tensor *t, int64_t i)
{
    ts_tensor v = {.dtype = t->dtype, .refcount = 1};
    v.shape.rank = t->shape.rank - 1;
    for (int d = 0; d < v.shape.rank; d++) v.shape.dims[d] = t->shape.dims[d + 1];
    v.nbytes = t->shape.dims[0] ? t->nbytes / (size_t)t->shape.dims[0] : 0;
    v.data = (char *)t->data + (size_t)i * v.nbytes;
    return v;
}

/* Scan of opset 8: each batch row is an opset-9 scan over axis 0 of views
 * of that row; sequence_lens, when given, must be the whole length. */
static ts_status run_scan8(const ts_node *n, const ts_cf_attrs *p, const ts_cf_runner *r, const ts_tensor *const *in,
                           ts_tensor *const *out, ts_error *err)
{
    int nexp = ts_cf_explicit_inputs(n);
    const ts_tensor *x0 = in[1];
    int64_t batch = x0->shape.dims[0], len = in[nexp - 1]->shape.dims[1];
    for (int64_t i = 0; in[0] && i < batch; i++) {
        int64_t l = ts_tensor_get_i64(in[0], i);
        if (l != len)
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "node '%s' (Scan): sequence_lens[%lld] is %lld; tsopt runs opset-8 Scan over whole "
                                "sequences only (%lld)",
                                n->name, (long long)i, (long long)l, (long long)len);
    }
    ts_tensor *vin = calloc((size_t)n->ninputs + 1, sizeof *vin), *vout = calloc((size_t)n->noutputs + 1, sizeof *vout);
    const ts_tensor **pin = calloc((size_t)n->ninputs + 1, sizeof *pin);
    ts_tensor **pout = calloc((size_t)n->noutputs + 1, sizeof *pout);
    ts_status st = vin && vout && pin && pout ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < batch; i++) {
        for (int j = 0; j < n->ninputs; j++) {
            if (j == 0 || j >= nexp || !in[j]) { /* sequence_lens, captures: as they are */
                pin[j] = in[j];
                continue;
            }
            vin[j] = row_view(in[j], i);
            pin[j] = &vin[j];
        }
        for (int o = 0; o < n->noutputs; o++) {
            vout[o] = row_view(out[o], i);
            pout[o] = &vout[o];
        }
        st = scan_rows(n, p, r, pin, pout, 1, err);
    }
    free(vin);
    free(vout);
    free(pin);
    free(pout);
    return st;
}

static ts_status run_scan(const ts_node *n, const ts_cf_attrs *p, const ts_cf_runner *r, const ts_tensor *const *in,
                          ts_tensor *const *out, ts_error *err)
{
    return p->batched ? run_scan8(n, p, r, in, out, err) : scan_rows(n, p, r, in, out, 0, err);
}

ts_status ts_cf_execute(const ts_node *n, const ts_cf_runner *r, const ts_tensor *const *in, ts_tensor *const *out,
                        ts_error *err)
{
    const ts_cf_attrs *p = n->attrs;
    if (n->op == &ts_op_if) return run_if(n, p, r, in, out, err);
    if (n->op == &ts_op_loop) return run_loop(n, p, r, in, out, err);
    return run_scan(n, p, r, in, out, err);
}

/* --------------------------------------------- reference kernel: interpreter */

typedef struct interp_ctx {
    const ts_node *node;
    const ts_num *num;
} interp_ctx;

static ts_dtype interp_storage(void *ctx, ts_dtype dt)
{
    const interp_ctx *c = ctx;
    return ts_dtype_is_float(dt) ? c->num->storage : dt;
}

static ts_status interp_run(void *ctx, int body, ts_tensor *const *in, ts_tensor *const *out, ts_error *err)
{
    const interp_ctx *c = ctx;
    const ts_cf_attrs *p = c->node->attrs;
    const ts_graph *g = p->body[body]->g;
    ts_tensor **res = calloc((size_t)g->noutputs + 1, sizeof *res);
    if (!res) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    ts_status st = ts_graph_run_reference(g, c->num->kind, in, res, err);
    for (int o = 0; !st && o < g->noutputs; o++) {
        if (res[o]->dtype != out[o]->dtype || res[o]->nbytes != out[o]->nbytes)
            st = ts_error_set(err, TS_ERR_INVALID, "body '%s': output %d is not of the size bound at load", g->name, o);
        else if (out[o]->nbytes)
            memcpy(out[o]->data, res[o]->data, out[o]->nbytes);
    }
    for (int o = 0; o < g->noutputs; o++) ts_tensor_unref(res[o]);
    free(res);
    if (st && !strstr(err->msg, c->node->name))
        ts_error_prefix(err, "node '%s' (%s)", c->node->name, c->node->op->name);
    return st;
}

static ts_status cf_kernel(ts_kernel_ctx *k)
{
    interp_ctx c = {k->node, k->num};
    ts_cf_runner r = {interp_run, interp_storage, &c};
    return ts_cf_execute(k->node, &r, k->in, k->out, k->err);
}

/* ------------------------------------------------------------------ work */

/* A body's work: its nodes' (nested bodies included through their own
 * flops), one flop per output element where a descriptor says nothing, as
 * the cost model counts. */
static double body_flops(const ts_graph *g)
{
    double f = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        if (n->op->flops)
            f += n->op->flops(n, g);
        else
            for (int o = 0; o < n->noutputs; o++) f += (double)ts_shape_numel(&g->values[n->outputs[o]].shape);
    }
    return f;
}

/* The work of a run: the larger branch of an If; a Loop's body times its
 * static trip count (the scan length, else a constant M up to 65536, else
 * once); a
 * Scan's body times the sequence length.  Rewrites inside bodies then show
 * in the cost model. */
static double cf_flops(const ts_node *n, const ts_graph *g)
{
    const ts_cf_attrs *p = n->attrs;
    if (n->op == &ts_op_if) {
        double t = body_flops(p->body[0]->g), e = body_flops(p->body[1]->g);
        return t > e ? t : e;
    }
    double trips = 1;
    int nexp = ts_cf_explicit_inputs(n);
    if (n->op == &ts_op_scan) {
        int first = nexp - p->num_scan_inputs;
        const ts_value *x = first >= 0 && first < n->ninputs && n->inputs[first] >= 0 ? &g->values[n->inputs[first]]
                                                                                         : NULL;
        int a = x ? scan_axis(p->in_axes, p->nin_axes, 0, x->shape.rank) : -1;
        if (x && p->batched && x->shape.rank >= 2)
            trips = (double)x->shape.dims[0] * (double)x->shape.dims[1]; /* batch rows times their length */
        else if (a >= 0)
            trips = (double)x->shape.dims[a];
    } else {
        int nc = nexp - 2;
        const ts_value *m = n->ninputs > 0 && n->inputs[0] >= 0 ? &g->values[n->inputs[0]] : NULL;
        if (n->noutputs > nc && nc >= 0)
            trips = (double)g->values[n->outputs[nc]].shape.dims[0];
        else if (m && m->constant && ts_tensor_get_i64(m->constant, 0) <= 65536)
            trips = (double)ts_tensor_get_i64(m->constant, 0); /* a while loop's M is often INT64_MAX: unknown */
    }
    return body_flops(p->body[0]->g) * (trips > 0 ? trips : 0);
}

/* ------------------------------------------------------------ descriptors */

const ts_op_desc ts_op_if = {.opset_min = 1, 
    .name = "If", .attr_size = sizeof(ts_cf_attrs), .min_inputs = 1, .max_inputs = -1, .min_outputs = 1,
    .max_outputs = -1, .parse = if_parse, .emit = if_emit, .infer = if_infer, .kernel = cf_kernel, .flops = cf_flops,
    .attrs_retain = cf_retain, .attrs_release = cf_release,
};

const ts_op_desc ts_op_loop = {.opset_min = 1, 
    .name = "Loop", .attr_size = sizeof(ts_cf_attrs), .min_inputs = 0, .max_inputs = -1, .min_outputs = 0,
    .max_outputs = -1, .parse = loop_parse, .emit = loop_emit, .infer = loop_infer, .kernel = cf_kernel, .flops = cf_flops,
    .attrs_retain = cf_retain, .attrs_release = cf_release,
};

/* min_inputs 0: opset 8 leaves its input 0 (sequence_lens) empty */
const ts_op_desc ts_op_scan = {.opset_min = 8, 
    .name = "Scan", .attr_size = sizeof(ts_cf_attrs), .min_inputs = 0, .max_inputs = -1, .min_outputs = 1,
    .max_outputs = -1, .parse = scan_parse, .emit = scan_emit, .infer = scan_infer, .kernel = cf_kernel, .flops = cf_flops,
    .attrs_retain = cf_retain, .attrs_release = cf_release,
};
