/* The roofline of a plan: for each step, the least it must move and compute.
 *
 * A step's bytes are the graph values crossing its boundary, each once: the
 * inputs of the nodes it computes that it does not produce itself, the
 * outputs that a later step (or the caller) reads, and its weights, each
 * constant charged to the first step that reads it only (the whole run then
 * reads every weight once).  A planner-inserted reorder or copy moves its
 * input and its output.  Sizes are logical (elements x dtype size): blocked
 * padding is the kernel's choice, not a need.  A step's FLOPs are those of
 * the nodes it computes (the operator descriptor's count: a multiply-add is
 * 2; element-wise ops one per output element; data movement 0).
 *
 * Its time limit is max(bytes / bandwidth, FLOPs / peak), the bandwidth
 * that of the cache level the step's bytes fit in (xroof_memory_ms): no
 * kernel on this machine can beat it, whatever it fuses inside the step.  The sum over the
 * steps is the plan's limit (`tsopt profile`, bench/real_models.py). */
#ifndef TS_EXEC_ROOFLINE_H
#define TS_EXEC_ROOFLINE_H

#include "tsopt.h"
#include "ir/ir.h"

typedef struct xroof_step {
    double bytes, flops;
    double int8_flops;   /* of flops, those of 8-bit products (against the int8 peak) */
    double weight_bytes; /* the constants among bytes */
    int nodes;           /* graph nodes the step computes (0: a conversion or helper step) */
} xroof_step;

/* FLOPs of node n alone (0 for views, shape and movement ops). */
double xroof_node_flops(const ts_graph *g, int n);
/* Whether node n's FLOPs are 8-bit products (an integer Conv or MatMul). */
bool xroof_node_int8(const ts_graph *g, int n);
/* Bytes of value v (elements x dtype size). */
double xroof_value_bytes(const ts_graph *g, int v);

/* Fills r[0..xplan_step_count(p)-1]. */
ts_status xroof_plan(const ts_plan *p, xroof_step *r, ts_error *err);

/* The step's time limit in ms (0 when both peaks are unknown). */
static inline double xroof_limit_ms(double bytes, double flops, double gbps, double gflops)
{
    double tb = gbps > 0 ? bytes / (gbps * 1e6) : 0, tf = gflops > 0 ? flops / (gflops * 1e6) : 0;
    return tb > tf ? tb : tf;
}

/* STREAM-like bandwidth over all cores, GB/s (bytes read + written, as
 * STREAM counts them: no write-allocate traffic), best of a few passes
 * over arrays far larger than the last-level cache:
 * copy a[i] = b[i] and triad a[i] = b[i] + s c[i]. */
ts_status xroof_measure_bw(double *copy_gbps, double *triad_gbps, ts_error *err);

/* The fixed cost of a step, measured on plans of tiny steps (no fusion,
 * all cores): an element-wise step on 16 floats (tsopt's dispatch and
 * kernel call), a 1x1 convolution 8 -> 8 on 4x4 (oneDNN's primitive
 * execution), and one empty OpenMP parallel region on all threads (the
 * fork and join a step pays when it splits its work). Microseconds, the
 * fastest of a few repetitions. */
typedef struct xroof_overhead {
    double eltwise_us, conv_us, region_us;
    int threads;
} xroof_overhead;
ts_status xroof_measure_overhead(xroof_overhead *o, ts_error *err);

/* The data cache sizes the thresholds derive from (bytes per core for L1d
 * and L2, the last level as the OS reports it, clamped: a VM's cpuid may
 * report any size), from sysconf, with safe defaults when unknown. */
typedef struct xroof_caches {
    long l1d, l2, l3;
} xroof_caches;
xroof_caches xroof_caches_get(void);

/* The memory levels a step's bytes may come from. */
enum { XROOF_L1, XROOF_L2, XROOF_L3, XROOF_DRAM, XROOF_LEVELS };
extern const char *const xroof_level_name[XROOF_LEVELS];

/* Bandwidth of L1d, L2 and the last level on all cores, GB/s (STREAM's
 * counting): each thread runs copy and triad over its own arrays of half
 * of its core's L1d or L2, or over a share of 4x the L2s of all cores
 * (at most half the last level: beyond every L2, within any last level),
 * passes repeated over ~4 MB a thread; the better kernel, best of 25 tries. */
ts_status xroof_measure_cache_bw(double gbps[XROOF_DRAM], ts_error *err);

/* The FMA units' float32 throughput on all threads, GFLOP/s (register-
 * resident multiply-adds, the widest vectors the CPU has; 0 without FMA):
 * the ceiling no kernel passes, where a measured matmul peak may not be
 * reached by the runtime on its best problems but passed on others. */
double xroof_measure_fma(void);

/* What a step's limit is measured against: the peak, the bandwidth of
 * each level (DRAM: the STREAM figure above), the cache sizes and the
 * threads sharing the per-core levels.  gflops: the measured matmul/conv
 * peak, the figure `tsopt peak` prints; fma_gflops: the FMA units' ceiling
 * (0: not measured).  A step's FLOP limit is the larger of the two
 * (xroof_flop_ceiling), kept apart so that what is printed as the peak is
 * the peak. */
typedef struct xroof_machine {
    double gflops, fma_gflops;
    double int8_gops; /* u8 x s8 products, GOP/s (a multiply-add 2); 0: unknown, counted at gflops */
    double gbps[XROOF_LEVELS];
    xroof_caches caches;
    int threads;
} xroof_machine;

/* The smallest level holding bytes: L1d and L2 are per core (threads of
 * them), the last level is shared. */
/* The GFLOP/s a step's FLOPs are limited by: the larger of the measured
 * peak and the FMA ceiling (a step can pass a matmul peak measured on a
 * loaded machine, never the FMA units). */
double xroof_flop_ceiling(const xroof_machine *m);

int xroof_level(const xroof_machine *m, double bytes);

/* A step's memory time in ms at the levels its data can live in: its
 * activations at the level its working set (all its bytes) fits in, its
 * weights at the level the run's weights (run_weight_bytes, re-read every
 * run) fit in, if that is further out.  A level measured slower than the
 * one beyond it counts at the faster speed (a limit never overstates). */
double xroof_memory_ms(const xroof_machine *m, const xroof_step *s, double run_weight_bytes, int *level);

/* The step's limit: max(memory time, float FLOPs / peak + 8-bit FLOPs / int8 peak), ms. */
double xroof_step_limit_ms(const xroof_machine *m, const xroof_step *s, double run_weight_bytes, bool *membound,
                           int *level);

/* The bytes a memory-bound step must move before splitting it over
 * o->threads threads pays for the parallel region it opens: the region's
 * cost (o->region_us) against the time the other threads save, each
 * core streaming its share from its L2 (m's L2 bandwidth per core):
 * region x T / (T - 1) x bandwidth per core.  0 when it cannot be
 * derived (one thread, nothing measured).  What the fixed split
 * thresholds of the vec kernels (XV_PAR_MIN) stood for; the copy kernels
 * use the same formula on their own measurement (xv_split_min_bytes). */
double xroof_split_min_bytes(const xroof_machine *m, const xroof_overhead *o);

/* The two figures of that threshold the runtime measures for itself, once
 * a process (xv_split_min_bytes): an empty parallel region on all threads
 * (us, the fastest of up to 300 within 5 ms, after one that creates the
 * team) and one core's copy rate within its L2 (GB/s, read + written, the
 * fastest of up to 25 tries within 3 ms). About 8 ms at most past the
 * team's creation (plus one region or copy past each budget), however
 * loaded the machine: cheap enough for the first plan a process builds. */
void xroof_measure_split(double *region_us, double *core_gbps);

#endif
