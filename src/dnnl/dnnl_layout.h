/* Choosing between oneDNN primitive descriptors that differ only in the
 * activation layouts they were asked for (dnnl_conv.c).  oneDNN answers
 * every layout request, but the kernel it finds for a pinned layout can be
 * far slower than the one it would pick freely: a 1x1 conv pinned to the
 * 8-channel blocked layout a grouped conv left gets jit:avx2 at half the
 * speed of brgconv_1x1:avx512_core on NHWC; a grouped conv reading NHWC
 * with a free dst gets the reference kernel.  So candidates are ranked by
 * the instruction set of the kernel oneDNN found. */
#ifndef TS_DNNL_DNNL_LAYOUT_H
#define TS_DNNL_DNNL_LAYOUT_H

#include "exec/exec.h"

/* 0 reference, 1 generic (gemm, sse4.1), 2 avx2, 3 avx512 / amx. */
int xd_pd_rank(const_dnnl_primitive_desc_t pd);

/* When `like` (an activation over shape like_s) is one of the layouts the
 * convolution kernels use (NHWC-style channels-last, or channels blocked
 * by 16, 8 or 4), writes the same layout over shape s into out and returns
 * true; false for anything else (plain, weights-like, unknown). */
bool xd_md_same_layout(const dnnl_memory_desc_t *like, const ts_shape *like_s, const ts_shape *s,
                       dnnl_memory_desc_t *out);

/* a and b lay out the same bytes the same way: equal, or a 4-D float32
 * tensor of 16 (8) channels as channels-last and as 16 (8)-channel blocks
 * (one block: the same array). */
bool xd_md_same_bytes(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b);

/* Whether oneDNN may run a forward convolution reading src (shape xs,
 * rank 4, float32) and writing `block`-channel blocks (16 or 8) on a
 * kernel other than its reference one: its jit kernels read the dst's own
 * blocks (or the same bytes: a 16-channel channels-last tensor is one
 * 16-channel block) or, first layers, plain NCHW; 16-channel blocks are
 * its AVX-512 kernels', 8-channel ones its AVX2 kernels'.  Channels-last
 * into blocks gets the reference kernel alone (test_dnnl_layout checks
 * each claim against the installed oneDNN). */
bool xd_conv_blocks_candidate(const dnnl_memory_desc_t *src, const ts_shape *xs, int block);

/* lower_concat.c: the channel block (16 or 8) in which value v's producer
 * writes v so that every Concat reading it takes it as a view of the
 * Concat's result (nothing copied), or 0 when some reader cannot. */
int xdc_slice_block(const xplan *p, int v);
/* Winograd F(2x2 / 4x4, 3x3) pays off for 2-D 3x3 stride-1 undilated
 * (dil: ONNX's, 1 = none) ungrouped convolutions with enough channels
 * (dnnl_conv.c's wino_worth: the measurements there). */
static inline bool xd_wino_shape(const ts_shape *x, const ts_shape *w, int64_t G, const int64_t *stride,
                                 const int64_t *dil)
{
    if (x->rank != 4 || w->rank != 4 || G != 1 || w->dims[2] != 3 || w->dims[3] != 3) return false;
    for (int i = 0; i < 2; i++)
        if (stride[i] != 1 || dil[i] != 1) return false;
    return w->dims[0] >= 32 && w->dims[1] >= 32 && x->dims[2] * x->dims[3] >= 7 * 7;
}
/* lower_post.c: every reader of value v is a Conv that runs on Winograd
 * (xd_wino_shape, winograd not skipped), so reads 16-channel blocks
 * whatever layout v is written in, or a 1x1 conv whose result (through a
 * Relu) only such convs read. */
bool xlow_blocks_readers(const xplan *p, int v);
/* lower_post.c: v's one reader is a Flatten or Reshape (reads it plain). */
bool xlow_flatten_reader(const xplan *p, int v);
/* s (rank 4, float32) in 16- or 8-channel blocks (dense_concat.c). */
void xdc_block_md(dnnl_memory_desc_t *md, const ts_shape *s, int block);

#endif
