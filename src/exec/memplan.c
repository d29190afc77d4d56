/* Static memory plan: every arena buffer (and every step's scratch) lives
 * over an interval of steps [first, last]; two whose intervals overlap must
 * not overlap in memory.  Offsets come from greedy best fit over the items
 * sorted by size, largest first (the heuristic that does well on DNN
 * activation graphs: big tensors settle first, small ones fill the holes).
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
    int id; /* for a deterministic order among equal sizes */
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

size_t xmemplan_assign(xplan *p)
{
    int n = 0;
    item *it = malloc(sizeof *it * (size_t)(p->nbufs + p->nsteps + 1));
    range *busy = malloc(sizeof *busy * (size_t)(p->nbufs + p->nsteps + 1));
    size_t naive = 0, total = 0;
    for (int b = 0; b < p->nbufs; b++) {
        xbuf *x = &p->bufs[b];
        if (x->kind == XB_ARENA) x->offset = 0;
        if (x->kind != XB_ARENA || x->first_step < 0 || !x->bytes) continue;
        if (it) it[n] = (item){align_up(x->bytes), x->first_step, x->last_step, &x->offset, n};
        n++;
        naive += align_up(x->bytes);
    }
    for (int i = 0; i < p->nsteps; i++) {
        xstep *s = &p->steps[i];
        s->scratch_offset = 0;
        if (!s->scratch_bytes) continue;
        if (it) it[n] = (item){align_up(s->scratch_bytes), i, i, &s->scratch_offset, n};
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
        qsort(it, (size_t)n, sizeof *it, by_size_desc);
        for (int i = 0; i < n; i++) {
            /* ranges taken, during i's interval, by items placed before */
            int nb = 0;
            for (int j = 0; j < i; j++)
                if (it[j].first <= it[i].last && it[i].first <= it[j].last)
                    busy[nb++] = (range){*it[j].offset, *it[j].offset + (int64_t)it[j].size};
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
            *it[i].offset = best >= 0 ? best : end;
            if ((size_t)*it[i].offset + it[i].size > total) total = (size_t)*it[i].offset + it[i].size;
        }
    }
    trace_bound(p, it, n, total);
    free(it);
    free(busy);
    p->stats.arena_bytes = total;
    p->stats.naive_bytes = naive;
    return total;
}
