/* Conv and ConvTranspose on oneDNN (1-D/2-D/3-D, groups, dilations,
 * asymmetric pads).  At plan time: the primitive is created with layouts
 * "any" (oneDNN picks its blocked formats), weights are folded with any
 * following BatchNormalization / per-channel Add or Mul and reordered once
 * into the primitive's format, and a residual Add and activations become
 * post-ops.  The output stays in the chosen (blocked) layout, so that
 * consecutive convolutions never convert; an input in another layout is
 * reordered inside the step into scratch.  Run time: bind pointers, execute. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "dnnl/bf16_split.h"
#include "dnnl/dnnl_conv.h"
#include "dnnl/dnnl_layout.h"
#include "dnnl/dnnl_residual.h"
#include "dnnl/dnnl_serial.h"
#include "dnnl/dnnl_util.h"
#include "exec/half.h"
#include "vec/vec.h"
#include "vec/vec_post.h"
#include "ops/attrs.h"
#include "ops/list.h"

typedef struct conv_state {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    xd_mem src, wei, bias, dst, pad;
    bool has_bias, has_sum, reorder_in;
    bool serial;          /* tiny: built and run on one thread (dnnl_serial.h) */
    int res_in;           /* index of the residual operand among the step inputs */
    size_t in_off;        /* scratch offset of the reordered input */
    xd_reorder in_r, res_r;
    /* a half plan's conv made Winograd after the plan was built
     * (xd_conv_to_winograd): its result in Winograd's layout at out_off in
     * scratch, reordered into the layout its readers were built for */
    bool reorder_out;
    size_t out_off;
    xd_reorder out_r;
    dnnl_exec_arg_t args[6];
    int nargs;
    /* on Winograd: transformed weights beyond the direct ones, and the
     * scratchpad bytes it writes (wino_budget_ok) */
    size_t wino_wei_extra, wino_pad_used;
    /* in a half plan (direct, 16-bit weights): the transformed weights the
     * float32 plan of the graph holds beyond the direct ones here, when it
     * takes Winograd (half.c's byte budget, xd_conv_f32_wino_extra) */
    size_t f32_wino_extra, f32_wino_pad, f32_direct_bytes;
    void *own_pad; /* Winograd's own scratchpad mapping (wino_pad_own), or NULL */
    size_t own_pad_bytes;
    /* SiLU / sigmoid and what follows them, applied by tsopt to the result
     * (tail_n floats, padding included) rather than as oneDNN post-ops:
     * vec_post.c */
    xd_po tail[XD_MAX_FUSE];
    int ntail, tail_threads;
    int64_t tail_n;
    /* a squeeze-excite gate folded into the weights (dnnl.conv_gated,
     * below): each run scales the packed weights' input channels by the
     * gate (step input gate_in) into scratch at gate_off, run by run of
     * positions sharing an input channel (cin -1: padding, zeroed), then
     * rounded to gate_round where a 16-bit graph's Mul(W, gate) is */
    bool gated;
    ts_dtype gate_round;
    int gate_in, nruns;
    size_t gate_off;
    int64_t *run_off;
    int32_t *run_len, *run_cin;
    /* Half plans (half.c): a large weight is convolved in output-channel
     * chunks of at most CONV_CHUNK_BYTES in float32 by a primitive of its
     * own (cprim), the weight stored chunk after chunk in that primitive's
     * layout.  Stored 16-bit (chalf), each chunk is widened into scratch
     * that stays in the cache right before the chunk's convolution reads
     * it, instead of the whole weight widened into scratch, out to memory
     * and read back; kept float32 (half.c's budget), the chunks are read
     * as they are.  Each chunk's result, dense in the whole's activation
     * layout, is copied into place.  ResNet-50 float16, 1 thread, CPU per
     * run side by side (loaded): 0.96-0.98 of the whole widening; 13 of
     * its convolutions (the 3x3 from 256 channels, the large 1x1). */
    dnnl_primitive_t cprim;
    xd_mem cs, cw, cb, cd, cpad;
    dnnl_exec_arg_t cargs[6];
    int cnargs, nchunks;
    bool cblocked;                   /* dst aBcd16b (else acdb) */
    int64_t coc, coc_all, cimg, cpix; /* channels per chunk, all, images, pixels per image */
    size_t celems, cpoff, coff, doff; /* chunk weight elements; the chunk's pad, widened weight, result in scratch */
    ts_dtype chalf; /* the weight's 16-bit type, TS_UNDEFINED when float32 */
    /* A float16 plan's convolution on AMX-BF16 (bf16_split.h): in[1] holds
     * the float16 weights in the bfloat16 primitives' layout, split each run
     * into Wh, Wl (scratch at wh_off, wl_off, nw values each), the input
     * (reordered to that layout in float32 first, at in_off, when it is in
     * another) into Xh, Xl (xh_off, xl_off, nx values).  Three passes into
     * dst: prim Wh.Xh + bias (+ a leading residual sum), x3prim[0] + Wh.Xl,
     * x3prim[1] + Wl.Xh then the element-wise post-ops. */
    /* A half plan's residual Add [+ Relu] (xd_fuse.half_sum): after the
     * convolution, dst = relu(round(round(dst) + r)) in place, r the step's
     * input res_in in dst's layout; hsum the 16-bit type, else 0. */
    ts_dtype hsum;
    bool hsum_relu;
    bool x3;
    dnnl_primitive_t x3prim[2];
    xd_mem x3s[2], x3w[2], x3d[2], x3p[2], x3b[2];
    dnnl_exec_arg_t x3args[2][6];
    int x3nargs[2];
    size_t xh_off, xl_off, wh_off, wl_off, nx, nw;
} conv_state;

static void conv_destroy(void *state)
{
    conv_state *c = state;
    if (!c) return;
    if (c->prim) dnnl_primitive_destroy(c->prim);
    xd_mem_fini(&c->src);
    xd_mem_fini(&c->wei);
    xd_mem_fini(&c->bias);
    xd_mem_fini(&c->dst);
    xd_mem_fini(&c->pad);
    xd_reorder_fini(&c->in_r);
    xd_reorder_fini(&c->res_r);
    xd_reorder_fini(&c->out_r);
    if (c->own_pad) munmap(c->own_pad, c->own_pad_bytes);
    if (c->cprim) dnnl_primitive_destroy(c->cprim);
    xd_mem_fini(&c->cs);
    xd_mem_fini(&c->cw);
    xd_mem_fini(&c->cb);
    xd_mem_fini(&c->cd);
    xd_mem_fini(&c->cpad);
    for (int i = 0; i < 2; i++) {
        if (c->x3prim[i]) dnnl_primitive_destroy(c->x3prim[i]);
        xd_mem_fini(&c->x3s[i]);
        xd_mem_fini(&c->x3w[i]);
        xd_mem_fini(&c->x3d[i]);
        xd_mem_fini(&c->x3p[i]);
        xd_mem_fini(&c->x3b[i]);
    }
    free(c->run_off);
    free(c->run_len);
    free(c->run_cin);
    free(c);
}

/* w = packed weights with input channel i scaled by gate[i] (conv_state). */
static void gate_weights(const conv_state *c, const float *packed, const float *gate, float *w)
{
    for (int r = 0; r < c->nruns; r++) {
        const float *src = packed + c->run_off[r];
        float *dst = w + c->run_off[r];
        const int32_t len = c->run_len[r];
        const float gv = c->run_cin[r] >= 0 ? gate[c->run_cin[r]] : 0.0f;
#pragma omp simd
        for (int32_t j = 0; j < len; j++) dst[j] = src[j] * gv;
        if (c->gate_round) xhalf_round(c->gate_round, dst, (size_t)len);
    }
}

/* The conv_state chunks: widen chunk j's weights, convolve, copy its
 * channels into place. */
static void conv_run_chunks(conv_state *c, void *src, void *const *in, float *y, char *scratch)
{
    float *w = (float *)(scratch + c->coff), *d = (float *)(scratch + c->doff);
    xd_mem_bind(&c->cs, src, c->stream);
    xd_mem_bind(&c->cw, w, c->stream);
    xd_mem_bind(&c->cd, d, c->stream);
    xd_mem_bind(&c->cpad, scratch + c->cpoff, c->stream);
    const int64_t k = c->coc, K = c->coc_all, P = c->cpix;
    for (int j = 0; j < c->nchunks; j++) {
        if (c->chalf)
            xhalf_widen(c->chalf, (const uint16_t *)in[1] + (size_t)j * c->celems, w, c->celems);
        else /* kept float32 (half.c's budget, or not exactly 16-bit) */
            xd_mem_bind(&c->cw, (float *)in[1] + (size_t)j * c->celems, c->stream);
        if (c->has_bias) xd_mem_bind(&c->cb, (float *)in[2] + j * k, c->stream);
        dnnl_primitive_execute(c->cprim, c->stream, c->cnargs, c->cargs);
        dnnl_stream_wait(c->stream);
        if (c->cblocked) /* 16-channel blocks: the chunk's are one range per image */
            for (int64_t i = 0; i < c->cimg; i++)
                memcpy(y + (i * K + j * k) * P, d + i * k * P, sizeof(float) * (size_t)(k * P));
        else
            for (int64_t i = 0; i < c->cimg * P; i++)
                memcpy(y + i * K + j * k, d + i * k, sizeof(float) * (size_t)k);
    }
}

/* The three AMX-BF16 passes (conv_state x3) over the input src, float32
 * in the primitives' layout. */
static void conv_run_x3(conv_state *c, const float *src, void *const *in, void *dst, char *scratch)
{
    uint16_t *xh = (uint16_t *)(scratch + c->xh_off), *xl = (uint16_t *)(scratch + c->xl_off),
             *wh = (uint16_t *)(scratch + c->wh_off), *wl = (uint16_t *)(scratch + c->wl_off);
    xd_bf16_split(src, xh, xl, c->nx);
    xd_bf16_split_f16(in[1], wh, wl, c->nw);
    if (c->has_sum) xd_reorder_run(&c->res_r, in[c->res_in], dst, c->stream);
    xd_mem_bind(&c->src, xh, c->stream);
    xd_mem_bind(&c->wei, wh, c->stream);
    if (c->has_bias) xd_mem_bind(&c->bias, in[2], c->stream);
    xd_mem_bind(&c->dst, dst, c->stream);
    xd_mem_bind(&c->pad, scratch, c->stream);
    dnnl_primitive_execute(c->prim, c->stream, c->nargs, c->args);
    for (int i = 0; i < 2; i++) {
        xd_mem_bind(&c->x3s[i], i ? xh : xl, c->stream);
        xd_mem_bind(&c->x3w[i], i ? wl : wh, c->stream);
        xd_mem_bind(&c->x3d[i], dst, c->stream);
        xd_mem_bind(&c->x3p[i], scratch, c->stream);
        dnnl_primitive_execute(c->x3prim[i], c->stream, c->x3nargs[i], c->x3args[i]);
    }
    dnnl_stream_wait(c->stream);
}

static void conv_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    conv_state *c = s->state;
    void *src = in[0];
    int threads = xd_serial_enter(c->serial);
    if (c->reorder_in) {
        src = (char *)scratch + c->in_off;
        xd_reorder_run(&c->in_r, in[0], src, c->stream);
    }
    if (c->x3) {
        conv_run_x3(c, src, in, out[0], scratch);
        if (c->ntail) xv_post_run(c->tail, c->ntail, out[0], c->tail_n, c->serial ? 1 : c->tail_threads);
        xd_serial_leave(c->serial, threads);
        return;
    }
    if (c->cprim) {
        conv_run_chunks(c, src, in, out[0], scratch);
        if (c->hsum) xhalf_round_add(c->hsum, out[0], in[c->res_in], (size_t)c->tail_n, c->hsum_relu);
        xd_serial_leave(c->serial, threads);
        return;
    }
    /* the sum post-op accumulates onto what dst holds: put the residual
     * there (unless dst is the residual's own storage) */
    if (c->has_sum) xd_reorder_run(&c->res_r, in[c->res_in], out[0], c->stream);
    xd_mem_bind(&c->src, src, c->stream);
    if (c->gated) {
        float *w = (float *)((char *)scratch + c->gate_off);
        gate_weights(c, in[1], in[c->gate_in], w);
        xd_mem_bind(&c->wei, w, c->stream);
    } else {
        xd_mem_bind(&c->wei, in[1], c->stream);
    }
    if (c->has_bias) xd_mem_bind(&c->bias, in[2], c->stream);
    void *dst = c->reorder_out ? (char *)scratch + c->out_off : out[0];
    xd_mem_bind(&c->dst, dst, c->stream);
    xd_mem_bind(&c->pad, c->own_pad ? c->own_pad : scratch, c->stream);
    dnnl_primitive_execute(c->prim, c->stream, c->nargs, c->args);
    dnnl_stream_wait(c->stream);
    if (c->reorder_out) xd_reorder_run(&c->out_r, dst, out[0], c->stream);
    if (c->ntail) xv_post_run(c->tail, c->ntail, out[0], c->tail_n, c->serial ? 1 : c->tail_threads);
    if (c->hsum) xhalf_round_add(c->hsum, out[0], in[c->res_in], (size_t)c->tail_n, c->hsum_relu);
    xd_serial_leave(c->serial, threads);
}

/* Resolved geometry in oneDNN's terms (dilation minus one). */
typedef struct geom {
    int nsp;
    dnnl_dims_t stride, dil, pl, pr;
    dnnl_alg_kind_t alg; /* convolution: auto unless Winograd is asked for */
    bool bf16;           /* src and weights bfloat16 (a float16 plan on AMX: xd_conv_bf16_wanted) */
} geom;

static ts_status conv_geom(const xplan *p, int n, bool transposed, geom *o, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const ts_shape *x = &g->values[nd->inputs[0]].shape, *w = &g->values[nd->inputs[1]].shape,
                   *y = &g->values[nd->outputs[0]].shape;
    ts_window_geom wg;
    char why[256];
    int nsp = x->rank - 2;
    o->nsp = nsp;
    o->alg = dnnl_convolution_auto;
    o->bf16 = false;
    if (!transposed) {
        const ts_conv_attrs *ca = nd->attrs;
        if (!ts_window_resolve(&ca->win, nsp, x->dims + 2, w->dims + 2, &wg, why, sizeof why))
            return ts_error_set(err, TS_ERR_INVALID, "node '%s' (Conv): %s", nd->name, why);
        for (int i = 0; i < nsp; i++) {
            o->stride[i] = wg.stride[i];
            o->dil[i] = wg.dil[i] - 1;
            o->pl[i] = wg.pad_begin[i];
            o->pr[i] = wg.pad_end[i];
        }
        return TS_OK;
    }
    /* ConvTranspose: the output size is known (inferred); pads_end is what
     * makes oneDNN's size formula give it, so output_padding and
     * output_shape turn into a smaller (possibly negative) right pad. */
    if (!ts_convt_geom(nd->attrs, x, w, NULL, &wg, why, sizeof why))
        return ts_error_set(err, TS_ERR_INVALID, "node '%s' (ConvTranspose): %s", nd->name, why);
    for (int i = 0; i < nsp; i++) {
        int64_t span = (wg.kernel[i] - 1) * wg.dil[i] + 1;
        o->stride[i] = wg.stride[i];
        o->dil[i] = wg.dil[i] - 1;
        o->pl[i] = wg.pad_begin[i];
        o->pr[i] = wg.stride[i] * (wg.in[i] - 1) + span - wg.pad_begin[i] - y->dims[2 + i];
    }
    return TS_OK;
}

/* Weights in oneDNN's logical order ([G,] O, I, spatial) as a plain md over
 * the ONNX tensor: Conv W is (G*Fg, Cg, k) row-major; ConvTranspose W is
 * (G*Cg, Fg, k), so O and I are swapped through strides. */
static void weights_md(dnnl_memory_desc_t *md, const ts_shape *w, int64_t G, bool transposed, bool any)
{
    int nsp = w->rank - 2, nd = 0;
    dnnl_dims_t dims, strides;
    int64_t K = 1;
    for (int i = 0; i < nsp; i++) K *= w->dims[2 + i];
    int64_t O = transposed ? w->dims[1] : w->dims[0] / G, I = transposed ? w->dims[0] / G : w->dims[1];
    if (G > 1) dims[nd] = G, strides[nd++] = O * I * K;
    dims[nd] = O, strides[nd++] = transposed ? K : I * K;
    dims[nd] = I, strides[nd++] = transposed ? O * K : K;
    int64_t st = K;
    for (int i = 0; i < nsp; i++) {
        st /= w->dims[2 + i];
        dims[nd] = w->dims[2 + i], strides[nd++] = st;
    }
    if (any)
        dnnl_memory_desc_init_by_tag(md, nd, dims, dnnl_f32, dnnl_format_tag_any);
    else
        dnnl_memory_desc_init_by_strides(md, nd, dims, dnnl_f32, strides);
}

/* Plain copy of W with output channel o scaled by scale[o]. */
static float *folded_weights(const ts_tensor *W, int64_t G, bool transposed, const float *scale)
{
    float *w = xd_alloc(W->nbytes);
    if (!w) return NULL;
    memcpy(w, W->data, W->nbytes);
    if (!scale) return w;
    const ts_shape *s = &W->shape;
    int64_t K = 1;
    for (int i = 2; i < s->rank; i++) K *= s->dims[i];
    if (!transposed) {
        for (int64_t o = 0; o < s->dims[0]; o++)
            for (int64_t j = 0; j < s->dims[1] * K; j++) w[o * s->dims[1] * K + j] *= scale[o];
    } else {
        int64_t Fg = s->dims[1], Cg = s->dims[0] / G;
        for (int64_t c = 0; c < s->dims[0]; c++)
            for (int64_t f = 0; f < Fg; f++)
                for (int64_t k = 0; k < K; k++) w[(c * Fg + f) * K + k] *= scale[(c / Cg) * Fg + f];
    }
    return w;
}

/* Runs a reorder once at plan time (weights into the primitive's format). */
static ts_status reorder_now(const xplan *p, int n, const dnnl_memory_desc_t *from, void *src,
                             const dnnl_memory_desc_t *to, void *dst, ts_error *err)
{
    xd_reorder r;
    ts_status st = xd_reorder_init(&r, from, to, p, n, err);
    /* a large one (Winograd's: oneDNN transforms the whole tensor into a
     * buffer of its own first) sets the lowering's peak: the generators'
     * code run so far need not be resident beside it (resnet18's 512-channel
     * layers, issue 27) */
    if (!st && dnnl_memory_desc_get_size(to) >= XWEIGHTS_RELEASE_CODE_BYTES) xplan_release_code(p);
    if (!st) {
        xd_reorder_run(&r, src, dst, p->stream);
        dnnl_stream_wait(p->stream);
    }
    xd_reorder_fini(&r);
    return st;
}

static ts_status make_pd(const xplan *p, int n, bool transposed, const geom *ge, const dnnl_memory_desc_t *src,
                         const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst,
                         const xd_fuse *f, dnnl_primitive_desc_t *pd, ts_error *err)
{
    dnnl_primitive_attr_t attr;
    ts_status st = xd_check(dnnl_primitive_attr_create(&attr), p, n, "attr_create", err);
    if (st) return st;
    st = xd_check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), p, n, "scratchpad", err);
    if (!st) st = xd_fuse_attr(f, attr, p, n, err);
    dnnl_memory_desc_t s16, w16;
    if (ge->bf16) { /* the same layouts, 16-bit: the input reorder converts */
        s16 = *src, w16 = *wei;
        s16.data_type = w16.data_type = dnnl_bf16;
        src = &s16, wei = &w16;
    }
    if (!st) {
        dnnl_status_t ds;
        if (!transposed) {
            dnnl_convolution_desc_t d;
            ds = dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_inference, ge->alg, src, wei,
                                                            bias, dst, ge->stride, ge->dil, ge->pl, ge->pr);
            if (ds == dnnl_success) ds = dnnl_primitive_desc_create(pd, &d, attr, p->engine, NULL);
        } else {
            dnnl_deconvolution_desc_t d;
            ds = dnnl_dilated_deconvolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_deconvolution_direct,
                                                              src, wei, bias, dst, ge->stride, ge->dil, ge->pl, ge->pr);
            if (ds == dnnl_success) ds = dnnl_primitive_desc_create(pd, &d, attr, p->engine, NULL);
        }
        st = xd_check(ds, p, n, transposed ? "deconvolution" : "convolution", err);
    }
    dnnl_primitive_attr_destroy(attr);
    return st;
}

bool xd_conv_amx_wanted(const xplan *p)
{
    return p->half == TS_F16 && !xplan_skips(p, "half.amx") && xd_cpu_amx_bf16();
}

/* Output pixels (batch x spatial) below which a convolution stays on the
 * float32 kernels: each run splits the weights (as the float32 path widens
 * them), and AMX gains per pixel.  ResNet-50 float16 b1, CPU per run
 * (perf stat task-clock, 21 minus 1 runs, medians of 3 alternating rounds,
 * loaded Intel Xeon, load 17): all on AMX 64.8 ms, from 196 pixels 62.8
 * (layer4's 7x7 stays: 15 M of the 25 M weights, whose split scratch,
 * 9.4 MB, left the arena), from 400 66.8, none (half.amx) 75.8; the three
 * thresholds are within the noise of each other. */
#define X3_MIN_PIXELS 196
/* Multiply-adds per output pixel (the weight's elements) below which too:
 * per pixel the passes also split the input's channels and add into dst
 * three times.  ResNet-50 float16 b1, `tsopt profile --against-skip
 * half.amx --min` (per step, alternating in one process, load 8-12): 64->64
 * 1x1 (4096) 1.40 of the float32 kernels' time, 64->256 / 256->64 1x1
 * (16384) 0.93-1.27, the 7x7 stem from 3 channels (9408) 1.20; from 256->128
 * 1x1 (32768) 0.85 and 64->64 3x3 (36864) 0.46-0.65 up, 0.38-0.87. */
#define X3_MIN_MACS 32768
/* Input channels per group below which too: an AMX bfloat16 tile row
 * multiplies 32 values along the reduction (TDPBF16PS, 64 bytes), which
 * oneDNN 2.6's brgconv fills with a tap's input channels, so 3 channels
 * leave ~90 % of each multiply padding.  Measured (in-process A/B, `tsopt
 * profile --against-skip half.amx --min`, loaded Intel Xeon): ViT-B/16's
 * patch embedding (3 channels, 16x16 stride 16, 196 pixels, 589824 MACs
 * per pixel: past both floors above) 1.30 of the float32 kernels' time,
 * and its split scratch (9.45 MiB) was the b1 arena's peak; ResNet-50's
 * 3-channel stem 1.20 (already below X3_MIN_MACS).  Every ResNet-50 layer
 * past the floors has 64 channels or more. */
#define X3_MIN_CIN 32

/* The three passes' primitives from the chosen one (*pd, every post-op):
 * *pd becomes the first (bias, the leading sum), x3pd the second (+ sum)
 * and the third (+ sum, the element-wise post-ops), all in *pd's layouts
 * and on AMX; nonzero (nothing changed) when oneDNN will not. */
static int x3_pds(const xplan *p, int n, const geom *ge, const xd_fuse *f, dnnl_primitive_desc_t *pd,
                  dnnl_primitive_desc_t x3pd[2], const dnnl_memory_desc_t *bias)
{
    const dnnl_memory_desc_t *src = dnnl_primitive_desc_query_md(*pd, dnnl_query_src_md, 0),
                             *wei = dnnl_primitive_desc_query_md(*pd, dnnl_query_weights_md, 0),
                             *dst = dnnl_primitive_desc_query_md(*pd, dnnl_query_dst_md, 0);
    xd_fuse fa = *f, fb = *f, fc = *f;
    int lead = f->npo && f->po[0].kind == XD_PO_SUM;
    fa.npo = lead;
    fb.npo = 1;
    fb.po[0] = (xd_po){.kind = XD_PO_SUM};
    fc.po[0] = fb.po[0];
    for (int i = lead; i < f->npo; i++) fc.po[1 + i - lead] = f->po[i];
    fc.npo = 1 + f->npo - lead;
    dnnl_primitive_desc_t q[3] = {NULL, NULL, NULL};
    const xd_fuse *fs[3] = {&fa, &fb, &fc};
    int bad = 0;
    for (int i = 0; i < 3 && !bad; i++) {
        ts_error e = {0};
        bad = make_pd(p, n, false, ge, src, wei, i ? NULL : bias, dst, fs[i], &q[i], &e) || !xd_pd_is_amx(q[i]) ||
              !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(q[i], dnnl_query_src_md, 0), src) ||
              !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(q[i], dnnl_query_weights_md, 0), wei) ||
              !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(q[i], dnnl_query_dst_md, 0), dst);
    }
    if (bad) {
        for (int i = 0; i < 3; i++)
            if (q[i]) dnnl_primitive_desc_destroy(q[i]);
        return 1;
    }
    dnnl_primitive_desc_destroy(*pd);
    *pd = q[0];
    x3pd[0] = q[1];
    x3pd[1] = q[2];
    return 0;
}

/* Winograd F(2x2 / 4x4, 3x3) pays off for 2-D 3x3 stride-1 undilated
 * ungrouped convolutions with enough channels; thresholds from the
 * measurements quoted in build(). */
static bool wino_worth(const ts_shape *x, const ts_shape *w, int64_t G, const geom *ge)
{
    /* Winograd's transformed weights are 16/9 (F(2,3)) or 4x (F(4,3)) the
     * direct ones, streamed from memory at batch 1 on small images; still,
     * ResNet's 14x14 and 7x7 layers (256 and 512 channels) gain from it:
     * one layer repeated, 2 threads, best of 200: 256ch 14x14 0.52 ms vs
     * 1.10 (jit, 16-channel blocks) and 0.92 (brgconv, NHWC); 512ch 7x7
     * 0.61 vs 0.77 / 0.89.  In the models (sum of per-step minima over 20
     * runs, load ~15, three rounds): resnet18 16.5-16.9 -> 13.0-13.4 ms
     * with 7x7 and up, 14.9-15.4 with 14x14 and up; resnet50 40.7-41.4 ->
     * 36.9-37.0; inception_v3 unchanged.  So images from 7x7 qualify
     * (xd_wino_shape, dnnl_layout.h: the rule, shared with the lowering
     * stage's xlow_blocks_readers). */
    if (x->rank != 4) return false;
    int64_t stride[2] = {ge->stride[0], ge->stride[1]}, dil[2] = {ge->dil[0] + 1, ge->dil[1] + 1};
    return xd_wino_shape(x, w, G, stride, dil);
}

/* Winograd's memory: its transformed weights (16/9 or 4x the direct ones)
 * and a scratchpad.  oneDNN's avx512 F(4,3) kernel books in that scratchpad
 * a buffer for transformed weights as large as the weights themselves, which
 * inference never writes (the weights come transformed): with mincore after
 * a run, 2 threads, scratch touched / booked / weights: 2048->512 at 20x20
 * 9.2 / 166.5 / 151.0 MB, 256->256 at 56x56 14.5 / 30.2 / 9.4, 64->64 at
 * 224x224 0.8 / 1.3 / 0.3, 128->128 at 28x28 3.2 / 4.1 / 1.0 (no weights
 * buffer there: 0.1 MB under the estimate), 512->512 at 7x7 1.0 / 3.2 / 16.8
 * (F(2,3): scratch smaller than the weights, counted whole).  The plan's
 * arena is zeroed when made, which would back those pages too: such a
 * scratchpad gets a mapping of its own (wino_pad_own), where pages never
 * written cost nothing.  Until 2026-11-26 the whole scratchpad counted, against a fixed 128 MiB:
 * FCN-ResNet50's head (3x3, 2048 -> 512) looked 317 MB dearer than direct
 * instead of 122, and ran direct at 1.6x Winograd's time. */
static size_t wino_pad_used(const_dnnl_primitive_desc_t pd)
{
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t w = wmd ? dnnl_memory_desc_get_size(wmd) : 0, sp = smd ? dnnl_memory_desc_get_size(smd) : 0;
    return sp > w ? sp - w : sp;
}

/* The scratchpad is mostly the unwritten weights buffer: it gets its own
 * lazily backed mapping rather than the plan's zeroed, shared scratch region
 * (a private one costs what it writes, in every such step; the shared one
 * costs its largest scratchpad, once).  Worth it only where the unwritten
 * part dwarfs what other layers share: more than WINO_OWN_PAD_BYTES (the
 * plans' whole shared scratch was at most 52 MiB on the bench and zoo
 * models: csrnet).  Lower, googlenet's six 3x3 convs with a few MiB
 * unwritten took 6 MiB more peak, csrnet's 512-channel ones 5 MiB. */
#define WINO_OWN_PAD_BYTES ((size_t)64 << 20)
#define WINO_FREE_BYTES ((size_t)16 << 20)

static bool wino_pad_own(const_dnnl_primitive_desc_t pd)
{
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t used = wino_pad_used(pd), unwritten = smd ? dnnl_memory_desc_get_size(smd) - used : 0;
    return unwritten > used && unwritten > WINO_OWN_PAD_BYTES;
}

static size_t wino_wei_extra(const_dnnl_primitive_desc_t pd, const ts_tensor *W)
{
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    size_t w = wmd ? dnnl_memory_desc_get_size(wmd) : 0;
    return w > W->nbytes ? w - W->nbytes : 0;
}

/* The cap is relative to what ONNX Runtime holds for the same model (issue
 * 12: peak memory at most 1.05x ORT's).  ORT keeps the weights of its Conv,
 * Gemm and MatMul nodes twice (the initializer and its packed copy); tsopt
 * holds them once.  Its peak (process less a bare node, BENCHMARKS.md) over
 * all the model's weights: resnet50 2.9, fcn_resnet50 3.6, resnet18 4.0,
 * vgg11 1.97 (mostly a Gemm's), vit_b_16_l4 1.9, swin_t 2.1; only
 * convnext_tiny is lower (1.64), and it has no Winograd candidate.  So the
 * plan's Winograd extras (all transformed weights beyond the direct ones,
 * plus the scratchpads written: the largest of those in the plan's shared
 * scratch region, every one with a mapping of its own) may take up to 1.05 x 2 - 1 = 1.1 times those weights, plus
 * WINO_FREE_BYTES.  Measured: resnet50 24 MiB of extras (unchanged);
 * fcn_resnet50 with its head on Winograd 108 MiB more weights for 126 MiB.
 * The weights are summed by the lowering stage (xplan_product_weight_bytes). */
/* WINO_FREE_BYTES on top: ORT's own holdings beyond twice the weights were
 * 31 MiB on the smallest bench model (mobilenet_v3_small) and 44-200 MiB on
 * the others; half of the least is allowed, so that small networks of 3x3
 * convs keep Winograd (their transformed weights are 16/9 to 4x the direct
 * ones).  The cap is per layer, not on the plan's sum: capping the sum cost
 * CSRNet (zoo) its Winograd on the last 512-channel layers, 17% of its
 * latency (2 threads, best of 3: 126.5-127.6 -> 148.4-152.3 ms).  Not
 * counted: the packing transient (oneDNN's Winograd weight reorder
 * transforms the whole tensor into a buffer of its own first), which sets
 * fcn_resnet50's peak (441 MiB; 281 once the plan is built). */
static bool wino_budget_ok(const xplan *p, size_t wei_extra, size_t pad_used)
{
    size_t w = xplan_product_weight_bytes(p); /* lower_post.c */
    return wei_extra + pad_used <= w + w / 10 + WINO_FREE_BYTES;
}

static bool is_wino(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
           strstr(impl, "wino");
}

extern const xkernel xk_dnnl_conv;
#define CONV_CHUNK_BYTES (1024 * 1024) /* a widened chunk at most (unless one block of channels is more) */

/* The output-channel-chunk primitive of a half plan's large weight (see
 * conv_state), its weights laid out chunk after chunk as it takes them
 * (*cwk); left out (c->cprim NULL) whenever the convolution or the layouts
 * do not allow it. */
static void prepare_chunks(const xplan *p, int n, conv_state *c, const geom *ge, const xd_fuse *f,
                           const dnnl_memory_desc_t *csrc, const dnnl_memory_desc_t *cdst,
                           const dnnl_memory_desc_t *bias, dnnl_memory_desc_t *cwk)
{
    const ts_shape *ws = &p->g->values[xplan_node(p, n)->inputs[1]].shape;
    if (!p->half || ge->bf16 || xplan_skips(p, "half.chunk") || (f->sum_value >= 0 && !f->half_sum) || c->ntail || ws->rank != 4 ||
        cdst->ndims != 4 || (size_t)ts_shape_numel(ws) * sizeof(float) < 2 * CONV_CHUNK_BYTES)
        return;
    const int64_t K = ws->dims[0], per = ws->dims[1] * ws->dims[2] * ws->dims[3];
    dnnl_memory_desc_t md;
    dnnl_format_tag_t dtag = dnnl_format_tag_undef;
    const dnnl_format_tag_t dtags[] = {dnnl_acdb, dnnl_aBcd16b};
    for (int i = 0; i < 2 && dtag == dnnl_format_tag_undef; i++)
        if (dnnl_memory_desc_init_by_tag(&md, 4, cdst->dims, dnnl_f32, dtags[i]) == dnnl_success &&
            dnnl_memory_desc_equal(&md, cdst))
            dtag = dtags[i];
    if (dtag == dnnl_format_tag_undef) return;
    int64_t k = (int64_t)(CONV_CHUNK_BYTES / ((size_t)per * sizeof(float))) / 16 * 16;
    if (k < 16) k = 16;
    while (k > 16 && K % k) k -= 16;
    if (K % k || k == K) return;
    dnnl_memory_desc_t wei, dst, bmd;
    dnnl_dims_t wd = {k, ws->dims[1], ws->dims[2], ws->dims[3]}, dd = {cdst->dims[0], k, cdst->dims[2], cdst->dims[3]};
    dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, dtag);
    dnnl_memory_desc_init_by_tag(&bmd, 1, (dnnl_dims_t){k}, dnnl_f32, dnnl_a);
    dnnl_primitive_desc_t pd = NULL;
    ts_error e = {0};
    /* the chunk's weights unpadded (16-bit accounting), src and dst as the whole's */
    if (make_pd(p, n, false, ge, csrc, &wei, bias ? &bmd : NULL, &dst, f, &pd, &e) || xd_pd_is_ref(pd) ||
        dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0)) !=
            (size_t)(k * per) * sizeof(float) ||
        !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), &dst) ||
        !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), csrc) ||
        dnnl_primitive_create(&c->cprim, pd) != dnnl_success) {
        c->cprim = NULL;
        if (pd) dnnl_primitive_desc_destroy(pd);
        return;
    }
    *cwk = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *cpad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    const xd_weighted w = {&c->cs, &c->cw, &c->cd, &c->cpad, &c->cb};
    if (xd_weighted_init(&w, csrc, cwk, &dst, cpad, bias ? &bmd : NULL, p, n, c->cargs, &c->cnargs, &e)) {
        dnnl_primitive_destroy(c->cprim);
        c->cprim = NULL;
    } else {
        c->coc = k;
        c->coc_all = K;
        c->nchunks = (int)(K / k);
        c->celems = (size_t)(k * per);
        c->cblocked = dtag == dnnl_aBcd16b;
        c->cimg = cdst->dims[0];
        c->cpix = cdst->dims[2] * cdst->dims[3];
        c->coff = xd_round(dnnl_memory_desc_get_size(cpad)); /* cpoff, the step's own scratch before it: at build end */
    }
    dnnl_primitive_desc_destroy(pd);
}

/* A convolution whose weights are Mul(W, gate) (dnnl.conv_gated, what
 * ts_fold_gate writes): W the constant, gate (C values) scaling its input
 * channels at run time. */
typedef struct gated_in {
    int w, gate;
} gated_in;

static ts_status gate_runs(const xplan *p, int n, const ts_tensor *W, const dnnl_memory_desc_t *wsrc,
                           const dnnl_memory_desc_t *cwei, conv_state *c, ts_error *err);

/* Convolution node n with the post-op tail the lowering stage handed
 * (lower_post.c), whole or its affine folds alone: the step computes them
 * all or declines (then the stage offers the shorter choice). */
static ts_status build(xplan *p, int n, xstep *s, bool transposed, const gated_in *gt, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    int xv = nd->inputs[0], wv = gt ? gt->w : nd->inputs[1], bv = nd->ninputs > 2 ? nd->inputs[2] : -1, yv = nd->outputs[0];
    const ts_tensor *W = xplan_const(p, wv), *B = bv >= 0 ? xplan_const(p, bv) : NULL;
    const ts_shape *xs = &g->values[xv].shape, *ys = &g->values[yv].shape;
    /* runtime weights and non-f32 types are left to the reference kernel */
    if (!W || (bv >= 0 && !B) || g->values[xv].dtype != TS_F32 || W->dtype != TS_F32 || xs->rank < 3 ||
        xs->rank > 5)
        return TS_ERR_UNSUPPORTED;
    const int64_t G =
        transposed ? ((const ts_convt_attrs *)nd->attrs)->group : ((const ts_conv_attrs *)nd->attrs)->group;
    geom ge;
    ts_status st = conv_geom(p, n, transposed, &ge, err);
    if (st) return st;
    const int64_t F = ys->dims[1];

    xd_fuse f = p->group->post; /* its scale and shift stay the group's */
    /* SiLU and sigmoid post-ops cost oneDNN more than the convolution
     * itself: the step applies them (vec_post.c).  TSOPT_SKIP=post_tail
     * leaves them to oneDNN (A/B measurements). */
    xd_po tail[XD_MAX_FUSE];
    int ntail = 0;
    if (!xplan_skips(p, "post_tail")) xv_post_tail_split(&f, tail, &ntail);
    /* a float16 plan on AMX-BF16 (conv_state x3): the weights as they will
     * be packed, folded, must be float16 values (then they split exactly) */
    float *wfold = NULL;
    if (!transposed && !gt && !f.half_sum && xd_conv_amx_wanted(p) && xd_x3_post_ok(&f) &&
        ts_shape_numel(ys) / ys->dims[1] >= X3_MIN_PIXELS && ts_shape_numel(&W->shape) >= X3_MIN_MACS &&
        W->shape.dims[1] >= X3_MIN_CIN) {
        if (f.scale && !(wfold = folded_weights(W, G, transposed, f.scale)))
            return ts_error_set(err, TS_ERR_NOMEM, "node '%s' (%s): out of memory", nd->name, nd->op->name);
        ge.bf16 = xd_on_f16_grid(wfold ? wfold : W->data, (size_t)ts_shape_numel(&W->shape));
        if (!ge.bf16) free(wfold), wfold = NULL;
    }
again:;
    bool plain_out = p->opts.plain_layout || ts_graph_is_output(g, f.out_value);
    /* X's layout as it is or would be made: its buffer is made once the
     * primitive is known (a declined conv leaves the plan as it found it) */
    xbuf xscratch;
    const bool x_blocked = xplan_value_layout(p, xv, &xscratch)->blocked;
    dnnl_memory_desc_t xmd, src, wei, dst, bmd, *bias = NULL;
    xd_md_of(xplan_value_layout(p, xv, &xscratch), &xmd);
    if (x_blocked || p->opts.plain_layout)
        src = xmd; /* consume the producer's layout as is (first choice) */
    else
        xd_md_any(&src, xs);
    weights_md(&wei, &W->shape, G, transposed, true);
    if (plain_out)
        xd_md_plain(&dst, ys);
    else
        xd_md_any(&dst, ys);
    bool has_bias = B || f.scale;
    if (has_bias) {
        ts_shape bs = {.rank = 1, .dims = {F}};
        xd_md_plain(&bmd, &bs);
        bias = &bmd;
    }
    dnnl_primitive_desc_t pd = NULL;
    size_t wei_extra = 0, pad_used = 0; /* Winograd's, when it is chosen */
    /* 3x3 stride-1 convolutions on Winograd: oneDNN's "auto" never picks it
     * for float32 here, yet per layer it is 1.5-3x faster than the direct
     * kernels from 32 channels (batch 1, 2 threads, one layer repeated:
     * 64 channels at 56x56 0.57 vs 1.08 ms, CSRNet's 64 at 224x224 16 vs
     * 41 ms; slower with 3 input channels).  In whole models (CPU time per
     * run, loaded machine) csrnet 214 -> 140 ms, resnet50 49.5 -> 48,
     * inception_v3 67 -> 64.  Error against the reference interpreter:
     * csrnet's output and resnet50's logits within 2e-5 absolute (zoo_fast
     * compares at rtol 1e-3, atol 1e-4).  It reads and writes 16-channel
     * blocks: a producer in another layout is converted inside the step.
     * A graph output takes it too: Winograd writes its 16-channel blocks
     * into the arena and the planner's final reorder fills the caller's
     * plain tensor, one pass over the output against a conv of >= 32 x 9
     * multiply-adds per output element (64 -> 64 at 56x56, 1 thread:
     * 1.5-1.7 ms on the direct kernel, 1.0 with the reorder; docs/runtime.md).
     * TSOPT_SKIP=winograd turns it off (A/B measurements). */
    /* not in a half-precision plan: its transformed weights cannot be stored
     * 16-bit (half.c), and held in float32 they are 3.5x the model's; there
     * it is only asked what the float32 plan would take beyond the direct
     * weights (half.c's byte budget, which may then convert the step to
     * Winograd after all: xd_conv_to_winograd) */
    size_t f32_wino = 0, f32_wino_pad = 0;
    if (!ge.bf16 && !transposed && !gt && !p->opts.plain_layout && !xplan_skips(p, "winograd") && wino_worth(xs, &W->shape, G, &ge)) {
        geom gw = ge;
        gw.alg = dnnl_convolution_winograd;
        ts_error e2 = {0};
        dnnl_memory_desc_t wsrc = src, wdst = dst;
        if (plain_out) xd_md_any(&wdst, ys); /* a graph output: reordered by the planner */
        if (make_pd(p, n, transposed, &gw, &wsrc, &wei, bias, &wdst, &f, &pd, &e2) && x_blocked) {
            xd_md_any(&wsrc, xs);
            e2 = (ts_error){0};
            if (make_pd(p, n, transposed, &gw, &wsrc, &wei, bias, &wdst, &f, &pd, &e2)) pd = NULL;
        }
        if (pd && !xd_pd_is_ref(pd)) {
            wei_extra = wino_wei_extra(pd, W);
            pad_used = wino_pad_used(pd);
        }
        if (pd && (p->half || xd_pd_is_ref(pd) || !wino_budget_ok(p, wei_extra, pad_used))) {
            if (p->half && !xd_pd_is_ref(pd) && wino_budget_ok(p, wei_extra, pad_used))
                f32_wino = wei_extra, f32_wino_pad = pad_used;
            dnnl_primitive_desc_destroy(pd);
            pd = NULL;
            wei_extra = pad_used = 0;
        }
    }
    if (pd) {
        st = TS_OK;
        plain_out = false; /* Winograd's blocks, even for a graph output */
    } else {
        st = make_pd(p, n, transposed, &ge, &src, &wei, bias, &dst, &f, &pd, err);
    }
    if (st == TS_ERR_UNSUPPORTED && !p->opts.plain_layout && x_blocked) {
        xd_md_any(&src, xs); /* the producer's layout is not usable: convert in the step */
        st = make_pd(p, n, transposed, &ge, &src, &wei, bias, &dst, &f, &pd, err);
    }
    if (ge.bf16 && (st || !xd_pd_is_amx(pd))) { /* no AMX kernel for it: float32 */
        if (pd) dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        *err = (ts_error){0};
        ge.bf16 = false;
        free(wfold), wfold = NULL;
        goto again;
    }
    if (st) return free(wfold), st; /* with post-ops: the affine folds alone are offered next */
    /* oneDNN quietly answers a layout combination it has no fast kernel for
     * with a slower one: its reference implementation (10-100x slower) for a
     * grouped conv reading NHWC into a free dst or a deconvolution from a
     * blocked src into a plain dst; jit:avx2 (half speed) for a 1x1 conv
     * pinned to the 8-channel blocks a grouped conv left.  Two more
     * candidates are tried and the one with the best kernel kept (ties: the
     * earlier, which converts less): dst in the producer's layout (keeps a
     * channels-last network channels-last through its grouped convs), then
     * every activation layout free (the input is reordered inside the step;
     * a graph output goes through the planner's final reorder into the
     * caller's tensor). */
    if (!p->opts.plain_layout && !is_wino(pd)) {
        int best = xd_pd_rank(pd);
        dnnl_memory_desc_t csrc, cdst;
        bool pinned = x_blocked;
        for (int cand = pinned && !plain_out ? 0 : 1; cand < 2 && best < 3; cand++) {
            if (cand == 1 && !pinned && !plain_out) break; /* the first pd already had both free */
            if (cand == 0) {
                csrc = xmd;
                if (!xd_md_same_layout(&xmd, xs, ys, &cdst)) continue;
            } else {
                xd_md_any(&csrc, xs);
                xd_md_any(&cdst, ys);
            }
            dnnl_primitive_desc_t pd2 = NULL;
            ts_error e2 = {0};
            if (!make_pd(p, n, transposed, &ge, &csrc, &wei, bias, &cdst, &f, &pd2, &e2) && xd_pd_rank(pd2) > best) {
                dnnl_primitive_desc_destroy(pd);
                pd = pd2;
                best = xd_pd_rank(pd);
                plain_out = false;
            } else if (pd2) {
                dnnl_primitive_desc_destroy(pd2);
            }
        }
    }
    /* A depthwise network whose every step reads oneDNN's blocked layouts
     * (xplan_net_in_blocks: MobileNetV2, MNASNet) runs in 16-channel blocks: its
     * stem, reading the plain input, writes them, and each conv after it
     * keeps its producer's layout.  oneDNN's "any" picks channels-last
     * (brgconv_1x1, brdgmm_dw) on AVX-512, whose kernels were 10-35%
     * slower than the blocked jit_1x1/jit_dw on the few-channel layers at
     * 112x112 and 56x56 (32 -> 16 1x1 at 112x112: 0.097 vs 0.148 ms, one
     * layer alone, 1 thread; a 1x1 from 28x28 down was 0-7% faster
     * channels-last).  Only where oneDNN has an AVX-512 kernel for the
     * blocks (rank 3): elsewhere its 16-channel kernels are AVX2 ones and
     * nothing changes.  Loaded Intel Xeon, in-process A/B of the plan's
     * steps: mobilenet_v2 0.92-0.99, mnasnet1_0 0.98-1.03.
     * TSOPT_SKIP=conv.stem_blocks turns it off (A/B measurements). */
    if (!plain_out && !p->opts.plain_layout && !p->half && !transposed && !gt && !x_blocked && !is_wino(pd) &&
        ys->rank == 4 && !xplan_skips(p, "conv.stem_blocks") && xplan_net_in_blocks(p)) {
        dnnl_memory_desc_t bd, sany;
        dnnl_dims_t d = {ys->dims[0], ys->dims[1], ys->dims[2], ys->dims[3]};
        dnnl_memory_desc_init_by_tag(&bd, 4, d, dnnl_f32, dnnl_aBcd16b);
        xd_md_any(&sany, xs);
        dnnl_primitive_desc_t pd2 = NULL;
        ts_error e2 = {0};
        if (!make_pd(p, n, transposed, &ge, &sany, &wei, bias, &bd, &f, &pd2, &e2) && xd_pd_rank(pd2) >= 3 &&
            xd_pd_rank(pd2) >= xd_pd_rank(pd)) {
            dnnl_primitive_desc_destroy(pd);
            pd = pd2;
        } else if (pd2) {
            dnnl_primitive_desc_destroy(pd2);
        }
    }
    /* A result that only channel Concats read (SqueezeNet's expand convs,
     * inception branches) is written in the channel blocks dense_concat
     * takes as views of the Concat's result: the copy into the Concat is
     * gone.  The candidate reads the producer's layout (a 16-channel
     * channels-last input is those blocks already) and is kept unless
     * oneDNN's kernel for it is of a lower rank.  squeezenet1_1's first two
     * fire modules wrote channels-last (brgconv) and their Concats copied
     * 1.5 MB each.  TSOPT_SKIP=conv.concat_blocks turns it off. */
    int cblock = !plain_out && !p->opts.plain_layout && !p->half && !is_wino(pd) && ys->rank == 4 && x_blocked &&
                         !xplan_skips(p, "conv.concat_blocks")
                     ? xdc_slice_block(p, f.out_value)
                     : 0;
    /* oneDNN's float32 kernels for 8-channel blocks are its AVX2 ones (rank
     * 2): against an AVX-512 kernel (rank 3) that candidate is never kept,
     * and asking costs peak RSS: the pd's creation runs the init code of
     * each jit kernel it considers, ~1 MiB of libdnnl's text mapped once
     * per process (shufflenet_v2_x1_0, 232-channel branches: libdnnl
     * resident 6840 vs 5752 KiB, bench peak RSS 28608 vs 27528 KiB with
     * the same plan; issue 27, the 2-core Intel Xeon VM of 12-07, loaded). */
    if (cblock == 8 && xd_pd_rank(pd) >= 3) cblock = 0;
    if (cblock) {
        dnnl_memory_desc_t bd, sd = xmd;
        dnnl_dims_t d = {ys->dims[0], ys->dims[1], ys->dims[2], ys->dims[3]};
        dnnl_memory_desc_init_by_tag(&bd, 4, d, dnnl_f32, cblock == 16 ? dnnl_aBcd16b : dnnl_aBcd8b);
        if (xs->rank == 4 && xs->dims[1] == cblock) {
            dnnl_dims_t dx = {xs->dims[0], xs->dims[1], xs->dims[2], xs->dims[3]};
            dnnl_memory_desc_init_by_tag(&sd, 4, dx, dnnl_f32, cblock == 16 ? dnnl_aBcd16b : dnnl_aBcd8b);
            if (!xd_md_same_bytes(&xmd, &sd)) sd = xmd;
        }
        /* asked only where oneDNN has a jit kernel for it: a channels-last
         * src into blocks gets the reference kernel (rank 0, never kept)
         * and asking maps the init code of every kernel oneDNN tries.
         * nasnet_a's 13 pointwise convs of 176 channels and deeplabv3's 4
         * ASPP convs asked for one: peak RSS +1.0 / +0.6 MiB with the plan
         * the same (libdnnl's resident text; issue 27, loaded Intel Xeon) */
        dnnl_primitive_desc_t pd2 = NULL;
        ts_error e2 = {0};
        if (xd_conv_blocks_candidate(&sd, xs, cblock) &&
            !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), &bd) &&
            !make_pd(p, n, transposed, &ge, &sd, &wei, bias, &bd, &f, &pd2, &e2) && xd_pd_rank(pd2) >= xd_pd_rank(pd)) {
            dnnl_primitive_desc_destroy(pd);
            pd = pd2;
        } else if (pd2) {
            dnnl_primitive_desc_destroy(pd2);
        }
    }
    /* the tail runs over the whole buffer: a blocked layout's zero padding
     * must stay zero, else oneDNN applies the activations itself */
    if (ntail) {
        const dnnl_memory_desc_t *odst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        if (dnnl_memory_desc_get_size(odst) != sizeof(float) * (size_t)ts_shape_numel(ys) &&
            !xv_post_keeps_zero(tail, ntail)) {
            dnnl_primitive_desc_destroy(pd);
            pd = NULL;
            memcpy(f.po + f.npo, tail, sizeof(xd_po) * (size_t)ntail);
            f.npo += ntail;
            ntail = 0;
            goto again;
        }
    }
    dnnl_primitive_desc_t x3pd[2] = {NULL, NULL};
    if (ge.bf16 && x3_pds(p, n, &ge, &f, &pd, x3pd, has_bias ? bias : NULL)) {
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        ge.bf16 = false;
        free(wfold), wfold = NULL;
        goto again;
    }
    s->ref_impl = xd_pd_is_ref(pd);

    int xb = xplan_value_buf(p, xv);
    if (xb < 0) {
        free(wfold);
        for (int i = 0; i < 2; i++)
            if (x3pd[i]) dnnl_primitive_desc_destroy(x3pd[i]);
        dnnl_primitive_desc_destroy(pd);
        return ts_error_set(err, TS_ERR_NOMEM, "node '%s' (%s): out of memory for a buffer", nd->name, nd->op->name);
    }
    conv_state *c = calloc(1, sizeof *c);
    float *wplain = wfold;
    void *wpacked = NULL;
    if (!c) goto nomem;
    s->state = c;
    c->stream = p->stream;
    c->x3 = ge.bf16;
    for (int i = 0; i < 2; i++)
        if (x3pd[i]) {
            st = xd_check(dnnl_primitive_create(&c->x3prim[i], x3pd[i]), p, n, "primitive_create", err);
            if (!st) {
                const xd_weighted w3 = {&c->x3s[i], &c->x3w[i], &c->x3d[i], &c->x3p[i], &c->x3b[i]};
                st = xd_weighted_init(&w3, dnnl_primitive_desc_query_md(x3pd[i], dnnl_query_src_md, 0),
                                      dnnl_primitive_desc_query_md(x3pd[i], dnnl_query_weights_md, 0),
                                      dnnl_primitive_desc_query_md(x3pd[i], dnnl_query_dst_md, 0),
                                      dnnl_primitive_desc_query_md(x3pd[i], dnnl_query_scratchpad_md, 0), NULL, p, n,
                                      c->x3args[i], &c->x3nargs[i], err);
            }
            if (st) goto fail;
        }
    if (ntail) {
        memcpy(c->tail, tail, sizeof(xd_po) * (size_t)ntail);
        c->ntail = ntail;
        c->tail_threads = xv_threads(p);
    }
    if (is_wino(pd)) c->wino_wei_extra = wei_extra, c->wino_pad_used = pad_used;
    c->f32_wino_extra = f32_wino;
    c->f32_wino_pad = f32_wino_pad;
    c->f32_direct_bytes = W->nbytes;
    const dnnl_memory_desc_t *csrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *cwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *cdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *cpad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    c->tail_n = (int64_t)(dnnl_memory_desc_get_size(cdst) / sizeof(float));
    if (f.half_sum) { /* the residual is read element by element beside dst: dst's layout, or no fusion */
        int hb = xplan_value_buf(p, f.sum_value);
        dnnl_memory_desc_t rmd;
        if (hb >= 0) xd_md_of(&p->bufs[hb], &rmd);
        if (hb < 0 || !dnnl_memory_desc_equal(&rmd, cdst)) {
            st = TS_ERR_UNSUPPORTED; /* the stage offers the conv without the Add next */
            goto fail;
        }
    }
    if ((st = xd_check(dnnl_primitive_create(&c->prim, pd), p, n, "primitive_create", err))) goto fail;

    /* weights: fold, reorder once, keep as a plan constant */
    dnnl_memory_desc_t wsrc;
    weights_md(&wsrc, &W->shape, G, transposed, false);
    /* no scale to fold: packed straight from the graph's tensor (no third copy) */
    if (f.scale && !wplain && !(wplain = folded_weights(W, G, transposed, f.scale))) goto nomem;
    dnnl_memory_desc_t cwk, wall;
    if (!transposed && !gt && G == 1 && !is_wino(pd))
        prepare_chunks(p, n, c, &ge, &f, csrc, cdst, has_bias ? bias : NULL, &cwk);
    if (c->cprim) { /* chunk after chunk, each from its output channels' plain rows */
        dnnl_memory_desc_t wsk;
        dnnl_memory_desc_init_by_tag(&wsk, 4, (dnnl_dims_t){c->coc, wsrc.dims[1], wsrc.dims[2], wsrc.dims[3]},
                                     dnnl_f32, dnnl_oihw);
        dnnl_memory_desc_init_by_tag(&wall, 1, (dnnl_dims_t){(int64_t)c->celems * c->nchunks}, dnnl_f32, dnnl_a);
        if (!(wpacked = xd_alloc(c->celems * (size_t)c->nchunks * sizeof(float)))) goto nomem;
        for (int j = 0; j < c->nchunks; j++)
            if ((st = reorder_now(p, n, &wsk, (float *)(wplain ? wplain : W->data) + (size_t)j * c->celems, &cwk,
                                  (float *)wpacked + (size_t)j * c->celems, err)))
                goto fail;
    } else if (c->x3) { /* float16 (exact) in the bfloat16 primitives' layout, no float32 copy */
        dnnl_memory_desc_t cw16 = *cwei;
        cw16.data_type = dnnl_f16;
        wall = *cwei;
        c->nw = dnnl_memory_desc_get_size(&cw16) / sizeof(uint16_t);
        if (!(wpacked = xd_alloc(c->nw * sizeof(uint16_t)))) goto nomem;
        if ((st = reorder_now(p, n, &wsrc, wplain ? wplain : W->data, &cw16, wpacked, err))) goto fail;
    } else {
        wall = *cwei;
        if (!(wpacked = xd_alloc(dnnl_memory_desc_get_size(cwei)))) goto nomem;
        if ((st = reorder_now(p, n, &wsrc, wplain ? wplain : W->data, cwei, wpacked, err))) goto fail;
    }
    if (gt && (st = gate_runs(p, n, W, &wsrc, cwei, c, err))) goto fail;
    free(wplain);
    wplain = NULL;
#ifdef __GLIBC__
    /* the float32 weights (widened, folded) sat in malloc's heap: half.c
     * trims after the weights it stores 16-bit, this one stores itself
     * (ResNet-50 float16 b1: 10 MiB more resident without) */
    if (c->x3) malloc_trim(0);
#endif
    int wb = xd_const_buf(p, &wall, &W->shape, wpacked);
    if (wb < 0) goto nomem;
    wpacked = NULL; /* owned by the buffer now */
    if (c->x3) p->bufs[wb].dtype = TS_F16; /* split by the step itself: half.c leaves it */
    int bb = -1;
    if (has_bias) {
        float *b = xd_alloc(sizeof(float) * (size_t)F);
        if (!b) goto nomem;
        for (int64_t o = 0; o < F; o++) {
            float v = B ? ((const float *)B->data)[o] : 0.0f;
            b[o] = f.scale ? v * f.scale[o] + f.shift[o] : v;
        }
        ts_shape bs = {.rank = 1, .dims = {F}};
        if ((bb = xd_const_buf(p, bias, &bs, b)) < 0) {
            free(b);
            goto nomem;
        }
    }

    /* output: the chosen layout, bound to the last absorbed node's value */
    dnnl_memory_desc_t pl;
    xd_md_plain(&pl, ys);
    bool blocked_out = !plain_out && !dnnl_memory_desc_equal(cdst, &pl);
    /* a residual that dies at the fused Add and is laid out as dst is
     * accumulated onto where it lies (dnnl_residual.h): no copy into dst */
    int rb = f.sum_value >= 0 ? xplan_value_buf(p, f.sum_value) : -1, yb = -1;
    if (rb >= 0 && !f.half_sum) {
        dnnl_memory_desc_t rmd;
        xd_md_of(&p->bufs[rb], &rmd);
        if (dnnl_memory_desc_equal(&rmd, cdst)) yb = xd_residual_dst(p, &f, rb, &xb, 1);
    }
    bool res_inplace = yb >= 0;
    /* a blocked graph output lives in the arena: the caller's tensor is plain */
    if (!res_inplace)
        yb = blocked_out && ts_graph_is_output(g, f.out_value) ? xplan_new_buf(p, f.out_value, TS_F32, ys)
                                                            : xplan_value_buf(p, f.out_value);
    if (yb < 0) goto nomem;
    if (blocked_out && !res_inplace) {
        xplan_bind_value(p, f.out_value, yb);
        p->bufs[yb].blocked = true;
        p->bufs[yb].md = *cdst;
        p->bufs[yb].bytes = dnnl_memory_desc_get_size(cdst);
    }
    xd_md_of(&p->bufs[xb], &xmd);
    size_t padsz = xd_round(dnnl_memory_desc_get_size(cpad));
    if (is_wino(pd) && wino_pad_own(pd)) {
        c->own_pad = mmap(NULL, padsz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (c->own_pad == MAP_FAILED) {
            c->own_pad = NULL;
            goto nomem;
        }
        c->own_pad_bytes = padsz;
        padsz = 0;
    }
    dnnl_memory_desc_t cs32 = *csrc; /* x3: the input in the primitives' layout, float32 */
    cs32.data_type = dnnl_f32;
    const dnnl_memory_desc_t *rin = c->x3 ? &cs32 : csrc;
    for (int i = 0; i < 2; i++)
        if (c->x3prim[i]) {
            size_t ps = xd_round(dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(x3pd[i], dnnl_query_scratchpad_md, 0)));
            if (ps > padsz) padsz = ps;
        }
    s->scratch_bytes = padsz;
    if (!xd_md_same_bytes(&xmd, rin)) {
        if ((st = xd_reorder_init(&c->in_r, &xmd, rin, p, n, err))) goto fail;
        c->reorder_in = true;
        c->in_off = padsz;
        s->scratch_bytes += xd_round(dnnl_memory_desc_get_size(rin));
    }
    if (c->x3) {
        c->nx = dnnl_memory_desc_get_size(&cs32) / sizeof(float);
        c->xh_off = s->scratch_bytes;
        c->xl_off = c->xh_off + xd_round(c->nx * sizeof(uint16_t));
        c->wh_off = c->xl_off + xd_round(c->nx * sizeof(uint16_t));
        c->wl_off = c->wh_off + xd_round(c->nw * sizeof(uint16_t));
        s->scratch_bytes = c->wl_off + xd_round(c->nw * sizeof(uint16_t));
    }
    int gb = -1;
    if (gt) {
        if ((gb = xplan_plain(p, xplan_value_buf(p, gt->gate), err)) < 0) goto fail;
        c->gated = true;
        c->gate_off = s->scratch_bytes;
        s->scratch_bytes += xd_round(dnnl_memory_desc_get_size(cwei));
    }
    if (res_inplace) rb = -1; /* read through dst */
    if (rb >= 0 && f.half_sum) {
        c->hsum = p->half;
        c->hsum_relu = f.half_relu;
    } else if (rb >= 0) {
        dnnl_memory_desc_t rmd;
        xd_md_of(&p->bufs[rb], &rmd);
        if ((st = xd_reorder_init(&c->res_r, &rmd, cdst, p, n, err))) goto fail;
        c->has_sum = true;
    }

    int nin = 2 + (bb >= 0) + (rb >= 0) + (gb >= 0), k = 0;
    if ((st = xstep_alloc(s, nin, 1, err))) goto fail;
    s->in[k++] = xb;
    s->in[k++] = wb;
    if (bb >= 0) s->in[k++] = bb;
    if (rb >= 0) c->res_in = k, s->in[k++] = rb;
    if (gb >= 0) c->gate_in = k, s->in[k++] = gb;
    s->out[0] = yb;
    c->has_bias = bb >= 0;

    const xd_weighted w = {&c->src, &c->wei, &c->dst, &c->pad, &c->bias};
    if ((st = xd_weighted_init(&w, csrc, cwei, cdst, cpad, c->has_bias ? bias : NULL, p, n, c->args, &c->nargs,
                               err)))
        goto fail;
    if (c->cprim) { /* the chunks' scratch after the step's own (its input reorder) */
        c->cpoff = xd_round(s->scratch_bytes);
        c->coff += c->cpoff;
        c->doff = c->coff + xd_round(c->celems * sizeof(float));
        s->scratch_bytes = c->doff + xd_round((size_t)(c->cimg * c->coc * c->cpix) * sizeof(float));
    }
    for (int i = 0; i < 2; i++)
        if (x3pd[i]) dnnl_primitive_desc_destroy(x3pd[i]);
    dnnl_primitive_desc_destroy(pd);
    return TS_OK;

nomem:
    st = ts_error_set(err, TS_ERR_NOMEM, "node '%s' (%s): out of memory building the oneDNN kernel", nd->name,
                      nd->op->name);
fail:
    free(wplain);
    free(wpacked);
    for (int i = 0; i < 2; i++)
        if (x3pd[i]) dnnl_primitive_desc_destroy(x3pd[i]);
    dnnl_primitive_desc_destroy(pd);
    conv_destroy(c);
    s->state = NULL;
    return st;
}

size_t xd_conv_half_chunks(xstep *s, int slot, ts_dtype half)
{
    conv_state *c = s->k == &xk_dnnl_conv ? s->state : NULL;
    if (!c || !c->cprim || slot != 1) return 0;
    c->chalf = half;
    return s->scratch_bytes;
}

bool xd_conv_rounds_sum(const xstep *s)
{
    s = xhalf_inner(s);
    return s->k == &xk_dnnl_conv && s->state && ((const conv_state *)s->state)->hsum;
}

bool xd_conv_chunks_weight(const xstep *s, int slot)
{
    const conv_state *c = s->k == &xk_dnnl_conv ? s->state : NULL;
    return c && c->cprim && slot == 1;
}

static ts_status conv_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const ts_shape *w = &g->values[nd->inputs[1]].shape;
    double per_out = 1; /* multiply-adds per output element: (C / group) * kernel */
    for (int i = 1; i < w->rank; i++) per_out *= (double)w->dims[i];
    double out_n = (double)ts_shape_numel(&g->values[nd->outputs[0]].shape);
    double moved = 4.0 * ((double)ts_shape_numel(&g->values[nd->inputs[0]].shape) + out_n + (double)ts_shape_numel(w));
    bool serial = xd_serial(p, 2 * per_out * out_n, moved);
    int threads = xd_serial_enter(serial);
    ts_status st = build(p, n, s, false, NULL, err);
    xd_serial_leave(serial, threads);
    if (!st) ((conv_state *)s->state)->serial = serial;
    return st;
}
static ts_status deconv_build(xplan *p, int n, xstep *s, ts_error *err) { return build(p, n, s, true, NULL, err); }

const xkernel xk_dnnl_conv = {"dnnl.conv", conv_build, conv_run, conv_destroy};

bool xd_conv_is_winograd(const xstep *s, size_t *extra)
{
    const conv_state *c = s->k == &xk_dnnl_conv ? s->state : NULL;
    if (!c || !c->prim) return false;
    const_dnnl_primitive_desc_t pd = NULL;
    if (dnnl_primitive_get_primitive_desc(c->prim, &pd) != dnnl_success || !is_wino(pd)) return false;
    if (extra) *extra = c->wino_wei_extra + c->wino_pad_used;
    return true;
}
size_t xd_conv_f32_wino_extra(const xstep *s)
{
    const conv_state *c = s->k == &xk_dnnl_conv ? s->state : NULL;
    return c ? c->f32_wino_extra : 0;
}
/* Half plans (half.c's byte budget): a direct convolution whose float32
 * plan takes Winograd, made a Winograd one after the plan is built (the
 * budget is known only then).  Only a plain case: no gate, no tail of
 * tsopt's, no input reorder, not serial, no residual sum, a Winograd
 * scratchpad that fits the shared scratch (no mapping of its own); a conv
 * run in output-channel chunks has its chunks' weights reordered back to
 * the plain layout chunk by chunk and runs whole (ResNet-50's 256-channel
 * layers; TSOPT_SKIP=half.wino_chunks leaves them direct).  The neighbours' steps were built for the direct
 * kernel's layouts (channels-last, brgconv, in ResNet-50's half plan):
 * the input and the result are converted inside the step, through its
 * scratch. */
static bool wino_convertible(const xplan *p, const conv_state *c, const xstep *s)
{
    return c && c->f32_wino_extra && c->prim && (!c->cprim || !xplan_skips(p, "half.wino_chunks")) && !c->gated &&
           !c->ntail && !c->reorder_in && !c->serial && !c->has_sum && !c->hsum && s->nin >= 2;
}

size_t xd_conv_half_wino_cost(const xplan *p, const xstep *s, size_t *scratch)
{
    const conv_state *c = s->k == &xk_dnnl_conv ? s->state : NULL;
    *scratch = 0;
    if (!wino_convertible(p, c, s)) return 0;
    /* weights, then the scratchpad and (at most) both activations converted
     * in scratch when Winograd's layouts are not the neighbours' */
    size_t wino = c->f32_direct_bytes + c->f32_wino_extra, now = p->bufs[s->in[1]].bytes,
           acts = p->bufs[s->in[0]].bytes + p->bufs[s->out[0]].bytes;
    *scratch = c->f32_wino_pad + acts;
    return wino > now ? wino - now : 1;
}

ts_status xd_conv_to_winograd(xplan *p, xstep *s, ts_error *err)
{
    conv_state *c = s->k == &xk_dnnl_conv ? s->state : NULL;
    xbuf *wb = wino_convertible(p, c, s) ? &p->bufs[s->in[1]] : NULL;
    if (!wb || wb->half) return TS_ERR_UNSUPPORTED;
    const_dnnl_primitive_desc_t opd = NULL;
    const dnnl_convolution_desc_t *od = NULL;
    const_dnnl_primitive_attr_t attr = NULL;
    if (dnnl_primitive_get_primitive_desc(c->prim, &opd) != dnnl_success ||
        dnnl_primitive_desc_query(opd, dnnl_query_convolution_d, 0, &od) != dnnl_success ||
        dnnl_primitive_desc_get_attr(opd, &attr) != dnnl_success)
        return TS_ERR_UNSUPPORTED;
    /* copies: opd goes with the old primitive */
    const dnnl_memory_desc_t osrc_ = *dnnl_primitive_desc_query_md(opd, dnnl_query_src_md, 0),
                             odst_ = *dnnl_primitive_desc_query_md(opd, dnnl_query_dst_md, 0),
                             owei_ = *dnnl_primitive_desc_query_md(opd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *osrc = &osrc_, *odst = &odst_, *owei = &owei_;
    /* a weight convolved in output-channel chunks lies chunk after chunk in
     * the chunk primitive's layout (prepare_chunks) */
    const dnnl_memory_desc_t *cwk = NULL;
    const_dnnl_primitive_desc_t cpd = NULL;
    if (c->cprim) {
        if (owei->ndims != 4 || dnnl_primitive_get_primitive_desc(c->cprim, &cpd) != dnnl_success ||
            (size_t)c->nchunks * c->celems * sizeof(float) != wb->bytes)
            return TS_ERR_UNSUPPORTED;
        cwk = dnnl_primitive_desc_query_md(cpd, dnnl_query_weights_md, 0);
    } else if (dnnl_memory_desc_get_size(owei) != wb->bytes) {
        return TS_ERR_UNSUPPORTED;
    }
    dnnl_convolution_desc_t d = *od;
    d.alg_kind = dnnl_convolution_winograd;
    dnnl_memory_desc_init_by_tag(&d.src_desc, osrc->ndims, osrc->dims, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&d.dst_desc, odst->ndims, odst->dims, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&d.weights_desc, od->weights_desc.ndims, od->weights_desc.dims, dnnl_f32,
                                 dnnl_format_tag_any);
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    void *w = NULL;
    ts_status st = TS_ERR_UNSUPPORTED;
    if (dnnl_primitive_desc_create(&pd, &d, attr, p->engine, NULL) != dnnl_success) return st;
    const dnnl_memory_desc_t *csrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0),
                             *cdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0),
                             *cwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                             *cpad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    dnnl_memory_desc_t bmd = {0};
    if (c->has_bias) bmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
    if (xd_pd_is_ref(pd) || !is_wino(pd) || wino_pad_own(pd)) goto out;
    size_t wbytes = dnnl_memory_desc_get_size(cwei);
    if (!(w = xd_alloc(wbytes))) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* through the plain layout: oneDNN reorders into Winograd's only from it */
    dnnl_memory_desc_t plain;
    dnnl_memory_desc_init_by_tag(&plain, owei->ndims, owei->dims, dnnl_f32, dnnl_oihw);
    float *wp = xd_alloc(dnnl_memory_desc_get_size(&plain));
    if (!wp) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (cwk) { /* chunk j: output channels [j coc, (j + 1) coc), their plain rows */
        dnnl_memory_desc_t pc;
        dnnl_dims_t cd = {c->coc, owei->dims[1], owei->dims[2], owei->dims[3]};
        dnnl_memory_desc_init_by_tag(&pc, 4, cd, dnnl_f32, dnnl_oihw);
        const size_t per = (size_t)(c->coc * owei->dims[1] * owei->dims[2] * owei->dims[3]);
        st = TS_OK;
        for (int j = 0; j < c->nchunks && !st; j++)
            st = reorder_now(p, s->node, cwk, (float *)wb->data + (size_t)j * c->celems, &pc, wp + (size_t)j * per, err);
    } else {
        st = reorder_now(p, s->node, owei, wb->data, &plain, wp, err);
    }
    if (!st) st = reorder_now(p, s->node, &plain, wp, cwei, w, err);
    free(wp);
    if (st) goto out;
    /* the neighbours' layouts: converted in the step, in its scratch */
    xd_reorder ri = {0}, ro = {0};
    bool rin = !xd_md_same_bytes(osrc, csrc), rout = !xd_md_same_bytes(cdst, odst);
    if ((rin && (st = xd_reorder_init(&ri, osrc, csrc, p, s->node, err))) ||
        (rout && (st = xd_reorder_init(&ro, cdst, odst, p, s->node, err))) ||
        (st = xd_check(dnnl_primitive_create(&prim, pd), p, s->node, "primitive_create", err))) {
        xd_reorder_fini(&ri);
        xd_reorder_fini(&ro);
        goto out;
    }
    xd_mem_fini(&c->src);
    xd_mem_fini(&c->wei);
    xd_mem_fini(&c->bias);
    xd_mem_fini(&c->dst);
    xd_mem_fini(&c->pad);
    c->nargs = 0; /* the argument list written anew */
    const xd_weighted mw = {&c->src, &c->wei, &c->dst, &c->pad, &c->bias};
    if ((st = xd_weighted_init(&mw, csrc, cwei, cdst, cpad, c->has_bias ? &bmd : NULL, p, s->node, c->args, &c->nargs,
                               err))) {
        dnnl_primitive_destroy(prim); /* the step is unusable now: the plan fails (out of memory only) */
        xd_reorder_fini(&ri);
        xd_reorder_fini(&ro);
        goto out;
    }
    dnnl_primitive_destroy(c->prim);
    c->prim = prim;
    if (c->cprim) { /* the whole Winograd primitive runs it now */
        dnnl_primitive_destroy(c->cprim);
        c->cprim = NULL;
        xd_mem_fini(&c->cs);
        xd_mem_fini(&c->cw);
        xd_mem_fini(&c->cb);
        xd_mem_fini(&c->cd);
        xd_mem_fini(&c->cpad);
        c->nchunks = 0;
        c->chalf = TS_UNDEFINED;
    }
    free(wb->data);
    wb->data = w;
    wb->bytes = wbytes;
    wb->md = *cwei;
    w = NULL;
    c->wino_wei_extra = c->f32_wino_extra;
    c->wino_pad_used = c->f32_wino_pad;
    c->f32_wino_extra = c->f32_wino_pad = 0;
    size_t off = xd_round(dnnl_memory_desc_get_size(cpad));
    if (rin) {
        c->in_r = ri;
        c->reorder_in = true;
        c->in_off = off;
        off += xd_round(dnnl_memory_desc_get_size(csrc));
    }
    if (rout) {
        c->out_r = ro;
        c->reorder_out = true;
        c->out_off = off;
        off += xd_round(dnnl_memory_desc_get_size(cdst));
    }
    s->scratch_bytes = off;
    st = TS_OK;
out:
    free(w);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

const xkernel xk_dnnl_deconv = {"dnnl.deconv", deconv_build, conv_run, conv_destroy};

extern const xkernel xk_dnnl_conv_gated;

int xd_conv_post_tail(const xstep *s)
{
    const conv_state *c =
        s->k == &xk_dnnl_conv || s->k == &xk_dnnl_deconv || s->k == &xk_dnnl_conv_gated ? s->state : NULL;
    return c ? c->ntail : 0;
}

/* ------------------------------------------- squeeze-excite gate folded */

/* Where each input channel's weights lie in the packed format: a plain
 * tensor holding i + 1 at every (o, i, taps) goes through the same reorder
 * as the weights (padding comes out 0), and equal neighbours make a run.
 * No decoding of oneDNN's blocked layouts: the reorder knows them. */
static ts_status gate_runs(const xplan *p, int n, const ts_tensor *W, const dnnl_memory_desc_t *wsrc,
                           const dnnl_memory_desc_t *cwei, conv_state *c, ts_error *err)
{
    const int64_t F = W->shape.dims[0], C = W->shape.dims[1], K = ts_tensor_numel(W) / (F * C);
    const int64_t S = (int64_t)(dnnl_memory_desc_get_size(cwei) / sizeof(float));
    float *idx = xd_alloc(W->nbytes), *pk = xd_alloc((size_t)S * sizeof(float));
    ts_status st = TS_OK;
    if (!idx || !pk) goto nomem;
    for (int64_t o = 0; o < F; o++)
        for (int64_t i = 0; i < C; i++)
            for (int64_t k = 0; k < K; k++) idx[(o * C + i) * K + k] = (float)(i + 1);
    if ((st = reorder_now(p, n, wsrc, idx, cwei, pk, err))) goto done;
    int nr = 0;
    for (int64_t q = 0; q < S; q++) nr += q == 0 || pk[q] != pk[q - 1];
    c->run_off = malloc(sizeof *c->run_off * (size_t)nr);
    c->run_len = malloc(sizeof *c->run_len * (size_t)nr);
    c->run_cin = malloc(sizeof *c->run_cin * (size_t)nr);
    if (!c->run_off || !c->run_len || !c->run_cin) goto nomem;
    int r = -1;
    for (int64_t q = 0; q < S; q++) {
        if (q == 0 || pk[q] != pk[q - 1]) {
            r++;
            c->run_off[r] = q;
            c->run_len[r] = 0;
            c->run_cin[r] = (int32_t)pk[q] - 1;
        }
        c->run_len[r]++;
    }
    c->nruns = nr;
    goto done;
nomem:
    st = ts_error_set(err, TS_ERR_NOMEM, "node '%s' (Conv): out of memory mapping gated weights", xplan_node(p, n)->name);
done:
    free(idx);
    free(pk);
    return st;
}

/* Mul(W, gate) -> Conv (ts_fold_gate's form, opt/fold_gate.c) as one
 * step, the group the lowering stage formed (lower_post.c: gate_conv the
 * Conv, gate_w and gate_g the Mul's operands): the weights packed once,
 * each run a copy of the packed weights scaled by the gate, then the
 * convolution (a scaling in another layout is the same products). */
static ts_status gated_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_graph *g = p->g;
    const gated_in gt = {p->group->gate_w, p->group->gate_g};
    int c = p->group->gate_conv;
    const ts_node *cn = xplan_node(p, c);
    const ts_tensor *W = xplan_const(p, gt.w);
    double flops = 2.0 * (double)ts_tensor_numel(W) / (double)W->shape.dims[0] *
                   (double)ts_shape_numel(&g->values[cn->outputs[0]].shape);
    double moved = 4.0 * ((double)ts_shape_numel(&g->values[cn->inputs[0]].shape) +
                          (double)ts_shape_numel(&g->values[cn->outputs[0]].shape) + (double)ts_tensor_numel(W));
    bool serial = xd_serial(p, flops, moved);
    int threads = xd_serial_enter(serial);
    ts_status st = build(p, c, s, false, &gt, err);
    xd_serial_leave(serial, threads);
    if (st) return st;
    ((conv_state *)s->state)->serial = serial;
    ((conv_state *)s->state)->gate_round = xhalf_node_round(p, n);
    return TS_OK;
}

const xkernel xk_dnnl_conv_gated = {"dnnl.conv_gated", gated_build, conv_run, conv_destroy};

bool xd_conv_serial(const xstep *s)
{
    const conv_state *c = s->k == &xk_dnnl_conv || s->k == &xk_dnnl_conv_gated ? s->state : NULL;
    return c && c->serial;
}

bool xd_conv_is_amx(const xstep *s)
{
    s = xhalf_inner(s);
    const conv_state *c = s->k == &xk_dnnl_conv ? s->state : NULL;
    return c && c->x3;
}
