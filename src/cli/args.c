/* Helpers shared by the subcommands: error lines, option values,
 * --input bindings, output folders, timing, random inputs. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "cli/cli.h"

int cli_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tsopt: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int cli_error_from(int code, const ts_error *err)
{
    return cli_error(code, "%s", err->msg[0] ? err->msg : "unknown error");
}

bool cli_opt(int argc, char **argv, int *i, const char *opt, const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(opt);
    if (strncmp(a, opt, n)) return false;
    if (a[n] == '=') {
        *value = a + n + 1;
        return true;
    }
    if (a[n]) return false;
    *value = *i + 1 < argc ? argv[++*i] : NULL;
    if (!*value) cli_error(CLI_USAGE, "%s needs a value", opt);
    return true;
}

int cli_plan_opt(int argc, char **argv, int *i, ts_plan_opts *o)
{
    const char *val;
    if (cli_opt(argc, argv, i, "--skip", &val)) return val ? (o->skip = val, 1) : -1;
    if (!cli_opt(argc, argv, i, "--graph-opt", &val)) return 0;
    if (!val) return -1;
    ts_graph_opt l;
    if (!ts_graph_opt_parse(val, &l))
        return cli_error(CLI_USAGE, "--graph-opt wants none, basic or all, got '%s'", val), -1;
    o->graph_opt = l;
    return 1;
}

bool cli_graph_opt(ts_graph *g, const ts_plan_opts *o)
{
    ts_error err = {0};
    if (ts_graph_opt_apply(g, (ts_graph_opt)o->graph_opt, &err) >= 0) return true;
    cli_error(CLI_FAIL, "graph optimization (--graph-opt %s): %s", ts_graph_opt_name((ts_graph_opt)o->graph_opt), err.msg);
    return false;
}

bool cli_parse_int(const char *opt, const char *text, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || v < lo || v > hi) {
        cli_error(CLI_USAGE, "%s wants an integer in [%ld, %ld], got '%s'", opt, lo, hi, text);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_double(const char *opt, const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (!*text || *end || errno || !(v >= 0)) {
        cli_error(CLI_USAGE, "%s wants a non-negative number, got '%s'", opt, text);
        return false;
    }
    *out = v;
    return true;
}

bool cli_binds_add(cli_binds *bs, const char *text)
{
    /* Split at the last ':' since tensor names (TF exports) often contain ':'. */
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text) {
        cli_error(CLI_USAGE, "--input wants NAME:D0xD1x..., got '%s'", text);
        return false;
    }
    ts_input_bind b;
    ts_error err = {0};
    if (ts_shape_parse(colon + 1, &b.shape, &err)) {
        cli_error(CLI_USAGE, "--input '%s': %s", text, err.msg);
        return false;
    }
    char *name = strndup(text, (size_t)(colon - text));
    ts_input_bind *nb = realloc(bs->b, sizeof *nb * (size_t)(bs->n + 1));
    if (!name || !nb) {
        free(name);
        if (nb) bs->b = nb;
        cli_error(CLI_USAGE, "out of memory");
        return false;
    }
    for (int i = 0; i < bs->n; i++)
        if (!strcmp(nb[i].name, name)) { /* bs->b may be freed by the realloc */
            cli_error(CLI_USAGE, "--input '%s' is bound twice", name);
            free(name);
            bs->b = nb;
            return false;
        }
    b.name = name;
    bs->b = nb;
    bs->b[bs->n++] = b;
    return true;
}

void cli_binds_free(cli_binds *bs)
{
    for (int i = 0; i < bs->n; i++) free((char *)bs->b[i].name);
    free(bs->b);
    bs->b = NULL;
    bs->n = 0;
}

bool cli_dir_check(const char *opt, const char *dir)
{
    struct stat sb;
    if (!*dir) {
        cli_error(CLI_USAGE, "%s wants a folder name", opt);
        return false;
    }
    if (!stat(dir, &sb)) {
        if (S_ISDIR(sb.st_mode)) return true;
        cli_error(CLI_USAGE, "%s: exists and is not a folder (%s)", opt, dir);
        return false;
    }
    /* Missing: its parent must exist (we create one level, never a tree). */
    char *parent = strdup(dir);
    if (!parent) return false;
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/') parent[--n] = 0;
    char *slash = strrchr(parent, '/');
    if (!slash)
        strcpy(parent, ".");
    else if (slash == parent)
        parent[1] = 0;
    else
        *slash = 0;
    bool ok = !stat(parent, &sb) && S_ISDIR(sb.st_mode);
    if (!ok) cli_error(CLI_USAGE, "%s: parent folder does not exist (%s)", opt, parent);
    free(parent);
    return ok;
}

bool cli_dir_make(const char *dir)
{
    if (!mkdir(dir, 0777) || errno == EEXIST) return true;
    cli_error(CLI_USAGE, "cannot create folder: %s (%s)", strerror(errno), dir);
    return false;
}

void cli_npy_path(const char *dir, const char *name, char *buf, size_t n)
{
    char stem[1024];
    ts_name_sanitize(name, stem, sizeof stem);
    snprintf(buf, n, "%s/%s.npy", dir, stem);
}

ts_graph *cli_load_model(const char *path, const cli_binds *bs)
{
    ts_graph *g = NULL;
    ts_error err = {0};
    if (!cli_mem_file_ok(path)) return NULL;
    if (ts_onnx_load(path, bs->b, bs->n, &g, &err)) {
        if (strstr(err.msg, path))
            cli_error_from(CLI_FAIL, &err);
        else
            cli_error(CLI_FAIL, "%s (%s)", err.msg, path);
        return NULL;
    }
    return g;
}

void cli_fill_random_input(ts_tensor *t, uint64_t *rng)
{
    if (ts_dtype_is_float(t->dtype))
        ts_tensor_fill_random(t, rng, -1, 1);
    else if (t->dtype == TS_BOOL)
        ts_tensor_fill_random(t, rng, 0, 1);
    else
        ts_tensor_fill_random(t, rng, 0, 10);
}

bool cli_model_arg(const char *cmd, const char *arg, const char **model)
{
    if (arg[0] == '-' && arg[1])
        cli_error(CLI_USAGE, "%s: unknown option '%s' (try 'tsopt %s --help')", cmd, arg, cmd);
    else if (*model)
        cli_error(CLI_USAGE, "%s: more than one model given ('%s')", cmd, arg);
    else
        *model = arg;
    return *model == arg;
}
