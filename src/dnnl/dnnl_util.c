/* Shared plumbing of the oneDNN kernels; see dnnl_util.h. */
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include "dnnl/dnnl_util.h"
#include "vec/vec.h"

ts_status xd_check(dnnl_status_t st, const xplan *p, int n, const char *what, ts_error *err)
{
    if (st == dnnl_success) return TS_OK;
    const ts_node *nd = &p->g->nodes[n];
    /* unimplemented / unsupported configurations decline quietly: the next
     * candidate kernel (at worst the reference) takes the node */
    ts_status code = st == dnnl_unimplemented || st == dnnl_invalid_arguments ? TS_ERR_UNSUPPORTED
                     : st == dnnl_out_of_memory                               ? TS_ERR_NOMEM
                                                                              : TS_ERR_INVALID;
    return ts_error_set(err, code, "node '%s' (%s): oneDNN %s failed (status %d)", nd->name, nd->op->name, what,
                        (int)st);
}

static void md_init(dnnl_memory_desc_t *md, const ts_shape *s, bool any)
{
    dnnl_dims_t dims;
    int rank = s->rank ? s->rank : 1;
    for (int i = 0; i < rank; i++) dims[i] = s->rank ? s->dims[i] : 1;
    if (any)
        dnnl_memory_desc_init_by_tag(md, rank, dims, dnnl_f32, dnnl_format_tag_any);
    else
        dnnl_memory_desc_init_by_strides(md, rank, dims, dnnl_f32, NULL); /* NULL: dense row-major */
}

void xd_md_plain(dnnl_memory_desc_t *md, const ts_shape *s) { md_init(md, s, false); }
void xd_md_any(dnnl_memory_desc_t *md, const ts_shape *s) { md_init(md, s, true); }

void xd_md_of(const xbuf *b, dnnl_memory_desc_t *md)
{
    if (b->blocked)
        *md = b->md;
    else
        xd_md_plain(md, &b->shape);
}

bool xd_pd_is_ref(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return false;
    return strncmp(impl, "ref", 3) == 0;
}

void *xd_alloc(size_t bytes) { return aligned_alloc(64, xd_round(bytes ? bytes : 1)); }

/* ------------------------------------------------------------- fusion */

ts_status xd_fuse_attr(const xd_fuse *f, dnnl_primitive_attr_t attr, const xplan *p, int n, ts_error *err)
{
    if (!f->npo) return TS_OK;
    dnnl_post_ops_t po;
    ts_status st = xd_check(dnnl_post_ops_create(&po), p, n, "post_ops_create", err);
    for (int i = 0; !st && i < f->npo; i++) {
        const xd_po *o = &f->po[i];
        dnnl_status_t ds = o->kind == XD_PO_SUM ? dnnl_post_ops_append_sum(po, 1.0f)
                                                : dnnl_post_ops_append_eltwise(po, 1.0f, o->alg, o->alpha, o->beta);
        st = xd_check(ds, p, n, "post-op", err);
    }
    if (!st) st = xd_check(dnnl_primitive_attr_set_post_ops(attr, po), p, n, "set_post_ops", err);
    dnnl_post_ops_destroy(po);
    return st;
}

/* ------------------------------------------------------------ memories */

ts_status xd_mem_init(xd_mem *m, const dnnl_memory_desc_t *md, const xplan *p, int n, ts_error *err)
{
    m->cur = NULL;
    return xd_check(dnnl_memory_create(&m->m, md, p->engine, DNNL_MEMORY_NONE), p, n, "memory_create", err);
}

void xd_mem_bind(xd_mem *m, void *ptr, dnnl_stream_t stream)
{
    if (m->cur == ptr) return;
    /* with the stream given, zero-padding of blocked layouts runs on it
     * instead of on a temporary stream */
    dnnl_memory_set_data_handle_v2(m->m, ptr, stream);
    m->cur = ptr;
}

void xd_mem_fini(xd_mem *m)
{
    if (m->m) dnnl_memory_destroy(m->m);
    m->m = NULL;
}

/* A dense 4-D float32 NCHW -> NHWC reorder with 3 or 4 channels (the RGB
 * image before a mobile net's first convolution, whose brgconv kernel
 * reads channels-last): oneDNN's jit:uni reorder took 0.065-0.092 ms for
 * 1x3x224x224 on one thread in efficientnet_b0, mobilenet_v3_large,
 * mnasnet1_0 and regnet_y_400mf (ONEDNN_VERBOSE), this loop 0.018 ms
 * (best of 300, loaded machine).  The same on u8/s8 (a quantized model's
 * image before its int8 stem conv): oneDNN's took 0.066 / 0.226 ms
 * (fastest of 23) for 1 / 4 x3x224x224 u8 in the ResNet-18 QDQ model, the
 * byte loop 0.006 / 0.024 ms (best of 300).  The element size in bytes (4
 * or 1), 0 when not such a reorder. */
static int rgb_to_cl(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to)
{
    dnnl_data_type_t dt = from->data_type;
    if (from->ndims != 4 || (dt != dnnl_f32 && dt != dnnl_u8 && dt != dnnl_s8) ||
        (from->dims[1] != 3 && from->dims[1] != 4))
        return 0;
    dnnl_memory_desc_t pl, cl;
    if (dnnl_memory_desc_init_by_strides(&pl, 4, from->dims, dt, NULL) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&cl, 4, from->dims, dt, dnnl_acdb) != dnnl_success)
        return 0;
    return dnnl_memory_desc_equal(from, &pl) && dnnl_memory_desc_equal(to, &cl) ? (dt == dnnl_f32 ? 4 : 1) : 0;
}

/* The 3/4-channel planar -> channels-last loop, for float32 and for bytes
 * (u8/s8: a quantized image before an int8 stem conv). */
#define RGB_TO_CL_RUN(NAME, T)                                                                                      \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static void NAME(const xd_reorder *r, const T *x,  \
                                                                                  T *y)                             \
    {                                                                                                               \
        const int64_t HW = r->cl_hw;                                                                                \
        for (int64_t n = 0; n < r->cl_n; n++) {                                                                     \
            const T *a = x + n * r->cl_c * HW, *b = a + HW, *c = b + HW, *d = c + HW;                               \
            T *o = y + n * r->cl_c * HW;                                                                            \
            if (r->cl_c == 3) {                                                                                     \
                _Pragma("omp simd") for (int64_t q = 0; q < HW; q++) o[3 * q] = a[q], o[3 * q + 1] = b[q],          \
                                                                     o[3 * q + 2] = c[q];                           \
            } else {                                                                                                \
                _Pragma("omp simd") for (int64_t q = 0; q < HW; q++) o[4 * q] = a[q], o[4 * q + 1] = b[q],          \
                                                                     o[4 * q + 2] = c[q], o[4 * q + 3] = d[q];      \
            }                                                                                                       \
        }                                                                                                           \
    }
RGB_TO_CL_RUN(rgb_to_cl_run, float)
RGB_TO_CL_RUN(rgb_to_cl_run8, uint8_t)

/* A dense 4-D float32 channels-last (acdb) -> 16-channel blocks (aBcd16b)
 * reorder, C a multiple of 16: ResNet-50's downsample branch writes
 * channels-last (brgconv_1x1) and the block's last 1x1 conv, in blocks
 * (jit_1x1), adds it as its sum post-op.  Each pixel's C floats are C/16
 * whole vectors, each copied to its block's plane: a copy of 64-byte
 * pieces, bit for bit the reorder.  oneDNN's jit:uni reorder took 0.53 ms
 * (fastest of 8 runs, loaded Intel Xeon, 2 threads) for 1x256x56x56. */
static bool cl_to_blocks16(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to)
{
    if (from->ndims != 4 || from->data_type != dnnl_f32 || from->dims[1] % 16) return false;
    dnnl_memory_desc_t cl, bl;
    if (dnnl_memory_desc_init_by_tag(&cl, 4, from->dims, dnnl_f32, dnnl_acdb) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&bl, 4, from->dims, dnnl_f32, dnnl_aBcd16b) != dnnl_success)
        return false;
    return dnnl_memory_desc_equal(from, &cl) && dnnl_memory_desc_equal(to, &bl);
}

typedef float xd_v16 __attribute__((vector_size(64), aligned(4)));

__attribute__((target_clones("avx512f", "avx2", "default"))) static void cl_to_blocks16_run(const xd_reorder *r,
                                                                                            const float *x, float *y)
{
    const int64_t cb = r->bl_cb, hw = r->bl_hw;
    for (int64_t n = 0; n < r->bl_n; n++) {
        const float *xn = x + n * hw * cb * 16;
        float *yn = y + n * hw * cb * 16;
#pragma omp parallel for schedule(static) if (r->bl_par)
        for (int64_t q = 0; q < hw; q++) {
            const xd_v16 *src = (const xd_v16 *)(xn + q * cb * 16);
            for (int64_t b = 0; b < cb; b++) *(xd_v16 *)(yn + (b * hw + q) * 16) = src[b];
        }
    }
}

ts_status xd_reorder_init(xd_reorder *r, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, const xplan *p,
                          int n, ts_error *err)
{
    memset(r, 0, sizeof *r);
    r->bytes = dnnl_memory_desc_get_size(to);
    if (dnnl_memory_desc_equal(from, to)) return TS_OK;
    if ((r->cl_size = rgb_to_cl(from, to))) {
        r->cl_n = from->dims[0];
        r->cl_c = from->dims[1];
        r->cl_hw = from->dims[2] * from->dims[3];
        return TS_OK;
    }
    if ((!p || !xplan_skips(p, "reorder.blocks16")) && cl_to_blocks16(from, to)) { /* TSOPT_SKIP: oneDNN's (A/B) */
        r->bl_n = from->dims[0];
        r->bl_cb = from->dims[1] / 16;
        r->bl_hw = from->dims[2] * from->dims[3];
        /* the rule vec's copies split by (vec.h): bytes read and written against the measured region cost */
        const int threads = p && p->opts.threads > 0 ? p->opts.threads : omp_get_max_threads();
        r->bl_par = XV_SPLITS(threads, 2 * (int64_t)r->bytes);
        return TS_OK;
    }
    dnnl_primitive_desc_t pd;
    ts_status st = xd_check(dnnl_reorder_primitive_desc_create(&pd, from, p->engine, to, p->engine, NULL), p, n,
                            "reorder", err);
    if (st) return st;
    st = xd_check(dnnl_primitive_create(&r->prim, pd), p, n, "reorder primitive", err);
    dnnl_primitive_desc_destroy(pd);
    if (!st) st = xd_mem_init(&r->src, from, p, n, err);
    if (!st) st = xd_mem_init(&r->dst, to, p, n, err);
    return st;
}

void xd_reorder_run(xd_reorder *r, const void *from, void *to, dnnl_stream_t stream)
{
    if (r->bl_cb) {
        cl_to_blocks16_run(r, from, to);
        return;
    }
    if (r->cl_c) {
        if (r->cl_size == 1)
            rgb_to_cl_run8(r, from, to);
        else
            rgb_to_cl_run(r, from, to);
        return;
    }
    if (!r->prim) {
        if (from != to) memcpy(to, from, r->bytes);
        return;
    }
    xd_mem_bind(&r->src, (void *)from, stream);
    xd_mem_bind(&r->dst, to, stream);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, r->src.m}, {DNNL_ARG_TO, r->dst.m}};
    dnnl_primitive_execute(r->prim, stream, 2, args);
}

void xd_reorder_fini(xd_reorder *r)
{
    if (r->prim) dnnl_primitive_destroy(r->prim);
    xd_mem_fini(&r->src);
    xd_mem_fini(&r->dst);
    r->prim = NULL;
}

int xd_const_buf(xplan *p, const dnnl_memory_desc_t *md, const ts_shape *shape, void *data)
{
    int b = xplan_new_buf(p, -1, TS_F32, shape);
    if (b < 0) return -1;
    xbuf *x = &p->bufs[b];
    dnnl_memory_desc_t plain;
    xd_md_plain(&plain, shape);
    x->kind = XB_CONST;
    x->data = data;
    x->owns_data = true;
    x->bytes = dnnl_memory_desc_get_size(md);
    x->blocked = !dnnl_memory_desc_equal(md, &plain);
    x->md = *md;
    return b;
}

ts_status xd_weighted_init(const xd_weighted *w, const dnnl_memory_desc_t *src_md, const dnnl_memory_desc_t *wei_md,
                           const dnnl_memory_desc_t *dst_md, const dnnl_memory_desc_t *pad_md,
                           const dnnl_memory_desc_t *bias_md, const xplan *p, int n, dnnl_exec_arg_t *args,
                           int *nargs, ts_error *err)
{
    ts_status st;
    if ((st = xd_mem_init(w->src, src_md, p, n, err)) || (st = xd_mem_init(w->wei, wei_md, p, n, err)) ||
        (st = xd_mem_init(w->dst, dst_md, p, n, err)) || (st = xd_mem_init(w->pad, pad_md, p, n, err)) ||
        (bias_md && (st = xd_mem_init(w->bias, bias_md, p, n, err))))
        return st;
    args[(*nargs)++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, w->src->m};
    args[(*nargs)++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, w->wei->m};
    args[(*nargs)++] = (dnnl_exec_arg_t){DNNL_ARG_DST, w->dst->m};
    args[(*nargs)++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, w->pad->m};
    if (bias_md) args[(*nargs)++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, w->bias->m};
    return TS_OK;
}
