/* The commands that run a model check, before allocating its inputs, that
 * its tensors can fit in memory at all (ts_graph_mem_check): a huge
 * --input otherwise gets allocated and filled while the machine thrashes. */
#include "cli/cli.h"

bool cli_mem_ok(const ts_graph *g)
{
    ts_error err = {0};
    if (!ts_graph_mem_check(g, &err)) return true;
    cli_error_from(CLI_FAIL, &err);
    return false;
}
