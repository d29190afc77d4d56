/* ONNX sequences resolved at import (sequence.h): SequenceEmpty,
 * SequenceConstruct, SequenceInsert, SequenceErase, SequenceAt,
 * SequenceLength, ConcatFromSequence and SplitToSequence.  A sequence is
 * the list of value ids of its tensors; the operators that return a tensor
 * become Identity, a constant, Concat (after a Reshape per element when
 * new_axis inserts one), and SplitToSequence one Slice per piece (then a
 * Reshape dropping the axis when keepdims is 0).  Slice and Reshape take
 * their parameters as inputs from opset 10 and 5 on, and sequences exist
 * from opset 11, so the nodes are the same in every opset a sequence can
 * appear in.  Positions follow the ONNX definitions: SequenceAt and
 * SequenceErase accept -n..n-1, SequenceInsert -n..n (n appends); Erase
 * and Insert without a position act at the end. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir/ir.h"
#include "onnx/sequence.h"

typedef struct seq {
    const char *name; /* points into the model's protos, which outlive the import */
    ts_dtype dt;
    int len;
    int *vals;
} seq;

struct ts_seq_set {
    seq *s;
    int n, cap;
};

static const char *const OPS[] = {"SequenceEmpty",  "SequenceConstruct",  "SequenceInsert",   "SequenceErase",
                                  "SequenceAt",     "SequenceLength",     "ConcatFromSequence", "SplitToSequence"};
enum { S_EMPTY, S_CONSTRUCT, S_INSERT, S_ERASE, S_AT, S_LENGTH, S_CONCAT, S_SPLIT, S_NOPS };

static int op_index(const Onnx__NodeProto *n)
{
    if (!n->op_type || (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))) return -1;
    for (int i = 0; i < S_NOPS; i++)
        if (!strcmp(n->op_type, OPS[i])) return i;
    return -1;
}

bool ts_onnx_seq_is_op(const Onnx__NodeProto *n) { return op_index(n) >= 0; }

static const seq *seq_find(const ts_seq_set *set, const char *name)
{
    for (int i = 0; set && i < set->n; i++)
        if (!strcmp(set->s[i].name, name)) return &set->s[i];
    return NULL;
}

bool ts_onnx_seq_has(const ts_seq_set *set, const char *name) { return name && seq_find(set, name); }

void ts_onnx_seq_set_free(ts_seq_set *set)
{
    if (!set) return;
    for (int i = 0; i < set->n; i++) free(set->s[i].vals);
    free(set->s);
    free(set);
}

/* One node's work: the graph, the node and where errors go. */
typedef struct sctx {
    ts_graph *g;
    const Onnx__NodeProto *n;
    const char *name, *op;
    ts_error *err;
    int made; /* nodes and values added, for unique names */
} sctx;

static ts_status fail(sctx *c, ts_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static ts_status fail(sctx *c, ts_status code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ts_error_set(c->err, code, "node '%s' (%s): %s", c->name, c->op, msg);
}

static ts_status oom(sctx *c) { return ts_error_set(c->err, TS_ERR_NOMEM, "out of memory importing node '%s'", c->name); }

static const char *input_name(const Onnx__NodeProto *n, int i)
{
    return i < (int)n->n_input && n->input[i] && *n->input[i] ? n->input[i] : NULL;
}

static const Onnx__AttributeProto *attr_of(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}

static ts_status int_attr(sctx *c, const char *name, int64_t def, int64_t *out)
{
    const Onnx__AttributeProto *a = attr_of(c->n, name);
    *out = def;
    if (!a) return TS_OK;
    if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
        return fail(c, TS_ERR_INVALID, "attribute '%s' must be an int", name);
    *out = a->i;
    return TS_OK;
}

/* The sequence input i (required). */
static ts_status seq_input(sctx *c, const ts_seq_set *set, int i, const seq **s)
{
    const char *t = input_name(c->n, i);
    if (!t) return fail(c, TS_ERR_INVALID, "input %d (a sequence) is missing", i);
    if (!(*s = seq_find(set, t)))
        return fail(c, TS_ERR_UNSUPPORTED, "input %d ('%s') is not a sequence made in this graph by the sequence "
                    "operators (a sequence graph input or one passed between graphs is not supported)", i, t);
    return TS_OK;
}

/* The tensor input i; *v -1 when absent and optional. */
static ts_status tensor_input(sctx *c, ts_seq_resolve resolve, void *ctx, int i, bool required, int *v)
{
    const char *t = input_name(c->n, i);
    *v = -1;
    if (!t) return required ? fail(c, TS_ERR_INVALID, "input %d is missing", i) : TS_OK;
    if (!resolve(ctx, t, v)) {
        if (c->err->code) return c->err->code;
        return fail(c, TS_ERR_INVALID, "input '%s' is not produced by any node or graph input", t);
    }
    return TS_OK;
}

/* Integer constant value v (input i) as int64s: n values into out (max). */
static ts_status const_ints(sctx *c, int i, int v, int64_t *out, int max, int *n)
{
    const ts_value *val = &c->g->values[v];
    if (!val->constant) /* the wording value_inputs.c looks for */
        return fail(c, TS_ERR_INVALID, "input %d ('%s') must be a constant (bind dynamic dimensions with --input)", i,
                    val->name);
    const ts_tensor *t = val->constant;
    if (t->dtype != TS_I64 && t->dtype != TS_I32)
        return fail(c, TS_ERR_INVALID, "input %d ('%s') must be int32 or int64, got %s", i, val->name,
                    ts_dtype_name(t->dtype));
    int64_t cnt = ts_tensor_numel(t);
    if (cnt > max) return fail(c, TS_ERR_INVALID, "input %d ('%s') has %lld values, at most %d", i, val->name,
                               (long long)cnt, max);
    for (int64_t j = 0; j < cnt; j++) out[j] = ts_tensor_get_i64(t, j);
    *n = (int)cnt;
    return TS_OK;
}

/* The position input i against a sequence of len elements: in [-len,
 * len - 1], or up to len itself when `end_ok` (insert); absent: def. */
static ts_status position(sctx *c, ts_seq_resolve resolve, void *ctx, int i, int len, bool end_ok, int def, int *pos)
{
    int v, n;
    int64_t p;
    ts_status st = tensor_input(c, resolve, ctx, i, false, &v);
    if (st) return st;
    *pos = def;
    if (v < 0) return TS_OK;
    if ((st = const_ints(c, i, v, &p, 1, &n))) return st;
    if (n != 1 || c->g->values[v].shape.rank != 0)
        return fail(c, TS_ERR_INVALID, "input %d ('%s') must be a scalar position", i, c->g->values[v].name);
    int64_t hi = end_ok ? len : len - 1;
    if (p < -(int64_t)len || p > hi)
        return fail(c, TS_ERR_INVALID, "position %lld is out of range for a sequence of %d tensors", (long long)p, len);
    *pos = (int)(p < 0 ? p + len : p);
    return TS_OK;
}

/* Records sequence `name` = vals[0..len) of dt (copied). */
static ts_status seq_put(sctx *c, ts_seq_set **setp, const char *name, ts_dtype dt, const int *vals, int len)
{
    if (!name || !*name) return TS_OK; /* an unnamed output: nothing reads it */
    ts_seq_set *set = *setp;
    if (!set && !(set = *setp = calloc(1, sizeof *set))) return oom(c);
    if (set->n == set->cap) {
        int cap = set->cap ? 2 * set->cap : 8;
        seq *ns = realloc(set->s, sizeof *ns * (size_t)cap);
        if (!ns) return oom(c);
        set->s = ns;
        set->cap = cap;
    }
    int *v = malloc(sizeof(int) * ((size_t)len + 1));
    if (!v) return oom(c);
    if (len) memcpy(v, vals, sizeof(int) * (size_t)len);
    set->s[set->n++] = (seq){.name = name, .dt = dt, .len = len, .vals = v};
    return TS_OK;
}

/* A node of g named after this one, with one output named out_name (NULL:
 * derived); folded when its inputs are constants.  Returns the output. */
static int add(sctx *c, const char *op, const int *ins, int nin, const ts_attr *at, int na, const char *out_name)
{
    char nm[320], on[320];
    snprintf(nm, sizeof nm, "%s/%s_%d", c->name, op, c->made);
    if (!out_name) {
        snprintf(on, sizeof on, "%s/%d", c->name, c->made);
        out_name = on;
    }
    c->made++;
    int y;
    const char *names[1] = {out_name};
    int idx = ts_graph_add_node(c->g, op, nm, ins, nin, at, na, 1, names, &y, c->err);
    if (idx < 0 || ts_node_fold(c->g, idx, c->err) < 0) return -1;
    /* folding keeps the output's value id */
    return y;
}

/* Constant int64 vector (Slice/Reshape parameters). */
static int ints_const(sctx *c, const int64_t *v, int n)
{
    char nm[320];
    snprintf(nm, sizeof nm, "%s/c%d", c->name, c->made++);
    int64_t d = n;
    ts_shape s = ts_shape_make(1, &d);
    ts_tensor *t = ts_tensor_new(TS_I64, &s, c->err);
    if (!t) return -1;
    if (n) memcpy(t->data, v, sizeof(int64_t) * (size_t)n);
    int r = ts_graph_add_constant(c->g, nm, t, c->err);
    ts_tensor_unref(t);
    return r;
}

/* x reshaped to dims (Reshape with a constant shape). */
static int reshape(sctx *c, int x, const int64_t *dims, int rank, const char *out_name)
{
    int sh = ints_const(c, dims, rank);
    return sh < 0 ? -1 : add(c, "Reshape", (const int[]){x, sh}, 2, NULL, 0, out_name);
}

static ts_status concat_from(sctx *c, const seq *s, int *out)
{
    int64_t axis, new_axis;
    ts_status st;
    if ((st = int_attr(c, "axis", 0, &axis)) || (st = int_attr(c, "new_axis", 0, &new_axis))) return st;
    if (!attr_of(c->n, "axis")) return fail(c, TS_ERR_INVALID, "attribute 'axis' is required");
    if (!s->len) return fail(c, TS_ERR_INVALID, "input sequence is empty: nothing to concatenate");
    const ts_shape *e0 = &c->g->values[s->vals[0]].shape;
    int rank = e0->rank + (new_axis ? 1 : 0), ax;
    if (!ts_axis_norm(axis, rank, &ax))
        return fail(c, TS_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axis, rank);
    int *ins = malloc(sizeof(int) * (size_t)s->len);
    if (!ins) return oom(c);
    for (int i = 0; i < s->len && !st; i++) {
        ins[i] = s->vals[i];
        if (!new_axis) continue;
        const ts_shape *e = &c->g->values[s->vals[i]].shape;
        int64_t dims[TS_MAX_RANK];
        if (e->rank + 1 > TS_MAX_RANK) {
            st = fail(c, TS_ERR_UNSUPPORTED, "new_axis makes rank %d, above %d", e->rank + 1, TS_MAX_RANK);
            break;
        }
        for (int d = 0, k = 0; d < e->rank + 1; d++) dims[d] = d == ax ? 1 : e->dims[k++];
        if ((ins[i] = reshape(c, s->vals[i], dims, e->rank + 1, NULL)) < 0) st = c->err->code;
    }
    ts_attr at = ts_attr_int("axis", ax);
    if (!st && (*out = add(c, "Concat", ins, s->len, &at, 1, c->n->output[0])) < 0) st = c->err->code;
    free(ins);
    return st;
}

static ts_status split_to(sctx *c, ts_seq_set **set, ts_seq_resolve resolve, void *ctx)
{
    int x, sv, ax;
    int64_t axis, keepdims;
    ts_status st;
    if ((st = tensor_input(c, resolve, ctx, 0, true, &x)) || (st = tensor_input(c, resolve, ctx, 1, false, &sv)) ||
        (st = int_attr(c, "axis", 0, &axis)) || (st = int_attr(c, "keepdims", 1, &keepdims)))
        return st;
    /* copies: adding nodes below may move g->values */
    const ts_shape xs = c->g->values[x].shape;
    const ts_dtype xdt = c->g->values[x].dtype;
    if (!ts_axis_norm(axis, xs.rank, &ax))
        return fail(c, TS_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axis, xs.rank);
    int64_t dim = xs.dims[ax];
    /* piece sizes: split as given (1-D), chunks of a scalar split (the last
     * may be smaller), or 1 each */
    int64_t *sizes = NULL;
    int np = 0;
    bool squeeze = false;
    if (sv >= 0) {
        int rank = c->g->values[sv].shape.rank;
        int64_t cnt = ts_shape_numel(&c->g->values[sv].shape);
        if (rank > 1 || cnt > INT_MAX) return fail(c, TS_ERR_INVALID, "input 1 ('split') must be a scalar or 1-D");
        if (!(sizes = malloc(sizeof(int64_t) * (size_t)(cnt > 0 ? cnt : 1)))) return oom(c);
        if ((st = const_ints(c, 1, sv, sizes, (int)cnt, &np))) goto out;
        if (rank == 0) {
            int64_t one = sizes[0];
            if (one < 1) {
                st = fail(c, TS_ERR_INVALID, "split %lld must be positive", (long long)one);
                goto out;
            }
            np = (int)((dim + one - 1) / one);
            free(sizes);
            if (!(sizes = malloc(sizeof(int64_t) * (size_t)(np > 0 ? np : 1)))) return oom(c);
            for (int i = 0; i < np; i++) sizes[i] = i < np - 1 || dim % one == 0 ? one : dim % one;
        } else {
            int64_t sum = 0;
            for (int i = 0; i < np; i++) {
                if (sizes[i] < 0) {
                    st = fail(c, TS_ERR_INVALID, "split[%d] = %lld is negative", i, (long long)sizes[i]);
                    goto out;
                }
                sum += sizes[i];
            }
            if (sum != dim) {
                st = fail(c, TS_ERR_INVALID, "split sums to %lld, axis %d has %lld", (long long)sum, ax, (long long)dim);
                goto out;
            }
        }
    } else {
        np = (int)dim;
        squeeze = !keepdims;
        if (!(sizes = malloc(sizeof(int64_t) * (size_t)(np > 0 ? np : 1)))) return oom(c);
        for (int i = 0; i < np; i++) sizes[i] = 1;
    }
    int *vals = malloc(sizeof(int) * (size_t)(np > 0 ? np : 1));
    if (!vals) {
        st = oom(c);
        goto out;
    }
    int64_t start = 0;
    for (int i = 0; i < np && !st; i++) {
        int64_t st_ = start, en = start + sizes[i], a = ax;
        int ps = ints_const(c, &st_, 1), pe = ints_const(c, &en, 1), pa = ints_const(c, &a, 1);
        int v = ps < 0 || pe < 0 || pa < 0 ? -1 : add(c, "Slice", (const int[]){x, ps, pe, pa}, 4, NULL, 0, NULL);
        if (v >= 0 && squeeze) {
            int64_t dims[TS_MAX_RANK];
            for (int d = 0, k = 0; d < xs.rank; d++)
                if (d != ax) dims[k++] = xs.dims[d];
            v = reshape(c, v, dims, xs.rank - 1, NULL);
        }
        if (v < 0) st = c->err->code;
        vals[i] = v;
        start = en;
    }
    if (!st) st = seq_put(c, set, c->n->output[0], xdt, vals, np);
    free(vals);
out:
    free(sizes);
    return st;
}

ts_status ts_onnx_seq_node(ts_graph *g, ts_seq_set **set, const Onnx__NodeProto *n, const char *name,
                           ts_seq_resolve resolve, void *ctx, int *out, ts_error *err)
{
    sctx c = {.g = g, .n = n, .name = name, .op = n->op_type, .err = err};
    int kind = op_index(n);
    *out = -1;
    if (n->n_output < 1 || !n->output[0] || !*n->output[0])
        return fail(&c, TS_ERR_INVALID, "expected one named output");
    if (seq_find(*set, n->output[0]))
        return fail(&c, TS_ERR_INVALID, "sequence '%s' is produced twice", n->output[0]);
    const seq *s = NULL;
    ts_status st = TS_OK;
    int pos, v;
    switch (kind) {
    case S_EMPTY: {
        int64_t code;
        if ((st = int_attr(&c, "dtype", 1 /* float */, &code))) return st;
        ts_dtype dt = ts_dtype_from_onnx(code);
        if (dt == TS_UNDEFINED) return fail(&c, TS_ERR_UNSUPPORTED, "element type %lld is not supported", (long long)code);
        return seq_put(&c, set, n->output[0], dt, NULL, 0);
    }
    case S_CONSTRUCT: {
        if (n->n_input < 1) return fail(&c, TS_ERR_INVALID, "needs at least one input");
        int *vals = malloc(sizeof(int) * n->n_input);
        if (!vals) return oom(&c);
        for (size_t i = 0; i < n->n_input && !st; i++)
            if (!(st = tensor_input(&c, resolve, ctx, (int)i, true, &vals[i])) &&
                g->values[vals[i]].dtype != g->values[vals[0]].dtype)
                st = fail(&c, TS_ERR_INVALID, "input %zu ('%s') is %s, input 0 is %s: a sequence holds one type", i,
                          n->input[i], ts_dtype_name(g->values[vals[i]].dtype),
                          ts_dtype_name(g->values[vals[0]].dtype));
        if (!st) st = seq_put(&c, set, n->output[0], g->values[vals[0]].dtype, vals, (int)n->n_input);
        free(vals);
        return st;
    }
    case S_INSERT:
    case S_ERASE: {
        if ((st = seq_input(&c, *set, 0, &s))) return st;
        int len = s->len, t = -1;
        if (kind == S_INSERT) {
            if ((st = tensor_input(&c, resolve, ctx, 1, true, &t))) return st;
            if (g->values[t].dtype != s->dt)
                return fail(&c, TS_ERR_INVALID, "tensor '%s' is %s, the sequence holds %s", n->input[1],
                            ts_dtype_name(g->values[t].dtype), ts_dtype_name(s->dt));
            st = position(&c, resolve, ctx, 2, len, true, len, &pos);
        } else {
            if (!len) return fail(&c, TS_ERR_INVALID, "cannot erase from an empty sequence");
            st = position(&c, resolve, ctx, 1, len, false, len - 1, &pos);
        }
        if (st) return st;
        int *vals = malloc(sizeof(int) * ((size_t)len + 1)), m = 0;
        if (!vals) return oom(&c);
        for (int i = 0; i <= len; i++) {
            if (i == pos && kind == S_INSERT) vals[m++] = t;
            if (i < len && !(i == pos && kind == S_ERASE)) vals[m++] = s->vals[i];
        }
        ts_dtype dt = s->dt;
        st = seq_put(&c, set, n->output[0], dt, vals, m); /* may move s */
        free(vals);
        return st;
    }
    case S_AT:
        if ((st = seq_input(&c, *set, 0, &s))) return st;
        if (!input_name(n, 1)) return fail(&c, TS_ERR_INVALID, "input 1 (position) is missing");
        if (!s->len) return fail(&c, TS_ERR_INVALID, "the sequence is empty");
        if ((st = position(&c, resolve, ctx, 1, s->len, false, 0, &pos))) return st;
        v = s->vals[pos];
        if ((*out = add(&c, "Identity", &v, 1, NULL, 0, n->output[0])) < 0) return err->code;
        return TS_OK;
    case S_LENGTH: {
        if ((st = seq_input(&c, *set, 0, &s))) return st;
        ts_shape sc = {0};
        ts_tensor *t = ts_tensor_new(TS_I64, &sc, err);
        if (!t) return err->code;
        *(int64_t *)t->data = s->len;
        *out = ts_graph_add_constant(g, n->output[0], t, err);
        ts_tensor_unref(t);
        return *out < 0 ? err->code : TS_OK;
    }
    case S_CONCAT:
        if ((st = seq_input(&c, *set, 0, &s))) return st;
        return concat_from(&c, s, out);
    case S_SPLIT: return split_to(&c, set, resolve, ctx);
    default: return fail(&c, TS_ERR_UNSUPPORTED, "not a sequence operator");
    }
}
