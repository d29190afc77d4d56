/* The reference interpreter: runs every node's reference kernel in one
 * number domain, in topological order, freeing tensors after their last use.
 * It is the oracle for the fast runtime and the optimizers, so it favours
 * obviousness over speed. */
#include <stdlib.h>
#include <string.h>
#include "ir/ir.h"
#include "ops/opaque.h"

static ts_dtype storage_of(ts_dtype declared, const ts_num *num)
{
    return ts_dtype_is_float(declared) ? num->storage : declared;
}

ts_tensor *ts_tensor_to_domain(ts_tensor *t, const ts_num *num, ts_error *err)
{
    ts_dtype st = storage_of(t->dtype, num);
    if (st == t->dtype) return ts_tensor_ref(t);
    ts_tensor *c = ts_tensor_new(st, &t->shape, err);
    if (!c) return NULL;
    int64_t n = ts_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) num->from_f64(ts_num_at(num, c->data, i), ts_tensor_get_f64(t, i));
    return c;
}

ts_tensor *ts_tensor_from_domain(const ts_tensor *t, ts_dtype dtype, ts_error *err)
{
    if (t->dtype == dtype) return ts_tensor_ref((ts_tensor *)t);
    ts_tensor *c = ts_tensor_new(dtype, &t->shape, err);
    if (!c) return NULL;
    int64_t n = ts_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) ts_tensor_set_f64(c, i, ts_tensor_get_f64(t, i));
    return c;
}

ts_status ts_node_eval(const ts_graph *g, int ni, const ts_num *num, const ts_tensor *const *in, ts_tensor **out,
                       ts_error *err)
{
    const ts_node *n = &g->nodes[ni];
    if (num->exact && !(n->op->flags & TS_OP_EXACT))
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s' (%s): operator has no kernel in the %s domain", n->name,
                            n->op->name, num->name);
    for (int o = 0; o < n->noutputs; o++) out[o] = NULL;
    for (int o = 0; o < n->noutputs; o++) {
        const ts_value *v = &g->values[n->outputs[o]];
        out[o] = ts_tensor_new(storage_of(v->dtype, num), &v->shape, err);
        if (!out[o]) goto fail;
    }
    ts_kernel_ctx k = {.node = n, .attrs = n->attrs, .opset = g->opset, .num = num, .nin = n->ninputs, .in = in,
                       .nout = n->noutputs, .out = out, .err = err};
    if (ts_kernel_u64_check(n, n->ninputs, in, err)) goto fail;
    if (n->op->kernel(&k) == TS_OK) {
        /* float16/bfloat16 values are computed in the domain and rounded
         * to their precision here, at each node's output */
        for (int o = 0; o < n->noutputs && !num->exact; o++) {
            ts_dtype dt = g->values[n->outputs[o]].dtype;
            if (dt != TS_F16 && dt != TS_BF16) continue;
            for (int64_t i = 0, cnt = ts_tensor_numel(out[o]); i < cnt; i++) {
                void *x = ts_num_at(num, out[o]->data, i);
                num->from_f64(x, ts_dtype_round(dt, num->to_f64(x)));
            }
        }
        return TS_OK;
    }
fail:
    for (int o = 0; o < n->noutputs; o++) {
        ts_tensor_unref(out[o]);
        out[o] = NULL;
    }
    return err->code ? err->code : TS_ERR_INVALID;
}

ts_status ts_graph_run_reference(const ts_graph *g, ts_domain_kind domain, ts_tensor *const *inputs,
                                 ts_tensor **outputs, ts_error *err)
{
    const ts_num *num = ts_num_get(domain);
    ts_tensor **buf = calloc((size_t)g->nvalues + 1, sizeof *buf);
    int *uses = calloc((size_t)g->nvalues + 1, sizeof *uses);
    int *order = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    const ts_tensor **in = NULL;
    ts_tensor **out = NULL;
    ts_status st = TS_OK;
    int cnt = 0, maxin = 1, maxout = 1;
    if (!buf || !uses || !order) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = ts_graph_topo_order(g, order, &cnt, err))) goto done;
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (n->dead) continue;
        if (n->ninputs > maxin) maxin = n->ninputs;
        if (n->noutputs > maxout) maxout = n->noutputs;
        for (int j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0) uses[n->inputs[j]]++;
    }
    for (int i = 0; i < g->noutputs; i++) uses[g->outputs[i]]++; /* never freed early */
    in = calloc((size_t)maxin, sizeof *in);
    out = calloc((size_t)maxout, sizeof *out);
    if (!in || !out) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        ts_tensor *t = inputs[i];
        char a[160], b[160];
        if (!t || t->dtype != storage_of(v->dtype, num) || !ts_shape_eq(&t->shape, &v->shape)) {
            st = ts_error_set(err, TS_ERR_INVALID, "input '%s': expected %s %s, got %s %s", v->name,
                              ts_dtype_name(storage_of(v->dtype, num)), ts_shape_str(&v->shape, a, sizeof a),
                              t ? ts_dtype_name(t->dtype) : "nothing", t ? ts_shape_str(&t->shape, b, sizeof b) : "");
            goto done;
        }
        buf[g->inputs[i]] = ts_tensor_ref(t);
    }
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].constant && !buf[v] && uses[v] &&
            !(buf[v] = ts_tensor_to_domain(g->values[v].constant, num, err))) {
            st = err->code;
            goto done;
        }
    for (int k = 0; k < cnt; k++) {
        const ts_node *n = &g->nodes[order[k]];
        for (int j = 0; j < n->ninputs; j++) in[j] = n->inputs[j] >= 0 ? buf[n->inputs[j]] : NULL;
        if ((st = ts_node_eval(g, order[k], num, in, out, err))) goto done;
        for (int o = 0; o < n->noutputs; o++) {
            ts_tensor_unref(buf[n->outputs[o]]);
            buf[n->outputs[o]] = out[o];
        }
        for (int j = 0; j < n->ninputs; j++) {
            int v = n->inputs[j];
            if (v >= 0 && --uses[v] == 0) {
                ts_tensor_unref(buf[v]);
                buf[v] = NULL;
            }
        }
    }
    for (int i = 0; i < g->noutputs; i++) outputs[i] = ts_tensor_ref(buf[g->outputs[i]]);
done:
    if (buf)
        for (int v = 0; v < g->nvalues; v++) ts_tensor_unref(buf[v]);
    free(buf);
    free(uses);
    free(order);
    free(in);
    free(out);
    return st;
}

/* Folding: a node whose inputs are all constant is evaluated once (float32,
 * as ONNX Runtime would) and its outputs become constants.  Outputs much
 * larger than their inputs (ConstantOfShape, Expand) stay computed. */
#define FOLD_FREE_BYTES (1u << 20)

/* Returns 1 when node ni was folded, 0 when it was left, -1 on error. */
int ts_node_fold(ts_graph *g, int ni, ts_error *err)
{
    const ts_num *num = ts_num_get(TS_DOMAIN_F32);
    ts_node *n = &g->nodes[ni];
    size_t in_bytes = 0, out_bytes = 0;
    ts_tensor shapes[64]; /* data-less stand-ins for TS_OP_SHAPE_ONLY inputs */
    bool shape_only = n->op->flags & TS_OP_SHAPE_ONLY;
    if (n->dead || n->ninputs > 64 || n->noutputs > 64 || (n->op->flags & (TS_OP_OPAQUE | TS_OP_NO_FOLD))) return 0;
    if (ts_node_holds_opaque(n)) return 0; /* an If/Loop/Scan with a custom node in a body */
    for (int j = 0; j < n->ninputs; j++)
        if (n->inputs[j] >= 0) {
            const ts_value *v = &g->values[n->inputs[j]];
            if (!v->constant && !shape_only) return 0;
            if (v->constant) in_bytes += v->constant->nbytes;
        }
    for (int o = 0; o < n->noutputs; o++) {
        const ts_value *v = &g->values[n->outputs[o]];
        out_bytes += (size_t)ts_shape_numel(&v->shape) * ts_dtype_size(v->dtype);
    }
    if (out_bytes > FOLD_FREE_BYTES && out_bytes > 2 * in_bytes) return 0;
    const ts_tensor *in[64];
    ts_tensor *out[64], *conv[64] = {0};
    /* constants keep their declared dtype; float64/float16 ones go through the domain */
    bool ok = true;
    for (int j = 0; j < n->ninputs; j++) {
        in[j] = n->inputs[j] >= 0 ? g->values[n->inputs[j]].constant : NULL;
        if (!in[j] && n->inputs[j] >= 0) {
            const ts_value *v = &g->values[n->inputs[j]];
            shapes[j] = (ts_tensor){.dtype = v->dtype, .shape = v->shape, .refcount = 1};
            in[j] = &shapes[j];
        }
        if (ok && in[j] && in[j]->data && in[j]->dtype != num->storage && ts_dtype_is_float(in[j]->dtype)) {
            conv[j] = ts_tensor_to_domain((ts_tensor *)in[j], num, err);
            ok = conv[j] != NULL;
            in[j] = conv[j];
        }
    }
    ts_status st = ok ? ts_node_eval(g, ni, num, in, out, err) : err->code;
    for (int j = 0; j < n->ninputs; j++) ts_tensor_unref(conv[j]);
    if (st) return -1;
    ts_tensor *cst[64];
    for (int o = 0; o < n->noutputs; o++) {
        cst[o] = ts_tensor_from_domain(out[o], g->values[n->outputs[o]].dtype, err);
        ts_tensor_unref(out[o]);
        if (!cst[o]) ok = false;
    }
    if (!ok) {
        for (int o = 0; o < n->noutputs; o++) ts_tensor_unref(cst[o]);
        return -1;
    }
    for (int o = 0; o < n->noutputs; o++) {
        ts_value *v = &g->values[n->outputs[o]];
        v->constant = cst[o];
        v->producer = -1;
    }
    n->dead = true;
    return 1;
}

int ts_graph_fold_constants(ts_graph *g, ts_error *err)
{
    int *order = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    int cnt, folded = 0;
    if (!order) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return -1;
    }
    if (ts_graph_topo_order(g, order, &cnt, err)) {
        free(order);
        return -1;
    }
    for (int k = 0; k < cnt; k++) {
        int r = ts_node_fold(g, order[k], err);
        if (r < 0) {
            free(order);
            return -1;
        }
        folded += r;
    }
    free(order);
    if (folded) ts_graph_compact(g);
    return folded;
}
