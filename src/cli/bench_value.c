/* tsopt bench's model and inputs: the model at the bound sizes with random
 * inputs, or with --inputs DIR the tensors of DIR/NAME.npy; and a model
 * whose shapes depend on input values (a Loop's trip count, a Reshape's
 * shape given as an input: api/value_inputs.h) loaded at DIR's values, as
 * a `tsopt run` session loads it.  Bench then times that graph's plan like
 * any other: the values that fix the shapes are constants in it, so every
 * timed run computes the same thing (the session's per-run check of those
 * values is not part of the latency). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/value_inputs.h"
#include "cli/bench.h"

/* DIR/NAME.npy as input `name` of dtype dt; shape checked when want. */
static ts_tensor *load_one(const char *dir, const char *name, ts_dtype dt, const ts_shape *want)
{
    char path[4096], a[160], b[160];
    cli_npy_path(dir, name, path, sizeof path);
    ts_tensor *t = NULL;
    ts_error err = {0};
    if (ts_npy_load(path, &t, &err)) {
        cli_error(CLI_FAIL, "bench: --inputs: input '%s': %s", name, err.msg);
        return NULL;
    }
    if (!cli_npy_dtype_fits(t, dt) || (want && !ts_shape_eq(&t->shape, want))) {
        cli_error(CLI_FAIL, "bench: --inputs: input '%s': the model wants %s %s, '%s' holds %s %s", name,
                  ts_dtype_name(dt), want ? ts_shape_str(want, a, sizeof a) : "", path, ts_dtype_name(t->dtype),
                  ts_shape_str(&t->shape, b, sizeof b));
        ts_tensor_unref(t);
        return NULL;
    }
    return t;
}

static Onnx__ModelProto *read_model(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error(CLI_FAIL, "bench: cannot open model '%s'", path);
        return NULL;
    }
    uint8_t *bytes = NULL;
    long n = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    bool ok = n >= 0 && !fseek(f, 0, SEEK_SET) && (bytes = malloc((size_t)n + 1)) &&
              fread(bytes, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    Onnx__ModelProto *mp = ok ? onnx__model_proto__unpack(NULL, (size_t)n, bytes) : NULL;
    free(bytes);
    if (!mp || !mp->graph) {
        if (mp) onnx__model_proto__free_unpacked(mp, NULL);
        cli_error(CLI_FAIL, "bench: cannot read model '%s' as ONNX", path);
        return NULL;
    }
    return mp;
}

/* By value: every declared input from dir, the model loaded with those
 * that fix a shape as constants; *in (when given) the graph's inputs. */
static ts_graph *load_by_value(const char *path, const char *dir, ts_tensor ***in)
{
    Onnx__ModelProto *mp = read_model(path);
    ts_io_info *ins = NULL, *outs = NULL;
    bool *any_shape = NULL, *value_in = NULL;
    int nin = 0, nout = 0, *slot = NULL;
    ts_tensor **vals = NULL;
    ts_graph *g = NULL;
    ts_error err = {0};
    char *base = strdup(path), *slash = base ? strrchr(base, '/') : NULL;
    if (!mp || !base) goto done;
    if (slash) *slash = 0; /* external data is found beside the model */
    else strcpy(base, ".");
    if (ts_vin_io_infos(mp, &ins, &nin, &any_shape, &outs, &nout, &err)) {
        cli_error(CLI_FAIL, "bench: model '%s': %s", path, err.msg);
        goto done;
    }
    vals = calloc((size_t)nin + 1, sizeof *vals);
    value_in = calloc((size_t)nin + 1, sizeof *value_in);
    slot = calloc((size_t)nin + 1, sizeof *slot);
    if (!vals || !value_in || !slot) {
        cli_error(CLI_FAIL, "out of memory");
        goto done;
    }
    for (int i = 0; i < nin; i++)
        if (!(vals[i] = load_one(dir, ins[i].name, ins[i].dtype, NULL))) goto done;
    /* as the session does: each load that names a value feeding a shape
     * makes the inputs it is computed from constants, until one loads */
    for (;;) {
        char name[256];
        ts_error e2 = {0};
        if (!ts_vin_load(mp, base, ins, nin, value_in, vals, &g, slot, &e2)) break;
        if (!ts_vin_needs_value(&e2, name, sizeof name) || !ts_vin_mark_sources(mp, name, value_in)) {
            cli_error(CLI_FAIL, "bench: model '%s' at the sizes and values of --inputs %s: %s", path, dir, e2.msg);
            goto done;
        }
    }
    if (in) {
        if (!(*in = calloc((size_t)g->ninputs + 1, sizeof **in))) {
            cli_error(CLI_FAIL, "out of memory");
            ts_graph_free(g);
            g = NULL;
            goto done;
        }
        for (int k = 0; k < g->ninputs; k++) (*in)[k] = ts_tensor_ref(vals[slot[k]]);
    }
done:
    for (int i = 0; vals && i < nin; i++) ts_tensor_unref(vals[i]);
    free(vals);
    free(value_in);
    free(slot);
    free(ins);
    free(outs);
    free(any_shape);
    free(base);
    if (mp) onnx__model_proto__free_unpacked(mp, NULL);
    return g;
}

ts_graph *bench_load(const char *path, const cli_binds *binds, const char *inputs_dir, ts_tensor ***in)
{
    if (in) *in = NULL;
    if (!cli_mem_file_ok(path)) return NULL;
    ts_graph *g = NULL;
    ts_error err = {0};
    char name[256];
    if (ts_onnx_load(path, binds->b, binds->n, &g, &err)) {
        if (!ts_vin_needs_value(&err, name, sizeof name)) {
            if (strstr(err.msg, path)) cli_error_from(CLI_FAIL, &err);
            else cli_error(CLI_FAIL, "%s (%s)", err.msg, path);
            return NULL;
        }
        if (!inputs_dir) {
            cli_error(CLI_FAIL,
                      "bench: model '%s': its shapes depend on input values ('%s' feeds a shape): pass --inputs DIR "
                      "with one NAME.npy per input (as `tsopt run --save-inputs DIR` writes them)",
                      path, name);
            return NULL;
        }
        return load_by_value(path, inputs_dir, in);
    }
    if (!inputs_dir || !in) return g;
    if (!(*in = calloc((size_t)g->ninputs + 1, sizeof **in))) {
        cli_error(CLI_FAIL, "out of memory");
        ts_graph_free(g);
        return NULL;
    }
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        if (!((*in)[i] = load_one(inputs_dir, v->name, v->dtype, &v->shape))) {
            for (int k = 0; k < i; k++) ts_tensor_unref((*in)[k]);
            free(*in);
            *in = NULL;
            ts_graph_free(g);
            return NULL;
        }
    }
    return g;
}
