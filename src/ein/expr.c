/* Building, index arithmetic, garbage collection and printing of EinNet
 * expressions (expr.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "ein/expr.h"

int ts_ein_iter_new(ts_ein *e, int64_t lo, int64_t hi)
{
    if (e->niter >= EIN_MAX_ITERS) return -1;
    e->iter[e->niter] = (ts_ein_iter){lo, hi};
    return e->niter++;
}

int ts_ein_scope_new(ts_ein *e)
{
    if (e->nscope >= EIN_MAX_SCOPES) return -1;
    e->scope[e->nscope] = (ts_ein_scope){.body = -1};
    return e->nscope++;
}

static int node_new(ts_ein *e, ts_ein_node n)
{
    if (e->nnode >= EIN_MAX_NODES) return -1;
    e->node[e->nnode] = n;
    return e->nnode++;
}

int ts_ein_num(ts_ein *e, double v)
{
    return node_new(e, (ts_ein_node){.op = EIN_NUM, .a = -1, .b = -1, .num = v});
}

int ts_ein_bin(ts_ein *e, ts_ein_op op, int a, int b)
{
    if (a < 0 || b < 0) return -1;
    return node_new(e, (ts_ein_node){.op = (uint8_t)op, .a = (int16_t)a, .b = (int16_t)b});
}

int ts_ein_un(ts_ein *e, ts_ein_op op, int a)
{
    if (a < 0) return -1;
    return node_new(e, (ts_ein_node){.op = (uint8_t)op, .a = (int16_t)a, .b = -1});
}

int ts_ein_read(ts_ein *e, int src, int rank, const ts_ein_idx *ix)
{
    if (e->nidx + rank > EIN_MAX_IDX || rank > TS_MAX_RANK + 4) return -1;
    int first = e->nidx;
    for (int d = 0; d < rank; d++) e->idx[e->nidx++] = ix[d];
    int r = node_new(e, (ts_ein_node){.op = EIN_READ, .rank = (int8_t)rank, .a = -1, .b = -1, .src = (int16_t)src,
                                      .idx = (int16_t)first});
    if (r < 0) e->nidx = first;
    return r;
}

ts_ein_idx ts_ein_idx_const(int64_t c)
{
    return (ts_ein_idx){.c = c, .div = 1};
}

ts_ein_idx ts_ein_idx_it(int it)
{
    ts_ein_idx x = {.n = 1, .div = 1};
    x.it[0] = (int16_t)it;
    x.co[0] = 1;
    return x;
}

static bool add_term(ts_ein_idx *a, int it, int64_t co)
{
    for (int k = 0; k < a->n; k++)
        if (a->it[k] == it) {
            a->co[k] += co;
            if (!a->co[k]) {
                a->n--;
                memmove(&a->it[k], &a->it[k + 1], sizeof a->it[0] * (size_t)(a->n - k));
                memmove(&a->co[k], &a->co[k + 1], sizeof a->co[0] * (size_t)(a->n - k));
            }
            return true;
        }
    if (!co) return true;
    if (a->n >= EIN_MAX_TERMS) return false;
    a->it[a->n] = (int16_t)it;
    a->co[a->n++] = co;
    return true;
}

bool ts_ein_idx_axpy(ts_ein_idx *a, int64_t k, const ts_ein_idx *b)
{
    if (b->div != 1 || b->mod) return false;
    for (int t = 0; t < b->n; t++)
        if (!add_term(a, b->it[t], k * b->co[t])) return false;
    a->c += k * b->c;
    return true;
}

int64_t ts_ein_idx_coef(const ts_ein_idx *x, int it)
{
    for (int k = 0; k < x->n; k++)
        if (x->it[k] == it) return x->co[k];
    return 0;
}

bool ts_ein_idx_subst(ts_ein_idx *x, int it, const ts_ein_idx *r)
{
    int64_t co = ts_ein_idx_coef(x, it);
    if (!co) return true;
    add_term(x, it, -co);
    return ts_ein_idx_axpy(x, co, r);
}

void ts_ein_idx_bounds(const ts_ein *e, const ts_ein_idx *x, int64_t *min, int64_t *max)
{
    int64_t lo = x->c, hi = x->c;
    for (int k = 0; k < x->n; k++) {
        const ts_ein_iter *r = &e->iter[x->it[k]];
        int64_t a = x->co[k] * r->lo, b = x->co[k] * (r->hi - 1);
        lo += a < b ? a : b;
        hi += a < b ? b : a;
    }
    *min = lo;
    *max = hi;
}

int ts_ein_src_dims(const ts_ein *e, int src, int64_t dims[EIN_MAX_TRAV])
{
    if (src >= 0) {
        for (int d = 0; d < e->in_shape[src].rank; d++) dims[d] = e->in_shape[src].dims[d];
        return e->in_shape[src].rank;
    }
    const ts_ein_scope *s = &e->scope[ts_ein_src_scope(src)];
    for (int d = 0; d < s->ntrav; d++) dims[d] = e->iter[s->trav[d]].hi - e->iter[s->trav[d]].lo;
    return s->ntrav;
}

ts_shape ts_ein_src_shape(const ts_ein *e, int src)
{
    int64_t dims[EIN_MAX_TRAV];
    int rank = ts_ein_src_dims(e, src, dims);
    ts_shape sh = {.rank = rank};
    if (rank > TS_MAX_RANK) { /* wider than a tensor: its flat size (ts_shape holds TS_MAX_RANK dims) */
        int64_t n = 1;
        for (int d = 0; d < rank; d++) n *= dims[d];
        return ts_shape_make(1, &n);
    }
    for (int d = 0; d < rank; d++) sh.dims[d] = dims[d];
    return sh;
}

/* ---------------------------------------------------------------- gc */

typedef struct gc_map {
    const ts_ein *old;
    ts_ein *nu;
    int16_t iter[EIN_MAX_ITERS], scope[EIN_MAX_SCOPES];
} gc_map;

static int map_iter(gc_map *m, int it)
{
    if (m->iter[it] < 0) m->iter[it] = (int16_t)ts_ein_iter_new(m->nu, m->old->iter[it].lo, m->old->iter[it].hi);
    return m->iter[it];
}

static int copy_scope(gc_map *m, int s);

static int copy_node(gc_map *m, int n)
{
    const ts_ein_node *o = &m->old->node[n];
    ts_ein_node c = *o;
    if (o->op == EIN_READ) {
        ts_ein_idx ix[TS_MAX_RANK + 4];
        for (int d = 0; d < o->rank; d++) {
            ix[d] = m->old->idx[o->idx + d];
            for (int k = 0; k < ix[d].n; k++) ix[d].it[k] = (int16_t)map_iter(m, ix[d].it[k]);
        }
        int src = o->src;
        if (src < 0) src = -copy_scope(m, ts_ein_src_scope(src)) - 1;
        return ts_ein_read(m->nu, src, o->rank, ix);
    }
    if (o->a >= 0) c.a = (int16_t)copy_node(m, o->a);
    if (o->b >= 0) c.b = (int16_t)copy_node(m, o->b);
    if (m->nu->nnode >= EIN_MAX_NODES) return 0;
    m->nu->node[m->nu->nnode] = c;
    return m->nu->nnode++;
}

static int copy_scope(gc_map *m, int s)
{
    if (m->scope[s] >= 0) return m->scope[s];
    int ns = ts_ein_scope_new(m->nu);
    m->scope[s] = (int16_t)ns;
    const ts_ein_scope *o = &m->old->scope[s];
    ts_ein_scope c = {.ntrav = o->ntrav, .nsum = o->nsum};
    for (int d = 0; d < o->ntrav; d++) c.trav[d] = (int16_t)map_iter(m, o->trav[d]);
    for (int d = 0; d < o->nsum; d++) c.sum[d] = (int16_t)map_iter(m, o->sum[d]);
    c.body = (int16_t)copy_node(m, o->body);
    m->nu->scope[ns] = c;
    return ns;
}

void ts_ein_gc(ts_ein *e)
{
    ts_ein nu;
    memset(&nu, 0, sizeof nu);
    nu.ninputs = e->ninputs;
    memcpy(nu.in_shape, e->in_shape, sizeof nu.in_shape);
    nu.out_shape = e->out_shape;
    gc_map m = {.old = e, .nu = &nu};
    memset(m.iter, 0xff, sizeof m.iter);
    memset(m.scope, 0xff, sizeof m.scope);
    copy_scope(&m, 0);
    *e = nu;
}

/* ------------------------------------------------------------ printing */

typedef struct pbuf {
    char *p;
    size_t n, len;
} pbuf;

__attribute__((format(printf, 2, 3))) static void put(pbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (b->len < b->n) {
        int w = vsnprintf(b->p + b->len, b->n - b->len, fmt, ap);
        if (w > 0) b->len += (size_t)w;
        if (b->len >= b->n) b->len = b->n - 1;
    }
    va_end(ap);
}

static void print_idx(pbuf *b, const ts_ein_idx *x)
{
    if (x->div != 1 || x->mod) put(b, "(");
    for (int k = 0; k < x->n; k++) {
        int64_t co = x->co[k];
        if (k || co < 0) put(b, co < 0 ? "-" : "+");
        if (co != 1 && co != -1) put(b, "%lld*", (long long)(co < 0 ? -co : co));
        put(b, "i%d", x->it[k]);
    }
    if (x->c || !x->n) put(b, x->n && x->c > 0 ? "+%lld" : "%lld", (long long)x->c);
    if (x->div != 1) put(b, ")/%lld", (long long)x->div);
    if (x->mod) put(b, "%s%%%lld", x->div != 1 ? "" : ")", (long long)x->mod);
}

static void print_scope(pbuf *b, const ts_ein *e, int s);

static void print_node(pbuf *b, const ts_ein *e, int n)
{
    const ts_ein_node *x = &e->node[n];
    static const char *ops[] = {"", "", "+", "-", "*", "/", "-", "relu"};
    switch (x->op) {
    case EIN_READ:
        if (x->src >= 0)
            put(b, "A%d", x->src);
        else
            print_scope(b, e, ts_ein_src_scope(x->src));
        put(b, "[");
        for (int d = 0; d < x->rank; d++) {
            if (d) put(b, ",");
            print_idx(b, &e->idx[x->idx + d]);
        }
        put(b, "]");
        break;
    case EIN_NUM: put(b, "%g", x->num); break;
    case EIN_NEG: put(b, "-("); print_node(b, e, x->a); put(b, ")"); break;
    case EIN_RELU: put(b, "relu("); print_node(b, e, x->a); put(b, ")"); break;
    default:
        put(b, "(");
        print_node(b, e, x->a);
        put(b, "%s", ops[x->op]);
        print_node(b, e, x->b);
        put(b, ")");
    }
}

static void print_scope(pbuf *b, const ts_ein *e, int s)
{
    const ts_ein_scope *sc = &e->scope[s];
    if (s) put(b, "{");
    put(b, "L[");
    for (int d = 0; d < sc->ntrav; d++)
        put(b, "%si%d:%lld..%lld", d ? "," : "", sc->trav[d], (long long)e->iter[sc->trav[d]].lo,
            (long long)e->iter[sc->trav[d]].hi);
    put(b, "]");
    if (sc->nsum) {
        put(b, " Sum[");
        for (int d = 0; d < sc->nsum; d++)
            put(b, "%si%d:%lld..%lld", d ? "," : "", sc->sum[d], (long long)e->iter[sc->sum[d]].lo,
                (long long)e->iter[sc->sum[d]].hi);
        put(b, "]");
    }
    put(b, " ");
    print_node(b, e, sc->body);
    if (s) put(b, "}");
}

void ts_ein_print(const ts_ein *e, char *buf, size_t n)
{
    pbuf b = {buf, n, 0};
    if (n) buf[0] = 0;
    print_scope(&b, e, 0);
}
