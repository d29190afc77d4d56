/* Shared plumbing of the oneDNN kernels (dnnl_conv.c, dnnl_matmul.c):
 * memory descriptors from tsopt shapes, errors naming the node, the
 * post-op tail the lowering stage handed (lower_post.c) as oneDNN
 * attributes, and the run-time binding of buffer pointers to pre-built
 * dnnl_memory objects. */
#ifndef TS_DNNL_DNNL_UTIL_H
#define TS_DNNL_DNNL_UTIL_H

#include "exec/exec.h"

/* dnnl status -> tsopt error naming node n; returns TS_OK on success. */
ts_status xd_check(dnnl_status_t st, const xplan *p, int n, const char *what, ts_error *err);
/* Plain row-major md for shape s (rank 0 treated as 1 element). */
void xd_md_plain(dnnl_memory_desc_t *md, const ts_shape *s);
void xd_md_any(dnnl_memory_desc_t *md, const ts_shape *s);
/* The md a buffer's bytes are laid out in (plain unless blocked). */
void xd_md_of(const xbuf *b, dnnl_memory_desc_t *md);
/* 64-byte aligned, for packed weights (freed with free()). */
void *xd_alloc(size_t bytes);
/* Rounds up to a multiple of 64 (scratch carving). */
static inline size_t xd_round(size_t n) { return (n + 63) & ~(size_t)63; }

/* True when oneDNN chose its reference implementation ("ref:any", ...):
 * it accepts every layout but is 10-100x slower than the jit ones, so a
 * kernel retries with free layouts before settling for it. */
bool xd_pd_is_ref(const_dnnl_primitive_desc_t pd);

/* ---- fusion */

/* xd_fuse, the post-op tail the lowering stage hands a convolution or
 * product (lower_post.c), is in exec.h with the other groups. */
/* Post-ops attribute for f (NULL when there are none); caller destroys. */
ts_status xd_fuse_attr(const xd_fuse *f, dnnl_primitive_attr_t attr, const xplan *p, int n, ts_error *err);
/* The tail's scale and shift (lower_post.c; xgroup_free). */
void xd_fuse_free(xd_fuse *f);

/* ---- run-time memory binding */

/* A dnnl_memory whose handle is re-pointed only when the pointer changed. */
typedef struct xd_mem {
    dnnl_memory_t m;
    void *cur;
} xd_mem;
ts_status xd_mem_init(xd_mem *m, const dnnl_memory_desc_t *md, const xplan *p, int n, ts_error *err);
void xd_mem_bind(xd_mem *m, void *ptr, dnnl_stream_t stream);
void xd_mem_fini(xd_mem *m);

/* The memories of a primitive with weights (convolution, matmul): creates
 * them from their descriptors and writes the argument list the primitive is
 * executed with.  bias_md NULL: no bias.  args needs room for 5 entries. */
typedef struct xd_weighted {
    xd_mem *src, *wei, *dst, *pad, *bias;
} xd_weighted;
ts_status xd_weighted_init(const xd_weighted *w, const dnnl_memory_desc_t *src_md, const dnnl_memory_desc_t *wei_md,
                           const dnnl_memory_desc_t *dst_md, const dnnl_memory_desc_t *pad_md,
                           const dnnl_memory_desc_t *bias_md, const xplan *p, int n, dnnl_exec_arg_t *args,
                           int *nargs, ts_error *err);

/* Reorder src md -> dst md, pre-built (used for inputs whose layout is not
 * the primitive's, and for copying a residual operand into dst). */
typedef struct xd_reorder {
    dnnl_primitive_t prim; /* NULL: plain memcpy of `bytes` (same md), or cl_c > 0 */
    size_t bytes;
    xd_mem src, dst;
    /* plain NCHW -> channels-last with 3 or 4 channels (an RGB input
     * before a network's first conv): tsopt's own loop (dnnl_util.c) */
    int64_t cl_n, cl_c, cl_hw;
    int cl_size; /* its element bytes: 4 (f32) or 1 (u8/s8) */
    /* float32 channels-last -> 16-channel blocks (dnnl_util.c): the
     * blocks per pixel (0: not this reorder), pixels per image, images,
     * and whether the pixels are split between threads */
    int64_t bl_cb, bl_hw, bl_n;
    bool bl_par;
} xd_reorder;
ts_status xd_reorder_init(xd_reorder *r, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, const xplan *p,
                          int n, ts_error *err);
void xd_reorder_run(xd_reorder *r, const void *from, void *to, dnnl_stream_t stream);
void xd_reorder_fini(xd_reorder *r);

/* Buffer id holding a constant copy of `bytes` laid out as md (owned data,
 * XB_CONST); -1 on allocation failure. */
int xd_const_buf(xplan *p, const dnnl_memory_desc_t *md, const ts_shape *shape, void *data);

#endif
