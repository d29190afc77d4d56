/* Rounds of timed runs and the evidence that another process disturbed
 * them (rounds.h), judged against the same graph's best round.
 *
 * Evidence per half-round (one graph, several runs), all read around the
 * runs, never inside them:
 * - run delay: the time the process's threads were runnable but waited for
 *   a CPU (/proc/self/task/N/schedstat, second field; the kernel's
 *   sched_info).  The direct measure: a sleeping thread (passive wait) is
 *   not runnable and costs nothing here, a thread pushed off its core by
 *   another process is;
 * - CPU share: process CPU time / (wall time x threads).  Spinning threads
 *   burn a full core each when undisturbed, sleeping ones less; so it is
 *   compared with the same graph's best round, not with 1.  Catches what
 *   run delay cannot see: time the hypervisor took (the guest thinks its
 *   task ran) and kernels without sched_info;
 * - runnable tasks: /proc/loadavg's running count less this process's own
 *   running threads, the fewer of the counts before and after the runs (a
 *   competing job is runnable in both, a passing kworker in one), against
 *   the cores the graph leaves idle (a serial graph with sleeping workers
 *   keeps one core busy: one other task on the second core shows no run
 *   delay and no change in its times);
 * - steal: /proc/stat's steal time, CPU the hypervisor gave elsewhere;
 * - spread: a median run several times the same graph's best round is a
 *   collapse, whatever the other signals say. */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "measure/rounds.h"
#include "measure/wait_policy.h"
#include "util/clock.h"

/* Thresholds (docs/runtime.md, "Comparing two graphs under load", has the
 * measurements they come from). */
/* Threads waited for a CPU more than TS_WAIT_DELAY_MAX of the wall time
 * (summed over threads; the wait policy's threshold, wait_policy.h).
 * 2-core machine, quiet: 0.2-0.6% (nasrnn spinning, nasnet_a sleeping:
 * wake-ups of sleeping threads cost next to nothing here); beside one busy
 * loop 30% (nasnet_a sleeping) to over 100% (nasrnn spinning: both threads
 * wait). */
/* CPU share below this fraction of the same graph's best round. */
#define SHARE_DROP 0.75
/* Stolen CPU time above this fraction of the wall time. */
#define STEAL_FRAC 0.08
/* A median run this many times the same graph's best round median. */
#define COLLAPSE 2.0

int ts_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ts_median(double *v, long n)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, ts_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ------------------------------------------------------------- judging */

enum { NREASONS = 5 };

/* Counts of rounds flagged per reason and the evidence to quote. */
typedef struct evidence {
    int rounds[NREASONS];
    double worst[NREASONS]; /* largest wait (per thread) and steal fractions, others, spread; smallest share ratio */
} evidence;

static void note(evidence *ev, int reason, double v, bool smaller_is_worse)
{
    if (smaller_is_worse ? v < ev->worst[reason] : v > ev->worst[reason]) ev->worst[reason] = v;
}

/* "threads waited for a CPU 41% of their time in 6 rounds" */
static int describe(char *buf, size_t n, const evidence *ev, int reason)
{
    int k = ev->rounds[reason];
    const char *s = k == 1 ? "" : "s";
    switch (reason) {
    case 0:
        return snprintf(buf, n, "threads waited for a CPU %.0f%% of their time in %d round%s", 100 * ev->worst[0], k,
                        s);
    case 1: return snprintf(buf, n, "CPU share %.2f of the best round's in %d round%s", ev->worst[1], k, s);
    case 2:
        return snprintf(buf, n, "%.0f other task%s runnable in %d round%s", ev->worst[2], ev->worst[2] == 1 ? "" : "s",
                        k, s);
    case 3: return snprintf(buf, n, "hypervisor stole %.0f%% in %d round%s", 100 * ev->worst[3], k, s);
    default: return snprintf(buf, n, "runs %.1fx the best round's in %d round%s", ev->worst[4], k, s);
    }
}

/* The reason that flagged most rounds, and the second one when `two`:
 * "A; B". */
static void describe_top(char *buf, size_t n, const evidence *ev, bool two)
{
    int a = -1, b = -1;
    for (int i = 0; i < NREASONS; i++) {
        if (!ev->rounds[i]) continue;
        if (a < 0 || ev->rounds[i] > ev->rounds[a]) b = a, a = i;
        else if (b < 0 || ev->rounds[i] > ev->rounds[b]) b = i;
    }
    buf[0] = 0;
    if (a < 0) return;
    int w = describe(buf, n, ev, a);
    if (two && b >= 0 && w > 0 && (size_t)w + 2 < n) {
        memcpy(buf + w, "; ", 3);
        describe(buf + w + 2, n - (size_t)w - 2, ev, b);
    }
}

void ts_measure_say(ts_measure_result *r, const char *fmt, ...)
{
    size_t w = strlen(r->why);
    va_list ap;
    va_start(ap, fmt);
    if (w + 1 < sizeof r->why) vsnprintf(r->why + w, sizeof r->why - w, fmt, ap);
    va_end(ap);
}

/* Sets x->flags from its evidence against its graph's best round. */
static void flag_sample(ts_measure_sample *x, double best_share, double best_med, const ts_measure_machine *m,
                        int threads, evidence *ev)
{
    double wall = x->wall_ms > 0 ? x->wall_ms : 1e-9;
    double share = x->cpu_ms / (wall * threads);
    x->flags = 0;
    if (x->wait_ms >= 0 && x->wait_ms > TS_WAIT_DELAY_MAX * wall) {
        x->flags |= TS_MEASURE_WAITED;
        note(ev, 0, x->wait_ms / (wall * threads), false);
    }
    if (best_share > 0 && share < SHARE_DROP * best_share) {
        x->flags |= TS_MEASURE_CPU_SHARE;
        note(ev, 1, share / best_share, true);
    }
    /* cores this graph leaves idle when undisturbed: a serial graph with
     * sleeping workers keeps one core busy, spinning workers keep all of
     * theirs */
    double idle = m->cores - best_share * threads;
    if (x->others >= 0 && x->others > (idle > 0 ? floor(idle + 0.5) : 0)) {
        x->flags |= TS_MEASURE_OTHERS;
        note(ev, 2, x->others, false);
    }
    if (x->steal_ms >= 0 && x->steal_ms > STEAL_FRAC * wall) {
        x->flags |= TS_MEASURE_STOLEN;
        note(ev, 3, x->steal_ms / wall, false);
    }
    if (isfinite(best_med) && x->med_ms > COLLAPSE * best_med) {
        x->flags |= TS_MEASURE_COLLAPSE;
        note(ev, 4, x->med_ms / best_med, false);
    }
}

int ts_measure_judge_runs(ts_measure_sample *s, int n, const ts_measure_machine *m)
{
    int threads = m->threads > 0 ? m->threads : 1, clean = 0;
    double best_share = 0, best_med = INFINITY;
    for (int i = 0; i < n; i++) {
        if (s[i].wall_ms > 0) best_share = fmax(best_share, s[i].cpu_ms / (s[i].wall_ms * threads));
        if (s[i].med_ms > 0) best_med = fmin(best_med, s[i].med_ms);
    }
    evidence ev = {.worst = {0, INFINITY, 0, 0, 0}};
    for (int i = 0; i < n; i++) {
        flag_sample(&s[i], best_share, best_med, m, threads, &ev);
        clean += !s[i].flags;
    }
    return clean;
}

int ts_measure_judge(ts_measure_sample *s, int n, const ts_measure_machine *m, const ts_measure_opts *o,
                     ts_measure_result *r)
{
    memset(r, 0, sizeof *r);
    int min_rounds = o->min_rounds > 0 ? o->min_rounds : TS_MEASURE_MIN_ROUNDS;
    int threads = m->threads > 0 ? m->threads : 1;
    n -= n % 2;
    if (n > 2 * TS_MEASURE_MAX_ROUNDS) n = 2 * TS_MEASURE_MAX_ROUNDS;

    /* References per graph: its best round (the least disturbed). */
    double best_share[2] = {0, 0}, best_med[2] = {INFINITY, INFINITY};
    for (int i = 0; i < n; i++) {
        int g = s[i].graph ? 1 : 0;
        if (s[i].wall_ms > 0) best_share[g] = fmax(best_share[g], s[i].cpu_ms / (s[i].wall_ms * threads));
        if (s[i].med_ms > 0) best_med[g] = fmin(best_med[g], s[i].med_ms);
    }
    evidence ev = {.worst = {0, INFINITY, 0, 0, 0}};
    double med[2][TS_MEASURE_MAX_ROUNDS], mins[2] = {INFINITY, INFINITY};
    int clean = 0;
    for (int k = 0; k < n / 2; k++) {
        unsigned round_flags = 0;
        for (int h = 0; h < 2; h++) {
            ts_measure_sample *x = &s[2 * k + h];
            int g = x->graph ? 1 : 0;
            flag_sample(x, best_share[g], best_med[g], m, threads, &ev);
            round_flags |= x->flags;
        }
        for (int i = 0; i < NREASONS; i++) ev.rounds[i] += (round_flags >> i) & 1;
        if (round_flags || s[2 * k].graph == s[2 * k + 1].graph) continue;
        for (int h = 0; h < 2; h++) {
            const ts_measure_sample *x = &s[2 * k + h];
            int g = x->graph ? 1 : 0;
            med[g][clean] = x->med_ms;
            mins[g] = fmin(mins[g], x->min_ms);
        }
        clean++;
    }
    r->rounds = clean;
    r->discarded = n / 2 - clean;
    char evid[160];
    describe_top(evid, sizeof evid, &ev, clean < min_rounds);
    if (clean < min_rounds) {
        r->busy = r->discarded > 0;
        if (r->busy)
            ts_measure_say(r, "busy (another process competes): %d of %d rounds undisturbed, %d needed%s%s", clean, n / 2,
                min_rounds, *evid ? "; " : "", evid);
        else
            ts_measure_say(r, "undecided: %d round%s fit in the budget, %d needed", clean, clean == 1 ? "" : "s", min_rounds);
        return clean;
    }
    r->min0_ms = mins[0];
    r->min1_ms = mins[1];
    r->median0_ms = ts_median(med[0], clean);
    r->median1_ms = ts_median(med[1], clean);
    double gain = 100 * (1 - r->min1_ms / r->min0_ms);
    r->faster = r->min1_ms <= r->min0_ms * (1 - o->min_gain / 100) && r->median1_ms <= r->median0_ms;
    ts_measure_say(r, "%s: fastest %.4g -> %.4g ms (%+.1f%%, -%g%% needed), median %.4g -> %.4g ms, %d rounds",
        r->faster ? "faster" : "not faster", r->min0_ms, r->min1_ms, -gain, o->min_gain, r->median0_ms, r->median1_ms,
        clean);
    if (r->discarded) ts_measure_say(r, " (%d discarded: %s)", r->discarded, evid);
    return clean;
}

/* ---------------------------------------------------------- measuring */

static bool read_text(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t k = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[k] = 0;
    return k > 0;
}

/* Run delay summed over this process's threads, and how many of them are
 * running or runnable now (state R, the reader included).  A thread that
 * exited takes its delay along; differences are clamped at 0. */
static void read_tasks(double *wait_ms, double *slices, int *running)
{
    *wait_ms = -1;
    *slices = -1;
    *running = -1;
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    double wait = 0, nslices = 0;
    int run = 0;
    bool any_wait = false, any_state = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[96], buf[512];
        unsigned long long on_cpu, delay, pcount;
        snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", e->d_name);
        if (read_text(path, buf, sizeof buf) && sscanf(buf, "%llu %llu %llu", &on_cpu, &delay, &pcount) == 3) {
            wait += (double)delay * 1e-6;
            nslices += (double)pcount;
            any_wait = true;
        }
        snprintf(path, sizeof path, "/proc/self/task/%.20s/stat", e->d_name);
        const char *paren = read_text(path, buf, sizeof buf) ? strrchr(buf, ')') : NULL;
        if (paren && paren[1] == ' ' && paren[2]) {
            run += paren[2] == 'R';
            any_state = true;
        }
    }
    closedir(d);
    if (any_wait) *wait_ms = wait, *slices = nslices;
    if (any_state) *running = run;
}

static double read_steal_ms(void)
{
    char buf[256];
    unsigned long long v[8];
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0 || !read_text("/proc/stat", buf, sizeof buf) ||
        sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
               &v[7]) != 8)
        return -1;
    return (double)v[7] * 1e3 / (double)hz;
}

void ts_measure_probe_take(ts_measure_probe *p)
{
    int own = 0;
    read_tasks(&p->wait_ms, &p->slices, &own);
    struct rusage ru;
    p->preempted = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_nivcsw : -1;
    char buf[128];
    int others = read_text("/proc/loadavg", buf, sizeof buf) ? ts_wait_others_runnable(buf) : -1;
    /* ts_wait_others_runnable discounts the reader only; discount all our
     * running threads (spinning OpenMP workers are runnable) */
    p->others = others >= 0 && own >= 1 ? (others + 1 - own > 0 ? others + 1 - own : 0) : -1;
    p->steal_ms = read_steal_ms();
    p->cpu_ms = ts_clock_cpu_ms();
    p->wall_ms = ts_clock_ms();
}

static double delta(double a, double b)
{
    return a < 0 || b < 0 ? -1 : b - a > 0 ? b - a : 0;
}

void ts_measure_sample_between(ts_measure_sample *s, const ts_measure_probe *a, const ts_measure_probe *b)
{
    s->wall_ms = b->wall_ms - a->wall_ms;
    s->cpu_ms = b->cpu_ms - a->cpu_ms;
    s->wait_ms = delta(a->wait_ms, b->wait_ms);
    s->slices = delta(a->slices, b->slices);
    s->preempted = delta(a->preempted, b->preempted);
    s->steal_ms = delta(a->steal_ms, b->steal_ms);
    s->others = a->others < 0 ? b->others : b->others < 0 ? a->others : a->others < b->others ? a->others : b->others;
    s->flags = 0;
}
