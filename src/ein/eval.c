/* Evaluation of an expression on concrete tensors, point by point: the
 * definition of what an expression means, against which the translation
 * (translate.c) is tested on the reference interpreter and every derivation
 * on the original.  Slow on purpose: nothing here is clever. */
#include <stdlib.h>
#include <string.h>
#include "ein/expr.h"

typedef struct ev {
    const ts_ein *e;
    const ts_num *num;
    const ts_tensor *const *in;
    ts_tensor *scope[EIN_MAX_SCOPES];
    int64_t val[EIN_MAX_ITERS];
    /* per READ node, made at its first point: the extents and the first
     * index of what it reads (body() runs once per point and operand) */
    int64_t dims[EIN_MAX_NODES][EIN_MAX_TRAV], lo[EIN_MAX_NODES][EIN_MAX_TRAV];
    bool have_dims[EIN_MAX_NODES];
    ts_error *err;
    bool failed;
} ev;

static int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t idx_value(const ev *v, const ts_ein_idx *x)
{
    int64_t r = x->c;
    for (int k = 0; k < x->n; k++) r += x->co[k] * v->val[x->it[k]];
    if (x->div != 1) r = floordiv(r, x->div);
    if (x->mod) {
        r %= x->mod;
        if (r < 0) r += x->mod;
    }
    return r;
}

static ts_status eval_scope(ev *v, int s);

/* A constant size, so that the copy is a move, not a call. */
static inline void copy_scalar(void *d, const void *s, size_t size)
{
    if (size == 4)
        memcpy(d, s, 4);
    else
        memcpy(d, s, 8);
}

static void body(ev *v, int n, void *out)
{
    const ts_ein_node *x = &v->e->node[n];
    const ts_num *num = v->num;
    ts_scalar a, b;
    switch (x->op) {
    case EIN_READ: {
        const ts_tensor *t;
        int64_t *lo = v->lo[n], *dims = v->dims[n];
        if (!v->have_dims[n]) {
            ts_ein_src_dims(v->e, x->src, dims);
            for (int d = 0; d < x->rank; d++)
                lo[d] = x->src >= 0 ? 0 : v->e->iter[v->e->scope[ts_ein_src_scope(x->src)].trav[d]].lo;
            v->have_dims[n] = true;
        }
        if (x->src >= 0) {
            t = v->in[x->src];
        } else {
            int s = ts_ein_src_scope(x->src);
            if (!v->scope[s] && eval_scope(v, s)) {
                v->failed = true;
                num->zero(out);
                return;
            }
            t = v->scope[s];
        }
        int64_t off = 0;
        for (int d = 0; d < x->rank; d++) {
            int64_t i = idx_value(v, &v->e->idx[x->idx + d]) - lo[d];
            if (i < 0 || i >= dims[d]) {
                num->zero(out);
                return;
            }
            off = off * dims[d] + i;
        }
        copy_scalar(out, ts_num_cat(num, t->data, off), num->size);
        return;
    }
    case EIN_NUM: num->from_f64(out, x->num); return;
    case EIN_NEG:
        body(v, x->a, &a);
        num->neg(out, &a);
        return;
    case EIN_RELU:
        body(v, x->a, &a);
        if (num->exact) {
            v->failed = true;
            ts_error_set(v->err, TS_ERR_UNSUPPORTED, "einnet: relu has no exact (mod p) value");
            num->zero(out);
            return;
        }
        if (num->to_f64(&a) < 0)
            num->zero(out);
        else
            copy_scalar(out, &a, num->size);
        return;
    default: break;
    }
    body(v, x->a, &a);
    body(v, x->b, &b);
    switch (x->op) {
    case EIN_ADD: num->add(out, &a, &b); return;
    case EIN_SUB: num->sub(out, &a, &b); return;
    case EIN_MUL: num->mul(out, &a, &b); return;
    default: {
        ts_scalar r;
        if (!num->inv(&r, &b)) {
            v->failed = true;
            ts_error_set(v->err, TS_ERR_INVALID, "einnet: division by a value with no inverse");
            num->zero(out);
            return;
        }
        num->mul(out, &a, &r);
    }
    }
}

static ts_status eval_scope(ev *v, int s)
{
    const ts_ein *e = v->e;
    const ts_ein_scope *sc = &e->scope[s];
    /* a scope wider than a tensor may be is held as its flat size (readers
     * index it by the scope's extents, body() above) */
    ts_shape sh = ts_ein_src_shape(e, -s - 1);
    ts_tensor *t = ts_tensor_new(v->num->storage, &sh, v->err);
    if (!t) return v->err->code;
    int nt = sc->ntrav, ns = sc->nsum;
    int its[EIN_MAX_TRAV + EIN_MAX_SUM];
    for (int d = 0; d < nt; d++) its[d] = sc->trav[d];
    for (int d = 0; d < ns; d++) its[nt + d] = sc->sum[d];
    for (int d = 0; d < nt + ns; d++) {
        v->val[its[d]] = e->iter[its[d]].lo;
        if (e->iter[its[d]].hi <= e->iter[its[d]].lo) goto done; /* empty */
    }
    int64_t off = 0;
    for (;;) {
        ts_scalar x;
        body(v, sc->body, &x);
        if (v->failed) break;
        void *dst = ts_num_at(v->num, t->data, off);
        v->num->add(dst, dst, &x);
        /* odometer: summation iterators innermost, then traversal in layout order */
        int d = nt + ns - 1;
        for (; d >= 0; d--) {
            if (++v->val[its[d]] < e->iter[its[d]].hi) break;
            v->val[its[d]] = e->iter[its[d]].lo;
        }
        if (d < 0) break;
        if (d < nt) off++;
    }
done:
    if (v->failed) {
        ts_tensor_unref(t);
        return v->err->code ? v->err->code : TS_ERR_INVALID;
    }
    v->scope[s] = t;
    return TS_OK;
}

ts_status ts_ein_eval(const ts_ein *e, const ts_num *num, const ts_tensor *const *in, ts_tensor **out,
                      ts_error *err)
{
    *out = NULL;
    for (int i = 0; i < e->ninputs; i++)
        if (!in[i] || !ts_shape_eq(&in[i]->shape, &e->in_shape[i]) || in[i]->dtype != num->storage)
            return ts_error_set(err, TS_ERR_INVALID, "einnet: input %d does not have the expression's shape/dtype", i);
    ev *v = calloc(1, sizeof *v);
    if (!v) return ts_error_set(err, TS_ERR_NOMEM, "out of memory evaluating an expression");
    *v = (ev){.e = e, .num = num, .in = in, .err = err};
    ts_status st = eval_scope(v, 0);
    if (!st) {
        ts_tensor *t = v->scope[0];
        if (ts_shape_numel(&t->shape) != ts_shape_numel(&e->out_shape)) {
            st = ts_error_set(err, TS_ERR_INVALID, "einnet: root traversal does not have the output's size");
        } else {
            t->shape = e->out_shape;
            *out = ts_tensor_ref(t);
        }
    }
    for (int s = 0; s < EIN_MAX_SCOPES; s++) ts_tensor_unref(v->scope[s]);
    free(v);
    return st;
}

int64_t ts_ein_points(const ts_ein *e)
{
    int64_t n = 0;
    for (int s = 0; s < e->nscope; s++) {
        int64_t p = 1;
        const ts_ein_scope *sc = &e->scope[s];
        for (int d = 0; d < sc->ntrav; d++) p *= e->iter[sc->trav[d]].hi - e->iter[sc->trav[d]].lo;
        for (int d = 0; d < sc->nsum; d++) p *= e->iter[sc->sum[d]].hi - e->iter[sc->sum[d]].lo;
        n += p;
    }
    return n;
}

/* The random inputs and a's value, made once: a derivation search checks
 * up to MAX_FOUND derivations against one original, which was evaluated
 * anew for each (half the checking time of a fuzz campaign's optimizer). */
struct ts_ein_checker {
    const ts_ein *a;
    int64_t max_points, a_points;
    ts_tensor *in[EIN_MAX_INPUTS], *ra;
};

ts_ein_checker *ts_ein_checker_new(const ts_ein *a, int64_t max_points, ts_error *err)
{
    ts_ein_checker *c = calloc(1, sizeof *c);
    if (!c) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory checking a derivation");
        return NULL;
    }
    c->a = a, c->max_points = max_points, c->a_points = ts_ein_points(a);
    return c;
}

void ts_ein_checker_free(ts_ein_checker *c)
{
    if (!c) return;
    for (int i = 0; i < EIN_MAX_INPUTS; i++) ts_tensor_unref(c->in[i]);
    ts_tensor_unref(c->ra);
    free(c);
}

int ts_ein_checker_equal(ts_ein_checker *c, const ts_ein *b, ts_error *err)
{
    const ts_ein *a = c->a;
    if (c->a_points + ts_ein_points(b) > c->max_points) return 2;
    if (a->ninputs != b->ninputs || !ts_shape_eq(&a->out_shape, &b->out_shape)) return 0;
    for (int i = 0; i < a->ninputs; i++)
        if (!ts_shape_eq(&a->in_shape[i], &b->in_shape[i])) return 0;
    const ts_num *num = ts_num_get(TS_DOMAIN_MODP);
    if (!c->ra) {
        uint64_t rng = 0x5eed;
        for (int i = 0; i < a->ninputs; i++) {
            if (!(c->in[i] = ts_tensor_new(TS_MODP, &a->in_shape[i], err))) return -1;
            for (int64_t k = 0; k < ts_tensor_numel(c->in[i]); k++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                ((uint32_t *)c->in[i]->data)[k] = (uint32_t)(rng >> 33) % TS_MODP_P;
            }
        }
        if (ts_ein_eval(a, num, (const ts_tensor *const *)c->in, &c->ra, err)) return -1;
    }
    ts_tensor *rb = NULL;
    if (ts_ein_eval(b, num, (const ts_tensor *const *)c->in, &rb, err)) return -1;
    int res = c->ra->nbytes == rb->nbytes && !memcmp(c->ra->data, rb->data, rb->nbytes);
    ts_tensor_unref(rb);
    return res;
}

int ts_ein_check_equal(const ts_ein *a, const ts_ein *b, int64_t max_points, ts_error *err)
{
    ts_ein_checker *c = ts_ein_checker_new(a, max_points, err);
    int res = c ? ts_ein_checker_equal(c, b, err) : -1;
    ts_ein_checker_free(c);
    return res;
}
