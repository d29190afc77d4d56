/* Post-optimization (PET §6.2): layout chains that undo each other across
 * an element-wise operator are removed.  Two neighbouring mutants of a
 * dilated convolution each put the activation back in its layout and take
 * it apart again (conv -> b2s -> Relu -> s2b -> conv); an element-wise
 * operator commutes with any reshape or transpose, so the chains on both
 * sides of it cancel when their composition is the identity.
 *
 * Whether a composition is the identity is decided by running it, not by
 * matching names: the chains are applied to the positions 0..n-1 of the
 * tensor and the result compared with 0..n-1. */
#include <stdlib.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "pet/pet.h"

#define MAX_CHAIN 4
#define MAX_POSITIONS (1 << 24) /* beyond, the chain is left alone (64 MiB of positions) */

static bool is_layout(const ts_node *n)
{
    return !n->dead && (n->op == &ts_op_reshape || n->op == &ts_op_transpose);
}

/* out = transpose(in) for a tensor of shape `in` (rank r) and perm. */
static void permute(const int32_t *in, int32_t *out, const ts_shape *s, const int64_t *perm)
{
    int r = s->rank;
    int64_t in_strides[TS_MAX_RANK], odims[TS_MAX_RANK], idx[TS_MAX_RANK] = {0};
    ts_shape_strides(s, in_strides);
    for (int d = 0; d < r; d++) odims[d] = s->dims[perm[d]];
    int64_t n = ts_shape_numel(s), src = 0;
    for (int64_t k = 0; k < n; k++) {
        out[k] = in[src];
        for (int d = r - 1; d >= 0; d--) { /* next output index, odometer-style */
            idx[d]++;
            src += in_strides[perm[d]];
            if (idx[d] < odims[d]) break;
            src -= idx[d] * in_strides[perm[d]];
            idx[d] = 0;
        }
    }
}

/* Applies the layout nodes chain[0..n) (in data-flow order) to buf; a
 * Reshape keeps the order of elements, a Transpose moves them. */
static void apply_chain(const ts_graph *g, const int *chain, int n, int32_t **buf, int32_t **tmp)
{
    for (int i = 0; i < n; i++) {
        const ts_node *nd = &g->nodes[chain[i]];
        if (nd->op != &ts_op_transpose) continue;
        const ts_transpose_attrs *a = nd->attrs;
        const ts_shape *s = &g->values[nd->inputs[0]].shape;
        int64_t perm[TS_MAX_RANK];
        for (int d = 0; d < s->rank; d++) perm[d] = a->nperm < 0 ? s->rank - 1 - d : a->perm[d];
        permute(*buf, *tmp, s, perm);
        int32_t *t = *buf;
        *buf = *tmp;
        *tmp = t;
    }
}

/* True when chain `before` (nb nodes, data-flow order) followed by chain
 * `after` (na nodes) maps every position to itself. */
static bool identity(const ts_graph *g, const int *before, int nb, const int *after, int na)
{
    const ts_shape *s = &g->values[g->nodes[before[0]].inputs[0]].shape;
    int64_t n = ts_shape_numel(s);
    if (n <= 0 || n > MAX_POSITIONS) return false;
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)n), *tmp = malloc(sizeof(int32_t) * (size_t)n);
    bool same = buf && tmp;
    for (int64_t k = 0; same && k < n; k++) buf[k] = (int32_t)k;
    if (same) {
        apply_chain(g, before, nb, &buf, &tmp);
        apply_chain(g, after, na, &buf, &tmp);
        for (int64_t k = 0; k < n && same; k++) same = buf[k] == (int32_t)k;
    }
    free(buf);
    free(tmp);
    return same;
}

bool ts_pet_chain_is_identity(const ts_graph *g, int from, int to)
{
    int chain[16], n = 0;
    if (!ts_shape_eq(&g->values[from].shape, &g->values[to].shape)) return false;
    for (int v = to; v != from; n++) {
        int pr = g->values[v].producer;
        if (n == 16 || pr < 0 || !is_layout(&g->nodes[pr])) return false;
        chain[n] = pr;
        v = g->nodes[pr].inputs[0];
    }
    if (!n) return true;
    for (int i = 0; i < n / 2; i++) { /* data-flow order */
        int t = chain[i];
        chain[i] = chain[n - 1 - i];
        chain[n - 1 - i] = t;
    }
    return identity(g, chain, n, NULL, 0);
}

int ts_pet_cancel_layouts(ts_graph *g, ts_error *err)
{
    int *uses = calloc((size_t)g->nvalues + 1, sizeof *uses), *user = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    int removed = 0;
    if (!uses || !user) {
        free(uses);
        free(user);
        ts_error_set(err, TS_ERR_NOMEM, "out of memory removing layout pairs");
        return -1;
    }
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].dead) continue;
        for (int j = 0; j < g->nodes[i].ninputs; j++) {
            int v = g->nodes[i].inputs[j];
            if (v >= 0) uses[v]++, user[v] = i;
        }
    }
    for (int i = 0; i < g->noutputs; i++) uses[g->outputs[i]] += 2; /* pinned: never single-use */
    for (int u = 0; u < g->nnodes; u++) {
        ts_node *nu = &g->nodes[u];
        if (nu->dead || !(nu->op->flags & TS_OP_ELEMENTWISE) || nu->ninputs != 1 || nu->noutputs != 1) continue;
        /* the chain before u (nearest first) and after it (data-flow order) */
        int back[MAX_CHAIN], fwd[MAX_CHAIN], nb = 0, nf = 0;
        int v = nu->inputs[0];
        while (nb < MAX_CHAIN && uses[v] == 1 && g->values[v].producer >= 0 && is_layout(&g->nodes[g->values[v].producer]))
            v = g->nodes[back[nb++] = g->values[v].producer].inputs[0];
        int w = nu->outputs[0];
        while (nf < MAX_CHAIN && uses[w] == 1 && is_layout(&g->nodes[user[w]]))
            w = g->nodes[fwd[nf++] = user[w]].outputs[0];
        bool done = false;
        for (int lb = nb; lb >= 1 && !done; lb--)
            for (int lf = nf; lf >= 1 && !done; lf--) {
                int src = g->nodes[back[lb - 1]].inputs[0], dst = g->nodes[fwd[lf - 1]].outputs[0];
                if (!ts_shape_eq(&g->values[src].shape, &g->values[dst].shape)) continue;
                bool pinned = false;
                for (int i = 0; i < g->noutputs; i++) pinned |= g->outputs[i] == dst;
                int before[MAX_CHAIN];
                for (int k = 0; k < lb; k++) before[k] = back[lb - 1 - k];
                if (pinned || !identity(g, before, lb, fwd, lf)) continue;
                /* u reads the chain's source; dst's readers read u */
                nu->inputs[0] = src;
                g->values[nu->outputs[0]].shape = g->values[src].shape;
                for (int i = 0; i < g->nnodes; i++)
                    for (int j = 0; !g->nodes[i].dead && j < g->nodes[i].ninputs; j++)
                        if (g->nodes[i].inputs[j] == dst) g->nodes[i].inputs[j] = nu->outputs[0];
                for (int k = 0; k < lb; k++) g->nodes[back[k]].dead = true;
                for (int k = 0; k < lf; k++) g->nodes[fwd[k]].dead = true;
                /* uses of the values around: u's output now has dst's readers */
                uses[nu->outputs[0]] = uses[dst];
                user[nu->outputs[0]] = user[dst];
                removed++;
                done = true;
            }
    }
    free(uses);
    free(user);
    if (removed) ts_graph_compact(g);
    return removed;
}
