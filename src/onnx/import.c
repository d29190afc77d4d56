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
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ein/function.h"
#include "ir/ir.h"
#include "ir/meta.h"
#include "ir/name_map.h"
#include "util/mem_check.h"
#include "onnx/proto.h"
#include "onnx/sequence.h"
#include "ops/control_flow.h"
#include "ops/opaque.h"
#include "ops/list.h"
#include "util/heap.h"

/* ------------------------------------------------------------ importer */

typedef struct importer {
    const Onnx__GraphProto *gp;
    const char *base_dir;
    const char *model; /* "model 'path'" or "model", for file-level messages */
    ts_graph *g;
    ts_error *err;
    ts_name_map values; /* tensor name -> value id */
    char **names;    /* display name of each node (file order) */
    int *order;      /* node indices in dependency order */
    ts_tensor **inits; /* decoded initializers (file order): kept by the first import, reused by the probe's */
    const ts_input_bind *binds; /* --input bindings: graph inputs, and outputs of opaque nodes */
    int nbinds;
    struct ts_opaque_table *opaque; /* records of the opaque nodes (src/ops/opaque.h), NULL when none */
    ts_seq_set *seqs; /* sequences resolved at import (onnx/sequence.h), NULL when none */
    bool small_folds; /* fold only nodes whose outputs are small (the model grew too much otherwise) */
    /* the nodes are in dependency order already (a slice, in file order, of
     * a kept model whose file is: ks_index); sort_nodes keeps it as it is */
    bool presorted;
    /* control-flow bodies (docs/control-flow.md): the enclosing graph's
     * importer, and the outer names this body captured */
    struct importer *parent;
    const char **caps;
    int ncaps;
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
        if (!ts_name_map_put(&im->values, tp->name, v)) return oom(im);
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
            found = n && !strcmp(n, bn) && !ts_name_map_find(&im->values, n, NULL);
        }
        if (!found && ts_onnx_opaque_output(im->gp, bn)) continue; /* shape of an opaque node's output */
        if (!found) return ts_error_set(im->err, TS_ERR_INVALID, "input bind '%s' does not name a graph input", bn);
    }
    for (size_t i = 0; i < im->gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = im->gp->input[i];
        const char *name = vi->name;
        if (!name || !*name)
            return ts_error_set(im->err, TS_ERR_PARSE, "%s: graph input %zu has no name", im->model, i);
        /* Old exporters list weights as inputs too: those are constants. */
        if (ts_name_map_find(&im->values, name, NULL)) continue;
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
        if (!ts_name_map_put(&im->values, name, v)) return oom(im);
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

/* ------------------------------------- scopes of control-flow bodies */

/* Whether name is a value of this graph or of an enclosing one. */
static bool scope_has(const importer *im, const char *name)
{
    for (; im; im = im->parent)
        if (ts_name_map_find(&im->values, name, NULL)) return true;
    return false;
}

/* The value id of name in this graph.  A name of an enclosing graph is
 * captured: it becomes an input of this body (or a constant holding the
 * same tensor when it is one there), recorded in im->caps.  Non-zero
 * when no scope has it (err set only when something else failed). */
static ts_status resolve(importer *im, const char *name, int *v)
{
    if (ts_name_map_find(&im->values, name, v)) return TS_OK;
    if (!im->parent || !scope_has(im->parent, name)) return TS_ERR_INVALID;
    int pv;
    if (resolve(im->parent, name, &pv)) return im->err->code ? im->err->code : TS_ERR_INVALID;
    const ts_value *ov = &im->parent->g->values[pv];
    int nv = ov->constant ? ts_graph_add_constant(im->g, name, ov->constant, im->err)
                          : ts_graph_add_input(im->g, name, ov->dtype, &ov->shape, im->err);
    if (nv < 0) return im->err->code;
    const char **c = realloc(im->caps, sizeof *c * (size_t)(im->ncaps + 1));
    if (!c) return oom(im);
    im->caps = c;
    if (!ts_name_map_put(&im->values, name, nv)) return oom(im);
    im->caps[im->ncaps++] = name;
    *v = nv;
    return TS_OK;
}

static bool is_control_flow(const char *op) { return !strcmp(op, "If") || !strcmp(op, "Loop") || !strcmp(op, "Scan"); }

/* Names a node depends on: its inputs, then every name read inside its
 * bodies (nested ones too), which must be computed before it runs. */
typedef struct dep_list {
    const char **names;
    size_t n, cap;
} dep_list;

static bool dep_push(dep_list *d, const char *name)
{
    if (d->n == d->cap) {
        size_t nc = d->cap ? 2 * d->cap : 8;
        const char **p = realloc(d->names, sizeof *p * nc);
        if (!p) return false;
        d->names = p;
        d->cap = nc;
    }
    d->names[d->n++] = name;
    return true;
}

static bool body_reads(const Onnx__GraphProto *gp, dep_list *d);

static bool attrs_read(Onnx__AttributeProto *const *a, size_t n, dep_list *d)
{
    for (size_t i = 0; i < n; i++) {
        if (a[i]->g && !body_reads(a[i]->g, d)) return false;
        for (size_t k = 0; k < a[i]->n_graphs; k++)
            if (!body_reads(a[i]->graphs[k], d)) return false;
    }
    return true;
}

static bool body_reads(const Onnx__GraphProto *gp, dep_list *d)
{
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        for (size_t k = 0; k < n->n_input; k++)
            if (!dep_push(d, n->input[k])) return false;
        if (!attrs_read(n->attribute, n->n_attribute, d)) return false;
    }
    for (size_t i = 0; i < gp->n_output; i++)
        if (!dep_push(d, gp->output[i]->name)) return false;
    return true;
}

static bool deps_of(const Onnx__NodeProto *n, dep_list *d)
{
    for (size_t k = 0; k < n->n_input; k++)
        if (!dep_push(d, n->input[k])) return false;
    return attrs_read(n->attribute, n->n_attribute, d);
}

static ts_status add_cf_node(importer *im, int ni);

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
        if (ts_ein_function_is_call(n->domain, op)) continue; /* tsopt's own eOperator (einnet/function.h) */
        if (ts_onnx_seq_is_op(n)) continue;                    /* resolved at import (onnx/sequence.h) */
        if (ts_onnx_node_is_opaque(n)) { /* kept as it is: its outputs' types must be known */
            if (ts_onnx_opaque_check(im->g, gp, n, name, im->binds, im->nbinds, im->err)) return im->err->code;
            continue;
        }
        if (!is_onnx_domain(n->domain))
            return ts_error_set(im->err, TS_ERR_UNSUPPORTED, "node '%s' (%s): domain '%s' is not supported", name, op,
                                n->domain);
        if (strcmp(op, "Constant") && (!ts_op_find(op) || strchr(op, '.'))) /* a dot: tsopt-internal, never in a file */
            return ts_error_set(im->err, TS_ERR_UNSUPPORTED, "node '%s': operator '%s' (opset %d) is not supported",
                                name, op, im->g->opset);
    }
    return TS_OK;
}

/* Among ready nodes the earliest in the file goes first, so a sorted file
 * keeps its order. */
static bool earlier(const void *a, const void *b) { return *(const int *)a < *(const int *)b; }

/* Topological order by tensor names; errors name a missing input or a node
 * on a cycle. */
static ts_status sort_nodes(importer *im)
{
    const Onnx__GraphProto *gp = im->gp;
    int nn = (int)gp->n_node;
    if (im->presorted) { /* a sized constant's slice: sorting it was a quarter of its import (perf) */
        for (int i = 0; i < nn; i++) im->order[i] = i;
        return TS_OK;
    }
    ts_name_map prod = {0};
    int *indeg = calloc((size_t)nn + 1, sizeof(int));
    int *ustart = calloc((size_t)nn + 2, sizeof(int));
    int *heap = malloc(sizeof(int) * ((size_t)nn + 1));
    int *users = NULL, *fill = NULL;
    dep_list *deps = calloc((size_t)nn + 1, sizeof *deps);
    ts_status st = TS_OK;
    if (!indeg || !ustart || !heap || !deps) goto nomem;
    for (int i = 0; i < nn; i++)
        if (!deps_of(gp->node[i], &deps[i])) goto nomem;
    for (int i = 0; i < nn; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        for (size_t o = 0; o < n->n_output; o++) {
            const char *t = n->output[o];
            int other;
            if (!t || !*t) continue;
            if (ts_name_map_find(&im->values, t, NULL)) {
                st = ts_error_set(im->err, TS_ERR_INVALID,
                                  "node '%s' (%s): output '%s' has the name of a graph input or initializer",
                                  im->names[i], n->op_type, t);
                goto out;
            }
            if (ts_name_map_find(&prod, t, &other)) {
                st = ts_error_set(im->err, TS_ERR_INVALID, "tensor '%s' is produced by both node '%s' and node '%s'",
                                  t, im->names[other], im->names[i]);
                goto out;
            }
            if (!ts_name_map_put(&prod, t, i)) goto nomem;
        }
    }
    /* Edges producer -> user, one per input occurrence, in CSR form. */
    size_t nedges = 0;
    for (int i = 0; i < nn; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        for (size_t k = 0; k < deps[i].n; k++) {
            const char *t = deps[i].names[k];
            int p;
            if (!t || !*t || scope_has(im, t)) continue;
            if (!ts_name_map_find(&prod, t, &p)) {
                if (k >= n->n_input) continue; /* read inside a body: its import names it */
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
        for (size_t k = 0; k < deps[i].n; k++) {
            const char *t = deps[i].names[k];
            int p;
            if (!t || !*t || scope_has(im, t) || !ts_name_map_find(&prod, t, &p)) continue;
            users[ustart[p] + fill[p]++] = i;
        }
    }
    size_t nheap = 0;
    int cnt = 0;
    for (int i = 0; i < nn; i++)
        if (!indeg[i]) ts_heap_push(heap, sizeof *heap, &nheap, &i, earlier);
    while (nheap) {
        int i;
        ts_heap_remove(heap, sizeof *heap, &nheap, 0, &i, earlier);
        im->order[cnt++] = i;
        for (int e = ustart[i]; e < ustart[i + 1]; e++)
            if (--indeg[users[e]] == 0) ts_heap_push(heap, sizeof *heap, &nheap, &users[e], earlier);
    }
    if (cnt < nn) {
        /* Walk back through unfinished producers until a node repeats: that
         * node lies on a cycle (every unfinished node has one). */
        int cur = 0;
        while (!indeg[cur]) cur++;
        memset(fill, 0, sizeof(int) * (size_t)nn);
        while (!fill[cur]) {
            fill[cur] = 1;
            int next = -1;
            for (size_t k = 0; k < deps[cur].n && next < 0; k++) {
                const char *t = deps[cur].names[k];
                int p;
                if (t && *t && !scope_has(im, t) && ts_name_map_find(&prod, t, &p) && indeg[p]) next = p;
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
    for (int i = 0; deps && i < nn; i++) free(deps[i].names);
    free(deps);
    ts_name_map_free(&prod);
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
    return ts_name_map_put(&im->values, n->output[0], v) ? TS_OK : oom(im);
}

/* Folds that stay allowed when the model must not grow: shape arithmetic. */
#define SMALL_FOLD_BYTES 4096

static bool fold_is_small(const ts_graph *g, int ni)
{
    const ts_node *n = &g->nodes[ni];
    for (int o = 0; o < n->noutputs; o++) {
        const ts_value *v = &g->values[n->outputs[o]];
        if ((size_t)ts_shape_numel(&v->shape) * ts_dtype_size(v->dtype) > SMALL_FOLD_BYTES) return false;
    }
    return true;
}

static bool seq_resolve(void *im, const char *name, int *v) { return !resolve(im, name, v); }

static ts_status add_node(importer *im, int ni)
{
    const Onnx__NodeProto *n = im->gp->node[ni];
    const char *name = im->names[ni];
    if (is_control_flow(n->op_type) && is_onnx_domain(n->domain)) return add_cf_node(im, ni);
    if (ts_onnx_seq_is_op(n)) {
        int v;
        if (ts_onnx_seq_node(im->g, &im->seqs, n, name, seq_resolve, im, &v, im->err)) return im->err->code;
        return v < 0 || ts_name_map_put(&im->values, n->output[0], v) ? TS_OK : oom(im);
    }
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
    /* a call of tsopt's eOperator function is read back as the eOperator */
    bool ein = ts_ein_function_is_call(n->domain, n->op_type);
    bool opaque = !ein && ts_onnx_node_is_opaque(n);
    const ts_op_desc *op = ein ? &ts_op_einnet : opaque ? &ts_op_opaque : ts_op_find(n->op_type);
    for (int k = 0; k < nin; k++) {
        ins[k] = -1;
        const char *t = n->input[k];
        /* operators may assume their required inputs are present */
        if (k < op->min_inputs && (!t || !*t)) {
            st = ts_error_set(im->err, TS_ERR_INVALID, "node '%s' (%s): required input %d has no name", name,
                              n->op_type, k);
            goto out;
        }
        if (t && *t && resolve(im, t, &ins[k])) { /* sort_nodes guarantees it; stay safe */
            st = ts_error_set(im->err, TS_ERR_INVALID,
                              "node '%s' (%s): input '%s' is not produced by any node or graph input", name, n->op_type,
                              t);
            goto out;
        }
    }
    if (opaque) {
        int idx = ts_onnx_opaque_import(im->g, im->gp, n, name, ins, nin, im->binds, im->nbinds, &im->opaque, im->err);
        if (idx < 0) {
            st = im->err->code;
            goto out;
        }
        for (int o = 0; o < im->g->nodes[idx].noutputs; o++)
            if (n->output[o] && *n->output[o] &&
                !ts_name_map_put(&im->values, n->output[o], im->g->nodes[idx].outputs[o])) {
                st = oom(im);
                goto out;
            }
        goto out;
    }
    if (ts_onnx_attrs_decode(n->attribute, n->n_attribute, im->base_dir, name, n->op_type, attrs, &store, im->err)) {
        st = im->err->code;
        goto out;
    }
    int idx = ts_graph_add_node(im->g, ein ? op->name : n->op_type, name, ins, nin, attrs, (int)n->n_attribute, nout,
                                (const char *const *)n->output, outs, im->err);
    if (idx < 0) {
        st = im->err->code;
        goto out;
    }
    for (int o = 0; o < nout; o++)
        if (n->output[o] && *n->output[o] && !ts_name_map_put(&im->values, n->output[o], outs[o])) {
            st = oom(im);
            goto out;
        }
    /* Shape of a static shape folds too (TS_OP_SHAPE_ONLY) */
    if ((!im->small_folds || fold_is_small(im->g, idx)) && ts_node_fold(im->g, idx, im->err) < 0) st = im->err->code;
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
        if (ts_onnx_seq_has(im->seqs, name))
            return ts_error_set(im->err, TS_ERR_UNSUPPORTED,
                                "graph output '%s' is a sequence: tsopt's graphs return tensors only", name);
        if (resolve(im, name, &v))
            return ts_error_set(im->err, TS_ERR_INVALID, "graph output '%s' is not produced by any node or graph input",
                                name);
        if (ts_graph_add_output(im->g, v, im->err)) return im->err->code;
    }
    return TS_OK;
}

/* ------------------------------------------------- control-flow nodes */

/* Imports body gp of node `node` as a graph of its own whose formal inputs
 * have the types dt/sh (the ONNX body's own declarations may leave shapes
 * out; element types must agree).  Outer names it reads become captures
 * (b->cap_slot still to be set by the caller). */
static ts_status import_body(importer *parent, const Onnx__GraphProto *gp, const char *node, const char *op,
                             const char *attr, int nformal, const ts_dtype *dt, const ts_shape *sh, ts_body **out)
{
    ts_error *err = parent->err;
    *out = NULL;
    if ((int)gp->n_input != nformal)
        return ts_error_set(err, TS_ERR_INVALID, "node '%s' (%s): attribute '%s' has %zu inputs, expected %d", node,
                            op, attr, gp->n_input, nformal);
    if (gp->n_sparse_initializer)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s' (%s): attribute '%s': sparse initializers are not "
                            "supported", node, op, attr);
    int depth = 0;
    for (const importer *p = parent; p; p = p->parent) depth++;
    if (depth > 64)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s' (%s): bodies nested more than 64 deep", node, op);
    /* the binds reach the body for its opaque nodes' outputs (--input OUT:DIMS) */
    importer im = {.gp = gp, .base_dir = parent->base_dir, .model = parent->model, .err = err, .parent = parent,
                   .binds = parent->binds, .nbinds = parent->nbinds};
    im.g = ts_graph_new(str_or(gp->name, attr), parent->g->opset);
    im.names = calloc(gp->n_node + 1, sizeof *im.names);
    im.order = malloc(sizeof(int) * (gp->n_node + 1));
    im.inits = calloc(gp->n_initializer + 1, sizeof *im.inits);
    ts_status st = TS_OK;
    if (!im.g || !im.names || !im.order || !im.inits) st = oom(&im);
    if (!st) st = add_initializers(&im);
    for (int i = 0; !st && i < nformal; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *name = vi->name;
        const Onnx__TypeProto *tp = vi->type;
        ts_dtype ddt;
        if (!name || !*name) {
            st = ts_error_set(err, TS_ERR_PARSE, "node '%s' (%s): attribute '%s': input %d has no name", node, op, attr,
                              i);
            break;
        }
        if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
            tp->tensor_type->has_elem_type && tp->tensor_type->elem_type &&
            (!ts_onnx_dtype_from(tp->tensor_type->elem_type, &ddt) || ddt != dt[i])) {
            st = ts_error_set(err, TS_ERR_INVALID, "node '%s' (%s): attribute '%s': input '%s' is declared %s, the "
                              "node gives %s", node, op, attr, name, ts_onnx_dtype_name(tp->tensor_type->elem_type),
                              ts_dtype_name(dt[i]));
            break;
        }
        int v = ts_graph_add_input(im.g, name, dt[i], &sh[i], err);
        if (v < 0 || !ts_name_map_put(&im.values, name, v)) st = v < 0 ? err->code : oom(&im);
    }
    if (!st && !(st = check_nodes(&im)) && !(st = sort_nodes(&im))) {
        for (size_t k = 0; k < gp->n_node && !st; k++) {
            int ni = im.order[k];
            st = strcmp(gp->node[ni]->op_type, "Constant") ? add_node(&im, ni) : add_constant_node(&im, ni);
        }
        if (!st) st = add_outputs(&im);
        if (!st && im.opaque) {
            /* opaque nodes inside the body: its graph gets a model record
             * of its own that holds just their NodeProtos, for export */
            ts_model_meta *m = ts_model_meta_new();
            if (!m)
                st = oom(&im);
            else {
                m->opaque = im.opaque;
                im.opaque = NULL;
                im.g->meta = m;
            }
        }
        if (!st) {
            ts_graph_compact(im.g);
            st = ts_graph_validate(im.g, err);
        }
    }
    ts_body *b = NULL;
    if (!st) {
        b = ts_body_new(im.g, nformal, err);
        im.g = NULL;
        if (!b) st = err->code;
    }
    /* captures whose constants folded away are gone from the body */
    for (int j = 0; !st && j < im.ncaps; j++)
        if (ts_graph_find_value(b->g, im.caps[j]) >= 0) st = ts_body_add_capture(b, im.caps[j], -1, err);
    if (st && !strstr(err->msg, attr)) ts_error_prefix(err, "node '%s' (%s): attribute '%s'", node, op, attr);
    ts_name_map_free(&im.values);
    ts_onnx_seq_set_free(im.seqs);
    if (im.names)
        for (size_t i = 0; i < gp->n_node; i++) free(im.names[i]);
    free(im.names);
    free(im.order);
    if (im.inits)
        for (size_t i = 0; i < gp->n_initializer; i++) ts_tensor_unref(im.inits[i]);
    free(im.inits);
    free(im.caps);
    ts_opaque_table_free(im.opaque);
    ts_graph_free(im.g);
    if (st) {
        ts_body_unref(b);
        return st;
    }
    *out = b;
    return TS_OK;
}

/* What graph gp declares for tensor name: a static tensor type, else rank -1. */
static void declared_type(const Onnx__GraphProto *gp, const char *name, ts_dtype *dt, ts_shape *sh)
{
    *dt = TS_UNDEFINED;
    sh->rank = -1;
    const Onnx__ValueInfoProto *vi = NULL;
    for (size_t i = 0; i < gp->n_output && !vi; i++)
        if (gp->output[i]->name && !strcmp(gp->output[i]->name, name)) vi = gp->output[i];
    for (size_t i = 0; i < gp->n_value_info && !vi; i++)
        if (gp->value_info[i]->name && !strcmp(gp->value_info[i]->name, name)) vi = gp->value_info[i];
    const Onnx__TypeProto *tp = vi ? vi->type : NULL;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return;
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (tt->has_elem_type) ts_onnx_dtype_from(tt->elem_type, dt);
    if (!tt->shape || tt->shape->n_dim > TS_MAX_RANK) return;
    for (size_t d = 0; d < tt->shape->n_dim; d++)
        if (tt->shape->dim[d]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
            tt->shape->dim[d]->dim_value < 0)
            return;
    sh->rank = (int)tt->shape->n_dim;
    for (int d = 0; d < sh->rank; d++) sh->dims[d] = tt->shape->dim[d]->dim_value;
}

/* An int (or ints) attribute of a NodeProto read before the node exists. */
static const Onnx__AttributeProto *proto_attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t a = 0; a < n->n_attribute; a++)
        if (n->attribute[a]->name && !strcmp(n->attribute[a]->name, name)) return n->attribute[a];
    return NULL;
}

/* If, Loop, Scan: the bodies are imported first (their formal inputs typed
 * from the node's inputs), then the node, whose inputs are its own
 * followed by every value its bodies capture. */
static ts_status add_cf_node(importer *im, int ni)
{
    const Onnx__NodeProto *n = im->gp->node[ni];
    const char *name = im->names[ni], *opn = n->op_type;
    const ts_op_desc *op = ts_op_find(opn);
    int nin = (int)n->n_input, nout = (int)n->n_output;
    while (nin > 0 && !str_or(n->input[nin - 1], NULL)) nin--;
    while (nout > 0 && !str_or(n->output[nout - 1], NULL)) nout--;
    int nexp = op == &ts_op_loop && nin < 2 ? 2 : nin; /* Loop's M and cond keep their slots */
    bool scan = op == &ts_op_scan;
    int scan0 = scan && im->g->opset < 9; /* opset 8: input 0 is sequence_lens, axis 0 the batch */
    size_t cap = (size_t)nexp + 16;
    int *ins = malloc(sizeof(int) * cap), *outs = malloc(sizeof(int) * ((size_t)nout + 1));
    ts_dtype *dt = calloc((size_t)nexp + 1, sizeof *dt);
    ts_shape *sh = calloc((size_t)nexp + 1, sizeof *sh);
    ts_dtype *ddt = calloc((size_t)nout + 1, sizeof *ddt);
    ts_shape *dsh = calloc((size_t)nout + 1, sizeof *dsh);
    ts_attr *attrs = calloc(n->n_attribute + 1, sizeof *attrs);
    Onnx__AttributeProto **plain = calloc(n->n_attribute + 1, sizeof *plain);
    ts_body *bodies[TS_CF_MAX_BODIES] = {0};
    ts_onnx_attr_store store = {0};
    int nins = nexp, nformal = 0, nplain = 0;
    ts_status st = TS_OK;
    if (!ins || !outs || !dt || !sh || !ddt || !dsh || !attrs || !plain) {
        st = oom(im);
        goto out;
    }
    for (int k = 0; k < nexp; k++) {
        const char *t = k < nin ? n->input[k] : NULL;
        ins[k] = -1;
        if (t && *t && resolve(im, t, &ins[k])) {
            st = im->err->code ? im->err->code
                               : ts_error_set(im->err, TS_ERR_INVALID, "node '%s' (%s): input '%s' is not produced by "
                                              "any node or graph input", name, opn, t);
            goto out;
        }
    }
    /* the bodies' formal inputs */
    if (op == &ts_op_loop) {
        nformal = nexp;
        dt[0] = TS_I64;
        dt[1] = TS_BOOL;
        for (int k = 2; k < nexp; k++) {
            if (ins[k] < 0) {
                st = ts_error_set(im->err, TS_ERR_INVALID, "node '%s' (Loop): loop-carried input %d has no name", name,
                                  k - 2);
                goto out;
            }
            dt[k] = im->g->values[ins[k]].dtype;
            sh[k] = im->g->values[ins[k]].shape;
        }
    } else if (scan) {
        const Onnx__AttributeProto *a = proto_attr(n, "num_scan_inputs"), *ax = proto_attr(n, "scan_input_axes");
        int m = a && a->has_i ? (int)a->i : -1;
        if (m < 1 || m > nexp) {
            st = ts_error_set(im->err, TS_ERR_INVALID, "node '%s' (Scan): num_scan_inputs is missing or not between 1 "
                              "and its %d inputs", name, nexp);
            goto out;
        }
        nformal = nexp - scan0;
        for (int k = scan0; k < nexp; k++) {
            if (ins[k] < 0) {
                st = ts_error_set(im->err, TS_ERR_INVALID, "node '%s' (Scan): input %d has no name", name, k);
                goto out;
            }
            int f = k - scan0; /* the body's formal input */
            dt[f] = im->g->values[ins[k]].dtype;
            sh[f] = im->g->values[ins[k]].shape;
            int j = k - (nexp - m), axis = scan0;
            if (scan0 && sh[f].rank >= 1) { /* the batch axis */
                for (int d = 0; d + 1 < sh[f].rank; d++) sh[f].dims[d] = sh[f].dims[d + 1];
                sh[f].rank--;
                axis = 0;
            }
            if (j < 0) continue;
            if (sh[f].rank < 1 || (ax && !scan0 && (size_t)j < ax->n_ints &&
                                   !ts_axis_norm(ax->ints[j], sh[f].rank, &axis))) {
                st = ts_error_set(im->err, TS_ERR_INVALID, "node '%s' (Scan): scan input %d has no such axis", name, j);
                goto out;
            }
            for (int d = axis; d + 1 < sh[f].rank; d++) sh[f].dims[d] = sh[f].dims[d + 1];
            sh[f].rank--;
        }
    }
    /* bodies, then the other attributes */
    for (size_t a = 0; a < n->n_attribute; a++) {
        Onnx__AttributeProto *at = n->attribute[a];
        const char *an = at->name ? at->name : "";
        int slot = -1;
        for (int k = 0; k < (op == &ts_op_if ? 2 : 1); k++)
            if (!strcmp(an, ts_cf_body_attr_name(op, k))) slot = k;
        if (slot < 0) {
            plain[nplain++] = at;
            continue;
        }
        if (!at->g) {
            st = ts_error_set(im->err, TS_ERR_PARSE, "node '%s' (%s): attribute '%s' holds no graph", name, opn, an);
            goto out;
        }
        if (bodies[slot]) continue; /* a repeated attribute: the first counts */
        if ((st = import_body(im, at->g, name, opn, an, nformal, dt, sh, &bodies[slot]))) goto out;
    }
    if (ts_onnx_attrs_decode(plain, (size_t)nplain, im->base_dir, name, opn, attrs, &store, im->err)) {
        st = im->err->code;
        goto out;
    }
    int na = nplain;
    for (int k = 0; k < TS_CF_MAX_BODIES; k++) {
        ts_body *b = bodies[k];
        if (!b) continue;
        attrs[na++] = (ts_attr){.name = ts_cf_body_attr_name(op, k), .kind = TS_ATTR_GRAPH, .body = b};
        /* each capture: resolved here (maybe captured from further out) and
         * given a node input after the explicit ones */
        for (int j = 0; j < b->ncap; j++) {
            int v, slot = -1;
            if (resolve(im, b->cap_name[j], &v)) {
                st = im->err->code ? im->err->code : oom(im);
                goto out;
            }
            for (int s = nexp; s < nins && slot < 0; s++)
                if (ins[s] == v) slot = s;
            if (slot < 0) {
                if ((size_t)nins == cap) {
                    int *p = realloc(ins, sizeof(int) * (cap *= 2));
                    if (!p) {
                        st = oom(im);
                        goto out;
                    }
                    ins = p;
                }
                ins[slot = nins++] = v;
            }
            b->cap_slot[j] = slot;
        }
    }
    for (int o = 0; o < nout; o++) declared_type(im->gp, str_or(n->output[o], ""), &ddt[o], &dsh[o]);
    for (int k = 0; k < TS_CF_MAX_BODIES; k++)
        if (bodies[k] && (st = ts_body_set_declared(bodies[k], nout, ddt, dsh, im->err))) goto out;
    int idx = ts_graph_add_node(im->g, opn, name, ins, nins, attrs, na, nout, (const char *const *)n->output, outs,
                                im->err);
    if (idx < 0) {
        st = im->err->code;
        goto out;
    }
    for (int o = 0; o < nout; o++)
        if (n->output[o] && *n->output[o] && !ts_name_map_put(&im->values, n->output[o], outs[o])) {
            st = oom(im);
            goto out;
        }
    if (ts_node_fold(im->g, idx, im->err) < 0) st = im->err->code;
out:
    for (int k = 0; k < TS_CF_MAX_BODIES; k++) ts_body_unref(bodies[k]); /* the node holds its own references */
    ts_onnx_attr_store_free(&store);
    free(ins);
    free(outs);
    free(dt);
    free(sh);
    free(ddt);
    free(dsh);
    free(attrs);
    free(plain);
    return st;
}

/* Steps 2-5: the graph at the sizes binds give.  inits (n_initializer
 * entries) receives each decoded initializer, or supplies it when set. */
static ts_status import_graph(const Onnx__GraphProto *gp, int opset, const char *base_dir, const char *model,
                              const ts_input_bind *binds, int nbinds, ts_tensor **inits, ts_graph **out,
                              struct ts_opaque_table **opaque, bool small_folds, bool presorted, ts_error *err)
{
    importer im = {.gp = gp, .base_dir = base_dir, .model = model, .err = err, .inits = inits, .binds = binds,
                   .nbinds = nbinds, .small_folds = small_folds, .presorted = presorted};
    *opaque = NULL;
    im.g = ts_graph_new(str_or(gp->name, "graph"), opset);
    im.names = calloc(gp->n_node + 1, sizeof *im.names);
    im.order = malloc(sizeof(int) * (gp->n_node + 1));
    ts_status st = TS_OK;
    if (im.g) ts_graph_index_names(im.g, true); /* off again below: a decoder's re-load was quadratic in its values */
    if (!im.g || !im.names || !im.order)
        st = oom(&im);
    else if (!(st = add_initializers(&im)) && !(st = add_inputs(&im, binds, nbinds)) && !(st = check_nodes(&im)) &&
             !(st = sort_nodes(&im))) {
        for (size_t k = 0; k < gp->n_node && !st; k++) {
            int ni = im.order[k];
            st = strcmp(gp->node[ni]->op_type, "Constant") ? add_node(&im, ni) : add_constant_node(&im, ni);
        }
        if (!st) st = add_outputs(&im);
        if (im.g) ts_graph_index_names(im.g, false);
        if (!st) {
            ts_graph_compact(im.g);
            st = ts_graph_validate(im.g, err);
        }
    }
    ts_name_map_free(&im.values);
    ts_onnx_seq_set_free(im.seqs);
    if (im.names)
        for (size_t i = 0; i < gp->n_node; i++) free(im.names[i]);
    free(im.names);
    free(im.order);
    if (st) {
        ts_graph_free(im.g);
        ts_opaque_table_free(im.opaque);
        return st;
    }
    *out = im.g;
    *opaque = im.opaque;
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

/* Adds tp's external-data location to m->external once (a model written
 * as its file's bytes needs each of them beside it). */
static void external_note(ts_model_meta *m, const Onnx__TensorProto *tp, bool *bad)
{
    const char *loc = NULL;
    for (size_t i = 0; i < tp->n_external_data; i++)
        if (tp->external_data[i]->key && !strcmp(tp->external_data[i]->key, "location"))
            loc = tp->external_data[i]->value;
    if (!loc || !*loc || *bad) return;
    for (int i = 0; i < m->nexternal; i++)
        if (!strcmp(m->external[i], loc)) return;
    char **grown = realloc(m->external, (size_t)(m->nexternal + 1) * sizeof *grown);
    if (!grown) {
        *bad = true;
        return;
    }
    m->external = grown;
    if ((m->external[m->nexternal] = dup_str(loc, bad))) m->nexternal++;
}

/* Every external-data location of gp: its initializers, tensor
 * attributes (a Constant's value) and control-flow bodies, to a depth. */
static void externals_note(ts_model_meta *m, const Onnx__GraphProto *gp, int depth, bool *bad)
{
    if (!gp || depth > 16) return;
    for (size_t i = 0; i < gp->n_initializer; i++) external_note(m, gp->initializer[i], bad);
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t a = 0; a < gp->node[i]->n_attribute; a++) {
            const Onnx__AttributeProto *at = gp->node[i]->attribute[a];
            if (at->t) external_note(m, at->t, bad);
            for (size_t k = 0; k < at->n_tensors; k++) external_note(m, at->tensors[k], bad);
            externals_note(m, at->g, depth + 1, bad);
            for (size_t k = 0; k < at->n_graphs; k++) externals_note(m, at->graphs[k], depth + 1, bad);
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
    externals_note(m, gp, 0, &bad);
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

/* Whether the bodies of control-flow nodes a (bound sizes) and b (probe
 * sizes) are the same graphs with the same constants, nested ones too:
 * a body is written as it was built, so none of its constants may follow
 * the sizes (its shapes are re-inferred at other sizes, its values not). */
static bool bodies_same(const ts_node *a, const ts_node *b)
{
    ts_body *ba[TS_CF_MAX_BODIES], *bb[TS_CF_MAX_BODIES];
    int na = ts_cf_bodies(a, ba), nb = ts_cf_bodies(b, bb);
    if (na != nb) return false;
    for (int k = 0; k < na; k++) {
        const ts_graph *x = ba[k]->g, *y = bb[k]->g;
        if (x->nnodes != y->nnodes || x->ninputs != y->ninputs || x->noutputs != y->noutputs) return false;
        for (int v = 0; v < x->nvalues; v++) {
            if (!x->values[v].constant) continue;
            int w = ts_graph_find_value(y, x->values[v].name);
            if (w < 0 || !y->values[w].constant || !same_tensor(x->values[v].constant, y->values[w].constant))
                return false;
        }
        for (int i = 0; i < x->nnodes; i++)
            if (x->nodes[i].op != y->nodes[i].op || !bodies_same(&x->nodes[i], &y->nodes[i])) return false;
    }
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
            } else if (j == 1 && (a->op == &ts_op_reshape || a->op == &ts_op_expand) &&
                       !add_literal(m, x->constant, &lcap))
                return false;
        }
        if (!same) snprintf(differs, sizeof differs, "node '%s'", a->name);
        else if (!bodies_same(a, b))
            snprintf(differs, sizeof differs, "a constant inside the bodies of node '%s'", a->name);
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
 * its maximum; multiplied by 2, 3, 5... when neither loads, for sizes that
 * must stay multiples of something: an even length split in halves, a
 * window or block size) and compares.  Sets m->why_static when the model cannot
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
    for (int attempt = 0; attempt < 3 && !p; attempt++) {
        bool ok = true;
        for (int i = 0; i < m->nsyms; i++) {
            int64_t inc = step[i % nstep] + 40 * (i / nstep), b = m->syms[i].bound;
            m->syms[i].probe = attempt == 0 ? b + inc : attempt == 1 ? b - inc : b * inc;
            ok &= m->syms[i].probe >= 1 && m->syms[i].probe <= TS_MAX_ELEMENTS / 64;
        }
        if (!ok) continue;
        for (int k = 0; k < m->ninputs; k++) {
            binds[k].name = m->inputs[k].name;
            binds[k].shape = m->inputs[k].bound;
            for (int d = 0; d < m->inputs[k].rank; d++)
                if (m->inputs[k].dims[d].symbolic) binds[k].shape.dims[d] = sym_of(m, k, d)->probe;
        }
        ts_error e = {0};
        struct ts_opaque_table *tab = NULL;
        if (import_graph(gp, opset, base_dir, model, binds, m->ninputs, inits, &p, &tab, m->small_folds, false, &e) && !attempt)
            perr = e;
        ts_opaque_table_free(tab); /* the probe's graph is compared, never written */
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

/* Bytes of the weights the file holds: initializers (decoded) and
 * Constant nodes. */
static int64_t file_weight_bytes(const Onnx__GraphProto *gp, ts_tensor *const *inits)
{
    int64_t b = 0;
    for (size_t i = 0; i < gp->n_initializer; i++) b += inits[i] ? (int64_t)inits[i]->nbytes : 0;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (!n->op_type || strcmp(n->op_type, "Constant") || n->n_attribute != 1) continue;
        const Onnx__AttributeProto *a = n->attribute[0];
        ts_dtype dt;
        if (a->t && a->t->has_data_type && ts_onnx_dtype_from(a->t->data_type, &dt)) {
            int64_t e = 1;
            for (size_t d = 0; d < a->t->n_dims && e >= 0; d++)
                e = a->t->dims[d] >= 0 && a->t->dims[d] < ((int64_t)1 << 40) ? e * a->t->dims[d] : -1;
            if (e > 0 && e < ((int64_t)1 << 40)) b += e * (int64_t)ts_dtype_size(dt);
        } else
            b += (int64_t)(a->n_floats * 4 + a->n_ints * 8 + 8);
    }
    return b;
}

/* The initializers whose raw_data was cut from the message (spans into
 * src), decoded now: import_graph finds them in inits. */
static ts_status decode_cut(const Onnx__GraphProto *gp, const ts_onnx_src *src, const ts_onnx_span *spans,
                            const char *base_dir, ts_tensor **inits, ts_error *err)
{
    for (size_t i = 0; src && i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp->name || !*tp->name) break; /* add_initializers says so, in order */
        if (!spans[i].len) continue;
        char what[400];
        snprintf(what, sizeof what, "initializer '%s'", tp->name);
        if (ts_onnx_tensor_decode_span(tp, src, &spans[i], base_dir, what, &inits[i], err)) return err->code;
    }
    return TS_OK;
}

/* When the load failed with symbolic input dimensions left unbound (taken
 * as 1, input_shape), says so after the error: a size check that refuses 1
 * (a reflect Pad, a kernel larger than the input) is the model's sizes not
 * yet given, not a bad model.  Leaves the value-input complaint as it is
 * (value_inputs.h parses it). */
static void note_unbound(const Onnx__GraphProto *gp, const ts_input_bind *binds, int nbinds, ts_error *err)
{
    char names[256] = "";
    size_t k = 0;
    int n = 0;
    if (strstr(err->msg, "') must be a constant")) return;
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const Onnx__TypeProto *tp = vi->type;
        const Onnx__TensorShapeProto *sp =
            tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type ? tp->tensor_type->shape : NULL;
        if (!sp || !vi->name || find_bind(binds, nbinds, vi->name)) continue;
        for (size_t d = 0; d < sp->n_dim; d++) {
            const Onnx__TensorShapeProto__Dimension *dm = sp->dim[d];
            if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) continue;
            char one[128];
            if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dm->dim_param && *dm->dim_param)
                snprintf(one, sizeof one, "'%.60s'", dm->dim_param);
            else
                snprintf(one, sizeof one, "'%.60s' axis %zu", vi->name, d);
            if (strstr(names, one)) continue;
            if (k < sizeof names) k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", n ? ", " : "", one);
            n++;
        }
    }
    if (!n) return;
    size_t m = strlen(err->msg);
    snprintf(err->msg + m, sizeof err->msg - m,
             " (at the placeholder size 1 of the unbound symbolic dimension%s %s: give the sizes with inputs, "
             "or --input NAME:DIMS)", n > 1 ? "s" : "", names);
}

static ts_status import_model(const Onnx__ModelProto *mp, const char *base_dir, const char *model,
                              const ts_input_bind *binds, int nbinds, const ts_onnx_src *src,
                              const ts_onnx_span *spans, ts_tensor *const *kept, ts_graph **out, ts_error *err)
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
    struct ts_opaque_table *opaque = NULL;
    for (size_t i = 0; kept && i < gp->n_initializer; i++) inits[i] = kept[i] ? ts_tensor_ref(kept[i]) : NULL;
    ts_status st = decode_cut(gp, src, spans, base_dir, inits, err);
    if (!st && (st = import_graph(gp, opset, base_dir, model, binds, nbinds, inits, &g, &opaque, false, false, err)))
        note_unbound(gp, binds, nbinds, err);
    bool small_folds = false;
    if (!st && ts_graph_weight_bytes(g) > file_weight_bytes(gp, inits) / 10 * 11 + SMALL_FOLD_BYTES) {
        /* folding made the weights more than 10% larger (Expand, Tile of
         * weights...): what cannot be folded without growing stays
         * computed, as the file had it */
        ts_graph_free(g);
        ts_opaque_table_free(opaque);
        g = NULL;
        opaque = NULL;
        small_folds = true;
        st = import_graph(gp, opset, base_dir, model, binds, nbinds, inits, &g, &opaque, true, false, err);
    }
    if (!st && !(g->meta = meta_record(mp, g)))
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory importing ONNX model");
    if (!st) {
        g->meta->opaque = opaque;
        g->meta->small_folds = small_folds;
    } else
        ts_opaque_table_free(opaque);
    /* A kept model's load is for one run's sizes (ts_session, a decoder's
     * every token): the import at other sizes that probe_sizes makes would
     * double its cost, for what only writing the graph out reads */
    if (!st && kept && g->meta->nsyms && !g->meta->why_static[0])
        snprintf(g->meta->why_static, sizeof g->meta->why_static, "loaded for one run's sizes, not probed at others");
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

/* Reads the whole of src (a model that could not be cut: protobuf-c parses
 * it as it is and names what is wrong). */
static ts_status read_whole(const ts_onnx_src *src, const char *model, uint8_t **out, ts_error *err)
{
    *out = malloc(src->size ? (size_t)src->size : 1);
    if (!*out) return ts_error_set(err, TS_ERR_NOMEM, "out of memory reading %s (%llu bytes)", model,
                                   (unsigned long long)src->size);
    ts_onnx_span all = {0, src->size};
    if (ts_onnx_span_read(src, &all, *out, model, err)) {
        free(*out);
        *out = NULL;
        return err->code;
    }
    return TS_OK;
}

/* The model's message, its large raw_data cut (spans: where each
 * initializer's was, NULL when it could not be cut); *mp NULL on failure. */
static ts_status read_message(const ts_onnx_src *src, const char *model, Onnx__ModelProto **mp, ts_onnx_span **spans,
                              ts_error *err)
{
    *mp = NULL;
    *spans = NULL;
    if (!src->size) return ts_error_set(err, TS_ERR_PARSE, "%s is empty", model);
    uint8_t *msg = NULL, *whole = NULL;
    size_t mlen = 0, nspans = 0;
    ts_status st = ts_onnx_raw_spans(src, &msg, &mlen, spans, &nspans, model, err);
    if (!st && !msg && !src->mem) st = read_whole(src, model, &whole, err);
    if (st) return st;
    xmem_trace("import: message read");
    *mp = msg ? onnx__model_proto__unpack(NULL, mlen, msg)
              : onnx__model_proto__unpack(NULL, (size_t)src->size, whole ? whole : src->mem);
    free(msg);
    free(whole);
    xmem_trace("import: message unpacked");
    if (!*mp) st = ts_error_set(err, TS_ERR_PARSE, "%s is not a valid ONNX protobuf (truncated or corrupt)", model);
    else if (*spans && (!(*mp)->graph || (*mp)->graph->n_initializer != nspans)) /* the walk and protobuf-c disagree */
        st = ts_error_set(err, TS_ERR_PARSE, "%s: its initializers could not be located (%zu found, %zu parsed)",
                          model, nspans, (*mp)->graph ? (*mp)->graph->n_initializer : (size_t)0);
    if (st) {
        if (*mp) onnx__model_proto__free_unpacked(*mp, NULL);
        *mp = NULL;
        free(*spans);
        *spans = NULL;
    }
    return st;
}

/* Parses and imports the model in src.  Its initializers' large raw_data
 * is cut from the message before protobuf-c sees it (raw_spans.c) and read
 * into each tensor as it is made, so the weights are in memory once at
 * every moment of the load (the plain way held them in the file's bytes
 * and the unpacked message, then in the message and the tensors). */
ts_status ts_onnx_load_src(const ts_onnx_src *src, const char *base_dir, const char *model, const ts_input_bind *binds,
                           int nbinds, ts_graph **out, ts_error *err)
{
    *out = NULL;
    Onnx__ModelProto *mp;
    ts_onnx_span *spans;
    ts_status st = read_message(src, model, &mp, &spans, err);
    if (st) return st;
    st = import_model(mp, base_dir, model, binds, nbinds, spans ? src : NULL, spans, NULL, out, err);
    xmem_trace("import: graph built");
    onnx__model_proto__free_unpacked(mp, NULL);
    free(spans);
    return st;
}

/* A model kept for loading at many sizes (ts_session): the message less
 * the raw_data of its large initializers, and those initializers decoded
 * once.  Every graph loaded from it shares them (references), so a load
 * reads no file and a plan cannot release them (weights_once.c releases
 * only constants it holds alone). */
/* A size-dependent constant as ts_onnx_kept_sized_consts last folded it,
 * with the shapes its slice read (the same shapes fold the same values). */
typedef struct ks_memo {
    char *name; /* memo_at's key */
    /* its slice (ks_mark), made once: the nodes, and the values whose
     * shapes it reads (cutp[c] < 0: a graph input) */
    int *nodes, nnodes, *cutp, ncut;
    const char **cuts;
    ts_shape *key;
    int nkey;
    ts_tensor *val;
    int rep; /* the first memo with the same slice (ks_same_slice): its own index when none */
} ks_memo;

/* ts_onnx_kept_sized_consts' arrays bounded by the model (its nodes, their
 * inputs, its initializers), kept between calls: a decoder token calls it
 * twice, and calloc'ing them each time zeroed ~0.4 MB a call for the
 * 6-layer d512 model (memset and calloc 8 % of a token's derive, perf).
 * want[] is all false between calls; the others are written before they
 * are read.  cap: the names and binds the n-dependent arrays hold. */
typedef struct ks_scratch {
    size_t cap;
    bool *want, *visit;
    const char **cuts;
    int *cutp;
    ts_shape *key;
    Onnx__NodeProto **nodes;
    Onnx__ValueInfoProto *vis, **inp;
    Onnx__TypeProto *types;
    Onnx__TypeProto__Tensor *tts;
    Onnx__TensorProto **tps;
    ts_input_bind *bs;
    ts_tensor **inits;
    bool *iused; /* per initializer: read by the slice (all false between calls) */
} ks_scratch;

static void ks_scratch_free(ks_scratch *x)
{
    free(x->want);
    free(x->visit);
    free(x->cuts);
    free(x->cutp);
    free(x->key);
    free(x->nodes);
    free(x->vis);
    free(x->inp);
    free(x->types);
    free(x->tts);
    free(x->tps);
    free(x->bs);
    free(x->inits);
    free(x->iused);
    *x = (ks_scratch){0};
}

struct ts_onnx_kept {
    Onnx__ModelProto *mp;
    ts_tensor **inits; /* mp->graph->n_initializer entries; NULL where left in the message */
    /* ts_onnx_kept_sized_consts, made at its first call: value name ->
     * producing node (-1 a graph input, -2 an initializer), per node whether
     * it reads an input's size (ks_sized), and the folded constants by name */
    ts_name_map prod, memo_at;
    /* initializer name -> its index, and 1 + the inputs of all nodes (bounds
     * a slice's cuts): made with prod, where each call walked the model's
     * 718 nodes or ~100 initializers for them, with cold caches after a run
     * (the loop's own samples were 30 % of a decoder token's calls, perf) */
    ts_name_map init_at;
    size_t ne;
    /* every node's inputs are produced by earlier nodes (or are inputs or
     * initializers): a slice in file order needs no sort (import_graph) */
    bool file_sorted;
    unsigned char *sized;
    ks_memo *memo;
    int nmemo;
    int64_t folded, shared; /* ts_onnx_kept_fold_stats */
    ks_scratch scratch;
};

void ts_onnx_kept_free(ts_onnx_kept *k)
{
    if (!k) return;
    for (size_t i = 0; k->inits && i < k->mp->graph->n_initializer; i++) ts_tensor_unref(k->inits[i]);
    free(k->inits);
    ts_name_map_free(&k->prod);
    ts_name_map_free(&k->memo_at);
    ts_name_map_free(&k->init_at);
    free(k->sized);
    for (int i = 0; i < k->nmemo; i++) {
        free(k->memo[i].name);
        free(k->memo[i].nodes);
        free(k->memo[i].cutp);
        free(k->memo[i].cuts);
        free(k->memo[i].key);
        ts_tensor_unref(k->memo[i].val);
    }
    free(k->memo);
    ks_scratch_free(&k->scratch);
    if (k->mp) onnx__model_proto__free_unpacked(k->mp, NULL);
    free(k);
}

ts_status ts_onnx_kept_open(const ts_onnx_src *src, const char *base_dir, const char *model, ts_onnx_kept **out,
                            ts_error *err)
{
    *out = NULL;
    ts_onnx_kept *k = calloc(1, sizeof *k);
    if (!k) return ts_error_set(err, TS_ERR_NOMEM, "out of memory reading %s", model);
    ts_onnx_span *spans;
    ts_status st = read_message(src, model, &k->mp, &spans, err);
    if (!st && !k->mp->graph)
        st = ts_error_set(err, TS_ERR_PARSE, "%s is not a valid ONNX model: it has no graph", model);
    else if (!st && !(k->inits = calloc(k->mp->graph->n_initializer + 1, sizeof *k->inits)))
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory reading %s", model);
    else if (!st)
        st = decode_cut(k->mp->graph, spans ? src : NULL, spans, base_dir, k->inits, err);
    free(spans);
    if (st) {
        ts_onnx_kept_free(k);
        return st;
    }
    *out = k;
    return TS_OK;
}

ts_status ts_onnx_kept_load(const ts_onnx_kept *k, const char *base_dir, const char *model, const ts_input_bind *binds,
                            int nbinds, ts_graph **out, ts_error *err)
{
    *out = NULL;
    return import_model(k->mp, base_dir, model, binds, nbinds, NULL, NULL, k->inits, out, err);
}

ts_status ts_onnx_load_buffer(const void *data, size_t size, const char *base_dir, const ts_input_bind *binds,
                              int nbinds, ts_graph **out, ts_error *err)
{
    const ts_onnx_src src = {.mem = data, .fd = -1, .size = size};
    return ts_onnx_load_src(&src, base_dir, "model", binds, nbinds, out, err);
}

ts_status ts_onnx_load(const char *path, const ts_input_bind *binds, int nbinds, ts_graph **out, ts_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ts_error_set(err, TS_ERR_IO, "cannot open model '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ts_error_set(err, TS_ERR_IO, "cannot read model '%s': not a regular file", path);
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
        const ts_onnx_src src = {.fd = fd, .size = (uint64_t)sb.st_size};
        st = ts_onnx_load_src(&src, dir, model, binds, nbinds, out, err);
    }
    close(fd);
    free(dir);
    free(model);
    return st;
}

/* ------------------------------------- the size-dependent constants alone */

enum { KS_UNSEEN, KS_OPEN, KS_FIXED, KS_SIZED };

/* Whether node i reads a graph input, itself or through the nodes it
 * reads from (prod: value name -> producing node, -1 a graph input, -2 an
 * initializer); memo per node. */
static bool ks_sized(const Onnx__GraphProto *gp, const ts_name_map *prod, int i, unsigned char *memo)
{
    if (memo[i] >= KS_FIXED || memo[i] == KS_OPEN) return memo[i] == KS_SIZED; /* a cycle: check_nodes names it */
    memo[i] = KS_OPEN;
    bool sized = false;
    const Onnx__NodeProto *n = gp->node[i];
    for (size_t j = 0; j < n->n_input && !sized; j++) {
        int p;
        if (n->input[j] && *n->input[j] && ts_name_map_find(prod, n->input[j], &p))
            sized = p == -1 || (p >= 0 && ks_sized(gp, prod, p, memo));
    }
    memo[i] = sized ? KS_SIZED : KS_FIXED;
    return sized;
}

static bool ks_shape_only(const Onnx__NodeProto *n)
{
    return !strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size");
}

/* Marks in visit node i and those it is computed from, except what Shape
 * and Size read: the values they read from other nodes are cut (the slice
 * takes them as inputs) and with the graph inputs they read make the
 * slice's key (*ncut names; cut[c] < 0 for a graph input). */
static void ks_mark(const Onnx__GraphProto *gp, const ts_name_map *prod, int i, bool *visit, const char **cuts,
                    int *cut, int *ncut)
{
    if (visit[i]) return;
    visit[i] = true;
    const Onnx__NodeProto *n = gp->node[i];
    for (size_t j = 0; j < n->n_input; j++) {
        int p;
        if (!n->input[j] || !*n->input[j] || !ts_name_map_find(prod, n->input[j], &p) || p == -2) continue;
        if (p == -1 || ks_shape_only(n)) {
            cut[*ncut] = p;
            cuts[(*ncut)++] = n->input[j];
        } else
            ks_mark(gp, prod, p, visit, cuts, cut, ncut);
    }
}

static bool ks_index(ts_onnx_kept *k)
{
    const Onnx__GraphProto *gp = k->mp->graph;
    size_t nn = gp->n_node;
    if (k->sized) return true;
    bool ok = true;
    for (size_t i = 0; ok && i < gp->n_initializer; i++)
        ok = !gp->initializer[i]->name || (ts_name_map_put(&k->prod, gp->initializer[i]->name, -2) &&
                                           (ts_name_map_find(&k->init_at, gp->initializer[i]->name, NULL) ||
                                            ts_name_map_put(&k->init_at, gp->initializer[i]->name, (int)i)));
    for (size_t i = 0; ok && i < gp->n_input; i++)
        ok = !gp->input[i]->name || ts_name_map_find(&k->prod, gp->input[i]->name, NULL) ||
             ts_name_map_put(&k->prod, gp->input[i]->name, -1);
    for (size_t i = 0; ok && i < nn; i++)
        for (size_t j = 0; ok && j < gp->node[i]->n_output; j++)
            ok = !gp->node[i]->output[j] || !*gp->node[i]->output[j] || ts_name_map_put(&k->prod, gp->node[i]->output[j], (int)i);
    k->ne = 1;
    k->file_sorted = ok;
    for (size_t i = 0; i < nn; i++) {
        k->ne += gp->node[i]->n_input;
        for (size_t j = 0; j < gp->node[i]->n_input; j++) {
            int p;
            const char *t = gp->node[i]->input[j];
            if (t && *t && (!ts_name_map_find(&k->prod, t, &p) || p >= (int)i)) k->file_sorted = false;
        }
    }
    unsigned char *m = ok ? calloc(nn + 1, 1) : NULL;
    for (size_t i = 0; m && i < nn; i++) ks_sized(gp, &k->prod, (int)i, m);
    k->sized = m;
    return m != NULL;
}

/* How slice m's node r (NULL: the slice's own result) reads value x, as
 * ks_mark cut it: 0 an initializer, 1 its cut *at (only the cut's shape is
 * bound: two slices reading different values of the same shapes fold the
 * same), 2 output *out of the slice's *at-th node; -1 none of these. */
static int ks_edge(const ts_onnx_kept *k, const ks_memo *m, const Onnx__NodeProto *r, const char *x, int *at, int *out)
{
    const Onnx__GraphProto *gp = k->mp->graph;
    int p;
    if (!ts_name_map_find(&k->prod, x, &p)) return -1;
    if (p == -2) return 0;
    if (p == -1 || (r && ks_shape_only(r))) {
        for (int c = 0; c < m->ncut; c++)
            if (!strcmp(m->cuts[c], x)) return *at = c, 1;
        return -1;
    }
    for (int q = 0; q < m->nnodes; q++)
        if (m->nodes[q] == p)
            for (size_t o = 0; o < gp->node[p]->n_output; o++)
                if (gp->node[p]->output[o] && !strcmp(gp->node[p]->output[o], x)) return *at = q, *out = (int)o, 2;
    return -1;
}

static bool ks_same_attr(const Onnx__AttributeProto *a, const Onnx__AttributeProto *b)
{
    size_t n = onnx__attribute_proto__get_packed_size(a);
    if (n != onnx__attribute_proto__get_packed_size(b)) return false;
    uint8_t *x = malloc(2 * n + 1);
    bool same = x && onnx__attribute_proto__pack(a, x) == n && onnx__attribute_proto__pack(b, x + n) == n && !memcmp(x, x + n, n);
    free(x);
    return same;
}

/* Whether slices a and b compute the same function of their cuts' shapes
 * (a decoder's six causal masks: one per layer, each from its own keys'
 * length): the same nodes in order (op type, domain, attributes, each
 * input the same initializer, the cut at the same place or the output of
 * the node at the same place) and the folded name at the same place.  Then
 * b folded at a's key is a's value, and a token imports one mask, not six. */
static bool ks_same_slice(const ts_onnx_kept *k, const ks_memo *a, const ks_memo *b)
{
    const Onnx__GraphProto *gp = k->mp->graph;
    if (a->nnodes != b->nnodes || a->ncut != b->ncut) return false;
    for (int q = 0; q < a->nnodes; q++) {
        const Onnx__NodeProto *x = gp->node[a->nodes[q]], *y = gp->node[b->nodes[q]];
        if (strcmp(x->op_type, y->op_type) || strcmp(x->domain ? x->domain : "", y->domain ? y->domain : "") ||
            x->n_input != y->n_input || x->n_output != y->n_output || x->n_attribute != y->n_attribute)
            return false;
        for (size_t j = 0; j < x->n_attribute; j++)
            if (!ks_same_attr(x->attribute[j], y->attribute[j])) return false;
        for (size_t j = 0; j < x->n_input; j++) {
            const char *u = x->input[j] ? x->input[j] : "", *v = y->input[j] ? y->input[j] : "";
            if (!*u || !*v) {
                if (*u || *v) return false;
                continue;
            }
            int ea, eb, pa = -1, pb = -1, oa = -1, ob = -1;
            if ((ea = ks_edge(k, a, x, u, &pa, &oa)) < 0 || (eb = ks_edge(k, b, y, v, &pb, &ob)) != ea ||
                (ea == 0 ? strcmp(u, v) != 0 : pa != pb || oa != ob))
                return false;
        }
    }
    int pa = -1, pb = -1, oa = -1, ob = -1;
    return ks_edge(k, a, NULL, a->name, &pa, &oa) == 2 && ks_edge(k, b, NULL, b->name, &pb, &ob) == 2 && pa == pb &&
           oa == ob;
}

/* The memo entry of name, produced by node p (added with its slice when
 * absent: visit and cuts/cutp are scratch of the graph's sizes); NULL when
 * out of memory. */
static ks_memo *ks_memo_of(ts_onnx_kept *k, const char *name, int p, bool *visit, const char **cuts, int *cutp)
{
    const Onnx__GraphProto *gp = k->mp->graph;
    int i, ncut = 0, nnodes = 0;
    if (ts_name_map_find(&k->memo_at, name, &i)) return &k->memo[i];
    memset(visit, 0, gp->n_node);
    ks_mark(gp, &k->prod, p, visit, cuts, cutp, &ncut);
    for (size_t j = 0; j < gp->n_node; j++) nnodes += visit[j];
    ks_memo *m = realloc(k->memo, sizeof *m * ((size_t)k->nmemo + 1));
    if (!m) return NULL;
    k->memo = m;
    ks_memo x = {.name = ts_strdup(name), .nodes = malloc(sizeof(int) * ((size_t)nnodes + 1)), .nnodes = nnodes,
                 .cutp = malloc(sizeof(int) * ((size_t)ncut + 1)), .cuts = malloc(sizeof *cuts * ((size_t)ncut + 1)),
                 .ncut = ncut};
    if (!x.name || !x.nodes || !x.cutp || !x.cuts || !ts_name_map_put(&k->memo_at, x.name, k->nmemo)) {
        free(x.name);
        free(x.nodes);
        free(x.cutp);
        free(x.cuts);
        return NULL;
    }
    for (size_t j = 0, n = 0; j < gp->n_node; j++)
        if (visit[j]) x.nodes[n++] = (int)j;
    memcpy(x.cutp, cutp, sizeof(int) * (size_t)ncut);
    memcpy(x.cuts, cuts, sizeof *cuts * (size_t)ncut);
    x.rep = k->nmemo;
    for (int r = 0; r < k->nmemo; r++)
        if (m[r].rep == r && ks_same_slice(k, &m[r], &x)) {
            x.rep = r;
            break;
        }
    m[k->nmemo] = x;
    return &m[k->nmemo++];
}

void ts_onnx_kept_fold_stats(const ts_onnx_kept *k, int64_t *folded, int64_t *shared)
{
    *folded = k ? k->folded : 0;
    *shared = k ? k->shared : 0;
}

ts_status ts_onnx_kept_sized_consts(ts_onnx_kept *k, const char *base_dir, const char *model,
                                    const ts_input_bind *binds, int nbinds, const ts_graph *at,
                                    const char *const *names, int n, ts_tensor **out, bool *later, ts_error *err)
{
    const Onnx__GraphProto *gp = k->mp->graph;
    for (int i = 0; i < n; i++) out[i] = NULL;
    const bool indexed = ks_index(k);
    size_t nn = gp->n_node, ni = gp->n_initializer, nin = gp->n_input, ne = k->ne; /* ne: bounds the cuts */
    ts_name_map cut = {0};
    ks_scratch *x = &k->scratch;
    const size_t cap = (size_t)n + (size_t)nbinds + nin;
    if (x->want && x->cap < cap) ks_scratch_free(x);
    if (!x->want && indexed) { /* the model's sizes do not change: made once, or again for more names */
        x->cap = cap;
        x->want = calloc(nn + 1, sizeof *x->want), x->visit = calloc(nn + 1, sizeof *x->visit);
        x->cuts = calloc(ne, sizeof *x->cuts), x->cutp = calloc(ne, sizeof *x->cutp), x->key = calloc(ne, sizeof *x->key);
        x->nodes = calloc(nn + 1, sizeof *x->nodes), x->vis = calloc(cap + ne, sizeof *x->vis);
        x->inp = calloc(cap + ne, sizeof *x->inp), x->types = calloc(ne, sizeof *x->types);
        x->tts = calloc(ne, sizeof *x->tts), x->tps = calloc(ni + 1, sizeof *x->tps);
        x->bs = calloc(cap + ne, sizeof *x->bs), x->inits = calloc(ni + 1, sizeof *x->inits);
        x->iused = calloc(ni + 1, sizeof *x->iused);
        if (!(x->want && x->visit && x->cuts && x->cutp && x->key && x->nodes && x->vis && x->inp && x->types &&
              x->tts && x->tps && x->bs && x->inits && x->iused))
            ks_scratch_free(x);
    }
    bool *want = x->want, *visit = x->visit, *iused = x->iused, *take = calloc((size_t)n + 1, 1);
    /* per name: its memo's index, and the earlier name of this call whose
     * fold it takes (the same slice at the same shapes; -1: none) */
    int *mi = malloc(sizeof(int) * ((size_t)n + 1)), *alias = malloc(sizeof(int) * ((size_t)n + 1));
    const char **cuts = x->cuts;
    int *cutp = x->cutp;
    ts_shape *key = x->key;
    Onnx__NodeProto **nodes = x->nodes;
    Onnx__ValueInfoProto *vis = x->vis;
    Onnx__ValueInfoProto **outp = calloc((size_t)n + 1, sizeof *outp), **inp = x->inp;
    Onnx__TypeProto *types = x->types;
    Onnx__TypeProto__Tensor *tts = x->tts;
    Onnx__TensorProto **tps = x->tps;
    ts_input_bind *bs = x->bs;
    ts_tensor **inits = x->inits;
    bool mem = want && visit && take && mi && alias && cuts && cutp && key && nodes && vis && outp && inp && types &&
               tts && tps && bs && inits && iused && indexed;
    ts_status st = mem ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    Onnx__GraphProto sub = *gp;
    sub.node = nodes;
    sub.n_node = 0;
    sub.output = outp;
    sub.n_output = 0;
    sub.input = inp;
    sub.n_input = nin;
    sub.initializer = tps;
    sub.n_initializer = 0;
    if (mem) memcpy(bs, binds, (size_t)nbinds * sizeof *bs);
    int nbs = nbinds;
    size_t nvis = 0;
    /* each sized name with the nodes it is computed from: the memo's when
     * it read the same shapes, else folded now; one that needs a shape
     * `at` does not know yet waits (later) */
    for (int i = 0; !st && i < n; i++) {
        int p;
        if (later) later[i] = false;
        mi[i] = alias[i] = -1;
        if (!names[i] || !ts_name_map_find(&k->prod, names[i], &p) || p < 0 || k->sized[p] != KS_SIZED) continue;
        ks_memo *m = ks_memo_of(k, names[i], p, visit, cuts, cutp);
        if (!m) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            continue;
        }
        mi[i] = (int)(m - k->memo);
        int ncut = m->ncut;
        bool wait = false;
        for (int c = 0; !st && c < ncut; c++) {
            int v = ts_graph_find_value(at, m->cuts[c]);
            if (v < 0 || (at->values[v].shape.rank < 0 && !later))
                st = ts_error_set(err, TS_ERR_UNSUPPORTED, "%s: the shape of '%s' is not known", model, m->cuts[c]);
            else {
                wait |= at->values[v].shape.rank < 0;
                key[c] = at->values[v].shape;
            }
        }
        if (later) later[i] = wait;
        if (st || wait) continue;
        bool hit = m->val && m->nkey == ncut;
        for (int c = 0; hit && c < ncut; c++) hit = ts_shape_eq(&m->key[c], &key[c]);
        if (hit) {
            out[i] = ts_tensor_ref(m->val);
            continue;
        }
        ts_shape *nk = malloc(sizeof *nk * ((size_t)ncut + 1));
        if (!nk) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            continue;
        }
        memcpy(nk, key, sizeof *nk * (size_t)ncut);
        free(m->key);
        ts_tensor_unref(m->val);
        m->key = nk;
        m->nkey = ncut;
        m->val = NULL;
        for (int j = 0; j < i && alias[i] < 0; j++) {
            const ks_memo *o = mi[j] >= 0 ? &k->memo[mi[j]] : NULL;
            bool same = take[j] && o->rep == m->rep && o->nkey == ncut;
            for (int c = 0; same && c < ncut; c++) same = ts_shape_eq(&o->key[c], &key[c]);
            if (same) alias[i] = j;
        }
        if (alias[i] >= 0) continue;
        take[i] = true;
        for (int j = 0; j < m->nnodes; j++) want[m->nodes[j]] = true;
        for (int c = 0; !st && c < ncut; c++) {
            const char *cn = m->cuts[c];
            if (m->cutp[c] < 0 || ts_name_map_find(&cut, cn, NULL)) continue;
            int v = ts_graph_find_value(at, cn), t = (int)(sub.n_input - nin);
            if (!ts_name_map_put(&cut, cn, v)) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            tts[t] = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
            tts[t].has_elem_type = true;
            tts[t].elem_type = ts_onnx_dtype_to(at->values[v].dtype);
            types[t] = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
            types[t].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
            types[t].tensor_type = &tts[t];
            vis[nvis] = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
            vis[nvis].name = (char *)cn;
            vis[nvis].type = &types[t];
            inp[sub.n_input++] = &vis[nvis++];
            bs[nbs++] = (ts_input_bind){cn, at->values[v].shape};
        }
        vis[nvis] = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
        vis[nvis].name = (char *)names[i];
        outp[sub.n_output++] = &vis[nvis++];
    }
    if (mem) memcpy(inp, gp->input, nin * sizeof *inp);
    for (size_t i = 0; !st && i < nn; i++) {
        if (!want[i]) continue;
        want[i] = false; /* all false again for the next call */
        if (is_control_flow(gp->node[i]->op_type))
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "%s: a size-dependent constant is computed through control flow", model);
        nodes[sub.n_node++] = gp->node[i];
        for (size_t j = 0; j < gp->node[i]->n_input; j++) {
            int q;
            if (gp->node[i]->input[j] && *gp->node[i]->input[j] && ts_name_map_find(&k->init_at, gp->node[i]->input[j], &q))
                iused[q] = true;
        }
    }
    /* only the initializers the slice reads, in the model's order */
    for (size_t i = 0; !st && sub.n_node && i < ni; i++) {
        if (!iused[i]) continue;
        iused[i] = false; /* all false again for the next call */
        inits[sub.n_initializer] = k->inits && k->inits[i] ? ts_tensor_ref(k->inits[i]) : NULL;
        tps[sub.n_initializer++] = gp->initializer[i];
    }
    int opset = 0;
    ts_graph *g = NULL;
    struct ts_opaque_table *opaque = NULL;
    if (!st && sub.n_output && !(st = read_opset(k->mp, model, &opset, err)))
        st = import_graph(&sub, opset, base_dir, model, bs, nbs, inits, &g, &opaque, false, k->file_sorted, err);
    for (int i = 0; !st && g && i < n; i++) {
        int v;
        if (!take[i]) continue;
        if ((v = ts_graph_find_value(g, names[i])) < 0 || !g->values[v].constant)
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "%s: '%s' does not fold at these sizes", model, names[i]);
        else {
            out[i] = ts_tensor_ref(g->values[v].constant);
            k->folded++;
            int m;
            ts_name_map_find(&k->memo_at, names[i], &m);
            k->memo[m].val = ts_tensor_ref(out[i]);
        }
    }
    for (int i = 0; !st && g && i < n; i++)
        if (alias[i] >= 0 && out[alias[i]]) {
            out[i] = ts_tensor_ref(out[alias[i]]);
            k->memo[mi[i]].val = ts_tensor_ref(out[i]);
            k->shared++;
        }
    ts_graph_free(g);
    ts_opaque_table_free(opaque);
    for (size_t i = 0; inits && i < sub.n_initializer; i++) ts_tensor_unref(inits[i]);
    ts_name_map_free(&cut);
    if (want && st) memset(want, 0, nn + 1); /* the node loop stopped early */
    if (iused && st) memset(iused, 0, ni + 1); /* so did the initializers' */
    free(take);
    free(mi);
    free(alias);
    free(outp);
    if (st)
        for (int i = 0; i < n; i++) {
            ts_tensor_unref(out[i]);
            out[i] = NULL;
        }
    return st;
}
