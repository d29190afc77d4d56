/* tsopt bench's pieces shared by its two forms: one model (bench.c) and
 * one model against another in the same process (bench_against.c).  The
 * timed runs of a model come in rounds of about BENCH_ROUND_MS, each
 * bracketed by the disturbance evidence of measure/rounds.c
 * (bench_rounds.c); the two forms differ only in which plan a round runs. */
#ifndef TS_CLI_BENCH_H
#define TS_CLI_BENCH_H

#include <stdbool.h>
#include "cli/cli.h"
#include "measure/rounds.h"

typedef struct bench_args {
    const char *model;
    const char *against; /* --against B.onnx, NULL: one model */
    const char *against_skip; /* --against-skip: what B's plan must not use besides --skip */
    const char *inputs;  /* --inputs DIR: the inputs (NAME.npy each), NULL: random */
    long iters, warmup, threads;
    long rounds;      /* --against: alternating rounds at least (even) */
    double min_time;  /* seconds */
    bool json;
    cli_binds binds;
    ts_plan_opts plan; /* --graph-opt, --skip (both models with --against) */
} bench_args;

/* A round of timed runs lasts about this long: long enough for the
 * tick-based counters (/proc/stat, 10 ms) to mean something, short enough
 * that a disturbance costs few runs. */
#define BENCH_ROUND_MS 50.0
/* Runs of one model at most with --min-time: bounds the time array. */
#define BENCH_MAX_RUNS 1000000L

/* One model's timed runs, in the order run, cut into rounds. */
typedef struct bench_runs {
    double *t; /* run times (ms) */
    long n, cap;
    double total_ms;
    ts_measure_sample *rs; /* per closed round: its evidence, median and fastest run */
    long *rfirst;          /* round r holds runs rfirst[r] .. rfirst[r + 1] - 1 */
    long nround, rcap;
    ts_measure_probe pa; /* taken when the open round began */
    double round_ms;     /* the open round's runs so far */
} bench_runs;

/* The runs of undisturbed rounds. */
typedef struct quiet_stats {
    long rounds, disturbed;   /* rounds of timed runs, and those thrown out */
    long runs;                /* runs in the undisturbed rounds */
    double median_ms, min_ms; /* over those runs; NAN when none */
    unsigned reasons;         /* TS_MEASURE_* of the disturbed rounds, or-ed */
} quiet_stats;

/* All return false only when out of memory. */
bool bench_runs_init(bench_runs *b, long cap);
void bench_runs_free(bench_runs *b);
/* A round begins (its probe is taken); runs added from now on belong to it. */
void bench_round_open(bench_runs *b);
/* Wall time of the open round's runs so far. */
double bench_round_ms(const bench_runs *b);
bool bench_runs_add(bench_runs *b, double ms);
/* Ends the open round: its evidence, median and fastest run. */
bool bench_round_close(bench_runs *b);
/* Judges the closed rounds (ts_measure_judge_runs: sets rs[r].flags) and
 * collects the runs of the undisturbed ones. */
bool bench_runs_quiet(bench_runs *b, int threads, quiet_stats *q);
/* Its two halves: the judging (flags), and the runs of unflagged rounds. */
void bench_runs_judge(bench_runs *b, int threads);
bool bench_runs_collect(const bench_runs *b, quiet_stats *q);
/* g's input tensors (when `in`), filled by cli_fill_random_input from
 * *rng, and its output tensors; false with the error printed. */
bool bench_io_new(const ts_graph *g, ts_tensor **in, ts_tensor **out, uint64_t *rng);
/* One timed run of p into *ms. */
ts_status bench_run_timed(ts_plan *p, ts_tensor *const *in, ts_tensor *const *out, double *ms, ts_error *err);

/* The single-model JSON object for `a->model`, every field of it, without
 * its closing brace when `open_end` (the caller appends fields and "}\n").
 * t: the n times sorted ascending, med their median. */
void bench_report_json(const bench_args *a, const ts_plan_opts *o, const ts_plan_stats *st, const double *t, long n,
                       double med, double build_ms, const quiet_stats *q, bool open_end);
void bench_json_string(const char *s);
extern const char *const BENCH_REASON_NAMES[5];

/* The model as bench times it (bench_value.c): loaded at binds; with
 * inputs_dir, *in (when in) receives the graph's inputs from DIR/NAME.npy,
 * and a model whose shapes depend on input values is loaded at DIR's
 * values (without inputs_dir it is refused, saying to pass --inputs).
 * NULL with the error printed. */
ts_graph *bench_load(const char *path, const cli_binds *binds, const char *inputs_dir, ts_tensor ***in);

/* tsopt bench A --against B (bench_against.c). */
int bench_against(const bench_args *a);

#endif
