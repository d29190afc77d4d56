/* ONNX import: ModelProto -> ts_graph.
 *
 * Order of work, chosen so that a bad model gets one precise error:
 *   1. model-level checks (ir_version, graph, ai.onnx opset);
 *   2. initializers become constants, the remaining inputs are bound;
 *   3. every node's operator is checked before anything is built, so the
 *      first unsupported op is reported instead of a cascade;
 *   4. nodes are sorted by name dependencies (files need not be sorted);
 *   5. nodes are added in that order, each folded right away when its
 *      inputs are constant, so shape arithmetic (Shape -> Gather -> Concat
 *      -> Reshape) is a constant before a later node's inference needs it;
 *   6. what the file had beyond the graph is recorded (ts_model_meta,
 *      src/ir/meta.h), and a model with symbolic dimensions is imported a
 *      second time at other sizes (the "probe"): comparing the two graphs
 *      tells which folded constants hold those sizes, which export needs to
 *      write the model with its dimensions symbolic again. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ir/ir.h"
#include "ir/meta.h"
#include "onnx/proto.h"

/* ------------------------------------------------ name -> int hash map */

/* Open addressing; keys point into the model protos, which outlive it. */
typedef struct name_map {
    const char **keys;
    int *vals;
    size_t cap, n;
} name_map;

static uint64_t str_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static bool map_find(const name_map *m, const char *key, int *val)
{
    if (!m->cap) return false;
    for (size_t i = str_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return false;
        if (!strcmp(m->keys[i], key)) {
            if (val) *val = m->vals[i];
            return true;
        }
    }
}

/* Inserts or overwrites; false when out of memory. */
static bool map_put(name_map *m, const char *key, int val)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 64;
        name_map b = {calloc(nc, sizeof *b.keys), calloc(nc, sizeof *b.vals), nc, 0};
        if (!b.keys || !b.vals) {
            free(b.keys);
            free(b.vals);
            return false;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) map_put(&b, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = b;
    }
    size_t i = str_hash(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key)) i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return true;
}

static void map_free(name_map *m)
{
    free(m->keys);
    free(m->vals);
}

/* ------------------------------------------------------------ importer */

typedef struct importer {
    const Onnx__GraphProto *gp;
    const char *base_dir;
    const char *model; /* "model 'path'" or "model", for file-level messages */
    ts_graph *g;
    ts_error *err;
    name_map values; /* tensor name -> value id */
    char **names;    /* display name of each node (file order) */
    int *order;      /* node indices in dependency order */
    ts_tensor **inits; /* decoded initializers (file order): kept by the first import, reused by the probe's */
} importer;

static ts_status oom(importer *im) { return ts_error_set(im->err, TS_ERR_NOMEM, "out of memory importing ONNX model"); }

static const char *str_or(const char *s, const char *def) { return s && *s ? s : def; }

static bool is_onnx_domain(const char *d) { return !d || !*d || !strcmp(d, "ai.onnx"); }

static ts_status read_opset(const Onnx__ModelProto *mp, const char *model, int *opset, ts_error *err)
{
    int64_t v = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (is_onnx_domain(o->domain) && o->has_version && o->version > v) v = o->version;
    }
    if (v < 0) return ts_error_set(err, TS_ERR_PARSE, "%s has no opset_import for the ai.onnx domain", model);
    if (v < 1 || v > 1000)
        return ts_error_set(err, TS_ERR_PARSE, "%s declares ai.onnx opset %lld, which is not valid", model,
                            (long long)v);
    *opset = (int)v;
    return TS_OK;
}

static ts_status add_initializers(importer *im)
{
    for (size_t i = 0; i < im->gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = im->gp->initializer[i];
        if (!tp->name || !*tp->name)
            return ts_error_set(im->err, TS_ERR_PARSE, "%s: initializer %zu has no name", im->model, i);
        ts_tensor *t;
        if (im->inits[i])
            t = ts_tensor_ref(im->inits[i]);
        else {
            char what[400];
            snprintf(what, sizeof what, "initializer '%s'", tp->name);
            if (ts_onnx_tensor_decode(tp, im->base_dir, what, &t, im->err)) return im->err->code;
            im->inits[i] = ts_tensor_ref(t);
        }
        int v = ts_graph_add_constant(im->g, tp->name, t, im->err);
        ts_tensor_unref(t);
        if (v < 0) return im->err->code;
        if (!map_put(&im->values, tp->name, v)) return oom(im);
    }
    return TS_OK;
}

static const ts_input_bind *find_bind(const ts_input_bind *binds, int nbinds, const char *name)
{
    for (int i = 0; i < nbinds; i++)
        if (binds[i].name && !strcmp(binds[i].name, name)) return &binds[i];
    return NULL;
}

/* Declared shape of a graph input, with dynamic dims taken from its bind
 * (or 1 when unbound). */
static ts_status input_shape(importer *im, const char *name, const Onnx__TypeProto__Tensor *tt,
                             const ts_input_bind *bind, ts_shape *out)
{
    char buf[160];
    const Onnx__TensorShapeProto *sp = tt->shape;
    if (!sp) {
        if (!bind)
            return ts_error_set(im->err, TS_ERR_INVALID,
                                "input '%s' has no declared shape; bind it with --input %s:DIMS", name, name);
        *out = bind->shape;
        return TS_OK;
    }
    if (sp->n_dim > TS_MAX_RANK)
        return ts_error_set(im->err, TS_ERR_UNSUPPORTED, "input '%s' has rank %zu (at most %d supported)", name,
                            sp->n_dim, TS_MAX_RANK);
    int rank = (int)sp->n_dim;
    if (bind && bind->shape.rank != rank)
        return ts_error_set(im->err, TS_ERR_INVALID,
                            "input bind '%s': shape %s has rank %d, the model declares rank %d", name,
                            ts_shape_str(&bind->shape, buf, sizeof buf), bind->shape.rank, rank);
    out->rank = rank;
    for (int i = 0; i < rank; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
        bool fixed = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        if (fixed && d->dim_value < 0)
            return ts_error_set(im->err, TS_ERR_INVALID, "input '%s' has negative dimension %lld at axis %d", name,
                                (long long)d->dim_value, i);
        if (fixed && bind && bind->shape.dims[i] != d->dim_value)
            return ts_error_set(im->err, TS_ERR_INVALID,
                                "input bind '%s': dimension %d is %lld, the model fixes it at %lld", name, i,
                                (long long)bind->shape.dims[i], (long long)d->dim_value);
        out->dims[i] = fixed ? d->dim_value : bind ? bind->shape.dims[i] : 1;
    }
    return TS_OK;
}

static ts_status add_inputs(importer *im, const ts_input_bind *binds, int nbinds)
{
    /* Every bind must name an input that is not a weight. */
    for (int b = 0; b < nbinds; b++) {
        const char *bn = binds[b].name ? binds[b].name : "";
        bool found = false;
        for (size_t i = 0; i < im->gp->n_input && !found; i++) {
            const char *n = im->gp->input[i]->name;
            found = n && !strcmp(n, bn) && !map_find(&im->values, n, NULL);
        }
        if (!found) return ts_error_set(im->err, TS_ERR_INVALID, "input bind '%s' does not name a graph input", bn);
    }
    for (size_t i = 0; i < im->gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = im->gp->input[i];
        const char *name = vi->name;
        if (!name || !*name)
            return ts_error_set(im->err, TS_ERR_PARSE, "%s: graph input %zu has no name", im->model, i);
        /* Old exporters list weights as inputs too: those are constants. */
        if (map_find(&im->values, name, NULL)) continue;
        if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type)
            return ts_error_set(im->err, TS_ERR_UNSUPPORTED,
                                "input '%s' is not a tensor (only tensor inputs are supported)", name);
        const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
        ts_dtype dt;
        int32_t et = tt->has_elem_type ? tt->elem_type : 0;
        if (!ts_onnx_dtype_from(et, &dt))
            return ts_error_set(im->err, TS_ERR_UNSUPPORTED, "input '%s': element type %s is not supported", name,
                                ts_onnx_dtype_name(et));
        ts_shape shape;
        if (input_shape(im, name, tt, find_bind(binds, nbinds, name), &shape)) return im->err->code;
        int v = ts_graph_add_input(im->g, name, dt, &shape, im->err);
        if (v < 0) return im->err->code;
        if (!map_put(&im->values, name, v)) return oom(im);
    }
    return TS_OK;
}

/* The name node i of the file gets in the graph: its own, or OP_INDEX
 * (ONNX node names are optional). */
static void node_name(const Onnx__NodeProto *n, size_t i, char *buf, size_t size)
{
    if (n->name && *n->name)
        snprintf(buf, size, "%s", n->name);
    else
        snprintf(buf, size, "%s_%zu", n->op_type, i);
}

/* Names nodes for messages and checks every operator before anything is
 * built. */
static ts_status check_nodes(importer *im)
{
    const Onnx__GraphProto *gp = im->gp;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        const char *op = n->op_type;
        if (!op || !*op) return ts_error_set(im->err, TS_ERR_PARSE, "%s: node %zu has no op_type", im->model, i);
        char buf[300];
        node_name(n, i, buf, sizeof buf);
        if (!(im->names[i] = ts_strdup(buf))) return oom(im);
    }
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        const char *op = n->op_type, *name = im->names[i];
        if (!is_onnx_domain(n->domain))
            return ts_error_set(im->err, TS_ERR_UNSUPPORTED, "node '%s' (%s): domain '%s' is not supported", name, op,
                                n->domain);
        if (!strcmp(op, "If") || !strcmp(op, "Loop") || !strcmp(op, "Scan"))
            return ts_error_set(im->err, TS_ERR_UNSUPPORTED, "node '%s' (%s): control flow is not supported", name, op);
        if (strcmp(op, "Constant") && !ts_op_find(op))
            return ts_error_set(im->err, TS_ERR_UNSUPPORTED, "node '%s': operator '%s' (opset %d) is not supported",
                                name, op, im->g->opset);
    }
    return TS_OK;
}

/* Min-heap of node indices: among ready nodes the earliest in the file goes
 * first, so a sorted file keeps its order. */
static void heap_push(int *h, int *n, int x)
{
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static int heap_pop(int *h, int *n)
{
    int top = h[0], x = h[--*n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= x) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

/* Topological order by tensor names; errors name a missing input or a node
 * on a cycle. */
static ts_status sort_nodes(importer *im)
{
    const Onnx__GraphProto *gp = im->gp;
    int nn = (int)gp->n_node;
    name_map prod = {0};
    int *indeg = calloc((size_t)nn + 1, sizeof(int));
    int *ustart = calloc((size_t)nn + 2, sizeof(int));
    int *heap = malloc(sizeof(int) * ((size_t)nn + 1));
    int *users = NULL, *fill = NULL;
    ts_status st = TS_OK;
    if (!indeg || !ustart || !heap) goto nomem;
    for (int i = 0; i < nn; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        for (size_t o = 0; o < n->n_output; o++) {
            const char *t = n->output[o];
            int other;
            if (!t || !*t) continue;
            if (map_find(&im->values, t, NULL)) {
                st = ts_error_set(im->err, TS_ERR_INVALID,
                                  "node '%s' (%s): output '%s' has the name of a graph input or initializer",
                                  im->names[i], n->op_type, t);
                goto out;
            }
            if (map_find(&prod, t, &other)) {
                st = ts_error_set(im->err, TS_ERR_INVALID, "tensor '%s' is produced by both node '%s' and node '%s'",
                                  t, im->names[other], im->names[i]);
                goto out;
            }
            if (!map_put(&prod, t, i)) goto nomem;
        }
    }
    /* Edges producer -> user, one per input occurrence, in CSR form. */
    size_t nedges = 0;
    for (int i = 0; i < nn; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        for (size_t k = 0; k < n->n_input; k++) {
            const char *t = n->input[k];
            int p;
            if (!t || !*t || map_find(&im->values, t, NULL)) continue;
            if (!map_find(&prod, t, &p)) {
                st = ts_error_set(im->err, TS_ERR_INVALID,
                                  "node '%s' (%s): input '%s' is not produced by any node or graph input", im->names[i],
                                  n->op_type, t);
                goto out;
            }
            indeg[i]++;
            ustart[p + 1]++;
            nedges++;
        }
    }
    for (int i = 0; i < nn; i++) ustart[i + 1] += ustart[i];
    users = malloc(sizeof(int) * (nedges + 1));
    fill = calloc((size_t)nn + 1, sizeof(int));
    if (!users || !fill) goto nomem;
    for (int i = 0; i < nn; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        for (size_t k = 0; k < n->n_input; k++) {
            const char *t = n->input[k];
            int p;
            if (!t || !*t || map_find(&im->values, t, NULL) || !map_find(&prod, t, &p)) continue;
            users[ustart[p] + fill[p]++] = i;
        }
    }
    int nheap = 0, cnt = 0;
    for (int i = 0; i < nn; i++)
        if (!indeg[i]) heap_push(heap, &nheap, i);
    while (nheap) {
        int i = heap_pop(heap, &nheap);
        im->order[cnt++] = i;
        for (int e = ustart[i]; e < ustart[i + 1]; e++)
            if (--indeg[users[e]] == 0) heap_push(heap, &nheap, users[e]);
    }
    if (cnt < nn) {
        /* Walk back through unfinished producers until a node repeats: that
         * node lies on a cycle (every unfinished node has one). */
        int cur = 0;
        while (!indeg[cur]) cur++;
        memset(fill, 0, sizeof(int) * (size_t)nn);
        while (!fill[cur]) {
            fill[cur] = 1;
            const Onnx__NodeProto *n = gp->node[cur];
            int next = -1;
            for (size_t k = 0; k < n->n_input && next < 0; k++) {
                const char *t = n->input[k];
                int p;
                if (t && *t && !map_find(&im->values, t, NULL) && map_find(&prod, t, &p) && indeg[p]) next = p;
            }
            if (next < 0) break; /* cannot happen; stay safe */
            cur = next;
        }
        st = ts_error_set(im->err, TS_ERR_INVALID, "graph has a cycle through node '%s'", im->names[cur]);
    }
    goto out;
nomem:
    st = oom(im);
out:
    map_free(&prod);
    free(indeg);
    free(ustart);
    free(heap);
    free(users);
    free(fill);
    return st;
}

/* A Constant node becomes a constant value: there is no Constant op. */
static ts_status add_constant_node(importer *im, int ni)
{
    const Onnx__NodeProto *n = im->gp->node[ni];
    const char *name = im->names[ni];
    if (n->n_output != 1 || !n->output[0] || !*n->output[0])
        return ts_error_set(im->err, TS_ERR_INVALID, "node '%s' (Constant): expected one named output", name);
    if (n->n_attribute != 1)
        return ts_error_set(im->err, TS_ERR_INVALID, "node '%s' (Constant): expected exactly one attribute, got %zu",
                            name, n->n_attribute);
    const Onnx__AttributeProto *a = n->attribute[0];
    const char *an = a->name ? a->name : "";
    ts_tensor *t = NULL;
    ts_shape shape = {0};
    if (!strcmp(an, "value")) {
        if (!a->t)
            return ts_error_set(im->err, TS_ERR_PARSE, "node '%s' (Constant): attribute 'value' has no tensor", name);
        char what[400];
        snprintf(what, sizeof what, "node '%s' (Constant): attribute 'value'", name);
        if (ts_onnx_tensor_decode(a->t, im->base_dir, what, &t, im->err)) return im->err->code;
    } else if (!strcmp(an, "value_float") || !strcmp(an, "value_int")) {
        bool f = an[6] == 'f';
        if (!(t = ts_tensor_new(f ? TS_F32 : TS_I64, &shape, im->err))) return im->err->code;
        if (f)
            *(float *)t->data = a->f;
        else
            *(int64_t *)t->data = a->i;
    } else if (!strcmp(an, "value_floats") || !strcmp(an, "value_ints")) {
        bool f = an[6] == 'f';
        shape.rank = 1;
        shape.dims[0] = (int64_t)(f ? a->n_floats : a->n_ints);
        if (!(t = ts_tensor_new(f ? TS_F32 : TS_I64, &shape, im->err))) return im->err->code;
        if (t->nbytes) memcpy(t->data, f ? (void *)a->floats : (void *)a->ints, t->nbytes);
    } else
        return ts_error_set(im->err, TS_ERR_UNSUPPORTED, "node '%s' (Constant): attribute '%s' is not supported", name,
                            an);
    int v = ts_graph_add_constant(im->g, n->output[0], t, im->err);
    ts_tensor_unref(t);
    if (v < 0) return im->err->code;
    return map_put(&im->values, n->output[0], v) ? TS_OK : oom(im);
}

static ts_status add_node(importer *im, int ni)
{
    const Onnx__NodeProto *n = im->gp->node[ni];
    const char *name = im->names[ni];
    /* Trailing empty names are absent optional inputs/outputs: drop them so
     * the count matches what the operator expects. */
    int nin = (int)n->n_input, nout = (int)n->n_output;
    while (nin > 0 && !str_or(n->input[nin - 1], NULL)) nin--;
    while (nout > 0 && !str_or(n->output[nout - 1], NULL)) nout--;
    int *ins = malloc(sizeof(int) * ((size_t)nin + 1));
    int *outs = malloc(sizeof(int) * ((size_t)nout + 1));
    ts_attr *attrs = calloc(n->n_attribute + 1, sizeof *attrs);
    ts_onnx_attr_store store = {0};
    ts_status st = TS_OK;
    if (!ins || !outs || !attrs) {
        st = oom(im);
        goto out;
    }
    const ts_op_desc *op = ts_op_find(n->op_type);
    for (int k = 0; k < nin; k++) {
        ins[k] = -1;
        const char *t = n->input[k];
        /* operators may assume their required inputs are present */
        if (k < op->min_inputs && (!t || !*t)) {
            st = ts_error_set(im->err, TS_ERR_INVALID, "node '%s' (%s): required input %d has no name", name,
                              n->op_type, k);
            goto out;
        }
        if (t && *t && !map_find(&im->values, t, &ins[k])) { /* sort_nodes guarantees it; stay safe */
            st = ts_error_set(im->err, TS_ERR_INVALID,
                              "node '%s' (%s): input '%s' is not produced by any node or graph input", name, n->op_type,
                              t);
            goto out;
        }
    }
    if (ts_onnx_attrs_decode(n->attribute, n->n_attribute, im->base_dir, name, n->op_type, attrs, &store, im->err)) {
        st = im->err->code;
        goto out;
    }
    int idx = ts_graph_add_node(im->g, n->op_type, name, ins, nin, attrs, (int)n->n_attribute, nout,
                                (const char *const *)n->output, outs, im->err);
    if (idx < 0) {
        st = im->err->code;
        goto out;
    }
    for (int o = 0; o < nout; o++)
        if (n->output[o] && *n->output[o] && !map_put(&im->values, n->output[o], outs[o])) {
            st = oom(im);
            goto out;
        }
    /* Shape of a static shape folds too (TS_OP_SHAPE_ONLY) */
    if (ts_node_fold(im->g, idx, im->err) < 0) st = im->err->code;
out:
    ts_onnx_attr_store_free(&store);
    free(ins);
    free(outs);
    free(attrs);
    return st;
}

static ts_status add_outputs(importer *im)
{
    for (size_t i = 0; i < im->gp->n_output; i++) {
        const char *name = im->gp->output[i]->name;
        int v;
        if (!name || !*name)
            return ts_error_set(im->err, TS_ERR_PARSE, "%s: graph output %zu has no name", im->model, i);
        if (!map_find(&im->values, name, &v))
            return ts_error_set(im->err, TS_ERR_INVALID, "graph output '%s' is not produced by any node or graph input",
                                name);
        if (ts_graph_add_output(im->g, v, im->err)) return im->err->code;
    }
    return TS_OK;
}

/* Steps 2-5: the graph at the sizes binds give.  inits (n_initializer
 * entries) receives each decoded initializer, or supplies it when set. */
static ts_status import_graph(const Onnx__GraphProto *gp, int opset, const char *base_dir, const char *model,
                              const ts_input_bind *binds, int nbinds, ts_tensor **inits, ts_graph **out,
                              ts_error *err)
{
    importer im = {.gp = gp, .base_dir = base_dir, .model = model, .err = err, .inits = inits};
    im.g = ts_graph_new(str_or(gp->name, "graph"), opset);
    im.names = calloc(gp->n_node + 1, sizeof *im.names);
    im.order = malloc(sizeof(int) * (gp->n_node + 1));
    ts_status st = TS_OK;
    if (!im.g || !im.names || !im.order)
        st = oom(&im);
    else if (!(st = add_initializers(&im)) && !(st = add_inputs(&im, binds, nbinds)) && !(st = check_nodes(&im)) &&
             !(st = sort_nodes(&im))) {
        for (size_t k = 0; k < gp->n_node && !st; k++) {
            int ni = im.order[k];
            st = strcmp(gp->node[ni]->op_type, "Constant") ? add_node(&im, ni) : add_constant_node(&im, ni);
        }
        if (!st) st = add_outputs(&im);
        if (!st) {
            ts_graph_compact(im.g);
            st = ts_graph_validate(im.g, err);
        }
    }
    map_free(&im.values);
    if (im.names)
        for (size_t i = 0; i < gp->n_node; i++) free(im.names[i]);
    free(im.names);
    free(im.order);
    if (st) {
        ts_graph_free(im.g);
        return st;
    }
    *out = im.g;
    return TS_OK;
}

/* ----------------------------------------- what the file had beyond the graph */

/* NULL for an absent or empty string; *bad set when out of memory. */
static char *dup_opt(const char *s, bool *bad)
{
    if (!s || !*s) return NULL;
    char *d = ts_strdup(s);
    if (!d) *bad = true;
    return d;
}

static char *dup_str(const char *s, bool *bad)
{
    char *d = ts_strdup(s ? s : "");
    if (!d) *bad = true;
    return d;
}

/* The declared dimensions of a graph input or output; rank -1 when the file
 * declared no shape, or one of another rank than the graph's. */
static void io_record(const Onnx__ValueInfoProto *vi, const ts_value *val, ts_meta_io *io, bool *bad)
{
    io->name = dup_str(val->name, bad);
    io->bound = io->probe = val->shape;
    io->rank = -1;
    const Onnx__TypeProto *tp = vi ? vi->type : NULL;
    const Onnx__TensorShapeProto *sp =
        tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type ? tp->tensor_type->shape : NULL;
    if (!sp || (int)sp->n_dim != val->shape.rank) return;
    io->rank = val->shape.rank;
    for (int d = 0; d < io->rank; d++) {
        const Onnx__TensorShapeProto__Dimension *dm = sp->dim[d];
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) continue;
        io->dims[d].symbolic = true;
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            io->dims[d].param = dup_opt(dm->dim_param, bad);
    }
}

static int kv_cmp(const void *a, const void *b)
{
    return strcmp(((const ts_meta_kv *)a)->key, ((const ts_meta_kv *)b)->key);
}

/* The symbol of input k's axis d (which must be symbolic). */
static ts_meta_sym *sym_of(ts_model_meta *m, int k, int d)
{
    const char *p = m->inputs[k].dims[d].param;
    for (int i = 0; i < m->nsyms; i++) {
        ts_meta_sym *s = &m->syms[i];
        if (p ? s->name && !strcmp(s->name, p) : !s->name && s->input == k && s->axis == d) return s;
    }
    return NULL;
}

/* One symbol per distinct dim_param of the inputs and per unnamed symbolic
 * input dimension, with the size bound at import. */
static void syms_record(ts_model_meta *m, bool *bad)
{
    if (!(m->syms = calloc((size_t)m->ninputs * TS_MAX_RANK + 1, sizeof *m->syms))) {
        *bad = true;
        return;
    }
    for (int k = 0; k < m->ninputs; k++) {
        const ts_meta_io *io = &m->inputs[k];
        for (int d = 0; d < io->rank; d++) {
            if (!io->dims[d].symbolic) continue;
            int64_t b = io->bound.dims[d];
            ts_meta_sym *s = sym_of(m, k, d);
            if (!s) {
                s = &m->syms[m->nsyms++];
                *s = (ts_meta_sym){.name = dup_opt(io->dims[d].param, bad), .input = k, .axis = d, .bound = b};
            } else if (s->bound != b && !m->why_static[0])
                snprintf(m->why_static, sizeof m->why_static,
                         "dimension '%s' is bound to %lld for one input and to %lld for another", s->name,
                         (long long)s->bound, (long long)b);
        }
    }
}

static ts_model_meta *meta_record(const Onnx__ModelProto *mp, const ts_graph *g)
{
    const Onnx__GraphProto *gp = mp->graph;
    ts_model_meta *m = ts_model_meta_new();
    if (!m) return NULL;
    bool bad = false;
    m->ir_version = mp->ir_version;
    m->producer_name = dup_opt(mp->producer_name, &bad);
    m->producer_version = dup_opt(mp->producer_version, &bad);
    m->domain = dup_opt(mp->domain, &bad);
    m->doc_string = dup_opt(mp->doc_string, &bad);
    m->has_model_version = mp->has_model_version;
    m->model_version = mp->model_version;
    m->graph_doc = dup_opt(gp->doc_string, &bad);
    if (!(m->props = calloc(mp->n_metadata_props + 1, sizeof *m->props))) bad = true;
    for (size_t i = 0; !bad && i < mp->n_metadata_props; i++, m->nprops++) {
        m->props[i].key = dup_str(mp->metadata_props[i]->key, &bad);
        m->props[i].value = dup_str(mp->metadata_props[i]->value, &bad);
    }
    if (!(m->opsets = calloc(mp->n_opset_import + 1, sizeof *m->opsets))) bad = true;
    for (size_t i = 0; !bad && i < mp->n_opset_import; i++, m->nopsets++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        m->opsets[i].domain = dup_opt(o->domain, &bad);
        m->opsets[i].version = o->has_version ? o->version : -1;
    }
    /* Node doc strings: usually none, so this costs nothing; names as the
     * graph's nodes have them (Constant nodes are no nodes and lose theirs). */
    size_t ndocs = 0;
    for (size_t i = 0; i < gp->n_node; i++) ndocs += gp->node[i]->doc_string && *gp->node[i]->doc_string;
    if (!(m->node_docs = calloc(ndocs + 1, sizeof *m->node_docs))) bad = true;
    for (size_t i = 0; !bad && i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (!n->doc_string || !*n->doc_string) continue;
        char buf[300];
        node_name(n, i, buf, sizeof buf);
        ts_meta_kv *kv = &m->node_docs[m->nnode_docs++];
        kv->key = dup_str(buf, &bad);
        kv->value = dup_str(n->doc_string, &bad);
    }
    if (!bad) qsort(m->node_docs, (size_t)m->nnode_docs, sizeof *m->node_docs, kv_cmp);
    m->inputs = calloc((size_t)g->ninputs + 1, sizeof *m->inputs);
    m->outputs = calloc((size_t)g->noutputs + 1, sizeof *m->outputs);
    if (!m->inputs || !m->outputs) bad = true;
    for (int k = 0; !bad && k < g->ninputs; k++, m->ninputs++) {
        const ts_value *val = &g->values[g->inputs[k]];
        const Onnx__ValueInfoProto *vi = NULL;
        for (size_t i = 0; i < gp->n_input && !vi; i++)
            if (gp->input[i]->name && !strcmp(gp->input[i]->name, val->name)) vi = gp->input[i];
        io_record(vi, val, &m->inputs[k], &bad);
    }
    /* add_outputs adds the file's outputs in order */
    for (int k = 0; !bad && k < g->noutputs; k++, m->noutputs++)
        io_record((size_t)k < gp->n_output ? gp->output[k] : NULL, &g->values[g->outputs[k]], &m->outputs[k], &bad);
    if (!bad) syms_record(m, &bad);
    if (bad) {
        ts_model_meta_unref(m);
        return NULL;
    }
    return m;
}

static bool same_tensor(const ts_tensor *a, const ts_tensor *b)
{
    return a == b || (a->dtype == b->dtype && ts_shape_eq(&a->shape, &b->shape) && a->nbytes == b->nbytes &&
                      (!a->nbytes || !memcmp(a->data, b->data, a->nbytes)));
}

static bool add_literal(ts_model_meta *m, ts_tensor *t, int *cap)
{
    if (ts_model_meta_is_literal(m, t)) return true;
    if (m->nliterals == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        ts_tensor **p = realloc(m->literals, sizeof *p * (size_t)nc);
        if (!p) return false;
        m->literals = p;
        *cap = nc;
    }
    m->literals[m->nliterals++] = ts_tensor_ref(t);
    return true;
}

static bool add_sized(ts_model_meta *m, ts_tensor *bound, ts_tensor *probe, int *cap)
{
    for (int i = 0; i < m->nsized; i++)
        if (m->sized[i].bound == bound) return true;
    if (m->nsized == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        ts_meta_sized *p = realloc(m->sized, sizeof *p * (size_t)nc);
        if (!p) return false;
        m->sized = p;
        *cap = nc;
    }
    m->sized[m->nsized++] = (ts_meta_sized){ts_tensor_ref(bound), ts_tensor_ref(probe)};
    return true;
}

/* Compares the graph at the bound sizes (g) with the one at the probe sizes
 * (p): the same nodes must read the same tensors; constants that differ
 * are recorded (m->sized).  false when out of memory. */
static bool probe_diff(ts_model_meta *m, const ts_graph *g, const ts_graph *p)
{
    char syms[200];
    ts_model_meta_syms_str(m, syms, sizeof syms);
    int cap = 0, lcap = 0;
    char differs[320] = "";
    if (g->nnodes != p->nnodes)
        snprintf(differs, sizeof differs, "%d nodes, then %d", g->nnodes, p->nnodes);
    for (int i = 0; i < g->nnodes && !differs[0]; i++) {
        const ts_node *a = &g->nodes[i], *b = &p->nodes[i];
        bool same = a->op == b->op && !strcmp(a->name, b->name) && a->ninputs == b->ninputs &&
                    a->noutputs == b->noutputs;
        for (int j = 0; j < a->ninputs && same; j++) {
            int va = a->inputs[j], vb = b->inputs[j];
            if (va < 0 || vb < 0) {
                same = va == vb;
                continue;
            }
            const ts_value *x = &g->values[va], *y = &p->values[vb];
            if (strcmp(x->name, y->name) || !x->constant != !y->constant)
                same = false;
            else if (!x->constant)
                continue;
            else if (!same_tensor(x->constant, y->constant)) {
                if (!add_sized(m, x->constant, y->constant, &cap)) return false;
            } else if (j == 1 && (!strcmp(a->op->name, "Reshape") || !strcmp(a->op->name, "Expand")) &&
                       !add_literal(m, x->constant, &lcap))
                return false;
        }
        if (!same) snprintf(differs, sizeof differs, "node '%s'", a->name);
    }
    if (differs[0]) {
        snprintf(m->why_static, sizeof m->why_static, "the model's graph is not the same at other sizes of %s (%s)",
                 syms, differs);
        return true;
    }
    for (int k = 0; k < m->ninputs; k++) m->inputs[k].probe = p->values[p->inputs[k]].shape;
    for (int k = 0; k < m->noutputs; k++) {
        const ts_value *x = &g->values[g->outputs[k]], *y = &p->values[p->outputs[k]];
        m->outputs[k].probe = y->shape;
        if (x->constant && y->constant && !same_tensor(x->constant, y->constant)) {
            snprintf(m->why_static, sizeof m->why_static, "output '%s' is a constant computed from the sizes of %s",
                     x->name, syms);
            return true;
        }
    }
    return true;
}

/* Imports the model again with every symbolic size moved (+2, +3, +5...
 * per symbol, distinct so that two sizes cannot be mistaken for each
 * other; downwards when upwards does not load, e.g. a sequence already at
 * its maximum) and compares.  Sets m->why_static when the model cannot
 * follow other sizes; fails only when out of memory. */
static ts_status probe_sizes(ts_model_meta *m, const Onnx__GraphProto *gp, int opset, const char *base_dir,
                             const char *model, ts_tensor **inits, const ts_graph *g, ts_error *err)
{
    static const int64_t step[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
    const int nstep = (int)(sizeof step / sizeof *step);
    ts_input_bind *binds = calloc((size_t)m->ninputs + 1, sizeof *binds);
    if (!binds) return ts_error_set(err, TS_ERR_NOMEM, "out of memory importing ONNX model");
    ts_error perr = {0};
    ts_graph *p = NULL;
    for (int attempt = 0; attempt < 2 && !p; attempt++) {
        bool ok = true;
        for (int i = 0; i < m->nsyms; i++) {
            int64_t inc = step[i % nstep] + 40 * (i / nstep);
            m->syms[i].probe = attempt ? m->syms[i].bound - inc : m->syms[i].bound + inc;
            ok &= m->syms[i].probe >= 1;
        }
        if (!ok) break;
        for (int k = 0; k < m->ninputs; k++) {
            binds[k].name = m->inputs[k].name;
            binds[k].shape = m->inputs[k].bound;
            for (int d = 0; d < m->inputs[k].rank; d++)
                if (m->inputs[k].dims[d].symbolic) binds[k].shape.dims[d] = sym_of(m, k, d)->probe;
        }
        ts_error e = {0};
        if (import_graph(gp, opset, base_dir, model, binds, m->ninputs, inits, &p, &e) && !attempt) perr = e;
    }
    free(binds);
    char syms[200];
    ts_model_meta_syms_str(m, syms, sizeof syms);
    if (!p) {
        snprintf(m->why_static, sizeof m->why_static, "at other sizes of %s the model does not load: %.700s", syms,
                 perr.msg);
        return TS_OK;
    }
    bool ok = probe_diff(m, g, p);
    ts_graph_free(p);
    return ok ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "out of memory importing ONNX model");
}

static ts_status import_model(const Onnx__ModelProto *mp, const char *base_dir, const char *model,
                              const ts_input_bind *binds, int nbinds, ts_graph **out, ts_error *err)
{
    if (!mp->has_ir_version || mp->ir_version <= 0)
        return ts_error_set(err, TS_ERR_PARSE, "%s is not a valid ONNX model: ir_version is missing or 0", model);
    if (!mp->graph) return ts_error_set(err, TS_ERR_PARSE, "%s is not a valid ONNX model: it has no graph", model);
    int opset = 0;
    if (read_opset(mp, model, &opset, err)) return err->code;
    const Onnx__GraphProto *gp = mp->graph;
    if (gp->n_node > (size_t)(1 << 26))
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s has too many nodes (%zu)", model, gp->n_node);
    if (gp->n_sparse_initializer)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s: sparse initializers are not supported", model);
    ts_tensor **inits = calloc(gp->n_initializer + 1, sizeof *inits);
    if (!inits) return ts_error_set(err, TS_ERR_NOMEM, "out of memory importing ONNX model");
    ts_graph *g = NULL;
    ts_status st = import_graph(gp, opset, base_dir, model, binds, nbinds, inits, &g, err);
    if (!st && !(g->meta = meta_record(mp, g)))
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory importing ONNX model");
    if (!st && g->meta->nsyms && !g->meta->why_static[0])
        st = probe_sizes(g->meta, gp, opset, base_dir, model, inits, g, err);
    for (size_t i = 0; i < gp->n_initializer; i++) ts_tensor_unref(inits[i]);
    free(inits);
    if (st) {
        ts_graph_free(g);
        return st;
    }
    *out = g;
    return TS_OK;
}

/* *owned (when owned is not NULL) is the caller's malloc'ed copy of data:
 * freed (and set NULL) right after unpacking, which copies every tensor's
 * bytes, so that file, unpacked message and graph tensors are never all
 * in memory at once (BERT's 340 MB of weights: peak 1030 -> ~700 MB). */
static ts_status load_buffer(const void *data, size_t size, const char *base_dir, const char *model,
                             const ts_input_bind *binds, int nbinds, ts_graph **out, ts_error *err, char **owned)
{
    *out = NULL;
    if (!size) return ts_error_set(err, TS_ERR_PARSE, "%s is empty", model);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, size, data);
    if (owned) {
        free(*owned);
        *owned = NULL;
    }
    if (!mp)
        return ts_error_set(err, TS_ERR_PARSE, "%s is not a valid ONNX protobuf (truncated or corrupt)", model);
    ts_status st = import_model(mp, base_dir, model, binds, nbinds, out, err);
    onnx__model_proto__free_unpacked(mp, NULL);
    return st;
}

ts_status ts_onnx_load_buffer(const void *data, size_t size, const char *base_dir, const ts_input_bind *binds,
                              int nbinds, ts_graph **out, ts_error *err)
{
    return load_buffer(data, size, base_dir, "model", binds, nbinds, out, err, NULL);
}

ts_status ts_onnx_load(const char *path, const ts_input_bind *binds, int nbinds, ts_graph **out, ts_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ts_error_set(err, TS_ERR_IO, "cannot open model '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return ts_error_set(err, TS_ERR_IO, "cannot read model '%s': not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    char *data = malloc(size ? size : 1);
    if (!data) {
        fclose(f);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory reading model '%s' (%zu bytes)", path, size);
    }
    size_t got = size ? fread(data, 1, size, f) : 0;
    int rerr = ferror(f);
    fclose(f);
    if (got != size || rerr) {
        free(data);
        return ts_error_set(err, TS_ERR_IO, "cannot read model '%s': short read", path);
    }
    /* External data is relative to the model's directory. */
    char *dir = ts_strdup(path);
    size_t mlen = strlen(path) + 16;
    char *model = malloc(mlen);
    ts_status st;
    if (!dir || !model)
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    else {
        char *slash = strrchr(dir, '/');
        if (slash)
            slash == dir ? (void)(dir[1] = 0) : (void)(*slash = 0);
        else
            strcpy(dir, ".");
        snprintf(model, mlen, "model '%s'", path);
        st = load_buffer(data, size, dir, model, binds, nbinds, out, err, &data);
    }
    free(dir);
    free(model);
    free(data);
    return st;
}
