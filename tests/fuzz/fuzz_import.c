/* libFuzzer target: the ONNX importer must turn any byte string into either
 * a valid graph or one error, without crashing, leaking or reading out of
 * bounds.  Loaded from memory, so external data is refused (no file access). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "tsopt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ts_error err;
    memset(&err, 0, sizeof err);
    ts_graph *g = NULL;
    /* a bind exercises the dynamic-dimension path on inputs named "x" */
    ts_input_bind bind = {.name = "x", .shape = {.rank = 2, .dims = {2, 3}}};
    if (ts_onnx_load_buffer(data, size, NULL, NULL, 0, &g, &err) == TS_OK) {
        if (ts_graph_validate(g, &err) != TS_OK) __builtin_trap(); /* import promised a valid graph */
        ts_graph_free(g);
    }
    g = NULL;
    if (ts_onnx_load_buffer(data, size, NULL, &bind, 1, &g, &err) == TS_OK) ts_graph_free(g);
    return 0;
}
