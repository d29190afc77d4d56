/* Seed graphs for POLYJUICE: small random graphs (3 to 12 operator nodes)
 * built only from operators the e-graph's atoms stand for (docs/rules.md),
 * in the forms the atoms match (Add/Mul on equal shapes, Mul by a
 * one-element tensor, 2-D Transpose, MatMul with a 2-D right operand,
 * group-1 Conv with symmetric pads and no bias, pools counting the
 * padding, two-input Concat and two-way Split along TASO's axes 0 and 1),
 * so that the e-graph can take all of them and both targets can run them.
 *
 * Two families, since no atom turns a matrix into an image: matrices
 * (2-D, sides 2..8) and images (NCHW, batch 1-2, 1..8 channels, 4..9
 * pixels a side).  Values stay near 1: inputs are uniform in [-1, 1),
 * MatMul and Conv weights scaled by their fan-in, so chains of them
 * neither blow up nor vanish and the oracle's tolerance stays meaningful. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz/fuzz.h"
#include "ops/list.h"
#include "ops/op.h"
#include "util/hash.h"

uint64_t ts_fuzz_rand(uint64_t *state) { return ts_rand_next(state); }

uint64_t ts_fuzz_pair_seed(uint64_t seed, long i)
{
    uint64_t s = seed * 0xd1b54a32d192ed03ull + (uint64_t)i;
    return ts_fuzz_rand(&s);
}

#define MAX_POOL 64

typedef struct seedgen {
    ts_graph *g;
    uint64_t rng;
    ts_error *err;
    bool failed;
    int pool[MAX_POOL]; /* values an operator may read (inputs, weights, node results) */
    int uses[MAX_POOL];
    bool leaf[MAX_POOL]; /* graph input or weight */
    int npool, ninputs, nweights, nops;
} seedgen;

static int pick(seedgen *s, int n) { return n > 0 ? (int)(ts_fuzz_rand(&s->rng) % (uint64_t)n) : 0; }
static double unif(seedgen *s) { return (double)(ts_fuzz_rand(&s->rng) >> 11) * (1.0 / 9007199254740992.0); }
static const ts_shape *shape_of(seedgen *s, int v) { return &s->g->values[v].shape; }

static void add_pool(seedgen *s, int v, bool leaf)
{
    if (v < 0 || s->npool >= MAX_POOL) return;
    s->pool[s->npool] = v;
    s->uses[s->npool] = 0;
    s->leaf[s->npool] = leaf;
    s->npool++;
}

static void use(seedgen *s, int v)
{
    for (int i = 0; i < s->npool; i++)
        if (s->pool[i] == v) s->uses[i]++;
}

static int new_input(seedgen *s, const ts_shape *sh)
{
    if (s->failed) return -1;
    char name[32];
    snprintf(name, sizeof name, "x%d", s->ninputs++);
    int v = ts_graph_add_input(s->g, name, TS_F32, sh, s->err);
    if (v < 0) s->failed = true;
    add_pool(s, v, true);
    return v;
}

/* A weight of shape sh, uniform in [-bound, bound). */
static int new_weight(seedgen *s, const ts_shape *sh, double bound)
{
    if (s->failed) return -1;
    char name[32];
    snprintf(name, sizeof name, "w%d", s->nweights++);
    ts_tensor *t = ts_tensor_new(TS_F32, sh, s->err);
    if (!t) {
        s->failed = true;
        return -1;
    }
    ts_tensor_fill_random(t, &s->rng, -bound, bound);
    int v = ts_graph_add_constant(s->g, name, t, s->err);
    ts_tensor_unref(t);
    if (v < 0) s->failed = true;
    add_pool(s, v, true);
    return v;
}

/* A leaf of shape sh for a second operand: a weight (bound) or an input. */
static int new_leaf(seedgen *s, const ts_shape *sh, double bound)
{
    return pick(s, 3) ? new_weight(s, sh, bound) : new_input(s, sh);
}

static int node(seedgen *s, const char *op, const int *in, int nin, const ts_attr *a, int na, int nout, int *outs)
{
    if (s->failed) return -1;
    int o[2];
    if (!outs) outs = o;
    if (ts_graph_add_node(s->g, op, NULL, in, nin, a, na, nout, NULL, outs, s->err) < 0) {
        s->failed = true;
        return -1;
    }
    for (int i = 0; i < nin; i++) use(s, in[i]);
    for (int i = 0; i < nout; i++) add_pool(s, outs[i], false);
    s->nops++;
    return outs[0];
}

/* An operand: mostly a value nothing reads yet (so the graph stays one
 * piece), else any value of the pool. */
static int operand(seedgen *s)
{
    int fresh[MAX_POOL], nf = 0;
    for (int i = 0; i < s->npool; i++)
        if (!s->uses[i] && !s->leaf[i]) fresh[nf++] = s->pool[i];
    if (nf && pick(s, 4)) return fresh[pick(s, nf)];
    int any[MAX_POOL], na = 0;
    for (int i = 0; i < s->npool; i++)
        if (!s->leaf[i] || !s->g->values[s->pool[i]].constant) any[na++] = s->pool[i];
    return any[pick(s, na)];
}

/* A pool value other than x of shape sh (NULL-equivalent -1 when none). */
static int same_shape(seedgen *s, int x, const ts_shape *sh)
{
    int c[MAX_POOL], n = 0;
    for (int i = 0; i < s->npool; i++)
        if (s->pool[i] != x && ts_shape_eq(shape_of(s, s->pool[i]), sh) && !s->g->values[s->pool[i]].constant)
            c[n++] = s->pool[i];
    return n ? c[pick(s, n)] : -1;
}

static const int64_t SIDES[] = {2, 3, 4, 4, 5, 6, 8};
static int64_t side(seedgen *s) { return SIDES[pick(s, (int)(sizeof SIDES / sizeof SIDES[0]))]; }

/* ------------------------------------------------------------ operators */

static void op_binary(seedgen *s, const char *op, int x)
{
    ts_shape sh = *shape_of(s, x);
    int y = pick(s, 2) ? same_shape(s, x, &sh) : -1;
    if (y < 0) y = new_leaf(s, &sh, 1.0);
    int in[2] = {x, y};
    if (pick(s, 2)) in[0] = y, in[1] = x;
    node(s, op, in, 2, NULL, 0, 1, NULL);
}

static void op_scale(seedgen *s, int x)
{
    ts_shape one = ts_shape_make(0, NULL);
    int c = new_weight(s, &one, 1.0);
    if (c < 0) return;
    /* a scale of magnitude 0.5..2 (a value near 0 would hide differences) */
    float *d = s->g->values[c].constant->data;
    d[0] = (float)((0.5 + 1.5 * unif(s)) * (pick(s, 2) ? 1 : -1));
    int in[2] = {x, c};
    node(s, "Mul", in, 2, NULL, 0, 1, NULL);
}

static void op_unary(seedgen *s, const char *op, int x) { node(s, op, &x, 1, NULL, 0, 1, NULL); }

static void op_transpose(seedgen *s, int x)
{
    int64_t perm[2] = {1, 0};
    ts_attr a = ts_attr_ints("perm", perm, 2);
    node(s, "Transpose", &x, 1, &a, 1, 1, NULL);
}

static void op_matmul(seedgen *s, int x)
{
    const ts_shape *xs = shape_of(s, x);
    int64_t k = xs->dims[1], n = side(s);
    ts_shape ws = ts_shape_make(2, (int64_t[]){k, n});
    int w = pick(s, 3) ? -1 : same_shape(s, x, &ws);
    if (w < 0) w = pick(s, 4) ? new_weight(s, &ws, sqrt(3.0 / (double)k)) : new_input(s, &ws);
    int in[2] = {x, w};
    node(s, "MatMul", in, 2, NULL, 0, 1, NULL);
}

/* Concat along axis a of x and a value (from the pool or new) that has
 * x's shape except along a. */
static void op_concat(seedgen *s, int x, int a)
{
    const ts_shape *xs = shape_of(s, x);
    int c[MAX_POOL], n = 0;
    for (int i = 0; i < s->npool; i++) {
        const ts_shape *ps = shape_of(s, s->pool[i]);
        if (s->g->values[s->pool[i]].constant || ps->rank != xs->rank) continue;
        bool ok = true;
        for (int d = 0; d < xs->rank; d++) ok &= d == a || ps->dims[d] == xs->dims[d];
        if (ok) c[n++] = s->pool[i];
    }
    int y;
    if (n && pick(s, 2)) {
        y = c[pick(s, n)];
    } else {
        ts_shape ys = *xs;
        ys.dims[a] = xs->rank == 4 && a == 0 ? 1 + pick(s, 2) : side(s);
        y = new_leaf(s, &ys, 1.0);
    }
    int in[2] = {x, y};
    if (pick(s, 2)) in[0] = y, in[1] = x;
    ts_attr at = ts_attr_int("axis", a);
    node(s, "Concat", in, 2, &at, 1, 1, NULL);
}

/* Two-way Split along a.  A value made by a Concat along a is cut where
 * the Concat joined it (TASO's split tree); others in halves. */
static void op_split(seedgen *s, int x, int a)
{
    const ts_shape *xs = shape_of(s, x);
    int64_t len = xs->dims[a], at = len / 2;
    int p = s->g->values[x].producer;
    if (p >= 0 && s->g->nodes[p].op == &ts_op_concat) {
        int a0 = s->g->nodes[p].inputs[0];
        if (shape_of(s, a0)->rank == xs->rank && shape_of(s, a0)->dims[a] < len) at = shape_of(s, a0)->dims[a];
    }
    if (len < 2 || at < 1) return;
    ts_shape ss = ts_shape_make(1, (int64_t[]){2});
    ts_tensor *t = ts_tensor_new(TS_I64, &ss, s->err);
    if (!t) {
        s->failed = true;
        return;
    }
    ((int64_t *)t->data)[0] = at;
    ((int64_t *)t->data)[1] = len - at;
    char name[32];
    snprintf(name, sizeof name, "split%d", s->nops);
    int sv = ts_graph_add_constant(s->g, name, t, s->err);
    ts_tensor_unref(t);
    if (sv < 0) {
        s->failed = true;
        return;
    }
    ts_attr at_ = ts_attr_int("axis", a);
    int in[2] = {x, sv}, outs[2];
    node(s, "Split", in, 2, &at_, 1, 2, outs);
}

/* Conv (group 1) with a kernel of 1 or 3, stride 1 or 2, pads "same" or
 * none; no bias (the e-graph has no atom that carries one). */
static void op_conv(seedgen *s, int x)
{
    const ts_shape *xs = shape_of(s, x);
    int64_t k = pick(s, 3) ? 3 : 1, st = pick(s, 4) ? 1 : 2, c = xs->dims[1];
    bool same = pick(s, 3) != 0;
    int64_t pad = same ? (k - 1) / 2 : 0;
    int64_t oh = (xs->dims[2] + 2 * pad - k) / st + 1, ow = (xs->dims[3] + 2 * pad - k) / st + 1;
    if (oh < 2 || ow < 2) st = 1, pad = (k - 1) / 2;
    static const int64_t COUT[] = {1, 2, 3, 4, 6, 8};
    int64_t co = COUT[pick(s, 6)];
    ts_shape ws = ts_shape_make(4, (int64_t[]){co, c, k, k});
    int w = new_weight(s, &ws, sqrt(3.0 / (double)(c * k * k)));
    int in[2] = {x, w};
    int64_t ks[2] = {k, k}, strides[2] = {st, st}, pads[4] = {pad, pad, pad, pad};
    ts_attr a[3] = {ts_attr_ints("kernel_shape", ks, 2), ts_attr_ints("strides", strides, 2),
                    ts_attr_ints("pads", pads, 4)};
    node(s, "Conv", in, 2, a, 3, 1, NULL);
}

static void op_pool(seedgen *s, int x, bool avg)
{
    const ts_shape *xs = shape_of(s, x);
    int64_t st = pick(s, 3) ? 1 : 2, pad = pick(s, 3) ? 1 : 0;
    if ((xs->dims[2] + 2 * pad - 3) / st + 1 < 2 || (xs->dims[3] + 2 * pad - 3) / st + 1 < 2) st = 1, pad = 1;
    int64_t ks[2] = {3, 3}, strides[2] = {st, st}, pads[4] = {pad, pad, pad, pad};
    ts_attr a[4] = {ts_attr_ints("kernel_shape", ks, 2), ts_attr_ints("strides", strides, 2),
                    ts_attr_ints("pads", pads, 4), ts_attr_int("count_include_pad", 1)};
    node(s, avg ? "AveragePool" : "MaxPool", &x, 1, a, avg ? 4 : 3, 1, NULL);
}

/* One operator on the matrix family. */
static void step_matrix(seedgen *s)
{
    int x = operand(s);
    const ts_shape *xs = shape_of(s, x);
    switch (pick(s, 16)) {
    case 0: case 1: case 2: op_binary(s, "Add", x); break;
    case 3: case 4: op_binary(s, "Mul", x); break;
    case 5: op_scale(s, x); break;
    case 6: case 7: case 8: op_matmul(s, x); break;
    case 9: case 10: op_transpose(s, x); break;
    case 11: case 12: op_unary(s, "Relu", x); break;
    case 13: case 14: op_concat(s, x, pick(s, 2)); break;
    default: {
        int a = pick(s, 2);
        if (xs->dims[a] >= 2) op_split(s, x, a);
        else op_unary(s, "Relu", x);
    }
    }
}

/* One operator on the image family. */
static void step_image(seedgen *s)
{
    int x = operand(s);
    const ts_shape *xs = shape_of(s, x);
    /* element-wise operators often: most rewrite rules are about them */
    switch (pick(s, 16)) {
    case 0: case 1: case 2: op_conv(s, x); break;
    case 3: case 4: case 5: op_binary(s, "Add", x); break;
    case 6: case 7: op_binary(s, "Mul", x); break;
    case 8: case 9: op_scale(s, x); break;
    case 10: case 11: op_unary(s, "Relu", x); break;
    case 12: op_pool(s, x, pick(s, 2)); break;
    case 13: op_concat(s, x, pick(s, 4) ? 1 : 0); break;
    default:
        if (xs->dims[1] >= 2) op_split(s, x, 1);
        else op_conv(s, x);
    }
}

ts_graph *ts_fuzz_seed_graph(uint64_t seed, ts_error *err)
{
    seedgen s = {.rng = seed, .err = err};
    s.g = ts_graph_new("fuzz", 17);
    if (!s.g) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    bool image = pick(&s, 3) == 0;
    int target = 3 + pick(&s, 10);
    if (image) {
        int64_t hw = 4 + pick(&s, 6);
        ts_shape xs = ts_shape_make(4, (int64_t[]){1 + pick(&s, 2), 1 + pick(&s, 8), hw, hw + pick(&s, 2)});
        new_input(&s, &xs);
    } else {
        ts_shape xs = ts_shape_make(2, (int64_t[]){side(&s), side(&s)});
        new_input(&s, &xs);
    }
    for (int guard = 0; s.nops < target && !s.failed && guard < 64; guard++) {
        if (image) step_image(&s);
        else step_matrix(&s);
    }
    /* every value nothing reads is an output (inputs included: an input
     * no node reads has been dropped by construction) */
    for (int i = 0; i < s.npool && !s.failed; i++)
        if (!s.uses[i] && !s.leaf[i] && ts_graph_add_output(s.g, s.pool[i], err)) s.failed = true;
    if (!s.failed && ts_graph_validate(s.g, err)) s.failed = true;
    if (s.failed) {
        ts_error_prefix(err, "fuzz seed graph %016llx", (unsigned long long)seed);
        ts_graph_free(s.g);
        return NULL;
    }
    return s.g;
}
