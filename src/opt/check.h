/* The optimize pipeline's final check (check.c). */
#ifndef TS_OPT_CHECK_H
#define TS_OPT_CHECK_H

#include "tsopt.h"

/* Runs g0 and g1 with the fast runtime on the same seeded random inputs
 * and gives the largest scaled difference of their outputs in *worst:
 * max |a-b| / (1e-4 * max(1, max|a|) + 1e-3 * |a|), so <= 1 means every
 * output matches within rtol 1e-3, atol 1e-4 (atol scaled by the output's
 * magnitude).  Integer outputs must be equal (else infinity); NaN matches
 * NaN and an infinity the same infinity. */
ts_status ts_opt_check(const ts_graph *g0, const ts_graph *g1, uint64_t seed, double *worst, ts_error *err);

typedef struct ts_check_result {
    double worst;     /* the largest scaled difference over every comparison made */
    int regions;      /* rewritten regions: connected groups of nodes that are not the original's own */
    int boundary;     /* values compared around opaque nodes (their inputs, the graph's outputs) */
    double region_worst;
    bool whole;       /* the whole models were run and compared (both runnable) */
    bool user_inputs; /* ... on the caller's inputs */
    double whole_worst;
    char why_not_whole[256]; /* when !whole: why (one line) */
    char worst_at[256];      /* where the largest stretch difference was: "value 'y' (the original's 'x')" */
    bool out_of_time;        /* the time limit ended the check before it compared everything: nothing is
                                judged, worst covers only what was compared; keep the original */
} ts_check_result;

/* The check of a rewritten graph g1 against its original g0 (same inputs
 * and outputs; docs/onnx-models.md):
 *   - the whole model, when tsopt can run both: on `inputs` (g0->ninputs
 *     tensors of the inputs' dtypes and shapes) when given, else on seeded
 *     random inputs;
 *   - around opaque nodes (src/ops/opaque.h), when there are any: they
 *     must be the original's, unchanged; the stretches between them are
 *     run on both sides from the same seeded random tensors at the graph's
 *     inputs and the opaque nodes' outputs, and compared at the opaque
 *     nodes' inputs and the graph's outputs.  TS_ERR_UNSUPPORTED when an
 *     opaque node is missing or changed, or a stretch cannot run.
 * r->regions counts the rewritten regions either way.
 * time_limit (seconds, 0: none) bounds the check as the optimizer's limit
 * bounds its search: polled before each plan is built and run, a run that
 * would end past it (judged by the longest run so far) is not started, and
 * r->out_of_time is set (TS_OK: running out of time is not an error). */
ts_status ts_opt_check_all(const ts_graph *g0, const ts_graph *g1, uint64_t seed, ts_tensor *const *inputs,
                           double time_limit, ts_check_result *r, ts_error *err);

/* Reads DIR/NAME.npy for every graph input of g (NAME sanitized as `tsopt
 * run` names them) into out[0..g->ninputs): each must have the input's
 * dtype and shape. */
ts_status ts_opt_inputs_load(const ts_graph *g, const char *dir, ts_tensor **out, ts_error *err);

#endif
