/* Runtime seeds (issue 31): random graphs drawn over the operators and
 * forms the fast runtime lowers -- every entry of its kernel tables
 * (src/exec/list_*.c) and the fusions of its lowering -- rather than over
 * what the e-graph's atoms cover.  Each graph is built around one focus
 * (a family below: an operator in the forms its kernels special-case, or a
 * fusion's pattern), with element-wise neighbours before and after it so
 * that chains fuse, in ranks 1 to 5, broadcasting on either side, arity 2
 * to 6 (Concat, Sum, Max, Split), every permutation, strides, pads,
 * dilations and groups, and the dtypes the runtime computes (integers and
 * float16 through Casts of the float inputs).  Sizes favour the kernels'
 * fast paths and their edges: vector widths and one either side (7 8 9,
 * 15 16 17, 31 32 33), single-element dims, and now and then a tensor past
 * the threads' split.  Values stay near 1 (divisors, roots and logarithms
 * read an Exp), so the oracles' tolerance means the same everywhere.
 *
 * These graphs are not pairs: the oracles are the float64 reference
 * interpreter and the optimizer (target.c, ts_fuzz_target_check_graph). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "fuzz/fuzz.h"
#include "ir/subgraph.h"

typedef struct gb {
    ts_graph *g;
    uint64_t rng;
    ts_error *err;
    bool failed;
    int nin, ncst, nnode;
} gb;

static int rnd(gb *b, int n) { return n > 0 ? (int)(ts_fuzz_rand(&b->rng) % (uint64_t)n) : 0; }
static bool one_in(gb *b, int n) { return rnd(b, n) == 0; }

static int input_named(gb *b, const ts_shape *s, const char *prefix)
{
    if (b->failed) return -1;
    char name[16];
    snprintf(name, sizeof name, "%s%d", prefix, b->nin++);
    int v = ts_graph_add_input(b->g, name, TS_F32, s, b->err);
    if (v < 0) b->failed = true;
    return v;
}

static int input(gb *b, const ts_shape *s) { return input_named(b, s, "x"); }
/* An input in [0.25, 2) (ts_fuzz_inputs fills pos* so): a divisor, a root's
 * or a logarithm's operand that starts its own kernel step. */
static int input_pos(gb *b, const ts_shape *s) { return input_named(b, s, "pos"); }

static int add_const(gb *b, ts_tensor *t)
{
    if (!t) {
        b->failed = true;
        return -1;
    }
    char name[16];
    snprintf(name, sizeof name, "c%d", b->ncst++);
    int v = ts_graph_add_constant(b->g, name, t, b->err);
    ts_tensor_unref(t);
    if (v < 0) b->failed = true;
    return v;
}

/* A float32 weight uniform in [lo, hi). */
static int weight(gb *b, const ts_shape *s, double lo, double hi)
{
    if (b->failed) return -1;
    ts_tensor *t = ts_tensor_new(TS_F32, s, b->err);
    if (t) ts_tensor_fill_random(t, &b->rng, lo, hi);
    return add_const(b, t);
}

static int ints(gb *b, const int64_t *v, int n)
{
    if (b->failed) return -1;
    ts_shape s = ts_shape_make(1, (int64_t[]){n});
    ts_tensor *t = ts_tensor_new(TS_I64, &s, b->err);
    if (t)
        for (int i = 0; i < n; i++) ((int64_t *)t->data)[i] = v[i];
    return add_const(b, t);
}

static int node(gb *b, const char *op, const int *in, int nin, const ts_attr *a, int na, int nout, int *outs)
{
    if (b->failed) return -1;
    int o[8];
    if (!outs) outs = o;
    if (ts_graph_add_node(b->g, op, NULL, in, nin, a, na, nout, NULL, outs, b->err) < 0) {
        b->failed = true;
        return -1;
    }
    b->nnode++;
    return outs[0];
}

/* A unary node.  LeakyRelu and HardSigmoid take other attributes than
 * their defaults half the time: a kernel that ignores them computes the
 * default's values right (bench/fuzz_mutants.py's leaky-alpha went unfound). */
static int un(gb *b, const char *op, int x)
{
    static const double ALPHA[] = {0.2, 0.5, 1.5};
    ts_attr a[2];
    int na = 0;
    if (!strcmp(op, "LeakyRelu") && one_in(b, 2)) a[na++] = ts_attr_float("alpha", ALPHA[rnd(b, 3)]);
    if (!strcmp(op, "HardSigmoid") && one_in(b, 2))
        a[na++] = ts_attr_float("alpha", 0.25), a[na++] = ts_attr_float("beta", 0.375);
    return node(b, op, &x, 1, a, na, 1, NULL);
}
static int bin(gb *b, const char *op, int x, int y) { return node(b, op, (int[]){x, y}, 2, NULL, 0, 1, NULL); }
static const ts_shape *shape(gb *b, int v) { return &b->g->values[v].shape; }

/* A dim: vector widths and their neighbours, small primes, ones. */
static int64_t dim(gb *b)
{
    static const int64_t D[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33};
    return D[rnd(b, (int)(sizeof D / sizeof *D))];
}

/* A shape of rank r, at most `cap` elements (halving dims past it), now
 * and then a large last dim (past the kernels' thread split). */
static ts_shape rshape(gb *b, int r, int64_t cap)
{
    ts_shape s = {.rank = r};
    int64_t n = 1;
    for (int d = 0; d < r; d++) n *= (s.dims[d] = dim(b));
    for (int d = 0; n > cap && d < 4 * r; d++) {
        int k = d % r;
        if (s.dims[k] > 1) n = n / s.dims[k] * (s.dims[k] / 2), s.dims[k] /= 2;
    }
    if (r && one_in(b, 12)) { /* past the threads' split (4 * XV_PAR_MIN bytes), and no larger */
        for (int d = 0; d < r - 1; d++) s.dims[d] = 1;
        if (r > 1) s.dims[rnd(b, r - 1)] = 2 + rnd(b, 4);
        s.dims[r - 1] = 8192 + rnd(b, 3) - 1;
    }
    return s;
}

/* ONNX's TensorProto element type of dt (Cast's `to`). */
static int onnx_type(ts_dtype dt)
{
    switch (dt) {
    case TS_U8: return 2;
    case TS_I8: return 3;
    case TS_U16: return 4;
    case TS_I16: return 5;
    case TS_I32: return 6;
    case TS_I64: return 7;
    case TS_F16: return 10;
    case TS_F64: return 11;
    case TS_U32: return 12;
    case TS_U64: return 13;
    case TS_BF16: return 16;
    default: return 1;
    }
}

/* x in another dtype: x * 8 cast (integers keep their sign but unsigned
 * ones read |x|). */
static int to_dtype(gb *b, int x, ts_dtype dt)
{
    if (dt == TS_F32) return x;
    ts_shape one = {.rank = 0};
    int c = weight(b, &one, 8, 8);
    x = bin(b, "Mul", x, c);
    if (dt == TS_U8 || dt == TS_U16 || dt == TS_U32 || dt == TS_U64) x = un(b, "Abs", x);
    ts_attr a = ts_attr_int("to", onnx_type(dt));
    return node(b, "Cast", &x, 1, &a, 1, 1, NULL);
}

static int tail(gb *b, int x);
static int pre(gb *b, int x);

/* The operand of a focus: an input of shape s in dtype dt -- cast straight
 * from the input (x * 8 is exact in float32 and float64 alike; a computed
 * value cast to an integer would turn rounding into off-by-one), or, in
 * float32, after an element-wise chain. */
static int src(gb *b, const ts_shape *s, ts_dtype dt)
{
    int x = input(b, s);
    return dt == TS_F32 ? pre(b, x) : to_dtype(b, x, dt);
}

static ts_dtype any_dtype(gb *b)
{
    static const ts_dtype T[] = {TS_F32, TS_F32, TS_F32, TS_I64, TS_I32, TS_I8, TS_U8, TS_F16, TS_I16, TS_U16, TS_U32,
                                 TS_U64, TS_BF16, TS_F64};
    return T[rnd(b, (int)(sizeof T / sizeof *T))];
}

/* A chain of 0-2 element-wise operators after x (the runtime fuses them). */
static int tail(gb *b, int x)
{
    static const char *U[] = {"Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Erf", "HardSwish", "HardSigmoid", "LeakyRelu"};
    for (int k = rnd(b, 3); k > 0 && !b->failed; k--) {
        if (one_in(b, 3)) {
            const ts_shape *s = shape(b, x);
            ts_shape c = *s;
            for (int d = 0; d < c.rank; d++)
                if (one_in(b, 2)) c.dims[d] = 1;
            x = bin(b, one_in(b, 2) ? "Add" : "Mul", x, weight(b, &c, -1, 1));
        } else if (one_in(b, 6)) {
            ts_shape one = {.rank = 0};
            x = node(b, "Clip", (int[]){x, weight(b, &one, -0.5, -0.5), weight(b, &one, 0.5, 0.5)}, 3, NULL, 0, 1, NULL);
        } else {
            x = un(b, U[rnd(b, 9)], x);
        }
    }
    return x;
}

/* A focus operand: mostly the input itself (the focus then starts its
 * kernel's step), else after a chain. */
static int pre(gb *b, int x) { return one_in(b, 3) ? tail(b, x) : x; }

static int perm_attr(gb *b, int r, int64_t *perm)
{
    for (int d = 0; d < r; d++) perm[d] = d;
    for (int d = r - 1; d > 0; d--) {
        int k = rnd(b, d + 1);
        int64_t t = perm[d];
        perm[d] = perm[k], perm[k] = t;
    }
    return r;
}

/* ------------------------------------------------------------ families */

static void f_binary(gb *b)
{
    static const char *B[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu", "Sum", "Mean", "Mod"};
    const char *op = B[rnd(b, 11)];
    int r = 1 + rnd(b, 5);
    ts_shape s = rshape(b, r, 4096), t = s;
    for (int d = 0; d < r; d++) /* broadcasting on either side */
        if (one_in(b, 3)) (one_in(b, 2) ? &s : &t)->dims[d] = 1;
    if (one_in(b, 4)) t.rank = rnd(b, r + 1), memmove(t.dims, t.dims + (r - t.rank), sizeof(int64_t) * (size_t)t.rank);
    bool pos = !strcmp(op, "Div") || !strcmp(op, "Mod") || !strcmp(op, "Pow");
    int x = pre(b, input(b, &s)), y = one_in(b, 2) ? input(b, &t) : weight(b, &t, -1, 1);
    /* a divisor away from 0, a positive base */
    if (pos && strcmp(op, "Pow")) y = one_in(b, 2) ? weight(b, &t, 0.5, 2) : input_pos(b, &t);
    if (!strcmp(op, "Pow")) x = input_pos(b, &s);
    if (!strcmp(op, "Sum") || !strcmp(op, "Max") || !strcmp(op, "Min") || !strcmp(op, "Mean")) {
        int k = 2 + rnd(b, 5), in[6] = {x, y};
        for (int j = 2; j < k; j++) in[j] = one_in(b, 2) ? input(b, &s) : weight(b, &t, -1, 1);
        x = node(b, op, in, k, NULL, 0, 1, NULL);
    } else if (!strcmp(op, "Mod")) {
        ts_attr a = ts_attr_int("fmod", 1);
        x = node(b, op, (int[]){x, y}, 2, &a, 1, 1, NULL);
    } else if (!strcmp(op, "PRelu")) {
        ts_shape sl = {.rank = r > 1 ? r - 1 : 1};
        for (int d = 0; d < sl.rank; d++) sl.dims[d] = 1;
        if (r > 1) sl.dims[0] = s.dims[1];
        x = bin(b, op, x, weight(b, &sl, -1, 1));
    } else {
        bool swap = strcmp(op, "Div") && strcmp(op, "Pow") && one_in(b, 2);
        x = swap ? bin(b, op, y, x) : bin(b, op, x, y);
    }
    tail(b, x);
}

static void f_unary(gb *b)
{
    static const char *U[] = {"Relu", "Neg", "Abs", "Sqrt", "Exp", "Log", "Reciprocal", "Erf", "Sigmoid", "Tanh",
                              "LeakyRelu", "HardSigmoid", "HardSwish", "Clip"};
    int k = rnd(b, 14);
    ts_shape s = rshape(b, 1 + rnd(b, 5), 8192);
    int x = k == 3 || k == 5 || k == 6 ? input_pos(b, &s) : input(b, &s); /* Sqrt, Log, Reciprocal */
    x = k == 13 ? node(b, "Clip", (int[]){x, weight(b, &(ts_shape){0}, -0.3, -0.3), weight(b, &(ts_shape){0}, 0.6, 0.6)},
                       3, NULL, 0, 1, NULL)
                : un(b, U[k], x);
    tail(b, x);
}

static void f_softmax(gb *b)
{
    int r = 1 + rnd(b, 4);
    ts_shape s = rshape(b, r, 4096);
    ts_attr a = ts_attr_int("axis", rnd(b, 2 * r) - r);
    tail(b, node(b, one_in(b, 3) ? "LogSoftmax" : "Softmax", (int[]){tail(b, input(b, &s))}, 1, &a, 1, 1, NULL));
}

static void f_layernorm(gb *b)
{
    int r = 2 + rnd(b, 2);
    ts_shape s = rshape(b, r, 4096), w = {.rank = 1, .dims = {s.dims[r - 1]}};
    int x = pre(b, input(b, &s));
    if (one_in(b, 2)) {
        ts_attr a[2] = {ts_attr_int("axis", -1), ts_attr_float("epsilon", 1e-5)};
        x = node(b, "LayerNormalization", (int[]){x, weight(b, &w, 0.5, 1.5), weight(b, &w, -1, 1)}, 3, a, 2, 1, NULL);
    } else { /* decomposed, as exporters write it (vec_layernorm.c's pattern) */
        int64_t ax[1] = {-1};
        ts_attr a[2] = {ts_attr_ints("axes", ax, 1), ts_attr_int("keepdims", 1)};
        int m = node(b, "ReduceMean", &x, 1, a, 2, 1, NULL), d = bin(b, "Sub", x, m);
        int v = node(b, "ReduceMean", (int[]){bin(b, "Mul", d, d)}, 1, a, 2, 1, NULL);
        int e = bin(b, "Add", v, weight(b, &(ts_shape){0}, 1e-5, 1e-5));
        x = bin(b, "Add", bin(b, "Mul", bin(b, "Div", d, un(b, "Sqrt", e)), weight(b, &w, 0.5, 1.5)),
                weight(b, &w, -1, 1));
    }
    tail(b, x);
}

static void f_reduce(gb *b)
{
    static const char *R[] = {"ReduceSum", "ReduceMean", "ReduceMax"};
    const char *op = R[rnd(b, 3)];
    int r = 1 + rnd(b, 5);
    ts_shape s = rshape(b, r, 8192);
    int64_t axes[5];
    int na = 0;
    for (int d = 0; d < r; d++)
        if (one_in(b, 2)) axes[na++] = one_in(b, 2) ? d : d - r;
    if (!na) axes[na++] = r - 1;
    int x = pre(b, input(b, &s));
    ts_attr a[2] = {ts_attr_int("keepdims", rnd(b, 2)), ts_attr_ints("axes", axes, na)};
    if (!strcmp(op, "ReduceSum")) x = node(b, op, (int[]){x, ints(b, axes, na)}, 2, a, 1, 1, NULL);
    else x = node(b, op, &x, 1, a, 2, 1, NULL);
    tail(b, x);
}

/* Transposes of one input: 1 to 4 permutations of its rank (2 to 4 mostly,
 * where the strided copy's paths differ: kept last axis, swapped inner
 * pair, full reversal), each its own step. */
static void f_transpose(gb *b)
{
    static const int R[] = {1, 2, 2, 3, 3, 3, 4, 4, 5};
    int r = R[rnd(b, 9)];
    ts_shape s = rshape(b, r, 8192);
    for (int d = 0; d < r; d++) /* a dim of 1 makes some permutations copies: mostly none */
        if (s.dims[d] == 1 && !one_in(b, 4)) s.dims[d] = 2 + rnd(b, 3);
    ts_dtype dt = one_in(b, 3) ? any_dtype(b) : TS_F32;
    int x = src(b, &s, dt);
    int64_t seen[4][5];
    for (int k = 1 + rnd(b, 4), n = 0, tries = 0; n < k && !b->failed && tries < 16; tries++) {
        int64_t perm[5];
        perm_attr(b, r, perm);
        bool dup = false;
        for (int j = 0; j < n; j++) dup |= !memcmp(seen[j], perm, sizeof(int64_t) * (size_t)r);
        if (dup) continue; /* distinct permutations (CSE would merge equal ones) */
        memcpy(seen[n++], perm, sizeof perm);
        ts_attr a = ts_attr_ints("perm", perm, r);
        int y = node(b, "Transpose", &x, 1, &a, one_in(b, 8) ? 0 : 1, 1, NULL);
        if (dt == TS_F32) tail(b, y);
    }
}

static void f_concat(gb *b)
{
    int r = 1 + rnd(b, 5), k = 2 + rnd(b, 5), axis = rnd(b, r), in[6];
    ts_shape s = rshape(b, r, 2048);
    ts_dtype dt = one_in(b, 3) ? any_dtype(b) : TS_F32;
    for (int j = 0; j < k; j++) {
        ts_shape t = s;
        t.dims[axis] = 1 + rnd(b, 9);
        in[j] = j && one_in(b, 3) ? to_dtype(b, weight(b, &t, -1, 1), dt) : src(b, &t, dt);
    }
    ts_attr a = ts_attr_int("axis", one_in(b, 2) ? axis : axis - r);
    int x = node(b, "Concat", in, k, &a, 1, 1, NULL);
    if (dt == TS_F32) tail(b, x);
}

static void f_split(gb *b)
{
    int r = 1 + rnd(b, 5), k = 2 + rnd(b, 5), axis = rnd(b, r), outs[6];
    ts_shape s = rshape(b, r, 4096);
    if (s.dims[axis] < k) s.dims[axis] = k + rnd(b, 9);
    int64_t sz[6], left = s.dims[axis];
    for (int j = 0; j < k - 1; j++) sz[j] = 1 + rnd(b, (int)(left - (k - 1 - j))), left -= sz[j];
    sz[k - 1] = left;
    ts_dtype dt = one_in(b, 3) ? any_dtype(b) : TS_F32;
    int x = src(b, &s, dt);
    ts_attr a = ts_attr_int("axis", axis);
    if (one_in(b, 3) && s.dims[axis] % k == 0) node(b, "Split", &x, 1, &a, 1, k, outs);
    else node(b, "Split", (int[]){x, ints(b, sz, k)}, 2, &a, 1, k, outs);
    for (int j = 0; j < k && dt == TS_F32; j++) tail(b, outs[j]);
}

static void f_slice(gb *b)
{
    int r = 1 + rnd(b, 5);
    ts_shape s = rshape(b, r, 8192);
    int64_t st[5], en[5], ax[5], sp[5];
    int n = 0;
    for (int d = 0; d < r; d++) {
        if (!one_in(b, 2) && d != r - 1) continue;
        int64_t len = s.dims[d];
        ax[n] = one_in(b, 3) ? d - r : d;
        sp[n] = one_in(b, 4) ? -1 : 1 + rnd(b, 2);
        int64_t a = rnd(b, (int)len), e = a + 1 + rnd(b, (int)(len - a));
        if (sp[n] < 0) st[n] = e - 1, en[n] = a - 1 < 0 ? -len - 1 : a - 1;
        else st[n] = a, en[n] = one_in(b, 4) ? INT64_MAX : e;
        /* now and then counted from the end: the same element, a negative index
         * (bench/fuzz_mutants.py's slice-negative-start was unreachable) */
        if (one_in(b, 3)) st[n] -= len;
        if (one_in(b, 3) && en[n] >= 0 && en[n] < len) en[n] -= len;
        n++;
    }
    ts_dtype dt = one_in(b, 3) ? any_dtype(b) : TS_F32;
    int x = src(b, &s, dt);
    x = node(b, "Slice", (int[]){x, ints(b, st, n), ints(b, en, n), ints(b, ax, n), ints(b, sp, n)}, 5, NULL, 0, 1, NULL);
    if (dt == TS_F32) tail(b, x);
}

static void f_gather(gb *b)
{
    int r = 1 + rnd(b, 4), axis = rnd(b, r);
    ts_shape s = rshape(b, r, 4096);
    int64_t idx[6];
    int k = 1 + rnd(b, 6);
    for (int j = 0; j < k; j++) idx[j] = rnd(b, (int)s.dims[axis]) - (one_in(b, 3) ? s.dims[axis] : 0);
    ts_dtype dt = one_in(b, 3) ? any_dtype(b) : TS_F32;
    int x = src(b, &s, dt);
    ts_attr a = ts_attr_int("axis", axis);
    x = node(b, "Gather", (int[]){x, ints(b, idx, k)}, 2, &a, 1, 1, NULL);
    if (dt == TS_F32) tail(b, x);
}

static void f_expand(gb *b)
{
    int r = 1 + rnd(b, 5);
    ts_shape s = rshape(b, r, 4096), t = s;
    for (int d = 0; d < r; d++)
        if (one_in(b, 2)) t.dims[d] = 1;
    int64_t to[5];
    for (int d = 0; d < r; d++) to[d] = s.dims[d];
    ts_dtype dt = one_in(b, 3) ? any_dtype(b) : TS_F32;
    int x = to_dtype(b, input(b, &t), dt);
    x = node(b, "Expand", (int[]){x, ints(b, to, r)}, 2, NULL, 0, 1, NULL);
    if (dt == TS_F32) tail(b, x);
}

static void f_pad(gb *b)
{
    static const char *M[] = {"constant", "reflect", "edge"};
    int r = 1 + rnd(b, 4);
    const char *mode = M[rnd(b, 3)];
    ts_shape s = rshape(b, r, 4096);
    int64_t p[8];
    for (int d = 0; d < 2 * r; d++) {
        int64_t len = s.dims[d % r];
        p[d] = strcmp(mode, "reflect") ? rnd(b, 4) : rnd(b, (int)(len < 4 ? len : 4));
        if (!strcmp(mode, "constant") && one_in(b, 6) && len > 1) p[d] = -1; /* a crop */
    }
    int x = pre(b, input(b, &s));
    ts_attr a = ts_attr_string("mode", mode);
    int in[3] = {x, ints(b, p, 2 * r), weight(b, &(ts_shape){0}, 0.25, 0.25)};
    tail(b, node(b, "Pad", in, strcmp(mode, "constant") ? 2 : 3, &a, 1, 1, NULL));
}

static void f_resize(gb *b)
{
    int r = 3 + rnd(b, 2);
    ts_shape s = rshape(b, r, 2048);
    float sc[5];
    for (int d = 0; d < r; d++) sc[d] = d < 2 ? 1.0f : (float)(1 + rnd(b, 3));
    ts_shape ss = {.rank = 1, .dims = {r}};
    ts_tensor *t = ts_tensor_new(TS_F32, &ss, b->err);
    if (t) memcpy(t->data, sc, sizeof(float) * (size_t)r);
    int scales = add_const(b, t);
    ts_attr a[2] = {ts_attr_string("mode", one_in(b, 2) ? "nearest" : "linear"),
                    ts_attr_string("coordinate_transformation_mode", one_in(b, 2) ? "half_pixel" : "asymmetric")};
    tail(b, node(b, "Resize", (int[]){tail(b, input(b, &s)), -1, scales}, 3, a, 2, 1, NULL));
}

static int conv_on(gb *b, int x, int co, int k, int stride, int dil, int group, bool pad_same, bool bias);

/* BatchNormalization, half the time after a Conv: the pair the optimizer
 * folds into the conv's weights (opt/fold_affine.c), which no other family
 * makes (the bn-fold-eps mutant went unseen for 300 s without it). */
static void f_batchnorm(gb *b)
{
    int r = 2 + rnd(b, 3);
    ts_shape s = rshape(b, r, 4096);
    int x = tail(b, input(b, &s));
    if (r >= 3 && one_in(b, 2)) x = conv_on(b, x, 1 + rnd(b, 16), 1 + 2 * rnd(b, 2), 1, 1, 1, true, one_in(b, 2));
    ts_shape c = {.rank = 1, .dims = {b->failed ? 1 : shape(b, x)->dims[1]}};
    int in[5] = {x, weight(b, &c, 0.5, 1.5), weight(b, &c, -1, 1), weight(b, &c, -1, 1), weight(b, &c, 0.5, 2)};
    tail(b, node(b, "BatchNormalization", in, 5, NULL, 0, 1, NULL));
}

/* Conv (1-3 spatial dims): groups (1, depthwise, grouped), strides, pads,
 * dilations, a bias, then a residual Add and activations (post-ops). */
static int conv_on(gb *b, int x, int co, int k, int stride, int dil, int group, bool pad_same, bool bias)
{
    const ts_shape *xs = shape(b, x);
    int sp = xs->rank - 2;
    int64_t ci = xs->dims[1];
    ts_shape w = {.rank = xs->rank, .dims = {co, ci / group}};
    int64_t ks[3], st[3], dl[3], pd[6];
    for (int d = 0; d < sp; d++) {
        int64_t kk = k, ext = (kk - 1) * dil + 1;
        if (ext > xs->dims[2 + d] + (pad_same ? ext - 1 : 0)) kk = 1, ext = 1;
        w.dims[2 + d] = ks[d] = kk, st[d] = stride, dl[d] = dil;
        pd[d] = pad_same ? (ext - 1) / 2 : 0, pd[d + sp] = pad_same ? ext - 1 - (ext - 1) / 2 : 0;
    }
    ts_attr a[5] = {ts_attr_ints("kernel_shape", ks, sp), ts_attr_ints("strides", st, sp),
                    ts_attr_ints("dilations", dl, sp), ts_attr_ints("pads", pd, 2 * sp), ts_attr_int("group", group)};
    double bound = sqrt(3.0 / (double)(ci / group * ks[0]));
    int in[3] = {x, weight(b, &w, -bound, bound), bias ? weight(b, &(ts_shape){1, {co}}, -1, 1) : -1};
    return node(b, "Conv", in, bias ? 3 : 2, a, 5, 1, NULL);
}

static void f_conv(gb *b)
{
    int sp = one_in(b, 5) ? 1 + 2 * rnd(b, 2) : 2;
    static const int64_t C[] = {1, 3, 4, 8, 16, 17, 32};
    int64_t ci = C[rnd(b, 7)], hw = 3 + rnd(b, 14);
    ts_shape s = {.rank = 2 + sp, .dims = {1 + rnd(b, 2), ci}};
    for (int d = 0; d < sp; d++) s.dims[2 + d] = sp == 3 ? 3 + rnd(b, 4) : hw + d;
    int group = 1, co = (int)C[rnd(b, 7)];
    if (one_in(b, 3)) group = (int)ci, co = (int)ci * (1 + rnd(b, 2)); /* depthwise */
    else if (one_in(b, 4) && ci % 2 == 0) group = 2, co = 2 * (1 + rnd(b, 8));
    int x = pre(b, input(b, &s));
    int y = conv_on(b, x, co, 1 + 2 * rnd(b, 3), 1 + (one_in(b, 3) ? 1 : 0), one_in(b, 5) ? 2 : 1, group,
                    !one_in(b, 4), !one_in(b, 3));
    if (!b->failed && one_in(b, 3)) { /* residual */
        int z = input(b, shape(b, y));
        y = one_in(b, 2) ? bin(b, "Add", y, z) : bin(b, "Add", z, y);
    }
    if (!b->failed && one_in(b, 3)) y = conv_on(b, un(b, "Relu", y), 1 + rnd(b, 16), 1 + 2 * rnd(b, 2), 1, 1, 1, true, true);
    tail(b, y);
}

static void f_convtranspose(gb *b)
{
    int64_t ci = 1 + rnd(b, 8), co = 1 + rnd(b, 8), k = 1 + rnd(b, 4), st = 1 + rnd(b, 2), hw = 2 + rnd(b, 8);
    int group = one_in(b, 4) ? (int)ci : 1;
    if (group > 1) co = ci;
    ts_shape s = {.rank = 4, .dims = {1 + rnd(b, 2), ci, hw, hw + 1}}, w = {.rank = 4, .dims = {ci, co / group, k, k}};
    int64_t ks[2] = {k, k}, sts[2] = {st, st}, pd[4] = {0, 0, 0, 0}, op[2] = {0, 0};
    if (k > 1 && one_in(b, 2)) pd[0] = pd[1] = pd[2] = pd[3] = 1 + rnd(b, (int)(k - 1)) - 1;
    if (st > 1 && one_in(b, 2)) op[0] = op[1] = 1;
    ts_attr a[5] = {ts_attr_ints("kernel_shape", ks, 2), ts_attr_ints("strides", sts, 2), ts_attr_ints("pads", pd, 4),
                    ts_attr_ints("output_padding", op, 2), ts_attr_int("group", group)};
    double bound = sqrt(3.0 / (double)(ci * k * k));
    int in[3] = {tail(b, input(b, &s)), weight(b, &w, -bound, bound), weight(b, &(ts_shape){1, {co}}, -1, 1)};
    tail(b, node(b, "ConvTranspose", in, one_in(b, 2) ? 3 : 2, a, 5, 1, NULL));
}

static void f_matmul(gb *b)
{
    int64_t m = one_in(b, 3) ? 1 : dim(b), k = dim(b), n = dim(b);
    if (one_in(b, 3)) { /* Gemm */
        int ta = rnd(b, 2), tb = rnd(b, 2);
        ts_shape as = {.rank = 2, .dims = {ta ? k : m, ta ? m : k}}, bs = {.rank = 2, .dims = {tb ? n : k, tb ? k : n}},
                 cs = {.rank = one_in(b, 2) ? 1 : 2};
        if (cs.rank == 1) cs.dims[0] = n;
        else cs.dims[0] = one_in(b, 2) ? 1 : m, cs.dims[1] = n;
        ts_attr a[4] = {ts_attr_int("transA", ta), ts_attr_int("transB", tb), ts_attr_float("alpha", one_in(b, 2) ? 1.0 : 0.5),
                        ts_attr_float("beta", one_in(b, 2) ? 1.0 : 2.0)};
        double bound = sqrt(3.0 / (double)k);
        int in[3] = {tail(b, input(b, &as)), one_in(b, 3) ? input(b, &bs) : weight(b, &bs, -bound, bound),
                     weight(b, &cs, -1, 1)};
        tail(b, node(b, "Gemm", in, one_in(b, 4) ? 2 : 3, a, 4, 1, NULL));
        return;
    }
    int ra = 1 + rnd(b, 4), rb = 1 + rnd(b, 4);
    ts_shape as = {.rank = ra}, bs = {.rank = rb};
    for (int d = 0; d < 4; d++) as.dims[d] = bs.dims[d] = 1;
    as.dims[ra - 1] = k;
    if (ra > 1) as.dims[ra - 2] = m;
    bs.dims[rb > 1 ? rb - 2 : 0] = k;
    if (rb > 1) bs.dims[rb - 1] = n;
    for (int d = 0; d + 2 < ra || d + 2 < rb; d++) { /* batch dims, broadcast on either side */
        int64_t v = 1 + rnd(b, 3);
        if (d + 2 < ra) as.dims[ra - 3 - d] = one_in(b, 3) ? 1 : v;
        if (d + 2 < rb) bs.dims[rb - 3 - d] = one_in(b, 3) && ra >= rb ? 1 : v;
        if (d + 2 < ra && d + 2 < rb && as.dims[ra - 3 - d] != 1) bs.dims[rb - 3 - d] = as.dims[ra - 3 - d];
    }
    double bound = sqrt(3.0 / (double)k);
    int x = tail(b, input(b, &as)), w = one_in(b, 2) ? weight(b, &bs, -bound, bound) : input(b, &bs);
    x = bin(b, "MatMul", x, w);
    if (!b->failed && one_in(b, 2)) x = bin(b, "Add", x, weight(b, &(ts_shape){1, {shape(b, x)->dims[shape(b, x)->rank - 1]}}, -1, 1));
    tail(b, x);
}

static void f_pool(gb *b)
{
    int kind = rnd(b, 4); /* MaxPool AveragePool GlobalAveragePool GlobalMaxPool */
    int64_t c = one_in(b, 2) ? 16 * (1 + rnd(b, 2)) : 1 + rnd(b, 8), hw = 3 + rnd(b, 14);
    ts_shape s = {.rank = 4, .dims = {1 + rnd(b, 2), c, hw, hw + rnd(b, 3)}};
    int x = pre(b, input(b, &s));
    if (kind >= 2) {
        tail(b, un(b, kind == 2 ? "GlobalAveragePool" : "GlobalMaxPool", x));
        return;
    }
    int64_t k = 2 + rnd(b, 2), st = 1 + rnd(b, 2), p = rnd(b, (int)(k / 2 + 1));
    int64_t ks[2] = {k, k}, sts[2] = {st, st}, pd[4] = {p, p, p, p};
    ts_attr a[5] = {ts_attr_ints("kernel_shape", ks, 2), ts_attr_ints("strides", sts, 2), ts_attr_ints("pads", pd, 4),
                    ts_attr_int("ceil_mode", one_in(b, 4)), ts_attr_int("count_include_pad", rnd(b, 2))};
    tail(b, node(b, kind ? "AveragePool" : "MaxPool", &x, 1, a, kind ? 5 : 4, 1, NULL));
}

/* Fusion patterns of the lowering: squeeze-excite (vec.se, the gated
 * conv), 1x1 conv then AvgPool(k, stride k) (pool_first), a DenseNet
 * concat chain (dense_concat), a conv -> relu -> pad -> conv chain in
 * channels-last (vec.pad and friends on permuted layouts), a channel
 * Concat of conv outputs (vec.concat_cl, dnnl.concat). */
static void f_fusion(gb *b)
{
    int64_t c = 8 * (1 + rnd(b, 4)), hw = 4 + rnd(b, 12);
    ts_shape s = {.rank = 4, .dims = {1, c, hw, hw}};
    int x = input(b, &s);
    switch (rnd(b, 8)) {
    case 5: { /* MaxPool and Transpose of a conv's (blocked, channels-last) output */
        int y = conv_on(b, x, 16 * (1 + rnd(b, 2)), 3, 1, 1, 1, true, true);
        if (one_in(b, 2)) {
            int64_t ks[2] = {2 + rnd(b, 2), 2 + rnd(b, 2)}, sts[2] = {2, 2}, pd[4] = {0, 0, 0, 0};
            ts_attr a[3] = {ts_attr_ints("kernel_shape", ks, 2), ts_attr_ints("strides", sts, 2), ts_attr_ints("pads", pd, 4)};
            y = node(b, "MaxPool", &y, 1, a, 3, 1, NULL);
            tail(b, conv_on(b, y, 8, 1, 1, 1, 1, false, true));
        } else {
            int64_t perm[4];
            perm_attr(b, 4, perm);
            ts_attr a = ts_attr_ints("perm", perm, 4);
            tail(b, node(b, "Transpose", &y, 1, &a, 1, 1, NULL));
        }
        break;
    }
    case 6: { /* strided depthwise conv on a large channels-last input (vec.dwconv) */
        int64_t cc = 32 * (1 + rnd(b, 2)), side = 28 + 8 * rnd(b, 4);
        ts_shape big = {.rank = 4, .dims = {1, cc, side, side}};
        int y = conv_on(b, input(b, &big), (int)cc, 1, 1, 1, 1, false, true);
        y = conv_on(b, un(b, "Relu", y), (int)cc, 3, 2, 1, (int)cc, true, true);
        tail(b, conv_on(b, y, 16, 1, 1, 1, 1, false, true));
        break;
    }
    case 7: { /* channel Concat of channels-last and blocked inputs (vec.concat_cl, dnnl.concat) */
        int a0 = conv_on(b, x, 16, 1, 1, 1, 1, false, true), a1 = conv_on(b, x, 8 * (1 + rnd(b, 3)), 3, 1, 1, 1, true, true);
        ts_attr a = ts_attr_int("axis", 1);
        int in[3] = {a0, a1, x};
        tail(b, conv_on(b, node(b, "Concat", in, 2 + rnd(b, 2), &a, 1, 1, NULL), 16, 3, 1, 1, 1, true, true));
        break;
    }
    case 0: { /* squeeze-excite */
        int y = conv_on(b, x, (int)c, 3, 1, 1, 1, true, true);
        int g = un(b, "GlobalAveragePool", y);
        g = un(b, "Sigmoid", conv_on(b, un(b, "Relu", conv_on(b, g, (int)c / 4 + 1, 1, 1, 1, 1, false, true)), (int)c, 1,
                                     1, 1, 1, false, true));
        y = bin(b, "Mul", y, g);
        tail(b, conv_on(b, y, 1 + rnd(b, 16), 1, 1, 1, 1, false, true));
        break;
    }
    case 1: { /* 1x1 conv, AvgPool(k, stride k) */
        int64_t k = 2;
        int64_t ks[2] = {k, k}, sts[2] = {k, k};
        ts_attr a[2] = {ts_attr_ints("kernel_shape", ks, 2), ts_attr_ints("strides", sts, 2)};
        tail(b, node(b, "AveragePool", (int[]){conv_on(b, x, 1 + rnd(b, 32), 1, 1, 1, 1, false, true)}, 1, a, 2, 1, NULL));
        break;
    }
    case 2: { /* dense block: each conv reads the concat of all before */
        int feats[5] = {x}, nf = 1, cat = x;
        ts_attr a = ts_attr_int("axis", 1);
        for (int l = 0; l < 2 + rnd(b, 3) && !b->failed; l++) {
            feats[nf++] = conv_on(b, un(b, "Relu", cat), 8 + 8 * rnd(b, 2), 3, 1, 1, 1, true, true);
            cat = node(b, "Concat", feats, nf, &a, 1, 1, NULL);
        }
        tail(b, cat);
        break;
    }
    case 3: { /* conv -> relu -> pad -> conv */
        int64_t p[8] = {0, 0, 1, 1, 0, 0, 1, 1};
        int y = un(b, "Relu", conv_on(b, x, (int)c, 1, 1, 1, 1, false, true));
        y = node(b, "Pad", (int[]){y, ints(b, p, 8)}, 2, NULL, 0, 1, NULL);
        tail(b, conv_on(b, y, 1 + rnd(b, 16), 3, 1 + rnd(b, 2), 1, 1, false, true));
        break;
    }
    default: { /* channel concat of conv outputs (and the input: mixed layouts) */
        int in[4], k = 2 + rnd(b, 3);
        for (int j = 0; j < k; j++) in[j] = j == k - 1 && one_in(b, 2) ? x : conv_on(b, x, 4 * (1 + rnd(b, 4)), 1 + 2 * rnd(b, 2), 1, 1, 1, true, true);
        ts_attr a = ts_attr_int("axis", 1);
        tail(b, conv_on(b, node(b, "Concat", in, k, &a, 1, 1, NULL), 8, 1, 1, 1, 1, false, true));
    }
    }
}

/* GELU as exporters spell it (erf form, tanh form, either operand order),
 * which the ALL level fuses into Gelu (src/opt/fuse_gelu.c) and the
 * runtime lowers to vec.eltwise or a conv post-op. */
static void f_gelu(gb *b)
{
    ts_shape s = rshape(b, 1 + rnd(b, 4), 4096), one = {.rank = 0};
    int x = pre(b, input(b, &s)), y;
    if (one_in(b, 2)) { /* 0.5 x (1 + erf(x / sqrt 2)) */
        int e = un(b, "Erf", one_in(b, 2) ? bin(b, "Div", x, weight(b, &one, 1.4142135, 1.4142135))
                                          : bin(b, "Mul", x, weight(b, &one, 0.70710678, 0.70710678)));
        y = bin(b, "Mul", bin(b, "Mul", x, bin(b, "Add", e, weight(b, &one, 1, 1))), weight(b, &one, 0.5, 0.5));
    } else { /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        int x3 = one_in(b, 2) ? bin(b, "Pow", x, weight(b, &one, 3, 3)) : bin(b, "Mul", bin(b, "Mul", x, x), x);
        int in = bin(b, "Add", x, bin(b, "Mul", x3, weight(b, &one, 0.044715, 0.044715)));
        int t = un(b, "Tanh", bin(b, "Mul", in, weight(b, &one, 0.7978845608, 0.7978845608)));
        y = bin(b, "Mul", bin(b, "Mul", weight(b, &one, 0.5, 0.5), x), bin(b, "Add", weight(b, &one, 1, 1), t));
    }
    tail(b, y);
}

/* A MatMul reading a Gather of rows by a constant index table: banded
 * attention's scores (band x query) or context (probabilities x band),
 * the pattern vec.band reads through the index (src/vec/vec_band.c). */
static void f_band(gb *b)
{
    int64_t lead = one_in(b, 3) ? 0 : 1 + rnd(b, 3), S = 3 + rnd(b, 30), C = dim(b), L = 1 + rnd(b, 17),
            J = 1 + rnd(b, 9);
    ts_shape ks = {.rank = lead ? 3 : 2}, ss = {.rank = ks.rank + 1, .dims = {0}};
    int d = 0;
    if (lead) ks.dims[d] = ss.dims[d] = lead, d++;
    ks.dims[d] = S, ks.dims[d + 1] = C;
    ts_shape is = {.rank = 2, .dims = {L, J}};
    ts_tensor *t = ts_tensor_new(TS_I64, &is, b->err);
    if (t)
        for (int64_t k = 0; k < L * J; k++) ((int64_t *)t->data)[k] = rnd(b, (int)S) - (one_in(b, 4) ? S : 0);
    int idx = add_const(b, t), k = pre(b, input(b, &ks));
    ts_attr a = ts_attr_int("axis", one_in(b, 2) ? -2 : d);
    int band = node(b, "Gather", (int[]){k, idx}, 2, &a, 1, 1, NULL), y;
    ss.dims[d] = L;
    if (one_in(b, 2)) { /* scores: [.., L, J, C] x [.., L, C, 1] */
        ss.dims[d + 1] = C, ss.dims[d + 2] = 1;
        y = bin(b, "MatMul", band, input(b, &ss));
    } else { /* context: [.., L, 1, J] x [.., L, J, C] */
        ss.dims[d + 1] = 1, ss.dims[d + 2] = J;
        y = bin(b, "MatMul", un(b, "Softmax", input(b, &ss)), band);
    }
    tail(b, y);
}

/* Upsample (opset 9: scales as an input; deprecated since 10, still in
 * exported models): the graph is opset 9, so no opset-11 Clip follows. */
static void f_upsample(gb *b)
{
    b->g->opset = 9;
    int r = 3 + rnd(b, 2);
    ts_shape s = rshape(b, r, 2048), ss = {.rank = 1, .dims = {r}};
    ts_tensor *t = ts_tensor_new(TS_F32, &ss, b->err);
    if (t)
        for (int d = 0; d < r; d++) ((float *)t->data)[d] = d < 2 ? 1.0f : (float)(1 + rnd(b, 3));
    ts_attr a = ts_attr_string("mode", one_in(b, 2) ? "nearest" : "linear");
    int x = input(b, &s);
    if (one_in(b, 2)) x = un(b, "Relu", x);
    un(b, one_in(b, 2) ? "Sigmoid" : "Relu", node(b, "Upsample", (int[]){x, add_const(b, t)}, 2, &a, 1, 1, NULL));
}

/* A constant of dtype dt: integers uniform in [lo, hi]. */
static int qconst(gb *b, ts_dtype dt, const ts_shape *s, int lo, int hi)
{
    if (b->failed) return -1;
    ts_tensor *t = ts_tensor_new(dt, s, b->err);
    for (int64_t k = 0, n = t ? ts_tensor_numel(t) : 0; k < n; k++) ts_tensor_set_f64(t, k, lo + rnd(b, hi - lo + 1));
    return add_const(b, t);
}

/* A float32 scale 2^-e (a tensor of c of them when c > 0: per channel). */
static int qscale(gb *b, int e, int64_t c)
{
    if (b->failed) return -1;
    ts_shape s = {.rank = c > 0 ? 1 : 0, .dims = {c}};
    ts_tensor *t = ts_tensor_new(TS_F32, &s, b->err);
    for (int64_t k = 0, n = t ? ts_tensor_numel(t) : 0; k < n; k++) ts_tensor_set_f64(t, k, ldexp(1.0, -(e + rnd(b, 3))));
    return add_const(b, t);
}

/* Quantized forms: a QDQ Conv/MatMul/Gemm/MaxPool (the basic level fuses
 * it into QLinearConv/QLinearMatMul, fuse_qdq.c), QLinearConv and
 * QLinearMatMul nodes, ConvInteger and MatMulInteger, on uint8 or int8
 * activations and per-tensor or per-channel int8 weights.  Every scale is
 * a power of two and every input a float32 value, so x / scale, the int32
 * sums and their requantization are exact in float32, float64 and int32
 * alike: the reference and the int8 kernels must agree to the integer,
 * ties included (QuantizeLinear rounds half to even). */
static void f_quant(gb *b)
{
    ts_shape one = {.rank = 0};
    bool u8 = one_in(b, 3) ? false : true;
    ts_dtype at = u8 ? TS_U8 : TS_I8;
    int kind = rnd(b, 6), conv = kind == 0 || kind == 2 || kind == 4;
    int64_t c = 1 + rnd(b, 16), co = 1 + rnd(b, 16), hw = 3 + rnd(b, 10), k = one_in(b, 2) ? 1 : 3, m = dim(b);
    ts_shape xs = conv ? (ts_shape){.rank = 4, .dims = {1 + rnd(b, 2), c, hw, hw + rnd(b, 3)}}
                       : (ts_shape){.rank = 2 + rnd(b, 2), .dims = {m, c}};
    if (!conv && xs.rank == 3) xs.dims[0] = 1 + rnd(b, 3), xs.dims[1] = m, xs.dims[2] = c;
    int group = conv && one_in(b, 4) ? (int)c : 1;
    if (group > 1) co = c;
    int xsc = qscale(b, 7, 0), xzp = qconst(b, at, &one, u8 ? 128 : 0, u8 ? 128 : 0);
    int xq = node(b, "QuantizeLinear", (int[]){pre(b, input(b, &xs)), xsc, xzp}, 3, NULL, 0, 1, NULL);
    if (kind == 5) { /* DQ -> MaxPool -> Q: max pooling on the 8-bit values */
        if (!conv) xs.rank = 4, xs.dims[0] = 1, xs.dims[1] = c, xs.dims[2] = xs.dims[3] = hw;
        int x4 = conv ? xq : -1;
        if (!conv) {
            int xf = input(b, &xs);
            x4 = node(b, "QuantizeLinear", (int[]){xf, xsc, xzp}, 3, NULL, 0, 1, NULL);
        }
        int64_t ks[2] = {2, 2}, st[2] = {1 + rnd(b, 2), 1 + rnd(b, 2)}, pd[4] = {0, 0, 0, 0};
        ts_attr a[3] = {ts_attr_ints("kernel_shape", ks, 2), ts_attr_ints("strides", st, 2), ts_attr_ints("pads", pd, 4)};
        int y = node(b, "MaxPool", (int[]){node(b, "DequantizeLinear", (int[]){x4, xsc, xzp}, 3, NULL, 0, 1, NULL)}, 1, a, 3,
                     1, NULL);
        node(b, "QuantizeLinear", (int[]){y, xsc, xzp}, 3, NULL, 0, 1, NULL);
        return;
    }
    /* weights: int8, symmetric, per output channel (axis 0 of a Conv's, 1 of a MatMul's) or per tensor */
    bool per_ch = one_in(b, 2);
    ts_shape ws = conv ? (ts_shape){.rank = 4, .dims = {co, c / group, k, k}} : (ts_shape){.rank = 2, .dims = {c, co}};
    int wq = qconst(b, TS_I8, &ws, -127, 127), wsc = qscale(b, 5, per_ch ? co : 0);
    ts_shape wzs = {.rank = per_ch ? 1 : 0, .dims = {co}};
    int wzp = qconst(b, TS_I8, &wzs, 0, 0);
    int64_t K = conv ? (c / group) * k * k : c;
    int ye = 5 - (int)ceil(log2((double)K) / 2); /* outputs spread over the 8 bits, some saturated */
    int ysc = qscale(b, ye, 0), yzp = qconst(b, at, &one, u8 ? 128 : 0, u8 ? 128 : 0);
    int64_t kk[2] = {k, k}, st[2] = {1 + rnd(b, 2), 1}, dl[2] = {1, 1}, pd[4] = {k / 2, k / 2, k / 2, k / 2};
    ts_attr ca[5] = {ts_attr_ints("kernel_shape", kk, 2), ts_attr_ints("strides", st, 2), ts_attr_ints("dilations", dl, 2),
                     ts_attr_ints("pads", pd, 4), ts_attr_int("group", group)};
    ts_shape bs = {.rank = 1, .dims = {co}};
    int y;
    if (kind == 0 || kind == 1) { /* QDQ around Conv / MatMul, as ORT's static quantizer writes */
        int xd = node(b, "DequantizeLinear", (int[]){xq, xsc, xzp}, 3, NULL, 0, 1, NULL);
        ts_attr wa = ts_attr_int("axis", conv ? 0 : 1);
        int wd = node(b, "DequantizeLinear", (int[]){wq, wsc, wzp}, 3, &wa, per_ch ? 1 : 0, 1, NULL);
        if (conv) {
            /* bias: int32 at scale x_scale * w_scale, dequantized (per channel when the weights are) */
            int bq = qconst(b, TS_I32, &bs, -2000, 2000);
            int bsc = node(b, "Mul", (int[]){xsc, wsc}, 2, NULL, 0, 1, NULL);
            ts_attr ba = ts_attr_int("axis", 0);
            int bd = node(b, "DequantizeLinear", (int[]){bq, bsc, qconst(b, TS_I32, &wzs, 0, 0)}, 3, &ba, per_ch ? 1 : 0,
                          1, NULL);
            y = node(b, "Conv", (int[]){xd, wd, bd}, one_in(b, 4) ? 2 : 3, ca, 5, 1, NULL);
        } else {
            y = bin(b, "MatMul", xd, wd);
        }
        if (one_in(b, 2)) y = un(b, "Relu", y);
        y = node(b, "QuantizeLinear", (int[]){y, ysc, yzp}, 3, NULL, 0, 1, NULL);
        un(b, "Relu", node(b, "DequantizeLinear", (int[]){y, ysc, yzp}, 3, NULL, 0, 1, NULL));
    } else if (kind == 2) {
        int in[9] = {xq, xsc, xzp, wq, wsc, wzp, ysc, yzp, qconst(b, TS_I32, &bs, -2000, 2000)};
        y = node(b, "QLinearConv", in, one_in(b, 3) ? 8 : 9, ca, 5, 1, NULL);
    } else if (kind == 3) {
        if (per_ch) wsc = qscale(b, 5, co), wzp = qconst(b, TS_I8, &wzs, 0, 0);
        int in[8] = {xq, xsc, xzp, wq, wsc, wzp, ysc, yzp};
        y = node(b, "QLinearMatMul", in, 8, NULL, 0, 1, NULL);
    } else { /* int32 outputs: ConvInteger, MatMulInteger */
        int in[4] = {xq, wq, xzp, qconst(b, TS_I8, &one, 0, 0)};
        y = conv ? node(b, "ConvInteger", in, one_in(b, 2) ? 3 : 4, ca, 5, 1, NULL)
                 : node(b, "MatMulInteger", in, one_in(b, 2) ? 2 : 4, NULL, 0, 1, NULL);
        ts_attr to = ts_attr_int("to", 1);
        tail(b, node(b, "Cast", &y, 1, &to, 1, 1, NULL));
    }
}

/* A float32 constant of shape s holding j/16, j uniform in [0, 16]. */
static int dyadic(gb *b, const ts_shape *s)
{
    if (b->failed) return -1;
    ts_tensor *t = ts_tensor_new(TS_F32, s, b->err);
    for (int64_t k = 0, n = t ? ts_tensor_numel(t) : 0; k < n; k++) ts_tensor_set_f64(t, k, rnd(b, 17) / 16.0);
    return add_const(b, t);
}

/* The 8-bit element-wise and pooling forms that fuse_qdq.c keeps on the
 * integers (tsopt.QLinearAdd, QLinearLookup, QLinearGlobalAveragePool,
 * QLinearChannelMul), now and then after a QDQ 1x1 conv (its output in
 * oneDNN's channels-last layout), and the dynamic form
 * DynamicQuantizeLinear -> MatMulInteger.  Exact as f_quant's: power-of-two
 * scales; activations whose slopes are dyadic (no HardSwish: its 1/6 puts
 * float32 on the other side of a .5 tie than float64); gates j/16; pooled
 * areas of 2^k pixels; and the dynamic input clipped to, and holding,
 * -128 and 127 times 2^-e, so that its computed scale is 2^-e. */
static void f_qdq8(gb *b)
{
    ts_shape one = {.rank = 0};
    bool u8 = !one_in(b, 3);
    ts_dtype at = u8 ? TS_U8 : TS_I8;
    int kind = rnd(b, 5);
    if (kind == 4) {
        int64_t m = dim(b), k = 1 + rnd(b, 24), n = dim(b), e = 5 + rnd(b, 3);
        ts_shape xs = {.rank = 2, .dims = {m, k}}, es = {.rank = 2, .dims = {m, 2}}, ws = {.rank = 2, .dims = {k + 2, n}};
        ts_tensor *ext = ts_tensor_new(TS_F32, &es, b->err);
        for (int64_t r = 0; ext && r < m; r++)
            ts_tensor_set_f64(ext, 2 * r, ldexp(-128, (int)-e)), ts_tensor_set_f64(ext, 2 * r + 1, ldexp(127, (int)-e));
        int lo = weight(b, &one, ldexp(-128, (int)-e), ldexp(-128, (int)-e));
        int hi = weight(b, &one, ldexp(127, (int)-e), ldexp(127, (int)-e));
        int x = node(b, "Clip", (int[]){input(b, &xs), lo, hi}, 3, NULL, 0, 1, NULL);
        ts_attr ax = ts_attr_int("axis", 1);
        x = node(b, "Concat", (int[]){x, add_const(b, ext)}, 2, &ax, 1, 1, NULL);
        int q[3];
        node(b, "DynamicQuantizeLinear", &x, 1, NULL, 0, 3, q);
        int in[4] = {q[0], qconst(b, TS_I8, &ws, -127, 127), q[2], qconst(b, TS_I8, &one, 0, 0)};
        int y = node(b, "MatMulInteger", in, one_in(b, 2) ? 3 : 4, NULL, 0, 1, NULL);
        ts_attr to = ts_attr_int("to", 1);
        y = bin(b, "Mul", bin(b, "Mul", node(b, "Cast", &y, 1, &to, 1, 1, NULL), q[1]), qscale(b, 5, 0));
        tail(b, y);
        return;
    }
    int64_t n = 1 + rnd(b, 2), c = dim(b), h = kind == 2 ? 1 << rnd(b, 4) : 2 + rnd(b, 8);
    int64_t w = kind == 2 ? 1 << rnd(b, 4) : 2 + rnd(b, 8);
    ts_shape xs = {.rank = 4, .dims = {n, c, h, w}};
    int zlo = u8 ? 120 : -8, zhi = u8 ? 136 : 8;
    int xsc = qscale(b, 3 + rnd(b, 4), 0), xzp = qconst(b, at, &one, zlo, zhi);
    int x = node(b, "QuantizeLinear", (int[]){pre(b, input(b, &xs)), xsc, xzp}, 3, NULL, 0, 1, NULL);
    if (one_in(b, 2)) { /* a QDQ 1x1 conv first: C -> C, per-tensor weights */
        ts_shape wsh = {.rank = 4, .dims = {c, c, 1, 1}};
        ts_attr wa = ts_attr_int("axis", 0);
        int wd = node(b, "DequantizeLinear", (int[]){qconst(b, TS_I8, &wsh, -127, 127), qscale(b, 5, 0),
                                                      qconst(b, TS_I8, &one, 0, 0)}, 3, &wa, 0, 1, NULL);
        int xd = node(b, "DequantizeLinear", (int[]){x, xsc, xzp}, 3, NULL, 0, 1, NULL);
        int y = node(b, "Conv", (int[]){xd, wd}, 2, NULL, 0, 1, NULL);
        /* an even zero point: oneDNN adds it before rounding, ONNX after, one
         * step apart on exact ties when it is odd (documented, dnnl_int8.c;
         * this family found it) */
        xsc = qscale(b, 5 - (int)ceil(log2((double)c) / 2), 0), xzp = qconst(b, at, &one, zlo, zlo);
        if (!b->failed) ts_tensor_set_f64(b->g->values[xzp].constant, 0, zlo + 2 * rnd(b, (zhi - zlo) / 2 + 1));
        x = node(b, "QuantizeLinear", (int[]){y, xsc, xzp}, 3, NULL, 0, 1, NULL);
    }
    int xd = node(b, "DequantizeLinear", (int[]){x, xsc, xzp}, 3, NULL, 0, 1, NULL), y;
    if (kind == 0) { /* a residual Add of two 8-bit tensors at their own scales */
        int osc = qscale(b, 3 + rnd(b, 4), 0), ozp = qconst(b, at, &one, zlo, zhi);
        int o = node(b, "QuantizeLinear", (int[]){input(b, &xs), osc, ozp}, 3, NULL, 0, 1, NULL);
        int od = node(b, "DequantizeLinear", (int[]){o, osc, ozp}, 3, NULL, 0, 1, NULL);
        y = one_in(b, 2) ? bin(b, "Add", xd, od) : bin(b, "Add", od, xd);
    } else if (kind == 1) {
        static const char *F[] = {"HardSigmoid", "LeakyRelu", "Relu"};
        int f = rnd(b, 3);
        ts_attr a[2] = {ts_attr_float("alpha", f == 0 ? 0.25 : 0.125), ts_attr_float("beta", 0.5)};
        y = node(b, F[f], &xd, 1, a, f == 0 ? 2 : f == 1 ? 1 : 0, 1, NULL);
    } else if (kind == 2) {
        y = node(b, "GlobalAveragePool", &xd, 1, NULL, 0, 1, NULL);
    } else { /* a squeeze-excite gate per channel, per batch or broadcast */
        ts_shape gs = {.rank = 4, .dims = {one_in(b, 2) ? n : 1, c, 1, 1}};
        y = bin(b, "Mul", xd, dyadic(b, &gs));
    }
    int ysc = qscale(b, 3 + rnd(b, 4), 0), yzp = qconst(b, at, &one, zlo, zhi);
    y = node(b, "QuantizeLinear", (int[]){y, ysc, yzp}, 3, NULL, 0, 1, NULL);
    tail(b, node(b, "DequantizeLinear", (int[]){y, ysc, yzp}, 3, NULL, 0, 1, NULL));
}

/* A float16 or bfloat16 weight: uniform in [lo, hi), rounded to dt. */
static int half_weight(gb *b, ts_dtype dt, const ts_shape *s, double lo, double hi)
{
    if (b->failed) return -1;
    ts_tensor *f = ts_tensor_new(TS_F32, s, b->err), *t = f ? ts_tensor_new(dt, s, b->err) : NULL;
    if (t) ts_tensor_fill_random(f, &b->rng, lo, hi);
    for (int64_t k = 0, n = t ? ts_tensor_numel(t) : 0; k < n; k++) ts_tensor_set_f64(t, k, ts_tensor_get_f64(f, k));
    ts_tensor_unref(f);
    return add_const(b, t);
}

/* Half-precision graphs (exec/half.c computes them in float32 with the
 * weights held 16-bit): a Conv, MatMul or Gemm on float16 or bfloat16,
 * now and then with weights past the size the plan widens per run, an
 * activation and a residual Add in the same type. */
static void f_half(gb *b)
{
    ts_dtype dt = one_in(b, 2) ? TS_F16 : TS_BF16;
    ts_attr to = ts_attr_int("to", onnx_type(dt));
    bool big = one_in(b, 3);
    int kind = rnd(b, 3), y;
    if (kind == 0) {
        int64_t c = big ? 64 : 1 + rnd(b, 16), co = big ? 64 : 1 + rnd(b, 16), hw = 3 + rnd(b, 10), k = big ? 3 : 1 + 2 * rnd(b, 2);
        ts_shape xs = {.rank = 4, .dims = {1 + rnd(b, 2), c, hw, hw + rnd(b, 2)}}, ws = {.rank = 4, .dims = {co, c, k, k}};
        int64_t kk[2] = {k, k}, st[2] = {1 + rnd(b, 2), 1}, pd[4] = {k / 2, k / 2, k / 2, k / 2};
        ts_attr a[3] = {ts_attr_ints("kernel_shape", kk, 2), ts_attr_ints("strides", st, 2), ts_attr_ints("pads", pd, 4)};
        double bound = sqrt(3.0 / (double)(c * k * k));
        int x = node(b, "Cast", (int[]){input(b, &xs)}, 1, &to, 1, 1, NULL);
        int in[3] = {x, half_weight(b, dt, &ws, -bound, bound), half_weight(b, dt, &(ts_shape){1, {co}}, -1, 1)};
        y = node(b, "Conv", in, one_in(b, 3) ? 2 : 3, a, 3, 1, NULL);
    } else {
        int64_t m = dim(b), k = big ? 256 : dim(b), n = big ? 160 : dim(b);
        double bound = sqrt(3.0 / (double)k);
        ts_shape as = {.rank = 2, .dims = {m, k}}, ws = {.rank = 2, .dims = {k, n}};
        int x = node(b, "Cast", (int[]){input(b, &as)}, 1, &to, 1, 1, NULL), w = half_weight(b, dt, &ws, -bound, bound);
        y = kind == 1 ? bin(b, "MatMul", x, w)
                      : node(b, "Gemm", (int[]){x, w, half_weight(b, dt, &(ts_shape){1, {n}}, -1, 1)}, 3, NULL, 0, 1, NULL);
    }
    static const char *U[] = {"Relu", "Sigmoid", "Tanh", "Erf"};
    if (one_in(b, 2)) y = un(b, U[rnd(b, 4)], y);
    if (!b->failed && one_in(b, 3)) y = bin(b, "Add", y, node(b, "Cast", (int[]){input(b, shape(b, y))}, 1, &to, 1, 1, NULL));
    if (one_in(b, 2)) { /* back to float32 inside the graph (keep_io_types style) */
        ts_attr f32 = ts_attr_int("to", 1);
        node(b, "Cast", &y, 1, &f32, 1, 1, NULL);
    }
}

/* A body graph for If, Loop or Scan: made with the same builder (its
 * constants, inputs and nodes go to the body), then wrapped. */
static ts_graph *body_begin(gb *b, const char *name)
{
    ts_graph *outer = b->g;
    if (b->failed) return NULL;
    if (!(b->g = ts_graph_new(name, outer->opset))) {
        b->g = outer;
        b->failed = true;
        ts_error_set(b->err, TS_ERR_NOMEM, "out of memory");
    }
    return outer;
}

static ts_body *body_end(gb *b, ts_graph *outer, int nformal, const int *outs, int nout)
{
    ts_graph *g = b->g;
    b->g = outer;
    if (!outer) return NULL;
    for (int j = 0; j < nout && !b->failed; j++)
        if (ts_graph_add_output(g, outs[j], b->err)) b->failed = true;
    if (b->failed) {
        ts_graph_free(g);
        return NULL;
    }
    ts_body *body = ts_body_new(g, nformal, b->err);
    if (!body) b->failed = true;
    return body;
}

static int body_input(gb *b, const char *name, ts_dtype dt, const ts_shape *s)
{
    if (b->failed) return -1;
    int v = ts_graph_add_input(b->g, name, dt, s, b->err);
    if (v < 0) b->failed = true;
    return v;
}

/* Control flow (If's branches, Loop's and Scan's body), each body an
 * element-wise chain over a captured or carried value. */
static void f_control(gb *b)
{
    ts_shape s = rshape(b, 1 + rnd(b, 3), 1024), one = {.rank = 0};
    int x = pre(b, input(b, &s)), y = -1, kind = rnd(b, 3);
    if (kind == 0) { /* If on the sign of a mean: each branch a chain over x */
        ts_attr ra = ts_attr_int("keepdims", 0);
        int c = bin(b, "Greater", node(b, "ReduceMean", (int[]){input(b, &s)}, 1, &ra, 1, 1, NULL),
                    weight(b, &one, 0, 0));
        ts_body *br[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            ts_graph *outer = body_begin(b, k ? "else" : "then");
            int a = body_input(b, "a", TS_F32, &s);
            int o = k && one_in(b, 3) ? un(b, "Neg", a) : tail(b, un(b, "Relu", a));
            if ((br[k] = body_end(b, outer, 0, &o, 1)) && ts_body_add_capture(br[k], "a", 1, b->err)) b->failed = true;
        }
        ts_attr at[2] = {{.name = "then_branch", .kind = TS_ATTR_GRAPH, .body = br[0]},
                         {.name = "else_branch", .kind = TS_ATTR_GRAPH, .body = br[1]}};
        if (br[0] && br[1]) y = node(b, "If", (int[]){c, x}, 2, at, 2, 1, NULL);
        for (int k = 0; k < 2; k++)
            if (br[k]) ts_body_unref(br[k]);
    } else if (kind == 1) { /* Loop, constant trip count: v = chain(v * k + i), v scanned */
        ts_graph *outer = body_begin(b, "loop_body");
        int i = body_input(b, "i", TS_I64, &one), c = body_input(b, "c", TS_BOOL, &one);
        int v = body_input(b, "v", TS_F32, &s), k = body_input(b, "k", TS_F32, &s);
        ts_attr to = ts_attr_int("to", 1);
        int vo = tail(b, bin(b, "Add", bin(b, "Mul", v, k), node(b, "Cast", &i, 1, &to, 1, 1, NULL)));
        int outs[3] = {un(b, "Identity", c), vo, un(b, "Identity", vo)};
        ts_body *body = body_end(b, outer, 3, outs, 3);
        if (body && ts_body_add_capture(body, "k", 3, b->err)) b->failed = true;
        ts_tensor *m = body ? ts_tensor_new(TS_I64, &one, b->err) : NULL;
        if (m) *(int64_t *)m->data = 1 + rnd(b, 3);
        int trips = body ? add_const(b, m) : -1;
        ts_attr a = {.name = "body", .kind = TS_ATTR_GRAPH, .body = body};
        int lo[2];
        if (body) y = node(b, "Loop", (int[]){trips, -1, x, weight(b, &s, -1, 1)}, 4, &a, 1, 2, lo);
        if (body) ts_body_unref(body);
        if (!b->failed) tail(b, lo[1]);
    } else { /* Scan: a running chain over the rows of X, either direction */
        ts_shape row = s, xs = {.rank = s.rank + 1, .dims = {2 + rnd(b, 4)}};
        for (int d = 0; d < s.rank; d++) xs.dims[d + 1] = s.dims[d];
        ts_graph *outer = body_begin(b, "scan_body");
        int st = body_input(b, "s", TS_F32, &row), xt = body_input(b, "xt", TS_F32, &row);
        int so = tail(b, bin(b, "Add", st, xt));
        int outs[2] = {so, un(b, "Tanh", so)};
        ts_body *body = body_end(b, outer, 2, outs, 2);
        int64_t dir[1] = {rnd(b, 2)};
        ts_attr a[3] = {{.name = "body", .kind = TS_ATTR_GRAPH, .body = body}, ts_attr_int("num_scan_inputs", 1),
                        ts_attr_ints("scan_input_directions", dir, 1)};
        int so2[2];
        if (body) y = node(b, "Scan", (int[]){x, input(b, &xs)}, 2, a, 3, 2, so2);
        if (body) ts_body_unref(body);
        if (!b->failed) tail(b, so2[1]);
    }
    if (!b->failed && y >= 0) tail(b, y);
}

typedef struct family {
    const char *name;
    void (*make)(gb *b);
    int weight; /* turns in the campaign's rotation (campaign.c) */
} family;

static const family FAMILIES[] = {
    {"binary", f_binary, 2},       {"unary", f_unary, 1},     {"softmax", f_softmax, 1},
    {"layernorm", f_layernorm, 1}, {"reduce", f_reduce, 1},   {"transpose", f_transpose, 3},
    {"concat", f_concat, 2},       {"split", f_split, 2},     {"slice", f_slice, 2},
    {"gather", f_gather, 1},       {"expand", f_expand, 1},   {"pad", f_pad, 2},
    {"resize", f_resize, 1},       {"batchnorm", f_batchnorm, 1}, {"conv", f_conv, 2},
    {"convtranspose", f_convtranspose, 1}, {"matmul", f_matmul, 2}, {"pool", f_pool, 1},
    {"fusion", f_fusion, 3},       {"gelu", f_gelu, 1},       {"band", f_band, 1},
    {"upsample", f_upsample, 1},   {"control", f_control, 1}, {"quant", f_quant, 2},    {"qdq8", f_qdq8, 2},
    {"half", f_half, 2},
};
#define NFAM ((int)(sizeof FAMILIES / sizeof *FAMILIES))

int ts_fuzz_families(void) { return NFAM; }
int ts_fuzz_family_weight(int f) { return f >= 0 && f < NFAM ? FAMILIES[f].weight : 0; }
const char *ts_fuzz_family_name(int f) { return f >= 0 && f < NFAM ? FAMILIES[f].name : "?"; }

ts_graph *ts_fuzz_runtime_graph(uint64_t seed, int family, ts_error *err)
{
    gb b = {.rng = seed, .err = err};
    if (family < 0 || family >= NFAM) family = rnd(&b, NFAM);
    if (!(b.g = ts_graph_new("fuzz_rt", 17))) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    FAMILIES[family].make(&b);
    /* every value nothing reads is an output */
    const ts_graph *g = b.g;
    for (int v = 0; v < g->nvalues && !b.failed; v++) {
        if (g->values[v].constant || g->values[v].producer < 0) continue;
        bool read = false;
        for (int n = 0; n < g->nnodes && !read; n++)
            for (int j = 0; j < g->nodes[n].ninputs; j++) read |= g->nodes[n].inputs[j] == v;
        if (!read && ts_graph_add_output(b.g, v, err)) b.failed = true;
    }
    if (!b.failed && ts_graph_validate(b.g, err)) b.failed = true;
    if (b.failed) {
        ts_error_prefix(err, "fuzz runtime graph %016llx (%s)", (unsigned long long)seed, FAMILIES[family].name);
        ts_graph_free(b.g);
        return NULL;
    }
    return b.g;
}
