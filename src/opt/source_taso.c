/* TASO as a source (paper section 5): every match of every rule in the
 * rule set is one candidate, and so is merging the MatMul/Conv siblings
 * reading one value (core-matmul-merge / core-conv-merge-* applied to all
 * of them at once, opt/passes.h) -- where the whole-graph merge pass was
 * not cheaper, merging at one input may be.  Every rewrite is justified by
 * a rule `tsopt verify` proves. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "opt/passes.h"
#include "opt/source.h"

typedef struct taso_state {
    const ts_source_env *env;
    ts_rule *rules;
    int nrules, loaded, reversed, usable;
    bool shared; /* rules are the built-in set (never freed here) */
    char origin[300];
} taso_state;

/* Appends src[0..m) to *dst (which grows); the rules move, src's array
 * is freed.  False out of memory (then both are freed by the caller). */
static bool append_rules(ts_rule **dst, int *n, ts_rule *src, int m)
{
    ts_rule *t = realloc(*dst, sizeof *t * (size_t)(*n + m + 1));
    if (!t) return false;
    memcpy(t + *n, src, sizeof *t * (size_t)m);
    *dst = t;
    *n += m;
    free(src);
    return true;
}

/* The default set: the hand-written core rules as written (in the
 * direction that pays: merges), then the generated and proved set
 * (rules/taso.rules) in both directions -- the generator keeps one
 * orientation of each equivalence (rule.h), and TASO's pruning argument
 * needs both.  Parsed once per process and shared, read-only, by every
 * search: the fuzzer optimizes thousands of small graphs, and parsing
 * the ~1,800 rules took most of each optimize call. */
static struct {
    pthread_once_t once;
    ts_rule *rules;
    int nrules, core, reversed;
    ts_error err;
} builtin = {.once = PTHREAD_ONCE_INIT};

static void parse_builtin(void)
{
    ts_rule *gen = NULL;
    int ngen = 0;
    ts_error *err = &builtin.err;
    ts_status st = ts_rules_parse_string(ts_core_rules, "<built-in core rules>", &builtin.rules, &builtin.nrules, err);
    builtin.core = builtin.nrules;
    if (!st) st = ts_rules_parse_string(ts_taso_rules, "<built-in rules/taso.rules>", &gen, &ngen, err);
    if (!st) st = ts_rules_add_reverses(&gen, &ngen, &builtin.reversed, err);
    if (!st && !append_rules(&builtin.rules, &builtin.nrules, gen, ngen)) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    else if (!st)
        gen = NULL;
    ts_rules_free(gen, ngen);
    if (st) {
        ts_rules_free(builtin.rules, builtin.nrules);
        builtin.rules = NULL;
        builtin.nrules = 0;
    }
}

static ts_status load_default(taso_state *s, ts_error *err)
{
    pthread_once(&builtin.once, parse_builtin);
    if (builtin.err.code) {
        *err = builtin.err;
        return err->code;
    }
    s->rules = builtin.rules;
    s->nrules = builtin.nrules;
    s->shared = true;
    s->reversed = builtin.reversed;
    s->loaded = builtin.nrules - builtin.reversed;
    snprintf(s->origin, sizeof s->origin,
             "the built-in rules (rules/core.rules: %d, as written; rules/taso.rules: %d, generated and proved)",
             builtin.core, s->loaded - builtin.core);
    return TS_OK;
}

static ts_status taso_open(const ts_source_env *env, void **out, ts_error *err)
{
    taso_state *s = calloc(1, sizeof *s);
    if (!s) return ts_error_set(err, TS_ERR_NOMEM, "out of memory loading rules");
    s->env = env;
    const char *path = env->opts->rules_path;
    ts_status st;
    if (path) {
        /* a rule file is used both ways, like the generated set */
        st = ts_rules_parse_file(path, &s->rules, &s->nrules, err);
        s->loaded = s->nrules;
        if (!st) st = ts_rules_add_reverses(&s->rules, &s->nrules, &s->reversed, err);
        snprintf(s->origin, sizeof s->origin, "%s", path);
    } else {
        st = load_default(s, err);
    }
    if (st) {
        if (!s->shared) ts_rules_free(s->rules, s->nrules);
        free(s);
        return st;
    }
    for (int i = 0; i < s->nrules; i++) s->usable += ts_rule_applicable(&s->rules[i]);
    *out = s;
    return TS_OK;
}

typedef struct match_ctx {
    taso_state *s;
    const ts_graph *g;
    const ts_rule *rule;
    ts_source_emit *emit;
    ts_error *err;
    bool failed, stop;
} match_ctx;

static bool on_match(const ts_match *m, void *arg)
{
    match_ctx *c = arg;
    ts_graph *ng = NULL;
    if (ts_rule_apply_cached(c->g, c->rule, m, c->s->env->cc, &ng, c->err)) {
        c->failed = true;
        return false;
    }
    if (ng && !c->emit->fn(c->emit, ng, c->rule->name, 1)) c->stop = true;
    return !c->stop;
}

static ts_status taso_propose(void *state, const ts_graph *g, ts_source_emit *emit, ts_error *err)
{
    taso_state *s = state;
    int vals[256];
    int nv = ts_merge_candidates(g, vals, 256);
    for (int i = 0; i < nv && !emit->stopped(emit); i++) {
        ts_graph *ng = ts_graph_copy(g);
        if (!ng) return ts_error_set(err, TS_ERR_NOMEM, "out of memory in search");
        int n = ts_merge_siblings(ng, vals[i], s->env->cc, err);
        if (n <= 0) {
            ts_graph_free(ng);
            if (n < 0 && err->code == TS_ERR_NOMEM) return err->code;
            *err = (ts_error){0}; /* a merge that does not fit is not proposed */
            continue;
        }
        if (!emit->fn(emit, ng, "merge-siblings", n)) return TS_OK;
    }
    ts_match_index ix;
    if (ts_match_index_build(&ix, g, err)) return err->code;
    match_ctx c = {.s = s, .g = g, .emit = emit, .err = err};
    for (int r = 0; r < s->nrules && !c.failed && !c.stop && !emit->stopped(emit); r++) {
        c.rule = &s->rules[r];
        ts_match_all(&ix, c.rule, on_match, &c);
    }
    ts_match_index_free(&ix);
    return c.failed ? err->code : TS_OK;
}

static void taso_describe(void *state, char *buf, size_t n)
{
    taso_state *s = state;
    snprintf(buf, n, "%d rules from %s, %d of them also applied right to left; %d of the %d usable by the matcher",
             s->loaded, s->origin, s->reversed, s->usable, s->nrules);
}

static void taso_close(void *state)
{
    taso_state *s = state;
    if (!s) return;
    if (!s->shared) ts_rules_free(s->rules, s->nrules);
    free(s);
}

const ts_source ts_source_taso = {
    .name = "taso",
    .justification = "substitution rules proved by `tsopt verify` (Z3, operator axioms)",
    .open = taso_open,
    .propose = taso_propose,
    .describe = taso_describe,
    .close = taso_close,
};
