/* The one binary min-heap of the tree (issue 27, "one heap"), over an
 * array the caller owns and grows: the search's queue of candidate graphs
 * (opt/driver.c, which also drops its worst entry) and the import's
 * ready nodes (onnx/import.c, Kahn's order by file position).  `less`
 * defines the order; ties keep no particular order, so callers that need
 * determinism break them in `less` (driver.c by sequence number). */
#ifndef TS_UTIL_HEAP_H
#define TS_UTIL_HEAP_H

#include <stdbool.h>
#include <stddef.h>

typedef bool (*ts_heap_less)(const void *a, const void *b);

/* Restores the order after element i of the n-element heap got smaller
 * (up) or larger (down); both after a replacement at an arbitrary i. */
void ts_heap_up(void *base, size_t size, size_t i, ts_heap_less less);
void ts_heap_down(void *base, size_t size, size_t n, size_t i, ts_heap_less less);

/* Appends x (room for *n + 1 elements is the caller's) and sifts it up. */
void ts_heap_push(void *base, size_t size, size_t *n, const void *x, ts_heap_less less);
/* Removes element i (0: the least) into out (may be NULL). */
void ts_heap_remove(void *base, size_t size, size_t *n, size_t i, void *out, ts_heap_less less);

#endif
