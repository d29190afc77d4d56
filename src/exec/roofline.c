/* Per-step roofline of a plan (roofline.h) and the machine figures it is
 * measured against: memory bandwidth (STREAM-like) and cache sizes. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <omp.h>
#include <immintrin.h>
#include "exec/roofline.h"
#include "exec/plan_internal.h"
#include "measure/step_timer.h"
#include "ops/list.h"
#include "ops/op.h"

double xroof_value_bytes(const ts_graph *g, int v)
{
    return (double)ts_shape_numel(&g->values[v].shape) * (double)ts_dtype_size(g->values[v].dtype);
}

double xroof_node_flops(const ts_graph *g, int n)
{
    const ts_node *nd = &g->nodes[n];
    if (nd->op->flags & (TS_OP_MOVEMENT | TS_OP_SHAPE)) return 0;
    if (nd->op->flops) return nd->op->flops(nd, g);
    double f = 0;
    for (int o = 0; o < nd->noutputs; o++) f += (double)ts_shape_numel(&g->values[nd->outputs[o]].shape);
    return f;
}

static bool is_8bit(const ts_graph *g, const ts_node *nd, int k)
{
    ts_dtype t = k < nd->ninputs && nd->inputs[k] >= 0 ? g->values[nd->inputs[k]].dtype : TS_F32;
    return t == TS_U8 || t == TS_I8;
}

bool xroof_node_int8(const ts_graph *g, int n)
{
    /* the product's two operands: inputs 0 and 1 (ConvInteger, MatMulInteger)
     * or 0 and 3 (the QLinear forms, scales and zero points between) */
    const ts_node *nd = &g->nodes[n];
    return nd->op->flops && is_8bit(g, nd, 0) && (is_8bit(g, nd, 1) || is_8bit(g, nd, 3));
}

static bool is_conversion(const xstep *s) { return s->k == &xk_reorder || s->k == &xk_copy; }

/* Logical bytes of buffer b (a blocked buffer's padding left out). */
static double buf_bytes(const xplan *p, int b)
{
    return (double)ts_shape_numel(&p->bufs[b].shape) * (double)ts_dtype_size(p->bufs[b].dtype);
}

/* Logical bytes of the buffers step s reads, each once. */
static double in_bytes(const xplan *p, const xstep *s)
{
    double b = 0;
    for (int k = 0; k < s->nin; k++) {
        bool dup = s->in[k] < 0;
        for (int j = 0; j < k && !dup; j++) dup = s->in[j] == s->in[k];
        if (!dup) b += buf_bytes(p, s->in[k]);
    }
    return b;
}

/* The step computing node n: the one writing one of its outputs, else
 * (a node fused into a step that writes a later value: a conv's
 * activation, a squeeze-excite chain) the step of a consumer lowered by
 * the same kernel; -1 for views and nodes no step computes. */
static int step_of(const xplan *p, const int *value_step, int n, int depth)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    if (!p->claimed[n] || !p->claimed_by[n] || depth > 16) return -1;
    for (int o = 0; o < nd->noutputs; o++)
        if (nd->outputs[o] >= 0 && value_step[nd->outputs[o]] >= 0) return value_step[nd->outputs[o]];
    for (int o = 0; o < nd->noutputs; o++) {
        int v = nd->outputs[o];
        for (int c = 0; v >= 0 && c < g->nnodes; c++) {
            const ts_node *cn = &g->nodes[c];
            if (cn->dead || p->claimed_by[c] != p->claimed_by[n]) continue;
            for (int j = 0; j < cn->ninputs; j++)
                if (cn->inputs[j] == v) {
                    int s = step_of(p, value_step, c, depth + 1);
                    if (s >= 0) return s;
                    break;
                }
        }
    }
    return -1;
}

ts_status xroof_plan(const ts_plan *plan, xroof_step *r, ts_error *err)
{
    const xplan *p = (const xplan *)plan;
    const ts_graph *g = p->g;
    int nv = g->nvalues, nn = g->nnodes, ns = p->nsteps;
    int *value_step = malloc(sizeof(int) * ((size_t)nv + 1)), *node_step = malloc(sizeof(int) * ((size_t)nn + 1));
    int *mark = malloc(sizeof(int) * ((size_t)nv + 1)); /* value -> last step that counted it */
    bool *const_seen = calloc((size_t)nv + 1, 1);
    if (!value_step || !node_step || !mark || !const_seen) {
        free(value_step), free(node_step), free(mark), free(const_seen);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int v = 0; v < nv; v++) value_step[v] = mark[v] = -1;
    for (int i = 0; i < ns; i++) {
        const xstep *s = &p->steps[i];
        if (is_conversion(s)) continue;
        for (int k = 0; k < s->nout; k++) {
            int v = s->out[k] >= 0 ? p->bufs[s->out[k]].value : -1;
            if (v >= 0 && value_step[v] < 0) value_step[v] = i;
        }
    }
    for (int n = 0; n < nn; n++) node_step[n] = g->nodes[n].dead ? -1 : step_of(p, value_step, n, 0);
    memset(r, 0, sizeof *r * (size_t)ns);
    for (int n = 0; n < nn; n++)
        if (node_step[n] >= 0) {
            r[node_step[n]].nodes++;
            double f = xroof_node_flops(g, n);
            r[node_step[n]].flops += f;
            if (xroof_node_int8(g, n)) r[node_step[n]].int8_flops += f;
        }
    for (int i = 0; i < ns; i++) {
        const xstep *s = &p->steps[i];
        xroof_step *x = &r[i];
        if (!x->nodes) { /* conversions and helper steps: their buffers */
            x->bytes = in_bytes(p, s);
            for (int k = 0; k < s->nout; k++) x->bytes += buf_bytes(p, s->out[k]);
            continue;
        }
        /* a Concat step (with views or a shuffle after it) writes as much
         * as it reads; its producers may write part of its result in place
         * (dense_concat's slices): it moves what it reads, once each way */
        bool movement = true, concat = false;
        for (int n = 0; n < nn && movement; n++) {
            if (node_step[n] != i) continue;
            movement = g->nodes[n].op->flags & (TS_OP_MOVEMENT | TS_OP_SHAPE);
            concat |= g->nodes[n].op == &ts_op_concat;
        }
        if (movement && concat) {
            x->bytes = 2 * in_bytes(p, s);
            continue;
        }
        /* the nodes' inputs from outside the step, each value once */
        for (int n = 0; n < nn; n++) {
            if (node_step[n] != i) continue;
            const ts_node *nd = &g->nodes[n];
            for (int j = 0; j < nd->ninputs; j++) {
                int v = nd->inputs[j];
                if (v < 0 || mark[v] == i) continue;
                int pr = g->values[v].producer;
                if (pr >= 0 && node_step[pr] == i) continue;
                mark[v] = i;
                if (g->values[v].constant) {
                    if (const_seen[v]) continue;
                    const_seen[v] = true;
                    x->weight_bytes += xroof_value_bytes(g, v);
                }
                x->bytes += xroof_value_bytes(g, v);
            }
        }
        /* the nodes' outputs that leave the step */
        for (int n = 0; n < nn; n++) {
            if (node_step[n] != i) continue;
            const ts_node *nd = &g->nodes[n];
            for (int o = 0; o < nd->noutputs; o++) {
                int v = nd->outputs[o];
                bool leaves = v >= 0 && ts_graph_is_output(g, v);
                for (int c = 0; v >= 0 && c < nn && !leaves; c++) {
                    if (g->nodes[c].dead || node_step[c] == i) continue;
                    for (int j = 0; j < g->nodes[c].ninputs && !leaves; j++) leaves = g->nodes[c].inputs[j] == v;
                }
                if (leaves) x->bytes += xroof_value_bytes(g, v);
            }
        }
    }
    free(value_step), free(node_step), free(mark), free(const_seen);
    return TS_OK;
}

/* ------------------------------------------------------------ bandwidth */

/* One pass of kernel k over n floats on all threads; ms. */
static double stream_pass(int k, float *a, const float *b, const float *c, size_t n)
{
    double t0 = ts_clock_ms();
    if (k == 0) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) a[i] = b[i];
    } else {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
    }
    return ts_clock_ms() - t0;
}

ts_status xroof_measure_bw(double *copy_gbps, double *triad_gbps, ts_error *err)
{
    /* 3 arrays of 4x the last-level cache (at least 32 MiB each, at most
     * 128 MiB: a VM may report a last level of any size) */
    long l3 = xroof_caches_get().l3;
    size_t bytes = (size_t)4 * (size_t)l3;
    bytes = bytes < ((size_t)32 << 20) ? (size_t)32 << 20 : bytes > ((size_t)128 << 20) ? (size_t)128 << 20 : bytes;
    size_t n = bytes / sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    /* first touch on the threads that run the passes */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2;
    double best[2] = {1e30, 1e30};
    for (int r = 0; r < 5; r++)
        for (int k = 0; k < 2; k++) {
            double t = stream_pass(k, a, b, c, n);
            if (t < best[k]) best[k] = t;
        }
    *copy_gbps = 2.0 * (double)bytes / (best[0] * 1e6);
    *triad_gbps = 3.0 * (double)bytes / (best[1] * 1e6);
    free(a), free(b), free(c);
    return TS_OK;
}

/* The cache levels: kernels built for the widest vectors the CPU has
 * (the runtime's kernels use them; a baseline SSE loop would understate
 * L1's bandwidth by 4x and the limit would overstate). */
#define XR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

XR_CLONES static void bw_copy(float *restrict a, const float *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++) a[i] = b[i];
}

XR_CLONES static void bw_triad(float *restrict a, const float *restrict b, const float *restrict c, float s, size_t n)
{
    for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

/* GB/s of copy (k 0) or triad (k 1) with each of the T threads over its
 * own three arrays of n floats at base + t * stride, reps passes: the sum
 * of the threads' own rates, each timed from its own start to its own end
 * (on a loaded machine a parallel region's threads rarely all start at
 * once: timed from outside, the wait for a core would count as memory
 * time, ~30x too slow at load 10 on 2 cores). */
static double level_pass(int k, float *base, size_t stride, size_t n, int reps, int T)
{
    double rate = 0;
#pragma omp parallel num_threads(T) reduction(+ : rate)
    {
        float *a = base + (size_t)omp_get_thread_num() * stride, *b = a + n, *c = b + n;
        double t0 = ts_clock_ms();
        for (int r = 0; r < reps; r++) {
            if (k == 0)
                bw_copy(a, b, n);
            else
                bw_triad(a, b, c, 1.0f + (float)(r & 7), n);
            __asm__ volatile("" ::: "memory"); /* every pass happens */
        }
        rate += (double)(k ? 3 : 2) * (double)n * sizeof(float) * reps / ((ts_clock_ms() - t0) * 1e6);
    }
    return rate;
}

ts_status xroof_measure_cache_bw(double gbps[XROOF_DRAM], ts_error *err)
{
    xroof_caches c = xroof_caches_get();
    int T = omp_get_max_threads();
    long l3 = 4 * T * c.l2 < c.l3 / 2 ? 4 * T * c.l2 : c.l3 / 2;
    size_t per_thread[XROOF_DRAM] = {(size_t)c.l1d / 2, (size_t)c.l2 / 2, (size_t)l3 / (size_t)T};
    size_t stride = ((per_thread[XROOF_L3] / sizeof(float)) + 4096) & ~(size_t)1023;
    float *base = aligned_alloc(4096, stride * sizeof(float) * (size_t)T);
    if (!base) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    /* first touch on the threads that run the passes */
#pragma omp parallel num_threads(T)
    memset(base + (size_t)omp_get_thread_num() * stride, 0, stride * sizeof(float));
    for (int l = 0; l < XROOF_DRAM; l++) {
        size_t n = (per_thread[l] / 3 / sizeof(float)) & ~(size_t)63;
        /* ~4 MB a thread a try (tens of us from L1): short tries, many of
         * them, so that some run with no other process on the cores */
        int reps = (int)((4u << 20) / (3 * n * sizeof(float))) + 1;
        gbps[l] = 0;
        for (int r = 0; r < 25; r++)
            for (int k = 0; k < 2; k++) {
                double g = level_pass(k, base, stride, n, reps, T);
                if (g > gbps[l]) gbps[l] = g;
            }
    }
    free(base);
    return TS_OK;
}

/* ------------------------------------------------------ FMA ceiling */

/* 12 independent vector FMA chains (more than latency x ports on any x86
 * core), n rounds: the FMA units' throughput with nothing from memory. */
__attribute__((target("avx512f"))) static float fma_avx512(float m, long n)
{
    __m512 a[12], mv = _mm512_set1_ps(m), c = _mm512_set1_ps(1e-7f);
    for (int j = 0; j < 12; j++) a[j] = _mm512_set1_ps((float)j);
    for (long i = 0; i < n; i++)
#pragma GCC unroll 12 /* the chains in registers, not in a[]'s memory */
        for (int j = 0; j < 12; j++) a[j] = _mm512_fmadd_ps(a[j], mv, c);
    float s = 0;
    for (int j = 0; j < 12; j++) s += _mm512_reduce_add_ps(a[j]);
    return s;
}

__attribute__((target("avx2,fma"))) static float fma_avx2(float m, long n)
{
    __m256 a[12], mv = _mm256_set1_ps(m), c = _mm256_set1_ps(1e-7f);
    for (int j = 0; j < 12; j++) a[j] = _mm256_set1_ps((float)j);
    for (long i = 0; i < n; i++)
#pragma GCC unroll 12 /* the chains in registers, not in a[]'s memory */
        for (int j = 0; j < 12; j++) a[j] = _mm256_fmadd_ps(a[j], mv, c);
    float t[8], s = 0;
    for (int j = 0; j < 12; j++) {
        _mm256_storeu_ps(t, a[j]);
        for (int k = 0; k < 8; k++) s += t[k];
    }
    return s;
}

double xroof_measure_fma(void)
{
    int wide = __builtin_cpu_supports("avx512f") ? 16 : __builtin_cpu_supports("fma") ? 8 : 0;
    if (!wide) return 0;
    int T = omp_get_max_threads();
    long n = 100000; /* 12 x 100000 vector FMAs a thread: ~0.2-0.4 ms */
    double best = 0;
    volatile float sink = 0;
    for (int r = 0; r < 25; r++) {
        double g = 0; /* the threads' own rates, as level_pass */
#pragma omp parallel num_threads(T) reduction(+ : g)
        {
            double t0 = ts_clock_ms();
            float v = wide == 16 ? fma_avx512(0.999f, n) : fma_avx2(0.999f, n);
            g += 2.0 * 12 * wide * (double)n / ((ts_clock_ms() - t0) * 1e6);
#pragma omp atomic
            sink += v;
        }
        best = g > best ? g : best;
    }
    return best;
}

const char *const xroof_level_name[XROOF_LEVELS] = {"L1", "L2", "L3", "mem"};

double xroof_flop_ceiling(const xroof_machine *m)
{
    return m->fma_gflops > m->gflops ? m->fma_gflops : m->gflops;
}

int xroof_level(const xroof_machine *m, double bytes)
{
    double t = m->threads > 0 ? m->threads : 1;
    if (bytes <= t * (double)m->caches.l1d) return XROOF_L1;
    if (bytes <= t * (double)m->caches.l2) return XROOF_L2;
    if (bytes <= (double)m->caches.l3) return XROOF_L3;
    return XROOF_DRAM;
}

/* The bandwidth data at level l can come at: the fastest of l and the
 * levels beyond it (0: none measured). */
static double level_gbps(const xroof_machine *m, int l)
{
    double best = 0;
    for (; l < XROOF_LEVELS; l++) best = m->gbps[l] > best ? m->gbps[l] : best;
    return best;
}

void xroof_measure_split(double *region_us, double *core_gbps)
{
    volatile int sink = 0;
#pragma omp parallel /* the team's creation, not timed */
    {
        if (omp_get_thread_num() == 0) sink++;
    }
    double best = 1e30, end = 0;
    /* single regions back to back, the fastest, for 5 ms from the end of
     * the first: on a loaded machine a region waits for a core (the first
     * one 20-70 ms at load 14 on the 2-core EPYC) and 300 regions timed in
     * batches took 0.1-3 s, added to the first plan's build; once the
     * team's threads hold their cores the next regions are the steps'
     * cost in a run */
    for (int r = 0; r < 300 && (r == 0 || ts_clock_ms() < end); r++) {
        double t0 = ts_clock_ms();
#pragma omp parallel
        {
            if (omp_get_thread_num() == 0) sink++;
        }
        double t1 = ts_clock_ms(), t = (t1 - t0) * 1e3;
        best = t < best ? t : best;
        if (r == 0) end = t1 + 5;
    }
    *region_us = best;
    /* one core copying within its L2: two arrays of a quarter of it */
    size_t n = ((size_t)xroof_caches_get().l2 / 4 / sizeof(float)) & ~(size_t)63;
    float *a = aligned_alloc(64, 2 * n * sizeof(float));
    *core_gbps = 0;
    if (!a) return;
    memset(a, 0, 2 * n * sizeof(float));
    end = ts_clock_ms() + 3;
    for (int r = 0; r < 25 && (r == 0 || ts_clock_ms() < end); r++) {
        double t0 = ts_clock_ms();
        for (int k = 0; k < 4; k++) {
            bw_copy(a, a + n, n);
            __asm__ volatile("" ::: "memory");
        }
        double g = 4 * 2.0 * (double)n * sizeof(float) / ((ts_clock_ms() - t0) * 1e6);
        *core_gbps = g > *core_gbps ? g : *core_gbps;
    }
    free(a);
}

double xroof_split_min_bytes(const xroof_machine *m, const xroof_overhead *o)
{
    int cores = m->threads > 0 ? m->threads : 1;
    double per_core = level_gbps(m, XROOF_L2) / cores; /* GB/s: bytes per ns */
    if (o->threads < 2 || o->region_us <= 0 || per_core <= 0) return 0;
    return o->region_us * 1e3 * per_core * o->threads / (o->threads - 1);
}

double xroof_memory_ms(const xroof_machine *m, const xroof_step *s, double run_weight_bytes, int *level)
{
    int la = xroof_level(m, s->bytes), lw = xroof_level(m, run_weight_bytes);
    lw = lw > la ? lw : la;
    double ga = level_gbps(m, la), gw = level_gbps(m, lw), act = s->bytes - s->weight_bytes;
    if (level) *level = la;
    return (ga > 0 ? act / (ga * 1e6) : 0) + (gw > 0 ? s->weight_bytes / (gw * 1e6) : 0);
}

double xroof_step_limit_ms(const xroof_machine *m, const xroof_step *s, double run_weight_bytes, bool *membound,
                           int *level)
{
    double q = m->int8_gops > 0 ? s->int8_flops : 0;
    double tb = xroof_memory_ms(m, s, run_weight_bytes, level),
           tf = xroof_limit_ms(0, s->flops - q, 0, xroof_flop_ceiling(m)) + xroof_limit_ms(0, q, 0, m->int8_gops);
    if (membound) *membound = tb >= tf;
    return tb > tf ? tb : tf;
}

/* ------------------------------------------------------------ overhead */

/* A chain of n nodes op on x (dims xd), each with a constant second input
 * of dims wd when given (a convolution's weights): the fastest run of its
 * plan without fusion, per step, in microseconds. */
static ts_status chain_us(const char *op, int xr, const int64_t *xd, const int64_t *wd, int n, double *us,
                          ts_error *err)
{
    ts_shape xs = ts_shape_make(xr, xd);
    ts_graph *g = ts_graph_new("overhead", 17);
    ts_tensor *w = NULL, *in = NULL, *out = NULL;
    ts_plan *plan = NULL;
    ts_status st = TS_OK;
    if (!g) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    int v = ts_graph_add_input(g, "x", TS_F32, &xs, err), c = -1;
    if (v < 0) goto fail;
    if (wd) {
        ts_shape ws = ts_shape_make(4, wd);
        uint64_t rng = 0x0f;
        if (!(w = ts_tensor_new(TS_F32, &ws, err))) goto fail;
        ts_tensor_fill_random(w, &rng, -0.3, 0.3);
        if ((c = ts_graph_add_constant(g, "w", w, err)) < 0) goto fail;
    }
    for (int i = 0; i < n; i++)
        if (ts_graph_add_node(g, op, NULL, (int[]){v, c}, wd ? 2 : 1, NULL, 0, 1, NULL, &v, err) < 0) goto fail;
    if (ts_graph_add_output(g, v, err)) goto fail;
    ts_plan_opts o = {.no_fusion = true};
    if (!(in = ts_tensor_new(TS_F32, &xs, err)) || !(out = ts_tensor_new(TS_F32, &xs, err)) ||
        ts_plan_build(g, &o, &plan, err))
        goto fail;
    memset(in->data, 0, in->nbytes);
    double best = 1e30;
    for (int r = 0; r < 30; r++) {
        double t0 = ts_clock_ms();
        if (ts_plan_run(plan, &in, &out, err)) goto fail;
        double t = ts_clock_ms() - t0;
        if (r >= 3 && t < best) best = t;
    }
    *us = best * 1e3 / xplan_step_count(plan);
    goto done;
fail:
    st = err->code ? err->code : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
done:
    ts_plan_free(plan);
    ts_tensor_unref(in);
    ts_tensor_unref(out);
    ts_tensor_unref(w);
    ts_graph_free(g);
    return st;
}

ts_status xroof_measure_overhead(xroof_overhead *o, ts_error *err)
{
    ts_status st;
    memset(o, 0, sizeof *o);
    if ((st = chain_us("Relu", 2, (int64_t[]){1, 16}, NULL, 256, &o->eltwise_us, err)) ||
        (st = chain_us("Conv", 4, (int64_t[]){1, 8, 4, 4}, (int64_t[]){8, 8, 1, 1}, 64, &o->conv_us, err)))
        return st;
    o->threads = omp_get_max_threads();
    double best = 1e30;
    volatile int sink = 0;
    for (int r = 0; r < 10; r++) {
        double t0 = ts_clock_ms();
        for (int i = 0; i < 200; i++) {
#pragma omp parallel
            {
                if (omp_get_thread_num() == 0) sink++;
            }
        }
        double t = (ts_clock_ms() - t0) * 1e3 / 200;
        if (t < best) best = t;
    }
    o->region_us = best;
    return TS_OK;
}

/* -------------------------------------------------------------- caches */

static long clamp_cache(long v, long lo, long hi, long dflt)
{
    if (v <= 0) return dflt;
    return v < lo ? lo : v > hi ? hi : v;
}

xroof_caches xroof_caches_get(void)
{
    xroof_caches c = {0};
#ifdef _SC_LEVEL1_DCACHE_SIZE
    c.l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    c.l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    c.l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    c.l1d = clamp_cache(c.l1d, 16 << 10, 256 << 10, 32 << 10);
    c.l2 = clamp_cache(c.l2, 128 << 10, 8L << 20, 1L << 20);
    /* a VM's cpuid can claim a 508 MiB last level (this project's 2-core
     * EPYC VM does); no x86 die shares more than 96 MiB among its cores */
    c.l3 = clamp_cache(c.l3, c.l2, 96L << 20, 8L << 20);
    return c;
}
