/* MPI for the tsopt command (dist.h): start, shared counter, gathers. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dist/dist.h"

static int g_rank, g_size = 1;
static bool g_started;

/* At exit.  The first process may still work alone for minutes (the
 * generator's last stages, the fuzz merge) while the others are done:
 * they wait in a barrier polled every 2 ms, not in MPI_Finalize's busy
 * wait, which would take a core from it. */
static void finish(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    MPI_Finalize();
}

/* Launched as part of an MPI job: Open MPI's, PMIx's or PMI's variables.
 * Without them MPI_Init would start a singleton runtime (a daemon, seconds)
 * for nothing. */
static bool launched(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return true;
    return false;
}

int ts_dist_start(void)
{
    if (g_started) return g_size;
    g_started = true;
    if (!launched()) return 1;
    int provided;
    /* the generator's threads ask the shared counter one at a time */
    MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED) {
        fprintf(stderr, "tsopt: error: the MPI library gives no MPI_THREAD_SERIALIZED\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    atexit(finish);
    return g_size;
}

int ts_dist_rank(void)
{
    return g_rank;
}

int ts_dist_size(void)
{
    return g_size;
}

void ts_dist_abort(int rc)
{
    if (g_size > 1) MPI_Abort(MPI_COMM_WORLD, rc);
    exit(rc);
}

/* The counter lives in a window on the root; MPI_Fetch_and_op is an atomic
 * read-and-add that the root need not take part in (passive target). */
struct ts_dist_counter {
    MPI_Win win;
    long *base;
    long local; /* one process: a plain counter */
};

ts_dist_counter *ts_dist_counter_open(void)
{
    ts_dist_counter *c = calloc(1, sizeof *c);
    if (!c) ts_dist_abort(1);
    if (g_size == 1) return c;
    MPI_Win_allocate(g_rank == 0 ? (MPI_Aint)sizeof(long) : 0, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &c->base,
                     &c->win);
    if (g_rank == 0) *c->base = 0;
    MPI_Barrier(MPI_COMM_WORLD); /* the root's zero is in place before anyone adds */
    MPI_Win_lock_all(MPI_MODE_NOCHECK, c->win);
    return c;
}

long ts_dist_counter_next(ts_dist_counter *c)
{
    if (g_size == 1) return c->local++;
    long one = 1, got;
    MPI_Fetch_and_op(&one, &got, MPI_LONG, 0, 0, MPI_SUM, c->win);
    MPI_Win_flush(0, c->win);
    return got;
}

void ts_dist_counter_close(ts_dist_counter *c)
{
    if (!c) return;
    if (g_size > 1) {
        MPI_Win_unlock_all(c->win);
        MPI_Win_free(&c->win);
    }
    free(c);
}

void ts_dist_or_to_root(void *buf, size_t bytes)
{
    if (g_size == 1) return;
    /* in pieces: MPI counts are int */
    for (size_t off = 0; off < bytes; off += 1u << 30) {
        int n = (int)(bytes - off < (1u << 30) ? bytes - off : 1u << 30);
        char *p = (char *)buf + off;
        MPI_Reduce(g_rank == 0 ? MPI_IN_PLACE : p, g_rank == 0 ? p : NULL, n, MPI_BYTE, MPI_BOR, 0, MPI_COMM_WORLD);
    }
}

long ts_dist_sum(long v)
{
    if (g_size == 1) return v;
    long s;
    MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return s;
}

void ts_dist_report_work(FILE *f, const char *unit, long count, double secs)
{
    if (g_size == 1) return;
    double mine[2] = {(double)count, secs}, *all = g_rank == 0 ? malloc(sizeof mine * (size_t)g_size) : NULL;
    if (g_rank == 0 && !all) ts_dist_abort(1);
    MPI_Gather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (g_rank != 0) return;
    double lo = -1, hi = 0;
    for (int r = 0; r < g_size; r++) {
        fprintf(f, "  rank %d: %.0f %s, %.1f s\n", r, all[2 * r], unit, all[2 * r + 1]);
        if (lo < 0 || all[2 * r] < lo) lo = all[2 * r];
        if (all[2 * r] > hi) hi = all[2 * r];
    }
    fprintf(f, "  %s: largest/smallest process %.3f\n", unit, lo > 0 ? hi / lo : 0.0);
    free(all);
}
