/* Symbolic dimensions bound from the inputs the user gives: --inputs DIR's
 * .npy files are read against the model's declared inputs (read without
 * building the graph, ts_onnx_read_io) before the model is loaded, so the
 * load (and every size check in it) sees the files' sizes, not the
 * placeholder 1s of unbound dimensions (ts_model_io_bind_dir). */
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

bool cli_binds_from_dir(cli_binds *bs, const char *model, const char *dir, const char *cmd)
{
    ts_model_io *io = NULL;
    ts_error err = {0};
    /* an unreadable model is the load's to report, with its own message */
    if (ts_onnx_read_io(model, &io, &err)) return true;
    int n = bs->n;
    bool ok = !ts_model_io_bind_dir(io, dir, &bs->b, &bs->n, &err);
    if (!ok) cli_error(CLI_FAIL, "%s: %s", cmd, err.msg);
    /* the new binds' names point into io: cli_binds owns copies */
    for (int b = n; b < bs->n; b++)
        if (!(bs->b[b].name = strdup(bs->b[b].name))) {
            bs->n = b;
            ok = !cli_error(CLI_FAIL, "out of memory");
        }
    ts_model_io_free(io);
    return ok;
}
