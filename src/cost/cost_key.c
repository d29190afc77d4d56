/* Op-cost model: fusion groups and their canonical keys (see cost.h).
 *
 * The group rule mirrors the runtime's two fusion mechanisms, erring on the
 * side of grouping (the group is measured by the runtime itself, so a group
 * the runtime would not fuse is merely measured unfused):
 *  - oneDNN post-ops: Conv/ConvTranspose/MatMul/Gemm absorb a chain of
 *    BatchNormalization, Add, Mul (per-channel constants or a residual) and
 *    activations (lower_post.c, the lowering stage's post-op walk);
 *  - element-wise chains: an element-wise node absorbs the element-wise
 *    consumers of its result (vec_fuse.c);
 *  - a Gather by constant indices read by a MatMul (vec_band.c).
 * A node joins only through a value that it alone consumes (not a graph
 * output), with one float32 output of the same shape. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cost/cost.h"
#include "exec/roofline.h"
#include "ops/list.h"
#include "util/hash.h"

static bool post_op(const char *op)
{
    static const char *const ok[] = {"BatchNormalization", "Add", "Mul", "Relu", "LeakyRelu", "Sigmoid",
                                     "Tanh", "HardSwish", "HardSigmoid", "Clip", "PRelu", "Gelu", NULL};
    for (int i = 0; ok[i]; i++)
        if (!strcmp(op, ok[i])) return true;
    return false;
}

static bool is_view(const ts_node *nd)
{
    const char *op = nd->op->name;
    if (nd->noutputs != 1 || nd->ninputs < 1 || nd->inputs[0] < 0) return false;
    if (!strcmp(op, "Dropout")) return nd->ninputs < 3 || nd->inputs[2] < 0;
    return !strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze") ||
           !strcmp(op, "Identity");
}

static bool all_f32(const ts_graph *g, const ts_node *nd)
{
    for (int i = 0; i < nd->ninputs; i++)
        if (nd->inputs[i] >= 0 && g->values[nd->inputs[i]].dtype != TS_F32) return false;
    return nd->noutputs == 1 && g->values[nd->outputs[0]].dtype == TS_F32;
}

ts_status xcost_groups(const ts_graph *g, int *group_of)
{
    int *uses = calloc((size_t)g->nvalues + 1, sizeof *uses);
    int *user = malloc(sizeof *user * ((size_t)g->nvalues + 1));
    int *order = malloc(sizeof *order * ((size_t)g->nnodes + 1));
    int cnt = 0;
    ts_status st = TS_OK;
    if (!uses || !user || !order) {
        st = TS_ERR_NOMEM;
        goto out;
    }
    for (int n = 0; n < g->nnodes; n++) group_of[n] = -1;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead) continue;
        for (int j = 0; j < nd->ninputs; j++)
            if (nd->inputs[j] >= 0) uses[nd->inputs[j]]++, user[nd->inputs[j]] = n;
    }
    for (int i = 0; i < g->noutputs; i++) uses[g->outputs[i]] += 2; /* never absorbed past an output */
    if ((st = ts_graph_topo_order(g, order, &cnt, NULL))) goto out;
    for (int k = 0; k < cnt; k++) {
        int h = order[k];
        if (group_of[h] >= 0) continue;
        group_of[h] = h;
        const ts_node *hd = &g->nodes[h];
        if (is_view(hd) || hd->noutputs != 1) continue;
        bool compute = hd->op->flags & TS_OP_CONTRACTION;
        bool elt = (hd->op->flags & TS_OP_ELEMENTWISE) && all_f32(g, hd);
        int v = hd->outputs[0], size = 1;
        /* Rows gathered by a constant index table for a MatMul: the runtime
         * reads them through the index (vec_band.c) and never writes the
         * gathered tensor, so the two are one cost (with the MatMul's
         * post-ops after it). */
        if (hd->op == &ts_op_gather && hd->ninputs == 2 && hd->inputs[1] >= 0 &&
            g->values[hd->inputs[1]].constant && uses[v] == 1 && group_of[user[v]] < 0 &&
            g->nodes[user[v]].op == &ts_op_matmul && all_f32(g, &g->nodes[user[v]])) {
            group_of[user[v]] = h;
            v = g->nodes[user[v]].outputs[0];
            size++;
            compute = true;
        }
        if (!compute && !elt) continue;
        while (size < XCOST_MAX_GROUP && uses[v] == 1) {
            int c = user[v];
            const ts_node *cd = &g->nodes[c];
            if (group_of[c] >= 0 || !all_f32(g, cd) || !ts_shape_eq(&g->values[cd->outputs[0]].shape, &g->values[v].shape))
                break;
            if (compute ? !post_op(cd->op->name) : !(cd->op->flags & TS_OP_ELEMENTWISE)) break;
            group_of[c] = h;
            size++;
            v = cd->outputs[0];
        }
    }
out:
    free(uses);
    free(user);
    free(order);
    return st;
}

int xcost_members(const ts_graph *g, const int *group_of, int head, int *members)
{
    /* Members follow the head's output chain: walk it the same way. */
    int nm = 0;
    members[nm++] = head;
    int v = g->nodes[head].noutputs == 1 ? g->nodes[head].outputs[0] : -1;
    while (v >= 0 && nm < XCOST_MAX_GROUP) {
        int next = -1;
        for (int n = 0; n < g->nnodes && next < 0; n++) {
            if (n == head || group_of[n] != head) continue;
            const ts_node *nd = &g->nodes[n];
            for (int j = 0; j < nd->ninputs; j++)
                if (nd->inputs[j] == v) next = n;
        }
        if (next < 0) break;
        members[nm++] = next;
        v = g->nodes[next].outputs[0];
    }
    return nm;
}

/* ----------------------------------------------------------------- keys */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool fail;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...)
{
    if (b->fail) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->fail = true;
            return;
        }
        if (b->s && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap <= b->len + (size_t)n) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->fail = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
}

static void sb_value(sbuf *b, const ts_graph *g, int v)
{
    char shp[160];
    const ts_value *val = &g->values[v];
    sb_add(b, "%s%s[%s]", ts_dtype_name(val->dtype), val->constant ? "c" : "", ts_shape_str(&val->shape, shp, sizeof shp));
}

char *xcost_key(const ts_graph *g, const int *members, int nm)
{
    sbuf b = {0};
    for (int m = 0; m < nm; m++) {
        const ts_node *nd = &g->nodes[members[m]];
        /* Attribute structs are plain zero-initialised data (op.h), so their
         * bytes identify the attributes; a hash keeps the line short. */
        uint64_t ah = nd->attrs && nd->op->attr_size ? ts_hash_bytes(TS_HASH_SEED, nd->attrs, nd->op->attr_size) : 0;
        sb_add(&b, "%s%s{%016llx}(", m ? ";" : "", nd->op->name, (unsigned long long)ah);
        for (int j = 0; j < nd->ninputs; j++) {
            int v = nd->inputs[j], from = -1;
            if (j) sb_add(&b, ",");
            if (v < 0) {
                sb_add(&b, "-");
                continue;
            }
            for (int k = 0; k < m; k++)
                if (g->nodes[members[k]].outputs[0] == v) from = k;
            if (from >= 0)
                sb_add(&b, "@%d", from); /* produced inside the group */
            else
                sb_value(&b, g, v);
        }
        sb_add(&b, ")->");
        for (int o = 0; o < nd->noutputs; o++) {
            if (o) sb_add(&b, ",");
            sb_value(&b, g, nd->outputs[o]);
            /* a graph output must be written plain, which changes the kernel */
            if (ts_graph_is_output(g, nd->outputs[o])) sb_add(&b, "=out");
        }
    }
    if (b.fail) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

void xcost_group_work(const ts_graph *g, const int *members, int nm, double *flops, double *bytes)
{
    *flops = *bytes = 0;
    for (int m = 0; m < nm; m++) {
        const ts_node *nd = &g->nodes[members[m]];
        *flops += xroof_node_flops(g, members[m]);
        for (int j = 0; j < nd->ninputs; j++) {
            int v = nd->inputs[j];
            bool inner = false;
            for (int k = 0; k < m && v >= 0; k++) inner |= g->nodes[members[k]].outputs[0] == v;
            if (v >= 0 && !inner)
                *bytes += (double)ts_shape_numel(&g->values[v].shape) * (double)ts_dtype_size(g->values[v].dtype);
        }
        if (m == nm - 1)
            for (int o = 0; o < nd->noutputs; o++) {
                const ts_value *val = &g->values[nd->outputs[o]];
                *bytes += (double)ts_shape_numel(&val->shape) * (double)ts_dtype_size(val->dtype);
            }
    }
}
