/* The keep decision on alternating rounds (keep.h). */
#include <math.h>
#include <stdlib.h>
#include "measure/rounds.h"
#include "opt/keep.h"

#define WALSH_MAX (TS_KEEP_MAX_ROUNDS * (TS_KEEP_MAX_ROUNDS + 1) / 2)

/* The largest c with P(T+ <= c) <= alpha under the null (T+ the sum of the
 * ranks 1..n given a + sign, each sign a fair coin), or -1 when even
 * P(T+ = 0) = 2^-n exceeds alpha. */
static int critical(int n, double alpha)
{
    int m = n * (n + 1) / 2;
    double count[WALSH_MAX + 1] = {1}; /* count[s]: sign patterns whose + ranks sum to s */
    for (int r = 1; r <= n; r++)
        for (int s = m; s >= r; s--) count[s] += count[s - r];
    double cdf = 0, total = ldexp(1, n);
    int c = -1;
    for (int s = 0; s <= m; s++) {
        cdf += count[s] / total;
        if (cdf > alpha) break;
        c = s;
    }
    return c;
}

void ts_keep_hl_bound(const double *x, int n, double alpha, double *estimate, double *upper)
{
    if (n < 1) {
        *estimate = NAN;
        *upper = INFINITY;
        return;
    }
    if (n > TS_KEEP_MAX_ROUNDS) n = TS_KEEP_MAX_ROUNDS;
    /* the Walsh averages (x_i + x_j) / 2, i <= j: as many of them exceed
     * a value t as T+ counts for x - t, so the bound is an order statistic
     * of them, and their median the estimate */
    static _Thread_local double w[WALSH_MAX];
    int m = 0;
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++) w[m++] = (x[i] + x[j]) / 2;
    *estimate = ts_median(w, m); /* sorts w */
    /* P(theta >= the (c+1)-th largest average) = P(T+ <= c) <= alpha */
    int c = critical(n, alpha);
    *upper = c < 0 ? INFINITY : w[m - 1 - c];
}

void ts_keep_decide(const double *fast0, const double *fast1, const double *med0, const double *med1, int n,
                    double min_gain, ts_keep_verdict *v)
{
    double lf[TS_KEEP_MAX_ROUNDS] = {0}, lm[TS_KEEP_MAX_ROUNDS] = {0};
    int k = 0;
    for (int i = 0; i < n && k < TS_KEEP_MAX_ROUNDS; i++) {
        if (!(fast0[i] > 0 && fast1[i] > 0 && med0[i] > 0 && med1[i] > 0)) continue; /* NaN too */
        lf[k] = log(fast1[i] / fast0[i]);
        lm[k] = log(med1[i] / med0[i]);
        k++;
    }
    double ef, uf, em, um;
    ts_keep_hl_bound(lf, k, TS_KEEP_ALPHA, &ef, &uf);
    ts_keep_hl_bound(lm, k, TS_KEEP_ALPHA, &em, &um);
    v->ratio = exp(ef);
    v->ratio_upper = exp(uf);
    v->ratio_med = exp(em);
    v->faster = k >= TS_KEEP_MIN_ROUNDS && uf < 0 && v->ratio <= 1 - min_gain / 100 && em <= 0;
}

/* Before 12-07 the score was the larger of the per-round ratio and the
 * fastest run over the original's, so a graph had to look faster both
 * ways.  With 2 to 15 single runs each at load 13-20 the fastest runs come
 * from different moments: resnext50's group-conv-as-blocks (by hand x1.111,
 * 1-thread CPU time) had per round 0.677 and its fastest run 241 ms against
 * the original's 125 ms over 5 rounds, and the original was written without
 * the keep decision ever timing it. */
int ts_keep_rank_choose(const double *fast, const double *ratio, const double *pred, int n, double tie)
{
    int k = 0;
    double best = 1;
    for (int i = 1; i < n; i++)
        if (!isnan(fast[i]) && ratio[i] < best) { /* NaN ratios never compare below */
            best = ratio[i];
            k = i;
        }
    /* within tie of the lowest, the prediction decides (keep.h: why) */
    for (int i = 1; i < n && k; i++)
        if (!isnan(fast[i]) && ratio[i] < 1 && ratio[i] <= best + tie && pred[i] < pred[k]) k = i;
    return k;
}
