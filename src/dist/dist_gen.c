/* tsopt generate over MPI (docs/distributed.md, "generate").
 *
 * 1. Enumeration: the first operators are dealt out one at a time through
 *    the shared counter, so a process that drew cheap ones draws more.
 * 2. Exchange: fingerprint fp belongs to process (fp >> 32) * N >> 32 (the
 *    fingerprint is already a hash, so this is a hash partition in which
 *    each process's share of a sorted table is one contiguous slice); one
 *    all-to-all sends every record to its owner, which merges the N sorted
 *    runs.  Equal fingerprints now meet in one process.
 * 3. Pairs are formed and tested (second shape set, TASO's syntactic
 *    checks, the float test) where their graphs meet, as in one process.
 * 4. Gather: the candidate pairs' records (64 bytes a pair) go to the
 *    root, sorted by content, and the root runs the rest of the pipeline
 *    (renaming, common subgraph, shape set 2, subsumption; with the
 *    threads of the processes on its node, which wait) and writes the
 *    file.  Which process enumerated or tested what never shows in it. */
#define _GNU_SOURCE /* sched_setaffinity, cpu_set_t */
#include <mpi.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dist/dist.h"
#include "util/clock.h"

/* Work of one process, for the report. */
typedef struct work {
    long claimed, enumerated, owned, replayed, pairs, candidates;
    long evals1, evals_test; /* operators evaluated: set-1 replay, pair tests */
    double t_enum, t_exchange, t_pairs;
    double c_enum, c_exchange, c_pairs; /* CPU seconds (all threads): walls on a shared node are noise */
} work;

static struct {
    ts_dist_counter *ctr;
    work me, *all; /* all: the root's copy of every process's */
    double t0, t1, c0, c1;
    int threads;
    cpu_set_t node_cpus; /* the root: the cores the processes on its node may use */
} g;

static gen_dist hooks; /* below */

static long claim(void *arg)
{
    (void)arg;
    long f = ts_dist_counter_next(g.ctr);
    g.me.claimed++;
    return f;
}

static int owner(uint64_t fp, int n)
{
    return (int)(((fp >> 32) * (uint64_t)n) >> 32);
}

static MPI_Datatype record_type(void)
{
    MPI_Datatype t;
    MPI_Type_contiguous((int)sizeof(gen_graph), MPI_BYTE, &t);
    MPI_Type_commit(&t);
    return t;
}

static ts_status exchange(void *arg, gen_graph **gsp, size_t *ngp, gen_stats *st, ts_error *err)
{
    (void)arg;
    double t = ts_clock_s(), c = ts_clock_cpu_s();
    g.me.t_enum = t - g.t0;
    g.me.c_enum = c - g.c0;
    g.me.claimed -= g.threads; /* each thread's last claim found nothing */
    ts_dist_counter_close(g.ctr);
    g.ctr = NULL;
    int n = ts_dist_size();
    gen_graph *gs = *gsp;
    size_t ng = *ngp;
    g.me.enumerated = (long)ng;
    /* seq numbers each process's records from 0; the pair stage replays
     * its graphs in seq order so that neighbours share their first
     * operators' results.  Offset by the records of the processes before
     * this one, a seq names one graph job-wide: each owner's replay order
     * is then each sender's depth-first order, one sender after another
     * (with colliding numbers it alternated between senders, so no two
     * consecutive replays shared a prefix). */
    long before = 0;
    MPI_Exscan(&g.me.enumerated, &before, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (ts_dist_rank() == 0) before = 0; /* MPI_Exscan leaves it undefined */
    for (size_t i = 0; i < ng; i++) gs[i].seq = ((uint32_t)before + gs[i].seq) & ((1u << 29) - 1);
    int *cnt = calloc((size_t)n * 4, sizeof *cnt);
    if (!cnt) ts_dist_abort(1);
    int *sdisp = cnt + n, *rcnt = cnt + 2 * n, *rdisp = cnt + 3 * n;
    for (size_t i = 0; i < ng; i++) cnt[owner(gs[i].fp, n)]++; /* sorted: owners ascend */
    MPI_Alltoall(cnt, 1, MPI_INT, rcnt, 1, MPI_INT, MPI_COMM_WORLD);
    size_t total = 0;
    for (int r = 0; r < n; r++) {
        sdisp[r] = r ? sdisp[r - 1] + cnt[r - 1] : 0;
        total += (size_t)rcnt[r];
    }
    if (total > (size_t)1 << 31) {
        free(cnt);
        return ts_error_set(err, TS_ERR_NOMEM, "generate: %zu records for one process: run more processes", total);
    }
    /* This process's own slice stays in its buffer (it used to travel
     * through MPI into the receive buffer too): only the others' records
     * are received.  Fresh memory is what costs here: on this VM first
     * touching 512 MB took 1.8 s of CPU against 0.05 s to copy 512 MB
     * already mapped (12-07, loaded), and at 4 operators a rank's receive
     * buffer was ~1 GB of its ~7 s exchange; at 2 processes it halves. */
    int me = ts_dist_rank();
    size_t own = (size_t)cnt[me], own_at = (size_t)sdisp[me], remote = total - own;
    cnt[me] = rcnt[me] = 0;
    for (int r = 0, at = 0; r < n; r++) {
        rdisp[r] = at;
        at += rcnt[r];
    }
    gen_graph *in = malloc((remote ? remote : 1) * sizeof *in);
    if (!in) ts_dist_abort(1); /* the others wait in the all-to-all */
    MPI_Datatype rt = record_type();
    MPI_Alltoallv(gs, cnt, sdisp, rt, in, rcnt, rdisp, rt, MPI_COMM_WORLD);
    MPI_Type_free(&rt);
    /* Merge the n sorted runs into the send buffer, whose pages are
     * already mapped, its own run moved to the tail first.  In place is
     * safe: when k records are written, i of them from the own run, the
     * own run's next record is at remote + i >= k, and is the one written
     * at k only once every remote record is taken. */
    size_t cap = total > ng ? total : ng;
    gen_graph *out = realloc(gs, (cap ? cap : 1) * sizeof *out);
    const gen_graph **head = malloc(2 * (size_t)n * sizeof *head), **end = head + n;
    if (!out || !head) ts_dist_abort(1);
    memmove(out + remote, out + own_at, own * sizeof *out);
    for (int r = 0; r < n; r++) {
        head[r] = r == me ? out + remote : in + rdisp[r];
        end[r] = r == me ? out + total : head[r] + rcnt[r];
    }
    for (size_t k = 0; k < total; k++) {
        int best = -1;
        for (int r = 0; r < n; r++) {
            if (head[r] == end[r]) continue;
            /* gen_graph_cmp's order; fingerprints rarely tie */
            const gen_graph *a = head[r], *b = best < 0 ? NULL : head[best];
            if (!b || a->fp < b->fp || (a->fp == b->fp && gen_graph_cmp(a, b) < 0)) best = r;
        }
        const gen_graph *src = head[best]++;
        if (src != &out[k]) out[k] = *src;
    }
    free(head);
    free(in);
    free(cnt);
    *gsp = out;
    *ngp = total;
    g.me.owned = (long)total;
    st->graphs = (uint64_t)ts_dist_sum((long)ng);
    g.t1 = ts_clock_s();
    g.c1 = ts_clock_cpu_s();
    g.me.t_exchange = g.t1 - t;
    g.me.c_exchange = g.c1 - c;
    return TS_OK;
}

static int cmp_pair(const void *pa, const void *pb)
{
    const gen_graph *a = pa, *b = pb;
    int c = gen_graph_cmp(&a[0], &b[0]);
    return c ? c : gen_graph_cmp(&a[1], &b[1]);
}

static ts_status gather(void *arg, gen_graph **prp, size_t *npairp, gen_stats *st, ts_error *err)
{
    (void)arg;
    (void)err;
    int n = ts_dist_size(), rank = ts_dist_rank();
    g.me.replayed = (long)st->replayed;
    g.me.pairs = (long)st->pairs;
    g.me.candidates = (long)*npairp;
    g.me.t_pairs = ts_clock_s() - g.t1;
    g.me.c_pairs = ts_clock_cpu_s() - g.c1;
    /* the counts of the pair stage, summed on the root */
    g.me.evals1 = (long)st->evals1;
    g.me.evals_test = (long)st->evals_test;
    uint64_t c[8] = {st->pairs1, st->same_dag, st->replayed, st->pairs, st->syntactic, st->float_fail, st->evals1,
                     st->evals_test},
             sum[8];
    double cs[2] = {st->c_set1, st->c_tests}, csum[2];
    MPI_Reduce(c, sum, 8, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(cs, csum, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        st->pairs1 = sum[0], st->same_dag = sum[1], st->replayed = sum[2];
        st->pairs = sum[3], st->syntactic = sum[4], st->float_fail = sum[5];
        st->evals1 = sum[6], st->evals_test = sum[7], st->c_set1 = csum[0], st->c_tests = csum[1];
    }
    free(g.all);
    g.all = rank == 0 ? calloc((size_t)n, sizeof *g.all) : NULL;
    MPI_Gather(&g.me, (int)sizeof g.me, MPI_BYTE, g.all, (int)sizeof g.me, MPI_BYTE, 0, MPI_COMM_WORLD);
    /* the candidate pairs' records to the root */
    int mine = (int)(2 * *npairp), *rcnt = NULL, *rdisp = NULL;
    size_t total = 0;
    if (rank == 0) {
        rcnt = calloc((size_t)n * 2, sizeof *rcnt);
        if (!rcnt) ts_dist_abort(1);
        rdisp = rcnt + n;
    }
    MPI_Gather(&mine, 1, MPI_INT, rcnt, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int r = 0; rank == 0 && r < n; r++) {
        rdisp[r] = (int)total;
        total += (size_t)rcnt[r];
    }
    gen_graph *all = rank == 0 ? malloc((total ? total : 1) * sizeof *all) : NULL;
    if (rank == 0 && !all) ts_dist_abort(1);
    MPI_Datatype rt = record_type();
    MPI_Gatherv(*prp, mine, rt, all, rcnt, rdisp, rt, 0, MPI_COMM_WORLD);
    MPI_Type_free(&rt);
    free(rcnt);
    free(*prp);
    /* a fixed order: by content (seq, the enumeration position, depends on
     * which process enumerated what, and is not compared) */
    if (rank == 0) qsort(all, total / 2, 2 * sizeof *all, cmp_pair);
    /* The root now runs the last stages with root_threads threads while
     * its node's other processes sleep; under Open MPI's default binding
     * (a core each, up to two processes) its threads could all run on its
     * own core only: the quiet 4-operator runs bound took 8.1 + 15.0 s of
     * renaming and common-subgraph pruning, the one-thread times, against
     * 5.4 + 9.5 s unbound.  Its threads may now use the sleepers' cores
     * too (each thread's mask is its own: set in every pool thread; later
     * ones inherit the caller's). */
    if (rank == 0 && hooks.root_threads > g.threads) {
        sched_setaffinity(0, sizeof g.node_cpus, &g.node_cpus);
#pragma omp parallel num_threads(hooks.root_threads)
        sched_setaffinity(0, sizeof g.node_cpus, &g.node_cpus);
    }
    *prp = all;
    *npairp = total / 2;
    return TS_OK;
}

static gen_dist hooks = {.claim = claim, .exchange = exchange, .gather = gather};

const gen_dist *ts_dist_gen_hooks(int threads)
{
    if (ts_dist_size() == 1) return NULL;
    /* After the gather the root works alone (renaming, common subgraph,
     * shape sets 2 and 3 in threads; subsumption) while the processes on
     * its node wait for it asleep (dist_mpi.c's finish): it runs those
     * stages with their threads as well as its own. */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int on_node;
    MPI_Comm_size(node, &on_node);
    /* the union of their cores on the node's first process (world rank 0
     * is node rank 0 of its node: key 0 keeps the world order) */
    cpu_set_t mine;
    CPU_ZERO(&mine);
    CPU_ZERO(&g.node_cpus);
    if (sched_getaffinity(0, sizeof mine, &mine)) CPU_ZERO(&mine);
    MPI_Reduce(&mine, &g.node_cpus, (int)sizeof mine, MPI_BYTE, MPI_BOR, 0, node);
    MPI_Comm_free(&node);
    hooks.root_threads = threads * on_node;
    memset(&g.me, 0, sizeof g.me);
    g.threads = threads;
    g.ctr = ts_dist_counter_open();
    g.t0 = ts_clock_s();
    g.c0 = ts_clock_cpu_s();
    return &hooks;
}

void ts_dist_gen_report(FILE *f)
{
    if (!g.all) return;
    int n = ts_dist_size();
    fprintf(f, "work per process (first operators drawn, graphs enumerated, graphs owned after the exchange, "
               "graphs replayed on set 1, pairs tested, candidates; seconds, wall/CPU; operators evaluated by "
               "the set-1 replay and the pair tests):\n");
    long lo = -1, hi = 0;
    for (int r = 0; r < n; r++) {
        const work *w = &g.all[r];
        fprintf(f, "  rank %d: %ld first, %ld enumerated, %ld owned, %ld replayed, %ld pairs, %ld candidates; "
                   "enumerate %.1f/%.1f s, exchange %.1f/%.1f s, pairs %.1f/%.1f s; operators evaluated %ld set 1, "
                   "%ld tests\n",
                r, w->claimed, w->enumerated, w->owned, w->replayed, w->pairs, w->candidates, w->t_enum, w->c_enum,
                w->t_exchange, w->c_exchange, w->t_pairs, w->c_pairs, w->evals1, w->evals_test);
        long work_units = w->enumerated + w->replayed;
        if (lo < 0 || work_units < lo) lo = work_units;
        if (work_units > hi) hi = work_units;
    }
    fprintf(f, "  graphs evaluated (enumerated + replayed): largest/smallest process %.3f\n",
            lo > 0 ? (double)hi / (double)lo : 0.0);
    free(g.all);
    g.all = NULL;
}
