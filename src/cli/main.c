/* tsopt: command-line entry point; dispatches to one function per
 * subcommand (info.c, run.c, compare.c, ...). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"

static const char USAGE[] =
    "usage: tsopt COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  info MODEL [--input NAME:DIMS]...\n"
    "      opset, inputs, outputs, operator counts, parameters, GFLOPs\n"
    "  ops [--json]\n"
    "      supported operators, the opsets of each, the fast kernels that run it\n"
    "  run MODEL [--input NAME:DIMS]... [--inputs DIR] [--save-inputs DIR]\n"
    "            [--save-outputs DIR] [--iters N] [--seed S] [--reference]\n"
    "      run the model on .npy inputs (or seeded random ones)\n"
    "  bench MODEL [--input NAME:DIMS]... [--iters N] [--threads N] [--json]\n"
    "      latency of the fast runtime: median/min/max of N runs, plan and memory\n"
    "  profile MODEL [--input NAME:DIMS]... [--cache FILE] [--iters N] [--json]\n"
    "      measure every distinct fused op group into the cost cache; sum vs end-to-end\n"
    "  peak [--cache FILE] [--json]\n"
    "      the machine's measured peak GFLOP/s and GB/s (kept in the cost cache)\n"
    "  compare DIR_A DIR_B [--rtol R] [--atol A]\n"
    "      compare every .npy in DIR_A with DIR_B (exit 0 all match, 1 not, 2 error)\n"
    "  zoo list | zoo export NAME -o FILE.onnx [--batch N]\n"
    "      the seed papers' evaluation models, built in C\n"
    "  verify RULES [--timeout S] [--threads N] | verify --check-axioms | --redundancy\n"
    "      Z3 proof of every rule from TASO's operator axioms; checks of the axioms\n"
    "  generate -o RULES [--max-ops N] [--threads N] [--seed S]\n"
    "      TASO's substitution generator: enumerate, fingerprint, prune, write rules\n"
    "  optimize MODEL -o OUT.onnx [--alpha A] [--budget N] [--time-limit S] [--report R.md]\n"
    "      TASO's cost-based search over verified substitutions; checked before it is written\n"
    "  draw MODEL -o G.svg|G.png|G.dot [--diff ORIGINAL]\n"
    "      Graphviz picture of the graph; --diff highlights what optimization changed\n"
    "  fuzz --target tsopt|ort [--time S] [--seed N] [--save-pairs K] -o DIR [--json]\n"
    "      POLYJUICE: equivalent graph pairs from an e-graph, run on a target; mismatches minimized\n"
    "  help [COMMAND] | --version\n"
    "\n"
    "Tensor files are NumPy .npy, named after the tensor with every character\n"
    "outside [A-Za-z0-9._-] replaced by '_'.  --input NAME:D0xD1x... binds the\n"
    "shape of a graph input (dynamic dimensions must be bound).\n"
    "Sizes are checked before allocation against the memory available (and\n"
    "TSOPT_MEM_LIMIT=SIZE, e.g. 8G, a cap on what tsopt may hold).\n";

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
} command;

static const command COMMANDS[] = {
    {"info", cli_info},
    {"run", cli_run},
    {"compare", cli_compare},
    {"zoo", cli_zoo},
    {"generate", cli_generate},
    {"verify", cli_verify},
    {"bench", cli_bench},
    {"optimize", cli_optimize},
    {"profile", cli_profile},
    {"peak", cli_peak},
    {"draw", cli_draw},
    {"ops", cli_ops},
    {"fuzz", cli_fuzz},
};

int main(int argc, char **argv)
{
    /* OpenMP's idle threads: nothing to choose here, the runtime adapts
     * while it runs (src/measure/wait_policy.c) */
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        printf("tsopt %s\n", tsopt_version());
        return CLI_OK;
    }
    if (argc < 2) {
        fputs(USAGE, stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    cli_jit_register();
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        if (!strcmp(cmd, "help") && argc > 2) {
            for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
                if (!strcmp(argv[2], COMMANDS[i].name)) {
                    char *args[] = {argv[2], "--help", NULL};
                    return COMMANDS[i].fn(2, args);
                }
            return cli_error(CLI_USAGE, "unknown command '%s' (try 'tsopt help')", argv[2]);
        }
        fputs(USAGE, stdout);
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(cmd, COMMANDS[i].name)) return COMMANDS[i].fn(argc - 1, argv + 1);
    return cli_error(CLI_USAGE, "unknown command '%s' (try 'tsopt help')", cmd);
}
