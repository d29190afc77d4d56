/* Extraction: one e-node per e-class (a selection), then the graph of the
 * selection reachable from the roots, built with the atoms' own build
 * functions (src/rules/atom_*.c, as the applier builds a rule's target).
 * Costs count ONNX nodes (cost_of).
 *
 * A selection is acyclic when no chosen e-node's children lead back to its
 * class; every selection here is kept acyclic at every step.
 * - SIMPLEST: the tree-cost fixpoint (egg's extractor), which is acyclic
 *   because a chosen e-node's children cost strictly less; then a DAG pass:
 *   a class switches to another e-node where that lowers the cost of the
 *   distinct classes reachable from the roots (a shared subterm is paid
 *   once in a graph).  The pass also runs from the original graph's own
 *   selection, and the smaller result wins.
 * - COMPLEX (most nodes, cycles broken; POLYJUICE's Algorithm 1 removes
 *   the back edges of a walk and takes the largest tree cost, but which
 *   e-nodes a walk finds cyclic depends on its path, and in a saturated
 *   e-graph, where every class holds transpose(transpose(x)) and the
 *   like, most classes came out with no e-node left): starting from the
 *   SIMPLEST selection, a walk from the roots gives each class it reaches
 *   the e-node with the largest subtree under the selection as it stands,
 *   among those whose children do not lead back to the class.
 * Ties go by a hash of the seed and the e-node.  docs/egraph.md has more. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "egraph/egraph_impl.h"
#include "rules/atom.h"
#include "util/hash.h"

typedef struct ex {
    const ts_egraph *eg;
    int nc;         /* class ids (uf.n) */
    int32_t *sel;   /* per canonical class: chosen e-node */
    uint32_t *mark; /* stamps for walks */
    uint32_t stamp;
    int32_t *stack;
    uint64_t seed;
} ex;

static int32_t F(const ex *x, int32_t c) { return ts_uf_find_const(&x->eg->uf, c); }

/* ONNX nodes the atom builds: none for a leaf, one more for a fused
 * activation (conv ... relu is a Conv and a Relu). */
static int cost_of(const ts_enode *n)
{
    if (n->op == TS_ROP_VAR) return 0;
    return 1 + ((ts_rop_table[n->op].params & TS_RPARAM_ACT) && n->p.act == TS_RACT_RELU);
}

static uint64_t tie(const ex *x, int32_t node) { return ts_hash_mix64(x->seed ^ ts_hash_mix64((uint64_t)node)); }

/* Whether class target is reachable from class from under the selection. */
static bool reaches(ex *x, int32_t from, int32_t target)
{
    uint32_t st = ++x->stamp;
    int sp = 0;
    x->stack[sp++] = F(x, from);
    while (sp) {
        int32_t c = x->stack[--sp];
        if (c == target) return true;
        if (x->mark[c] == st || x->sel[c] < 0) continue;
        x->mark[c] = st;
        const ts_enode *n = &x->eg->nodes[x->sel[c]];
        for (int i = 0; i < n->nargs; i++) {
            int32_t a = F(x, n->arg[i]);
            if (x->mark[a] != st) x->stack[sp++] = a;
        }
    }
    return false;
}

static bool makes_cycle(ex *x, int32_t c, int32_t node)
{
    const ts_enode *n = &x->eg->nodes[node];
    for (int i = 0; i < n->nargs; i++)
        if (reaches(x, n->arg[i], c)) return true;
    return false;
}

/* ONNX nodes of the distinct atoms reachable from the roots under the
 * selection. */
static int dag_size(ex *x, const int32_t *roots, int nroots)
{
    uint32_t st = ++x->stamp;
    int sp = 0, count = 0;
    for (int i = 0; i < nroots; i++) x->stack[sp++] = roots[i];
    while (sp) {
        int32_t c = x->stack[--sp];
        if (x->mark[c] == st) continue;
        x->mark[c] = st;
        const ts_enode *n = &x->eg->nodes[x->sel[c]];
        count += cost_of(n);
        for (int i = 0; i < n->nargs; i++) {
            int32_t a = F(x, n->arg[i]);
            if (x->mark[a] != st) x->stack[sp++] = a;
        }
    }
    return count;
}

/* The tree-cost fixpoint; false if a root has no finite cost. */
static bool select_simplest(ex *x, const int32_t *roots, int nroots)
{
    const ts_egraph *eg = x->eg;
    double *cost = malloc(sizeof *cost * (size_t)x->nc);
    if (!cost) return false;
    for (int c = 0; c < x->nc; c++) cost[c] = INFINITY, x->sel[c] = -1;
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t id = 0; id < eg->nnodes; id++) {
            const ts_enode *n = &eg->nodes[id];
            if (n->dead) continue;
            double k = cost_of(n);
            for (int i = 0; i < n->nargs; i++) k += cost[F(x, n->arg[i])];
            int32_t c = F(x, n->cls);
            if (k < cost[c]) {
                cost[c] = k;
                x->sel[c] = id;
                changed = true;
            } else if (k == cost[c] && k < INFINITY && id != x->sel[c] && tie(x, id) < tie(x, x->sel[c])) {
                x->sel[c] = id; /* equal cost: still acyclic (children cost less) */
            }
        }
    }
    bool ok = true;
    for (int i = 0; i < nroots; i++) ok &= cost[roots[i]] < INFINITY;
    free(cost);
    return ok;
}

/* Lowers the number of distinct atoms where one class's switch does. */
static void improve_dag(ex *x, const int32_t *roots, int nroots)
{
    const ts_egraph *eg = x->eg;
    int32_t *order = malloc(sizeof *order * (size_t)x->nc);
    if (!order) return;
    int best = dag_size(x, roots, nroots);
    for (int pass = 0; pass < 3; pass++) {
        /* the classes in use, in a walk from the roots */
        uint32_t st = ++x->stamp;
        int sp = 0, no = 0;
        for (int i = 0; i < nroots; i++) x->stack[sp++] = roots[i];
        while (sp) {
            int32_t c = x->stack[--sp];
            if (x->mark[c] == st) continue;
            x->mark[c] = st;
            order[no++] = c;
            const ts_enode *n = &eg->nodes[x->sel[c]];
            for (int i = 0; i < n->nargs; i++) x->stack[sp++] = F(x, n->arg[i]);
        }
        bool improved = false;
        for (int k = 0; k < no; k++) {
            int32_t c = order[k];
            const ts_idvec *ns = &eg->cls[c].nodes;
            for (int i = 0; i < ns->n; i++) {
                int32_t old = x->sel[c], cand = ns->v[i];
                if (cand == old || makes_cycle(x, c, cand)) continue;
                x->sel[c] = cand;
                int size = dag_size(x, roots, nroots);
                if (size < best) {
                    best = size;
                    improved = true;
                } else {
                    x->sel[c] = old;
                }
            }
        }
        if (!improved) break;
    }
    free(order);
}

/* Whether the selection reachable from the roots is acyclic (a check of
 * the argument below, cheap next to building the graph). */
static bool acyclic(ex *x, const int32_t *roots, int nroots)
{
    uint8_t *color = calloc((size_t)x->nc + 1, 1); /* 0 new, 1 on the path, 2 done */
    int32_t *path = malloc(sizeof *path * ((size_t)x->nc + 1));
    uint8_t *next = malloc((size_t)x->nc + 1); /* per path entry: the argument to visit */
    bool ok = color && path && next;
    for (int r = 0; r < nroots && ok; r++) {
        if (color[roots[r]]) continue;
        int sp = 0;
        path[sp] = roots[r], next[sp++] = 0;
        color[roots[r]] = 1;
        while (sp && ok) {
            int32_t c = path[sp - 1];
            const ts_enode *n = &x->eg->nodes[x->sel[c]];
            if (next[sp - 1] == n->nargs) {
                color[c] = 2;
                sp--;
                continue;
            }
            int32_t a = F(x, n->arg[next[sp - 1]++]);
            if (color[a] == 1) ok = false;
            else if (!color[a]) color[a] = 1, path[sp] = a, next[sp++] = 0;
        }
    }
    free(color), free(path), free(next);
    return ok;
}

/* The original graph's own selection (the e-nodes ts_egraph_from_graph
 * made, the first of each class in topological order, the tree-cost
 * choice elsewhere), improved the same way: where it ends smaller than the
 * tree-cost one, it replaces it, so SIMPLEST never has more atoms than the
 * original.  Acyclic: a class chosen this way points to classes holding an
 * earlier seed, whose choice is that seed or an earlier one. */
static bool from_seeds(ex *x, const int32_t *roots, int nroots)
{
    const ts_egraph *eg = x->eg;
    int32_t *mine = malloc(sizeof *mine * ((size_t)x->nc + 1));
    uint8_t *set = calloc((size_t)x->nc + 1, 1);
    if (!mine || !set) {
        free(mine), free(set);
        return false;
    }
    int before = dag_size(x, roots, nroots);
    memcpy(mine, x->sel, sizeof *mine * (size_t)x->nc);
    /* leaves first: a class holding a graph input is that input */
    for (int32_t id = 0; id < eg->nnodes; id++) {
        const ts_enode *n = &eg->nodes[id];
        int32_t c = F(x, n->cls);
        if (n->dead || n->op != TS_ROP_VAR || set[c]) continue;
        set[c] = 1;
        x->sel[c] = id;
    }
    for (int i = 0; i < eg->seeds.n; i++) {
        int32_t id = ts_egraph_live_node(eg, eg->seeds.v[i]);
        if (id < 0) continue;
        int32_t c = F(x, eg->nodes[id].cls);
        if (set[c]) continue;
        set[c] = 1;
        x->sel[c] = id;
    }
    if (acyclic(x, roots, nroots)) improve_dag(x, roots, nroots);
    if (!acyclic(x, roots, nroots) || dag_size(x, roots, nroots) >= before)
        memcpy(x->sel, mine, sizeof *mine * (size_t)x->nc);
    free(mine), free(set);
    return true;
}

/* ---- COMPLEX */

/* The classes reachable from e-node node's children under the selection
 * (each once), or -1 when class c is among them: choosing node for c would
 * close a cycle. */
static int subtree(ex *x, int32_t c, int32_t node)
{
    const ts_enode *n = &x->eg->nodes[node];
    uint32_t st = ++x->stamp;
    int sp = 0, count = 0;
    for (int i = 0; i < n->nargs; i++) x->stack[sp++] = F(x, n->arg[i]);
    while (sp) {
        int32_t k = x->stack[--sp];
        if (k == c) return -1;
        if (x->mark[k] == st) continue;
        x->mark[k] = st;
        count++;
        const ts_enode *m = &x->eg->nodes[x->sel[k]];
        for (int i = 0; i < m->nargs; i++) {
            int32_t a = F(x, m->arg[i]);
            if (x->mark[a] != st) x->stack[sp++] = a;
        }
    }
    return count;
}

/* Top-down from the roots, each class reached takes the e-node with the
 * largest subtree under the selection as it stands (the SIMPLEST one below
 * the classes not reached yet), among those that close no cycle; the
 * current choice closes none, so there always is one. */
static bool select_complex(ex *x, const int32_t *roots, int nroots)
{
    const ts_egraph *eg = x->eg;
    uint8_t *seen = calloc((size_t)x->nc, 1);
    int32_t *work = malloc(sizeof *work * ((size_t)eg->nnodes * 2 + (size_t)nroots + 1));
    bool ok = seen && work;
    int sp = 0;
    for (int i = nroots - 1; i >= 0 && ok; i--) work[sp++] = roots[i];
    while (ok && sp) {
        int32_t c = work[--sp];
        if (seen[c]) continue;
        seen[c] = 1;
        const ts_idvec *ns = &eg->cls[c].nodes;
        int32_t best = x->sel[c];
        int bsize = subtree(x, c, best) + cost_of(&eg->nodes[best]);
        uint64_t btie = tie(x, best);
        for (int i = 0; i < ns->n; i++) {
            int32_t id = ns->v[i];
            if (id == x->sel[c]) continue;
            int k = subtree(x, c, id);
            if (k < 0) continue;
            k += cost_of(&eg->nodes[id]);
            uint64_t t = tie(x, id);
            if (k > bsize || (k == bsize && t < btie)) best = id, bsize = k, btie = t;
        }
        x->sel[c] = best;
        const ts_enode *n = &eg->nodes[best];
        for (int a = n->nargs - 1; a >= 0; a--) {
            int32_t ch = F(x, n->arg[a]);
            if (!seen[ch]) work[sp++] = ch;
        }
    }
    free(seen), free(work);
    return ok;
}

/* ---- building the graph */

typedef struct gb {
    const ex *x;
    const ts_graph *orig;
    ts_rbuild rb;
    int *val; /* per class: the built value, -1 */
    int nsplit, capsplit;
    struct split_memo {
        int in, axis;
        int64_t at;
        int out[2];
    } *split;
    ts_error *err;
} gb;

static int emit(gb *b, int32_t c)
{
    if (b->val[c] >= 0) return b->val[c];
    const ts_egraph *eg = b->x->eg;
    const ts_enode *n = &eg->nodes[b->x->sel[c]];
    int v = -1;
    if (n->op == TS_ROP_VAR) {
        const ts_eleaf *l = &eg->leaves[n->at];
        if (!l->weight) {
            v = ts_graph_find_value(b->rb.g, l->name);
            if (v < 0)
                ts_error_set(b->err, TS_ERR_INVALID, "e-graph leaf '%s' is no input of graph '%s'", l->name,
                             b->orig->name);
        } else {
            int ov = ts_graph_find_value(b->orig, l->name);
            if ((v = ts_graph_find_value(b->rb.g, l->name)) >= 0)
                ; /* an output of the original already (build_graph) */
            else if (ov < 0 || !b->orig->values[ov].constant)
                ts_error_set(b->err, TS_ERR_INVALID, "e-graph weight '%s' is no initializer of graph '%s'", l->name,
                             b->orig->name);
            else
                v = ts_graph_add_constant(b->rb.g, l->name, b->orig->values[ov].constant, b->err);
        }
        return b->val[c] = v;
    }
    int x[2] = {-1, -1};
    for (int i = 0; i < n->nargs; i++)
        if ((x[i] = emit(b, F(b->x, n->arg[i]))) < 0) return -1;
    const ts_ropinfo *in = &ts_rop_table[n->op];
    if (in->cuts) {
        /* split0 and split1 of one cut share a Split node */
        for (int i = 0; i < b->nsplit; i++)
            if (b->split[i].in == x[0] && b->split[i].axis == n->p.axis && b->split[i].at == n->at)
                return b->val[c] = b->split[i].out[n->op == TS_ROP_SPLIT1];
        b->rb.nsplit = 0;
        b->rb.split_at = n->at;
    }
    b->rb.bias = -1;
    v = in->build(&b->rb, (ts_rop)n->op, &n->p, x);
    if (v < 0) {
        if (b->rb.err.code)
            *b->err = b->rb.err;
        else
            ts_error_set(b->err, TS_ERR_INVALID, "e-graph: %s does not build on its extracted arguments", in->atom);
        return -1;
    }
    if (in->cuts && b->rb.nsplit == 1) {
        if (b->nsplit == b->capsplit) {
            int nc = b->capsplit ? b->capsplit * 2 : 8;
            struct split_memo *p = realloc(b->split, sizeof *p * (size_t)nc);
            if (!p) {
                ts_error_set(b->err, TS_ERR_NOMEM, "out of memory extracting a graph");
                return -1;
            }
            b->split = p;
            b->capsplit = nc;
        }
        b->split[b->nsplit++] =
            (struct split_memo){x[0], n->p.axis, n->at, {b->rb.split[0].out[0], b->rb.split[0].out[1]}};
    }
    if (!ts_shape_eq(&b->rb.g->values[v].shape, &eg->cls[c].shape)) {
        ts_error_set(b->err, TS_ERR_INVALID, "e-graph: %s built a shape its e-class does not have", in->atom);
        return -1;
    }
    return b->val[c] = v;
}

/* POLYJUICE's last structural rewrite: one or two intermediate tensors
 * (chosen by the seed among the computed values that are not outputs yet)
 * become extra outputs after the roots', which keeps a compiler from
 * fusing them away. */
static ts_status expose(const ex *x, ts_graph *g, const int *val, ts_error *err)
{
    int want = 1 + (int)(ts_hash_mix64(x->seed ^ 0x5eed) & 1), got = 0;
    while (got < want) {
        int best = -1;
        uint64_t bt = 0;
        for (int c = 0; c < x->nc; c++) {
            int v = val[c];
            if (v < 0 || g->values[v].producer < 0) continue;
            bool taken = false;
            for (int k = 0; k < g->noutputs && !taken; k++) taken = g->outputs[k] == v;
            if (taken) continue;
            uint64_t t = tie(x, c ^ (int32_t)(got << 20));
            if (best < 0 || t < bt) best = v, bt = t;
        }
        if (best < 0) break;
        if (ts_graph_add_output(g, best, err)) return err ? err->code : TS_ERR_NOMEM;
        got++;
    }
    return TS_OK;
}

static ts_graph *build_graph(const ex *x, const ts_graph *orig, const int32_t *roots, int nroots, bool extra,
                             ts_error *err)
{
    ts_graph *g = ts_graph_new(orig->name, orig->opset);
    gb b = {.x = x, .orig = orig, .err = err};
    b.val = malloc(sizeof *b.val * (size_t)x->nc);
    if (!g || !b.val) goto nomem;
    for (int c = 0; c < x->nc; c++) b.val[c] = -1;
    b.rb.g = g;
    b.rb.bias = -1;
    for (int i = 0; i < orig->ninputs; i++) {
        const ts_value *v = &orig->values[orig->inputs[i]];
        if (ts_graph_add_input(g, v->name, v->dtype, &v->shape, err) < 0) goto fail;
    }
    for (int i = 0; i < nroots; i++) {
        /* an output that was an input or a weight of the original is that
         * very tensor (its name is the output's) */
        const ts_value *ov = i < orig->noutputs ? &orig->values[orig->outputs[i]] : NULL;
        if (ov && ov->producer < 0) {
            int v = ts_graph_find_value(g, ov->name);
            if (v < 0 && ov->constant) v = ts_graph_add_constant(g, ov->name, ov->constant, err);
            if (v < 0 || ts_graph_add_output(g, v, err)) goto fail;
            continue;
        }
        int v = emit(&b, roots[i]);
        if (v < 0) goto fail;
        char oname[64];
        const char *name = i < orig->noutputs ? orig->values[orig->outputs[i]].name : NULL;
        if (!name) {
            snprintf(oname, sizeof oname, "output_%d", i);
            name = oname;
        }
        /* an output that is an input, a weight or another output: a copy */
        bool taken = g->values[v].producer < 0;
        for (int k = 0; k < g->noutputs; k++) taken |= g->outputs[k] == v;
        if (taken && (v = ts_rbuild_node1(&b.rb, &ts_op_identity, &v, 1, NULL, 0)) < 0) {
            *err = b.rb.err;
            goto fail;
        }
        /* a value the builder named so moves aside (inputs and weights
         * cannot have an output's name: names in the original are unique) */
        int clash = ts_graph_find_value(g, name);
        if (clash >= 0 && clash != v) {
            char fresh[300];
            char *nn = ts_strdup(ts_graph_fresh_name(g, name, fresh, sizeof fresh));
            if (!nn) goto nomem;
            free(g->values[clash].name);
            g->values[clash].name = nn;
        }
        char *nn = ts_strdup(name);
        if (!nn) goto nomem;
        free(g->values[v].name);
        g->values[v].name = nn;
        if (ts_graph_add_output(g, v, err)) goto fail;
    }
    if (extra && expose(x, g, b.val, err)) goto fail;
    if (ts_graph_validate(g, err)) goto fail;
    free(b.val);
    free(b.split);
    return g;
nomem:
    ts_error_set(err, TS_ERR_NOMEM, "out of memory extracting a graph");
fail:
    free(b.val);
    free(b.split);
    ts_graph_free(g);
    return NULL;
}

ts_graph *ts_egraph_extract(const ts_egraph *eg, const ts_graph *original, const ts_eclass_id *roots, int nroots,
                            ts_extract_kind kind, uint64_t seed, ts_error *err)
{
    if (!eg->clean) {
        ts_error_set(err, TS_ERR_INVALID, "e-graph: extraction needs a rebuilt e-graph (ts_egraph_rebuild)");
        return NULL;
    }
    ex x = {.eg = eg, .nc = eg->uf.n, .seed = seed};
    int32_t *r = malloc(sizeof *r * ((size_t)nroots + 1));
    x.sel = malloc(sizeof *x.sel * ((size_t)x.nc + 1));
    x.mark = calloc((size_t)x.nc + 1, sizeof *x.mark);
    /* a walk pushes each class at most once per e-node argument */
    x.stack = malloc(sizeof *x.stack * ((size_t)eg->nnodes * 2 + (size_t)nroots + 1));
    ts_graph *g = NULL;
    if (!r || !x.sel || !x.mark || !x.stack) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory extracting a graph");
        goto out;
    }
    for (int i = 0; i < nroots; i++) {
        if (roots[i] < 0 || roots[i] >= x.nc) {
            ts_error_set(err, TS_ERR_INVALID, "e-graph: root %d is no e-class (%d)", i, roots[i]);
            goto out;
        }
        r[i] = F(&x, roots[i]);
    }
    if (!select_simplest(&x, r, nroots)) {
        ts_error_set(err, TS_ERR_INVALID, "e-graph: a root has no finite term to extract");
        goto out;
    }
    improve_dag(&x, r, nroots);
    if (eg->seeds.n && !from_seeds(&x, r, nroots)) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory extracting a graph");
        goto out;
    }
    if (kind == TS_EXTRACT_COMPLEX && !select_complex(&x, r, nroots)) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory extracting a graph");
        goto out;
    }
    g = build_graph(&x, original, r, nroots, kind == TS_EXTRACT_COMPLEX, err);
out:
    free(r);
    free(x.sel);
    free(x.mark);
    free(x.stack);
    return g;
}
