/* Concrete check of the axioms (paper section 3, "validate operator
 * properties"): every axiom is evaluated, both sides, for every combination
 * of tensor shapes with each dimension in 1..max_dim and every parameter
 * value, with tsopt's own reference kernels.
 *
 * Arithmetic.  The paper elaborates the operators into symbolic real
 * expressions and asks Z3 for validity.  We run the real kernels (so the
 * axioms are checked against the operators tsopt executes, not against a
 * second implementation of them) in the float64 domain on random integer
 * inputs in [-4, 4].  Sums and products of such integers stay far below 2^53,
 * so every value is computed exactly: this is real arithmetic evaluated at
 * random integer points, i.e. a Schwartz-Zippel test of the polynomial
 * identity (relu, max: exact piecewise-linear).  The only inexact values are
 * the 1/(kh*kw) of average pooling and Cpool, compared with a relative
 * tolerance of 1e-9, which no wrong axiom with integer data can meet by
 * accident (differences are multiples of 1/(kh*kw)^2).
 *
 * Semantics the check fixes for the rule atoms (docs/taso.md):
 * - conv/pool "same": symmetric pads (k-1)/2, odd kernels only (an even
 *   kernel with "same" is undefined); "valid": no padding;
 * - poolavg counts the padding (count_include_pad = 1), as a convolution
 *   with Cpool does;
 * - enlarge ?w ?r: zero-pads w's kernel, centred, to r's kernel size (the
 *   size difference must be even and >= 0);
 * - ewadd/ewmul take same-shape operands, smul a tensor and a rank-0 scalar,
 *   transpose and matmul rank-2 tensors, conv and pools rank-4 NCHW;
 * - split0/split1 cut at the point of the concat they are applied to.
 * A combination where either side is undefined (shapes do not fit) is
 * counted as skipped, not as an obligation.
 *
 * The nodes of each atom come from its row of the atom table (rules/atom.h,
 * `build` in the theory's reading), the constants' values from its `fill`:
 * the axioms are checked against the very nodes the applier builds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "rules/atom.h"
#include "taso/verify.h"
#include "util/hash.h"

#define MAX_BIND 12
#define MAX_DIMNAMES 16
#define MAX_PVARS 8
#define WIDE_EXTRA 3

typedef struct binding {
    char name[24]; /* variable name, or a constant's atom */
    ts_rop cop;    /* constant op, TS_ROP_VAR for a variable */
    char spec[64]; /* the shape template */
    ts_shape shape;
    ts_tensor *t;
    int value; /* graph value id */
    /* spec "kernel": a constant kernel (Iconv, Cpool) built per use, C x C
     * x k x k for the C channels of the conv input it is applied to, so one
     * axiom can use it at several channel counts (W14) */
    bool per_use;
    /* "const=NAME": a constant (an attribute read from it: layernorm's
     * epsilon), values 1..4; "index=NAME": int64 indices (gather) in
     * [-m, m) for m the smallest named dimension of the point */
    bool konst, index;
} binding;

typedef struct pvar {
    char name[24];
    unsigned slot;
    int value; /* stride, 0 same / 1 valid, 0 none / 1 relu, axis, kernel */
} pvar;

typedef struct ctx {
    binding b[MAX_BIND];
    int nb;
    pvar pv[MAX_PVARS];
    int npv;
    char dn[MAX_DIMNAMES][16]; /* named dimensions */
    int dv[MAX_DIMNAMES];
    /* "wide=h,wd": these dims range over 1..max_dim+WIDE_EXTRA (window
     * geometry needs images larger than the kernel: borders, stride parity) */
    bool wide[MAX_DIMNAMES];
    int ndn;
    bool uses_base, uses_e, uses_f;
    int rmin, rmax, rank;
    int base[TS_MAX_RANK], e, f;
    bool tf_same;
    /* "guard=shape": the axiom holds where both sides are defined AND have
     * the same shape (a window axiom whose kernel sizes must agree, which
     * the shape-free theory cannot say); other points are skipped. */
    bool guard_shape;
    ts_graph *g;
    ts_rbuild rb; /* builds the atoms' nodes into g (rules/atom.h) */
} ctx;

/* ------------------------------------------------------------ templates */

static int dim_index(ctx *c, const char *name, bool add)
{
    for (int i = 0; i < c->ndn; i++)
        if (!strcmp(c->dn[i], name)) return i;
    if (!add || c->ndn == MAX_DIMNAMES) return -1;
    snprintf(c->dn[c->ndn], sizeof c->dn[0], "%s", name);
    return c->ndn++;
}

static pvar *find_pvar(ctx *c, const char *name)
{
    for (int i = 0; i < c->npv; i++)
        if (!strcmp(c->pv[i].name, name)) return &c->pv[i];
    return NULL;
}

static ts_status collect_pvars(ctx *c, const ts_aterm *t, ts_error *err)
{
    if (t->kind == TS_AT_PVAR && !find_pvar(c, t->name)) {
        if (c->npv == MAX_PVARS) return ts_error_set(err, TS_ERR_INVALID, "too many parameter variables");
        snprintf(c->pv[c->npv].name, sizeof c->pv[0].name, "%s", t->name);
        c->pv[c->npv++].slot = t->slot;
    }
    for (int i = 0; i < t->np; i++)
        if (collect_pvars(c, t->p[i], err)) return err->code;
    for (int i = 0; i < t->nt; i++)
        if (collect_pvars(c, t->t[i], err)) return err->code;
    return TS_OK;
}

static ts_status parse_shapes(ctx *c, const char *shapes, ts_error *err)
{
    c->rmin = 1;
    c->rmax = 4;
    const char *s = shapes;
    while (*s) {
        while (*s == ' ') s++;
        if (!*s) break;
        char item[96];
        size_t k = 0;
        while (*s && *s != ' ' && k + 1 < sizeof item) item[k++] = *s++;
        item[k] = 0;
        if (sscanf(item, "rank=%d-%d", &c->rmin, &c->rmax) == 2) continue;
        if (!strncmp(item, "wide=", 5)) {
            char *save = NULL;
            for (char *tok = strtok_r(item + 5, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int d = dim_index(c, tok, true);
                if (d < 0) return ts_error_set(err, TS_ERR_PARSE, "too many dimension names in '%s'", shapes);
                c->wide[d] = true;
            }
            continue;
        }
        if (!strcmp(item, "guard=shape")) {
            c->guard_shape = true;
            continue;
        }
        if (!strncmp(item, "const=", 6) || !strncmp(item, "index=", 6)) {
            binding *b = NULL;
            for (int i = 0; i < c->nb && !b; i++)
                if (!strcmp(c->b[i].name, item + 6)) b = &c->b[i];
            if (!b) return ts_error_set(err, TS_ERR_PARSE, "'%s' names no variable declared before it", item);
            *(item[0] == 'c' ? &b->konst : &b->index) = true;
            continue;
        }
        char *colon = strchr(item, ':');
        if (!colon || c->nb == MAX_BIND) return ts_error_set(err, TS_ERR_PARSE, "shape item '%s' is malformed", item);
        *colon = 0;
        binding *b = &c->b[c->nb++];
        snprintf(b->name, sizeof b->name, "%.23s", item);
        snprintf(b->spec, sizeof b->spec, "%s", colon + 1);
        ts_rop op = ts_rop_from_atom(item);
        b->cop = op != TS_ROP_COUNT && ts_rop_info(op)->constant ? op : TS_ROP_VAR;
        if (!strcmp(b->spec, "kernel")) {
            if (ts_rop_info(b->cop)->cshape != TS_RCONST_KERNEL)
                return ts_error_set(err, TS_ERR_PARSE, "'%s:kernel': only Iconv and Cpool", item);
            b->per_use = true;
            continue;
        }
        if (b->spec[0] == '@') {
            c->uses_base = true;
            if (strchr(b->spec + 1, 'a') || strchr(b->spec + 1, '0')) c->uses_e = true;
            if (strchr(b->spec + 1, '1') || strchr(b->spec + 1, 'A')) c->uses_f = true;
            continue;
        }
        char tmp[64], *save = NULL;
        snprintf(tmp, sizeof tmp, "%s", b->spec);
        for (char *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            if (tok[0] != '?' && (tok[0] < '0' || tok[0] > '9') && dim_index(c, tok, true) < 0)
                return ts_error_set(err, TS_ERR_PARSE, "too many dimension names in '%s'", shapes);
    }
    return TS_OK;
}

/* The shape of b under the current enumeration point; false if undefined. */
static bool resolve_shape(ctx *c, binding *b)
{
    ts_shape *s = &b->shape;
    memset(s, 0, sizeof *s);
    if (b->per_use) return true;
    if (b->spec[0] == '@') {
        s->rank = c->rank;
        for (int i = 0; i < c->rank; i++) s->dims[i] = c->base[i];
        const char *m = b->spec + 1;
        if (*m == 'a' || *m == 'A') { /* axis ?a resized: to e, or to f for a third size */
            pvar *a = find_pvar(c, "a");
            if (!a || a->value >= c->rank) return false;
            s->dims[a->value] = *m == 'a' ? c->e : c->f;
        } else {
            if (strchr(m, '0')) s->dims[0] = c->e;
            if (strchr(m, '1')) {
                if (c->rank < 2) return false;
                s->dims[1] = c->f;
            }
        }
        return true;
    }
    char tmp[64], *save = NULL;
    snprintf(tmp, sizeof tmp, "%s", b->spec);
    for (char *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (tok[0] == '?') {
            pvar *p = find_pvar(c, tok + 1);
            if (!p) return false;
            v = p->value;
        } else if (tok[0] >= '0' && tok[0] <= '9') {
            v = atoi(tok);
        } else {
            v = c->dv[dim_index(c, tok, false)];
        }
        s->dims[s->rank++] = v;
    }
    return true;
}

/* ----------------------------------------------------------- tensors */

/* Fills a constant by its definition (its row of the atom table); false
 * when undefined at this shape. */
static bool fill_constant(binding *b)
{
    ts_rparams none = {0};
    return ts_rop_table[b->cop].fill(&none, &b->t->shape, ts_num_get(TS_DOMAIN_F64), b->t->data);
}

/* ------------------------------------------------------------ graphs */

static int param_value(ctx *c, const ts_aterm *p)
{
    if (p->kind == TS_AT_PVAR) return find_pvar(c, p->name)->value;
    int v = 0, w = 0;
    switch (p->slot) {
    case TS_RPARAM_KERNEL: sscanf(p->name, "k%dx%d", &v, &w); return v; /* square kernels only here */
    case TS_RPARAM_STRIDE: sscanf(p->name, "s%d", &v); return v;
    case TS_RPARAM_PAD: return strcmp(p->name, "same") ? 1 : 0;
    case TS_RPARAM_ACT: return strcmp(p->name, "none") ? 1 : 0;
    case TS_RPARAM_MULT: sscanf(p->name, "m%d", &v); return v;
    default: sscanf(p->name, "a%d", &v); return v;
    }
}

static const ts_shape *vshape(ctx *c, int v) { return &c->g->values[v].shape; }

/* The atom's parameters: literal or bound parameter variables, by slot. */
static void rparams_of(ctx *c, const ts_aterm *t, ts_rparams *rp)
{
    memset(rp, 0, sizeof *rp);
    for (int i = 0; i < t->np; i++) {
        if (t->p[i]->kind == TS_AT_PLIT && t->p[i]->slot == TS_RPARAM_VALUE) {
            rp->value = strtof(t->p[i]->name + 1, NULL); /* "#0.5" */
            continue;
        }
        if (t->p[i]->kind == TS_AT_PLIT && t->p[i]->slot == TS_RPARAM_AXES) {
            ts_raxes_parse(t->p[i]->name, &rp->axes);
            continue;
        }
        int v = param_value(c, t->p[i]);
        switch (t->p[i]->slot) {
        case TS_RPARAM_AXES: rp->axes = v; break;
        case TS_RPARAM_KERNEL: rp->kh = rp->kw = v; break; /* square kernels only here */
        case TS_RPARAM_STRIDE: rp->stride = v; break;
        case TS_RPARAM_PAD: rp->pad = (ts_rpad)v; break;
        case TS_RPARAM_ACT: rp->act = (ts_ract)v; break;
        case TS_RPARAM_MULT: rp->mult = v; break;
        default: rp->axis = v; break;
        }
    }
}

/* Where split0/split1 of value x along `axis` cut: x must come from a
 * concat along that axis, cut between its two parts; -1 otherwise. */
static int64_t concat_point(ctx *c, int x, int axis)
{
    const ts_value *v = &c->g->values[x];
    if (v->producer < 0) return -1;
    const ts_node *n = &c->g->nodes[v->producer];
    if (n->op != &ts_op_concat || n->ninputs != 2 || axis >= v->shape.rank) return -1;
    const ts_shape *a = vshape(c, n->inputs[0]), *b = vshape(c, n->inputs[1]);
    if (a->dims[axis] + b->dims[axis] != v->shape.dims[axis]) return -1;
    for (int d = 0; d < a->rank; d++)
        if (d != axis && a->dims[d] != v->shape.dims[d]) return -1;
    return a->dims[axis];
}

static const binding *per_use_binding(const ctx *c, const ts_aterm *t)
{
    if (t->kind != TS_AT_OP || !ts_rop_info(t->op)->constant) return NULL;
    for (int i = 0; i < c->nb; i++)
        if (c->b[i].cop == t->op && c->b[i].per_use) return &c->b[i];
    return NULL;
}

/* The kernel constant t (Iconv k / Cpool k) for conv input x: C x C x k x k
 * with C = x's channels; its value id, -1 where undefined. */
static int per_use_kernel(ctx *c, const binding *pu, const ts_aterm *t, int x)
{
    const ts_shape *xs = vshape(c, x);
    if (xs->rank != 4 || t->np < 1) return -1;
    int k = param_value(c, t->p[0]);
    ts_error err = {0};
    binding b = *pu;
    b.shape = (ts_shape){.rank = 4, .dims = {xs->dims[1], xs->dims[1], k, k}};
    if (!(b.t = ts_tensor_new(TS_F64, &b.shape, &err))) return -1;
    char name[48]; /* value names are unique within a graph */
    snprintf(name, sizeof name, "%s.%d", b.name, c->g->nvalues);
    int v = fill_constant(&b) ? ts_graph_add_constant(c->g, name, b.t, &err) : -1;
    ts_tensor_unref(b.t);
    return v;
}

/* Builds t into c->g; the value id, or -1 where t is undefined. */
static int eval(ctx *c, const ts_aterm *t)
{
    if (t->kind == TS_AT_TVAR) {
        for (int i = 0; i < c->nb; i++)
            if (c->b[i].cop == TS_ROP_VAR && !strcmp(c->b[i].name, t->name)) return c->b[i].value;
        return -1;
    }
    const ts_ropinfo *info = ts_rop_info(t->op);
    if (info->constant && t->op != TS_ROP_NUM) {
        for (int i = 0; i < c->nb; i++)
            if (c->b[i].cop == t->op && !c->b[i].per_use) return c->b[i].value;
        return -1;
    }
    int a[3] = {-1, -1, -1};
    for (int i = 0; i < t->nt; i++) {
        const binding *pu = t->op == TS_ROP_CONV && i == 1 ? per_use_binding(c, t->t[1]) : NULL;
        if (pu) a[1] = per_use_kernel(c, pu, t->t[1], a[0]);
        else a[i] = eval(c, t->t[i]);
        if (a[i] < 0) return -1;
    }
    /* the atom's nodes, read as the theory means them (atom.h) */
    ts_rparams p;
    rparams_of(c, t, &p);
    c->rb.bias = -1;
    if (info->cuts && (c->rb.split_at = concat_point(c, a[0], p.axis)) < 0) return -1;
    return info->build ? info->build(&c->rb, t->op, &p, a) : -1;
}

/* ----------------------------------------------------------- the check */

typedef struct check {
    ctx c;
    const ts_axiom *ax;
    ts_aterm *lhs, *rhs;
    int trials;
    uint64_t rng;
    ts_axiom_check_stats *st;
} check;

static void describe(check *k, char *buf, size_t n)
{
    size_t off = 0;
    for (int i = 0; i < k->c.npv && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s=%d ", k->c.pv[i].name, k->c.pv[i].value);
    for (int i = 0; i < k->c.nb && off < n; i++) {
        char s[160];
        off += (size_t)snprintf(buf + off, n - off, "%s:%s ", k->c.b[i].name,
                                ts_shape_str(&k->c.b[i].shape, s, sizeof s));
    }
    if (off && off < n) buf[off - 1] = 0;
}

static void fail(check *k, const char *what)
{
    k->st->failures++;
    if (k->st->first_failure[0]) return;
    char d[400];
    describe(k, d, sizeof d);
    snprintf(k->st->first_failure, sizeof k->st->first_failure, "%s: %s at %s", k->ax->name, what, d);
}

/* One enumeration point: shapes resolved, graph built, trials run. */
static ts_status one_point(check *k, ts_error *err)
{
    ctx *c = &k->c;
    ts_status st = TS_OK;
    int nin = 0;
    ts_tensor *inputs[MAX_BIND] = {0}, *outs[2] = {0};
    c->g = ts_graph_new("axiom", 17);
    if (!c->g) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    c->rb = (ts_rbuild){.g = c->g, .theory = true, .tf_same = c->tf_same};
    for (int i = 0; i < c->nb; i++) c->b[i].t = NULL;
    bool defined = true;
    for (int i = 0; i < c->nb && defined; i++) {
        binding *b = &c->b[i];
        b->value = -1;
        if (b->per_use) continue;
        if (!resolve_shape(c, b)) {
            defined = false;
            break;
        }
        if (!(b->t = ts_tensor_new(TS_F64, &b->shape, err))) {
            st = err->code;
            goto done;
        }
        if (b->konst || b->index) {
            ts_tensor_unref(b->t);
            if (!(b->t = ts_tensor_new(b->index ? TS_I64 : TS_F64, &b->shape, err))) {
                st = err->code;
                goto done;
            }
            int64_t m = 0;
            for (int d = 0; d < c->ndn; d++)
                if (!m || c->dv[d] < m) m = c->dv[d];
            for (int64_t j = 0; j < ts_tensor_numel(b->t); j++) {
                uint64_t r = ts_rand_next(&k->rng);
                if (b->index) ((int64_t *)b->t->data)[j] = (int64_t)(r % (uint64_t)(2 * m)) - m;
                else ((double *)b->t->data)[j] = (double)(1 + r % 4);
            }
            b->value = ts_graph_add_constant(c->g, b->name, b->t, err);
        } else if (b->cop == TS_ROP_VAR) {
            b->value = ts_graph_add_input(c->g, b->name, TS_F64, &b->shape, err);
            inputs[nin++] = b->t;
        } else {
            defined = fill_constant(b);
            b->value = defined ? ts_graph_add_constant(c->g, b->name, b->t, err) : -1;
        }
        if (defined && b->value < 0) {
            st = err->code;
            goto done;
        }
    }
    int lv = defined ? eval(c, k->lhs) : -1, rv = lv >= 0 ? eval(c, k->rhs) : -1;
    if (lv < 0 || rv < 0) {
        k->st->skipped++;
        goto done;
    }
    if (c->guard_shape && !ts_shape_eq(vshape(c, lv), vshape(c, rv))) {
        k->st->skipped++;
        k->st->shape_guarded++;
        goto done;
    }
    k->st->obligations++;
    if (!ts_shape_eq(vshape(c, lv), vshape(c, rv))) {
        char a[160], b[160];
        char what[400];
        snprintf(what, sizeof what, "shapes differ (%s vs %s)", ts_shape_str(vshape(c, lv), a, sizeof a),
                 ts_shape_str(vshape(c, rv), b, sizeof b));
        fail(k, what);
        goto done;
    }
    if ((st = ts_graph_add_output(c->g, lv, err)) || (st = ts_graph_add_output(c->g, rv, err))) goto done;
    for (int trial = 0; trial < k->trials; trial++) {
        for (int i = 0; i < c->nb; i++) {
            binding *b = &c->b[i];
            if (b->cop != TS_ROP_VAR || b->konst || b->index) continue;
            double *d = b->t->data;
            for (int64_t j = 0; j < ts_tensor_numel(b->t); j++) d[j] = (double)(int)(ts_rand_next(&k->rng) % 9) - 4;
        }
        if ((st = ts_graph_run_reference(c->g, TS_DOMAIN_F64, inputs, outs, err))) {
            ts_error_prefix(err, "%s", k->ax->name);
            goto done;
        }
        const double *x = outs[0]->data, *y = outs[1]->data;
        for (int64_t j = 0; j < ts_tensor_numel(outs[0]); j++) {
            double m = fabs(x[j]) > fabs(y[j]) ? fabs(x[j]) : fabs(y[j]);
            if (fabs(x[j] - y[j]) > 1e-9 * (m > 1 ? m : 1)) {
                char what[200];
                snprintf(what, sizeof what, "element %lld: %g vs %g", (long long)j, x[j], y[j]);
                fail(k, what);
                trial = k->trials;
                break;
            }
        }
        ts_tensor_unref(outs[0]);
        ts_tensor_unref(outs[1]);
        outs[0] = outs[1] = NULL;
    }
done:
    ts_tensor_unref(outs[0]);
    ts_tensor_unref(outs[1]);
    for (int i = 0; i < c->nb; i++) {
        ts_tensor_unref(c->b[i].t);
        c->b[i].t = NULL;
    }
    ts_graph_free(c->g);
    c->g = NULL;
    return st;
}

/* Parameter domains: what the rule atoms allow (docs/rules.md). */
static int domain_size(unsigned slot) { return slot == TS_RPARAM_KERNEL || slot == TS_RPARAM_AXES ? 3 : 2; }
static int domain_value(unsigned slot, int i)
{
    switch (slot) {
    case TS_RPARAM_AXES: /* the last axis, axis 1, the last two */
        return i == 0 ? ts_raxes_bit(-1) : i == 1 ? ts_raxes_bit(1) : ts_raxes_bit(-2) | ts_raxes_bit(-1);
    case TS_RPARAM_KERNEL: return i + 1; /* k1 k2 k3 */
    case TS_RPARAM_STRIDE: return i + 1; /* s1 s2 */
    case TS_RPARAM_MULT: return i + 1;   /* m1 (depthwise) m2 */
    default: return i;                   /* same/valid, none/relu, axis 0/1 */
    }
}

ts_status ts_axiom_check(const ts_axiom *ax, const ts_axiom_check_opts *o, ts_axiom_check_stats *st,
                         ts_error *err)
{
    int max_dim = o->max_dim < 1 ? 1 : o->max_dim, trials = o->trials;
    uint64_t seed = o->seed;
    check *k = calloc(1, sizeof *k);
    if (!k) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    memset(st, 0, sizeof *st);
    k->ax = ax;
    k->st = st;
    k->trials = trials < 1 ? 1 : trials;
    k->rng = seed;
    k->c.tf_same = o->tf_same;
    ts_status s;
    if ((s = ts_aterm_parse(ax->lhs, &k->lhs, err)) || (s = ts_aterm_parse(ax->rhs, &k->rhs, err)) ||
        (s = collect_pvars(&k->c, k->lhs, err)) || (s = collect_pvars(&k->c, k->rhs, err)) ||
        (s = parse_shapes(&k->c, ax->shapes, err))) {
        ts_error_prefix(err, "axiom %s", ax->name);
        goto done;
    }
    ctx *c = &k->c;
    int rlo = c->uses_base ? c->rmin : 0, rhi = c->uses_base ? c->rmax : 0;
    for (c->rank = rlo; c->rank <= rhi && !s; c->rank++) {
        /* odometer digits: parameters, named dims, base dims, e, f */
        int nbase = c->uses_base ? c->rank + 2 : 0;
        int nfixed = c->uses_base ? c->rank + c->uses_e + c->uses_f : 0; /* digits that vary */
        int nd = c->npv + c->ndn + nfixed;
        int digit[MAX_PVARS + MAX_DIMNAMES + TS_MAX_RANK + 2] = {0};
        for (;;) {
            for (int i = 0; i < c->npv; i++) c->pv[i].value = domain_value(c->pv[i].slot, digit[i]);
            for (int i = 0; i < c->ndn; i++) c->dv[i] = digit[c->npv + i] + 1;
            for (int i = 0, j = c->npv + c->ndn; i < nbase; i++) {
                bool varies = i < c->rank || (i == c->rank && c->uses_e) || (i == c->rank + 1 && c->uses_f);
                int v = varies ? digit[j++] + 1 : 1;
                if (i < c->rank) c->base[i] = v;
                else if (i == c->rank) c->e = v;
                else c->f = v;
            }
            if ((s = one_point(k, err))) break;
            int i = 0;
            while (i < nd) {
                int lim = i < c->npv                                     ? domain_size(c->pv[i].slot)
                          : i < c->npv + c->ndn && c->wide[i - c->npv] ? max_dim + WIDE_EXTRA
                                                                       : max_dim;
                if (++digit[i] < lim) break;
                digit[i++] = 0;
            }
            if (i == nd) break;
        }
    }
    if (!s && !st->obligations)
        s = ts_error_set(err, TS_ERR_INVALID, "axiom %s: no shape combination defines both sides", ax->name);
done:
    ts_aterm_free(k->lhs);
    ts_aterm_free(k->rhs);
    free(k);
    return s;
}
