/* Topological order, validation and structural hashing. */
#include <stdlib.h>
#include <string.h>
#include "ir/ir.h"
#include "util/hash.h"

ts_status ts_graph_topo_order(const ts_graph *g, int *order, int *count, ts_error *err)
{
    /* Kahn's algorithm over producer edges; ready nodes are taken in index
     * order so the result is deterministic. */
    int *indeg = calloc((size_t)g->nnodes + 1, sizeof(int));
    int *queue = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    int *users_start = calloc((size_t)g->nvalues + 2, sizeof(int));
    if (!indeg || !queue || !users_start) {
        free(indeg);
        free(queue);
        free(users_start);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory ordering graph");
    }
    int live = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        live++;
        for (int j = 0; j < n->ninputs; j++) {
            int v = n->inputs[j];
            if (v < 0) continue;
            int p = g->values[v].producer;
            if (p >= 0 && !g->nodes[p].dead) indeg[i]++;
            users_start[v + 1]++;
        }
    }
    for (int v = 0; v < g->nvalues; v++) users_start[v + 1] += users_start[v];
    int *users = malloc(sizeof(int) * ((size_t)users_start[g->nvalues] + 1));
    int *fill = calloc((size_t)g->nvalues + 1, sizeof(int));
    if (!users || !fill) {
        free(indeg);
        free(queue);
        free(users_start);
        free(users);
        free(fill);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory ordering graph");
    }
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0) users[users_start[n->inputs[j]] + fill[n->inputs[j]]++] = i;
    }
    int head = 0, tail = 0, out = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (!g->nodes[i].dead && indeg[i] == 0) queue[tail++] = i;
    while (head < tail) {
        int i = queue[head++];
        order[out++] = i;
        const ts_node *n = &g->nodes[i];
        for (int o = 0; o < n->noutputs; o++) {
            int v = n->outputs[o];
            for (int u = users_start[v]; u < users_start[v + 1]; u++) {
                int k = users[u];
                /* a node using v twice has two edges from i */
                if (--indeg[k] == 0) queue[tail++] = k;
            }
        }
    }
    ts_status st = TS_OK;
    if (out < live) {
        int bad = -1;
        for (int i = 0; i < g->nnodes && bad < 0; i++)
            if (!g->nodes[i].dead && indeg[i] > 0) bad = i;
        st = ts_error_set(err, TS_ERR_INVALID, "graph has a cycle through node '%s' (%s)", g->nodes[bad].name,
                          g->nodes[bad].op->name);
    }
    if (count) *count = out;
    free(indeg);
    free(queue);
    free(users_start);
    free(users);
    free(fill);
    return st;
}

ts_status ts_node_infer(const ts_graph *g, int ni, ts_dtype *dt, ts_shape *sh, ts_error *err)
{
    const ts_node *n = &g->nodes[ni];
    const ts_value **in = calloc((size_t)n->ninputs + 1, sizeof *in);
    if (!in) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n->ninputs; i++) in[i] = n->inputs[i] >= 0 ? &g->values[n->inputs[i]] : NULL;
    ts_infer_ctx c = {.graph = g, .node = n, .attrs = n->attrs, .opset = g->opset, .nin = n->ninputs, .in = in,
                      .nout = n->noutputs, .out_dtype = dt, .out_shape = sh, .err = err};
    ts_status st = n->op->infer(&c);
    free(in);
    return st;
}

ts_status ts_graph_validate(const ts_graph *g, ts_error *err)
{
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->ninputs; j++) {
            int v = n->inputs[j];
            if (v < -1 || v >= g->nvalues)
                return ts_error_set(err, TS_ERR_INVALID, "node '%s' (%s): input %d refers to no tensor", n->name,
                                    n->op->name, j);
            if (v < 0) continue;
            const ts_value *val = &g->values[v];
            bool is_input = false;
            for (int k = 0; k < g->ninputs; k++) is_input |= g->inputs[k] == v;
            if (!is_input && !val->constant && (val->producer < 0 || g->nodes[val->producer].dead))
                return ts_error_set(err, TS_ERR_INVALID, "node '%s' (%s): input '%s' is never computed", n->name,
                                    n->op->name, val->name);
        }
        for (int j = 0; j < n->noutputs; j++) {
            int v = n->outputs[j];
            if (v < 0 || v >= g->nvalues)
                return ts_error_set(err, TS_ERR_INVALID, "node '%s' (%s): output %d refers to no tensor", n->name,
                                    n->op->name, j);
            const ts_value *val = &g->values[v];
            if (val->producer != i || val->producer_slot != j) {
                const char *other = val->producer >= 0 ? g->nodes[val->producer].name : "(none)";
                return ts_error_set(err, TS_ERR_INVALID, "tensor '%s' is produced by both '%s' and '%s'", val->name,
                                    n->name, other);
            }
        }
    }
    for (int k = 0; k < g->noutputs; k++) {
        int v = g->outputs[k];
        if (v < 0 || v >= g->nvalues) return ts_error_set(err, TS_ERR_INVALID, "graph output %d refers to no tensor", k);
        const ts_value *val = &g->values[v];
        bool is_input = false;
        for (int i = 0; i < g->ninputs; i++) is_input |= g->inputs[i] == v;
        if (!is_input && !val->constant && (val->producer < 0 || g->nodes[val->producer].dead))
            return ts_error_set(err, TS_ERR_INVALID, "graph output '%s' is never computed", val->name);
    }
    int *order = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    if (!order) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    int cnt;
    ts_status st = ts_graph_topo_order(g, order, &cnt, err);
    free(order);
    if (st) return st;
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        ts_dtype dt[64];
        ts_shape sh[64];
        if (n->noutputs > 64) return ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s' has too many outputs", n->name);
        if ((st = ts_node_infer(g, i, dt, sh, err))) return st;
        for (int j = 0; j < n->noutputs; j++) {
            const ts_value *v = &g->values[n->outputs[j]];
            char a[160], b[160];
            if (dt[j] != v->dtype || !ts_shape_eq(&sh[j], &v->shape))
                return ts_error_set(err, TS_ERR_INVALID,
                                    "node '%s' (%s): output '%s' is declared %s %s but computes %s %s", n->name,
                                    n->op->name, v->name, ts_dtype_name(v->dtype), ts_shape_str(&v->shape, a, sizeof a),
                                    ts_dtype_name(dt[j]), ts_shape_str(&sh[j], b, sizeof b));
        }
    }
    return TS_OK;
}

/* ---- structural hash */

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static uint64_t hash_leaf(const ts_graph *g, int v)
{
    const ts_value *val = &g->values[v];
    uint64_t h = mix(0x51, (uint64_t)val->dtype);
    h = ts_hash_bytes(h, val->shape.dims, sizeof(int64_t) * (size_t)val->shape.rank);
    if (val->constant) {
        /* content sample: cheap, deterministic, and separates distinct weights */
        size_t n = val->constant->nbytes < 256 ? val->constant->nbytes : 256;
        h = ts_hash_bytes(mix(h, val->constant->nbytes), val->constant->data, n);
        if (val->constant->nbytes > 256)
            h = ts_hash_bytes(h, (const char *)val->constant->data + val->constant->nbytes - 256, 256);
    } else {
        for (int i = 0; i < g->ninputs; i++)
            if (g->inputs[i] == v) h = mix(h, 0x1000 + (uint64_t)i);
    }
    return h;
}

uint64_t ts_graph_hash(const ts_graph *g)
{
    uint64_t *vh = calloc((size_t)g->nvalues + 1, sizeof *vh);
    int *order = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    uint64_t h = 0;
    int cnt = 0;
    if (!vh || !order) goto out;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].producer < 0 || g->nodes[g->values[v].producer].dead) vh[v] = hash_leaf(g, v);
    if (ts_graph_topo_order(g, order, &cnt, NULL)) goto out;
    for (int k = 0; k < cnt; k++) {
        const ts_node *n = &g->nodes[order[k]];
        uint64_t nh = ts_hash_bytes(TS_HASH_SEED, n->op->name, strlen(n->op->name));
        nh = ts_hash_bytes(nh, n->attrs, n->op->attr_size);
        for (int j = 0; j < n->ninputs; j++) nh = mix(nh, n->inputs[j] >= 0 ? vh[n->inputs[j]] : 0x77);
        for (int o = 0; o < n->noutputs; o++) vh[n->outputs[o]] = mix(nh, (uint64_t)o + 1);
    }
    h = 0x7473;
    for (int i = 0; i < g->noutputs; i++) h = mix(h, vh[g->outputs[i]]);
out:
    free(vh);
    free(order);
    return h;
}

void ts_graph_stats_get(const ts_graph *g, ts_graph_stats *st)
{
    memset(st, 0, sizeof *st);
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        st->nodes++;
        if (n->op->flags & (TS_OP_MOVEMENT | TS_OP_SHAPE))
            ;
        else if (n->op->flops)
            st->flops += n->op->flops(n, g);
        else
            for (int o = 0; o < n->noutputs; o++) st->flops += (double)ts_shape_numel(&g->values[n->outputs[o]].shape);
    }
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].constant && ts_value_uses(g, v) > 0) {
            st->params += ts_tensor_numel(g->values[v].constant);
            st->param_bytes += (int64_t)g->values[v].constant->nbytes;
        }
}

int64_t ts_graph_weight_bytes(const ts_graph *g)
{
    char *used = calloc((size_t)g->nvalues + 1, 1);
    if (!used) return 0;
    for (int i = 0; i < g->nnodes; i++)
        for (int j = 0; !g->nodes[i].dead && j < g->nodes[i].ninputs; j++)
            if (g->nodes[i].inputs[j] >= 0) used[g->nodes[i].inputs[j]] = 1;
    for (int i = 0; i < g->noutputs; i++) used[g->outputs[i]] = 1;
    int64_t b = 0;
    for (int v = 0; v < g->nvalues; v++)
        if (used[v] && g->values[v].constant) b += (int64_t)g->values[v].constant->nbytes;
    free(used);
    return b;
}
