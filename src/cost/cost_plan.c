/* In-plan costs of the op-cost model: every fused group's time measured
 * inside the whole model's plan with the per-step timer (step_timer.h).
 *
 * Why: a group measured as a graph of its own sees plain inputs at its
 * boundary, while in the model its input may arrive blocked from a
 * convolution (inception_v3's MaxPools cost 9.5 ms isolated, a fraction of
 * that in the plan: the isolated run pays a reorder and plain-layout
 * pooling the plan never runs), and its neighbours leave caches warm or
 * cold.  Timing each step of the real plan charges each group exactly what
 * the runtime spends on it, whatever kernels and layouts the runtime picks
 * today.  The optimizer primes the cache with the original graph's plan
 * (ts_cost_prime); groups never run inside it (its rewrites' new groups)
 * are timed inside a plan of their neighbourhood (cost_ctx.c). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "cost/cost.h"
#include "measure/rounds.h"
#include "measure/step_timer.h"
#include "measure/wait_policy.h"

enum { RUN_GOOD = XCOST_RUN_GOOD, RUN_SLEPT = XCOST_RUN_SLEPT, RUN_DISTURBED = XCOST_RUN_DISTURBED };

void xcost_run_begin(xcost_run_probe *p)
{
    p->threads = omp_get_num_procs(); /* the plans' default team */
    p->known = ts_wait_team_delay(p->threads, &p->d0);
    p->slept = ts_wait_threads_sleep();
}

int xcost_run_end(const xcost_run_probe *p, double wall_ms)
{
    uint64_t d1;
    bool waited = p->known && ts_wait_team_delay(p->threads, &d1) && d1 >= p->d0 &&
                  (double)(d1 - p->d0) * 1e-6 > TS_WAIT_DELAY_MAX * wall_ms;
    return waited ? RUN_DISTURBED : p->slept ? RUN_SLEPT : RUN_GOOD;
}

int xcost_keep_runs(const unsigned char *kind, int n, double *t, int ns, double *a, double *b)
{
    /* 5: a median of 5 survives two outliers; of 3 the sum of the steps'
     * medians can miss the typical run by 2x (preemptions in different
     * steps of different runs) */
    int count[3] = {0, 0, 0}, want = n < 5 ? n : 5, worst = RUN_GOOD;
    for (int it = 0; it < n; it++) count[kind[it]]++;
    if (count[RUN_GOOD] < want) worst = count[RUN_GOOD] + count[RUN_SLEPT] >= want ? RUN_SLEPT : RUN_DISTURBED;
    int k = 0;
    for (int it = 0; it < n; it++) {
        if (kind[it] > worst) continue;
        memmove(t + (size_t)k * (size_t)ns, t + (size_t)it * (size_t)ns, sizeof *t * (size_t)ns);
        if (a) a[k] = a[it];
        if (b) b[k] = b[it];
        k++;
    }
    return k;
}

typedef struct kms {
    char *key;
    double ms;
} kms;

static int cmp_kms(const void *a, const void *b) { return strcmp(((const kms *)a)->key, ((const kms *)b)->key); }

/* A step named after a view (the copy of a graph output that is a view)
 * belongs to the group producing the viewed value.  A node past g's (a
 * half plan's Cast, added to its float32 copy of g: half.c) has none. */
int xcost_owner_of(const ts_graph *g, const int *group_of, int node)
{
    for (int hops = 0; node >= 0 && node < g->nnodes && hops < g->nnodes; hops++) {
        int h = group_of[node];
        if (h < 0) return -1;
        const ts_node *hd = &g->nodes[h];
        if (!xcost_is_free(hd)) return h;
        node = g->values[hd->inputs[0]].producer;
    }
    return -1;
}

int xcost_step_owners(const ts_graph *g, const int *group_of, const ts_plan *p, const ts_graph *pg,
                      const int *node_map, int step, int *owners, int max)
{
    int vals[64], nv = xplan_step_values(p, step, vals, 64), n = 0;
    if (nv < 2) return 0;
    for (int k = 0; k < nv; k++) {
        int pn = pg->values[vals[k]].producer, gn = pn >= 0 && node_map ? node_map[pn] : pn;
        int w = gn >= 0 ? xcost_owner_of(g, group_of, gn) : -1;
        bool seen = w < 0;
        for (int j = 0; j < n && !seen; j++) seen = owners[j] == w;
        if (!seen && n < max) owners[n++] = w;
    }
    return n >= 2 ? n : 0;
}

#define WARM_MS 500.0

/* paired: each timed run is paired with an untimed one (profile's
 * end-to-end check); budget_ms > 0: stop after min_iters timed runs once
 * that much time went into them. */
static ts_status time_plan(ts_costdb *db, const ts_graph *g, int warmup, int iters, int min_iters, double budget_ms,
                           bool paired, xcost_plan_times *r, double *group_ms, ts_error *err)
{
    if (iters < 1) iters = 1;
    int nin = g->ninputs, nout = g->noutputs, nn = g->nnodes;
    ts_tensor **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out);
    int *group_of = malloc(sizeof *group_of * ((size_t)nn + 1));
    int *owner = NULL, *slot = NULL;
    double *t = NULL, *gt = NULL, *run = calloc((size_t)iters, sizeof *run), *col = NULL,
           *plain = calloc((size_t)iters, sizeof *plain);
    unsigned char *kind = calloc((size_t)iters, 1);
    kms *keys = NULL;
    double *sm = NULL; /* per-step medians */
    int nkeys = 0;
    ts_plan *plan = NULL;
    ts_plan_opts o = {0};
    ts_status st = TS_OK;
    memset(r, 0, sizeof *r);
    if (!in || !out || !group_of || !run || !plain || !kind) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (xcost_groups(g, group_of)) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!st) st = xcost_io_new(g, in, out, err); /* the same inputs as the isolated measurement */
    if (st || (st = ts_plan_build(g, &o, &plan, err))) goto done;
    int ns = xplan_step_count(plan);
    r->steps = ns;
    t = calloc((size_t)iters * (size_t)ns + 1, sizeof *t);
    owner = malloc(sizeof *owner * ((size_t)ns + 1));
    slot = malloc(sizeof *slot * ((size_t)nn + 1));
    gt = calloc((size_t)nn + 1, sizeof *gt);
    sm = calloc((size_t)ns + 1, sizeof *sm);
    col = malloc(sizeof *col * ((size_t)iters + 1));
    keys = calloc((size_t)nn + 1, sizeof *keys);
    if (!t || !owner || !slot || !gt || !col || !keys || !sm) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* step -> group; a step converting a graph input (node -1) is charged
     * to the next step that has an owner: the one it was inserted for */
    for (int i = ns - 1, next = -1; i >= 0; i--) {
        int w = xcost_owner_of(g, group_of, xplan_step_node(plan, i));
        owner[i] = w >= 0 ? w : next;
        if (owner[i] >= 0) next = owner[i];
    }
    for (int i = 0; i < warmup && !st; i++) st = ts_plan_run(plan, in, out, err);
    /* The optimizer's priming (budget_ms > 0) times a plan built a moment
     * ago, and a process's first half second runs slower than its steady
     * state (inception_v3: 45 ms over the first 10 runs, 41.5 ms over 3 s),
     * which is what a separate long `tsopt bench` of the written file sees:
     * warm up for that long first. */
    for (double w0 = ts_clock_ms(); budget_ms > 0 && !st && ts_clock_ms() - w0 < WARM_MS;)
        st = ts_plan_run(plan, in, out, err);
    /* Timed and plain runs in pairs, so that both see the same load, in a
     * random order within each pair: on a loaded machine the first and the
     * second run of a fixed pattern fall into different phases of the
     * scheduler's time slices (medians 2 ms vs 30 ms for nasrnn at load
     * 28, whichever run was timed). */
    uint64_t coin = 0x2545f4914f6cdd1dull;
    double start = ts_clock_ms();
    int done_iters = 0, good = 0;
    for (int it = 0; it < iters && !st; it++) {
        coin ^= coin << 13, coin ^= coin >> 7, coin ^= coin << 17;
        for (int half = 0; half < 2 && !st; half++) {
            bool timed = (half == 0) == (bool)(coin & 1);
            if (!paired && !timed) continue;
            xplan_step_timer(plan, timed ? t + (size_t)it * (size_t)ns : NULL);
            xcost_run_probe rp;
            if (timed) xcost_run_begin(&rp);
            double s0 = ts_clock_ms();
            st = ts_plan_run(plan, in, out, err);
            double wall = ts_clock_ms() - s0;
            (timed ? run : plain)[it] = wall;
            if (timed) {
                kind[it] = (unsigned char)xcost_run_end(&rp, wall);
                good += kind[it] == RUN_GOOD;
            }
        }
        done_iters = it + 1;
        /* the budget buys min_iters undisturbed runs, up to 3x over it */
        double spent = ts_clock_ms() - start;
        if (budget_ms > 0 && done_iters >= min_iters && spent > budget_ms &&
            (good >= min_iters || spent > 3 * budget_ms))
            break;
    }
    xplan_step_timer(plan, NULL);
    if (st) goto done;
    iters = done_iters;
    /* Which runs the medians read: those whose threads spun and got their
     * cores (the runtime of a quiet machine, which a separate `tsopt bench`
     * measures), else the undisturbed ones, else all (a machine busy all
     * along: its costs carry the load). */
    int nsel = xcost_keep_runs(kind, iters, t, ns, run, plain);
    r->dropped = iters - nsel;
    iters = nsel;
    r->runs = iters;
    /* Each step's cost is its median over the runs: robust to the
     * preemptions of a loaded machine.  They are not scaled to add up to
     * the end-to-end time: their sum is the model's prediction, checked
     * against the untimed runs (`tsopt profile`, bench.py). */
    for (int it = 0; it < iters; it++) {
        double tot = 0;
        for (int i = 0; i < ns; i++) tot += t[(size_t)it * (size_t)ns + (size_t)i];
        col[it] = tot;
    }
    r->steps_ms = ts_median(col, iters);
    for (int i = 0; i < ns; i++) {
        for (int it = 0; it < iters; it++) col[it] = t[(size_t)it * (size_t)ns + (size_t)i];
        sm[i] = ts_median(col, iters);
        r->medians_ms += sm[i];
    }
    r->run_ms = ts_median(run, iters);
    r->plain_ms = paired ? ts_median(plain, iters) : 0;
    for (int n = 0; n < nn; n++) slot[n] = -1;
    int ng = 0;
    for (int n = 0; n < nn; n++)
        if (group_of[n] == n && !g->nodes[n].dead && !xcost_is_free(&g->nodes[n])) slot[n] = ng++;
    for (int i = 0; i < ns; i++) {
        double ms = sm[i];
        int many[16], nm = xcost_step_owners(g, group_of, plan, g, NULL, i, many, 16);
        for (int k = 0; k < nm; k++) /* stacked: an even share each */
            if (slot[many[k]] >= 0) gt[slot[many[k]]] += ms / nm;
        if (nm)
            continue;
        if (owner[i] < 0 || slot[owner[i]] < 0)
            r->unowned_ms += ms;
        else
            gt[slot[owner[i]]] += ms;
    }
    for (int n = 0; n < nn; n++) {
        if (slot[n] < 0) continue;
        if (!(keys[nkeys].key = xcost_group_key(g, group_of, n))) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            goto done;
        }
        keys[nkeys++].ms = gt[slot[n]];
        if (group_ms) group_ms[n] = gt[slot[n]];
    }
    r->groups = nkeys;
    /* groups sharing a key (ResNet's repeated blocks) get their mean */
    qsort(keys, (size_t)nkeys, sizeof *keys, cmp_kms);
    for (int a = 0, b; a < nkeys; a = b) {
        double sum = 0;
        for (b = a; b < nkeys && !strcmp(keys[a].key, keys[b].key); b++) sum += keys[b].ms;
        if (!xcost_put_plan(db, keys[a].key, sum / (b - a), b - a)) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
done:
    for (int i = 0; i < nin; i++)
        if (in) ts_tensor_unref(in[i]);
    for (int i = 0; i < nout; i++)
        if (out) ts_tensor_unref(out[i]);
    for (int k = 0; k < nkeys; k++) free(keys[k].key);
    free(keys);
    free(in);
    free(out);
    free(group_of);
    free(owner);
    free(slot);
    free(t);
    free(gt);
    free(run);
    free(plain);
    free(kind);
    free(col);
    free(sm);
    ts_plan_free(plan);
    return st;
}

ts_status xcost_time_plan(ts_costdb *db, const ts_graph *g, int warmup, int iters, xcost_plan_times *r,
                          ts_error *err)
{
    return time_plan(db, g, warmup, iters, iters, 0, true, r, NULL, err);
}

ts_status xcost_time_plan_groups(ts_costdb *db, const ts_graph *g, int warmup, int iters, xcost_plan_times *r,
                                 double *group_ms, ts_error *err)
{
    return time_plan(db, g, warmup, iters, iters, 0, true, r, group_ms, err);
}

ts_status xcost_time_plan_budget(ts_costdb *db, const ts_graph *g, int warmup, int iters, int min_iters,
                                 double budget_ms, xcost_plan_times *r, ts_error *err)
{
    return time_plan(db, g, warmup, iters, min_iters, budget_ms, false, r, NULL, err);
}
