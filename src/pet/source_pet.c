/* PET as a source of the optimize pipeline (src/opt/source.h).  For each
 * convolution inside a multi-linear subprogram of the graph, mutants are
 * generated (Algorithm 1), checked box by box in F_p (Theorems 1 and 2),
 * corrected where they differ, checked again, and each survivor is
 * proposed as a rewrite of the whole graph; the driver costs them with
 * the measured cost model and searches (PET's Algorithm 2 top-K heap is
 * the driver's frontier).
 *
 * The check runs on the program with its channels shrunk (2 per group in
 * and out): the mutants reorganize batch and space only and carry the
 * channels along, so the boxes, the failing ones and the corrections are
 * the same at any channel count, and the F_p runs stay small.  The mutant
 * that passed is then rebuilt at full size, corrected on the same boxes,
 * and that program is compared with the original by the fast runtime on
 * random floats before it is proposed (docs/pet.md, "Checking at full
 * size").  Results are cached per program (operator, attributes, shapes),
 * so a convolution met again in another graph of the search costs nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "opt/check.h"
#include "opt/source.h"
#include "pet/pet.h"

#define PET_TESTS 2      /* t: a wrong box passes with probability <= (d/p)^2 */
#define PET_DEPTH 4      /* operators per mutant */
#define PET_KEEP 16      /* top K mutants by predicted cost */
#define PET_MAX_FRAC 0.25 /* corrections recompute at most this share of the output */

typedef struct found {
    ts_graph *prog; /* corrected mutant at full size, over the node's program inputs */
    char what[72];
    /* The driver costed it above the graph it rewrote (alone / at every
     * occurrence at once): a mutant's gain depends on its program, the
     * cache key, hardly on the rest of the graph, so it is not proposed
     * that way again (source.h, `gain`). */
    bool loses_one, loses_all;
} found;

typedef struct entry {
    uint64_t key;
    found *f;
    int n;
} entry;

typedef struct pet_state {
    const ts_source_env *env;
    entry *cache;
    int ncache;
    int checked, passed, corrected, rejected; /* mutants, over the run */
    /* the driver's side while propose() runs: checking a program's mutants
     * at full size takes seconds on CSRNet, and a search that overruns its
     * time limit leaves the keep decision no time to measure */
    ts_source_emit *emit;
} pet_state;

/* Time is up or a stop was asked: a program's remaining mutants are not
 * checked (its cache entry stays partial; no graph follows a stop). */
static bool stopping(const pet_state *s)
{
    return s->emit && s->emit->stopped(s->emit);
}

static ts_status pet_open(const ts_source_env *env, void **out, ts_error *err)
{
    pet_state *s = calloc(1, sizeof *s);
    if (!s) return ts_error_set(err, TS_ERR_NOMEM, "out of memory opening the PET source");
    s->env = env;
    *out = s;
    return TS_OK;
}

static void pet_close(void *state)
{
    pet_state *s = state;
    if (!s) return;
    for (int i = 0; i < s->ncache; i++) {
        for (int k = 0; k < s->cache[i].n; k++) ts_graph_free(s->cache[i].f[k].prog);
        free(s->cache[i].f);
    }
    free(s->cache);
    free(s);
}

static void pet_describe(void *state, char *buf, size_t n)
{
    (void)state;
    snprintf(buf, n,
             "mutants of each convolution in a multi-linear subprogram (depth %d, top %d by predicted cost) and of "
             "each AveragePool -> 1x1 conv pair, %d F_p tests per box, corrections of at most %.0f%% of an output",
             PET_DEPTH, PET_KEEP, PET_TESTS, 100 * PET_MAX_FRAC);
}

/* p0 with 2 channels per group in and out (weights are program inputs,
 * so only shapes change). */
static ts_graph *shrink(const ts_graph *p0, ts_error *err)
{
    int cn = -1;
    for (int i = 0; i < p0->nnodes; i++)
        if (!p0->nodes[i].dead) cn = i;
    const ts_node *n = &p0->nodes[cn];
    const ts_conv_attrs *a = n->attrs;
    int64_t G = a->group;
    const ts_shape *xs = &p0->values[n->inputs[0]].shape, *ws = &p0->values[n->inputs[1]].shape;
    int64_t cg = xs->dims[1] / G < 2 ? xs->dims[1] / G : 2, fg = ws->dims[0] / G < 2 ? ws->dims[0] / G : 2;
    ts_graph *q = ts_graph_new("pet-small", p0->opset);
    if (!q) return NULL;
    int ins[3] = {-1, -1, -1};
    for (int k = 0; k < p0->ninputs; k++) {
        const ts_value *v = &p0->values[p0->inputs[k]];
        ts_shape s = v->shape;
        int slot = -1;
        for (int i = 0; i < n->ninputs && i < 3; i++)
            if (n->inputs[i] == p0->inputs[k]) slot = i;
        if (slot == 0) s.dims[1] = cg * G;
        if (slot == 1) s.dims[0] = fg * G, s.dims[1] = cg;
        if (slot == 2) s.dims[0] = fg * G;
        int id = ts_graph_add_input(q, v->name, v->dtype, &s, err);
        if (id < 0) goto fail;
        for (int i = 0; i < n->ninputs && i < 3; i++)
            if (n->inputs[i] == p0->inputs[k]) ins[i] = id;
    }
    if (ins[0] < 0 || ins[1] < 0) {
        ts_error_set(err, TS_ERR_UNSUPPORTED, "PET: convolution with a constant input");
        goto fail;
    }
    int out = ts_pet_node_like(q, p0, cn, NULL, ins, n->ninputs, err);
    if (out < 0 || ts_graph_add_output(q, out, err)) goto fail;
    return q;
fail:
    ts_graph_free(q);
    return NULL;
}

static bool push_found(entry *e, ts_graph *prog, const char *what)
{
    found *f = realloc(e->f, sizeof *f * (size_t)(e->n + 1));
    if (!f) return false;
    e->f = f;
    f[e->n] = (found){.prog = prog};
    snprintf(f[e->n].what, sizeof f[e->n].what, "%s", what);
    e->n++;
    return true;
}

/* p with every input but the first (the convolution's data input) made a
 * constant of random values, the same for the same seed, and weight-only
 * work folded: the full-size float check then runs the convolutions the
 * way the written model does, on the fast kernels (a weight that is a
 * runtime input sends a convolution to the reference kernel, seconds at
 * full size).  NULL out of memory. */
static ts_graph *with_weights(const ts_graph *p, uint64_t seed, ts_error *err)
{
    ts_graph *q = ts_graph_copy(p);
    if (!q) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory in the PET source");
        return NULL;
    }
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 5;
    for (int k = 1; k < q->ninputs; k++) {
        ts_value *v = &q->values[q->inputs[k]];
        ts_tensor *t = ts_tensor_new(v->dtype, &v->shape, err);
        if (!t) {
            ts_graph_free(q);
            return NULL;
        }
        ts_tensor_fill_random(t, &rng, -1, 1);
        v->constant = t;
    }
    if (q->ninputs > 1) q->ninputs = 1;
    if (ts_graph_fold_constants(q, err) < 0) {
        ts_graph_free(q);
        return NULL;
    }
    return q;
}

/* The full-size corrected program fc against p0 by the fast runtime on
 * random floats, weights included (with_weights). */
static bool full_size_ok(const ts_graph *p0, const ts_graph *fc, uint64_t seed, ts_error *err)
{
    ts_graph *a = with_weights(p0, seed, err), *b = a ? with_weights(fc, seed, err) : NULL;
    double worst = 1e30;
    bool ok = b && !ts_opt_check(a, b, seed, &worst, err) && worst <= 1;
    ts_graph_free(a);
    ts_graph_free(b);
    return ok;
}

/* Mutate, check, correct, check again: fills e with the survivors. */
static ts_status mutate(pet_state *s, const ts_graph *p0, entry *e, ts_error *err)
{
    ts_graph *small = shrink(p0, err);
    if (!small) return err->code;
    ts_pet_gen_opts go = {.depth = PET_DEPTH, .keep = PET_KEEP};
    ts_pet_mutant *ms = NULL, *mf = NULL;
    int nms = 0, nmf = 0;
    ts_status st = ts_pet_mutants(small, &go, &ms, &nms, err);
    ts_pet_gen_opts all = {.depth = PET_DEPTH, .keep = 1 << 20};
    if (!st) st = ts_pet_mutants(p0, &all, &mf, &nmf, err);
    uint64_t seed = s->env && s->env->opts ? s->env->opts->seed : 1;
    for (int i = 0; i < nms && !st && !stopping(s); i++) {
        ts_pet_verdict v;
        ts_error e2 = {0};
        s->checked++;
        if (ts_pet_check(small, ms[i].prog, PET_TESTS, seed + (uint64_t)i, &v, &e2)) {
            if (e2.code == TS_ERR_NOMEM) st = ts_error_set(err, TS_ERR_NOMEM, "%s", e2.msg);
            s->rejected++;
            continue;
        }
        int ncorr = 0;
        ts_graph *cs = ts_pet_correct(small, ms[i].prog, &v, PET_MAX_FRAC, &ncorr, &e2);
        bool ok = cs != NULL;
        if (ok) {
            /* the corrected program, checked as PET checks: every box, then
             * every position in F_p, then floats */
            ts_pet_verdict v2;
            bool eq = false;
            double fe = 1e30;
            ok = !ts_pet_check(small, cs, PET_TESTS, seed + 100, &v2, &e2) && v2.nfail == 0 &&
                 !ts_pet_equal_modp(small, cs, 1, seed + 200, &eq, &e2) && eq &&
                 !ts_pet_float_error(small, cs, seed + 300, &fe, &e2) && fe <= 1;
            if (v2.boxes) ts_pet_verdict_free(&v2);
        }
        ts_graph_free(cs);
        const ts_graph *full = NULL;
        for (int k = 0; ok && k < nmf && !full; k++)
            if (!strcmp(mf[k].what, ms[i].what)) full = mf[k].prog;
        /* the full-size check runs the program at the model's shapes
         * (seconds on CSRNet under load): not started once time is up */
        ts_graph *fc = ok && full && !stopping(s) ? ts_pet_correct(p0, full, &v, 1.0, &ncorr, &e2) : NULL;
        if (fc && full_size_ok(p0, fc, seed, &e2)) {
            char what[72];
            snprintf(what, sizeof what, "%.64s%s", ms[i].what, v.nfail ? "+corr" : "");
            if (!push_found(e, fc, what)) {
                ts_graph_free(fc);
                st = ts_error_set(err, TS_ERR_NOMEM, "out of memory in the PET source");
            }
            if (v.nfail) s->corrected++;
            else s->passed++;
        } else {
            ts_graph_free(fc);
            s->rejected++;
        }
        ts_pet_verdict_free(&v);
    }
    ts_pet_mutants_free(ms, nms);
    ts_pet_mutants_free(mf, nmf);
    ts_graph_free(small);
    return st;
}

/* Mutants of a two-operator program (an AveragePool and a pointwise Conv,
 * in either order, commute.c): generated on a copy with at most 3
 * channels in and out (the operators act on channels and on space
 * separately, so which boxes agree does not depend on the counts),
 * checked box by box, then every position in F_p and in floats; a mutant
 * with a failing box is dropped (corrections are for one window
 * operator).  The survivor is rebuilt at full size and compared with the
 * original by the fast runtime, as for single convolutions. */
static ts_status mutate_pair(pet_state *s, const ts_graph *p0, entry *e, ts_error *err)
{
    int pool = -1, conv = -1, map[3], nmap = 0;
    for (int i = 0; i < p0->nnodes; i++)
        if (!p0->nodes[i].dead) *(p0->nodes[i].op == &ts_op_avgpool ? &pool : &conv) = i;
    if (pool < 0 || conv < 0) return TS_OK;
    int64_t C = p0->values[p0->nodes[conv].inputs[1]].shape.dims[1];
    int64_t F = p0->values[p0->nodes[conv].inputs[1]].shape.dims[0];
    int64_t c = C < 3 ? C : 3, f = F < 3 ? F : 3;
    if (C != F && c == f) f = c > 1 ? c - 1 : c + 1; /* keep "C equals F" as it is: it decides which Adds fit */
    ts_graph *small = ts_pet_pair_program(p0, pool, conv, c, f, map, &nmap, err);
    if (!small) return err->code;
    ts_pet_mutant *ms = NULL, *mf = NULL;
    int nms = 0, nmf = 0;
    ts_status st = ts_pet_commute_mutants(small, &ms, &nms, err);
    if (!st) st = ts_pet_commute_mutants(p0, &mf, &nmf, err);
    uint64_t seed = s->env && s->env->opts ? s->env->opts->seed : 1;
    double base = ts_pet_predict(p0);
    for (int i = 0; i < nms && !st && !stopping(s); i++) {
        ts_pet_verdict v;
        ts_error e2 = {0};
        bool eq = false;
        double fe = 1e30;
        s->checked++;
        if (ts_pet_check(small, ms[i].prog, PET_TESTS, seed + (uint64_t)i, &v, &e2)) {
            if (e2.code == TS_ERR_NOMEM) st = ts_error_set(err, TS_ERR_NOMEM, "%s", e2.msg);
            s->rejected++;
            continue;
        }
        bool ok = v.nfail == 0 && !ts_pet_equal_modp(small, ms[i].prog, 1, seed + 200, &eq, &e2) && eq &&
                  !ts_pet_float_error(small, ms[i].prog, seed + 300, &fe, &e2) && fe <= 1;
        ts_pet_verdict_free(&v);
        /* an equivalent program predicted to cost more (the original
         * order with the bias as an extra Add) is not proposed */
        const ts_graph *full = NULL;
        for (int k = 0; ok && k < nmf && !full; k++)
            if (!strcmp(mf[k].what, ms[i].what) && mf[k].cost < base) full = mf[k].prog;
        ts_graph *fc = full && !stopping(s) ? ts_graph_copy(full) : NULL; /* its full-size check takes seconds */
        if (fc && full_size_ok(p0, fc, seed, &e2)) {
            if (!push_found(e, fc, ms[i].what)) {
                ts_graph_free(fc);
                st = ts_error_set(err, TS_ERR_NOMEM, "out of memory in the PET source");
            }
            s->passed++;
        } else {
            ts_graph_free(fc);
            s->rejected++;
        }
    }
    ts_pet_mutants_free(ms, nms);
    ts_pet_mutants_free(mf, nmf);
    ts_graph_free(small);
    return st;
}

static entry *lookup(pet_state *s, const ts_graph *p0, ts_error *err)
{
    uint64_t key = ts_graph_hash(p0);
    for (int i = 0; i < s->ncache; i++)
        if (s->cache[i].key == key) return &s->cache[i];
    entry *c = realloc(s->cache, sizeof *c * (size_t)(s->ncache + 1));
    if (!c) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory in the PET source");
        return NULL;
    }
    s->cache = c;
    entry *e = &c[s->ncache++];
    *e = (entry){.key = key};
    int live = 0;
    for (int i = 0; i < p0->nnodes; i++) live += !p0->nodes[i].dead;
    if (live == 2 ? mutate_pair(s, p0, e, err) : mutate(s, p0, e, err)) return NULL;
    return e;
}

/* One convolution of the graph being expanded: its program's cache
 * entry and how the program's inputs map onto the graph's values. */
typedef struct site {
    int node, ei; /* ei: the cache entry (the cache may move while it grows) */
    int extra[2]; /* a two-operator program's first node and a Pad of zeros between, dead once spliced; -1 */
    entry *e;
    int map[16];
} site;

/* Splices found program f in place of each site of g (a copy), rewiring a
 * later site that reads an earlier one's output; folds the weight-only
 * work.  NULL when it does not fit (not an error). */
static ts_graph *rewrite(const ts_graph *g, site *const *sites, int n, int k, ts_error *err)
{
    ts_graph *ng = ts_graph_copy(g);
    ts_error e2 = {0};
    if (!ng) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory in the PET source");
        return NULL;
    }
    int olds[64], news[64], nr = 0;
    for (int i = 0; i < n && i < 64; i++) {
        int map[16];
        memcpy(map, sites[i]->map, sizeof map);
        for (int q = 0; q < 16; q++)
            for (int r = 0; r < nr; r++)
                if (map[q] == olds[r]) map[q] = news[r];
        int old = ng->nodes[sites[i]->node].outputs[0];
        int neu = ts_pet_splice(ng, sites[i]->node, sites[i]->e->f[k].prog, map, &e2);
        if (neu < 0) {
            ts_graph_free(ng);
            return NULL;
        }
        for (int x = 0; x < 2; x++)
            if (sites[i]->extra[x] >= 0) ng->nodes[sites[i]->extra[x]].dead = true;
        olds[nr] = old, news[nr++] = neu;
    }
    ts_graph_compact(ng);
    /* post-optimizations: weight-only work (a weight's reshape, slice,
     * block-diagonal) is precomputed; a layout this mutant undoes that a
     * neighbouring one did (across a Relu) is removed */
    if (ts_graph_fold_constants(ng, &e2) < 0 || ts_pet_cancel_layouts(ng, &e2) < 0 || ts_graph_validate(ng, &e2)) {
        ts_graph_free(ng);
        return NULL;
    }
    return ng;
}

/* The mutants' names must outlive the proposal (source.h): they point
 * into the cache, which lives until close.  Each survivor is proposed at
 * every convolution of its program, and -- where the program occurs more
 * than once (ResNeXt's 3x3 convolutions of one stage) -- at all of them in
 * one candidate, counted as that many transformations: the search would
 * otherwise spend a step and a costing per occurrence. */
static ts_status pet_propose(void *state, const ts_graph *g, ts_source_emit *emit, ts_error *err)
{
    pet_state *s = state;
    s->emit = emit;
    if (g->opset < 13) return TS_OK; /* Slice/Pad/Reshape take their parameters as inputs from 13 on */
    ts_pet_split sp;
    if (ts_pet_split_graph(g, &sp, err)) return err->code;
    ts_status st = TS_OK;
    site *sites = calloc(2 * (size_t)g->nnodes + 1, sizeof *sites);
    site **same = calloc(2 * (size_t)g->nnodes + 1, sizeof *same);
    int nsites = 0;
    if (!sites || !same) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory in the PET source");
    for (int ni = 0; ni < g->nnodes && !st; ni++) {
        if (sp.sub_of[ni] < 0 || g->nodes[ni].op != &ts_op_conv) continue;
        if (g->values[g->nodes[ni].inputs[0]].constant) continue;
        if (emit->stopped(emit)) break;
        site *t = &sites[nsites];
        int nmap = 0;
        ts_error e2 = {0};
        for (int q = 0; q < 16; q++) t->map[q] = -1;
        ts_graph *p0 = ts_pet_program_of_node(g, ni, t->map, &nmap, &e2);
        if (!p0) continue;
        t->node = ni;
        t->extra[0] = t->extra[1] = -1;
        entry *e = lookup(s, p0, err);
        ts_graph_free(p0);
        if (!e) st = err->code;
        else if (e->n) t->ei = (int)(e - s->cache), nsites++;
        /* and with the AveragePool it reads or that reads it, as one
         * program (commute.c); the pair's last node is the one replaced */
        int mid = -1, pool = st ? -1 : ts_pet_pool_conv_pair(g, sp.sub_of, ni, &mid);
        if (pool < 0) continue;
        bool pool_first = g->nodes[ni].inputs[0] == g->nodes[pool].outputs[0];
        t = &sites[nsites];
        for (int q = 0; q < 16; q++) t->map[q] = -1;
        if (!(p0 = ts_pet_pair_program(g, pool, ni, 0, 0, t->map, &nmap, &e2))) continue;
        t->node = pool_first ? ni : pool;
        t->extra[0] = pool_first ? pool : ni;
        t->extra[1] = mid;
        e = lookup(s, p0, err);
        ts_graph_free(p0);
        if (!e) st = err->code;
        else if (e->n) t->ei = (int)(e - s->cache), nsites++;
    }
    for (int i = 0; i < nsites; i++) sites[i].e = &s->cache[sites[i].ei];
    bool more = true;
    /* every occurrence of a program at once */
    for (int i = 0; i < nsites && !st && more; i++) {
        int n = 0;
        bool first = true;
        for (int j = 0; j < nsites; j++) {
            if (sites[j].e != sites[i].e) continue;
            first &= j >= i;
            same[n++] = &sites[j];
        }
        if (!first || n < 2) continue;
        for (int k = 0; k < sites[i].e->n && more && !st; k++) {
            found *f = &sites[i].e->f[k];
            if (f->loses_all) continue;
            ts_graph *ng = rewrite(g, same, n > 64 ? 64 : n, k, err);
            if (!ng && err->code) st = err->code;
            else if (ng && (more = emit->fn(emit, ng, f->what, n > 64 ? 64 : n))) f->loses_all = emit->gain <= 0;
        }
    }
    /* and each occurrence alone */
    for (int i = 0; i < nsites && !st && more; i++) {
        site *one = &sites[i];
        for (int k = 0; k < one->e->n && more && !st; k++) {
            found *f = &one->e->f[k];
            if (f->loses_one) continue;
            ts_graph *ng = rewrite(g, &one, 1, k, err);
            if (!ng && err->code) st = err->code;
            else if (ng && (more = emit->fn(emit, ng, f->what, 1))) f->loses_one = emit->gain <= 0;
        }
    }
    free(sites);
    free(same);
    ts_pet_split_free(&sp);
    s->emit = NULL;
    return st;
}

const ts_source ts_source_pet = {
    .name = "pet",
    .justification = "PET mutants checked box by box in F_p (Theorems 1 and 2), corrected, re-checked",
    .open = pet_open,
    .propose = pet_propose,
    .describe = pet_describe,
    .close = pet_close,
    .tidy = ts_pet_cancel_layouts, /* layout.c: einnet's candidates use it */
};
