/* The optimize pipeline's final check (check.c). */
#ifndef TS_OPT_CHECK_H
#define TS_OPT_CHECK_H

#include "tsopt.h"

/* Runs g0 and g1 with the fast runtime on the same seeded random inputs
 * and gives the largest scaled difference of their outputs in *worst:
 * max |a-b| / (1e-4 * max(1, max|a|) + 1e-3 * |a|), so <= 1 means every
 * output matches within rtol 1e-3, atol 1e-4 (atol scaled by the output's
 * magnitude).  Integer outputs must be equal (else infinity). */
ts_status ts_opt_check(const ts_graph *g0, const ts_graph *g1, uint64_t seed, double *worst, ts_error *err);

#endif
