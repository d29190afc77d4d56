/* tsopt optimize: argument parsing and printing around ts_optimize (the
 * pipeline lives in src/opt/optimize.c, shared with C users and the Python
 * package). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "ir/meta.h"
#include "opt/report.h"
#include "onnx/model_copy.h"
#include "util/path.h"

static const char USAGE[] =
    "usage: tsopt optimize MODEL -o OUT.onnx [--transforms LIST] [--time-limit S] [--json] [--report R.md]\n"
    "                      [--rules FILE] [--alpha A] [--budget N] [--input NAME:DIMS]... [--seed S]\n"
    "                      [--cost-cache FILE] [--min-gain P] [--max-memory MB] [--cost-model M] [--no-timing]\n"
    "                      [--inputs DIR] [--external-data] [--allow-growth] [--target tsopt|ort] [--threads N]\n"
    "  --transforms L   transformation sources, comma-separated (default: all there are; known: %s)\n"
    "  --time-limit S   search time limit in seconds (default 30; the run ends within S + 15 s)\n"
    "  --json           print one JSON object (written, costs, latencies, applied, check, ...)\n"
    "  --report R.md    markdown report of the written graph: why it was written, costs, rewrites\n"
    "  --rules FILE     TASO rule file, used in both directions (default: the built-in core rules)\n"
    "  --alpha A        keep candidates costing less than A x the best (default 1.05; 1 = greedy)\n"
    "  --budget N       graphs taken from the search frontier at most (default 1000; 0 = no limit)\n"
    "  --seed S         seed of the random inputs of the final check (default 1)\n"
    "  --cost-cache F   op-cost cache (default $TSOPT_CACHE_DIR or ~/.cache/tsopt, one file per CPU)\n"
    "  --min-gain P     write the optimized graph only if it measures at least P percent faster\n"
    "                   than the original (default 3)\n"
    "  --max-memory MB  memory the search may hold (default 1536)\n"
    "  --cost-model M   measured (default: op groups timed on this machine, cached) or roofline\n"
    "                   (a fixed analytic estimate: the same search on every machine)\n"
    "  --no-timing      write the checked result on the cost model alone, without timing it\n"
    "  --inputs DIR     the whole-model check runs on DIR/NAME.npy (one per input, as 'tsopt run' reads them)\n"
    "                   instead of random inputs\n"
    "  --external-data  write the weights as external data (OUT.onnx.data beside OUT.onnx); automatic\n"
    "                   when the model would pass protobuf's 2 GiB limit\n"
    "  --allow-growth   write the result even when its weights grow by more than 10%% (folded constants)\n"
    "  --target T       the engine the model is optimized for: tsopt (default) or ort (ONNX Runtime: candidates,\n"
    "                   keep decision and final check timed and run there; tools/ort or $TSOPT_ORT_SERVE)\n"
    "  --threads N      threads of the target's runs (ort: intraOpNumThreads; default one per core)\n"
    "Ctrl-C ends the search and writes the best graph so far (checked); a second Ctrl-C aborts.\n";

static volatile int stop_flag;

static void on_sigint(int sig)
{
    if (stop_flag) { /* the second one aborts */
        signal(sig, SIG_DFL);
        raise(sig);
    }
    stop_flag = 1;
}

static void print_text(const char *model, const char *out, const ts_optimize_result *r)
{
    int total = 0;
    for (int k = 0; k < r->nsources; k++) total += r->applied[k].count;
    printf("optimize: %s -> %s: %s graph written: %s\n", model, out, r->optimized ? "optimized" : "original",
           r->reason);
    printf("optimize: cost %.3f -> %.3f ms, latency%s%s %.3f -> %.3f ms (%.2fx), %d rewrites",
           r->cost_before_ms,
           r->optimized ? r->cost_after_ms : r->cost_before_ms, r->engine_version[0] ? " in ONNX Runtime " : "",
           r->engine_version, r->latency_before_ms, r->latency_after_ms,
           r->latency_after_ms > 0 ? r->latency_before_ms / r->latency_after_ms : 1.0, total);
    for (int k = 0; k < r->nsources && total; k++) printf("%s%s %d", k ? ", " : " (", r->applied[k].name, r->applied[k].count);
    printf("%s, %d graphs explored, search %.1f s (%s), %.0f MiB peak\n", total ? ")" : "", r->explored, r->search_s,
           r->stop, r->peak_rss_mb);
}

int cli_optimize(int argc, char **argv)
{
    const char *model = NULL, *out = NULL, *report = NULL, *v;
    ts_optimize_opts o;
    ts_optimize_opts_default(&o);
    bool json = false;
    ts_onnx_save_opts save_opts = {0};
    cli_binds binds = {0};
    int rc = CLI_USAGE;
    long lv;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf(USAGE, ts_optimize_sources());
            cli_binds_free(&binds);
            return CLI_OK;
        }
        if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--no-timing")) {
            o.no_timing = true;
        } else if (!strcmp(argv[i], "--external-data")) {
            save_opts.external_data = true;
        } else if (!strcmp(argv[i], "--allow-growth")) {
            o.allow_growth = true;
        } else if (cli_opt(argc, argv, &i, "--inputs", &v)) {
            if (!(o.inputs_dir = v)) goto missing;
        } else if (cli_opt(argc, argv, &i, "--cost-model", &v)) {
            if (!v) goto missing;
            if (strcmp(v, "measured") && strcmp(v, "roofline")) {
                cli_error(CLI_USAGE, "--cost-model: expected 'measured' or 'roofline', got '%s'", v);
                goto fail;
            }
            o.roofline = !strcmp(v, "roofline");
        } else if (cli_opt(argc, argv, &i, "--target", &v)) {
            if (!(o.target = v)) goto missing;
        } else if (cli_opt(argc, argv, &i, "--threads", &v)) {
            if (!v) goto missing;
            if (!cli_parse_int("--threads", v, 1, 4096, &lv)) goto fail;
            o.threads = (int)lv;
        } else if (cli_opt(argc, argv, &i, "-o", &v) || cli_opt(argc, argv, &i, "--output", &v)) {
            if (!(out = v)) goto missing;
        } else if (cli_opt(argc, argv, &i, "--transforms", &v)) {
            if (!(o.transforms = v)) goto missing;
        } else if (cli_opt(argc, argv, &i, "--alpha", &v)) {
            if (!v) goto missing;
            if (!cli_parse_double("--alpha", v, &o.alpha)) goto fail;
            if (o.alpha < 1.0 || o.alpha > 10.0) {
                cli_error(CLI_USAGE, "--alpha: expected a number from 1 to 10, got '%s'", v);
                goto fail;
            }
        } else if (cli_opt(argc, argv, &i, "--budget", &v)) {
            if (!v) goto missing;
            if (!cli_parse_int("--budget", v, 0, 100000000, &lv)) goto fail;
            o.budget = (int)lv;
        } else if (cli_opt(argc, argv, &i, "--time-limit", &v)) {
            if (!v) goto missing;
            if (!cli_parse_double("--time-limit", v, &o.time_limit)) goto fail;
            if (o.time_limit < 0) {
                cli_error(CLI_USAGE, "--time-limit: expected seconds >= 0, got '%s'", v);
                goto fail;
            }
        } else if (cli_opt(argc, argv, &i, "--min-gain", &v)) {
            if (!v) goto missing;
            if (!cli_parse_double("--min-gain", v, &o.min_gain)) goto fail;
            if (o.min_gain >= 100) {
                cli_error(CLI_USAGE, "--min-gain: expected a percentage below 100, got '%s'", v);
                goto fail;
            }
        } else if (cli_opt(argc, argv, &i, "--max-memory", &v)) {
            if (!v) goto missing;
            if (!cli_parse_int("--max-memory", v, 64, 1 << 24, &lv)) goto fail;
            o.max_memory_mb = (double)lv;
        } else if (cli_opt(argc, argv, &i, "--report", &v)) {
            if (!(report = v)) goto missing;
        } else if (cli_opt(argc, argv, &i, "--rules", &v)) {
            if (!(o.rules_path = v)) goto missing;
        } else if (cli_opt(argc, argv, &i, "--cost-cache", &v)) {
            if (!(o.cost_cache = v)) goto missing;
        } else if (cli_opt(argc, argv, &i, "--seed", &v)) {
            if (!v) goto missing;
            if (!cli_parse_int("--seed", v, 0, 0x7fffffff, &lv)) goto fail;
            o.seed = (uint64_t)lv;
        } else if (cli_opt(argc, argv, &i, "--input", &v)) {
            if (!v) goto missing;
            if (!cli_binds_add(&binds, v)) goto fail;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error(CLI_USAGE, "optimize: unknown option '%s' (try 'tsopt optimize --help')", argv[i]);
            goto fail;
        } else if (!model) {
            model = argv[i];
        } else {
            cli_error(CLI_USAGE, "optimize: unexpected argument '%s'", argv[i]);
            goto fail;
        }
        continue;
    missing:
        cli_error(CLI_USAGE, "optimize: option '%s' needs a value", argv[i]);
        goto fail;
    }
    if (!model || !out) {
        cli_error(CLI_USAGE, "optimize: expected MODEL and -o OUT.onnx (try 'tsopt optimize --help')");
        goto fail;
    }
    /* everything that can be checked before the search is */
    ts_error err = {0};
    if (ts_optimize_opts_check(&o, &err)) {
        rc = cli_error_from(CLI_USAGE, &err);
        goto fail;
    }
    if (ts_path_check_writable("-o", out, &err) || (report && ts_path_check_writable("--report", report, &err))) {
        rc = cli_error_from(CLI_USAGE, &err);
        goto fail;
    }

    ts_optimize_result res = {0};
    rc = CLI_FAIL;
    /* the search runs at the sizes of --inputs' files when it is given */
    if (o.inputs_dir && !cli_binds_from_dir(&binds, model, o.inputs_dir, "optimize")) goto fail;
    ts_graph *g = cli_load_model(model, &binds);
    if (!g) goto fail;
    /* ort: the file as given is the original ORT times and a kept model's
     * bytes (not when bindings make the search's graph another model) */
    if (!binds.n) o.source_path = model;
    o.progress = true; /* stderr: a line in place on a terminal, plain lines in a log */
    o.stop = &stop_flag;
    struct sigaction sa = {.sa_handler = on_sigint}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    ts_status st = ts_optimize(g, &o, &res, &err);
    sigaction(SIGINT, &old, NULL);
    if (st) {
        rc = cli_error_from(CLI_FAIL, &err);
        goto done;
    }
    /* a kept model is the user's file unchanged, even with --external-data
     * (a file that holds its weights is under protobuf's 2 GB) */
    if ((res.copy_source ? ts_onnx_copy_model(res.graph, model, out, &err) : ts_onnx_save_with(res.graph, out, &save_opts, &err)) ||
        (report && ts_opt_report_write(report, model, out, g, &o, &res, &err))) {
        if (report) remove(out); /* written together or not at all */
        rc = cli_error_from(CLI_USAGE, &err);
        goto done;
    }
    /* one written model should serve every size the original did: when it
     * cannot, the user is told why (docs/decisions.md, "Symbolic dimensions
     * on export") */
    char why[1024];
    if (g->meta && g->meta->nsyms && !ts_onnx_keeps_symbolic(res.graph, why, sizeof why))
        fprintf(stderr, "optimize: note: '%s' is written at the sizes bound at load, not with the model's symbolic "
                        "dimensions: %s\n", out, why);
    char *js = json ? ts_optimize_result_json(&res, model, out) : NULL;
    if (js) puts(js);
    else print_text(model, out, &res);
    free(js);
    rc = CLI_OK;
done:
    ts_optimize_result_free(&res);
    ts_graph_free(g);
fail:
    cli_binds_free(&binds);
    return rc;
}
