/* Distributed generate, verify and fuzz over MPI (docs/distributed.md).
 *
 * This module is linked only into the tsopt command, never into
 * libtsopt.so or the Python package: the library exposes hooks (gen_dist
 * in taso/gen.h, a pair stride in fuzz/fuzz.h) and this module fills them
 * with MPI calls.  Built from dist_mpi.c, dist_gen.c and dist_fuzz.c when
 * CMake finds MPI, else from dist_none.c, where everything runs as one
 * process.  A process started without mpirun (or srun) never initializes
 * MPI: every command works as it always did. */
#ifndef TS_DIST_H
#define TS_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "fuzz/fuzz.h"
#include "taso/gen.h"

/* Initializes MPI when this process is one of an MPI job's (mpirun, srun);
 * idempotent.  Returns the number of processes (1 without MPI). */
int ts_dist_start(void);
int ts_dist_rank(void);
int ts_dist_size(void);
/* Ends every process of the job with status rc (an error one process
 * cannot recover from while the others wait for it). */
void ts_dist_abort(int rc);

/* A counter shared by every process: each call returns the next number
 * (0, 1, 2, ... over the whole job).  Collective open and close. */
typedef struct ts_dist_counter ts_dist_counter;
ts_dist_counter *ts_dist_counter_open(void);
long ts_dist_counter_next(ts_dist_counter *c);
void ts_dist_counter_close(ts_dist_counter *c);

/* Bitwise OR of every process's buffer into the root's (collective): the
 * way results computed by one process each are gathered, when the others
 * leave their entries zero. */
void ts_dist_or_to_root(void *buf, size_t bytes);
/* Sum of a long over the processes, on every process. */
long ts_dist_sum(long v);

/* Gathers every process's work count and busy seconds; the root prints
 * one line each and the ratio of the largest count to the smallest.
 * Collective; nothing with one process. */
void ts_dist_report_work(FILE *f, const char *unit, long count, double secs);

/* generate: the hooks for gen_config (NULL with one process); after the
 * run, the root prints one line of work counts per process to f. */
const gen_dist *ts_dist_gen_hooks(int threads);
void ts_dist_gen_report(FILE *f);

/* fuzz: runs the campaign of o on every process (process r tests pairs r,
 * r+N, ...) and merges the results into o->dir on the root: findings
 * renumbered in pair order and deduplicated by their minimized form,
 * counts summed.  st is the merged summary on the root. */
ts_status ts_dist_fuzz(const ts_fuzz_opts *o, ts_fuzz_stats *st, ts_error *err);

#endif
