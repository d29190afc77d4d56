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

/* lower_concat.c: the channel block (16 or 8) in which value v's producer
 * writes v so that every Concat reading it takes it as a view of the
 * Concat's result (nothing copied), or 0 when some reader cannot. */
int xdc_slice_block(const xplan *p, int v);
/* s (rank 4, float32) in 16- or 8-channel blocks (dense_concat.c). */
void xdc_block_md(dnnl_memory_desc_t *md, const ts_shape *s, int block);

#endif
