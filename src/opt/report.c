/* Markdown report of `tsopt optimize`: the written graph only -- which
 * graph was written and why, what it costs before and after (cost model
 * and measurement), the rewrites present in it, the check, the search. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "draw/draw.h"
#include "opt/report.h"
#include "util/clock.h"

/* Graphviz's layout grows much faster than linearly with the nodes: a
 * DenseNet-size graph took over 10 minutes under load, and optimize waits
 * for the report.  Above this many live nodes no picture is drawn (`tsopt
 * draw` still draws one on request). */
#define DRAW_MAX_NODES 300
/* ... and the two pictures together get this many seconds (TSOPT_DRAW_S
 * sets it: tests), after which Graphviz is stopped: a loaded machine can
 * make even a small graph's layout slow, and optimize must finish. */
#define DRAW_S 20.0

static int live(const ts_graph *g)
{
    int n = 0;
    for (int i = 0; g && i < g->nnodes; i++) n += !g->nodes[i].dead;
    return n;
}

/* Pictures of the original and of the written graph beside the report
 * (R.before.svg, R.after.svg: the second highlights what changed), linked
 * from it by their base names.  A picture that cannot be drawn (no
 * Graphviz) is named in the report instead: the report itself is what was
 * asked for. */
static void pictures(FILE *f, const char *path, const ts_graph *original, const ts_optimize_result *r)
{
    char before[4200], after[4200];
    snprintf(before, sizeof before, "%s.before.svg", path);
    snprintf(after, sizeof after, "%s.after.svg", path);
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    ts_error e = {0};
    int most = live(original) > live(r->graph) ? live(original) : live(r->graph);
    if (most > DRAW_MAX_NODES) {
        fprintf(f, "(No pictures: %d nodes, more than the %d drawn within a report's time; `tsopt draw` draws "
                   "one on request)\n\n",
                most, DRAW_MAX_NODES);
        return;
    }
    const char *env = getenv("TSOPT_DRAW_S");
    double bound = env && atof(env) > 0 ? atof(env) : DRAW_S, end = ts_clock_s() + bound;
    if (ts_graph_draw_within(original, NULL, before, bound, &e)) {
        fprintf(f, "(No pictures: %s)\n\n", e.msg);
        return;
    }
    if (!r->optimized) {
        fprintf(f, "![the written graph, the original](%s.before.svg)\n\n", base);
        return;
    }
    if (ts_graph_draw_within(r->graph, original, after, fmax(end - ts_clock_s(), 1e-3), &e)) {
        fprintf(f, "![the original](%s.before.svg)\n\n(No picture of the optimized graph: %s)\n\n", base, e.msg);
        return;
    }
    fprintf(f, "| original | written (changed nodes highlighted) |\n|---|---|\n| ![original](%s.before.svg) | "
               "![optimized](%s.after.svg) |\n\n",
            base, base);
}

ts_status ts_opt_report_write(const char *path, const char *model, const char *output, const ts_graph *original,
                              const ts_optimize_opts *o, const ts_optimize_result *r, ts_error *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return ts_error_set(err, TS_ERR_IO, "cannot write report '%s'", path);
    fprintf(f, "# tsopt optimize: %s\n\n", model);
    fprintf(f, "Written: `%s`, the **%s** graph. %s.\n\n", output, r->optimized ? "optimized" : "original",
            r->reason);
    if (r->compared[0])
        fprintf(f, "ONNX Runtime timed as the original: %s.%s\n\n",
                strcmp(r->compared, "file") ? "tsopt's import of the model file" : "the model file as given",
                r->copy_source ? " The written file is that file, byte for byte." : "");
    fprintf(f, "| | original | written | ratio |\n|---|---|---|---|\n");
    double after_cost = r->optimized ? r->cost_after_ms : r->cost_before_ms;
    fprintf(f, "| cost model (ms) | %.3f | %.3f | %.3fx |\n", r->cost_before_ms, after_cost,
            after_cost > 0 ? r->cost_before_ms / after_cost : 0.0);
    fprintf(f, "| measured latency, median (ms) | %.3f | %.3f | %.3fx |\n", r->latency_before_ms, r->latency_after_ms,
            r->latency_after_ms > 0 ? r->latency_before_ms / r->latency_after_ms : 0.0);
    if (r->optimized && r->fastest_before_ms > 0)
        fprintf(f, "| fastest run (ms) | %.3f | %.3f | %.3fx |\n", r->fastest_before_ms, r->fastest_after_ms,
                r->fastest_after_ms > 0 ? r->fastest_before_ms / r->fastest_after_ms : 0.0);
    fprintf(f, "| nodes | %d | %d | |\n\n", r->nodes_before, r->nodes_after);
    if (r->optimized) {
        fprintf(f, "Check: outputs of the written graph vs the original on seeded random inputs (seed %llu), largest "
                   "scaled difference %.3g (passes at <= 1: rtol 1e-3, atol 1e-4).\n\n",
                (unsigned long long)o->seed, r->max_scaled_error);
        int total = 0;
        for (int i = 0; i < r->nrewrites; i++) total += r->rewrites[i].count;
        fprintf(f, "## Rewrites in the written graph (%d)\n\n| source | count |\n|---|---|\n", total);
        for (int k = 0; k < r->nsources; k++) fprintf(f, "| %s | %d |\n", r->applied[k].name, r->applied[k].count);
        /* gains in the target's cost model: with --target ort, times of regions measured in ONNX Runtime */
        fprintf(f, "\n| rewrite | count | gain (ms, %s) |\n|---|---|---|\n",
                r->engine_version[0] ? "regions timed in ONNX Runtime" : "cost model");
        for (int i = 0; i < r->nrewrites; i++)
            fprintf(f, "| %s | %d | %.4f |\n", r->rewrites[i].name, r->rewrites[i].count,
                    r->rewrite_gain_ms ? r->rewrite_gain_ms[i] : 0.0);
        fprintf(f, "\n");
    } else if (r->cost_after_ms < r->cost_before_ms) {
        fprintf(f, "The search's best graph was predicted at %.3f ms but is not written (see above).\n\n",
                r->cost_after_ms);
    }
    fprintf(f, "## Pictures\n\n");
    pictures(f, path, original, r);
    fprintf(f, "## Search\n\n%.2f s, stopped by: %s; %d graphs explored, %d distinct graphs generated; alpha %.3f, "
               "budget %d, time limit %.1f s; peak memory %.0f MiB.\n\nSources:\n\n",
            r->search_s, r->stop, r->explored, r->generated, o->alpha, o->budget, o->time_limit, r->peak_rss_mb);
    for (const char *p = r->sources; *p;) {
        const char *e = p;
        while (*e && *e != '\n') e++;
        fprintf(f, "- %.*s\n", (int)(e - p), p);
        p = *e ? e + 1 : e;
    }
    fprintf(f, "\nThe runtime fuses conv+batchnorm+relu+residual add and matmul+bias when it builds a plan; the "
               "cost model measures those groups as one step, so the search's costs already include them.\n");
    if (fclose(f) || rename(tmp, path)) {
        remove(tmp);
        return ts_error_set(err, TS_ERR_IO, "cannot write report '%s'", path);
    }
    return TS_OK;
}
