/* Multi-linear subprograms (PET §6.1): the graph is split at its
 * non-linear operators; what remains falls into connected components of
 * multi-linear operators, each mutated on its own.  Linearity comes from
 * the operator descriptors (linear_inputs), never from operator names:
 * bit i means "every output element is a polynomial of degree <= 1 in the
 * elements of input i" -- affine, so that Add, Sub, Concat and a Conv's
 * bias keep a residual block in one subprogram.  That is what PET's
 * theorems need: an output element is a sum of products with at most one
 * factor from each input (docs/pet.md, "What linear means"). */
#include <stdlib.h>
#include "pet/pet.h"
#include "util/union_find.h"

static bool linear_slot(const ts_node *n, int i)
{
    return i < 32 && (n->op->linear_inputs >> i & 1u);
}

bool ts_pet_node_linear(const ts_graph *g, int ni)
{
    const ts_node *n = &g->nodes[ni];
    if (n->dead || !(n->op->flags & TS_OP_EXACT) || !n->op->linear_inputs) return false;
    if (n->op->flags & TS_OP_SHAPE) return false;
    bool float_out = false;
    for (int o = 0; o < n->noutputs; o++) float_out |= ts_dtype_is_float(g->values[n->outputs[o]].dtype);
    if (!float_out) return false;
    for (int i = 0; i < n->ninputs; i++) {
        int v = n->inputs[i];
        if (v < 0 || linear_slot(n, i)) continue;
        /* a coefficient (shape, pads, indices, divisor) must be fixed */
        if (!g->values[v].constant) return false;
    }
    return true;
}

/* Degree bound per value: graph inputs and weights in linear slots 1,
 * coefficient constants 0, a node's outputs the sum over its linear inputs
 * (an upper bound: Add's is the max). */
static void degrees(const ts_graph *g, const int *order, int count, const int *sub_of, int *deg)
{
    for (int v = 0; v < g->nvalues; v++) deg[v] = g->values[v].constant ? 0 : 1;
    for (int k = 0; k < count; k++) {
        const ts_node *n = &g->nodes[order[k]];
        int d = 0;
        for (int i = 0; i < n->ninputs; i++) {
            int v = n->inputs[i];
            if (v < 0 || !linear_slot(n, i)) continue;
            /* a weight in a linear slot is a variable of the program */
            d += g->values[v].constant && ts_dtype_is_float(g->values[v].dtype) ? 1 : deg[v];
        }
        for (int o = 0; o < n->noutputs; o++)
            deg[n->outputs[o]] = sub_of && sub_of[order[k]] < 0 ? 1 : d;
    }
}

int ts_pet_degree(const ts_graph *prog)
{
    int *order = malloc(sizeof(int) * ((size_t)prog->nnodes + 1));
    int *deg = malloc(sizeof(int) * ((size_t)prog->nvalues + 1));
    int count = 0, best = 1;
    ts_error e = {0};
    if (order && deg && !ts_graph_topo_order(prog, order, &count, &e)) {
        degrees(prog, order, count, NULL, deg);
        for (int i = 0; i < prog->noutputs; i++)
            if (deg[prog->outputs[i]] > best) best = deg[prog->outputs[i]];
    } else
        best = prog->nnodes + 1; /* no order: a safe bound is every node multiplying */
    free(order);
    free(deg);
    return best;
}

static bool push(int **arr, int *n, int x)
{
    for (int i = 0; i < *n; i++)
        if ((*arr)[i] == x) return true;
    int *a = realloc(*arr, sizeof(int) * (size_t)(*n + 1));
    if (!a) return false;
    a[(*n)++] = x;
    *arr = a;
    return true;
}

void ts_pet_split_free(ts_pet_split *s)
{
    for (int i = 0; i < s->nsubs; i++) {
        free(s->subs[i].nodes);
        free(s->subs[i].inputs);
        free(s->subs[i].outputs);
    }
    free(s->subs);
    free(s->sub_of);
    *s = (ts_pet_split){0};
}

ts_status ts_pet_split_graph(const ts_graph *g, ts_pet_split *out, ts_error *err)
{
    *out = (ts_pet_split){0};
    size_t nn = (size_t)g->nnodes + 1;
    int *parent = malloc(sizeof(int) * nn), *order = malloc(sizeof(int) * nn), *root_sub = malloc(sizeof(int) * nn);
    int *deg = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    bool *lin = calloc(nn, 1);
    out->sub_of = malloc(sizeof(int) * nn);
    int count = 0;
    if (!parent || !order || !root_sub || !deg || !lin || !out->sub_of) goto nomem;
    if (ts_graph_topo_order(g, order, &count, err)) goto fail;
    for (int i = 0; i < g->nnodes; i++) {
        parent[i] = i;
        root_sub[i] = -1;
        out->sub_of[i] = -1;
        lin[i] = ts_pet_node_linear(g, i);
    }
    for (int i = 0; i < g->nnodes; i++) {
        if (!lin[i]) continue;
        const ts_node *n = &g->nodes[i];
        for (int j = 0; j < n->ninputs; j++) {
            int v = n->inputs[j];
            int p = v >= 0 ? g->values[v].producer : -1;
            if (p >= 0 && lin[p]) parent[ts_uf_root(parent, p)] = ts_uf_root(parent, i);
        }
    }
    for (int k = 0; k < count; k++) {
        int i = order[k];
        if (!lin[i]) continue;
        int r = ts_uf_root(parent, i);
        if (root_sub[r] < 0) {
            ts_pet_sub *subs = realloc(out->subs, sizeof *subs * (size_t)(out->nsubs + 1));
            if (!subs) goto nomem;
            out->subs = subs;
            subs[out->nsubs] = (ts_pet_sub){0};
            root_sub[r] = out->nsubs++;
        }
        int s = root_sub[r];
        out->sub_of[i] = s;
        if (!push(&out->subs[s].nodes, &out->subs[s].nnodes, i)) goto nomem;
    }
    degrees(g, order, count, out->sub_of, deg);
    for (int s = 0; s < out->nsubs; s++) {
        ts_pet_sub *sub = &out->subs[s];
        sub->degree = 1;
        for (int k = 0; k < sub->nnodes; k++) {
            const ts_node *n = &g->nodes[sub->nodes[k]];
            for (int j = 0; j < n->ninputs; j++) {
                int v = n->inputs[j];
                if (v < 0) continue;
                int p = g->values[v].producer;
                if (p >= 0 && out->sub_of[p] == s) continue;
                if (g->values[v].constant && !(linear_slot(n, j) && ts_dtype_is_float(g->values[v].dtype))) continue;
                if (!push(&sub->inputs, &sub->ninputs, v)) goto nomem;
            }
            for (int o = 0; o < n->noutputs; o++) {
                int v = n->outputs[o];
                bool outside = false;
                for (int u = 0; u < g->nnodes && !outside; u++) {
                    if (g->nodes[u].dead || out->sub_of[u] == s) continue;
                    for (int j = 0; j < g->nodes[u].ninputs; j++) outside |= g->nodes[u].inputs[j] == v;
                }
                for (int u = 0; u < g->noutputs; u++) outside |= g->outputs[u] == v;
                if (outside && !push(&sub->outputs, &sub->noutputs, v)) goto nomem;
                if (outside && deg[v] > sub->degree) sub->degree = deg[v];
            }
        }
    }
    free(parent), free(order), free(root_sub), free(deg), free(lin);
    return TS_OK;
nomem:
    ts_error_set(err, TS_ERR_NOMEM, "out of memory splitting the graph into multi-linear subprograms");
fail:
    free(parent), free(order), free(root_sub), free(deg), free(lin);
    ts_pet_split_free(out);
    return err->code;
}
