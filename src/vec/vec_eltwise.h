/* The element-wise program shared by lower_chain.c (lowering a chain of
 * element-wise nodes to it), vec_fuse.c (its step) and vec_eltwise.c
 * (running it).
 *
 * A step computes one output tensor as a short straight-line program: each
 * instruction reads its operands (the running result "acc", or an external
 * input broadcast onto the output) and overwrites acc.  It runs over blocks
 * of the output that stay in L1 cache, so a chain of k nodes costs one pass
 * over memory instead of k. */
#ifndef TS_VEC_VEC_ELTWISE_H
#define TS_VEC_VEC_ELTWISE_H

#include "vec/vec.h"

#define XV_MAXIN 8    /* external inputs of one fused step */
#define XV_MAXPROG 24 /* instructions of one fused step */
#define XV_ACC (-1)   /* operand: the running result */
#define XV_BLK 512    /* elements per block */

typedef enum xv_opc {
    /* binary on two operands */
    XO_ADD, XO_SUB, XO_MUL, XO_DIV, XO_POW, XO_MAX, XO_MIN, XO_PRELU, XO_FMOD,
    /* operand a with the immediate p0 */
    XO_ADD_S, XO_SUB_S, XO_RSUB_S, XO_MUL_S, XO_DIV_S, XO_RDIV_S, XO_POW_S, XO_MAX_S, XO_MIN_S, XO_FMOD_S, XO_RFMOD_S,
    /* unary on operand a (p0/p1: parameters) */
    XO_COPY, XO_SQUARE, XO_RELU, XO_NEG, XO_ABS, XO_SQRT, XO_EXP, XO_LOG, XO_RECIP, XO_ERF, XO_SIGMOID, XO_TANH,
    XO_LEAKY, XO_HSIG, XO_HSWISH, XO_CLIP, XO_GELU_ERF, XO_GELU_TANH,
    /* acc rounded to float16 / bfloat16 (a half plan's 16-bit value, half.c) */
    XO_ROUND_F16, XO_ROUND_BF16,
} xv_opc;

typedef struct xv_instr {
    xv_opc opc;
    int a, b; /* XV_ACC or an external input index */
    float p0, p1;
} xv_instr;

typedef struct xv_prog {
    int nins;
    xv_instr ins[XV_MAXPROG];
    int next; /* external inputs */
    /* Output shape with size-1 dims dropped and dims merged wherever every
     * operand is contiguous across them: rows of `len` elements in which
     * each input is either contiguous (inner stride 1) or one value. */
    int rank;
    int64_t dims[TS_MAX_RANK];
    int64_t stride[XV_MAXIN][TS_MAX_RANK];
    int64_t nrows, len, numel;
    /* rows run together in one block (vec_eltwise.c prog_rows) when a
     * row is at most half a block: XV_BLK / len of them; 1: a row at a
     * time (TSOPT_SKIP=eltwise.rows) */
    int64_t rows_per;
    int threads;
    bool rounded; /* a half plan's result left on the 16-bit grid (half.step need not round it) */
    int round_on_load; /* value id + 1 of a 16-bit input the program rounds as it reads it (half.c: its
                          producer's step does not), 0: none */
    int inplace; /* input index + 1 whose storage the result is written over (vec_fuse.c, half plans): each
                    block of it is copied aside before the block runs, 0: none */
} xv_prog;

/* An element-wise chain lowered to one program (lower_chain.c): the
 * program and its external inputs' value ids (prog.next of them). */
typedef struct xv_chain {
    xv_prog prog;
    int ext[XV_MAXIN];
} xv_chain;

/* Appends node n's instruction(s) to pr (lower_chain.c).  `cur` is the value held in acc
 * (-1 for the first node); external inputs are added to ext[] (value ids,
 * pr->next of them).  false: the node is not supported (pr is then
 * unspecified: work on a copy). */
bool xv_lower_node(const xplan *p, int n, int cur, xv_prog *pr, int *ext);

/* Fills the collapsed geometry from the output and input shapes. */
void xv_geometry(xv_prog *pr, const ts_shape *out, const ts_shape *const *in);
/* The same for an output stored in the dense permuted layout `order`
 * (vec_layout.h): inputs with in_order[j] are stored so too (the output's
 * shape), the others plain (broadcast as NumPy does). */
void xv_geometry_order(xv_prog *pr, const ts_shape *out, const ts_shape *const *in, const int *order,
                       const bool *in_order);

void xv_prog_run(const xstep *s, void *const *in, void *const *out, void *scratch);
/* The program over n contiguous elements (at most XV_BLK) of y, operand j
 * at src[j] (dnnl_matmul.c: the chain after a rounded bias sum, per row). */
void xv_prog_block(const xv_prog *pr, float *y, const float *const *src, int64_t n);

#endif
