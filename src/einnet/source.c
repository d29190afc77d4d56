/* EinNet as a source of the optimize pipeline (src/opt/source.h).
 *
 * For each operator the expressions cover (today: Conv and ConvTranspose,
 * where the derivations differ from what the runtime already does, and
 * the band products of band.h), the
 * node's expression is searched (search.c) for derivations whose every
 * scope instantiates in standard operators (instantiate.c); each is one
 * candidate: the node replaced by its instantiation (library operators;
 * the first derivation of a small expression also as one eOperator node,
 * which the exporter writes as an ONNX function).  The driver costs,
 * dedups and keeps or drops them like any other proposal.
 *
 * The search depends only on the expression, so its results are cached
 * by fingerprint for the whole run: the driver calls propose on thousands
 * of graphs that share most of their nodes.  Each derived expression is
 * checked against the operator's own expression by exact mod-p evaluation
 * before it is ever proposed, where that is affordable, and what is built
 * from it is run once against the operator by the fast runtime at the
 * real shapes (docs/einnet.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "einnet/band.h"
#include "ein/codegen.h"
#include "einnet/derive.h"
#include "ein/instantiate.h"
#include "ir/ir.h"
#include "opt/source.h"
#include "ops/attrs.h"
#include "ops/list.h"

#define MAX_FOUND 4
#define MAX_CACHE 256
#define MAX_NAMES 64
#define CHECK_POINTS 4000000 /* evaluation points the equality check may cost */
#define EIN_TEXT_BYTES 16384
#define EOP_MAX_POINTS (1 << 22) /* evaluation points of an expression proposed as one eOperator */ /* an eOperator's expression text (the attribute's limit) */

/* How a derivation is instantiated: its MatMuls in the library and the
 * rest fused in one eOperator (ts_ein_instantiate_mixed), all in library
 * and standard operators (ts_ein_instantiate), or all one eOperator. */
enum form { FORM_MIXED, FORM_LIBRARY, FORM_EOP, NFORMS };

typedef struct cached {
    uint64_t fp;
    int nfound;
    ts_ein_found *found; /* nfound entries */
    int name[MAX_FOUND]; /* index into names */
    /* per derivation i and form f (enum form): [f * MAX_FOUND + i] */
    int verified[NFORMS * MAX_FOUND]; /* 0 not yet, 1 the instantiation ran equal, -1 it did not */
    bool loses[NFORMS * MAX_FOUND];   /* the driver costed it above the graph it rewrote */
    int form_name[NFORMS][MAX_FOUND]; /* -1: the derivation has no such form */
    double gain[NFORMS * MAX_FOUND];  /* the largest gain the driver costed it at (ms; 0 none) */
} cached;

typedef struct ein_state {
    const ts_source_env *env;
    cached cache[MAX_CACHE];
    int ncache;
    char names[MAX_NAMES][TS_OPT_NAME_MAX];
    int nnames;
    int searches, derivations, rejected; /* for debugging: the report is written at open */
    /* band products (band.c): the derivation found per expression */
    struct {
        uint64_t fp;
        bool found;
        ts_ein d;
    } band[8];
    int nband;
} ein_state;

static ts_status ein_open(const ts_source_env *env, void **out, ts_error *err)
{
    ein_state *s = calloc(1, sizeof *s);
    if (!s) return ts_error_set(err, TS_ERR_NOMEM, "out of memory opening einnet");
    s->env = env;
    *out = s;
    return TS_OK;
}

static bool accept(const ts_ein *e, void *arg)
{
    (void)arg;
    return ts_ein_instantiable(e);
}

/* The phase search's target: a regular (undilated) Conv over phase images. */
static bool accept_phases(const ts_ein *e, void *arg)
{
    (void)arg;
    return ts_ein_instantiable(e) && ts_ein_undilated_conv(e);
}

/* Which Convs get the general search (MatMul forms), a rule from
 * measurements on this CPU (docs/einnet.md, "Which MatMul forms pay"):
 * the MatMul of a derivation does the conv's multiply-adds as one GEMM,
 * which only beats oneDNN's direct convolution where that convolution is
 * poor: few output channels (less than a vector register of them, FSRCNN's
 * 12), or a wide reduction into few outputs (GCN's 256..2048 -> 21 k x 1
 * convs, FSRCNN's 56 -> 12 shrink: at least MATMUL_MIN_REDUCTION input
 * channels per output channel).  Measured losers, per operator in the
 * plan: every form at >= 64 output channels (ResNet-18's and CSRNet's
 * 3x3 convs, GCN's 64-channel 1x1 convs 0.65-0.70x at 1 thread), GCN's
 * 21 -> 21 1x1 and 1 x k convs (0.84-1.29x at 1 thread, 0.40-0.69x at 2).
 * The measured cost model, timed under load, ranks such forms cheaper
 * often enough to fill the search with them (CSRNet: the combined
 * candidate measured 2.3x slower), so they are not searched at all. */
#define MATMUL_MAX_CHANNELS 64
#define MATMUL_NARROW 16
#define MATMUL_MIN_REDUCTION 4

static bool matmul_may_pay(const ts_graph *g, const ts_node *nd, const ts_ein *e)
{
    if (nd->op != &ts_op_conv || e->out_shape.rank < 3) return true;
    const ts_shape *w = &g->values[nd->inputs[1]].shape;
    int64_t cout = w->dims[0], cin = w->dims[1]; /* output channels; input channels per group */
    if (cout >= MATMUL_MAX_CHANNELS) return false;
    return cout < MATMUL_NARROW || cin >= MATMUL_MIN_REDUCTION * cout;
}

static bool dilated(const ts_node *nd)
{
    if (nd->op != &ts_op_conv) return false;
    const ts_conv_attrs *a = nd->attrs;
    for (int d = 0; d < a->win.ndilations; d++)
        if (a->win.dilations[d] > 1) return true;
    return false;
}

static int intern(ein_state *s, const char *name)
{
    for (int i = 0; i < s->nnames; i++)
        if (!strcmp(s->names[i], name)) return i;
    if (s->nnames >= MAX_NAMES) return MAX_NAMES - 1;
    snprintf(s->names[s->nnames], TS_OPT_NAME_MAX, "%s", name);
    return s->nnames++;
}

static bool wanted(const ts_graph *g, const ts_node *nd)
{
    (void)g;
    return nd->op == &ts_op_conv || nd->op == &ts_op_conv_transpose;
}

/* The cached derivations of e, searched and checked now if new; NULL (err
 * untouched) when the cache is full or the driver's time ran out: a
 * search cut short is not cached, and each mod-p check (up to
 * CHECK_POINTS evaluations) asks the driver first. */
static cached *derive(ein_state *s, const ts_graph *g, const ts_node *nd, const ts_ein *e, ts_source_emit *emit, ts_error *err)
{
    const ts_op_desc *op = nd->op;
    uint64_t fp = ts_ein_fingerprint(e);
    for (int i = 0; i < s->ncache; i++)
        if (s->cache[i].fp == fp) return &s->cache[i];
    if (s->ncache >= MAX_CACHE || emit->stopped(emit)) return NULL;
    cached *c = &s->cache[s->ncache];
    memset(c, 0, sizeof *c);
    c->fp = fp;
    c->found = calloc(MAX_FOUND, sizeof *c->found);
    if (!c->found) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory in einnet");
        return NULL;
    }
    /* a dilated conv: first the phase search (conv over the phase images,
     * which pays on this CPU where oneDNN's dilated conv does not, CSRNet),
     * then the general one */
    ts_ein_search_opts po = {.max_depth = 7, .max_states = 500, .accept = accept_phases, .phases = true};
    ts_ein_search_opts o = {.max_depth = 7, .max_states = 2000, .accept = accept};
    ts_ein_search_stats st;
    int np = dilated(nd) ? ts_ein_search(e, &po, c->found, 1, &st) : 0;
    int n = np < 0 || !matmul_may_pay(g, nd, e) ? np : ts_ein_search(e, &o, c->found + np, MAX_FOUND - np, &st);
    if (n >= 0) n += np;
    if (n < 0) {
        free(c->found);
        ts_error_set(err, TS_ERR_NOMEM, "out of memory in einnet search");
        return NULL;
    }
    s->searches++;
    ts_ein_checker *chk = n > 0 ? ts_ein_checker_new(e, CHECK_POINTS, err) : NULL;
    for (int i = 0; i < n; i++) {
        int same = !chk || emit->stopped(emit) ? -1 : ts_ein_checker_equal(chk, &c->found[i].e, err);
        if (same < 0) {
            ts_ein_checker_free(chk);
            free(c->found);
            return NULL;
        }
        if (!same) {
            s->rejected++; /* a derivation that changed the value: never proposed */
            continue;
        }
        char kinds[48], name[TS_OPT_NAME_MAX];
        ts_ein_describe(&c->found[i].e, kinds, sizeof kinds);
        snprintf(name, sizeof name, "einnet:%s-%s", op == &ts_op_conv ? "conv" : "convt", kinds);
        c->found[c->nfound] = c->found[i];
        c->name[c->nfound] = intern(s, name);
        c->form_name[FORM_LIBRARY][c->nfound] = c->name[c->nfound];
        c->form_name[FORM_EOP][c->nfound] = c->form_name[FORM_MIXED][c->nfound] = -1;
        /* The first derivation with a MatMul also as library MatMul +
         * one eOperator for the rest (the OffsetReduce summed in one pass:
         * oneDNN's convolution with 21 output channels and a 1x11 kernel is
         * 5-7x slower than the MatMul of its derivation, GCN). */
        int nmixed = 0;
        for (int k = 0; k < c->nfound; k++) nmixed += c->form_name[FORM_MIXED][k] >= 0;
        if (nmixed < 1 && ts_ein_mixable(&c->found[i].e)) {
            snprintf(name, sizeof name, "einnet:%s-mixed-%.36s", op == &ts_op_conv ? "conv" : "convt", kinds);
            c->form_name[FORM_MIXED][c->nfound] = intern(s, name);
        }
        /* The first derivation is also proposed as one eOperator: its
         * scopes fused in one generated kernel, no intermediate tensor
         * but the scratch.  Only where it can be written (every scope has
         * a standard-operator form: the function body) and generated, and
         * only for small expressions: the stand-in for the paper's delayed
         * code generation.  A generated nest is plain loops (no blocking),
         * so a compute-bound expression loses to the library by several
         * times, and measuring it in the search would cost seconds per
         * candidate (a CSRNet conv is 1.8 G multiply-adds); below
         * EOP_MAX_POINTS the library's call and packing overhead is what
         * an eOperator can win back. */
        size_t scratch;
        ts_error gerr = {0};
        char *src = c->nfound == 0 && ts_ein_points(&c->found[i].e) <= EOP_MAX_POINTS
                        ? ts_ein_codegen(&c->found[i].e, &scratch, &gerr)
                        : NULL;
        if (src) {
            free(src);
            snprintf(name, sizeof name, "einnet:%s-eop-%.36s", op == &ts_op_conv ? "conv" : "convt", kinds);
            c->form_name[FORM_EOP][c->nfound] = intern(s, name);
        }
        c->nfound++;
    }
    ts_ein_checker_free(chk);
    s->derivations += c->nfound;
    s->ncache++;
    return c;
}

/* g with node n replaced by the instantiation of e; NULL when it does not
 * fit (err untouched) or on error (err set). */
/* Node n of g (a copy being edited: nodes are not compacted) replaced
 * by the instantiation of e in form `form`; false when it does not fit
 * (*lerr says why, or why not: NOMEM). */
static bool replace_in(ts_graph *g, int n, const ts_ein *e, const int *inputs, int form, ts_error *lerr)
{
    char prefix[200];
    snprintf(prefix, sizeof prefix, "%s.einnet", g->nodes[n].name);
    int old = g->nodes[n].outputs[0], nv = -1, first = g->nnodes;
    if (form == FORM_MIXED) {
        if (ts_ein_instantiate_mixed(e, g, inputs, prefix, &nv, lerr)) return false;
    } else if (form == FORM_EOP) { /* one eOperator node computing all of e */
        char text[EIN_TEXT_BYTES];
        if (ts_ein_to_text(e, text, sizeof text) >= sizeof text) return false;
        ts_attr at = ts_attr_string("expr", text);
        if (ts_graph_add_node(g, "tsopt.EinNetOp", prefix, inputs, e->ninputs, &at, 1, 1, NULL, &nv, lerr) < 0)
            return false;
    } else if (ts_ein_instantiate(e, g, inputs, prefix, &nv, lerr))
        return false;
    if (g->values[nv].producer < 0 || !ts_shape_eq(&g->values[nv].shape, &g->values[old].shape)) return false;
    /* an eOperator is only proposed where it can be written (as a function
     * whose body is its instantiation in standard operators) */
    for (int k = first; k < g->nnodes; k++)
        if (g->nodes[k].op == &ts_op_einnet && !ts_ein_instantiable(g->nodes[k].attrs)) return false;
    for (int i = 0; i < g->nnodes; i++) {
        ts_node *nd = &g->nodes[i];
        for (int j = 0; !nd->dead && j < nd->ninputs; j++)
            if (nd->inputs[j] == old) nd->inputs[j] = nv;
    }
    for (int j = 0; j < g->noutputs; j++)
        if (g->outputs[j] == old) {
            /* a graph output keeps its name */
            char *t = g->values[nv].name;
            g->values[nv].name = g->values[old].name;
            g->values[old].name = t;
            g->outputs[j] = nv;
        }
    g->nodes[n].dead = true;
    return true;
}

/* The edited copy made whole: weights transposed for the MatMuls folded,
 * dead nodes dropped, checked.  NULL (g freed) when it does not validate. */
static ts_graph *replace_finish(ts_graph *g, ts_error *lerr)
{
    /* post-optimization: the phase layouts of neighbouring convs cancel
     * across the Relu between them (PET's pass: chains whose composition is
     * the identity, decided by applying them), reached through the source
     * registry: einnet does not include pet/ */
    if (ts_graph_fold_constants(g, lerr) < 0 || ts_sources_tidy(g, lerr) < 0) {
        ts_graph_free(g);
        return NULL;
    }
    ts_graph_compact(g);
    if (ts_graph_validate(g, lerr)) {
        ts_graph_free(g);
        return NULL;
    }
    return g;
}

/* g with node n replaced by the instantiation of e; NULL when it does not
 * fit (err untouched) or on error (err set). */
static ts_graph *replace(const ts_graph *g0, int n, const ts_ein *e, const int *inputs, int form, ts_error *err)
{
    ts_graph *g = ts_graph_copy(g0);
    if (!g) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory in einnet");
        return NULL;
    }
    ts_error lerr = {0};
    if (!replace_in(g, n, e, inputs, form, &lerr)) {
        ts_graph_free(g);
        g = NULL;
    } else
        g = replace_finish(g, &lerr);
    if (!g && lerr.code == TS_ERR_NOMEM) *err = lerr;
    return g;
}

/* The node alone, as a graph: its constant inputs kept, the others inputs. */
static ts_graph *node_graph(const ts_graph *g, int n, ts_error *err)
{
    const ts_node *nd = &g->nodes[n];
    ts_graph *a = ts_graph_new("einnet-check", g->opset);
    if (!a) return NULL;
    int ins[EIN_MAX_INPUTS], nin = 0, out = -1;
    for (int k = 0; k < nd->ninputs && k < EIN_MAX_INPUTS && nd->inputs[k] >= 0; k++) {
        const ts_value *v = &g->values[nd->inputs[k]];
        ins[nin++] = v->constant ? ts_graph_add_constant(a, v->name, v->constant, err)
                                 : ts_graph_add_input(a, v->name, v->dtype, &v->shape, err);
        if (ins[nin - 1] < 0) goto fail;
    }
    ts_attr at[32];
    int na = nd->op->emit ? nd->op->emit(nd->attrs, at, 32) : 0;
    if (na < 0 || ts_graph_add_node(a, nd->op->name, nd->name, ins, nin, at, na, 1, NULL, &out, err) < 0 ||
        ts_graph_add_output(a, out, err))
        goto fail;
    return a;
fail:
    ts_graph_free(a);
    return NULL;
}

static ts_graph *replace(const ts_graph *g0, int n, const ts_ein *e, const int *inputs, int form, ts_error *err);

/* Runs the node and its instantiation d on one random input with the fast
 * runtime: the expression was checked mod p (where small enough), this
 * checks what was built from it, at the real shapes.  1 equal (rtol 1e-3,
 * atol 1e-4 as the final check), 0 not, -1 error. */
static int verify_local(const ts_graph *g, int n, const ts_ein *d, int form, ts_error *err)
{
    ts_error lerr = {0};
    ts_graph *a = node_graph(g, n, &lerr), *b = NULL;
    ts_tensor *in[EIN_MAX_INPUTS] = {0}, *oa = NULL, *ob = NULL;
    ts_plan *pa = NULL, *pb = NULL;
    int res = 0;
    if (!a) goto out;
    int inputs[EIN_MAX_INPUTS];
    for (int k = 0; k < a->nodes[0].ninputs; k++) inputs[k] = a->nodes[0].inputs[k];
    if (!(b = replace(a, 0, d, inputs, form, err))) {
        res = err->code ? -1 : 0;
        goto out;
    }
    uint64_t rng = 0xe1;
    for (int i = 0; i < a->ninputs; i++) {
        if (!(in[i] = ts_tensor_new(a->values[a->inputs[i]].dtype, &a->values[a->inputs[i]].shape, &lerr))) goto out;
        ts_tensor_fill_random(in[i], &rng, -1, 1);
    }
    const ts_value *ov = &a->values[a->outputs[0]];
    if (!(oa = ts_tensor_new(ov->dtype, &ov->shape, &lerr)) || !(ob = ts_tensor_new(ov->dtype, &ov->shape, &lerr)))
        goto out;
    if (ts_plan_build(a, NULL, &pa, &lerr) || ts_plan_build(b, NULL, &pb, &lerr) || ts_plan_run(pa, in, &oa, &lerr) ||
        ts_plan_run(pb, in, &ob, &lerr))
        goto out;
    double amax = 0, worst = 0;
    for (int64_t i = 0; i < ts_tensor_numel(oa); i++) {
        double x = fabs(ts_tensor_get_f64(oa, i));
        if (x > amax) amax = x;
    }
    for (int64_t i = 0; i < ts_tensor_numel(oa); i++) {
        double x = ts_tensor_get_f64(oa, i), y = ts_tensor_get_f64(ob, i);
        double sc = fabs(x - y) / (1e-4 * (amax > 1 ? amax : 1) + 1e-3 * fabs(x));
        if (!(sc <= worst)) worst = sc; /* NaN counts as worst */
    }
    res = worst <= 1;
out:
    if (lerr.code == TS_ERR_NOMEM) {
        *err = lerr;
        res = -1;
    }
    for (int i = 0; i < EIN_MAX_INPUTS; i++) ts_tensor_unref(in[i]);
    ts_tensor_unref(oa);
    ts_tensor_unref(ob);
    ts_plan_free(pa);
    ts_plan_free(pb);
    ts_graph_free(a);
    ts_graph_free(b);
    return res;
}

/* The cached entry of node n's expression, if searched; *e and inputs
 * filled. */
static cached *lookup(ein_state *s, const ts_graph *g, int n, ts_ein *e, int *inputs)
{
    ts_error lerr = {0};
    if (g->nodes[n].dead || !wanted(g, &g->nodes[n]) || ts_ein_from_node(g, n, e, inputs, &lerr)) return NULL;
    uint64_t fp = ts_ein_fingerprint(e);
    for (int i = 0; i < s->ncache; i++)
        if (s->cache[i].fp == fp) return &s->cache[i];
    return NULL;
}

/* Every operator of g replaced at once by the form of its derivation the
 * driver found cheapest (when it found one cheaper than the operator), as
 * one more candidate: the driver expands one graph at a time and costs
 * every candidate of it, so on GCN its minute went into the root's 160
 * candidates and it applied one rewrite of the twelve that pay.  Proposed
 * again after each operator that gains (the driver skips a graph it has
 * seen), so what the time limit leaves is the largest set so far. */
static ts_status propose_all_cheaper(ein_state *s, const ts_graph *g, ts_source_emit *emit, ts_error *err)
{
    ts_graph *cur = ts_graph_copy(g);
    if (!cur) return ts_error_set(err, TS_ERR_NOMEM, "out of memory in einnet");
    ts_ein e;
    int inputs[EIN_MAX_INPUTS], done = 0, nn = g->nnodes; /* the nodes appended are never operators to replace */
    ts_error lerr = {0};
    for (int n = 0; n < nn; n++) {
        cached *c = lookup(s, cur, n, &e, inputs);
        int best = -1;
        for (int v = 0; c && v < NFORMS * MAX_FOUND; v++)
            if (c->gain[v] > 0 && !c->loses[v] && c->verified[v] > 0 && (best < 0 || c->gain[v] > c->gain[best]))
                best = v;
        if (best < 0) continue;
        /* nodes appended by a failed instantiation are left unused: compact drops them */
        if (replace_in(cur, n, &c->found[best % MAX_FOUND].e, inputs, best / MAX_FOUND, &lerr)) done++;
        else if (lerr.code == TS_ERR_NOMEM)
            break;
    }
    if (lerr.code == TS_ERR_NOMEM || done < 2) {
        ts_graph_free(cur);
        if (lerr.code == TS_ERR_NOMEM) *err = lerr;
        return err->code;
    }
    if (!(cur = replace_finish(cur, &lerr))) {
        if (lerr.code == TS_ERR_NOMEM) *err = lerr;
        return err->code;
    }
    emit->fn(emit, cur, "einnet:all-cheaper", done);
    return TS_OK;
}

static bool accept_g2bmm(const ts_ein *e, void *arg)
{
    (void)arg;
    if (!ts_ein_instantiable(e)) return false;
    for (int k = 0; k < e->nscope; k++)
        if (ts_ein_scope_kind(e, k) == EIN_KIND_G2BMM || ts_ein_scope_kind(e, k) == EIN_KIND_G2BMM_T) return true;
    return false;
}

/* Longformer's band scores (MatMul of a Gather by a clamped band table,
 * band.h): the dilated G2BMM searched toward an undilated one over the
 * phases (the phase rules) and instantiated blocked (MatMul of row blocks
 * + skew), replacing the Gather and the MatMul.  The derivation is exact
 * (the rules; tests/unit/test_einnet_derive.c checks it mod p at small
 * shapes); at these sizes (67 M points) the mod-p check is skipped, and
 * the band differs from the gathered product exactly where the mask
 * makes the Softmax 0, so the driver's whole-model check (ONNX Runtime
 * and tsopt at rtol 1e-3) is the check of the written graph. */
static ts_status propose_bands(ein_state *s, const ts_graph *g, ts_source_emit *emit, ts_error *err)
{
    for (int n = 0; n < g->nnodes && !emit->stopped(emit); n++) {
        if (g->nodes[n].dead || g->nodes[n].op != &ts_op_matmul) continue;
        ts_ein_band *b = malloc(sizeof *b);
        if (!b) return ts_error_set(err, TS_ERR_NOMEM, "out of memory in einnet");
        if (!ts_ein_band_match(g, n, b)) {
            free(b);
            continue;
        }
        uint64_t fp = ts_ein_fingerprint(&b->e);
        int k = 0;
        while (k < s->nband && s->band[k].fp != fp) k++;
        if (k == s->nband && k < 8) {
            ts_ein_found *f = calloc(1, sizeof *f);
            ts_ein_search_opts o = {.max_depth = 7, .max_states = 500, .accept = accept_g2bmm, .phases = true};
            ts_ein_search_stats st;
            int nf = f ? ts_ein_search(&b->e, &o, f, 1, &st) : -1;
            if (nf < 0) {
                free(f);
                free(b);
                return ts_error_set(err, TS_ERR_NOMEM, "out of memory in einnet search");
            }
            s->band[k].fp = fp;
            s->band[k].found = nf == 1;
            if (nf == 1) s->band[k].d = f->e;
            s->nband++;
            s->searches++;
            free(f);
        }
        if (k == s->nband || !s->band[k].found) {
            free(b);
            continue;
        }
        ts_graph *ng = ts_graph_copy(g);
        ts_error lerr = {0};
        int ins[2] = {b->k, b->q}, gv = b->gather >= 0 ? g->nodes[b->gather].outputs[0] : -1;
        if (ng && replace_in(ng, n, &s->band[k].d, ins, FORM_LIBRARY, &lerr)) {
            bool used = false; /* the Gather goes with the MatMul unless something else reads it */
            for (int i = 0; i < ng->nnodes && gv >= 0; i++)
                for (int j = 0; !ng->nodes[i].dead && j < ng->nodes[i].ninputs; j++) used |= ng->nodes[i].inputs[j] == gv;
            if (!used && b->gather >= 0) ng->nodes[b->gather].dead = true;
            ng = replace_finish(ng, &lerr);
        } else {
            ts_graph_free(ng);
            ng = NULL;
        }
        free(b);
        if (!ng) {
            if (lerr.code == TS_ERR_NOMEM) return *err = lerr, err->code;
            continue;
        }
        char name[TS_OPT_NAME_MAX], kinds[48];
        ts_ein_describe(&s->band[k].d, kinds, sizeof kinds);
        snprintf(name, sizeof name, "einnet:band-%s", kinds);
        if (!emit->fn(emit, ng, s->names[intern(s, name)], 1)) return TS_OK;
    }
    return TS_OK;
}

static ts_status ein_propose(void *state, const ts_graph *g, ts_source_emit *emit, ts_error *err)
{
    ein_state *s = state;
    if (propose_bands(s, g, emit, err)) return err->code;
    int winners = 0, proposed_at = 1; /* operators of g with a cheaper form; at the last combined proposal */
    for (int n = 0; n < g->nnodes && !emit->stopped(emit); n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead || !wanted(g, nd)) continue;
        ts_ein e;
        int inputs[EIN_MAX_INPUTS];
        ts_error lerr = {0};
        if (ts_ein_from_node(g, n, &e, inputs, &lerr)) continue; /* no translation: nothing to derive */
        cached *c = derive(s, g, nd, &e, emit, err);
        if (!c) {
            if (err->code) return err->code;
            continue;
        }
        bool won = false;
        for (int j = 0; j < NFORMS * c->nfound && !emit->stopped(emit); j++) {
            int form = j / c->nfound, i = j % c->nfound, v = form * MAX_FOUND + i;
            if (c->form_name[form][i] < 0) continue;
            if (!c->verified[v]) {
                /* plans built and run at the real shapes: seconds on a 256x256 model */
                if (emit->stopped(emit)) return TS_OK;
                int ok = verify_local(g, n, &c->found[i].e, form, err);
                if (ok < 0) return err->code;
                c->verified[v] = ok ? 1 : -1;
                s->rejected += !ok;
            }
            if (c->verified[v] < 0) continue; /* an instantiation that differs is never proposed */
            /* A derivation replaces one operator by its instantiation: what it
             * gains depends on the expression (the cache key), hardly on the
             * rest of the graph.  Once it has cost more, it is not proposed
             * for that expression again -- on nasnet_a this took einnet from
             * 3-10 s per explored graph to almost nothing after the first. */
            if (c->loses[v]) continue;
            ts_graph *ng = replace(g, n, &c->found[i].e, inputs, form, err);
            if (!ng) {
                if (err->code) return err->code;
                continue;
            }
            if (!emit->fn(emit, ng, s->names[c->form_name[form][i]], 1)) return TS_OK;
            if (emit->gain <= 0) c->loses[v] = true; /* NAN (not costed) compares false */
            if (emit->gain > c->gain[v]) {
                c->gain[v] = emit->gain;
                won = true;
            }
        }
        /* when the operators with a cheaper form have doubled since the
         * last time (2, 4, 8, ...): the time limit often ends the expansion
         * of a large graph before its last operator, and each combined
         * candidate is one more graph for the driver to cost */
        if (won && ++winners >= 2 * proposed_at && !emit->stopped(emit)) {
            proposed_at = winners;
            if (propose_all_cheaper(s, g, emit, err)) return err->code;
        }
    }
    if (winners > proposed_at && proposed_at && !emit->stopped(emit) && propose_all_cheaper(s, g, emit, err))
        return err->code;
    return TS_OK;
}

static void ein_describe(void *state, char *buf, size_t n)
{
    (void)state;
    /* called when the source is opened: say what it does, not what it found */
    snprintf(buf, n, "Conv/ConvTranspose expressions searched to depth 7 (at most 2000 expressions each; dilated convs "
                     "also toward a regular Conv over phase images), derivations instantiated as MatMul + Pad/Slice/Add "
                     "or Conv + Reshape/Transpose (and small ones as one eOperator, written as an ai.tsopt function), "
                     "each checked exactly mod p first; Longformer-style band products (MatMul of a Gather by a "
                     "clamped band table, masked before Softmax) as blocked G2BMM over phases");
}

static void ein_close(void *state)
{
    ein_state *s = state;
    if (!s) return;
    for (int i = 0; i < s->ncache; i++) free(s->cache[i].found);
    free(s);
}

const ts_source ts_source_einnet = {
    .name = "einnet",
    .justification = "EinNet derivations (summation splitting, variable substitution, traversal splitting, boundary tightening, read and phase extraction), each checked by exact mod-p evaluation against the operator's expression, and its instantiation run against the operator",
    .open = ein_open,
    .propose = ein_propose,
    .describe = ein_describe,
    .close = ein_close,
};
