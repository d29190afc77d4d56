/* tsopt draw: a picture of a model (ts_graph_draw, src/draw/). */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"

static const char USAGE[] =
    "usage: tsopt draw MODEL -o G.svg|G.png|G.dot [--diff ORIGINAL] [--input NAME:DIMS]...\n"
    "  a Graphviz picture of the model: one box per operator (op, name, output shape,\n"
    "  the shapes of the weights it reads); .svg and .png are made by Graphviz's dot\n"
    "  --diff ORIGINAL   MODEL is an optimized ORIGINAL: nodes the original does not\n"
    "                    have are highlighted, the ones it lost are listed\n";

int cli_draw(int argc, char **argv)
{
    const char *model = NULL, *out = NULL, *orig = NULL, *v;
    cli_binds binds = {0};
    int rc = CLI_USAGE;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            rc = CLI_OK;
            goto done;
        } else if (cli_opt(argc, argv, &i, "-o", &v) || cli_opt(argc, argv, &i, "--output", &v)) {
            if (!(out = v)) goto done;
        } else if (cli_opt(argc, argv, &i, "--diff", &v)) {
            if (!(orig = v)) goto done;
        } else if (cli_opt(argc, argv, &i, "--input", &v)) {
            if (!v || !cli_binds_add(&binds, v)) goto done;
        } else if (!cli_model_arg("draw", argv[i], &model)) {
            goto done;
        }
    }
    if (!model || !out) {
        cli_error(CLI_USAGE, "draw: expected MODEL and -o G.svg|G.png|G.dot (try 'tsopt draw --help')");
        goto done;
    }
    ts_graph *g = cli_load_model(model, &binds), *o = NULL;
    rc = CLI_FAIL;
    if (g && (!orig || (o = cli_load_model(orig, &binds)))) {
        ts_error err = {0};
        if (ts_graph_draw(g, o, out, &err)) rc = cli_error_from(err.code == TS_ERR_IO || err.code == TS_ERR_INVALID ? CLI_USAGE : CLI_FAIL, &err);
        else rc = CLI_OK;
    }
    ts_graph_free(o);
    ts_graph_free(g);
done:
    cli_binds_free(&binds);
    return rc;
}
