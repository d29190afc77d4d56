/* tsopt bench A --against B: two models timed in one process, in
 * alternating rounds, so that both see the same machine.
 *
 * Why in one process: on the shared 2-core development machine the same
 * file benched in separate processes came out 0.73-1.20x of itself
 * (BENCHMARKS.md, "Optimizer"): the machine's speed shifts for minutes,
 * and no counter a process reads sees it.  Rounds of about BENCH_ROUND_MS
 * per model, A B then B A (each model goes first equally often), put both
 * models under the same shifts; a round's ratio (A's round median over
 * B's) then shows the noise that remains.  The rounds and their judging
 * are tsopt bench's own (bench_rounds.c, measure/rounds.c); a pair of rounds
 * counts as undisturbed when both its halves are, as in the optimizer's
 * keep decision (ts_measure_judge). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/bench.h"
#include "util/clock.h"

typedef struct side {
    const char *path;
    ts_graph *g;
    ts_plan *plan;
    ts_tensor **in;  /* the shared inputs in this graph's input order */
    ts_tensor **out; /* its own outputs */
    double build_ms, med;
    bench_runs br;
    quiet_stats q;
    ts_plan_stats st;
} side;

static const char *value_desc(const ts_value *v, char *buf, size_t n)
{
    char sh[160];
    snprintf(buf, n, "%s[%s]", ts_dtype_name(v->dtype), ts_shape_str(&v->shape, sh, sizeof sh));
    return buf;
}

/* B's inputs must be A's (by name, with the same dtype and shape, in any
 * order); says what differs. */
static bool match_inputs(const side *a, const side *b)
{
    const ts_graph *ga = a->g, *gb = b->g;
    for (int j = 0; j < gb->ninputs; j++) {
        const ts_value *vb = &gb->values[gb->inputs[j]];
        int i = 0;
        while (i < ga->ninputs && strcmp(ga->values[ga->inputs[i]].name, vb->name)) i++;
        if (i == ga->ninputs) {
            cli_error(CLI_FAIL, "bench --against: input '%s' of %s is not an input of %s", vb->name, b->path,
                      a->path);
            return false;
        }
        const ts_value *va = &ga->values[ga->inputs[i]];
        if (va->dtype != vb->dtype || !ts_shape_eq(&va->shape, &vb->shape)) {
            char x[200], y[200];
            cli_error(CLI_FAIL, "bench --against: input '%s' is %s in %s but %s in %s", vb->name,
                      value_desc(va, x, sizeof x), a->path, value_desc(vb, y, sizeof y), b->path);
            return false;
        }
    }
    if (ga->ninputs != gb->ninputs)
        for (int i = 0; i < ga->ninputs; i++) {
            const char *name = ga->values[ga->inputs[i]].name;
            int j = 0;
            while (j < gb->ninputs && strcmp(gb->values[gb->inputs[j]].name, name)) j++;
            if (j == gb->ninputs) {
                cli_error(CLI_FAIL, "bench --against: input '%s' of %s is not an input of %s", name, a->path,
                          b->path);
                return false;
            }
        }
    return true;
}

/* Plans one side: sizes checked first (its inputs and outputs, then
 * ts_plan_build its arena, with the other plan already resident), then one
 * untimed run touches every buffer so the next check sees them used. */
static bool build(side *s, const ts_plan_opts *o)
{
    ts_error err = {0};
    if (!cli_mem_ok(s->g)) return false;
    if (!bench_io_new(s->g, NULL, s->out, NULL)) return false;
    double t0 = ts_clock_ms();
    if (ts_plan_build(s->g, o, &s->plan, &err)) return cli_error_from(CLI_FAIL, &err), false;
    s->build_ms = ts_clock_ms() - t0;
    if (ts_plan_run(s->plan, s->in, s->out, &err)) return cli_error_from(CLI_FAIL, &err), false;
    return true;
}

/* One half of a pair round: s's runs until they add up to BENCH_ROUND_MS
 * (one run at least). */
static int half_round(side *s)
{
    ts_error err = {0};
    bench_round_open(&s->br);
    do {
        double ms;
        if (bench_run_timed(s->plan, s->in, s->out, &ms, &err)) return cli_error_from(CLI_FAIL, &err);
        if (!bench_runs_add(&s->br, ms)) return cli_error(CLI_FAIL, "out of memory");
    } while (bench_round_ms(&s->br) < BENCH_ROUND_MS);
    if (!bench_round_close(&s->br)) return cli_error(CLI_FAIL, "out of memory");
    return CLI_OK;
}

static bool has_enough(const bench_args *a, const bench_runs *b)
{
    return b->n >= a->iters && (b->total_ms >= a->min_time * 1e3 || b->n >= BENCH_MAX_RUNS);
}

/* The p-quantile of the n sorted values, interpolated between neighbours. */
static double quantile(const double *v, long n, double p)
{
    double x = p * (double)(n - 1);
    long k = (long)x;
    return k + 1 < n ? v[k] + (x - (double)k) * (v[k + 1] - v[k]) : v[n - 1];
}

/* Times in ms as the one-model object prints them; ratios with 6
 * significant digits (a 1000x slower B is 0.001). */
static void json_num(const char *key, double v, bool ratio)
{
    if (!isfinite(v))
        printf(", \"%s\": null", key);
    else if (ratio)
        printf(", \"%s\": %.6g", key, v);
    else
        printf(", \"%s\": %.4f", key, v);
}

/* B's fields: the single-model object's per-model ones. */
static void json_side(const side *s)
{
    const bench_runs *b = &s->br;
    double mean = 0;
    for (long i = 0; i < b->n; i++) mean += b->t[i] / (double)b->n;
    printf("{\"model\": ");
    bench_json_string(s->path);
    printf(", \"median_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, \"mean_ms\": %.4f, \"iters\": %ld, "
           "\"build_ms\": %.3f, \"steps\": %d, \"fused_nodes\": %d, \"reorders\": %d, \"fallback_steps\": %d, "
           "\"ref_impls\": %d, \"arena_bytes\": %zu, \"naive_bytes\": %zu, \"weight_bytes\": %zu, \"rounds\": %ld, "
           "\"disturbed_rounds\": %ld, \"quiet_runs\": %ld",
           s->med, b->t[0], b->t[b->n - 1], mean, b->n, s->build_ms, s->st.steps, s->st.fused_nodes, s->st.reorders,
           s->st.fallback_steps, s->st.ref_impls, s->st.arena_bytes, s->st.naive_bytes, s->st.weight_bytes,
           s->q.rounds, s->q.disturbed, s->q.runs);
    json_num("quiet_median_ms", s->q.median_ms, false);
    json_num("quiet_min_ms", s->q.min_ms, false);
    printf(", \"disturbed_by\": [");
    for (int i = 0, k = 0; i < 5; i++)
        if (s->q.reasons >> i & 1) printf("%s\"%s\"", k++ ? ", " : "", BENCH_REASON_NAMES[i]);
    printf("]}");
}

static void text_side(const char *tag, const side *s)
{
    const bench_runs *b = &s->br;
    printf("%s: %s: median %.3f ms, min %.3f ms, ", tag, s->path, s->med, b->t[0]);
    if (s->q.runs)
        printf("quiet median %.3f ms", s->q.median_ms);
    else
        printf("quiet median none");
    printf(" (%ld runs, %ld of %ld rounds undisturbed)\n", b->n, s->q.rounds - s->q.disturbed, s->q.rounds);
}

int bench_against(const bench_args *a)
{
    side s[2] = {{.path = a->model}, {.path = a->against}};
    int rc = CLI_FAIL;
    double *ratio = NULL;
    char *skip_b = NULL; /* B's skip list, when --against-skip adds to it */
    ts_plan_opts o = a->plan;
    o.threads = (int)a->threads;
    o.release_packed_weights = true;
    uint64_t rng = 0xbe4c; /* the one-model bench's inputs: A's numbers compare with its */
    /* --inputs: A's from the folder (B loaded at the same values), else random */
    for (int k = 0; k < 2; k++)
        if (!(s[k].g = bench_load(s[k].path, &a->binds, a->inputs, k ? NULL : &s[0].in)) || !cli_graph_opt(s[k].g, &o))
            goto done;
    bool random_in = !s[0].in;
    for (int k = 0; k < 2; k++) {
        if (k || random_in) s[k].in = calloc((size_t)s[k].g->ninputs + 1, sizeof *s[k].in);
        s[k].out = calloc((size_t)s[k].g->noutputs + 1, sizeof *s[k].out);
        if (!s[k].in || !s[k].out || !bench_runs_init(&s[k].br, a->iters)) {
            cli_error(CLI_FAIL, "out of memory");
            goto done;
        }
    }
    /* before any plan is built: a mismatch costs no time */
    if (!match_inputs(&s[0], &s[1])) goto done;
    if (!cli_mem_ok(s[0].g) || (random_in && !bench_io_new(s[0].g, s[0].in, NULL, &rng))) goto done;
    /* B's inputs are A's tensors (borrowed), in B's order */
    for (int j = 0; j < s[1].g->ninputs; j++)
        for (int i = 0; i < s[0].g->ninputs; i++)
            if (!strcmp(s[0].g->values[s[0].g->inputs[i]].name, s[1].g->values[s[1].g->inputs[j]].name))
                s[1].in[j] = s[0].in[i];
    /* B's plan: --skip and --against-skip */
    ts_plan_opts ob = o;
    if (a->against_skip) {
        size_t n = (o.skip ? strlen(o.skip) : 0) + strlen(a->against_skip) + 2;
        if (!(skip_b = malloc(n))) {
            cli_error(CLI_FAIL, "out of memory");
            goto done;
        }
        snprintf(skip_b, n, "%s%s%s", o.skip ? o.skip : "", o.skip ? "," : "", a->against_skip);
        ob.skip = skip_b;
    }
    if (!build(&s[0], &o) || !build(&s[1], &ob)) goto done;
    ts_error err = {0};
    for (int k = 0; k < 2; k++)
        for (long i = 0; i < a->warmup; i++)
            if (ts_plan_run(s[k].plan, s[k].in, s[k].out, &err)) {
                cli_error_from(CLI_FAIL, &err);
                goto done;
            }

    /* Pair rounds A B, B A, A B, ...: an even count, at least --rounds,
     * until both have their runs and time (or either has the most runs
     * the time array holds). */
    long min_pairs = a->rounds > 0 ? a->rounds : 8, pairs = 0;
    min_pairs += min_pairs % 2;
    for (;;) {
        int first = (int)(pairs % 2);
        if (half_round(&s[first]) || half_round(&s[1 - first])) goto done;
        pairs++;
        if (pairs % 2 || pairs < min_pairs) continue;
        if (has_enough(a, &s[0].br) && has_enough(a, &s[1].br)) break;
        if (s[0].br.n >= BENCH_MAX_RUNS || s[1].br.n >= BENCH_MAX_RUNS) break;
    }

    /* Each model's rounds judged against its own best round (as tsopt
     * bench); a pair counts as undisturbed only when both halves are, and
     * both models' quiet medians read the same undisturbed pairs. */
    int threads = o.threads > 0 ? o.threads : omp_get_num_procs();
    for (int k = 0; k < 2; k++) bench_runs_judge(&s[k].br, threads);
    long quiet_pairs = 0;
    if (!(ratio = malloc(sizeof *ratio * (size_t)pairs))) {
        cli_error(CLI_FAIL, "out of memory");
        goto done;
    }
    for (long r = 0; r < pairs; r++) {
        unsigned f = s[0].br.rs[r].flags | s[1].br.rs[r].flags;
        s[0].br.rs[r].flags = s[1].br.rs[r].flags = f;
        quiet_pairs += !f;
        ratio[r] = s[0].br.rs[r].med_ms / s[1].br.rs[r].med_ms;
    }
    for (int k = 0; k < 2; k++) {
        if (!bench_runs_collect(&s[k].br, &s[k].q)) {
            cli_error(CLI_FAIL, "out of memory");
            goto done;
        }
        s[k].med = ts_median(s[k].br.t, s[k].br.n);
        ts_plan_stats_get(s[k].plan, &s[k].st);
    }
    ts_median(ratio, pairs);
    double speedup = s[0].med / s[1].med;
    double quiet_speedup = quiet_pairs ? s[0].q.median_ms / s[1].q.median_ms : NAN;
    double rmin = ratio[0], rmax = ratio[pairs - 1];
    if (a->json) {
        ts_plan_opts used = o;
        used.threads = threads;
        bench_report_json(a, &used, &s[0].st, s[0].br.t, s[0].br.n, s[0].med, s[0].build_ms, &s[0].q, true);
        printf(", \"against\": ");
        json_side(&s[1]);
        json_num("speedup", speedup, true);
        json_num("quiet_speedup", quiet_speedup, true);
        printf(", \"pair_rounds\": %ld, \"quiet_pair_rounds\": %ld", pairs, quiet_pairs);
        json_num("ratio_min", rmin, true);
        json_num("ratio_q1", quantile(ratio, pairs, 0.25), true);
        json_num("ratio_median", quantile(ratio, pairs, 0.5), true);
        json_num("ratio_q3", quantile(ratio, pairs, 0.75), true);
        json_num("ratio_max", rmax, true);
        printf("}\n");
    } else {
        text_side("A", &s[0]);
        text_side("B", &s[1]);
        printf("B vs A: ×%.3f (rounds %ld, ratio range %.3f–%.3f", speedup, pairs, rmin, rmax);
        printf(", middle half %.3f–%.3f)", quantile(ratio, pairs, 0.25), quantile(ratio, pairs, 0.75));
        if (quiet_pairs)
            printf(", quiet ×%.3f over %ld undisturbed rounds\n", quiet_speedup, quiet_pairs);
        else
            printf(", no undisturbed round\n");
    }
    rc = CLI_OK;
done:
    free(ratio);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; k == 0 && s[k].in && i < s[k].g->ninputs; i++) ts_tensor_unref(s[k].in[i]);
        for (int i = 0; s[k].out && i < s[k].g->noutputs; i++) ts_tensor_unref(s[k].out[i]);
        free(s[k].in);
        free(s[k].out);
        ts_plan_free(s[k].plan);
        bench_runs_free(&s[k].br);
        ts_graph_free(s[k].g);
    }
    free(skip_b);
    return rc;
}
