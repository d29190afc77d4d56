/* Mutants of a two-operator subset of a subprogram (PET §4.1 grows programs
 * over several operators, not only one): an AveragePool and a pointwise
 * convolution, either one reading the other -- Inception's pool branch
 * (pool, then a 1x1 conv) and DenseNet's transition (1x1 conv, then a 2x2
 * pool).  Both are linear, one acts on space channel by channel, the
 * other on channels position by position, so they commute -- except for
 * the convolution's bias, which a padded window with count_include_pad
 * averages with the zeros beyond the border.  The generator does not know
 * that: it enumerates the orders of PET's operators over the program's
 * inputs (the pool, the convolution with its bias, the convolution
 * without it, an Add of the bias) and the box check keeps the right ones.
 * What it buys on a CPU: the pool on the smaller side of the conv's
 * channels (Inception-v3: 32 of 192 up to 192 of 2048 -- measured no
 * gain, the pools are 1 % of the run), or the conv on the pool's fewer
 * positions (DenseNet-121: a quarter; tsopt's plan now does that itself,
 * exec/pool_first.c, so the gain is for other engines running the
 * written model; docs/pet.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "pet/pet.h"

static bool pointwise_conv(const ts_graph *g, int n)
{
    const ts_node *nd = &g->nodes[n];
    if (nd->dead || nd->op != &ts_op_conv || nd->ninputs < 2 || nd->noutputs != 1) return false;
    const ts_conv_attrs *a = nd->attrs;
    const ts_shape *ws = &g->values[nd->inputs[1]].shape;
    if (a->group != 1 || a->win.auto_pad != TS_PAD_NOTSET || ws->rank != 4 || ws->dims[2] != 1 || ws->dims[3] != 1)
        return false;
    for (int d = 0; d < a->win.nstrides; d++)
        if (a->win.strides[d] != 1) return false;
    for (int d = 0; d < a->win.npads; d++)
        if (a->win.pads[d] != 0) return false;
    return g->values[nd->inputs[0]].shape.rank == 4;
}

static int users(const ts_graph *g, int v)
{
    int k = 0;
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].dead) continue;
        for (int j = 0; j < g->nodes[i].ninputs; j++) k += g->nodes[i].inputs[j] == v;
    }
    for (int i = 0; i < g->noutputs; i++) k += g->outputs[i] == v;
    return k;
}

/* The only node reading value v (not a graph output), else -1. */
static int sole_user(const ts_graph *g, int v)
{
    int u = -1;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == v) return -1;
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].dead) continue;
        for (int j = 0; j < g->nodes[i].ninputs; j++)
            if (g->nodes[i].inputs[j] == v) {
                if (u >= 0 && u != i) return -1;
                u = i;
            }
    }
    return u;
}

/* A Pad whose pads are all zero: the identity (PyTorch writes one before
 * the pool of DenseNet's transitions). */
static bool identity_pad(const ts_graph *g, int n)
{
    const ts_node *nd = &g->nodes[n];
    if (nd->dead || nd->op != &ts_op_pad || nd->noutputs != 1) return false;
    if (!ts_shape_eq(&g->values[nd->inputs[0]].shape, &g->values[nd->outputs[0]].shape)) return false;
    const ts_pad_attrs *a = nd->attrs;
    if (a->npads >= 0) {
        for (int i = 0; i < a->npads; i++)
            if (a->pads[i]) return false;
        return true;
    }
    if (nd->ninputs < 2 || nd->inputs[1] < 0) return false;
    const ts_tensor *t = g->values[nd->inputs[1]].constant;
    if (!t || t->dtype != TS_I64) return false;
    for (int64_t i = 0; i < ts_tensor_numel(t); i++)
        if (((const int64_t *)t->data)[i]) return false;
    return true;
}

static bool plain_pool(const ts_graph *g, int p)
{
    const ts_node *pn = &g->nodes[p];
    if (pn->dead || pn->op != &ts_op_avgpool || pn->noutputs != 1) return false;
    const ts_pool_attrs *a = pn->attrs;
    return !a->win.ceil_mode && a->win.auto_pad == TS_PAD_NOTSET && g->values[pn->inputs[0]].shape.rank == 4;
}

int ts_pet_pool_conv_pair(const ts_graph *g, const int *sub_of, int conv, int *between)
{
    if (between) *between = -1;
    if (!pointwise_conv(g, conv)) return -1;
    int x = g->nodes[conv].inputs[0], pool = -1, mid = -1;
    /* the pool before: its output read by the conv alone */
    for (int p = 0; p < g->nnodes && pool < 0; p++)
        if (!g->nodes[p].dead && g->nodes[p].noutputs == 1 && g->nodes[p].outputs[0] == x)
            pool = plain_pool(g, p) && users(g, x) == 1 && !g->values[g->nodes[p].inputs[0]].constant ? p : -2;
    /* or after: the conv's output read by the pool alone, maybe through an
     * identity Pad */
    if (pool < 0) {
        pool = -1;
        int u = sole_user(g, g->nodes[conv].outputs[0]);
        if (u >= 0 && identity_pad(g, u)) mid = u, u = sole_user(g, g->nodes[u].outputs[0]);
        if (u >= 0 && plain_pool(g, u)) pool = u;
        if (g->values[x].constant) pool = -1;
    }
    if (pool < 0) return -1;
    /* same subprogram: both linear (the splitter's verdict, no name check) */
    if (sub_of && (sub_of[pool] < 0 || sub_of[pool] != sub_of[conv] || (mid >= 0 && sub_of[mid] != sub_of[conv])))
        return -1;
    if (between) *between = mid;
    return pool;
}

/* The pair's order: the conv first when the pool does not feed it. */
static bool conv_first(const ts_graph *g, int pool, int conv)
{
    return g->nodes[conv].inputs[0] != g->nodes[pool].outputs[0];
}

ts_graph *ts_pet_pair_program(const ts_graph *g, int pool, int conv, int64_t C, int64_t F, int *map, int *nmap,
                              ts_error *err)
{
    const ts_node *pn = &g->nodes[pool], *cn = &g->nodes[conv];
    bool cf = conv_first(g, pool, conv);
    int xsrc = cf ? cn->inputs[0] : pn->inputs[0];
    ts_shape xs = g->values[xsrc].shape, ws = g->values[cn->inputs[1]].shape;
    bool bias = cn->ninputs > 2 && cn->inputs[2] >= 0;
    ts_shape bs = bias ? g->values[cn->inputs[2]].shape : ws;
    if (C > 0) xs.dims[1] = C, ws.dims[1] = C;
    if (F > 0) ws.dims[0] = F, bs.dims[0] = F;
    ts_graph *p = ts_graph_new("pet", g->opset);
    if (!p) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory building a PET program");
        return NULL;
    }
    int src[3] = {xsrc, cn->inputs[1], bias ? cn->inputs[2] : -1};
    const ts_shape *sh[3] = {&xs, &ws, &bs};
    int in[3] = {-1, -1, -1};
    *nmap = 0;
    for (int k = 0; k < 3; k++) {
        if (src[k] < 0) continue;
        const ts_value *v = &g->values[src[k]];
        if ((in[k] = ts_graph_add_input(p, v->name, v->dtype, sh[k], err)) < 0) goto fail;
        map[(*nmap)++] = src[k];
    }
    int y = in[0];
    for (int step = 0; step < 2; step++) {
        bool do_conv = (step == 0) == cf;
        int cin[3] = {y, in[1], in[2]};
        y = do_conv ? ts_pet_node_like(p, g, conv, NULL, cin, bias ? 3 : 2, err)
                    : ts_pet_node_like(p, g, pool, NULL, &y, 1, err);
        if (y < 0) goto fail;
    }
    if (ts_graph_add_output(p, y, err)) goto fail;
    return p;
fail:
    ts_graph_free(p);
    return NULL;
}

/* ---- the generator */

enum { OP_POOL, OP_CONV, OP_CONV_NOBIAS, OP_ADD_BIAS, OP_KINDS };
static const char *const op_name[OP_KINDS] = {"pool", "conv", "conv-nobias", "add-bias"};

typedef struct cgen {
    const ts_graph *p0;
    int pool, conv; /* p0's nodes */
    int x, w, b;    /* p0's inputs (b -1: no bias) */
    const ts_shape *out_shape;
    uint64_t p0_hash;
    ts_pet_mutant *m;
    int n, cap;
    ts_error *err;
    bool failed;
} cgen;

static void keep(cgen *s, const ts_graph *p, int cur, const char *what)
{
    if (!ts_pet_mutant_push(&s->m, &s->n, &s->cap, s->p0_hash, p, cur, what, 0, s->err)) s->failed = true;
}

/* One operator of the set on value cur of p; -1 when it does not fit. */
static int apply(cgen *s, ts_graph *p, int cur, int op, ts_error *e)
{
    const ts_shape *cs = &p->values[cur].shape;
    switch (op) {
    case OP_POOL:
        return ts_pet_node_like(p, s->p0, s->pool, NULL, &cur, 1, e);
    case OP_CONV:
    case OP_CONV_NOBIAS: {
        if (cs->rank != 4 || cs->dims[1] != p->values[s->w].shape.dims[1]) return -1;
        int ins[3] = {cur, s->w, s->b};
        return ts_pet_node_like(p, s->p0, s->conv, NULL, ins, op == OP_CONV ? 3 : 2, e);
    }
    case OP_ADD_BIAS: {
        int64_t F = p->values[s->b].shape.dims[0];
        if (cs->rank != 4 || cs->dims[1] != F) return -1;
        int r = ts_pet_reshape(p, s->b, (int64_t[]){F, 1, 1}, 3, e);
        return r < 0 ? -1 : ts_pet_binary(p, "Add", cur, r, e);
    }
    }
    return -1;
}

/* Depth-first over sequences of distinct operators: the pool once, the
 * convolution once (with or without its bias), the bias Add once and only
 * with the bias-free convolution (every input read exactly once, as in
 * the original). */
static void grow(cgen *s, const ts_graph *p, int cur, unsigned used, const char *what)
{
    if (s->failed) return;
    bool conv = used & (1u << OP_CONV | 1u << OP_CONV_NOBIAS);
    bool bias_read = s->b < 0 || (used & 1u << OP_CONV) || (used & 1u << OP_ADD_BIAS);
    if ((used & 1u << OP_POOL) && conv && bias_read && ts_shape_eq(&p->values[cur].shape, s->out_shape))
        keep(s, p, cur, what);
    for (int op = 0; op < OP_KINDS; op++) {
        if (used & 1u << op) continue;
        if ((op == OP_CONV || op == OP_CONV_NOBIAS) && conv) continue;
        if (s->b < 0 && (op == OP_CONV_NOBIAS || op == OP_ADD_BIAS)) continue;
        if (op == OP_ADD_BIAS && (used & 1u << OP_CONV)) continue;
        ts_graph *np = ts_graph_copy(p);
        ts_error e = {0};
        int v = np ? apply(s, np, cur, op, &e) : -1;
        if (!np || (v < 0 && e.code == TS_ERR_NOMEM)) s->failed = true;
        if (v >= 0) {
            char name[96];
            snprintf(name, sizeof name, "%s%s%s", what, *what ? "." : "", op_name[op]);
            grow(s, np, v, used | 1u << op, name);
        }
        ts_graph_free(np);
    }
}

ts_status ts_pet_commute_mutants(const ts_graph *p0, ts_pet_mutant **out, int *n, ts_error *err)
{
    *out = NULL;
    *n = 0;
    int live[3], nl = 0;
    for (int i = 0; i < p0->nnodes && nl < 3; i++)
        if (!p0->nodes[i].dead) live[nl++] = i;
    if (nl != 2 || p0->noutputs != 1)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "PET commute: programs of two operators only");
    int pool = live[0], conv = live[1];
    if (p0->nodes[pool].op != &ts_op_avgpool) pool = live[1], conv = live[0];
    if (ts_pet_pool_conv_pair(p0, NULL, conv, NULL) != pool)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "PET commute: not an AveragePool and a pointwise Conv");
    const ts_node *cn = &p0->nodes[conv];
    ts_graph *base = ts_graph_copy(p0);
    if (!base) return ts_error_set(err, TS_ERR_NOMEM, "out of memory generating mutants");
    base->nodes[pool].dead = base->nodes[conv].dead = true;
    base->noutputs = 0;
    cgen s = {.p0 = p0, .pool = pool, .conv = conv, .w = cn->inputs[1],
              .x = conv_first(p0, pool, conv) ? cn->inputs[0] : p0->nodes[pool].inputs[0],
              .b = cn->ninputs > 2 ? cn->inputs[2] : -1, .out_shape = &p0->values[p0->outputs[0]].shape,
              .p0_hash = ts_graph_hash(p0), .err = err};
    grow(&s, base, s.x, 0, "");
    ts_graph_free(base);
    if (s.failed) {
        ts_pet_mutants_free(s.m, s.n);
        return err->code ? err->code : ts_error_set(err, TS_ERR_NOMEM, "out of memory generating mutants");
    }
    *out = s.m;
    *n = s.n;
    return TS_OK;
}
