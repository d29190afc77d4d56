/* tsopt ops: every supported operator with the opsets it is implemented
 * for and the fast-runtime kernels that may run it, read from the operator
 * registry (src/ops/) and the kernel tables (src/exec/kernels.c): nothing
 * here names an operator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "exec/exec.h"
#include "ops/op.h"

static const char USAGE[] =
    "usage: tsopt ops [--json]\n"
    "  every ai.onnx operator tsopt supports, sorted by name: the opsets whose\n"
    "  version of it is implemented (\"7+\": opset 7 and every later one), its\n"
    "  input count, and the fast kernels tried for it, best first (any node\n"
    "  they decline runs the reference kernel, which every operator has)\n";

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const ts_op_desc *const *)a)->name, (*(const ts_op_desc *const *)b)->name);
}

/* tsopt-internal operators (dotted names such as tsopt.Opaque) are not
 * ONNX operators a model can use */
static bool is_onnx(const ts_op_desc *d) { return !strchr(d->name, '.'); }

static void opsets_str(const ts_op_desc *d, char *buf, size_t n)
{
    if (d->opset_min < 1) /* a descriptor that does not say (test_ops_opsets fails on it) */
        snprintf(buf, n, "?");
    else if (d->opset_max)
        snprintf(buf, n, "%d-%d", d->opset_min, d->opset_max);
    else
        snprintf(buf, n, "%d+", d->opset_min);
}

static void inputs_str(const ts_op_desc *d, char *buf, size_t n)
{
    if (d->max_inputs < 0)
        snprintf(buf, n, "%d+", d->min_inputs);
    else if (d->max_inputs == d->min_inputs)
        snprintf(buf, n, "%d", d->min_inputs);
    else
        snprintf(buf, n, "%d-%d", d->min_inputs, d->max_inputs);
}

int cli_ops(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            return CLI_OK;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else {
            return cli_error(CLI_USAGE, "ops: unexpected argument '%s' (try 'tsopt ops --help')", argv[i]);
        }
    }
    int n = 0;
    while (ts_op_at(n)) n++;
    const ts_op_desc **ds = malloc(sizeof *ds * ((size_t)n + 1));
    if (!ds) return cli_error(CLI_FAIL, "out of memory");
    int m = 0;
    for (int i = 0; i < n; i++)
        if (is_onnx(ts_op_at(i))) ds[m++] = ts_op_at(i);
    qsort(ds, (size_t)m, sizeof *ds, by_name);
    if (json)
        printf("{\"operators\": [");
    else
        printf("%-28s %-7s %-6s %s\n", "operator", "opsets", "inputs", "fast kernels");
    int fast = 0;
    for (int i = 0; i < m; i++) {
        const ts_op_desc *d = ds[i];
        const xkernel *buf[XKERNELS_MAX + 1];
        const xkernel *const *ks = xkernels_for(d, buf);
        char os[32], is[32];
        opsets_str(d, os, sizeof os);
        inputs_str(d, is, sizeof is);
        fast += ks[0] != NULL;
        if (json) {
            printf("%s\n  {\"name\": \"%s\", \"opset_min\": %d, \"opset_max\": ", i ? "," : "", d->name, d->opset_min);
            if (d->opset_max)
                printf("%d", d->opset_max);
            else
                printf("null");
            printf(", \"min_inputs\": %d, \"max_inputs\": %d, \"kernels\": [", d->min_inputs, d->max_inputs);
            for (int k = 0; ks[k]; k++) printf("%s\"%s\"", k ? ", " : "", ks[k]->name);
            printf("]}");
        } else {
            printf("%-28s %-7s %-6s ", d->name, os, is);
            if (!ks[0]) printf("ref");
            for (int k = 0; ks[k]; k++) printf("%s%s", k ? ", " : "", ks[k]->name);
            printf("\n");
        }
    }
    if (json)
        printf("\n], \"count\": %d, \"with_fast_kernel\": %d}\n", m, fast);
    else
        printf("%d operators, %d with a fast kernel (the others run the reference kernel)\n", m, fast);
    free(ds);
    return CLI_OK;
}
