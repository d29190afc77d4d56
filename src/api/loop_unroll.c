/* Loops unrolled for a run whose values are known (loop_unroll.h).  The
 * new nodes share the body's attributes and tensors (nothing is copied but
 * names): they are only packed into the session's model, never freed
 * through protobuf-c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/loop_unroll.h"

void ts_unroll_arena_free(ts_unroll_arena *a)
{
    for (size_t i = 0; i < a->n; i++) free(a->p[i]);
    free(a->p);
    memset(a, 0, sizeof *a);
}

static void *arena_alloc(ts_unroll_arena *a, size_t size)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 64;
        void **p = realloc(a->p, sizeof *p * cap);
        if (!p) return NULL;
        a->p = p;
        a->cap = cap;
    }
    void *m = calloc(1, size ? size : 1);
    if (m) a->p[a->n++] = m;
    return m;
}

static char *arena_name(ts_unroll_arena *a, const char *prefix, const char *name)
{
    size_t n = strlen(prefix) + strlen(name) + 1;
    char *s = arena_alloc(a, n);
    if (s) snprintf(s, n, "%s%s", prefix, name);
    return s;
}

static const Onnx__TensorProto *initializer(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && !strcmp(g->initializer[i]->name, name)) return g->initializer[i];
    return NULL;
}

/* The one value of a small initializer, or false when it is none. */
static bool scalar_of(const Onnx__GraphProto *g, const char *name, int64_t *v)
{
    const Onnx__TensorProto *tp = name && *name ? initializer(g, name) : NULL;
    ts_tensor *t = NULL;
    ts_error err = {0};
    if (!tp || ts_onnx_tensor_decode(tp, NULL, "loop input", &t, &err)) return false;
    bool ok = ts_shape_numel(&t->shape) == 1;
    if (ok) *v = ts_tensor_get_i64(t, 0);
    ts_tensor_unref(t);
    return ok;
}

static const Onnx__GraphProto *body_of(const Onnx__NodeProto *n)
{
    for (size_t a = 0; a < n->n_attribute; a++)
        if (n->attribute[a]->name && !strcmp(n->attribute[a]->name, "body")) return n->attribute[a]->g;
    return NULL;
}

static bool produced_in(const Onnx__GraphProto *b, const char *name)
{
    for (size_t k = 0; k < b->n_node; k++)
        for (size_t o = 0; o < b->node[k]->n_output; o++)
            if (b->node[k]->output[o] && !strcmp(b->node[k]->output[o], name)) return true;
    return initializer(b, name) != NULL;
}

static bool defines(const Onnx__GraphProto *b, const char *name)
{
    for (size_t i = 0; i < b->n_input; i++)
        if (b->input[i]->name && !strcmp(b->input[i]->name, name)) return true;
    return produced_in(b, name);
}

/* Whether the body's condition output is its condition input, through Identity nodes. */
static bool cond_passes(const Onnx__GraphProto *b)
{
    const char *v = b->output[0]->name, *cin = b->input[1]->name;
    for (int hops = 0; v && hops <= (int)b->n_node; hops++) {
        if (cin && !strcmp(v, cin)) return true;
        const char *next = NULL;
        for (size_t k = 0; k < b->n_node && !next; k++) {
            const Onnx__NodeProto *n = b->node[k];
            if (n->n_output == 1 && n->output[0] && !strcmp(n->output[0], v))
                next = n->op_type && !strcmp(n->op_type, "Identity") && n->n_input == 1 ? n->input[0] : "";
        }
        v = next && *next ? next : NULL;
    }
    return false;
}

/* The declared element type and static shape of body output o, or false. */
static bool declared_static(const Onnx__GraphProto *b, size_t o, int32_t *dtype, const Onnx__TensorShapeProto **shape)
{
    const Onnx__TypeProto *tp = b->output[o]->type;
    const Onnx__TypeProto__Tensor *tt =
        tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
    if (!tt || !tt->has_elem_type || !tt->shape) return false;
    for (size_t d = 0; d < tt->shape->n_dim; d++)
        if (tt->shape->dim[d]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) return false;
    *dtype = tt->elem_type;
    *shape = tt->shape;
    return true;
}

static bool has_graphs(const Onnx__GraphProto *b)
{
    for (size_t k = 0; k < b->n_node; k++)
        for (size_t a = 0; a < b->node[k]->n_attribute; a++)
            if (b->node[k]->attribute[a]->g || b->node[k]->attribute[a]->n_graphs) return true;
    return false;
}

/* ------------------------------------------------------------ node making */

typedef struct unroller {
    ts_unroll_arena *a;
    Onnx__NodeProto **nodes;
    size_t n, cap;
} unroller;

static Onnx__NodeProto *add_node(unroller *u, const char *op, const char *name, size_t nin, size_t nout)
{
    if (u->n == u->cap) return NULL; /* sized in advance */
    Onnx__NodeProto *n = arena_alloc(u->a, sizeof *n);
    if (!n) return NULL;
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)name;
    n->n_input = nin;
    n->n_output = nout;
    n->input = arena_alloc(u->a, sizeof(char *) * (nin + 1));
    n->output = arena_alloc(u->a, sizeof(char *) * (nout + 1));
    if (!n->input || !n->output) return NULL;
    u->nodes[u->n++] = n;
    return n;
}

static Onnx__AttributeProto *new_attr(unroller *u, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *at = arena_alloc(u->a, sizeof *at);
    Onnx__AttributeProto **list = arena_alloc(u->a, sizeof *list);
    if (!at || !list) return NULL;
    onnx__attribute_proto__init(at);
    at->name = (char *)name;
    at->has_type = 1;
    at->type = type;
    list[0] = at;
    n->attribute = list;
    n->n_attribute = 1;
    return at;
}

/* A Constant node giving `out`: tensor tp, or an int64 of dims ndims (0 or 1) holding v. */
static bool add_constant(unroller *u, const char *out, const Onnx__TensorProto *tp, int ndims, int64_t v, int32_t dtype)
{
    Onnx__NodeProto *n = add_node(u, "Constant", out, 0, 1);
    Onnx__AttributeProto *at = n ? new_attr(u, n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR) : NULL;
    if (!at) return false;
    n->output[0] = (char *)out;
    if (tp) {
        at->t = (Onnx__TensorProto *)tp;
        return true;
    }
    Onnx__TensorProto *t = arena_alloc(u->a, sizeof *t);
    int64_t *dims = arena_alloc(u->a, sizeof *dims), *val = arena_alloc(u->a, sizeof *val);
    int32_t *ival = arena_alloc(u->a, sizeof *ival);
    if (!t || !dims || !val || !ival) return false;
    onnx__tensor_proto__init(t);
    t->has_data_type = 1;
    t->data_type = dtype;
    dims[0] = 1;
    t->n_dims = (size_t)ndims;
    t->dims = dims;
    if (dtype == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL) {
        *ival = (int32_t)v;
        t->n_int32_data = 1;
        t->int32_data = ival;
    } else {
        *val = v;
        t->n_int64_data = 1;
        t->int64_data = val;
    }
    at->t = t;
    return true;
}

/* ----------------------------------------------------------------- unroll */

typedef struct iter_names {
    const Onnx__GraphProto *b;
    const char *prefix;
    char **carried; /* the values entering this iteration, one per carried input */
} iter_names;

/* A body name as iteration it sees it. */
static char *rename_in(unroller *u, const iter_names *it, const char *s)
{
    const Onnx__GraphProto *b = it->b;
    if (!s || !*s) return (char *)"";
    if (!strcmp(s, b->input[0]->name)) return arena_name(u->a, it->prefix, "iteration");
    if (!strcmp(s, b->input[1]->name)) return arena_name(u->a, it->prefix, "condition");
    for (size_t i = 2; i < b->n_input; i++)
        if (b->input[i]->name && !strcmp(s, b->input[i]->name)) return it->carried[i - 2];
    return produced_in(b, s) ? arena_name(u->a, it->prefix, s) : (char *)s; /* else from the outer scope */
}

static int unroll_one(Onnx__GraphProto *g, size_t at, int64_t trips, int opset, ts_unroll_arena *a)
{
    const Onnx__NodeProto *L = g->node[at];
    const Onnx__GraphProto *b = body_of(L);
    size_t nc = b->n_input - 2, k = b->n_output - 1 - nc;
    size_t per = 2 + b->n_initializer + b->n_node + k; /* constants, copies, Unsqueezes */
    unroller u = {.a = a, .cap = g->n_node - 1 + (size_t)trips * per + nc + k + 1};
    u.nodes = arena_alloc(a, sizeof *u.nodes * (u.cap + 1));
    char **cur = arena_alloc(a, sizeof *cur * (nc + 1)), ***scans = arena_alloc(a, sizeof *scans * (k + 1));
    if (!u.nodes || !cur || !scans) return -1;
    for (size_t j = 0; j < k; j++)
        if (!(scans[j] = arena_alloc(a, sizeof **scans * (size_t)(trips + 1)))) return -1;
    for (size_t i = 0; i < at; i++) u.nodes[u.n++] = g->node[i];
    for (size_t i = 0; i < nc; i++) cur[i] = 2 + i < L->n_input ? L->input[2 + i] : (char *)"";
    const char *base = L->name && *L->name ? L->name : L->output[0];
    char *axes = NULL;
    if (k && opset >= 13) {
        if (!(axes = arena_name(a, base, "/unroll/axes")) || !add_constant(&u, axes, NULL, 1, 0, 7)) return -1;
    }
    for (int64_t t = 0; t < trips; t++) {
        char pre[64];
        snprintf(pre, sizeof pre, "/unroll%lld/", (long long)t);
        iter_names it = {b, arena_name(a, base, pre), cur};
        if (!it.prefix) return -1;
        char *iter = rename_in(&u, &it, b->input[0]->name), *cond = rename_in(&u, &it, b->input[1]->name);
        if (!iter || !cond || !add_constant(&u, iter, NULL, 0, t, ONNX__TENSOR_PROTO__DATA_TYPE__INT64) ||
            !add_constant(&u, cond, NULL, 0, 1, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL))
            return -1;
        for (size_t i = 0; i < b->n_initializer; i++) {
            char *o = rename_in(&u, &it, b->initializer[i]->name);
            if (!o || !add_constant(&u, o, b->initializer[i], 0, 0, 0)) return -1;
        }
        for (size_t j = 0; j < b->n_node; j++) {
            const Onnx__NodeProto *s = b->node[j];
            char idx[32];
            snprintf(idx, sizeof idx, "node%zu", j);
            Onnx__NodeProto *n = add_node(&u, s->op_type, arena_name(a, it.prefix, s->name && *s->name ? s->name : idx),
                                          s->n_input, s->n_output);
            if (!n || !n->name) return -1;
            n->domain = s->domain;
            n->n_attribute = s->n_attribute;
            n->attribute = s->attribute;
            for (size_t i = 0; i < s->n_input; i++)
                if (!(n->input[i] = rename_in(&u, &it, s->input[i]))) return -1;
            for (size_t o = 0; o < s->n_output; o++)
                if (!(n->output[o] = rename_in(&u, &it, s->output[o]))) return -1;
        }
        char **next = arena_alloc(a, sizeof *next * (nc + 1));
        if (!next) return -1;
        for (size_t i = 0; i < nc; i++)
            if (!(next[i] = rename_in(&u, &it, b->output[1 + i]->name))) return -1;
        for (size_t j = 0; j < k; j++) {
            /* each iteration's scan value, given its axis 0 */
            char *v = rename_in(&u, &it, b->output[1 + nc + j]->name), sfx[32];
            snprintf(sfx, sizeof sfx, "scan%zu", j);
            char *o = arena_name(a, it.prefix, sfx);
            Onnx__NodeProto *n = v && o ? add_node(&u, "Unsqueeze", o, axes ? 2 : 1, 1) : NULL;
            if (!n) return -1;
            n->input[0] = v;
            if (axes) n->input[1] = axes;
            n->output[0] = scans[j][t] = o;
            if (!axes) {
                Onnx__AttributeProto *ax = new_attr(&u, n, "axes", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
                int64_t *zero = arena_alloc(a, sizeof *zero);
                if (!ax || !zero) return -1;
                ax->n_ints = 1;
                ax->ints = zero;
            }
        }
        memcpy(cur, next, sizeof *cur * nc);
    }
    for (size_t i = 0; i < nc && i < L->n_output; i++) {
        if (!L->output[i] || !*L->output[i]) continue;
        Onnx__NodeProto *n = add_node(&u, "Identity", arena_name(a, L->output[i], "/unrolled"), 1, 1);
        if (!n || !n->name) return -1;
        n->input[0] = cur[i];
        n->output[0] = L->output[i];
    }
    for (size_t j = 0; j < k && nc + j < L->n_output; j++) {
        if (!L->output[nc + j] || !*L->output[nc + j]) continue;
        if (!trips) { /* no iteration: an empty tensor of the body's declared type */
            int32_t dtype;
            const Onnx__TensorShapeProto *sp;
            if (!declared_static(b, 1 + nc + j, &dtype, &sp)) return 0; /* checked before */
            Onnx__TensorProto *t = arena_alloc(a, sizeof *t);
            int64_t *dims = arena_alloc(a, sizeof *dims * (sp->n_dim + 1));
            if (!t || !dims) return -1;
            onnx__tensor_proto__init(t);
            t->has_data_type = 1;
            t->data_type = dtype;
            t->n_dims = sp->n_dim + 1;
            t->dims = dims;
            for (size_t d = 0; d < sp->n_dim; d++) dims[1 + d] = sp->dim[d]->dim_value;
            if (!add_constant(&u, L->output[nc + j], t, 0, 0, 0)) return -1;
            continue;
        }
        Onnx__NodeProto *n = add_node(&u, "Concat", arena_name(a, L->output[nc + j], "/unrolled"), (size_t)trips, 1);
        Onnx__AttributeProto *ax = n ? new_attr(&u, n, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) : NULL;
        if (!ax || !n->name) return -1;
        ax->has_i = 1;
        ax->i = 0;
        memcpy(n->input, scans[j], sizeof(char *) * (size_t)trips);
        n->output[0] = L->output[nc + j];
    }
    for (size_t i = at + 1; i < g->n_node; i++) u.nodes[u.n++] = g->node[i];
    g->node = u.nodes;
    g->n_node = u.n;
    return 1;
}

int ts_loop_unroll(Onnx__GraphProto *g, const char *name, int opset, ts_unroll_arena *a)
{
    for (size_t at = 0; at < g->n_node; at++) {
        const Onnx__NodeProto *L = g->node[at];
        const Onnx__GraphProto *b = L->op_type && !strcmp(L->op_type, "Loop") ? body_of(L) : NULL;
        if (!b || !defines(b, name) || b->n_input < 2 || b->n_output < b->n_input - 1 || has_graphs(b)) continue;
        size_t nc = b->n_input - 2, k = b->n_output - 1 - nc;
        if (L->n_input > 2 + nc || L->n_output > nc + k) continue;
        int64_t trips, cond = 1;
        if (L->n_input < 1 || !scalar_of(g, L->input[0], &trips)) continue;
        if (L->n_input >= 2 && L->input[1] && *L->input[1] && !scalar_of(g, L->input[1], &cond)) continue;
        if (!cond) trips = 0;
        if (trips < 0) trips = 0;
        if (trips > TS_UNROLL_MAX_TRIPS || !cond_passes(b)) continue;
        bool typed = true; /* no iteration: scan outputs need declared types */
        for (size_t j = 0; trips == 0 && j < k; j++) {
            int32_t dt;
            const Onnx__TensorShapeProto *sp;
            typed &= declared_static(b, 1 + nc + j, &dt, &sp);
        }
        if (!typed) continue;
        for (size_t i = 0; i < b->n_input; i++)
            if (!b->input[i]->name) return 0;
        for (size_t i = 0; i < b->n_output; i++)
            if (!b->output[i]->name) return 0;
        return unroll_one(g, at, trips, opset, a);
    }
    return 0;
}
