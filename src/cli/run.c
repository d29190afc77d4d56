/* tsopt run: runs a model on .npy (or seeded random) inputs, prints the
 * outputs and the time per run, optionally saves inputs and outputs.
 * By default it runs the fast runtime (a plan built once, src/exec/);
 * --reference runs the reference interpreter in float32 instead.
 * A model whose shapes follow the values of some inputs (a Loop's trip
 * count, a Reshape's shape fed as an input) runs through a session, which
 * loads it once those values are known (run_by_value). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/value_inputs.h"
#include "cli/cli.h"
#include "ir/ir.h"
#include "measure/rounds.h"
#include "util/clock.h"

static const char USAGE[] =
    "usage: tsopt run MODEL [--input NAME:D0xD1x...]... [--inputs DIR] [--save-inputs DIR]\n"
    "                 [--save-outputs DIR] [--iters N] [--seed S] [--reference]\n"
    "  --inputs DIR        read each input from DIR/<name>.npy (else seeded random:\n"
    "                      floats uniform in [-1, 1), integers in [0, 10], bools 0/1)\n"
    "  --save-inputs DIR   write the inputs used as .npy (folder created if missing)\n"
    "  --save-outputs DIR  write the outputs as .npy\n"
    "  --iters N           time N runs and print the median (default 1)\n"
    "  --seed S            seed of the random inputs (default 0)\n"
    "  --reference         use the reference interpreter (float32) instead of the fast runtime\n"
    CLI_PLAN_OPT_USAGE
    "A model whose shapes depend on input values (a Loop's trip count, a Reshape's shape given\n"
    "as an input) is loaded once the inputs are read, with those values (not with --reference).\n";

typedef struct run_args {
    const char *model, *inputs, *save_inputs, *save_outputs;
    long iters;
    unsigned long long seed;
    bool reference;
    cli_binds binds;
    ts_plan_opts plan; /* --graph-opt, --skip */
} run_args;

/* Returns CLI_OK, or the exit code after printing the error. */
static int parse(int argc, char **argv, run_args *a)
{
    const char *val;
    a->iters = 1;
    a->plan.release_packed_weights = true; /* g is needed after planning for names and shapes only */
    for (int i = 1; i < argc; i++) {
        int po;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            return -1;
        } else if ((po = cli_plan_opt(argc, argv, &i, &a->plan))) {
            if (po < 0) return CLI_USAGE;
        } else if (!strcmp(argv[i], "--reference")) {
            a->reference = true;
        } else if (cli_opt(argc, argv, &i, "--input", &val)) {
            if (!val || !cli_binds_add(&a->binds, val)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--inputs", &val)) {
            if (!(a->inputs = val)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--save-inputs", &val)) {
            if (!(a->save_inputs = val) || !cli_dir_check("--save-inputs", val)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--save-outputs", &val)) {
            if (!(a->save_outputs = val) || !cli_dir_check("--save-outputs", val)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--iters", &val)) {
            if (!val || !cli_parse_int("--iters", val, 1, 1000000, &a->iters)) return CLI_USAGE;
        } else if (cli_opt(argc, argv, &i, "--seed", &val)) {
            long s;
            if (!val || !cli_parse_int("--seed", val, 0, 2147483647L, &s)) return CLI_USAGE;
            a->seed = (unsigned long long)s;
        } else if (!cli_model_arg("run", argv[i], &a->model)) {
            return CLI_USAGE;
        }
    }
    if (!a->model) {
        fputs(USAGE, stderr);
        return CLI_USAGE;
    }
    /* the files' sizes bind the symbolic dimensions before the load checks any */
    if (a->inputs && !cli_binds_from_dir(&a->binds, a->model, a->inputs, "run")) return CLI_FAIL;
    return CLI_OK;
}

/* Input i from DIR, checked against the model's declaration. */
static ts_tensor *load_input(const ts_value *v, const char *dir)
{
    char path[4096], a[160], b[160];
    cli_npy_path(dir, v->name, path, sizeof path);
    ts_tensor *t = NULL;
    ts_error err = {0};
    if (ts_npy_load(path, &t, &err)) {
        cli_error(CLI_USAGE, "input '%s': %s", v->name, err.msg);
        return NULL;
    }
    if (!cli_npy_dtype_fits(t, v->dtype) || !ts_shape_eq(&t->shape, &v->shape)) {
        cli_error(CLI_FAIL, "input '%s': the model wants %s %s, the file holds %s %s (%s)", v->name,
                  ts_dtype_name(v->dtype), ts_shape_str(&v->shape, a, sizeof a), ts_dtype_name(t->dtype),
                  ts_shape_str(&t->shape, b, sizeof b), path);
        ts_tensor_unref(t);
        return NULL;
    }
    return t;
}

static ts_tensor *random_input(const ts_value *v, uint64_t *rng)
{
    ts_error err = {0};
    ts_tensor *t = ts_tensor_new(v->dtype, &v->shape, &err);
    if (!t) {
        cli_error(CLI_FAIL, "input '%s': %s", v->name, err.msg);
        return NULL;
    }
    cli_fill_random_input(t, rng);
    return t;
}

static bool save_all(const char *dir, const char *const *names, ts_tensor *const *ts, int n)
{
    if (!cli_dir_make(dir)) return false;
    for (int i = 0; i < n; i++) {
        char path[4096];
        ts_error err = {0};
        cli_npy_path(dir, names[i], path, sizeof path);
        if (ts_npy_save(path, ts[i], &err)) {
            cli_error_from(CLI_USAGE, &err);
            return false;
        }
    }
    return true;
}

static void print_output(const char *name, const ts_tensor *t)
{
    char buf[160];
    printf("output %s: %s %s [", name, ts_dtype_name(t->dtype), ts_shape_str(&t->shape, buf, sizeof buf));
    int64_t n = ts_tensor_numel(t), show = n < 6 ? n : 6;
    for (int64_t i = 0; i < show; i++) {
        if (ts_dtype_is_float(t->dtype))
            printf("%s%.6g", i ? ", " : "", ts_tensor_get_f64(t, i));
        else
            printf("%s%lld", i ? ", " : "", (long long)ts_tensor_get_i64(t, i));
    }
    printf("%s]\n", n > show ? ", ..." : "");
}

/* The fast runtime: one plan, outputs allocated once in their declared
 * dtypes, a.iters timed runs.  Returns CLI_OK or the exit code. */
static int run_fast(const ts_graph *g, const run_args *a, ts_tensor *const *in, ts_tensor **out, double *times)
{
    ts_error err = {0};
    ts_plan *plan = NULL;
    if (ts_plan_build(g, &a->plan, &plan, &err)) return cli_error_from(CLI_FAIL, &err);
    int rc = CLI_OK;
    for (int o = 0; o < g->noutputs && !rc; o++) {
        const ts_value *v = &g->values[g->outputs[o]];
        if (!(out[o] = ts_tensor_new(v->dtype, &v->shape, &err))) rc = cli_error_from(CLI_FAIL, &err);
    }
    for (long it = 0; it < a->iters && !rc; it++) {
        double t0 = ts_clock_ms();
        if (ts_plan_run(plan, in, out, &err)) rc = cli_error_from(CLI_FAIL, &err);
        times[it] = ts_clock_ms() - t0;
    }
    ts_plan_free(plan);
    return rc;
}

/* Input names then output names of g, for save_all. */
static const char **value_names(const ts_graph *g, int nin, int nout)
{
    const char **v = calloc((size_t)(nin + nout) + 1, sizeof *v);
    for (int i = 0; v && i < nin; i++) v[i] = g->values[g->inputs[i]].name;
    for (int o = 0; v && o < nout; o++) v[nin + o] = g->values[g->outputs[o]].name;
    return v;
}

/* The model at the bound sizes, as cli_load_model loads it; NULL with
 * *by_value set (nothing printed) when its shapes need the values of some
 * inputs, which only the run gives. */
static ts_graph *load(const run_args *a, bool *by_value)
{
    ts_graph *g = NULL;
    ts_error err = {0};
    char name[256];
    if (!cli_mem_file_ok(a->model)) return NULL;
    if (!ts_onnx_load(a->model, a->binds.b, a->binds.n, &g, &err)) {
        /* the reference interpreter runs the model as written */
        if (!a->reference && !cli_graph_opt(g, &a->plan)) ts_graph_free(g), g = NULL;
        return g;
    }
    if (ts_vin_needs_value(&err, name, sizeof name)) {
        *by_value = true;
        return NULL;
    }
    if (strstr(err.msg, a->model)) cli_error_from(CLI_FAIL, &err);
    else cli_error(CLI_FAIL, "%s (%s)", err.msg, a->model);
    return NULL;
}

/* By value: input i's shape, the declared one with --input's binding. */
static ts_shape by_value_shape(const run_args *a, const ts_io_info *in)
{
    for (int b = 0; b < a->binds.n; b++)
        if (!strcmp(a->binds.b[b].name, in->name)) return a->binds.b[b].shape;
    return in->shape;
}

/* A model whose shapes follow input values (value_inputs.h): the session
 * loads it with the values of the inputs that feed a shape as constants
 * (a Loop whose trip count is an input unrolled at that count,
 * loop_unroll.h), once per run's values; timed runs with the same values
 * reuse its plan.  Returns CLI_OK or the exit code. */
static int run_by_value(const run_args *a)
{
    if (a->reference)
        return cli_error(CLI_USAGE, "run: --reference cannot run model '%s': its shapes depend on input values "
                         "(the fast runtime loads it once they are known)", a->model);
    ts_session *s = NULL;
    ts_error err = {0};
    const ts_session_options so = {.graph_opt = a->plan.graph_opt, .skip = a->plan.skip};
    if (ts_session_open_with(a->model, &so, &s, &err)) return cli_error_from(CLI_FAIL, &err);
    int nin = ts_session_ninputs(s), nout = ts_session_noutputs(s), rc = CLI_FAIL;
    ts_tensor **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out);
    const char **names = calloc((size_t)(nin + nout) + 1, sizeof *names);
    double *times = calloc((size_t)a->iters, sizeof *times);
    uint64_t rng = 0x7501u + a->seed * 0x9e3779b97f4a7c15ull;
    if (!in || !out || !names || !times) {
        cli_error(CLI_FAIL, "out of memory");
        goto done;
    }
    for (int b = 0; b < a->binds.n; b++) {
        int i = 0;
        ts_io_info info;
        while (ts_session_input_info(s, i, &info) && strcmp(info.name, a->binds.b[b].name)) i++;
        if (i == nin) {
            cli_error(CLI_USAGE, "--input '%s': the model has no input of that name", a->binds.b[b].name);
            goto done;
        }
    }
    for (int i = 0; i < nin; i++) {
        ts_io_info info;
        ts_session_input_info(s, i, &info);
        names[i] = info.name;
        if (a->inputs) {
            char path[4096];
            cli_npy_path(a->inputs, info.name, path, sizeof path);
            if (ts_npy_load(path, &in[i], &err)) {
                cli_error(CLI_USAGE, "input '%s': %s", info.name, err.msg);
                goto done;
            }
            cli_npy_dtype_fits(in[i], info.dtype); /* the session checks the rest */
        } else {
            ts_shape sh = by_value_shape(a, &info);
            if (!(in[i] = ts_tensor_new(info.dtype, &sh, &err))) {
                cli_error(CLI_FAIL, "input '%s': %s", info.name, err.msg);
                goto done;
            }
            cli_fill_random_input(in[i], &rng);
        }
    }
    for (long it = 0; it < a->iters; it++) {
        for (int o = 0; o < nout; o++) {
            ts_tensor_unref(out[o]);
            out[o] = NULL;
        }
        double t0 = ts_clock_ms();
        if (ts_session_run(s, in, out, &err)) {
            cli_error_from(CLI_FAIL, &err);
            goto done;
        }
        times[it] = ts_clock_ms() - t0;
    }
    for (int o = 0; o < nout; o++) {
        ts_io_info info;
        ts_session_output_info(s, o, &info);
        names[nin + o] = info.name;
        print_output(info.name, out[o]);
    }
    /* the first run also loaded and planned the model: the median of one
     * run includes that */
    double med = ts_median(times, a->iters);
    printf("time: %.3f ms per run (median of %ld, fast runtime, loaded at the inputs' values)\n", med, a->iters);
    if (a->save_inputs && !save_all(a->save_inputs, names, in, nin)) goto done;
    if (a->save_outputs && !save_all(a->save_outputs, names + nin, out, nout)) goto done;
    rc = CLI_OK;
done:
    for (int i = 0; in && i < nin; i++) ts_tensor_unref(in[i]);
    for (int o = 0; out && o < nout; o++) ts_tensor_unref(out[o]);
    free(in);
    free(out);
    free(names);
    free(times);
    ts_session_free(s);
    return rc;
}

int cli_run(int argc, char **argv)
{
    run_args a = {0};
    int rc = parse(argc, argv, &a);
    if (rc) {
        cli_binds_free(&a.binds);
        return rc < 0 ? CLI_OK : rc;
    }
    rc = CLI_FAIL;
    bool by_value = false;
    ts_graph *g = load(&a, &by_value);
    if (by_value) {
        rc = run_by_value(&a);
        cli_binds_free(&a.binds);
        return rc;
    }
    ts_tensor **in = NULL, **dom = NULL, **out = NULL;
    const char **names = NULL;
    double *times = NULL;
    int nin = g ? g->ninputs : 0, nout = g ? g->noutputs : 0;
    if (!g || !cli_mem_ok(g)) goto done;
    in = calloc((size_t)nin + 1, sizeof *in);
    dom = calloc((size_t)nin + 1, sizeof *dom);
    out = calloc((size_t)nout + 1, sizeof *out);
    times = calloc((size_t)a.iters, sizeof *times);
    if (!in || !dom || !out || !times) {
        cli_error(CLI_FAIL, "out of memory");
        goto done;
    }
    const ts_num *num = ts_num_get(TS_DOMAIN_F32);
    uint64_t rng = 0x7501u + a.seed * 0x9e3779b97f4a7c15ull;
    ts_error err = {0};
    for (int i = 0; i < nin; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        in[i] = a.inputs ? load_input(v, a.inputs) : random_input(v, &rng);
        if (!in[i]) goto done;
        if (a.reference && !(dom[i] = ts_tensor_to_domain(in[i], num, &err))) {
            cli_error_from(CLI_FAIL, &err);
            goto done;
        }
    }
    if (!a.reference && run_fast(g, &a, in, out, times)) goto done;
    for (long it = 0; a.reference && it < a.iters; it++) {
        for (int o = 0; o < nout; o++) {
            ts_tensor_unref(out[o]);
            out[o] = NULL;
        }
        double t0 = ts_clock_ms();
        if (ts_graph_run_reference(g, TS_DOMAIN_F32, dom, out, &err)) {
            cli_error_from(CLI_FAIL, &err);
            goto done;
        }
        times[it] = ts_clock_ms() - t0;
    }
    /* Outputs back to their declared dtypes (float64 ran in float32). */
    for (int o = 0; o < nout; o++) {
        ts_tensor *c = ts_tensor_from_domain(out[o], g->values[g->outputs[o]].dtype, &err);
        if (!c) {
            cli_error_from(CLI_FAIL, &err);
            goto done;
        }
        ts_tensor_unref(out[o]);
        out[o] = c;
        print_output(g->values[g->outputs[o]].name, c);
    }
    double med = ts_median(times, a.iters);
    printf("time: %.3f ms per run (median of %ld, %s)\n", med, a.iters,
           a.reference ? "reference interpreter, float32" : "fast runtime");
    if ((a.save_inputs || a.save_outputs) && !(names = value_names(g, nin, nout))) {
        cli_error(CLI_FAIL, "out of memory");
        goto done;
    }
    if (a.save_inputs && !save_all(a.save_inputs, names, in, nin)) goto done;
    if (a.save_outputs && !save_all(a.save_outputs, names + nin, out, nout)) goto done;
    rc = CLI_OK;
done:
    for (int i = 0; i < nin; i++) {
        if (in) ts_tensor_unref(in[i]);
        if (dom) ts_tensor_unref(dom[i]);
    }
    for (int o = 0; o < nout; o++)
        if (out) ts_tensor_unref(out[o]);
    free(in);
    free(dom);
    free(out);
    free(times);
    free(names);
    ts_graph_free(g);
    cli_binds_free(&a.binds);
    return rc;
}
