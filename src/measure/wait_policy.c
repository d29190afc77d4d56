/* How idle OpenMP threads wait, decided while the process runs.
 *
 * A plan run is hundreds of parallel regions a few microseconds apart.
 * Between two of them libgomp's idle threads spin, then sleep on a futex.
 * On a quiet machine spinning is the fast choice (a sleeping thread's core
 * has dropped into an idle state by the next region: nasnet_a 15.0 ms
 * sleeping vs 10.3-10.7 ms spinning, docs/runtime.md).  Once another
 * process wants a core it is the slow one: a spinning thread holds a core
 * that the thread it waits for needs, and a region cannot end before every
 * thread of its team got a CPU, 8-100x slower.  Sleeping threads keep
 * their place: the scheduler favours a task that wakes up over one that
 * used up its share.
 *
 * libgomp reads its wait policy once, when it is loaded, and keeps the spin
 * count in a hidden variable; only one thing changes it later: with more
 * OpenMP threads than CPUs it spins a throttled count (100 iterations,
 * about 2-4 us, or GOMP_SPINCOUNT when lower: libgomp's documentation of
 * GOMP_SPINCOUNT; config/linux/wait.h compares its managed-thread count
 * with the CPUs at every wait).  So the sleeping mode here is a helper
 * thread that owns a team of idle OpenMP threads, enough to pass the CPU
 * count; they sleep and cost nothing, and when the helper exits libgomp
 * frees them and full spinning is back.  No environment, no re-exec, and
 * the same for the tsopt command and for libtsopt inside any program.
 *
 * When to switch (ts_wait_ctl_*): spinning until the team's threads wait
 * for a CPU (schedstat's run delay, sampled on some runs) more than
 * TS_WAIT_DELAY_MAX of their time while other tasks take more than the
 * cores the team leaves free (/proc/stat less the team's CPU: a task that
 * preempts a thread for a moment is no competitor); sleeping until the
 * other processes' CPU use (/proc/stat less our own) leaves the team its
 * cores, looked at after TS_WAIT_QUIET_MS, a wait that doubles while
 * spinning keeps failing. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "measure/wait_policy.h"
#include "util/clock.h"

int ts_wait_others_runnable(const char *loadavg)
{
    double l1, l5, l15;
    int running, total;
    if (!loadavg || sscanf(loadavg, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) != 5) return -1;
    if (running < 1 || total < running) return -1;
    return running - 1;
}

/* ---- the decision ---- */

void ts_wait_ctl_init(ts_wait_ctl *c, double now_ms)
{
    *c = (ts_wait_ctl){.mode = TS_WAIT_SPIN, .since_ms = now_ms, .quiet_ms = TS_WAIT_QUIET_MS};
}

static void enter(ts_wait_ctl *c, int mode, double now_ms)
{
    c->mode = mode;
    c->since_ms = now_ms;
    c->win_ms = c->win_delay_ms = 0;
    c->strikes = 0;
}

/* Other processes left the team its cores (plus the margin). */
static bool others_leave_cores(double others_cores, int cores, int threads)
{
    int spare = cores > threads ? cores - threads : 0;
    return others_cores >= 0 && others_cores <= spare + TS_WAIT_QUIET_MARGIN;
}

int ts_wait_ctl_run(ts_wait_ctl *c, double now_ms, double wall_ms, double delay_ms, int threads,
                    double others_cores, int cores)
{
    if (c->mode != TS_WAIT_SPIN || threads < 2 || !(wall_ms > 0)) return c->mode;
    c->win_ms += wall_ms;
    c->win_delay_ms += delay_ms > 0 ? delay_ms : 0;
    if (c->win_ms < TS_WAIT_WINDOW_MS) return c->mode;
    c->last_share = c->win_delay_ms / c->win_ms;
    bool busy = c->win_delay_ms > TS_WAIT_DELAY_MAX * c->win_ms;
    c->windows++;
    c->busy_windows += busy;
    c->win_ms = c->win_delay_ms = 0;
    c->strikes = busy ? c->strikes + 1 : 0;
    if (!busy) {
        /* spinning held long enough: the last look at the machine was right */
        if (now_ms - c->since_ms >= TS_WAIT_SPIN_OK_MS) c->quiet_ms = TS_WAIT_QUIET_MS;
        return c->mode;
    }
    /* one disturbed window can be a moment's noise (a process exiting,
     * the kernel freeing its memory); a competitor disturbs the next too */
    if (c->strikes < TS_WAIT_STRIKES) return c->mode;
    /* confirmed by the machine's CPU use: waiting without a competitor
     * (a short task, an interrupt storm) is not helped by sleeping, and a
     * false switch costs TS_WAIT_QUIET_MS or more of slow sleeping runs */
    if (isnan(others_cores)) return c->mode; /* not measurable yet: strikes stay */
    if (others_leave_cores(others_cores, cores, threads)) {
        c->vetoed++;
        return c->mode;
    }
    /* spinning that failed soon after a look said quiet: look less often */
    if (c->to_spin && now_ms - c->since_ms < TS_WAIT_SPIN_OK_MS) {
        c->quiet_ms *= 2;
        if (c->quiet_ms > TS_WAIT_QUIET_MAX_MS) c->quiet_ms = TS_WAIT_QUIET_MAX_MS;
    }
    c->to_sleep++;
    enter(c, TS_WAIT_SLEEP, now_ms);
    return c->mode;
}

bool ts_wait_ctl_look_due(const ts_wait_ctl *c, double now_ms)
{
    return c->mode == TS_WAIT_SLEEP && now_ms - c->since_ms >= c->quiet_ms;
}

int ts_wait_ctl_look(ts_wait_ctl *c, double now_ms, double others_cores, int cores, int threads)
{
    if (c->mode != TS_WAIT_SLEEP) return c->mode;
    if (others_leave_cores(others_cores, cores, threads)) {
        c->to_spin++;
        enter(c, TS_WAIT_SPIN, now_ms);
    } else {
        c->since_ms = now_ms; /* still busy: look again after the same wait */
    }
    return c->mode;
}

bool ts_wait_parse_schedstat(const char *text, uint64_t *wait_ns)
{
    unsigned long long run, wait;
    if (!text || sscanf(text, "%llu %llu", &run, &wait) != 2) return false;
    *wait_ns = wait;
    return true;
}

bool ts_wait_parse_stat(const char *text, uint64_t *busy_ticks)
{
    unsigned long long v[8];
    if (!text || strncmp(text, "cpu ", 4) ||
        sscanf(text + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &v[6], &v[7]) != 8)
        return false;
    /* user nice system [idle iowait] irq softirq steal; guest time is
     * already inside user */
    *busy_ticks = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return true;
}

bool ts_wait_parse_stat_cpus(const char *text, const unsigned char *allowed, int nallowed, uint64_t *busy_ticks)
{
    uint64_t sum = 0;
    bool any = false;
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, "cpu", 3) || line[3] < '0' || line[3] > '9') continue;
        int cpu;
        unsigned long long v[8];
        if (sscanf(line + 3, "%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5], &v[6], &v[7]) != 9)
            continue;
        if (cpu < 0 || cpu >= nallowed || !allowed[cpu]) continue;
        sum += v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        any = true;
    }
    if (any) *busy_ticks = sum;
    return any;
}

/* ---- the process's policy ---- */

enum { SRC_ADAPTIVE, SRC_SPIN, SRC_SLEEP, SRC_USER };

/* The machine's busy ticks and our CPU time at one moment. */
typedef struct cpu_anchor {
    uint64_t busy;
    double cpu_ms, t_ms;
    bool ok;
} cpu_anchor;

/* A helper thread owning `extra` idle OpenMP threads (see the top). */
typedef struct sleeper {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int extra;
    atomic_int team; /* the team it got: extra + 1 unless libgomp gave fewer */
    bool stop;
} sleeper;

static struct {
    pthread_once_t once;
    int source;
    const char *name;
    char user_name[32]; /* a copy: the environment may change later */
    bool user_sleep; /* SRC_USER: OMP_WAIT_POLICY=passive */
    int cores;
    long clk_tck;
    unsigned char *allowed; /* the CPUs we may run on when fewer than the machine's: their /proc/stat lines */
    int nallowed;
    pthread_mutex_t mu; /* the fields below */
    ts_wait_ctl ctl;
    sleeper *helper;
    int helper_threads; /* the team size the helper's count was made for */
    atomic_bool broken; /* a helper could not start: spin from now on */
    cpu_anchor look;              /* sleeping: the machine's and our CPU use when the mode began */
    atomic_int spin_epoch;        /* bumped when spinning (re)starts: the teams' anchors start afresh */
    atomic_int mode;
    atomic_long spin_runs, sleep_runs;
    atomic_llong spin_us, sleep_us; /* wall time of the runs begun in each mode */
    bool trace;                     /* TSOPT_WAIT_TRACE: one stderr line per switch, with its evidence */
    bool trace_windows;             /* TSOPT_WAIT_TRACE=2: and one per judged window */
    double t_start_ms;
} W = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static atomic_int fork_gen; /* team probes opened before a fork name the parent's threads */

static void after_fork_in_child(void)
{
    /* the helper thread does not exist in the child */
    W.helper = NULL;
    pthread_mutex_init(&W.mu, NULL);
    atomic_fetch_add(&fork_gen, 1);
    ts_wait_ctl_init(&W.ctl, ts_clock_ms());
    if (W.source == SRC_ADAPTIVE) atomic_store(&W.mode, TS_WAIT_SPIN);
    atomic_fetch_add(&W.spin_epoch, 1); /* the child's clocks start again */
}

static void setup(void)
{
    const char *omp = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT"), *ts = getenv("TSOPT_WAIT");
    W.cores = omp_get_num_procs();
    W.clk_tck = sysconf(_SC_CLK_TCK);
    cpu_set_t mask;
    long online = sysconf(_SC_NPROCESSORS_CONF);
    if (sched_getaffinity(0, sizeof mask, &mask) == 0 && online > 0 && CPU_COUNT(&mask) < online &&
        (W.allowed = calloc(CPU_SETSIZE, 1))) {
        W.nallowed = CPU_SETSIZE;
        for (int c = 0; c < CPU_SETSIZE; c++) W.allowed[c] = CPU_ISSET(c, &mask) != 0;
    }
    const char *tr = getenv("TSOPT_WAIT_TRACE");
    W.trace = tr && *tr && strcmp(tr, "0");
    W.trace_windows = W.trace && !strcmp(tr, "2");
    W.t_start_ms = ts_clock_ms();
    ts_wait_ctl_init(&W.ctl, W.t_start_ms);
    if (omp || spin) {
        /* the user chose for libgomp: leave it alone */
        W.source = SRC_USER;
        snprintf(W.user_name, sizeof W.user_name, "%s", omp ? omp : "spin");
        W.name = W.user_name;
        W.user_sleep = omp && !strcasecmp(omp, "passive");
    } else if (ts && !strcmp(ts, "spin")) {
        W.source = SRC_SPIN;
        W.name = "spin";
    } else if (ts && !strcmp(ts, "sleep")) {
        W.source = SRC_SLEEP;
        W.name = "sleep";
    } else {
        if (ts && *ts && strcmp(ts, "adaptive"))
            fprintf(stderr, "tsopt: TSOPT_WAIT='%s' is not spin, sleep or adaptive; using adaptive\n", ts);
        W.source = SRC_ADAPTIVE;
        W.name = "adaptive";
    }
    atomic_store(&W.mode, W.source == SRC_USER ? (W.user_sleep ? TS_WAIT_SLEEP : TS_WAIT_SPIN) : TS_WAIT_SPIN);
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

const char *ts_wait_policy_name(void)
{
    pthread_once(&W.once, setup);
    return W.name;
}

bool ts_wait_threads_sleep(void)
{
    pthread_once(&W.once, setup);
    return atomic_load_explicit(&W.mode, memory_order_relaxed) == TS_WAIT_SLEEP;
}

void ts_wait_get_stats(ts_wait_stats *s)
{
    pthread_once(&W.once, setup);
    pthread_mutex_lock(&W.mu);
    *s = (ts_wait_stats){.spin_runs = atomic_load(&W.spin_runs),
                         .sleep_runs = atomic_load(&W.sleep_runs),
                         .spin_ms = (double)atomic_load(&W.spin_us) * 1e-3,
                         .sleep_ms = (double)atomic_load(&W.sleep_us) * 1e-3,
                         .to_sleep = W.ctl.to_sleep,
                         .to_spin = W.ctl.to_spin,
                         .windows = W.ctl.windows,
                         .busy_windows = W.ctl.busy_windows,
                         .vetoed = W.ctl.vetoed};
    pthread_mutex_unlock(&W.mu);
}

static void *sleeper_main(void *arg)
{
    sleeper *s = arg;
    /* this thread's own pool: `extra` OpenMP threads that, once the region
     * ends, wait on its dock (throttled spin, then a futex) until we exit */
#pragma omp parallel num_threads(s->extra + 1)
    {
        /* (a region with an empty body is compiled away) */
        if (omp_get_thread_num() == 0) atomic_store(&s->team, omp_get_num_threads());
    }
    pthread_mutex_lock(&s->mu);
    while (!s->stop) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    return NULL; /* libgomp's thread destructor ends the pool's threads */
}

/* Under W.mu. */
static void helper_stop(void)
{
    sleeper *s = W.helper;
    if (!s) return;
    W.helper = NULL;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Under W.mu.  Enough idle threads that libgomp's count (the initial
 * thread, the team's threads, ours) passes the CPUs. */
static bool helper_start(int threads)
{
    helper_stop();
    int extra = W.cores + 1 - threads;
    if (extra < 1) return true; /* more threads than CPUs: libgomp throttles already */
    sleeper *s = calloc(1, sizeof *s);
    if (!s) return false;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->extra = extra;
    pthread_attr_t a;
    pthread_t t;
    bool ok = pthread_attr_init(&a) == 0;
    if (ok) {
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        ok = pthread_create(&t, &a, sleeper_main, s) == 0;
        pthread_attr_destroy(&a);
    }
    if (!ok) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s);
        return false;
    }
    W.helper = s;
    W.helper_threads = threads;
    return true;
}

static bool read_file(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t k = read(fd, buf, n - 1);
    close(fd);
    if (k <= 0) return false;
    buf[k] = 0;
    return true;
}

/* Busy ticks of the CPUs we may use: the first line of /proc/stat, or
 * the allowed CPUs' lines when the process may use fewer than all. */
static bool read_busy(uint64_t *busy)
{
    char buf[16384]; /* the cpu lines come first; the rest may be cut */
    if (!read_file("/proc/stat", buf, W.allowed ? sizeof buf : 512)) return false;
    return W.allowed ? ts_wait_parse_stat_cpus(buf, W.allowed, W.nallowed, busy) : ts_wait_parse_stat(buf, busy);
}

static cpu_anchor anchor_now(void)
{
    cpu_anchor a = {.t_ms = ts_clock_ms()};
    a.ok = read_busy(&a.busy);
    a.cpu_ms = ts_clock_cpu_ms();
    return a;
}

/* The other processes' cores since `a` (at least min_ms ago), -1 unknown,
 * NAN when the stretch is too short for jiffy-resolution counts. */
static double others_since(const cpu_anchor *a, double min_ms)
{
    uint64_t busy;
    double interval_ms = ts_clock_ms() - a->t_ms;
    if (!a->ok || W.clk_tck <= 0) return -1;
    if (!(interval_ms >= min_ms) || !(interval_ms > 0)) return NAN;
    if (!read_busy(&busy) || busy < a->busy) return -1;
    double all_ms = (double)(busy - a->busy) * 1e3 / (double)W.clk_tck;
    double ours_ms = ts_clock_cpu_ms() - a->cpu_ms;
    double others = (all_ms - ours_ms) / interval_ms;
    return others > 0 ? others : 0;
}

/* Under W.mu: remember the machine's and our CPU use as the sleeping mode
 * begins (or is looked at). */
static void look_anchor(void)
{
    W.look = anchor_now();
}

/* Under W.mu: the other processes' cores since the anchor, -1 unknown. */
static double look_others(void)
{
    double o = others_since(&W.look, 0);
    return isnan(o) ? -1 : o;
}

/* Under W.mu: make libgomp's waiting match the controller's mode. */
static void apply(int mode, int threads)
{
    if (mode == TS_WAIT_SLEEP && !helper_start(threads)) {
        /* no helper, no sleeping: spin as libgomp does by default */
        atomic_store(&W.broken, true);
        mode = TS_WAIT_SPIN;
        ts_wait_ctl_init(&W.ctl, ts_clock_ms());
    }
    if (mode == TS_WAIT_SPIN) {
        helper_stop();
        /* a switch weighs only what happened while spinning */
        atomic_fetch_add(&W.spin_epoch, 1);
    }
    if (mode == TS_WAIT_SLEEP) look_anchor();
    atomic_store(&W.mode, mode);
}

void ts_wait_set_mode(int mode, int threads)
{
    pthread_once(&W.once, setup);
    if (W.source == SRC_USER || (mode != TS_WAIT_SPIN && mode != TS_WAIT_SLEEP)) return;
    pthread_mutex_lock(&W.mu);
    double now = ts_clock_ms();
    if (W.ctl.mode != mode) {
        W.ctl.mode = mode;
        W.ctl.since_ms = now;
        W.ctl.win_ms = W.ctl.win_delay_ms = 0;
        W.ctl.strikes = 0;
    }
    apply(mode, threads);
    pthread_mutex_unlock(&W.mu);
}

/* ---- sampling the team's threads (per calling thread: each has its own
 * OpenMP pool) ---- */

#define PROBE_MAX 64

typedef struct team_probe {
    int threads; /* team size the files were opened for; 0 none */
    int gen;     /* fork_gen when opened */
    int n;
    int fd[PROBE_MAX];
} team_probe;

static _Thread_local team_probe probe;
static _Thread_local double next_sample_ms;

static void probe_close(void)
{
    for (int i = 0; i < probe.n; i++) close(probe.fd[i]);
    probe.n = probe.threads = 0;
}

/* The pool's threads live as long as teams do not shrink; a parallel
 * region names them. */
static void probe_open(int threads)
{
    probe_close();
    pid_t tid[PROBE_MAX] = {0};
#pragma omp parallel num_threads(threads)
    {
        int i = omp_get_thread_num();
        if (i < PROBE_MAX) tid[i] = (pid_t)syscall(SYS_gettid);
    }
    for (int i = 0; i < PROBE_MAX && i < threads; i++) {
        if (!tid[i]) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)tid[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) probe.fd[probe.n++] = fd;
    }
    probe.threads = threads;
    probe.gen = atomic_load(&fork_gen);
}

/* The team's summed run delay (and CPU time, when run_ns); false when a
 * thread is gone. */
static bool probe_read2(uint64_t *delay_ns, uint64_t *run_ns)
{
    uint64_t sum = 0, run = 0;
    for (int i = 0; i < probe.n; i++) {
        char buf[96];
        ssize_t k = pread(probe.fd[i], buf, sizeof buf - 1, 0);
        unsigned long long r, d;
        if (k <= 0) return false;
        buf[k] = 0;
        if (sscanf(buf, "%llu %llu", &r, &d) != 2) return false;
        sum += d;
        run += r;
    }
    *delay_ns = sum;
    if (run_ns) *run_ns = run;
    return probe.n > 0;
}

static bool probe_read(uint64_t *delay_ns)
{
    return probe_read2(delay_ns, NULL);
}

/* Spinning: per team (the calling thread's), two anchors of the machine's
 * busy ticks and the team's own CPU time (schedstat), renewed every
 * SPIN_ANCHOR_MS, so that the older one is 100-200 ms back when a switch is
 * weighed.  The team's CPU, not the process's: another team of this
 * process (a second session on another thread) competes for the cores as
 * much as another process does. */
#define SPIN_ANCHOR_MS 100.0

static _Thread_local struct {
    cpu_anchor old, cur;
    int epoch;
} spin_anchor;

static bool team_anchor(cpu_anchor *a)
{
    uint64_t d = 0, run = 0;
    *a = (cpu_anchor){.t_ms = ts_clock_ms()};
    a->ok = read_busy(&a->busy) && probe_read2(&d, &run);
    a->cpu_ms = (double)run * 1e-6;
    return a->ok;
}

static void spin_anchor_tick(double now)
{
    int epoch = atomic_load(&W.spin_epoch);
    if (spin_anchor.epoch != epoch) {
        spin_anchor.old = spin_anchor.cur = (cpu_anchor){0};
        spin_anchor.epoch = epoch;
    }
    if (spin_anchor.cur.ok && now - spin_anchor.cur.t_ms < SPIN_ANCHOR_MS) return;
    spin_anchor.old = spin_anchor.cur;
    team_anchor(&spin_anchor.cur);
}

/* Other tasks' cores (other processes, and this process's threads outside
 * the team) over the last 100-200 ms; NAN while under 100 ms are covered,
 * -1 unknown. */
static double spin_others(void)
{
    const cpu_anchor *a = spin_anchor.old.ok ? &spin_anchor.old : &spin_anchor.cur;
    cpu_anchor now;
    /* never taken yet: wait; taken but unreadable (no /proc): unknown */
    if (!a->ok) return a->t_ms > 0 ? -1 : NAN;
    double interval_ms = ts_clock_ms() - a->t_ms;
    if (!(interval_ms >= SPIN_ANCHOR_MS)) return NAN;
    if (W.clk_tck <= 0 || !team_anchor(&now) || now.busy < a->busy) return -1;
    double all_ms = (double)(now.busy - a->busy) * 1e3 / (double)W.clk_tck;
    double others = (all_ms - (now.cpu_ms - a->cpu_ms)) / (now.t_ms - a->t_ms);
    return others > 0 ? others : 0;
}


bool ts_wait_team_delay(int threads, uint64_t *ns)
{
    if (threads < 1) return false;
    if (probe.threads != threads || probe.gen != atomic_load(&fork_gen)) probe_open(threads);
    if (probe_read(ns)) return true;
    probe_open(threads); /* a team thread ended: name them again */
    return probe_read(ns);
}

/* Starts a sampled stretch now: the team's run delay so far. */
static bool sample_start(ts_wait_run *r)
{
    if (probe.threads != r->threads || probe.gen != atomic_load(&fork_gen)) probe_open(r->threads);
    if (!probe_read(&r->delay0_ns)) {
        probe_open(r->threads); /* a team thread ended: name them again */
        if (!probe_read(&r->delay0_ns)) return false;
    }
    r->sampled = true;
    r->t0_ms = ts_clock_ms();
    spin_anchor_tick(r->t0_ms); /* the first window already has its anchor */
    return true;
}

/* Ends the sampled stretch at t1 and hands it to the decision. */
static void sample_take(ts_wait_run *r, double t1)
{
    uint64_t delay1;
    bool ok = probe_read(&delay1) && delay1 >= r->delay0_ns;
    r->sampled = false;
    /* sampling costs two reads per thread: a new stretch starts at most
     * 0.6 ms x threads later (under 1% of the time) */
    next_sample_ms = t1 + 0.6 * r->threads;
    if (!ok) return;
    pthread_mutex_lock(&W.mu);
    long judged = W.ctl.windows, vetoed = W.ctl.vetoed;
    spin_anchor_tick(t1);
    /* /proc/stat is read only when this window could be the last strike */
    double others = W.ctl.strikes + 1 >= TS_WAIT_STRIKES ? spin_others() : NAN;
    if (W.ctl.mode == TS_WAIT_SPIN &&
        ts_wait_ctl_run(&W.ctl, t1, t1 - r->t0_ms, (double)(delay1 - r->delay0_ns) * 1e-6, r->threads, others,
                        W.cores) == TS_WAIT_SLEEP) {
        if (W.trace)
            fprintf(stderr,
                    "tsopt wait: %.1f ms: spin -> sleep, threads waited %.1f%% of the last window, others used "
                    "%.2f cores\n",
                    t1 - W.t_start_ms, 100 * W.ctl.last_share, others);
        apply(TS_WAIT_SLEEP, r->threads);
    } else if (W.trace && W.ctl.vetoed != vetoed) {
        fprintf(stderr, "tsopt wait: %.1f ms: threads waited %.1f%%, but others used %.2f cores: spin on\n",
                t1 - W.t_start_ms, 100 * W.ctl.last_share, others);
    } else if (W.trace_windows && W.ctl.windows != judged) {
        fprintf(stderr, "tsopt wait: %.1f ms: window: threads waited %.1f%%, strikes %d\n", t1 - W.t_start_ms,
                100 * W.ctl.last_share, W.ctl.strikes);
    }
    pthread_mutex_unlock(&W.mu);
}

static bool spinning(void)
{
    return atomic_load_explicit(&W.mode, memory_order_relaxed) == TS_WAIT_SPIN;
}

void ts_wait_run_begin(ts_wait_run *r, int threads)
{
    pthread_once(&W.once, setup);
    *r = (ts_wait_run){.threads = threads};
    if (threads < 2) return;
    if (W.source == SRC_SLEEP && !atomic_load(&W.broken) && spinning()) {
        pthread_mutex_lock(&W.mu);
        if (spinning()) apply(TS_WAIT_SLEEP, threads);
        pthread_mutex_unlock(&W.mu);
    }
    r->begin_mode = spinning() ? TS_WAIT_SPIN : TS_WAIT_SLEEP;
    r->begin_ms = ts_clock_ms();
    atomic_fetch_add_explicit(r->begin_mode == TS_WAIT_SPIN ? &W.spin_runs : &W.sleep_runs, 1,
                              memory_order_relaxed);
    if (W.source != SRC_ADAPTIVE || atomic_load(&W.broken)) return;
    r->active = true;
    if (spinning() && ts_clock_ms() >= next_sample_ms) sample_start(r);
}

void ts_wait_run_poll(ts_wait_run *r)
{
    if (!r->active) return;
    double now = ts_clock_ms();
    if (r->sampled) {
        /* a long run is judged while it runs: a collapse (tens of ms per
         * region) ends after one window, not after the run */
        if (now - r->t0_ms < TS_WAIT_WINDOW_MS) return;
        sample_take(r, now);
        if (spinning()) sample_start(r);
    } else if (now >= next_sample_ms && spinning()) {
        sample_start(r);
    }
}

void ts_wait_run_end(ts_wait_run *r)
{
    if (r->threads < 2) return;
    double t1 = ts_clock_ms();
    atomic_fetch_add_explicit(r->begin_mode == TS_WAIT_SPIN ? &W.spin_us : &W.sleep_us,
                              (long long)((t1 - r->begin_ms) * 1e3), memory_order_relaxed);
    if (!r->active) return;
    if (r->sampled) sample_take(r, t1);
    if (spinning()) return;
    pthread_mutex_lock(&W.mu);
    if (W.ctl.mode == TS_WAIT_SLEEP && ts_wait_ctl_look_due(&W.ctl, t1)) {
        double others = look_others();
        int mode = ts_wait_ctl_look(&W.ctl, t1, others, W.cores, r->threads);
        if (W.trace)
            fprintf(stderr, "tsopt wait: %.1f ms: look: others used %.2f cores -> %s\n", t1 - W.t_start_ms, others,
                    mode == TS_WAIT_SPIN ? "spin" : "sleep");
        if (mode == TS_WAIT_SPIN)
            apply(TS_WAIT_SPIN, r->threads);
        else
            look_anchor(); /* still busy: a new interval from now */
    } else if (W.ctl.mode == TS_WAIT_SLEEP && W.helper && r->threads < W.helper_threads) {
        /* a smaller team than the helper counted on leaves libgomp's
         * count at or under the CPUs */
        helper_start(r->threads);
    }
    pthread_mutex_unlock(&W.mu);
}
