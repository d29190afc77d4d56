/* eOperators as ONNX model-local functions (function.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir/ir.h"
#include "ein/function.h"
#include "ein/instantiate.h"
#include "util/hash.h"

void ts_ein_function_name(const char *text, ts_dtype dt, char *buf, size_t n)
{
    uint64_t h = ts_hash_word(ts_hash_str(TS_HASH_SEED, text), (uint64_t)dt);
    snprintf(buf, n, "%s%016llx", TS_EIN_FUNCTION_PREFIX, (unsigned long long)h);
}

bool ts_ein_function_is_call(const char *domain, const char *op_type)
{
    return domain && op_type && !strcmp(domain, TS_EIN_DOMAIN) &&
           !strncmp(op_type, TS_EIN_FUNCTION_PREFIX, strlen(TS_EIN_FUNCTION_PREFIX));
}

ts_status ts_ein_function_body(const ts_ein *e, ts_dtype dt, int opset, ts_graph **out, ts_error *err)
{
    *out = NULL;
    if (!ts_ein_instantiable(e))
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "its expression has no form in standard operators");
    ts_graph *g = ts_graph_new("einnet-function", opset);
    if (!g) return ts_error_set(err, TS_ERR_NOMEM, "out of memory building an eOperator function");
    int ins[EIN_MAX_INPUTS], y = -1;
    for (int i = 0; i < e->ninputs; i++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", i);
        if ((ins[i] = ts_graph_add_input(g, name, dt, &e->in_shape[i], err)) < 0) goto fail;
    }
    if (ts_ein_instantiate(e, g, ins, "f", &y, err)) goto fail;
    if (g->values[y].producer < 0) { /* the output must be a node's: an Identity of an input */
        int id = -1;
        if (ts_graph_add_node(g, "Identity", "f.id", &y, 1, NULL, 0, 1, NULL, &id, err) < 0) goto fail;
        y = id;
    }
    free(g->values[y].name);
    if (!(g->values[y].name = ts_strdup("y"))) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory building an eOperator function");
        goto fail;
    }
    if (ts_graph_add_output(g, y, err) || ts_graph_validate(g, err)) goto fail;
    *out = g;
    return TS_OK;
fail:
    ts_graph_free(g);
    return err->code ? err->code : ts_error_set(err, TS_ERR_INVALID, "eOperator function: instantiation failed");
}
