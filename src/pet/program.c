/* Standalone programs (pet.h): a subprogram lifted out of its graph, the
 * few builders mutants and corrections are made of, and splicing a
 * program back in place of the node it replaces.  Everything is built
 * through ts_graph_add_node, so shapes are inferred and checked as for any
 * graph, and what is written is plain ONNX. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pet/pet.h"
#include "rules/apply.h"

static bool linear_slot(const ts_node *n, int i)
{
    return i < 32 && (n->op->linear_inputs >> i & 1u);
}

ts_graph *ts_pet_program_of_node(const ts_graph *g, int ni, int *map, int *nmap, ts_error *err)
{
    const ts_node *n = &g->nodes[ni];
    ts_graph *p = ts_graph_new("pet", g->opset);
    int ins[16];
    *nmap = 0;
    if (!p) goto nomem;
    if (n->ninputs > 16 || n->noutputs != 1) {
        ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s': PET programs take one-output nodes of <= 16 inputs", n->name);
        goto fail;
    }
    for (int i = 0; i < n->ninputs; i++) {
        int v = n->inputs[i];
        ins[i] = -1;
        if (v < 0) continue;
        const ts_value *val = &g->values[v];
        if (val->constant && !(linear_slot(n, i) && ts_dtype_is_float(val->dtype))) {
            ins[i] = ts_graph_add_constant(p, val->name, val->constant, err);
        } else {
            for (int k = 0; k < *nmap; k++)
                if (map[k] == v) ins[i] = p->inputs[k];
            if (ins[i] < 0) {
                ins[i] = ts_graph_add_input(p, val->name, val->dtype, &val->shape, err);
                map[(*nmap)++] = v;
            }
        }
        if (ins[i] < 0) goto fail;
    }
    int out = ts_pet_node_like(p, g, ni, NULL, ins, n->ninputs, err);
    if (out < 0 || ts_graph_add_output(p, out, err)) goto fail;
    return p;
nomem:
    ts_error_set(err, TS_ERR_NOMEM, "out of memory building a PET program");
fail:
    ts_graph_free(p);
    return NULL;
}

static const char *node_name(const ts_graph *g, const char *op, char *buf, size_t n)
{
    char prefix[48];
    snprintf(prefix, sizeof prefix, "pet_%s", op);
    return ts_graph_fresh_name(g, prefix, buf, n);
}

static int add1(ts_graph *g, const char *op, const int *ins, int nin, const ts_attr *a, int na, ts_error *err)
{
    char name[96];
    int out = -1;
    if (ts_graph_add_node(g, op, node_name(g, op, name, sizeof name), ins, nin, a, na, 1, NULL, &out, err) < 0)
        return -1;
    return out;
}

static int ints_const(ts_graph *g, const int64_t *v, int n, ts_error *err)
{
    int64_t d = n;
    ts_shape s = ts_shape_make(1, &d);
    ts_tensor *t = ts_tensor_new(TS_I64, &s, err);
    if (!t) return -1;
    memcpy(t->data, v, sizeof(int64_t) * (size_t)n);
    char name[96];
    int id = ts_graph_add_constant(g, ts_graph_fresh_name(g, "pet_ints", name, sizeof name), t, err);
    ts_tensor_unref(t);
    return id;
}

int ts_pet_reshape(ts_graph *g, int x, const int64_t *dims, int rank, ts_error *err)
{
    int shape = ints_const(g, dims, rank, err);
    if (shape < 0) return -1;
    int ins[2] = {x, shape};
    return add1(g, "Reshape", ins, 2, NULL, 0, err);
}

int ts_pet_transpose(ts_graph *g, int x, const int64_t *perm, int rank, ts_error *err)
{
    ts_attr a = ts_attr_ints("perm", perm, rank);
    return add1(g, "Transpose", &x, 1, &a, 1, err);
}

int ts_pet_slice(ts_graph *g, int x, int axis, int64_t lo, int64_t hi, ts_error *err)
{
    int64_t ax = axis;
    int ins[4] = {x, ints_const(g, &lo, 1, err), ints_const(g, &hi, 1, err), ints_const(g, &ax, 1, err)};
    if (ins[1] < 0 || ins[2] < 0 || ins[3] < 0) return -1;
    return add1(g, "Slice", ins, 4, NULL, 0, err);
}

int ts_pet_concat(ts_graph *g, const int *xs, int n, int axis, ts_error *err)
{
    if (n == 1) return xs[0];
    ts_attr a = ts_attr_int("axis", axis);
    return add1(g, "Concat", xs, n, &a, 1, err);
}

int ts_pet_binary(ts_graph *g, const char *op, int a, int b, ts_error *err)
{
    int ins[2] = {a, b};
    return add1(g, op, ins, 2, NULL, 0, err);
}

int ts_pet_pad(ts_graph *g, int x, const int64_t *pads, ts_error *err)
{
    int rank = g->values[x].shape.rank;
    bool any = false;
    for (int i = 0; i < 2 * rank; i++) any |= pads[i] != 0;
    if (!any) return x;
    int ins[2] = {x, ints_const(g, pads, 2 * rank, err)};
    if (ins[1] < 0) return -1;
    return add1(g, "Pad", ins, 2, NULL, 0, err);
}

int ts_pet_node_like(ts_graph *g, const ts_graph *from, int like, const void *attrs, const int *ins, int nin,
                     ts_error *err)
{
    const ts_node *n = &from->nodes[like];
    ts_attr a[32];
    int na = 0;
    if (n->op->emit) {
        na = n->op->emit(attrs ? attrs : n->attrs, a, 32);
        if (na < 0) {
            ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s': too many attributes to copy", n->name);
            return -1;
        }
    }
    return add1(g, n->op->name, ins, nin, a, na, err);
}

int ts_pet_splice(ts_graph *g, int ni, const ts_graph *p, const int *map, ts_error *err)
{
    int *vmap = malloc(sizeof(int) * ((size_t)p->nvalues + 1));
    int *order = malloc(sizeof(int) * ((size_t)p->nnodes + 1));
    int count = 0, result = -1;
    if (!vmap || !order) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory splicing a PET program");
        goto out;
    }
    for (int v = 0; v < p->nvalues; v++) vmap[v] = -1;
    for (int k = 0; k < p->ninputs; k++) vmap[p->inputs[k]] = map[k];
    for (int v = 0; v < p->nvalues; v++) {
        if (!p->values[v].constant) continue;
        vmap[v] = ts_graph_const_value(g, ts_tensor_ref(p->values[v].constant), err);
        if (vmap[v] < 0) goto out;
    }
    if (ts_graph_topo_order(p, order, &count, err)) goto out;
    for (int k = 0; k < count; k++) {
        const ts_node *n = &p->nodes[order[k]];
        int ins[16], outs[8];
        if (n->ninputs > 16 || n->noutputs > 8) {
            ts_error_set(err, TS_ERR_UNSUPPORTED, "PET program node '%s' too wide", n->name);
            goto out;
        }
        for (int i = 0; i < n->ninputs; i++) ins[i] = n->inputs[i] >= 0 ? vmap[n->inputs[i]] : -1;
        ts_attr a[32];
        int na = n->op->emit ? n->op->emit(n->attrs, a, 32) : 0;
        char name[96];
        if (na < 0 || ts_graph_add_node(g, n->op->name, node_name(g, n->op->name, name, sizeof name), ins,
                                        n->ninputs, a, na, n->noutputs, NULL, outs, err) < 0)
            goto out;
        for (int o = 0; o < n->noutputs; o++) vmap[n->outputs[o]] = outs[o];
    }
    int old = g->nodes[ni].outputs[0], neu = vmap[p->outputs[0]];
    for (int i = 0; i < g->nnodes; i++)
        for (int j = 0; j < g->nodes[i].ninputs; j++)
            if (g->nodes[i].inputs[j] == old) g->nodes[i].inputs[j] = neu;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == old) g->outputs[i] = neu;
    /* the replacement takes the replaced tensor's name: graph outputs keep
     * theirs, and the written model reads like the original */
    char *tmp = g->values[old].name;
    g->values[old].name = g->values[neu].name;
    g->values[neu].name = tmp;
    g->nodes[ni].dead = true;
    result = neu;
out:
    free(vmap);
    free(order);
    return result;
}
