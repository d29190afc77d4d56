/* Static memory plan: every arena buffer (and every step's scratch) lives
 * over an interval of steps [first, last]; two whose intervals overlap must
 * not overlap in memory.  Offsets come from greedy best fit over the items
 * sorted by size, largest first (the heuristic that does well on DNN
 * activation graphs: big tensors settle first, small ones fill the holes),
 * and, when a plan is built, over two more orders, the smallest arena kept
 * (ties: the earlier order): size x lifetime, largest first, and first
 * step, earliest first (3x the placement's O(n^2): 27 ms for nasnet_a
 * unrewritten, 1171 items, loaded; a decoder token's re-bind keeps one).
 * No one order wins everywhere: nasnet_a's cells (many small tensors of
 * long and short lives) came to 5.86 MiB by size where 5.08 MiB are alive
 * at once (issue 27, peak RSS against 355ae46, whose order of the same
 * graph happened to give 5.22).
 * In-place reuse needs nothing here: a kernel that works in place makes its
 * output an alias of its input, and the alias's uses extend the root's
 * interval (plan.c). */
#include <stdio.h>
#include <stdlib.h>
#include "exec/plan_internal.h"

#define ALIGN 64

typedef struct item {
    size_t size;
    int first, last;
    int64_t *offset;
    int64_t off; /* the placement being tried */
    int id;      /* for a deterministic order among equal keys */
} item;

typedef struct range {
    int64_t lo, hi;
} range;

static int by_size_desc(const void *a, const void *b)
{
    const item *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

static int by_id(const item *x, const item *y) { return (x->id > y->id) - (x->id < y->id); }

static int by_area_desc(const void *a, const void *b)
{
    const item *x = a, *y = b;
    double ax = (double)x->size * (x->last - x->first + 1), ay = (double)y->size * (y->last - y->first + 1);
    if (ax != ay) return ax < ay ? 1 : -1;
    return by_id(x, y);
}

static int by_first(const void *a, const void *b)
{
    const item *x = a, *y = b;
    if (x->first != y->first) return x->first > y->first ? 1 : -1;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return by_id(x, y);
}

static int by_lo(const void *a, const void *b)
{
    const range *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static size_t align_up(size_t n) { return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

/* With TSOPT_MEM_TRACE: the arena beside its lower bound, the most bytes
 * alive at one step (no placement can do with less). */
static void trace_bound(const xplan *p, const item *it, int n, size_t total)
{
    if (!it || !getenv("TSOPT_MEM_TRACE")) return;
    int64_t *delta = calloc((size_t)p->nsteps + 2, sizeof *delta);
    if (!delta) return;
    for (int i = 0; i < n; i++)
        if (it[i].first >= 0 && it[i].last < p->nsteps) {
            delta[it[i].first] += (int64_t)it[i].size;
            delta[it[i].last + 1] -= (int64_t)it[i].size;
        }
    int64_t live = 0, most = 0;
    for (int s = 0; s <= p->nsteps; s++) {
        live += delta[s];
        if (live > most) most = live;
    }
    free(delta);
    fprintf(stderr, "mem: arena %.2f MiB, at least %.2f MiB (the most bytes alive at one step)\n",
            (double)total / 1048576.0, (double)most / 1048576.0);
}

/* Greedy best fit over it[] in its order: each item at the lowest offset
 * of the smallest gap it fits among the items placed before whose
 * intervals overlap its own, else above them all.  Returns the arena. */
static size_t place(item *it, int n, range *busy)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        int nb = 0;
        for (int j = 0; j < i; j++)
            if (it[j].first <= it[i].last && it[i].first <= it[j].last)
                busy[nb++] = (range){it[j].off, it[j].off + (int64_t)it[j].size};
        qsort(busy, (size_t)nb, sizeof *busy, by_lo);
        int64_t end = 0, best = -1, best_gap = 0;
        for (int j = 0; j < nb; j++) {
            int64_t gap = busy[j].lo - end;
            if (gap >= (int64_t)it[i].size && (best < 0 || gap < best_gap)) {
                best = end;
                best_gap = gap;
            }
            if (busy[j].hi > end) end = busy[j].hi;
        }
        it[i].off = best >= 0 ? best : end;
        if ((size_t)it[i].off + it[i].size > total) total = (size_t)it[i].off + it[i].size;
    }
    return total;
}

size_t xmemplan_assign(xplan *p, bool every_order)
{
    int n = 0;
    item *it = malloc(sizeof *it * (size_t)(p->nbufs + p->nsteps + 1));
    range *busy = malloc(sizeof *busy * (size_t)(p->nbufs + p->nsteps + 1));
    size_t naive = 0, total = 0;
    for (int b = 0; b < p->nbufs; b++) {
        xbuf *x = &p->bufs[b];
        if (x->kind == XB_ARENA) x->offset = 0;
        if (x->kind != XB_ARENA || x->first_step < 0 || !x->bytes) continue;
        if (it) it[n] = (item){align_up(x->bytes), x->first_step, x->last_step, &x->offset, 0, n};
        n++;
        naive += align_up(x->bytes);
    }
    for (int i = 0; i < p->nsteps; i++) {
        xstep *s = &p->steps[i];
        s->scratch_offset = 0;
        if (!s->scratch_bytes) continue;
        if (it) it[n] = (item){align_up(s->scratch_bytes), i, i, &s->scratch_offset, 0, n};
        n++;
        naive += align_up(s->scratch_bytes);
    }
    if (!it || !busy) { /* no memory to plan with: one buffer each */
        for (int b = 0; b < p->nbufs; b++) {
            xbuf *x = &p->bufs[b];
            if (x->kind != XB_ARENA || x->first_step < 0 || !x->bytes) continue;
            x->offset = (int64_t)total;
            total += align_up(x->bytes);
        }
        for (int i = 0; i < p->nsteps; i++)
            if (p->steps[i].scratch_bytes) {
                p->steps[i].scratch_offset = (int64_t)total;
                total += align_up(p->steps[i].scratch_bytes);
            }
    } else {
        static int (*const orders[])(const void *, const void *) = {by_size_desc, by_area_desc, by_first};
        int64_t *best_off = malloc(sizeof *best_off * (size_t)(n ? n : 1));
        size_t best_total = 0;
        for (int o = 0; o < (best_off && every_order ? 3 : 1); o++) {
            qsort(it, (size_t)n, sizeof *it, orders[o]);
            size_t t = place(it, n, busy);
            if (o == 0 || t < best_total) {
                best_total = t;
                for (int i = 0; i < n && best_off; i++) best_off[it[i].id] = it[i].off;
            }
        }
        for (int i = 0; i < n; i++) *it[i].offset = best_off ? best_off[it[i].id] : it[i].off;
        free(best_off);
        total = best_total;
    }
    trace_bound(p, it, n, total);
    free(it);
    free(busy);
    p->stats.arena_bytes = total;
    p->stats.naive_bytes = naive;
    return total;
}
