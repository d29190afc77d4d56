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
 *     convolution becomes a regular one, PET's single-operator mutants),
 *     with groups merged over a block-diagonal weight, or strided as a
 *     stride-1 convolution on a space-to-depth input (see variants_of).
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

/* Variants of the compute node, each PET's compute operator on an
 * instantiation the program allows:
 *   V_PLAIN   the attributes as given, or without the dilation (pads
 *             divided by it, so a "same" convolution stays "same");
 *   V_GROUPS  a grouped convolution with k of its groups merged into one,
 *             the weight made block-diagonal (PET's grouped conv -> conv;
 *             k = group gives a regular convolution).  A group of 4
 *             channels fills a quarter of a vector register; merged
 *             groups fill it, at k times the multiply-adds;
 *   V_S2D     a strided convolution as a stride-1 one on the input
 *             rearranged space-to-depth, its weight rearranged the same
 *             way (the kernel padded with zeros to a multiple of the
 *             stride): a 3-channel 7x7 stem becomes a 12-channel 4x4. */
enum { V_PLAIN, V_GROUPS, V_S2D };

typedef struct variant {
    ts_conv_attrs conv;
    char name[48];
    int kind;
    int64_t k; /* V_GROUPS: groups merged into one; V_S2D: the stride */
} variant;

#define MAX_VARIANTS 8

/* A space-to-depth rearrangement that pads the kernel by more than this
 * (a 1x1 conv at stride 2 would do 4x the work) is not generated. */
#define S2D_MAX_GROWTH 1.8

/* Input channels of a merged group, at most: 2 AVX-512 registers of
 * float32. */
#define MERGED_MAX_CHANNELS 32

static int variants_of(const ts_graph *p0, int cn, variant *out)
{
    const ts_node *n = &p0->nodes[cn];
    int k = 0;
    if (n->op != &ts_op_conv) return 0;
    const ts_conv_attrs *a = n->attrs;
    out[k++] = (variant){.conv = *a, .name = "conv", .kind = V_PLAIN};
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
    if (dilated && divisible) out[k++] = (variant){.conv = u, .name = "conv-undilated", .kind = V_PLAIN};
    /* groups merged: by 2, 4, 8 and all of them, while a merged group
     * reads at most MERGED_MAX_CHANNELS (past a vector register's width
     * the extra multiply-adds buy nothing) */
    const ts_shape *ws = &p0->values[n->inputs[1]].shape;
    const int64_t merge[4] = {2, 4, 8, a->group};
    for (int i = 0; i < 4 && k < MAX_VARIANTS; i++) {
        int64_t m = merge[i];
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= merge[j] == m;
        if (seen || m < 2 || m > a->group || a->group % m || m * ws->dims[1] > MERGED_MAX_CHANNELS) continue;
        variant v = {.conv = *a, .kind = V_GROUPS, .k = m};
        v.conv.group = a->group / m;
        snprintf(v.name, sizeof v.name, "conv-g%lld", (long long)v.conv.group);
        out[k++] = v;
    }
    /* stride s in every spatial dimension, no dilation, one group */
    int64_t s = a->win.nstrides > 0 ? a->win.strides[0] : 1;
    bool s2d = ws->rank == 4 && a->group == 1 && s >= 2 && a->win.nstrides == 2 && a->win.auto_pad == TS_PAD_NOTSET;
    double grow = 1;
    for (int d = 0; s2d && d < 2; d++) {
        int64_t kd = ws->dims[2 + d], kp = (kd + s - 1) / s * s;
        s2d &= a->win.strides[d] == s && (a->win.ndilations < 0 || a->win.dilations[d] == 1);
        grow *= (double)kp / (double)kd;
    }
    if (s2d && grow <= S2D_MAX_GROWTH && k < MAX_VARIANTS) {
        variant v = {.conv = *a, .kind = V_S2D, .k = s};
        snprintf(v.name, sizeof v.name, "conv-s2d%lld", (long long)s);
        out[k++] = v;
    }
    return k;
}

/* The block-diagonal weight of a grouped convolution with m of its G
 * groups merged: w [F, C/G, ...] -> [F, m*C/G, ...], where the block of
 * old group g sits at input channels (g % m) * C/G of its merged group.
 * Weight-only work (Reshape, Slice, Pad, Concat): constant folding
 * precomputes it in the written model. */
static int block_diagonal(ts_graph *p, int w, int64_t G, int64_t m, ts_error *err)
{
    const ts_shape *ws = &p->values[w].shape;
    if (ws->rank < 3 || G % m || ws->dims[0] % G) return -1;
    int64_t F = ws->dims[0], Cg = ws->dims[1], rest = 1, Fg = F / G;
    for (int d = 2; d < ws->rank; d++) rest *= ws->dims[d];
    int64_t back[TS_MAX_RANK];
    memcpy(back, ws->dims, sizeof(int64_t) * (size_t)ws->rank);
    back[1] = m * Cg;
    int rank = ws->rank;
    int r = ts_pet_reshape(p, w, (int64_t[]){G / m, m, Fg, Cg, rest}, 5, err);
    if (r < 0) return -1;
    int parts[64];
    if (m > 64) return -1;
    for (int64_t i = 0; i < m; i++) {
        int sl = ts_pet_slice(p, r, 1, i, i + 1, err);
        int64_t pads[10] = {0, 0, 0, i * Cg, 0, 0, 0, 0, (m - 1 - i) * Cg, 0};
        if (sl < 0 || (parts[i] = ts_pet_pad(p, sl, pads, err)) < 0) return -1;
    }
    int c = ts_pet_concat(p, parts, (int)m, 1, err);
    return c < 0 ? -1 : ts_pet_reshape(p, c, back, rank, err);
}

/* x [N, C, H, W] -> [N, C*s*s, H/s, W/s]: channel c*s*s + i*s + j holds
 * the rows i, i+s, ... and columns j, j+s, ... of channel c. */
static int space_to_depth(ts_graph *p, int x, int64_t s, ts_error *err)
{
    const ts_shape *xs = &p->values[x].shape;
    int64_t N = xs->dims[0], C = xs->dims[1], H = xs->dims[2], W = xs->dims[3];
    if (H % s || W % s) return -1;
    int v = ts_pet_reshape(p, x, (int64_t[]){N, C, H / s, s, W / s, s}, 6, err);
    if (v < 0 || (v = ts_pet_transpose(p, v, (int64_t[]){0, 1, 3, 5, 2, 4}, 6, err)) < 0) return -1;
    return ts_pet_reshape(p, v, (int64_t[]){N, C * s * s, H / s, W / s}, 4, err);
}

/* Convolution node cn of p0 (stride s, no dilation, one group) on input
 * x of p: the input cut or zero-padded to s * (out + ceil(k/s) - 1) rows
 * and columns (the original's begin pad in front), both input and weight
 * (kernel padded with zeros to a multiple of s) rearranged
 * space-to-depth, and a stride-1 unpadded convolution:
 *   y[o] = sum_t xp[o*s + t] w[t] = sum_{a,i} xp[(o+a)*s + i] wp[a*s + i]. */
static int s2d_conv(ts_graph *p, const ts_graph *p0, int cn, int *ins, int nin, int64_t s, ts_error *err)
{
    const ts_node *n = &p0->nodes[cn];
    const ts_conv_attrs *a = n->attrs;
    const ts_shape *xs = &p->values[ins[0]].shape, *ws = &p->values[ins[1]].shape;
    if (xs->rank != 4 || ws->rank != 4) return -1;
    ts_window_geom geo;
    char why[256];
    if (!ts_window_resolve(&a->win, 2, xs->dims + 2, ws->dims + 2, &geo, why, sizeof why)) return -1;
    int x = ins[0];
    int64_t pads[8] = {0}, wpads[8] = {0};
    for (int d = 0; d < 2; d++) {
        if (geo.stride[d] != s || geo.dil[d] != 1) return -1;
        int64_t kq = (geo.kernel[d] + s - 1) / s, span = s * (geo.out[d] + kq - 1);
        int64_t end = span - geo.in[d] - geo.pad_begin[d];
        if (end < 0) { /* rows past the last window are never read */
            if ((x = ts_pet_slice(p, x, 2 + d, 0, geo.in[d] + end, err)) < 0) return -1;
            end = 0;
        }
        pads[2 + d] = geo.pad_begin[d];
        pads[6 + d] = end;
        wpads[6 + d] = kq * s - geo.kernel[d];
    }
    int w = ins[1];
    if ((x = ts_pet_pad(p, x, pads, err)) < 0 || (x = space_to_depth(p, x, s, err)) < 0) return -1;
    if ((w = ts_pet_pad(p, w, wpads, err)) < 0 || (w = space_to_depth(p, w, s, err)) < 0) return -1;
    ts_conv_attrs b = {.group = 1};
    b.win = (ts_window){.nkernel = -1, .nstrides = -1, .npads = -1, .ndilations = -1, .auto_pad = TS_PAD_NOTSET};
    int nins[3] = {x, w, nin > 2 ? ins[2] : -1};
    return ts_pet_node_like(p, p0, cn, &b, nins, nin, err);
}

typedef struct gen {
    const ts_graph *p0;
    int cn, maxdepth, keep;
    const ts_shape *out_shape;
    variant var[MAX_VARIANTS];
    int nvar;
    int64_t factors[4];
    int nfactors;
    uint64_t p0_hash;
    int cur_variant; /* the compute variant of the mutant being grown */
    int x0;          /* the compute node's data input in p0 */
    int conv_out;    /* the compute node's output in the mutant being grown */
    bool pointwise;  /* 1x1, stride 1, no pad: moving space or batch around changes no work */
    ts_pet_mutant *m;
    int n, cap;
    void *db;
    ts_error *err;
    bool failed;
} gen;

/* The predicted cost used to rank mutants: a roofline of 100 GFLOP/s and
 * 20 GB/s plus 2 us per operator (the driver costs the corrected graph
 * with its own model; this only orders the candidates). */
double ts_pet_predict(const ts_graph *p)
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
    /* layouts after the compute node that compose to nothing: the same
     * mutant as without them, plus copies */
    if (cur != s->conv_out && ts_pet_chain_is_identity(p, s->conv_out, cur)) return;
    if (!ts_pet_mutant_push(&s->m, &s->n, &s->cap, s->p0_hash, p, cur, what, s->cur_variant, s->err)) s->failed = true;
}

bool ts_pet_mutant_push(ts_pet_mutant **list, int *n, int *cap, uint64_t p0_hash, const ts_graph *p, int cur,
                        const char *what, int variant, ts_error *err)
{
    ts_graph *c = ts_graph_copy(p);
    if (!c || ts_graph_add_output(c, cur, err)) {
        ts_graph_free(c);
        return false;
    }
    ts_graph_compact(c); /* drops the original's node, dead in the base */
    uint64_t h = ts_graph_hash(c);
    bool dup = h == p0_hash;
    for (int i = 0; i < *n && !dup; i++) dup = ts_graph_hash((*list)[i].prog) == h;
    if (dup) {
        ts_graph_free(c);
        return true;
    }
    if (*n == *cap) {
        int ncap = *cap ? 2 * *cap : 16;
        ts_pet_mutant *m = realloc(*list, sizeof *m * (size_t)ncap);
        if (!m) {
            ts_graph_free(c);
            return false;
        }
        *list = m;
        *cap = ncap;
    }
    ts_pet_mutant *m = &(*list)[(*n)++];
    m->prog = c;
    m->variant = variant;
    snprintf(m->what, sizeof m->what, "pet:%.56s", what);
    m->cost = ts_pet_predict(c);
    return true;
}

static void dfs(gen *s, const ts_graph *p, int cur, int depth, bool used, int last_rt, int64_t last_f,
                const char *what)
{
    if (s->failed) return;
    if (used && ts_shape_eq(&p->values[cur].shape, s->out_shape)) record(s, p, cur, what);
    if (depth == s->maxdepth) return;
    char name[96];
    for (int k = 0; k < RT_KINDS && !s->pointwise; k++)
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
    /* layouts before the compute node that compose to nothing */
    if (cur != s->x0 && ts_pet_chain_is_identity(p, s->x0, cur)) return;
    const ts_node *cn = &s->p0->nodes[s->cn];
    for (int vi = 0; vi < s->nvar; vi++) {
        ts_graph *np = ts_graph_copy(p);
        ts_error e = {0};
        int ins[16];
        const variant *va = &s->var[vi];
        for (int i = 0; i < cn->ninputs; i++) ins[i] = cn->inputs[i]; /* p0's inputs are np's: same ids */
        ins[0] = cur;
        int v = -1;
        if (np && va->kind == V_S2D) v = s2d_conv(np, s->p0, s->cn, ins, cn->ninputs, va->k, &e);
        else if (np && va->kind == V_GROUPS)
            v = (ins[1] = block_diagonal(np, ins[1], ((const ts_conv_attrs *)cn->attrs)->group, va->k, &e)) < 0
                    ? -1
                    : ts_pet_node_like(np, s->p0, s->cn, &va->conv, ins, cn->ninputs, &e);
        else if (np)
            v = ts_pet_node_like(np, s->p0, s->cn, &va->conv, ins, cn->ninputs, &e);
        if (v >= 0) {
            snprintf(name, sizeof name, "%s%s%s", what, *what ? "." : "", va->name);
            s->cur_variant = vi;
            s->conv_out = v;
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
    s.x0 = c->inputs[0];
    if (c->op == &ts_op_conv) {
        const ts_conv_attrs *a = c->attrs;
        const ts_shape *ws = &p0->values[c->inputs[1]].shape;
        bool pw = ws->rank >= 3;
        for (int d = 2; d < ws->rank; d++) pw &= ws->dims[d] == 1;
        for (int d = 0; d < a->win.nstrides; d++) pw &= a->win.strides[d] == 1;
        for (int d = 0; d < a->win.npads; d++) pw &= a->win.pads[d] == 0;
        s.pointwise = pw && a->win.auto_pad == TS_PAD_NOTSET;
    }
    if (s.nvar) dfs(&s, base, c->inputs[0], 0, false, -1, 0, "");
    ts_graph_free(base);
    if (s.failed) {
        ts_pet_mutants_free(s.m, s.n);
        return err->code ? err->code : ts_error_set(err, TS_ERR_NOMEM, "out of memory generating mutants");
    }
    if (s.n) qsort(s.m, (size_t)s.n, sizeof *s.m, by_cost);
    /* the top K, and the cheapest mutant of every compute variant: the
     * roofline does not see what a vector lane or a stem's 3 channels
     * cost, so a variant it ranks low still reaches the driver's measured
     * cost model once */
    bool seen[MAX_VARIANTS] = {false};
    int kept = 0;
    for (int i = 0; i < s.n; i++) {
        bool first = !seen[s.m[i].variant];
        seen[s.m[i].variant] = true;
        if (i < o->keep || first) s.m[kept++] = s.m[i];
        else ts_graph_free(s.m[i].prog);
    }
    s.n = kept;
    *out = s.m;
    *n = s.n;
    return TS_OK;
}
