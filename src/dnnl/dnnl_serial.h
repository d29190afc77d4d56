/* Tiny oneDNN steps run on one thread.
 *
 * A parallel region costs a join and, when the OpenMP workers sleep (the
 * tsopt binary's policy on a busy machine, docs/runtime.md), a wake-up:
 * several microseconds, more on a loaded machine, where the second thread
 * often is not scheduled at all.  Models made of many small convolutions (NASNet-A:
 * 356 convs, most under 4 MFLOP and 5-30 us on one core) spend more on
 * that than they gain from the second core.  Per-step minima of nasnet_a's
 * steps (load ~15, 20 runs): convs under 4 MFLOP 5.1 ms on one thread vs
 * 8.1 ms on two; larger ones 3.4 vs 3.8 ms.  So a step below
 * XD_SERIAL_FLOPS is built with one OpenMP thread (oneDNN sizes its work
 * split at primitive creation) and run with one (no parallel region is
 * opened: oneDNN calls the body inline for one thread).  Poolings are
 * memory-bound, so one also needs an input under a quarter of a core's L2
 * (xd_serial_pool_bytes: 256 KiB on the 1 MiB-L2 EPYC and Xeon):
 * resnet50's first MaxPool (1.8 M window operations over 3.2 MB) took
 * 0.15-0.18 ms on one thread, 0.066-0.071 ms on two (ORT 0.09 ms). */
#ifndef TS_DNNL_DNNL_SERIAL_H
#define TS_DNNL_DNNL_SERIAL_H

#include <omp.h>
#include "exec/exec.h"
#include "exec/roofline.h"
#include "vec/vec.h"

#define XD_SERIAL_FLOPS 4e6
/* Input bytes below which a small pooling runs on one thread (plan time). */
static inline int64_t xd_serial_pool_bytes(void) { return xroof_caches_get().l2 / 4; }

/* True when a step of `flops` work that moves `moved` bytes (activations
 * in and out, weights) should be built and run on one thread.
 * XD_SERIAL_FLOPS stands for a time: nasnet_a's dense convs under it take
 * 5-30 us on one core.  A depthwise conv does 2 x kernel FLOPs per element
 * it reads, so the same FLOPs take 5-10x as long: mnasnet1_0's depthwise
 * convs of 0.6-2.9 MFLOP took 17-46 us on one core, and their per-step
 * minima (60 runs x 3, 2 threads, spinning workers, loaded) fell to
 * 0.48-0.75x of the serial time when built on two threads, 0.17 ms of a
 * 3.3 ms run.  Such a step moves more bytes than the measured split
 * threshold (vec.h: region cost x one core's L2 rate, the rule the vec
 * kernels split by), so it is split like them. */
static inline bool xd_serial(const xplan *p, double flops, double moved)
{
    return p->opts.threads != 1 && flops < XD_SERIAL_FLOPS && !XV_SPLITS(p->opts.threads, moved);
}

/* Sets one thread when serial; returns what to restore. */
static inline int xd_serial_enter(bool serial)
{
    int t = omp_get_max_threads();
    if (serial) omp_set_num_threads(1);
    return t;
}

static inline void xd_serial_leave(bool serial, int t)
{
    if (serial) omp_set_num_threads(t);
}

#endif
