/* An expression as one line of text and back: the attribute an eOperator
 * node (src/ops/einnet_op.c) carries.  The text is the flat storage itself
 * (counts, iterators, scopes, nodes, index entries, shapes), so reading it
 * back gives the same struct byte for byte; ts_ein_print is the readable
 * form.  Reading validates every id and count, so a hand-edited or corrupt
 * attribute is one error naming what is wrong, never an out-of-range read
 * or a cycle the evaluator would recurse into forever. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ein/expr.h"

#define EIN_TEXT_TAG "ein1"
/* Index values and ranges stay far from int64 overflow in offsets. */
#define EIN_TEXT_MAX_ABS ((int64_t)1 << 40)

typedef struct wbuf {
    char *p;
    size_t n, len;
} wbuf;

static void put(wbuf *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(wbuf *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(w->p ? w->p + (w->len < w->n ? w->len : w->n) : NULL,
                      w->len < w->n ? w->n - w->len : 0, fmt, ap);
    va_end(ap);
    if (k > 0) w->len += (size_t)k;
}

static void put_shape(wbuf *w, const ts_shape *s)
{
    put(w, " %d", s->rank);
    for (int d = 0; d < s->rank; d++) put(w, " %lld", (long long)s->dims[d]);
}

size_t ts_ein_to_text(const ts_ein *e, char *buf, size_t n)
{
    wbuf w = {buf, n, 0};
    if (buf && n) buf[0] = 0;
    put(&w, EIN_TEXT_TAG " %d %d %d %d %d", e->ninputs, e->niter, e->nscope, e->nnode, e->nidx);
    for (int i = 0; i < e->ninputs; i++) put_shape(&w, &e->in_shape[i]);
    put_shape(&w, &e->out_shape);
    for (int i = 0; i < e->niter; i++) put(&w, " %lld %lld", (long long)e->iter[i].lo, (long long)e->iter[i].hi);
    for (int s = 0; s < e->nscope; s++) {
        const ts_ein_scope *sc = &e->scope[s];
        put(&w, " %d %d %d", sc->ntrav, sc->nsum, sc->body);
        for (int d = 0; d < sc->ntrav; d++) put(&w, " %d", sc->trav[d]);
        for (int d = 0; d < sc->nsum; d++) put(&w, " %d", sc->sum[d]);
    }
    for (int k = 0; k < e->nnode; k++) {
        const ts_ein_node *x = &e->node[k];
        put(&w, " %d %d %d %d %d %d %.17g", x->op, x->rank, x->a, x->b, x->src, x->idx, x->num);
    }
    for (int k = 0; k < e->nidx; k++) {
        const ts_ein_idx *x = &e->idx[k];
        put(&w, " %d %lld %lld %lld", x->n, (long long)x->c, (long long)x->div, (long long)x->mod);
        for (int t = 0; t < x->n; t++) put(&w, " %d %lld", x->it[t], (long long)x->co[t]);
    }
    return w.len;
}

typedef struct rd {
    const char *p;
    int field;
    ts_error *err;
    bool bad;
} rd;

static int64_t rd_int(rd *r, int64_t lo, int64_t hi, const char *what)
{
    if (r->bad) return lo;
    char *end;
    r->field++;
    long long v = strtoll(r->p, &end, 10);
    if (end == r->p || v < lo || v > hi) {
        ts_error_set(r->err, TS_ERR_PARSE, "einnet expression text: field %d (%s) %s [%lld, %lld]", r->field, what,
                     end == r->p ? "missing, want an integer in" : "out of range", (long long)lo, (long long)hi);
        r->bad = true;
        return lo;
    }
    r->p = end;
    return v;
}

static double rd_num(rd *r)
{
    if (r->bad) return 0;
    char *end;
    r->field++;
    double v = strtod(r->p, &end);
    if (end == r->p || !isfinite(v)) {
        ts_error_set(r->err, TS_ERR_PARSE, "einnet expression text: field %d (constant) is not a finite number",
                     r->field);
        r->bad = true;
        return 0;
    }
    r->p = end;
    return v;
}

static void rd_shape(rd *r, ts_shape *s)
{
    s->rank = (int)rd_int(r, 0, TS_MAX_RANK, "rank");
    for (int d = 0; d < s->rank; d++) s->dims[d] = rd_int(r, 0, EIN_TEXT_MAX_ABS, "dimension");
}

/* Depth-first colouring (0 new, 1 on the path, 2 done) of the node and
 * scope graphs: a node or scope met again while on the path is a cycle,
 * which the evaluator would recurse into forever.  Each is visited once,
 * so a shared subtree costs nothing twice. */
typedef struct walk {
    const ts_ein *e;
    uint8_t node[EIN_MAX_NODES], scope[EIN_MAX_SCOPES];
} walk;

static bool scope_ok(walk *w, int s);

static bool node_ok(walk *w, int k)
{
    if (w->node[k] == 2) return true;
    if (w->node[k] == 1) return false;
    w->node[k] = 1;
    const ts_ein_node *x = &w->e->node[k];
    bool ok = true;
    if (x->op == EIN_READ)
        ok = x->src >= 0 || scope_ok(w, ts_ein_src_scope(x->src));
    else if (x->op != EIN_NUM)
        ok = node_ok(w, x->a) && (x->op == EIN_NEG || x->op == EIN_RELU || node_ok(w, x->b));
    w->node[k] = 2;
    return ok;
}

static bool scope_ok(walk *w, int s)
{
    if (w->scope[s] == 2) return true;
    if (w->scope[s] == 1) return false;
    w->scope[s] = 1;
    /* a scope's body nodes are visited anew: a node shared between scopes
     * is on this scope's path too */
    uint8_t saved[EIN_MAX_NODES];
    memcpy(saved, w->node, sizeof saved);
    memset(w->node, 0, sizeof w->node);
    bool ok = node_ok(w, w->e->scope[s].body);
    memcpy(w->node, saved, sizeof saved);
    w->scope[s] = 2;
    return ok;
}

static ts_status fail(ts_error *err, const char *what)
{
    return ts_error_set(err, TS_ERR_PARSE, "einnet expression text: %s", what);
}

ts_status ts_ein_from_text(const char *text, ts_ein *e, ts_error *err)
{
    memset(e, 0, sizeof *e);
    size_t tl = strlen(EIN_TEXT_TAG);
    if (strncmp(text, EIN_TEXT_TAG, tl) || (text[tl] != ' ' && text[tl] != 0))
        return fail(err, "does not start with '" EIN_TEXT_TAG "'");
    rd r = {text + tl, 0, err, false};
    e->ninputs = (int)rd_int(&r, 0, EIN_MAX_INPUTS, "input count");
    e->niter = (int)rd_int(&r, 0, EIN_MAX_ITERS, "iterator count");
    e->nscope = (int)rd_int(&r, 1, EIN_MAX_SCOPES, "scope count");
    e->nnode = (int)rd_int(&r, 1, EIN_MAX_NODES, "node count");
    e->nidx = (int)rd_int(&r, 0, EIN_MAX_IDX, "index count");
    for (int i = 0; i < e->ninputs; i++) rd_shape(&r, &e->in_shape[i]);
    rd_shape(&r, &e->out_shape);
    for (int i = 0; i < e->niter && !r.bad; i++) {
        e->iter[i].lo = rd_int(&r, -EIN_TEXT_MAX_ABS, EIN_TEXT_MAX_ABS, "iterator lo");
        e->iter[i].hi = rd_int(&r, e->iter[i].lo, EIN_TEXT_MAX_ABS, "iterator hi");
    }
    for (int s = 0; s < e->nscope && !r.bad; s++) {
        ts_ein_scope *sc = &e->scope[s];
        sc->ntrav = (int8_t)rd_int(&r, 0, EIN_MAX_TRAV, "traversal count");
        sc->nsum = (int8_t)rd_int(&r, 0, EIN_MAX_SUM, "summation count");
        sc->body = (int16_t)rd_int(&r, 0, e->nnode - 1, "scope body");
        for (int d = 0; d < sc->ntrav; d++) sc->trav[d] = (int16_t)rd_int(&r, 0, e->niter - 1, "traversal iterator");
        for (int d = 0; d < sc->nsum; d++) sc->sum[d] = (int16_t)rd_int(&r, 0, e->niter - 1, "summation iterator");
    }
    for (int k = 0; k < e->nnode && !r.bad; k++) {
        ts_ein_node *x = &e->node[k];
        x->op = (uint8_t)rd_int(&r, EIN_READ, EIN_RELU, "node operation");
        x->rank = (int8_t)rd_int(&r, 0, TS_MAX_RANK + 4, "read rank");
        x->a = (int16_t)rd_int(&r, -1, e->nnode - 1, "operand a");
        x->b = (int16_t)rd_int(&r, -1, e->nnode - 1, "operand b");
        x->src = (int16_t)rd_int(&r, -e->nscope, e->ninputs - 1, "read source");
        x->idx = (int16_t)rd_int(&r, 0, EIN_MAX_IDX, "read index");
        x->num = rd_num(&r);
    }
    for (int k = 0; k < e->nidx && !r.bad; k++) {
        ts_ein_idx *x = &e->idx[k];
        x->n = (int8_t)rd_int(&r, 0, EIN_MAX_TERMS, "term count");
        x->c = rd_int(&r, -EIN_TEXT_MAX_ABS, EIN_TEXT_MAX_ABS, "index constant");
        x->div = rd_int(&r, 1, EIN_TEXT_MAX_ABS, "index divisor");
        x->mod = rd_int(&r, 0, EIN_TEXT_MAX_ABS, "index modulus");
        for (int t = 0; t < x->n; t++) {
            x->it[t] = (int16_t)rd_int(&r, 0, e->niter - 1, "term iterator");
            x->co[t] = rd_int(&r, -EIN_TEXT_MAX_ABS, EIN_TEXT_MAX_ABS, "term coefficient");
        }
    }
    if (r.bad) return err->code;
    while (*r.p == ' ') r.p++;
    if (*r.p) return fail(err, "trailing characters after the last field");
    /* what the fields mean together */
    for (int k = 0; k < e->nnode; k++) {
        const ts_ein_node *x = &e->node[k];
        if (x->op == EIN_READ) {
            if (x->idx + x->rank > e->nidx) return fail(err, "a read's index entries are past the index table");
            ts_shape sh = x->src >= 0 ? e->in_shape[x->src] : (ts_shape){0};
            int want = x->src >= 0 ? sh.rank : e->scope[ts_ein_src_scope(x->src)].ntrav;
            if (x->rank != want) return fail(err, "a read's rank differs from the rank of what it reads");
        } else if (x->op != EIN_NUM) {
            bool unary = x->op == EIN_NEG || x->op == EIN_RELU;
            if (x->a < 0 || (!unary && x->b < 0)) return fail(err, "an operation lacks an operand");
        }
    }
    walk w = {.e = e};
    for (int k = 0; k < e->nnode; k++) {
        memset(&w, 0, sizeof w);
        w.e = e;
        if (!node_ok(&w, k)) return fail(err, "the nodes or the scopes they read form a cycle");
    }
    for (int s = 0; s < e->nscope; s++) {
        memset(&w, 0, sizeof w);
        w.e = e;
        if (!scope_ok(&w, s)) return fail(err, "the scopes read each other in a cycle");
    }
    /* sizes the evaluator allocates: every scope, and the root = the output */
    for (int s = 0; s < e->nscope; s++) {
        int64_t p = 1;
        for (int d = 0; d < e->scope[s].ntrav; d++) {
            int64_t len = e->iter[e->scope[s].trav[d]].hi - e->iter[e->scope[s].trav[d]].lo;
            if (len && p > EIN_TEXT_MAX_ABS / len) return fail(err, "a scope has more than 2^40 elements");
            p *= len;
        }
        if (s == 0 && p != ts_shape_numel(&e->out_shape))
            return fail(err, "the root traversal does not have the output's element count");
    }
    if (e->scope[0].ntrav == 0) return fail(err, "the root scope has no traversal iterator");
    return TS_OK;
}
