/* tsopt info: what a model is (opset, inputs, outputs, operators, size, FLOPs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "ir/meta.h"
#include "ops/op.h"
#include "ops/opaque.h"
#include "ops/control_flow.h"

static const char USAGE[] = "usage: tsopt info MODEL [--input NAME:D0xD1x...]...\n";

typedef struct op_count {
    const char *name;
    int n;
} op_count;

static int by_count(const void *a, const void *b)
{
    const op_count *x = a, *y = b;
    if (x->n != y->n) return y->n - x->n;
    return strcmp(x->name, y->name);
}

/* Whether --input bound every input that has a symbolic dimension. */
static bool all_bound(const ts_graph *g, const cli_binds *bs)
{
    for (int i = 0; i < g->ninputs; i++)
        for (int d = 0; d < g->values[g->inputs[i]].shape.rank; d++)
            if (ts_graph_input_dim_param(g, i, d) && !cli_binds_has(bs, g->values[g->inputs[i]].name)) return false;
    return true;
}

/* Inputs or outputs with their symbolic dimensions by name, as the file
 * declares them ("[batch, 3, 224, 224]"), after the sizes the graph has
 * where --input bound them ("2x3x224x224 [batch, 3, 224, 224]"); fixed
 * shapes as "1x1000". */
static void print_values(const ts_graph *g, const char *title, const int *ids, int n, bool output,
                         const cli_binds *bs)
{
    printf("%s (%d):\n", title, n);
    for (int i = 0; i < n; i++) {
        const ts_value *v = &g->values[ids[i]];
        ts_io_info io = {.name = v->name, .dtype = v->dtype, .shape = v->shape};
        bool symbolic = false;
        for (int d = 0; d < v->shape.rank; d++) {
            io.dim_params[d] = output ? ts_graph_output_dim_param(g, i, d) : ts_graph_input_dim_param(g, i, d);
            symbolic |= io.dim_params[d] != NULL;
        }
        char buf[200], b[160];
        bool bound = output ? all_bound(g, bs) : cli_binds_has(bs, v->name);
        if (!symbolic)
            printf("  %-24s %-8s %s\n", v->name, ts_dtype_name(v->dtype), ts_shape_str(&v->shape, b, sizeof b));
        else
            printf("  %-24s %-8s %s%s%s\n", v->name, ts_dtype_name(v->dtype), bound ? ts_shape_str(&v->shape, b, sizeof b) : "",
                   bound ? " " : "", ts_io_declared_str(&io, buf, sizeof buf));
    }
}

/* Declared inputs or outputs of a model that was not built. */
static void print_declared(const char *title, const ts_io_info *v, int n)
{
    printf("%s (%d):\n", title, n);
    for (int i = 0; i < n; i++) {
        char buf[200];
        printf("  %-24s %-8s %s\n", v[i].name, ts_dtype_name(v[i].dtype), ts_io_declared_str(&v[i], buf, sizeof buf));
    }
}

/* The model does not build with its symbolic dimensions at the placeholder
 * 1 (a size check refuses 1): what the file declares, and why sizes are
 * needed.  false when that is not the case (err is the error to print). */
static bool print_unbound(const char *model, const ts_error *err)
{
    ts_model_io *io = NULL;
    ts_error e = {0};
    if (!strstr(err->msg, "unbound symbolic dimension") || ts_onnx_read_io(model, &io, &e)) return false;
    printf("model: %s\n", model);
    print_declared("inputs", io->inputs, io->ninputs);
    print_declared("outputs", io->outputs, io->noutputs);
    printf("graph: checked once its sizes are bound (--input NAME:DIMS); with them unbound: %s\n", err->msg);
    ts_model_io_free(io);
    return true;
}

/* Opaque nodes in g and, at any depth, in its control-flow bodies. */
static int count_opaque(const ts_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *nd = &g->nodes[i];
        ts_body *b[TS_CF_MAX_BODIES];
        int nb = nd->dead ? 0 : ts_cf_bodies(nd, b);
        n += !nd->dead && ts_node_is_opaque(nd);
        for (int k = 0; k < nb; k++) n += count_opaque(b[k]->g);
    }
    return n;
}

/* One line per opaque node; one inside a body is named by its path from
 * the top graph ("Loop_0/body/Custom_3"), each step a control-flow node
 * and the attribute holding the body. */
static void print_opaque_in(const ts_graph *g, const char *path)
{
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *nd = &g->nodes[i];
        if (nd->dead) continue;
        char what[256], name[1024];
        /* a path over 1 KB is cut (only its printing) */
        if (snprintf(name, sizeof name, "%s%s", path, nd->name) < 0) continue;
        if (ts_node_is_opaque(nd)) printf("  %-24s %s\n", name, ts_opaque_what(nd, what, sizeof what));
        ts_body *b[TS_CF_MAX_BODIES];
        int nb = ts_cf_bodies(nd, b);
        for (int k = 0; k < nb; k++) {
            char sub[1024];
            if (snprintf(sub, sizeof sub, "%s/%s/", name, ts_cf_body_attr_name(nd->op, k)) < 0) continue;
            print_opaque_in(b[k]->g, sub);
        }
    }
}

/* Nodes kept as the file has them (custom domains, unknown operators):
 * optimize works around them, run and bench cannot execute them. */
static void print_opaque(const ts_graph *g)
{
    int n = count_opaque(g);
    if (!n) return;
    printf("opaque nodes (%d, kept as they are; tsopt cannot execute them):\n", n);
    print_opaque_in(g, "");
}

/* Control-flow nodes and their bodies, nested ones indented. */
static int print_bodies(const ts_graph *g, int depth)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *nd = &g->nodes[i];
        ts_body *b[TS_CF_MAX_BODIES];
        int nb = nd->dead ? 0 : ts_cf_bodies(nd, b);
        if (!nb) continue;
        n++;
        printf("%*s%s '%s':\n", 2 * depth + 2, "", nd->op->name, nd->name);
        for (int k = 0; k < nb; k++) {
            printf("%*s%s '%s': %d nodes (%d with nested bodies), %d inputs, %d outputs", 2 * depth + 4, "",
                   ts_cf_body_attr_name(nd->op, k), b[k]->g->name, b[k]->g->nnodes, ts_body_count_nodes(b[k]),
                   b[k]->nformal, b[k]->g->noutputs);
            for (int j = 0; j < b[k]->ncap; j++) printf("%s%s", j ? ", " : ", reads ", b[k]->cap_name[j]);
            printf("\n");
            print_bodies(b[k]->g, depth + 2);
        }
    }
    return n;
}

static void print_control_flow(const ts_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !g->nodes[i].dead && ts_op_is_control_flow(g->nodes[i].op);
    if (!n) return;
    printf("control flow (%d nodes; bodies are graphs of their own):\n", n);
    print_bodies(g, 0);
}

int cli_info(int argc, char **argv)
{
    const char *model = NULL, *val;
    cli_binds bs = {0};
    int rc = CLI_USAGE;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            rc = CLI_OK;
            goto done;
        } else if (cli_opt(argc, argv, &i, "--input", &val)) {
            if (!val || !cli_binds_add(&bs, val)) goto done;
        } else if (!cli_model_arg("info", argv[i], &model)) {
            goto done;
        }
    }
    if (!model) {
        fputs(USAGE, stderr);
        goto done;
    }
    ts_graph *g = NULL;
    ts_error err = {0};
    if (!cli_mem_file_ok(model)) {
        rc = CLI_FAIL;
        goto done;
    }
    if (ts_onnx_load(model, bs.b, bs.n, &g, &err)) {
        rc = print_unbound(model, &err) ? CLI_OK
             : strstr(err.msg, model)   ? cli_error_from(CLI_FAIL, &err)
                                        : cli_error(CLI_FAIL, "%s (%s)", err.msg, model);
        goto done;
    }
    printf("model: %s\n", model);
    printf("opset: %d\n", g->opset);
    print_values(g, "inputs", g->inputs, g->ninputs, false, &bs);
    print_values(g, "outputs", g->outputs, g->noutputs, true, &bs);

    op_count *counts = calloc((size_t)g->nnodes + 1, sizeof *counts);
    int nkinds = 0;
    for (int i = 0; counts && i < g->nnodes; i++) {
        if (g->nodes[i].dead) continue;
        int k = 0;
        /* an opaque node by its own op_type (listed again below) */
        const char *kind = ts_node_is_opaque(&g->nodes[i]) ? ((const ts_opaque_attrs *)g->nodes[i].attrs)->op_type
                                                           : g->nodes[i].op->name;
        while (k < nkinds && strcmp(counts[k].name, kind)) k++;
        if (k == nkinds) counts[nkinds++].name = kind;
        counts[k].n++;
    }
    if (counts) qsort(counts, (size_t)nkinds, sizeof *counts, by_count);
    printf("operators (%d kinds):\n", nkinds);
    for (int k = 0; k < nkinds; k++) printf("  %-24s %d\n", counts[k].name, counts[k].n);
    free(counts);
    print_opaque(g);
    print_control_flow(g);

    ts_graph_stats st;
    ts_graph_stats_get(g, &st);
    printf("nodes: %d\n", st.nodes);
    printf("parameters: %lld (%.2f MB)\n", (long long)st.params, (double)st.param_bytes / 1e6);
    char syms[256] = "";
    if (g->meta && g->meta->nsyms) {
        /* statistics at the sizes the graph has: the placeholder 1s of what
         * --input did not bind */
        size_t k = 0;
        for (int i = 0; i < g->meta->nsyms && k < sizeof syms; i++) {
            const ts_meta_sym *s = &g->meta->syms[i];
            char unnamed[300];
            snprintf(unnamed, sizeof unnamed, "%s axis %d", g->meta->inputs[s->input].name, s->axis);
            k += (size_t)snprintf(syms + k, sizeof syms - k, "%s%s=%lld", i ? ", " : " (at ", s->name ? s->name : unnamed,
                                  (long long)s->bound);
        }
        if (k < sizeof syms) snprintf(syms + k, sizeof syms - k, ")");
    }
    printf("GFLOPs: %.3f%s\n", st.flops / 1e9, syms);
    ts_graph_free(g);
    rc = CLI_OK;
done:
    cli_binds_free(&bs);
    return rc;
}
