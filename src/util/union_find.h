/* The one union-find of the tree (issue 27, "one union-find"), over a
 * parent array the caller owns (up[x] == x: x is a root): the e-graph's
 * classes (egraph/unionfind.c grows the array), PET's linear regions
 * (pet/mltp.c), the cost model's fused groups (cost/cost.c) and the
 * checker's rewritten regions (opt/check.c). */
#ifndef TS_UTIL_UNION_FIND_H
#define TS_UTIL_UNION_FIND_H

#include <stdbool.h>
#include <stdint.h>

/* x's root; halves the path on the way (later finds are shorter). */
static inline int32_t ts_uf_root(int32_t *up, int32_t x)
{
    while (up[x] != x) x = up[x] = up[up[x]];
    return x;
}

/* x's root without writing (for readers of a shared array). */
static inline int32_t ts_uf_root_const(const int32_t *up, int32_t x)
{
    while (up[x] != x) x = up[x];
    return x;
}

/* Joins a's and b's sets under b's root; false when already joined. */
static inline bool ts_uf_join(int32_t *up, int32_t a, int32_t b)
{
    a = ts_uf_root(up, a);
    b = ts_uf_root(up, b);
    if (a == b) return false;
    up[a] = b;
    return true;
}

#endif
