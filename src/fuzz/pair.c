/* The pair of POLYJUICE: a seed graph into an e-graph, saturated with
 * proved rules, then its two extremes extracted -- the most simplified
 * graph (fewest nodes) and the most complex (most nodes, cycles broken).
 *
 * Rules: POLYJUICE's arithmetic and structural rules (rules/polyjuice.rules,
 * each an equivalence: used in both directions) and tsopt's proved TASO rules (rules/core.rules as written,
 * rules/taso.rules in both directions, as the optimizer loads them), keeping
 * only those whose atoms the matcher implements.  Saturation stops at fixed
 * node and round limits, never at a time limit in practice (its limit is a
 * guard far above what a seed graph takes), so a pair depends on its seed
 * only. */
#include <stdlib.h>
#include <string.h>
#include "egraph/egraph.h"
#include "fuzz/fuzz.h"
#include "rules/apply.h"

struct ts_fuzz_rules {
    ts_rule *rules;
    int n;
    int rounds; /* 0: TS_FUZZ_ROUNDS */
};

/* Appends the rules of text (named name) to r, with their reverses when
 * asked, keeping those the matcher can apply. */
static ts_status add_set(ts_fuzz_rules *r, const char *text, const char *name, bool reverses, ts_error *err)
{
    ts_rule *set = NULL;
    int n = 0, added = 0;
    if (ts_rules_parse_string(text, name, &set, &n, err)) return err->code;
    if (reverses && ts_rules_add_reverses(&set, &n, &added, err)) {
        ts_rules_free(set, n);
        return err->code;
    }
    ts_rule *all = realloc(r->rules, sizeof *all * (size_t)(r->n + n + 1));
    if (!all) {
        ts_rules_free(set, n);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    r->rules = all;
    for (int i = 0; i < n; i++) {
        if (ts_rule_applicable(&set[i])) r->rules[r->n++] = set[i];
        else ts_rule_free(&set[i]);
    }
    free(set);
    return TS_OK;
}

ts_status ts_fuzz_rules_load(ts_fuzz_rules **out, ts_error *err)
{
    ts_fuzz_rules *r = calloc(1, sizeof *r);
    if (!r) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (add_set(r, ts_polyjuice_rules, "<built-in rules/polyjuice.rules>", true, err) ||
        add_set(r, ts_core_rules, "<built-in rules/core.rules>", false, err) ||
        add_set(r, ts_taso_rules, "<built-in rules/taso.rules>", true, err)) {
        ts_fuzz_rules_free(r);
        return err->code;
    }
    *out = r;
    return TS_OK;
}

void ts_fuzz_rules_free(ts_fuzz_rules *r)
{
    if (!r) return;
    ts_rules_free(r->rules, r->n);
    free(r);
}

void ts_fuzz_rules_set_rounds(void *rules, int rounds) { ((ts_fuzz_rules *)rules)->rounds = rounds; }

ts_status ts_fuzz_pair_make(void *rules, const ts_graph *g, uint64_t seed, ts_fuzz_pair *out, ts_error *err)
{
    const ts_fuzz_rules *r = rules;
    memset(out, 0, sizeof *out);
    ts_egraph *eg = NULL;
    ts_eclass_id *roots = NULL;
    int nroots = 0;
    if (ts_egraph_from_graph(g, &eg, &roots, &nroots, err)) return err->code;
    ts_saturate_limits lim = {.max_nodes = 1500, .max_iters = r->rounds > 0 ? r->rounds : TS_FUZZ_ROUNDS, .time_s = 10};
    ts_saturate_stats ss = {0};
    ts_status st = ts_egraph_saturate(eg, r->rules, r->n, &lim, &ss, err);
    if (!st && !(out->original = ts_egraph_extract(eg, g, roots, nroots, TS_EXTRACT_SIMPLEST, seed, err))) st = err->code;
    if (!st && !(out->variant = ts_egraph_extract(eg, g, roots, nroots, TS_EXTRACT_COMPLEX, seed, err))) st = err->code;
    out->nroots = g->noutputs;
    out->applied = ss.applied;
    out->stop = ss.stop;
    free(roots);
    ts_egraph_free(eg);
    if (st) ts_fuzz_pair_free(out);
    return st;
}
