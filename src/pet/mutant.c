/* The mutation generator (PET §4.1, Algorithm 1): a depth-first search
 * that grows programs one operator at a time over the original program's
 * inputs and keeps those whose output has the original's shape.  The
 * operators are PET's, instantiated for the program at hand:
 *
 *   - reshape & transpose as one compound operator (PET fuses such chains
 *     while mutating), in the four layouts its case studies use: two images
 *     side by side along the width and back (Figure 1), and the phase split
 *     of a dilation or stride into the batch and back (Figure 3);
 *   - the program's compute operator on any tensor of fitting shape, with
 *     its attributes as given or with the dilation taken out (a dilated
 *     convolution becomes a regular one, PET's single-operator mutants).
 *
 * Nothing here knows which combination is right: a wrong mutant (the
 * dilation dropped without reorganizing the input) has the right shape
 * and is generated like the others; the box check rejects it.  Pruning:
 * the compute operator appears once (as in the original), and a layout
 * operator is never followed by its own inverse (post-optimization would
 * remove the pair). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "pet/pet.h"

enum { RT_B2W, RT_W2B, RT_S2B, RT_B2S, RT_KINDS };
static const char *const rt_name[RT_KINDS] = {"b2w", "w2b", "s2b", "b2s"};
static const int rt_inverse[RT_KINDS] = {RT_W2B, RT_B2W, RT_B2S, RT_S2B};

/* Compound reshape & transpose on a 4-D NCHW tensor; -1 when it does not
 * apply (sizes not divisible) or on error. */
static int build_rt(ts_graph *p, int x, int kind, int64_t f, ts_error *err)
{
    const ts_shape *s = &p->values[x].shape;
    if (s->rank != 4 || f < 2) return -1;
    int64_t N = s->dims[0], C = s->dims[1], H = s->dims[2], W = s->dims[3];
    int64_t a[6], perm[6], b[4];
    int v;
    switch (kind) {
    case RT_B2W: /* [N,C,H,W] -> [N/f,C,H,f*W]: image i of a group at columns i*W.. */
        if (N % f) return -1;
        memcpy(a, (int64_t[]){N / f, f, C, H, W}, 5 * sizeof *a);
        memcpy(perm, (int64_t[]){0, 2, 3, 1, 4}, 5 * sizeof *perm);
        memcpy(b, (int64_t[]){N / f, C, H, f * W}, sizeof b);
        if ((v = ts_pet_reshape(p, x, a, 5, err)) < 0 || (v = ts_pet_transpose(p, v, perm, 5, err)) < 0) return -1;
        return ts_pet_reshape(p, v, b, 4, err);
    case RT_W2B: /* the inverse */
        if (W % f) return -1;
        memcpy(a, (int64_t[]){N, C, H, f, W / f}, 5 * sizeof *a);
        memcpy(perm, (int64_t[]){0, 3, 1, 2, 4}, 5 * sizeof *perm);
        memcpy(b, (int64_t[]){N * f, C, H, W / f}, sizeof b);
        if ((v = ts_pet_reshape(p, x, a, 5, err)) < 0 || (v = ts_pet_transpose(p, v, perm, 5, err)) < 0) return -1;
        return ts_pet_reshape(p, v, b, 4, err);
    case RT_S2B: /* [N,C,H,W] -> [f*f*N,C,H/f,W/f]: phase (i,j) = rows i, i+f, ... */
        if (H % f || W % f) return -1;
        memcpy(a, (int64_t[]){N, C, H / f, f, W / f, f}, sizeof a);
        memcpy(perm, (int64_t[]){3, 5, 0, 1, 2, 4}, sizeof perm);
        memcpy(b, (int64_t[]){f * f * N, C, H / f, W / f}, sizeof b);
        if ((v = ts_pet_reshape(p, x, a, 6, err)) < 0 || (v = ts_pet_transpose(p, v, perm, 6, err)) < 0) return -1;
        return ts_pet_reshape(p, v, b, 4, err);
    case RT_B2S: /* the inverse */
        if (N % (f * f)) return -1;
        memcpy(a, (int64_t[]){f, f, N / (f * f), C, H, W}, sizeof a);
        memcpy(perm, (int64_t[]){2, 3, 4, 0, 5, 1}, sizeof perm);
        memcpy(b, (int64_t[]){N / (f * f), C, H * f, W * f}, sizeof b);
        if ((v = ts_pet_reshape(p, x, a, 6, err)) < 0 || (v = ts_pet_transpose(p, v, perm, 6, err)) < 0) return -1;
        return ts_pet_reshape(p, v, b, 4, err);
    }
    return -1;
}

/* Attribute variants of the compute node: as given, and without its
 * dilation (pads divided by it, so a "same" convolution stays "same"). */
typedef struct variant {
    ts_conv_attrs conv;
    const char *name;
} variant;

static int variants_of(const ts_graph *p0, int cn, variant *out)
{
    const ts_node *n = &p0->nodes[cn];
    int k = 0;
    if (n->op != &ts_op_conv) return 0;
    const ts_conv_attrs *a = n->attrs;
    out[k++] = (variant){*a, "conv"};
    ts_conv_attrs u = *a;
    bool dilated = false, divisible = true;
    for (int d = 0; d < u.win.ndilations; d++) {
        int64_t dl = u.win.dilations[d];
        dilated |= dl > 1;
        for (int s = 0; s < 2 && d + s * u.win.ndilations < u.win.npads; s++) {
            int64_t *pd = &u.win.pads[d + s * u.win.ndilations];
            divisible &= *pd % dl == 0;
            *pd /= dl;
        }
        u.win.dilations[d] = 1;
    }
    if (dilated && divisible) out[k++] = (variant){u, "conv-undilated"};
    return k;
}

typedef struct gen {
    const ts_graph *p0;
    int cn, maxdepth, keep;
    const ts_shape *out_shape;
    variant var[4];
    int nvar;
    int64_t factors[4];
    int nfactors;
    uint64_t p0_hash;
    ts_pet_mutant *m;
    int n, cap;
    void *db;
    ts_error *err;
    bool failed;
} gen;

/* The predicted cost used to rank mutants: a roofline of 100 GFLOP/s and
 * 20 GB/s plus 2 us per operator (the driver costs the corrected graph
 * with its own model; this only orders the candidates). */
static double predict(const ts_graph *p)
{
    double ms = 0;
    for (int i = 0; i < p->nnodes; i++) {
        const ts_node *n = &p->nodes[i];
        if (n->dead || n->op == &ts_op_reshape) continue; /* a view */
        double flops = n->op->flops ? n->op->flops(n, p) : (double)ts_shape_numel(&p->values[n->outputs[0]].shape);
        double bytes = 0;
        for (int j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0) bytes += 4.0 * (double)ts_shape_numel(&p->values[n->inputs[j]].shape);
        for (int j = 0; j < n->noutputs; j++) bytes += 4.0 * (double)ts_shape_numel(&p->values[n->outputs[j]].shape);
        ms += 0.002 + (flops / 100e6 > bytes / 20e6 ? flops / 100e6 : bytes / 20e6);
    }
    return ms;
}

static void record(gen *s, const ts_graph *p, int cur, const char *what)
{
    ts_graph *c = ts_graph_copy(p);
    if (!c || ts_graph_add_output(c, cur, s->err)) {
        ts_graph_free(c);
        s->failed = true;
        return;
    }
    ts_graph_compact(c); /* drops the original's node, dead in the base */
    uint64_t h = ts_graph_hash(c);
    bool dup = h == s->p0_hash;
    for (int i = 0; i < s->n && !dup; i++) dup = ts_graph_hash(s->m[i].prog) == h;
    if (dup) {
        ts_graph_free(c);
        return;
    }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        ts_pet_mutant *m = realloc(s->m, sizeof *m * (size_t)cap);
        if (!m) {
            ts_graph_free(c);
            s->failed = true;
            return;
        }
        s->m = m;
        s->cap = cap;
    }
    ts_pet_mutant *m = &s->m[s->n++];
    m->prog = c;
    snprintf(m->what, sizeof m->what, "pet:%.56s", what);
    m->cost = predict(c);
}

static void dfs(gen *s, const ts_graph *p, int cur, int depth, bool used, int last_rt, int64_t last_f,
                const char *what)
{
    if (s->failed) return;
    if (used && ts_shape_eq(&p->values[cur].shape, s->out_shape)) record(s, p, cur, what);
    if (depth == s->maxdepth) return;
    char name[96];
    for (int k = 0; k < RT_KINDS; k++)
        for (int fi = 0; fi < s->nfactors; fi++) {
            int64_t f = s->factors[fi];
            if (last_rt >= 0 && rt_inverse[last_rt] == k && last_f == f) continue;
            ts_graph *np = ts_graph_copy(p);
            ts_error e = {0};
            int v = np ? build_rt(np, cur, k, f, &e) : -1;
            if (v >= 0) {
                snprintf(name, sizeof name, "%s%s%s%lld", what, *what ? "." : "", rt_name[k], (long long)f);
                dfs(s, np, v, depth + 1, used, k, f, name);
            }
            ts_graph_free(np);
        }
    if (used) return;
    const ts_node *cn = &s->p0->nodes[s->cn];
    for (int vi = 0; vi < s->nvar; vi++) {
        ts_graph *np = ts_graph_copy(p);
        ts_error e = {0};
        int ins[16];
        for (int i = 0; i < cn->ninputs; i++) ins[i] = cn->inputs[i]; /* p0's inputs are np's: same ids */
        ins[0] = cur;
        int v = np ? ts_pet_node_like(np, s->p0, s->cn, &s->var[vi].conv, ins, cn->ninputs, &e) : -1;
        if (v >= 0) {
            snprintf(name, sizeof name, "%s%s%s", what, *what ? "." : "", s->var[vi].name);
            dfs(s, np, v, depth + 1, true, -1, 0, name);
        }
        ts_graph_free(np);
    }
}

static int by_cost(const void *a, const void *b)
{
    double x = ((const ts_pet_mutant *)a)->cost, y = ((const ts_pet_mutant *)b)->cost;
    return x < y ? -1 : x > y;
}

void ts_pet_mutants_free(ts_pet_mutant *m, int n)
{
    for (int i = 0; i < n; i++) ts_graph_free(m[i].prog);
    free(m);
}

static void add_factor(gen *s, int64_t f)
{
    if (f < 2 || f > 8 || s->nfactors == 4) return;
    for (int i = 0; i < s->nfactors; i++)
        if (s->factors[i] == f) return;
    s->factors[s->nfactors++] = f;
}

ts_status ts_pet_mutants(const ts_graph *p0, const ts_pet_gen_opts *o, ts_pet_mutant **out, int *n, ts_error *err)
{
    *out = NULL;
    *n = 0;
    int cn = -1;
    for (int i = 0; i < p0->nnodes; i++)
        if (!p0->nodes[i].dead) {
            if (cn >= 0) return ts_error_set(err, TS_ERR_UNSUPPORTED, "PET mutants: programs of one operator only");
            cn = i;
        }
    if (cn < 0 || p0->noutputs != 1) return ts_error_set(err, TS_ERR_UNSUPPORTED, "PET mutants: empty program");
    /* the base program: p0's inputs and constants, no node (same value ids) */
    ts_graph *base = ts_graph_copy(p0);
    if (!base) return ts_error_set(err, TS_ERR_NOMEM, "out of memory generating mutants");
    base->nodes[cn].dead = true;
    base->noutputs = 0;
    gen s = {.p0 = p0, .cn = cn, .maxdepth = o->depth, .keep = o->keep, .db = o->db, .err = err,
             .out_shape = &p0->values[p0->outputs[0]].shape, .p0_hash = ts_graph_hash(p0)};
    s.nvar = variants_of(p0, cn, s.var);
    const ts_node *c = &p0->nodes[cn];
    const ts_shape *x = &p0->values[c->inputs[0]].shape;
    add_factor(&s, 2);
    if (x->rank == 4) add_factor(&s, x->dims[0]);
    if (c->op == &ts_op_conv) {
        const ts_conv_attrs *a = c->attrs;
        for (int d = 0; d < a->win.ndilations; d++) add_factor(&s, a->win.dilations[d]);
    }
    if (s.nvar) dfs(&s, base, c->inputs[0], 0, false, -1, 0, "");
    ts_graph_free(base);
    if (s.failed) {
        ts_pet_mutants_free(s.m, s.n);
        return err->code ? err->code : ts_error_set(err, TS_ERR_NOMEM, "out of memory generating mutants");
    }
    qsort(s.m, (size_t)s.n, sizeof *s.m, by_cost);
    while (s.n > o->keep) ts_graph_free(s.m[--s.n].prog);
    *out = s.m;
    *n = s.n;
    return TS_OK;
}
