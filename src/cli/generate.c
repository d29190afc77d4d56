/* tsopt generate: TASO's substitution generator (src/taso/gen*.c); prints
 * the counts of every stage as the paper's Table 3 and writes the rules. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "dist/dist.h"
#include "taso/gen.h"
#include "taso/verify.h"

static const char USAGE[] =
    "usage: tsopt generate -o RULES [--max-ops N] [--threads N] [--seed S] [--ops A,B,...]\n"
    "                      [--checkpoint DIR] [--no-verify]\n"
    "  enumerate TASO graphs of up to N operators (default 4), keep the\n"
    "  equivalent pairs that survive pruning, write them as a rule file;\n"
    "  --ops enumerates only those operators (atoms of docs/rules.md);\n"
    "  --checkpoint DIR keeps the enumeration's records in DIR as they are\n"
    "  made: the same command run again resumes from them;\n"
    "  every kept rule is then proved with tsopt verify's axioms and one that\n"
    "  is not is dropped, each printed with the reason (--no-verify: keep all)\n"
    "  (under mpirun -np N: spread over N processes, the same file;\n"
    "  docs/distributed.md)\n";

/* Proves every rule (tsopt verify's axioms, 10 s each) and drops the ones
 * not proved, printing each with Z3's reason: the file then holds proved
 * rules only (docs/taso.md, "Unproved 4-operator rules").  The number
 * dropped, or -1 when Z3 cannot be set up. */
static int drop_unproved(ts_rule *rules, int *n, int threads, ts_error *err)
{
    ts_rule_result *res = calloc((size_t)*n + 1, sizeof *res);
    if (!res) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return -1;
    }
    ts_verify_opts o = {.timeout_ms = 10000, .threads = threads};
    if (ts_verify_rules(rules, *n, &o, res, err)) {
        free(res);
        return -1;
    }
    int k = 0;
    for (int i = 0; i < *n; i++) {
        if (res[i].proof == TS_PROOF_PROVED) {
            rules[k++] = rules[i];
            continue;
        }
        char lhs[256], rhs[256];
        ts_rexpr_format(lhs, sizeof lhs, rules[i].lhs[0]);
        ts_rexpr_format(rhs, sizeof rhs, rules[i].rhs[0]);
        printf("dropped %s: not proved from the axioms %s%s: %s = %s\n", rules[i].name,
               res[i].proof == TS_PROOF_TIMEOUT ? "timed out: " : "", res[i].why, lhs, rhs);
        ts_rule_free(&rules[i]);
    }
    int dropped = *n - k;
    if (dropped) printf("dropped %d rules not proved from the axioms\n", dropped);
    *n = k;
    free(res);
    return dropped;
}

int cli_generate(int argc, char **argv)
{
    const char *outp = NULL, *val;
    bool verify = true;
    /* the stage lines are progress: on stderr, so stdout keeps the result */
    gen_config cfg = {.max_ops = 4, .threads = 2, .seed = 1, .progress = stderr};
    for (int i = 1; i < argc; i++) {
        long v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            return CLI_OK;
        } else if (cli_opt(argc, argv, &i, "-o", &val) || cli_opt(argc, argv, &i, "--output", &val)) {
            if (!val) return cli_error(CLI_USAGE, "generate: -o needs a file name");
            outp = val;
        } else if (cli_opt(argc, argv, &i, "--max-ops", &val)) {
            if (!val || !cli_parse_int("--max-ops", val, 1, GEN_MAX_OPS, &v)) return CLI_USAGE;
            cfg.max_ops = (int)v;
        } else if (cli_opt(argc, argv, &i, "--threads", &val)) {
            if (!val || !cli_parse_int("--threads", val, 1, 256, &v)) return CLI_USAGE;
            cfg.threads = (int)v;
        } else if (cli_opt(argc, argv, &i, "--checkpoint", &val)) {
            if (!val || !*val) return cli_error(CLI_USAGE, "generate: --checkpoint needs a folder");
            cfg.checkpoint = val;
        } else if (cli_opt(argc, argv, &i, "--ops", &val)) {
            if (!val || !*val) return cli_error(CLI_USAGE, "generate: --ops needs operator names (matmul,ewadd,...)");
            cfg.ops = val;
        } else if (!strcmp(argv[i], "--no-verify")) {
            verify = false;
        } else if (cli_opt(argc, argv, &i, "--seed", &val)) {
            if (!val || !cli_parse_int("--seed", val, 1, 1L << 30, &v)) return CLI_USAGE;
            cfg.seed = (uint64_t)v;
        } else {
            return cli_error(CLI_USAGE, "generate: unknown argument '%s' (try 'tsopt generate --help')", argv[i]);
        }
    }
    if (!outp) return cli_error(CLI_USAGE, "generate: -o RULES is required");
    /* under mpirun: one generation spread over the processes, the file
     * written by the first (src/dist/dist_gen.c) */
    bool root = ts_dist_start() == 1 || ts_dist_rank() == 0;
    cfg.dist = ts_dist_gen_hooks(cfg.threads);
    if (!root) cfg.progress = NULL;
    ts_rule *rules;
    int n;
    gen_stats st;
    ts_error err = {0};
    /* the stage lines are printed by the generator as each stage ends */
    if (ts_taso_generate(&cfg, &rules, &n, &st, &err)) return cli_error_from(CLI_FAIL, &err);
    if (!root) return CLI_OK;
    ts_dist_gen_report(stderr);
    int dropped = 0;
    /* several processes: the others wait, the first takes their cores */
    int threads = cfg.dist && cfg.dist->root_threads > cfg.threads ? cfg.dist->root_threads : cfg.threads;
    if (verify && (dropped = drop_unproved(rules, &n, threads, &err)) < 0) {
        ts_rules_free(rules, n);
        return cli_error_from(CLI_FAIL, &err);
    }
    char comment[1024];
    snprintf(comment, sizeof comment,
             "generated by: tsopt generate --max-ops %d --seed %llu%s%s -o %s\n"
             "TASO substitutions (docs/taso.md); %d rules%s",
             cfg.max_ops, (unsigned long long)cfg.seed, cfg.ops ? " --ops " : "", cfg.ops ? cfg.ops : "", outp, n,
             dropped ? " (the ones tsopt verify proves)" : "");
    ts_status s = ts_rules_write(outp, rules, n, comment, &err);
    ts_rules_free(rules, n);
    if (s) return cli_error_from(CLI_USAGE, &err);
    printf("kept %d rules\n", n);
    return CLI_OK;
}
