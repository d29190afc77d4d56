/* src/api/: what a user of the installed library needs beyond the core
 * (docs/api.md): the version, ts_free for FFI callers, the declared
 * symbolic dimensions of a loaded graph (here); the session that re-plans
 * for new input sizes (session.c); optimize-a-file for FFI callers
 * (optimize_file.c).  The Python package (python/tsopt) is built on these. */
#include <stdlib.h>
#include <string.h>
#include "ir/meta.h"
#include "tsopt.h"

#ifndef TSOPT_VERSION_STRING
#error "TSOPT_VERSION_STRING comes from CMakeLists.txt's project() version (cmake/library.cmake)"
#endif

const char *tsopt_version(void) { return TSOPT_VERSION_STRING; }

void ts_free(void *p) { free(p); }

/* The file's record of graph input/output `name` (matched by name: the
 * optimizer keeps inputs' and outputs' names, not always value ids). */
static const ts_meta_io *meta_io(const ts_meta_io *ios, int n, const char *name)
{
    for (int k = 0; k < n; k++)
        if (ios[k].name && !strcmp(ios[k].name, name)) return &ios[k];
    return NULL;
}

static const char *dim_param(const ts_graph *g, bool output, int i, int d)
{
    if (!g || !g->meta || i < 0 || d < 0 || d >= TS_MAX_RANK) return NULL;
    if (i >= (output ? g->noutputs : g->ninputs)) return NULL;
    const ts_value *v = &g->values[output ? g->outputs[i] : g->inputs[i]];
    const ts_model_meta *m = g->meta;
    const ts_meta_io *io = output ? meta_io(m->outputs, m->noutputs, v->name) : meta_io(m->inputs, m->ninputs, v->name);
    if (!io || d >= io->rank || !io->dims[d].symbolic) return NULL;
    return io->dims[d].param ? io->dims[d].param : "";
}

const char *ts_graph_input_dim_param(const ts_graph *g, int i, int d) { return dim_param(g, false, i, d); }
const char *ts_graph_output_dim_param(const ts_graph *g, int i, int d) { return dim_param(g, true, i, d); }
