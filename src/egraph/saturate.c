/* Equality saturation (egg's runner): each iteration searches every rule
 * on the clean e-graph, then applies all the matches found (instantiating
 * each rhs output with ts_egraph_add, which hash-conses and checks shapes,
 * and merging it with the lhs output it equals), then rebuilds once.  It
 * stops when an iteration changes nothing (saturated) or at the node,
 * iteration or time limit.  Matches are collected before any is applied,
 * so one iteration's result does not depend on rule order. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "egraph/egraph_impl.h"
#include "util/clock.h"

typedef struct mbuf {
    ts_ematch *m;
    size_t n, cap, limit;
    bool full, oom;
} mbuf;

static bool collect(void *ctx, const ts_ematch *m)
{
    mbuf *b = ctx;
    if (b->n >= b->limit) {
        b->full = true;
        return false;
    }
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        ts_ematch *p = realloc(b->m, sizeof *p * nc);
        if (!p) {
            b->oom = true;
            return false;
        }
        b->m = p;
        b->cap = nc;
    }
    b->m[b->n++] = *m;
    return true;
}

/* A rhs being instantiated: the class built for each subterm (by
 * pointer), for the split points of the split atoms. */
typedef struct inst {
    ts_egraph *eg;
    const ts_cpat *c;
    const ts_ematch *m;
    int nbuilt;
    const ts_rexpr *built[TS_EPAT_MAX];
    int32_t bcls[TS_EPAT_MAX];
    ts_error err;
} inst;

static const ts_shape *inst_shape_of(void *ctx, const ts_rexpr *e)
{
    inst *s = ctx;
    if (e->op == TS_ROP_VAR) {
        int v = ts_cpat_var(s->c, e->var);
        return v < 0 ? NULL : ts_egraph_shape(s->eg, s->m->bind[v]);
    }
    for (int i = 0; i < s->nbuilt; i++)
        if (s->built[i] == e) return ts_egraph_shape(s->eg, s->bcls[i]);
    return NULL;
}

/* The class of rhs subterm e, added as needed; -1 where an atom does not
 * fit (the match is then skipped) or on error (in s->err). */
static int32_t instantiate(inst *s, const ts_rexpr *e)
{
    if (e->op == TS_ROP_VAR) {
        int v = ts_cpat_var(s->c, e->var);
        return v < 0 ? -1 : s->m->bind[v];
    }
    int32_t a[2] = {-1, -1};
    for (int k = 0; k < e->nargs; k++)
        if ((a[k] = instantiate(s, e->arg[k])) < 0) return -1;
    int64_t at = 0;
    if (ts_rop_table[e->op].cuts && (at = ts_rexpr_split_point(e->arg[0], e->p.axis, inst_shape_of, s)) < 0)
        return -1;
    ts_error err = {0};
    int32_t c = ts_egraph_add_node(s->eg, e->op, &e->p, at, e->nargs, a, &err);
    if (c < 0) {
        /* an rhs that does not fit these shapes is no error */
        if (err.code == TS_ERR_NOMEM) s->err = err;
        return -1;
    }
    if (s->nbuilt < TS_EPAT_MAX) {
        s->built[s->nbuilt] = e;
        s->bcls[s->nbuilt++] = c;
    }
    return c;
}

/* Applies one match: 1 when it merged something, 0 when not, -1 on error. */
static int apply(ts_egraph *eg, const ts_cpat *c, const ts_ematch *m, ts_error *err)
{
    inst s = {.eg = eg, .c = c, .m = m};
    int32_t out[TS_EPAT_OUTS];
    for (int i = 0; i < c->nout; i++) {
        out[i] = instantiate(&s, c->r->rhs[i]);
        if (s.err.code) {
            if (err) *err = s.err;
            return -1;
        }
        if (out[i] < 0) return 0;
        /* the rule equates values of one shape; a rhs of another shape
         * here is an instance the rule does not cover */
        if (!ts_shape_eq(ts_egraph_shape(eg, out[i]), ts_egraph_shape(eg, m->root[i])) ||
            ts_egraph_dtype(eg, out[i]) != ts_egraph_dtype(eg, m->root[i]))
            return 0;
    }
    int changed = 0;
    for (int i = 0; i < c->nout; i++) changed |= ts_egraph_union(eg, out[i], m->root[i]);
    return changed;
}

ts_status ts_egraph_saturate(ts_egraph *eg, const ts_rule *rules, int nrules, const ts_saturate_limits *lim,
                             ts_saturate_stats *st, ts_error *err)
{
    ts_saturate_limits L = lim ? *lim : (ts_saturate_limits){0};
    if (!L.max_nodes) L.max_nodes = 10000;
    if (!L.max_iters) L.max_iters = 10;
    if (L.time_s <= 0) L.time_s = 1.0;
    ts_saturate_stats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    double t0 = ts_clock_s();
    ts_status rc = TS_OK;
    ts_cpat *cp = malloc(sizeof *cp * (size_t)(nrules > 0 ? nrules : 1));
    mbuf mb = {.limit = L.max_nodes * 8 > 100000 ? L.max_nodes * 8 : 100000};
    /* pattern nodes of all rules in one pool; offsets until it stops growing */
    ts_pnode scratch[TS_EPAT_MAX], *pool = NULL;
    size_t npool = 0, cappool = 0;
    int *off = malloc(sizeof *off * (size_t)(nrules > 0 ? nrules : 1));
    if (!cp || !off) {
        free(cp), free(off);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory compiling %d rules", nrules);
    }
    int ncp = 0;
    for (int i = 0; i < nrules; i++) {
        if (!ts_cpat_compile(&rules[i], ncp, &cp[ncp], scratch)) continue;
        if (npool + (size_t)cp[ncp].n > cappool) {
            size_t nc = cappool ? cappool * 2 : 1024;
            while (nc < npool + (size_t)cp[ncp].n) nc *= 2;
            ts_pnode *p = realloc(pool, sizeof *p * nc);
            if (!p) {
                free(cp), free(off), free(pool);
                return ts_error_set(err, TS_ERR_NOMEM, "out of memory compiling %d rules", nrules);
            }
            pool = p;
            cappool = nc;
        }
        memcpy(pool + npool, scratch, sizeof *scratch * (size_t)cp[ncp].n);
        off[ncp] = (int)npool;
        npool += (size_t)cp[ncp].n;
        ncp++;
    }
    for (int i = 0; i < ncp; i++) cp[i].node = pool + off[i];
    free(off);
    ts_egraph_rebuild(eg);
    int64_t saved_elems = eg->max_elems;
    eg->max_elems = L.max_elems;
    if (eg->max_elems <= 0) {
        int64_t big = 1;
        for (int c = 0; c < eg->uf.n; c++)
            if (ts_uf_find(&eg->uf, c) == c && ts_shape_numel(&eg->cls[c].shape) > big)
                big = ts_shape_numel(&eg->cls[c].shape);
        eg->max_elems = big > INT64_MAX / 16 ? INT64_MAX : big * 16;
    }
    st->stop = "iteration limit";
    for (int iter = 0;; iter++) {
        if (iter >= L.max_iters) {
            st->stop = "iteration limit";
            break;
        }
        if (eg->live_nodes > L.max_nodes) {
            st->stop = "node limit";
            break;
        }
        if (ts_clock_s() - t0 > L.time_s) {
            st->stop = "time limit";
            break;
        }
        ts_eopindex ix;
        if (!ts_eopindex_build(eg, &ix)) {
            rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory indexing the e-graph");
            break;
        }
        mb.n = 0;
        mb.full = false;
        bool timed_out = false;
        for (int r = 0; r < ncp && !mb.full && !mb.oom && !timed_out; r++) {
            ts_ematch_rule(eg, &ix, &cp[r], collect, &mb);
            timed_out = ts_clock_s() - t0 > L.time_s;
        }
        ts_eopindex_free(&ix);
        if (mb.oom) {
            rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory collecting e-graph matches");
            break;
        }
        size_t nodes_before = eg->live_nodes;
        long changed = 0;
        bool node_stop = false;
        const char *cut = NULL;
        for (size_t i = 0; i < mb.n; i++) {
            const ts_ematch *m = &mb.m[i];
            int a = apply(eg, &cp[m->rule], m, err);
            if (a < 0) {
                rc = err ? err->code : TS_ERR_NOMEM;
                break;
            }
            changed += a;
            if (eg->live_nodes > L.max_nodes) {
                node_stop = true;
                break;
            }
            if ((i & 255) == 255 && ts_clock_s() - t0 > L.time_s) {
                cut = "time limit";
                break;
            }
        }
        ts_egraph_rebuild(eg);
        st->applied += changed;
        st->iters = iter + 1;
        if (rc) break;
        if (eg->oom) {
            rc = ts_error_set(err, TS_ERR_NOMEM, "out of memory rebuilding the e-graph");
            break;
        }
        if (node_stop) {
            st->stop = "node limit";
            break;
        }
        if (cut || timed_out) {
            st->stop = "time limit";
            break;
        }
        if (!changed && eg->live_nodes == nodes_before && !mb.full) {
            st->stop = "saturated";
            break;
        }
    }
    eg->max_elems = saved_elems;
    free(mb.m);
    free(cp);
    free(pool);
    st->nodes = eg->live_nodes;
    st->classes = eg->live_classes;
    return rc;
}
