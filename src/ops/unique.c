/* Unique (opset 11): the distinct elements of the flattened input, or the
 * distinct slices along `axis`, sorted ascending (sorted=1, slices
 * compared lexicographically) or in order of first occurrence; with the
 * index of each one's first occurrence, the inverse indices (which unique
 * item each input item is) and the counts.  The number of distinct items
 * is the output shape, so the input must be constant when the graph is
 * built (a session loads the model at the run's values). */
#include <stdlib.h>
#include <string.h>
#include "ops/elementwise.h"

typedef struct unique_attrs {
    int64_t axis;
    bool has_axis;
    int sorted;
} unique_attrs;

static ts_status unique_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    unique_attrs *p = attrs;
    int64_t s;
    (void)opset;
    p->has_axis = ts_attr_find(a, na, "axis") != NULL;
    if (ts_attr_get_int(a, na, "axis", 0, &p->axis, err) || ts_attr_get_int(a, na, "sorted", 1, &s, err))
        return err->code;
    p->sorted = s != 0;
    return TS_OK;
}

static int unique_emit(const void *attrs, ts_attr *out, int max)
{
    const unique_attrs *p = attrs;
    int n = 0;
    if (max < 2) return 0;
    if (p->has_axis) out[n++] = ts_attr_int("axis", p->axis);
    out[n++] = ts_attr_int("sorted", p->sorted);
    return n;
}

/* The items: nitems slices of `len` elements, element j of item i at
 * offset (o * nitems + i) * inner + jj for o < outer, jj < inner. */
typedef struct items {
    const ts_num *num; /* NULL: declared dtype (a graph constant) */
    const ts_tensor *t;
    int64_t outer, nitems, inner;
} items;

static double item_at(const items *it, int64_t i, int64_t j)
{
    int64_t o = j / it->inner, jj = j % it->inner, at = (o * it->nitems + i) * it->inner + jj;
    return it->num ? el_get(it->num, it->t, at) : ts_tensor_get_f64(it->t, at);
}

static int item_cmp(const items *it, int64_t a, int64_t b)
{
    for (int64_t j = 0, n = it->outer * it->inner; j < n; j++) {
        double x = item_at(it, a, j), y = item_at(it, b, j);
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

static _Thread_local const items *sort_ctx;

static int by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    int c = item_cmp(sort_ctx, x, y);
    return c ? c : (x > y) - (x < y); /* equal items: first occurrence first */
}

/* Groups the items: first[u] (first occurrence of unique item u, in
 * output order), inverse[i], count[u].  Returns the number of unique
 * items, or -1 out of memory. */
static int64_t unique_run(const items *it, bool sorted, int64_t *first, int64_t *inverse, int64_t *count)
{
    int64_t n = it->nitems, nu = 0;
    int64_t *ord = malloc(sizeof *ord * (size_t)(n + 1)), *grp = malloc(sizeof *grp * (size_t)(n + 1));
    int64_t *ufirst = malloc(sizeof *ufirst * (size_t)(n + 1)), *rank = malloc(sizeof *rank * (size_t)(n + 1));
    if (!ord || !grp || !ufirst || !rank) {
        free(ord), free(grp), free(ufirst), free(rank);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) ord[i] = i;
    sort_ctx = it;
    qsort(ord, (size_t)n, sizeof *ord, by_value);
    for (int64_t k = 0; k < n; k++) { /* groups in ascending order */
        if (k == 0 || item_cmp(it, ord[k - 1], ord[k])) ufirst[nu++] = ord[k];
        grp[ord[k]] = nu - 1;
    }
    /* output position of each group: ascending, or by first occurrence */
    for (int64_t u = 0; u < nu; u++) rank[u] = u;
    if (!sorted) {
        int64_t pos = 0;
        for (int64_t u = 0; u < nu; u++) rank[u] = -1;
        for (int64_t i = 0; i < n; i++)
            if (rank[grp[i]] < 0) rank[grp[i]] = pos++;
    }
    for (int64_t u = 0; u < nu; u++) {
        if (first) first[rank[u]] = ufirst[u];
        if (count) count[rank[u]] = 0;
    }
    for (int64_t i = 0; i < n; i++) {
        if (inverse) inverse[i] = rank[grp[i]];
        if (count) count[rank[grp[i]]]++;
    }
    free(ord), free(grp), free(ufirst), free(rank);
    return nu;
}

static void items_of(const unique_attrs *p, const ts_num *num, const ts_tensor *t, items *it)
{
    *it = (items){num, t, 1, ts_tensor_numel(t), 1};
    if (!p->has_axis) return;
    int axis;
    ts_axis_norm(p->axis, t->shape.rank, &axis);
    it->nitems = t->shape.dims[axis];
    for (int d = 0; d < axis; d++) it->outer *= t->shape.dims[d];
    for (int d = axis + 1; d < t->shape.rank; d++) it->inner *= t->shape.dims[d];
}

static ts_status unique_infer(ts_infer_ctx *c)
{
    const unique_attrs *p = c->attrs;
    const ts_value *x = c->in[0];
    int axis = 0;
    if (p->has_axis && !ts_axis_norm(p->axis, x->shape.rank, &axis))
        return ts_infer_fail(c, "axis %lld is out of range for rank %d", (long long)p->axis, x->shape.rank);
    const ts_tensor *t = ts_infer_const_tensor(c, 0);
    if (!t) return c->err->code;
    items it;
    items_of(p, NULL, t, &it);
    int64_t nu = unique_run(&it, p->sorted, NULL, NULL, NULL);
    if (nu < 0) return ts_error_set(c->err, TS_ERR_NOMEM, "out of memory");
    ts_shape y = ts_shape_make(1, (int64_t[]){nu});
    if (p->has_axis) {
        y = x->shape;
        y.dims[axis] = nu;
    }
    c->out_dtype[0] = x->dtype;
    c->out_shape[0] = y;
    for (int o = 1; o < c->nout; o++) {
        c->out_dtype[o] = TS_I64;
        c->out_shape[o] = ts_shape_make(1, (int64_t[]){o == 2 ? it.nitems : nu});
    }
    return TS_OK;
}

static ts_status unique_kernel(ts_kernel_ctx *k)
{
    const unique_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    bool flt = x->dtype == k->num->storage;
    if (flt && need_float_domain(k)) return k->err->code;
    items it;
    items_of(p, flt ? k->num : NULL, x, &it);
    int64_t *first = malloc(sizeof *first * (size_t)(it.nitems + 1));
    if (!first) return ts_kernel_fail(k, TS_ERR_NOMEM, "out of memory");
    int64_t nu = unique_run(&it, p->sorted, first, k->nout > 2 && k->out[2] ? k->out[2]->data : NULL,
                            k->nout > 3 && k->out[3] ? k->out[3]->data : NULL);
    int axis = 0;
    if (p->has_axis) ts_axis_norm(p->axis, x->shape.rank, &axis);
    if (nu != k->out[0]->shape.dims[p->has_axis ? axis : 0]) {
        free(first);
        return ts_kernel_fail(k, nu < 0 ? TS_ERR_NOMEM : TS_ERR_INVALID,
                              "%lld distinct items, the graph was built for another count", (long long)nu);
    }
    size_t es = ts_dtype_size(x->dtype), row = (size_t)it.inner * es;
    for (int64_t o = 0; o < it.outer; o++)
        for (int64_t u = 0; u < nu; u++)
            memcpy((char *)k->out[0]->data + (size_t)(o * nu + u) * row,
                   (const char *)x->data + (size_t)(o * it.nitems + first[u]) * row, row);
    if (k->nout > 1 && k->out[1]) memcpy(k->out[1]->data, first, (size_t)nu * sizeof *first);
    free(first);
    return TS_OK;
}

const ts_op_desc ts_op_unique = {.opset_min = 11, 
    .name = "Unique", .attr_size = sizeof(unique_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 4, .parse = unique_parse, .emit = unique_emit, .infer = unique_infer, .kernel = unique_kernel,
};
