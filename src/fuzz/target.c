/* Targets of the fuzzer: the compilers a pair is given to.
 *
 *  - tsopt: the runtime (src/exec: a plan with its fusion, layouts and
 *    kernels) runs both graphs; then the optimizer (ts_optimize with a
 *    tiny budget, the roofline cost model and no timing, so that it is
 *    deterministic) rewrites the variant, and the runtime runs the result,
 *    which must still agree with the original.
 *  - ort: ONNX Runtime with all its graph optimizations, through one
 *    long-lived node process (ort.c, tools/ort/serve.js).
 *
 * A mismatch is checked once more against the float64 reference
 * interpreter (src/ir/interp.c) to say which side is wrong; when the two
 * graphs already differ there, the pair itself is not equivalent (a wrong
 * rewrite rule, not a compiler bug) and the verdict says so. */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ein/codegen.h"
#include "fuzz/fuzz.h"
#include "ops/list.h"

struct ts_fuzz_target {
    ts_fuzz_target_opts o;
    ts_fuzz_ort *ort;
    char work[512];       /* temporary folder: models and .npy for ORT, the optimizer's cost cache */
    char cost_cache[600]; /* never written: the roofline model times nothing */
    char *files[2];       /* ORT: model files to give it as they are (replay), NULL: write the graphs */
    ts_fuzz_cover *cover; /* plans recorded here (NULL: none) */
    int fresh;            /* new coverage since ts_fuzz_target_fresh */
};

void ts_fuzz_target_set_cover(ts_fuzz_target *t, ts_fuzz_cover *c) { t->cover = c; }

int ts_fuzz_target_fresh(ts_fuzz_target *t)
{
    int f = t->fresh;
    t->fresh = 0;
    return f;
}

void ts_fuzz_target_set_files(ts_fuzz_target *t, const char *original, const char *variant)
{
    const char *f[2] = {original, variant};
    for (int i = 0; i < 2; i++) {
        free(t->files[i]);
        t->files[i] = f[i] ? strdup(f[i]) : NULL;
    }
}

const char *ts_fuzz_plants(void) { return "transpose-add, optimizer-transpose-add, relu-abs"; }

static bool plant_is(const ts_fuzz_target *t, const char *name) { return t->o.plant && !strcmp(t->o.plant, name); }

bool ts_fuzz_plant_known(const char *name)
{
    return !strcmp(name, "transpose-add") || !strcmp(name, "optimizer-transpose-add") || !strcmp(name, "relu-abs");
}

/* Whether an executable named name is on $PATH. */
static bool on_path(const char *name)
{
    const char *path = getenv("PATH");
    char buf[1100];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, name);
        if (n && !access(buf, X_OK)) return true;
        path += n + (path[n] == ':');
    }
    return false;
}

const char *ts_fuzz_eop_cc(const char *eop_cc)
{
    if (eop_cc) return eop_cc;
    static int tcc = -1;
    if (tcc < 0) tcc = on_path("tcc");
    return tcc ? "tcc" : "system";
}

/* The compiler of this pair's eOperators (see eop_cc in fuzz.h). */
static void pick_eop_cc(const ts_fuzz_target *t, uint64_t seed)
{
    const char *cc = ts_fuzz_eop_cc(t->o.eop_cc);
    int every = t->o.eop_system_every;
    if (every > 0 && (seed >> 17) % (uint64_t)every == 0) cc = "system";
    ts_ein_set_compiler(strcmp(cc, "system") ? cc : NULL);
}

/* Removes the work folder: files, and folders of files (its layout). */
static void remove_tree(const char *path, int depth)
{
    DIR *d = depth < 3 ? opendir(path) : NULL;
    if (d) {
        struct dirent *e;
        char sub[1024];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                remove_tree(sub, depth + 1);
            }
        closedir(d);
    }
    remove(path);
}

ts_status ts_fuzz_target_open(const ts_fuzz_target_opts *o, ts_fuzz_target **out, ts_error *err)
{
    *out = NULL;
    if (o->plant && *o->plant && !ts_fuzz_plant_known(o->plant))
        return ts_error_set(err, TS_ERR_INVALID, "unknown planted bug '%s' (known: %s)", o->plant, ts_fuzz_plants());
    ts_fuzz_target *t = calloc(1, sizeof *t);
    if (!t) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    t->o = *o;
    if (t->o.opt_budget <= 0) t->o.opt_budget = 2;
    if (t->o.tol.rtol <= 0) t->o.tol = ts_fuzz_tol_default;
    const char *tmp = getenv("TMPDIR");
    snprintf(t->work, sizeof t->work, "%s/tsopt-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(t->work)) {
        ts_status st = ts_error_set(err, TS_ERR_IO, "cannot make a temporary folder under %s", tmp ? tmp : "/tmp");
        free(t);
        return st;
    }
    snprintf(t->cost_cache, sizeof t->cost_cache, "%s/costs.tsv", t->work);
    if (o->kind == TS_FUZZ_TARGET_ORT) {
        char dirs[3][600];
        snprintf(dirs[0], sizeof dirs[0], "%s/in", t->work);
        snprintf(dirs[1], sizeof dirs[1], "%s/o0", t->work);
        snprintf(dirs[2], sizeof dirs[2], "%s/o1", t->work);
        for (int i = 0; i < 3; i++) mkdir(dirs[i], 0700);
        const char *serve = o->ort_serve ? o->ort_serve : ts_fuzz_ort_default_serve();
        if (ts_fuzz_ort_open(serve, o->ort_log, &t->ort, err)) {
            ts_status st = err->code;
            ts_fuzz_target_close(t);
            return st;
        }
    }
    *out = t;
    return TS_OK;
}

void ts_fuzz_target_close(ts_fuzz_target *t)
{
    if (!t) return;
    ts_fuzz_ort_close(t->ort);
    ts_fuzz_target_set_files(t, NULL, NULL);
    if (t->work[0]) remove_tree(t->work, 0);
    free(t);
}

/* --------------------------------------------------------------- runtime */

/* The planted bug (tests only): a copy of g in which Add and Mul read the
 * input of a 2-D Transpose of a square matrix instead of its result, as a
 * fused path that forgot the transpose would compute.  Shapes still fit,
 * so only the values are wrong: a silent mis-compilation. */
static ts_graph *plant_transpose_add(const ts_graph *g)
{
    ts_graph *c = ts_graph_copy(g);
    if (!c) return NULL;
    for (int i = 0; i < c->nnodes; i++) {
        ts_node *n = &c->nodes[i];
        if (n->dead || (n->op != &ts_op_add && n->op != &ts_op_mul)) continue;
        for (int j = 0; j < n->ninputs; j++) {
            int p = n->inputs[j] >= 0 ? c->values[n->inputs[j]].producer : -1;
            if (p < 0 || c->nodes[p].op != &ts_op_transpose) continue;
            const ts_shape *s = &c->values[c->nodes[p].inputs[0]].shape;
            if (s->rank == 2 && s->dims[0] == s->dims[1]) n->inputs[j] = c->nodes[p].inputs[0];
        }
    }
    return c;
}

/* The planted bug "relu-abs" (tests only): every Relu computes Abs, as a
 * kernel with a wrong sign test would.  Wrong on both graphs of a pair
 * alike, so the pair's oracle is blind to it; the reference interpreter's
 * is not. */
static ts_graph *plant_relu_abs(const ts_graph *g)
{
    ts_graph *c = ts_graph_copy(g);
    for (int i = 0; c && i < c->nnodes; i++)
        if (!c->nodes[i].dead && c->nodes[i].op == &ts_op_relu) c->nodes[i].op = &ts_op_abs;
    return c;
}

/* A crash of the runtime is a finding, not the end of the campaign:
 * SIGSEGV, SIGBUS, SIGFPE or SIGILL raised on the campaign's thread while a
 * plan is built or run jumps back to run_runtime, which reports it as an
 * error ("the runtime crashed"); that plan's memory is leaked.  A signal on
 * another thread (an OpenMP worker) still ends the process, as before. */
static sigjmp_buf crash_jmp;
static volatile sig_atomic_t crash_armed;
static pthread_t crash_thread;
static const int CRASH_SIGNALS[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};

static void on_crash(int sig)
{
    if (crash_armed && pthread_equal(pthread_self(), crash_thread)) {
        crash_armed = 0;
        siglongjmp(crash_jmp, sig);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Builds and runs g's plan, a crash caught. */
static ts_status plan_guarded(ts_fuzz_target *t, const ts_graph *g, ts_tensor *const *in, ts_tensor **out,
                              ts_error *err)
{
    struct sigaction sa = {.sa_handler = on_crash, .sa_flags = SA_NODEFER}, old[4];
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; i++) sigaction(CRASH_SIGNALS[i], &sa, &old[i]);
    crash_thread = pthread_self();
    ts_plan *volatile p = NULL;
    volatile ts_status st = TS_OK;
    int sig = sigsetjmp(crash_jmp, 1);
    if (sig) {
        st = ts_error_set(err, TS_ERR_UNSUPPORTED, "the runtime crashed (%s)", strsignal(sig));
    } else {
        crash_armed = 1;
        /* the graph rewrites users get by default (ts_graph_opt ALL: CSE,
         * pool before 1x1 conv, GELU and LayerNorm fusion, ...) run first, as
         * in a session or `tsopt run`: they are part of the runtime under
         * test (the graph keeps its inputs and outputs) */
        ts_graph *rw = ts_graph_copy(g);
        if (!rw) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        else if (ts_graph_opt_apply(rw, TS_GRAPH_OPT_ALL, err) < 0) st = err->code;
        ts_plan *pl = NULL;
        ts_plan_opts po = {0};
        if (!st) st = ts_plan_build(rw, &po, &pl, err);
        p = pl;
        if (!st && t->cover) t->fresh += ts_fuzz_cover_plan(t->cover, pl);
        if (!st) st = ts_plan_run(pl, in, out, err);
        crash_armed = 0;
        ts_plan_free(pl);
        ts_graph_free(rw);
        p = NULL;
    }
    (void)p;
    for (int i = 0; i < 4; i++) sigaction(CRASH_SIGNALS[i], &old[i], NULL);
    return st;
}

/* Runs g with the fast runtime; out[i] made here (unref them). */
static ts_status run_runtime(ts_fuzz_target *t, const ts_graph *g, ts_tensor *const *in, ts_tensor **out,
                             ts_error *err)
{
    for (int i = 0; i < g->noutputs; i++) out[i] = NULL;
    ts_graph *planted = NULL;
    if (plant_is(t, "transpose-add") || plant_is(t, "relu-abs")) {
        if (!(planted = plant_is(t, "relu-abs") ? plant_relu_abs(g) : plant_transpose_add(g)))
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        g = planted;
    }
    ts_status st = TS_OK;
    for (int i = 0; i < g->noutputs && !st; i++) {
        const ts_value *v = &g->values[g->outputs[i]];
        if (!(out[i] = ts_tensor_new(v->dtype, &v->shape, err))) st = err->code;
    }
    if (!st) st = plan_guarded(t, g, in, out, err);
    ts_graph_free(planted);
    return st;
}

/* A finding that is a crash says so as its oracle. */
static void crash_oracle(ts_fuzz_verdict *v)
{
    if (v->kind == TS_FUZZ_ERROR && strstr(v->what, "the runtime crashed")) snprintf(v->oracle, sizeof v->oracle, "crash");
}

static void unref_all(ts_tensor **t, int n)
{
    for (int i = 0; t && i < n; i++) {
        ts_tensor_unref(t[i]);
        t[i] = NULL;
    }
}

/* ------------------------------------------------------------------ ORT */

static ts_status save_model(const char *path, const ts_graph *g, ts_error *err)
{
    ts_onnx_save_opts so = {.static_dims = true};
    return ts_onnx_save_with(g, path, &so, err);
}

/* Runs g in ORT: the model and its inputs written to the work folder. */
static ts_status run_ort(ts_fuzz_target *t, const ts_graph *g, int side, ts_tensor *const *in, ts_tensor **out,
                         bool *target_failed, ts_error *err)
{
    char model[4200], dir_in[600], dir_out[600], path[1400];
    for (int i = 0; i < g->noutputs; i++) out[i] = NULL;
    *target_failed = false;
    snprintf(dir_in, sizeof dir_in, "%s/in", t->work);
    snprintf(dir_out, sizeof dir_out, "%s/o%d", t->work, side);
    if (t->files[side]) {
        snprintf(model, sizeof model, "%s", t->files[side]);
    } else {
        snprintf(model, sizeof model, "%s/%s.onnx", t->work, side ? "variant" : "original");
        if (save_model(model, g, err)) return err->code;
    }
    for (int i = 0; i < g->ninputs; i++) {
        char stem[300];
        ts_name_sanitize(g->values[g->inputs[i]].name, stem, sizeof stem);
        snprintf(path, sizeof path, "%s/%s.npy", dir_in, stem);
        if (ts_npy_save(path, in[i], err)) return err->code;
    }
    for (int i = 0; i < g->noutputs; i++) { /* no stale output can pass for a new one */
        char stem[300];
        ts_name_sanitize(g->values[g->outputs[i]].name, stem, sizeof stem);
        snprintf(path, sizeof path, "%s/%s.npy", dir_out, stem);
        remove(path);
    }
    ts_status st = ts_fuzz_ort_run(t->ort, model, dir_in, dir_out, err);
    if (st == TS_ERR_UNSUPPORTED || st == TS_ERR_IO) {
        *target_failed = true;
        return st;
    }
    if (st) return st;
    for (int i = 0; i < g->noutputs; i++) {
        char stem[300];
        ts_name_sanitize(g->values[g->outputs[i]].name, stem, sizeof stem);
        snprintf(path, sizeof path, "%s/%s.npy", dir_out, stem);
        if (ts_npy_load(path, &out[i], err)) {
            *target_failed = true;
            return ts_error_prefix(err, "output '%s' of ORT", g->values[g->outputs[i]].name);
        }
    }
    return TS_OK;
}

/* --------------------------------------------------------------- judging */

/* Filters, then compares the first nroots outputs.  Returns true when the
 * verdict is no longer a pass. */
static bool judge(const ts_fuzz_target *t, const ts_graph *go, const ts_graph *gv, int nroots, ts_tensor **oo,
                  ts_tensor **ov, const char *stage, ts_fuzz_verdict *v)
{
    char why[128];
    for (int side = 0; side < 2; side++) {
        const ts_graph *g = side ? gv : go;
        ts_tensor **o = side ? ov : oo;
        for (int i = 0; i < g->noutputs; i++)
            if (ts_fuzz_unstable(o[i], &t->o.tol, why, sizeof why)) {
                v->kind = TS_FUZZ_FILTERED;
                snprintf(v->stage, sizeof v->stage, "%s", stage);
                snprintf(v->what, sizeof v->what, "%s output '%s': %s", side ? "variant" : "original",
                         g->values[g->outputs[i]].name, why);
                return true;
            }
    }
    ts_fuzz_tol tol = ts_fuzz_tol_for(&t->o.tol, go);
    for (int i = 0; i < nroots; i++) {
        ts_fuzz_diff d;
        ts_fuzz_compare(oo[i], ov[i], &tol, &d);
        if (d.scaled > 1 && (v->kind != TS_FUZZ_MISMATCH || d.scaled > v->diff.scaled)) {
            v->kind = TS_FUZZ_MISMATCH;
            v->output = i;
            v->diff = d;
        }
    }
    if (v->kind != TS_FUZZ_MISMATCH) return false;
    snprintf(v->stage, sizeof v->stage, "%s", stage);
    const ts_fuzz_diff *d = &v->diff;
    char a[160], b[160];
    if (d->at < 0)
        snprintf(v->what, sizeof v->what, "output %d ('%s'): %s %s against %s %s", v->output,
                 go->values[go->outputs[v->output]].name, ts_dtype_name(oo[v->output]->dtype),
                 ts_shape_str(&oo[v->output]->shape, a, sizeof a), ts_dtype_name(ov[v->output]->dtype),
                 ts_shape_str(&ov[v->output]->shape, b, sizeof b));
    else
        snprintf(v->what, sizeof v->what,
                 "output %d ('%s') differs: |a-b| = %.6g at element %lld (original %.6g, variant %.6g), "
                 "%.3g times the tolerance %g + %g * max(|a|, |b|, %.4g)",
                 v->output, go->values[go->outputs[v->output]].name, d->abs, (long long)d->at, d->a, d->b, d->scaled,
                 tol.atol, tol.rtol, d->scale);
    return true;
}

static ts_tensor *to_f64(const ts_tensor *x, ts_error *err)
{
    ts_tensor *y = ts_tensor_new(TS_F64, &x->shape, err);
    if (!y) return NULL;
    for (int64_t k = 0, n = ts_tensor_numel(x); k < n; k++) ts_tensor_set_f64(y, k, ts_tensor_get_f64(x, k));
    return y;
}

/* The float64 reference outputs of g (out: g->noutputs, made here). */
static ts_status run_f64(const ts_graph *g, ts_tensor *const *in, ts_tensor **out, ts_error *err)
{
    ts_tensor **in64 = calloc((size_t)g->ninputs + 1, sizeof *in64);
    if (!in64) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    ts_status st = TS_OK;
    for (int i = 0; i < g->ninputs && !st; i++)
        if (!(in64[i] = to_f64(in[i], err))) st = err->code;
    for (int i = 0; i < g->noutputs; i++) out[i] = NULL;
    if (!st) st = ts_graph_run_reference(g, TS_DOMAIN_F64, in64, out, err);
    unref_all(in64, g->ninputs);
    free(in64);
    return st;
}

/* Whether the target's float32 output got differs from the float64
 * reference ref beyond the tolerance. */
static bool off_reference(const ts_fuzz_target *t, const ts_tensor *ref, const ts_tensor *got)
{
    if (got->dtype != TS_F32 || !ts_shape_eq(&ref->shape, &got->shape)) return true;
    ts_tensor *r32 = ts_tensor_new(TS_F32, &ref->shape, &(ts_error){0});
    if (!r32) return true;
    for (int64_t j = 0, n = ts_tensor_numel(r32); j < n; j++) ts_tensor_set_f64(r32, j, ts_tensor_get_f64(ref, j));
    ts_fuzz_diff d;
    ts_fuzz_compare(r32, got, &t->o.tol, &d);
    ts_tensor_unref(r32);
    return d.scaled > 1;
}

/* Which side of a mismatch is wrong, by the float64 reference interpreter.
 * oo: the target's outputs of the original; og: those of the graph compared
 * with it, the variant (gx NULL) or the optimizer's result gx of the
 * variant.  "pair": the original and the variant already differ there (a
 * wrong rewrite rule of the fuzzer, not the target); "rewrite": the
 * optimizer's graph computes something else (a wrong rewrite of the
 * optimizer); else which of the target's runs is off its graph's
 * reference: "original", "variant" (or "optimized"), "both", "neither". */
static void blame(const ts_fuzz_target *t, const ts_graph *go, const ts_graph *gv, const ts_graph *gx,
                  ts_tensor *const *in_o, ts_tensor *const *in_v, ts_tensor **oo, ts_tensor **og, ts_fuzz_verdict *v)
{
    int k = v->output;
    const ts_graph *gc = gx ? gx : gv;
    ts_tensor **ro = calloc((size_t)go->noutputs + 1, sizeof *ro), **rv = calloc((size_t)gv->noutputs + 1, sizeof *rv),
              **rx = calloc((size_t)gc->noutputs + 1, sizeof *rx);
    ts_error e = {0};
    ts_fuzz_diff d;
    if (!ro || !rv || !rx || run_f64(go, in_o, ro, &e) || run_f64(gv, in_v, rv, &e) ||
        (gx && run_f64(gx, in_v, rx, &e))) {
        snprintf(v->wrong, sizeof v->wrong, "unknown");
        goto done;
    }
    ts_fuzz_compare(ro[k], rv[k], &t->o.tol, &d);
    if (d.scaled > 1) {
        snprintf(v->wrong, sizeof v->wrong, "pair");
        goto done;
    }
    const ts_tensor *rc = gx ? rx[k] : rv[k];
    if (gx) {
        ts_fuzz_compare(ro[k], rc, &t->o.tol, &d);
        if (d.scaled > 1) {
            snprintf(v->wrong, sizeof v->wrong, "rewrite");
            goto done;
        }
    }
    bool bad_o = off_reference(t, ro[k], oo[k]), bad_c = off_reference(t, rc, og[k]);
    snprintf(v->wrong, sizeof v->wrong, "%s",
             bad_o && bad_c ? "both" : bad_o ? "original" : bad_c ? (gx ? "optimized" : "variant") : "neither");
done:
    if (ro) unref_all(ro, go->noutputs);
    if (rv) unref_all(rv, gv->noutputs);
    if (rx && gx) unref_all(rx, gx->noutputs);
    free(ro), free(rv), free(rx);
}

static void set_error(ts_fuzz_verdict *v, const char *stage, const char *side, const ts_error *e)
{
    v->kind = TS_FUZZ_ERROR;
    snprintf(v->stage, sizeof v->stage, "%s", stage);
    snprintf(v->what, sizeof v->what, "%.40s: %.590s", side, e->msg);
}

/* The optimizer on the variant, then the runtime on its result, judged
 * against the runtime's outputs of the original. */
static ts_status check_optimizer(ts_fuzz_target *t, const ts_graph *go, const ts_graph *gv, int nroots,
                                 ts_tensor *const *in_o, ts_tensor *const *in_v, ts_tensor **oo, uint64_t seed,
                                 ts_fuzz_verdict *v, ts_error *err)
{
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.budget = t->o.opt_budget;
    o.time_limit = 0;
    o.roofline = true;
    o.no_timing = true;
    o.min_gain = 0;
    o.seed = seed & 0x7fffffff;
    o.cost_cache = t->cost_cache;
    ts_optimize_result res = {0};
    ts_error e = {0};
    if (ts_optimize(gv, &o, &res, &e)) {
        if (e.code == TS_ERR_NOMEM) return *err = e, e.code;
        set_error(v, "optimizer", "optimizing the variant", &e);
        /* the optimizer's own final check caught a wrong rewrite */
        if (strstr(e.msg, "differs from the original")) v->kind = TS_FUZZ_MISMATCH;
        snprintf(v->oracle, sizeof v->oracle, "optimizer");
        return TS_OK;
    }
    const ts_graph *gx = res.graph;
    v->optimized = res.optimized;
    ts_graph *planted = NULL; /* the test plant in the optimizer's result only */
    if (plant_is(t, "optimizer-transpose-add") && !(gx = planted = plant_transpose_add(res.graph))) {
        ts_optimize_result_free(&res);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    ts_tensor **ox = calloc((size_t)gx->noutputs + 1, sizeof *ox);
    ts_status st = TS_OK;
    if (!ox) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    } else if (gx->ninputs != gv->ninputs || gx->noutputs != gv->noutputs) {
        v->kind = TS_FUZZ_ERROR;
        snprintf(v->stage, sizeof v->stage, "optimizer");
        snprintf(v->what, sizeof v->what, "the optimized variant has %d inputs and %d outputs, the variant %d and %d",
                 gx->ninputs, gx->noutputs, gv->ninputs, gv->noutputs);
    } else if (run_runtime(t, gx, in_v, ox, &e)) {
        if (e.code == TS_ERR_NOMEM) st = (*err = e, e.code);
        else set_error(v, "optimizer", "running the optimized variant", &e);
    } else if (judge(t, go, gx, nroots, oo, ox, "optimizer", v) && v->kind == TS_FUZZ_MISMATCH) {
        blame(t, go, gv, gx, in_o, in_v, oo, ox, v);
    }
    if (v->kind != TS_FUZZ_PASS) snprintf(v->oracle, sizeof v->oracle, "optimizer");
    if (ox) unref_all(ox, gx->noutputs);
    free(ox);
    ts_graph_free(planted);
    ts_optimize_result_free(&res);
    return st;
}

ts_status ts_fuzz_target_check(ts_fuzz_target *t, const ts_graph *go, const ts_graph *gv, int nroots,
                               ts_tensor *const *inputs, uint64_t seed, ts_fuzz_verdict *v, ts_error *err)
{
    memset(v, 0, sizeof *v);
    v->output = -1;
    v->diff.at = -1;
    if (nroots > go->noutputs || nroots > gv->noutputs)
        return ts_error_set(err, TS_ERR_INVALID, "pair: %d common outputs, but the graphs have %d and %d", nroots,
                            go->noutputs, gv->noutputs);
    ts_tensor **in_v = calloc((size_t)gv->ninputs + 1, sizeof *in_v);
    ts_tensor **oo = calloc((size_t)go->noutputs + 1, sizeof *oo), **ov = calloc((size_t)gv->noutputs + 1, sizeof *ov);
    ts_status st = TS_OK;
    if (!in_v || !oo || !ov) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (!st) st = ts_fuzz_inputs_by_name(gv, go, inputs, in_v, err);
    if (st) {
        free(in_v), free(oo), free(ov);
        return st;
    }
    ts_error e = {0};
    const char *stage = t->o.kind == TS_FUZZ_TARGET_ORT ? "ort" : "runtime";
    if (t->o.kind == TS_FUZZ_TARGET_TSOPT) pick_eop_cc(t, seed);
    if (t->o.kind == TS_FUZZ_TARGET_ORT) {
        bool failed = false;
        if (run_ort(t, go, 0, inputs, oo, &failed, &e) || run_ort(t, gv, 1, in_v, ov, &failed, &e)) {
            if (failed) set_error(v, stage, oo[0] || !go->noutputs ? "variant" : "original", &e);
            else st = (*err = e, e.code);
        }
    } else {
        if (run_runtime(t, go, inputs, oo, &e)) set_error(v, stage, "original", &e);
        else if (run_runtime(t, gv, in_v, ov, &e)) set_error(v, stage, "variant", &e);
        if (v->kind == TS_FUZZ_ERROR && e.code == TS_ERR_NOMEM) st = (*err = e, e.code);
    }
    if (!st && v->kind == TS_FUZZ_PASS && judge(t, go, gv, nroots, oo, ov, stage, v) && v->kind == TS_FUZZ_MISMATCH)
        blame(t, go, gv, NULL, inputs, in_v, oo, ov, v);
    if (v->kind != TS_FUZZ_PASS) snprintf(v->oracle, sizeof v->oracle, "pair");
    crash_oracle(v);
    if (!st && v->kind == TS_FUZZ_PASS && t->o.kind == TS_FUZZ_TARGET_TSOPT && t->o.optimizer)
        st = check_optimizer(t, go, gv, nroots, inputs, in_v, oo, seed, v, err);
    ts_ein_set_compiler(NULL);
    unref_all(in_v, gv->ninputs);
    unref_all(oo, go->noutputs);
    unref_all(ov, gv->noutputs);
    free(in_v), free(oo), free(ov);
    return st;
}

/* ------------------------------------------------------ runtime seeds */

/* Compares got (the target's) with want of another storage (the float64
 * reference's, or the target's on another graph), in got's dtype; true
 * when an output differs (v filled as a mismatch). */
static bool differs(const ts_fuzz_target *t, const ts_graph *g, ts_tensor **want, ts_tensor **got, ts_fuzz_verdict *v)
{
    ts_fuzz_tol tol = ts_fuzz_tol_for(&t->o.tol, g);
    for (int i = 0; i < g->noutputs; i++) {
        ts_tensor *w = want[i];
        if (w->dtype != got[i]->dtype && ts_shape_eq(&w->shape, &got[i]->shape)) {
            if (!(w = ts_tensor_new(got[i]->dtype, &got[i]->shape, &(ts_error){0}))) continue;
            for (int64_t k = 0, n = ts_tensor_numel(w); k < n; k++) ts_tensor_set_f64(w, k, ts_tensor_get_f64(want[i], k));
        } else {
            ts_tensor_ref(w);
        }
        ts_fuzz_diff d;
        ts_fuzz_compare(w, got[i], &tol, &d);
        ts_tensor_unref(w);
        if (d.scaled > 1 && (v->kind != TS_FUZZ_MISMATCH || d.scaled > v->diff.scaled)) {
            v->kind = TS_FUZZ_MISMATCH;
            v->output = i;
            v->diff = d;
        }
    }
    if (v->kind != TS_FUZZ_MISMATCH) return false;
    const ts_fuzz_diff *d = &v->diff;
    const ts_value *o = &g->values[g->outputs[v->output]];
    const char *op = o->producer >= 0 ? g->nodes[o->producer].op->name : "input";
    if (d->at < 0)
        snprintf(v->what, sizeof v->what, "output %d ('%s', of %s): shapes or dtypes differ", v->output, o->name, op);
    else
        snprintf(v->what, sizeof v->what,
                 "output %d ('%s', %s of %s) differs: |a-b| = %.6g at element %lld (expected %.6g, got %.6g), "
                 "%.3g times the tolerance",
                 v->output, o->name, ts_dtype_name(o->dtype), op, d->abs, (long long)d->at, d->a, d->b, d->scaled);
    return true;
}

static bool graph_unstable(const ts_fuzz_target *t, const ts_graph *g, ts_tensor **out, const char *what,
                           ts_fuzz_verdict *v)
{
    char why[128];
    for (int i = 0; i < g->noutputs; i++)
        if (out[i] && ts_fuzz_unstable(out[i], &t->o.tol, why, sizeof why)) {
            v->kind = TS_FUZZ_FILTERED;
            snprintf(v->what, sizeof v->what, "%s output '%s': %s", what, g->values[g->outputs[i]].name, why);
            return true;
        }
    return false;
}

/* The optimizer on g, then the runtime on its result against the
 * runtime's outputs og of g (ref: g's float64 reference outputs, to blame
 * the rewrite or the runtime). */
static ts_status graph_optimizer(ts_fuzz_target *t, const ts_graph *g, ts_tensor *const *in, ts_tensor **og,
                                 ts_tensor **ref, uint64_t seed, ts_fuzz_verdict *v, ts_error *err)
{
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    o.budget = t->o.opt_budget;
    o.time_limit = 0;
    o.roofline = true;
    o.no_timing = true;
    o.min_gain = 0;
    o.seed = seed & 0x7fffffff;
    o.cost_cache = t->cost_cache;
    ts_optimize_result res = {0};
    ts_error e = {0};
    snprintf(v->stage, sizeof v->stage, "optimizer");
    snprintf(v->oracle, sizeof v->oracle, "optimizer");
    if (ts_optimize(g, &o, &res, &e)) {
        if (e.code == TS_ERR_NOMEM) return *err = e, e.code;
        set_error(v, "optimizer", "optimizing the graph", &e);
        if (strstr(e.msg, "differs from the original")) v->kind = TS_FUZZ_MISMATCH;
        return TS_OK;
    }
    v->optimized = res.optimized;
    const ts_graph *gx = res.graph;
    ts_tensor **ox = calloc((size_t)gx->noutputs + 1, sizeof *ox), **rx = calloc((size_t)gx->noutputs + 1, sizeof *rx);
    ts_status st = TS_OK;
    if (!ox || !rx) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    } else if (!res.optimized) {
        /* the graph itself: nothing more to compare */
    } else if (gx->ninputs != g->ninputs || gx->noutputs != g->noutputs) {
        v->kind = TS_FUZZ_ERROR;
        snprintf(v->what, sizeof v->what, "the optimized graph has %d inputs and %d outputs, the graph %d and %d",
                 gx->ninputs, gx->noutputs, g->ninputs, g->noutputs);
    } else if (run_runtime(t, gx, in, ox, &e)) {
        if (e.code == TS_ERR_NOMEM) st = (*err = e, e.code);
        else set_error(v, "optimizer", "running the optimized graph", &e);
    } else if (!graph_unstable(t, gx, ox, "optimized", v) && differs(t, g, og, ox, v)) {
        ts_fuzz_verdict tmp = {0};
        bool rewrite = !run_f64(gx, in, rx, &e) && differs(t, g, ref, rx, &tmp);
        snprintf(v->wrong, sizeof v->wrong, "%s", rewrite ? "rewrite" : "optimized");
    }
    if (v->kind == TS_FUZZ_FILTERED) v->kind = TS_FUZZ_PASS; /* the graph itself was compared */
    if (ox) unref_all(ox, gx->noutputs);
    if (rx) unref_all(rx, gx->noutputs);
    free(ox), free(rx);
    ts_optimize_result_free(&res);
    return st;
}

ts_status ts_fuzz_target_check_graph(ts_fuzz_target *t, const ts_graph *g, ts_tensor *const *in, uint64_t seed,
                                     ts_fuzz_verdict *v, ts_error *err)
{
    memset(v, 0, sizeof *v);
    v->output = -1;
    v->diff.at = -1;
    if (t->o.kind != TS_FUZZ_TARGET_TSOPT) return ts_error_set(err, TS_ERR_INVALID, "runtime seeds need the tsopt target");
    pick_eop_cc(t, seed);
    ts_tensor **out = calloc((size_t)g->noutputs + 1, sizeof *out), **ref = calloc((size_t)g->noutputs + 1, sizeof *ref);
    ts_status st = TS_OK;
    ts_error e = {0};
    snprintf(v->stage, sizeof v->stage, "runtime");
    snprintf(v->oracle, sizeof v->oracle, "reference");
    if (!out || !ref) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    } else if (run_runtime(t, g, in, out, &e)) {
        if (e.code == TS_ERR_NOMEM) st = (*err = e, e.code);
        else set_error(v, "runtime", "running the graph", &e);
    } else if (run_f64(g, in, ref, &e)) {
        /* no reference (an operator without a float64 kernel): only the optimizer's oracle */
        if (e.code == TS_ERR_NOMEM) st = (*err = e, e.code);
        unref_all(ref, g->noutputs);
    } else if (!graph_unstable(t, g, out, "runtime", v) && !graph_unstable(t, g, ref, "reference", v) &&
               differs(t, g, ref, out, v)) {
        snprintf(v->wrong, sizeof v->wrong, "runtime");
    }
    /* the optimizer's oracle on one graph in four (by its seed): it costs
     * about six times the rest of a graph's check, and most seeds hold
     * little the optimizer rewrites */
    if (!st && v->kind == TS_FUZZ_PASS && t->o.optimizer && ref[0] && (seed >> 9) % 4 == 0)
        st = graph_optimizer(t, g, in, out, ref, seed, v, err);
    if (!st && v->kind == TS_FUZZ_PASS) v->stage[0] = v->oracle[0] = 0;
    crash_oracle(v);
    ts_ein_set_compiler(NULL);
    if (out) unref_all(out, g->noutputs);
    if (ref) unref_all(ref, g->noutputs);
    free(out), free(ref);
    return st;
}
