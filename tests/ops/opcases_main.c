/* opcases: builds every single-op case, validates it and runs the
 * reference interpreter.  (Export for the ORT comparison is added by the
 * ONNX layer.)  Usage: opcases [FILTER] */
#include <string.h>
#include "opcase.h"

static int run_table(const opcase *t, const char *filter, int *failed)
{
    int n = 0;
    for (; t->name; t++) {
        if (filter && !strstr(t->name, filter)) continue;
        ts_error e = {0};
        ts_graph *g = t->build();
        if (ts_graph_validate(g, &e)) {
            printf("FAIL %s: %s\n", t->name, e.msg);
            ++*failed;
        }
        ts_graph_free(g);
        n++;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    int failed = 0, n = 0;
    n += run_table(opcases_nn, filter, &failed);
    n += run_table(opcases_math, filter, &failed);
    n += run_table(opcases_tensor, filter, &failed);
    printf("%d passed, %d failed\n", n - failed, failed);
    return failed != 0;
}
