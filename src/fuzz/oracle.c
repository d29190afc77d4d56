/* The oracle: both graphs of a pair get the same random inputs; their
 * common outputs must agree within a tolerance scaled to the output's
 * magnitude, and values that make a comparison meaningless (NaN, infinities,
 * magnitudes where float32 rounding alone exceeds the tolerance) filter the
 * pair out instead of reporting it: POLYJUICE's false positives came from
 * undefined and unstable cases, and a finding must be a bug. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "fuzz/fuzz.h"
#include "util/hash.h"

const ts_fuzz_tol ts_fuzz_tol_default = {.rtol = 1e-3, .atol = 1e-4, .huge = 1e6};

ts_status ts_fuzz_inputs(const ts_graph *g, uint64_t seed, ts_tensor **in, ts_error *err)
{
    for (int i = 0; i < g->ninputs; i++) in[i] = NULL;
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        if (!(in[i] = ts_tensor_new(v->dtype, &v->shape, err))) {
            for (int j = 0; j < i; j++) ts_tensor_unref(in[j]);
            return err->code;
        }
        uint64_t rng = seed ^ ts_hash_str(TS_HASH_SEED, v->name);
        /* inputs named pos* (runtime seeds: divisors, roots, logarithms) in [0.25, 2) */
        bool pos = !strncmp(v->name, "pos", 3);
        ts_tensor_fill_random(in[i], &rng, pos ? 0.25 : -1, pos ? 2 : 1);
    }
    return TS_OK;
}

ts_status ts_fuzz_inputs_by_name(const ts_graph *g, const ts_graph *from, ts_tensor *const *from_in, ts_tensor **in,
                                 ts_error *err)
{
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        in[i] = NULL;
        for (int j = 0; j < from->ninputs && !in[i]; j++)
            if (!strcmp(from->values[from->inputs[j]].name, v->name)) in[i] = ts_tensor_ref(from_in[j]);
        if (!in[i] || in[i]->dtype != v->dtype || !ts_shape_eq(&in[i]->shape, &v->shape)) {
            for (int j = 0; j <= i; j++) ts_tensor_unref(in[j]);
            return ts_error_set(err, TS_ERR_INVALID, "input '%s' of the variant is not an input of the original",
                                v->name);
        }
    }
    return TS_OK;
}

ts_fuzz_tol ts_fuzz_tol_for(const ts_fuzz_tol *base, const ts_graph *g)
{
    bool f16 = false, bf16 = false;
    for (int i = 0; i < g->nvalues; i++) {
        f16 |= g->values[i].dtype == TS_F16;
        bf16 |= g->values[i].dtype == TS_BF16;
    }
    ts_fuzz_tol tol = *base;
    tol.rtol *= bf16 ? 32 : f16 ? 4 : 1;
    return tol;
}

void ts_fuzz_compare(const ts_tensor *a, const ts_tensor *b, const ts_fuzz_tol *tol, ts_fuzz_diff *d)
{
    *d = (ts_fuzz_diff){.at = -1};
    if (a->dtype != b->dtype || !ts_shape_eq(&a->shape, &b->shape)) {
        d->scaled = INFINITY;
        return;
    }
    int64_t n = ts_tensor_numel(a);
    d->at = n ? 0 : -1;
    if (!ts_dtype_is_float(a->dtype)) {
        for (int64_t k = 0; k < n; k++)
            if (ts_tensor_get_i64(a, k) != ts_tensor_get_i64(b, k)) {
                *d = (ts_fuzz_diff){.scaled = INFINITY, .at = k, .a = (double)ts_tensor_get_i64(a, k),
                                    .b = (double)ts_tensor_get_i64(b, k)};
                d->abs = fabs(d->a - d->b);
                return;
            }
        return;
    }
    for (int64_t k = 0; k < n; k++) d->scale = fmax(d->scale, fabs(ts_tensor_get_f64(a, k)));
    for (int64_t k = 0; k < n; k++) {
        double x = ts_tensor_get_f64(a, k), y = ts_tensor_get_f64(b, k);
        double m = fmax(d->scale, fmax(fabs(x), fabs(y)));
        double e = fabs(x - y) / (tol->atol + tol->rtol * m);
        if (isnan(e)) e = INFINITY;
        if (e > d->scaled || (k == 0 && e >= d->scaled)) {
            d->scaled = e;
            d->abs = fabs(x - y);
            d->a = x;
            d->b = y;
            d->at = k;
        }
    }
}

bool ts_fuzz_unstable(const ts_tensor *t, const ts_fuzz_tol *tol, char *why, size_t n)
{
    if (!ts_dtype_is_float(t->dtype)) return false;
    int64_t count = ts_tensor_numel(t);
    for (int64_t k = 0; k < count; k++) {
        double x = ts_tensor_get_f64(t, k);
        if (isnan(x) || isinf(x) || fabs(x) > tol->huge) {
            if (why)
                snprintf(why, n, "%s at element %lld", isnan(x) ? "NaN" : isinf(x) ? "an infinity" : "a huge value",
                         (long long)k);
            return true;
        }
    }
    return false;
}

const char *ts_fuzz_kind_name(ts_fuzz_kind k)
{
    static const char *const names[] = {"pass", "filtered", "mismatch", "error"};
    return (unsigned)k < 4 ? names[k] : "?";
}
