/* The keep decision on alternating rounds (docs/optimize.md, "The keep
 * decision in ONNX Runtime"): is the result faster than the original,
 * judged on the ratios of rounds timed side by side on a shared machine?
 *
 * Each round runs the original and the result back to back (the order
 * alternating), so load that comes and goes hits either half as often:
 * for two graphs that run alike, a round's log ratio is as likely to be
 * +x as -x.  That symmetry is what Wilcoxon's signed-rank test assumes, so
 * its confidence bound on the median log ratio (the Hodges-Lehmann
 * estimate) holds at any load; and as it weighs each round by the size of
 * its ratio, a few rounds lost by a little to a burst of load no longer
 * outvote a gain of x2 (the "3 of every 4 rounds" count did: nasrnn, x2,
 * dropped at load 12). */
#ifndef TS_OPT_KEEP_H
#define TS_OPT_KEEP_H

#include <stdbool.h>

/* One-sided confidence of the bound: a result no faster than the original
 * is kept with probability at most TS_KEEP_ALPHA. */
#define TS_KEEP_ALPHA 0.05
/* Rounds the decision needs: with 5 (2^-5 < 0.05) a bound needs every
 * round won, with 6 one in three may go to a burst of load. */
#define TS_KEEP_MIN_ROUNDS 6
/* Rounds the decision reads at most. */
#define TS_KEEP_MAX_ROUNDS 64

/* The Hodges-Lehmann estimate of the median of x[0..n-1] and its one-sided
 * upper confidence bound at 1 - alpha (Wilcoxon signed-rank, exact null
 * distribution; INFINITY when n is too small for alpha).  n <= TS_KEEP_MAX_ROUNDS. */
void ts_keep_hl_bound(const double *x, int n, double alpha, double *estimate, double *upper);

typedef struct ts_keep_verdict {
    double ratio;       /* result / original: the Hodges-Lehmann estimate over the rounds' fastest runs */
    double ratio_upper; /* its upper bound at 1 - TS_KEEP_ALPHA (INFINITY: too few rounds) */
    double ratio_med;   /* the same estimate over the rounds' median runs */
    bool faster;
} ts_keep_verdict;

/* Round k timed the original fastest fast0[k] and median med0[k] ms, the
 * result fast1[k] and med1[k].  Faster when the result is faster with
 * confidence 1 - TS_KEEP_ALPHA (ratio_upper < 1) on the fastest runs
 * (load only adds time to a run: the fastest of a half-round is its
 * steadiest figure), gains min_gain percent (ratio <= 1 - min_gain/100),
 * and its typical run is not slower (ratio_med <= 1: a result faster only
 * in its best runs is not kept).  Rounds with a non-positive time are
 * skipped; fewer than TS_KEEP_MIN_ROUNDS usable rounds: not faster. */
void ts_keep_decide(const double *fast0, const double *fast1, const double *med0, const double *med1, int n,
                    double min_gain, ts_keep_verdict *v);

/* The ranking of graphs timed whole before the keep decision (optimize.c
 * ort_rank): ratio[i] is graph i's per-round ratio to the original (the
 * median over rounds of its run over the original's run in the same
 * round), fast[i] its fastest run (NaN: not timed), for i in 1..n-1.
 * Returns the graph with the lowest per-round ratio when that is below 1,
 * else 0 (none looked faster); of the graphs whose ratio is below 1 and
 * within tie of the lowest, the one with the lowest pred[i] (the target's
 * prediction, ms): the ranking's rounds do not resolve differences that
 * small, and taking the lowest then follows the noise.  lraspp (12-07,
 * loaded): resize-as-matmul alone 0.931, the same with two PET grouped-conv
 * mutants 0.924 (chosen), which measured 1.020 of it in five separate
 * 1-thread processes (1.004-1.046), and whose region sums said so (10.611
 * against 10.601 ms); optimize passes --min-gain as tie, a difference the
 * keep decision would not act on.  The fastest runs only mark graphs not
 * timed: at load, a few single runs' minima come from different moments
 * (keep.c says what they did); the keep decision refuses a chosen graph
 * that is not faster. */
int ts_keep_rank_choose(const double *fast, const double *ratio, const double *pred, int n, double tie);

#endif
