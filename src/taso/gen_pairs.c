/* Candidate pairs from graph records (paper section 3.1 and TASO's
 * generator): fingerprint classes of shape set 0, duplicate DAGs removed,
 * classes split by the fingerprint of shape set 1, TASO's cheap syntactic
 * rejections, then the float test.  Everything here works on the 24-byte
 * records by replaying their operators on concrete inputs: at 4 operators
 * there are millions of graphs in classes, and building expression trees
 * for each (as the pipeline did before) cost more than the arithmetic.
 * Trees are built only for the pairs that pass (gen_prune.c). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "taso/gen.h"
#include "util/clock.h"

#define TOL 1e-5
#define RPOOL (2 * GEN_MAX_OPS)

static int nouts(ts_rop op)
{
    return op == TS_ROP_SPLIT0 ? 2 : 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Order-independent combination of output hashes. */
static uint64_t combine(uint64_t *hs, int n)
{
    qsort(hs, (size_t)n, sizeof hs[0], cmp_u64);
    uint64_t h = 0x243f6a8885a308d3ull;
    for (int i = 0; i < n; i++) h = ts_hash_fmix64(h ^ hs[i]) + (uint64_t)i;
    return h;
}

/* Pool entries (op outputs, numbered from 0) no operator of g consumes. */
static int graph_outputs(const gen_world *w, const gen_graph *g, int *out)
{
    bool used[RPOOL] = {0};
    int np = 0;
    for (int k = 0; k < g->nops; k++) {
        const gen_variant *var = &w->variant[g->op[k][0]];
        int nargs = ts_rop_info(var->op)->nargs;
        for (int a = 0; a < nargs; a++)
            if (g->op[k][1 + a] >= w->nvar) used[g->op[k][1 + a] - w->nvar] = true;
        np += nouts(var->op);
    }
    int n = 0;
    for (int i = 0; i < np; i++)
        if (!used[i]) out[n++] = i;
    return n;
}

/* ---- replaying records ---- */

/* A graph's operators evaluated in one shape set and domain.  Consecutive
 * replays share the operators of their common prefix (graphs in
 * enumeration order share most of it). */
typedef struct replay {
    const gen_world *w;
    int set;
    gen_domain dom;
    const gen_tensor *vars;
    gen_tensor *pool;        /* RPOOL */
    int depth;               /* operators of `op` whose outputs are in pool */
    int np[GEN_MAX_OPS + 1]; /* pool entries after k operators */
    uint8_t op[GEN_MAX_OPS][3];
    uint64_t evals; /* operators evaluated (the prefix shared with the last graph is not) */
} replay;

static bool replay_init(replay *r, const gen_world *w, int set, gen_domain dom)
{
    memset(r, 0, sizeof *r);
    r->w = w;
    r->set = set;
    r->dom = dom;
    bool m = dom == GEN_MODP;
    r->vars = set ? (m ? w->var2_modp : w->var2_f64) : (m ? w->var_modp : w->var_f64);
    r->pool = malloc(RPOOL * sizeof *r->pool);
    return r->pool != NULL;
}

static bool replay_run(replay *r, const gen_graph *g)
{
    const gen_world *w = r->w;
    int k = 0;
    while (k < r->depth && k < g->nops && !memcmp(r->op[k], g->op[k], 3)) k++;
    r->depth = k;
    const gen_shapes *sh = &gen_shape_sets[r->set];
    for (; k < g->nops; k++) {
        const gen_variant *var = &w->variant[g->op[k][0]];
        int nargs = ts_rop_info(var->op)->nargs;
        const gen_tensor *args[2] = {NULL, NULL};
        for (int a = 0; a < nargs; a++) {
            int idx = g->op[k][1 + a];
            args[a] = idx < w->nvar ? &r->vars[idx] : &r->pool[idx - w->nvar];
        }
        int base = r->np[k], no = nouts(var->op);
        r->pool[base].dom = r->dom;
        if (no > 1) r->pool[base + 1].dom = r->dom;
        r->evals++;
        if (!gen_apply_in(sh, var->op, &var->p, args[0], args[1], &r->pool[base], no > 1 ? &r->pool[base + 1] : NULL))
            return false;
        memcpy(r->op[k], g->op[k], 3);
        r->np[k + 1] = base + no;
        r->depth = k + 1;
    }
    return true;
}

/* Fingerprint of g's outputs in the replay's set (mod p); a fixed value
 * when an operator's shapes do not fit there. */
static uint64_t replay_fp(replay *r, const gen_graph *g)
{
    if (!replay_run(r, g)) return 0x5bd1e9955bd1e995ull;
    int out[RPOOL];
    uint64_t hs[RPOOL];
    int n = graph_outputs(r->w, g, out);
    for (int i = 0; i < n; i++) hs[i] = gen_tensor_hash(&r->pool[out[i]]);
    return combine(hs, n);
}

/* ---- syntactic checks on records ---- */

/* Hash of the DAG a graph computes, independent of the order its
 * operators were enumerated in and of the order of ewadd/ewmul inputs. */
static uint64_t dag_hash(const gen_world *w, const gen_graph *g)
{
    uint64_t h[64 + RPOOL];
    for (int v = 0; v < w->nvar; v++) h[v] = ts_hash_fmix64((uint64_t)v + 0x1234567ull);
    int np = w->nvar;
    for (int k = 0; k < g->nops; k++) {
        const gen_variant *var = &w->variant[g->op[k][0]];
        const ts_ropinfo *in = ts_rop_info(var->op);
        int nargs = in->nargs;
        uint64_t a = nargs >= 1 ? h[g->op[k][1]] : 0, b = nargs >= 2 ? h[g->op[k][2]] : 0;
        if (in->commutative && a > b) {
            uint64_t t = a;
            a = b;
            b = t;
        }
        uint64_t x = ts_hash_fmix64(ts_hash_fmix64((uint64_t)g->op[k][0] * 0x9e3779b97f4a7c15ull + 7) ^ a);
        x = ts_hash_fmix64(x + b * 0xbf58476d1ce4e5b9ull);
        if (nouts(var->op) > 1) {
            h[np++] = ts_hash_fmix64(x ^ 1);
            h[np++] = ts_hash_fmix64(x ^ 2);
        } else {
            h[np++] = x;
        }
    }
    int out[RPOOL];
    uint64_t hs[RPOOL];
    int n = graph_outputs(w, g, out);
    for (int i = 0; i < n; i++) hs[i] = h[w->nvar + out[i]];
    return combine(hs, n);
}

/* TASO's find_same_subgraph (jiazhihao/TASO src/generator/generator.cc):
 * both graphs apply the same operator to the same input variables.  Such a
 * pair is the smaller rule with that operator's output as a fresh input
 * (the paper's common-subgraph pruning), or not a rule of its own.  TASO
 * also counts constants (operators without inputs) as common; we do not:
 * a constant is no computation to share. */
static bool same_subgraph(const gen_world *w, const gen_graph *a, const gen_graph *b)
{
    for (int i = 0; i < a->nops; i++)
        for (int j = 0; j < b->nops; j++) {
            if (a->op[i][0] != b->op[j][0]) continue;
            int nargs = ts_rop_info(w->variant[a->op[i][0]].op)->nargs;
            bool same = nargs > 0;
            for (int t = 0; t < nargs && same; t++)
                same = a->op[i][1 + t] == b->op[j][1 + t] && a->op[i][1 + t] < w->nvar;
            if (same) return true;
        }
    return false;
}

/* TASO's find_same_supergraph: the last operators are the same and differ
 * in at most one input (an input computed by an operator counts as
 * differing): f(A, x) = f(B, x) follows from A = B, a smaller pair.
 * Unlike TASO we also require A = B (equal mod p in shape set 0; ra and rb
 * hold a's and b's operators replayed there): TASO's check alone drops
 * rules that hold although A != B, such as conv(i, enlarge(q)) = conv(i, q)
 * (A21), which no smaller pair implies. */
static bool same_supergraph(const gen_world *w, const gen_graph *a, const gen_graph *b, const replay *ra,
                            const replay *rb)
{
    const uint8_t *la = a->op[a->nops - 1], *lb = b->op[b->nops - 1];
    if (la[0] != lb[0]) return false;
    int nargs = ts_rop_info(w->variant[la[0]].op)->nargs, diff = 0, at = -1;
    for (int t = 0; t < nargs; t++)
        if (la[1 + t] != lb[1 + t] || la[1 + t] >= w->nvar) {
            diff++;
            at = t;
        }
    if (diff > 1) return false;
    if (diff == 0) return true;
    int ia = la[1 + at], ib = lb[1 + at];
    const gen_tensor *ta = ia < w->nvar ? &w->var_modp[ia] : &ra->pool[ia - w->nvar];
    const gen_tensor *tb = ib < w->nvar ? &w->var_modp[ib] : &rb->pool[ib - w->nvar];
    return gen_tensor_hash(ta) == gen_tensor_hash(tb);
}

/* ---- the float test ---- */

typedef struct tester {
    replay m0, f0, f1; /* mod p set 0 (output order), floats set 0 and 1 */
    int n, out[RPOOL]; /* outputs, ordered by mod-p hash */
} tester;

static bool tester_init(tester *t, const gen_world *w)
{
    bool a = replay_init(&t->m0, w, 0, GEN_MODP), b = replay_init(&t->f0, w, 0, GEN_F64),
         c = replay_init(&t->f1, w, 1, GEN_F64);
    return a && b && c;
}

static void tester_free(tester *t)
{
    free(t->m0.pool);
    free(t->f0.pool);
    free(t->f1.pool);
}

/* Replays g in floats (both sets); outputs ordered by their mod-p hash in
 * set 0, the order gen_graph_terms gives them (equal fingerprints: equal
 * outputs sit at equal positions). */
static bool tester_run(tester *t, const gen_graph *g)
{
    if (!replay_run(&t->m0, g) || !replay_run(&t->f0, g) || !replay_run(&t->f1, g)) return false;
    return true;
}

/* Orders g's outputs (after a replay) by their mod-p hash in set 0. */
static void tester_order(tester *t, const gen_graph *g)
{
    uint64_t hs[RPOOL];
    t->n = graph_outputs(t->m0.w, g, t->out);
    for (int i = 0; i < t->n; i++) {
        hs[i] = gen_tensor_hash(&t->m0.pool[t->out[i]]);
        for (int j = i; j > 0 && hs[j] < hs[j - 1]; j--) {
            uint64_t th = hs[j];
            hs[j] = hs[j - 1];
            hs[j - 1] = th;
            int to = t->out[j];
            t->out[j] = t->out[j - 1];
            t->out[j - 1] = to;
        }
    }
}

static bool tester_close(const tester *a, const tester *b)
{
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
        if (!gen_tensor_close(&a->f0.pool[a->out[i]], &b->f0.pool[b->out[i]], TOL) ||
            !gen_tensor_close(&a->f1.pool[a->out[i]], &b->f1.pool[b->out[i]], TOL))
            return false;
    return true;
}

/* ---- the pipeline ---- */

typedef struct pairbuf {
    size_t *v, n, cap;
    bool oom;
} pairbuf;

static void pair_add(pairbuf *b, size_t x, size_t y)
{
    if (b->n + 2 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 1024;
        size_t *nv = realloc(b->v, nc * sizeof *nv);
        if (!nv) {
            b->oom = true;
            return;
        }
        b->v = nv;
        b->cap = nc;
    }
    b->v[b->n++] = x;
    b->v[b->n++] = y;
}

static int cmp_pair(const void *pa, const void *pb)
{
    const size_t *a = pa, *b = pb;
    if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
    return a[1] < b[1] ? -1 : a[1] > b[1];
}

/* Drops the graphs marked dead and every class (run of equal fp) left
 * with fewer than two graphs; returns the new count. */
static size_t compact(gen_graph *gs, size_t ng, const uint8_t *dead)
{
    size_t k = 0;
    for (size_t i = 0; i < ng;) {
        size_t j = i + 1, live = !dead[i];
        while (j < ng && gs[j].fp == gs[i].fp) live += !dead[j++];
        if (live >= 2)
            for (size_t q = i; q < j; q++)
                if (!dead[q]) gs[k++] = gs[q];
        i = j;
    }
    return k;
}

/* Class boundaries (runs of equal fp): starts, plus ng at the end. */
static size_t *class_bounds(const gen_graph *gs, size_t ng, size_t *ncls)
{
    size_t n = 0;
    for (size_t i = 0; i < ng; i++) n += i == 0 || gs[i].fp != gs[i - 1].fp;
    size_t *b = malloc((n + 1) * sizeof *b);
    if (!b) return NULL;
    n = 0;
    for (size_t i = 0; i < ng; i++)
        if (i == 0 || gs[i].fp != gs[i - 1].fp) b[n++] = i;
    b[n] = ng;
    *ncls = n;
    return b;
}

static int cmp_dag(const void *pa, const void *pb)
{
    const uint64_t *a = pa, *b = pb;
    if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
    return a[1] < b[1] ? -1 : a[1] > b[1];
}

ts_status gen_pairs(const gen_world *w, const gen_config *cfg, gen_graph **gsp, size_t *ngp, size_t **pairp,
                    size_t *npairp, gen_stats *st, ts_error *err)
{
    gen_graph *gs = *gsp;
    size_t ng = *ngp;
    int threads = cfg->threads > 0 ? cfg->threads : 1;
    *pairp = NULL;
    *npairp = 0;

    /* 1. classes of shape set 0 with at least two graphs */
    for (size_t i = 0; i < ng;) {
        size_t j = i + 1;
        while (j < ng && gs[j].fp == gs[i].fp) j++;
        st->pairs1 += j - i - 1;
        i = j;
    }
    uint8_t *dead = calloc(ng ? ng : 1, 1);
    if (!dead) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    ng = compact(gs, ng, dead);
    if (cfg->progress && !cfg->dist) { /* several processes: local counts */
        fprintf(cfg->progress, "pairs, shape set 0 only      %12llu  (%zu graphs in classes)\n",
                (unsigned long long)st->pairs1, ng);
        fflush(cfg->progress);
    }

    /* 2. one graph per DAG in each class (the smallest record: classes are
     * sorted by gen_graph_cmp) */
    size_t ncls;
    size_t *cb = class_bounds(gs, ng, &ncls);
    if (!cb) {
        free(dead);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    memset(dead, 0, ng);
    bool oom = false;
#pragma omp parallel num_threads(threads)
    {
        size_t cap = 0;
        uint64_t *hv = NULL;
#pragma omp for schedule(dynamic, 64)
        for (size_t c = 0; c < ncls; c++) {
            size_t i = cb[c], m = cb[c + 1] - cb[c];
            if (m > cap) {
                free(hv);
                cap = m * 2;
                hv = malloc(cap * 2 * sizeof *hv);
                if (!hv) {
                    cap = 0;
#pragma omp atomic write
                    oom = true;
                    continue;
                }
            }
            for (size_t k = 0; k < m; k++) {
                hv[2 * k] = dag_hash(w, &gs[i + k]);
                hv[2 * k + 1] = k;
            }
            qsort(hv, m, 2 * sizeof *hv, cmp_dag);
            for (size_t k = 1; k < m; k++)
                if (hv[2 * k] == hv[2 * k - 2]) dead[i + hv[2 * k + 1]] = 1;
        }
        free(hv);
    }
    free(cb);
    if (oom) {
        free(dead);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < ng; i++) st->same_dag += dead[i];
    ng = compact(gs, ng, dead);
    free(dead);
    st->replayed = ng;
    if (cfg->progress && !cfg->dist) { /* several processes: local counts */
        fprintf(cfg->progress, "graphs dropped as same DAG   %12llu  (another order of one DAG)\n",
                (unsigned long long)st->same_dag);
        fprintf(cfg->progress, "graphs replayed on set 1     %12llu\n", (unsigned long long)st->replayed);
        fflush(cfg->progress);
    }

    /* 3. shape set 1: each graph left replayed in enumeration order (shared
     * prefixes evaluated once), its set-1 fingerprint folded into fp, and
     * each class re-sorted: a graph is paired only with graphs equal to it
     * in both sets (pairing with the class's smallest graph alone would
     * lose a true pair whenever that graph equals the others only in set 0) */
    double c0 = ts_clock_cpu_s();
    cb = class_bounds(gs, ng, &ncls);
    uint64_t *order = malloc((ng ? ng : 1) * sizeof *order);
    if (!cb || !order) {
        free(cb);
        free(order);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < ng; i++) order[i] = (uint64_t)gs[i].seq << 32 | i;
    qsort(order, ng, sizeof *order, cmp_u64);
    size_t nchunk = (size_t)threads * 64;
#pragma omp parallel num_threads(threads)
    {
        replay r;
        bool ok = replay_init(&r, w, 1, GEN_MODP);
        if (!ok) {
#pragma omp atomic write
            oom = true;
        }
#pragma omp for schedule(dynamic, 1)
        for (size_t ch = 0; ch < nchunk; ch++) {
            if (!ok) continue;
            r.depth = 0;
            size_t lo = ng * ch / nchunk, hi = ng * (ch + 1) / nchunk;
            for (size_t q = lo; q < hi; q++) {
                size_t i = (size_t)(order[q] & 0xffffffffu);
                /* written in place: other threads read other records only */
                gs[i].fp = ts_hash_fmix64(gs[i].fp ^ (replay_fp(&r, &gs[i]) * 0x9e3779b97f4a7c15ull));
            }
        }
#pragma omp atomic
        st->evals1 += r.evals;
        free(r.pool);
    }
    free(order);
    if (oom) {
        free(cb);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }

    double c1 = ts_clock_cpu_s();
    st->c_set1 = c1 - c0;
    /* 4. pairs: every graph of a class of both sets with the class's
     * smallest graph; TASO's syntactic rejections, then the float test */
    pairbuf *pb = calloc((size_t)threads, sizeof *pb);
    if (!pb) {
        free(cb);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    uint64_t npairs = 0, nsyn = 0, nfail = 0;
#pragma omp parallel num_threads(threads) reduction(+ : npairs, nsyn, nfail)
    {
        pairbuf *mine = &pb[omp_get_thread_num()];
        tester *t = calloc(2, sizeof *t);
        bool ok = t && tester_init(&t[0], w) && tester_init(&t[1], w);
        if (!ok) {
#pragma omp atomic write
            oom = true;
        }
#pragma omp for schedule(dynamic, 16)
        for (size_t c = 0; c < ncls; c++) {
            if (!ok) continue;
            size_t lo = cb[c], hi = cb[c + 1];
            qsort(gs + lo, hi - lo, sizeof *gs, gen_graph_cmp);
            for (size_t i = lo; i < hi;) {
                size_t j = i + 1;
                while (j < hi && gs[j].fp == gs[i].fp) j++;
                bool rep_ok = j - i >= 2 && tester_run(&t[0], &gs[i]);
                if (rep_ok) tester_order(&t[0], &gs[i]);
                for (size_t k = i + 1; k < j; k++) {
                    npairs++;
                    /* set 0 mod p first: cheap, and the supergraph check
                     * compares tensors there */
                    bool m_ok = rep_ok && replay_run(&t[1].m0, &gs[k]);
                    if (same_subgraph(w, &gs[i], &gs[k]) ||
                        (m_ok && same_supergraph(w, &gs[i], &gs[k], &t[0].m0, &t[1].m0))) {
                        nsyn++;
                        continue;
                    }
                    if (!m_ok || !tester_run(&t[1], &gs[k])) {
                        nfail++;
                        continue;
                    }
                    tester_order(&t[1], &gs[k]);
                    if (!tester_close(&t[0], &t[1])) {
                        nfail++;
                        continue;
                    }
                    pair_add(mine, i, k);
                }
                i = j;
            }
        }
        if (t && ok) {
            uint64_t e = t[0].m0.evals + t[0].f0.evals + t[0].f1.evals + t[1].m0.evals + t[1].f0.evals + t[1].f1.evals;
#pragma omp atomic
            st->evals_test += e;
        }
        if (t) {
            tester_free(&t[0]);
            tester_free(&t[1]);
        }
        free(t);
    }
    free(cb);
    st->c_tests = ts_clock_cpu_s() - c1;
    st->pairs = npairs;
    st->syntactic = nsyn;
    st->float_fail = nfail;
    size_t total = 0;
    for (int i = 0; i < threads; i++) {
        total += pb[i].n;
        oom = oom || pb[i].oom;
    }
    size_t *pairs = oom ? NULL : malloc((total ? total : 1) * sizeof *pairs);
    size_t k = 0;
    for (int i = 0; i < threads; i++) {
        if (pairs && pb[i].n) memcpy(pairs + k, pb[i].v, pb[i].n * sizeof *pairs);
        k += pb[i].n;
        free(pb[i].v);
    }
    free(pb);
    if (!pairs) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    /* independent of which thread found what */
    qsort(pairs, total / 2, 2 * sizeof *pairs, cmp_pair);
    *gsp = gs;
    *ngp = ng;
    *pairp = pairs;
    *npairp = total / 2;
    return TS_OK;
}
