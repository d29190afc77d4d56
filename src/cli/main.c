/* tsopt: command-line entry point; dispatches to one function per
 * subcommand (info.c, run.c, compare.c, ...). */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"

static const char USAGE[] =
    "usage: tsopt COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  info MODEL [--input NAME:DIMS]...\n"
    "      opset, inputs, outputs, operator counts, parameters, GFLOPs\n"
    "  run MODEL [--input NAME:DIMS]... [--inputs DIR] [--save-inputs DIR]\n"
    "            [--save-outputs DIR] [--iters N] [--seed S] [--reference]\n"
    "      run the model on .npy inputs (or seeded random ones)\n"
    "  compare DIR_A DIR_B [--rtol R] [--atol A]\n"
    "      compare every .npy in DIR_A with DIR_B (exit 0 all match, 1 not, 2 error)\n"
    "  zoo list | zoo export NAME -o FILE.onnx [--batch N]\n"
    "      the seed papers' evaluation models, built in C\n"
    "  help [COMMAND]\n"
    "\n"
    "Tensor files are NumPy .npy, named after the tensor with every character\n"
    "outside [A-Za-z0-9._-] replaced by '_'.  --input NAME:D0xD1x... binds the\n"
    "shape of a graph input (dynamic dimensions must be bound).\n";

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
} command;

static const command COMMANDS[] = {
    {"info", cli_info},
    {"run", cli_run},
    {"compare", cli_compare},
    {"zoo", cli_zoo},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(USAGE, stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
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
