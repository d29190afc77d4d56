/* The tsopt command: one file per subcommand, plus shared argument and
 * file-system helpers (args.c).  Exit codes: 0 success, 1 failure of the
 * work itself (bad model, failed comparison), 2 usage or I/O errors. */
#ifndef TS_CLI_CLI_H
#define TS_CLI_CLI_H

#include <stdbool.h>
#include "tsopt.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* libtcc as "tcc", compiling eOperators in this process (tcc_jit.c). */
void cli_jit_register(void);
int cli_info(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_compare(int argc, char **argv);
int cli_zoo(int argc, char **argv);
int cli_generate(int argc, char **argv);
int cli_verify(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_optimize(int argc, char **argv);
int cli_profile(int argc, char **argv);
/* tsopt profile MODEL --against-skip NAME,...: per-step A/B in one process (profile_ab.c) */
int cli_profile_ab(const ts_graph *g, const char *skip, long iters, bool use_min, bool json);
int cli_peak(int argc, char **argv);
int cli_draw(int argc, char **argv);
int cli_ops(int argc, char **argv);
int cli_fuzz(int argc, char **argv);

/* Prints "tsopt: <message>" on stderr (one line) and returns code. */
int cli_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints err's message the same way. */
int cli_error_from(int code, const ts_error *err);

/* Option parsing: argv[*i] is an option taking a value, given either as
 * "--opt VALUE" or "--opt=VALUE".  Returns true when argv[*i] names `opt`
 * (advancing *i past a separate value); *value is NULL when it is missing. */
bool cli_opt(int argc, char **argv, int *i, const char *opt, const char **value);
/* The command's one positional argument, MODEL: sets *model, or prints a
 * usage error (an unknown option, a second model) and returns false. */
bool cli_model_arg(const char *cmd, const char *arg, const char **model);
bool cli_parse_int(const char *opt, const char *text, long lo, long hi, long *out);
bool cli_parse_double(const char *opt, const char *text, double *out);
/* --graph-opt none|basic|all and --skip NAME,NAME (run, bench): sets o's
 * graph_opt / skip.  1: argv[*i] was one of them; 0: neither; -1: a usage
 * error (printed). */
int cli_plan_opt(int argc, char **argv, int *i, ts_plan_opts *o);
#define CLI_PLAN_OPT_USAGE                                                                            \
    "  --graph-opt L       graph optimization level: none, basic or all (default all; docs/runtime.md)\n" \
    "  --skip NAME,...     kernels or features the plan must not use (as $TSOPT_SKIP)\n"
/* Applies o's graph optimization level to g (before planning it with o);
 * false after printing the error. */
bool cli_graph_opt(ts_graph *g, const ts_plan_opts *o);

/* --input NAME:DIMS bindings (the name may itself contain ':'). */
typedef struct cli_binds {
    ts_input_bind *b;
    int n;
} cli_binds;
bool cli_binds_add(cli_binds *bs, const char *text);
bool cli_binds_has(const cli_binds *bs, const char *name);
void cli_binds_free(cli_binds *bs);

/* Output folder checks: the folder may be missing (it is created later by
 * cli_dir_make), but its parent must exist.  Checked before any work so a
 * bad path fails fast and leaves nothing behind. */
bool cli_dir_check(const char *opt, const char *dir);
bool cli_dir_make(const char *dir);
/* DIR/<sanitized name>.npy into buf. */
void cli_npy_path(const char *dir, const char *name, char *buf, size_t n);
/* true when t, read from a .npy file, holds an input of dtype want: the
 * same dtype, or '<u2' bits for bfloat16 (t's dtype then set to bfloat16;
 * src/cli/npy_dtype.c). */
bool cli_npy_dtype_fits(ts_tensor *t, ts_dtype want);

/* Loads MODEL with bindings; reports errors itself (returns NULL). */
ts_graph *cli_load_model(const char *path, const cli_binds *bs);
/* --inputs DIR binds the symbolic dimensions (bind.c): adds to bs, for each
 * input the model declares with one and bs does not bind, the shape of
 * DIR/<name>.npy.  A file whose rank or fixed dimensions disagree with the
 * declaration is one error line (cmd: the subcommand) and false. */
bool cli_binds_from_dir(cli_binds *bs, const char *model, const char *dir, const char *cmd);
/* False (error printed) when running g cannot fit in memory (mem.c). */
bool cli_mem_ok(const ts_graph *g);
/* False (error printed) when the model file is larger than the memory left. */
bool cli_mem_file_ok(const char *path);

/* Progress of long work on stderr (progress.c): a bar redrawn in place
 * when stderr is a terminal, else a plain line every tenth of the work. */
typedef struct cli_progress {
    const char *what, *unit; /* "verify", "rules" */
    long total;
    bool tty;
    double t0, last_ms;
    int tenth; /* plain lines: the last tenth printed */
} cli_progress;
void cli_progress_start(cli_progress *p, const char *what, const char *unit, long total);
void cli_progress_update(cli_progress *p, long done);
void cli_progress_end(cli_progress *p, long done);

/* Seeded random input values, the same in every subcommand that makes them
 * up: floats uniform in [-1, 1), integers in [0, 10] (so indices stay valid
 * for small tables), bools 0/1. */
void cli_fill_random_input(ts_tensor *t, uint64_t *rng);

#endif
