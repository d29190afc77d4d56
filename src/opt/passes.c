/* Graph passes (opt/passes.h): conv+batchnorm folding,
 * common-subexpression elimination, merging every MatMul or Conv that
 * shares an input into one (TASO's core merge rules applied to all
 * siblings at once, so the search need not walk through the pairwise
 * merges one at a time), and x W1 + y W2 -> [x y] [W1; W2].  Each is an
 * exhaustive application of a rule `tsopt verify` proves (core-matmul-merge,
 * core-conv-merge-*, core-matmul-sum) or plain CSE; and average pooling
 * moved after the 1x1 conv that reads it (exact by linearity, see
 * ts_swap_pool_conv; docs/taso.md "What pays on this CPU").
 *
 * Weight concatenations are built directly as constants, through the memo
 * of rules/const_cache.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "opt/passes.h"

#define PARTS_MAX 64 /* merged siblings at most */

/* ---- helpers */

static bool is_op(const ts_graph *g, int n, const ts_op_desc *op) { return !g->nodes[n].dead && g->nodes[n].op == op; }

int ts_opt_sole_user(const ts_graph *g, int v)
{
    if (ts_graph_is_output(g, v)) return -1;
    int u = -1;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead) continue;
        for (int j = 0; j < nd->ninputs; j++)
            if (nd->inputs[j] == v) {
                if (u >= 0) return -1;
                u = n;
            }
    }
    return u;
}

static const ts_tensor *f32_const(const ts_graph *g, int v, int rank)
{
    if (v < 0 || !g->values[v].constant || g->values[v].dtype != TS_F32) return NULL;
    return g->values[v].shape.rank == rank ? g->values[v].constant : NULL;
}

static int add_const(ts_graph *g, ts_tensor *t, ts_error *err) { return ts_graph_const_value(g, t, err); }

static int add_node1(ts_graph *g, const char *op, const int *in, int nin, const ts_attr *a, int na, ts_error *err)
{
    char name[64];
    int out = -1;
    if (ts_graph_add_node(g, op, ts_graph_fresh_name(g, "taso_merge", name, sizeof name), in, nin, a, na, 1, NULL, &out,
                          err) < 0)
        return -1;
    return out;
}

/* Split of x along axis into pieces of the given sizes; outputs to out[]. */
static bool add_split(ts_graph *g, int x, int axis, const int64_t *sizes, int n, int *out, ts_error *err)
{
    ts_attr a[2];
    int na = 0, in[2] = {x, -1}, nin = 1;
    a[na++] = ts_attr_int("axis", axis);
    if (g->opset >= 13) {
        /* opset 13 moved the sizes from an attribute to an input */
        int64_t nn = n;
        ts_shape s = ts_shape_make(1, &nn);
        ts_tensor *t = ts_tensor_new(TS_I64, &s, err);
        if (!t) return false;
        memcpy(t->data, sizes, sizeof(int64_t) * (size_t)n);
        if ((in[1] = add_const(g, t, err)) < 0) return false;
        nin = 2;
    } else {
        a[na++] = ts_attr_ints("split", sizes, n);
    }
    char name[64];
    return ts_graph_add_node(g, "Split", ts_graph_fresh_name(g, "taso_split", name, sizeof name), in, nin, a, na, n, NULL, out,
                             err) >= 0;
}

static void redirect(ts_graph *g, int from, int to)
{
    for (int n = 0; n < g->nnodes; n++) {
        ts_node *nd = &g->nodes[n];
        if (nd->dead) continue;
        for (int j = 0; j < nd->ninputs; j++)
            if (nd->inputs[j] == from) nd->inputs[j] = to;
    }
}

/* Bias vectors (zeros where a member has none) concatenated. */
static int concat_biases(ts_graph *g, const int *bias, const int64_t *sizes, int n, ts_const_cache *cc, ts_error *err)
{
    bool any = false;
    for (int i = 0; i < n; i++) any |= bias[i] >= 0;
    if (!any) return -2;
    ts_tensor *part[PARTS_MAX], *zero[PARTS_MAX] = {0};
    for (int i = 0; i < n; i++) {
        if (bias[i] >= 0) {
            part[i] = g->values[bias[i]].constant;
            continue;
        }
        ts_shape s = ts_shape_make(1, &sizes[i]);
        if (!(zero[i] = part[i] = ts_tensor_new(TS_F32, &s, err))) {
            for (int k = 0; k < i; k++) ts_tensor_unref(zero[k]);
            return -1;
        }
    }
    /* parts with fresh zero tensors never hit the memo; don't fill it */
    bool fresh = false;
    for (int i = 0; i < n; i++) fresh |= zero[i] != NULL;
    ts_tensor *t = ts_const_concat(fresh ? NULL : cc, part, n, 0, err);
    for (int i = 0; i < n; i++) ts_tensor_unref(zero[i]);
    return add_const(g, t, err);
}

/* ---- sibling merge */

typedef struct member {
    int node, extra; /* MatMul/Conv; its bias Add or Relu (-1 none) */
    int tail;        /* the value its users read */
    int bias;        /* constant bias value or -1 */
} member;

/* MatMul x W (constant 2-D W), with an optional Add of a constant bias
 * vector after it as its only user. */
static bool matmul_member(const ts_graph *g, int n, int x, member *m)
{
    const ts_node *nd = &g->nodes[n];
    if (!is_op(g, n, &ts_op_matmul) || nd->inputs[0] != x || !f32_const(g, nd->inputs[1], 2)) return false;
    int xr = g->values[x].shape.rank, y = nd->outputs[0];
    if ((xr != 2 && xr != 3) || g->values[x].dtype != TS_F32 || ts_graph_is_output(g, y)) return false;
    *m = (member){n, -1, y, -1};
    int a = ts_opt_sole_user(g, y);
    if (a >= 0 && is_op(g, a, &ts_op_add)) {
        const ts_node *ad = &g->nodes[a];
        int other = ad->inputs[0] == y ? ad->inputs[1] : ad->inputs[0];
        int64_t N = g->values[nd->inputs[1]].shape.dims[1];
        if (ad->ninputs == 2 && other != y && f32_const(g, other, 1) && g->values[other].shape.dims[0] == N &&
            ts_shape_eq(&g->values[ad->outputs[0]].shape, &g->values[y].shape)) {
            if (ts_graph_is_output(g, ad->outputs[0])) return false;
            *m = (member){n, a, ad->outputs[0], other};
        }
    }
    return true;
}

/* Conv (group 1, constant weight and bias) on x, with an optional Relu
 * after it as its only user. */
static bool conv_member(const ts_graph *g, int n, int x, member *m)
{
    const ts_node *nd = &g->nodes[n];
    if (!is_op(g, n, &ts_op_conv) || nd->inputs[0] != x || !f32_const(g, nd->inputs[1], 4)) return false;
    const ts_conv_attrs *ca = nd->attrs;
    if (ca->group != 1 || g->values[x].shape.rank != 4) return false;
    int bias = nd->ninputs > 2 ? nd->inputs[2] : -1;
    if (bias >= 0 && !f32_const(g, bias, 1)) return false;
    int y = nd->outputs[0];
    if (ts_graph_is_output(g, y)) return false;
    *m = (member){n, -1, y, bias};
    int r = ts_opt_sole_user(g, y);
    if (r >= 0 && is_op(g, r, &ts_op_relu)) {
        if (ts_graph_is_output(g, g->nodes[r].outputs[0])) return false;
        m->extra = r;
        m->tail = g->nodes[r].outputs[0];
    }
    return true;
}

/* Whether two conv members can share one Conv: same window and attributes,
 * same kernel size, both with or both without the Relu. */
static bool conv_compatible(const ts_graph *g, const member *a, const member *b)
{
    const ts_node *x = &g->nodes[a->node], *y = &g->nodes[b->node];
    const ts_shape *wx = &g->values[x->inputs[1]].shape, *wy = &g->values[y->inputs[1]].shape;
    bool same_attrs = !x->op->attr_size || !memcmp(x->attrs, y->attrs, x->op->attr_size);
    return (a->extra >= 0) == (b->extra >= 0) && same_attrs &&
           wx->dims[1] == wy->dims[1] && wx->dims[2] == wy->dims[2] && wx->dims[3] == wy->dims[3];
}

static int merge_group(ts_graph *g, int x, member *m, int n, bool conv, ts_const_cache *cc, ts_error *err)
{
    ts_tensor *w[PARTS_MAX] = {0};
    int64_t sizes[PARTS_MAX];
    int bias[PARTS_MAX];
    for (int i = 0; i < n; i++) {
        const ts_node *nd = &g->nodes[m[i].node];
        w[i] = g->values[nd->inputs[1]].constant;
        sizes[i] = g->values[nd->inputs[1]].shape.dims[conv ? 0 : 1];
        bias[i] = m[i].bias;
    }
    int wv = add_const(g, ts_const_concat(cc, w, n, conv ? 0 : 1, err), err);
    if (wv < 0) return -1;
    int bv = concat_biases(g, bias, sizes, n, cc, err);
    if (bv == -1) return -1;
    int y;
    if (conv) {
        ts_attr a[12];
        const ts_node *first = &g->nodes[m[0].node];
        int na = first->op->emit(first->attrs, a, 12);
        int in[3] = {x, wv, bv};
        y = add_node1(g, "Conv", in, bv >= 0 ? 3 : 2, a, na, err);
        if (y >= 0 && m[0].extra >= 0) y = add_node1(g, "Relu", &y, 1, NULL, 0, err);
    } else {
        int in[2] = {x, wv};
        y = add_node1(g, "MatMul", in, 2, NULL, 0, err);
        if (y >= 0 && bv >= 0) {
            int ain[2] = {y, bv};
            y = add_node1(g, "Add", ain, 2, NULL, 0, err);
        }
    }
    if (y < 0) return -1;
    int out[PARTS_MAX];
    int axis = conv ? 1 : g->values[y].shape.rank - 1;
    if (!add_split(g, y, axis, sizes, n, out, err)) return -1;
    for (int i = 0; i < n; i++) {
        redirect(g, m[i].tail, out[i]);
        g->nodes[m[i].node].dead = true;
        if (m[i].extra >= 0) g->nodes[m[i].extra].dead = true;
    }
    return 1;
}

/* Merges the siblings reading value x; returns groups merged or -1. */
static int merge_at(ts_graph *g, int x, ts_const_cache *cc, ts_error *err)
{
    member mm[PARTS_MAX], cv[PARTS_MAX];
    int nmm = 0, ncv = 0, merged = 0;
    int nnodes = g->nnodes; /* nodes added by merging are not members */
    for (int n = 0; n < nnodes; n++) {
        member m;
        if (nmm < PARTS_MAX && matmul_member(g, n, x, &m)) mm[nmm++] = m;
        else if (ncv < PARTS_MAX && conv_member(g, n, x, &m)) cv[ncv++] = m;
    }
    if (nmm >= 2) {
        int r = merge_group(g, x, mm, nmm, false, cc, err);
        if (r < 0) return -1;
        merged += r;
    }
    /* convs: one group per compatible class */
    bool used[PARTS_MAX] = {0};
    for (int i = 0; i < ncv; i++) {
        if (used[i]) continue;
        member grp[PARTS_MAX];
        int k = 0;
        for (int j = i; j < ncv; j++)
            if (!used[j] && conv_compatible(g, &cv[i], &cv[j])) {
                used[j] = true;
                grp[k++] = cv[j];
            }
        if (k < 2) continue;
        int r = merge_group(g, x, grp, k, true, cc, err);
        if (r < 0) return -1;
        merged += r;
    }
    return merged;
}

static int finish(ts_graph *g, int count, ts_error *err)
{
    if (count <= 0) return count;
    ts_graph_compact(g);
    if (ts_graph_validate(g, err)) return -1;
    return count;
}

int ts_merge_siblings(ts_graph *g, int value, ts_const_cache *cc, ts_error *err)
{
    int total = 0, nv = g->nvalues;
    for (int v = value >= 0 ? value : 0; v < (value >= 0 ? value + 1 : nv); v++) {
        if (g->values[v].constant) continue;
        int r = merge_at(g, v, cc, err);
        if (r < 0) return -1;
        total += r;
    }
    return finish(g, total, err);
}

int ts_merge_candidates(const ts_graph *g, int *values, int max)
{
    int k = 0;
    for (int v = 0; v < g->nvalues && k < max; v++) {
        if (g->values[v].constant) continue;
        int nmm = 0, ncv = 0;
        for (int n = 0; n < g->nnodes; n++) {
            member m;
            if (g->nodes[n].dead || g->nodes[n].ninputs < 1 || g->nodes[n].inputs[0] != v) continue;
            if (matmul_member(g, n, v, &m)) nmm++;
            else if (conv_member(g, n, v, &m)) ncv++;
        }
        if (nmm >= 2 || ncv >= 2) values[k++] = v;
    }
    return k;
}

/* ---- MatMuls sharing a weight: x1 W, x2 W -> [x1; x2] W (rows stacked) */

/* Marks in mark[] every node reachable from value v's users. */
static void descendants(const ts_graph *g, int v, char *mark, int *stack)
{
    int sp = 0;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead || mark[n]) continue;
        for (int j = 0; j < nd->ninputs; j++)
            if (nd->inputs[j] == v) {
                mark[n] = 1;
                stack[sp++] = n;
                break;
            }
    }
    while (sp > 0) {
        const ts_node *nd = &g->nodes[stack[--sp]];
        for (int o = 0; o < nd->noutputs; o++)
            for (int n = 0; n < g->nnodes; n++) {
                const ts_node *u = &g->nodes[n];
                if (u->dead || mark[n]) continue;
                for (int j = 0; j < u->ninputs; j++)
                    if (u->inputs[j] == nd->outputs[o]) {
                        mark[n] = 1;
                        stack[sp++] = n;
                        break;
                    }
            }
    }
}

/* A MatMul that can join a row-stacked group: constant 2-D weight, 2-D
 * left operand. */
static bool stack_member(const ts_graph *g, int n)
{
    const ts_node *nd = &g->nodes[n];
    if (!is_op(g, n, &ts_op_matmul) || !f32_const(g, nd->inputs[1], 2)) return false;
    const ts_value *x = &g->values[nd->inputs[0]];
    return !x->constant && x->shape.rank == 2 && x->dtype == TS_F32 && !ts_graph_is_output(g, nd->outputs[0]);
}

int ts_merge_shared_weights(ts_graph *g, ts_const_cache *cc, ts_error *err)
{
    (void)cc;
    int total = 0, nnodes = g->nnodes;
    char *done = calloc((size_t)nnodes + 1, 1), *desc = calloc((size_t)nnodes + 1, 1);
    int *stack = malloc(sizeof(int) * ((size_t)nnodes + 1));
    if (!done || !desc || !stack) {
        free(done);
        free(desc);
        free(stack);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory stacking matmuls"), -1;
    }
    for (int a = 0; a < nnodes; a++) {
        if (done[a] || !stack_member(g, a)) continue;
        const ts_tensor *w = g->values[g->nodes[a].inputs[1]].constant;
        int mem[PARTS_MAX], nm = 0, same = 0;
        for (int b = a + 1; b < nnodes && !same; b++)
            same = !done[b] && stack_member(g, b) && g->values[g->nodes[b].inputs[1]].constant == w;
        if (!same) continue; /* the reachability walk below only when there is a group */
        /* members must be independent: none may read (through any path)
         * another's output, or the stacked MatMul would feed itself.  The
         * walk covers the nodes earlier groups added: size by the count now */
        int cur = g->nnodes;
        char *nd = realloc(desc, (size_t)cur + 1);
        int *ns = nd ? realloc(stack, sizeof(int) * ((size_t)cur + 1)) : NULL;
        if (nd) desc = nd;
        if (ns) stack = ns;
        if (!nd || !ns) {
            total = -1;
            ts_error_set(err, TS_ERR_NOMEM, "out of memory stacking matmuls");
            break;
        }
        memset(desc, 0, (size_t)cur + 1);
        for (int b = a; b < nnodes && nm < PARTS_MAX; b++) {
            if (done[b] || !stack_member(g, b) || g->values[g->nodes[b].inputs[1]].constant != w) continue;
            if (desc[b]) continue;
            int xb = g->nodes[b].inputs[0], pb = g->values[xb].producer;
            if (pb >= 0 && desc[pb]) continue;
            /* b must not be an ancestor of a member already taken */
            char *mine = calloc((size_t)cur + 1, 1);
            if (!mine) break;
            descendants(g, g->nodes[b].outputs[0], mine, stack);
            bool ok = true;
            for (int k = 0; k < nm && ok; k++) ok = !mine[mem[k]];
            if (ok) {
                mem[nm++] = b;
                for (int n = 0; n < cur; n++) desc[n] |= mine[n];
            }
            free(mine);
        }
        if (nm < 2) continue;
        int xs[PARTS_MAX], out[PARTS_MAX];
        int64_t sizes[PARTS_MAX];
        for (int k = 0; k < nm; k++) {
            done[mem[k]] = 1;
            xs[k] = g->nodes[mem[k]].inputs[0];
            sizes[k] = g->values[xs[k]].shape.dims[0];
        }
        ts_attr ax = ts_attr_int("axis", 0);
        int cat = add_node1(g, "Concat", xs, nm, &ax, 1, err);
        int in[2] = {cat, g->nodes[mem[0]].inputs[1]};
        int y = cat >= 0 ? add_node1(g, "MatMul", in, 2, NULL, 0, err) : -1;
        if (y < 0 || !add_split(g, y, 0, sizes, nm, out, err)) {
            total = -1;
            break;
        }
        for (int k = 0; k < nm; k++) {
            redirect(g, g->nodes[mem[k]].outputs[0], out[k]);
            g->nodes[mem[k]].dead = true;
        }
        total++;
    }
    free(done);
    free(desc);
    free(stack);
    return total < 0 ? -1 : finish(g, total, err);
}

/* ---- x W1 + y W2 -> [x y] [W1; W2] */

int ts_merge_matmul_sums(ts_graph *g, ts_const_cache *cc, ts_error *err)
{
    int total = 0, nnodes = g->nnodes;
    /* one Concat per (x, y) pair, so that its MatMuls become siblings */
    int ncat = 0, cap = 0, (*cat)[3] = NULL;
    for (int a = 0; a < nnodes; a++) {
        if (!is_op(g, a, &ts_op_add) || g->nodes[a].ninputs != 2) continue;
        int y = g->nodes[a].outputs[0];
        if (ts_graph_is_output(g, y)) continue;
        int mm[2], in[2];
        const ts_tensor *w[2];
        bool ok = true;
        for (int k = 0; k < 2 && ok; k++) {
            int v = g->nodes[a].inputs[k];
            mm[k] = g->values[v].producer;
            ok = mm[k] >= 0 && is_op(g, mm[k], &ts_op_matmul) && ts_opt_sole_user(g, v) == a;
            if (!ok) break;
            in[k] = g->nodes[mm[k]].inputs[0];
            w[k] = f32_const(g, g->nodes[mm[k]].inputs[1], 2);
            int r = g->values[in[k]].shape.rank;
            ok = w[k] && (r == 2 || r == 3) && g->values[in[k]].dtype == TS_F32;
        }
        if (!ok || mm[0] == mm[1]) continue;
        const ts_shape *s0 = &g->values[in[0]].shape, *s1 = &g->values[in[1]].shape;
        bool fit = s0->rank == s1->rank && w[0]->shape.dims[1] == w[1]->shape.dims[1];
        for (int d = 0; fit && d < s0->rank - 1; d++) fit = s0->dims[d] == s1->dims[d];
        if (!fit || !ts_shape_eq(&g->values[y].shape, &g->values[g->nodes[a].inputs[0]].shape)) continue;
        int c = -1;
        for (int i = 0; i < ncat; i++)
            if (cat[i][0] == in[0] && cat[i][1] == in[1]) c = cat[i][2];
        if (c < 0) {
            ts_attr ax = ts_attr_int("axis", s0->rank - 1);
            if ((c = add_node1(g, "Concat", in, 2, &ax, 1, err)) < 0) goto fail;
            if (ncat == cap) {
                int nc = cap ? 2 * cap : 16;
                int(*t)[3] = realloc(cat, sizeof *cat * (size_t)nc);
                if (!t) {
                    ts_error_set(err, TS_ERR_NOMEM, "out of memory merging matmuls");
                    goto fail;
                }
                cat = t;
                cap = nc;
            }
            cat[ncat][0] = in[0], cat[ncat][1] = in[1], cat[ncat][2] = c;
            ncat++;
        }
        ts_tensor *parts[2] = {(ts_tensor *)w[0], (ts_tensor *)w[1]};
        int wv = add_const(g, ts_const_concat(cc, parts, 2, 0, err), err);
        if (wv < 0) goto fail;
        int min[2] = {c, wv};
        int z = add_node1(g, "MatMul", min, 2, NULL, 0, err);
        if (z < 0) goto fail;
        redirect(g, y, z);
        g->nodes[a].dead = g->nodes[mm[0]].dead = g->nodes[mm[1]].dead = true;
        total++;
    }
    free(cat);
    return finish(g, total, err);
fail:
    free(cat);
    return -1;
}

/* ---- common subexpressions */

static bool nondeterministic(const ts_node *n) { return n->op->flags & TS_OP_RANDOM; }

/* Same value, or two constants holding the same tensor. */
static bool same_input(const ts_graph *g, int a, int b)
{
    if (a == b) return true;
    if (a < 0 || b < 0) return false;
    const ts_value *x = &g->values[a], *y = &g->values[b];
    return x->constant && x->constant == y->constant && x->dtype == y->dtype && ts_shape_eq(&x->shape, &y->shape);
}

int ts_cse(ts_graph *g, ts_error *err)
{
    int *order = malloc(sizeof(int) * ((size_t)g->nnodes + 1)), count = 0, total = 0;
    int *kept = malloc(sizeof(int) * ((size_t)g->nnodes + 1)), nk = 0;
    if (!order || !kept) {
        free(order);
        free(kept);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory in CSE"), -1;
    }
    if (ts_graph_topo_order(g, order, &count, err)) {
        free(order);
        free(kept);
        return -1;
    }
    /* in topological order, so that a node's inputs are already merged */
    for (int i = 0; i < count; i++) {
        ts_node *n = &g->nodes[order[i]];
        int dup = -1;
        if (n->ninputs > 0 && !nondeterministic(n)) {
            bool out = false;
            for (int o = 0; o < n->noutputs; o++) out |= ts_graph_is_output(g, n->outputs[o]);
            for (int k = 0; k < nk && dup < 0 && !out; k++) {
                const ts_node *m = &g->nodes[kept[k]];
                if (m->op != n->op || m->ninputs != n->ninputs || m->noutputs != n->noutputs ||
                    (n->op->attr_size && memcmp(m->attrs, n->attrs, n->op->attr_size)))
                    continue;
                bool same = true;
                for (int j = 0; j < n->ninputs && same; j++) same = same_input(g, m->inputs[j], n->inputs[j]);
                for (int o = 0; o < n->noutputs && same; o++)
                    same = g->values[m->outputs[o]].dtype == g->values[n->outputs[o]].dtype &&
                           ts_shape_eq(&g->values[m->outputs[o]].shape, &g->values[n->outputs[o]].shape);
                if (same) dup = kept[k];
            }
        }
        if (dup < 0) {
            kept[nk++] = order[i];
            continue;
        }
        for (int o = 0; o < n->noutputs; o++) redirect(g, n->outputs[o], g->nodes[dup].outputs[o]);
        n->dead = true;
        total++;
    }
    free(order);
    free(kept);
    return finish(g, total, err);
}

/* (conv + batchnorm: fold_affine.c) */


/* ---- average pooling after a 1x1 convolution */

/* Whether conv node c is a plain 1x1 channel mix: group 1, stride 1, no
 * padding or dilation, constant 1x1 weight (and constant bias if any). */
static bool pointwise_conv(const ts_graph *g, const ts_node *c)
{
    const ts_conv_attrs *ca = c->attrs;
    const ts_window *w = &ca->win;
    if (ca->group != 1 || w->auto_pad != TS_PAD_NOTSET || !f32_const(g, c->inputs[1], 4)) return false;
    const ts_shape *ws = &g->values[c->inputs[1]].shape;
    if (ws->dims[2] != 1 || ws->dims[3] != 1) return false;
    for (int i = 0; i < w->nstrides; i++)
        if (w->strides[i] != 1) return false;
    for (int i = 0; i < w->npads; i++)
        if (w->pads[i] != 0) return false;
    for (int i = 0; i < w->ndilations; i++)
        if (w->dilations[i] != 1) return false;
    return c->ninputs < 3 || c->inputs[2] < 0 || f32_const(g, c->inputs[2], 1);
}

/* Rewrites one AveragePool -> Conv pair at pool node p; 1 done, 0 not a
 * candidate, -1 error. */
static int swap_at(ts_graph *g, int p, ts_error *err)
{
    const ts_node *pn = &g->nodes[p];
    if (!is_op(g, p, &ts_op_avgpool) || pn->noutputs != 1) return 0;
    int x = pn->inputs[0], y = pn->outputs[0];
    const ts_value *xv = &g->values[x], *yv = &g->values[y];
    if (xv->dtype != TS_F32 || xv->shape.rank != 4 || yv->shape.rank != 4) return 0;
    /* the conv must not run on more pixels than before */
    if (xv->shape.dims[2] != yv->shape.dims[2] || xv->shape.dims[3] != yv->shape.dims[3] || xv->shape.dims[2] <= 0 ||
        xv->shape.dims[3] <= 0)
        return 0;
    const ts_pool_attrs *pw = pn->attrs;
    for (int i = 0; i < pw->win.nstrides; i++)
        if (pw->win.strides[i] != 1) return 0;
    int c = ts_opt_sole_user(g, y);
    if (c < 0 || !is_op(g, c, &ts_op_conv) || g->nodes[c].inputs[0] != y) return 0;
    const ts_node *cn = &g->nodes[c];
    if (!pointwise_conv(g, cn) || ts_graph_is_output(g, cn->outputs[0])) return 0;
    const ts_shape *ws = &g->values[cn->inputs[1]].shape;
    int64_t K = ws->dims[0], C = ws->dims[1];
    if (K >= C) return 0; /* pooling K channels instead of C is the whole gain */
    ts_pool_attrs pa = *(const ts_pool_attrs *)pn->attrs;
    ts_conv_attrs ca = *(const ts_conv_attrs *)cn->attrs;
    int bias = cn->ninputs > 2 ? cn->inputs[2] : -1, out = cn->outputs[0];
    /* The average of a constant is that constant only when every divisor
     * counts just the pixels inside: count_include_pad=0, or no padding and
     * no partial (ceil_mode) windows.  Otherwise the bias is added after. */
    bool pads = false;
    for (int i = 0; i < pa.win.npads; i++) pads |= pa.win.pads[i] != 0;
    bool bias_inside = bias < 0 || (!pa.win.ceil_mode && pa.win.auto_pad == TS_PAD_NOTSET &&
                                    (!pa.count_include_pad || !pads));
    char name[64];
    int in[3] = {x, cn->inputs[1], bias}, cy = -1, py = -1;
    if (ts_graph_add_node_parsed(g, &ts_op_conv, ts_graph_fresh_name(g, "taso_pool_conv", name, sizeof name), in,
                                 bias_inside && bias >= 0 ? 3 : 2, &ca, 1, NULL, &cy, err) < 0 ||
        ts_graph_add_node_parsed(g, &ts_op_avgpool, ts_graph_fresh_name(g, "taso_conv_pool", name, sizeof name), &cy,
                                 1, &pa, 1, NULL, &py, err) < 0)
        return -1;
    if (!bias_inside) {
        int64_t d[3] = {K, 1, 1};
        ts_shape s = ts_shape_make(3, d);
        ts_tensor *b = ts_tensor_new(TS_F32, &s, err);
        if (!b) return -1;
        memcpy(b->data, g->values[bias].constant->data, sizeof(float) * (size_t)K);
        int bv = add_const(g, b, err);
        if (bv < 0) return -1;
        int ain[2] = {py, bv};
        if ((py = add_node1(g, "Add", ain, 2, NULL, 0, err)) < 0) return -1;
    }
    redirect(g, out, py);
    g->nodes[p].dead = g->nodes[c].dead = true;
    return 1;
}

/* Whether Pad node nd changes nothing: every pad (attribute, or constant
 * input from opset 11) is 0.  The same shape in and out is not enough: pads
 * of 1 and -1 on one axis shift the image. */
static bool zero_pad(const ts_graph *g, const ts_node *nd)
{
    const ts_pad_attrs *pa = nd->attrs;
    if (pa->npads >= 0) {
        for (int i = 0; i < pa->npads; i++)
            if (pa->pads[i]) return false;
        return true;
    }
    const ts_tensor *t = nd->ninputs > 1 && nd->inputs[1] >= 0 ? g->values[nd->inputs[1]].constant : NULL;
    if (!t || !t->data) return false;
    for (int64_t k = 0; k < ts_tensor_numel(t); k++)
        if (ts_tensor_get_i64(t, k)) return false;
    return true;
}

/* The AveragePool alone reading v through Pads that change nothing (all
 * pads zero), or -1. */
static int pool_through_zero_pads(const ts_graph *g, int v)
{
    for (int hops = 0; hops < 4; hops++) {
        int c = ts_opt_sole_user(g, v);
        if (c < 0 || g->nodes[c].noutputs != 1) return -1;
        const ts_node *nd = &g->nodes[c];
        if (nd->op == &ts_op_avgpool) return nd->inputs[0] == v ? c : -1;
        if (nd->op != &ts_op_pad || nd->inputs[0] != v || !zero_pad(g, nd) ||
            !ts_shape_eq(&g->values[v].shape, &g->values[nd->outputs[0]].shape))
            return -1;
        v = nd->outputs[0];
    }
    return -1;
}

/* Rewrites conv node c -> [zero Pads] -> AveragePool k x k stride k into
 * AveragePool -> conv; 1 done, 0 not a candidate, -1 error. */
static int pool_first_at(ts_graph *g, int c, ts_error *err)
{
    const ts_node *cn = &g->nodes[c];
    if (!is_op(g, c, &ts_op_conv) || cn->noutputs != 1 || cn->ninputs < 2 || !pointwise_conv(g, cn)) return 0;
    int x = cn->inputs[0];
    const ts_value *xv = &g->values[x];
    if (xv->dtype != TS_F32 || xv->shape.rank != 4 || g->values[cn->inputs[1]].shape.dims[1] != xv->shape.dims[1])
        return 0;
    int p = pool_through_zero_pads(g, cn->outputs[0]);
    if (p < 0 || g->nodes[p].noutputs != 1 || ts_graph_is_output(g, g->nodes[p].outputs[0])) return 0;
    const ts_pool_attrs *pa = g->nodes[p].attrs;
    const ts_window *w = &pa->win;
    if (w->nkernel != 2 || w->kernel[0] != w->kernel[1] || w->kernel[0] < 2 ||
        (w->auto_pad != TS_PAD_NOTSET && w->auto_pad != TS_PAD_VALID))
        return 0;
    const int64_t k = w->kernel[0];
    /* windows tile the input exactly: no padding, no partial window, so
     * count_include_pad and ceil_mode change nothing and the average of the
     * bias is the bias */
    for (int i = 0; i < 2; i++)
        if ((w->nstrides ? w->strides[i] : 1) != k || xv->shape.dims[2 + i] % k) return 0;
    for (int i = 0; i < w->npads; i++)
        if (w->pads[i]) return 0;
    for (int i = 0; i < w->ndilations; i++)
        if (w->dilations[i] != 1) return 0;
    ts_pool_attrs pool = *pa;
    ts_conv_attrs conv = *(const ts_conv_attrs *)cn->attrs;
    int in[3] = {x, cn->inputs[1], cn->ninputs > 2 ? cn->inputs[2] : -1}, nin = in[2] >= 0 ? 3 : 2;
    int out = g->nodes[p].outputs[0], py = -1, cy = -1;
    char name[64];
    if (ts_graph_add_node_parsed(g, &ts_op_avgpool, ts_graph_fresh_name(g, "pool_first", name, sizeof name), &x, 1,
                                 &pool, 1, NULL, &py, err) < 0)
        return -1;
    in[0] = py;
    if (ts_graph_add_node_parsed(g, &ts_op_conv, ts_graph_fresh_name(g, "pool_first_conv", name, sizeof name), in, nin,
                                 &conv, 1, NULL, &cy, err) < 0)
        return -1;
    redirect(g, out, cy);
    /* the conv, the Pads and the pool: each read only by the next */
    for (int v = g->nodes[c].outputs[0], n = c; n != p; v = g->nodes[n].outputs[0]) {
        g->nodes[n].dead = true;
        n = ts_opt_sole_user(g, v);
    }
    g->nodes[p].dead = true;
    return 1;
}

int ts_pool_before_conv(ts_graph *g, ts_error *err)
{
    return ts_opt_each_node(g, pool_first_at, err);
}

int ts_swap_pool_conv(ts_graph *g, ts_error *err)
{
    return ts_opt_each_node(g, swap_at, err);
}

int ts_opt_settle(ts_graph *g, int total, ts_error *err)
{
    if (total) {
        ts_graph_compact(g);
        if (ts_graph_validate(g, err)) return -1;
    }
    return total;
}

int ts_opt_each_node(ts_graph *g, int (*at)(ts_graph *g, int n, ts_error *err), ts_error *err)
{
    int total = 0, nn = g->nnodes;
    for (int n = 0; n < nn; n++) {
        int r = at(g, n, err);
        if (r < 0) return -1;
        total += r;
    }
    return ts_opt_settle(g, total, err);
}

void ts_opt_take_value(ts_graph *g, int n, int y)
{
    int fresh = g->nodes[n].outputs[0];
    g->nodes[n].outputs[0] = y;
    g->values[y].producer = n;
    g->values[y].producer_slot = 0;
    g->values[fresh].producer = -1;
}
