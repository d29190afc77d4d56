/* opcases: the single-op case driver.
 *
 *   opcases [FILTER]             build, validate and run every case in the
 *                                float32 and float64 domains, check they agree
 *   opcases export DIR [FILTER]  the same, and write for each case
 *                                DIR/<case>/model.onnx, in/NAME.npy (seeded random
 *                                inputs), ref/NAME.npy (float32 reference outputs)
 *                                and tol ("RTOL ATOL") for tests/ops/ort_opcases.sh
 *   opcases fast [FILTER]        the same checks, then the fast runtime (a plan,
 *                                src/exec/) on the same inputs against the
 *                                float32 reference, with the case's tolerance
 *
 * Prints one line per failing case and a final "N passed, N failed". */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include "opcase.h"

#define DEFAULT_RTOL 1e-4
#define DEFAULT_ATOL 1e-5

static bool fast_mode; /* `opcases fast` */

static uint64_t seed_of(const char *name)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a: stable across runs and hosts */
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

static bool make_dir(const char *path, ts_error *e)
{
    if (!mkdir(path, 0777) || errno == EEXIST) return true;
    ts_error_set(e, TS_ERR_IO, "cannot create folder: %s (%s)", strerror(errno), path);
    return false;
}

static bool save_tensors(const char *dir, const ts_graph *g, const int *ids, ts_tensor *const *ts, int n,
                         ts_error *e)
{
    if (!make_dir(dir, e)) return false;
    for (int i = 0; i < n; i++) {
        char stem[512], path[1024];
        ts_name_sanitize(g->values[ids[i]].name, stem, sizeof stem);
        snprintf(path, sizeof path, "%s/%s.npy", dir, stem);
        if (ts_npy_save(path, ts[i], e)) return false;
    }
    return true;
}

/* Runs g in one float domain; outputs converted to float32/declared ints. */
static bool run_domain(const ts_graph *g, ts_domain_kind dom, ts_tensor *const *in, ts_tensor **out, ts_error *e)
{
    ts_tensor *conv[64] = {0};
    bool ok = g->ninputs <= 64;
    if (!ok) ts_error_set(e, TS_ERR_INVALID, "too many inputs");
    for (int i = 0; ok && i < g->ninputs; i++) {
        ts_dtype want = ts_dtype_is_float(in[i]->dtype) ? (dom == TS_DOMAIN_F64 ? TS_F64 : TS_F32) : in[i]->dtype;
        conv[i] = ts_tensor_new(want, &in[i]->shape, e);
        if (!conv[i]) ok = false;
        for (int64_t k = 0; ok && k < ts_tensor_numel(in[i]); k++) ts_tensor_set_f64(conv[i], k, ts_tensor_get_f64(in[i], k));
    }
    if (ok) ok = ts_graph_run_reference(g, dom, conv, out, e) == TS_OK;
    for (int i = 0; i < g->ninputs && i < 64; i++) ts_tensor_unref(conv[i]);
    return ok;
}

/* The float32 and float64 domains must agree within the case's tolerance:
 * catches kernels whose float32 path loses precision (or differs in logic). */
static bool domains_agree(const ts_graph *g, ts_tensor *const *a, ts_tensor *const *b, double rtol, double atol,
                          ts_error *e)
{
    for (int o = 0; o < g->noutputs; o++) {
        int64_t n = ts_tensor_numel(a[o]);
        if (!ts_shape_eq(&a[o]->shape, &b[o]->shape))
            return ts_error_set(e, TS_ERR_INVALID, "output %d: f32 and f64 shapes differ", o), false;
        for (int64_t i = 0; i < n; i++) {
            double x = ts_tensor_get_f64(a[o], i), y = ts_tensor_get_f64(b[o], i);
            if ((isnan(x) && isnan(y)) || x == y) continue;
            if (!(fabs(x - y) <= atol + rtol * fabs(y))) {
                ts_error_set(e, TS_ERR_INVALID, "output '%s'[%lld]: f32 %.9g vs f64 %.9g",
                             g->values[g->outputs[o]].name, (long long)i, x, y);
                return false;
            }
        }
    }
    return true;
}

/* The fast runtime on the same inputs must match the reference outputs
 * (already in declared dtypes). */
static bool fast_agrees(const ts_graph *g, ts_tensor *const *in, ts_tensor *const *ref, double rtol, double atol,
                        ts_error *e)
{
    ts_tensor *out[64] = {0};
    ts_plan *plan = NULL;
    bool ok = ts_plan_build(g, NULL, &plan, e) == TS_OK;
    for (int o = 0; ok && o < g->noutputs; o++)
        ok = (out[o] = ts_tensor_new(g->values[g->outputs[o]].dtype, &g->values[g->outputs[o]].shape, e)) != NULL;
    if (ok && ts_plan_run(plan, in, out, e)) ok = !ts_error_prefix(e, "fast runtime");
    for (int o = 0; ok && o < g->noutputs; o++)
        for (int64_t i = 0; ok && i < ts_tensor_numel(ref[o]); i++) {
            double x = ts_tensor_get_f64(out[o], i), y = ts_tensor_get_f64(ref[o], i);
            if ((isnan(x) && isnan(y)) || x == y || fabs(x - y) <= atol + rtol * fabs(y)) continue;
            ok = !ts_error_set(e, TS_ERR_INVALID, "output '%s'[%lld]: fast runtime %.9g vs reference %.9g",
                               g->values[g->outputs[o]].name, (long long)i, x, y);
        }
    for (int o = 0; o < g->noutputs && o < 64; o++) ts_tensor_unref(out[o]);
    ts_plan_free(plan);
    return ok;
}

/* One case; false with e set on failure. */
static bool run_case(const opcase *c, const char *dir, ts_error *e)
{
    ts_graph *g = c->build();
    ts_tensor *in[64] = {0}, *o32[64] = {0}, *o64[64] = {0};
    bool ok = ts_graph_validate(g, e) == TS_OK;
    if (ok && (g->ninputs > 64 || g->noutputs > 64)) ok = !ts_error_set(e, TS_ERR_INVALID, "too many inputs/outputs");
    double lo = c->lo, hi = c->hi;
    if (lo == 0 && hi == 0) lo = -1, hi = 1;
    double rtol = c->rtol ? c->rtol : DEFAULT_RTOL, atol = c->atol ? c->atol : DEFAULT_ATOL;
    uint64_t rng = seed_of(c->name);
    for (int i = 0; ok && i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        if (!(in[i] = ts_tensor_new(v->dtype, &v->shape, e))) {
            ok = false;
            break;
        }
        if (ts_dtype_is_float(v->dtype))
            ts_tensor_fill_random(in[i], &rng, lo, hi);
        else /* small non-negative integers: valid as indices, counts, bools */
            ts_tensor_fill_random(in[i], &rng, 0, v->dtype == TS_BOOL ? 1 : 3);
    }
    ok = ok && run_domain(g, TS_DOMAIN_F32, in, o32, e) && run_domain(g, TS_DOMAIN_F64, in, o64, e) &&
         domains_agree(g, o32, o64, rtol, atol, e);
    /* Reference outputs in their declared dtypes (f32 domain results). */
    for (int o = 0; ok && o < g->noutputs; o++) {
        ts_tensor *t = ts_tensor_new(g->values[g->outputs[o]].dtype, &o32[o]->shape, e);
        if (!t) {
            ok = false;
            break;
        }
        for (int64_t k = 0; k < ts_tensor_numel(t); k++) ts_tensor_set_f64(t, k, ts_tensor_get_f64(o32[o], k));
        ts_tensor_unref(o32[o]);
        o32[o] = t;
    }
    if (ok && fast_mode) ok = fast_agrees(g, in, o32, rtol, atol, e);
    if (ok && dir) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, c->name);
        ok = make_dir(path, e);
        snprintf(path, sizeof path, "%s/%s/model.onnx", dir, c->name);
        ok = ok && ts_onnx_save(g, path, e) == TS_OK;
        snprintf(path, sizeof path, "%s/%s/in", dir, c->name);
        ok = ok && save_tensors(path, g, g->inputs, in, g->ninputs, e);
        snprintf(path, sizeof path, "%s/%s/ref", dir, c->name);
        ok = ok && save_tensors(path, g, g->outputs, o32, g->noutputs, e);
        snprintf(path, sizeof path, "%s/%s/tol", dir, c->name);
        FILE *f = ok ? fopen(path, "w") : NULL;
        if (ok && (!f || fprintf(f, "%g %g\n", rtol, atol) < 0)) ok = !ts_error_set(e, TS_ERR_IO, "cannot write %s", path);
        if (f) fclose(f);
    }
    for (int i = 0; i < 64; i++) {
        ts_tensor_unref(in[i]);
        ts_tensor_unref(o32[i]);
        ts_tensor_unref(o64[i]);
    }
    ts_graph_free(g);
    return ok;
}

static int run_table(const opcase *t, const char *dir, const char *filter, int *failed)
{
    int n = 0;
    for (; t->name; t++) {
        if (filter && !strstr(t->name, filter)) continue;
        ts_error e = {0};
        if (!run_case(t, dir, &e)) {
            printf("FAIL %s: %s\n", t->name, e.msg);
            ++*failed;
        }
        n++;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *filter = NULL;
    if (argc > 1 && !strcmp(argv[1], "export")) {
        if (argc < 3 || argc > 4) {
            fprintf(stderr, "usage: opcases [FILTER] | opcases export DIR [FILTER]\n");
            return 2;
        }
        dir = argv[2];
        filter = argc > 3 ? argv[3] : NULL;
        ts_error e = {0};
        if (!make_dir(dir, &e)) {
            fprintf(stderr, "opcases: %s\n", e.msg);
            return 2;
        }
    } else if (argc > 1 && !strcmp(argv[1], "fast")) {
        if (argc > 3) {
            fprintf(stderr, "usage: opcases fast [FILTER]\n");
            return 2;
        }
        fast_mode = true;
        filter = argc > 2 ? argv[2] : NULL;
    } else if (argc > 2) {
        fprintf(stderr, "usage: opcases [FILTER] | opcases export DIR [FILTER]\n");
        return 2;
    } else {
        filter = argc > 1 ? argv[1] : NULL;
    }
    int failed = 0, n = 0;
    n += run_table(opcases_nn, dir, filter, &failed);
    n += run_table(opcases_math, dir, filter, &failed);
    n += run_table(opcases_tensor, dir, filter, &failed);
    printf("%d passed, %d failed\n", n - failed, failed);
    return failed != 0;
}
