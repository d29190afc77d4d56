/* tsopt zoo: list the built-in models, export one as ONNX. */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"

static const char USAGE[] =
    "usage: tsopt zoo list\n"
    "       tsopt zoo export NAME -o FILE.onnx [--batch N] [--layers N] [--steps N] [--seed S]\n";

static int zoo_list(void)
{
    printf("%-14s %-8s %12s %10s  %s\n", "name", "batches", "params", "GFLOPs", "model");
    const ts_zoo_model *m;
    for (int i = 0; (m = ts_zoo_at(i)); i++) {
        ts_zoo_opts o = {.batch = 1, .no_weights = true};
        ts_graph *g;
        ts_error err = {0};
        if (ts_zoo_build(m->name, &o, &g, &err)) return cli_error_from(CLI_FAIL, &err);
        ts_graph_stats st;
        ts_graph_stats_get(g, &st);
        printf("%-14s %-8s %12lld %10.3f  %s\n", m->name, "1,16", (long long)st.params, st.flops / 1e9, m->summary);
        ts_graph_free(g);
    }
    return CLI_OK;
}

static int zoo_export(int argc, char **argv)
{
    const char *name = NULL, *outp = NULL, *val;
    ts_zoo_opts o = {0};
    for (int i = 2; i < argc; i++) {
        long v;
        if (cli_opt(argc, argv, &i, "-o", &val) || cli_opt(argc, argv, &i, "--output", &val)) {
            if (!val) return cli_error(CLI_USAGE, "zoo export: -o needs a file name");
            outp = val;
        } else if (cli_opt(argc, argv, &i, "--batch", &val)) {
            if (!val || !cli_parse_int("--batch", val, 1, 4096, &v)) return CLI_USAGE;
            o.batch = (int)v;
        } else if (cli_opt(argc, argv, &i, "--layers", &val)) {
            if (!val || !cli_parse_int("--layers", val, 1, 1000, &v)) return CLI_USAGE;
            o.layers = (int)v;
        } else if (cli_opt(argc, argv, &i, "--steps", &val)) {
            if (!val || !cli_parse_int("--steps", val, 1, 10000, &v)) return CLI_USAGE;
            o.steps = (int)v;
        } else if (cli_opt(argc, argv, &i, "--seed", &val)) {
            if (!val || !cli_parse_int("--seed", val, 1, 2147483647L, &v)) return CLI_USAGE;
            o.seed = (uint64_t)v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_error(CLI_USAGE, "zoo export: unknown option '%s'", argv[i]);
        } else if (name) {
            return cli_error(CLI_USAGE, "zoo export: more than one model named ('%s')", argv[i]);
        } else {
            name = argv[i];
        }
    }
    if (!name || !outp) {
        fputs(USAGE, stderr);
        return CLI_USAGE;
    }
    ts_graph *g;
    ts_error err = {0};
    if (ts_zoo_build(name, &o, &g, &err)) return cli_error_from(CLI_FAIL, &err);
    ts_status st = ts_onnx_save(g, outp, &err);
    ts_graph_free(g);
    if (st) return cli_error_from(st == TS_ERR_IO ? CLI_USAGE : CLI_FAIL, &err);
    printf("wrote %s\n", outp);
    return CLI_OK;
}

int cli_zoo(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fputs(USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    if (!strcmp(argv[1], "list")) return argc == 2 ? zoo_list() : cli_error(CLI_USAGE, "zoo list takes no arguments");
    if (!strcmp(argv[1], "export")) return zoo_export(argc, argv);
    return cli_error(CLI_USAGE, "zoo: unknown subcommand '%s' (list or export)", argv[1]);
}
