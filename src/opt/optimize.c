/* ts_optimize: the whole pipeline behind `tsopt optimize` and the Python
 * package -- sources opened, graph passes and search (driver.c), the best
 * graph checked against the original (check.c), both timed alternately
 * under a load watch (measure.c), and the keep decision: the measured
 * runtime has the last word, never the cost model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include "opt/check.h"
#include "opt/driver.h"
#include "opt/keep.h"
#include "opt/measure.h"
#include "opt/ort_target.h"
#include "ops/opaque.h"
#include "util/clock.h"
#include "util/mem_check.h"

/* Time left after the search for the check and the measurement: the whole
 * run ends within the time limit plus this. */
#define FINISH_S 15.0
/* ... and after an interrupt */
#define INTERRUPTED_S 3.0
/* ... of which the caller's writing of the model and report keeps this
 * (a 140 MB model such as GCN takes a second or two under load) */
#define WRITE_S 3.0

void ts_optimize_opts_default(ts_optimize_opts *o)
{
    *o = (ts_optimize_opts){.time_limit = 30, .alpha = 1.05, .budget = 1000, .seed = 1, .min_gain = 3,
                            .max_memory_mb = 1536};
}

/* msg cut to fit n bytes at a word boundary, "..." marking the cut: a
 * reason is one sentence, and a word cut in half reads as a typo. */
static const char *clip_words(const char *msg, char *buf, size_t n)
{
    size_t len = strlen(msg);
    if (len < n) return msg;
    size_t cut = n - 4;
    while (cut > 0 && msg[cut] != ' ') cut--;
    if (cut == 0) cut = n - 4;
    snprintf(buf, n, "%.*s...", (int)cut, msg);
    return buf;
}

/* Seconds the run has left after its search for the check and the
 * measurement: the whole run ends within the time limit plus FINISH_S,
 * writing included (60 without a limit). */
static double time_left(const ts_optimize_opts *o, double t0)
{
    return o->time_limit > 0 ? o->time_limit + FINISH_S - WRITE_S - (ts_clock_s() - t0) : 60;
}

/* Seconds the check may take of the check_left the run has: all of them
 * with a time limit, no bound without one.  TSOPT_CHECK_S caps it (tests:
 * a check that runs out of time on a small model). */
static double check_limit(const ts_optimize_opts *o, double check_left)
{
    double lim = o->time_limit > 0 ? check_left : 0;
    const char *cap = getenv("TSOPT_CHECK_S");
    double c = cap ? atof(cap) : 0;
    if (c > 0) lim = lim > 0 ? fmin(lim, c) : c;
    return lim;
}

static int live_nodes(const ts_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !g->nodes[i].dead;
    return n;
}

ts_status ts_optimize_opts_check(const ts_optimize_opts *o, ts_error *err)
{
    if (!(o->alpha >= 1.0 && o->alpha <= 10.0))
        return ts_error_set(err, TS_ERR_INVALID, "alpha: expected a number from 1 to 10, got %g", o->alpha);
    if (!(o->time_limit >= 0)) return ts_error_set(err, TS_ERR_INVALID, "time limit: expected seconds >= 0");
    if (o->budget < 0) return ts_error_set(err, TS_ERR_INVALID, "budget: expected a count >= 0");
    if (!(o->min_gain < 100)) return ts_error_set(err, TS_ERR_INVALID, "min gain: expected a percentage below 100");
    if (!(o->max_memory_mb >= 0)) return ts_error_set(err, TS_ERR_INVALID, "memory cap: expected MiB >= 0");
    if (o->target && strcmp(o->target, "tsopt") && strcmp(o->target, "ort"))
        return ts_error_set(err, TS_ERR_INVALID, "unknown target '%s' (known: tsopt, ort)", o->target);
    if (o->threads < 0 || o->threads > 4096)
        return ts_error_set(err, TS_ERR_INVALID, "threads: expected a count from 0 to 4096, got %d", o->threads);
    const ts_source *src[TS_OPT_MAX_SOURCES];
    int n;
    return ts_sources_select(o->transforms, src, &n, err);
}

/* Where nothing is timed, --min-gain applies to the prediction: the result
 * gains at least min_gain %, as keep.c reads it of measured rounds.  At
 * --min-gain 0 a graph predicted no slower is written: the search costs
 * graphs as the runtime runs them (level all, driver.c), so a fold the
 * runtime also makes at load (conv+BN) ties with the original, and the
 * file then carries it for engines that do not make it. */
static bool predicted_gain(const ts_drive_result *dr, double min_gain)
{
    return dr->cost_after <= dr->cost_before * (1 - min_gain / 100);
}

/* The measured keep decision for a checked result that differs from g. */
static ts_status decide(const ts_graph *g, const ts_drive_result *dr, const ts_optimize_opts *o, ts_ort_target *ort,
                        double budget_s, ts_tensor *const *user_in, ts_optimize_result *res, ts_error *err)
{
    if (o->no_timing) {
        /* --min-gain then applies to the prediction */
        res->optimized = predicted_gain(dr, o->min_gain);
        snprintf(res->reason, sizeof res->reason,
                 res->optimized ? "written on the cost model alone (timing off): %.3f -> %.3f ms predicted"
                                : "original kept: the cost model predicts less than --min-gain (%.3f -> %.3f ms; "
                                  "timing off)",
                 dr->cost_before, dr->cost_after);
        return TS_OK;
    }
    ts_measure_opts mo = {.min_rounds = 3, .max_rounds = 7, .budget_s = budget_s, .min_gain = o->min_gain,
                          .seed = o->seed, .inputs = user_in, .threads = o->threads};
    ts_measure_result mr;
    if (ort) {
        /* the whole graphs, alternating in one ORT process, decide (the
         * predictions only size the rounds) */
        if (ts_ort_target_pair(ort, g, dr->best, dr->cost_before, dr->cost_after, budget_s, o->min_gain, &mr, err))
            return err->code;
    } else if (ts_measure_pair(g, dr->best, &mo, &mr, err))
        return err->code;
    res->latency_before_ms = mr.median0_ms;
    res->latency_after_ms = mr.median1_ms;
    res->fastest_before_ms = mr.min0_ms;
    res->fastest_after_ms = mr.min1_ms;
    res->machine_busy = mr.busy;
    res->optimized = mr.faster && !mr.busy;
    if (mr.busy)
        snprintf(res->reason, sizeof res->reason, "original kept: the machine was too busy to measure (%s)", mr.why);
    else if (mr.rounds < mo.min_rounds) /* undecided: too few rounds fit in the time left */
        snprintf(res->reason, sizeof res->reason, "original kept: not measured (%s)", mr.why);
    else if (ort)
        snprintf(res->reason, sizeof res->reason,
                 "%s in ONNX Runtime, %d alternating rounds: result/original %.3f per round (95%% bound %.3f, "
                 "medians %.3f; fastest %.3f -> %.3f ms, median %.3f -> %.3f ms)",
                 res->optimized ? "optimized: faster" : "original kept: not shown faster by --min-gain", mr.rounds,
                 mr.ratio, mr.ratio_upper, mr.ratio_med, mr.min0_ms, mr.min1_ms, mr.median0_ms, mr.median1_ms);
    else if (res->optimized)
        snprintf(res->reason, sizeof res->reason,
                 "optimized: measured faster by at least %.3g%% (fastest %.3f -> %.3f ms, median %.3f -> %.3f ms, "
                 "%d alternating rounds%s)",
                 o->min_gain, mr.min0_ms, mr.min1_ms, mr.median0_ms, mr.median1_ms, mr.rounds,
                 ort ? " in ONNX Runtime" : "");
    else
        snprintf(res->reason, sizeof res->reason,
                 "original kept: the optimized graph did not measure faster by %.3g%% (fastest %.3f -> %.3f ms, "
                 "median %.3f -> %.3f ms, %d alternating rounds%s)",
                 o->min_gain, mr.min0_ms, mr.min1_ms, mr.median0_ms, mr.median1_ms, mr.rounds,
                 ort ? " in ONNX Runtime" : "");
    return TS_OK;
}

/* The final check on the ort target: both graphs as they would be
 * written, run by ONNX Runtime on the same random inputs.  A difference
 * keeps the original and the reason says so (res->reason set); it is not
 * an error, as ORT's own fusions may round the two graphs differently. */
static ts_status ort_check(ts_ort_target *ort, const ts_graph *g, const ts_graph *best, ts_optimize_result *res,
                           ts_error *err)
{
    double worst;
    char where[200];
    ts_status st = ts_ort_target_compare(ort, g, best, &worst, where, sizeof where, err);
    if (st == TS_ERR_UNSUPPORTED) {
        snprintf(res->reason, sizeof res->reason, "original kept: ONNX Runtime cannot run the result (%.180s)",
                 err->msg);
        *err = (ts_error){0};
        return TS_OK;
    }
    if (st) return st;
    res->max_scaled_error = worst;
    res->check_whole = true;
    if (!(worst <= 1.0))
        snprintf(res->reason, sizeof res->reason,
                 "original kept: in ONNX Runtime the result differs from the original (scaled error %.3g at %.120s)",
                 worst, where);
    return TS_OK;
}

/* The step --report and --json name when tsopt's import is written with no
 * rewrite: the model as tsopt reads it (its shape arithmetic folded, its
 * inputs, outputs and symbolic dimensions kept), which ONNX Runtime can run
 * faster than the file it came from (shufflenet_v2: per round 0.874). */
#define IMPORT_STEP "import (shape arithmetic folded)"

/* Makes imp (owned) the result, one step named IMPORT_STEP, predicted at the
 * original's cost (its regions are the original's). */
static ts_status take_import(ts_drive_result *dr, ts_graph *imp, ts_error *err)
{
    ts_optimize_count *names = calloc(1, sizeof *names);
    double *gains = calloc(1, sizeof *gains);
    if (!names || !gains) {
        free(names);
        free(gains);
        ts_graph_free(imp);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    snprintf(names[0].name, TS_OPT_NAME_MAX, "%s", IMPORT_STEP);
    names[0].count = 1;
    ts_graph_free(dr->best);
    dr->best = imp;
    dr->cost_after = dr->cost_before;
    free(dr->names);
    free(dr->gains);
    dr->names = names;
    dr->gains = gains;
    dr->nnames = dr->nsteps = 1;
    memset(dr->per_source, 0, sizeof dr->per_source);
    return TS_OK;
}

/* The ort target's answer to region sums that miss ONNX Runtime's work
 * across regions (its fusions over a region boundary, NCHWc layout kept
 * between convolutions): the search's best few graphs, and tsopt's import
 * alone (*imp, when the original is the user's file), are timed whole with
 * the original in one ORT process, and the one with the lowest median over
 * rounds of its run over the original's in the same round, when below 1,
 * becomes the result (dr->best) that the keep decision then confirms or
 * refuses on rounds of its own.  The fastest runs are not compared: they
 * come from different moments, and at load 13 one graph's fastest run was
 * 2.3 times the original's at per round 0.936 (shufflenet_v2, 1 thread) and
 * another's 1.93 times at per round 0.677 (resnext50, a x1.111 rewrite),
 * which the larger of the two ratios, used before, dropped.  None faster:
 * res->reason says so and the original is written.  *imp is taken (NULL)
 * when it is the result. */
static ts_status ort_rank(ts_ort_target *ort, const ts_graph *g, ts_graph **imp, ts_drive_result *dr,
                          const ts_optimize_opts *o, double budget_s, ts_optimize_result *res, ts_error *err)
{
    const ts_graph *gs[TS_ORT_RANK_MAX] = {g};
    int idx[TS_ORT_RANK_MAX] = {-2}, n = 1; /* idx: which of dr->alts (-1: dr->best, -2: g, -3: *imp) */
    double pred[TS_ORT_RANK_MAX] = {dr->cost_before};
    /* every session holds its weights (and ORT's packed copies): at most ~2 GB of them */
    double bytes = (double)ts_graph_weight_bytes(g);
    bool symbolic = ts_onnx_keeps_symbolic(g, NULL, 0);
    if (*imp && 2 * bytes > 2e9) {
        ts_graph_free(*imp);
        *imp = NULL;
    }
    if (*imp) bytes *= 2;
    /* the runners-up even when the best is the original, the passes'
     * alternatives first (driver.c, pass_runner_up): timed whole here or
     * never */
    for (int i = dr->nsteps > 0 ? -1 : 0; i < dr->nalts && n < TS_ORT_RANK_MAX - (*imp != NULL); i++) {
        const ts_graph *c = i < 0 ? dr->best : dr->alts[i];
        double w = (double)ts_graph_weight_bytes(c);
        /* candidates the keep decision would refuse anyway are not timed */
        if (bytes + w > 2e9 || (!o->allow_growth && w > 1.1 * (double)ts_graph_weight_bytes(g) + 4096) ||
            (symbolic && !ts_onnx_keeps_symbolic(c, NULL, 0)))
            continue;
        bytes += w;
        idx[n] = i;
        pred[n] = i < 0 ? dr->cost_after : dr->alt_costs[i];
        gs[n++] = c;
    }
    if (*imp) {
        idx[n] = -3;
        pred[n] = dr->cost_before;
        gs[n++] = *imp;
    }
    int k = 1;
    if (n >= 3) { /* one candidate: the keep decision times it */
        double med[TS_ORT_RANK_MAX], fast[TS_ORT_RANK_MAX], ratio[TS_ORT_RANK_MAX];
        int rounds;
        ts_status st = ts_ort_target_rank(ort, gs, n, budget_s, med, fast, ratio, &rounds, err);
        if (st) return st;
        /* the lowest per-round ratio below 1 (keep.c: why not the
         * fastest runs too); 0: none looked faster */
        int c = ts_keep_rank_choose(fast, ratio, pred, n, o->min_gain / 100);
        k = c ? c : 1;
        for (int i = 2; i < n && !c; i++) /* none: the reason names the lowest */
            if (!isnan(fast[i]) && (isnan(fast[k]) || !(ratio[k] <= ratio[i]))) k = i;
        if (o->progress) {
            fprintf(stderr,
                    "optimize: ONNX Runtime whole graphs (%d rounds, fastest / median ms, per round / original; "
                    "region sum): original %.3f / %.3f (%.3f)",
                    rounds, fast[0], med[0], pred[0]);
            for (int i = 1; i < n; i++)
                fprintf(stderr, ", %s%s%d %.3f / %.3f, %.3f (%.3f)", i != k ? "" : c ? "chosen " : "lowest ",
                        idx[i] == -3 ? "import " : "", i, fast[i], med[i], ratio[i], pred[i]);
            fprintf(stderr, "\n");
            for (int i = 1; i < n; i++)
                if (idx[i] != -3) {
                    char path[600];
                    ts_drive_result_describe(dr, idx[i], path, sizeof path);
                    fprintf(stderr, "optimize:   %d: %s\n", i, path);
                }
        }
        for (int i = 1; i < n; i++) res->whole_candidates += !isnan(fast[i]); /* nan: not loaded in time */
        res->whole_before_ms = med[0];
        res->whole_after_ms = med[k];
        if (!c) {
            res->latency_before_ms = med[0];
            res->fastest_before_ms = fast[0];
            res->fastest_after_ms = fast[k];
            snprintf(res->reason, sizeof res->reason,
                     "original kept: none of the %d best graphs ran faster whole in ONNX Runtime (per round %.3f "
                     "of the original; fastest %.3f -> %.3f ms, median %.3f -> %.3f ms, %d rounds in one process)",
                     n - 1, ratio[k], fast[0], fast[k], med[0], med[k], rounds);
        }
    }
    if (n < 2) return TS_OK;
    if (idx[k] >= 0) ts_drive_result_choose(dr, idx[k]);
    if (idx[k] != -3) return TS_OK;
    ts_graph *c = *imp;
    *imp = NULL;
    return take_import(dr, c, err);
}

/* Runs of the original the ORT check and the keep decision take after the
 * ranking: the check runs both graphs at batch 1 and 4 (about 10 runs of
 * the original's time), the keep decision at least 2 warm-ups and
 * TS_KEEP_MIN_ROUNDS rounds of each graph (16 runs) in 60 % of its time
 * (27 runs' time). */
#define ORT_RESERVE_RUNS 37.0

/* Seconds left after the search that the ranking (ort_rank) must leave to
 * the ORT check and the keep decision: FINISH_S - WRITE_S, or more where
 * the original's whole-graph time (whole0 ms, timed before the search; NaN
 * when not timed) says they need more.  At load 15 the ranking took them
 * all on resnext50 (616 ms a run) and r3d_18 (1964 ms): "no time left to
 * check the rewrites", and a x1.1 and a x1.3 rewrite were not written.
 * Quiet, resnext50 (28 ms) keeps the 12 s as before. */
static double ort_reserve_s(double whole0)
{
    double need = isnan(whole0) ? 0 : ORT_RESERVE_RUNS * whole0 / 1000 + 3;
    return fmax(FINISH_S - WRITE_S, need);
}

/* The ort target's prediction made consistent with whole graphs: region
 * sums miss what ONNX Runtime does across regions (fusions over a region
 * boundary, NCHWc kept between convolutions, its per-operator overheads)
 * and mix times cached at other loads, so every cost the search gave is
 * scaled by the original's whole-graph time (whole0, timed in this run: a
 * time cached from another load would be the very error it corrects) over
 * the original's region sum.  The original is then predicted at its
 * whole-graph time and a candidate at that time times its region sum's
 * ratio to the original's; the search's ranking is unchanged.  (Adding the
 * regions' difference instead, TASO's way, predicted fsrcnn's result at
 * less than nothing: region sums 614 -> 123 ms against 276 ms whole.) */
static void anchor_prediction(ts_drive_result *dr, double whole0, bool progress)
{
    double s0 = dr->cost_before, s1 = dr->cost_after, scale = whole0 / s0;
    if (!isfinite(scale) || !(scale > 0)) {
        if (progress)
            fprintf(stderr, "optimize: ONNX Runtime predicted (region sums): original %.3f ms, result %.3f ms\n", s0,
                    s1);
        return;
    }
    dr->cost_before = whole0;
    dr->cost_after = s1 * scale;
    for (int i = 0; i < dr->nalts; i++) dr->alt_costs[i] *= scale;
    if (progress)
        fprintf(stderr,
                "optimize: ONNX Runtime predicted: original %.3f ms (timed whole), result %.3f ms (region sums %.3f -> "
                "%.3f ms)\n",
                dr->cost_before, dr->cost_after, s0, s1);
}

/* True when path is a file ORT can be handed as the original: a regular
 * file whose name the peer's line protocol carries.  Its weights may live
 * in external data files: ORT finds them beside the file, and a kept model
 * is written with them (ts_onnx_copy_model).  Not compared with g's weight
 * bytes: import's folds make those larger than the file (vgg11: 531.45 MB
 * against a 531.44 MB file), which wrote a kept model as the import. */
static bool source_whole(const char *path)
{
    struct stat sb;
    return path && *path && !strpbrk(path, "\t\n\r") && strlen(path) < 200 && !stat(path, &sb) &&
           S_ISREG(sb.st_mode);
}

/* The original's latency when it is written: on the target's engine. */
static ts_status time_original(const ts_graph *g, ts_ort_target *ort, double *ms, ts_error *err)
{
    return ort ? ts_ort_target_time(ort, g, ms, err) : xcost_time_graph(g, 2, 10, 2000, ms, err);
}

ts_status ts_optimize(const ts_graph *g, const ts_optimize_opts *opts, ts_optimize_result *res, ts_error *err)
{
    memset(res, 0, sizeof *res);
    double t0 = ts_clock_s(), start = t0; /* t0: what the time limit counts from */
    ts_optimize_opts o;
    if (opts) o = *opts;
    else ts_optimize_opts_default(&o);
    if (ts_optimize_opts_check(&o, err)) return err->code;
    const ts_source *src[TS_OPT_MAX_SOURCES];
    void *state[TS_OPT_MAX_SOURCES] = {0};
    int nsrc = 0, opened = 0;
    if (ts_sources_select(o.transforms, src, &nsrc, err)) return err->code;
    ts_costdb *db = NULL;
    ts_const_cache *cc = ts_const_cache_new();
    ts_drive_result dr = {0};
    ts_tensor **user_in = NULL; /* --inputs: the whole-model check's inputs */
    ts_ort_target *ort = NULL;
    ts_graph *imp = NULL; /* ort: tsopt's import, offered against the user's file (ort_rank) */
    double whole0 = NAN; /* ort: the original's whole-graph median in ONNX Runtime */
    bool to_ort = o.target && !strcmp(o.target, "ort");
    snprintf(res->target, sizeof res->target, "%s", to_ort ? "ort" : "tsopt");
    ts_status st = cc ? ts_costdb_open(o.cost_cache, &db, err) : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    /* the peer is started first: without one, the run fails before any work */
    if (!st && to_ort && !(st = ts_ort_target_open(db, o.threads, &ort, err)))
        snprintf(res->engine_version, sizeof res->engine_version, "%s", ts_ort_target_version(ort));
    ts_source_env env = {.opts = &o, .db = db, .cc = cc};
    for (; !st && opened < nsrc; opened++) st = src[opened]->open(&env, &state[opened], err);
    if (st) goto done;
    for (int k = 0; k < nsrc; k++) {
        size_t len = strlen(res->sources);
        char line[400] = "";
        if (src[k]->describe) src[k]->describe(state[k], line, sizeof line);
        snprintf(res->sources + len, sizeof res->sources - len, "%s: %s\n", src[k]->name, line);
    }
    /* the original's groups timed in its own plan, once per machine: every
     * candidate's cost is then built from in-plan times and the few new
     * groups timed in context (docs/runtime.md, the cost model) */
    /* a model with opaque nodes cannot run as a whole: no priming, no
     * timing; its rewrites are checked region by region (check.c) */
    ts_error why_run = {0};
    bool runnable = !ts_graph_check_runnable(g, &why_run);
    if (o.inputs_dir) {
        if (!(user_in = calloc((size_t)g->ninputs + 1, sizeof *user_in))) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            goto done;
        }
        if ((st = ts_opt_inputs_load(g, o.inputs_dir, user_in, err))) goto done;
    }
    if (!o.roofline && !ort && runnable && (st = ts_cost_prime(db, g, err))) goto done;
    if (ort && !o.allow_growth) /* as the keep decision below: at most 10% (and 4 KiB) more weights */
        ts_ort_target_set_weight_cap(ort, (int64_t)(1.1 * (double)ts_graph_weight_bytes(g)) + 4096);
    if (ort) ts_ort_target_set_symbolic(ort, ts_onnx_keeps_symbolic(g, NULL, 0));
    if (ort) {
        /* the user's file is the original ORT times and checks against */
        bool file = source_whole(o.source_path);
        ts_ort_target_set_original(ort, g, file ? o.source_path : NULL);
        snprintf(res->compared, sizeof res->compared, "%s", file ? "file" : "import");
    }
    if (ort && !o.roofline) {
        /* the original's regions timed in ONNX Runtime once per machine
         * (tens of seconds for a large model on a cold cache): not taken
         * from the search's time, or a cold run would search nothing;
         * docs/optimize.md says a cold run can end past the limit */
        double tp = ts_clock_s();
        ts_ort_target_cost(ort, g);
        /* and the original timed whole, which the prediction is anchored
         * to (anchor_prediction); a graph ORT cannot run whole is not */
        if (!o.no_timing && ts_ort_target_time(ort, g, &whole0, &(ts_error){0})) whole0 = NAN;
        t0 += ts_clock_s() - tp;
    }
    /* the search's limit counts from the start of the run: priming the
     * cost cache (seconds on a cold cache) is part of the user's limit */
    ts_optimize_opts os = o;
    if (o.time_limit > 0) os.time_limit = fmax(o.time_limit - (ts_clock_s() - t0), 1e-3);
    /* ort: the last 30% of the search's time is the whole-graph timing of
     * its best graphs (ort_rank), so the check and the keep decision keep
     * the time after the limit */
    if (ort && !o.no_timing && o.time_limit > 0) os.time_limit *= 0.7;
    if ((st = ts_drive_costed(g, &os, db, ort ? ts_ort_target_cost : NULL, ort, src, state, nsrc, cc, &dr, err)))
        goto done;
    if (ort && o.progress) {
        int timed, cached;
        ts_ort_target_counts(ort, &timed, &cached);
        fprintf(stderr, "optimize: ONNX Runtime %s, %d threads: %d regions timed, %d found in the cost cache\n",
                ts_ort_target_version(ort), ts_ort_target_threads(ort), timed, cached);
    }
    if (ort) anchor_prediction(&dr, whole0, o.progress);
    ts_const_cache_free(cc); /* the memo's weights are not needed by the check and the timing */
    cc = NULL;
    if (!o.roofline) ts_costdb_save(db, &(ts_error){0}); /* a cache that cannot be saved only costs time next run */
    /* ort: the best few timed whole in what is left of the time limit (at
     * least 2 s) after what the ORT check and the keep decision need */
    double rank_s = time_left(&o, t0) - ort_reserve_s(whole0);
    /* ort, the user's file as the original: tsopt's import alone is a
     * candidate too (ort_rank) */
    if (ort && !o.no_timing && !strcmp(res->compared, "file") && strcmp(dr.stop, "interrupted") && rank_s >= 2 &&
        !(imp = ts_graph_copy(g))) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (imp && ts_ort_target_is_file(ort, imp)) { /* a file tsopt wrote (the zoo's): the same model */
        ts_graph_free(imp);
        imp = NULL;
    }
    if (imp && o.progress) fprintf(stderr, "optimize: candidate: tsopt's " IMPORT_STEP ", against the file\n");
    if (ort && !o.no_timing && (imp || dr.nalts > 0) && strcmp(dr.stop, "interrupted") &&
        rank_s >= 2 && (st = ort_rank(ort, g, &imp, &dr, &o, rank_s, res, err)))
        goto done;
    res->cost_before_ms = dr.cost_before;
    res->cost_after_ms = dr.cost_after;
    res->explored = dr.explored;
    res->generated = dr.generated;
    res->search_s = dr.seconds;
    snprintf(res->stop, sizeof res->stop, "%s", dr.stop);
    res->nodes_before = live_nodes(g);
    res->nsources = nsrc + 1;
    for (int k = 0; k < nsrc; k++) snprintf(res->applied[k].name, TS_OPT_NAME_MAX, "%s", src[k]->name);
    snprintf(res->applied[nsrc].name, TS_OPT_NAME_MAX, "passes");

    res->weight_bytes_before = ts_graph_weight_bytes(g);
    ts_check_result cr = {0};
    /* a search that ran far past its limit leaves no time to check: the
     * original is kept, never an unchecked graph */
    double check_left = time_left(&o, t0);
    bool no_check_time = dr.nsteps > 0 && check_left < 1.0;
    double check_s = ts_clock_s();
    /* --target ort: the check is ONNX Runtime's, on the files as written
     * (ort_check below), which runs models tsopt cannot run too */
    ts_status cst = dr.nsteps > 0 && !no_check_time && !ort
                        ? ts_opt_check_all(g, dr.best, o.seed, user_in, check_limit(&o, check_left), &cr, err)
                        : TS_OK;
    check_s = ts_clock_s() - check_s;
    if (no_check_time) {
        snprintf(res->reason, sizeof res->reason,
                 "original kept: no time left to check the rewrites (%.1f s left of the time limit + %.0f s)",
                 check_left + WRITE_S, FINISH_S);
    } else if (!cst && cr.out_of_time) {
        /* stopped before it compared everything: the rewrites are unchecked, so not written */
        snprintf(res->reason, sizeof res->reason,
                 "original kept: the check ran out of time (stopped after %.2f s of the %.2f s left for it; "
                 "unchecked rewrites are never written)",
                 check_s, check_limit(&o, check_left));
    } else if (cst == TS_ERR_UNSUPPORTED) {
        /* a rewritten region holds a node tsopt cannot run: unchecked, so not written */
        snprintf(res->reason, sizeof res->reason, "original kept: the rewrites cannot be checked (%.200s)", err->msg);
        *err = (ts_error){0};
    } else if (cst) {
        st = cst;
        goto done;
    } else if (dr.nsteps > 0) {
        res->max_scaled_error = cr.worst;
        res->check_regions = cr.regions;
        res->check_whole = cr.whole;
        res->check_user_inputs = cr.user_inputs;
        if (!(res->max_scaled_error <= 1.0)) {
            char names[512] = "";
            for (int i = 0; i < dr.nnames; i++) {
                size_t len = strlen(names);
                snprintf(names + len, sizeof names - len, "%s%s x%d", i ? ", " : "", dr.names[i].name,
                         dr.names[i].count);
            }
            char at[300] = "";
            if (cr.region_worst > 1.0) snprintf(at, sizeof at, " at %s", cr.worst_at);
            st = ts_error_set(err, TS_ERR_INVALID,
                              "the optimized graph differs from the original (scaled error %.3g > 1%s; rewrites: %s): "
                              "nothing written; please report this model",
                              res->max_scaled_error, at, names);
            goto done;
        }
        int64_t grown = ts_graph_weight_bytes(dr.best);
        char why[256];
        double left = time_left(&o, t0);
        /* Ctrl-C asks for the best graph now: a short measurement decides */
        if (!strcmp(dr.stop, "interrupted")) left = fmin(left, INTERRUPTED_S);
        if (!o.allow_growth && (double)grown > 1.1 * (double)res->weight_bytes_before + 4096) {
            /* folded constants and concatenated weights must not bloat the
             * written model (docs/onnx-models.md); 4 KiB of slack for shape
             * arithmetic in tiny models */
            snprintf(res->reason, sizeof res->reason,
                     "original kept: the optimized graph's weights are %.3g MB, more than 10%% over the original's "
                     "%.3g MB (--allow-growth writes it)",
                     (double)grown / 1e6, (double)res->weight_bytes_before / 1e6);
            if (runnable && !o.no_timing && left > 3 &&
                (st = time_original(g, ort, &res->latency_before_ms, err)))
                goto done;
        } else if (ts_onnx_keeps_symbolic(g, NULL, 0) && !ts_onnx_keeps_symbolic(dr.best, why, sizeof why)) {
            /* one written model serves every batch size, or it is not an
             * improvement (docs/decisions.md, "Symbolic dimensions on export") */
            snprintf(res->reason, sizeof res->reason,
                     "original kept: the optimized graph would fix the model's symbolic dimensions (%.150s)", why);
            if (runnable && !o.no_timing && left > 3 &&
                (st = time_original(g, ort, &res->latency_before_ms, err)))
                goto done;
        } else if (!runnable && !ort) {
            /* no timing: tsopt cannot run the model as a whole (ONNX Runtime times it below) */
            char clipped[121];
            res->optimized = predicted_gain(&dr, o.min_gain);
            snprintf(res->reason, sizeof res->reason,
                     res->optimized ? "written on the cost model alone (%.3f -> %.3f ms predicted; not timed: %s)"
                                    : "original kept: the cost model predicts less than --min-gain (%.3f -> %.3f ms; "
                                      "not timed: %s)",
                     dr.cost_before, dr.cost_after, clip_words(why_run.msg, clipped, sizeof clipped));
        } else if (!o.no_timing && left < 1.0) {
            /* the check took the time left: measuring now would overrun the limit */
            snprintf(res->reason, sizeof res->reason,
                     "original kept: not measured (the check took %.1f s and left no time of the limit + %.0f s)",
                     check_left - left, FINISH_S);
        } else if (ort && !res->reason[0] && (st = ort_check(ort, g, dr.best, res, err))) {
            goto done;
        } else if (!res->reason[0] &&
                   /* ort: the time the ORT check just above left, or the keep
                    * decision sizes its rounds past the limit + FINISH_S */
                   (st = decide(g, &dr, &o, ort, ort ? fmin(left, time_left(&o, t0)) : left, user_in, res, err)))
            goto done;
    } else {
        snprintf(res->reason, sizeof res->reason,
                 "original kept: the search found no rewrite the cost model prefers (%d graphs explored)",
                 dr.explored);
        if (runnable && !o.no_timing && time_left(&o, t0) > 3 &&
            (st = time_original(g, ort, &res->latency_before_ms, err)))
            goto done;
        res->latency_after_ms = res->latency_before_ms;
    }
    if (!res->optimized) {
        res->latency_after_ms = res->latency_before_ms;
        res->max_scaled_error = 0;
        /* "a model that cannot be made faster is written unchanged" */
        res->copy_source = ort && !strcmp(res->compared, "file");
        size_t len = strlen(res->reason);
        if (res->copy_source)
            snprintf(res->reason + len, sizeof res->reason - len, "; the original file is written unchanged");
    }
    res->graph = res->optimized ? dr.best : ts_graph_copy(g);
    if (res->optimized) dr.best = NULL;
    if (!res->graph) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    res->nodes_after = live_nodes(res->graph);
    res->weight_bytes_after = ts_graph_weight_bytes(res->graph);
    if (res->optimized) {
        for (int k = 0; k <= nsrc; k++) res->applied[k].count = dr.per_source[k];
        res->rewrites = dr.names;
        res->nrewrites = dr.nnames;
        res->rewrite_gain_ms = dr.gains;
        dr.names = NULL;
        dr.gains = NULL;
    }
done:
    ts_graph_free(imp);
    for (int i = 0; user_in && i < g->ninputs; i++) ts_tensor_unref(user_in[i]);
    free(user_in);
    for (int k = 0; k < opened; k++)
        if (state[k]) src[k]->close(state[k]);
    ts_drive_result_free(&dr);
    ts_const_cache_free(cc);
    ts_costdb_free(db);
    ts_ort_target_close(ort);
    res->total_s = ts_clock_s() - start;
    res->peak_rss_mb = (double)xmem_peak_rss() / 1048576;
    if (st) ts_optimize_result_free(res);
    return st;
}

void ts_optimize_result_free(ts_optimize_result *res)
{
    ts_graph_free(res->graph);
    free(res->rewrites);
    free(res->rewrite_gain_ms);
    memset(res, 0, sizeof *res);
}
