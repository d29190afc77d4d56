/* Symbolic dimensions bound from the inputs the user gives: --inputs DIR's
 * .npy files are read against the model's declared inputs (read without
 * building the graph, ts_onnx_read_io) before the model is loaded, so the
 * load (and every size check in it) sees the files' sizes, not the
 * placeholder 1s of unbound dimensions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"

bool cli_binds_has(const cli_binds *bs, const char *name)
{
    for (int b = 0; b < bs->n; b++)
        if (!strcmp(bs->b[b].name, name)) return true;
    return false;
}

static bool add(cli_binds *bs, const char *name, const ts_shape *shape)
{
    ts_input_bind *nb = realloc(bs->b, sizeof *nb * (size_t)(bs->n + 1));
    char *n = nb ? strdup(name) : NULL;
    if (nb) bs->b = nb;
    if (!n) {
        cli_error(CLI_FAIL, "out of memory");
        return false;
    }
    bs->b[bs->n++] = (ts_input_bind){n, *shape};
    return true;
}

/* Whether t's rank and fixed dimensions are those declared. */
static bool fits(const ts_io_info *in, const ts_tensor *t)
{
    if (t->shape.rank != in->shape.rank) return false;
    for (int d = 0; d < t->shape.rank; d++)
        if (!in->dim_params[d] && t->shape.dims[d] != in->shape.dims[d]) return false;
    return true;
}

bool cli_binds_from_dir(cli_binds *bs, const char *model, const char *dir, const char *cmd)
{
    ts_model_io *io = NULL;
    ts_error err = {0};
    /* an unreadable model is the load's to report, with its own message */
    if (ts_onnx_read_io(model, &io, &err)) return true;
    bool ok = true;
    for (int i = 0; ok && i < io->ninputs; i++) {
        const ts_io_info *in = &io->inputs[i];
        bool symbolic = false;
        for (int d = 0; d < in->shape.rank; d++) symbolic |= in->dim_params[d] != NULL;
        if ((!symbolic && in->shape.rank >= 0) || cli_binds_has(bs, in->name)) continue;
        char path[4096], a[200], b[160];
        cli_npy_path(dir, in->name, path, sizeof path);
        ts_tensor *t = NULL;
        ts_error e = {0};
        if (ts_npy_load(path, &t, &e)) continue; /* the inputs' reader says what is wrong with it */
        if (in->shape.rank >= 0 && !fits(in, t)) {
            cli_error(CLI_FAIL, "%s: input '%s': the model wants %s %s, the file holds %s %s (%s)", cmd, in->name,
                      ts_dtype_name(in->dtype), ts_io_declared_str(in, a, sizeof a), ts_dtype_name(t->dtype),
                      ts_shape_str(&t->shape, b, sizeof b), path);
            ok = false;
        } else if (!add(bs, in->name, &t->shape)) {
            ok = false;
        }
        ts_tensor_unref(t);
    }
    ts_model_io_free(io);
    return ok;
}
