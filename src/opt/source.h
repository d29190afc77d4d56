/* The source interface of the optimize pipeline (DESIGN.md, "source
 * interface"): a transformation source is given a graph and proposes
 * candidate rewrites of it, each named after what justifies it (a rule
 * `tsopt verify` proved, a PET mutant whose boxes were checked and
 * corrected, an EinNet derivation).  The driver (driver.c) owns costing,
 * deduplication, the frontier, alpha, budgets, progress and the stop
 * reason; it never names a source, and a source never sees the driver's
 * internals: it only hands candidates to `emit`.
 *
 * The pattern is SQLite's virtual-table module (STYLE-ANCHORS.md): a
 * struct of function pointers with a name, registered in one list
 * (sources.c), with per-run state the source allocates itself. */
#ifndef TS_OPT_SOURCE_H
#define TS_OPT_SOURCE_H

#include "cost/cost.h"
#include "rules/apply.h"

/* Handed to a source's propose(): the driver's side of one graph. */
typedef struct ts_source_emit {
    /* Takes ownership of g (a rewrite of the graph being expanded).  `what`
     * names the rewrite for the report (a rule name, "pet:conv-batch");
     * it must stay valid until the source is closed.  `count` is how many
     * rewrites g stands for (a whole-graph merge of 8 siblings is 7).
     * Returns false when the driver wants no more candidates (time is up,
     * a stop was asked, or an error): the source returns at once. */
    bool (*fn)(struct ts_source_emit *e, ts_graph *g, const char *what, int count);
    /* True when the source must return now (time is up, a stop was asked):
     * a source that may work long between two proposals asks it often. */
    bool (*stopped)(struct ts_source_emit *e);
    /* After fn returned true: how much cheaper (ms, by the driver's cost
     * model) the candidate just handed over is than the graph it rewrites;
     * negative when it costs more, NAN when it was not costed (a graph
     * seen before).  A source whose rewrite depends only on a local
     * pattern may remember a loss and not propose that rewrite of that
     * pattern again (einnet does): costing is most of a search's time. */
    double gain;
    void *driver;
} ts_source_emit;

/* What a source may use while it runs. */
typedef struct ts_source_env {
    const ts_optimize_opts *opts;
    ts_costdb *db;      /* measured cost model (to rank its own mutants, as PET does) */
    ts_const_cache *cc; /* memo of concatenated weights shared by all candidates */
} ts_source_env;

typedef struct ts_source {
    const char *name;          /* as given to --transforms */
    const char *justification; /* how its rewrites are justified, for the report */
    /* Loads what the source needs (rules, ...); *state is passed back below. */
    ts_status (*open)(const ts_source_env *env, void **state, ts_error *err);
    /* Proposes rewrites of g through emit.  An error here ends the search;
     * a rewrite that does not fit g is simply not proposed. */
    ts_status (*propose)(void *state, const ts_graph *g, ts_source_emit *emit, ts_error *err);
    /* One line for the report (what was loaded); may be NULL. */
    void (*describe)(void *state, char *buf, size_t n);
    void (*close)(void *state);
    /* Optional: a clean-up pass over any source's candidate (PET's layout
     * cancelling), run by ts_sources_tidy; returns rewrites made or -1.
     * Sources reach each other's passes only through it. */
    int (*tidy)(ts_graph *g, ts_error *err);
} ts_source;

/* The registered sources, NULL-terminated, in the order they are run. */
extern const ts_source *const ts_sources[];

/* Resolves a --transforms list ("taso,pet"; NULL or "" = every source)
 * into sources[], *n of them; an unknown name is an error listing the
 * known ones. */
ts_status ts_sources_select(const char *list, const ts_source **sources, int *n, ts_error *err);
/* Every registered source's tidy pass on g, in registry order: the
 * rewrites made, or -1 (err set). */
int ts_sources_tidy(ts_graph *g, ts_error *err);

extern const ts_source ts_source_taso;
extern const ts_source ts_source_pet;
extern const ts_source ts_source_einnet;

#endif
