/* The box check (PET §5.1-5.2, step 2).  Theorem 1: two multi-linear
 * programs that agree at v0 and at v0 + e_j (j = 1..m) inside a box agree
 * on the whole box.  Theorem 2 (Schwartz-Zippel): where they are not
 * equivalent, one input uniform in F_p makes them agree with probability
 * at most d/p, d the degree of the difference (PET states n, the number
 * of input tensors, which bounds d for multi-linear programs).  So each
 * box is tested at m+1 positions on t random inputs, and a wrong box
 * passes with probability at most (d/p)^t.  All boxes share the same
 * inputs, and each program runs once per test (PET's caching: the
 * reference interpreter computes the whole output once). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pet/pet.h"
#include "util/hash.h"

static bool same_interface(const ts_graph *a, const ts_graph *b, ts_error *err)
{
    if (a->ninputs != b->ninputs || a->noutputs != 1 || b->noutputs != 1) {
        ts_error_set(err, TS_ERR_INVALID, "PET check: programs must have the same inputs and one output each");
        return false;
    }
    for (int k = 0; k < a->ninputs; k++)
        if (!ts_shape_eq(&a->values[a->inputs[k]].shape, &b->values[b->inputs[k]].shape)) {
            ts_error_set(err, TS_ERR_INVALID, "PET check: input %d differs in shape", k);
            return false;
        }
    if (!ts_shape_eq(&a->values[a->outputs[0]].shape, &b->values[b->outputs[0]].shape)) {
        ts_error_set(err, TS_ERR_INVALID, "PET check: outputs differ in shape");
        return false;
    }
    return true;
}

static bool all_linear(const ts_graph *p, ts_error *err)
{
    for (int i = 0; i < p->nnodes; i++)
        if (!p->nodes[i].dead && !ts_pet_node_linear(p, i)) {
            ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s' (%s) is not multi-linear: the PET theorems do not apply",
                         p->nodes[i].name, p->nodes[i].op->name);
            return false;
        }
    return true;
}

/* Runs p0 and p1 on one set of inputs in the domain; float inputs get
 * uniform values (F_p or [-1, 1]). */
static ts_status run_both(const ts_graph *p0, const ts_graph *p1, ts_domain_kind dom, uint64_t *rng, ts_tensor **o0,
                          ts_tensor **o1, ts_error *err)
{
    int n = p0->ninputs;
    ts_tensor **in = calloc((size_t)n + 1, sizeof *in);
    ts_status st = TS_OK;
    *o0 = *o1 = NULL;
    if (!in) return ts_error_set(err, TS_ERR_NOMEM, "out of memory in the PET check");
    for (int k = 0; k < n && !st; k++) {
        const ts_value *v = &p0->values[p0->inputs[k]];
        if (!ts_dtype_is_float(v->dtype)) {
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "PET check: input '%s' is not a float tensor", v->name);
            break;
        }
        in[k] = ts_tensor_new(dom == TS_DOMAIN_MODP ? TS_MODP : TS_F32, &v->shape, err);
        if (!in[k]) {
            st = err->code;
            break;
        }
        int64_t m = ts_tensor_numel(in[k]);
        if (dom == TS_DOMAIN_MODP)
            for (int64_t i = 0; i < m; i++) ((uint32_t *)in[k]->data)[i] = (uint32_t)(ts_rand_next(rng) % TS_MODP_P);
        else
            ts_tensor_fill_random(in[k], rng, -1, 1);
    }
    if (!st) st = ts_graph_run_reference(p0, dom, in, o0, err);
    if (!st) st = ts_graph_run_reference(p1, dom, in, o1, err);
    for (int k = 0; k < n; k++) ts_tensor_unref(in[k]);
    free(in);
    if (st) {
        ts_tensor_unref(*o0), ts_tensor_unref(*o1);
        *o0 = *o1 = NULL;
    }
    return st;
}

void ts_pet_verdict_free(ts_pet_verdict *v)
{
    free(v->boxes);
    free(v->ok);
    memset(v, 0, sizeof *v);
}

ts_status ts_pet_check(const ts_graph *p0, const ts_graph *p1, int tests, uint64_t seed, ts_pet_verdict *v,
                       ts_error *err)
{
    memset(v, 0, sizeof *v);
    if (!same_interface(p0, p1, err) || !all_linear(p0, err) || !all_linear(p1, err)) return err->code;
    ts_pet_points *a = NULL, *b = NULL;
    ts_status st = ts_pet_propagate(p0, &a, err);
    if (!st) st = ts_pet_propagate(p1, &b, err);
    const ts_shape *shape = &p0->values[p0->outputs[0]].shape;
    if (!st && !ts_pet_grid(shape, &a[p0->outputs[0]], &b[p1->outputs[0]], 1 << 16, &v->boxes, &v->nboxes))
        st = ts_error_set(err, TS_ERR_UNSUPPORTED, "PET check: over 65536 boxes");
    ts_pet_points_free_all(a, p0->nvalues);
    ts_pet_points_free_all(b, p1->nvalues);
    if (st) return st;
    v->ok = malloc(sizeof *v->ok * ((size_t)v->nboxes + 1));
    if (!v->ok) {
        ts_pet_verdict_free(v);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory in the PET check");
    }
    for (int i = 0; i < v->nboxes; i++) v->ok[i] = true;
    int64_t strides[TS_MAX_RANK];
    ts_shape_strides(shape, strides);
    uint64_t rng = seed * 0x2545f4914f6cdd1dull + 1;
    for (int t = 0; t < tests && !st; t++) {
        ts_tensor *o0, *o1;
        if ((st = run_both(p0, p1, TS_DOMAIN_MODP, &rng, &o0, &o1, err))) break;
        const uint32_t *x = o0->data, *y = o1->data;
        v->positions = 0;
        for (int i = 0; i < v->nboxes; i++) {
            const ts_pet_box *bx = &v->boxes[i];
            int64_t base = 0;
            for (int d = 0; d < shape->rank; d++) base += bx->lo[d] * strides[d];
            bool eq = x[base] == y[base];
            v->positions++;
            for (int d = 0; d < shape->rank; d++)
                if (bx->hi[d] - bx->lo[d] >= 2) {
                    eq &= x[base + strides[d]] == y[base + strides[d]];
                    v->positions++;
                }
            v->ok[i] &= eq;
        }
        ts_tensor_unref(o0), ts_tensor_unref(o1);
    }
    if (st) {
        ts_pet_verdict_free(v);
        return st;
    }
    for (int i = 0; i < v->nboxes; i++) v->nfail += !v->ok[i];
    int d0 = ts_pet_degree(p0), d1 = ts_pet_degree(p1);
    v->degree = d0 > d1 ? d0 : d1;
    v->error = pow((double)v->degree / TS_MODP_P, tests);
    return TS_OK;
}

ts_status ts_pet_equal_modp(const ts_graph *p0, const ts_graph *p1, int tests, uint64_t seed, bool *equal,
                            ts_error *err)
{
    *equal = false;
    if (!same_interface(p0, p1, err)) return err->code;
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 7;
    bool eq = true;
    for (int t = 0; t < tests && eq; t++) {
        ts_tensor *o0, *o1;
        ts_status st = run_both(p0, p1, TS_DOMAIN_MODP, &rng, &o0, &o1, err);
        if (st) return st;
        eq = !memcmp(o0->data, o1->data, o0->nbytes);
        ts_tensor_unref(o0), ts_tensor_unref(o1);
    }
    *equal = eq;
    return TS_OK;
}

ts_status ts_pet_float_error(const ts_graph *p0, const ts_graph *p1, uint64_t seed, double *worst, ts_error *err)
{
    *worst = INFINITY;
    if (!same_interface(p0, p1, err)) return err->code;
    uint64_t rng = seed * 0xd1b54a32d192ed03ull + 3;
    ts_tensor *o0, *o1;
    ts_status st = run_both(p0, p1, TS_DOMAIN_F32, &rng, &o0, &o1, err);
    if (st) return st;
    int64_t n = ts_tensor_numel(o0);
    const float *a = o0->data, *b = o1->data;
    double scale = 1, w = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(a[i]));
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1e-4 * scale + 1e-3 * fabs(a[i]));
        if (!(e <= w)) w = e; /* NaN counts as worst */
    }
    *worst = w;
    ts_tensor_unref(o0), ts_tensor_unref(o1);
    return TS_OK;
}
