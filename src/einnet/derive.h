/* EinNet's derivation rules (paper section 4) and the search over them
 * (section 6).  Every rule maps an expression to an equal one (equal as
 * a function of the inputs, reads out of range being 0); each returns
 * false, leaving out untouched, where it does not apply.  Scopes never
 * share iterators (a scope's body uses only its own traversal and
 * summation iterators), which every rule keeps true. */
#ifndef TS_EINNET_DERIVE_H
#define TS_EINNET_DERIVE_H

#include "einnet/expr.h"

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
