/* The machine a measurement or a compiled object belongs to (cpu_id.c). */
#ifndef TS_UTIL_CPU_ID_H
#define TS_UTIL_CPU_ID_H

#include <stddef.h>

/* "AMD EPYC ... x2": /proc/cpuinfo's model name and the processors OpenMP
 * may use.  The cost cache (cost/cost.c) and the eOperator objects
 * compiled with -march=native (ein/codegen.c) are keyed by it. */
void ts_cpu_model(char *buf, size_t n);

#endif
