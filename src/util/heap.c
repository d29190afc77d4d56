#include "util/heap.h"
#include <string.h>

#define AT(i) ((char *)base + (i) * size)

static void swap(char *a, char *b, size_t size)
{
    for (size_t k = 0; k < size; k++) {
        char t = a[k];
        a[k] = b[k];
        b[k] = t;
    }
}

void ts_heap_up(void *base, size_t size, size_t i, ts_heap_less less)
{
    while (i > 0 && less(AT(i), AT((i - 1) / 2))) {
        swap(AT(i), AT((i - 1) / 2), size);
        i = (i - 1) / 2;
    }
}

void ts_heap_down(void *base, size_t size, size_t n, size_t i, ts_heap_less less)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && less(AT(l), AT(m))) m = l;
        if (r < n && less(AT(r), AT(m))) m = r;
        if (m == i) return;
        swap(AT(i), AT(m), size);
        i = m;
    }
}

void ts_heap_push(void *base, size_t size, size_t *n, const void *x, ts_heap_less less)
{
    memcpy(AT(*n), x, size);
    ts_heap_up(base, size, (*n)++, less);
}

void ts_heap_remove(void *base, size_t size, size_t *n, size_t i, void *out, ts_heap_less less)
{
    if (out) memcpy(out, AT(i), size);
    if (i < --*n) {
        memcpy(AT(i), AT(*n), size);
        ts_heap_up(base, size, i, less);
        ts_heap_down(base, size, *n, i, less);
    }
}
