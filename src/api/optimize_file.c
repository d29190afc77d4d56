/* ts_optimize_file: `tsopt optimize SRC -o DST --json` as one library call
 * over ts_optimize, for callers that cannot fill C structs (the Python
 * package's tsopt.optimize).  The CLI keeps its own front end (signals,
 * report, printing); both run the same ts_optimize. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tsopt.h"
#include "onnx/model_copy.h"
#include "util/path.h"

static ts_status number(const char *key, const char *value, double *out, ts_error *err)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (!*value || *end || errno || !isfinite(v))
        return ts_error_set(err, TS_ERR_INVALID, "optimize option '%s': expected a number, got '%s'", key, value);
    *out = v;
    return TS_OK;
}

static ts_status flag(const char *key, const char *value, bool *out, ts_error *err)
{
    if (strcmp(value, "0") && strcmp(value, "1"))
        return ts_error_set(err, TS_ERR_INVALID, "optimize option '%s': expected 0 or 1, got '%s'", key, value);
    *out = value[0] == '1';
    return TS_OK;
}

ts_status ts_optimize_opts_set(ts_optimize_opts *o, const char *key, const char *value, ts_error *err)
{
    double v = 0;
    if (!strcmp(key, "transforms")) o->transforms = value;
    else if (!strcmp(key, "rules")) o->rules_path = value;
    else if (!strcmp(key, "cost_cache")) o->cost_cache = value;
    else if (!strcmp(key, "no_timing")) return flag(key, value, &o->no_timing, err);
    else if (!strcmp(key, "progress")) return flag(key, value, &o->progress, err);
    else if (!strcmp(key, "inputs")) o->inputs_dir = value;
    else if (!strcmp(key, "allow_growth")) return flag(key, value, &o->allow_growth, err);
    else if (!strcmp(key, "target")) o->target = value;
    else if (!strcmp(key, "threads")) {
        if (number(key, value, &v, err)) return err->code;
        if (v != floor(v) || v < 0 || v > 4096)
            return ts_error_set(err, TS_ERR_INVALID, "optimize option 'threads': expected a whole number from 0 to 4096, "
                                "got '%s'", value);
        o->threads = (int)v;
    }
    else if (!strcmp(key, "cost_model")) {
        if (strcmp(value, "measured") && strcmp(value, "roofline"))
            return ts_error_set(err, TS_ERR_INVALID, "optimize option 'cost_model': expected 'measured' or 'roofline', got '%s'",
                                value);
        o->roofline = !strcmp(value, "roofline");
    } else if (!strcmp(key, "time_limit")) return number(key, value, &o->time_limit, err);
    else if (!strcmp(key, "alpha")) return number(key, value, &o->alpha, err);
    else if (!strcmp(key, "min_gain")) return number(key, value, &o->min_gain, err);
    else if (!strcmp(key, "max_memory_mb")) return number(key, value, &o->max_memory_mb, err);
    else if (!strcmp(key, "budget") || !strcmp(key, "seed")) {
        if (number(key, value, &v, err)) return err->code;
        if (v != floor(v) || v < 0 || v > 2147483647.0)
            return ts_error_set(err, TS_ERR_INVALID, "optimize option '%s': expected a whole number >= 0, got '%s'", key,
                                value);
        if (!strcmp(key, "budget")) o->budget = (int)v;
        else o->seed = (uint64_t)v;
    } else
        return ts_error_set(err, TS_ERR_INVALID,
                            "unknown optimize option '%s' (known: time_limit, transforms, rules, alpha, budget, seed, "
                            "min_gain, max_memory_mb, cost_cache, cost_model, no_timing, progress, inputs, "
                            "allow_growth, external_data, target, threads)",
                            key);
    return TS_OK;
}

ts_status ts_optimize_file(const char *src, const char *dst, const ts_input_bind *binds, int nbinds,
                           const char *const *options, int noptions, char **json, ts_error *err)
{
    *json = NULL;
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    ts_onnx_save_opts so = {0};
    char key[64];
    for (int i = 0; i < noptions; i++) {
        const char *eq = strchr(options[i], '=');
        if (!eq || eq == options[i] || (size_t)(eq - options[i]) >= sizeof key)
            return ts_error_set(err, TS_ERR_INVALID, "optimize option '%s': expected key=value", options[i]);
        snprintf(key, sizeof key, "%.*s", (int)(eq - options[i]), options[i]);
        if (!strcmp(key, "external_data")) { /* how the result is written, not how it is made */
            if (flag(key, eq + 1, &so.external_data, err)) return err->code;
            continue;
        }
        if (ts_optimize_opts_set(&o, key, eq + 1, err)) return err->code;
    }
    if (ts_optimize_opts_check(&o, err) || ts_path_check_writable("optimize: output", dst, err)) return err->code;
    ts_graph *g = NULL;
    ts_optimize_result res = {0};
    /* the check inputs' files bind the symbolic dimensions binds leaves
     * free: the search runs at their sizes (docs/decisions.md, "Binding
     * symbolic dimensions") */
    ts_model_io *io = NULL;
    ts_input_bind *all = NULL;
    int nall = nbinds;
    ts_status st = TS_OK;
    if (o.inputs_dir && !ts_onnx_read_io(src, &io, &(ts_error){0})) {
        if (!(all = malloc(sizeof *all * (size_t)(nbinds + 1))))
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory binding the inputs of '%s'", src);
        else if (nbinds)
            memcpy(all, binds, sizeof *all * (size_t)nbinds);
        if (!st) st = ts_model_io_bind_dir(io, o.inputs_dir, &all, &nall, err);
    }
    if (!st) st = ts_onnx_load(src, all ? all : binds, nall, &g, err);
    free(all);
    ts_model_io_free(io);
    if (!nall) o.source_path = src; /* as the CLI: the file as ORT loads it */
    if (!st) st = ts_optimize(g, &o, &res, err);
    if (!st) st = res.copy_source ? ts_onnx_copy_model(res.graph, src, dst, err) : ts_onnx_save_with(res.graph, dst, &so, err);
    if (!st && !(*json = ts_optimize_result_json(&res, src, dst)))
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory writing the optimize result");
    ts_optimize_result_free(&res);
    ts_graph_free(g);
    return st;
}
