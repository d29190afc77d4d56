/* Memory checks before allocation (mem_check.c): what this process may
 * still allocate, and what running a graph needs at least. */
#ifndef TS_UTIL_MEM_CHECK_H
#define TS_UTIL_MEM_CHECK_H

#include "tsopt.h"

typedef struct xmem_info {
    size_t avail;       /* bytes; SIZE_MAX when nothing limits */
    const char *source; /* what limits it, for messages */
    bool bad_env;       /* TSOPT_MEM_LIMIT is set but not a size */
} xmem_info;

void xmem_probe(xmem_info *m);
/* "12.3 GiB" */
const char *xmem_str(size_t bytes, char *buf, size_t n);
/* Bytes of g's inputs and outputs (what a caller allocates to run it). */
size_t xmem_io_bytes(const ts_graph *g);
/* A size: bytes, or a number with K, M, G or T (powers of 1024), an
 * optional B after; false when s is not one. */
bool xmem_parse_size(const char *s, uint64_t *out);
/* This process's resident memory (VmRSS), 0 when unknown. */
size_t xmem_rss(void);
/* Its peak resident memory (VmHWM), 0 when unknown. */
size_t xmem_peak_rss(void);
/* With TSOPT_MEM_TRACE set, one line on stderr: where, VmRSS and VmHWM
 * (finding where a model's peak memory goes). */
void xmem_trace(const char *where);

#endif
