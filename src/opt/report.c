/* Markdown report of `tsopt optimize`: what was applied, what it cost
 * before and after (model and measurement), how long the search took. */
#include <stdio.h>
#include <stdlib.h>
#include "opt/search.h"

ts_status ts_opt_report_write(const char *path, const ts_opt_report *r, ts_error *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return ts_error_set(err, TS_ERR_IO, "cannot write report '%s'", path);
    const ts_search_result *s = r->res;
    const ts_search_opts *o = r->opts;
    fprintf(f, "# tsopt optimize: %s\n\n", r->model);
    fprintf(f, "Output: `%s`%s\n\n", r->output,
            r->kept_original ? " (the original graph: the optimized one did not measure faster by --min-gain)" : "");
    fprintf(f, "| | before | after | ratio |\n|---|---|---|---|\n");
    fprintf(f, "| cost model (ms) | %.3f | %.3f | %.3fx |\n", s->cost_before, s->cost_after,
            s->cost_after > 0 ? s->cost_before / s->cost_after : 0.0);
    fprintf(f, "| measured latency, median (ms) | %.3f | %.3f | %.3fx |\n", r->latency_before, r->latency_after,
            r->latency_after > 0 ? r->latency_before / r->latency_after : 0.0);
    if (r->fastest_before > 0)
        fprintf(f, "| fastest run, decides what is written (ms) | %.3f | %.3f | %.3fx |\n", r->fastest_before,
                r->fastest_after, r->fastest_after > 0 ? r->fastest_before / r->fastest_after : 0.0);
    fprintf(f, "| nodes | %d | %d | |\n\n", r->nodes_before, r->nodes_after);
    fprintf(f, "Search: %.2f s (greedy whole-graph moves %.2f s), %d graphs explored, %d distinct graphs generated, %d matches tried; "
               "alpha %.3f, budget %d, time limit %.1f s; %d rules loaded, %d of them also applied right to left, "
               "%d of the %d usable by the matcher.\n\n",
            s->seconds, s->greedy_seconds, s->explored, s->generated, s->matches, o->alpha, o->budget, o->time_limit,
            r->rules_loaded, r->rules_reversed, r->rules_usable, r->rules_loaded + r->rules_reversed);
    fprintf(f, "Check: outputs of the written graph vs the original on seeded random inputs, largest scaled "
               "difference %.3g (tolerance rtol 1e-3, atol 1e-4).\n\n",
            r->max_err);
    fprintf(f, "## Substitutions applied (%d)\n\n", s->nsteps);
    if (!s->napplied) fprintf(f, "None.\n");
    else {
        fprintf(f, "| substitution | count |\n|---|---|\n");
        for (int i = 0; i < s->napplied; i++) fprintf(f, "| %s | %d |\n", s->applied[i].name, s->applied[i].count);
    }
    fprintf(f, "\nThe runtime fuses conv+batchnorm+relu+residual add and matmul+bias when it builds a plan; the "
               "cost model measures those groups as one step, so the search's costs already include them.\n");
    if (fclose(f) || rename(tmp, path)) {
        remove(tmp);
        return ts_error_set(err, TS_ERR_IO, "cannot write report '%s'", path);
    }
    return TS_OK;
}
