/* TfIdfVectorizer (opset 9): counts, per row of integer tokens, the
 * n-grams (min_gram_length..max_gram_length, tokens up to max_skip_count
 * apart) found in the pool, into float slots ngram_indexes; mode TF gives
 * the counts, IDF weights[i] where the count is non-zero, TFIDF counts
 * times weights (weights default 1).  A 1-gram is counted once whatever
 * the skip.  Integer pools only (pool_int64s); the pool is kept in the
 * attribute struct, so its size is bounded. */
#include <string.h>
#include "ops/op.h"

#define POOL_MAX 1024
#define NGRAM_MAX 512

enum { TF, IDF, TFIDF };

typedef struct tfidf_attrs {
    int64_t min_gram, max_gram, max_skip;
    int mode, ncounts, nindexes, npool, nweights;
    int64_t counts[16];
    int64_t indexes[NGRAM_MAX];
    int64_t pool[POOL_MAX];
    float weights[NGRAM_MAX];
} tfidf_attrs;

static const char *const MODES[] = {"TF", "IDF", "TFIDF"};

static ts_status tfidf_parse(void *attrs, const ts_attr *a, int na, int opset, ts_error *err)
{
    tfidf_attrs *p = attrs;
    char mode[16];
    (void)opset;
    if (ts_attr_find(a, na, "pool_strings"))
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "attribute 'pool_strings': string tokens are not supported");
    if (ts_attr_get_int(a, na, "min_gram_length", 1, &p->min_gram, err) ||
        ts_attr_get_int(a, na, "max_gram_length", 1, &p->max_gram, err) ||
        ts_attr_get_int(a, na, "max_skip_count", 0, &p->max_skip, err) ||
        ts_attr_get_string(a, na, "mode", "TF", mode, sizeof mode, err) ||
        ts_attr_get_ints(a, na, "ngram_counts", p->counts, 16, &p->ncounts, err) ||
        ts_attr_get_ints(a, na, "ngram_indexes", p->indexes, NGRAM_MAX, &p->nindexes, err) ||
        ts_attr_get_ints(a, na, "pool_int64s", p->pool, POOL_MAX, &p->npool, err))
        return err->code;
    p->mode = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(mode, MODES[i])) p->mode = i;
    if (p->mode < 0) return ts_attr_fail(err, ts_attr_find(a, na, "mode"), "expected TF, IDF or TFIDF");
    if (p->min_gram < 1 || p->max_gram < p->min_gram || p->max_gram > 16 || p->max_skip < 0)
        return ts_error_set(err, TS_ERR_INVALID, "gram lengths %lld..%lld (at most 16) or max_skip_count %lld are invalid",
                            (long long)p->min_gram, (long long)p->max_gram, (long long)p->max_skip);
    if (p->ncounts < 1 || p->nindexes < 1 || p->npool < 1)
        return ts_error_set(err, TS_ERR_INVALID, "ngram_counts, ngram_indexes and pool_int64s are required");
    const ts_attr *w = ts_attr_find(a, na, "weights");
    if (w) {
        if (w->kind != TS_ATTR_FLOATS || w->n > NGRAM_MAX) return ts_attr_fail(err, w, "expected at most 512 floats");
        memcpy(p->weights, w->floats, sizeof(float) * (size_t)w->n);
        p->nweights = w->n;
    }
    /* the pool is split into runs of 1-grams, 2-grams, ...; each index names one n-gram */
    int64_t grams = 0;
    for (int i = 0; i < p->ncounts; i++) {
        int64_t end = i + 1 < p->ncounts ? p->counts[i + 1] : p->npool, start = p->counts[i];
        if (start < 0 || end < start || end > p->npool || (end - start) % (i + 1))
            return ts_error_set(err, TS_ERR_INVALID, "ngram_counts do not split the pool into whole n-grams");
        grams += (end - start) / (i + 1);
    }
    if (grams != p->nindexes || (p->nweights && p->nweights != p->nindexes))
        return ts_error_set(err, TS_ERR_INVALID, "%lld n-grams in the pool, %d ngram_indexes, %d weights", (long long)grams,
                            p->nindexes, p->nweights);
    for (int i = 0; i < p->nindexes; i++)
        if (p->indexes[i] < 0 || p->indexes[i] >= NGRAM_MAX)
            return ts_error_set(err, TS_ERR_INVALID, "ngram_indexes[%d] = %lld is out of range", i, (long long)p->indexes[i]);
    return TS_OK;
}

static int tfidf_emit(const void *attrs, ts_attr *out, int max)
{
    const tfidf_attrs *p = attrs;
    int n = 0;
    if (max < 8) return 0;
    out[n++] = ts_attr_int("min_gram_length", p->min_gram);
    out[n++] = ts_attr_int("max_gram_length", p->max_gram);
    out[n++] = ts_attr_int("max_skip_count", p->max_skip);
    out[n++] = ts_attr_string("mode", MODES[p->mode]);
    out[n++] = ts_attr_ints("ngram_counts", p->counts, p->ncounts);
    out[n++] = ts_attr_ints("ngram_indexes", p->indexes, p->nindexes);
    out[n++] = ts_attr_ints("pool_int64s", p->pool, p->npool);
    if (p->nweights) out[n++] = ts_attr_floats("weights", p->weights, p->nweights);
    return n;
}

static int64_t out_width(const tfidf_attrs *p)
{
    int64_t w = 0;
    for (int i = 0; i < p->nindexes; i++)
        if (p->indexes[i] + 1 > w) w = p->indexes[i] + 1;
    return w;
}

static ts_status tfidf_infer(ts_infer_ctx *c)
{
    const ts_value *x = c->in[0];
    if (x->dtype != TS_I32 && x->dtype != TS_I64) return ts_infer_fail(c, "input '%s' must be int32 or int64", x->name);
    if (x->shape.rank < 1 || x->shape.rank > 2) return ts_infer_fail(c, "input '%s' must have rank 1 or 2", x->name);
    ts_shape o = x->shape;
    o.dims[o.rank - 1] = out_width(c->attrs);
    c->out_dtype[0] = TS_F32;
    c->out_shape[0] = o;
    return TS_OK;
}

/* Pool slot (n-gram number) of the n tokens at x[0], x[step], ...; -1. */
static int find_gram(const tfidf_attrs *p, int64_t n, const ts_tensor *x, int64_t at, int64_t step)
{
    if (n > p->ncounts) return -1;
    int64_t start = p->counts[n - 1], end = n < p->ncounts ? p->counts[n] : p->npool, slot = 0;
    for (int i = 0; i < n - 1; i++) /* n-grams before this run */
        slot += ((i + 1 < p->ncounts ? p->counts[i + 1] : p->npool) - p->counts[i]) / (i + 1);
    for (int64_t g = start; g < end; g += n, slot++) {
        bool same = true;
        for (int64_t j = 0; j < n && same; j++) same = p->pool[g + j] == ts_tensor_get_i64(x, at + j * step);
        if (same) return (int)slot;
    }
    return -1;
}

static ts_status tfidf_kernel(ts_kernel_ctx *k)
{
    const tfidf_attrs *p = k->attrs;
    const ts_tensor *x = k->in[0];
    ts_tensor *y = k->out[0];
    int64_t rows = x->shape.rank == 2 ? x->shape.dims[0] : 1, len = x->shape.dims[x->shape.rank - 1];
    int64_t width = y->shape.dims[y->shape.rank - 1];
    for (int64_t r = 0; r < rows; r++) {
        float *out = (float *)ts_num_at(k->num, y->data, r * width);
        for (int64_t n = p->min_gram; n <= p->max_gram; n++)
            for (int64_t skip = 0; skip <= (n == 1 ? 0 : p->max_skip); skip++) {
                int64_t step = skip + 1;
                for (int64_t s = 0; s + (n - 1) * step < len; s++) {
                    int g = find_gram(p, n, x, r * len + s, step);
                    if (g >= 0) out[p->indexes[g]] += 1;
                }
            }
        for (int i = 0; i < p->nindexes; i++) {
            float *v = &out[p->indexes[i]], w = p->nweights ? p->weights[i] : 1;
            if (p->mode == IDF) *v = *v > 0 ? w : 0;
            else if (p->mode == TFIDF) *v *= w;
        }
    }
    return TS_OK;
}

static ts_status tfidf_kernel_checked(ts_kernel_ctx *k)
{
    if (k->num->storage != TS_F32) /* counts are written as float32 */
        return ts_kernel_fail(k, TS_ERR_UNSUPPORTED, "runs in the f32 domain only, not %s", k->num->name);
    return tfidf_kernel(k);
}

const ts_op_desc ts_op_tfidf = {.opset_min = 9, 
    .name = "TfIdfVectorizer", .attr_size = sizeof(tfidf_attrs), .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
    .max_outputs = 1, .parse = tfidf_parse, .emit = tfidf_emit, .infer = tfidf_infer, .kernel = tfidf_kernel_checked,
};
