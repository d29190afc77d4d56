/* Sizes checked before allocation (src/exec/mem_check.c): the commands
 * that run a model check, before allocating its inputs, that its inputs and
 * outputs can fit in memory at all (ts_graph_mem_check): a huge --input
 * otherwise gets allocated and filled while the machine thrashes; and every
 * command checks a model file's size before the importer reads it. */
#include <stdio.h>
#include <sys/stat.h>
#include "cli/cli.h"

bool cli_mem_ok(const ts_graph *g)
{
    ts_error err = {0};
    if (!ts_graph_mem_check(g, &err)) return true;
    cli_error_from(CLI_FAIL, &err);
    return false;
}

/* A model file is read whole and unpacked before its weights become
 * tensors: a file larger than the memory left cannot load, and reading it
 * would only thrash. */
bool cli_mem_file_ok(const char *path)
{
    struct stat st;
    if (stat(path, &st) || !S_ISREG(st.st_mode)) return true; /* the importer names the problem */
    ts_error err = {0};
    char what[4200];
    snprintf(what, sizeof what, "loading %s (its file)", path);
    if (!ts_mem_check((size_t)st.st_size, what, &err)) return true;
    cli_error_from(CLI_FAIL, &err);
    return false;
}
