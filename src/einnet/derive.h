/* EinNet's derivation rules (paper section 4) and the search over them
 * (section 6).  Every rule maps an expression to an equal one (equal as
 * a function of the inputs, reads out of range being 0); each returns
 * false, leaving out untouched, where it does not apply.  Scopes never
 * share iterators (a scope's body uses only its own traversal and
 * summation iterators), which every rule keeps true. */
#ifndef TS_EINNET_DERIVE_H
#define TS_EINNET_DERIVE_H

#include "ein/expr.h"

/* Summation splitting: Sum_{P u Q} f  ->  Sum_P {L[trav, P] Sum_Q f}[trav, P]
 * for the summation iterators of scope s whose bit is set in `outer`
 * (P, neither empty nor all of them). */
bool ts_ein_split_sum(const ts_ein *e, int s, unsigned outer, ts_ein *out);

/* Variable substitution (a bijection of traversal iterators): in scope
 * s (not the root), traversal iterator at position p, a, is replaced by
 * t = x where x is index `ix` of a read in s's body, affine, coefficient 1
 * on a, over traversal iterators of s only: the body reads a as
 * t - (x - a), every reader of s reads position p at x of its indices.
 * Readers must read each position x involves at a plain iterator within
 * range, so no read that was out of range becomes in range. */
bool ts_ein_substitute(const ts_ein *e, int s, int p, const ts_ein_idx *ix, ts_ein *out);

/* Boundary tightening: a traversal iterator of a non-root scope, or a
 * summation iterator of any scope, whose body is a product that reads
 * (iterator + c) out of a tensor's range outside some interval, gets that
 * interval intersected into its range (the value is 0 outside it, so
 * readers lose nothing).  Returns whether any range changed. */
bool ts_ein_tighten(ts_ein *e);

/* Read extraction (expression splitting of one read into a scope): the
 * k-th read of an input in scope s's body becomes a read of a new
 * movement scope {L[its] A[idx]} at plain iterators, its traversal being
 * the read's iterators in order of appearance. */
bool ts_ein_extract_read(const ts_ein *e, int s, int k, ts_ein *out);

/* Traversal splitting (variable substitution a = f*a' + r, a bijection of
 * boxes): traversal iterator at position p of scope s, over [0, H) with f
 * dividing H, becomes a' over [0, H/f) at p and r over [0, f) at p+1 (the
 * row-major layout of the scope is unchanged).  Readers must read
 * position p at f*u + v with v over [0, f) and u within [0, H/f); they
 * then read (u, v).  A dilated or strided index h + d*k becomes
 * d*(h' + k) + r: the paper's "dilated G2BMM -> G2BMM" substitution. */
bool ts_ein_split_trav(const ts_ein *e, int s, int p, int64_t f, ts_ein *out);

/* Phase extraction: the k-th input read in scope s, whose indices are
 * plain iterators or f*(...) + a with a a traversal iterator of s over
 * [0, f) (the constant and every other coefficient multiples of f, the
 * dimension a multiple of f), becomes a read of a new movement scope
 * P[a..., i...] = X[..., f*y + a, ...] (the phases outermost, then the
 * input's dimensions, phased ones divided by f) at (a..., (x - a)/f ...).
 * A dilated convolution then reads P at unit steps: a regular
 * convolution over the phase images (space-to-batch). */
bool ts_ein_extract_phase(const ts_ein *e, int s, int k, ts_ein *out);

/* ------------------------------------------------------------- search */

typedef struct ts_ein_found {
    ts_ein e;
    char path[96]; /* rules applied, e.g. "split,subst,subst" */
} ts_ein_found;

typedef struct ts_ein_search_opts {
    int max_depth;  /* explorative derivation depth (paper: 7) */
    int max_states; /* distinct expressions visited at most */
    /* accepts an expression as a result (instantiable); NULL: none */
    bool (*accept)(const ts_ein *e, void *arg);
    void *arg;
    /* false: summation splitting, substitution, read extraction; true:
     * traversal splitting by the dilations/strides of the expression and
     * phase extraction only (the derivations toward a regular Conv over
     * phase images, a search of its own: mixed with the others, the
     * states of the first set would crowd them out of max_states) */
    bool phases;
} ts_ein_search_opts;

typedef struct ts_ein_search_stats {
    int visited, duplicates, depth_reached;
    bool truncated; /* max_states reached */
} ts_ein_search_stats;

/* Breadth-first explorative derivation from e: every rule at every place,
 * boundaries tightened after each step, duplicates dropped by
 * fingerprint.  Writes up to max accepted expressions (not e itself),
 * shallowest first; returns how many, -1 out of memory. */
int ts_ein_search(const ts_ein *e, const ts_ein_search_opts *o, ts_ein_found *found, int max,
                  ts_ein_search_stats *st);

#endif
