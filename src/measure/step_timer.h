/* Optional per-step timer of a plan run (off by default).
 *
 * The op-cost model wants each fused group's cost *in the plan it runs in*:
 * the layouts its inputs arrive in, the reorders the planner inserted
 * around it, the caches its neighbours left warm.  Measuring a group as a
 * graph of its own reproduces that context only partly (a MaxPool fed by a
 * blocked convolution is measured on a plain input, with a reorder the
 * real plan never runs).  So a plan can record, for each step of a run,
 * the wall time of its kernel call; when the timer is off a run pays one
 * pointer test per step. */
#ifndef TS_MEASURE_STEP_TIMER_H
#define TS_MEASURE_STEP_TIMER_H

#include "tsopt.h"
#include "util/clock.h"

/* Number of steps of the plan (the length ms must have below). */
int xplan_step_count(const ts_plan *p);
/* From now on every ts_plan_run writes step i's milliseconds to ms[i]
 * (caller-owned, xplan_step_count entries); NULL turns the timer off. */
void xplan_step_timer(ts_plan *p, double *ms);
/* Graph node step i is named after: the first node it lowers, or for a
 * planner-inserted reorder/copy the producer of the value it converts
 * (-1: a graph input or constant). */
int xplan_step_node(const ts_plan *p, int i);
/* Kernel name of step i ("dnnl.conv", "reorder", ...). */
const char *xplan_step_kernel(const ts_plan *p, int i);
/* True when step i is a planner-inserted conversion at the graph's boundary
 * (a reorder/copy of a graph input or into a graph output): work a graph
 * cut out of a model does that the model itself may not. */
bool xplan_step_is_boundary(const ts_plan *p, int i);
/* For a boundary step: the index among the graph's inputs of the input it
 * converts (*is_output false), or among its outputs of the output it
 * writes (*is_output true); -1 for any other step.  A graph cut out of a
 * model for timing (cost_ctx.c) has boundaries of two kinds: the model's
 * own inputs and outputs, whose conversions the model runs too, and cuts,
 * whose conversions it does not. */
int xplan_step_boundary_io(const ts_plan *p, int i, bool *is_output);
/* Graph values step i writes (up to max, into values; -1 entries left
 * out); returns how many.  A step may compute several groups' results
 * (vec.gemv stacks MatMuls by one weight: one output per product). */
int xplan_step_values(const ts_plan *p, int i, int *values, int max);
/* True when step i is a planner-inserted reorder or copy whose result only
 * steps named after nodes with skip[node] set read: a conversion made for
 * what a cut-out graph adds (cost_ctx.c's sinks), not for the model. */
bool xplan_step_only_feeds(const ts_plan *p, int i, const bool *skip);

#endif
