/* dist.h without MPI (CMake found none): every command runs as one
 * process, as it does outside mpirun. */
#include <stdlib.h>
#include "dist/dist.h"

int ts_dist_start(void)
{
    return 1;
}

int ts_dist_rank(void)
{
    return 0;
}

int ts_dist_size(void)
{
    return 1;
}

void ts_dist_abort(int rc)
{
    exit(rc);
}

struct ts_dist_counter {
    long next;
};

ts_dist_counter *ts_dist_counter_open(void)
{
    ts_dist_counter *c = calloc(1, sizeof *c);
    if (!c) exit(1);
    return c;
}

long ts_dist_counter_next(ts_dist_counter *c)
{
    return c->next++;
}

void ts_dist_counter_close(ts_dist_counter *c)
{
    free(c);
}

void ts_dist_or_to_root(void *buf, size_t bytes)
{
    (void)buf;
    (void)bytes;
}

long ts_dist_sum(long v)
{
    return v;
}

void ts_dist_report_work(FILE *f, const char *unit, long count, double secs)
{
    (void)f, (void)unit, (void)count, (void)secs;
}

const gen_dist *ts_dist_gen_hooks(int threads)
{
    (void)threads;
    return NULL;
}

void ts_dist_gen_report(FILE *f)
{
    (void)f;
}

ts_status ts_dist_fuzz(const ts_fuzz_opts *o, ts_fuzz_stats *st, ts_error *err)
{
    return ts_fuzz_run(o, st, err);
}
